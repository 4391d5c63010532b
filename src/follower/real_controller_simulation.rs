//! The whole follower against the hub side KubeSlice's own HA controller builds (`pkg/ha`,
//! read in its source), on a virtual clock, one round a second. `resolver/real_hub.rs` is the
//! same world for the rule alone; this one drives the core as the loop drives it: reads with
//! their resourceVersions, the claims each watch showed (numbered), what the watches vouch for,
//! the writes, and new pods that start with nothing on disk.
//!
//! The world: each hub's controller, while it leads, re-checks every 30 s and writes its claim
//! only when the field is missing or names another hub, with no epoch; a Standby mirrors the
//! leader's whole status, erasures included; a recovered old Active is never demoted. The
//! worker on the hub on disk (and an old pod's worker, when there is one) erases the claim
//! there within the second, before any read: reads see almost nothing, the watches see each
//! write.
//!
//! One test per case of #46, each beside the mutant it catches: what the core would do with a
//! driver that hands it nothing the watches showed, a dead-hub bound that never ends, or a
//! driver that takes a 429 for silence.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

use super::core::{Core, Watched};
use crate::claim::{Claim, Endpoint};
use crate::config::Config;
use crate::hub::Probe;
use crate::metrics::Metrics;
use crate::resolver::Reason;
use crate::state::{FollowerView, Mode};
use crate::testing::settings;
use crate::verdict::{ErrorReason, HubId, ProbeError, Verdict};

const A: &str = "https://10.1.80.11:6443";
const B: &str = "https://10.1.80.12:6443";
const P: HubId = HubId::PRIMARY;
const S: HubId = HubId::SECONDARY;
/// The sidecar's defaults.
const DEAD_HUB_AFTER: i64 = 180;
const WINDOW: i64 = 300;

/// How the follower under test is bent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bent {
    None,
    /// A driver that hands the core none of the claims the watches showed (the follower
    /// before #46): only reads, which the worker's erasure leaves empty, reach the rule.
    BlindToWatches,
    /// `--dead-hub-after` longer than any run: a basis that never ends.
    NoDeadHubBound,
    /// A driver that takes every error for silence: a hub that sheds load with 429 is dead.
    AnswerIsSilence,
}

/// One hub: its API server, its object and watch, and the controller beside it.
struct Hub {
    id: HubId,
    endpoint: &'static str,
    up: bool,
    /// Every read and the watch answer 429 (API Priority and Fairness shedding load).
    shedding: bool,
    /// Its controller runs; it leads (publishes) or, if `mirrors`, copies the leader's status.
    alive: bool,
    leads: bool,
    mirrors: bool,
    /// Its controller's clock, ahead of true time by this much.
    skew: i64,
    /// The second of each 30 s re-check, modulo 30.
    phase: i64,
    /// The epoch its claims carry: none, as the real controller publishes, but for the case of
    /// a promoted controller whose counter restarted.
    epoch: Option<u64>,
    /// `status.activeController` as stored, its resourceVersion, and since when it is so.
    field: Option<Claim>,
    version: u64,
    since: i64,
    /// The running sidecar's watch: the claims it showed, numbered, the last one, and when.
    shown: u64,
    last_shown: Option<Claim>,
    shown_at: i64,
}

impl Hub {
    fn new(id: HubId, endpoint: &'static str, leads: bool, phase: i64) -> Self {
        Self {
            id,
            endpoint,
            up: true,
            shedding: false,
            alive: true,
            leads,
            mirrors: !leads,
            skew: 0,
            phase,
            epoch: None,
            field: None,
            version: 1,
            since: 0,
            shown: 0,
            last_shown: None,
            shown_at: 0,
        }
    }

    fn own(&self, at: i64) -> Claim {
        Claim {
            endpoint: Endpoint::parse(self.endpoint).expect("an endpoint"),
            identity: Some(format!("ctrl-{}", self.id)),
            last_updated: Some(t(at + self.skew)),
            epoch: self.epoch,
        }
    }

    fn names_itself(&self) -> bool {
        self.field.as_ref().is_some_and(|c| {
            c.endpoint.as_str()
                == Endpoint::parse(self.endpoint)
                    .expect("an endpoint")
                    .as_str()
        })
    }

    fn answers(&self) -> bool {
        self.up && !self.shedding
    }

    fn read(&self, bent: Bent) -> Verdict {
        if !self.up {
            return Verdict::Error(ProbeError::new(ErrorReason::Timeout, "no answer"));
        }
        if self.shedding {
            let reason = if bent == Bent::AnswerIsSilence {
                ErrorReason::Timeout
            } else {
                ErrorReason::Server
            };
            return Verdict::Error(ProbeError::new(reason, "HTTP 429 Too Many Requests"));
        }
        match &self.field {
            Some(c) => Verdict::Claim(c.clone()),
            None => Verdict::NoClaim,
        }
    }
}

fn t(at: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + at).expect("a time")
}

/// The sidecar's settings: its defaults, but for the mutant's.
fn config(bent: Bent) -> Config {
    let mut args = vec![
        "--hub-endpoint",
        A,
        "--secondary-endpoint",
        B,
        "--cluster-name",
        "w1",
        "--namespace",
        "p",
    ];
    if bent == Bent::NoDeadHubBound {
        args.extend_from_slice(&["--dead-hub-after", "10h"]);
    }
    Config::from_settings(&settings(&args)).expect("valid settings")
}

fn core(bent: Bent, at: Instant) -> Core {
    let config = Arc::new(config(bent));
    let metrics = Metrics::new(&[P, S], "none").expect("metrics");
    let view = FollowerView::new(Mode::Follow, config.confirmations, Duration::from_secs(60));
    Core::new(config, metrics, view, at)
}

/// Two hubs, one sidecar (a new pod replaces it with nothing on disk), and its worker on the
/// hub it last decided.
struct World {
    hubs: [Hub; 2],
    bent: Bent,
    base: Instant,
    core: Core,
    /// The running sidecar's decisions: when, which hub, why, which generation.
    moves: Vec<(i64, HubId, Reason, u64)>,
    on: Option<HubId>,
    /// Another pod's worker, on this hub, erasing its claim too.
    old_pod: Option<HubId>,
    at: i64,
}

impl World {
    fn new(a: Hub, b: Hub, bent: Bent) -> Self {
        let base = Instant::now();
        Self {
            hubs: [a, b],
            bent,
            base,
            core: core(bent, base),
            moves: Vec::new(),
            on: None,
            old_pod: None,
            at: 0,
        }
    }

    /// A leads, B mirrors it; the sidecar starts.
    fn steady(bent: Bent) -> Self {
        Self::new(Hub::new(P, A, true, 0), Hub::new(S, B, false, 7), bent)
    }

    fn index(&self, hub: HubId) -> usize {
        usize::from(hub != P)
    }

    /// A write to hub `i`'s object: its watch shows a claim (not an erasure) to the sidecar.
    fn write(&mut self, i: usize, field: Option<Claim>) {
        let at = self.at;
        let h = &mut self.hubs[i];
        if h.field == field || !h.up {
            return;
        }
        h.field = field.clone();
        h.version += 1;
        h.since = at;
        if let (Some(c), false) = (field, h.shedding) {
            h.shown += 1;
            h.last_shown = Some(c);
            h.shown_at = at;
        }
    }

    /// A Standby's mirror copies the leader's whole status, so its field too.
    fn mirror(&mut self) {
        for i in 0..2 {
            let (h, other) = (&self.hubs[i], &self.hubs[1 - i]);
            if h.alive && h.up && h.mirrors && !h.leads && other.up {
                let field = other.field.clone();
                self.write(i, field);
            }
        }
    }

    /// A new pod: a new sidecar with nothing on disk, whose watches list afresh. The old pod's
    /// worker goes on erasing on its hub until `old_pod` is cleared.
    fn new_pod(&mut self) {
        self.core = core(self.bent, self.base + secs(self.at));
        self.moves.clear();
        self.old_pod = self.on.take();
        for h in &mut self.hubs {
            h.last_shown = h.field.clone().filter(|_| h.answers());
            h.shown += 1;
            h.shown_at = self.at;
        }
    }

    /// One second: publishers, mirrors, the workers' erasures, then the sidecar's round.
    fn second(&mut self) {
        let at = self.at;
        for i in 0..2 {
            let h = &self.hubs[i];
            if h.alive && h.up && h.leads && (at - h.phase).rem_euclid(30) == 0 && !h.names_itself()
            {
                let own = h.own(at);
                self.write(i, Some(own));
                self.mirror();
            }
        }
        for on in [self.on, self.old_pod].into_iter().flatten() {
            let i = self.index(on);
            self.write(i, None);
            self.mirror();
        }
        let probes: Vec<Probe> = self
            .hubs
            .iter()
            .map(|h| {
                let verdict = h.read(self.bent);
                Probe {
                    hub: h.id,
                    resource_version: verdict.answered().then(|| h.version.to_string()),
                    verdict,
                    latency: Duration::from_millis(2),
                }
            })
            .collect();
        let shown: Vec<(HubId, u64, Claim, Timestamp)> = match self.bent {
            Bent::BlindToWatches => Vec::new(),
            _ => self
                .hubs
                .iter()
                .filter_map(|h| {
                    let c = h.last_shown.clone()?;
                    Some((h.id, h.shown, c, t(h.shown_at)))
                })
                .collect(),
        };
        let watched: Vec<(HubId, Watched)> = self
            .hubs
            .iter()
            .filter(|h| h.answers())
            .map(|h| {
                let watched = Watched {
                    resource_version: h.version.to_string(),
                    claim: h.field.clone(),
                    held_for: secs(at - h.since),
                };
                (h.id, watched)
            })
            .collect();
        let now = t(at);
        let instant = self.base + secs(at);
        self.core.round(now, &probes, &shown, &watched, false);
        let mut generation = self.moves.last().map_or(0, |m| m.3);
        while let Some(write) = self.core.poll_write(now) {
            let h = write.handoff.clone();
            if h.generation != generation {
                generation = h.generation;
                self.moves.push((at, h.hub, h.reason, h.generation));
                self.on = Some(h.hub);
            }
            self.core.written(write, Ok(()), now);
        }
        self.core.round_done(instant, instant, None, false);
        self.at += 1;
    }

    fn run_until(&mut self, end: i64) {
        while self.at < end {
            self.second();
        }
    }

    /// A, the Active, dies with its API server at `at`; B promotes 20 s later.
    fn fail_over_at(&mut self, at: i64) {
        self.run_until(at);
        self.hubs[0].up = false;
        self.run_until(at + 20);
        self.promote_b();
    }

    fn promote_b(&mut self) {
        let b = &mut self.hubs[1];
        b.mirrors = false;
        b.leads = true;
        b.phase = self.at.rem_euclid(30);
    }

    fn switches(&self) -> Vec<(i64, HubId, Reason, u64)> {
        self.moves
            .iter()
            .filter(|m| m.2 == Reason::Switch)
            .cloned()
            .collect()
    }
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

// --- The cases, each run by the follower and by the mutant it catches.

/// Steady state for 10 minutes, with a new pod every 100 s beside the old one's erasing
/// worker, B Active: every pod starts on B, and no pod switches.
fn steady_state_with_rollouts(bent: Bent) -> Result<(), String> {
    let mut w = World::new(Hub::new(P, A, false, 0), Hub::new(S, B, true, 11), bent);
    for rollout in 1..=6 {
        w.run_until(rollout * 100);
        let first = w.moves.first().cloned();
        if first.as_ref().map(|m| (m.1, m.2, m.3)) != Some((S, Reason::Startup, 1)) {
            return Err(format!(
                "pod {rollout} began with {first:?}, not B at startup"
            ));
        }
        if !w.switches().is_empty() {
            return Err(format!("pod {rollout} switched: {:?}", w.moves));
        }
        w.new_pod();
    }
    Ok(())
}

/// The steady world, failed over to B at 100 s with B re-checking at `phase`, run until
/// `until`: the worker must be on B by then.
fn on_b_after_a_failover(bent: Bent, phase: i64, until: i64) -> Result<World, String> {
    let mut w = World::steady(bent);
    w.fail_over_at(100);
    w.hubs[1].phase = phase;
    w.run_until(until);
    match w.on {
        Some(S) => Ok(w),
        _ => Err(format!(
            "phase {phase}: not on B after the failover: {:?}",
            w.moves
        )),
    }
}

/// A new pod beside a worker that erases B's claim, at every phase of B's re-check: its
/// generation 1 is B, at startup.
fn a_new_pod_beside_an_erasing_worker(bent: Bent) -> Result<(), String> {
    for phase in 0..30 {
        let mut w = on_b_after_a_failover(bent, phase, 300)?;
        w.hubs[0].up = true; // A's API server back, its controller gone: its field stays empty
        w.hubs[0].alive = false;
        w.new_pod();
        w.run_until(400);
        if w.moves.first().map(|m| (m.1, m.2, m.3)) != Some((S, Reason::Startup, 1)) {
            return Err(format!(
                "phase {phase}: the new pod's decisions: {:?}",
                w.moves
            ));
        }
    }
    Ok(())
}

/// A's clock 90 s ahead; its controller dies with its API server up; B promotes 20 s later
/// with claims older than the basis: the worker reaches B within --dead-hub-after of A's
/// last claim, plus the confirmations, and the gauge HubFollowerActiveHubNotClaiming fires on
/// is set before.
fn skew_and_a_dead_controller(bent: Bent) -> Result<(), String> {
    let mut w = World::steady(bent);
    w.hubs[0].skew = 90;
    w.run_until(100);
    w.hubs[0].alive = false;
    let last = 90; // A's last re-check that found its field erased
    w.run_until(120);
    w.promote_b();
    // The gauge HubFollowerActiveHubNotClaiming reads, as it stood just before the move.
    let mut unclaimed_since = 0.0;
    while w.at < 900 && w.on != Some(S) {
        unclaimed_since = w.core.metrics.active_hub_unclaimed_since.get();
        w.second();
    }
    let Some((at, ..)) = w.switches().first().cloned() else {
        return Err(format!("never reached B: {:?}", w.moves));
    };
    if at > last + DEAD_HUB_AFTER + 3 {
        return Err(format!("reached B at {at}, after the bound"));
    }
    // The alert: the gauge more than 60 s old, for its `for` of 1 minute.
    let fires_at = unclaimed_since - t(0).as_second() as f64 + 60.0 + 60.0;
    if unclaimed_since <= 0.0 || fires_at >= at as f64 {
        return Err(format!(
            "the alert fires at {fires_at}s, the move is at {at}s"
        ));
    }
    Ok(())
}

/// The old Active back more than a window after the failover, leading beside B for 15
/// minutes (never demoted), at every phase of the two re-checks: at most one move.
fn a_recovered_old_active(bent: Bent) -> Result<(), String> {
    for phase in 0..30 {
        let mut w = on_b_after_a_failover(bent, phase, 120 + 360)?;
        let before = w.moves.len();
        w.hubs[0].up = true;
        w.hubs[0].phase = (w.at + 1).rem_euclid(30);
        w.run_until(480 + 900);
        let after = &w.moves[before..];
        if after.len() > 1 {
            return Err(format!("phase {phase}: {} moves: {after:?}", after.len()));
        }
    }
    Ok(())
}

/// On B since the failover; A, demoted by hand, keeps an older self-claim. B sheds load with
/// 429 for 4 minutes (its watch cut too): the worker stays on B.
fn the_active_answering_429(bent: Bent) -> Result<(), String> {
    let mut w = on_b_after_a_failover(bent, 0, 200)?;
    let older = w.hubs[0].own(50);
    let a = &mut w.hubs[0];
    a.up = true;
    a.leads = false;
    a.mirrors = false;
    w.write(0, Some(older));
    w.hubs[1].shedding = true;
    w.run_until(440);
    w.hubs[1].shedding = false;
    w.run_until(900);
    match w.switches().as_slice() {
        [(_, S, _, _)] => Ok(()),
        moves => Err(format!("moves after the failover: {moves:?}")),
    }
}

/// A new pod beside A's erasing worker sees A's claim once, at A's next re-check, and starts
/// on A; then A's controller dies before it rewrites the claim (never seen republishing), its
/// API server up and its clock 90 s ahead, and B promotes with claims dated before the basis;
/// with `epochs`, A's at 2 and B's restarted at 1. Nothing proves A's controller dead, so the
/// worker stays on A (a controller that writes once, beside an erasing worker, looks the
/// same); but from --dead-hub-after plus an alert's `for` (1 minute) after A's claim, and for
/// as long as that lasts, an alert is due in every round: HubFollowerBasisUnconfirmed (or
/// HubFollowerSplitBrain, where the hold is said as one).
fn a_controller_never_seen_republishing_dies(epochs: bool) -> Result<(), String> {
    let mut w = World::steady(Bent::None);
    w.hubs[0].skew = 90;
    if epochs {
        w.hubs[0].epoch = Some(2);
    }
    w.run_until(100);
    w.new_pod();
    w.run_until(121);
    if w.moves.first().map(|m| (m.1, m.2, m.3)) != Some((P, Reason::Startup, 1)) {
        return Err(format!("the new pod's decisions: {:?}", w.moves));
    }
    w.hubs[0].alive = false;
    w.run_until(140);
    w.promote_b();
    w.hubs[1].epoch = epochs.then_some(1);
    let alert_from = 120 + DEAD_HUB_AFTER + 60;
    while w.at < 1500 {
        w.second();
        if w.on != Some(P) {
            return Err(format!("moved off A at {}: {:?}", w.at, w.moves));
        }
        let m = &w.core.metrics;
        let unconfirmed = m.basis_unconfirmed_since.get() - t(0).as_second() as f64;
        // The hold is older_than_basis in both worlds: HubFollowerBasisUnconfirmed's gauge
        // alone says it.
        let due = unconfirmed > 0.0 && w.at as f64 - unconfirmed > DEAD_HUB_AFTER as f64;
        if w.at >= alert_from && !due {
            return Err(format!("no alert due at {}s", w.at));
        }
    }
    // The runbook's way out: restart the pod. The new sidecar has no basis and starts on the
    // hub whose controller claims.
    w.new_pod();
    w.run_until(1530);
    if w.moves.first().map(|m| (m.1, m.2)) != Some((S, Reason::Startup)) {
        return Err(format!("a new pod after the hold: {:?}", w.moves));
    }
    Ok(())
}

fn holds(case: fn(Bent) -> Result<(), String>) {
    if let Err(e) = case(Bent::None) {
        panic!("{e}");
    }
}

/// The mutant fails the case, for the reason given.
fn caught(case: fn(Bent) -> Result<(), String>, bent: Bent, because: &str) {
    match case(bent) {
        Ok(()) => panic!("{bent:?} was not caught"),
        Err(e) => {
            eprintln!("{bent:?}: {e}");
            assert!(
                e.contains(because),
                "{bent:?} was caught for another reason: {e}"
            );
        }
    }
}

#[test]
fn steady_state_with_rollouts_never_switches() {
    holds(steady_state_with_rollouts);
}

#[test]
fn steady_state_with_rollouts_catches_a_follower_blind_to_its_watches() {
    caught(
        steady_state_with_rollouts,
        Bent::BlindToWatches,
        "Default, 1)), not B at startup",
    );
}

#[test]
fn a_new_pod_beside_an_erasing_worker_starts_on_the_hub_that_claims() {
    holds(a_new_pod_beside_an_erasing_worker);
}

#[test]
fn a_new_pod_beside_an_erasing_worker_catches_a_follower_blind_to_its_watches() {
    caught(
        a_new_pod_beside_an_erasing_worker,
        Bent::BlindToWatches,
        "HubId(\"primary\"), Default, 1)",
    );
}

#[test]
fn a_skewed_old_active_whose_controller_died_releases_the_worker_to_b() {
    holds(skew_and_a_dead_controller);
}

#[test]
fn a_skewed_old_active_whose_controller_died_catches_a_basis_that_never_ends() {
    caught(
        skew_and_a_dead_controller,
        Bent::NoDeadHubBound,
        "never reached B",
    );
}

#[test]
fn a_recovered_old_active_leading_beside_b_moves_the_worker_at_most_once() {
    holds(a_recovered_old_active);
}

#[test]
fn a_recovered_old_active_catches_a_follower_blind_to_its_watches() {
    caught(a_recovered_old_active, Bent::BlindToWatches, "3 moves");
}

#[test]
fn an_active_answering_429_for_minutes_keeps_the_worker() {
    holds(the_active_answering_429);
}

#[test]
fn an_active_answering_429_catches_a_follower_that_takes_an_answer_for_silence() {
    caught(
        the_active_answering_429,
        Bent::AnswerIsSilence,
        "HubId(\"primary\"), Switch",
    );
}

#[test]
fn a_controller_never_seen_republishing_that_dies_keeps_the_worker_and_an_alert_due() {
    for epochs in [false, true] {
        if let Err(e) = a_controller_never_seen_republishing_dies(epochs) {
            panic!("epochs: {epochs}: {e}");
        }
    }
}

#[test]
fn the_bounds_are_the_sidecars_defaults() {
    let liveness = config(Bent::None).liveness();
    assert_eq!(
        liveness.dead_hub_after,
        Some(SignedDuration::from_secs(DEAD_HUB_AFTER))
    );
    assert_eq!(
        liveness.split_brain_window,
        SignedDuration::from_secs(WINDOW)
    );
}
