//! Drawing the MCP pane: the servers list, the selected server's
//! details (state, last error, stderr tail) and its tools.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::engine::mcp::McpState;
use crate::tui::pane::{Ctx, Pane, filter_bar, filter_suffix, placeholder};
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::text;

use super::{McpPane, TAIL_LINES, transport_name};

/// An `.mcp` problem without the file's full path in front (the pane
/// is about that file): `mcps["coder"]["s-001"][2] (name …): why`.
pub(super) fn short_issue<'a>(issue: &'a str, cx: &Ctx) -> &'a str {
    let path = cx.ws.layout().mcp_file();
    issue
        .strip_prefix(path.as_str())
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(issue)
}

impl McpPane {
    /// Draws the pane into `area` (border included).
    pub(super) fn draw(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
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
        let block = cx.block(
            &format!("{}{}", self.title(), filter_suffix(&self.filter)),
            &note,
            focused,
        );
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
                    McpState::Reconnecting { .. } => ("↻ ", t.warn),
                };
                let name = text::fit(&text::display(&s.name), 14.min(w / 3).max(4));
                let kind = format!(" {:<5} ", transport_name(s.transport));
                let mut state = s.summary();
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
        if !sel.expands.is_empty() {
            // The same fact `mcp list` notes (issue 23 point 3): a
            // workspace shared with the reference behaves differently
            // for this server, so say it where the server is looked at.
            let vars: Vec<String> = sel.expands.iter().map(|v| format!("${{{v}}}")).collect();
            put(
                f,
                &mut y,
                &format!(
                    "fills {} from wsbench's environment; the reference sends it as written \
                     (mcp add --literal stores the value)",
                    vars.join(", ")
                ),
                t.warn,
            );
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
                    McpState::Failed { .. } => "not running: enter tries it again · R restarts it",
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
