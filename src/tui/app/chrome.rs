//! Drawing: the header, the panes in their layout (or one, zoomed or on
//! a small screen), the footer's key hints, the toast and the overlay.

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use std::time::{Duration, SystemTime};

use super::input::is_printable;
use super::layout::{MIN_SPLIT_HEIGHT, MIN_SPLIT_WIDTH, Node, SplitHandle};
use super::overlay::{Overlay, render_overlay};
use super::{App, TOAST_TTL};
use crate::tui::action::Level;
use crate::tui::keymap::{GLOBAL, KeyChord};
use crate::tui::panes;
use crate::tui::widgets::text;

impl App {
    /// Draws the whole screen.
    pub fn render(&mut self, f: &mut Frame<'_>) {
        let area = f.area();
        let theme = self.cx.theme.clone();
        f.buffer_mut().set_style(area, theme.base);
        if area.width < 8 || area.height < 3 {
            f.buffer_mut().set_string(
                area.x,
                area.y,
                text::truncate("wsbench", area.width as usize),
                theme.base,
            );
            return;
        }
        let [header, body, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(area);
        self.render_header(f, header);
        self.areas.clear();
        self.handles.clear();
        let small = body.width < MIN_SPLIT_WIDTH || body.height < MIN_SPLIT_HEIGHT;
        if let Some(m) = self.modal {
            self.draw_pane(f, m, body, true);
        } else if self.zoom || small {
            let id = self.focus;
            self.draw_pane(f, id, body, true);
        } else {
            let layout = self.layout.clone();
            self.draw_node(f, &layout, body, &mut Vec::new());
        }
        self.render_footer(f, footer);
        self.render_toast(f, body);
        if let Some(ov) = &mut self.overlay {
            render_overlay(f, body, ov, &self.cx);
        } else if let Some(p) = self.pane(self.focus())
            && let Some((x, y)) = p.cursor()
        {
            f.set_cursor_position((x, y));
        }
    }

    pub(super) fn draw_node(
        &mut self,
        f: &mut Frame<'_>,
        node: &Node,
        area: Rect,
        path: &mut Vec<bool>,
    ) {
        match node {
            Node::Leaf(id) => {
                let focused = *id == self.focus;
                self.draw_pane(f, id, area, focused);
            }
            Node::Split { dir, pct, a, b } => {
                let [ra, rb] = Layout::default()
                    .direction(*dir)
                    .constraints([
                        Constraint::Percentage(*pct),
                        Constraint::Percentage(100 - *pct),
                    ])
                    .areas(area);
                let at = match dir {
                    Direction::Horizontal => rb.x,
                    Direction::Vertical => rb.y,
                };
                self.handles.push(SplitHandle {
                    path: path.clone(),
                    dir: *dir,
                    area,
                    at,
                });
                path.push(false);
                self.draw_node(f, a, ra, path);
                path.pop();
                path.push(true);
                self.draw_node(f, b, rb, path);
                path.pop();
            }
        }
    }

    pub(super) fn draw_pane(
        &mut self,
        f: &mut Frame<'_>,
        id: &'static str,
        area: Rect,
        focused: bool,
    ) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        if let Some(i) = self.pane_index(id) {
            self.panes[i].render(f, area, focused, &self.cx);
            self.areas.push((id, area));
        }
    }

    pub(super) fn render_header(&self, f: &mut Frame<'_>, area: Rect) {
        let t = &self.cx.theme;
        let p = Paragraph::new(Line::from(Span::styled(
            text::fit(
                &text::display(&self.header_text(area.width as usize)),
                area.width as usize,
            ),
            t.header,
        )));
        f.render_widget(p, area);
    }

    /// The header line for `width` columns: parts are dropped, least
    /// important first, until it fits; profile, workspace id, session and
    /// state go last. User and agent ids read as `wsbench workspaces
    /// list` shows them.
    pub fn header_text(&self, width: usize) -> String {
        use crate::manager::display::id_or_default;
        let ws = &self.cx.ws;
        let id = ws.id();
        let short = crate::backend::text::head_cols(id, 12);
        let state = &self.cx.header.state;
        let dot = if state == "ready" { "●" } else { "○" };
        let h = &self.cx.header;
        // After `:profile` the open workspace may still be the previous
        // profile's: say whose it is rather than imply it is the new one's.
        let ws_part = if h.ws_profile != h.profile && !h.ws_profile.is_empty() {
            format!("ws {short} (of profile {})", h.ws_profile)
        } else {
            format!("ws {short}")
        };
        // (text, priority): higher stays longer.
        let mut parts: Vec<(String, u8)> = vec![
            ("wsbench".to_string(), 4),
            (format!("profile {}", h.profile), 8),
            (format!("backend {}", ws.backend()), 5),
            (ws_part, 7),
            (format!("user {}", id_or_default(Some(&self.cx.user_id))), 2),
            (format!("agent {}", id_or_default(Some(&self.cx.agent))), 3),
            (format!("session {}", self.cx.session), 6),
            (format!("{dot} {state}"), 9),
        ];
        if self.cx.read_only {
            parts.push(("READ-ONLY".into(), 10));
        }
        // Most important first, each kept when it still fits; shown in
        // the usual order.
        let join = |keep: &[bool]| {
            let v: Vec<&str> = parts
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|((s, _), _)| s.as_str())
                .collect();
            format!(" {}", v.join(" │ "))
        };
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(parts[i].1));
        let mut keep = vec![false; parts.len()];
        for i in order {
            keep[i] = true;
            if text::width(&join(&keep)) > width {
                keep[i] = false;
            }
        }
        join(&keep)
    }

    pub(super) fn render_footer(&self, f: &mut Frame<'_>, area: Rect) {
        let t = &self.cx.theme;
        let ctx = match &self.overlay {
            Some(Overlay::Help(_)) => panes::help::ID,
            Some(Overlay::Palette(_)) => panes::palette::ID,
            Some(_) => "dialog",
            None => self
                .pane(self.focus())
                .map(|p| p.context())
                .unwrap_or(GLOBAL),
        };
        let mut hints: Vec<(String, &'static str)> = match (&self.overlay, ctx) {
            (Some(Overlay::Prompt { .. }), _) => vec![
                ("enter".into(), "ok"),
                ("esc".into(), "cancel"),
                ("ctrl-u".into(), "clear"),
            ],
            (
                Some(Overlay::Choose {
                    choices: options, ..
                }),
                _,
            ) => options
                .iter()
                .map(|c| (c.key.to_string(), c.label))
                .chain([("esc".to_string(), "cancel")])
                .collect(),
            (_, "dialog") => vec![("y/enter".into(), "confirm"), ("n/esc".into(), "cancel")],
            (Some(Overlay::Help(h)), _) if h.typing() => vec![
                ("enter".into(), "search"),
                ("esc".into(), "clear"),
                ("↑/↓".into(), "earlier searches"),
            ],
            _ => {
                let pane = self.pane(self.focus());
                self.cx
                    .keymap
                    .bindings(ctx)
                    .filter(|b| b.spec.hint && !b.keys.is_empty())
                    .filter(|b| !pane.is_some_and(|p| p.hint_off(b.spec.name)))
                    .map(|b| (crate::tui::keymap::keys_label(&b.keys), b.spec.desc))
                    .collect()
            }
        };
        // Help over a palette or dialog: the keys that reach it there.
        if matches!(
            self.overlay,
            Some(
                Overlay::Palette(_)
                    | Overlay::Prompt { .. }
                    | Overlay::Confirm { .. }
                    | Overlay::Choose { .. }
            )
        ) && let Some(b) = self
            .cx
            .keymap
            .all()
            .iter()
            .find(|b| b.spec.name == "app.help")
        {
            let keys: Vec<KeyChord> = b
                .keys
                .iter()
                .copied()
                .filter(|k| !is_printable(k))
                .collect();
            if !keys.is_empty() {
                hints.push((crate::tui::keymap::keys_label(&keys), "help"));
            }
        }
        let text_mode = self.overlay.is_none()
            && self
                .pane(self.focus())
                .is_some_and(|p| p.text_input_active());
        let mut help = None;
        // Keys the focused pane binds itself never reach a global action.
        let pane_id = self.pane(self.focus()).map(|p| p.id()).unwrap_or(GLOBAL);
        let shadowed: Vec<KeyChord> = self
            .cx
            .keymap
            .bindings(ctx)
            .chain(self.cx.keymap.bindings(pane_id))
            .flat_map(|b| b.keys.iter().copied())
            .collect();
        if self.overlay.is_none() {
            for b in self.cx.keymap.bindings(GLOBAL).filter(|b| b.spec.hint) {
                if self.modal.is_some()
                    && matches!(b.spec.name, "app.focus_next" | "app.zoom" | "app.agent")
                {
                    continue;
                }
                // In a text field printable keys type: list only the keys
                // that still reach the app there.
                let keys: Vec<KeyChord> = b
                    .keys
                    .iter()
                    .copied()
                    .filter(|k| !text_mode || !is_printable(k))
                    .filter(|k| !shadowed.contains(k))
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let label = crate::tui::keymap::keys_label(&keys);
                if b.spec.name == "app.help" {
                    help = Some((label, b.spec.desc));
                } else {
                    hints.push((label, b.spec.desc));
                }
            }
        }
        let mut spans = Vec::new();
        let mut used = 0usize;
        let width = area.width as usize;
        // Help is always shown, at the end.
        let reserve = help
            .as_ref()
            .map(|(k, d)| text::width(k) + text::width(d) + 3)
            .unwrap_or(0);
        for (k, d) in hints {
            let w = text::width(&k) + text::width(d) + 3;
            if used + w + reserve > width {
                break;
            }
            spans.push(Span::styled(format!(" {k}"), t.key));
            spans.push(Span::styled(format!(" {d} "), t.footer));
            used += w;
        }
        if let Some((k, d)) = help
            && used + text::width(&k) + text::width(d) + 3 <= width
        {
            spans.push(Span::styled(format!(" {k}"), t.key));
            spans.push(Span::styled(format!(" {d} "), t.footer));
        }
        f.buffer_mut().set_style(area, t.footer);
        f.render_widget(Paragraph::new(Line::from(spans)).style(t.footer), area);
    }

    pub(super) fn render_toast(&self, f: &mut Frame<'_>, body: Rect) {
        let Some(Toast { level, msg, .. }) = &self.toast else {
            return;
        };
        if body.height < 3 {
            return;
        }
        let t = &self.cx.theme;
        let msg = text::display(msg);
        let max = (body.width as usize).saturating_sub(4).max(1);
        let shown = text::truncate(&msg, max);
        let w = (text::width(&shown) + 2) as u16;
        let r = Rect::new(
            body.x + body.width.saturating_sub(w + 1),
            body.y + body.height - 1,
            w.min(body.width),
            1,
        );
        f.render_widget(Clear, r);
        let style = t.level(level.as_str()).add_modifier(Modifier::REVERSED);
        f.buffer_mut()
            .set_string(r.x, r.y, format!(" {shown} "), style);
    }
}

/// A message on the body's bottom border, shown until [`TOAST_TTL`] has
/// passed on the app's clock (not counted in key presses or frames, so a
/// fake clock in tests moves it, and an idle screen loses it on time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Toast {
    pub(super) level: Level,
    pub(super) msg: String,
    /// When it was shown, by the app's clock.
    pub(super) at: SystemTime,
}

impl Toast {
    /// Time it has left at `now`: zero once [`TOAST_TTL`] has passed, and
    /// zero when the clock stepped back before `at` (a wall-clock step
    /// back of an hour must not pin it for an hour).
    pub(super) fn left(&self, now: SystemTime) -> Duration {
        match now.duration_since(self.at) {
            Ok(shown) => TOAST_TTL.saturating_sub(shown),
            Err(_) => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toast_expires_by_the_clock_it_is_given() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let t = Toast {
            level: Level::Info,
            msg: "saved".into(),
            at,
        };
        assert_eq!(t.left(at), TOAST_TTL);
        assert_eq!(
            t.left(at + Duration::from_secs(1)),
            TOAST_TTL - Duration::from_secs(1)
        );
        assert_eq!(t.left(at + TOAST_TTL), Duration::ZERO);
        assert_eq!(t.left(at + TOAST_TTL * 10), Duration::ZERO);
        assert_eq!(t.left(at - Duration::from_secs(3600)), Duration::ZERO);
    }
}
