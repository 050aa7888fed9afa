//! Which process suspends a shared sandbox (issue 15): a manager closes
//! (suspends, pauses, stops) a workspace when it shuts down (the TUI at
//! quit), when it evicts it idle, and when the workspace failed to start
//! (a one-shot `wsbench exec` too; one-shots do not shut their manager
//! down, so this is their only suspend). Without this it would do so
//! while other wsbench processes (the TUI, `mcp serve`, one-shots) are
//! still running commands in the same sandbox: their commands die (137,
//! "502 paused").
//!
//! Rule: a process suspends at exit or eviction only when no other
//! process of this host holds the workspace. Every manager takes a shared
//! [`HostHold`] on `(backend, workspace id)` before it finds or creates
//! the sandbox and keeps it while the workspace is open; at close it
//! tries to turn the hold into the exclusive lock (`LOCK_EX | LOCK_NB`).
//! If that fails someone else holds the workspace, and the sandbox is
//! left running (said at debug level, on the bus and in the trace). If it
//! succeeds, the exclusive lock is kept until the suspend is done, so a
//! process arriving meanwhile waits for it and then resumes the sandbox.
//! An explicit close (`workspaces close`, the TUI's close) suspends
//! whatever the others do: the user asked; their next call resumes it
//! (`heal.rs`).
//!
//! Applies to every backend whose close action is
//! [`CloseAction::Suspend`] (local and bubblewrap record a close; Docker
//! stops or pauses; Kubernetes deletes the Pod; E2B, Daytona and
//! OpenSandbox pause or stop). Limits: processes on other hosts are not
//! seen (the lock is a file of this host), so a sandbox shared across
//! machines can still be suspended under one of them, which then
//! resumes it on its next call. Processes of another user, with another
//! lock directory, are not seen either.

use std::time::Duration;

use super::{CloseAction, Inner};
use crate::backend::BackendError;
use crate::backend::host::lock::{HostHold, HostLock};
use crate::engine::events::Event;

/// The lock scope of workspace holds (`hold-<hash>.lock`).
pub(super) const SCOPE: &str = "hold";

/// How long a process waits for another one to finish suspending the
/// sandbox it is about to use (a Docker stop takes up to its grace
/// period, a cloud pause one request with its retries).
pub(super) const HOLD_WAIT: Duration = Duration::from_secs(120);

/// Why a workspace is being closed: only an explicit close ignores the
/// other holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CloseWhy {
    /// The user closed it (`workspaces close`, the TUI).
    Explicit,
    /// Idle past its TTL.
    Evicted,
    /// The process is shutting down (or a provisioning landed after
    /// shutdown, or the workspace failed to start).
    Exit,
}

impl Inner {
    /// The backend kind, where its sandboxes live
    /// ([`crate::backend::Provisioner::instance_key`]) and the id.
    pub(super) fn hold_key(&self, id: &str) -> String {
        let at = self.provisioner.instance_key().unwrap_or_default();
        format!("{}\0{at}\0{id}", self.kind.as_str())
    }

    /// This process's shared hold on workspace `id`, taken before its
    /// sandbox is found or created; `None` when the close action keeps
    /// the sandbox running anyway, or no lock directory can be had.
    ///
    /// Errors: another process has held the workspace exclusively (it is
    /// suspending it) for over [`HOLD_WAIT`].
    pub(super) async fn hold(&self, id: &str) -> Result<Option<HostHold>, BackendError> {
        if self.opts.close_action != CloseAction::Suspend {
            return Ok(None);
        }
        let hold = HostHold::acquire(SCOPE, &self.hold_key(id), HOLD_WAIT).await?;
        if let Some(h) = &hold {
            h.stamp();
        }
        Ok(hold)
    }

    /// When a process of this host last opened or closed workspace `id`
    /// (its hold's stamp): the last activity of backends whose provider
    /// reports none (Docker, Kubernetes, E2B, OpenSandbox), so TTL LEFT
    /// and `workspaces gc` work for workspaces no live process holds.
    /// Limit: use from other hosts is not seen.
    pub(super) fn last_used_here(&self, id: &str) -> Option<std::time::SystemTime> {
        (self.opts.close_action == CloseAction::Suspend)
            .then(|| HostHold::last_used(SCOPE, &self.hold_key(id)))
            .flatten()
    }

    /// Whether a process of this host other than this one's manager
    /// holds workspace `id` open right now (its shared hold), looked at
    /// without waiting and without stamping. False when holds are not
    /// used (close action `Keep`) or cannot be looked at.
    pub(super) async fn held_elsewhere(&self, id: &str) -> bool {
        if self.opts.close_action != CloseAction::Suspend {
            return false;
        }
        match HostHold::acquire(SCOPE, &self.hold_key(id), Duration::ZERO).await {
            Ok(Some(h)) => h.try_sole().is_none(),
            _ => false,
        }
    }

    /// The hold of a workspace id just minted (a claimed pre-warmed one):
    /// no other process can be suspending it, so no waiting.
    pub(super) fn hold_now(&self, id: &str) -> Option<HostHold> {
        (self.opts.close_action == CloseAction::Suspend)
            .then(|| HostHold::try_acquire(SCOPE, &self.hold_key(id)))
            .flatten()
    }

    /// Whether to suspend workspace `id` now that this process closes it.
    /// `Some(lock)`: suspend, keeping `lock` (the exclusive lock, when
    /// had) until done. `None`: another process of this host holds the
    /// workspace; leave the sandbox running.
    pub(super) fn may_suspend(
        &self,
        id: &str,
        why: CloseWhy,
        hold: Option<HostHold>,
    ) -> Option<Option<HostLock>> {
        let Some(hold) = hold else {
            return Some(None);
        };
        // The close is the last use: idle time counts from here.
        hold.stamp();
        match (hold.try_sole(), why) {
            (Some(sole), _) => Some(Some(sole)),
            (None, CloseWhy::Explicit) => Some(None),
            (None, _) => {
                let message = format!(
                    "not suspending workspace {id}: another wsbench process on this host still uses it"
                );
                tracing::debug!(workspace_id = id, ?why, "{message}");
                self.bus.publish(
                    id,
                    Event::Log {
                        level: "debug".into(),
                        source: "manager".into(),
                        message,
                    },
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::backend::local::LocalProvisioner;
    use crate::backend::{Provisioner, SandboxState};
    use crate::engine::events::{EventBus, Received, Subscriber};
    use crate::manager::{ManagerOptions, WorkspaceManager, isolation};

    fn manager(prov: &Arc<dyn Provisioner>) -> WorkspaceManager {
        let opts = ManagerOptions::for_provisioner(prov.as_ref());
        WorkspaceManager::new("test", prov.clone(), opts, EventBus::default())
    }

    async fn state(prov: &Arc<dyn Provisioner>, id: &str) -> SandboxState {
        prov.find(id).await.unwrap().unwrap().state
    }

    fn said_not_suspending(sub: &mut Subscriber) -> bool {
        let mut seen = false;
        while let Some(Received::Event(e)) = sub.try_recv() {
            if let crate::engine::events::Event::Log { level, message, .. } = &e.event {
                seen |= level == "debug" && message.contains("another wsbench process");
            }
        }
        seen
    }

    /// Two managers stand for two processes (a `flock` belongs to the
    /// open file, so two holds in one process conflict like two
    /// processes'): the first to exit leaves the sandbox running, the
    /// last one suspends it.
    #[tokio::test]
    async fn only_the_last_holder_suspends_at_exit() {
        let dir = tempfile::tempdir().unwrap();
        let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(dir.path()));
        let id = isolation::mint_workspace_id();
        let (a, b) = (manager(&prov), manager(&prov));
        let mut sub = a.events().subscribe();
        a.get_workspace("u", "x", "s", Some(&id)).await.unwrap();
        b.get_workspace("u", "x", "s", Some(&id)).await.unwrap();
        a.shutdown().await.unwrap();
        assert_eq!(state(&prov, &id).await, SandboxState::Running);
        assert!(said_not_suspending(&mut sub), "a debug line says why");
        b.shutdown().await.unwrap();
        assert_eq!(state(&prov, &id).await, SandboxState::Suspended);
    }

    /// An eviction respects the other holders too; an explicit close
    /// does not (the user asked).
    #[tokio::test]
    async fn eviction_leaves_a_held_sandbox_and_an_explicit_close_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(dir.path()));
        let id = isolation::mint_workspace_id();
        let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
        opts.ttl = std::time::Duration::ZERO;
        let a = WorkspaceManager::new("test", prov.clone(), opts, EventBus::default());
        let b = manager(&prov);
        a.get_workspace("u", "x", "s", Some(&id)).await.unwrap();
        b.get_workspace("u", "x", "s", Some(&id)).await.unwrap();
        assert_eq!(a.sweep().await, vec![id.clone()]);
        assert_eq!(state(&prov, &id).await, SandboxState::Running);
        // a (re-opened) closes it explicitly while b still holds it.
        a.get_workspace("u", "x", "s", Some(&id)).await.unwrap();
        assert!(a.close(&id).await.unwrap());
        assert_eq!(state(&prov, &id).await, SandboxState::Suspended);
        a.shutdown().await.unwrap();
        b.shutdown().await.unwrap();
    }
}
