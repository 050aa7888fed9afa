//! The describe view (`d`, the verb table's describe, as k9s reads it):
//! every field of the selected item as `key: value` lines, maps and lists
//! indented below their key, plus the paths the item lives at, in the
//! full-screen viewer. Built from the item's own `Serialize` form (the
//! shape `--json` prints), so a field added to the item shows up here
//! without a second list to keep in step.
//!
//! Bounded: at most [`MAX_LINES`] lines and [`MAX_VALUE_CHARS`]
//! characters of one value; what is cut is said in the view.

use serde::Serialize;
use serde_json::Value;

use crate::engine::layout::Layout;
use crate::tui::action::Doc;
use crate::tui::theme::Theme;
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::text;

/// Most lines of one describe view; the rest is counted in a last line.
pub const MAX_LINES: usize = 2000;

/// Most characters shown of one scalar value (longer ones end in `…`).
pub const MAX_VALUE_CHARS: usize = 4000;

/// Keys whose numbers are seconds since the Unix epoch (the items'
/// `Serialize` forms use these names); shown with their UTC date too.
const TIME_KEYS: &[&str] = &["created_at", "updated_at", "modified", "last_activity"];

/// A describe view of `item` (a `kind` named `name`): the fields of its
/// JSON form, then `paths` as `(what, where)` under a `paths:` key. A
/// value that does not serialize to an object is shown as `value:`.
pub fn doc(
    kind: &str,
    name: &str,
    item: &impl Serialize,
    paths: &[(&str, String)],
    t: &Theme,
) -> Doc {
    let mut w = Writer {
        lines: Vec::new(),
        dropped: 0,
        t,
    };
    match serde_json::to_value(item) {
        Ok(Value::Object(m)) => w.map(&m, 0),
        Ok(v) => w.field("value", &v, 0),
        Err(e) => w.push(StyledLine::plain(&format!("cannot describe: {e}"), t.error)),
    }
    if !paths.is_empty() {
        w.push(StyledLine::plain("paths:", t.key));
        for (what, at) in paths {
            w.field(what, &Value::String(at.clone()), 1);
        }
    }
    if w.dropped > 0 {
        let n = w.dropped;
        w.lines.push(StyledLine::plain(
            &format!(
                "… {} not shown (limit {MAX_LINES})",
                crate::root::words::count(n, "line", "lines")
            ),
            t.warn,
        ));
    }
    Doc {
        title: format!("describe {kind} {name}"),
        lines: w.lines,
        links: Vec::new(),
    }
}

/// The paths of a workspace's layout, for [`doc`]'s `paths`.
pub fn layout_paths(l: &Layout) -> Vec<(&'static str, String)> {
    vec![
        ("workdir", l.workdir().to_string()),
        ("mcp declarations", l.mcp_file()),
        ("data", l.data_dir()),
        ("skills", l.skills_dir()),
        ("sessions", l.sessions_dir()),
    ]
}

/// The files of session `id` in `l`, for [`doc`]'s `paths` (none for an
/// id the layout refuses).
pub fn session_paths(l: &Layout, id: &str) -> Vec<(&'static str, String)> {
    let (Ok(dir), Ok(ctx), Ok(journal)) =
        (l.session_dir(id), l.context_file(id), l.journal_file(id))
    else {
        return Vec::new();
    };
    vec![("directory", dir), ("context", ctx), ("journal", journal)]
}

struct Writer<'t> {
    lines: Vec<StyledLine>,
    dropped: usize,
    t: &'t Theme,
}

impl Writer<'_> {
    fn push(&mut self, l: StyledLine) {
        if self.lines.len() < MAX_LINES {
            self.lines.push(l);
        } else {
            self.dropped += 1;
        }
    }

    /// `key: value` with the key in the key style.
    fn pair(&mut self, depth: usize, key: &str, value: &str, style: ratatui::style::Style) {
        let indent = "  ".repeat(depth);
        let mut l = StyledLine::plain(&format!("{indent}{key}:"), self.t.key);
        if !value.is_empty() {
            let v = StyledLine::plain(&format!(" {value}"), style);
            l.runs.push((l.text.len() as u32, style));
            l.text.push_str(&v.text);
        }
        self.push(l);
    }

    fn map(&mut self, m: &serde_json::Map<String, Value>, depth: usize) {
        for (k, v) in m {
            self.field(k, v, depth);
        }
    }

    fn field(&mut self, key: &str, v: &Value, depth: usize) {
        match v {
            Value::Object(m) if m.is_empty() => self.pair(depth, key, "{}", self.t.muted),
            Value::Array(a) if a.is_empty() => self.pair(depth, key, "[]", self.t.muted),
            Value::Object(m) => {
                self.pair(depth, key, "", self.t.base);
                self.map(m, depth + 1);
            }
            Value::Array(a) => {
                self.pair(depth, key, "", self.t.base);
                for (i, item) in a.iter().enumerate() {
                    self.field(&format!("- [{i}]"), item, depth + 1);
                }
            }
            Value::String(s) if s.contains('\n') => {
                // A block of lines (a stderr tail, a description) below its key.
                self.pair(depth, key, "|", self.t.muted);
                let indent = "  ".repeat(depth + 1);
                for l in s.lines() {
                    let l = text::truncate(l, MAX_VALUE_CHARS);
                    self.push(StyledLine::plain(&format!("{indent}{l}"), self.t.base));
                }
            }
            // An empty text says so (a bare `key:` reads as a heading).
            Value::String(s) if s.is_empty() => self.pair(depth, key, "\"\"", self.t.muted),
            Value::String(s) => {
                let s = text::truncate(s, MAX_VALUE_CHARS);
                self.pair(depth, key, &s, self.t.base)
            }
            Value::Null => self.pair(depth, key, "-", self.t.muted),
            Value::Number(n) if TIME_KEYS.contains(&key) => {
                // Seconds since the epoch, also as a UTC date.
                let shown = match n.as_f64().filter(|s| (0.0..1e11).contains(s)) {
                    Some(s) => {
                        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(s);
                        format!("{n} ({})", humantime::format_rfc3339_seconds(at))
                    }
                    None => n.to_string(),
                };
                self.pair(depth, key, &shown, self.t.base)
            }
            other => self.pair(depth, key, &other.to_string(), self.t.base),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(d: &Doc) -> Vec<&str> {
        d.lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn fields_nest_and_paths_follow() {
        let item = serde_json::json!({
            "id": "abc",
            "labels": {"wsbench.user": "u1"},
            "tags": [],
            "ttl": null,
            "leases": 2,
            "stderr": "one\ntwo",
            "created_at": 1609459200.5,
        });
        let d = doc(
            "workspace",
            "abc",
            &item,
            &[("workdir", "/w".into())],
            &Theme::default(),
        );
        assert_eq!(d.title, "describe workspace abc");
        assert_eq!(
            texts(&d),
            [
                "id: abc",
                "labels:",
                "  wsbench.user: u1",
                "tags: []",
                "ttl: -",
                "leases: 2",
                "stderr: |",
                "  one",
                "  two",
                "created_at: 1609459200.5 (2021-01-01T00:00:00Z)",
                "paths:",
                "  workdir: /w",
            ]
        );
    }

    #[test]
    fn long_items_are_cut_and_say_so() {
        let many: Vec<u32> = (0..(MAX_LINES as u32 + 10)).collect();
        let d = doc(
            "x",
            "y",
            &serde_json::json!({ "v": many }),
            &[],
            &Theme::default(),
        );
        assert_eq!(d.lines.len(), MAX_LINES + 1);
        assert_eq!(
            d.lines.last().unwrap().text,
            "… 11 lines not shown (limit 2000)"
        );
        let long = "z".repeat(MAX_VALUE_CHARS * 2);
        let d = doc(
            "x",
            "y",
            &serde_json::json!({ "v": long }),
            &[],
            &Theme::default(),
        );
        assert!(d.lines[0].text.chars().count() <= MAX_VALUE_CHARS + 4);
        // Control characters never reach the terminal.
        let d = doc(
            "x",
            "y",
            &serde_json::json!({ "v": "a\u{1b}[2Jb" }),
            &[],
            &Theme::default(),
        );
        assert!(!d.lines[0].text.contains('\u{1b}'));
    }
}
