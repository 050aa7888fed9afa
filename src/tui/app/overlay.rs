//! Overlays drawn over every pane and taking every key: help, the
//! palette, and the confirm and prompt dialogs.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::tui::action::{Choice, DialogTag};
use crate::tui::pane::Ctx;
use crate::tui::panes::help::HelpOverlay;
use crate::tui::panes::palette::PaletteOverlay;
use crate::tui::widgets::line::LineEdit;
use crate::tui::widgets::rect::centered;
use crate::tui::widgets::text;

/// An overlay drawn over everything, taking every key.
pub(super) enum Overlay {
    Help(HelpOverlay),
    Palette(PaletteOverlay),
    Confirm {
        pane: &'static str,
        message: String,
        tag: DialogTag,
    },
    Prompt {
        pane: &'static str,
        title: String,
        input: LineEdit,
        tag: DialogTag,
    },
    /// A question one key answers.
    Choose {
        pane: &'static str,
        message: String,
        choices: Vec<Choice>,
        on_cancel: Option<String>,
    },
}

/// Draws the open overlay over `body`.
pub(super) fn render_overlay(f: &mut Frame<'_>, body: Rect, ov: &mut Overlay, cx: &Ctx) {
    let t = &cx.theme;
    match ov {
        Overlay::Help(h) => h.render(f, body, cx),
        Overlay::Palette(p) => p.render(f, body, cx),
        Overlay::Confirm { message, .. } => {
            // A question may list what it acts on, one item a line (the
            // Workspaces gc sweep); the asker bounds the list, and lines
            // past the body's height are cut (the y/n line always shows).
            let msgs: Vec<String> = message
                .lines()
                .map(|l| text::display(l).into_owned())
                .collect();
            let widest = msgs.iter().map(|m| text::width(m)).max().unwrap_or(0);
            let w = (widest as u16 + 4).clamp(20, body.width.max(1));
            let h = (msgs.len() as u16 + 4).min(body.height.max(5));
            let r = centered(body, w, h);
            f.render_widget(Clear, r);
            let block = cx.block("Confirm", "", true);
            let inner = block.inner(r);
            f.render_widget(block, r);
            let room = (inner.height as usize).saturating_sub(2).max(1);
            let mut lines: Vec<Line> = msgs
                .iter()
                .take(room)
                .map(|m| {
                    Line::from(Span::styled(
                        text::truncate(m, inner.width as usize).into_owned(),
                        t.warn,
                    ))
                })
                .collect();
            if msgs.len() > 1 {
                lines.push(Line::from(""));
            }
            lines.push(Line::from(vec![
                Span::styled("y", t.key),
                Span::styled(" yes   ", t.base),
                Span::styled("n", t.key),
                Span::styled(" no", t.base),
            ]));
            f.render_widget(Paragraph::new(lines), inner);
        }
        Overlay::Choose {
            message, choices, ..
        } => {
            let msg = text::display(message);
            let mut keys = vec![];
            for c in choices.iter() {
                keys.push(Span::styled(c.key.to_string(), t.key));
                keys.push(Span::styled(format!(" {}   ", c.label), t.base));
            }
            keys.push(Span::styled("esc", t.key));
            keys.push(Span::styled(" cancel", t.base));
            let keys_w: usize = keys.iter().map(|s| text::width(&s.content)).sum();
            let w = (text::width(&msg).max(keys_w) as u16 + 4).clamp(20, body.width.max(1));
            let r = centered(body, w, 4);
            f.render_widget(Clear, r);
            let block = cx.block("Choose", "", true);
            let inner = block.inner(r);
            f.render_widget(block, r);
            let lines = vec![
                Line::from(Span::styled(
                    text::truncate(&msg, inner.width as usize).into_owned(),
                    t.warn,
                )),
                Line::from(keys),
            ];
            f.render_widget(Paragraph::new(lines), inner);
        }
        Overlay::Prompt { title, input, .. } => {
            let w = body.width.saturating_sub(4).clamp(10, 80);
            let r = centered(body, w, 3);
            f.render_widget(Clear, r);
            // The footer names the keys too: a long title wins the room.
            let note = "enter ok · esc cancel";
            let note = if text::width(title) + text::width(note) + 6 <= w as usize {
                note
            } else {
                ""
            };
            let block = cx.block(title, note, true);
            let inner = block.inner(r);
            f.render_widget(block, r);
            let (visible, col) = input.view(inner.width as usize);
            f.buffer_mut()
                .set_string(inner.x, inner.y, &visible, t.base);
            if inner.width > 0 && inner.height > 0 {
                let x = inner.x + col as u16;
                f.set_cursor_position((x.min(inner.x + inner.width - 1), inner.y));
            }
        }
    }
}
