//! Which pane has the focus, and moving it.

use super::App;

impl App {
    pub(super) fn set_focus(&mut self, id: &'static str) {
        if self.layout.contains(id) {
            self.focus = id;
            self.modal = None;
        } else if self.pane_index(id).is_some() {
            self.modal = Some(id);
        } else {
            // Not silent: a user pressing a focus key learns why nothing
            // moved.
            self.apply(crate::tui::action::Effect::Toast(
                crate::tui::action::Level::Info,
                format!("no {id} pane in this session"),
            ));
        }
        self.blur_unfocused();
    }

    pub(super) fn focus_order(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        self.layout.leaves(&mut v);
        // Focus order follows the registry, which reads better than the
        // layout's column order (Sessions, Files, Skills, ...).
        let mut ordered: Vec<&'static str> = self
            .panes
            .iter()
            .map(|p| p.id())
            .filter(|id| v.contains(id))
            .collect();
        for id in v {
            if !ordered.contains(&id) {
                ordered.push(id);
            }
        }
        ordered
    }

    pub(super) fn cycle_focus(&mut self, delta: isize) {
        if self.modal.is_some() {
            return;
        }
        let order = self.focus_order();
        let i = order.iter().position(|&p| p == self.focus).unwrap_or(0) as isize;
        let n = order.len() as isize;
        self.focus = order[((i + delta) % n + n) as usize % n as usize];
        self.blur_unfocused();
    }
}
