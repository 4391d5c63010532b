//! When to act on a switch (pure). A fleet of workers must not reconnect to a newly promoted hub
//! at the same instant (jitter), and flapping must not turn into a restart per flap, which would
//! build up kubelet's back-off (cooldown: at most one restart per window, coalesced to its end).

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Pacer {
    jitter: Duration,
    cooldown: Duration,
    last_action: Option<Instant>,
}

/// Why an action waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Wait {
    Jitter,
    Cooldown,
}

impl Pacer {
    pub fn new(jitter: Duration, cooldown: Duration) -> Self {
        Self {
            jitter,
            cooldown,
            last_action: None,
        }
    }

    /// The moment to act on a switch seen at `now`. `unit` in [0, 1) picks the jitter; it is an
    /// argument so that this stays deterministic under test.
    pub fn schedule(&self, now: Instant, unit: f64) -> (Instant, Wait) {
        let jittered = now + self.jitter.mul_f64(unit.clamp(0.0, 1.0));
        match self.last_action.map(|t| t + self.cooldown) {
            Some(cool) if cool > jittered => (cool, Wait::Cooldown),
            _ => (jittered, Wait::Jitter),
        }
    }

    pub fn acted(&mut self, at: Instant) {
        self.last_action = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_first_action_waits_only_for_its_jitter() {
        let p = Pacer::new(5 * S, 60 * S);
        let now = Instant::now();
        assert_eq!(p.schedule(now, 0.0), (now, Wait::Jitter));
        assert_eq!(
            p.schedule(now, 0.5),
            (now + 2500 * Duration::from_millis(1), Wait::Jitter)
        );
        assert!(p.schedule(now, 0.999_999).0 < now + 5 * S);
    }

    #[test]
    fn a_switch_inside_the_cooldown_waits_for_its_end() {
        let mut p = Pacer::new(5 * S, 60 * S);
        let t0 = Instant::now();
        p.acted(t0);
        assert_eq!(p.schedule(t0 + 10 * S, 0.2), (t0 + 60 * S, Wait::Cooldown));
        // Past the cooldown only the jitter counts.
        assert_eq!(p.schedule(t0 + 70 * S, 0.0), (t0 + 70 * S, Wait::Jitter));
    }

    #[test]
    fn jitter_that_ends_after_the_cooldown_wins() {
        let mut p = Pacer::new(5 * S, 60 * S);
        let t0 = Instant::now();
        p.acted(t0);
        assert_eq!(p.schedule(t0 + 58 * S, 0.8), (t0 + 62 * S, Wait::Jitter));
    }

    #[test]
    fn zero_jitter_and_cooldown_act_at_once() {
        let mut p = Pacer::new(Duration::ZERO, Duration::ZERO);
        let t0 = Instant::now();
        p.acted(t0);
        assert_eq!(p.schedule(t0, 0.7), (t0, Wait::Jitter));
    }
}
