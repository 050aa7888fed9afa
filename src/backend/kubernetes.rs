//! The Kubernetes backend (kube-rs): one Pod and one PVC per workspace
//! (docs/contract.md §7.6, without its Python gateway and bootstrap).
//!
//! * **Names** from the workspace id with a hash of the exact id, so
//!   distinct ids never share a Pod or PVC, and label values that are
//!   always valid; the raw id lives in an annotation (module `names`,
//!   docs/contract.md §11 point 27).
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

mod api;
mod events;
mod exec;
mod files;
mod health;
pub mod names;
mod options;
mod provision;
mod sandbox;
mod tarball;

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

pub use self::api::*;
pub use self::events::*;
use self::health::*;
pub use self::options::*;
pub use self::provision::*;
pub use self::sandbox::*;

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
