//! A sandbox seen read-only (`--read-only`): reads, listings, stats and
//! watches go to the real sandbox; every call that could change the
//! workspace (write, append, create, remove, rename, mkdir) and every
//! call that runs something there (exec, spawn: a command or an MCP
//! server could write) is refused with [`BackendError::PermissionDenied`]
//! naming the path and the mode.
//!
//! One wrapper under the workspace, instead of a check in each
//! subsystem, so a write path nobody thought of is refused too: the
//! subsystems that have a read-only answer (skills listing without
//! equipping, no `.index` rewrite) ask [`WorkspaceBase::is_read_only`](super::base::WorkspaceBase::is_read_only)
//! and skip the write; every other path reaches this wrapper and fails
//! with a clear error. Limit: the host view ([`Sandbox::host_root`]) is
//! passed through, for the in-process Glob and Grep; nothing in the
//! engine writes through it.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::AsyncRead;

use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, PtySupport, Sandbox, SpawnRequest, Watch,
};

/// `inner`, with every write and every exec refused.
pub struct ReadOnlySandbox {
    inner: Arc<dyn Sandbox>,
}

impl ReadOnlySandbox {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Sandbox>) -> Self {
        ReadOnlySandbox { inner }
    }
}

/// The error every refused call returns: `what` on `target`.
pub fn refused(what: &str, target: &str) -> BackendError {
    BackendError::PermissionDenied(format!(
        "{what} {target}: the workspace is open read-only (--read-only), so nothing is written or run"
    ))
}

/// argv[0] in backticks, for the error (the arguments may be long).
fn program(argv: &[String]) -> String {
    format!("`{}`", argv.first().map(String::as_str).unwrap_or(""))
}

#[async_trait]
impl Sandbox for ReadOnlySandbox {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pty: PtySupport::Unsupported(
                "a terminal (PTY): the workspace is open read-only (--read-only), so nothing is run",
            ),
            ..self.inner.capabilities()
        }
    }

    fn workdir(&self) -> &str {
        self.inner.workdir()
    }

    fn host_root(&self) -> Option<&Path> {
        self.inner.host_root()
    }

    fn lock_identity(&self) -> Option<String> {
        self.inner.lock_identity()
    }

    async fn exec(&self, req: ExecRequest, _: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        Err(refused("cannot run", &program(&req.argv)))
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        Err(refused("cannot start", &program(&req.argv)))
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        self.inner.read(path, range).await
    }

    async fn write(&self, path: &str, _: &[u8]) -> BackendResult<()> {
        Err(refused("cannot write", path))
    }

    async fn write_stream(
        &self,
        path: &str,
        _: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        Err(refused("cannot write", path))
    }

    async fn append(&self, path: &str, _: &[u8]) -> BackendResult<u64> {
        Err(refused("cannot append to", path))
    }

    async fn create_new(&self, path: &str, _: &[u8]) -> BackendResult<bool> {
        Err(refused("cannot create", path))
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.inner.list(path).await
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        self.inner.stat(path).await
    }

    async fn remove(&self, path: &str, _: bool) -> BackendResult<()> {
        Err(refused("cannot remove", path))
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        Err(refused("cannot rename", &format!("{from} to {to}")))
    }

    async fn mkdir(&self, path: &str, _: bool) -> BackendResult<()> {
        Err(refused("cannot create directory", path))
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        self.inner.watch(path).await
    }
}
