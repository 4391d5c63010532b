//! The real binary against two fake hubs: the decision rule as an operator sees it, through the
//! handoff files, the HTTP endpoints and the exit status.

mod support;

use std::process::Command;
use std::time::Duration;

use support::fake_hub::Fault;
use support::{Hubs, Sidecar};

const ROGUE: &str = "https://203.0.113.9:6443";

/// The counts of the "pending confirmation" log lines, in order.
/// When each log line that contains `needle` was written, by the timestamp it starts with.
fn logged_at(s: &Sidecar, needle: &str) -> Vec<jiff::Timestamp> {
    s.logs()
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

fn pending_counts(s: &Sidecar) -> Vec<String> {
    s.logs()
        .lines()
        .filter(|l| l.contains("a switch is pending confirmation"))
        .filter_map(|l| {
            Some(
                l.split("count=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .to_string(),
            )
        })
        .collect()
}

fn generation(s: &Sidecar) -> u64 {
    s.handoff()
        .and_then(|h| h["generation"].as_u64())
        .unwrap_or(0)
}

fn published_hub(s: &Sidecar) -> String {
    s.handoff()
        .map(|h| h["hub"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Waits until both hubs have served `rounds` more reads: each round reads each hub once.
fn wait_rounds(s: &Sidecar, hubs: &Hubs, rounds: u64) {
    let (p0, s0) = (hubs.primary.requests(), hubs.secondary.requests());
    s.wait_until(
        &format!("{rounds} more rounds"),
        Duration::from_secs(20),
        |_| hubs.primary.requests() >= p0 + rounds && hubs.secondary.requests() >= s0 + rounds,
    );
    // The round's decision is published right after the reads: give it a moment.
    std::thread::sleep(Duration::from_millis(100));
}

fn started(hubs: &Hubs, confirmations: u32) -> Sidecar {
    let s = Sidecar::spawn(
        &hubs.args("400ms", "300ms", confirmations),
        &hubs.handoff_dir(),
    );
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn startup_publishes_the_claimed_hub_at_once() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let s = started(&hubs, 3);
    let h = s.handoff().unwrap();
    assert_eq!(h["hub"], "secondary");
    assert_eq!(h["reason"], "startup");
    assert_eq!(h["generation"], 1);
    assert_eq!(h["identity"], "ctrl-b");
    assert_eq!(h["endpoint"], hubs.secondary.endpoint());
    let (token, ca) = hubs.creds("secondary");
    assert_eq!(h["tokenFile"], token.display().to_string());
    assert_eq!(h["caFile"], ca.display().to_string());
    let env = std::fs::read_to_string(hubs.handoff_dir().join("active-hub.env")).unwrap();
    assert!(
        env.contains(&format!(
            "HUB_HOST_ENDPOINT='{}'",
            hubs.secondary.endpoint()
        )),
        "{env}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn startup_without_claims_publishes_the_primary_by_default_at_once_with_default_after_0s() {
    let hubs = Hubs::start().await;
    let mut args = hubs.args("400ms", "300ms", 3);
    args.push("--default-after=0s".into());
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["hub"].as_str(), h["reason"].as_str()),
        (Some("primary"), Some("default"))
    );
    // Hubs that publish nothing are normal (every non-HA deployment): not worth an info line.
    wait_rounds(&s, &hubs, 2);
    assert!(!s.logs().contains("no say"), "{}", s.logs());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failover_switches_after_exactly_n_confirming_rounds() {
    let mut hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = started(&hubs, 3);
    assert_eq!(published_hub(&s), "primary");

    // The Active goes dark; the Standby is promoted and claims itself.
    hubs.primary.stop();
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until("the switch is published", Duration::from_secs(20), |s| {
        published_hub(s) == "secondary"
    });

    let h = s.handoff().unwrap();
    assert_eq!(
        (h["reason"].as_str(), h["generation"].as_u64()),
        (Some("switch"), Some(2))
    );
    assert_eq!(pending_counts(&s), ["1", "2"], "{}", s.logs());
    s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
    assert_eq!(
        s.metric("kubeslice_worker_hub_active{hub=\"secondary\"}"),
        1.0
    );
    assert_eq!(
        s.metric("kubeslice_worker_hub_active{hub=\"primary\"}"),
        0.0
    );
    assert!(
        s.metric("kubeslice_worker_hub_probe_errors_total{hub=\"primary\",reason=\"connect\"}")
            >= 3.0
    );
}

/// A third hub from `--hubs`: read every round, followed when it is promoted, and shown under
/// its own name in the handoff, the metrics and `/status`; and the worker's environment names
/// its own credential files.
#[tokio::test(flavor = "multi_thread")]
async fn a_promotion_of_a_third_listed_hub_is_followed() {
    let hubs = Hubs::start().await;
    let third =
        support::fake_hub::FakeHub::start(support::NAMESPACE, support::CLUSTER, "third-token-e5f6")
            .await;
    let (token, ca) = third.write_credentials(&hubs.dir.path().join("third"));
    let claim_all = |endpoint: &str, identity: &str| {
        for hub in [&hubs.primary, &hubs.secondary, &third] {
            hub.claim(endpoint, identity);
        }
    };
    claim_all(&hubs.primary.endpoint(), "ctrl-a");
    let mut args = hubs.args("400ms", "300ms", 3);
    args.push(format!(
        "--hubs=hub-c={},token-file={},ca-file={}",
        third.endpoint(),
        token.display(),
        ca.display()
    ));
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    assert_eq!(published_hub(&s), "primary");
    let before = third.requests();

    // The Active moves to the third hub; the other two mirror its claim.
    claim_all(&third.endpoint(), "ctrl-c");
    s.wait_until("the switch is published", Duration::from_secs(20), |s| {
        published_hub(s) == "hub-c"
    });
    let h = s.handoff().unwrap();
    assert_eq!(h["reason"], "switch");
    assert_eq!(h["endpoint"], third.endpoint());
    assert_eq!(h["tokenFile"], token.display().to_string(), "{h}");
    assert!(
        third.requests() >= before + 3,
        "the third hub was not read each round"
    );
    assert_eq!(pending_counts(&s), ["1", "2"], "{}", s.logs());
    assert_eq!(s.metric("kubeslice_worker_hub_active{hub=\"hub-c\"}"), 1.0);
    assert_eq!(
        s.metric("kubeslice_worker_hub_active{hub=\"primary\"}"),
        0.0
    );
    assert!(
        s.metric("kubeslice_worker_hub_last_probe_success_timestamp_seconds{hub=\"hub-c\"}") > 0.0
    );
    let status = s.status();
    assert_eq!(
        status["hubs"]["hub-c"]["endpoint"],
        third.endpoint(),
        "{status}"
    );
    // The worker is started with the third hub's endpoint and credentials.
    let env = std::fs::read_to_string(hubs.handoff_dir().join("active-hub.env")).unwrap();
    assert!(env.contains(&third.endpoint()), "{env}");
    assert!(env.contains(&token.display().to_string()), "{env}");
}

#[tokio::test(flavor = "multi_thread")]
async fn confirming_reads_run_at_the_confirm_interval_and_still_need_n_rounds() {
    let mut hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let mut args = hubs.args("3s", "300ms", 3);
    args.push("--confirm-interval=200ms".into());
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    hubs.primary.stop();
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until("the switch", Duration::from_secs(15), |s| {
        published_hub(s) == "secondary"
    });
    assert_eq!(pending_counts(&s), ["1", "2"], "{}", s.logs());
    // The confirming rounds (the second and third) follow each other at the confirm
    // interval, not the poll interval: each gap, as the log stamps it, is under a third of
    // the 3 s poll interval.
    let mut steps = logged_at(&s, "a switch is pending confirmation");
    steps.extend(logged_at(&s, "reason=\"switch\""));
    assert_eq!(steps.len(), 3, "{}", s.logs());
    for gap in steps.windows(2).map(|w| w[1].duration_since(w[0])) {
        assert!(
            gap < jiff::SignedDuration::from_millis(1000),
            "confirming rounds {gap:#} apart at a 3 s poll interval"
        );
    }
    // Back to the poll interval once nothing is pending.
    let before = hubs.secondary.requests();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        hubs.secondary.requests() - before <= 1,
        "still reading at the confirm interval"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_divergent_round_does_not_switch() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = started(&hubs, 2);
    wait_rounds(&s, &hubs, 1);
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    wait_rounds(&s, &hubs, 1);
    hubs.both_claim(&hubs.primary, "ctrl-a");
    wait_rounds(&s, &hubs, 3);
    assert_eq!(published_hub(&s), "primary");
    assert_eq!(generation(&s), 1);
    assert!(
        s.logs().contains("count=1"),
        "the divergent round was not seen:\n{}",
        s.logs()
    );
    assert_eq!(
        s.metric("kubeslice_worker_hub_switch_pending_confirmations"),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_for_an_unconfigured_endpoint_never_moves_the_worker() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = started(&hubs, 1);
    hubs.primary.claim(ROGUE, "evil");
    hubs.secondary.claim(ROGUE, "evil");
    wait_rounds(&s, &hubs, 3);
    assert_eq!(published_hub(&s), "primary");
    assert_eq!(generation(&s), 1);
    assert!(s.metric("kubeslice_worker_hub_claims_rejected_total{hub=\"secondary\"}") >= 3.0);
    assert!(s.logs().contains("not configured"), "{}", s.logs());
    let handoff_text = std::fs::read_to_string(hubs.handoff_dir().join("active-hub.json")).unwrap();
    assert!(!handoff_text.contains("203.0.113.9"));
}

/// The rule refuses a claim dated more than 5 minutes ahead; the sidecar reports it as the
/// bad response it is, in `/status` and the probe errors, and it never moves the worker.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_dated_far_ahead_is_a_bad_response_and_moves_nothing() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = started(&hubs, 1);
    let b = hubs.secondary.endpoint();
    hubs.secondary
        .claim_at(&b, "ctrl-b", "2999-01-01T00:00:00Z");
    wait_rounds(&s, &hubs, 3);
    assert_eq!(published_hub(&s), "primary");
    let status = s.status();
    assert_eq!(
        status["hubs"]["secondary"]["reason"], "bad_response",
        "{status}"
    );
    let detail = status["hubs"]["secondary"]["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(detail.contains("ahead of this clock"), "{detail}");
    let errors =
        "kubeslice_worker_hub_probe_errors_total{hub=\"secondary\",reason=\"bad_response\"}";
    assert!(s.metric(errors) >= 3.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_both_hubs_down_nothing_changes() {
    let mut hubs = Hubs::start().await;
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let s = started(&hubs, 1);
    let before = s.handoff().unwrap();
    hubs.primary.stop();
    hubs.secondary.stop();
    let errors = |s: &Sidecar| {
        s.metric("kubeslice_worker_hub_probe_errors_total{hub=\"primary\",reason=\"connect\"}")
    };
    s.wait_until("three failed rounds", Duration::from_secs(10), |s| {
        errors(s) >= 3.0
    });
    // The same decision; only the start of its hub's silence is recorded (rule 10).
    let mut after = s.handoff().unwrap();
    let silent_since = after["silentSince"].take();
    assert!(silent_since.is_string(), "{after}");
    after.as_object_mut().unwrap().remove("silentSince");
    assert_eq!(after, before);
    assert_eq!(s.get("/healthz").0, 200);
    assert_eq!(s.get("/readyz").0, 200);
    // Edge-triggered: one info line per hub for the outage, not one per round.
    let lines = s
        .logs()
        .lines()
        .filter(|l| l.contains("hub has no say"))
        .count();
    assert_eq!(lines, 2, "{}", s.logs());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_endpoints_answer_as_documented() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = started(&hubs, 3);
    wait_rounds(&s, &hubs, 1);
    assert_eq!(s.get("/healthz"), (200, "ok\n".into()));
    assert_eq!(s.get("/readyz"), (200, "ok\n".into()));
    let metrics = s.get("/metrics").1;
    for name in [
        "kubeslice_worker_hub_switches_total",
        "kubeslice_worker_hub_probe_errors_total",
        "kubeslice_worker_hub_probe_duration_seconds_bucket",
        "kubeslice_worker_hub_active",
        "kubeslice_worker_hub_claims_rejected_total",
        "kubeslice_worker_hub_switch_pending_confirmations",
        "kubeslice_worker_hub_last_probe_success_timestamp_seconds",
        "kubeslice_worker_hub_handoff_write_errors_total",
        "hub_follower_build_info{version=",
    ] {
        assert!(metrics.contains(name), "{name} missing");
    }
    let status = s.status();
    assert_eq!(status["mode"], "follow");
    assert_eq!(status["published"]["hub"], "primary");
    assert_eq!(status["hubs"]["secondary"]["verdict"], "claim");
    assert_eq!(status["hubs"]["secondary"]["claim"]["identity"], "ctrl-a");
    assert_eq!(status["confirmationsRequired"], 3);
    assert_eq!(s.get("/nope").0, 404);
    let post = support::request(
        s.listen,
        "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(post.unwrap().0, 405);
    let head = support::request(
        s.listen,
        "HEAD /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(head.unwrap(), (200, String::new()));
    // No secret in any answer.
    for path in ["/status", "/metrics"] {
        let body = s.get(path).1;
        assert!(!body.contains("primary-token-a1b2") && !body.contains("secondary-token-c3d4"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_round_with_one_hub_hung_completes_within_the_probe_timeout() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = Sidecar::spawn(&hubs.args("2s", "1s", 3), &hubs.handoff_dir());
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    hubs.secondary.set_fault(Fault::Hang);
    s.wait_until("a round sees the hang", Duration::from_secs(10), |s| {
        s.status()["hubs"]["secondary"]["reason"] == "timeout"
    });
    // The round after the one that saw the hang is whole: it read both hubs.
    s.wait_rounds(1);
    let status = s.status();
    assert_eq!(status["hubs"]["secondary"]["reason"], "timeout");
    let round_ms = status["lastRoundMs"].as_f64().unwrap();
    let hung_ms = status["hubs"]["secondary"]["latencyMs"].as_f64().unwrap();
    let other_ms = status["hubs"]["primary"]["latencyMs"].as_f64().unwrap();
    // The deadline never fires early, and the round lasts as long as its hung read and no
    // more: ratios within this run, not bounds on a busy machine's clock.
    assert!(hung_ms >= 1000.0, "the hung read ended after {hung_ms} ms");
    assert!(
        round_ms < hung_ms * 1.25,
        "round took {round_ms} ms for a read cut at {hung_ms} ms"
    );
    // The other hub's verdict did not wait for the hung one.
    assert_eq!(status["hubs"]["primary"]["verdict"], "claim");
    assert!(
        other_ms < hung_ms / 2.0,
        "the answering hub took {other_ms} ms beside a {hung_ms} ms hang"
    );
    assert_eq!(s.get("/healthz").0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_sidecar_resumes_without_a_switch() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let mut first = started(&hubs, 3);
    assert_eq!(first.terminate().0.code(), Some(0));

    // The Active changed while the sidecar was away: the new one must still be confirmed.
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = Sidecar::spawn(&hubs.args("400ms", "300ms", 3), &hubs.handoff_dir());
    s.wait_until("the resumed decision", Duration::from_secs(10), |s| {
        generation(s) == 2
    });
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["hub"].as_str(), h["reason"].as_str()),
        (Some("secondary"), Some("resumed"))
    );
    s.wait_until("the confirmed switch", Duration::from_secs(10), |s| {
        generation(s) == 3
    });
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["hub"].as_str(), h["reason"].as_str()),
        (Some("primary"), Some("switch"))
    );
    assert!(s.logs().contains("count=2"), "{}", s.logs());
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_exits_zero_without_waiting_for_a_hanging_read() {
    let hubs = Hubs::start().await;
    hubs.secondary.set_fault(Fault::Hang);
    let mut s = Sidecar::spawn(&hubs.args("2h", "1h", 3), &hubs.handoff_dir());
    s.wait_until("a round is under way", Duration::from_secs(10), |s| {
        s.try_get("/healthz").is_some() && hubs.secondary.requests() >= 1
    });
    // Mid-round: the secondary's read hangs until its deadline, an hour away. An exit at
    // all is an exit that did not wait for it.
    let status = s.terminate_within(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_configuration_exits_2_naming_the_setting() {
    let hubs = Hubs::start().await;
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("HUB_SWITCH_CONFIRMATIONS", "0")],
            "HUB_SWITCH_CONFIRMATIONS",
        ),
        (&[("HUB_PROBE_TIMEOUT", "30s")], "--probe-timeout"),
        (
            &[("HUB_SECONDARY_HOST_ENDPOINT", "http://10.0.0.2:6443")],
            "HUB_SECONDARY_HOST_ENDPOINT",
        ),
        (&[("CLUSTER_NAME", "Not_A_Name")], "CLUSTER_NAME"),
        (
            &[("HUB_HANDOFF_DIR", "/proc/hub-follower")],
            "HUB_HANDOFF_DIR",
        ),
    ];
    for (env, named) in cases {
        let mut cmd = Command::new(support::binary());
        cmd.env("HUB_HOST_ENDPOINT", hubs.primary.endpoint())
            .env("HUB_SECONDARY_HOST_ENDPOINT", hubs.secondary.endpoint())
            .env("CLUSTER_NAME", "worker-1")
            .env("HUB_PROJECT_NAMESPACE", "kubeslice-acme")
            .env("HUB_HANDOFF_DIR", hubs.handoff_dir())
            .env("HUB_FOLLOWER_LISTEN", support::free_port().to_string());
        for (k, v) in *env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?}: {stderr}");
        assert!(stderr.contains(named), "{env:?}: {stderr}");
        assert!(!hubs.handoff_dir().join("active-hub.json").exists());
    }
    assert_eq!(
        hubs.primary.requests() + hubs.secondary.requests(),
        0,
        "a bad config probed a hub"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn check_reports_each_hub_and_the_decision() {
    let mut hubs = Hubs::start().await;
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let run = |hubs: &Hubs, extra: &[&str]| {
        Command::new(support::binary())
            .arg("check")
            .args(hubs.args("10s", "1s", 3))
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&hubs, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("secondary") && text.contains("identity=ctrl-b"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "decision: secondary {} (startup)",
            hubs.secondary.endpoint()
        )),
        "{text}"
    );

    hubs.primary.stop();
    let out = run(&hubs, &["--output=json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(report["hubs"][0]["reason"], "connect");
    assert_eq!(report["decision"]["hub"], "secondary");

    hubs.secondary.stop();
    let out = run(&hubs, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no hub answered"));
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_when_no_hub_shows_a_claim_and_nothing_rests_on_one() {
    // Hubs that answer without a claim, as without an HA controller or with a CRD that drops
    // the field, and nothing published: a problem, and exit 1.
    let hubs = Hubs::start().await;
    let run = |hubs: &Hubs, format: &str| {
        Command::new(support::binary())
            .arg("check")
            .args(hubs.args("10s", "1s", 3))
            .arg(format!("--output={format}"))
            .output()
            .unwrap()
    };
    let out = run(&hubs, "text");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let mut lines = text.lines().skip_while(|l| !l.starts_with("no_claim: "));
    let line = lines
        .next()
        .unwrap_or_else(|| panic!("no no_claim line: {text}"));
    for words in [
        "HA mode",
        "Cluster CRD does not declare status.activeController",
    ] {
        assert!(line.contains(words), "{words:?} not in {line}");
    }
    assert_eq!(
        lines.next().map(str::trim),
        Some("see https://github.com/kubeslice/hub-follower/blob/main/docs/troubleshooting.md#no_claim"),
        "{text}"
    );
    let report: serde_json::Value = serde_json::from_slice(&run(&hubs, "json").stdout).unwrap();
    assert_eq!(report["problems"][0]["problem"], "no_claim");
    assert_eq!(report["hubs"][0]["claimField"], "declared");
    // The secondary's CRD drops the field, as worker-operator v1.6.4's does: said by hub.
    hubs.secondary.state.lock().unwrap().declares_claim = false;
    let out = run(&hubs, "json");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["hubs"][1]["claimField"], "not_declared");
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["problem"].as_str())
        .collect();
    assert_eq!(problems, ["crd_drops_claim", "no_claim"]);
    let fix = report["problems"][0]["fix"].as_str().unwrap();
    assert!(fix.contains("the secondary hub's Cluster CRD"), "{fix}");
    hubs.secondary.state.lock().unwrap().declares_claim = true;
    // One claim, and the problem is gone.
    hubs.secondary.claim(&hubs.primary.endpoint(), "ctrl-a");
    let out = run(&hubs, "text");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("no_claim"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_which_hubs_credential_is_wrong_and_how_to_fix_it() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let check = |hubs: &Hubs| {
        let out = Command::new(support::binary())
            .arg("check")
            .args(hubs.args("10s", "2s", 3))
            .arg("--output=json")
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        (report, String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // The Standby's token file holds the primary's token: the secondary refuses it.
    let (primary_token, _) = hubs.creds("primary");
    let (secondary_token, _) = hubs.creds("secondary");
    std::fs::copy(&primary_token, &secondary_token).unwrap();
    let (report, text) = check(&hubs);
    assert!(report["hubs"][0].get("credential").is_none(), "{text}");
    let secondary = &report["hubs"][1];
    assert_eq!(secondary["reason"], "unauthorized", "{text}");
    assert_eq!(secondary["credential"]["problem"], "refused", "{text}");
    let fix = secondary["credential"]["fix"].as_str().unwrap();
    for words in [
        "secondary hub",
        "kubeslice-worker-worker-1",
        "-n kubeslice-acme get secret",
    ] {
        assert!(fix.contains(words), "{words:?} not in {fix}");
    }
    assert!(
        !text.contains("primary-token-a1b2"),
        "the token leaked: {text}"
    );

    // No token file at all.
    std::fs::remove_file(&secondary_token).unwrap();
    let (report, text) = check(&hubs);
    assert_eq!(report["hubs"][1]["reason"], "credentials", "{text}");
    assert_eq!(
        report["hubs"][1]["credential"]["problem"], "missing",
        "{text}"
    );
    assert!(
        report["hubs"][1]["credential"]["fix"]
            .as_str()
            .unwrap()
            .contains(&secondary_token.display().to_string()),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kubeconfig_is_valid_for_kubectl() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        support::skip("kubectl is not installed (scripts/test installs it as root)");
        return;
    }
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let _s = started(&hubs, 3);
    let out = Command::new("kubectl")
        .args(["config", "view", "--minify", "-o", "json", "--kubeconfig"])
        .arg(hubs.handoff_dir().join("kubeconfig"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (token, ca) = hubs.creds("secondary");
    assert_eq!(
        view["clusters"][0]["cluster"]["server"],
        hubs.secondary.endpoint()
    );
    assert_eq!(
        view["clusters"][0]["cluster"]["certificate-authority"],
        ca.display().to_string()
    );
    assert_eq!(
        view["users"][0]["user"]["tokenFile"],
        token.display().to_string()
    );
    assert_eq!(
        view["contexts"][0]["context"]["namespace"],
        "kubeslice-acme"
    );
}
