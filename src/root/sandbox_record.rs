//! Which sandboxes the CLI on this machine has made, so that a command
//! given a new sandbox because the old one is gone (expired or deleted by
//! the service, a container or Pod removed outside wsbench, a workspace
//! directory removed) says so instead of silently working in an empty
//! workspace (issue 15 trial: `docker rm -f`, then `exec 'cat f'` printed
//! only `No such file`).
//!
//! The manager's rule for a workspace with no sandbox is to make one;
//! only a record kept here tells "first use" from "lost". One empty file
//! per workspace id under `<data_dir>/cloud-sandboxes/<profile>/` (the
//! name is from when only cloud profiles were tracked; kept so earlier
//! records still count): written when a workspace becomes ready, removed
//! when wsbench destroys it. Whether the files survived comes from the
//! manager's [`WorkspaceState::Created`] (a kept bind mount, volume or
//! PVC).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use blake2::digest::consts::U8;
use blake2::{Blake2b, Digest};

use crate::backend::BackendKind;
use crate::backend::host::sanitize_segment;
use crate::engine::events::{Event, Received, Subscriber, WorkspaceState};

/// What was lost, in the words of backend `kind`: the thing, and how it
/// can have gone.
fn lost_words(kind: BackendKind) -> (&'static str, &'static str) {
    use BackendKind as K;
    match kind {
        K::Local | K::Bubblewrap => ("workspace directory", "was removed (outside wsbench)"),
        K::Docker => ("container", "is gone (removed outside wsbench)"),
        K::Kubernetes => ("Pod", "is gone (deleted or evicted outside wsbench)"),
        _ => (
            "sandbox",
            "is gone from the service (expired, or deleted outside wsbench)",
        ),
    }
}

/// At most this many records are read by [`recorded`].
pub(super) const MAX_RECORDS: usize = 10_000;

/// The record file names (sanitized workspace ids) of `profile` under
/// `data_dir`, sorted, and how many more there were past
/// [`MAX_RECORDS`]. Nothing when the directory is missing.
pub(super) fn recorded(data_dir: &std::path::Path, profile: &str) -> (Vec<String>, usize) {
    let dir = data_dir
        .join("cloud-sandboxes")
        .join(sanitize_segment(profile));
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return (Vec::new(), 0);
    };
    let mut names = Vec::new();
    let mut more = 0;
    for e in rd.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue; // `sessions/`
        }
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if names.len() < MAX_RECORDS {
            names.push(name);
        } else {
            more += 1;
        }
    }
    names.sort();
    (names, more)
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
        // Per workspace: (provisioning seen, reattached seen, the new
        // sandbox held files).
        let mut flight: BTreeMap<String, (bool, bool, bool)> = BTreeMap::new();
        let mut notices = Vec::new();
        while let Some(r) = sub.try_recv() {
            let Received::Event(env) = r else { continue };
            let Event::Workspace { state } = &env.event else {
                continue;
            };
            let id = env.workspace.clone();
            match state {
                WorkspaceState::Provisioning => {
                    flight.insert(id, (true, false, false));
                }
                WorkspaceState::Reattached => {
                    flight.entry(id).or_default().1 = true;
                }
                WorkspaceState::Created { files_kept } => {
                    flight.entry(id).or_default().2 = *files_kept;
                }
                WorkspaceState::Ready => {
                    let (provisioned, reattached, kept) = flight.remove(&id).unwrap_or_default();
                    let file = self.file(&id);
                    if provisioned && !reattached && file.exists() {
                        let (thing, gone) = lost_words(self.kind);
                        let (new, files) = if kept {
                            ("a new one was created", "files kept")
                        } else {
                            (
                                "a new, empty one was created",
                                "files from the old one are lost",
                            )
                        };
                        notices.push(format!(
                            "notice: the {} {thing} of workspace {id} (profile `{}`) {gone}: {new}; {files}",
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

    /// Under per_session isolation: records that (`user`, `agent`,
    /// `session`) now uses workspace `id`, and returns a notice when the
    /// session used another workspace before whose sandbox this machine
    /// recorded and wsbench did not destroy. per_session finds a
    /// session's workspace by its labels on the service, so a session
    /// whose sandbox vanished silently gets a new id (and an empty
    /// sandbox); this says so, like [`SandboxRecords::drain`] does for a
    /// recorded id made afresh.
    ///
    /// The binding is one file per session under `sessions/`, named by
    /// BLAKE2b-64 of the three names and holding the id, written through
    /// a temp file and a rename (a reader never sees half an id). Failures
    /// to read or write it only lose the notice (logged at debug level).
    pub(super) fn session_moved(
        &self,
        user: &str,
        agent: &str,
        session: &str,
        id: &str,
    ) -> Option<String> {
        let dir = self.dir.join("sessions");
        let key = format!("{user}\0{agent}\0{session}");
        let name = hex::encode(Blake2b::<U8>::digest(key.as_bytes()));
        let file = dir.join(&name);
        // Bounded: an id is at most 128 bytes; a bigger file is not ours.
        let before = std::fs::read(&file)
            .ok()
            .filter(|b| b.len() <= 128)
            .and_then(|b| String::from_utf8(b).ok());
        if before.as_deref() == Some(id) {
            return None;
        }
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        let written = std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::write(&tmp, id.as_bytes()))
            .and_then(|_| std::fs::rename(&tmp, &file));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!("recording the workspace of session {session}: {e}");
        }
        let old = before?;
        // No record of the old sandbox: wsbench destroyed it (or never
        // saw it made): nothing was lost behind the user's back.
        let record = self.file(&old);
        if !record.exists() {
            return None;
        }
        let _ = std::fs::remove_file(record);
        let (thing, gone) = lost_words(self.kind);
        Some(format!(
            "notice: the {} {thing} of session `{session}` (workspace {old}, profile `{}`) {gone}: the session now uses a new, empty workspace {id}; files from the old one are lost",
            self.kind, self.profile
        ))
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

    /// Docker (and every backend): the words name the container, and a
    /// bind mount that outlived it keeps the files.
    #[test]
    fn a_lost_container_is_reported_with_whether_files_were_kept() {
        let d = tempfile::tempdir().unwrap();
        let bus = EventBus::default();
        let rec = SandboxRecords::new(d.path(), "dk", BackendKind::Docker, bus.subscribe());
        let made = |files_kept: bool| {
            state(&bus, "w1", WorkspaceState::Provisioning);
            state(&bus, "w1", WorkspaceState::Created { files_kept });
            state(&bus, "w1", WorkspaceState::Ready);
            rec.drain()
        };
        assert!(made(false).is_empty(), "first use");
        assert_eq!(
            made(false),
            vec![
                "notice: the docker container of workspace w1 (profile `dk`) is gone (removed outside wsbench): a new, empty one was created; files from the old one are lost"
            ]
        );
        assert_eq!(
            made(true),
            vec![
                "notice: the docker container of workspace w1 (profile `dk`) is gone (removed outside wsbench): a new one was created; files kept"
            ]
        );
        // A recovery inside a long-lived process (no provisioning) is
        // said by the manager itself, not here.
        state(&bus, "w1", WorkspaceState::Created { files_kept: false });
        state(&bus, "w1", WorkspaceState::Ready);
        assert!(rec.drain().is_empty());
    }

    #[test]
    fn a_session_moved_to_a_new_workspace_is_reported_once() {
        let d = tempfile::tempdir().unwrap();
        let bus = EventBus::default();
        let rec = SandboxRecords::new(d.path(), "e2b", BackendKind::E2b, bus.subscribe());
        let made = |id: &str| {
            state(&bus, id, WorkspaceState::Provisioning);
            state(&bus, id, WorkspaceState::Ready);
            rec.drain()
        };
        // First use of the session.
        assert!(made("w1").is_empty());
        assert_eq!(rec.session_moved("u", "a", "s1", "w1"), None);
        assert_eq!(rec.session_moved("u", "a", "s1", "w1"), None);
        // Another session is another binding.
        assert!(made("w9").is_empty());
        assert_eq!(rec.session_moved("u", "a", "s2", "w9"), None);
        // The service lost w1: the session got w2, once said.
        assert!(made("w2").is_empty());
        let n = rec.session_moved("u", "a", "s1", "w2").unwrap();
        assert!(
            n.contains("session `s1`")
                && n.contains("workspace w1")
                && n.contains("new, empty workspace w2"),
            "{n}"
        );
        assert_eq!(rec.session_moved("u", "a", "s1", "w2"), None);
        // Destroyed by wsbench: the next workspace is no loss.
        state(&bus, "w2", WorkspaceState::Destroyed);
        assert!(rec.drain().is_empty());
        assert!(made("w3").is_empty());
        assert_eq!(rec.session_moved("u", "a", "s1", "w3"), None);
    }
}
