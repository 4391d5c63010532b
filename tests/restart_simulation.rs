//! The restart machine in a simulated pod, over many seeds: a follower that publishes bursts of
//! switches, a sidecar that crashes at any step, workers that exit at once, slowly or only to
//! SIGKILL, a kubelet that restarts them and probes `/worker/livez`, and acknowledgements that
//! arrive late, early, forged or twice. No clock, no process: simulated time only.
//!
//! The invariants:
//! - a startup, default, resumed or single-hub decision never acts (the one exception, a worker
//!   that an acknowledgement places on another hub after a sidecar restart, is allowed);
//! - at most one action per cooldown window;
//! - a switch published during a restart is never lost, and the worker always ends on the last
//!   published decision;
//! - the gate never fails longer than `--liveness-fail-for`;
//! - restart-all mode: the sidecar exits for a switch, and exits again only for a switch
//!   published after that exit, whatever kubelet restarts: every container (the worker is gone
//!   until after the new sidecar starts), or only the sidecar (the feature gate is off);
//! - in-place mode (the exec wrapper's own machine, `exec::supervisor`, runs the worker): never
//!   two workers at once, through slow and stubborn stops, crashes and sidecar restarts.
//!
//! `HUB_SIM_SEEDS` sets the number of seeds (1,000 by default; CI runs the default):
//! `HUB_SIM_SEEDS=100000 cargo test --release --test restart_simulation`.
//! Each failure names its seed; `HUB_SIM_SEED=N` runs that one alone.

use std::time::Duration;

use tokio::time::Instant;

mod support;

use hub_follower::config::{RestartConfig, RestartMode};
use hub_follower::exec::supervisor::{self, Order, Supervisor};
use hub_follower::resolver::Reason;
use hub_follower::restart::machine::{Ack, Action, Decision, Event, Machine, Request};
use hub_follower::restart::process::ProcessId;
use hub_follower::restart::{Outcome, Phase};
use hub_follower::verdict::HubId;
const P: HubId = HubId::PRIMARY;
const S: HubId = HubId::SECONDARY;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// What the simulation drives: the real machine, or a deliberately broken one.
trait Sut {
    fn handle(&mut self, now: Instant, event: Event) -> Vec<Action>;
    fn next_wake(&self, now: Instant) -> Option<Instant>;
    fn wants_ack(&self, now: Instant) -> bool;
    fn wants_processes(&self, now: Instant) -> bool;
    fn on_current(&self) -> bool;
}

impl Sut for Machine {
    fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        Machine::handle(self, now, event)
    }
    fn next_wake(&self, now: Instant) -> Option<Instant> {
        Machine::next_wake(self, now)
    }
    fn wants_ack(&self, now: Instant) -> bool {
        Machine::wants_ack(self, now)
    }
    fn wants_processes(&self, now: Instant) -> bool {
        Machine::wants_processes(self, now)
    }
    fn on_current(&self) -> bool {
        self.view().worker_on_current_decision
    }
}

/// A broken rule, to prove that the invariants catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    /// Drops switches published while a restart is under way (a real bug, fixed once).
    SwitchesMidRestart,
    /// Treats every decision as a switch.
    StartupIsASwitch,
    /// Paces without the cooldown.
    NoCooldown,
    /// Fails the gate ten times longer than allowed.
    LongGate,
    /// Restart-all mode: a sidecar that ignores the restart request an earlier one left.
    ForgetsRequest,
    /// In-place mode: a wrapper that starts the next worker as soon as it asks the old one to
    /// stop, not once it is gone.
    EagerStart,
}

struct Broken {
    inner: Machine,
    rule: Break,
    fail_for: Duration,
}

impl Sut for Broken {
    fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        let event = match (self.rule, event) {
            (Break::SwitchesMidRestart, Event::Published(d))
                if d.reason == Reason::Switch
                    && matches!(self.inner.view().phase, Phase::Signalled | Phase::Verifying) =>
            {
                return Vec::new();
            }
            (Break::ForgetsRequest, Event::Requested(_)) => return Vec::new(),
            (Break::StartupIsASwitch, Event::Published(mut d)) => {
                d.reason = Reason::Switch;
                Event::Published(d)
            }
            (_, e) => e,
        };
        let mut actions = self.inner.handle(now, event);
        if self.rule == Break::LongGate {
            for a in &mut actions {
                if let Action::Gate(Some(g)) = a {
                    g.until = now + self.fail_for * 10;
                }
            }
        }
        actions
    }
    fn next_wake(&self, now: Instant) -> Option<Instant> {
        self.inner.next_wake(now)
    }
    fn wants_ack(&self, now: Instant) -> bool {
        self.inner.wants_ack(now)
    }
    fn wants_processes(&self, now: Instant) -> bool {
        self.inner.wants_processes(now)
    }
    fn on_current(&self) -> bool {
        self.inner.view().worker_on_current_decision
    }
}

#[derive(Debug, Clone, Copy)]
struct Worker {
    id: ProcessId,
    hub: HubId,
    /// Exits at this time (after a signal).
    exits_at: Option<Instant>,
    ignores_term: bool,
}

/// One simulated pod.
struct World {
    rng: fastrand::Rng,
    t0: Instant,
    now: Instant,
    config: RestartConfig,
    rule: Option<Break>,
    sut: Box<dyn Sut>,
    /// The decision on disk: hub and generation.
    decision: (HubId, u64),
    worker: Option<Worker>,
    /// kubelet starts a worker at this time.
    starts_at: Option<Instant>,
    next_pid: i32,
    ack_file: Option<Ack>,
    /// An acknowledgement that becomes visible later.
    ack_due: Option<(Instant, Ack)>,
    permission_denied: bool,
    /// `/worker/livez`: fails until this time.
    gate: Option<Instant>,
    /// kubelet's next probe of `/worker/livez` (modes but none: it is the safety net).
    probe_at: Instant,
    probe_failures: u32,
    /// Scripted inputs, by time: decisions, sidecar crashes, forged acks, worker crashes.
    script: Vec<(Instant, Input)>,
    /// This sidecar's life: has it seen a switch; has a real acknowledgement placed the worker
    /// on another hub than the decision (the one exception to "never act on a startup or
    /// resumed decision"); its last action.
    life_switch_seen: bool,
    life_ack_elsewhere: bool,
    life_last_action: Option<Instant>,
    /// A sidecar restarted mid-switch while a forged acknowledgement hid where the worker ran.
    evidence_lost: bool,
    quiet_from: Instant,
    /// Restart-all mode: the restart request on disk.
    request: Option<Request>,
    /// Restart-all mode: the sidecar exited; kubelet starts it again at this time.
    sidecar_up_at: Option<Instant>,
    /// Restart-all mode: kubelet restarts only the sidecar on its exit (the gate is off).
    kubelet_ignores_rule: bool,
    /// Restart-all mode: a switch was published since the last exit.
    switch_since_exit: bool,
    /// In-place mode: the exec wrapper, while its container runs.
    wrapper: Option<Supervisor>,
    /// In-place mode: the move request on disk: generation and hub.
    move_request: Option<(u64, HubId)>,
}

#[derive(Debug, Clone, Copy)]
enum Input {
    Switch,
    SidecarCrash,
    ForgedAck,
    WorkerCrash,
}

const PROBE_PERIOD: Duration = Duration::from_secs(10);
const PROBE_THRESHOLD: u32 = 3;

impl World {
    fn new(seed: u64, rule: Option<Break>) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mode = [
            RestartMode::Signal,
            RestartMode::Liveness,
            RestartMode::RestartAll,
            RestartMode::InPlace,
            RestartMode::None,
        ];
        let mut config = support::builders::restart_config(mode[rng.usize(0..mode.len())]);
        config.jitter = secs([0.0, 0.5, 5.0][rng.usize(0..3)]);
        config.cooldown = secs([0.0, 10.0, 60.0][rng.usize(0..3)]);
        config.kill_after = secs([1.0, 30.0][rng.usize(0..2)]);
        let t0 = Instant::now();
        let mut script = Vec::new();
        let active = 600.0;
        for _ in 0..rng.usize(1..6) {
            // Bursts: a few switches within seconds of each other.
            let at = rng.f64() * active;
            for k in 0..rng.usize(1..4) {
                script.push((t0 + secs(at + k as f64 * rng.f64() * 3.0), Input::Switch));
            }
        }
        for (input, n) in [
            (Input::SidecarCrash, rng.usize(0..3)),
            (Input::ForgedAck, rng.usize(0..2)),
            (Input::WorkerCrash, rng.usize(0..2)),
        ] {
            for _ in 0..n {
                script.push((t0 + secs(rng.f64() * active), input));
            }
        }
        script.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
        let quiet_from = t0 + secs(active + 10.0);
        let permission_denied = config.mode == RestartMode::Signal && rng.u8(0..10) == 0;
        let kubelet_ignores_rule = rng.u8(0..8) == 0;
        let probe_phase = secs(rng.f64() * 10.0);
        let mut w = World {
            sut: sut(&config, rule, rng.u64(..)),
            rng,
            t0,
            now: t0,
            config,
            rule,
            decision: (P, 1),
            worker: None,
            starts_at: None,
            next_pid: 100,
            ack_file: None,
            ack_due: None,
            permission_denied,
            gate: None,
            probe_at: t0 + probe_phase,
            probe_failures: 0,
            script,
            life_switch_seen: false,
            life_ack_elsewhere: false,
            life_last_action: None,
            evidence_lost: false,
            quiet_from,
            request: None,
            sidecar_up_at: None,
            kubelet_ignores_rule,
            switch_since_exit: true,
            wrapper: None,
            move_request: None,
        };
        // The pod starts: the follower's first decision, then the worker starts on it.
        w.start_worker();
        w.publish(Reason::Startup);
        w
    }

    fn start_worker(&mut self) {
        assert!(
            self.worker.is_none(),
            "two workers run at once: {:?} had not exited",
            self.worker
        );
        if self.in_place() && self.wrapper.is_none() {
            // kubelet starts the container: the wrapper first, as its PID 1.
            self.wrapper = Some(Supervisor::new(self.config.kill_after));
        }
        self.next_pid += 1;
        let (hub, generation) = self.decision;
        self.worker = Some(Worker {
            id: ProcessId {
                pid: self.next_pid,
                start_ticks: self.now.duration_since(self.t0).as_millis() as u64,
            },
            hub,
            exits_at: None,
            ignores_term: self.rng.u8(0..4) == 0,
        });
        self.starts_at = None;
        self.probe_failures = 0;
        self.trace(("worker starts", self.worker));
        // The exec wrapper acknowledges the decision it started on: at once, or a little later.
        let ack = Ack {
            generation,
            hub: Some(hub),
        };
        match self.rng.u8(0..3) {
            0 => self.ack_file = Some(ack),
            _ => self.ack_due = Some((self.now + secs(self.rng.f64() * 3.0), ack)),
        }
        if self.in_place() {
            let started = supervisor::Input::Started {
                pid: self.next_pid,
                generation,
                hub,
            };
            self.supervise(started);
            // The wrapper reads the move request on file once a worker runs.
            self.wrapper_reads_request();
        }
    }

    fn in_place(&self) -> bool {
        self.config.mode == RestartMode::InPlace
    }

    /// The wrapper's inotify wake: a request naming a published decision goes to its machine.
    fn wrapper_reads_request(&mut self) {
        let published = self.decision.1;
        if let Some((generation, hub)) = self.move_request.filter(|(g, _)| *g <= published) {
            self.supervise(supervisor::Input::Asked { generation, hub });
        }
    }

    /// One input through the wrapper's machine, its orders carried out.
    fn supervise(&mut self, input: supervisor::Input) {
        let Some(wrapper) = self.wrapper.as_mut() else {
            return;
        };
        let mut orders = wrapper.handle(self.now, input);
        if self.rule == Some(Break::EagerStart)
            && orders.iter().any(|o| matches!(o, Order::Stop { .. }))
        {
            orders.push(Order::Start);
        }
        for order in orders {
            self.trace(&order);
            match order {
                Order::Start => self.start_worker(),
                Order::Stop { pid } => {
                    let delay = secs(self.rng.f64() * 5.0);
                    if let Some(w) = self.worker.as_mut().filter(|w| w.id.pid == pid) {
                        if !w.ignores_term {
                            w.exits_at.get_or_insert(self.now + delay);
                        }
                    }
                }
                Order::Kill { pid } | Order::Sweep { pgid: pid } => {
                    if self.worker.is_some_and(|w| w.id.pid == pid) {
                        self.worker_exits();
                    }
                }
                Order::Forward { .. } => {}
                // The simulated worker always dies of its SIGKILL.
                Order::GiveUp { .. } | Order::Exit(_) => {
                    // The container ends; kubelet starts it again after its back-off.
                    self.wrapper = None;
                    self.starts_at = Some(self.now + secs(1.0 + self.rng.f64() * 9.0));
                }
            }
        }
    }

    fn publish(&mut self, reason: Reason) {
        let (hub, generation) = self.decision;
        if reason == Reason::Switch {
            self.life_switch_seen = true;
            self.switch_since_exit = true;
        }
        // The driver reads the acknowledgement before each new decision.
        if let Some(ack) = self.ack_file {
            self.feed(Event::Ack(ack));
        }
        self.feed(Event::Published(Decision {
            hub,
            endpoint: format!("https://{hub}:6443"),
            generation,
            reason,
        }));
    }

    fn processes(&self) -> Vec<ProcessId> {
        self.worker.iter().map(|w| w.id).collect()
    }

    fn trace(&self, what: impl std::fmt::Debug) {
        if std::env::var_os("HUB_SIM_TRACE").is_some() {
            eprintln!("{:>10.3}s {what:?}", (self.now - self.t0).as_secs_f64());
        }
    }

    fn feed(&mut self, event: Event) {
        if !matches!(event, Event::Tick | Event::Processes(_)) {
            self.trace(&event);
        }
        if let Event::Ack(ack) = &event {
            let real = ack.generation <= self.decision.1;
            self.life_ack_elsewhere |= real && ack.hub != Some(self.decision.0);
        }
        // An exited sidecar hears nothing.
        if self.sidecar_up_at.is_some() {
            return;
        }
        let mut queue = self.sut.handle(self.now, event);
        while !queue.is_empty() {
            for action in std::mem::take(&mut queue) {
                if let Some(result) = self.carry_out(action) {
                    queue.extend(self.sut.handle(self.now, result));
                }
                if self.sidecar_up_at.is_some() {
                    return;
                }
            }
        }
    }

    fn carry_out(&mut self, action: Action) -> Option<Event> {
        self.trace(&action);
        match action {
            Action::Signal(procs) => {
                self.acted();
                if self.permission_denied {
                    return Some(Event::Signalled {
                        delivered: vec![],
                        denied: true,
                    });
                }
                let mut delivered = Vec::new();
                if let Some(w) = self.worker.as_mut().filter(|w| procs.contains(&w.id)) {
                    delivered.push(w.id);
                    if !w.ignores_term {
                        let delay = secs(self.rng.f64() * 5.0);
                        w.exits_at.get_or_insert(self.now + delay);
                    }
                }
                return Some(Event::Signalled {
                    delivered,
                    denied: false,
                });
            }
            Action::Kill(procs) => {
                if self.worker.is_some_and(|w| procs.contains(&w.id)) {
                    self.worker_exits();
                }
            }
            Action::Gate(Some(g)) => {
                if self.config.mode != RestartMode::Signal {
                    self.acted();
                }
                let held = g.until.saturating_duration_since(self.now);
                assert!(
                    held <= self.config.liveness_fail_for,
                    "the gate fails for {held:?}, longer than --liveness-fail-for"
                );
                self.gate = Some(g.until);
            }
            Action::Gate(None) => self.gate = None,
            Action::Record(Outcome::Observed) => self.acted(),
            Action::Move { generation, hub } => {
                if self.rng.u8(0..10) == 0 {
                    // The request could not be written: nothing was asked of the wrapper.
                    return Some(Event::MoveFailed);
                }
                self.acted();
                self.move_request = Some((generation, hub));
                self.wrapper_reads_request();
            }
            Action::Record(_) | Action::Restarted { .. } => {}
            Action::Exit { generation, hub } => {
                assert!(
                    self.switch_since_exit,
                    "the sidecar exited again with no switch published since its last exit"
                );
                if self.rng.u8(0..10) == 0 {
                    // The request could not be written, so the sidecar stays: no action.
                    return Some(Event::ExitFailed);
                }
                self.acted();
                self.switch_since_exit = false;
                self.request = Some(Request {
                    generation,
                    hub,
                    at: Some(self.now),
                });
                // kubelet starts the sidecar again within seconds; now and then only after a
                // back-off or its periodic sync.
                let delay = match self.rng.u8(0..5) {
                    0 => 10.0 + self.rng.f64() * 70.0,
                    _ => 1.0 + self.rng.f64() * 3.0,
                };
                let up = self.now + secs(delay);
                self.sidecar_up_at = Some(up);
                self.gate = None;
                if !self.kubelet_ignores_rule {
                    // Every container is removed; the worker starts after the new sidecar.
                    self.trace(("every container restarts", self.worker));
                    self.worker = None;
                    self.ack_due = None;
                    self.starts_at = Some(up + secs(0.5 + self.rng.f64() * 2.5));
                }
            }
        }
        None
    }

    /// An action: the restart signal, a failing gate, or (observe-only) its record.
    fn acted(&mut self) {
        assert!(
            self.life_switch_seen || self.life_ack_elsewhere,
            "acted on a startup, default or resumed decision"
        );
        if let Some(last) = self.life_last_action {
            let gap = self.now - last;
            assert!(
                gap >= self.config.cooldown,
                "two actions {gap:?} apart, inside the cooldown of {:?}",
                self.config.cooldown
            );
        }
        self.life_last_action = Some(self.now);
    }

    /// A new sidecar: fresh machine and gate; the follower resumes the decision on disk with
    /// the next generation. In restart-all mode it reads the restart request first, so the
    /// cooldown outlives the sidecar.
    fn new_sidecar(&mut self) {
        self.sut = sut(&self.config, self.rule, self.rng.u64(..));
        self.gate = None;
        self.decision.1 += 1;
        self.life_switch_seen = false;
        self.life_ack_elsewhere = false;
        if self.config.mode == RestartMode::RestartAll {
            if let Some(r) = self.request {
                self.feed(Event::Requested(r));
            }
        } else {
            self.life_last_action = None;
        }
        let forged = self
            .ack_file
            .is_some_and(|a| a.generation > self.decision.1);
        let behind = self.worker.is_some_and(|w| w.hub != self.decision.0);
        self.evidence_lost |= forged && behind;
        self.publish(Reason::Resumed);
    }

    fn worker_exits(&mut self) {
        self.trace(("worker exits", self.worker));
        let gone = self.worker.take();
        if self.in_place() {
            // The wrapper reaps it, and decides: the next worker, or the container's end.
            if let Some(w) = gone {
                let status = supervisor::Status::Code(0);
                self.supervise(supervisor::Input::Exited {
                    pid: w.id.pid,
                    status,
                });
            }
            return;
        }
        // kubelet's back-off before the restart.
        self.starts_at = Some(self.now + secs(1.0 + self.rng.f64() * 9.0));
    }

    /// The next time anything happens in the world.
    fn next_event(&self) -> Option<Instant> {
        let worker_exit = self.worker.and_then(|w| w.exits_at);
        let probe = (self.config.mode != RestartMode::None).then_some(self.probe_at);
        let wrapper = self.wrapper.as_ref().and_then(Supervisor::next_wake);
        [
            wrapper,
            worker_exit,
            self.sidecar_up_at,
            self.starts_at,
            self.ack_due.map(|(t, _)| t),
            self.script.last().map(|(t, _)| *t),
            probe,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn step(&mut self, to: Instant) {
        self.now = to;
        if self.sidecar_up_at.is_some_and(|t| t <= to) {
            self.sidecar_up_at = None;
            self.trace("the sidecar starts again");
            self.new_sidecar();
        }
        if self
            .worker
            .and_then(|w| w.exits_at)
            .is_some_and(|t| t <= to)
        {
            self.worker_exits();
        }
        if self
            .wrapper
            .as_ref()
            .and_then(Supervisor::next_wake)
            .is_some_and(|t| t <= to)
        {
            self.supervise(supervisor::Input::Tick);
        }
        if self.starts_at.is_some_and(|t| t <= to) {
            self.start_worker();
        }
        if let Some((t, ack)) = self.ack_due {
            if t <= to {
                self.ack_file = Some(ack);
                self.ack_due = None;
            }
        }
        if self.config.mode != RestartMode::None && to >= self.probe_at {
            self.probe_at += PROBE_PERIOD;
            self.probe();
        }
        while self.script.last().is_some_and(|(t, _)| *t <= to) {
            let Some((_, input)) = self.script.pop() else {
                break;
            };
            self.input(input);
        }
        if self.sidecar_up_at.is_some() {
            return;
        }
        // The driver's wake: acknowledgement, processes, tick.
        if self.sut.wants_ack(to) {
            if let Some(ack) = self.ack_file {
                self.feed(Event::Ack(ack));
            }
        }
        if self.sut.wants_processes(to) {
            let procs = self.processes();
            self.feed(Event::Processes(procs));
        }
        self.feed(Event::Tick);
    }

    fn probe(&mut self) {
        let failing = self.gate.is_some_and(|until| self.now < until);
        self.probe_failures = if failing { self.probe_failures + 1 } else { 0 };
        if self.probe_failures >= PROBE_THRESHOLD && self.worker.is_some() {
            self.worker_exits();
            self.probe_failures = 0;
        }
    }

    fn input(&mut self, input: Input) {
        self.trace(input);
        match input {
            Input::Switch | Input::SidecarCrash if self.sidecar_up_at.is_some() => {
                // No follower runs to publish a switch: the next sidecar sees it after it
                // resumes. A sidecar that is not running can't crash.
                if let (Input::Switch, Some(up)) = (input, self.sidecar_up_at) {
                    self.script.push((up + secs(1.0), input));
                    self.script.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
                }
            }
            Input::Switch => {
                let other = if self.decision.0 == P { S } else { P };
                self.decision = (other, self.decision.1 + 1);
                self.publish(Reason::Switch);
            }
            Input::SidecarCrash => self.new_sidecar(),
            Input::ForgedAck => {
                self.ack_file = Some(Ack {
                    // A generation no decision will ever have.
                    generation: self.decision.1 + 1_000_000 + self.rng.u64(0..5),
                    hub: Some(if self.rng.bool() { P } else { S }),
                });
            }
            Input::WorkerCrash => {
                if self.worker.is_some() {
                    self.worker_exits();
                }
            }
        }
    }

    /// Runs the script, then 30 quiet minutes; returns the hub the worker ends on.
    fn run(&mut self) -> Option<HubId> {
        let end = self.quiet_from + secs(1800.0);
        while self.now < end {
            // An exited sidecar asks for no wake.
            let wake = self
                .sidecar_up_at
                .is_none()
                .then(|| self.sut.next_wake(self.now))
                .flatten();
            let next = [wake, self.next_event()].into_iter().flatten().min();
            let Some(next) = next.filter(|t| *t <= end) else {
                break;
            };
            // Time only moves forward; a wake asked for in the past is served now.
            self.step(next.max(self.now + Duration::from_millis(1)));
        }
        self.worker.map(|w| w.hub)
    }
}

fn sut(config: &RestartConfig, rule: Option<Break>, seed: u64) -> Box<dyn Sut> {
    match rule {
        None => Box::new(Machine::new(config.clone(), seed)),
        Some(Break::NoCooldown) => {
            let mut c = config.clone();
            c.cooldown = Duration::ZERO;
            Box::new(Broken {
                inner: Machine::new(c, seed),
                rule: Break::NoCooldown,
                fail_for: config.liveness_fail_for,
            })
        }
        Some(rule) => Box::new(Broken {
            inner: Machine::new(config.clone(), seed),
            rule,
            fail_for: config.liveness_fail_for,
        }),
    }
}

/// One seed: `Err` names the invariant that broke.
fn simulate(seed: u64, rule: Option<Break>) -> Result<(), String> {
    let outcome = std::panic::catch_unwind(|| {
        let mut w = World::new(seed, rule);
        let ends_on = w.run();
        let decided = w.decision.0;
        let gate_off = w.config.mode == RestartMode::RestartAll && w.kubelet_ignores_rule;
        if gate_off && ends_on != Some(decided) {
            // kubelet restarted only the sidecar: unverified, and it must say so.
            assert!(
                !w.sut.on_current(),
                "kubelet never restarted the worker, yet the machine says it runs on the decision"
            );
        } else if w.evidence_lost && ends_on != Some(decided) {
            // Unsure, so no restart; but it must not claim the worker is on the decision.
            assert!(
                !w.sut.on_current(),
                "the evidence was lost and the worker is on {ends_on:?}, yet the machine says it runs on the decision"
            );
        } else if w.config.mode != RestartMode::None {
            assert_eq!(
                ends_on,
                Some(decided),
                "the worker ends on {ends_on:?}, not on the last decision ({decided:?}); mode {:?}",
                w.config.mode
            );
        }
    });
    outcome.map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

fn seeds() -> Vec<u64> {
    if let Ok(one) = std::env::var("HUB_SIM_SEED") {
        return vec![one.parse().expect("HUB_SIM_SEED is a number")];
    }
    let n = std::env::var("HUB_SIM_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    (0..n).collect()
}

fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = f();
    std::panic::set_hook(hook);
    out
}

#[test]
fn the_invariants_hold_over_every_seed() {
    let seeds = seeds();
    let failures: Vec<(u64, String)> = quietly(|| {
        seeds
            .iter()
            .filter_map(|&seed| simulate(seed, None).err().map(|e| (seed, e)))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} seeds broke an invariant; first: seed {} ({})",
        failures.len(),
        seeds.len(),
        failures[0].0,
        failures[0].1
    );
}

/// Each rule broken on purpose is caught by the invariant that guards it.
#[test]
fn a_broken_rule_is_caught() {
    let cases = [
        (Break::SwitchesMidRestart, "not on the last decision"),
        (Break::StartupIsASwitch, "startup, default or resumed"),
        (Break::NoCooldown, "inside the cooldown"),
        (Break::LongGate, "longer than --liveness-fail-for"),
        (Break::ForgetsRequest, "exited again with no switch"),
        (Break::EagerStart, "two workers run at once"),
    ];
    for (rule, message) in cases {
        let caught = quietly(|| {
            (0..1000)
                .filter_map(|seed| simulate(seed, Some(rule)).err())
                .find(|e| e.contains(message))
        });
        assert!(
            caught.is_some(),
            "{rule:?} broke no invariant over 1000 seeds"
        );
    }
}
