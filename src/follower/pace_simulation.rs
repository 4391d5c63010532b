//! The follower's pace, simulated: its core driven as `Follower::run` drives it, woken by its
//! own timer and by the watches' news on a virtual clock, so that the pace itself decides when
//! the hubs are read. `simulation.rs` reads every round on a fixed tick, for the decisions;
//! this one is for the reads: whether news is read soon, and whether reads relax.
//!
//! The world, by seed, on two hubs A and B: both name A; B is promoted, with epochs or
//! without; A's controller dies and leaves its own claim, or is demoted and names B, or comes
//! back claiming itself at B's epoch (a split brain that a republish alone makes fresher)
//! before it is demoted. The worker erases the claim on the hub it is on, or not. Besides
//! claims, each object is written now and then for another field (the controller's
//! `clusterHealth`), which bumps its resourceVersion and changes no claim. The watches follow
//! every write, raise news for a claim change (`lastUpdated` aside), and for any change of a
//! claim the core asked them to follow closely, as `claim_watch::is_news` says: neither an
//! erasure nor a claim naming the hub the decision is on is news. The world ends quiet: for
//! 12 minutes no write, but, where the worker erases, B's controller republishing every 30 s
//! what the worker erased (as KubeSlice's own controller does).
//!
//! Invariants, each with a mutant that it catches (the tests at the end):
//! - the promotion is followed: the worker is on B within `--poll-interval` plus N confirm
//!   intervals after the world agrees on B (its first claim naming B dated after A's last
//!   claim for itself), plus `--split-brain-window` once a split brain was seen;
//! - a ripening is read: a republish that makes the old Active's claim fresher than the one
//!   the decision rests on, changing only `lastUpdated`, is read within `--poll-interval`
//!   plus the span;
//! - reads relax: in the quiet end, at most one read per `--watched-poll-interval`, and one
//!   more, the Active's republishes and the worker's erasures included.
//!
//! HUB_SIM_SEEDS=N runs N seeds (default 1000); HUB_SIM_SEED=S replays one, printing each read.
//! 10^5 seeds: `HUB_SIM_SEEDS=100000 cargo test --release --lib pace_simulation`.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

use super::core::{Core, Watched};
use super::pace::{Act, Wake};
use super::simulation::{seeds, Rng};
use crate::claim::{Claim, Endpoint};
use crate::config::Config;
use crate::handoff::Handoff;
use crate::hub::Probe;
use crate::metrics::Metrics;
use crate::state::{FollowerView, Mode};
use crate::testing::settings;
use crate::verdict::{HubId, Verdict};

const EP: [&str; 2] = ["https://10.1.80.11:6443", "https://10.1.80.12:6443"];
const HUBS: [HubId; 2] = [HubId::PRIMARY, HubId::SECONDARY];
const A: usize = 0;
const B: usize = 1;
/// The defaults: 10 s, 3 confirmations at 1 s, 2 min relaxed, a 5 min split-brain window.
const POLL: Duration = Duration::from_secs(10);
const CONFIRM: Duration = Duration::from_secs(1);
const N: u32 = 3;
const WATCHED_POLL: Duration = Duration::from_secs(120);
const WINDOW: Duration = Duration::from_secs(300);
const QUIET: Duration = Duration::from_secs(12 * 60);

/// A follower driven as the real one, or a driver bent out of shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bent {
    None,
    /// Watches that never raise news for a claim followed closely (`Closely` ignored).
    NotClosely,
    /// A loop that does not wake on news: only its timer reads.
    DeafToNews,
    /// A loop that never tells the core that its watches vouch.
    NeverVouched,
    /// Watches that raise news for every change of the claim, erasures and the decided hub's
    /// own republishes included (the rule before `is_news`).
    NewsOnEveryChange,
}

/// Whom a claim names, at which epoch, and when: none for no claim.
type Key = Option<(usize, Option<u64>, i64)>;

/// What happens in the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// This hub's controller (re)publishes whom it names now.
    Claim(usize),
    /// Another field of this hub's object.
    Other(usize),
}

#[derive(Default)]
struct Object {
    version: u64,
    key: Key,
    /// What the watch has shown: the version, the claim, since when it shows that claim
    /// whole, how many claims it has shown and when the last one, and whether it follows the
    /// claim closely.
    shown_version: u64,
    shown_key: Key,
    since: Option<Instant>,
    claims_shown: u64,
    last_claim: Key,
    claim_shown_at: Duration,
    closely: bool,
}

impl Object {
    /// Writes `key` at `at` (`t` from the world's start), while the decision is on hub
    /// `decided`; the watch shows it at once. Returns whether it raised news.
    fn write(
        &mut self,
        key: Key,
        at: Instant,
        t: Duration,
        decided: Option<usize>,
        bent: Bent,
    ) -> bool {
        self.version += 1;
        self.key = key;
        let whole = key != self.shown_key;
        let changed = key.map(|(n, e, _)| (n, e)) != self.shown_key.map(|(n, e, _)| (n, e));
        let candidate = |k: Key| k.map(|(n, e, _)| (n, e));
        let claim = match (decided, key) {
            _ if bent == Bent::NewsOnEveryChange => changed,
            (None, _) => changed,
            (Some(_), None) => false,
            // The decision's hub named again: news only if it differs from the last claim
            // shown, erasures aside.
            (Some(d), Some((whom, _, _))) if whom == d => {
                candidate(key) != candidate(self.last_claim)
            }
            (Some(_), Some(_)) => changed,
        };
        self.shown_version = self.version;
        if whole {
            self.since = Some(at);
            self.shown_key = key;
            if key.is_some() {
                self.claims_shown += 1;
                self.last_claim = key;
                self.claim_shown_at = t;
            }
        }
        claim || (whole && self.closely && bent != Bent::NotClosely)
    }
}

/// The controllers' script for one world.
struct World {
    rng: Rng,
    epochs: bool,
    erasure: bool,
    /// Whom each hub's controller names from when: `names[h]` is a list of (from, whom).
    names: [Vec<(Duration, Option<usize>)>; 2],
    promoted_at: Duration,
    /// When the old Active's claim, back at B's epoch, ripens; and when it ends.
    ripens: Option<(Duration, Duration)>,
    end: Duration,
}

impl World {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let epochs = rng.chance(0.5);
        let erasure = rng.chance(0.6);
        let promoted_at = Duration::from_secs(60 + rng.below(240) as u64);
        let mut names = [
            vec![(Duration::ZERO, Some(A))],
            vec![(Duration::ZERO, Some(A))],
        ];
        names[B].push((promoted_at, Some(B)));
        let mut ripens = None;
        let mut last = promoted_at;
        match rng.below(3) {
            // A's controller died: its claim stays, never written again.
            0 => names[A].push((promoted_at, None)),
            // Demoted: it names B a little later.
            1 => {
                last = promoted_at + Duration::from_secs(1 + rng.below(60) as u64);
                names[A].push((last, Some(B)));
            }
            // Gone, then back claiming itself at B's epoch, then demoted.
            _ => {
                names[A].push((promoted_at, None));
                let back = promoted_at + Duration::from_secs(30 + rng.below(600) as u64);
                names[A].push((back, Some(A)));
                last = back + Duration::from_secs(60 + rng.below(300) as u64);
                names[A].push((last, Some(B)));
                ripens = Some((back, last));
            }
        }
        World {
            rng,
            epochs,
            erasure,
            names,
            promoted_at,
            ripens,
            end: last + QUIET + WINDOW,
        }
    }

    /// Whom hub `h`'s controller names at `t`, if it is alive.
    fn naming(&self, h: usize, t: Duration) -> Option<usize> {
        self.names[h]
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .and_then(|(_, whom)| *whom)
    }

    /// The epoch hub `h`'s controller publishes at `t`: 4 before B's promotion, and A's
    /// until it comes back; 5 after.
    fn epoch(&self, h: usize, t: Duration) -> Option<u64> {
        let old = t < self.promoted_at || h == A && self.ripens.is_none_or(|(back, _)| t < back);
        self.epochs.then_some(if old { 4 } else { 5 })
    }

    /// Every write, in order of time: each controller republishes every 30 to 120 s while it
    /// is alive and whenever whom it names changes; other fields every 120 s.
    fn writes(&mut self) -> Vec<(Duration, Write)> {
        let mut writes = Vec::new();
        let quiet_from = self.end - QUIET - WINDOW + Duration::from_secs(1);
        for h in [A, B] {
            for (from, _) in self.names[h].clone() {
                writes.push((from, Write::Claim(h)));
            }
            let period = Duration::from_secs(30 + self.rng.below(90) as u64);
            let mut t = Duration::from_secs(self.rng.below(30) as u64);
            while t < quiet_from {
                if self.naming(h, t).is_some() {
                    writes.push((t, Write::Claim(h)));
                }
                t += period;
            }
            let mut t = Duration::from_secs(self.rng.below(120) as u64);
            while t < self.end {
                writes.push((t, Write::Other(h)));
                t += Duration::from_secs(120);
            }
        }
        // The Active's last republish: whatever the worker erased before, the world ends
        // with B's claim on B. Where the worker erases it, B's controller writes it again at
        // each re-check, every 30 s, to the end.
        writes.push((self.end - QUIET - WINDOW, Write::Claim(B)));
        if self.erasure {
            let mut t = self.end - QUIET - WINDOW + Duration::from_secs(30);
            while t < self.end {
                writes.push((t, Write::Claim(B)));
                t += Duration::from_secs(30);
            }
        }
        writes.sort_by_key(|(t, _)| *t);
        writes
    }

    fn key(&self, h: usize, t: Duration) -> Key {
        self.naming(h, t)
            .map(|whom| (whom, self.epoch(h, t), t.as_secs() as i64))
    }
}

fn core(at: Instant) -> Core {
    let args = [
        "--hub-endpoint",
        EP[A],
        "--secondary-endpoint",
        EP[B],
        "--cluster-name",
        "w1",
        "--namespace",
        "p",
    ];
    let config = Arc::new(Config::from_settings(&settings(&args)).expect("valid settings"));
    assert_eq!(
        (
            config.poll_interval,
            config.confirm_interval,
            config.confirmations
        ),
        (POLL, CONFIRM, N),
        "the simulation assumes the defaults"
    );
    assert_eq!(config.watched_poll_interval, WATCHED_POLL);
    let metrics = Metrics::new(&HUBS, "none").expect("metrics");
    let view = FollowerView::new(Mode::Follow, config.confirmations, Duration::from_secs(60));
    Core::new(config, metrics, view, at)
}

fn claim(key: Key, t0: Timestamp) -> Option<Claim> {
    key.map(|(whom, epoch, secs)| Claim {
        endpoint: Endpoint::parse(EP[whom]).expect("an endpoint"),
        identity: Some(format!("ctrl-{whom}")),
        last_updated: Some(t0 + SignedDuration::from_secs(secs)),
        epoch,
    })
}

/// One world; `Err` says which invariant failed.
fn run(seed: u64, bent: Bent, verbose: bool) -> Result<(), String> {
    let fail = |at: Duration, what: String| {
        Err(format!(
            "seed {seed} failed at {}s: {what}; replay with HUB_SIM_SEED={seed}",
            at.as_secs_f64()
        ))
    };
    let mut world = World::new(seed);
    let writes = world.writes();
    // When the world agrees on B: its first claim naming B dated after A's last claim for
    // itself (claims are dated in whole seconds, and at equal dates a tie-break decides).
    let a_last = writes
        .iter()
        .filter(|(t, w)| *w == Write::Claim(A) && world.naming(A, *t) == Some(A))
        .map(|(t, _)| t.as_secs())
        .max()
        .unwrap_or(0);
    let agreed_at = writes
        .iter()
        .find(|(t, w)| {
            matches!(w, Write::Claim(h) if world.naming(*h, *t) == Some(B)) && t.as_secs() > a_last
        })
        .map_or(world.end, |(t, _)| *t);
    let base = Instant::now();
    let t0 = Timestamp::from_second(1_800_000_000).expect("a time");
    let span = CONFIRM * (N - 1);
    let mut core = core(base);
    let mut objects: [Object; 2] = Default::default();
    let mut disk: Option<Handoff> = None;
    let mut next = 0;
    let mut news = false;
    let mut reads: Vec<Duration> = Vec::new();
    let mut split_seen = false;
    // When a write ripened the old Active's claim, until a read sees it.
    let mut ripened: Option<Duration> = None;
    let worker_on = |disk: &Option<Handoff>| {
        disk.as_ref()
            .and_then(|h| HUBS.iter().position(|x| *x == h.hub))
    };
    // Applies every write due by `until`, and the worker's erasures after them.
    let apply = |until: Duration,
                 next: &mut usize,
                 objects: &mut [Object; 2],
                 disk: &Option<Handoff>,
                 ripened: &mut Option<Duration>,
                 news: &mut bool| {
        while let Some((t, w)) = writes.get(*next).copied().filter(|(t, _)| *t <= until) {
            *next += 1;
            let at = base + t;
            match w {
                // A controller that died writes nothing: its claim stays.
                Write::Claim(h) if world.naming(h, t).is_none() => {}
                Write::Claim(h) => {
                    let key = world.key(h, t);
                    let before = objects[h].key;
                    *news |= objects[h].write(key, at, t, worker_on(disk), bent);
                    // The old Active back at B's epoch: once the worker is on B, each of its
                    // republishes is fresher than the claim the decision rests on.
                    let ripening = h == A
                        && world.ripens.is_some_and(|(back, end)| t >= back && t < end)
                        && worker_on(disk) == Some(B)
                        && before.is_some_and(|(whom, _, _)| whom == A);
                    if ripening && ripened.is_none() {
                        *ripened = Some(t);
                    }
                    // The worker on this hub erases the claim at once.
                    if world.erasure && worker_on(disk) == Some(h) {
                        *news |= objects[h].write(None, at, t, worker_on(disk), bent);
                    }
                }
                Write::Other(h) => {
                    objects[h].version += 1;
                    objects[h].shown_version = objects[h].version;
                }
            }
        }
    };

    let mut now = Duration::ZERO;
    while now < world.end {
        let poll_at = core.poll_at().saturating_duration_since(base);
        let due = writes.get(next).map(|(t, _)| *t);
        if !news || bent == Bent::DeafToNews {
            news = false;
            match due.filter(|t| *t < poll_at) {
                Some(t) => {
                    now = now.max(t);
                    apply(now, &mut next, &mut objects, &disk, &mut ripened, &mut news);
                    continue;
                }
                None => now = now.max(poll_at),
            }
        }
        let woke = if news { Wake::News } else { Wake::Timer };
        let vouched = bent != Bent::NeverVouched;
        match core.on_wake(base + now, woke, false, vouched) {
            Act::Sleep | Act::Skip => {
                news = false;
                continue;
            }
            Act::ReadAt(at) => {
                let at = at.saturating_duration_since(base);
                apply(at, &mut next, &mut objects, &disk, &mut ripened, &mut news);
                now = now.max(at);
            }
            Act::Read => {}
        }
        // News that came meanwhile is in these reads.
        news = false;
        let at = base + now;
        let watched: Vec<(HubId, Watched)> = HUBS
            .iter()
            .zip(&objects)
            .filter(|_| vouched)
            .map(|(hub, o)| {
                (
                    *hub,
                    Watched {
                        resource_version: o.shown_version.to_string(),
                        claim: claim(o.shown_key, t0),
                        held_for: o
                            .since
                            .map_or(Duration::ZERO, |s| at.saturating_duration_since(s)),
                    },
                )
            })
            .collect();
        let probes: Vec<Probe> = HUBS
            .iter()
            .zip(&objects)
            .map(|(hub, o)| Probe {
                hub: *hub,
                verdict: claim(o.key, t0).map_or(Verdict::NoClaim, Verdict::Claim),
                latency: Duration::from_millis(2),
                resource_version: Some(o.version.to_string()),
            })
            .collect();
        let stamp_of = |t: Duration| t0 + SignedDuration::try_from(t).expect("a short run");
        // The last claim each watch showed, erased since or not.
        let shown: Vec<(HubId, u64, Claim, Timestamp)> = HUBS
            .iter()
            .zip(&objects)
            .filter_map(|(hub, o)| {
                let key = o.last_claim?;
                Some((
                    *hub,
                    o.claims_shown,
                    claim(Some(key), t0)?,
                    stamp_of(o.claim_shown_at),
                ))
            })
            .collect();
        let stamp = stamp_of(now);
        core.round(stamp, &probes, &shown, &watched, woke == Wake::News);
        while let Some(write) = core.poll_write(stamp) {
            disk = Some(write.handoff.clone());
            core.written(write, Ok(()), stamp);
        }
        core.round_done(at, at, None, vouched);
        for (hub, o) in HUBS.iter().zip(objects.iter_mut()) {
            o.closely = core.followed_closely().iter().any(|(h, _)| h == hub);
        }
        split_seen |= core.metrics.split_brain.get() > 0;
        reads.push(now);
        if verbose {
            println!(
                "{:>7.1}s {woke:?} A={:?} B={:?} worker={:?} closely={:?} relaxed={}",
                now.as_secs_f64(),
                objects[A].key,
                objects[B].key,
                worker_on(&disk),
                core.followed_closely(),
                core.view.borrow().polling_relaxed,
            );
        }
        // Every read sees each object as it is now.
        if let Some(t) = ripened.take().filter(|t| now > *t + POLL + span) {
            return fail(
                now,
                format!(
                    "the old Active's claim ripened at {}s and was first read now",
                    t.as_secs()
                ),
            );
        }
        let bound =
            agreed_at + POLL + CONFIRM * N + if split_seen { WINDOW } else { Duration::ZERO };
        if now > bound && world.ripens.is_none() && worker_on(&disk) != Some(B) {
            return fail(
                now,
                format!(
                    "B was promoted, and agreed on at {}s; the worker is on {:?}",
                    agreed_at.as_secs(),
                    worker_on(&disk)
                ),
            );
        }
    }
    // The quiet end: the last claim was written at least QUIET + WINDOW ago.
    let quiet_from = world.end - QUIET;
    let quiet_reads = reads.iter().filter(|t| **t >= quiet_from).count();
    let allowed = (QUIET.as_secs() / WATCHED_POLL.as_secs()) as usize + 1;
    if quiet_reads > allowed {
        return fail(
            world.end,
            format!(
                "{quiet_reads} reads in the quiet {} s, at most {allowed} expected",
                QUIET.as_secs()
            ),
        );
    }
    if worker_on(&disk) != Some(B) {
        return fail(
            world.end,
            format!(
                "the world ends agreeing on B; the worker is on {:?}",
                worker_on(&disk)
            ),
        );
    }
    Ok(())
}

#[test]
fn the_pace_reads_news_soon_follows_promotions_and_relaxes_in_every_world() {
    let replay = std::env::var("HUB_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let verbose = replay.is_some();
    let failures: Vec<String> = replay
        .map_or_else(seeds, |s| vec![s])
        .into_iter()
        .filter_map(|seed| run(seed, Bent::None, verbose).err())
        .take(5)
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Some world catches `bent` by the invariant whose failure says `because`.
fn caught(bent: Bent, because: &str) {
    let caught = seeds()
        .into_iter()
        .filter_map(|seed| run(seed, bent, false).err())
        .find(|why| why.contains(because));
    assert!(caught.is_some(), "no seed caught {bent:?} by {because:?}");
}

#[test]
fn watches_that_ignore_a_claim_followed_closely_are_caught_reading_its_ripening_late() {
    caught(Bent::NotClosely, "ripened");
}

#[test]
fn a_loop_deaf_to_news_is_caught_following_a_promotion_late() {
    caught(Bent::DeafToNews, "was promoted, and agreed on");
}

#[test]
fn a_loop_whose_watches_never_vouch_is_caught_reading_in_the_quiet() {
    caught(Bent::NeverVouched, "reads in the quiet");
}

#[test]
fn watches_with_news_for_every_republish_and_erasure_are_caught_reading_in_the_quiet() {
    caught(Bent::NewsOnEveryChange, "reads in the quiet");
}
