//! `wsbench workspaces gc` (issue 15 point 4): eviction without a live
//! process. A manager evicts only what it holds open; a workspace made by
//! a one-shot command or left by a TUI that quit is held by no one, so
//! nothing closes it. The sweep here works from the provider's listing
//! instead: every workspace not open in this process whose sandbox is
//! running and idle (the provider's last activity) for at least the
//! profile's TTL is closed, like an eviction: only when no other wsbench
//! process of this host holds it (`hold.rs`). It also reports what it
//! leaves alone: failed sandboxes, and suspended ones idle past the TTL
//! (they hold disk or service quota until destroyed).
//!
//! Limits: a backend that reports no last activity for a workspace gives
//! no idle time, and that workspace is never closed here; processes on
//! other hosts that use a sandbox are not seen (their next call resumes
//! it).

use std::time::Duration;

use serde::Serialize;

use super::hold::CloseWhy;
use super::{CloseAction, Inner, ManagerError, WorkspaceInfo, backend_err};
use crate::backend::BackendKind;
use crate::backend::host::lock::HostHold;
use crate::engine::events::{Event, WorkspaceState};

/// What `gc` found for one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GcKind {
    /// Running, idle past the TTL, held by no other process: closed (or,
    /// in a dry run, would be).
    Close,
    /// Running and idle past the TTL, but another wsbench process of this
    /// host holds it: left running.
    InUse,
    /// The sandbox failed: reported (`workspaces destroy` removes it).
    Failed,
    /// Suspended (a stopped container, a paused sandbox) and idle past
    /// the TTL: reported (it keeps its disk or quota until destroyed).
    Stopped,
}

/// One workspace `gc` acted on or reports.
#[derive(Debug, Clone, Serialize)]
pub struct GcFinding {
    /// Workspace id.
    pub id: String,
    /// Profile (the workspace's label, else the manager's).
    pub profile: String,
    /// Backend kind.
    pub backend: BackendKind,
    /// What was found.
    pub kind: GcKind,
    /// Why, in words ("idle 2 h 5 m, past the TTL of 1 h").
    pub reason: String,
    /// For [`GcKind::Close`] when acting: `None` closed; `Some(error)`
    /// the close failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whole seconds as `1 h 5 m`, `3 m 2 s`, `40 s`.
fn words(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s} s"),
        (0, _) => format!("{m} m {s} s"),
        _ => format!("{h} h {m} m"),
    }
}

impl Inner {
    /// The sweep; see the module doc. `act`: close what is past its TTL
    /// (otherwise only say what would be closed).
    ///
    /// Errors: the provider cannot be listed. A close that fails is
    /// reported in its finding, and the sweep goes on.
    pub(super) async fn gc(&self, act: bool) -> Result<Vec<GcFinding>, ManagerError> {
        let ttl = self.opts.ttl;
        let mut out = Vec::new();
        for w in self.list().await? {
            if w.open {
                continue;
            }
            let idle = w.idle_secs.map(Duration::from_secs_f64);
            let past = idle.filter(|d| *d >= ttl);
            let finding = |kind, reason: String| GcFinding {
                id: w.id.clone(),
                profile: w.profile.clone(),
                backend: w.backend,
                kind,
                reason,
                error: None,
            };
            match (w.state.as_str(), past) {
                ("running", Some(d)) if self.opts.close_action == CloseAction::Suspend => {
                    let reason = format!(
                        "idle {}, past the TTL of {}",
                        words(d.as_secs_f64()),
                        words(ttl.as_secs_f64())
                    );
                    out.push(self.gc_close(&w, act, finding(GcKind::Close, reason)).await);
                }
                ("failed", _) => {
                    let why = w.reason.clone().unwrap_or_else(|| "no reason given".into());
                    out.push(finding(
                        GcKind::Failed,
                        format!("the sandbox failed: {why}"),
                    ));
                }
                ("suspended", Some(d)) => out.push(finding(
                    GcKind::Stopped,
                    format!(
                        "suspended, idle {}, past the TTL of {}; `workspaces destroy` frees it",
                        words(d.as_secs_f64()),
                        words(ttl.as_secs_f64())
                    ),
                )),
                _ => {}
            }
        }
        Ok(out)
    }

    /// Closes (suspends) `w` unless another process holds it; in a dry
    /// run only checks the holders.
    async fn gc_close(&self, w: &WorkspaceInfo, act: bool, mut f: GcFinding) -> GcFinding {
        let key = self.hold_key(&w.id);
        // No waiting: a process closing it right now holds it.
        let hold = match HostHold::acquire(super::hold::SCOPE, &key, Duration::ZERO).await {
            Ok(h) => h,
            Err(_) => {
                f.kind = GcKind::InUse;
                f.reason.push_str("; another wsbench process is closing it");
                return f;
            }
        };
        let in_use = |mut f: GcFinding| {
            f.kind = GcKind::InUse;
            f.reason
                .push_str("; another wsbench process on this host holds it");
            f
        };
        if !act {
            // Only look: no stamp, no event (a dry run changes nothing,
            // not even the idle clock).
            return match hold.map(HostHold::try_sole) {
                Some(None) => in_use(f),
                _ => f,
            };
        }
        let Some(sole) = self.may_suspend(&w.id, CloseWhy::Evicted, hold) else {
            return in_use(f);
        };
        {
            match self.provisioner.suspend(&w.id).await {
                Ok(()) => self.bus.publish(
                    &w.id,
                    Event::Workspace {
                        state: WorkspaceState::Closed,
                    },
                ),
                Err(e) => f.error = Some(backend_err("suspend", &w.id, e).to_string()),
            }
        }
        drop(sole);
        f
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{GcKind, words};
    use crate::backend::local::LocalProvisioner;
    use crate::backend::{Provisioner, SandboxState};
    use crate::engine::events::EventBus;
    use crate::manager::{ManagerOptions, WorkspaceManager, isolation};

    fn manager(prov: &Arc<dyn Provisioner>) -> WorkspaceManager {
        let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
        opts.ttl = std::time::Duration::ZERO;
        WorkspaceManager::new("gc", prov.clone(), opts, EventBus::default())
    }

    /// A workspace another manager (process) holds is in use; once it is
    /// let go, the dry run says it would close it and changes nothing,
    /// and `act` closes it; closed, it is no longer a finding.
    #[tokio::test]
    async fn idle_past_the_ttl_is_closed_unless_held() {
        let dir = tempfile::tempdir().unwrap();
        let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(dir.path()));
        let id = isolation::mint_workspace_id();
        let holder = manager(&prov);
        holder
            .get_workspace("u", "a", "s", Some(&id))
            .await
            .unwrap();
        let gc = manager(&prov);
        let found = gc.gc(true).await.unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, GcKind::InUse, "{found:?}");
        assert!(found[0].reason.contains("past the TTL of 0 s"), "{found:?}");
        let state = || async { prov.find(&id).await.unwrap().unwrap().state };
        assert_eq!(state().await, SandboxState::Running);
        // The holder goes away without closing (a TUI killed).
        drop(holder);
        tokio::task::yield_now().await;
        let dry = gc.gc(false).await.unwrap();
        assert_eq!(dry[0].kind, GcKind::Close, "{dry:?}");
        assert_eq!(
            state().await,
            SandboxState::Running,
            "a dry run changes nothing"
        );
        let done = gc.gc(true).await.unwrap();
        assert_eq!((&done[0].kind, &done[0].error), (&GcKind::Close, &None));
        assert_eq!(state().await, SandboxState::Suspended);
        assert!(gc.gc(true).await.unwrap().is_empty());
    }

    #[test]
    fn spans_read_as_words() {
        assert_eq!(words(40.4), "40 s");
        assert_eq!(words(182.0), "3 m 2 s");
        assert_eq!(words(7500.0), "2 h 5 m");
        assert_eq!(words(-1.0), "0 s");
    }
}
