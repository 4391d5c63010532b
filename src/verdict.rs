//! What one read of one hub amounts to.

use serde::{Deserialize, Serialize};

use crate::claim::Claim;

/// Which configured hub, by the name it is configured under: `primary` and `secondary` for the
/// hubs of `--hub-endpoint` and `--secondary-endpoint`, and the names given in `--hubs`. The
/// name is what metrics, `/status`, Events and the handoff files show. Configuration order,
/// which breaks ties, is kept by the configuration and the resolver, not here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HubId(&'static str);

impl HubId {
    pub const PRIMARY: HubId = HubId("primary");
    pub const SECONDARY: HubId = HubId("secondary");

    /// The hub configured under `name`. Each distinct name is kept for the life of the
    /// process: names come from the configuration, so there are a handful.
    pub fn named(name: &str) -> Self {
        match name {
            "primary" => Self::PRIMARY,
            "secondary" => Self::SECONDARY,
            _ => HubId(intern(
                &mut NAMES.lock().unwrap_or_else(|e| e.into_inner()),
                name,
            )),
        }
    }

    /// The hub a file on disk names (the handoff, the worker's acknowledgement). The exec
    /// wrapper has no hub configuration, so any well-formed name is taken; a name this process
    /// has not seen takes memory only while it holds fewer than `MAX_NAMES_FROM_DISK`, so a
    /// file rewritten with ever new names cannot grow the process.
    pub fn from_disk(name: &str) -> Option<Self> {
        match name {
            "primary" => Some(Self::PRIMARY),
            "secondary" => Some(Self::SECONDARY),
            _ => from_disk_in(&mut NAMES.lock().unwrap_or_else(|e| e.into_inner()), name),
        }
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

/// The names of hubs configured through `--hubs`, and those read from disk.
static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

fn intern(names: &mut Vec<&'static str>, name: &str) -> &'static str {
    match names.iter().find(|n| **n == name) {
        Some(n) => n,
        None => {
            let n: &'static str = Box::leak(name.to_string().into_boxed_str());
            names.push(n);
            n
        }
    }
}

fn from_disk_in(names: &mut Vec<&'static str>, name: &str) -> Option<HubId> {
    if let Some(n) = names.iter().find(|n| **n == name) {
        return Some(HubId(n));
    }
    let well_formed = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (well_formed && names.len() < MAX_NAMES_FROM_DISK).then(|| HubId(intern(names, name)))
}

/// How many names other than `primary` and `secondary` a process keeps at most when they come
/// from disk; configured names (at most 8) always count.
const MAX_NAMES_FROM_DISK: usize = 64;

impl std::fmt::Display for HubId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for HubId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for HubId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        HubId::from_disk(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected a hub's name (a-z, 0-9 and '-', at most 32 characters; at most {MAX_NAMES_FROM_DISK} names not configured), got {name:?}"
            ))
        })
    }
}

/// The result of reading one hub. Only `Claim` gives the hub a say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Claim(Claim),
    NoClaim,
    Error(ProbeError),
}

impl Verdict {
    pub fn kind(&self) -> &'static str {
        match self {
            Verdict::Claim(_) => "claim",
            Verdict::NoClaim => "no_claim",
            Verdict::Error(_) => "error",
        }
    }

    /// The hub answered (with or without a claim).
    pub fn answered(&self) -> bool {
        !matches!(self, Verdict::Error(_))
    }

    /// Whether the hub was heard at all: any HTTP answer (429, 503, 401 included), or a
    /// refused credential. Only a read that got no answer (a timeout, a refused or reset
    /// connection) is silence, for rule 10: a hub that sheds load or refuses us is alive.
    pub fn heard(&self) -> bool {
        !matches!(self, Verdict::Error(e) if e.reason.is_silence())
    }
}

/// Why a hub has no say this round. `detail` is for people; it never holds a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeError {
    pub reason: ErrorReason,
    pub detail: String,
}

impl ProbeError {
    pub fn new(reason: ErrorReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorReason {
    Timeout,
    Connect,
    Tls,
    Unauthorized,
    Forbidden,
    NotFound,
    Server,
    BadResponse,
    Credentials,
}

impl ErrorReason {
    pub const ALL: [ErrorReason; 9] = [
        ErrorReason::Timeout,
        ErrorReason::Connect,
        ErrorReason::Tls,
        ErrorReason::Unauthorized,
        ErrorReason::Forbidden,
        ErrorReason::NotFound,
        ErrorReason::Server,
        ErrorReason::BadResponse,
        ErrorReason::Credentials,
    ];

    /// No answer at all: the hub may be dead (rule 10). Every other reason is an answer.
    pub fn is_silence(self) -> bool {
        matches!(self, ErrorReason::Timeout | ErrorReason::Connect)
    }

    /// The hub refused us for who we are, or we could not say it: the worker, started with the
    /// same token and CA files, would be refused there too.
    pub fn is_credential(self) -> bool {
        matches!(
            self,
            ErrorReason::Unauthorized
                | ErrorReason::Forbidden
                | ErrorReason::Tls
                | ErrorReason::Credentials
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorReason::Timeout => "timeout",
            ErrorReason::Connect => "connect",
            ErrorReason::Tls => "tls",
            ErrorReason::Unauthorized => "unauthorized",
            ErrorReason::Forbidden => "forbidden",
            ErrorReason::NotFound => "not_found",
            ErrorReason::Server => "server",
            ErrorReason::BadResponse => "bad_response",
            ErrorReason::Credentials => "credentials",
        }
    }
}

impl std::fmt::Display for ErrorReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_is_its_name_on_disk_and_back() {
        let c = HubId::named("hub-c");
        assert_eq!(c, HubId::named("hub-c"));
        assert_ne!(c, HubId::PRIMARY);
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"hub-c\"");
        assert_eq!(serde_json::from_str::<HubId>("\"hub-c\"").unwrap(), c);
        assert_eq!(
            serde_json::from_str::<HubId>("\"secondary\"").unwrap(),
            HubId::SECONDARY
        );
        let e = serde_json::from_str::<HubId>("\"Not a name\"").unwrap_err();
        assert!(e.to_string().contains("expected a hub's name"), "{e}");
    }

    #[test]
    fn names_from_disk_take_memory_only_up_to_a_bound() {
        let mut names = Vec::new();
        for i in 0..MAX_NAMES_FROM_DISK {
            assert!(from_disk_in(&mut names, &format!("h{i}")).is_some());
        }
        assert_eq!(from_disk_in(&mut names, "one-more"), None);
        // A name already held is still read.
        assert_eq!(from_disk_in(&mut names, "h3"), Some(HubId(names[3])));
        assert_eq!(names.len(), MAX_NAMES_FROM_DISK);
        for bad in ["", "UPPER", "a/b", &"a".repeat(33)] {
            assert_eq!(from_disk_in(&mut Vec::new(), bad), None, "{bad:?}");
        }
    }
}
