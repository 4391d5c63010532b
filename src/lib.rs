//! hub-follower: lets a KubeSlice worker follow its controller through an Active/Standby failover.
//!
//! The rule is in [`resolver`]; everything else feeds it (`hub`, `claim`) or carries its decision
//! out (`handoff`, `http`, `metrics`). [`run`] wires them together.

#![forbid(unsafe_code)]

pub mod check;
pub mod claim;
pub mod claim_watch;
pub mod config;
#[cfg(test)]
mod docs_reference;
pub mod events;
pub mod exec;
pub mod follower;
pub mod handoff;
pub mod http;
pub mod hub;
pub mod metrics;
pub mod overrides;
pub mod resolver;
pub mod restart;
pub mod state;
#[cfg(test)]
mod testing;
pub mod verdict;
pub mod worker_probe;

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::Config;
use crate::state::{FollowerView, Mode};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot listen on {addr} (--listen / HUB_FOLLOWER_LISTEN): {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot set up metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// Why the sidecar stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// `shutdown` turned true.
    Shutdown,
    /// Restart-all mode: exit with this code, so that kubelet restarts every container.
    RestartAll(u8),
}

/// How long queued Events may take to be written before a restart-all exit.
const EVENTS_BEFORE_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the sidecar until `shutdown` turns true, or until restart-all mode asks for an exit:
/// the poll loop, the restart side, the watches and the HTTP server. Each task publishes its
/// own view; the server only reads them.
pub async fn run(config: Config, shutdown: watch::Receiver<bool>) -> Result<Stopped, RunError> {
    let config = Arc::new(config);
    let hub_ids: Vec<_> = config.hubs.iter().map(|h| h.id).collect();
    let metrics = metrics::Metrics::new(&hub_ids, config.restart.mode.as_str())?;
    let mode = if config.single_hub() {
        Mode::SingleHub
    } else {
        Mode::Follow
    };
    let stale_after = config.poll_interval * 3 + config.probe_timeout;
    let listener = http::bind(config.listen)
        .await
        .map_err(|source| RunError::Listen {
            addr: config.listen,
            source,
        })?;
    tracing::info!(
        listen = %config.listen,
        hubs = %config.hubs.iter().map(|h| format!("{}={}", h.id, h.raw_endpoint)).collect::<Vec<_>>().join(" "),
        cluster = %config.cluster_name,
        namespace = %config.namespace,
        handoff_dir = %config.handoff_dir.display(),
        "hub-follower starting"
    );
    let (events, recording) = events::start(&config.events, &metrics);
    let view = FollowerView::new(mode, config.confirmations, stale_after);
    let watching = config.watch_timeout.filter(|_| !config.single_hub());
    let watch_views: Vec<_> = config
        .hubs
        .iter()
        .filter(|_| watching.is_some())
        .map(|h| {
            (
                h.id,
                watch::Sender::new(claim_watch::WatchView::new()),
                claim_watch::Closely::default(),
            )
        })
        .collect();
    let follower = follower::Follower::new(config.clone(), metrics.clone(), view)
        .with_events(events.clone())
        .with_watches(
            watch_views
                .iter()
                .map(|(hub, v, closely)| (*hub, v.subscribe(), closely.clone()))
                .collect(),
        );
    let restarter = restart::Restarter::new(
        config.restart.clone(),
        config.handoff_dir.clone(),
        metrics.clone(),
    )
    .with_events(events);
    let handlers = http::Handlers {
        follower: follower.subscribe(),
        restart: restarter.subscribe(),
        watches: watch_views
            .iter()
            .map(|(hub, v, _)| (*hub, v.subscribe()))
            .collect(),
        worker: config
            .restart
            .worker_probe
            .clone()
            .map(|c| Arc::new(http::WorkerCheck::new(c, config.handoff_dir.clone()))),
        metrics: metrics.clone(),
    };
    // Subscribed before the first publish, so the restart side sees every decision's reason.
    let mut restarts = tokio::spawn(restarter.run(follower.decisions(), shutdown.clone()));
    let mut watches = Vec::new();
    if let Some(timeout) = watching {
        let (trigger, clients) = follower.watch_inputs();
        for ((hub, clients), (_, view, closely)) in clients.into_iter().zip(watch_views) {
            let w = claim_watch::HubWatch {
                hub,
                namespace: config.namespace.clone(),
                cluster: config.cluster_name.clone(),
                timeout,
                deadline: config.probe_timeout,
                trigger: trigger.clone(),
                hubs: config.endpoints(),
                metrics: metrics.clone(),
                view,
                closely,
                decided: follower.decisions(),
            };
            watches.push(tokio::spawn(w.run(clients, shutdown.clone())));
        }
    }
    let server = tokio::spawn(http::serve(listener, handlers, shutdown.clone()));
    let mut following = Box::pin(follower.run(shutdown));
    // The restart side first: a restart-all exit and a SIGTERM at the same moment exit with
    // the restart code, as the request on disk says.
    let stopped = tokio::select! {
        biased;
        ended = &mut restarts => match ended {
            Ok(Some(code)) => Stopped::RestartAll(code),
            Ok(None) => {
                following.as_mut().await;
                Stopped::Shutdown
            }
            Err(e) => {
                tracing::error!(error = %e, "the restart side stopped; following goes on, but no switch will move the worker");
                following.as_mut().await;
                Stopped::Shutdown
            }
        },
        () = &mut following => Stopped::Shutdown,
    };
    // The decision is on disk before the restart side sees it: nothing in flight is owed.
    drop(following);
    for w in watches {
        w.abort();
    }
    restarts.abort();
    match stopped {
        Stopped::RestartAll(code) => {
            // Every Sink is gone with the follower and the restart side: what they queued (the
            // restart's own Event) is written, or given up on, before the exit.
            recording.finish(EVENTS_BEFORE_EXIT).await;
            tracing::info!(
                exit_code = code,
                "exiting so that kubelet restarts every container"
            );
        }
        Stopped::Shutdown => {
            // The server saw the same shutdown; give it a moment to close its listener.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), server).await;
        }
    }
    Ok(stopped)
}
