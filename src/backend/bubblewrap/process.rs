//! Control of a long-lived process inside bwrap ([`Sandbox::spawn`]): its
//! wait, status and the kill of its whole tree.
//!
//! [`Sandbox::spawn`]: crate::backend::Sandbox::spawn

use std::time::Duration;

use async_trait::async_trait;

use super::KILL_GRACE;
use crate::backend::child::ChildStatus;
use crate::backend::process_tree;
use crate::backend::{BackendResult, ProcessControl};

/// Control of a long-lived process inside bwrap.
pub(super) struct BwrapProcess {
    pub(super) pid: i32,
    /// bwrap's start time, read right after the spawn: a `wait` in another
    /// task may reap bwrap during a kill, and a reused pid must not get
    /// the group signals ([`process_tree::kill_tree_of`], issue 15).
    pub(super) start: Option<u64>,
    pub(super) marker: String,
    /// `None` only inside `Drop`, which moves the child to the kill thread
    /// so bwrap stays unreaped (its pid reserved) until the kill ends.
    pub(super) child: Option<ChildStatus>,
}

impl BwrapProcess {
    fn status(&self) -> &ChildStatus {
        self.child
            .as_ref()
            .expect("the child is taken only in Drop")
    }
}

#[async_trait]
impl ProcessControl for BwrapProcess {
    fn id(&self) -> String {
        format!("bwrap pid {}", self.pid)
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        self.status().wait(&self.id()).await
    }

    fn try_status(&self) -> Option<Option<i32>> {
        self.status().try_status()
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            return Ok(());
        }
        process_tree::kill_tree_of_async(self.pid, self.start, self.marker.clone(), KILL_GRACE)
            .await;
        let _ = self.wait().await;
        Ok(())
    }
}

impl Drop for BwrapProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let (pid, start, marker) = (self.pid, self.start, self.marker.clone());
            // Dropped only after the kill, as in the local backend: an
            // unreaped bwrap keeps its pid, so no new group takes it.
            let child = self.child.take();
            std::thread::spawn(move || {
                process_tree::kill_tree_of(pid, start, &marker, Duration::from_millis(200));
                drop(child);
            });
        }
    }
}
