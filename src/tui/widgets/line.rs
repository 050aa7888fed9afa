//! A one-line text field with a cursor, for the app's input dialogs
//! (rename, upload path, MCP add, tool-call JSON): initial text can be
//! edited in the middle, not only from its end.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::text;

/// Text and a cursor (a char index, `0..=len`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineEdit {
    text: String,
    cursor: usize,
}

impl LineEdit {
    /// A field holding `initial`, the cursor at its end.
    pub fn new(initial: impl Into<String>) -> Self {
        let text = initial.into();
        let cursor = text.chars().count();
        LineEdit { text, cursor }
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Takes the text out.
    pub fn into_text(self) -> String {
        self.text
    }

    /// The cursor as a char index.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    fn byte_at(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map_or(self.text.len(), |(i, _)| i)
    }

    /// Inserts `s` (already one line) at the cursor.
    pub fn insert_str(&mut self, s: &str) {
        let at = self.byte_at(self.cursor);
        self.text.insert_str(at, s);
        self.cursor += s.chars().count();
    }

    /// An editing key; false for keys it leaves to the caller (Enter,
    /// Esc, F-keys, other ctrl chords).
    pub fn key(&mut self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let len = self.text.chars().count();
        match key.code {
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(len),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = len,
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = len,
            KeyCode::Char('u') if ctrl => {
                self.text.clear();
                self.cursor = 0;
            }
            KeyCode::Backspace => {
                if self.cursor > 0 {
                    let at = self.byte_at(self.cursor - 1);
                    self.text.remove(at);
                    self.cursor -= 1;
                }
            }
            KeyCode::Delete => {
                if self.cursor < len {
                    let at = self.byte_at(self.cursor);
                    self.text.remove(at);
                }
            }
            KeyCode::Char(c) if !ctrl && !key.modifiers.contains(KeyModifiers::ALT) => {
                let mut b = [0u8; 4];
                self.insert_str(c.encode_utf8(&mut b));
            }
            _ => return false,
        }
        true
    }

    /// What to draw in `width` columns and the cursor's column in it: the
    /// whole text when it fits, else a window that keeps the cursor in
    /// view (control characters shown as pictures).
    pub fn view(&self, width: usize) -> (String, usize) {
        let width = width.max(1);
        let at = self.byte_at(self.cursor);
        let before = text::display(&self.text[..at]).into_owned();
        let after = text::display(&self.text[at..]).into_owned();
        // The cursor needs a column of its own.
        let left = text::truncate_left(&before, width - 1).into_owned();
        let col = text::width(&left);
        // What follows is cut without a mark: a `…` would sit where the
        // text under the cursor is.
        let room = width - col;
        let mut used = 0;
        let rest: String = after
            .chars()
            .take_while(|c| {
                used += text::width(c.encode_utf8(&mut [0u8; 4]));
                used <= room
            })
            .collect();
        (format!("{left}{rest}"), col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventKind;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new_with_kind(code, KeyModifiers::NONE, KeyEventKind::Press)
    }

    #[test]
    fn edits_in_the_middle() {
        let mut l = LineEdit::new("{}");
        assert!(l.key(&k(KeyCode::Left)));
        for c in "\"text\":\"héllo\"".chars() {
            l.key(&k(KeyCode::Char(c)));
        }
        assert_eq!(l.text(), "{\"text\":\"héllo\"}");
        l.key(&k(KeyCode::Home));
        l.key(&k(KeyCode::Delete));
        assert_eq!(l.text(), "\"text\":\"héllo\"}");
        l.key(&k(KeyCode::End));
        l.key(&k(KeyCode::Backspace));
        assert_eq!(l.text(), "\"text\":\"héllo\"");
        assert!(!l.key(&k(KeyCode::Enter)));
        assert!(!l.key(&k(KeyCode::F(1))));
        let ctrl_u = KeyEvent::new_with_kind(
            KeyCode::Char('u'),
            KeyModifiers::CONTROL,
            KeyEventKind::Press,
        );
        l.key(&ctrl_u);
        assert_eq!((l.text(), l.cursor()), ("", 0));
    }

    #[test]
    fn the_view_keeps_the_cursor_visible() {
        let mut l = LineEdit::new("abcdefghij");
        assert_eq!(l.view(20), ("abcdefghij".to_string(), 10));
        // Too long: the window ends at the cursor.
        assert_eq!(l.view(5), ("…hij".to_string(), 4));
        l.key(&k(KeyCode::Home));
        let (shown, col) = l.view(5);
        assert_eq!((shown.as_str(), col), ("abcde", 0));
        l.insert_str("\u{1b}");
        let (shown, _) = l.view(20);
        assert!(shown.starts_with('␛'), "{shown}");
    }
}
