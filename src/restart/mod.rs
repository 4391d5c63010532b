//! Moving the worker onto a confirmed switch, and only then: never for the startup decision, a
//! default or a resumed one, never while unsure, at most once per switch.
//!
//! The modes differ only in the action; the rest is shared:
//! switch published → wait (jitter, cooldown) → act → verify → the worker is on the decision.
//! `/worker/livez` fails from the action until the worker is known to run on the new decision,
//! for at most `--liveness-fail-for`, so a gate that never clears can't crash-loop the worker.
//!
//! The rules are in [`machine`], which is pure. This module is its driver: it reads the clock,
//! the acknowledgement file and `/proc`, sends the signals, counts the outcomes, and publishes
//! the machine's view for `/status` and `/worker/livez`.

pub mod machine;
pub mod pacing;
pub mod process;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::{RestartConfig, RestartMode};
use crate::events::{Fact, Sink};
use crate::handoff::{self, Handoff};
use crate::metrics::Metrics;
pub use crate::metrics::Outcome;
pub use machine::Phase;
use machine::{Action, Event, Gate, Machine};
use pacing::Wait;
use process::ProcessId;
use process::SignalError;

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
    gate_until: Option<Instant>,
}

impl RestartView {
    pub fn new(mode: RestartMode) -> Self {
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
            gate_until: None,
        }
    }

    /// `Some(reason)` while `/worker/livez` should fail.
    pub fn gate(&self, now: Instant) -> Option<&str> {
        let until = self.gate_until?;
        (now < until).then_some(self.gate_reason.as_deref().unwrap_or_default())
    }
}

/// The driver: the machine, and everything it must not touch itself.
pub struct Restarter {
    machine: Machine,
    config: RestartConfig,
    handoff_dir: PathBuf,
    metrics: Metrics,
    view: watch::Sender<RestartView>,
    events: Sink,
    /// Maps the machine's instants onto wall-clock time for `/status`.
    started: (Instant, jiff::Timestamp),
    /// The worker as its last acknowledgement names it, once the exec wrapper has written one.
    acked: Acked,
    /// Restart-all mode: the code to exit with, once the restart request is written.
    exit: Option<u8>,
}

/// Who the worker is, as far as acknowledgements tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acked {
    /// No acknowledgement yet: the worker may not run under the exec wrapper.
    Never,
    /// The process the last acknowledgement names, when it is alive and has the worker's name.
    Process(u32, Option<ProcessId>),
}

impl Restarter {
    pub fn new(config: RestartConfig, handoff_dir: PathBuf, metrics: Metrics) -> Self {
        Self {
            machine: Machine::new(config.clone(), fastrand::u64(..)),
            view: watch::Sender::new(RestartView::new(config.mode)),
            config,
            handoff_dir,
            metrics,
            events: Sink::default(),
            started: (Instant::now(), jiff::Timestamp::now()),
            acked: Acked::Never,
            exit: None,
        }
    }

    /// Records Events through `events`.
    pub fn with_events(mut self, events: Sink) -> Self {
        self.events = events;
        self
    }

    /// Follows the restart side's view.
    pub fn subscribe(&self) -> watch::Receiver<RestartView> {
        self.view.subscribe()
    }

    /// Runs until `shutdown` turns true or the decisions end (`None`), or until the sidecar must
    /// exit with the restart code (restart-all mode), which it returns. A decision is acted on
    /// when its generation is new; the rest of what the follower publishes is ignored.
    pub async fn run(
        mut self,
        mut decisions: watch::Receiver<Option<Handoff>>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Option<u8> {
        let mut last_generation = None;
        if self.config.mode == RestartMode::RestartAll {
            self.read_request(Instant::now()).await;
        }
        loop {
            let now = Instant::now();
            let published = decisions.borrow_and_update().clone();
            if let Some(h) = published.filter(|h| Some(h.generation) != last_generation) {
                last_generation = Some(h.generation);
                // Read first: after a sidecar restart it names the hub the worker runs on.
                self.read_ack(now).await;
                self.feed(now, Event::Published(decision_of(&h))).await;
            }
            if self.machine.wants_ack(now) {
                self.read_ack(now).await;
            }
            if self.machine.wants_processes(now) {
                let found = self.worker_processes().await;
                self.feed(now, Event::Processes(found)).await;
            }
            self.feed(now, Event::Tick).await;
            if self.exit.is_some() {
                return self.exit;
            }
            let wake = self.machine.next_wake(Instant::now());
            tokio::select! {
                _ = shutdown.changed() => return None,
                changed = decisions.changed() => if changed.is_err() { return None },
                _ = sleep_until(wake) => {}
            }
        }
    }

    /// The restart an earlier run asked for, placed on this run's clock. A request file that
    /// can't be read still counts: for the decision published now (which the earlier run exited
    /// for, unless it published another just before), at the file's time.
    async fn read_request(&mut self, now: Instant) {
        let dir = self.handoff_dir.clone();
        let found = off_runtime(move || {
            let file = handoff::read_restart_request(&dir)?;
            // For a request that can't be read: the decision published now.
            let published = file.request.is_none().then(|| handoff::read(&dir));
            Some((file, published))
        })
        .await
        .flatten();
        let Some((file, published)) = found else {
            return;
        };
        let wall_now = jiff::Timestamp::now();
        let (generation, hub, written) = match file.request {
            Some(r) => {
                let written = r.requested_at.parse::<jiff::Timestamp>().inspect_err(|e| {
                    tracing::warn!(requested_at = %r.requested_at, error = %e, "the last restart request has no valid time; taking the file's");
                });
                (r.generation, r.hub, written.ok())
            }
            None => match published {
                Some(Ok(Some(h))) => {
                    tracing::warn!(generation = h.generation, hub = %h.hub, "taking the unreadable restart request for the decision published now");
                    (h.generation, h.hub, None)
                }
                _ => {
                    tracing::warn!("an unreadable restart request and no readable decision: taking the request as none");
                    return;
                }
            },
        };
        let written = written.or_else(|| {
            file.modified
                .and_then(|m| jiff::Timestamp::try_from(m).ok())
        });
        // Unknown: now, so that the cooldown is kept rather than skipped.
        let at = on_this_clock(now, wall_now, written.unwrap_or(wall_now));
        self.feed(
            now,
            Event::Requested(machine::Request {
                generation,
                hub,
                at,
            }),
        )
        .await;
    }

    /// The worker's processes. Once the exec wrapper has acknowledged a decision, the worker is
    /// the process its acknowledgement names (the wrapper becomes the worker, so its PID is the
    /// worker's), if that process is alive and has the worker's name; any other process of that
    /// name in the shared PID namespace is somebody else's, and is neither signalled nor taken
    /// for a restarted worker. The process is pinned by its start time when first seen, so a
    /// PID the kernel hands to another process later is not it. Without an acknowledgement
    /// (a worker not started through `hub-follower exec`), every process with the worker's
    /// name.
    async fn worker_processes(&mut self) -> Vec<ProcessId> {
        let (name, dir, acked) = (
            self.config.worker_process.clone(),
            self.handoff_dir.clone(),
            self.acked,
        );
        let found = off_runtime(move || {
            let Some(ack) = handoff::read_ack(&dir) else {
                let found = match acked {
                    Acked::Never => process::find(&name),
                    Acked::Process(_, p) => p.filter(|p| process::alive(*p)).into_iter().collect(),
                };
                return (found, acked);
            };
            let current = match acked {
                // Once seen, the same process; until then (the wrapper writes the
                // acknowledgement just before it execs the worker), look again.
                Acked::Process(pid, Some(p)) if pid == ack.pid => {
                    Some(p).filter(|p| process::alive(*p))
                }
                _ => process::named(ack.pid, &name),
            };
            (
                current.into_iter().collect(),
                Acked::Process(ack.pid, current),
            )
        })
        .await;
        // A scan that panicked found nothing, and changed nothing.
        let Some((found, acked)) = found else {
            return Vec::new();
        };
        self.acked = acked;
        found
    }

    async fn read_ack(&mut self, now: Instant) {
        let dir = self.handoff_dir.clone();
        // Only the in-place wrapper writes the report of an unkillable worker.
        let in_place = self.config.mode == RestartMode::InPlace;
        let (ack, unkillable) = off_runtime(move || {
            let report = in_place.then(|| handoff::take_unkillable(&dir)).flatten();
            (handoff::read_ack(&dir), report)
        })
        .await
        .unwrap_or_default();
        // The wrapper gave up on a worker that outlived its SIGKILL, and ended its container.
        if let Some(report) = unkillable {
            match &report {
                Some(r) => tracing::warn!(pid = r.pid, generation = r.generation, hub = %r.hub, at = %r.at, "the exec wrapper found the worker still there after its SIGKILL and ended its container"),
                None => tracing::warn!(file = handoff::UNKILLABLE_FILE, "the exec wrapper found the worker still there after its SIGKILL and ended its container (its report cannot be parsed)"),
            }
            self.record(Outcome::Unkillable);
        }
        if let Some(ack) = ack {
            let ack = machine::Ack {
                generation: ack.generation,
                hub: ack.hub,
            };
            self.feed(now, Event::Ack(ack)).await;
        }
    }

    /// One event through the machine, its actions carried out, and the view republished.
    async fn feed(&mut self, now: Instant, event: Event) {
        let mut queue = self.machine.handle(now, event);
        while !queue.is_empty() {
            for action in std::mem::take(&mut queue) {
                if let Some(result) = self.carry_out(action).await {
                    queue.extend(self.machine.handle(now, result));
                }
            }
        }
        self.publish();
    }

    async fn carry_out(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Signal(procs) => {
                let mut delivered = Vec::new();
                let mut denied = false;
                for p in procs {
                    match process::send(p, self.config.signal.signal) {
                        Ok(()) => delivered.push(p),
                        Err(SignalError::Gone) => {}
                        Err(SignalError::PermissionDenied) => {
                            denied = true;
                            break;
                        }
                        Err(SignalError::Other(e)) => {
                            tracing::warn!(pid = p.pid, error = %e, "could not signal a worker process")
                        }
                    }
                }
                return Some(Event::Signalled { delivered, denied });
            }
            Action::Kill(procs) => {
                for p in procs {
                    if let Err(e) = process::send(p, rustix::process::Signal::KILL) {
                        tracing::warn!(pid = p.pid, error = %e, "could not SIGKILL a worker process");
                    }
                }
            }
            Action::Gate(gate) => self.view.send_modify(|v| set_gate(v, gate)),
            Action::Exit { generation, hub } => {
                let code = self.config.exit_code.0;
                let request = handoff::RestartRequest {
                    generation,
                    hub,
                    requested_at: jiff::Timestamp::now().to_string(),
                    exit_code: code,
                };
                let dir = self.handoff_dir.clone();
                let written = off_runtime(move || handoff::write_restart_request(&dir, &request))
                    .await
                    .unwrap_or_else(|| Err(std::io::Error::other("the write panicked")));
                if let Err(e) = written {
                    tracing::error!(dir = %self.handoff_dir.display(), error = %e, "cannot write the restart request, so not exiting: the next sidecar would not know the worker is restarting onto the new hub. Trying again after the cooldown");
                    return Some(Event::ExitFailed);
                }
                tracing::info!(%hub, generation, exit_code = code, "exiting so that kubelet restarts every container of the pod onto the new hub");
                self.record(Outcome::Exited);
                self.exit = Some(code);
            }
            Action::Move { generation, hub } => {
                let request = handoff::MoveRequest {
                    generation,
                    hub,
                    requested_at: jiff::Timestamp::now().to_string(),
                };
                let dir = self.handoff_dir.clone();
                let written = off_runtime(move || handoff::write_move_request(&dir, &request))
                    .await
                    .unwrap_or_else(|| Err(std::io::Error::other("the write panicked")));
                if let Err(e) = written {
                    tracing::error!(dir = %self.handoff_dir.display(), error = %e, "cannot write the move request for the exec wrapper; trying again after the cooldown");
                    return Some(Event::MoveFailed);
                }
                self.record(Outcome::Requested);
            }
            Action::Restarted { generation, after } => {
                self.events.send(Fact::AllRestarted { generation, after });
            }
            Action::Record(outcome) => self.record(outcome),
        }
        None
    }

    /// An outcome, counted and recorded as an Event.
    fn record(&mut self, outcome: Outcome) {
        self.metrics
            .worker_restarts
            .with_label_values(&[self.config.mode.as_str(), outcome.as_str()])
            .inc();
        self.events.send(Fact::Restart {
            outcome,
            mode: self.config.mode.as_str(),
            signal: self.config.signal.name,
            generation: self.machine.view().target_generation,
        });
    }

    fn publish(&self) {
        let m = self.machine.view();
        let on = m.worker_on_current_decision;
        self.metrics.worker_on_current.set(i64::from(on));
        let (at, wall) = self.started;
        let since = m.since.and_then(|t| {
            let d = jiff::SignedDuration::try_from(t.saturating_duration_since(at)).ok()?;
            Some(wall.checked_add(d).ok()?.to_string())
        });
        self.view.send_modify(|v| {
            v.phase = m.phase;
            v.waiting_for = m.waiting_for;
            v.since = since;
            v.target_generation = m.target_generation;
            v.last_outcome = m.last_outcome;
            v.worker_on_current_decision = on;
        });
    }
}

/// Where the wall-clock time `written` falls on this run's clock, `now` being `wall_now`. A
/// time in the future counts as now; one before anything the clock can name is `None`.
fn on_this_clock(
    now: Instant,
    wall_now: jiff::Timestamp,
    written: jiff::Timestamp,
) -> Option<Instant> {
    let age: Duration = wall_now
        .duration_since(written)
        .try_into()
        .unwrap_or(Duration::ZERO);
    now.checked_sub(age)
}

fn set_gate(v: &mut RestartView, gate: Option<Gate>) {
    v.gate_failing = gate.is_some();
    v.gate_until = gate.as_ref().map(|g| g.until);
    v.gate_reason = gate.map(|g| g.reason);
}

fn decision_of(h: &Handoff) -> machine::Decision {
    machine::Decision {
        hub: h.hub,
        endpoint: h.endpoint.clone(),
        generation: h.generation,
        reason: h.reason,
    }
}

/// `f` on the blocking pool: the handoff folder's files (synced writes among them) and the
/// `/proc` scan must not stall the runtime that serves `/healthz` and runs the rounds. None
/// when `f` panicked.
async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::Reason;
    use crate::testing::{handoff, restart_config, secs};
    use crate::verdict::HubId;
    const P: HubId = HubId::PRIMARY;
    const S: HubId = HubId::SECONDARY;

    /// The exec wrapper's acknowledgement of a worker (PID 42) on `generation` and `hub`.
    fn write_ack(dir: &std::path::Path, generation: u64, hub: HubId) {
        let ack = handoff::Ack {
            generation,
            pid: 42,
            started_at: String::new(),
            hub: Some(hub),
        };
        handoff::write_ack(dir, &ack).unwrap();
    }

    /// Regression: the worker acknowledged a switch published while the restart for the one
    /// before it was under way; the restarter must know it runs on that newer decision.
    #[tokio::test(start_paused = true)]
    async fn a_switch_published_during_a_restart_is_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = restart_config(RestartMode::Liveness);
        config.jitter = Duration::ZERO;
        config.cooldown = Duration::ZERO;
        let metrics = Metrics::new(&[P, S], "liveness").unwrap();
        let (decisions, rx) = watch::channel(None);
        let publish = |hub: HubId, generation, reason| {
            decisions.send_replace(Some(handoff(hub, generation, reason)))
        };
        let (_stop, stop) = watch::channel(false);
        let restarter = Restarter::new(config, dir.path().into(), metrics);
        let view = restarter.subscribe();
        tokio::spawn(restarter.run(rx, stop));
        let gate = || view.borrow().gate_failing;
        let step = || tokio::time::sleep(Duration::from_millis(300));

        publish(P, 1, Reason::Startup);
        step().await;
        assert!(!gate(), "no restart at startup");
        publish(S, 2, Reason::Switch);
        step().await;
        assert!(gate(), "the switch fails the gate");
        publish(P, 3, Reason::Switch);
        step().await;
        // Kubelet restarts the worker; the wrapper starts it on the newest decision.
        write_ack(dir.path(), 3, P);
        tokio::time::sleep(secs(2)).await;
        assert!(!gate(), "the acknowledgement clears the gate");
        assert!(view.borrow().worker_on_current_decision);

        publish(S, 4, Reason::Switch);
        step().await;
        assert!(
            gate(),
            "the worker runs on the primary: a switch to the secondary must move it"
        );
    }

    /// Restart-all across the exit: the first sidecar writes the request and returns the exit
    /// code; the next one, started on the same directory beside the old worker's stale
    /// acknowledgement, waits for the new worker's instead of exiting again.
    #[tokio::test(start_paused = true)]
    async fn restart_all_exits_once_and_the_next_sidecar_waits_for_the_new_worker() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = restart_config(RestartMode::RestartAll);
        config.jitter = Duration::ZERO;
        let ack = |generation, hub| write_ack(dir.path(), generation, hub);
        let metrics = Metrics::new(&[P, S], "restart-all").unwrap();
        let (decisions, rx) = watch::channel(None);
        let (_stop, stop) = watch::channel(false);
        ack(1, P);
        decisions.send_replace(Some(handoff(P, 1, Reason::Startup)));
        let first = tokio::spawn(
            Restarter::new(config.clone(), dir.path().into(), metrics.clone())
                .run(rx, stop.clone()),
        );
        tokio::time::sleep(secs(1)).await;
        assert!(!first.is_finished(), "no exit at startup");
        decisions.send_replace(Some(handoff(S, 2, Reason::Switch)));
        assert_eq!(first.await.unwrap(), Some(42));
        let request = handoff::read_restart_request(dir.path())
            .and_then(|f| f.request)
            .expect("the request is written");
        assert_eq!(
            (request.generation, request.hub, request.exit_code),
            (2, S, 42)
        );
        let exited = metrics
            .worker_restarts
            .with_label_values(&["restart-all", "exited"])
            .get();
        assert_eq!(exited, 1);

        // The next sidecar: the old worker's acknowledgement is still on file.
        let (decisions, rx) = watch::channel(None);
        decisions.send_replace(Some(handoff(S, 3, Reason::Resumed)));
        let restarter = Restarter::new(config.clone(), dir.path().into(), metrics.clone());
        let view = restarter.subscribe();
        let second = tokio::spawn(restarter.run(rx, stop.clone()));
        tokio::time::sleep(secs(30)).await;
        assert!(!second.is_finished(), "the next sidecar exited again");
        assert_eq!(view.borrow().phase, Phase::Verifying);
        ack(3, S);
        tokio::time::sleep(secs(2)).await;
        assert_eq!(view.borrow().phase, Phase::Verified);
        assert!(view.borrow().worker_on_current_decision);
        // A switch inside the cooldown the first sidecar began waits for its end (60s).
        decisions.send_replace(Some(handoff(P, 4, Reason::Switch)));
        tokio::time::sleep(secs(5)).await;
        assert_eq!(view.borrow().waiting_for, Some(pacing::Wait::Cooldown));
        assert_eq!(second.await.unwrap(), Some(42));
    }

    /// In place, the wrapper gave up on a worker that outlived its SIGKILL and exited 75: the
    /// sidecar learns it from the wrapper's report, counts it once and records a Warning, and
    /// verifies the move by the next worker's acknowledgement.
    #[tokio::test(start_paused = true)]
    async fn an_unkillable_worker_in_place_is_counted_and_recorded_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = restart_config(RestartMode::InPlace);
        config.jitter = Duration::ZERO;
        let ack = |generation, hub| write_ack(dir.path(), generation, hub);
        let metrics = Metrics::new(&[P, S], "in-place").unwrap();
        let (events_tx, mut events) = tokio::sync::mpsc::channel(16);
        let failed = metrics.events_failed.clone();
        let (decisions, rx) = watch::channel(None);
        let (_stop, stop) = watch::channel(false);
        ack(1, P);
        decisions.send_replace(Some(handoff(P, 1, Reason::Startup)));
        let restarter = Restarter::new(config, dir.path().into(), metrics.clone())
            .with_events(Sink::new(events_tx, failed));
        let view = restarter.subscribe();
        tokio::spawn(restarter.run(rx, stop));
        tokio::time::sleep(secs(1)).await;
        decisions.send_replace(Some(handoff(S, 2, Reason::Switch)));
        tokio::time::sleep(secs(1)).await;
        let request = handoff::read_move_request(dir.path()).expect("the move is asked for");
        assert_eq!((request.generation, request.hub), (2, S));

        // The wrapper's last words, then (kubelet restarted its container) the next worker's.
        let report = handoff::Unkillable {
            pid: 42,
            generation: 1,
            hub: P,
            at: jiff::Timestamp::now().to_string(),
        };
        handoff::write_unkillable(dir.path(), &report).unwrap();
        ack(2, S);
        tokio::time::sleep(secs(5)).await;
        assert_eq!(view.borrow().phase, Phase::Verified);
        let count = |outcome: &str| {
            metrics
                .worker_restarts
                .with_label_values(&["in-place", outcome])
                .get()
        };
        assert_eq!(count("unkillable"), 1);
        assert!(
            !dir.path().join(handoff::UNKILLABLE_FILE).exists(),
            "the report is taken"
        );
        let mut notes = Vec::new();
        while let Ok(note) = events.try_recv() {
            notes.push(note);
        }
        let unkillable: Vec<_> = notes
            .iter()
            .filter(|n| n.reason == "WorkerUnkillable")
            .collect();
        assert_eq!(unkillable.len(), 1, "{notes:?}");
        assert_eq!(unkillable[0].kind, crate::events::Kind::Warning);
        assert!(unkillable[0].message.contains("SIGKILL"));

        // A later read of the acknowledgement counts nothing again.
        decisions.send_replace(Some(handoff(S, 3, Reason::Resumed)));
        tokio::time::sleep(secs(5)).await;
        assert_eq!(count("unkillable"), 1);
    }

    #[test]
    fn a_requests_wall_clock_time_is_placed_on_this_runs_clock() {
        let now = Instant::now() + secs(3 * 86_400);
        let wall: jiff::Timestamp = "2026-12-03T18:00:00Z".parse().unwrap();
        let ago = |s: i64| wall - jiff::SignedDuration::from_secs(s);
        assert_eq!(on_this_clock(now, wall, ago(30)), Some(now - secs(30)));
        assert_eq!(
            on_this_clock(now, wall, ago(2 * 86_400)),
            Some(now - secs(2 * 86_400))
        );
        // Written "later" than now (a clock stepped back): now.
        assert_eq!(on_this_clock(now, wall, ago(-10)), Some(now));
    }

    #[tokio::test(start_paused = true)]
    async fn restart_all_does_not_exit_when_the_request_cannot_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("not-there");
        let mut config = restart_config(RestartMode::RestartAll);
        config.jitter = Duration::ZERO;
        let metrics = Metrics::new(&[P, S], "restart-all").unwrap();
        let (decisions, rx) = watch::channel(None);
        let (_stop, stop) = watch::channel(false);
        let restarter = Restarter::new(config, gone, metrics.clone());
        let view = restarter.subscribe();
        let task = tokio::spawn(restarter.run(rx, stop));
        decisions.send_replace(Some(handoff(P, 1, Reason::Startup)));
        tokio::time::sleep(secs(1)).await;
        decisions.send_replace(Some(handoff(S, 2, Reason::Switch)));
        tokio::time::sleep(secs(1)).await;
        assert!(!task.is_finished(), "exited without a request");
        let count = |outcome| {
            metrics
                .worker_restarts
                .with_label_values(&["restart-all", outcome])
                .get()
        };
        assert_eq!((count("exited"), count("unverified")), (0, 1));
        assert_eq!(view.borrow().waiting_for, Some(pacing::Wait::Cooldown));
    }
}
