//! `/` and `?` in the Command pane's output, as in the viewer (the shared
//! [`Search`](crate::tui::widgets::search::Search) widget): a substring,
//! smart case; `n` / `N` go to the next / previous output line holding
//! it in the search's direction, wrapping around; the line found is
//! marked and scrolled into view (following pauses), matches are
//! highlighted and `3/17` shows in the bar; Esc clears it.
//!
//! The found line is kept by its sequence number in the session's ring,
//! so output arriving (and old lines dropped) does not move the mark to
//! another line. Limits: the unfinished last line of a running command
//! is not searched until its newline comes; a search scans the ring
//! (bounded by `output_buffer_lines`) once per key.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::tui::theme::Theme;
use crate::tui::widgets::search;

use super::CommandPane;

impl CommandPane {
    /// Whether ring line `i` holds the search.
    fn hit(&self, i: usize) -> bool {
        self.output
            .get(i)
            .is_some_and(|l| self.search.matches(&l.line.text))
    }

    /// The ring index of the marked line, when it is still held.
    fn marked_index(&self) -> Option<usize> {
        let seq = self.mark?;
        let first = self.output.dropped();
        (seq >= first && ((seq - first) as usize) < self.output.len())
            .then(|| (seq - first) as usize)
    }

    /// Marks the next (or previous, `reverse`) output line holding the
    /// search and scrolls it into view; counts the matching lines for the
    /// bar. From the mark, else from the screen: forward from its top
    /// line, backward from its bottom one (the newest output first).
    /// False when no line holds it.
    pub(super) fn find(&mut self, reverse: bool) -> bool {
        let n = self.output.len();
        if n == 0 || !self.search.active() {
            return false;
        }
        let h = self.out_height.max(1);
        let end = n - self.back.min(n);
        let start = end.saturating_sub(h);
        let from = match self.marked_index() {
            Some(m) => m,
            // `next` skips `from`: one before the top line going down,
            // one past the bottom line going up.
            // (`backward != reverse`: going up.)
            None if self.search.backward != reverse => end % n,
            None => (start + n - 1) % n,
        };
        let q = self.search.clone();
        let hit = q.next(n, from, reverse, |i| self.hit(i));
        let mut counted = q;
        counted.set_count(n, hit.unwrap_or(from), |i| self.hit(i));
        self.search = counted;
        let Some(i) = hit else {
            self.mark = None;
            return false;
        };
        self.mark = Some(self.output.dropped() + i as u64);
        if i < start || i >= end {
            // A third of the way down the screen, as the viewer does.
            let top = i.saturating_sub(h / 3);
            self.back = n.saturating_sub(top + h);
        }
        self.follow = false;
        true
    }

    /// Drop the search and its mark (Esc, a session switch).
    pub(super) fn clear_search(&mut self) {
        self.search.clear();
        self.mark = None;
    }

    /// Marks ring line `i`, drawn in row `r`: the selection style when it
    /// is the line found, the matches highlighted.
    pub(super) fn mark_row(&self, buf: &mut Buffer, i: usize, text: &str, r: Rect, t: &Theme) {
        if !self.search.active() {
            return;
        }
        if self.marked_index() == Some(i) {
            buf.set_style(r, t.selection);
        }
        search::highlight(buf, &self.search, text, r.x, r.y, r.width, t.matched);
    }
}

#[cfg(test)]
mod tests {
    use ratatui::style::Style;

    use super::*;
    use crate::backend::StreamKind;
    use crate::tui::config::TuiConfig;

    fn pane(lines: usize, keep: usize) -> CommandPane {
        let cfg = TuiConfig {
            output_buffer_lines: keep,
            ..Default::default()
        };
        let mut p = CommandPane::new(&cfg);
        p.begin_run("seq", Style::default());
        for i in 0..lines {
            let l = if i % 10 == 7 {
                format!("line {i} ERROR disk\n")
            } else {
                format!("line {i} ok\n")
            };
            p.feed(StreamKind::Stdout, l.as_bytes(), Style::default());
        }
        p.out_height = 10;
        p
    }

    fn marked(p: &CommandPane) -> String {
        let i = p.marked_index().expect("a line is marked");
        p.output.get(i).unwrap().line.text.clone()
    }

    /// `?` from the bottom finds the newest match, `n` goes on up, `N`
    /// back down, both wrap; the line found is scrolled into view and
    /// following pauses; the count is in the bar.
    #[test]
    fn the_output_searches_like_the_viewer() {
        let mut p = pane(100, 1000);
        p.search.begin(true);
        p.search.set("error");
        p.search.editing = false;
        assert!(p.find(false));
        assert_eq!(marked(&p), "line 97 ERROR disk");
        assert_eq!(p.search.label(), "?error  10/10");
        assert!(!p.follow, "following pauses on a match");
        assert!(p.find(false));
        assert_eq!(marked(&p), "line 87 ERROR disk");
        assert!(p.find(true), "N goes the other way");
        assert!(p.find(true), "and wraps past the newest");
        assert_eq!(marked(&p), "line 7 ERROR disk");
        // Line 7 is on screen: the output is scrolled back to it.
        let n = p.output.len() + 1; // the header line of the run
        let end = p.output.len() - p.back;
        let i = p.marked_index().unwrap();
        assert!(i < end && i + 10 >= end, "on screen: {i} in ..{end} of {n}");
        // Smart case, and no match says so without moving.
        p.search.set("Error");
        assert!(!p.find(false));
        assert_eq!(p.search.label(), "?Error  no match");
    }

    /// The mark is kept by sequence number: lines dropped from the ring
    /// (a flood) do not move it to another line; `/` from the top of the
    /// screen goes down.
    #[test]
    fn the_mark_stays_on_its_line_while_output_flows() {
        let mut p = pane(50, 52);
        p.search.set("line 17 ");
        p.follow = false;
        p.back = p.output.len();
        assert!(p.find(false));
        assert_eq!(marked(&p), "line 17 ERROR disk");
        for i in 50..55 {
            p.feed(
                StreamKind::Stdout,
                format!("line {i} ok\n").as_bytes(),
                Style::default(),
            );
        }
        assert!(p.output.dropped() > 0, "old lines were dropped");
        assert_eq!(marked(&p), "line 17 ERROR disk");
        p.clear_search();
        assert_eq!(p.marked_index(), None);
    }
}
