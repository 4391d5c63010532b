//! Restart-all mode across the sidecar's own exit: the sidecar that acts exits, and the one
//! kubelet starts next must not take the worker it finds for one that still runs on the old
//! hub. The restart request the acting sidecar wrote says what it asked for and when.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use super::{Action, Decision, Machine, Phase, Underway};
use crate::config::RestartMode;
use crate::metrics::Outcome;
use crate::resolver::Reason;

/// The soonest a request that could not be written is tried again, whatever the cooldown.
const EXIT_RETRY: Duration = Duration::from_secs(10);

impl Machine {
    /// Whether `d`, resumed by this sidecar, follows a restart an earlier run asked for that no
    /// acknowledgement has answered yet: kubelet is restarting the worker onto the handoff, so
    /// the acknowledgement on file is the old worker's and says nothing about the new one.
    pub(super) fn restarting_all(&self, d: &Decision) -> bool {
        self.config.mode == RestartMode::RestartAll
            && d.reason == Reason::Resumed
            && self.requested.is_some_and(|r| {
                self.last_ack
                    .is_none_or(|ack| ack.generation < r.generation)
            })
    }

    /// Waits for the restarted worker's acknowledgement, without acting again. Without one by
    /// `--restart-verify-timeout`, the outcome is `unverified`, and the sidecar does not exit
    /// again for it: kubelet did not restart the pod's containers, and a second exit would not
    /// either.
    pub(super) fn await_restart(&mut self, now: Instant, d: Decision) {
        let Some(request) = self.requested else {
            return;
        };
        let after = request.at.map(|at| now.saturating_duration_since(at));
        tracing::info!(
            generation = request.generation,
            hub = %d.hub,
            after = %after.map_or("unknown".into(), |a| humantime::format_duration(Duration::from_millis(a.as_millis() as u64)).to_string()),
            "started after this sidecar exited to restart every container; waiting for the worker's acknowledgement, without acting again"
        );
        // Later than the verification would have waited, this is a later start of the sidecar
        // beside a restart never acknowledged, not kubelet's delay: nothing to report on that.
        if let Some(after) = after.filter(|a| *a < self.config.verify_timeout) {
            self.out.push(Action::Restarted {
                generation: request.generation,
                after,
            });
        }
        self.worker = Some((d.hub, d.generation));
        self.view.target_generation = Some(d.generation);
        // A worker that read the decision before this sidecar republished it answers with the
        // request's generation: that is the one owed.
        self.acting = Some(Decision {
            generation: request.generation,
            ..d
        });
        self.underway = Underway::Verifying {
            before: HashSet::new(),
            until: now + self.config.verify_timeout,
        };
        self.enter(now, Phase::Verifying);
        self.refresh();
    }

    /// The request could not be written (restart-all: so the sidecar did not exit; in-place: so
    /// the wrapper was never asked): the switch is owed still, and is tried again after the
    /// cooldown, and never sooner than [`EXIT_RETRY`].
    pub(super) fn on_request_unwritten(&mut self, now: Instant) {
        self.underway = Underway::None;
        if let Some(a) = self.acting.take() {
            if self.target.is_none() {
                self.target = Some(a);
            }
        }
        self.record(Outcome::Unverified);
        self.schedule(now);
        self.act_at = self.act_at.map(|at| at.max(now + EXIT_RETRY));
        self.refresh();
    }
}
