//! Workspaces that heal (issue 15 point 2): a long-lived manager whose
//! sandbox is deleted, stopped or paused behind its back recovers on the
//! next call, once however many callers race, repeats the call when it is
//! safe and otherwise fails it once with a notice that says what happened.
//! Local (directory removed), bubblewrap (host dir removed), the real
//! Docker daemon (`docker rm -f`, `docker stop`, `docker pause` of a
//! container the test made) and the E2B fake (sandbox deleted or paused by
//! the service).

use std::sync::Arc;

use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapProvisioner};
use wsbench::backend::docker::{DockerOptions, DockerProvisioner, PullPolicy};
use wsbench::backend::e2b::E2bProvisioner;
use wsbench::backend::local::LocalProvisioner;
use wsbench::backend::{BackendError, Health, Provisioner};
use wsbench::engine::Workspace;
use wsbench::engine::events::{Event, Received, Subscriber, WorkspaceState};
use wsbench::manager::{ManagerOptions, WorkspaceManager};

use crate::support::fake_e2b::FakeE2b;
use crate::support::{cloud, fake_sandbox, images, skip_or_fail};

pub(crate) fn manager(prov: Arc<dyn Provisioner>) -> WorkspaceManager {
    let opts = ManagerOptions::for_provisioner(prov.as_ref());
    WorkspaceManager::new("heal", prov, opts, Default::default())
}

/// The workspace states published since the last call.
pub(crate) fn states(sub: &mut Subscriber) -> Vec<WorkspaceState> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let Received::Event(env) = r
            && let Event::Workspace { state } = env.event.clone()
        {
            out.push(state);
        }
    }
    out
}

pub(crate) fn count(states: &[WorkspaceState], want: fn(&WorkspaceState) -> bool) -> usize {
    states.iter().filter(|s| want(s)).count()
}

/// The notice of the one `replaced` or `restarted` event, and which.
pub(crate) fn notice(states: &[WorkspaceState]) -> (bool, String) {
    let mut found: Vec<(bool, String)> = states
        .iter()
        .filter_map(|s| match s {
            WorkspaceState::Replaced { notice } => Some((false, notice.clone())),
            WorkspaceState::Restarted { notice } => Some((true, notice.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(found.len(), 1, "one recovery: {states:?}");
    found.remove(0)
}

pub(crate) fn lost(states: &[WorkspaceState]) -> Health {
    let h: Vec<Health> = states
        .iter()
        .filter_map(|s| match s {
            WorkspaceState::Lost { health, .. } => Some(*health),
            _ => None,
        })
        .collect();
    assert_eq!(h.len(), 1, "{states:?}");
    h[0]
}

pub(crate) async fn sh(ws: &Workspace, line: &str) -> String {
    let (o, out, err) = cloud::sh(ws.sandbox().as_ref(), line).await;
    assert_eq!(o.exit_code, Some(0), "{line}: {err}");
    out
}

/// The error of a call that found its sandbox replaced with the files
/// lost: not repeated, with the notice `want`.
pub(crate) fn assert_not_repeated(e: &BackendError, want: &str) {
    assert!(matches!(e, BackendError::Recovered { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{want}; this call was not repeated")),
        "{e}"
    );
}

/// The calls of concurrent callers after a loss: each one that found
/// the loss failed with the notice `want` (one that started after the
/// recovery finished works); at least one did.
pub(crate) fn each_finder_told(
    results: Vec<Result<Result<(), BackendError>, tokio::task::JoinError>>,
    want: &str,
) {
    let mut told = 0;
    for r in results {
        if let Err(e) = r.unwrap() {
            assert_not_repeated(&e, want);
            told += 1;
        }
    }
    assert!(told >= 1, "the loss was said");
}

const DIR_LOST: &str =
    "the workspace directory was removed; a new one was created; files from the old one are lost";

/// Local: the directory removed under a live manager. Even a listing is
/// not repeated on the new, empty directory (it would hide the loss): it
/// fails once with the notice, and the next one lists the layout made
/// again; a write likewise fails once, the next one works.
#[tokio::test]
async fn local_directory_removed_is_made_again_once() {
    let base = tempfile::tempdir().unwrap();
    let m = manager(Arc::new(LocalProvisioner::new(base.path())));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    let sb = ws.sandbox().clone();
    sb.write("a.txt", b"a").await.unwrap();
    let mut sub = m.events().subscribe();
    std::fs::remove_dir_all(sb.host_root().unwrap()).unwrap();

    let e = sb.list(sb.workdir()).await.unwrap_err();
    assert_not_repeated(&e, DIR_LOST);
    let listed = sb.list(sb.workdir()).await.unwrap();
    assert!(listed.iter().any(|f| f.name == "skills"), "{listed:?}");
    assert!(sb.read("a.txt", None).await.unwrap_err().is_not_found());
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Gone);
    assert_eq!(count(&s, |s| *s == WorkspaceState::Recovering), 1);
    let (restarted, text) = notice(&s);
    assert!(!restarted);
    assert_eq!(
        text,
        "the workspace directory was removed; a new one was created; files from the old one are lost"
    );

    // Not safe to repeat: fails once, saying what happened.
    std::fs::remove_dir_all(sb.host_root().unwrap()).unwrap();
    let e = sb.write("b.txt", b"b").await.unwrap_err();
    assert!(matches!(e, BackendError::Recovered { .. }), "{e}");
    assert!(
        e.to_string().starts_with(
            "the workspace directory was removed; a new one was created; files from the old one are lost; this call was not repeated"
        ),
        "{e}"
    );
    sb.write("b.txt", b"b").await.unwrap();
    assert_eq!(sb.read("b.txt", None).await.unwrap(), b"b");
    // The same workspace object, held all along.
    assert!(Arc::ptr_eq(
        &ws,
        &m.get_workspace("u", "a", "s", None).await.unwrap()
    ));
    m.shutdown().await.unwrap();
}

/// A pre-warmed workspace heals like any other once claimed: the pool
/// wraps its sandboxes for the manager, so a claimed workspace whose
/// directory is removed is made again on the next listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_prewarmed_workspace_heals() {
    let base = tempfile::tempdir().unwrap();
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(base.path()));
    let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
    opts.isolation = wsbench::manager::IsolationPolicy::PerSession;
    opts.prewarm = wsbench::manager::PrewarmConfig {
        size: 1,
        max_creating: 1,
    };
    let m = WorkspaceManager::new("heal", prov, opts, Default::default());
    m.warm_up();
    while m.prewarmed() < 1 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    let sb = ws.sandbox().clone();
    let claimed_dir = sb.host_root().unwrap().to_path_buf();
    sb.write("a.txt", b"a").await.unwrap();
    let mut sub = m.events().subscribe();
    std::fs::remove_dir_all(&claimed_dir).unwrap();

    assert_not_repeated(&sb.list(sb.workdir()).await.unwrap_err(), DIR_LOST);
    let listed = sb.list(sb.workdir()).await.unwrap();
    assert!(listed.iter().any(|f| f.name == "skills"), "{listed:?}");
    let s: Vec<WorkspaceState> = states(&mut sub);
    assert_eq!(lost(&s), Health::Gone);
    let (restarted, _) = notice(&s);
    assert!(!restarted);
    assert!(claimed_dir.is_dir(), "made again at the same place");
    m.shutdown().await.unwrap();
}

/// Twenty callers hit the dead sandbox at once: one recovery; each call
/// that found the loss fails once with the notice (none is repeated on
/// the empty directory); a later call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_callers_make_one_recovery() {
    let base = tempfile::tempdir().unwrap();
    let m = manager(Arc::new(LocalProvisioner::new(base.path())));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    let mut sub = m.events().subscribe();
    std::fs::remove_dir_all(ws.sandbox().host_root().unwrap()).unwrap();
    let calls = (0..20).map(|_| {
        let sb = ws.sandbox().clone();
        tokio::spawn(async move { sb.list(sb.workdir()).await })
    });
    let results = futures::future::join_all(calls).await;
    each_finder_told(
        results
            .into_iter()
            .map(|r| r.map(|x| x.map(|_| ())))
            .collect(),
        DIR_LOST,
    );
    let s = states(&mut sub);
    assert_eq!(count(&s, |s| *s == WorkspaceState::Recovering), 1, "{s:?}");
    notice(&s);
    ws.sandbox().list(ws.sandbox().workdir()).await.unwrap();
    m.shutdown().await.unwrap();
}

/// A workspace the manager closed is not brought back behind its back:
/// the error passes through.
#[tokio::test]
async fn a_closed_workspace_is_not_recovered() {
    let base = tempfile::tempdir().unwrap();
    let m = manager(Arc::new(LocalProvisioner::new(base.path())));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    m.close(ws.id()).await.unwrap();
    std::fs::remove_dir_all(ws.sandbox().host_root().unwrap()).unwrap();
    let e = ws.sandbox().list("/").await.unwrap_err();
    assert_eq!(e.health(), Health::Gone, "{e}");
    m.shutdown().await.unwrap();
}

/// Bubblewrap: the host directory removed; the command that finds it
/// fails once with the notice (its files are lost: running it on the new,
/// empty directory would hide that); the next one runs in the directory
/// made again.
#[tokio::test]
async fn bubblewrap_host_dir_removed_recovers_on_the_next_command() {
    if !fake_sandbox::bwrap_available() {
        skip_or_fail("bubblewrap (bwrap) is not available");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let prov = BubblewrapProvisioner::new(BubblewrapOptions {
        base_dir: Some(base.path().to_path_buf()),
        ..BubblewrapOptions::default()
    });
    let m = manager(Arc::new(prov));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    let mut sub = m.events().subscribe();
    std::fs::remove_dir_all(ws.sandbox().host_root().unwrap()).unwrap();
    let e = ws
        .sandbox()
        .exec(wsbench::backend::ExecRequest::shell("echo ran"), None)
        .await
        .unwrap_err();
    assert_not_repeated(&e, DIR_LOST);
    assert_eq!(sh(&ws, "ls -d skills && echo hi").await, "skills\nhi\n");
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Gone);
    assert!(notice(&s).1.contains("files from the old one are lost"));
    m.shutdown().await.unwrap();
}

/// Removes the test's containers when it ends, pass or fail.
struct DockerGuard(WorkspaceManager, String);

impl Drop for DockerGuard {
    /// Runs on the test's own (multi-thread) runtime, which is still up.
    fn drop(&mut self) {
        let destroy = self.0.provisioner().destroy(&self.1);
        let _ = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(destroy));
    }
}

/// Docker: `docker pause`, `docker stop` and `docker rm -f` of the
/// workspace's container under a live manager. Paused and stopped come
/// back with their files; a removed one is made anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_pause_stop_and_rm_recover_on_the_next_call() {
    if let Err(why) = images::docker_ready(images::DEBIAN_IMAGE).await {
        skip_or_fail(&why);
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let prov = DockerProvisioner::new(DockerOptions {
        image: images::DEBIAN_IMAGE.into(),
        pull: PullPolicy::Never,
        network: "none".into(),
        base_dir: Some(base.path().to_path_buf()),
        ..Default::default()
    })
    .with_profile("heal-test");
    let m = manager(Arc::new(prov));
    let id = format!("heal-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let _guard = DockerGuard(m.clone(), id.clone());
    let ws = m
        .get_workspace("u", "a", "s", Some(id.as_str()))
        .await
        .unwrap();
    sh(&ws, "echo kept > f.txt").await;
    let docker = wsbench::backend::docker::connect(None).await.unwrap();
    let container = m.provisioner().find(&id).await.unwrap().unwrap().backend_id;
    let mut sub = m.events().subscribe();

    docker.pause_container(&container).await.unwrap();
    assert_eq!(sh(&ws, "cat f.txt").await, "kept\n");
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Stopped);
    assert_eq!(
        notice(&s),
        (
            true,
            "the container was stopped or paused outside wsbench; it was restarted; files kept"
                .into()
        )
    );

    docker
        .stop_container(
            &container,
            None::<bollard::query_parameters::StopContainerOptions>,
        )
        .await
        .unwrap();
    assert_eq!(sh(&ws, "cat f.txt").await, "kept\n");
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Stopped);
    assert!(notice(&s).0, "restarted: {s:?}");

    docker
        .remove_container(
            &container,
            Some(bollard::query_parameters::RemoveContainerOptions {
                force: true,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    // A command that never started is repeated on the new container.
    sh(&ws, "ls -d skills").await;
    let s = states(&mut sub);
    assert_eq!(lost(&s), Health::Gone);
    let (restarted, text) = notice(&s);
    assert!(!restarted, "{text}");
    assert!(
        text.starts_with("the container was deleted outside wsbench; a new one was created"),
        "{text}"
    );
    m.destroy(&id).await.unwrap();
    m.shutdown().await.unwrap();
}

/// A live manager on the E2B fake and the workspace it opened; `None`
/// (after saying why) when the fakes cannot run here.
async fn e2b_workspace() -> Option<(FakeE2b, WorkspaceManager, Arc<Workspace>)> {
    if !cloud::fakes_ready() {
        return None;
    }
    let f = FakeE2b::start().await;
    let prov = E2bProvisioner::new(crate::cloud_e2b::opts(&f)).unwrap();
    let m = manager(Arc::new(prov));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    Some((f, m, ws))
}

/// E2B: the service deletes the sandbox; twenty callers at once get one
/// new sandbox, each failing once with the notice (files lost); a write
/// in that moment fails once with the notice too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_deleted_by_the_service_is_replaced_once() {
    let Some((f, m, ws)) = e2b_workspace().await else {
        return;
    };
    let old = f.ids();
    assert_eq!(old.len(), 1);
    let mut sub = m.events().subscribe();
    f.delete_behind(&old[0]);
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
    each_finder_told(
        futures::future::join_all(calls).await,
        "the sandbox was deleted by the service; a new one was created; files from the old one are lost",
    );
    sh(&ws, "echo hi").await;
    let ids = f.ids();
    assert_eq!(ids.len(), 1, "exactly one new sandbox: {ids:?}");
    assert_ne!(ids, old);
    let s = states(&mut sub);
    assert_eq!(count(&s, |s| *s == WorkspaceState::Recovering), 1, "{s:?}");
    assert_eq!(
        notice(&s),
        (
            false,
            "the sandbox was deleted by the service; a new one was created; files from the old one are lost"
                .into()
        )
    );

    f.delete_behind(&ids[0]);
    let e = ws.sandbox().write("x.txt", b"x").await.unwrap_err();
    assert!(
        e.to_string().starts_with(
            "the sandbox was deleted by the service; a new one was created; files from the old one are lost; this call was not repeated"
        ),
        "{e}"
    );
    ws.sandbox().write("x.txt", b"x").await.unwrap();
    m.shutdown().await.unwrap();
}

/// E2B: the service pauses the sandbox; the next call resumes it and the
/// files are still there.
#[tokio::test]
async fn e2b_paused_by_the_service_is_resumed_with_its_files() {
    let Some((f, m, ws)) = e2b_workspace().await else {
        return;
    };
    sh(&ws, "echo kept > f.txt").await;
    let id = f.ids()[0].clone();
    let mut sub = m.events().subscribe();
    f.pause_behind(&id);
    assert_eq!(sh(&ws, "cat f.txt").await, "kept\n");
    assert_eq!(f.ids(), vec![id.clone()], "resumed, not replaced");
    assert_eq!(f.sandbox_state(&id), Some("running"));
    let s = states(&mut sub);
    assert_eq!(
        notice(&s),
        (
            true,
            "the sandbox stopped answering; it was restarted; files kept".into()
        )
    );
    m.shutdown().await.unwrap();
}
