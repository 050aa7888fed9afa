//! Mouse: focus and forward clicks and the wheel to panes, drag split
//! borders, scroll help.

use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Direction, Rect};

use super::App;
use super::layout::{Node, on_handle};
use super::overlay::Overlay;

impl App {
    pub(super) fn on_mouse(&mut self, m: MouseEvent) {
        if !self.mouse {
            return;
        }
        if let Some(Overlay::Help(h)) = &mut self.overlay {
            match m.kind {
                MouseEventKind::ScrollDown => h.scroll(3),
                MouseEventKind::ScrollUp => h.scroll(-3),
                _ => {}
            }
            return;
        }
        if self.overlay.is_some() {
            return;
        }
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if self.modal.is_none()
                    && let Some(h) = self
                        .handles
                        .iter()
                        .position(|h| on_handle(h, m.column, m.row))
                {
                    self.drag = Some(h);
                    return;
                }
                if let Some((id, area)) = self.hit(m.column, m.row) {
                    if self.modal.is_none() {
                        self.focus = id;
                    }
                    self.with_pane(id, |p, cx| p.on_mouse(&m, area, cx));
                }
            }
            MouseEventKind::Drag(MouseButton::Left) => {
                if let Some(h) = self.drag.and_then(|i| self.handles.get(i).cloned()) {
                    let pct = match h.dir {
                        Direction::Horizontal => {
                            (m.column.saturating_sub(h.area.x) as u32 * 100
                                / h.area.width.max(1) as u32) as u16
                        }
                        Direction::Vertical => {
                            (m.row.saturating_sub(h.area.y) as u32 * 100
                                / h.area.height.max(1) as u32) as u16
                        }
                    };
                    if let Some(Node::Split { pct: p, .. }) = self.layout.split_at_path(&h.path) {
                        *p = pct.clamp(10, 90);
                    }
                }
            }
            MouseEventKind::Up(_) => self.drag = None,
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                if let Some((id, area)) = self.hit(m.column, m.row) {
                    self.with_pane(id, |p, cx| p.on_mouse(&m, area, cx));
                }
            }
            _ => {}
        }
    }

    pub(super) fn hit(&self, x: u16, y: u16) -> Option<(&'static str, Rect)> {
        self.areas
            .iter()
            .rev()
            .find(|(_, r)| x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height)
            .copied()
    }
}
