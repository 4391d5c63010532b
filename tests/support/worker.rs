//! A stand-in worker and a stand-in kubelet.
//!
//! The worker is a small bash script started under `hub-follower exec`, through a symlink whose
//! name is the worker's process name (argv[0]), so the sidecar's /proc scan finds it the way it
//! finds `/manager` in a pod. It records the env it started with and the signals it gets.
//! The kubelet stand-in restarts it whenever it exits.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SCRIPT: &str = r#"
record="$1"; mode="$2"
echo "$$ $HUB_HOST_ENDPOINT" >> "$record/starts"
if [ "$mode" = stubborn ]; then
  trap 'echo "$$ TERM ignored" >> "$record/signals"' TERM
else
  trap 'echo "$$ TERM" >> "$record/signals"; exit 0' TERM
fi
while true; do sleep 0.05; done
"#;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Temper {
    /// Exits on SIGTERM.
    Obliging,
    /// Ignores SIGTERM.
    Stubborn,
}

#[derive(Clone)]
pub struct Worker {
    /// The process name the sidecar looks for (unique per test: tests run in parallel).
    pub name: String,
    pub record: PathBuf,
    link: PathBuf,
    script: PathBuf,
    temper: Temper,
}

impl Worker {
    pub fn new(dir: &Path, name: &str, temper: Temper) -> Self {
        let record = dir.join(format!("{name}-record"));
        std::fs::create_dir_all(&record).unwrap();
        let link = dir.join(name);
        std::os::unix::fs::symlink("/bin/bash", &link).unwrap();
        let script = dir.join(format!("{name}.sh"));
        std::fs::write(&script, SCRIPT).unwrap();
        Self {
            name: name.into(),
            record,
            link,
            script,
            temper,
        }
    }

    /// The worker's command line, wrapped the way the chart wraps it.
    pub fn command(&self, handoff_dir: &Path) -> Command {
        let mut cmd = Command::new(super::binary());
        cmd.arg("exec")
            .arg(format!("--handoff-dir={}", handoff_dir.display()))
            .arg("--wait=20s")
            .arg("--")
            .arg(&self.link)
            .arg(&self.script)
            .arg(&self.record)
            .arg(if self.temper == Temper::Stubborn {
                "stubborn"
            } else {
                "normal"
            })
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin");
        cmd
    }

    /// The same program started directly, not through `hub-follower exec`: a process with the
    /// worker's name that is not the worker.
    pub fn bare_command(&self) -> Command {
        let mut cmd = Command::new(&self.link);
        cmd.arg(&self.script).arg(&self.record).arg("normal");
        cmd
    }

    /// `(pid, HUB_HOST_ENDPOINT)` for each start.
    pub fn starts(&self) -> Vec<(u32, String)> {
        lines(&self.record.join("starts"))
            .iter()
            .filter_map(|l| {
                let (pid, endpoint) = l.split_once(' ')?;
                Some((pid.parse().ok()?, endpoint.to_string()))
            })
            .collect()
    }

    pub fn signals(&self) -> Vec<String> {
        lines(&self.record.join("signals"))
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Restarts the worker whenever it exits, as kubelet restarts a container.
pub struct Kubelet {
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Child>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Kubelet {
    pub fn run(mut command: impl FnMut() -> Command + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let current: Arc<Mutex<Option<Child>>> = Arc::new(Mutex::new(None));
        let (s, c) = (stop.clone(), current.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                *c.lock().unwrap() = Some(command().spawn().unwrap());
                loop {
                    std::thread::sleep(Duration::from_millis(20));
                    let mut guard = c.lock().unwrap();
                    let child = guard.as_mut().unwrap();
                    if child.try_wait().unwrap().is_some() || s.load(Ordering::SeqCst) {
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Self {
            stop,
            current,
            thread: Some(thread),
        }
    }

    /// Kills the running worker, as kubelet does after a failed liveness probe.
    pub fn kill_worker(&self) {
        if let Some(child) = self.current.lock().unwrap().as_mut() {
            let _ = child.kill();
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(mut child) = self.current.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The worker's own health endpoint, as the original livenessProbe checks it: answers every
/// request with the status set last, and counts the requests it got.
pub struct Health {
    pub addr: std::net::SocketAddr,
    status: Arc<std::sync::atomic::AtomicU16>,
    requests: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Health {
    pub fn start(status: u16) -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicU16, AtomicU64};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let code = Arc::new(AtomicU16::new(status));
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, r, s) = (code.clone(), requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                let mut buf = [0u8; 2048];
                let n = conn.read(&mut buf).unwrap_or(0);
                if !String::from_utf8_lossy(&buf[..n]).starts_with("GET /healthz ") {
                    let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
                    continue;
                }
                r.fetch_add(1, Ordering::SeqCst);
                let status = c.load(Ordering::SeqCst);
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Self {
            addr,
            status: code,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn target(&self) -> String {
        format!("http://{}/healthz", self.addr)
    }

    pub fn set(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Stops answering and closes the port: connections are refused from now on.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Health {
    fn drop(&mut self) {
        self.stop();
    }
}
