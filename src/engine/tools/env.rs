//! What a tool may touch: the sandbox, the layout, the limits, the event
//! bus and a place to offload large outputs. A [`ToolEnv`] is all of it, so
//! a tool runs (and is tested or benchmarked) without a whole workspace.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::AsyncRead;

use super::ToolLimits;
use crate::backend::Sandbox;
use crate::engine::error::WsResult;
use crate::engine::events::{Event, EventBus};
use crate::engine::layout::Layout;
use crate::engine::shell_session::ShellSessions;

/// Where a tool puts an output too large to return whole.
#[async_trait]
pub trait OffloadSink: Send + Sync {
    /// Streams `reader` into a fresh tool-result file of `session` named
    /// after `result_id` and returns its backend path.
    ///
    /// Errors: bad session id, backend failures.
    async fn tool_result_stream(
        &self,
        session: &str,
        result_id: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> WsResult<String>;
}

/// The environment one tool call runs in. Copy: every field borrows.
#[derive(Clone, Copy)]
pub struct ToolEnv<'a> {
    /// Workspace id, the tag of published events.
    pub workspace_id: &'a str,
    /// The live sandbox.
    pub sandbox: &'a Arc<dyn Sandbox>,
    /// Backend paths of the workspace.
    pub layout: &'a Layout,
    /// Limits of the built-in tools.
    pub limits: &'a ToolLimits,
    /// Receives command start/output/exit events.
    pub bus: &'a EventBus,
    /// Takes outputs too large to return whole.
    pub offload: &'a dyn OffloadSink,
    /// The workspace's session shells.
    pub shells: &'a ShellSessions,
    /// Bash runs in the session's shell unless the call says otherwise
    /// (`[tools] bash_session`).
    pub bash_session: bool,
}

impl ToolEnv<'_> {
    /// Publishes an event tagged with the workspace id.
    pub fn publish(&self, event: Event) {
        self.bus.publish(self.workspace_id, event);
    }
}
