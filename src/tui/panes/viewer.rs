//! The full-screen viewer: a `context.jsonl` as a conversation, a tool
//! result or text file with line numbers, a rendered `SKILL.md`, or a
//! blob's metadata. `workspace:///` links in a document can be selected
//! (Tab) and opened (Enter), which shows that blob's metadata; Esc goes
//! back through what was opened, then closes.

use ratatui::Frame;
use ratatui::crossterm::event::MouseEvent;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};

use crate::backend::ByteRange;
use crate::engine::layout::names;
use crate::engine::message::{Block, DataSource, Msg, ToolOutput};
use crate::engine::sessions::{ContextRead, parse_context};
use crate::tui::action::{Doc, Effect, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::Nav;
use crate::tui::pane::{Ctx, Pane, TaskPane, placeholder, wheel_nav};
use crate::tui::theme::Theme;
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::text;

/// Pane id.
pub const ID: &str = "viewer";

/// Largest text shown whole (1 MiB); longer files show their start, and
/// `G` reads their end (one ranged read of this many bytes).
pub const MAX_VIEW_BYTES: u64 = 1024 * 1024;

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum ViewerAction in "viewer";
    Back => act("viewer.back", ID, "back / close", &["esc", "q"], false, true),
    NextLink => act("viewer.next_link", ID, "next link", &["tab", "n"], false, true),
    PrevLink => act("viewer.prev_link", ID, "previous link", &["shift-tab", "N"], false, false),
    OpenLink => act("viewer.open_link", ID, "open link", &["enter"], false, true),
    Copy => act("viewer.copy", ID, "copy document", &["y"], false, false),
    Wrap => act("viewer.wrap", ID, "wrap", &["w"], false, true),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = ViewerAction::TABLE;

/// The viewer pane.
pub struct ViewerPane {
    stack: Vec<(Doc, usize, Option<usize>)>,
    doc: Option<Doc>,
    offset: usize,
    link: Option<usize>,
    height: usize,
    loading: Option<String>,
    /// Long lines wrap instead of being cut at the edge (`w`).
    wrap: bool,
    /// The line (0-based) an [`PaneEvent::OpenAt`] asked for, marked.
    mark: Option<usize>,
    /// Where closing the last document goes (`None`: the layout).
    back: Option<&'static str>,
    /// The document on show is one part of a longer text file.
    cut: Option<Cut>,
}

/// A text file longer than [`MAX_VIEW_BYTES`]: which part is on show.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    path: String,
    size: u64,
    /// The end is on show (else the start).
    tail: bool,
}

/// A loaded document: the 1-based line to show (`OpenAt`), the part of a
/// long file it is, and whether it replaces the document on show as its
/// other part (`Some(true)`: the end, scrolled to the bottom).
pub(crate) struct Loaded {
    doc: Doc,
    line: Option<usize>,
    cut: Option<Cut>,
    part: Option<bool>,
}

impl Default for ViewerPane {
    fn default() -> Self {
        Self::new()
    }
}

fn line(s: &str, style: Style) -> StyledLine {
    StyledLine::plain(s, style)
}

fn push_text(out: &mut Vec<StyledLine>, s: &str, style: Style, indent: &str) {
    for l in s.lines() {
        out.push(line(&format!("{indent}{l}"), style));
    }
    if s.is_empty() {
        out.push(line(indent, style));
    }
}

/// Adds `(line, url)` for every `workspace:///` reference in the lines.
fn collect_links(doc: &mut Doc) {
    doc.links.clear();
    for (i, l) in doc.lines.iter().enumerate() {
        let mut rest = l.text.as_str();
        while let Some(p) = rest.find(names::DATA_URL_PREFIX) {
            let tail = &rest[p..];
            let end = tail
                .find(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == ')' || c == '>')
                .unwrap_or(tail.len());
            doc.links.push((i, tail[..end].to_string()));
            rest = &tail[end..];
        }
    }
}

fn data_line(name: Option<&str>, source: &DataSource, t: &Theme, indent: &str) -> StyledLine {
    match source {
        DataSource::Url { url, media_type } => line(
            &format!("{indent}[data {} {media_type}] {url}", name.unwrap_or("")),
            t.link,
        ),
        DataSource::Base64 { data, media_type } => line(
            &format!(
                "{indent}[data {} {media_type}, {} base64 characters inline]",
                name.unwrap_or(""),
                data.len()
            ),
            t.binary,
        ),
    }
}

fn message_lines(m: &Msg, t: &Theme, out: &mut Vec<StyledLine>) {
    let head_style = match m.role.as_str() {
        "user" => t.accent,
        "assistant" => t.success,
        _ => t.warn,
    }
    .add_modifier(Modifier::BOLD);
    out.push(line(
        &format!("── {} ({}) · {}", m.name, m.role, m.created_at),
        head_style,
    ));
    for b in &m.content {
        match b {
            Block::Text(tb) => push_text(out, &tb.text, t.base, ""),
            Block::Thinking(_) => push_text(
                out,
                &format!("[thinking] {}", b.as_text().unwrap_or("")),
                t.muted,
                "",
            ),
            Block::Hint(h) => out.push(line(
                &format!(
                    "[hint] {}",
                    h.get("hint").map(|v| v.to_string()).unwrap_or_default()
                ),
                t.muted,
            )),
            Block::ToolCall(c) => {
                let input = c
                    .input
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| c.input.to_string());
                out.push(line(&format!("⚙ tool call {} {}", c.name, c.id), t.key));
                push_text(out, &input, t.muted, "  ");
            }
            Block::ToolResult(r) => {
                let st = if r.state == "success" || r.state.is_empty() {
                    t.success
                } else {
                    t.error
                };
                out.push(line(
                    &format!("↳ tool result {} {} · {}", r.name, r.id, r.state),
                    st,
                ));
                match &r.output {
                    ToolOutput::Text(s) => push_text(out, s, t.base, "  "),
                    ToolOutput::Blocks(bs) => {
                        for b in bs {
                            match b {
                                Block::Text(tb) => push_text(out, &tb.text, t.base, "  "),
                                Block::Data(d) => {
                                    out.push(data_line(d.name.as_deref(), &d.source, t, "  "))
                                }
                                _ => {}
                            }
                        }
                    }
                }
            }
            Block::Data(d) => out.push(data_line(d.name.as_deref(), &d.source, t, "")),
        }
    }
    out.push(StyledLine::default());
}

/// A `context.jsonl` as a conversation: one header line per message
/// (name, role, time), its text, tool calls and results, data blocks
/// with their `workspace:///` links; unreadable lines are listed.
pub fn conversation_doc(title: &str, ctx: &ContextRead, t: &Theme) -> Doc {
    let mut lines = Vec::new();
    for m in &ctx.messages {
        message_lines(m, t, &mut lines);
    }
    for (n, msg) in &ctx.bad_lines {
        lines.push(line(
            &format!("!! line {n} is not a message: {msg}"),
            t.error,
        ));
    }
    if lines.is_empty() {
        lines.push(line("(no messages)", t.muted));
    }
    let mut doc = Doc {
        title: title.to_string(),
        lines,
        links: Vec::new(),
    };
    collect_links(&mut doc);
    doc
}

/// Text with line numbers.
pub fn text_doc(title: &str, body: &str, truncated: bool, t: &Theme) -> Doc {
    let n = body.lines().count().max(1);
    let w = n.to_string().len();
    let mut lines: Vec<StyledLine> = body
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut sl = StyledLine::plain(&format!("{:>w$} ", i + 1), t.line_number);
            let start = sl.text.len() as u32;
            sl.text.push_str(&text::display(l));
            sl.runs.push((start, t.base));
            sl
        })
        .collect();
    if truncated {
        lines.push(line(
            &format!(
                "… (first {} shown: G reads the end)",
                text::human_size(MAX_VIEW_BYTES)
            ),
            t.muted,
        ));
    }
    let mut doc = Doc {
        title: title.to_string(),
        lines,
        links: Vec::new(),
    };
    collect_links(&mut doc);
    doc
}

/// Loads what a path or `workspace:///` URL points at, as a document.
pub async fn load_doc(
    ws: std::sync::Arc<crate::engine::Workspace>,
    target: String,
    theme: Theme,
) -> Doc {
    load(ws, target, theme).await.0
}

/// The end of a long text file: its last [`MAX_VIEW_BYTES`] in one ranged
/// read (backends with ranged reads read only those; E2B and Daytona cut
/// them from a whole download), the line cut at the start dropped. Lines
/// are not numbered: counting them would read the whole file.
async fn load_tail(
    ws: std::sync::Arc<crate::engine::Workspace>,
    cut: Cut,
    title: String,
    t: Theme,
) -> (Doc, Option<Cut>) {
    let offset = cut.size.saturating_sub(MAX_VIEW_BYTES);
    let range = ByteRange {
        offset,
        len: MAX_VIEW_BYTES,
    };
    let bytes = match ws.sandbox().read(&cut.path, Some(range)).await {
        Ok(b) => b,
        Err(e) => {
            let doc = super::files::metadata_doc(&cut.path, None, &[], Some(&e.to_string()));
            return (doc, None);
        }
    };
    let start = bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    let skipped = offset + start as u64;
    let mut lines = vec![line(
        &format!(
            "… (first {} not shown: g goes back to the start)",
            text::human_size(skipped)
        ),
        t.muted,
    )];
    let body = String::from_utf8_lossy(&bytes[start..]);
    lines.extend(body.lines().map(|l| line(&text::display(l), t.base)));
    let mut doc = Doc {
        title,
        lines,
        links: Vec::new(),
    };
    collect_links(&mut doc);
    (doc, Some(Cut { tail: true, ..cut }))
}

/// [`load_doc`], and the [`Cut`] when only the start of a text file was
/// read.
async fn load(
    ws: std::sync::Arc<crate::engine::Workspace>,
    target: String,
    theme: Theme,
) -> (Doc, Option<Cut>) {
    let doc = |d: Doc| (d, None);
    let path = match ws.layout().resolve_reference(&target) {
        Ok(p) => p,
        Err(e) => {
            return doc(super::files::metadata_doc(
                &target,
                None,
                &[],
                Some(&e.to_string()),
            ));
        }
    };
    let shown = crate::backend::path::strip_root(ws.layout().workdir(), &path)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| path.clone());
    let stat = match ws.sandbox().stat(&path).await {
        Ok(s) => s,
        Err(e) => {
            return doc(super::files::metadata_doc(
                &path,
                None,
                &[],
                Some(&e.to_string()),
            ));
        }
    };
    if stat.is_dir_like() {
        return doc(super::files::metadata_doc(
            &path,
            Some(&stat),
            &[],
            Some("is a directory"),
        ));
    }
    let head = ws
        .sandbox()
        .read(
            &path,
            Some(ByteRange {
                offset: 0,
                len: 4096,
            }),
        )
        .await
        .unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or("");
    let in_data = path.starts_with(&format!("{}/", ws.layout().data_dir()));
    let binary =
        in_data || crate::engine::offload::sniff_media_type(&head).is_some() || head.contains(&0);
    if binary {
        return doc(super::files::metadata_doc(&path, Some(&stat), &head, None));
    }
    let range = (stat.size > MAX_VIEW_BYTES).then_some(ByteRange {
        offset: 0,
        len: MAX_VIEW_BYTES,
    });
    let bytes = match ws.sandbox().read(&path, range).await {
        Ok(b) => b,
        Err(e) => {
            return doc(super::files::metadata_doc(
                &path,
                Some(&stat),
                &head,
                Some(&e.to_string()),
            ));
        }
    };
    if name == names::CONTEXT_FILE || name.ends_with(".jsonl") {
        return doc(conversation_doc(&shown, &parse_context(&bytes), &theme));
    }
    let cut = range.map(|_| Cut {
        path: path.clone(),
        size: stat.size,
        tail: false,
    });
    let text = text_doc(
        &shown,
        &String::from_utf8_lossy(&bytes),
        range.is_some(),
        &theme,
    );
    (text, cut)
}

impl ViewerPane {
    /// An empty viewer.
    pub fn new() -> Self {
        ViewerPane {
            stack: Vec::new(),
            doc: None,
            offset: 0,
            link: None,
            height: 10,
            loading: None,
            wrap: false,
            mark: None,
            back: None,
            cut: None,
        }
    }

    /// Reads the other part of the long file on show: its end (`tail`)
    /// or its start; the document is replaced, not stacked.
    fn load_part(&mut self, cut: Cut, tail: bool, cx: &Ctx) {
        let ws = cx.ws.clone();
        let theme = cx.theme.clone();
        let title = self
            .doc
            .as_ref()
            .map(|d| d.title.clone())
            .unwrap_or_default();
        self.loading = Some(cut.path.clone());
        cx.spawn::<ViewerPane>(async move {
            let (doc, cut) = if tail {
                load_tail(ws, cut, title, theme).await
            } else {
                load(ws, cut.path, theme).await
            };
            Loaded {
                doc,
                line: None,
                cut,
                part: Some(tail),
            }
        });
    }

    /// The document on show (tests).
    pub fn doc(&self) -> Option<&Doc> {
        self.doc.as_ref()
    }

    fn show(&mut self, doc: Doc, push: bool) {
        if push && let Some(cur) = self.doc.take() {
            self.stack.push((cur, self.offset, self.link));
        }
        self.doc = Some(doc);
        self.offset = 0;
        self.link = None;
        self.mark = None;
    }

    /// The line marked by an `OpenAt` (0-based), if any (tests).
    pub fn marked(&self) -> Option<usize> {
        self.mark
    }

    /// Scrolls to the 1-based `line` and marks it; false when the document
    /// has no such line (past what was read).
    fn goto_line(&mut self, line: usize) -> bool {
        let len = self.doc.as_ref().map(|d| d.lines.len()).unwrap_or(0);
        let i = line.saturating_sub(1);
        if i >= len {
            return false;
        }
        self.mark = Some(i);
        let max = len.saturating_sub(self.height.max(1));
        self.offset = i.saturating_sub(self.height / 3).min(max);
        true
    }

    fn scroll_to_link(&mut self) {
        if let (Some(doc), Some(l)) = (&self.doc, self.link)
            && let Some((line, _)) = doc.links.get(l)
            && (*line < self.offset || *line >= self.offset + self.height)
        {
            self.offset = line.saturating_sub(self.height / 3);
        }
    }
}

impl ViewerPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: ViewerAction, cx: &mut Ctx) -> bool {
        let len = self.doc.as_ref().map(|d| d.lines.len()).unwrap_or(0);
        let max = len.saturating_sub(self.height.max(1));
        let h = self.height.max(1);
        match action {
            ViewerAction::Nav(Nav::Down) => self.offset = (self.offset + 1).min(max),
            ViewerAction::Nav(Nav::Up) => self.offset = self.offset.saturating_sub(1),
            ViewerAction::Nav(Nav::PageDown) => self.offset = (self.offset + h).min(max),
            ViewerAction::Nav(Nav::PageUp) => self.offset = self.offset.saturating_sub(h),
            ViewerAction::Nav(Nav::Top) => match self.cut.clone().filter(|c| c.tail) {
                Some(c) => self.load_part(c, false, cx),
                None => self.offset = 0,
            },
            ViewerAction::Nav(Nav::Bottom) => match self.cut.clone().filter(|c| !c.tail) {
                Some(c) => self.load_part(c, true, cx),
                None => self.offset = max,
            },
            ViewerAction::Back => match self.stack.pop() {
                Some((doc, off, link)) => {
                    // Limit: a long file stacked under a link is then
                    // shown as read (its other part is not reachable).
                    self.cut = None;
                    self.doc = Some(doc);
                    self.offset = off;
                    self.link = link;
                }
                None => {
                    self.doc = None;
                    match self.back.take() {
                        Some(id) => cx.effect(Effect::Focus(id)),
                        None => cx.effect(Effect::CloseModal),
                    }
                }
            },
            ViewerAction::NextLink | ViewerAction::PrevLink => {
                let n = self.doc.as_ref().map(|d| d.links.len()).unwrap_or(0);
                if n > 0 {
                    self.link = Some(match (self.link, action) {
                        (None, ViewerAction::NextLink) => 0,
                        (None, _) => n - 1,
                        (Some(i), ViewerAction::NextLink) => (i + 1) % n,
                        (Some(i), _) => (i + n - 1) % n,
                    });
                    self.scroll_to_link();
                }
            }
            ViewerAction::OpenLink => {
                if let (Some(doc), Some(l)) = (&self.doc, self.link)
                    && let Some((_, url)) = doc.links.get(l)
                {
                    cx.effect(Effect::OpenLink(url.clone()));
                }
            }
            ViewerAction::Wrap => {
                self.wrap = !self.wrap;
                let m = if self.wrap {
                    "long lines wrap (w cuts them again)"
                } else {
                    "long lines are cut at the edge (w wraps them)"
                };
                cx.toast(crate::tui::action::Level::Info, m);
            }
            ViewerAction::Copy => {
                if let Some(doc) = &self.doc {
                    let all: Vec<&str> = doc.lines.iter().map(|l| l.text.as_str()).collect();
                    cx.effect(Effect::Copy(all.join("\n")));
                }
            }
        }
        true
    }
}

impl Pane for ViewerPane {
    crate::task_pane_glue!(actions: ViewerAction);

    fn title(&self) -> String {
        match &self.doc {
            Some(d) => text::display(&d.title).into_owned(),
            None => "Viewer".into(),
        }
    }

    fn hint_off(&self, action: &str) -> bool {
        let links = self.doc.as_ref().is_some_and(|d| !d.links.is_empty());
        !links
            && matches!(
                action,
                "viewer.next_link" | "viewer.prev_link" | "viewer.open_link"
            )
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Show(doc) => {
                self.stack.clear();
                self.back = None;
                self.cut = None;
                self.show((*doc).clone(), false);
            }
            PaneEvent::Open(target) => {
                self.loading = Some(target.to_string());
                let ws = cx.ws.clone();
                let theme = cx.theme.clone();
                let target = target.to_string();
                cx.spawn::<ViewerPane>(async move {
                    let (doc, cut) = load(ws, target, theme).await;
                    Loaded {
                        doc,
                        line: None,
                        cut,
                        part: None,
                    }
                });
            }
            PaneEvent::OpenAt { path, line, back } => {
                // A fresh view: what was open before is not returned to.
                self.stack.clear();
                self.doc = None;
                self.back = *back;
                self.loading = Some(path.to_string());
                let ws = cx.ws.clone();
                let theme = cx.theme.clone();
                let (target, line) = (path.to_string(), *line);
                cx.spawn::<ViewerPane>(async move {
                    let (doc, cut) = load(ws, target, theme).await;
                    Loaded {
                        doc,
                        line: Some(line),
                        cut,
                        part: None,
                    }
                });
            }
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        let Some(verb) = wheel_nav(ev) else {
            return false;
        };
        for _ in 0..3 {
            self.act(ViewerAction::Nav(verb), cx);
        }
        true
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let links = self.doc.as_ref().map(|d| d.links.len()).unwrap_or(0);
        let note = match (links, self.stack.len()) {
            (0, 0) => "esc close".to_string(),
            (0, _) => "esc back".to_string(),
            (n, _) => format!("{n} links · tab select · enter open · esc back"),
        };
        let block = cx.block_for(area, &self.title(), &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        self.height = inner.height as usize;
        let Some(doc) = &self.doc else {
            let msg = if self.loading.is_some() {
                "loading…"
            } else {
                "nothing to show"
            };
            placeholder(f, inner, msg, t.muted);
            return;
        };
        let sel_line = self
            .link
            .and_then(|l| doc.links.get(l))
            .map(|(i, _)| *i)
            .or(self.mark);
        if self.wrap {
            let lines: Vec<ratatui::text::Line<'_>> = doc
                .lines
                .iter()
                .enumerate()
                .skip(self.offset)
                .take(inner.height as usize)
                .map(|(i, l)| {
                    let ln = l.to_line(t.base);
                    if Some(i) == sel_line {
                        ln.patch_style(t.selection)
                    } else {
                        ln
                    }
                })
                .collect();
            f.render_widget(
                ratatui::widgets::Paragraph::new(lines)
                    .wrap(ratatui::widgets::Wrap { trim: false }),
                inner,
            );
            return;
        }
        let buf = f.buffer_mut();
        for (row, (i, l)) in doc
            .lines
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(inner.height as usize)
            .enumerate()
        {
            let y = inner.y + row as u16;
            let r = Rect::new(inner.x, y, inner.width, 1);
            let base = if Some(i) == sel_line {
                t.selection
            } else {
                t.base
            };
            if Some(i) == sel_line {
                buf.set_style(r, t.selection);
            }
            let mut ln = l.to_line(base);
            if Some(i) == sel_line {
                ln = ln.patch_style(t.selection);
            }
            buf.set_line(r.x, r.y, &ln, r.width);
        }
    }
}

impl TaskPane for ViewerPane {
    const ID: &'static str = ID;
    type Msg = Loaded;

    fn on_msg(&mut self, msg: Loaded, cx: &mut Ctx) {
        let Loaded {
            doc,
            line,
            cut,
            part,
        } = msg;
        self.loading = None;
        match part {
            // The other part of the same file: in place, the end at the
            // bottom of the screen.
            Some(tail) => {
                let len = doc.lines.len();
                self.doc = Some(doc);
                self.mark = None;
                self.link = None;
                self.offset = if tail {
                    len.saturating_sub(self.height.max(1))
                } else {
                    0
                };
            }
            None => self.show(doc, true),
        }
        self.cut = cut;
        if let Some(n) = line
            && !self.goto_line(n)
        {
            cx.toast(
                crate::tui::action::Level::Warn,
                format!(
                    "line {n} is past what the viewer read (the first {})",
                    text::human_size(MAX_VIEW_BYTES)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_lists_links() {
        let ctx = parse_context(
            br#"{"name":"u","content":[{"type":"text","text":"see"},{"type":"data","source":{"type":"url","url":"workspace:///data/ab.png","media_type":"image/png"},"name":"x.png"}],"role":"user","id":"1","created_at":"t"}
not json
"#,
        );
        let doc = conversation_doc("c", &ctx, &Theme::default());
        assert_eq!(doc.links.len(), 1);
        assert_eq!(doc.links[0].1, "workspace:///data/ab.png");
        assert!(
            doc.lines
                .iter()
                .any(|l| l.text.contains("line 2 is not a message"))
        );
        assert!(doc.lines[0].text.starts_with("── u (user)"));
    }

    #[test]
    fn links_in_plain_text() {
        let doc = text_doc(
            "t",
            "x <data url='workspace:///data/f.png' name='a'/>\n",
            false,
            &Theme::default(),
        );
        assert_eq!(doc.links, vec![(0, "workspace:///data/f.png".to_string())]);
    }
}
