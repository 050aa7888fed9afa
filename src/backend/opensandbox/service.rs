//! The OpenSandbox lifecycle server (`opensandbox/sandbox-lifecycle.yml`)
//! as a [`CloudService`]: list (paged), create, pause, resume, renew and
//! delete, and where each sandbox's execd listens.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::options::OpenSandboxOptions;
use super::sandbox::OpenSandboxSandbox;
use super::{EXECD_PORT, SERVICE};
use crate::backend::cloud;
use crate::backend::cloud::{
    CloudProvisioner, CloudService, Listed, Page, StateCheck, labels_for, wait_for_state,
    workspace_filter,
};
use crate::backend::http::{self, HttpPolicy, On404, Retry, ServiceClient};
use crate::backend::secret::Secret;
use crate::backend::{
    BackendError, BackendKind, BackendResult, ProvisionSpec, ProvisionerCapabilities, Sandbox,
    SandboxInfo, SandboxState, labels, path as bpath,
};

/// States a workspace's sandbox can be found in (everything not ended).
const LIVE_STATES: [&str; 5] = ["Pending", "Running", "Pausing", "Paused", "Resuming"];

/// `Sandbox` of the lifecycle API.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDto {
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

/// Makes, finds, pauses, resumes and deletes OpenSandbox sandboxes: the
/// generic cloud flow over [`OpenSandboxService`].
pub type OpenSandboxProvisioner = CloudProvisioner<OpenSandboxService>;

/// The OpenSandbox lifecycle server: its client, the key (its proxy to
/// execd wants it again) and the profile's options.
#[derive(Debug)]
pub struct OpenSandboxService {
    opts: OpenSandboxOptions,
    api: ServiceClient,
    key: Option<Secret>,
}

impl OpenSandboxService {
    fn url(&self, path: &str) -> String {
        http::join_url(&self.opts.api_url(), path)
    }

    async fn get(&self, id: &str) -> BackendResult<SandboxDto> {
        let url = self.url(&format!("/sandboxes/{id}"));
        self.api
            .json(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await
    }

    /// Polls until the sandbox is in `want`; fails on a terminal state.
    async fn wait_state(&self, id: &str, want: &str) -> BackendResult<()> {
        wait_for_state(
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

    /// Looks up execd's endpoint (retrying until it is published), then
    /// polls `/ping`.
    async fn open(&self, id: &str) -> BackendResult<Arc<dyn Sandbox>> {
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
                Err(e @ BackendError::Unavailable { .. }) => return Err(e),
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
            headers.insert("open-sandbox-api-key", http::secret_header(key.expose())?);
        }
        if let Some(t) = &self.opts.execd_access_token {
            headers.insert("x-execd-access-token", http::secret_header(t.expose())?);
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
        cloud::shell_mkdir(sb.as_ref(), &sb.workdir, true).await?;
        Ok(sb)
    }
}

#[async_trait]
impl CloudService for OpenSandboxService {
    const KIND: BackendKind = BackendKind::Opensandbox;
    const NAME: &'static str = "OpenSandbox";
    const CAPABILITIES: ProvisionerCapabilities = ProvisionerCapabilities {
        suspend: true,
        keep_alive: true,
        persistent: true,
    };

    type Order = Option<SystemTime>;
    type Record = SandboxDto;
    type Options = OpenSandboxOptions;

    /// The lifecycle server for `opts`.
    ///
    /// The lifecycle spec requires the key header, but the server checks
    /// it only when it was configured with a key; so a missing key is not
    /// an error here (see [`OpenSandboxOptions::api_key`]).
    ///
    /// Errors: a key that cannot be a header; the TLS stack cannot be set
    /// up.
    fn new(opts: OpenSandboxOptions) -> BackendResult<Self> {
        let policy = HttpPolicy::with_limits(opts.request_timeout_secs, opts.max_retries);
        let key = opts
            .api_key
            .as_ref()
            .filter(|k| !k.expose().is_empty())
            .map(|k| k.expose().to_string())
            .or_else(|| {
                std::env::var("OPEN_SANDBOX_API_KEY")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .map(|k| Secret::new(k.trim()))
            .filter(|k| !k.is_blank());
        let headers = match &key {
            Some(k) => http::auth_headers(("open-sandbox-api-key", k.expose()), &[])?,
            None => HeaderMap::new(),
        };
        let api = ServiceClient::new(
            SERVICE,
            headers,
            policy,
            "check OPEN_SANDBOX_API_KEY or `api_key` in the profile",
        )?;
        Ok(OpenSandboxService { opts, api, key })
    }

    fn api_url(&self) -> String {
        self.opts.api_url()
    }

    fn record_id(record: &SandboxDto) -> &str {
        &record.id
    }

    /// Sandboxes in a live state, 50 a page; the cursor is the page
    /// number (at most 10,000 pages).
    async fn list_page(
        &self,
        workspace_id: Option<&str>,
        cursor: Option<&str>,
    ) -> BackendResult<Page<Self::Order>> {
        let metadata = http::metadata_query(&workspace_filter(workspace_id));
        let page: u32 = cursor.and_then(|c| c.parse().ok()).unwrap_or(1);
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
        let next = (more && page < 10_000).then(|| (page + 1).to_string());
        let items = items
            .iter()
            .map(|d| Listed::by_creation(d.info()))
            .collect();
        Ok(Page { items, next })
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<SandboxDto> {
        let metadata = labels_for(&self.opts.metadata, spec);
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
        self.api
            .json(Retry::RateLimitOnly, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await
    }

    async fn wait_running(&self, dto: SandboxDto) -> BackendResult<SandboxDto> {
        if dto.state_name() != "Running" {
            self.wait_state(&dto.id, "Running").await?;
        }
        Ok(dto)
    }

    async fn wake(&self, id: &str) -> BackendResult<SandboxDto> {
        let dto = self.get(id).await?;
        match dto.state_name() {
            "Running" => {}
            "Paused" | "Pausing" => {
                if dto.state_name() == "Pausing" {
                    self.wait_state(id, "Paused").await?;
                }
                self.transition(id, "resume", "Running").await?;
            }
            "Pending" | "Resuming" => self.wait_state(id, "Running").await?,
            // Failed, Terminated, Deleting: it never runs again.
            s => {
                return Err(BackendError::gone(format!(
                    "opensandbox sandbox {id} is {s}; it cannot be attached"
                )));
            }
        }
        Ok(dto)
    }

    async fn connect(&self, dto: SandboxDto) -> BackendResult<Arc<dyn Sandbox>> {
        self.open(&dto.id).await
    }

    async fn pause(&self, id: &str) -> BackendResult<()> {
        self.transition(id, "pause", "Paused").await
    }

    async fn resume(&self, id: &str) -> BackendResult<()> {
        self.transition(id, "resume", "Running").await
    }

    async fn renew(&self, id: &str, ttl: Duration) -> BackendResult<()> {
        // Whole seconds, rounded up: truncating could put a short
        // renewal in the past (the service answers 400).
        let until = chrono::DateTime::<chrono::Utc>::from(SystemTime::now() + ttl)
            .checked_add_signed(chrono::TimeDelta::milliseconds(999))
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let url = self.url(&format!("/sandboxes/{id}/renew-expiration"));
        self.api
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({ "expiresAt": until }))
            })
            .await
            .map(|_| ())
    }

    async fn delete(&self, id: &str) -> BackendResult<()> {
        self.api
            .delete(&self.url(&format!("/sandboxes/{id}")))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            p.service()
                .api
                .headers()
                .get("open-sandbox-api-key")
                .is_none()
        );
        let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
            api_key: Some(" k ".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(
            p.service()
                .api
                .headers()
                .get("open-sandbox-api-key")
                .is_some()
        );
    }
}
