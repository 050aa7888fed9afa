//! [`KubernetesProvisioner`]: one Pod + PVC per workspace: create, find by name and label, suspend, resume, destroy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    Container, LocalObjectReference, Namespace, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, ResourceRequirements, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio::sync::OnceCell;

use super::api::{annotation_key, api_code, connect_to, kube_error_at};
use super::events::{EventSink, K8sEvent, emit};
use super::health::{PodHealth, pod_health};
use super::names;
use super::options::{
    CONTAINER, KubernetesOptions, LABEL_MANAGED_BY, MANAGED_BY, POD_WORKDIR, VOLUME,
};
use super::sandbox::KubernetesSandbox;
use crate::backend::{
    BackendError, BackendKind, BackendResult, NoticeSink, ProvisionSpec, Provisioner,
    ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, labels,
};

/// Provisions one Pod + PVC per workspace; finds them again by name and
/// label.
pub struct KubernetesProvisioner {
    pub(super) opts: KubernetesOptions,
    pub(super) profile: Option<String>,
    pub(super) events: Option<EventSink>,
    /// Where [`Provisioner::set_notice_sink`] sends the same events as
    /// log lines (the manager's event bus). Read at each provisioning, so
    /// a sink set later reaches sandboxes made from then on.
    pub(super) notices: crate::backend::NoticeSlot,
    pub(super) client: OnceCell<Client>,
    /// URL of the API server, once connected, for error messages.
    pub(super) server: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for KubernetesProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesProvisioner")
            .field("opts", &self.opts)
            .field("profile", &self.profile)
            .finish()
    }
}

impl KubernetesProvisioner {
    /// A provisioner with `opts`; connects lazily, on the first call that
    /// needs the cluster.
    ///
    /// Errors: [`KubernetesOptions::validate`]'s message.
    pub fn new(opts: KubernetesOptions) -> Result<Self, String> {
        opts.validate()?;
        Ok(KubernetesProvisioner {
            opts,
            profile: None,
            events: None,
            notices: crate::backend::NoticeSlot::default(),
            client: OnceCell::new(),
            server: std::sync::OnceLock::new(),
        })
    }

    /// Uses `client` instead of building one from the options (tests,
    /// embedders with their own config).
    pub fn with_client(self, client: Client) -> Self {
        KubernetesProvisioner {
            client: OnceCell::new_with(Some(client)),
            ..self
        }
    }

    /// Scopes `list` to workspaces of profile `name` (label
    /// `wsbench.profile`).
    pub fn with_profile(mut self, name: impl Into<String>) -> Self {
        self.profile = Some(name.into());
        self
    }

    /// Sends [`K8sEvent`]s to `sink` (besides the notice sink the
    /// manager sets, see [`Provisioner::set_notice_sink`]).
    pub fn with_events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// The sink for one workspace's events: the [`with_events`] sink and
    /// the notice sink (as [`BackendNotice`]s carrying `workspace_id`).
    /// `None` when neither is set.
    ///
    /// [`with_events`]: KubernetesProvisioner::with_events
    pub(super) fn sink_for(&self, workspace_id: &str) -> Option<EventSink> {
        self.notices
            .sink_for(self.events.clone(), workspace_id, K8sEvent::notice)
    }

    /// The options.
    pub fn options(&self) -> &KubernetesOptions {
        &self.opts
    }

    /// Pod and PVC name of a workspace id (see [`names::object_name`]).
    pub fn object_name(&self, workspace_id: &str) -> String {
        names::object_name(&self.opts.name_prefix, workspace_id)
    }

    /// The client, built on first use.
    ///
    /// Errors: [`connect`](super::connect)'s.
    pub async fn client(&self) -> BackendResult<&Client> {
        self.client
            .get_or_try_init(|| async {
                let (client, server) = connect_to(&self.opts).await?;
                let _ = self.server.set(server);
                Ok(client)
            })
            .await
    }

    pub(super) fn unschedulable_grace(&self) -> Duration {
        Duration::from_secs(self.opts.unschedulable_grace_secs)
    }

    /// [`kube_error_at`] naming this provisioner's API server.
    pub(super) fn kube_error(&self, context: &str, e: kube::Error) -> BackendError {
        kube_error_at(self.server.get().map(String::as_str), context, e)
    }

    pub(super) async fn pods(&self) -> BackendResult<Api<Pod>> {
        Ok(Api::namespaced(
            self.client().await?.clone(),
            &self.opts.namespace,
        ))
    }

    pub(super) async fn pvcs(&self) -> BackendResult<Api<PersistentVolumeClaim>> {
        Ok(Api::namespaced(
            self.client().await?.clone(),
            &self.opts.namespace,
        ))
    }

    pub(super) fn selector(&self) -> String {
        let mut s = format!("{LABEL_MANAGED_BY}={MANAGED_BY}");
        if let Some(p) = &self.profile {
            s.push_str(&format!(",{}={}", labels::PROFILE, names::label_value(p)));
        }
        s
    }

    /// Labels (valid values) and annotations (exact values) of a
    /// workspace's objects.
    pub(super) fn metadata(
        &self,
        spec: &ProvisionSpec,
    ) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let mut exact = spec.labels.clone();
        exact.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
        if let Some(p) = &self.profile {
            exact
                .entry(labels::PROFILE.into())
                .or_insert_with(|| p.clone());
        }
        let mut lab = BTreeMap::new();
        let mut ann = BTreeMap::new();
        for (k, v) in &exact {
            if names::is_label_key(k) {
                lab.insert(k.clone(), names::label_value(v));
            }
            ann.insert(annotation_key(k), v.clone());
        }
        lab.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
        (lab, ann)
    }

    pub(super) async fn ensure_namespace(&self, sink: &Option<EventSink>) -> BackendResult<()> {
        if !self.opts.create_namespace {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.client().await?.clone());
        let ns = &self.opts.namespace;
        match api.get(ns).await {
            Ok(_) => return Ok(()),
            // Without cluster-scope rights the namespace is assumed to
            // exist; creating objects in it will say otherwise.
            Err(e) if api_code(&e) == Some(403) => return Ok(()),
            Err(e) if api_code(&e) == Some(404) => {}
            Err(e) => return Err(self.kube_error(&format!("reading namespace {ns}"), e)),
        }
        let obj = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                labels: Some(BTreeMap::from([(
                    LABEL_MANAGED_BY.to_string(),
                    MANAGED_BY.to_string(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {
                emit(
                    sink,
                    K8sEvent::Created {
                        kind: "Namespace".into(),
                        name: ns.clone(),
                    },
                );
                Ok(())
            }
            Err(e) if api_code(&e) == Some(409) => Ok(()),
            Err(e) => Err(self.kube_error(&format!("creating namespace {ns}"), e)),
        }
    }

    pub(super) fn pvc_object(&self, name: &str, spec: &ProvisionSpec) -> PersistentVolumeClaim {
        let (lab, ann) = self.metadata(spec);
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(lab),
                annotations: Some(ann),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: self.opts.storage_class.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(self.opts.storage_size.clone()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The Pod object of a workspace (see the module docs).
    pub(crate) fn pod_object(&self, name: &str, spec: &ProvisionSpec) -> Pod {
        let (lab, ann) = self.metadata(spec);
        let o = &self.opts;
        let quantities = |m: &BTreeMap<String, String>| {
            (!m.is_empty()).then(|| {
                m.iter()
                    .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        let resources = o.resources.as_ref().map(|r| ResourceRequirements {
            requests: quantities(&r.requests),
            limits: quantities(&r.limits),
            ..Default::default()
        });
        let env = (!o.env.is_empty()).then(|| {
            o.env
                .iter()
                .map(|(k, v)| k8s_openapi::api::core::v1::EnvVar {
                    name: k.clone(),
                    value: Some(v.clone()),
                    ..Default::default()
                })
                .collect()
        });
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(lab),
                annotations: Some(ann),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: CONTAINER.into(),
                    image: Some(o.image.clone()),
                    image_pull_policy: Some(o.image_pull_policy.as_str().into()),
                    command: Some(vec!["sleep".into(), "infinity".into()]),
                    working_dir: Some(POD_WORKDIR.into()),
                    env,
                    resources,
                    volume_mounts: Some(vec![VolumeMount {
                        name: VOLUME.into(),
                        mount_path: POD_WORKDIR.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                volumes: Some(vec![Volume {
                    name: VOLUME.into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: name.into(),
                        read_only: None,
                    }),
                    ..Default::default()
                }]),
                restart_policy: Some("Always".into()),
                termination_grace_period_seconds: Some(o.termination_grace_secs),
                node_selector: (!o.node_selector.is_empty()).then(|| o.node_selector.clone()),
                tolerations: (!o.tolerations.is_empty()).then(|| o.tolerations.clone()),
                service_account_name: o.service_account.clone(),
                automount_service_account_token: Some(o.service_account.is_some()),
                image_pull_secrets: (!o.image_pull_secrets.is_empty()).then(|| {
                    o.image_pull_secrets
                        .iter()
                        .map(|n| LocalObjectReference { name: n.clone() })
                        .collect()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Waits until `get` answers 404, for at most the delete timeout.
    pub(super) async fn wait_gone<K>(&self, api: &Api<K>, name: &str) -> BackendResult<()>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let deadline = Instant::now() + Duration::from_secs(self.opts.delete_timeout_secs);
        let mut pause = Duration::from_millis(100);
        loop {
            match api.get_opt(name).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) => {}
                Err(e) => return Err(self.kube_error(&format!("waiting for {name} to go"), e)),
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: Some("Timeout".into()),
                    message: format!(
                        "{name} is still terminating after {}s",
                        self.opts.delete_timeout_secs
                    ),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 3 / 2).min(Duration::from_secs(1));
        }
    }

    /// Deletes an object; `Ok(false)` when it was not there.
    pub(super) async fn delete<K>(
        &self,
        api: &Api<K>,
        kind: &str,
        name: &str,
        sink: &Option<EventSink>,
    ) -> BackendResult<bool>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                emit(
                    sink,
                    K8sEvent::Deleted {
                        kind: kind.into(),
                        name: name.into(),
                    },
                );
                Ok(true)
            }
            Err(e) if api_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.kube_error(&format!("deleting {kind} {name}"), e)),
        }
    }

    pub(super) async fn ensure_pvc(
        &self,
        name: &str,
        spec: &ProvisionSpec,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let api = self.pvcs().await?;
        if let Some(pvc) = api
            .get_opt(name)
            .await
            .map_err(|e| self.kube_error(&format!("reading PVC {name}"), e))?
        {
            self.check_owner(&pvc.metadata, &spec.workspace_id, name)?;
            if pvc.metadata.deletion_timestamp.is_none() {
                return Ok(());
            }
            self.wait_gone(&api, name).await?;
        }
        match api
            .create(&PostParams::default(), &self.pvc_object(name, spec))
            .await
        {
            Ok(_) => {
                emit(
                    sink,
                    K8sEvent::Created {
                        kind: "PersistentVolumeClaim".into(),
                        name: name.into(),
                    },
                );
                Ok(())
            }
            Err(e) if api_code(&e) == Some(409) => Ok(()),
            Err(e) => Err(self.kube_error(&format!("creating PVC {name}"), e)),
        }
    }

    /// Refuses an object whose id annotation names another workspace (a
    /// hash collision, or a name prefix shared with another tool).
    pub(super) fn check_owner(&self, meta: &ObjectMeta, id: &str, name: &str) -> BackendResult<()> {
        let owner = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::WORKSPACE_ID));
        match owner {
            Some(o) if o != id => Err(BackendError::AlreadyExists(format!(
                "{name} belongs to workspace `{o}`, not `{id}`"
            ))),
            _ => Ok(()),
        }
    }

    /// Ensures a usable Pod exists and waits until it runs.
    pub(super) async fn ensure_pod(
        &self,
        name: &str,
        spec: &ProvisionSpec,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let api = self.pods().await?;
        if let Some(pod) = api
            .get_opt(name)
            .await
            .map_err(|e| self.kube_error(&format!("reading pod {name}"), e))?
        {
            self.check_owner(&pod.metadata, &spec.workspace_id, name)?;
            match pod_health(&pod, self.unschedulable_grace()) {
                PodHealth::Running | PodHealth::Pending(_) => {
                    return self.wait_running(name, sink).await;
                }
                PodHealth::Terminating => self.wait_gone(&api, name).await?,
                PodHealth::Fatal(..) | PodHealth::Finished(_) => {
                    // A broken Pod is replaced; the PVC (the files) stays.
                    self.delete(&api, "Pod", name, sink).await?;
                    self.wait_gone(&api, name).await?;
                }
            }
        }
        match api
            .create(&PostParams::default(), &self.pod_object(name, spec))
            .await
        {
            Ok(_) => emit(
                sink,
                K8sEvent::Created {
                    kind: "Pod".into(),
                    name: name.into(),
                },
            ),
            Err(e) if api_code(&e) == Some(409) => {}
            Err(e) => return Err(self.kube_error(&format!("creating pod {name}"), e)),
        }
        self.wait_running(name, sink).await
    }

    /// Polls the Pod until it runs (250 ms growing to 2 s, for at most
    /// `ready_timeout_secs`), failing fast on a fatal reason.
    pub(super) async fn wait_running(
        &self,
        name: &str,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let api = self.pods().await?;
        let deadline = Instant::now() + Duration::from_secs(self.opts.ready_timeout_secs);
        let mut pause = Duration::from_millis(250);
        let mut last: Option<PodHealth> = None;
        loop {
            let pod = api
                .get_opt(name)
                .await
                .map_err(|e| self.kube_error(&format!("reading pod {name}"), e))?
                .ok_or_else(|| {
                    BackendError::gone(format!("pod {name} disappeared while starting"))
                })?;
            let health = pod_health(&pod, self.unschedulable_grace());
            if last.as_ref() != Some(&health) {
                let (phase, reason) = match &health {
                    PodHealth::Running => ("Running".to_string(), None),
                    PodHealth::Pending(r) => ("Pending".to_string(), r.clone()),
                    PodHealth::Terminating => ("Terminating".to_string(), None),
                    PodHealth::Fatal(r, _) => ("Pending".to_string(), Some(r.clone())),
                    PodHealth::Finished(p) => (p.clone(), None),
                };
                emit(
                    sink,
                    K8sEvent::PodPhase {
                        pod: name.into(),
                        phase,
                        reason,
                    },
                );
                last = Some(health.clone());
            }
            match health {
                PodHealth::Running => return Ok(()),
                PodHealth::Fatal(reason, message) => {
                    emit(
                        sink,
                        K8sEvent::Problem {
                            pod: name.into(),
                            reason: reason.clone(),
                            message: message.clone(),
                        },
                    );
                    return Err(BackendError::Remote {
                        service: "kubernetes",
                        status: None,
                        code: Some(reason.clone()),
                        message: format!("pod {name} cannot start: {reason}: {message}"),
                    });
                }
                PodHealth::Finished(phase) => {
                    return Err(BackendError::Remote {
                        service: "kubernetes",
                        status: None,
                        code: Some(phase.clone()),
                        message: format!("pod {name} ended ({phase}) while starting"),
                    });
                }
                PodHealth::Terminating => {
                    return Err(BackendError::gone(format!("pod {name} is being deleted")));
                }
                PodHealth::Pending(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: Some("Timeout".into()),
                    message: format!(
                        "pod {name} is not running after {}s",
                        self.opts.ready_timeout_secs
                    ),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 3 / 2).min(Duration::from_secs(2));
        }
    }

    /// Ensures namespace, PVC and a running Pod for `spec`; returns the
    /// sandbox.
    ///
    /// Errors: API errors as [`BackendError::Remote`] with the status code
    /// and reason; a Pod that cannot start with its reason as `code`.
    pub async fn ensure(&self, spec: &ProvisionSpec) -> BackendResult<KubernetesSandbox> {
        let name = self.object_name(&spec.workspace_id);
        let sink = self.sink_for(&spec.workspace_id);
        self.ensure_namespace(&sink).await?;
        self.ensure_pvc(&name, spec, &sink).await?;
        self.ensure_pod(&name, spec, &sink).await?;
        Ok(KubernetesSandbox::new(
            self.client().await?.clone(),
            &self.opts.namespace,
            &name,
            self.opts.env.clone(),
            sink,
        ))
    }

    pub(super) fn info_from(
        &self,
        meta: &ObjectMeta,
        state: SandboxState,
        name: &str,
    ) -> Option<SandboxInfo> {
        let ann = meta.annotations.clone().unwrap_or_default();
        let id = ann.get(labels::WORKSPACE_ID).cloned().or_else(|| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(labels::WORKSPACE_ID).cloned())
        })?;
        let labels: BTreeMap<String, String> = ann
            .into_iter()
            .filter(|(k, _)| k.starts_with("wsbench."))
            .collect();
        Some(SandboxInfo {
            workspace_id: id,
            backend_id: name.to_string(),
            state,
            labels,
            created_at: meta
                .creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0)),
            last_active: None,
        })
    }

    pub(super) fn state_of(&self, pod: Option<&Pod>) -> SandboxState {
        match pod.map(|p| pod_health(p, self.unschedulable_grace())) {
            None => SandboxState::Suspended,
            Some(PodHealth::Running) => SandboxState::Running,
            Some(PodHealth::Pending(_)) => SandboxState::Provisioning,
            Some(PodHealth::Terminating) => SandboxState::Suspended,
            Some(PodHealth::Fatal(r, m)) => SandboxState::Failed(format!("{r}: {m}")),
            Some(PodHealth::Finished(p)) => SandboxState::Failed(p),
        }
    }
}

#[async_trait]
impl Provisioner for KubernetesProvisioner {
    /// The kubeconfig context, the namespace and the profile.
    fn instance_key(&self) -> Option<String> {
        Some(format!(
            "{}|{}|{}",
            self.opts.context.as_deref().unwrap_or(""),
            self.opts.namespace,
            self.profile.as_deref().unwrap_or("")
        ))
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Kubernetes
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: false,
            persistent: true,
        }
    }

    /// Every [`K8sEvent`] also goes to `sink` as a [`BackendNotice`](crate::backend::BackendNotice)
    /// (source `kubernetes`; see [`K8sEvent::notice`] for the levels).
    fn set_notice_sink(&self, sink: NoticeSink) {
        self.notices.set(sink);
    }

    /// Creates (or adopts) the workspace's PVC and Pod. An existing PVC is
    /// kept and a Pod in a bad phase replaced, so the manager's "create
    /// after a failed find" never loses files.
    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        Ok(Arc::new(self.ensure(spec).await?))
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        let name = self.object_name(workspace_id);
        let pvc = self
            .pvcs()
            .await?
            .get_opt(&name)
            .await
            .map_err(|e| self.kube_error(&format!("reading PVC {name}"), e))?;
        let pod = self
            .pods()
            .await?
            .get_opt(&name)
            .await
            .map_err(|e| self.kube_error(&format!("reading pod {name}"), e))?;
        let meta = match (&pvc, &pod) {
            (Some(p), _) if p.metadata.deletion_timestamp.is_none() => &p.metadata,
            (_, Some(p)) => &p.metadata,
            _ => return Ok(None),
        };
        if self.check_owner(meta, workspace_id, &name).is_err() {
            return Ok(None);
        }
        let state = self.state_of(pod.as_ref());
        Ok(self.info_from(meta, state, &name).map(|i| SandboxInfo {
            workspace_id: workspace_id.to_string(),
            ..i
        }))
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let spec = ProvisionSpec {
            workspace_id: info.workspace_id.clone(),
            labels: info.labels.clone(),
        };
        Ok(Arc::new(self.ensure(&spec).await?))
    }

    async fn provision(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        Ok(Arc::new(self.ensure(spec).await?))
    }

    /// Deletes the Pod and keeps the PVC (its files); with
    /// `delete_pvc_on_close` the PVC goes too.
    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let name = self.object_name(workspace_id);
        let pods = self.pods().await?;
        let sink = self.sink_for(workspace_id);
        self.delete(&pods, "Pod", &name, &sink).await?;
        if self.opts.delete_pvc_on_close {
            let pvcs = self.pvcs().await?;
            self.delete(&pvcs, "PersistentVolumeClaim", &name, &sink)
                .await?;
        }
        Ok(())
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let info = self.find(workspace_id).await?.ok_or_else(|| {
            BackendError::NotFound(format!("no Kubernetes workspace `{workspace_id}`"))
        })?;
        self.attach(&info).await.map(|_| ())
    }

    /// Deletes Pod and PVC and waits (bounded) until both are gone.
    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let name = self.object_name(workspace_id);
        let pods = self.pods().await?;
        let pvcs = self.pvcs().await?;
        let sink = self.sink_for(workspace_id);
        let pod = self.delete(&pods, "Pod", &name, &sink).await?;
        let pvc = self
            .delete(&pvcs, "PersistentVolumeClaim", &name, &sink)
            .await?;
        if pod {
            self.wait_gone(&pods, &name).await?;
        }
        if pvc {
            self.wait_gone(&pvcs, &name).await?;
        }
        Ok(())
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let lp = ListParams::default().labels(&self.selector());
        let pvcs = self
            .pvcs()
            .await?
            .list(&lp)
            .await
            .map_err(|e| self.kube_error("listing PVCs", e))?;
        let pods = self
            .pods()
            .await?
            .list(&lp)
            .await
            .map_err(|e| self.kube_error("listing pods", e))?;
        let mut by_name: BTreeMap<String, SandboxInfo> = BTreeMap::new();
        let pod_of = |n: &str| {
            pods.items
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(n))
        };
        for pvc in &pvcs.items {
            let Some(n) = pvc.metadata.name.as_deref() else {
                continue;
            };
            if let Some(i) = self.info_from(&pvc.metadata, self.state_of(pod_of(n)), n) {
                by_name.insert(n.to_string(), i);
            }
        }
        for pod in &pods.items {
            let Some(n) = pod.metadata.name.as_deref() else {
                continue;
            };
            if !by_name.contains_key(n)
                && let Some(i) = self.info_from(&pod.metadata, self.state_of(Some(pod)), n)
            {
                by_name.insert(n.to_string(), i);
            }
        }
        Ok(by_name.into_values().collect())
    }
}

#[cfg(test)]
mod tests;
