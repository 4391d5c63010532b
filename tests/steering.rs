//! An operator's pin and drain, end to end: the real binary, two fake hubs, and the files a
//! downward-API volume would hold, written here as kubelet writes them.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{Hubs, Sidecar};

const WAIT: Duration = Duration::from_secs(20);

fn published_hub(s: &Sidecar) -> String {
    s.handoff()
        .map(|h| h["hub"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// `HUB until` a time `secs` from now.
fn until(hub: &str, secs: i64) -> String {
    let at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap();
    format!("{hub} until {}", at.round(jiff::Unit::Second).unwrap())
}

/// Writes `value` into `kind`'s file the way kubelet updates a downward-API volume: a new file
/// renamed into place.
fn set(dir: &Path, kind: &str, value: &str) {
    let tmp = dir.join(format!(".{kind}.tmp"));
    std::fs::write(&tmp, value).unwrap();
    std::fs::rename(&tmp, dir.join(kind)).unwrap();
}

/// The sidecar's arguments with `--override-dir`, and that directory (created empty).
fn args_with_overrides(hubs: &Hubs) -> (Vec<String>, PathBuf) {
    let dir = hubs.dir.path().join("overrides");
    std::fs::create_dir_all(&dir).unwrap();
    let mut args = hubs.args("400ms", "300ms", 3);
    args.push(format!("--override-dir={}", dir.display()));
    (args, dir)
}

/// Two hubs whose claims name the primary, and the sidecar, with `--override-dir`, once it
/// has published the primary; and that directory.
async fn on_the_primary() -> (Hubs, Sidecar, PathBuf) {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let (args, dir) = args_with_overrides(&hubs);
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("the first decision", WAIT, |s| {
        published_hub(s) == "primary"
    });
    (hubs, s, dir)
}

fn metric(s: &Sidecar, hub: &str, kind: &str) -> f64 {
    s.metric(&format!(
        "kubeslice_worker_hub_override_until_timestamp_seconds{{hub=\"{hub}\",kind=\"{kind}\"}}"
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_moves_the_worker_off_and_its_removal_lets_the_claims_decide_again() {
    let (_hubs, s, dir) = on_the_primary().await;
    assert_eq!(metric(&s, "primary", "drain"), 0.0);
    assert_eq!(s.status()["overrides"]["drain"], serde_json::Value::Null);

    set(&dir, "drain", &until("primary", 600));
    s.wait_until("the drain moves the worker", WAIT, |s| {
        published_hub(s) == "secondary"
    });
    let h = s.handoff().unwrap();
    assert_eq!(h["reason"], "switch", "{h}");
    assert_eq!(h["override"]["kind"], "drain", "{h}");
    assert_eq!(h["override"]["hub"], "primary", "{h}");
    assert!(metric(&s, "primary", "drain") > 0.0);
    assert_eq!(metric(&s, "secondary", "drain"), 0.0);
    let status = s.status();
    assert_eq!(status["overrides"]["drain"]["hub"], "primary", "{status}");
    let logs = s.logs();
    assert!(logs.contains("drain in effect"), "{logs}");
    // Confirmed like any switch: three rounds, the first two pending.
    assert_eq!(logs.matches("a switch is pending confirmation").count(), 2);

    // The claims still name the primary; while it is drained they have no say.
    s.wait_rounds(3);
    assert_eq!(published_hub(&s), "secondary");

    // Removed: the primary's claim is fresher than the drain's move (which rested on none).
    set(&dir, "drain", "");
    s.wait_until("the worker goes back", WAIT, |s| {
        published_hub(s) == "primary"
    });
    let status = s.status();
    assert_eq!(status["overrides"]["ended"]["drain"]["how"], "removed");
    assert_eq!(status["overrides"]["drain"], serde_json::Value::Null);
    assert_eq!(metric(&s, "primary", "drain"), 0.0);
    assert_eq!(s.handoff().unwrap()["override"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pin_to_a_silent_hub_waits_for_it_and_ends_by_itself() {
    let (mut hubs, s, dir) = on_the_primary().await;

    hubs.secondary.stop();
    set(&dir, "pin", &until("secondary", 20));
    s.wait_until("the pin is held", WAIT, |s| {
        s.status()["held"]["reason"] == "pinned_hub_unreachable"
    });
    s.wait_rounds(2);
    assert_eq!(
        published_hub(&s),
        "primary",
        "a silent pinned hub moves nothing"
    );
    assert!(
        s.metric("kubeslice_worker_hub_switches_held_total{why=\"pinned_hub_unreachable\"}") >= 1.0
    );

    hubs.secondary.restart().await;
    hubs.secondary.claim(&hubs.primary.endpoint(), "ctrl-a");
    s.wait_until("the pinned hub answers and the worker moves", WAIT, |s| {
        published_hub(s) == "secondary"
    });
    assert_eq!(s.handoff().unwrap()["override"]["kind"], "pin");
    // The pin ends by itself; the claims, which name the primary, take the worker back.
    s.wait_until("the pin expires", Duration::from_secs(40), |s| {
        s.status()["overrides"]["ended"]["pin"]["how"] == "expired"
    });
    s.wait_until("the worker goes back", WAIT, |s| {
        published_hub(s) == "primary"
    });
    assert_eq!(metric(&s, "secondary", "pin"), 0.0);
    assert!(s.logs().contains("pin ended"), "{}", s.logs());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_value_is_shown_and_keeps_the_drain_in_effect_across_a_sidecar_restart() {
    let (hubs, mut s, dir) = on_the_primary().await;
    set(&dir, "drain", &until("primary", 600));
    s.wait_until("the drain moves the worker", WAIT, |s| {
        published_hub(s) == "secondary"
    });

    // A typo while editing: refused, shown, and the drain in effect stays.
    set(&dir, "drain", "primry until 2099-01-01T00:00:00Z");
    s.wait_until("the refusal shows", WAIT, |s| {
        s.status()["overrides"]["refused"]["drain"]["reason"] == "unknown_hub"
    });
    assert_eq!(
        s.metric("kubeslice_worker_hub_override_refused{kind=\"drain\"}"),
        1.0
    );
    let status = s.status();
    assert_eq!(status["overrides"]["drain"]["hub"], "primary", "{status}");
    assert!(status["overrides"]["refused"]["drain"]["why"]
        .as_str()
        .unwrap()
        .contains("primary, secondary"));
    s.wait_rounds(2);
    assert_eq!(published_hub(&s), "secondary");
    let generation = s.handoff().unwrap()["generation"].as_u64().unwrap();

    // The operator fixes it; then the sidecar restarts beside the worker. The drain is read
    // again, and the decision is resumed, not switched.
    set(&dir, "drain", &until("primary", 600));
    s.wait_until("the refusal clears", WAIT, |s| {
        s.metric("kubeslice_worker_hub_override_refused{kind=\"drain\"}") == 0.0
    });
    s.terminate();
    let (args, _) = args_with_overrides(&hubs);
    let s = Sidecar::spawn(&args, &hubs.handoff_dir());
    s.wait_until("the restarted sidecar resumes", WAIT, |s| {
        s.handoff().is_some_and(|h| h["reason"] == "resumed")
    });
    s.wait_until("the drain is in effect again", WAIT, |s| {
        s.status()["overrides"]["drain"]["hub"] == "primary"
    });
    s.wait_rounds(3);
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["hub"].as_str(), h["reason"].as_str()),
        (Some("secondary"), Some("resumed"))
    );
    assert_eq!(h["generation"].as_u64(), Some(generation + 1), "{h}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_with_only_the_drained_hub_answering_keeps_the_worker_and_says_why() {
    let (mut hubs, s, dir) = on_the_primary().await;
    hubs.secondary.stop();
    set(&dir, "drain", &until("primary", 600));
    s.wait_until("the drain is held", WAIT, |s| {
        s.status()["held"]["reason"] == "drain_no_alternative"
    });
    let why = s.status()["held"]["why"].as_str().unwrap().to_string();
    assert!(why.contains("no other hub answers"), "{why}");
    s.wait_rounds(3);
    assert_eq!(published_hub(&s), "primary");
    assert_eq!(s.handoff().unwrap()["generation"].as_u64(), Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_hub_that_goes_silent_under_the_worker_is_said() {
    let (mut hubs, s, dir) = on_the_primary().await;
    set(&dir, "pin", &until("primary", 600));
    s.wait_until("the pin is in effect", WAIT, |s| {
        s.status()["overrides"]["pin"]["hub"] == "primary"
    });
    // The primary fails and the controller fails over: no failover while pinned, and the
    // hold says why.
    hubs.primary.stop();
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until("the hold shows", WAIT, |s| {
        s.status()["held"]["reason"] == "pinned_hub_unreachable"
    });
    let held = s.status()["held"].clone();
    assert_eq!(held["candidate"], "secondary", "{held}");
    assert!(
        held["why"]
            .as_str()
            .unwrap()
            .contains("no failover while it is pinned"),
        "{held}"
    );
    s.wait_rounds(4);
    assert_eq!(published_hub(&s), "primary");
    assert!(s.logs().contains("not moving the worker"), "{}", s.logs());
}
