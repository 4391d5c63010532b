//! The pace of the reads: whether a tick reads the hubs, given what the watches vouch for and
//! what the last round left. Pure; the loop in `follower.rs` asks with the clock's time.

use std::time::Duration;

use tokio::time::Instant;

use crate::hub::Probe;
use crate::resolver::Step;
use crate::verdict::Verdict;

/// A round left nothing that time alone could change: every hub answered, and nothing was
/// decided, held, rejected or older than the basis. A held claim whose controller clock
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

    #[test]
    fn a_round_is_settled_only_when_nothing_in_it_waits_on_time() {
        let answered = [
            probe(HubId::Primary, Verdict::NoClaim),
            probe(HubId::Secondary, Verdict::NoClaim),
        ];
        assert!(settled(&answered, &Step::default()));

        let failed = [
            probe(HubId::Primary, Verdict::NoClaim),
            probe(
                HubId::Secondary,
                Verdict::Error(ProbeError::new(ErrorReason::Timeout, "late")),
            ),
        ];
        assert!(!settled(&failed, &Step::default()));

        let candidate = Candidate {
            hub: HubId::Secondary,
            identity: None,
        };
        let steps = [
            Step {
                decision: Some(Decision {
                    hub: HubId::Secondary,
                    identity: None,
                    reason: Reason::Switch,
                    basis: None,
                }),
                ..Step::default()
            },
            Step {
                rejected: vec![HubId::Primary],
                ..Step::default()
            },
            Step {
                stale: vec![HubId::Primary],
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
}
