//! The restart machine: what to do about a published decision, as a pure state machine in the
//! sans-IO style. Events go in with the time they happen at; actions come out. It reads no
//! clock, no file and no `/proc`, and sends no signal: the driver in `restart::run` does all of
//! that and feeds back what it saw. So every rule here is tested, and simulated over thousands
//! of seeds, without a process or a sleep.
//!
//! The rules:
//! 1. A startup, default, resumed or single-hub decision never acts: the worker starts on it, or
//!    already runs on it. The one exception is a sidecar that restarted between publishing a
//!    switch and moving the worker: the worker's acknowledgement names the hub it really runs on.
//! 2. A switch is acted on after the jitter, at most once per cooldown window; switches inside
//!    the window are coalesced, and nothing happens if the decision went back to the worker's
//!    hub meanwhile.
//! 3. An action is verified by a new worker process (signal mode) or by the worker's
//!    acknowledgement of the decision (any mode). A switch published while an action is under
//!    way is acted on once that action is over, unless the worker acknowledged starting on it.
//! 4. The gate (`/worker/livez`) fails from the action for at most `--liveness-fail-for`.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

mod after;
mod events;
mod restart_all;

pub use events::{Ack, Action, Decision, Event, Gate, Phase, Request};

use super::pacing::{Pacer, Wait};
use super::process::ProcessId;
use crate::config::{RestartConfig, RestartMode};
use crate::metrics::Outcome;
use crate::resolver::Reason;
use crate::verdict::HubId;

/// How long acknowledgements are read after a decision or an action, owed or not.
const ACK_SETTLE: Duration = Duration::from_secs(10);

/// What `/status` shows of the machine; the driver adds the wall-clock times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub phase: Phase,
    pub waiting_for: Option<Wait>,
    pub since: Option<Instant>,
    pub target_generation: Option<u64>,
    pub last_outcome: Option<Outcome>,
    pub worker_on_current_decision: bool,
}

/// What is under way after an action.
#[derive(Debug, Clone)]
enum Underway {
    None,
    /// The signal was asked for; waiting for its result.
    Signalling {
        before: HashSet<ProcessId>,
    },
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

#[derive(Debug, Clone)]
pub struct Machine {
    config: RestartConfig,
    pacer: Pacer,
    rng: fastrand::Rng,
    /// The hub and generation the worker is known or presumed to run on.
    worker: Option<(HubId, u64)>,
    /// False after an action that could not be verified, until the worker acknowledges.
    confirmed: bool,
    /// False when a switch came while the worker restarted and no acknowledgement yet says
    /// which decision the new worker read: `worker` is then a guess, not to skip an action on.
    worker_known: bool,
    /// The latest switch not yet acted on.
    target: Option<Decision>,
    /// The latest decision published, whatever its reason.
    latest: Option<Decision>,
    /// Acknowledgements are read until then even when nothing is owed: a worker that restarted
    /// on its own may have read a newer decision than the machine believes.
    settle_until: Option<Instant>,
    /// The switch the action under way is for.
    acting: Option<Decision>,
    act_at: Option<Instant>,
    underway: Underway,
    /// The worker processes seen last.
    seen: Vec<ProcessId>,
    last_ack: Option<Ack>,
    /// Restart-all mode: the restart an earlier run asked for.
    requested: Option<Request>,
    gate_until: Option<Instant>,
    permission_reported: bool,
    view: View,
    out: Vec<Action>,
}

impl Machine {
    /// `seed` picks the jitter; the driver seeds it at random, tests with a fixed value.
    pub fn new(config: RestartConfig, seed: u64) -> Self {
        Self {
            pacer: Pacer::new(config.jitter, config.cooldown),
            config,
            rng: fastrand::Rng::with_seed(seed),
            worker: None,
            confirmed: true,
            worker_known: true,
            target: None,
            latest: None,
            settle_until: None,
            acting: None,
            act_at: None,
            underway: Underway::None,
            seen: Vec::new(),
            last_ack: None,
            requested: None,
            gate_until: None,
            permission_reported: false,
            view: View {
                phase: Phase::Idle,
                waiting_for: None,
                since: None,
                target_generation: None,
                last_outcome: None,
                worker_on_current_decision: true,
            },
            out: Vec::new(),
        }
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        match event {
            Event::Published(d) => self.on_published(now, d),
            Event::Requested(request) => {
                // The cooldown outlives the sidecar that acted.
                if let Some(at) = request.at {
                    self.pacer.acted(at);
                }
                self.requested = Some(request);
            }
            // The worker did not move: the switch is owed still, and tried again.
            Event::ExitFailed | Event::MoveFailed => self.on_request_unwritten(now),
            Event::Ack(ack) => self.on_ack(now, ack),
            Event::Processes(procs) => self.seen = procs,
            Event::Signalled { delivered, denied } => self.on_signalled(now, delivered, denied),
            Event::Tick => self.on_tick(now),
        }
        std::mem::take(&mut self.out)
    }

    /// When the machine next needs a [`Event::Tick`]; `None`: only when something is published.
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        let poll = match self.underway {
            Underway::Exiting { .. } | Underway::Signalling { .. } => {
                Some(now + Duration::from_millis(100))
            }
            Underway::Verifying { .. } => Some(now + Duration::from_millis(250)),
            // Something is owed to the worker: look for its acknowledgement now and then.
            Underway::None if self.wants_ack(now) => Some(now + Duration::from_secs(1)),
            Underway::None => None,
        };
        [self.act_at, poll, self.gate_until]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the driver should read the acknowledgement before the next tick.
    pub fn wants_ack(&self, now: Instant) -> bool {
        self.owes() || self.settle_until.is_some_and(|until| now < until)
    }

    /// Whether the driver should look for worker processes before the next tick.
    pub fn wants_processes(&self, now: Instant) -> bool {
        self.config.mode == RestartMode::Signal
            && (self.act_at.is_some_and(|at| at <= now)
                || match &self.underway {
                    Underway::Exiting { .. } => true,
                    Underway::Verifying { before, .. } => !before.is_empty(),
                    _ => false,
                })
    }

    fn owes(&self) -> bool {
        self.target.is_some() || self.acting.is_some() || !self.confirmed
    }

    fn on_published(&mut self, now: Instant, d: Decision) {
        self.latest = Some(d.clone());
        self.settle_until = Some(now + ACK_SETTLE);
        if d.reason != Reason::Switch {
            // The worker starts on (or, after a sidecar restart, already runs on) this decision.
            if self.worker.is_none() && self.restarting_all(&d) {
                self.await_restart(now, d);
            } else if self.worker.is_none() {
                let ack = self.last_ack.filter(|_| d.reason == Reason::Resumed);
                match ack.map(|a| (a.generation, a.hub)) {
                    Some((generation, _)) if generation > d.generation => {
                        // An acknowledgement of a decision never published: where the worker
                        // runs is unknown. Act on nothing, and say so until a real one comes.
                        tracing::warn!(ack = generation, decision = d.generation, "the worker's acknowledgement names a decision never published; presuming the worker runs on the resumed decision, unverified");
                        self.worker = Some((d.hub, d.generation));
                        self.worker_known = false;
                        self.confirmed = false;
                        self.refresh();
                    }
                    Some((generation, Some(hub))) if hub != d.hub => {
                        // The sidecar restarted between publishing a switch and moving the worker.
                        tracing::info!(worker_hub = %hub, decision = %d.hub, "the worker still runs on the hub before the last switch; moving it");
                        self.worker = Some((hub, generation));
                        self.view.target_generation = Some(d.generation);
                        self.target = Some(d);
                        self.schedule(now);
                        self.refresh();
                    }
                    // The acknowledgement's generation, so that a newer one (a worker that
                    // started while this sidecar was away) still says where it runs.
                    Some((generation, _)) => self.worker = Some((d.hub, generation)),
                    None => self.worker = Some((d.hub, d.generation)),
                }
            }
            return;
        }
        self.view.target_generation = Some(d.generation);
        self.target = Some(d);
        if self.act_at.is_none() && self.acting.is_none() {
            self.schedule(now);
        }
        self.refresh();
    }

    fn schedule(&mut self, now: Instant) {
        let (at, why) = self.pacer.schedule(now, self.rng.f64());
        self.act_at = Some(at);
        tracing::info!(
            mode = self.config.mode.as_str(),
            waiting = %humantime::format_duration(Duration::from_millis((at - now).as_millis() as u64)),
            because = ?why,
            "a switch was published; the worker will be moved onto it"
        );
        self.enter(now, Phase::Waiting);
        self.view.waiting_for = Some(why);
    }

    fn on_tick(&mut self, now: Instant) {
        if self.gate_until.is_some_and(|until| until <= now) {
            self.close_gate();
        }
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
            other => self.underway = other,
        }
    }

    fn act(&mut self, now: Instant) {
        let Some(target) = self.target.take() else {
            return;
        };
        if self.worker_known && self.worker.is_some_and(|(hub, _)| hub == target.hub) {
            tracing::info!(hub = %target.hub, "the decision went back to the worker's hub before the restart; nothing to do");
            self.enter(now, Phase::Idle);
            self.refresh();
            return;
        }
        self.pacer.acted(now);
        let fail_until = now + self.config.liveness_fail_for;
        // Observe-only touches nothing, the gate included; restart-all exits instead.
        if matches!(
            self.config.mode,
            RestartMode::Signal | RestartMode::Liveness
        ) {
            let reason = format!(
                "hub switched to {} ({}) at generation {}; the worker has not restarted onto it yet",
                target.hub, target.endpoint, target.generation
            );
            self.gate_until = Some(fail_until);
            self.out.push(Action::Gate(Some(Gate {
                until: fail_until,
                reason,
            })));
        }
        self.enter(now, Phase::Verifying);
        let verifying = Underway::Verifying {
            before: HashSet::new(),
            until: fail_until,
        };
        match self.config.mode {
            RestartMode::None => {
                tracing::info!(hub = %target.hub, generation = target.generation, "would restart the worker (restart mode none: observing only)");
                self.record(Outcome::Observed);
                self.underway = verifying;
            }
            RestartMode::Liveness => {
                tracing::info!(hub = %target.hub, generation = target.generation, "failing /worker/livez so that kubelet restarts the worker");
                self.record(Outcome::GateFailed);
                self.underway = verifying;
            }
            RestartMode::InPlace => {
                tracing::info!(hub = %target.hub, generation = target.generation, "asking the exec wrapper to restart the worker in place");
                // The driver records `requested` once the request is written.
                self.view.last_outcome = Some(Outcome::Requested);
                self.out.push(Action::Move {
                    generation: target.generation,
                    hub: target.hub,
                });
                self.underway = Underway::Verifying {
                    before: HashSet::new(),
                    until: now + self.config.verify_timeout,
                };
            }
            RestartMode::RestartAll => {
                // The driver records `exited` once the restart request is written.
                self.view.last_outcome = Some(Outcome::Exited);
                self.out.push(Action::Exit {
                    generation: target.generation,
                    hub: target.hub,
                });
                self.underway = verifying;
            }
            RestartMode::Signal if self.seen.is_empty() => {
                tracing::warn!(process = %self.config.worker_process, "no worker process found to signal; check that the pod has shareProcessNamespace and that --worker-process names the worker's executable. /worker/livez fails as a safety net");
                self.record(Outcome::NotFound);
                self.underway = verifying;
            }
            RestartMode::Signal => {
                self.out.push(Action::Signal(self.seen.clone()));
                self.underway = Underway::Signalling {
                    before: self.seen.iter().copied().collect(),
                };
            }
        }
        self.acting = Some(target);
    }

    fn enter(&mut self, now: Instant, phase: Phase) {
        self.view.phase = phase;
        self.view.since = Some(now);
        self.view.waiting_for = None;
    }

    fn refresh(&mut self) {
        self.view.worker_on_current_decision =
            self.confirmed && self.target.is_none() && self.acting.is_none();
    }

    fn record(&mut self, outcome: Outcome) {
        self.view.last_outcome = Some(outcome);
        self.out.push(Action::Record(outcome));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{restart_config, secs};
    const P: HubId = HubId::PRIMARY;
    const S: HubId = HubId::SECONDARY;

    struct Run {
        m: Machine,
        t0: Instant,
    }

    fn run(mode: RestartMode, jitter: u64, cooldown: u64) -> Run {
        let mut c = restart_config(mode);
        c.jitter = secs(jitter);
        c.cooldown = secs(cooldown);
        Run {
            m: Machine::new(c, 7),
            t0: Instant::now(),
        }
    }

    fn decision(hub: HubId, generation: u64, reason: Reason) -> Event {
        Event::Published(Decision {
            hub,
            endpoint: format!("https://{hub}:6443"),
            generation,
            reason,
        })
    }

    fn proc(pid: i32) -> ProcessId {
        ProcessId {
            pid,
            start_ticks: pid as u64 * 10,
        }
    }

    impl Run {
        fn at(&mut self, s: f64, e: Event) -> Vec<Action> {
            self.m.handle(self.t0 + Duration::from_secs_f64(s), e)
        }
        fn tick(&mut self, s: f64) -> Vec<Action> {
            self.at(s, Event::Tick)
        }
        fn ack(&mut self, s: f64, generation: u64, hub: HubId) -> Vec<Action> {
            self.at(
                s,
                Event::Ack(Ack {
                    generation,
                    hub: Some(hub),
                }),
            )
        }
    }

    fn opened(actions: &[Action]) -> bool {
        actions.iter().any(|a| matches!(a, Action::Gate(Some(_))))
    }

    fn recorded(actions: &[Action]) -> Vec<Outcome> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Record(o) => Some(*o),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn decisions_that_are_not_switches_never_act() {
        for reason in [
            Reason::Startup,
            Reason::Default,
            Reason::Resumed,
            Reason::SingleHub,
        ] {
            for mode in [
                RestartMode::Signal,
                RestartMode::Liveness,
                RestartMode::RestartAll,
                RestartMode::InPlace,
                RestartMode::None,
            ] {
                let mut r = run(mode, 0, 0);
                // Even with an acknowledgement on file that names the same hub.
                assert!(r.ack(0.0, 1, S).is_empty());
                assert!(r.at(0.0, decision(S, 2, reason)).is_empty());
                r.at(0.0, Event::Processes(vec![proc(10)]));
                for s in 0..600 {
                    assert!(r.tick(s as f64).is_empty(), "{reason:?} {mode:?} at {s}s");
                }
                assert_eq!(r.m.next_wake(r.t0 + secs(600)), None, "{reason:?} {mode:?}");
                assert!(r.m.view().worker_on_current_decision);
            }
        }
    }

    #[test]
    fn a_resumed_decision_moves_a_worker_the_ack_places_on_the_other_hub() {
        let mut r = run(RestartMode::Liveness, 0, 0);
        r.ack(0.0, 4, P);
        r.at(0.0, decision(S, 6, Reason::Resumed));
        assert!(!r.m.view().worker_on_current_decision);
        let acts = r.tick(0.0);
        assert!(opened(&acts), "{acts:?}");
        assert_eq!(recorded(&acts), [Outcome::GateFailed]);
    }

    #[test]
    fn a_switch_waits_for_its_jitter_then_acts_once() {
        let mut r = run(RestartMode::Liveness, 5, 60);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(10.0, decision(S, 2, Reason::Switch));
        assert_eq!(r.m.view().phase, Phase::Waiting);
        // Step the clock 10 ms at a time: exactly one action, inside the jitter window.
        let mut acted = Vec::new();
        for ms in (10_000..20_000).step_by(10) {
            let acts = r.tick(ms as f64 / 1000.0);
            if opened(&acts) {
                assert_eq!(recorded(&acts), [Outcome::GateFailed]);
                acted.push(ms);
            }
        }
        assert_eq!(acted.len(), 1, "{acted:?}");
        assert!((10_000..=15_000).contains(&acted[0]), "{acted:?}");
    }

    #[test]
    fn switches_inside_the_cooldown_are_coalesced_to_its_end() {
        let mut r = run(RestartMode::Liveness, 0, 60);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(10.0, decision(S, 2, Reason::Switch));
        assert!(opened(&r.tick(10.0)));
        r.ack(12.0, 2, S);
        // Two more switches inside the window: one action, at its end, for the last.
        r.at(20.0, decision(P, 3, Reason::Switch));
        r.at(25.0, decision(S, 4, Reason::Switch));
        r.at(30.0, decision(P, 5, Reason::Switch));
        for s in 30..70 {
            let acts = r.tick(s as f64);
            assert_eq!(opened(&acts), s == 70, "at {s}s: {acts:?}");
        }
        let acts = r.tick(70.0);
        match acts.iter().find_map(|a| match a {
            Action::Gate(Some(g)) => Some(g),
            _ => None,
        }) {
            Some(g) => assert!(g.reason.contains("generation 5"), "{}", g.reason),
            None => panic!("no action at the end of the window: {acts:?}"),
        }
    }

    #[test]
    fn a_decision_back_on_the_workers_hub_before_the_action_does_nothing() {
        let mut r = run(RestartMode::Signal, 0, 60);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(0.0, Event::Processes(vec![proc(10)]));
        r.at(10.0, decision(S, 2, Reason::Switch));
        r.tick(10.0);
        r.ack(11.0, 2, S);
        r.at(20.0, decision(P, 3, Reason::Switch));
        r.at(30.0, decision(S, 4, Reason::Switch));
        for s in 30..200 {
            assert!(r.tick(s as f64).is_empty(), "at {s}s");
        }
        assert!(r.m.view().worker_on_current_decision);
    }

    #[test]
    fn signal_mode_signals_waits_kills_and_verifies_by_a_new_process() {
        let mut r = run(RestartMode::Signal, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        r.at(1.0, Event::Processes(vec![proc(10), proc(11)]));
        let acts = r.tick(1.0);
        assert!(opened(&acts));
        assert!(acts.contains(&Action::Signal(vec![proc(10), proc(11)])));
        let acts = r.at(
            1.0,
            Event::Signalled {
                delivered: vec![proc(10), proc(11)],
                denied: false,
            },
        );
        assert_eq!(recorded(&acts), [Outcome::Signalled]);
        assert_eq!(r.m.view().phase, Phase::Signalled);
        // One exits, one ignores the signal until --kill-after (30s).
        r.at(2.0, Event::Processes(vec![proc(11)]));
        assert!(r.tick(2.0).is_empty());
        r.at(31.0, Event::Processes(vec![proc(11)]));
        let acts = r.tick(31.0);
        assert_eq!(acts[0], Action::Kill(vec![proc(11)]));
        assert_eq!(recorded(&acts), [Outcome::Killed]);
        // An old process is not a restart; a new one is.
        r.at(32.0, Event::Processes(vec![proc(11)]));
        assert!(r.tick(32.0).is_empty());
        r.at(33.0, Event::Processes(vec![proc(12)]));
        let acts = r.tick(33.0);
        assert_eq!(recorded(&acts), [Outcome::Verified]);
        assert!(acts.contains(&Action::Gate(None)));
        assert_eq!(r.m.view().phase, Phase::Verified);
    }

    #[test]
    fn without_a_worker_or_permission_the_gate_is_the_safety_net() {
        let mut r = run(RestartMode::Signal, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        let acts = r.tick(1.0);
        assert!(opened(&acts));
        assert_eq!(recorded(&acts), [Outcome::NotFound]);

        let mut r = run(RestartMode::Signal, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        r.at(1.0, Event::Processes(vec![proc(10)]));
        r.tick(1.0);
        let acts = r.at(
            1.0,
            Event::Signalled {
                delivered: vec![],
                denied: true,
            },
        );
        assert_eq!(recorded(&acts), [Outcome::PermissionDenied]);
        // The gate closes by itself at --liveness-fail-for (90s), unverified.
        assert!(r.tick(90.9).is_empty());
        let acts = r.tick(91.0);
        assert!(acts.contains(&Action::Gate(None)), "{acts:?}");
        assert_eq!(recorded(&acts), [Outcome::Unverified]);
        assert_eq!(r.m.view().phase, Phase::Unverified);
        assert!(!r.m.view().worker_on_current_decision);
        // A late acknowledgement of the decision confirms it.
        r.ack(200.0, 2, S);
        assert!(r.m.view().worker_on_current_decision);
    }

    #[test]
    fn acknowledgements_clear_the_gate_unless_forged_or_stale() {
        let mut r = run(RestartMode::Liveness, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        assert!(opened(&r.tick(1.0)));
        // Stale (the old decision) and forged (never published) acks change nothing.
        assert!(r.ack(2.0, 1, P).is_empty());
        assert!(r.ack(3.0, 9, S).is_empty());
        let acts = r.ack(4.0, 2, S);
        assert_eq!(recorded(&acts), [Outcome::GateCleared]);
        assert!(acts.contains(&Action::Gate(None)));
        // Twice is once.
        assert!(r.ack(5.0, 2, S).is_empty());
        assert!(r.m.view().worker_on_current_decision);
    }

    #[test]
    fn observe_only_records_and_never_touches_the_gate() {
        let mut r = run(RestartMode::None, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        r.at(1.0, Event::Processes(vec![proc(10)]));
        let acts = r.tick(1.0);
        assert_eq!(acts, [Action::Record(Outcome::Observed)]);
    }

    fn exits(actions: &[Action]) -> Vec<(u64, HubId)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Exit { generation, hub } => Some((*generation, *hub)),
                _ => None,
            })
            .collect()
    }

    /// The request an earlier run left: it exited at `s` for `generation` on `hub`.
    fn requested(r: &mut Run, s: f64, generation: u64, hub: HubId) {
        let at = Some(r.t0 + Duration::from_secs_f64(s));
        assert!(r
            .at(
                s,
                Event::Requested(Request {
                    generation,
                    hub,
                    at
                })
            )
            .is_empty());
    }

    fn moves(actions: &[Action]) -> Vec<(u64, HubId)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Move { generation, hub } => Some((*generation, *hub)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn in_place_asks_the_wrapper_once_and_is_verified_by_its_acknowledgement() {
        let mut r = run(RestartMode::InPlace, 0, 60);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(10.0, decision(S, 2, Reason::Switch));
        let acts = r.tick(10.0);
        assert_eq!(moves(&acts), [(2, S)]);
        assert_eq!(
            recorded(&acts),
            [],
            "the driver records `requested` once it is written"
        );
        assert!(!opened(&acts), "no liveness coupling: {acts:?}");
        assert_eq!(r.m.view().phase, Phase::Verifying);
        assert!(moves(&r.tick(11.0)).is_empty(), "asked once");
        // The old worker's acknowledgement proves nothing; the new one's does.
        assert!(recorded(&r.ack(11.0, 1, P)).is_empty());
        assert_eq!(recorded(&r.ack(11.5, 2, S)), [Outcome::Verified]);
        assert!(r.m.view().worker_on_current_decision);
    }

    #[test]
    fn in_place_without_an_acknowledgement_is_unverified_and_asks_again_after_each_timeout() {
        // The wrapper missed the request (an inotify watch that never started), or is not
        // there: the worker has not moved, and is owed the move still.
        let mut r = run(RestartMode::InPlace, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        assert_eq!(moves(&r.tick(1.0)), [(2, S)]);
        let (mut asked, mut outcomes) = (Vec::new(), Vec::new());
        for s in 2..700 {
            let acts = r.tick(s as f64);
            asked.extend(moves(&acts).into_iter().map(|m| (s, m)));
            outcomes.extend(recorded(&acts).into_iter().map(|o| (s, o)));
        }
        let timeout = restart_config(RestartMode::InPlace)
            .verify_timeout
            .as_secs();
        // Unverified once per timeout, asked again after the retry floor (10 s).
        let again = 1 + timeout + 10;
        assert_eq!(asked.first(), Some(&(again, (2, S))), "{asked:?}");
        assert_eq!(outcomes.first(), Some(&(1 + timeout, Outcome::Unverified)));
        assert!(
            outcomes.len() >= 2 && outcomes.len() == asked.len(),
            "{outcomes:?} {asked:?}"
        );
        assert!(!r.m.view().worker_on_current_decision);
        // The wrapper acts at last: verified, and asked no more.
        let at = (again + timeout) as f64;
        r.tick(at);
        assert_eq!(recorded(&r.ack(at + 0.5, 2, S)), [Outcome::Verified]);
        assert!(r.m.view().worker_on_current_decision);
        assert!((0..100).all(|s| moves(&r.tick(at + 1.0 + f64::from(s))).is_empty()));
    }

    #[test]
    fn in_place_tries_again_when_the_request_cannot_be_written() {
        let mut r = run(RestartMode::InPlace, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        assert_eq!(moves(&r.tick(1.0)), [(2, S)]);
        assert_eq!(
            recorded(&r.at(1.0, Event::MoveFailed)),
            [Outcome::Unverified]
        );
        assert!(!r.m.view().worker_on_current_decision);
        let again: Vec<f64> = (2..30)
            .map(f64::from)
            .filter(|s| !moves(&r.tick(*s)).is_empty())
            .collect();
        assert_eq!(again, [11.0], "once, after the retry floor");
    }

    /// Found by the simulation (seed 52285 of 100,000): restart-all exited for the primary; the
    /// next sidecar saw a switch to the secondary and crashed before the new worker
    /// acknowledged; the one after resumed on the secondary. The worker's acknowledgement of the
    /// primary verified the restart, and the worker was left there.
    #[test]
    fn a_restart_verified_onto_a_hub_the_decision_has_left_is_followed_by_a_move() {
        let mut r = run(RestartMode::RestartAll, 0, 0);
        requested(&mut r, 0.0, 8, P);
        r.ack(2.0, 7, S);
        r.at(2.0, decision(S, 11, Reason::Resumed));
        assert_eq!(r.m.view().phase, Phase::Verifying);
        let acts = r.ack(2.5, 9, P);
        assert_eq!(recorded(&acts), [Outcome::Verified]);
        assert!(!r.m.view().worker_on_current_decision);
        let exits: Vec<_> = (3..20).flat_map(|s| exits(&r.tick(f64::from(s)))).collect();
        assert_eq!(exits, [(11, S)]);
    }

    #[test]
    fn restart_all_exits_once_for_a_switch_and_leaves_the_gate_alone() {
        let mut r = run(RestartMode::RestartAll, 0, 60);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(10.0, decision(S, 2, Reason::Switch));
        let acts = r.tick(10.0);
        assert_eq!(exits(&acts), [(2, S)]);
        assert_eq!(
            recorded(&acts),
            [],
            "the driver records `exited` once it can exit"
        );
        assert!(!opened(&acts), "no liveness coupling: {acts:?}");
        // Had the process not exited, nothing more would be asked of it.
        for s in 11..400 {
            assert!(exits(&r.tick(s as f64)).is_empty(), "at {s}s");
        }
    }

    #[test]
    fn the_sidecar_after_its_exit_waits_for_the_new_worker_without_acting_again() {
        // The old worker's acknowledgement (the primary) is still on file; the request says a
        // restart onto generation 2 was asked for 4 s ago.
        for (ack_generation, label) in [(2, "read before the republish"), (3, "read after")] {
            let mut r = run(RestartMode::RestartAll, 0, 60);
            requested(&mut r, 0.0, 2, S);
            r.ack(4.0, 1, P);
            let acts = r.at(4.0, decision(S, 3, Reason::Resumed));
            assert_eq!(
                acts,
                [Action::Restarted {
                    generation: 2,
                    after: secs(4)
                }],
                "{label}"
            );
            assert_eq!(r.m.view().phase, Phase::Verifying);
            assert!(!r.m.view().worker_on_current_decision);
            for s in 4..10 {
                assert!(r.tick(s as f64).is_empty(), "{label} at {s}s");
            }
            let acts = r.ack(10.0, ack_generation, S);
            assert_eq!(recorded(&acts), [Outcome::Verified], "{label}");
            assert!(r.m.view().worker_on_current_decision, "{label}");
            assert_eq!(r.m.view().phase, Phase::Verified);
            for s in 10..600 {
                assert!(r.tick(s as f64).is_empty(), "{label} at {s}s");
            }
        }
    }

    #[test]
    fn when_kubelet_restarts_only_the_sidecar_it_reports_unverified_and_never_exits_again() {
        let mut r = run(RestartMode::RestartAll, 0, 60);
        requested(&mut r, 0.0, 2, S);
        r.ack(1.0, 1, P);
        r.at(1.0, decision(S, 3, Reason::Resumed));
        let mut outcomes = Vec::new();
        for s in 1..3600 {
            let acts = r.tick(s as f64);
            assert!(exits(&acts).is_empty(), "at {s}s");
            outcomes.extend(recorded(&acts).into_iter().map(|o| (s, o)));
            // The old worker keeps acknowledging what it started on.
            assert!(exits(&r.ack(s as f64, 1, P)).is_empty());
        }
        // --restart-verify-timeout (5m) after this sidecar started.
        assert_eq!(outcomes, [(301, Outcome::Unverified)]);
        assert!(!r.m.view().worker_on_current_decision);
    }

    #[test]
    fn an_acknowledged_request_is_history_and_its_cooldown_still_holds() {
        let mut r = run(RestartMode::RestartAll, 0, 60);
        requested(&mut r, 0.0, 2, S);
        // The new worker acknowledged before this sidecar (restarted on its own) started.
        r.ack(20.0, 3, S);
        assert!(r.at(20.0, decision(S, 4, Reason::Resumed)).is_empty());
        assert!(r.m.view().worker_on_current_decision);
        // A switch 30 s after the last exit waits for the end of the cooldown that exit began.
        r.at(30.0, decision(P, 5, Reason::Switch));
        assert_eq!(r.m.view().waiting_for, Some(Wait::Cooldown));
        for s in 30..60 {
            assert!(exits(&r.tick(s as f64)).is_empty(), "at {s}s");
        }
        assert_eq!(exits(&r.tick(60.0)), [(5, P)]);
    }

    #[test]
    fn a_switch_left_unacted_by_a_crashed_sidecar_is_acted_on() {
        // The request's restart was acknowledged; then a switch was published and the sidecar
        // crashed (any other exit code: kubelet restarted only it) before acting.
        let mut r = run(RestartMode::RestartAll, 0, 60);
        requested(&mut r, 0.0, 2, S);
        r.ack(100.0, 2, S);
        r.at(100.0, decision(P, 4, Reason::Resumed));
        assert_eq!(exits(&r.tick(100.0)), [(4, P)]);
    }

    #[test]
    fn an_exit_whose_request_cannot_be_written_is_tried_again_after_the_cooldown() {
        let mut r = run(RestartMode::RestartAll, 0, 60);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(10.0, decision(S, 2, Reason::Switch));
        assert_eq!(exits(&r.tick(10.0)), [(2, S)]);
        let acts = r.at(10.0, Event::ExitFailed);
        assert_eq!(recorded(&acts), [Outcome::Unverified]);
        assert!(!r.m.view().worker_on_current_decision);
        for s in 10..70 {
            assert!(exits(&r.tick(s as f64)).is_empty(), "at {s}s");
        }
        assert_eq!(exits(&r.tick(70.0)), [(2, S)]);
        // Without a cooldown, no sooner than 10 s: a failing write is not retried in a loop.
        let mut r = run(RestartMode::RestartAll, 0, 0);
        r.at(0.0, decision(P, 1, Reason::Startup));
        r.at(1.0, decision(S, 2, Reason::Switch));
        assert_eq!(exits(&r.tick(1.0)), [(2, S)]);
        r.at(1.0, Event::ExitFailed);
        for ms in (1_000..11_000).step_by(10) {
            assert!(exits(&r.tick(ms as f64 / 1000.0)).is_empty(), "at {ms}ms");
        }
        assert_eq!(exits(&r.tick(11.0)), [(2, S)]);
    }

    #[test]
    fn a_request_older_than_the_clock_still_stops_a_second_exit() {
        let mut r = run(RestartMode::RestartAll, 0, 60);
        let old = Request {
            generation: 2,
            hub: S,
            at: None,
        };
        assert!(r.at(0.0, Event::Requested(old)).is_empty());
        r.ack(0.0, 1, P);
        // Nothing to report about kubelet's delay; no cooldown to wait for; no exit.
        assert!(r.at(0.0, decision(S, 3, Reason::Resumed)).is_empty());
        assert_eq!(r.m.view().phase, Phase::Verifying);
        for s in 0..600 {
            assert!(exits(&r.tick(s as f64)).is_empty(), "at {s}s");
        }
    }
}
