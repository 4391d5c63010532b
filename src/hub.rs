//! One client per hub. `probe()` reads this worker's `Cluster` object and turns whatever happens
//! (an answer, an error status, a hang, a bad certificate) into a `Verdict` under a hard deadline.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH};
use http::{HeaderValue, StatusCode};
use http_body_util::{BodyExt, Limited};
use kube::client::Body;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio::sync::watch;

mod access;
mod errors;
mod schema;

pub use access::Access;
pub(crate) use errors::truncate;
use errors::{body_error, classify, retry_after, status_error};
pub use schema::ClaimField;

use crate::claim::parse_cluster_versioned;
use crate::config::HubConfig;
use crate::verdict::{ErrorReason, HubId, ProbeError, Verdict};

/// Larger answers are refused: a `Cluster` object is a few KiB, and the limit bounds memory
/// whatever a hub (or something pretending to be one) sends.
pub const MAX_BODY: usize = 1024 * 1024;
const API_GROUP_PATH: &str = "/apis/controller.kubeslice.io/v1alpha1";

/// A verdict with the time it took.
#[derive(Debug, Clone)]
pub struct Probe {
    pub hub: HubId,
    pub verdict: Verdict,
    pub latency: Duration,
    /// The object's resourceVersion, when the hub answered with one: the watch's last one equal
    /// to it means the watch saw every write up to this read.
    pub resource_version: Option<String>,
}

/// The bearer token, shared by every request of a client (probes and the watch). Probes look at
/// the file each round and update it here when it changed.
type SharedToken = Arc<RwLock<Option<HeaderValue>>>;

pub struct HubClient {
    config: HubConfig,
    path: String,
    timeout: Duration,
    token: SharedToken,
    /// The client is built for one CA bundle and kept, so connections are reused across rounds;
    /// a rotated CA file builds a new one.
    client: Option<(Vec<u8>, kube::Client)>,
    /// The identity of each credential file as last read: a round re-reads a file only when
    /// it changed.
    token_stamp: Option<FileStamp>,
    ca_stamp: Option<FileStamp>,
    /// The current client, for the watch.
    published: watch::Sender<Option<kube::Client>>,
    /// Not before then: the hub answered 429 or 503 with `Retry-After`.
    backoff_until: Option<Instant>,
    /// The longest wait for any byte on a connection. The probes have their own, shorter
    /// deadline; this one bounds the watch's requests, whose start kube does not bound.
    read_bound: Option<Duration>,
}

/// How long past `--watch-timeout` a watch connection may stay silent: the API server ends a
/// watch at its `timeoutSeconds`, so a silence longer than that is a hung request.
pub const WATCH_SILENCE_MARGIN: Duration = Duration::from_secs(5);

impl HubClient {
    pub fn new(config: HubConfig, namespace: &str, cluster: &str, timeout: Duration) -> Self {
        Self {
            path: format!("{API_GROUP_PATH}/namespaces/{namespace}/clusters/{cluster}"),
            config,
            timeout,
            token: Arc::new(RwLock::new(None)),
            client: None,
            token_stamp: None,
            ca_stamp: None,
            published: watch::channel(None).0,
            backoff_until: None,
            read_bound: None,
        }
    }

    /// Bounds every wait for bytes on this hub's connections (see `read_bound`).
    pub fn with_read_bound(mut self, bound: Option<Duration>) -> Self {
        self.read_bound = bound;
        self
    }

    /// One client per configured hub, in configuration order.
    pub fn for_config(config: &crate::config::Config) -> Vec<Self> {
        config
            .hubs
            .iter()
            .map(|h| {
                Self::new(
                    h.clone(),
                    &config.namespace,
                    &config.cluster_name,
                    config.probe_timeout,
                )
                .with_read_bound(config.watch_timeout.map(|t| t + WATCH_SILENCE_MARGIN))
            })
            .collect()
    }

    /// Follows the client this hub is read with; a new one appears when the CA file changes.
    pub fn clients(&self) -> watch::Receiver<Option<kube::Client>> {
        self.published.subscribe()
    }

    pub fn id(&self) -> HubId {
        self.config.id
    }

    /// Until when this hub is not asked again, by its `Retry-After`; `None` when it may be.
    pub fn paused_until(&self) -> Option<Instant> {
        self.backoff_until.filter(|u| *u > Instant::now())
    }

    /// Reads the hub once. Never takes longer than the probe timeout, whatever the hub does.
    pub async fn probe(&mut self) -> Probe {
        let started = Instant::now();
        if let Some(until) = self.backoff_until.filter(|u| *u > started) {
            // The hub asked for a pause (429/503 with Retry-After): it has no say until then.
            return Probe {
                hub: self.config.id,
                verdict: Verdict::Error(ProbeError::new(
                    ErrorReason::Server,
                    format!(
                        "not asked again for {} (the hub's Retry-After)",
                        humantime::format_duration(Duration::from_secs(
                            (until - started).as_secs() + 1
                        ))
                    ),
                )),
                latency: Duration::ZERO,
                resource_version: None,
            };
        }
        let (verdict, resource_version) =
            match tokio::time::timeout(self.timeout, self.read()).await {
                Ok(Ok(read)) => read,
                Ok(Err(e)) => (Verdict::Error(e), None),
                Err(_) => (
                    Verdict::Error(ProbeError::new(
                        ErrorReason::Timeout,
                        format!(
                            "no complete answer within {}",
                            humantime::format_duration(self.timeout)
                        ),
                    )),
                    None,
                ),
            };
        Probe {
            hub: self.config.id,
            verdict,
            latency: started.elapsed(),
            resource_version,
        }
    }

    async fn read(&mut self) -> Result<(Verdict, Option<String>), ProbeError> {
        // Projected tokens rotate, and a CA may too: each round looks at both files, and reads
        // one again when it changed, so a rotation takes effect at the next round without a
        // restart.
        self.refresh_token()?;
        let client = self.client()?;
        let response = client
            .send(get_json_request(&self.path)?)
            .await
            .map_err(classify)?;
        let status = response.status();
        self.backoff_until = retry_after(status, response.headers()).map(|d| Instant::now() + d);
        let too_long = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|len| len > MAX_BODY as u64);
        if too_long {
            return Err(ProbeError::new(
                ErrorReason::BadResponse,
                format!("answer of status {status} is larger than {MAX_BODY} bytes"),
            ));
        }
        let body = ok_body(response, MAX_BODY).await?;
        match parse_cluster_versioned(&body) {
            Ok((Some(claim), version)) => Ok((Verdict::Claim(claim), version)),
            Ok((None, version)) => Ok((Verdict::NoClaim, version)),
            Err(e) => Err(ProbeError::new(ErrorReason::BadResponse, e.to_string())),
        }
    }

    /// Reads the token file when it is new or changed, into the header every request sends.
    fn refresh_token(&mut self) -> Result<(), ProbeError> {
        let path = &self.config.token_file;
        let stamp = FileStamp::of(path).map_err(unreadable("token", path))?;
        if self.token_stamp == Some(stamp) {
            return Ok(());
        }
        let token = read_token(path)?;
        let mut auth = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ProbeError::new(
                ErrorReason::Credentials,
                format!(
                    "token file {} holds characters not allowed in a header",
                    path.display()
                ),
            )
        })?;
        auth.set_sensitive(true);
        // The client's auth layer sends this on every request, the watch's included.
        *self.token.write().unwrap_or_else(|e| e.into_inner()) = Some(auth);
        self.token_stamp = stamp.settled(std::time::SystemTime::now());
        Ok(())
    }

    fn client(&mut self) -> Result<kube::Client, ProbeError> {
        let ca_file = &self.config.ca_file;
        let stamp = FileStamp::of(ca_file).map_err(unreadable("CA", ca_file))?;
        if let (Some((_, client)), true) = (&self.client, self.ca_stamp == Some(stamp)) {
            return Ok(client.clone());
        }
        let pem = std::fs::read(ca_file).map_err(unreadable("CA", ca_file))?;
        // Kept only once this content is in use: a CA file that cannot be used stays an error
        // every round, not only the first.
        let settled = stamp.settled(std::time::SystemTime::now());
        if let Some((cached, client)) = &self.client {
            if *cached == pem {
                self.ca_stamp = settled;
                return Ok(client.clone());
            }
        }
        let client = build_client(
            &self.config,
            &pem,
            (self.timeout, self.read_bound),
            self.token.clone(),
        )?;
        self.ca_stamp = settled;
        self.client = Some((pem, client.clone()));
        self.published.send_replace(Some(client.clone()));
        Ok(client)
    }
}

/// A GET of `path` that asks for JSON.
fn get_json_request(path: &str) -> Result<http::Request<Body>, ProbeError> {
    http::Request::get(path)
        .header(ACCEPT, "application/json")
        .body(Body::from(Vec::new()))
        .map_err(|e| ProbeError::new(ErrorReason::BadResponse, e.to_string()))
}

/// The answer's body, read up to `limit` bytes; any status but 200 OK is the error the
/// answer says it is.
async fn ok_body(
    response: http::Response<Body>,
    limit: usize,
) -> Result<hyper::body::Bytes, ProbeError> {
    let status = response.status();
    let body = Limited::new(response.into_body(), limit)
        .collect()
        .await
        .map_err(|e| body_error(e.as_ref()))?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(status_error(status, &body));
    }
    Ok(body)
}

/// What identifies one version of a file: a different file behind the path (a projected
/// volume's `..data` link swapped, a rename over it), or the same file written again (its
/// size, modification or change time).
///
/// File times come from a coarse clock (a few milliseconds), so a file written twice within
/// one tick, at the same size, keeps its stamp. A stamp is therefore trusted only once the
/// file has been left alone for `SETTLED`: until then every round reads the file again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Far longer than any file system's time granularity.
const SETTLED: Duration = Duration::from_secs(2);

impl FileStamp {
    /// The stamp to keep: none while the file may still change within its time granularity.
    fn settled(self, now: std::time::SystemTime) -> Option<Self> {
        let changed = u64::try_from(self.mtime.0.max(self.ctime.0)).unwrap_or(0);
        // Whole seconds, rounded down, plus one: a change in the last second counts as new.
        let changed =
            std::time::UNIX_EPOCH.checked_add(Duration::from_secs(changed.checked_add(1)?))?;
        let quiet = now.duration_since(changed).ok()?;
        (quiet >= SETTLED).then_some(self)
    }

    /// Follows symbolic links, as a read does.
    fn of(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

fn read_token(path: &Path) -> Result<String, ProbeError> {
    let raw = std::fs::read_to_string(path).map_err(unreadable("token", path))?;
    // The worker's Go client trims the token the same way; a trailing newline from
    // `kubectl create secret --from-file` must not make the header invalid.
    let token = raw.trim();
    if token.is_empty() {
        return Err(ProbeError::new(
            ErrorReason::Credentials,
            format!("token file {} is empty", path.display()),
        ));
    }
    Ok(token.to_string())
}

/// The error for a credential file (`what`: token or CA) that cannot be read.
fn unreadable<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl Fn(std::io::Error) -> ProbeError + 'a {
    move |e| {
        ProbeError::new(
            ErrorReason::Credentials,
            format!("cannot read {what} file {}: {e}", path.display()),
        )
    }
}

/// `timeouts`: the connect and write timeout, and the read bound.
fn build_client(
    config: &HubConfig,
    ca_pem: &[u8],
    (timeout, read_bound): (Duration, Option<Duration>),
    token: SharedToken,
) -> Result<kube::Client, ProbeError> {
    let credentials = |detail: String| ProbeError::new(ErrorReason::Credentials, detail);
    let certs: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(ca_pem)
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<Result<_, _>>()
        .map_err(|e| {
            credentials(format!(
                "CA file {} is not PEM: {e}",
                config.ca_file.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(credentials(format!(
            "CA file {} holds no certificate",
            config.ca_file.display()
        )));
    }
    let url: http::Uri = config
        .raw_endpoint
        .parse()
        .map_err(|e| credentials(format!("endpoint {}: {e}", config.raw_endpoint)))?;
    let mut kc = kube::Config::new(url);
    kc.root_cert = Some(certs);
    kc.tls_server_name = config.tls_server_name.clone();
    kc.connect_timeout = Some(timeout);
    kc.write_timeout = Some(timeout);
    kc.read_timeout = read_bound;
    // kube's retry layer would retry 429/5xx for far longer than a probe may take; the next
    // round is the retry.
    kc.default_retry = false;
    kc.accept_invalid_certs = false;
    // kube's own token handling re-reads the file only about once a minute and does not trim it;
    // this layer sets the header from the token the probes keep current.
    let auth = tower::util::MapRequestLayer::new(move |mut req: http::Request<Body>| {
        if let Some(value) = token.read().unwrap_or_else(|e| e.into_inner()).clone() {
            req.headers_mut().insert(AUTHORIZATION, value);
        }
        req
    });
    kube::client::ClientBuilder::try_from(kc)
        .map(|b| b.with_layer(&auth).build())
        .map_err(|e| {
            ProbeError::new(
                ErrorReason::Tls,
                format!(
                    "cannot set up TLS with CA file {}: {e}",
                    config.ca_file.display()
                ),
            )
        })
}

/// Probes all hubs at once. A hub that hangs costs its own timeout and never delays the others.
pub async fn probe_all(hubs: &mut [HubClient]) -> Vec<Probe> {
    futures_util::future::join_all(hubs.iter_mut().map(HubClient::probe)).await
}

#[cfg(test)]
mod tests {
    use super::errors::MAX_RETRY_AFTER;
    use super::*;

    #[test]
    fn statuses_map_to_reasons_with_the_status_message() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"clusters.controller.kubeslice.io \"w\" is forbidden: User \"system:serviceaccount:x\" cannot get resource","reason":"Forbidden","code":403}"#;
        let e = status_error(StatusCode::FORBIDDEN, body);
        assert_eq!(e.reason, ErrorReason::Forbidden);
        assert!(e.detail.contains("cannot get resource"), "{}", e.detail);
        assert_eq!(
            status_error(StatusCode::UNAUTHORIZED, b"").reason,
            ErrorReason::Unauthorized
        );
        assert_eq!(
            status_error(StatusCode::NOT_FOUND, b"").reason,
            ErrorReason::NotFound
        );
        assert_eq!(
            status_error(StatusCode::TOO_MANY_REQUESTS, b"").reason,
            ErrorReason::Server
        );
        assert_eq!(
            status_error(StatusCode::BAD_GATEWAY, b"<html>").detail,
            "HTTP 502 Bad Gateway"
        );
    }

    #[test]
    fn retry_after_is_honoured_only_for_load_shedding_and_capped() {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(
            retry_after(StatusCode::TOO_MANY_REQUESTS, &h),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(StatusCode::SERVICE_UNAVAILABLE, &h),
            Some(Duration::from_secs(7))
        );
        assert_eq!(retry_after(StatusCode::INTERNAL_SERVER_ERROR, &h), None);
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("86400"));
        assert_eq!(
            retry_after(StatusCode::TOO_MANY_REQUESTS, &h),
            Some(MAX_RETRY_AFTER)
        );
        h.insert(
            http::header::RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(StatusCode::TOO_MANY_REQUESTS, &h), None);
    }

    #[test]
    fn a_file_s_stamp_changes_with_every_way_a_credential_is_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "one").unwrap();
        let first = FileStamp::of(&path).unwrap();
        assert_eq!(FileStamp::of(&path).unwrap(), first, "an unchanged file");
        // Written again in place. Within one tick of the file system's clock its times may
        // not move, so this test only asserts what the size shows; `settled` covers the rest.
        std::fs::write(&path, "twenty").unwrap();
        let rewritten = FileStamp::of(&path).unwrap();
        assert_ne!(rewritten, first);
        // Renamed over, as an atomic writer does.
        let tmp = dir.path().join("token.tmp");
        std::fs::write(&tmp, "two").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let renamed = FileStamp::of(&path).unwrap();
        assert_ne!(renamed, rewritten);
        // A projected volume: `token` -> `..data/token`, `..data` -> a dated directory that
        // kubelet swaps for a new one.
        for (i, token) in ["three", "four"].iter().enumerate() {
            let data = dir.path().join(format!("..2026_12_03_{i}"));
            std::fs::create_dir(&data).unwrap();
            std::fs::write(data.join("token"), token).unwrap();
            let link = dir.path().join("..data_tmp");
            std::os::unix::fs::symlink(&data, &link).unwrap();
            std::fs::rename(&link, dir.path().join("..data")).unwrap();
        }
        let projected = dir.path().join("projected");
        std::os::unix::fs::symlink(dir.path().join("..data/token"), &projected).unwrap();
        let now = FileStamp::of(&projected).unwrap();
        assert_eq!(std::fs::read_to_string(&projected).unwrap(), "four");
        let data = dir.path().join("..2026_12_03_9");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("token"), "five").unwrap();
        let link = dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        std::fs::rename(&link, dir.path().join("..data")).unwrap();
        assert_ne!(FileStamp::of(&projected).unwrap(), now);
    }

    #[test]
    fn a_stamp_is_kept_only_for_a_file_left_alone_for_a_while() {
        let stamp = |secs: i64| FileStamp {
            dev: 1,
            ino: 2,
            len: 3,
            mtime: (secs, 999_999_999),
            ctime: (secs, 0),
        };
        let at = |secs: u64| std::time::UNIX_EPOCH + Duration::from_secs(secs);
        // Changed at 100.999: new until 103 (one second for the rounding, two to settle).
        assert_eq!(stamp(100).settled(at(101)), None);
        assert_eq!(stamp(100).settled(at(102)), None);
        assert_eq!(stamp(100).settled(at(103)), Some(stamp(100)));
        // A change time in the future (a skewed clock) is never trusted.
        assert_eq!(stamp(200).settled(at(103)), None);
        // The later of mtime and ctime counts (a chmod or a hard link moves only ctime).
        let chmodded = FileStamp {
            ctime: (150, 0),
            ..stamp(100)
        };
        assert_eq!(chmodded.settled(at(120)), None);
    }

    #[test]
    fn tokens_are_trimmed_and_empty_ones_are_credential_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc.def \n").unwrap();
        assert_eq!(read_token(&path).unwrap(), "abc.def");
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(
            read_token(&path).unwrap_err().reason,
            ErrorReason::Credentials
        );
        let missing = read_token(&dir.path().join("nope")).unwrap_err();
        assert_eq!(missing.reason, ErrorReason::Credentials);
        assert!(missing.detail.contains("nope"));
    }
}
