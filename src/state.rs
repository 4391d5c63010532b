//! What the poll loop knows, as the snapshot it publishes for `/status`, `/healthz` and
//! `/readyz`, and for the restart side.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::claim::Claim;
use crate::handoff::Handoff;
use crate::hub::Probe;
use crate::overrides::{Kind, Overrides};
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
    /// The last claim this hub published, and when it was read: a claim that vanished (the
    /// worker-operator erases it on the hub it talks to) is still shown here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen_claim: Option<SeenClaim>,
    pub at: String,
    pub latency_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    pub endpoint: String,
    pub identity: Option<String>,
    pub last_updated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

impl ClaimView {
    pub fn of(c: &Claim) -> Self {
        Self {
            endpoint: c.endpoint.to_string(),
            identity: c.identity.clone(),
            last_updated: c.last_updated.map(|t| t.to_string()),
            epoch: c.epoch,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenClaim {
    #[serde(flatten)]
    pub claim: ClaimView,
    /// RFC 3339: the round that read it.
    pub seen_at: String,
}

/// A winning claim for another hub that did not move the worker this round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldView {
    pub candidate: HubId,
    pub identity: Option<String>,
    /// One of [`crate::resolver::Hold::REASONS`]: `older_than_basis`, `unauthenticated`, `pinned_hub_unreachable`, `drain_no_alternative` or `split_brain`.
    pub reason: &'static str,
    /// In words, for people.
    pub why: String,
    /// RFC 3339: when it was first held, in this run of holds.
    pub since: String,
}

impl HubView {
    pub fn new(
        endpoint: &str,
        probe: &Probe,
        at: jiff::Timestamp,
        last_seen_claim: Option<SeenClaim>,
    ) -> Self {
        let (reason, detail, claim) = match &probe.verdict {
            Verdict::Claim(c) => (None, None, Some(ClaimView::of(c))),
            Verdict::NoClaim => (None, None, None),
            Verdict::Error(e) => (Some(e.reason.as_str()), Some(e.detail.clone()), None),
        };
        Self {
            endpoint: endpoint.to_string(),
            verdict: probe.verdict.kind(),
            reason,
            detail,
            claim,
            last_seen_claim,
            at: at.to_string(),
            latency_ms: (probe.latency.as_secs_f64() * 1e6).round() / 1e3,
        }
    }
}

/// The follower's view: what it last decided and read. The follower is its only writer; the
/// HTTP server and the restart side read it from a `watch` channel.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowerView {
    pub mode: Mode,
    pub published: Option<Handoff>,
    pub hubs: BTreeMap<HubId, HubView>,
    pub pending: Option<Pending>,
    /// A winner that does not move the worker, and why, while it lasts.
    pub held: Option<HeldView>,
    /// The operator's pin and drain; absent when `--override-dir` is not set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overrides: Option<OverridesView>,
    pub confirmations_required: u32,
    /// Reads come at `--watched-poll-interval`: every hub's watch vouches for its hub.
    pub polling_relaxed: bool,
    pub last_round_at: Option<String>,
    /// How long the last round took, probes included: at most the probe timeout plus a little.
    pub last_round_ms: Option<f64>,
    /// The end of the last round, or the last tick the watches made a read unnecessary; startup
    /// counts as one, so a first round gets the same grace.
    #[serde(skip)]
    pub last_round: Instant,
    /// A loop that has not completed a round for this long is reported unhealthy.
    #[serde(skip)]
    pub stale_after: Duration,
}

impl FollowerView {
    pub fn new(mode: Mode, confirmations: u32, stale_after: Duration) -> Self {
        Self {
            mode,
            published: None,
            hubs: BTreeMap::new(),
            pending: None,
            held: None,
            overrides: None,
            confirmations_required: confirmations,
            polling_relaxed: false,
            last_round_at: None,
            last_round_ms: None,
            last_round: Instant::now(),
            stale_after,
        }
    }

    /// A decision is on disk.
    pub fn ready(&self) -> bool {
        self.published.is_some()
    }

    /// The poll loop is alive: it completed a round recently. A single-hub sidecar has no loop
    /// and is alive while it serves.
    pub fn healthy(&self, now: Instant) -> bool {
        self.mode == Mode::SingleHub
            || now.saturating_duration_since(self.last_round) <= self.stale_after
    }
}

/// The pin and the drain as `/status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverridesView {
    pub pin: Option<OverrideView>,
    pub drain: Option<OverrideView>,
    /// Per kind, the value read last when it is refused.
    pub refused: BTreeMap<&'static str, RefusedView>,
    /// Per kind, the last one that ended in this run of the sidecar.
    pub ended: BTreeMap<&'static str, EndedView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverrideView {
    pub hub: HubId,
    /// RFC 3339.
    pub until: String,
    pub value: String,
    /// RFC 3339: when this run of the sidecar took it.
    pub since: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedView {
    pub value: String,
    /// `malformed`, `unknown_hub`, `too_far`, `conflict` or `past`.
    pub reason: &'static str,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndedView {
    pub hub: HubId,
    pub until: String,
    /// `expired`, `removed` or `replaced`.
    pub how: &'static str,
    pub at: String,
}

impl OverridesView {
    pub fn of(o: &Overrides) -> Self {
        let view = |kind| {
            o.in_effect(kind).map(|a| OverrideView {
                hub: a.hub,
                until: a.until.to_string(),
                value: a.value.clone(),
                since: a.since.to_string(),
            })
        };
        let mut refused = BTreeMap::new();
        let mut ended = BTreeMap::new();
        for kind in Kind::ALL {
            if let Some(r) = o.refused(kind) {
                refused.insert(
                    kind.as_str(),
                    RefusedView {
                        value: r.value.clone(),
                        reason: r.reason.as_str(),
                        why: r.why.clone(),
                    },
                );
            }
            if let Some(e) = o.ended(kind) {
                ended.insert(
                    kind.as_str(),
                    EndedView {
                        hub: e.was.hub,
                        until: e.was.until.to_string(),
                        how: e.how.as_str(),
                        at: e.at.to_string(),
                    },
                );
            }
        }
        Self {
            pin: view(Kind::Pin),
            drain: view(Kind::Drain),
            refused,
            ended,
        }
    }
}
