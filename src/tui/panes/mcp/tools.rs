//! The MCP pane's tools list: a tool's schema as a document, and the
//! tool-call dialog (JSON arguments in, the result as a document out).

use serde_json::Value;

use crate::engine::mcp::{McpToolCall, McpToolInfo};
use crate::engine::tools::ToolState;
use crate::tui::action::{DialogTag, Doc, Effect, Level};
use crate::tui::pane::Ctx;
use crate::tui::widgets::ansi::StyledLine;

use super::{ID, McpPane, Msg};

/// Opens the tool-call dialog again with what was typed and why it was
/// refused as its title, like [`reopen_add`]: a typo in long JSON must
/// not cost the text. `tag` is the dialog's [`DialogTag::McpCall`].
fn reopen_call(cx: &mut Ctx, tag: &DialogTag, typed: &str, error: &str) {
    cx.toast(Level::Error, error.to_string());
    cx.effect(Effect::Prompt {
        pane: ID,
        title: format!("✗ {error}"),
        initial: typed.to_string(),
        tag: tag.clone(),
    });
}

impl McpPane {
    pub(super) fn tool_doc(&self, tool: &McpToolInfo) -> Doc {
        let mut lines = vec![
            StyledLine::plain(&format!("tool         {}", tool.name), Default::default()),
            StyledLine::plain(&format!("server       {}", tool.server), Default::default()),
            StyledLine::plain(
                &format!("read-only    {}", if tool.read_only { "yes" } else { "no" }),
                Default::default(),
            ),
            StyledLine::default(),
        ];
        for l in tool.description.lines() {
            lines.push(StyledLine::plain(l, Default::default()));
        }
        lines.push(StyledLine::default());
        lines.push(StyledLine::plain("input schema:", Default::default()));
        let schema = serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default();
        for l in schema.lines() {
            lines.push(StyledLine::plain(l, Default::default()));
        }
        Doc {
            title: format!("{} schema", tool.name),
            lines,
            links: Vec::new(),
        }
    }

    /// Calls the tool the call dialog (`tag`) was opened for with the
    /// JSON arguments typed into it; bad JSON reopens the dialog.
    pub(super) fn call_from_dialog(&mut self, tag: &DialogTag, input: &str, cx: &mut Ctx) {
        let DialogTag::McpCall { tool: qualified } = tag else {
            return;
        };
        let args: Value = match serde_json::from_str(input) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                reopen_call(cx, tag, input, "the arguments must be a JSON object");
                return;
            }
            Err(e) => {
                reopen_call(cx, tag, input, &format!("arguments are not JSON: {e}"));
                return;
            }
        };
        let Some(t) = self.selected_tools().iter().find(|t| &t.name == qualified) else {
            return;
        };
        let (server, tool, name) = (t.server.clone(), t.tool.clone(), t.name.clone());
        let ws = cx.ws.clone();
        let call = McpToolCall {
            agent: cx.agent.clone(),
            session: cx.session.clone(),
            server: Some(server.clone()),
            tool,
            args: args.clone(),
            call_id: None,
            cancel: None,
            cancel_reason: None,
        };
        self.busy.insert(server.clone());
        cx.spawn::<McpPane>(async move {
            let r = ws.mcp().call_tool(call).await;
            let mut lines = vec![
                StyledLine::plain(&format!("call    {name}"), Default::default()),
                StyledLine::plain(&format!("args    {args}"), Default::default()),
                StyledLine::plain(
                    &format!(
                        "result  {}",
                        match r.state {
                            ToolState::Success => "success",
                            ToolState::Error => "error",
                            ToolState::Interrupted => "interrupted",
                        }
                    ),
                    Default::default(),
                ),
                StyledLine::default(),
            ];
            for l in r.text().lines() {
                lines.push(StyledLine::plain(l, Default::default()));
            }
            if let Some(p) = &r.offload_path {
                lines.push(StyledLine::default());
                lines.push(StyledLine::plain(
                    &format!("full output: {p}"),
                    Default::default(),
                ));
            }
            Msg::Called(
                server,
                Doc {
                    title: format!("{name} result"),
                    lines,
                    links: Vec::new(),
                },
            )
        });
    }
}
