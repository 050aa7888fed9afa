//! The Files `/` filter over the whole tree, not only the folders already
//! listed: the filter matches the names of every file the Glob walk
//! found ([`all_files`]) and lists the folders above each match that the
//! tree has not listed yet, so the matches show with their real size and
//! kind (a listing, not a guess).
//!
//! Bounds: at most [`FILTER_LISTINGS`] folder listings at once and
//! [`FILTER_FOLDERS`] per filter text (the placeholder says when it
//! stopped);
//! a filter that only excludes (`!word`) searches the listed folders
//! only, as it would otherwise list the whole tree.

use std::collections::BTreeSet;

use tokio_util::sync::CancellationToken;

use crate::backend::path as bpath;
use crate::tui::pane::Ctx;
use crate::tui::widgets::text;

use super::*;

/// Folder listings the filter runs at once (more start as these land).
const FILTER_LISTINGS: usize = 8;

/// Folders one filter lists at most.
pub(super) const FILTER_FOLDERS: usize = 256;

/// Where the whole-tree listing stands.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) enum AllFiles {
    /// Not walked yet.
    #[default]
    Never,
    /// A walk is in flight.
    Running,
    /// Walked.
    Ready,
    /// The walk failed (the Glob tool's text).
    Failed(String),
}

impl FilesPane {
    /// Re-filters the rows and, with a filter on, lists the folders that
    /// hold matches.
    pub(super) fn refilter(&mut self, cx: &Ctx) {
        // The folder budget is per filter text: a broad first letter must
        // not spend it all before the filter is typed out. Folders listed
        // stay listed, so only failed ones are tried again.
        self.filter_tried.clear();
        self.rebuild();
        self.search_unlisted(cx);
    }

    /// Whether the filter is still searching folders (for the
    /// placeholder).
    pub(super) fn filter_searching(&self) -> bool {
        self.all_state == AllFiles::Running || !self.inflight.is_empty()
    }

    /// Whether the filter stopped listing folders at [`FILTER_FOLDERS`].
    pub(super) fn filter_capped(&self) -> bool {
        self.filter_tried.len() >= FILTER_FOLDERS
    }

    /// Lists (a bounded number of) the folders the tree lacks above the
    /// walk's paths whose names match the filter; walks first when the
    /// walk is missing or stale.
    pub(super) fn search_unlisted(&mut self, cx: &Ctx) {
        let f = &self.list.filter;
        if !f.active() || self.nodes.is_empty() || f.text.trim_start().starts_with('!') {
            return;
        }
        if (self.all_state == AllFiles::Never || self.all_stale)
            && self.all_state != AllFiles::Running
        {
            self.all_stale = false;
            self.all_state = AllFiles::Running;
            let ws = cx.ws.clone();
            cx.spawn::<FilesPane>(async move {
                let r = all_files::list_files(&ws, CancellationToken::new()).await;
                Msg::AllFiles(r)
            });
        }
        let room = FILTER_LISTINGS.saturating_sub(self.inflight.len());
        let left = FILTER_FOLDERS.saturating_sub(self.filter_tried.len());
        let budget = room.min(left);
        if budget == 0 {
            return;
        }
        let root = self.nodes[self.root].path.clone();
        let mut want = BTreeSet::new();
        for rel in &self.all {
            let parts: Vec<&str> = rel.split('/').collect();
            let Some(k) = parts.iter().position(|p| f.matches(&text::display(p))) else {
                continue;
            };
            // Down from the root to the first folder not listed yet.
            let mut dir = root.clone();
            for (j, part) in parts.iter().enumerate().take(k + 1) {
                let Some(i) = self.find(&dir) else {
                    break; // Gone since the walk.
                };
                if self.nodes[i].children.is_none() {
                    if !self.filter_tried.contains(&dir) && !self.inflight.contains(&dir) {
                        want.insert(dir);
                    }
                    break;
                }
                if j == k {
                    break; // Listed: the match has its row.
                }
                dir = bpath::join(&dir, part);
            }
            if want.len() >= budget {
                break;
            }
        }
        for d in want {
            self.filter_tried.insert(d.clone());
            self.list(d, cx);
        }
    }
}
