//! The Daytona backend: the REST API (`daytona/api/openapi.yaml`) makes,
//! finds, starts, stops, recovers and deletes sandboxes; the in-sandbox
//! toolbox (`daytona/toolbox/openapi.yaml`, reached at
//! `{toolboxProxyUrl}/{sandboxId}`) runs commands and serves files.
//! Contract §7.5; wire details in `MINIMAL-SURFACE.md` §2.
//!
//! Commands run, by default, in a throw-away toolbox *session*: the
//! command is started asynchronously and its log is followed over a
//! WebSocket whose frames tag stdout with `\x01\x01\x01` and stderr with
//! `\x02\x02\x02` (a tag may split across frames), so stdout and stderr
//! stay separate and byte-exact, unlike the reference's `2>&1` (contract
//! §11 point 18). The blocking `/process/execute` call is the alternative
//! ([`DaytonaExecMode::Execute`]); it always sends an explicit timeout,
//! never leaving the daemon's hidden 10 s default in force, and its output
//! is the daemon's merged text. A Daytona answer of exit code -1 with no
//! output means the toolbox could not start the command (C17); it is
//! reported as [`BackendError::Spawn`], never as the command's status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::remote::{self, Known, MARKER_VAR, RemoteSandbox, StateCheck, UPLOAD_TIMEOUT};
use super::http::{self, HttpPolicy, On404, Retry, ServiceClient};
use super::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileKind, FileStat, OutputChunk, OutputSink, ProvisionSpec, Provisioner,
    ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, StreamKind, labels, path as bpath,
};

const SERVICE: &str = "daytona";
/// The toolbox picks its log format from this header: versions from
/// 0.167.0 get JSON with separate stdout and stderr
/// (`MINIMAL-SURFACE.md` §2.1). This is the SDK version the specs were
/// matched against.
const SDK_VERSION: &str = "0.226.1";
/// Limit on waiting for the exit code after the log stream ended.
const EXIT_CODE_WAIT: Duration = Duration::from_secs(30);

/// How commands are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DaytonaExecMode {
    /// Toolbox session + followed log: streamed, separate stdout/stderr.
    #[default]
    Session,
    /// `POST /process/execute`: one blocking call; stdout and stderr come
    /// back merged as the daemon's `result` (reported as stdout).
    Execute,
}

/// Daytona profile options (contract §7.5 constructor, plus URLs).
///
/// Environment fallbacks: `DAYTONA_API_KEY`, `DAYTONA_API_URL`,
/// `DAYTONA_TARGET`, `DAYTONA_ORGANIZATION_ID`.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaytonaOptions {
    /// API key; empty or absent = env `DAYTONA_API_KEY`. Never logged.
    pub api_key: Option<String>,
    /// API base; default env `DAYTONA_API_URL`, else
    /// `https://app.daytona.io/api`.
    pub api_url: Option<String>,
    /// `X-Daytona-Organization-ID` (needed with a JWT instead of a key).
    pub organization_id: Option<String>,
    /// Region target; default env `DAYTONA_TARGET`, else the service's.
    pub target: Option<String>,
    /// Snapshot to create from; `None` = the service default.
    pub snapshot: Option<String>,
    /// OS user in the sandbox.
    pub user: Option<String>,
    /// Environment of the sandbox (and of every command).
    pub env: BTreeMap<String, String>,
    /// Extra labels on every sandbox; `wsbench.workspace.id` always wins.
    pub labels: BTreeMap<String, String>,
    /// Minutes of inactivity before Daytona stops the sandbox (`None` =
    /// the service default; 0 = never).
    pub auto_stop_interval: Option<u32>,
    /// Agent-visible root; `None` = the toolbox's work dir.
    pub workdir: Option<String>,
    /// Toolbox base URL override (default: the sandbox's
    /// `toolboxProxyUrl`).
    pub toolbox_url: Option<String>,
    /// How commands run.
    pub exec_mode: DaytonaExecMode,
    /// Timeout sent with `/process/execute` when a request has none, in
    /// seconds (the daemon's own default is a hidden 10 s).
    pub default_exec_timeout_secs: u64,
    /// How long to wait for a state change (start, stop).
    pub state_timeout_secs: u64,
    /// Limit for one unary request.
    pub request_timeout_secs: u64,
    /// Retries on 429/5xx.
    pub max_retries: u32,
}

impl Default for DaytonaOptions {
    fn default() -> Self {
        DaytonaOptions {
            api_key: None,
            api_url: None,
            organization_id: None,
            target: None,
            snapshot: None,
            user: None,
            env: BTreeMap::new(),
            labels: BTreeMap::new(),
            auto_stop_interval: None,
            workdir: None,
            toolbox_url: None,
            exec_mode: DaytonaExecMode::Session,
            default_exec_timeout_secs: 1800,
            state_timeout_secs: 300,
            request_timeout_secs: 60,
            max_retries: 4,
        }
    }
}

impl std::fmt::Debug for DaytonaOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaytonaOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_url", &self.api_url)
            .field("organization_id", &self.organization_id)
            .field("target", &self.target)
            .field("snapshot", &self.snapshot)
            .field("user", &self.user)
            .field("labels", &self.labels)
            .field("workdir", &self.workdir)
            .field("exec_mode", &self.exec_mode)
            .finish()
    }
}

impl DaytonaOptions {
    fn api_url(&self) -> String {
        http::option_or_env(&self.api_url, "DAYTONA_API_URL")
            .unwrap_or_else(|| "https://app.daytona.io/api".into())
    }
}

/// `Sandbox` / `SandboxListItem` of the API.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SandboxDto {
    id: String,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    toolbox_proxy_url: Option<String>,
    #[serde(default)]
    recoverable: Option<bool>,
    #[serde(default)]
    error_reason: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    last_activity_at: Option<String>,
}

impl SandboxDto {
    fn state(&self) -> &str {
        self.state.as_deref().unwrap_or("unknown")
    }

    fn reason(&self) -> String {
        self.error_reason
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    }

    /// Where the sandbox stands on its way to one of `want`.
    fn check(&self, want: &[&str]) -> StateCheck {
        match self.state() {
            s if want.contains(&s) => StateCheck::Reached,
            s @ ("error" | "build_failed" | "destroyed" | "destroying") => {
                StateCheck::Failed(format!("{s}{}", self.reason()))
            }
            s => StateCheck::Waiting(s.to_string()),
        }
    }

    fn info(&self) -> SandboxInfo {
        let labels = self.labels.clone().unwrap_or_default();
        let reason = self.error_reason.clone().unwrap_or_default();
        let state = match self.state() {
            "started" => SandboxState::Running,
            "creating" | "restoring" | "starting" | "resuming" | "pulling_snapshot"
            | "pending_build" | "building_snapshot" | "resizing" | "snapshotting" | "forking" => {
                SandboxState::Provisioning
            }
            "stopped" | "stopping" | "paused" | "pausing" | "archived" | "archiving" => {
                SandboxState::Suspended
            }
            // Attachable: `attach` recovers it.
            "error" if self.recoverable == Some(true) => {
                SandboxState::Unknown(format!("error (recoverable): {reason}"))
            }
            "error" | "build_failed" | "destroyed" | "destroying" => {
                SandboxState::Failed(format!("{}: {reason}", self.state()))
            }
            s => SandboxState::Unknown(s.to_string()),
        };
        SandboxInfo {
            workspace_id: labels
                .get(labels::WORKSPACE_ID)
                .cloned()
                .unwrap_or_default(),
            backend_id: self.id.clone(),
            state,
            labels,
            created_at: self.created_at.as_deref().and_then(http::parse_time),
            last_active: self
                .last_activity_at
                .as_deref()
                .or(self.updated_at.as_deref())
                .and_then(http::parse_time),
        }
    }
}

/// States a workspace's sandbox can be found in.
const FIND_STATES: [&str; 13] = [
    "creating",
    "restoring",
    "started",
    "starting",
    "stopped",
    "stopping",
    "error",
    "pausing",
    "paused",
    "resuming",
    "archived",
    "archiving",
    "pulling_snapshot",
];

/// Makes, finds, starts, stops and deletes Daytona sandboxes.
pub struct DaytonaProvisioner {
    opts: DaytonaOptions,
    api: ServiceClient,
    known: Known,
}

impl std::fmt::Debug for DaytonaProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaytonaProvisioner")
            .field("opts", &self.opts)
            .finish()
    }
}

impl DaytonaProvisioner {
    /// A provisioner for `opts`.
    ///
    /// Errors: no API key in the options or `DAYTONA_API_KEY`.
    pub fn new(opts: DaytonaOptions) -> BackendResult<Self> {
        let policy = HttpPolicy::with_limits(opts.request_timeout_secs, opts.max_retries);
        let org = http::option_or_env(&opts.organization_id, "DAYTONA_ORGANIZATION_ID");
        let (api, _) = ServiceClient::with_api_key(
            SERVICE,
            opts.api_key.as_deref(),
            "DAYTONA_API_KEY",
            policy,
            |key| {
                let mut plain = vec![
                    ("x-daytona-source", "wsbench"),
                    ("x-daytona-sdk-version", SDK_VERSION),
                ];
                if let Some(org) = &org {
                    plain.push(("x-daytona-organization-id", org));
                }
                http::auth_headers(("authorization", &format!("Bearer {key}")), &plain)
            },
        )?;
        Ok(DaytonaProvisioner {
            opts,
            api,
            known: Known::default(),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &DaytonaOptions {
        &self.opts
    }

    fn url(&self, path: &str) -> String {
        http::join_url(&self.opts.api_url(), path)
    }

    async fn list_raw(&self, filter: Option<(&str, &str)>) -> BackendResult<Vec<SandboxDto>> {
        let labels = filter.map(|(k, v)| {
            let mut m = serde_json::Map::new();
            m.insert(k.to_string(), json!(v));
            Value::Object(m).to_string()
        });
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let url = self.url("/sandbox");
            let v: Value = self
                .api
                .json(Retry::Idempotent, On404::Remote, |c| {
                    let mut q: Vec<(&str, String)> = FIND_STATES
                        .iter()
                        .map(|s| ("states", s.to_string()))
                        .collect();
                    if let Some(l) = &labels {
                        q.push(("labels", l.clone()));
                    }
                    q.push(("limit", "100".into()));
                    if let Some(cur) = &cursor {
                        q.push(("cursor", cur.clone()));
                    }
                    c.get(&url).query(&q)
                })
                .await?;
            // The spec's paginated answer; a bare array (older servers) too.
            let (items, next) = match &v {
                Value::Array(_) => (v.clone(), None),
                _ => (
                    v.get("items").cloned().unwrap_or(json!([])),
                    v.get("nextCursor")
                        .and_then(Value::as_str)
                        .filter(|c| !c.is_empty())
                        .map(str::to_string),
                ),
            };
            let items: Vec<SandboxDto> = serde_json::from_value(items)
                .map_err(|e| self.api.bad_response(format!("sandbox list: {e}")))?;
            let empty = items.is_empty();
            out.extend(items);
            match next {
                Some(n) if !empty && Some(&n) != cursor.as_ref() => cursor = Some(n),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn get(&self, id: &str) -> BackendResult<SandboxDto> {
        let url = self.url(&format!("/sandbox/{id}"));
        self.api
            .json(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await
    }

    async fn post_state(&self, id: &str, verb: &str) -> BackendResult<()> {
        let url = self.url(&format!("/sandbox/{id}/{verb}"));
        self.api
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| c.post(&url))
            .await
            .map(|_| ())
    }

    /// Polls until the state is one of `want`; fails on error states.
    async fn wait_for(&self, id: &str, want: &[&str]) -> BackendResult<SandboxDto> {
        remote::wait_for_state(
            SERVICE,
            id,
            &want.join("/"),
            Duration::from_secs(self.opts.state_timeout_secs),
            || self.get(id),
            |dto: &SandboxDto| dto.check(want),
        )
        .await
    }

    /// Brings a sandbox to `started` from whatever state it is in
    /// (contract §7.5 "normalise").
    async fn ensure_started(&self, id: &str) -> BackendResult<SandboxDto> {
        let dto = self.get(id).await?;
        match dto.state() {
            "started" => Ok(dto),
            "stopped" | "paused" | "archived" => {
                self.post_state(id, "start").await?;
                self.wait_for(id, &["started"]).await
            }
            "stopping" | "pausing" | "archiving" => {
                self.wait_for(id, &["stopped", "paused", "archived"])
                    .await?;
                self.post_state(id, "start").await?;
                self.wait_for(id, &["started"]).await
            }
            "error" if dto.recoverable == Some(true) => {
                self.post_state(id, "recover").await?;
                self.wait_for(id, &["started"]).await
            }
            "error" | "build_failed" | "destroyed" | "destroying" => {
                Err(BackendError::Unavailable(format!(
                    "daytona sandbox {id} is {}{}",
                    dto.state(),
                    dto.error_reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )))
            }
            _ => self.wait_for(id, &["started"]).await,
        }
    }

    async fn open(&self, dto: SandboxDto) -> BackendResult<Arc<DaytonaSandbox>> {
        let proxy = match self.opts.toolbox_url.clone().filter(|u| !u.is_empty()) {
            Some(u) => u,
            None => match dto.toolbox_proxy_url.clone().filter(|u| !u.is_empty()) {
                Some(u) => u,
                None => {
                    let url = self.url(&format!("/sandbox/{}/toolbox-proxy-url", dto.id));
                    self.api.get_field(&url, "url").await?
                }
            },
        };
        let base = http::join_url(&proxy, &dto.id);
        let mut sb = DaytonaSandbox {
            id: dto.id.clone(),
            tb: self.api.clone(),
            base,
            workdir: String::new(),
            home: String::new(),
            env: self.opts.env.clone(),
            mode: self.opts.exec_mode,
            default_timeout: Duration::from_secs(self.opts.default_exec_timeout_secs.max(1)),
        };
        sb.home = sb.dir("/user-home-dir").await?;
        sb.workdir = match &self.opts.workdir {
            Some(w) if w.starts_with('/') => bpath::normalize(w),
            Some(w) => bpath::join(&sb.home, w),
            None => sb.dir("/work-dir").await?,
        };
        let sb = Arc::new(sb);
        remote::shell_mkdir(sb.as_ref(), &sb.workdir, true).await?;
        Ok(sb)
    }

    async fn sandbox_id(&self, workspace_id: &str) -> BackendResult<String> {
        let find = self.find(workspace_id);
        self.known.sandbox_id("Daytona", workspace_id, find).await
    }
}

#[async_trait]
impl Provisioner for DaytonaProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Daytona
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: true,
            // Daytona stops idle sandboxes by inactivity, which every
            // toolbox call resets; there is no expiry to push back.
            keep_alive: false,
            persistent: true,
        }
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let labels = remote::labels_for(&self.opts.labels, spec);
        let mut body = json!({"labels": labels, "public": false});
        if !self.opts.env.is_empty() {
            body["env"] = json!(self.opts.env);
        }
        if let Some(u) = &self.opts.user {
            body["user"] = json!(u);
        }
        if let Some(s) = &self.opts.snapshot {
            body["snapshot"] = json!(s);
        }
        if let Some(t) = http::option_or_env(&self.opts.target, "DAYTONA_TARGET") {
            body["target"] = json!(t);
        }
        if let Some(i) = self.opts.auto_stop_interval {
            body["autoStopInterval"] = json!(i);
        }
        let url = self.url("/sandbox");
        let dto: SandboxDto = self
            .api
            .json(Retry::RateLimitOnly, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await?;
        self.known.remember(&spec.workspace_id, &dto.id);
        let id = dto.id.clone();
        let opened = async {
            let dto = if dto.state() == "started" {
                dto
            } else {
                self.wait_for(&dto.id, &["started"]).await?
            };
            self.open(dto).await
        }
        .await;
        match opened {
            Ok(sb) => Ok(sb),
            Err(e) => {
                // A sandbox made just now holds no user data: remove it
                // rather than leak it (contract §11 point 16).
                let _ = self.api.delete(&self.url(&format!("/sandbox/{id}"))).await;
                self.known.forget(&spec.workspace_id);
                Err(e)
            }
        }
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        let listed = self
            .list_raw(Some((labels::WORKSPACE_ID, workspace_id)))
            .await?;
        let found = listed
            .iter()
            .map(|d| {
                let key = d
                    .last_activity_at
                    .clone()
                    .or(d.updated_at.clone())
                    .or(d.created_at.clone())
                    .unwrap_or_else(|| d.id.clone());
                (key, d.info())
            })
            // Unusable ones (error without recovery, destroyed) are left
            // out, as the reference does.
            .filter(|(_, i)| !matches!(i.state, SandboxState::Failed(_)));
        Ok(remote::newest("Daytona", workspace_id, found))
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let dto = self.ensure_started(&info.backend_id).await?;
        self.known.remember(&info.workspace_id, &dto.id);
        Ok(self.open(dto).await?)
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let r = async {
            let dto = self.get(&id).await?;
            match dto.state() {
                "stopped" | "archived" => return Ok(()),
                "stopping" => {}
                _ => {
                    let url = self.url(&format!("/sandbox/{id}/stop"));
                    self.api
                        .send_ok(Retry::Idempotent, On404::SandboxGone, |c| {
                            c.post(&url).query(&[("force", "false")])
                        })
                        .await?;
                }
            }
            self.wait_for(&id, &["stopped", "archived"])
                .await
                .map(|_| ())
        }
        .await;
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let r = self.ensure_started(&id).await.map(|_| ());
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let listed = self
            .list_raw(Some((labels::WORKSPACE_ID, workspace_id)))
            .await?;
        let ids = self
            .known
            .all_ids(workspace_id, listed.iter().map(SandboxDto::info));
        remote::delete_each(&self.api, ids, |id| self.url(&format!("/sandbox/{id}"))).await
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let listed = self.list_raw(None).await?;
        Ok(remote::workspaces(listed.iter().map(SandboxDto::info)))
    }
}

/// A live Daytona sandbox, reached through its toolbox.
pub struct DaytonaSandbox {
    id: String,
    tb: ServiceClient,
    base: String,
    workdir: String,
    home: String,
    env: BTreeMap<String, String>,
    mode: DaytonaExecMode,
    default_timeout: Duration,
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

/// Splits the followed log into stdout and stderr: data after
/// `\x01\x01\x01` is stdout, after `\x02\x02\x02` stderr. A tag may be
/// split across frames, so up to two trailing tag bytes wait for the next
/// frame.
#[derive(Debug)]
pub struct LogDemux {
    current: StreamKind,
    held: Vec<u8>,
}

impl Default for LogDemux {
    fn default() -> Self {
        LogDemux {
            current: StreamKind::Stdout,
            held: Vec::new(),
        }
    }
}

const STDOUT_TAG: &[u8] = b"\x01\x01\x01";
const STDERR_TAG: &[u8] = b"\x02\x02\x02";

impl LogDemux {
    /// Splits one frame into `(stream, bytes)` pieces.
    pub fn push(&mut self, frame: &[u8]) -> Vec<(StreamKind, Bytes)> {
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(frame);
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < data.len() {
            let tag = if data[i..].starts_with(STDOUT_TAG) {
                Some(StreamKind::Stdout)
            } else if data[i..].starts_with(STDERR_TAG) {
                Some(StreamKind::Stderr)
            } else {
                None
            };
            match tag {
                Some(kind) => {
                    if i > start {
                        out.push((self.current, Bytes::copy_from_slice(&data[start..i])));
                    }
                    self.current = kind;
                    i += 3;
                    start = i;
                }
                None => i += 1,
            }
        }
        // Hold back a possible partial tag at the end.
        let mut keep = 0;
        for n in (1..=2).rev() {
            if data.len() - start >= n {
                let tail = &data[data.len() - n..];
                if tail.iter().all(|b| *b == 1) || tail.iter().all(|b| *b == 2) {
                    keep = n;
                    break;
                }
            }
        }
        let end = data.len() - keep;
        if end > start {
            out.push((self.current, Bytes::copy_from_slice(&data[start..end])));
        }
        self.held = data[end..].to_vec();
        out
    }

    /// Whatever was held back, when the stream ends.
    pub fn finish(&mut self) -> Option<(StreamKind, Bytes)> {
        let held = std::mem::take(&mut self.held);
        (!held.is_empty()).then(|| (self.current, Bytes::from(held)))
    }
}

/// Counts delivered bytes per stream, to fill in from the stored log when
/// the live stream is cut.
#[derive(Default)]
struct Delivered {
    stdout: usize,
    stderr: usize,
}

impl DaytonaSandbox {
    /// The Daytona sandbox id.
    pub fn sandbox_id(&self) -> &str {
        &self.id
    }

    /// The OS user's home directory (the toolbox's `/user-home-dir`).
    pub fn home_dir(&self) -> &str {
        &self.home
    }

    fn url(&self, path: &str) -> String {
        http::join_url(&self.base, path)
    }

    fn resolve(&self, path: &str) -> String {
        bpath::join(&self.workdir, path)
    }

    async fn dir(&self, path: &str) -> BackendResult<String> {
        self.tb.get_field(&self.url(path), "dir").await
    }

    fn file_error(&self, status: u16, body: &[u8], path: &str) -> BackendError {
        let (code, message) = http::parse_error_body(body);
        let lower = message.to_ascii_lowercase();
        match (status, code.as_deref()) {
            (_, Some("FILE_NOT_FOUND")) => BackendError::NotFound(path.to_string()),
            // The proxy's 404 for a sandbox that no longer exists (the
            // toolbox's own 404s carry FILE_NOT_FOUND).
            (404, _) if lower.contains("sandbox") => BackendError::Unavailable(format!(
                "daytona sandbox {} is gone (404: {message})",
                self.id
            )),
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

    /// The shell text a session runs: `cd`, exports, then the user's line
    /// in its own `sh -c` with the marker variable and no stdin.
    fn session_command(&self, req: &ExecRequest, marker: &str) -> BackendResult<String> {
        let line = remote::command_line(&req.argv)?;
        let cwd = req
            .cwd
            .as_deref()
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut env = self.env.clone();
        env.extend(req.env.clone());
        Ok(format!(
            "cd -- {} && {{ {}{MARKER_VAR}={marker} /bin/sh -c {} </dev/null; }}",
            remote::shell_quote(&cwd),
            remote::env_prefix(&env)?,
            remote::shell_quote(&line)
        ))
    }

    /// Kills every process that carries `marker` (the whole tree of a
    /// command, even children that left its process group).
    async fn kill_marked(&self, marker: &str) {
        let script = remote::kill_marked_line(marker);
        let url = self.url("/process/execute");
        let body = json!({"command": format!("/bin/sh -c {}", remote::shell_quote(&script)), "timeout": 30});
        if let Err(e) = self
            .tb
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&body)
            })
            .await
        {
            tracing::warn!(sandbox = %self.id, error = %e, "killing a timed-out command failed");
        }
    }

    async fn delete_session(&self, sid: &str) {
        let url = self.url(&format!("/process/session/{sid}"));
        let _ = self
            .tb
            .send(Retry::Idempotent, false, |c| c.delete(&url))
            .await;
    }

    async fn command_exit(&self, sid: &str, cmd: &str) -> BackendResult<Option<i32>> {
        let url = self.url(&format!("/process/session/{sid}/command/{cmd}"));
        let v: Value = self
            .tb
            .json(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await?;
        Ok(v.get("exitCode")
            .and_then(Value::as_i64)
            .or_else(|| v.get("code").and_then(Value::as_i64))
            .map(|c| c as i32))
    }

    async fn wait_exit(&self, sid: &str, cmd: &str) -> BackendResult<Option<i32>> {
        let deadline = Instant::now() + EXIT_CODE_WAIT;
        let mut delay = Duration::from_millis(20);
        loop {
            if let Some(c) = self.command_exit(sid, cmd).await? {
                return Ok(Some(c));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    /// The stored log (no `follow`): `{stdout, stderr}` for new SDK
    /// versions.
    async fn stored_logs(&self, sid: &str, cmd: &str) -> BackendResult<(Vec<u8>, Vec<u8>)> {
        let url = self.url(&format!("/process/session/{sid}/command/{cmd}/logs"));
        let resp = self
            .tb
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await?;
        let body = resp
            .bytes()
            .await
            .map_err(|e| self.tb.transport_error(&e))?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) if v.is_object() => {
                let s = |k: &str| {
                    v.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .as_bytes()
                        .to_vec()
                };
                Ok((s("stdout"), s("stderr")))
            }
            // Plain text (an old toolbox): all of it as stdout.
            _ => Ok((body.to_vec(), Vec::new())),
        }
    }

    async fn exec_session(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let marker = remote::new_marker();
        let command = self.session_command(&req, &marker)?;
        let sid = format!("wsbench-{marker}");
        let url = self.url("/process/session");
        self.tb
            .send_ok(Retry::RateLimitOnly, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({"sessionId": sid}))
            })
            .await?;
        let result = self
            .run_in_session(&req, sink, &sid, &command, &marker, started)
            .await;
        self.delete_session(&sid).await;
        result
    }

    async fn run_in_session(
        &self,
        req: &ExecRequest,
        sink: Option<OutputSink>,
        sid: &str,
        command: &str,
        marker: &str,
        started: Instant,
    ) -> BackendResult<ExecOutcome> {
        let url = self.url(&format!("/process/session/{sid}/exec"));
        let v: Value = self
            .tb
            .json(Retry::RateLimitOnly, On404::SandboxGone, |c| {
                c.post(&url)
                    .json(&json!({"command": command, "runAsync": true, "async": true}))
            })
            .await?;
        let cmd = v
            .get("cmdId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                self.tb
                    .bad_response(format!("session exec answer without cmdId: {v}"))
            })?;
        let mut delivered = Delivered::default();
        let timeout = remote::sleep_until(req.timeout.map(|t| started + t));
        let cancel = remote::cancelled(req.cancel.as_ref());
        let follow = self.follow_logs(sid, &cmd, &sink, &mut delivered);
        let (mut timed_out, mut cancelled) = (false, false);
        let followed = tokio::select! {
            r = follow => Some(r),
            _ = timeout => { timed_out = true; None }
            _ = cancel => { cancelled = true; None }
        };
        if timed_out || cancelled {
            self.kill_marked(marker).await;
            self.delete_session(sid).await;
            return Ok(ExecOutcome {
                exit_code: Some(128 + 9),
                signal: Some(9),
                timed_out,
                cancelled,
                duration: started.elapsed(),
            });
        }
        let stream_ok = matches!(followed, Some(Ok(())));
        if let Some(Err(e)) = &followed {
            tracing::debug!(sandbox = %self.id, error = %e, "log stream failed; falling back to the stored log");
        }
        // The log stream closing does not mean the exit code is stored.
        let rest = req.timeout.map(|t| t.saturating_sub(started.elapsed()));
        let exit = match rest {
            Some(r) => match tokio::time::timeout(r, self.wait_exit(sid, &cmd)).await {
                Ok(x) => x?,
                Err(_) => {
                    self.kill_marked(marker).await;
                    return Ok(ExecOutcome {
                        exit_code: Some(128 + 9),
                        signal: Some(9),
                        timed_out: true,
                        cancelled: false,
                        duration: started.elapsed(),
                    });
                }
            },
            None => self.wait_exit(sid, &cmd).await?,
        };
        // After a cut stream (or when nothing arrived), fill in from the
        // stored log what was not delivered live.
        if !stream_ok || (delivered.stdout == 0 && delivered.stderr == 0) {
            let (out, err) = self.stored_logs(sid, &cmd).await?;
            if let Some(s) = &sink {
                for (kind, all, done) in [
                    (StreamKind::Stdout, &out, delivered.stdout),
                    (StreamKind::Stderr, &err, delivered.stderr),
                ] {
                    if all.len() > done {
                        let _ = s
                            .send(OutputChunk {
                                stream: kind,
                                data: Bytes::copy_from_slice(&all[done..]),
                            })
                            .await;
                    }
                }
            }
            delivered.stdout = delivered.stdout.max(out.len());
            delivered.stderr = delivered.stderr.max(err.len());
        }
        if exit == Some(-1) && delivered.stdout == 0 && delivered.stderr == 0 {
            return Err(not_started(&req.argv));
        }
        let exit = exit.ok_or_else(|| BackendError::Remote {
            service: SERVICE,
            status: None,
            code: Some("no_exit_code".into()),
            message: format!(
                "command {cmd} produced no exit code within {}s after its log ended",
                EXIT_CODE_WAIT.as_secs()
            ),
        })?;
        Ok(ExecOutcome {
            exit_code: Some(exit),
            signal: None,
            timed_out: false,
            cancelled: false,
            duration: started.elapsed(),
        })
    }

    /// Follows the command's log over a WebSocket until a normal close.
    async fn follow_logs(
        &self,
        sid: &str,
        cmd: &str,
        sink: &Option<OutputSink>,
        delivered: &mut Delivered,
    ) -> BackendResult<()> {
        use tokio_tungstenite::tungstenite::Message;
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let http_url = self.url(&format!(
            "/process/session/{sid}/command/{cmd}/logs?follow=true"
        ));
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
            code: Some("log_stream".into()),
            message: format!("log stream: {e}"),
        };
        let mut request = ws_url
            .as_str()
            .into_client_request()
            .map_err(|e| ws_err(&e))?;
        for (k, v) in self.tb.headers() {
            request.headers_mut().insert(k.clone(), v.clone());
        }
        http::ensure_crypto_provider();
        let (mut ws, _) = tokio::time::timeout(
            self.tb.policy().request_timeout,
            tokio_tungstenite::connect_async(request),
        )
        .await
        .map_err(|_| ws_err(&"timed out opening the log stream"))?
        .map_err(|e| match &e {
            tokio_tungstenite::tungstenite::Error::Http(resp) if resp.status().as_u16() == 404 => {
                BackendError::Unavailable(format!(
                    "daytona sandbox {} or its session is gone (log stream 404)",
                    self.id
                ))
            }
            _ => ws_err(&e),
        })?;
        let mut demux = LogDemux::default();
        let emit = |pieces: Vec<(StreamKind, Bytes)>, delivered: &mut Delivered| {
            let sink = sink.clone();
            let mut chunks = Vec::new();
            for (kind, data) in pieces {
                match kind {
                    StreamKind::Stdout => delivered.stdout += data.len(),
                    StreamKind::Stderr => delivered.stderr += data.len(),
                }
                chunks.push(OutputChunk { stream: kind, data });
            }
            async move {
                if let Some(s) = sink {
                    for c in chunks {
                        let _ = s.send(c).await;
                    }
                }
            }
        };
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(b))) => emit(demux.push(&b), delivered).await,
                Some(Ok(Message::Text(t))) => emit(demux.push(t.as_bytes()), delivered).await,
                Some(Ok(Message::Ping(p))) => {
                    let _ = ws.send(Message::Pong(p)).await;
                }
                Some(Ok(Message::Close(frame))) => {
                    if let Some(rest) = demux.finish() {
                        emit(vec![rest], delivered).await;
                    }
                    let normal = frame.as_ref().is_none_or(|f| u16::from(f.code) == 1000);
                    return if normal {
                        Ok(())
                    } else {
                        Err(ws_err(&format!("closed with {frame:?}")))
                    };
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(ws_err(&e)),
                None => return Err(ws_err(&"ended without a close frame")),
            }
        }
    }

    async fn exec_execute(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let line = remote::command_line(&req.argv)?;
        let cwd = req
            .cwd
            .as_deref()
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut env = self.env.clone();
        env.extend(req.env.clone());
        let limit = req.timeout.unwrap_or(self.default_timeout);
        // Whole seconds, rounded up, and always sent (never the daemon's
        // hidden 10 s default).
        let secs = limit.as_millis().div_ceil(1000).max(1) as u64;
        let body = json!({
            "command": format!("/bin/sh -c {}", remote::shell_quote(&line)),
            "cwd": cwd,
            "timeout": secs,
            "envs": env,
        });
        let url = self.url("/process/execute");
        let call = self.tb.send(Retry::RateLimitOnly, true, |c| {
            c.post(&url)
                .json(&body)
                .timeout(limit + Duration::from_secs(30))
        });
        let cancel = remote::cancelled(req.cancel.as_ref());
        let resp = tokio::select! {
            r = call => r?,
            _ = cancel => {
                return Ok(ExecOutcome {
                    exit_code: None,
                    signal: None,
                    timed_out: false,
                    cancelled: true,
                    duration: started.elapsed(),
                });
            }
        };
        let status = resp.status().as_u16();
        if status == 408 {
            return Ok(ExecOutcome {
                exit_code: Some(128 + 9),
                signal: Some(9),
                timed_out: true,
                cancelled: false,
                duration: started.elapsed(),
            });
        }
        let resp = self.tb.check(resp, On404::SandboxGone).await?;
        let v: Value = self.tb.decode(resp).await?;
        let exit = v
            .get("exitCode")
            .and_then(Value::as_i64)
            .or_else(|| v.get("code").and_then(Value::as_i64))
            .map(|c| c as i32);
        let result = v.get("result").and_then(Value::as_str).unwrap_or("");
        if exit == Some(-1) && result.is_empty() {
            return Err(not_started(&req.argv));
        }
        if let Some(s) = &sink
            && !result.is_empty()
        {
            let _ = s
                .send(OutputChunk {
                    stream: StreamKind::Stdout,
                    data: Bytes::copy_from_slice(result.as_bytes()),
                })
                .await;
        }
        Ok(ExecOutcome {
            exit_code: exit,
            signal: None,
            timed_out: false,
            cancelled: false,
            duration: started.elapsed(),
        })
    }

    /// `GET <toolbox>/<endpoint>?path=`, its error status mapped onto a
    /// file error.
    async fn get_file(&self, endpoint: &str, path: &str) -> BackendResult<reqwest::Response> {
        let url = self.url(endpoint);
        let resp = self
            .tb
            .send(Retry::Idempotent, false, |c| {
                c.get(&url).query(&[("path", path)])
            })
            .await?;
        self.tb
            .check_with(resp, |status, body| self.file_error(status, body, path))
            .await
    }
}

fn not_started(argv: &[String]) -> BackendError {
    BackendError::Spawn {
        program: remote::command_line(argv).unwrap_or_default(),
        reason: "the command could not be started (Daytona returned exit code -1 and no output)"
            .into(),
    }
}

/// Parses a `FileInfo` (`isDir`, `size`, `permissions` like `0644` or
/// `mode` like `-rw-r--r--`, `modifiedAt`).
fn file_stat(v: &Value) -> FileStat {
    let is_dir = v.get("isDir").and_then(Value::as_bool).unwrap_or(false);
    let mode_text = v.get("mode").and_then(Value::as_str).unwrap_or("");
    let symlink = mode_text.starts_with('L') || mode_text.starts_with('l');
    let mode = v
        .get("permissions")
        .and_then(Value::as_str)
        .and_then(|p| u32::from_str_radix(p.trim_start_matches("0o"), 8).ok())
        .or_else(|| rwx_bits(mode_text));
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_default();
    FileStat {
        name,
        kind: if is_dir {
            FileKind::Dir
        } else if symlink {
            FileKind::Symlink
        } else {
            FileKind::File
        },
        size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
        modified: v
            .get("modifiedAt")
            .and_then(Value::as_str)
            .and_then(http::parse_time),
        link_target: None,
        target_is_dir: false,
        mode: mode.map(|m| m & 0o7777),
    }
}

/// `-rw-r--r--` → `0o644` (the last nine characters).
fn rwx_bits(s: &str) -> Option<u32> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 9 {
        return None;
    }
    let tail = &chars[chars.len() - 9..];
    let mut m = 0u32;
    for (i, c) in tail.iter().enumerate() {
        let bit = 1 << (8 - i);
        match c {
            '-' => {}
            'r' | 'w' | 'x' | 's' | 't' => m |= bit,
            'S' | 'T' => {}
            _ => return None,
        }
    }
    Some(m)
}

#[async_trait]
impl RemoteSandbox for DaytonaSandbox {
    const KIND: BackendKind = BackendKind::Daytona;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exec_stdin: false,
            byte_exact_output: self.mode == DaytonaExecMode::Session,
            kill_on_timeout: self.mode == DaytonaExecMode::Session,
            processes: false,
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
        match self.mode {
            DaytonaExecMode::Session => self.exec_session(req, sink).await,
            DaytonaExecMode::Execute => self.exec_execute(req, sink).await,
        }
    }

    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let resp = self.get_file("/files/download", path).await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.tb.transport_error(&e))?;
        Ok(remote::slice_range(&bytes, range))
    }

    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()> {
        let url = self.url("/files/upload-v2");
        let len = data.len() as u64;
        let resp = self
            .tb
            .send(Retry::Idempotent, true, |c| {
                let part = reqwest::multipart::Part::stream_with_length(
                    reqwest::Body::from(data.clone()),
                    len,
                )
                .file_name(path.to_string())
                .mime_str("application/octet-stream")
                .expect("static mime");
                c.post(&url)
                    .query(&[("path", path)])
                    .multipart(reqwest::multipart::Form::new().part("file", part))
                    .timeout(UPLOAD_TIMEOUT)
            })
            .await?;
        self.tb
            .check_with(resp, |status, body| self.file_error(status, body, path))
            .await
            .map(|_| ())
    }

    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let resp = self.get_file("/files", path).await?;
        let items: Vec<Value> = self.tb.decode(resp).await?;
        Ok(items.iter().map(file_stat).collect())
    }

    async fn stat_path(&self, path: &str) -> BackendResult<FileStat> {
        let resp = self.get_file("/files/info", path).await?;
        let v: Value = self.tb.decode(resp).await?;
        Ok(file_stat(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demux_handles_tags_split_across_frames() {
        let wire = b"\x01\x01\x01out \xc3\xa9\x02\x02\x02err\x01\x01\x01more";
        for a in 0..wire.len() {
            for b in a..wire.len() {
                let mut d = LogDemux::default();
                let mut out = Vec::new();
                let mut err = Vec::new();
                for frame in [&wire[..a], &wire[a..b], &wire[b..]] {
                    for (k, data) in d.push(frame) {
                        match k {
                            StreamKind::Stdout => out.extend_from_slice(&data),
                            StreamKind::Stderr => err.extend_from_slice(&data),
                        }
                    }
                }
                assert!(d.finish().is_none());
                assert_eq!(out, "out émore".as_bytes(), "cut at {a},{b}");
                assert_eq!(err, b"err", "cut at {a},{b}");
            }
        }
    }

    #[test]
    fn file_info_modes() {
        assert_eq!(rwx_bits("-rw-r--r--"), Some(0o644));
        assert_eq!(rwx_bits("drwxr-xr-x"), Some(0o755));
        let st = file_stat(
            &json!({"name": "a", "isDir": false, "size": 3, "mode": "-rw-------", "permissions": "0600", "modifiedAt": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(
            (st.kind, st.size, st.mode),
            (FileKind::File, 3, Some(0o600))
        );
        assert!(st.modified.is_some());
    }

    #[test]
    fn options_reject_unknown_and_parse_mode() {
        let o: DaytonaOptions = serde_json::from_value(json!({"exec_mode": "execute"})).unwrap();
        assert_eq!(o.exec_mode, DaytonaExecMode::Execute);
        assert!(serde_json::from_value::<DaytonaOptions>(json!({"label": {}})).is_err());
    }
}
