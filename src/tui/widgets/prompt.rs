//! The multi-line prompt of the Command and Agent panes: a text area with
//! a placeholder, the keys it leaves to the key map, cleaned pastes, and
//! the Up/Down "edges" the Command pane turns into history steps.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui_textarea::{CursorMove, TextArea};

use super::paste::clean_paste;

/// Rows a prompt grows to before it scrolls.
pub const MAX_ROWS: u16 = 5;

/// A prompt field: its text and the placeholder it shows when empty.
#[derive(Debug, Clone)]
pub struct PromptField {
    area: TextArea<'static>,
    placeholder: &'static str,
}

impl PromptField {
    /// An empty prompt showing `placeholder`.
    pub fn new(placeholder: &'static str) -> Self {
        let mut area = TextArea::default();
        area.set_placeholder_text(placeholder);
        area.set_cursor_line_style(Style::default());
        PromptField { area, placeholder }
    }

    /// The lines typed so far (at least one, maybe empty).
    pub fn lines(&self) -> &[String] {
        self.area.lines()
    }

    /// The text, lines joined with `\n`.
    pub fn text(&self) -> String {
        self.area.lines().join("\n")
    }

    /// The cursor as (row, column), in chars.
    pub fn cursor(&self) -> (usize, usize) {
        let c = self.area.cursor();
        (c.0, c.1)
    }

    /// Empties the prompt (after it was sent, or on Esc), placeholder
    /// and all restored.
    pub fn clear(&mut self) {
        *self = PromptField::new(self.placeholder);
    }

    /// Replaces the text with `lines`, the cursor at the end (a history
    /// entry, the draft).
    pub fn set_lines(&mut self, lines: &[String]) {
        self.clear();
        self.area.insert_str(lines.join("\n"));
        self.area.move_cursor(CursorMove::Bottom);
        self.area.move_cursor(CursorMove::End);
    }

    /// Shows `text` instead of the placeholder until the next
    /// [`PromptField::clear`] (read-only mode says why nothing runs).
    pub fn set_placeholder(&mut self, text: &'static str) {
        self.area.set_placeholder_text(text);
    }

    /// A line break at the cursor (the key map's "new line").
    pub fn insert_newline(&mut self) {
        self.area.insert_newline();
    }

    /// True for the keys the prompt leaves to the key map: send, new
    /// line, leave, focus, scroll, kill, stop, quit, help.
    pub fn leaves(key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Enter | KeyCode::Esc | KeyCode::Tab | KeyCode::BackTab => true,
            KeyCode::F(_) | KeyCode::PageUp | KeyCode::PageDown => true,
            KeyCode::Char('c' | 'q' | 'j' | 'z' | 'l') => ctrl,
            _ => false,
        }
    }

    /// Up on the first row (-1) or Down on the last row (+1): the key
    /// leaves the text (the Command pane steps through its history).
    pub fn edge(&self, key: &KeyEvent) -> Option<isize> {
        match key.code {
            KeyCode::Up if self.cursor().0 == 0 => Some(-1),
            KeyCode::Down if self.cursor().0 + 1 >= self.lines().len() => Some(1),
            _ => None,
        }
    }

    /// An editing key; false for the keys [`PromptField::leaves`] to the
    /// key map. Ctrl chords are a shell's (readline's), not the text
    /// area's defaults: ctrl-u deletes to the start of the line (the text
    /// area would undo), ctrl-k to its end, ctrl-w the word before the
    /// cursor, ctrl-a/ctrl-e go to its start/end. Undo is the editor's
    /// (ctrl-z/ctrl-y), not the prompt's: ctrl-z suspends like a shell job.
    pub fn key(&mut self, key: &KeyEvent) -> bool {
        if Self::leaves(key) {
            return false;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('u') if ctrl => {
                self.area.delete_line_by_head();
            }
            KeyCode::Char('k') if ctrl => {
                self.area.delete_line_by_end();
            }
            KeyCode::Char('w') if ctrl => {
                self.area.delete_word();
            }
            KeyCode::Char('a') if ctrl => self.area.move_cursor(CursorMove::Head),
            KeyCode::Char('e') if ctrl => self.area.move_cursor(CursorMove::End),
            // ctrl-r is the text area's redo: with no undo in the prompt
            // there is nothing to redo, so it types nothing.
            KeyCode::Char('r') if ctrl => {}
            _ => {
                self.area.input(*key);
            }
        }
        true
    }

    /// Inserts pasted text at the cursor: line ends kept (a paste never
    /// sends), other control characters shown as pictures.
    pub fn paste(&mut self, s: &str) {
        self.area.insert_str(clean_paste(s));
    }

    /// Rows it wants: one per line, 1 to [`MAX_ROWS`].
    pub fn rows(&self) -> u16 {
        self.lines().len().clamp(1, MAX_ROWS as usize) as u16
    }

    /// Draws it in `area`: text in `style`, the placeholder in
    /// `placeholder`, the cursor in `cursor`.
    pub fn render(
        &mut self,
        f: &mut Frame<'_>,
        area: Rect,
        style: Style,
        placeholder: Style,
        cursor: Style,
    ) {
        self.area.set_style(style);
        self.area.set_placeholder_style(placeholder);
        self.area.set_cursor_style(cursor);
        f.render_widget(&self.area, area);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventKind;

    fn k(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new_with_kind(code, m, KeyEventKind::Press)
    }

    #[test]
    fn ctrl_keys_are_a_shells() {
        let ctrl = |c| k(KeyCode::Char(c), KeyModifiers::CONTROL);
        let mut p = PromptField::new("type");
        p.set_lines(&["echo hello world".to_string()]);
        // ctrl-w: the word before the cursor.
        assert!(p.key(&ctrl('w')));
        assert_eq!(p.text(), "echo hello ");
        // ctrl-a, then ctrl-k: all after the start of the line.
        p.key(&ctrl('a'));
        assert_eq!(p.cursor(), (0, 0));
        p.key(&ctrl('e'));
        assert_eq!(p.cursor(), (0, 11));
        for _ in 0..6 {
            p.key(&k(KeyCode::Left, KeyModifiers::NONE));
        }
        p.key(&ctrl('k'));
        assert_eq!(p.text(), "echo ");
        // ctrl-u clears to the start of the line, not one character of
        // undo; ctrl-r does not bring it back.
        p.key(&k(KeyCode::Char('x'), KeyModifiers::NONE));
        p.key(&ctrl('u'));
        assert_eq!((p.text().as_str(), p.cursor()), ("", (0, 0)));
        p.key(&ctrl('r'));
        assert_eq!(p.text(), "");
        // ctrl-z is the key map's (suspend), not an undo.
        assert!(!p.key(&ctrl('z')));
    }

    #[test]
    fn keys_edit_or_go_to_the_key_map() {
        let mut p = PromptField::new("type");
        for c in "ls".chars() {
            assert!(p.key(&k(KeyCode::Char(c), KeyModifiers::NONE)));
        }
        for key in [
            k(KeyCode::Enter, KeyModifiers::NONE),
            k(KeyCode::Esc, KeyModifiers::NONE),
            k(KeyCode::F(1), KeyModifiers::NONE),
            k(KeyCode::Char('c'), KeyModifiers::CONTROL),
        ] {
            assert!(!p.key(&key), "{key:?}");
        }
        // Other ctrl chords are the text area's (ctrl-e: end of line).
        assert!(p.key(&k(KeyCode::Char('e'), KeyModifiers::CONTROL)));
        assert_eq!(p.text(), "ls");
        p.insert_newline();
        p.paste("a\r\nb\x1b");
        assert_eq!(p.lines(), ["ls", "a", "b\u{241b}"]);
        assert_eq!(p.rows(), 3);
        p.clear();
        assert_eq!(p.text(), "");
        assert_eq!(p.rows(), 1);
    }

    #[test]
    fn edges_are_up_on_the_first_row_and_down_on_the_last() {
        let mut p = PromptField::new("type");
        let up = k(KeyCode::Up, KeyModifiers::NONE);
        let down = k(KeyCode::Down, KeyModifiers::NONE);
        assert_eq!((p.edge(&up), p.edge(&down)), (Some(-1), Some(1)));
        p.set_lines(&["a".into(), "b".into()]);
        assert_eq!(p.cursor(), (1, 1));
        assert_eq!((p.edge(&up), p.edge(&down)), (None, Some(1)));
    }
}
