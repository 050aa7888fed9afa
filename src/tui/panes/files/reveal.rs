//! Revealing a path in the tree (the finder's Enter): the folders above
//! it are expanded, each listed first when the tree has not listed it
//! yet, and the path is selected once its row exists.

use crate::backend::path as bpath;
use crate::tui::action::Level;
use crate::tui::pane::Ctx;

use super::*;

impl FilesPane {
    /// Shows `path` (a backend path under the workdir) in the tree:
    /// clears the `/` filter, expands every folder above it and selects
    /// it. Folders not listed yet are listed first, so the reveal ends
    /// when their listings arrive; a path the tree cannot find (gone
    /// since) is a toast.
    pub fn reveal(&mut self, path: &str, cx: &mut Ctx) {
        if self.list.filter.active() || self.list.editing() {
            self.list.blur();
            self.list.filter.set("");
        }
        self.revealing = Some(path.to_string());
        self.continue_reveal(cx);
    }

    /// One step of [`FilesPane::reveal`]: walks down from the root as far
    /// as listings allow; called again when a listing lands.
    pub(super) fn continue_reveal(&mut self, cx: &mut Ctx) {
        let Some(target) = self.revealing.clone() else {
            return;
        };
        let root_path = self.nodes[self.root].path.clone();
        let Some(rel) = bpath::strip_root(&root_path, &target) else {
            self.revealing = None;
            cx.toast(Level::Warn, format!("{target} is outside the workspace"));
            return;
        };
        let mut dir = self.root;
        for part in rel.split('/').filter(|s| !s.is_empty()) {
            if self.nodes[dir].children.is_none() {
                // Listed first; the listing's arrival calls us again.
                self.nodes[dir].expanded = true;
                let p = self.nodes[dir].path.clone();
                if !self.inflight.contains(&p) {
                    self.list(p, cx);
                }
                self.rebuild();
                return;
            }
            self.nodes[dir].expanded = true;
            let child = bpath::join(&self.nodes[dir].path, part);
            match self.find(&child) {
                Some(c) => dir = c,
                None => {
                    self.revealing = None;
                    self.rebuild();
                    cx.toast(Level::Warn, format!("{target} is not in the tree (gone?)"));
                    return;
                }
            }
        }
        self.revealing = None;
        self.rebuild();
        self.select_path(&target);
        self.want_preview(cx);
    }

    /// A listing of `dir` failed: a reveal waiting for it stops.
    pub(super) fn reveal_failed(&mut self, dir: &str) {
        if self
            .revealing
            .as_deref()
            .is_some_and(|t| t.starts_with(dir))
        {
            self.revealing = None;
        }
    }
}
