//! Raw mode of the Command pane: a key press as the bytes a terminal
//! would send for it (the running command reads them from its stdin).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The bytes of `key`: UTF-8 for characters, `^X` control bytes with
/// Ctrl, `\n` for Enter (stdin is a pipe, not a terminal that maps CR),
/// DEL for Backspace, ESC sequences for arrows and Home/End; `None` for
/// keys with no byte form (F-keys, bare modifiers).
pub(super) fn key_bytes(key: &KeyEvent) -> Option<Vec<u8>> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let b: &[u8] = match key.code {
        KeyCode::Char(c) if ctrl && c.is_ascii_alphabetic() => {
            return Some(vec![(c.to_ascii_lowercase() as u8) & 0x1f]);
        }
        KeyCode::Char(c) => return Some(c.to_string().into_bytes()),
        KeyCode::Enter => b"\n",
        KeyCode::Tab => b"\t",
        KeyCode::Backspace => b"\x7f",
        KeyCode::Esc => b"\x1b",
        KeyCode::Up => b"\x1b[A",
        KeyCode::Down => b"\x1b[B",
        KeyCode::Right => b"\x1b[C",
        KeyCode::Left => b"\x1b[D",
        KeyCode::Home => b"\x1b[H",
        KeyCode::End => b"\x1b[F",
        _ => return None,
    };
    Some(b.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_terminal_bytes() {
        let k = |c, m| KeyEvent::new(c, m);
        assert_eq!(
            key_bytes(&k(KeyCode::Char('é'), KeyModifiers::NONE)),
            Some("é".into())
        );
        assert_eq!(
            key_bytes(&k(KeyCode::Char('d'), KeyModifiers::CONTROL)),
            Some(vec![4])
        );
        assert_eq!(
            key_bytes(&k(KeyCode::Enter, KeyModifiers::NONE)),
            Some(b"\n".to_vec())
        );
        assert_eq!(
            key_bytes(&k(KeyCode::Up, KeyModifiers::NONE)),
            Some(b"\x1b[A".to_vec())
        );
        assert_eq!(key_bytes(&k(KeyCode::F(1), KeyModifiers::NONE)), None);
    }
}
