//! MCP servers of the selected (agent, session) (docs/contract.md §5): state
//! (declared / starting / ready with its tool count / failed with reason,
//! exit status and stderr tail / stopped), the last error of an action,
//! and the tools of the selected server with their schemas.
//!
//! Listing uses [`crate::engine::Workspace::mcp_status`], which starts
//! nothing: a server is only connected when the user starts it (`s`),
//! restarts it (`R`) or calls one of its tools. Live state comes from
//! [`Event::McpState`] on the bus. `a` adds a server (`NAME COMMAND
//! ARGS…` or `NAME URL`), `D` removes one after asking. Enter moves into
//! the tools list: Enter there shows a tool's JSON schema, `c` calls it
//! with JSON arguments and shows the result.
//!
//! Files of the pane, one job each:
//! * `mod.rs`: the pane's types, state and selection accessors.
//! * [`servers`]: listing the servers and acting on one (start, stop,
//!   restart, remove), and the results of those tasks.
//! * [`add`]: the add form (parsing, refusals).
//! * [`tools`]: the tools list's schema view and the tool-call dialog.
//! * [`render`]: drawing the servers, the details and the tools.
//! * [`pane`]: the `Pane` glue (keys, actions, events, mouse).

use std::collections::{HashMap, HashSet};

use ratatui::layout::Rect;

use crate::engine::mcp::McpTransport;
use crate::engine::mcp::{McpListing, McpState, McpStatus, McpToolInfo};
use crate::tui::action::Doc;
use crate::tui::keymap::ActionSpec;
use crate::tui::widgets::filter::Filter;
use crate::tui::widgets::list::ListCursor;

mod add;
mod pane;
mod render;
mod servers;
mod tools;

pub use add::parse_add;

/// Pane id (the servers list's keymap context).
pub const ID: &str = "mcp";

/// Keymap context of the tools list (after Enter on a server).
pub const TOOLS: &str = "mcp_tools";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum McpAction in "mcp";
    Tools => act("mcp.tools", ID, "tools", &["enter"], false, true),
    Start => act("mcp.start", ID, "start", &["s"], false, true),
    Stop => act("mcp.stop", ID, "stop", &["x"], false, true),
    Restart => act("mcp.restart", ID, "restart", &["R"], false, true),
    Add => act("mcp.add", ID, "add", &["a"], true, true),
    Remove => act("mcp.remove", ID, "remove", &["D", "delete"], true, true),
    Refresh => act("mcp.refresh", ID, "refresh", &["r"], false, false),
    Filter => act("mcp.filter", ID, "filter", &["/"], false, false),
    Describe => act("mcp.describe", ID, "describe", &["d"], false, false),
}

/// Keys of the servers list.
pub const ACTIONS: &[ActionSpec] = McpAction::TABLE;

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`TOOL_ACTIONS`]).
    pub(crate) enum ToolAction in "mcp_tools";
    Schema => act("mcp_tools.schema", TOOLS, "schema", &["enter"], false, true),
    Call => act("mcp_tools.call", TOOLS, "call with JSON", &["c"], true, true),
    Back => act("mcp_tools.back", TOOLS, "back to servers", &["esc", "h"], false, true),
}

/// Keys of the tools list.
pub const TOOL_ACTIONS: &[ActionSpec] = ToolAction::TABLE;

/// Lines of stderr tail shown under the selected server.
pub(super) const TAIL_LINES: usize = 4;

pub(crate) enum Msg {
    Listed(Result<(McpListing, HashMap<String, Vec<McpToolInfo>>), String>),
    /// An action on a server finished: server, the verb of the toast
    /// (`add` or a [`ServerVerb::label`]), message or error text.
    Acted(String, &'static str, Result<String, String>),
    Used(String, Result<(), String>),
    Called(String, Doc),
    /// The add form's text was refused: server, what was typed, why.
    AddRefused(String, String, String),
}

/// What the pane does to the selected server in a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerVerb {
    /// Started (`s`).
    Start,
    /// Stopped (`x`).
    Stop,
    /// Restarted (`R`).
    Restart,
    /// Removed from the declarations (`D`, confirmed).
    Remove,
}

impl ServerVerb {
    /// The verb as its toasts say it (`start `x`: …`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            ServerVerb::Start => "start",
            ServerVerb::Stop => "stop",
            ServerVerb::Restart => "restart",
            ServerVerb::Remove => "remove",
        }
    }
}

/// The MCP servers pane.
pub struct McpPane {
    listing: Option<McpListing>,
    tools: HashMap<String, Vec<McpToolInfo>>,
    shown: Vec<usize>,
    cursor: ListCursor,
    tool_cursor: ListCursor,
    in_tools: bool,
    filter: Filter,
    loading: bool,
    dirty: bool,
    error: Option<String>,
    last_error: HashMap<String, String>,
    busy: HashSet<String>,
    reread: bool,
    open_tools: Option<String>,
    pair: (String, String),
    inner: Rect,
    tools_area: Rect,
}

impl Default for McpPane {
    fn default() -> Self {
        Self::new()
    }
}

pub(super) fn transport_name(t: McpTransport) -> &'static str {
    match t {
        McpTransport::Stdio => "stdio",
        McpTransport::Sse => "sse",
        McpTransport::StreamableHttp => "http",
    }
}

/// One-line state text, as the CLI prints it ([`McpState::summary`]):
/// `ready (12 tools)`, `failed: reason (exit status 1)`.
pub fn state_text(s: &McpState) -> String {
    s.summary()
}

impl McpPane {
    /// An empty pane (lists on init).
    pub fn new() -> Self {
        McpPane {
            listing: None,
            tools: HashMap::new(),
            shown: Vec::new(),
            cursor: ListCursor::default(),
            tool_cursor: ListCursor::default(),
            in_tools: false,
            filter: Filter::default(),
            loading: false,
            dirty: false,
            error: None,
            last_error: HashMap::new(),
            busy: HashSet::new(),
            reread: false,
            open_tools: None,
            pair: (String::new(), String::new()),
            inner: Rect::default(),
            tools_area: Rect::default(),
        }
    }

    /// Names of the listed servers, in declaration order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers().iter().map(|s| s.name.clone()).collect()
    }

    pub(super) fn servers(&self) -> &[McpStatus] {
        self.listing.as_ref().map_or(&[], |l| &l.servers)
    }

    /// Problems of `.mcp` for this pair: entries the engine skipped
    /// (bad name, missing command or URL), with where and why.
    pub fn issues(&self) -> &[String] {
        self.listing.as_ref().map_or(&[], |l| &l.issues)
    }

    pub(super) fn refilter(&mut self) {
        let servers = self.servers();
        self.shown = (0..servers.len())
            .filter(|&i| {
                let s = &servers[i];
                self.filter.matches(&s.name) || self.filter.matches(s.state.name())
            })
            .collect();
        self.cursor.clamp(self.shown.len());
    }

    pub(super) fn selected(&self) -> Option<&McpStatus> {
        self.shown
            .get(self.cursor.selected)
            .and_then(|&i| self.servers().get(i))
    }

    pub(super) fn selected_tools(&self) -> &[McpToolInfo] {
        self.selected()
            .and_then(|s| self.tools.get(&s.name))
            .map_or(&[], |v| v.as_slice())
    }

    pub(super) fn selected_tool(&self) -> Option<&McpToolInfo> {
        self.selected_tools().get(self.tool_cursor.selected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_state_names_reason_and_exit() {
        let s = McpState::Failed {
            reason: "server exited before initialize".into(),
            exit_status: Some(3),
            stderr_tail: "boom".into(),
        };
        assert_eq!(
            state_text(&s),
            "failed: server exited before initialize (exit status 3)"
        );
        assert_eq!(
            state_text(&McpState::Ready { tool_count: 2 }),
            "ready (2 tools)"
        );
    }
}
