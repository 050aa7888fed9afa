//! The Edit tool (docs/contract.md §3.4): exact string replacement in a text file.
//!
//! Errors, in the reference's order and words: empty `old_string`,
//! relative path, missing file (`Error: File not found: <path>`), `old_string
//! == new_string`, no occurrence, and more than one occurrence without
//! `replace_all` (the message gives the count). Success text is the
//! reference's, `Successfully replaced 1 occurrence in <path>` or
//! `Successfully replaced all N occurrences in <path>`, with metadata
//! `{diff, file_path, occurrences}` (`occurrences` is N with `replace_all`,
//! else 1). The diff is of the LF-normalised old and new content, with
//! `a/<path>` and `b/<path>` as names, like the reference's, but computed
//! only over the lines that changed and cut at [`DIFF_META_BYTES`]
//! (metadata `diff_cut: true`; see [`super::diff`]).
//!
//! Better than the reference (docs/contract.md §11 point 20), which writes every
//! file back with LF endings:
//!
//! * **Line endings are kept per line.** The file is split into lines with
//!   their own ending (LF, CRLF or CR); matching happens on the
//!   LF-normalised text, so an `old_string` written with `\n` matches a CRLF
//!   file (and one written with `\r\n` matches an LF file). Lines outside
//!   the replaced text keep their exact bytes; line breaks inside
//!   `new_string` get the ending of the line where the match starts (for a
//!   match on a last line without a break, the file's most common ending).
//!   A CRLF file stays CRLF; in a mixed file, untouched lines keep theirs.
//! * **Files that are not valid UTF-8 are refused** with an error naming the
//!   first bad byte, instead of being decoded lossily and written back
//!   corrupted.
//! * Files over `read_max_bytes` are refused (Edit holds the whole file in
//!   memory); directories, FIFOs and broken links are refused.
//! * There is no read-before-edit check: wsbench has no per-agent read cache.
//! * **Concurrent edits are not lost.** The read-modify-write holds the
//!   file's lock ([`super::filelock`]), and the file is checked to be
//!   unchanged just before the write; an edit that lost a race gets
//!   `Error: <path> changed since it was read` (metadata
//!   `changed_since_read: true`) instead of silently undoing another.

use std::borrow::Cow;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::diff::{DIFF_META_BYTES, bounded_diff};
use super::filelock;
use super::textfile::{self, human_size, normalize_newlines};
use super::{Tool, ToolContext, ToolResult, parse_args};
use crate::backend::BackendError;

/// The Edit tool.
pub struct Edit;

#[derive(Debug, Deserialize)]
struct Args {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

const DESCRIPTION: &str = "Performs exact string replacements in a file.

Usage:
- Read the file first, so old_string is copied from its real content.
- When you copy text from Read output, keep the exact indentation (tabs/spaces) that follows the line-number prefix. The prefix is the line number plus a TAB; never include any part of it in old_string or new_string.
- The edit FAILS if old_string is not found, or if it occurs more than once and replace_all is false: add surrounding lines to make it unique, or set replace_all to true to change every occurrence (useful for renaming).
- Write line breaks as \\n: each line keeps the file's own line ending (a Windows CRLF file stays CRLF).
- Only UTF-8 text files can be edited.
- Prefer editing existing files to creating new ones.";

#[async_trait]
impl Tool for Edit {
    fn name(&self) -> &'static str {
        "Edit"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file to edit."},
                "old_string": {"type": "string", "minLength": 1, "description": "The exact string to replace. Must match exactly including whitespace and indentation."},
                "new_string": {"type": "string", "description": "The string to replace old_string with."},
                "replace_all": {"type": "boolean", "description": "If true, replace all occurrences. If false (default), only replace if there is exactly one occurrence.", "default": false}
            },
            "required": ["file_path", "old_string", "new_string"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = match parse_args("Edit", args) {
            Ok(a) => a,
            Err(r) => return r,
        };
        if args.old_string.is_empty() {
            return ToolResult::error(
                "Error: old_string must not be empty. To create a file or replace its whole content, use the Write tool.",
            );
        }
        let path = match textfile::absolute_path(&args.file_path) {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        // Read-modify-write: held until the new content is written, so
        // concurrent Edits of one file apply one after the other.
        let _guard = match filelock::lock(ctx.env.sandbox, &path).await {
            Ok(g) => g,
            Err(e) => return ToolResult::error(e),
        };
        let sb = ctx.env.sandbox.as_ref();
        let stat = match sb.stat(&path).await {
            Ok(s) => s,
            Err(e) => return io_error(&path, e),
        };
        if let Err(e) = textfile::check_openable(sb, &path, &stat).await {
            return ToolResult::error(e.message(&path));
        }
        if args.old_string == args.new_string {
            return ToolResult::error(
                "Error: old_string and new_string are identical. No changes to make.",
            );
        }
        let max = ctx.env.limits.read_max_bytes;
        if stat.size > max {
            return ToolResult::error(format!(
                "Error: {path} is too large to edit ({}; Edit holds the whole file in memory and stops at {}). \
                 Use Bash (e.g. `sed -i`) for a file this big.",
                human_size(stat.size),
                human_size(max),
            ));
        }
        let bytes = match sb.read(&path, None).await {
            Ok(b) => b,
            Err(e) => return io_error(&path, e),
        };
        let content = match std::str::from_utf8(&bytes) {
            Ok(s) => s,
            Err(e) => {
                let at = e.valid_up_to();
                return ToolResult::error(format!(
                    "Error: {path} is not valid UTF-8 text (byte 0x{:02X} at offset {at} is not UTF-8; the \
                     file may be Latin-1 or another legacy encoding). Edit only changes UTF-8 files, so that it \
                     never corrupts other encodings. Convert the file first (e.g. `iconv -f latin1 -t utf-8`) \
                     or replace it whole with Write.",
                    bytes[at],
                ));
            }
        };
        let applied = match apply_edit(
            content,
            &args.old_string,
            &args.new_string,
            args.replace_all,
        ) {
            Ok(a) => a,
            Err(EditError::NotFound) => {
                return ToolResult::error(format!("Error: old_string not found in {path}"));
            }
            Err(EditError::Ambiguous(n)) => {
                return ToolResult::error(format!(
                    "Error: old_string appears {n} times in {path}. Set replace_all=true to replace all \
                     occurrences, or make old_string more specific."
                ));
            }
            Err(EditError::NoChange) => {
                return ToolResult::error(
                    "Error: old_string and new_string are identical once line endings are normalised \
                     (Edit keeps each line's own ending). No changes to make.",
                );
            }
        };
        if ctx.cancel.is_cancelled() {
            return ToolResult::interrupted(format!(
                "Edit was interrupted; {path} was not changed."
            ));
        }
        // The lock covers wsbench processes; this catches other writers
        // (and every writer on backends without a host view).
        if let Err(e) = filelock::ensure_unchanged(sb, &path, &bytes).await {
            return ToolResult::error(e).with_meta("changed_since_read", true);
        }
        if let Err(e) = sb.write(&path, applied.content.as_bytes()).await {
            return ToolResult::error(format!("Error writing file: {e}"));
        }
        let n = applied.occurrences;
        let what = if args.replace_all {
            format!("all {n} occurrences")
        } else {
            "1 occurrence".to_string()
        };
        let diff = bounded_diff(
            &applied.before,
            &applied.after,
            &format!("a/{path}"),
            &format!("b/{path}"),
            DIFF_META_BYTES,
        );
        let r = ToolResult::ok(format!("Successfully replaced {what} in {path}"))
            .with_meta("diff", diff.text)
            .with_meta("file_path", path.as_str())
            .with_meta("occurrences", if args.replace_all { n } else { 1 });
        if diff.cut {
            r.with_meta("diff_cut", true)
        } else {
            r
        }
    }
}

fn io_error(path: &str, e: BackendError) -> ToolResult {
    match e {
        BackendError::NotFound(_) => ToolResult::error(format!("Error: File not found: {path}")),
        BackendError::IsADirectory(_) => {
            ToolResult::error(format!("Error: Path is a directory, not a file: {path}"))
        }
        e => ToolResult::error(format!("Error reading file: {e}")),
    }
}

/// Why [`apply_edit`] made no change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditError {
    /// `old_string` does not occur.
    NotFound,
    /// `old_string` occurs this many times (more than one) and
    /// `replace_all` is false.
    Ambiguous(usize),
    /// `old_string` and `new_string` are equal after newline
    /// normalisation.
    NoChange,
}

/// A successful edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new file content, with each line's original ending kept.
    pub content: String,
    /// The old content, LF-normalised (left side of the diff).
    pub before: String,
    /// The new content, LF-normalised (right side of the diff).
    pub after: String,
    /// Occurrences of `old_string` found (all of them, even when only the
    /// first is replaced).
    pub occurrences: usize,
}

/// Splits `text` into its LF-normalised form and the original ending of
/// each line break, in order (`"\n"`, `"\r\n"` or `"\r"`).
fn split_endings(text: &str) -> (String, Vec<&'static str>) {
    let bytes = text.as_bytes();
    let mut norm = String::with_capacity(text.len());
    let mut eols = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let eol = match bytes[i] {
            b'\n' => "\n",
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => "\r\n",
            b'\r' => "\r",
            _ => {
                i += 1;
                continue;
            }
        };
        norm.push_str(&text[start..i]);
        norm.push('\n');
        eols.push(eol);
        i += eol.len();
        start = i;
    }
    norm.push_str(&text[start..]);
    (norm, eols)
}

/// The most common line ending (ties: LF, then CRLF, then CR; LF when
/// there is none).
fn dominant_ending(eols: &[&'static str]) -> &'static str {
    let count = |e: &str| eols.iter().filter(|x| **x == e).count();
    let (lf, crlf, cr) = (count("\n"), count("\r\n"), count("\r"));
    if crlf > lf && crlf >= cr {
        "\r\n"
    } else if cr > lf && cr > crlf {
        "\r"
    } else {
        "\n"
    }
}

/// Appends a normalised segment, turning its `\n`s back into the original
/// endings, which are consumed from `eols` starting at `*next`.
fn restore(segment: &str, eols: &[&'static str], next: &mut usize, out: &mut String) {
    let mut parts = segment.split('\n');
    out.push_str(parts.next().unwrap_or(""));
    for part in parts {
        out.push_str(eols[*next]);
        *next += 1;
        out.push_str(part);
    }
}

/// Replaces the first (or, with `replace_all`, every) non-overlapping
/// occurrence of `old` in `content`, keeping each line's own ending; see
/// the module docs. Pure, so it is tested without a backend.
///
/// Errors: [`EditError`] when nothing would change.
pub fn apply_edit(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Applied, EditError> {
    let (norm, eols) = split_endings(content);
    let old_n: Cow<str> = normalize_newlines(old);
    let new_n: Cow<str> = normalize_newlines(new);
    if old_n == new_n {
        return Err(EditError::NoChange);
    }
    let starts: Vec<usize> = norm.match_indices(&*old_n).map(|(i, _)| i).collect();
    match starts.len() {
        0 => return Err(EditError::NotFound),
        n if n > 1 && !replace_all => return Err(EditError::Ambiguous(n)),
        _ => {}
    }
    let chosen = if replace_all {
        &starts[..]
    } else {
        &starts[..1]
    };
    let fallback = dominant_ending(&eols);
    let old_breaks = old_n.matches('\n').count();
    let mut out = String::with_capacity(content.len() + chosen.len() * new.len());
    let mut after = String::with_capacity(norm.len() + chosen.len() * new_n.len());
    let (mut next_eol, mut pos) = (0, 0);
    for &m in chosen {
        restore(&norm[pos..m], &eols, &mut next_eol, &mut out);
        after.push_str(&norm[pos..m]);
        // The break at or after the match start ends the line the match begins on.
        let eol = eols.get(next_eol).copied().unwrap_or(fallback);
        next_eol += old_breaks;
        out.push_str(&new_n.replace('\n', eol));
        after.push_str(&new_n);
        pos = m + old_n.len();
    }
    restore(&norm[pos..], &eols, &mut next_eol, &mut out);
    after.push_str(&norm[pos..]);
    Ok(Applied {
        content: out,
        before: norm,
        after,
        occurrences: starts.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(content: &str, old: &str, new: &str, all: bool) -> String {
        apply_edit(content, old, new, all).unwrap().content
    }

    #[test]
    fn lf_files_behave_like_the_reference() {
        assert_eq!(edit("a\nb\nc\n", "b", "B", false), "a\nB\nc\n");
        assert_eq!(edit("x x x", "x", "y", true), "y y y");
        assert_eq!(
            apply_edit("x x x", "x", "y", false),
            Err(EditError::Ambiguous(3))
        );
        assert_eq!(apply_edit("abc", "z", "y", false), Err(EditError::NotFound));
        // Non-overlapping count, like Python's str.count.
        assert_eq!(apply_edit("aaaa", "aa", "b", true).unwrap().occurrences, 2);
        assert_eq!(edit("aaaa", "aa", "b", true), "bb");
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let f = "one\r\ntwo\r\nthree\r\n";
        assert_eq!(
            edit(f, "two\nthree", "2\n2b\n3", false),
            "one\r\n2\r\n2b\r\n3\r\n"
        );
        // old_string given with CRLF matches too.
        assert_eq!(edit(f, "one\r\ntwo", "1", false), "1\r\nthree\r\n");
        // Deleting whole lines.
        assert_eq!(edit(f, "two\n", "", false), "one\r\nthree\r\n");
        let a = apply_edit(f, "two", "TWO", false).unwrap();
        assert_eq!(a.before, "one\ntwo\nthree\n");
        assert_eq!(a.after, "one\nTWO\nthree\n");
    }

    #[test]
    fn mixed_endings_outside_the_edit_are_kept() {
        let f = "l1\nl2\r\nl3\rl4\nl5";
        assert_eq!(
            edit(f, "l2", "L2\nL2b", false),
            "l1\nL2\r\nL2b\r\nl3\rl4\nl5"
        );
        assert_eq!(edit(f, "l3", "L3\nx", false), "l1\nl2\r\nL3\rx\rl4\nl5");
        assert_eq!(edit(f, "l4\nl5", "L4", false), "l1\nl2\r\nl3\rL4");
        assert_eq!(edit(f, "l1", "A", false), "A\nl2\r\nl3\rl4\nl5");
    }

    #[test]
    fn a_last_line_without_a_break_uses_the_dominant_ending() {
        assert_eq!(edit("a\r\nb\r\nc", "c", "c\nd", false), "a\r\nb\r\nc\r\nd");
        assert_eq!(edit("c", "c", "c\nd", false), "c\nd");
        assert_eq!(dominant_ending(&["\r", "\r", "\n"]), "\r");
        assert_eq!(dominant_ending(&["\n", "\r\n"]), "\n");
    }

    #[test]
    fn replace_all_keeps_each_lines_ending() {
        let f = "x\r\ny\nx\r\n";
        assert_eq!(edit(f, "x", "x1\nx2", true), "x1\r\nx2\r\ny\nx1\r\nx2\r\n");
    }

    #[test]
    fn equal_after_normalisation_is_no_change() {
        assert_eq!(
            apply_edit("a\r\nb", "a\r\nb", "a\nb", false),
            Err(EditError::NoChange)
        );
    }

    #[test]
    fn split_endings_round_trips() {
        for s in ["", "a", "a\n", "a\r\n", "\r\r\n\n", "x\ry\r\nz"] {
            let (norm, eols) = split_endings(s);
            let mut out = String::new();
            let mut next = 0;
            restore(&norm, &eols, &mut next, &mut out);
            assert_eq!(out, s);
            assert_eq!(next, eols.len());
        }
    }
}
