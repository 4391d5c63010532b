//! `/healthz` `/readyz` `/metrics` `/status` on `--listen`.
//!
//! The server is bounded so that a misbehaving client can't starve the probes kubelet depends
//! on: a cap on open connections, a deadline for request headers, a small header buffer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
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
use crate::metrics::Metrics;
use crate::restart::RestartView;
use crate::state::FollowerView;
use crate::verdict::HubId;

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
    pub metrics: Metrics,
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
                let response = handlers.respond(req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(response) }
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
