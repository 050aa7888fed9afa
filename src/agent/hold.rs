//! The agent as a long-lived holder (issue 15 point 6): an agent runs for
//! hours in one workspace, but it works only while it answers. With a
//! [`WorkspaceSource`] set, each reply checks the workspace out for its
//! whole length (model turns and tool calls alike), so a reply in progress
//! keeps the sandbox from being evicted and renews the provider's
//! keep-alive, and the idle clock runs only between replies. When the
//! manager evicted the workspace between two replies, the next reply runs
//! on the workspace it opened again.
//!
//! Limit: the checkout is taken per reply, not per tool call, so a reply
//! waiting on a slow model also counts as activity (it is work in
//! progress: its next tool call needs the sandbox).

use std::sync::Arc;

use super::{Agent, AgentError};
use crate::engine::activity::{Checkout, WorkspaceSource};

impl Agent {
    /// Checks the workspace out of `source` for each reply from now on
    /// (see the module doc); without one, replies use the workspace the
    /// agent was opened on and hold nothing.
    pub fn set_source(&mut self, source: Arc<dyn WorkspaceSource>) {
        self.source = Some(source);
    }

    /// The checkout of one reply (`None` without a source); switches the
    /// agent to the workspace it returns when that is a new one.
    ///
    /// Errors: [`AgentError::Checkout`] when the workspace cannot be opened
    /// again.
    pub(super) async fn check_out(&mut self) -> Result<Option<Checkout>, AgentError> {
        let Some(source) = &self.source else {
            return Ok(None);
        };
        let held = source.checkout().await?;
        if !Arc::ptr_eq(held.workspace(), &self.ws) {
            self.ws = held.workspace().clone();
        }
        Ok(Some(held))
    }
}
