//! Local faults and hostile clients, against the real binary: the handoff directory refusing
//! writes, the sidecar killed mid-publish, a Standby whose credential is rejected, abuse of the
//! HTTP server, and an acknowledgement that tries to point the sidecar at another process.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use support::{Hubs, Sidecar};

fn published(s: &Sidecar) -> (String, u64) {
    let h = s.handoff().unwrap();
    (
        h["hub"].as_str().unwrap().to_string(),
        h["generation"].as_u64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_dir_that_refuses_writes_keeps_the_previous_decision_and_recovers() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = Sidecar::spawn(&hubs.args("200ms", "150ms", 1), &hubs.handoff_dir());
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    // A non-empty folder where `..data` must be swapped makes every publish fail at the swap,
    // whatever user the test runs as (a read-only mode would not stop root).
    let data = hubs.handoff_dir().join("..data");
    let target = std::fs::read_link(&data).unwrap();
    std::fs::remove_file(&data).unwrap();
    std::fs::create_dir_all(data.join("blocker")).unwrap();
    std::os::unix::fs::symlink(
        hubs.handoff_dir().join(&target).join("active-hub.json"),
        data.join("active-hub.json"),
    )
    .unwrap();
    let before = published(&s);

    hubs.both_claim(&hubs.secondary, "ctrl-b");
    s.wait_until("write errors are counted", Duration::from_secs(10), |s| {
        s.metric("kubeslice_worker_hub_handoff_write_errors_total") >= 2.0
    });
    assert_eq!(
        published(&s),
        before,
        "the previous decision must stay whole"
    );
    assert_eq!(s.get("/readyz").0, 200);
    assert!(
        s.logs().contains("could not publish the decision"),
        "{}",
        s.logs()
    );

    // (Removing the blocker leaves the name dangling until the next publish.)
    std::fs::remove_dir_all(&data).unwrap();
    s.wait_until(
        "the switch is published once writable",
        Duration::from_secs(10),
        |s| s.handoff().is_some_and(|h| h["hub"] == "secondary"),
    );
    assert_eq!(
        published(&s).1,
        before.1 + 1,
        "a failed write must not use up a generation"
    );
}

/// A sidecar whose first publish has failed: a non-empty folder sits where `..data` must go.
fn started_unable_to_write(hubs: &Hubs) -> Sidecar {
    hubs.both_claim(&hubs.primary, "ctrl-a");
    std::fs::create_dir_all(hubs.handoff_dir().join("..data/blocker")).unwrap();
    let s = Sidecar::spawn(&hubs.args("200ms", "150ms", 1), &hubs.handoff_dir());
    s.wait_until("a failed write", Duration::from_secs(10), |s| {
        s.metric("kubeslice_worker_hub_handoff_write_errors_total") >= 1.0
    });
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_fails_until_the_first_decision_is_on_disk() {
    let hubs = Hubs::start().await;
    let s = started_unable_to_write(&hubs);
    assert_eq!(s.get("/readyz").0, 503);
    std::fs::remove_dir_all(hubs.handoff_dir().join("..data")).unwrap();
    s.wait_until("ready", Duration::from_secs(10), |s| {
        s.get("/readyz").0 == 200
    });
    assert_eq!(published(&s), ("primary".into(), 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_at_random_points_never_leaves_parts_of_two_decisions() {
    let hubs = Hubs::start().await;
    // Claims that flip every few milliseconds and one confirmation: a publish nearly every round.
    let flipping = {
        let (a, b) = (hubs.primary.endpoint(), hubs.secondary.endpoint());
        let (p, s) = (hubs.primary.state.clone(), hubs.secondary.state.clone());
        tokio::spawn(async move {
            for i in 0u64.. {
                let endpoint = if i % 2 == 0 { &a } else { &b };
                let claim = serde_json::json!({"endpoint": endpoint, "identity": "x", "lastUpdated": jiff::Timestamp::now().to_string()});
                p.lock().unwrap().active_controller = Some(claim.clone());
                s.lock().unwrap().active_controller = Some(claim);
                tokio::time::sleep(Duration::from_millis(7)).await;
            }
        })
    };
    let mut args = hubs.args("20ms", "15ms", 1);
    args.push("--restart-mode=none".into());
    let mut rng = fastrand::Rng::with_seed(7);
    let mut last_generation = 0;
    let iterations = 25;
    for i in 0..iterations {
        let mut s = Sidecar::spawn(&args, &hubs.handoff_dir());
        std::thread::sleep(Duration::from_millis(rng.u64(0..300)));
        support::signal(s.pid(), "KILL");
        let _ = s.terminate();
        let dir = hubs.handoff_dir();
        let Ok(json) = std::fs::read(dir.join("active-hub.json")) else {
            assert_eq!(i, 0, "the decision vanished after iteration {i}");
            continue;
        };
        let h: serde_json::Value = serde_json::from_slice(&json)
            .unwrap_or_else(|e| panic!("iteration {i}: torn active-hub.json: {e}"));
        let endpoint = h["endpoint"].as_str().unwrap();
        let env = std::fs::read_to_string(dir.join("active-hub.env")).unwrap();
        let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).unwrap();
        assert!(
            env.contains(&format!("HUB_HOST_ENDPOINT='{endpoint}'")),
            "iteration {i}: env from another decision:\n{env}\n{h}"
        );
        assert!(
            kubeconfig.contains(&format!("server: \"{endpoint}\"")),
            "iteration {i}: kubeconfig from another decision"
        );
        let generation = h["generation"].as_u64().unwrap();
        assert!(
            generation >= last_generation,
            "iteration {i}: generation went back from {last_generation} to {generation}"
        );
        last_generation = generation;
    }
    // What the kills left half-written is pruned by the next publish that completes. (A
    // sidecar killed before its first publish completes adds to the pile, so the count
    // between kills depends on the machine's speed; after a completed publish it does not.)
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("a publish completes", Duration::from_secs(20), |s| {
        s.handoff()
            .and_then(|h| h["generation"].as_u64())
            .is_some_and(|g| g > last_generation)
    });
    let versions = || {
        std::fs::read_dir(hubs.handoff_dir())
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("..") && n != "..data"
            })
            .count()
    };
    // The claims flip every 7 ms, so a publish may be under way: its folder, and the current.
    assert!(versions() <= 2, "old versions pile up: {}", versions());
    flipping.abort();
    assert!(
        last_generation > iterations,
        "too few publishes to prove anything: {last_generation}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_standby_credential_is_visible_and_harmless() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    std::fs::write(hubs.creds("secondary").0, "an-old-token\n").unwrap();
    let s = Sidecar::spawn(&hubs.args("200ms", "150ms", 3), &hubs.handoff_dir());
    let unauthorized = |s: &Sidecar| {
        s.metric(
            "kubeslice_worker_hub_probe_errors_total{hub=\"secondary\",reason=\"unauthorized\"}",
        )
    };
    s.wait_until("the 401s are counted", Duration::from_secs(10), |s| {
        unauthorized(s) >= 3.0
    });
    assert_eq!(published(&s), ("primary".into(), 1));
    assert_eq!(
        s.metric(
            "kubeslice_worker_hub_probe_errors_total{hub=\"primary\",reason=\"unauthorized\"}"
        ),
        0.0
    );
    let status = s.status();
    assert_eq!(status["hubs"]["secondary"]["reason"], "unauthorized");
    assert_eq!(status["hubs"]["primary"]["verdict"], "claim");
    assert!(
        s.metric("kubeslice_worker_hub_last_probe_success_timestamp_seconds{hub=\"secondary\"}")
            == 0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_abuse_does_not_starve_health_checks_or_the_poll_loop() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = Sidecar::spawn(&hubs.args("200ms", "150ms", 3), &hubs.handoff_dir());
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });

    // Slowloris: idle connections, and ones that dribble half a request.
    let mut held = Vec::new();
    for i in 0..200 {
        if let Ok(mut c) = TcpStream::connect(s.listen) {
            if i % 2 == 0 {
                let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ");
            }
            held.push(c);
        }
    }
    // Garbage, oversized headers, and a flood of bad requests.
    let huge = format!(
        "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let oversized = support::request(s.listen, &huge);
    assert!(
        oversized
            .as_ref()
            .is_none_or(|(code, _)| *code == 431 || *code == 400),
        "{oversized:?}"
    );
    for i in 0..1000 {
        let raw = match i % 3 {
            0 => "\x00\x01\x02 garbage\r\n\r\n".to_string(),
            1 => "DELETE /healthz HTTP/1.1\r\nConnection: close\r\n\r\n".to_string(),
            _ => format!("GET /nope-{i} HTTP/1.1\r\nConnection: close\r\n\r\n"),
        };
        if let Ok(mut c) = TcpStream::connect(s.listen) {
            let _ = c.write_all(raw.as_bytes());
        }
    }
    s.wait_until(
        "/healthz answers under abuse",
        Duration::from_secs(10),
        |s| s.try_get("/healthz").map(|r| r.0) == Some(200),
    );
    // The poll loop goes on, and its reads still complete: no hub timed out (the probe
    // timeout is 150 ms) while the server was being abused.
    s.wait_rounds(3);
    let st = s.status();
    for hub in ["primary", "secondary"] {
        assert_eq!(st["hubs"][hub]["verdict"], "claim", "{st:#}");
    }
    let rss_kib: u64 = std::fs::read_to_string(format!("/proc/{}/status", s.pid()))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap();
    assert!(rss_kib < 32 * 1024, "RSS {rss_kib} KiB under abuse");
    drop(held);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_acknowledgement_cannot_point_the_sidecar_at_another_process() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let mut bystander = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let s = Sidecar::spawn(
        &[
            hubs.args("200ms", "150ms", 1),
            vec![
                "--restart-mode=signal".into(),
                "--worker-process=no-such-worker".into(),
                "--restart-jitter=0s".into(),
            ],
        ]
        .concat(),
        &hubs.handoff_dir(),
    );
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    let ack = serde_json::json!({"generation": 999, "pid": bystander.id(), "startedAt": "2026-12-02T10:00:00Z", "hub": "primary"});
    std::fs::write(hubs.handoff_dir().join("worker-ack.json"), ack.to_string()).unwrap();
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    s.wait_until("the switch", Duration::from_secs(10), |s| {
        published(s).0 == "secondary"
    });
    s.wait_until("the action", Duration::from_secs(10), |s| {
        s.metric(
            "kubeslice_worker_hub_worker_restarts_total{mode=\"signal\",outcome=\"not_found\"}",
        ) == 1.0
    });
    assert_eq!(
        bystander.try_wait().unwrap(),
        None,
        "the process named in the ack was signalled"
    );
    let _ = bystander.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_switch_before_the_first_decision_reached_the_disk_is_still_the_first_decision() {
    let hubs = Hubs::start().await;
    let s = started_unable_to_write(&hubs);
    // The Active changes while nothing is on disk yet: the worker has started on nothing.
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    // Two more failed writes: at least one round after the change, which decided the switch.
    let errors = s.metric("kubeslice_worker_hub_handoff_write_errors_total");
    s.wait_until("rounds after the change", Duration::from_secs(10), |s| {
        s.metric("kubeslice_worker_hub_handoff_write_errors_total") >= errors + 2.0
    });
    assert!(s.status()["published"].is_null());
    std::fs::remove_dir_all(hubs.handoff_dir().join("..data")).unwrap();
    s.wait_until("published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    let h = s.handoff().unwrap();
    assert_eq!(
        (
            h["hub"].as_str(),
            h["reason"].as_str(),
            h["generation"].as_u64()
        ),
        (Some("secondary"), Some("startup"), Some(1))
    );
    assert_eq!(s.metric("kubeslice_worker_hub_switches_total"), 0.0);
}

/// The published hub, once there is a decision.
fn hub_of(s: &Sidecar) -> Option<String> {
    s.handoff()
        .and_then(|h| h["hub"].as_str().map(String::from))
}

/// The sidecar under `strace`, which holds every fsync(2) up for a second: the pid of the
/// sidecar itself, to end it before strace in every outcome.
struct HeldUp {
    sidecar: Sidecar,
    inner: u32,
}

impl Drop for HeldUp {
    fn drop(&mut self) {
        support::signal(self.inner, "KILL");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn healthz_answers_while_a_publish_is_held_up_in_fsync() {
    let hubs = Hubs::start().await;
    healthz_while_fsync_is_held_up(&hubs, &[], |s| hub_of(s).as_deref() == Some("secondary")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn healthz_answers_while_a_move_request_is_held_up_in_fsync() {
    // In place, the switch's publish is followed by the synced write of move-request.json:
    // the restart side writes it on the blocking pool too.
    let hubs = Hubs::start().await;
    let request = hubs.handoff_dir().join("move-request.json");
    let in_place = [
        "--restart-mode=in-place",
        "--restart-jitter=0s",
        "--restart-cooldown=0s",
    ];
    healthz_while_fsync_is_held_up(&hubs, &in_place, |_| request.exists()).await;
}

/// The sidecar under `strace`, every fsync held up 1 s; a switch, and `/healthz` asked every
/// 20 ms until `done`: it answers at once throughout.
async fn healthz_while_fsync_is_held_up(
    hubs: &Hubs,
    extra: &[&str],
    done: impl Fn(&Sidecar) -> bool,
) {
    if Command::new("strace").arg("-V").output().is_err() {
        support::skip("strace is not installed (scripts/test installs it as root)");
        return;
    }
    hubs.both_claim(&hubs.primary, "ctrl-a");
    // The probe timeout (400 ms) is well under the held-up fsync (1 s): a stalled runtime
    // would show in /healthz and in the rounds.
    let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
    let sidecar = Sidecar::spawn_under(
        &[
            "strace",
            "-f",
            "-qq",
            "--seccomp-bpf",
            "-o",
            "/dev/null",
            "-e",
            "trace=fsync",
            "-e",
            "inject=fsync:delay_enter=1000000",
        ],
        &[
            hubs.args("500ms", "400ms", 1),
            vec!["--watch=false".into()],
            extra,
        ]
        .concat(),
        &hubs.handoff_dir(),
        &[],
    );
    let strace = sidecar.pid();
    let inner = support::children_of(strace)
        .first()
        .expect("strace's child: the sidecar")
        .0;
    let s = HeldUp { sidecar, inner };
    s.sidecar.wait_until(
        "the first decision, fsync by fsync",
        Duration::from_secs(30),
        |s| hub_of(s).as_deref() == Some("primary"),
    );
    // A switch: its publish is five held-up fsyncs, about 5 s, during which /healthz is
    // asked every 20 ms.
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let mut slowest = Duration::ZERO;
    let mut during = 0;
    let held_from = std::time::Instant::now();
    while !done(&s.sidecar) {
        let started = std::time::Instant::now();
        // 200, or 503 once the round holding the write is older than the loop's staleness
        // bound: either way an answer, at once, from a runtime that is not blocked.
        let code = s.sidecar.get("/healthz").0;
        assert!(code == 200 || code == 503, "{code}");
        slowest = slowest.max(started.elapsed());
        during += 1;
        std::thread::sleep(Duration::from_millis(20));
        assert!(during < 2000, "the switch was never published");
    }
    // Five held-up fsyncs: at least a few seconds of checks.
    assert!(
        during >= 100,
        "only {during} checks while the publish was held up"
    );
    // A ratio within this run: the slowest answer against the whole held-up publish. A
    // runtime blocked by the publish would answer no sooner than the fsync it waits on.
    let held = held_from.elapsed();
    assert!(
        slowest * 20 < held,
        "/healthz took {slowest:?} while a publish was held up for {held:?}"
    );
}
