//! Pin and drain: an operator's word on which hub the worker follows, until a time. Pure: the
//! follower hands in the text of each file (`--override-dir`, the pod's annotations through a
//! downward-API volume) and the clock's time, and gets back what changed.
//!
//! - A value is `HUB until RFC3339`: a configured hub's name and an absolute time, so that it
//!   means the same after a sidecar restart. An empty file is no value.
//! - A value that cannot be taken is refused, visibly, and never ends one in effect: the last
//!   good value stays until its own time, or until the file is emptied. A typo while editing
//!   the annotation cannot move the worker.
//! - A value whose time has already passed when it is read is refused as `past`: a copied
//!   example, or an annotation left on after its end, is said rather than silently ignored.
//!   One that passes its time while in effect ends (expires), and is not refused when read
//!   again.
//! - A pin or drain ends by itself at its time, or when the value is removed or replaced.
//!
//! What a pin or drain does to the decision is the resolver's rule 9.

use jiff::{SignedDuration, Timestamp};

use crate::verdict::HubId;

/// How far ahead a value's time may lie: a forgotten pin still ends within a week.
pub const MAX_AHEAD: SignedDuration = SignedDuration::from_hours(7 * 24);

/// How much of a value is kept for `/status`, Events and logs.
const SHOWN: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The worker follows this hub, whatever the claims say.
    Pin,
    /// Claims naming this hub have no say; a worker on it moves off.
    Drain,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Pin, Kind::Drain];

    /// The metric label, and the name of the file in `--override-dir`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pin => "pin",
            Kind::Drain => "drain",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pin or drain in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub kind: Kind,
    pub hub: HubId,
    pub until: Timestamp,
    /// The value as it was read.
    pub value: String,
    /// When this run of the sidecar took it.
    pub since: Timestamp,
}

/// Why a value was refused: the `reason` of `/status` and of the Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not `HUB until RFC3339`.
    Malformed,
    /// The hub is not configured.
    UnknownHub,
    /// The time is more than [`MAX_AHEAD`] away.
    TooFar,
    /// A pin and a drain name the same hub; the one read later is refused.
    Conflict,
    /// The time had already passed when the value was read.
    Past,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::UnknownHub => "unknown_hub",
            Refusal::TooFar => "too_far",
            Refusal::Conflict => "conflict",
            Refusal::Past => "past",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub kind: Kind,
    pub value: String,
    pub reason: Refusal,
    /// In words, for people.
    pub why: String,
}

/// How a pin or drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its time came.
    Expired,
    /// The value was removed.
    Removed,
    /// Another value took its place.
    Replaced,
}

impl Ending {
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Expired => "expired",
            Ending::Removed => "removed",
            Ending::Replaced => "replaced",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub was: Override,
    pub how: Ending,
    pub at: Timestamp,
}

/// What a reading changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Began(Override),
    Ended(Ended),
    /// Refused; `kept` is the value that stays in effect, if any.
    Refused {
        refused: Refused,
        kept: Option<Override>,
    },
}

#[derive(Debug, Clone, Default)]
struct Slot {
    /// The last value read, trimmed: the same value read again changes nothing.
    read: String,
    active: Option<Override>,
    refused: Option<Refused>,
    ended: Option<Ended>,
}

/// The pin and the drain: what is in effect, what was refused, what ended last.
#[derive(Debug, Clone)]
pub struct Overrides {
    /// The configured hubs, in configuration order.
    hubs: Vec<HubId>,
    pin: Slot,
    drain: Slot,
}

impl Overrides {
    pub fn new(hubs: Vec<HubId>) -> Self {
        Self {
            hubs,
            pin: Slot::default(),
            drain: Slot::default(),
        }
    }

    /// `text` is what `kind`'s file holds at `now`.
    pub fn read(&mut self, kind: Kind, text: &str, now: Timestamp) -> Vec<Change> {
        let value = text.trim();
        let slot = self.slot(kind);
        // A value refused for a conflict is judged again, since the other one ends by
        // itself; any other value read again changes nothing. (One refused as too far ahead
        // stays refused: it should not take effect days later, unnoticed.)
        let again = value == slot.read;
        if again
            && !slot
                .refused
                .as_ref()
                .is_some_and(|r| r.reason == Refusal::Conflict)
        {
            return Vec::new();
        }
        self.slot_mut(kind).read = value.to_string();
        let shown = shown(value);
        if value.is_empty() {
            let slot = self.slot_mut(kind);
            slot.refused = None;
            return slot
                .active
                .take()
                .map(|was| self.end(was, Ending::Removed, now))
                .into_iter()
                .collect();
        }
        let parsed = self.judge(kind, value, now);
        if again && parsed.is_err() {
            // Still refused, and already shown.
            return Vec::new();
        }
        let (hub, until) = match parsed {
            Ok(taken) => taken,
            Err((reason, why)) => {
                let refused = Refused {
                    kind,
                    value: shown,
                    reason,
                    why,
                };
                let slot = self.slot_mut(kind);
                slot.refused = Some(refused.clone());
                return vec![Change::Refused {
                    refused,
                    kept: slot.active.clone(),
                }];
            }
        };
        let slot = self.slot_mut(kind);
        slot.refused = None;
        let mut changes: Vec<Change> = slot
            .active
            .take()
            .map(|was| self.end(was, Ending::Replaced, now))
            .into_iter()
            .collect();
        let began = Override {
            kind,
            hub,
            until,
            value: shown,
            since: now,
        };
        self.slot_mut(kind).active = Some(began.clone());
        changes.push(Change::Began(began));
        changes
    }

    /// Whether `value` for `kind` can be taken at `now`: its hub and time, or why not.
    fn judge(
        &self,
        kind: Kind,
        value: &str,
        now: Timestamp,
    ) -> Result<(HubId, Timestamp), (Refusal, String)> {
        let (hub, until) = parse(value, &self.hubs)?;
        if until <= now {
            return Err((
                Refusal::Past,
                format!("{until} has already passed on this clock ({now}); it would have no effect. Give a time ahead, or remove the annotation once a {kind} has ended"),
            ));
        }
        if until.duration_since(now) > MAX_AHEAD {
            return Err((
                Refusal::TooFar,
                format!("{until} is more than {MAX_AHEAD:#} ahead of this clock ({now}); a pin or drain lasts at most that long, so that a forgotten one still ends"),
            ));
        }
        let other = match kind {
            Kind::Pin => Kind::Drain,
            Kind::Drain => Kind::Pin,
        };
        if let Some(o) = self.slot(other).active.as_ref().filter(|o| o.hub == hub) {
            return Err((
                Refusal::Conflict,
                format!(
                    "the {hub} hub is {} already ({:?}); a hub cannot be pinned and drained at once",
                    past(other),
                    o.value
                ),
            ));
        }
        Ok((hub, until))
    }

    /// Ends what is in effect and due at `now`.
    pub fn expire(&mut self, now: Timestamp) -> Vec<Change> {
        let mut changes = Vec::new();
        for kind in Kind::ALL {
            let slot = self.slot_mut(kind);
            if let Some(was) = slot.active.take_if(|a| a.until <= now) {
                changes.push(self.end(was, Ending::Expired, now));
            }
        }
        changes
    }

    pub fn in_effect(&self, kind: Kind) -> Option<&Override> {
        self.slot(kind).active.as_ref()
    }

    pub fn refused(&self, kind: Kind) -> Option<&Refused> {
        self.slot(kind).refused.as_ref()
    }

    /// The last one of `kind` that ended in this run of the sidecar.
    pub fn ended(&self, kind: Kind) -> Option<&Ended> {
        self.slot(kind).ended.as_ref()
    }

    /// When the next one in effect ends by itself.
    pub fn next_expiry(&self) -> Option<Timestamp> {
        Kind::ALL
            .iter()
            .filter_map(|k| self.in_effect(*k).map(|o| o.until))
            .min()
    }

    fn end(&mut self, was: Override, how: Ending, at: Timestamp) -> Change {
        let ended = Ended { was, how, at };
        self.slot_mut(ended.was.kind).ended = Some(ended.clone());
        Change::Ended(ended)
    }

    fn slot(&self, kind: Kind) -> &Slot {
        match kind {
            Kind::Pin => &self.pin,
            Kind::Drain => &self.drain,
        }
    }

    fn slot_mut(&mut self, kind: Kind) -> &mut Slot {
        match kind {
            Kind::Pin => &mut self.pin,
            Kind::Drain => &mut self.drain,
        }
    }
}

/// `HUB until RFC3339` → the hub among `hubs`, and the time.
pub fn parse(value: &str, hubs: &[HubId]) -> Result<(HubId, Timestamp), (Refusal, String)> {
    let mut words = value.split_whitespace();
    let (Some(name), Some("until"), Some(time), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err((
            Refusal::Malformed,
            format!(
                "expected \"HUB until TIME\", e.g. \"secondary until 2026-12-04T18:00:00Z\", got {:?}",
                shown(value)
            ),
        ));
    };
    let until: Timestamp = time.parse().map_err(|e| {
        (
            Refusal::Malformed,
            format!(
                "{:?} is not an RFC 3339 time with an offset, e.g. 2026-12-04T18:00:00Z ({e})",
                shown(time)
            ),
        )
    })?;
    let hub = hubs.iter().find(|h| h.as_str() == name).ok_or_else(|| {
        let configured: Vec<&str> = hubs.iter().map(|h| h.as_str()).collect();
        (
            Refusal::UnknownHub,
            format!(
                "names {:?}, which is not a configured hub (configured: {})",
                shown(name),
                configured.join(", ")
            ),
        )
    })?;
    Ok((*hub, until))
}

fn past(kind: Kind) -> &'static str {
    match kind {
        Kind::Pin => "pinned",
        Kind::Drain => "drained",
    }
}

/// At most [`SHOWN`] bytes of `value`, cut at a character boundary.
fn shown(value: &str) -> String {
    if value.len() <= SHOWN {
        return value.to_string();
    }
    let mut end = SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &value[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: HubId = HubId::PRIMARY;
    const S: HubId = HubId::SECONDARY;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn value(hub: &str, secs: i64) -> String {
        format!("{hub} until {}", at(secs))
    }

    fn overrides() -> Overrides {
        Overrides::new(vec![P, S])
    }

    fn refusal(changes: &[Change]) -> Option<Refusal> {
        match changes {
            [Change::Refused { refused, .. }] => Some(refused.reason),
            _ => None,
        }
    }

    #[test]
    fn a_value_takes_effect_until_its_time() {
        let mut o = overrides();
        let changes = o.read(Kind::Drain, &format!("  {}\n", value("primary", 60)), at(0));
        assert!(matches!(&changes[..], [Change::Began(b)] if b.hub == P && b.until == at(60)));
        assert_eq!(o.in_effect(Kind::Drain).map(|d| d.hub), Some(P));
        assert_eq!(o.next_expiry(), Some(at(60)));
        assert!(o.expire(at(59)).is_empty());
        let ended = o.expire(at(60));
        assert!(
            matches!(&ended[..], [Change::Ended(e)] if e.how == Ending::Expired && e.was.hub == P)
        );
        assert!(o.in_effect(Kind::Drain).is_none());
        assert_eq!(o.ended(Kind::Drain).map(|e| e.how), Some(Ending::Expired));
    }

    #[test]
    fn the_same_value_read_again_changes_nothing_even_after_it_expired() {
        let mut o = overrides();
        let v = value("secondary", 60);
        assert_eq!(o.read(Kind::Pin, &v, at(0)).len(), 1);
        assert!(o.read(Kind::Pin, &v, at(1)).is_empty());
        assert_eq!(o.expire(at(61)).len(), 1);
        assert!(o.read(Kind::Pin, &v, at(62)).is_empty());
        assert!(o.in_effect(Kind::Pin).is_none());
    }

    #[test]
    fn removing_the_value_ends_it() {
        let mut o = overrides();
        o.read(Kind::Pin, &value("secondary", 60), at(0));
        let changes = o.read(Kind::Pin, "", at(5));
        assert!(matches!(&changes[..], [Change::Ended(e)] if e.how == Ending::Removed));
        assert!(o.read(Kind::Pin, "\n", at(6)).is_empty());
    }

    #[test]
    fn a_new_value_replaces_the_old_one() {
        let mut o = overrides();
        o.read(Kind::Pin, &value("secondary", 60), at(0));
        let changes = o.read(Kind::Pin, &value("primary", 120), at(5));
        assert!(matches!(
            &changes[..],
            [Change::Ended(e), Change::Began(b)]
                if e.how == Ending::Replaced && e.was.hub == S && b.hub == P
        ));
    }

    #[test]
    fn each_bad_value_is_refused_with_its_reason_and_the_good_one_stays() {
        let cases = [
            ("secondary", Refusal::Malformed),
            ("secondary for 2h", Refusal::Malformed),
            ("secondary until tomorrow", Refusal::Malformed),
            ("secondary until 2027-01-01T00:00:00", Refusal::Malformed),
            (
                "secondary until 2027-01-01T00:00:00Z extra",
                Refusal::Malformed,
            ),
            ("tertiary until 2027-01-01T00:00:00Z", Refusal::UnknownHub),
        ];
        for (bad, reason) in cases {
            let mut o = overrides();
            o.read(Kind::Pin, &value("secondary", 60), at(0));
            let changes = o.read(Kind::Pin, bad, at(1));
            assert_eq!(refusal(&changes), Some(reason), "{bad}");
            let Change::Refused { kept, refused } = &changes[0] else {
                unreachable!()
            };
            assert_eq!(kept.as_ref().map(|k| k.hub), Some(S), "{bad}");
            assert!(!refused.why.is_empty());
            assert_eq!(o.in_effect(Kind::Pin).map(|p| p.hub), Some(S), "{bad}");
            assert_eq!(o.refused(Kind::Pin).map(|r| r.reason), Some(reason));
        }
    }

    #[test]
    fn an_unknown_hub_is_named_with_the_configured_ones() {
        let mut o = overrides();
        let changes = o.read(Kind::Drain, &value("primry", 60), at(0));
        let [Change::Refused {
            refused,
            kept: None,
        }] = &changes[..]
        else {
            panic!("{changes:?}")
        };
        assert!(refused.why.contains("\"primry\""), "{}", refused.why);
        assert!(
            refused.why.contains("primary, secondary"),
            "{}",
            refused.why
        );
    }

    #[test]
    fn a_time_more_than_a_week_ahead_is_refused() {
        let mut o = overrides();
        let week = MAX_AHEAD.as_secs();
        assert_eq!(
            refusal(&o.read(Kind::Pin, &value("primary", week + 1), at(0))),
            Some(Refusal::TooFar)
        );
        assert!(matches!(
            &o.read(Kind::Pin, &value("primary", week), at(0))[..],
            [Change::Began(_)]
        ));
    }

    #[test]
    fn a_pin_and_a_drain_of_one_hub_conflict_and_the_later_is_refused() {
        let mut o = overrides();
        o.read(Kind::Pin, &value("secondary", 60), at(0));
        assert_eq!(
            refusal(&o.read(Kind::Drain, &value("secondary", 60), at(1))),
            Some(Refusal::Conflict)
        );
        assert!(matches!(
            &o.read(Kind::Drain, &value("primary", 60), at(2))[..],
            [Change::Began(_)]
        ));
    }

    #[test]
    fn a_conflict_refused_is_taken_once_the_other_one_ends() {
        let mut o = overrides();
        o.read(Kind::Pin, &value("secondary", 60), at(0));
        let drain = value("secondary", 600);
        assert_eq!(
            refusal(&o.read(Kind::Drain, &drain, at(1))),
            Some(Refusal::Conflict)
        );
        // Read again while the pin lasts: still refused, and said once only.
        assert!(o.read(Kind::Drain, &drain, at(2)).is_empty());
        assert_eq!(o.expire(at(60)).len(), 1);
        let changes = o.read(Kind::Drain, &drain, at(61));
        assert!(
            matches!(&changes[..], [Change::Began(b)] if b.hub == S),
            "{changes:?}"
        );
        assert!(o.refused(Kind::Drain).is_none());
    }

    #[test]
    fn a_time_too_far_ahead_stays_refused_until_the_value_changes() {
        let mut o = overrides();
        let week = MAX_AHEAD.as_secs();
        let v = value("primary", week + 10);
        assert_eq!(
            refusal(&o.read(Kind::Pin, &v, at(0))),
            Some(Refusal::TooFar)
        );
        assert!(o.read(Kind::Pin, &v, at(20)).is_empty());
        assert_eq!(
            o.refused(Kind::Pin).map(|r| r.reason),
            Some(Refusal::TooFar)
        );
        assert!(o.in_effect(Kind::Pin).is_none());
    }

    #[test]
    fn a_malformed_value_read_again_is_not_refused_again() {
        let mut o = overrides();
        assert_eq!(
            refusal(&o.read(Kind::Pin, "nonsense", at(0))),
            Some(Refusal::Malformed)
        );
        assert!(o.read(Kind::Pin, "nonsense", at(1)).is_empty());
        assert!(o.refused(Kind::Pin).is_some());
    }

    #[test]
    fn a_value_whose_time_has_passed_is_refused_and_the_one_in_effect_stays() {
        let mut o = overrides();
        o.read(Kind::Drain, &value("secondary", 60), at(0));
        let changes = o.read(Kind::Drain, &value("primary", -1), at(1));
        let [Change::Refused { refused, kept }] = &changes[..] else {
            panic!("{changes:?}")
        };
        assert_eq!(refused.reason, Refusal::Past);
        assert!(refused.why.contains("already passed"), "{}", refused.why);
        assert_eq!(kept.as_ref().map(|k| k.hub), Some(S));
        assert_eq!(o.in_effect(Kind::Drain).map(|d| d.hub), Some(S));
        assert_eq!(
            o.refused(Kind::Drain).map(|r| r.reason),
            Some(Refusal::Past)
        );
        // Said once: the same text read again changes nothing.
        assert!(o.read(Kind::Drain, &value("primary", -1), at(2)).is_empty());
    }

    #[test]
    fn a_value_that_ends_while_in_effect_is_not_refused_when_read_again() {
        let mut o = overrides();
        let pin = value("primary", 10);
        o.read(Kind::Pin, &pin, at(0));
        let ended = o.expire(at(10));
        assert!(matches!(&ended[..], [Change::Ended(e)] if e.how == Ending::Expired));
        assert!(o.read(Kind::Pin, &pin, at(11)).is_empty());
        assert!(o.refused(Kind::Pin).is_none());
    }

    #[test]
    fn a_refusal_is_cleared_by_the_next_good_value_or_by_removal() {
        let mut o = overrides();
        o.read(Kind::Pin, "nonsense", at(0));
        assert!(o.refused(Kind::Pin).is_some());
        o.read(Kind::Pin, "", at(1));
        assert!(o.refused(Kind::Pin).is_none());
        o.read(Kind::Pin, "nonsense", at(2));
        o.read(Kind::Pin, &value("primary", 60), at(3));
        assert!(o.refused(Kind::Pin).is_none());
        assert!(o.in_effect(Kind::Pin).is_some());
    }

    #[test]
    fn a_long_value_is_cut_for_showing() {
        let mut o = overrides();
        let long = "é".repeat(1000);
        let changes = o.read(Kind::Pin, &long, at(0));
        let [Change::Refused { refused, .. }] = &changes[..] else {
            panic!()
        };
        assert!(refused.value.len() <= SHOWN + '…'.len_utf8());
        assert!(refused.why.len() < 400, "{}", refused.why);
    }
}
