//! [`DockerProvisioner`]: containers (and volumes) per workspace: create, find by label, suspend, resume, destroy.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt;
use tokio::sync::OnceCell;

use super::api::{api_error, connect, is_status};
use super::events::{DockerEvent, EventSink, emit};
use super::exec::ExecTarget;
use super::files::ContainerFiles;
use super::options::{
    CONTAINER_WORKDIR, DockerOptions, LABEL_HOST_DIR, LABEL_STORAGE, LABEL_USER, LABEL_VOLUME,
    PullPolicy, Storage, SuspendMode, default_base_dir, parse_memory,
};
use super::sandbox::DockerSandbox;
use crate::backend::host::{HostDir, sanitize_segment};
use crate::backend::{
    BackendError, BackendKind, BackendResult, NoticeSink, ProvisionSpec, Provisioner,
    ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, labels,
};

/// The real uid and gid of this process: the owner of what `/proc/self`
/// shows (no `unsafe` needed).
pub(super) fn host_ids() -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/self").ok()?;
    Some((m.uid(), m.gid()))
}

/// How long `attach` waits for a listed container to answer an inspect;
/// short: a removed one answers 404 for good and recovery should not wait.
const ATTACH_WAIT: Duration = Duration::from_secs(5);

/// How long `find` waits for a container the daemon is removing to be
/// gone (see [`DockerProvisioner::find`]).
const REMOVAL_WAIT: Duration = Duration::from_secs(15);

/// Provisions one container per workspace; finds them again by label.
pub struct DockerProvisioner {
    pub(super) opts: DockerOptions,
    pub(super) profile: Option<String>,
    pub(super) events: Option<EventSink>,
    pub(super) notices: crate::backend::NoticeSlot,
    pub(super) layout: Box<dyn Fn(&ProvisionSpec) -> PathBuf + Send + Sync>,
    pub(super) client: OnceCell<Docker>,
}

impl std::fmt::Debug for DockerProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerProvisioner")
            .field("opts", &self.opts)
            .field("profile", &self.profile)
            .finish()
    }
}

impl DockerProvisioner {
    /// A provisioner with `opts` (the built-in `docker` profile passes
    /// `DockerOptions::default()`). Connects to the daemon lazily, on the
    /// first call that needs it. Host directories go to
    /// `<base_dir>/<sanitised id>`.
    pub fn new(opts: DockerOptions) -> Self {
        let base = opts.base_dir.clone().unwrap_or_else(default_base_dir);
        DockerProvisioner {
            opts,
            profile: None,
            events: None,
            notices: crate::backend::NoticeSlot::default(),
            layout: Box::new(move |spec| base.join(sanitize_segment(&spec.workspace_id))),
            client: OnceCell::new(),
        }
    }

    /// Scopes the provisioner to profile `name`: containers get the
    /// [`labels::PROFILE`] label and a name containing the profile, and
    /// find/list only see that profile's containers.
    pub fn with_profile(mut self, name: impl Into<String>) -> Self {
        self.profile = Some(name.into());
        self
    }

    /// Sends [`DockerEvent`]s to `sink` (besides the notice sink the
    /// manager sets, see [`Provisioner::set_notice_sink`]).
    pub fn with_events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// The sink for one workspace's events: the [`with_events`] sink and
    /// the notice sink (as [`BackendNotice`]s carrying `workspace_id`).
    /// `None` when neither is set.
    ///
    /// [`with_events`]: DockerProvisioner::with_events
    pub(super) fn sink_for(&self, workspace_id: &str) -> Option<EventSink> {
        self.notices
            .sink_for(self.events.clone(), workspace_id, DockerEvent::notice)
    }

    /// Reports `res`'s error, if any, as a [`DockerEvent::Problem`] of
    /// `action`, and passes `res` on.
    pub(super) fn reported<T>(
        sink: &Option<EventSink>,
        action: &str,
        res: BackendResult<T>,
    ) -> BackendResult<T> {
        if let Err(e) = &res {
            emit(
                sink,
                DockerEvent::Problem {
                    action: action.into(),
                    message: e.to_string(),
                },
            );
        }
        res
    }

    /// Replaces the host-directory layout of bind storage.
    pub fn with_layout(
        mut self,
        layout: impl Fn(&ProvisionSpec) -> PathBuf + Send + Sync + 'static,
    ) -> Self {
        self.layout = Box::new(layout);
        self
    }

    /// The options.
    pub fn options(&self) -> &DockerOptions {
        &self.opts
    }

    /// The daemon connection (made on first use).
    pub async fn client(&self) -> BackendResult<&Docker> {
        self.client
            .get_or_try_init(|| connect(self.opts.host.as_deref()))
            .await
    }

    /// Container name of a workspace id.
    pub fn container_name(&self, workspace_id: &str) -> String {
        match &self.profile {
            Some(p) => format!(
                "{}{}-{}",
                self.opts.name_prefix,
                sanitize_segment(p),
                sanitize_segment(workspace_id)
            ),
            None => format!(
                "{}{}",
                self.opts.name_prefix,
                sanitize_segment(workspace_id)
            ),
        }
    }

    pub(super) fn volume_name(&self, workspace_id: &str) -> String {
        self.container_name(workspace_id)
    }

    pub(super) fn filters(&self, workspace_id: Option<&str>) -> HashMap<String, Vec<String>> {
        let mut label = vec![match workspace_id {
            Some(id) => format!("{}={id}", labels::WORKSPACE_ID),
            None => labels::WORKSPACE_ID.to_string(),
        }];
        if let Some(p) = &self.profile {
            label.push(format!("{}={p}", labels::PROFILE));
        }
        HashMap::from([("label".to_string(), label)])
    }

    /// Makes sure the image is present, pulling it per [`PullPolicy`],
    /// with pull progress to `sink`.
    ///
    /// Errors: a [`BackendError::Remote`] naming the image when it is
    /// missing and cannot be pulled.
    pub(super) async fn ensure_image_to(&self, sink: &Option<EventSink>) -> BackendResult<()> {
        let docker = self.client().await?;
        let image = &self.opts.image;
        let present = match docker.inspect_image(image).await {
            Ok(_) => true,
            Err(e) if is_status(&e, 404) => false,
            Err(e) => return Err(api_error(&format!("inspecting image {image}"), e)),
        };
        let pull = match self.opts.pull {
            PullPolicy::Always => true,
            PullPolicy::Missing => !present,
            PullPolicy::Never => false,
        };
        if !pull {
            return if present {
                Ok(())
            } else {
                Err(BackendError::Remote {
                    service: "docker",
                    status: Some(404),
                    code: Some("IMAGE_NOT_FOUND".into()),
                    message: format!(
                        "image `{image}` is not present locally and the profile says pull = \"never\"; \
                         load or build it (docker load, docker import, tests/build-test-image.sh)"
                    ),
                })
            };
        }
        let opts = CreateImageOptionsBuilder::new().from_image(image).build();
        let mut stream = docker.create_image(Some(opts), None, None);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => emit(
                    sink,
                    DockerEvent::PullProgress {
                        image: image.clone(),
                        status: info.status.unwrap_or_default(),
                        layer: info.id,
                        current: info.progress_detail.as_ref().and_then(|p| p.current),
                        total: info.progress_detail.as_ref().and_then(|p| p.total),
                    },
                ),
                Err(e) => {
                    return Err(BackendError::Remote {
                        service: "docker",
                        status: None,
                        code: Some("IMAGE_PULL_FAILED".into()),
                        message: format!(
                            "image `{image}` is not present locally and pulling it failed: {e}. \
                             Is a registry reachable? Otherwise load or build the image locally \
                             (docker load, docker import, tests/build-test-image.sh)"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    pub(super) fn exec_user(&self) -> Option<String> {
        match (&self.opts.user, self.opts.storage) {
            (Some(u), _) => Some(u.clone()),
            (None, Storage::Bind) => host_ids().map(|(u, g)| format!("{u}:{g}")),
            (None, _) => None,
        }
    }

    pub(super) fn exec_env(&self, user: Option<&str>) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        // A host uid has no home in the image: give it the workspace.
        if self.opts.storage == Storage::Bind
            && user.is_some_and(|u| !u.starts_with("0:") && u != "0")
        {
            env.insert("HOME".to_string(), CONTAINER_WORKDIR.to_string());
        }
        env.extend(self.opts.env.clone());
        env
    }

    pub(super) async fn sandbox_from(
        &self,
        docker: &Docker,
        id: &str,
    ) -> BackendResult<DockerSandbox> {
        let info = docker
            .inspect_container(id, None)
            .await
            .map_err(|e| api_error(&format!("inspecting container {id}"), e))?;
        let labels_map = info
            .config
            .as_ref()
            .and_then(|c| c.labels.clone())
            .unwrap_or_default();
        let container = info.id.clone().unwrap_or_else(|| id.to_string());
        let events = match labels_map.get(labels::WORKSPACE_ID) {
            Some(ws) => self.sink_for(ws),
            None => self.events.clone(),
        };
        let name = info
            .name
            .clone()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        let bind = info
            .mounts
            .unwrap_or_default()
            .into_iter()
            .find(|m| {
                m.destination.as_deref() == Some(CONTAINER_WORKDIR)
                    && m.typ.as_ref().map(|t| t.to_string()) == Some("bind".into())
            })
            .and_then(|m| m.source);
        let host = match bind {
            Some(src) => Some(HostDir::new(vec![(
                CONTAINER_WORKDIR.to_string(),
                PathBuf::from(src),
            )])?),
            None => None,
        };
        let user = labels_map
            .get(LABEL_USER)
            .filter(|u| !u.is_empty())
            .cloned();
        let target = ExecTarget {
            docker: docker.clone(),
            container,
            workdir: CONTAINER_WORKDIR.into(),
            env: self.exec_env(user.as_deref()),
            user,
            events,
            subreaper: Arc::default(),
        };
        // Probe the subreaper now, in the background, so the first
        // command usually finds the answer ready.
        let warm = target.clone();
        tokio::spawn(async move {
            warm.has_subreaper().await;
        });
        Ok(DockerSandbox {
            files: ContainerFiles {
                target: target.clone(),
            },
            target,
            name,
            host,
            append_lock: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    pub(super) async fn find_summary(
        &self,
        workspace_id: &str,
    ) -> BackendResult<Option<bollard::models::ContainerSummary>> {
        let docker = self.client().await?;
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&self.filters(Some(workspace_id)))
            .build();
        let list = docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| api_error("listing containers", e))?;
        Ok(list.into_iter().next())
    }

    pub(super) fn info_of(s: &bollard::models::ContainerSummary) -> SandboxInfo {
        use bollard::models::ContainerSummaryStateEnum as S;
        let labels_map: BTreeMap<String, String> =
            s.labels.clone().unwrap_or_default().into_iter().collect();
        let state = match s.state {
            Some(S::RUNNING) => SandboxState::Running,
            Some(S::PAUSED) | Some(S::EXITED) | Some(S::CREATED) => SandboxState::Suspended,
            Some(S::RESTARTING) => SandboxState::Provisioning,
            Some(S::DEAD) => SandboxState::Failed(format!(
                "container is dead ({})",
                s.status.clone().unwrap_or_default()
            )),
            Some(other) => SandboxState::Unknown(other.to_string()),
            None => SandboxState::Unknown(String::new()),
        };
        SandboxInfo {
            workspace_id: labels_map
                .get(labels::WORKSPACE_ID)
                .cloned()
                .unwrap_or_default(),
            backend_id: s.id.clone().unwrap_or_default(),
            state,
            labels: labels_map,
            created_at: s
                .created
                .map(|c| SystemTime::UNIX_EPOCH + Duration::from_secs(c.max(0) as u64)),
            last_active: None,
        }
    }

    pub(super) async fn start_or_unpause(
        &self,
        docker: &Docker,
        id: &str,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let info = docker
            .inspect_container(id, None)
            .await
            .map_err(|e| api_error(&format!("inspecting container {id}"), e))?;
        let st = info.state.unwrap_or_default();
        if st.paused == Some(true) {
            docker
                .unpause_container(id)
                .await
                .map_err(|e| api_error(&format!("unpausing container {id}"), e))?;
        } else if st.running != Some(true) {
            docker
                .start_container(id, None)
                .await
                .map_err(|e| api_error(&format!("starting container {id}"), e))?;
        } else {
            return Ok(());
        }
        emit(
            sink,
            DockerEvent::Started {
                container: id.to_string(),
            },
        );
        Ok(())
    }

    /// [`Provisioner::create`], its events to `sink`.
    pub(super) async fn create_to(
        &self,
        spec: &ProvisionSpec,
        sink: &Option<EventSink>,
    ) -> BackendResult<Arc<dyn Sandbox>> {
        let docker = self.client().await?.clone();
        let memory = self
            .opts
            .memory
            .as_deref()
            .map(parse_memory)
            .transpose()
            .map_err(|m| BackendError::Io {
                context: "docker profile option `memory`".into(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, m),
            })?;
        self.ensure_image_to(sink).await?;
        let name = self.container_name(&spec.workspace_id);
        let user = self.exec_user();

        let mut labels_map: HashMap<String, String> = spec.labels.clone().into_iter().collect();
        labels_map.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
        if let Some(p) = &self.profile {
            labels_map.insert(labels::PROFILE.into(), p.clone());
        }
        labels_map.insert(LABEL_USER.into(), user.clone().unwrap_or_default());
        labels_map.insert(
            LABEL_STORAGE.into(),
            serde_json::to_value(self.opts.storage)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        );

        let mut mounts = Vec::new();
        match self.opts.storage {
            Storage::Bind => {
                let dir = (self.layout)(spec);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| BackendError::from_io(e, dir.display().to_string()))?;
                let dir = std::fs::canonicalize(&dir)
                    .map_err(|e| BackendError::from_io(e, dir.display().to_string()))?;
                labels_map.insert(LABEL_HOST_DIR.into(), dir.display().to_string());
                mounts.push(Mount {
                    target: Some(CONTAINER_WORKDIR.into()),
                    source: Some(dir.display().to_string()),
                    typ: Some(MountType::BIND),
                    ..Default::default()
                });
            }
            Storage::Volume => {
                let vol = self.volume_name(&spec.workspace_id);
                let mut vlabels = HashMap::new();
                vlabels.insert(labels::WORKSPACE_ID.to_string(), spec.workspace_id.clone());
                docker
                    .create_volume(VolumeCreateRequest {
                        name: Some(vol.clone()),
                        labels: Some(vlabels),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| api_error(&format!("creating volume {vol}"), e))?;
                labels_map.insert(LABEL_VOLUME.into(), vol.clone());
                mounts.push(Mount {
                    target: Some(CONTAINER_WORKDIR.into()),
                    source: Some(vol),
                    typ: Some(MountType::VOLUME),
                    ..Default::default()
                });
            }
            Storage::Ephemeral => {}
        }
        for p in self.opts.ro_binds.iter().filter(|p| p.exists()) {
            // Absolute, with links resolved: the daemon binds the host path
            // as given, and a relative one would be a volume name.
            let src = std::fs::canonicalize(p)
                .map_err(|e| BackendError::from_io(e, p.display().to_string()))?;
            mounts.push(Mount {
                target: Some(if p.is_absolute() { p } else { &src }.display().to_string()),
                source: Some(src.display().to_string()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                ..Default::default()
            });
        }

        let host_config = HostConfig {
            mounts: Some(mounts),
            network_mode: Some(self.opts.network.clone()),
            init: Some(self.opts.init),
            security_opt: Some(vec!["no-new-privileges:true".into()]),
            memory,
            nano_cpus: self.opts.cpus.map(|c| (c * 1e9) as i64),
            pids_limit: self.opts.pids_limit,
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(self.opts.image.clone()),
            cmd: Some(self.opts.command.clone()),
            working_dir: Some(CONTAINER_WORKDIR.into()),
            labels: Some(labels_map),
            host_config: Some(host_config),
            ..Default::default()
        };
        let created = match docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                body,
            )
            .await
        {
            Ok(c) => c,
            // The name is taken: another process is making (or made) this
            // workspace's container; use it (issue 15 point 3). Classified
            // here: the backend errors carry no typed conflict yet.
            Err(e) if is_status(&e, 409) => {
                return self.join_by_name(&docker, &name, spec, sink).await;
            }
            Err(e) => return Err(api_error(&format!("creating container {name}"), e)),
        };
        emit(
            sink,
            DockerEvent::Created {
                workspace_id: spec.workspace_id.clone(),
                container: created.id.clone(),
                name: name.clone(),
            },
        );
        if let Err(e) = docker.start_container(&created.id, None).await {
            // A container that cannot start is useless; do not leave it.
            let _ = docker
                .remove_container(
                    &created.id,
                    Some(RemoveContainerOptionsBuilder::new().force(true).build()),
                )
                .await;
            return Err(api_error(&format!("starting container {name}"), e));
        }
        emit(
            sink,
            DockerEvent::Started {
                container: created.id.clone(),
            },
        );
        Ok(Arc::new(self.sandbox_from(&docker, &created.id).await?))
    }

    /// [`Provisioner::suspend`], its events to `sink`.
    pub(super) async fn suspend_to(
        &self,
        workspace_id: &str,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let docker = self.client().await?;
        let Some(s) = self.find_summary(workspace_id).await? else {
            return Err(BackendError::NotFound(format!("workspace {workspace_id}")));
        };
        let id = s.id.unwrap_or_default();
        match self.opts.suspend {
            SuspendMode::Stop => docker
                .stop_container(
                    &id,
                    Some(
                        StopContainerOptionsBuilder::new()
                            .t(self.opts.stop_timeout_secs as i32)
                            .build(),
                    ),
                )
                .await
                .or_else(|e| if is_status(&e, 304) { Ok(()) } else { Err(e) })
                .map_err(|e| api_error(&format!("stopping container {id}"), e))?,
            SuspendMode::Pause => docker
                .pause_container(&id)
                .await
                .map_err(|e| api_error(&format!("pausing container {id}"), e))?,
        }
        emit(sink, DockerEvent::Stopped { container: id });
        Ok(())
    }

    /// [`Provisioner::destroy`], its events to `sink`.
    pub(super) async fn destroy_to(
        &self,
        workspace_id: &str,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let docker = self.client().await?;
        let Some(s) = self.find_summary(workspace_id).await? else {
            return Ok(());
        };
        let id = s.id.clone().unwrap_or_default();
        let lbl = s.labels.clone().unwrap_or_default();
        docker
            .remove_container(
                &id,
                Some(
                    RemoveContainerOptionsBuilder::new()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await
            .or_else(|e| if is_status(&e, 404) { Ok(()) } else { Err(e) })
            .map_err(|e| api_error(&format!("removing container {id}"), e))?;
        emit(sink, DockerEvent::Removed { container: id });
        if let Some(vol) = lbl.get(LABEL_VOLUME)
            && self.opts.remove_volume
        {
            docker
                .remove_volume(
                    vol,
                    Some(RemoveVolumeOptionsBuilder::new().force(true).build()),
                )
                .await
                .or_else(|e| if is_status(&e, 404) { Ok(()) } else { Err(e) })
                .map_err(|e| api_error(&format!("removing volume {vol}"), e))?;
        }
        if let Some(dir) = lbl.get(LABEL_HOST_DIR) {
            match tokio::fs::remove_dir_all(dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BackendError::from_io(e, dir.clone())),
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Provisioner for DockerProvisioner {
    /// The profile (containers are labelled with it) and the base
    /// directory of bind mounts.
    fn instance_key(&self) -> Option<String> {
        Some(format!(
            "{}|{}",
            self.profile.as_deref().unwrap_or(""),
            self.opts
                .base_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        ))
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: false,
            persistent: true,
        }
    }

    /// Every [`DockerEvent`] also goes to `sink` as a [`BackendNotice`](crate::backend::BackendNotice)
    /// (source `docker`; see [`DockerEvent::level`] for the levels).
    fn set_notice_sink(&self, sink: NoticeSink) {
        self.notices.set(sink);
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let sink = self.sink_for(&spec.workspace_id);
        Self::reported(&sink, "create", self.create_to(spec, &sink).await)
    }

    /// A container in the daemon's `removing` state counts as gone: a
    /// `docker rm -f` while an exec ran leaves it there for a moment (the
    /// issue 15 trial saw `Removal In Progress`), and starting it fails
    /// with a 404. `find` waits up to [`REMOVAL_WAIT`] for the removal to
    /// end and then reports no container, so the manager makes a new one
    /// (and says the old one's files are lost) instead of failing on a
    /// start. A removal that takes longer is an `unreachable` error: the
    /// next call looks again.
    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        use bollard::models::ContainerSummaryStateEnum as S;
        let deadline = tokio::time::Instant::now() + REMOVAL_WAIT;
        loop {
            match self.find_summary(workspace_id).await? {
                Some(s) if s.state == Some(S::REMOVING) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(BackendError::unreachable(format!(
                            "container {} of workspace {workspace_id} is still being removed \
                             after {}s; try again when the daemon has removed it",
                            s.id.as_deref().unwrap_or("?"),
                            REMOVAL_WAIT.as_secs()
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                found => return Ok(found.map(|s| Self::info_of(&s))),
            }
        }
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let sink = self.sink_for(&info.workspace_id);
        let res = async {
            let docker = self.client().await?.clone();
            // A listed container may still be in another process's create
            // (404 to an inspect; seen with 50 processes): wait briefly.
            super::join::wait_visible(&docker, &info.backend_id, ATTACH_WAIT).await?;
            if info.state != SandboxState::Running {
                self.start_or_unpause(&docker, &info.backend_id, &sink)
                    .await?;
            }
            Ok(Arc::new(self.sandbox_from(&docker, &info.backend_id).await?) as Arc<dyn Sandbox>)
        }
        .await;
        Self::reported(&sink, "attach", res)
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let sink = self.sink_for(workspace_id);
        Self::reported(&sink, "suspend", self.suspend_to(workspace_id, &sink).await)
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let sink = self.sink_for(workspace_id);
        let res = async {
            let docker = self.client().await?;
            let Some(s) = self.find_summary(workspace_id).await? else {
                return Err(BackendError::NotFound(format!("workspace {workspace_id}")));
            };
            self.start_or_unpause(docker, &s.id.unwrap_or_default(), &sink)
                .await
        }
        .await;
        Self::reported(&sink, "resume", res)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let sink = self.sink_for(workspace_id);
        Self::reported(&sink, "destroy", self.destroy_to(workspace_id, &sink).await)
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let docker = self.client().await?;
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&self.filters(None))
            .build();
        let list = docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| api_error("listing containers", e))?;
        let mut out: Vec<SandboxInfo> = list.iter().map(Self::info_of).collect();
        out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_docker_safe_and_distinct() {
        let p = DockerProvisioner::new(DockerOptions::default());
        assert_eq!(p.container_name("abc"), "wsbench-abc");
        assert_ne!(p.container_name("a/b"), p.container_name("a_b"));
        let q = DockerProvisioner::new(DockerOptions::default()).with_profile("docker");
        assert_eq!(q.container_name("abc"), "wsbench-docker-abc");
        let f = q.filters(Some("abc"));
        assert_eq!(
            f["label"],
            vec![
                "wsbench.workspace.id=abc".to_string(),
                "wsbench.profile=docker".to_string()
            ]
        );
    }
}
