//! Watching a host directory for the backends whose files live on the
//! host.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::backend::{BackendError, BackendResult, ChangeKind, FileChange, Watch};

/// Maps a host path to the backend path reported in watch events.
pub(crate) type PathMapper = Arc<dyn Fn(&Path) -> String + Send + Sync>;

/// Watches a host directory recursively with `notify`.
///
/// `map` turns host paths into backend paths (identity when `None`). A
/// directory created under the watch is walked at once and every entry
/// already inside is reported as created: inotify cannot report what was
/// made before the watch on its parent existed (`mkdir -p`, C20).
pub fn watch_host(root: &Path, map: Option<PathMapper>) -> BackendResult<Watch> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let (tx, rx) = mpsc::channel(4096);
    let to_backend = map.unwrap_or_else(|| Arc::new(|p: &Path| p.to_string_lossy().into_owned()));
    let handler = move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else {
            return;
        };
        if ev.need_rescan() {
            for p in &ev.paths {
                let _ = tx.try_send(FileChange {
                    path: to_backend(p),
                    kind: ChangeKind::Rescan,
                });
            }
            return;
        }
        let kind = match ev.kind {
            EventKind::Create(_) => ChangeKind::Created,
            EventKind::Remove(_) => ChangeKind::Removed,
            EventKind::Modify(notify::event::ModifyKind::Name(_)) => {
                // A rename: report each side by whether it exists now.
                for p in &ev.paths {
                    let kind = if p.exists() {
                        ChangeKind::Created
                    } else {
                        ChangeKind::Removed
                    };
                    let _ = tx.try_send(FileChange {
                        path: to_backend(p),
                        kind,
                    });
                }
                return;
            }
            EventKind::Modify(_) => ChangeKind::Modified,
            _ => return,
        };
        for p in &ev.paths {
            let _ = tx.try_send(FileChange {
                path: to_backend(p),
                kind,
            });
            if kind == ChangeKind::Created && p.is_dir() {
                for entry in walk_dir_entries(p) {
                    let _ = tx.try_send(FileChange {
                        path: to_backend(&entry),
                        kind: ChangeKind::Created,
                    });
                }
            }
        }
    };
    let mut watcher = notify::recommended_watcher(handler).map_err(|e| BackendError::Io {
        context: "creating a file watcher".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    watcher
        .watch(root, RecursiveMode::Recursive)
        .map_err(|e| BackendError::Io {
            context: format!("watching {}", root.display()),
            source: std::io::Error::other(e.to_string()),
        })?;
    Ok(Watch {
        events: rx,
        guard: Box::new(Mutex::new(watcher)),
    })
}

fn walk_dir_entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p);
            if out.len() > 100_000 {
                return out;
            }
        }
    }
    out
}
