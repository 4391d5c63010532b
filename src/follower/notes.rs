//! What a round leaves besides the decision: metrics, and logs written once per change.

use jiff::Timestamp;

use super::Follower;
use crate::events::Fact;
use crate::hub::Probe;
use crate::verdict::{HubId, Verdict};

impl Follower {
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
                    .set(now.as_millisecond() as f64 / 1000.0);
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
