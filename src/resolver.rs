//! The decision rule. Verdicts in, decision out: no IO, no clock.
//!
//! 1. A hub that did not answer, or answered without a claim, has no say. A claim that vanishes
//!    is absence, not evidence: the real worker-operator erases the claim on the hub it talks to.
//! 2. A claim naming an endpoint that is not configured is rejected: claims select among the
//!    endpoints an operator provisioned and never point the worker anywhere else.
//! 3. Freshness: the higher `epoch` is fresher, and on equal epochs the later `lastUpdated`. A
//!    missing epoch is lower than any and a missing date older than any. A claim without an
//!    epoch dated more than [`MAX_FUTURE_SKEW`] ahead of this clock has no say; an epoch makes
//!    the clock a tie-break only, so such a claim keeps its say.
//! 4. The winner: when all usable claims name one hub, that hub. When they disagree, the
//!    fresher claim; on a tie the established hub if it is among the tied, else the earliest
//!    tied hub in configuration order. So the outcome is single-valued even in a split brain.
//! 5. The basis: a decision rests on the claim that made it, and that basis moves forward to
//!    any fresher claim naming the established hub, read or shown by a watch
//!    ([`Resolver::witness`]). A winner that is not fresher than the basis
//!    never moves the worker, whatever the other hubs say or leave unsaid: a hub that comes
//!    back with an old claim while the worker has erased the new one changes nothing. (A basis
//!    with neither epoch nor `lastUpdated` orders nothing, and so holds nothing back.) With
//!    three hubs or more, a winner is also held while a claim naming a third hub, seen since
//!    the decision, is fresher than its own: a hub that goes silent after the newest claim
//!    does not let an older claim for another hub move the worker.
//! 6. A winner whose own hub refuses our credential (401, 403, TLS, unreadable credential
//!    files) is held: the worker would fail there with the same files.
//! 7. No winner, a held winner, or the established hub: nothing changes and any count
//!    restarts. A different winner becomes the pending candidate. It needs `confirmations`
//!    consecutive rounds naming the same candidate (endpoint and identity; freshness is
//!    ignored, since the Active republishes on a timer) before the switch. A round the
//!    watches vouch for ([`Resolver::observe_vouched`]) counts as all of them: the caller has
//!    proven that every hub's object stood unchanged, on all but `lastUpdated`, for the span
//!    those rounds would take.
//! 8. The first round after startup decides at once (there is no connection to protect yet);
//!    with no winner then, the primary is taken by default. A sidecar that restarted beside a
//!    running worker resumes its last decision and its basis instead, and moving away from it
//!    is a switch.
//! 9. An operator's pin or drain ([`Steer`]) outranks the claims while it lasts, and moves the
//!    worker like any switch: confirmed over `confirmations` rounds. A pin of H: claims have no
//!    say; the worker moves to H once H answers, and stays on H while it is pinned, answering or
//!    not. A drain of H: claims naming H have no say; a worker on H moves to the winner among
//!    the others, or else to the first other hub that answers, and stays (held) while none does.
//!    Rule 5 does not hold an operator's move back; rule 6 does. The move's basis is the
//!    freshest claim naming its hub that round, if any, so that once the pin or drain ends a
//!    fresher claim for another hub moves the worker back.
//!
//! Liveness: every hold ends. Rules 5 and 7 are safety; these bound them ([`Liveness`]):
//!
//! 10. A dead hub strands no one. When the established hub has gone quiet for
//!     `dead_hub_after` ([`Quiet`]): no answer at all (a timeout, a refused connection; an
//!     HTTP error is an answer), counted from its last answer (in this process, or as an
//!     earlier run recorded it ([`Resolver::resume_silence`]), or from this process's first
//!     round); or answers without a claim for itself, read or shown, while its watch vouched
//!     ([`Resolver::watches_vouch_for`]) and after its controller was seen republishing. Then a winner that
//!     its own hub claims for itself is no longer held by rule 5: a promoted controller whose
//!     epoch counter restarted, or that publishes no epoch, is followed, confirmed like any
//!     switch. The basis so left behind stays a floor for claims naming the silent hub, so
//!     that when it comes back with the same old claim it does not take the worker back; a
//!     fresher claim from it does.
//! 11. A split brain moves the worker at most once per `split_brain_window`. A split brain:
//!     a claim for the winner, and the established hub's claim for itself at the same epoch
//!     (both without one counts), its claim counted as the last one it showed (to a read or to
//!     its watch, [`Resolver::witness`]) when the worker has erased it since. A hub that does
//!     not answer says nothing: moving off it is a failover. A Standby that mirrors the new
//!     Active's claim says it is no longer Active, so a failback is not taken for a split
//!     brain once that is seen. A switch within the window of the last one is then held. The first
//!     move is never held: it cannot be told from a failover. Epochs end the question:
//!     a promotion that bumps the epoch is never a split brain.
//! 12. No decision from silence: the first round without a winner decides nothing until
//!     `default_after` has passed since the first round, and only then takes the primary.
//!     Before the first decision, a hub that answers without a claim speaks with the last
//!     claim its watch showed within `dead_hub_after`: the worker of an old pod erases it.

use std::cmp::Ordering;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::claim::{Claim, Endpoint};
use crate::overrides::Kind;
use crate::verdict::{ErrorReason, HubId, ProbeError, Verdict};

/// How far a claim's `lastUpdated` may lie ahead of our clock when it carries no epoch. A
/// timestamp further in the future would win every disagreement until that moment arrives, so a
/// hub with a broken clock (or a hostile writer) could pin the worker; such a claim has no say,
/// and is reported as a bad response.
pub const MAX_FUTURE_SKEW: SignedDuration = SignedDuration::from_mins(5);

/// How `a` compares with `b` in freshness: by epoch, then by `lastUpdated`. A missing epoch is
/// lower than any and a missing date older than any, so the order is total: a controller that
/// publishes epochs wins against one that does not, whatever their clocks say.
pub fn freshness(a: &Claim, b: &Claim) -> Ordering {
    (a.epoch, a.last_updated).cmp(&(b.epoch, b.last_updated))
}

/// The bounds of rules 10 to 12. [`Liveness::OFF`] is the plain rule (1 to 9): no bound on
/// rule 5, no split-brain window, the primary at once by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Rule 10: how long the established hub may be silent before a claim its winner makes
    /// for itself moves the worker whatever the basis; `None`: never.
    pub dead_hub_after: Option<SignedDuration>,
    /// Rule 11: in a split brain, at most one switch per this window; zero: no limit.
    pub split_brain_window: SignedDuration,
    /// Rule 12: how long the first round without a winner waits before the primary.
    pub default_after: SignedDuration,
}

impl Liveness {
    pub const OFF: Liveness = Liveness {
        dead_hub_after: None,
        split_brain_window: SignedDuration::ZERO,
        default_after: SignedDuration::ZERO,
    };
}

/// What the worker should follow, and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub hub: HubId,
    pub identity: Option<String>,
    pub reason: Reason,
    /// The claim the decision rests on; `None` for a default, or a resumed decision written
    /// before bases were kept.
    pub basis: Option<Claim>,
    /// The pin or drain that made this decision, if one did (rule 9).
    pub steered: Option<Kind>,
}

/// An operator's pin and drain in effect this round (rule 9); hubs that are not configured are
/// ignored (`overrides` refuses them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steer {
    pub pin: Option<HubId>,
    pub drain: Option<HubId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The first round at startup found a winner.
    Startup,
    /// The first round at startup found no usable claim; the primary is the default.
    Default,
    /// A confirmed move away from the established hub.
    Switch,
    /// An earlier run's decision, taken over by a restarted sidecar.
    Resumed,
    /// Only one hub is configured.
    SingleHub,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Startup => "startup",
            Reason::Default => "default",
            Reason::Switch => "switch",
            Reason::Resumed => "resumed",
            Reason::SingleHub => "single-hub",
        }
    }
}

/// A claim reduced to what a switch is confirmed on: the hub it names and the identity, not its
/// freshness (the Active republishes on a timer). The watches compare claims by it too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub hub: HubId,
    pub identity: Option<String>,
}

impl Candidate {
    /// The candidate `claim` names among `hubs`; `None` when its endpoint is not configured.
    pub fn of(claim: &Claim, hubs: &[(HubId, Endpoint)]) -> Option<Self> {
        let (hub, _) = hubs.iter().find(|(_, e)| *e == claim.endpoint)?;
        Some(Self {
            hub: *hub,
            identity: claim.identity.clone(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pending {
    pub candidate: Candidate,
    pub count: u32,
    /// The pin or drain this switch is for, if one (rule 9): a move the claims make and one
    /// an operator asks for are counted apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steered: Option<Kind>,
}

/// Why a winner that is not the established hub does not move the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Its claim is not fresher than the basis (rule 5).
    NotFresherThanBasis { claim: Claim, basis: Claim },
    /// Its claim is older than one for a third hub seen since the last decision (rule 5, with
    /// three hubs or more).
    OlderThanThirdHub {
        claim: Claim,
        newer: Claim,
        names: HubId,
    },
    /// Its own hub refuses our credential (rule 6).
    Unauthenticated(ErrorReason),
    /// The pinned hub did not answer this round (rule 9): the move to it waits, or, when the
    /// worker is on it, the claims' winner (the candidate) does not move it off.
    PinnedHubUnreachable { pinned: HubId, reason: ErrorReason },
    /// The worker is on a drained hub and no other hub answered this round (rule 9).
    DrainNoAlternative { drained: HubId },
    /// A split brain: the winner and the established hub each claim themselves at the same
    /// epoch, and the worker moved at `moved_at`, less than a window ago (rule 11). Held until
    /// `until`. Both `None` when the worker has not moved since this sidecar started and the
    /// winner's claim is no fresher than the basis: the basis holds it (rule 5), until a
    /// fresher claim or rule 10 ends the hold, not a window.
    SplitBrain {
        established: HubId,
        moved_at: Option<Timestamp>,
        until: Option<Timestamp>,
    },
}

impl Hold {
    /// Every value of [`Hold::reason`], so that each metric series exists from the start.
    pub const REASONS: [&'static str; 5] = [
        "older_than_basis",
        "unauthenticated",
        "pinned_hub_unreachable",
        "drain_no_alternative",
        "split_brain",
    ];

    /// The `why` label of `kubeslice_worker_hub_switch_held` and `/status` `held.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Hold::NotFresherThanBasis { .. } | Hold::OlderThanThirdHub { .. } => "older_than_basis",
            Hold::Unauthenticated(_) => "unauthenticated",
            Hold::PinnedHubUnreachable { .. } => "pinned_hub_unreachable",
            Hold::DrainNoAlternative { .. } => "drain_no_alternative",
            Hold::SplitBrain { .. } => "split_brain",
        }
    }
}

/// A winner held back this round, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub candidate: Candidate,
    pub why: Hold,
}

/// What one round changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    /// A new decision to publish, if any.
    pub decision: Option<Decision>,
    /// The hubs whose claim named an endpoint that is not configured.
    pub rejected: Vec<HubId>,
    /// The hubs whose claim is dated more than [`MAX_FUTURE_SKEW`] ahead, with why: they had no
    /// say, and are reported as a bad response.
    pub ahead: Vec<(HubId, ProbeError)>,
    /// The hubs whose claim named another hub than the established one but was not fresher than
    /// the basis: old news.
    pub stale: Vec<HubId>,
    /// The winner this round held back, if any.
    pub held: Option<Held>,
    /// A split brain held a switch back within the last `split_brain_window` (rule 11).
    pub split_brain: bool,
    /// The established hub whose basis no longer holds a self-claimed winner back this round
    /// (rule 10), and how it went quiet, if one.
    pub dead_hub: Option<(HubId, Quiet)>,
    /// No hub named anyone yet at startup: the primary is taken by default at this time
    /// unless one does first (rule 12).
    pub undecided_until: Option<Timestamp>,
}

impl Step {
    /// Why `hub`'s claim was refused for its date, if it was.
    pub fn refused(&self, hub: HubId) -> Option<&ProbeError> {
        self.ahead.iter().find(|(h, _)| *h == hub).map(|(_, e)| e)
    }
}

/// How the established hub went quiet for `dead_hub_after` (rule 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiet {
    /// No read got an answer: timeouts, refused or reset connections.
    NoAnswer,
    /// It answered, and its watch was up, but neither a read nor the watch showed it claiming
    /// itself: its controller has stopped publishing (the worker erases the last claim).
    NoClaim,
}

impl Quiet {
    /// What the log line and the Event say it did not do.
    pub fn what(self) -> &'static str {
        match self {
            Quiet::NoAnswer => "has not answered",
            Quiet::NoClaim => "has answered but shown no claim for itself",
        }
    }
}

/// A claim a hub's watch showed between rounds, and when the follower learned of it.
#[derive(Debug, Clone)]
struct Shown {
    reporter: HubId,
    claim: Claim,
    at: Timestamp,
}

/// A usable claim this round: the hub it names, the claim, and the hub that reported it.
struct Usable<'v> {
    target: HubId,
    claim: &'v Claim,
    reporter: HubId,
}

#[derive(Debug, Clone)]
pub struct Resolver {
    hubs: Vec<(HubId, Endpoint)>,
    confirmations: u32,
    established: Option<HubId>,
    basis: Option<Claim>,
    pending: Option<Pending>,
    /// Per hub other than the established one, the freshest usable claim naming it seen since
    /// the last decision: with three hubs or more, a winner older than one of these is old
    /// news too (rule 5).
    outranked_by: Vec<(HubId, Claim)>,
    /// The first decision, while it has not reached the disk: the worker has not started on
    /// anything yet, so what replaces it is not a switch to restart for.
    first_unpublished: Option<Reason>,
    /// The round being observed stands for `confirmations` rounds ([`Resolver::observe_vouched`]).
    vouched: bool,
    liveness: Liveness,
    /// The first round's time: silence is counted from it at the latest (rules 10 and 12).
    started_at: Option<Timestamp>,
    /// Since when the established hub has not answered: its last answer, this process's first
    /// round, or what an earlier run left ([`Resolver::resume_silence`]); none while it
    /// answers.
    silent_since: Option<Timestamp>,
    /// Per hub, when it last answered (with or without a claim).
    answered_at: Vec<(HubId, Timestamp)>,
    /// The established hub's last claim for itself, kept when the worker erases it (rule 11).
    own_claim: Option<Claim>,
    /// When the last switch was made (rule 11).
    moved_at: Option<Timestamp>,
    /// Per silent hub left by rule 10, the basis it had: a floor for claims naming it.
    left_behind: Vec<(HubId, Claim)>,
    /// Until when a split brain is reported (rule 11).
    split_brain_until: Option<Timestamp>,
    /// Per hub, the last usable claim its watch showed ([`Resolver::witness`]): evidence that
    /// a read may never see, since the worker erases the claim on its hub within milliseconds.
    shown: Vec<Shown>,
    /// The hubs whose watch vouched for them this round ([`Resolver::watches_vouch_for`]).
    watched: Vec<HubId>,
    /// The claim the established decision was made on, before its basis moved forward: a
    /// claim fresher than it was written since (rule 11).
    decided_on: Option<Claim>,
    /// Since when the established hub has answered, its watch up, without showing a claim for
    /// itself to a read or its watch; none while it shows one, or while that cannot be known
    /// (an error, a watch that does not vouch). Rule 10's second kind of quiet.
    unclaimed_since: Option<Timestamp>,
    /// Since when the established hub has answered without showing a claim for itself, to a
    /// read or its watch, whatever its watch and controller; none while it shows one, or
    /// errs. Rule 10's claim clock is this, counted only where it proves a stopped controller;
    /// where it does not, a hold it leaves unbounded is said ([`Resolver::unbounded_hold_since`]).
    answered_unclaimed_since: Option<Timestamp>,
    /// When the established hub's watch last showed a claim for itself that no read has
    /// returned since: rule 10's claim clock starts there, not at the round that took it in,
    /// which may come a relaxed read later (such a claim raises no news).
    self_claim_shown_at: Option<Timestamp>,
    /// Whether the established hub's controller has been seen republishing since the worker
    /// came to it, and the last claim for itself it showed: only for a controller that
    /// republishes does a claim that stopped coming mean that it stopped (rule 10).
    republishing: Republishing,
}

/// What the established hub has shown of its controller's republishing (rule 10).
#[derive(Debug, Clone, Default)]
struct Republishing {
    /// Its last claim for itself, read or shown.
    last: Option<Claim>,
    /// It showed two claims for itself that differ in epoch or `lastUpdated`: its controller
    /// writes again, as the real one does 30 s after the worker erased its claim.
    seen: bool,
}

impl Republishing {
    /// Starts over on a hub, from the claim the decision rests on if that names it.
    fn from(basis: Option<&Claim>) -> Self {
        Self {
            last: basis.cloned(),
            seen: false,
        }
    }

    /// The established hub showed `claim` for itself.
    fn shown(&mut self, claim: &Claim) {
        if let Some(last) = &self.last {
            self.seen |= freshness(last, claim) != Ordering::Equal;
        }
        self.last = Some(claim.clone());
    }
}

impl Resolver {
    /// `hubs` in configuration order; `confirmations` is at least 1 (the config guarantees it).
    pub fn new(hubs: Vec<(HubId, Endpoint)>, confirmations: u32) -> Self {
        Self {
            hubs,
            confirmations: confirmations.max(1),
            established: None,
            basis: None,
            pending: None,
            outranked_by: Vec::new(),
            first_unpublished: None,
            vouched: false,
            liveness: Liveness::OFF,
            started_at: None,
            silent_since: None,
            answered_at: Vec::new(),
            own_claim: None,
            moved_at: None,
            left_behind: Vec::new(),
            split_brain_until: None,
            shown: Vec::new(),
            watched: Vec::new(),
            unclaimed_since: None,
            answered_unclaimed_since: None,
            self_claim_shown_at: None,
            decided_on: None,
            republishing: Republishing::default(),
        }
    }

    /// Bounds the holds by rules 10 to 12.
    pub fn with_liveness(mut self, liveness: Liveness) -> Self {
        self.liveness = liveness;
        self
    }

    /// The resumed decision was a switch made at `at`: rule 11 counts its window from then.
    pub fn moved_at(&mut self, at: Timestamp) {
        self.moved_at = Some(at);
    }

    /// When the claims last moved the worker (a switch no pin or drain made), as this run knows
    /// it: what rule 11's window counts from.
    pub fn last_move(&self) -> Option<Timestamp> {
        self.moved_at
    }

    /// The last decision reached the disk.
    pub fn published(&mut self) {
        self.first_unpublished = None;
    }

    /// Takes over an earlier run's decision: `hub` at `endpoint` as it was written, and the
    /// basis it was written with. `None` when that hub is no longer configured at that endpoint.
    pub fn resume(
        &mut self,
        hub: HubId,
        endpoint: &str,
        identity: Option<String>,
        basis: Option<Claim>,
    ) -> Option<Decision> {
        let endpoint = Endpoint::parse(endpoint).ok()?;
        if !self.hubs.iter().any(|(h, e)| *h == hub && *e == endpoint) {
            return None;
        }
        self.first_unpublished = None;
        self.established = Some(hub);
        self.silent_since = None;
        self.unclaimed_since = None;
        self.answered_unclaimed_since = None;
        self.self_claim_shown_at = None;
        self.republishing = Republishing::from(self.names(basis.as_ref(), hub));
        // The best knowledge of what the hub said of itself before this process: its basis.
        self.own_claim = basis.clone();
        self.decided_on = basis.clone();
        self.basis = basis.clone();
        self.pending = None;
        self.outranked_by.clear();
        Some(Decision {
            hub,
            identity,
            reason: Reason::Resumed,
            basis,
            steered: None,
        })
    }

    pub fn established(&self) -> Option<HubId> {
        self.established
    }

    /// The claim the established decision rests on, moved forward by fresher claims naming it.
    pub fn basis(&self) -> Option<&Claim> {
        self.basis.as_ref()
    }

    /// Forgets the basis, as a resolver without rule 5 would: for the simulation's mutant,
    /// which proves that the simulation catches a resolver without it.
    #[doc(hidden)]
    pub fn forget_basis(&mut self) {
        self.basis = None;
        self.outranked_by.clear();
    }

    pub fn pending(&self) -> Option<&Pending> {
        self.pending.as_ref()
    }

    pub fn confirmations(&self) -> u32 {
        self.confirmations
    }

    /// One round at `now`: every hub's verdict, in any order.
    pub fn observe(&mut self, now: Timestamp, verdicts: &[(HubId, &Verdict)]) -> Step {
        self.observe_steered(now, verdicts, Steer::default())
    }

    /// One round that stands for `confirmations` consecutive rounds (rule 7): the caller has
    /// proven that no hub's object changed, on all but `lastUpdated`, over the span those
    /// rounds would have taken, and that no pin or drain is in effect. A pending or new
    /// candidate it names is confirmed at once; everything else is as [`Resolver::observe`].
    pub fn observe_vouched(&mut self, now: Timestamp, verdicts: &[(HubId, &Verdict)]) -> Step {
        self.vouched = true;
        let step = self.observe_steered(now, verdicts, Steer::default());
        self.vouched = false;
        step
    }

    /// One round at `now` with an operator's pin and drain in effect (rule 9).
    pub fn observe_steered(
        &mut self,
        now: Timestamp,
        verdicts: &[(HubId, &Verdict)],
        steer: Steer,
    ) -> Step {
        let started = *self.started_at.get_or_insert(now);
        if let Some(e) = self.established {
            let heard = verdicts.iter().any(|(h, v)| *h == e && v.heard());
            self.silent_since = match self.silent_since {
                _ if heard => None,
                Some(since) => Some(since),
                None => Some(self.last_answer(e).unwrap_or(started)),
            };
            self.note_unclaimed(now, e, verdicts);
        }
        // At startup, a hub that answered without a claim speaks with the last claim its
        // watch showed, if recent: beside a worker that erases it, that is where claims live.
        let evidence: Vec<(HubId, Verdict)> = match self.established {
            None => self.recent_shown(now, verdicts),
            Some(_) => Vec::new(),
        };
        let verdicts: Vec<(HubId, &Verdict)> = verdicts
            .iter()
            .map(|(h, v)| match evidence.iter().find(|(r, _)| r == h) {
                Some((_, shown)) => (*h, shown),
                None => (*h, *v),
            })
            .collect();
        let verdicts = verdicts.as_slice();
        for (hub, verdict) in verdicts {
            if verdict.heard() && self.position(*hub) != usize::MAX {
                match self.answered_at.iter_mut().find(|(h, _)| h == hub) {
                    Some((_, at)) => *at = now,
                    None => self.answered_at.push((*hub, now)),
                }
            }
        }
        let configured = |h: &HubId| self.position(*h) != usize::MAX;
        let pin = steer.pin.filter(configured);
        // A drain's claims have no say even beside a pin: at startup with the pinned hub
        // silent, the claims that decide are the others.
        let drain = steer.drain.filter(configured).filter(|d| Some(*d) != pin);
        let (mut claims, rejected, ahead) = self.usable_claims(now, verdicts);
        self.advance_basis(&claims);
        if let Some(d) = drain {
            claims.retain(|u| u.target != d);
        }
        self.note_other_hubs(&claims);
        let stale = if pin.is_some() {
            Vec::new()
        } else {
            self.stale(&claims)
        };
        let aim = match (pin, drain) {
            (Some(h), _) => self.aim_pinned(h, &claims, verdicts),
            // A drain beside a pin only sets claims aside: the pin decides.
            (None, Some(d)) if self.established.is_none_or(|e| e == d) => {
                self.aim_drained(d, &claims, verdicts)
            }
            _ => None,
        };
        let mut dead_hub = None;
        let aim = aim.unwrap_or_else(|| self.aim(now, &claims, verdicts, &mut dead_hub));
        let mut undecided_until = None;
        let aim = match aim {
            // Rule 12: the default waits for its time; a claim may come first.
            Aim::Move {
                claim: None,
                by: None,
                ..
            } if self.established.is_none() => {
                let until = started
                    .checked_add(self.liveness.default_after)
                    .unwrap_or(started);
                if now < until {
                    undecided_until = Some(until);
                    Aim::Stay
                } else {
                    aim
                }
            }
            _ => aim,
        };
        if let Aim::Hold(Held {
            why: Hold::SplitBrain { .. },
            ..
        }) = &aim
        {
            // Said for a window after the last round it held anything back: through the
            // move that the window allows, and the hold that follows it.
            let until = now.checked_add(self.liveness.split_brain_window).ok();
            self.split_brain_until = self.split_brain_until.max(until);
        }
        let mut held = None;
        let decision = match aim {
            Aim::Stay => {
                self.pending = None;
                None
            }
            Aim::Hold(h) => {
                self.pending = None;
                held = Some(h);
                None
            }
            Aim::Move { to, claim, by } if self.established.is_none() => {
                let reason = if claim.is_some() {
                    Reason::Startup
                } else {
                    Reason::Default
                };
                Some(self.establish(to, claim, reason, by, now, false))
            }
            Aim::Move { to, claim, by } => self.confirm(to, claim, by, now, dead_hub.is_some()),
        };
        self.note_own_claim(verdicts, decision.is_some());
        Step {
            decision,
            rejected,
            ahead,
            stale,
            held,
            split_brain: self.split_brain_until.is_some_and(|u| now < u),
            dead_hub,
            undecided_until,
        }
    }

    /// Rule 11: keeps the established hub's last claim for itself. A claim for another
    /// configured hub replaces it with none; silence, an erased claim and a claim naming
    /// nothing configured keep it. A new decision starts from what its hub said this round.
    fn note_own_claim(&mut self, verdicts: &[(HubId, &Verdict)], decided: bool) {
        let Some(e) = self.established else {
            return;
        };
        let named = |c: &Claim| Candidate::of(c, &self.hubs).map(|c| c.hub);
        match verdicts.iter().find(|(h, _)| *h == e).map(|(_, v)| *v) {
            Some(Verdict::Claim(c)) if decided && named(c) == Some(e) => {
                self.own_claim = Some(c.clone())
            }
            _ if decided => self.own_claim = None,
            Some(Verdict::Claim(c)) if named(c).is_some() => {
                self.own_claim = self.last_word(named(c) == Some(e), c)
            }
            _ => {}
        }
    }

    /// What the established hub has said of itself last, once it says `said` (naming itself or
    /// not). A claim for another hub counts in the order seen, not by freshness: without
    /// epochs two controllers' clocks cannot be compared, and a Standby's mirror written by a
    /// clock behind would never count. Two claims for itself are one controller's word, and
    /// the fresher stands: an older one read back (a lagging cache) takes nothing back.
    fn last_word(&self, names_itself: bool, said: &Claim) -> Option<Claim> {
        if !names_itself {
            return None;
        }
        match &self.own_claim {
            Some(kept) if freshness(kept, said) == Ordering::Greater => Some(kept.clone()),
            _ => Some(said.clone()),
        }
    }

    /// A claim `hub` showed between rounds (its watch saw it, even if the worker erased it
    /// since): for the established hub, the last thing it said of itself (rule 11).
    ///
    /// It is evidence as a read is ([`Resolver::observe`] ignores a claim a read does not
    /// return): a claim naming the established hub moves the basis forward (rule 5), the
    /// established hub claiming itself stops rule 10's claim clock, and at startup a hub that
    /// answers without a claim speaks with the last one its watch showed within
    /// `dead_hub_after`. `at`: when its watch showed it. A claim for an unconfigured endpoint,
    /// or dated too far ahead of `at` without an epoch, is no evidence.
    pub fn witness(&mut self, hub: HubId, claim: &Claim, at: Timestamp) {
        let Some(named) = Candidate::of(claim, &self.hubs).map(|c| c.hub) else {
            return;
        };
        if self.established == Some(hub) {
            self.own_claim = self.last_word(named == hub, claim);
        }
        if too_far_ahead(claim, at).is_some() {
            return;
        }
        self.shown.retain(|s| s.reporter != hub);
        self.shown.push(Shown {
            reporter: hub,
            claim: claim.clone(),
            at,
        });
        if self.established == Some(named) {
            self.advance_basis_to(claim);
        }
        if self.established == Some(hub) && named == hub {
            self.unclaimed_since = None;
            self.answered_unclaimed_since = None;
            self.self_claim_shown_at = Some(self.self_claim_shown_at.map_or(at, |s| s.max(at)));
            self.republishing.shown(claim);
        }
    }

    /// `claim`, if it names `hub`.
    fn names<'c>(&self, claim: Option<&'c Claim>, hub: HubId) -> Option<&'c Claim> {
        claim.filter(|c| Candidate::of(c, &self.hubs).is_some_and(|c| c.hub == hub))
    }

    /// Rule 10: how the established hub has been quiet for `dead_hub_after`, if it has: no
    /// answer, or answers without a claim for itself while its watch was up.
    fn established_is_quiet(&self, now: Timestamp) -> Option<Quiet> {
        let (Some(e), Some(bound)) = (self.established, self.liveness.dead_hub_after) else {
            return None;
        };
        let last = self
            .last_answer(e)
            .or(self.silent_since)
            .or(self.started_at);
        let past = |at: Timestamp| now.duration_since(at) >= bound;
        if self.silent_since.is_some() && last.is_some_and(past) {
            return Some(Quiet::NoAnswer);
        }
        self.unclaimed_since
            .is_some_and(past)
            .then_some(Quiet::NoClaim)
    }

    /// Rule 10's claim clock: runs while the established hub `e`, whose controller has been
    /// seen republishing, answers without a claim for itself and its watch vouches for it (it
    /// would have shown a republish the worker erased); stops at a claim for itself, read or
    /// shown, and at anything that leaves it unknown. A controller that writes its claim once
    /// and never again, beside a worker that erases it, is not taken for a dead one.
    fn note_unclaimed(&mut self, now: Timestamp, e: HubId, verdicts: &[(HubId, &Verdict)]) {
        let names = |c: &Claim| Candidate::of(c, &self.hubs).map(|c| c.hub);
        let proves = self.watched.contains(&e) && self.republishing.seen;
        let claims_itself = match verdicts.iter().find(|(h, _)| *h == e).map(|(_, v)| *v) {
            Some(Verdict::Claim(c)) if names(c) == Some(e) => {
                self.republishing.shown(c);
                Some(true)
            }
            Some(Verdict::Claim(_) | Verdict::NoClaim) => Some(false),
            _ => None,
        };
        let shown_at = self.self_claim_shown_at.take().filter(|at| *at <= now);
        let since = |clock: Option<Timestamp>| clock.or(shown_at).unwrap_or(now);
        self.answered_unclaimed_since = match claims_itself {
            Some(false) => Some(since(self.answered_unclaimed_since)),
            Some(true) | None => None,
        };
        self.unclaimed_since = match claims_itself {
            Some(false) if proves => Some(since(self.unclaimed_since)),
            _ => None,
        };
    }

    /// The hubs whose watch vouches for them this round: only for those does an answer without
    /// a claim mean that none was written (rule 10). The caller says it before each round.
    pub fn watches_vouch_for(&mut self, hubs: &[HubId]) {
        self.watched = hubs.to_vec();
    }

    /// For each hub that answered without a claim this round, the last claim its watch showed,
    /// if it showed it within `dead_hub_after`: the evidence a startup decides on.
    fn recent_shown(
        &self,
        now: Timestamp,
        verdicts: &[(HubId, &Verdict)],
    ) -> Vec<(HubId, Verdict)> {
        let Some(bound) = self.liveness.dead_hub_after else {
            return Vec::new();
        };
        verdicts
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::NoClaim))
            .filter_map(|(h, _)| self.shown.iter().find(|s| s.reporter == *h))
            .filter(|s| now.duration_since(s.at) < bound)
            .map(|s| (s.reporter, Verdict::Claim(s.claim.clone())))
            .collect()
    }

    /// When `hub` last answered in this process.
    fn last_answer(&self, hub: HubId) -> Option<Timestamp> {
        self.answered_at
            .iter()
            .find(|(h, _)| *h == hub)
            .map(|(_, at)| *at)
    }

    /// Since when the established hub has not answered; none while it answers.
    pub fn silent_since(&self) -> Option<Timestamp> {
        self.silent_since
    }

    /// Since when the established hub has answered, its watch up, without a claim for itself
    /// after its controller was seen republishing: rule 10's claim clock; none while that
    /// clock does not run.
    pub fn unclaimed_since(&self) -> Option<Timestamp> {
        self.unclaimed_since
    }

    /// Since when the switch `held` this round, as older than the basis, has rested on nothing
    /// rule 10 can end: the established hub answers without a claim for itself, and its claim
    /// clock does not run, because its controller was never seen republishing or its watch
    /// does not vouch (a controller that writes once, beside a worker that erases, would be
    /// taken for a dead one). Such a hold may last for ever, so it is said instead: the gauge
    /// behind `HubFollowerBasisUnconfirmed`. None for any other hold, and while the hub
    /// claims itself, errs, or is silent (rule 10 bounds that).
    pub fn unbounded_hold_since(&self, held: Option<&Held>) -> Option<Timestamp> {
        let older = held.is_some_and(|h| h.why.reason() == "older_than_basis");
        if !older || self.unclaimed_since.is_some() || self.silent_since.is_some() {
            return None;
        }
        self.answered_unclaimed_since
    }

    /// When the hold `held`, if rule 10 cannot end it, is said (its gauge reaches
    /// `dead_hub_after`), if that is still ahead of `now`: a read must come by then, so that a
    /// claim for itself the hub's watch showed since (which raises no news) is taken in first.
    pub fn unbounded_hold_said_at(&self, held: Option<&Held>, now: Timestamp) -> Option<Timestamp> {
        let bound = self.liveness.dead_hub_after?;
        let at = self.unbounded_hold_since(held)?.checked_add(bound).ok()?;
        (at > now).then_some(at)
    }

    /// When rule 10's claim clock reaches `dead_hub_after`, if it runs: the rule's outcome
    /// may change then with no read or event to show it, so a read must come by then.
    pub fn quiet_at(&self) -> Option<Timestamp> {
        let bound = self.liveness.dead_hub_after?;
        self.unclaimed_since?.checked_add(bound).ok()
    }

    /// The established hub has not answered since `since`, as an earlier run of the sidecar
    /// recorded: rule 10 counts from there until it answers, not from this process's start.
    /// Only after [`Resolver::resume`], and never later than what this process saw.
    pub fn resume_silence(&mut self, since: Timestamp) {
        if self.established.is_some() {
            self.silent_since = Some(self.silent_since.map_or(since, |s| s.min(since)));
        }
    }

    /// Rules 4 to 8: where the claims point.
    fn aim<'v>(
        &self,
        now: Timestamp,
        claims: &[Usable<'v>],
        verdicts: &[(HubId, &Verdict)],
        dead_hub: &mut Option<(HubId, Quiet)>,
    ) -> Aim<'v> {
        let winner = self.winner(claims);
        match (self.established, winner) {
            (None, Some((w, claim))) => Aim::Move {
                to: w,
                claim: Some(claim),
                by: None,
            },
            (None, None) => Aim::Move {
                to: Candidate {
                    hub: self.hubs.first().map_or(HubId::PRIMARY, |(h, _)| *h),
                    identity: None,
                },
                claim: None,
                by: None,
            },
            (Some(_), None) => Aim::Stay,
            (Some(current), Some((w, _))) if w.hub == current => Aim::Stay,
            (Some(_), Some((w, claim))) => {
                match self.hold(now, &w, claim, claims, verdicts, dead_hub) {
                    Some(why) => Aim::Hold(Held { candidate: w, why }),
                    None => Aim::Move {
                        to: w,
                        claim: Some(claim),
                        by: None,
                    },
                }
            }
        }
    }

    /// Rule 9, a pin of `h`: `None` leaves it to the claims (at startup, while `h` is silent,
    /// so that the worker starts on something).
    fn aim_pinned<'v>(
        &self,
        h: HubId,
        claims: &[Usable<'v>],
        verdicts: &[(HubId, &Verdict)],
    ) -> Option<Aim<'v>> {
        let silent = silence(h, verdicts);
        if self.established == Some(h) {
            // On the pinned hub: no failover while it is pinned. Its silence, against claims
            // that would move the worker, is said, so that it does not go unnoticed.
            let held = silent
                .zip(self.winner(claims))
                .filter(|(_, (w, _))| w.hub != h);
            return Some(match held {
                Some((reason, (w, _))) => Aim::Hold(Held {
                    candidate: w,
                    why: Hold::PinnedHubUnreachable { pinned: h, reason },
                }),
                None => Aim::Stay,
            });
        }
        if let Some(reason) = silent {
            return self.established.map(|_| {
                Aim::Hold(Held {
                    candidate: Candidate {
                        hub: h,
                        identity: None,
                    },
                    why: Hold::PinnedHubUnreachable { pinned: h, reason },
                })
            });
        }
        Some(Aim::Move {
            to: Candidate {
                hub: h,
                identity: None,
            },
            claim: freshest_naming(h, claims),
            by: Some(Kind::Pin),
        })
    }

    /// Rule 9, a drain of `d` while the worker is on `d` or on nothing yet; `claims` no longer
    /// hold those naming `d`. `None` leaves it to the claims: at startup, when a claim for
    /// another hub wins or no other hub answers (the worker starts on something).
    fn aim_drained<'v>(
        &self,
        d: HubId,
        claims: &[Usable<'v>],
        verdicts: &[(HubId, &Verdict)],
    ) -> Option<Aim<'v>> {
        let by = Some(Kind::Drain);
        let winner = self.winner(claims);
        if winner.is_some() && self.established.is_none() {
            return None;
        }
        if let Some((w, claim)) = winner {
            return Some(match credential_refused(w.hub, verdicts) {
                Some(e) => Aim::Hold(Held {
                    candidate: w,
                    why: Hold::Unauthenticated(e),
                }),
                None => Aim::Move {
                    to: w,
                    claim: Some(claim),
                    by,
                },
            });
        }
        let answered = self
            .hubs
            .iter()
            .map(|(h, _)| *h)
            .find(|h| *h != d && silence(*h, verdicts).is_none());
        match (answered, self.established) {
            (Some(h), _) => Some(Aim::Move {
                to: Candidate {
                    hub: h,
                    identity: None,
                },
                claim: None,
                by,
            }),
            (None, None) => None,
            (None, Some(_)) => {
                let next = self.hubs.iter().map(|(h, _)| *h).find(|h| *h != d)?;
                Some(Aim::Hold(Held {
                    candidate: Candidate {
                        hub: next,
                        identity: None,
                    },
                    why: Hold::DrainNoAlternative { drained: d },
                }))
            }
        }
    }

    /// Rule 5: the basis moves forward to the freshest claim naming the established hub.
    fn advance_basis(&mut self, claims: &[Usable<'_>]) {
        let established = self.established;
        for u in claims.iter().filter(|u| Some(u.target) == established) {
            self.advance_basis_to(u.claim);
        }
    }

    /// Rule 5: `claim`, naming the established hub, read or shown by a watch.
    fn advance_basis_to(&mut self, claim: &Claim) {
        if self
            .basis
            .as_ref()
            .is_none_or(|b| freshness(claim, b) == Ordering::Greater)
        {
            self.basis = Some(claim.clone());
        }
    }

    /// Rule 5 for more than two hubs: keeps the freshest claim naming each hub that is not the
    /// established one.
    fn note_other_hubs(&mut self, claims: &[Usable<'_>]) {
        for u in claims.iter().filter(|u| Some(u.target) != self.established) {
            match self.outranked_by.iter_mut().find(|(h, _)| *h == u.target) {
                Some((_, kept)) if freshness(u.claim, kept) == Ordering::Greater => {
                    *kept = u.claim.clone()
                }
                Some(_) => {}
                None => self.outranked_by.push((u.target, u.claim.clone())),
            }
        }
    }

    /// The basis, when it can order anything: one with neither epoch nor date cannot.
    fn floor(&self) -> Option<&Claim> {
        self.basis
            .as_ref()
            .filter(|b| b.epoch.is_some() || b.last_updated.is_some())
    }

    fn fresher_than_basis(&self, claim: &Claim) -> bool {
        self.floor()
            .is_none_or(|b| freshness(claim, b) == Ordering::Greater)
    }

    /// The reporters of claims for another hub that are old news.
    fn stale(&self, claims: &[Usable<'_>]) -> Vec<HubId> {
        let mut stale: Vec<HubId> = claims
            .iter()
            .filter(|u| Some(u.target) != self.established && !self.fresher_than_basis(u.claim))
            .map(|u| u.reporter)
            .collect();
        stale.dedup();
        stale
    }

    /// Rules 5 and 6: why the winner `w`, which is not the established hub, may not move the
    /// worker, if it may not.
    /// Rules 10 and 11 bound the holds of rule 5 and the moves of a split brain.
    fn hold(
        &self,
        now: Timestamp,
        w: &Candidate,
        claim: &Claim,
        claims: &[Usable<'_>],
        verdicts: &[(HubId, &Verdict)],
        dead_hub: &mut Option<(HubId, Quiet)>,
    ) -> Option<Hold> {
        let self_claimed = claims
            .iter()
            .any(|u| u.reporter == w.hub && u.target == w.hub);
        let basis_hold = self.basis_hold(w, claim);
        let quiet = self.established_is_quiet(now);
        let basis_hold = match (basis_hold, quiet, self.established) {
            (Some(_), Some(quiet), Some(e)) if self_claimed => {
                *dead_hub = Some((e, quiet));
                None
            }
            (other, _, _) => other,
        };
        if let Some(h) = basis_hold {
            // Both controllers still publish: the winner's claim was written after the move,
            // and the worker's hub claims itself at the same epoch. The basis holds the worker,
            // and the split brain is said for as long as it lasts.
            let written_since = self
                .decided_on
                .as_ref()
                .is_none_or(|d| freshness(claim, d) == Ordering::Greater);
            if matches!(h, Hold::NotFresherThanBasis { .. }) && self_claimed && written_since {
                if let Some(e) = self.established_claims_itself_at(claim, claims, verdicts) {
                    let until = self.moved_at.map(|moved_at| {
                        moved_at
                            .checked_add(self.liveness.split_brain_window)
                            .unwrap_or(now)
                            .max(now)
                    });
                    return Some(Hold::SplitBrain {
                        established: e,
                        moved_at: self.moved_at,
                        until,
                    });
                }
            }
            return Some(h);
        }
        // Rule 10's floor: the claim a silent hub was left with does not take the worker back.
        if let Some((_, left)) = self
            .left_behind
            .iter()
            .find(|(h, c)| *h == w.hub && freshness(claim, c) != Ordering::Greater)
        {
            return Some(Hold::NotFresherThanBasis {
                claim: claim.clone(),
                basis: left.clone(),
            });
        }
        if let Some(e) = credential_refused(w.hub, verdicts) {
            return Some(Hold::Unauthenticated(e));
        }
        self.split_brain(now, claim, claims, verdicts)
    }

    /// Rule 5: why the winner's claim is old news, if it is.
    fn basis_hold(&self, w: &Candidate, claim: &Claim) -> Option<Hold> {
        if let Some(basis) = self.floor().filter(|_| !self.fresher_than_basis(claim)) {
            return Some(Hold::NotFresherThanBasis {
                claim: claim.clone(),
                basis: basis.clone(),
            });
        }
        // A claim for a third hub seen since the decision is fresher: the winner is old news.
        // (With two hubs there is no third, and this never holds anything.)
        self.outranked_by
            .iter()
            .find(|(h, c)| *h != w.hub && freshness(c, claim) == Ordering::Greater)
            .map(|(names, newer)| Hold::OlderThanThirdHub {
                claim: claim.clone(),
                newer: newer.clone(),
                names: *names,
            })
    }

    /// Rule 11: a winner against the established hub's own claim at the same epoch, within a
    /// window of the last switch.
    fn split_brain(
        &self,
        now: Timestamp,
        claim: &Claim,
        claims: &[Usable<'_>],
        verdicts: &[(HubId, &Verdict)],
    ) -> Option<Hold> {
        let moved_at = self.moved_at?;
        let until = moved_at
            .checked_add(self.liveness.split_brain_window)
            .ok()?;
        if now >= until {
            return None;
        }
        let e = self.established_claims_itself_at(claim, claims, verdicts)?;
        Some(Hold::SplitBrain {
            established: e,
            moved_at: Some(moved_at),
            until: Some(until),
        })
    }

    /// Rule 11: the established hub, when what it says of itself is a claim at `claim`'s epoch.
    /// With the window off (zero) no split brain is told.
    fn established_claims_itself_at(
        &self,
        claim: &Claim,
        claims: &[Usable<'_>],
        verdicts: &[(HubId, &Verdict)],
    ) -> Option<HubId> {
        let e = self.established?;
        if self.liveness.split_brain_window.is_zero() {
            return None;
        }
        // What the established hub says of itself: its claim this round, or, when it shows none
        // (erased by the worker), the last one it showed. A hub that does not answer says
        // nothing: moving off it is a failover, not a flap.
        // A claim with no say (an endpoint not configured, a date too far ahead) says nothing
        // either way.
        let own = match verdicts.iter().find(|(h, _)| *h == e).map(|(_, v)| *v) {
            Some(Verdict::Claim(_) | Verdict::NoClaim) => {
                match claims.iter().find(|u| u.reporter == e) {
                    Some(u) => self.last_word(u.target == e, u.claim),
                    None => self.own_claim.clone(),
                }
            }
            _ => None,
        }?;
        (own.epoch == claim.epoch).then_some(e)
    }

    fn establish(
        &mut self,
        w: Candidate,
        claim: Option<&Claim>,
        reason: Reason,
        steered: Option<Kind>,
        now: Timestamp,
        left_silent: bool,
    ) -> Decision {
        if let (true, Some(from), Some(basis)) = (left_silent, self.established, self.floor()) {
            let basis = basis.clone();
            self.left_behind.retain(|(h, _)| *h != from);
            self.left_behind.push((from, basis));
        }
        self.established = Some(w.hub);
        self.silent_since = None;
        self.unclaimed_since = None;
        self.answered_unclaimed_since = None;
        self.republishing = Republishing::from(self.names(claim, w.hub));
        self.basis = claim.cloned();
        self.decided_on = claim.cloned();
        self.pending = None;
        self.outranked_by.clear();
        let reason = match (reason, self.first_unpublished) {
            (Reason::Switch, Some(first)) => first,
            (Reason::Startup | Reason::Default, _) => {
                self.first_unpublished = Some(reason);
                reason
            }
            _ => reason,
        };
        // An operator's move is theirs to pace: only the claims' switches open a window.
        if reason == Reason::Switch && steered.is_none() {
            self.moved_at = Some(now);
        }
        Decision {
            hub: w.hub,
            identity: w
                .identity
                .or_else(|| claim.and_then(|c| c.identity.clone())),
            reason,
            basis: self.basis.clone(),
            steered,
        }
    }

    fn confirm(
        &mut self,
        w: Candidate,
        claim: Option<&Claim>,
        steered: Option<Kind>,
        now: Timestamp,
        left_silent: bool,
    ) -> Option<Decision> {
        let count = match &self.pending {
            _ if self.vouched && steered.is_none() => self.confirmations,
            Some(p) if p.candidate == w && p.steered == steered => p.count + 1,
            _ => 1,
        };
        if count >= self.confirmations {
            return Some(self.establish(w, claim, Reason::Switch, steered, now, left_silent));
        }
        self.pending = Some(Pending {
            candidate: w,
            count,
            steered,
        });
        None
    }

    /// The claims that name a configured hub, in configuration order of the hub that reported
    /// them; the reporters whose claim named anything else; and those whose claim is dated too
    /// far ahead.
    #[allow(clippy::type_complexity)]
    fn usable_claims<'v>(
        &self,
        now: Timestamp,
        verdicts: &[(HubId, &'v Verdict)],
    ) -> (Vec<Usable<'v>>, Vec<HubId>, Vec<(HubId, ProbeError)>) {
        let mut sorted: Vec<_> = verdicts.to_vec();
        sorted.sort_by_key(|(reporter, _)| self.position(*reporter));
        let mut claims = Vec::new();
        let mut rejected = Vec::new();
        let mut ahead = Vec::new();
        for (reporter, verdict) in sorted {
            let Verdict::Claim(claim) = verdict else {
                continue;
            };
            if let Some(e) = too_far_ahead(claim, now) {
                ahead.push((reporter, e));
                continue;
            }
            match Candidate::of(claim, &self.hubs) {
                Some(c) => claims.push(Usable {
                    target: c.hub,
                    claim,
                    reporter,
                }),
                None => rejected.push(reporter),
            }
        }
        (claims, rejected, ahead)
    }

    /// Where `hub` stands in configuration order, which breaks ties; an unknown hub last.
    fn position(&self, hub: HubId) -> usize {
        self.hubs
            .iter()
            .position(|(h, _)| *h == hub)
            .unwrap_or(usize::MAX)
    }

    /// Rule 4: the winning candidate and the claim it wins with.
    fn winner<'v>(&self, claims: &[Usable<'v>]) -> Option<(Candidate, &'v Claim)> {
        let freshest = claims
            .iter()
            .map(|u| u.claim)
            .max_by(|a, b| freshness(a, b))?;
        let tied: Vec<&Usable<'v>> = claims
            .iter()
            .filter(|u| freshness(u.claim, freshest) == Ordering::Equal)
            .collect();
        let agreed = claims.iter().all(|u| u.target == claims[0].target);
        let best = if agreed {
            // Everyone names one hub; take the identity from the freshest report of it.
            tied[0]
        } else {
            tied.iter()
                .find(|u| Some(u.target) == self.established)
                .or_else(|| tied.iter().min_by_key(|u| self.position(u.target)))
                .copied()?
        };
        Some((
            Candidate {
                hub: best.target,
                identity: best.claim.identity.clone(),
            },
            best.claim,
        ))
    }
}

/// Where a round points, before the confirmation count.
enum Aim<'v> {
    /// Nothing to move to: any count restarts.
    Stay,
    /// A winner that does not move the worker this round; any count restarts.
    Hold(Held),
    /// Move there: at once at startup, else once confirmed. `claim` is the move's basis.
    Move {
        to: Candidate,
        claim: Option<&'v Claim>,
        by: Option<Kind>,
    },
}

/// Why `claim` has no say at `now` for its date (rule 3), if it has none.
fn too_far_ahead(claim: &Claim, now: Timestamp) -> Option<ProbeError> {
    let at = claim
        .last_updated
        .filter(|at| claim.epoch.is_none() && at.duration_since(now) > MAX_FUTURE_SKEW)?;
    let detail = format!("status.activeController.lastUpdated {at} is more than {MAX_FUTURE_SKEW:#} ahead of this clock ({now}), and the claim carries no epoch");
    Some(ProbeError::new(ErrorReason::BadResponse, detail))
}

/// Why `hub` did not answer this round, if it did not (no verdict counts as a timeout).
fn silence(hub: HubId, verdicts: &[(HubId, &Verdict)]) -> Option<ErrorReason> {
    match verdicts.iter().find(|(h, _)| *h == hub) {
        Some((_, Verdict::Error(e))) => Some(e.reason),
        Some(_) => None,
        None => Some(ErrorReason::Timeout),
    }
}

/// Rule 6: the reason `hub` refused our credential this round, if it did.
fn credential_refused(hub: HubId, verdicts: &[(HubId, &Verdict)]) -> Option<ErrorReason> {
    verdicts.iter().find_map(|(h, v)| match v {
        Verdict::Error(e) if *h == hub && e.reason.is_credential() => Some(e.reason),
        _ => None,
    })
}

/// The freshest usable claim naming `hub`.
fn freshest_naming<'v>(hub: HubId, claims: &[Usable<'v>]) -> Option<&'v Claim> {
    claims
        .iter()
        .filter(|u| u.target == hub)
        .map(|u| u.claim)
        .max_by(|a, b| freshness(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{ErrorReason, ProbeError};
    use jiff::Timestamp;
    const P: HubId = HubId::PRIMARY;
    const S: HubId = HubId::SECONDARY;

    const A: &str = "https://10.1.80.11:6443";
    const B: &str = "https://10.1.80.12:6443";
    const ROGUE: &str = "https://203.0.113.9:6443";

    fn resolver(n: u32) -> Resolver {
        Resolver::new(
            vec![
                (P, Endpoint::parse(A).unwrap()),
                (S, Endpoint::parse(B).unwrap()),
            ],
            n,
        )
    }

    fn at(secs: i64) -> Option<Timestamp> {
        Some(Timestamp::from_second(1_800_000_000 + secs).unwrap())
    }

    fn claim(endpoint: &str, identity: &str, when: Option<Timestamp>) -> Verdict {
        Verdict::Claim(Claim {
            endpoint: Endpoint::parse(endpoint).unwrap(),
            identity: Some(identity.into()),
            last_updated: when,
            epoch: None,
        })
    }

    #[test]
    fn every_hold_reason_is_listed_for_the_metrics() {
        let c = Claim {
            endpoint: Endpoint::parse(A).unwrap(),
            identity: None,
            last_updated: at(0),
            epoch: None,
        };
        let holds = [
            Hold::NotFresherThanBasis {
                claim: c.clone(),
                basis: c.clone(),
            },
            Hold::OlderThanThirdHub {
                claim: c.clone(),
                newer: c,
                names: P,
            },
            Hold::Unauthenticated(ErrorReason::Unauthorized),
            Hold::PinnedHubUnreachable {
                pinned: P,
                reason: ErrorReason::Timeout,
            },
            Hold::DrainNoAlternative { drained: P },
            Hold::SplitBrain {
                established: P,
                moved_at: None,
                until: None,
            },
        ];
        let mut seen: Vec<&str> = holds.iter().map(Hold::reason).collect();
        seen.sort_unstable();
        seen.dedup();
        let mut listed = Hold::REASONS.to_vec();
        listed.sort_unstable();
        assert_eq!(seen, listed);
    }

    fn claim_epoch(endpoint: &str, epoch: u64, when: Option<Timestamp>) -> Verdict {
        Verdict::Claim(Claim {
            epoch: Some(epoch),
            ..as_claim(&claim(endpoint, &format!("e{epoch}"), when))
        })
    }

    fn as_claim(v: &Verdict) -> Claim {
        match v {
            Verdict::Claim(c) => c.clone(),
            other => panic!("not a claim: {other:?}"),
        }
    }

    fn refused(reason: ErrorReason) -> Verdict {
        Verdict::Error(ProbeError::new(reason, "refused"))
    }

    fn down() -> Verdict {
        Verdict::Error(ProbeError::new(ErrorReason::Timeout, "no answer"))
    }

    /// The sidecar's clock in these tests: well after every claim's `lastUpdated`.
    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000 + 86_400).unwrap()
    }

    /// One round whose decision, if any, reaches the disk.
    fn round(r: &mut Resolver, p: &Verdict, s: &Verdict) -> Step {
        let step = r.observe(now(), &[(P, p), (S, s)]);
        if step.decision.is_some() {
            r.published();
        }
        step
    }

    fn hub_of(step: &Step) -> Option<(HubId, Reason)> {
        step.decision.as_ref().map(|d| (d.hub, d.reason))
    }

    /// A resolver that has settled on `hub` through a startup round.
    fn settled_on(hub: HubId, n: u32) -> Resolver {
        let mut r = resolver(n);
        let target = if hub == P { A } else { B };
        let c = claim(target, "x", at(0));
        assert_eq!(hub_of(&round(&mut r, &c, &c)), Some((hub, Reason::Startup)));
        r
    }

    // The clock, the first decision and resuming.

    #[test]
    fn a_claim_dated_too_far_ahead_has_no_say_and_is_a_bad_response() {
        let mut r = settled_on(P, 1);
        let now = now();
        let ahead = |secs: i64| Some(now.checked_add(SignedDuration::from_secs(secs)).unwrap());
        // Four minutes ahead is a clock a little fast: accepted.
        let step = round(&mut r, &down(), &claim(B, "b", ahead(240)));
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
        assert!(step.ahead.is_empty());
        // More than five: no say, whatever it names.
        let step = round(&mut r, &claim(A, "a", ahead(301)), &down());
        assert_eq!(step.decision, None);
        let e = step.refused(P).unwrap();
        assert_eq!(e.reason, ErrorReason::BadResponse);
        assert!(e.detail.contains("more than 5m ahead"), "{}", e.detail);
        assert_eq!(step.refused(S), None);
        // With an epoch the clock only breaks ties: the same date keeps its say.
        let mut r = settled_on(P, 1);
        let step = round(&mut r, &down(), &claim_epoch(B, 3, ahead(3600)));
        assert!(step.ahead.is_empty());
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
    }

    #[test]
    fn a_first_decision_that_never_reached_the_disk_stays_the_first() {
        let mut r = resolver(1);
        let a = claim(A, "a", at(0));
        let b = claim(B, "b", at(1));
        // The startup decision's write fails (no `published()`): what replaces it is still
        // the startup decision, not a switch to restart the worker for.
        let step = r.observe(now(), &[(P, &a), (S, &a)]);
        assert_eq!(hub_of(&step), Some((P, Reason::Startup)));
        let step = r.observe(now(), &[(P, &b), (S, &b)]);
        assert_eq!(hub_of(&step), Some((S, Reason::Startup)));
        r.published();
        let a = claim(A, "a", at(2));
        let step = r.observe(now(), &[(P, &a), (S, &a)]);
        assert_eq!(hub_of(&step), Some((P, Reason::Switch)));
        // The same for a default.
        let mut r = resolver(1);
        assert_eq!(
            hub_of(&r.observe(now(), &[(P, &down()), (S, &down())])),
            Some((P, Reason::Default))
        );
        assert_eq!(
            hub_of(&r.observe(now(), &[(P, &b), (S, &b)])),
            Some((S, Reason::Default))
        );
    }

    #[test]
    fn resuming_needs_the_hub_still_configured_at_the_same_endpoint() {
        let mut r = resolver(3);
        assert_eq!(r.resume(S, "https://10.1.80.99:6443", None, None), None);
        assert_eq!(r.resume(S, "not a url", None, None), None);
        // Another spelling of the same endpoint is the same hub.
        let d = r.resume(S, "HTTPS://10.1.80.12:6443/", None, None).unwrap();
        assert_eq!((d.hub, d.reason), (S, Reason::Resumed));
    }

    #[test]
    fn candidates_ignore_last_updated_and_unconfigured_endpoints() {
        let hubs = [
            (P, Endpoint::parse(A).unwrap()),
            (S, Endpoint::parse(B).unwrap()),
        ];
        let claim = |endpoint: &str, identity: &str, when| Claim {
            endpoint: Endpoint::parse(endpoint).unwrap(),
            identity: Some(identity.into()),
            last_updated: when,
            epoch: None,
        };
        let a = Candidate::of(&claim(B, "x", at(0)), &hubs);
        assert_eq!(a, Candidate::of(&claim(B, "x", None), &hubs));
        assert_ne!(a, Candidate::of(&claim(B, "y", at(0)), &hubs));
        assert_eq!(a.map(|c| c.hub), Some(S));
        assert_eq!(Candidate::of(&claim(ROGUE, "x", at(0)), &hubs), None);
    }

    // Rule 6: startup.

    #[test]
    fn startup_takes_the_first_winner_at_once() {
        let mut r = resolver(3);
        let c = claim(B, "ctrl-b", at(0));
        let step = round(&mut r, &c, &c);
        assert_eq!(
            step.decision,
            Some(Decision {
                hub: S,
                identity: Some("ctrl-b".into()),
                reason: Reason::Startup,
                basis: Some(as_claim(&c)),
                steered: None,
            })
        );
        assert_eq!(r.established(), Some(S));
    }

    #[test]
    fn startup_without_any_usable_claim_defaults_to_the_primary() {
        for (p, s) in [
            (down(), down()),
            (Verdict::NoClaim, Verdict::NoClaim),
            (claim(ROGUE, "x", at(0)), down()),
        ] {
            let mut r = resolver(3);
            assert_eq!(hub_of(&round(&mut r, &p, &s)), Some((P, Reason::Default)));
        }
    }

    #[test]
    fn a_default_start_still_needs_confirmations_to_move() {
        let mut r = resolver(2);
        round(&mut r, &down(), &down());
        let c = claim(B, "b", at(0));
        assert_eq!(round(&mut r, &down(), &c).decision, None);
        assert_eq!(
            hub_of(&round(&mut r, &down(), &c)),
            Some((S, Reason::Switch))
        );
    }

    #[test]
    fn a_resumed_decision_is_established_and_moving_away_needs_confirmations() {
        let mut r = resolver(3);
        let d = r.resume(S, B, Some("b".into()), None).unwrap();
        assert_eq!((d.hub, d.reason), (S, Reason::Resumed));
        let c = claim(A, "a", at(0));
        assert_eq!(round(&mut r, &c, &c).decision, None);
        assert_eq!(round(&mut r, &c, &c).decision, None);
        assert_eq!(hub_of(&round(&mut r, &c, &c)), Some((P, Reason::Switch)));
    }

    #[test]
    fn resuming_a_hub_that_is_no_longer_configured_is_refused() {
        let mut r = Resolver::new(vec![(P, Endpoint::parse(A).unwrap())], 3);
        assert_eq!(r.resume(S, B, None, None), None);
        assert_eq!(r.established(), None);
    }

    // Rules 1 and 2: no say.

    #[test]
    fn unreachable_and_silent_hubs_change_nothing() {
        let mut r = settled_on(P, 1);
        for (p, s) in [
            (down(), down()),
            (Verdict::NoClaim, down()),
            (Verdict::NoClaim, Verdict::NoClaim),
        ] {
            assert_eq!(round(&mut r, &p, &s), Step::default());
        }
        assert_eq!(r.established(), Some(P));
    }

    #[test]
    fn one_hub_claiming_while_the_other_is_down_is_agreement() {
        let mut r = settled_on(P, 2);
        let c = claim(B, "b", at(5));
        assert_eq!(round(&mut r, &down(), &c).decision, None);
        assert_eq!(
            hub_of(&round(&mut r, &down(), &c)),
            Some((S, Reason::Switch))
        );
    }

    // Rule 3: unconfigured endpoints.

    #[test]
    fn a_claim_for_an_unconfigured_endpoint_is_rejected_and_reported() {
        let mut r = settled_on(P, 1);
        let rogue = claim(ROGUE, "evil", at(100));
        let step = round(&mut r, &rogue, &rogue);
        assert_eq!(step.decision, None);
        assert_eq!(step.rejected, vec![P, S]);
        assert_eq!(r.established(), Some(P));
    }

    #[test]
    fn a_rejected_claim_does_not_outvote_a_valid_one() {
        let mut r = settled_on(P, 1);
        let step = round(
            &mut r,
            &claim(ROGUE, "evil", at(100)),
            &claim(B, "b", at(1)),
        );
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
        assert_eq!(step.rejected, vec![P]);
    }

    // Rule 4: agreement, then freshness, then a deterministic tie-break.

    #[test]
    fn on_disagreement_the_fresher_claim_wins() {
        let mut r = settled_on(P, 1);
        let step = round(&mut r, &claim(A, "a", at(10)), &claim(B, "b", at(11)));
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
    }

    #[test]
    fn a_missing_timestamp_is_older_than_any() {
        // Settled on B by a claim at 0: A's claim at 1 is fresher than that basis, and wins
        // against B's undated one.
        let mut r = settled_on(S, 1);
        let step = round(&mut r, &claim(A, "a", at(1)), &claim(B, "b", None));
        assert_eq!(hub_of(&step), Some((P, Reason::Switch)));
    }

    #[test]
    fn a_tie_keeps_the_established_hub() {
        let mut r = settled_on(S, 1);
        let step = round(&mut r, &claim(A, "a", at(10)), &claim(B, "b", at(10)));
        assert_eq!(step.decision, None);
        assert_eq!(r.established(), Some(S));
    }

    #[test]
    fn a_tie_without_the_established_hub_goes_to_configuration_order() {
        // At startup nothing is established, so a tie goes to the hub configured first,
        // whichever hub reported it.
        let mut r = resolver(1);
        let step = round(&mut r, &claim(B, "b", at(10)), &claim(A, "a", at(10)));
        assert_eq!(hub_of(&step), Some((P, Reason::Startup)));
        let mut r = resolver(1);
        let step = round(&mut r, &claim(B, "b", None), &claim(A, "a", None));
        assert_eq!(hub_of(&step), Some((P, Reason::Startup)));
    }

    #[test]
    fn with_three_hubs_a_tie_goes_to_the_earliest_listed_and_the_fresher_claim_wins() {
        const C: &str = "https://10.1.80.13:6443";
        let c = HubId::named("hub-c");
        let hubs = vec![
            (P, Endpoint::parse(A).unwrap()),
            (S, Endpoint::parse(B).unwrap()),
            (c, Endpoint::parse(C).unwrap()),
        ];
        let now = Timestamp::from_second(1_800_000_000 + 86_400).unwrap();
        // Established on A; B and C claim themselves equally fresh: B is listed first.
        let mut r = Resolver::new(hubs.clone(), 1);
        r.observe(now, &[(P, &claim(A, "a", at(1)))]);
        r.published();
        let (cb, cc) = (claim(B, "b", at(10)), claim(C, "c", at(10)));
        let step = r.observe(now, &[(c, &cc), (S, &cb), (P, &Verdict::NoClaim)]);
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
        // C's claim is fresher: C wins, whoever reports it.
        let mut r = Resolver::new(hubs.clone(), 1);
        r.observe(now, &[(P, &claim(A, "a", at(1)))]);
        r.published();
        let fresher = claim(C, "c", at(11));
        let step = r.observe(now, &[(S, &fresher), (c, &Verdict::NoClaim), (P, &cb)]);
        assert_eq!(hub_of(&step), Some((c, Reason::Switch)));

        // Rule 5 with a third hub: on A, C's claim at 12 is seen, then C goes silent and B's
        // older claim (11) agrees with itself for as long as it likes: held, the worker stays.
        // B's next word, fresher than C's, moves it.
        let mut r = Resolver::new(hubs, 2);
        r.observe(now, &[(P, &claim(A, "a", at(1)))]);
        r.published();
        let newest = claim(C, "c", at(12));
        let step = r.observe(now, &[(c, &newest), (S, &claim(B, "b", at(11)))]);
        assert_eq!(step.decision, None);
        assert!(r.pending().is_some_and(|p| p.candidate.hub == c));
        let gone = Verdict::Error(ProbeError::new(ErrorReason::Timeout, "late"));
        for _ in 0..3 {
            let step = r.observe(now, &[(c, &gone), (S, &claim(B, "b", at(11)))]);
            assert_eq!(step.decision, None);
            assert!(
                matches!(&step.held, Some(Held { why: Hold::OlderThanThirdHub { newer, names, .. }, .. }) if newer.last_updated == at(12) && *names == c),
                "{step:?}"
            );
        }
        assert_eq!(r.established(), Some(P));
        for _ in 0..2 {
            r.observe(now, &[(c, &gone), (S, &claim(B, "b", at(13)))]);
        }
        assert_eq!(r.established(), Some(S));
    }

    #[test]
    fn the_identity_comes_from_the_freshest_report() {
        let mut r = resolver(1);
        let step = round(&mut r, &claim(B, "old", at(1)), &claim(B, "new", at(2)));
        assert_eq!(step.decision.unwrap().identity.as_deref(), Some("new"));
    }

    // Rule 5 and 6: confirmations.

    #[test]
    fn a_switch_needs_exactly_n_consecutive_confirming_rounds() {
        let mut r = settled_on(P, 3);
        let c = claim(B, "b", at(20));
        assert_eq!(round(&mut r, &down(), &c).decision, None);
        assert_eq!(r.pending().map(|p| p.count), Some(1));
        assert_eq!(round(&mut r, &down(), &c).decision, None);
        assert_eq!(r.pending().map(|p| p.count), Some(2));
        assert_eq!(
            hub_of(&round(&mut r, &down(), &c)),
            Some((S, Reason::Switch))
        );
        assert_eq!(r.pending(), None);
        assert_eq!(r.established(), Some(S));
    }

    #[test]
    fn confirmations_ignore_a_republished_timestamp() {
        let mut r = settled_on(P, 3);
        for (i, expect) in [(1, None), (2, None), (3, Some((S, Reason::Switch)))] {
            let c = claim(B, "b", at(100 + i));
            assert_eq!(hub_of(&round(&mut r, &c, &c)), expect);
        }
    }

    #[test]
    fn a_vouched_round_stands_for_every_confirmation_but_for_no_hold() {
        let mut r = settled_on(P, 3);
        let b = claim(B, "b", at(5));
        let step = r.observe_vouched(now(), &[(P, &down()), (S, &b)]);
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
        r.published();
        // A claim older than the basis is held however long it stood (rule 5).
        let old = claim(A, "a", at(1));
        let step = r.observe_vouched(now(), &[(P, &old), (S, &down())]);
        assert_eq!(step.decision, None);
        assert_eq!(r.pending(), None);
        // And a plain round after it counts from one again.
        let fresh = claim(A, "a", at(9));
        round(&mut r, &fresh, &down());
        assert_eq!(r.pending().map(|p| p.count), Some(1));
    }

    #[test]
    fn a_round_without_a_winner_resets_the_count() {
        let mut r = settled_on(P, 2);
        let c = claim(B, "b", at(5));
        round(&mut r, &down(), &c);
        round(&mut r, &down(), &down());
        assert_eq!(r.pending(), None);
        assert_eq!(round(&mut r, &down(), &c).decision, None);
        assert_eq!(
            hub_of(&round(&mut r, &down(), &c)),
            Some((S, Reason::Switch))
        );
    }

    #[test]
    fn a_round_naming_the_established_hub_resets_the_count() {
        let mut r = settled_on(P, 2);
        let b = claim(B, "b", at(5));
        let a = claim(A, "a", at(6));
        round(&mut r, &b, &b);
        assert_eq!(round(&mut r, &a, &a).decision, None);
        assert_eq!(r.pending(), None);
        assert_eq!(round(&mut r, &b, &b).decision, None);
    }

    #[test]
    fn a_different_candidate_restarts_the_count_at_one() {
        let mut r = settled_on(P, 2);
        round(&mut r, &down(), &claim(B, "b1", at(5)));
        assert_eq!(
            round(&mut r, &down(), &claim(B, "b2", at(6))).decision,
            None
        );
        assert_eq!(r.pending().map(|p| p.count), Some(1));
        assert_eq!(
            hub_of(&round(&mut r, &down(), &claim(B, "b2", at(7)))),
            Some((S, Reason::Switch))
        );
    }

    #[test]
    fn one_confirmation_switches_on_the_first_divergent_round() {
        let mut r = settled_on(P, 1);
        let c = claim(B, "b", at(5));
        assert_eq!(hub_of(&round(&mut r, &c, &c)), Some((S, Reason::Switch)));
    }

    // Rule 5: the basis.

    #[test]
    fn a_returning_hub_with_an_older_claim_never_moves_the_worker() {
        // The issue's story: A fails, B is promoted, the worker moves to B and erases B's
        // claim; A comes back still carrying its old claim.
        let mut r = settled_on(P, 2);
        let b = claim(B, "b", at(100));
        assert_eq!(round(&mut r, &down(), &b).decision, None);
        assert_eq!(
            hub_of(&round(&mut r, &down(), &b)),
            Some((S, Reason::Switch))
        );
        assert_eq!(r.basis(), Some(&as_claim(&b)));
        let stale = claim(A, "a", at(0));
        for _ in 0..20 {
            let step = round(&mut r, &stale, &Verdict::NoClaim);
            assert_eq!(step.decision, None);
            assert_eq!(step.stale, vec![P]);
            let held = step.held.unwrap();
            assert_eq!(held.candidate.hub, P);
            assert!(matches!(held.why, Hold::NotFresherThanBasis { .. }));
            assert_eq!(r.pending(), None);
        }
        // Nor when B's claim flickers back and away again.
        for i in 0..10 {
            let b = if i % 2 == 0 {
                Verdict::NoClaim
            } else {
                b.clone()
            };
            assert_eq!(round(&mut r, &stale, &b).decision, None);
        }
        assert_eq!(r.established(), Some(S));
    }

    #[test]
    fn a_genuine_failback_with_a_fresher_claim_switches_exactly_once() {
        let mut r = settled_on(P, 2);
        let b = claim(B, "b", at(100));
        round(&mut r, &down(), &b);
        round(&mut r, &down(), &b);
        assert_eq!(r.established(), Some(S));
        let a = claim(A, "a", at(200));
        let mut switches = 0;
        for _ in 0..10 {
            // The worker on B erases B's claim; A is promoted again with a fresher one.
            if round(&mut r, &a, &Verdict::NoClaim).decision.is_some() {
                switches += 1;
            }
        }
        assert_eq!(switches, 1);
        assert_eq!(r.established(), Some(P));
        assert_eq!(r.basis(), Some(&as_claim(&a)));
    }

    #[test]
    fn the_basis_moves_forward_with_claims_naming_the_established_hub() {
        let mut r = settled_on(S, 1);
        assert_eq!(r.basis().and_then(|b| b.last_updated), at(0));
        // B republishes; the basis follows. An older republication does not move it back.
        round(&mut r, &down(), &claim(B, "b", at(50)));
        assert_eq!(r.basis().and_then(|b| b.last_updated), at(50));
        round(&mut r, &down(), &claim(B, "b", at(40)));
        assert_eq!(r.basis().and_then(|b| b.last_updated), at(50));
        // So a claim for A dated between the decision and B's last republication is old news.
        let step = round(&mut r, &claim(A, "a", at(45)), &Verdict::NoClaim);
        assert_eq!(step.decision, None);
        assert_eq!(step.stale, vec![P]);
    }

    #[test]
    fn a_claim_as_fresh_as_the_basis_keeps_the_established_hub() {
        let mut r = settled_on(S, 1);
        let step = round(&mut r, &claim(A, "a", at(0)), &Verdict::NoClaim);
        assert_eq!(step.decision, None);
        assert!(step.held.is_some());
    }

    #[test]
    fn a_default_or_undated_basis_holds_nothing_back() {
        // A default has no basis until a claim names the established hub.
        let mut r = resolver(1);
        round(&mut r, &down(), &down());
        assert_eq!(r.basis(), None);
        assert_eq!(
            hub_of(&round(&mut r, &claim(B, "b", at(0)), &down())),
            Some((S, Reason::Switch))
        );
        // Undated claims cannot be ordered, so the rule falls back to confirmations alone.
        let mut r = resolver(1);
        round(&mut r, &claim(A, "a", None), &claim(A, "a", None));
        assert_eq!(
            hub_of(&round(&mut r, &down(), &claim(B, "b", None))),
            Some((S, Reason::Switch))
        );
        // But a dated basis holds an undated claim back: a missing date is older than any.
        let mut r = settled_on(P, 1);
        let step = round(&mut r, &down(), &claim(B, "b", None));
        assert_eq!(step.decision, None);
        assert!(step.held.is_some());
    }

    #[test]
    fn a_resumed_basis_holds_back_older_claims_and_a_missing_one_is_adopted() {
        let b = as_claim(&claim(B, "b", at(100)));
        let mut r = resolver(1);
        r.resume(S, B, Some("b".into()), Some(b.clone())).unwrap();
        assert_eq!(
            round(&mut r, &claim(A, "a", at(50)), &down()).decision,
            None
        );
        // A handoff written before bases were kept resumes without one, and takes the first
        // claim naming the established hub as its basis.
        let mut r = resolver(1);
        r.resume(S, B, Some("b".into()), None).unwrap();
        round(&mut r, &claim(B, "b", at(100)), &Verdict::NoClaim);
        assert_eq!(r.basis(), Some(&b));
        assert_eq!(
            round(&mut r, &claim(A, "a", at(50)), &down()).decision,
            None
        );
    }

    #[test]
    fn a_pending_switch_is_dropped_when_the_basis_overtakes_it() {
        let mut r = settled_on(P, 3);
        round(&mut r, &down(), &claim(B, "b", at(10)));
        assert_eq!(r.pending().map(|p| p.count), Some(1));
        // A republishes, fresher than B's claim: B's claim is now old news.
        let step = round(&mut r, &claim(A, "a", at(20)), &claim(B, "b", at(10)));
        assert_eq!(step.decision, None);
        assert_eq!(r.pending(), None);
        assert_eq!(
            round(&mut r, &down(), &claim(B, "b", at(10))).decision,
            None
        );
        assert_eq!(r.pending(), None);
    }

    // Epochs.

    #[test]
    fn with_epochs_the_higher_epoch_wins_whatever_the_clocks_say() {
        // B's controller clock is ten minutes behind: its claim is dated earlier, but its
        // epoch says it was promoted after A.
        let mut r = resolver(1);
        let a = claim_epoch(A, 4, at(600));
        let b = claim_epoch(B, 5, at(0));
        let step = round(&mut r, &a, &b);
        assert_eq!(hub_of(&step), Some((S, Reason::Startup)));
        // A's older epoch, however late its date, never moves the worker back.
        for secs in [601, 3600, 86_000] {
            let step = round(&mut r, &claim_epoch(A, 4, at(secs)), &Verdict::NoClaim);
            assert_eq!(step.decision, None, "lastUpdated +{secs}s");
        }
        // A promoted again, with a higher epoch and a date older than anything: a switch.
        let step = round(&mut r, &claim_epoch(A, 6, at(-600)), &Verdict::NoClaim);
        assert_eq!(hub_of(&step), Some((P, Reason::Switch)));
    }

    #[test]
    fn equal_epochs_fall_back_to_last_updated_and_equal_claims_keep_the_established_hub() {
        let mut r = settled_on(P, 1);
        // Settled on A with no epoch; from now on claims carry epoch 3.
        round(&mut r, &claim_epoch(A, 3, at(10)), &down());
        let step = round(
            &mut r,
            &claim_epoch(A, 3, at(10)),
            &claim_epoch(B, 3, at(10)),
        );
        assert_eq!(step.decision, None);
        let step = round(
            &mut r,
            &claim_epoch(A, 3, at(10)),
            &claim_epoch(B, 3, at(11)),
        );
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
    }

    #[test]
    fn a_missing_epoch_is_lower_than_any() {
        let mut r = settled_on(P, 1);
        round(&mut r, &claim_epoch(A, 0, at(10)), &down());
        // Epoch 0 against none: however late B's date, A's epoch is fresher.
        let step = round(&mut r, &down(), &claim(B, "b", at(3600)));
        assert_eq!(step.decision, None);
        assert!(step.held.is_some());
    }

    #[test]
    fn freshness_orders_by_epoch_then_date() {
        let c = |epoch, secs| Claim {
            epoch,
            ..as_claim(&claim(A, "a", at(secs)))
        };
        assert_eq!(
            freshness(&c(Some(2), 0), &c(Some(1), 99)),
            Ordering::Greater
        );
        assert_eq!(freshness(&c(Some(1), 5), &c(Some(1), 4)), Ordering::Greater);
        assert_eq!(freshness(&c(Some(1), 5), &c(Some(1), 5)), Ordering::Equal);
        assert_eq!(freshness(&c(None, 99), &c(Some(0), 6)), Ordering::Less);
        let undated = Claim {
            last_updated: None,
            ..c(None, 0)
        };
        assert_eq!(freshness(&undated, &c(None, -10_000)), Ordering::Less);
    }

    // Rule 6: a hub that refuses our credential.

    #[test]
    fn a_switch_to_a_hub_that_refuses_our_credential_is_held() {
        for reason in [
            ErrorReason::Unauthorized,
            ErrorReason::Forbidden,
            ErrorReason::Tls,
            ErrorReason::Credentials,
        ] {
            let mut r = settled_on(P, 2);
            // A, still up, mirrors B's promotion; B itself refuses us.
            let b = claim(B, "b", at(100));
            for _ in 0..5 {
                let step = round(&mut r, &b, &refused(reason));
                assert_eq!(step.decision, None, "{reason}");
                assert_eq!(
                    step.held.map(|h| h.why),
                    Some(Hold::Unauthenticated(reason))
                );
                assert_eq!(r.pending(), None);
            }
            // Once B lets us in, the switch is confirmed as usual.
            assert_eq!(round(&mut r, &b, &b).decision, None);
            assert_eq!(hub_of(&round(&mut r, &b, &b)), Some((S, Reason::Switch)));
        }
        // An unreachable hub is not a refusal: the Standby's word still moves the worker.
        let mut r = settled_on(P, 1);
        let step = round(&mut r, &claim(B, "b", at(100)), &down());
        assert_eq!(hub_of(&step), Some((S, Reason::Switch)));
    }

    #[test]
    fn alternating_claims_never_switch() {
        let mut r = settled_on(P, 2);
        for i in 0..20 {
            let (p, s) = if i % 2 == 0 {
                (claim(B, "b", at(i)), claim(B, "b", at(i)))
            } else {
                (claim(A, "a", at(i)), claim(A, "a", at(i)))
            };
            assert_eq!(round(&mut r, &p, &s).decision, None);
        }
        assert_eq!(r.established(), Some(P));
    }

    // Rule 9: an operator's pin and drain.

    fn steered(r: &mut Resolver, p: &Verdict, s: &Verdict, steer: Steer) -> Step {
        let step = r.observe_steered(now(), &[(P, p), (S, s)], steer);
        if step.decision.is_some() {
            r.published();
        }
        step
    }

    fn pin(h: HubId) -> Steer {
        Steer {
            pin: Some(h),
            drain: None,
        }
    }

    fn drain(h: HubId) -> Steer {
        Steer {
            pin: None,
            drain: Some(h),
        }
    }

    #[test]
    fn a_pin_moves_the_worker_once_confirmed_whatever_the_claims_say() {
        let mut r = settled_on(P, 3);
        let a = claim_epoch(A, 5, at(10));
        for count in 1..3 {
            let step = steered(&mut r, &a, &Verdict::NoClaim, pin(S));
            assert_eq!(step.decision, None);
            assert_eq!(
                r.pending().map(|p| (p.candidate.hub, p.count)),
                Some((S, count))
            );
            assert!(step.stale.is_empty());
        }
        let step = steered(&mut r, &a, &Verdict::NoClaim, pin(S));
        let d = step.decision.expect("the third confirming round moves");
        assert_eq!(
            (d.hub, d.reason, d.steered),
            (S, Reason::Switch, Some(Kind::Pin))
        );
        assert_eq!(d.basis, None, "no claim names the pinned hub");
        // Pinned: claims for the other hub, however fresh, have no say.
        for i in 0..5 {
            let a = claim_epoch(A, 6 + i, at(20));
            assert_eq!(steered(&mut r, &a, &a, pin(S)).decision, None);
            assert_eq!(r.pending(), None);
        }
        // Once the pin ends, a claim fresher than the pinned move's basis moves the worker back.
        let a = claim_epoch(A, 6, at(20));
        for _ in 0..2 {
            assert_eq!(steered(&mut r, &a, &a, Steer::default()).decision, None);
        }
        let back = steered(&mut r, &a, &a, Steer::default()).decision.unwrap();
        assert_eq!((back.hub, back.steered), (P, None));
    }

    #[test]
    fn a_pinned_hub_that_does_not_answer_holds_the_move_and_keeps_a_worker_already_on_it() {
        let mut r = settled_on(P, 2);
        let a = claim(A, "a", at(10));
        for _ in 0..3 {
            let step = steered(&mut r, &a, &down(), pin(S));
            assert_eq!(step.decision, None);
            assert_eq!(
                step.held.map(|h| (h.candidate.hub, h.why)),
                Some((
                    S,
                    Hold::PinnedHubUnreachable {
                        pinned: S,
                        reason: ErrorReason::Timeout
                    }
                ))
            );
        }
        // A silent round in between restarts the count.
        assert_eq!(
            steered(&mut r, &a, &Verdict::NoClaim, pin(S)).decision,
            None
        );
        assert_eq!(steered(&mut r, &a, &down(), pin(S)).decision, None);
        assert_eq!(
            steered(&mut r, &a, &Verdict::NoClaim, pin(S)).decision,
            None
        );
        let d = steered(&mut r, &a, &Verdict::NoClaim, pin(S)).decision;
        assert_eq!(d.map(|d| d.hub), Some(S));
        // On the pinned hub, its silence and the other hub's claims move nothing, and the
        // round says so: the claims' winner is held.
        for _ in 0..5 {
            let step = steered(&mut r, &claim(A, "a", at(50)), &down(), pin(S));
            assert_eq!(step.decision, None);
            assert_eq!(
                step.held.map(|h| (h.candidate.hub, h.why)),
                Some((
                    P,
                    Hold::PinnedHubUnreachable {
                        pinned: S,
                        reason: ErrorReason::Timeout
                    }
                ))
            );
        }
        // Silent, with no claim against it: nothing to hold.
        let step = steered(&mut r, &Verdict::NoClaim, &down(), pin(S));
        assert_eq!((step.decision, step.held), (None, None));
    }

    #[test]
    fn a_drain_beside_a_pin_still_sets_its_claims_aside() {
        // A new sidecar, the pinned hub silent: the first decision is the claims', without
        // the drained hub's.
        let mut r = resolver(1);
        let steer = Steer {
            pin: Some(S),
            drain: Some(P),
        };
        let a = claim(A, "a", at(50));
        let step = steered(&mut r, &a, &down(), steer);
        assert_eq!(hub_of(&step), Some((P, Reason::Default)));
        assert_eq!(step.decision.unwrap().basis, None);
    }

    #[test]
    fn at_startup_a_silent_pinned_hub_leaves_the_first_decision_to_the_claims() {
        let mut r = resolver(3);
        let a = claim(A, "a", at(10));
        let step = steered(&mut r, &a, &down(), pin(S));
        assert_eq!(hub_of(&step), Some((P, Reason::Startup)));
        assert_eq!(step.decision.unwrap().steered, None);
        let mut r = resolver(3);
        let step = steered(&mut r, &a, &Verdict::NoClaim, pin(S));
        assert_eq!(hub_of(&step), Some((S, Reason::Default)));
        assert_eq!(step.decision.unwrap().steered, Some(Kind::Pin));
    }

    #[test]
    fn a_drain_moves_the_worker_to_the_other_claim_even_an_older_one() {
        let mut r = settled_on(P, 2);
        steered(
            &mut r,
            &claim_epoch(A, 5, at(10)),
            &down(),
            Steer::default(),
        );
        // B's claim is older than the basis: without the drain it would be held (rule 5).
        let a = claim_epoch(A, 5, at(10));
        let b = claim_epoch(B, 4, at(5));
        assert!(steered(&mut r, &down(), &b, Steer::default())
            .held
            .is_some());
        assert_eq!(steered(&mut r, &a, &b, drain(P)).decision, None);
        let d = steered(&mut r, &a, &b, drain(P)).decision.unwrap();
        assert_eq!(
            (d.hub, d.reason, d.steered),
            (S, Reason::Switch, Some(Kind::Drain))
        );
        assert_eq!(d.basis, Some(as_claim(&b)));
    }

    #[test]
    fn a_drain_without_another_claim_moves_to_the_first_other_hub_that_answers() {
        let mut r = settled_on(P, 1);
        let a = claim(A, "a", at(10));
        let d = steered(&mut r, &a, &Verdict::NoClaim, drain(P))
            .decision
            .unwrap();
        assert_eq!((d.hub, d.basis, d.steered), (S, None, Some(Kind::Drain)));
        // Drained, A's claims have no say against the worker on B.
        for _ in 0..3 {
            assert_eq!(
                steered(&mut r, &a, &Verdict::NoClaim, drain(P)).decision,
                None
            );
        }
        // The drain removed: A's claim is fresher than no basis, and moves the worker back.
        let back = steered(&mut r, &a, &Verdict::NoClaim, Steer::default()).decision;
        assert_eq!(back.map(|d| (d.hub, d.steered)), Some((P, None)));
    }

    #[test]
    fn a_drain_with_only_the_drained_hub_answering_keeps_the_worker_there() {
        let mut r = settled_on(P, 1);
        let a = claim(A, "a", at(10));
        for _ in 0..3 {
            let step = steered(&mut r, &a, &down(), drain(P));
            assert_eq!(step.decision, None);
            assert_eq!(
                step.held.map(|h| (h.candidate.hub, h.why)),
                Some((S, Hold::DrainNoAlternative { drained: P }))
            );
        }
        assert_eq!(r.established(), Some(P));
        // A hub that refuses our credential is no alternative either.
        let step = steered(&mut r, &a, &refused(ErrorReason::Unauthorized), drain(P));
        assert!(step.held.is_some() && step.decision.is_none());
        // The startup with only the drained hub answering still decides: its claim has no
        // say, so the first hub is the default.
        let mut r = resolver(1);
        assert_eq!(
            hub_of(&steered(&mut r, &a, &down(), drain(P))),
            Some((P, Reason::Default))
        );
    }

    #[test]
    fn a_drain_does_not_move_the_worker_onto_a_hub_that_refuses_our_credential() {
        let mut r = settled_on(P, 1);
        let b = claim(B, "b", at(10));
        let step = steered(&mut r, &b, &refused(ErrorReason::Forbidden), drain(P));
        assert_eq!(
            step.held.map(|h| h.why),
            Some(Hold::Unauthenticated(ErrorReason::Forbidden))
        );
    }

    #[test]
    fn claims_naming_a_drained_hub_have_no_say_elsewhere() {
        let mut r = settled_on(S, 1);
        let a = claim_epoch(A, 9, at(50));
        for _ in 0..3 {
            let step = steered(&mut r, &a, &a, drain(P));
            assert_eq!((step.decision, step.held), (None, None));
        }
        // At startup too.
        let mut r = resolver(1);
        let step = steered(&mut r, &a, &claim(B, "b", at(1)), drain(P));
        assert_eq!(hub_of(&step), Some((S, Reason::Startup)));
    }

    #[test]
    fn after_the_controller_moved_first_the_end_of_a_drain_moves_nothing() {
        // The runbook: the Active moves to B (epoch 6), A is drained, A comes back with its
        // old claim (epoch 5), and the drain is removed.
        let mut r = settled_on(P, 2);
        let b6 = claim_epoch(B, 6, at(30));
        steered(&mut r, &b6, &b6, Steer::default());
        let d = steered(&mut r, &b6, &b6, Steer::default())
            .decision
            .unwrap();
        assert_eq!(d.hub, S);
        for _ in 0..3 {
            assert_eq!(steered(&mut r, &down(), &b6, drain(P)).decision, None);
        }
        let a5 = claim_epoch(A, 5, at(10));
        for _ in 0..5 {
            let step = steered(&mut r, &a5, &Verdict::NoClaim, Steer::default());
            assert_eq!(step.decision, None);
        }
        assert_eq!(r.established(), Some(S));
    }
}

#[cfg(test)]
mod real_hub;

#[cfg(test)]
mod liveness {
    //! Rules 10 to 12, round by round on a virtual clock: one round a second.
    use super::*;
    use crate::verdict::{ErrorReason, ProbeError};

    pub(super) const P: HubId = HubId::PRIMARY;
    pub(super) const S: HubId = HubId::SECONDARY;
    pub(super) const A: &str = "https://10.1.80.11:6443";
    pub(super) const B: &str = "https://10.1.80.12:6443";

    pub(super) const BOUNDS: Liveness = Liveness {
        dead_hub_after: Some(SignedDuration::from_secs(180)),
        split_brain_window: SignedDuration::from_secs(300),
        default_after: SignedDuration::from_secs(30),
    };

    /// The clock at second `t` of the run.
    pub(super) fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn resolver(n: u32) -> Resolver {
        Resolver::new(
            vec![
                (P, Endpoint::parse(A).unwrap()),
                (S, Endpoint::parse(B).unwrap()),
            ],
            n,
        )
        .with_liveness(BOUNDS)
    }

    fn claim(endpoint: &str, epoch: Option<u64>, written: i64) -> Verdict {
        Verdict::Claim(Claim {
            endpoint: Endpoint::parse(endpoint).unwrap(),
            identity: Some(format!("ctrl-{}", &endpoint[18..19])),
            last_updated: Some(t(written)),
            epoch,
        })
    }

    fn down() -> Verdict {
        Verdict::Error(ProbeError::new(ErrorReason::Timeout, "no answer"))
    }

    /// One round at second `at`; a decision reaches the disk.
    fn round(r: &mut Resolver, at: i64, p: &Verdict, s: &Verdict) -> Step {
        let step = r.observe(t(at), &[(P, p), (S, s)]);
        if step.decision.is_some() {
            r.published();
        }
        step
    }

    fn moved(step: &Step) -> Option<(HubId, Reason)> {
        step.decision.as_ref().map(|d| (d.hub, d.reason))
    }

    /// On A at second 0, both hubs agreeing at `epoch`.
    fn on_a(n: u32, epoch: Option<u64>) -> Resolver {
        let mut r = resolver(n);
        let a = claim(A, epoch, 0);
        assert_eq!(moved(&round(&mut r, 0, &a, &a)), Some((P, Reason::Startup)));
        r
    }

    // --- Rule 10: a dead hub strands no one ---------------------------------------------

    /// A dies for good at second 1; B is promoted by a controller whose epoch is `b_epoch`,
    /// lower than A's 8 or none. Returns the second the worker moved to B.
    fn stranded_until_moved(b_epoch: Option<u64>) -> i64 {
        let mut r = on_a(3, Some(8));
        for at in 1..=600 {
            let b = claim(B, b_epoch, at - at % 5);
            let step = round(&mut r, at, &down(), &b);
            if at < 180 {
                assert_eq!(
                    step.held.as_ref().map(|h| h.why.reason()),
                    Some("older_than_basis"),
                    "second {at}"
                );
                assert_eq!(step.dead_hub, None);
            } else {
                assert_eq!(step.dead_hub, Some((P, Quiet::NoAnswer)), "second {at}");
            }
            if let Some((hub, reason)) = moved(&step) {
                assert_eq!((hub, reason), (S, Reason::Switch));
                return at;
            }
        }
        panic!("still on the dead hub after 600 s");
    }

    #[test]
    fn a_worker_on_a_dead_hub_follows_a_promotion_whose_epoch_restarted_once_the_bound_passes() {
        // Silent since second 0 (its last answer); the bound is 180 s; 3 confirming rounds.
        assert_eq!(stranded_until_moved(Some(1)), 182);
    }

    #[test]
    fn a_worker_on_a_dead_hub_follows_a_promotion_that_publishes_no_epoch() {
        assert_eq!(stranded_until_moved(None), 182);
    }

    #[test]
    fn a_hub_that_answers_is_not_dead_and_its_basis_still_holds() {
        // A's API server answers without a claim (the worker erased it); B claims itself with
        // a lower epoch: that is old news for as long as A answers.
        let mut r = on_a(1, Some(8));
        for at in 1..=900 {
            let step = round(&mut r, at, &Verdict::NoClaim, &claim(B, Some(1), at));
            assert_eq!(step.decision, None, "second {at}");
            assert_eq!(step.dead_hub, None);
        }
    }

    #[test]
    fn a_hold_rule_10_cannot_end_is_said_from_when_the_hub_stopped_claiming_itself() {
        // As above: A's controller was never seen republishing, so nothing ends the hold.
        // What is said instead: since when A has answered without a claim for itself.
        let mut r = on_a(1, Some(8));
        let b = claim(B, Some(1), 5);
        let said = |r: &Resolver, step: &Step| r.unbounded_hold_since(step.held.as_ref());
        for at in 1..=900 {
            let step = round(&mut r, at, &Verdict::NoClaim, &b);
            assert_eq!(
                step.held.as_ref().map(|h| h.why.reason()),
                Some("older_than_basis"),
                "second {at}"
            );
            assert_eq!(said(&r, &step), Some(t(1)), "second {at}");
        }
        // An error says nothing of claims, and silence is rule 10's to end.
        let step = round(&mut r, 901, &down(), &b);
        assert_eq!(said(&r, &step), None);
        let step = round(&mut r, 902, &Verdict::NoClaim, &b);
        assert_eq!(said(&r, &step), Some(t(902)));
        // A's watch shows a claim for itself: the hub is heard from, the clock starts over.
        let Verdict::Claim(own) = claim(A, Some(8), 903) else {
            unreachable!()
        };
        r.witness(P, &own, t(903));
        let step = round(&mut r, 904, &Verdict::NoClaim, &b);
        assert_eq!(said(&r, &step), Some(t(903)));
        // A claims itself to a read: nothing to say.
        let step = round(&mut r, 905, &claim(A, Some(8), 905), &b);
        assert_eq!(said(&r, &step), None);
    }

    #[test]
    fn a_hold_rule_10_ends_is_not_said_as_one_that_may_last() {
        // A's watch vouches and its controller was seen republishing: rule 10's claim clock
        // runs and ends the hold, so nothing is said as unbounded, and the worker reaches B.
        let mut r = on_a(3, Some(8));
        r.watches_vouch_for(&[P, S]);
        let b = claim(B, Some(1), 5);
        round(&mut r, 1, &claim(A, Some(8), 1), &b);
        for at in 2..=400 {
            let step = round(&mut r, at, &Verdict::NoClaim, &b);
            assert_eq!(
                r.unbounded_hold_since(step.held.as_ref()),
                None,
                "second {at}"
            );
            if let Some(moved) = moved(&step) {
                assert_eq!((moved, at), ((S, Reason::Switch), 184));
                return;
            }
        }
        panic!("rule 10 never ended the hold");
    }

    #[test]
    fn a_dead_hub_does_not_release_a_claim_that_another_hub_makes_for_it() {
        // The basis only stops holding a winner its own hub claims for itself: B saying "A's
        // old controller" names no one new.
        let mut r = on_a(1, Some(8));
        for at in 1..=400 {
            let step = round(&mut r, at, &down(), &Verdict::NoClaim);
            assert_eq!(step.decision, None);
        }
    }

    #[test]
    fn a_dead_hub_that_comes_back_with_its_old_claim_does_not_take_the_worker_back() {
        let mut r = on_a(1, Some(8));
        let mut at = 1;
        while moved(&round(&mut r, at, &down(), &claim(B, Some(1), at))).is_none() {
            at += 1;
        }
        // A's API server is back, with the claim its dead controller left: held.
        let old_a = claim(A, Some(8), 0);
        for at in at + 1..at + 60 {
            let step = round(&mut r, at, &old_a, &Verdict::NoClaim);
            assert_eq!(step.decision, None, "second {at}");
            assert_eq!(step.held.map(|h| h.why.reason()), Some("older_than_basis"));
        }
        // A controller alive on A writes a fresher claim: that moves the worker.
        let step = round(
            &mut r,
            at + 61,
            &claim(A, Some(8), at + 61),
            &Verdict::NoClaim,
        );
        assert_eq!(moved(&step), Some((P, Reason::Switch)));
    }

    // --- Rule 11: a split brain does not flap -------------------------------------------

    /// Both hubs claim themselves at `epoch`, each republishing every 5 s (A on even
    /// periods, B on odd ones), and the worker erases the claim on the hub it is on. Returns
    /// the seconds at which the worker moved, over `secs`.
    fn split_brain_moves(epoch: Option<u64>, secs: i64) -> Vec<i64> {
        let mut r = on_a(3, epoch);
        let mut on = P;
        let mut moves = Vec::new();
        for at in 1..=secs {
            let written = at - at % 5;
            let own = |hub: HubId, endpoint: &str| {
                if on == hub {
                    Verdict::NoClaim
                } else {
                    claim(endpoint, epoch, written)
                }
            };
            let (a, b) = (own(P, A), own(S, B));
            let step = round(&mut r, at, &a, &b);
            if let Some(d) = step.decision {
                assert_eq!(d.reason, Reason::Switch);
                on = d.hub;
                moves.push(at);
            }
        }
        moves
    }

    #[test]
    fn a_split_brain_at_equal_epochs_moves_the_worker_at_most_once_per_window() {
        let moves = split_brain_moves(Some(8), 1200);
        assert!(!moves.is_empty());
        for pair in moves.windows(2) {
            assert!(pair[1] - pair[0] >= 300, "moves at {moves:?}");
        }
        // Never stuck either: one move per window, give or take the confirmations.
        assert!(moves.len() >= 3, "moves at {moves:?}");
    }

    #[test]
    fn a_split_brain_without_epochs_moves_the_worker_at_most_once_per_window() {
        let moves = split_brain_moves(None, 1200);
        for pair in moves.windows(2) {
            assert!(pair[1] - pair[0] >= 300, "moves at {moves:?}");
        }
        assert!(moves.len() >= 3, "moves at {moves:?}");
    }

    #[test]
    fn without_the_window_the_same_split_brain_flaps() {
        // The mutant the window is for: the plain rule moves every few seconds.
        let mut r = on_a(3, Some(8));
        r.liveness.split_brain_window = SignedDuration::ZERO;
        let mut on = P;
        let mut moves = 0;
        for at in 1..=120 {
            let written = at - at % 5;
            let a = if on == P {
                Verdict::NoClaim
            } else {
                claim(A, Some(8), written)
            };
            let b = if on == S {
                Verdict::NoClaim
            } else {
                claim(B, Some(8), written)
            };
            if let Some(d) = round(&mut r, at, &a, &b).decision {
                on = d.hub;
                moves += 1;
            }
        }
        assert!(moves > 10, "{moves} moves");
    }

    #[test]
    fn a_split_brain_hold_is_said_and_ends_with_the_window() {
        let mut r = on_a(1, Some(8));
        // First move: a promotion cannot be told from a split brain, and is never held.
        let step = round(&mut r, 1, &Verdict::NoClaim, &claim(B, Some(8), 1));
        assert_eq!(moved(&step), Some((S, Reason::Switch)));
        assert!(!step.split_brain);
        // On B, erased; A claims itself again at the same epoch: held, and said.
        let step = round(&mut r, 2, &claim(A, Some(8), 2), &Verdict::NoClaim);
        let held = step.held.expect("held");
        assert_eq!(
            (held.candidate.hub, held.why),
            (
                P,
                Hold::SplitBrain {
                    established: S,
                    moved_at: Some(t(1)),
                    until: Some(t(301))
                }
            )
        );
        assert!(step.split_brain);
        // Until the window ends, then one move.
        for at in 3..301 {
            let step = round(&mut r, at, &claim(A, Some(8), at), &Verdict::NoClaim);
            assert_eq!(step.decision, None, "second {at}");
        }
        let step = round(&mut r, 301, &claim(A, Some(8), 301), &Verdict::NoClaim);
        assert_eq!(moved(&step), Some((P, Reason::Switch)));
        // Still said through the move; the controllers then agree, and a window after the
        // last hold (second 300) it is no longer said.
        assert!(step.split_brain);
        let agreed = claim(A, Some(9), 302);
        assert!(round(&mut r, 599, &agreed, &agreed).split_brain);
        assert!(!round(&mut r, 600, &agreed, &agreed).split_brain);
    }

    #[test]
    fn a_promotion_with_a_higher_epoch_is_no_split_brain_and_moves_at_once() {
        let mut r = on_a(1, Some(8));
        let step = round(&mut r, 1, &Verdict::NoClaim, &claim(B, Some(9), 1));
        assert_eq!(moved(&step), Some((S, Reason::Switch)));
        // A failback a minute later, at epoch 10: not held.
        let step = round(&mut r, 60, &claim(A, Some(10), 60), &Verdict::NoClaim);
        assert_eq!(moved(&step), Some((P, Reason::Switch)));
        assert!(!step.split_brain);
    }

    #[test]
    fn hubs_that_agree_are_followed_within_the_window() {
        let mut r = on_a(1, None);
        let step = round(&mut r, 1, &Verdict::NoClaim, &claim(B, None, 1));
        assert_eq!(moved(&step), Some((S, Reason::Switch)));
        // Both now name A: agreement, not a split brain.
        let a = claim(A, None, 30);
        let step = round(&mut r, 30, &a, &a);
        assert_eq!(moved(&step), Some((P, Reason::Switch)));
    }

    #[test]
    fn a_failback_within_the_window_is_no_split_brain_once_the_old_hub_is_seen_mirroring() {
        // On B since second 1; the worker erases B's claim. B's controller, now Standby,
        // mirrors A's claim on B; the worker erases that too, but the watch saw it.
        let mut r = on_a(1, None);
        let step = round(&mut r, 1, &Verdict::NoClaim, &claim(B, None, 1));
        assert_eq!(moved(&step), Some((S, Reason::Switch)));
        let a = claim(A, None, 60);
        // Unseen, the mirror changes nothing: B's last word is its own claim.
        let step = round(&mut r, 60, &a, &Verdict::NoClaim);
        assert_eq!(step.held.map(|h| h.why.reason()), Some("split_brain"));
        // Seen by the watch, it ends the question.
        let Verdict::Claim(mirror) = claim(A, None, 61) else {
            unreachable!()
        };
        r.witness(S, &mirror, t(61));
        let step = round(&mut r, 61, &a, &Verdict::NoClaim);
        assert_eq!(moved(&step), Some((P, Reason::Switch)));
    }

    #[test]
    fn a_self_claim_the_watch_saw_before_the_worker_erased_it_keeps_the_split_brain_in_view() {
        let mut r = on_a(1, Some(8));
        assert_eq!(
            moved(&round(&mut r, 1, &Verdict::NoClaim, &claim(B, Some(8), 1))),
            Some((S, Reason::Switch))
        );
        // B's hub showed A's claim to a read once (a mirror), then its own again to the watch.
        round(&mut r, 2, &Verdict::NoClaim, &claim(A, Some(8), 0));
        let Verdict::Claim(own) = claim(B, Some(8), 3) else {
            unreachable!()
        };
        r.witness(S, &own, t(3));
        let step = round(&mut r, 4, &claim(A, Some(8), 4), &Verdict::NoClaim);
        assert_eq!(step.held.map(|h| h.why.reason()), Some("split_brain"));
    }

    #[test]
    fn a_split_brain_before_any_move_says_no_move_and_no_window() {
        // A's clock is ahead: its claims are dated later than B's. A republished once since
        // the decision (the basis followed it), then its controller died; B claims itself
        // later than the decision's claim but earlier than the basis. A's last word is its own
        // claim, so this reads as a split brain; the worker never moved, so no window is
        // said, only the basis, which rule 10 ends.
        let mut r = on_a(3, None);
        round(&mut r, 10, &claim(A, None, 200), &claim(A, None, 200));
        let step = round(&mut r, 20, &Verdict::NoClaim, &claim(B, None, 150));
        let held = step.held.expect("held");
        assert_eq!(
            (held.candidate.hub, held.why),
            (
                S,
                Hold::SplitBrain {
                    established: P,
                    moved_at: None,
                    until: None
                }
            )
        );
    }

    // --- Rule 12: no decision from silence ----------------------------------------------

    #[test]
    fn a_slow_cold_start_hands_out_the_hub_that_is_named_not_the_primary_first() {
        let mut r = resolver(3);
        for at in 0..8 {
            let step = round(&mut r, at, &down(), &down());
            assert_eq!(step.decision, None, "second {at}");
            assert_eq!(step.undecided_until, Some(t(30)));
        }
        let b = claim(B, None, 8);
        let step = round(&mut r, 8, &b, &b);
        assert_eq!(moved(&step), Some((S, Reason::Startup)));
    }

    #[test]
    fn with_no_claim_at_all_the_primary_is_taken_once_the_bound_passes() {
        let mut r = resolver(3);
        for at in 0..30 {
            let step = round(&mut r, at, &Verdict::NoClaim, &down());
            assert_eq!(step.decision, None, "second {at}");
        }
        let step = round(&mut r, 30, &Verdict::NoClaim, &down());
        assert_eq!(moved(&step), Some((P, Reason::Default)));
        assert_eq!(step.undecided_until, None);
    }

    #[test]
    fn a_resumed_decision_does_not_wait_for_the_bound() {
        let mut r = resolver(3);
        assert!(r.resume(S, B, None, None).is_some());
        let step = round(&mut r, 0, &down(), &down());
        assert_eq!((step.decision, step.undecided_until), (None, None));
    }

    #[test]
    fn a_restarted_sidecar_in_a_split_brain_keeps_the_window_of_the_switch_it_resumed() {
        let mut r = resolver(1);
        assert!(r
            .resume(S, B, None, Some(as_claim(claim(B, Some(8), 0))))
            .is_some());
        r.moved_at(t(0));
        let step = round(&mut r, 10, &claim(A, Some(8), 10), &Verdict::NoClaim);
        assert_eq!(step.held.map(|h| h.why.reason()), Some("split_brain"));
    }

    fn as_claim(v: Verdict) -> Claim {
        match v {
            Verdict::Claim(c) => c,
            other => panic!("not a claim: {other:?}"),
        }
    }
}

#[cfg(test)]
mod properties {
    //! The rule's properties for 2 to 5 hubs: the hubs are `primary`, `secondary`, then
    //! listed ones, and claims name any of them or an endpoint that is not configured.
    use super::*;
    use crate::verdict::{ErrorReason, ProbeError};
    use jiff::Timestamp;
    use proptest::prelude::*;

    const ENDPOINTS: [&str; 6] = [
        "https://10.1.80.11:6443",
        "https://10.1.80.12:6443",
        "https://10.1.80.13:6443",
        "https://10.1.80.14:6443",
        "https://10.1.80.15:6443",
        "https://198.51.100.7:6443",
    ];
    const ROGUE: usize = 5;

    fn ids(k: usize) -> Vec<HubId> {
        [
            HubId::PRIMARY,
            HubId::SECONDARY,
            HubId::named("hub-c"),
            HubId::named("hub-d"),
            HubId::named("hub-e"),
        ][..k]
            .to_vec()
    }

    fn hubs(k: usize) -> Vec<(HubId, Endpoint)> {
        ids(k)
            .into_iter()
            .zip(ENDPOINTS)
            .map(|(h, e)| (h, Endpoint::parse(e).unwrap()))
            .collect()
    }

    /// The sidecar's clock in these properties.
    const NOW: i64 = 1_800_000_000 + 86_400;

    /// A verdict of one of `k` hubs: claims name one of the `k` or the rogue endpoint, with or
    /// without an identity, dated up to ten minutes either side of this clock (so that some
    /// are too far ahead to have a say without an epoch); errors of every kind, those that
    /// refuse our credential included (rule 6).
    fn verdict(k: usize) -> impl Strategy<Value = Verdict> {
        prop_oneof![
            Just(Verdict::NoClaim),
            proptest::sample::select(ErrorReason::ALL.to_vec())
                .prop_map(|reason| Verdict::Error(ProbeError::new(reason, "failed"))),
            (
                0..=k,
                proptest::option::of(0u8..2),
                proptest::option::of(-600i64..=600),
                proptest::option::of(0u64..4)
            )
                .prop_map(move |(e, id, t, epoch)| {
                    let e = if e == k { ROGUE } else { e };
                    Verdict::Claim(Claim {
                        endpoint: Endpoint::parse(ENDPOINTS[e]).unwrap(),
                        identity: id.map(|id| format!("ctrl-{id}")),
                        last_updated: t.map(|s| Timestamp::from_second(NOW + s).unwrap()),
                        epoch,
                    })
                }),
        ]
    }

    /// A number of hubs from 2 to 5, and rounds of one verdict per hub.
    fn rounds() -> impl Strategy<Value = (usize, Vec<Vec<Verdict>>)> {
        (2usize..=5).prop_flat_map(|k| {
            (
                Just(k),
                proptest::collection::vec(proptest::collection::vec(verdict(k), k), 1..40),
            )
        })
    }

    fn run(n: u32, k: usize, rounds: &[Vec<Verdict>]) -> Vec<Step> {
        run_with_bases(n, k, rounds)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// Each round's step, with the basis the resolver held before it.
    fn run_with_bases(n: u32, k: usize, rounds: &[Vec<Verdict>]) -> Vec<(Step, Option<Claim>)> {
        run_in_order(n, k, rounds, |v| v)
    }

    /// As `run_with_bases`, with each round's verdicts handed over in the order `order` makes.
    fn run_in_order(
        n: u32,
        k: usize,
        rounds: &[Vec<Verdict>],
        order: impl Fn(Vec<(HubId, &Verdict)>) -> Vec<(HubId, &Verdict)>,
    ) -> Vec<(Step, Option<Claim>)> {
        let mut r = Resolver::new(hubs(k), n);
        rounds
            .iter()
            .map(|round| {
                let before = r.basis().cloned();
                let now = Timestamp::from_second(NOW).unwrap();
                let verdicts = order(ids(k).into_iter().zip(round).collect());
                let step = r.observe(now, &verdicts);
                if step.decision.is_some() {
                    r.published();
                }
                (step, before)
            })
            .collect()
    }

    fn targets(v: &Verdict, k: usize) -> Option<HubId> {
        match v {
            Verdict::Claim(c) => ENDPOINTS[..k]
                .iter()
                .position(|e| c.endpoint.as_str() == *e)
                .map(|i| ids(k)[i]),
            _ => None,
        }
    }

    fn names(round: &[Verdict], k: usize, hub: HubId) -> bool {
        round.iter().any(|v| targets(v, k) == Some(hub))
    }

    proptest! {
        #[test]
        fn an_unconfigured_endpoint_is_never_selected(n in 1u32..4, (k, rs) in rounds()) {
            for (step, round) in run(n, k, &rs).iter().zip(&rs) {
                if let Some(d) = &step.decision {
                    if d.reason != Reason::Default {
                        prop_assert!(names(round, k, d.hub));
                    } else {
                        prop_assert_eq!(d.hub, HubId::PRIMARY);
                    }
                }
            }
        }

        #[test]
        fn a_switch_is_preceded_by_n_rounds_naming_its_hub(n in 1u32..4, (k, rs) in rounds()) {
            let steps = run(n, k, &rs);
            for (i, step) in steps.iter().enumerate() {
                if let Some(d) = step.decision.as_ref().filter(|d| d.reason == Reason::Switch) {
                    prop_assert!(i + 1 >= n as usize);
                    for round in &rs[i + 1 - n as usize..=i] {
                        prop_assert!(names(round, k, d.hub),
                            "a round within the confirmation window did not name {}", d.hub);
                    }
                    // The rounds leading up to the switch published nothing.
                    for earlier in &steps[i + 1 - n as usize..i] {
                        prop_assert_eq!(&earlier.decision, &None);
                    }
                }
            }
        }

        #[test]
        fn rounds_without_a_usable_claim_never_switch(n in 1u32..4, (k, rs) in rounds()) {
            for (step, round) in run(n, k, &rs).iter().zip(&rs) {
                if round.iter().all(|v| targets(v, k).is_none()) {
                    prop_assert!(step.decision.as_ref().is_none_or(|d| d.reason == Reason::Default));
                }
            }
        }

        #[test]
        fn only_the_first_round_decides_without_a_switch(n in 1u32..4, (k, rs) in rounds()) {
            let steps = run(n, k, &rs);
            prop_assert!(steps[0].decision.is_some());
            for step in &steps[1..] {
                prop_assert!(step.decision.as_ref().is_none_or(|d| d.reason == Reason::Switch));
            }
        }

        #[test]
        fn a_switch_rests_on_a_claim_fresher_than_the_basis_it_leaves(n in 1u32..4, (k, rs) in rounds()) {
            for (step, before) in run_with_bases(n, k, &rs) {
                let Some(d) = step.decision.filter(|d| d.reason == Reason::Switch) else { continue };
                let Some(floor) = before.filter(|b| b.epoch.is_some() || b.last_updated.is_some()) else { continue };
                let basis = d.basis.expect("a switch rests on a claim");
                prop_assert_eq!(freshness(&basis, &floor), Ordering::Greater,
                    "switched on {:?}, which is not fresher than {:?}", basis, floor);
            }
        }

        /// Rule 6: never a switch onto a hub that refused our credential in that round.
        #[test]
        fn a_switch_never_goes_to_a_hub_that_refuses_our_credential(n in 1u32..4, (k, rs) in rounds()) {
            for (step, round) in run(n, k, &rs).iter().zip(&rs) {
                let Some(d) = step.decision.as_ref().filter(|d| d.reason == Reason::Switch) else { continue };
                let own = &round[ids(k).iter().position(|h| *h == d.hub).unwrap()];
                prop_assert!(!matches!(own, Verdict::Error(e) if e.reason.is_credential()),
                    "switched to {} which refused our credential: {:?}", d.hub, own);
            }
        }

        /// A claim without an epoch dated more than MAX_FUTURE_SKEW ahead has no say.
        #[test]
        fn a_claim_dated_too_far_ahead_never_makes_a_decision(n in 1u32..4, (k, rs) in rounds()) {
            let ahead = |v: &Verdict| matches!(v, Verdict::Claim(c) if c.epoch.is_none()
                && c.last_updated.is_some_and(|t| t.as_second() - NOW > MAX_FUTURE_SKEW.as_secs()));
            for (step, round) in run(n, k, &rs).iter().zip(&rs) {
                let Some(d) = step.decision.as_ref().filter(|d| d.reason != Reason::Default) else { continue };
                prop_assert!(round.iter().any(|v| targets(v, k) == Some(d.hub) && !ahead(v)),
                    "decided {} on claims that were all too far ahead", d.hub);
            }
        }

        /// Ties go by configuration order, not by the order the reads came back in.
        #[test]
        fn the_order_the_verdicts_arrive_in_does_not_matter(n in 1u32..4, (k, rs) in rounds(), rotate in 0usize..5) {
            let rotated = run_in_order(n, k, &rs, |mut v| {
                let by = rotate % v.len();
                v.rotate_left(by);
                v.reverse();
                v
            });
            prop_assert_eq!(run_with_bases(n, k, &rs), rotated);
        }
    }

    /// A pin and a drain that each last a few rounds: `Steer` per round, over `len` rounds.
    fn steers(k: usize, len: usize) -> impl Strategy<Value = Vec<Steer>> {
        let one = (
            proptest::option::of(0..k),
            proptest::option::of(0..k),
            1usize..8,
        );
        proptest::collection::vec(one, 1..8).prop_map(move |runs| {
            let mut out: Vec<Steer> = runs
                .into_iter()
                .flat_map(|(pin, drain, n)| {
                    let steer = Steer {
                        pin: pin.map(|i| ids(k)[i]),
                        drain: drain.map(|i| ids(k)[i]),
                    };
                    std::iter::repeat_n(steer, n)
                })
                .collect();
            out.resize(len, Steer::default());
            out
        })
    }

    fn steered_rounds() -> impl Strategy<Value = (usize, Vec<Vec<Verdict>>, Vec<Steer>)> {
        rounds().prop_flat_map(|(k, rs)| {
            let len = rs.len();
            (Just(k), Just(rs), steers(k, len))
        })
    }

    fn run_steered(
        n: u32,
        k: usize,
        rounds: &[Vec<Verdict>],
        steers: &[Steer],
    ) -> Vec<(Step, Option<Claim>)> {
        let mut r = Resolver::new(hubs(k), n);
        rounds
            .iter()
            .zip(steers)
            .map(|(round, steer)| {
                let before = r.basis().cloned();
                let now = Timestamp::from_second(NOW).unwrap();
                let verdicts: Vec<_> = ids(k).into_iter().zip(round).collect();
                let step = r.observe_steered(now, &verdicts, *steer);
                if step.decision.is_some() {
                    r.published();
                }
                (step, before)
            })
            .collect()
    }

    fn answered(round: &[Verdict], k: usize, hub: HubId) -> bool {
        ids(k)
            .iter()
            .zip(round)
            .any(|(h, v)| *h == hub && !matches!(v, Verdict::Error(_)))
    }

    proptest! {
        /// After the first round, a pinned worker moves only to the pinned hub, and only after
        /// `n` rounds pinned to it in which it answered.
        #[test]
        fn a_pin_moves_only_to_its_hub_and_only_once_it_answered_n_times(n in 1u32..4, (k, rs, st) in steered_rounds()) {
            let steps = run_steered(n, k, &rs, &st);
            for (i, (step, _)) in steps.iter().enumerate().skip(1) {
                let Some(d) = &step.decision else { continue };
                if let Some(h) = st[i].pin {
                    prop_assert_eq!(d.hub, h);
                }
                if d.steered == Some(Kind::Pin) {
                    prop_assert!(i + 1 >= n as usize);
                    for j in i + 1 - n as usize..=i {
                        prop_assert_eq!(st[j].pin, Some(d.hub));
                        prop_assert!(answered(&rs[j], k, d.hub));
                    }
                }
            }
        }

        /// After the first round, no decision moves the worker onto a drained hub.
        #[test]
        fn a_drained_hub_is_never_switched_to(n in 1u32..4, (k, rs, st) in steered_rounds()) {
            for (i, (step, _)) in run_steered(n, k, &rs, &st).iter().enumerate().skip(1) {
                let Some(d) = &step.decision else { continue };
                prop_assert_eq!(d.reason, Reason::Switch);
                if st[i].pin.is_none() {
                    prop_assert_ne!(Some(d.hub), st[i].drain);
                }
            }
        }

        /// The rules without a pin or drain are untouched by earlier ones: a switch the claims
        /// make still rests on a claim fresher than the basis it leaves, and names a hub they
        /// named for `n` rounds.
        #[test]
        fn switches_the_claims_make_keep_their_rules_around_steering(n in 1u32..4, (k, rs, st) in steered_rounds()) {
            for (i, (step, before)) in run_steered(n, k, &rs, &st).into_iter().enumerate() {
                let Some(d) = step.decision.filter(|d| d.reason == Reason::Switch && d.steered.is_none()) else { continue };
                prop_assert!(names(&rs[i], k, d.hub));
                let Some(floor) = before.filter(|b| b.epoch.is_some() || b.last_updated.is_some()) else { continue };
                let basis = d.basis.expect("a switch the claims make rests on a claim");
                prop_assert_eq!(freshness(&basis, &floor), Ordering::Greater);
            }
        }

        /// A pin or drain of a hub that is not configured is no steering: the plain rule.
        /// (`overrides` refuses such a value; the resolver must not act on one either.)
        #[test]
        fn a_pin_or_drain_of_an_unconfigured_hub_is_the_plain_rule(n in 1u32..4, (k, rs) in rounds(), which in 0u8..3) {
            let stranger = HubId::named("not-configured");
            let steer = Steer {
                pin: (which != 1).then_some(stranger),
                drain: (which != 0).then_some(stranger),
            };
            let unknown = vec![steer; rs.len()];
            prop_assert_eq!(run_steered(n, k, &rs, &unknown), run_with_bases(n, k, &rs));
        }
    }
}
