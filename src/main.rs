//! Wiring only: parse the settings, set up logs, run the chosen command.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use hub_follower::config::{Cli, Command, Config, LogFormat};
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

/// kube's per-request error logging would repeat every failed probe; the follower logs probe
/// errors itself, once per change. `RUST_LOG` overrides all of this.
const DEFAULT_FILTER: &str = "info,kube_client=off,kube=off,hyper_util=off,rustls=off";

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The worker-side commands need no hub configuration.
    let check = match cli.command {
        Some(Command::Install { dest }) => return install(&dest),
        Some(Command::Exec {
            wait,
            kubeconfig,
            in_place,
            stop_grace,
            command,
        }) => {
            let dir = &cli.settings.handoff_dir;
            return match in_place {
                true => exec_in_place(dir, &wait, &stop_grace, kubeconfig, &command),
                false => exec(dir, &wait, kubeconfig, &command),
            };
        }
        Some(Command::Check { output }) => Some(output),
        None => None,
    };
    let config = match Config::from_settings(&cli.settings) {
        Ok(c) => c,
        Err(e) => return usage_error(&e.to_string()),
    };
    if let Err(e) = hub_follower::handoff::ensure_writable(&config.handoff_dir) {
        return usage_error(&format!(
            "invalid setting --handoff-dir (HUB_HANDOFF_DIR): {} must exist or be creatable, and be writable: {e}",
            config.handoff_dir.display()
        ));
    }
    init_logs(config.log_format);
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")
        .and_then(|runtime| {
            let outcome = match check {
                Some(output) => runtime.block_on(async {
                    let report = hub_follower::check::run(&config).await;
                    print!("{}", hub_follower::check::render(&report, output));
                    // `check` found no hub that answered: 1.
                    Ok(u8::from(!report.usable || !report.problems.is_empty()))
                }),
                None => runtime
                    .block_on(sidecar(config))
                    .map(|stopped| match stopped {
                        hub_follower::Stopped::Shutdown => 0,
                        hub_follower::Stopped::RestartAll(code) => code,
                    }),
            };
            // A blocking task still running (a name lookup that hangs) must not hold the exit.
            runtime.shutdown_timeout(std::time::Duration::from_millis(500));
            outcome
        });
    match outcome {
        Ok(0) => ExitCode::SUCCESS,
        // restart-all mode: the code the pod's restartPolicyRules name.
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "hub-follower stopped");
            ExitCode::FAILURE
        }
    }
}

/// Runs until SIGTERM or SIGINT, or until restart-all mode asks for an exit.
async fn sidecar(config: Config) -> anyhow::Result<hub_follower::Stopped> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = tx.send(true);
    });
    Ok(hub_follower::run(config, rx).await?)
}

fn install(dest: &Path) -> ExitCode {
    match hub_follower::exec::install(dest) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "hub-follower install: cannot install into {}: {e}",
                dest.display()
            );
            ExitCode::FAILURE
        }
    }
}

fn exec(handoff_dir: &Path, wait: &str, kubeconfig: bool, command: &[OsString]) -> ExitCode {
    let wait = match hub_follower::config::exec_wait(wait) {
        Ok(w) => w,
        Err(e) => return usage_error(&e.to_string()),
    };
    let err = hub_follower::exec::exec(handoff_dir, wait, kubeconfig, command);
    eprintln!("hub-follower exec: {err}");
    ExitCode::from(err.exit_code())
}

fn exec_in_place(
    dir: &Path,
    wait: &str,
    grace: &str,
    kubeconfig: bool,
    command: &[OsString],
) -> ExitCode {
    let (wait, grace) = match (
        hub_follower::config::exec_wait(wait),
        hub_follower::config::stop_grace(grace),
    ) {
        (Ok(w), Ok(g)) => (w, g),
        (Err(e), _) | (_, Err(e)) => return usage_error(&e.to_string()),
    };
    let options = hub_follower::exec::in_place::Options {
        dir,
        wait,
        grace,
        kubeconfig,
        command,
    };
    match hub_follower::exec::in_place::run(&options) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("hub-follower exec: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("hub-follower: {message}");
    ExitCode::from(2)
}

fn init_logs(format: LogFormat) {
    let filter = match std::env::var("RUST_LOG") {
        // A bare level (what the chart's logLevel sets) keeps the client libraries quiet too.
        Ok(level) if matches!(level.trim(), "error" | "warn" | "info" | "debug" | "trace") => {
            EnvFilter::new(DEFAULT_FILTER.replacen("info", level.trim(), 1))
        }
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::new(directives),
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            // Without signal handlers the process still dies on SIGTERM by default.
            std::future::pending::<()>().await;
        }
    }
}
