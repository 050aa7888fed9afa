//! The Workspaces pane shows a recovery from the bus (issue 15 point 5):
//! a local workspace whose directory is removed under the TUI's manager
//! is made again on the next call, and its row says `replaced` while the
//! other row keeps its state; the header and Logs carry the notice.

use crate::support::tui;

use std::sync::Arc;

use tui::*;
use wsbench::backend::Provisioner;
use wsbench::backend::local::LocalProvisioner;
use wsbench::engine::EventBus;
use wsbench::manager::{ManagerOptions, WorkspaceManager};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_pane_shows_a_replaced_workspace() {
    let base = tempfile::tempdir().unwrap();
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(base.path()));
    let opts = ManagerOptions::for_provisioner(prov.as_ref());
    let m = WorkspaceManager::new("local", prov, opts, EventBus::default());
    let ws = m
        .get_workspace("tester", "coder", "s-001", Some("ws-alpha"))
        .await
        .unwrap();
    m.get_workspace("tester", "reviewer", "s-002", Some("ws-beta"))
        .await
        .unwrap();
    let mut o = options();
    o.manager = Some(m.clone());
    // A clock the test moves: the header's `replaced` passes after 60 s.
    let later = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let fixed = o.clock.clone();
    let l = later.clone();
    o.clock = Arc::new(move || {
        fixed() + std::time::Duration::from_secs(l.load(std::sync::atomic::Ordering::Relaxed))
    });
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    hs.keys("esc 0 z").await;
    let before = hs.draw().await;
    assert!(!before.contains("replaced"), "{before}");

    std::fs::remove_dir_all(ws.sandbox().host_root().unwrap()).unwrap();
    // Files lost: the call that found it fails once with the notice.
    ws.sandbox().list(ws.sandbox().workdir()).await.unwrap_err();
    hs.settle().await;
    let text = hs.draw().await;
    let row = |id: &str| {
        text.lines()
            .find(|l| l.contains(id))
            .unwrap_or_else(|| panic!("no {id} row:\n{text}"))
            .to_string()
    };
    assert!(row("ws-alpha").contains("replaced"), "{text}");
    assert!(!row("ws-beta").contains("replaced"), "{text}");
    // The header says `replaced` and keeps its ids; the notice is a toast.
    let header = text.lines().next().unwrap();
    assert!(header.contains("○ replaced"), "{header}");
    assert!(
        header.contains("ws ws-alpha") && header.contains("session s-001"),
        "{header}"
    );
    assert!(!header.contains("files"), "{header}");
    assert!(
        text.contains("workspace replaced: the workspace directory was removed"),
        "{text}"
    );
    let mut s = settings(base.path());
    s.add_filter(r"\b(59m|1h)\b", "[TTL]");
    s.add_filter(r"\[TTL\] (\[DUR\]|0m)", "[TTL]");
    // The columns' padding depends on how long the spans were.
    s.add_filter(r"\s*(\[DUR\])+/\[TTL\]\s*", " [TIMES] ");
    s.bind(|| insta::assert_snapshot!("workspaces_replaced_120x40", text));
    // The smaller sizes keep the recovery state in view.
    for (w, h) in [(80, 24), (40, 10)] {
        hs.resize(w, h);
        let text = hs.draw().await;
        assert!(text.contains("replaced"), "{w}x{h}:\n{text}");
        s.bind(|| insta::assert_snapshot!(format!("workspaces_replaced_{w}x{h}"), text));
    }
    // A minute on, the header is back to `ready`.
    hs.resize(120, 40);
    later.store(61, std::sync::atomic::Ordering::Relaxed);
    hs.app.tick();
    let text = hs.draw().await;
    let header = text.lines().next().unwrap();
    assert!(header.contains("● ready"), "{header}");
    m.shutdown().await.unwrap();
}

/// `C` in the Workspaces pane runs the gc sweep (issue 15 point 4): its
/// dry run, on a task, finds the workspace another process made and left
/// running, idle past the TTL (0 here), and a y/n dialog lists it (not
/// the workspace open here); `y` closes it (suspended at the provider),
/// and a toast says so. The dialog at the three sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_pane_gc_asks_then_closes_what_is_idle() {
    let base = tempfile::tempdir().unwrap();
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(base.path()));
    {
        // Another process made ws-idle and went away without closing it.
        let opts = ManagerOptions::for_provisioner(prov.as_ref());
        let other = WorkspaceManager::new("local", prov.clone(), opts, EventBus::default());
        other
            .get_workspace("tester", "reviewer", "s-002", Some("ws-idle"))
            .await
            .unwrap();
    }
    tokio::task::yield_now().await;
    let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
    opts.ttl = std::time::Duration::ZERO;
    let m = WorkspaceManager::new("local", prov.clone(), opts, EventBus::default());
    let ws = m
        .get_workspace("tester", "coder", "s-001", Some("ws-open"))
        .await
        .unwrap();
    let mut o = options();
    o.manager = Some(m.clone());
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    hs.keys("esc 0 z C").await;
    let text = hs.draw().await;
    assert!(
        text.contains("Close (suspend) 1 workspace idle past the TTL?"),
        "{text}"
    );
    assert!(text.contains("ws-idle: idle"), "{text}");
    assert!(
        !text.contains("ws-open:"),
        "the open one is not swept\n{text}"
    );
    let mut s = settings(base.path());
    s.add_filter(r"idle \d s\b", "idle N s");
    s.add_filter(r"\b(59m|1h)\b", "[TTL]");
    s.add_filter(r"\s*(\[DUR\]|-)+/(\[TTL\]|\[DUR\]|-)\s*", " [TIMES] ");
    for (w, h) in [(120, 40), (80, 24), (40, 10)] {
        hs.resize(w, h);
        let text = hs.draw().await;
        s.bind(|| insta::assert_snapshot!(format!("workspaces_gc_dialog_{w}x{h}"), text));
    }
    hs.resize(120, 40);
    hs.keys("y").await;
    let text = hs.draw().await;
    let state = prov.find("ws-idle").await.unwrap().unwrap().state;
    assert_eq!(state, wsbench::backend::SandboxState::Suspended, "{text}");
    assert!(text.contains("gc: closed 1 workspace"), "{text}");
    assert_eq!(
        prov.find("ws-open").await.unwrap().unwrap().state,
        wsbench::backend::SandboxState::Running
    );
    m.shutdown().await.unwrap();
}
