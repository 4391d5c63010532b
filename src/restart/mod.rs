//! Moving the worker onto a confirmed switch, and only then: never for the startup decision, a
//! default or a resumed one, never while unsure, at most once per switch.
//!
//! The modes differ only in the action; the rest is shared:
//! switch published → wait (jitter, cooldown) → act → verify → the worker is on the decision.
//! `/worker/livez` fails from the action until the worker is known to run on the new decision,
//! for at most `--liveness-fail-for`, so a gate that never clears can't crash-loop the worker.

pub mod pacing;
pub mod process;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::{RestartConfig, RestartMode};
use crate::handoff::{self, Handoff};
use crate::metrics::Metrics;
use crate::resolver::Reason;
use crate::verdict::HubId;
use pacing::{Pacer, Wait};
use process::{ProcessId, SignalError};

/// What an action came to; the `outcome` label of `kubeslice_worker_hub_worker_restarts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
}

impl Outcome {
    pub const ALL: [Outcome; 9] = [
        Outcome::Signalled,
        Outcome::Killed,
        Outcome::Verified,
        Outcome::Unverified,
        Outcome::NotFound,
        Outcome::PermissionDenied,
        Outcome::GateFailed,
        Outcome::GateCleared,
        Outcome::Observed,
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
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Idle,
    Waiting,
    Signalled,
    Verifying,
    Verified,
    Unverified,
}

/// The restart side's state as `/status` shows it, and the gate `/worker/livez` answers from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartView {
    pub mode: RestartMode,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Wait>,
    /// RFC 3339 time the phase was entered.
    pub since: Option<String>,
    pub target_generation: Option<u64>,
    pub last_outcome: Option<Outcome>,
    pub worker_on_current_decision: bool,
    pub gate_failing: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_reason: Option<String>,
    #[serde(skip)]
    gate_since: Option<Instant>,
    #[serde(skip)]
    fail_for: Duration,
}

impl RestartView {
    pub fn new(mode: RestartMode, fail_for: Duration) -> Self {
        Self {
            mode,
            phase: Phase::Idle,
            waiting_for: None,
            since: None,
            target_generation: None,
            last_outcome: None,
            worker_on_current_decision: true,
            gate_failing: false,
            gate_reason: None,
            gate_since: None,
            fail_for,
        }
    }

    /// `Some(reason)` while `/worker/livez` should fail.
    pub fn gate(&self, now: Instant) -> Option<&str> {
        let since = self.gate_since?;
        (now.saturating_duration_since(since) < self.fail_for).then_some(
            self.gate_reason
                .as_deref()
                .unwrap_or("the worker runs on an older decision"),
        )
    }
}

/// Shared with the HTTP server.
pub type SharedView = Arc<Mutex<RestartView>>;

fn lock(v: &SharedView) -> std::sync::MutexGuard<'_, RestartView> {
    v.lock().unwrap_or_else(|e| e.into_inner())
}

/// What is under way after an action.
#[derive(Debug)]
enum Underway {
    None,
    /// Waiting for the signalled processes to exit; SIGKILL at `kill_at`.
    Exiting {
        procs: Vec<ProcessId>,
        kill_at: Instant,
        before: HashSet<ProcessId>,
    },
    /// Waiting for a new worker process (signal mode) or the acknowledgement (any mode).
    Verifying {
        before: HashSet<ProcessId>,
        until: Instant,
    },
}

pub struct Restarter {
    config: RestartConfig,
    handoff_dir: PathBuf,
    metrics: Metrics,
    view: SharedView,
    pacer: Pacer,
    /// The hub and generation the worker is known or presumed to run on.
    worker: Option<(HubId, u64)>,
    /// False after an action that could not be verified, until the worker acknowledges.
    confirmed: bool,
    /// The latest switch not yet acted on.
    target: Option<Handoff>,
    /// The switch the action under way is for.
    acting: Option<Handoff>,
    act_at: Option<Instant>,
    underway: Underway,
    permission_reported: bool,
}

impl Restarter {
    pub fn new(
        config: RestartConfig,
        handoff_dir: PathBuf,
        metrics: Metrics,
        view: SharedView,
    ) -> Self {
        Self {
            pacer: Pacer::new(config.jitter, config.cooldown),
            config,
            handoff_dir,
            metrics,
            view,
            worker: None,
            confirmed: true,
            target: None,
            acting: None,
            act_at: None,
            underway: Underway::None,
            permission_reported: false,
        }
    }

    pub async fn run(
        mut self,
        mut decisions: watch::Receiver<Option<Handoff>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        if let Some(h) = decisions.borrow_and_update().clone() {
            self.on_published(h);
        }
        loop {
            let wake = self.next_wake();
            tokio::select! {
                _ = shutdown.changed() => return,
                changed = decisions.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if let Some(h) = decisions.borrow_and_update().clone() {
                        self.on_published(h);
                    }
                }
                _ = sleep_until(wake) => self.on_wake(),
            }
        }
    }

    fn on_published(&mut self, h: Handoff) {
        if h.reason != Reason::Switch {
            // Startup, default, resumed, single hub: the worker starts on (or, after a sidecar
            // restart, already runs on) this decision. Never a restart...
            if self.worker.is_none() {
                if let Some(worker_hub) = self.resumed_mid_switch(&h) {
                    // ...unless the sidecar restarted between publishing a switch and moving
                    // the worker: the worker's acknowledgement names the hub it really runs on.
                    tracing::info!(worker_hub = %worker_hub, decision = %h.hub, "the worker still runs on the hub before the last switch; moving it");
                    self.worker = Some((worker_hub, 0));
                    let generation = h.generation;
                    self.target = Some(h);
                    self.schedule();
                    self.refresh_on_current();
                    self.update(|v| v.target_generation = Some(generation));
                    return;
                }
                self.worker = Some((h.hub, h.generation));
            }
            return;
        }
        let generation = h.generation;
        self.target = Some(h);
        if self.act_at.is_none() && self.acting.is_none() {
            self.schedule();
        }
        self.refresh_on_current();
        self.update(|v| v.target_generation = Some(generation));
    }

    fn resumed_mid_switch(&self, h: &Handoff) -> Option<HubId> {
        if h.reason != Reason::Resumed {
            return None;
        }
        let ack = handoff::read_ack(&self.handoff_dir)?;
        ack.hub.filter(|hub| *hub != h.hub)
    }

    fn schedule(&mut self) {
        let now = Instant::now();
        let (at, why) = self.pacer.schedule(now, fastrand::f64());
        self.act_at = Some(at);
        tracing::info!(
            mode = self.config.mode.as_str(),
            waiting = %humantime::format_duration(round_ms(at - now)),
            because = ?why,
            "a switch was published; the worker will be moved onto it"
        );
        self.update(|v| {
            v.phase = Phase::Waiting;
            v.waiting_for = Some(why);
            v.since = Some(now_rfc3339());
        });
    }

    fn next_wake(&self) -> Option<Instant> {
        let now = Instant::now();
        let poll = match self.underway {
            Underway::Exiting { .. } => Some(now + Duration::from_millis(100)),
            Underway::Verifying { .. } => Some(now + Duration::from_millis(250)),
            // Something is owed to the worker: look for its acknowledgement now and then.
            Underway::None if self.target.is_some() || !self.confirmed => {
                Some(now + Duration::from_secs(1))
            }
            Underway::None => None,
        };
        match (self.act_at, poll) {
            (Some(a), Some(p)) => Some(a.min(p)),
            (a, p) => a.or(p),
        }
    }

    fn on_wake(&mut self) {
        let now = Instant::now();
        self.check_ack();
        if self.act_at.is_some_and(|at| at <= now) {
            self.act_at = None;
            self.act(now);
            return;
        }
        match std::mem::replace(&mut self.underway, Underway::None) {
            Underway::Exiting {
                procs,
                kill_at,
                before,
            } => self.watch_exit(procs, kill_at, before, now),
            Underway::Verifying { before, until } => self.verify(before, until, now),
            Underway::None => {}
        }
    }

    fn act(&mut self, now: Instant) {
        let Some(target) = self.target.take() else {
            return;
        };
        if self.worker.is_some_and(|(hub, _)| hub == target.hub) {
            tracing::info!(hub = %target.hub, "the decision went back to the worker's hub before the restart; nothing to do");
            self.worker = Some((target.hub, target.generation));
            self.refresh_on_current();
            self.update(|v| {
                v.phase = Phase::Idle;
                v.waiting_for = None;
                v.since = Some(now_rfc3339());
            });
            return;
        }
        self.pacer.acted(now);
        let gate_reason = format!(
            "hub switched to {} ({}) at generation {}; the worker has not restarted onto it yet",
            target.hub, target.endpoint, target.generation
        );
        // Observe-only touches nothing, the gate included.
        let gate = self.config.mode != RestartMode::None;
        self.update(|v| {
            if gate {
                v.gate_since = Some(now);
                v.gate_failing = true;
                v.gate_reason = Some(gate_reason);
            }
            v.waiting_for = None;
            v.since = Some(now_rfc3339());
            v.phase = Phase::Verifying;
        });
        let gate_until = now + self.config.liveness_fail_for;
        match self.config.mode {
            RestartMode::None => {
                tracing::info!(hub = %target.hub, generation = target.generation, "would restart the worker (restart mode none: observing only)");
                self.record(Outcome::Observed);
                self.underway = Underway::Verifying {
                    before: HashSet::new(),
                    until: gate_until,
                };
            }
            RestartMode::Liveness => {
                tracing::info!(hub = %target.hub, generation = target.generation, "failing /worker/livez so that kubelet restarts the worker");
                self.record(Outcome::GateFailed);
                self.underway = Underway::Verifying {
                    before: HashSet::new(),
                    until: gate_until,
                };
            }
            RestartMode::Signal => self.signal(now),
        }
        self.acting = Some(target);
    }

    fn signal(&mut self, now: Instant) {
        let name = &self.config.worker_process;
        let procs = process::find(name);
        let before: HashSet<ProcessId> = procs.iter().copied().collect();
        // Without a signalled process, the gate is the only safety net left: bound it the same.
        let fallback_until = now + self.config.liveness_fail_for;
        if procs.is_empty() {
            tracing::warn!(process = %name, "no worker process found to signal; check that the pod has shareProcessNamespace and that --worker-process names the worker's executable. /worker/livez fails as a safety net");
            self.record(Outcome::NotFound);
            self.underway = Underway::Verifying {
                before,
                until: fallback_until,
            };
            return;
        }
        let mut signalled = Vec::new();
        for p in &procs {
            match process::send(*p, self.config.signal) {
                Ok(()) => signalled.push(*p),
                Err(SignalError::Gone) => {}
                Err(SignalError::PermissionDenied) => {
                    if !self.permission_reported {
                        tracing::error!(pid = p.pid, process = %name, "cannot signal the worker: permission denied. Run the sidecar as the worker's UID, or add the KILL capability to the sidecar's securityContext. /worker/livez fails as a safety net");
                        self.permission_reported = true;
                    }
                    self.record(Outcome::PermissionDenied);
                    self.underway = Underway::Verifying {
                        before: HashSet::new(),
                        until: fallback_until,
                    };
                    return;
                }
                Err(SignalError::Other(e)) => {
                    tracing::warn!(pid = p.pid, error = %e, "could not signal a worker process")
                }
            }
        }
        tracing::info!(signal = %self.config.signal_name, pids = ?signalled.iter().map(|p| p.pid).collect::<Vec<_>>(), "signalled the worker");
        self.record(Outcome::Signalled);
        self.underway = Underway::Exiting {
            procs: signalled,
            kill_at: now + self.config.kill_after,
            before,
        };
        self.update(|v| v.phase = Phase::Signalled);
    }

    fn watch_exit(
        &mut self,
        procs: Vec<ProcessId>,
        kill_at: Instant,
        before: HashSet<ProcessId>,
        now: Instant,
    ) {
        let alive: Vec<ProcessId> = procs.into_iter().filter(|p| process::alive(*p)).collect();
        let verify_until = now + self.config.verify_timeout;
        if alive.is_empty() {
            self.underway = Underway::Verifying {
                before,
                until: verify_until,
            };
            self.update(|v| v.phase = Phase::Verifying);
        } else if now >= kill_at {
            for p in &alive {
                if let Err(e) = process::send(*p, rustix::process::Signal::KILL) {
                    tracing::warn!(pid = p.pid, error = %e, "could not SIGKILL a worker process");
                }
            }
            tracing::info!(pids = ?alive.iter().map(|p| p.pid).collect::<Vec<_>>(), after = %humantime::format_duration(self.config.kill_after), "the worker ignored the signal; sent SIGKILL");
            self.record(Outcome::Killed);
            self.underway = Underway::Verifying {
                before,
                until: verify_until,
            };
            self.update(|v| v.phase = Phase::Verifying);
        } else {
            self.underway = Underway::Exiting {
                procs: alive,
                kill_at,
                before,
            };
        }
    }

    fn verify(&mut self, before: HashSet<ProcessId>, until: Instant, now: Instant) {
        // A signalled worker is verified by a process of its name that was not there before the
        // signal: it started afterwards, so it read the handoff as it is now.
        let signalled = !before.is_empty();
        if signalled
            && process::find(&self.config.worker_process)
                .iter()
                .any(|p| !before.contains(p))
        {
            tracing::info!("the worker restarted");
            self.finish(Some(Outcome::Verified), true, None);
            return;
        }
        if now >= until {
            if self.config.mode != RestartMode::None {
                tracing::warn!("could not verify that the worker restarted onto the new hub");
                self.record(Outcome::Unverified);
            }
            self.finish(None, false, None);
            return;
        }
        self.underway = Underway::Verifying { before, until };
    }

    /// Reads the worker's acknowledgement: a worker that started on a decision at least as new
    /// as the one owed to it needs nothing more (whoever restarted it).
    fn check_ack(&mut self) {
        let owed = match (&self.acting, &self.target) {
            (Some(a), _) => a.generation,
            (None, Some(t)) => t.generation,
            (None, None) if !self.confirmed => self.worker.map_or(0, |(_, g)| g),
            (None, None) => return,
        };
        let Some(ack) = handoff::read_ack(&self.handoff_dir) else {
            return;
        };
        // An acknowledgement of a decision that was never published is not the wrapper's: it
        // must not be able to cancel a restart.
        let latest = [&self.target, &self.acting]
            .into_iter()
            .flatten()
            .map(|h| h.generation)
            .chain(self.worker.map(|(_, g)| g))
            .max()
            .unwrap_or(0);
        if ack.generation < owed || ack.generation > latest {
            return;
        }
        tracing::info!(
            generation = ack.generation,
            pid = ack.pid,
            "the worker acknowledged the current decision"
        );
        if let Some(t) = &self.target {
            if ack.generation >= t.generation {
                // The worker already started on the newest decision: drop the pending action.
                self.target = None;
                self.act_at = None;
            }
        }
        if self.acting.is_some() {
            let outcome = match self.config.mode {
                RestartMode::Liveness => Some(Outcome::GateCleared),
                RestartMode::Signal => Some(Outcome::Verified),
                RestartMode::None => None,
            };
            // The worker says which decision it started on: a switch published while the action
            // was under way may be the one it read.
            let started_on = ack.hub.map(|hub| (hub, ack.generation));
            self.finish(outcome, true, started_on);
        } else {
            self.confirmed = true;
            if let Some(hub) = ack.hub {
                self.worker = Some((hub, ack.generation));
            }
            self.refresh_on_current();
        }
    }

    /// The action under way is over: verified (`confirmed`) or presumed done.
    /// `started_on`: the decision the worker acknowledged, when it did.
    fn finish(
        &mut self,
        outcome: Option<Outcome>,
        confirmed: bool,
        started_on: Option<(HubId, u64)>,
    ) {
        self.underway = Underway::None;
        if let Some(o) = outcome {
            self.record(o);
        }
        if let Some(a) = self.acting.take() {
            // Unverified still presumes the restart happened (kubelet acts on a failing gate), so
            // that a later switch back is treated as the real move it is.
            self.worker = Some(started_on.unwrap_or((a.hub, a.generation)));
        }
        self.confirmed = confirmed;
        let phase = match (outcome, confirmed) {
            (_, false) if self.config.mode != RestartMode::None => Phase::Unverified,
            (Some(_), true) => Phase::Verified,
            _ => Phase::Idle,
        };
        self.update(|v| {
            v.phase = phase;
            v.since = Some(now_rfc3339());
            v.gate_since = None;
            v.gate_failing = false;
            v.gate_reason = None;
        });
        if let Some(t) = &self.target {
            if self.worker.is_some_and(|(hub, _)| hub == t.hub) {
                self.target = None;
            } else if self.act_at.is_none() {
                self.schedule();
            }
        }
        self.refresh_on_current();
    }

    fn refresh_on_current(&self) {
        let on = self.confirmed && self.target.is_none() && self.acting.is_none();
        self.metrics.worker_on_current.set(i64::from(on));
        self.update(|v| v.worker_on_current_decision = on);
    }

    fn record(&self, outcome: Outcome) {
        self.metrics
            .worker_restarts
            .with_label_values(&[self.config.mode.as_str(), outcome.as_str()])
            .inc();
        self.update(|v| v.last_outcome = Some(outcome));
    }

    fn update(&self, f: impl FnOnce(&mut RestartView)) {
        f(&mut lock(&self.view));
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::Ack;
    use HubId::{Primary as P, Secondary as S};

    fn decision(hub: HubId, generation: u64, reason: Reason) -> Option<Handoff> {
        Some(Handoff {
            hub,
            endpoint: format!("https://{hub}.example:6443"),
            token_file: "/t/token".into(),
            ca_file: "/t/ca.crt".into(),
            tls_server_name: None,
            identity: None,
            generation,
            decided_at: String::new(),
            reason,
            namespace: None,
        })
    }

    /// Regression: the worker acknowledged a switch published while the restart for the one
    /// before it was under way; the restarter must know it runs on that newer decision.
    #[tokio::test(start_paused = true)]
    async fn a_switch_published_during_a_restart_is_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let secs = Duration::from_secs;
        let config = RestartConfig {
            mode: RestartMode::Liveness,
            worker_process: "worker".into(),
            signal: rustix::process::Signal::TERM,
            signal_name: "SIGTERM".into(),
            kill_after: secs(30),
            verify_timeout: secs(300),
            liveness_fail_for: secs(90),
            jitter: Duration::ZERO,
            cooldown: Duration::ZERO,
        };
        let metrics = Metrics::new(&[P, S], "liveness").unwrap();
        let view = Arc::new(Mutex::new(RestartView::new(
            RestartMode::Liveness,
            secs(90),
        )));
        let (decisions, rx) = watch::channel(None);
        let (_stop, stop) = watch::channel(false);
        let restarter = Restarter::new(config, dir.path().into(), metrics, view.clone());
        tokio::spawn(restarter.run(rx, stop));
        let gate = || view.lock().unwrap().gate_failing;
        let step = || tokio::time::sleep(Duration::from_millis(300));

        decisions.send_replace(decision(P, 1, Reason::Startup));
        step().await;
        assert!(!gate(), "no restart at startup");
        decisions.send_replace(decision(S, 2, Reason::Switch));
        step().await;
        assert!(gate(), "the switch fails the gate");
        decisions.send_replace(decision(P, 3, Reason::Switch));
        step().await;
        // Kubelet restarts the worker; the wrapper starts it on the newest decision.
        let ack = Ack {
            generation: 3,
            pid: 42,
            started_at: String::new(),
            hub: Some(P),
        };
        handoff::write_ack(dir.path(), &ack).unwrap();
        tokio::time::sleep(secs(2)).await;
        assert!(!gate(), "the acknowledgement clears the gate");
        assert!(view.lock().unwrap().worker_on_current_decision);

        decisions.send_replace(decision(S, 4, Reason::Switch));
        step().await;
        assert!(
            gate(),
            "the worker runs on the primary: a switch to the secondary must move it"
        );
    }
}
