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

/// One entry of `--hubs`: a hub beyond the primary and secondary, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubEntry {
    pub name: String,
    pub endpoint: String,
    pub token_file: Option<std::path::PathBuf>,
    pub ca_file: Option<std::path::PathBuf>,
    pub tls_server_name: Option<String>,
}

/// `--hubs`: entries separated by `;` or new lines, each
/// `NAME=URL[,token-file=PATH][,ca-file=PATH][,tls-server-name=NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HubList(pub Vec<HubEntry>);

/// At most this many characters in a hub's name: it is a metric label and a directory name.
pub const MAX_HUB_NAME: usize = 32;

pub const HUB_LIST_SYNTAX: &str =
    "NAME=https://HOST[:PORT][,token-file=PATH][,ca-file=PATH][,tls-server-name=NAME]";

impl FromStr for HubList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for (i, raw) in s
            .split([';', '\n'])
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .enumerate()
        {
            let at = |problem: String| format!("entry {} ({raw:?}): {problem}", i + 1);
            let mut fields = raw.split(',').map(str::trim);
            let Some((name, endpoint)) = fields.next().and_then(|f| f.split_once('=')) else {
                return Err(at(format!("expected {HUB_LIST_SYNTAX}")));
            };
            let name = name.trim();
            if !dns1123_label(name) || name.len() > MAX_HUB_NAME {
                return Err(at(format!("the name {name:?} is not a DNS-1123 label of at most {MAX_HUB_NAME} characters (a-z, 0-9 and '-', starting and ending alphanumeric)")));
            }
            let mut entry = HubEntry {
                name: name.to_string(),
                endpoint: endpoint.trim().to_string(),
                token_file: None,
                ca_file: None,
                tls_server_name: None,
            };
            for field in fields {
                let Some((key, value)) = field.split_once('=').map(|(k, v)| (k.trim(), v.trim()))
                else {
                    return Err(at(format!(
                        "expected KEY=VALUE after the URL, got {field:?}"
                    )));
                };
                if value.is_empty() {
                    return Err(at(format!("{key} is empty")));
                }
                match key {
                    "token-file" => entry.token_file = Some(value.into()),
                    "ca-file" => entry.ca_file = Some(value.into()),
                    "tls-server-name" => {
                        entry.tls_server_name = Some(value.parse::<ServerName>().map_err(at)?.0)
                    }
                    _ => {
                        return Err(at(format!(
                            "unknown key {key:?} (token-file, ca-file, tls-server-name)"
                        )))
                    }
                }
            }
            entries.push(entry);
        }
        Ok(Self(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_list_parses_every_field_and_names_the_entry_it_refuses() {
        let list: HubList = "c=https://10.1.80.13:6443;\n d=https://hub-d:6443 , token-file=/t/d , ca-file=/c/d.crt, tls-server-name=hub-d.internal\n"
            .parse()
            .unwrap();
        assert_eq!(list.0.len(), 2);
        assert_eq!(list.0[0].name, "c");
        assert_eq!(list.0[0].endpoint, "https://10.1.80.13:6443");
        assert_eq!(list.0[0].token_file, None);
        assert_eq!(list.0[1].token_file, Some("/t/d".into()));
        assert_eq!(list.0[1].ca_file, Some("/c/d.crt".into()));
        assert_eq!(list.0[1].tls_server_name.as_deref(), Some("hub-d.internal"));
        assert_eq!("".parse::<HubList>().unwrap(), HubList::default());
        for (bad, says) in [
            ("https://10.1.80.13:6443", "entry 1"),
            ("c=https://a:1;D=https://b:1", "the name \"D\""),
            ("c=https://a:1,ca=/x", "unknown key \"ca\""),
            ("c=https://a:1,token-file=", "token-file is empty"),
            (
                "c=https://a:1,tls-server-name=a/b",
                "DNS name or IP address",
            ),
            ("c=https://a:1,/x", "KEY=VALUE"),
        ] {
            let e = bad.parse::<HubList>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!("{}=https://a:1", "a".repeat(MAX_HUB_NAME + 1));
        assert!(long.parse::<HubList>().is_err());
    }

    #[test]
    fn dns_names_follow_kubernetes_rules() {
        assert!("kubeslice-acme".parse::<NamespaceName>().is_ok());
        assert!("a".repeat(64).parse::<NamespaceName>().is_err());
        assert!("-a".parse::<NamespaceName>().is_err());
        assert!("worker.east-1".parse::<ObjectName>().is_ok());
        assert!("worker..east".parse::<ObjectName>().is_err());
    }
}
