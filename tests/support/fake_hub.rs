//! A fake hub: real HTTPS on 127.0.0.1 with a generated CA and an IP-SAN server certificate,
//! bearer-token checks, Kubernetes `Status` errors, a claim that can change while it runs, and
//! the faults a real API server (or the network in front of it) shows.
//!
//! HTTP is spoken by hand on purpose: the faults (a stalled body, a reset mid-request) are about
//! bytes on the wire, which a server library would not let us get wrong on purpose.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// A certificate authority for tests.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pub pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self { params, key, pem }
    }

    /// A server certificate for `san`, valid now (or expired, for the fault tests).
    pub fn server_cert(&self, san: IpAddr, expired: bool) -> (Vec<u8>, Vec<u8>) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![SanType::IpAddress(san)];
        params
            .distinguished_name
            .push(DnType::CommonName, "fake-hub");
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.der().to_vec(), key.serialize_der())
    }
}

fn acceptor(cert: (Vec<u8>, Vec<u8>)) -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.0)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.1)),
        )
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

/// What the hub does with the next request.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    None,
    /// Accept the TCP connection and never start TLS.
    HangAccept,
    /// Complete TLS, read the request, never answer.
    Hang,
    /// Send the headers and part of the body, then stall.
    StallBody,
    /// Reset the connection after reading the request.
    Reset,
    /// Answer with this status and a Kubernetes `Status` body.
    Status(u16),
    /// Answer with this status and `Retry-After: secs`.
    StatusRetryAfter(u16, u64),
    /// Answer 200 with a chunked body of this many bytes (no Content-Length).
    HugeChunked(usize),
    /// Answer 200 with exactly this body.
    Body(Vec<u8>),
    /// Present a certificate from another CA.
    WrongCa,
    /// Present an expired certificate from the right CA.
    Expired,
    /// Present a certificate for another IP address.
    WrongSan,
}

/// What the hub does with list and watch requests on the `clusters` collection.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchFault {
    None,
    /// Send the watch's headers, then nothing.
    Hang,
    /// Reset the connection when a watch starts.
    Reset,
    /// Answer list and watch requests with this status.
    Status(u16),
    /// Accept list and watch requests, and never answer them: not even headers.
    Silent,
    /// Answer lists; accept watch requests and never answer them.
    SilentWatch,
    /// Answer lists; answer watch requests with this status, as an API server answers a watch
    /// from a resourceVersion ahead of its etcd (restored from a backup): 504, `Too large
    /// resource version`.
    WatchStatus(u16),
}

#[derive(Debug)]
pub struct HubState {
    pub namespace: String,
    pub cluster: String,
    pub token: String,
    /// `status.activeController`, or None for a hub that publishes nothing.
    pub active_controller: Option<serde_json::Value>,
    pub fault: Fault,
    pub watch_fault: WatchFault,
    /// Reads of the Cluster object (what a round does).
    pub requests: u64,
    /// List and watch requests on the collection.
    pub watch_requests: u64,
    /// The query of the last watch request.
    pub last_watch_query: String,
    /// How often a watch that allows bookmarks gets one; none: never, like an API server
    /// without a watch cache.
    pub bookmark_every: Option<Duration>,
    /// Bookmarks sent, on all watches.
    pub bookmarks: u64,
    pub handshakes: u64,
    /// TCP connections accepted, TLS or not.
    pub accepts: u64,
    /// Bumped by every change of the claim, as an API server bumps resourceVersion.
    pub resource_version: u64,
    /// Whether the Cluster kind in the hub's OpenAPI document declares
    /// `status.activeController`.
    pub declares_claim: bool,
    changes: watch::Sender<u64>,
}

impl HubState {
    fn changed(&mut self) {
        self.resource_version += 1;
        self.changes.send_replace(self.resource_version);
    }

    fn cluster(&self) -> serde_json::Value {
        let mut cluster = serde_json::json!({
            "apiVersion": "controller.kubeslice.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": self.cluster, "namespace": self.namespace,
                         "resourceVersion": self.resource_version.to_string()},
            "spec": {},
            "status": {},
        });
        if let Some(ac) = &self.active_controller {
            cluster["status"]["activeController"] = ac.clone();
        }
        cluster
    }

    fn collection(&self) -> String {
        format!(
            "/apis/controller.kubeslice.io/v1alpha1/namespaces/{}/clusters",
            self.namespace
        )
    }
}

pub struct FakeHub {
    pub addr: SocketAddr,
    pub ca: Arc<Ca>,
    pub state: Arc<Mutex<HubState>>,
    stop: Option<watch::Sender<bool>>,
}

impl FakeHub {
    /// Starts a hub on a free loopback port with its own CA.
    pub async fn start(namespace: &str, cluster: &str, token: &str) -> Self {
        let state = Arc::new(Mutex::new(HubState {
            namespace: namespace.into(),
            cluster: cluster.into(),
            token: token.into(),
            active_controller: None,
            fault: Fault::None,
            watch_fault: WatchFault::None,
            requests: 0,
            watch_requests: 0,
            last_watch_query: String::new(),
            bookmark_every: None,
            bookmarks: 0,
            handshakes: 0,
            accepts: 0,
            resource_version: 1,
            declares_claim: true,
            changes: watch::channel(1).0,
        }));
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut hub = Self {
            addr,
            ca: Arc::new(Ca::new("fake-hub-ca")),
            state,
            stop: None,
        };
        hub.serve(listener);
        hub
    }

    pub fn endpoint(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Writes this hub's token and CA into `dir` (as a worker pod would have them mounted).
    pub fn write_credentials(&self, dir: &Path) -> (PathBuf, PathBuf) {
        std::fs::create_dir_all(dir).unwrap();
        let token = dir.join("token");
        let ca = dir.join("ca.crt");
        std::fs::write(&token, format!("{}\n", self.state.lock().unwrap().token)).unwrap();
        std::fs::write(&ca, &self.ca.pem).unwrap();
        (token, ca)
    }

    /// Publishes a claim naming `endpoint`, stamped now.
    pub fn claim(&self, endpoint: &str, identity: &str) {
        self.claim_at(endpoint, identity, &jiff::Timestamp::now().to_string());
    }

    pub fn claim_at(&self, endpoint: &str, identity: &str, last_updated: &str) {
        let mut s = self.state.lock().unwrap();
        s.active_controller = Some(serde_json::json!({
            "endpoint": endpoint,
            "identity": identity,
            "lastUpdated": last_updated,
        }));
        s.changed();
    }

    /// Publishes `status.activeController` exactly as given (an epoch, a bad field).
    pub fn publish(&self, active_controller: serde_json::Value) {
        let mut s = self.state.lock().unwrap();
        s.active_controller = Some(active_controller);
        s.changed();
    }

    pub fn clear_claim(&self) {
        let mut s = self.state.lock().unwrap();
        s.active_controller = None;
        s.changed();
    }

    pub fn set_watch_fault(&self, fault: WatchFault) {
        self.state.lock().unwrap().watch_fault = fault;
    }

    /// Sends a bookmark this often on each watch that allows them (none: stop sending them).
    pub fn set_bookmarks(&self, every: Option<Duration>) {
        self.state.lock().unwrap().bookmark_every = every;
    }

    pub fn bookmarks(&self) -> u64 {
        self.state.lock().unwrap().bookmarks
    }

    pub fn watch_requests(&self) -> u64 {
        self.state.lock().unwrap().watch_requests
    }

    pub fn set_fault(&self, fault: Fault) {
        self.state.lock().unwrap().fault = fault;
    }

    pub fn requests(&self) -> u64 {
        self.state.lock().unwrap().requests
    }

    pub fn handshakes(&self) -> u64 {
        self.state.lock().unwrap().handshakes
    }

    pub fn accepts(&self) -> u64 {
        self.state.lock().unwrap().accepts
    }

    /// Stops listening and drops every open connection: the hub is down.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
    }

    /// Listens again on the same address.
    pub async fn restart(&mut self) {
        self.stop();
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot rebind {}: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        let (tx, rx) = watch::channel(false);
        self.stop = Some(tx);
        let state = self.state.clone();
        let ip = self.addr.ip();
        let good = acceptor(self.ca.server_cert(ip, false));
        let expired = acceptor(self.ca.server_cert(ip, true));
        let wrong_san = acceptor(
            self.ca
                .server_cert(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), false),
        );
        let wrong_ca = acceptor(Ca::new("another-ca").server_cert(ip, false));
        tokio::spawn(async move {
            let mut stop = rx.clone();
            loop {
                let (tcp, _) = tokio::select! {
                    _ = stop.changed() => return,
                    accepted = listener.accept() => match accepted { Ok(c) => c, Err(_) => continue },
                };
                let fault = {
                    let mut s = state.lock().unwrap();
                    s.accepts += 1;
                    s.fault.clone()
                };
                let tls = match fault {
                    Fault::WrongCa => wrong_ca.clone(),
                    Fault::Expired => expired.clone(),
                    Fault::WrongSan => wrong_san.clone(),
                    _ => good.clone(),
                };
                let state = state.clone();
                let mut stop = rx.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stop.changed() => {}
                        _ = connection(tcp, tls, state) => {}
                    }
                });
            }
        });
    }
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn connection(tcp: TcpStream, tls: TlsAcceptor, state: Arc<Mutex<HubState>>) {
    if state.lock().unwrap().fault == Fault::HangAccept {
        let _hold = tcp;
        return std::future::pending::<()>().await;
    }
    let Ok(mut stream) = tls.accept(tcp).await else {
        return;
    };
    state.lock().unwrap().handshakes += 1;
    let mut buf = Vec::new();
    loop {
        let Some(head) = read_head(&mut stream, &mut buf).await else {
            return;
        };
        let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let collection = state.lock().unwrap().collection();
        if path.starts_with("/openapi/v3") {
            let document = openapi(&state.lock().unwrap(), path);
            if stream.write_all(&document).await.is_err() || stream.flush().await.is_err() {
                return;
            }
            continue;
        }
        if path == collection {
            if !collection_request(&mut stream, &state, &head, query).await {
                return;
            }
            continue;
        }
        let (response, fault) = {
            let mut s = state.lock().unwrap();
            s.requests += 1;
            (answer(&s, &head), s.fault.clone())
        };
        match fault {
            Fault::Hang | Fault::HangAccept => std::future::pending::<()>().await,
            Fault::Reset => {
                let (tcp, _) = stream.into_inner();
                let _ = tcp.set_zero_linger();
                return;
            }
            Fault::StallBody => {
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"status\":")
                    .await;
                let _ = stream.flush().await;
                std::future::pending::<()>().await;
            }
            _ => {
                if stream.write_all(&response).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

fn authorized(s: &HubState, head: &str) -> bool {
    head.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.eq_ignore_ascii_case("authorization") && v.trim() == format!("Bearer {}", s.token)
        })
    })
}

/// A list or a watch of the collection. Returns false when the connection is done with.
async fn collection_request<S>(
    stream: &mut S,
    state: &Arc<Mutex<HubState>>,
    head: &str,
    query: &str,
) -> bool
where
    S: AsyncWriteExt + Unpin,
{
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    };
    let is_watch = matches!(param("watch").as_deref(), Some("true" | "1"));
    let (fault, mut changes, early) = {
        let mut s = state.lock().unwrap();
        s.watch_requests += 1;
        if is_watch {
            s.last_watch_query = query.to_string();
        }
        let early = if !authorized(&s, head) {
            Some(status(401, "Unauthorized", "Unauthorized"))
        } else if let WatchFault::Status(code) = s.watch_fault {
            Some(status(
                code,
                "Forced",
                &format!("the fake hub answers {code}"),
            ))
        } else if let (WatchFault::WatchStatus(code), true) = (&s.watch_fault, is_watch) {
            // A long message: what a hub says is cut before it is shown or logged.
            let message = format!("Too large resource version: {}", "x".repeat(5000));
            Some(status(*code, "Timeout", &message))
        } else if !is_watch {
            let list = serde_json::json!({
                "apiVersion": "controller.kubeslice.io/v1alpha1",
                "kind": "ClusterList",
                "metadata": {"resourceVersion": s.resource_version.to_string()},
                "items": [s.cluster()],
            });
            Some(http(200, "application/json", list.to_string().as_bytes()))
        } else {
            None
        };
        (s.watch_fault.clone(), s.changes.subscribe(), early)
    };
    if fault == WatchFault::Silent || (fault == WatchFault::SilentWatch && is_watch) {
        std::future::pending::<()>().await;
    }
    if let Some(response) = early {
        return stream.write_all(&response).await.is_ok() && stream.flush().await.is_ok();
    }
    match fault {
        WatchFault::Reset => return false,
        WatchFault::Hang => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                .await;
            let _ = stream.flush().await;
            std::future::pending::<()>().await;
        }
        _ => {}
    }
    let since: u64 = param("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let timeout = Duration::from_secs(
        param("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    );
    let header =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if stream.write_all(header).await.is_err() {
        return false;
    }
    let allows_bookmarks = param("allowWatchBookmarks").as_deref() == Some("true");
    let mut sent = since;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut next_bookmark = tokio::time::Instant::now();
    loop {
        let (rv, object, every) = {
            let s = state.lock().unwrap();
            (s.resource_version, s.cluster(), s.bookmark_every)
        };
        let every = every.filter(|_| allows_bookmarks);
        let mut lines = Vec::new();
        if rv > sent {
            lines.push(serde_json::json!({"type": "MODIFIED", "object": object}));
            sent = rv;
        }
        if let Some(every) = every {
            if tokio::time::Instant::now() >= next_bookmark {
                lines.push(serde_json::json!({"type": "BOOKMARK", "object": {
                    "apiVersion": "controller.kubeslice.io/v1alpha1",
                    "kind": "Cluster",
                    "metadata": {"resourceVersion": rv.to_string()},
                }}));
                state.lock().unwrap().bookmarks += 1;
                next_bookmark = tokio::time::Instant::now() + every;
            }
        }
        for line in lines {
            let line = line.to_string() + "\n";
            let chunk = format!("{:x}\r\n{line}\r\n", line.len());
            if stream.write_all(chunk.as_bytes()).await.is_err() || stream.flush().await.is_err() {
                return false;
            }
        }
        let bookmark_due = async {
            match every {
                Some(_) => tokio::time::sleep_until(next_bookmark).await,
                // Checked again at least every 100 ms, for bookmarks turned on meanwhile.
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        tokio::select! {
            _ = &mut deadline => break,
            changed = changes.changed() => if changed.is_err() { break },
            () = bookmark_due => {}
        }
    }
    stream.write_all(b"0\r\n\r\n").await.is_ok() && stream.flush().await.is_ok()
}

/// Reads one request head (GETs carry no body). None when the peer is gone.
async fn read_head<S: AsyncReadExt + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            return Some(head);
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn answer(s: &HubState, head: &str) -> Vec<u8> {
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or_default();
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let authorized = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.eq_ignore_ascii_case("authorization") && v.trim() == format!("Bearer {}", s.token)
        })
    });
    if !authorized {
        return status(401, "Unauthorized", "Unauthorized");
    }
    match &s.fault {
        Fault::Status(code) => {
            return status(*code, "Forced", &format!("the fake hub answers {code}"))
        }
        Fault::StatusRetryAfter(code, secs) => {
            let mut r = status(*code, "TooManyRequests", "slow down");
            let at = r.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
            r.splice(at..at, format!("\r\nRetry-After: {secs}").into_bytes());
            return r;
        }
        Fault::HugeChunked(size) => {
            let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            let chunk = vec![b' '; 64 * 1024];
            let mut sent = 0;
            while sent < *size {
                out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                out.extend_from_slice(&chunk);
                out.extend_from_slice(b"\r\n");
                sent += chunk.len();
            }
            out.extend_from_slice(b"0\r\n\r\n");
            return out;
        }
        Fault::Body(body) => return http(200, "application/json", body),
        _ => {}
    }
    let expected = format!(
        "/apis/controller.kubeslice.io/v1alpha1/namespaces/{}/clusters/{}",
        s.namespace, s.cluster
    );
    if path != expected {
        return status(
            404,
            "NotFound",
            &format!("clusters.controller.kubeslice.io {path:?} not found"),
        );
    }
    http(200, "application/json", s.cluster().to_string().as_bytes())
}

/// The OpenAPI v3 root and the group's document, its Cluster kind declaring
/// `status.activeController` unless the hub is set not to (the CRD of worker-operator v1.6.4).
fn openapi(s: &HubState, path: &str) -> Vec<u8> {
    let group = "/openapi/v3/apis/controller.kubeslice.io/v1alpha1";
    let body = if path == "/openapi/v3" {
        serde_json::json!({"paths": {"apis/controller.kubeslice.io/v1alpha1": {
            "serverRelativeURL": format!("{group}?hash=F4KE")}}})
    } else if path == group {
        let mut status =
            serde_json::json!({"type": "object", "properties": {"namespaces": {"type": "array"}}});
        if s.declares_claim {
            status["properties"]["activeController"] = serde_json::json!({"type": "object"});
        }
        serde_json::json!({"components": {"schemas": {"io.kubeslice.controller.v1alpha1.Cluster": {
            "x-kubernetes-group-version-kind": [{"group": "controller.kubeslice.io", "kind": "Cluster", "version": "v1alpha1"}],
            "properties": {"spec": {"type": "object"}, "status": status}}}}})
    } else {
        return status(404, "NotFound", "the page could not be found");
    };
    http(200, "application/json", body.to_string().as_bytes())
}

fn status(code: u16, reason: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    http(code, "application/json", body.to_string().as_bytes())
}

fn http(code: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}
