//! What both wrappers do before the worker starts: wait for the first published decision;
//! and the ways they fail.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::handoff::{self, Handoff, HandoffError};

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
    #[error("no command given after --")]
    NoCommand,
    #[error("cannot set up {what}: {source}")]
    Setup {
        what: &'static str,
        source: io::Error,
    },
}

/// The decision published in `dir`, waiting up to `wait` for one.
pub fn wait_for_decision(dir: &Path, wait: Duration) -> Result<Handoff, ExecError> {
    let started = Instant::now();
    let mut last_error = None;
    loop {
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
