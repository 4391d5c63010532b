//! The operator's pin and drain in the loop: reading `--override-dir`, and what a change
//! leaves behind: a log line, the gauges, an Event and `/status`. What a value means is
//! `overrides`; what it does to the decision is the resolver's rule 9.

use std::io::Read;
use std::path::Path;

use jiff::Timestamp;

use super::core::Core;
use crate::events::Fact;
use crate::handoff::SteeredBy;
use crate::metrics::unix_seconds;
use crate::overrides::{Change, Kind};
use crate::resolver::Steer;
use crate::state::OverridesView;

/// The most of a file that is read: a value is one short line.
const MAX_READ: u64 = 4096;

/// Each kind's file in `dir`: its text, empty when the file is missing, or why it cannot be
/// read.
pub(super) fn read_files(dir: &Path) -> Vec<(Kind, Result<String, String>)> {
    Kind::ALL
        .iter()
        .map(|kind| {
            let path = dir.join(kind.as_str());
            let mut bytes = Vec::new();
            let text = match std::fs::File::open(&path)
                .and_then(|f| f.take(MAX_READ).read_to_end(&mut bytes))
            {
                Ok(_) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
                Err(e) => Err(format!("{}: {e}", path.display())),
            };
            (*kind, text)
        })
        .collect()
}

impl Core {
    /// What the pin and drain files hold now (`read_files`), and what is due to end. `true`
    /// when a pin or drain began or ended, so that the loop reads the hubs now rather than at
    /// the next tick.
    pub(super) fn overrides_read(
        &mut self,
        now: Timestamp,
        files: Vec<(Kind, Result<String, String>)>,
    ) -> bool {
        let mut changes = self.overrides.expire(now);
        for (kind, text) in files {
            match text {
                Ok(text) => {
                    self.override_unreadable.remove(&kind);
                    changes.extend(self.overrides.read(kind, &text, now));
                }
                Err(e) => {
                    // What is in effect stays: an unreadable file is no new word.
                    if self.override_unreadable.get(&kind) != Some(&e) {
                        tracing::warn!(kind = %kind, error = %e, "cannot read the file; what is in effect stays");
                        self.override_unreadable.insert(kind, e);
                    }
                }
            }
        }
        self.note_overrides(changes)
    }

    /// Ends what is due at `now`, at the start of a round: a round that read the hubs past a
    /// pin's or drain's time never decides by it.
    pub(super) fn expire_overrides(&mut self, now: Timestamp) {
        let changes = self.overrides.expire(now);
        self.note_overrides(changes);
    }

    /// `true` when a pin or drain began or ended.
    fn note_overrides(&mut self, changes: Vec<Change>) -> bool {
        if changes.is_empty() {
            return false;
        }
        let moved = changes
            .iter()
            .any(|c| matches!(c, Change::Began(_) | Change::Ended(_)));
        for change in changes {
            self.note_override(change);
        }
        self.show_overrides();
        moved
    }

    /// The pin and drain in effect, for the resolver.
    pub(super) fn steer(&self) -> Steer {
        Steer {
            pin: self.overrides.in_effect(Kind::Pin).map(|o| o.hub),
            drain: self.overrides.in_effect(Kind::Drain).map(|o| o.hub),
        }
    }

    /// When the loop must wake for the next pin or drain to end by itself: `now` and `at`
    /// are the same moment on the two clocks.
    pub(super) fn next_expiry(
        &self,
        now: Timestamp,
        at: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        let until = self.overrides.next_expiry()?;
        let left = until.duration_since(now);
        // A little after, so that the clock has passed it when the loop looks.
        let left = std::time::Duration::try_from(left).unwrap_or_default()
            + std::time::Duration::from_millis(20);
        Some(at + left)
    }

    /// The pin or drain of `kind` in effect, as the handoff records a decision it made.
    pub(super) fn steered_by(&self, kind: Kind) -> Option<SteeredBy> {
        self.overrides.in_effect(kind).map(|o| SteeredBy {
            kind: kind.as_str().to_string(),
            hub: o.hub.as_str().to_string(),
            until: o.until.to_string(),
        })
    }

    fn note_override(&mut self, change: Change) {
        match change {
            Change::Began(o) => {
                tracing::info!(kind = %o.kind, hub = %o.hub, until = %o.until, "{} in effect", o.kind);
                self.events.send(Fact::Steered {
                    kind: o.kind,
                    hub: o.hub,
                    until: o.until.to_string(),
                });
            }
            Change::Ended(e) => {
                tracing::info!(kind = %e.was.kind, hub = %e.was.hub, how = e.how.as_str(), "{} ended", e.was.kind);
                self.events.send(Fact::SteeringEnded {
                    kind: e.was.kind,
                    hub: e.was.hub,
                    how: e.how.as_str(),
                });
            }
            Change::Refused { refused, kept } => {
                tracing::warn!(
                    kind = %refused.kind,
                    value = ?refused.value,
                    reason = refused.reason.as_str(),
                    why = %refused.why,
                    kept = ?kept.as_ref().map(|k| k.value.as_str()),
                    "refused the {} value", refused.kind
                );
                self.events.send(Fact::SteeringRefused {
                    kind: refused.kind,
                    value: refused.value,
                    reason: refused.reason.as_str(),
                    why: refused.why,
                    kept: kept.map(|k| k.value),
                });
            }
        }
    }

    /// The gauges and `/status` from what is in effect now.
    pub(super) fn show_overrides(&self) {
        for hub in &self.config.hubs {
            for kind in Kind::ALL {
                let until = self
                    .overrides
                    .in_effect(kind)
                    .filter(|o| o.hub == hub.id)
                    .map(|o| o.until);
                self.metrics
                    .override_until
                    .with_label_values(&[hub.id.as_str(), kind.as_str()])
                    .set(unix_seconds(until));
            }
        }
        for kind in Kind::ALL {
            self.metrics
                .override_refused
                .with_label_values(&[kind.as_str()])
                .set(i64::from(self.overrides.refused(kind).is_some()));
        }
        let view = OverridesView::of(&self.overrides);
        self.view.send_modify(|s| s.overrides = Some(view));
    }
}
