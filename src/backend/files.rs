//! File metadata, byte ranges and watch events as every backend reports
//! them.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// Kind of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link (not followed).
    Symlink,
    /// Socket, fifo, device...
    Other,
}

/// Metadata of one path (the link itself for symlinks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileStat {
    /// Base name.
    pub name: String,
    /// Kind, symlinks not followed.
    pub kind: FileKind,
    /// Size in bytes (of the link target for symlinks when it resolves).
    pub size: u64,
    /// Modification time, when the backend knows it (nanosecond precision
    /// on local file systems).
    pub modified: Option<SystemTime>,
    /// For symlinks: the link target text.
    pub link_target: Option<String>,
    /// For symlinks: whether the target is a directory.
    pub target_is_dir: bool,
    /// Unix permission bits when known.
    pub mode: Option<u32>,
}

impl FileStat {
    /// True for directories and links to directories.
    pub fn is_dir_like(&self) -> bool {
        self.kind == FileKind::Dir || (self.kind == FileKind::Symlink && self.target_is_dir)
    }
}

/// A half-open byte range `[offset, offset + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub offset: u64,
    /// Number of bytes at most.
    pub len: u64,
}

/// Kind of a watched change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Created (file or directory).
    Created,
    /// Contents or metadata changed.
    Modified,
    /// Removed.
    Removed,
    /// Something changed under this directory that was not reported one by
    /// one; re-list it.
    Rescan,
}

/// One file change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Backend path.
    pub path: String,
    /// What happened.
    pub kind: ChangeKind,
}

/// A live watch; dropping it stops watching.
pub struct Watch {
    /// Change events, coalesced by the backend where it can.
    pub events: mpsc::Receiver<FileChange>,
    /// Keeps the backend's watcher alive.
    pub guard: Box<dyn Send + Sync>,
}
