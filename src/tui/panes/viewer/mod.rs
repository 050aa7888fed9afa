//! The full-screen viewer: a `context.jsonl` as a conversation, a tool
//! result or text file with line numbers, a rendered `SKILL.md`, or a
//! blob's metadata. `workspace:///` links in a document can be selected
//! (Tab) and opened (Enter), which shows that blob's metadata; Esc goes
//! back through what was opened, then closes. `/` and `?` search as in
//! `less` (the shared [`Search`] widget: a substring, smart case; `n` /
//! `N` for the next / previous line holding it in the search's direction,
//! wrapping around; matches highlighted, wrapped lines too, `3/17` in
//! the bar), the line
//! found marked; Esc clears an applied search before it goes back.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};

use crate::backend::ByteRange;
use crate::engine::layout::names;
use crate::engine::message::{Block, DataSource, Msg, ToolOutput};
use crate::engine::sessions::{ContextRead, parse_context};
use crate::tui::action::{Doc, Effect, Level, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::Nav;
use crate::tui::pane::{Ctx, Pane, TaskPane, placeholder, wheel_nav};
use crate::tui::theme::Theme;
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::filter::FilterOutcome;
use crate::tui::widgets::search::{self, Search};
use crate::tui::widgets::text;

mod docs;

pub use docs::{conversation_doc, load_doc, text_doc};
use docs::{load, load_tail};

/// Pane id.
pub const ID: &str = "viewer";

/// Largest text shown whole (1 MiB); longer files show their start, and
/// `G` reads their end (one ranged read of this many bytes).
pub const MAX_VIEW_BYTES: u64 = 1024 * 1024;

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum ViewerAction in "viewer";
    Back => act("viewer.back", ID, "back / close", &["esc", "q"], false, true),
    NextLink => act("viewer.next_link", ID, "next link", &["tab"], false, true),
    PrevLink => act("viewer.prev_link", ID, "previous link", &["shift-tab"], false, false),
    // `/`, `n`, `N` as in less and vim (issue 22).
    Search => act("viewer.search", ID, "search", &["/"], false, true),
    SearchBack => act("viewer.search_back", ID, "search backward", &["?"], false, false),
    NextMatch => act("viewer.next_match", ID, "next match", &["n"], false, false),
    PrevMatch => act("viewer.prev_match", ID, "previous match", &["N"], false, false),
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
    /// The `/` search (typed or applied).
    search: Search,
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
            search: Search::default(),
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

    /// Marks the next (or previous) line holding the search, from the
    /// marked line or the top of the screen, wrapping around; false when
    /// no line holds it.
    fn find(&mut self, reverse: bool) -> bool {
        let Some(doc) = &self.doc else { return false };
        let n = doc.lines.len();
        let from = match self.mark {
            Some(m) => m,
            // From the top of the screen: forward finds it first, `?`
            // the first line above it.
            None if self.search.backward != reverse => self.offset,
            None => (self.offset + n).saturating_sub(1) % n.max(1),
        };
        let lines = &doc.lines;
        let q = self.search.clone();
        let hit = q.next(n, from, reverse, |i| q.matches(&lines[i].text));
        self.search
            .set_count(n, hit.unwrap_or(from), |i| q.matches(&lines[i].text));
        match hit {
            Some(i) => self.goto_line(i + 1),
            None => false,
        }
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
            ViewerAction::Nav(
                verb @ (Nav::PageDown | Nav::PageUp | Nav::HalfDown | Nav::HalfUp),
            ) => {
                let rows = verb.page_rows(h).unwrap_or(0);
                self.offset = self.offset.saturating_add_signed(rows).min(max);
            }
            ViewerAction::Back if self.search.active() => self.search.clear(),
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
                cx.toast(Level::Info, m);
            }
            ViewerAction::Search => self.search.begin(false),
            ViewerAction::SearchBack => self.search.begin(true),
            ViewerAction::NextMatch | ViewerAction::PrevMatch => {
                if !self.search.active() {
                    cx.toast(Level::Info, "no search: / or ? starts one");
                } else if !self.find(action == ViewerAction::PrevMatch) {
                    cx.toast(Level::Info, format!("no match for {}", self.search.text));
                }
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

    fn text_input_active(&self) -> bool {
        self.search.editing
    }

    fn blur(&mut self) {
        // The search typed so far stays applied, as after Enter.
        self.search.editing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &mut Ctx) -> bool {
        match self.search.key(key) {
            FilterOutcome::Ignored => false,
            FilterOutcome::Changed => true,
            FilterOutcome::Done => {
                // Enter: the first line holding it, from the mark or the
                // top of the screen; Esc cleared it.
                if self.search.active() && !self.find(false) {
                    cx.toast(Level::Info, format!("no match for {}", self.search.text));
                }
                true
            }
        }
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        self.search.paste(s) != FilterOutcome::Ignored
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
        let inner = search::bar(f, inner, &self.search, cx.theme.accent);
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
                    let ln = search::highlight_spans(&self.search, l.to_line(t.base), t.matched);
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
            search::highlight(buf, &self.search, &l.text, r.x, r.y, r.width, t.matched);
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
