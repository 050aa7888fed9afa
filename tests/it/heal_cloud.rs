//! Workspaces that heal on the Daytona and OpenSandbox fakes (issue 15):
//! a long-lived manager whose sandbox the service deletes, stops,
//! archives or pauses behind its back recovers on the next call, once
//! however many callers race (one new sandbox on the service), and says
//! what happened. The E2B fake's cases are in `heal.rs`.

use std::sync::Arc;

use wsbench::backend::daytona::DaytonaProvisioner;
use wsbench::backend::opensandbox::OpenSandboxProvisioner;
use wsbench::backend::{Health, Provisioner};
use wsbench::engine::Workspace;
use wsbench::engine::events::WorkspaceState;
use wsbench::manager::WorkspaceManager;

use crate::heal::{count, lost, manager, notice, sh, states};
use crate::support::behind::{self, Behind};
use crate::support::cloud;
use crate::support::fake_daytona::FakeDaytona;
use crate::support::fake_opensandbox::FakeOpenSandbox;

const REPLACED: &str = "the sandbox was deleted by the service; a new one was created; files from the old one are lost";
const RESTARTED: &str =
    "the sandbox was stopped or paused by the service; it was restarted; files kept";

/// A live manager on a fake and the workspace it opened.
async fn open(prov: Arc<dyn Provisioner>) -> (WorkspaceManager, Arc<Workspace>) {
    let m = manager(prov);
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    (m, ws)
}

/// The service deletes the sandbox: twenty callers at once (commands and
/// listings) each fail once with the notice (files lost: nothing is
/// repeated on the new, empty sandbox), and exactly one new sandbox is
/// made; one recovery on the bus; then a write in the same situation fails once with the notice and
/// the next write works.
async fn deleted_is_replaced_once(
    fake: &dyn Behind,
    ids: &dyn Fn() -> Vec<String>,
    m: WorkspaceManager,
    ws: Arc<Workspace>,
) {
    let old = ids();
    assert_eq!(old.len(), 1, "{old:?}");
    let mut sub = m.events().subscribe();
    fake.delete_behind(&old[0]);
    let calls = (0..20).map(|i| {
        let ws = ws.clone();
        tokio::spawn(async move {
            let sb = ws.sandbox();
            if i % 2 == 0 {
                let echo = wsbench::backend::ExecRequest::shell("echo hi");
                sb.exec(echo, None).await.map(|_| ())
            } else {
                sb.list(sb.workdir()).await.map(|_| ())
            }
        })
    });
    // Files lost: no call is repeated on the new sandbox; each says so.
    crate::heal::each_finder_told(futures::future::join_all(calls).await, REPLACED);
    sh(&ws, "echo hi").await;
    let now = ids();
    assert_eq!(now.len(), 1, "exactly one new sandbox: {now:?}");
    assert_ne!(now, old);
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Gone, "{s:?}");
    assert_eq!(count(&s, |s| *s == WorkspaceState::Recovering), 1, "{s:?}");
    assert_eq!(notice(&s), (false, REPLACED.into()));

    fake.delete_behind(&now[0]);
    let e = ws.sandbox().write("x.txt", b"x").await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{REPLACED}; this call was not repeated")),
        "{e}"
    );
    ws.sandbox().write("x.txt", b"x").await.unwrap();
    assert_eq!(ws.sandbox().read("x.txt", None).await.unwrap(), b"x");
    m.shutdown().await.unwrap();
}

/// The service stops (or pauses) the sandbox: ten callers at once; the
/// one sandbox is started again with its files, and the notice says so.
async fn stopped_is_restarted_once(
    stop: &dyn Fn(&str),
    ids: &dyn Fn() -> Vec<String>,
    running: &dyn Fn(&str) -> bool,
    m: &WorkspaceManager,
    ws: &Arc<Workspace>,
) {
    sh(ws, "echo kept > f.txt").await;
    let id = ids()[0].clone();
    let mut sub = m.events().subscribe();
    stop(&id);
    let calls = (0..10).map(|_| {
        let ws = ws.clone();
        tokio::spawn(async move { sh(&ws, "cat f.txt").await })
    });
    for r in futures::future::join_all(calls).await {
        assert_eq!(r.unwrap(), "kept\n");
    }
    assert_eq!(ids(), vec![id.clone()], "started again, not replaced");
    assert!(running(&id));
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Stopped, "{s:?}");
    assert_eq!(count(&s, |s| *s == WorkspaceState::Recovering), 1, "{s:?}");
    assert_eq!(notice(&s), (true, RESTARTED.into()));
}

async fn daytona() -> Option<(FakeDaytona, WorkspaceManager, Arc<Workspace>)> {
    if !cloud::fakes_ready() {
        return None;
    }
    let f = FakeDaytona::start().await;
    let prov = DaytonaProvisioner::new(crate::cloud_daytona::opts(&f)).unwrap();
    let (m, ws) = open(Arc::new(prov)).await;
    Some((f, m, ws))
}

async fn opensandbox() -> Option<(FakeOpenSandbox, WorkspaceManager, Arc<Workspace>)> {
    if !cloud::fakes_ready() {
        return None;
    }
    let f = FakeOpenSandbox::start().await;
    let prov = OpenSandboxProvisioner::new(crate::cloud_opensandbox::opts(&f)).unwrap();
    let (m, ws) = open(Arc::new(prov)).await;
    Some((f, m, ws))
}

/// Daytona: deleted by the service (toolbox 404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daytona_deleted_by_the_service_is_replaced_once() {
    let Some((f, m, ws)) = daytona().await else {
        return;
    };
    deleted_is_replaced_once(&f, &|| f.ids(), m, ws).await;
}

/// Daytona: auto-stopped, then auto-archived (toolbox 400 "is not
/// started"): started again both times, files kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daytona_stopped_or_archived_is_started_with_its_files() {
    let Some((f, m, ws)) = daytona().await else {
        return;
    };
    let running = |id: &str| f.sandbox_state(id) == Some("started");
    stopped_is_restarted_once(&|id| f.stop_behind(id), &|| f.ids(), &running, &m, &ws).await;
    stopped_is_restarted_once(
        &|id| behind::archive_behind(&f, id),
        &|| f.ids(),
        &running,
        &m,
        &ws,
    )
    .await;
    m.shutdown().await.unwrap();
}

/// OpenSandbox: deleted by the service (404 `SANDBOX_NOT_FOUND`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_deleted_by_the_service_is_replaced_once() {
    let Some((f, m, ws)) = opensandbox().await else {
        return;
    };
    deleted_is_replaced_once(&f, &|| f.ids(), m, ws).await;
}

/// OpenSandbox: paused by the service (execd 503 `SANDBOX_NOT_RUNNING`):
/// resumed, files kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_paused_by_the_service_is_resumed_with_its_files() {
    let Some((f, m, ws)) = opensandbox().await else {
        return;
    };
    let running = |id: &str| f.sandbox_state(id) == Some("Running");
    stopped_is_restarted_once(&|id| f.stop_behind(id), &|| f.ids(), &running, &m, &ws).await;
    m.shutdown().await.unwrap();
}
