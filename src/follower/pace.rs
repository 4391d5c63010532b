//! The pace of the reads: whether a tick reads the hubs, given what the watches vouch for and
//! what the last round left. Pure; the loop in `follower.rs` asks with the clock's time.

use std::time::Duration;

use tokio::time::Instant;

use crate::hub::Probe;
use crate::resolver::{Pending, Step};
use crate::verdict::{HubId, Verdict};

/// A round left nothing that time alone could change: every hub answered, and nothing was
/// decided, held, rejected or older than the basis, and the startup default is not waiting. A held claim whose controller clock
/// catches up, or a claim dated ahead of ours, changes with time and no event; reads at
/// `--poll-interval` are what see it.
pub(super) fn settled(probes: &[Probe], step: &Step) -> bool {
    probes
        .iter()
        .all(|p| !matches!(p.verdict, Verdict::Error(_)))
        && step.decision.is_none()
        && step.rejected.is_empty()
        && step.stale.is_empty()
        && step.held.is_none()
        && step.undecided_until.is_none()
}

/// Whether a tick at `now` reads the hubs. Always, unless reads `may_relax` (every hub's watch
/// vouches for its hub, the last round was settled, no switch is pending). Then only once the
/// last read is `watched` old, counted to the nearest tick, since ticks come every `poll` and
/// a timer is never exact.
pub(super) fn tick_reads(
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
pub(super) struct QuickRetry {
    spent: Vec<Unfinished>,
}

impl QuickRetry {
    pub(super) fn after_round(
        &mut self,
        unfinished: Option<Unfinished>,
        settled_or_decided: bool,
    ) -> bool {
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
pub(super) fn quick_retry_at(at: Instant, paused_until: Option<Instant>, tick: Instant) -> Instant {
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
        assert!(settled(&answered, &Step::default()));
        assert!(!settled(&secondary_silent(), &Step::default()));

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
                    candidate,
                    why: Hold::Unauthenticated(ErrorReason::Unauthorized),
                }),
                ..Step::default()
            },
        ];
        for step in steps {
            assert!(!settled(&answered, &step), "{step:?}");
        }
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
                settled(&answered(), &Step::default()),
                &Step::default(),
                true,
            );
            assert!(!back);
            assert!(!retry.after_round(None, back));
            // B fails: the streak breaks.
            let broke = unfinished(Some(&b), None, &Step::default(), &secondary_silent(), false);
            let back = gives_retries_back(
                settled(&secondary_silent(), &Step::default()),
                &Step::default(),
                false,
            );
            quick += usize::from(retry.after_round(broke, back));
        }
        assert_eq!(quick, 1);
        // A round that settles with nothing pending, or a decision, gives it back.
        assert!(gives_retries_back(
            settled(&answered(), &Step::default()),
            &Step::default(),
            false
        ));
        assert!(gives_retries_back(
            settled(&secondary_silent(), &switched()),
            &switched(),
            false
        ));
    }
}
