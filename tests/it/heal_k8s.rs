//! Workspaces that heal on the Kubernetes stub (issue 15): a long-lived
//! manager whose Pod is deleted, evicted, ends (Failed, Succeeded) or
//! loses its PVC behind its back recovers on the next call, once however
//! many callers race, and says what happened. A Pod comes back on the
//! kept PVC with its files; without the PVC a new, empty one is made.

use std::sync::Arc;

use wsbench::backend::kubernetes::{KubernetesOptions, KubernetesProvisioner};
use wsbench::backend::{BackendError, Health};
use wsbench::engine::Workspace;
use wsbench::engine::events::WorkspaceState;
use wsbench::manager::WorkspaceManager;

use crate::heal::{count, lost, manager, notice, sh, states};
use crate::support::k8s_stub::Stub;
use crate::support::{have, skip_or_fail};

const NS: &str = "wsbench-heal";

/// The notice when the Pod was deleted: found again through its kept
/// PVC, a new Pod mounts it (a restart as far as the files go).
const DELETED: &str =
    "the Pod was deleted outside wsbench; a new Pod was started on its volume; files kept";
/// The notice when the Pod was still there but ended (evicted, Failed,
/// Succeeded): replaced by a new one on the same PVC.
const ENDED: &str =
    "the Pod stopped running (evicted, failed or completed); a new one was created; files kept";

struct Env {
    stub: Stub,
    m: WorkspaceManager,
    ws: Arc<Workspace>,
    /// The Pod's and PVC's name.
    name: String,
    _dir: tempfile::TempDir,
}

/// A live manager on the stub and the workspace it opened, with a file
/// written; `None` (after saying why) without bubblewrap.
async fn env() -> Option<Env> {
    if !have("bwrap") {
        skip_or_fail("bwrap is not installed (the stub's pods run commands with it)");
        return None;
    }
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let prov = KubernetesProvisioner::new(KubernetesOptions {
        kubeconfig: Some(stub.kubeconfig(dir.path(), NS)),
        namespace: NS.into(),
        image: "stub/image:1".into(),
        ready_timeout_secs: 20,
        delete_timeout_secs: 10,
        ..Default::default()
    })
    .unwrap()
    .with_profile("heal");
    let m = manager(Arc::new(prov));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    let name = m
        .provisioner()
        .find(ws.id())
        .await
        .unwrap()
        .unwrap()
        .backend_id;
    sh(&ws, "echo kept > f.txt").await;
    Some(Env {
        stub,
        m,
        ws,
        name,
        _dir: dir,
    })
}

/// Ten commands at once after `kill` ended the Pod: all read the kept
/// file, one recovery, the notice `want`.
async fn ten_callers_one_recovery(e: &Env, kill: impl FnOnce(), want: (bool, &str)) {
    let mut sub = e.m.events().subscribe();
    kill();
    let calls = (0..10).map(|_| {
        let ws = e.ws.clone();
        tokio::spawn(async move { sh(&ws, "cat f.txt").await })
    });
    for r in futures::future::join_all(calls).await {
        assert_eq!(r.unwrap(), "kept\n");
    }
    assert!(e.stub.has_pod(NS, &e.name), "a Pod again");
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Gone, "{s:?}");
    assert_eq!(count(&s, |s| *s == WorkspaceState::Recovering), 1, "{s:?}");
    assert_eq!(notice(&s), (want.0, want.1.into()));
}

/// The Pod deleted (`kubectl delete pod --force`), then evicted, then
/// Failed, then Succeeded, under one live manager: each time the next
/// commands run on a new Pod on the kept PVC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_pod_deleted_evicted_or_ended_comes_back_on_its_pvc() {
    let Some(e) = env().await else {
        return;
    };
    ten_callers_one_recovery(
        &e,
        || e.stub.delete_pod_behind(NS, &e.name),
        (true, DELETED),
    )
    .await;
    for how in ["Evicted", "Failed", "Succeeded"] {
        ten_callers_one_recovery(
            &e,
            || e.stub.end_pod_behind(NS, &e.name, how),
            (false, ENDED),
        )
        .await;
    }
    e.m.destroy(e.ws.id()).await.unwrap();
    e.m.shutdown().await.unwrap();
}

/// Pod and PVC both gone: a new, empty workspace; a write in that moment
/// fails once with the notice, the next one works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_pod_and_pvc_gone_is_replaced_and_a_write_fails_once() {
    let Some(e) = env().await else {
        return;
    };
    let mut sub = e.m.events().subscribe();
    e.stub.delete_pod_behind(NS, &e.name);
    e.stub.delete_pvc_behind(NS, &e.name);
    let err = e.ws.sandbox().write("x.txt", b"x").await.unwrap_err();
    assert!(matches!(err, BackendError::Recovered { .. }), "{err}");
    let want = "the Pod was deleted outside wsbench; a new one was created; files from the old one are lost";
    assert!(
        err.to_string()
            .starts_with(&format!("{want}; this call was not repeated")),
        "{err}"
    );
    let s = states(&mut sub);
    assert_eq!(notice(&s), (false, want.into()));
    assert!(e.stub.has_pvc(NS, &e.name), "a new PVC");
    assert!(
        e.ws.sandbox()
            .read("f.txt", None)
            .await
            .unwrap_err()
            .is_not_found()
    );
    e.ws.sandbox().write("x.txt", b"x").await.unwrap();
    assert_eq!(sh(&e.ws, "cat x.txt; ls -d skills").await, "xskills\n");
    e.m.destroy(e.ws.id()).await.unwrap();
    e.m.shutdown().await.unwrap();
}
