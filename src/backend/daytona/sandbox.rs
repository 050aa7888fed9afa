//! A live Daytona sandbox ([`DaytonaSandbox`]), reached through its
//! toolbox: its URLs, directories and how the toolbox's errors map onto
//! [`BackendError`]; the [`RemoteSandbox`] impl hands commands to
//! `exec.rs` and files to `files.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::SERVICE;
use super::options::DaytonaExecMode;
use crate::backend::cloud::RemoteSandbox;
use crate::backend::http::{self, On404, ServiceClient};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, PtyRequest, PtySession, PtySupport, path as bpath,
};

/// A WebSocket to the toolbox.
pub(super) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

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

    /// Opens a WebSocket to toolbox `path` (`ws://` or `wss://` after the
    /// toolbox URL's scheme) with the toolbox's headers, within the
    /// request timeout. `code` names the stream in errors; a 404 means
    /// the sandbox or `what` (its session, its terminal) is gone.
    pub(super) async fn open_ws(&self, path: &str, code: &str, what: &str) -> BackendResult<Ws> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let http_url = self.url(path);
        let ws_url = if let Some(rest) = http_url.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = http_url.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            http_url.clone()
        };
        let ws_err = |e: &dyn std::fmt::Display| BackendError::Remote {
            service: SERVICE,
            status: None,
            code: Some(code.into()),
            message: format!("{}: {e}", code.replace('_', " ")),
        };
        let mut request = ws_url
            .as_str()
            .into_client_request()
            .map_err(|e| ws_err(&e))?;
        for (k, v) in self.tb.headers() {
            request.headers_mut().insert(k.clone(), v.clone());
        }
        http::ensure_crypto_provider();
        let (ws, _) = tokio::time::timeout(
            self.tb.policy().request_timeout,
            tokio_tungstenite::connect_async(request),
        )
        .await
        .map_err(|_| ws_err(&"timed out opening the WebSocket"))?
        .map_err(|e| match &e {
            tokio_tungstenite::tungstenite::Error::Http(resp) if resp.status().as_u16() == 404 => {
                BackendError::gone(format!(
                    "daytona sandbox {} or {what} is gone ({code} 404)",
                    self.id
                ))
            }
            _ => ws_err(&e),
        })?;
        Ok(ws)
    }

    /// Another handle on the same sandbox, for tasks that outlive a
    /// borrow (a terminal's pumps).
    pub(super) fn clone_handle(&self) -> DaytonaSandbox {
        DaytonaSandbox {
            id: self.id.clone(),
            tb: self.tb.clone(),
            base: self.base.clone(),
            workdir: self.workdir.clone(),
            home: self.home.clone(),
            env: self.env.clone(),
            mode: self.mode,
            default_timeout: self.default_timeout,
        }
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
            pty: PtySupport::Supported,
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

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        super::pty::start(self, req).await
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
