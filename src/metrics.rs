//! The Prometheus registry and its handles. The `kubeslice_worker_hub_*` names are the ones the
//! worker-operator's in-process design used, so existing dashboards and alerts carry over.

use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::overrides::Kind;
use crate::verdict::{ErrorReason, HubId};

/// What a restart action came to: the `outcome` label of
/// `kubeslice_worker_hub_worker_restarts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Signalled,
    Killed,
    Verified,
    Unverified,
    NotFound,
    PermissionDenied,
    GateFailed,
    GateCleared,
    Observed,
    /// Restart-all mode: the sidecar exits with the restart code.
    Exited,
    /// In-place mode: the move request for the exec wrapper is written.
    Requested,
    /// In-place mode: the exec wrapper found the worker still there after its SIGKILL
    /// (stuck in the kernel) and ended the worker's container, so that kubelet starts it again.
    Unkillable,
}

impl Outcome {
    pub const ALL: [Outcome; 12] = [
        Outcome::Signalled,
        Outcome::Killed,
        Outcome::Verified,
        Outcome::Unverified,
        Outcome::NotFound,
        Outcome::PermissionDenied,
        Outcome::GateFailed,
        Outcome::GateCleared,
        Outcome::Observed,
        Outcome::Exited,
        Outcome::Requested,
        Outcome::Unkillable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Signalled => "signalled",
            Outcome::Killed => "killed",
            Outcome::Verified => "verified",
            Outcome::Unverified => "unverified",
            Outcome::NotFound => "not_found",
            Outcome::PermissionDenied => "permission_denied",
            Outcome::GateFailed => "gate_failed",
            Outcome::GateCleared => "gate_cleared",
            Outcome::Observed => "observed",
            Outcome::Exited => "exited",
            Outcome::Requested => "requested",
            Outcome::Unkillable => "unkillable",
        }
    }
}

/// The `why` label of `kubeslice_worker_hub_switches_held_total`.
pub const HOLD_REASONS: [&str; 5] = crate::resolver::Hold::REASONS;

/// The `reason` label of `kubeslice_worker_hub_events_failed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventFailure {
    /// The queue was full (or recording had stopped).
    Dropped,
    /// The API server answered with an error.
    Refused,
    /// No answer within the write's deadline.
    TimedOut,
}

impl EventFailure {
    pub const ALL: [EventFailure; 3] = [
        EventFailure::Dropped,
        EventFailure::Refused,
        EventFailure::TimedOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventFailure::Dropped => "dropped",
            EventFailure::Refused => "refused",
            EventFailure::TimedOut => "timed_out",
        }
    }
}

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub switches: IntCounter,
    pub switches_vouched: IntCounter,
    pub probe_errors: IntCounterVec,
    pub probe_duration: HistogramVec,
    pub active: IntGaugeVec,
    pub claims_rejected: IntCounterVec,
    pub claims_vanished: IntCounterVec,
    pub claims_older_than_basis: IntCounterVec,
    pub switches_held: IntCounterVec,
    /// 1 for the reason the latest round held a switch back, 0 for every other.
    pub switch_held: IntGaugeVec,
    pub split_brain: IntGauge,
    /// Rule 10's claim clock: since when the worker's hub has shown no claim for itself.
    pub active_hub_unclaimed_since: Gauge,
    /// A switch held as older than the basis that rule 10 cannot end: since when the worker's
    /// hub has answered without a claim for itself.
    pub basis_unconfirmed_since: Gauge,
    pub claim_seen: Gauge,
    pub pending_confirmations: IntGauge,
    pub poll_interval: Gauge,
    pub last_success: GaugeVec,
    pub handoff_write_errors: IntCounter,
    pub worker_restarts: IntCounterVec,
    pub worker_on_current: IntGauge,
    pub watch_events: IntCounterVec,
    pub watch_restarts: IntCounterVec,
    pub watch_up: IntGaugeVec,
    pub events_failed: IntCounterVec,
    pub worker_probe_failures: IntCounterVec,
    pub override_until: GaugeVec,
    pub override_refused: IntGaugeVec,
    /// Only read for the generated reference; the registry serves it.
    #[cfg(test)]
    build_info: IntGaugeVec,
}

/// A metric as the registry declares it, for the generated reference page: the label values
/// are those of the series that exist now (none for a family whose series appear with their
/// first occurrence).
#[cfg(test)]
pub(crate) struct Family {
    pub name: String,
    pub help: String,
    pub kind: prometheus::proto::MetricType,
    pub labels: Vec<(String, Option<String>)>,
}

/// A time as a gauge holds it: Unix seconds, and 0 for none.
pub fn unix_seconds(at: Option<jiff::Timestamp>) -> f64 {
    at.map_or(0.0, |at| at.as_millisecond() as f64 / 1000.0)
}

impl Metrics {
    pub fn new(hubs: &[HubId], restart_mode: &str) -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let switches = IntCounter::new(
            "kubeslice_worker_hub_switches_total",
            "Confirmed switches of the Active hub published to the worker.",
        )?;
        let switches_vouched = IntCounter::new(
            "kubeslice_worker_hub_switches_vouched_total",
            "Of the confirmed switches, those the watches vouched for: one read at the end of the confirmation span instead of N.",
        )?;
        let probe_errors = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_probe_errors_total",
                "Reads of a hub that gave no answer, by reason.",
            ),
            &["hub", "reason"],
        )?;
        let probe_duration = HistogramVec::new(
            HistogramOpts::new(
                "kubeslice_worker_hub_probe_duration_seconds",
                "Time to read a hub's Cluster object, errors and timeouts included.",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            &["hub"],
        )?;
        let active = IntGaugeVec::new(
            Opts::new(
                "kubeslice_worker_hub_active",
                "1 for the hub published to the worker.",
            ),
            &["hub"],
        )?;
        let claims_rejected = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_claims_rejected_total",
                "Claims that named an endpoint that is not configured, by the hub that published them.",
            ),
            &["hub"],
        )?;
        let claims_vanished = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_claims_vanished_total",
                "Times a hub that had published a claim answered without one (the worker-operator erases the claim on the hub it talks to), by hub.",
            ),
            &["hub"],
        )?;
        let claims_older_than_basis = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_claims_older_than_basis_total",
                "Rounds in which a hub's claim for another hub was no fresher than the claim the current decision rests on, and so ignored, by the hub that published it.",
            ),
            &["hub"],
        )?;
        let switches_held = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_switches_held_total",
                "Rounds in which a winning claim for another hub did not move the worker, by why: older_than_basis, unauthenticated, pinned_hub_unreachable, drain_no_alternative or split_brain.",
            ),
            &["why"],
        )?;
        let switch_held = IntGaugeVec::new(
            Opts::new(
                "kubeslice_worker_hub_switch_held",
                "1 while the latest round held a switch back for this reason, else 0.",
            ),
            &["why"],
        )?;
        let split_brain = IntGauge::new(
            "kubeslice_worker_hub_split_brain",
            "1 while two hubs each claim themselves at the same epoch and a switch was held for it within the last --split-brain-window, else 0.",
        )?;
        let active_hub_unclaimed_since = Gauge::new(
            "kubeslice_worker_hub_active_hub_unclaimed_since_timestamp_seconds",
            "Unix time since which the worker's hub has shown no claim for itself (read or watched, its watch up, its controller seen republishing); 0 while it shows one, or cannot be known. At --dead-hub-after its basis is released (rule 10).",
        )?;
        let basis_unconfirmed_since = Gauge::new(
            "kubeslice_worker_hub_basis_unconfirmed_since_timestamp_seconds",
            "Unix time since which the worker's hub has answered without a claim for itself, while a switch is held as older_than_basis that rule 10 cannot end (controller never seen republishing, or watch not vouching); else 0.",
        )?;
        let claim_seen = Gauge::new(
            "kubeslice_worker_hub_claim_seen_timestamp_seconds",
            "Unix time a hub last showed a claim, read or watched, or this sidecar's first round while none has; 0 with one hub. Ten minutes without one: no HA controller publishes, or the Cluster CRD drops status.activeController.",
        )?;
        let pending_confirmations = IntGauge::new(
            "kubeslice_worker_hub_switch_pending_confirmations",
            "Consecutive rounds seen so far for a switch that is not yet confirmed.",
        )?;
        let poll_interval = Gauge::new(
            "kubeslice_worker_hub_poll_interval_seconds",
            "The interval of the reads in effect while no switch is pending: --poll-interval, or --watched-poll-interval while every hub's watch vouches for its hub. 0 in single-hub mode, which reads nothing.",
        )?;
        let last_success = GaugeVec::new(
            Opts::new(
                "kubeslice_worker_hub_last_probe_success_timestamp_seconds",
                "Unix time of the last read of a hub that got an answer.",
            ),
            &["hub"],
        )?;
        let override_until = GaugeVec::new(
            Opts::new(
                "kubeslice_worker_hub_override_until_timestamp_seconds",
                "While an operator's pin or drain of this hub is in effect, the Unix time it ends; 0 otherwise.",
            ),
            &["hub", "kind"],
        )?;
        let override_refused = IntGaugeVec::new(
            Opts::new(
                "kubeslice_worker_hub_override_refused",
                "1 while the current pin or drain value is refused (see /status or the HubOverrideRefused Event); 0 otherwise.",
            ),
            &["kind"],
        )?;
        let handoff_write_errors = IntCounter::new(
            "kubeslice_worker_hub_handoff_write_errors_total",
            "Failed attempts to publish a decision into the handoff directory.",
        )?;
        let worker_restarts = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_worker_restarts_total",
                "Actions taken to move the worker onto a switch, by restart mode and outcome.",
            ),
            &["mode", "outcome"],
        )?;
        let worker_on_current = IntGauge::new(
            "kubeslice_worker_hub_worker_on_current_decision",
            "1 when the worker is known to run on the published decision, 0 while it is owed a restart or unverified.",
        )?;
        worker_on_current.set(1);
        let watch_events = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_watch_events_total",
                "Events received on a hub's watch of the Cluster object, by type.",
            ),
            &["hub", "type"],
        )?;
        let watch_restarts = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_watch_restarts_total",
                "Times a hub's watch failed or ended and was re-established, by reason.",
            ),
            &["hub", "reason"],
        )?;
        let watch_up = IntGaugeVec::new(
            Opts::new(
                "kubeslice_worker_hub_watch_up",
                "1 while a hub's watch is established.",
            ),
            &["hub"],
        )?;
        let events_failed = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_events_failed_total",
                "Kubernetes Events that could not be recorded on the worker's Pod, by reason: dropped (a full queue), refused (an API error) or timed_out.",
            ),
            &["reason"],
        )?;
        for failure in EventFailure::ALL {
            events_failed.with_label_values(&[failure.as_str()]);
        }
        let worker_probe_failures = IntCounterVec::new(
            Opts::new(
                "kubeslice_worker_hub_worker_probe_failures_total",
                "Failed checks of the worker's own liveness target (liveness mode, --worker-probe), by verdict: tolerated (within --worker-probe-grace) or dead (/worker/livez answered 503).",
            ),
            &["verdict"],
        )?;
        for verdict in ["tolerated", "dead"] {
            worker_probe_failures.with_label_values(&[verdict]);
        }
        let build_info = IntGaugeVec::new(
            Opts::new("hub_follower_build_info", "The running hub-follower build."),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);

        registry.register(Box::new(switches.clone()))?;
        registry.register(Box::new(switches_vouched.clone()))?;
        registry.register(Box::new(probe_errors.clone()))?;
        registry.register(Box::new(probe_duration.clone()))?;
        registry.register(Box::new(active.clone()))?;
        registry.register(Box::new(claims_rejected.clone()))?;
        registry.register(Box::new(claims_vanished.clone()))?;
        registry.register(Box::new(claims_older_than_basis.clone()))?;
        registry.register(Box::new(switches_held.clone()))?;
        registry.register(Box::new(switch_held.clone()))?;
        registry.register(Box::new(split_brain.clone()))?;
        registry.register(Box::new(active_hub_unclaimed_since.clone()))?;
        registry.register(Box::new(basis_unconfirmed_since.clone()))?;
        registry.register(Box::new(claim_seen.clone()))?;
        registry.register(Box::new(pending_confirmations.clone()))?;
        registry.register(Box::new(poll_interval.clone()))?;
        registry.register(Box::new(last_success.clone()))?;
        registry.register(Box::new(handoff_write_errors.clone()))?;
        registry.register(Box::new(worker_restarts.clone()))?;
        registry.register(Box::new(worker_on_current.clone()))?;
        registry.register(Box::new(watch_events.clone()))?;
        registry.register(Box::new(watch_restarts.clone()))?;
        registry.register(Box::new(watch_up.clone()))?;
        registry.register(Box::new(events_failed.clone()))?;
        registry.register(Box::new(worker_probe_failures.clone()))?;
        registry.register(Box::new(override_until.clone()))?;
        registry.register(Box::new(override_refused.clone()))?;
        registry.register(Box::new(build_info.clone()))?;
        for kind in Kind::ALL {
            override_refused.with_label_values(&[kind.as_str()]).set(0);
        }
        for why in HOLD_REASONS {
            switches_held.with_label_values(&[why]);
            switch_held.with_label_values(&[why]).set(0);
        }
        for outcome in Outcome::ALL {
            worker_restarts.with_label_values(&[restart_mode, outcome.as_str()]);
        }

        // Every series exists from the start, so that `increase()` and absence alerts work
        // before the first error.
        for hub in hubs {
            let h = hub.as_str();
            active.with_label_values(&[h]).set(0);
            watch_up.with_label_values(&[h]).set(0);
            claims_rejected.with_label_values(&[h]);
            claims_vanished.with_label_values(&[h]);
            claims_older_than_basis.with_label_values(&[h]);
            probe_duration.with_label_values(&[h]);
            last_success.with_label_values(&[h]);
            for kind in Kind::ALL {
                override_until
                    .with_label_values(&[h, kind.as_str()])
                    .set(0.0);
            }
            for reason in ErrorReason::ALL {
                probe_errors.with_label_values(&[h, reason.as_str()]);
            }
        }
        Ok(Self {
            registry,
            switches,
            switches_vouched,
            probe_errors,
            probe_duration,
            active,
            claims_rejected,
            claims_vanished,
            claims_older_than_basis,
            switches_held,
            switch_held,
            split_brain,
            active_hub_unclaimed_since,
            basis_unconfirmed_since,
            claim_seen,
            pending_confirmations,
            poll_interval,
            last_success,
            handoff_write_errors,
            worker_restarts,
            worker_on_current,
            watch_events,
            watch_restarts,
            watch_up,
            events_failed,
            worker_probe_failures,
            override_until,
            override_refused,
            #[cfg(test)]
            build_info,
        })
    }

    /// Every registered metric, in the order of `/metrics`, with the series it has now.
    #[cfg(test)]
    pub(crate) fn families(&self) -> Vec<Family> {
        use prometheus::core::Collector;
        let collectors: [&dyn Collector; 28] = [
            &self.switches,
            &self.switches_vouched,
            &self.probe_errors,
            &self.probe_duration,
            &self.active,
            &self.claims_rejected,
            &self.claims_vanished,
            &self.claims_older_than_basis,
            &self.switches_held,
            &self.switch_held,
            &self.split_brain,
            &self.active_hub_unclaimed_since,
            &self.basis_unconfirmed_since,
            &self.claim_seen,
            &self.pending_confirmations,
            &self.poll_interval,
            &self.last_success,
            &self.handoff_write_errors,
            &self.worker_restarts,
            &self.worker_on_current,
            &self.watch_events,
            &self.watch_restarts,
            &self.watch_up,
            &self.events_failed,
            &self.worker_probe_failures,
            &self.override_until,
            &self.override_refused,
            &self.build_info,
        ];
        let mut out: Vec<Family> = collectors
            .iter()
            .flat_map(|c| c.desc().into_iter().zip(c.collect()).collect::<Vec<_>>())
            .map(|(desc, family)| {
                let mut labels: Vec<(String, Option<String>)> = desc
                    .variable_labels
                    .iter()
                    .map(|l| (l.clone(), None))
                    .collect();
                for metric in family.get_metric() {
                    for pair in metric.get_label() {
                        labels.push((pair.name().to_string(), Some(pair.value().to_string())));
                    }
                }
                Family {
                    name: desc.fq_name.clone(),
                    help: desc.help.clone(),
                    kind: family.get_field_type(),
                    labels,
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    pub fn set_active(&self, hub: HubId, hubs: &[HubId]) {
        for h in hubs {
            self.active
                .with_label_values(&[h.as_str()])
                .set(i64::from(*h == hub));
        }
    }

    /// Shows the reason a switch is held this round, if one is, and only that one.
    pub fn set_held(&self, why: Option<&str>) {
        for reason in HOLD_REASONS {
            self.switch_held
                .with_label_values(&[reason])
                .set(i64::from(Some(reason) == why));
        }
    }

    /// The Prometheus text format.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "could not encode metrics");
        }
        out
    }
}
