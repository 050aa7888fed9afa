//! Selection and scrolling of a list that draws only its visible rows.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Widget;

/// Cursor and scroll offset of a list of `len` rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCursor {
    /// Selected row.
    pub selected: usize,
    /// First row shown.
    pub offset: usize,
    /// Rows shown at the last render (for paging).
    pub height: usize,
}

impl ListCursor {
    /// Keeps `selected` inside `0..len`.
    pub fn clamp(&mut self, len: usize) {
        if len == 0 {
            self.selected = 0;
            self.offset = 0;
        } else if self.selected >= len {
            self.selected = len - 1;
        }
    }

    /// Moves by `delta` rows (negative = up), clamped.
    pub fn step(&mut self, delta: isize, len: usize) {
        if len == 0 {
            return;
        }
        let s = self.selected as isize + delta;
        self.selected = s.clamp(0, len as isize - 1) as usize;
    }

    /// One page down (`dir` = 1) or up (`dir` = -1).
    pub fn page(&mut self, dir: isize, len: usize) {
        let h = self.height.max(1) as isize;
        self.step(dir * h, len);
    }

    /// First row.
    pub fn top(&mut self) {
        self.selected = 0;
    }

    /// Last row.
    pub fn bottom(&mut self, len: usize) {
        self.selected = len.saturating_sub(1);
    }

    /// Scrolls the view by `delta` rows without leaving the selection
    /// off-screen (mouse wheel).
    pub fn scroll(&mut self, delta: isize, len: usize) {
        let max_off = len.saturating_sub(self.height.max(1));
        self.offset = (self.offset as isize + delta).clamp(0, max_off as isize) as usize;
        if self.selected < self.offset {
            self.selected = self.offset;
        } else if self.height > 0 && self.selected >= self.offset + self.height {
            self.selected = self.offset + self.height - 1;
        }
        self.clamp(len);
    }

    /// Adjusts the offset so the selection is visible in `height` rows.
    pub fn fit(&mut self, height: usize, len: usize) {
        self.height = height;
        self.clamp(len);
        if height == 0 {
            return;
        }
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + height {
            self.offset = self.selected + 1 - height;
        }
        let max_off = len.saturating_sub(height);
        self.offset = self.offset.min(max_off);
    }

    /// The row under screen line `y` of a list drawn at `area_y`.
    pub fn row_at(&self, y: u16, area_y: u16, len: usize) -> Option<usize> {
        let i = self.offset + y.checked_sub(area_y)? as usize;
        (i < len).then_some(i)
    }

    /// Range of rows visible now.
    pub fn visible(&self, len: usize) -> std::ops::Range<usize> {
        let end = (self.offset + self.height).min(len);
        self.offset.min(end)..end
    }
}

/// Draws rows `cursor.visible()` of a list; `row(i)` builds row `i` only
/// when it is on screen. The selected row gets `selected_style` (when
/// `focused`, else just bold).
pub fn render_rows<'a>(
    buf: &mut Buffer,
    area: Rect,
    cursor: &mut ListCursor,
    len: usize,
    focused: bool,
    selected_style: Style,
    mut row: impl FnMut(usize) -> Line<'a>,
) {
    cursor.fit(area.height as usize, len);
    for (n, i) in cursor.visible(len).enumerate() {
        let y = area.y + n as u16;
        let line_area = Rect::new(area.x, y, area.width, 1);
        let line = row(i);
        if i == cursor.selected {
            let st = if focused {
                selected_style
            } else {
                Style::default().add_modifier(
                    ratatui::style::Modifier::BOLD | ratatui::style::Modifier::UNDERLINED,
                )
            };
            buf.set_style(line_area, st);
            line.patch_style(st).render(line_area, buf);
        } else {
            line.render(line_area, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_selection_visible() {
        let mut c = ListCursor::default();
        c.fit(5, 100);
        c.step(7, 100);
        c.fit(5, 100);
        assert_eq!(c.offset, 3);
        assert_eq!(c.visible(100), 3..8);
        c.bottom(100);
        c.fit(5, 100);
        assert_eq!(c.offset, 95);
        c.scroll(-10, 100);
        assert_eq!(c.offset, 85);
        assert_eq!(c.selected, 89);
        assert_eq!(c.row_at(12, 10, 100), Some(87));
        c.clamp(0);
        assert_eq!((c.selected, c.offset), (0, 0));
    }
}
