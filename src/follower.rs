//! The loop: probe all hubs → resolver → publish. Everything with a side effect (files, metrics,
//! logs, the status page) happens here; the rule itself is in `resolver`.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::claim_watch::WatchView;
use crate::config::Config;
use crate::events::{Fact, Sink};
use crate::handoff::{self, Basis, Handoff};
use crate::hub::{probe_all, HubClient, Probe};
use crate::metrics::Metrics;
use crate::overrides::{Kind, Overrides};
use crate::resolver::{Decision, Reason, Resolver};
use crate::state::{FollowerView, HubView, SeenClaim};
use crate::verdict::{ErrorReason, HubId, Verdict};

mod notes;
mod pace;
mod steering;

pub struct Follower {
    config: Arc<Config>,
    hubs: Vec<HubClient>,
    resolver: Resolver,
    metrics: Metrics,
    view: watch::Sender<FollowerView>,
    /// The published decision alone, for the restart side: it wakes on a new generation, not
    /// on every round's news.
    decisions: watch::Sender<Option<Handoff>>,
    /// Per hub, what it said last round, for the log line of a published decision.
    said: HashMap<HubId, String>,
    next_generation: u64,
    /// A decision taken but not yet on disk (the last write failed); retried every round.
    unpublished: Option<Decision>,
    /// Per hub, the last error reason (None: it answered). Probe errors are logged on change only.
    last_error: HashMap<HubId, Option<ErrorReason>>,
    rejecting: HashMap<HubId, bool>,
    /// Per hub, the last claim it published and when it was read, kept when the claim vanishes.
    last_seen: HashMap<HubId, SeenClaim>,
    /// Per hub, whether its last answer carried a claim: a claim that is gone the next answer
    /// vanished.
    claimed: HashMap<HubId, bool>,
    /// Where Events go.
    events: Sink,
    /// Set by the watches when a hub's claim changes: look now rather than at the next tick.
    trigger: Arc<Notify>,
    /// Each hub's watch, when watching: while all of them vouch for their hubs and the last
    /// round was settled, reads come at `--watched-poll-interval`.
    watches: Vec<(HubId, watch::Receiver<WatchView>)>,
    /// Per hub, the number of the last claim its watch showed that the resolver was told of.
    witnessed: HashMap<HubId, u64>,
    /// The pace of the reads.
    pacer: pace::Pacer,
    /// The decision on disk, as this run last wrote or resumed it.
    published: Option<Handoff>,
    /// The switch held back, as shown in `/status`.
    held: Option<crate::state::HeldView>,
    /// Whether reads are relaxed to `--watched-poll-interval`, as last said.
    relaxed: bool,
    /// The operator's pin and drain (`--override-dir`).
    overrides: Overrides,
    /// The pin or drain that made the decision in `unpublished`, as it stood then.
    unpublished_by: Option<crate::handoff::SteeredBy>,
    /// Per kind, why its file cannot be read, logged once per change.
    override_unreadable: HashMap<Kind, String>,
    /// The silent hub whose basis no longer holds the worker (rule 10), once said.
    leaving_silent: Option<HubId>,
    /// Whether a split brain is being said (rule 11).
    split_brain: bool,
    /// The startup default's time, once said (rule 12).
    undecided_until: Option<Timestamp>,
}

/// Follows the client a hub is read with (a rotated CA file builds a new one).
pub type HubClients = watch::Receiver<Option<kube::Client>>;

impl Follower {
    pub fn new(config: Arc<Config>, metrics: Metrics, view: FollowerView) -> Self {
        let hubs = HubClient::for_config(&config);
        let resolver = Resolver::new(config.endpoints(), config.confirmations)
            .with_liveness(config.liveness());
        let overrides = Overrides::new(config.hubs.iter().map(|h| h.id).collect());
        if !config.single_hub() {
            metrics
                .poll_interval
                .set(config.poll_interval.as_secs_f64());
        }
        let pacer = pace::Pacer::new(
            Instant::now(),
            config.poll_interval,
            config.watched_poll_interval,
            config.confirm_interval,
        );
        Self {
            config,
            hubs,
            resolver,
            metrics,
            view: watch::Sender::new(view),
            decisions: watch::Sender::new(None),
            said: HashMap::new(),
            next_generation: 1,
            unpublished: None,
            last_error: HashMap::new(),
            rejecting: HashMap::new(),
            last_seen: HashMap::new(),
            claimed: HashMap::new(),
            events: Sink::default(),
            trigger: Arc::new(Notify::new()),
            watches: Vec::new(),
            witnessed: HashMap::new(),
            pacer,
            published: None,
            held: None,
            relaxed: false,
            overrides,
            unpublished_by: None,
            override_unreadable: HashMap::new(),
            leaving_silent: None,
            split_brain: false,
            undecided_until: None,
        }
    }

    /// Reads less often while these watches vouch for their hubs.
    pub fn with_watches(mut self, watches: Vec<(HubId, watch::Receiver<WatchView>)>) -> Self {
        self.watches = watches;
        self
    }

    /// Records Events through `events`.
    pub fn with_events(mut self, events: Sink) -> Self {
        self.events = events;
        self
    }

    /// Follows the follower's view.
    pub fn subscribe(&self) -> watch::Receiver<FollowerView> {
        self.view.subscribe()
    }

    /// Follows the published decision; it changes with each new generation.
    pub fn decisions(&self) -> watch::Receiver<Option<Handoff>> {
        self.decisions.subscribe()
    }

    /// Shows `handoff` as the published decision: on the status page, and to the restart side
    /// when its generation is new.
    fn set_published(&mut self, handoff: Handoff) {
        self.published = Some(handoff.clone());
        self.decisions.send_if_modified(|d| {
            let new = d.as_ref().map(|h| h.generation) != Some(handoff.generation);
            *d = Some(handoff.clone());
            new
        });
        self.view.send_modify(|s| s.published = Some(handoff));
    }

    /// What the watches notify, and each hub's client for them to watch with.
    pub fn watch_inputs(&self) -> (Arc<Notify>, Vec<(HubId, HubClients)>) {
        let clients = self.hubs.iter().map(|h| (h.id(), h.clients())).collect();
        (self.trigger.clone(), clients)
    }

    /// Runs until `shutdown` turns true. A write in progress always finishes: a round, and the
    /// publish in it, is awaited outside the shutdown's `select!`, and the write itself runs on
    /// the blocking pool, off the thread the HTTP server and the restart side share.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        self.resume().await;
        if self.config.single_hub() {
            self.run_single_hub(shutdown).await;
            return;
        }
        if self.config.override_dir.is_some() {
            self.show_overrides();
        }
        loop {
            let poll_at = self.pacer.poll_at();
            let wake = self.next_expiry().map_or(poll_at, |e| e.min(poll_at));
            let woke = tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep_until(wake) => pace::Wake::Timer,
                _ = self.trigger.notified() => pace::Wake::News,
            };
            // A pin or drain that began or ended is acted on now, whatever the pace of reads.
            let steered = self.read_overrides().await;
            let now = Instant::now();
            let vouched = self.watches_vouch(now);
            match self.pacer.on_wake(now, woke, steered, vouched) {
                pace::Act::Sleep => continue,
                pace::Act::Skip => {
                    self.view.send_modify(|s| s.last_round = now);
                    self.set_polling(true);
                    continue;
                }
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
            let started = Instant::now();
            let probes = tokio::select! {
                _ = shutdown.changed() => return,
                probes = probe_all(&mut self.hubs) => probes,
            };
            let mut left = self.round(&probes, woke == pace::Wake::News).await;
            let took = (started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
            tracing::debug!(took_ms = took, "round completed");
            self.view.send_modify(|s| s.last_round_ms = Some(took));
            left.paused_until = self
                .hubs
                .iter()
                .filter_map(HubClient::paused_until)
                .max()
                .map(Instant::from_std);
            if let Some(unfinished) = self.pacer.round_done(started, left) {
                let why = match unfinished {
                    pace::Unfinished::News => "left a change the watch saw unread",
                    pace::Unfinished::Streak(_) => "broke off the pending switch's confirmations",
                };
                tracing::info!(
                    every = %humantime::format_duration(self.config.confirm_interval),
                    "a hub did not answer and {why}: reading again at --confirm-interval, once"
                );
            }
            let relaxed = self.pacer.relaxed(self.watches_vouch(Instant::now()));
            self.set_polling(relaxed);
        }
    }

    /// Every hub's watch vouches for its hub at `now`.
    fn watches_vouch(&self, now: Instant) -> bool {
        !self.watches.is_empty() && self.watches.iter().all(|(_, w)| w.borrow().vouches(now))
    }

    /// Shows whether reads are relaxed to `--watched-poll-interval`, on change.
    fn set_polling(&mut self, relaxed: bool) {
        if self.relaxed == relaxed {
            return;
        }
        self.relaxed = relaxed;
        let interval = if relaxed {
            tracing::info!(
                every = %humantime::format_duration(self.config.watched_poll_interval),
                "every hub's watch vouches for its hub: reading at --watched-poll-interval"
            );
            self.config.watched_poll_interval
        } else {
            tracing::info!(
                every = %humantime::format_duration(self.config.poll_interval),
                "reading at --poll-interval"
            );
            self.config.poll_interval
        };
        self.metrics.poll_interval.set(interval.as_secs_f64());
        self.view.send_modify(|s| s.polling_relaxed = relaxed);
    }

    /// With one hub there is nothing to decide: publish it and keep retrying only if that fails.
    async fn run_single_hub(mut self, mut shutdown: watch::Receiver<bool>) {
        if self.published.is_some() {
            return wait(&mut shutdown).await;
        }
        self.unpublished = Some(Decision {
            hub: HubId::PRIMARY,
            identity: None,
            reason: Reason::SingleHub,
            basis: None,
            steered: None,
        });
        while self.unpublished.is_some() {
            self.publish_pending().await;
            if self.unpublished.is_none() {
                break;
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
        wait(&mut shutdown).await;
    }

    /// Takes over the decision an earlier run of the sidecar left in the handoff directory, so
    /// that a sidecar restart beside a running worker is not a switch.
    async fn resume(&mut self) {
        let dir = self.config.handoff_dir.clone();
        let previous = match handoff::read_in_background(&dir).await {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring the handoff left by an earlier run");
                if let Some(g) = handoff::generation_on_disk(&dir) {
                    self.next_generation = g + 1;
                }
                return;
            }
        };
        self.next_generation = previous.generation + 1;
        let identity = previous.identity.clone();
        let basis = previous.basis.as_ref().and_then(|b| {
            b.claim()
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "the earlier decision's basis cannot be read; resuming without one, until a claim names the resumed hub")
                })
                .ok()
        });
        let switched_at = (previous.reason == Reason::Switch)
            .then(|| previous.decided_at.parse::<Timestamp>().ok())
            .flatten();
        let Some(decision) =
            self.resolver
                .resume(previous.hub, &previous.endpoint, identity, basis)
        else {
            tracing::info!(
                hub = %previous.hub,
                endpoint = %previous.endpoint,
                "the earlier decision names a hub that is no longer configured; deciding afresh"
            );
            return;
        };
        if let Some(at) = switched_at {
            // A restarted sidecar in a split brain does not get a move of its own.
            self.resolver.moved_at(at);
        }
        if self.config.single_hub() {
            // Nothing to decide with one hub: the earlier decision stands as it was written.
            self.set_published(previous);
            self.metrics.set_active(HubId::PRIMARY, &[HubId::PRIMARY]);
            return;
        }
        self.unpublished = Some(decision);
        self.publish_pending().await;
    }

    /// One round's verdicts through the rule, and the result out to disk, metrics, logs; what
    /// it left, for the pace. `watch_started`: a watch started this round, not the clock.
    async fn round(&mut self, probes: &[Probe], watch_started: bool) -> pace::Left {
        let now = Timestamp::now();
        let verdicts: Vec<(HubId, &Verdict)> = probes.iter().map(|p| (p.hub, &p.verdict)).collect();
        let pending_before = self.resolver.pending().cloned();
        self.expire_overrides(now);
        // What the watches saw since the last round, erased or not: the claim the worker's
        // own hub showed last is what a split brain is told by (rule 11).
        for (hub, view) in &self.watches {
            if let Some((n, claim)) = view.borrow().shown.as_ref() {
                if self.witnessed.insert(*hub, *n) != Some(*n) {
                    self.resolver.witness(*hub, claim);
                }
            }
        }
        let step = self.resolver.observe_steered(now, &verdicts, self.steer());
        // A claim the rule refused for its date is reported as the bad response it is.
        let answers: Vec<Probe> = probes
            .iter()
            .map(|p| match step.refused(p.hub) {
                Some(e) => Probe {
                    verdict: Verdict::Error(e.clone()),
                    ..p.clone()
                },
                None => p.clone(),
            })
            .collect();
        let settled = pace::settled(&answers, &step);
        let mut left = pace::Left {
            unfinished: pace::unfinished(
                pending_before.as_ref(),
                self.resolver.pending(),
                &step,
                probes,
                watch_started,
            ),
            gives_back: pace::gives_retries_back(settled, &step, self.resolver.pending().is_some()),
            pending: self.resolver.pending().is_some(),
            ..pace::Left::default()
        };
        let probes = answers;
        for probe in &probes {
            self.observe_probe(probe, now);
            self.note_claim(probe, now);
        }
        self.view.send_modify(|s| {
            s.last_round_at = Some(now.to_string());
            for probe in &probes {
                if let Some(h) = self.config.hub(probe.hub) {
                    let seen = self.last_seen.get(&probe.hub).cloned();
                    s.hubs
                        .insert(probe.hub, HubView::new(&h.raw_endpoint, probe, now, seen));
                }
            }
        });
        self.note_rejections(&step.rejected, &probes);
        self.note_stale(&step.stale);
        let step_hub = step.decision.as_ref().map(|d| d.hub);
        if let Some(decision) = step.decision {
            // What made it, as it stood this round: it may end before the write succeeds.
            self.unpublished_by = decision.steered.and_then(|k| self.steered_by(k));
            self.unpublished = Some(decision);
        }
        self.publish_pending().await;
        let recorded = self.refresh_basis().await;
        left.settled = settled && self.unpublished.is_none() && recorded;
        self.note_split_brain(step.split_brain, step.held.as_ref());
        self.note_dead_hub(
            step.dead_hub,
            self.resolver
                .pending()
                .map(|p| p.candidate.hub)
                .or(step_hub),
        );
        self.note_undecided(step.undecided_until);
        self.note_held(step.held, now);

        let pending = self.resolver.pending().cloned();
        if let Some(p) = pending
            .as_ref()
            .filter(|p| pending_before.as_ref() != Some(*p))
        {
            self.events.send(Fact::SwitchPending {
                candidate: p.candidate.hub,
                identity: p.candidate.identity.clone(),
                count: p.count,
                required: self.resolver.confirmations(),
            });
        }
        self.metrics
            .pending_confirmations
            .set(pending.as_ref().map_or(0, |p| i64::from(p.count)));
        if let Some(p) = &pending {
            tracing::info!(
                candidate = %p.candidate.hub,
                count = p.count,
                required = self.resolver.confirmations(),
                "a switch is pending confirmation"
            );
        }
        self.view.send_modify(|s| {
            s.pending = pending;
            s.last_round = Instant::now();
        });
        left
    }

    async fn publish_pending(&mut self) {
        let Some(decision) = self.unpublished.take() else {
            return;
        };
        let Some(hub) = self.config.hub(decision.hub) else {
            return;
        };
        let handoff = Handoff {
            hub: decision.hub,
            endpoint: hub.raw_endpoint.clone(),
            token_file: hub.token_file.clone(),
            ca_file: hub.ca_file.clone(),
            tls_server_name: hub.tls_server_name.clone(),
            identity: decision.identity.clone(),
            generation: self.next_generation,
            decided_at: Timestamp::now().to_string(),
            reason: decision.reason,
            namespace: Some(self.config.namespace.clone()),
            basis: self.resolver.basis().map(Basis::of),
            steered_by: self
                .unpublished_by
                .clone()
                .filter(|_| decision.steered.is_some()),
        };
        match handoff::publish_in_background(&self.config.handoff_dir, &handoff).await {
            Ok(()) => {
                self.resolver.published();
                self.next_generation += 1;
                if decision.reason == Reason::Switch {
                    self.metrics.switches.inc();
                    self.events.send(Fact::Switched {
                        from: self.published.as_ref().map(|h| h.hub),
                        to: handoff.hub,
                        endpoint: handoff.endpoint.clone(),
                        identity: handoff.identity.clone(),
                        generation: handoff.generation,
                        confirmations: self.resolver.confirmations(),
                        claim_age: decision
                            .basis
                            .as_ref()
                            .and_then(|c| c.last_updated)
                            .and_then(|at| Timestamp::now().duration_since(at).try_into().ok()),
                        steered_by: handoff
                            .steered_by
                            .as_ref()
                            .map(|s| format!("{} of {} until {}", s.kind, s.hub, s.until)),
                    });
                }
                let ids: Vec<HubId> = self.config.hubs.iter().map(|h| h.id).collect();
                self.metrics.set_active(decision.hub, &ids);
                tracing::info!(
                    hub = %handoff.hub,
                    endpoint = %handoff.endpoint,
                    identity = handoff.identity.as_deref().unwrap_or(""),
                    reason = decision.reason.as_str(),
                    generation = handoff.generation,
                    verdicts = %self.verdict_summary(),
                    "published the active hub"
                );
                self.set_published(handoff);
            }
            Err(e) => {
                self.metrics.handoff_write_errors.inc();
                tracing::warn!(error = %e, hub = %decision.hub, reason = decision.reason.as_str(), "could not publish the decision; the previous one stays in place and the write is retried next round");
                self.unpublished = Some(decision);
            }
        }
    }
}

impl Follower {
    /// Rewrites the published decision, same generation, when its basis moved forward: a
    /// restarted sidecar then resumes with the freshest claim seen for its hub. The restart
    /// side acts on new generations only, so this never moves the worker. A failed write is
    /// retried next round. `false` when that write failed.
    async fn refresh_basis(&mut self) -> bool {
        if self.unpublished.is_some() {
            return true;
        }
        let basis = self.resolver.basis().map(Basis::of);
        let Some(published) = self
            .published
            .clone()
            .filter(|h| h.basis != basis && Some(h.hub) == self.resolver.established())
        else {
            return true;
        };
        let handoff = Handoff { basis, ..published };
        match handoff::publish_in_background(&self.config.handoff_dir, &handoff).await {
            Ok(()) => {
                tracing::debug!(
                    generation = handoff.generation,
                    "the basis moved forward with a fresher claim for the published hub"
                );
                self.set_published(handoff);
                true
            }
            Err(e) => {
                self.metrics.handoff_write_errors.inc();
                tracing::warn!(error = %e, "could not record the fresher basis; retried next round");
                false
            }
        }
    }
}

async fn wait(shutdown: &mut watch::Receiver<bool>) {
    while !*shutdown.borrow() {
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}
