//! The Kubernetes backend (kube-rs): one Pod and one PVC per workspace
//! (contract §7.6, without its Python gateway and bootstrap).
//!
//! * **Names** from the workspace id with a hash of the exact id, so
//!   distinct ids never share a Pod or PVC, and label values that are
//!   always valid; the raw id lives in an annotation (module `names`,
//!   contract §11 point 27).
//! * **Provision**: the namespace is created when missing; the PVC
//!   (`ReadWriteOnce`) holds `/workspace` and outlives the Pod; the Pod
//!   runs `sleep infinity` in container `workspace` with the PVC mounted
//!   at `/workspace`. Waiting for `Running` backs off from 250 ms to 2 s
//!   and fails at once with the Pod's own reason on `ImagePullBackOff`,
//!   `ErrImagePull`, `InvalidImageName`, `CrashLoopBackOff` or
//!   `CreateContainerConfigError`, and on an `Unschedulable` scheduling
//!   condition once it has lasted `unschedulable_grace_secs` (a node
//!   being added by an autoscaler is worth waiting for).
//! * **Reattach** by the derived names (checked against the id
//!   annotation): a `Running` or `Pending` Pod is reused, a terminating
//!   one awaited, a Pod in any other phase deleted and recreated — the PVC
//!   and so the files are always kept.
//! * **Exec** over the exec websocket (module `exec`): `v5.channel.k8s.io`
//!   with `v4` fallback, streamed output, exit code from the status
//!   channel, timeouts that kill the process tree in the Pod, and a
//!   background job that cannot hold a finished command's call open.
//! * **Files** by small scripts over exec, one round trip each (module
//!   `files`). Every one of them — read, write, append, create, list,
//!   stat, remove, rename, mkdir and the tar transfers — starts with the
//!   same check, which resolves its paths link by link and refuses
//!   ([`BackendError::Escapes`]) a path under `/workspace` that a link
//!   leads out of, as bubblewrap and Docker do on the host.
//! * **Events** ([`K8sEvent`]: objects, Pod phases, problems, execs) go to
//!   the [`KubernetesProvisioner::with_events`] sink and, as
//!   [`BackendNotice`]s, to the sink the workspace manager sets
//!   ([`Provisioner::set_notice_sink`]), which puts them on its event bus.
//! * **Suspend** deletes the Pod and keeps the PVC (the next attach
//!   recreates the Pod on the same files); **destroy** deletes both;
//!   **list** shows every labelled PVC, with or without a Pod.
//!
//! RBAC the credentials need in the namespace: `get`, `list`, `create`,
//! `delete` on `pods` and `persistentvolumeclaims`, `create` (and `get`)
//! on `pods/exec`; plus `get`/`create` on `namespaces` when wsbench should
//! create the namespace (without them, an existing namespace is assumed).

mod exec;
mod files;
pub mod names;
mod tar;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use k8s_openapi::api::core::v1::{
    Container, LocalObjectReference, Namespace, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, ResourceRequirements, Toleration, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncRead;
use tokio::sync::{Mutex, OnceCell, mpsc};

use self::exec::ExecTarget;
use super::shell::ops;
use super::{
    BackendError, BackendKind, BackendNotice, BackendResult, ByteRange, Capabilities, ExecOutcome,
    ExecRequest, FileStat, NoticeLevel, NoticeSink, OutputSink, Process, ProvisionSpec,
    Provisioner, ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, SpawnRequest, Watch,
    labels,
};

/// The default image: has `sh`, `tar`, `stat` and `head`, which the
/// file operations need (no `rg`: Glob/Grep then need an image with it).
pub const DEFAULT_IMAGE: &str = "debian:bookworm-slim";

/// Default namespace.
pub const DEFAULT_NAMESPACE: &str = "wsbench";

/// Path of the workspace in the Pod: the PVC's mount point (§7.6).
pub const POD_WORKDIR: &str = "/workspace";

/// Name of the one container of a workspace Pod.
pub const CONTAINER: &str = "workspace";

/// Name of the PVC volume in the Pod spec.
pub const VOLUME: &str = "workspace-data";

/// Label every wsbench object carries (`app.kubernetes.io/managed-by`).
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "wsbench";

/// Pod waiting reasons that will not heal by waiting.
pub const FATAL_REASONS: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
];

/// When the kubelet pulls the image (`imagePullPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ImagePullPolicy {
    /// Pull on every Pod start.
    Always,
    /// Pull only when the node lacks the image.
    #[default]
    IfNotPresent,
    /// Never pull.
    Never,
}

impl ImagePullPolicy {
    fn as_str(self) -> &'static str {
        match self {
            ImagePullPolicy::Always => "Always",
            ImagePullPolicy::IfNotPresent => "IfNotPresent",
            ImagePullPolicy::Never => "Never",
        }
    }
}

/// CPU/memory requests and limits of the workspace container, as
/// Kubernetes quantities (`"500m"`, `"1Gi"`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Resources {
    /// Requested resources (`cpu`, `memory`, ...).
    pub requests: BTreeMap<String, String>,
    /// Limits.
    pub limits: BTreeMap<String, String>,
}

/// Profile options of a Kubernetes workspace (`[profiles.<name>.options]`
/// with `backend = "kubernetes"`). Every field has a default; the cluster
/// comes from `kubeconfig`/`context`; with neither, kube-rs's inference
/// picks the current context of `$KUBECONFIG` or `~/.kube/config` first
/// and the in-cluster service account only when there is no kubeconfig.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesOptions {
    /// Path of a kubeconfig file; `None` = the default kubeconfig
    /// (`$KUBECONFIG`, `~/.kube/config`), else in-cluster when running in
    /// a Pod.
    pub kubeconfig: Option<PathBuf>,
    /// Use the in-cluster service account config and nothing else.
    pub in_cluster: bool,
    /// Kubeconfig context; `None` = its current context.
    pub context: Option<String>,
    /// Namespace of the Pods and PVCs (created when missing).
    pub namespace: String,
    /// Create the namespace when it does not exist.
    pub create_namespace: bool,
    /// Container image; needs `sh`, `head`, `stat`, `tar` (and `rg` for
    /// Glob/Grep).
    pub image: String,
    /// When to pull the image.
    pub image_pull_policy: ImagePullPolicy,
    /// Names of Secrets used to pull the image.
    pub image_pull_secrets: Vec<String>,
    /// Requests and limits.
    pub resources: Option<Resources>,
    /// Node selector of the Pod.
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the Pod (Kubernetes JSON/TOML shape: `key`,
    /// `operator`, `value`, `effect`, `tolerationSeconds`).
    #[serde(deserialize_with = "strict_tolerations")]
    pub tolerations: Vec<Toleration>,
    /// Service account of the Pod; its token is mounted only when set.
    pub service_account: Option<String>,
    /// Storage class of the PVC; `None` = the cluster default.
    pub storage_class: Option<String>,
    /// Size requested for the PVC.
    pub storage_size: String,
    /// Suspend (the manager's close) deletes the PVC too, as the
    /// reference's close does with this flag: files are then lost.
    pub delete_pvc_on_close: bool,
    /// Environment of the container and of every command.
    pub env: BTreeMap<String, String>,
    /// Prefix of Pod and PVC names.
    pub name_prefix: String,
    /// Most seconds to wait for a Pod to run.
    pub ready_timeout_secs: u64,
    /// Most seconds to wait for a deleted Pod or PVC to go away.
    pub delete_timeout_secs: u64,
    /// Seconds a Pod may stay `Unschedulable` before the start fails:
    /// a cluster autoscaler adding a node, or a volume bound on first
    /// use, make a Pod unschedulable for a while and then fine.
    pub unschedulable_grace_secs: u64,
    /// Grace period of Pod deletion (`sleep` ignores SIGTERM, so a long
    /// one only slows suspend down).
    pub termination_grace_secs: i64,
}

/// A toleration as written in a profile: the Kubernetes fields and no
/// others, so a typo (`operatr`) is an error instead of a toleration that
/// silently matches every taint with that key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TolerationOption {
    key: Option<String>,
    operator: Option<String>,
    value: Option<String>,
    effect: Option<String>,
    toleration_seconds: Option<i64>,
}

fn strict_tolerations<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Toleration>, D::Error> {
    let items = Vec::<TolerationOption>::deserialize(d)?;
    Ok(items
        .into_iter()
        .map(|t| Toleration {
            key: t.key,
            operator: t.operator,
            value: t.value,
            effect: t.effect,
            toleration_seconds: t.toleration_seconds,
        })
        .collect())
}

impl Default for KubernetesOptions {
    fn default() -> Self {
        KubernetesOptions {
            kubeconfig: None,
            in_cluster: false,
            context: None,
            namespace: DEFAULT_NAMESPACE.into(),
            create_namespace: true,
            image: DEFAULT_IMAGE.into(),
            image_pull_policy: ImagePullPolicy::IfNotPresent,
            image_pull_secrets: Vec::new(),
            resources: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            service_account: None,
            storage_class: None,
            storage_size: "1Gi".into(),
            delete_pvc_on_close: false,
            env: BTreeMap::new(),
            name_prefix: "wsbench-".into(),
            ready_timeout_secs: 120,
            delete_timeout_secs: 60,
            unschedulable_grace_secs: 60,
            termination_grace_secs: 5,
        }
    }
}

impl KubernetesOptions {
    /// Checks values the API server would refuse late (names, sizes).
    ///
    /// Errors: a message naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if !names::is_dns_label(&self.namespace) {
            return Err(format!(
                "namespace `{}` is not a valid DNS-1123 label (lower-case letters, digits, `-`, at most 63)",
                self.namespace
            ));
        }
        if self.image.trim().is_empty() {
            return Err("image must not be empty".into());
        }
        if self.storage_size.trim().is_empty() {
            return Err("storage_size must not be empty".into());
        }
        for k in self.node_selector.keys() {
            if !names::is_label_key(k) {
                return Err(format!("node_selector key `{k}` is not a valid label key"));
            }
        }
        Ok(())
    }
}

/// What the Kubernetes backend reports while it works.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum K8sEvent {
    /// An object was created (`Namespace`, `PersistentVolumeClaim`, `Pod`).
    Created {
        /// Object kind.
        kind: String,
        /// Object name.
        name: String,
    },
    /// An object was deleted.
    Deleted {
        /// Object kind.
        kind: String,
        /// Object name.
        name: String,
    },
    /// A Pod's phase (or waiting reason) changed.
    PodPhase {
        /// Pod name.
        pod: String,
        /// Phase (`Pending`, `Running`, ...).
        phase: String,
        /// Waiting reason or scheduling message, when there is one.
        reason: Option<String>,
    },
    /// The Pod cannot be scheduled or its image cannot be pulled.
    Problem {
        /// Pod name.
        pod: String,
        /// Kubernetes reason (`Unschedulable`, `ImagePullBackOff`, ...).
        reason: String,
        /// Kubernetes message.
        message: String,
    },
    /// A command started.
    ExecStarted {
        /// Pod name.
        pod: String,
        /// Program and arguments.
        argv: Vec<String>,
    },
    /// A command ended.
    ExecExited {
        /// Pod name.
        pod: String,
        /// Exit code from the status channel.
        exit_code: Option<i32>,
        /// Wall time in milliseconds.
        duration_ms: u64,
    },
}

/// Receives [`K8sEvent`]s; called inline, so it must not block.
pub type EventSink = Arc<dyn Fn(K8sEvent) + Send + Sync>;

fn emit(sink: &Option<EventSink>, ev: K8sEvent) {
    if let Some(s) = sink {
        s(ev);
    }
}

/// Most characters of a command line shown in a notice.
const NOTICE_ARGV_CHARS: usize = 160;

impl K8sEvent {
    /// How much the event matters in a log: problems are errors; a phase
    /// other than `Pending` or `Running` (`Failed`, `Terminating`) a
    /// warning; objects made or deleted and other phase changes info;
    /// each exec debug (file operations are execs too, so at a higher
    /// level they would drown the rest).
    pub fn level(&self) -> NoticeLevel {
        match self {
            K8sEvent::Problem { .. } => NoticeLevel::Error,
            K8sEvent::PodPhase { phase, .. }
                if !matches!(phase.as_str(), "Pending" | "Running") =>
            {
                NoticeLevel::Warn
            }
            K8sEvent::Created { .. } | K8sEvent::Deleted { .. } | K8sEvent::PodPhase { .. } => {
                NoticeLevel::Info
            }
            K8sEvent::ExecStarted { .. } | K8sEvent::ExecExited { .. } => NoticeLevel::Debug,
        }
    }

    /// One line for a human (`pod wsbench-x-1a2b: Pending
    /// (ContainerCreating)`); long command lines are cut.
    pub fn message(&self) -> String {
        match self {
            K8sEvent::Created { kind, name } => format!("created {kind} {name}"),
            K8sEvent::Deleted { kind, name } => format!("deleted {kind} {name}"),
            K8sEvent::PodPhase { pod, phase, reason } => match reason {
                Some(r) => format!("pod {pod}: {phase} ({r})"),
                None => format!("pod {pod}: {phase}"),
            },
            K8sEvent::Problem {
                pod,
                reason,
                message,
            } => format!("pod {pod} cannot start: {reason}: {message}"),
            K8sEvent::ExecStarted { pod, argv } => {
                let line = argv.join(" ");
                let cut: String = line.chars().take(NOTICE_ARGV_CHARS).collect();
                let more = if cut.len() < line.len() { "…" } else { "" };
                format!("exec in {pod}: {cut}{more}")
            }
            K8sEvent::ExecExited {
                pod,
                exit_code,
                duration_ms,
            } => match exit_code {
                Some(c) => format!("exec in {pod} exited {c} after {duration_ms} ms"),
                None => format!("exec in {pod} ended without an exit code after {duration_ms} ms"),
            },
        }
    }

    /// The event as a [`BackendNotice`] about `workspace_id`.
    pub fn notice(&self, workspace_id: &str) -> BackendNotice {
        BackendNotice {
            workspace_id: workspace_id.to_string(),
            source: "kubernetes".into(),
            level: self.level(),
            message: self.message(),
        }
    }
}

/// Maps a kube error to [`BackendError::Remote`] with the API's status
/// code and reason; see [`kube_error_at`].
fn kube_error(context: &str, e: kube::Error) -> BackendError {
    kube_error_at(None, context, e)
}

/// Maps a kube error to [`BackendError::Remote`]: an API answer keeps its
/// status code and reason (401/403 with a hint about the kubeconfig
/// user); a request that got no answer says, in one line, which API
/// server (`server`, when known) could not be reached and the root cause
/// (`connection refused`, an unknown certificate issuer).
fn kube_error_at(server: Option<&str>, context: &str, e: kube::Error) -> BackendError {
    use crate::backend::http::{is_tls_error, root_cause};
    let at = server
        .map(|s| format!("the Kubernetes API at {s}"))
        .unwrap_or_else(|| "the Kubernetes API".into());
    match e {
        kube::Error::Api(s) => {
            let hint = match s.code {
                401 => " (check the user credentials of the kubeconfig context)",
                403 => {
                    " (the kubeconfig user lacks an RBAC permission; see the README's Kubernetes section)"
                }
                _ => "",
            };
            BackendError::Remote {
                service: "kubernetes",
                status: Some(s.code),
                code: Some(s.reason.clone()).filter(|r| !r.is_empty()),
                message: format!("{context}: {}{hint}", s.message),
            }
        }
        ref other @ (kube::Error::HyperError(_) | kube::Error::Service(_)) => {
            let cause = root_cause(other);
            if is_tls_error(other) {
                BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: Some("tls".into()),
                    message: format!(
                        "{context}: TLS with {at} failed: {cause} (check the cluster's certificate-authority in the kubeconfig)"
                    ),
                }
            } else {
                BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: None,
                    message: format!("{context}: cannot reach {at}: {cause}"),
                }
            }
        }
        other => BackendError::Remote {
            service: "kubernetes",
            status: None,
            code: None,
            message: format!("{context}: {}", crate::backend::http::error_chain(&other)),
        },
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Builds a kube client from the options (see [`KubernetesOptions`]).
///
/// Errors: [`BackendError::Unavailable`] naming what was tried.
pub async fn connect(opts: &KubernetesOptions) -> BackendResult<Client> {
    Ok(connect_to(opts).await?.0)
}

/// [`connect`], also returning the API server's URL (for messages).
async fn connect_to(opts: &KubernetesOptions) -> BackendResult<(Client, String)> {
    crate::backend::http::ensure_crypto_provider();
    let kco = KubeConfigOptions {
        context: opts.context.clone(),
        ..Default::default()
    };
    let unavailable = |what: String| BackendError::Unavailable(format!("kubernetes: {what}"));
    let config = if opts.in_cluster {
        Config::incluster().map_err(|e| unavailable(format!("in-cluster config: {e}")))?
    } else if let Some(path) = &opts.kubeconfig {
        let kc = Kubeconfig::read_from(path)
            .map_err(|e| unavailable(format!("reading kubeconfig {}: {e}", path.display())))?;
        check_context(&kc, opts.context.as_deref(), &path.display().to_string())
            .map_err(unavailable)?;
        Config::from_custom_kubeconfig(kc, &kco)
            .await
            .map_err(|e| unavailable(format!("kubeconfig {}: {e}", path.display())))?
    } else if opts.context.is_some() {
        if let Ok(kc) = Kubeconfig::read() {
            check_context(&kc, opts.context.as_deref(), "the default kubeconfig")
                .map_err(unavailable)?;
        }
        Config::from_kubeconfig(&kco)
            .await
            .map_err(|e| unavailable(format!("default kubeconfig: {e}")))?
    } else {
        // kube-rs tries $KUBECONFIG / ~/.kube/config first, then the
        // in-cluster service account.
        Config::infer().await.map_err(|e| {
            unavailable(format!(
                "no usable kubeconfig and no in-cluster config ({e}); set `kubeconfig` or `context`"
            ))
        })?
    };
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/').to_string();
    let client =
        Client::try_from(config).map_err(|e| unavailable(format!("building the client: {e}")))?;
    Ok((client, server))
}

/// Checks that `context` (when set) is one of `kc`'s contexts; the error
/// lists the ones there are.
fn check_context(kc: &Kubeconfig, context: Option<&str>, file: &str) -> Result<(), String> {
    let Some(want) = context else {
        return Ok(());
    };
    if kc.contexts.iter().any(|c| c.name == want) {
        return Ok(());
    }
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    Err(format!(
        "context `{want}` is not in {file}; its contexts: {}",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

/// Annotation holding the exact value of a label (label values are
/// length- and charset-limited, annotations are not).
fn annotation_key(label: &str) -> String {
    label.to_string()
}

/// A workspace Pod used as a sandbox.
#[derive(Clone)]
pub struct KubernetesSandbox {
    target: ExecTarget,
    append_lock: Arc<Mutex<()>>,
}

impl std::fmt::Debug for KubernetesSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSandbox")
            .field("namespace", &self.target.namespace)
            .field("pod", &self.target.pod)
            .finish()
    }
}

impl KubernetesSandbox {
    /// A sandbox on an existing Pod (container `workspace`, files under
    /// `/workspace`). The provisioner is the usual way to get one.
    pub fn new(
        client: Client,
        namespace: &str,
        pod: &str,
        env: BTreeMap<String, String>,
        events: Option<EventSink>,
    ) -> Self {
        KubernetesSandbox {
            target: ExecTarget::new(
                client,
                namespace.into(),
                pod.into(),
                POD_WORKDIR.into(),
                env,
                events,
            ),
            append_lock: Arc::default(),
        }
    }

    /// Pod name.
    pub fn pod_name(&self) -> &str {
        &self.target.pod
    }

    /// Namespace.
    pub fn namespace(&self) -> &str {
        &self.target.namespace
    }

    /// Whether the API server speaks `v5.channel.k8s.io` (stdin can be
    /// closed without closing the connection). Asks with a no-op exec the
    /// first time.
    ///
    /// Errors: the exec fails.
    pub async fn supports_stdin_close(&self) -> BackendResult<bool> {
        self.target.supports_stdin_close().await
    }

    /// Streams directory `dir` of the Pod as a tar archive into `sink`
    /// (what `kubectl cp pod:dir .` moves); links in the tree are archived
    /// as links. Returns the archive's size.
    ///
    /// Errors: `NotFound` for a missing directory, `Escapes` when `dir` is
    /// reached through a link out of `/workspace`, or the exec's error.
    pub async fn download_tar(&self, dir: &str, sink: mpsc::Sender<Bytes>) -> BackendResult<u64> {
        tar::download_tar(&self.target, &self.abs(dir), sink).await
    }

    /// Unpacks a tar archive into directory `dir` of the Pod (created when
    /// missing).
    ///
    /// Errors: `Escapes` when `dir` or a directory the archive enters is
    /// reached through a link out of `/workspace`, or a member is absolute,
    /// climbs with `..` or goes through a link the archive itself makes;
    /// the archive is refused by `tar`; or the exec's error.
    pub async fn upload_tar(&self, dir: &str, archive: Bytes) -> BackendResult<()> {
        tar::upload_tar(&self.target, &self.abs(dir), archive).await
    }

    fn abs(&self, path: &str) -> String {
        super::path::join(POD_WORKDIR, path)
    }
}

#[async_trait]
impl Sandbox for KubernetesSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Kubernetes
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exec_stdin: true,
            byte_exact_output: true,
            kill_on_timeout: true,
            processes: true,
            read_range: true,
            atomic_write: true,
            append: true,
            watch: false,
        }
    }

    fn workdir(&self) -> &str {
        POD_WORKDIR
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.target.exec(req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.target.spawn(req).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        ops::read(&self.target, &self.abs(path), range).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        ops::write(&self.target, &self.abs(path), data).await
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        files::write_stream(&self.target, &self.abs(path), reader).await
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        // Two `head -c >>` execs could interleave; one at a time per sandbox.
        let _g = self.append_lock.lock().await;
        ops::append(&self.target, &self.abs(path), data).await
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        ops::create_new(&self.target, &self.abs(path), data).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        ops::list(&self.target, &self.abs(path)).await
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        ops::stat(&self.target, &self.abs(path)).await
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        ops::remove(&self.target, &self.abs(path), recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        ops::rename(&self.target, &self.abs(from), &self.abs(to)).await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        ops::mkdir(&self.target, &self.abs(path), parents).await
    }

    async fn watch(&self, _path: &str) -> BackendResult<Watch> {
        Err(BackendError::Unsupported {
            backend: BackendKind::Kubernetes,
            what: "watching files",
        })
    }
}

/// What a Pod's status says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PodHealth {
    /// Running (the container may still be starting).
    Running,
    /// Pending, still worth waiting for; the text says why, if known.
    Pending(Option<String>),
    /// Being deleted.
    Terminating,
    /// Will not get better: reason and message.
    Fatal(String, String),
    /// Failed, Succeeded or Unknown: replace it.
    Finished(String),
}

/// [`pod_health_at`] now.
fn pod_health(pod: &Pod, unschedulable_grace: Duration) -> PodHealth {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    pod_health_at(pod, unschedulable_grace, now)
}

/// What a Pod's status says at `now` (Unix seconds): an `Unschedulable`
/// condition is fatal only once it has lasted `unschedulable_grace`
/// (from its `lastTransitionTime`; at once when that is missing).
fn pod_health_at(pod: &Pod, unschedulable_grace: Duration, now: i64) -> PodHealth {
    if pod.metadata.deletion_timestamp.is_some() {
        return PodHealth::Terminating;
    }
    let Some(status) = &pod.status else {
        return PodHealth::Pending(None);
    };
    let statuses = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten());
    for cs in statuses {
        if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref())
            && let Some(reason) = &w.reason
            && FATAL_REASONS.contains(&reason.as_str())
        {
            return PodHealth::Fatal(reason.clone(), w.message.clone().unwrap_or_default());
        }
    }
    for c in status.conditions.iter().flatten() {
        if c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
        {
            let since = c.last_transition_time.as_ref().map(|t| t.0.as_second());
            if since.is_some_and(|t| now - t < unschedulable_grace.as_secs() as i64) {
                return PodHealth::Pending(Some("Unschedulable".into()));
            }
            return PodHealth::Fatal(
                "Unschedulable".into(),
                c.message.clone().unwrap_or_default(),
            );
        }
    }
    match status.phase.as_deref() {
        Some("Running") => PodHealth::Running,
        Some("Pending") | None => {
            let why = status
                .container_statuses
                .iter()
                .flatten()
                .find_map(|cs| cs.state.as_ref()?.waiting.as_ref()?.reason.clone());
            PodHealth::Pending(why)
        }
        Some(other) => PodHealth::Finished(other.to_string()),
    }
}

/// Provisions one Pod + PVC per workspace; finds them again by name and
/// label.
pub struct KubernetesProvisioner {
    opts: KubernetesOptions,
    profile: Option<String>,
    events: Option<EventSink>,
    /// Where [`Provisioner::set_notice_sink`] sends the same events as
    /// log lines (the manager's event bus). Read at each provisioning, so
    /// a sink set later reaches sandboxes made from then on.
    notices: crate::backend::NoticeSlot,
    client: OnceCell<Client>,
    /// URL of the API server, once connected, for error messages.
    server: std::sync::OnceLock<String>,
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
    fn sink_for(&self, workspace_id: &str) -> Option<EventSink> {
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
    /// Errors: [`connect`]'s.
    pub async fn client(&self) -> BackendResult<&Client> {
        self.client
            .get_or_try_init(|| async {
                let (client, server) = connect_to(&self.opts).await?;
                let _ = self.server.set(server);
                Ok(client)
            })
            .await
    }

    fn unschedulable_grace(&self) -> Duration {
        Duration::from_secs(self.opts.unschedulable_grace_secs)
    }

    /// [`kube_error_at`] naming this provisioner's API server.
    fn kube_error(&self, context: &str, e: kube::Error) -> BackendError {
        kube_error_at(self.server.get().map(String::as_str), context, e)
    }

    async fn pods(&self) -> BackendResult<Api<Pod>> {
        Ok(Api::namespaced(
            self.client().await?.clone(),
            &self.opts.namespace,
        ))
    }

    async fn pvcs(&self) -> BackendResult<Api<PersistentVolumeClaim>> {
        Ok(Api::namespaced(
            self.client().await?.clone(),
            &self.opts.namespace,
        ))
    }

    fn selector(&self) -> String {
        let mut s = format!("{LABEL_MANAGED_BY}={MANAGED_BY}");
        if let Some(p) = &self.profile {
            s.push_str(&format!(",{}={}", labels::PROFILE, names::label_value(p)));
        }
        s
    }

    /// Labels (valid values) and annotations (exact values) of a
    /// workspace's objects.
    fn metadata(
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

    async fn ensure_namespace(&self, sink: &Option<EventSink>) -> BackendResult<()> {
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

    fn pvc_object(&self, name: &str, spec: &ProvisionSpec) -> PersistentVolumeClaim {
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
    pub fn pod_object(&self, name: &str, spec: &ProvisionSpec) -> Pod {
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
    async fn wait_gone<K>(&self, api: &Api<K>, name: &str) -> BackendResult<()>
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
    async fn delete<K>(
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

    async fn ensure_pvc(
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
    fn check_owner(&self, meta: &ObjectMeta, id: &str, name: &str) -> BackendResult<()> {
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
    async fn ensure_pod(
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
    async fn wait_running(&self, name: &str, sink: &Option<EventSink>) -> BackendResult<()> {
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
                    BackendError::Unavailable(format!("pod {name} disappeared while starting"))
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
                    return Err(BackendError::Unavailable(format!(
                        "pod {name} is being deleted"
                    )));
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

    fn info_from(&self, meta: &ObjectMeta, state: SandboxState, name: &str) -> Option<SandboxInfo> {
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

    fn state_of(&self, pod: Option<&Pod>) -> SandboxState {
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

    /// Every [`K8sEvent`] also goes to `sink` as a [`BackendNotice`]
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
mod tests {
    use super::*;

    #[test]
    fn options_default_and_reject_unknown_fields() {
        let o: KubernetesOptions = toml::from_str("").unwrap();
        assert_eq!(o, KubernetesOptions::default());
        assert!(toml::from_str::<KubernetesOptions>("imagee = 'x'").is_err());
        let o: KubernetesOptions = toml::from_str(
            r#"
namespace = "team-a"
image = "busybox"
image_pull_policy = "Always"
image_pull_secrets = ["regcred"]
storage_class = "fast"
storage_size = "5Gi"
delete_pvc_on_close = true
node_selector = { "kubernetes.io/os" = "linux" }
tolerations = [{ key = "dedicated", operator = "Equal", value = "agents", effect = "NoSchedule" }]
resources = { limits = { cpu = "1", memory = "1Gi" } }
env = { A = "1" }
"#,
        )
        .unwrap();
        assert_eq!(o.tolerations[0].key.as_deref(), Some("dedicated"));
        let typo = toml::from_str::<KubernetesOptions>(
            "tolerations = [{ key = 'k', operatr = 'Exists', tolerationSeconds = 5 }]",
        )
        .unwrap_err();
        assert!(typo.message().contains("operatr"), "{typo}");
        assert!(o.validate().is_ok());
        let bad = KubernetesOptions {
            namespace: "Bad_NS".into(),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().contains("namespace"));
    }

    fn kubeconfig(dir: &std::path::Path, server: &str) -> PathBuf {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: {server}\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        );
        let path = dir.join("kubeconfig");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn an_unreachable_api_server_is_named_with_the_cause() {
        let d = tempfile::tempdir().unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let opts = KubernetesOptions {
            kubeconfig: Some(kubeconfig(d.path(), &format!("http://127.0.0.1:{port}"))),
            ..Default::default()
        };
        let p = KubernetesProvisioner::new(opts.clone()).unwrap();
        let e = p.list().await.unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "kubernetes error: listing PVCs: cannot reach the Kubernetes API at http://127.0.0.1:{port}: connection refused"
            )
        );
        let p = KubernetesProvisioner::new(KubernetesOptions {
            context: Some("nope".into()),
            ..opts
        })
        .unwrap();
        let e = p.list().await.unwrap_err().to_string();
        assert!(
            e.contains("context `nope` is not in") && e.contains("its contexts: c"),
            "{e}"
        );
    }

    #[test]
    fn pod_spec_mounts_the_pvc_and_labels_are_valid() {
        let p = KubernetesProvisioner::new(KubernetesOptions {
            env: BTreeMap::from([("A".into(), "1".into())]),
            service_account: Some("agent".into()),
            ..Default::default()
        })
        .unwrap()
        .with_profile("k8s");
        let id = "Alice's workspace / with spaces";
        let spec = ProvisionSpec {
            workspace_id: id.into(),
            labels: BTreeMap::from([(labels::USER.to_string(), "alice smith".to_string())]),
        };
        let name = p.object_name(id);
        let pod = p.pod_object(&name, &spec);
        let s = pod.spec.as_ref().unwrap();
        let c = &s.containers[0];
        assert_eq!(c.name, CONTAINER);
        assert_eq!(c.command.as_ref().unwrap(), &["sleep", "infinity"]);
        assert_eq!(c.working_dir.as_deref(), Some(POD_WORKDIR));
        assert_eq!(c.volume_mounts.as_ref().unwrap()[0].mount_path, POD_WORKDIR);
        let v = &s.volumes.as_ref().unwrap()[0];
        assert_eq!(v.persistent_volume_claim.as_ref().unwrap().claim_name, name);
        assert_eq!(s.service_account_name.as_deref(), Some("agent"));
        let lab = pod.metadata.labels.as_ref().unwrap();
        for (k, v) in lab {
            assert!(names::is_label_key(k), "{k}");
            assert!(names::is_label_value(v), "{k}={v}");
        }
        assert_eq!(lab[LABEL_MANAGED_BY], MANAGED_BY);
        assert_eq!(lab[labels::PROFILE], "k8s");
        let ann = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[labels::WORKSPACE_ID], id);
        assert_eq!(ann[labels::USER], "alice smith");
        let pvc = p.pvc_object(&name, &spec);
        assert_eq!(
            pvc.spec.as_ref().unwrap().access_modes.as_ref().unwrap(),
            &["ReadWriteOnce"]
        );
    }

    #[test]
    fn pod_health_fails_fast_on_fatal_reasons() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "containerStatuses": [{
                "name": "workspace", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}
            }]}
        }))
        .unwrap();
        assert_eq!(
            pod_health(&pod, Duration::from_secs(60)),
            PodHealth::Fatal("ImagePullBackOff".into(), "no such image".into())
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available"
            }]}
        }))
        .unwrap();
        let grace = Duration::from_secs(60);
        assert!(matches!(pod_health(&pod, grace), PodHealth::Fatal(r, _) if r == "Unschedulable"));
        // Unschedulable for 10 s: maybe a node is on its way; for 61 s: fatal.
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available", "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]}
        }))
        .unwrap();
        let t0 = 1_767_225_600; // 2026-01-01T00:00:00Z
        assert_eq!(
            pod_health_at(&pod, grace, t0 + 10),
            PodHealth::Pending(Some("Unschedulable".into()))
        );
        assert!(
            matches!(pod_health_at(&pod, grace, t0 + 61), PodHealth::Fatal(r, _) if r == "Unschedulable")
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"}, "status": {"phase": "Failed"}
        }))
        .unwrap();
        assert_eq!(
            pod_health(&pod, Duration::ZERO),
            PodHealth::Finished("Failed".into())
        );
        assert_eq!(
            KubernetesProvisioner::new(KubernetesOptions::default())
                .unwrap()
                .state_of(None),
            SandboxState::Suspended
        );
    }
}
