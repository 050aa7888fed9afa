//! The workspace watch of the Files pane: a task feeding backend changes
//! to the pane, stopped when its handle is dropped.

use crate::tui::action::{AppMsg, Level};
use crate::tui::pane::Ctx;

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
