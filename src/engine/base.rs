//! The pieces every workspace subsystem shares: the workspace id, the live
//! sandbox, the layout and the event bus, with the few file helpers more
//! than one subsystem needs. The `Workspace` owns one and
//! hands references (or cheap clones) to its subsystems, so none of them
//! has to know the workspace itself.

use std::sync::Arc;

use super::error::WsResult;
use super::events::{Event, EventBus};
use super::layout::Layout;
use crate::backend::Sandbox;

/// Workspace id, sandbox, layout and event bus. Cheap to clone (two
/// strings and two `Arc`s).
#[derive(Clone)]
pub struct WorkspaceBase {
    id: String,
    sandbox: Arc<dyn Sandbox>,
    layout: Layout,
    bus: EventBus,
    read_only: bool,
}

impl std::fmt::Debug for WorkspaceBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceBase")
            .field("id", &self.id)
            .field("backend", &self.sandbox.kind())
            .field("workdir", &self.layout.workdir())
            .finish()
    }
}

impl WorkspaceBase {
    /// Bundles the pieces; the layout is rooted at the sandbox's workdir.
    pub fn new(id: String, sandbox: Arc<dyn Sandbox>, bus: EventBus) -> Self {
        let layout = Layout::new(sandbox.workdir());
        WorkspaceBase {
            id,
            sandbox,
            layout,
            bus,
            read_only: false,
        }
    }

    /// The same pieces, opened read-only (`--read-only`): the sandbox is
    /// wrapped in a [`ReadOnlySandbox`](super::read_only::ReadOnlySandbox)
    /// that refuses every write and exec, and [`WorkspaceBase::read_only`]
    /// is true so subsystems skip the writes they would do on their own.
    pub fn read_only(self) -> Self {
        let sandbox: Arc<dyn Sandbox> =
            Arc::new(super::read_only::ReadOnlySandbox::new(self.sandbox));
        WorkspaceBase {
            sandbox,
            read_only: true,
            ..self
        }
    }

    /// True when opened read-only: nothing may be written or run.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Workspace id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The live sandbox.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    /// The layout (backend paths).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The event bus.
    pub fn bus(&self) -> &EventBus {
        &self.bus
    }

    /// Publishes an event tagged with this workspace's id.
    pub fn publish(&self, event: Event) {
        self.bus.publish(&self.id, event);
    }

    /// Ids of the session directories under `sessions/`, sorted. Here
    /// rather than in `sessions` because offload listings need it too.
    pub async fn session_ids(&self) -> WsResult<Vec<String>> {
        match self.sandbox.list(&self.layout.sessions_dir()).await {
            Ok(entries) => Ok(entries
                .into_iter()
                .filter(|e| e.is_dir_like())
                .map(|e| e.name)
                .filter(|n| super::layout::check_session_id(n).is_ok())
                .collect()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// Appends in place where the backend can; otherwise read + atomic
    /// rewrite under a process-wide lock (remote backends without append).
    /// Either way line-safe (see [`Sandbox::append`]): a failed append
    /// leaves the old content, and a torn last line is ended before a
    /// new record. Returns the offset `data` starts at.
    pub(crate) async fn append_or_rewrite(&self, path: &str, data: &[u8]) -> WsResult<u64> {
        if self.sandbox.capabilities().append {
            return Ok(self.sandbox.append(path, data).await?);
        }
        static REWRITE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _guard = REWRITE.lock().await;
        let mut existing = match self.sandbox.read(path, None).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if data.ends_with(b"\n") && existing.last().is_some_and(|b| *b != b'\n') {
            existing.push(b'\n');
        }
        let offset = existing.len() as u64;
        existing.extend_from_slice(data);
        self.sandbox.write(path, &existing).await?;
        Ok(offset)
    }
}
