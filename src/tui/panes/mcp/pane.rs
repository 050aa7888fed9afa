//! The MCP pane's `Pane` glue: keys, actions, events, mouse.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;

use crate::engine::events::Event;
use crate::engine::mcp::McpState;
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent};
use crate::tui::pane::{Ctx, ListMouse, Pane, list_mouse, nav};
use crate::tui::widgets::filter::FilterOutcome;
use crate::tui::widgets::list::ListCursor;

use super::add::ADD_TITLE;
use super::{ID, McpAction, McpPane, ServerVerb, TOOLS, ToolAction};

impl McpPane {
    /// Runs one of the tool list's actions (keys, palette, mouse).
    pub(super) fn tool_act(&mut self, action: ToolAction, cx: &mut Ctx) -> bool {
        match action {
            ToolAction::Nav(verb) => {
                let n = self.selected_tools().len();
                nav(&mut self.tool_cursor, verb, n);
            }
            ToolAction::Back => self.in_tools = false,
            ToolAction::Schema => {
                if let Some(t) = self.selected_tool() {
                    let doc = self.tool_doc(t);
                    cx.effect(Effect::OpenViewer(doc));
                }
            }
            ToolAction::Call => {
                if let Some(t) = self.selected_tool() {
                    cx.effect(Effect::Prompt {
                        pane: ID,
                        title: format!("Call {} with JSON arguments", t.tool),
                        initial: "{}".into(),
                        tag: DialogTag::McpCall {
                            tool: t.name.clone(),
                        },
                    });
                }
            }
        }
        true
    }

    /// Runs one of the server list's actions (keys, palette, mouse).
    pub(super) fn act(&mut self, action: McpAction, cx: &mut Ctx) -> bool {
        match action {
            McpAction::Nav(verb) => {
                nav(&mut self.cursor, verb, self.shown.len());
                self.tool_cursor = ListCursor::default();
            }
            McpAction::Tools => match self.selected() {
                Some(s) if s.state.is_ready() => {
                    self.in_tools = true;
                    self.tool_cursor.clamp(self.selected_tools().len());
                }
                // Stopped by the user: only a start brings it back.
                Some(s) if s.state == McpState::Stopped => cx.toast(
                    Level::Info,
                    format!("`{}` is stopped: press s to start it", s.name),
                ),
                // Declared, failed, lost: use it, as a call would.
                Some(_) => self.use_server(cx),
                None => {}
            },
            McpAction::Stop => match self.selected() {
                Some(s)
                    if matches!(
                        s.state,
                        McpState::Ready { .. } | McpState::Starting | McpState::Reconnecting { .. }
                    ) =>
                {
                    self.server_action(ServerVerb::Stop, cx)
                }
                Some(s) => cx.toast(
                    Level::Info,
                    format!("`{}` is not running ({})", s.name, s.state.name()),
                ),
                None => {}
            },
            McpAction::Start => self.server_action(ServerVerb::Start, cx),
            McpAction::Restart => self.server_action(ServerVerb::Restart, cx),
            McpAction::Add => cx.effect(Effect::Prompt {
                pane: ID,
                title: ADD_TITLE.into(),
                initial: String::new(),
                tag: DialogTag::McpAdd,
            }),
            McpAction::Remove => {
                if let Some(s) = self.selected() {
                    cx.effect(Effect::Confirm {
                        pane: ID,
                        message: format!(
                            "Remove MCP server {} from agent {:?}, session {:?}?",
                            s.name, cx.agent, cx.session
                        ),
                        tag: DialogTag::McpRemove {
                            name: s.name.clone(),
                        },
                    });
                }
            }
            McpAction::Describe => {
                if let Some(s) = self.selected() {
                    // The last failed start/stop/call of this server is
                    // the pane's, not the engine's: add it to the fields.
                    let mut v = serde_json::to_value(s).unwrap_or_default();
                    if let (Some(m), Some(e)) = (v.as_object_mut(), self.last_error.get(&s.name)) {
                        m.insert("last_action_error".into(), e.clone().into());
                    }
                    let paths = [("declarations", cx.ws.layout().mcp_file())];
                    let doc =
                        super::super::describe::doc("MCP server", &s.name, &v, &paths, &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
            }
            McpAction::Refresh => {
                self.reread = true;
                self.load(cx);
            }
            McpAction::Filter => self.filter.begin(),
        }
        true
    }
}

impl Pane for McpPane {
    crate::task_pane_glue!();

    fn context(&self) -> &'static str {
        if self.in_tools { TOOLS } else { ID }
    }

    fn title(&self) -> String {
        let n = self.servers().len();
        let failed = self
            .servers()
            .iter()
            .filter(|s| matches!(s.state, McpState::Failed { .. }))
            .count();
        let mut parts = vec![n.to_string()];
        if failed > 0 {
            parts.push(format!("{failed} failed"));
        }
        match self.issues().len() {
            0 => {}
            1 => parts.push("1 .mcp problem".into()),
            k => parts.push(format!("{k} .mcp problems")),
        }
        format!("MCP ({})", parts.join(", "))
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.load(cx);
    }

    fn text_input_active(&self) -> bool {
        self.filter.editing
    }

    fn clear_filter(&mut self) -> bool {
        if self.filter.editing || !self.filter.active() {
            return false;
        }
        self.filter.set("");
        self.refilter();
        true
    }

    fn on_key(&mut self, key: &KeyEvent, _cx: &mut Ctx) -> bool {
        match self.filter.key(key) {
            FilterOutcome::Ignored => false,
            _ => {
                self.refilter();
                true
            }
        }
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        let used = self.filter.paste(s) != FilterOutcome::Ignored;
        self.refilter();
        used
    }

    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool {
        if let Some(action) = ToolAction::parse(action) {
            return self.tool_act(action, cx);
        }
        McpAction::parse(action).is_some_and(|a| self.act(a, cx))
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Engine(env) => {
                if let Event::McpState {
                    agent,
                    session,
                    server,
                    ..
                } = &env.event
                    && *agent == cx.agent
                    && *session == cx.session
                {
                    let _ = server;
                    self.load(cx);
                }
            }
            // `.mcp` written by another process (`wsbench mcp add`):
            // read the declarations again, as `r` does.
            PaneEvent::File(change) if change.path == cx.ws.layout().mcp_file() => {
                self.reread = true;
                self.load(cx);
            }
            PaneEvent::SessionChanged => {
                self.in_tools = false;
                self.cursor = ListCursor::default();
                self.tool_cursor = ListCursor::default();
                self.last_error.clear();
                self.load(cx);
            }
            PaneEvent::Confirmed(DialogTag::McpRemove { name }) => {
                if let Some(i) = self.servers().iter().position(|s| &s.name == name) {
                    // Act on the confirmed name even if the cursor moved.
                    if let Some(pos) = self.shown.iter().position(|&j| j == i) {
                        self.cursor.selected = pos;
                    }
                    self.server_action(ServerVerb::Remove, cx);
                }
            }
            PaneEvent::Input {
                tag: DialogTag::McpAdd,
                text: input,
            } => self.add_from_form(input, cx),
            PaneEvent::Input { tag, text: input } => self.call_from_dialog(tag, input, cx),
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        let n = self.selected_tools().len();
        let in_tools = ev.row >= self.tools_area.y
            && ev.row < self.tools_area.y + self.tools_area.height
            && self.tools_area.height > 0;
        if in_tools {
            return match list_mouse(&mut self.tool_cursor, ev, self.tools_area, n) {
                ListMouse::Clicked(_, again) => {
                    self.in_tools = true;
                    if again {
                        self.tool_act(ToolAction::Schema, cx);
                    }
                    true
                }
                ListMouse::None => false,
                _ => true,
            };
        }
        match list_mouse(&mut self.cursor, ev, self.inner, self.shown.len()) {
            ListMouse::Clicked(..) => {
                self.in_tools = false;
                self.tool_cursor = ListCursor::default();
                true
            }
            ListMouse::None => false,
            _ => true,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        self.draw(f, area, focused, cx);
    }
}
