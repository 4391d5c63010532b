//! Flags and env vars → a validated `Config`. Validation is pure; the one check that needs the
//! file system (the handoff directory) lives in `handoff::ensure_writable`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::claim::Endpoint;
use crate::verdict::HubId;

#[derive(Debug, Parser)]
#[command(name = "hub-follower", version, about = "Follows the Active KubeSlice controller hub for a worker", long_about = None, args_override_self = true)]
pub struct Cli {
    #[command(flatten)]
    pub settings: Settings,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe every hub once, print what each says and the decision that would be taken.
    /// Exits 0 when some hub answered, 1 when none did.
    Check {
        #[arg(long, env = "HUB_OUTPUT", value_enum, default_value_t = OutputFormat::Text)]
        output: OutputFormat,
    },
    /// Wrap the worker: wait for a published decision, export it as HUB_HOST_ENDPOINT,
    /// HUB_TOKEN_FILE and HUB_CA_FILE, acknowledge it, then exec the command.
    Exec {
        /// How long to wait for the first decision before giving up (exit 1).
        #[arg(long, env = "HUB_WAIT", default_value = "120s")]
        wait: String,
        /// Also export KUBECONFIG pointing at the handoff's kubeconfig.
        #[arg(long, env = "HUB_KUBECONFIG")]
        kubeconfig: bool,
        /// The worker's command and arguments.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true,
            value_name = "CMD"
        )]
        command: Vec<std::ffi::OsString>,
    },
    /// Copy this binary to DEST (atomically, mode 0755), for an init container.
    Install {
        #[arg(value_name = "DEST")]
        dest: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// The sidecar's settings as given. Strings stay strings here so that every problem is reported
/// by `Config::from_settings` in one voice, naming the flag and its env var.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// URL of the primary hub's API server (the worker's own).
    #[arg(long, env = "HUB_HOST_ENDPOINT", global = true)]
    pub hub_endpoint: Option<String>,
    #[arg(
        long,
        env = "HUB_TOKEN_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-serviceaccount/token"
    )]
    pub hub_token_file: PathBuf,
    #[arg(
        long,
        env = "HUB_CA_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-serviceaccount/ca.crt"
    )]
    pub hub_ca_file: PathBuf,
    /// Server name to verify the primary hub's certificate against, when it lacks the endpoint's host.
    #[arg(long, env = "HUB_TLS_SERVER_NAME", global = true)]
    pub hub_tls_server_name: Option<String>,
    /// URL of the secondary hub's API server. Unset: single-hub mode.
    #[arg(long, env = "HUB_SECONDARY_HOST_ENDPOINT", global = true)]
    pub secondary_endpoint: Option<String>,
    #[arg(
        long,
        env = "HUB_SECONDARY_TOKEN_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/token"
    )]
    pub secondary_token_file: PathBuf,
    #[arg(
        long,
        env = "HUB_SECONDARY_CA_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/ca.crt"
    )]
    pub secondary_ca_file: PathBuf,
    #[arg(long, env = "HUB_SECONDARY_TLS_SERVER_NAME", global = true)]
    pub secondary_tls_server_name: Option<String>,
    /// Name of this worker's Cluster object on the hubs.
    #[arg(long, env = "CLUSTER_NAME", global = true)]
    pub cluster_name: Option<String>,
    /// The project namespace on the hubs that holds the Cluster object.
    #[arg(long, env = "HUB_PROJECT_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    #[arg(long, env = "HUB_POLL_INTERVAL", global = true, default_value = "10s")]
    pub poll_interval: String,
    /// Interval of the confirming reads once a round has shown a new candidate.
    #[arg(
        long,
        env = "HUB_CONFIRM_INTERVAL",
        global = true,
        default_value = "1s"
    )]
    pub confirm_interval: String,
    /// Watch each hub's Cluster object so that a claim change is read at once (polling stays).
    #[arg(
        long,
        env = "HUB_WATCH",
        global = true,
        default_value = "true",
        value_name = "BOOL"
    )]
    pub watch: String,
    /// `timeoutSeconds` of each watch request (at most 295s); a watch silent for a little
    /// longer is dropped and re-established.
    #[arg(long, env = "HUB_WATCH_TIMEOUT", global = true, default_value = "290s")]
    pub watch_timeout: String,
    /// Hard deadline for one read of one hub: connect, TLS, headers and body.
    #[arg(long, env = "HUB_PROBE_TIMEOUT", global = true, default_value = "3s")]
    pub probe_timeout: String,
    /// Consecutive rounds that must name a new hub before the worker is moved.
    #[arg(
        long,
        env = "HUB_SWITCH_CONFIRMATIONS",
        global = true,
        default_value = "3"
    )]
    pub confirmations: String,
    #[arg(
        long,
        env = "HUB_HANDOFF_DIR",
        global = true,
        default_value = "/var/run/hub-follower"
    )]
    pub handoff_dir: PathBuf,
    #[arg(
        long,
        env = "HUB_FOLLOWER_LISTEN",
        global = true,
        default_value = "0.0.0.0:8095"
    )]
    pub listen: String,
    // This and the other enum-like settings stay strings here and are checked with the rest,
    // so that `exec` and `install` in the worker's container never trip over the sidecar's
    // settings in a shared env block.
    /// Log format: json (for collectors) or text (for people).
    #[arg(
        long,
        env = "HUB_FOLLOWER_LOG_FORMAT",
        global = true,
        default_value = "json"
    )]
    pub log_format: String,
    /// How the worker is restarted after a confirmed switch: signal, liveness or none.
    #[arg(
        long,
        env = "HUB_RESTART_MODE",
        global = true,
        default_value = "signal"
    )]
    pub restart_mode: String,
    /// Base name of the worker's executable (signal mode).
    #[arg(
        long,
        env = "HUB_WORKER_PROCESS",
        global = true,
        default_value = "manager"
    )]
    pub worker_process: String,
    /// Signal that asks the worker to exit (signal mode).
    #[arg(
        long,
        env = "HUB_RESTART_SIGNAL",
        global = true,
        default_value = "SIGTERM"
    )]
    pub restart_signal: String,
    /// Time the worker has to exit before it gets SIGKILL (signal mode).
    #[arg(long, env = "HUB_KILL_AFTER", global = true, default_value = "30s")]
    pub kill_after: String,
    /// Time allowed for a new worker process to appear after the signal (signal mode).
    #[arg(
        long,
        env = "HUB_RESTART_VERIFY_TIMEOUT",
        global = true,
        default_value = "5m"
    )]
    pub restart_verify_timeout: String,
    /// Longest time /worker/livez fails after a switch without the worker's acknowledgement.
    #[arg(
        long,
        env = "HUB_LIVENESS_FAIL_FOR",
        global = true,
        default_value = "90s"
    )]
    pub liveness_fail_for: String,
    /// Upper bound of the random delay before acting on a switch.
    #[arg(long, env = "HUB_RESTART_JITTER", global = true, default_value = "5s")]
    pub restart_jitter: String,
    /// At most one restart per this window; switches inside it are coalesced.
    #[arg(
        long,
        env = "HUB_RESTART_COOLDOWN",
        global = true,
        default_value = "60s"
    )]
    pub restart_cooldown: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RestartMode {
    /// Signal the worker's processes through a shared PID namespace.
    Signal,
    /// Fail /worker/livez so that kubelet restarts the worker.
    Liveness,
    /// Observe only: log and count what would be done.
    None,
}

impl RestartMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartMode::Signal => "signal",
            RestartMode::Liveness => "liveness",
            RestartMode::None => "none",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RestartConfig {
    pub mode: RestartMode,
    pub worker_process: String,
    pub signal: rustix::process::Signal,
    pub signal_name: String,
    pub kill_after: Duration,
    pub verify_timeout: Duration,
    pub liveness_fail_for: Duration,
    pub jitter: Duration,
    pub cooldown: Duration,
}

impl RestartConfig {
    pub fn from_settings(s: &Settings) -> Result<Self, ConfigError> {
        let worker_process = s.worker_process.trim();
        if worker_process.is_empty() || worker_process.contains('/') {
            return Err(invalid(
                "--worker-process",
                "HUB_WORKER_PROCESS",
                format!("expected the base name of the worker's executable such as manager, got {worker_process:?}"),
            ));
        }
        let signal = crate::restart::process::parse_signal(&s.restart_signal).ok_or_else(|| {
            invalid(
                "--restart-signal",
                "HUB_RESTART_SIGNAL",
                format!("expected one of SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGKILL; got {:?}", s.restart_signal),
            )
        })?;
        Ok(Self {
            mode: match s.restart_mode.trim() {
                "signal" => RestartMode::Signal,
                "liveness" => RestartMode::Liveness,
                "none" => RestartMode::None,
                other => {
                    return Err(invalid(
                        "--restart-mode",
                        "HUB_RESTART_MODE",
                        format!("expected signal, liveness or none, got {other:?}"),
                    ))
                }
            },
            worker_process: worker_process.to_string(),
            signal,
            signal_name: s.restart_signal.trim().to_ascii_uppercase(),
            kill_after: duration(&s.kill_after, "--kill-after", "HUB_KILL_AFTER")?,
            verify_timeout: duration(
                &s.restart_verify_timeout,
                "--restart-verify-timeout",
                "HUB_RESTART_VERIFY_TIMEOUT",
            )?,
            liveness_fail_for: duration(
                &s.liveness_fail_for,
                "--liveness-fail-for",
                "HUB_LIVENESS_FAIL_FOR",
            )?,
            jitter: duration_or_zero(&s.restart_jitter, "--restart-jitter", "HUB_RESTART_JITTER")?,
            cooldown: duration_or_zero(
                &s.restart_cooldown,
                "--restart-cooldown",
                "HUB_RESTART_COOLDOWN",
            )?,
        })
    }
}

/// One configured hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubConfig {
    pub id: HubId,
    pub endpoint: Endpoint,
    /// The endpoint as the operator wrote it; this is what the worker is handed.
    pub raw_endpoint: String,
    pub token_file: PathBuf,
    pub ca_file: PathBuf,
    pub tls_server_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Primary first: configuration order breaks ties.
    pub hubs: Vec<HubConfig>,
    pub cluster_name: String,
    pub namespace: String,
    pub poll_interval: Duration,
    pub confirm_interval: Duration,
    pub probe_timeout: Duration,
    /// None: no watch (polling only).
    pub watch_timeout: Option<Duration>,
    pub confirmations: u32,
    pub handoff_dir: PathBuf,
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    pub restart: RestartConfig,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {flag} ({env}): {problem}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub env: &'static str,
    pub problem: String,
}

fn invalid(flag: &'static str, env: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        env,
        problem: problem.into(),
    }
}

impl Config {
    pub fn from_settings(s: &Settings) -> Result<Self, ConfigError> {
        let primary_raw = required(&s.hub_endpoint, "--hub-endpoint", "HUB_HOST_ENDPOINT")?;
        let primary = HubConfig {
            id: HubId::Primary,
            endpoint: endpoint(primary_raw, "--hub-endpoint", "HUB_HOST_ENDPOINT")?,
            raw_endpoint: primary_raw.trim().to_string(),
            token_file: s.hub_token_file.clone(),
            ca_file: s.hub_ca_file.clone(),
            tls_server_name: server_name(
                &s.hub_tls_server_name,
                "--hub-tls-server-name",
                "HUB_TLS_SERVER_NAME",
            )?,
        };
        let mut hubs = vec![primary];
        if let Some(raw) = s
            .secondary_endpoint
            .as_deref()
            .filter(|e| !e.trim().is_empty())
        {
            let (flag, env) = ("--secondary-endpoint", "HUB_SECONDARY_HOST_ENDPOINT");
            let secondary = HubConfig {
                id: HubId::Secondary,
                endpoint: endpoint(raw, flag, env)?,
                raw_endpoint: raw.trim().to_string(),
                token_file: s.secondary_token_file.clone(),
                ca_file: s.secondary_ca_file.clone(),
                tls_server_name: server_name(
                    &s.secondary_tls_server_name,
                    "--secondary-tls-server-name",
                    "HUB_SECONDARY_TLS_SERVER_NAME",
                )?,
            };
            if secondary.endpoint == hubs[0].endpoint {
                return Err(invalid(
                    flag,
                    env,
                    format!(
                        "names the same hub as --hub-endpoint ({}); the two hubs must differ",
                        secondary.endpoint
                    ),
                ));
            }
            hubs.push(secondary);
        }

        let cluster_name = required(&s.cluster_name, "--cluster-name", "CLUSTER_NAME")?;
        dns1123_subdomain(cluster_name)
            .map_err(|p| invalid("--cluster-name", "CLUSTER_NAME", p))?;
        let namespace = required(&s.namespace, "--namespace", "HUB_PROJECT_NAMESPACE")?;
        dns1123_label(namespace).map_err(|p| invalid("--namespace", "HUB_PROJECT_NAMESPACE", p))?;

        let poll_interval = duration(&s.poll_interval, "--poll-interval", "HUB_POLL_INTERVAL")?;
        let probe_timeout = duration(&s.probe_timeout, "--probe-timeout", "HUB_PROBE_TIMEOUT")?;
        if probe_timeout >= poll_interval {
            return Err(invalid(
                "--probe-timeout",
                "HUB_PROBE_TIMEOUT",
                format!(
                    "{} must be shorter than --poll-interval ({})",
                    s.probe_timeout, s.poll_interval
                ),
            ));
        }
        let confirm_interval = duration(
            &s.confirm_interval,
            "--confirm-interval",
            "HUB_CONFIRM_INTERVAL",
        )?;
        if confirm_interval > poll_interval {
            return Err(invalid(
                "--confirm-interval",
                "HUB_CONFIRM_INTERVAL",
                format!(
                    "{} must not be longer than --poll-interval ({})",
                    s.confirm_interval, s.poll_interval
                ),
            ));
        }
        let watch_timeout = duration(&s.watch_timeout, "--watch-timeout", "HUB_WATCH_TIMEOUT")?;
        if watch_timeout < Duration::from_secs(1) || watch_timeout > Duration::from_secs(295) {
            return Err(invalid(
                "--watch-timeout",
                "HUB_WATCH_TIMEOUT",
                format!(
                    "expected between 1s and 295s (the API server's limit), got {:?}",
                    s.watch_timeout
                ),
            ));
        }
        let confirmations = match s.confirmations.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(invalid(
                    "--confirmations",
                    "HUB_SWITCH_CONFIRMATIONS",
                    format!(
                        "expected a whole number of at least 1, got {:?}",
                        s.confirmations
                    ),
                ))
            }
        };
        let listen = s.listen.trim().parse().map_err(|_| {
            invalid(
                "--listen",
                "HUB_FOLLOWER_LISTEN",
                format!(
                    "expected ADDRESS:PORT such as 0.0.0.0:8095, got {:?}",
                    s.listen
                ),
            )
        })?;
        if s.handoff_dir.as_os_str().is_empty() {
            return Err(invalid(
                "--handoff-dir",
                "HUB_HANDOFF_DIR",
                "must not be empty",
            ));
        }

        Ok(Config {
            hubs,
            cluster_name: cluster_name.to_string(),
            namespace: namespace.to_string(),
            poll_interval,
            confirm_interval,
            probe_timeout,
            watch_timeout: match s.watch.trim() {
                "true" => Some(watch_timeout),
                "false" => None,
                other => {
                    return Err(invalid(
                        "--watch",
                        "HUB_WATCH",
                        format!("expected true or false, got {other:?}"),
                    ))
                }
            },
            confirmations,
            handoff_dir: s.handoff_dir.clone(),
            listen,
            log_format: match s.log_format.trim() {
                "json" => LogFormat::Json,
                "text" => LogFormat::Text,
                other => {
                    return Err(invalid(
                        "--log-format",
                        "HUB_FOLLOWER_LOG_FORMAT",
                        format!("expected json or text, got {other:?}"),
                    ))
                }
            },
            restart: RestartConfig::from_settings(s)?,
        })
    }

    pub fn hub(&self, id: HubId) -> Option<&HubConfig> {
        self.hubs.iter().find(|h| h.id == id)
    }

    /// The hubs as the resolver knows them: id and canonical endpoint, in configuration order.
    pub fn endpoints(&self) -> Vec<(HubId, Endpoint)> {
        self.hubs
            .iter()
            .map(|h| (h.id, h.endpoint.clone()))
            .collect()
    }

    pub fn single_hub(&self) -> bool {
        self.hubs.len() == 1
    }
}

fn required<'a>(
    value: &'a Option<String>,
    flag: &'static str,
    env: &'static str,
) -> Result<&'a str, ConfigError> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid(flag, env, "is required"))
}

fn endpoint(raw: &str, flag: &'static str, env: &'static str) -> Result<Endpoint, ConfigError> {
    Endpoint::parse(raw).map_err(|e| {
        invalid(
            flag,
            env,
            format!(
                "expected an absolute https:// URL such as https://10.1.80.11:6443; {raw:?} {e}"
            ),
        )
    })
}

fn server_name(
    value: &Option<String>,
    flag: &'static str,
    env: &'static str,
) -> Result<Option<String>, ConfigError> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(name)
            if name.contains(['/', ':', ' ']) && name.parse::<std::net::IpAddr>().is_err() =>
        {
            Err(invalid(
                flag,
                env,
                format!("expected a DNS name or IP address, got {name:?}"),
            ))
        }
        Some(name) => Ok(Some(name.to_string())),
    }
}

/// Longer than any sensible setting, and short enough that adding it to a clock reading can't
/// overflow.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

fn duration(raw: &str, flag: &'static str, env: &'static str) -> Result<Duration, ConfigError> {
    match humantime::parse_duration(raw.trim()) {
        Ok(d) if d > MAX_DURATION => {
            Err(invalid(flag, env, format!("{raw:?} is longer than a year")))
        }
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(invalid(flag, env, "must be longer than zero")),
        Err(e) => Err(invalid(
            flag,
            env,
            format!("expected a duration such as 10s or 1m30s, got {raw:?} ({e})"),
        )),
    }
}

/// `--wait` of `exec`.
pub fn exec_wait(raw: &str) -> Result<Duration, ConfigError> {
    duration(raw, "--wait", "HUB_WAIT")
}

fn duration_or_zero(
    raw: &str,
    flag: &'static str,
    env: &'static str,
) -> Result<Duration, ConfigError> {
    match humantime::parse_duration(raw.trim()) {
        Ok(d) if d > MAX_DURATION => {
            Err(invalid(flag, env, format!("{raw:?} is longer than a year")))
        }
        Ok(d) => Ok(d),
        Err(e) => Err(invalid(
            flag,
            env,
            format!("expected a duration such as 5s or 0s, got {raw:?} ({e})"),
        )),
    }
}

fn dns1123_label(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected a DNS-1123 label (at most 63 characters of a-z, 0-9 and '-', starting and ending alphanumeric), got {s:?}"
        ))
    }
}

fn dns1123_subdomain(s: &str) -> Result<(), String> {
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(|l| dns1123_label(l).is_ok());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', at most 253 characters), got {s:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> Settings {
        let mut argv = vec!["hub-follower"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().settings
    }

    fn base() -> Vec<&'static str> {
        vec![
            "--hub-endpoint=https://10.1.80.11:6443",
            "--secondary-endpoint=https://10.1.80.12:6443",
            "--cluster-name=worker-1",
            "--namespace=kubeslice-acme",
        ]
    }

    fn error_for(extra: &[&str]) -> ConfigError {
        let mut args = base();
        args.extend_from_slice(extra);
        Config::from_settings(&settings(&args)).unwrap_err()
    }

    #[test]
    fn defaults_fill_in_everything_else() {
        let c = Config::from_settings(&settings(&base())).unwrap();
        assert_eq!(c.hubs.len(), 2);
        assert_eq!(
            c.hubs[0].token_file,
            PathBuf::from("/var/run/secrets/kubernetes.io/hub-serviceaccount/token")
        );
        assert_eq!(
            c.hubs[1].ca_file,
            PathBuf::from("/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/ca.crt")
        );
        assert_eq!(c.poll_interval, Duration::from_secs(10));
        assert_eq!(c.confirm_interval, Duration::from_secs(1));
        assert_eq!(c.watch_timeout, Some(Duration::from_secs(290)));
        assert_eq!(c.probe_timeout, Duration::from_secs(3));
        assert_eq!(c.confirmations, 3);
        assert_eq!(c.listen, "0.0.0.0:8095".parse().unwrap());
        assert_eq!(c.handoff_dir, PathBuf::from("/var/run/hub-follower"));
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.restart.mode, RestartMode::Signal);
        assert_eq!(c.restart.worker_process, "manager");
        assert_eq!(c.restart.signal, rustix::process::Signal::TERM);
        assert_eq!(c.restart.kill_after, Duration::from_secs(30));
        assert_eq!(c.restart.verify_timeout, Duration::from_secs(300));
        assert_eq!(c.restart.liveness_fail_for, Duration::from_secs(90));
        assert_eq!(c.restart.jitter, Duration::from_secs(5));
        assert_eq!(c.restart.cooldown, Duration::from_secs(60));
        assert!(!c.single_hub());
    }

    #[test]
    fn without_a_secondary_it_is_single_hub_mode() {
        let s = settings(
            &base()[..1]
                .iter()
                .chain(&base()[2..])
                .copied()
                .collect::<Vec<_>>(),
        );
        assert!(Config::from_settings(&s).unwrap().single_hub());
    }

    #[test]
    fn each_bad_setting_is_named_with_its_env_var() {
        let cases: &[(&[&str], &str, &str)] = &[
            (
                &["--hub-endpoint=http://10.1.80.11:6443"],
                "--hub-endpoint",
                "https://",
            ),
            (
                &["--secondary-endpoint=https://10.1.80.11:6443/"],
                "--secondary-endpoint",
                "same hub",
            ),
            (
                &["--secondary-endpoint=10.1.80.12"],
                "--secondary-endpoint",
                "absolute",
            ),
            (&["--confirmations=0"], "--confirmations", "at least 1"),
            (
                &["--confirmations=three"],
                "--confirmations",
                "whole number",
            ),
            (&["--poll-interval=soon"], "--poll-interval", "duration"),
            (
                &["--probe-timeout=10s"],
                "--probe-timeout",
                "shorter than --poll-interval",
            ),
            (
                &["--probe-timeout=0s"],
                "--probe-timeout",
                "longer than zero",
            ),
            (&["--cluster-name=Worker_1"], "--cluster-name", "DNS-1123"),
            (&["--namespace=a.b"], "--namespace", "DNS-1123 label"),
            (&["--listen=8095"], "--listen", "ADDRESS:PORT"),
            (
                &["--hub-tls-server-name=https://x"],
                "--hub-tls-server-name",
                "DNS name",
            ),
            (
                &["--confirm-interval=11s"],
                "--confirm-interval",
                "not be longer than --poll-interval",
            ),
            (&["--watch-timeout=10m"], "--watch-timeout", "295s"),
            (&["--watch=yes"], "--watch", "true or false"),
            (
                &["--worker-process=/manager"],
                "--worker-process",
                "base name",
            ),
            (&["--restart-signal=SIGSEGV"], "--restart-signal", "SIGTERM"),
            (
                &["--restart-mode=kill"],
                "--restart-mode",
                "signal, liveness or none",
            ),
            (&["--log-format=yaml"], "--log-format", "json or text"),
            (&["--kill-after=0s"], "--kill-after", "longer than zero"),
            (&["--restart-jitter=lots"], "--restart-jitter", "duration"),
            (
                &["--restart-cooldown=400000000000y"],
                "--restart-cooldown",
                "longer than a year",
            ),
            (&["--kill-after=2y"], "--kill-after", "longer than a year"),
        ];
        for (extra, flag, fragment) in cases {
            let e = error_for(extra);
            assert_eq!(e.flag, *flag, "{extra:?}");
            let msg = e.to_string();
            assert!(msg.contains(fragment), "{msg}");
            assert!(msg.contains(e.env), "{msg}");
        }
    }

    #[test]
    fn missing_required_settings_are_named() {
        let s = settings(&[]);
        let e = Config::from_settings(&s).unwrap_err();
        assert_eq!((e.flag, e.env), ("--hub-endpoint", "HUB_HOST_ENDPOINT"));
        let s = settings(&["--hub-endpoint=https://h:6443", "--namespace=ns"]);
        assert_eq!(Config::from_settings(&s).unwrap_err().env, "CLUSTER_NAME");
    }

    #[test]
    fn dns_names_follow_kubernetes_rules() {
        assert!(dns1123_label("kubeslice-acme").is_ok());
        assert!(dns1123_label(&"a".repeat(64)).is_err());
        assert!(dns1123_label("-a").is_err());
        assert!(dns1123_subdomain("worker.east-1").is_ok());
        assert!(dns1123_subdomain("worker..east").is_err());
    }
}
