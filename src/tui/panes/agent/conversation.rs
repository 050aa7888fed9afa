//! The conversation of the Agent pane: lines pushed and streamed into a
//! bounded ring, their styles, wrapping, and drawing.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};

use crate::tui::pane::{Ctx, placeholder};
use crate::tui::widgets::text;

use super::*;

/// Longest conversation line kept, in bytes; longer ones are cut.
const MAX_LINE_BYTES: usize = 16 * 1024;

/// Pushes `l` weighed by its text and its own size (the ring's byte
/// budget is `output_buffer_bytes`).
fn push_weighed(ring: &mut crate::tui::widgets::ring::Ring<ConvLine>, l: ConvLine) {
    let size = l.text.capacity() + std::mem::size_of::<ConvLine>();
    ring.push_sized(l, size, drop);
}

impl AgentPane {
    pub(super) fn push(&mut self, kind: LineKind, text: &str) {
        self.close_text(false);
        let run = self.runs;
        for l in text.split('\n') {
            let mut l = l.strip_suffix('\r').unwrap_or(l);
            // A line without newlines (a tool result in one line) is cut
            // into pieces of at most MAX_LINE_BYTES, so the byte budget
            // can drop its old parts.
            loop {
                let head = crate::backend::text::head_bytes(l, MAX_LINE_BYTES);
                let head = if head.is_empty() && !l.is_empty() {
                    &l[..l.chars().next().map_or(0, char::len_utf8)]
                } else {
                    head
                };
                push_weighed(
                    &mut self.lines,
                    ConvLine {
                        run,
                        kind,
                        text: head.to_string(),
                    },
                );
                l = &l[head.len()..];
                if l.is_empty() {
                    break;
                }
            }
        }
    }

    /// Moves the streaming line into the ring; an empty one only when a
    /// newline ended it (a blank line of the answer).
    pub(super) fn close_text(&mut self, newline: bool) {
        if let Some(l) = self.partial.take()
            && (newline || !l.text.is_empty())
        {
            push_weighed(&mut self.lines, l);
        }
        self.partial_chars = 0;
    }

    pub(super) fn push_delta(&mut self, delta: &str) {
        let run = self.runs;
        for (i, piece) in delta.split('\n').enumerate() {
            if i > 0 {
                self.close_text(true);
            }
            let piece = piece.strip_suffix('\r').unwrap_or(piece);
            for c in piece.chars() {
                if self.partial_chars >= MAX_LINE_CHARS {
                    self.close_text(true);
                }
                self.partial
                    .get_or_insert_with(|| ConvLine {
                        run,
                        kind: LineKind::Assistant,
                        text: String::new(),
                    })
                    .text
                    .push(c);
                self.partial_chars += 1;
            }
            if self.partial.is_none() {
                self.partial = Some(ConvLine {
                    run,
                    kind: LineKind::Assistant,
                    text: String::new(),
                });
            }
        }
    }

    /// Every conversation line's text, the streaming one last (tests).
    pub fn texts(&self) -> Vec<String> {
        self.lines
            .iter()
            .chain(self.partial.as_ref())
            .map(|l| l.text.clone())
            .collect()
    }
}

impl AgentPane {
    pub(super) fn style(&self, kind: LineKind, cx: &Ctx) -> Style {
        let t = &cx.theme;
        match kind {
            LineKind::User => t.accent.add_modifier(Modifier::BOLD),
            LineKind::Assistant => t.base,
            LineKind::Call => t.key,
            LineKind::ResultOk => t.success,
            LineKind::ResultErr => t.error,
            LineKind::ResultBody => t.muted,
            LineKind::Offload => t.warn,
            LineKind::Error => t.error.add_modifier(Modifier::BOLD),
            LineKind::Info => t.muted,
        }
    }
}

impl AgentPane {
    pub(super) fn render_conversation(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        self.view_height = area.height as usize;
        if area.height == 0 || area.width == 0 {
            return;
        }
        if self.lines.is_empty() && self.partial.is_none() {
            let msg = if cx.can("agent.run") {
                "enter runs a demo · t step mode · m, i a model"
            } else {
                "read-only mode: the agent cannot run"
            };
            placeholder(f, area, msg, cx.theme.muted);
            return;
        }
        let w = area.width as usize;
        let h = area.height as usize;
        if self.follow {
            self.back = 0;
        }
        // Wrap from the end only as far as the screen (plus the scroll
        // offset) reaches: the ring may hold thousands of lines.
        let want = h + self.back;
        let mut rows: Vec<(String, Style)> = Vec::new();
        for l in self.partial.iter().chain(self.lines.iter().rev()) {
            let st = self.style(l.kind, cx);
            let wrapped = wrap_text(&l.text, w);
            for r in wrapped.into_iter().rev() {
                rows.push((r, st));
            }
            if rows.len() >= want {
                break;
            }
        }
        self.back = self.back.min(rows.len().saturating_sub(h));
        let end = self.back;
        let start = (end + h).min(rows.len());
        let buf = f.buffer_mut();
        for (n, (s, st)) in rows[end..start].iter().rev().enumerate() {
            buf.set_stringn(area.x, area.y + n as u16, s, w, *st);
        }
    }
}

/// Rows of raw text `s` for `w` columns: each of its own lines wraps on
/// its own (a line break is never shown as `␊` inside a paragraph), and
/// the rows a line wraps into keep its indentation.
pub(super) fn wrap_text(s: &str, w: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in s.split('\n') {
        let line = text::display(line.strip_suffix('\r').unwrap_or(line)).into_owned();
        let body = line.trim_start_matches(' ');
        let indent = (line.len() - body.len()).min(w / 2);
        if indent == 0 {
            out.extend(wrap(&line, w));
            continue;
        }
        let pad = " ".repeat(indent);
        out.extend(
            wrap(body, w - indent)
                .into_iter()
                .map(|r| format!("{pad}{r}")),
        );
    }
    out
}

/// Cuts `s` (already sanitised) into rows of at most `w` columns,
/// breaking after spaces where it can and inside a word only when the
/// word alone is wider than a row.
pub(super) fn wrap(s: &str, w: usize) -> Vec<String> {
    use unicode_width::UnicodeWidthChar;
    if w == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cols = 0;
    // Words keep their trailing spaces, so rows rejoin to the input.
    for word in s.split_inclusive(' ') {
        let ww: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
        let bare = word.trim_end_matches(' ');
        let bw: usize = bare.chars().map(|c| c.width().unwrap_or(0)).sum();
        if cols + bw > w && !cur.is_empty() && bw <= w {
            out.push(std::mem::take(&mut cur));
            cols = 0;
        }
        if cols + ww <= w || bw > w {
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                if cols + cw > w && !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    cols = 0;
                }
                cur.push(c);
                cols += cw;
            }
        } else {
            // The word fits; its trailing spaces are cut at the edge.
            cur.push_str(bare);
            cols += bw;
            for _ in 0..(w - cols).min(ww - bw) {
                cur.push(' ');
                cols += 1;
            }
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_settings_parse_or_say_why_not() {
        let m = ModelSetting::parse(" http://127.0.0.1:8080/v1   qwen ").unwrap();
        assert_eq!(m.url, "http://127.0.0.1:8080/v1");
        assert_eq!(m.model, "qwen");
        assert!(
            ModelSetting::parse("http://x")
                .unwrap_err()
                .contains("URL MODEL")
        );
        assert!(
            ModelSetting::parse("ftp://x m")
                .unwrap_err()
                .contains("http://")
        );
    }

    #[test]
    fn deltas_stream_into_one_line_and_memory_is_bounded() {
        let cfg = TuiConfig {
            output_buffer_lines: 100,
            ..Default::default()
        };
        let mut p = AgentPane::new(&cfg);
        p.push_delta("Hello");
        p.push_delta(", world\nsecond");
        p.push_delta(" line");
        assert_eq!(p.texts(), ["Hello, world", "second line"]);
        p.push_delta("\n\npara");
        assert_eq!(p.texts(), ["Hello, world", "second line", "", "para"]);
        p.push(LineKind::Info, "x");
        p.push_delta("new");
        assert_eq!(p.texts().last().unwrap(), "new");
        for i in 0..1000 {
            p.push_delta(&format!("{i}\n"));
        }
        assert_eq!(p.lines().len(), 100);
        let long = "y".repeat(MAX_LINE_CHARS * 3);
        p.push(LineKind::Info, "");
        p.push_delta(&long);
        p.push_delta(&long);
        p.push(LineKind::Info, "");
        assert!(
            p.lines()
                .iter()
                .all(|l| l.text.chars().count() <= MAX_LINE_CHARS)
        );
        assert_eq!(
            p.lines().iter().filter(|l| l.text.starts_with('y')).count(),
            6
        );
    }

    #[test]
    fn wrapped_text_keeps_line_breaks_and_indentation() {
        assert_eq!(
            wrap_text("first line\r\n  an indented one that wraps", 14),
            ["first line", "  an indented ", "  one that ", "  wraps"]
        );
        assert_eq!(wrap_text("a\n\nb", 10), ["a", "", "b"]);
        assert!(!wrap_text("x\ny", 10).concat().contains('␊'));
    }

    #[test]
    fn wrap_cuts_by_columns() {
        assert_eq!(wrap("abcdef", 4), ["abcd", "ef"]);
        assert_eq!(wrap("ab cd ef", 5), ["ab cd", "ef"]);
        assert_eq!(wrap("ab cdefgh", 4), ["ab c", "defg", "h"]);
        assert_eq!(wrap("a  b", 2), ["a ", "b"]);
        assert_eq!(wrap("", 4), [""]);
        assert_eq!(wrap("日本語", 4), ["日本", "語"]);
        assert!(wrap("x", 0).is_empty());
    }
}
