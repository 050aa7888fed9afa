//! The Daytona REST API (`daytona/api/openapi.yaml`) as a
//! [`CloudService`]: list (`GET /sandbox`, paged by cursor), create,
//! start, stop, recover and delete, and the state machine that brings a
//! sandbox to `started` from wherever it is.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::options::DaytonaOptions;
use super::sandbox::DaytonaSandbox;
use super::{SDK_VERSION, SERVICE};
use crate::backend::cloud;
use crate::backend::cloud::{
    CloudProvisioner, CloudService, Listed, Page, StateCheck, labels_for, wait_for_state,
};
use crate::backend::http::{self, HttpPolicy, On404, Retry, ServiceClient};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ProvisionSpec, ProvisionerCapabilities, Sandbox,
    SandboxInfo, SandboxState, labels, path as bpath,
};

/// `Sandbox` / `SandboxListItem` of the API.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDto {
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

/// Makes, finds, starts, stops and deletes Daytona sandboxes: the generic
/// cloud flow over [`DaytonaService`].
pub type DaytonaProvisioner = CloudProvisioner<DaytonaService>;

/// The Daytona REST API: its client and the profile's options.
#[derive(Debug)]
pub struct DaytonaService {
    opts: DaytonaOptions,
    api: ServiceClient,
}

impl DaytonaService {
    fn url(&self, path: &str) -> String {
        http::join_url(&self.opts.api_url(), path)
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
        wait_for_state(
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
    /// (docs/contract.md §7.5 "normalise").
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
            // A failed or destroyed sandbox never runs again: gone.
            "error" | "build_failed" | "destroyed" | "destroying" => {
                Err(BackendError::gone(format!(
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
}

#[async_trait]
impl CloudService for DaytonaService {
    const KIND: BackendKind = BackendKind::Daytona;
    const NAME: &'static str = "Daytona";
    const CAPABILITIES: ProvisionerCapabilities = ProvisionerCapabilities {
        suspend: true,
        // Daytona stops a sandbox after `autoStopInterval` minutes of
        // inactivity. A long command makes no toolbox calls while it
        // runs, so the keep-alive reports activity
        // (`POST /sandbox/{id}/last-activity`, docs/specs/keep-alive.md).
        keep_alive: true,
        persistent: true,
    };

    /// The last activity, else the last update, else the creation time
    /// (RFC 3339 text, which sorts as time), else the id.
    type Order = String;
    type Record = SandboxDto;
    type Options = DaytonaOptions;

    /// The API for `opts`.
    ///
    /// Errors: no API key in the options or `DAYTONA_API_KEY`.
    fn new(opts: DaytonaOptions) -> BackendResult<Self> {
        let policy = HttpPolicy::with_limits(opts.request_timeout_secs, opts.max_retries);
        let org = http::option_or_env(&opts.organization_id, "DAYTONA_ORGANIZATION_ID");
        let (api, _) = ServiceClient::with_api_key(
            SERVICE,
            opts.api_key.as_ref(),
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
                let bearer = format!("Bearer {}", key.expose());
                http::auth_headers(("authorization", &bearer), &plain)
            },
        )?;
        Ok(DaytonaService { opts, api })
    }

    fn api_url(&self) -> String {
        self.opts.api_url()
    }

    fn record_id(record: &SandboxDto) -> &str {
        &record.id
    }

    /// Unusable ones (error without recovery, destroyed) are left out, as
    /// the reference does.
    fn findable(info: &SandboxInfo) -> bool {
        !matches!(info.state, SandboxState::Failed(_))
    }

    /// Sandboxes in any state a workspace's can be found in, 100 a page.
    async fn list_page(
        &self,
        workspace_id: Option<&str>,
        cursor: Option<&str>,
    ) -> BackendResult<Page<String>> {
        let labels = workspace_id.map(|w| {
            let mut m = serde_json::Map::new();
            m.insert(labels::WORKSPACE_ID.to_string(), json!(w));
            Value::Object(m).to_string()
        });
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
                if let Some(cur) = cursor {
                    q.push(("cursor", cur.to_string()));
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
        let items = items
            .iter()
            .map(|d| Listed {
                order: d
                    .last_activity_at
                    .clone()
                    .or(d.updated_at.clone())
                    .or(d.created_at.clone())
                    .unwrap_or_else(|| d.id.clone()),
                info: d.info(),
            })
            .collect();
        Ok(Page { items, next })
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<SandboxDto> {
        let labels = labels_for(&self.opts.labels, spec);
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
        self.api
            .json(Retry::RateLimitOnly, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await
    }

    async fn wait_running(&self, dto: SandboxDto) -> BackendResult<SandboxDto> {
        if dto.state() == "started" {
            return Ok(dto);
        }
        self.wait_for(&dto.id, &["started"]).await
    }

    async fn wake(&self, id: &str) -> BackendResult<SandboxDto> {
        self.ensure_started(id).await
    }

    async fn connect(&self, dto: SandboxDto) -> BackendResult<Arc<dyn Sandbox>> {
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
        cloud::shell_mkdir(sb.as_ref(), &sb.workdir, true).await?;
        Ok(sb)
    }

    /// Resets the inactivity timer (`POST /sandbox/{id}/last-activity`
    /// with `{"activityType": "toolbox"}`, answered 201;
    /// docs/specs/keep-alive.md): Daytona has no expiry to set, so `ttl`
    /// is not sent; renewing at a third of the manager's keep-alive
    /// keeps any `autoStopInterval` of a minute or more from firing
    /// while work is in progress.
    ///
    /// Errors: as for [`CloudService::wake`]; a 404 means the sandbox is
    /// gone.
    async fn renew(&self, id: &str, _ttl: Duration) -> BackendResult<()> {
        let url = self.url(&format!("/sandbox/{id}/last-activity"));
        self.api
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({ "activityType": "toolbox" }))
            })
            .await
            .map(|_| ())
    }

    async fn pause(&self, id: &str) -> BackendResult<()> {
        let dto = self.get(id).await?;
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
        self.wait_for(id, &["stopped", "archived"])
            .await
            .map(|_| ())
    }

    async fn resume(&self, id: &str) -> BackendResult<()> {
        self.ensure_started(id).await.map(|_| ())
    }

    async fn delete(&self, id: &str) -> BackendResult<()> {
        self.api
            .delete(&self.url(&format!("/sandbox/{id}")))
            .await
            .map(|_| ())
    }
}
