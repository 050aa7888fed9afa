//! Control of a long-lived process whose whole tree wsbench kills
//! ([`Sandbox::spawn`] on the local and bubblewrap backends): its wait,
//! status and the tree kill, guarded against pid reuse.
//!
//! [`Sandbox::spawn`]: crate::backend::Sandbox::spawn

use std::time::Duration;

use async_trait::async_trait;
use tokio::process::Child;

use crate::backend::child::ChildStatus;
use crate::backend::process_tree;
use crate::backend::{BackendResult, ProcessControl};

/// How long a dropped process's tree gets between TERM and KILL.
const DROP_GRACE: Duration = Duration::from_millis(200);

/// A spawned root process and the tree under it. `K` is what must outlive
/// the kill of a dropped process (the local backend's reaper watch; `()`
/// for none).
pub(crate) struct TreeProcess<K: Send + 'static = ()> {
    /// Names the process in errors and ids (`pid`, `bwrap pid`).
    label: &'static str,
    pid: i32,
    /// The root's start time, read right after the spawn (see
    /// [`process_tree::kill_tree_of`]): a `wait` in another task may reap
    /// the root during a kill, and a new process group that got the same
    /// pid must not get the group signals (issue 15).
    start: Option<u64>,
    marker: String,
    /// TERM-to-KILL time of [`ProcessControl::kill`].
    grace: Duration,
    /// A kill after the root ended still sweeps what it left (the
    /// marker); false where the root's end ends the tree (bubblewrap's
    /// PID namespace).
    sweep_after_exit: bool,
    /// `None` only inside `Drop`, which moves the child to the kill
    /// thread so the root stays unreaped (its pid reserved) until the
    /// kill ends.
    child: Option<ChildStatus>,
    /// Dropped only after the kill of a dropped process ends.
    keep: Option<K>,
}

impl<K: Send + 'static> TreeProcess<K> {
    /// Control of `child` (pid `pid`, its tree carrying `marker`).
    pub(crate) fn new(
        label: &'static str,
        child: Child,
        pid: i32,
        marker: String,
        grace: Duration,
        sweep_after_exit: bool,
        keep: Option<K>,
    ) -> Self {
        TreeProcess {
            label,
            pid,
            start: process_tree::start_time(pid),
            marker,
            grace,
            sweep_after_exit,
            child: Some(ChildStatus::new(child)),
            keep,
        }
    }

    fn status(&self) -> &ChildStatus {
        self.child
            .as_ref()
            .expect("the child is taken only in Drop")
    }
}

#[async_trait]
impl<K: Send + Sync + 'static> ProcessControl for TreeProcess<K> {
    fn id(&self) -> String {
        format!("{} {}", self.label, self.pid)
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        self.status().wait(&self.id()).await
    }

    fn try_status(&self) -> Option<Option<i32>> {
        self.status().try_status()
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            // The root is gone; sweep anything it left behind. Reaped: its
            // pid may name another process by now, so the start time keeps
            // the sweep to the marker then.
            if self.sweep_after_exit {
                let (pid, start, marker) = (self.pid, self.start, self.marker.clone());
                process_tree::kill_tree_of_async(pid, start, marker, Duration::ZERO).await;
            }
            return Ok(());
        }
        process_tree::kill_tree_of_async(self.pid, self.start, self.marker.clone(), self.grace)
            .await;
        let _ = self.wait().await;
        Ok(())
    }
}

impl<K: Send + 'static> Drop for TreeProcess<K> {
    fn drop(&mut self) {
        if self.status().try_status().is_none() {
            let (pid, start, marker) = (self.pid, self.start, self.marker.clone());
            // The child goes with the kill and is dropped (handed to
            // tokio's orphan reaping) only after it: unreaped, the root
            // keeps its pid, so no new process group can take the number
            // the group signals use.
            let child = self.child.take();
            let keep = self.keep.take();
            std::thread::spawn(move || {
                process_tree::kill_tree_of(pid, start, &marker, DROP_GRACE);
                drop(child);
                drop(keep);
            });
        }
    }
}
