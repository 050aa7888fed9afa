//! Profile options of a Kubernetes workspace (namespace, image, resources, tolerations, ...) and their defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Toleration;
use serde::{Deserialize, Serialize};

use super::names;

/// The default image: has `sh`, `tar`, `stat` and `head`, which the
/// file operations need (no `rg`: Glob/Grep then need an image with it).
pub const DEFAULT_IMAGE: &str = "debian:bookworm-slim";

/// Default namespace.
pub(crate) const DEFAULT_NAMESPACE: &str = "wsbench";

/// Path of the workspace in the Pod: the PVC's mount point (§7.6).
pub(crate) const POD_WORKDIR: &str = "/workspace";

/// Name of the one container of a workspace Pod.
pub(crate) const CONTAINER: &str = "workspace";

/// Name of the PVC volume in the Pod spec.
pub const VOLUME: &str = "workspace-data";

/// Label every wsbench object carries (`app.kubernetes.io/managed-by`).
pub(crate) const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Value of [`LABEL_MANAGED_BY`].
pub(crate) const MANAGED_BY: &str = "wsbench";

/// Pod waiting reasons that will not heal by waiting.
pub(crate) const FATAL_REASONS: &[&str] = &[
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
    pub(super) fn as_str(self) -> &'static str {
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
pub(super) struct TolerationOption {
    pub(super) key: Option<String>,
    pub(super) operator: Option<String>,
    pub(super) value: Option<String>,
    pub(super) effect: Option<String>,
    pub(super) toleration_seconds: Option<i64>,
}

pub(super) fn strict_tolerations<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<Toleration>, D::Error> {
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
}
