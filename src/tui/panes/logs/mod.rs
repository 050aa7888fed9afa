//! Logs: the engine's event bus and the tracing log (stderr), in a
//! store bounded in lines and bytes (`log_buffer_lines`,
//! `log_buffer_bytes`), so memory stays flat. Lines are kept by level
//! (warn and error outlive info, info outlives debug) and shown in the
//! order they happened ([`store`]).
//!
//! Level filter (`l` cycles), source filter (`s`), follow / pause (`f`),
//! wrap (`w`), save to a host file (`S`), copy the selected line (`y`).
//! `/` and `?` search as in the viewer (the shared [`Search`] widget: a
//! substring of a line's source or message, smart case; `n` / `N` select
//! the next / previous line holding it in the search's direction, wrapping
//! around; matches highlighted, `3/17` in the bar; Esc clears it). The filtered view is kept incrementally (an
//! index of matching sequence numbers), so neither a new line nor a frame
//! ever scans the whole buffer; a frame draws the visible rows only.

mod events;
mod store;

pub(crate) use events::workspace_state;

use std::collections::{BTreeSet, VecDeque};

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::engine::events::Event;
use crate::tui::action::{DialogTag, Effect, Level, LogLine, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::Nav;
use crate::tui::pane::{Ctx, Pane, TaskPane, placeholder, wheel_nav};
use crate::tui::theme::Theme;
use crate::tui::widgets::filter::FilterOutcome;
use crate::tui::widgets::search::{self, Search};
use crate::tui::widgets::text;
use store::{Key, LogStore};

/// Pane id.
pub const ID: &str = "logs";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum LogsAction in "logs";
    Follow => act("logs.follow", ID, "follow / pause", &["f", "space"], false, true),
    Wrap => act("logs.wrap", ID, "wrap", &["w"], false, true),
    Level => act("logs.level", ID, "level filter", &["l"], false, true),
    Source => act("logs.source", ID, "source filter", &["s"], false, true),
    // The viewer's keys: `/`, `?`, `n`, `N` (issue 19).
    Search => act("logs.search", ID, "search", &["/"], false, true),
    SearchBack => act("logs.search_back", ID, "search backward", &["?"], false, false),
    Next => act("logs.next", ID, "next match", &["n"], false, false),
    Prev => act("logs.prev", ID, "previous match", &["N"], false, false),
    Copy => act("logs.copy", ID, "copy line", &["y", "c"], false, true),
    Save => act("logs.save", ID, "save to file", &["S"], false, true),
    Clear => act("logs.clear", ID, "clear", &["C"], false, false),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = LogsAction::TABLE;

/// The Logs pane.
pub struct LogsPane {
    store: LogStore,
    /// Keys of the lines that pass the filters, in order.
    filtered: VecDeque<(Key, Level)>,
    min_level: Level,
    source: Option<String>,
    sources: BTreeSet<String>,
    search: Search,
    follow: bool,
    wrap: bool,
    /// Selected entry, as an index into `filtered`.
    selected: usize,
    height: usize,
    output_chunks: u64,
}

impl LogsPane {
    /// A pane keeping at most `capacity` lines (no byte budget).
    pub fn new(capacity: usize) -> Self {
        Self::with_budget(capacity, usize::MAX)
    }

    /// A pane keeping at most `capacity` lines and `max_bytes` bytes of
    /// them (see [`store`] for what goes first).
    pub fn with_budget(capacity: usize, max_bytes: usize) -> Self {
        LogsPane {
            store: LogStore::new(capacity, max_bytes),
            filtered: VecDeque::new(),
            min_level: Level::Info,
            source: None,
            sources: BTreeSet::new(),
            search: Search::default(),
            follow: true,
            wrap: false,
            selected: 0,
            height: 10,
            output_chunks: 0,
        }
    }

    /// Lines held.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// True when no line is held.
    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    /// Bytes held (text and bookkeeping).
    pub fn bytes(&self) -> usize {
        self.store.bytes()
    }

    /// Every line held, in the order they happened, whatever the filters
    /// (tests read what reached the pane).
    pub fn lines(&self) -> impl Iterator<Item = &LogLine> {
        self.store.iter().map(|(_, l)| l)
    }

    /// Lines dropped so far, by level.
    pub fn dropped(&self) -> Vec<(Level, u64)> {
        self.store.dropped().collect()
    }

    /// Lines that pass the filters.
    pub fn filtered_len(&self) -> usize {
        self.filtered.len()
    }

    fn passes(&self, l: &LogLine) -> bool {
        l.level >= self.min_level
            && self
                .source
                .as_ref()
                .is_none_or(|s| l.source.starts_with(s.as_str()))
    }

    /// Adds a line where it belongs in time (the store drops the oldest
    /// line of the lowest level when full).
    pub fn push(&mut self, line: LogLine) {
        if self.sources.len() < 64 {
            let src = line.source.split(':').next().unwrap_or("").to_string();
            self.sources.insert(src);
        }
        let pass = self.passes(&line);
        let level = line.level;
        let (key, evicted) = self.store.push(line);
        // The new line itself may be the one evicted (the lowest level).
        let pass = pass && !evicted.iter().any(|(k, _)| *k == key);
        for (k, _) in evicted {
            if let Ok(pos) = self.filtered.binary_search_by(|(f, _)| f.cmp(&k)) {
                self.filtered.remove(pos);
                if pos < self.selected {
                    self.selected -= 1;
                }
            }
        }
        if pass {
            let pos = self.filtered.partition_point(|(f, _)| *f < key);
            self.filtered.insert(pos, (key, level));
            if pos <= self.selected && !self.follow && self.filtered.len() > 1 {
                self.selected += 1;
            }
        }
        if self.follow {
            self.selected = self.filtered.len().saturating_sub(1);
        }
    }

    fn refilter(&mut self) {
        let keep: VecDeque<(Key, Level)> = self
            .store
            .iter()
            .filter(|(_, l)| self.passes(l))
            .map(|(k, l)| (k, l.level))
            .collect();
        self.filtered = keep;
        self.selected = if self.follow {
            self.filtered.len().saturating_sub(1)
        } else {
            self.selected.min(self.filtered.len().saturating_sub(1))
        };
    }

    fn entry(&self, idx: usize) -> Option<&LogLine> {
        self.filtered
            .get(idx)
            .and_then(|&(k, level)| self.store.get(k, level))
    }

    fn format(l: &LogLine) -> String {
        let t: chrono::DateTime<chrono::Local> = l.at.into();
        format!(
            "{} {:<5} {:<10} {}",
            t.format("%H:%M:%S"),
            l.level.as_str(),
            l.source,
            l.message
        )
    }

    /// Whether line `i` of the filtered view holds the search (in its
    /// source or its message).
    fn hit(&self, i: usize) -> bool {
        self.entry(i)
            .is_some_and(|l| self.search.matches(&l.message) || self.search.matches(&l.source))
    }

    /// Selects the next line holding the search in its direction (`N`:
    /// `reverse`), from the selection, wrapping around, and counts the
    /// matching lines for the bar; false when none holds it. Scans the
    /// filtered lines (bounded by `log_buffer_lines`) once per key.
    fn find(&mut self, reverse: bool) -> bool {
        if !self.search.active() {
            return false;
        }
        let n = self.filtered.len();
        let q = self.search.clone();
        let hit = q.next(n, self.selected, reverse, |i| self.hit(i));
        let at = hit.unwrap_or(self.selected);
        let mut counted = q;
        counted.set_count(n, at, |i| self.hit(i));
        self.search = counted;
        match hit {
            Some(i) => {
                self.selected = i;
                self.follow = false;
                true
            }
            None => false,
        }
    }

    fn row_line<'a>(&self, l: &'a LogLine, t: &Theme) -> Line<'a> {
        let tm: chrono::DateTime<chrono::Local> = l.at.into();
        let msg = text::display(&l.message).into_owned();
        let mut spans = vec![
            Span::styled(format!("{} ", tm.format("%H:%M:%S")), t.muted),
            Span::styled(
                format!("{:<5} ", l.level.as_str()),
                t.level(l.level.as_str()),
            ),
            Span::styled(format!("{:<10} ", text::display(&l.source)), t.accent),
        ];
        spans.push(Span::styled(msg, t.base));
        Line::from(spans)
    }
}

/// Rows `line` takes wrapped at `width`, counted by ratatui's own
/// wrapping (the one that draws it: word wrap, not characters / width).
fn wrapped_rows(line: &Line<'_>, width: usize) -> usize {
    if width == 0 {
        return 1;
    }
    ratatui::widgets::Paragraph::new(line.clone())
        .wrap(ratatui::widgets::Wrap { trim: false })
        .line_count(width.min(u16::MAX as usize) as u16)
        .max(1)
}

impl LogsPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: LogsAction, cx: &mut Ctx) -> bool {
        let n = self.filtered.len();
        let page = self.height.max(1);
        match action {
            LogsAction::Nav(Nav::Down) => {
                self.selected = (self.selected + 1).min(n.saturating_sub(1))
            }
            LogsAction::Nav(Nav::Up) => self.selected = self.selected.saturating_sub(1),
            LogsAction::Nav(verb @ (Nav::PageDown | Nav::PageUp | Nav::HalfDown | Nav::HalfUp)) => {
                let rows = verb.page_rows(page).unwrap_or(0);
                self.selected = self
                    .selected
                    .saturating_add_signed(rows)
                    .min(n.saturating_sub(1));
            }
            LogsAction::Nav(Nav::Top) => self.selected = 0,
            LogsAction::Nav(Nav::Bottom) => self.selected = n.saturating_sub(1),
            LogsAction::Follow => {
                self.follow = !self.follow;
                if self.follow {
                    self.selected = n.saturating_sub(1);
                }
                return true;
            }
            LogsAction::Wrap => {
                self.wrap = !self.wrap;
                return true;
            }
            LogsAction::Level => {
                self.min_level = match self.min_level {
                    Level::Debug => Level::Info,
                    Level::Info => Level::Warn,
                    Level::Warn => Level::Error,
                    Level::Error => Level::Debug,
                };
                self.refilter();
                return true;
            }
            LogsAction::Source => {
                let known: Vec<&str> = self.sources.iter().map(String::as_str).collect();
                cx.effect(Effect::Prompt {
                    pane: ID,
                    title: format!("Show source (empty = all): {}", known.join(", ")),
                    initial: self.source.clone().unwrap_or_default(),
                    tag: DialogTag::LogSource,
                });
                return true;
            }
            LogsAction::Search | LogsAction::SearchBack => {
                self.search.begin(action == LogsAction::SearchBack);
                return true;
            }
            LogsAction::Next | LogsAction::Prev => {
                if !self.search.active() {
                    cx.toast(Level::Info, "no search: / or ? starts one");
                } else if !self.find(action == LogsAction::Prev) {
                    cx.toast(Level::Info, format!("no match for {}", self.search.text));
                }
                return true;
            }
            LogsAction::Copy => {
                if let Some(l) = self.entry(self.selected) {
                    cx.effect(Effect::Copy(Self::format(l)));
                }
                return true;
            }
            LogsAction::Save => {
                let name = format!(
                    "wsbench-logs-{}.txt",
                    chrono::Local::now().format("%Y%m%d-%H%M%S")
                );
                let initial = std::env::current_dir()
                    .unwrap_or_default()
                    .join(name)
                    .display()
                    .to_string();
                cx.effect(Effect::Prompt {
                    pane: ID,
                    title: "Save the shown log lines to host file".into(),
                    initial,
                    tag: DialogTag::LogSave,
                });
                return true;
            }
            LogsAction::Clear => {
                self.store.clear();
                self.filtered.clear();
                self.selected = 0;
                return true;
            }
        }
        // Moving the selection pauses following; reaching the end resumes.
        self.follow = self.selected + 1 >= n;
        true
    }
}

impl Pane for LogsPane {
    crate::task_pane_glue!(actions: LogsAction);

    fn title(&self) -> String {
        "Logs".into()
    }

    fn text_input_active(&self) -> bool {
        self.search.editing
    }

    fn blur(&mut self) {
        // The search typed so far stays applied, as after Enter.
        self.search.editing = false;
    }

    fn clear_filter(&mut self) -> bool {
        if self.search.editing || !self.search.active() {
            return false;
        }
        self.search.clear();
        true
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &mut Ctx) -> bool {
        match self.search.key(key) {
            FilterOutcome::Ignored => false,
            FilterOutcome::Changed => true,
            FilterOutcome::Done => {
                // Enter: the first line holding it after the selection
                // (before it for `?`); Esc cleared it.
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

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Engine(env) => {
                if let Event::CommandOutput { .. } = env.event {
                    self.output_chunks += 1;
                    return;
                }
                if let Some((level, source, mut message)) = Self::describe(&env.event) {
                    // One manager's workspaces share a bus: name the one a
                    // state change is about.
                    if let Event::Workspace { state } = &env.event {
                        message =
                            format!("workspace {}: {}", env.workspace, workspace_state(state));
                    }
                    self.push(LogLine {
                        at: env.at,
                        level,
                        source: format!("bus:{source}"),
                        message,
                    });
                }
            }
            PaneEvent::Missed(n) => self.push(LogLine::now(
                Level::Warn,
                "tui",
                format!("the TUI fell behind the event bus: {n} events dropped"),
            )),
            PaneEvent::File(c) => self.push(LogLine::now(
                Level::Debug,
                "watch",
                format!("{:?} {}", c.kind, c.path).to_lowercase(),
            )),
            PaneEvent::Log(l) => self.push((*l).clone()),
            PaneEvent::Input {
                tag: DialogTag::LogSource,
                text: input,
            } => {
                let s = input.trim();
                self.source = (!s.is_empty()).then(|| s.to_string());
                self.refilter();
            }
            PaneEvent::Input {
                tag: DialogTag::LogSave,
                text: input,
            } => {
                let path = std::path::PathBuf::from(input.trim());
                let body: String = self
                    .filtered
                    .iter()
                    .filter_map(|&(k, level)| self.store.get(k, level))
                    .map(|l| Self::format(l) + "\n")
                    .collect();
                let n = self.filtered.len();
                cx.spawn::<LogsPane>(async move {
                    let r = match tokio::fs::symlink_metadata(&path).await {
                        Ok(_) => Err(format!("{} exists: give a new path", path.display())),
                        Err(_) => tokio::fs::write(&path, body)
                            .await
                            .map(|_| {
                                format!(
                                    "saved {} to {}",
                                    text::count(n, "line", "lines"),
                                    path.display()
                                )
                            })
                            .map_err(|e| format!("{}: {e}", path.display())),
                    };
                    SaveDone(r)
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
            self.act(LogsAction::Nav(verb), cx);
        }
        true
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let mut note = vec![format!("≥{}", self.min_level.as_str())];
        if let Some(s) = &self.source {
            note.push(format!("src {s}"));
        }
        note.push(if self.follow {
            "follow".into()
        } else {
            "paused".into()
        });
        if self.wrap {
            note.push("wrap".into());
        }
        if self.store.dropped_total() > 0 {
            // Which levels were dropped: "dropped 58243 debug, 12 info".
            let by: Vec<String> = self
                .store
                .dropped()
                .filter(|(_, n)| *n > 0)
                .map(|(l, n)| format!("{n} {}", l.as_str()))
                .collect();
            note.push(format!("dropped {}", by.join(", ")));
        }
        let title = format!("Logs ({}/{})", self.filtered.len(), self.store.len());
        let block = cx.block_for(area, &title, &note.join(" · "), focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let list = search::bar(f, inner, &self.search, t.accent);
        self.height = list.height as usize;
        if self.filtered.is_empty() {
            placeholder(f, list, "no log lines", t.muted);
            return;
        }
        let n = self.filtered.len();
        self.selected = self.selected.min(n - 1);
        let h = list.height as usize;
        let w = list.width as usize;
        // Entries on screen: the selected one at the bottom when following
        // or below the view, else keep it in view from the top.
        let mut lines: Vec<(usize, Line<'_>)> = Vec::new();
        let mut rows = 0;
        let mut i = self.selected as isize;
        while i >= 0 && rows < h {
            let Some(l) = self.entry(i as usize) else {
                break;
            };
            let line = self.row_line(l, t);
            let r = if self.wrap { wrapped_rows(&line, w) } else { 1 };
            rows += r;
            lines.push((i as usize, line));
            i -= 1;
        }
        lines.reverse();
        // Fill below the selection when there is room (scrolled back).
        let mut j = self.selected + 1;
        while rows < h && j < n {
            let Some(l) = self.entry(j) else { break };
            let line = self.row_line(l, t);
            rows += if self.wrap { wrapped_rows(&line, w) } else { 1 };
            lines.push((j, line));
            j += 1;
        }
        // When wrapped rows overflow, drop from the top.
        let mut total: usize = lines
            .iter()
            .map(|(_, l)| if self.wrap { wrapped_rows(l, w) } else { 1 })
            .sum();
        while total > h && lines.len() > 1 && lines[0].0 < self.selected {
            let (_, l) = lines.remove(0);
            total -= if self.wrap { wrapped_rows(&l, w) } else { 1 };
        }
        let buf = f.buffer_mut();
        let mut y = list.y;
        let bottom = list.y + list.height;
        for (idx, line) in lines {
            if y >= bottom {
                break;
            }
            let sel = idx == self.selected && (focused || !self.follow);
            if self.wrap {
                let line = self.mark_wrapped(line, t);
                let para = ratatui::widgets::Paragraph::new(line.clone())
                    .wrap(ratatui::widgets::Wrap { trim: false });
                let hrows = wrapped_rows(&line, w).min((bottom - y) as usize) as u16;
                let r = Rect::new(list.x, y, list.width, hrows);
                ratatui::widgets::Widget::render(para, r, buf);
                if sel {
                    buf.set_style(r, t.selection);
                }
                y += hrows;
            } else {
                buf.set_line(list.x, y, &line, list.width);
                if sel {
                    buf.set_style(Rect::new(list.x, y, list.width, 1), t.selection);
                }
                if let Some(l) = self.entry(idx) {
                    self.mark_matches(buf, l, &line, Rect::new(list.x, y, list.width, 1), t);
                }
                y += 1;
            }
        }
    }
}

impl LogsPane {
    /// A row to be wrapped with the search's matches in its source and
    /// message spans (the third on) patched in: ratatui's word wrap
    /// decides the columns, so they are marked in the spans.
    fn mark_wrapped<'a>(&self, line: Line<'a>, t: &Theme) -> Line<'a> {
        if !self.search.active() {
            return line;
        }
        let mut spans = line.spans;
        let tail = spans.split_off(spans.len().min(2));
        let tail = search::highlight_spans(&self.search, Line::from(tail), t.matched);
        spans.extend(tail.spans);
        Line::from(spans)
    }

    /// Highlights the search in the source and message of `l`, drawn as
    /// `line` (time, level, source, message spans) in row `r` (a row that
    /// is not wrapped; see [`LogsPane::mark_wrapped`]).
    fn mark_matches(
        &self,
        buf: &mut ratatui::buffer::Buffer,
        l: &LogLine,
        line: &Line<'_>,
        r: Rect,
        t: &Theme,
    ) {
        if !self.search.active() {
            return;
        }
        let spans = &line.spans;
        let mut col = 0usize;
        for (i, sp) in spans.iter().enumerate() {
            // Spans 2 and 3 are the source (padded) and the message.
            let shown = match i {
                2 => Some(text::display(&l.source)),
                3 => Some(text::display(&l.message)),
                _ => None,
            };
            if let Some(shown) = shown
                && col < r.width as usize
            {
                search::highlight(
                    buf,
                    &self.search,
                    &shown,
                    r.x + col as u16,
                    r.y,
                    r.width - col as u16,
                    t.matched,
                );
            }
            col += text::width(&sp.content);
        }
    }
}

impl TaskPane for LogsPane {
    const ID: &'static str = ID;
    type Msg = SaveDone;

    fn on_msg(&mut self, msg: SaveDone, cx: &mut Ctx) {
        let SaveDone(r) = &msg;
        match r {
            Ok(m) => cx.toast(Level::Info, m.clone()),
            Err(e) => cx.toast(Level::Error, e.clone()),
        }
    }
}

pub(crate) struct SaveDone(Result<String, String>);

#[cfg(test)]
mod tests;
