//! Liveness beside safety, through the real binary against two fake hubs: every hold ends.
//! A dead hub strands no one (rule 10), a split brain does not flap (rule 11), a slow cold
//! start hands out no primary first (rule 12), and what a hub says cannot grow the process.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::json;
use support::fake_hub::Fault;
use support::{Hubs, Sidecar};

fn published(s: &Sidecar) -> (String, u64) {
    let h = s.handoff().unwrap_or_default();
    (
        h["hub"].as_str().unwrap_or("").to_string(),
        h["generation"].as_u64().unwrap_or(0),
    )
}

/// The test sidecar's arguments, with `--name=value` pairs in `extra` in place of the
/// defaults that `Hubs::args` sets for the same flag.
fn args(hubs: &Hubs, confirmations: u32, extra: &[&str]) -> Vec<String> {
    let mut args = hubs.args("300ms", "250ms", confirmations);
    for e in extra {
        let flag = e.split('=').next().unwrap_or(e);
        args.retain(|a| a.split('=').next() != Some(flag));
        args.push(e.to_string());
    }
    args
}

fn started(hubs: &Hubs, confirmations: u32, extra: &[&str]) -> Sidecar {
    let s = Sidecar::spawn(&args(hubs, confirmations, extra), &hubs.handoff_dir());
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    s
}

fn self_claim(endpoint: &str, epoch: Option<u64>) -> serde_json::Value {
    let now = Timestamp::now().as_second();
    let mut c = json!({
        "endpoint": endpoint,
        "identity": format!("ctrl-{}", &endpoint[endpoint.len() - 5..]),
        "lastUpdated": Timestamp::from_second(now).unwrap().to_string(),
    });
    if let Some(e) = epoch {
        c["epoch"] = json!(e);
    }
    c
}

/// Both hubs name A at epoch 8, in an old claim; returns B's endpoint.
fn both_name_a_at_epoch_8(hubs: &Hubs) -> String {
    let a = hubs.primary.endpoint();
    let at_8 = json!({"endpoint": a, "identity": "ctrl-a", "lastUpdated": "2026-12-03T08:00:00Z", "epoch": 8});
    hubs.primary.publish(at_8.clone());
    hubs.secondary.publish(at_8);
    hubs.secondary.endpoint()
}

/// Rule 10: the worker on A (epoch 8); A dies for good; B is promoted at `b_epoch`. The
/// basis holds the worker on A, visibly, until A has been silent for --dead-hub-after; then
/// the worker is on B, and the hold was said.
async fn a_dead_hub_strands_no_one(b_epoch: Option<u64>) {
    let mut hubs = Hubs::start().await;
    let b = both_name_a_at_epoch_8(&hubs);
    let s = started(&hubs, 2, &["--dead-hub-after=4s"]);
    assert_eq!(published(&s), ("primary".into(), 1));

    hubs.primary.stop();
    let silent_from = Instant::now();
    hubs.secondary.publish(self_claim(&b, b_epoch));
    s.wait_until(
        "the switch is held by the basis",
        Duration::from_secs(10),
        |s| s.status()["held"]["reason"] == "older_than_basis",
    );
    assert_eq!(
        s.metric(r#"kubeslice_worker_hub_switch_held{why="older_than_basis"}"#),
        1.0
    );
    s.wait_until("the worker is on B", Duration::from_secs(30), |s| {
        published(s).0 == "secondary"
    });
    // Safety: not before the bound, counted from A's last answer (which may come well before
    // it was stopped: with the watches vouching, reads are relaxed).
    let h = s.handoff().unwrap();
    let last_answer =
        s.metric(r#"kubeslice_worker_hub_last_probe_success_timestamp_seconds{hub="primary"}"#);
    let decided = h["decidedAt"]
        .as_str()
        .and_then(|d| d.parse::<Timestamp>().ok())
        .expect("decidedAt");
    let silent = decided.as_millisecond() as f64 / 1000.0 - last_answer;
    assert!(
        silent >= 4.0,
        "moved {silent:.3}s after A's last answer ({:?} after A stopped)",
        silent_from.elapsed()
    );
    assert_eq!(
        (h["reason"].as_str(), h["generation"].as_u64()),
        (Some("switch"), Some(2))
    );
    assert_eq!(h["basis"]["endpoint"], b.as_str());
    let logs = s.logs();
    assert_eq!(
        logs.matches("has not answered for --dead-hub-after")
            .count(),
        1,
        "said once: {logs}"
    );
    s.wait_rounds(2);
    assert_eq!(
        s.metric(r#"kubeslice_worker_hub_switch_held{why="older_than_basis"}"#),
        0.0
    );
    s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_dead_hub_the_worker_reaches_a_promoted_hub_whose_epoch_restarted_within_the_bound() {
    a_dead_hub_strands_no_one(Some(1)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_dead_hub_the_worker_reaches_a_promoted_hub_that_publishes_no_epoch_within_the_bound()
{
    a_dead_hub_strands_no_one(None).await;
}

/// Rule 10 across restarts: the worker on A (epoch 8); A dies for good; B is promoted at
/// epoch 1; the sidecar restarts every 1.5 s, more often than --dead-hub-after (4 s). The
/// silence's start, kept in the handoff as `silentSince`, carries over every restart, so one
/// of the short-lived sidecars moves the worker, less than the bound after its own start.
#[tokio::test(flavor = "multi_thread")]
async fn a_sidecar_restarting_more_often_than_the_bound_still_lets_a_dead_hub_go() {
    let mut hubs = Hubs::start().await;
    let b = both_name_a_at_epoch_8(&hubs);
    let extra = ["--dead-hub-after=4s"];
    let mut s = started(&hubs, 2, &extra);
    assert_eq!(published(&s), ("primary".into(), 1));

    hubs.primary.stop();
    hubs.secondary.publish(self_claim(&b, Some(1)));
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut silent_since: Option<Timestamp> = None;
    let mut lives = 0;
    let started_at = loop {
        let started_at = Timestamp::now();
        let life = Instant::now();
        while life.elapsed() < Duration::from_millis(1500) && published(&s).0 != "secondary" {
            if let Some(t) = s
                .handoff()
                .and_then(|h| h["silentSince"].as_str()?.parse().ok())
            {
                silent_since = silent_since.or(Some(t));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        if published(&s).0 == "secondary" {
            break started_at;
        }
        assert!(
            Instant::now() < deadline,
            "still on the dead hub after {lives} restarts; last logs:\n{}",
            s.logs()
        );
        drop(s);
        s = Sidecar::spawn(&args(&hubs, 2, &extra), &hubs.handoff_dir());
        lives += 1;
    };
    let h = s.handoff().unwrap();
    assert_eq!(h["reason"], "switch");
    assert!(h.get("silentSince").is_none(), "{h}");
    let decided: Timestamp = h["decidedAt"].as_str().unwrap().parse().unwrap();
    let silent_since = silent_since.expect("silentSince was in the handoff while A was silent");
    assert!(
        decided.duration_since(silent_since) >= jiff::SignedDuration::from_secs(4),
        "moved at {decided}, A silent since {silent_since}"
    );
    assert!(
        lives >= 2 && decided.duration_since(started_at) < jiff::SignedDuration::from_secs(4),
        "the move came {} after its sidecar's start, after {lives} restarts",
        decided.duration_since(started_at)
    );
}

/// Both controllers claim their own hub at `epoch` and republish every 200 ms; a stand-in
/// worker erases the claim on the hub the handoff names, as worker-operator v1.6.4 does.
/// Returns the times (from `decidedAt`) of the first `switches` switches.
/// Sets its flag when dropped: the stand-in controllers stop whatever the test's outcome, a
/// failed assertion included.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

async fn split_brain_switch_times(window: &str, epoch: Option<u64>, switches: u64) -> Vec<f64> {
    let hubs = Arc::new(Hubs::start().await);
    let a = hubs.primary.endpoint();
    let b = hubs.secondary.endpoint();
    hubs.primary.publish(self_claim(&a, epoch));
    hubs.secondary.publish(self_claim(&b, epoch));
    let s = started(&hubs, 2, &[&format!("--split-brain-window={window}")]);
    assert_eq!(published(&s).0, "primary");

    let stop = Arc::new(AtomicBool::new(false));
    let controllers = {
        let (hubs, stop, dir) = (hubs.clone(), stop.clone(), hubs.handoff_dir());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let on = std::fs::read(dir.join("active-hub.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .and_then(|h| h["hub"].as_str().map(str::to_string))
                    .unwrap_or_default();
                for (name, hub) in [("primary", &hubs.primary), ("secondary", &hubs.secondary)] {
                    if on == name {
                        hub.clear_claim();
                    } else {
                        hub.publish(self_claim(&hub.endpoint(), epoch));
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let stopping = StopOnDrop(stop);
    let mut times = Vec::new();
    let mut seen = 1;
    s.wait_until(
        &format!("{switches} switches"),
        Duration::from_secs(60),
        |s| {
            let Some(h) = s.handoff() else { return false };
            let generation = h["generation"].as_u64().unwrap_or(0);
            if generation > seen {
                seen = generation;
                let at: Timestamp = h["decidedAt"].as_str().unwrap().parse().unwrap();
                times.push(at.as_millisecond() as f64 / 1000.0);
            }
            times.len() as u64 >= switches
        },
    );
    drop(stopping);
    controllers.join().unwrap();
    if window != "0s" {
        let st = s.status();
        assert!(
            st["held"].is_null() || st["held"]["reason"] == "split_brain",
            "{st:#}"
        );
        assert_eq!(s.metric("kubeslice_worker_hub_split_brain"), 1.0);
        assert!(s.logs().contains("split brain"), "{}", s.logs());
    }
    times
}

fn gaps(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_split_brain_at_equal_epochs_moves_the_worker_at_most_once_per_window() {
    let times = split_brain_switch_times("3s", Some(8), 3).await;
    for gap in gaps(&times) {
        assert!(gap >= 3.0, "switches at {times:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_split_brain_without_epochs_moves_the_worker_at_most_once_per_window() {
    let times = split_brain_switch_times("3s", None, 3).await;
    for gap in gaps(&times) {
        assert!(gap >= 3.0, "switches at {times:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_window_the_same_split_brain_flaps_which_the_tests_above_would_catch() {
    // The mutant of rule 11, through the real binary: the check above fails on it.
    let times = split_brain_switch_times("0s", Some(8), 4).await;
    assert!(
        gaps(&times).iter().any(|g| *g < 3.0),
        "switches at {times:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_cold_start_hands_out_the_hub_that_is_named_and_no_primary_first() {
    let hubs = Hubs::start().await;
    hubs.primary.set_fault(Fault::Status(503));
    hubs.secondary.set_fault(Fault::Status(503));
    let s = Sidecar::spawn(
        &args(&hubs, 3, &["--default-after=60s"]),
        &hubs.handoff_dir(),
    );
    s.wait_until(
        "rounds with both hubs unreachable",
        Duration::from_secs(10),
        |s| {
            s.try_get("/status").is_some()
                && s.metric(
                    r#"kubeslice_worker_hub_probe_errors_total{hub="secondary",reason="server"}"#,
                ) >= 5.0
        },
    );
    assert_eq!(s.handoff(), None);
    assert_eq!(s.get("/readyz").0, 503);
    assert!(s.logs().contains("waiting for a claim"), "{}", s.logs());

    hubs.both_claim(&hubs.secondary, "ctrl-b");
    hubs.primary.set_fault(Fault::None);
    hubs.secondary.set_fault(Fault::None);
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
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
    // Generation 1 is the first publish; and the log never names the primary as published.
    assert!(
        !s.logs().contains("published the active hub hub=primary"),
        "{}",
        s.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_claim_anywhere_the_primary_is_published_once_the_bound_passes() {
    let hubs = Hubs::start().await;
    let s = Sidecar::spawn(
        &args(&hubs, 3, &["--default-after=2s"]),
        &hubs.handoff_dir(),
    );
    let started = Instant::now();
    s.wait_until("the default is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    assert!(started.elapsed() >= Duration::from_secs(2));
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["hub"].as_str(), h["reason"].as_str()),
        (Some("primary"), Some("default"))
    );
}

/// RSS of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_stays_flat_while_a_hub_churns_identities() {
    // A is down; B alternates claim and no claim on every read, each claim with a new
    // identity: a 200 KB one (refused, with its reason) or a new short one (each a new
    // candidate whose streak is broken off by A's silence).
    let mut hubs = Hubs::start().await;
    let b = hubs.secondary.endpoint();
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = started(&hubs, 3, &[]);
    hubs.primary.stop();
    let churn = |n: usize| {
        if n % 2 == 1 {
            hubs.secondary.clear_claim();
        } else if n % 4 == 0 {
            hubs.secondary
                .publish(json!({"endpoint": b, "identity": "x".repeat(200_000) + &n.to_string()}));
        } else {
            hubs.secondary
                .publish(json!({"endpoint": b, "identity": format!("ctrl-{n}")}));
        }
    };
    let mut n = 0;
    let mut rounds_for = |s: &Sidecar, count: usize| {
        for _ in 0..count {
            churn(n);
            n += 1;
            s.wait_rounds(1);
        }
    };
    rounds_for(&s, 20);
    let before = rss_kib(s.pid());
    rounds_for(&s, 100);
    let after = rss_kib(s.pid());
    let st = s.status();
    assert!(
        after <= before + 1024,
        "RSS grew from {before} KiB to {after} KiB over 100 churned rounds"
    );
    assert!(
        s.logs()
            .contains("status.activeController.identity must be at most 253 characters"),
        "the refusal is said"
    );
    assert_eq!(published(&s).0, "primary", "{st:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failback_is_held_as_a_split_brain_until_the_watch_sees_the_old_hub_mirror_the_new_active(
) {
    let hubs = Hubs::start().await;
    let a = hubs.primary.endpoint();
    let b = hubs.secondary.endpoint();
    let at = |endpoint: &str, when: &str| json!({"endpoint": endpoint, "identity": "ctrl", "lastUpdated": when});
    hubs.primary.publish(at(&a, "2026-12-03T08:00:00Z"));
    hubs.secondary.publish(at(&a, "2026-12-03T08:00:00Z"));
    let s = started(&hubs, 2, &["--watch=true", "--split-brain-window=10m"]);
    assert_eq!(published(&s).0, "primary");
    // A failover to B, without epochs: B claims itself, A mirrors it.
    hubs.secondary.publish(at(&b, "2026-12-03T08:10:00Z"));
    hubs.primary.publish(at(&b, "2026-12-03T08:10:00Z"));
    s.wait_until("the worker is on B", Duration::from_secs(10), |s| {
        published(s).0 == "secondary"
    });
    // The worker on B erases B's claim; A is promoted again and claims itself, fresher.
    hubs.secondary.clear_claim();
    hubs.primary.publish(at(&a, "2026-12-03T08:20:00Z"));
    // B's last word is its own claim: two hubs each claiming themselves, one switch ago.
    s.wait_until(
        "the failback held as a split brain",
        Duration::from_secs(10),
        |s| s.status()["held"]["reason"] == "split_brain",
    );
    assert_eq!(s.metric("kubeslice_worker_hub_split_brain"), 1.0);
    assert_eq!(published(&s).0, "secondary");
    // B's controller, now Standby, mirrors A's claim on B; the worker erases it as soon as
    // the watch has seen it. That is B saying it is no longer Active: the failback follows.
    let seen =
        s.metric(r#"kubeslice_worker_hub_watch_events_total{hub="secondary",type="modified"}"#);
    hubs.secondary.publish(at(&a, "2026-12-03T08:20:00Z"));
    s.wait_until("the watch saw the mirror", Duration::from_secs(10), |s| {
        s.metric(r#"kubeslice_worker_hub_watch_events_total{hub="secondary",type="modified"}"#)
            > seen
    });
    hubs.secondary.clear_claim();
    s.wait_until("the worker is back on A", Duration::from_secs(10), |s| {
        published(s).0 == "primary"
    });
    s.wait_metric("kubeslice_worker_hub_switches_total", 2.0);
}
