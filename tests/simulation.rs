//! Deterministic simulation of the follower: the decision core and the restart pacing, driven by
//! a virtual clock through two to five simulated hubs (by seed) with failures, partitions, promotions, flapping
//! claims, rogue endpoints and clock skew, and a worker-operator as the real one behaves: it
//! erases the claim on the hub it talks to. Invariants are checked after every round.
//!
//! The worlds vary by seed: controllers' clocks skewed by up to ±30 s or ±10 min, claims with
//! and without an `epoch`, hubs that come back (or are restored) carrying an old claim, an
//! Active that dies for good (its successor's epoch counter restarted, in some worlds), and
//! split brains: two hubs each claiming themselves at the same epoch for ten minutes.
//!
//! Safety and liveness are checked side by side (rules 10 to 12 of the resolver): a worker on
//! a dead hub reaches the live self-claimed Active within the bound, a split brain moves it at
//! most once per window, and the first decision never comes from silence. Each invariant has a
//! mutant that it catches (the tests at the end).
//!
//! HUB_SIM_SEEDS=N runs N seeds (default 1000; CI runs the default); HUB_SIM_SEED=S replays one
//! seed, printing each round. A failing seed names itself. 10^5 seeds:
//! `HUB_SIM_SEEDS=100000 cargo test --release --test simulation`.

use std::cmp::Ordering;
use std::time::Duration;

use hub_follower::claim::{Claim, Endpoint};
use hub_follower::resolver::{freshness, Liveness, Reason, Resolver, MAX_FUTURE_SKEW};
use hub_follower::restart::pacing::Pacer;
use hub_follower::verdict::{ErrorReason, HubId, ProbeError, Verdict};
use jiff::{SignedDuration, Timestamp};

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
/// Rule 10's bound, rule 11's window, rule 12's wait: the sidecar's defaults.
const DEAD_AFTER: Duration = Duration::from_secs(180);
const WINDOW: Duration = Duration::from_secs(300);
const DEFAULT_AFTER: Duration = Duration::from_secs(30);
const BOUNDS: Liveness = Liveness {
    dead_hub_after: Some(SignedDuration::from_secs(180)),
    split_brain_window: SignedDuration::from_secs(300),
    default_after: SignedDuration::from_secs(30),
};
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

/// The resolver of a world of `k` hubs, with `liveness`.
fn resolver_with(k: usize, liveness: Liveness) -> Resolver {
    Resolver::new(
        ids(k)
            .into_iter()
            .zip(EP)
            .map(|(h, e)| (h, Endpoint::parse(e).unwrap()))
            .collect(),
        N,
    )
    .with_liveness(liveness)
}

fn resolver_for(k: usize) -> Resolver {
    resolver_with(k, BOUNDS)
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
    /// Hubs that died for good: they never answer again.
    dead: Vec<bool>,
    /// Whether a promotion after a death restarts the epoch counter (with epochs).
    resets: bool,
    /// Whether an epoch reset happened: "the freshest claim wins" no longer holds.
    reset_happened: bool,
    /// A split brain: these two hubs each declare themselves, until this round.
    split: Option<(usize, usize, usize)>,
    split_happened: bool,
    round: usize,
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
            dead: vec![false; k],
            resets: seed % 3 == 0,
            reset_happened: false,
            split: None,
            split_happened: false,
            round: 0,
        }
    }

    /// Moves the world on by one round at virtual time `t`, with the worker talking to
    /// `worker`, and returns what each hub answers.
    fn step(&mut self, t: Duration, worker: Option<HubId>) -> Vec<Verdict> {
        let k = self.k;
        self.round += 1;
        let alive: Vec<usize> = (0..k).filter(|h| !self.dead[*h]).collect();
        let r = &mut self.rng;
        if self.split.is_none() && r.f64() < 0.03 {
            // A promotion of any other living hub.
            let from = idx(self.active);
            let others: Vec<usize> = alive.iter().copied().filter(|h| *h != from).collect();
            if !others.is_empty() {
                self.active = ids(k)[others[r.usize(0..others.len())]];
                self.epoch += 1;
            }
        }
        if self.split.is_none() && alive.len() > 2 && r.f64() < 0.005 {
            // The Active dies for good; another hub is promoted, its epoch counter restarted
            // in some worlds.
            let from = idx(self.active);
            self.dead[from] = true;
            let others: Vec<usize> = alive.iter().copied().filter(|h| *h != from).collect();
            self.active = ids(k)[others[r.usize(0..others.len())]];
            if self.resets && self.epochs {
                self.epoch = 1;
                self.reset_happened = true;
            } else {
                self.epoch += 1;
            }
        }
        if self.split.is_none() && alive.len() >= 2 && r.f64() < 0.01 {
            // A split brain: the Active and another living hub each declare themselves, at
            // the same epoch, for ten minutes.
            let a = idx(self.active);
            let others: Vec<usize> = alive.iter().copied().filter(|h| *h != a).collect();
            if !others.is_empty() {
                let b = others[r.usize(0..others.len())];
                self.split = Some((a, b, self.round + 60));
                self.split_happened = true;
            }
        }
        if self.split.is_some_and(|(_, _, end)| self.round >= end) {
            self.split = None;
        }
        for (h, up) in self.up.iter_mut().enumerate() {
            *up = !self.dead[h] && if *up { r.f64() > 0.05 } else { r.f64() < 0.3 };
        }
        self.partitioned = if self.partitioned {
            r.f64() > 0.3
        } else {
            r.f64() < 0.03
        };
        let a = idx(self.active);
        let now = |skew: i64| Timestamp::from_second(T0 + t.as_secs() as i64 + skew).unwrap();
        if let Some((x, y, _)) = self.split {
            for h in [x, y].into_iter().filter(|h| self.up[*h]) {
                let d = Declaration {
                    endpoint: EP[h].into(),
                    identity: format!("ctrl-{h}-{}", self.epoch),
                    at: now(self.skew_secs[h]),
                    epoch: self.epochs.then_some(self.epoch),
                };
                self.history.push(d.clone());
                self.declared[h] = Some(d);
            }
        } else if self.up[a] {
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

/// What the simulation drives: the real resolver, or a mutant without one of its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Real,
    /// Rule 5 forgotten before every round.
    WithoutBasis,
    /// Rule 10 off: a dead hub's basis holds for ever.
    WithoutDeadHubBound,
    /// Rule 11 off: no split-brain window.
    WithoutSplitBrainWindow,
    /// Rule 12 off: the primary at once when nothing names anyone.
    DefaultAtOnce,
}

impl Rule {
    fn liveness(self) -> Liveness {
        match self {
            Rule::Real | Rule::WithoutBasis => BOUNDS,
            Rule::WithoutDeadHubBound => Liveness {
                dead_hub_after: None,
                ..BOUNDS
            },
            Rule::WithoutSplitBrainWindow => Liveness {
                split_brain_window: SignedDuration::ZERO,
                ..BOUNDS
            },
            Rule::DefaultAtOnce => Liveness {
                default_after: SignedDuration::ZERO,
                ..BOUNDS
            },
        }
    }
}

fn run(seed: u64, rule: Rule, verbose: bool) -> Result<(), String> {
    let fail = |round: usize, what: String| {
        Err(format!(
            "seed {seed} failed at round {round}: {what}; replay with HUB_SIM_SEED={seed}"
        ))
    };
    let mut world = World::new(seed);
    let k = world.k;
    let mut resolver = resolver_with(k, rule.liveness());
    // When each hub last answered (rules 10 and 11), and the claims' switches made during a
    // split brain, with the episode they were made in.
    let mut answered_at = vec![Duration::ZERO; k];
    let mut split_switches: Vec<(Duration, usize)> = Vec::new();
    let mut decided = false;
    // Per round: whether the Active claimed itself, and how long the worker's hub had been
    // silent before it.
    let mut self_claims: Vec<Option<HubId>> = Vec::new();
    let mut dead_since: Vec<Option<Duration>> = Vec::new();
    let mut split_rounds: Vec<bool> = Vec::new();
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
        for (h, v) in verdicts.iter().enumerate() {
            if v.heard() {
                answered_at[h] = t;
            }
        }
        // Rule 10: the established hub has not answered for the bound.
        let silent_for =
            |hub: Option<HubId>| hub.map_or(Duration::ZERO, |h| t - answered_at[idx(h)]);
        // A split brain as the follower can know it: the episode, or the hub the worker is on
        // still declaring itself (a partition kept the new Active's word from it), which
        // its watch sees even when the worker erases it.
        let declares_itself = |e: HubId| {
            world.up[idx(e)]
                && world.declared[idx(e)]
                    .as_ref()
                    .is_some_and(|d| names(&d.verdict()).is_some_and(|(h, _)| h == e))
        };
        let own_says_itself = resolver
            .established()
            .is_some_and(|e| e != world.active && declares_itself(e));
        split_rounds.push(world.split.is_some() || own_says_itself);
        dead_since.push(resolver.established().map(|e| t - answered_at[idx(e)]));
        // The watch of the worker's hub sees what that hub declares before the worker erases it.
        if let Some(e) = resolver.established() {
            if let Some(d) = world.declared[idx(e)].as_ref().filter(|_| world.up[idx(e)]) {
                if let Verdict::Claim(c) = d.verdict() {
                    resolver.witness(e, &c, clock);
                    // What a watch shows is evidence as a read is: a claim naming the
                    // worker's hub moves the basis forward (rule 5).
                    let shown = Verdict::Claim(c.clone());
                    if usable(&[shown], clock).iter().any(|(h, _)| *h == e)
                        && floor
                            .as_ref()
                            .is_none_or(|f| freshness(&c, f) == Ordering::Greater)
                    {
                        floor = Some(c);
                    }
                }
            }
        }
        let named = |v: &Verdict| {
            let has_say = matches!(v, Verdict::Claim(c) if !usable(&[v.clone(), Verdict::NoClaim], clock).is_empty() && c.endpoint.as_str() != ROGUE);
            names(v).filter(|_| has_say)
        };
        history.push(verdicts.iter().map(named).collect());
        // A hub's claim for itself, with a say (rule 10 counts only those).
        let said: Vec<Named> = history[round].clone();
        let self_claimed = |hub: HubId| said[idx(hub)].as_ref().is_some_and(|(h, _)| *h == hub);
        self_claims.push(Some(world.active).filter(|a| self_claimed(*a)));
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
                "k={k} t={:>5}s active={:?} epoch={} split={:?} up={:?} part={} worker={:?} verdicts={:?} -> {:?} pending={:?}",
                t.as_secs(),
                world.active,
                world.epoch,
                world.split,
                world.up,
                world.partitioned,
                worker,
                history[round],
                step.decision.as_ref().map(|d| (d.hub, d.reason)),
                resolver.pending()
            );
            if let Some(h) = &step.held {
                println!("    held: {h:?}");
            }
        }
        if let Some(d) = &step.decision {
            let claimed_now = names_hub(&history[round], d.hub);
            // A move off a hub silent for the bound, onto a hub that claims itself: rule 10
            // lets it rest on a claim no fresher than the basis.
            let off_a_dead_hub = silent_for(established) >= DEAD_AFTER && self_claimed(d.hub);
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
                        .filter(|_| !off_a_dead_hub)
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
                        .filter(|_| !off_a_dead_hub)
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
                    // (A split brain at one epoch breaks the epochs' contract: not then.)
                    if world.epochs
                        && !world.reset_happened
                        && !world.split_happened
                        && !off_a_dead_hub
                    {
                        if let Some((hub, c)) = freshest_seen.as_ref().filter(|(h, _)| *h != d.hub)
                        {
                            return fail(
                                round,
                                format!("switched to {} while the freshest claim seen, {c:?}, names {hub}", d.hub),
                            );
                        }
                    }
                    // Invariant (rule 11): during a split brain, the claims move the worker
                    // between its two hubs at most once per window, unless off a hub that
                    // did not answer this round (a failover), that no longer declares itself at
                    // the epoch of the claim moved to (restored from an old backup, say), or
                    // whose read named another hub this round (a lagging cache): what the
                    // follower knows is what it reads. Not after an epoch counter restarted:
                    // then freshness cannot tell an old claim of a hub's from its new one.
                    if let Some((x, y, end)) = world.split {
                        let pair = [ids(k)[x], ids(k)[y]];
                        if pair.contains(&d.hub) && established.is_some_and(|e| pair.contains(&e)) {
                            if let Some((prev, _)) = split_switches
                                .iter()
                                .rev()
                                .find(|(_, e)| *e == end)
                                .filter(|(prev, _)| {
                                    t - *prev < WINDOW
                                        && !world.reset_happened
                                        && silent_for(established).is_zero()
                                        && established.is_some_and(|e| {
                                            declares_itself(e)
                                                && world.declared[idx(e)].as_ref().map(|x| x.epoch)
                                                    == d.basis.as_ref().map(|b| b.epoch)
                                        })
                                        && established.is_none_or(|e| {
                                            names(&verdicts[idx(e)]).is_none_or(|(h, _)| h == e)
                                        })
                                })
                            {
                                return fail(
                                    round,
                                    format!(
                                        "a split brain moved the worker twice in {:?} (flapping), the window is {WINDOW:?}",
                                        t - *prev
                                    ),
                                );
                            }
                            split_switches.push((t, end));
                        }
                    }
                    switches += 1;
                    if restart_at.is_none() {
                        let (at, _) = pacer.schedule(base + t, world.rng.f64());
                        restart_at = Some(at - base);
                    }
                }
                Reason::Startup | Reason::Default => {
                    if decided {
                        return fail(round, format!("a {:?} decision after startup", d.reason));
                    }
                    // Invariant (rule 12): the first decision names a hub some hub named, or
                    // is the primary's default once the wait is over.
                    if d.reason == Reason::Default && t < DEFAULT_AFTER {
                        return fail(
                            round,
                            format!("a default decision from silence at {t:?}, before {DEFAULT_AFTER:?}"),
                        );
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
            decided = true;
        } else if !decided && t >= DEFAULT_AFTER {
            return fail(
                round,
                format!("no decision at {t:?}, after {DEFAULT_AFTER:?}"),
            );
        }

        // Invariant (rule 10): the worker's hub dead for the bound, and N rounds in which the
        // living Active claims itself and every usable claim names it: the follower is on it.
        if round + 1 >= N as usize && decided {
            let first = round + 1 - N as usize;
            let window = &history[first..=round];
            let active = world.active;
            let on_it = window.iter().all(|named| {
                named.iter().flatten().next().is_some()
                    && named.iter().flatten().all(|c| c.0 == active)
            }) && window[0]
                .iter()
                .flatten()
                .all(|c| Some(c) == window[0].iter().flatten().next())
                && window.iter().all(|named| {
                    named
                        .iter()
                        .flatten()
                        .all(|c| Some(c) == window[0].iter().flatten().next())
                })
                && self_claims[first..=round]
                    .iter()
                    .all(|h| *h == Some(active));
            // Silent through the whole window, and no split brain in it.
            let stranded_since = dead_since[first]
                .filter(|_| {
                    dead_since[first..=round]
                        .iter()
                        .all(|d| d.is_some_and(|d| d >= DEAD_AFTER))
                })
                .filter(|_| !split_rounds[first..=round].iter().any(|s| *s));
            if on_it
                && stranded_since.is_some_and(|d| d >= DEAD_AFTER)
                && resolver.established() != Some(active)
            {
                return fail(
                    round,
                    format!(
                        "stranded on {:?}, silent for {:?}, while {active:?} claims itself",
                        resolver.established(),
                        stranded_since
                    ),
                );
            }
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
            // In a split brain, claims that look agreed are not: the other brain's claim is
            // erased by the worker, and rule 11 holds the move for its window.
            let split = split_rounds[round + 1 - N as usize..=round]
                .iter()
                .any(|s| *s);
            if agreed && news && !split && resolver.established() != Some(world.active) {
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

/// Runs the seeds against the mutant `rule`, which must fail at least one of them with a
/// message that says `what`: the invariant written to catch it.
fn assert_caught(rule: Rule, what: &str) {
    let failures: Vec<String> = (0..seeds())
        .filter_map(|seed| run(seed, rule, false).err())
        .collect();
    let Some(first) = failures.iter().find(|e| e.contains(what)) else {
        panic!(
            "{rule:?} went unnoticed ({} seeds failed otherwise)",
            failures.len()
        );
    };
    println!(
        "the mutant failed {} of {} seeds; first: {first}",
        failures.len(),
        seeds()
    );
}

#[test]
fn a_resolver_without_the_dead_hub_bound_is_caught_stranding_the_worker() {
    assert_caught(Rule::WithoutDeadHubBound, "stranded on");
}

#[test]
fn a_resolver_without_the_split_brain_window_is_caught_flapping() {
    assert_caught(Rule::WithoutSplitBrainWindow, "(flapping)");
}

#[test]
fn a_resolver_that_defaults_at_once_is_caught_deciding_from_silence() {
    assert_caught(Rule::DefaultAtOnce, "from silence");
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
