//! The pace of the reads, as one machine without IO: [`Pacer`]. Told when the loop wakes
//! (its timer, or news from a watch), whether a pin or drain began or ended, and what each
//! round left, it says whether to read the hubs now, later or not at all, and when to wake
//! next ([`Pacer::poll_at`]). The loop in `follower.rs` sleeps, reads and publishes; every
//! fact the pace depends on is here, and nothing is read back from a view.

use std::time::Duration;

use tokio::time::Instant;

use crate::hub::Probe;
use crate::resolver::{Held, Hold, Pending, Step};
use crate::verdict::{HubId, Verdict};

/// Rounds started by the watch are at least this far apart, so an event storm costs a bounded
/// number of rounds (notifications that arrive meanwhile fold into one).
const MIN_WATCH_SPACING: Duration = Duration::from_millis(200);

/// Why the loop is awake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wake {
    /// Its timer: [`Pacer::poll_at`], or the end of a pin or drain.
    Timer,
    /// A watch saw a claim change, or failed.
    News,
}

/// What the loop does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Act {
    /// Read every hub now.
    Read,
    /// Read every hub at this time, not before: a pending switch's confirming reads, and
    /// rounds started by the watch, keep their spacing whatever the watches say, since N
    /// reads in quick succession would confirm a blip.
    ReadAt(Instant),
    /// A tick on which every hub's watch vouches for it and nothing waits on time: no read.
    /// The loop is alive all the same.
    Skip,
    /// Woken before anything is due (for a pin's end the clock had not quite reached): sleep
    /// on.
    Sleep,
}

/// What a round left, as far as the pace is concerned.
#[derive(Debug, Clone, Default)]
pub(super) struct Left {
    /// Nothing in it waits on time ([`settled`]), and the decision is on disk.
    pub settled: bool,
    /// A switch is pending confirmation.
    pub pending: bool,
    /// What a hub's silence left unfinished ([`unfinished`]).
    pub unfinished: Option<Unfinished>,
    /// The round gives the quick retries back ([`gives_retries_back`]).
    pub gives_back: bool,
    /// When the last hub that asked for a pause (`Retry-After`) may be read again.
    pub paused_until: Option<Instant>,
    /// When the rule's outcome may change with time alone although the round was settled:
    /// rule 10's claim clock reaching `--dead-hub-after`. The first tick from then reads.
    pub due: Option<Instant>,
}

/// The pace of the reads. Reads come every `--poll-interval`; every `--confirm-interval`
/// while a switch is pending, and once after a round that silence left unfinished; every
/// `--watched-poll-interval` while every hub's watch vouches for its hub and the last round
/// was settled. News from a watch, or a pin or drain that began or ended, starts a round at
/// once, spaced as [`Act::ReadAt`] says.
#[derive(Debug)]
pub(super) struct Pacer {
    poll: Duration,
    watched: Duration,
    confirm: Duration,
    /// When the loop wakes next, absent news.
    next_tick: Instant,
    /// When the last read started.
    last_read: Option<Instant>,
    /// The last round was settled ([`Left::settled`]).
    settled: bool,
    /// A switch was pending after the last round.
    pending: bool,
    /// [`Left::due`] of the last round.
    due: Option<Instant>,
    quick_retry: QuickRetry,
    /// The span N confirming rounds take: news that comes while every watch vouches is read
    /// once, this long after it, and that read can stand for all N (`Core::watches_vouch`).
    vouched_span: Duration,
}

impl Pacer {
    /// A pace whose first tick is `now`.
    pub(super) fn new(now: Instant, poll: Duration, watched: Duration, confirm: Duration) -> Self {
        Self {
            poll,
            watched,
            confirm,
            next_tick: now,
            last_read: None,
            settled: false,
            pending: false,
            due: None,
            quick_retry: QuickRetry::default(),
            vouched_span: Duration::ZERO,
        }
    }

    /// News read a `span` after it while the watches vouch ([`Pacer::on_wake`]).
    pub(super) fn with_vouched_span(mut self, span: Duration) -> Self {
        self.vouched_span = span;
        self
    }

    /// When the loop must wake next if no news comes.
    pub(super) fn poll_at(&self) -> Instant {
        self.next_tick
    }

    /// Whether reads are relaxed to `--watched-poll-interval`: every hub's watch vouches for
    /// its hub (`vouched`), no switch is pending, and the last round left nothing that time
    /// alone could change.
    pub(super) fn relaxed(&self, vouched: bool) -> bool {
        vouched && self.settled && !self.pending
    }

    /// The loop woke at `now` for `wake`; `steered` when a pin or drain began or ended, and
    /// `vouched` when every hub's watch vouches for its hub.
    pub(super) fn on_wake(
        &mut self,
        now: Instant,
        wake: Wake,
        steered: bool,
        vouched: bool,
    ) -> Act {
        if wake == Wake::News || steered {
            let mut spacing = if self.pending {
                self.confirm
            } else {
                Duration::ZERO
            };
            if wake == Wake::News {
                spacing = spacing.max(MIN_WATCH_SPACING);
            }
            let mut at = self.last_read.map(|t| t + spacing);
            // News while every watch vouches and no switch is pending: one read once the
            // claim has stood for the span, which then stands for the N confirming reads; news
            // in between is folded into it. A pin or drain is read at once: the watches do not
            // vouch for it.
            if wake == Wake::News && !steered && vouched && !self.pending {
                at = at.max(Some(now + self.vouched_span));
            }
            return match at.filter(|t| *t > now) {
                Some(at) => Act::ReadAt(at),
                None => Act::Read,
            };
        }
        if now < self.next_tick {
            return Act::Sleep;
        }
        // Counted to the nearest tick, as the watched interval is.
        let due = self.due.is_some_and(|d| now + self.poll / 2 >= d);
        if due
            || tick_reads(
                now,
                self.last_read,
                self.relaxed(vouched),
                self.poll,
                self.watched,
            )
        {
            return Act::Read;
        }
        // After a long stall (a suspended process), the next tick is a poll interval from
        // now, not a burst of overdue ones.
        self.next_tick += self.poll;
        if self.next_tick <= now {
            self.next_tick = now + self.poll;
        }
        Act::Skip
    }

    /// A round that started at `started` left `left`. Returns what silence left unfinished
    /// when that earns one quick read at `--confirm-interval`.
    pub(super) fn round_done(&mut self, started: Instant, left: Left) -> Option<Unfinished> {
        self.last_read = Some(started);
        self.settled = left.settled;
        self.pending = left.pending;
        self.due = left.due;
        let quick = self
            .quick_retry
            .after_round(left.unfinished.clone(), left.gives_back);
        // While a switch is pending, the confirming reads come quicker: the protection is the
        // count of consecutive agreeing reads, and waiting a whole poll interval between them
        // only adds to the outage. If a round overran, the next one starts at once.
        self.next_tick = if self.pending || quick {
            started + self.confirm
        } else {
            started + self.poll
        };
        if quick {
            // A hub that answered 429 or 503 with Retry-After is not asked before then: the
            // quick round waits for it, or it would find that hub silent again and be spent.
            self.next_tick = quick_retry_at(self.next_tick, left.paused_until, started + self.poll);
        }
        left.unfinished.filter(|_| quick)
    }
}

/// A round left nothing that time alone could change: every hub answered, and nothing was
/// decided, held or rejected, and the startup default is not waiting. A held claim whose
/// controller clock catches up, or a claim dated ahead of ours, changes with time and no
/// event; reads at `--poll-interval` are what see it. A claim older than the basis, a stale
/// one or a winner held for it, is settled only when `older_followed`: at equal or absent
/// epochs a republish that changes only `lastUpdated` makes it fresher, and the watch raises
/// news for that only while it follows the claim closely (`claim_watch::Closely`).
pub(super) fn settled(probes: &[Probe], step: &Step, older_followed: bool) -> bool {
    let held_for_basis = |h: &Held| matches!(h.why, Hold::NotFresherThanBasis { .. });
    probes
        .iter()
        .all(|p| !matches!(p.verdict, Verdict::Error(_)))
        && step.decision.is_none()
        && step.rejected.is_empty()
        && (step.stale.is_empty() || older_followed)
        && step
            .held
            .as_ref()
            .is_none_or(|h| older_followed && held_for_basis(h))
        && step.undecided_until.is_none()
}

/// Whether a tick at `now` reads the hubs. Always, unless reads `may_relax` (every hub's watch
/// vouches for its hub, the last round was settled, no switch is pending). Then only once the
/// last read is `watched` old, counted to the nearest tick, since ticks come every `poll` and
/// a timer is never exact.
fn tick_reads(
    now: Instant,
    last_read: Option<Instant>,
    may_relax: bool,
    poll: Duration,
    watched: Duration,
) -> bool {
    !may_relax || last_read.is_none_or(|t| now + poll / 2 >= t + watched)
}

/// What a round left unfinished because some hub did not answer (a timeout, a refused
/// connection, a 5xx, a 429): silence is not a "no", and under a burst of reads (a fleet's
/// promotion) a read that fails says nothing about the claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unfinished {
    /// A pending switch to this hub ended without a decision: it was pending before the
    /// round and is not after it. Keyed by the hub, never by what its claim says (the
    /// identity), so that the list of spent retries is bounded by the configured hubs.
    Streak(HubId),
    /// The round was started by a watch (a claim changed, or a watch failed), nothing was
    /// pending before or after it, and nothing was decided: the change may be on the hub
    /// that did not answer.
    News,
}

pub(super) fn unfinished(
    before: Option<&Pending>,
    after: Option<&Pending>,
    step: &Step,
    probes: &[Probe],
    watch_started: bool,
) -> Option<Unfinished> {
    let silent = probes
        .iter()
        .any(|p| matches!(p.verdict, Verdict::Error(_)));
    if !silent || step.decision.is_some() {
        return None;
    }
    match (before, after) {
        (Some(p), None) => Some(Unfinished::Streak(p.candidate.hub)),
        (None, None) if watch_started => Some(Unfinished::News),
        _ => None,
    }
}

/// Whether the next read comes at `--confirm-interval` although no switch is pending: once for
/// each thing a round left unfinished. Without it the next read waits a whole
/// `--poll-interval` (10 s), and that wait is the tail of a promotion. Once, so that a hub
/// which keeps failing is not read at `--confirm-interval` for as long as it fails; a round
/// that settles, or a decision, gives the retry back.
#[derive(Debug, Default)]
struct QuickRetry {
    spent: Vec<Unfinished>,
}

impl QuickRetry {
    fn after_round(&mut self, unfinished: Option<Unfinished>, settled_or_decided: bool) -> bool {
        if settled_or_decided {
            self.spent.clear();
        }
        match unfinished {
            Some(u) if !self.spent.contains(&u) => {
                self.spent.push(u);
                true
            }
            _ => false,
        }
    }
}

/// Whether a round gives the quick retries back: it decided, or every hub answered, nothing
/// waits on time and no switch is pending. A round that starts a pending switch does not: a
/// hub that fails every other read would otherwise get a quick round after each failure,
/// and be read at `--confirm-interval` for as long as it fails.
/// `settled` is [`settled`] of the round's answers as the rule took them: a claim dated too
/// far ahead counts as no answer there too, so such a hub does not give the retries back.
pub(super) fn gives_retries_back(settled: bool, step: &Step, pending: bool) -> bool {
    step.decision.is_some() || (settled && !pending)
}

/// When the quick round after a streak broken by silence starts: at `--confirm-interval`
/// (`at`), or when the last hub that asked for a pause (`Retry-After`) may be read again, if
/// that is later; never later than the round a tick would have brought anyway (`tick`).
fn quick_retry_at(at: Instant, paused_until: Option<Instant>, tick: Instant) -> Instant {
    paused_until.map_or(at, |p| at.max(p).min(tick))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{Candidate, Decision, Held, Hold, Reason};
    use crate::verdict::{ErrorReason, HubId, ProbeError};

    const POLL: Duration = Duration::from_secs(10);
    const WATCHED: Duration = Duration::from_secs(120);

    /// The ticks after a read at `start` that read, among the first `ticks`, each tick off
    /// its time by `skew` (early when negative).
    fn reading_ticks(may_relax: bool, watched: Duration, skew_ms: i64, ticks: u32) -> Vec<u32> {
        let start = Instant::now();
        let mut last = start;
        let mut read = Vec::new();
        for k in 1..=ticks {
            let on_time = start + POLL * k;
            let now = if skew_ms < 0 {
                on_time - Duration::from_millis(skew_ms.unsigned_abs())
            } else {
                on_time + Duration::from_millis(skew_ms as u64)
            };
            if tick_reads(now, Some(last), may_relax, POLL, watched) {
                read.push(k);
                last = now;
            }
        }
        read
    }

    #[test]
    fn without_the_watches_vouching_every_tick_reads() {
        assert_eq!(reading_ticks(false, WATCHED, 0, 5), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn while_the_watches_vouch_a_read_comes_every_watched_interval() {
        assert_eq!(reading_ticks(true, WATCHED, 0, 36), vec![12, 24, 36]);
    }

    #[test]
    fn a_tick_a_little_early_or_late_does_not_shift_the_reads_by_a_tick() {
        for skew in [-3, -1, 1, 40] {
            assert_eq!(
                reading_ticks(true, WATCHED, skew, 24),
                vec![12, 24],
                "skew {skew} ms"
            );
        }
    }

    #[test]
    fn a_watched_interval_equal_to_the_poll_interval_reads_every_tick() {
        assert_eq!(reading_ticks(true, POLL, 0, 4), vec![1, 2, 3, 4]);
    }

    #[test]
    fn the_first_tick_always_reads() {
        assert!(tick_reads(Instant::now(), None, true, POLL, WATCHED));
    }

    fn probe(hub: HubId, verdict: Verdict) -> Probe {
        Probe {
            hub,
            verdict,
            latency: Duration::ZERO,
            resource_version: None,
        }
    }

    /// Both hubs answered, without a claim.
    fn answered() -> [Probe; 2] {
        [
            probe(HubId::PRIMARY, Verdict::NoClaim),
            probe(HubId::SECONDARY, Verdict::NoClaim),
        ]
    }

    /// The primary answered; the secondary's read timed out.
    fn secondary_silent() -> [Probe; 2] {
        [
            probe(HubId::PRIMARY, Verdict::NoClaim),
            probe(
                HubId::SECONDARY,
                Verdict::Error(ProbeError::new(ErrorReason::Timeout, "late")),
            ),
        ]
    }

    /// A round that decided a switch to the secondary.
    fn switched() -> Step {
        Step {
            decision: Some(Decision {
                hub: HubId::SECONDARY,
                identity: None,
                reason: Reason::Switch,
                basis: None,
                steered: None,
            }),
            ..Step::default()
        }
    }

    #[test]
    fn a_round_is_settled_only_when_nothing_in_it_waits_on_time() {
        let answered = answered();
        assert!(settled(&answered, &Step::default(), false));
        assert!(!settled(&secondary_silent(), &Step::default(), false));

        let candidate = Candidate {
            hub: HubId::SECONDARY,
            identity: None,
        };
        let steps = [
            switched(),
            Step {
                rejected: vec![HubId::PRIMARY],
                ..Step::default()
            },
            Step {
                stale: vec![HubId::PRIMARY],
                ..Step::default()
            },
            Step {
                held: Some(Held {
                    candidate: candidate.clone(),
                    why: Hold::Unauthenticated(ErrorReason::Unauthorized),
                }),
                ..Step::default()
            },
        ];
        for step in steps {
            assert!(!settled(&answered, &step, false), "{step:?}");
        }
        // A claim older than the basis that its watch follows closely waits on a write the
        // watch will show, not on time.
        let stale = Step {
            stale: vec![HubId::PRIMARY],
            ..Step::default()
        };
        assert!(settled(&answered, &stale, true));
        assert!(!settled(&secondary_silent(), &stale, true));
        // So does a winner held for being no fresher than the basis; no other hold.
        let held = |why: Hold| Step {
            held: Some(Held {
                candidate: candidate.clone(),
                why,
            }),
            ..Step::default()
        };
        let old = |at: i64| crate::claim::Claim {
            endpoint: crate::claim::Endpoint::parse("https://a.example:6443").expect("valid"),
            identity: None,
            last_updated: Some(jiff::Timestamp::from_second(at).expect("valid")),
            epoch: None,
        };
        let basis = held(Hold::NotFresherThanBasis {
            claim: old(1_800_000_000),
            basis: old(1_800_000_060),
        });
        assert!(settled(&answered, &basis, true));
        assert!(!settled(&answered, &basis, false));
        let refused = held(Hold::Unauthenticated(ErrorReason::Unauthorized));
        assert!(!settled(&answered, &refused, true));
    }

    fn pending(hub: HubId, count: u32) -> Pending {
        Pending {
            candidate: Candidate {
                hub,
                identity: Some("ctrl-b".into()),
            },
            count,
            steered: None,
        }
    }

    #[test]
    fn a_round_leaves_something_unfinished_only_when_a_hub_did_not_answer_and_nothing_was_decided()
    {
        let b = pending(HubId::SECONDARY, 1);
        let (answered, silent) = (answered(), secondary_silent());
        let none = Step::default();
        let streak = Some(Unfinished::Streak(b.candidate.hub));
        assert_eq!(unfinished(Some(&b), None, &none, &silent, false), streak);
        assert_eq!(unfinished(Some(&b), None, &none, &silent, true), streak);
        // The hubs answered and the streak ended: they said no.
        assert_eq!(unfinished(Some(&b), None, &none, &answered, true), None);
        // Still pending: nothing was broken.
        let two = pending(HubId::SECONDARY, 2);
        assert_eq!(unfinished(Some(&b), Some(&two), &none, &silent, true), None);
        // Nothing pending: unfinished only when a watch started the round.
        assert_eq!(
            unfinished(None, None, &none, &silent, true),
            Some(Unfinished::News)
        );
        assert_eq!(unfinished(None, None, &none, &silent, false), None);
        assert_eq!(unfinished(None, None, &none, &answered, true), None);
        // A switch started pending in spite of the silence: it goes on at the confirm interval.
        assert_eq!(unfinished(None, Some(&b), &none, &silent, true), None);
        // The round decided.
        assert_eq!(unfinished(Some(&b), None, &switched(), &silent, true), None);
        assert_eq!(unfinished(None, None, &switched(), &silent, true), None);
    }

    #[test]
    fn a_quick_retry_is_given_once_for_each_unfinished_thing_until_a_round_settles_or_decides() {
        let b = Unfinished::Streak(pending(HubId::SECONDARY, 1).candidate.hub);
        let a = Unfinished::Streak(pending(HubId::PRIMARY, 1).candidate.hub);
        let mut retry = QuickRetry::default();
        assert!(!retry.after_round(None, false), "nothing unfinished");
        assert!(retry.after_round(Some(b.clone()), false), "the first break");
        // A hub that keeps failing every other read: no second quick retry for the same
        // candidate, so it is read at --poll-interval, not --confirm-interval, meanwhile.
        assert!(!retry.after_round(None, false));
        assert!(!retry.after_round(Some(b.clone()), false));
        // Another candidate, or news the watch brought, gets its own; each once.
        assert!(retry.after_round(Some(a.clone()), false));
        assert!(retry.after_round(Some(Unfinished::News), false));
        assert!(!retry.after_round(Some(Unfinished::News), false));
        // A settled round or a decision gives them back.
        assert!(!retry.after_round(None, true));
        assert!(retry.after_round(Some(b.clone()), false));
        assert!(retry.after_round(Some(Unfinished::News), true));
    }

    #[test]
    fn the_quick_round_waits_for_a_hub_that_asked_for_a_pause_but_not_past_the_tick() {
        let t0 = Instant::now();
        let at = t0 + Duration::from_secs(1);
        let tick = t0 + Duration::from_secs(10);
        assert_eq!(quick_retry_at(at, None, tick), at);
        let paused = t0 + Duration::from_millis(1300);
        assert_eq!(quick_retry_at(at, Some(paused), tick), paused);
        assert_eq!(quick_retry_at(at, Some(t0), tick), at);
        assert_eq!(
            quick_retry_at(at, Some(t0 + Duration::from_secs(60)), tick),
            tick
        );
    }

    #[test]
    fn a_hub_failing_every_other_read_gets_one_quick_round_not_one_each_time() {
        let b = pending(HubId::SECONDARY, 1);
        let mut retry = QuickRetry::default();
        let mut quick = 0;
        for _ in 0..5 {
            // B answers: a switch to it starts pending, which gives nothing back.
            let back = gives_retries_back(
                settled(&answered(), &Step::default(), false),
                &Step::default(),
                true,
            );
            assert!(!back);
            assert!(!retry.after_round(None, back));
            // B fails: the streak breaks.
            let broke = unfinished(Some(&b), None, &Step::default(), &secondary_silent(), false);
            let back = gives_retries_back(
                settled(&secondary_silent(), &Step::default(), false),
                &Step::default(),
                false,
            );
            quick += usize::from(retry.after_round(broke, back));
        }
        assert_eq!(quick, 1);
        // A round that settles with nothing pending, or a decision, gives it back.
        assert!(gives_retries_back(
            settled(&answered(), &Step::default(), false),
            &Step::default(),
            false
        ));
        assert!(gives_retries_back(
            settled(&secondary_silent(), &switched(), false),
            &switched(),
            false
        ));
    }

    // The pace as a machine: sequences of wakes and rounds, at made-up times.

    const CONFIRM: Duration = Duration::from_secs(1);

    fn pacer(t0: Instant) -> Pacer {
        Pacer::new(t0, POLL, WATCHED, CONFIRM)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// What a settled round leaves: nothing pending, nothing unfinished.
    fn quiet() -> Left {
        Left {
            settled: true,
            gives_back: true,
            ..Left::default()
        }
    }

    /// A round that left a switch pending.
    fn pending_left() -> Left {
        Left {
            pending: true,
            ..Left::default()
        }
    }

    /// A round in which a hub's silence broke off the pending switch to the secondary.
    fn broken_left() -> Left {
        Left {
            unfinished: Some(Unfinished::Streak(HubId::SECONDARY)),
            ..Left::default()
        }
    }

    #[test]
    fn the_first_wake_reads_and_then_a_tick_comes_every_poll_interval() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        assert_eq!(p.poll_at(), t0);
        assert_eq!(p.on_wake(t0, Wake::Timer, false, false), Act::Read);
        assert_eq!(p.round_done(t0, quiet()), None);
        assert_eq!(p.poll_at(), t0 + POLL);
        // A round that overran its interval: the next one is due at once.
        assert_eq!(
            p.on_wake(t0 + POLL * 3, Wake::Timer, false, false),
            Act::Read
        );
    }

    #[test]
    fn a_timer_that_fires_before_the_tick_without_a_pin_change_sleeps_on() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(t0, quiet());
        // Woken for a pin's end the clock had not quite reached.
        assert_eq!(
            p.on_wake(t0 + ms(4000), Wake::Timer, false, true),
            Act::Sleep
        );
        assert_eq!(p.poll_at(), t0 + POLL);
        // The pin did end: read now, whatever the tick.
        assert_eq!(p.on_wake(t0 + ms(4000), Wake::Timer, true, true), Act::Read);
    }

    #[test]
    fn while_the_watches_vouch_and_rounds_settle_ticks_skip_until_the_watched_interval() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(t0, quiet());
        assert!(p.relaxed(true));
        assert_eq!(settled_reads(&mut p, t0, 24), vec![12, 24]);
    }

    /// The ticks among the next `ticks` that read, each read leaving a settled round; a tick
    /// comes every poll interval from `t0`, read or not.
    fn settled_reads(p: &mut Pacer, t0: Instant, ticks: u32) -> Vec<u32> {
        let mut reads = Vec::new();
        for k in 1..=ticks {
            let now = p.poll_at();
            assert_eq!(now, t0 + POLL * k, "a tick every poll interval");
            match p.on_wake(now, Wake::Timer, false, true) {
                Act::Read => {
                    reads.push(k);
                    p.round_done(now, quiet());
                }
                Act::Skip => {}
                other => panic!("tick {k}: {other:?}"),
            }
        }
        reads
    }

    #[test]
    fn a_settled_round_with_a_due_time_is_read_again_at_the_first_tick_from_then() {
        // Rule 10's claim clock reaches --dead-hub-after 35 s after the read: the ticks skip
        // until the one nearest it (30 s, within half a poll interval), not for 120 s.
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(
            t0,
            Left {
                due: Some(t0 + ms(35_000)),
                ..quiet()
            },
        );
        assert!(p.relaxed(true));
        assert_eq!(settled_reads(&mut p, t0, 6), vec![3]);
    }

    #[test]
    fn reads_do_not_relax_while_unsettled_pending_or_unvouched() {
        let t0 = Instant::now();
        for (left, vouched) in [
            (quiet(), false),
            (Left::default(), true),
            (pending_left(), true),
        ] {
            let mut p = pacer(t0);
            p.round_done(t0, left.clone());
            assert!(!p.relaxed(vouched), "{left:?} vouched {vouched}");
            let now = p.poll_at();
            assert_eq!(p.on_wake(now, Wake::Timer, false, vouched), Act::Read);
        }
    }

    #[test]
    fn after_a_long_stall_a_skipped_tick_is_one_poll_interval_ahead_not_a_burst() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(t0, quiet());
        let late = t0 + ms(35_000);
        assert_eq!(p.on_wake(late, Wake::Timer, false, true), Act::Skip);
        assert_eq!(p.poll_at(), late + POLL);
    }

    #[test]
    fn a_pending_switch_is_read_at_the_confirm_interval_and_news_keeps_that_spacing() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(t0, pending_left());
        assert_eq!(p.poll_at(), t0 + CONFIRM);
        // The watch saw the claim again 100 ms later: the read waits for the spacing, or N
        // reads in quick succession would confirm a blip.
        assert_eq!(
            p.on_wake(t0 + ms(100), Wake::News, false, true),
            Act::ReadAt(t0 + CONFIRM)
        );
        // So does a pin that began meanwhile.
        assert_eq!(
            p.on_wake(t0 + ms(100), Wake::Timer, true, true),
            Act::ReadAt(t0 + CONFIRM)
        );
        assert_eq!(p.on_wake(t0 + CONFIRM, Wake::News, false, true), Act::Read);
    }

    #[test]
    fn news_while_the_watches_vouch_is_read_once_after_the_span() {
        let t0 = Instant::now();
        let span = ms(2000);
        let mut p = pacer(t0).with_vouched_span(span);
        assert_eq!(p.on_wake(t0, Wake::Timer, false, true), Act::Read);
        p.round_done(t0, quiet());
        let news = t0 + ms(5000);
        assert_eq!(
            p.on_wake(news, Wake::News, false, true),
            Act::ReadAt(news + span)
        );
        // Unvouched news, a pin or drain, or a pending switch: the spacing of today.
        assert_eq!(p.on_wake(news, Wake::News, false, false), Act::Read);
        assert_eq!(p.on_wake(news, Wake::News, true, true), Act::Read);
        p.round_done(news, pending_left());
        let next = news + ms(100);
        assert_eq!(
            p.on_wake(next, Wake::News, false, true),
            Act::ReadAt(news + ms(1000))
        );
    }

    #[test]
    fn news_without_a_pending_switch_reads_at_once_but_storms_are_spaced() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(t0, quiet());
        assert_eq!(
            p.on_wake(t0 + ms(50), Wake::News, false, true),
            Act::ReadAt(t0 + MIN_WATCH_SPACING)
        );
        assert_eq!(p.on_wake(t0 + ms(5000), Wake::News, false, true), Act::Read);
        // A pin that began reads at once.
        assert_eq!(p.on_wake(t0 + ms(50), Wake::Timer, true, true), Act::Read);
    }

    #[test]
    fn a_streak_broken_by_silence_gets_one_quick_round_then_the_poll_interval() {
        let t0 = Instant::now();
        let mut p = pacer(t0);
        p.round_done(t0, pending_left());
        let t1 = t0 + CONFIRM;
        assert_eq!(
            p.round_done(t1, broken_left()),
            Some(Unfinished::Streak(HubId::SECONDARY))
        );
        assert_eq!(p.poll_at(), t1 + CONFIRM);
        // The hub answers, a switch to it is pending again, and the next read breaks it
        // again: no second quick round for the same hub.
        let t2 = t1 + CONFIRM;
        p.round_done(t2, pending_left());
        let t3 = t2 + CONFIRM;
        assert_eq!(p.round_done(t3, broken_left()), None);
        assert_eq!(p.poll_at(), t3 + POLL);
        // A settled round gives it back.
        let t4 = t3 + POLL;
        p.round_done(t4, quiet());
        let t5 = t4 + POLL;
        assert!(p.round_done(t5, broken_left()).is_some());
    }

    #[test]
    fn the_quick_round_waits_for_retry_after_but_never_past_the_tick() {
        let t0 = Instant::now();
        for (paused, at) in [
            (None, t0 + CONFIRM),
            (Some(t0 + ms(2500)), t0 + ms(2500)),
            (Some(t0 + ms(60_000)), t0 + POLL),
        ] {
            let mut p = pacer(t0);
            p.round_done(
                t0,
                Left {
                    paused_until: paused,
                    ..broken_left()
                },
            );
            assert_eq!(p.poll_at(), at, "paused until {paused:?}");
        }
    }

    proptest::proptest! {
        /// Whatever the wakes and rounds: a round never starts within --confirm-interval of
        /// the last while a switch is pending (N reads in quick succession would confirm a
        /// blip), nor within the watch spacing after news; and no tick is ever more than a
        /// poll interval away, so the loop never sleeps through a hold's end.
        #[test]
        fn reads_keep_their_spacing_and_the_loop_always_wakes_within_a_poll_interval(
            script in proptest::collection::vec(
                (0u64..15_000, 0u8..4, proptest::bool::ANY, proptest::bool::ANY, 0u8..4),
                1..60,
            )
        ) {
            let t0 = Instant::now();
            let mut p = pacer(t0);
            let mut now = t0;
            let mut last_read: Option<Instant> = None;
            let mut pending = false;
            for (gap, wake, steered, vouched, left) in script {
                // Woken by the timer no later than it asked, or earlier by news.
                let wake = if wake == 0 { Wake::Timer } else { Wake::News };
                now = match wake {
                    Wake::Timer => p.poll_at().max(now),
                    Wake::News => now + ms(gap).min(p.poll_at().saturating_duration_since(now)),
                };
                let at = match p.on_wake(now, wake, steered, vouched) {
                    Act::Read => now,
                    Act::ReadAt(at) => {
                        proptest::prop_assert!(at > now);
                        at
                    }
                    Act::Skip | Act::Sleep => {
                        proptest::prop_assert!(p.poll_at() > now);
                        proptest::prop_assert!(p.poll_at() <= now + POLL);
                        continue;
                    }
                };
                if let Some(last) = last_read {
                    if pending {
                        proptest::prop_assert!(at >= last + CONFIRM);
                    }
                    if wake == Wake::News {
                        proptest::prop_assert!(at >= last + MIN_WATCH_SPACING);
                    }
                }
                now = at;
                let left = match left {
                    0 => quiet(),
                    1 => pending_left(),
                    2 => broken_left(),
                    _ => Left::default(),
                };
                pending = left.pending;
                p.round_done(now, left);
                last_read = Some(now);
                proptest::prop_assert!(p.poll_at() > now);
                proptest::prop_assert!(p.poll_at() <= now + POLL);
            }
        }
    }
}
