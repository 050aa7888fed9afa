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
//!
//! Files of the pane, one job each:
//! * `mod.rs`: the pane's types (nodes, preview body, messages, state).
//! * [`tree`]: the file tree model (listing, merging, visible rows).
//! * [`watch`]: the workspace watch feeding changes to the tree.
//! * [`preview`]: the preview (loading, binary sniffing, drawing, layout)
//!   and the metadata document.
//! * [`all_files`]: every file in one Glob walk (the finder's list, and
//!   what `/` searches beyond the listed folders).
//! * [`filter`]: the `/` filter over the whole tree: folders holding a
//!   match are listed as needed.
//! * [`reveal`]: expanding the folders above a path and selecting it.
//! * [`pane`]: the `Pane` glue (keys, actions, events, mouse, render).

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

use ratatui::layout::Rect;

use crate::backend::{FileKind, FileStat};
use crate::tui::keymap::ActionSpec;
use crate::tui::widgets::filtered::FilteredList;
use crate::tui::widgets::single_flight::SingleFlight;

pub mod all_files;
mod filter;
mod pane;
mod preview;
mod reveal;
mod tree;
mod watch;

pub use preview::{PREVIEW_BELOW_MIN_HEIGHT, PREVIEW_SIDE_MIN_WIDTH, metadata_doc};
pub(crate) use preview::{decode_preview, draw_text};
pub use watch::{WatchHandle, start_watch};

/// Pane id.
pub const ID: &str = "files";

/// Bytes of a file read for the preview.
pub const PREVIEW_BYTES: u64 = 64 * 1024;

/// Bytes read to decide whether a file is binary.
const SNIFF_BYTES: u64 = 1024;

/// Rows sniffed per batch.
const SNIFF_BATCH: usize = 64;

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum FilesAction in "files";
    Open => act("files.open", ID, "view / expand", &["enter", "l", "right"], false, true),
    Collapse => act("files.collapse", ID, "collapse / parent", &["h", "left"], false, false),
    Edit => act("files.edit", ID, "edit", &["e"], false, true),
    View => act("files.view", ID, "view full screen", &["v"], false, false),
    Filter => act("files.filter", ID, "filter", &["/"], false, true),
    Refresh => act("files.refresh", ID, "refresh", &["r"], false, false),
    Upload => act("files.upload", ID, "upload host file", &["u"], true, true),
    // `S` saves to a host file in every pane (Logs too); `d` is
    // describe, as k9s users read it (issue 22, see keymap::VERBS).
    Download => act("files.download", ID, "download to host", &["S"], false, true),
    Describe => act("files.describe", ID, "describe", &["d"], false, false),
    Rename => act("files.rename", ID, "rename", &["R"], true, true),
    Delete => act("files.delete", ID, "delete", &["D", "delete"], true, true),
    CopyPath => act("files.copy_path", ID, "copy path", &["y"], false, false),
    PreviewDown => act("files.preview_down", ID, "scroll preview down", &["J", "shift-down"], false, false),
    PreviewUp => act("files.preview_up", ID, "scroll preview up", &["K", "shift-up"], false, false),
    TogglePreview => act("files.toggle_preview", ID, "toggle preview", &["p"], false, false),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = FilesAction::TABLE;

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
    AllFiles(Result<all_files::Listing, String>),
    Done(String),
    Failed(String),
}

/// The Files pane.
pub struct FilesPane {
    nodes: Vec<Node>,
    by_path: HashMap<String, usize>,
    root: usize,
    /// The tree's rows on show (`shown`: node indices), their cursor and
    /// the `/` filter.
    list: FilteredList,
    preview: Option<Preview>,
    /// One preview read at a time; the latest selection waits.
    preview_job: SingleFlight<String>,
    show_preview: bool,
    /// Inside of the pane at the last render: whether `p` can show the
    /// preview there.
    inner_area: Rect,
    inflight: BTreeSet<String>,
    again: BTreeSet<String>,
    sniffing: bool,
    tree_area: Rect,
    watching: bool,
    /// A path [`FilesPane::reveal`] waits to select (listings pending).
    revealing: Option<String>,
    /// Every file's path relative to the workdir (the `/` filter's walk).
    all: Vec<String>,
    all_state: filter::AllFiles,
    /// The walk no longer matches the workspace (the watch said so).
    all_stale: bool,
    /// Folders the filter listed (each once per filter).
    filter_tried: BTreeSet<String>,
}

impl Default for FilesPane {
    fn default() -> Self {
        Self::new()
    }
}
