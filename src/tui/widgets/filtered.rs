//! A list that a `/` filter narrows: the filter field, the cursor over the
//! rows that pass it, and the indices of those rows. The pane keeps its
//! rows (in whatever type it lists) and says which pass; this keeps the
//! glue every filtered pane had (keys, paste, blur, re-filter, clamp).

use ratatui::crossterm::event::KeyEvent;

use super::filter::{Filter, FilterOutcome};
use super::list::ListCursor;

/// Filter, cursor and the shown rows of one filtered list.
#[derive(Debug, Clone, Default)]
pub struct FilteredList {
    /// The `/` filter.
    pub filter: Filter,
    /// The cursor over [`FilteredList::shown`].
    pub cursor: ListCursor,
    /// Indices into the pane's rows of those that pass the filter, in
    /// the pane's order.
    pub shown: Vec<usize>,
}

impl FilteredList {
    /// True while the filter takes keys (the pane's `text_input_active`).
    pub fn editing(&self) -> bool {
        self.filter.editing
    }

    /// Focus left the pane: the filter typed so far stays applied, as
    /// after Enter.
    pub fn blur(&mut self) {
        self.filter.editing = false;
    }

    /// A key for the filter; true when it took it, and then the pane
    /// re-filters (its rows are not here).
    pub fn key(&mut self, key: &KeyEvent) -> bool {
        self.filter.key(key) != FilterOutcome::Ignored
    }

    /// Pasted text for the filter; true when it took it. The pane
    /// re-filters either way, as it always did.
    pub fn paste(&mut self, s: &str) -> bool {
        self.filter.paste(s) != FilterOutcome::Ignored
    }

    /// Recomputes [`FilteredList::shown`] over `len` rows: row `i` is
    /// shown when `keep(filter, i)`; then keeps the cursor inside.
    pub fn refilter(&mut self, len: usize, mut keep: impl FnMut(&Filter, usize) -> bool) {
        let filter = &self.filter;
        self.shown = (0..len).filter(|&i| keep(filter, i)).collect();
        self.cursor.clamp(self.shown.len());
    }

    /// The pane's index of the selected row, if any row is shown.
    pub fn selected(&self) -> Option<usize> {
        self.shown.get(self.cursor.selected).copied()
    }

    /// Forgets the rows and the cursor (the filter stays).
    pub fn clear(&mut self) {
        self.shown.clear();
        self.cursor = ListCursor::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new_with_kind(code, KeyModifiers::NONE, KeyEventKind::Press)
    }

    const ROWS: [&str; 4] = ["alpha", "beta", "gamma", "alphabet"];

    fn refilter(l: &mut FilteredList) {
        l.refilter(ROWS.len(), |f, i| f.matches(ROWS[i]));
    }

    #[test]
    fn typing_narrows_and_keeps_the_cursor_inside() {
        let mut l = FilteredList::default();
        refilter(&mut l);
        assert_eq!(l.shown, [0, 1, 2, 3]);
        l.cursor.selected = 3;
        assert!(!l.key(&k(KeyCode::Char('a'))), "not editing: the key map's");
        l.filter.begin();
        assert!(l.editing());
        for c in "alp".chars() {
            assert!(l.key(&k(KeyCode::Char(c))));
        }
        refilter(&mut l);
        assert_eq!(l.shown, [0, 3]);
        assert_eq!(l.cursor.selected, 1);
        assert_eq!(l.selected(), Some(3));
        assert!(l.key(&k(KeyCode::Enter)));
        assert!(!l.editing());
        assert!(l.filter.active(), "Enter keeps the filter");
    }

    #[test]
    fn blur_keeps_the_filter_and_paste_only_while_editing() {
        let mut l = FilteredList::default();
        assert!(!l.paste("be"));
        l.filter.begin();
        assert!(l.paste("be"));
        refilter(&mut l);
        assert_eq!(l.shown, [1, 3]);
        l.blur();
        assert!(!l.editing());
        refilter(&mut l);
        assert_eq!(l.shown, [1, 3]);
        l.clear();
        assert_eq!(l.selected(), None);
        assert_eq!(l.filter.text, "be");
    }
}
