//! The basis rule and epochs, through the real binary against two fake hubs: what the real
//! worker-operator does to claims (it erases the one on the hub it talks to), what a hub that
//! comes back with an old claim does, and what an operator sees of it.

mod support;

use std::time::Duration;

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

fn start(hubs: &Hubs, confirmations: u32) -> Sidecar {
    let s = Sidecar::spawn(
        &hubs.args("300ms", "250ms", confirmations),
        &hubs.handoff_dir(),
    );
    s.wait_until("a decision is published", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    s
}

const T_A: &str = "2026-12-03T08:00:00Z";
const T_B: &str = "2026-12-03T08:10:00Z";

#[tokio::test(flavor = "multi_thread")]
async fn a_returning_hub_with_an_old_claim_never_moves_the_worker_even_across_a_sidecar_restart() {
    let hubs = Hubs::start().await;
    let a = hubs.primary.endpoint();
    let b = hubs.secondary.endpoint();
    // A was Active and its claim is old; B has been promoted since.
    hubs.primary.claim_at(&a, "ctrl-a", T_A);
    hubs.secondary.claim_at(&b, "ctrl-b", T_B);
    let mut s = start(&hubs, 2);
    assert_eq!(published(&s).0, "secondary");
    let basis = &s.handoff().unwrap()["basis"];
    assert_eq!(
        (basis["endpoint"].as_str(), basis["lastUpdated"].as_str()),
        (Some(b.as_str()), Some(T_B))
    );

    // The worker now on B erases B's claim; A still shows its old one.
    hubs.secondary.clear_claim();
    s.wait_rounds(6);
    assert_eq!(published(&s), ("secondary".into(), 1));
    let st = s.status();
    assert_eq!(st["held"]["candidate"], "primary", "{st:#}");
    assert_eq!(st["held"]["reason"], "older_than_basis");
    assert!(st["held"]["why"].as_str().unwrap().contains(T_B), "{st:#}");
    // The vanished claim is kept in view, and counted.
    assert_eq!(st["hubs"]["secondary"]["verdict"], "no_claim");
    assert_eq!(
        st["hubs"]["secondary"]["lastSeenClaim"]["lastUpdated"], T_B,
        "{st:#}"
    );
    assert!(st["hubs"]["secondary"]["lastSeenClaim"]["seenAt"].is_string());
    assert_eq!(
        s.metric(r#"kubeslice_worker_hub_claims_vanished_total{hub="secondary"}"#),
        1.0
    );
    assert!(
        s.metric(r#"kubeslice_worker_hub_claims_older_than_basis_total{hub="primary"}"#) >= 6.0
    );
    assert!(s.metric(r#"kubeslice_worker_hub_switches_held_total{why="older_than_basis"}"#) >= 6.0);
    assert_eq!(s.metric("kubeslice_worker_hub_switches_total"), 0.0);
    assert_eq!(
        s.logs().matches("not moving the worker").count(),
        1,
        "a hold is logged when it starts, not every round"
    );

    // A restarted sidecar keeps the basis: the old claim still moves nothing.
    s.terminate();
    let s = start(&hubs, 2);
    s.wait_rounds(6);
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["hub"].as_str(), h["reason"].as_str()),
        (Some("secondary"), Some("resumed"))
    );
    assert_eq!(h["basis"]["lastUpdated"], T_B);
    assert_eq!(s.status()["held"]["reason"], "older_than_basis");

    // A genuine failback: A is promoted again, with a fresher claim. One switch.
    hubs.primary.claim(&a, "ctrl-a");
    s.wait_until("the failback is published", Duration::from_secs(10), |s| {
        published(s).0 == "primary"
    });
    s.wait_rounds(4);
    s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
    assert_eq!(s.status()["held"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_basis_on_disk_follows_fresher_claims_for_the_published_hub_without_a_new_generation() {
    let hubs = Hubs::start().await;
    let b = hubs.secondary.endpoint();
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    hubs.primary
        .publish(json!({"endpoint": b, "identity": "ctrl-b", "lastUpdated": T_A, "epoch": 4}));
    hubs.secondary
        .publish(json!({"endpoint": b, "identity": "ctrl-b", "lastUpdated": T_A, "epoch": 4}));
    let s = start(&hubs, 2);
    assert_eq!(s.handoff().unwrap()["basis"]["epoch"], 4);
    hubs.primary
        .publish(json!({"endpoint": b, "identity": "ctrl-b", "lastUpdated": T_B, "epoch": 5}));
    s.wait_until("the basis moved to epoch 5", Duration::from_secs(10), |s| {
        s.handoff().unwrap()["basis"]["epoch"] == 5
    });
    let h = s.handoff().unwrap();
    assert_eq!(
        (h["generation"].as_u64(), h["reason"].as_str()),
        (Some(1), Some("startup"))
    );
    assert_eq!(h["basis"]["lastUpdated"], T_B);
    // An older claim does not move it back.
    hubs.primary
        .publish(json!({"endpoint": b, "identity": "ctrl-b", "lastUpdated": T_B, "epoch": 3}));
    s.wait_rounds(3);
    assert_eq!(s.handoff().unwrap()["basis"]["epoch"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_epochs_a_claim_dated_in_the_past_still_wins_and_a_bad_epoch_is_refused() {
    let hubs = Hubs::start().await;
    let a = hubs.primary.endpoint();
    let b = hubs.secondary.endpoint();
    hubs.primary
        .publish(json!({"endpoint": a, "lastUpdated": T_B, "epoch": 7}));
    hubs.secondary
        .publish(json!({"endpoint": a, "lastUpdated": T_B, "epoch": 7}));
    let s = start(&hubs, 2);
    assert_eq!(published(&s).0, "primary");
    // B is promoted by a controller whose clock is an hour behind: its epoch says it is news.
    hubs.secondary
        .publish(json!({"endpoint": b, "lastUpdated": "2026-12-03T07:10:00Z", "epoch": 8}));
    s.wait_until("the switch to B", Duration::from_secs(10), |s| {
        published(s).0 == "secondary"
    });
    assert_eq!(s.handoff().unwrap()["basis"]["epoch"], 8);

    // A negative epoch is refused, with its reason, and counted; it never crashes anything.
    hubs.primary
        .publish(json!({"endpoint": a, "lastUpdated": T_B, "epoch": -1}));
    let before =
        s.metric(r#"kubeslice_worker_hub_probe_errors_total{hub="primary",reason="bad_response"}"#);
    s.wait_rounds(2);
    let st = s.status();
    assert_eq!(st["hubs"]["primary"]["reason"], "bad_response", "{st:#}");
    assert!(
        st["hubs"]["primary"]["detail"]
            .as_str()
            .unwrap()
            .contains("status.activeController.epoch must be a non-negative integer (got -1)"),
        "{st:#}"
    );
    assert!(
        s.metric(r#"kubeslice_worker_hub_probe_errors_total{hub="primary",reason="bad_response"}"#)
            > before
    );
    assert_eq!(published(&s).0, "secondary");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_switch_to_a_hub_that_refuses_our_credential_is_held_and_said_why() {
    let hubs = Hubs::start().await;
    let b = hubs.secondary.endpoint();
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = start(&hubs, 2);
    // B is promoted; A mirrors it; but B refuses our token.
    hubs.secondary.set_fault(Fault::Status(401));
    hubs.primary.claim(&b, "ctrl-b");
    s.wait_rounds(5);
    assert_eq!(published(&s).0, "primary");
    let st = s.status();
    assert_eq!(st["held"]["candidate"], "secondary", "{st:#}");
    assert_eq!(st["held"]["reason"], "unauthenticated");
    assert!(
        st["held"]["why"].as_str().unwrap().contains("unauthorized"),
        "{st:#}"
    );
    assert!(s.metric(r#"kubeslice_worker_hub_switches_held_total{why="unauthenticated"}"#) >= 5.0);
    // Let B in again: the switch follows.
    hubs.secondary.set_fault(Fault::None);
    s.wait_until("the switch to B", Duration::from_secs(10), |s| {
        published(s).0 == "secondary"
    });
}
