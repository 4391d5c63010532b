//! The real binary against fake hubs run as KubeSlice's own HA controller runs them (its
//! `pkg/ha`, read in its source), with a worker that erases the claim on its hub as
//! worker-operator v1.6.4 does. The controller here re-checks every second where the real one
//! does every 30 s: the leader writes its claim only when the field is missing, with no epoch;
//! the Standby mirrors the leader's whole field, erasures included. So reads see almost no
//! claim, and the watches see each one (`src/resolver/real_hub.rs` is the same world, pure).

mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::{json, Value};
use support::fake_hub::FakeHub;
use support::{Hubs, Sidecar};

/// How the stand-in controllers behave; the test changes it while they run.
#[derive(Default)]
struct Controllers {
    /// A's controller runs and leads.
    a_alive: AtomicBool,
    /// A's controller writes its claim once and never again (unlike the real one).
    a_once: AtomicBool,
    /// B's controller leads (else it mirrors A, while `b_mirrors`).
    b_leads: AtomicBool,
    b_mirrors: AtomicBool,
    /// How far ahead of true time A's clock runs, in seconds.
    a_skew: AtomicI64,
    /// When A last wrote its claim, in Unix milliseconds; 0 before.
    a_wrote_at: AtomicI64,
    stop: AtomicBool,
}

/// Stops the controllers' thread however the test ends.
struct StopOnDrop<'a>(&'a Controllers);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
    }
}

fn claim_of(endpoint: &str, identity: &str, skew: i64) -> Value {
    let at = Timestamp::now().as_second() + skew;
    json!({
        "endpoint": endpoint,
        "identity": identity,
        "lastUpdated": Timestamp::from_second(at).unwrap().to_string(),
    })
}

/// One hub's field as the stand-ins keep it.
fn write(hub: &FakeHub, field: &mut Option<Value>, new: Option<Value>) {
    if *field == new {
        return;
    }
    match &new {
        Some(c) => hub.publish(c.clone()),
        None => hub.clear_claim(),
    }
    *field = new;
}

/// The two controllers and the worker's erasure, every 20 ms until stopped.
fn run(hubs: &Hubs, c: &Controllers) {
    let (a, b) = (hubs.primary.endpoint(), hubs.secondary.endpoint());
    let (mut fa, mut fb): (Option<Value>, Option<Value>) = (None, None);
    let (mut a_check, mut b_check) = (Instant::now(), Instant::now());
    let mut a_wrote = false;
    let handoff = hubs.handoff_dir().join("active-hub.json");
    while !c.stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let again = !(c.a_once.load(Ordering::SeqCst) && a_wrote);
        if c.a_alive.load(Ordering::SeqCst) && now >= a_check {
            a_check = now + Duration::from_secs(1);
            if fa.is_none() && again {
                let own = claim_of(&a, "ctrl-a", c.a_skew.load(Ordering::SeqCst));
                write(&hubs.primary, &mut fa, Some(own));
                a_wrote = true;
                c.a_wrote_at
                    .store(Timestamp::now().as_millisecond(), Ordering::SeqCst);
            }
        }
        if c.b_leads.load(Ordering::SeqCst) && now >= b_check {
            b_check = now + Duration::from_secs(1);
            if fb.as_ref().is_none_or(|f| f["endpoint"] != b.as_str()) {
                write(&hubs.secondary, &mut fb, Some(claim_of(&b, "ctrl-b", 0)));
            }
        } else if c.b_mirrors.load(Ordering::SeqCst) {
            write(&hubs.secondary, &mut fb, fa.clone());
        }
        std::thread::sleep(Duration::from_millis(20));
        // The worker, on the hub the handoff names, erases the claim there within the 20 ms.
        let on = std::fs::read(&handoff)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|h| h["hub"].as_str().map(str::to_string));
        match on.as_deref() {
            Some("primary") => write(&hubs.primary, &mut fa, None),
            Some("secondary") => write(&hubs.secondary, &mut fb, None),
            _ => {}
        }
        if c.b_mirrors.load(Ordering::SeqCst) && !c.b_leads.load(Ordering::SeqCst) {
            write(&hubs.secondary, &mut fb, fa.clone());
        }
    }
}

fn published(s: &Sidecar) -> (String, u64) {
    let h = s.handoff().unwrap_or_default();
    (
        h["hub"].as_str().unwrap_or("").to_string(),
        h["generation"].as_u64().unwrap_or(0),
    )
}

/// Watches on, with a bookmark every 100 ms so that they vouch; rule 10's bound 4 s.
fn sidecar(hubs: &Hubs) -> Sidecar {
    for hub in [&hubs.primary, &hubs.secondary] {
        hub.set_bookmarks(Some(Duration::from_millis(100)));
    }
    let mut args = hubs.args("300ms", "250ms", 2);
    args.retain(|a| !a.starts_with("--watch"));
    args.extend([
        "--watch=true".to_string(),
        "--watch-timeout=2s".into(),
        "--dead-hub-after=4s".into(),
        "--default-after=5s".into(),
    ]);
    Sidecar::spawn(&args, &hubs.handoff_dir())
}

/// A leads, B mirrors it, the worker on A; A's controller has republished at least twice.
fn on_a(hubs: &Hubs, c: &Controllers) -> Sidecar {
    let s = sidecar(hubs);
    s.wait_until("the worker on A", Duration::from_secs(15), |s| {
        published(s) == ("primary".into(), 1)
    });
    let wrote = c.a_wrote_at.load(Ordering::SeqCst);
    s.wait_until("A republished twice", Duration::from_secs(10), |_| {
        c.a_wrote_at.load(Ordering::SeqCst) >= wrote + 1_500
    });
    s
}

fn controllers(skew: i64) -> Controllers {
    let c = Controllers::default();
    c.a_alive.store(true, Ordering::SeqCst);
    c.b_mirrors.store(true, Ordering::SeqCst);
    c.a_skew.store(skew, Ordering::SeqCst);
    c
}

/// A's clock 90 s ahead; its controller dies, its API server stays up and answers without a
/// claim (the worker erased the last); B promotes with claims dated before the basis. The
/// claim clock runs (its gauge says since when), and the worker reaches B once A has shown
/// no claim for itself for --dead-hub-after: not before, and said once in the log.
#[tokio::test(flavor = "multi_thread")]
async fn an_old_active_with_its_clock_ahead_whose_controller_dies_releases_the_worker_to_b() {
    let hubs = Hubs::start().await;
    let c = controllers(90);
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(&c);
        scope.spawn(|| run(&hubs, &c));
        let s = on_a(&hubs, &c);
        c.a_alive.store(false, Ordering::SeqCst);
        c.b_mirrors.store(false, Ordering::SeqCst);
        c.b_leads.store(true, Ordering::SeqCst);
        let last = c.a_wrote_at.load(Ordering::SeqCst) as f64 / 1000.0;
        s.wait_until(
            "B's claim held by the basis",
            Duration::from_secs(10),
            |s| s.status()["held"]["reason"] == "older_than_basis",
        );
        let since = s.metric("kubeslice_worker_hub_active_hub_unclaimed_since_timestamp_seconds");
        assert!(
            since >= last && since < last + 2.0,
            "the claim clock runs from A's last claim ({last}): {since}"
        );
        s.wait_until("the worker on B", Duration::from_secs(20), |s| {
            published(s).0 == "secondary"
        });
        let h = s.handoff().expect("a handoff");
        let decided = h["decidedAt"]
            .as_str()
            .and_then(|d| d.parse::<Timestamp>().ok())
            .expect("decidedAt");
        let quiet = decided.as_millisecond() as f64 / 1000.0 - last;
        assert!(quiet >= 4.0, "moved {quiet:.3}s after A's last claim");
        assert_eq!(
            (h["reason"].as_str(), h["generation"].as_u64()),
            (Some("switch"), Some(2))
        );
        // The handoff is on disk before the round's notes are said, so the line is awaited.
        let said = "its watch up, but shown no claim for itself for --dead-hub-after";
        s.wait_until("rule 10 said", Duration::from_secs(5), |s| {
            s.logs().contains(said)
        });
        s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
        let logs = s.logs();
        assert_eq!(logs.matches(said).count(), 1, "said once: {logs}");
    });
}

/// The safety side, at the same bound. A's controller runs, republishing each claim the
/// worker erases; B's controller is gone and its hub keeps B's own claim, older than the
/// basis. And a controller that writes its claim once and never again is not taken for a
/// dead one. Either way the worker stays on A for three times --dead-hub-after. Only the
/// second hold is one that rule 10 cannot end, so it is said: the gauge behind
/// HubFollowerBasisUnconfirmed holds since when A answered without a claim for itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_republishing_controller_and_one_that_never_republishes_both_hold_the_worker() {
    for once in [false, true] {
        let hubs = Hubs::start().await;
        let c = controllers(0);
        c.a_once.store(once, Ordering::SeqCst);
        std::thread::scope(|scope| {
            let _stop = StopOnDrop(&c);
            scope.spawn(|| run(&hubs, &c));
            let s = sidecar(&hubs);
            s.wait_until("the worker on A", Duration::from_secs(15), |s| {
                published(s) == ("primary".into(), 1)
            });
            c.b_mirrors.store(false, Ordering::SeqCst);
            // Past the controllers' current pass, which may still mirror A once.
            std::thread::sleep(Duration::from_millis(100));
            hubs.secondary
                .publish(claim_of(&hubs.secondary.endpoint(), "ctrl-b", -60));
            s.wait_until("B's old claim held", Duration::from_secs(10), |s| {
                s.status()["held"]["reason"] == "older_than_basis"
            });
            let gauge = "kubeslice_worker_hub_basis_unconfirmed_since_timestamp_seconds";
            let said = s.metric(gauge);
            let until = Instant::now() + Duration::from_secs(12);
            while Instant::now() < until {
                assert_eq!(published(&s), ("primary".into(), 1), "once: {once}");
                std::thread::sleep(Duration::from_millis(50));
            }
            let now = Timestamp::now().as_millisecond() as f64 / 1000.0;
            if once {
                assert!(
                    said > 0.0 && s.metric(gauge) == said && now - said > 3.0 * 4.0,
                    "the hold said since {said}, now {now}"
                );
            } else {
                // The hold may be said for a round, before the controller was seen
                // republishing; the read due when it would be said finds the republish.
                assert_eq!(
                    s.metric(gauge),
                    0.0,
                    "said since {said} beside a live controller"
                );
            }
            let logs = s.logs();
            assert!(
                !logs.contains("shown no claim for itself")
                    && !logs.contains("has not answered for"),
                "once: {once}: {logs}"
            );
        });
    }
}
