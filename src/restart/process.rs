//! Finding and signalling the worker in a shared PID namespace.
//!
//! A process is named by its PID *and* its start time, so a PID that the kernel reused for some
//! other process is never mistaken for the worker; signals go through a pidfd where the kernel
//! has them, which closes the remaining window between the check and the signal.

use std::fs;
use std::io;
use std::path::Path;

use rustix::process::{Pid, PidfdFlags, Signal};

/// One process, as opposed to one PID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId {
    pub pid: i32,
    /// Clock ticks after boot at which it started (field 22 of `/proc/PID/stat`).
    pub start_ticks: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("not permitted (the worker runs as another user and this container lacks CAP_KILL)")]
    PermissionDenied,
    #[error("the process is gone")]
    Gone,
    #[error("{0}")]
    Other(io::Error),
}

/// The processes whose executable (or, when that can't be read, `argv[0]`) has base name `name`.
/// Never PID 1 (the pod's pause process) and never this process.
pub fn find(name: &str) -> Vec<ProcessId> {
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<ProcessId> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != 1 && pid != me)
        .filter(|&pid| names_match(pid, name))
        .filter_map(|pid| {
            let stat = read_stat(pid)?;
            (stat.state != 'Z').then_some(ProcessId {
                pid,
                start_ticks: stat.start_ticks,
            })
        })
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

/// The process with PID `pid`, if it is alive and its executable (or `argv[0]`) has base name
/// `name`: how the worker an acknowledgement names is recognised.
pub fn named(pid: u32, name: &str) -> Option<ProcessId> {
    let pid = i32::try_from(pid).ok().filter(|&p| p > 1)?;
    if pid == std::process::id() as i32 || !names_match(pid, name) {
        return None;
    }
    let stat = read_stat(pid)?;
    (stat.state != 'Z').then_some(ProcessId {
        pid,
        start_ticks: stat.start_ticks,
    })
}

/// Still the same process, and not a zombie.
pub fn alive(p: ProcessId) -> bool {
    read_stat(p.pid).is_some_and(|s| s.start_ticks == p.start_ticks && s.state != 'Z')
}

pub fn send(p: ProcessId, signal: Signal) -> Result<(), SignalError> {
    let pid = Pid::from_raw(p.pid).ok_or(SignalError::Gone)?;
    let result = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => {
            // The pidfd pins whatever process holds the PID now; make sure that is ours.
            if !alive(p) {
                return Err(SignalError::Gone);
            }
            rustix::process::pidfd_send_signal(&fd, signal)
        }
        Err(rustix::io::Errno::NOSYS) => {
            if !alive(p) {
                return Err(SignalError::Gone);
            }
            rustix::process::kill_process(pid, signal)
        }
        Err(e) => Err(e),
    };
    result.map_err(|e| match e {
        rustix::io::Errno::PERM => SignalError::PermissionDenied,
        rustix::io::Errno::SRCH => SignalError::Gone,
        other => SignalError::Other(other.into()),
    })
}

fn names_match(pid: i32, name: &str) -> bool {
    let base = |p: &Path| p.file_name().is_some_and(|f| f == name);
    // The exe link can't be read for another user's process without CAP_SYS_PTRACE; argv[0]
    // always can, and an interpreter-run worker is only recognisable by it.
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok();
    if exe.as_deref().is_some_and(base) {
        return true;
    }
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    !argv0.is_empty() && base(Path::new(&*String::from_utf8_lossy(argv0)))
}

struct Stat {
    state: char,
    start_ticks: u64,
}

fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `/proc/PID/stat`: the command name is in parentheses and may itself hold spaces and ')', so
/// the fields are counted from the last ')'.
fn parse_stat(stat: &str) -> Option<Stat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3) the start time is field 22, so 18 more fields on.
    let start_ticks = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start_ticks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_paren() {
        let line = "4242 (we(ird) name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.start_ticks), ('S', 987654));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn this_process_is_visible_but_never_matched() {
        let me = read_stat(std::process::id() as i32).unwrap();
        assert_ne!(me.state, 'Z');
        assert!(me.start_ticks > 0);
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_name().unwrap().to_str().unwrap();
        assert!(names_match(std::process::id() as i32, name));
        assert!(find(name)
            .iter()
            .all(|p| p.pid != std::process::id() as i32));
    }

    #[test]
    fn a_real_child_is_found_signalled_and_seen_gone() {
        let dir = tempfile::tempdir().unwrap();
        let name = "hf-test-sleeper";
        let link = dir.path().join(name);
        std::os::unix::fs::symlink("/bin/sleep", &link).unwrap();
        let mut child = std::process::Command::new(&link).arg("30").spawn().unwrap();
        // /proc shows the new image a moment after spawn returns on a loaded machine.
        let mut found = find(name);
        for _ in 0..100 {
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            found = find(name);
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, child.id() as i32);
        assert_eq!(named(child.id(), name), Some(found[0]));
        assert_eq!(named(child.id(), "another-name"), None);
        assert_eq!(named(1, name), None);
        assert!(alive(found[0]));
        send(found[0], Signal::TERM).unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert!(!alive(found[0]));
        assert!(matches!(
            send(found[0], Signal::TERM),
            Err(SignalError::Gone)
        ));
    }
}
