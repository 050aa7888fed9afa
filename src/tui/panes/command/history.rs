//! The Command pane's history: commands typed here (walked with
//! Up/Down in the prompt) and the session's past commands from the
//! journal.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::tui::pane::{Ctx, placeholder};
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::text;

use super::{CommandPane, Msg};

impl CommandPane {
    pub(super) fn remember(&mut self, cmd: &str) {
        if self.history.last().map(String::as_str) != Some(cmd) {
            self.history.push(cmd.to_string());
        }
        if self.history.len() > self.max_history {
            let extra = self.history.len() - self.max_history;
            self.history.drain(..extra);
        }
    }

    pub(super) fn load_journal(&mut self, cx: &mut Ctx) {
        let ws = cx.ws.clone();
        let s = cx.session.clone();
        cx.spawn::<CommandPane>(async move {
            let r = ws
                .journal()
                .read(&s)
                .await
                .map(|j| j.entries.into_iter().filter(|e| e.tool == "Bash").collect())
                .map_err(|e| e.to_string());
            Msg::Journal(s, r)
        });
    }

    pub(super) fn history_step(&mut self, dir: isize) {
        if self.history.is_empty() {
            return;
        }
        let pos = match (self.hist_pos, dir) {
            (None, d) if d < 0 => {
                self.draft = self.prompt.lines().to_vec();
                Some(self.history.len() - 1)
            }
            (None, _) => return,
            (Some(p), d) if d < 0 => Some(p.saturating_sub(1)),
            (Some(p), _) if p + 1 < self.history.len() => Some(p + 1),
            (Some(_), _) => None,
        };
        self.hist_pos = pos;
        let lines: Vec<String> = match pos {
            Some(p) => self.history[p].lines().map(String::from).collect(),
            None => std::mem::take(&mut self.draft),
        };
        self.set_prompt(lines);
    }

    pub(super) fn set_prompt(&mut self, lines: Vec<String>) {
        self.prompt.set_lines(&lines);
    }

    pub(super) fn render_past(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        self.list_area = area;
        if self.past.is_empty() {
            placeholder(
                f,
                area,
                "no commands in this session's journal yet",
                t.muted,
            );
            return;
        }
        let past = &self.past;
        let w = area.width as usize;
        render_rows(
            f.buffer_mut(),
            area,
            &mut self.past_cursor,
            past.len(),
            focused,
            t.selection,
            |i| {
                let e = &past[past.len() - 1 - i];
                let (mark, st) = match (e.exit_code, e.timed_out) {
                    (_, true) => ("⏱".to_string(), t.error),
                    (Some(0), _) => ("✓ 0".to_string(), t.success),
                    (Some(c), _) => (format!("✗ {c}"), t.error),
                    (None, _) => ("✗ ?".to_string(), t.error),
                };
                let when = e.started_at.format("%m-%d %H:%M").to_string();
                let left = format!("{when} {mark:<5} {:>7} ", text::duration_ms(e.duration_ms));
                let mut cmd = e.summary().replace('\n', " ⏎ ");
                if e.timed_out {
                    cmd.push_str("  (killed by wsbench: timeout)");
                }
                let room = w.saturating_sub(text::width(&left));
                Line::from(vec![
                    Span::styled(format!("{when} "), t.muted),
                    Span::styled(format!("{mark:<5} "), st),
                    Span::styled(format!("{:>7} ", text::duration_ms(e.duration_ms)), t.muted),
                    Span::styled(
                        text::truncate(&text::display(&cmd), room).into_owned(),
                        t.base,
                    ),
                ])
            },
        );
    }
}
