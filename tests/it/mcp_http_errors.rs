//! Issue 15 point 5, a fresh-user trial: HTTP errors of a streamable-HTTP
//! MCP server. `server-everything` answers a request with an unknown
//! session id (after a restart) with HTTP 400 and a JSON-RPC error whose
//! `id` is null; such an answer used to reach nobody, so the call hung for
//! its whole timeout (600 s) while the server showed `ready`. Now a 400
//! naming the session heals like the spec's 404, any other HTTP error
//! fails its request at once with the server's text, the server shows
//! `failed` until a call succeeds again, and the declaration's `timeout`
//! bounds a call when no `execution_timeout` is set.
//!
//! Each await that could hang runs under [`no_hang`]: a bound far above
//! the expected time that only turns a hang into a failure (nothing here
//! measures speed).

use std::time::Duration;

use crate::mcp_stdio::{AGENT, SESSION, call};
use crate::support::mcp_http::{Calls, Expiry, SessionServer};
use crate::support::mcp_servers::*;
use serde_json::json;
use wsbench::engine::mcp::{McpConfig, McpDecl, McpState};
use wsbench::engine::tools::{ToolResult, ToolState};

/// `f`, failing the test if it takes over 20 s (the calls here answer in
/// milliseconds; the old bug waited 600 s).
async fn no_hang<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("hung: the call was not failed at once")
}

async fn http_ws(
    timeout: Option<f64>,
) -> (
    SessionServer,
    tempfile::TempDir,
    std::sync::Arc<wsbench::engine::Workspace>,
    wsbench::engine::EventBus,
) {
    let server = SessionServer::start(Expiry::Never).await;
    let mut decl = McpDecl::http("ev", server.url(), true);
    if let McpConfig::Http(cfg) = &mut decl.mcp_config {
        cfg.timeout = timeout;
    }
    let (d, ws, bus) = workspace(vec![decl]).await;
    ws.mcp().set_options(quick(10));
    let l = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert!(l.servers[0].state.is_ready(), "{:?}", l.servers[0]);
    (server, d, ws, bus)
}

async fn echo(ws: &wsbench::engine::Workspace, text: &str) -> ToolResult {
    no_hang(
        ws.mcp()
            .call_tool(call("ev", "echo", json!({ "text": text }))),
    )
    .await
}

async fn state(ws: &wsbench::engine::Workspace) -> McpState {
    ws.mcp().status(AGENT, SESSION).await.unwrap().servers[0]
        .state
        .clone()
}

#[tokio::test]
async fn a_400_for_an_unknown_session_after_a_restart_reinitializes_and_retries() {
    let (server, _d, ws, bus) = http_ws(Some(30.0)).await;
    server.unknown_session_as_400();
    // The server restarted: it knows none of the sessions.
    server.forget_sessions();
    let mut sub = bus.subscribe();
    let r = echo(&ws, "after restart").await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    assert_eq!(r.text(), "after restart");
    assert_eq!(server.seen().initializes, 2, "{:?}", server.seen());
    let ev: Vec<_> = states(&drain(&mut sub))
        .into_iter()
        .filter(|(s, _, _)| s == "ev")
        .collect();
    let (_, _, detail) = ev
        .iter()
        .find(|(_, st, _)| st == "reconnecting")
        .unwrap_or_else(|| panic!("no reconnecting: {ev:?}"));
    let detail = detail.clone().unwrap_or_default();
    assert!(
        detail.contains("HTTP 400") && detail.contains("No valid session ID"),
        "{detail}"
    );
    assert_eq!(ev.last().map(|e| e.1.as_str()), Some("ready"), "{ev:?}");
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert_eq!(st.servers[0].restarts, 1);
    ws.close().await;
}

#[tokio::test]
async fn a_400_that_keeps_coming_after_the_reinitialize_fails_once_naming_it() {
    let (server, _d, ws, _bus) = http_ws(Some(30.0)).await;
    server.unknown_session_as_400();
    server.forget_sessions();
    // Every call now finds its session unknown, the new one too.
    server.calls(Calls::NullIdError(
        400,
        "Bad Request: No valid session ID provided".into(),
    ));
    let r = echo(&ws, "x").await;
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert!(text.contains("`ev`"), "{text}");
    assert!(text.contains("re-initialized once"), "{text}");
    assert!(text.contains("HTTP 400"), "{text}");
    assert_eq!(server.seen().initializes, 2, "{:?}", server.seen());
    assert!(matches!(state(&ws).await, McpState::Failed { .. }));
    ws.close().await;
}

#[tokio::test]
async fn an_http_error_with_a_null_id_fails_the_call_at_once_and_the_server_shows_failed() {
    // No execution_timeout and no HTTP timeout: before the fix this call
    // waited for [mcp] call_timeout_secs (600 s).
    let (server, _d, ws, bus) = http_ws(None).await;
    server.calls(Calls::NullIdError(
        500,
        "Internal error: database is down".into(),
    ));
    let mut sub = bus.subscribe();
    let r = echo(&ws, "x").await;
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert!(text.contains("`ev`"), "{text}");
    assert!(text.contains("database is down"), "{text}");
    assert!(
        !text.contains("rmcp::") && !text.contains("Transport ["),
        "{text}"
    );
    match state(&ws).await {
        McpState::Failed { reason, .. } => assert!(reason.contains("database is down"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(
        states(&drain(&mut sub))
            .iter()
            .any(|(s, st, _)| s == "ev" && st == "failed")
    );
    // The server is back: the next call works at once and says `ready`.
    server.calls(Calls::Answer);
    let r = echo(&ws, "back").await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    assert!(state(&ws).await.is_ready());
    assert_eq!(
        states(&drain(&mut sub)).last().map(|e| e.1.clone()),
        Some("ready".to_string())
    );
    ws.close().await;
}

#[tokio::test]
async fn a_plain_http_error_names_the_status_and_the_next_success_clears_it() {
    let (server, _d, ws, _bus) = http_ws(Some(30.0)).await;
    server.calls(Calls::Text(501, "Not Implemented".into()));
    let r = echo(&ws, "x").await;
    assert_eq!(r.state, ToolState::Error);
    assert!(r.text().contains("501"), "{}", r.text());
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert_eq!(st.servers[0].state.name(), "failed", "{:?}", st.servers[0]);
    assert!(
        st.servers[0].summary().contains("501"),
        "{}",
        st.servers[0].summary()
    );
    // The server is back. Using it as the pane's Enter does (listing its
    // tools, no call) brings it back to `ready`: a failed server whose
    // session still looks alive is connected again, not trusted (issue 15
    // trial 2: Enter did nothing until R).
    server.calls(Calls::Answer);
    let tools = no_hang(ws.mcp().server_tools(AGENT, SESSION, "ev")).await;
    assert!(tools.is_ok(), "{tools:?}");
    assert!(state(&ws).await.is_ready(), "{:?}", state(&ws).await);
    assert_eq!(echo(&ws, "ok").await.state, ToolState::Success);
    assert!(state(&ws).await.is_ready());
    ws.close().await;
}

#[tokio::test]
async fn the_declarations_http_timeout_bounds_a_call() {
    let (server, _d, ws, _bus) = http_ws(Some(1.0)).await;
    server.calls(Calls::Hang);
    let r = echo(&ws, "x").await;
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert!(text.contains("timed out after 1s"), "{text}");
    assert!(text.contains("the server's timeout"), "{text}");
    ws.close().await;
}

/// `mcp-server-everything streamableHttp` on `port`, once it listens.
async fn everything_on(port: u16) -> Option<Server> {
    let Some(bin) = node_server("mcp-server-everything") else {
        crate::support::skip_or_fail(
            "mcp-server-everything not found (npm install @modelcontextprotocol/server-everything; set WSBENCH_MCP_NODE_BIN)",
        );
        return None;
    };
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("streamableHttp").env("PORT", port.to_string());
    let server = Server::start(cmd);
    if !wait_port(port, Duration::from_secs(20)).await {
        crate::support::skip_or_fail("mcp-server-everything streamableHttp did not listen");
        return None;
    }
    Some(server)
}

/// The trial itself: the real server restarted under a stateful
/// session answers 400 with a null id; the next call re-initializes
/// and works, without waiting for any timeout.
#[tokio::test]
async fn a_restarted_server_everything_is_reinitialized_on_the_next_call() {
    let port = free_port();
    let Some(server) = everything_on(port).await else {
        return;
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (_d, ws, _bus) = workspace(vec![McpDecl::http("ev", &url, true)]).await;
    let l = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert!(l.servers[0].state.is_ready(), "{:?}", l.servers[0]);
    let echo = |m: &str| call("ev", "echo", json!({ "message": m }));
    let r = no_hang(ws.mcp().call_tool(echo("one"))).await;
    assert_eq!(r.text(), "Echo: one");
    drop(server);
    let Some(_server) = everything_on(port).await else {
        return;
    };
    let r = no_hang(ws.mcp().call_tool(echo("two"))).await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    assert_eq!(r.text(), "Echo: two");
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert!(st.servers[0].state.is_ready(), "{:?}", st.servers[0]);
    assert_eq!(st.servers[0].restarts, 1);
    ws.close().await;
}
