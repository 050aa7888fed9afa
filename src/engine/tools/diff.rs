//! The `diff` metadata of Write and Edit (docs/contract.md §3.3/§3.4): a
//! unified diff with 3 lines of context, like the reference's `difflib`
//! output, but computed only where the texts differ and bounded in size.
//!
//! Why: the reference (and wsbench before issue 18) diffed the whole old
//! and new text, so writing a new 1 MiB file spent most of its time in a
//! line diff against an empty text, and one changed line of a 1 MiB file
//! diffed the whole file; the result carried a diff as large as the file.
//!
//! * A new (or unreadable, see Write) old side is written out directly as
//!   one all-`+` hunk, stopping at the byte budget: no diff algorithm runs.
//! * Otherwise the common leading and trailing lines are cut off (all but
//!   the 3 context lines a hunk shows) and only the middle goes through
//!   `similar`; hunk headers are shifted back to the file's line numbers.
//!   The text is the same as the whole-file diff's: `similar` strips the
//!   common ends itself, so its Myers run sees the same middle.
//! * The diff text stops at [`DIFF_META_BYTES`], at a line boundary, and
//!   then ends with a line `\ [diff cut: …]` saying what was left out;
//!   [`BoundedDiff::cut`] tells the caller to flag it in metadata.
//!
//! Lines end at `\n`, `\r\n` or a lone `\r`, as `similar` splits them.

use std::fmt::Write as _;

use similar::{Algorithm, TextDiff};

use super::textfile::DIFF_TIMEOUT;

/// Most bytes of diff text kept in a tool result's metadata (64 KiB).
pub const DIFF_META_BYTES: usize = 64 * 1024;

/// Context lines around each change (difflib's default `n=3`).
const CONTEXT: usize = 3;

/// A diff for metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedDiff {
    /// Unified diff text; empty when nothing changed.
    pub text: String,
    /// The text was cut at the byte budget (its last line says so).
    pub cut: bool,
}

/// The lines of `s`, each with its ending (`\n`, `\r\n` or `\r`).
fn lines(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        let end = match b[i] {
            b'\r' if b.get(i + 1) == Some(&b'\n') => i + 2,
            b'\r' | b'\n' => i + 1,
            _ => {
                i += 1;
                continue;
            }
        };
        out.push(&s[start..end]);
        start = end;
        i = end;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// difflib's range: `start+1` (1-based) and a length unless it is 1; an
/// empty range names the line before it.
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

/// A `String` that takes text until `max` bytes, then refuses more (so
/// `similar`'s formatter stops early instead of rendering everything).
struct Capped {
    out: String,
    max: usize,
    full: bool,
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.out.len() + s.len() > self.max {
            self.full = true;
            return Err(std::fmt::Error);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// Ends a cut diff: drops a partial last line, then states the cut.
fn finish_cut(mut text: String, what: &str) -> BoundedDiff {
    let keep = text.rfind('\n').map_or(0, |i| i + 1);
    text.truncate(keep);
    let _ = writeln!(text, "\\ [diff cut: {what}]");
    BoundedDiff { text, cut: true }
}

/// The diff of a file created with `new` (old side empty): one hunk of
/// `+` lines, written directly and stopped at `max` bytes.
fn all_added(new: &str, from: &str, to: &str, max: usize) -> BoundedDiff {
    if new.is_empty() {
        return BoundedDiff {
            text: String::new(),
            cut: false,
        };
    }
    let lines = lines(new);
    let mut text = String::with_capacity(new.len().min(max) + 128);
    let _ = write!(
        text,
        "--- {from}\n+++ {to}\n@@ -0,0 +{} @@\n",
        range(0, lines.len())
    );
    for (i, line) in lines.iter().enumerate() {
        if text.len() + line.len() + 1 > max {
            let rest = lines.len() - i;
            return finish_cut(
                text,
                &format!(
                    "{rest} more added lines, {} bytes",
                    new.len() - offset(new, line)
                ),
            );
        }
        text.push('+');
        text.push_str(line);
        if !line.ends_with(['\n', '\r']) {
            text.push_str("\n\\ No newline at end of file\n");
        }
    }
    BoundedDiff { text, cut: false }
}

/// Byte offset of `part` (a sub-slice) in `whole`.
fn offset(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

/// Shifts the line numbers of the hunk headers of `diff` by `by` lines.
fn shift_hunks(diff: &str, by: usize) -> String {
    if by == 0 {
        return diff.to_string();
    }
    let mut out = String::with_capacity(diff.len() + 64);
    for line in diff.split_inclusive('\n') {
        match parse_hunk(line) {
            Some((a, b, c, d)) => {
                let _ = writeln!(out, "@@ -{} +{} @@", shifted(a, b, by), shifted(c, d, by));
            }
            None => out.push_str(line),
        }
    }
    out
}

/// `range` of a header's `start[,len]` moved down by `by` lines.
fn shifted(start: usize, len: usize, by: usize) -> String {
    // Header starts are 1-based, or the line before an empty range.
    let zero_based = if len == 0 { start } else { start - 1 };
    range(zero_based + by, len)
}

/// `(old start, old len, new start, new len)` of a `@@ -a,b +c,d @@` line.
fn parse_hunk(line: &str) -> Option<(usize, usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let (new, _) = rest.split_once(" @@")?;
    let part = |s: &str| -> Option<(usize, usize)> {
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (a, b) = part(old)?;
    let (c, d) = part(new)?;
    Some((a, b, c, d))
}

/// The unified diff of `old` → `new` (3 lines of context, `from`/`to` as
/// header names), at most `max` bytes; see the module docs.
pub fn bounded_diff(old: &str, new: &str, from: &str, to: &str, max: usize) -> BoundedDiff {
    if old.is_empty() {
        return all_added(new, from, to, max);
    }
    let (ol, nl) = (lines(old), lines(new));
    let prefix = ol.iter().zip(&nl).take_while(|(a, b)| a == b).count();
    let most = ol.len().min(nl.len()) - prefix;
    let suffix = ol
        .iter()
        .rev()
        .zip(nl.iter().rev())
        .take(most)
        .take_while(|(a, b)| a == b)
        .count();
    if prefix == ol.len() && prefix == nl.len() {
        return BoundedDiff {
            text: String::new(),
            cut: false,
        };
    }
    let skip = prefix.saturating_sub(CONTEXT);
    let tail = suffix.saturating_sub(CONTEXT);
    let slice = |all: &[&str], text: &str| -> (usize, usize) {
        let start = all.get(skip).map_or(text.len(), |l| offset(text, l));
        let end = match all.len() - tail {
            n if n == all.len() => text.len(),
            n => offset(text, all[n]),
        };
        (start, end)
    };
    let (os, oe) = slice(&ol, old);
    let (ns, ne) = slice(&nl, new);
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_lines(&old[os..oe], &new[ns..ne]);
    let mut capped = Capped {
        out: String::new(),
        max,
        full: false,
    };
    let _ = write!(
        capped,
        "{}",
        diff.unified_diff().context_radius(CONTEXT).header(from, to)
    );
    let text = shift_hunks(&capped.out, skip);
    if capped.full {
        finish_cut(text, &format!("the diff is longer than {max} bytes"))
    } else {
        BoundedDiff { text, cut: false }
    }
}

#[cfg(test)]
mod tests {
    use super::super::textfile::unified_diff;
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn same_text_as_the_whole_file_diff() {
        let old = numbered(200);
        let cases = [
            old.replace("line 100\n", "LINE 100\n"),
            old.replace("line 1\n", "first\n"),
            old.replace("line 200\n", "last"),
            old.replace("line 50\n", "").replace("line 150\n", "x\ny\n"),
            old.replace("line 3\n", "a\r\nb\rc\n"),
            format!("{old}more\n"),
            format!("top\n{old}"),
            "only\n".to_string(),
            String::new(),
        ];
        for new in &cases {
            let whole = unified_diff(&old, new, "a/f", "b/f");
            let got = bounded_diff(&old, new, "a/f", "b/f", usize::MAX);
            assert_eq!(got.text, whole, "new = {:?}", &new[..new.len().min(40)]);
            assert!(!got.cut);
        }
    }

    #[test]
    fn a_new_file_is_one_added_hunk_like_difflib() {
        for new in ["a\nb\n", "a", "a\nb", "x\r\ny\rz\n", "\n\n"] {
            assert_eq!(
                bounded_diff("", new, "/dev/null", "b/f", usize::MAX).text,
                unified_diff("", new, "/dev/null", "b/f"),
                "{new:?}"
            );
        }
        assert_eq!(bounded_diff("", "", "/dev/null", "b/f", 10).text, "");
    }

    #[test]
    fn long_diffs_are_cut_at_a_line_and_say_so() {
        let new = numbered(100_000);
        let d = bounded_diff("", &new, "/dev/null", "b/f", 4096);
        assert!(d.cut);
        assert!(d.text.len() <= 4096 + 100, "{}", d.text.len());
        let last = d.text.lines().last().unwrap();
        assert!(last.starts_with("\\ [diff cut: "), "{last}");
        assert!(last.contains("more added lines"), "{last}");
        let second = d.text.lines().rev().nth(1).unwrap();
        assert!(second.starts_with("+line "), "{second}");

        let old = numbered(50_000);
        let changed = old.replace("line ", "LINE ");
        let d = bounded_diff(&old, &changed, "a/f", "b/f", 4096);
        assert!(d.cut);
        assert!(d.text.len() <= 4096 + 100);
        assert!(d.text.ends_with("bytes]\n"), "{}", d.text);
    }
}
