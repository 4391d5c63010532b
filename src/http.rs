//! `/healthz` `/readyz` `/metrics` `/status` on `--listen`.
//!
//! The server is bounded so that a misbehaving client can't starve the probes kubelet depends
//! on: a cap on open connections, a deadline for request headers, a small header buffer.

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
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::metrics::Metrics;
use crate::restart::SharedView;
use crate::state::Shared;

/// Enough for kubelet, Prometheus and a few people at once many times over; past it, new
/// connections are closed at once instead of queueing. With the buffer cap below, this bounds
/// the server's memory at a few MiB whatever clients do.
const MAX_CONNECTIONS: usize = 256;
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection lives at most this long, kept alive or not, so that idle connections can't
/// hold slots forever (kubelet opens a new connection per probe anyway).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);
const MAX_HEADER_BYTES: usize = 8 * 1024;

#[derive(Clone)]
pub struct Handlers {
    pub shared: Arc<Shared>,
    pub metrics: Metrics,
    pub restart: SharedView,
    pub watches: crate::claim_watch::WatchViews,
}

impl Handlers {
    pub fn respond(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if method != Method::GET && method != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        match path {
            "/healthz" if self.shared.healthy(tokio::time::Instant::now()) => {
                text(StatusCode::OK, "ok\n")
            }
            "/healthz" => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the poll loop has not completed a round recently\n",
            ),
            "/readyz" if self.shared.ready() => text(StatusCode::OK, "ok\n"),
            "/readyz" => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "no decision published yet\n",
            ),
            "/metrics" => body("text/plain; version=0.0.4", self.metrics.render()),
            "/status" => {
                let mut status = self.shared.status();
                status.restart = Some(self.restart_view());
                status.watches = Some(
                    self.watches
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone(),
                );
                body(
                    "application/json",
                    serde_json::to_vec_pretty(&status).unwrap_or_default(),
                )
            }
            "/worker/livez" => {
                let view = self.restart_view();
                match view.gate(tokio::time::Instant::now()) {
                    Some(reason) => {
                        let mut r = body("text/plain", format!("{reason}\n").into_bytes());
                        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                        r
                    }
                    None => text(StatusCode::OK, "ok\n"),
                }
            }
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }
}

impl Handlers {
    fn restart_view(&self) -> crate::restart::RestartView {
        self.restart
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
