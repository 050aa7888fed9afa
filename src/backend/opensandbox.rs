//! The OpenSandbox backend: the lifecycle server
//! (`opensandbox/sandbox-lifecycle.yml`, header `OPEN-SANDBOX-API-KEY`)
//! makes, finds, pauses, resumes, renews and deletes sandboxes and tells
//! where each sandbox's execd listens (port 44772); execd
//! (`opensandbox/execd-api.yaml`) runs commands with an event stream and
//! serves files. Contract §7.7; wire details in `MINIMAL-SURFACE.md` §3.
//!
//! What the service cannot do, stated in [`Capabilities`]: execd re-splits
//! output into lines and replaces invalid UTF-8, so output is not
//! byte-exact (`byte_exact_output = false`: each line event becomes the
//! line plus `\n`, never a heuristic join like the reference's); commands
//! take no stdin (`exec_stdin = false`, `processes = false`).
//!
//! Differences from the reference, on purpose: uploads send `mode` as the
//! octal digits `644` (the reference's `0o644` became `0o420` on the
//! server); a timeout interrupts the command (`DELETE /command`) and is
//! reported as `timed_out`; the expiry is renewed by
//! [`Provisioner::keep_alive`].

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use reqwest::header::{ACCEPT, HeaderMap, RANGE};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::remote::{self, KILL_GRACE, Known, RemoteSandbox, StateCheck, UPLOAD_TIMEOUT};
use super::http::{self, HttpPolicy, On404, Retry, ServiceClient};
use super::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileKind, FileStat, OutputChunk, OutputSink, ProvisionSpec, Provisioner,
    ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, StreamKind, labels, path as bpath,
};

const SERVICE: &str = "opensandbox";
/// execd's port inside every sandbox.
pub const EXECD_PORT: u16 = 44772;
/// Extra time given to execd's own timeout, so wsbench's interrupt comes
/// first and execd's kill is only a backstop.
const SERVER_TIMEOUT_SLACK: Duration = Duration::from_secs(5);

/// OpenSandbox profile options (contract §7.7 constructor, plus URLs).
///
/// Environment fallbacks: `OPEN_SANDBOX_API_KEY`, `OPEN_SANDBOX_DOMAIN`.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OpenSandboxOptions {
    /// API key; empty or absent = env `OPEN_SANDBOX_API_KEY`. Never logged.
    /// With neither, requests go without the `OPEN-SANDBOX-API-KEY` header:
    /// a server started without `api_key` in its config (a local
    /// `opensandbox-server`) does not check it, and one that does answers
    /// 401 with a hint naming the variable.
    pub api_key: Option<String>,
    /// Lifecycle base URL including `/v1`; default
    /// `<protocol>://<domain>/v1`.
    pub api_url: Option<String>,
    /// Server domain; default env `OPEN_SANDBOX_DOMAIN`, else
    /// `localhost:8080`. A domain starting with `http(s)://` is used as is.
    pub domain: Option<String>,
    /// `http` or `https`, for the domain and for execd endpoints (which
    /// come without a scheme).
    pub protocol: String,
    /// Container image (`python:3.11-slim`).
    pub image: String,
    /// Entry process (required by the server with an image).
    pub entrypoint: Vec<String>,
    /// Provider expiry in seconds (≥ 60); `0` or `None`: no expiry.
    pub timeout_secs: Option<u64>,
    /// `resourceLimits`, e.g. `{"cpu": "1", "memory": "2Gi"}`.
    pub resource_limits: BTreeMap<String, String>,
    /// Environment of the sandbox and of every command.
    pub env: BTreeMap<String, String>,
    /// Extra metadata on every sandbox; `wsbench.workspace.id` always wins.
    pub metadata: BTreeMap<String, String>,
    /// Agent-visible root inside the sandbox.
    pub workdir: String,
    /// Reach execd through the lifecycle server's proxy
    /// (`use_server_proxy=true`).
    pub use_server_proxy: bool,
    /// `X-EXECD-ACCESS-TOKEN`, when execd was started with one.
    pub execd_access_token: Option<String>,
    /// How long to wait for the endpoint and execd's `/ping`.
    pub ready_timeout_secs: u64,
    /// How long to wait for a state change (pause, resume).
    pub state_timeout_secs: u64,
    /// Limit for one unary request.
    pub request_timeout_secs: u64,
    /// Retries on 429/5xx.
    pub max_retries: u32,
    /// Seconds without any event (execd pings every 3 s) before a command
    /// stream counts as broken.
    pub stream_idle_secs: u64,
}

impl Default for OpenSandboxOptions {
    fn default() -> Self {
        let mut limits = BTreeMap::new();
        limits.insert("cpu".to_string(), "1".to_string());
        limits.insert("memory".to_string(), "2Gi".to_string());
        OpenSandboxOptions {
            api_key: None,
            api_url: None,
            domain: None,
            protocol: "http".into(),
            image: "python:3.11-slim".into(),
            entrypoint: vec!["tail".into(), "-f".into(), "/dev/null".into()],
            timeout_secs: Some(300),
            resource_limits: limits,
            env: BTreeMap::new(),
            metadata: BTreeMap::new(),
            workdir: "/workspace".into(),
            use_server_proxy: false,
            execd_access_token: None,
            ready_timeout_secs: 30,
            state_timeout_secs: 60,
            request_timeout_secs: 60,
            max_retries: 4,
            stream_idle_secs: 60,
        }
    }
}

impl std::fmt::Debug for OpenSandboxOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenSandboxOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_url", &self.api_url)
            .field("domain", &self.domain)
            .field("protocol", &self.protocol)
            .field("image", &self.image)
            .field("entrypoint", &self.entrypoint)
            .field("timeout_secs", &self.timeout_secs)
            .field("workdir", &self.workdir)
            .field("use_server_proxy", &self.use_server_proxy)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl OpenSandboxOptions {
    fn api_url(&self) -> String {
        if let Some(u) = self.api_url.clone().filter(|u| !u.is_empty()) {
            return u;
        }
        let domain = http::option_or_env(&self.domain, "OPEN_SANDBOX_DOMAIN")
            .unwrap_or_else(|| "localhost:8080".into());
        let base = if domain.starts_with("http://") || domain.starts_with("https://") {
            domain
        } else {
            format!("{}://{domain}", self.protocol)
        };
        http::join_url(&base, "/v1")
    }
}

/// `Sandbox` of the lifecycle API.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SandboxDto {
    id: String,
    #[serde(default)]
    status: Option<StatusDto>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    created_at: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct StatusDto {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl SandboxDto {
    fn state_name(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s.state.as_deref())
            .unwrap_or("")
    }

    fn info(&self) -> SandboxInfo {
        let labels = self.metadata.clone().unwrap_or_default();
        let why = self
            .status
            .as_ref()
            .and_then(|s| s.message.clone().or_else(|| s.reason.clone()))
            .unwrap_or_default();
        SandboxInfo {
            workspace_id: labels
                .get(labels::WORKSPACE_ID)
                .cloned()
                .unwrap_or_default(),
            backend_id: self.id.clone(),
            state: match self.state_name() {
                "Pending" | "Resuming" => SandboxState::Provisioning,
                "Running" => SandboxState::Running,
                "Pausing" | "Paused" => SandboxState::Suspended,
                "Failed" => SandboxState::Failed(why),
                "Stopping" | "Terminated" => SandboxState::Failed(format!(
                    "{}{}",
                    self.state_name().to_ascii_lowercase(),
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(": {why}")
                    }
                )),
                s => SandboxState::Unknown(s.to_string()),
            },
            labels,
            created_at: self.created_at.as_deref().and_then(http::parse_time),
            last_active: None,
        }
    }
}

/// Makes, finds, pauses, resumes and deletes OpenSandbox sandboxes.
pub struct OpenSandboxProvisioner {
    opts: OpenSandboxOptions,
    api: ServiceClient,
    key: Option<String>,
    known: Known,
}

impl std::fmt::Debug for OpenSandboxProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenSandboxProvisioner")
            .field("opts", &self.opts)
            .finish()
    }
}

/// States a workspace's sandbox can be found in (everything not ended).
const LIVE_STATES: [&str; 5] = ["Pending", "Running", "Pausing", "Paused", "Resuming"];

impl OpenSandboxProvisioner {
    /// A provisioner for `opts`.
    ///
    /// The lifecycle spec requires the key header, but the server checks
    /// it only when it was configured with a key; so a missing key is not
    /// an error here (see [`OpenSandboxOptions::api_key`]).
    ///
    /// Errors: a key that cannot be a header; the TLS stack cannot be set
    /// up.
    pub fn new(opts: OpenSandboxOptions) -> BackendResult<Self> {
        let policy = HttpPolicy::with_limits(opts.request_timeout_secs, opts.max_retries);
        let key = http::option_or_env(&opts.api_key, "OPEN_SANDBOX_API_KEY")
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        let headers = match &key {
            Some(k) => http::auth_headers(("open-sandbox-api-key", k), &[])?,
            None => HeaderMap::new(),
        };
        let api = ServiceClient::new(
            SERVICE,
            headers,
            policy,
            "check OPEN_SANDBOX_API_KEY or `api_key` in the profile",
        )?;
        Ok(OpenSandboxProvisioner {
            opts,
            api,
            key,
            known: Known::default(),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &OpenSandboxOptions {
        &self.opts
    }

    fn url(&self, path: &str) -> String {
        http::join_url(&self.opts.api_url(), path)
    }

    async fn list_raw(&self, filter: &[(&str, &str)]) -> BackendResult<Vec<SandboxDto>> {
        let metadata = http::metadata_query(filter);
        let mut out = Vec::new();
        let mut page = 1u32;
        loop {
            let url = self.url("/sandboxes");
            let v: Value = self
                .api
                .json(Retry::Idempotent, On404::Remote, |c| {
                    let mut q: Vec<(&str, String)> = LIVE_STATES
                        .iter()
                        .map(|s| ("state", s.to_string()))
                        .collect();
                    if !metadata.is_empty() {
                        q.push(("metadata", metadata.clone()));
                    }
                    q.push(("page", page.to_string()));
                    q.push(("pageSize", "50".into()));
                    c.get(&url).query(&q)
                })
                .await?;
            let items: Vec<SandboxDto> =
                serde_json::from_value(v.get("items").cloned().unwrap_or(json!([])))
                    .map_err(|e| self.api.bad_response(format!("sandbox list: {e}")))?;
            let more = v
                .pointer("/pagination/hasNextPage")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let empty = items.is_empty();
            out.extend(items);
            if !more || empty || page >= 10_000 {
                break;
            }
            page += 1;
        }
        Ok(out)
    }

    async fn get(&self, id: &str) -> BackendResult<SandboxDto> {
        let url = self.url(&format!("/sandboxes/{id}"));
        self.api
            .json(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await
    }

    /// Polls until the sandbox is in `want`; fails on a terminal state.
    async fn wait_state(&self, id: &str, want: &str) -> BackendResult<()> {
        remote::wait_for_state(
            SERVICE,
            id,
            want,
            Duration::from_secs(self.opts.state_timeout_secs),
            || self.get(id),
            |dto: &SandboxDto| match dto.state_name() {
                s if s == want => StateCheck::Reached,
                s @ ("Failed" | "Terminated" | "Stopping") => StateCheck::Failed(s.to_string()),
                s => StateCheck::Waiting(s.to_string()),
            },
        )
        .await
        .map(|_| ())
    }

    /// `POST /sandboxes/{id}/{verb}` (pause, resume): 202, or 409 when
    /// already in the target state.
    async fn transition(&self, id: &str, verb: &str, target: &str) -> BackendResult<()> {
        let url = self.url(&format!("/sandboxes/{id}/{verb}"));
        let resp = self
            .api
            .send(Retry::Idempotent, false, |c| c.post(&url))
            .await?;
        if resp.status().as_u16() == 409 {
            let body = resp.bytes().await.unwrap_or_default();
            let dto = self.get(id).await?;
            let st = dto.state_name();
            let on_the_way = (target == "Paused" && st == "Pausing")
                || (target == "Running" && st == "Resuming");
            if st != target && !on_the_way {
                return Err(self.api.status_error(
                    reqwest::StatusCode::CONFLICT,
                    &body,
                    On404::SandboxGone,
                ));
            }
        } else {
            self.api.check(resp, On404::SandboxGone).await?;
        }
        self.wait_state(id, target).await
    }

    async fn sandbox_id(&self, workspace_id: &str) -> BackendResult<String> {
        let find = self.find(workspace_id);
        self.known
            .sandbox_id("OpenSandbox", workspace_id, find)
            .await
    }

    /// Looks up execd's endpoint (retrying until it is published), then
    /// polls `/ping`.
    async fn connect(&self, id: &str) -> BackendResult<Arc<OpenSandboxSandbox>> {
        let deadline = Instant::now() + Duration::from_secs(self.opts.ready_timeout_secs);
        let url = self.url(&format!("/sandboxes/{id}/endpoints/{EXECD_PORT}"));
        let proxy = self.opts.use_server_proxy;
        let ep: Value = loop {
            match self
                .api
                .json(Retry::Idempotent, On404::SandboxGone, |c| {
                    c.get(&url)
                        .query(&[("use_server_proxy", if proxy { "true" } else { "false" })])
                })
                .await
            {
                Ok(v) => break v,
                Err(e @ BackendError::Unavailable(_)) => return Err(e),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let endpoint = ep.get("endpoint").and_then(Value::as_str).ok_or_else(|| {
            self.api
                .bad_response(format!("endpoint answer without `endpoint`: {ep}"))
        })?;
        // Endpoints come without a scheme.
        let base = if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
            endpoint.to_string()
        } else {
            format!("{}://{endpoint}", self.opts.protocol)
        };
        let mut headers = HeaderMap::new();
        if let Some(h) = ep.get("headers").and_then(Value::as_object) {
            for (k, v) in h {
                let (n, v) = http::header(k, v.as_str().unwrap_or_default())?;
                headers.insert(n, v);
            }
        }
        if let (true, Some(key)) = (proxy, &self.key) {
            // The server's proxy wants the API key; execd itself never gets it.
            headers.insert("open-sandbox-api-key", http::secret_header(key)?);
        }
        if let Some(t) = &self.opts.execd_access_token {
            headers.insert("x-execd-access-token", http::secret_header(t)?);
        }
        let sb = Arc::new(OpenSandboxSandbox {
            id: id.to_string(),
            execd: self.api.with_headers(headers),
            base,
            workdir: bpath::normalize(&self.opts.workdir),
            env: self.opts.env.clone(),
            idle: Duration::from_secs(self.opts.stream_idle_secs.max(1)),
        });
        let what = format!("execd of opensandbox sandbox {id}");
        sb.execd
            .wait_ready(&sb.url("/ping"), deadline, &what, false)
            .await?;
        remote::shell_mkdir(sb.as_ref(), &sb.workdir, true).await?;
        Ok(sb)
    }
}

#[async_trait]
impl Provisioner for OpenSandboxProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Opensandbox
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
            "image": {"uri": self.opts.image},
            "entrypoint": self.opts.entrypoint,
            // 0 (or none): no expiry, sent as null.
            "timeout": self.opts.timeout_secs.filter(|t| *t > 0),
            "metadata": metadata,
        });
        if !self.opts.resource_limits.is_empty() {
            body["resourceLimits"] = json!(self.opts.resource_limits);
        }
        if !self.opts.env.is_empty() {
            body["env"] = json!(self.opts.env);
        }
        let url = self.url("/sandboxes");
        let dto: SandboxDto = self
            .api
            .json(Retry::RateLimitOnly, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await?;
        self.known.remember(&spec.workspace_id, &dto.id);
        let opened = async {
            if dto.state_name() != "Running" {
                self.wait_state(&dto.id, "Running").await?;
            }
            self.connect(&dto.id).await
        }
        .await;
        match opened {
            Ok(sb) => Ok(sb),
            Err(e) => {
                // A sandbox made just now holds no user data: delete it
                // rather than leak it (contract §11 point 16).
                let _ = self
                    .api
                    .delete(&self.url(&format!("/sandboxes/{}", dto.id)))
                    .await;
                self.known.forget(&spec.workspace_id);
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
        Ok(remote::newest("OpenSandbox", workspace_id, found))
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let id = info.backend_id.clone();
        let dto = self.get(&id).await?;
        match dto.state_name() {
            "Running" => {}
            "Paused" | "Pausing" => {
                if dto.state_name() == "Pausing" {
                    self.wait_state(&id, "Paused").await?;
                }
                self.transition(&id, "resume", "Running").await?;
            }
            "Pending" | "Resuming" => self.wait_state(&id, "Running").await?,
            s => {
                return Err(BackendError::Unavailable(format!(
                    "opensandbox sandbox {id} is {s}; it cannot be attached"
                )));
            }
        }
        self.known.remember(&info.workspace_id, &id);
        Ok(self.connect(&id).await?)
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let r = self.transition(&id, "pause", "Paused").await;
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let r = self.transition(&id, "resume", "Running").await;
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let listed = self
            .list_raw(&[(labels::WORKSPACE_ID, workspace_id)])
            .await?;
        let ids = self
            .known
            .all_ids(workspace_id, listed.iter().map(SandboxDto::info));
        remote::delete_each(&self.api, ids, |id| self.url(&format!("/sandboxes/{id}"))).await
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let listed = self.list_raw(&[]).await?;
        Ok(remote::workspaces(listed.iter().map(SandboxDto::info)))
    }

    async fn keep_alive(&self, workspace_id: &str, ttl: Duration) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let until = chrono::DateTime::<chrono::Utc>::from(SystemTime::now() + ttl)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let url = self.url(&format!("/sandboxes/{id}/renew-expiration"));
        let r = self
            .api
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({ "expiresAt": until }))
            })
            .await
            .map(|_| ());
        self.known.forget_on_gone(workspace_id, r)
    }
}

/// A live OpenSandbox sandbox, reached through its execd.
pub struct OpenSandboxSandbox {
    id: String,
    execd: ServiceClient,
    base: String,
    workdir: String,
    env: BTreeMap<String, String>,
    idle: Duration,
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

/// Splits an execd event stream into JSON events. execd writes bare JSON
/// objects each followed by a blank line; standard SSE (`data:` lines)
/// is accepted too. Bytes are buffered until a frame is complete, so a
/// chunk boundary inside a UTF-8 character is harmless.
#[derive(Debug, Default)]
pub struct SseReader {
    buf: BytesMut,
}

impl SseReader {
    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete event, if any; frames with no JSON (comments,
    /// keep-alive blank frames) are skipped.
    ///
    /// Errors: a frame that is not JSON.
    pub fn next_event(&mut self) -> BackendResult<Option<Value>> {
        loop {
            let Some(end) = find_frame_end(&self.buf) else {
                return Ok(None);
            };
            let frame = self.buf.split_to(end.0).freeze();
            let _ = self.buf.split_to(end.1);
            if let Some(v) = parse_frame(&frame)? {
                return Ok(Some(v));
            }
        }
    }

    /// Parses what is left when the stream ends (a last frame without the
    /// blank line).
    ///
    /// Errors: a trailing frame that is not JSON.
    pub fn finish(&mut self) -> BackendResult<Option<Value>> {
        let rest = self.buf.split().freeze();
        parse_frame(&rest)
    }
}

/// `(frame length, separator length)` of the first frame ended by a blank
/// line (`\n\n` or `\r\n\r\n`).
fn find_frame_end(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\n' {
            if b.get(i + 1) == Some(&b'\n') {
                return Some((i, 2));
            }
            if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                return Some((i, 3));
            }
        }
        i += 1;
    }
    None
}

fn parse_frame(frame: &[u8]) -> BackendResult<Option<Value>> {
    let text = String::from_utf8_lossy(frame);
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let payload = if text.starts_with('{') {
        text.to_string()
    } else {
        // Standard SSE: join the `data:` lines; ignore `event:`, `id:`,
        // `retry:` and comments.
        let data: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        if data.is_empty() {
            return Ok(None);
        }
        data.join("\n")
    };
    serde_json::from_str(&payload)
        .map(Some)
        .map_err(|e| BackendError::Remote {
            service: SERVICE,
            status: None,
            code: Some("bad_stream".into()),
            message: format!("event is not JSON ({e}): {}", http::snippet(&payload)),
        })
}

/// How a command ended, per its last event.
#[derive(Debug, Clone, PartialEq)]
enum Ending {
    Exit(i32),
    /// `error.evalue` was not a number: the command could not start.
    NotStarted(String),
}

/// Bytes for one output event: the line with its `\n` back (an empty line
/// arrives as `"\n"` already).
fn line_bytes(text: &str) -> Bytes {
    if text == "\n" || text.ends_with('\n') {
        Bytes::copy_from_slice(text.as_bytes())
    } else {
        Bytes::from(format!("{text}\n"))
    }
}

impl OpenSandboxSandbox {
    /// The OpenSandbox sandbox id.
    pub fn sandbox_id(&self) -> &str {
        &self.id
    }

    fn url(&self, path: &str) -> String {
        http::join_url(&self.base, path)
    }

    fn resolve(&self, path: &str) -> String {
        bpath::join(&self.workdir, path)
    }

    /// Interrupts command `id` (`DELETE /command?id=`).
    async fn interrupt(&self, id: &str) {
        let url = self.url("/command");
        let r = self
            .execd
            .send_ok(Retry::Idempotent, On404::Remote, |c| {
                c.delete(&url).query(&[("id", id)])
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(sandbox = %self.id, command = id, error = %e, "interrupt failed");
        }
    }

    /// Stops a command: execd's interrupt, then the marker sweep for
    /// children that left its process group.
    async fn stop(&self, cmd_id: Option<&str>, marker: &str) {
        if let Some(id) = cmd_id {
            self.interrupt(id).await;
        }
        remote::kill_marked(self, marker).await;
    }

    /// Passes a 2xx answer about `path` through; maps any other with
    /// [`OpenSandboxSandbox::file_error`].
    async fn check_file(
        &self,
        resp: reqwest::Response,
        path: &str,
    ) -> BackendResult<reqwest::Response> {
        self.execd
            .check_with(resp, |status, body| self.file_error(status, body, path))
            .await
    }

    fn file_error(&self, status: u16, body: &[u8], path: &str) -> BackendError {
        let (code, message) = http::parse_error_body(body);
        match (status, code.as_deref()) {
            (_, Some(c)) if c.contains("SANDBOX_NOT_FOUND") => BackendError::Unavailable(format!(
                "opensandbox sandbox {} is gone ({c}: {message})",
                self.id
            )),
            (404, _) | (_, Some("FILE_NOT_FOUND")) => BackendError::NotFound(path.to_string()),
            _ if message.contains("is a directory") => BackendError::IsADirectory(path.into()),
            _ if message.contains("not a directory") => BackendError::NotADirectory(path.into()),
            _ if message.contains("ermission denied") => {
                BackendError::PermissionDenied(path.into())
            }
            _ => self.execd.status_error(
                reqwest::StatusCode::from_u16(status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
                body,
                On404::Remote,
            ),
        }
    }

    async fn info(&self, path: &str) -> BackendResult<Value> {
        let url = self.url("/files/info");
        let resp = self
            .execd
            .send(Retry::Idempotent, false, |c| {
                c.get(&url).query(&[("path", path)])
            })
            .await?;
        let resp = self.check_file(resp, path).await?;
        let v: Value = self.execd.decode(resp).await?;
        v.get(path)
            .cloned()
            .or_else(|| v.as_object().and_then(|m| m.values().next().cloned()))
            .ok_or_else(|| BackendError::NotFound(path.to_string()))
    }
}

/// `FileInfo.mode` is written in octal digits (`755` means `0o755`).
fn octal_digits(mode: &Value) -> Option<u32> {
    let digits = match mode {
        Value::Number(n) => n.as_u64()?.to_string(),
        Value::String(s) => s.clone(),
        _ => return None,
    };
    u32::from_str_radix(&digits, 8).ok()
}

fn file_stat(v: &Value) -> FileStat {
    let path = v.get("path").and_then(Value::as_str).unwrap_or("");
    let kind = match v.get("type").and_then(Value::as_str) {
        Some("file") => FileKind::File,
        Some("directory") | Some("dir") => FileKind::Dir,
        Some("symlink") => FileKind::Symlink,
        Some(_) => FileKind::Other,
        // Older execd versions have no `type`.
        None => FileKind::File,
    };
    FileStat {
        name: path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string(),
        kind,
        size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
        modified: v
            .get("modified_at")
            .and_then(Value::as_str)
            .and_then(http::parse_time),
        link_target: None,
        target_is_dir: false,
        mode: v.get("mode").and_then(octal_digits),
    }
}

#[async_trait]
impl RemoteSandbox for OpenSandboxSandbox {
    const KIND: BackendKind = BackendKind::Opensandbox;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exec_stdin: false,
            byte_exact_output: false,
            kill_on_timeout: true,
            processes: false,
            read_range: true,
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
        // C18: the user's line goes to execd's shell verbatim.
        let line = remote::command_line(&req.argv)?;
        let mut envs = self.env.clone();
        envs.extend(req.env.clone());
        // Lets a timeout find the whole tree, not only execd's child.
        let marker = remote::new_marker();
        envs.insert(remote::MARKER_VAR.into(), marker.clone());
        let cwd = req
            .cwd
            .as_deref()
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut body = json!({
            "command": line,
            "cwd": cwd,
            "background": false,
            "envs": envs,
        });
        if let Some(t) = req.timeout {
            body["timeout"] = json!((t + SERVER_TIMEOUT_SLACK).as_millis() as u64);
        }
        let url = self.url("/command");
        let resp = self
            .execd
            .send(Retry::RateLimitOnly, true, |c| {
                c.post(&url).header(ACCEPT, "text/event-stream").json(&body)
            })
            .await?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.bytes().await.unwrap_or_default();
            return Err(self.execd.status_error(status, &body, On404::SandboxGone));
        }
        let mut stream: Pin<Box<dyn futures::Stream<Item = reqwest::Result<Bytes>> + Send>> =
            Box::pin(resp.bytes_stream());
        let mut sse = SseReader::default();
        let timeout = remote::sleep_until(req.timeout.map(|t| started + t));
        let cancel = remote::cancelled(req.cancel.as_ref());
        tokio::pin!(timeout, cancel);
        let mut cmd_id: Option<String> = None;
        let mut ending: Option<Ending> = None;
        let mut stopped: Option<Instant> = None;
        let (mut timed_out, mut cancelled) = (false, false);
        let mut eof = false;
        'outer: loop {
            while let Some(ev) = sse.next_event()? {
                match ev.get("type").and_then(Value::as_str).unwrap_or("") {
                    "init" => {
                        cmd_id = ev.get("text").and_then(Value::as_str).map(str::to_string);
                        if stopped.is_some()
                            && let Some(id) = &cmd_id
                        {
                            self.interrupt(id).await;
                        }
                    }
                    kind @ ("stdout" | "stderr") => {
                        let text = ev.get("text").and_then(Value::as_str).unwrap_or("");
                        if let Some(s) = &sink {
                            let stream = if kind == "stdout" {
                                StreamKind::Stdout
                            } else {
                                StreamKind::Stderr
                            };
                            let _ = s
                                .send(OutputChunk {
                                    stream,
                                    data: line_bytes(text),
                                })
                                .await;
                        }
                    }
                    "execution_complete" => {
                        ending.get_or_insert(Ending::Exit(0));
                        break 'outer;
                    }
                    "error" => {
                        let evalue = ev
                            .pointer("/error/evalue")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .trim()
                            .to_string();
                        ending = Some(match evalue.parse::<i32>() {
                            Ok(c) => Ending::Exit(c),
                            Err(_) => Ending::NotStarted(evalue),
                        });
                        break 'outer;
                    }
                    _ => {} // ping, status, result, execution_count
                }
            }
            if eof {
                if let Some(ev) = sse.finish()?
                    && let Some(t) = ev.get("type").and_then(Value::as_str)
                {
                    tracing::debug!(event = t, "trailing execd event without a blank line");
                }
                break;
            }
            let grace = remote::sleep_until(stopped.map(|t| t + KILL_GRACE));
            tokio::select! {
                chunk = tokio::time::timeout(self.idle, stream.next()) => match chunk {
                    Err(_) => {
                        self.stop(cmd_id.as_deref(), &marker).await;
                        return Err(BackendError::Remote {
                            service: SERVICE,
                            status: None,
                            code: Some("stream_idle".into()),
                            message: format!("no event from execd for {}s; the command was interrupted", self.idle.as_secs()),
                        });
                    }
                    Ok(Some(Ok(b))) => sse.push(&b),
                    Ok(Some(Err(_))) | Ok(None) => eof = true,
                },
                _ = &mut timeout, if stopped.is_none() => {
                    timed_out = true;
                    stopped = Some(Instant::now());
                    self.stop(cmd_id.as_deref(), &marker).await;
                }
                _ = &mut cancel, if stopped.is_none() => {
                    cancelled = true;
                    stopped = Some(Instant::now());
                    self.stop(cmd_id.as_deref(), &marker).await;
                }
                _ = grace => break,
            }
        }
        let (exit_code, signal) = match ending {
            Some(Ending::Exit(c)) if stopped.is_some() && c == 0 => (Some(128 + 9), Some(9)),
            Some(Ending::Exit(c)) => (Some(c), None),
            Some(Ending::NotStarted(_)) | None if stopped.is_some() => (Some(128 + 9), Some(9)),
            Some(Ending::NotStarted(reason)) => {
                return Err(BackendError::Spawn {
                    program: req.argv.first().cloned().unwrap_or_default(),
                    reason: if reason.is_empty() {
                        "execd reported an error without a value".into()
                    } else {
                        reason
                    },
                });
            }
            None => {
                self.stop(cmd_id.as_deref(), &marker).await;
                return Err(BackendError::Remote {
                    service: SERVICE,
                    status: None,
                    code: Some("stream_interrupted".into()),
                    message: "the command stream from execd ended before the command finished; it was interrupted".into(),
                });
            }
        };
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }

    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = path.to_string();
        if let Some(r) = range
            && r.len == 0
        {
            // A zero-length Range header is invalid; check existence only.
            self.info(&p).await?;
            return Ok(Vec::new());
        }
        let url = self.url("/files/download");
        let resp = self
            .execd
            .send(Retry::Idempotent, false, |c| {
                let mut b = c.get(&url).query(&[("path", &p)]);
                if let Some(r) = range {
                    b = b.header(
                        RANGE,
                        format!("bytes={}-{}", r.offset, r.offset + r.len - 1),
                    );
                }
                b
            })
            .await?;
        let status = resp.status().as_u16();
        if status == 416 {
            return Ok(Vec::new());
        }
        let resp = self.check_file(resp, &p).await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.execd.transport_error(&e))?;
        // 200 means the server ignored the range: cut it here.
        Ok(remote::slice_range(&bytes, range.filter(|_| status == 200)))
    }

    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()> {
        let url = self.url("/files/upload");
        // execd reads `mode` as octal digits: 644 means 0o644
        // (MINIMAL-SURFACE.md §3.4; the reference sent 420 = 0o644).
        let meta = serde_json::to_vec(&json!({"path": path, "mode": 644})).expect("json");
        let len = data.len();
        let build = |c: &reqwest::Client| {
            // Both parts must be *file* parts (with a filename), or execd
            // answers "metadata file is missing".
            let form = reqwest::multipart::Form::new()
                .part(
                    "metadata",
                    reqwest::multipart::Part::bytes(meta.clone())
                        .file_name("metadata")
                        .mime_str("application/json")
                        .expect("static mime"),
                )
                .part(
                    "file",
                    reqwest::multipart::Part::stream_with_length(
                        reqwest::Body::from(data.clone()),
                        len as u64,
                    )
                    .file_name(path.to_string())
                    .mime_str("application/octet-stream")
                    .expect("static mime"),
                );
            c.post(&url).multipart(form).timeout(UPLOAD_TIMEOUT)
        };
        let resp = self.execd.send(Retry::Idempotent, true, build).await?;
        self.check_file(resp, path).await.map(|_| ())
    }

    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = path.to_string();
        let url = self.url("/directories/list");
        let resp = self
            .execd
            .send(Retry::Idempotent, false, |c| {
                c.get(&url).query(&[("path", p.as_str()), ("depth", "1")])
            })
            .await?;
        let resp = self.check_file(resp, &p).await?;
        let items: Vec<Value> = self.execd.decode(resp).await?;
        let me = bpath::normalize(&p);
        Ok(items
            .iter()
            .filter(|v| {
                let ep = v.get("path").and_then(Value::as_str).unwrap_or("");
                bpath::normalize(ep) != me
            })
            .map(file_stat)
            .collect())
    }

    async fn stat_path(&self, path: &str) -> BackendResult<FileStat> {
        Ok(file_stat(&self.info(path).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_json_and_sse_frames_split_anywhere() {
        let wire = "{\"type\":\"init\",\"text\":\"c1\"}\n\n{\"type\":\"stdout\",\"text\":\"h\u{e9}\"}\n\n: comment\n\nevent: x\ndata: {\"type\":\"stderr\",\"text\":\"e\"}\n\n{\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"3\"}}\n\n";
        let bytes = wire.as_bytes();
        for cut in 0..bytes.len() {
            let mut r = SseReader::default();
            let mut evs = Vec::new();
            for part in [&bytes[..cut], &bytes[cut..]] {
                r.push(part);
                while let Some(v) = r.next_event().unwrap() {
                    evs.push(v);
                }
            }
            assert_eq!(evs.len(), 4, "cut at {cut}");
            assert_eq!(evs[1]["text"], "h\u{e9}");
            assert_eq!(evs[2]["type"], "stderr");
            assert_eq!(evs[3]["error"]["evalue"], "3");
        }
    }

    #[test]
    fn mode_digits_and_lines() {
        assert_eq!(octal_digits(&json!(644)), Some(0o644));
        assert_eq!(octal_digits(&json!(755)), Some(0o755));
        assert_eq!(octal_digits(&json!(9)), None);
        assert_eq!(&line_bytes("a")[..], b"a\n");
        assert_eq!(&line_bytes("\n")[..], b"\n");
    }

    #[test]
    fn options_default_and_reject_unknown() {
        let o: OpenSandboxOptions = serde_json::from_value(json!({"domain": "h:1"})).unwrap();
        assert_eq!(o.api_url(), "http://h:1/v1");
        assert_eq!(o.entrypoint, ["tail", "-f", "/dev/null"]);
        assert!(serde_json::from_value::<OpenSandboxOptions>(json!({"imag": "x"})).is_err());
        let o = OpenSandboxOptions {
            api_key: Some("secret-k".into()),
            ..Default::default()
        };
        assert!(!format!("{o:?}").contains("secret-k"));
    }

    #[test]
    fn no_key_sends_no_key_header() {
        if std::env::var_os("OPEN_SANDBOX_API_KEY").is_some() {
            println!("SKIPPED: OPEN_SANDBOX_API_KEY is set");
            return;
        }
        let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
            api_url: Some("http://127.0.0.1:9/v1".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(p.api.headers().get("open-sandbox-api-key").is_none());
        let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
            api_key: Some(" k ".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(p.api.headers().get("open-sandbox-api-key").is_some());
    }
}
