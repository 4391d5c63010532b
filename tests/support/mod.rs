//! Shared test fixtures: two fake hubs with their credentials, and the real sidecar binary.
#![allow(dead_code)]

pub mod builders;
pub mod fake_hub;
pub mod worker;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use fake_hub::FakeHub;

pub const NAMESPACE: &str = "kubeslice-acme";
pub const CLUSTER: &str = "worker-1";

/// Two hubs, each with its own CA and token, and a scratch folder.
pub struct Hubs {
    pub primary: FakeHub,
    pub secondary: FakeHub,
    pub dir: tempfile::TempDir,
}

impl Hubs {
    pub async fn start() -> Self {
        let primary = FakeHub::start(NAMESPACE, CLUSTER, "primary-token-a1b2").await;
        let secondary = FakeHub::start(NAMESPACE, CLUSTER, "secondary-token-c3d4").await;
        let dir = tempfile::tempdir().unwrap();
        primary.write_credentials(&dir.path().join("primary"));
        secondary.write_credentials(&dir.path().join("secondary"));
        Self {
            primary,
            secondary,
            dir,
        }
    }

    pub fn creds(&self, which: &str) -> (PathBuf, PathBuf) {
        let d = self.dir.path().join(which);
        (d.join("token"), d.join("ca.crt"))
    }

    pub fn handoff_dir(&self) -> PathBuf {
        self.dir.path().join("handoff")
    }

    /// Both hubs say `winner` leads (the Standby mirrors the Active).
    pub fn both_claim(&self, winner: &FakeHub, identity: &str) {
        let endpoint = winner.endpoint();
        self.primary.claim(&endpoint, identity);
        self.secondary.claim(&endpoint, identity);
    }

    /// The sidecar's arguments for these hubs, with quick timings.
    pub fn args(&self, poll: &str, timeout: &str, confirmations: u32) -> Vec<String> {
        let (pt, pc) = self.creds("primary");
        let (st, sc) = self.creds("secondary");
        vec![
            format!("--hub-endpoint={}", self.primary.endpoint()),
            format!("--hub-token-file={}", pt.display()),
            format!("--hub-ca-file={}", pc.display()),
            format!("--secondary-endpoint={}", self.secondary.endpoint()),
            format!("--secondary-token-file={}", st.display()),
            format!("--secondary-ca-file={}", sc.display()),
            format!("--cluster-name={CLUSTER}"),
            format!("--namespace={NAMESPACE}"),
            format!("--poll-interval={poll}"),
            format!("--confirm-interval={poll}"),
            format!("--probe-timeout={timeout}"),
            format!("--confirmations={confirmations}"),
            format!("--handoff-dir={}", self.handoff_dir().display()),
            // The watch only changes when rounds happen; tests that count rounds turn it off,
            // and the watch tests turn it on.
            "--watch=false".into(),
            // Signal mode is the default, and its default worker name is `manager`: a test
            // sidecar that switches must never signal somebody else's `manager` on this
            // machine (a real worker-operator in tests/k8s, say). Tests with a worker name it.
            format!("--worker-process=hf-test-no-worker-{}", std::process::id()),
        ]
    }
}

/// Says why a test cannot run here, as `SKIPPED: reason` on stdout (written past the test
/// harness's capture, so a passing run shows it). Under `CI=true` a skip fails instead: CI
/// installs everything the tests need, so a skip there is a broken setup.
pub fn skip(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "SKIPPED under CI=true, where every test must run: {reason}"
    );
    let _ = writeln!(std::io::stdout(), "SKIPPED: {reason}");
}

pub fn free_port() -> SocketAddr {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_hub-follower")
}

/// The real binary, with its log kept in a file.
pub struct Sidecar {
    child: Child,
    pub listen: SocketAddr,
    pub handoff_dir: PathBuf,
    log: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl Sidecar {
    pub fn spawn(args: &[String], handoff_dir: &Path) -> Self {
        Self::spawn_with_env(args, handoff_dir, &[])
    }

    pub fn spawn_with_env(args: &[String], handoff_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::spawn_under(&[], args, handoff_dir, env)
    }

    /// The sidecar started by `wrapper` (a command and its arguments, such as `strace …`),
    /// which runs it as its child.
    pub fn spawn_under(
        wrapper: &[&str],
        args: &[String],
        handoff_dir: &Path,
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn_program(binary(), wrapper, args, handoff_dir, env)
    }

    /// Another build of the sidecar, such as an older one to compare with.
    pub fn spawn_program(
        program: &str,
        wrapper: &[&str],
        args: &[String],
        handoff_dir: &Path,
        env: &[(&str, &str)],
    ) -> Self {
        // A free port can be taken by someone else before the sidecar binds it: try another.
        for _ in 0..5 {
            let listen = free_port();
            let log_dir = tempfile::tempdir().unwrap();
            let log = log_dir.path().join("sidecar.log");
            let mut command = match wrapper.split_first() {
                Some((wrapper, rest)) => {
                    let mut c = Command::new(wrapper);
                    c.args(rest).arg(program);
                    c
                }
                None => Command::new(program),
            };
            let child = command
                .args(args)
                .arg(format!("--listen={listen}"))
                .arg("--log-format=text")
                .env_remove("RUST_LOG")
                .envs(env.iter().copied())
                .env("NO_COLOR", "1")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            let mut sidecar = Self {
                child,
                listen,
                handoff_dir: handoff_dir.to_path_buf(),
                log,
                _log_dir: log_dir,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if sidecar.try_get("/healthz").is_some() {
                    return sidecar;
                }
                if sidecar.child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !sidecar.logs().contains("Address already in use") {
                panic!("the sidecar did not start; logs:\n{}", sidecar.logs());
            }
        }
        panic!("no free port for the sidecar after 5 tries");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        self.try_get(path)
            .unwrap_or_else(|| panic!("GET {path} failed; logs:\n{}", self.logs()))
    }

    pub fn try_get(&self, path: &str) -> Option<(u16, String)> {
        request(
            self.listen,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
    }

    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.get("/status").1).unwrap()
    }

    /// The published decision, read the way a worker reads it.
    pub fn handoff(&self) -> Option<serde_json::Value> {
        let bytes = std::fs::read(self.handoff_dir.join("active-hub.json")).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    pub fn metric(&self, name_and_labels: &str) -> f64 {
        metric_value(&self.get("/metrics").1, name_and_labels)
            .unwrap_or_else(|| panic!("no metric {name_and_labels}"))
    }

    pub fn wait_until(&self, what: &str, timeout: Duration, mut ok: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if ok(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("timed out waiting until {what}; logs:\n{}", self.logs());
    }

    /// Waits until `rounds` more rounds have completed: a round is complete once the next one
    /// has begun (`/status` shows each round's start as `lastRoundAt`).
    pub fn wait_rounds(&self, rounds: usize) {
        let mut seen = Vec::new();
        self.wait_until(
            &format!("{rounds} more rounds"),
            Duration::from_secs(30),
            |s| {
                let at = s.status()["lastRoundAt"].clone();
                if seen.last() != Some(&at) {
                    seen.push(at);
                }
                seen.len() > rounds + 1
            },
        );
    }

    /// Waits until the metric reads `value`. A decision is on disk before the sidecar counts
    /// it (`Core::written` follows the write), so a count is awaited, not read at once.
    pub fn wait_metric(&self, name: &str, value: f64) {
        self.wait_until(&format!("{name} = {value}"), Duration::from_secs(5), |s| {
            s.metric(name) == value
        });
    }

    /// SIGTERM, then the exit status; fails if none came within `bound` (the process is
    /// killed when the `Sidecar` is dropped).
    pub fn terminate_within(&mut self, bound: Duration) -> ExitStatus {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!(
            "no exit within {bound:?} of SIGTERM; logs:\n{}",
            self.logs()
        );
    }

    /// SIGTERM, then the exit status and how long the exit took.
    pub fn terminate(&mut self) -> (ExitStatus, Duration) {
        let started = Instant::now();
        signal(self.child.id(), "TERM");
        let status = self.child.wait().unwrap();
        (status, started.elapsed())
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn signal(pid: u32, name: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{name} {pid} failed");
}

/// A raw HTTP/1.1 exchange; returns the status and body.
pub fn request(addr: SocketAddr, raw: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(raw.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

/// The value of one sample in Prometheus text, e.g. `foo_total{hub="primary"}`.
pub fn metric_value(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The sum of every sample of a metric, whatever its labels.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The children of `pid`, each with its state letter from /proc (`Z` for a zombie).
pub fn children_of(pid: u32) -> Vec<(u32, char)> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| {
            let stat = std::fs::read_to_string(format!("/proc/{c}/stat")).ok()?;
            let state = stat.rsplit(')').next()?.trim_start().chars().next()?;
            Some((c.parse().ok()?, state))
        })
        .collect()
}
