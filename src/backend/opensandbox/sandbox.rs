//! A live OpenSandbox sandbox ([`OpenSandboxSandbox`]), reached through
//! its execd; the [`RemoteSandbox`] impl hands commands to `exec.rs` and
//! files to `files.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::backend::cloud::RemoteSandbox;
use crate::backend::http::{self, ServiceClient};
use crate::backend::{
    BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest, FileStat,
    LineShell, OutputSink, PtySupport, path as bpath,
};

/// A live OpenSandbox sandbox, reached through its execd.
pub(crate) struct OpenSandboxSandbox {
    pub(super) id: String,
    pub(super) execd: ServiceClient,
    pub(super) base: String,
    pub(super) workdir: String,
    pub(super) env: BTreeMap<String, String>,
    pub(super) idle: Duration,
}

impl std::fmt::Debug for OpenSandboxSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenSandboxSandbox")
            .field("id", &self.id)
            .field("execd", &self.base)
            .field("workdir", &self.workdir)
            .finish()
    }
}

impl OpenSandboxSandbox {
    pub(super) fn url(&self, path: &str) -> String {
        http::join_url(&self.base, path)
    }

    pub(super) fn resolve(&self, path: &str) -> String {
        bpath::join(&self.workdir, path)
    }
}

#[async_trait]
impl RemoteSandbox for OpenSandboxSandbox {
    const KIND: BackendKind = BackendKind::Opensandbox;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kill_on_timeout: true,
            read_range: true,
            pty: PtySupport::LineMode(
                "a terminal (PTY): execd's API has no PTY endpoint (its bash sessions are line-based)",
            ),
            ..Capabilities::NONE
        }
    }

    fn workdir(&self) -> &str {
        &self.workdir
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.run(req, sink).await
    }

    async fn line_shell(&self, cwd: Option<String>) -> BackendResult<Box<dyn LineShell>> {
        self.open_line_shell(cwd).await
    }

    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        self.download_file(path, range).await
    }

    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()> {
        self.upload_file(path, data).await
    }

    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.list_entries(path).await
    }

    async fn stat_path(&self, path: &str) -> BackendResult<FileStat> {
        self.stat_file(path).await
    }
}
