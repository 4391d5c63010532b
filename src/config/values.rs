//! The typed values settings parse into. Each type's `FromStr` is the one place its text is
//! read; its error says what was expected, and `ConfigError` adds which setting it was.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use clap::CommandFactory;

use super::cli::Cli;

/// A setting that could not be used: the flag and env var, as clap knows them, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {flag} ({env}): {problem}")]
pub struct ConfigError {
    pub flag: String,
    pub env: String,
    pub problem: String,
}

static COMMAND: LazyLock<clap::Command> = LazyLock::new(Cli::command);

impl ConfigError {
    /// `id` is the setting's field name in `Settings` (clap's argument id).
    pub fn new(id: &str, problem: impl Into<String>) -> Self {
        let arg = COMMAND
            .get_arguments()
            .chain(COMMAND.get_subcommands().flat_map(|c| c.get_arguments()))
            .find(|a| a.get_id() == id);
        debug_assert!(arg.is_some(), "no setting has the id {id:?}");
        let long = arg.and_then(|a| a.get_long()).unwrap_or(id);
        let env = arg.and_then(|a| a.get_env()).map_or_else(
            || "no env var".to_string(),
            |e| e.to_string_lossy().into_owned(),
        );
        Self {
            flag: format!("--{long}"),
            env,
            problem: problem.into(),
        }
    }
}

/// Parses `raw` (trimmed) as the setting `id`.
pub fn parse<T: FromStr<Err = String>>(id: &str, raw: &str) -> Result<T, ConfigError> {
    raw.trim()
        .parse()
        .map_err(|problem| ConfigError::new(id, problem))
}

/// Longer than any sensible setting, and short enough that adding it to a clock reading can't
/// overflow.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// A duration longer than zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Duration);

/// A duration that may be zero (a jitter, a cooldown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay(pub Duration);

fn duration(raw: &str, example: &str) -> Result<Duration, String> {
    match humantime::parse_duration(raw) {
        Ok(d) if d > MAX_DURATION => Err(format!("{raw:?} is longer than a year")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!(
            "expected a duration such as {example}, got {raw:?} ({e})"
        )),
    }
}

impl FromStr for Interval {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        match duration(raw, "10s or 1m30s")? {
            d if d.is_zero() => Err("must be longer than zero".into()),
            d => Ok(Self(d)),
        }
    }
}

impl FromStr for Delay {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        duration(raw, "5s or 0s").map(Self)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

/// A whole number of at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u32);

impl FromStr for Count {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        match raw.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(Self(n)),
            _ => Err(format!(
                "expected a whole number of at least 1, got {raw:?}"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toggle(pub bool);

impl FromStr for Toggle {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        match raw {
            "true" => Ok(Self(true)),
            "false" => Ok(Self(false)),
            other => Err(format!("expected true or false, got {other:?}")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen(pub SocketAddr);

impl FromStr for Listen {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        raw.parse()
            .map(Self)
            .map_err(|_| format!("expected ADDRESS:PORT such as 0.0.0.0:8095, got {raw:?}"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        match raw {
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            other => Err(format!("expected json or text, got {other:?}")),
        }
    }
}

/// A Kubernetes object name (DNS-1123 subdomain), such as a `Cluster`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName(pub String);

/// A Kubernetes namespace name (DNS-1123 label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceName(pub String);

impl FromStr for ObjectName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(dns1123_label);
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(format!("expected a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', at most 253 characters), got {s:?}"))
        }
    }
}

impl FromStr for NamespaceName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if dns1123_label(s) {
            Ok(Self(s.to_string()))
        } else {
            Err(format!("expected a DNS-1123 label (at most 63 characters of a-z, 0-9 and '-', starting and ending alphanumeric), got {s:?}"))
        }
    }
}

fn dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The server name a hub's certificate is verified against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerName(pub String);

impl FromStr for ServerName {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        if name.contains(['/', ':', ' ']) && name.parse::<std::net::IpAddr>().is_err() {
            Err(format!("expected a DNS name or IP address, got {name:?}"))
        } else {
            Ok(Self(name.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_follow_kubernetes_rules() {
        assert!("kubeslice-acme".parse::<NamespaceName>().is_ok());
        assert!("a".repeat(64).parse::<NamespaceName>().is_err());
        assert!("-a".parse::<NamespaceName>().is_err());
        assert!("worker.east-1".parse::<ObjectName>().is_ok());
        assert!("worker..east".parse::<ObjectName>().is_err());
    }
}
