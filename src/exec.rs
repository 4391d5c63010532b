//! `hub-follower exec` (the worker's wrapper) and `hub-follower install` (puts the binary into
//! a shared volume, so the worker's image needs no change).
//!
//! The wrapper either becomes the worker (exec(2)), or, with `--in-place`, stays as the
//! container's PID 1 and restarts the worker in place when the sidecar asks ([`in_place`]).

pub mod in_place;
pub mod startup;
pub mod supervisor;

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use startup::ExecError;
use startup::{wait_for_decision, STOP_SIGNALS};

use crate::handoff::{self, Ack};

/// Waits for a published decision, records which one this worker starts on, then becomes
/// `command` (exec(2)): the PID stays, so signals reach the worker directly. A stop signal
/// during the wait ends it (as PID 1 the wrapper would otherwise ignore it, and kubelet would
/// wait out the pod's grace). Returns only on failure.
pub fn exec(dir: &Path, wait: Duration, kubeconfig: bool, command: &[OsString]) -> ExecError {
    let Some((program, args)) = command.split_first() else {
        return ExecError::NoCommand;
    };
    // exec(2) puts every caught signal back to its default: the worker gets its own.
    let stop = Arc::new(AtomicUsize::new(0));
    for signal in STOP_SIGNALS {
        if let Err(e) = signal_hook::flag::register_usize(signal, stop.clone(), signal as usize) {
            return ExecError::Setup {
                what: "signal handlers",
                source: e,
            };
        }
    }
    let mut stopped = || match stop.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal as i32),
    };
    let handoff = match wait_for_decision(dir, wait, &mut stopped) {
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
