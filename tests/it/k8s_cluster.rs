//! The Kubernetes backend on a real cluster (kind, k3d, minikube, ...).
//!
//! Runs only when `WSBENCH_K8S_CONTEXT` names a kubeconfig context; it is
//! skipped otherwise (no cluster can run on the project's machines, so CI
//! never sets it). Optional: `WSBENCH_K8S_IMAGE` (default
//! `debian:bookworm-slim`), `WSBENCH_K8S_NAMESPACE` (default
//! `wsbench-test`). The workspace is destroyed at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use wsbench::backend::kubernetes::{KubernetesOptions, KubernetesProvisioner};
use wsbench::backend::{ExecRequest, ProvisionSpec, Provisioner, SandboxState};

#[tokio::test]
async fn a_workspace_on_a_real_cluster() {
    let Ok(context) = std::env::var("WSBENCH_K8S_CONTEXT") else {
        eprintln!("SKIPPED: set WSBENCH_K8S_CONTEXT to a kubeconfig context to run this test");
        return;
    };
    let opts = KubernetesOptions {
        context: Some(context),
        namespace: std::env::var("WSBENCH_K8S_NAMESPACE").unwrap_or_else(|_| "wsbench-test".into()),
        image: std::env::var("WSBENCH_K8S_IMAGE")
            .unwrap_or_else(|_| wsbench::backend::kubernetes::DEFAULT_IMAGE.into()),
        ready_timeout_secs: 300,
        ..Default::default()
    };
    let prov = KubernetesProvisioner::new(opts).unwrap();
    let id = format!("real-cluster-{}", uuid::Uuid::new_v4().simple());
    let spec = ProvisionSpec {
        workspace_id: id.clone(),
        labels: BTreeMap::new(),
    };
    let result = async {
        let sb = prov.provision(&spec).await?;
        sb.write("hello.txt", b"from wsbench").await?;
        let mut req = ExecRequest::shell("cat hello.txt; exit 3");
        req.timeout = Some(Duration::from_secs(60));
        let (out, stdout, _) =
            wsbench::backend::cloud::exec_request_capture(sb.as_ref(), req).await?;
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(stdout, b"from wsbench");
        prov.suspend(&id).await?;
        let info = prov.find(&id).await?.expect("the PVC survives suspend");
        assert!(matches!(
            info.state,
            SandboxState::Suspended | SandboxState::Running
        ));
        let sb = prov.attach(&info).await?;
        assert_eq!(sb.read("hello.txt", None).await?, b"from wsbench");
        Ok::<_, wsbench::backend::BackendError>(())
    }
    .await;
    let cleanup = prov.destroy(&id).await;
    result.unwrap();
    cleanup.unwrap();
}
