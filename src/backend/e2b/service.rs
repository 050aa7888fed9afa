//! The E2B control plane (`e2b/openapi.yml`) as a [`CloudService`]:
//! list (`GET /v2/sandboxes`, paged by `x-next-token`), create, connect
//! (which resumes and renews), pause and kill.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::SERVICE;
use super::options::E2bOptions;
use super::sandbox::E2bSandbox;
use crate::backend::cloud;
use crate::backend::cloud::{
    CloudProvisioner, CloudService, Listed, Page, labels_for, workspace_filter,
};
use crate::backend::http::{self, HttpPolicy, On404, Retry, ServiceClient};
use crate::backend::{
    BackendKind, BackendResult, ProvisionSpec, ProvisionerCapabilities, Sandbox, SandboxInfo,
    SandboxState, labels,
};

/// The control plane's `Sandbox` (create/connect answer).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDto {
    #[serde(rename = "sandboxID")]
    pub(super) sandbox_id: String,
    #[serde(default)]
    pub(super) envd_version: Option<String>,
    #[serde(default)]
    pub(super) envd_access_token: Option<String>,
    #[serde(default)]
    pub(super) domain: Option<String>,
}

/// One row of `GET /v2/sandboxes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedDto {
    #[serde(rename = "sandboxID")]
    pub(super) sandbox_id: String,
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

/// Makes, finds, pauses and kills E2B sandboxes: the generic cloud flow
/// over [`E2bService`].
pub type E2bProvisioner = CloudProvisioner<E2bService>;

/// The E2B control plane: its client and the profile's options.
#[derive(Debug)]
pub struct E2bService {
    opts: E2bOptions,
    api: ServiceClient,
}

impl E2bService {
    fn url(&self, path: &str) -> String {
        http::join_url(&self.opts.api_url(), path)
    }

    /// `POST /sandboxes/{id}/connect`: resumes a paused sandbox and pushes
    /// its expiry to at least `timeout` from now.
    async fn connect_for(&self, sandbox_id: &str, timeout: Duration) -> BackendResult<SandboxDto> {
        let url = self.url(&format!("/sandboxes/{sandbox_id}/connect"));
        let secs = timeout.as_secs().max(1);
        self.api
            .json(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({ "timeout": secs }))
            })
            .await
    }

    /// The provider lifetime of the profile.
    fn lifetime(&self) -> Duration {
        Duration::from_secs(self.opts.timeout_secs)
    }
}

#[async_trait]
impl CloudService for E2bService {
    const KIND: BackendKind = BackendKind::E2b;
    const NAME: &'static str = "E2B";
    const CAPABILITIES: ProvisionerCapabilities = ProvisionerCapabilities {
        suspend: true,
        keep_alive: true,
        persistent: true,
    };

    type Order = Option<std::time::SystemTime>;
    type Record = SandboxDto;
    type Options = E2bOptions;

    /// The control plane for `opts`.
    ///
    /// Errors: no API key in the options or `E2B_API_KEY`.
    fn new(opts: E2bOptions) -> BackendResult<Self> {
        let policy = HttpPolicy::with_limits(opts.request_timeout_secs, opts.max_retries);
        let (api, _) = ServiceClient::with_api_key(
            SERVICE,
            opts.api_key.as_ref(),
            "E2B_API_KEY",
            policy,
            |key| http::auth_headers(("x-api-key", key.expose()), &[]),
        )?;
        Ok(E2bService { opts, api })
    }

    fn api_url(&self) -> String {
        self.opts.api_url()
    }

    fn record_id(record: &SandboxDto) -> &str {
        &record.sandbox_id
    }

    /// Sandboxes in state running or paused, 100 a page.
    async fn list_page(
        &self,
        workspace_id: Option<&str>,
        cursor: Option<&str>,
    ) -> BackendResult<Page<Self::Order>> {
        let metadata = http::metadata_query(&workspace_filter(workspace_id));
        let url = self.url("/v2/sandboxes");
        let resp = self
            .api
            .send_ok(Retry::Idempotent, On404::Remote, |c| {
                let mut q: Vec<(&str, String)> =
                    vec![("state", "running,paused".into()), ("limit", "100".into())];
                if !metadata.is_empty() {
                    q.push(("metadata", metadata.clone()));
                }
                if let Some(t) = cursor {
                    q.push(("nextToken", t.to_string()));
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
        let items = page.iter().map(|d| Listed::by_creation(d.info())).collect();
        Ok(Page { items, next })
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<SandboxDto> {
        let metadata = labels_for(&self.opts.metadata, spec);
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
        self.api
            .json(Retry::RateLimitOnly, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await
    }

    async fn wake(&self, id: &str) -> BackendResult<SandboxDto> {
        self.connect_for(id, self.lifetime()).await
    }

    async fn connect(&self, dto: SandboxDto) -> BackendResult<Arc<dyn Sandbox>> {
        let sb = Arc::new(E2bSandbox::new(&self.opts, &self.api, dto)?);
        // 502 from the proxy: envd not routable yet (per the SDK).
        let limit = Duration::from_secs(self.opts.ready_timeout_secs);
        let what = format!("envd of e2b sandbox {}", sb.sandbox_id());
        sb.envd
            .wait_ready(&sb.url("/health"), Instant::now() + limit, &what, true)
            .await?;
        cloud::shell_mkdir(sb.as_ref(), &self.opts.workdir, true).await?;
        Ok(sb)
    }

    async fn pause(&self, id: &str) -> BackendResult<()> {
        let url = self.url(&format!("/sandboxes/{id}/pause"));
        let resp = self
            .api
            .send(Retry::Idempotent, false, |c| c.post(&url).json(&json!({})))
            .await?;
        // 409: already paused — the goal is reached.
        if resp.status().as_u16() == 409 {
            return Ok(());
        }
        self.api.check(resp, On404::SandboxGone).await.map(|_| ())
    }

    async fn resume(&self, id: &str) -> BackendResult<()> {
        self.connect_for(id, self.lifetime()).await.map(|_| ())
    }

    async fn renew(&self, id: &str, ttl: Duration) -> BackendResult<()> {
        // connect only ever extends the expiry (openapi.yml ConnectSandbox).
        self.connect_for(id, ttl).await.map(|_| ())
    }

    async fn delete(&self, id: &str) -> BackendResult<()> {
        self.api
            .delete(&self.url(&format!("/sandboxes/{id}")))
            .await
            .map(|_| ())
    }
}
