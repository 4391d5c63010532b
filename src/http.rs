//! `/healthz` `/readyz` `/metrics` `/status` on `--listen`.
//!
//! The server is bounded so that a misbehaving client can't starve the probes kubelet depends
//! on: a cap on open connections, a deadline for request headers, a small header buffer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::claim_watch::WatchView;
use crate::config::WorkerProbeConfig;
use crate::handoff;
use crate::metrics::Metrics;
use crate::restart::RestartView;
use crate::state::FollowerView;
use crate::verdict::HubId;
use crate::worker_probe::{self, FailureRun, WorkerHealth};

/// Enough for kubelet, Prometheus and a few people at once many times over; past it, new
/// connections are closed at once instead of queueing. With the buffer cap below, this bounds
/// the server's memory at a few MiB whatever clients do.
const MAX_CONNECTIONS: usize = 256;
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection lives at most this long, kept alive or not, so that idle connections can't
/// hold slots forever (kubelet opens a new connection per probe anyway).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);
const MAX_HEADER_BYTES: usize = 8 * 1024;

/// What the server answers from: each task's own snapshot, read, never written.
#[derive(Clone)]
pub struct Handlers {
    pub follower: watch::Receiver<FollowerView>,
    pub restart: watch::Receiver<RestartView>,
    /// Empty with `--watch=false`.
    pub watches: Vec<(HubId, watch::Receiver<WatchView>)>,
    /// Liveness mode with `--worker-probe`: the worker's own check behind `/worker/livez`.
    pub worker: Option<Arc<WorkerCheck>>,
    pub metrics: Metrics,
}

/// The worker's own liveness check and its failures in a row, shared by concurrent probes.
pub struct WorkerCheck {
    config: WorkerProbeConfig,
    handoff_dir: PathBuf,
    run: Mutex<FailureRun>,
}

impl WorkerCheck {
    pub fn new(config: WorkerProbeConfig, handoff_dir: PathBuf) -> Self {
        Self {
            config,
            handoff_dir,
            run: Mutex::new(FailureRun::default()),
        }
    }

    fn run(&self) -> std::sync::MutexGuard<'_, FailureRun> {
        // A panic elsewhere while holding the lock leaves a run that is still whole.
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks the worker once; `Some(why)` when `/worker/livez` must fail for it.
    async fn dead(&self, metrics: &Metrics) -> Option<String> {
        let c = &self.config;
        // The worker process the exec wrapper last acknowledged; none yet means the wrapper
        // still waits for the first decision and nothing listens: not the worker's failure.
        let dir = self.handoff_dir.clone();
        let ack = tokio::task::spawn_blocking(move || handoff::read_ack(&dir))
            .await
            .ok()
            .flatten()?;
        let result = worker_probe::check(&c.target, c.timeout).await;
        let now = tokio::time::Instant::now();
        let health = {
            let mut run = self.run();
            run.about(ack.pid);
            run.record(now, result.is_ok(), c.grace)
        };
        let error = result.err().unwrap_or_default();
        match health {
            WorkerHealth::Alive => None,
            WorkerHealth::Tolerated { failing_for } => {
                metrics
                    .worker_probe_failures
                    .with_label_values(&["tolerated"])
                    .inc();
                if failing_for.is_zero() {
                    tracing::warn!(%error, grace = ?c.grace, "the worker's own liveness check failed; /worker/livez fails if it keeps failing for the grace");
                }
                None
            }
            WorkerHealth::Dead { failing_for } => {
                metrics
                    .worker_probe_failures
                    .with_label_values(&["dead"])
                    .inc();
                let why = format!(
                    "the worker's own liveness check has failed for {} (grace {}): {error}",
                    humantime::format_duration(round_secs(failing_for)),
                    humantime::format_duration(c.grace),
                );
                tracing::warn!(%why, "/worker/livez fails for the worker's own health");
                Some(why)
            }
        }
    }
}

fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// `/status`: the three snapshots side by side.
#[derive(Serialize)]
struct StatusPage<'a> {
    #[serde(flatten)]
    follower: &'a FollowerView,
    restart: &'a RestartView,
    watches: BTreeMap<HubId, WatchView>,
}

impl Handlers {
    /// Answers one request; only `/worker/livez` with a worker check does IO.
    pub async fn answer(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if path != "/worker/livez" || (method != Method::GET && method != Method::HEAD) {
            return self.respond(method, path);
        }
        let gate_open = self
            .restart
            .borrow()
            .gate(tokio::time::Instant::now())
            .is_none();
        match (&self.worker, gate_open) {
            (Some(worker), false) => {
                // The gate answers for now; the worker after it is judged afresh.
                worker.run().reset();
                self.respond(method, path)
            }
            (Some(worker), true) => match worker.dead(&self.metrics).await {
                Some(why) => {
                    let mut r = body("text/plain", format!("{why}\n").into_bytes());
                    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    r
                }
                None => text(StatusCode::OK, "ok\n"),
            },
            _ => self.respond(method, path),
        }
    }

    pub fn respond(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if method != Method::GET && method != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let now = tokio::time::Instant::now();
        match path {
            "/healthz" if self.follower.borrow().healthy(now) => text(StatusCode::OK, "ok\n"),
            "/healthz" => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the poll loop has not completed a round recently\n",
            ),
            "/readyz" if self.follower.borrow().ready() => text(StatusCode::OK, "ok\n"),
            "/readyz" => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "no decision published yet\n",
            ),
            "/metrics" => body("text/plain; version=0.0.4", self.metrics.render()),
            "/status" => {
                let follower = self.follower.borrow().clone();
                let restart = self.restart.borrow().clone();
                let page = StatusPage {
                    follower: &follower,
                    restart: &restart,
                    watches: self
                        .watches
                        .iter()
                        .map(|(hub, view)| (*hub, view.borrow().clone()))
                        .collect(),
                };
                body(
                    "application/json",
                    serde_json::to_vec_pretty(&page).unwrap_or_default(),
                )
            }
            "/worker/livez" => match self.restart.borrow().gate(now) {
                Some(reason) => {
                    let mut r = body("text/plain", format!("{reason}\n").into_bytes());
                    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    r
                }
                None => text(StatusCode::OK, "ok\n"),
            },
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }
}

fn text(status: StatusCode, message: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(message.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    r
}

fn body(content_type: &'static str, bytes: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(bytes)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}

/// Binds first so that a port conflict is reported at startup, before anything else runs.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until `shutdown` turns true.
pub async fn serve(listener: TcpListener, handlers: Handlers, mut shutdown: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, _) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // At the cap: close at once rather than queue; kubelet retries its probes.
            drop(stream);
            continue;
        };
        let handlers = handlers.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let handlers = handlers.clone();
                async move {
                    let response = handlers.answer(req.method(), req.uri().path()).await;
                    Ok::<_, Infallible>(response)
                }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                Ok(Err(e)) => tracing::debug!(error = %e, "http connection ended with an error"),
                Err(_) => tracing::debug!("closed an http connection at the end of its lifetime"),
                Ok(Ok(())) => {}
            }
            drop(permit);
        });
    }
}
