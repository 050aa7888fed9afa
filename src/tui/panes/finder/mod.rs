//! The file finder (`ctrl-p`, issue 19 point 2): every file of the
//! workspace from one Glob listing, ranked by nucleo as you type (fzf's
//! syntax), the file's first 64 KiB beside the list; Enter shows the
//! file in the Files tree (its folders expanded), `ctrl-o` opens it in
//! the viewer.
//!
//! * One listing, not one call per keystroke: the list is walked when
//!   the finder first opens and kept; the workspace watch marks it stale
//!   (files created, removed, renamed) and it is walked again while the
//!   finder is open, or when it next opens. Backends without a watch
//!   re-list on every open; `ctrl-r` re-lists at once.
//! * Bounded: at most [`MAX_PATHS`] paths (newest first), and the title
//!   says when more exist. Ranking runs on the UI thread (one score per
//!   path; `benches/tui.rs` holds 100k paths to one frame).
//!
//! Files of the pane: `mod.rs` (state, keys, actions, tasks),
//! [`rank`] (the ranking; the walk is `files::all_files`), `render.rs` (drawing).

use std::time::SystemTime;

use nucleo_matcher::pattern::Pattern;
use nucleo_matcher::{Matcher, Utf32String};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::Rect;
use tokio_util::sync::CancellationToken;

use crate::backend::{ByteRange, ChangeKind, path as bpath};
use crate::tui::action::{Effect, Level, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{Ctx, ListMouse, Nav, Pane, TaskPane, list_mouse, nav};
use crate::tui::panes::files::{PREVIEW_BYTES, PreviewBody, decode_preview};
use crate::tui::widgets::line::LineEdit;
use crate::tui::widgets::list::ListCursor;
use crate::tui::widgets::single_flight::SingleFlight;

pub mod rank;
mod render;

pub use crate::tui::panes::files::all_files::MAX_PATHS;
use crate::tui::panes::files::all_files::{self, Listing};
pub use rank::rank;

/// Pane id.
pub const ID: &str = "finder";

crate::pane_action_enum! {
    /// An action of the finder (an entry of [`ACTIONS`]). Letters are
    /// text here: every key is a chord that cannot be typed.
    pub(crate) enum FinderAction in "finder", no nav;
    Reveal => act("finder.reveal", ID, "show in the Files tree", &["enter"], false, true),
    View => act("finder.view", ID, "open in the viewer", &["ctrl-o"], false, true),
    Copy => act("finder.copy", ID, "copy path", &["ctrl-y"], false, false),
    Refresh => act("finder.refresh", ID, "list the files again", &["ctrl-r"], false, false),
    Back => act("finder.back", ID, "close", &["esc"], false, true),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = FinderAction::TABLE;

/// Where the listing stands.
#[derive(Debug, Clone, PartialEq)]
enum Walk {
    /// Never listed (the finder was not opened yet).
    Never,
    /// A walk is in flight since `started` (the app's clock).
    Running { started: SystemTime },
    /// Listed in `ms`.
    Done { ms: u64 },
    /// The walk failed; the Glob tool's text.
    Failed(String),
}

/// Results of the finder's tasks.
pub(crate) enum Msg {
    /// A listing ended (`seq` tells a stale one).
    Listed {
        seq: u64,
        result: Result<Listing, String>,
    },
    /// A preview read ended.
    Preview(String, PreviewBody),
}

/// The finder pane.
pub struct FinderPane {
    input: LineEdit,
    /// Relative paths, newest first, and their nucleo haystacks.
    paths: Vec<String>,
    hay: Vec<Utf32String>,
    more: bool,
    note: Option<String>,
    /// Indexes into `paths`, best match first.
    ranked: Vec<u32>,
    /// The pattern of what is typed (for highlighting).
    pattern: Pattern,
    matcher: Matcher,
    cursor: ListCursor,
    walk: Walk,
    seq: u64,
    cancel: Option<CancellationToken>,
    /// The listing no longer matches the workspace.
    stale: bool,
    /// Opened and not left by one of its own keys: changes re-list now.
    open: bool,
    preview: Option<(String, PreviewBody, usize)>,
    preview_job: SingleFlight<String>,
    workdir: String,
    list_area: Rect,
    caret: Option<(u16, u16)>,
}

impl Default for FinderPane {
    fn default() -> Self {
        Self::new()
    }
}

impl FinderPane {
    /// An empty finder (it lists when first opened).
    pub fn new() -> Self {
        FinderPane {
            input: LineEdit::default(),
            paths: Vec::new(),
            hay: Vec::new(),
            more: false,
            note: None,
            ranked: Vec::new(),
            pattern: rank::pattern(""),
            matcher: rank::path_matcher(),
            cursor: ListCursor::default(),
            walk: Walk::Never,
            seq: 0,
            cancel: None,
            stale: true,
            open: false,
            preview: None,
            preview_job: SingleFlight::default(),
            workdir: String::new(),
            list_area: Rect::default(),
            caret: None,
        }
    }

    /// The ranked paths on show, best first, relative to the workdir
    /// (tests).
    pub fn matches(&self) -> Vec<&str> {
        self.ranked
            .iter()
            .map(|&i| self.paths[i as usize].as_str())
            .collect()
    }

    /// Paths in the cached listing (tests).
    pub fn listed(&self) -> usize {
        self.paths.len()
    }

    /// Opened from its key or the palette: walks the workspace when the
    /// listing is missing or stale, and selects what is typed.
    pub fn opened(&mut self, cx: &mut Ctx) {
        self.open = true;
        // Without a watch nothing says the list went stale: walk again.
        let unwatched = !cx.ws.sandbox().capabilities().watch;
        if (self.stale || unwatched) && !matches!(self.walk, Walk::Running { .. }) {
            self.relist(cx);
        }
    }

    /// Starts a walk, cancelling the one in flight.
    fn relist(&mut self, cx: &mut Ctx) {
        if let Some(c) = self.cancel.take() {
            c.cancel();
        }
        self.seq += 1;
        self.stale = false;
        let seq = self.seq;
        let token = CancellationToken::new();
        self.cancel = Some(token.clone());
        self.walk = Walk::Running {
            started: (cx.clock)(),
        };
        let ws = cx.ws.clone();
        cx.spawn::<FinderPane>(async move {
            let result = all_files::list_files(&ws, token).await;
            Msg::Listed { seq, result }
        });
    }

    /// Ranks the listing against what is typed, keeping the selected
    /// path selected when it still matches (else the best match).
    fn rerank(&mut self, cx: &Ctx) {
        let was = self.selected_index();
        let needle = self.input.text().to_string();
        self.pattern = rank::pattern(&needle);
        self.ranked = rank(&mut self.matcher, &needle, &self.hay);
        self.cursor.selected = was
            .and_then(|w| self.ranked.iter().position(|&i| i == w))
            .unwrap_or(0);
        self.cursor.clamp(self.ranked.len());
        self.want_preview(cx);
    }

    fn selected_index(&self) -> Option<u32> {
        self.ranked.get(self.cursor.selected).copied()
    }

    /// Backend path of the selected file.
    fn selected_path(&self) -> Option<String> {
        self.selected_index()
            .map(|i| bpath::join(&self.workdir, &self.paths[i as usize]))
    }

    fn want_preview(&mut self, cx: &Ctx) {
        let Some(path) = self.selected_path() else {
            self.preview = None;
            return;
        };
        if self.preview.as_ref().is_some_and(|p| p.0 == path) {
            return;
        }
        self.preview_job.want(path);
        self.start_preview(cx);
    }

    fn start_preview(&mut self, cx: &Ctx) {
        let Some(path) = self.preview_job.start() else {
            return;
        };
        let ws = cx.ws.clone();
        cx.spawn::<FinderPane>(async move {
            // One byte more than shown tells a cut file without a stat.
            let range = ByteRange {
                offset: 0,
                len: PREVIEW_BYTES + 1,
            };
            let body = match ws.sandbox().read(&path, Some(range)).await {
                Ok(mut bytes) => {
                    let size = bytes.len() as u64;
                    bytes.truncate(PREVIEW_BYTES as usize);
                    decode_preview(&bytes, size)
                }
                Err(e) => PreviewBody::Error(e.to_string()),
            };
            Msg::Preview(path, body)
        });
    }

    /// Runs one of the finder's actions. True when handled.
    pub(crate) fn act(&mut self, a: FinderAction, cx: &mut Ctx) -> bool {
        let path = self.selected_path();
        match a {
            FinderAction::Reveal => {
                if let Some(p) = path {
                    self.open = false;
                    cx.effect(Effect::Reveal(p));
                }
            }
            FinderAction::View => {
                if let Some(p) = path {
                    cx.effect(Effect::OpenAt {
                        path: p,
                        line: 1,
                        back: Some(ID),
                    });
                }
            }
            FinderAction::Copy => {
                if let Some(p) = path {
                    cx.effect(Effect::Copy(p));
                }
            }
            FinderAction::Refresh => self.relist(cx),
            FinderAction::Back => {
                self.open = false;
                cx.effect(Effect::CloseModal);
            }
        }
        true
    }
}

impl Pane for FinderPane {
    crate::task_pane_glue!(actions: FinderAction);

    fn title(&self) -> String {
        "Find file".into()
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.workdir = cx.ws.layout().workdir().to_string();
    }

    fn text_input_active(&self) -> bool {
        true
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &mut Ctx) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // fzf's keys move the selection; everything else is the query.
        let verb = match key.code {
            KeyCode::Down => Some(Nav::Down),
            KeyCode::Up => Some(Nav::Up),
            KeyCode::Char('n') | KeyCode::Char('j') if ctrl => Some(Nav::Down),
            KeyCode::Char('p') | KeyCode::Char('k') if ctrl => Some(Nav::Up),
            KeyCode::PageDown => Some(Nav::PageDown),
            KeyCode::PageUp => Some(Nav::PageUp),
            _ => None,
        };
        if let Some(v) = verb {
            nav(&mut self.cursor, v, self.ranked.len());
            self.want_preview(cx);
            return true;
        }
        let before = self.input.text().to_string();
        if !self.input.key(key) {
            return false;
        }
        if self.input.text() != before {
            self.rerank(cx);
        }
        true
    }

    fn on_paste(&mut self, text: &str, cx: &mut Ctx) -> bool {
        let line = text.lines().next().unwrap_or("");
        self.input.insert_str(line);
        self.rerank(cx);
        true
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        if let PaneEvent::File(change) = ev {
            // A write changes no name: the list still holds.
            if change.kind == ChangeKind::Modified {
                return;
            }
            if matches!(self.walk, Walk::Never) {
                return;
            }
            self.stale = true;
            if self.open && !matches!(self.walk, Walk::Running { .. }) {
                self.relist(cx);
            }
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.cursor, ev, self.list_area, self.ranked.len()) {
            ListMouse::None => false,
            ListMouse::Scrolled | ListMouse::Clicked(_, false) => {
                self.want_preview(cx);
                true
            }
            ListMouse::Clicked(_, true) => self.act(FinderAction::Reveal, cx),
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        render::draw(self, f, area, focused, cx);
    }

    fn cursor(&self) -> Option<(u16, u16)> {
        self.caret
    }
}

impl TaskPane for FinderPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match msg {
            Msg::Listed { seq, result } => {
                if seq != self.seq {
                    return; // Replaced by a newer walk.
                }
                self.cancel = None;
                let ms = match self.walk {
                    Walk::Running { started } => cx.elapsed_ms(started),
                    _ => 0,
                };
                match result {
                    Ok(l) => {
                        self.hay = rank::haystacks(&l.paths);
                        self.paths = l.paths;
                        self.more = l.more;
                        self.note = l.note;
                        self.walk = Walk::Done { ms };
                        self.preview = None;
                        self.rerank(cx);
                    }
                    Err(e) => {
                        cx.toast(Level::Error, format!("listing files: {e}"));
                        self.walk = Walk::Failed(e);
                        self.stale = true;
                    }
                }
                // Changes that came during the walk: once more.
                if self.stale && self.open && matches!(self.walk, Walk::Done { .. }) {
                    self.relist(cx);
                }
            }
            Msg::Preview(path, body) => {
                self.preview_job.done();
                self.preview = Some((path, body, 0));
                self.start_preview(cx);
            }
        }
    }
}
