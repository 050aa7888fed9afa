//! The `Pane` glue of the Files pane: keys, actions, events, mouse,
//! rendering, and task messages.

use ratatui::Frame;
use ratatui::crossterm::event::MouseEvent;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::backend::{FileKind, path as bpath};
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent};
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, filter_bar, filter_suffix, list_mouse, nav, placeholder,
};
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::text;

use super::preview::preview_layout;
use super::*;

impl FilesPane {
    pub(super) fn run_op(
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
}

impl FilesPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: FilesAction, cx: &mut Ctx) -> bool {
        match action {
            FilesAction::Nav(verb) => {
                nav(&mut self.list.cursor, verb, self.list.shown.len());
                self.want_preview(cx);
            }
            FilesAction::Open => {
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
                } else {
                    // Enter views, as less, k9s and lazydocker do; `e`
                    // edits (issue 22). The viewer shows binary files as
                    // such, so there is no special case here.
                    cx.effect(Effect::OpenLink(self.nodes[i].path.clone()));
                }
            }
            FilesAction::Collapse => {
                if let Some(i) = self.selected() {
                    if self.nodes[i].is_dir() && self.nodes[i].expanded {
                        self.nodes[i].expanded = false;
                        self.rebuild();
                    } else if let Some(p) = self.nodes[i].parent.filter(|&p| p != self.root) {
                        self.nodes[p].expanded = false;
                        self.rebuild();
                        if let Some(row) = self.list.shown.iter().position(|&v| v == p) {
                            self.list.cursor.selected = row;
                        }
                    }
                }
            }
            FilesAction::Edit => {
                if let Some(n) = self.selected_node().filter(|n| !n.is_dir()) {
                    cx.effect(Effect::OpenEditor(n.path.clone()));
                }
            }
            FilesAction::View => {
                if let Some(n) = self.selected_node().filter(|n| !n.is_dir()) {
                    cx.effect(Effect::OpenLink(n.path.clone()));
                }
            }
            FilesAction::Describe => {
                if let Some(n) = self.selected_node() {
                    // What the listing knows; Enter on the file (or its
                    // preview) reads the content.
                    let secs = n
                        .modified
                        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                        .map(|d| d.as_secs_f64());
                    let item = serde_json::json!({
                        "name": n.display,
                        "kind": n.kind,
                        "size": n.size,
                        "modified": secs,
                        "link_target": n.link_target,
                        "binary": n.binary,
                    });
                    let paths = [("path", n.path.clone())];
                    let doc =
                        super::super::describe::doc("file", &n.display, &item, &paths, &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
            }
            FilesAction::Filter => self.list.filter.begin(),
            FilesAction::Refresh => {
                self.all_stale = true;
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
            FilesAction::Upload => {
                let dir = self.target_dir();
                cx.effect(Effect::Prompt {
                    pane: ID,
                    title: format!("Upload a host file into {}", text::display(&dir)),
                    initial: String::new(),
                    tag: DialogTag::Upload { dir },
                });
            }
            FilesAction::Download => {
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
            FilesAction::Rename => {
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
            FilesAction::Delete => {
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
            FilesAction::CopyPath => {
                if let Some(n) = self.selected_node() {
                    cx.effect(Effect::Copy(n.path.clone()));
                }
            }
            FilesAction::PreviewDown | FilesAction::PreviewUp => {
                if let Some(p) = &mut self.preview {
                    let d: isize = if action == FilesAction::PreviewDown {
                        5
                    } else {
                        -5
                    };
                    p.scroll = (p.scroll as isize + d).max(0) as usize;
                }
            }
            FilesAction::TogglePreview => {
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
        }
        true
    }
}

impl Pane for FilesPane {
    crate::task_pane_glue!(actions: FilesAction);

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

    // The keys of `filtered_list_input!`, re-filtering with the context
    // so the filter can list the folders that hold matches.
    fn text_input_active(&self) -> bool {
        self.list.editing()
    }

    fn blur(&mut self) {
        self.list.blur();
    }

    fn clear_filter(&mut self) -> bool {
        if self.list.editing() || !self.list.filter.active() {
            return false;
        }
        self.list.filter.set("");
        self.filter_tried.clear();
        self.rebuild();
        true
    }

    fn on_key(&mut self, key: &ratatui::crossterm::event::KeyEvent, cx: &mut Ctx) -> bool {
        let used = self.list.key(key);
        if used {
            self.refilter(cx);
        }
        used
    }

    fn on_paste(&mut self, s: &str, cx: &mut Ctx) -> bool {
        let used = self.list.paste(s);
        self.refilter(cx);
        used
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
        match list_mouse(
            &mut self.list.cursor,
            ev,
            self.tree_area,
            self.list.shown.len(),
        ) {
            ListMouse::Clicked(_, true) => self.act(FilesAction::Open, cx),
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
        let block = cx.block_for(
            area,
            &format!("{}{}", self.title(), filter_suffix(&self.list.filter)),
            note.trim_start_matches(' '),
            focused,
        );
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
        let list = filter_bar(f, tree, &self.list.filter, cx);
        self.tree_area = list;
        if self.list.shown.is_empty() {
            let msg = if loading {
                "listing…"
            } else if self.list.filter.active() && self.filter_searching() {
                "searching the whole tree…"
            } else if self.list.filter.active() && self.filter_capped() {
                "nothing matches in the folders searched (narrow the filter)"
            } else if self.list.filter.active() {
                "nothing matches"
            } else {
                "empty workspace"
            };
            placeholder(f, list, msg, t.muted);
        } else {
            let nodes = &self.nodes;
            let visible = &self.list.shown;
            let w = list.width as usize;
            render_rows(
                f.buffer_mut(),
                list,
                &mut self.list.cursor,
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
                        self.reveal_failed(dir);
                        if dir == &self.nodes[self.root].path || !e.contains("no such file") {
                            cx.toast(Level::Error, format!("listing {dir}: {e}"));
                        }
                    }
                }
                self.rebuild();
                self.search_unlisted(cx);
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
                if self.revealing.is_some() && !self.inflight.contains(dir) {
                    self.continue_reveal(cx);
                }
            }
            Msg::Preview(path, body) => {
                self.preview_job.done();
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
            Msg::AllFiles(result) => match result {
                Ok(l) => {
                    self.all = l.paths.clone();
                    self.all_state = super::filter::AllFiles::Ready;
                    self.refilter(cx);
                }
                Err(e) => {
                    cx.toast(
                        Level::Warn,
                        format!("listing every file for the filter: {e}"),
                    );
                    self.all_state = super::filter::AllFiles::Failed(e.clone());
                }
            },
            Msg::Done(m) => {
                cx.toast(Level::Info, m.clone());
                if !self.watching {
                    self.act(FilesAction::Refresh, cx);
                }
            }
            Msg::Failed(e) => cx.toast(Level::Error, e.clone()),
        }
    }
}

pub(super) fn expand_home(p: &str) -> std::path::PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = dirs::home_dir()
    {
        return home.join(rest);
    }
    std::path::PathBuf::from(p)
}
