//! The watch fast path against fake hubs that serve list and watch: claim changes are read at
//! once, a broken watch leaves polling in charge, and the rule's protections hold either way.

mod support;

use std::time::{Duration, Instant};

use support::fake_hub::WatchFault;
use support::{Hubs, Sidecar};

const ROGUE: &str = "https://203.0.113.9:6443";

fn watch_args(hubs: &Hubs, poll: &str, confirm: &str) -> Vec<String> {
    let timeout = if poll == "10s" { "1s" } else { "300ms" };
    let mut args = hubs.args(poll, timeout, 3);
    args.retain(|a| !a.starts_with("--watch") && !a.starts_with("--confirm-interval"));
    args.extend([
        "--watch=true".to_string(),
        "--watch-timeout=20s".into(),
        format!("--confirm-interval={confirm}"),
    ]);
    args
}

fn watches_up(s: &Sidecar) -> bool {
    let st = s.status();
    st["watches"]["primary"]["state"] == "up" && st["watches"]["secondary"]["state"] == "up"
}

fn published(s: &Sidecar) -> (String, u64) {
    let h = s.handoff().unwrap();
    (
        h["hub"].as_str().unwrap().to_string(),
        h["generation"].as_u64().unwrap(),
    )
}

fn started(hubs: &Hubs, args: &[String]) -> Sidecar {
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let s = Sidecar::spawn(args, &hubs.handoff_dir());
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    s
}

/// Waits until each hub served one more read, i.e. one more round ran.
fn next_round(s: &Sidecar, hubs: &Hubs) {
    let (p, q) = (hubs.primary.requests(), hubs.secondary.requests());
    s.wait_until("a round", Duration::from_secs(15), |_| {
        hubs.primary.requests() > p && hubs.secondary.requests() > q
    });
    std::thread::sleep(Duration::from_millis(50));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_change_is_followed_within_the_confirmations_not_the_poll_interval() {
    let hubs = Hubs::start().await;
    let s = started(&hubs, &watch_args(&hubs, "10s", "300ms"));
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    let query = hubs.primary.state.lock().unwrap().last_watch_query.clone();
    assert!(
        query.contains("fieldSelector=metadata.name%3Dworker-1"),
        "{query}"
    );
    assert!(query.contains("timeoutSeconds=20"), "{query}");

    hubs.both_claim(&hubs.secondary, "ctrl-b");
    let changed = Instant::now();
    s.wait_until("the switch", Duration::from_secs(5), |s| {
        published(s).0 == "secondary"
    });
    let took = changed.elapsed();
    // About (N - 1) x confirm-interval, against up to the 10 s poll interval for the next
    // tick: a quarter of the poll interval leaves a busy machine room, and still tells the
    // watch from the tick.
    assert!(
        took < Duration::from_secs(10) / 4,
        "followed after {took:?}"
    );
    assert_eq!(published(&s).1, 2);
    assert!(s.logs().contains("count=2"), "{}", s.logs());
    assert!(
        s.metric("kubeslice_worker_hub_watch_events_total{hub=\"primary\",type=\"modified\"}")
            >= 1.0
    );
    assert_eq!(
        s.metric("kubeslice_worker_hub_watch_up{hub=\"secondary\"}"),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_watches_leave_polling_in_charge_with_the_same_protections() {
    for fault in [
        WatchFault::Hang,
        WatchFault::Reset,
        WatchFault::Status(404),
        WatchFault::Status(410),
    ] {
        let hubs = Hubs::start().await;
        hubs.primary.set_watch_fault(fault.clone());
        hubs.secondary.set_watch_fault(fault.clone());
        let s = started(&hubs, &watch_args(&hubs, "400ms", "400ms"));
        std::thread::sleep(Duration::from_millis(500));
        // A watch that hangs after its headers looks like a quiet one until kube's idle deadline
        // (a little above --watch-timeout) drops it; the others fail visibly.
        if fault != WatchFault::Hang {
            assert!(!watches_up(&s), "{fault:?}: a broken watch reported up");
        }

        // An unconfigured endpoint is never followed.
        hubs.primary.claim(ROGUE, "evil");
        hubs.secondary.claim(ROGUE, "evil");
        for _ in 0..4 {
            next_round(&s, &hubs);
        }
        assert_eq!(published(&s), ("primary".into(), 1), "{fault:?}");
        // A single divergent read does not switch.
        hubs.both_claim(&hubs.secondary, "ctrl-b");
        next_round(&s, &hubs);
        hubs.both_claim(&hubs.primary, "ctrl-a");
        for _ in 0..3 {
            next_round(&s, &hubs);
        }
        assert_eq!(published(&s), ("primary".into(), 1), "{fault:?}");
        // A real failover is still followed, by polling.
        hubs.both_claim(&hubs.secondary, "ctrl-b");
        s.wait_until("the switch by polling", Duration::from_secs(10), |s| {
            published(s).0 == "secondary"
        });
        if fault != WatchFault::Hang {
            let restarts = support::metric_sum(
                &s.get("/metrics").1,
                "kubeslice_worker_hub_watch_restarts_total",
            );
            assert!(restarts >= 1.0, "{fault:?}: no watch restart counted");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn flapping_events_never_switch() {
    let hubs = Hubs::start().await;
    let s = started(&hubs, &watch_args(&hubs, "10s", "300ms"));
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    // A change every 100 ms, each naming the secondary under a new identity or the primary:
    // no two reads 300 ms apart see the same candidate, and no claim stands for the span the
    // watches would vouch for (600 ms).
    let reads = hubs.secondary.requests();
    for i in 0..30 {
        if i % 2 == 0 {
            hubs.both_claim(&hubs.secondary, &format!("ctrl-b{i}"));
        } else {
            hubs.both_claim(&hubs.primary, "ctrl");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        hubs.secondary.requests() - reads >= 3,
        "the flapping was read"
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(published(&s), ("primary".into(), 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_storm_costs_a_bounded_number_of_rounds() {
    let hubs = Hubs::start().await;
    let s = started(&hubs, &watch_args(&hubs, "10s", "1s"));
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    let before = hubs.primary.requests();
    let events_before = support::metric_sum(
        &s.get("/metrics").1,
        "kubeslice_worker_hub_watch_events_total",
    );
    let storm = Instant::now();
    let mut changes = 0;
    while storm.elapsed() < Duration::from_secs(2) {
        // Identity changes on the established hub: claim changes, never a switch.
        hubs.primary
            .claim(&hubs.primary.endpoint(), &format!("ctrl-{changes}"));
        changes += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    std::thread::sleep(Duration::from_millis(300));
    let rounds = hubs.primary.requests() - before;
    let events = support::metric_sum(
        &s.get("/metrics").1,
        "kubeslice_worker_hub_watch_events_total",
    ) - events_before;
    // At most one watch-started round per 200 ms: 2 s of storm is 10, plus the edges.
    assert!(
        rounds <= 12,
        "{rounds} rounds for {changes} changes ({events} events)"
    );
    assert!(
        events > rounds as f64 * 2.0,
        "the storm did not reach the sidecar: {events} events, {rounds} rounds"
    );
    assert_eq!(published(&s), ("primary".into(), 1));
}

/// A promotion seen by the watch (hub A still claims A, as an old Active that stopped
/// publishing would; B claims B, fresher), then one confirming read of B answered with
/// `fault`, as reads are when a whole fleet confirms at once: the streak is broken. Returns
/// the sidecar once it switched, and when the fault was lifted. Reads come every 10 minutes
/// otherwise, so the switch can only come from the quick read.
fn broken_once_then_switched(hubs: &Hubs, fault: support::fake_hub::Fault) -> (Sidecar, Instant) {
    let s = started(hubs, &watch_args(hubs, "10m", "2s"));
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until("the first confirming read", Duration::from_secs(10), |s| {
        s.status()["pending"]["count"].as_u64() == Some(1)
    });
    hubs.secondary.set_fault(fault);
    s.wait_until(
        "the failed read broke the streak",
        Duration::from_secs(10),
        |s| s.status()["pending"].is_null(),
    );
    let lifted = Instant::now();
    hubs.secondary.set_fault(support::fake_hub::Fault::None);
    s.wait_until("the switch", Duration::from_secs(30), |s| {
        published(s).0 == "secondary"
    });
    (s, lifted)
}

/// The next read comes at `--confirm-interval`, not a whole `--poll-interval` later.
#[tokio::test(flavor = "multi_thread")]
async fn a_confirming_read_that_fails_is_read_again_at_the_confirm_interval() {
    let hubs = Hubs::start().await;
    let (s, _) = broken_once_then_switched(&hubs, support::fake_hub::Fault::Status(500));
    assert!(
        s.logs()
            .contains("reading again at --confirm-interval, once"),
        "{}",
        s.logs()
    );
}

/// The watch sees the promotion, but the read of the new Active that it starts fails: the
/// change is unread, and the next read comes at `--confirm-interval`, not 10 minutes later.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_the_watch_saw_but_could_not_read_is_read_again_at_the_confirm_interval() {
    let hubs = Hubs::start().await;
    let s = started(&hubs, &watch_args(&hubs, "10m", "2s"));
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    hubs.secondary
        .set_fault(support::fake_hub::Fault::Status(503));
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until(
        "the read the watch started failed",
        Duration::from_secs(10),
        |s| s.status()["hubs"]["secondary"]["reason"] == "server",
    );
    hubs.secondary.set_fault(support::fake_hub::Fault::None);
    s.wait_until("the switch", Duration::from_secs(30), |s| {
        published(s).0 == "secondary"
    });
    assert!(
        s.logs().contains("left a change the watch saw unread"),
        "{}",
        s.logs()
    );
}

/// The same, with the new Active shedding load: 429 and `Retry-After: 4`, longer than the
/// confirm interval. The quick read waits until the hub may be asked again; at the confirm
/// interval it would find the hub paused, silent again, and be spent.
#[tokio::test(flavor = "multi_thread")]
async fn the_quick_read_after_a_429_waits_for_its_retry_after() {
    let hubs = Hubs::start().await;
    // Reads come every 10 minutes otherwise, and the helper waits 30 s for the switch: only a
    // quick read after the pause can make it.
    broken_once_then_switched(&hubs, support::fake_hub::Fault::StatusRetryAfter(429, 4));
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_events_do_not_hurry_the_confirming_reads() {
    let hubs = Hubs::start().await;
    let s = started(&hubs, &watch_args(&hubs, "10s", "1s"));
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    let changed = Instant::now();
    // The primary's claim keeps changing (agreeing with B, then naming a rogue endpoint): an
    // event every few milliseconds, while the winner stays B.
    let mut i = 0;
    while published(&s).0 != "secondary" {
        let endpoint = if i % 2 == 0 {
            hubs.secondary.endpoint()
        } else {
            ROGUE.to_string()
        };
        hubs.primary.claim(&endpoint, "ctrl-b");
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(changed.elapsed() < Duration::from_secs(30), "no switch");
    }
    let took = changed.elapsed();
    assert!(
        took >= Duration::from_millis(1900),
        "confirmed after {took:?}: the storm hurried the reads"
    );
    assert!(i > 50, "too few events to prove anything: {i}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hub_that_never_answers_the_list_is_a_failed_watch_not_one_connecting_for_ever() {
    let hubs = Hubs::start().await;
    hubs.secondary.set_watch_fault(WatchFault::Silent);
    let s = started(&hubs, &watch_args(&hubs, "400ms", "400ms"));
    s.wait_until("the silent list noticed", Duration::from_secs(20), |s| {
        s.status()["watches"]["secondary"]["state"] == "down"
    });
    let st = s.status();
    assert!(
        st["watches"]["secondary"]["lastError"]
            .as_str()
            .unwrap()
            .contains("no answer to the list within"),
        "{st:#}"
    );
    assert!(
        s.metric(
            r#"kubeslice_worker_hub_watch_restarts_total{hub="secondary",reason="list_timeout"}"#
        ) >= 1.0
    );
    // The other hub's watch, and polling, are untouched.
    s.wait_until("the primary's watch up", Duration::from_secs(10), |s| {
        s.status()["watches"]["primary"]["state"] == "up"
    });
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    s.wait_until("the switch by polling", Duration::from_secs(10), |s| {
        published(s).0 == "secondary"
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_request_that_is_never_answered_is_cut_after_the_watch_timeout() {
    let hubs = Hubs::start().await;
    hubs.secondary.set_watch_fault(WatchFault::SilentWatch);
    let mut args = watch_args(&hubs, "400ms", "400ms");
    args.retain(|a| !a.starts_with("--watch-timeout"));
    args.push("--watch-timeout=1s".into());
    let s = started(&hubs, &args);
    // The list is answered; the watch request then gets no byte at all. It is cut at
    // --probe-timeout, and counted.
    s.wait_until("the silent watch cut", Duration::from_secs(30), |s| {
        support::metric_sum(
            &s.get("/metrics").1,
            "kubeslice_worker_hub_watch_restarts_total",
        ) >= 1.0
    });
    let m = s.get("/metrics").1;
    let secondary: f64 = ["watch_start_failed", "watch_failed"]
        .iter()
        .filter_map(|r| {
            support::metric_value(
                &m,
                &format!(
                    r#"kubeslice_worker_hub_watch_restarts_total{{hub="secondary",reason="{r}"}}"#
                ),
            )
        })
        .sum();
    assert!(secondary >= 1.0, "{m}");
    assert!(
        support::metric_value(
            &m,
            r#"kubeslice_worker_hub_watch_restarts_total{hub="primary",reason="watch_failed"}"#
        )
        .is_none(),
        "a healthy watch was cut: {m}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_that_fails_from_the_same_version_lists_afresh() {
    // Lists are answered; every watch request gets 504 `Too large resource version`, as from an
    // API server whose etcd was restored behind the watch. Watching again from the same version
    // would never recover: after three failures in a row the watch lists afresh.
    let hubs = Hubs::start().await;
    hubs.secondary.set_watch_fault(WatchFault::WatchStatus(504));
    let s = started(&hubs, &watch_args(&hubs, "400ms", "400ms"));
    let lists = |s: &Sidecar| {
        support::metric_value(
            &s.get("/metrics").1,
            r#"kubeslice_worker_hub_watch_events_total{hub="secondary",type="list"}"#,
        )
        .unwrap_or(0.0)
    };
    let failed = |s: &Sidecar| {
        support::metric_value(
            &s.get("/metrics").1,
            r#"kubeslice_worker_hub_watch_restarts_total{hub="secondary",reason="watch_start_failed"}"#,
        )
        .unwrap_or(0.0)
    };
    s.wait_until(
        "a list after failed watches",
        Duration::from_secs(40),
        |s| lists(s) >= 2.0,
    );
    let (lists_now, failed_now) = (lists(&s), failed(&s));
    assert!(
        failed_now >= 3.0 * (lists_now - 1.0),
        "{lists_now} lists after only {failed_now} failed watches"
    );
    // What the hub said is cut before /status shows it.
    let error = s.status()["watches"]["secondary"]["lastError"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_default();
    assert!(error.contains("Too large resource version"), "{error}");
    assert!(
        error.chars().count() <= 501 && error.ends_with('…'),
        "{error}"
    );
    // The healthy hub's watch was listed once.
    assert_eq!(
        support::metric_value(
            &s.get("/metrics").1,
            r#"kubeslice_worker_hub_watch_events_total{hub="primary",type="list"}"#,
        ),
        Some(1.0)
    );
}

/// While every hub's watch has heartbeats (events, bookmarks, its end at timeoutSeconds), the
/// reads wait for --watched-poll-interval; a claim change is still read at once. A watch that
/// misses its heartbeat by a probe timeout is restarted, and reads are back at
/// --poll-interval from then on.
#[tokio::test(flavor = "multi_thread")]
async fn reads_wait_while_the_watches_vouch_and_resume_when_one_goes_silent() {
    let hubs = Hubs::start().await;
    for hub in [&hubs.primary, &hubs.secondary] {
        hub.set_bookmarks(Some(Duration::from_millis(100)));
    }
    let mut args = watch_args(&hubs, "400ms", "400ms");
    args.retain(|a| !a.starts_with("--watch-timeout"));
    args.extend([
        "--watch-timeout=1s".to_string(),
        "--watched-poll-interval=1h".into(),
    ]);
    let s = started(&hubs, &args);
    let interval = |s: &Sidecar| s.metric("kubeslice_worker_hub_poll_interval_seconds");
    s.wait_until("reads relaxed", Duration::from_secs(10), |s| {
        interval(s) == 3600.0
    });
    assert_eq!(s.status()["pollingRelaxed"], true);
    let reads = (hubs.primary.requests(), hubs.secondary.requests());
    let bookmarks = (hubs.primary.bookmarks(), hubs.secondary.bookmarks());
    // Ten heartbeats on each watch: a second, over twice the poll interval.
    s.wait_until("ten more bookmarks each", Duration::from_secs(10), |_| {
        hubs.primary.bookmarks() >= bookmarks.0 + 10
            && hubs.secondary.bookmarks() >= bookmarks.1 + 10
    });
    assert_eq!(
        (hubs.primary.requests(), hubs.secondary.requests()),
        reads,
        "a hub was read while the watches vouched for both"
    );
    assert!(
        s.metric(r#"kubeslice_worker_hub_watch_events_total{hub="secondary",type="bookmark"}"#)
            >= 10.0
    );

    // A claim change is read at once, and followed.
    hubs.both_claim(&hubs.secondary, "ctrl-b");
    s.wait_until("the switch", Duration::from_secs(5), |s| {
        published(s).0 == "secondary"
    });
    s.wait_until("reads relaxed again", Duration::from_secs(10), |s| {
        interval(s) == 3600.0
    });

    // The secondary's API server stops sending bookmarks, and its next watch gets headers and
    // then nothing, never its end: that watch is silent.
    hubs.secondary.set_bookmarks(None);
    hubs.secondary.set_watch_fault(WatchFault::Hang);
    let silenced = Instant::now();
    let silent = r#"kubeslice_worker_hub_watch_restarts_total{hub="secondary",reason="silent"}"#;
    s.wait_until("the silence noticed", Duration::from_secs(10), |s| {
        support::metric_value(&s.get("/metrics").1, silent).is_some_and(|n| n >= 1.0)
    });
    // Not before the watch timeout plus the probe timeout (1.3 s) from the hanging watch's
    // start, which came after the silence.
    assert!(
        silenced.elapsed() >= Duration::from_millis(1300),
        "declared silent after {:?}",
        silenced.elapsed()
    );
    let reads = hubs.primary.requests();
    s.wait_until(
        "reads back at --poll-interval",
        Duration::from_secs(10),
        |_| hubs.primary.requests() >= reads + 3,
    );
    assert_eq!(interval(&s), 0.4);
    assert_eq!(s.status()["pollingRelaxed"], false);
    assert_eq!(s.status()["watches"]["primary"]["state"], "up");
    assert_eq!(published(&s), ("secondary".into(), 2));
}

/// The watches, with bookmarks as heartbeats, vouched for both hubs, with N = 3 at `confirm`
/// (a span of two of them), a 10 s poll interval, and the primary claimed.
fn vouching(hubs: &Hubs, confirm: &str) -> Sidecar {
    for hub in [&hubs.primary, &hubs.secondary] {
        hub.set_bookmarks(Some(Duration::from_millis(100)));
    }
    let mut args = watch_args(hubs, "10s", confirm);
    args.retain(|a| !a.starts_with("--watch-timeout"));
    args.extend([
        "--watch-timeout=2s".to_string(),
        "--watched-poll-interval=1h".into(),
    ]);
    let s = started(hubs, &args);
    s.wait_until("both watches are up", Duration::from_secs(10), watches_up);
    let marks = (hubs.primary.bookmarks(), hubs.secondary.bookmarks());
    s.wait_until(
        "ten bookmarks on each watch",
        Duration::from_secs(10),
        |_| hubs.primary.bookmarks() >= marks.0 + 10 && hubs.secondary.bookmarks() >= marks.1 + 10,
    );
    s
}

/// A promotion the watches vouch for (issue #33 item 3): the old Active keeps its claim, the
/// new one claims itself. The follower reads once, when the claim has stood for the span, and
/// that read stands for the three confirming reads: each hub serves one read, not three.
#[tokio::test(flavor = "multi_thread")]
async fn a_promotion_the_watches_vouch_for_costs_each_hub_one_read() {
    let hubs = Hubs::start().await;
    let s = vouching(&hubs, "300ms");
    let reads = (hubs.primary.requests(), hubs.secondary.requests());
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until("the switch", Duration::from_secs(5), |s| {
        published(s).0 == "secondary"
    });
    // The next round is a poll interval (10 s) after the one that switched.
    assert_eq!(
        (
            hubs.primary.requests() - reads.0,
            hubs.secondary.requests() - reads.1
        ),
        (1, 1),
        "reads of (primary, secondary) from the promotion to the switch; logs:\n{}",
        s.logs()
    );
    assert_eq!(s.metric("kubeslice_worker_hub_switches_vouched_total"), 1.0);
    s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
    assert!(
        s.logs().contains("the watches vouch for the confirmations"),
        "{}",
        s.logs()
    );
}

/// A claim that flickers is vouched for only once it has stood for the span since its last
/// change: the read a span after the first change finds it younger and counts as one, and the
/// switch comes no sooner than a span after the last change.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_that_flickers_is_vouched_for_only_a_span_after_its_last_change() {
    // N = 3 at 1 s: a span of 2 s, against flickers 100 ms apart.
    let hubs = Hubs::start().await;
    let s = vouching(&hubs, "1s");
    let reads = hubs.secondary.requests();
    let (b, a) = (hubs.secondary.endpoint(), hubs.primary.endpoint());
    hubs.secondary.claim(&b, "ctrl-b");
    std::thread::sleep(Duration::from_millis(100));
    hubs.secondary.claim(&a, "ctrl-a");
    std::thread::sleep(Duration::from_millis(100));
    hubs.secondary.claim(&b, "ctrl-b");
    let last_change = jiff::Timestamp::now();
    s.wait_until("the switch", Duration::from_secs(10), |s| {
        published(s).0 == "secondary"
    });
    let decided: jiff::Timestamp = s.handoff().unwrap()["decidedAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        decided.duration_since(last_change) >= jiff::SignedDuration::from_secs(2),
        "decided at {decided}, the claim last changed at {last_change}"
    );
    assert!(
        hubs.secondary.requests() - reads >= 2,
        "{} reads of the secondary; logs:\n{}",
        hubs.secondary.requests() - reads,
        s.logs()
    );
    s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
}

/// `secs` from now, in whole seconds, as a controller writes `lastUpdated`.
fn whole(secs: i64) -> String {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + secs)
        .unwrap()
        .to_string()
}

/// B promoted while the old Active's controller left its own claim on A, a minute old and
/// without epochs; the sidecar, its watches vouching, has switched to B.
async fn promoted_beside_the_old_claim() -> (Hubs, Sidecar) {
    let hubs = Hubs::start().await;
    let s = vouching(&hubs, "300ms");
    let (a, b) = (hubs.primary.endpoint(), hubs.secondary.endpoint());
    hubs.primary.claim_at(&a, "ctrl-a", &whole(-60));
    hubs.secondary.claim_at(&b, "ctrl-b", &whole(0));
    s.wait_until("the switch", Duration::from_secs(5), |s| {
        published(s).0 == "secondary"
    });
    (hubs, s)
}

/// A promotion that leaves the old Active's own claim, older than the basis and without
/// epochs, on its hub: its watch follows that claim closely, so reads relax as before the
/// promotion, and a republish that changes only `lastUpdated` is read on the watch's news, not
/// at `--poll-interval`, also after that hub's watch failed and came back. That republish makes the old claim the fresher: two hubs each claiming
/// themselves, a split brain, said at once, and the worker stays (rule 11).
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_older_than_the_basis_is_left_to_its_watch_and_read_when_it_ripens() {
    let (hubs, s) = promoted_beside_the_old_claim().await;
    let a = hubs.primary.endpoint();
    // The switch brings reads back to --poll-interval; the round after it, a poll interval
    // (10 s) later, finds the primary's claim older than the basis and its watch following
    // it: reads relax.
    s.wait_until("reads at --poll-interval", Duration::from_secs(5), |s| {
        s.metric("kubeslice_worker_hub_poll_interval_seconds") == 10.0
    });
    s.wait_until("reads relaxed", Duration::from_secs(20), |s| {
        s.status()["pollingRelaxed"] == true
    });
    assert_eq!(
        s.metric("kubeslice_worker_hub_poll_interval_seconds"),
        3600.0
    );
    assert_eq!(s.metric("kubeslice_worker_hub_split_brain"), 0.0);
    // The primary's watch fails and comes back; its object is not written meanwhile. The
    // watch resumes from its resourceVersion, so what it followed still stands, and reads
    // relax again without a write to show it anew.
    hubs.primary.set_watch_fault(WatchFault::Reset);
    s.wait_until("the primary's watch down", Duration::from_secs(10), |s| {
        s.status()["watches"]["primary"]["state"] == "down"
    });
    s.wait_until("reads at --poll-interval", Duration::from_secs(10), |s| {
        s.status()["pollingRelaxed"] == false
    });
    hubs.primary.set_watch_fault(WatchFault::None);
    s.wait_until("reads relaxed again", Duration::from_secs(30), |s| {
        s.status()["pollingRelaxed"] == true
    });
    // The old Active republishes: the same candidate, a fresher lastUpdated. Only the watch's
    // news reads it now; the next relaxed read is an hour away.
    let reads = hubs.primary.requests();
    hubs.primary.claim_at(&a, "ctrl-a", &whole(0));
    s.wait_until("the split brain said", Duration::from_secs(8), |s| {
        s.metric("kubeslice_worker_hub_split_brain") == 1.0
    });
    assert!(hubs.primary.requests() > reads);
    assert_eq!(published(&s), ("secondary".into(), 2));
    s.wait_metric("kubeslice_worker_hub_switches_total", 1.0);
}

/// The same with the worker's erasure, as the real worker-operator does on the hub it talks to:
/// B's claim is gone after the switch, so the old Active's claim on A wins each round and is
/// held for being no fresher than the basis (rule 5). That hold is left to A's watch too:
/// reads relax, and a republish that changes only A's `lastUpdated` is read on the news.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_held_for_the_basis_beside_an_erased_claim_is_left_to_its_watch() {
    let (hubs, s) = promoted_beside_the_old_claim().await;
    let a = hubs.primary.endpoint();
    hubs.secondary.clear_claim();
    // An erasure is no news (`is_news`): the next poll, --poll-interval (10 s) after the
    // switch's last read, is the round that shows it. So more than 10 s.
    s.wait_until("the old claim held", Duration::from_secs(25), |s| {
        s.status()["held"]["reason"] == "older_than_basis"
    });
    s.wait_until("reads relaxed", Duration::from_secs(20), |s| {
        s.status()["pollingRelaxed"] == true
    });
    let reads = hubs.primary.requests();
    hubs.primary.claim_at(&a, "ctrl-a", &whole(-30));
    s.wait_until("the republish read", Duration::from_secs(8), |_| {
        hubs.primary.requests() > reads
    });
    assert_eq!(published(&s), ("secondary".into(), 2));
}
