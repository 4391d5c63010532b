//! Recording: kube's Event recorder, through the pod's own service account (in-cluster
//! credentials), onto the worker's Pod. A task of its own behind a bounded queue, so a slow
//! or refusing API server costs following nothing.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

use super::{Failure, Kind, Note, Sink};
use crate::config::EventsConfig;
use crate::metrics::Metrics;

/// Events waiting to be recorded; past this, new ones are dropped and counted.
const QUEUE: usize = 64;
/// One write, end to end.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The recording task, so that the sidecar can let it write what is queued before it exits.
#[derive(Debug, Default)]
pub struct Recording(Option<tokio::task::JoinHandle<()>>);

impl Recording {
    /// Waits, for at most `within`, until every Event queued is written or has failed. The
    /// recording ends only once every [`Sink`] is dropped: drop them all first, or this waits
    /// all of `within`.
    pub async fn finish(self, within: Duration) {
        if let Some(task) = self.0 {
            if tokio::time::timeout(within, task).await.is_err() {
                tracing::warn!(within = ?within, "gave up waiting for queued Events to be written");
            }
        }
    }
}

/// Starts recording when Events are on and the pod can record them; otherwise a sink that
/// does nothing, and one line saying why.
pub fn start(config: &EventsConfig, metrics: &Metrics) -> (Sink, Recording) {
    let (sink, task) = start_task(config, metrics);
    (sink, Recording(task))
}

fn start_task(
    config: &EventsConfig,
    metrics: &Metrics,
) -> (Sink, Option<tokio::task::JoinHandle<()>>) {
    if !config.enabled {
        return (Sink::default(), None);
    }
    let (Some(name), Some(namespace)) = (&config.pod_name, &config.pod_namespace) else {
        tracing::info!("Events are off: POD_NAME and POD_NAMESPACE are not set (the chart sets them from the downward API)");
        return (Sink::default(), None);
    };
    let mut kube_config = match kube::Config::incluster() {
        Ok(c) => c,
        Err(e) => {
            tracing::info!(error = %e, "Events are off: no in-cluster credentials");
            return (Sink::default(), None);
        }
    };
    // One bounded attempt per Event: kube's default retries 429 and 5xx for a long time.
    kube_config.default_retry = false;
    kube_config.connect_timeout = Some(WRITE_TIMEOUT);
    kube_config.read_timeout = Some(WRITE_TIMEOUT);
    let client = match kube::Client::try_from(kube_config) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "Events are off: cannot build a client from the in-cluster credentials");
            return (Sink::default(), None);
        }
    };
    let reporter = Reporter {
        controller: "hub-follower".into(),
        instance: Some(name.clone()),
    };
    let pod = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.clone()),
        namespace: Some(namespace.clone()),
        uid: config.pod_uid.clone(),
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let failed = metrics.events_failed.clone();
    let task = tokio::spawn(run(rx, client, reporter, pod, failed.clone()));
    tracing::info!(pod = %name, namespace = %namespace, "recording Events on the pod");
    (Sink::new(tx, failed), Some(task))
}

async fn run(
    mut notes: mpsc::Receiver<Note>,
    client: kube::Client,
    reporter: Reporter,
    pod: ObjectReference,
    failed: prometheus::IntCounterVec,
) {
    let mut failing = false;
    while let Some(note) = notes.recv().await {
        let event = Event {
            type_: match note.kind {
                Kind::Normal => EventType::Normal,
                Kind::Warning => EventType::Warning,
            },
            reason: note.reason.into(),
            note: Some(note.message),
            action: note.action.into(),
            secondary: None,
        };
        // A recorder per Event: kube's recorder folds every later Event of the same reason,
        // type and action (within minutes) into the first one as a series, keeping the first
        // note, so the second switch's Event would read like the first. The limiter here
        // already bounds how many are written.
        let recorder = Recorder::new(client.clone(), reporter.clone());
        let error = match tokio::time::timeout(WRITE_TIMEOUT, recorder.publish(&event, &pod)).await
        {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some((Failure::Refused, e.to_string())),
            Err(_) => Some((
                Failure::TimedOut,
                format!("no answer within {WRITE_TIMEOUT:?}"),
            )),
        };
        match error {
            None if failing => {
                tracing::info!("recording Events again");
                failing = false;
            }
            None => {}
            Some((why, e)) => {
                failed.with_label_values(&[why.as_str()]).inc();
                if failing {
                    tracing::debug!(error = %e, reason = note.reason, "could not record an Event");
                } else {
                    tracing::warn!(error = %e, reason = note.reason, "could not record an Event; following goes on, failures are counted in kubeslice_worker_hub_events_failed_total");
                    failing = true;
                }
            }
        }
    }
}
