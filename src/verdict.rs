//! What one read of one hub amounts to.

use serde::{Deserialize, Serialize};

use crate::claim::Claim;

/// Which configured hub. The order of the variants is the configuration order, which breaks ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HubId {
    Primary,
    Secondary,
}

impl HubId {
    pub fn as_str(self) -> &'static str {
        match self {
            HubId::Primary => "primary",
            HubId::Secondary => "secondary",
        }
    }
}

impl std::fmt::Display for HubId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
