//! The restart side's settings: the mode, the signal, and the times that pace an action.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rustix::process::Signal;

use super::cli::Settings;
use super::values::{parse, ConfigError, Delay, Interval};
use crate::worker_probe::WorkerProbe;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartMode {
    /// Signal the worker's processes through a shared PID namespace.
    Signal,
    /// Fail /worker/livez so that kubelet restarts the worker.
    Liveness,
    /// Exit with `--restart-exit-code`, so that kubelet restarts every container of the pod
    /// (KEP-5532 `RestartAllContainers`, a rule on the native sidecar).
    RestartAll,
    /// Ask the exec wrapper (`exec --in-place`, the worker container's first process) to
    /// restart the worker as its child: no container restart, so no kubelet back-off.
    InPlace,
    /// Observe only: log and count what would be done.
    None,
}

impl RestartMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartMode::Signal => "signal",
            RestartMode::Liveness => "liveness",
            RestartMode::RestartAll => "restart-all",
            RestartMode::InPlace => "in-place",
            RestartMode::None => "none",
        }
    }
}

impl FromStr for RestartMode {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        match raw {
            "signal" => Ok(Self::Signal),
            "liveness" => Ok(Self::Liveness),
            "restart-all" => Ok(Self::RestartAll),
            "in-place" => Ok(Self::InPlace),
            "none" => Ok(Self::None),
            other => Err(format!(
                "expected signal, liveness, restart-all, in-place or none, got {other:?}"
            )),
        }
    }
}

/// The signal that asks the worker to exit, and its name as logs print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartSignal {
    pub signal: Signal,
    pub name: &'static str,
}

const SIGNALS: [(&str, i32, Signal); 7] = [
    ("SIGTERM", 15, Signal::TERM),
    ("SIGINT", 2, Signal::INT),
    ("SIGQUIT", 3, Signal::QUIT),
    ("SIGHUP", 1, Signal::HUP),
    ("SIGUSR1", 10, Signal::USR1),
    ("SIGUSR2", 12, Signal::USR2),
    ("SIGKILL", 9, Signal::KILL),
];

impl FromStr for RestartSignal {
    type Err = String;
    /// `SIGTERM`, `TERM`, `term` or `15`.
    fn from_str(raw: &str) -> Result<Self, String> {
        let upper = raw.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        SIGNALS
            .iter()
            .find(|(name, number, _)| name[3..] == *bare || number.to_string() == bare)
            .map(|&(name, _, signal)| Self { signal, name })
            .ok_or_else(|| {
                format!("expected one of SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGKILL; got {raw:?}")
            })
    }
}

impl fmt::Display for RestartSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The code the sidecar exits with in restart-all mode: one no other exit of a container means.
/// 1 is a failure, 2 a bad configuration, 101 a Rust panic, 126 and 127 are the shell's, and
/// 128 and above a death by signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCode(pub u8);

impl FromStr for ExitCode {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        match raw.trim().parse::<u8>() {
            Ok(code) if (3..=125).contains(&code) && code != 101 => Ok(Self(code)),
            _ => Err(format!(
                "expected an exit code from 3 to 125 other than 101 (1 and 2 are hub-follower's own failures, 101 a panic, 126 and above the shell's and signals'), got {raw:?}"
            )),
        }
    }
}

/// The base name of the worker's executable.
struct ProcessName(String);

impl FromStr for ProcessName {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.contains('/') {
            return Err(format!(
                "expected the base name of the worker's executable such as manager, got {raw:?}"
            ));
        }
        Ok(Self(raw.to_string()))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RestartConfig {
    pub mode: RestartMode,
    pub worker_process: String,
    pub signal: RestartSignal,
    pub kill_after: Duration,
    pub verify_timeout: Duration,
    pub liveness_fail_for: Duration,
    /// Liveness mode: the worker's own check, which `/worker/livez` answers for too.
    pub worker_probe: Option<WorkerProbeConfig>,
    pub jitter: Duration,
    pub cooldown: Duration,
    /// Restart-all mode: the code the sidecar exits with to have every container restarted.
    pub exit_code: ExitCode,
}

impl RestartConfig {
    pub fn from_settings(s: &Settings) -> Result<Self, ConfigError> {
        let interval = |id, raw: &str| parse::<Interval>(id, raw).map(|i| i.0);
        let delay = |id, raw: &str| parse::<Delay>(id, raw).map(|d| d.0);
        Ok(Self {
            worker_process: parse::<ProcessName>("worker_process", &s.worker_process)?.0,
            signal: parse("restart_signal", &s.restart_signal)?,
            mode: parse("restart_mode", &s.restart_mode)?,
            kill_after: interval("kill_after", &s.kill_after)?,
            verify_timeout: interval("restart_verify_timeout", &s.restart_verify_timeout)?,
            liveness_fail_for: interval("liveness_fail_for", &s.liveness_fail_for)?,
            worker_probe: WorkerProbeConfig::from_settings(s)?,
            jitter: delay("restart_jitter", &s.restart_jitter)?,
            cooldown: delay("restart_cooldown", &s.restart_cooldown)?,
            exit_code: parse("restart_exit_code", &s.restart_exit_code)?,
        })
    }
}

/// `--worker-probe` and how it is judged.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerProbeConfig {
    pub target: WorkerProbe,
    pub timeout: Duration,
    pub grace: Duration,
}

impl WorkerProbeConfig {
    fn from_settings(s: &Settings) -> Result<Option<Self>, ConfigError> {
        // Checked with or without a probe: a bad value is a mistake whether it is used or not.
        let timeout = parse::<Interval>("worker_probe_timeout", &s.worker_probe_timeout)?.0;
        let grace = parse::<Delay>("worker_probe_grace", &s.worker_probe_grace)?.0;
        if s.worker_probe.trim().is_empty() {
            return Ok(None);
        }
        let mode: RestartMode = parse("restart_mode", &s.restart_mode)?;
        if mode != RestartMode::Liveness {
            return Err(ConfigError::new(
                "worker_probe",
                format!(
                    "is used only with --restart-mode liveness (the mode is {}); unset it",
                    mode.as_str()
                ),
            ));
        }
        Ok(Some(Self {
            target: parse("worker_probe", &s.worker_probe)?,
            timeout,
            grace,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_by_name_short_name_or_number() {
        for raw in ["SIGTERM", "term", "15", "Sigterm"] {
            let s: RestartSignal = raw.parse().unwrap();
            assert_eq!((s.signal, s.name), (Signal::TERM, "SIGTERM"), "{raw}");
        }
        assert_eq!("9".parse::<RestartSignal>().unwrap().signal, Signal::KILL);
        assert!("SIGSEGV".parse::<RestartSignal>().is_err());
        assert!("".parse::<RestartSignal>().is_err());
    }

    #[test]
    fn exit_codes_that_mean_something_else_are_refused() {
        for good in ["3", "42", "100", "102", "125"] {
            assert!(good.parse::<ExitCode>().is_ok(), "{good}");
        }
        for bad in [
            "0", "1", "2", "101", "126", "127", "128", "143", "255", "256", "-1", "", "x",
        ] {
            let e = bad.parse::<ExitCode>().unwrap_err();
            assert!(e.contains("from 3 to 125"), "{bad}: {e}");
        }
    }
}
