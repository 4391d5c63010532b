//! What both wrappers do before the worker starts: wait for the first published decision,
//! unless kubelet stops the container first; and the ways they fail.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::handoff::{self, Handoff, HandoffError};

/// Signals that end a container: kubelet's default stop signal, and the two a person sends.
pub const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGQUIT,
];

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("no decision was published in {dir} within {waited} (is the hub-follower sidecar running, and is {dir} the volume it shares with this container?){last}", waited = humantime::format_duration(*.waited), last = .last_error.as_ref().map(|e| format!("; last error: {e}")).unwrap_or_default())]
    NothingPublished {
        dir: PathBuf,
        waited: Duration,
        last_error: Option<HandoffError>,
    },
    #[error("cannot start {command:?}: {source}")]
    Exec {
        command: OsString,
        source: io::Error,
    },
    /// Kubelet stopped the container while no worker ran: leave at once, as a worker would,
    /// rather than make kubelet wait out the pod's grace.
    #[error(
        "stopped by signal {signal} while waiting for a decision in {dir}; no worker was started"
    )]
    Stopped { signal: i32, dir: PathBuf },
    #[error("no command given after --")]
    NoCommand,
    #[error("cannot set up {what}: {source}")]
    Setup {
        what: &'static str,
        source: io::Error,
    },
}

impl ExecError {
    /// The wrapper's exit code: a stop signal's as a shell gives it (128 plus its number).
    pub fn exit_code(&self) -> u8 {
        match self {
            ExecError::Exec { .. } => 127,
            ExecError::NoCommand => 2,
            ExecError::Stopped { signal, .. } => exit_code_of_signal(*signal),
            ExecError::NothingPublished { .. } | ExecError::Setup { .. } => 1,
        }
    }
}

/// A process ended by `signal`, as a shell gives its status: 128 plus the signal's number.
pub fn exit_code_of_signal(signal: i32) -> u8 {
    (128 + (signal & 0x7f)) as u8
}

/// The decision published in `dir`, waiting up to `wait` for one. `stopped` is asked between
/// looks: a stop signal it returns ends the wait.
pub fn wait_for_decision(
    dir: &Path,
    wait: Duration,
    stopped: &mut dyn FnMut() -> Option<i32>,
) -> Result<Handoff, ExecError> {
    let started = Instant::now();
    let mut last_error = None;
    loop {
        if let Some(signal) = stopped() {
            return Err(ExecError::Stopped {
                signal,
                dir: dir.to_path_buf(),
            });
        }
        match handoff::read(dir) {
            Ok(Some(h)) => return Ok(h),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if started.elapsed() >= wait {
            return Err(ExecError::NothingPublished {
                dir: dir.to_path_buf(),
                waited: wait,
                last_error,
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
