//! Deterministic simulation of the follower: the decision core and the restart pacing, driven by
//! a virtual clock through two to five simulated hubs (by seed) with failures, partitions, promotions, flapping
//! claims, rogue endpoints and clock skew, and a worker-operator as the real one behaves: it
//! erases the claim on the hub it talks to. Invariants are checked after every round.
//!
//! The worlds vary by seed: controllers' clocks skewed by up to ±30 s or ±10 min, claims with
//! and without an `epoch`, hubs that come back (or are restored) carrying an old claim.
//!
//! HUB_SIM_SEEDS=N runs N seeds (default 1000; CI runs the default); HUB_SIM_SEED=S replays one
//! seed, printing each round. A failing seed names itself. 10^5 seeds:
//! `HUB_SIM_SEEDS=100000 cargo test --release --test simulation`.

use std::cmp::Ordering;
use std::time::Duration;

use hub_follower::claim::{Claim, Endpoint};
use hub_follower::resolver::{freshness, Reason, Resolver, MAX_FUTURE_SKEW};
use hub_follower::restart::pacing::Pacer;
use hub_follower::verdict::{ErrorReason, HubId, ProbeError, Verdict};
use jiff::Timestamp;

const EP: [&str; 5] = [
    "https://10.1.80.11:6443",
    "https://10.1.80.12:6443",
    "https://10.1.80.13:6443",
    "https://10.1.80.14:6443",
    "https://10.1.80.15:6443",
];
const ROGUE: &str = "https://203.0.113.66:6443";
const N: u32 = 3;
const POLL: Duration = Duration::from_secs(10);
const CONFIRM: Duration = Duration::from_secs(1);
const JITTER: Duration = Duration::from_secs(5);
const COOLDOWN: Duration = Duration::from_secs(60);
const ROUNDS: usize = 300;
const T0: i64 = 1_800_000_000;

/// The hubs of a world of `k`, in configuration order: primary, secondary, then listed ones.
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

fn idx(h: HubId) -> usize {
    ids(EP.len()).iter().position(|x| *x == h).unwrap()
}

/// The resolver of a world of `k` hubs.
fn resolver_for(k: usize) -> Resolver {
    Resolver::new(
        ids(k)
            .into_iter()
            .zip(EP)
            .map(|(h, e)| (h, Endpoint::parse(e).unwrap()))
            .collect(),
        N,
    )
}

/// One round's verdicts as the resolver takes them.
fn observed(k: usize, verdicts: &[Verdict]) -> Vec<(HubId, &Verdict)> {
    ids(k).into_iter().zip(verdicts).collect()
}

/// What a hub publishes: the declaration of the Active it last learned of.
#[derive(Clone, Debug)]
struct Declaration {
    endpoint: String,
    identity: String,
    at: Timestamp,
    epoch: Option<u64>,
}

impl Declaration {
    fn verdict(&self) -> Verdict {
        Verdict::Claim(Claim {
            endpoint: Endpoint::parse(&self.endpoint).unwrap(),
            identity: Some(self.identity.clone()),
            last_updated: Some(self.at),
            epoch: self.epoch,
        })
    }
}

struct World {
    rng: fastrand::Rng,
    /// How many hubs: 2 to 5.
    k: usize,
    active: HubId,
    epoch: u64,
    /// Whether the controllers publish an epoch.
    epochs: bool,
    up: Vec<bool>,
    partitioned: bool,
    skew_secs: Vec<i64>,
    declared: Vec<Option<Declaration>>,
    /// Every declaration ever made, for hubs restored with an old one.
    history: Vec<Declaration>,
}

impl World {
    fn new(seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let k = 2 + (seed % 4) as usize;
        // A third of the worlds have controllers whose clocks are up to ten minutes off.
        let range = if rng.usize(0..3) == 0 { 600 } else { 30 };
        let skew_secs = (0..k).map(|_| rng.i64(-range..=range)).collect();
        Self {
            k,
            active: ids(k)[rng.usize(0..k)],
            epochs: rng.bool(),
            rng,
            epoch: 0,
            up: vec![true; k],
            partitioned: false,
            skew_secs,
            declared: vec![None; k],
            history: Vec::new(),
        }
    }

    /// Moves the world on by one round at virtual time `t`, with the worker talking to
    /// `worker`, and returns what each hub answers.
    fn step(&mut self, t: Duration, worker: Option<HubId>) -> Vec<Verdict> {
        let k = self.k;
        let r = &mut self.rng;
        if r.f64() < 0.03 {
            // A promotion of any other hub.
            let from = idx(self.active);
            self.active = ids(k)[(from + r.usize(1..k)) % k];
            self.epoch += 1;
        }
        for up in &mut self.up {
            *up = if *up { r.f64() > 0.05 } else { r.f64() < 0.3 };
        }
        self.partitioned = if self.partitioned {
            r.f64() > 0.3
        } else {
            r.f64() < 0.03
        };
        let a = idx(self.active);
        let now = |skew: i64| Timestamp::from_second(T0 + t.as_secs() as i64 + skew).unwrap();
        if self.up[a] {
            let d = Declaration {
                endpoint: EP[a].into(),
                identity: format!("ctrl-{a}-{}", self.epoch),
                at: now(self.skew_secs[a]),
                epoch: self.epochs.then_some(self.epoch),
            };
            self.history.push(d.clone());
            self.declared[a] = Some(d);
            if !self.partitioned {
                // The Standbys mirror the Active's declaration.
                for h in (0..k).filter(|h| *h != a) {
                    self.declared[h] = self.declared[a].clone();
                }
            }
        }
        // A Standby hub restored from an old backup: it carries an old claim until the Active
        // reaches it again.
        if self.rng.f64() < 0.02 && !self.history.is_empty() {
            let old = self.history[self.rng.usize(0..self.history.len())].clone();
            let standby = (a + self.rng.usize(1..k)) % k;
            self.declared[standby] = Some(old);
        }
        let mut out = vec![Verdict::NoClaim; k];
        for (h, v) in out.iter_mut().enumerate() {
            let r = &mut self.rng;
            *v = if !self.up[h] {
                Verdict::Error(ProbeError::new(ErrorReason::Timeout, "down"))
            } else if worker.map(idx) == Some(h) && r.f64() < 0.9 {
                // The worker-operator writes status whole and erases the claim on its hub
                // within milliseconds of each publication: the follower rarely sees it.
                Verdict::NoClaim
            } else if r.f64() < 0.03 {
                // A flap: one round of something else: an endpoint nobody configured, or an
                // old declaration read back from a lagging cache.
                if r.bool() || self.history.is_empty() {
                    claim(
                        ROGUE,
                        "flap",
                        Some(now(self.skew_secs[h] + r.i64(-60..=60))),
                    )
                } else {
                    self.history[r.usize(0..self.history.len())].verdict()
                }
            } else if r.f64() < 0.03 {
                Verdict::NoClaim
            } else {
                match &self.declared[h] {
                    Some(d) => d.verdict(),
                    None => Verdict::NoClaim,
                }
            };
        }
        out
    }
}

fn claim(endpoint: &str, identity: &str, at: Option<Timestamp>) -> Verdict {
    Verdict::Claim(Claim {
        endpoint: Endpoint::parse(endpoint).unwrap(),
        identity: Some(identity.into()),
        last_updated: at,
        epoch: None,
    })
}

/// A configured hub and the identity a claim names for it.
type Named = Option<(HubId, Option<String>)>;

/// The configured hub a verdict names, if any, with the identity it names.
fn names(v: &Verdict) -> Named {
    match v {
        Verdict::Claim(c) => EP
            .iter()
            .position(|e| Endpoint::parse(e).unwrap() == c.endpoint)
            .map(|i| (ids(EP.len())[i], c.identity.clone())),
        _ => None,
    }
}

fn names_hub(named: &[Named], hub: HubId) -> bool {
    named.iter().flatten().any(|(h, _)| *h == hub)
}

/// The claims of a round that have a say, with the hub each names: the simulation's own
/// reading of rules 1–3, not the resolver's.
fn usable(verdicts: &[Verdict], clock: Timestamp) -> Vec<(HubId, Claim)> {
    verdicts
        .iter()
        .filter_map(|v| match v {
            Verdict::Claim(c)
                if c.epoch.is_some()
                    || c.last_updated
                        .is_none_or(|at| at.duration_since(clock) <= MAX_FUTURE_SKEW) =>
            {
                names(v).map(|(h, _)| (h, c.clone()))
            }
            _ => None,
        })
        .collect()
}

/// What the simulation drives: the real resolver, or one without the basis rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Real,
    WithoutBasis,
}

fn run(seed: u64, rule: Rule, verbose: bool) -> Result<(), String> {
    let fail = |round: usize, what: String| {
        Err(format!(
            "seed {seed} failed at round {round}: {what}; replay with HUB_SIM_SEED={seed}"
        ))
    };
    let mut world = World::new(seed);
    let k = world.k;
    let mut resolver = resolver_for(k);
    let base = tokio::time::Instant::now();
    let mut pacer = Pacer::new(JITTER, COOLDOWN);
    let mut t = Duration::ZERO;
    let mut history: Vec<Vec<Named>> = Vec::new();
    let mut last_decision_round = 0;
    let mut worker: Option<HubId> = None;
    let mut restart_at: Option<Duration> = None;
    let mut last_restart: Option<Duration> = None;
    let (mut switches, mut restarts) = (0u32, 0u32);
    // The simulation's own account of the basis: the freshest usable claim naming the hub
    // followed, since it was decided on. And the freshest usable claim seen at all.
    let mut floor: Option<Claim> = None;
    let mut freshest_seen: Option<(HubId, Claim)> = None;
    // And, per hub other than the one followed, the freshest usable claim naming it since the
    // last decision: with three hubs or more, a claim older than one of these is old news.
    let mut others: Vec<(HubId, Claim)> = Vec::new();
    let mut news: Vec<bool> = Vec::new();

    for round in 0..ROUNDS {
        let verdicts = world.step(t, worker);
        let clock = Timestamp::from_second(T0 + t.as_secs() as i64).unwrap();
        let named = |v: &Verdict| {
            let has_say = matches!(v, Verdict::Claim(c) if !usable(&[v.clone(), Verdict::NoClaim], clock).is_empty() && c.endpoint.as_str() != ROGUE);
            names(v).filter(|_| has_say)
        };
        history.push(verdicts.iter().map(named).collect());
        let claims = usable(&verdicts, clock);
        let established = resolver.established();
        for (hub, c) in &claims {
            if Some(*hub) == established
                && floor
                    .as_ref()
                    .is_none_or(|f| freshness(c, f) == Ordering::Greater)
            {
                floor = Some(c.clone());
            }
            if freshest_seen
                .as_ref()
                .is_none_or(|(_, f)| freshness(c, f) == Ordering::Greater)
            {
                freshest_seen = Some((*hub, c.clone()));
            }
        }
        for (hub, c) in claims.iter().filter(|(h, _)| Some(*h) != established) {
            match others.iter_mut().find(|(h, _)| h == hub) {
                Some((_, kept)) if freshness(c, kept) == Ordering::Greater => *kept = c.clone(),
                Some(_) => {}
                None => others.push((*hub, c.clone())),
            }
        }
        // Whether this round's claims for another hub are news: fresher than the basis, and
        // no older than any claim for a third hub seen since the decision.
        news.push(claims.iter().all(|(hub, c)| {
            Some(*hub) == established
                || (floor
                    .as_ref()
                    .is_none_or(|f| freshness(c, f) == Ordering::Greater)
                    && others
                        .iter()
                        .all(|(h, o)| h == hub || freshness(o, c) != Ordering::Greater))
        }));
        if rule == Rule::WithoutBasis {
            resolver.forget_basis();
        }
        let step = resolver.observe(clock, &observed(k, &verdicts));
        if step.decision.is_some() {
            // The follower's write succeeds.
            resolver.published();
        }
        if verbose {
            println!(
                "k={k} t={:>5}s active={:?} epoch={} up={:?} part={} worker={:?} verdicts={:?} -> {:?} pending={:?}",
                t.as_secs(),
                world.active,
                world.epoch,
                world.up,
                world.partitioned,
                worker,
                history[round],
                step.decision.as_ref().map(|d| (d.hub, d.reason)),
                resolver.pending()
            );
        }
        if let Some(d) = &step.decision {
            let claimed_now = names_hub(&history[round], d.hub);
            match d.reason {
                Reason::Startup | Reason::Switch if !claimed_now => {
                    return fail(
                        round,
                        format!("followed {} without a claim naming it", d.hub),
                    );
                }
                Reason::Switch => {
                    // Invariant: N consecutive rounds naming the new hub, none of them deciding.
                    if last_decision_round + (N as usize) > round {
                        return fail(
                            round,
                            format!(
                                "a switch {} rounds after the previous decision",
                                round - last_decision_round
                            ),
                        );
                    }
                    for (r, named) in history.iter().enumerate().skip(round + 1 - N as usize) {
                        if !names_hub(named, d.hub) {
                            return fail(
                                round,
                                format!("switched to {} but round {r} did not name it", d.hub),
                            );
                        }
                    }
                    // Invariant: never a switch to a claim older than the basis. The switch
                    // rests on a claim of this round for its hub, fresher than the floor.
                    let Some(on) = claims
                        .iter()
                        .map(|(_, c)| c)
                        .find(|c| Some(*c) == d.basis.as_ref())
                    else {
                        return fail(
                            round,
                            format!("a switch resting on no claim of this round: {:?}", d.basis),
                        );
                    };
                    if let Some(f) = floor
                        .as_ref()
                        .filter(|f| f.epoch.is_some() || f.last_updated.is_some())
                    {
                        if freshness(on, f) != Ordering::Greater {
                            return fail(
                                round,
                                format!(
                                    "switched to {} on {on:?}, no fresher than the basis {f:?}",
                                    d.hub
                                ),
                            );
                        }
                    }
                    // Invariant, with three hubs or more: never a switch on a claim older than a
                    // claim for a third hub seen since the last decision.
                    if let Some((h, o)) = others
                        .iter()
                        .find(|(h, o)| *h != d.hub && freshness(o, on) == Ordering::Greater)
                    {
                        return fail(
                            round,
                            format!(
                                "switched to {} on {on:?}, older than {o:?} naming {h}",
                                d.hub
                            ),
                        );
                    }
                    // Invariant, with epochs: whatever the clocks say, a switch goes to the hub
                    // that the freshest claim seen so far names.
                    if world.epochs {
                        if let Some((hub, c)) = freshest_seen.as_ref().filter(|(h, _)| *h != d.hub)
                        {
                            return fail(
                                round,
                                format!("switched to {} while the freshest claim seen, {c:?}, names {hub}", d.hub),
                            );
                        }
                    }
                    switches += 1;
                    if restart_at.is_none() {
                        let (at, _) = pacer.schedule(base + t, world.rng.f64());
                        restart_at = Some(at - base);
                    }
                }
                Reason::Startup | Reason::Default => {
                    if round != 0 {
                        return fail(round, format!("a {:?} decision after startup", d.reason));
                    }
                    worker = Some(d.hub);
                }
                Reason::Resumed | Reason::SingleHub => {
                    return fail(round, "unexpected reason".into())
                }
            }
            floor = d.basis.clone();
            others.clear();
            last_decision_round = round;
        } else if round == 0 {
            return fail(round, "no decision at startup".into());
        }

        // Invariant: N rounds in which every usable claim names the true Active (the same
        // candidate: endpoint and identity), with at least one, each fresher than the basis,
        // leave the follower on it.
        if round + 1 >= N as usize {
            let window = &history[round + 1 - N as usize..=round];
            let first = window[0].iter().flatten().next().cloned();
            let agreed = first.as_ref().is_some_and(|f| {
                f.0 == world.active
                    && window.iter().all(|named| {
                        named.iter().flatten().next().is_some()
                            && named.iter().flatten().all(|c| c == f)
                    })
            });
            let news = news[round + 1 - N as usize..=round].iter().all(|n| *n);
            if agreed && news && resolver.established() != Some(world.active) {
                return fail(
                    round,
                    format!(
                        "{N} agreeing rounds for {:?} but following {:?}",
                        world.active,
                        resolver.established()
                    ),
                );
            }
        }

        let next = if resolver.pending().is_some() {
            CONFIRM
        } else {
            POLL
        };
        // The restart side: act when due, only if the worker is not already on the decision.
        if let Some(at) = restart_at.filter(|at| *at <= t + next) {
            restart_at = None;
            let target = resolver.established();
            if worker != target {
                if let Some(prev) = last_restart {
                    if at < prev + COOLDOWN {
                        return fail(
                            round,
                            format!("restarts {:?} apart, inside the cooldown", at - prev),
                        );
                    }
                }
                restarts += 1;
                worker = target;
                last_restart = Some(at);
                pacer.acted(base + at);
            }
        }
        if restarts > switches {
            return fail(
                round,
                format!("{restarts} restarts for {switches} switches"),
            );
        }
        t += next;
    }
    Ok(())
}

fn seeds() -> u64 {
    std::env::var("HUB_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

#[test]
fn the_follower_keeps_its_invariants_over_many_random_worlds() {
    if let Ok(seed) = std::env::var("HUB_SIM_SEED") {
        let seed: u64 = seed.parse().expect("HUB_SIM_SEED is a number");
        run(seed, Rule::Real, true).unwrap();
        return;
    }
    let seeds = seeds();
    let failures: Vec<String> = (0..seeds)
        .filter_map(|seed| run(seed, Rule::Real, false).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {seeds} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_resolver_without_the_basis_rule_is_caught() {
    // The mutant forgets its basis before every round: the seed's rule, which let a stale
    // claim move the worker back and forth once the worker had erased the fresh one.
    let caught: Vec<String> = (0..seeds())
        .filter_map(|seed| run(seed, Rule::WithoutBasis, false).err())
        .collect();
    assert!(
        caught
            .iter()
            .any(|e| e.contains("no fresher than the basis")),
        "the mutant went unnoticed in {} seeds ({} failed otherwise)",
        seeds(),
        caught.len()
    );
    println!(
        "the mutant failed {} of {} seeds; first: {}",
        caught.len(),
        seeds(),
        caught[0]
    );
}

#[test]
fn the_simulation_exercises_switches_erasures_stale_claims_and_rogue_claims() {
    // A simulation that never switched would prove nothing: count what the seeds produce.
    let (mut switches, mut rogue, mut stale, mut held, mut skewed, mut with_epochs) =
        (0, 0, 0, 0, 0, 0);
    let mut sizes = [0usize; 6];
    for seed in 0..50 {
        let mut world = World::new(seed);
        skewed += usize::from(world.skew_secs.iter().any(|s| s.abs() > 60));
        with_epochs += usize::from(world.epochs);
        sizes[world.k] += 1;
        let mut resolver = resolver_for(world.k);
        for round in 0..ROUNDS {
            let t = POLL * round as u32;
            let v = world.step(t, resolver.established());
            let clock = Timestamp::from_second(T0 + t.as_secs() as i64).unwrap();
            let step = resolver.observe(clock, &observed(world.k, &v));
            if step.decision.is_some() {
                resolver.published();
            }
            rogue += step.rejected.len();
            stale += step.stale.len();
            held += usize::from(step.held.is_some());
            switches += step
                .decision
                .filter(|d| d.reason == Reason::Switch)
                .map_or(0, |_| 1);
        }
    }
    assert!(switches >= 50, "only {switches} switches in 50 seeds");
    assert!(rogue >= 50, "only {rogue} rogue claims in 50 seeds");
    assert!(stale >= 50, "only {stale} stale claims in 50 seeds");
    assert!(held >= 50, "only {held} held rounds in 50 seeds");
    assert!(
        skewed >= 5,
        "only {skewed} of 50 worlds with clocks minutes off"
    );
    assert!(
        with_epochs >= 10,
        "only {with_epochs} of 50 worlds with epochs"
    );
    assert!(
        sizes[2..].iter().all(|n| *n >= 10),
        "worlds by number of hubs (0 to 5): {sizes:?}"
    );
}
