//! What `check` tells an operator about a hub that refuses to be read: which hub, what is
//! wrong with the credential the worker would use there (missing, expired, refused, not
//! allowed, not trusted) or with the registration, and the command that fixes it.
//!
//! Pure: the caller reads the token file and hands in its text. Of a token, only its expiry
//! (the JWT `exp`) is ever kept; nothing else of it leaves this module.
//!
//! The names are the upstream controller's: for each registered worker cluster it makes a
//! ServiceAccount and a token Secret, both `kubeslice-worker-<cluster>`, in the project
//! namespace, and a Standby controller with the same project and cluster registered makes the
//! same pair on its own hub.

use base64::Engine;
use jiff::Timestamp;
use serde::Serialize;

use crate::config::HubConfig;
use crate::verdict::{ErrorReason, ProbeError};

/// What is wrong, in one word: the `problem` of `check --output=json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// The token or CA file cannot be read, or is empty.
    Missing,
    /// The hub refused the token, and the token's own expiry has passed.
    Expired,
    /// The hub refused the token: another hub's, or revoked.
    Refused,
    /// The hub took the token but does not let it read the `Cluster` object.
    Forbidden,
    /// The CA file does not verify the hub's certificate.
    Untrusted,
    /// The hub has no `Cluster` object for this worker in the namespace.
    NotRegistered,
}

impl Problem {
    pub const ALL: [Problem; 6] = [
        Problem::Missing,
        Problem::Expired,
        Problem::Refused,
        Problem::Forbidden,
        Problem::Untrusted,
        Problem::NotRegistered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Problem::Missing => "missing",
            Problem::Expired => "expired",
            Problem::Refused => "refused",
            Problem::Forbidden => "forbidden",
            Problem::Untrusted => "untrusted",
            Problem::NotRegistered => "not_registered",
        }
    }
}

/// Which hub, what is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Advice {
    pub problem: Problem,
    /// When the token says it expires (its JWT `exp`), when it says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_expires_at: Option<String>,
    pub fix: String,
}

/// The upstream name of the worker's ServiceAccount and token Secret on every hub.
pub fn secret_name(cluster: &str) -> String {
    format!("kubeslice-worker-{cluster}")
}

/// When a JWT says it expires: `exp` of its payload, read without verifying anything. `None`
/// for a token that is not a JWT or carries no `exp`.
pub fn token_expiry(token: &str) -> Option<Timestamp> {
    let mut parts = token.trim().split('.');
    let (_, payload, _, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else {
        return None;
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Timestamp::from_second(claims.get("exp")?.as_i64()?).ok()
}

/// The advice for `hub`'s failed read `error`, or `None` when the failure is not about the
/// credential or the registration (a timeout, a refused connection, a 5xx). `token` is the
/// text of the hub's token file, when it could be read.
pub fn advise(
    hub: &HubConfig,
    error: &ProbeError,
    cluster: &str,
    namespace: &str,
    token: Option<&str>,
    now: Timestamp,
) -> Option<Advice> {
    let name = hub.id;
    let secret = secret_name(cluster);
    let from_secret = format!(
        "kubectl --context <{name}-hub> -n {namespace} get secret {secret} -o jsonpath='{{.data.token}}' | base64 -d"
    );
    let expires = token.and_then(token_expiry);
    let (problem, fix) = match error.reason {
        ErrorReason::Credentials => (
            Problem::Missing,
            format!(
                "the {name} hub's token or CA file cannot be read ({}). Mount the {name} hub's Secret {secret} (namespace {namespace} on that hub) so that its token is {} and its ca.crt is {}. If the Secret does not exist, the {name} hub's controller has not registered this cluster: register it there too (the same Project and Cluster objects)",
                error.detail,
                hub.token_file.display(),
                hub.ca_file.display()
            ),
        ),
        ErrorReason::Unauthorized => match expires.filter(|at| *at <= now) {
            Some(at) => (
                Problem::Expired,
                format!(
                    "the token in {} expired at {at}. Put the token of the {name} hub's Secret {secret} there (a ServiceAccount token Secret does not expire; a token from `kubectl create token` does): {from_secret}",
                    hub.token_file.display()
                ),
            ),
            None => (
                Problem::Refused,
                format!(
                    "the {name} hub does not accept the token in {}: it is another hub's (each hub signs its own tokens), or it was revoked. Use the token of the Secret {secret} on the {name} hub itself: {from_secret}",
                    hub.token_file.display()
                ),
            ),
        },
        ErrorReason::Forbidden => (
            Problem::Forbidden,
            format!(
                "the {name} hub accepts the token but does not let it read clusters.controller.kubeslice.io in {namespace}. The controller grants that to the ServiceAccount {secret} when it registers the cluster; check with: kubectl --context <{name}-hub> auth can-i get clusters.controller.kubeslice.io -n {namespace} --as=system:serviceaccount:{namespace}:{secret}"
            ),
        ),
        ErrorReason::Tls => (
            Problem::Untrusted,
            format!(
                "the CA file {} does not verify the {name} hub's certificate ({}). Use the ca.crt of the {name} hub's Secret {secret} (namespace {namespace} on that hub); if the certificate does not name the host of {}, set that hub's TLS server name",
                hub.ca_file.display(),
                error.detail,
                hub.raw_endpoint
            ),
        ),
        ErrorReason::NotFound => (
            Problem::NotRegistered,
            format!(
                "the {name} hub has no Cluster {cluster} in {namespace}: its controller has not registered this cluster (register it there with the same Project and Cluster), or the namespace or cluster name is wrong"
            ),
        ),
        ErrorReason::Timeout
        | ErrorReason::Connect
        | ErrorReason::Server
        | ErrorReason::BadResponse => return None,
    };
    Some(Advice {
        problem,
        token_expires_at: expires.map(|at| at.to_string()),
        fix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Endpoint;
    use crate::verdict::HubId;

    const SECRET_TOKEN: &str = "not-a-jwt-s3cr3t";

    fn hub() -> HubConfig {
        HubConfig {
            id: HubId::SECONDARY,
            endpoint: Endpoint::parse("https://10.1.80.12:6443").unwrap(),
            raw_endpoint: "https://10.1.80.12:6443".into(),
            token_file: "/var/run/secrets/hub-2/token".into(),
            ca_file: "/var/run/secrets/hub-2/ca.crt".into(),
            tls_server_name: None,
        }
    }

    fn jwt(payload: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!(
            "{}.{}.{}",
            b64(r#"{"alg":"RS256"}"#),
            b64(payload),
            b64("signature")
        )
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn advice(reason: ErrorReason, token: Option<&str>) -> Option<Advice> {
        advise(
            &hub(),
            &ProbeError::new(reason, "the detail"),
            "worker-1",
            "kubeslice-acme",
            token,
            at(0),
        )
    }

    #[test]
    fn a_jwt_says_when_it_expires_and_anything_else_says_nothing() {
        let exp = at(-60).as_second();
        assert_eq!(
            token_expiry(&jwt(&format!(r#"{{"exp":{exp},"sub":"x"}}"#))),
            Some(at(-60))
        );
        for not in [
            SECRET_TOKEN,
            "a.b",
            "a.b.c.d",
            &jwt(r#"{"sub":"x"}"#),
            &jwt(r#"{"exp":"soon"}"#),
            &jwt("not json"),
            "x.%%%.y",
        ] {
            assert_eq!(token_expiry(not), None, "{not}");
        }
    }

    #[test]
    fn each_refusal_names_the_hub_the_secret_and_a_command() {
        let cases = [
            (
                ErrorReason::Credentials,
                Problem::Missing,
                "/var/run/secrets/hub-2/token",
            ),
            (ErrorReason::Unauthorized, Problem::Refused, "base64 -d"),
            (ErrorReason::Forbidden, Problem::Forbidden, "auth can-i get"),
            (
                ErrorReason::Tls,
                Problem::Untrusted,
                "/var/run/secrets/hub-2/ca.crt",
            ),
            (
                ErrorReason::NotFound,
                Problem::NotRegistered,
                "Cluster worker-1",
            ),
        ];
        for (reason, problem, words) in cases {
            let a = advice(reason, Some(SECRET_TOKEN)).unwrap();
            assert_eq!(a.problem, problem, "{reason}");
            assert!(a.fix.contains("secondary"), "{reason}: {}", a.fix);
            assert!(a.fix.contains(words), "{reason}: {}", a.fix);
            assert!(a.fix.contains("kubeslice-acme"), "{reason}: {}", a.fix);
            if problem != Problem::NotRegistered {
                assert!(
                    a.fix.contains("kubeslice-worker-worker-1"),
                    "{reason}: {}",
                    a.fix
                );
            }
            assert!(!a.fix.contains(SECRET_TOKEN), "{reason}: the token leaked");
        }
    }

    #[test]
    fn a_refused_token_past_its_expiry_is_said_to_have_expired() {
        let expired = jwt(&format!(r#"{{"exp":{}}}"#, at(-1).as_second()));
        let a = advice(ErrorReason::Unauthorized, Some(&expired)).unwrap();
        assert_eq!(a.problem, Problem::Expired);
        assert_eq!(a.token_expires_at, Some(at(-1).to_string()));
        assert!(a.fix.contains(&at(-1).to_string()), "{}", a.fix);
        assert!(!a.fix.contains(&expired));
        // Refused before its expiry: another hub's token, or revoked.
        let fresh = jwt(&format!(r#"{{"exp":{}}}"#, at(3600).as_second()));
        let a = advice(ErrorReason::Unauthorized, Some(&fresh)).unwrap();
        assert_eq!(a.problem, Problem::Refused);
        assert_eq!(a.token_expires_at, Some(at(3600).to_string()));
    }

    #[test]
    fn each_problem_is_said_in_json_as_in_text() {
        for p in [
            Problem::Missing,
            Problem::Expired,
            Problem::Refused,
            Problem::Forbidden,
            Problem::Untrusted,
            Problem::NotRegistered,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
    }

    #[test]
    fn silence_and_server_errors_are_not_about_the_credential() {
        for reason in [
            ErrorReason::Timeout,
            ErrorReason::Connect,
            ErrorReason::Server,
            ErrorReason::BadResponse,
        ] {
            assert_eq!(advice(reason, None), None, "{reason}");
        }
    }
}
