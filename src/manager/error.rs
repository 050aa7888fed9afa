//! The manager's errors.

use std::sync::Arc;

use crate::backend::{BackendError, BackendKind};
use crate::engine::WorkspaceError;

/// Errors of the manager. Cloneable: one provisioning failure is handed to
/// every caller that waited for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManagerError {
    /// The provisioner could not create, find or attach the sandbox.
    #[error("provisioning workspace {id} ({backend}) failed: {source}")]
    Provision {
        /// Workspace id.
        id: String,
        /// Backend kind.
        backend: BackendKind,
        /// The backend's error.
        #[source]
        source: Arc<BackendError>,
    },
    /// The sandbox is there but the workspace could not be initialised.
    #[error("initialising workspace {id} failed: {source}")]
    Open {
        /// Workspace id.
        id: String,
        /// The engine's error.
        #[source]
        source: Arc<WorkspaceError>,
    },
    /// A provisioner call other than provisioning failed.
    #[error("{op} of {} failed: {source}", backend_err_subject(.id))]
    Backend {
        /// `close`, `destroy`, `list`, ...
        op: &'static str,
        /// Workspace id (`""` for list).
        id: String,
        /// The backend's error.
        #[source]
        source: Arc<BackendError>,
    },
    /// No such workspace in this profile.
    #[error("no workspace `{id}` in profile `{profile}`")]
    NotFound {
        /// Workspace id asked for.
        id: String,
        /// Profile name.
        profile: String,
    },
    /// An explicit workspace id that cannot be used.
    #[error("invalid workspace id {id:?}: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// Why.
        reason: &'static str,
    },
    /// A user or agent id holding `::`: the reference hashes
    /// `user + "::" + agent` for per_agent ids, so user `a::b` with agent
    /// `c` and user `a` with agent `b::c` would share one workspace
    /// (issue 23 point 6).
    #[error(
        "invalid {what} id {id:?}: it holds `::`, which joins user and agent in the workspace id (user `a::b` with agent `c` would open user `a`'s workspace for agent `b::c`); choose an id without `::`"
    )]
    InvalidPrincipal {
        /// `user` or `agent`.
        what: &'static str,
        /// The id as given.
        id: String,
    },
    /// [`WorkspaceManager::shutdown`] was called.
    #[error("the workspace manager of profile `{0}` is shut down")]
    ShutDown(String),
    /// Some workspaces failed to close (the others were closed).
    #[error("{} workspace(s) failed to close: {}", .0.len(), .0.iter().map(|(id, e)| format!("{id}: {e}")).collect::<Vec<_>>().join("; "))]
    Close(Vec<(String, String)>),
    /// A provisioning task panicked or was cancelled.
    #[error("provisioning task for {id} ended abnormally: {message}")]
    Task {
        /// Workspace id.
        id: String,
        /// The join error.
        message: String,
    },
}

/// `workspace <id>`, or `workspaces` for a call on none in particular
/// (`list`): no `list of workspace  failed` with a blank id.
pub(super) fn backend_err_subject(id: &str) -> String {
    if id.is_empty() {
        "workspaces".into()
    } else {
        format!("workspace {id}")
    }
}

pub(crate) fn backend_err(op: &'static str, id: &str, e: BackendError) -> ManagerError {
    ManagerError::Backend {
        op,
        id: id.to_string(),
        source: Arc::new(e),
    }
}
