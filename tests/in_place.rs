//! The in-place restart with real processes: `hub-follower exec --in-place` running a stand-in
//! worker as its child, on its own and beside the real sidecar with `--restart-mode in-place`.
//! The container is never restarted here: the wrapper process must outlive every move.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use hub_follower::handoff::{self, MoveRequest};
use hub_follower::resolver::Reason;
use hub_follower::verdict::HubId;
use support::{Hubs, Sidecar};

const P: HubId = HubId::PRIMARY;
const S: HubId = HubId::SECONDARY;

/// The stand-in worker. At start it records whether the worker before it still runs (two
/// workers at once), starts a helper in its process group (what the move must not leave
/// behind), then records its env and the signals it gets. `escaping` also starts one in a
/// group of its own.
const SCRIPT: &str = r#"
record="$1"; temper="$2"
prev=$(tail -n1 "$record/starts" 2>/dev/null | cut -d' ' -f1)
if [ -n "$prev" ] && kill -0 "$prev" 2>/dev/null; then echo "$$ $prev" >> "$record/overlaps"; fi
sleep 300 &
echo $! >> "$record/helpers"
echo "$$ $HUB_HOST_ENDPOINT" >> "$record/starts"
case "$temper" in
  stubborn) trap 'echo "$$ TERM ignored" >> "$record/signals"' TERM ;;
  escaping)
    trap 'echo "$$ TERM ignored" >> "$record/signals"' TERM
    # A process of its own group that ignores SIGTERM too: a group kill does not reach it.
    set -m
    bash -c 'trap "" TERM; while true; do sleep 0.05; done' &
    set +m
    echo $! >> "$record/escaped" ;;
  crash) exit 3 ;;
  *) trap 'echo "$$ TERM" >> "$record/signals"; exit 0' TERM ;;
esac
trap 'echo "$$ USR1" >> "$record/signals"' USR1
while true; do sleep 0.05; done
"#;

/// The wrapper and its record. Dropping it ends the wrapper and whatever of the worker is left:
/// outside a PID namespace, the wrapper's end does not take its children with it.
struct Wrapped {
    wrapper: Option<Child>,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl Wrapped {
    fn start(handoff_dir: &Path, temper: &str, grace: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("record");
        std::fs::create_dir_all(&record).unwrap();
        let script = dir.path().join("worker.sh");
        std::fs::write(&script, SCRIPT).unwrap();
        let wrapper = Command::new(support::binary())
            .args(["exec", "--in-place", "--wait=20s"])
            .arg(format!("--stop-grace={grace}"))
            .arg(format!("--handoff-dir={}", handoff_dir.display()))
            .args(["--", "/bin/bash"])
            .arg(&script)
            .arg(&record)
            .arg(temper)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .spawn()
            .unwrap();
        Self {
            wrapper: Some(wrapper),
            record,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.wrapper.as_ref().map_or(0, Child::id)
    }

    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.record.join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `(pid, HUB_HOST_ENDPOINT)` for each start of the worker.
    fn starts(&self) -> Vec<(i32, String)> {
        self.lines("starts")
            .iter()
            .filter_map(|l| {
                let (pid, endpoint) = l.split_once(' ')?;
                Some((pid.parse().ok()?, endpoint.to_string()))
            })
            .collect()
    }

    fn wait_for(&self, what: &str, mut ok: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if ok(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "timed out waiting until {what}; starts {:?}, signals {:?}",
            self.starts(),
            self.lines("signals")
        );
    }

    fn running(&mut self) -> bool {
        self.wrapper
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    fn exit(&mut self) -> ExitStatus {
        let mut child = self.wrapper.take().expect("the wrapper was started");
        child.wait().unwrap()
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        if let Some(mut c) = self.wrapper.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for (pid, _) in self.starts() {
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::from_raw(pid).unwrap(),
                rustix::process::Signal::KILL,
            );
        }
        for pid in self.lines("escaped") {
            if let Some(pid) = pid.parse().ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

fn alive(pid: i32) -> bool {
    rustix::process::test_kill_process(rustix::process::Pid::from_raw(pid).unwrap()).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
}

fn publish(dir: &Path, hub: HubId, generation: u64) {
    let reason = if generation == 1 {
        Reason::Startup
    } else {
        Reason::Switch
    };
    handoff::publish(dir, &support::builders::handoff(hub, generation, reason)).unwrap();
}

fn ask(dir: &Path, hub: HubId, generation: u64) {
    let request = MoveRequest {
        generation,
        hub,
        requested_at: "2026-12-05T20:00:00Z".into(),
    };
    handoff::write_move_request(dir, &request).unwrap();
}

fn endpoint(hub: HubId) -> String {
    support::builders::handoff(hub, 0, Reason::Startup).endpoint
}

#[test]
fn a_move_restarts_the_worker_in_place_on_the_new_decision_and_nothing_of_the_old_survives() {
    let handoff_dir = tempfile::tempdir().unwrap();
    let dir = handoff_dir.path();
    publish(dir, P, 1);
    let mut w = Wrapped::start(dir, "normal", "30s");
    w.wait_for("the worker started", |w| w.starts().len() == 1);
    let (first, _) = w.starts()[0];
    assert_eq!(
        handoff::read_ack(dir).map(|a| (a.generation, a.pid as i32)),
        Some((1, first))
    );

    // A request for a decision never published is not acted on; the next one is, once.
    ask(dir, S, 9);
    publish(dir, S, 2);
    ask(dir, S, 2);
    w.wait_for("the worker restarted", |w| w.starts().len() == 2);
    let (second, on) = w.starts()[1].clone();
    assert_eq!(on, endpoint(S));
    w.wait_for("the acknowledgement", |_| {
        handoff::read_ack(dir).is_some_and(|a| a.generation == 2 && a.pid as i32 == second)
    });
    assert_eq!(w.lines("signals"), [format!("{first} TERM")]);
    assert!(w.lines("overlaps").is_empty(), "{:?}", w.lines("overlaps"));
    assert!(!alive(first));
    let helpers: Vec<i32> = w
        .lines("helpers")
        .iter()
        .filter_map(|l| l.parse().ok())
        .collect();
    assert_eq!(helpers.len(), 2);
    assert!(
        !alive(helpers[0]),
        "the old worker's helper outlived the move"
    );
    assert!(alive(second) && alive(helpers[1]));
    assert!(w.running(), "the container (the wrapper) must not restart");

    // Signals reach the worker the wrapper runs now.
    support::signal(w.pid(), "USR1");
    w.wait_for("USR1 reached the worker", |w| {
        w.lines("signals").contains(&format!("{second} USR1"))
    });
    assert_eq!(
        w.starts().len(),
        2,
        "a stale request moved the worker again"
    );
}

#[test]
fn a_worker_that_ignores_the_stop_is_killed_after_the_grace_before_the_next_starts() {
    let handoff_dir = tempfile::tempdir().unwrap();
    let dir = handoff_dir.path();
    publish(dir, P, 1);
    let mut w = Wrapped::start(dir, "stubborn", "1s");
    w.wait_for("the worker started", |w| w.starts().len() == 1);
    let (first, _) = w.starts()[0];
    publish(dir, S, 2);
    ask(dir, S, 2);
    w.wait_for("the worker restarted", |w| w.starts().len() == 2);
    assert_eq!(w.lines("signals"), [format!("{first} TERM ignored")]);
    assert!(w.lines("overlaps").is_empty(), "{:?}", w.lines("overlaps"));
    assert!(!alive(first));
    assert!(w.running());
}

#[test]
fn a_worker_that_ignores_the_stop_is_killed_with_a_process_it_started_outside_its_group() {
    let handoff_dir = tempfile::tempdir().unwrap();
    let dir = handoff_dir.path();
    publish(dir, P, 1);
    let mut w = Wrapped::start(dir, "escaping", "1s");
    w.wait_for("the worker started", |w| {
        w.starts().len() == 1 && w.lines("escaped").len() == 1
    });
    let (first, _) = w.starts()[0];
    let escaped: i32 = w.lines("escaped")[0].parse().unwrap();
    let group = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<i32>().ok())
    };
    assert_ne!(
        group(escaped),
        Some(first),
        "the helper is in a group of its own"
    );
    assert!(alive(escaped));
    publish(dir, S, 2);
    ask(dir, S, 2);
    w.wait_for("the worker restarted", |w| w.starts().len() == 2);
    assert!(!alive(first));
    w.wait_for("the escaped helper killed", |_| !alive(escaped));
    assert!(w.running());
}

#[test]
fn kubelets_sigterm_reaches_the_worker_and_the_wrapper_exits_with_its_status() {
    let handoff_dir = tempfile::tempdir().unwrap();
    let dir = handoff_dir.path();
    publish(dir, P, 1);
    let mut w = Wrapped::start(dir, "normal", "30s");
    w.wait_for("the worker started", |w| w.starts().len() == 1);
    let (worker, _) = w.starts()[0];
    support::signal(w.pid(), "TERM");
    let status = w.exit();
    assert_eq!(status.code(), Some(0), "the worker's own exit status");
    assert_eq!(w.lines("signals"), [format!("{worker} TERM")]);
    assert_eq!(w.starts().len(), 1, "no worker starts after kubelet's stop");
}

/// Whether `pid` has a handler for `signal` (its `SigCgt` mask in /proc).
fn catches(pid: u32, signal: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let mask = s.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

#[test]
fn a_stop_signal_while_either_wrapper_waits_for_a_decision_ends_it_with_no_worker() {
    // As a container's PID 1 an uncaught SIGTERM is ignored, and kubelet would wait out the
    // pod's grace for a wrapper that has nothing to start.
    for in_place in [true, false] {
        let handoff_dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(support::binary());
        cmd.arg("exec");
        if in_place {
            cmd.arg("--in-place");
        }
        let wrapper = cmd
            .arg("--wait=10m")
            .arg(format!("--handoff-dir={}", handoff_dir.path().display()))
            .args(["--", "/bin/false"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = wrapper.id();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !catches(pid, signal_hook::consts::SIGTERM) {
            assert!(
                Instant::now() < deadline,
                "the wrapper never caught SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let out = wrapper.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(128 + 15),
            "in place: {in_place}; {said}"
        );
        assert!(said.contains("stopped by signal 15"), "{said}");
        assert!(handoff::read_ack(handoff_dir.path()).is_none());
    }
}

#[test]
fn a_worker_that_crashes_on_its_own_ends_the_wrapper_with_its_code() {
    let handoff_dir = tempfile::tempdir().unwrap();
    let dir = handoff_dir.path();
    publish(dir, P, 1);
    let mut w = Wrapped::start(dir, "crash", "30s");
    assert_eq!(w.exit().code(), Some(3));
    assert_eq!(
        w.starts().len(),
        1,
        "a crash is kubelet's to restart, not the wrapper's"
    );
    let helper: i32 = w.lines("helpers")[0].parse().unwrap();
    assert!(!alive(helper), "the crashed worker's helper outlived it");
}

/// Kills `unshare` (and with it, by `--kill-child`, the wrapper and its PID namespace).
struct Namespace(Child);
impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn as_pid_1_the_wrapper_reaps_an_orphan_and_keeps_the_worker() {
    if !support::is_root() || !Path::new("/usr/bin/unshare").exists() {
        support::skip("needs root and unshare(1) to run the wrapper as PID 1 of a PID namespace");
        return;
    }
    let handoff_dir = tempfile::tempdir().unwrap();
    let dir = handoff_dir.path();
    publish(dir, P, 1);
    let record = tempfile::tempdir().unwrap();
    // The worker leaves a process behind (its parent, a subshell, exits at once), which the
    // kernel hands to PID 1: the wrapper. It ends when told to.
    let script = r#"( sh -c 'while [ ! -e "$0/release" ]; do sleep 0.05; done' "$1" & ); while true; do sleep 0.05; done"#;
    let unshare = Command::new("/usr/bin/unshare")
        .args(["--pid", "--fork", "--kill-child", "--"])
        .arg(support::binary())
        .args(["exec", "--in-place", "--wait=20s"])
        .arg(format!("--handoff-dir={}", dir.display()))
        .args(["--", "/bin/sh", "-c", script, "worker"])
        .arg(record.path())
        .spawn()
        .unwrap();
    let unshare_pid = unshare.id();
    let _namespace = Namespace(unshare);
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ok() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("the wrapper started in its namespace", &|| {
        support::children_of(unshare_pid).len() == 1
    });
    let wrapper = support::children_of(unshare_pid)[0].0;
    wait("the worker and its orphan, both children of PID 1", &|| {
        support::children_of(wrapper).len() == 2
    });
    let worker = handoff::read_ack(dir)
        .expect("the worker's acknowledgement")
        .pid;
    std::fs::write(record.path().join("release"), b"").unwrap();
    // Unreaped, the orphan would stay a zombie child of the wrapper for good.
    wait("the orphan reaped", &|| {
        support::children_of(wrapper).len() == 1
    });
    let left = support::children_of(wrapper);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_ne!(left[0].1, 'Z', "the worker is a zombie: {left:?}");
    assert!(
        support::children_of(unshare_pid)
            .first()
            .is_some_and(|&(p, s)| p == wrapper && s != 'Z'),
        "the wrapper took the orphan's end for the worker's"
    );
    // The ack's PID is the worker's in the namespace; it is still the acknowledged one.
    assert_eq!(handoff::read_ack(dir).map(|a| a.pid), Some(worker));
}

fn in_place_args(hubs: &Hubs) -> Vec<String> {
    let mut args = hubs.args("200ms", "150ms", 2);
    args.extend(
        [
            "--restart-mode=in-place",
            "--restart-jitter=0s",
            "--restart-cooldown=0s",
        ]
        .map(String::from),
    );
    args
}

fn outcome(outcome: &str) -> String {
    format!("kubeslice_worker_hub_worker_restarts_total{{mode=\"in-place\",outcome=\"{outcome}\"}}")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sidecar_moves_the_worker_in_place_once_and_verifies_it() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let dir = hubs.handoff_dir();
    let sidecar = Sidecar::spawn(&in_place_args(&hubs), &dir);
    let mut w = Wrapped::start(&dir, "normal", "30s");
    w.wait_for("the worker started", |w| w.starts().len() == 1);
    assert_eq!(w.starts()[0].1, hubs.primary.endpoint());

    hubs.both_claim(&hubs.secondary, "ctrl-b");
    sidecar.wait_metric(&outcome("verified"), 1.0);
    assert_eq!(sidecar.metric(&outcome("requested")), 1.0);
    let starts = w.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[1].1, hubs.secondary.endpoint());
    assert!(w.lines("overlaps").is_empty());
    assert!(w.running(), "the container (the wrapper) must not restart");
    assert_eq!(sidecar.status()["restart"]["phase"], "verified");
    assert_eq!(sidecar.status()["restart"]["workerOnCurrentDecision"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sidecar_killed_mid_move_leaves_exactly_one_worker_running() {
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let dir = hubs.handoff_dir();
    let mut sidecar = Sidecar::spawn(&in_place_args(&hubs), &dir);
    // A worker slow to stop: the sidecar is gone long before the move ends.
    let mut w = Wrapped::start(&dir, "stubborn", "2s");
    w.wait_for("the worker started", |w| w.starts().len() == 1);
    let (first, _) = w.starts()[0];

    hubs.both_claim(&hubs.secondary, "ctrl-b");
    sidecar.wait_metric(&outcome("requested"), 1.0);
    drop(std::mem::replace(
        &mut sidecar,
        Sidecar::spawn(&in_place_args(&hubs), &dir),
    ));
    w.wait_for("the worker restarted", |w| w.starts().len() == 2);
    let (second, _) = w.starts()[1];
    assert!(!alive(first) && alive(second));
    assert!(w.lines("overlaps").is_empty());
    // The next sidecar resumes on the secondary. It may ask again, if it read the old worker's
    // acknowledgement first; the wrapper moves a worker already there no more.
    sidecar.wait_until("the next sidecar is ready", Duration::from_secs(20), |s| {
        s.get("/readyz").0 == 200
    });
    // It has read the acknowledgements by then; whatever it did about them is over once it
    // knows the worker runs on its decision.
    sidecar.wait_rounds(3);
    sidecar.wait_until(
        "the next sidecar knows the worker is on the decision",
        Duration::from_secs(20),
        |s| {
            let restart = &s.status()["restart"];
            restart["workerOnCurrentDecision"] == true
                && !matches!(restart["phase"].as_str(), Some("waiting" | "verifying"))
        },
    );
    assert_eq!(w.starts().len(), 2, "{:?}", w.starts());
    assert!(w.running());
}
