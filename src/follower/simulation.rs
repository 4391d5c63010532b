//! The whole follower, simulated: its core driven as the loop drives it, round after round on a
//! virtual clock, through a seeded world of two to five hubs. `tests/simulation.rs` drives
//! the resolver alone; this drives everything around it too: the watches' news, the worker's
//! erasure, the pin file's text, writes that fail, and sidecar restarts that resume from what
//! the last successful write left on disk.
//!
//! The world, by seed: a cold start with every hub silent; promotions, with and without epochs;
//! an Active that dies for good while its successor's epoch counter restarts; hubs that go
//! silent for a while; a split brain (two hubs each claiming themselves at one epoch) for five
//! minutes; a pin or a drain, and a pin written with a time already past (refused: it moves
//! nothing); a failed write now and then; sidecar restarts, in some worlds more often
//! than `--dead-hub-after`; watches that stall or die; an etcd restored from a backup while
//! its watch stalls, which issues again the version the watch last showed, for another
//! claim. The worker is on the hub on
//! disk and erases the claim there right after each republish, so reads of its hub mostly see
//! no claim while its watch saw one. Every write bumps the object's version; a watch that
//! follows it gives the core what it vouches for, so a switch may be confirmed by one read.
//!
//! Invariants, after every round:
//! - safety: every write names a configured hub; generations go up by one per decision and
//!   never back; a restarted sidecar's first write resumes the hub on disk; a switch to a hub
//!   comes after N rounds of this run in each of which a read named it (or, pinned or not
//!   drained, it answered), or, vouched for by the watches, in a round that named it after every hub's
//!   claim truly stood for the span; no decision from silence before `--default-after`;
//! - liveness: after the world has been calm (no split brain, no pin or drain, the Active's hub up and
//!   every live hub naming it) for the dead-hub bound plus the split-brain
//!   window, the worker is on the Active's hub, across sidecar restarts too: the handoff's
//!   `silentSince` carries the dead hub's silence over a restart (rule 10);
//! - stability: within a split brain, two switches the claims made (not a pin) off a hub
//!   that answers (moving off a silent one is a failover) are at least a window apart;
//! - resources: nothing the core keeps per hub outgrows the hubs.
//!
//! Each invariant has a mutant that it catches (the tests at the end). HUB_SIM_SEEDS=N runs N
//! seeds (default 1000); HUB_SIM_SEED=S replays one, printing each round. 10^5 seeds:
//! `HUB_SIM_SEEDS=100000 cargo test --release --lib follower::simulation::the_whole`.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

use super::core::{Core, Earlier, Watched};
use crate::claim::{Claim, Endpoint};
use crate::config::Config;
use crate::handoff::Handoff;
use crate::hub::Probe;
use crate::metrics::Metrics;
use crate::overrides::Kind;
use crate::resolver::Reason;
use crate::state::{FollowerView, Mode};
use crate::testing::settings;
use crate::verdict::{ErrorReason, HubId, ProbeError, Verdict};

const EP: [&str; 5] = [
    "https://10.1.80.11:6443",
    "https://10.1.80.12:6443",
    "https://10.1.80.13:6443",
    "https://10.1.80.14:6443",
    "https://10.1.80.15:6443",
];
/// The names of the hubs after the first two (`--hubs`).
const MORE: [&str; 3] = ["hub-c", "hub-d", "hub-e"];
const N: usize = 3;
/// Virtual time between rounds.
const TICK: Duration = Duration::from_secs(2);
const ROUNDS: usize = 800;
const DEAD_AFTER: Duration = Duration::from_secs(180);
const WINDOW: Duration = Duration::from_secs(300);
const DEFAULT_AFTER: Duration = Duration::from_secs(30);
/// Calm this long, in rounds, and the worker must be on the Active's hub.
const CALM: usize = ((DEAD_AFTER.as_secs() + WINDOW.as_secs() + 20) / TICK.as_secs()) as usize;
const SPLIT_ROUNDS: usize = 150;

/// splitmix64: enough randomness for a world, and the same world for the same seed.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What a run is driven with: the real follower, or one with a rule bent out of shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bent {
    None,
    /// `--split-brain-window 0s`.
    NoWindow,
    /// `--dead-hub-after` longer than the run: a dead hub's basis holds.
    NoDeadHubBound,
    /// `--default-after 0s`: the primary at once from silence.
    DefaultAtOnce,
    /// A restarted sidecar that ignores what is on disk.
    ForgetsOnRestart,
    /// A restarted sidecar that ignores the handoff's `silentSince`.
    ForgetsSilence,
    /// A driver that takes a read's own version as the watch's, and every claim as old: the
    /// watches "vouch" for what they never followed.
    VouchesBlind,
    /// A driver that gives each watch the claim its hub's read found: a read of the version the
    /// watch showed stands for N, whatever it claims (what the core trusted before it compared
    /// claims too).
    TrustsVersionAlone,
}

/// A claim as the watches compare it: whom it names, its epoch and `lastUpdated`; none for
/// no claim.
type Key = Option<(usize, Option<u64>, Timestamp)>;

/// A controller's publication: whom it names and at which epoch, and when.
type Stamp = ((usize, Option<u64>), Timestamp);

/// One hub's object and its watch.
#[derive(Default)]
struct Object {
    /// Bumped by every write, as an API server bumps `resourceVersion`.
    version: u64,
    key: Key,
    /// Since when the object has shown `key`.
    since: Option<Instant>,
    /// What the watch has followed: the version, the key, since when; kept while it is down,
    /// when it vouches for nothing.
    tracked: Option<(u64, Key, Instant)>,
    /// Rounds the watch delivers nothing for while it still vouches (a stall), or is down.
    stalled: usize,
    dead: usize,
    /// A stalled watch owes writes: it delivers them, in order, with the next one.
    owed: bool,
}

/// The claim of a key.
fn claim_of(key: Key) -> Option<Claim> {
    key.map(|(whom, epoch, at)| Claim {
        endpoint: Endpoint::parse(EP[whom]).expect("an endpoint"),
        identity: Some(format!("ctrl-{whom}")),
        last_updated: Some(at),
        epoch,
    })
}

impl Object {
    /// A write at `at`: the watch delivers it unless it is stalled or down.
    fn write(&mut self, key: Key, at: Instant) {
        self.version += 1;
        if self.key != key || self.since.is_none() {
            self.since = Some(at);
        }
        self.key = key;
        if self.dead == 0 && self.stalled == 0 {
            // What it owed shows other claims in between: the claim is new as of now.
            self.tracked = Some(match self.tracked {
                Some((_, k, since)) if k == key && !self.owed => (self.version, key, since),
                _ => (self.version, key, at),
            });
            self.owed = false;
        } else {
            self.owed = true;
        }
    }

    /// The hub's etcd, restored from a backup while its watch stalls, issues again the version
    /// the watch last showed, now for what the object holds: a read returns that version with
    /// another claim. The watch, ahead of the restored store, shows nothing until it catches up.
    fn restore(&mut self) {
        if let Some((version, key, _)) = self.tracked {
            if self.stalled > 0 && self.version > version && self.key != key {
                self.version = version;
            }
        }
    }

    /// A watch back from a stall or a failure delivers what it owes, resuming from its
    /// version; the claim it shows is new as of `now`.
    fn catch_up(&mut self, now: Instant) {
        if self.owed && self.dead == 0 && self.stalled == 0 {
            self.tracked = self.since.map(|_| (self.version, self.key, now));
            self.owed = false;
        }
    }
}

fn ids(k: usize) -> Vec<HubId> {
    let mut ids = vec![HubId::PRIMARY, HubId::SECONDARY];
    ids.extend(MORE.iter().map(|name| HubId::named(name)));
    ids.truncate(k);
    ids
}

fn core(k: usize, bent: Bent, at: Instant) -> Core {
    let hubs = (2..k)
        .map(|h| format!("{}={}", MORE[h - 2], EP[h]))
        .collect::<Vec<_>>()
        .join(" ; ");
    let mut args = vec!["--hub-endpoint", EP[0], "--secondary-endpoint", EP[1]];
    if k > 2 {
        args.extend_from_slice(&["--hubs", &hubs]);
    }
    args.extend_from_slice(&[
        "--cluster-name",
        "w1",
        "--namespace",
        "p",
        "--override-dir",
        "/o",
    ]);
    args.extend_from_slice(match bent {
        Bent::NoWindow => &["--split-brain-window", "0s"],
        Bent::NoDeadHubBound => &["--dead-hub-after", "10h"],
        Bent::DefaultAtOnce => &["--default-after", "0s"],
        _ => &[],
    });
    let config = Arc::new(Config::from_settings(&settings(&args)).expect("valid settings"));
    let metrics = Metrics::new(&ids(k), "none").expect("metrics");
    let view = FollowerView::new(Mode::Follow, config.confirmations, Duration::from_secs(60));
    Core::new(config, metrics, view, at)
}

struct World {
    rng: Rng,
    k: usize,
    epochs: bool,
    /// Rounds each hub stays silent for (0: up); `usize::MAX`: for good.
    down: Vec<usize>,
    /// The hub whose controller is Active, and its epoch.
    active: usize,
    epoch: u64,
    /// Each hub's controller's word: whom it names.
    names: Vec<usize>,
    split: Option<(usize, usize)>,
    /// The watch's count of claims shown, per hub.
    shown: Vec<u64>,
    /// Each hub's object, as written and as its watch followed it.
    objects: Vec<Object>,
    /// Each hub's controller's last publication: whom and at which epoch, and when. It
    /// republishes on a content change, and now and then on its timer.
    stamps: Vec<Option<Stamp>>,
    /// The controllers republish only now and then (else every round): the watches can then
    /// vouch for a claim. Only in worlds without a split brain.
    quiet: bool,
    /// The virtual clock of the round under way.
    clock: Instant,
    /// The chance of a sidecar restart each round: in some worlds more often than
    /// `--dead-hub-after`.
    restarts: f64,
    /// The round a cold start ends, the round the Active dies, a split brain begins, a pin
    /// begins (and of whom).
    cold_until: usize,
    death_at: Option<usize>,
    split_at: Option<usize>,
    /// Every watch is down through the split brain: the worker's hub's claims, which it
    /// erases, reach the core only through its reads, and only rule 11's window holds.
    split_unwatched: bool,
    pin: Option<(usize, usize)>,
    /// Now and then a hub's etcd is restored from a backup while its watch stalls (drawn from
    /// its own stream, so that the rest of each seed's world is as it was).
    restores: Option<Rng>,
    /// A drain: from a round, for 60 rounds, of a hub (never in a world with a pin).
    drain: Option<(usize, usize)>,
    /// A pin written with a time already past: refused, and moves nothing.
    past_pin: Option<(usize, usize)>,
}

impl World {
    fn new(seed: u64, clock: Instant) -> Self {
        let mut rng = Rng(seed);
        let k = 2 + rng.below(4);
        let epochs = rng.chance(0.6);
        let cold_until = if rng.chance(0.3) {
            3 + rng.below(20)
        } else {
            0
        };
        let death_at = rng.chance(0.4).then(|| 50 + rng.below(250));
        let split_at = rng.chance(0.35).then(|| 30 + rng.below(400));
        let pin = rng.chance(0.2).then(|| (40 + rng.below(400), rng.below(k)));
        let drain =
            (pin.is_none() && rng.chance(0.25)).then(|| (40 + rng.below(400), rng.below(k)));
        // Never beside a pin: a refused value keeps the last good one in effect.
        let past_pin =
            (pin.is_none() && rng.chance(0.2)).then(|| (40 + rng.below(400), rng.below(k)));
        let restarts = if rng.chance(0.2) { 0.04 } else { 0.01 };
        let split_unwatched = split_at.is_some() && rng.chance(0.5);
        Self {
            k,
            epochs,
            down: vec![0; k],
            active: 0,
            epoch: 8,
            names: vec![0; k],
            split: None,
            shown: vec![0; k],
            objects: (0..k).map(|_| Object::default()).collect(),
            stamps: vec![None; k],
            quiet: split_at.is_none() && rng.chance(0.5),
            clock,
            restarts,
            cold_until,
            death_at,
            split_at,
            split_unwatched,
            restores: {
                let mut own = Rng(seed ^ 0x005E_ED0F_E7CD);
                own.chance(0.5).then_some(own)
            },
            pin,
            drain,
            past_pin,
            rng,
        }
    }

    fn up(&self, h: usize) -> bool {
        self.down[h] == 0
    }

    /// The world's events at `round`.
    fn step(&mut self, round: usize) {
        for d in self
            .down
            .iter_mut()
            .filter(|d| **d != usize::MAX && **d > 0)
        {
            *d -= 1;
        }
        if round < self.cold_until {
            for (h, d) in self.down.iter_mut().enumerate() {
                if *d != usize::MAX {
                    *d = (self.cold_until - round).max(h);
                }
            }
        }
        if Some(round) == self.death_at {
            // The Active's hub dies for good; another is promoted, its epoch counter restarted.
            self.down[self.active] = usize::MAX;
            self.active = (self.active + 1) % self.k;
            self.epoch = 1;
        } else if round > self.cold_until && self.split.is_none() && self.rng.chance(0.006) {
            let next = self.rng.below(self.k);
            if self.up(next) && next != self.active {
                self.active = next;
                self.epoch += 1;
            }
        }
        if round > self.cold_until && self.rng.chance(0.01) {
            let h = self.rng.below(self.k);
            if self.down[h] != usize::MAX {
                self.down[h] = 3 + self.rng.below(15);
            }
        }
        for (h, o) in self.objects.iter_mut().enumerate() {
            o.stalled = o.stalled.saturating_sub(1);
            o.dead = o.dead.saturating_sub(1);
            o.catch_up(self.clock);
            let unwatched_split = self.split_unwatched
                && self
                    .split_at
                    .is_some_and(|s| (s..s + SPLIT_ROUNDS).contains(&round));
            if self.down[h] != 0 || unwatched_split {
                o.dead = o.dead.max(1);
            }
            if self.rng.chance(0.02) {
                o.stalled = 1 + self.rng.below(10);
            } else if self.rng.chance(0.01) {
                o.dead = 1 + self.rng.below(10);
            }
            // A dead watch keeps what it followed and vouches for nothing (see `watched`);
            // back, it resumes from its version.
            if o.dead == 0 && o.tracked.is_none() && o.stalled == 0 {
                // The first list: from which on nothing before is known.
                o.tracked = o.since.map(|_| (o.version, o.key, self.clock));
            }
        }
        // A split brain lasts its whole episode: the two controllers claim themselves
        // whichever hub answers.
        self.split = match (self.split_at, self.split) {
            (Some(s), kept) if (s..s + SPLIT_ROUNDS).contains(&round) => {
                kept.or(Some((self.active, (self.active + 1) % self.k)))
            }
            _ => None,
        };
        for h in 0..self.k {
            self.names[h] = match self.split {
                Some((x, y)) if h == x || h == y => h,
                _ => self.active,
            };
        }
    }

    fn pinned(&self, round: usize) -> Option<usize> {
        during(self.pin, round)
    }

    fn drained(&self, round: usize) -> Option<usize> {
        during(self.drain, round)
    }

    /// The pin file's text: a pin in effect, else a past time while that episode lasts (and
    /// only then, so that its refusal does not keep a later pin from being read).
    fn pin_text(&self, round: usize, hubs: &[HubId], now: Timestamp) -> String {
        let minute = SignedDuration::from_secs(60);
        match (self.pinned(round), during(self.past_pin, round)) {
            (Some(h), _) => format!("{} until {}", hubs[h], now + minute),
            (None, Some(h)) => format!("{} until {}", hubs[h], now - minute),
            (None, None) => String::new(),
        }
    }

    /// Calm: no split brain, no pin or drain, the Active's hub up, every live hub naming it.
    fn calm(&self, round: usize) -> bool {
        self.split.is_none()
            && self.pinned(round).is_none()
            && self.drained(round).is_none()
            && self.up(self.active)
            && (0..self.k).all(|h| !self.up(h) || self.names[h] == self.active)
    }

    /// Hub `h`'s claim at `now`: republished when its content changed, or on the
    /// controller's timer (at random, a third of the rounds).
    fn claim(&mut self, h: usize, now: Timestamp) -> Claim {
        let content = (self.names[h], self.epochs.then_some(self.epoch));
        let republish = !self.quiet || self.rng.chance(0.3);
        let stamp = match self.stamps[h] {
            Some((c, at)) if c == content && !republish => at,
            _ => now,
        };
        self.stamps[h] = Some((content, stamp));
        claim_of(Some((content.0, content.1, stamp))).expect("a claim")
    }
}

/// The hub of an episode of 60 rounds from its first, while it lasts.
fn during(episode: Option<(usize, usize)>, round: usize) -> Option<usize> {
    episode
        .filter(|(at, _)| (*at..*at + 60).contains(&round))
        .map(|(_, h)| h)
}

/// What the disk holds: the last decision written.
struct Disk(Option<Handoff>);

/// One world; the number of switches the watches vouched for in it.
fn run(seed: u64, bent: Bent, verbose: bool) -> Result<u64, String> {
    let fail = |round: usize, what: String| {
        Err(format!(
            "seed {seed} failed at round {round}: {what}; replay with HUB_SIM_SEED={seed}"
        ))
    };
    let base = Instant::now();
    let mut world = World::new(seed, base);
    let k = world.k;
    let hubs = ids(k);
    let span = Duration::from_secs(2); // N - 1 = 2 confirm intervals of 1 s
    let mut vouched_switches = 0;
    let t0 = Timestamp::from_second(1_800_000_000).expect("a time");
    let mut core = core(k, bent, base);
    let mut disk = Disk(None);
    let mut generation = 0;
    // Per round of this sidecar's life: the hubs a read named, and those that answered.
    let mut named: Vec<Vec<usize>> = Vec::new();
    let mut answered: Vec<Vec<usize>> = Vec::new();
    let mut life_start = 0;
    let mut restarted = false;
    let mut calm_since: Option<(usize, (usize, u64))> = None;
    let mut split_switches: Vec<usize> = Vec::new();

    for round in 0..ROUNDS {
        let now = t0 + SignedDuration::from_secs((round as u64 * TICK.as_secs()) as i64);
        let at = base + TICK * round as u32;
        world.clock = at;
        world.step(round);
        if round > 0 && world.rng.chance(world.restarts) {
            // The sidecar restarts: a new core, resumed from the disk.
            core = self::core(k, bent, at);
            let earlier = match (&disk.0, bent) {
                (_, Bent::ForgetsOnRestart) | (None, _) => Earlier::Nothing,
                (Some(h), Bent::ForgetsSilence) => Earlier::Decision(Box::new(Handoff {
                    silent_since: None,
                    ..h.clone()
                })),
                (Some(h), _) => Earlier::Decision(Box::new(h.clone())),
            };
            core.resume(earlier);
            // A new process's watches list afresh: what they follow starts now.
            for o in world.objects.iter_mut() {
                o.tracked = o.tracked.take().map(|(version, key, _)| (version, key, at));
            }
            life_start = round;
            if verbose {
                println!(
                    "round {round:>3} the sidecar restarts; on disk: {:?}",
                    disk.0.as_ref().map(|h| (h.hub, h.reason, h.generation))
                );
            }
            restarted = disk.0.is_some();
            named.clear();
            answered.clear();
        }
        let worker = disk
            .0
            .as_ref()
            .map(|h| hubs.iter().position(|x| *x == h.hub).unwrap_or(0));
        let pin_text = world.pin_text(round, &hubs, now);
        let drain_text = world.drained(round).map_or(String::new(), |h| {
            format!("{} until {}", hubs[h], now + SignedDuration::from_secs(60))
        });
        core.overrides_read(
            now,
            vec![(Kind::Pin, Ok(pin_text)), (Kind::Drain, Ok(drain_text))],
        );

        let mut probes = Vec::new();
        let mut shown = Vec::new();
        let (mut named_now, mut answered_now) = (Vec::new(), Vec::new());
        for (h, hub) in hubs.iter().copied().enumerate() {
            let verdict = if world.up(h) {
                let claim = world.claim(h, now);
                // A dead watch shows nothing.
                if world.objects[h].dead == 0 {
                    world.shown[h] += 1;
                    shown.push((hub, world.shown[h], claim.clone(), now));
                }
                answered_now.push(h);
                let key = claim.last_updated.map(|t| (world.names[h], claim.epoch, t));
                if world.objects[h].key != key || world.objects[h].since.is_none() {
                    world.objects[h].write(key, at - Duration::from_secs(1));
                }
                // The worker erases the claim on its hub right after each republish.
                if Some(h) == worker && !world.rng.chance(0.2) {
                    world.objects[h].write(None, at - Duration::from_millis(500));
                    Verdict::NoClaim
                } else {
                    named_now.push(world.names[h]);
                    Verdict::Claim(claim)
                }
            } else {
                Verdict::Error(ProbeError::new(ErrorReason::Connect, "connection refused"))
            };
            if let Some(restores) = world.restores.as_mut() {
                if restores.chance(0.5) {
                    world.objects[h].restore();
                }
            }
            let read = world.objects[h].version.to_string();
            probes.push(Probe {
                hub: hubs[h],
                resource_version: verdict.answered().then_some(read),
                verdict,
                latency: Duration::from_millis(2),
            });
        }
        let watched: Vec<(HubId, Watched)> = hubs
            .iter()
            .zip(&world.objects)
            .zip(&probes)
            .filter_map(|((hub, o), p)| {
                if o.dead > 0 {
                    return None;
                }
                let (version, key, since) = o.tracked?;
                let read = match &p.verdict {
                    Verdict::Claim(c) => Some(c.clone()),
                    _ => None,
                };
                Some((
                    *hub,
                    match bent {
                        Bent::VouchesBlind => Watched {
                            resource_version: p.resource_version.clone()?,
                            claim: read,
                            held_for: Duration::from_secs(3600),
                        },
                        Bent::TrustsVersionAlone => Watched {
                            resource_version: version.to_string(),
                            claim: read,
                            held_for: at.saturating_duration_since(since),
                        },
                        _ => Watched {
                            resource_version: version.to_string(),
                            claim: claim_of(key),
                            held_for: at.saturating_duration_since(since),
                        },
                    },
                ))
            })
            .collect();
        // What stood for the span, in truth: every hub's claim, on all but lastUpdated.
        let stood = world
            .objects
            .iter()
            .all(|o| o.since.is_some_and(|s| s + span <= at));
        named.push(named_now.clone());
        answered.push(answered_now);
        let vouched_before = core.metrics.switches_vouched.get();
        core.round(now, &probes, &shown, &watched, false);
        let vouched = core.metrics.switches_vouched.get() > vouched_before;
        vouched_switches += u64::from(vouched);
        let mut writes = Vec::new();
        while let Some(write) = core.poll_write(now) {
            let ok = !world.rng.chance(0.03);
            if ok {
                writes.push(write.handoff.clone());
            }
            core.written(
                write,
                if ok { Ok(()) } else { Err("disk full".into()) },
                now,
            );
        }
        core.round_done(at, at, None, false);

        for h in writes {
            let Some(i) = hubs.iter().position(|x| *x == h.hub) else {
                return fail(
                    round,
                    format!("a decision for {} is no configured hub", h.hub),
                );
            };
            if h.endpoint != EP[i] {
                return fail(
                    round,
                    format!("{} written with the endpoint {}", h.hub, h.endpoint),
                );
            }
            let new = disk.0.as_ref().is_none_or(|d| d.generation != h.generation);
            if restarted && new {
                restarted = false;
                let on = disk.0.as_ref().map(|d| d.hub);
                // Resumed, or, when that write failed, a switch away from the hub on disk,
                // confirmed in this process (checked below like any switch).
                let resumed = h.reason == Reason::Resumed && Some(h.hub) == on;
                let switched = h.reason == Reason::Switch && Some(h.hub) != on;
                if !(resumed || switched) {
                    return fail(round, format!("the restarted sidecar's first decision is {} {:?}, not the resumed {on:?}", h.hub, h.reason));
                }
            }
            if new && h.generation != generation + 1 {
                return fail(
                    round,
                    format!("generation {} after {generation}", h.generation),
                );
            }
            if new && h.reason == Reason::Switch {
                let life = &named[..];
                if life.len() < N && !vouched {
                    return fail(
                        round,
                        format!(
                            "a switch to {} {} rounds after the sidecar started",
                            h.hub,
                            life.len()
                        ),
                    );
                }
                // A pin moves the worker to its hub once it answers; a drain moves it off
                // the drained hub to the winner among the others, or the first that answers.
                let pinned =
                    world.pinned(round) == Some(i) || world.drained(round).is_some_and(|d| d != i);
                // A switch the watches vouched for: every hub's claim stood for the span
                // in truth, and this round's reads named the hub.
                if vouched && !(stood && named_now.contains(&i)) {
                    return fail(
                        round,
                        format!(
                            "a switch to {} vouched for by the watches, but a claim changed within the span",
                            h.hub
                        ),
                    );
                }
                for r in (life.len().saturating_sub(N)..life.len()).filter(|_| !vouched) {
                    if !(named[r].contains(&i) || pinned && answered[r].contains(&i)) {
                        return fail(
                            round,
                            format!(
                                "a switch to {} without {N} rounds naming it (round {} did not)",
                                h.hub,
                                life_start + r
                            ),
                        );
                    }
                }
                // A pin's move is the operator's, not the split brain's; a move off a hub that
                // does not answer is a failover.
                let from_live = worker.is_some_and(|w| answered[answered.len() - 1].contains(&w));
                if world.split.is_some() && h.steered_by.is_none() && from_live {
                    if let Some(last) = split_switches.last().filter(|l| {
                        (round - **l) * (TICK.as_secs() as usize) < WINDOW.as_secs() as usize
                    }) {
                        return fail(
                            round,
                            format!(
                                "two switches in one split brain, at rounds {last} and {round}"
                            ),
                        );
                    }
                    split_switches.push(round);
                }
            }
            if new
                && h.reason == Reason::Default
                && (round as u64) * TICK.as_secs() < DEFAULT_AFTER.as_secs()
            {
                return fail(
                    round,
                    format!(
                        "the primary by default from silence at {}s",
                        round as u64 * TICK.as_secs()
                    ),
                );
            }
            // Decided in this round, or in an earlier one whose write failed.
            if new && h.reason == Reason::Startup && !named.iter().any(|r| r.contains(&i)) {
                return fail(
                    round,
                    format!("a first decision for {}, which no read named", h.hub),
                );
            }
            if new {
                generation = h.generation;
            }
            disk.0 = Some(h);
        }

        // Calm since the Active last changed, across sidecar restarts: a restarted sidecar
        // counts the dead hub's silence from the handoff's silentSince (rule 10).
        let leader = (world.active, world.epoch);
        calm_since = match calm_since {
            Some((since, was)) if world.calm(round) && was == leader => Some((since, was)),
            _ if world.calm(round) => Some((round, leader)),
            _ => None,
        };
        let on = disk.0.as_ref().map(|d| d.hub);
        if let Some(since) = calm_since
            .map(|(since, _)| since)
            .filter(|s| round - s >= CALM)
        {
            if on != Some(hubs[world.active]) {
                return fail(
                    round,
                    format!(
                        "calm since round {since}, the worker is on {on:?}, not the Active {}",
                        hubs[world.active]
                    ),
                );
            }
        }
        if core.footprint() > k {
            return fail(
                round,
                format!("the core keeps {} entries for {k} hubs", core.footprint()),
            );
        }
        if verbose {
            let held = core
                .view
                .borrow()
                .held
                .as_ref()
                .map(|h| format!("{} {}: {}", h.candidate, h.reason, h.why));
            let pending = core
                .view
                .borrow()
                .pending
                .as_ref()
                .map(|p| (p.candidate.hub, p.count));
            println!("round {round:>3} t={:>4}s active={} epoch={:?} split={:?} down={:?} pin={:?} worker={on:?} pending={pending:?} held={held:?}", round as u64 * TICK.as_secs(), hubs[world.active], world.epochs.then_some(world.epoch), world.split, world.down, world.pinned(round));
        }
    }
    Ok(vouched_switches)
}

pub(super) fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("HUB_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("HUB_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    (0..n).collect()
}

#[test]
fn the_whole_follower_holds_every_invariant_in_every_world() {
    let verbose = std::env::var("HUB_SIM_SEED").is_ok();
    let runs: Vec<Result<u64, String>> = seeds()
        .into_iter()
        .map(|s| run(s, Bent::None, verbose))
        .collect();
    let failures: Vec<&String> = runs.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{} seeds failed; first: {}",
        failures.len(),
        failures[0]
    );
    // The watches' path is taken, not only the N reads'.
    let vouched: u64 = runs.iter().filter_map(|r| r.as_ref().ok()).sum();
    if runs.len() >= 100 {
        assert!(
            vouched > 0,
            "no switch in {} worlds was vouched for",
            runs.len()
        );
    }
}

/// `bent` must fail at least one seed, with `because` in its message.
fn caught(bent: Bent, because: &str) {
    let mut failures = (0..1000).filter_map(|s| run(s, bent, false).err());
    let first = failures.next();
    assert!(
        first.as_deref().is_some_and(|f| f.contains(because)),
        "{bent:?} went unnoticed in 1000 seeds, or failed otherwise first: {first:?}"
    );
}

#[test]
fn a_follower_without_the_split_brain_window_is_caught_flapping() {
    caught(Bent::NoWindow, "two switches in one split brain");
}

#[test]
fn a_follower_whose_dead_hub_holds_it_is_caught_stranded() {
    caught(Bent::NoDeadHubBound, "not the Active");
}

#[test]
fn a_follower_that_decides_from_silence_is_caught() {
    caught(Bent::DefaultAtOnce, "by default from silence");
}

#[test]
fn a_follower_that_forgets_a_dead_hubs_silence_on_restart_is_caught_stranded() {
    caught(Bent::ForgetsSilence, "not the Active");
}

#[test]
fn a_follower_whose_watches_vouch_blind_is_caught() {
    caught(Bent::VouchesBlind, "a claim changed within the span");
}

#[test]
fn a_follower_that_trusts_a_reissued_resource_version_is_caught() {
    caught(Bent::TrustsVersionAlone, "a claim changed within the span");
}

#[test]
fn a_follower_that_forgets_on_restart_is_caught() {
    caught(
        Bent::ForgetsOnRestart,
        "the restarted sidecar's first decision",
    );
}
