//! The Files pane: a lazy tree of the workspace with a preview.
//!
//! * Lazy: a directory is listed when it is expanded, never before; the
//!   tree keeps what it listed and a flat list of the rows on show, which
//!   is rebuilt only when the tree changes, so drawing a frame touches the
//!   visible rows only (a 100,000-entry tree draws as fast as a small one).
//! * Live: changes from the backend's watch re-list the directories that
//!   are loaded (coalesced: one listing per directory in flight, one more
//!   queued). A `mkdir -p` on the local backend reports every level (C20);
//!   re-listing merges by name, so duplicate events never duplicate rows.
//! * Names are shown through [`text::display`] (NFC, controls made
//!   visible, C21) but every operation uses the original name.
//! * Markers: `▸`/`▾` directories, `@ → target` symlinks, `bin` binary
//!   files (sniffed for the rows on screen only).

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::backend::{ByteRange, ChangeKind, FileKind, FileStat, path as bpath};
use crate::engine::offload::{png_dimensions, sniff_media_type};
use crate::tui::action::{AppMsg, DialogTag, Doc, Effect, Level, PaneEvent, TaskResult};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, act, deliver, filter_bar, list_mouse, navigate, placeholder,
};
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::filter::{Filter, FilterOutcome};
use crate::tui::widgets::list::{ListCursor, render_rows};
use crate::tui::widgets::text;

/// Pane id.
pub const ID: &str = "files";

/// Bytes of a file read for the preview.
pub const PREVIEW_BYTES: u64 = 64 * 1024;

/// Bytes read to decide whether a file is binary.
const SNIFF_BYTES: u64 = 1024;

/// Rows sniffed per batch.
const SNIFF_BATCH: usize = 64;

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = crate::pane_actions!("files";
    act("files.open", ID, "open / expand", &["enter", "l", "right"], false, true),
    act("files.collapse", ID, "collapse / parent", &["h", "left"], false, false),
    act("files.edit", ID, "edit", &["e"], false, true),
    act("files.view", ID, "view full screen", &["v"], false, false),
    act("files.filter", ID, "filter", &["/"], false, true),
    act("files.refresh", ID, "refresh", &["r"], false, false),
    act("files.upload", ID, "upload host file", &["u"], true, true),
    act("files.download", ID, "download to host", &["d"], false, true),
    act("files.rename", ID, "rename", &["R"], true, true),
    act("files.delete", ID, "delete", &["D", "delete"], true, true),
    act("files.copy_path", ID, "copy path", &["y"], false, false),
    act("files.preview_down", ID, "scroll preview down", &["J", "shift-down"], false, false),
    act("files.preview_up", ID, "scroll preview up", &["K", "shift-up"], false, false),
    act("files.toggle_preview", ID, "toggle preview", &["p"], false, false),
);

/// One entry of the tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// Name as the backend gave it (used for every operation).
    pub name: String,
    /// Name as shown (NFC, controls visible).
    pub display: String,
    /// Backend path.
    pub path: String,
    /// Kind (symlinks not followed).
    pub kind: FileKind,
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub modified: Option<SystemTime>,
    /// Symlink target text.
    pub link_target: Option<String>,
    /// Symlink to a directory.
    pub target_is_dir: bool,
    /// Depth below the root (root children are 0).
    pub depth: u16,
    /// Parent node.
    pub parent: Option<usize>,
    /// Children once listed.
    pub children: Option<Vec<usize>>,
    /// Expanded (children on show).
    pub expanded: bool,
    /// A listing is in flight.
    pub loading: bool,
    /// Sniffed: binary content.
    pub binary: Option<bool>,
    alive: bool,
}

impl Node {
    fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir || (self.kind == FileKind::Symlink && self.target_is_dir)
    }
}

/// What the preview shows.
#[derive(Debug, Clone)]
pub enum PreviewBody {
    /// Text lines (the first [`PREVIEW_BYTES`]).
    Text {
        /// Lines.
        lines: Vec<String>,
        /// The file is longer than what was read.
        truncated: bool,
    },
    /// Metadata of a binary file.
    Binary {
        /// Sniffed media type.
        media: String,
        /// PNG pixel size.
        dims: Option<(u32, u32)>,
    },
    /// A directory.
    Dir(usize),
    /// Reading failed.
    Error(String),
}

#[derive(Debug, Clone)]
struct Preview {
    path: String,
    body: PreviewBody,
    scroll: usize,
}

pub(crate) enum Msg {
    Listed {
        dir: String,
        result: Result<Vec<FileStat>, String>,
    },
    Preview(String, PreviewBody),
    Sniffed(Vec<(String, bool)>),
    Done(String),
    Failed(String),
}

/// The Files pane.
pub struct FilesPane {
    nodes: Vec<Node>,
    by_path: HashMap<String, usize>,
    root: usize,
    visible: Vec<usize>,
    cursor: ListCursor,
    filter: Filter,
    preview: Option<Preview>,
    preview_want: Option<String>,
    preview_busy: bool,
    show_preview: bool,
    /// Inside of the pane at the last render: whether `p` can show the
    /// preview there.
    inner_area: Rect,
    inflight: BTreeSet<String>,
    again: BTreeSet<String>,
    sniffing: bool,
    tree_area: Rect,
    watching: bool,
}

impl Default for FilesPane {
    fn default() -> Self {
        Self::new()
    }
}

/// The running workspace watch; dropping it stops the watch task, which
/// drops the backend's watcher (so no more events are produced) and its
/// hold on the workspace.
#[derive(Debug)]
pub struct WatchHandle {
    task: tokio::task::AbortHandle,
    generation: u64,
}

impl WatchHandle {
    /// The generation its [`AppMsg::File`] messages carry: the app drops
    /// messages of older generations still queued after a switch.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the watch task has ended (stopped, failed, or the backend
    /// closed its event stream).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the workspace watch: changes arrive as [`AppMsg::File`] tagged
/// with `generation`. A backend without watch logs that the tree
/// refreshes on `r` only. The watch lives as long as the returned handle.
pub fn start_watch(cx: &Ctx, generation: u64) -> WatchHandle {
    let ws = cx.ws.clone();
    let tx = cx.tx.clone();
    let task = tokio::spawn(async move {
        let root = ws.layout().workdir().to_string();
        if !ws.sandbox().capabilities().watch {
            let _ = tx
                .send(AppMsg::Toast(
                    Level::Info,
                    format!(
                        "the {} backend cannot watch files: press r in Files to refresh",
                        ws.backend()
                    ),
                ))
                .await;
            return;
        }
        match ws.sandbox().watch(&root).await {
            Ok(mut w) => {
                // Only the watch is needed from here on: the workspace
                // itself must not outlive a switch because of this task.
                drop(ws);
                while let Some(change) = w.events.recv().await {
                    if tx.send(AppMsg::File { generation, change }).await.is_err() {
                        break;
                    }
                }
            }
            Err(e) => {
                let _ = tx
                    .send(AppMsg::Toast(
                        Level::Warn,
                        format!("file watch failed: {e}"),
                    ))
                    .await;
            }
        }
    });
    WatchHandle {
        task: task.abort_handle(),
        generation,
    }
}

fn decode_preview(bytes: &[u8], size: u64) -> PreviewBody {
    let head = &bytes[..bytes.len().min(8192)];
    if let Some(media) = sniff_media_type(head) {
        return PreviewBody::Binary {
            media: media.to_string(),
            dims: png_dimensions(head),
        };
    }
    if head.contains(&0) {
        return PreviewBody::Binary {
            media: "application/octet-stream".into(),
            dims: None,
        };
    }
    // A read cut may end inside a UTF-8 character: drop that tail rather
    // than calling the file binary (C26).
    let mut end = bytes.len();
    if let Err(e) = std::str::from_utf8(bytes)
        && e.error_len().is_none()
    {
        end = e.valid_up_to();
    }
    let text = String::from_utf8_lossy(&bytes[..end]);
    let lines = text.lines().map(|l| l.to_string()).collect();
    PreviewBody::Text {
        lines,
        truncated: size > bytes.len() as u64,
    }
}

impl FilesPane {
    /// An empty tree (the root is listed on init).
    pub fn new() -> Self {
        FilesPane {
            nodes: Vec::new(),
            by_path: HashMap::new(),
            root: 0,
            visible: Vec::new(),
            cursor: ListCursor::default(),
            filter: Filter::default(),
            preview: None,
            preview_want: None,
            preview_busy: false,
            show_preview: true,
            inner_area: Rect::default(),
            inflight: BTreeSet::new(),
            again: BTreeSet::new(),
            sniffing: false,
            tree_area: Rect::default(),
            watching: false,
        }
    }

    /// Rows on show, as node indices (tests and benches).
    pub fn visible(&self) -> &[usize] {
        &self.visible
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
        self.visible
            .iter()
            .map(|&i| self.nodes[i].path.clone())
            .collect()
    }

    /// Selects the row of `path` if it is visible.
    pub fn select_path(&mut self, path: &str) -> bool {
        match self
            .find(path)
            .and_then(|i| self.visible.iter().position(|&v| v == i))
        {
            Some(row) => {
                self.cursor.selected = row;
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

    fn root_node(workdir: &str) -> Node {
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

    fn list(&mut self, dir: String, cx: &Ctx) {
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
            let result = ws.sandbox().list(&dir).await.map_err(|e| e.to_string());
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

    fn drop_subtree(&mut self, i: usize) {
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
        let selected_node = self.visible.get(self.cursor.selected).copied();
        self.visible.clear();
        if self.nodes.is_empty() {
            return;
        }
        if self.filter.active() {
            // Every loaded entry that matches, with its ancestors.
            let mut keep = vec![false; self.nodes.len()];
            for (i, n) in self.nodes.iter().enumerate() {
                if i != self.root && n.alive && self.filter.matches(&n.display) {
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
            && let Some(row) = self.visible.iter().position(|&v| v == sel)
        {
            self.cursor.selected = row;
        }
        self.cursor.clamp(self.visible.len());
    }

    /// Depth-first over listed children; `descend(i, node)` says whether a
    /// node is shown (filter) or opened (no filter).
    fn walk(&mut self, start: usize, descend: &mut impl FnMut(usize, &Node) -> bool) {
        let filtering = self.filter.active();
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
                self.visible.push(i);
            } else {
                self.visible.push(i);
                if !descend(i, n) {
                    continue;
                }
            }
            if let Some(kids) = &n.children {
                stack.extend(kids.iter().rev().copied());
            }
        }
    }

    fn selected(&self) -> Option<usize> {
        self.visible.get(self.cursor.selected).copied()
    }

    fn expand(&mut self, i: usize, cx: &mut Ctx) {
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

    fn want_preview(&mut self, cx: &Ctx) {
        let Some(i) = self.selected() else {
            self.preview = None;
            return;
        };
        let path = self.nodes[i].path.clone();
        if self.preview.as_ref().is_some_and(|p| p.path == path) {
            return;
        }
        self.preview_want = Some(path);
        self.start_preview(cx);
    }

    fn start_preview(&mut self, cx: &Ctx) {
        if self.preview_busy {
            return;
        }
        let Some(path) = self.preview_want.take() else {
            return;
        };
        let Some(i) = self.find(&path) else {
            return;
        };
        let n = &self.nodes[i];
        if n.is_dir() {
            let count = n.children.as_ref().map(|c| c.len()).unwrap_or(0);
            self.preview = Some(Preview {
                path,
                body: PreviewBody::Dir(count),
                scroll: 0,
            });
            return;
        }
        let size = n.size;
        self.preview_busy = true;
        let ws = cx.ws.clone();
        cx.spawn::<FilesPane>(async move {
            let body = match ws
                .sandbox()
                .read(
                    &path,
                    Some(ByteRange {
                        offset: 0,
                        len: PREVIEW_BYTES,
                    }),
                )
                .await
            {
                Ok(bytes) => decode_preview(&bytes, size),
                Err(e) => PreviewBody::Error(e.to_string()),
            };
            Msg::Preview(path, body)
        });
    }

    fn sniff_visible(&mut self, cx: &Ctx) {
        if self.sniffing {
            return;
        }
        let todo: Vec<String> = self
            .cursor
            .visible(self.visible.len())
            .map(|r| self.visible[r])
            .filter(|&i| {
                let n = &self.nodes[i];
                n.kind == FileKind::File && n.binary.is_none() && n.size > 0
            })
            .take(SNIFF_BATCH)
            .map(|i| self.nodes[i].path.clone())
            .collect();
        if todo.is_empty() {
            return;
        }
        self.sniffing = true;
        let ws = cx.ws.clone();
        cx.spawn::<FilesPane>(async move {
            let mut out = Vec::with_capacity(todo.len());
            for p in todo {
                let bin = match ws
                    .sandbox()
                    .read(
                        &p,
                        Some(ByteRange {
                            offset: 0,
                            len: SNIFF_BYTES,
                        }),
                    )
                    .await
                {
                    Ok(b) => sniff_media_type(&b).is_some() || b.contains(&0),
                    Err(_) => false,
                };
                out.push((p, bin));
            }
            Msg::Sniffed(out)
        });
    }

    fn on_change(&mut self, path: &str, kind: ChangeKind, cx: &Ctx) {
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
            self.preview_want = Some(path.to_string());
            self.start_preview(cx);
        }
    }

    fn run_op(
        &self,
        cx: &Ctx,
        fut: impl std::future::Future<Output = Result<String, String>> + Send + 'static,
    ) {
        cx.spawn::<FilesPane>(async move {
            match fut.await {
                Ok(m) => Msg::Done(m),
                Err(e) => Msg::Failed(e),
            }
        });
    }

    fn selected_node(&self) -> Option<&Node> {
        self.selected().map(|i| &self.nodes[i])
    }

    fn target_dir(&self) -> String {
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

    fn render_preview(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        let Some(p) = &mut self.preview else {
            placeholder(f, area, "no file selected", t.muted);
            return;
        };
        let buf = f.buffer_mut();
        match &p.body {
            PreviewBody::Text { lines, truncated } => {
                if lines.is_empty() {
                    placeholder(f, area, "(empty file)", t.muted);
                    return;
                }
                let h = area.height as usize;
                p.scroll = p.scroll.min(lines.len().saturating_sub(1));
                let numw = (p.scroll + h).min(lines.len()).to_string().len().max(2);
                for (row, (n, l)) in lines.iter().enumerate().skip(p.scroll).take(h).enumerate() {
                    let y = area.y + row as u16;
                    let num = format!("{:>numw$} ", n + 1);
                    buf.set_stringn(area.x, y, &num, area.width as usize, t.line_number);
                    let x = area.x + num.len() as u16;
                    if x < area.x + area.width {
                        let w = (area.x + area.width - x) as usize;
                        buf.set_stringn(x, y, text::display(l), w, t.base);
                    }
                }
                if *truncated && lines.len() <= p.scroll + h && area.height > 0 {
                    let y = area.y + (lines.len() - p.scroll).min(h.saturating_sub(1)) as u16;
                    buf.set_stringn(
                        area.x,
                        y,
                        "… (preview shows the first 64 KiB)",
                        area.width as usize,
                        t.muted,
                    );
                }
            }
            PreviewBody::Binary { media, dims } => {
                let node = self.by_path.get(&p.path).map(|&i| &self.nodes[i]);
                let mut rows = vec![
                    format!("binary file · {media}"),
                    format!(
                        "size      {}",
                        node.map(|n| text::human_size(n.size)).unwrap_or_default()
                    ),
                ];
                if let Some((w, h)) = dims {
                    rows.push(format!("pixels    {w}×{h}"));
                }
                for (i, r) in rows.iter().enumerate().take(area.height as usize) {
                    buf.set_stringn(area.x, area.y + i as u16, r, area.width as usize, t.binary);
                }
            }
            PreviewBody::Dir(_) => {
                // The count comes from the tree as it is now, not from when
                // the preview was made: expanding lists the directory after
                // the cursor landed on it.
                let listed = self
                    .by_path
                    .get(&p.path)
                    .and_then(|&i| self.nodes[i].children.as_ref().map(|c| c.len()));
                let msg = match listed {
                    Some(1) => "directory · 1 entry".to_string(),
                    Some(n) => format!("directory · {n} entries"),
                    None => "directory · enter expands it".to_string(),
                };
                buf.set_stringn(area.x, area.y, msg, area.width as usize, t.muted);
            }
            PreviewBody::Error(e) => {
                buf.set_stringn(
                    area.x,
                    area.y,
                    text::display(e),
                    area.width as usize,
                    t.error,
                );
            }
        }
    }
}

impl Pane for FilesPane {
    fn id(&self) -> &'static str {
        ID
    }

    fn on_task(&mut self, task: TaskResult, cx: &mut Ctx) {
        deliver(self, task, cx);
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn title(&self) -> String {
        "Files".into()
    }

    fn init(&mut self, cx: &mut Ctx) {
        let root = cx.ws.layout().workdir().to_string();
        self.nodes.push(Self::root_node(&root));
        self.root = 0;
        self.by_path.insert(root.clone(), 0);
        self.watching = cx.ws.sandbox().capabilities().watch;
        self.list(root, cx);
    }

    fn text_input_active(&self) -> bool {
        self.filter.editing
    }

    fn blur(&mut self) {
        // The filter typed so far stays applied, as after Enter.
        self.filter.editing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, _cx: &mut Ctx) -> bool {
        match self.filter.key(key) {
            FilterOutcome::Ignored => false,
            _ => {
                self.rebuild();
                true
            }
        }
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        let used = self.filter.paste(s) != FilterOutcome::Ignored;
        self.rebuild();
        used
    }

    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool {
        let verb = action.strip_prefix("files.").unwrap_or(action);
        if navigate(&mut self.cursor, verb, self.visible.len()) {
            self.want_preview(cx);
            return true;
        }
        match verb {
            "open" => {
                let Some(i) = self.selected() else {
                    return true;
                };
                if self.nodes[i].is_dir() {
                    if self.nodes[i].expanded && self.nodes[i].children.is_some() {
                        self.nodes[i].expanded = false;
                        self.rebuild();
                    } else {
                        self.expand(i, cx);
                    }
                } else if self.nodes[i].binary == Some(true)
                    || matches!(
                        self.preview.as_ref().map(|p| &p.body),
                        Some(PreviewBody::Binary { .. })
                    ) && self
                        .preview
                        .as_ref()
                        .is_some_and(|p| p.path == self.nodes[i].path)
                {
                    cx.effect(Effect::OpenLink(self.nodes[i].path.clone()));
                } else {
                    cx.effect(Effect::OpenEditor(self.nodes[i].path.clone()));
                }
            }
            "collapse" => {
                if let Some(i) = self.selected() {
                    if self.nodes[i].is_dir() && self.nodes[i].expanded {
                        self.nodes[i].expanded = false;
                        self.rebuild();
                    } else if let Some(p) = self.nodes[i].parent.filter(|&p| p != self.root) {
                        self.nodes[p].expanded = false;
                        self.rebuild();
                        if let Some(row) = self.visible.iter().position(|&v| v == p) {
                            self.cursor.selected = row;
                        }
                    }
                }
            }
            "edit" => {
                if let Some(n) = self.selected_node().filter(|n| !n.is_dir()) {
                    cx.effect(Effect::OpenEditor(n.path.clone()));
                }
            }
            "view" => {
                if let Some(n) = self.selected_node().filter(|n| !n.is_dir()) {
                    cx.effect(Effect::OpenLink(n.path.clone()));
                }
            }
            "filter" => self.filter.begin(),
            "refresh" => {
                let dirs: Vec<String> = self
                    .nodes
                    .iter()
                    .filter(|n| n.alive && n.children.is_some())
                    .map(|n| n.path.clone())
                    .collect();
                for d in dirs {
                    self.list(d, cx);
                }
                self.preview = None;
                self.want_preview(cx);
            }
            "upload" => {
                let dir = self.target_dir();
                cx.effect(Effect::Prompt {
                    pane: ID,
                    title: format!("Upload a host file into {}", text::display(&dir)),
                    initial: String::new(),
                    tag: DialogTag::Upload { dir },
                });
            }
            "download" => {
                if let Some(n) = self.selected_node().filter(|n| !n.is_dir()) {
                    let cwd = std::env::current_dir().unwrap_or_default();
                    let initial = cwd.join(&n.name).display().to_string();
                    cx.effect(Effect::Prompt {
                        pane: ID,
                        title: format!("Download {} to host path", n.display),
                        initial,
                        tag: DialogTag::Download {
                            path: n.path.clone(),
                        },
                    });
                }
            }
            "rename" => {
                if let Some(n) = self.selected_node() {
                    cx.effect(Effect::Prompt {
                        pane: ID,
                        title: format!("Rename {}", n.display),
                        initial: n.name.clone(),
                        tag: DialogTag::Rename {
                            path: n.path.clone(),
                        },
                    });
                }
            }
            "delete" => {
                if let Some(n) = self.selected_node() {
                    let what = if n.is_dir() && n.kind == FileKind::Dir {
                        "directory and everything in it"
                    } else {
                        "file"
                    };
                    cx.effect(Effect::Confirm {
                        pane: ID,
                        message: format!("Delete {what} {}?", n.display),
                        tag: DialogTag::Delete {
                            path: n.path.clone(),
                        },
                    });
                }
            }
            "copy_path" => {
                if let Some(n) = self.selected_node() {
                    cx.effect(Effect::Copy(n.path.clone()));
                }
            }
            "preview_down" | "preview_up" => {
                if let Some(p) = &mut self.preview {
                    let d: isize = if verb == "preview_down" { 5 } else { -5 };
                    p.scroll = (p.scroll as isize + d).max(0) as usize;
                }
            }
            "toggle_preview" => {
                self.show_preview = !self.show_preview;
                let msg = if !self.show_preview {
                    "preview off (p shows it)".to_string()
                } else if preview_layout(self.inner_area, true).is_some() {
                    "preview on".to_string()
                } else {
                    format!(
                        "preview on, but the pane is too small to show it (needs {PREVIEW_SIDE_MIN_WIDTH} \
                         columns, or {PREVIEW_BELOW_MIN_HEIGHT} rows): z zooms the pane"
                    )
                };
                cx.toast(Level::Info, msg);
            }
            _ => return false,
        }
        true
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::File(change) => self.on_change(&change.path, change.kind, cx),
            PaneEvent::Confirmed(DialogTag::Delete { path }) => {
                let ws = cx.ws.clone();
                let p = path.clone();
                let recursive = self
                    .find(path)
                    .is_some_and(|i| self.nodes[i].kind == FileKind::Dir);
                self.run_op(cx, async move {
                    ws.sandbox()
                        .remove(&p, recursive)
                        .await
                        .map(|_| format!("deleted {p}"))
                        .map_err(|e| format!("delete {p}: {e}"))
                });
            }
            PaneEvent::Input { tag, text: input } => {
                let input = input.trim().to_string();
                if input.is_empty() {
                    return;
                }
                let ws = cx.ws.clone();
                if let DialogTag::Upload { dir } = tag {
                    let host = expand_home(&input);
                    let name = host
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let dest = bpath::join(dir, &name);
                    self.run_op(cx, async move {
                        let meta = tokio::fs::metadata(&host)
                            .await
                            .map_err(|e| format!("{}: {e}", host.display()))?;
                        if !meta.is_file() {
                            return Err(format!("{} is not a file", host.display()));
                        }
                        let file = tokio::fs::File::open(&host)
                            .await
                            .map_err(|e| format!("{}: {e}", host.display()))?;
                        let n = ws
                            .sandbox()
                            .write_stream(&dest, Box::new(file))
                            .await
                            .map_err(|e| format!("upload to {dest}: {e}"))?;
                        Ok(format!("uploaded {} ({})", dest, text::human_size(n)))
                    });
                } else if let DialogTag::Download { path: src } = tag {
                    let host = expand_home(&input);
                    let src = src.to_string();
                    self.run_op(cx, async move {
                        if tokio::fs::symlink_metadata(&host).await.is_ok() {
                            return Err(format!("{} exists: give a new path", host.display()));
                        }
                        let bytes = ws
                            .sandbox()
                            .read(&src, None)
                            .await
                            .map_err(|e| format!("read {src}: {e}"))?;
                        tokio::fs::write(&host, &bytes)
                            .await
                            .map_err(|e| format!("{}: {e}", host.display()))?;
                        Ok(format!(
                            "downloaded to {} ({})",
                            host.display(),
                            text::human_size(bytes.len() as u64)
                        ))
                    });
                } else if let DialogTag::Rename { path: from } = tag {
                    if input.contains('/') || input == "." || input == ".." {
                        cx.toast(Level::Error, "a new name, not a path (no `/`)");
                        return;
                    }
                    let to = bpath::join(&bpath::parent(from), &input);
                    let from = from.to_string();
                    self.run_op(cx, async move {
                        if ws.sandbox().stat(&to).await.is_ok() {
                            return Err(format!("{to} exists"));
                        }
                        ws.sandbox()
                            .rename(&from, &to)
                            .await
                            .map(|_| format!("renamed to {to}"))
                            .map_err(|e| format!("rename {from}: {e}"))
                    });
                }
            }
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.cursor, ev, self.tree_area, self.visible.len()) {
            ListMouse::Clicked(_, true) => self.on_action("files.open", cx),
            ListMouse::Clicked(_, false) => {
                self.want_preview(cx);
                true
            }
            ListMouse::Scrolled => true,
            ListMouse::None => false,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let loading = self.nodes.iter().take(1).any(|n| n.loading) || !self.inflight.is_empty();
        let note = format!(
            "{}{}",
            if self.watching { "live" } else { "" },
            if loading { " · listing…" } else { "" }
        );
        let block = cx.block_for(area, &self.title(), note.trim_start_matches(' '), focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        // Beside the tree when wide enough, else under it when tall
        // enough (the default layout at 120 columns), else not at all.
        let layout = preview_layout(inner, self.show_preview);
        self.inner_area = inner;
        let (tree, prev, below) = match layout {
            Some((tree, prev, below)) => (tree, Some(prev), below),
            None => (inner, None, false),
        };
        let list = filter_bar(f, tree, &self.filter, cx);
        self.tree_area = list;
        if self.visible.is_empty() {
            let msg = if loading {
                "listing…"
            } else if self.filter.active() {
                "nothing matches (filter searches listed folders)"
            } else {
                "empty workspace"
            };
            placeholder(f, list, msg, t.muted);
        } else {
            let nodes = &self.nodes;
            let visible = &self.visible;
            let w = list.width as usize;
            render_rows(
                f.buffer_mut(),
                list,
                &mut self.cursor,
                visible.len(),
                focused,
                t.selection,
                |r| {
                    let n = &nodes[visible[r]];
                    let indent = "  ".repeat(n.depth as usize);
                    let (marker, name_style) = if n.is_dir() {
                        let m = if n.loading {
                            "⋯ "
                        } else if n.expanded {
                            "▾ "
                        } else {
                            "▸ "
                        };
                        (m, t.dir)
                    } else if n.kind == FileKind::Symlink {
                        ("  ", t.symlink)
                    } else {
                        ("  ", t.base)
                    };
                    let mut suffix = String::new();
                    let mut extra = String::new();
                    match n.kind {
                        FileKind::Dir => suffix.push('/'),
                        FileKind::Symlink => {
                            suffix.push('@');
                            if let Some(target) = &n.link_target {
                                extra = format!(" → {}", text::display(target));
                            }
                        }
                        FileKind::Other => suffix.push('|'),
                        FileKind::File => {}
                    }
                    let bin = n.binary == Some(true);
                    let right = if n.kind == FileKind::File {
                        format!(
                            "{}{}",
                            if bin { "bin " } else { "" },
                            text::human_size(n.size)
                        )
                    } else {
                        String::new()
                    };
                    let left_w = w.saturating_sub(text::width(&right) + 1);
                    let head = format!("{indent}{marker}");
                    let body = format!("{}{suffix}", n.display);
                    let room = left_w.saturating_sub(text::width(&head));
                    let body_t = text::truncate(&body, room).into_owned();
                    let extra_t = text::truncate(&extra, room.saturating_sub(text::width(&body_t)))
                        .into_owned();
                    let used = text::width(&head) + text::width(&body_t) + text::width(&extra_t);
                    let pad = w.saturating_sub(used + text::width(&right));
                    Line::from(vec![
                        Span::styled(head, t.muted),
                        Span::styled(body_t, name_style),
                        Span::styled(extra_t, t.muted),
                        Span::raw(" ".repeat(pad)),
                        Span::styled(right, if bin { t.binary } else { t.muted }),
                    ])
                },
            );
            self.sniff_visible(cx);
        }
        if let Some(pa) = prev {
            if below {
                let line = "─".repeat(pa.width as usize);
                f.buffer_mut().set_string(pa.x, pa.y - 1, line, t.border);
            } else {
                let sep_x = pa.x - 1;
                for y in pa.y..pa.y + pa.height {
                    f.buffer_mut().set_string(sep_x, y, "│", t.border);
                }
            }
            self.render_preview(f, pa, cx);
        }
    }
}

impl TaskPane for FilesPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        let msg = &msg;
        match msg {
            Msg::Listed { dir, result } => {
                self.inflight.remove(dir);
                match result {
                    Ok(entries) => self.apply_listing(dir, entries.clone()),
                    Err(e) => {
                        if let Some(i) = self.find(dir) {
                            self.nodes[i].loading = false;
                        }
                        if dir == &self.nodes[self.root].path || !e.contains("no such file") {
                            cx.toast(Level::Error, format!("listing {dir}: {e}"));
                        }
                    }
                }
                self.rebuild();
                if self.again.remove(dir) {
                    self.list(dir.clone(), cx);
                }
                if let Some(p) = &mut self.preview
                    && &p.path == dir
                    && let PreviewBody::Dir(n) = &mut p.body
                    && let Some(i) = self.by_path.get(dir)
                {
                    *n = self.nodes[*i].children.as_ref().map_or(0, |c| c.len());
                }
                if self.preview.is_none() {
                    self.want_preview(cx);
                }
            }
            Msg::Preview(path, body) => {
                self.preview_busy = false;
                self.preview = Some(Preview {
                    path: path.clone(),
                    body: body.clone(),
                    scroll: 0,
                });
                if let Some(i) = self.find(path)
                    && let PreviewBody::Binary { .. } = body
                {
                    self.nodes[i].binary = Some(true);
                }
                self.start_preview(cx);
            }
            Msg::Sniffed(list) => {
                self.sniffing = false;
                for (p, bin) in list {
                    if let Some(i) = self.find(p) {
                        self.nodes[i].binary = Some(*bin);
                    }
                }
            }
            Msg::Done(m) => {
                cx.toast(Level::Info, m.clone());
                if !self.watching {
                    self.on_action("files.refresh", cx);
                }
            }
            Msg::Failed(e) => cx.toast(Level::Error, e.clone()),
        }
    }
}

/// Width from which the preview sits beside the tree.
pub const PREVIEW_SIDE_MIN_WIDTH: u16 = 64;
/// Height from which the preview sits under the tree instead.
pub const PREVIEW_BELOW_MIN_HEIGHT: u16 = 12;

/// `(tree, preview, preview is below)` areas inside `inner`, or `None`
/// when the preview is off or the pane is too small for it.
fn preview_layout(inner: Rect, on: bool) -> Option<(Rect, Rect, bool)> {
    if !on {
        return None;
    }
    if inner.width >= PREVIEW_SIDE_MIN_WIDTH {
        let tw = (inner.width * 45 / 100).max(20);
        return Some((
            Rect::new(inner.x, inner.y, tw, inner.height),
            Rect::new(
                inner.x + tw + 1,
                inner.y,
                inner.width - tw - 1,
                inner.height,
            ),
            false,
        ));
    }
    if inner.height >= PREVIEW_BELOW_MIN_HEIGHT && inner.width >= 20 {
        let th = inner.height / 2;
        return Some((
            Rect::new(inner.x, inner.y, inner.width, th),
            Rect::new(
                inner.x,
                inner.y + th + 1,
                inner.width,
                inner.height - th - 1,
            ),
            true,
        ));
    }
    None
}

fn expand_home(p: &str) -> std::path::PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = dirs::home_dir()
    {
        return home.join(rest);
    }
    std::path::PathBuf::from(p)
}

/// A document describing a file or blob: size, type, pixels (used by the
/// viewer for binary files and `workspace:///` links).
pub fn metadata_doc(path: &str, stat: Option<&FileStat>, head: &[u8], error: Option<&str>) -> Doc {
    let mut lines = vec![StyledLine::plain(
        &format!("path        {path}"),
        Default::default(),
    )];
    if let Some(e) = error {
        lines.push(StyledLine::plain(
            &format!("error       {e}"),
            Default::default(),
        ));
    }
    if let Some(s) = stat {
        lines.push(StyledLine::plain(
            &format!(
                "size        {} bytes ({})",
                s.size,
                text::human_size(s.size)
            ),
            Default::default(),
        ));
        if let Some(m) = s.modified {
            let dt: chrono::DateTime<chrono::Utc> = m.into();
            lines.push(StyledLine::plain(
                &format!("modified    {}", dt.format("%Y-%m-%d %H:%M:%S UTC")),
                Default::default(),
            ));
        }
        if let Some(mode) = s.mode {
            lines.push(StyledLine::plain(
                &format!("mode        {:o}", mode & 0o7777),
                Default::default(),
            ));
        }
    }
    if error.is_none() {
        let media = sniff_media_type(head).unwrap_or(if head.contains(&0) {
            "application/octet-stream"
        } else {
            "text/plain (probably)"
        });
        lines.push(StyledLine::plain(
            &format!("media type  {media}"),
            Default::default(),
        ));
        if let Some((w, h)) = png_dimensions(head) {
            lines.push(StyledLine::plain(
                &format!("pixels      {w}×{h}"),
                Default::default(),
            ));
        }
    }
    Doc {
        title: path.to_string(),
        lines,
        links: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_decoding() {
        match decode_preview(b"a\nb\n", 4) {
            PreviewBody::Text { lines, truncated } => {
                assert_eq!(lines, ["a", "b"]);
                assert!(!truncated);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode_preview(b"\x89PNG\r\n\x1a\n", 8),
            PreviewBody::Binary { .. }
        ));
        assert!(matches!(
            decode_preview(b"a\0b", 3),
            PreviewBody::Binary { .. }
        ));
        // A cut inside a UTF-8 character is not binary (C26).
        match decode_preview("é".repeat(10).as_bytes().split_at(5).0, 20) {
            PreviewBody::Text { lines, truncated } => {
                assert_eq!(lines, ["éé"]);
                assert!(truncated);
            }
            other => panic!("{other:?}"),
        }
    }
}
