//! Workspace and manager lifecycle: the lease on the open workspace,
//! switching workspaces, retiring a manager `:profile` replaced, and the
//! file watch that follows the open workspace.

use std::sync::Arc;

use super::App;
use crate::engine::Workspace;
use crate::tui::action::{AppMsg, Effect, Level, LogLine};
use crate::tui::panes;

impl App {
    /// A lease on the open workspace from the current manager (`None`
    /// when it has no such workspace open, as with `--workdir`).
    pub(super) fn lease_open_workspace(&self) -> Option<crate::manager::Lease> {
        let m = self.cx.manager.as_ref()?;
        m.lease(self.cx.ws.id())
    }

    /// Deals with a manager `:profile` replaced: one that owns the open
    /// workspace keeps it (and its lease, sweeper and keep-alive) until
    /// the app leaves it, and closes its other workspaces now; any other
    /// is shut down now (leases released, tasks stopped, workspaces
    /// closed).
    pub(super) fn retire_manager(&mut self, old: crate::manager::WorkspaceManager) {
        if self.lease.is_some() && self.retiring.is_none() {
            let keep = self.cx.ws.id().to_string();
            let m = old.clone();
            self.retiring = Some(old);
            let tx = self.cx.tx.clone();
            tokio::spawn(async move {
                for id in m.open_ids().into_iter().filter(|id| *id != keep) {
                    if let Err(e) = m.close(&id).await {
                        let msg = format!("closing workspace {id} of profile {}: {e}", m.profile());
                        let _ = tx.send(AppMsg::Toast(Level::Warn, msg)).await;
                    }
                }
            });
        } else {
            self.shutdown_manager(old);
        }
    }

    /// Shuts `m` down on a task; a failure comes back as a toast.
    pub(super) fn shutdown_manager(&self, m: crate::manager::WorkspaceManager) {
        let tx = self.cx.tx.clone();
        tokio::spawn(async move {
            if let Err(e) = m.shutdown().await {
                let msg = format!("shutting down profile {}: {e}", m.profile());
                let _ = tx.send(AppMsg::Toast(Level::Warn, msg)).await;
            }
        });
    }

    /// A replaced manager still waiting for the app to leave its
    /// workspace (after `:profile`), if any.
    pub fn retiring_manager(&self) -> Option<&crate::manager::WorkspaceManager> {
        self.retiring.as_ref()
    }

    /// Releases the app's lease and shuts down the managers the app
    /// built or replaced (quit). The manager given in [`AppOptions`] is
    /// the caller's, and stays up while it is current.
    pub async fn release_managers(&mut self) {
        self.lease = None;
        let mut done = Vec::new();
        if let Some(m) = self.retiring.take() {
            done.push(m);
        }
        if self.own_manager
            && let Some(m) = self.cx.manager.clone()
        {
            done.push(m);
        }
        for m in done {
            if let Err(e) = m.shutdown().await {
                tracing::warn!("shutting down profile {}: {e}", m.profile());
            }
        }
    }

    /// Reopens every pane on `ws` (the Workspaces pane's open, `:ws`):
    /// pane state starts afresh; focus, layout, session and agent stay.
    /// The previous workspace is left to its manager (which evicts or
    /// closes it); the terminal loop resubscribes to the new bus.
    pub fn switch_workspace(&mut self, ws: Arc<Workspace>) {
        self.cx.header.state = if ws.is_alive() {
            "ready".into()
        } else {
            "closed".into()
        };
        self.cx.ws = ws;
        // Results of tasks started on the previous workspace are dropped.
        self.cx.generation += 1;
        // Workspaces are opened through the current manager.
        self.cx.header.ws_profile = self.cx.header.profile.clone();
        // Leave the previous workspace to its manager: release the lease
        // (so its idle clock starts), and shut down a replaced manager
        // that only waited for the app to leave it.
        self.lease = None;
        if let Some(old) = self.retiring.take() {
            self.shutdown_manager(old);
        }
        self.lease = self.lease_open_workspace();
        self.cx.sessions.clear();
        self.cx.workspace_ids.clear();
        self.cx.workspace_notes.clear();
        self.modal = None;
        self.overlay = None;
        // Rebuilt panes keep the typing mode the old ones had: a switch
        // made from a list must not hand the keyboard to the prompt.
        let typing: Vec<&'static str> = self
            .panes
            .iter()
            .filter(|p| p.text_input_active())
            .map(|p| p.id())
            .collect();
        // The Logs pane outlives the switch (issue 22): what happened on
        // the previous workspace is what one looks for after leaving it.
        // A separator line marks where the new workspace starts.
        let old_logs = self
            .pane_index(panes::logs::ID)
            .map(|i| self.panes.remove(i));
        self.panes = panes::registry(&self.cx);
        if let Some(old) = old_logs
            && let Some(i) = self.pane_index(panes::logs::ID)
        {
            self.panes[i] = old;
        }
        for p in &mut self.panes {
            if !typing.contains(&p.id()) {
                p.blur();
            }
        }
        for i in 0..self.panes.len() {
            self.panes[i].init(&mut self.cx);
        }
        self.restart_watch();
        let id = self.cx.ws.id().to_string();
        self.cx.effect(Effect::Log(LogLine::now(
            Level::Info,
            "tui",
            format!("──────── switched to workspace {id} ────────"),
        )));
        // Effects of the new panes' init (errors, toasts) apply here.
        let effects = std::mem::take(&mut self.cx.effects);
        for e in effects {
            self.apply(e);
        }
        self.blur_unfocused();
    }

    /// Stops the current file watch and, when watching is on, starts one
    /// on the open workspace under a new generation.
    pub(super) fn restart_watch(&mut self) {
        self.watch = None;
        self.watch_generation += 1;
        if self.watch_files {
            self.watch = Some(panes::files::start_watch(&self.cx, self.watch_generation));
        }
    }

    /// The running file watch, if any (tests check a switch stopped the
    /// previous one).
    pub fn file_watch(&self) -> Option<&panes::files::WatchHandle> {
        self.watch.as_ref()
    }
}
