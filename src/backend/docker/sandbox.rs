//! [`DockerSandbox`]: a running container as a [`Sandbox`] (files through a bind mount or the container).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::AsyncRead;

use super::exec::ExecTarget;
use super::files::ContainerFiles;
use super::options::CONTAINER_WORKDIR;
use crate::backend::host::HostDir;
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, PtyRequest, PtySession, Sandbox, SpawnRequest, Watch,
};

/// A running container used as a sandbox.
#[derive(Clone)]
pub(crate) struct DockerSandbox {
    pub(super) target: ExecTarget,
    pub(super) name: String,
    /// The bind-mounted host directory, when there is one.
    pub(super) host: Option<HostDir>,
    pub(super) files: ContainerFiles,
    pub(super) append_lock: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for DockerSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerSandbox")
            .field("container", &self.target.container)
            .field("name", &self.name)
            .field("host", &self.host.as_ref().map(|h| h.root().to_path_buf()))
            .finish()
    }
}

impl DockerSandbox {
    /// Routes a path: the bind-mounted host directory when it covers the
    /// path, else the container.
    pub(super) fn on_host(&self, path: &str) -> Option<&HostDir> {
        let abs = crate::backend::path::join(CONTAINER_WORKDIR, path);
        self.host.as_ref().filter(|h| h.covers(&abs))
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    fn capabilities(&self) -> Capabilities {
        let bind = self.host.is_some();
        Capabilities {
            read_range: bind,
            watch: bind,
            ..Capabilities::ALL
        }
    }

    fn workdir(&self) -> &str {
        CONTAINER_WORKDIR
    }

    fn host_root(&self) -> Option<&Path> {
        self.host.as_ref().map(HostDir::root)
    }

    fn host_path(&self, path: &str) -> Option<PathBuf> {
        self.on_host(path)?.host_path(path)
    }

    fn lock_identity(&self) -> Option<String> {
        Some(format!("docker:{}", self.target.container))
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.target.exec(req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.target.spawn(req).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        match self.on_host(path) {
            Some(h) => h.read(path, range).await,
            None => self.files.read(path, range).await,
        }
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.write(path, data).await,
            None => self.files.write(path, data).await,
        }
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        match self.on_host(path) {
            Some(h) => h.write_stream(path, reader).await,
            None => self.files.write_stream(path, reader).await,
        }
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        match self.on_host(path) {
            Some(h) => h.append(path, data).await,
            None => {
                // `cat >>` of two execs could interleave; one at a time.
                let _g = self.append_lock.lock().await;
                self.files.append(path, data).await
            }
        }
    }

    async fn append_checked(
        &self,
        path: &str,
        earlier: &[crate::backend::append_check::TrackedRecord],
        data: &[u8],
    ) -> BackendResult<Option<crate::backend::append_check::CheckedAppend>> {
        match self.on_host(path) {
            Some(h) => h.append_checked(path, earlier, data).await.map(Some),
            // A volume or the container's own storage: separate execs, no
            // lock to hold across them; the caller checks around append.
            None => Ok(None),
        }
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        match self.on_host(path) {
            Some(h) => h.create_new(path, data).await,
            None => self.files.create_new(path, data).await,
        }
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        match self.on_host(path) {
            Some(h) => h.list(path).await,
            None => self.files.list(path).await,
        }
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        match self.on_host(path) {
            Some(h) => h.stat(path).await,
            None => self.files.stat(path).await,
        }
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.remove(path, recursive).await,
            None => self.files.remove(path, recursive).await,
        }
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        match (self.on_host(from), self.on_host(to)) {
            (Some(h), Some(_)) => h.rename(from, to).await,
            (None, None) => self.files.rename(from, to).await,
            _ => Err(BackendError::Unsupported {
                backend: BackendKind::Docker,
                what: "renaming between /workspace and the rest of the container",
            }),
        }
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.mkdir(path, parents).await,
            None => self.files.mkdir(path, parents).await,
        }
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        match self.on_host(path) {
            Some(h) => h.watch(path),
            None => Err(BackendError::Unsupported {
                backend: BackendKind::Docker,
                what: "watching files without a bind mount",
            }),
        }
    }

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        super::pty::start(&self.target, req).await
    }
}
