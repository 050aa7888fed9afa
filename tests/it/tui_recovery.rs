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
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    hs.keys("esc 0 z").await;
    let before = hs.draw().await;
    assert!(!before.contains("replaced"), "{before}");

    std::fs::remove_dir_all(ws.sandbox().host_root().unwrap()).unwrap();
    ws.sandbox().list(ws.sandbox().workdir()).await.unwrap();
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
    let mut s = settings(base.path());
    s.add_filter(r"\b(59m|1h)\b", "[TTL]");
    s.add_filter(r"\[TTL\] (\[DUR\]|0m)", "[TTL]");
    // The columns' padding depends on how long the spans were.
    s.add_filter(r"\s*(\[DUR\])+/\[TTL\]\s*", " [TIMES] ");
    s.bind(|| insta::assert_snapshot!("workspaces_replaced_120x40", text));
    m.shutdown().await.unwrap();
}
