//! `hub-follower exec --in-place`: the driver of [`super::supervisor`]. It stays the worker
//! container's PID 1, starts the worker as its child, forwards signals to it, reaps every
//! process the kernel hands it, and restarts the worker in place when the sidecar writes a
//! move request. It blocks on one channel fed by two threads: one for signals, one for the
//! handoff folder's inotify events. Only the grace of a stopping worker wakes it on a timer.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::inotify;
use rustix::process::{Pid, Signal, WaitOptions};
use signal_hook::consts as sig;
use tokio::time::Instant;

use super::startup::{wait_for_decision, ExecError, STOP_SIGNALS};
use super::supervisor::{Input, Order, Status, Supervisor, AFTER_KILL, UNKILLABLE_EXIT};
use crate::handoff::{self, Ack, Handoff};

/// The signals the wrapper passes on; SIGKILL and SIGSTOP can't be caught, and reach only the
/// wrapper (kubelet's SIGKILL ends the whole container with it).
const FORWARDED: [i32; 8] = [
    sig::SIGHUP,
    sig::SIGINT,
    sig::SIGQUIT,
    sig::SIGUSR1,
    sig::SIGUSR2,
    sig::SIGALRM,
    sig::SIGTERM,
    sig::SIGWINCH,
];

/// Without inotify (a node out of inotify instances), the request is looked for this often.
const POLL_WITHOUT_INOTIFY: Duration = Duration::from_secs(1);

enum Wake {
    Signal(i32),
    /// Something was written in the handoff folder (or, without inotify, time passed).
    Folder,
}

/// What the wrapper is started with.
pub struct Options<'a> {
    pub dir: &'a Path,
    pub wait: Duration,
    pub grace: Duration,
    pub kubeconfig: bool,
    pub command: &'a [OsString],
}

/// Runs the worker until it exits on its own or kubelet stops the container; returns the code
/// to exit with.
pub fn run(options: &Options) -> Result<u8, ExecError> {
    let Some((program, args)) = options.command.split_first() else {
        return Err(ExecError::NoCommand);
    };
    let (tx, wakes) = mpsc::channel();
    // Before the first worker starts, so that no signal or request is missed.
    listen_for_signals(tx.clone()).map_err(|e| ExecError::Setup {
        what: "signal handlers",
        source: e,
    })?;
    watch_folder(options.dir, tx);
    // Every process the worker starts stays the wrapper's descendant, even one that leaves
    // its group and is orphaned: a move finds and kills it. (As the container's PID 1 the
    // wrapper is their reaper anyway.)
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        eprintln!("hub-follower exec: cannot become the subreaper of the worker's processes: {e}; a process that leaves the worker's group may outlive a move");
    }
    let first = wait_for_decision(options.dir, options.wait, &mut || stop_signal(&wakes))?;
    let mut supervisor = Supervisor::new(options.grace);
    let mut orders: VecDeque<Order> = supervisor.start().into();
    let mut next = Some(first);
    loop {
        while let Some(order) = orders.pop_front() {
            match order {
                Order::Start => {
                    let decision = match next.take() {
                        Some(h) => h,
                        None => wait_for_decision(options.dir, options.wait, &mut || {
                            stop_signal(&wakes)
                        })?,
                    };
                    let pid = start(options, program, args, &decision)?;
                    let started = Input::Started {
                        pid,
                        generation: decision.generation,
                        hub: decision.hub,
                    };
                    orders.extend(supervisor.handle(Instant::now(), started));
                    // A request written while no worker ran (or before this wrapper started).
                    orders.extend(asked(options.dir, &mut supervisor));
                }
                Order::Forward { pid, signal } => send(pid, signal, false),
                Order::Stop { pid } => {
                    eprintln!(
                        "hub-follower exec: moving the worker (PID {pid}): SIGTERM, SIGKILL after {}",
                        humantime::format_duration(options.grace)
                    );
                    send(pid, sig::SIGTERM, false);
                }
                Order::Kill { pid } => {
                    // The worker itself, even if it left its group, then what it started.
                    send(pid, sig::SIGKILL, false);
                    send(pid, sig::SIGKILL, true);
                    kill_descendants();
                }
                Order::Sweep { pgid } => {
                    send(pgid, sig::SIGKILL, true);
                    kill_descendants();
                }
                Order::GiveUp {
                    pid,
                    generation,
                    hub,
                } => {
                    eprintln!(
                        "hub-follower exec: the worker (PID {pid}) is still there {} after its SIGKILL (stuck in the kernel?); exiting {UNKILLABLE_EXIT}, so that the container ends with every process in it and kubelet starts it again onto the published decision",
                        humantime::format_duration(AFTER_KILL)
                    );
                    // For the sidecar, which counts it and records an Event.
                    let report = handoff::Unkillable {
                        pid: pid.unsigned_abs(),
                        generation,
                        hub,
                        at: jiff::Timestamp::now().to_string(),
                    };
                    if let Err(e) = handoff::write_unkillable(options.dir, &report) {
                        eprintln!(
                            "hub-follower exec: cannot write {}: {e}",
                            options.dir.join(handoff::UNKILLABLE_FILE).display()
                        );
                    }
                    return Ok(UNKILLABLE_EXIT);
                }
                Order::Exit(code) => return Ok(code),
            }
        }
        let wake = match supervisor.next_wake() {
            Some(at) => wakes.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => wakes
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let now = Instant::now();
        match wake {
            Ok(Wake::Signal(sig::SIGCHLD)) => {
                for (pid, status) in reap() {
                    orders.extend(supervisor.handle(now, Input::Exited { pid, status }));
                }
            }
            Ok(Wake::Signal(signal)) => {
                orders.extend(supervisor.handle(now, Input::Signal(signal)))
            }
            Ok(Wake::Folder) => orders.extend(asked(options.dir, &mut supervisor)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                orders.extend(supervisor.handle(now, Input::Tick))
            }
            // The signal thread holds a sender for as long as the process lives.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ExecError::Setup {
                    what: "signal handlers",
                    source: io::Error::other("the signal thread ended"),
                })
            }
        }
    }
}

/// While no worker runs: a stop signal that came, if any. Orphans are reaped; nothing else
/// is waiting to be told (the move request is read once the worker starts).
fn stop_signal(wakes: &mpsc::Receiver<Wake>) -> Option<i32> {
    while let Ok(wake) = wakes.try_recv() {
        match wake {
            Wake::Signal(sig::SIGCHLD) => drop(reap()),
            Wake::Signal(signal) if STOP_SIGNALS.contains(&signal) => return Some(signal),
            Wake::Signal(_) | Wake::Folder => {}
        }
    }
    None
}

/// The move request on file, when it names a published decision.
fn asked(dir: &Path, supervisor: &mut Supervisor) -> Vec<Order> {
    let Some(request) = handoff::read_move_request(dir) else {
        return Vec::new();
    };
    // A request for a generation not published is not the sidecar's: never act on it.
    let published = match handoff::read(dir) {
        Ok(Some(h)) => Some(h.generation),
        _ => handoff::generation_on_disk(dir),
    };
    if published.is_none_or(|g| request.generation > g) {
        return Vec::new();
    }
    let asked = Input::Asked {
        generation: request.generation,
        hub: request.hub,
    };
    supervisor.handle(Instant::now(), asked)
}

/// Starts the worker on `decision` in a process group of its own, and acknowledges it.
fn start(
    options: &Options,
    program: &OsString,
    args: &[OsString],
    decision: &Handoff,
) -> Result<i32, ExecError> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).envs(decision.env_pairs()).process_group(0);
    if options.kubeconfig {
        cmd.env("KUBECONFIG", options.dir.join(handoff::KUBECONFIG_FILE));
    }
    let child = cmd.spawn().map_err(|source| ExecError::Exec {
        command: program.clone(),
        source,
    })?;
    let pid = child.id();
    // Reaped by `reap`, not by `Child`: dropping it neither waits nor kills.
    drop(child);
    // The same words as the plain wrapper's, so one grep finds every start of the worker.
    eprintln!(
        "hub-follower exec: starting on hub {} ({}), generation {}, in place as PID {pid}",
        decision.hub, decision.endpoint, decision.generation
    );
    let ack = Ack {
        generation: decision.generation,
        pid,
        started_at: jiff::Timestamp::now().to_string(),
        hub: Some(decision.hub),
    };
    if let Err(e) = handoff::write_ack(options.dir, &ack) {
        eprintln!(
            "hub-follower exec: cannot write {}: {e}",
            options.dir.join(handoff::ACK_FILE).display()
        );
    }
    Ok(pid as i32)
}

/// Every child that has ended, reaped: the worker, and orphans the kernel gave PID 1.
fn reap() -> Vec<(i32, Status)> {
    let mut reaped = Vec::new();
    while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
        let status = match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => Status::Code(code),
            (None, Some(signal)) => Status::Signal(signal),
            // Stopped or continued: not an end.
            (None, None) => continue,
        };
        reaped.push((pid.as_raw_nonzero().get(), status));
    }
    reaped
}

/// SIGKILL to every process the wrapper is the ancestor of: the worker's whole tree, and,
/// since the wrapper is their subreaper, what the worker left when it ended. The wrapper has
/// no other children. Read from `/proc`; a process that ends meanwhile is no error.
fn kill_descendants() {
    let me = std::process::id() as i32;
    for pid in descendants(me, &parents()) {
        send(pid, sig::SIGKILL, false);
    }
}

/// Every process's parent, from `/proc/PID/stat`.
fn parents() -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            Some((pid, parent_in_stat(&stat)?))
        })
        .collect()
}

/// The parent in a `/proc/PID/stat` line: the second field after the command's `)`.
fn parent_in_stat(stat: &str) -> Option<i32> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Every descendant of `root` in `parents`, nearest first.
fn descendants(root: i32, parents: &[(i32, i32)]) -> Vec<i32> {
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && !found.contains(pid))
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Sends `signal` to a process (or its group); one already gone is no error.
fn send(pid: i32, signal: i32, group: bool) {
    let (Some(target), Some(signal)) = (Pid::from_raw(pid), Signal::from_named_raw(signal)) else {
        return;
    };
    let sent = if group {
        rustix::process::kill_process_group(target, signal)
    } else {
        rustix::process::kill_process(target, signal)
    };
    match sent {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => eprintln!("hub-follower exec: cannot send {signal:?} to {pid}: {e}"),
    }
}

fn listen_for_signals(tx: mpsc::Sender<Wake>) -> io::Result<()> {
    let mut signals =
        signal_hook::iterator::Signals::new(FORWARDED.iter().copied().chain([sig::SIGCHLD]))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if tx.send(Wake::Signal(signal)).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Wakes the loop when a file is written into the handoff folder. Without inotify it says so,
/// and looks every [`POLL_WITHOUT_INOTIFY`] instead: a move must not wait on a full node.
fn watch_folder(dir: &Path, tx: mpsc::Sender<Wake>) {
    let shown = dir.display().to_string();
    let watched = inotify::init(inotify::CreateFlags::CLOEXEC).and_then(|fd| {
        inotify::add_watch(
            &fd,
            dir,
            inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::CLOSE_WRITE,
        )?;
        Ok(fd)
    });
    let spawned = match watched {
        Ok(fd) => {
            let shown = shown.clone();
            std::thread::Builder::new()
            .name("inotify".into())
            .spawn(move || {
                let mut buf = [MaybeUninit::uninit(); 4096];
                let mut events = inotify::Reader::new(&fd, &mut buf);
                loop {
                    match events.next() {
                        Ok(e) => {
                            // An overflowed queue lost events, perhaps the request's: look.
                            let lost = e.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW);
                            let ours = lost || e.file_name().is_some_and(|n| {
                                n.to_bytes() == handoff::MOVE_REQUEST_FILE.as_bytes()
                            });
                            if ours && tx.send(Wake::Folder).is_err() {
                                return;
                            }
                        }
                        Err(rustix::io::Errno::INTR) => {}
                        Err(e) => {
                            eprintln!("hub-follower exec: inotify on {shown} failed ({e}); looking for move requests every {}", humantime::format_duration(POLL_WITHOUT_INOTIFY));
                            poll_folder(tx);
                            return;
                        }
                    }
                }
            })
        }
        Err(e) => {
            eprintln!(
                "hub-follower exec: cannot watch {shown} with inotify ({e}; is fs.inotify.max_user_instances exhausted?); looking for move requests every {}",
                humantime::format_duration(POLL_WITHOUT_INOTIFY)
            );
            std::thread::Builder::new()
                .name("poll".into())
                .spawn(move || poll_folder(tx))
        }
    };
    if let Err(e) = spawned {
        eprintln!("hub-follower exec: cannot start the thread that watches {}: {e}; the worker will not be moved in place", shown);
    }
}

fn poll_folder(tx: mpsc::Sender<Wake>) {
    loop {
        std::thread::sleep(POLL_WITHOUT_INOTIFY);
        if tx.send(Wake::Folder).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_command_with_spaces_and_parentheses() {
        assert_eq!(parent_in_stat("42 (a (b) c) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parent_in_stat("42 (sh) Z"), None);
    }

    #[test]
    fn descendants_are_the_whole_tree_below_and_nothing_else() {
        let parents = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 12), (15, 13)];
        assert_eq!(descendants(10, &parents), [11, 12, 14]);
        assert_eq!(descendants(14, &parents), Vec::<i32>::new());
    }
}
