//! What goes into the machine and what comes out.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::metrics::Outcome;
use crate::resolver::Reason;
use crate::restart::process::ProcessId;
use crate::verdict::HubId;

/// A published decision, as far as restarts are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub hub: HubId,
    pub endpoint: String,
    pub generation: u64,
    pub reason: Reason,
}

/// The worker's acknowledgement: the decision it started on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    pub generation: u64,
    pub hub: Option<HubId>,
}

/// Restart-all mode: the restart an earlier run of the sidecar asked kubelet for, by exiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The decision it was for.
    pub generation: u64,
    pub hub: HubId,
    /// When the sidecar exited for it; `None` when that is before anything this run's clock
    /// can name (it predates the node's boot).
    pub at: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Published(Decision),
    /// The restart request an earlier run left, read once before the first decision.
    Requested(Request),
    /// The request could not be written, so the sidecar did not exit.
    ExitFailed,
    /// In-place mode: the move request could not be written.
    MoveFailed,
    /// What the acknowledgement file says now.
    Ack(Ack),
    /// The worker processes that exist now (signal mode).
    Processes(Vec<ProcessId>),
    /// The result of an [`Action::Signal`]: the processes it reached, and whether one refused.
    Signalled {
        delivered: Vec<ProcessId>,
        denied: bool,
    },
    /// Time passed.
    Tick,
}

/// `/worker/livez` fails until `until`, saying `reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub until: Instant,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send the restart signal to these processes; answer with [`Event::Signalled`].
    Signal(Vec<ProcessId>),
    /// Send SIGKILL to these processes.
    Kill(Vec<ProcessId>),
    /// Fail the gate (`Some`) or let it pass (`None`).
    Gate(Option<Gate>),
    Record(Outcome),
    /// Restart-all mode: write the restart request for this decision, then exit with the
    /// restart code; answer with [`Event::ExitFailed`] when the request can't be written.
    Exit {
        generation: u64,
        hub: HubId,
    },
    /// In-place mode: write the move request for this decision, which the exec wrapper acts
    /// on; answer with [`Event::MoveFailed`] when it can't be written.
    Move {
        generation: u64,
        hub: HubId,
    },
    /// Restart-all mode: this sidecar started `after` the exit that asked kubelet to restart
    /// every container for `generation`; report it.
    Restarted {
        generation: u64,
        after: Duration,
    },
}

/// Where the machine is, as `/status` shows it.
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
