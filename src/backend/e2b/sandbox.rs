//! A live E2B sandbox ([`E2bSandbox`]), reached through envd: its
//! headers and URLs, unary Connect calls and how envd's errors map onto
//! [`BackendError`]; the [`RemoteSandbox`] impl hands commands to
//! `exec.rs` and files to `files.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};
use tokio::io::AsyncRead;

use super::options::E2bOptions;
use super::service::SandboxDto;
use super::{ENVD_PORT, SERVICE};
use crate::backend::cloud::RemoteSandbox;
use crate::backend::http::{self, On404, Retry, ServiceClient};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, PtyRequest, PtySession, PtySupport, SpawnRequest, path as bpath,
};

/// A live E2B sandbox, reached through envd.
pub(crate) struct E2bSandbox {
    pub(super) id: String,
    pub(super) envd: ServiceClient,
    pub(super) base: String,
    pub(super) workdir: String,
    pub(super) env: BTreeMap<String, String>,
    pub(super) user: Option<String>,
    pub(super) idle: Duration,
}

impl std::fmt::Debug for E2bSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2bSandbox")
            .field("id", &self.id)
            .field("envd", &self.base)
            .field("workdir", &self.workdir)
            .finish()
    }
}

impl E2bSandbox {
    pub(super) fn new(
        opts: &E2bOptions,
        api: &ServiceClient,
        dto: SandboxDto,
    ) -> BackendResult<Self> {
        let domain = dto
            .domain
            .clone()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| opts.domain());
        let template = opts
            .envd_url
            .clone()
            .unwrap_or_else(|| "https://{port}-{sandbox_id}.{domain}".into());
        let base = template
            .replace("{port}", &ENVD_PORT.to_string())
            .replace("{sandbox_id}", &dto.sandbox_id)
            .replace("{domain}", &domain);
        let mut headers = HeaderMap::new();
        if let Some(t) = dto.envd_access_token.as_deref().filter(|t| !t.is_empty()) {
            headers.insert("x-access-token", http::secret_header(t)?);
        }
        let (n, v) = http::header("e2b-sandbox-id", &dto.sandbox_id)?;
        headers.insert(n, v);
        let (n, v) = http::header("e2b-sandbox-port", &ENVD_PORT.to_string())?;
        headers.insert(n, v);
        if let Some(user) = &opts.user {
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:"));
            headers.insert(
                "authorization",
                http::secret_header(&format!("Basic {basic}"))?,
            );
        }
        tracing::debug!(sandbox = %dto.sandbox_id, envd_version = ?dto.envd_version, "e2b sandbox");
        Ok(E2bSandbox {
            id: dto.sandbox_id,
            envd: api.with_headers(headers),
            base,
            workdir: bpath::normalize(&opts.workdir),
            env: opts.env.clone(),
            user: opts.user.clone(),
            idle: Duration::from_secs(opts.stream_idle_secs.max(1)),
        })
    }

    /// The E2B sandbox id.
    pub fn sandbox_id(&self) -> &str {
        &self.id
    }

    pub(super) fn url(&self, path: &str) -> String {
        http::join_url(&self.base, path)
    }

    pub(super) fn resolve(&self, path: &str) -> String {
        bpath::join(&self.workdir, path)
    }

    /// Unary Connect call with the JSON codec.
    pub(super) async fn unary(
        &self,
        method: &str,
        body: Value,
        on404: On404,
    ) -> BackendResult<Value> {
        let url = self.url(method);
        let resp = self
            .envd
            .send(Retry::Idempotent, false, |c| {
                c.post(&url)
                    .header(CONTENT_TYPE, "application/json")
                    .header("connect-protocol-version", "1")
                    .json(&body)
            })
            .await?;
        let status = resp.status();
        if status.is_success() {
            return self.envd.decode(resp).await;
        }
        let bytes = resp.bytes().await.unwrap_or_default();
        Err(self.connect_error(status.as_u16(), &bytes, on404))
    }

    /// Maps a Connect error (`{code:"not_found",message}`) or a proxy
    /// status onto a [`BackendError`].
    pub(super) fn connect_error(&self, status: u16, body: &[u8], on404: On404) -> BackendError {
        let (code, message) = http::parse_error_body(body);
        let path = match &on404 {
            On404::Path(p) => Some(p.clone()),
            _ => None,
        };
        match (code.as_deref(), status, path) {
            (Some("not_found"), _, Some(p)) | (_, 404, Some(p)) => BackendError::NotFound(p),
            (Some("already_exists"), _, Some(p)) => BackendError::AlreadyExists(p),
            // E2B's proxy answers 502 for a sandbox it no longer routes
            // to (killed or expired); the manager's recovery asks the API
            // whether it is really gone before it makes a new one.
            (_, 502, _) => BackendError::gone(format!(
                "e2b sandbox {} is not reachable (502: {message})",
                self.id
            )),
            (Some("invalid_argument"), _, Some(p)) if message.contains("not a directory") => {
                BackendError::NotADirectory(p)
            }
            (Some("invalid_argument"), _, Some(p)) if message.contains("is a directory") => {
                BackendError::IsADirectory(p)
            }
            (Some("permission_denied"), _, Some(p)) => BackendError::PermissionDenied(p),
            // envd itself answered with a Connect code: the sandbox is
            // there (a gone one gets the proxy's 502), something in the
            // request was not.
            (Some(c), 404, None) if c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_') => {
                BackendError::Remote {
                    service: SERVICE,
                    status: Some(404),
                    code: Some(c.to_string()),
                    message,
                }
            }
            _ => self.envd.status_error(
                reqwest::StatusCode::from_u16(status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
                body,
                on404,
            ),
        }
    }

    pub(super) fn query_path(&self, path: &str) -> Vec<(&'static str, String)> {
        let mut q = vec![("path", path.to_string())];
        if let Some(u) = &self.user {
            q.push(("username", u.clone()));
        }
        q
    }

    /// Sends `SIGKILL` to `pid` through envd.
    pub(super) async fn kill_pid(&self, pid: u32) -> BackendResult<()> {
        self.unary(
            "/process.Process/SendSignal",
            json!({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}),
            On404::Remote,
        )
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl RemoteSandbox for E2bSandbox {
    const KIND: BackendKind = BackendKind::E2b;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exec_stdin: true,
            byte_exact_output: true,
            kill_on_timeout: true,
            processes: true,
            pty: PtySupport::Supported,
            ..Capabilities::NONE
        }
    }

    fn workdir(&self) -> &str {
        &self.workdir
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.run(req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.start_process(req).await
    }

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        super::pty::start(self, req).await
    }

    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        self.get_file(path, range).await
    }

    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()> {
        self.put_file(path, data).await
    }

    async fn upload_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        self.put_stream(path, reader).await
    }

    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.list_entries(path).await
    }

    async fn stat_path(&self, path: &str) -> BackendResult<FileStat> {
        self.stat_file(path).await
    }
}
