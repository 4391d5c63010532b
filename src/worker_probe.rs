//! The worker's own liveness check, which `/worker/livez` answers for in liveness mode.
//!
//! Liveness mode points the worker's `livenessProbe` at the sidecar, so kubelet no longer
//! checks the worker itself. The chart hands the worker's original probe over as
//! `--worker-probe` (an `http://` or `tcp://` target): on each kubelet probe the sidecar runs
//! that check once, the way kubelet would have (a TCP connect, or a GET whose status is
//! 200–399), and answers 503 once the worker has failed every check for `--worker-probe-grace`.
//! The grace keeps the worker's original tolerance although kubelet now probes more often.
//!
//! A run of failures belongs to one worker process, the one the exec wrapper's acknowledgement
//! names: a new worker starts with a clean slate, as kubelet's own prober does for a new
//! container. Until a worker has acknowledged (the wrapper still waits for the first decision,
//! so nothing listens yet) the check is not run.
//!
//! [`WorkerProbe`] (the target) and [`FailureRun`] (the tolerance) are pure; [`check`] is the
//! IO.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Uri};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Where the worker's own liveness check goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerProbe {
    /// A GET of `path` (with its query) on `host:port`; 200–399 is alive.
    Http {
        host: String,
        port: u16,
        path: String,
    },
    /// A TCP connect to `host:port`; an accepted connection is alive.
    Tcp { host: String, port: u16 },
}

impl WorkerProbe {
    fn address(&self) -> (&str, u16) {
        match self {
            Self::Http { host, port, .. } | Self::Tcp { host, port } => (host, *port),
        }
    }
}

impl fmt::Display for WorkerProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Http { host, port, path } => write!(f, "http://{}{path}", authority(host, *port)),
            Self::Tcp { host, port } => write!(f, "tcp://{}", authority(host, *port)),
        }
    }
}

fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

const EXPECTED: &str = "expected http://HOST:PORT/PATH or tcp://HOST:PORT, \
     the worker's own livenessProbe target such as http://127.0.0.1:8081/healthz";

impl FromStr for WorkerProbe {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let uri: Uri = raw
            .parse()
            .map_err(|e| format!("{EXPECTED}, got {raw:?} ({e})"))?;
        let (Some(scheme), Some(auth)) = (uri.scheme_str(), uri.authority()) else {
            return Err(format!("{EXPECTED}, got {raw:?}"));
        };
        if auth.as_str().contains('@') {
            return Err(format!("{EXPECTED}, got {raw:?} (no user info)"));
        }
        let host = auth.host().trim_start_matches('[').trim_end_matches(']');
        let Some(port) = auth.port_u16().filter(|p| *p != 0) else {
            return Err(format!("{EXPECTED}, got {raw:?} (the port is required)"));
        };
        match scheme {
            "http" => Ok(Self::Http {
                host: host.to_string(),
                port,
                path: uri
                    .path_and_query()
                    .map_or_else(|| "/".to_string(), |p| p.as_str().to_string()),
            }),
            "tcp" if (uri.path().is_empty() || uri.path() == "/") && uri.query().is_none() => Ok(Self::Tcp {
                host: host.to_string(),
                port,
            }),
            "tcp" => Err(format!("{EXPECTED}, got {raw:?} (a tcp target has no path)")),
            "https" => Err(format!(
                "{EXPECTED}, got {raw:?} (HTTPS probes are not handed over; use restart mode signal)"
            )),
            _ => Err(format!("{EXPECTED}, got {raw:?}")),
        }
    }
}

/// One check of the worker, as kubelet would run it, within `timeout`.
pub async fn check(probe: &WorkerProbe, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, check_unbounded(probe)).await {
        Ok(result) => result,
        Err(_) => Err(format!("{probe}: no answer within {timeout:?}")),
    }
}

async fn check_unbounded(probe: &WorkerProbe) -> Result<(), String> {
    let (host, port) = probe.address();
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("{probe}: {e}"))?;
    let WorkerProbe::Http { path, .. } = probe else {
        return Ok(());
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{probe}: {e}"))?;
    // Ended with the response, or when `check`'s timeout drops this future.
    let conn = AbortOnDrop(tokio::spawn(conn));
    let request = Request::get(path.as_str())
        .header(header::HOST, authority(host, port))
        .header(
            header::USER_AGENT,
            concat!("hub-follower/", env!("CARGO_PKG_VERSION")),
        )
        .header(header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("{probe}: {e}"))?;
    let sent = sender.send_request(request).await;
    drop(conn);
    let status = sent.map_err(|e| format!("{probe}: {e}"))?.status();
    if (200..400).contains(&status.as_u16()) {
        Ok(())
    } else {
        Err(format!("{probe}: answered {status}"))
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The worker's failures in a row, and whether they have lasted past the grace.
#[derive(Debug, Clone, Default)]
pub struct FailureRun {
    /// The worker process the run is about (its acknowledgement's PID).
    worker: Option<u32>,
    since: Option<Instant>,
}

/// What one check means for `/worker/livez`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerHealth {
    Alive,
    /// It failed, but every failure so far fits in the grace.
    Tolerated {
        failing_for: Duration,
    },
    /// It has failed every check for at least the grace.
    Dead {
        failing_for: Duration,
    },
}

impl FailureRun {
    /// Forgets the failures: the switch's gate answers for now, and the worker that comes
    /// after it is judged afresh.
    pub fn reset(&mut self) {
        self.since = None;
    }

    /// Judges `worker` from here on: another process than the run's starts a new run.
    pub fn about(&mut self, worker: u32) {
        if self.worker != Some(worker) {
            self.worker = Some(worker);
            self.since = None;
        }
    }

    /// Records one check's result at `now`. A success ends the run.
    pub fn record(&mut self, now: Instant, alive: bool, grace: Duration) -> WorkerHealth {
        if alive {
            self.since = None;
            return WorkerHealth::Alive;
        }
        let since = *self.since.get_or_insert(now);
        let failing_for = now.saturating_duration_since(since);
        if failing_for >= grace {
            WorkerHealth::Dead { failing_for }
        } else {
            WorkerHealth::Tolerated { failing_for }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_as_kubelet_would_probe_them() {
        let http: WorkerProbe = "http://127.0.0.1:8081/healthz".parse().unwrap();
        assert_eq!(
            http,
            WorkerProbe::Http {
                host: "127.0.0.1".into(),
                port: 8081,
                path: "/healthz".into()
            }
        );
        assert_eq!(http.to_string(), "http://127.0.0.1:8081/healthz");
        let query: WorkerProbe = "http://localhost:80/live?full=1".parse().unwrap();
        assert!(matches!(query, WorkerProbe::Http { ref path, .. } if path == "/live?full=1"));
        let bare: WorkerProbe = "http://localhost:8081".parse().unwrap();
        assert!(matches!(bare, WorkerProbe::Http { ref path, .. } if path == "/"));
        let v6: WorkerProbe = "tcp://[::1]:9443".parse().unwrap();
        assert_eq!(
            v6,
            WorkerProbe::Tcp {
                host: "::1".into(),
                port: 9443
            }
        );
        assert_eq!(v6.to_string(), "tcp://[::1]:9443");
    }

    #[test]
    fn bad_targets_say_what_was_expected() {
        for (raw, why) in [
            ("", "expected http://HOST:PORT/PATH"),
            ("127.0.0.1:8081", "expected http://HOST:PORT/PATH"),
            ("http://127.0.0.1/healthz", "the port is required"),
            ("http://127.0.0.1:0/healthz", "the port is required"),
            (
                "https://127.0.0.1:8443/healthz",
                "HTTPS probes are not handed over",
            ),
            ("tcp://127.0.0.1:8081/x", "a tcp target has no path"),
            ("grpc://127.0.0.1:8081", "expected http://HOST:PORT/PATH"),
            ("http://u:p@127.0.0.1:8081/", "no user info"),
        ] {
            let err = raw.parse::<WorkerProbe>().unwrap_err();
            assert!(err.contains(why), "{raw:?}: {err}");
        }
    }

    #[test]
    fn a_failure_counts_once_it_has_lasted_the_grace_and_a_success_ends_it() {
        let grace = Duration::from_secs(30);
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut run = FailureRun::default();
        assert_eq!(run.record(at(0), true, grace), WorkerHealth::Alive);
        assert_eq!(
            run.record(at(10), false, grace),
            WorkerHealth::Tolerated {
                failing_for: Duration::ZERO
            }
        );
        assert_eq!(
            run.record(at(39), false, grace),
            WorkerHealth::Tolerated {
                failing_for: Duration::from_secs(29)
            }
        );
        assert_eq!(
            run.record(at(40), false, grace),
            WorkerHealth::Dead {
                failing_for: Duration::from_secs(30)
            }
        );
        // One success in between starts the count again.
        assert_eq!(run.record(at(41), true, grace), WorkerHealth::Alive);
        assert!(matches!(
            run.record(at(42), false, grace),
            WorkerHealth::Tolerated { .. }
        ));
        // A new worker process, or a reset, starts afresh.
        run.record(at(50), false, grace);
        assert!(matches!(
            run.record(at(90), false, grace),
            WorkerHealth::Dead { .. }
        ));
        run.about(7);
        assert!(
            matches!(run.record(at(91), false, grace), WorkerHealth::Tolerated { failing_for } if failing_for.is_zero())
        );
        run.about(7);
        assert!(matches!(
            run.record(at(130), false, grace),
            WorkerHealth::Dead { .. }
        ));
        run.reset();
        assert!(matches!(
            run.record(at(131), false, grace),
            WorkerHealth::Tolerated { .. }
        ));
        // With no grace the first failure counts, as kubelet's own probe would.
        let mut strict = FailureRun::default();
        assert!(matches!(
            strict.record(at(0), false, Duration::ZERO),
            WorkerHealth::Dead { .. }
        ));
    }
}
