//! What a round leaves besides the decision: metrics, and logs written once per change.

use jiff::Timestamp;

use super::core::Core;
use crate::claim::Claim;
use crate::events::Fact;
use crate::hub::Probe;
use crate::metrics::unix_seconds;
use crate::resolver::{Held, Hold, Quiet};
use crate::state::{ClaimView, HeldView, SeenClaim};
use crate::verdict::{HubId, Verdict};

/// How long no hub may show a claim, read or watched, before it is said (a `HubNoClaim`
/// Warning Event, a log line): twenty periods of the real controller's 30 s republish.
pub(super) const NO_CLAIM_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// When a hub last showed a claim (or the first round, before any), and whether ten minutes
/// without one have been said.
#[derive(Debug, Default)]
pub(super) struct ClaimSeen {
    at: Option<Timestamp>,
    said: bool,
}

impl Core {
    /// Keeps when a hub last showed a claim, read (any claim, a rejected one too: a
    /// controller publishes) or shown by a watch (`watched`), for the gauge; says once when
    /// none has for [`NO_CLAIM_FOR`]. Not in single-hub mode, which reads no claim.
    pub(super) fn note_claims_seen(&mut self, probes: &[Probe], watched: bool, now: Timestamp) {
        if self.config.single_hub() {
            return;
        }
        let claimed = watched
            || probes
                .iter()
                .any(|p| matches!(p.verdict, Verdict::Claim(_)));
        let seen = &mut self.claim_seen;
        if claimed && std::mem::take(&mut seen.said) {
            tracing::info!("a hub shows a claim again");
        }
        if claimed || seen.at.is_none() {
            seen.at = Some(now);
        }
        let at = seen.at.unwrap_or(now);
        self.metrics.claim_seen.set(unix_seconds(Some(at)));
        let quiet = now.duration_since(at).unsigned_abs();
        if !seen.said && quiet >= NO_CLAIM_FOR {
            seen.said = true;
            let silent_for = humantime::format_duration(NO_CLAIM_FOR).to_string();
            tracing::warn!(
                "no hub has shown a claim (status.activeController, read or watched) for {silent_for}: the controllers do not run in HA mode, or a hub's Cluster CRD does not declare status.activeController and its API server drops the field. The worker stays where it is and follows no failover"
            );
            self.events.send(Fact::NoClaimSeen { silent_for });
        }
    }

    /// Counts and logs the hubs whose claim named an unconfigured endpoint, once per change.
    pub(super) fn note_rejections(&mut self, rejected: &[HubId], probes: &[Probe]) {
        for hub in &self.config.hubs {
            let rejected = rejected.contains(&hub.id);
            if rejected {
                self.metrics
                    .claims_rejected
                    .with_label_values(&[hub.id.as_str()])
                    .inc();
            }
            let was = self.rejecting.insert(hub.id, rejected).unwrap_or(false);
            if rejected && !was {
                let named = probes.iter().find_map(|p| match &p.verdict {
                    Verdict::Claim(c) if p.hub == hub.id => Some(c.endpoint.to_string()),
                    _ => None,
                });
                tracing::warn!(
                    hub = %hub.id,
                    claimed = named.as_deref().unwrap_or("?"),
                    "ignoring a claim that names an endpoint that is not configured"
                );
                self.events.send(Fact::ClaimRejected {
                    hub: hub.id,
                    claimed: named.unwrap_or_else(|| "?".into()),
                });
            }
        }
    }

    pub(super) fn observe_probe(&mut self, probe: &Probe, now: Timestamp) {
        let hub = probe.hub.as_str();
        self.metrics
            .probe_duration
            .with_label_values(&[hub])
            .observe(probe.latency.as_secs_f64());
        let said = match &probe.verdict {
            Verdict::Claim(c) => format!("claim({})", c.endpoint),
            Verdict::Error(e) => format!("error({})", e.reason),
            other => other.kind().to_string(),
        };
        self.said.insert(probe.hub, said);
        let previous = self.last_error.get(&probe.hub).copied();
        match &probe.verdict {
            Verdict::Error(e) => {
                self.metrics
                    .probe_errors
                    .with_label_values(&[hub, e.reason.as_str()])
                    .inc();
                if previous == Some(Some(e.reason)) {
                    tracing::debug!(hub, reason = %e.reason, detail = %e.detail, "hub still has no say");
                } else {
                    tracing::info!(hub, reason = %e.reason, detail = %e.detail, "hub has no say");
                }
                if !matches!(previous, Some(Some(_))) {
                    self.events.send(Fact::Unreachable {
                        hub: probe.hub,
                        reason: e.reason,
                    });
                }
                self.last_error.insert(probe.hub, Some(e.reason));
            }
            answered => {
                self.metrics
                    .last_success
                    .with_label_values(&[hub])
                    .set(unix_seconds(Some(now)));
                if let Some(Some(reason)) = previous {
                    tracing::info!(hub, was = %reason, "hub answers again");
                    self.events.send(Fact::Recovered {
                        hub: probe.hub,
                        was: reason,
                    });
                }
                if matches!(answered, Verdict::NoClaim) {
                    tracing::debug!(hub, "hub answered without a claim");
                }
                self.last_error.insert(probe.hub, None);
            }
        }
    }

    /// Keeps each hub's last claim for `/status`, and counts claims that vanished. Absence is
    /// not evidence: the worker-operator erases the claim on the hub it talks to.
    pub(super) fn note_claim(&mut self, probe: &Probe, now: Timestamp) {
        match &probe.verdict {
            Verdict::Claim(c) => {
                self.last_seen.insert(
                    probe.hub,
                    SeenClaim {
                        claim: ClaimView::of(c),
                        seen_at: now.to_string(),
                    },
                );
                self.claimed.insert(probe.hub, true);
            }
            Verdict::NoClaim => {
                if self.claimed.insert(probe.hub, false) == Some(true) {
                    let counter = self
                        .metrics
                        .claims_vanished
                        .with_label_values(&[probe.hub.as_str()]);
                    if counter.get() == 0 {
                        tracing::info!(hub = %probe.hub, "the hub's claim vanished; that is no say, not a say against it (the worker-operator erases the claim on the hub it talks to). /status keeps the last one seen; later ones are counted in kubeslice_worker_hub_claims_vanished_total");
                    } else {
                        tracing::debug!(hub = %probe.hub, "the hub's claim vanished");
                    }
                    counter.inc();
                }
            }
            // No answer is no news about the claim.
            Verdict::Error(_) => {}
        }
    }

    /// Counts the hubs whose claim was old news this round.
    pub(super) fn note_stale(&self, stale: &[HubId]) {
        for hub in stale {
            self.metrics
                .claims_older_than_basis
                .with_label_values(&[hub.as_str()])
                .inc();
        }
    }

    /// Shows a held winner in `/status` while it lasts; logs it and records an Event when it
    /// starts or changes, and logs its end.
    pub(super) fn note_held(&mut self, held: Option<Held>, now: Timestamp) {
        self.metrics.set_held(held.as_ref().map(|h| h.why.reason()));
        let Some(held) = held else {
            if let Some(was) = self.held.take() {
                tracing::info!(candidate = %was.candidate, "no longer holding back a switch");
                self.view.send_modify(|s| s.held = None);
            }
            return;
        };
        let reason = held.why.reason();
        let why = match &held.why {
            Hold::NotFresherThanBasis { claim, basis } => format!(
                    "its claim ({}) is not fresher than the claim the current decision rests on ({}); a hub that comes back with an old claim does not move the worker",
                    freshness_words(claim),
                    freshness_words(basis)
            ),
            Hold::OlderThanThirdHub {
                claim,
                newer,
                names,
            } => format!(
                    "its claim ({}) is older than a claim for the {names} hub seen since the last decision ({}); a hub that published the newest claim and went silent does not let an older claim move the worker",
                    freshness_words(claim),
                    freshness_words(newer)
            ),
            Hold::Unauthenticated(e) => format!(
                    "that hub refuses our credential ({e}), so the worker would be refused there too; check its token and CA with `hub-follower check`"
            ),
            Hold::PinnedHubUnreachable { pinned, reason: e } if *pinned == held.candidate.hub => format!(
                    "it is pinned, but its reads fail ({e}); the worker stays where it is and moves once the {pinned} hub has answered {} reads in a row, or follows the claims again once the pin is removed",
                    self.resolver.confirmations()
            ),
            Hold::PinnedHubUnreachable { pinned, reason: e } => format!(
                    "the worker is pinned to the {pinned} hub, whose reads fail ({e}); there is no failover while it is pinned: remove the pin (kubectl annotate pod … hub-follower.kubeslice.io/pin-) to follow the claims"
            ),
            Hold::DrainNoAlternative { drained } => format!(
                    "the {drained} hub is drained, but no other hub answers; the worker stays on {drained} until one does"
            ),
            Hold::SplitBrain {
                established,
                moved_at: Some(moved_at),
                until: Some(until),
            } => format!(
                    "split brain: it and the {established} hub each claim to be Active at the same epoch; the worker moved at {moved_at} and moves at most once per --split-brain-window, so not before {until}; pin the right hub to end it sooner"
            ),
            Hold::SplitBrain { established, .. } => format!(
                    "split brain: it and the {established} hub each claim to be Active at the same epoch, and its claim is no fresher than the one the worker's decision rests on; the worker stays until the {established} hub has shown no claim for itself for --dead-hub-after, or a fresher claim comes; pin the right hub to end it sooner"
            ),
        };
        self.metrics
            .switches_held
            .with_label_values(&[reason])
            .inc();
        let previous = self.held.take();
        let same = previous.as_ref().is_some_and(|p| {
            p.candidate == held.candidate.hub
                && p.identity == held.candidate.identity
                && p.reason == reason
        });
        let since = match previous.filter(|_| same) {
            Some(p) => p.since,
            None => {
                tracing::warn!(candidate = %held.candidate.hub, reason, why = %why, "not moving the worker");
                self.events.send(Fact::SwitchHeld {
                    candidate: held.candidate.hub,
                    why: why.clone(),
                });
                now.to_string()
            }
        };
        let shown = HeldView {
            candidate: held.candidate.hub,
            identity: held.candidate.identity.clone(),
            reason,
            why,
            since,
        };
        self.held = Some(shown.clone());
        self.view.send_modify(|s| s.held = Some(shown));
    }

    /// Shows a split brain in the gauge, and records an Event when one starts to hold a
    /// switch back.
    pub(super) fn note_split_brain(&mut self, step_split_brain: bool, held: Option<&Held>) {
        let was = std::mem::replace(&mut self.split_brain, step_split_brain);
        self.metrics.split_brain.set(i64::from(step_split_brain));
        if let Some(Held {
            candidate,
            why: Hold::SplitBrain {
                established, until, ..
            },
        }) = held.filter(|_| !was)
        {
            tracing::warn!(established = %established, other = %candidate.hub, until = ?until.map(|u| u.to_string()), "split brain: two hubs each claim to be Active at the same epoch; the worker moves at most once per --split-brain-window");
            self.events.send(Fact::SplitBrain {
                established: *established,
                other: candidate.hub,
                until: until.map(|u| u.to_string()),
            });
        } else if was && !step_split_brain {
            tracing::info!("no split brain held a switch back for a whole --split-brain-window");
        }
    }

    /// Says, once each time it starts, that a silent hub's basis no longer holds the worker
    /// on it (rule 10).
    pub(super) fn note_dead_hub(&mut self, dead: Option<(HubId, Quiet)>, to: Option<HubId>) {
        let was = std::mem::replace(&mut self.leaving_silent, dead.map(|(h, _)| h));
        let (Some((hub, quiet)), Some(to)) = (dead, to) else {
            return;
        };
        if was == Some(hub) {
            return;
        }
        let silent_for = humantime::format_duration(self.config.dead_hub_after).to_string();
        match quiet {
            Quiet::NoAnswer => {
                tracing::warn!(hub = %hub, to = %to, silent_for = %silent_for, "the worker's hub has not answered for --dead-hub-after: a claim another hub makes for itself moves the worker although it is not fresher than the basis")
            }
            Quiet::NoClaim => {
                tracing::warn!(hub = %hub, to = %to, silent_for = %silent_for, "the worker's hub has answered, its watch up, but shown no claim for itself for --dead-hub-after: its controller has stopped publishing, so a claim another hub makes for itself moves the worker although it is not fresher than the basis")
            }
        }
        self.events.send(Fact::LeavingSilentHub {
            hub,
            to,
            silent_for,
            quiet: quiet.what(),
        });
    }

    /// Says once that the first decision waits for a claim, and until when (rule 12).
    pub(super) fn note_undecided(&mut self, until: Option<Timestamp>) {
        if until.is_some() && self.undecided_until.is_none() {
            tracing::info!(
                until = %until.map(|u| u.to_string()).unwrap_or_default(),
                "no hub names the Active hub yet: waiting for a claim, and publishing the primary by default at this time if none comes (--default-after)"
            );
        }
        self.undecided_until = until;
    }

    pub(super) fn verdict_summary(&self) -> String {
        self.config
            .hubs
            .iter()
            .map(|h| {
                let said = self.said.get(&h.id).map_or("unknown", String::as_str);
                format!("{}={said}", h.id)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A claim's freshness in words, for logs and Events.
fn freshness_words(c: &Claim) -> String {
    let date = c
        .last_updated
        .map_or("no lastUpdated".to_string(), |t| format!("lastUpdated {t}"));
    match c.epoch {
        Some(e) => format!("epoch {e}, {date}"),
        None => date,
    }
}
