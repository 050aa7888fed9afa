//! The manager as a [`WorkspaceSource`] for long-lived holders (`mcp
//! serve`, the agent loop; issue 15 point 6): each call takes a [`Lease`]
//! on the workspace, so a call counts as activity the way the TUI's and
//! one-shot commands' use does. While any call runs the workspace is not
//! evicted and the provider's keep-alive is renewed (`keepalive.rs`); when
//! the calls stop, the idle clock runs from the last one and the TTL
//! sweep releases the sandbox. A call after that eviction opens the
//! workspace again (reattach, resume), instead of failing on the closed
//! one.
//!
//! [`Lease`]: super::Lease

use async_trait::async_trait;

use super::WorkspaceManager;
use crate::engine::activity::{Checkout, CheckoutError, WorkspaceSource};

/// One workspace of one manager, checked out with a lease per call. Made
/// by [`WorkspaceManager::source`].
#[derive(Debug, Clone)]
pub struct ManagedSource {
    manager: WorkspaceManager,
    id: String,
    user: String,
    agent: String,
    session: String,
}

impl WorkspaceManager {
    /// A [`WorkspaceSource`] for workspace `id` (already opened, or
    /// known to the provider), acting for `(user, agent, session)` when it
    /// has to be opened again.
    pub fn source(&self, id: &str, user: &str, agent: &str, session: &str) -> ManagedSource {
        ManagedSource {
            manager: self.clone(),
            id: id.to_string(),
            user: user.to_string(),
            agent: agent.to_string(),
            session: session.to_string(),
        }
    }
}

#[async_trait]
impl WorkspaceSource for ManagedSource {
    async fn checkout(&self) -> Result<Checkout, CheckoutError> {
        let lease = self
            .manager
            .acquire(&self.user, &self.agent, &self.session, Some(&self.id))
            .await
            .map_err(|e| CheckoutError(format!("opening workspace {} again: {e}", self.id)))?;
        let ws = lease.workspace().clone();
        Ok(Checkout::new(ws, Some(Box::new(lease))))
    }
}
