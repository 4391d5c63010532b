//! The command line: subcommands, and the sidecar's settings as flags and env vars.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
        /// Stay as the container's first process and run the worker as a child, restarting it
        /// in place when the sidecar (--restart-mode in-place) asks: no container restart.
        #[arg(long, env = "HUB_IN_PLACE")]
        in_place: bool,
        /// In place: how long a worker asked to stop has before SIGKILL (as kubelet's grace).
        #[arg(long, env = "HUB_STOP_GRACE", default_value = "30s")]
        stop_grace: String,
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

/// The sidecar's settings as given. Strings stay strings here, so that `exec` and `install` in
/// the worker's container never trip over the sidecar's settings in a shared env block; each is
/// parsed once, by `Config::from_settings`, through the `FromStr` of its type, and a problem is
/// reported naming the flag and env var that clap knows the setting by.
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
    /// More hubs, after the primary and the secondary, in tie-break order: entries separated by
    /// `;` or new lines, each NAME=https://HOST[:PORT][,token-file=PATH][,ca-file=PATH]
    /// [,tls-server-name=NAME]. A token or CA file not given is
    /// /var/run/secrets/kubernetes.io/hub-NAME-serviceaccount/token (ca.crt).
    #[arg(long, env = "HUB_HUBS", global = true)]
    pub hubs: Option<String>,
    /// Name of this worker's Cluster object on the hubs.
    #[arg(long, env = "CLUSTER_NAME", global = true)]
    pub cluster_name: Option<String>,
    /// The project namespace on the hubs that holds the Cluster object.
    #[arg(long, env = "HUB_PROJECT_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    #[arg(long, env = "HUB_POLL_INTERVAL", global = true, default_value = "10s")]
    pub poll_interval: String,
    /// Interval of the confirming reads once a round has shown a new candidate.
    /// [default: 1s, or --poll-interval when that is shorter]
    #[arg(long, env = "HUB_CONFIRM_INTERVAL", global = true)]
    pub confirm_interval: Option<String>,
    /// Watch each hub's Cluster object so that a claim change is read at once (polling stays
    /// as the safety net).
    #[arg(
        long,
        env = "HUB_WATCH",
        global = true,
        default_value = "true",
        value_name = "BOOL"
    )]
    pub watch: String,
    /// `timeoutSeconds` of each watch request (at most 295s); a watch with no event, bookmark
    /// or end for this plus --probe-timeout is silent, and re-established.
    #[arg(long, env = "HUB_WATCH_TIMEOUT", global = true, default_value = "120s")]
    pub watch_timeout: String,
    /// Interval of the reads while every hub's watch vouches for its hub (--poll-interval
    /// otherwise). [default: 2m, or --poll-interval when that is longer]
    #[arg(long, env = "HUB_WATCHED_POLL_INTERVAL", global = true)]
    pub watched_poll_interval: Option<String>,
    /// Hard deadline for one read of one hub: connect, TLS, headers and body.
    /// [default: 3s, or half of --poll-interval when that is shorter]
    #[arg(long, env = "HUB_PROBE_TIMEOUT", global = true)]
    pub probe_timeout: Option<String>,
    /// Consecutive rounds that must name a new hub before the worker is moved.
    #[arg(
        long,
        env = "HUB_SWITCH_CONFIRMATIONS",
        global = true,
        default_value = "3"
    )]
    pub confirmations: String,
    /// How long the hub the worker is on may fail every read before a claim that another hub
    /// makes for itself moves the worker even if it is not fresher than the claim the decision
    /// rests on (a promoted controller whose epoch restarted). Longer than --poll-interval.
    /// [default: 3m, or three --poll-interval when that is longer]
    #[arg(long, env = "HUB_DEAD_HUB_AFTER", global = true)]
    pub dead_hub_after: Option<String>,
    /// In a split brain (two hubs each claiming themselves at the same epoch), the worker moves
    /// at most once per this window; 0s: no limit.
    #[arg(
        long,
        env = "HUB_SPLIT_BRAIN_WINDOW",
        global = true,
        default_value = "5m"
    )]
    pub split_brain_window: String,
    /// At startup with no hub naming the Active, how long to wait for a claim before the primary
    /// is published by default; 0s: at once. Keep it below the exec wrapper's --wait.
    #[arg(long, env = "HUB_DEFAULT_AFTER", global = true, default_value = "30s")]
    pub default_after: String,
    #[arg(
        long,
        env = "HUB_HANDOFF_DIR",
        global = true,
        default_value = "/var/run/hub-follower"
    )]
    pub handoff_dir: PathBuf,
    /// A directory whose files `pin` and `drain` hold an operator's "HUB until RFC3339" (the
    /// chart mounts the pod's hub-follower.kubeslice.io/pin and /drain annotations there);
    /// empty: pin and drain are off.
    #[arg(long, env = "HUB_OVERRIDE_DIR", global = true)]
    pub override_dir: Option<String>,
    #[arg(
        long,
        env = "HUB_FOLLOWER_LISTEN",
        global = true,
        default_value = "0.0.0.0:8095"
    )]
    pub listen: String,
    /// Record Kubernetes Events on the worker's Pod (needs in-cluster credentials and
    /// POD_NAME/POD_NAMESPACE).
    #[arg(
        long,
        env = "HUB_EVENTS",
        global = true,
        default_value = "true",
        value_name = "BOOL"
    )]
    pub events: String,
    /// The Pod the Events are about (the chart sets it from the downward API).
    #[arg(long, env = "POD_NAME", global = true)]
    pub pod_name: Option<String>,
    /// The Pod's namespace (the chart sets it from the downward API).
    #[arg(long, env = "POD_NAMESPACE", global = true)]
    pub pod_namespace: Option<String>,
    /// The Pod's UID, so that `kubectl describe pod` finds the Events (downward API).
    #[arg(long, env = "POD_UID", global = true)]
    pub pod_uid: Option<String>,
    /// Log format: json (for collectors) or text (for people).
    #[arg(
        long,
        env = "HUB_FOLLOWER_LOG_FORMAT",
        global = true,
        default_value = "json"
    )]
    pub log_format: String,
    /// How the worker is restarted after a confirmed switch: signal, liveness, restart-all or
    /// none.
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
    /// Liveness mode: the worker's own livenessProbe target (http://HOST:PORT/PATH or
    /// tcp://HOST:PORT), checked on each /worker/livez request. Empty: none.
    #[arg(long, env = "HUB_WORKER_PROBE", global = true, default_value = "")]
    pub worker_probe: String,
    /// Liveness mode: how long one check of --worker-probe may take.
    #[arg(
        long,
        env = "HUB_WORKER_PROBE_TIMEOUT",
        global = true,
        default_value = "1s"
    )]
    pub worker_probe_timeout: String,
    /// Liveness mode: how long --worker-probe must fail every check before /worker/livez fails.
    #[arg(
        long,
        env = "HUB_WORKER_PROBE_GRACE",
        global = true,
        default_value = "0s"
    )]
    pub worker_probe_grace: String,
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
    /// Restart-all mode: the code the sidecar exits with on a confirmed switch; the pod's
    /// `restartPolicyRules` must name it (3 to 125, not 101).
    #[arg(
        long,
        env = "HUB_RESTART_EXIT_CODE",
        global = true,
        default_value = "42"
    )]
    pub restart_exit_code: String,
}
