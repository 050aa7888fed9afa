//! A live Daytona sandbox ([`DaytonaSandbox`]), reached through its
//! toolbox: its URLs, directories and how the toolbox's errors map onto
//! [`BackendError`]; the [`RemoteSandbox`] impl hands commands to
//! `exec.rs` and files to `files.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::options::DaytonaExecMode;
use crate::backend::cloud::RemoteSandbox;
use crate::backend::http::{self, On404, ServiceClient};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, PtySupport, path as bpath,
};

/// A live Daytona sandbox, reached through its toolbox.
pub(crate) struct DaytonaSandbox {
    pub(super) id: String,
    pub(super) tb: ServiceClient,
    pub(super) base: String,
    pub(super) workdir: String,
    pub(super) home: String,
    pub(super) env: BTreeMap<String, String>,
    pub(super) mode: DaytonaExecMode,
    pub(super) default_timeout: Duration,
}

impl std::fmt::Debug for DaytonaSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaytonaSandbox")
            .field("id", &self.id)
            .field("toolbox", &self.base)
            .field("workdir", &self.workdir)
            .finish()
    }
}

impl DaytonaSandbox {
    pub(super) fn url(&self, path: &str) -> String {
        http::join_url(&self.base, path)
    }

    pub(super) fn resolve(&self, path: &str) -> String {
        bpath::join(&self.workdir, path)
    }

    pub(super) async fn dir(&self, path: &str) -> BackendResult<String> {
        self.tb.get_field(&self.url(path), "dir").await
    }

    pub(super) fn file_error(&self, status: u16, body: &[u8], path: &str) -> BackendError {
        let (code, message) = http::parse_error_body(body);
        let lower = message.to_ascii_lowercase();
        match (status, code.as_deref()) {
            (_, Some("FILE_NOT_FOUND")) => BackendError::NotFound(path.to_string()),
            // The proxy's 404 for a sandbox that no longer exists (the
            // toolbox's own 404s carry FILE_NOT_FOUND).
            (404 | 410, _) if lower.contains("sandbox") => BackendError::gone(format!(
                "daytona sandbox {} is gone ({status}: {message})",
                self.id
            )),
            // A stopped sandbox: the toolbox answers `Sandbox … is not
            // started (state stopped)`.
            (400 | 409, c) if lower.contains("sandbox") && http::says_not_running(c, &message) => {
                BackendError::stopped(format!(
                    "daytona sandbox {} is not running ({status}: {message})",
                    self.id
                ))
            }
            (404, _) => BackendError::NotFound(path.to_string()),
            _ if lower.contains("is a directory") => BackendError::IsADirectory(path.into()),
            _ if lower.contains("not a directory") => BackendError::NotADirectory(path.into()),
            _ if lower.contains("permission denied") || status == 403 => {
                BackendError::PermissionDenied(path.into())
            }
            _ => self.tb.status_error(
                reqwest::StatusCode::from_u16(status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
                body,
                On404::Remote,
            ),
        }
    }
}

#[async_trait]
impl RemoteSandbox for DaytonaSandbox {
    const KIND: BackendKind = BackendKind::Daytona;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            byte_exact_output: self.mode == DaytonaExecMode::Session,
            kill_on_timeout: self.mode == DaytonaExecMode::Session,
            pty: PtySupport::Unsupported(
                "a terminal (PTY): the toolbox has PTY sessions, but wsbench does not use them yet",
            ),
            ..Capabilities::NONE
        }
    }

    fn workdir(&self) -> &str {
        &self.workdir
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        match self.mode {
            DaytonaExecMode::Session => self.exec_session(req, sink).await,
            DaytonaExecMode::Execute => self.exec_execute(req, sink).await,
        }
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
