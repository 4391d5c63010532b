//! A live failover on this machine: two fake hubs, the follower, a stand-in worker, and a
//! promotion of the Standby. `cargo run --example demo`. Exits 0 once the worker has restarted
//! onto the promoted hub, 1 if that did not happen in time.

#[path = "../tests/support/fake_hub.rs"]
mod fake_hub;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use clap::Parser;
use fake_hub::FakeHub;
use hub_follower::config::{Cli, Config};

const NS: &str = "kubeslice-demo";
const CLUSTER: &str = "worker-1";
const WORKER: &str = "demo-worker";

/// The worker reads the handoff the simplest way, by sourcing `active-hub.env`.
const WORKER_SCRIPT: &str = r#"
. "$1/active-hub.env"
echo "    [worker $$] started; connecting to $HUB_HOST_ENDPOINT"
trap 'echo "    [worker $$] SIGTERM: disconnecting"; exit 0' TERM
while :; do sleep 0.1; done
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "hub_follower=info".into()))
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .compact()
        .init();
    let dir = tempfile::tempdir()?;
    let handoff = dir.path().join("handoff");
    let mut hub_a = FakeHub::start(NS, CLUSTER, "token-for-hub-a").await;
    let hub_b = FakeHub::start(NS, CLUSTER, "token-for-hub-b").await;
    let (a_token, a_ca) = hub_a.write_credentials(&dir.path().join("a"));
    let (b_token, b_ca) = hub_b.write_credentials(&dir.path().join("b"));
    for hub in [&hub_a, &hub_b] {
        hub.claim(&hub_a.endpoint(), "controller-a");
    }
    step(&format!(
        "two hubs: A {} is Active, B {} is Standby; both publish \"A leads\"",
        hub_a.endpoint(),
        hub_b.endpoint()
    ));

    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let args = [
        "hub-follower".to_string(),
        format!("--hub-endpoint={}", hub_a.endpoint()),
        format!("--hub-token-file={}", a_token.display()),
        format!("--hub-ca-file={}", a_ca.display()),
        format!("--secondary-endpoint={}", hub_b.endpoint()),
        format!("--secondary-token-file={}", b_token.display()),
        format!("--secondary-ca-file={}", b_ca.display()),
        format!("--cluster-name={CLUSTER}"),
        format!("--namespace={NS}"),
        "--poll-interval=1s".into(),
        "--probe-timeout=500ms".into(),
        "--confirmations=3".into(),
        format!("--handoff-dir={}", handoff.display()),
        format!("--listen={listen}"),
        "--restart-mode=signal".into(),
        format!("--worker-process={WORKER}"),
        "--restart-jitter=500ms".into(),
        "--kill-after=5s".into(),
    ];
    let config = Config::from_settings(&Cli::parse_from(args).settings)?;
    hub_follower::handoff::ensure_writable(&handoff)?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let follower = tokio::spawn(hub_follower::run(config, stopped));
    step(&format!("hub-follower runs against both (poll 1s, 3 confirmations, restart mode signal); status on http://{listen}/status"));

    wait_for("the first decision", Duration::from_secs(10), || {
        handoff.join("active-hub.json").exists()
    })
    .await?;
    show_handoff(&handoff)?;
    let mut kubelet = StandInKubelet::new(dir.path(), &handoff)?;
    tokio::time::sleep(Duration::from_secs(3)).await;

    step("promotion: A goes dark, B claims itself");
    hub_a.stop();
    hub_b.claim(&hub_b.endpoint(), "controller-b");
    let promoted = Instant::now();
    let mut last = String::new();
    let switched = loop {
        kubelet.keep_running()?;
        let line = describe(listen).unwrap_or_default();
        if line != last {
            println!("  {:>5.1}s  {line}", promoted.elapsed().as_secs_f64());
            last = line;
        }
        if last.contains("restart verified") {
            break true;
        }
        if promoted.elapsed() > Duration::from_secs(30) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if switched {
        show_handoff(&handoff)?;
        step(&format!(
            "done: the worker follows B, {:.1}s after the promotion",
            promoted.elapsed().as_secs_f64()
        ));
    }
    let _ = stop.send(true);
    let _ = follower.await;
    drop(kubelet);
    if switched {
        Ok(())
    } else {
        eprintln!("the worker did not move to B within 30 s");
        std::process::exit(1);
    }
}

fn step(text: &str) {
    println!("\n==> {text}");
}

fn show_handoff(dir: &Path) -> std::io::Result<()> {
    println!("    {}:", dir.join("active-hub.json").display());
    for line in std::fs::read_to_string(dir.join("active-hub.json"))?.lines() {
        println!("      {line}");
    }
    Ok(())
}

/// One line from `/status`: the published hub, the pending confirmation, the restart phase.
fn describe(listen: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect(listen).ok()?;
    s.write_all(b"GET /status HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status: serde_json::Value = serde_json::from_str(raw.split_once("\r\n\r\n")?.1).ok()?;
    let published = &status["published"];
    let mut line = format!(
        "published: {} (generation {}, {})",
        published["hub"].as_str()?,
        published["generation"],
        published["reason"].as_str()?
    );
    if let Some(p) = status["pending"].as_object() {
        line += &format!(
            "; confirming {} {}/{}",
            p["candidate"]["hub"].as_str()?,
            p["count"],
            status["confirmationsRequired"]
        );
    }
    let restart = &status["restart"];
    match restart["phase"].as_str()? {
        "idle" => {}
        "verified" => line += "; restart verified",
        phase => line += &format!("; worker restart: {phase}"),
    }
    Some(line)
}

async fn wait_for(what: &str, timeout: Duration, ok: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !ok() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts the worker and starts it again whenever it exits, as kubelet would.
struct StandInKubelet {
    command: Command,
    child: Child,
}

impl StandInKubelet {
    fn new(dir: &Path, handoff: &Path) -> std::io::Result<Self> {
        // Named like the worker's executable, so that the follower's /proc scan finds it.
        let link = dir.join(WORKER);
        std::os::unix::fs::symlink("/bin/sh", &link)?;
        let script = dir.join("worker.sh");
        std::fs::write(&script, WORKER_SCRIPT)?;
        let mut command = Command::new(link);
        command.arg(script).arg(handoff);
        let child = command.spawn()?;
        Ok(Self { command, child })
    }

    fn keep_running(&mut self) -> std::io::Result<()> {
        if self.child.try_wait()?.is_some() {
            println!("    [kubelet] the worker exited; starting it again");
            self.child = self.command.spawn()?;
        }
        Ok(())
    }
}

impl Drop for StandInKubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
