//! The file tree model of the Files pane: lazy listing, merging of
//! re-listings by name, the flat list of visible rows, expansion and the
//! re-listing of loaded directories on change.

use std::collections::{BTreeSet, HashMap};

use ratatui::layout::Rect;

use crate::backend::{ChangeKind, FileKind, FileStat, path as bpath};
use crate::tui::pane::Ctx;
use crate::tui::widgets::text;

use super::*;

impl FilesPane {
    /// An empty tree (the root is listed on init).
    pub fn new() -> Self {
        FilesPane {
            nodes: Vec::new(),
            by_path: HashMap::new(),
            root: 0,
            list: FilteredList::default(),
            preview: None,
            preview_job: SingleFlight::default(),
            show_preview: true,
            inner_area: Rect::default(),
            inflight: BTreeSet::new(),
            again: BTreeSet::new(),
            sniffing: false,
            tree_area: Rect::default(),
            watching: false,
            revealing: None,
            all: Vec::new(),
            all_state: Default::default(),
            all_stale: false,
            filter_tried: BTreeSet::new(),
        }
    }

    /// Rows on show, as node indices (tests and benches).
    pub fn visible(&self) -> &[usize] {
        &self.list.shown
    }

    /// A node by index.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The node at a backend path, if the tree holds it.
    pub fn find(&self, path: &str) -> Option<usize> {
        self.by_path
            .get(path)
            .copied()
            .filter(|&i| self.nodes[i].alive)
    }

    /// Shown names of the visible rows (tests).
    pub fn visible_names(&self) -> Vec<String> {
        self.list
            .shown
            .iter()
            .map(|&i| self.nodes[i].path.clone())
            .collect()
    }

    /// Backend path of the selected row.
    pub fn selected_path(&self) -> Option<&str> {
        self.selected().map(|i| self.nodes[i].path.as_str())
    }

    /// Selects the row of `path` if it is visible.
    pub fn select_path(&mut self, path: &str) -> bool {
        match self
            .find(path)
            .and_then(|i| self.list.shown.iter().position(|&v| v == i))
        {
            Some(row) => {
                self.list.cursor.selected = row;
                true
            }
            None => false,
        }
    }

    /// Expands the directory at `path` (listing it if needed).
    pub fn expand_path(&mut self, path: &str, cx: &mut Ctx) -> bool {
        let Some(i) = self.find(path) else {
            return false;
        };
        self.expand(i, cx);
        true
    }

    pub(super) fn root_node(workdir: &str) -> Node {
        Node {
            name: String::new(),
            display: String::new(),
            path: workdir.to_string(),
            kind: FileKind::Dir,
            size: 0,
            modified: None,
            link_target: None,
            target_is_dir: false,
            depth: 0,
            parent: None,
            children: None,
            expanded: true,
            loading: false,
            binary: None,
            alive: true,
        }
    }

    pub(super) fn list(&mut self, dir: String, cx: &Ctx) {
        if self.inflight.contains(&dir) {
            self.again.insert(dir);
            return;
        }
        if let Some(&i) = self.by_path.get(&dir) {
            self.nodes[i].loading = true;
        }
        self.inflight.insert(dir.clone());
        let ws = cx.ws.clone();
        cx.spawn::<FilesPane>(async move {
            // wsbench's own temp files (debris of a killed write) are not shown.
            let result = ws
                .sandbox()
                .list(&dir)
                .await
                .map(|v| {
                    v.into_iter()
                        .filter(|e| !crate::backend::path::is_temp_name(&e.name))
                        .collect()
                })
                .map_err(|e| e.to_string());
            Msg::Listed { dir, result }
        });
    }

    /// Puts the listing of `dir` into the tree: keeps the state of entries
    /// still there, adds new ones, drops gone ones.
    pub fn apply_listing(&mut self, dir: &str, entries: Vec<FileStat>) {
        let Some(di) = self.find(dir) else {
            return;
        };
        let depth = if di == self.root {
            0
        } else {
            self.nodes[di].depth + 1
        };
        let old: HashMap<String, usize> = self.nodes[di]
            .children
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (self.nodes[c].name.clone(), c))
            .collect();
        let mut kids = Vec::with_capacity(entries.len());
        let mut seen = std::collections::HashSet::new();
        for e in entries {
            if !seen.insert(e.name.clone()) {
                continue;
            }
            let path = bpath::join(dir, &e.name);
            let idx = match old.get(&e.name) {
                Some(&c) => {
                    let n = &mut self.nodes[c];
                    if n.kind != e.kind || n.size != e.size || n.modified != e.modified {
                        n.binary = None;
                    }
                    n.kind = e.kind;
                    n.size = e.size;
                    n.modified = e.modified;
                    n.link_target = e.link_target.clone();
                    n.target_is_dir = e.target_is_dir;
                    c
                }
                None => {
                    let node = Node {
                        display: text::display(&e.name).into_owned(),
                        name: e.name,
                        path: path.clone(),
                        kind: e.kind,
                        size: e.size,
                        modified: e.modified,
                        link_target: e.link_target,
                        target_is_dir: e.target_is_dir,
                        depth,
                        parent: Some(di),
                        children: None,
                        expanded: false,
                        loading: false,
                        binary: None,
                        alive: true,
                    };
                    self.nodes.push(node);
                    let i = self.nodes.len() - 1;
                    self.by_path.insert(path, i);
                    i
                }
            };
            kids.push(idx);
        }
        let keep: std::collections::HashSet<usize> = kids.iter().copied().collect();
        for (_, c) in old {
            if !keep.contains(&c) {
                self.drop_subtree(c);
            }
        }
        let nodes = &self.nodes;
        kids.sort_by(|&a, &b| {
            let (na, nb) = (&nodes[a], &nodes[b]);
            nb.is_dir()
                .cmp(&na.is_dir())
                .then_with(|| na.name.cmp(&nb.name))
        });
        self.nodes[di].children = Some(kids);
        self.nodes[di].loading = false;
    }

    pub(super) fn drop_subtree(&mut self, i: usize) {
        let mut stack = vec![i];
        while let Some(n) = stack.pop() {
            self.nodes[n].alive = false;
            let path = self.nodes[n].path.clone();
            if self.by_path.get(&path) == Some(&n) {
                self.by_path.remove(&path);
            }
            if let Some(kids) = self.nodes[n].children.take() {
                stack.extend(kids);
            }
        }
    }

    /// Rebuilds the rows on show (after the tree or the filter changed).
    pub fn rebuild(&mut self) {
        let selected_node = self.list.shown.get(self.list.cursor.selected).copied();
        self.list.shown.clear();
        if self.nodes.is_empty() {
            return;
        }
        if self.list.filter.active() {
            // Every loaded entry that matches, with its ancestors.
            let mut keep = vec![false; self.nodes.len()];
            for (i, n) in self.nodes.iter().enumerate() {
                if i != self.root && n.alive && self.list.filter.matches(&n.display) {
                    let mut p = Some(i);
                    while let Some(x) = p {
                        if x == self.root || keep[x] {
                            break;
                        }
                        keep[x] = true;
                        p = self.nodes[x].parent;
                    }
                }
            }
            self.walk(self.root, &mut |i, _| keep[i]);
        } else {
            self.walk(self.root, &mut |_, n| n.expanded);
        }
        if let Some(sel) = selected_node
            && let Some(row) = self.list.shown.iter().position(|&v| v == sel)
        {
            self.list.cursor.selected = row;
        }
        self.list.cursor.clamp(self.list.shown.len());
    }

    /// Depth-first over listed children; `descend(i, node)` says whether a
    /// node is shown (filter) or opened (no filter).
    pub(super) fn walk(&mut self, start: usize, descend: &mut impl FnMut(usize, &Node) -> bool) {
        let filtering = self.list.filter.active();
        let mut stack: Vec<usize> = self.nodes[start]
            .children
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .rev()
            .copied()
            .collect();
        while let Some(i) = stack.pop() {
            let n = &self.nodes[i];
            if filtering {
                if !descend(i, n) {
                    continue;
                }
                self.list.shown.push(i);
            } else {
                self.list.shown.push(i);
                if !descend(i, n) {
                    continue;
                }
            }
            if let Some(kids) = &n.children {
                stack.extend(kids.iter().rev().copied());
            }
        }
    }

    pub(super) fn selected(&self) -> Option<usize> {
        self.list.shown.get(self.list.cursor.selected).copied()
    }

    pub(super) fn expand(&mut self, i: usize, cx: &mut Ctx) {
        if !self.nodes[i].is_dir() {
            return;
        }
        self.nodes[i].expanded = true;
        if self.nodes[i].children.is_none() {
            let path = self.nodes[i].path.clone();
            self.list(path, cx);
        }
        self.rebuild();
    }
}

impl FilesPane {
    pub(super) fn on_change(&mut self, path: &str, kind: ChangeKind, cx: &Ctx) {
        if kind != ChangeKind::Modified {
            self.all_stale = true;
        }
        let targets = if kind == ChangeKind::Rescan {
            vec![path.to_string()]
        } else {
            vec![bpath::parent(path)]
        };
        for dir in targets {
            if let Some(i) = self.find(&dir)
                && self.nodes[i].children.is_some()
            {
                self.list(dir, cx);
            }
        }
        // An atomic save (temp file + rename) arrives as the path being
        // created, not modified: refresh on either.
        if matches!(kind, ChangeKind::Modified | ChangeKind::Created)
            && self.preview.as_ref().is_some_and(|p| p.path == path)
        {
            self.preview = None;
            self.preview_job.want(path.to_string());
            self.start_preview(cx);
        }
    }
}

impl FilesPane {
    pub(super) fn selected_node(&self) -> Option<&Node> {
        self.selected().map(|i| &self.nodes[i])
    }

    pub(super) fn target_dir(&self) -> String {
        match self.selected_node() {
            Some(n) if n.is_dir() => n.path.clone(),
            Some(n) => bpath::parent(&n.path),
            None => self
                .nodes
                .get(self.root)
                .map(|n| n.path.clone())
                .unwrap_or_default(),
        }
    }
}
