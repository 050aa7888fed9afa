//! Issue 15 point 5: MCP sessions that heal. A streamable-HTTP server
//! that expires a session gets one re-initialize and the request again;
//! one that keeps expiring (or answers 404 from the start) fails once,
//! with an error that names the server, the HTTP status and what was
//! tried. A stdio server that exits is started again on next use, with
//! backoff. States `reconnecting` → `ready` / `failed` reach the bus and
//! the status (with the restart count).

use std::time::Duration;

use crate::mcp_stdio::{AGENT, SESSION, call};
use crate::support::mcp_http::{Expiry, SessionServer};
use crate::support::mcp_servers::*;
use serde_json::json;
use wsbench::engine::mcp::{McpDecl, McpOptions, McpState};
use wsbench::engine::tools::ToolState;

/// Rust type names and rmcp internals a user must never read.
fn assert_plain(text: &str) {
    for bad in [
        "Transport [",
        "wsbench::",
        "rmcp::",
        "Transport channel closed",
    ] {
        assert!(!text.contains(bad), "{bad:?} in {text}");
    }
}

/// The state names of `server` in `events`, in order.
fn names(events: &[wsbench::engine::events::Event], server: &str) -> Vec<String> {
    states(events)
        .into_iter()
        .filter(|(s, _, _)| s == server)
        .map(|(_, st, _)| st)
        .collect()
}

async fn http_workspace(
    expiry: Expiry,
) -> (
    SessionServer,
    tempfile::TempDir,
    std::sync::Arc<wsbench::engine::Workspace>,
    wsbench::engine::EventBus,
) {
    let server = SessionServer::start(expiry).await;
    let (d, ws, bus) = workspace(vec![McpDecl::http("exp", server.url(), true)]).await;
    ws.mcp().set_options(quick(10));
    (server, d, ws, bus)
}

#[tokio::test]
async fn an_expired_http_session_is_reinitialized_once_and_the_call_retried() {
    let (server, _d, ws, bus) = http_workspace(Expiry::Once).await;
    let l = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert!(l.servers[0].state.is_ready(), "{:?}", l.servers[0]);
    let mut sub = bus.subscribe();
    let r = ws
        .mcp()
        .call_tool(call("exp", "echo", json!({"text": "hi"})))
        .await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    assert_eq!(r.text(), "hi");
    let seen = server.seen();
    assert_eq!(seen.initializes, 2, "{seen:?}");
    assert_eq!(seen.calls, 2, "{seen:?}");
    let ev = names(&drain(&mut sub), "exp");
    let at = ev
        .iter()
        .position(|s| s == "reconnecting")
        .unwrap_or_else(|| panic!("no reconnecting state: {ev:?}"));
    assert_eq!(ev.last().map(String::as_str), Some("ready"), "{ev:?}");
    assert!(at < ev.len() - 1, "{ev:?}");
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert!(st.servers[0].state.is_ready(), "{:?}", st.servers[0]);
    assert_eq!(st.servers[0].restarts, 1);
    // The new session keeps working without another initialize.
    let r = ws
        .mcp()
        .call_tool(call("exp", "echo", json!({"text": "again"})))
        .await;
    assert_eq!(r.text(), "again");
    assert_eq!(server.seen().initializes, 2);
    ws.close().await;
}

#[tokio::test]
async fn concurrent_calls_on_an_expired_session_share_one_reinitialize() {
    let (server, _d, ws, _bus) = http_workspace(Expiry::Never).await;
    ws.mcp().list(AGENT, SESSION).await.unwrap();
    server.forget_sessions();
    let calls = (0..8).map(|i| {
        let ws = ws.clone();
        async move {
            ws.mcp()
                .call_tool(call("exp", "echo", json!({"text": format!("c{i}")})))
                .await
        }
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.state, ToolState::Success, "{}", r.text());
        assert_eq!(r.text(), format!("c{i}"));
    }
    assert_eq!(server.seen().initializes, 2, "{:?}", server.seen());
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert_eq!(st.servers[0].restarts, 1);
    ws.close().await;
}

#[tokio::test]
async fn a_session_that_keeps_expiring_fails_once_and_says_what_was_tried() {
    let (server, _d, ws, bus) = http_workspace(Expiry::Always).await;
    ws.mcp().list(AGENT, SESSION).await.unwrap();
    let mut sub = bus.subscribe();
    let r = ws
        .mcp()
        .call_tool(call("exp", "echo", json!({"text": "hi"})))
        .await;
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert_plain(&text);
    assert!(text.contains("`exp`"), "{text}");
    assert!(text.contains("HTTP 404"), "{text}");
    assert!(text.contains("re-initialized"), "{text}");
    assert!(text.contains("retried"), "{text}");
    // One re-initialize, one retry: no loop.
    let seen = server.seen();
    assert_eq!(seen.initializes, 2, "{seen:?}");
    assert_eq!(seen.calls, 2, "{seen:?}");
    let ev = names(&drain(&mut sub), "exp");
    assert!(ev.iter().any(|s| s == "reconnecting"), "{ev:?}");
    assert_eq!(ev.last().map(String::as_str), Some("failed"), "{ev:?}");
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    match &st.servers[0].state {
        McpState::Failed { reason, .. } => {
            assert_plain(reason);
            assert!(reason.contains("HTTP 404"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    ws.close().await;
}

#[tokio::test]
async fn a_server_that_answers_404_from_the_start_names_the_status() {
    let (server, _d, ws, _bus) = http_workspace(Expiry::FromStart).await;
    let l = ws.mcp().list(AGENT, SESSION).await.unwrap();
    match &l.servers[0].state {
        McpState::Failed { reason, .. } => {
            assert_plain(reason);
            assert!(reason.contains("HTTP 404"), "{reason}");
            assert!(reason.contains(&server.url()), "{reason}");
            assert!(reason.contains("initialize"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let r = ws
        .mcp()
        .call_tool(call("exp", "echo", json!({"text": "hi"})))
        .await;
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert_plain(&text);
    assert!(
        text.contains("`exp`") && text.contains("HTTP 404"),
        "{text}"
    );
    ws.close().await;
}

/// Options whose restarts after the first wait `backoff`.
fn with_backoff(backoff: Duration) -> McpOptions {
    McpOptions {
        restart_backoff: backoff,
        ..quick(30)
    }
}

#[tokio::test]
async fn a_stdio_server_that_exits_is_restarted_on_next_use() {
    let (_d, ws, bus) = workspace(vec![fake("fragile", &[])]).await;
    ws.mcp().set_options(with_backoff(Duration::ZERO));
    ws.mcp().list(AGENT, SESSION).await.unwrap();
    for round in 1..=2u32 {
        let r = ws
            .mcp()
            .call_tool(call("fragile", "die", json!({"code": 3})))
            .await;
        assert_eq!(r.state, ToolState::Error);
        assert!(r.text().contains("status 3"), "{}", r.text());
        let mut sub = bus.subscribe();
        let r = ws
            .mcp()
            .call_tool(call("fragile", "echo", json!({"text": "back"})))
            .await;
        assert_eq!(r.state, ToolState::Success, "{}", r.text());
        assert_eq!(r.text(), "back");
        let ev = names(&drain(&mut sub), "fragile");
        assert_eq!(
            ev.first().map(String::as_str),
            Some("reconnecting"),
            "{ev:?}"
        );
        assert_eq!(ev.last().map(String::as_str), Some("ready"), "{ev:?}");
        let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
        assert_eq!(st.servers[0].restarts, round);
        assert!(st.servers[0].process.is_some());
    }
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn restarts_after_the_first_wait_for_the_backoff() {
    let (_d, ws, _bus) = workspace(vec![fake("fragile", &[])]).await;
    // An hour: the test never reaches it, so nothing here is timed.
    ws.mcp()
        .set_options(with_backoff(Duration::from_secs(3600)));
    ws.mcp().list(AGENT, SESSION).await.unwrap();
    let die = || call("fragile", "die", json!({"code": 3}));
    assert_eq!(ws.mcp().call_tool(die()).await.state, ToolState::Error);
    // The first restart is at once; it dies again before any success.
    let r = ws.mcp().call_tool(die()).await;
    assert!(r.text().contains("status 3"), "{}", r.text());
    let r = ws
        .mcp()
        .call_tool(call("fragile", "echo", json!({"text": "x"})))
        .await;
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert!(text.contains("`fragile`"), "{text}");
    assert!(text.contains("status 3"), "{text}");
    assert!(text.contains("restarted again in"), "{text}");
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert_eq!(st.servers[0].restarts, 1);
    assert!(st.servers[0].process.is_none());
    // An explicit restart does not wait.
    let st = ws.mcp().restart(AGENT, SESSION, "fragile").await.unwrap();
    assert!(st.state.is_ready(), "{st:?}");
    ws.close().await;
    assert_no_zombies().await;
}
