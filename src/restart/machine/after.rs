//! After the action: the signal's result, the worker's exit, verification, acknowledgements,
//! and the end of an action.

use std::collections::HashSet;

use tokio::time::Instant;

use super::{Ack, Action, Machine, Phase, Underway, ACK_SETTLE};
use crate::config::RestartMode;
use crate::metrics::Outcome;
use crate::restart::process::ProcessId;
use crate::verdict::HubId;

impl Machine {
    pub(super) fn on_signalled(&mut self, now: Instant, delivered: Vec<ProcessId>, denied: bool) {
        let Underway::Signalling { before } = std::mem::replace(&mut self.underway, Underway::None)
        else {
            return;
        };
        if denied {
            if !self.permission_reported {
                tracing::error!(process = %self.config.worker_process, "cannot signal the worker: permission denied. Run the sidecar as the worker's UID, or add the KILL capability to the sidecar's securityContext. /worker/livez fails as a safety net");
                self.permission_reported = true;
            }
            self.record(Outcome::PermissionDenied);
            // Without a signalled process the gate is the only safety net left: bound it the same.
            self.underway = Underway::Verifying {
                before: HashSet::new(),
                until: now + self.config.liveness_fail_for,
            };
            return;
        }
        tracing::info!(signal = %self.config.signal, pids = ?delivered.iter().map(|p| p.pid).collect::<Vec<_>>(), "signalled the worker");
        self.record(Outcome::Signalled);
        self.underway = Underway::Exiting {
            procs: delivered,
            kill_at: now + self.config.kill_after,
            before,
        };
        self.enter(now, Phase::Signalled);
    }

    pub(super) fn watch_exit(
        &mut self,
        procs: Vec<ProcessId>,
        kill_at: Instant,
        before: HashSet<ProcessId>,
        now: Instant,
    ) {
        let alive: Vec<ProcessId> = procs
            .into_iter()
            .filter(|p| self.seen.contains(p))
            .collect();
        let until = now + self.config.verify_timeout;
        let verifying = |before| Underway::Verifying { before, until };
        if alive.is_empty() {
            self.underway = verifying(before);
            self.enter(now, Phase::Verifying);
        } else if now >= kill_at {
            tracing::info!(pids = ?alive.iter().map(|p| p.pid).collect::<Vec<_>>(), after = %humantime::format_duration(self.config.kill_after), "the worker ignored the signal; sending SIGKILL");
            self.out.push(Action::Kill(alive));
            self.record(Outcome::Killed);
            self.underway = verifying(before);
            self.enter(now, Phase::Verifying);
        } else {
            self.underway = Underway::Exiting {
                procs: alive,
                kill_at,
                before,
            };
        }
    }

    pub(super) fn verify(&mut self, before: HashSet<ProcessId>, until: Instant, now: Instant) {
        // A signalled worker is verified by a process that was not there before the signal: it
        // started afterwards, so it read the handoff as it is now.
        if !before.is_empty() && self.seen.iter().any(|p| !before.contains(p)) {
            tracing::info!("the worker restarted");
            self.finish(now, Some(Outcome::Verified), true, None);
        } else if now >= until {
            match self.config.mode {
                RestartMode::None => {}
                RestartMode::RestartAll => {
                    tracing::warn!(exit_code = self.config.exit_code.0, "the worker did not acknowledge the new hub after the sidecar exited to restart every container. If kubelet restarted only the sidecar, the pod lacks the restartPolicyRules, or the RestartAllContainersOnContainerExits feature gate is off on the API server or the kubelet. Not exiting again for this decision");
                    self.record(Outcome::Unverified);
                }
                RestartMode::InPlace => {
                    // Nothing but the wrapper moves the worker in place: without its
                    // acknowledgement the worker has not moved (the wrapper missed the request,
                    // or is not there). The move is owed still, and asked for again.
                    tracing::warn!(timeout = %humantime::format_duration(self.config.verify_timeout), "the exec wrapper did not acknowledge the new hub; asking it again. Is the worker's container started with `hub-follower exec --in-place`, on the same handoff folder?");
                    self.on_request_unwritten(now);
                    return;
                }
                RestartMode::Signal | RestartMode::Liveness => {
                    tracing::warn!("could not verify that the worker restarted onto the new hub");
                    self.record(Outcome::Unverified);
                }
            }
            self.finish(now, None, false, None);
        } else {
            self.underway = Underway::Verifying { before, until };
        }
    }

    /// A worker that started on a decision at least as new as the one owed to it needs nothing
    /// more, whoever restarted it.
    pub(super) fn on_ack(&mut self, now: Instant, ack: Ack) {
        self.last_ack = Some(ack);
        // An acknowledgement of a decision that was never published is not the wrapper's: it
        // must not be able to cancel a restart.
        let latest = [&self.target, &self.acting, &self.latest]
            .into_iter()
            .flatten()
            .map(|d| d.generation)
            .chain(self.worker.map(|(_, g)| g))
            .max()
            .unwrap_or(0);
        if ack.generation > latest {
            return;
        }
        // Whatever is owed, a newer acknowledgement says where the worker runs now: a worker
        // restarted for one switch may have started on the next.
        if let Some(hub) = ack.hub {
            if self.worker.is_some_and(|(_, g)| ack.generation > g) || !self.worker_known {
                self.worker = Some((hub, ack.generation));
                self.worker_known = true;
                self.behind_the_latest(now, hub);
            }
        }
        let owed = match (&self.acting, &self.target) {
            (Some(a), _) => a.generation,
            (None, Some(t)) => t.generation,
            (None, None) if !self.confirmed => self.worker.map_or(0, |(_, g)| g),
            (None, None) => return,
        };
        if ack.generation < owed {
            return;
        }
        tracing::info!(
            generation = ack.generation,
            "the worker acknowledged the current decision"
        );
        if self
            .target
            .as_ref()
            .is_some_and(|t| ack.generation >= t.generation)
        {
            // The worker already started on the newest decision: drop the pending action.
            self.target = None;
            self.act_at = None;
        }
        if self.acting.is_some() {
            let outcome = match self.config.mode {
                RestartMode::Liveness => Some(Outcome::GateCleared),
                RestartMode::Signal | RestartMode::RestartAll | RestartMode::InPlace => {
                    Some(Outcome::Verified)
                }
                RestartMode::None => None,
            };
            // The worker says which decision it started on: a switch published while the action
            // was under way may be the one it read.
            let started_on = ack.hub.map(|hub| (hub, ack.generation));
            self.finish(now, outcome, true, started_on);
            // A restart verified onto another hub than the latest decision (a switch published
            // while the sidecar that saw it was away) leaves the worker owed a move.
            if let Some(hub) = ack.hub {
                self.behind_the_latest(now, hub);
            }
        } else {
            self.confirmed = true;
            if let Some(hub) = ack.hub {
                self.worker = Some((hub, ack.generation));
            }
            if self.target.is_none() && self.view.phase == Phase::Waiting {
                self.enter(now, Phase::Idle);
            }
            self.refresh();
        }
    }

    /// The action under way is over: verified (`confirmed`) or presumed done.
    pub(super) fn finish(
        &mut self,
        now: Instant,
        outcome: Option<Outcome>,
        confirmed: bool,
        started_on: Option<(HubId, u64)>,
    ) {
        self.underway = Underway::None;
        self.settle_until = Some(now + ACK_SETTLE);
        if let Some(o) = outcome {
            self.record(o);
        }
        if let Some(a) = self.acting.take() {
            // Unverified still presumes the restart happened (kubelet acts on a failing gate), so
            // that a later switch back is treated as the real move it is. A worker that started
            // while a newer switch was out may have read that one: only its acknowledgement says.
            self.worker = Some(started_on.unwrap_or((a.hub, a.generation)));
            self.worker_known = started_on.is_some() || self.target.is_none();
        }
        self.confirmed = confirmed;
        let phase = match (outcome, confirmed) {
            (_, false) if self.config.mode != RestartMode::None => Phase::Unverified,
            (Some(_), true) => Phase::Verified,
            _ => Phase::Idle,
        };
        self.enter(now, phase);
        self.close_gate();
        let worker_hub = self.worker.map(|(hub, _)| hub);
        if let Some(t) = &self.target {
            if self.worker_known && worker_hub == Some(t.hub) {
                self.target = None;
            } else if self.act_at.is_none() {
                self.schedule(now);
            }
        }
        self.refresh();
    }

    /// The worker runs on `hub`: if nothing is under way and the latest decision names another
    /// hub, the worker is owed a move onto it.
    fn behind_the_latest(&mut self, now: Instant, hub: HubId) {
        let Some(latest) = self.latest.clone().filter(|d| d.hub != hub) else {
            return;
        };
        if self.target.is_none() && self.acting.is_none() {
            tracing::info!(worker_hub = %hub, decision = %latest.hub, "the worker acknowledged an older decision than the one published; moving it");
            self.view.target_generation = Some(latest.generation);
            self.target = Some(latest);
            if self.act_at.is_none() {
                self.schedule(now);
            }
            self.refresh();
        }
    }

    pub(super) fn close_gate(&mut self) {
        if self.gate_until.take().is_some() {
            self.out.push(Action::Gate(None));
        }
    }
}
