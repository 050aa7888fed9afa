//! The agent against a fake OpenAI-compatible server on 127.0.0.1:
//! streamed text, tool calls that really run, a malformed tool-call JSON,
//! an unknown tool, a dropped connection and an HTTP error — each ends up
//! as a clear error in the conversation with the workspace unharmed — plus
//! the Skill viewer, compression with the model's summary and continuing
//! a session.

use crate::support;
use crate::support::fake_openai;

use std::sync::Arc;

use fake_openai::{FakeOpenAi, Reply, stream_text, stream_tool_calls, summary_reply, text_chunk};
use serde_json::{Value, json};
use wsbench::agent::openai::{OpenAiConfig, OpenAiModel};
use wsbench::agent::{
    Agent, AgentConfig, AgentEvent, AgentReceived, AgentSubscriber, ContextPolicy, FinishReason,
    Toolset,
};
use wsbench::engine::Workspace;
use wsbench::engine::message::{Block, ToolOutput};

async fn agent_on(ws: &Arc<Workspace>, server: &FakeOpenAi, session: &str) -> Agent {
    agent_with(ws, server, AgentConfig::new(session)).await
}

async fn agent_with(ws: &Arc<Workspace>, server: &FakeOpenAi, config: AgentConfig) -> Agent {
    let model = OpenAiModel::new(OpenAiConfig::new(server.url.clone(), "fake-model")).unwrap();
    Agent::open(ws.clone(), Arc::new(model), Toolset::standard(ws), config)
        .await
        .unwrap()
}

fn drain(sub: &mut AgentSubscriber) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let AgentReceived::Event(e) = r {
            out.push(e.event);
        }
    }
    out
}

/// Tool results of the last assistant message, by call id.
fn results(agent: &Agent) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for m in agent.context() {
        for b in &m.content {
            if let Block::ToolResult(r) = b {
                let text = match &r.output {
                    ToolOutput::Text(t) => t.clone(),
                    ToolOutput::Blocks(bs) => bs.iter().filter_map(Block::as_text).collect(),
                };
                out.push((r.id.clone(), r.state.clone(), text));
            }
        }
    }
    out
}

fn files_of(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_and_is_recorded() {
    let (dir, ws) = support::temp_workspace().await;
    let server = FakeOpenAi::start(vec![stream_text("Hello from the fake model.", 6)]).await;
    let mut agent = agent_on(&ws, &server, "s1").await;
    let mut sub = agent.handle().subscribe();
    let out = agent.reply_text("hi").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed);
    assert_eq!(out.text, "Hello from the fake model.");
    let events = drain(&mut sub);
    let deltas = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::TextDelta { .. }))
        .count();
    assert!(deltas >= 6, "expected streamed pieces, got {deltas}");
    let last = agent.context().last().unwrap();
    assert_eq!(last.role, "assistant");
    assert_eq!(last.text_content(), "Hello from the fake model.");
    // The reference's `Usage` shape (agentscope 2.0.11 `message/_base.py`):
    // four counters, the cached prompt tokens read as its OpenAI model does.
    assert_eq!(
        last.usage,
        serde_json::json!({
            "input_tokens": 100,
            "output_tokens": 10,
            "cache_input_tokens": 40,
            "cache_creation_input_tokens": 0,
        })
    );
    // The request: streamed, system prompt with the workspace
    // instructions, the built-in tools and the Skill viewer.
    let req = &server.requests()[0];
    assert_eq!(req["stream"], true);
    assert_eq!(req["model"], "fake-model");
    let system = req["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("<workspace>"), "{system}");
    let names: Vec<&str> = req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for n in ["Bash", "Read", "Write", "Edit", "Glob", "Grep", "Skill"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    // The session keeps its state and an agent log.
    let sdir = dir.path().join("sessions/s1");
    let files = files_of(&sdir);
    assert!(files.contains(&"agent_state.json".to_string()), "{files:?}");
    assert!(files.contains(&"agent.jsonl".to_string()), "{files:?}");
}

#[tokio::test]
async fn tool_calls_run_for_real_and_their_results_go_back_to_the_model() {
    let (dir, ws) = support::temp_workspace().await;
    let target = dir.path().join("hello.txt");
    let args = json!({"file_path": target.to_str().unwrap(), "content": "hi there\n"}).to_string();
    let server = FakeOpenAi::start(vec![
        stream_tool_calls("Writing the file.", &[("call_w1", "Write", &args)]),
        stream_tool_calls(
            "",
            &[("call_b1", "Bash", r#"{"command": "cat hello.txt"}"#)],
        ),
        stream_text("Done: the file says hi there.", 3),
    ])
    .await;
    let mut agent = agent_on(&ws, &server, "s2").await;
    let out = agent.reply_text("write hello.txt").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed, "{out:?}");
    assert_eq!(out.turns, 3);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi there\n");
    let res = results(&agent);
    assert_eq!(res.len(), 2);
    assert_eq!(res[0].0, "call_w1");
    assert_eq!(res[0].1, "success");
    assert!(res[1].2.contains("hi there"), "{:?}", res[1]);
    // The second request carries the call and its result in OpenAI shape.
    let reqs = server.requests();
    let msgs = reqs[1]["messages"].as_array().unwrap();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["id"], "call_w1");
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], args);
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_w1");
    // Both calls are journalled by the engine.
    let journal = ws.journal().read("s2").await.unwrap();
    let tools: Vec<&str> = journal.entries.iter().map(|e| e.tool.as_str()).collect();
    assert_eq!(tools, ["Write", "Bash"]);
    // Tool calls are finished in the conversation.
    let calls: Vec<Value> = agent
        .context()
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolCall(c) => Some(c.state.clone()),
            _ => None,
        })
        .collect();
    assert!(calls.iter().all(|s| s == "finished"), "{calls:?}");
}

#[tokio::test]
async fn malformed_tool_call_json_is_an_error_the_model_reads() {
    let (dir, ws) = support::temp_workspace().await;
    let target = dir.path().join("never.txt");
    let bad = format!(r#"{{"file_path": "{}", "content": "#, target.display());
    let server = FakeOpenAi::start(vec![
        stream_tool_calls("", &[("call_bad", "Write", &bad)]),
        stream_text("Sorry, my arguments were broken.", 2),
    ])
    .await;
    let mut agent = agent_on(&ws, &server, "s3").await;
    let out = agent.reply_text("write it").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed);
    assert!(!target.exists(), "a malformed call must not run");
    let res = results(&agent);
    assert_eq!(res[0].1, "error");
    assert!(
        res[0].2.contains("Invalid arguments for tool 'Write'"),
        "{}",
        res[0].2
    );
    assert!(res[0].2.contains("malformed"), "{}", res[0].2);
    // The model saw the error as the tool's answer.
    let tool_msg = server.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(tool_msg["content"].as_str().unwrap().contains("malformed"));
    let journal = ws.journal().read("s3").await.unwrap();
    assert_eq!(journal.entries.len(), 1);
    assert_eq!(journal.entries[0].args, Value::String(bad));
    assert!(
        journal.entries[0]
            .error
            .as_deref()
            .unwrap()
            .contains("malformed")
    );
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_naming_the_tools() {
    let (_dir, ws) = support::temp_workspace().await;
    let server = FakeOpenAi::start(vec![
        stream_tool_calls("", &[("call_x", "Teleport", r#"{"to": "mars"}"#)]),
        stream_text("That tool does not exist.", 2),
    ])
    .await;
    let mut agent = agent_on(&ws, &server, "s4").await;
    let mut bus = ws.events().subscribe();
    let out = agent.reply_text("go").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed);
    let res = results(&agent);
    assert_eq!(res[0].1, "error");
    assert!(
        res[0]
            .2
            .starts_with("ToolNotFoundError: Tool 'Teleport' not found."),
        "{}",
        res[0].2
    );
    assert!(res[0].2.contains("Read"), "{}", res[0].2);
    let journal = ws.journal().read("s4").await.unwrap();
    assert_eq!(journal.entries[0].tool, "Teleport");
    // The bus saw the call start and finish, and agent log lines.
    let mut started = false;
    let mut logs = 0;
    while let Some(r) = bus.try_recv() {
        if let wsbench::engine::events::Received::Event(e) = r {
            match e.event {
                wsbench::engine::Event::ToolStarted { tool, .. } if tool == "Teleport" => {
                    started = true
                }
                wsbench::engine::Event::Log { source, .. } if source == "agent" => logs += 1,
                _ => {}
            }
        }
    }
    assert!(started);
    assert!(logs >= 4, "agent steps should reach the bus as log lines");
}

#[tokio::test]
async fn a_dropped_connection_ends_the_reply_with_a_clear_error() {
    let (dir, ws) = support::temp_workspace().await;
    std::fs::write(dir.path().join("keep.txt"), "untouched").unwrap();
    let server = FakeOpenAi::start(vec![Reply::StreamThenDrop(vec![
        text_chunk("Let me think about "),
        text_chunk("this carefully"),
    ])])
    .await;
    let mut agent = agent_on(&ws, &server, "s5").await;
    let out = agent.reply_text("hello?").await.unwrap();
    assert_eq!(out.reason, FinishReason::Error);
    let err = out.error.clone().unwrap();
    assert!(err.contains("connection"), "{err}");
    assert!(
        err.contains("dropped") || err.contains("ended before"),
        "{err}"
    );
    // The conversation records the partial answer and the error.
    let reply = agent.context().last().unwrap();
    assert_eq!(reply.role, "assistant");
    assert!(reply.text_content().starts_with("Let me think about"));
    assert_eq!(reply.error["type"], "connection");
    assert_eq!(reply.finished_reason, "error");
    assert!(reply.content.iter().any(|b| matches!(b, Block::Hint(h)
        if h["hint"].as_str().unwrap().contains("The model call failed"))));
    // The workspace is unharmed and the state was saved.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
        "untouched"
    );
    let state: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("sessions/s5/agent_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["context"].as_array().unwrap().len(), 2);
    // The next reply works; the model sees the error reminder.
    server.push(vec![stream_text("Back again.", 2)]);
    let out = agent.reply_text("again").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed);
    let msgs = server.requests()[1]["messages"].clone();
    assert!(msgs.to_string().contains("The model call failed"));
}

#[tokio::test]
async fn an_http_error_is_reported_with_the_servers_message() {
    let (_dir, ws) = support::temp_workspace().await;
    let server = FakeOpenAi::start(vec![Reply::Error(401, "invalid api key".into())]).await;
    let mut agent = agent_on(&ws, &server, "s6").await;
    let out = agent.reply_text("hi").await.unwrap();
    assert_eq!(out.reason, FinishReason::Error);
    let err = out.error.unwrap();
    assert!(
        err.contains("401") && err.contains("invalid api key"),
        "{err}"
    );
    assert_eq!(
        agent.context().last().unwrap().error["type"],
        "authentication"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let (_dir, ws) = support::temp_workspace().await;
    // Bind then drop, so the port is (very likely) closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let model = OpenAiModel::new(OpenAiConfig::new(
        format!("http://127.0.0.1:{port}/v1"),
        "m",
    ))
    .unwrap();
    let mut agent = Agent::open(
        ws.clone(),
        Arc::new(model),
        Toolset::standard(&ws),
        AgentConfig::new("s7"),
    )
    .await
    .unwrap();
    let out = agent.reply_text("hi").await.unwrap();
    assert_eq!(out.reason, FinishReason::Error);
    assert!(out.error.unwrap().contains("connection"));
}

#[tokio::test]
async fn the_skill_viewer_opens_skills_and_names_missing_ones() {
    let fixture = support::fixture_copy();
    let ws = support::open(fixture.path(), Default::default()).await;
    let server = FakeOpenAi::start(vec![
        stream_tool_calls(
            "",
            &[
                ("call_s1", "Skill", r#"{"skill": "git-helper"}"#),
                ("call_s2", "Skill", r#"{"skill": "nope"}"#),
            ],
        ),
        stream_text("Opened.", 1),
    ])
    .await;
    let mut config = AgentConfig::new("s8");
    config.agent_id = "coder".into();
    let mut agent = agent_with(&ws, &server, config).await;
    let out = agent.reply_text("use your skills").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed);
    let res = results(&agent);
    assert_eq!(res[0].1, "success");
    assert!(res[0].2.contains("# Git helper"), "{}", res[0].2);
    assert_eq!(res[1].1, "error");
    assert_eq!(res[1].2, "SkillNotFoundError: Skill 'nope' not found.");
    // The system prompt lists the skills.
    let system = server.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("<agent-skills>"), "{system}");
    assert!(system.contains("<name>git-helper</name>"), "{system}");
    assert!(system.contains("<dir>"), "{system}");
    // The agent journals the Skill calls itself.
    let journal = ws.journal().read("s8").await.unwrap();
    assert_eq!(journal.entries.len(), 2);
    assert_eq!(journal.entries[1].tool, "Skill");
}

#[tokio::test]
async fn compression_uses_the_models_summary_and_names_the_offloaded_file() {
    let (dir, ws) = support::temp_workspace().await;
    // 80 lines of 100 characters: ~2000 tokens once Read numbers them.
    let big = format!("{}\n", "x".repeat(99)).repeat(80);
    std::fs::write(dir.path().join("big.txt"), &big).unwrap();
    let read_args = json!({"file_path": dir.path().join("big.txt").to_str().unwrap()}).to_string();
    let server = FakeOpenAi::start(vec![
        stream_tool_calls("Reading.", &[("call_r1", "Read", &read_args)]),
        summary_reply(json!({
            "task_overview": "read big.txt",
            "current_state": "read it once",
            "important_discoveries": "it is all x",
            "next_steps": "answer",
            "context_to_preserve": ""
        })),
        stream_text("It is all x.", 2),
    ])
    .await;
    let mut config = AgentConfig::new("s9");
    config.policy = ContextPolicy {
        context_window: 5000,
        reserve_ratio: 0.7,
        ..ContextPolicy::default()
    };
    let mut agent = agent_with(&ws, &server, config).await;
    let mut sub = agent.handle().subscribe();
    let out = agent.reply_text("what is in big.txt?").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed, "{out:?}");
    let events = drain(&mut sub);
    let done = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::CompressionDone { path, fallback, .. } => Some((path.clone(), *fallback)),
            _ => None,
        })
        .expect("a compression");
    assert!(!done.1, "the model's summary should be used");
    let summary = agent.summary().unwrap();
    assert!(
        summary.contains("# Task Overview\nread big.txt"),
        "{summary}"
    );
    assert!(summary.contains(&done.0), "{summary}");
    // The summary request forced the structured-output function.
    let reqs = server.requests();
    assert_eq!(
        reqs[1]["tool_choice"]["function"]["name"],
        "generate_structured_output"
    );
    assert_eq!(reqs[1]["stream"], false);
    // The last request starts with the summary after the system prompt.
    let last = reqs[2]["messages"].as_array().unwrap();
    assert!(
        last[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("<system-info>")
    );
    let read = ws.sessions().read_context("s9").await.unwrap();
    assert!(read.bad_lines.is_empty());
    assert!(!read.messages.is_empty());
}

#[tokio::test]
async fn a_session_is_continued_from_its_saved_state() {
    let (_dir, ws) = support::temp_workspace().await;
    let server = FakeOpenAi::start(vec![
        stream_text("First answer.", 1),
        stream_text("Second answer.", 1),
    ])
    .await;
    {
        let mut agent = agent_on(&ws, &server, "s10").await;
        agent.reply_text("first question").await.unwrap();
    }
    let mut agent = agent_on(&ws, &server, "s10").await;
    assert_eq!(agent.context().len(), 2);
    agent.reply_text("second question").await.unwrap();
    let msgs = server.requests()[1]["messages"].to_string();
    assert!(msgs.contains("first question") && msgs.contains("First answer."));
    assert_eq!(agent.context().len(), 4);
}

#[tokio::test]
async fn a_reference_session_is_continued_from_its_context_jsonl() {
    let fixture = support::fixture_copy();
    let ws = support::open(fixture.path(), Default::default()).await;
    let before = std::fs::read(fixture.path().join("sessions/s-001/context.jsonl")).unwrap();
    let server = FakeOpenAi::start(vec![stream_text("Continuing.", 1)]).await;
    let mut agent = agent_on(&ws, &server, "s-001").await;
    assert_eq!(agent.context().len(), 4);
    agent.reply_text("go on").await.unwrap();
    let msgs = server.requests()[0]["messages"].to_string();
    assert!(msgs.contains("List the Rust files and count the TODOs."));
    // The offloaded image is named, not sent (the server cannot fetch it).
    assert!(msgs.contains("workspace:///data/"));
    // context.jsonl is left as the reference wrote it.
    let after = std::fs::read(fixture.path().join("sessions/s-001/context.jsonl")).unwrap();
    assert_eq!(before, after);
}

#[tokio::test]
async fn a_corrupt_state_file_is_a_clear_error_and_is_left_alone() {
    let (dir, ws) = support::temp_workspace().await;
    let sdir = dir.path().join("sessions/s11");
    std::fs::create_dir_all(&sdir).unwrap();
    std::fs::write(sdir.join("agent_state.json"), "{not json").unwrap();
    let server = FakeOpenAi::start(vec![]).await;
    let model = OpenAiModel::new(OpenAiConfig::new(server.url.clone(), "m")).unwrap();
    let err = Agent::open(
        ws.clone(),
        Arc::new(model),
        Toolset::standard(&ws),
        AgentConfig::new("s11"),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("agent_state.json"), "{err}");
    assert_eq!(
        std::fs::read_to_string(sdir.join("agent_state.json")).unwrap(),
        "{not json"
    );
}
