//! The E2B backend: the control plane (`e2b/openapi.yml`) makes, finds,
//! pauses and kills sandboxes; the in-sandbox daemon envd runs commands over
//! Connect-RPC (`process.Process/Start`, JSON codec, length-prefixed
//! envelopes) and serves files (`/files`, `filesystem.Filesystem/*`).
//! Contract §7.4; wire details in `MINIMAL-SURFACE.md` §1.
//!
//! Differences from the reference, on purpose: the workspace-id metadata is
//! `wsbench.workspace.id` and user metadata can never override it; a
//! command timeout kills the process with `SendSignal` and is reported as
//! `timed_out` (C15); the Connect deadline sent is never shorter than the
//! command's own timeout, and absent when there is none (C19); stdout and
//! stderr stay separate raw bytes; the provider's expiry is renewed by
//! [`Provisioner::keep_alive`] (contract §11 point 15).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::http::remote::{self, KILL_GRACE, Known, RemoteSandbox, UPLOAD_TIMEOUT};
use super::http::{self, HttpPolicy, On404, Retry, ServiceClient};
use super::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileKind, FileStat, OutputChunk, OutputSink, Process, ProcessControl, ProvisionSpec,
    Provisioner, ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, SpawnRequest,
    StreamKind, labels, path as bpath,
};

const SERVICE: &str = "e2b";
/// envd's port inside every sandbox.
pub const ENVD_PORT: u16 = 49983;
/// Extra time on the Connect deadline beyond the command's own timeout, so
/// the transport never ends a command before wsbench's own kill does.
const DEADLINE_SLACK: Duration = Duration::from_secs(30);

/// E2B profile options (contract §7.4 constructor, plus URLs for tests).
///
/// Environment fallbacks: `E2B_API_KEY`, `E2B_API_URL`, `E2B_DOMAIN`.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct E2bOptions {
    /// API key; empty or absent = env `E2B_API_KEY`. Never logged.
    pub api_key: Option<String>,
    /// Control-plane base URL; default env `E2B_API_URL`, else
    /// `https://api.<domain>`.
    pub api_url: Option<String>,
    /// Sandbox domain; default env `E2B_DOMAIN`, else `e2b.app`.
    pub domain: Option<String>,
    /// envd base URL template; `{sandbox_id}`, `{domain}` and `{port}` are
    /// filled in. Default `https://{port}-{sandbox_id}.{domain}`. Requests
    /// also carry `E2b-Sandbox-Id`/`E2b-Sandbox-Port`, so one host can
    /// route (the shared-host form, and the test fakes).
    pub envd_url: Option<String>,
    /// Template id (`base`).
    pub template: String,
    /// Provider lifetime in seconds (`timeout` on create/connect; 300).
    pub timeout_secs: u64,
    /// Agent-visible root inside the sandbox.
    pub workdir: String,
    /// OS user for envd (sent as `Authorization: Basic`); `None` = the
    /// template's default user.
    pub user: Option<String>,
    /// Environment for every command (`envVars` on create too).
    pub env: BTreeMap<String, String>,
    /// Extra metadata on every sandbox; `wsbench.workspace.id` always wins.
    pub metadata: BTreeMap<String, String>,
    /// Ask E2B to pause instead of kill on expiry (`autoPause`). wsbench
    /// defaults to `true` although the service defaults to `false`: a
    /// one-shot command leaves its sandbox running, and a killed sandbox
    /// takes the workspace's files with it (the next command would get a
    /// new empty one); a paused one is resumed by the next command.
    /// `false` sends `autoPause: false` (kill on expiry); `None`, which a
    /// profile cannot write, leaves the field out.
    pub auto_pause: Option<bool>,
    /// How long to wait for envd's `/health` after create/connect.
    pub ready_timeout_secs: u64,
    /// Limit for one unary request.
    pub request_timeout_secs: u64,
    /// Retries on 429/5xx.
    pub max_retries: u32,
    /// Seconds without any frame (envd sends keep-alives) before a command
    /// stream counts as broken.
    pub stream_idle_secs: u64,
}

impl Default for E2bOptions {
    fn default() -> Self {
        E2bOptions {
            api_key: None,
            api_url: None,
            domain: None,
            envd_url: None,
            template: "base".into(),
            timeout_secs: 300,
            workdir: "/home/user/workspace".into(),
            user: None,
            env: BTreeMap::new(),
            metadata: BTreeMap::new(),
            auto_pause: Some(true),
            ready_timeout_secs: 30,
            request_timeout_secs: 60,
            max_retries: 4,
            stream_idle_secs: 180,
        }
    }
}

impl std::fmt::Debug for E2bOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2bOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_url", &self.api_url)
            .field("domain", &self.domain)
            .field("envd_url", &self.envd_url)
            .field("template", &self.template)
            .field("timeout_secs", &self.timeout_secs)
            .field("workdir", &self.workdir)
            .field("user", &self.user)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl E2bOptions {
    fn domain(&self) -> String {
        http::option_or_env(&self.domain, "E2B_DOMAIN").unwrap_or_else(|| "e2b.app".into())
    }

    fn api_url(&self) -> String {
        http::option_or_env(&self.api_url, "E2B_API_URL")
            .unwrap_or_else(|| format!("https://api.{}", self.domain()))
    }
}

/// The control plane's `Sandbox` (create/connect answer).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SandboxDto {
    #[serde(rename = "sandboxID")]
    sandbox_id: String,
    #[serde(default)]
    envd_version: Option<String>,
    #[serde(default)]
    envd_access_token: Option<String>,
    #[serde(default)]
    domain: Option<String>,
}

/// One row of `GET /v2/sandboxes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedDto {
    #[serde(rename = "sandboxID")]
    sandbox_id: String,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, String>>,
}

impl ListedDto {
    fn info(&self) -> SandboxInfo {
        let labels = self.metadata.clone().unwrap_or_default();
        SandboxInfo {
            workspace_id: labels
                .get(labels::WORKSPACE_ID)
                .cloned()
                .unwrap_or_default(),
            backend_id: self.sandbox_id.clone(),
            state: match self.state.as_deref() {
                Some("running") => SandboxState::Running,
                Some("paused") => SandboxState::Suspended,
                Some(s) => SandboxState::Unknown(s.to_string()),
                None => SandboxState::Unknown(String::new()),
            },
            labels,
            created_at: self.started_at.as_deref().and_then(http::parse_time),
            last_active: None,
        }
    }
}

/// Makes, finds, pauses and kills E2B sandboxes.
pub struct E2bProvisioner {
    opts: E2bOptions,
    api: ServiceClient,
    known: Known,
}

impl std::fmt::Debug for E2bProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2bProvisioner")
            .field("opts", &self.opts)
            .finish()
    }
}

impl E2bProvisioner {
    /// A provisioner for `opts`.
    ///
    /// Errors: no API key in the options or `E2B_API_KEY`.
    pub fn new(opts: E2bOptions) -> BackendResult<Self> {
        let policy = HttpPolicy::with_limits(opts.request_timeout_secs, opts.max_retries);
        let (api, _) = ServiceClient::with_api_key(
            SERVICE,
            opts.api_key.as_deref(),
            "E2B_API_KEY",
            policy,
            |key| http::auth_headers(("x-api-key", key), &[]),
        )?;
        Ok(E2bProvisioner {
            opts,
            api,
            known: Known::default(),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &E2bOptions {
        &self.opts
    }

    fn url(&self, path: &str) -> String {
        http::join_url(&self.opts.api_url(), path)
    }

    /// Every sandbox in state running or paused whose metadata matches
    /// `filter`, across all pages.
    async fn list_raw(&self, filter: &[(&str, &str)]) -> BackendResult<Vec<ListedDto>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let metadata = http::metadata_query(filter);
        loop {
            let url = self.url("/v2/sandboxes");
            let resp = self
                .api
                .send_ok(Retry::Idempotent, On404::Remote, |c| {
                    let mut q: Vec<(&str, String)> =
                        vec![("state", "running,paused".into()), ("limit", "100".into())];
                    if !metadata.is_empty() {
                        q.push(("metadata", metadata.clone()));
                    }
                    if let Some(t) = &token {
                        q.push(("nextToken", t.clone()));
                    }
                    c.get(&url).query(&q)
                })
                .await?;
            let next = resp
                .headers()
                .get("x-next-token")
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_string);
            let page: Vec<ListedDto> = self.api.decode(resp).await?;
            let empty = page.is_empty();
            out.extend(page);
            match next {
                Some(t) if !empty && Some(&t) != token.as_ref() => token = Some(t),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn sandbox_id(&self, workspace_id: &str) -> BackendResult<String> {
        let find = self.find(workspace_id);
        self.known.sandbox_id("E2B", workspace_id, find).await
    }

    /// `POST /sandboxes/{id}/connect`: resumes a paused sandbox and pushes
    /// its expiry to at least `timeout` from now.
    async fn connect(&self, sandbox_id: &str, timeout: Duration) -> BackendResult<SandboxDto> {
        let url = self.url(&format!("/sandboxes/{sandbox_id}/connect"));
        let secs = timeout.as_secs().max(1);
        self.api
            .json(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({ "timeout": secs }))
            })
            .await
    }

    async fn open_sandbox(&self, dto: SandboxDto) -> BackendResult<Arc<E2bSandbox>> {
        let sb = Arc::new(E2bSandbox::new(&self.opts, &self.api, dto)?);
        // 502 from the proxy: envd not routable yet (per the SDK).
        let limit = Duration::from_secs(self.opts.ready_timeout_secs);
        let what = format!("envd of e2b sandbox {}", sb.id);
        sb.envd
            .wait_ready(&sb.url("/health"), Instant::now() + limit, &what, true)
            .await?;
        remote::shell_mkdir(sb.as_ref(), &self.opts.workdir, true).await?;
        Ok(sb)
    }
}

#[async_trait]
impl Provisioner for E2bProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::E2b
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: true,
            persistent: true,
        }
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let metadata = remote::labels_for(&self.opts.metadata, spec);
        let mut body = json!({
            "templateID": self.opts.template,
            "timeout": self.opts.timeout_secs,
            "metadata": metadata,
            "envVars": self.opts.env,
        });
        if let Some(p) = self.opts.auto_pause {
            body["autoPause"] = json!(p);
        }
        let url = self.url("/sandboxes");
        let dto: SandboxDto = self
            .api
            .json(Retry::RateLimitOnly, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await?;
        let id = dto.sandbox_id.clone();
        match self.open_sandbox(dto).await {
            Ok(sb) => {
                self.known.remember(&spec.workspace_id, &id);
                Ok(sb)
            }
            Err(e) => {
                // A sandbox made just now holds no user data: kill it
                // rather than leak it. A reattached one is never killed
                // on failure (contract §11 point 16).
                let _ = self
                    .api
                    .delete(&self.url(&format!("/sandboxes/{id}")))
                    .await;
                Err(e)
            }
        }
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        let listed = self
            .list_raw(&[(labels::WORKSPACE_ID, workspace_id)])
            .await?;
        let found = listed.iter().map(|d| {
            let i = d.info();
            (i.created_at, i)
        });
        Ok(remote::newest("E2B", workspace_id, found))
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let dto = self
            .connect(
                &info.backend_id,
                Duration::from_secs(self.opts.timeout_secs),
            )
            .await?;
        self.known.remember(&info.workspace_id, &dto.sandbox_id);
        Ok(self.open_sandbox(dto).await?)
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let url = self.url(&format!("/sandboxes/{id}/pause"));
        let resp = self
            .api
            .send(Retry::Idempotent, false, |c| c.post(&url).json(&json!({})))
            .await?;
        // 409: already paused — the goal is reached.
        if resp.status().as_u16() == 409 {
            return Ok(());
        }
        let r = self.api.check(resp, On404::SandboxGone).await.map(|_| ());
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let ttl = Duration::from_secs(self.opts.timeout_secs);
        let r = self.connect(&id, ttl).await.map(|_| ());
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let listed = self
            .list_raw(&[(labels::WORKSPACE_ID, workspace_id)])
            .await?;
        let ids = self
            .known
            .all_ids(workspace_id, listed.iter().map(ListedDto::info));
        remote::delete_each(&self.api, ids, |id| self.url(&format!("/sandboxes/{id}"))).await
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let listed = self.list_raw(&[]).await?;
        Ok(remote::workspaces(listed.iter().map(ListedDto::info)))
    }

    async fn keep_alive(&self, workspace_id: &str, ttl: Duration) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        // connect only ever extends the expiry (openapi.yml ConnectSandbox).
        let r = self.connect(&id, ttl).await.map(|_| ());
        self.known.forget_on_gone(workspace_id, r)
    }
}

/// A live E2B sandbox, reached through envd.
pub struct E2bSandbox {
    id: String,
    envd: ServiceClient,
    base: String,
    workdir: String,
    env: BTreeMap<String, String>,
    user: Option<String>,
    idle: Duration,
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
    fn new(opts: &E2bOptions, api: &ServiceClient, dto: SandboxDto) -> BackendResult<Self> {
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

    fn url(&self, path: &str) -> String {
        http::join_url(&self.base, path)
    }

    fn resolve(&self, path: &str) -> String {
        bpath::join(&self.workdir, path)
    }

    /// Unary Connect call with the JSON codec.
    async fn unary(&self, method: &str, body: Value, on404: On404) -> BackendResult<Value> {
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
    fn connect_error(&self, status: u16, body: &[u8], on404: On404) -> BackendError {
        let (code, message) = http::parse_error_body(body);
        let path = match &on404 {
            On404::Path(p) => Some(p.clone()),
            _ => None,
        };
        match (code.as_deref(), status, path) {
            (Some("not_found"), _, Some(p)) | (_, 404, Some(p)) => BackendError::NotFound(p),
            (Some("already_exists"), _, Some(p)) => BackendError::AlreadyExists(p),
            (_, 502, _) => BackendError::Unavailable(format!(
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

    fn query_path(&self, path: &str) -> Vec<(&'static str, String)> {
        let mut q = vec![("path", path.to_string())];
        if let Some(u) = &self.user {
            q.push(("username", u.clone()));
        }
        q
    }

    /// Sends `SIGKILL` to `pid` through envd.
    async fn kill_pid(&self, pid: u32) -> BackendResult<()> {
        self.unary(
            "/process.Process/SendSignal",
            json!({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}),
            On404::Remote,
        )
        .await
        .map(|_| ())
    }

    /// Opens a `process.Process/Start` stream.
    async fn start(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        stdin: bool,
        deadline: Option<Duration>,
    ) -> BackendResult<(reqwest::Response, String)> {
        let line = remote::command_line(argv)?;
        let mut envs = self.env.clone();
        envs.extend(env.clone());
        // Lets a timeout find the whole tree, not only the pid envd knows.
        let marker = remote::new_marker();
        envs.insert(remote::MARKER_VAR.into(), marker.clone());
        let cwd = cwd
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let msg = json!({
            "process": {"cmd": "/bin/sh", "args": ["-c", line], "envs": envs, "cwd": cwd},
            "stdin": stdin,
        });
        let body = Bytes::from(envelope(0, &serde_json::to_vec(&msg).expect("json")));
        let url = self.url("/process.Process/Start");
        let resp = self
            .envd
            .send(Retry::RateLimitOnly, true, |c| {
                let mut r = c
                    .post(&url)
                    .header(CONTENT_TYPE, "application/connect+json")
                    .header("connect-protocol-version", "1")
                    .header("keepalive-ping-interval", "50")
                    .body(body.clone());
                if let Some(d) = deadline {
                    // Never shorter than the command's own limit (C19).
                    r = r.header(
                        "connect-timeout-ms",
                        (d + DEADLINE_SLACK).as_millis().to_string(),
                    );
                }
                r
            })
            .await?;
        if resp.status().is_success() {
            return Ok((resp, marker));
        }
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap_or_default();
        Err(self.connect_error(status, &bytes, On404::SandboxGone))
    }

    /// Stops a command: `SendSignal` to its pid, then the marker sweep
    /// for children that left it.
    async fn stop(&self, pid: Option<u32>, marker: &str) {
        if let Some(p) = pid
            && let Err(e) = self.kill_pid(p).await
        {
            tracing::warn!(sandbox = %self.id, pid = p, error = %e, "SendSignal failed");
        }
        remote::kill_marked(self, marker).await;
    }

    async fn stat_entry(&self, path: &str) -> BackendResult<EntryDto> {
        let v = self
            .unary(
                "/filesystem.Filesystem/Stat",
                json!({"path": path}),
                On404::Path(path.to_string()),
            )
            .await?;
        let entry = v.get("entry").cloned().unwrap_or(Value::Null);
        serde_json::from_value(entry).map_err(|e| {
            self.envd
                .bad_response(format!("Stat answer for {path}: {e}"))
        })
    }

    async fn upload_part(&self, path: &str, part: reqwest::multipart::Part) -> BackendResult<()> {
        let url = self.url("/files");
        let q = self.query_path(path);
        // A multipart body can be sent once only: no retries here.
        let form = reqwest::multipart::Form::new().part("file", part);
        let req = self.envd.raw().post(&url).query(&q).multipart(form);
        // A multipart stream cannot be re-sent, so it gets one generous try.
        let resp = self.envd.send_once(req, Some(UPLOAD_TIMEOUT)).await?;
        self.envd
            .check_with(resp, |status, body| {
                self.file_error(status, body, path, On404::SandboxGone)
            })
            .await
            .map(|_| ())
    }

    /// An error answer of `/files` about `path`: envd's 400 for a
    /// directory, else as [`E2bSandbox::connect_error`].
    fn file_error(&self, status: u16, body: &[u8], path: &str, on404: On404) -> BackendError {
        let (_, message) = http::parse_error_body(body);
        if status == 400 && message.contains("directory") {
            return BackendError::IsADirectory(path.to_string());
        }
        self.connect_error(status, body, on404)
    }
}

/// One `EntryInfo` (proto3 JSON; `size` is an int64 string).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryDto {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    size: Option<Value>,
    #[serde(default)]
    mode: Option<u32>,
    #[serde(default)]
    modified_time: Option<String>,
    #[serde(default)]
    symlink_target: Option<String>,
}

impl EntryDto {
    fn stat(&self) -> FileStat {
        let kind = match self.kind.as_deref() {
            Some("FILE_TYPE_FILE") => FileKind::File,
            Some("FILE_TYPE_DIRECTORY") => FileKind::Dir,
            Some("FILE_TYPE_SYMLINK") => FileKind::Symlink,
            _ => FileKind::Other,
        };
        let size = match &self.size {
            Some(Value::String(s)) => s.parse().unwrap_or(0),
            Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
            _ => 0,
        };
        let name = if self.name.is_empty() {
            self.path.rsplit('/').next().unwrap_or("").to_string()
        } else {
            self.name.clone()
        };
        FileStat {
            name,
            kind,
            size,
            modified: self.modified_time.as_deref().and_then(http::parse_time),
            link_target: self.symlink_target.clone(),
            target_is_dir: false,
            mode: self.mode.map(|m| m & 0o7777),
        }
    }
}

/// A Connect envelope: flag byte, 4-byte big-endian length, payload.
pub fn envelope(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(flag);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a byte stream into Connect envelopes, whatever the chunking.
#[derive(Debug, Default)]
pub struct EnvelopeReader {
    buf: BytesMut,
}

/// Largest envelope accepted (a sane bound; envd's chunks are small).
const MAX_ENVELOPE: usize = 64 << 20;

impl EnvelopeReader {
    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete envelope as `(flag, payload)`, if any.
    ///
    /// Errors: a length over 64 MiB (a corrupt stream).
    pub fn next_envelope(&mut self) -> BackendResult<Option<(u8, Bytes)>> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_ENVELOPE {
            return Err(BackendError::Remote {
                service: SERVICE,
                status: None,
                code: Some("bad_stream".into()),
                message: format!("envelope of {len} bytes"),
            });
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        let flag = self.buf[0];
        self.buf.advance(5);
        Ok(Some((flag, self.buf.split_to(len).freeze())))
    }

    /// Bytes received that do not yet form an envelope.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// What one Start-stream envelope said.
#[derive(Debug, PartialEq)]
enum Event {
    Start(u32),
    Data(StreamKind, Bytes),
    KeepAlive,
    End {
        exit_code: i32,
        exited: bool,
        status: String,
        error: Option<String>,
    },
    /// End of stream; `Some((code, message))` for a Connect error.
    Eos(Option<(String, String)>),
}

fn bad(message: String) -> BackendError {
    BackendError::Remote {
        service: SERVICE,
        status: None,
        code: Some("bad_stream".into()),
        message,
    }
}

fn decode_event(flag: u8, payload: &[u8]) -> BackendResult<Event> {
    let v: Value =
        serde_json::from_slice(payload).map_err(|e| bad(format!("envelope is not JSON ({e})")))?;
    if flag & 0x02 != 0 {
        let err = v.get("error").map(|e| {
            (
                e.get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string(),
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        });
        return Ok(Event::Eos(err));
    }
    let ev = v
        .get("event")
        .ok_or_else(|| bad(format!("no event in {v}")))?;
    if let Some(s) = ev.get("start") {
        let pid = s.get("pid").and_then(Value::as_u64).unwrap_or(0) as u32;
        return Ok(Event::Start(pid));
    }
    if let Some(d) = ev.get("data") {
        let b64 = base64::engine::general_purpose::STANDARD;
        for (key, kind) in [
            ("stdout", StreamKind::Stdout),
            ("stderr", StreamKind::Stderr),
        ] {
            if let Some(s) = d.get(key).and_then(Value::as_str) {
                let bytes = b64
                    .decode(s)
                    .map_err(|e| bad(format!("{key} data is not base64 ({e})")))?;
                return Ok(Event::Data(kind, Bytes::from(bytes)));
            }
        }
        // A pty chunk or an empty data event: nothing to deliver.
        return Ok(Event::KeepAlive);
    }
    if let Some(e) = ev.get("end") {
        // proto3 JSON leaves zero out: no exitCode means 0.
        let exit_code = e.get("exitCode").and_then(Value::as_i64).unwrap_or(0) as i32;
        return Ok(Event::End {
            exit_code,
            exited: e.get("exited").and_then(Value::as_bool).unwrap_or(false),
            status: e
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            error: e.get("error").and_then(Value::as_str).map(str::to_string),
        });
    }
    if ev.get("keepalive").is_some() {
        return Ok(Event::KeepAlive);
    }
    Err(bad(format!("unknown event {ev}")))
}

/// Exit code and signal from an end event: envd reports a signal death as
/// exit code -1 with status `signal: killed`.
fn exit_of(exit_code: i32, status: &str) -> (Option<i32>, Option<i32>) {
    if let Some(sig) = status.strip_prefix("signal: ") {
        let n = match sig.trim() {
            "killed" => Some(9),
            "terminated" => Some(15),
            "interrupt" => Some(2),
            "hangup" => Some(1),
            "aborted" => Some(6),
            "segmentation fault" => Some(11),
            "broken pipe" => Some(13),
            _ => None,
        };
        if let Some(n) = n {
            return (Some(128 + n), Some(n));
        }
    }
    (Some(exit_code), None)
}

/// Reads Start-stream events, with an idle limit between frames.
struct EventStream {
    body: Pin<Box<dyn futures::Stream<Item = reqwest::Result<Bytes>> + Send>>,
    reader: EnvelopeReader,
    idle: Duration,
}

impl EventStream {
    fn new(resp: reqwest::Response, idle: Duration) -> Self {
        EventStream {
            body: Box::pin(resp.bytes_stream()),
            reader: EnvelopeReader::default(),
            idle,
        }
    }

    /// The next event; `Ok(None)` when the connection ended without an
    /// end-of-stream envelope (a cut stream).
    async fn next(&mut self) -> BackendResult<Option<Event>> {
        loop {
            if let Some((flag, payload)) = self.reader.next_envelope()? {
                return decode_event(flag, &payload).map(Some);
            }
            match tokio::time::timeout(self.idle, self.body.next()).await {
                Err(_) => {
                    return Err(BackendError::Remote {
                        service: SERVICE,
                        status: None,
                        code: Some("stream_idle".into()),
                        message: format!(
                            "no data or keep-alive from envd for {}s",
                            self.idle.as_secs()
                        ),
                    });
                }
                Ok(None) | Ok(Some(Err(_))) => return Ok(None),
                Ok(Some(Ok(b))) => self.reader.push(&b),
            }
        }
    }
}

fn stream_cut(pid: Option<u32>) -> BackendError {
    BackendError::Remote {
        service: SERVICE,
        status: None,
        code: Some("stream_interrupted".into()),
        message: match pid {
            Some(p) => format!(
                "the command stream from envd ended before the command finished; pid {p} was killed"
            ),
            None => "the command stream from envd ended before the command started".into(),
        },
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
            read_range: false,
            atomic_write: false,
            append: false,
            watch: false,
        }
    }

    fn workdir(&self) -> &str {
        &self.workdir
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let (resp, marker) = self
            .start(
                &req.argv,
                req.cwd.as_deref(),
                &req.env,
                req.stdin.is_some(),
                req.timeout,
            )
            .await?;
        let mut events = EventStream::new(resp, self.idle);
        let timeout = remote::sleep_until(req.timeout.map(|t| started + t));
        let cancel = remote::cancelled(req.cancel.as_ref());
        tokio::pin!(timeout, cancel);
        let mut pid: Option<u32> = None;
        let mut killed: Option<Instant> = None;
        let (mut timed_out, mut cancelled) = (false, false);
        let mut end: Option<(i32, bool, String, Option<String>)> = None;
        let mut stdin = req.stdin.clone();
        loop {
            let grace = remote::sleep_until(killed.map(|t| t + KILL_GRACE));
            let ev = tokio::select! {
                ev = events.next() => ev,
                _ = &mut timeout, if killed.is_none() => {
                    timed_out = true;
                    killed = Some(Instant::now());
                    self.stop(pid, &marker).await;
                    continue;
                }
                _ = &mut cancel, if killed.is_none() => {
                    cancelled = true;
                    killed = Some(Instant::now());
                    self.stop(pid, &marker).await;
                    continue;
                }
                _ = grace => break,
            };
            match ev {
                Ok(Some(Event::Start(p))) => {
                    pid = Some(p);
                    if let Some(data) = stdin.take() {
                        self.feed_stdin(p, data).await?;
                    }
                }
                Ok(Some(Event::Data(stream, data))) => {
                    if let Some(s) = &sink {
                        let _ = s.send(OutputChunk { stream, data }).await;
                    }
                }
                Ok(Some(Event::KeepAlive)) => {}
                Ok(Some(Event::End {
                    exit_code,
                    exited,
                    status,
                    error,
                })) => end = Some((exit_code, exited, status, error)),
                Ok(Some(Event::Eos(None))) => break,
                Ok(Some(Event::Eos(Some((code, message))))) => {
                    if code == "deadline_exceeded" && req.timeout.is_some() {
                        // The transport deadline (timeout + slack) passed:
                        // still the command's timeout as far as the caller
                        // is concerned.
                        timed_out = true;
                        self.stop(pid, &marker).await;
                        break;
                    }
                    if end.is_some() || killed.is_some() {
                        break;
                    }
                    return Err(BackendError::Remote {
                        service: SERVICE,
                        status: None,
                        code: Some(code),
                        message,
                    });
                }
                Ok(None) => {
                    if end.is_some() || killed.is_some() {
                        break;
                    }
                    self.stop(pid, &marker).await;
                    return Err(stream_cut(pid));
                }
                Err(e) => {
                    if end.is_none() {
                        self.stop(pid, &marker).await;
                    }
                    return Err(e);
                }
            }
        }
        let (exit_code, signal) = match &end {
            // Neither an exit nor a signal: envd could not run or wait for
            // the process, and says why.
            Some((_, false, status, Some(error)))
                if killed.is_none() && !status.starts_with("signal:") =>
            {
                return Err(BackendError::Remote {
                    service: SERVICE,
                    status: None,
                    code: Some("process_error".into()),
                    message: error.clone(),
                });
            }
            Some((code, _, status, _)) => exit_of(*code, status),
            None if killed.is_some() => (Some(128 + 9), Some(9)),
            None => (None, None),
        };
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        let (resp, _marker) = self
            .start(&req.argv, req.cwd.as_deref(), &req.env, true, None)
            .await?;
        let mut events = EventStream::new(resp, self.idle);
        let pid = match events.next().await? {
            Some(Event::Start(p)) => p,
            Some(other) => {
                return Err(bad(format!("the first event was {other:?}, not start")));
            }
            None => return Err(stream_cut(None)),
        };
        let (out_w, out_r) = tokio::io::duplex(256 * 1024);
        let (err_w, err_r) = tokio::io::duplex(256 * 1024);
        let (in_w, in_r) = tokio::io::duplex(64 * 1024);
        let (status_tx, status_rx) = watch::channel(None::<Option<i32>>);
        tokio::spawn(pump_process(events, out_w, err_w, status_tx));
        let me = Arc::new(self.clone_handle());
        tokio::spawn(pump_stdin(me.clone(), pid, in_r));
        Ok(Process {
            stdin: Box::new(in_w),
            stdout: Box::new(out_r),
            stderr: Box::new(err_r),
            control: Arc::new(E2bProcess {
                pid,
                sandbox: me,
                status: status_rx,
            }),
        })
    }

    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = path.to_string();
        let url = self.url("/files");
        let q = self.query_path(&p);
        let resp = self
            .envd
            .send(Retry::Idempotent, false, |c| c.get(&url).query(&q))
            .await?;
        let resp = self
            .envd
            .check_with(resp, |status, body| {
                self.file_error(status, body, &p, On404::Path(p.clone()))
            })
            .await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.envd.transport_error(&e))?;
        Ok(remote::slice_range(&bytes, range))
    }

    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()> {
        let part = reqwest::multipart::Part::bytes(Vec::from(data))
            .file_name(path.to_string())
            .mime_str("application/octet-stream")
            .expect("static mime");
        self.upload_part(path, part).await
    }

    async fn upload_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let p = path.to_string();
        let count = Arc::new(AtomicU64::new(0));
        let counted = CountingReader {
            inner: reader,
            count: count.clone(),
        };
        let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(counted));
        let part = reqwest::multipart::Part::stream(body)
            .file_name(p.clone())
            .mime_str("application/octet-stream")
            .expect("static mime");
        self.upload_part(&p, part).await?;
        Ok(count.load(Ordering::Relaxed))
    }

    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = path.to_string();
        let v = self
            .unary(
                "/filesystem.Filesystem/ListDir",
                json!({"path": p, "depth": 1}),
                On404::Path(p.clone()),
            )
            .await?;
        let entries: Vec<EntryDto> = serde_json::from_value(
            v.get("entries").cloned().unwrap_or(json!([])),
        )
        .map_err(|e| {
            self.envd
                .bad_response(format!("ListDir answer for {p}: {e}"))
        })?;
        Ok(entries.iter().map(EntryDto::stat).collect())
    }

    async fn stat_path(&self, path: &str) -> BackendResult<FileStat> {
        let p = path.to_string();
        let entry = self.stat_entry(&p).await?;
        let mut st = entry.stat();
        if st.kind == FileKind::Symlink
            && let Some(t) = &entry.symlink_target
        {
            let target = bpath::join(&bpath::join(&p, ".."), t);
            if let Ok(te) = self.stat_entry(&target).await {
                let ts = te.stat();
                st.target_is_dir = ts.kind == FileKind::Dir;
                st.size = ts.size;
            }
        }
        Ok(st)
    }
}

impl E2bSandbox {
    async fn feed_stdin(&self, pid: u32, data: Bytes) -> BackendResult<()> {
        let b64 = base64::engine::general_purpose::STANDARD;
        for chunk in data.chunks(1 << 20) {
            self.unary(
                "/process.Process/SendInput",
                json!({"process": {"pid": pid}, "input": {"stdin": b64.encode(chunk)}}),
                On404::Remote,
            )
            .await?;
        }
        self.unary(
            "/process.Process/CloseStdin",
            json!({"process": {"pid": pid}}),
            On404::Remote,
        )
        .await
        .map(|_| ())
    }

    fn clone_handle(&self) -> E2bSandbox {
        E2bSandbox {
            id: self.id.clone(),
            envd: self.envd.clone(),
            base: self.base.clone(),
            workdir: self.workdir.clone(),
            env: self.env.clone(),
            user: self.user.clone(),
            idle: self.idle,
        }
    }
}

struct CountingReader {
    inner: Box<dyn AsyncRead + Send + Unpin>,
    count: Arc<AtomicU64>,
}

impl AsyncRead for CountingReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}

async fn pump_process(
    mut events: EventStream,
    mut out: tokio::io::DuplexStream,
    mut err: tokio::io::DuplexStream,
    status: watch::Sender<Option<Option<i32>>>,
) {
    let mut code = None;
    loop {
        match events.next().await {
            Ok(Some(Event::Data(StreamKind::Stdout, d))) => {
                let _ = out.write_all(&d).await;
            }
            Ok(Some(Event::Data(StreamKind::Stderr, d))) => {
                let _ = err.write_all(&d).await;
            }
            Ok(Some(Event::End {
                exit_code, status, ..
            })) => code = exit_of(exit_code, &status).0,
            Ok(Some(Event::Eos(_))) | Ok(None) | Err(_) => break,
            Ok(Some(_)) => {}
        }
    }
    let _ = out.shutdown().await;
    let _ = err.shutdown().await;
    let _ = status.send(Some(code));
}

async fn pump_stdin(sb: Arc<E2bSandbox>, pid: u32, mut input: tokio::io::DuplexStream) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match input.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let body =
                    json!({"process": {"pid": pid}, "input": {"stdin": b64.encode(&buf[..n])}});
                if sb
                    .unary("/process.Process/SendInput", body, On404::Remote)
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
    let _ = sb
        .unary(
            "/process.Process/CloseStdin",
            json!({"process": {"pid": pid}}),
            On404::Remote,
        )
        .await;
}

impl Drop for E2bProcess {
    fn drop(&mut self) {
        // Like the local backend: a dropped handle does not leave the
        // process running in the sandbox (an MCP server, for instance).
        if self.try_status().is_none()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (sb, pid) = (self.sandbox.clone(), self.pid);
            rt.spawn(async move {
                let _ = sb.kill_pid(pid).await;
            });
        }
    }
}

/// Control of a process started with [`Sandbox::spawn`] on E2B.
struct E2bProcess {
    pid: u32,
    sandbox: Arc<E2bSandbox>,
    status: watch::Receiver<Option<Option<i32>>>,
}

#[async_trait]
impl ProcessControl for E2bProcess {
    fn id(&self) -> String {
        format!("e2b {} pid {}", self.sandbox.id, self.pid)
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        let mut rx = self.status.clone();
        let v = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| stream_cut(Some(self.pid)))?;
        Ok(v.expect("checked by wait_for"))
    }

    fn try_status(&self) -> Option<Option<i32>> {
        *self.status.borrow()
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            return Ok(());
        }
        self.sandbox.kill_pid(self.pid).await?;
        let _ = tokio::time::timeout(KILL_GRACE, self.wait()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(flag: u8, v: Value) -> Vec<u8> {
        envelope(flag, &serde_json::to_vec(&v).unwrap())
    }

    #[test]
    fn envelopes_split_anywhere_reassemble() {
        let mut all = frame(0, json!({"event": {"start": {"pid": 7}}}));
        all.extend(frame(0, json!({"event": {"data": {"stdout": "w6k="}}})));
        all.extend(frame(
            0,
            json!({"event": {"end": {"exited": true, "status": "exit status 0"}}}),
        ));
        all.extend(frame(2, json!({})));
        for cut in 0..all.len() {
            let mut r = EnvelopeReader::default();
            let mut events = Vec::new();
            for part in [&all[..cut], &all[cut..]] {
                r.push(part);
                while let Some((f, p)) = r.next_envelope().unwrap() {
                    events.push(decode_event(f, &p).unwrap());
                }
            }
            assert_eq!(events.len(), 4, "cut at {cut}");
            assert_eq!(events[0], Event::Start(7));
            assert_eq!(
                events[1],
                Event::Data(StreamKind::Stdout, Bytes::from_static("é".as_bytes()))
            );
            // No exitCode key: proto3 JSON's zero, exit 0.
            assert!(matches!(events[2], Event::End { exit_code: 0, .. }));
            assert_eq!(events[3], Event::Eos(None));
        }
    }

    #[test]
    fn end_of_stream_errors_and_signals() {
        let f = frame(
            2,
            json!({"error": {"code": "deadline_exceeded", "message": "late"}}),
        );
        let mut r = EnvelopeReader::default();
        r.push(&f);
        let (flag, p) = r.next_envelope().unwrap().unwrap();
        assert_eq!(
            decode_event(flag, &p).unwrap(),
            Event::Eos(Some(("deadline_exceeded".into(), "late".into())))
        );
        assert_eq!(exit_of(-1, "signal: killed"), (Some(137), Some(9)));
        assert_eq!(exit_of(3, "exit status 3"), (Some(3), None));
    }

    #[test]
    fn options_reject_unknown_fields_and_hide_the_key() {
        let e = serde_json::from_value::<E2bOptions>(json!({"templat": "x"}));
        assert!(e.is_err());
        let o: E2bOptions = serde_json::from_value(json!({"api_key": "sk-secret"})).unwrap();
        assert!(!format!("{o:?}").contains("sk-secret"));
        assert_eq!(o.template, "base");
        // Files survive the provider's expiry unless the profile says no.
        assert_eq!(o.auto_pause, Some(true));
        let o: E2bOptions = serde_json::from_value(json!({"auto_pause": false})).unwrap();
        assert_eq!(o.auto_pause, Some(false));
    }
}
