//! The follower as a machine that does no IO: it is told the time, each round's answers, what
//! the watches showed, the pin and drain files' text and how each write went; it says when to
//! read (`on_wake`, `poll_at`), what to write (`poll_write`), and leaves its facts in the
//! metrics, the log, the Events queue and `/status`, none of which blocks. The driver
//! (`Follower::run`) does the reads, the file IO and the sleeping. The shape is the restart
//! side's (`restart::machine`): its tests drive it without sockets, files or a clock.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::Instant;

use super::pace;
use crate::claim::Claim;
use crate::config::Config;
use crate::events::{Fact, Sink};
use crate::handoff::{Basis, Handoff, SteeredBy};
use crate::hub::Probe;
use crate::metrics::{unix_seconds, Metrics};
use crate::overrides::{Kind, Overrides};
use crate::resolver::{Candidate, Decision, Held, Hold, Reason, Resolver};
use crate::state::{FollowerView, HeldView, HubView, SeenClaim};
use crate::verdict::{ErrorReason, HubId, Verdict};

pub(super) struct Core {
    pub(super) config: Arc<Config>,
    pub(super) resolver: Resolver,
    pub(super) metrics: Metrics,
    pub(super) view: watch::Sender<FollowerView>,
    /// The published decision alone, for the restart side: it wakes on a new generation, not
    /// on every round's news.
    pub(super) decisions: watch::Sender<Option<Handoff>>,
    /// Per hub, what it said last round, for the log line of a published decision.
    pub(super) said: HashMap<HubId, String>,
    next_generation: u64,
    /// A decision taken but not yet on disk (the last write failed); retried every round.
    unpublished: Option<Decision>,
    /// Per hub, the last error reason (None: it answered). Probe errors are logged on change only.
    pub(super) last_error: HashMap<HubId, Option<ErrorReason>>,
    pub(super) rejecting: HashMap<HubId, bool>,
    /// Per hub, the last claim it published and when it was read, kept when the claim vanishes.
    pub(super) last_seen: HashMap<HubId, SeenClaim>,
    /// Per hub, whether its last answer carried a claim: a claim that is gone the next answer
    /// vanished.
    pub(super) claimed: HashMap<HubId, bool>,
    /// Where Events go.
    pub(super) events: Sink,
    /// Per hub, the number of the last claim its watch showed that the resolver was told of.
    witnessed: HashMap<HubId, u64>,
    /// The pace of the reads.
    pacer: pace::Pacer,
    /// The decision on disk, as this run last wrote or resumed it.
    published: Option<Handoff>,
    /// The switch held back, as shown in `/status`.
    pub(super) held: Option<HeldView>,
    /// Whether reads are relaxed to `--watched-poll-interval`, as last said.
    relaxed: bool,
    /// The operator's pin and drain (`--override-dir`).
    pub(super) overrides: Overrides,
    /// The pin or drain that made the decision in `unpublished`, as it stood then.
    unpublished_by: Option<SteeredBy>,
    /// Per kind, why its file cannot be read, logged once per change.
    pub(super) override_unreadable: HashMap<Kind, String>,
    /// The silent hub whose basis no longer holds the worker (rule 10), once said.
    pub(super) leaving_silent: Option<HubId>,
    /// When a hub last showed a claim, and whether its absence has been said.
    pub(super) claim_seen: super::notes::ClaimSeen,
    /// Whether a split brain is being said (rule 11).
    pub(super) split_brain: bool,
    /// The startup default's time, once said (rule 12).
    pub(super) undecided_until: Option<Timestamp>,
    /// Which writes this round (or this resume) has offered.
    writes: Writes,
    /// What the round under way leaves for after its writes.
    round: Option<RoundLeft>,
    /// The hubs whose claims the last round found older than the basis, each with the
    /// resourceVersion its read returned, when every such hub's watch had shown that very
    /// version before the reads: their watches then raise news on any change of the claim,
    /// and the round may count as settled ([`Core::followed_closely`]).
    followed_closely: Vec<(HubId, String)>,
}

/// A handoff to write, atomically, into the handoff directory; its outcome goes back through
/// [`Core::written`].
pub(super) struct Write {
    pub(super) handoff: Handoff,
    what: Written,
}

enum Written {
    /// A new decision: a new generation.
    Decision(Decision),
    /// The published decision with a fresher basis: the same generation.
    Basis,
}

/// The writes a round may offer, each once: the decision, then a fresher basis.
#[derive(Default)]
struct Writes {
    decision_offered: bool,
    basis_offered: bool,
    /// The last basis write failed this round.
    basis_failed: bool,
}

/// What a round's step leaves for after its writes.
struct RoundLeft {
    pending_before: Option<crate::resolver::Pending>,
    settled: bool,
    left: pace::Left,
    split_brain: bool,
    held: Option<Held>,
    dead_hub: Option<(HubId, crate::resolver::Quiet)>,
    decided: Option<HubId>,
    undecided_until: Option<Timestamp>,
    now: Timestamp,
}

/// What a hub's watch vouches for, taken before a round's reads: the object's resourceVersion
/// and claim as the watch last showed them, and how long every event has shown that claim.
/// Only a watch that vouches for its hub (a recent heartbeat) gives one.
#[derive(Debug, Clone)]
pub(super) struct Watched {
    pub(super) resource_version: String,
    /// The claim the watch last showed, `lastUpdated` included; none for no claim.
    pub(super) claim: Option<Claim>,
    pub(super) held_for: std::time::Duration,
}

/// The hubs whose claims are older than the basis: the reporters of claims for another hub
/// that are old news (`stale`), and, when the winner is held for being no fresher than the
/// basis (rule 5, as when the worker has erased the claim on its own hub), every hub whose
/// claim names the held candidate. Such a claim can only become fresher by a write to its
/// object: the basis only moves up, and only by a decision.
fn older_than_basis(
    stale: &[HubId],
    held: Option<&Held>,
    answers: &[Probe],
    config: &Config,
) -> Vec<HubId> {
    let mut older = stale.to_vec();
    if let Some(held) = held.filter(|h| matches!(h.why, Hold::NotFresherThanBasis { .. })) {
        let hubs = config.endpoints();
        for p in answers {
            let names_it = match &p.verdict {
                Verdict::Claim(c) => {
                    Candidate::of(c, &hubs).is_some_and(|c| c.hub == held.candidate.hub)
                }
                _ => false,
            };
            if names_it && !older.contains(&p.hub) {
                older.push(p.hub);
            }
        }
    }
    older
}

/// The hubs of claims older than the basis (`older`), each with the resourceVersion its read
/// returned, when each one's watch had shown that version before the reads: from then on the
/// watch sees every change of that claim. Empty unless every one of them is so followed.
fn follow_closely(
    stale: &[HubId],
    probes: &[Probe],
    watched: &[(HubId, Watched)],
) -> Vec<(HubId, String)> {
    let followed: Vec<(HubId, String)> = stale
        .iter()
        .filter_map(|hub| {
            followed_to_the_read(*hub, probes, watched)
                .map(|(_, watch)| (*hub, watch.resource_version.clone()))
        })
        .collect();
    if followed.len() == stale.len() {
        followed
    } else {
        Vec::new()
    }
}

/// `hub`'s read, and what its watch vouched for before the reads, when the watch had shown
/// the very resourceVersion the read returned, with the very claim the read found: it saw
/// every write up to the read. The version alone is not enough: an etcd restored from a
/// backup issues again versions it had issued before, for other content.
fn followed_to_the_read<'a>(
    hub: HubId,
    probes: &'a [Probe],
    watched: &'a [(HubId, Watched)],
) -> Option<(&'a Probe, &'a Watched)> {
    let probe = probes.iter().find(|p| p.hub == hub)?;
    let (_, watch) = watched.iter().find(|(h, _)| *h == hub)?;
    let read = match &probe.verdict {
        Verdict::Claim(c) => Some(c),
        Verdict::NoClaim => None,
        Verdict::Error(_) => return None,
    };
    (probe.resource_version.as_deref() == Some(watch.resource_version.as_str())
        && read == watch.claim.as_ref())
    .then_some((probe, watch))
}

/// The span N confirming rounds take: N − 1 confirm intervals.
fn confirmation_span(config: &Config) -> std::time::Duration {
    config.confirm_interval * config.confirmations.saturating_sub(1)
}

/// What an earlier run left in the handoff directory.
pub(super) enum Earlier {
    Nothing,
    /// It could not be read: a new generation follows the one the directory names, if any.
    Unreadable {
        error: String,
        generation: Option<u64>,
    },
    Decision(Box<Handoff>),
}

impl Core {
    pub(super) fn new(
        config: Arc<Config>,
        metrics: Metrics,
        view: FollowerView,
        now: Instant,
    ) -> Self {
        let resolver = Resolver::new(config.endpoints(), config.confirmations)
            .with_liveness(config.liveness());
        let overrides = Overrides::new(config.hubs.iter().map(|h| h.id).collect());
        if !config.single_hub() {
            metrics
                .poll_interval
                .set(config.poll_interval.as_secs_f64());
        }
        let pacer = pace::Pacer::new(
            now,
            config.poll_interval,
            config.watched_poll_interval,
            config.confirm_interval,
        )
        .with_vouched_span(confirmation_span(&config));
        Self {
            config,
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
            witnessed: HashMap::new(),
            pacer,
            published: None,
            held: None,
            relaxed: false,
            overrides,
            unpublished_by: None,
            override_unreadable: HashMap::new(),
            leaving_silent: None,
            claim_seen: Default::default(),
            split_brain: false,
            undecided_until: None,
            writes: Writes::default(),
            round: None,
            followed_closely: Vec::new(),
        }
    }

    /// The decision on disk, as this run last wrote or resumed it.
    #[cfg(test)]
    pub(super) fn published(&self) -> Option<&Handoff> {
        self.published.as_ref()
    }

    /// The most entries the core keeps for any one kind of per-hub fact.
    #[cfg(test)]
    pub(super) fn footprint(&self) -> usize {
        [
            self.said.len(),
            self.last_error.len(),
            self.rejecting.len(),
            self.last_seen.len(),
            self.claimed.len(),
            self.witnessed.len(),
            self.followed_closely.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    /// A decision is waiting for its write.
    pub(super) fn unpublished(&self) -> bool {
        self.unpublished.is_some()
    }

    /// When the pace wants the next read, at the latest.
    pub(super) fn poll_at(&self) -> Instant {
        self.pacer.poll_at()
    }

    /// The loop woke: read now, at a time, or not. A skipped read still counts as a look for
    /// `/status`, and means every watch vouched.
    pub(super) fn on_wake(
        &mut self,
        now: Instant,
        woke: pace::Wake,
        steered: bool,
        vouched: bool,
    ) -> pace::Act {
        let act = self.pacer.on_wake(now, woke, steered, vouched);
        if act == pace::Act::Skip {
            self.view.send_modify(|s| s.last_round = now);
            self.set_polling(true);
        }
        act
    }

    /// Takes over the decision an earlier run of the sidecar left, so that a sidecar restart
    /// beside a running worker is not a switch. Its write follows through [`Core::poll_write`].
    pub(super) fn resume(&mut self, earlier: Earlier) {
        self.writes = Writes::default();
        let previous = match earlier {
            Earlier::Nothing => return,
            Earlier::Unreadable { error, generation } => {
                tracing::warn!(error = %error, "ignoring the handoff left by an earlier run");
                if let Some(g) = generation {
                    self.next_generation = g + 1;
                }
                return;
            }
            Earlier::Decision(h) => *h,
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
        // When the claims last moved the worker: kept in the handoff across any number of
        // restarts; a handoff written before that was kept has only its own switch's time.
        let switched_at = match &previous.moved_at {
            Some(at) => at.parse::<Timestamp>().ok(),
            None => (previous.reason == Reason::Switch)
                .then(|| previous.decided_at.parse::<Timestamp>().ok())
                .flatten(),
        };
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
        // Its hub's silence, as the earlier run last saw it: --dead-hub-after counts from
        // there, however often the sidecar restarts.
        if let Some(since) = previous
            .silent_since
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok())
        {
            self.resolver.resume_silence(since);
        }
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
    }

    /// With one hub there is nothing to decide: the primary, once, unless resumed. `false`
    /// when a decision already stands.
    pub(super) fn decide_single_hub(&mut self) -> bool {
        if self.published.is_some() {
            return false;
        }
        self.unpublished = Some(Decision {
            hub: HubId::PRIMARY,
            identity: None,
            reason: Reason::SingleHub,
            basis: None,
            steered: None,
        });
        true
    }

    /// Offers the decision's write again (a single hub retries until it is on disk).
    pub(super) fn retry_writes(&mut self) {
        self.writes = Writes::default();
    }

    /// One round's answers through the rule. `shown`: the last claim each hub's watch showed,
    /// numbered, and when. `watched`: what each hub's watch vouched for before the reads.
    /// `watch_started`: the watch started this round, not the clock. The writes it leaves come
    /// from [`Core::poll_write`]; then [`Core::round_done`].
    pub(super) fn round(
        &mut self,
        now: Timestamp,
        probes: &[Probe],
        shown: &[(HubId, u64, Claim, Timestamp)],
        watched: &[(HubId, Watched)],
        watch_started: bool,
    ) {
        let verdicts: Vec<(HubId, &Verdict)> = probes.iter().map(|p| (p.hub, &p.verdict)).collect();
        let pending_before = self.resolver.pending().cloned();
        self.expire_overrides(now);
        // What the watches saw since the last round, erased or not, is evidence as a read is:
        // it moves the basis, tells a split brain (rule 11), keeps rule 10's claim clock and
        // decides a startup. It is dated when its watch showed it: a claim that cannot move
        // the decision raises no news (`claim_watch::is_news`), and waits for the next round.
        let vouching: Vec<HubId> = watched.iter().map(|(h, _)| *h).collect();
        self.resolver.watches_vouch_for(&vouching);
        let mut watched_a_claim = false;
        for (hub, n, claim, at) in shown {
            if self.witnessed.insert(*hub, *n) != Some(*n) {
                self.resolver.witness(*hub, claim, (*at).min(now));
                watched_a_claim = true;
            }
        }
        self.note_claims_seen(probes, watched_a_claim, now);
        let steer = self.steer();
        let vouched =
            steer.pin.is_none() && steer.drain.is_none() && self.watches_vouch(probes, watched);
        let step = if vouched {
            self.resolver.observe_vouched(now, &verdicts)
        } else {
            self.resolver.observe_steered(now, &verdicts, steer)
        };
        if vouched
            && step
                .decision
                .as_ref()
                .is_some_and(|d| d.reason == Reason::Switch)
        {
            self.metrics.switches_vouched.inc();
            tracing::info!(
                span = %humantime::format_duration(confirmation_span(&self.config)),
                "the watches vouch for the confirmations: every hub's object stood unchanged for the span, and this read found it so"
            );
        }
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
        let older = older_than_basis(&step.stale, step.held.as_ref(), &answers, &self.config);
        self.followed_closely = follow_closely(&older, probes, watched);
        // A held winner with no claim read for it (one the watch showed and the worker
        // erased) is not left to a watch.
        let older_followed = self.followed_closely.len() == older.len()
            && (step.held.is_none() || !older.is_empty());
        let settled = pace::settled(&answers, &step, older_followed);
        let left = pace::Left {
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
        for probe in &answers {
            self.observe_probe(probe, now);
            self.note_claim(probe, now);
        }
        self.view.send_modify(|s| {
            s.last_round_at = Some(now.to_string());
            for probe in &answers {
                if let Some(h) = self.config.hub(probe.hub) {
                    let seen = self.last_seen.get(&probe.hub).cloned();
                    s.hubs
                        .insert(probe.hub, HubView::new(&h.raw_endpoint, probe, now, seen));
                }
            }
        });
        self.note_rejections(&step.rejected, &answers);
        self.note_stale(&step.stale);
        self.metrics
            .active_hub_unclaimed_since
            .set(unix_seconds(self.resolver.unclaimed_since()));
        self.metrics.basis_unconfirmed_since.set(unix_seconds(
            self.resolver.unbounded_hold_since(step.held.as_ref()),
        ));
        let decided = step.decision.as_ref().map(|d| d.hub);
        if let Some(decision) = step.decision {
            // What made it, as it stood this round: it may end before the write succeeds.
            self.unpublished_by = decision.steered.and_then(|k| self.steered_by(k));
            self.unpublished = Some(decision);
        }
        self.writes = Writes::default();
        self.round = Some(RoundLeft {
            pending_before,
            settled,
            left,
            split_brain: step.split_brain,
            held: step.held,
            dead_hub: step.dead_hub,
            decided,
            undecided_until: step.undecided_until,
            now,
        });
    }

    /// The hubs whose claims the last round found older than the basis, with the
    /// resourceVersion each read returned: the driver has their watches raise news on any
    /// change of that claim, `lastUpdated` included, and reads again if one changed since.
    pub(super) fn followed_closely(&self) -> &[(HubId, String)] {
        &self.followed_closely
    }

    /// Whether this round's reads stand for the N confirming rounds: every configured hub
    /// answered, its watch vouched before the reads, the object's resourceVersion it read is
    /// the one the watch last showed (so the watch saw every write up to the read), and the
    /// watch shows the same claim for at least the span N rounds would take.
    fn watches_vouch(&self, probes: &[Probe], watched: &[(HubId, Watched)]) -> bool {
        let span = confirmation_span(&self.config);
        !span.is_zero()
            && self.config.hubs.iter().all(|h| {
                followed_to_the_read(h.id, probes, watched).is_some_and(|(probe, watch)| {
                    probe.verdict.answered() && watch.held_for >= span
                })
            })
    }

    /// The next write to make, if any: a new decision first, then the published one with a
    /// fresher basis. Each is offered once per round; a failed one is offered again the next.
    pub(super) fn poll_write(&mut self, now: Timestamp) -> Option<Write> {
        if !self.writes.decision_offered {
            self.writes.decision_offered = true;
            // A hub no longer configured has nothing to write (resume refuses one first).
            let decision = self.unpublished.take();
            if let Some((decision, hub)) =
                decision.and_then(|d| Some((d.clone(), self.config.hub(d.hub)?)))
            {
                let handoff = Handoff {
                    hub: decision.hub,
                    endpoint: hub.raw_endpoint.clone(),
                    token_file: hub.token_file.clone(),
                    ca_file: hub.ca_file.clone(),
                    tls_server_name: hub.tls_server_name.clone(),
                    identity: decision.identity.clone(),
                    generation: self.next_generation,
                    decided_at: now.to_string(),
                    reason: decision.reason,
                    namespace: Some(self.config.namespace.clone()),
                    basis: self.resolver.basis().map(Basis::of),
                    steered_by: self
                        .unpublished_by
                        .clone()
                        .filter(|_| decision.steered.is_some()),
                    moved_at: self.resolver.last_move().map(|t| t.to_string()),
                    silent_since: self.resolver.silent_since().map(|t| t.to_string()),
                };
                return Some(Write {
                    handoff,
                    what: Written::Decision(decision),
                });
            }
        }
        if !self.writes.basis_offered && self.unpublished.is_none() {
            self.writes.basis_offered = true;
            // The published decision, same generation, when its basis moved forward or its
            // hub's silence began or ended: a restarted sidecar then resumes with the freshest
            // claim seen for its hub, and counts the silence from where it began. The restart
            // side acts on new generations only, so this never moves the worker.
            let basis = self.resolver.basis().map(Basis::of);
            let silent_since = self.resolver.silent_since().map(|t| t.to_string());
            let published = self.published.clone().filter(|h| {
                (h.basis != basis || h.silent_since != silent_since)
                    && Some(h.hub) == self.resolver.established()
            })?;
            return Some(Write {
                handoff: Handoff {
                    basis,
                    moved_at: self.resolver.last_move().map(|t| t.to_string()),
                    silent_since,
                    ..published
                },
                what: Written::Basis,
            });
        }
        None
    }

    /// How a write from [`Core::poll_write`] went: `Err` says why it failed.
    pub(super) fn written(&mut self, write: Write, outcome: Result<(), String>, now: Timestamp) {
        let handoff = write.handoff;
        match (write.what, outcome) {
            (Written::Decision(decision), Ok(())) => {
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
                            .and_then(|at| now.duration_since(at).try_into().ok()),
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
            (Written::Decision(decision), Err(e)) => {
                self.metrics.handoff_write_errors.inc();
                tracing::warn!(error = %e, hub = %decision.hub, reason = decision.reason.as_str(), "could not publish the decision; the previous one stays in place and the write is retried next round");
                self.unpublished = Some(decision);
            }
            (Written::Basis, Ok(())) => {
                tracing::debug!(
                    generation = handoff.generation,
                    "the published decision rewritten: a fresher basis, or its hub's silence began or ended"
                );
                self.set_published(handoff);
            }
            (Written::Basis, Err(e)) => {
                self.metrics.handoff_write_errors.inc();
                self.writes.basis_failed = true;
                tracing::warn!(error = %e, "could not record the fresher basis; retried next round");
            }
        }
    }

    /// The round's writes are done (or given up until the next round): its facts, and the
    /// pace. `started`: when its reads began; `ended`: now. `paused_until`: the latest time a
    /// hub's client holds its reads back. `vouched`: every watch vouches now.
    pub(super) fn round_done(
        &mut self,
        started: Instant,
        ended: Instant,
        paused_until: Option<Instant>,
        vouched: bool,
    ) -> Option<pace::Unfinished> {
        let round = self.round.take()?;
        let mut left = round.left;
        left.settled = round.settled && self.unpublished.is_none() && !self.writes.basis_failed;
        left.paused_until = paused_until;
        let said_at = self
            .resolver
            .unbounded_hold_said_at(round.held.as_ref(), round.now);
        left.due = [self.resolver.quiet_at(), said_at]
            .into_iter()
            .flatten()
            .min()
            .map(|at| {
                let wait = at.duration_since(round.now);
                started + std::time::Duration::try_from(wait).unwrap_or_default()
            });
        self.note_split_brain(round.split_brain, round.held.as_ref());
        self.note_dead_hub(
            round.dead_hub,
            self.resolver
                .pending()
                .map(|p| p.candidate.hub)
                .or(round.decided),
        );
        self.note_undecided(round.undecided_until);
        self.note_held(round.held, round.now);

        let pending = self.resolver.pending().cloned();
        if let Some(p) = pending
            .as_ref()
            .filter(|p| round.pending_before.as_ref() != Some(*p))
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
        let took = (ended.saturating_duration_since(started).as_secs_f64() * 1e6).round() / 1e3;
        tracing::debug!(took_ms = took, "round completed");
        self.view.send_modify(|s| {
            s.pending = pending;
            s.last_round = ended;
            s.last_round_ms = Some(took);
        });
        let unfinished = self.pacer.round_done(started, left);
        if let Some(unfinished) = &unfinished {
            let why = match unfinished {
                pace::Unfinished::News => "left a change the watch saw unread",
                pace::Unfinished::Streak(_) => "broke off the pending switch's confirmations",
            };
            tracing::info!(
                every = %humantime::format_duration(self.config.confirm_interval),
                "a hub did not answer and {why}: reading again at --confirm-interval, once"
            );
        }
        let relaxed = self.pacer.relaxed(vouched);
        self.set_polling(relaxed);
        unfinished
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
}

#[cfg(test)]
mod tests {
    //! The follower driven as the loop drives it, without sockets, files or sleeps: each round
    //! is given its answers and the time, and each write its outcome.

    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;
    use crate::claim::Endpoint;
    use crate::events::Note;
    use crate::state::Mode;
    use crate::testing::settings;
    use crate::verdict::ProbeError;

    const A: &str = "https://a.example:6443";
    const B: &str = "https://b.example:6443";

    /// A follower, its Events, and the time on both clocks; each round is a second later.
    struct Run {
        core: Core,
        notes: mpsc::Receiver<Note>,
        now: Timestamp,
        at: Instant,
        /// Whether the next writes fail.
        failing: bool,
        /// The resourceVersion each hub's read carries (primary, secondary).
        versions: [Option<&'static str>; 2],
        /// What the watches vouch for before each round.
        watched: Vec<(HubId, Watched)>,
    }

    fn run(extra: &[&str]) -> Run {
        let mut args = vec!["--hub-endpoint", A, "--secondary-endpoint", B];
        args.extend_from_slice(&["--cluster-name", "w1", "--namespace", "p"]);
        args.extend_from_slice(extra);
        let config = Arc::new(Config::from_settings(&settings(&args)).expect("valid settings"));
        let ids: Vec<HubId> = config.hubs.iter().map(|h| h.id).collect();
        let metrics = Metrics::new(&ids, "none").expect("metrics");
        let view = FollowerView::new(Mode::Follow, config.confirmations, Duration::from_secs(60));
        let at = Instant::now();
        let mut core = Core::new(config, metrics, view, at);
        let (tx, notes) = mpsc::channel(256);
        let failed =
            prometheus::IntCounterVec::new(prometheus::Opts::new("failed", "failed"), &["why"])
                .expect("a counter");
        core.events = Sink::new(tx, failed);
        Run {
            core,
            notes,
            now: Timestamp::from_second(1_800_000_000).expect("a time"),
            at,
            failing: false,
            versions: [None, None],
            watched: Vec::new(),
        }
    }

    fn claim(endpoint: &str, epoch: Option<u64>, written: Timestamp) -> Verdict {
        Verdict::Claim(Claim {
            endpoint: Endpoint::parse(endpoint).expect("an endpoint"),
            identity: Some(format!("ctrl-{}", &endpoint[8..9])),
            last_updated: Some(written),
            epoch,
        })
    }

    fn unreachable() -> Verdict {
        Verdict::Error(ProbeError::new(ErrorReason::Connect, "connection refused"))
    }

    impl Run {
        /// One round with these answers (primary, secondary) and what the watches showed;
        /// every write it asks for, as made.
        fn round_seen(
            &mut self,
            a: Verdict,
            b: Verdict,
            shown: &[(HubId, u64, Claim, Timestamp)],
        ) -> Vec<Handoff> {
            self.now += jiff::SignedDuration::from_secs(1);
            self.at += Duration::from_secs(1);
            let [va, vb] = self.versions;
            let probes = [(HubId::PRIMARY, a, va), (HubId::SECONDARY, b, vb)].map(
                |(hub, verdict, version)| Probe {
                    hub,
                    verdict,
                    latency: Duration::from_millis(3),
                    resource_version: version.map(str::to_string),
                },
            );
            let watched = self.watched.clone();
            self.core.round(self.now, &probes, shown, &watched, false);
            let written = self.write();
            self.core.round_done(self.at, self.at, None, false);
            written
        }

        fn round(&mut self, a: Verdict, b: Verdict) -> Vec<Handoff> {
            self.round_seen(a, b, &[])
        }

        fn write(&mut self) -> Vec<Handoff> {
            let mut written = Vec::new();
            while let Some(write) = self.core.poll_write(self.now) {
                let outcome = if self.failing {
                    Err("No space left on device".to_string())
                } else {
                    written.push(write.handoff.clone());
                    Ok(())
                };
                self.core.written(write, outcome, self.now);
            }
            written
        }

        /// The Events recorded since the last look, by reason.
        fn events(&mut self) -> Vec<&'static str> {
            std::iter::from_fn(|| self.notes.try_recv().ok())
                .map(|n| n.reason)
                .collect()
        }

        fn ago(&self, secs: i64) -> Timestamp {
            self.now - jiff::SignedDuration::from_secs(secs)
        }
    }

    #[test]
    fn the_first_decision_needs_no_confirmation_and_a_switch_needs_n_rounds_said_once() {
        let mut r = run(&[]);
        let t = r.now;
        let first = r.round(claim(A, None, t), claim(A, None, t));
        assert_eq!(first.len(), 1);
        assert_eq!(
            (first[0].hub, first[0].reason, first[0].generation),
            (HubId::PRIMARY, Reason::Startup, 1)
        );

        let promoted = r.now;
        let mut rounds = 0;
        let mut silence = Vec::new();
        let switch = loop {
            rounds += 1;
            assert!(rounds <= 10, "no switch after 10 rounds");
            let written = r.round(unreachable(), claim(B, None, promoted));
            let (switch, rewrites): (Vec<_>, Vec<_>) =
                written.into_iter().partition(|h| h.generation == 2);
            silence.extend(rewrites.into_iter().map(|h| h.silent_since));
            if let Some(h) = switch.into_iter().next() {
                break h;
            }
        };
        // The primary's silence is recorded once, in the published generation, from the
        // round it began: a restarted sidecar counts --dead-hub-after from there.
        assert_eq!(silence.len(), 1, "{silence:?}");
        assert!(silence[0].is_some(), "{silence:?}");
        assert_eq!(rounds, r.core.config.confirmations as usize);
        assert_eq!(
            (switch.hub, switch.reason, switch.generation),
            (HubId::SECONDARY, Reason::Switch, 2)
        );
        assert_eq!(r.core.metrics.switches.get(), 1);
        let events = r.events();
        assert_eq!(
            events.iter().filter(|e| **e == "HubSwitched").count(),
            1,
            "{events:?}"
        );
        assert!(
            events.contains(&"HubSwitchPending") && events.contains(&"HubUnreachable"),
            "{events:?}"
        );
        // Agreement after the switch moves nothing and writes nothing.
        for _ in 0..5 {
            assert_eq!(
                r.round(claim(B, None, promoted), claim(B, None, promoted)),
                vec![]
            );
        }
        assert_eq!(r.core.published().map(|h| h.generation), Some(2));
    }

    #[test]
    fn a_failed_write_is_offered_again_next_round_in_the_same_generation() {
        let mut r = run(&[]);
        let t = r.now;
        r.failing = true;
        assert_eq!(r.round(claim(A, None, t), claim(A, None, t)), vec![]);
        assert_eq!(r.core.metrics.handoff_write_errors.get(), 1);
        assert!(r.core.published().is_none() && r.core.unpublished());
        // Offered once per round: the failed write is not retried within the round.
        assert!(r.core.poll_write(r.now).is_none());
        r.failing = false;
        let written = r.round(claim(A, None, t), claim(A, None, t));
        assert_eq!(written.len(), 1);
        assert_eq!(
            (written[0].hub, written[0].reason, written[0].generation),
            (HubId::PRIMARY, Reason::Startup, 1)
        );
        assert!(!r.core.unpublished());
    }

    #[test]
    fn a_fresher_claim_for_the_published_hub_rewrites_the_basis_not_the_generation() {
        let mut r = run(&[]);
        let t = r.now;
        r.round(claim(A, None, t), claim(A, None, t));
        let mut decisions = r.core.decisions.subscribe();
        decisions.borrow_and_update();
        let later = r.now;
        let written = r.round(claim(A, None, later), claim(A, None, later));
        assert_eq!(written.len(), 1, "one rewrite of the basis");
        assert_eq!(written[0].generation, 1);
        let basis = written[0].basis.as_ref().and_then(|b| b.claim().ok());
        assert_eq!(basis.and_then(|c| c.last_updated), Some(later));
        assert!(
            !decisions.has_changed().expect("open"),
            "the restart side is not woken by a basis"
        );
        // The same claim again writes nothing.
        assert_eq!(
            r.round(claim(A, None, later), claim(A, None, later)),
            vec![]
        );
    }

    #[test]
    fn a_restarted_sidecar_resumes_in_a_new_generation_without_a_switch() {
        let mut r = run(&[]);
        let mut earlier = crate::testing::handoff(HubId::SECONDARY, 4, Reason::Switch);
        earlier.endpoint = B.to_string();
        earlier.decided_at = r.ago(30).to_string();
        r.core.resume(Earlier::Decision(Box::new(earlier)));
        let resumed = r.write();
        assert_eq!(resumed.len(), 1);
        assert_eq!(
            (resumed[0].hub, resumed[0].reason, resumed[0].generation),
            (HubId::SECONDARY, Reason::Resumed, 5)
        );
        let t = r.now;
        for _ in 0..5 {
            let written = r.round(claim(B, None, t), claim(B, None, t));
            assert!(
                written
                    .iter()
                    .all(|h| h.generation == 5 && h.hub == HubId::SECONDARY),
                "{written:?}"
            );
        }
        assert_eq!(r.core.metrics.switches.get(), 0);
        assert!(!r.events().contains(&"HubSwitched"));
    }

    #[test]
    fn an_unreadable_handoff_is_followed_by_a_later_generation() {
        let mut r = run(&[]);
        r.core.resume(Earlier::Unreadable {
            error: "truncated".into(),
            generation: Some(7),
        });
        assert_eq!(r.write(), vec![]);
        let t = r.now;
        let first = r.round(claim(A, None, t), claim(A, None, t));
        assert_eq!(
            first
                .iter()
                .map(|h| (h.generation, h.reason))
                .collect::<Vec<_>>(),
            vec![(8, Reason::Startup)]
        );
    }

    #[test]
    fn a_pin_read_from_its_file_moves_the_worker_in_n_rounds_and_its_removal_is_said() {
        let mut r = run(&["--override-dir", "/overrides"]);
        let t = r.now;
        r.round(claim(A, None, t), claim(A, None, t));
        let until = (r.now + jiff::SignedDuration::from_hours(1)).to_string();
        let files = |pin: &str| {
            vec![
                (Kind::Pin, Ok(pin.to_string())),
                (Kind::Drain, Ok(String::new())),
            ]
        };
        assert!(r
            .core
            .overrides_read(r.now, files(&format!("secondary until {until}"))));
        assert!(r.events().contains(&"HubPinned"));
        let mut moved = None;
        for round in 1..=5 {
            if let Some(h) = r
                .round(claim(A, None, t), claim(A, None, t))
                .into_iter()
                .next()
            {
                moved = Some((round, h));
                break;
            }
        }
        let (round, h) = moved.expect("the pin moved the worker");
        assert_eq!(round, r.core.config.confirmations as usize);
        assert_eq!((h.hub, h.reason), (HubId::SECONDARY, Reason::Switch));
        let by = h.steered_by.expect("the handoff says what steered it");
        assert_eq!(
            (by.kind.as_str(), by.hub.as_str(), by.until.as_str()),
            ("pin", "secondary", until.as_str())
        );
        // The same text again is no change; its removal ends the pin.
        assert!(!r
            .core
            .overrides_read(r.now, files(&format!("secondary until {until}"))));
        assert!(r.core.overrides_read(r.now, files("")));
        assert!(r.events().contains(&"HubPinEnded"));
    }

    #[test]
    fn a_time_already_past_is_refused_and_moves_nothing() {
        let mut r = run(&["--override-dir", "/overrides"]);
        let t = r.now;
        r.round(claim(A, None, t), claim(A, None, t));
        let past = r.ago(60).to_string();
        let files = vec![
            (Kind::Pin, Ok(format!("secondary until {past}"))),
            (Kind::Drain, Ok(String::new())),
        ];
        assert!(!r.core.overrides_read(r.now, files));
        assert_eq!(r.events(), vec!["HubOverrideRefused"]);
        for _ in 0..5 {
            assert_eq!(r.round(claim(A, None, t), claim(A, None, t)), vec![]);
        }
    }

    #[test]
    fn a_split_brain_the_worker_erases_holds_it_where_it_is_and_is_said_once() {
        // Both controllers claim themselves at one epoch, and the worker erases the claim on
        // the hub it is on: the reads see only the other hub's claim, the watch saw both.
        // Each controller republishes its claim every round. The watch shows the worker's hub
        // claiming itself, so the basis follows its republishes and the worker is never moved.
        let mut r = run(&["--split-brain-window", "5m"]);
        let t = r.now;
        r.round(claim(A, Some(3), t), claim(A, Some(3), t));
        let as_claim = |v: &Verdict| match v {
            Verdict::Claim(c) => c.clone(),
            _ => unreachable!("a claim"),
        };
        let mut n = 0;
        let mut switches = 0;
        for _ in 0..120 {
            n += 1;
            let (a_self, b_self) = (claim(A, Some(3), r.now), claim(B, Some(3), r.now));
            let on = r.core.published().map(|h| h.hub).expect("a decision");
            let (a, b) = if on == HubId::PRIMARY {
                (Verdict::NoClaim, b_self.clone())
            } else {
                (a_self.clone(), Verdict::NoClaim)
            };
            let shown = [
                (HubId::PRIMARY, n, as_claim(&a_self), r.now),
                (HubId::SECONDARY, n, as_claim(&b_self), r.now),
            ];
            switches += r
                .round_seen(a, b, &shown)
                .iter()
                .filter(|h| h.reason == Reason::Switch)
                .count();
        }
        assert_eq!(switches, 0, "switches in 2 minutes of split brain");
        assert_eq!(r.core.metrics.split_brain.get(), 1);
        let events = r.events();
        assert_eq!(
            events.iter().filter(|e| **e == "HubSplitBrain").count(),
            1,
            "{events:?}"
        );
    }

    #[test]
    fn the_claim_clock_of_the_worker_s_hub_is_a_metric_once_its_controller_republishes() {
        // A's controller republishes each claim the worker erases: its watch shows two, then
        // none while A answers without a claim, its watch vouching. The gauge holds the time
        // the clock started, and falls to 0 at A's next claim for itself.
        let mut r = run(&[]);
        let gauge = |r: &Run| r.core.metrics.active_hub_unclaimed_since.get();
        let t = r.now;
        r.round(claim(A, None, t), Verdict::NoClaim);
        r.watched = vec![(HubId::PRIMARY, vouching("1", 0))];
        let own = |at| match claim(A, None, at) {
            Verdict::Claim(c) => c,
            _ => unreachable!("a claim"),
        };
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(gauge(&r), 0.0, "a controller not yet seen republishing");
        // Shown a second before the round that takes it in: the clock runs from then.
        let shown_at = r.now;
        r.round_seen(
            Verdict::NoClaim,
            Verdict::NoClaim,
            &[(HubId::PRIMARY, 1, own(shown_at), shown_at)],
        );
        assert!(r.now > shown_at);
        assert_eq!(
            gauge(&r),
            shown_at.as_second() as f64,
            "from when the watch showed the claim"
        );
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(gauge(&r), shown_at.as_second() as f64);
        let shown_at = r.now;
        r.round_seen(
            Verdict::NoClaim,
            Verdict::NoClaim,
            &[(HubId::PRIMARY, 2, own(shown_at), shown_at)],
        );
        assert_eq!(gauge(&r), shown_at.as_second() as f64, "started again");
        r.watched = Vec::new();
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(gauge(&r), 0.0, "a watch that does not vouch: unknown");
    }

    #[test]
    fn a_claim_older_than_the_basis_is_left_to_its_watch_only_when_the_watch_has_shown_it() {
        // B was promoted; A's controller left its own old claim (no epochs), which a republish
        // alone could make fresher than the basis. On B stands B's claim, or none: the real
        // worker-operator erases the claim on the hub it is on, and then the old claim on A
        // wins the round and is held (rule 5). Either way that claim is left to A's watch.
        for erased in [false, true] {
            let promoted = |watched: Vec<(HubId, Watched)>| {
                let mut r = run(&[]);
                let t = r.now;
                r.round(claim(B, None, t), claim(B, None, t));
                r.versions = [Some("10"), Some("20")];
                r.watched = watched;
                let old = r.ago(60);
                let on_b = if erased {
                    Verdict::NoClaim
                } else {
                    claim(B, None, t)
                };
                let on_a = claim(A, None, old);
                r.watched = showing(&r.watched, &on_a, &on_b);
                assert_eq!(r.round(on_a, on_b), vec![]);
                assert_eq!(r.core.held.is_some(), erased);
                // Ten seconds on, while every watch vouches: a relaxed pace skips the tick.
                let wake = r.at + Duration::from_secs(10);
                let act = r.core.on_wake(wake, pace::Wake::Timer, false, true);
                (r.core.followed_closely().to_vec(), act)
            };
            let both = vec![
                (HubId::PRIMARY, vouching("10", 30)),
                (HubId::SECONDARY, vouching("20", 30)),
            ];
            assert_eq!(
                promoted(both),
                (vec![(HubId::PRIMARY, "10".to_string())], pace::Act::Skip),
                "erased: {erased}"
            );
            // A's watch had not shown the version read, or does not vouch: polled, as before.
            let behind = vec![
                (HubId::PRIMARY, vouching("9", 30)),
                (HubId::SECONDARY, vouching("20", 30)),
            ];
            assert_eq!(
                promoted(behind),
                (vec![], pace::Act::Read),
                "erased: {erased}"
            );
            let unwatched = vec![(HubId::SECONDARY, vouching("20", 30))];
            assert_eq!(
                promoted(unwatched),
                (vec![], pace::Act::Read),
                "erased: {erased}"
            );
        }
    }

    /// A watch that has shown `version` for `held` seconds, without a claim until [`showing`]
    /// gives it the one a read will find.
    fn vouching(version: &str, held: u64) -> Watched {
        Watched {
            resource_version: version.to_string(),
            claim: None,
            held_for: Duration::from_secs(held),
        }
    }

    /// `watched`, each watch showing the claim its hub's read finds (primary `a`, secondary `b`).
    fn showing(watched: &[(HubId, Watched)], a: &Verdict, b: &Verdict) -> Vec<(HubId, Watched)> {
        watched
            .iter()
            .map(|(hub, w)| {
                let read = if *hub == HubId::PRIMARY { a } else { b };
                let claim = match read {
                    Verdict::Claim(c) => Some(c.clone()),
                    _ => None,
                };
                (*hub, Watched { claim, ..w.clone() })
            })
            .collect()
    }

    #[test]
    fn a_claim_the_watches_vouch_for_is_confirmed_by_one_read_and_only_then() {
        // N = 3 at 1 s: the span is 2 s.
        let extra = ["--confirmations", "3", "--confirm-interval", "1s"];
        let promoted = |r: &mut Run| {
            let t = r.now;
            let (a, b) = (claim(A, Some(1), r.ago(60)), claim(B, Some(2), t));
            r.watched = showing(&r.watched, &a, &b);
            r.round(a, b)
        };
        let vouched = [
            (HubId::PRIMARY, vouching("10", 2)),
            (HubId::SECONDARY, vouching("20", 2)),
        ];
        let mut r = run(&extra);
        let t = r.now;
        r.round(claim(A, Some(1), t), claim(A, Some(1), t));
        r.versions = [Some("10"), Some("20")];
        r.watched = vouched.to_vec();
        let written = promoted(&mut r);
        assert_eq!(
            written
                .iter()
                .map(|h| (h.hub, h.reason))
                .collect::<Vec<_>>(),
            vec![(HubId::SECONDARY, Reason::Switch)]
        );
        assert_eq!(r.core.metrics.switches_vouched.get(), 1);
        assert_eq!(r.core.metrics.switches.get(), 1);

        // Each gap in the proof makes the read count as one, as without a watch.
        type Gap = (
            &'static str,
            [Option<&'static str>; 2],
            Vec<(HubId, Watched)>,
        );
        let gaps: [Gap; 4] = [
            (
                "a write the watch has not shown",
                [Some("10"), Some("21")],
                vouched.to_vec(),
            ),
            (
                "a claim younger than the span",
                [Some("10"), Some("20")],
                vec![vouched[0].clone(), (HubId::SECONDARY, vouching("20", 1))],
            ),
            (
                "a hub whose watch does not vouch",
                [Some("10"), Some("20")],
                vouched[..1].to_vec(),
            ),
            (
                "a read without a version",
                [Some("10"), None],
                vouched.to_vec(),
            ),
        ];
        for (gap, versions, watched) in gaps {
            let mut r = run(&extra);
            let t = r.now;
            r.round(claim(A, Some(1), t), claim(A, Some(1), t));
            r.versions = versions;
            r.watched = watched;
            assert_eq!(promoted(&mut r), vec![], "{gap}");
            assert_eq!(r.core.resolver.pending().map(|p| p.count), Some(1), "{gap}");
            assert_eq!(r.core.metrics.switches_vouched.get(), 0, "{gap}");
        }
    }

    #[test]
    fn a_read_of_the_version_the_watch_showed_with_another_claim_is_not_vouched_for() {
        // An etcd restored from a backup issues resourceVersion 20 again, for an object that
        // now claims B, while B's watch, ahead of the restored store, still shows A's claim
        // at 20. The read counts as one of N, not as N.
        let extra = ["--confirmations", "3", "--confirm-interval", "1s"];
        let mut r = run(&extra);
        let t = r.now;
        r.round(claim(A, Some(1), t), claim(A, Some(1), t));
        r.versions = [Some("10"), Some("20")];
        let shown = r.ago(30);
        let (a, b) = (claim(A, Some(1), r.ago(60)), claim(B, Some(2), r.now));
        let watched = [
            (HubId::PRIMARY, vouching("10", 30)),
            (HubId::SECONDARY, vouching("20", 30)),
        ];
        r.watched = showing(&watched, &a, &claim(A, Some(1), shown));
        assert_eq!(r.round(a, b), vec![]);
        assert_eq!(r.core.resolver.pending().map(|p| p.count), Some(1));
        assert_eq!(r.core.metrics.switches_vouched.get(), 0);
    }

    #[test]
    fn ten_minutes_without_a_claim_from_any_hub_are_said_once_per_stretch() {
        // Hubs that answer and never show a claim: no controller in HA mode, or a CRD that
        // drops the field. The gauge holds the first round, then the last claim seen.
        let mut r = run(&[]);
        let gauge = |r: &Run| r.core.metrics.claim_seen.get();
        let said = |r: &mut Run| {
            r.events()
                .into_iter()
                .filter(|e| *e == "HubNoClaim")
                .count()
        };
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        let first = r.now;
        assert_eq!(gauge(&r), first.as_second() as f64);
        r.now += jiff::SignedDuration::from_secs(598);
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(said(&mut r), 0, "599 s");
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(said(&mut r), 1, "600 s");
        assert_eq!(gauge(&r), first.as_second() as f64);
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(said(&mut r), 0, "once");
        // A claim a watch showed (the worker erased it before any read) ends the stretch.
        let shown = match claim(A, None, r.now) {
            Verdict::Claim(c) => c,
            _ => unreachable!("a claim"),
        };
        r.round_seen(
            Verdict::NoClaim,
            Verdict::NoClaim,
            &[(HubId::PRIMARY, 1, shown, r.now)],
        );
        assert_eq!(gauge(&r), r.now.as_second() as f64);
        r.now += jiff::SignedDuration::from_secs(599);
        r.round(Verdict::NoClaim, Verdict::NoClaim);
        assert_eq!(said(&mut r), 1, "the next stretch is said again");
        // A read claim ends it too, even one that names no configured hub.
        r.round(
            claim("https://203.0.113.9:6443", None, r.now),
            Verdict::NoClaim,
        );
        assert_eq!(gauge(&r), r.now.as_second() as f64);
    }
}
