//! Unit tests of the Kubernetes provisioner: its objects and its errors.

use std::path::PathBuf;

use super::*;

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
