//! The `?` help overlay, built from the live key map: the focused pane's
//! keys first, then the global ones, then every other pane's. Each row
//! names its action, which is the key to rebind it in `[tui.keys]`.
//! `/` and `?` search it as the viewer does (the shared [`Search`]
//! widget: `n` / `N`, smart case, matches highlighted, `3/17` in the bar);
//! Esc clears an applied search before it closes help.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Clear;

use crate::tui::keymap::{ActionSpec, GLOBAL, KeyMap, keys_label};
use crate::tui::pane::Ctx;
use crate::tui::theme::Theme;
use crate::tui::widgets::filter::FilterOutcome;
use crate::tui::widgets::search::{self, Search};
use crate::tui::widgets::text;

/// Keymap context of the overlay.
pub const ID: &str = "help";

crate::pane_action_enum! {
    /// An action of the overlay (an entry of [`ACTIONS`]).
    pub(crate) enum HelpAction in "help", no nav;
    // `?` searches backward here, as in the viewer; F1 closes (issue 19).
    Close => act("help.close", ID, "close help", &["esc", "q", "f1"], false, true),
    Search => act("help.search", ID, "search", &["/"], false, true),
    SearchBack => act("help.search_back", ID, "search backward", &["?"], false, false),
    NextMatch => act("help.next_match", ID, "next match", &["n"], false, false),
    PrevMatch => act("help.prev_match", ID, "previous match", &["N"], false, false),
    Down => act("help.down", ID, "scroll down", &["j", "down"], false, true),
    Up => act("help.up", ID, "scroll up", &["k", "up"], false, true),
    PageDown => act("help.page_down", ID, "page down", &["pgdn", "space"], false, true),
    PageUp => act("help.page_up", ID, "page up", &["pgup"], false, true),
    HalfDown => act("help.half_down", ID, "half a page down", &["ctrl-d"], false, false),
    HalfUp => act("help.half_up", ID, "half a page up", &["ctrl-u"], false, false),
    Top => act("help.top", ID, "first", &["g", "home"], false, false),
    Bottom => act("help.bottom", ID, "last", &["G", "end"], false, false),
}

/// Keys of the overlay.
pub const ACTIONS: &[ActionSpec] = HelpAction::TABLE;

enum Row {
    Section(String),
    Key {
        keys: String,
        desc: &'static str,
        name: &'static str,
        dangerous: bool,
    },
    Note(String),
}

/// State of the open help overlay.
pub struct HelpOverlay {
    rows: Vec<Row>,
    offset: usize,
    height: usize,
    /// The `/` search (typed or applied).
    search: Search,
    /// The row the last search found, marked.
    mark: Option<usize>,
}

/// Widest key column, in columns (a third of the overlay when narrower).
const KEY_COLUMNS: usize = 18;

impl Row {
    /// The text a search looks in: what the row shows, the key column
    /// not cut (so a match does not depend on the overlay's width).
    fn text(&self) -> String {
        match self {
            Row::Section(s) | Row::Note(s) => s.clone(),
            Row::Key {
                keys, desc, name, ..
            } => format!(" {keys}  {desc}  {name}"),
        }
    }

    /// The row as drawn, `key_w` columns for the keys, as styled spans.
    fn spans(&self, key_w: usize, t: &Theme) -> Vec<(String, Style)> {
        match self {
            Row::Section(s) => vec![(s.clone(), t.title_focused)],
            Row::Key {
                keys,
                desc,
                name,
                dangerous,
            } => {
                let mark = if *dangerous { "!" } else { " " };
                vec![
                    (format!(" {}", text::fit(keys, key_w)), t.key),
                    (format!("{mark} "), t.warn),
                    (desc.to_string(), t.base),
                    (format!("  {name}"), t.muted),
                ]
            }
            Row::Note(s) => vec![(s.clone(), t.muted)],
        }
    }
}

fn title_of(ctx: &str) -> String {
    match ctx {
        GLOBAL => "Everywhere".into(),
        "command.prompt" => "Command prompt (typing)".into(),
        other => {
            let mut c = other.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        }
    }
}

impl HelpOverlay {
    /// Builds the rows from `keymap`, `focused` context first.
    pub fn new(keymap: &KeyMap, focused: &str) -> Self {
        let mut contexts: Vec<&'static str> = Vec::new();
        for b in keymap.all() {
            if !contexts.contains(&b.spec.context) {
                contexts.push(b.spec.context);
            }
        }
        contexts.sort_by_key(|c| match *c {
            c if c == focused => 0,
            GLOBAL => 1,
            ID => 3,
            _ => 2,
        });
        let mut rows = Vec::new();
        for ctx in contexts {
            rows.push(Row::Section(title_of(ctx)));
            for b in keymap.bindings(ctx) {
                rows.push(Row::Key {
                    keys: if b.keys.is_empty() {
                        "(unbound)".into()
                    } else {
                        keys_label(&b.keys)
                    },
                    desc: b.spec.desc,
                    name: b.spec.name,
                    dangerous: b.spec.dangerous,
                });
            }
        }
        rows.push(Row::Section("One meaning per letter, in every pane".into()));
        for (key, meaning) in crate::tui::keymap::VERBS {
            rows.push(Row::Note(format!("  {key:<6} {meaning}")));
        }
        rows.push(Row::Section("Keys and config".into()));
        rows.push(Row::Note(
            "Rebind any action in the [tui.keys] table of config.toml:".into(),
        ));
        rows.push(Row::Note(
            "  \"app.quit\" = [\"q\", \"ctrl-q\"]   (wsbench info prints the config path)".into(),
        ));
        rows.push(Row::Note(
            "Actions marked ! change the workspace or run something; --read-only removes them."
                .into(),
        ));
        rows.push(Row::Note(
            "Delete, destroy, remove, re-run, kill and new workspace ask first; save, run,".into(),
        ));
        rows.push(Row::Note(
            "shell and demo runs act at once; upload, rename and add take their text first.".into(),
        ));
        rows.push(Row::Note(
            "In a text field keys type; Tab, Esc and ctrl/F keys still work.".into(),
        ));
        HelpOverlay {
            rows,
            offset: 0,
            height: 10,
            search: Search::default(),
            mark: None,
        }
    }

    /// True while the search prompt takes the keys (the app gives them
    /// to [`HelpOverlay::on_key`] before the key map).
    pub fn typing(&self) -> bool {
        self.search.editing
    }

    /// Marks the next (or previous, `reverse`) row holding the search,
    /// from the marked row or the top of the screen, wrapping around,
    /// and scrolls it into view; counts the matching rows for the bar.
    /// False when no row holds it.
    fn find(&mut self, reverse: bool) -> bool {
        let n = self.rows.len();
        let from = match self.mark {
            Some(m) => m,
            None if self.search.backward != reverse => self.offset,
            None => (self.offset + n).saturating_sub(1) % n.max(1),
        };
        let texts: Vec<String> = self.rows.iter().map(Row::text).collect();
        let q = self.search.clone();
        let hit = q.next(n, from, reverse, |i| q.matches(&texts[i]));
        self.search
            .set_count(n, hit.unwrap_or(from), |i| q.matches(&texts[i]));
        let Some(i) = hit else { return false };
        self.mark = Some(i);
        let h = self.height.max(1);
        if i < self.offset || i >= self.offset + h {
            self.offset = i.saturating_sub(h / 3);
            self.scroll(0);
        }
        true
    }

    /// The search's bar text (tests).
    pub fn search_label(&self) -> String {
        self.search.label()
    }

    /// Scrolls by `delta` rows.
    pub fn scroll(&mut self, delta: isize) {
        let max = self.rows.len().saturating_sub(self.height) as isize;
        self.offset = (self.offset as isize + delta).clamp(0, max.max(0)) as usize;
    }

    /// A bound action; false closes the overlay.
    pub fn on_action(&mut self, name: &str) -> bool {
        let page = self.height.max(1) as isize;
        match HelpAction::parse(name) {
            // Esc clears an applied search first, as in the viewer.
            Some(HelpAction::Close) if self.search.active() => {
                self.search.clear();
                self.mark = None;
            }
            Some(HelpAction::Close) => return false,
            Some(HelpAction::Search) => self.search.begin(false),
            Some(HelpAction::SearchBack) => self.search.begin(true),
            Some(a @ (HelpAction::NextMatch | HelpAction::PrevMatch)) if self.search.active() => {
                self.find(a == HelpAction::PrevMatch);
            }
            // No search yet: nothing to repeat.
            Some(HelpAction::NextMatch | HelpAction::PrevMatch) => {}
            Some(HelpAction::Down) => self.scroll(1),
            Some(HelpAction::Up) => self.scroll(-1),
            Some(HelpAction::PageDown) => self.scroll(page),
            Some(HelpAction::PageUp) => self.scroll(-page),
            Some(HelpAction::HalfDown) => self.scroll((page / 2).max(1)),
            Some(HelpAction::HalfUp) => self.scroll(-(page / 2).max(1)),
            Some(HelpAction::Top) => self.offset = 0,
            Some(HelpAction::Bottom) => self.scroll(isize::MAX / 2),
            None => {}
        }
        true
    }

    /// A key while the search prompt is open ([`HelpOverlay::typing`]):
    /// typed into it; Enter finds the first row holding it. Other keys
    /// (unbound ones outside the prompt) do nothing: home/end are bound
    /// to top/bottom with g/G.
    pub fn on_key(&mut self, key: &KeyEvent) {
        if self.search.key(key) == FilterOutcome::Done {
            self.mark = None;
            if self.search.active() {
                self.find(false);
            }
        }
    }

    /// Pasted text, into the search prompt while it is open.
    pub fn paste(&mut self, s: &str) {
        self.search.paste(s);
    }

    /// Draws the overlay centred in `area`.
    pub fn render(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        let w = area.width.saturating_sub(4).clamp(10, 100);
        let h = area.height.saturating_sub(2).max(3);
        let r = crate::tui::widgets::rect::centered(area, w, h);
        f.render_widget(Clear, r);
        let block = cx.block("Help", "esc closes · / search", true);
        let inner = block.inner(r);
        f.render_widget(block, r);
        let inner = search::bar(f, inner, &self.search, t.accent);
        self.height = inner.height as usize;
        self.scroll(0);
        let key_w = KEY_COLUMNS.min(inner.width as usize / 3);
        let buf = f.buffer_mut();
        for (row, (i, r)) in self
            .rows
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(inner.height as usize)
            .enumerate()
        {
            let spans = r.spans(key_w, t);
            let line = Line::from(
                spans
                    .iter()
                    .map(|(s, st)| Span::styled(s.as_str(), *st))
                    .collect::<Vec<_>>(),
            );
            let y = inner.y + row as u16;
            let area = Rect::new(inner.x, y, inner.width, 1);
            buf.set_line(area.x, y, &line, area.width);
            if Some(i) == self.mark {
                buf.set_style(area, t.selection);
            }
            let drawn: String = spans.iter().map(|(s, _)| s.as_str()).collect();
            search::highlight(buf, &self.search, &drawn, area.x, y, area.width, t.matched);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_moves_like_every_list() {
        // Every pane's table (not the app's own, which `tui::app` holds
        // above the panes): more than two pages of help to move through.
        let specs: Vec<ActionSpec> = crate::tui::panes::pane_actions();
        let (map, _) = KeyMap::build(&specs, &Default::default(), false);
        let mut h = HelpOverlay::new(&map, GLOBAL);
        h.height = 10;
        let max = h.rows.len() - 10;
        assert!(max > 20, "help is longer than two pages");
        for (key, want) in [
            ("G", max),
            ("g", 0),
            ("j", 1),
            ("ctrl-d", 6),
            ("ctrl-u", 1),
            ("k", 0),
            ("pgdn", 10),
            ("end", max),
            ("home", 0),
        ] {
            let chord = crate::tui::keymap::KeyChord::parse(key).expect(key);
            let spec = map
                .lookup(ID, chord)
                .unwrap_or_else(|| panic!("{key} unbound in help"));
            assert!(h.on_action(spec.name));
            assert_eq!(h.offset, want, "after {key}");
        }
    }

    fn press(h: &mut HelpOverlay, map: &KeyMap, key: &str) -> bool {
        let chord = crate::tui::keymap::KeyChord::parse(key).expect(key);
        if h.typing() {
            h.on_key(&KeyEvent::new(chord.code, chord.mods));
            return true;
        }
        let spec = map
            .lookup(ID, chord)
            .unwrap_or_else(|| panic!("{key} unbound in help"));
        h.on_action(spec.name)
    }

    /// The viewer's search in help: `/` types, Enter marks the first row
    /// holding it (scrolled into view), `n` / `N` move and wrap, `?`
    /// goes up, the count is in the bar, Esc clears the search and only
    /// then closes help.
    #[test]
    fn help_searches_like_the_viewer() {
        let specs: Vec<ActionSpec> = crate::tui::panes::pane_actions();
        let (map, _) = KeyMap::build(&specs, &Default::default(), false);
        let mut h = HelpOverlay::new(&map, GLOBAL);
        h.height = 10;
        let texts: Vec<String> = h.rows.iter().map(Row::text).collect();
        let want: Vec<usize> = (0..texts.len())
            .filter(|&i| texts[i].contains("search backward"))
            .collect();
        assert!(want.len() >= 3, "viewer, logs and help: {want:?}");
        assert!(press(&mut h, &map, "/"));
        for c in "search backward".chars() {
            h.on_key(&KeyEvent::from(ratatui::crossterm::event::KeyCode::Char(c)));
        }
        assert_eq!(h.search_label(), "/search backward▏");
        press(&mut h, &map, "enter");
        assert_eq!(h.mark, Some(want[0]));
        assert!(h.offset <= want[0] && want[0] < h.offset + 10, "in view");
        assert_eq!(
            h.search_label(),
            format!("/search backward  1/{}", want.len())
        );
        press(&mut h, &map, "n");
        assert_eq!(h.mark, Some(want[1]));
        press(&mut h, &map, "N");
        assert_eq!(h.mark, Some(want[0]));
        press(&mut h, &map, "N");
        assert_eq!(h.mark, Some(*want.last().unwrap()), "N wraps to the last");
        // `?` searches up from the mark.
        assert!(press(&mut h, &map, "?"));
        for c in "search backward".chars() {
            h.on_key(&KeyEvent::from(ratatui::crossterm::event::KeyCode::Char(c)));
        }
        press(&mut h, &map, "enter");
        assert_eq!(h.mark, Some(want[want.len() - 2]));
        // No match: said in the bar, nothing marked.
        press(&mut h, &map, "/");
        for c in "zzqx".chars() {
            h.on_key(&KeyEvent::from(ratatui::crossterm::event::KeyCode::Char(c)));
        }
        press(&mut h, &map, "enter");
        assert_eq!(h.search_label(), "/zzqx  no match");
        assert_eq!(h.mark, None);
        assert!(press(&mut h, &map, "esc"), "esc clears the search first");
        assert_eq!(h.search_label(), "/");
        assert!(!press(&mut h, &map, "esc"), "then closes");
    }
}
