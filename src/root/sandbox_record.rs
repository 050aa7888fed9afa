//! Which cloud sandboxes the CLI on this machine has made, so that a
//! command given a new, empty sandbox because the old one is gone from
//! the service (expired, or deleted outside wsbench) says so instead of
//! silently working in an empty workspace.
//!
//! E2B, Daytona and OpenSandbox end sandboxes on their own clock, and the
//! manager's rule for a workspace with no sandbox is to make one; only a
//! record kept here tells "first use" from "lost". One empty file per
//! workspace id under `<data_dir>/cloud-sandboxes/<profile>/`: written
//! when a workspace of a cloud profile becomes ready, removed when wsbench
//! destroys it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::backend::BackendKind;
use crate::backend::host::sanitize_segment;
use crate::engine::events::{Event, Received, Subscriber, WorkspaceState};

/// Whether sandboxes of `kind` can vanish on the service's own clock.
pub(super) fn tracked(kind: BackendKind) -> bool {
    matches!(
        kind,
        BackendKind::E2b | BackendKind::Daytona | BackendKind::Opensandbox
    )
}

/// Follows one manager's events and keeps its profile's records.
pub(super) struct SandboxRecords {
    profile: String,
    kind: BackendKind,
    dir: PathBuf,
    sub: Mutex<Subscriber>,
}

impl SandboxRecords {
    /// Records of `profile` (backend `kind`) under `data_dir`, fed by
    /// `sub` (subscribed before the manager did anything).
    pub(super) fn new(
        data_dir: &std::path::Path,
        profile: &str,
        kind: BackendKind,
        sub: Subscriber,
    ) -> Self {
        SandboxRecords {
            profile: profile.to_string(),
            kind,
            dir: data_dir
                .join("cloud-sandboxes")
                .join(sanitize_segment(profile)),
            sub: Mutex::new(sub),
        }
    }

    fn file(&self, id: &str) -> PathBuf {
        self.dir.join(sanitize_segment(id))
    }

    /// Handles the events since the last call: a workspace made ready
    /// gets a record, a destroyed one loses it. Returns one notice per
    /// workspace that was provisioned afresh (not reattached) although a
    /// record says it had a sandbox.
    pub(super) fn drain(&self) -> Vec<String> {
        let mut sub = self.sub.lock().unwrap_or_else(|e| e.into_inner());
        // Per workspace: (provisioning seen, reattached seen).
        let mut flight: BTreeMap<String, (bool, bool)> = BTreeMap::new();
        let mut notices = Vec::new();
        while let Some(r) = sub.try_recv() {
            let Received::Event(env) = r else { continue };
            let Event::Workspace { state } = &env.event else {
                continue;
            };
            let id = env.workspace.clone();
            match state {
                WorkspaceState::Provisioning => {
                    flight.insert(id, (true, false));
                }
                WorkspaceState::Reattached => {
                    flight.entry(id).or_default().1 = true;
                }
                WorkspaceState::Ready => {
                    let fresh = flight.remove(&id) == Some((true, false));
                    let file = self.file(&id);
                    if fresh && file.exists() {
                        notices.push(format!(
                            "notice: the {} sandbox of workspace {id} (profile `{}`) is gone from the service (expired, or deleted outside wsbench): a new, empty one was created; files from the old one are lost",
                            self.kind, self.profile
                        ));
                    }
                    if let Err(e) =
                        std::fs::create_dir_all(&self.dir).and_then(|_| std::fs::write(&file, b""))
                    {
                        tracing::debug!("recording sandbox of {id}: {e}");
                    }
                }
                WorkspaceState::Destroyed => {
                    let _ = std::fs::remove_file(self.file(&id));
                }
                _ => {}
            }
        }
        notices
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EventBus;

    fn state(bus: &EventBus, id: &str, state: WorkspaceState) {
        bus.publish(id, Event::Workspace { state });
    }

    #[test]
    fn a_recorded_workspace_provisioned_afresh_is_reported_once() {
        let d = tempfile::tempdir().unwrap();
        let bus = EventBus::default();
        let rec = SandboxRecords::new(d.path(), "e2b", BackendKind::E2b, bus.subscribe());
        // First use: nothing to report, a record is kept.
        state(&bus, "w1", WorkspaceState::Provisioning);
        state(&bus, "w1", WorkspaceState::Ready);
        assert!(rec.drain().is_empty());
        // Reattached: its sandbox is still there.
        state(&bus, "w1", WorkspaceState::Provisioning);
        state(&bus, "w1", WorkspaceState::Reattached);
        state(&bus, "w1", WorkspaceState::Ready);
        assert!(rec.drain().is_empty());
        // Made again although recorded: the old sandbox is gone.
        state(&bus, "w1", WorkspaceState::Provisioning);
        state(&bus, "w1", WorkspaceState::Ready);
        let n = rec.drain();
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains("workspace w1") && n[0].contains("e2b"),
            "{n:?}"
        );
        // Destroyed by wsbench: the next one is a first use again.
        state(&bus, "w1", WorkspaceState::Destroyed);
        state(&bus, "w1", WorkspaceState::Provisioning);
        state(&bus, "w1", WorkspaceState::Ready);
        assert!(rec.drain().is_empty());
        // Another process (a new subscriber) sees the same records.
        let again = SandboxRecords::new(d.path(), "e2b", BackendKind::E2b, bus.subscribe());
        state(&bus, "w1", WorkspaceState::Provisioning);
        state(&bus, "w1", WorkspaceState::Ready);
        assert_eq!(again.drain().len(), 1);
    }
}
