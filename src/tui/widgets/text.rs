//! Text that is safe and correctly sized on a terminal.
//!
//! Everything the TUI shows that came from outside (file names, file
//! contents, messages, command output after the ANSI parser) goes through
//! [`display`] first:
//!
//! * it is composed to NFC, so a decomposed Hangul syllable (a width-2 lead
//!   jamo plus zero-width vowel jamo, as macOS stores names) becomes one
//!   width-2 syllable and is never split across cells (C21);
//! * C0 and C1 control characters and DEL are replaced by visible Control
//!   Pictures (`␛` for ESC), so nothing from the data can drive the
//!   terminal (C24) and what was there stays visible;
//! * tabs become spaces.

use std::borrow::Cow;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// Columns a tab stands for when text is shown.
pub const TAB_WIDTH: usize = 4;

pub use crate::root::safe_text::{control_picture, is_control};

/// Text ready for a terminal cell grid: NFC, no control characters, tabs
/// expanded. Borrows when nothing needs changing (the common case).
pub fn display(s: &str) -> Cow<'_, str> {
    let clean = !s.chars().any(is_control);
    let nfc = matches!(is_nfc_quick(s.chars()), IsNormalized::Yes);
    if clean && nfc {
        return Cow::Borrowed(s);
    }
    let composed: Cow<'_, str> = if nfc {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfc().collect())
    };
    if clean {
        return composed;
    }
    let mut out = String::with_capacity(composed.len());
    for c in composed.chars() {
        match c {
            '\t' => out.push_str(&" ".repeat(TAB_WIDTH)),
            c if is_control(c) => out.push(control_picture(c)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Display width in terminal columns of text that went through [`display`].
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// Cuts `s` to at most `max` columns, ending with `…` when something was
/// cut. Never splits a grapheme cluster.
pub fn truncate(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    let mut out = String::new();
    let mut used = 0;
    for g in s.graphemes(true) {
        let w = width(g);
        if used + w > max - 1 {
            break;
        }
        used += w;
        out.push_str(g);
    }
    out.push('…');
    Cow::Owned(out)
}

/// Cuts `s` from the left to at most `max` columns, starting with `…`
/// when something was cut (for paths, whose end matters most).
pub fn truncate_left(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    for g in s.graphemes(true).rev() {
        let w = width(g);
        if used + w > max - 1 {
            break;
        }
        used += w;
        kept.push(g);
    }
    let mut out = String::from("…");
    out.extend(kept.into_iter().rev());
    Cow::Owned(out)
}

/// Cuts `s` in the middle to at most `max` columns, with `…` where the
/// cut is: both ends stay, so names that share a long prefix
/// (`demo-long-20261129-101500`, `demo-long-20261129-113000`) stay
/// distinguishable.
pub fn truncate_middle(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max < 3 {
        return truncate(s, max).into_owned();
    }
    let tail_cols = (max - 1) / 2;
    let head_cols = max - 1 - tail_cols;
    let head = truncate(s, head_cols + 1);
    let head = head.strip_suffix('…').unwrap_or(&head);
    let tail = truncate_left(s, tail_cols + 1);
    let tail = tail.strip_prefix('…').unwrap_or(&tail);
    format!("{head}…{tail}")
}

/// Pads `s` with spaces to exactly `cols` columns (truncating first).
pub fn fit(s: &str, cols: usize) -> String {
    let t = truncate(s, cols);
    let pad = cols.saturating_sub(width(&t));
    let mut out = t.into_owned();
    out.extend(std::iter::repeat_n(' ', pad));
    out
}

/// Human size: `512 B`, `1.5 KiB`, `3.2 MiB` (the CLI's format too).
pub use crate::root::words::size as human_size;

/// Short relative age (`42s`, `5m`, `3h`, `2d`) of `then` seen from `now`,
/// both seconds since the Unix epoch; `-` when unknown.
pub fn age(then: Option<f64>, now: f64) -> String {
    let Some(t) = then else {
        return "-".into();
    };
    let s = (now - t).max(0.0) as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Duration in milliseconds as `850ms`, `1.2s`, `3m04s`.
pub fn duration_ms(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

pub use crate::root::words::count;

#[cfg(test)]
mod tests {
    #[test]
    fn middle_truncation_keeps_both_ends() {
        assert_eq!(truncate_middle("abcdef", 6), "abcdef");
        assert_eq!(
            truncate_middle("demo-long-20261129-101500", 13),
            "demo-l…101500"
        );
        assert_ne!(
            truncate_middle("demo-long-20261129-101500", 13),
            truncate_middle("demo-long-20261129-113000", 13)
        );
        assert!(width(&truncate_middle("日本語のテキスト", 7)) <= 7);
    }
    use super::*;

    #[test]
    fn nfd_hangul_composes_to_the_nfc_width() {
        let nfd =
            "\u{1100}\u{1161}\u{1102}\u{1161}\u{1103}\u{1161}\u{1105}\u{1161}\u{1106}\u{1161}";
        let shown = display(nfd);
        assert_eq!(shown, "가나다라마");
        assert_eq!(width(&shown), 10);
    }

    #[test]
    fn controls_become_visible_pictures() {
        assert_eq!(display("a\x1b[31mb\x07"), "a␛[31mb␇");
        assert_eq!(display("x\u{9b}y"), "x\u{fffd}y");
        assert_eq!(display("a\tb"), "a    b");
        assert!(matches!(display("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn truncation_respects_wide_characters() {
        assert_eq!(truncate("가나다라마", 5), "가나…");
        assert_eq!(width(&truncate("가나다라마", 5)), 5);
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcd", 3), "ab…");
        assert_eq!(truncate_left("/a/b/c/file.txt", 9), "…file.txt");
        assert_eq!(fit("ab", 4), "ab  ");
    }

    #[test]
    fn sizes_ages_and_durations() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(age(Some(100.0), 142.0), "42s");
        assert_eq!(age(None, 1.0), "-");
        assert_eq!(age(Some(0.0), 7200.0), "2h");
        assert_eq!(duration_ms(1200), "1.2s");
        assert_eq!(duration_ms(184_000), "3m04s");
    }
}
