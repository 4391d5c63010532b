//! Kubernetes Events on the worker's own Pod: what happened, in the words `kubectl describe
//! pod` shows. This module is pure: the follower and the restart side hand it facts
//! ([`Fact`]), it turns them into Events and decides which to write ([`Limiter`]). The
//! recording itself (in-cluster client, kube's recorder) is in `events::record`.
//!
//! Rules:
//! - Facts are sent without waiting: a full queue drops the fact and counts it as failed.
//!   Recording never delays following.
//! - Per reason and hub, at most [`BURST`] Events, then one per [`REFILL`]; what is held back
//!   is counted and named in the next Event of that kind. A flapping hub writes a handful.
//! - No Event carries a secret: only hubs, endpoints as configured, identities, generations,
//!   reasons and counts.

mod record;

pub use record::{start, Recording};

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::exec::supervisor::{AFTER_KILL, UNKILLABLE_EXIT};
use crate::metrics::{EventFailure as Failure, Outcome};
use crate::overrides::Kind as SteerKind;
use crate::verdict::{ErrorReason, HubId};

/// Events of one kind written at once before the limit applies.
pub const BURST: u32 = 2;
/// After the burst, one more Event of a kind per this long.
pub const REFILL: Duration = Duration::from_secs(300);

/// A restart-all restart slower than this is reported as a Warning: kubelet usually starts the
/// sidecar again within 1 to 2 seconds of its exit.
pub const SLOW_RESTART: Duration = Duration::from_secs(10);

/// Something worth an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    SwitchPending {
        candidate: HubId,
        identity: Option<String>,
        count: u32,
        required: u32,
    },
    Switched {
        from: Option<HubId>,
        to: HubId,
        endpoint: String,
        identity: Option<String>,
        generation: u64,
        confirmations: u32,
        /// How long before the switch the winning claim was written, by its `lastUpdated` and
        /// this sidecar's clock: what a sidecar that was not running (kubelet's back-off)
        /// or could not read (a partition) added to the failover.
        claim_age: Option<Duration>,
        /// The pin or drain that made it, in words ("drain of primary until …").
        steered_by: Option<String>,
    },
    /// A restart action and how it went: `mode` is the restart mode, `signal` the signal name.
    Restart {
        outcome: Outcome,
        mode: &'static str,
        signal: &'static str,
        generation: Option<u64>,
    },
    /// Restart-all mode: this sidecar started `after` the exit that asked kubelet to restart
    /// every container for `generation`.
    AllRestarted {
        generation: u64,
        after: Duration,
    },
    Unreachable {
        hub: HubId,
        reason: ErrorReason,
    },
    Recovered {
        hub: HubId,
        was: ErrorReason,
    },
    ClaimRejected {
        hub: HubId,
        claimed: String,
    },
    /// A winning claim for another hub that does not move the worker, and why in words.
    SwitchHeld {
        candidate: HubId,
        why: String,
    },
    /// Two hubs each claim themselves at the same epoch, and a switch between them is held
    /// until `until` (RFC 3339): at most one move per `--split-brain-window`. `None`: the worker
    /// has not moved, and the basis holds it until rule 10 ends the hold.
    SplitBrain {
        established: HubId,
        other: HubId,
        until: Option<String>,
    },
    /// The worker's hub has gone quiet for `silent_for` (no answer, or no claim for itself),
    /// so a claim another hub makes for itself moves the worker although it is not fresher
    /// than the basis (rule 10).
    LeavingSilentHub {
        hub: HubId,
        to: HubId,
        silent_for: String,
        /// What it has not done: [`crate::resolver::Quiet::what`].
        quiet: &'static str,
    },
    /// No hub has shown a claim, read or watched, for `silent_for`: no controller publishes
    /// in HA mode, or the hubs' Cluster CRD drops `status.activeController`. Nothing moves
    /// the worker off its hub meanwhile.
    NoClaimSeen {
        silent_for: String,
    },
    /// An operator's pin or drain took effect; `until` is RFC 3339.
    Steered {
        kind: SteerKind,
        hub: HubId,
        until: String,
    },
    /// A pin or drain ended: `how` is expired, removed or replaced.
    SteeringEnded {
        kind: SteerKind,
        hub: HubId,
        how: &'static str,
    },
    /// A pin or drain value was refused; `kept` names the one that stays in effect.
    SteeringRefused {
        kind: SteerKind,
        value: String,
        reason: &'static str,
        why: String,
        kept: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Warning,
}

/// An Event as it is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub kind: Kind,
    pub reason: &'static str,
    /// The `action` field: what hub-follower was doing.
    pub action: &'static str,
    pub message: String,
}

impl Fact {
    /// The kind key the limiter counts by: the reason, and the hub it is about.
    fn key(&self) -> (&'static str, Option<HubId>) {
        let note = self.note();
        let hub = match self {
            Fact::SwitchPending { candidate, .. } => Some(*candidate),
            Fact::Switched { to, .. } => Some(*to),
            Fact::Unreachable { hub, .. }
            | Fact::Recovered { hub, .. }
            | Fact::ClaimRejected { hub, .. } => Some(*hub),
            Fact::SwitchHeld { candidate, .. } => Some(*candidate),
            Fact::SplitBrain { other, .. } => Some(*other),
            Fact::LeavingSilentHub { hub, .. } => Some(*hub),
            Fact::Steered { hub, .. } | Fact::SteeringEnded { hub, .. } => Some(*hub),
            Fact::Restart { .. }
            | Fact::AllRestarted { .. }
            | Fact::SteeringRefused { .. }
            | Fact::NoClaimSeen { .. } => None,
        };
        (note.reason, hub)
    }

    pub fn note(&self) -> Note {
        use Kind::{Normal, Warning};
        let id = |i: &Option<String>| i.as_deref().map_or(String::new(), |i| format!(" ({i})"));
        let (kind, reason, action, message) = match self {
            Fact::SwitchPending { candidate, identity, count, required } => (
                Normal, "HubSwitchPending", "Confirm",
                format!("a switch to the {candidate} hub{} is pending: {count} of {required} confirming reads", id(identity)),
            ),
            Fact::Switched { from, to, endpoint, identity, generation, confirmations, claim_age, steered_by } => (
                Normal, "HubSwitched", "Switch",
                format!("switched from the {} hub to the {to} hub at {endpoint}{}, generation {generation}, after {confirmations} confirming reads{}{}",
                    from.map_or("previous".to_string(), |h| h.to_string()), id(identity),
                    claim_age.map_or(String::new(), |a| format!("; its claim was written {:.1}s before", a.as_secs_f64())),
                    steered_by.as_ref().map_or(String::new(), |s| format!(" ({s})"))),
            ),
            Fact::Restart { outcome, mode, signal, generation } => {
                let g = generation.map_or(String::new(), |g| format!(" (generation {g})"));
                match outcome {
                    Outcome::Signalled => (Normal, "WorkerRestarting", "Restart", format!("restart mode {mode}: sent {signal} to the worker to move it onto the new hub{g}")),
                    Outcome::Killed => (Warning, "WorkerRestarting", "Restart", format!("restart mode {mode}: the worker ignored {signal}; sent SIGKILL{g}")),
                    Outcome::GateFailed => (Normal, "WorkerRestarting", "Restart", format!("restart mode {mode}: /worker/livez fails so that kubelet restarts the worker onto the new hub{g}")),
                    Outcome::Observed => (Normal, "WorkerRestarting", "Restart", format!("restart mode {mode} (observe only): the worker would be restarted now; nothing is done{g}")),
                    Outcome::Exited => (Normal, "WorkerRestarting", "Restart", format!("restart mode {mode}: the sidecar exits so that kubelet restarts every container of the pod onto the new hub{g}")),
                    Outcome::Requested => (Normal, "WorkerRestarting", "Restart", format!("restart mode {mode}: asked the exec wrapper to restart the worker in place onto the new hub{g}")),
                    Outcome::NotFound => (Warning, "WorkerRestarting", "Restart", format!("restart mode {mode}: no worker process found to signal; /worker/livez fails as a safety net{g}")),
                    Outcome::PermissionDenied => (Warning, "WorkerRestarting", "Restart", format!("restart mode {mode}: not permitted to signal the worker; /worker/livez fails as a safety net{g}")),
                    Outcome::Verified => (Normal, "WorkerRestarted", "Restart", format!("the worker restarted onto the new hub{g}")),
                    Outcome::GateCleared => (Normal, "WorkerRestarted", "Restart", format!("the worker restarted onto the new hub and acknowledged it{g}")),
                    Outcome::Unverified => (Warning, "WorkerRestartUnverified", "Restart", format!("restart mode {mode}: could not verify that the worker restarted onto the new hub{g}")),
                    Outcome::Unkillable => (Warning, "WorkerUnkillable", "Restart", format!("restart mode {mode}: the worker was still there {} after its SIGKILL (stuck in the kernel?); the exec wrapper exited {UNKILLABLE_EXIT} so that its container ends and kubelet starts it again onto the new hub{g}. The worker container's previous log says which process", humantime::format_duration(AFTER_KILL))),
                }
            }
            Fact::AllRestarted { generation, after } => {
                let after_s = after.as_secs_f64();
                if *after > SLOW_RESTART {
                    (Warning, "WorkerRestarting", "Restart", format!("restart mode restart-all: kubelet restarted the pod's containers {after_s:.1}s after the sidecar exited (generation {generation}), later than the usual few seconds: the container restart back-off, or the kubelet's stall described in docs/operations.md; waiting for the worker's acknowledgement"))
                } else {
                    (Normal, "WorkerRestarting", "Restart", format!("restart mode restart-all: kubelet restarted the pod's containers {after_s:.1}s after the sidecar exited (generation {generation}); waiting for the worker's acknowledgement"))
                }
            }
            Fact::Unreachable { hub, reason } => (
                Warning, "HubUnreachable", "Probe",
                format!("the {hub} hub has no say: {reason}"),
            ),
            Fact::Recovered { hub, was } => (
                Normal, "HubRecovered", "Probe",
                format!("the {hub} hub answers again (was {was})"),
            ),
            Fact::ClaimRejected { hub, claimed } => (
                Warning, "ClaimRejected", "Probe",
                format!("the {hub} hub claims {claimed} is Active, which is not a configured hub; ignored"),
            ),
            Fact::SwitchHeld { candidate, why } => (
                Warning, "HubSwitchHeld", "Confirm",
                format!("not moving the worker to the {candidate} hub: {why}"),
            ),
            Fact::SplitBrain { established, other, until } => (
                Warning, "HubSplitBrain", "Confirm",
                match until {
                    Some(until) => format!("split brain: the {established} hub and the {other} hub each claim to be Active at the same epoch; the worker moves at most once per --split-brain-window, next at {until} at the earliest; pin the right hub (hub-follower.kubeslice.io/pin) until the controllers agree"),
                    None => format!("split brain: the {established} hub and the {other} hub each claim to be Active at the same epoch, and the {other} hub's claim is no fresher than the one the worker's decision rests on; the worker stays on the {established} hub until it has shown no claim for itself for --dead-hub-after; pin the right hub (hub-follower.kubeslice.io/pin) until the controllers agree"),
                },
            ),
            Fact::LeavingSilentHub { hub, to, silent_for, quiet } => (
                Warning, "HubLeavingSilent", "Confirm",
                format!("the {hub} hub, which the worker is on, {quiet} for {silent_for}: the {to} hub's claim for itself moves the worker, once confirmed, although it is not fresher than the claim the decision rests on (a controller whose epoch restarted, or whose clock is ahead)"),
            ),
            Fact::NoClaimSeen { silent_for } => (
                Warning, "HubNoClaim", "Follow",
                format!("no hub has shown a claim (status.activeController, read or watched) for {silent_for}: the controllers do not run in HA mode, or a hub's Cluster CRD does not declare status.activeController and its API server drops the field. The worker stays where it is and follows no failover: see docs/operations.md#no-hub-shows-a-claim"),
            ),
            Fact::Steered { kind: SteerKind::Pin, hub, until } => (
                Normal, "HubPinned", "Steer",
                format!("pinned to the {hub} hub until {until}: claims have no say, and the worker moves to {hub} once it has answered the confirming reads"),
            ),
            Fact::Steered { kind: SteerKind::Drain, hub, until } => (
                Normal, "HubDrained", "Steer",
                format!("the {hub} hub is drained until {until}: claims naming it have no say, and a worker on it moves to another hub that answers"),
            ),
            Fact::SteeringEnded { kind, hub, how } => (
                Normal, match kind { SteerKind::Pin => "HubPinEnded", SteerKind::Drain => "HubDrainEnded" }, "Steer",
                format!("the {kind} of the {hub} hub ended ({how})"),
            ),
            Fact::SteeringRefused { kind, value, reason, why, kept } => (
                Warning, "HubOverrideRefused", "Steer",
                format!("refused the {kind} value {value:?} ({reason}): {why}{}",
                    kept.as_ref().map_or(String::new(), |k| format!("; {k:?} stays in effect"))),
            ),
        };
        Note {
            kind,
            reason,
            action,
            message: fit(message),
        }
    }

    /// Whether the limiter applies. An operator's pin, drain and their refusals are paced by
    /// people and by kubelet's sync (at most one reading per tick), and each must be seen.
    fn limited(&self) -> bool {
        !matches!(
            self,
            Fact::Steered { .. } | Fact::SteeringEnded { .. } | Fact::SteeringRefused { .. }
        )
    }
}

/// The most an Event's note may hold (events.k8s.io/v1 refuses more).
pub const MAX_NOTE: usize = 1024;

/// `message` cut to [`MAX_NOTE`] bytes at a character boundary, marked with "…".
fn fit(message: String) -> String {
    if message.len() <= MAX_NOTE {
        return message;
    }
    let mut end = MAX_NOTE - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// Where the follower and the restart side send facts. Never blocks; a no-op when Events are
/// off. The limiter runs here, before the queue, so a fact it holds back takes no slot in it.
/// Each clone limits on its own: the follower and the restart side send different kinds.
#[derive(Debug, Default)]
pub struct Sink(Option<Queue>);

#[derive(Debug)]
struct Queue {
    tx: mpsc::Sender<Note>,
    failed: prometheus::IntCounterVec,
    limiter: Limiter,
}

impl Clone for Sink {
    fn clone(&self) -> Self {
        Self(self.0.as_ref().map(|q| Queue {
            tx: q.tx.clone(),
            failed: q.failed.clone(),
            limiter: Limiter::default(),
        }))
    }
}

impl Sink {
    /// `failed` counts what could not be recorded, by [`Failure`].
    pub fn new(tx: mpsc::Sender<Note>, failed: prometheus::IntCounterVec) -> Self {
        Self(Some(Queue {
            tx,
            failed,
            limiter: Limiter::default(),
        }))
    }

    /// `false` when the fact was dropped (the queue is full or closed), and counted. A fact the
    /// limiter holds back is not dropped: the next Event of its kind says how many were.
    pub fn send(&mut self, fact: Fact) -> bool {
        let Some(q) = &mut self.0 else {
            return true;
        };
        let Some(note) = q.limiter.admit(Instant::now(), &fact) else {
            return true;
        };
        let sent = q.tx.try_send(note).is_ok();
        if !sent {
            q.failed
                .with_label_values(&[Failure::Dropped.as_str()])
                .inc();
        }
        sent
    }
}

/// Per kind: at most [`BURST`] at once, then one per [`REFILL`].
#[derive(Debug, Default)]
pub struct Limiter {
    kinds: HashMap<(&'static str, Option<HubId>), Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: u32,
    refilled: Instant,
    held_back: u32,
}

impl Limiter {
    /// The Event to write for `fact` at `now`, or `None` when it is held back.
    pub fn admit(&mut self, now: Instant, fact: &Fact) -> Option<Note> {
        if !fact.limited() {
            return Some(fact.note());
        }
        let b = self.kinds.entry(fact.key()).or_insert(Bucket {
            tokens: BURST,
            refilled: now,
            held_back: 0,
        });
        let refills = now.saturating_duration_since(b.refilled).as_secs() / REFILL.as_secs();
        if refills > 0 {
            b.tokens = (b.tokens + refills as u32).min(BURST);
            b.refilled += REFILL * refills as u32;
        }
        if b.tokens == 0 {
            b.held_back += 1;
            return None;
        }
        b.tokens -= 1;
        let mut note = fact.note();
        if b.held_back > 0 {
            note.message = fit(format!(
                "{} ({} like it held back before this)",
                note.message, b.held_back
            ));
            b.held_back = 0;
        }
        Some(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const P: HubId = HubId::PRIMARY;
    const S: HubId = HubId::SECONDARY;

    fn down(hub: HubId) -> Fact {
        Fact::Unreachable {
            hub,
            reason: ErrorReason::Timeout,
        }
    }

    fn up(hub: HubId) -> Fact {
        Fact::Recovered {
            hub,
            was: ErrorReason::Timeout,
        }
    }

    #[test]
    fn a_flapping_hub_writes_a_handful_and_says_what_it_held_back() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        let mut written = Vec::new();
        // 50 rounds 10 s apart, the hub down and up in turn.
        for round in 0..50u64 {
            let fact = if round % 2 == 0 { down(S) } else { up(S) };
            if let Some(n) = l.admit(t0 + Duration::from_secs(10 * round), &fact) {
                written.push(n);
            }
        }
        assert!(written.len() <= 6, "{} writes: {written:?}", written.len());
        assert!(written.len() >= 4);
        assert!(written.iter().any(|n| n.message.contains("held back")));
        // Another hub, and another reason, have their own budget.
        assert!(l.admit(t0 + Duration::from_secs(500), &down(P)).is_some());
        let c = Fact::ClaimRejected {
            hub: S,
            claimed: "https://203.0.113.9:6443".into(),
        };
        assert!(l.admit(t0 + Duration::from_secs(500), &c).is_some());
    }

    #[test]
    fn a_quiet_kind_gets_its_burst_back() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        for s in 0..BURST {
            assert!(l
                .admit(t0 + Duration::from_secs(s.into()), &down(S))
                .is_some());
        }
        assert!(l.admit(t0 + Duration::from_secs(5), &down(S)).is_none());
        let later = t0 + REFILL * BURST + Duration::from_secs(1);
        for _ in 0..BURST {
            assert!(l.admit(later, &down(S)).is_some());
        }
    }

    #[test]
    fn notes_carry_the_facts_and_their_kind() {
        let n = Fact::Switched {
            from: Some(P),
            to: S,
            endpoint: "https://10.1.80.12:6443".into(),
            identity: Some("ctrl-b".into()),
            generation: 4,
            confirmations: 3,
            claim_age: Some(Duration::from_millis(14_300)),
            steered_by: Some("drain of primary until 2026-12-04T18:00:00Z".into()),
        }
        .note();
        assert_eq!((n.kind, n.reason), (Kind::Normal, "HubSwitched"));
        for part in [
            "primary",
            "secondary",
            "https://10.1.80.12:6443",
            "ctrl-b",
            "generation 4",
            "3 confirming",
            "its claim was written 14.3s before",
            "(drain of primary until 2026-12-04T18:00:00Z)",
        ] {
            assert!(n.message.contains(part), "{part}: {}", n.message);
        }
        let restart = |outcome| Fact::Restart {
            outcome,
            mode: "signal",
            signal: "SIGTERM",
            generation: Some(4),
        };
        let n = restart(Outcome::Signalled).note();
        assert_eq!(n.reason, "WorkerRestarting");
        assert!(n.message.contains("SIGTERM") && n.message.contains("signal"));
        assert_eq!(restart(Outcome::Verified).note().reason, "WorkerRestarted");
        let n = restart(Outcome::Unverified).note();
        assert_eq!(
            (n.kind, n.reason),
            (Kind::Warning, "WorkerRestartUnverified")
        );
        let n = down(S).note();
        assert_eq!((n.kind, n.reason), (Kind::Warning, "HubUnreachable"));
        assert!(n.message.contains("timeout"));
        // Every reason fits the API's limits.
        for o in Outcome::ALL {
            let n = restart(o).note();
            assert!(n.reason.len() <= 128 && n.message.len() <= 1024);
        }
    }

    #[test]
    fn pin_and_drain_notes_name_the_hub_the_time_and_how_they_ended() {
        let until = "2026-12-04T18:00:00Z".to_string();
        let cases = [
            (
                Fact::Steered {
                    kind: SteerKind::Pin,
                    hub: S,
                    until: until.clone(),
                },
                Kind::Normal,
                "HubPinned",
                vec!["secondary", "2026-12-04T18:00:00Z"],
            ),
            (
                Fact::Steered {
                    kind: SteerKind::Drain,
                    hub: P,
                    until: until.clone(),
                },
                Kind::Normal,
                "HubDrained",
                vec!["primary", "2026-12-04T18:00:00Z"],
            ),
            (
                Fact::SteeringEnded {
                    kind: SteerKind::Drain,
                    hub: P,
                    how: "expired",
                },
                Kind::Normal,
                "HubDrainEnded",
                vec!["drain", "primary", "expired"],
            ),
            (
                Fact::SteeringEnded {
                    kind: SteerKind::Pin,
                    hub: S,
                    how: "removed",
                },
                Kind::Normal,
                "HubPinEnded",
                vec!["pin", "secondary", "removed"],
            ),
            (
                Fact::SteeringRefused {
                    kind: SteerKind::Drain,
                    value: "primry until x".into(),
                    reason: "unknown_hub",
                    why: "names \"primry\"".into(),
                    kept: Some(format!("primary until {until}")),
                },
                Kind::Warning,
                "HubOverrideRefused",
                vec!["primry until x", "unknown_hub", "stays in effect"],
            ),
        ];
        for (fact, kind, reason, parts) in cases {
            let n = fact.note();
            assert_eq!((n.kind, n.reason), (kind, reason));
            for part in parts {
                assert!(n.message.contains(part), "{part}: {}", n.message);
            }
            assert!(n.message.len() <= 1024);
        }
        // The longest refusal the overrides module makes still fits, with escapes that grow
        // a byte into six.
        let mut o = crate::overrides::Overrides::new(vec![P, S]);
        let hostile = "\u{1}\"\té".repeat(1000);
        let changes = o.read(SteerKind::Pin, &hostile, jiff::Timestamp::UNIX_EPOCH);
        let [crate::overrides::Change::Refused { refused, .. }] = &changes[..] else {
            panic!("{changes:?}")
        };
        let n = Fact::SteeringRefused {
            kind: SteerKind::Pin,
            value: refused.value.clone(),
            reason: refused.reason.as_str(),
            why: refused.why.clone(),
            kept: Some(refused.value.clone()),
        }
        .note();
        assert!(n.message.len() <= MAX_NOTE, "{}", n.message.len());
        assert!(n.message.ends_with('…'));
        assert!(n.message.starts_with("refused the pin value"));
    }

    #[test]
    fn pin_and_drain_facts_are_never_held_back() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        let ended = Fact::SteeringEnded {
            kind: SteerKind::Drain,
            hub: P,
            how: "removed",
        };
        for _ in 0..10 {
            assert!(l.admit(t0, &ended).is_some());
        }
        // Everything else still is.
        for _ in 0..BURST {
            assert!(l.admit(t0, &down(S)).is_some());
        }
        assert!(l.admit(t0, &down(S)).is_none());
    }

    #[test]
    fn a_sink_never_blocks_and_reports_a_full_queue() {
        let (tx, _rx) = mpsc::channel(1);
        let failed =
            prometheus::IntCounterVec::new(prometheus::Opts::new("f", "f"), &["reason"]).unwrap();
        let mut sink = Sink::new(tx, failed.clone());
        assert!(sink.send(down(S)));
        assert!(!sink.send(down(P)), "the queue holds one");
        assert_eq!(failed.with_label_values(&["dropped"]).get(), 1);
        assert!(Sink::default().send(down(S)), "off: nothing to drop");
    }

    #[test]
    fn facts_the_limiter_holds_back_take_no_place_in_the_queue() {
        let (tx, mut rx) = mpsc::channel(4);
        let failed =
            prometheus::IntCounterVec::new(prometheus::Opts::new("f", "f"), &["reason"]).unwrap();
        let mut sink = Sink::new(tx, failed.clone());
        // A flapping hub: 50 facts of one kind, a burst of them admitted.
        for _ in 0..50 {
            assert!(sink.send(down(S)));
        }
        assert_eq!(failed.with_label_values(&["dropped"]).get(), 0);
        // The queue still has room for what matters next.
        assert!(sink.send(up(S)));
        let mut queued = Vec::new();
        while let Ok(note) = rx.try_recv() {
            queued.push(note.reason);
        }
        assert_eq!(queued.len(), BURST as usize + 1, "{queued:?}");
        assert_eq!(queued.last(), Some(&"HubRecovered"));
    }
}
