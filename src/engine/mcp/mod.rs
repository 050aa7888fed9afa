//! MCP servers of a workspace: their declarations and the live clients.
//!
//! * [`decl`] — one declaration, the reference's `MCPClient` JSON
//!   (docs/contract.md §2.1, §5.1): [`McpDecl`], validation, transport choice and
//!   `${VAR}` expansion of secrets at client-build time.
//! * [`store`] — the `.mcp` file: [`McpStore`] holds the per
//!   (agent, session) declarations (`_mcp_specs`, §5.2) with the report of
//!   the load, and writes the file back atomically.
//!
//! * [`client`] — one live server of one (agent, session) with rmcp:
//!   [`McpInstance`] (connect, tools, call, cancel, restart, close).
//! * [`stdio`] — stdio servers started through the backend's
//!   [`crate::backend::Sandbox::spawn`], with a line filter between the
//!   process and rmcp (C03, C04) and exit/stderr watching (C01).
//! * [`sse`] — the legacy HTTP+SSE transport (streamable HTTP is rmcp's).
//! * [`health`] — states, per-server log, stderr tail.
//! * [`runtime`] — [`McpRuntime`], held by the workspace: lazy per-pair
//!   instances and the live cap with LRU eviction.
//! * [`handle`] — [`Mcp`], the handle `Workspace::mcp` gives: listings,
//!   start / stop, add / remove / purge (persisted through
//!   [`McpStore::save`]).
//! * [`call`] — [`McpToolCall`]: tool calls with journal and offloading.
//!
//! `wsbench mcp serve` (the workspace as an MCP server) is
//! the `serve` module of the engine: it sits above the workspace, this
//! module below.
//!
//! The runtime keeps its own [`McpStore`]; [`Mcp::load_store`]
//! still gives a fresh, independent one (for inspection).
//!
//! **Secrets.** The reference writes `env` / `headers` values into `.mcp`
//! in clear text, inside the agent-readable workspace (§11 point 30).
//! wsbench keeps the file format but lets a value say `${VAR}`: the file
//! stores the reference, and [`McpDecl::resolved`] fills it in from the
//! process environment only when a client is built. `$$` writes a `$`.
//! A reference-written value that happens to contain `${...}` or `$$` is
//! therefore read differently by wsbench than by the reference.

pub mod call;
pub mod client;
pub mod decl;
pub mod handle;
pub mod health;
pub mod redact;
pub mod runtime;
pub mod sse;
pub mod stdio;
pub mod store;

pub use call::McpToolCall;
pub use client::{McpError, McpInstance, McpOptions, McpStatus, McpToolInfo, qualified_name};
pub use handle::{Mcp, McpListing};
pub use health::{LogLine, McpState};
pub use runtime::McpRuntime;

pub use decl::{
    DEFAULT_HTTP_TIMEOUT, DeclError, EncodingErrorHandler, HttpConfig, McpConfig, McpDecl,
    McpTransport, StdioConfig, StrMap,
};
pub use store::{MCP_FILE_VERSION, McpIssue, McpStore, McpStoreError, Severity};

use super::error::{WorkspaceError, WsResult};
use super::events::Event;
use crate::backend::BackendError;

impl Mcp<'_> {
    /// Reads this workspace's `.mcp` into an [`McpStore`] (docs/contract.md §2.1
    /// `_restore_mcp_specs`). Never writes the file. Each issue of the
    /// report is also published as an [`Event::Log`] (source `mcp`), so a
    /// bad entry is visible without failing the workspace (C07).
    ///
    /// Errors: only [`BackendError::Unavailable`] — the sandbox is gone,
    /// so an empty store would be a lie; every other read problem is in
    /// the store's report and the workspace carries on with its defaults.
    pub async fn load_store(self) -> WsResult<McpStore> {
        let path = self.base.layout().mcp_file();
        let store = match self.base.sandbox().read(&path, None).await {
            Ok(bytes) => McpStore::parse(path, Some(&bytes)),
            Err(e) if e.is_not_found() => McpStore::parse(path, None),
            Err(e @ BackendError::Unavailable { .. }) => return Err(WorkspaceError::Backend(e)),
            Err(e) => McpStore::unreadable(path, &e),
        };
        Ok(self.publish_issues(store))
    }

    fn publish_issues(&self, store: McpStore) -> McpStore {
        for issue in store.issues() {
            self.base.publish(Event::Log {
                level: issue.severity.as_str().to_string(),
                source: "mcp".to_string(),
                message: issue.to_string(),
            });
        }
        store
    }
}
