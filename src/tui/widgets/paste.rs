//! Pasted text made safe for a field: a paste is inserted as text and
//! never interpreted (C23).

use super::text;

/// Pasted text for a multi-line field: CRLF and CR (what terminals and
/// tmux send for a newline in a paste) become LF, other control
/// characters (ESC of a pasted colour code) become visible pictures, so a
/// paste is inserted as text and never interpreted (C23).
pub fn clean_paste(s: &str) -> String {
    s.replace("\r\n", "\n")
        .replace('\r', "\n")
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if text::is_control(c) => text::control_picture(c),
            c => c,
        })
        .collect()
}

/// Pasted text for a one-line field: newlines become spaces and other
/// control characters are dropped (C23).
pub fn single_line(s: &str) -> String {
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

    #[test]
    fn paste_is_text_only() {
        assert_eq!(clean_paste("a\r\nb\x1b[31m"), "a\nb␛[31m");
        assert_eq!(clean_paste("a\rb\rc"), "a\nb\nc");
    }
}
