//! The `status.activeController` claim a hub publishes, and endpoint normalization.
//!
//! Pure: bytes in, a typed claim (or the reason it is unusable) out. Whether a claim counts is
//! the resolver's to say (an unconfigured endpoint, a date too far ahead).

use std::fmt;

use jiff::Timestamp;
use serde::Deserialize;

/// A hub endpoint in canonical form: `https://host:port[/path]`, scheme and host lowercased,
/// port explicit, no trailing slash. Two spellings of one API server compare equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("is empty")]
    Empty,
    #[error("is not an absolute URL: {0}")]
    NotAUrl(String),
    #[error("must use https:// (got {0}://)")]
    NotHttps(String),
    #[error("has no host")]
    NoHost,
    #[error("has a host that is neither a DNS name, an IPv4 address nor a bracketed IPv6 address: {0:?}")]
    BadHost(String),
    #[error("must not carry user info, a query or a fragment")]
    Extra,
    #[error("is {0} bytes long; at most {MAX_ENDPOINT_LEN} are taken")]
    TooLong(usize),
}

/// The longest endpoint taken from anywhere. A claim is what a writer of one hub's Cluster
/// status says, and everything the sidecar keeps of it (`/status`, logs, Events) is bounded.
pub const MAX_ENDPOINT_LEN: usize = 2048;

/// The longest identity a claim may carry; the identity goes into the handoff files, the logs
/// and Events, so it is held to a DNS-name-like length and a charset that needs no quoting.
pub const MAX_IDENTITY_LEN: usize = 253;

impl Endpoint {
    pub fn parse(raw: &str) -> Result<Self, EndpointError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(EndpointError::Empty);
        }
        if raw.len() > MAX_ENDPOINT_LEN {
            return Err(EndpointError::TooLong(raw.len()));
        }
        if raw.contains('#') || raw.contains('?') || raw.contains(char::is_whitespace) {
            return Err(EndpointError::Extra);
        }
        let uri: http::Uri = raw
            .parse()
            .map_err(|e: http::uri::InvalidUri| EndpointError::NotAUrl(e.to_string()))?;
        let scheme = uri
            .scheme_str()
            .ok_or_else(|| EndpointError::NotAUrl("no scheme".into()))?
            .to_ascii_lowercase();
        if scheme != "https" {
            return Err(EndpointError::NotHttps(scheme));
        }
        let authority = uri.authority().ok_or(EndpointError::NoHost)?;
        if authority.as_str().contains('@') {
            return Err(EndpointError::Extra);
        }
        let host = authority.host().to_ascii_lowercase();
        if host.is_empty() {
            return Err(EndpointError::NoHost);
        }
        // The URI parser lets odd hosts through (found by fuzzing: `m[::1]X`); an endpoint that
        // could not be dialled or compared reliably is no endpoint.
        let valid_host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'),
        };
        if !valid_host {
            return Err(EndpointError::BadHost(host));
        }
        // `port()` is None both for no port and for one that is not a u16: tell them apart.
        let port_text = &authority.as_str()[authority.host().len()..];
        let port = match (port_text, authority.port_u16()) {
            ("", _) => 443,
            (_, Some(p)) if p != 0 => p,
            (text, _) => return Err(EndpointError::NotAUrl(format!("bad port {text:?}"))),
        };
        let path = uri.path().trim_end_matches('/');
        Ok(Self(format!("https://{host}:{port}{path}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One hub's declaration of who leads. `epoch` and `last_updated` say how fresh it is (the
/// resolver compares them); two claims that differ only in them name the same candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub endpoint: Endpoint,
    pub identity: Option<String>,
    pub last_updated: Option<Timestamp>,
    /// Bumped by the controller on every promotion: a freshness that no clock can skew.
    pub epoch: Option<u64>,
}

/// Why an answer from a hub could not be read as a claim. Every variant means "no say".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("body is not a Cluster object: {0}")]
    Json(String),
    #[error("status.activeController.endpoint {0}")]
    Endpoint(EndpointError),
    #[error("status.activeController.lastUpdated is not an RFC 3339 time: {0}")]
    Timestamp(String),
    #[error("status.activeController.epoch must be a non-negative integer (got {0})")]
    Epoch(String),
    #[error("status.activeController.identity must be at most {MAX_IDENTITY_LEN} characters of A-Z a-z 0-9 and . _ : / @ + = - (got {0})")]
    Identity(String),
}

/// Checks an identity against [`MAX_IDENTITY_LEN`] and its charset; the error shows at most
/// its first 32 characters, escaped.
fn check_identity(raw: &str) -> Result<(), ClaimError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._:/@+=-".contains(c);
    if raw.len() <= MAX_IDENTITY_LEN && raw.chars().all(allowed) {
        return Ok(());
    }
    let head: String = raw.chars().take(32).collect();
    let more = if head.len() < raw.len() { "…" } else { "" };
    Err(ClaimError::Identity(format!(
        "{} bytes: {head:?}{more}",
        raw.len()
    )))
}

#[derive(Deserialize)]
struct ClusterDoc {
    #[serde(default)]
    metadata: Option<MetadataDoc>,
    #[serde(default)]
    status: Option<StatusDoc>,
}

#[derive(Deserialize)]
struct MetadataDoc {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// A resourceVersion longer than this, or with anything but ASCII letters, digits, `-` and
/// `_`, is not kept: it only ever serves to tell whether the object changed, and what a hub
/// says is bounded. etcd's are decimal numbers.
pub const MAX_RESOURCE_VERSION_LEN: usize = 64;

/// `raw`, if it is a resourceVersion worth keeping ([`MAX_RESOURCE_VERSION_LEN`]).
pub fn bounded_resource_version(raw: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    (!raw.is_empty() && raw.len() <= MAX_RESOURCE_VERSION_LEN && raw.chars().all(ok))
        .then(|| raw.to_string())
}

#[derive(Deserialize)]
struct StatusDoc {
    #[serde(default, rename = "activeController")]
    active_controller: Option<ActiveControllerDoc>,
}

#[derive(Deserialize)]
struct ActiveControllerDoc {
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default, alias = "activeIdentity")]
    identity: Option<String>,
    #[serde(default, rename = "lastUpdated")]
    last_updated: Option<String>,
    /// Read as any JSON value so that a wrong one is refused with its own reason, not as a
    /// body that is not a Cluster.
    #[serde(default)]
    epoch: Option<serde_json::Value>,
}

/// Reads the claim out of a `Cluster` object's JSON. `Ok(None)` is "answered, published nothing".
pub fn parse_cluster(body: &[u8]) -> Result<Option<Claim>, ClaimError> {
    parse_cluster_versioned(body).map(|(claim, _)| claim)
}

/// The claim, and the object's resourceVersion when it carries one worth keeping: the same
/// version on a later read means the object was not written in between.
pub fn parse_cluster_versioned(body: &[u8]) -> Result<(Option<Claim>, Option<String>), ClaimError> {
    let doc: ClusterDoc =
        serde_json::from_slice(body).map_err(|e| ClaimError::Json(e.to_string()))?;
    let version = doc
        .metadata
        .and_then(|m| m.resource_version)
        .and_then(|v| bounded_resource_version(&v));
    Ok((claim_of(doc.status)?, version))
}

fn claim_of(status: Option<StatusDoc>) -> Result<Option<Claim>, ClaimError> {
    let Some(ac) = status.and_then(|s| s.active_controller) else {
        return Ok(None);
    };
    let Some(raw_endpoint) = ac.endpoint.filter(|e| !e.trim().is_empty()) else {
        return Ok(None);
    };
    let endpoint = Endpoint::parse(&raw_endpoint).map_err(ClaimError::Endpoint)?;
    let last_updated = match ac.last_updated.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(raw) => {
            let at: Timestamp = raw
                .parse()
                .map_err(|e: jiff::Error| ClaimError::Timestamp(e.to_string()))?;
            Some(at)
        }
    };
    let epoch = match ac.epoch {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| ClaimError::Epoch(v.to_string()))?),
    };
    let identity = ac.identity.filter(|i| !i.is_empty());
    if let Some(i) = &identity {
        check_identity(i)?;
    }
    Ok(Some(Claim {
        endpoint,
        identity,
        last_updated,
        epoch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_version_is_kept_only_when_short_and_plain() {
        let body = |rv: &str| format!(r#"{{"metadata":{{"resourceVersion":{rv:?}}}}}"#);
        let version = |rv: &str| parse_cluster_versioned(body(rv).as_bytes()).unwrap().1;
        assert_eq!(version("12345"), Some("12345".to_string()));
        assert_eq!(version(""), None);
        assert_eq!(version(&"9".repeat(MAX_RESOURCE_VERSION_LEN + 1)), None);
        assert_eq!(version("1 2"), None);
        assert_eq!(parse_cluster_versioned(b"{}").unwrap(), (None, None));
    }

    fn ep(s: &str) -> Endpoint {
        Endpoint::parse(s).unwrap()
    }

    #[test]
    fn endpoints_normalize_trailing_slash_case_and_default_port() {
        assert_eq!(
            ep("https://10.1.80.11:6443/"),
            ep("https://10.1.80.11:6443")
        );
        assert_eq!(
            ep("HTTPS://Hub.Example.COM"),
            ep("https://hub.example.com:443")
        );
        assert_eq!(ep("https://hub/"), ep("https://hub:443"));
        assert_eq!(ep("https://[::1]:6443").as_str(), "https://[::1]:6443");
        assert_eq!(
            ep("https://lb.example/k8s/").as_str(),
            "https://lb.example:443/k8s"
        );
        assert_ne!(ep("https://10.1.80.11:6443"), ep("https://10.1.80.12:6443"));
    }

    #[test]
    fn endpoints_reject_hosts_that_are_no_hosts() {
        for raw in [
            "https://m[::1]X:6443",
            "https://[not-v6]:6443",
            "https://a_b:6443",
            "https://[::1:6443",
        ] {
            assert!(Endpoint::parse(raw).is_err(), "{raw}");
        }
        assert_eq!(
            Endpoint::parse("https://[::FFFF:1]:6443").unwrap().as_str(),
            "https://[::ffff:1]:6443"
        );
    }

    #[test]
    fn endpoints_reject_ports_out_of_range() {
        assert!(matches!(
            Endpoint::parse("https://hub:99999"),
            Err(EndpointError::NotAUrl(_))
        ));
        assert!(matches!(
            Endpoint::parse("https://hub:0"),
            Err(EndpointError::NotAUrl(_))
        ));
    }

    #[test]
    fn endpoints_reject_everything_but_plain_https_urls() {
        assert_eq!(Endpoint::parse(""), Err(EndpointError::Empty));
        assert_eq!(
            Endpoint::parse("http://10.0.0.1:6443"),
            Err(EndpointError::NotHttps("http".into()))
        );
        assert!(matches!(
            Endpoint::parse("10.0.0.1:6443"),
            Err(EndpointError::NotAUrl(_))
        ));
        assert!(matches!(
            Endpoint::parse("not a url"),
            Err(EndpointError::Extra)
        ));
        assert_eq!(
            Endpoint::parse("https://u:p@hub:6443"),
            Err(EndpointError::Extra)
        );
        assert_eq!(
            Endpoint::parse("https://hub:6443/?x=1"),
            Err(EndpointError::Extra)
        );
    }

    #[test]
    fn an_identity_too_long_or_with_other_characters_is_refused_and_not_echoed_whole() {
        let long = "x".repeat(MAX_IDENTITY_LEN + 1);
        for (identity, shown) in [
            (
                long.as_str(),
                "254 bytes: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"…",
            ),
            ("ctrl a", "6 bytes: \"ctrl a\""),
            ("ctrl'$(x)", "9 bytes: \"ctrl'$(x)\""),
        ] {
            let body = serde_json::json!({"status": {"activeController": {
                "endpoint": "https://10.0.0.1:6443", "identity": identity}}});
            let err = parse_cluster(body.to_string().as_bytes()).unwrap_err();
            assert_eq!(err, ClaimError::Identity(shown.into()), "{identity:?}");
        }
        let fits = "a".repeat(MAX_IDENTITY_LEN);
        for identity in [
            fits.as_str(),
            "ctrl-b",
            "kubeslice-controller@hub-b.example:1/2+=_",
        ] {
            let body = serde_json::json!({"status": {"activeController": {
                "endpoint": "https://10.0.0.1:6443", "identity": identity}}});
            let claim = parse_cluster(body.to_string().as_bytes()).unwrap().unwrap();
            assert_eq!(claim.identity.as_deref(), Some(identity));
        }
    }

    #[test]
    fn an_endpoint_longer_than_the_bound_is_refused() {
        let raw = format!("https://{}.example", "a".repeat(MAX_ENDPOINT_LEN));
        assert_eq!(
            Endpoint::parse(&raw),
            Err(EndpointError::TooLong(raw.len()))
        );
    }

    #[test]
    fn a_full_claim_parses_with_identity_alias_and_unknown_fields() {
        let body = br#"{"apiVersion":"controller.kubeslice.io/v1alpha1","kind":"Cluster",
            "status":{"activeController":{"endpoint":"https://10.1.80.12:6443/",
            "activeIdentity":"ctrl-b","lastUpdated":"2026-12-02T09:59:50Z","caBundle":"LS0t","x":1}}}"#;
        let claim = parse_cluster(body).unwrap().unwrap();
        assert_eq!(claim.endpoint, ep("https://10.1.80.12:6443"));
        assert_eq!(claim.identity.as_deref(), Some("ctrl-b"));
        assert_eq!(
            claim.last_updated,
            Some("2026-12-02T09:59:50Z".parse().unwrap())
        );
    }

    #[test]
    fn an_epoch_is_a_non_negative_integer_or_the_claim_is_refused() {
        let with = |epoch: &str| {
            let body = format!(
                r#"{{"status":{{"activeController":{{"endpoint":"https://a:1","epoch":{epoch}}}}}}}"#
            );
            parse_cluster(body.as_bytes())
        };
        assert_eq!(with("7").unwrap().unwrap().epoch, Some(7));
        assert_eq!(with("0").unwrap().unwrap().epoch, Some(0));
        assert_eq!(with("null").unwrap().unwrap().epoch, None);
        for bad in ["-1", "1.5", "\"7\"", "true", "[1]", "18446744073709551616"] {
            let e = with(bad).unwrap_err();
            assert!(matches!(e, ClaimError::Epoch(_)), "{bad}: {e}");
            assert!(
                e.to_string()
                    .starts_with("status.activeController.epoch must be a non-negative integer"),
                "{e}"
            );
        }
    }

    #[test]
    fn absent_status_or_endpoint_is_no_claim() {
        for body in [
            &br#"{"metadata":{"name":"w"}}"#[..],
            br#"{"status":{}}"#,
            br#"{"status":null}"#,
            br#"{"status":{"activeController":{}}}"#,
            br#"{"status":{"activeController":{"endpoint":"","identity":"x"}}}"#,
        ] {
            assert_eq!(
                parse_cluster(body),
                Ok(None),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn malformed_answers_are_errors_not_claims() {
        for body in [
            &b"not json"[..],
            br#"{"status":{"activeController":"https://10.0.0.1:6443"}}"#,
            br#"{"status":{"activeController":{"endpoint":42}}}"#,
            br#"{"status":{"activeController":{"endpoint":"ftp://x"}}}"#,
            br#"{"status":{"activeController":{"endpoint":"https://a:1","lastUpdated":"yesterday"}}}"#,
        ] {
            assert!(parse_cluster(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }
}
