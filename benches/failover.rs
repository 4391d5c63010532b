//! The numbers that matter for a sidecar in every worker pod: how fast a failover is followed,
//! what a hung hub costs, and the footprint. Runs the real (release) binary against local fake
//! hubs, prints a table and writes the same numbers as JSON.
//!
//! cargo bench --bench failover                  # the full run (about 6 minutes)
//! cargo bench --bench failover -- --quick       # fewer samples, for a smoke run
//! cargo bench --bench failover -- --out FILE    # JSON path (default target/bench/failover.json)
//! cargo bench --bench failover -- --only footprint --baseline OLD_BINARY
//!     # CPU per round of this build against another one, alternately in one run, as a ratio

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::{json, Value};
use support::worker::{Kubelet, Temper, Worker};
use support::{Hubs, Sidecar};

struct Opts {
    quick: bool,
    out: PathBuf,
    /// Another build of the sidecar: the footprint runs both, alternately, for a CPU ratio.
    baseline: Option<String>,
    /// Only this section (`footprint`).
    only: Option<String>,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().collect();
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/bench/failover.json"));
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    Opts {
        quick: args.iter().any(|a| a == "--quick"),
        out,
        baseline: value("--baseline"),
        only: value("--only"),
    }
}

fn main() {
    let opts = opts();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let binary = support::binary();
    let size = std::fs::metadata(binary).map(|m| m.len()).unwrap_or(0);
    println!(
        "hub-follower benchmark: {binary} ({:.2} MiB)",
        size as f64 / 1048576.0
    );

    let rounds = if opts.quick { 200 } else { 1000 };
    if opts.only.as_deref() == Some("footprint") {
        let footprint = rt.block_on(compare_footprints(binary, opts.baseline.as_deref(), rounds));
        write(
            &opts.out,
            json!({"when": Timestamp::now().to_string(), "machine": machine(), "footprint": footprint}),
        );
        return;
    }
    let n = if opts.quick { 5 } else { 20 };
    let settings = [
        Setting {
            name: "default, polling only",
            poll: "10s",
            confirm: "1s",
            timeout: "3s",
            confirmations: 3,
            jitter: "5s",
            watch: false,
        },
        Setting {
            name: "default, with the watch",
            poll: "10s",
            confirm: "1s",
            timeout: "3s",
            confirmations: 3,
            jitter: "5s",
            watch: true,
        },
        Setting {
            name: "aggressive, polling only",
            poll: "2s",
            confirm: "500ms",
            timeout: "1s",
            confirmations: 3,
            jitter: "1s",
            watch: false,
        },
    ];
    let mut failovers = Vec::new();
    for s in &settings {
        failovers.push(rt.block_on(failover_latency(s, n)));
    }
    let hung = rt.block_on(hung_hub_rounds(if opts.quick { 30 } else { 100 }));
    let footprint = rt.block_on(compare_footprints(binary, opts.baseline.as_deref(), rounds));
    let idle_for = Duration::from_secs(if opts.quick { 15 } else { 60 });
    let sidecars = if opts.quick { 3 } else { 10 };
    let idle = json!({
        "polling_only": rt.block_on(idle_rate(sidecars, idle_for, false)),
        "with_watch": rt.block_on(idle_rate(sidecars, idle_for, true)),
    });

    let results = json!({
        "when": Timestamp::now().to_string(),
        "machine": machine(),
        "binary_bytes": size,
        "failover": failovers,
        "hung_hub": hung,
        "footprint": footprint,
        "idle": idle,
    });
    write(&opts.out, results);
}

fn write(out: &std::path::Path, results: Value) {
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(out, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    println!("\nwrote {}", out.display());
}

/// This build's footprint; with a baseline, three runs of each, alternating (ABBAAB) so that
/// a drift of the machine weighs on both, and the ratio of the median CPU per round.
async fn compare_footprints(binary: &str, baseline: Option<&str>, rounds: u64) -> Value {
    let Some(baseline) = baseline else {
        return footprint(binary, rounds).await;
    };
    let (mut this, mut base) = (Vec::new(), Vec::new());
    for order in [[binary, baseline], [baseline, binary], [binary, baseline]] {
        for program in order {
            let run = footprint(program, rounds).await;
            if program == binary {
                this.push(run);
            } else {
                base.push(run);
            }
        }
    }
    let median = |runs: &[Value]| {
        let mut v: Vec<f64> = runs
            .iter()
            .map(|r| r["cpu_ms_per_round"].as_f64().unwrap())
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (m_this, m_base) = (median(&this), median(&base));
    println!(
        "\nCPU per round, median of 3 runs each: this build {m_this:.3} ms, baseline {m_base:.3} ms; ratio {:.2} (baseline: {baseline})",
        m_this / m_base
    );
    json!({
        "this": this,
        "baseline": base,
        "baseline_binary": baseline,
        "cpu_ms_per_round_median": m_this,
        "baseline_cpu_ms_per_round_median": m_base,
        "ratio": m_this / m_base,
    })
}

struct Setting {
    name: &'static str,
    poll: &'static str,
    confirm: &'static str,
    timeout: &'static str,
    confirmations: u32,
    jitter: &'static str,
    watch: bool,
}

fn secs(d: &str) -> f64 {
    humantime::parse_duration(d).unwrap().as_secs_f64()
}

fn summary(mut v: Vec<f64>) -> Value {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    json!({"n": v.len(), "min": v[0], "p50": p(0.5), "p99": p(0.99), "max": v[v.len() - 1]})
}

fn row(label: &str, s: &Value, unit: &str) {
    println!(
        "  {label:<34} min {:>7.3}{unit}  p50 {:>7.3}{unit}  p99 {:>7.3}{unit}  max {:>7.3}{unit}  (n={})",
        s["min"].as_f64().unwrap(),
        s["p50"].as_f64().unwrap(),
        s["p99"].as_f64().unwrap(),
        s["max"].as_f64().unwrap(),
        s["n"]
    );
}

/// Promotion → handoff published, and → worker signalled, over `n` failovers run five at a time.
async fn failover_latency(s: &Setting, n: usize) -> Value {
    println!(
        "\nfailover latency, {} settings: poll {}, confirm every {} x{}, timeout {}, jitter {}",
        s.name, s.poll, s.confirm, s.confirmations, s.timeout, s.jitter
    );
    let mut to_handoff = Vec::new();
    let mut to_signal = Vec::new();
    let mut done = 0;
    while done < n {
        let batch = (n - done).min(5);
        let runs: Vec<_> = (0..batch).map(|i| one_failover(s, done + i)).collect();
        for (h, sig) in futures_join(runs).await {
            to_handoff.push(h);
            to_signal.push(sig);
        }
        done += batch;
    }
    let poll_only_bound = f64::from(s.confirmations) * secs(s.poll);
    let (h, sig) = (summary(to_handoff), summary(to_signal));
    row("promotion -> handoff (s)", &h, "s");
    row("promotion -> worker signalled (s)", &sig, "s");
    let ratio = h["p99"].as_f64().unwrap() / poll_only_bound;
    println!("  confirming at the poll interval only: bound N x poll = {poll_only_bound:.1}s; p99 to handoff is {:.0}% of it", ratio * 100.0);
    json!({
        "setting": {"name": s.name, "watch": s.watch, "poll": s.poll, "confirm_interval": s.confirm, "confirmations": s.confirmations, "probe_timeout": s.timeout, "jitter": s.jitter},
        "to_handoff_s": h,
        "to_signal_s": sig,
        "poll_only_bound_s": poll_only_bound,
        "p99_to_handoff_over_bound": ratio,
    })
}

async fn futures_join<T: Send + 'static>(
    tasks: Vec<impl std::future::Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

fn one_failover(
    s: &Setting,
    index: usize,
) -> impl std::future::Future<Output = (f64, f64)> + Send + 'static {
    let (poll, confirm, timeout, jitter, confirmations, watch) = (
        s.poll,
        s.confirm,
        s.timeout,
        s.jitter,
        s.confirmations,
        s.watch,
    );
    async move {
        let mut hubs = Hubs::start().await;
        hubs.both_claim(&hubs.primary, "ctrl-a");
        let worker = Worker::new(
            hubs.dir.path(),
            &format!("bench-worker-{}-{index}", std::process::id()),
            Temper::Obliging,
        );
        let mut args = hubs.args(poll, timeout, confirmations);
        args.retain(|a| !a.starts_with("--confirm-interval") && !a.starts_with("--watch"));
        args.push(format!("--watch={watch}"));
        args.extend([
            format!("--confirm-interval={confirm}"),
            "--restart-mode=signal".into(),
            format!("--worker-process={}", worker.name),
            format!("--restart-jitter={jitter}"),
        ]);
        let handoff = hubs.handoff_dir();
        let sidecar = tokio::task::spawn_blocking(move || Sidecar::spawn(&args, &handoff))
            .await
            .unwrap();
        let handoff = hubs.handoff_dir();
        let w = worker.clone();
        let _kubelet = Kubelet::run(move || w.command(&handoff));
        while worker.starts().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Promote at a random phase of the poll cycle.
        tokio::time::sleep(Duration::from_secs_f64(fastrand::f64() * secs(poll))).await;
        hubs.primary.stop();
        hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
        let promoted = Timestamp::now();
        let deadline = Instant::now() + Duration::from_secs(120);
        let (handoff_at, signal_at) = loop {
            let logs = sidecar.logs();
            let decided = sidecar
                .handoff()
                .filter(|h| h["reason"] == "switch")
                .and_then(|h| h["decidedAt"].as_str()?.parse::<Timestamp>().ok());
            let signalled = logs
                .lines()
                .find(|l| l.contains("signalled the worker"))
                .and_then(|l| l.split_whitespace().next()?.parse::<Timestamp>().ok());
            if let (Some(d), Some(s)) = (decided, signalled) {
                break (d, s);
            }
            assert!(
                Instant::now() < deadline,
                "no failover within 120 s:\n{logs}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let since = |t: Timestamp| t.duration_since(promoted).as_secs_f64();
        (since(handoff_at), since(signal_at))
    }
}

/// Round time with one hub hung: the round must cost the probe timeout and nothing more.
async fn hung_hub_rounds(rounds: usize) -> Value {
    let timeout_ms = 200.0;
    println!(
        "\nround time with the secondary hung (probe timeout {timeout_ms} ms, {rounds} rounds)"
    );
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    hubs.secondary.set_fault(support::fake_hub::Fault::Hang);
    let args = hubs.args("300ms", "200ms", 3);
    let handoff = hubs.handoff_dir();
    let sidecar = tokio::task::spawn_blocking(move || {
        Sidecar::spawn_with_env(
            &args,
            &handoff,
            &[("RUST_LOG", "info,hub_follower::follower=debug")],
        )
    })
    .await
    .unwrap();
    let took = loop {
        let took: Vec<f64> = sidecar
            .logs()
            .lines()
            .filter(|l| l.contains("round completed"))
            .filter_map(|l| {
                l.split("took_ms=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        if took.len() > rounds {
            break took;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The first round also builds both clients; the steady state is what the goal is about.
    let over: Vec<f64> = took[1..=rounds].iter().map(|t| t - timeout_ms).collect();
    let s = summary(over);
    row("round time - probe timeout (ms)", &s, "ms");
    println!("  goal: p99 under 50 ms");
    json!({"probe_timeout_ms": timeout_ms, "round_minus_timeout_ms": s})
}

/// Resident set now and at its peak, in MiB. A process that is gone fails the benchmark.
fn proc_stat(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("cannot read /proc/{pid}/status: {e}"));
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("/proc/{pid}/status has no {key}"))
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// Each thread's time on a CPU, in nanoseconds (`/proc/PID/task/TID/schedstat`, the scheduler's
/// own count). `/proc/PID/stat` counts in 10 ms ticks, far too coarse for a fraction of a
/// millisecond per round.
fn thread_runtimes(pid: u32) -> HashMap<u32, u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("cannot list /proc/{pid}/task: {e}"));
    let mut runtimes = HashMap::new();
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // A thread that ended between the listing and the read has nothing left to count.
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("/proc/{pid}/task/{tid}/schedstat: {stat:?}"));
        runtimes.insert(tid, ns);
    }
    assert!(!runtimes.is_empty(), "no thread of {pid} could be read");
    runtimes
}

/// CPU seconds the process spent between two samples. A thread that ended in between counts
/// for nothing after its first sample: in steady state the runtime thread does every round's
/// work, and blocking-pool threads that end were idle.
fn cpu_between(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> f64 {
    after
        .iter()
        .map(|(tid, ns)| ns - before.get(tid).copied().unwrap_or(0))
        .sum::<u64>() as f64
        / 1e9
}

/// Rounds left out of the CPU count: the start, the handshakes and the first decision.
const WARM_UP_ROUNDS: u64 = 20;

/// RSS, CPU per round and TLS handshakes per round over `rounds` rounds against two hubs.
async fn footprint(binary: &str, rounds: u64) -> Value {
    println!(
        "\nfootprint of {binary} over {rounds} rounds against two answering hubs (poll 100ms)"
    );
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let args = hubs.args("100ms", "80ms", 3);
    let handoff = hubs.handoff_dir();
    let program = binary.to_string();
    let sidecar = tokio::task::spawn_blocking(move || {
        Sidecar::spawn_program(&program, &[], &args, &handoff, &[])
    })
    .await
    .unwrap();
    let pid = sidecar.pid();
    // Steady state only: start, TLS handshakes and the first decision are not a round's cost.
    let served = || hubs.primary.requests().min(hubs.secondary.requests());
    while served() < WARM_UP_ROUNDS {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (started, first, cpu0) = (Instant::now(), served(), thread_runtimes(pid));
    let mut samples = Vec::new();
    while served() < first + rounds {
        tokio::time::sleep(Duration::from_millis(500)).await;
        samples.push(proc_stat(pid).0);
    }
    let (cpu1, done) = (thread_runtimes(pid), served() - first);
    let (rss, hwm) = proc_stat(pid);
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_ms_per_round = cpu_between(&cpu0, &cpu1) * 1e3 / done as f64;
    let handshakes = (hubs.primary.handshakes(), hubs.secondary.handshakes());
    let per_round = (handshakes.0 + handshakes.1).saturating_sub(2) as f64 / done as f64;
    println!("  RSS steady {rss:.2} MiB, peak {hwm:.2} MiB (goal: at most 10 MiB)");
    println!("  CPU {cpu_ms_per_round:.3} ms per round (goal: at most 0.3 ms), over {done} rounds in {elapsed:.0} s, after {WARM_UP_ROUNDS} to warm up");
    println!(
        "  TLS handshakes: primary {} secondary {}; {per_round:.4} per round after the first",
        handshakes.0, handshakes.1
    );
    json!({
        "rounds": done,
        "warm_up_rounds": WARM_UP_ROUNDS,
        "rss_mib": rss,
        "peak_rss_mib": hwm,
        "cpu_ms_per_round": cpu_ms_per_round,
        "handshakes": [handshakes.0, handshakes.1],
        "handshakes_per_round_after_first": per_round,
        "rss_samples_mib": samples,
    })
}

/// Requests per second each hub serves per worker at the default settings, and at fleet scale.
async fn idle_rate(sidecars: usize, for_: Duration, watch: bool) -> Value {
    println!(
        "\nidle cost at defaults ({}): {sidecars} sidecars for {} s against one hub pair",
        if watch {
            "with the watch"
        } else {
            "polling only"
        },
        for_.as_secs()
    );
    let hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let mut args = hubs.args("10s", "3s", 3);
    args.retain(|a| !a.starts_with("--confirm-interval") && !a.starts_with("--watch"));
    args.push(format!("--watch={watch}"));
    let mut running = Vec::new();
    for i in 0..sidecars {
        let args = args.clone();
        let handoff = hubs.dir.path().join(format!("handoff-{i}"));
        running.push(
            tokio::task::spawn_blocking(move || Sidecar::spawn(&args, &handoff))
                .await
                .unwrap(),
        );
    }
    // Let the watches settle (their initial list) before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = |h: &support::fake_hub::FakeHub| h.requests() + h.watch_requests();
    let (p0, s0) = (all(&hubs.primary), all(&hubs.secondary));
    tokio::time::sleep(for_).await;
    let per_worker = |n: u64| n as f64 / for_.as_secs_f64() / sidecars as f64;
    let (p, s) = (
        per_worker(all(&hubs.primary) - p0),
        per_worker(all(&hubs.secondary) - s0),
    );
    let rss: Vec<f64> = running.iter().map(|s| proc_stat(s.pid()).0).collect();
    println!("  per worker: primary {p:.4} req/s, secondary {s:.4} req/s");
    println!(
        "  each hub at 1,000 workers: {:.0} req/s; at 10,000: {:.0} req/s",
        p * 1e3,
        p * 1e4
    );
    println!(
        "  RSS of each idle sidecar: {:?} MiB",
        rss.iter()
            .map(|r| (r * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    json!({
        "watch": watch,
        "sidecars": sidecars,
        "seconds": for_.as_secs(),
        "per_worker_req_per_s": {"primary": p, "secondary": s},
        "per_hub_req_per_s_at_1000_workers": p * 1e3,
        "per_hub_req_per_s_at_10000_workers": p * 1e4,
        "idle_rss_mib": rss,
    })
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
    })
}
