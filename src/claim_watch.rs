//! The fast path: a watch on this worker's `Cluster` object on each hub. A claim change starts a
//! round at once instead of at the next tick. The watch only decides *when* to look, never
//! *what* to decide: the round reads every hub under the deadline and applies the same rule.
//!
//! A watch also vouches for its hub between reads. Each event, each bookmark, and the API
//! server's own end of a watch at its `timeoutSeconds` is a heartbeat: the API server answered.
//! So a healthy watch has one at least every `--watch-timeout`, on a quiet hub too. While every
//! hub's watch has had one within `--watch-timeout` plus `--probe-timeout`, the follower reads
//! at `--watched-poll-interval` instead of `--poll-interval`. A watch that fails, or misses its
//! heartbeat by one probe timeout, is restarted and starts a round; polling is back at
//! `--poll-interval` from that round on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde::Serialize;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::claim::{bounded_resource_version, parse_cluster, Claim, Endpoint};
use crate::handoff::Handoff;
use crate::hub::truncate;
use crate::metrics::Metrics;
use crate::resolver::Candidate;
use crate::verdict::HubId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchState {
    /// Listing and starting the first watch.
    Connecting,
    /// A watch request is open.
    Up,
    /// The last attempt failed; retrying with back-off.
    Down,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchView {
    pub state: WatchState,
    pub since: String,
    /// Events and bookmarks received.
    pub events: u64,
    /// RFC 3339: the last heartbeat: an event, a bookmark, or the API server ending the watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Until when the last heartbeat vouches for the hub: none before the first heartbeat after
    /// a (re)connection.
    #[serde(skip)]
    pub vouches_until: Option<Instant>,
    /// The last claim an event or a list showed, numbered, and when: what the worker-operator
    /// erases within milliseconds is seen here, and the resolver takes it as evidence dated
    /// when it was shown (the round that reads it may come minutes later: [`is_news`]).
    #[serde(skip)]
    pub shown: Option<(u64, Claim, jiff::Timestamp)>,
    /// What the watch has followed without a gap, for confirmations the watch vouches for.
    #[serde(skip)]
    pub tracked: Option<Tracked>,
}

/// The object as the watch has followed it: its resourceVersion as the last event or list
/// showed it, and since when every event has shown the same claim, `lastUpdated` included:
/// at equal or absent epochs `lastUpdated` decides which claim wins, so a republish could
/// change the winner that N reads would each have seen. None before a list and while the
/// object does not exist. Kept across a failure: the watch resumes from the last
/// resourceVersion and shows every write made meanwhile (a 410 Gone, or failures in a row,
/// list afresh), and a read counts as vouched for only if it returns the very version the
/// watch last showed, with the very claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    pub resource_version: String,
    pub since: Instant,
    /// The claim every event since `since` has shown; none for no claim.
    pub held: Option<Claim>,
}

impl WatchView {
    pub fn new() -> Self {
        Self {
            state: WatchState::Connecting,
            since: jiff::Timestamp::now().to_string(),
            events: 0,
            last_heartbeat_at: None,
            last_error: None,
            vouches_until: None,
            shown: None,
            tracked: None,
        }
    }

    /// Whether the watch vouches for its hub at `now`: open, with a heartbeat recent enough.
    pub fn vouches(&self, now: Instant) -> bool {
        self.state == WatchState::Up && self.vouches_until.is_some_and(|until| now < until)
    }
}

impl Default for WatchView {
    fn default() -> Self {
        Self::new()
    }
}

/// Set by the follower while this hub's claim is older than the decision's basis and the watch
/// has followed the object up to the read that found it so. The watch then raises news on any
/// change of the claim, `lastUpdated` included: at equal or absent epochs a republish alone can
/// make that claim fresher than the basis, and without news only a read at `--poll-interval`
/// would see it.
#[derive(Debug, Clone, Default)]
pub struct Closely(Arc<AtomicBool>);

impl Closely {
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::SeqCst);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The most of a failure's text that `/status` and the logs show: a hub's answer is cut.
const MAX_ERROR_CHARS: usize = 500;

/// After a list that got no answer, the pause before the watch starts over.
const LIST_RETRY: Duration = Duration::from_secs(10);

/// Watches that fail this many times in a row from the same resourceVersion, with nothing
/// delivered, end in a new list: a watch ahead of an etcd restored from a backup, or a
/// version the API server no longer serves without saying `410 Gone`, never recovers by
/// watching again from it. client-go lists again after any such failure.
const RELIST_AFTER: u32 = 3;

/// What a claim change is compared on: the candidate, as the resolver compares it (without
/// `lastUpdated`, which the Active republishes on a timer). A claim naming an unconfigured
/// endpoint is none; the next poll reports it.
type Seen = Option<Candidate>;

pub struct HubWatch {
    pub hub: HubId,
    pub namespace: String,
    pub cluster: String,
    /// `timeoutSeconds` of each watch request. The API server ends the watch then, and it is
    /// re-established where it left off: the longest a healthy watch goes without a heartbeat.
    pub timeout: Duration,
    pub trigger: Arc<Notify>,
    /// `--probe-timeout`: how long a list or a watch request may take to be answered, and by how
    /// much a heartbeat may be late before the watch counts as silent.
    pub deadline: Duration,
    /// The configured hubs, to read a claim's candidate against.
    pub hubs: Vec<(HubId, Endpoint)>,
    pub metrics: Metrics,
    /// This watch's view, for `/status` and the poll loop.
    pub view: watch::Sender<WatchView>,
    /// Whether news includes a change of `lastUpdated` alone ([`Closely`]).
    pub closely: Closely,
    /// The published decision: an erasure, and the same claim for its hub again after an
    /// erasure, are no news ([`is_news`]).
    pub decided: watch::Receiver<Option<Handoff>>,
}

/// Why a watch request is over.
enum End {
    /// The API server ended it at `timeoutSeconds`: watch again from where it left off.
    Timeout,
    /// `410 Gone`: its resourceVersion is too old; list again.
    Gone,
    /// A failure, with the metric's reason and the detail.
    Failed(&'static str, String),
}

impl HubWatch {
    pub async fn run(
        self,
        mut clients: watch::Receiver<Option<kube::Client>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let client = clients.borrow_and_update().clone();
            let Some(client) = client else {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    changed = clients.changed() => if changed.is_err() { return },
                }
                continue;
            };
            let resource = ApiResource {
                group: "controller.kubeslice.io".into(),
                version: "v1alpha1".into(),
                api_version: "controller.kubeslice.io/v1alpha1".into(),
                kind: "Cluster".into(),
                plural: "clusters".into(),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client, &self.namespace, &resource);
            tokio::select! {
                _ = shutdown.changed() => return,
                // A rotated CA built a new client: watch with that one, from a new list.
                changed = clients.changed() => if changed.is_err() { return },
                () = self.follow(&api) => {}
            }
        }
    }

    /// Lists, then watches from the list's resourceVersion for as long as it can, re-watching
    /// where it left off; never returns.
    async fn follow(&self, api: &Api<DynamicObject>) {
        let fields = format!("metadata.name={}", self.cluster);
        let params = WatchParams::default()
            .fields(&fields)
            .timeout(self.timeout_seconds().as_secs() as u32);
        // A new client (a rotated CA) starts from nothing: no heartbeat vouches for it yet.
        self.set(WatchState::Connecting, None);
        let timeout = self.timeout_seconds();
        let mut last: Option<Seen> = None;
        // The last claim shown since (re)connecting, erasures aside.
        let mut last_claim: Seen = None;
        let mut version: Option<String> = None;
        let mut backoff = Backoff::default();
        // Watches from `version` that failed in a row, with nothing delivered.
        let mut failed_in_a_row: u32 = 0;
        // The last heartbeat; none after a failure, so only a new one vouches for the hub.
        let mut beat: Option<Instant> = None;
        loop {
            if failed_in_a_row >= RELIST_AFTER && version.is_some() {
                tracing::debug!(
                    hub = self.hub.as_str(),
                    failures = failed_in_a_row,
                    "the watch failed from the same resourceVersion {RELIST_AFTER} times in a row; listing afresh"
                );
                version = None;
            }
            let mut rv = match version.take() {
                Some(rv) => rv,
                None => match self.list(api, &fields).await {
                    Ok((seen, rv)) => {
                        failed_in_a_row = 0;
                        self.compare(&mut last, &mut last_claim, seen);
                        rv
                    }
                    Err((reason, detail)) => {
                        self.failed(reason, &detail, &mut beat);
                        let pause = match reason {
                            "list_timeout" => LIST_RETRY,
                            _ => backoff.next(),
                        };
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                },
            };
            let answer = match tokio::time::timeout(self.deadline, api.watch(&params, &rv)).await {
                Ok(Ok(stream)) => Ok(stream),
                // The resourceVersion is too old to watch from: list again.
                Ok(Err(kube::Error::Api(e))) if e.code == 410 => Err(("gone", e.to_string())),
                Ok(Err(e)) => Err(("watch_start_failed", e.to_string())),
                Err(_) => Err((
                    "watch_start_failed",
                    format!(
                        "no answer to the watch request within {} (--probe-timeout)",
                        humantime::format_duration(self.deadline)
                    ),
                )),
            };
            let stream = match answer {
                Ok(stream) => stream,
                Err((reason, detail)) => {
                    self.failed(reason, &detail, &mut beat);
                    failed_in_a_row += 1;
                    version = (reason != "gone").then_some(rv);
                    tokio::time::sleep(backoff.next()).await;
                    continue;
                }
            };
            if self.view.borrow().state != WatchState::Up {
                tracing::info!(hub = self.hub.as_str(), "the watch is up");
                self.set(WatchState::Up, None);
            }
            let started = Instant::now();
            let from = rv.clone();
            let mut stream = stream.boxed();
            let end = loop {
                let silent_at = beat.map_or(started, |b| b.max(started)) + timeout + self.deadline;
                let item = tokio::select! {
                    () = tokio::time::sleep_until(silent_at) => break End::Failed("silent", format!(
                        "no event, bookmark or end of the watch for {} (--watch-timeout) plus {} (--probe-timeout)",
                        humantime::format_duration(timeout),
                        humantime::format_duration(self.deadline),
                    )),
                    item = stream.next() => item,
                };
                let event = match item {
                    // The API server ends a watch at its timeoutSeconds, counted from a little
                    // before the answer reached us: routine. A stream that ends sooner was
                    // cut (a load balancer, a closing API server), and must not become a
                    // tight loop of requests.
                    None if started.elapsed() + self.deadline >= timeout => break End::Timeout,
                    None => {
                        break End::Failed("ended", "the watch ended before its timeout".into())
                    }
                    Some(Err(e)) => break End::Failed("watch_failed", e.to_string()),
                    Some(Ok(event)) => event,
                };
                let (kind, seen) = match event {
                    WatchEvent::Added(o) => ("added", Some(self.advance(&mut rv, &o))),
                    WatchEvent::Modified(o) => ("modified", Some(self.advance(&mut rv, &o))),
                    WatchEvent::Deleted(o) => {
                        self.advance(&mut rv, &o);
                        self.view.send_modify(|view| view.tracked = None);
                        ("deleted", Some(None))
                    }
                    WatchEvent::Bookmark(b) => {
                        rv = b.metadata.resource_version;
                        ("bookmark", None)
                    }
                    WatchEvent::Error(e) if e.code == 410 => break End::Gone,
                    WatchEvent::Error(e) => {
                        break End::Failed("watch_error", format!("{} ({})", e.message, e.code))
                    }
                };
                self.metrics
                    .watch_events
                    .with_label_values(&[self.hub.as_str(), kind])
                    .inc();
                self.view.send_modify(|view| view.events += 1);
                self.beat(&mut beat);
                if let Some(seen) = seen {
                    self.compare(&mut last, &mut last_claim, seen);
                }
            };
            match end {
                // The API server answered to the end: a heartbeat, and a healthy watch.
                End::Timeout => {
                    self.beat(&mut beat);
                    backoff = Backoff::default();
                    failed_in_a_row = 0;
                    version = Some(rv);
                }
                End::Gone => {
                    self.failed(
                        "gone",
                        "the watch's resourceVersion is too old (410 Gone); listing again",
                        &mut beat,
                    );
                    tokio::time::sleep(backoff.next()).await;
                }
                End::Failed(reason, detail) => {
                    self.failed(reason, &detail, &mut beat);
                    // A watch that moved on counts from its new version.
                    failed_in_a_row = if rv == from { failed_in_a_row + 1 } else { 1 };
                    version = Some(rv);
                    tokio::time::sleep(backoff.next()).await;
                }
            }
        }
    }

    /// Lists this worker's `Cluster` object under the deadline: its claim and the list's
    /// resourceVersion, or the metric's reason and the detail of the failure.
    async fn list(
        &self,
        api: &Api<DynamicObject>,
        fields: &str,
    ) -> Result<(Seen, String), (&'static str, String)> {
        let params = ListParams::default().fields(fields);
        let list = match tokio::time::timeout(self.deadline, api.list(&params)).await {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => return Err(("list_failed", e.to_string())),
            Err(_) => {
                return Err((
                    "list_timeout",
                    format!(
                        "no answer to the list within {} (--probe-timeout)",
                        humantime::format_duration(self.deadline)
                    ),
                ))
            }
        };
        self.metrics
            .watch_events
            .with_label_values(&[self.hub.as_str(), "list"])
            .inc();
        let Some(rv) = list.metadata.resource_version.filter(|v| !v.is_empty()) else {
            return Err((
                "no_resource_version",
                "the list carried no resourceVersion".into(),
            ));
        };
        let seen = match list.items.first() {
            Some(o) => self.show(o, true),
            None => {
                self.view.send_modify(|view| view.tracked = None);
                None
            }
        };
        Ok((seen, rv))
    }

    /// A round at once when the claim changed in a way that could move the decision
    /// ([`is_news`]).
    fn compare(&self, last: &mut Option<Seen>, last_claim: &mut Seen, seen: Seen) {
        let decided = self.decided.borrow().as_ref().map(|h| h.hub);
        let news = is_news(last.as_ref(), last_claim.as_ref(), &seen, decided);
        if seen.is_some() {
            last_claim.clone_from(&seen);
        }
        *last = Some(seen);
        if news {
            tracing::debug!(
                hub = self.hub.as_str(),
                "the claim changed; reading all hubs now"
            );
            self.trigger.notify_one();
        }
    }

    /// `timeoutSeconds` as the API server gets it: whole seconds, at most 295.
    fn timeout_seconds(&self) -> Duration {
        Duration::from_secs(self.timeout.as_secs().clamp(1, 295))
    }

    /// The object's claim, and the resourceVersion to watch from next.
    fn advance(&self, rv: &mut String, object: &DynamicObject) -> Seen {
        if let Some(v) = &object.metadata.resource_version {
            rv.clone_from(v);
        }
        self.show(object, false)
    }

    /// The object's candidate; a claim it carries is kept in the view as the last one shown,
    /// and the object is tracked. `fresh`: from a list, after which nothing before is known.
    fn show(&self, object: &DynamicObject, fresh: bool) -> Seen {
        let claim = claim_in(object);
        let seen = claim.as_ref().and_then(|c| Candidate::of(c, &self.hubs));
        let held = claim.clone();
        let version = object
            .metadata
            .resource_version
            .as_deref()
            .and_then(bounded_resource_version);
        let now = Instant::now();
        let mut changed = false;
        self.view.send_modify(|view| {
            changed = view.tracked.as_ref().is_none_or(|t| t.held != held);
            view.tracked = version.map(|resource_version| {
                let since = match &view.tracked {
                    Some(t) if !fresh && t.held == held => t.since,
                    _ => now,
                };
                Tracked {
                    resource_version,
                    since,
                    held,
                }
            });
            if let Some(claim) = claim {
                let n = view.shown.as_ref().map_or(0, |(n, _, _)| *n) + 1;
                view.shown = Some((n, claim, jiff::Timestamp::now()));
            }
        });
        // Read after the view is updated: the follower sets the flag before it looks at the
        // view, so a change is either in what it sees or raises news here.
        if changed && self.closely.get() {
            tracing::debug!(
                hub = self.hub.as_str(),
                "a claim older than the basis changed; reading all hubs"
            );
            self.trigger.notify_one();
        }
        seen
    }

    fn beat(&self, beat: &mut Option<Instant>) {
        let now = Instant::now();
        *beat = Some(now);
        self.view.send_modify(|view| {
            view.last_heartbeat_at = Some(jiff::Timestamp::now().to_string());
            view.vouches_until = Some(now + self.timeout_seconds() + self.deadline);
        });
    }

    /// A failed watch: counted, shown `down`, and a round at once, since the hub is no longer
    /// watched and polling is back at `--poll-interval`. Logged once per run of failures.
    fn failed(&self, reason: &str, detail: &str, beat: &mut Option<Instant>) {
        let hub = self.hub.as_str();
        // An error's text can carry what the hub answered: bounded, as a read's is.
        let detail = truncate(detail, MAX_ERROR_CHARS);
        let detail = detail.as_str();
        *beat = None;
        self.metrics
            .watch_restarts
            .with_label_values(&[hub, reason])
            .inc();
        if self.view.borrow().state == WatchState::Down {
            tracing::debug!(hub, reason, detail, "the watch failed again");
        } else {
            tracing::info!(
                hub,
                reason,
                detail,
                "the watch failed; polling at --poll-interval, retrying with back-off"
            );
        }
        self.set(WatchState::Down, Some(detail.to_string()));
        self.trigger.notify_one();
    }

    fn set(&self, state: WatchState, error: Option<String>) {
        self.metrics
            .watch_up
            .with_label_values(&[self.hub.as_str()])
            .set(i64::from(state == WatchState::Up));
        self.view.send_modify(|view| {
            if view.state != state {
                view.since = jiff::Timestamp::now().to_string();
            }
            // What the watch followed stays: it resumes from its resourceVersion and shows
            // every write since, or lists afresh after 410 Gone or with a new client. Until
            // then it vouches for nothing.
            if state != WatchState::Up {
                view.vouches_until = None;
            }
            view.state = state;
            if error.is_some() {
                view.last_error = error;
            }
        });
    }
}

/// The longest pause between two attempts of a watch.
const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// The watch's back-off, after client-go's: 0.8 s doubling, each pause stretched by up to
/// 100 % at random so that a fleet does not retry in step, and never longer than 30 s (where
/// client-go's jitter can reach 60 s); reset by a watch that lasted to its end.
#[derive(Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    fn next(&mut self) -> Duration {
        let pause = backoff_pause(self.failures, fastrand::f64());
        self.failures = self.failures.saturating_add(1);
        pause
    }
}

/// The pause after `failures` failures in a row, `jitter` in [0, 1): 0.8 s·2^failures
/// stretched by `jitter`, or, where that passes 30 s, between 15 and 30 s: still spread.
fn backoff_pause(failures: u32, jitter: f64) -> Duration {
    let base = Duration::from_millis(800).saturating_mul(1 << failures.min(6));
    let stretched = base.mul_f64(1.0 + jitter);
    if stretched <= BACKOFF_CAP {
        stretched
    } else {
        BACKOFF_CAP.mul_f64(0.5 + jitter / 2.0)
    }
}

/// Whether a watch that last showed `last` (none: nothing since it (re)connected), whose
/// last claim erasures aside was `last_claim`, and now shows `seen` starts a round at once,
/// while the published decision is on `decided`.
///
/// Every change of the candidate is news, except two that cannot move the decision:
/// - **an erasure** (a claim gone): a hub without a claim has no say (rule 2), and the claim
///   the watch showed stays evidence, dated when it was shown;
/// - **the same claim again after an erasure, naming the hub the decision is on**: it can
///   only keep the decision, and it is evidence at the next round as it is (the basis, rule
///   10's clock, rule 11). A claim for that hub that differs from the last one shown (another
///   hub's controller now naming it, a new identity) is news, so that reads and `/status`
///   show it soon.
///
/// Against KubeSlice's own controller these are every change in the steady state: the Active
/// republishes what the worker-operator erased within milliseconds, every 30 s, and the
/// Standby's mirror copies both. Without a decision every change is news, and so is the
/// first list after (re)connecting: something may have changed while the watch was away.
/// A claim the follower follows closely raises news in [`HubWatch::show`] on its own terms.
pub fn is_news(
    last: Option<&Seen>,
    last_claim: Option<&Candidate>,
    seen: &Seen,
    decided: Option<HubId>,
) -> bool {
    match (last, decided, seen) {
        (None, _, _) => true,
        (Some(last), _, _) if last == seen => false,
        (Some(_), None, _) => true,
        (Some(_), Some(_), None) => false,
        (Some(_), Some(decided), Some(c)) if c.hub == decided => last_claim != Some(c),
        (Some(_), Some(_), Some(_)) => true,
    }
}

/// The claim a watched object carries; an object that can't be read carries none (the round
/// that follows will say why).
fn claim_in(obj: &DynamicObject) -> Option<Claim> {
    let bytes = serde_json::to_vec(obj).ok()?;
    parse_cluster(&bytes).ok()?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_is_a_claim_that_could_move_the_decision() {
        let on = |hub| {
            Some(Candidate {
                hub,
                identity: Some("ctrl".into()),
            })
        };
        let (a, b) = (HubId::PRIMARY, HubId::SECONDARY);
        let decided_a = Some(a);
        // (last, last claim, seen, decided, news)
        type Case = (Option<Seen>, Seen, Seen, Option<HubId>, bool);
        let cases: [Case; 14] = [
            // The first list after (re)connecting, whatever it shows.
            (None, None, None, decided_a, true),
            (None, None, on(a), decided_a, true),
            // No decision yet: every change.
            (Some(on(a)), on(a), None, None, true),
            (Some(None), on(a), on(a), None, true),
            (Some(on(a)), on(a), on(a), None, false),
            // Unchanged.
            (Some(on(b)), on(b), on(b), decided_a, false),
            (Some(None), on(a), None, decided_a, false),
            // The Active republishing itself after the worker's erasure (or the Standby
            // mirroring it), and the erasure.
            (Some(None), on(a), on(a), decided_a, false),
            (Some(on(a)), on(a), None, decided_a, false),
            // A claim for the decision's hub that differs from the last one shown: the
            // Standby now naming the Active, or naming it after an erasure.
            (Some(on(b)), on(b), on(a), decided_a, true),
            (Some(None), on(b), on(a), decided_a, true),
            // Another hub named: a promotion, a split brain, a demotion naming the other.
            (Some(None), on(a), on(b), decided_a, true),
            (Some(on(a)), on(a), on(b), decided_a, true),
            // An unconfigured endpoint, after a claim: no candidate, no say.
            (Some(on(b)), on(b), None, decided_a, false),
        ];
        for (last, last_claim, seen, decided, news) in cases {
            assert_eq!(
                is_news(last.as_ref(), last_claim.as_ref(), &seen, decided),
                news,
                "last {last:?}, last claim {last_claim:?}, seen {seen:?}, decided {decided:?}"
            );
        }
    }

    #[test]
    fn the_back_off_doubles_from_0_8_s_and_never_passes_30_s() {
        let jitters = [0.0, 0.25, 0.5, 0.75, 0.999_999];
        for failures in 0..40 {
            for jitter in jitters {
                let pause = backoff_pause(failures, jitter);
                assert!(
                    pause <= BACKOFF_CAP,
                    "{failures} failures, jitter {jitter}: {pause:?}"
                );
                assert!(
                    pause >= Duration::from_millis(800),
                    "{failures}, {jitter}: {pause:?}"
                );
            }
        }
        assert_eq!(backoff_pause(0, 0.0), Duration::from_millis(800));
        assert_eq!(backoff_pause(2, 0.5), Duration::from_millis(4800));
        // At the cap the pauses still spread, so that a fleet does not retry in step.
        assert_eq!(backoff_pause(20, 0.0), Duration::from_secs(15));
        assert!(backoff_pause(20, 0.999_999) > Duration::from_millis(29_999));
    }
}
