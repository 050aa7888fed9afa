//! Issue 15 point 5 in the TUI, from a fresh-user trial: a stdio server
//! killed behind the pane's back is started again by Enter (its next
//! use: the restart is counted and shown), and `.mcp` written by another
//! process (`wsbench mcp add` while the TUI runs) shows after `r` or when
//! the file watch reports the change.

use crate::support::mcp_servers::fake;
use crate::support::tui::*;

use std::time::Duration;

use wsbench::engine::mcp::McpState;
use wsbench::tui::pane::Pane;
use wsbench::tui::panes::mcp::McpPane;

fn mcp_options() -> wsbench::tui::app::AppOptions {
    let mut o = options();
    o.agent = "coder".into();
    o
}

async fn evs_status(hs: &Harness) -> wsbench::engine::mcp::McpStatus {
    let l = hs.app.cx.ws.mcp().status("coder", "s-001").await.unwrap();
    l.servers.into_iter().find(|s| s.name == "evs").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_starts_a_killed_stdio_server_again_and_the_pane_counts_it() {
    let (_dir, ws) = fixture(|_| {}).await;
    ws.mcp()
        .add(fake("evs", &[]), "coder", "s-001", false)
        .await
        .unwrap();
    let mut hs = Harness::new(ws.clone(), mcp_options(), 120, 40).await;
    // `evs` is the last server; start it.
    hs.keys("esc 9 z G s").await;
    let st = evs_status(&hs).await;
    assert!(st.state.is_ready(), "{st:?}");
    let pid: i32 = st
        .process
        .as_deref()
        .and_then(|p| p.strip_prefix("pid "))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {st:?}"));
    unsafe { libc::kill(pid, libc::SIGKILL) };
    // Wait for the exit to be noticed (the watch on the process).
    let mut failed = false;
    for _ in 0..400 {
        hs.settle().await;
        if matches!(evs_status(&hs).await.state, McpState::Failed { .. }) {
            failed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(failed, "{:?}", evs_status(&hs).await);
    let text = hs.draw().await;
    assert!(text.contains("evs") && text.contains("failed"), "{text}");
    // Enter uses it: started again at once (the first restart has no
    // backoff), counted, its tools open.
    hs.keys("enter").await;
    let st = evs_status(&hs).await;
    assert!(st.state.is_ready(), "{st:?}");
    assert_eq!(st.restarts, 1, "{st:?}");
    let text = hs.draw().await;
    assert!(text.contains("1 restart"), "{text}");
    assert_eq!(
        hs.app.pane_call::<McpPane, _>("mcp", |p, _| p.context()),
        Some("mcp_tools")
    );
    ws.close().await;
}

/// Adds server `name` to `.mcp` for coder/s-001, as another process's
/// `wsbench mcp add` would (the TUI's workspace does not know).
fn add_behind(dir: &std::path::Path, name: &str) {
    let path = dir.join(".mcp");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["mcps"]["coder"]["s-001"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "name": name,
            "is_stateful": true,
            "mcp_config": {"type": "stdio_mcp", "command": "python3", "args": ["x.py"]}
        }));
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn names(hs: &mut Harness) -> Vec<String> {
    hs.app
        .pane_call::<McpPane, _>("mcp", |p, _| p.server_names())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r_reads_mcp_again_after_another_process_added_a_server() {
    let (dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, mcp_options(), 120, 40).await;
    hs.keys("esc 9 z").await;
    assert_eq!(names(&mut hs), ["docs", "everything"]);
    add_behind(dir.path(), "later");
    // A listing alone keeps the declarations it read.
    let text = hs.draw().await;
    assert!(text.contains("MCP (2)"), "{text}");
    hs.keys("r").await;
    assert_eq!(names(&mut hs), ["docs", "everything", "later"]);
    let text = hs.draw().await;
    assert!(text.contains("MCP (3)"), "{text}");
}

/// Settles `hs` until `cond` holds (a bound of 20 s turns a miss into a
/// failure; nothing is timed).
async fn until(hs: &mut Harness, what: &str, mut cond: impl FnMut(&mut Harness) -> bool) {
    let t0 = std::time::Instant::now();
    while !cond(hs) {
        assert!(t0.elapsed() < Duration::from_secs(20), "waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        hs.settle().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_watch_reads_mcp_again_when_another_process_writes_it() {
    let (dir, ws) = fixture(|_| {}).await;
    let mut o = mcp_options();
    o.watch = true;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    hs.keys("esc 9 z").await;
    assert_eq!(names(&mut hs), ["docs", "everything"]);
    // Let the watch start before the write.
    tokio::time::sleep(Duration::from_millis(300)).await;
    add_behind(dir.path(), "later");
    until(&mut hs, "the pane to list `later`", |hs| {
        names(hs).iter().any(|n| n == "later")
    })
    .await;
}
