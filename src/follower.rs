//! The loop: read the hubs and the pin and drain files, hand the answers to the follower's
//! core, write what it asks for, sleep until it wants the next read. The core (`core`) decides
//! and does no IO; the rule itself is in `resolver`.

use std::sync::Arc;

use futures_util::FutureExt;
use jiff::Timestamp;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::claim::Claim;
use crate::claim_watch::{Closely, WatchView};
use crate::config::Config;
use crate::events::Sink;
use crate::handoff::{self, Handoff};
use crate::hub::{probe_all, HubClient};
use crate::metrics::Metrics;
use crate::state::FollowerView;
use crate::verdict::HubId;

mod core;
mod notes;
mod pace;
#[cfg(test)]
mod pace_simulation;
#[cfg(test)]
mod real_controller_simulation;
#[cfg(test)]
mod simulation;
mod steering;

use self::core::{Core, Earlier, Watched};

/// The driver: the reads of the hubs and of the pin and drain files, the handoff writes and
/// the sleeping. What to make of them is `core`, which does no IO.
pub struct Follower {
    core: Core,
    hubs: Vec<HubClient>,
    /// Set by the watches when a hub's claim changes: look now rather than at the next tick.
    trigger: Arc<Notify>,
    /// Each hub's watch, when watching: while all of them vouch for their hubs and the last
    /// round was settled, reads come at `--watched-poll-interval`. Its [`Closely`] is set while
    /// the core follows that hub's claim closely.
    watches: Vec<(HubId, watch::Receiver<WatchView>, Closely)>,
}

/// Follows the client a hub is read with (a rotated CA file builds a new one).
pub type HubClients = watch::Receiver<Option<kube::Client>>;

impl Follower {
    pub fn new(config: Arc<Config>, metrics: Metrics, view: FollowerView) -> Self {
        let hubs = HubClient::for_config(&config);
        Self {
            core: Core::new(config, metrics, view, Instant::now()),
            hubs,
            trigger: Arc::new(Notify::new()),
            watches: Vec::new(),
        }
    }

    /// Reads less often while these watches vouch for their hubs.
    pub fn with_watches(
        mut self,
        watches: Vec<(HubId, watch::Receiver<WatchView>, Closely)>,
    ) -> Self {
        self.watches = watches;
        self
    }

    /// Records Events through `events`.
    pub fn with_events(mut self, events: Sink) -> Self {
        self.core.events = events;
        self
    }

    /// Follows the follower's view.
    pub fn subscribe(&self) -> watch::Receiver<FollowerView> {
        self.core.view.subscribe()
    }

    /// Follows the published decision; it changes with each new generation.
    pub fn decisions(&self) -> watch::Receiver<Option<Handoff>> {
        self.core.decisions.subscribe()
    }

    /// What the watches notify, and each hub's client for them to watch with.
    pub fn watch_inputs(&self) -> (Arc<Notify>, Vec<(HubId, HubClients)>) {
        let clients = self.hubs.iter().map(|h| (h.id(), h.clients())).collect();
        (self.trigger.clone(), clients)
    }

    fn config(&self) -> &Config {
        &self.core.config
    }

    /// Runs until `shutdown` turns true. A write in progress always finishes: a round, and the
    /// writes in it, are awaited outside the shutdown's `select!`, and each write runs on the
    /// blocking pool, off the thread the HTTP server and the restart side share.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let earlier = self.read_earlier().await;
        self.core.resume(earlier);
        self.write().await;
        if self.config().single_hub() {
            self.run_single_hub(shutdown).await;
            return;
        }
        if self.config().override_dir.is_some() {
            self.core.show_overrides();
        }
        loop {
            let poll_at = self.core.poll_at();
            let wake = self
                .core
                .next_expiry(Timestamp::now(), Instant::now())
                .map_or(poll_at, |e| e.min(poll_at));
            let woke = tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep_until(wake) => pace::Wake::Timer,
                _ = self.trigger.notified() => pace::Wake::News,
            };
            // A pin or drain that began or ended is acted on now, whatever the pace of reads.
            let steered = self.read_overrides().await;
            let now = Instant::now();
            // News is read a span later only when the watches can vouch for that read: every
            // one follows its object (a watch back from a failure does from its next heartbeat).
            let vouched = match woke {
                pace::Wake::News => {
                    self.watches_vouch(now) && self.watched(now).len() == self.watches.len()
                }
                pace::Wake::Timer => self.watches_vouch(now),
            };
            match self.core.on_wake(now, woke, steered, vouched) {
                pace::Act::Sleep | pace::Act::Skip => continue,
                pace::Act::ReadAt(at) => {
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = tokio::time::sleep_until(at) => {}
                    }
                    // What changed in the pin and drain files meanwhile goes into this round.
                    self.read_overrides().await;
                }
                pace::Act::Read => {}
            }
            // News that came meanwhile is in these reads: it starts no round of its own.
            let _ = self.trigger.notified().now_or_never();
            let started = Instant::now();
            // Taken before the reads: a write the reads see and the watch has not yet shown
            // makes the versions differ, and the round counts as one.
            let watched = self.watched(started);
            let probes = tokio::select! {
                _ = shutdown.changed() => return,
                probes = probe_all(&mut self.hubs) => probes,
            };
            let shown = self.shown();
            self.core.round(
                Timestamp::now(),
                &probes,
                &shown,
                &watched,
                woke == pace::Wake::News,
            );
            self.write().await;
            let paused_until = self
                .hubs
                .iter()
                .filter_map(HubClient::paused_until)
                .max()
                .map(Instant::from_std);
            let ended = Instant::now();
            let vouched = self.watches_vouch(ended);
            self.core.round_done(started, ended, paused_until, vouched);
            self.follow_closely();
        }
    }

    /// Tells each watch whether the core follows its hub's claim closely, then reads again at
    /// once if such a claim changed between the round's read and now: the watch raises news
    /// only for a change it shows after its flag is set.
    fn follow_closely(&self) {
        let closely = self.core.followed_closely();
        for (hub, _, flag) in &self.watches {
            flag.set(closely.iter().any(|(h, _)| h == hub));
        }
        let moved = closely.iter().any(|(hub, read)| {
            self.watches
                .iter()
                .find(|(h, _, _)| h == hub)
                .and_then(|(_, view, _)| {
                    view.borrow()
                        .tracked
                        .as_ref()
                        .map(|t| t.resource_version != *read)
                })
                .unwrap_or(true)
        });
        if moved {
            self.trigger.notify_one();
        }
    }

    /// The last claim each hub's watch showed, numbered, and when.
    fn shown(&self) -> Vec<(HubId, u64, Claim, Timestamp)> {
        self.watches
            .iter()
            .filter_map(|(hub, view, _)| {
                let (n, claim, at) = view.borrow().shown.clone()?;
                Some((*hub, n, claim, at))
            })
            .collect()
    }

    /// What each hub's watch vouches for at `now`: none from a watch without a recent
    /// heartbeat, or one that has not followed the object without a gap.
    fn watched(&self, now: Instant) -> Vec<(HubId, Watched)> {
        self.watches
            .iter()
            .filter_map(|(hub, view, _)| {
                let view = view.borrow();
                let tracked = view.tracked.as_ref().filter(|_| view.vouches(now))?;
                Some((
                    *hub,
                    Watched {
                        resource_version: tracked.resource_version.clone(),
                        claim: tracked.held.clone(),
                        held_for: now.saturating_duration_since(tracked.since),
                    },
                ))
            })
            .collect()
    }

    /// Every hub's watch vouches for its hub at `now`.
    fn watches_vouch(&self, now: Instant) -> bool {
        !self.watches.is_empty() && self.watches.iter().all(|(_, w, _)| w.borrow().vouches(now))
    }

    /// Makes the writes the core asks for, each on the blocking pool, and tells it how each went.
    async fn write(&mut self) {
        while let Some(write) = self.core.poll_write(Timestamp::now()) {
            let outcome =
                handoff::publish_in_background(&self.config().handoff_dir, &write.handoff)
                    .await
                    .map_err(|e| e.to_string());
            self.core.written(write, outcome, Timestamp::now());
        }
    }

    /// Reads the pin and drain files, off the async threads. `true` when a pin or drain began
    /// or ended.
    async fn read_overrides(&mut self) -> bool {
        let Some(dir) = self.config().override_dir.clone() else {
            return false;
        };
        let files = match tokio::task::spawn_blocking(move || steering::read_files(&dir)).await {
            Ok(files) => files,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the pin and drain files");
                Vec::new()
            }
        };
        self.core.overrides_read(Timestamp::now(), files)
    }

    /// What an earlier run of the sidecar left in the handoff directory.
    async fn read_earlier(&self) -> Earlier {
        let dir = self.config().handoff_dir.clone();
        match handoff::read_in_background(&dir).await {
            Ok(Some(h)) => Earlier::Decision(Box::new(h)),
            Ok(None) => Earlier::Nothing,
            Err(e) => Earlier::Unreadable {
                error: e.to_string(),
                generation: handoff::generation_on_disk(&dir),
            },
        }
    }

    /// With one hub there is nothing to decide: publish it and keep retrying only if that fails.
    async fn run_single_hub(mut self, mut shutdown: watch::Receiver<bool>) {
        if self.core.decide_single_hub() {
            loop {
                self.core.retry_writes();
                self.write().await;
                if !self.core.unpublished() {
                    break;
                }
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(self.config().poll_interval) => {}
                }
            }
        }
        wait(&mut shutdown).await;
    }
}

async fn wait(shutdown: &mut watch::Receiver<bool>) {
    while !*shutdown.borrow() {
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}
