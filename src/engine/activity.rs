//! Long-lived holders and the work they do (issue 15 point 6): `wsbench
//! mcp serve` and the agent loop hold a workspace for hours, but only the
//! calls they run are work. Each call checks the workspace out of a
//! [`WorkspaceSource`] and keeps the [`Checkout`] until it is done.
//!
//! The engine does not know who keeps workspaces open (the manager sits
//! above it), so the source is a trait: the manager's source leases the
//! workspace for the call (never evicted while leased, the provider's
//! keep-alive renewed, the idle clock restarted when the call ends) and
//! opens it again when it was evicted between calls; [`FixedSource`] is a
//! workspace no manager holds (`--workdir`), checked out as it is.

use std::any::Any;
use std::ops::Deref;
use std::sync::Arc;

use async_trait::async_trait;

use super::workspace::Workspace;

/// A workspace checked out for one call: deref to the [`Workspace`]; the
/// call's hold on it (a manager lease) ends when this is dropped.
pub struct Checkout {
    ws: Arc<Workspace>,
    /// Kept only to be dropped with the checkout (a `manager::Lease`).
    _hold: Option<Box<dyn Any + Send + Sync>>,
}

impl Checkout {
    /// `ws`, held by `hold` until the checkout is dropped (`None`: nothing
    /// holds it).
    pub fn new(ws: Arc<Workspace>, hold: Option<Box<dyn Any + Send + Sync>>) -> Self {
        Checkout { ws, _hold: hold }
    }

    /// The workspace.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.ws
    }
}

impl Deref for Checkout {
    type Target = Workspace;

    fn deref(&self) -> &Workspace {
        &self.ws
    }
}

impl std::fmt::Debug for Checkout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkout")
            .field("workspace", &self.ws.id())
            .field("held", &self._hold.is_some())
            .finish()
    }
}

/// Why a workspace could not be checked out, in words for the user (the
/// manager's error text: the workspace could not be opened again).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct CheckoutError(pub String);

/// Where a long-lived holder gets its workspace for each call.
#[async_trait]
pub trait WorkspaceSource: Send + Sync + std::fmt::Debug {
    /// The workspace for one call, held until the checkout is dropped.
    /// May be a new [`Workspace`] (the manager evicted the old one while
    /// no call ran, and opened it again).
    ///
    /// Errors: the workspace could not be opened again (the backend
    /// refused; the manager was shut down).
    async fn checkout(&self) -> Result<Checkout, CheckoutError>;
}

/// A workspace no manager holds (a `--workdir` directory): every checkout
/// is that workspace, holding nothing.
#[derive(Debug, Clone)]
pub struct FixedSource(pub Arc<Workspace>);

#[async_trait]
impl WorkspaceSource for FixedSource {
    async fn checkout(&self) -> Result<Checkout, CheckoutError> {
        Ok(Checkout::new(self.0.clone(), None))
    }
}
