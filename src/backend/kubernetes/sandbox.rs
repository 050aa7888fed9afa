//! [`KubernetesSandbox`]: a workspace Pod as a [`Sandbox`] (exec over the websocket, files through the shared shell scripts).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use kube::Client;
use tokio::io::AsyncRead;
use tokio::sync::{Mutex, mpsc};

use super::events::EventSink;
use super::exec::ExecTarget;
use super::options::POD_WORKDIR;
use super::{files, tarball};
use crate::backend::shell::ops;
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, PtyRequest, PtySession, PtySupport, Sandbox, SpawnRequest,
    Watch,
};

/// A workspace Pod used as a sandbox.
#[derive(Clone)]
pub struct KubernetesSandbox {
    pub(super) target: ExecTarget,
    pub(super) append_lock: Arc<Mutex<()>>,
}

impl std::fmt::Debug for KubernetesSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSandbox")
            .field("namespace", &self.target.namespace)
            .field("pod", &self.target.pod)
            .finish()
    }
}

impl KubernetesSandbox {
    /// A sandbox on an existing Pod (container `workspace`, files under
    /// `/workspace`). The provisioner is the usual way to get one.
    pub fn new(
        client: Client,
        namespace: &str,
        pod: &str,
        env: BTreeMap<String, String>,
        events: Option<EventSink>,
    ) -> Self {
        KubernetesSandbox {
            target: ExecTarget::new(
                client,
                namespace.into(),
                pod.into(),
                POD_WORKDIR.into(),
                env,
                events,
            ),
            append_lock: Arc::default(),
        }
    }

    /// Namespace.
    pub fn namespace(&self) -> &str {
        &self.target.namespace
    }

    /// Streams directory `dir` of the Pod as a tar archive into `sink`
    /// (what `kubectl cp pod:dir .` moves); links in the tree are archived
    /// as links. Returns the archive's size.
    ///
    /// Errors: `NotFound` for a missing directory, `Escapes` when `dir` is
    /// reached through a link out of `/workspace`, or the exec's error.
    pub async fn download_tar(&self, dir: &str, sink: mpsc::Sender<Bytes>) -> BackendResult<u64> {
        tarball::download_tar(&self.target, &self.abs(dir), sink).await
    }

    /// Unpacks a tar archive into directory `dir` of the Pod (created when
    /// missing).
    ///
    /// Errors: `Escapes` when `dir` or a directory the archive enters is
    /// reached through a link out of `/workspace`, or a member is absolute,
    /// climbs with `..` or goes through a link the archive itself makes;
    /// the archive is refused by `tar`; or the exec's error.
    pub async fn upload_tar(&self, dir: &str, archive: Bytes) -> BackendResult<()> {
        tarball::upload_tar(&self.target, &self.abs(dir), archive).await
    }

    pub(super) fn abs(&self, path: &str) -> String {
        crate::backend::path::join(POD_WORKDIR, path)
    }
}

#[async_trait]
impl Sandbox for KubernetesSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Kubernetes
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // No file events from inside a Pod.
            watch: false,
            pty: PtySupport::Supported,
            ..Capabilities::ALL
        }
    }

    fn workdir(&self) -> &str {
        POD_WORKDIR
    }

    fn lock_identity(&self) -> Option<String> {
        // Not the cluster: two clusters with a Pod of one name and
        // namespace share the lock (a wait, never a lost update).
        Some(format!("k8s:{}/{}", self.target.namespace, self.target.pod))
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.target.exec(req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.target.spawn(req).await
    }

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        super::pty::start(&self.target, req).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        ops::read(&self.target, &self.abs(path), range).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        ops::write(&self.target, &self.abs(path), data).await
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        files::write_stream(&self.target, &self.abs(path), reader).await
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        // Two `head -c >>` execs could interleave; one at a time per sandbox.
        let _g = self.append_lock.lock().await;
        ops::append(&self.target, &self.abs(path), data).await
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        ops::create_new(&self.target, &self.abs(path), data).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        ops::list(&self.target, &self.abs(path)).await
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        ops::stat(&self.target, &self.abs(path)).await
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        ops::remove(&self.target, &self.abs(path), recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        ops::rename(&self.target, &self.abs(from), &self.abs(to)).await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        ops::mkdir(&self.target, &self.abs(path), parents).await
    }

    async fn watch(&self, _path: &str) -> BackendResult<Watch> {
        Err(BackendError::Unsupported {
            backend: BackendKind::Kubernetes,
            what: "watching files",
        })
    }
}
