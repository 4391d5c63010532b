//! The in-place wrapper's rules, as a pure machine: `hub-follower exec --in-place` stays the
//! worker container's PID 1 and runs the worker as its child. Inputs go in with their time;
//! orders come out. It starts no process, sends no signal and reads no file: the driver in
//! `exec::in_place` does, and feeds back what happened. So the rules below are tested, and
//! simulated beside the sidecar's restart machine, without a process or a sleep.
//!
//! The rules:
//! 1. Every signal the wrapper receives goes to the worker. One that ends a container
//!    (SIGTERM, SIGINT, SIGQUIT) also means the wrapper leaves when the worker does: no new
//!    worker starts after it, even if a move was under way.
//! 2. A move request for a generation newer than the worker's, onto another hub than the
//!    worker's, stops the worker as kubelet would: SIGTERM, then SIGKILL after the grace, to
//!    the worker, its process group and every process it left (the wrapper is their
//!    subreaper, so one that left the group with `setsid` or `set -m` is still found). A
//!    request for the hub the worker runs on moves nothing: a sidecar that restarted
//!    mid-move can ask again for a move already done.
//! 3. A new worker starts only once the old one has been reaped and what it left killed:
//!    never two workers at once.
//! 4. A worker still there [`AFTER_KILL`] after its SIGKILL (stuck in the kernel, in `D`
//!    state) ends the wrapper with [`UNKILLABLE_EXIT`]: the wrapper is the container's PID 1,
//!    so its end takes every process of the container with it, and kubelet starts the
//!    container again, onto the published decision. No move waits for ever.
//! 5. A worker that exits when no move asked it to ends the wrapper with the worker's own
//!    status, so a crash still reaches kubelet as a crash.

use std::time::Duration;

use tokio::time::Instant;

use crate::verdict::HubId;

use super::startup::{exit_code_of_signal, STOP_SIGNALS as LEAVING};

/// How long a worker may outlive its SIGKILL before the wrapper gives up on it.
pub const AFTER_KILL: Duration = Duration::from_secs(10);

/// The wrapper's exit code when the worker outlived its SIGKILL by [`AFTER_KILL`].
pub const UNKILLABLE_EXIT: u8 = 75;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Code(i32),
    Signal(i32),
}

impl Status {
    /// The container's exit code for it, as a shell would give it: the code, or 128 plus the
    /// signal's number.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Code(c) => (c & 0xff) as u8,
            Status::Signal(s) => exit_code_of_signal(s),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The worker the last [`Order::Start`] started, on this decision.
    Started {
        pid: i32,
        generation: u64,
        hub: HubId,
    },
    /// A signal the wrapper received (not SIGCHLD, which the driver turns into `Exited`).
    Signal(i32),
    /// A process the wrapper reaped: its worker, or an orphan that the kernel gave PID 1.
    Exited { pid: i32, status: Status },
    /// The sidecar asks the worker to move onto this decision, which is published.
    Asked { generation: u64, hub: HubId },
    /// Time passed.
    Tick,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Start a worker on the decision published now, acknowledge it, answer `Started`.
    Start,
    /// Send this signal to the worker.
    Forward { pid: i32, signal: i32 },
    /// Ask the worker to stop (SIGTERM).
    Stop { pid: i32 },
    /// SIGKILL the worker (not yet reaped), its process group, and every process it left.
    Kill { pid: i32 },
    /// SIGKILL what a reaped worker left: its process group, and every process the wrapper
    /// is still the ancestor or subreaper of.
    Sweep { pgid: i32 },
    /// The worker outlived its SIGKILL by [`AFTER_KILL`]: say so and leave with
    /// [`UNKILLABLE_EXIT`].
    GiveUp {
        pid: i32,
        generation: u64,
        hub: HubId,
    },
    /// Leave with this code.
    Exit(u8),
}

#[derive(Debug, Clone, Copy)]
struct Worker {
    pid: i32,
    generation: u64,
    hub: HubId,
}

#[derive(Debug, Clone, Copy)]
struct Stopping {
    kill_at: Instant,
    /// When the SIGKILL went.
    killed_at: Option<Instant>,
}

#[derive(Debug, Clone)]
pub struct Supervisor {
    grace: Duration,
    worker: Option<Worker>,
    /// A move under way: the worker was asked to stop, and a new one starts once it is gone.
    stopping: Option<Stopping>,
    /// A signal that ends the container came: leave once the worker is gone.
    leaving: bool,
    out: Vec<Order>,
}

impl Supervisor {
    /// `grace`: how long a worker asked to stop has before SIGKILL.
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            worker: None,
            stopping: None,
            leaving: false,
            out: Vec::new(),
        }
    }

    /// The first worker.
    pub fn start(&mut self) -> Vec<Order> {
        vec![Order::Start]
    }

    /// When the machine next needs a [`Input::Tick`].
    pub fn next_wake(&self) -> Option<Instant> {
        self.stopping.map(|s| match s.killed_at {
            None => s.kill_at,
            Some(at) => at + AFTER_KILL,
        })
    }

    pub fn handle(&mut self, now: Instant, input: Input) -> Vec<Order> {
        match input {
            Input::Started {
                pid,
                generation,
                hub,
            } => {
                self.worker = Some(Worker {
                    pid,
                    generation,
                    hub,
                });
            }
            Input::Signal(signal) => self.on_signal(signal),
            Input::Exited { pid, status } => self.on_exit(pid, status),
            Input::Asked { generation, hub } => self.on_asked(now, generation, hub),
            Input::Tick => self.on_tick(now),
        }
        std::mem::take(&mut self.out)
    }

    fn on_signal(&mut self, signal: i32) {
        if LEAVING.contains(&signal) {
            self.leaving = true;
        }
        match self.worker {
            Some(w) => self.out.push(Order::Forward { pid: w.pid, signal }),
            // Between a reaped worker and the next one's start nothing runs: nothing to wait for.
            None if self.leaving => self
                .out
                .push(Order::Exit(Status::Signal(signal).exit_code())),
            None => {}
        }
    }

    fn on_asked(&mut self, now: Instant, generation: u64, hub: HubId) {
        let Some(w) = self.worker else { return };
        if self.leaving || self.stopping.is_some() || w.generation >= generation || w.hub == hub {
            return;
        }
        self.stopping = Some(Stopping {
            kill_at: now + self.grace,
            killed_at: None,
        });
        self.out.push(Order::Stop { pid: w.pid });
    }

    fn on_tick(&mut self, now: Instant) {
        let (Some(w), Some(s)) = (self.worker, self.stopping.as_mut()) else {
            return;
        };
        match s.killed_at {
            None if now >= s.kill_at => {
                s.killed_at = Some(now);
                self.out.push(Order::Kill { pid: w.pid });
            }
            Some(at) if now >= at + AFTER_KILL => {
                // Once: the wrapper leaves.
                self.stopping = None;
                self.leaving = true;
                self.out.push(Order::GiveUp {
                    pid: w.pid,
                    generation: w.generation,
                    hub: w.hub,
                });
            }
            _ => {}
        }
    }

    fn on_exit(&mut self, pid: i32, status: Status) {
        if self.worker.is_none_or(|w| w.pid != pid) {
            // An orphan the kernel handed to PID 1: reaped, nothing more.
            return;
        }
        self.worker = None;
        // Whatever the worker left behind goes with it.
        self.out.push(Order::Sweep { pgid: pid });
        if self.stopping.take().is_some() && !self.leaving {
            self.out.push(Order::Start);
        } else {
            self.out.push(Order::Exit(status.exit_code()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal_hook::consts::{SIGHUP, SIGKILL, SIGTERM, SIGUSR1};
    const P: HubId = HubId::PRIMARY;
    const S: HubId = HubId::SECONDARY;

    fn started(pid: i32, generation: u64, hub: HubId) -> Input {
        Input::Started {
            pid,
            generation,
            hub,
        }
    }

    fn asked(generation: u64, hub: HubId) -> Input {
        Input::Asked { generation, hub }
    }

    struct Run {
        s: Supervisor,
        t0: Instant,
    }

    impl Run {
        fn new() -> Self {
            let mut s = Supervisor::new(Duration::from_secs(30));
            assert_eq!(s.start(), [Order::Start]);
            let mut r = Self {
                s,
                t0: Instant::now(),
            };
            r.at(0.0, started(10, 1, P));
            r
        }
        fn at(&mut self, s: f64, input: Input) -> Vec<Order> {
            self.s.handle(self.t0 + Duration::from_secs_f64(s), input)
        }
    }

    fn exited(pid: i32, status: Status) -> Input {
        Input::Exited { pid, status }
    }

    #[test]
    fn every_signal_reaches_the_worker() {
        let mut r = Run::new();
        for signal in [SIGHUP, SIGUSR1, SIGTERM] {
            assert_eq!(
                r.at(1.0, Input::Signal(signal)),
                [Order::Forward { pid: 10, signal }]
            );
        }
    }

    #[test]
    fn a_worker_that_exits_unasked_ends_the_wrapper_with_its_status() {
        for (status, code) in [
            (Status::Code(0), 0),
            (Status::Code(3), 3),
            (Status::Signal(SIGKILL), 137),
            (Status::Signal(SIGTERM), 143),
        ] {
            let mut r = Run::new();
            assert_eq!(
                r.at(5.0, exited(10, status)),
                [Order::Sweep { pgid: 10 }, Order::Exit(code)]
            );
        }
    }

    #[test]
    fn a_move_stops_the_worker_and_starts_the_next_only_once_it_is_reaped() {
        let mut r = Run::new();
        assert_eq!(r.at(1.0, asked(2, S)), [Order::Stop { pid: 10 }]);
        // A second request meanwhile changes nothing: the next worker reads the newest decision.
        assert_eq!(r.at(1.5, asked(3, S)), []);
        assert_eq!(r.at(2.0, Input::Tick), []);
        assert_eq!(
            r.at(2.5, exited(10, Status::Signal(SIGTERM))),
            [Order::Sweep { pgid: 10 }, Order::Start]
        );
        r.at(2.5, started(11, 3, S));
        assert_eq!(r.s.next_wake(), None);
        // The request on file is for a decision this worker already runs on.
        assert_eq!(r.at(3.0, asked(3, S)), []);
        // The new worker is the one the next move stops.
        assert_eq!(r.at(4.0, asked(4, P)), [Order::Stop { pid: 11 }]);
    }

    #[test]
    fn a_worker_that_ignores_the_stop_is_killed_after_the_grace() {
        let mut r = Run::new();
        r.at(1.0, asked(2, S));
        assert_eq!(r.s.next_wake(), Some(r.t0 + Duration::from_secs(31)));
        assert_eq!(r.at(30.9, Input::Tick), []);
        assert_eq!(r.at(31.0, Input::Tick), [Order::Kill { pid: 10 }]);
        assert_eq!(r.at(31.5, Input::Tick), [], "killed once");
        assert_eq!(
            r.at(31.1, exited(10, Status::Signal(SIGKILL))),
            [Order::Sweep { pgid: 10 }, Order::Start]
        );
    }

    #[test]
    fn a_worker_that_outlives_its_sigkill_ends_the_wrapper_once() {
        let mut r = Run::new();
        r.at(1.0, asked(2, S));
        assert_eq!(r.at(31.0, Input::Tick), [Order::Kill { pid: 10 }]);
        assert_eq!(r.s.next_wake(), Some(r.t0 + Duration::from_secs(41)));
        assert_eq!(r.at(40.9, Input::Tick), []);
        assert_eq!(
            r.at(41.0, Input::Tick),
            [Order::GiveUp {
                pid: 10,
                generation: 1,
                hub: P
            }]
        );
        assert_eq!(r.s.next_wake(), None);
        assert_eq!(r.at(42.0, Input::Tick), [], "given up once");
        // No new worker: the wrapper is leaving, and a late exit only sweeps.
        assert_eq!(r.at(42.0, asked(3, S)), []);
        assert_eq!(
            r.at(43.0, exited(10, Status::Signal(SIGKILL))),
            [Order::Sweep { pgid: 10 }, Order::Exit(137)]
        );
    }

    #[test]
    fn kubelets_stop_during_a_move_ends_the_wrapper_instead_of_starting_a_worker() {
        let mut r = Run::new();
        r.at(1.0, asked(2, S));
        assert_eq!(
            r.at(1.2, Input::Signal(SIGTERM)),
            [Order::Forward {
                pid: 10,
                signal: SIGTERM
            }]
        );
        assert_eq!(
            r.at(1.4, exited(10, Status::Code(0))),
            [Order::Sweep { pgid: 10 }, Order::Exit(0)]
        );
    }

    #[test]
    fn no_move_while_leaving_and_none_for_an_older_or_the_same_generation() {
        let mut r = Run::new();
        assert_eq!(r.at(1.0, asked(1, S)), []);
        assert_eq!(r.at(1.0, asked(0, S)), []);
        r.at(1.1, Input::Signal(SIGTERM));
        assert_eq!(r.at(1.2, asked(2, S)), []);
    }

    #[test]
    fn a_request_for_the_hub_the_worker_runs_on_moves_nothing() {
        let mut r = Run::new();
        // A sidecar that restarted mid-move asks again, at its own newer generation.
        assert_eq!(r.at(1.0, asked(5, P)), []);
        assert_eq!(r.s.next_wake(), None);
    }

    #[test]
    fn an_orphan_is_reaped_and_nothing_more() {
        let mut r = Run::new();
        assert_eq!(r.at(1.0, exited(99, Status::Code(1))), []);
        // The worker is still the one a move stops.
        assert_eq!(r.at(2.0, asked(2, S)), [Order::Stop { pid: 10 }]);
    }
}
