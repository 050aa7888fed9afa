//! stdio MCP servers that misbehave (cases C01, C03, C04, C05 of
//! `docs/public-cases.md`), run by the stdlib fake server in
//! `tests/mcp_servers/fake.py`: each gives a clear state and error within
//! its timeout, the other servers keep working, no zombie remains.

use std::time::{Duration, Instant};

use crate::support::child;
use crate::support::mcp_servers::*;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use wsbench::engine::events::Event;
use wsbench::engine::mcp::{McpDecl, McpOptions, McpState, McpToolCall};
use wsbench::engine::tools::ToolState;

pub(crate) const AGENT: &str = "coder";
pub(crate) const SESSION: &str = "s1";

/// A call of `tool` on `server` as agent [`AGENT`], session [`SESSION`].
pub(crate) fn call(server: &str, tool: &str, args: serde_json::Value) -> McpToolCall {
    McpToolCall {
        agent: AGENT.into(),
        session: SESSION.into(),
        server: Some(server.into()),
        tool: tool.into(),
        args,
        ..Default::default()
    }
}

fn state_of<'a>(
    l: &'a wsbench::engine::mcp::McpListing,
    name: &str,
) -> &'a wsbench::engine::mcp::McpStatus {
    l.servers.iter().find(|s| s.name == name).unwrap()
}

async fn c01(script: &str, code: i32) {
    let (_d, ws, bus) = workspace(vec![sh("dies", script), fake("ok", &[])]).await;
    ws.mcp().set_options(quick(60));
    let mut sub = bus.subscribe();
    let t0 = Instant::now();
    let listing = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let dies = state_of(&listing, "dies");
    match &dies.state {
        McpState::Failed {
            exit_status,
            stderr_tail,
            ..
        } => {
            assert_eq!(*exit_status, Some(code));
            if code == 1 {
                assert!(
                    stderr_tail.contains("SEARCH_API_KEY is not set"),
                    "{stderr_tail}"
                );
            }
        }
        other => panic!("{other:?}"),
    }
    assert!(state_of(&listing, "ok").state.is_ready());
    let ev = states(&drain(&mut sub));
    let failed = ev
        .iter()
        .find(|(s, st, _)| s == "dies" && st == "failed")
        .expect("failed event");
    let detail = failed.2.as_deref().unwrap();
    assert!(detail.contains(&format!("status {code}")), "{detail}");
    if code == 1 {
        assert!(detail.contains("SEARCH_API_KEY is not set"), "{detail}");
    }
    assert!(
        ev.iter()
            .any(|(s, st, d)| s == "ok" && st == "ready" && d.as_deref() == Some("4 tools"))
    );
    // The healthy server works.
    let r = ws
        .mcp()
        .call_tool(call("ok", "echo", json!({"text": "hi"})))
        .await;
    assert_eq!(r.text(), "hi");
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn c01_server_exits_before_initialize() {
    c01("echo \"FATAL: SEARCH_API_KEY is not set\" >&2; exit 1", 1).await;
}

#[tokio::test]
async fn c01_variant_reads_the_request_then_exits() {
    c01("read line; exit 3", 3).await;
}

#[tokio::test]
async fn never_answering_initialize_times_out_and_is_killed() {
    let (_d, ws, _bus) = workspace(vec![fake("mute", &["--no-init"]), fake("ok", &[])]).await;
    ws.mcp().set_options(quick(2));
    let t0 = Instant::now();
    let listing = ws.mcp().list(AGENT, SESSION).await.unwrap();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    match &state_of(&listing, "mute").state {
        McpState::Failed { reason, .. } => {
            assert!(
                reason.contains("no answer to initialize within 2s"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(state_of(&listing, "ok").state.is_ready());
    // A failed server is not retried by every listing (no stall).
    let t0 = Instant::now();
    ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert!(t0.elapsed() < Duration::from_millis(500));
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn c03_banner_and_bom_on_stdout_are_skipped_and_logged() {
    let (_d, ws, bus) = workspace(vec![fake("chatty", &["--banner", "--bom"])]).await;
    let mut sub = bus.subscribe();
    let listing = ws.mcp().list(AGENT, SESSION).await.unwrap();
    let st = state_of(&listing, "chatty");
    assert_eq!(st.state, McpState::Ready { tool_count: 4 });
    assert!(st.tools.contains(&"mcp__chatty__echo".to_string()));
    let r = ws
        .mcp()
        .call_tool(call("chatty", "echo", json!({"text": "x"})))
        .await;
    assert!(r.is_success(), "{}", r.text());
    assert_eq!(r.text(), "x");
    let inst = ws.mcp().instance(AGENT, SESSION, "chatty").await.unwrap();
    let log: Vec<String> = inst
        .log_lines()
        .into_iter()
        .filter(|l| l.level == "warn")
        .map(|l| l.message)
        .collect();
    for banner in [
        "Starting server v0.2.6",
        "🖥️ Server mode: STDIO",
        "[INFO] ready",
        r#"{"level":"info","msg":"boot"}"#,
        "Processing request of type CallToolRequest",
    ] {
        assert!(
            log.iter().any(|l| l.ends_with(banner)),
            "{banner} not in {log:?}"
        );
    }
    assert!(log.iter().any(|l| l.contains("byte order mark")), "{log:?}");
    let events = drain(&mut sub);
    assert!(events.iter().any(|e| matches!(e,
        Event::Log { level, source, message } if level == "warn" && source == "mcp:chatty"
            && message.contains("Starting server v0.2.6"))));
    assert!(inst.state().is_ready());
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn stderr_flood_of_10_mb_is_drained_into_a_bounded_tail() {
    let (_d, ws, _bus) = workspace(vec![fake("noisy", &["--flood-stderr", "10485760"])]).await;
    ws.mcp().set_options(quick(30));
    let listing = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert!(state_of(&listing, "noisy").state.is_ready(), "{listing:?}");
    let r = ws
        .mcp()
        .call_tool(call("noisy", "echo", json!({"text": "still here"})))
        .await;
    assert_eq!(r.text(), "still here");
    let inst = ws.mcp().instance(AGENT, SESSION, "noisy").await.unwrap();
    let lines = inst.log_lines();
    assert!(lines.len() <= wsbench::engine::mcp::health::LOG_LINES_KEPT);
    assert!(
        lines.iter().any(|l| l.message == "stderr: flood done"),
        "the drain reached the end of the flood"
    );
    ws.close().await;
    assert_no_zombies().await;
}

fn sha_file(path: &str) -> (usize, String) {
    let bytes = std::fs::read(path).unwrap();
    (bytes.len(), hex::encode(Sha256::digest(&bytes)))
}

#[tokio::test]
async fn c04_big_replies_arrive_whole_and_are_offloaded() {
    let (_d, ws, _bus) = workspace(vec![fake("big", &[])]).await;
    // Under the offload threshold the text comes back whole.
    let n = 70 * 1024;
    let r = ws
        .mcp()
        .call_tool(call("big", "big", json!({"n": n})))
        .await;
    let text = r.text();
    assert_eq!(
        (text.len(), hex::encode(Sha256::digest(text.as_bytes()))),
        big_digest(n)
    );
    assert!(r.offload_path.is_none());
    for n in [1024 * 1024, 20_000_000] {
        let r = ws
            .mcp()
            .call_tool(call("big", "big", json!({"n": n})))
            .await;
        assert!(r.is_success(), "{}", r.text());
        let path = r.offload_path.clone().expect("a big result is offloaded");
        assert!(path.contains("/sessions/s1/tool_result-"), "{path}");
        assert_eq!(sha_file(&path), big_digest(n), "n = {n}");
        assert!(r.text().contains("<<<TRUNCATED>>>"));
        assert!(r.text().len() < 200_000 * 2);
        let r = ws
            .mcp()
            .call_tool(call("big", "echo", json!({"text": "after"})))
            .await;
        assert_eq!(r.text(), "after");
    }
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn c04_over_the_frame_limit_only_that_request_fails() {
    for flags in [&[][..], &["--result-first"][..]] {
        let (_d, ws, _bus) = workspace(vec![fake("big", flags)]).await;
        ws.mcp().set_options(McpOptions {
            max_frame_bytes: 2 * 1024 * 1024,
            ..Default::default()
        });
        let r = ws
            .mcp()
            .call_tool(call("big", "big", json!({"n": 1024 * 1024})))
            .await;
        assert!(r.is_success(), "{}", r.text());
        let t0 = Instant::now();
        let r = ws
            .mcp()
            .call_tool(call("big", "big", json!({"n": 8 * 1024 * 1024})))
            .await;
        assert_eq!(r.state, ToolState::Error);
        let text = r.text();
        assert!(
            text.contains("exceeds the maximum frame size of 2097152 bytes"),
            "{text}"
        );
        assert!(text.contains("a message of 838"), "size named: {text}");
        assert!(t0.elapsed() < Duration::from_secs(20));
        let r = ws
            .mcp()
            .call_tool(call("big", "echo", json!({"text": "after2"})))
            .await;
        assert_eq!(r.text(), "after2", "{flags:?}");
        let inst = ws.mcp().instance(AGENT, SESSION, "big").await.unwrap();
        assert!(inst.state().is_ready());
        ws.close().await;
    }
    assert_no_zombies().await;
}

#[tokio::test]
async fn dying_in_the_middle_of_a_call_fails_at_once_with_status_and_tail() {
    let (_d, ws, bus) = workspace(vec![fake("fragile", &[]), fake("ok", &[])]).await;
    ws.mcp().list(AGENT, SESSION).await.unwrap();
    let mut sub = bus.subscribe();
    let t0 = Instant::now();
    let r = ws
        .mcp()
        .call_tool(call("fragile", "die", json!({"code": 7})))
        .await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(r.state, ToolState::Error);
    let text = r.text();
    assert!(text.contains("status 7"), "{text}");
    assert!(
        text.contains("fatal: dying in the middle of a call"),
        "{text}"
    );
    let inst = ws.mcp().instance(AGENT, SESSION, "fragile").await.unwrap();
    assert!(matches!(
        inst.state(),
        McpState::Failed {
            exit_status: Some(7),
            ..
        }
    ));
    assert!(
        states(&drain(&mut sub))
            .iter()
            .any(|(s, st, _)| s == "fragile" && st == "failed")
    );
    let r = ws
        .mcp()
        .call_tool(call("ok", "echo", json!({"text": "fine"})))
        .await;
    assert_eq!(r.text(), "fine");
    // A restart brings it back.
    let st = ws.mcp().restart(AGENT, SESSION, "fragile").await.unwrap();
    assert!(st.state.is_ready());
    let r = ws
        .mcp()
        .call_tool(call("fragile", "echo", json!({"text": "back"})))
        .await;
    assert_eq!(r.text(), "back");
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn c05_list_changed_replaces_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("methods.log");
    let log_s = log.display().to_string();
    let (_d, ws, bus) = workspace(vec![fake("shifty", &["--list-change", "--log", &log_s])]).await;
    let listing = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert_eq!(
        state_of(&listing, "shifty").tools,
        ["mcp__shifty__alpha", "mcp__shifty__beta"]
    );
    let mut sub = bus.subscribe();
    let r = ws.mcp().call_tool(call("shifty", "alpha", json!({}))).await;
    assert_eq!(r.text(), "alpha");
    // Qualified names work too.
    let r = ws
        .mcp()
        .call_tool(McpToolCall {
            agent: AGENT.into(),
            session: SESSION.into(),
            tool: "mcp__shifty__gamma".into(),
            ..Default::default()
        })
        .await;
    assert!(r.is_success(), "{}", r.text());
    assert_eq!(r.text(), "gamma");
    let r = ws.mcp().call_tool(call("shifty", "beta", json!({}))).await;
    assert_eq!(r.state, ToolState::Error);
    assert!(r.text().contains("unknown tool `beta`"), "{}", r.text());
    let tools: Vec<String> = ws
        .mcp()
        .tools(AGENT, SESSION)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(tools, ["mcp__shifty__alpha", "mcp__shifty__gamma"]);
    let inst = ws.mcp().instance(AGENT, SESSION, "shifty").await.unwrap();
    assert_eq!(inst.state(), McpState::Ready { tool_count: 2 });
    let methods = std::fs::read_to_string(&log).unwrap();
    assert!(
        methods.matches("tools/list").count() >= 2,
        "a new tools/list after the notification: {methods}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        states(&drain(&mut sub))
            .iter()
            .any(|(s, st, _)| s == "shifty" && st == "ready")
    );
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn cancel_and_execution_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("methods.log");
    let log_s = log.display().to_string();
    let mut slow = fake("slow", &["--log", &log_s]);
    slow.execution_timeout = Some(0.5);
    let (_d, ws, _bus) = workspace(vec![fake("srv", &["--log", &log_s]), slow]).await;
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        c2.cancel();
    });
    let t0 = Instant::now();
    let r = ws
        .mcp()
        .call_tool(McpToolCall {
            cancel: Some(cancel),
            ..call("srv", "sleep", json!({"secs": 30}))
        })
        .await;
    assert_eq!(r.state, ToolState::Interrupted);
    assert!(t0.elapsed() < Duration::from_secs(3));
    let t0 = Instant::now();
    let r = ws
        .mcp()
        .call_tool(call("slow", "sleep", json!({"secs": 30})))
        .await;
    assert!(r.timed_out && r.state == ToolState::Error, "{}", r.text());
    assert!(r.text().contains("timed out after 0.5s"), "{}", r.text());
    assert!(t0.elapsed() < Duration::from_secs(3));
    // Both servers are told (asynchronously, so allow for a loaded machine).
    let t0 = Instant::now();
    let methods = loop {
        let methods = std::fs::read_to_string(&log).unwrap();
        if methods.matches("notifications/cancelled").count() >= 2
            || t0.elapsed() > Duration::from_secs(5)
        {
            break methods;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        methods.matches("notifications/cancelled").count() >= 2,
        "{methods}"
    );
    // The journal has both calls.
    let journal = ws.journal().read(SESSION).await.unwrap();
    let tools: Vec<&str> = journal.entries.iter().map(|e| e.tool.as_str()).collect();
    assert_eq!(tools, ["mcp__srv__sleep", "mcp__slow__sleep"]);
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn a_slow_server_blocks_no_other_session_or_server() {
    let (_d, ws, _bus) = workspace(vec![]).await;
    ws.mcp().set_options(quick(4));
    ws.mcp()
        .add(fake("mute", &["--no-init"]), AGENT, "slow", false)
        .await
        .unwrap();
    ws.mcp()
        .add(fake("ok", &[]), AGENT, "slow", false)
        .await
        .unwrap();
    ws.mcp()
        .add(fake("ok", &[]), AGENT, "fast", false)
        .await
        .unwrap();
    let ws2 = ws.clone();
    let slow = tokio::spawn(async move { ws2.mcp().list(AGENT, "slow").await.unwrap() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let fast = ws.mcp().list(AGENT, "fast").await.unwrap();
    assert!(fast.servers[0].state.is_ready());
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let ok_slow = ws.mcp().instance(AGENT, "slow", "ok").await.unwrap();
    let r = ok_slow
        .call(
            "echo",
            json!({"text": "parallel"}).as_object().unwrap().clone(),
            Default::default(),
        )
        .await;
    // The healthy server of the slow session is usable while its sibling connects.
    assert!(r.is_ok() || t0.elapsed() < Duration::from_secs(4));
    let slow = slow.await.unwrap();
    assert!(matches!(
        state_of(&slow, "mute").state,
        McpState::Failed { .. }
    ));
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn lru_cap_evicts_other_pairs_and_rebuilds_them() {
    let (_d, ws, bus) = workspace(vec![fake("srv", &[])]).await;
    ws.mcp().set_options(McpOptions {
        max_live_stateful: Some(2),
        ..Default::default()
    });
    let mut sub = bus.subscribe();
    let mut pids = Vec::new();
    for s in ["s1", "s2", "s3"] {
        let l = ws.mcp().list(AGENT, s).await.unwrap();
        assert!(l.servers[0].state.is_ready());
        pids.push(pid_of(&l.servers[0].process).unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ws.mcp().runtime().live_stateful(), 2);
    assert!(
        !process_alive(pids[0]),
        "the least recently used pair was evicted"
    );
    assert!(process_alive(pids[1]) && process_alive(pids[2]));
    let ev = drain(&mut sub);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Log { message, .. } if message.contains("evicting")))
    );
    // Transparent rebuild, evicting s2 now.
    let r = ws
        .mcp()
        .call_tool(McpToolCall {
            session: "s1".into(),
            ..call("srv", "echo", json!({"text": "rebuilt"}))
        })
        .await;
    assert_eq!(r.text(), "rebuilt");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ws.mcp().runtime().live_stateful(), 2);
    assert!(!process_alive(pids[1]));
    assert_eq!(ws.mcp().runtime().max_live_stateful(), 2);
    ws.mcp().set_options(McpOptions::default());
    assert_eq!(ws.mcp().runtime().max_live_stateful(), 40);
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn add_remove_purge_are_persisted_in_dot_mcp() {
    let (d, ws, _bus) = workspace(vec![]).await;
    let mcp_file = d.path().join(".mcp");
    let st = ws
        .mcp()
        .add(fake("one", &[]), AGENT, SESSION, true)
        .await
        .unwrap();
    assert!(st.state.is_ready());
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(file["version"], 2);
    assert_eq!(file["mcps"][AGENT][SESSION][0]["name"], "one");
    // Duplicate and start failure change nothing.
    let dup = ws.mcp().add(fake("one", &[]), AGENT, SESSION, true).await;
    assert!(dup.unwrap_err().to_string().contains("already declared"));
    let bad = ws
        .mcp()
        .add(
            McpDecl::stdio("bad", "/nonexistent/bin/server", vec![]),
            AGENT,
            SESSION,
            true,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("`/nonexistent/bin/server` does not exist"),
        "{bad}"
    );
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(file["mcps"][AGENT][SESSION].as_array().unwrap().len(), 1);
    ws.mcp()
        .add(fake("two", &[]), AGENT, "s2", false)
        .await
        .unwrap();
    ws.mcp()
        .add(fake("three", &[]), "other", "s9", false)
        .await
        .unwrap();
    assert!(ws.mcp().remove("one", AGENT, SESSION).await.unwrap());
    assert!(!ws.mcp().remove("one", AGENT, SESSION).await.unwrap());
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(file["mcps"][AGENT][SESSION], json!([]), "explicitly none");
    ws.mcp().purge_session(AGENT, "s2").await;
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert!(file["mcps"][AGENT].get("s2").is_none());
    ws.mcp().purge_agent(AGENT).await;
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert!(file["mcps"].get(AGENT).is_none());
    assert_eq!(file["mcps"]["other"]["s9"][0]["name"], "three");
    // Another handle (another process) sees the same declarations.
    let ws2 = common_reopen(d.path()).await;
    assert_eq!(
        ws2.mcp().declared("other", "s9").await.unwrap()[0].name,
        "three"
    );
    ws.close().await;
    assert_no_zombies().await;
}

async fn common_reopen(dir: &std::path::Path) -> std::sync::Arc<wsbench::engine::Workspace> {
    let sb = wsbench::backend::local::LocalSandbox::open(dir).unwrap();
    wsbench::engine::Workspace::open(
        std::sync::Arc::new(sb),
        Default::default(),
        Default::default(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn enable_and_disable_tools_filter_listing_and_calls() {
    let mut d = fake("f", &[]);
    d.disable_tools = Some(vec!["die".into(), "sleep".into()]);
    let (_d, ws, _bus) = workspace(vec![d]).await;
    let tools: Vec<String> = ws
        .mcp()
        .tools(AGENT, SESSION)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(tools, ["mcp__f__echo", "mcp__f__big"]);
    let t = ws.mcp().server_tools(AGENT, SESSION, "f").await.unwrap();
    assert!(t[0].read_only && !t[1].read_only);
    let r = ws.mcp().call_tool(call("f", "die", json!({}))).await;
    assert!(r.text().contains("not enabled"), "{}", r.text());
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn close_stops_every_server_and_kills_its_process() {
    let (_d, ws, bus) = workspace(vec![fake("a", &[]), fake("b", &[])]).await;
    let l = ws.mcp().list(AGENT, SESSION).await.unwrap();
    let pids: Vec<i32> = l
        .servers
        .iter()
        .filter_map(|s| pid_of(&s.process))
        .collect();
    assert_eq!(pids.len(), 2);
    let mut sub = bus.subscribe();
    ws.close().await;
    for p in pids {
        assert!(!process_alive(p));
    }
    let st = states(&drain(&mut sub));
    assert_eq!(st.iter().filter(|(_, s, _)| s == "stopped").count(), 2);
    assert_no_zombies().await;
}

#[tokio::test]
async fn env_secrets_come_from_the_environment_not_from_dot_mcp() {
    // The secret must be in the process environment, which every test of
    // this binary shares: the check runs in a child process that has it.
    if !child::in_child() {
        child::run_in_child(
            "mcp_stdio::env_secrets_come_from_the_environment_not_from_dot_mcp",
            |cmd| {
                cmd.env("WSBENCH_TEST_MCP_SECRET", "s3cret");
            },
        );
        return;
    }
    let mut d = fake("sec", &[]);
    if let wsbench::engine::mcp::McpConfig::Stdio(c) = &mut d.mcp_config {
        c.env = Some(
            [("TOKEN", "${WSBENCH_TEST_MCP_SECRET}")]
                .into_iter()
                .collect(),
        );
    }
    let (dir, ws, _bus) = workspace(vec![]).await;
    ws.mcp().add(d, AGENT, SESSION, true).await.unwrap();
    let r = ws
        .mcp()
        .call_tool(call("sec", "echo", json!({"env": "TOKEN"})))
        .await;
    assert_eq!(r.text(), "s3cret");
    let file = std::fs::read_to_string(dir.path().join(".mcp")).unwrap();
    assert!(file.contains("${WSBENCH_TEST_MCP_SECRET}") && !file.contains("s3cret"));
    // An unset variable is a clear configuration error.
    let mut d = fake("nosec", &[]);
    if let wsbench::engine::mcp::McpConfig::Stdio(c) = &mut d.mcp_config {
        c.env = Some(
            [("TOKEN", "${WSBENCH_TEST_MCP_UNSET}")]
                .into_iter()
                .collect(),
        );
    }
    let e = ws
        .mcp()
        .add(d, AGENT, SESSION, true)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("configuration error") && e.contains("WSBENCH_TEST_MCP_UNSET"),
        "{e}"
    );
    ws.close().await;
    assert_no_zombies().await;
}

/// A stdio server whose process tree is `sh` → `python3 fake.py
/// --no-init <tag>`: it never answers initialize. `tag` finds its
/// processes.
fn hanging(name: &str, tag: &str) -> McpDecl {
    let fake = servers_dir().join("fake.py");
    sh(
        name,
        &format!("python3 '{}' --no-init {tag}; true", fake.display()),
    )
}

/// Live (non-zombie) processes whose command line holds `tag`.
fn pids_with(tag: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmd).contains(tag) && process_alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Waits until `tag`'s processes number at least `n`.
async fn wait_pids(tag: &str, n: usize) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let p = pids_with(tag);
        if p.len() >= n || t0.elapsed() > Duration::from_secs(10) {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn stop_and_remove_cancel_a_start_in_progress() {
    let tag = format!("stop-tag-{}", std::process::id());
    let (_d, ws, bus) = workspace(vec![hanging("mute", &tag)]).await;
    // The default 30 s: the test must not wait it out.
    ws.mcp().set_options(quick(30));
    let mut sub = bus.subscribe();
    let ws2 = ws.clone();
    let start = tokio::spawn(async move { ws2.mcp().start(AGENT, SESSION, "mute").await });
    let pids = wait_pids(&tag, 2).await;
    assert_eq!(pids.len(), 2, "sh and python3 run: {pids:?}");
    let inst = ws.mcp().instance(AGENT, SESSION, "mute").await.unwrap();
    assert_eq!(inst.state(), McpState::Starting);

    let t0 = Instant::now();
    let st = ws.mcp().stop(AGENT, SESSION, "mute").await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(st.state, McpState::Stopped);
    assert!(pids_with(&tag).is_empty(), "the whole tree is killed");
    // The start that was cancelled reports the stop, not a failure.
    let started = tokio::time::timeout(Duration::from_secs(5), start)
        .await
        .expect("the start ends with the stop")
        .unwrap()
        .unwrap();
    assert_eq!(started.state, McpState::Stopped);
    let ev = states(&drain(&mut sub));
    assert!(
        !ev.iter().any(|(_, s, _)| s == "failed"),
        "a stop is no failure: {ev:?}"
    );
    assert_eq!(ev.last().map(|e| e.1.as_str()), Some("stopped"), "{ev:?}");
    // Stopped stays stopped: a listing does not start it again...
    let l = ws.mcp().list(AGENT, SESSION).await.unwrap();
    assert_eq!(state_of(&l, "mute").state, McpState::Stopped);
    assert!(pids_with(&tag).is_empty());

    // ...an explicit start does, and removing cancels that start too.
    let ws2 = ws.clone();
    let start = tokio::spawn(async move { ws2.mcp().start(AGENT, SESSION, "mute").await });
    assert_eq!(wait_pids(&tag, 2).await.len(), 2);
    let t0 = Instant::now();
    assert!(ws.mcp().remove("mute", AGENT, SESSION).await.unwrap());
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(pids_with(&tag).is_empty());
    let started = tokio::time::timeout(Duration::from_secs(5), start)
        .await
        .expect("the start ends with the removal")
        .unwrap()
        .unwrap();
    assert_eq!(started.state, McpState::Stopped);
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn restart_cancels_a_start_in_progress_instead_of_waiting() {
    // Hangs at its first start, answers at the next.
    let d = tempfile::tempdir().unwrap();
    let mark = d.path().join("started-once");
    let tag = format!("restart-tag-{}", std::process::id());
    let fake_py = servers_dir().join("fake.py");
    let script = format!(
        "if [ -e '{m}' ]; then exec python3 '{f}'; fi; touch '{m}'; python3 '{f}' --no-init {tag}; true",
        m = mark.display(),
        f = fake_py.display()
    );
    let (_d, ws, _bus) = workspace(vec![sh("flaky", &script)]).await;
    ws.mcp().set_options(quick(30));
    let ws2 = ws.clone();
    let first = tokio::spawn(async move { ws2.mcp().start(AGENT, SESSION, "flaky").await });
    assert_eq!(wait_pids(&tag, 2).await.len(), 2);
    let t0 = Instant::now();
    let st = ws.mcp().restart(AGENT, SESSION, "flaky").await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(st.state.is_ready(), "{st:?}");
    assert!(pids_with(&tag).is_empty(), "the hanging start was killed");
    let first = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .expect("the first start ends with the restart")
        .unwrap();
    // Cancelled, not failed: it gives the status the restart left.
    assert!(first.is_ok(), "{first:?}");
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn a_failed_server_names_its_exit_status_once() {
    let (_d, ws, _bus) = workspace(vec![sh("dies", "echo boom >&2; exit 3")]).await;
    let e = ws
        .mcp()
        .start(AGENT, SESSION, "dies")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(e.matches("status 3").count(), 1, "{e}");
    assert!(!e.contains("(exit status 3)"), "{e}");
    let st = ws.mcp().status(AGENT, SESSION).await.unwrap();
    assert_eq!(
        st.servers[0].state.summary(),
        "failed: the server process exited with status 3"
    );
    ws.close().await;
    assert_no_zombies().await;
}

#[tokio::test]
async fn add_refuses_a_command_that_cannot_run_and_leaves_dot_mcp_alone() {
    let (d, ws, _bus) = workspace(vec![]).await;
    let mcp_file = d.path().join(".mcp");
    std::fs::write(d.path().join("plain.txt"), "not a program").unwrap();
    let cases = [
        (
            McpDecl::stdio("ghost", "/no/such/binary", vec![]),
            "`/no/such/binary` does not exist",
        ),
        (
            McpDecl::stdio("nopath", "wsbench-no-such-program", vec![]),
            "`wsbench-no-such-program` is not found on PATH",
        ),
        (
            McpDecl::stdio("dir", "/tmp", vec![]),
            "`/tmp` is a directory",
        ),
        (
            McpDecl::stdio("plain", "./plain.txt", vec![]),
            "`./plain.txt` is not executable",
        ),
    ];
    for (decl, want) in cases {
        // Without connecting (the TUI's add form) as with it (the CLI).
        for connect in [false, true] {
            let e = ws
                .mcp()
                .add(decl.clone(), AGENT, SESSION, connect)
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
            assert!(e.contains(&format!("`{}`", decl.name)), "{e}");
        }
    }
    let mut in_cwd = McpDecl::stdio("cwd", "python3", vec![]);
    if let wsbench::engine::mcp::McpConfig::Stdio(c) = &mut in_cwd.mcp_config {
        c.cwd = Some("no-such-dir".into());
    }
    let e = ws
        .mcp()
        .add(in_cwd, AGENT, SESSION, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the working directory `no-such-dir` does not exist"),
        "{e}"
    );
    assert!(!mcp_file.exists(), ".mcp was written");
    // What can run is declared (on PATH, or by path).
    ws.mcp()
        .add(fake("ok", &[]), AGENT, SESSION, false)
        .await
        .unwrap();
    ws.mcp()
        .add(
            McpDecl::stdio("abs", "/bin/sh", vec![]),
            AGENT,
            SESSION,
            false,
        )
        .await
        .unwrap();
    assert_eq!(ws.mcp().declared(AGENT, SESSION).await.unwrap().len(), 2);
    ws.close().await;
}
