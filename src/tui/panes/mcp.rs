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

use std::collections::{HashMap, HashSet};

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::engine::events::Event;
use crate::engine::mcp::McpTransport;
use crate::engine::mcp::{McpDecl, McpListing, McpState, McpStatus, McpToolCall, McpToolInfo};
use crate::engine::tools::ToolState;
use crate::tui::action::{DialogTag, Doc, Effect, Level, PaneEvent, TaskResult};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, act, deliver, filter_bar, list_mouse, navigate, placeholder,
};
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::filter::{Filter, FilterOutcome};
use crate::tui::widgets::list::{ListCursor, render_rows};
use crate::tui::widgets::text;

/// Pane id (the servers list's keymap context).
pub const ID: &str = "mcp";

/// Keymap context of the tools list (after Enter on a server).
pub const TOOLS: &str = "mcp_tools";

/// Keys of the servers list.
pub const ACTIONS: &[ActionSpec] = crate::pane_actions!("mcp";
    act("mcp.tools", ID, "tools", &["enter"], false, true),
    act("mcp.start", ID, "start", &["s"], false, true),
    act("mcp.stop", ID, "stop", &["x"], false, true),
    act("mcp.restart", ID, "restart", &["R"], false, true),
    act("mcp.add", ID, "add", &["a"], true, true),
    act("mcp.remove", ID, "remove", &["D", "delete"], true, true),
    act("mcp.refresh", ID, "refresh", &["r"], false, false),
    act("mcp.filter", ID, "filter", &["/"], false, false),
);

/// Keys of the tools list.
pub const TOOL_ACTIONS: &[ActionSpec] = crate::pane_actions!("mcp_tools";
    act("mcp_tools.schema", TOOLS, "schema", &["enter"], false, true),
    act("mcp_tools.call", TOOLS, "call with JSON", &["c"], true, true),
    act("mcp_tools.back", TOOLS, "back to servers", &["esc", "h"], false, true),
);

/// Lines of stderr tail shown under the selected server.
const TAIL_LINES: usize = 4;

pub(crate) enum Msg {
    Listed(Result<(McpListing, HashMap<String, Vec<McpToolInfo>>), String>),
    /// An action on a server finished: server, verb, error text.
    Acted(String, &'static str, Result<String, String>),
    Called(String, Doc),
    /// The add form's text was refused: server, what was typed, why.
    AddRefused(String, String, String),
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
    pair: (String, String),
    inner: Rect,
    tools_area: Rect,
}

impl Default for McpPane {
    fn default() -> Self {
        Self::new()
    }
}

fn transport_name(t: McpTransport) -> &'static str {
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

const ADD_TITLE: &str = "Add MCP server: NAME COMMAND ARGS… or NAME URL";

/// Opens the add form again with what was typed and, as its title, why
/// it was refused — without the engine's "MCP server `x` cannot be
/// added: " lead-in, which the narrow title would spend its room on (the
/// toast shows the whole text).
fn reopen_add(cx: &mut Ctx, typed: &str, error: &str) {
    let first = error.lines().next().unwrap_or(error);
    cx.toast(Level::Error, first.to_string());
    let why = first
        .find(" cannot be added: ")
        .map_or(first, |i| &first[i + " cannot be added: ".len()..]);
    cx.effect(Effect::Prompt {
        pane: ID,
        title: format!("✗ {why}"),
        initial: typed.to_string(),
        tag: DialogTag::McpAdd,
    });
}

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

/// An `.mcp` problem without the file's full path in front (the pane
/// is about that file): `mcps["coder"]["s-001"][2] (name …): why`.
fn short_issue<'a>(issue: &'a str, cx: &Ctx) -> &'a str {
    let path = cx.ws.layout().mcp_file();
    issue
        .strip_prefix(path.as_str())
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(issue)
}

/// Parses the add form: `NAME URL` (http, or SSE when the path ends in
/// `/sse`) or `NAME COMMAND ARGS…` (stdio; shell-style quoting).
pub fn parse_add(input: &str) -> Result<McpDecl, String> {
    let words = shlex::split(input.trim())
        .ok_or_else(|| "unbalanced quotes in the command line".to_string())?;
    let mut it = words.into_iter();
    let name = it
        .next()
        .ok_or_else(|| "give a name, then a command or a URL".to_string())?;
    let target = it.next().ok_or_else(|| {
        format!("`{name}`: give a stdio command or an http(s) URL after the name")
    })?;
    let rest: Vec<String> = it.collect();
    let decl = if target.starts_with("http://") || target.starts_with("https://") {
        if !rest.is_empty() {
            return Err(format!(
                "`{name}`: nothing may follow the URL (got `{}`)",
                rest.join(" ")
            ));
        }
        McpDecl::http(name, target, false)
    } else {
        McpDecl::stdio(name, target, rest)
    };
    decl.validate().map_err(|e| e.to_string())?;
    Ok(decl)
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
            pair: (String::new(), String::new()),
            inner: Rect::default(),
            tools_area: Rect::default(),
        }
    }

    /// Names of the listed servers, in declaration order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers().iter().map(|s| s.name.clone()).collect()
    }

    fn servers(&self) -> &[McpStatus] {
        self.listing.as_ref().map_or(&[], |l| &l.servers)
    }

    /// Problems of `.mcp` for this pair: entries the engine skipped
    /// (bad name, missing command or URL), with where and why.
    pub fn issues(&self) -> &[String] {
        self.listing.as_ref().map_or(&[], |l| &l.issues)
    }

    fn load(&mut self, cx: &mut Ctx) {
        if self.loading {
            self.dirty = true;
            return;
        }
        self.loading = true;
        self.dirty = false;
        let ws = cx.ws.clone();
        let (agent, session) = (cx.agent.clone(), cx.session.clone());
        self.pair = (agent.clone(), session.clone());
        cx.spawn::<McpPane>(async move {
            let r = async {
                let listing = ws.mcp().status(&agent, &session).await?;
                let mut tools = HashMap::new();
                // Only ready servers: their instance exists, so asking for
                // it creates nothing and starts nothing.
                for s in listing.servers.iter().filter(|s| s.state.is_ready()) {
                    let inst = ws.mcp().instance(&agent, &session, &s.name).await?;
                    tools.insert(s.name.clone(), inst.tools());
                }
                Ok::<_, crate::engine::WorkspaceError>((listing, tools))
            }
            .await;
            Msg::Listed(r.map_err(|e| e.to_string()))
        });
    }

    fn refilter(&mut self) {
        let servers = self.servers();
        self.shown = (0..servers.len())
            .filter(|&i| {
                let s = &servers[i];
                self.filter.matches(&s.name) || self.filter.matches(s.state.name())
            })
            .collect();
        self.cursor.clamp(self.shown.len());
    }

    fn selected(&self) -> Option<&McpStatus> {
        self.shown
            .get(self.cursor.selected)
            .and_then(|&i| self.servers().get(i))
    }

    fn selected_tools(&self) -> &[McpToolInfo] {
        self.selected()
            .and_then(|s| self.tools.get(&s.name))
            .map_or(&[], |v| v.as_slice())
    }

    fn selected_tool(&self) -> Option<&McpToolInfo> {
        self.selected_tools().get(self.tool_cursor.selected)
    }

    /// Runs `verb` on the selected server in a task.
    fn server_action(&mut self, verb: &'static str, cx: &mut Ctx) {
        let Some(name) = self.selected().map(|s| s.name.clone()) else {
            return;
        };
        // Stop, restart and remove cancel a start in progress.
        if !self.busy.insert(name.clone()) && verb == "start" {
            cx.toast(Level::Info, format!("`{name}` is busy"));
            return;
        }
        self.last_error.remove(&name);
        let ws = cx.ws.clone();
        let (agent, session) = (cx.agent.clone(), cx.session.clone());
        cx.spawn::<McpPane>(async move {
            let r = match verb {
                "start" => ws
                    .mcp()
                    .start(&agent, &session, &name)
                    .await
                    .map(|s| format!("`{name}` {}", state_text(&s.state))),
                "stop" => ws
                    .mcp()
                    .stop(&agent, &session, &name)
                    .await
                    .map(|_| format!("stopped `{name}`")),
                "restart" => ws
                    .mcp()
                    .restart(&agent, &session, &name)
                    .await
                    .map(|s| format!("`{name}` {}", state_text(&s.state))),
                _ => ws
                    .mcp()
                    .remove(&name, &agent, &session)
                    .await
                    .map(|_| format!("removed `{name}`")),
            };
            Msg::Acted(name, verb, r.map_err(|e| e.to_string()))
        });
    }

    fn tool_doc(&self, tool: &McpToolInfo) -> Doc {
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
}

impl Pane for McpPane {
    fn id(&self) -> &'static str {
        ID
    }

    fn on_task(&mut self, task: TaskResult, cx: &mut Ctx) {
        deliver(self, task, cx);
    }

    fn context(&self) -> &'static str {
        if self.in_tools { TOOLS } else { ID }
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
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
        if let Some(verb) = action.strip_prefix("mcp_tools.") {
            let n = self.selected_tools().len();
            if navigate(&mut self.tool_cursor, verb, n) {
                return true;
            }
            match verb {
                "back" => self.in_tools = false,
                "schema" => {
                    if let Some(t) = self.selected_tool() {
                        let doc = self.tool_doc(t);
                        cx.effect(Effect::OpenViewer(doc));
                    }
                }
                "call" => {
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
                _ => return false,
            }
            return true;
        }
        let verb = action.strip_prefix("mcp.").unwrap_or(action);
        if navigate(&mut self.cursor, verb, self.shown.len()) {
            self.tool_cursor = ListCursor::default();
            return true;
        }
        match verb {
            "tools" => match self.selected() {
                Some(s) if s.state.is_ready() => {
                    self.in_tools = true;
                    self.tool_cursor.clamp(self.selected_tools().len());
                }
                Some(s) => cx.toast(
                    Level::Info,
                    format!("`{}` is {}: press s to start it", s.name, s.state.name()),
                ),
                None => {}
            },
            "stop" => match self.selected() {
                Some(s) if matches!(s.state, McpState::Ready { .. } | McpState::Starting) => {
                    self.server_action(verb, cx)
                }
                Some(s) => cx.toast(
                    Level::Info,
                    format!("`{}` is not running ({})", s.name, s.state.name()),
                ),
                None => {}
            },
            "start" | "restart" => self.server_action(verb, cx),
            "add" => cx.effect(Effect::Prompt {
                pane: ID,
                title: ADD_TITLE.into(),
                initial: String::new(),
                tag: DialogTag::McpAdd,
            }),
            "remove" => {
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
            "refresh" => self.load(cx),
            "filter" => self.filter.begin(),
            _ => return false,
        }
        true
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
                    self.server_action("remove", cx);
                }
            }
            PaneEvent::Input {
                tag: DialogTag::McpAdd,
                text: input,
            } => {
                if input.trim().is_empty() {
                    return;
                }
                match parse_add(input) {
                    Ok(decl) => {
                        let ws = cx.ws.clone();
                        let (agent, session) = (cx.agent.clone(), cx.session.clone());
                        let name = decl.name.clone();
                        self.busy.insert(name.clone());
                        let typed = input.clone();
                        cx.spawn::<McpPane>(async move {
                            match ws.mcp().add(decl, &agent, &session, false).await {
                                Ok(_) => {
                                    let m = format!("added `{name}`: press s to start it");
                                    Msg::Acted(name, "add", Ok(m))
                                }
                                Err(e) => Msg::AddRefused(name, typed, e.to_string()),
                            }
                        });
                    }
                    Err(e) => reopen_add(cx, input, &e),
                }
            }
            PaneEvent::Input { tag, text: input } => {
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
                        self.on_action("mcp_tools.schema", cx);
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
        let t = &cx.theme;
        let agent = if cx.agent.is_empty() {
            "default"
        } else {
            cx.agent.as_str()
        };
        // The note gives way to the title on narrow panes.
        let note = if area.width >= 56 {
            format!("agent {agent} · session {}", cx.session)
        } else if area.width >= 44 {
            format!("{agent} / {}", cx.session)
        } else {
            String::new()
        };
        let block = cx.block(&self.title(), &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let body = filter_bar(f, inner, &self.filter, cx);
        self.tools_area = Rect::default();
        if let Some(e) = &self.error {
            self.inner = body;
            placeholder(f, body, &format!("error: {e}"), t.error);
            return;
        }
        if self.shown.is_empty() {
            self.inner = body;
            let msg = if self.loading {
                "loading…"
            } else if self.servers().is_empty() {
                "no MCP servers declared: a adds one"
            } else {
                "no match"
            };
            placeholder(f, body, msg, t.muted);
            // Why declared servers may be missing.
            let w = body.width as usize;
            for (i, issue) in self
                .issues()
                .iter()
                .enumerate()
                .take(body.height as usize / 2)
            {
                let issue = short_issue(issue, cx);
                let line = text::truncate(&text::display(&format!("⚠ {issue}")), w).into_owned();
                f.buffer_mut()
                    .set_string(body.x, body.y + i as u16, line, t.warn);
            }
            return;
        }
        // Servers on top (at most half when there is room for details).
        let n = self.shown.len() as u16;
        let list_h = if body.height >= 8 {
            n.min(body.height / 2).max(1)
        } else {
            body.height
        };
        let list = Rect::new(body.x, body.y, body.width, list_h);
        self.inner = list;
        let w = body.width as usize;
        let servers = self.listing.as_ref().map_or(&[][..], |l| &l.servers[..]);
        let shown = &self.shown;
        let busy = &self.busy;
        render_rows(
            f.buffer_mut(),
            list,
            &mut self.cursor,
            shown.len(),
            focused && !self.in_tools,
            t.selection,
            |i| {
                let s = &servers[shown[i]];
                let (mark, st) = match &s.state {
                    McpState::Ready { .. } => ("● ", t.success),
                    McpState::Starting => ("◌ ", t.warn),
                    McpState::Failed { .. } => ("✗ ", t.error),
                    McpState::Declared => ("○ ", t.muted),
                    McpState::Stopped => ("■ ", t.muted),
                };
                let name = text::fit(&text::display(&s.name), 14.min(w / 3).max(4));
                let kind = format!(" {:<5} ", transport_name(s.transport));
                let mut state = state_text(&s.state);
                if busy.contains(&s.name) {
                    state.push_str(" …");
                }
                let rest = w.saturating_sub(2 + text::width(&name) + kind.len());
                Line::from(vec![
                    Span::styled(mark, st),
                    Span::styled(name, t.base),
                    Span::styled(kind, t.muted),
                    Span::styled(
                        text::truncate(&text::display(&state), rest).into_owned(),
                        st,
                    ),
                ])
            },
        );
        if body.height < 8 {
            return;
        }
        let Some(sel) = self.selected().cloned() else {
            return;
        };
        // Details of the selected server, then its tools.
        let mut y = list.y + list.height;
        let bottom = body.y + body.height;
        let put = |f: &mut Frame<'_>, y: &mut u16, s: &str, style| {
            if *y < bottom {
                let line = text::truncate(&text::display(s), w).into_owned();
                f.buffer_mut().set_string(body.x, *y, line, style);
                *y += 1;
            }
        };
        let sep = "─".repeat(w);
        put(f, &mut y, &sep, t.border);
        for issue in self.issues() {
            put(f, &mut y, &format!("⚠ {}", short_issue(issue, cx)), t.warn);
        }
        if let Some(p) = &sel.process {
            put(f, &mut y, &format!("process {p}"), t.muted);
        }
        if let McpState::Failed { stderr_tail, .. } = &sel.state {
            put(f, &mut y, &sel.state.summary(), t.error);
            let tail: Vec<&str> = stderr_tail.lines().collect();
            if !tail.is_empty() {
                put(f, &mut y, "stderr tail:", t.muted);
                for l in &tail[tail.len().saturating_sub(TAIL_LINES)..] {
                    put(f, &mut y, &format!("  {l}"), t.muted);
                }
            }
        }
        if let Some(e) = self.last_error.get(&sel.name) {
            // Line by line (a reason may carry its stderr tail); the
            // failure shown just above is not said twice.
            let shown = match &sel.state {
                McpState::Failed { reason, .. } => reason.as_str(),
                _ => "\u{0}",
            };
            let mut lines = e.lines().filter(|l| !l.trim().is_empty());
            if let Some(first) = lines.next()
                && !first.contains(shown)
            {
                put(f, &mut y, &format!("last error: {first}"), t.error);
                for l in lines.take(TAIL_LINES) {
                    put(f, &mut y, &format!("  {l}"), t.error);
                }
            }
        }
        let tools = self.tools.get(&sel.name);
        match tools {
            None => {
                let hint = match &sel.state {
                    McpState::Failed { .. } => "not running: R restarts it",
                    McpState::Starting => {
                        "starting… tools appear once it is ready · x cancels the start"
                    }
                    _ => "tools appear once it runs: s starts it",
                };
                put(f, &mut y, hint, t.muted);
            }
            Some(list) => {
                let head = if self.in_tools {
                    format!("Tools ({}) · enter schema · c call · esc back", list.len())
                } else {
                    format!("Tools ({}) · enter to browse", list.len())
                };
                put(f, &mut y, &head, t.title);
                if y < bottom && !list.is_empty() {
                    let area = Rect::new(body.x, y, body.width, bottom - y);
                    self.tools_area = area;
                    render_rows(
                        f.buffer_mut(),
                        area,
                        &mut self.tool_cursor,
                        list.len(),
                        focused && self.in_tools,
                        t.selection,
                        |i| {
                            let tool = &list[i];
                            let name = text::display(&tool.tool).into_owned();
                            let rest = w.saturating_sub(text::width(&name) + 3);
                            let desc = tool.description.lines().next().unwrap_or("");
                            Line::from(vec![
                                Span::styled(format!(" {name} "), t.base),
                                Span::styled(
                                    text::truncate(&text::display(desc), rest).into_owned(),
                                    t.muted,
                                ),
                            ])
                        },
                    );
                }
            }
        }
    }
}

impl TaskPane for McpPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Listed(r) => {
                self.loading = false;
                match r {
                    Ok((l, tools)) => {
                        // Skipped entries must not go unnoticed: say
                        // so once each time the set of problems changes.
                        if !l.issues.is_empty() && l.issues != self.issues() {
                            let n = l.issues.len();
                            let first = short_issue(&l.issues[0], cx);
                            let msg = if n == 1 {
                                format!(".mcp: {first}")
                            } else {
                                format!(".mcp: {n} problems (MCP pane lists them); first: {first}")
                            };
                            cx.toast(Level::Warn, msg);
                        }
                        self.listing = Some(l.clone());
                        self.tools = tools.clone();
                        self.error = None;
                    }
                    Err(e) => self.error = Some(e.clone()),
                }
                self.refilter();
                if self.in_tools && !self.selected().is_some_and(|s| s.state.is_ready()) {
                    self.in_tools = false;
                }
                let n = self.selected_tools().len();
                self.tool_cursor.clamp(n);
                if self.dirty || self.pair != (cx.agent.clone(), cx.session.clone()) {
                    self.load(cx);
                }
            }
            Msg::Acted(name, verb, r) => {
                self.busy.remove(name);
                match r {
                    Ok(m) => cx.toast(Level::Info, m.clone()),
                    Err(e) => {
                        self.last_error.insert(name.clone(), e.clone());
                        // The details show the rest (stderr tail).
                        let first = e.lines().next().unwrap_or_default();
                        cx.toast(Level::Error, format!("{verb} `{name}`: {first}"));
                    }
                }
                self.load(cx);
            }
            Msg::AddRefused(name, typed, e) => {
                self.busy.remove(name);
                reopen_add(cx, typed, e);
            }
            Msg::Called(name, doc) => {
                self.busy.remove(name);
                cx.effect(Effect::OpenViewer(doc.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_form_takes_a_command_or_a_url() {
        let d = parse_add("fs npx -y '@scope/server fs' /tmp").unwrap();
        assert_eq!(d.name, "fs");
        assert_eq!(d.transport(), McpTransport::Stdio);
        let d = parse_add("docs http://127.0.0.1:9/mcp").unwrap();
        assert_eq!(d.transport(), McpTransport::StreamableHttp);
        let d = parse_add("old https://h/sse").unwrap();
        assert_eq!(d.transport(), McpTransport::Sse);
        assert!(
            parse_add("lonely")
                .unwrap_err()
                .contains("command or an http")
        );
        assert!(parse_add("x http://h/mcp extra").is_err());
        assert!(parse_add("x 'open").unwrap_err().contains("quotes"));
        assert!(parse_add("").is_err());
    }

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
