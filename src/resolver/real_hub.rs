//! The rule against the hub side KubeSlice's own HA controller builds (`pkg/ha`, read in its
//! source): the leader writes its claim only when the field is missing or names another hub,
//! re-checking every 30 s, with no epoch; a Standby mirrors the leader's whole status, erasures
//! included; a recovered old Active is never demoted. The worker erases the claim on the hub it
//! is on within the second. So reads see almost nothing, and the watches see each write: what
//! they show is passed in as [`Resolver::witness`] does in the follower. One round a second
//! on a virtual clock, every watch up.

use super::liveness::{t, A, B, BOUNDS, P, S};
use super::*;

/// One hub and the controller beside it.
#[derive(Debug, Clone)]
struct Hub {
    id: HubId,
    endpoint: &'static str,
    /// The API server answers.
    up: bool,
    /// The controller leads (publishes); a controller that does not lead mirrors the other
    /// hub's status, if `mirrors`.
    leads: bool,
    mirrors: bool,
    /// The controller runs at all.
    alive: bool,
    /// Its clock, ahead of true time by this much.
    skew: i64,
    /// The second of each 30 s re-check, modulo 30.
    phase: i64,
    /// `status.activeController` as stored.
    field: Option<Claim>,
    /// A controller unlike the real one: it writes its claim once, and never again when the
    /// worker erases it.
    once: bool,
    published: bool,
}

impl Hub {
    fn new(id: HubId, endpoint: &'static str, leads: bool, phase: i64) -> Self {
        Self {
            id,
            endpoint,
            up: true,
            leads,
            mirrors: !leads,
            alive: true,
            skew: 0,
            phase,
            field: None,
            once: false,
            published: false,
        }
    }

    fn own(&self, at: i64) -> Claim {
        Claim {
            endpoint: Endpoint::parse(self.endpoint).unwrap(),
            identity: Some(format!("ctrl-{}", self.id)),
            last_updated: Some(t(at + self.skew)),
            epoch: None,
        }
    }

    fn names_itself(&self) -> bool {
        self.field
            .as_ref()
            .is_some_and(|c| c.endpoint == Endpoint::parse(self.endpoint).unwrap())
    }

    fn read(&self) -> Verdict {
        match (&self.field, self.up) {
            (_, false) => Verdict::Error(ProbeError::new(ErrorReason::Timeout, "no answer")),
            (Some(c), true) => Verdict::Claim(c.clone()),
            (None, true) => Verdict::NoClaim,
        }
    }
}

/// Two hubs, a worker on the hub the resolver last decided, and the follower's resolver.
struct World {
    hubs: [Hub; 2],
    resolver: Resolver,
    at: i64,
    moves: Vec<(i64, HubId, Reason)>,
    /// Each hub's watch answers for it (the follower passes only watches that vouch).
    watching: bool,
    /// Another pod's worker, on this hub, erasing its claim too.
    old_pod: Option<HubId>,
}

impl World {
    fn new(a: Hub, b: Hub, n: u32) -> Self {
        let resolver = Resolver::new(
            vec![
                (P, Endpoint::parse(A).unwrap()),
                (S, Endpoint::parse(B).unwrap()),
            ],
            n,
        )
        .with_liveness(BOUNDS);
        Self {
            hubs: [a, b],
            resolver,
            at: 0,
            moves: Vec::new(),
            watching: true,
            old_pod: None,
        }
    }

    /// A write to hub `i`'s field, shown by its watch when it is up.
    fn write(&mut self, i: usize, field: Option<Claim>) {
        if self.hubs[i].field == field || !self.hubs[i].up {
            return;
        }
        self.hubs[i].field = field.clone();
        if let (Some(c), true) = (field, self.watching) {
            self.resolver.witness(self.hubs[i].id, &c, t(self.at));
        }
    }

    /// One second: publishers, mirrors, the worker's erasure, then a round of reads.
    fn second(&mut self) {
        let at = self.at;
        for i in 0..2 {
            let h = &self.hubs[i];
            let again = !(h.once && h.published);
            if h.alive && h.up && h.leads && at % 30 == h.phase && !h.names_itself() && again {
                let own = h.own(at);
                self.hubs[i].published = true;
                self.write(i, Some(own));
                self.mirror();
            }
        }
        for on in [self.resolver.established(), self.old_pod]
            .into_iter()
            .flatten()
        {
            let i = self.hubs.iter().position(|h| h.id == on).unwrap();
            self.write(i, None);
            self.mirror();
        }
        let verdicts = [self.hubs[0].read(), self.hubs[1].read()];
        let watched: Vec<HubId> = if self.watching {
            self.hubs.iter().filter(|h| h.up).map(|h| h.id).collect()
        } else {
            Vec::new()
        };
        self.resolver.watches_vouch_for(&watched);
        let step = self
            .resolver
            .observe(t(at), &[(P, &verdicts[0]), (S, &verdicts[1])]);
        if let Some(d) = step.decision {
            self.resolver.published();
            self.moves.push((at, d.hub, d.reason));
        }
        self.at += 1;
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

    fn run_until(&mut self, end: i64) {
        while self.at < end {
            self.second();
        }
    }

    fn on(&self) -> Option<HubId> {
        self.resolver.established()
    }

    /// A, the Active, dies with its API server at `at`; B promotes 20 s later.
    fn fail_over_at(&mut self, at: i64) {
        self.run_until(at);
        self.hubs[0].up = false;
        self.run_until(at + 20);
        self.hubs[1].mirrors = false;
        self.hubs[1].leads = true;
        self.hubs[1].phase = (at + 20) % 30;
    }
}

/// A leads, B mirrors it; the worker starts on A.
fn steady() -> World {
    World::new(Hub::new(P, A, true, 0), Hub::new(S, B, false, 7), 3)
}

#[test]
fn the_steady_state_of_the_real_controller_never_moves_the_worker() {
    let mut w = steady();
    w.run_until(1200);
    assert_eq!(w.moves, vec![(0, P, Reason::Startup)]);
}

#[test]
fn a_failover_of_the_real_controller_is_followed_once() {
    let mut w = steady();
    w.fail_over_at(100);
    w.run_until(1200);
    assert_eq!(w.moves.len(), 2, "{:?}", w.moves);
    let (at, hub, reason) = w.moves[1];
    assert_eq!((hub, reason), (S, Reason::Switch));
    assert!(at <= 100 + 20 + 3, "moved at {at}");
}

#[test]
fn an_old_active_that_recovers_after_the_window_and_leads_beside_b_moves_the_worker_at_most_once() {
    // For every phase of the two publishers' re-checks: A back 6 minutes after the failover,
    // leading beside B for 15 minutes (never demoted).
    for phase in 0..30 {
        let mut w = steady();
        w.hubs[1].phase = phase;
        w.fail_over_at(100);
        w.run_until(120 + 360);
        assert_eq!(w.on(), Some(S));
        let before = w.moves.len();
        w.hubs[0].up = true;
        w.hubs[0].phase = (w.at + 1) % 30;
        w.run_until(480 + 900);
        let after: Vec<_> = w.moves[before..].to_vec();
        assert!(after.len() <= 1, "phase {phase}: {after:?}");
    }
}

#[test]
fn a_new_sidecar_beside_a_worker_that_erases_the_claim_starts_on_the_hub_that_claims() {
    // The old pod's worker on B erases B's claim, and A's mirror copies the erasure: both hubs
    // answer without a claim. The new sidecar's watches see B's republish, at any phase of
    // its 30 s re-check.
    for phase in 0..30 {
        let mut w = World::new(Hub::new(P, A, false, 0), Hub::new(S, B, true, phase), 3);
        w.old_pod = Some(S);
        w.run_until(60);
        assert_eq!(w.moves, vec![(phase, S, Reason::Startup)], "phase {phase}");
    }
}

#[test]
fn a_claim_the_watch_showed_long_ago_does_not_decide_a_startup() {
    let mut r = steady().resolver;
    let old = Hub::new(S, B, true, 0).own(0);
    r.witness(S, &old, t(0));
    let step = r.observe(t(181), &[(P, &Verdict::NoClaim), (S, &Verdict::NoClaim)]);
    assert_eq!(step.decision, None);
    assert!(step.undecided_until.is_some());
}

#[test]
fn an_old_active_with_its_clock_ahead_whose_controller_dies_releases_its_basis() {
    // A's clock is 90 s ahead; its controller dies at 100, its API server stays up and
    // answers without a claim (the worker erased the last). B promotes at 120 with claims
    // dated before the basis.
    let mut w = steady();
    w.hubs[0].skew = 90;
    w.run_until(100);
    w.hubs[0].alive = false;
    w.run_until(120);
    w.hubs[1].mirrors = false;
    w.hubs[1].leads = true;
    w.hubs[1].phase = 0;
    w.run_until(600);
    assert_eq!(w.moves.len(), 2, "{:?}", w.moves);
    let (at, hub, reason) = w.moves[1];
    assert_eq!((hub, reason), (S, Reason::Switch));
    // A's last claim was shown at 90: --dead-hub-after from then, plus the confirmations.
    assert!(at <= 90 + 180 + 3, "moved at {at}");
    assert!(at >= 90 + 180, "moved at {at}");
}

#[test]
fn without_a_watch_an_answer_without_a_claim_proves_nothing_and_the_basis_holds() {
    let mut w = steady();
    w.watching = false;
    // Ahead by more than the time to B's promotion: what reads saw of A at startup is
    // the basis, and B's claim is older.
    w.hubs[0].skew = 200;
    w.run_until(100);
    w.hubs[0].alive = false;
    w.run_until(120);
    w.hubs[1].mirrors = false;
    w.hubs[1].leads = true;
    w.run_until(900);
    assert_eq!(w.on(), Some(P), "{:?}", w.moves);
}

#[test]
fn an_active_that_answers_429_for_minutes_is_alive_and_an_older_self_claim_does_not_move_the_worker(
) {
    // On B since the failover; A, demoted by hand, keeps its older self-claim. B sheds load
    // with 429 for 4 minutes: every read of it is an error, and the watch is cut too.
    let mut w = steady();
    w.fail_over_at(100);
    w.run_until(200);
    assert_eq!(w.on(), Some(S));
    w.hubs[0].up = true;
    w.hubs[0].leads = false;
    w.hubs[0].mirrors = false;
    w.hubs[0].field = Some(w.hubs[0].own(50));
    let shed = Verdict::Error(ProbeError::new(ErrorReason::Server, "HTTP 429"));
    for at in 200..440 {
        let a = w.hubs[0].read();
        w.resolver.watches_vouch_for(&[P]);
        let step = w.resolver.observe(t(at), &[(P, &a), (S, &shed)]);
        assert_eq!(step.decision, None, "second {at}");
        assert_eq!(step.dead_hub, None, "second {at}");
    }
    w.at = 440;
    w.run_until(900);
    assert_eq!(w.on(), Some(S), "{:?}", w.moves);
}

#[test]
fn only_a_read_that_got_no_answer_is_silence() {
    for reason in ErrorReason::ALL {
        let v = Verdict::Error(ProbeError::new(reason, "x"));
        let silent = matches!(reason, ErrorReason::Timeout | ErrorReason::Connect);
        assert_eq!(v.heard(), !silent, "{reason:?}");
    }
    assert!(Verdict::NoClaim.heard());
}

#[test]
fn a_controller_that_never_republishes_an_erased_claim_is_not_taken_for_a_dead_one() {
    // A writes its claim once, and the worker erases it; B's controller is gone and its hub
    // keeps B's own older claim. A answers without a claim, its watch up, for 15 minutes: it
    // was never seen republishing, so that proves nothing, and the basis holds. The real
    // controller (republishing every 30 s) holds it too, by its republishes.
    for once in [true, false] {
        let mut w = steady();
        w.hubs[0].once = once;
        w.hubs[1].alive = false;
        w.hubs[1].field = Some(w.hubs[1].own(-60));
        w.run_until(900);
        assert_eq!(w.moves, vec![(0, P, Reason::Startup)], "once: {once}");
    }
}
