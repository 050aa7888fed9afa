//! Cutting text to a budget without splitting a character.
//!
//! Every layer cuts user and workspace text (ids in headers, log lines,
//! error messages) to a size. Slicing a `str` at a byte index panics when
//! the index falls inside a multi-byte character (`:ws a日本語日本` did), so
//! every such cut goes through these two helpers. They live in the bottom
//! layer so that each layer above can use them.

use unicode_width::UnicodeWidthChar;

/// The longest prefix of `s` that is at most `max` bytes and ends on a
/// character boundary (a character that would straddle `max` is dropped
/// whole). `&s[..max]` when `max` already is a boundary.
pub fn head_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest prefix of `s` that is at most `cols` terminal columns wide
/// (by `unicode-width`; control characters count 0, a wide character that
/// would straddle `cols` is dropped whole).
pub fn head_cols(s: &str, cols: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += c.width().unwrap_or(0);
        if used > cols {
            return &s[..i];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_never_split_a_character() {
        let s = "a日本語日本";
        for max in 0..=s.len() + 2 {
            let h = head_bytes(s, max);
            assert!(h.len() <= max && s.starts_with(h), "{max}: {h:?}");
        }
        assert_eq!(head_bytes(s, 3), "a");
        assert_eq!(head_bytes(s, 4), "a日");
        assert_eq!(head_bytes("abc", 12), "abc");
    }

    #[test]
    fn columns_count_wide_characters_twice() {
        assert_eq!(head_cols("a日本", 2), "a");
        assert_eq!(head_cols("a日本", 3), "a日");
        assert_eq!(head_cols("e\u{301}x", 1), "e\u{301}");
        assert_eq!(head_cols("abc", 9), "abc");
        assert_eq!(head_cols("abc", 0), "");
    }
}
