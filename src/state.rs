//! What the poll loop knows, shared with the HTTP server. Written by the loop, read by handlers;
//! locks are held for a copy, never across an await.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::handoff::Handoff;
use crate::hub::Probe;
use crate::resolver::Pending;
use crate::verdict::{HubId, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Two hubs, polled.
    Follow,
    /// One hub: published once, never polled.
    SingleHub,
}

/// One hub's last verdict, as `/status` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HubView {
    pub endpoint: String,
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimView>,
    pub at: String,
    pub latency_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    pub endpoint: String,
    pub identity: Option<String>,
    pub last_updated: Option<String>,
}

impl HubView {
    pub fn new(endpoint: &str, probe: &Probe, at: jiff::Timestamp) -> Self {
        let (reason, detail, claim) = match &probe.verdict {
            Verdict::Claim(c) => (
                None,
                None,
                Some(ClaimView {
                    endpoint: c.endpoint.to_string(),
                    identity: c.identity.clone(),
                    last_updated: c.last_updated.map(|t| t.to_string()),
                }),
            ),
            Verdict::NoClaim => (None, None, None),
            Verdict::Error(e) => (Some(e.reason.as_str()), Some(e.detail.clone()), None),
        };
        Self {
            endpoint: endpoint.to_string(),
            verdict: probe.verdict.kind(),
            reason,
            detail,
            claim,
            at: at.to_string(),
            latency_ms: (probe.latency.as_secs_f64() * 1e6).round() / 1e3,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub mode: Mode,
    pub published: Option<Handoff>,
    pub hubs: BTreeMap<HubId, HubView>,
    pub pending: Option<Pending>,
    pub confirmations_required: u32,
    pub last_round_at: Option<String>,
    /// How long the last round took, probes included: at most the probe timeout plus a little.
    pub last_round_ms: Option<f64>,
    /// Filled in by the `/status` handler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<crate::restart::RestartView>,
    /// Filled in by the `/status` handler; empty with `--watch=false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watches: Option<BTreeMap<HubId, crate::claim_watch::WatchView>>,
}

pub struct Shared {
    status: Mutex<Status>,
    /// The end of the last round; startup counts as one, so a first round gets the same grace.
    last_round: Mutex<Instant>,
    published: watch::Sender<Option<Handoff>>,
    /// A loop that has not completed a round for this long is reported unhealthy.
    stale_after: Duration,
}

impl Shared {
    pub fn new(mode: Mode, confirmations: u32, stale_after: Duration) -> Self {
        Self {
            status: Mutex::new(Status {
                mode,
                published: None,
                hubs: BTreeMap::new(),
                pending: None,
                confirmations_required: confirmations,
                last_round_at: None,
                last_round_ms: None,
                restart: None,
                watches: None,
            }),
            last_round: Mutex::new(Instant::now()),
            published: watch::channel(None).0,
            stale_after,
        }
    }

    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    pub fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut lock(&self.status));
    }

    pub fn round_completed(&self, now: Instant) {
        *lock(&self.last_round) = now;
    }

    pub fn set_published(&self, handoff: Handoff) {
        self.update(|s| s.published = Some(handoff.clone()));
        self.published.send_replace(Some(handoff));
    }

    /// Follows every published decision (the restart side listens here).
    pub fn subscribe(&self) -> watch::Receiver<Option<Handoff>> {
        self.published.subscribe()
    }

    pub fn ready(&self) -> bool {
        self.published.borrow().is_some()
    }

    /// The poll loop is alive: it completed a round recently. A single-hub sidecar has no loop
    /// and is alive while it serves.
    pub fn healthy(&self, now: Instant) -> bool {
        if lock(&self.status).mode == Mode::SingleHub {
            return true;
        }
        now.saturating_duration_since(*lock(&self.last_round)) <= self.stale_after
    }
}

/// A poisoned lock only means a panic elsewhere while holding it; the data is still the best we
/// have, so keep serving it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
