//! Restarting the worker on a confirmed switch, with real processes: the sidecar binary, a
//! stand-in worker under `hub-follower exec`, and a stand-in kubelet that restarts it.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::worker::{Health, Kubelet, Temper, Worker};
use support::{Hubs, Sidecar};

fn restart_args(hubs: &Hubs, mode: &str, worker: &str, extra: &[&str]) -> Vec<String> {
    let mut args = hubs.args("200ms", "150ms", 2);
    args.push(format!("--restart-mode={mode}"));
    args.push(format!("--worker-process={worker}"));
    args.push("--restart-jitter=0s".into());
    args.push("--restart-cooldown=0s".into());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn outcome(s: &Sidecar, mode: &str, outcome: &str) -> f64 {
    s.metric(&format!(
        "kubeslice_worker_hub_worker_restarts_total{{mode=\"{mode}\",outcome=\"{outcome}\"}}"
    ))
}

fn phase(s: &Sidecar) -> String {
    s.status()["restart"]["phase"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn total_restarts(s: &Sidecar) -> f64 {
    support::metric_sum(
        &s.get("/metrics").1,
        "kubeslice_worker_hub_worker_restarts_total",
    )
}

/// A sidecar and a worker that has started on the primary.
fn setup(hubs: &Hubs, args: Vec<String>, worker: &Worker) -> (Sidecar, Kubelet) {
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let sidecar = Sidecar::spawn(&args, &hubs.handoff_dir());
    let handoff = hubs.handoff_dir();
    let w = worker.clone();
    let kubelet = Kubelet::run(move || w.command(&handoff));
    sidecar.wait_until("the worker started", Duration::from_secs(20), |_| {
        worker.starts().len() == 1
    });
    assert_eq!(worker.starts()[0].1, hubs.primary.endpoint());
    (sidecar, kubelet)
}

fn fail_over(hubs: &Hubs) {
    hubs.both_claim(&hubs.secondary, "ctrl-b");
}

#[tokio::test(flavor = "multi_thread")]
async fn signal_mode_signals_once_and_the_worker_restarts_on_the_new_hub() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-sig", Temper::Obliging);
    let (s, _kubelet) = setup(
        &hubs,
        restart_args(&hubs, "signal", &worker.name, &[]),
        &worker,
    );
    assert_eq!(s.get("/worker/livez").0, 200);

    fail_over(&hubs);
    s.wait_until("the restart is verified", Duration::from_secs(20), |s| {
        phase(s) == "verified"
    });
    let starts = worker.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[1].1, hubs.secondary.endpoint());
    assert_eq!(worker.signals(), [format!("{} TERM", starts[0].0)]);
    assert_eq!(outcome(&s, "signal", "signalled"), 1.0);
    assert_eq!(outcome(&s, "signal", "verified"), 1.0);
    assert_eq!(
        s.metric("kubeslice_worker_hub_worker_on_current_decision"),
        1.0
    );
    assert_eq!(s.get("/worker/livez").0, 200);

    // Later rounds that confirm the same hub never signal again.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(worker.signals().len(), 1);
    assert_eq!(worker.starts().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sidecar_that_crashed_between_publishing_a_switch_and_the_restart_finishes_the_move() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-crash", Temper::Obliging);
    // A long jitter holds the restart back, so the crash lands between publish and restart.
    let args = restart_args(&hubs, "signal", &worker.name, &["--restart-jitter=1h"]);
    let (mut s, _kubelet) = setup(&hubs, args, &worker);
    fail_over(&hubs);
    s.wait_until("the switch is published", Duration::from_secs(10), |s| {
        s.handoff().is_some_and(|h| h["reason"] == "switch")
    });
    support::signal(s.pid(), "KILL");
    let _ = s.terminate();
    assert!(worker.signals().is_empty());

    let args = restart_args(&hubs, "signal", &worker.name, &[]);
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("the restart is verified", Duration::from_secs(20), |s| {
        phase(s) == "verified"
    });
    assert_eq!(s.handoff().unwrap()["reason"], "resumed");
    assert_eq!(worker.signals().len(), 1);
    assert_eq!(worker.starts()[1].1, hubs.secondary.endpoint());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_that_ignores_sigterm_is_killed_after_kill_after() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-stubborn", Temper::Stubborn);
    let args = restart_args(&hubs, "signal", &worker.name, &["--kill-after=1s"]);
    let (s, _kubelet) = setup(&hubs, args, &worker);
    fail_over(&hubs);
    s.wait_until("the restart is verified", Duration::from_secs(20), |s| {
        phase(s) == "verified"
    });
    assert_eq!(outcome(&s, "signal", "signalled"), 1.0);
    assert_eq!(outcome(&s, "signal", "killed"), 1.0);
    assert!(
        worker.signals()[0].ends_with("TERM ignored"),
        "{:?}",
        worker.signals()
    );
    assert_eq!(worker.starts()[1].1, hubs.secondary.endpoint());
}

#[tokio::test(flavor = "multi_thread")]
async fn no_restart_at_startup_on_resume_or_for_rounds_that_do_not_switch() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-calm", Temper::Obliging);
    // Five confirmations: the divergent rounds below can never add up to a switch, however
    // slowly this test reacts.
    let args = restart_args(&hubs, "signal", &worker.name, &["--confirmations=5"]);
    let (mut s, _kubelet) = setup(&hubs, args.clone(), &worker);
    // Divergent rounds, then back: no switch, so no restart.
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    s.wait_until("a switch pending", Duration::from_secs(10), |s| {
        s.status()["pending"]["count"]
            .as_u64()
            .is_some_and(|c| c >= 1)
    });
    hubs.both_claim(&hubs.primary, "ctrl-a");
    s.wait_until("the pending switch dropped", Duration::from_secs(10), |s| {
        s.status()["pending"].is_null()
    });
    s.wait_rounds(3);
    assert_eq!(s.handoff().unwrap()["generation"], 1);
    assert_eq!(s.terminate().0.code(), Some(0));

    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("the resumed decision", Duration::from_secs(10), |s| {
        s.handoff().is_some_and(|h| h["reason"] == "resumed")
    });
    s.wait_rounds(5);
    assert_eq!(total_restarts(&s), 0.0);
    assert!(worker.signals().is_empty(), "{:?}", worker.signals());
    assert_eq!(worker.starts().len(), 1);
    assert_eq!(phase(&s), "idle");
}

#[tokio::test(flavor = "multi_thread")]
async fn switches_inside_the_cooldown_are_published_at_once_and_coalesced_into_one_restart() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-cool", Temper::Obliging);
    let mut args = restart_args(&hubs, "signal", &worker.name, &["--restart-cooldown=4s"]);
    args.push("--confirmations=1".into());
    let (s, _kubelet) = setup(&hubs, args, &worker);
    let generation = |s: &Sidecar| s.handoff().unwrap()["generation"].as_u64().unwrap();

    fail_over(&hubs); // switch 1: acted on at once
    s.wait_until("the first restart", Duration::from_secs(10), |_| {
        worker.starts().len() == 2
    });
    let first = Instant::now();
    // Three more switches inside the cooldown: each is published at once...
    for (i, winner) in [&hubs.primary, &hubs.secondary, &hubs.primary]
        .into_iter()
        .enumerate()
    {
        hubs.both_claim(winner, "ctrl");
        let want = 3 + i as u64;
        s.wait_until("the switch is published", Duration::from_secs(5), |s| {
            generation(s) == want
        });
    }
    assert_eq!(worker.signals().len(), 1);
    s.wait_until(
        "the restart waits for the cooldown",
        Duration::from_secs(2),
        |s| s.status()["restart"]["waitingFor"] == "cooldown",
    );
    // ...and they become one restart when the cooldown ends, onto where they ended up.
    s.wait_until("the coalesced restart", Duration::from_secs(10), |_| {
        worker.starts().len() == 3
    });
    assert!(
        first.elapsed() >= Duration::from_millis(3500),
        "restarted {:?} after the first",
        first.elapsed()
    );
    assert_eq!(worker.starts()[2].1, hubs.primary.endpoint());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(worker.signals().len(), 2);
    assert_eq!(outcome(&s, "signal", "signalled"), 2.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn liveness_mode_fails_the_gate_until_the_worker_acknowledges() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-live", Temper::Obliging);
    let health = Health::start(200);
    let probe = format!("--worker-probe={}", health.target());
    let args = restart_args(
        &hubs,
        "liveness",
        &worker.name,
        &["--liveness-fail-for=60s", &probe],
    );
    let (s, kubelet) = setup(&hubs, args, &worker);
    // Before the switch /worker/livez answers for the worker's own probe.
    assert_eq!(s.get("/worker/livez").0, 200);
    assert_eq!(health.requests(), 1);
    fail_over(&hubs);
    s.wait_until("the gate fails", Duration::from_secs(10), |s| {
        s.get("/worker/livez").0 == 503
    });
    let (_, reason) = s.get("/worker/livez");
    assert!(
        reason.contains("secondary") && reason.lines().count() == 1,
        "{reason}"
    );
    // While the gate fails, the worker is not asked: the answer is the switch's.
    let asked = health.requests();
    assert_eq!(s.get("/worker/livez").0, 503);
    assert_eq!(health.requests(), asked);
    assert_eq!(outcome(&s, "liveness", "gate_failed"), 1.0);
    assert_eq!(
        s.metric("kubeslice_worker_hub_worker_on_current_decision"),
        0.0
    );
    assert!(worker.signals().is_empty(), "liveness mode must not signal");

    kubelet.kill_worker(); // what kubelet does after failed probes
    s.wait_until("the gate clears", Duration::from_secs(10), |s| {
        s.get("/worker/livez").0 == 200
    });
    assert_eq!(outcome(&s, "liveness", "gate_cleared"), 1.0);
    assert_eq!(
        s.metric("kubeslice_worker_hub_worker_on_current_decision"),
        1.0
    );
    assert_eq!(worker.starts()[1].1, hubs.secondary.endpoint());
    assert!(
        health.requests() >= 2,
        "the gate's 200 is the worker's own again"
    );
    let ack: serde_json::Value =
        serde_json::from_slice(&std::fs::read(hubs.handoff_dir().join("worker-ack.json")).unwrap())
            .unwrap();
    assert_eq!(ack["generation"], 2);
    assert_eq!(ack["pid"], worker.starts()[1].0);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_acknowledgement_the_gate_clears_after_liveness_fail_for() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let args = restart_args(
        &hubs,
        "liveness",
        "no-such-worker",
        &["--liveness-fail-for=2s"],
    );
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    fail_over(&hubs);
    s.wait_until("the gate fails", Duration::from_secs(10), |s| {
        s.get("/worker/livez").0 == 503
    });
    let failed_at = Instant::now();
    s.wait_until("the gate clears", Duration::from_secs(10), |s| {
        s.get("/worker/livez").0 == 200
    });
    let failed_for = failed_at.elapsed();
    // Cleared by its bound (--liveness-fail-for), not before it. That the bound is what
    // cleared it is the phase below (unverified: no acknowledgement came); that it clears
    // exactly at the bound is proven on the machine's own clock
    // (`without_a_worker_or_permission_the_gate_is_the_safety_net`).
    assert!(failed_for > Duration::from_millis(1500), "{failed_for:?}");
    s.wait_until("unverified", Duration::from_secs(5), |s| {
        phase(s) == "unverified"
    });
    assert_eq!(outcome(&s, "liveness", "unverified"), 1.0);
    assert_eq!(
        s.metric("kubeslice_worker_hub_worker_on_current_decision"),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn none_mode_touches_no_process_and_counts_observed() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-none", Temper::Obliging);
    let (s, _kubelet) = setup(
        &hubs,
        restart_args(&hubs, "none", &worker.name, &[]),
        &worker,
    );
    fail_over(&hubs);
    s.wait_until("observed", Duration::from_secs(10), |s| {
        outcome(s, "none", "observed") == 1.0
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(worker.signals().is_empty());
    assert_eq!(worker.starts().len(), 1);
    assert!(
        s.logs().contains("would restart the worker"),
        "{}",
        s.logs()
    );
    assert_eq!(total_restarts(&s), 1.0);
    // Observe only: the gate is not touched either.
    assert_eq!(s.get("/worker/livez").0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_worker_is_not_found_and_the_gate_stays_failing() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let args = restart_args(&hubs, "signal", "no-such-worker-xyz", &[]);
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    fail_over(&hubs);
    s.wait_until("not found", Duration::from_secs(10), |s| {
        outcome(s, "signal", "not_found") == 1.0
    });
    assert_eq!(s.get("/worker/livez").0, 503);
    assert!(s.logs().contains("no worker process found"), "{}", s.logs());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_of_another_user_gives_permission_denied() {
    let is_root = support::is_root();
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if !is_root || !setpriv {
        support::skip(&format!("needs root and setpriv to run the sidecar and the worker as two other users (root={is_root}, setpriv={setpriv})"));
        return;
    }
    let hubs = Hubs::start().await;
    // Both unprivileged users must reach the files: make the scratch tree world-readable.
    let _ = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(hubs.dir.path())
        .status();
    let mut p = hubs.dir.path().to_path_buf();
    while p.pop() {
        let _ = Command::new("chmod").arg("a+x").arg(&p).status();
    }
    let name = "stand-in-other-user";
    let link = hubs.dir.path().join(name);
    std::os::unix::fs::symlink("/bin/sleep", &link).unwrap();
    let mut worker = Command::new("setpriv");
    worker
        .args(["--reuid=65533", "--regid=65533", "--clear-groups"])
        .arg(&link)
        .arg("60")
        .env_clear();
    let mut worker = worker.spawn().unwrap();
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let listen = support::free_port();
    let mut args = restart_args(&hubs, "signal", name, &[]);
    args.push(format!("--listen={listen}"));
    let sidecar = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(support::binary())
        .args(&args)
        .arg("--log-format=text")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut sidecar = Guard(Some(sidecar));
    let get = |path: &str| {
        support::request(
            listen,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let metric = |text: &str| {
        support::metric_value(text, "kubeslice_worker_hub_worker_restarts_total{mode=\"signal\",outcome=\"permission_denied\"}")
    };
    let mut switched = false;
    while Instant::now() < deadline {
        if !switched && get("/readyz").is_some_and(|r| r.0 == 200) {
            fail_over(&hubs);
            switched = true;
        }
        if get("/metrics").and_then(|(_, m)| metric(&m)) == Some(1.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let denied = get("/metrics").and_then(|(_, m)| metric(&m));
    let livez = get("/worker/livez").map(|r| r.0);
    let mut child = sidecar.0.take().unwrap();
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        worker.try_wait().unwrap(),
        None,
        "the other user's process must survive"
    );
    let _ = worker.kill();
    assert_eq!(denied, Some(1.0), "{logs}");
    assert_eq!(livez, Some(503));
    assert!(
        logs.contains("permission denied") && logs.contains("KILL capability"),
        "{logs}"
    );
}

/// Kills the sidecar if the test fails before it does.
struct Guard(Option<std::process::Child>);
impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
        }
    }
}

#[test]
fn exec_with_nothing_published_exits_1_after_wait() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new(support::binary())
        .args(["exec", "--wait=700ms"])
        .arg(format!("--handoff-dir={}", dir.path().display()))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Not before --wait; that it ends at all is the event this test waits on.
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(
        stderr.contains("no decision was published")
            && stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
}

#[test]
fn exec_exports_the_decision_and_becomes_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let handoff = hub_follower::handoff::Handoff {
        endpoint: "https://10.1.80.12:6443".into(),
        ..support::builders::handoff(
            hub_follower::verdict::HubId::SECONDARY,
            9,
            hub_follower::resolver::Reason::Switch,
        )
    };
    hub_follower::handoff::publish(dir.path(), &handoff).unwrap();
    let out = Command::new(support::binary())
        .args(["exec", "--kubeconfig"])
        .arg(format!("--handoff-dir={}", dir.path().display()))
        .args([
            "--",
            "/bin/sh",
            "-c",
            "echo $$ $HUB_HOST_ENDPOINT $HUB_TOKEN_FILE $HUB_CA_FILE $KUBECONFIG",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = printed.split_whitespace().collect();
    assert_eq!(
        &fields[1..4],
        ["https://10.1.80.12:6443", "/t/token", "/t/ca.crt"]
    );
    assert_eq!(
        fields[4],
        dir.path().join("kubeconfig").display().to_string()
    );
    let ack = hub_follower::handoff::read_ack(dir.path()).unwrap();
    assert_eq!(ack.generation, 9);
    // exec(2): the command runs as the wrapper's own PID.
    assert_eq!(ack.pid.to_string(), fields[0]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn install_copies_a_runnable_binary() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("bin/hub-follower");
    let out = Command::new(support::binary())
        .arg("install")
        .arg(&dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let version = Command::new(&dest).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("hub-follower "));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stray_process_with_the_workers_name_is_never_signalled_nor_taken_for_the_worker() {
    let hubs = Hubs::start().await;
    let worker = Worker::new(hubs.dir.path(), "stand-in-twin", Temper::Obliging);
    // Processes with the worker's very name, in the same PID namespace, that are not it.
    let strays = Worker::new(
        &hubs.dir.path().join("strays"),
        "stand-in-twin",
        Temper::Obliging,
    );
    let mut before = strays.bare_command().spawn().unwrap();
    let args = restart_args(
        &hubs,
        "signal",
        &worker.name,
        &["--restart-verify-timeout=3s"],
    );
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    // The worker runs once, under the exec wrapper; nobody restarts it.
    let mut w = worker.command(&hubs.handoff_dir()).spawn().unwrap();
    s.wait_until(
        "the worker and a stray started",
        Duration::from_secs(20),
        |_| worker.starts().len() == 1 && strays.starts().len() == 1,
    );
    fail_over(&hubs);
    s.wait_until("the worker signalled", Duration::from_secs(10), |_| {
        worker.signals().len() == 1
    });
    let _ = w.wait();
    // A new process with the worker's name appears after the signal: under the old rule it
    // was taken for the restarted worker. The acknowledgement says it is not.
    let mut after = strays.bare_command().spawn().unwrap();
    s.wait_until("the restart judged", Duration::from_secs(20), |s| {
        outcome(s, "signal", "unverified") == 1.0
    });
    assert_eq!(outcome(&s, "signal", "verified"), 0.0);
    assert_eq!(outcome(&s, "signal", "signalled"), 1.0);
    assert!(strays.signals().is_empty(), "{:?}", strays.signals());
    assert_eq!(before.try_wait().unwrap(), None);
    assert_eq!(after.try_wait().unwrap(), None);
    let _ = before.kill();
    let _ = after.kill();
    let _ = before.wait();
    let _ = after.wait();
}

#[tokio::test(flavor = "multi_thread")]
async fn liveness_mode_answers_for_the_worker_s_own_probe_after_its_grace() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let mut health = Health::start(200);
    let probe = format!("--worker-probe={}", health.target());
    let strict = Sidecar::spawn(
        &restart_args(&hubs, "liveness", "no-such-worker", &[&probe]),
        &hubs.handoff_dir(),
    );
    let other = tempfile::tempdir().unwrap();
    let patient_args: Vec<String> = restart_args(
        &hubs,
        "liveness",
        "no-such-worker",
        &[&probe, "--worker-probe-grace=1h"],
    )
    .into_iter()
    .map(|a| match a.starts_with("--handoff-dir=") {
        true => format!("--handoff-dir={}", other.path().display()),
        false => a,
    })
    .collect();
    let patient = Sidecar::spawn(&patient_args, other.path());
    for (s, dir) in [
        (&strict, hubs.handoff_dir()),
        (&patient, other.path().to_path_buf()),
    ] {
        s.wait_until("startup", Duration::from_secs(10), |s| {
            s.handoff().is_some()
        });
        // No worker has acknowledged yet (the exec wrapper would still wait): not asked.
        let asked = health.requests();
        health.set(500);
        assert_eq!(s.get("/worker/livez").0, 200);
        assert_eq!(health.requests(), asked);
        health.set(200);
        let ack = hub_follower::handoff::Ack {
            generation: s.handoff().unwrap()["generation"].as_u64().unwrap(),
            pid: 4242,
            started_at: "2026-12-03T12:00:00Z".into(),
            hub: None,
        };
        hub_follower::handoff::write_ack(&dir, &ack).unwrap();
        assert_eq!(s.get("/worker/livez").0, 200);
    }
    assert_eq!(health.requests(), 2);
    let dead = "kubeslice_worker_hub_worker_probe_failures_total{verdict=\"dead\"}";
    let tolerated = "kubeslice_worker_hub_worker_probe_failures_total{verdict=\"tolerated\"}";
    assert_eq!(strict.metric(dead), 0.0);

    // The worker's /healthz fails: at once with no grace, not yet within an hour's.
    health.set(500);
    let (code, why) = strict.get("/worker/livez");
    assert_eq!(code, 503, "{why}");
    assert!(
        why.contains("own liveness check") && why.contains("answered 500"),
        "{why}"
    );
    assert_eq!(strict.metric(dead), 1.0);
    assert_eq!(patient.get("/worker/livez").0, 200);
    assert_eq!(patient.metric(tolerated), 1.0);
    assert_eq!(patient.metric(dead), 0.0);

    // It recovers, then its port closes: a refused connection is a failure too.
    health.set(200);
    assert_eq!(strict.get("/worker/livez").0, 200);
    health.stop();
    let (code, why) = strict.get("/worker/livez");
    assert_eq!(code, 503, "{why}");
    assert!(why.contains(&health.target()), "{why}");
    assert!(!strict.logs().contains("panicked"), "{}", strict.logs());
}
