//! Sorting what went wrong with a read into the reasons metrics and `/status` use.

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use http::StatusCode;

use super::MAX_BODY;
use crate::verdict::{ErrorReason, ProbeError};

/// Sorts a transport failure into connect / tls / timeout by what caused it.
pub(super) fn classify(err: kube::Error) -> ProbeError {
    let mut reason = ErrorReason::Connect;
    visit_chain(&err, &mut |e| {
        if e.downcast_ref::<rustls::Error>().is_some() {
            reason = ErrorReason::Tls;
            return true;
        }
        if e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
        {
            reason = ErrorReason::Timeout;
        }
        false
    });
    ProbeError::new(reason, error_chain(&err))
}

/// Calls `f` on every error in the chain until it returns true, looking inside the boxes and
/// `io::Error`s that the connector layers wrap their causes in (`source()` does not always).
fn visit_chain(
    err: &(dyn StdError + 'static),
    f: &mut dyn FnMut(&(dyn StdError + 'static)) -> bool,
) -> bool {
    if f(err) {
        return true;
    }
    if let Some(inner) = err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
        if visit_chain(inner, f) {
            return true;
        }
    }
    err.source().is_some_and(|next| visit_chain(next, f))
}

pub(super) fn body_error(err: &(dyn StdError + Send + Sync + 'static)) -> ProbeError {
    if err
        .downcast_ref::<http_body_util::LengthLimitError>()
        .is_some()
    {
        ProbeError::new(
            ErrorReason::BadResponse,
            format!("answer is larger than {MAX_BODY} bytes"),
        )
    } else {
        ProbeError::new(
            ErrorReason::Connect,
            format!("answer broke off: {}", error_chain(err)),
        )
    }
}

/// A hub that is shedding load says for how long with `Retry-After` (seconds; the HTTP-date
/// form is not worth parsing here). Capped, so that a broken or hostile hub can't silence itself
/// for long: during a failover every read counts.
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

pub(super) fn retry_after(status: StatusCode, headers: &http::HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let secs: u64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// The reason for an HTTP status, with the message of a Kubernetes `Status` body if there is one.
pub(super) fn status_error(status: StatusCode, body: &[u8]) -> ProbeError {
    let reason = match status.as_u16() {
        401 => ErrorReason::Unauthorized,
        403 => ErrorReason::Forbidden,
        404 => ErrorReason::NotFound,
        _ => ErrorReason::Server,
    };
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(|m| truncate(m, 300))
        });
    let detail = match message {
        Some(m) => format!("HTTP {status}: {m}"),
        None => format!("HTTP {status}"),
    };
    ProbeError::new(reason, detail)
}

/// `s` cut to `max` characters, an ellipsis marking the cut: what a hub says is bounded before
/// it is logged or shown.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// `a: b: c` from an error and its sources, without repeating a message a wrapper already holds.
pub(super) fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let msg = e.to_string();
        if !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        source = e.source();
    }
    truncate(&out, 500)
}
