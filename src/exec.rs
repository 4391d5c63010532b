//! `hub-follower exec` (the worker's wrapper) and `hub-follower install` (puts the binary into
//! a shared volume, so the worker's image needs no change).

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::handoff::{self, Ack, Handoff, HandoffError};

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
}

/// Waits for a published decision, records which one this worker starts on, then becomes
/// `command` (exec(2)): the PID stays, so signals reach the worker directly. Returns only on
/// failure.
pub fn exec(dir: &Path, wait: Duration, kubeconfig: bool, command: &[OsString]) -> ExecError {
    let Some((program, args)) = command.split_first() else {
        return ExecError::NoCommand;
    };
    let handoff = match wait_for_decision(dir, wait) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let ack = Ack {
        generation: handoff.generation,
        pid: std::process::id(),
        started_at: jiff::Timestamp::now().to_string(),
        hub: Some(handoff.hub),
    };
    if let Err(e) = handoff::write_ack(dir, &ack) {
        // The worker must still start; the sidecar then can't tell it restarted, and says so.
        eprintln!(
            "hub-follower exec: cannot write {}: {e}",
            dir.join(handoff::ACK_FILE).display()
        );
    }
    eprintln!(
        "hub-follower exec: starting on hub {} ({}), generation {}",
        handoff.hub, handoff.endpoint, handoff.generation
    );
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).envs(handoff.env_pairs());
    if kubeconfig {
        cmd.env("KUBECONFIG", dir.join(handoff::KUBECONFIG_FILE));
    }
    ExecError::Exec {
        command: program.clone(),
        source: cmd.exec(),
    }
}

fn wait_for_decision(dir: &Path, wait: Duration) -> Result<Handoff, ExecError> {
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

/// Copies the running binary to `dest` in one rename, mode 0755.
pub fn install(dest: &Path) -> io::Result<()> {
    let source = std::env::current_exe()?;
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let name = dest
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "DEST names no file"))?;
    let tmp = dest.with_file_name(format!(
        ".{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    ));
    fs::copy(&source, &tmp)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, dest)
}
