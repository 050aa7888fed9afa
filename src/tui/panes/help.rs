//! The `?` help overlay, built from the live key map: the focused pane's
//! keys first, then the global ones, then every other pane's. Each row
//! names its action, which is the key to rebind it in `[tui.keys]`.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::tui::keymap::{ActionSpec, GLOBAL, KeyMap, keys_label};
use crate::tui::pane::Ctx;
use crate::tui::widgets::text;

/// Keymap context of the overlay.
pub const ID: &str = "help";

crate::pane_action_enum! {
    /// An action of the overlay (an entry of [`ACTIONS`]).
    pub(crate) enum HelpAction in "help", no nav;
    Close => act("help.close", ID, "close help", &["esc", "q", "?", "f1"], false, true),
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
        }
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
            Some(HelpAction::Close) => return false,
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

    /// An unbound key: none moves help any more (home/end are bound to
    /// top/bottom with g/G); kept so the app's overlay routing stays one
    /// shape.
    pub fn on_key(&mut self, _key: &KeyEvent) {}

    /// Draws the overlay centred in `area`.
    pub fn render(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        let w = area.width.saturating_sub(4).clamp(10, 100);
        let h = area.height.saturating_sub(2).max(3);
        let r = crate::tui::widgets::rect::centered(area, w, h);
        f.render_widget(Clear, r);
        let block = cx.block("Help", "esc closes · j/k scroll", true);
        let inner = block.inner(r);
        f.render_widget(block, r);
        self.height = inner.height as usize;
        self.scroll(0);
        let key_w = 18.min(inner.width as usize / 3);
        let lines: Vec<Line<'_>> = self
            .rows
            .iter()
            .skip(self.offset)
            .take(inner.height as usize)
            .map(|row| match row {
                Row::Section(s) => Line::from(Span::styled(s.clone(), t.title_focused)),
                Row::Key {
                    keys,
                    desc,
                    name,
                    dangerous,
                } => {
                    let mark = if *dangerous { "!" } else { " " };
                    Line::from(vec![
                        Span::styled(format!(" {}", text::fit(keys, key_w)), t.key),
                        Span::styled(format!("{mark} "), t.warn),
                        Span::styled(desc.to_string(), t.base),
                        Span::styled(format!("  {name}"), t.muted),
                    ])
                }
                Row::Note(s) => Line::from(Span::styled(s.clone(), t.muted)),
            })
            .collect();
        f.render_widget(Paragraph::new(lines), inner);
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
}
