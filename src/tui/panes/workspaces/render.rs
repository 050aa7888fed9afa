//! Drawing the pane: the list with the columns that fit, the selected
//! row's failure reason and a note when the open workspace is another
//! profile's.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::WorkspacesPane;
use super::cells::{idle_ttl, user_agent};
use crate::backend::text::head_cols;
use crate::manager::display;
use crate::tui::pane::{Ctx, Pane, filter_bar, filter_suffix, placeholder};
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::text;

impl WorkspacesPane {
    /// Draws the pane in `area` (the [`Pane::render`] of the pane).
    pub(super) fn draw(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let note = match (&self.opening, &cx.manager) {
            (Some(id), _) => format!("opening {}…", head_cols(id, 12)),
            (None, Some(m)) => format!("profile {}", m.profile()),
            (None, None) => String::new(),
        };
        let block = cx.block_for(
            area,
            &format!("{}{}", self.title(), filter_suffix(&self.list.filter)),
            &note,
            focused,
        );
        let inner = block.inner(area);
        f.render_widget(block, area);
        let mut list = filter_bar(f, inner, &self.list.filter, cx);
        if cx.manager.is_none() {
            self.inner = list;
            placeholder(f, list, "no workspace manager: one directory only", t.muted);
            return;
        }
        if let Some(e) = &self.error {
            self.inner = list;
            // Wrapped, so the whole reason is readable (also in Logs).
            let p = ratatui::widgets::Paragraph::new(
                text::display(&format!("error: {e}")).into_owned(),
            )
            .style(t.error)
            .wrap(ratatui::widgets::Wrap { trim: true });
            f.render_widget(p, list);
            return;
        }
        // The open workspace may not be this profile's (`--workdir`, or
        // after `:profile`): say so rather than leave it unexplained.
        let current = cx.ws.id().to_string();
        let outside =
            (!self.job.running() && !self.rows.iter().any(|r| r.id == current)).then(|| {
                let p = cx.manager.as_ref().map_or("", |m| m.profile());
                let short = head_cols(&current, 12);
                format!("the open workspace {short} is not one of profile {p}'s")
            });
        if self.list.shown.is_empty() {
            self.inner = list;
            let msg = if self.job.running() {
                "loading…"
            } else if self.list.filter.active() && !self.rows.is_empty() {
                "no match"
            } else {
                "no workspaces in this profile: n creates one"
            };
            placeholder(f, list, msg, t.muted);
            if let Some(note) = &outside
                && list.height >= 3
            {
                let w = list.width as usize;
                let line = text::truncate(&text::display(note), w).into_owned();
                let x = list.x + (w.saturating_sub(text::width(&line)) / 2) as u16;
                let y = list.y + list.height.saturating_sub(1) / 2 + 1;
                f.buffer_mut().set_string(x, y, line, t.muted);
            }
            return;
        }
        let w = list.width as usize;
        // Columns by priority: what fits is shown. Cells are those of
        // `wsbench workspaces list` (crate::manager::display).
        let wide = w >= 100;
        let mid = w >= 60;
        // Whole ids where there is room (`:ws <id>` needs them), at
        // least 14 columns so the others line up.
        let longest = self
            .list
            .shown
            .iter()
            .map(|&i| text::width(&self.rows[i].id))
            .max()
            .unwrap_or(0);
        let idw = if wide {
            longest.clamp(14, w.saturating_sub(88).max(14))
        } else if mid {
            longest.clamp(14, w.saturating_sub(46).max(14))
        } else {
            14
        };
        // The selected row's failure reason gets its own line.
        let reason = self
            .selected()
            .and_then(|s| self.state_of(s).1.map(String::from));
        if let Some(r) = &reason
            && list.height >= 3
        {
            let y = list.y + list.height - 1;
            let line = text::truncate(&text::display(&format!("✗ {r}  (R retry)")), w).into_owned();
            f.buffer_mut().set_string(list.x, y, line, t.error);
            list.height -= 1;
        }
        if let Some(note) = &outside
            && list.height >= 4
        {
            let y = list.y + list.height - 1;
            let line = text::truncate(&text::display(&format!("○ {note}")), w).into_owned();
            f.buffer_mut().set_string(list.x, y, line, t.muted);
            list.height -= 1;
        }
        if list.height >= 3 {
            let head = if wide {
                format!(
                    "  {:<idw$} {:<14} {:<17} {:<20} {:>7} {:>15} LABELS",
                    "ID", "PROFILE/BE", "STATE", "USER/AGENT", "AGE", "IDLE/TTL LEFT"
                )
            } else if mid {
                format!(
                    "  {:<idw$} {:<17} {:>7} {:>15}",
                    "ID", "STATE", "AGE", "IDLE/TTL LEFT"
                )
            } else {
                format!("  {:<14} STATE", "ID")
            };
            f.buffer_mut()
                .set_string(list.x, list.y, text::truncate(&head, w), t.muted);
            list.y += 1;
            list.height -= 1;
        }
        self.inner = list;
        let rows: Vec<(String, Option<String>)> = self
            .list
            .shown
            .iter()
            .map(|&i| {
                let (s, r) = self.state_of(&self.rows[i]);
                (s, r.map(String::from))
            })
            .collect();
        let shown = &self.list.shown;
        let data = &self.rows;
        render_rows(
            f.buffer_mut(),
            list,
            &mut self.list.cursor,
            shown.len(),
            focused,
            t.selection,
            |i| {
                let r = &data[shown[i]];
                let (state, _) = &rows[i];
                let mark = if r.id == current { "● " } else { "  " };
                let sstyle = match state.as_str() {
                    "failed" | "unknown" => t.error,
                    s if s.starts_with("running") => t.success,
                    _ => t.warn,
                };
                let id = text::fit(&text::display(&r.id), idw);
                let idle = idle_ttl(r);
                let age = display::span(r.age_secs);
                let state_cell = text::fit(&text::display(state), 17);
                let mut spans = vec![
                    Span::styled(mark, t.accent),
                    Span::styled(id, t.base),
                    Span::raw(" "),
                ];
                if wide {
                    let pb = format!("{}/{}", r.profile, r.backend);
                    let ua = user_agent(r);
                    spans.push(Span::styled(
                        format!("{} ", text::fit(&text::display(&pb), 14)),
                        t.muted,
                    ));
                    spans.push(Span::styled(format!("{state_cell} "), sstyle));
                    spans.push(Span::styled(
                        format!("{} ", text::fit(&text::display(&ua), 20)),
                        t.base,
                    ));
                    spans.push(Span::styled(format!("{age:>7} {idle:>15} "), t.muted));
                    let used = 2 + idw + 1 + 15 + 18 + 21 + 24;
                    let labels = text::display(&display::labels(r)).into_owned();
                    spans.push(Span::styled(
                        text::truncate(&labels, w.saturating_sub(used)).into_owned(),
                        t.muted,
                    ));
                } else if mid {
                    spans.push(Span::styled(format!("{state_cell} "), sstyle));
                    spans.push(Span::styled(format!("{age:>7} {idle:>15}"), t.muted));
                } else {
                    let rest = w.saturating_sub(idw + 3).max(1);
                    spans.push(Span::styled(
                        text::truncate(&text::display(state), rest).into_owned(),
                        sstyle,
                    ));
                }
                Line::from(spans)
            },
        );
    }
}
