//! The `/` filter of a list: a one-line input drawn at the bottom of the
//! pane, applied as the user types.
//!
//! Matching is fuzzy (nucleo, fzf's syntax: `cfg` matches `config.toml`;
//! words separated by spaces must all match; `'exact`, `^prefix`,
//! `suffix$`; `!word` excludes what holds `word`), case-insensitive
//! unless the filter has an upper-case letter ("smart case"). A list
//! keeps its own order: the filter drops rows, it does not rank them.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use std::cell::RefCell;

use nucleo_matcher::pattern::{Atom, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

use super::text;

thread_local! {
    /// One matcher per thread (its buffers are ~100 KiB: not one per
    /// filter, nor per row).
    static MATCHER: RefCell<(Matcher, Vec<char>)> =
        RefCell::new((Matcher::new(Config::DEFAULT), Vec::new()));
}

/// What a key did to the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOutcome {
    /// The key was not for the filter.
    Ignored,
    /// The text changed: re-filter.
    Changed,
    /// Editing ended (Enter keeps the text, Esc clears it).
    Done,
}

/// State of one filter.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Taking keys now.
    pub editing: bool,
    /// The filter text.
    pub text: String,
    /// The parsed words of `text` (all must match).
    atoms: Vec<Atom>,
}

impl Filter {
    /// Starts editing.
    pub fn begin(&mut self) {
        self.editing = true;
    }

    /// True when a non-empty filter applies.
    pub fn active(&self) -> bool {
        !self.text.is_empty() && self.text != "!"
    }

    /// Sets the text directly.
    pub fn set(&mut self, text: &str) {
        self.text = text.to_string();
        self.atoms = Pattern::parse(&self.text, CaseMatching::Smart, Normalization::Smart).atoms;
    }

    /// Handles a key while editing.
    pub fn key(&mut self, key: &KeyEvent) -> FilterOutcome {
        if !self.editing {
            return FilterOutcome::Ignored;
        }
        match key.code {
            KeyCode::Enter => {
                self.editing = false;
                FilterOutcome::Done
            }
            KeyCode::Esc => {
                self.editing = false;
                self.set("");
                FilterOutcome::Done
            }
            KeyCode::Backspace => {
                let mut t = self.text.clone();
                t.pop();
                self.set(&t);
                FilterOutcome::Changed
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.set("");
                FilterOutcome::Changed
            }
            KeyCode::Char(c)
                if !key.modifiers.contains(KeyModifiers::CONTROL)
                    && !key.modifiers.contains(KeyModifiers::ALT) =>
            {
                let t = format!("{}{c}", self.text);
                self.set(&t);
                FilterOutcome::Changed
            }
            // Keys that work in every text field (help, quit, focus) are
            // not the filter's to swallow.
            KeyCode::F(_) | KeyCode::Tab | KeyCode::BackTab | KeyCode::Char(_) => {
                FilterOutcome::Ignored
            }
            _ => FilterOutcome::Changed,
        }
    }

    /// Pasted text: newlines and tabs become spaces, other control
    /// characters (ESC) are dropped; nothing is submitted.
    pub fn paste(&mut self, s: &str) -> FilterOutcome {
        if !self.editing {
            return FilterOutcome::Ignored;
        }
        let t = format!("{}{}", self.text, one_line_paste(s));
        self.set(&t);
        FilterOutcome::Changed
    }

    /// Whether `s` passes the filter.
    pub fn matches(&self, s: &str) -> bool {
        if !self.active() {
            return true;
        }
        MATCHER.with(|m| {
            let (m, buf) = &mut *m.borrow_mut();
            let hay = Utf32Str::new(s, buf);
            self.atoms.iter().all(|a| a.score(hay, m).is_some())
        })
    }

    /// The bar text (`/text▏` while editing).
    pub fn label(&self) -> String {
        if self.editing {
            format!("/{}▏", text::display(&self.text))
        } else {
            format!("/{}", text::display(&self.text))
        }
    }
}

/// Pasted text for a one-line query field (the `/` filter, the viewer
/// search): line breaks and tabs become spaces, other control characters
/// (ESC and the like) are dropped, so a paste can neither submit nor
/// inject terminal escapes.
pub fn one_line_paste(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if text::is_control(c) => None,
            c => Some(c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventKind;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new_with_kind(code, KeyModifiers::NONE, KeyEventKind::Press)
    }

    #[test]
    fn fuzzy_smart_case_and_negation() {
        let mut f = Filter::default();
        f.begin();
        for c in "rea".chars() {
            assert_eq!(f.key(&k(KeyCode::Char(c))), FilterOutcome::Changed);
        }
        assert!(f.matches("README.md"));
        f.set("REA");
        assert!(f.matches("README.md"));
        assert!(!f.matches("readme"));
        f.set("!md");
        assert!(!f.matches("a.md"));
        assert!(f.matches("a.txt"));
        // Fuzzy, fzf's syntax: letters in order; words must all match.
        f.set("rdme");
        assert!(f.matches("README.md"));
        assert!(!f.matches("mder"));
        f.set("rea !txt");
        assert!(f.matches("README.md"));
        assert!(!f.matches("README.txt"));
        assert_eq!(f.key(&k(KeyCode::Esc)), FilterOutcome::Done);
        assert!(!f.active());
        assert_eq!(f.key(&k(KeyCode::Char('x'))), FilterOutcome::Ignored);
    }

    #[test]
    fn help_quit_and_focus_keys_pass_through_while_editing() {
        let mut f = Filter::default();
        f.begin();
        f.key(&k(KeyCode::Char('a')));
        for key in [
            k(KeyCode::F(1)),
            k(KeyCode::Tab),
            KeyEvent::new_with_kind(
                KeyCode::Char('q'),
                KeyModifiers::CONTROL,
                KeyEventKind::Press,
            ),
        ] {
            assert_eq!(f.key(&key), FilterOutcome::Ignored, "{key:?}");
        }
        assert!(f.editing);
        assert_eq!(f.label(), "/a▏");
        // Ctrl-U still clears the field.
        let ctrl_u = KeyEvent::new_with_kind(
            KeyCode::Char('u'),
            KeyModifiers::CONTROL,
            KeyEventKind::Press,
        );
        assert_eq!(f.key(&ctrl_u), FilterOutcome::Changed);
        assert_eq!(f.label(), "/▏");
    }

    #[test]
    fn paste_drops_control_characters() {
        let mut f = Filter::default();
        f.begin();
        f.paste("a\nb\x1b[31m");
        assert_eq!(f.text, "a b[31m");
    }
}
