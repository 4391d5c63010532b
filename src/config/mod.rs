//! Flags and env vars → a validated `Config`. Validation is pure; the one check that needs the
//! file system (the handoff directory) lives in `handoff::ensure_writable`.
//!
//! `cli` declares the settings for clap; `values` holds the types they parse into, each with
//! its `FromStr`; `restart` the restart side's. A problem names the flag and env var from clap's
//! own metadata, so the two can't drift apart.

mod cli;
mod restart;
mod values;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use cli::{Cli, Command, OutputFormat, Settings};
pub use restart::{ExitCode, RestartConfig, RestartMode, RestartSignal, WorkerProbeConfig};
pub use values::{ConfigError, LogFormat};

use crate::claim::Endpoint;
use crate::verdict::HubId;
use values::{
    parse, Count, Delay, HubList, Interval, Listen, NamespaceName, ObjectName, ServerName, Toggle,
};

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
    /// The interval of the reads while every hub's watch vouches for its hub.
    pub watched_poll_interval: Duration,
    pub confirmations: u32,
    /// Rule 10: how long the worker's hub may be silent before the basis stops holding it.
    pub dead_hub_after: Duration,
    /// Rule 11: at most one switch per this window in a split brain; zero: no limit.
    pub split_brain_window: Duration,
    /// Rule 12: how long the first decision waits for a claim before the primary.
    pub default_after: Duration,
    pub handoff_dir: PathBuf,
    /// Where the operator's pin and drain are read; `None`: off.
    pub override_dir: Option<PathBuf>,
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    pub restart: RestartConfig,
    pub events: EventsConfig,
}

/// Recording Events on the worker's Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConfig {
    pub enabled: bool,
    pub pod_name: Option<String>,
    pub pod_namespace: Option<String>,
    pub pod_uid: Option<String>,
}

/// At most this many hubs: each is read every round, and each is a set of metric series.
pub const MAX_HUBS: usize = 8;

/// The deadline of a read when `--probe-timeout` is not set, or half the poll interval when
/// that is shorter.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The confirming reads' interval when `--confirm-interval` is not set, or the poll interval
/// when that is shorter.
const CONFIRM_INTERVAL: Duration = Duration::from_secs(1);
/// How long the worker's hub may be silent before its basis stops holding the worker on it
/// (rule 10), unless three --poll-interval are longer. OCM's hub switch waits at least as long.
const DEAD_HUB_AFTER: Duration = Duration::from_secs(180);
/// The interval of the reads while the watches vouch for both hubs, unless --poll-interval is longer.
const WATCHED_POLL_INTERVAL: Duration = Duration::from_secs(120);

impl Config {
    pub fn from_settings(s: &Settings) -> Result<Self, ConfigError> {
        let primary = hub(
            HubId::PRIMARY,
            required("hub_endpoint", &s.hub_endpoint)?,
            &s.hub_token_file,
            &s.hub_ca_file,
            &s.hub_tls_server_name,
            Setting::Flag("hub_endpoint", "hub_tls_server_name"),
        )?;
        let mut hubs = vec![primary];
        if let Some(raw) = s.secondary_endpoint.as_deref().map(str::trim) {
            if !raw.is_empty() {
                let secondary = hub(
                    HubId::SECONDARY,
                    raw,
                    &s.secondary_token_file,
                    &s.secondary_ca_file,
                    &s.secondary_tls_server_name,
                    Setting::Flag("secondary_endpoint", "secondary_tls_server_name"),
                )?;
                if secondary.endpoint == hubs[0].endpoint {
                    return Err(ConfigError::new(
                        "secondary_endpoint",
                        format!(
                            "names the same hub as --hub-endpoint ({}); the two hubs must differ",
                            secondary.endpoint
                        ),
                    ));
                }
                hubs.push(secondary);
            }
        }
        let list: HubList = parse("hubs", s.hubs.as_deref().unwrap_or(""))?;
        for (i, entry) in list.0.iter().enumerate() {
            let at = |problem: String| {
                ConfigError::new(
                    "hubs",
                    format!("entry {} ({:?}): {problem}", i + 1, entry.name),
                )
            };
            if matches!(entry.name.as_str(), "primary" | "secondary")
                || hubs.iter().any(|h| h.id.as_str() == entry.name)
            {
                return Err(at(format!(
                    "the name {:?} {}; each hub needs a name of its own",
                    entry.name,
                    match entry.name.as_str() {
                        "primary" => "is the hub of --hub-endpoint",
                        "secondary" => "is kept for the hub of --secondary-endpoint",
                        _ => "is taken by an earlier entry",
                    }
                )));
            }
            let dir = PathBuf::from(format!(
                "/var/run/secrets/kubernetes.io/hub-{}-serviceaccount",
                entry.name
            ));
            let config = hub(
                HubId::named(&entry.name),
                &entry.endpoint,
                &entry
                    .token_file
                    .clone()
                    .unwrap_or_else(|| dir.join("token")),
                &entry.ca_file.clone().unwrap_or_else(|| dir.join("ca.crt")),
                &entry.tls_server_name,
                Setting::ListEntry(i + 1),
            )?;
            if let Some(same) = hubs.iter().find(|h| h.endpoint == config.endpoint) {
                return Err(at(format!(
                    "names the same hub as {:?} ({}); each hub must differ",
                    same.id.as_str(),
                    config.endpoint
                )));
            }
            hubs.push(config);
        }
        if hubs.len() > MAX_HUBS {
            return Err(ConfigError::new(
                "hubs",
                format!("at most {MAX_HUBS} hubs in all, got {}", hubs.len()),
            ));
        }

        let cluster_name: ObjectName =
            parse("cluster_name", required("cluster_name", &s.cluster_name)?)?;
        let namespace: NamespaceName = parse("namespace", required("namespace", &s.namespace)?)?;

        let poll_interval = parse::<Interval>("poll_interval", &s.poll_interval)?;
        let probe_timeout = match &s.probe_timeout {
            None => PROBE_TIMEOUT.min(poll_interval.0 / 2),
            Some(raw) => {
                let timeout = parse::<Interval>("probe_timeout", raw)?;
                if timeout.0 >= poll_interval.0 {
                    return Err(ConfigError::new(
                        "probe_timeout",
                        format!("{timeout} must be shorter than --poll-interval ({poll_interval})"),
                    ));
                }
                timeout.0
            }
        };
        let confirm_interval = match &s.confirm_interval {
            None => CONFIRM_INTERVAL.min(poll_interval.0),
            Some(raw) => {
                let confirm = parse::<Interval>("confirm_interval", raw)?;
                if confirm.0 > poll_interval.0 {
                    return Err(ConfigError::new(
                        "confirm_interval",
                        format!(
                            "{confirm} must not be longer than --poll-interval ({poll_interval})"
                        ),
                    ));
                }
                confirm.0
            }
        };
        let watch_timeout = parse::<Interval>("watch_timeout", &s.watch_timeout)?.0;
        if watch_timeout < Duration::from_secs(1) || watch_timeout > Duration::from_secs(295) {
            return Err(ConfigError::new(
                "watch_timeout",
                format!(
                    "expected between 1s and 295s (the API server's limit), got {:?}",
                    s.watch_timeout
                ),
            ));
        }
        let watched_poll_interval = match &s.watched_poll_interval {
            None => WATCHED_POLL_INTERVAL.max(poll_interval.0),
            Some(raw) => {
                let watched = parse::<Interval>("watched_poll_interval", raw)?;
                if watched.0 < poll_interval.0 {
                    return Err(ConfigError::new(
                        "watched_poll_interval",
                        format!(
                            "{watched} must not be shorter than --poll-interval ({poll_interval})"
                        ),
                    ));
                }
                watched.0
            }
        };
        let dead_hub_after = match &s.dead_hub_after {
            None => DEAD_HUB_AFTER.max(poll_interval.0 * 3),
            Some(raw) => {
                let after = parse::<Interval>("dead_hub_after", raw)?;
                if after.0 <= poll_interval.0 {
                    return Err(ConfigError::new(
                        "dead_hub_after",
                        format!(
                            "{after} must be longer than --poll-interval ({poll_interval}): one missed read is no dead hub"
                        ),
                    ));
                }
                after.0
            }
        };
        if s.handoff_dir.as_os_str().is_empty() {
            return Err(ConfigError::new("handoff_dir", "must not be empty"));
        }

        Ok(Config {
            hubs,
            cluster_name: cluster_name.0,
            namespace: namespace.0,
            poll_interval: poll_interval.0,
            confirm_interval,
            probe_timeout,
            watch_timeout: parse::<Toggle>("watch", &s.watch)?
                .0
                .then_some(watch_timeout),
            watched_poll_interval,
            confirmations: parse::<Count>("confirmations", &s.confirmations)?.0,
            dead_hub_after,
            split_brain_window: parse::<Delay>("split_brain_window", &s.split_brain_window)?.0,
            default_after: parse::<Delay>("default_after", &s.default_after)?.0,
            handoff_dir: s.handoff_dir.clone(),
            override_dir: optional(&s.override_dir).map(PathBuf::from),
            listen: parse::<Listen>("listen", &s.listen)?.0,
            log_format: parse("log_format", &s.log_format)?,
            restart: RestartConfig::from_settings(s)?,
            events: EventsConfig {
                enabled: parse::<Toggle>("events", &s.events)?.0,
                pod_name: optional(&s.pod_name),
                pod_namespace: optional(&s.pod_namespace),
                pod_uid: optional(&s.pod_uid),
            },
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

    /// The bounds of the resolver's liveness rules (10 to 12).
    pub fn liveness(&self) -> crate::resolver::Liveness {
        let signed =
            |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
        crate::resolver::Liveness {
            dead_hub_after: Some(signed(self.dead_hub_after)),
            split_brain_window: signed(self.split_brain_window),
            default_after: signed(self.default_after),
        }
    }

    pub fn single_hub(&self) -> bool {
        self.hubs.len() == 1
    }
}

/// Where a hub's settings came from, for the errors: its own flags, or an entry of `--hubs`.
enum Setting {
    /// The endpoint's and the server name's setting ids.
    Flag(&'static str, &'static str),
    /// The entry's number, from 1.
    ListEntry(usize),
}

impl Setting {
    fn error(&self, id: HubId, which: usize, problem: String) -> ConfigError {
        match self {
            Setting::Flag(endpoint, server_name) => {
                ConfigError::new([endpoint, server_name][which], problem)
            }
            Setting::ListEntry(i) => {
                ConfigError::new("hubs", format!("entry {i} ({:?}): {problem}", id.as_str()))
            }
        }
    }
}

fn hub(
    id: HubId,
    raw: &str,
    token_file: &std::path::Path,
    ca_file: &std::path::Path,
    server_name: &Option<String>,
    from: Setting,
) -> Result<HubConfig, ConfigError> {
    let endpoint = Endpoint::parse(raw).map_err(|e| {
        from.error(
            id,
            0,
            format!(
                "expected an absolute https:// URL such as https://10.1.80.11:6443; {raw:?} {e}"
            ),
        )
    })?;
    let tls_server_name = match server_name.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(name) => Some(
            name.parse::<ServerName>()
                .map_err(|e| from.error(id, 1, e))?
                .0,
        ),
    };
    Ok(HubConfig {
        id,
        endpoint,
        raw_endpoint: raw.trim().to_string(),
        token_file: token_file.to_path_buf(),
        ca_file: ca_file.to_path_buf(),
        tls_server_name,
    })
}

fn optional(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

fn required<'a>(id: &str, value: &'a Option<String>) -> Result<&'a str, ConfigError> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ConfigError::new(id, "is required"))
}

/// `--wait` of `exec`.
pub fn exec_wait(raw: &str) -> Result<Duration, ConfigError> {
    parse::<Interval>("wait", raw).map(|i| i.0)
}

/// `exec --stop-grace`, parsed like every other duration.
pub fn stop_grace(raw: &str) -> Result<Duration, ConfigError> {
    parse::<Interval>("stop_grace", raw).map(|i| i.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::settings;

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
        assert_eq!(c.watch_timeout, Some(Duration::from_secs(120)));
        assert_eq!(c.probe_timeout, Duration::from_secs(3));
        assert_eq!(c.watched_poll_interval, Duration::from_secs(120));
        assert_eq!(c.confirmations, 3);
        assert_eq!(c.listen, "0.0.0.0:8095".parse().unwrap());
        assert_eq!(c.handoff_dir, PathBuf::from("/var/run/hub-follower"));
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.restart.mode, RestartMode::Signal);
        assert_eq!(c.restart.worker_process, "manager");
        assert_eq!(c.restart.signal.signal, rustix::process::Signal::TERM);
        assert_eq!(c.restart.kill_after, Duration::from_secs(30));
        assert_eq!(c.restart.verify_timeout, Duration::from_secs(300));
        assert_eq!(c.restart.liveness_fail_for, Duration::from_secs(90));
        assert_eq!(c.restart.jitter, Duration::from_secs(5));
        assert_eq!(c.restart.cooldown, Duration::from_secs(60));
        assert!(!c.single_hub());
    }

    #[test]
    fn listed_hubs_follow_the_primary_and_secondary_in_order_with_their_own_credentials() {
        let mut args = base();
        args.push("--hubs=hub-c=https://10.1.80.13:6443 ; hub-d=https://10.1.80.14:6443,token-file=/t/d,ca-file=/c/d.crt,tls-server-name=hub-d.internal");
        let c = Config::from_settings(&settings(&args)).unwrap();
        let names: Vec<&str> = c.hubs.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(names, ["primary", "secondary", "hub-c", "hub-d"]);
        assert_eq!(
            c.hubs[2].token_file,
            PathBuf::from("/var/run/secrets/kubernetes.io/hub-hub-c-serviceaccount/token")
        );
        assert_eq!(
            c.hubs[2].ca_file,
            PathBuf::from("/var/run/secrets/kubernetes.io/hub-hub-c-serviceaccount/ca.crt")
        );
        assert_eq!(c.hubs[3].token_file, PathBuf::from("/t/d"));
        assert_eq!(c.hubs[3].ca_file, PathBuf::from("/c/d.crt"));
        assert_eq!(c.hubs[3].tls_server_name.as_deref(), Some("hub-d.internal"));
        assert_eq!(
            c.hub(HubId::named("hub-d"))
                .map(|h| h.raw_endpoint.as_str()),
            Some("https://10.1.80.14:6443")
        );
        let order: Vec<HubId> = c.endpoints().into_iter().map(|(h, _)| h).collect();
        assert_eq!(order, c.hubs.iter().map(|h| h.id).collect::<Vec<_>>());
        // Without a secondary, a listed hub makes two.
        let two = settings(&[
            "--hub-endpoint=https://10.1.80.11:6443",
            "--hubs=c=https://10.1.80.13:6443",
            "--cluster-name=worker-1",
            "--namespace=kubeslice-acme",
        ]);
        let c = Config::from_settings(&two).unwrap();
        assert!(!c.single_hub());
        assert_eq!(c.hubs[1].id.as_str(), "c");
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
            (&["--hubs=c"], "--hubs", "entry 1"),
            (
                &["--hubs=c=https://10.1.80.13:6443;d=10.1.80.14"],
                "--hubs",
                "entry 2 (\"d\"): expected an absolute https:// URL",
            ),
            (
                &["--hubs=secondary=https://10.1.80.13:6443"],
                "--hubs",
                "is kept for the hub of --secondary-endpoint",
            ),
            (
                &["--hubs=c=https://10.1.80.13:6443;c=https://10.1.80.14:6443"],
                "--hubs",
                "entry 2 (\"c\"): the name \"c\" is taken by an earlier entry",
            ),
            (
                &["--hubs=c=https://10.1.80.12:6443/"],
                "--hubs",
                "same hub as \"secondary\"",
            ),
            (
                &["--hubs=c=https://10.1.80.13:6443,tls-server-name=a b"],
                "--hubs",
                "DNS name",
            ),
            (
                &["--hubs=c=https://h:1;d=https://h:2;e=https://h:3;f=https://h:4;g=https://h:5;h=https://h:6;i=https://h:7"],
                "--hubs",
                "at most 8 hubs in all, got 9",
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
                &["--watched-poll-interval=5s"],
                "--watched-poll-interval",
                "must not be shorter than --poll-interval (10s)",
            ),
            (
                &["--worker-process=/manager"],
                "--worker-process",
                "base name",
            ),
            (&["--restart-signal=SIGSEGV"], "--restart-signal", "SIGTERM"),
            (
                &["--restart-mode=kill"],
                "--restart-mode",
                "signal, liveness, restart-all, in-place or none",
            ),
            (&["--log-format=yaml"], "--log-format", "json or text"),
            (
                &["--restart-exit-code=143"],
                "--restart-exit-code",
                "from 3 to 125 other than 101",
            ),
            (&["--kill-after=0s"], "--kill-after", "longer than zero"),
            (&["--restart-jitter=lots"], "--restart-jitter", "duration"),
            (
                &["--restart-cooldown=400000000000y"],
                "--restart-cooldown",
                "longer than a year",
            ),
            (&["--kill-after=2y"], "--kill-after", "longer than a year"),
            (
                &["--worker-probe=http://127.0.0.1:8081/healthz"],
                "--worker-probe",
                "used only with --restart-mode liveness",
            ),
            (
                &["--restart-mode=liveness", "--worker-probe=127.0.0.1:8081"],
                "--worker-probe",
                "tcp://HOST:PORT",
            ),
            (
                &[
                    "--restart-mode=liveness",
                    "--worker-probe=tcp://127.0.0.1:8081",
                    "--worker-probe-timeout=0s",
                ],
                "--worker-probe-timeout",
                "longer than zero",
            ),
            (
                &[
                    "--restart-mode=liveness",
                    "--worker-probe=tcp://127.0.0.1:8081",
                    "--worker-probe-grace=soon",
                ],
                "--worker-probe-grace",
                "duration",
            ),
            // Without a probe too.
            (
                &["--worker-probe-timeout=0s"],
                "--worker-probe-timeout",
                "longer than zero",
            ),
            (&["--worker-probe-grace=soon"], "--worker-probe-grace", "duration"),
        ];
        for (extra, flag, fragment) in cases {
            let e = error_for(extra);
            assert_eq!(e.flag, *flag, "{extra:?}");
            let msg = e.to_string();
            assert!(msg.contains(fragment), "{msg}");
            assert!(msg.contains(&e.env), "{msg}");
        }
    }

    #[test]
    fn missing_required_settings_are_named() {
        let s = settings(&[]);
        let e = Config::from_settings(&s).unwrap_err();
        assert_eq!(
            (e.flag.as_str(), e.env.as_str()),
            ("--hub-endpoint", "HUB_HOST_ENDPOINT")
        );
        let s = settings(&["--hub-endpoint=https://h:6443", "--namespace=ns"]);
        assert_eq!(Config::from_settings(&s).unwrap_err().env, "CLUSTER_NAME");
    }

    #[test]
    fn the_liveness_bounds_default_to_3m_5m_and_30s_and_a_dead_hub_needs_more_than_one_read() {
        let c = Config::from_settings(&settings(&base())).unwrap();
        assert_eq!(
            (c.dead_hub_after, c.split_brain_window, c.default_after),
            (
                Duration::from_secs(180),
                Duration::from_secs(300),
                Duration::from_secs(30)
            )
        );
        let mut args = base();
        args.push("--poll-interval=2m");
        let c = Config::from_settings(&settings(&args)).unwrap();
        assert_eq!(c.dead_hub_after, Duration::from_secs(360));
        let mut args = base();
        args.extend([
            "--dead-hub-after=10s",
            "--split-brain-window=0s",
            "--default-after=0s",
        ]);
        let err = Config::from_settings(&settings(&args)).unwrap_err();
        assert_eq!(
            (err.flag.as_str(), err.env.as_str()),
            ("--dead-hub-after", "HUB_DEAD_HUB_AFTER")
        );
        assert!(
            err.to_string()
                .contains("must be longer than --poll-interval (10s)"),
            "{err}"
        );
        let mut args = base();
        args.extend([
            "--dead-hub-after=11s",
            "--split-brain-window=0s",
            "--default-after=0s",
        ]);
        let c = Config::from_settings(&settings(&args)).unwrap();
        assert_eq!(c.liveness().split_brain_window, jiff::SignedDuration::ZERO);
        let mut args = base();
        args.push("--split-brain-window=soon");
        let err = Config::from_settings(&settings(&args)).unwrap_err();
        assert_eq!(err.env, "HUB_SPLIT_BRAIN_WINDOW");
    }

    #[test]
    fn a_long_poll_interval_alone_lengthens_the_watched_poll_interval() {
        let mut args = base();
        args.push("--poll-interval=5m");
        let c = Config::from_settings(&settings(&args)).unwrap();
        assert_eq!(c.watched_poll_interval, Duration::from_secs(300));
    }

    #[test]
    fn a_short_poll_interval_alone_shortens_the_confirm_interval() {
        let mut args = base();
        args.push("--poll-interval=500ms");
        let c = Config::from_settings(&settings(&args)).unwrap();
        assert_eq!(c.confirm_interval, Duration::from_millis(500));
        assert_eq!(c.probe_timeout, Duration::from_millis(250));
        args.push("--probe-timeout=200ms");
        args.push("--confirm-interval=300ms");
        let c = Config::from_settings(&settings(&args)).unwrap();
        assert_eq!(c.confirm_interval, Duration::from_millis(300));
        args.push("--confirm-interval=2s");
        let e = Config::from_settings(&settings(&args)).unwrap_err();
        assert_eq!(e.flag, "--confirm-interval");
    }

    #[test]
    fn every_error_names_a_real_flag_and_its_env_var() {
        // exec's --wait lives on a subcommand; it is found there too.
        let e = exec_wait("0s").unwrap_err();
        assert_eq!((e.flag.as_str(), e.env.as_str()), ("--wait", "HUB_WAIT"));
    }
}
