//! The fast path: a watch on this worker's `Cluster` object on each hub. A claim change starts a
//! round at once instead of at the next tick. The watch only decides *when* to look, never
//! *what* to decide: the round reads every hub under the deadline and applies the same rule.
//! Polling stays as it is; a watch that fails (or hangs behind a proxy that breaks streaming)
//! only costs that hub its fast path.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use serde::Serialize;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::claim::{parse_cluster, Endpoint};
use crate::metrics::Metrics;
use crate::resolver::Candidate;
use crate::verdict::HubId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchState {
    /// Listing and starting the watch.
    Connecting,
    /// Events are flowing.
    Up,
    /// The last attempt failed; retrying with back-off.
    Down,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchView {
    pub state: WatchState,
    pub since: String,
    pub events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl WatchView {
    pub fn new() -> Self {
        Self {
            state: WatchState::Connecting,
            since: jiff::Timestamp::now().to_string(),
            events: 0,
            last_error: None,
        }
    }
}

impl Default for WatchView {
    fn default() -> Self {
        Self::new()
    }
}

/// After a list that got no answer, the pause before the watch starts over.
const LIST_RETRY: Duration = Duration::from_secs(10);

/// What a claim change is compared on: the candidate, as the resolver compares it (without
/// `lastUpdated`, which the Active republishes on a timer). A claim naming an unconfigured
/// endpoint is none; the next poll reports it.
type Seen = Option<Candidate>;

pub struct HubWatch {
    pub hub: HubId,
    pub namespace: String,
    pub cluster: String,
    /// `timeoutSeconds` of each watch request; kube's watcher adds a client-side idle deadline a
    /// little above it, so a watch that hangs silently is dropped and re-established.
    pub timeout: Duration,
    pub trigger: Arc<Notify>,
    /// How long a list may take (`--probe-timeout`): a hub that accepts the list and never
    /// answers it is a failed list, not a watch forever `connecting`.
    pub list_deadline: Duration,
    /// The configured hubs, to read a claim's candidate against.
    pub hubs: Vec<(HubId, Endpoint)>,
    pub metrics: Metrics,
    /// This watch's view, for `/status`.
    pub view: watch::Sender<WatchView>,
}

impl HubWatch {
    pub async fn run(
        self,
        mut clients: watch::Receiver<Option<kube::Client>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let hub = self.hub.as_str();
        loop {
            let client = clients.borrow_and_update().clone();
            let Some(client) = client else {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    changed = clients.changed() => if changed.is_err() { return },
                }
                continue;
            };
            self.set(WatchState::Connecting, None);
            let resource = ApiResource {
                group: "controller.kubeslice.io".into(),
                version: "v1alpha1".into(),
                api_version: "controller.kubeslice.io/v1alpha1".into(),
                kind: "Cluster".into(),
                plural: "clusters".into(),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client, &self.namespace, &resource);
            let config = watcher::Config::default()
                .fields(&format!("metadata.name={}", self.cluster))
                .timeout(self.timeout.as_secs().clamp(1, 295) as u32);
            // The default back-off is client-go's: exponential with jitter, capped.
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            let mut last: Option<Seen> = None;
            let mut initial: Seen = None;
            let mut healthy = true;
            // While a list is outstanding: when it must have been answered. kube's watcher
            // puts no deadline on it.
            let mut list_due: Option<Instant> = Some(Instant::now() + self.list_deadline);
            loop {
                let item = tokio::select! {
                    _ = shutdown.changed() => return,
                    // A rotated CA built a new client: watch with that one.
                    changed = clients.changed() => {
                        if changed.is_err() { return }
                        break;
                    }
                    _ = sleep_until(list_due) => {
                        let detail = format!(
                            "no answer to the list within {} (--probe-timeout)",
                            humantime::format_duration(self.list_deadline)
                        );
                        self.restarted("list_timeout", &detail, &mut healthy);
                        // Start over after a pause: a hub that swallows requests is asked
                        // again at most once per LIST_RETRY.
                        tokio::select! {
                            _ = shutdown.changed() => return,
                            _ = tokio::time::sleep(LIST_RETRY) => {}
                        }
                        break;
                    }
                    item = events.next() => item,
                };
                let Some(item) = item else {
                    // The stream ended: look now, then start over.
                    self.restarted("ended", "the watch stream ended", &mut healthy);
                    break;
                };
                let event = match item {
                    Ok(event) => event,
                    Err(e) => {
                        let reason = match &e {
                            watcher::Error::InitialListFailed(_) => "list_failed",
                            watcher::Error::WatchStartFailed(_) => "watch_start_failed",
                            watcher::Error::WatchError(s) if s.code == 410 => "gone",
                            watcher::Error::WatchError(_) => "watch_error",
                            watcher::Error::WatchFailed(_) => "watch_failed",
                            watcher::Error::NoResourceVersion => "no_resource_version",
                        };
                        self.restarted(reason, &e.to_string(), &mut healthy);
                        // The watcher backs off now; its next list starts with another `Init`.
                        list_due = None;
                        continue;
                    }
                };
                let kind = match &event {
                    Event::Apply(_) => "apply",
                    Event::Delete(_) => "delete",
                    Event::Init => "init",
                    Event::InitApply(_) => "init_apply",
                    Event::InitDone => "init_done",
                };
                self.metrics
                    .watch_events
                    .with_label_values(&[hub, kind])
                    .inc();
                // kube's watcher resumes from the last resourceVersion without a new list, so
                // the first object event after a failure is the sign that it is back. `Init`
                // and `InitApply` are not: `Init` comes before each list attempt, failing or not.
                let delivered =
                    matches!(event, Event::Apply(_) | Event::Delete(_) | Event::InitDone);
                if delivered && !healthy {
                    tracing::info!(hub, "the watch is up again");
                    self.set(WatchState::Up, None);
                }
                if delivered {
                    healthy = true;
                }
                list_due = match event {
                    Event::Init => Some(Instant::now() + self.list_deadline),
                    Event::InitApply(_) => list_due,
                    _ => None,
                };
                let now_seen = match event {
                    Event::Init => {
                        initial = None;
                        continue;
                    }
                    Event::InitApply(obj) => {
                        initial = claim_of(&obj, &self.hubs);
                        continue;
                    }
                    Event::InitDone => {
                        self.set(WatchState::Up, None);
                        initial.take()
                    }
                    Event::Apply(obj) => claim_of(&obj, &self.hubs),
                    Event::Delete(_) => None,
                };
                self.count_event();
                if last.as_ref() != Some(&now_seen) {
                    // The first list after (re)connecting also counts: something may have
                    // changed while the watch was away.
                    tracing::debug!(hub, "the claim changed; reading all hubs now");
                    last = Some(now_seen);
                    self.trigger.notify_one();
                }
            }
        }
    }

    fn restarted(&self, reason: &str, detail: &str, healthy: &mut bool) {
        let hub = self.hub.as_str();
        self.metrics
            .watch_restarts
            .with_label_values(&[hub, reason])
            .inc();
        self.metrics.watch_up.with_label_values(&[hub]).set(0);
        if *healthy {
            tracing::info!(
                hub,
                reason,
                detail,
                "the watch failed; polling continues, retrying with back-off"
            );
        } else {
            tracing::debug!(hub, reason, detail, "the watch failed again");
        }
        *healthy = false;
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
            view.state = state;
            if error.is_some() {
                view.last_error = error;
            }
        });
    }

    fn count_event(&self) {
        self.view.send_modify(|v| v.events += 1);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The candidate a watched object names; an object that can't be read names none (the round
/// that follows will say why).
fn claim_of(obj: &DynamicObject, hubs: &[(HubId, Endpoint)]) -> Seen {
    let bytes = serde_json::to_vec(obj).ok()?;
    Candidate::of(&parse_cluster(&bytes).ok()??, hubs)
}
