//! The recovery state of each workspace as the bus reports it (issue 15
//! point 5): `lost` and `recovering…` while the manager brings a sandbox
//! back, then `replaced` or `restarted` for a while so a user who looks
//! at the pane after the fact still sees what happened (the notice itself
//! is in Logs). The backend's listing knows nothing of this, so the pane
//! overlays it on the row's state.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::engine::events::WorkspaceState;

/// How long `replaced` / `restarted` stays on a row after the recovery.
pub(super) const SHOWN_AFTER: Duration = Duration::from_secs(60);

/// One workspace's step of a recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Lost,
    Recovering,
    /// Done at the instant; shown until [`SHOWN_AFTER`] has passed.
    Replaced(Instant),
    Restarted(Instant),
}

/// Recovery steps by workspace id.
#[derive(Debug, Default)]
pub(super) struct RecoveryMarks(HashMap<String, Step>);

impl RecoveryMarks {
    /// Takes in one workspace event of `id` published at `now`. A failed
    /// recovery, a close, an eviction or a destroy ends the mark (the
    /// row's own state then says it); leases and idling keep it.
    pub(super) fn note(&mut self, id: &str, state: &WorkspaceState, now: Instant) {
        let step = match state {
            WorkspaceState::Lost { .. } => Step::Lost,
            WorkspaceState::Recovering => Step::Recovering,
            WorkspaceState::Replaced { .. } => Step::Replaced(now),
            WorkspaceState::Restarted { .. } => Step::Restarted(now),
            WorkspaceState::Leased
            | WorkspaceState::Idle
            | WorkspaceState::Ready
            | WorkspaceState::Created { .. } => return,
            _ => {
                self.0.remove(id);
                return;
            }
        };
        self.0.insert(id.to_string(), step);
    }

    /// The word the STATE cell shows for `id` at `now`, if any.
    pub(super) fn label(&self, id: &str, now: Instant) -> Option<&'static str> {
        match self.0.get(id)? {
            Step::Lost => Some("lost"),
            Step::Recovering => Some("recovering…"),
            Step::Replaced(t) if now.duration_since(*t) < SHOWN_AFTER => Some("replaced"),
            Step::Restarted(t) if now.duration_since(*t) < SHOWN_AFTER => Some("restarted"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Health;

    #[test]
    fn a_recovery_shows_its_steps_then_fades() {
        let mut m = RecoveryMarks::default();
        let t0 = Instant::now();
        assert_eq!(m.label("w", t0), None);
        let lost = WorkspaceState::Lost {
            health: Health::Gone,
            reason: "sandbox gone: 404".into(),
        };
        m.note("w", &lost, t0);
        assert_eq!(m.label("w", t0), Some("lost"));
        assert_eq!(m.label("other", t0), None);
        m.note("w", &WorkspaceState::Recovering, t0);
        assert_eq!(m.label("w", t0), Some("recovering…"));
        let notice = "the sandbox was deleted by the service; a new one was created".into();
        m.note("w", &WorkspaceState::Replaced { notice }, t0);
        // The leases of the repeated call keep the mark.
        m.note("w", &WorkspaceState::Leased, t0);
        assert_eq!(m.label("w", t0 + Duration::from_secs(5)), Some("replaced"));
        assert_eq!(m.label("w", t0 + SHOWN_AFTER), None);
        let notice = "the container was stopped or paused outside wsbench; it was restarted".into();
        m.note("w", &WorkspaceState::Restarted { notice }, t0);
        assert_eq!(m.label("w", t0), Some("restarted"));
        // A failed recovery or a close ends it: the row's state says.
        m.note("w", &lost, t0);
        let reason = "recovering the sandbox: quota".into();
        m.note("w", &WorkspaceState::Failed { reason }, t0);
        assert_eq!(m.label("w", t0), None);
    }
}
