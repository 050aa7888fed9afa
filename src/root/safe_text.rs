//! Text from a workspace or a server, made safe for a terminal: the one
//! rule both front ends use (the TUI's cell text in
//! `tui::widgets::text::display`, the CLI's printers through
//! `cli::output`). Skill descriptions, context text, MCP server output and
//! error bodies are data: an ESC from them must never reach the terminal
//! as itself (OSC 52 writes the clipboard, OSC 0 the title, `ESC [2J`
//! clears the screen; issue 14 point 3).
//!
//! C0 controls, DEL and C1 controls are replaced by visible stand-ins
//! (Unicode Control Pictures, `␛` for ESC), so what was there stays
//! visible. [`for_lines`] keeps `\n` and `\t` (multi-line CLI output).

use std::borrow::Cow;

/// True for characters that must never reach the terminal as themselves:
/// C0 (U+0000..U+001F), DEL and C1 (U+0080..U+009F).
pub fn is_control(c: char) -> bool {
    let u = c as u32;
    u < 0x20 || (0x7f..=0x9f).contains(&u)
}

/// The visible stand-in for a control character: the Unicode Control
/// Picture for C0 and DEL (`␛` for ESC, `␇` for BEL), `�` for C1.
pub fn control_picture(c: char) -> char {
    let u = c as u32;
    match u {
        0..=0x1f => char::from_u32(0x2400 + u).unwrap_or('\u{fffd}'),
        0x7f => '\u{2421}',
        _ => '\u{fffd}',
    }
}

/// `s` with every control character except `\n` and `\t` replaced by its
/// [`control_picture`]. Borrows when nothing needs changing.
pub fn for_lines(s: &str) -> Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t';
    if !s.chars().any(|c| is_control(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if is_control(c) && !keep(c) {
                    control_picture(c)
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// Bytes (any encoding) made safe the same way: valid UTF-8 goes through
/// [`for_lines`]; otherwise C0 bytes (but `\n`, `\t`) and DEL are replaced
/// by `?`, and so are the bytes 0x80..0x9F, which some terminals read as
/// C1 controls.
pub fn bytes_for_lines(b: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(b) {
        Ok(s) => match for_lines(s) {
            Cow::Borrowed(_) => Cow::Borrowed(b),
            Cow::Owned(o) => Cow::Owned(o.into_bytes()),
        },
        Err(_) => Cow::Owned(
            b.iter()
                .map(|&x| match x {
                    b'\n' | b'\t' => x,
                    0..=0x1f | 0x7f..=0x9f => b'?',
                    _ => x,
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_visible_and_lines_stay() {
        let s = "a\x1b]52;c;ZXZpbA==\x07b\x1b[2J\r\nnext\tcol\u{9b}";
        let out = for_lines(s);
        assert!(!out.chars().any(|c| is_control(c) && c != '\n' && c != '\t'));
        assert_eq!(out, "a␛]52;c;ZXZpbA==␇b␛[2J␍\nnext\tcol\u{fffd}");
        assert!(matches!(for_lines("plain\ttext\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_cleaned_too() {
        let out = bytes_for_lines(b"\xff\x1b[2J\n");
        assert_eq!(&*out, b"\xff?[2J\n");
    }
}
