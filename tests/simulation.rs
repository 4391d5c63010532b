//! Deterministic simulation of the follower: the decision core and the restart pacing, driven by
//! a virtual clock through two simulated hubs with failures, partitions, promotions, flapping
//! claims, rogue endpoints and clock skew. Invariants are checked after every round.
//!
//! HUB_SIM_SEEDS=N runs N seeds (default 1000); HUB_SIM_SEED=S replays one seed, printing each
//! round. A failing seed names itself.

use std::time::Duration;

use hub_follower::claim::{Claim, Endpoint};
use hub_follower::resolver::{Reason, Resolver};
use hub_follower::restart::pacing::Pacer;
use hub_follower::verdict::{ErrorReason, HubId, ProbeError, Verdict};
use jiff::Timestamp;

const P: HubId = HubId::Primary;
const S: HubId = HubId::Secondary;
const EP: [&str; 2] = ["https://10.1.80.11:6443", "https://10.1.80.12:6443"];
const ROGUE: &str = "https://203.0.113.66:6443";
const N: u32 = 3;
const POLL: Duration = Duration::from_secs(10);
const CONFIRM: Duration = Duration::from_secs(1);
const JITTER: Duration = Duration::from_secs(5);
const COOLDOWN: Duration = Duration::from_secs(60);
const ROUNDS: usize = 300;

fn idx(h: HubId) -> usize {
    match h {
        HubId::Primary => 0,
        HubId::Secondary => 1,
    }
}

fn other(h: HubId) -> HubId {
    if h == P {
        S
    } else {
        P
    }
}

/// What a hub publishes: the declaration of the Active it last learned of.
#[derive(Clone, Debug)]
struct Declaration {
    endpoint: String,
    identity: String,
    at: Timestamp,
}

struct World {
    rng: fastrand::Rng,
    active: HubId,
    epoch: u32,
    up: [bool; 2],
    partitioned: bool,
    skew_secs: [i64; 2],
    declared: [Option<Declaration>; 2],
}

impl World {
    fn new(seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let skew_secs = [rng.i64(-30..=30), rng.i64(-30..=30)];
        Self {
            active: if rng.bool() { P } else { S },
            rng,
            epoch: 0,
            up: [true, true],
            partitioned: false,
            skew_secs,
            declared: [None, None],
        }
    }

    /// Moves the world on by one round at virtual time `t`, and returns what each hub answers.
    fn step(&mut self, t: Duration) -> [Verdict; 2] {
        let r = &mut self.rng;
        if r.f64() < 0.03 {
            self.active = other(self.active);
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
        let now =
            |skew: i64| Timestamp::from_second(1_800_000_000 + t.as_secs() as i64 + skew).unwrap();
        if self.up[a] {
            self.declared[a] = Some(Declaration {
                endpoint: EP[a].into(),
                identity: format!("ctrl-{a}-{}", self.epoch),
                at: now(self.skew_secs[a]),
            });
            if !self.partitioned {
                // The Standby mirrors the Active's declaration.
                self.declared[1 - a] = self.declared[a].clone();
            }
        }
        let mut out = [Verdict::NoClaim, Verdict::NoClaim];
        for (h, v) in out.iter_mut().enumerate() {
            let r = &mut self.rng;
            *v = if !self.up[h] {
                Verdict::Error(ProbeError::new(ErrorReason::Timeout, "down"))
            } else if r.f64() < 0.03 {
                // A flap: one round of something else, sometimes an endpoint nobody configured.
                let endpoint = if r.bool() { ROGUE } else { EP[r.usize(0..2)] };
                claim(
                    endpoint,
                    "flap",
                    Some(now(self.skew_secs[h] + r.i64(-60..=60))),
                )
            } else if r.f64() < 0.03 {
                Verdict::NoClaim
            } else {
                match &self.declared[h] {
                    Some(d) => claim(&d.endpoint, &d.identity, Some(d.at)),
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
            .map(|i| ([P, S][i], c.identity.clone())),
        _ => None,
    }
}

fn names_hub(named: &[Named; 2], hub: HubId) -> bool {
    named.iter().flatten().any(|(h, _)| *h == hub)
}

fn run(seed: u64, verbose: bool) -> Result<(), String> {
    let fail = |round: usize, what: String| {
        Err(format!(
            "seed {seed} failed at round {round}: {what}; replay with HUB_SIM_SEED={seed}"
        ))
    };
    let mut world = World::new(seed);
    let mut resolver = Resolver::new(
        vec![
            (P, Endpoint::parse(EP[0]).unwrap()),
            (S, Endpoint::parse(EP[1]).unwrap()),
        ],
        N,
    );
    let base = tokio::time::Instant::now();
    let mut pacer = Pacer::new(JITTER, COOLDOWN);
    let mut t = Duration::ZERO;
    let mut history: Vec<[Named; 2]> = Vec::new();
    let mut last_decision_round = 0;
    let mut worker: Option<HubId> = None;
    let mut restart_at: Option<Duration> = None;
    let mut last_restart: Option<Duration> = None;
    let (mut switches, mut restarts) = (0u32, 0u32);

    for round in 0..ROUNDS {
        let verdicts = world.step(t);
        history.push([names(&verdicts[0]), names(&verdicts[1])]);
        let clock = Timestamp::from_second(1_800_000_000 + t.as_secs() as i64).unwrap();
        let step = resolver.observe(clock, &[(P, &verdicts[0]), (S, &verdicts[1])]);
        if step.decision.is_some() {
            // The follower's write succeeds.
            resolver.published();
        }
        if verbose {
            println!(
                "t={:>5}s active={:?} up={:?} part={} verdicts={:?} -> {:?} pending={:?}",
                t.as_secs(),
                world.active,
                world.up,
                world.partitioned,
                history[round],
                step.decision,
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
            last_decision_round = round;
        } else if round == 0 {
            return fail(round, "no decision at startup".into());
        }

        // Invariant: N rounds in which every usable claim names the true Active (the same
        // candidate: endpoint and identity), with at least one, leave the follower on it.
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
            if agreed && resolver.established() != Some(world.active) {
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

#[test]
fn the_follower_keeps_its_invariants_over_many_random_worlds() {
    if let Ok(seed) = std::env::var("HUB_SIM_SEED") {
        let seed: u64 = seed.parse().expect("HUB_SIM_SEED is a number");
        run(seed, true).unwrap();
        return;
    }
    let seeds: u64 = std::env::var("HUB_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let failures: Vec<String> = (0..seeds)
        .filter_map(|seed| run(seed, false).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {seeds} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_simulation_exercises_switches_flaps_and_rogue_claims() {
    // A simulation that never switched would prove nothing: count what the seeds produce.
    let mut switches = 0;
    let mut rogue_rounds = 0;
    for seed in 0..50 {
        let mut world = World::new(seed);
        let mut resolver = Resolver::new(
            vec![
                (P, Endpoint::parse(EP[0]).unwrap()),
                (S, Endpoint::parse(EP[1]).unwrap()),
            ],
            N,
        );
        for round in 0..ROUNDS {
            let v = world.step(POLL * round as u32);
            let t = POLL * round as u32;
            let clock = Timestamp::from_second(1_800_000_000 + t.as_secs() as i64).unwrap();
            let step = resolver.observe(clock, &[(P, &v[0]), (S, &v[1])]);
            if step.decision.is_some() {
                resolver.published();
            }
            rogue_rounds += step.rejected.len();
            switches += step
                .decision
                .filter(|d| d.reason == Reason::Switch)
                .map_or(0, |_| 1);
        }
    }
    assert!(switches >= 50, "only {switches} switches in 50 seeds");
    assert!(
        rogue_rounds >= 50,
        "only {rogue_rounds} rogue claims in 50 seeds"
    );
}
