//! The `/` and `?` search of a text pane (viewer, tool results, Logs,
//! help): one widget so every pane searches the same way, as in `less`.
//!
//! `/` starts a forward search, `?` a backward one; the prompt opens
//! empty and Up / Down walk the earlier queries (newest first, like a
//! shell history, at most [`HISTORY`] kept). Enter applies the query,
//! Esc clears it. `n` repeats the search in its direction, `N` the other
//! way. Matching is a plain substring, smart case (an upper-case letter
//! in the query makes it case-sensitive); [`Search::ranges`] gives the
//! byte ranges to highlight and [`Search::set_count`] the `3/17` shown
//! in the bar.
//!
//! A pane plugs it in with four calls: [`Search::key`] / [`Search::paste`]
//! in its key and paste handlers, [`Search::next`] for `n` / `N` (a
//! closure tells whether line `i` matches), and [`Search::label`] in its
//! bar; [`highlight`] marks the matches of one drawn row.

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Style;

use super::filter::{FilterOutcome, one_line_paste};
use super::text;

/// Earlier queries kept for Up / Down.
pub const HISTORY: usize = 50;

/// Longest query kept (characters); a longer paste is cut there.
pub const MAX_QUERY_CHARS: usize = 1024;

/// State of one pane's search.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// Taking keys now.
    pub editing: bool,
    /// The query (being typed or applied).
    pub text: String,
    /// Started with `?`: `n` goes up.
    pub backward: bool,
    /// Earlier applied queries, oldest first.
    history: Vec<String>,
    /// Where Up / Down is in `history` (None: the line being typed).
    hist_pos: Option<usize>,
    /// What was typed before Up was pressed, given back by Down.
    draft: String,
    /// The query folded to lower case when it has no upper-case letter.
    folded: Option<String>,
    /// The match on show and the number of matching lines (1-based).
    count: Option<(usize, usize)>,
}

impl Search {
    /// Starts a new query: `/` (forward) or `?` (`backward`); the prompt
    /// opens empty, the last query is one Up away.
    pub fn begin(&mut self, backward: bool) {
        self.editing = true;
        self.backward = backward;
        self.hist_pos = None;
        self.draft.clear();
        self.set("");
    }

    /// True when a non-empty query applies.
    pub fn active(&self) -> bool {
        !self.text.is_empty()
    }

    /// Sets the query directly (tests, a pane's own prefill).
    pub fn set(&mut self, q: &str) {
        self.text = q.chars().take(MAX_QUERY_CHARS).collect();
        self.folded = if self.text.chars().any(char::is_uppercase) {
            None
        } else {
            Some(self.text.to_lowercase())
        };
        self.count = None;
    }

    /// Clears the applied query (Esc outside the prompt).
    pub fn clear(&mut self) {
        self.editing = false;
        self.set("");
    }

    /// The earlier queries, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    fn remember(&mut self) {
        if self.text.is_empty() {
            return;
        }
        self.history.retain(|h| h != &self.text);
        self.history.push(self.text.clone());
        if self.history.len() > HISTORY {
            self.history.remove(0);
        }
    }

    fn walk(&mut self, older: bool) {
        let n = self.history.len();
        if n == 0 {
            return;
        }
        let pos = match (self.hist_pos, older) {
            (None, true) => {
                self.draft = self.text.clone();
                Some(n - 1)
            }
            (None, false) => return,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) if i + 1 < n => Some(i + 1),
            (Some(_), false) => None,
        };
        self.hist_pos = pos;
        let q = match pos {
            Some(i) => self.history[i].clone(),
            None => std::mem::take(&mut self.draft),
        };
        self.set(&q);
    }

    /// Handles a key while editing: Enter applies (and remembers) the
    /// query, Esc clears it, Up / Down walk the history.
    pub fn key(&mut self, key: &KeyEvent) -> FilterOutcome {
        if !self.editing {
            return FilterOutcome::Ignored;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Enter => {
                self.editing = false;
                self.remember();
                FilterOutcome::Done
            }
            KeyCode::Esc => {
                self.clear();
                FilterOutcome::Done
            }
            KeyCode::Up => {
                self.walk(true);
                FilterOutcome::Changed
            }
            KeyCode::Down => {
                self.walk(false);
                FilterOutcome::Changed
            }
            KeyCode::Backspace => {
                let mut t = self.text.clone();
                t.pop();
                self.set(&t);
                FilterOutcome::Changed
            }
            KeyCode::Char('u') if ctrl => {
                self.set("");
                FilterOutcome::Changed
            }
            KeyCode::Char(c) if !ctrl && !key.modifiers.contains(KeyModifiers::ALT) => {
                let t = format!("{}{c}", self.text);
                self.set(&t);
                FilterOutcome::Changed
            }
            // Help, quit and focus keys are not the prompt's to swallow.
            KeyCode::F(_) | KeyCode::Tab | KeyCode::BackTab | KeyCode::Char(_) => {
                FilterOutcome::Ignored
            }
            _ => FilterOutcome::Changed,
        }
    }

    /// Pasted text: line breaks and tabs become spaces, other control
    /// characters are dropped; nothing is submitted.
    pub fn paste(&mut self, s: &str) -> FilterOutcome {
        if !self.editing {
            return FilterOutcome::Ignored;
        }
        let t = format!("{}{}", self.text, one_line_paste(s));
        self.set(&t);
        FilterOutcome::Changed
    }

    /// Byte ranges of `s` holding the query (non-overlapping, left to
    /// right); empty when no query applies.
    pub fn ranges(&self, s: &str) -> Vec<(usize, usize)> {
        if !self.active() {
            return Vec::new();
        }
        let mut out = Vec::new();
        match &self.folded {
            None => {
                for (i, m) in s.match_indices(self.text.as_str()) {
                    out.push((i, i + m.len()));
                }
            }
            Some(q) => {
                // Case-insensitive without a folded copy of `s`: lower-
                // casing can change byte lengths, so compare char by char.
                let qc: Vec<char> = q.chars().collect();
                let idx: Vec<(usize, char)> = s.char_indices().collect();
                let mut i = 0;
                while i + qc.len() <= idx.len() {
                    let hit = qc.iter().enumerate().all(|(k, c)| {
                        let h = idx[i + k].1;
                        h == *c || h.to_lowercase().eq(std::iter::once(*c))
                    });
                    if hit {
                        let end = idx.get(i + qc.len()).map(|x| x.0).unwrap_or(s.len());
                        out.push((idx[i].0, end));
                        i += qc.len().max(1);
                    } else {
                        i += 1;
                    }
                }
            }
        }
        out
    }

    /// Whether `s` holds the query (false when none applies).
    pub fn matches(&self, s: &str) -> bool {
        if !self.active() {
            return false;
        }
        match &self.folded {
            None => s.contains(self.text.as_str()),
            Some(_) => !self.ranges(s).is_empty(),
        }
    }

    /// The next line of `0..n` that matches, from line `from` (excluded)
    /// in the search's direction (`reverse` for `N`), wrapping around;
    /// None when none does.
    pub fn next(
        &self,
        n: usize,
        from: usize,
        reverse: bool,
        matches: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if n == 0 || !self.active() {
            return None;
        }
        let forward = self.backward == reverse;
        let from = from.min(n - 1);
        (1..=n)
            .map(|step| {
                if forward {
                    (from + step) % n
                } else {
                    (from + n - step % n) % n
                }
            })
            .find(|&i| matches(i))
    }

    /// Counts the matching lines of `0..n` and where `at` is among them,
    /// for the bar's `3/17`.
    pub fn set_count(&mut self, n: usize, at: usize, matches: impl Fn(usize) -> bool) {
        let mut total = 0;
        let mut here = 0;
        for i in 0..n {
            if matches(i) {
                total += 1;
                if i <= at {
                    here = total;
                }
            }
        }
        self.count = Some((here, total));
    }

    /// The bar text: `/query▏` while typing, `?query  3/17` applied.
    pub fn label(&self) -> String {
        let sigil = if self.backward { '?' } else { '/' };
        let q = text::display(&self.text);
        if self.editing {
            return format!("{sigil}{q}▏");
        }
        match self.count {
            Some((_, 0)) => format!("{sigil}{q}  no match"),
            Some((i, n)) => format!("{sigil}{q}  {i}/{n}"),
            None => format!("{sigil}{q}"),
        }
    }
}

/// Draws the search bar on the last row of `inner` while a query is
/// typed or applied; returns the rows left above it (all of `inner`
/// otherwise, or when it is under two rows high).
pub fn bar(
    f: &mut ratatui::Frame<'_>,
    inner: ratatui::layout::Rect,
    search: &Search,
    style: Style,
) -> ratatui::layout::Rect {
    if !(search.editing || search.active()) || inner.height < 2 {
        return inner;
    }
    let y = inner.y + inner.height - 1;
    let label = text::truncate_left(&search.label(), inner.width as usize).into_owned();
    f.buffer_mut().set_string(inner.x, y, label, style);
    ratatui::layout::Rect::new(inner.x, inner.y, inner.width, inner.height - 1)
}

/// Marks the matches of `line` drawn at `(x, y)` (cut at `width`
/// columns) with `style`: columns are counted with [`text::width`], so a
/// row drawn with its tabs expanded may be marked a little off.
pub fn highlight(
    buf: &mut Buffer,
    search: &Search,
    line: &str,
    x: u16,
    y: u16,
    width: u16,
    style: Style,
) {
    for (a, b) in search.ranges(line) {
        let col = text::width(&line[..a]);
        let w = text::width(&line[a..b]).max(1);
        if col >= width as usize {
            break;
        }
        let w = w.min(width as usize - col);
        buf.set_style(
            ratatui::layout::Rect::new(x + col as u16, y, w as u16, 1),
            style,
        );
    }
}

/// `line` with the search's matches patched with `style`, for rows that
/// ratatui wraps (where [`highlight`]'s columns would be wrong): the
/// matches are found in the spans' text joined, so one may cross a style
/// boundary, and the spans are cut at the match edges.
pub fn highlight_spans<'a>(
    search: &Search,
    line: ratatui::text::Line<'a>,
    style: Style,
) -> ratatui::text::Line<'a> {
    use ratatui::text::Span;
    if !search.active() {
        return line;
    }
    let joined: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let ranges = search.ranges(&joined);
    if ranges.is_empty() {
        return line;
    }
    let mut spans: Vec<Span<'a>> = Vec::with_capacity(line.spans.len() + 2 * ranges.len());
    let mut at = 0usize;
    for sp in &line.spans {
        let text = sp.content.as_ref();
        let (lo, hi) = (at, at + text.len());
        // Cut points inside this span: every match edge between lo and hi.
        let mut cuts: Vec<usize> = vec![lo, hi];
        for &(a, b) in &ranges {
            for e in [a, b] {
                if e > lo && e < hi {
                    cuts.push(e);
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let inside = ranges.iter().any(|&(ra, rb)| ra <= a && b <= rb);
            let st = if inside {
                sp.style.patch(style)
            } else {
                sp.style
            };
            spans.push(Span::styled(text[a - lo..b - lo].to_string(), st));
        }
        at = hi;
    }
    ratatui::text::Line { spans, ..line }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventKind;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new_with_kind(code, KeyModifiers::NONE, KeyEventKind::Press)
    }

    fn typed(s: &mut Search, q: &str) {
        for c in q.chars() {
            s.key(&k(KeyCode::Char(c)));
        }
        assert_eq!(s.key(&k(KeyCode::Enter)), FilterOutcome::Done);
    }

    #[test]
    fn starts_empty_and_history_is_one_up_away() {
        let mut s = Search::default();
        s.begin(false);
        typed(&mut s, "alpha");
        s.begin(false);
        typed(&mut s, "beta");
        s.begin(true);
        assert_eq!(s.text, "", "a new prompt opens empty");
        assert_eq!(s.label(), "?▏");
        s.key(&k(KeyCode::Char('z')));
        s.key(&k(KeyCode::Up));
        assert_eq!(s.text, "beta");
        s.key(&k(KeyCode::Up));
        assert_eq!(s.text, "alpha");
        s.key(&k(KeyCode::Up));
        assert_eq!(s.text, "alpha", "the oldest stays");
        s.key(&k(KeyCode::Down));
        assert_eq!(s.text, "beta");
        s.key(&k(KeyCode::Down));
        assert_eq!(s.text, "z", "Down past the newest gives the draft back");
        assert_eq!(s.key(&k(KeyCode::Esc)), FilterOutcome::Done);
        assert!(!s.active());
        assert_eq!(s.history(), ["alpha", "beta"]);
    }

    #[test]
    fn history_is_bounded_and_deduplicated() {
        let mut s = Search::default();
        for i in 0..(HISTORY + 10) {
            s.begin(false);
            typed(&mut s, &format!("q{i}"));
        }
        s.begin(false);
        typed(&mut s, "q20");
        assert_eq!(s.history().len(), HISTORY);
        assert_eq!(s.history().last().unwrap(), "q20");
        assert_eq!(s.history().iter().filter(|h| *h == "q20").count(), 1);
    }

    #[test]
    fn smart_case_substring_ranges() {
        let mut s = Search::default();
        s.set("err");
        assert_eq!(s.ranges("ERR: err Error"), vec![(0, 3), (5, 8), (9, 12)]);
        s.set("Err");
        assert_eq!(s.ranges("ERR: err Error"), vec![(9, 12)]);
        assert!(!s.matches("ERR"));
        // Multi-byte text before and inside the match.
        s.set("é");
        assert_eq!(s.ranges("aÉé"), vec![(1, 3), (3, 5)]);
        // Not fuzzy: letters apart do not match.
        s.set("rdme");
        assert!(!s.matches("README"));
    }

    #[test]
    fn next_follows_the_direction_and_wraps() {
        let lines = ["a", "x", "b", "x", "c"];
        let m = |i: usize| lines[i] == "x";
        let mut s = Search::default();
        s.set("x");
        assert_eq!(s.next(5, 1, false, m), Some(3));
        assert_eq!(s.next(5, 3, false, m), Some(1), "wraps to the top");
        assert_eq!(s.next(5, 3, true, m), Some(1), "N goes the other way");
        s.backward = true;
        assert_eq!(s.next(5, 3, false, m), Some(1), "? goes up");
        assert_eq!(s.next(5, 1, false, m), Some(3), "and wraps to the bottom");
        assert_eq!(s.next(5, 1, true, m), Some(3));
        assert_eq!(s.next(5, 0, false, |_| false), None);
        s.set_count(5, 3, m);
        assert_eq!(s.label(), "?x  2/2");
        s.set_count(5, 3, |_| false);
        assert_eq!(s.label(), "?x  no match");
    }

    #[test]
    fn long_paste_is_cut_and_control_characters_dropped() {
        let mut s = Search::default();
        s.begin(false);
        s.paste("a\x1b[31m\nb");
        assert_eq!(s.text, "a[31m b");
        s.paste(&"y".repeat(5000));
        assert_eq!(s.text.chars().count(), MAX_QUERY_CHARS);
    }

    #[test]
    fn wrapped_rows_get_their_matches_as_spans() {
        use ratatui::style::{Color, Style};
        use ratatui::text::{Line, Span};
        let mut s = Search::default();
        let red = Style::default().fg(Color::Red);
        let mark = Style::default().bg(Color::Yellow);
        let line = Line::from(vec![
            Span::styled("an err", red),
            Span::raw("or here, error"),
        ]);
        s.set("error");
        let out = highlight_spans(&s, line.clone(), mark);
        let got: Vec<(&str, bool)> = out
            .spans
            .iter()
            .map(|sp| (sp.content.as_ref(), sp.style.bg == Some(Color::Yellow)))
            .collect();
        assert_eq!(
            got,
            [
                ("an ", false),
                ("err", true),
                ("or", true),
                (" here, ", false),
                ("error", true)
            ]
        );
        assert_eq!(
            out.spans[1].style.fg,
            Some(Color::Red),
            "the span's own style is kept"
        );
        s.set("");
        assert_eq!(highlight_spans(&s, line.clone(), mark), line);
    }
}
