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
    /// Exits 0 when some hub answered and no problem was found; 1 when none answered, or on a
    /// problem (each printed with its fix and a link to its troubleshooting section).
    Check {
        /// How `check` prints what it found: `text` or `json`.
        ///
        /// Lowercase. A bad value exits 2 with the command-line parser's message.
        #[arg(long, env = "HUB_OUTPUT", value_enum, default_value_t = OutputFormat::Text)]
        output: OutputFormat,
    },
    /// Wrap the worker: wait for a published decision, export it as HUB_HOST_ENDPOINT,
    /// HUB_TOKEN_FILE and HUB_CA_FILE, acknowledge it, then exec the command (with --in-place,
    /// run it as a child and restart it on each move).
    Exec {
        /// How long to wait for the first decision before giving up (exit 1).
        ///
        /// A duration longer than zero: how long to wait for a published decision before giving up
        /// with exit 1. A bad value exits 2.
        #[arg(long, env = "HUB_WAIT", default_value = "120s")]
        wait: String,
        /// Also export `KUBECONFIG` pointing at the handoff's `kubeconfig`.
        ///
        /// A flag. From the environment only the exact values `true` and `false` are accepted;
        /// anything else exits 2.
        ///
        /// Default: off.
        #[arg(long, env = "HUB_KUBECONFIG")]
        kubeconfig: bool,
        /// Stay as the container's first process and run the worker as a child, restarting it in
        /// place when the sidecar (`--restart-mode in-place`) asks: no container restart.
        ///
        /// A flag; see docs/configuration.md#exec. From the environment only the exact values
        /// `true` and `false` are accepted; anything else exits 2.
        ///
        /// Default: off.
        #[arg(long, env = "HUB_IN_PLACE")]
        in_place: bool,
        /// In place: how long a worker asked to stop has before SIGKILL (as kubelet's grace).
        ///
        /// Used with `--in-place`. A duration longer than zero: how long a worker asked to stop for
        /// a move has after SIGTERM before it and every process it started get SIGKILL. A bad value
        /// exits 2 naming `--stop-grace (HUB_STOP_GRACE)`. The chart sets it from the pod's
        /// `terminationGracePeriodSeconds`.
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
    /// URL of the primary hub's API server (the worker's own hub).
    ///
    /// Required; no default. An absolute `https://` URL with a host, such as
    /// `https://10.1.80.11:6443`; a port, if given, from 1 to 65535; no user info, query, fragment
    /// or whitespace. This exact string (trimmed) is what the worker is given.
    #[arg(long, env = "HUB_HOST_ENDPOINT", global = true)]
    pub hub_endpoint: Option<String>,
    /// Path of the token for the primary hub.
    ///
    /// Not checked at startup. Looked at every round (its inode, size and times, through symbolic
    /// links) and read again when it changed, or while it changed in the last 3 seconds; so a
    /// rotated token is used from the next round. Surrounding whitespace is trimmed. Missing or
    /// empty: the primary's probes fail with reason `credentials`.
    ///
    /// The decision hands the worker this path, never the file's contents, so the token must be
    /// mounted at the same path in the sidecar and the worker (docs/handoff.md).
    #[arg(
        long,
        env = "HUB_TOKEN_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-serviceaccount/token"
    )]
    pub hub_token_file: PathBuf,
    /// Path of the CA certificates for the primary hub.
    ///
    /// Not checked at startup. Looked at every round and read again when it changed, like
    /// `--hub-token-file`; a changed file takes effect from the next round. It must hold at least
    /// one PEM certificate, else the probes fail with reason `credentials`.
    ///
    /// The decision hands the worker this path, never the file's contents, so the file must be
    /// mounted at the same path in the sidecar and the worker (docs/handoff.md).
    #[arg(
        long,
        env = "HUB_CA_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-serviceaccount/ca.crt"
    )]
    pub hub_ca_file: PathBuf,
    /// Server name to verify the primary hub's certificate against, when it lacks the endpoint's
    /// host.
    ///
    /// Optional. A DNS name or an IP address; a value with `/`, `:` or a space that is not an IP
    /// address is refused. Empty means unset.
    ///
    /// Default: unset.
    #[arg(long, env = "HUB_TLS_SERVER_NAME", global = true)]
    pub hub_tls_server_name: Option<String>,
    /// URL of the secondary hub's API server. Unset: single-hub mode.
    ///
    /// Optional; unset or empty means single-hub mode (publish the primary, never poll nor watch).
    /// Same rules as `--hub-endpoint`, and it must name another hub than `--hub-endpoint` after
    /// normalization (case, default port 443, trailing `/`).
    ///
    /// Default: unset (single-hub mode).
    #[arg(long, env = "HUB_SECONDARY_HOST_ENDPOINT", global = true)]
    pub secondary_endpoint: Option<String>,
    /// Path of the token for the secondary hub.
    ///
    /// As `--hub-token-file`, for the secondary hub.
    #[arg(
        long,
        env = "HUB_SECONDARY_TOKEN_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/token"
    )]
    pub secondary_token_file: PathBuf,
    /// Path of the CA certificates for the secondary hub.
    ///
    /// As `--hub-ca-file`, for the secondary hub.
    #[arg(
        long,
        env = "HUB_SECONDARY_CA_FILE",
        global = true,
        default_value = "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/ca.crt"
    )]
    pub secondary_ca_file: PathBuf,
    /// Server name to verify the secondary hub's certificate against, when it lacks the endpoint's
    /// host.
    ///
    /// As `--hub-tls-server-name`, for the secondary hub.
    ///
    /// Default: unset.
    #[arg(long, env = "HUB_SECONDARY_TLS_SERVER_NAME", global = true)]
    pub secondary_tls_server_name: Option<String>,
    /// More hubs, after the primary and the secondary, in the order that breaks ties after them.
    ///
    /// Optional; see docs/configuration.md#more-than-two-hubs. Entries separated by `;` or new
    /// lines, each `NAME=https://HOST[:PORT]` followed by any of `,token-file=PATH`,
    /// `,ca-file=PATH`, `,tls-server-name=NAME`.
    ///
    /// NAME is a DNS-1123 label of at most 32 characters, not `primary` or `secondary` and not used
    /// twice; it is the hub's `hub` label in metrics, its key in `/status`, and the `hub` in the
    /// handoff. The endpoint follows `--hub-endpoint`'s rules and must differ from every other
    /// hub's. A token or CA file not given is
    /// `/var/run/secrets/kubernetes.io/hub-NAME-serviceaccount/token` (`ca.crt`).
    ///
    /// At most 8 hubs in all. With `--hubs` set and no `--secondary-endpoint`, the primary and the
    /// listed hubs are followed.
    ///
    /// Default: unset (no more hubs).
    #[arg(long, env = "HUB_HUBS", global = true)]
    pub hubs: Option<String>,
    /// Name of this worker's `Cluster` object on the hubs.
    ///
    /// Required; no default. A DNS-1123 subdomain: lowercase `a-z`, `0-9`, `-` and `.`, at most 253
    /// characters, each dot-separated part starting and ending alphanumeric and at most 63
    /// characters.
    #[arg(long, env = "CLUSTER_NAME", global = true)]
    pub cluster_name: Option<String>,
    /// The project namespace on the hubs that holds the `Cluster` object.
    ///
    /// Required; no default. A DNS-1123 label: at most 63 characters of `a-z`, `0-9` and `-`,
    /// starting and ending alphanumeric.
    #[arg(long, env = "HUB_PROJECT_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    /// How often the hubs are read while no switch is pending.
    ///
    /// A duration longer than zero. A round starts this long after the previous one started. With
    /// `--watch`, a claim change starts a round sooner; the next tick is then this long after that
    /// round.
    #[arg(long, env = "HUB_POLL_INTERVAL", global = true, default_value = "10s")]
    pub poll_interval: String,
    /// Interval of the confirming reads once a round has shown a new candidate.
    ///
    /// A duration longer than zero and not longer than `--poll-interval` (only a value set
    /// explicitly can be refused for that: `--poll-interval 500ms` alone confirms every 500ms). It
    /// may be shorter than `--probe-timeout`.
    ///
    /// While a switch is pending confirmation, the next round starts this long after the previous
    /// one started (at once if that round took longer), instead of `--poll-interval`; a claim
    /// change seen by a watch does not make it come sooner. So does the one round after a hub did
    /// not answer when it broke off a pending switch (once per candidate hub), or in a round a
    /// watch started (once), waiting for a hub's `Retry-After` if it gave one
    /// (docs/how-it-works.md).
    ///
    /// Default: `1s`, or `--poll-interval` when that is shorter.
    #[arg(long, env = "HUB_CONFIRM_INTERVAL", global = true)]
    pub confirm_interval: Option<String>,
    /// Watch each hub's `Cluster` object so that a claim change is read at once (polling stays as
    /// the safety net).
    ///
    /// `true` or `false`, lowercase (surrounding whitespace is trimmed); anything else exits 2
    /// naming `--watch (HUB_WATCH)`. A value is required: `--watch=false` or `--watch false`; a
    /// bare `--watch` is a usage error. Checked by the sidecar and `check` only; `exec` and
    /// `install` ignore it.
    ///
    /// With `true` and two hubs or more, this worker's `Cluster` object is also watched on each hub,
    /// and a claim change starts a round at once
    /// (docs/how-it-works.md#the-watch-looking-at-once-when-a-claim-changes); polling is relaxed to
    /// `--watched-poll-interval` while the watches vouch for every hub. Needs `list` and `watch` on
    /// `clusters` besides `get` (docs/operations.md#rbac-on-both-hubs; `check` says
    /// `watch_forbidden` where a hub refuses them). No watch in single-hub
    /// mode.
    #[arg(
        long,
        env = "HUB_WATCH",
        global = true,
        default_value = "true",
        value_name = "BOOL"
    )]
    pub watch: String,
    /// The `timeoutSeconds` of each watch request: the API server ends a watch after this long, and
    /// it is re-established.
    ///
    /// A duration from `1s` to `295s` (the API server's limit for a watch), checked even with
    /// `--watch=false`; sent in whole seconds (a fraction is dropped). The watch is re-established
    /// where it left off; that end is a heartbeat, as are events and bookmarks.
    ///
    /// A watch with no heartbeat for this long plus `--probe-timeout` is silent: it is restarted
    /// (`watch_restarts_total{reason="silent"}`), and reads go back to `--poll-interval`
    /// (docs/how-it-works.md#heartbeats-reading-less-while-the-watches-vouch-for-the-hubs). Each
    /// watch costs each hub one request per this interval.
    #[arg(long, env = "HUB_WATCH_TIMEOUT", global = true, default_value = "120s")]
    pub watch_timeout: String,
    /// Interval of the reads while every hub's watch vouches for its hub (`--poll-interval`
    /// otherwise).
    ///
    /// A duration not shorter than `--poll-interval` (only a value set explicitly can be refused
    /// for that). No effect with `--watch=false`.
    ///
    /// While every hub's watch has had a heartbeat within `--watch-timeout` plus `--probe-timeout`,
    /// and the last round was settled, the hubs are read this often instead of every
    /// `--poll-interval`; a claim change is still read at once (a confirmation span later while the
    /// watches vouch: docs/how-it-works.md#confirmations-the-watches-vouch-for), and a failed or
    /// silent watch brings `--poll-interval` back at once. Set it to `--poll-interval` to read at
    /// that pace whatever the watches say.
    ///
    /// Keep it within `--dead-hub-after`: reads relax only while the hub's watch vouches, which a
    /// dead hub's watch stops doing, but a hub whose watch keeps going while its reads fail (its
    /// `get` permission gone, say) is read only this often, so rule 10 can release up to the
    /// difference late.
    ///
    /// Default: `2m`, or `--poll-interval` when that is longer.
    #[arg(long, env = "HUB_WATCHED_POLL_INTERVAL", global = true)]
    pub watched_poll_interval: Option<String>,
    /// Hard deadline for one read of one hub: connect, TLS, headers and body.
    ///
    /// A duration longer than zero and shorter than `--poll-interval` (only a value set explicitly
    /// can be refused for that).
    ///
    /// Default: `3s`, or half of `--poll-interval` when that is shorter.
    #[arg(long, env = "HUB_PROBE_TIMEOUT", global = true)]
    pub probe_timeout: Option<String>,
    /// Consecutive rounds that must name the same new hub before the worker is moved.
    ///
    /// A whole number of at least 1.
    #[arg(
        long,
        env = "HUB_SWITCH_CONFIRMATIONS",
        global = true,
        default_value = "3"
    )]
    pub confirmations: String,
    /// How long the worker's hub may answer no read, or show no claim for itself, before another
    /// hub's claim may move the worker (rule 10).
    ///
    /// A duration longer than `--poll-interval` (one missed read is no dead hub).
    ///
    /// Rule 10 (docs/how-it-works.md#liveness-every-hold-ends): once the hub the worker is on has
    /// answered no read for this long (a timeout, a refused connection; an HTTP error is an answer;
    /// counted from its last answer, which a restarted sidecar reads from `silentSince` in
    /// `active-hub.json`, or else from the sidecar's first round), or has answered, its watch up,
    /// with no claim for itself, read or shown, for this long after its controller was seen
    /// republishing, a claim that another hub makes for itself moves the worker, confirmed like any
    /// switch, even if it is not fresher than the claim the decision rests on.
    ///
    /// It covers a promoted controller whose epoch counter restarted, or that publishes no epoch.
    /// `HubFollowerActiveHubUnreachable` fires before it at the chart's defaults.
    ///
    /// Default: `3m`, or three `--poll-interval` when that is longer.
    #[arg(long, env = "HUB_DEAD_HUB_AFTER", global = true)]
    pub dead_hub_after: Option<String>,
    /// In a split brain (two hubs each claiming themselves at the same epoch), the worker moves at
    /// most once per this window; `0s`: no limit.
    ///
    /// Rule 11. A duration; `0s` turns the limit off. It applies while two hubs each claim
    /// themselves at the same epoch, or both without one. The first move is never held (it cannot
    /// be told from a failover); a second within the window is, with reason `split_brain`, a
    /// `HubSplitBrain` Event and `kubeslice_worker_hub_split_brain` 1.
    #[arg(
        long,
        env = "HUB_SPLIT_BRAIN_WINDOW",
        global = true,
        default_value = "5m"
    )]
    pub split_brain_window: String,
    /// At startup with no hub naming the Active, how long to wait for a claim before the primary is
    /// published by default.
    ///
    /// A duration; `0s` takes the primary at once. Rule 12: at startup, while no hub names the
    /// Active, nothing is published for this long after the first round; the primary is published
    /// by default only then (at the first round after it). A claim that arrives first is followed
    /// directly, so a slow cold start never hands out the primary first. A resumed decision does
    /// not wait.
    ///
    /// Keep it well below the exec wrapper's `--wait` (`120s`).
    #[arg(long, env = "HUB_DEFAULT_AFTER", global = true, default_value = "30s")]
    pub default_after: String,
    /// The handoff directory, shared with the worker's container, where the decision is published.
    ///
    /// Not empty. At startup (of the sidecar and of `check`) the directory is created if missing
    /// and must take a write, else exit 2. For `exec`: where the decision is read and
    /// `worker-ack.json` written.
    #[arg(
        long,
        env = "HUB_HANDOFF_DIR",
        global = true,
        default_value = "/var/run/hub-follower"
    )]
    pub handoff_dir: PathBuf,
    /// A directory whose files `pin` and `drain` hold an operator's `HUB until RFC3339`.
    ///
    /// Read at every tick of the loop (every `--poll-interval`, also while reads are relaxed to
    /// `--watched-poll-interval`) and before every round; the sidecar also wakes when a pin or
    /// drain ends. The chart mounts the pod's `hub-follower.kubeslice.io/pin` and `/drain`
    /// annotations there through a downward-API volume.
    ///
    /// Not checked at startup: a missing directory or file is no value; an unreadable file keeps
    /// what is in effect. A bad value is refused visibly and is not a config error. Not read with
    /// one hub; `check` and `exec` ignore it. See docs/how-it-works.md#pin-and-drain and the
    /// maintenance runbook, docs/operations.md#maintenance-drain-a-hub-upgrade-it-bring-it-back.
    ///
    /// Default: empty: pin and drain are off.
    #[arg(long, env = "HUB_OVERRIDE_DIR", global = true)]
    pub override_dir: Option<String>,
    /// The address and port the sidecar's HTTP endpoints listen on.
    ///
    /// An IP address and port, such as `0.0.0.0:8095` or `[::]:8095`; a host name or a bare port is
    /// refused. A port already in use makes the sidecar exit 1 at startup.
    #[arg(
        long,
        env = "HUB_FOLLOWER_LISTEN",
        global = true,
        default_value = "0.0.0.0:8095"
    )]
    pub listen: String,
    /// Record Kubernetes Events on the worker's Pod (docs/operations.md#events-on-the-worker-pod).
    ///
    /// `true` or `false`. Checked by the sidecar and `check` only.
    ///
    /// Needs in-cluster credentials (the pod's service account token and
    /// `KUBERNETES_SERVICE_HOST`), `--pod-name` and `--pod-namespace`, and RBAC to create and patch
    /// `events` in the pod's namespace (the chart's `events.rbac.create`). Without them one line at
    /// startup says why, and nothing is attempted.
    #[arg(
        long,
        env = "HUB_EVENTS",
        global = true,
        default_value = "true",
        value_name = "BOOL"
    )]
    pub events: String,
    /// The Pod the Events are about.
    ///
    /// The chart sets it from the downward API (`metadata.name`).
    ///
    /// Default: unset.
    #[arg(long, env = "POD_NAME", global = true)]
    pub pod_name: Option<String>,
    /// The Pod's namespace, for the Events.
    ///
    /// The chart sets it from the downward API (`metadata.namespace`).
    ///
    /// Default: unset.
    #[arg(long, env = "POD_NAMESPACE", global = true)]
    pub pod_namespace: Option<String>,
    /// The Pod's UID, so that `kubectl describe pod` finds the Events.
    ///
    /// Optional (downward API `metadata.uid`), but `kubectl describe pod` lists only Events whose
    /// object carries the pod's UID.
    ///
    /// Default: unset.
    #[arg(long, env = "POD_UID", global = true)]
    pub pod_uid: Option<String>,
    /// Log format: `json` (for collectors) or `text` (for people).
    ///
    /// Lowercase (surrounding whitespace is trimmed). Logs go to stderr. Checked by the sidecar and
    /// `check` only; `exec` and `install` ignore it.
    #[arg(
        long,
        env = "HUB_FOLLOWER_LOG_FORMAT",
        global = true,
        default_value = "json"
    )]
    pub log_format: String,
    /// How the worker is restarted after a confirmed switch: `signal`, `liveness`, `none`,
    /// `restart-all` or `in-place`.
    ///
    /// Lowercase (surrounding whitespace is trimmed). Checked by the sidecar and `check` only;
    /// `exec` and `install` ignore it. What each mode does:
    /// docs/how-it-works.md#the-states-of-a-switch; what each needs:
    /// SECURITY.md#capabilities-by-restart-mode.
    ///
    /// `restart-all` needs Kubernetes 1.35+ with the alpha feature gates
    /// `RestartAllContainersOnContainerExits` and `NodeDeclaredFeatures`, and the sidecar's
    /// container restart rule, which the chart renders
    /// (docs/helm.md#restart-all-mode-the-kubelet-restarts-the-pods-containers).
    ///
    /// `in-place` needs the worker's container started with the exec wrapper and `--in-place`
    /// (`hub-follower exec --in-place`), on the same handoff directory; the wrapper restarts the
    /// worker as its child (docs/how-it-works.md#in-place-the-exec-wrapper-restarts-the-worker).
    #[arg(
        long,
        env = "HUB_RESTART_MODE",
        global = true,
        default_value = "signal"
    )]
    pub restart_mode: String,
    /// Base name of the worker's executable (signal mode).
    ///
    /// Checked in every mode, used in `signal` mode: the base name of the worker's executable (or
    /// of its `argv[0]`). Not empty and without `/`. With the exec wrapper, only the process its
    /// acknowledgement names, if it has this name, is the worker
    /// (docs/how-it-works.md#the-states-of-a-switch).
    #[arg(
        long,
        env = "HUB_WORKER_PROCESS",
        global = true,
        default_value = "manager"
    )]
    pub worker_process: String,
    /// Signal that asks the worker to exit (signal mode).
    ///
    /// Checked in every mode, used in `signal` mode. One of `SIGTERM`, `SIGINT`, `SIGQUIT`,
    /// `SIGHUP`, `SIGUSR1`, `SIGUSR2`, `SIGKILL`; case does not matter, the `SIG` prefix is
    /// optional, and the numbers `15`, `2`, `3`, `1`, `10`, `12`, `9` are accepted.
    #[arg(
        long,
        env = "HUB_RESTART_SIGNAL",
        global = true,
        default_value = "SIGTERM"
    )]
    pub restart_signal: String,
    /// Time the worker has to exit before it gets SIGKILL (signal mode).
    ///
    /// A duration longer than zero. Signal mode: SIGKILL for worker processes still alive this long
    /// after the signal. In `in-place` mode the wrapper's `--stop-grace` does this instead.
    #[arg(long, env = "HUB_KILL_AFTER", global = true, default_value = "30s")]
    pub kill_after: String,
    /// Time allowed after a restart for the new worker to show up, by a new process or its
    /// acknowledgement.
    ///
    /// A duration longer than zero. Signal mode: time allowed, after the signalled processes are
    /// gone, for a new worker process or the worker's acknowledgement; then the outcome is
    /// `unverified`. Restart-all mode: time the sidecar started after the exit allows for the
    /// restarted worker's acknowledgement. In-place mode: time from writing `move-request.json` to
    /// the wrapper's acknowledgement of the new worker.
    #[arg(
        long,
        env = "HUB_RESTART_VERIFY_TIMEOUT",
        global = true,
        default_value = "5m"
    )]
    pub restart_verify_timeout: String,
    /// Longest time `/worker/livez` fails after a switch without the worker's acknowledgement.
    ///
    /// A duration longer than zero, counted from an acted-on switch. It also bounds verification in
    /// `liveness` and `none` mode, and in `signal` mode after `not_found` or `permission_denied`.
    #[arg(
        long,
        env = "HUB_LIVENESS_FAIL_FOR",
        global = true,
        default_value = "90s"
    )]
    pub liveness_fail_for: String,
    /// Liveness mode: the worker's own livenessProbe target, checked on each `/worker/livez`
    /// request.
    ///
    /// `http://HOST:PORT/PATH` or `tcp://HOST:PORT`; only with `--restart-mode liveness`. With the
    /// gate open, each `/worker/livez` request runs it once (a GET answered 200–399, or an accepted
    /// connection) and answers 503 once it has failed every check for `--worker-probe-grace`. The
    /// chart sets it from the worker's livenessProbe.
    ///
    /// Empty (the default): none.
    #[arg(long, env = "HUB_WORKER_PROBE", global = true, default_value = "")]
    pub worker_probe: String,
    /// Liveness mode: how long one check of `--worker-probe` may take.
    ///
    /// A duration longer than zero.
    #[arg(
        long,
        env = "HUB_WORKER_PROBE_TIMEOUT",
        global = true,
        default_value = "1s"
    )]
    pub worker_probe_timeout: String,
    /// Liveness mode: how long `--worker-probe` must fail every check before `/worker/livez` fails.
    ///
    /// A duration; `0s` allowed.
    #[arg(
        long,
        env = "HUB_WORKER_PROBE_GRACE",
        global = true,
        default_value = "0s"
    )]
    pub worker_probe_grace: String,
    /// Upper bound of the random delay before acting on a switch.
    ///
    /// A duration; `0s` allowed.
    #[arg(long, env = "HUB_RESTART_JITTER", global = true, default_value = "5s")]
    pub restart_jitter: String,
    /// At most one restart per this window; switches inside it are coalesced.
    ///
    /// A duration; `0s` allowed. Switches inside the window are coalesced into one restart at its
    /// end.
    #[arg(
        long,
        env = "HUB_RESTART_COOLDOWN",
        global = true,
        default_value = "60s"
    )]
    pub restart_cooldown: String,
    /// Restart-all mode: the code the sidecar exits with on a confirmed switch; the pod's
    /// `restartPolicyRules` must name it.
    ///
    /// A whole number from 3 to 125, not 101 (surrounding whitespace is trimmed). Checked in every
    /// mode, used in `restart-all` mode: after a confirmed switch the sidecar publishes the
    /// decision and exits with this code, which the sidecar's `RestartAllContainers` rule matches,
    /// so the kubelet restarts every container of the pod in place; any other exit restarts the
    /// sidecar alone.
    ///
    /// 0, 1 and 2 are the sidecar's own exits, 101 a Rust panic, and 126 and above are the shell's
    /// and deaths by a signal: any of those would restart the whole pod. The chart sets it from
    /// `restart.exitCode`, in the rule too.
    #[arg(
        long,
        env = "HUB_RESTART_EXIT_CODE",
        global = true,
        default_value = "42"
    )]
    pub restart_exit_code: String,
}
