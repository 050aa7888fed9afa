//! The Agent pane on ratatui's TestBackend: a demo run in step mode,
//! stepped through with the step key to the end; a snapshot mid-run; the
//! stop key interrupting a paused and a streaming run.

use crate::support::fake_openai;
use crate::support::tui;

use std::path::Path;
use std::time::{Duration, Instant};

use tui::*;
use wsbench::tui::panes::agent::AgentPane;

/// The session a demo run gets under the tests' fixed clock.
const EXPLORE_SESSION: &str = "demo-explore-20210101-000000";

fn agent(hs: &mut Harness) -> &mut AgentPane {
    hs.pane::<AgentPane>("agent")
}

/// Settles and draws until `cond` holds or 60 s pass.
async fn wait_for(hs: &mut Harness, what: &str, mut cond: impl FnMut(&mut Harness) -> bool) {
    let t0 = Instant::now();
    loop {
        hs.draw().await;
        if cond(hs) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}; conversation:\n{}",
            agent(hs).texts().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens the Agent pane (leaving the Command prompt first), with no
/// model configured from the environment and scripted text at `pace`.
async fn open_agent(hs: &mut Harness, pace: Duration) {
    hs.keys("esc A").await;
    assert_eq!(hs.app.focus(), "agent");
    let p = agent(hs);
    p.set_pace(pace);
    p.set_model(None);
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explore_demo_steps_to_the_end_on_a_copy_of_this_crate() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &dir.path().join("src"),
    );
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws.clone(), options(), 120, 40).await;
    open_agent(&mut hs, Duration::ZERO).await;
    hs.keys("t").await;
    assert!(agent(&mut hs).is_stepping());
    hs.keys("enter").await;
    let mut steps = Vec::new();
    loop {
        wait_for(&mut hs, "a pause or the end", |hs| {
            let p = agent(hs);
            p.waiting_for().is_some() || !p.is_running()
        })
        .await;
        let p = agent(&mut hs);
        match p.waiting_for() {
            Some(next) => {
                // The pane shows what runs next.
                let screen = hs.draw().await;
                assert!(screen.contains(&format!("next: {next}")), "{screen}");
                steps.push(next);
                hs.keys("space").await;
                // The step was taken: the agent is no longer waiting for
                // the same step (or waits for a later one).
                let taken = steps.last().cloned();
                wait_for(&mut hs, "the step to be taken", |hs| {
                    let p = agent(hs);
                    !p.is_running() || p.waiting_for() != taken
                })
                .await;
            }
            None => break,
        }
        assert!(steps.len() < 50, "too many steps: {steps:?}");
    }
    // 5 model turns and 4 tool calls, each paused for.
    assert_eq!(
        steps.iter().filter(|s| s.starts_with("model turn")).count(),
        5,
        "{steps:?}"
    );
    assert_eq!(
        steps.iter().filter(|s| s.starts_with("tool call")).count(),
        4,
        "{steps:?}"
    );
    let p = agent(&mut hs);
    assert_eq!(p.last_outcome(), Some("completed"));
    assert_eq!(p.session(), Some(EXPLORE_SESSION));
    let conv = p.texts().join("\n");
    for needle in [
        "▶ Give me a tour",
        "⚙ Glob",
        "✓ Glob success",
        "⚙ Grep",
        "⚙ Read",
        "full result offloaded to",
        "context compressed",
        "▌ reply completed",
        "tool calls journalled",
    ] {
        assert!(conv.contains(needle), "missing {needle:?} in:\n{conv}");
    }
    // The run's session is selected, so the other panes show it.
    hs.settle().await;
    assert_eq!(hs.app.cx.session, EXPLORE_SESSION);
    let sessions = hs
        .app
        .pane_mut("sessions")
        .unwrap()
        .as_any_mut()
        .downcast_mut::<wsbench::tui::panes::sessions::SessionsPane>()
        .unwrap();
    let listed = sessions
        .items()
        .iter()
        .find(|s| s.id == EXPLORE_SESSION)
        .expect("the Sessions pane lists the demo session");
    assert!(listed.tool_calls >= 4, "{listed:?}");
    assert!(listed.offloads >= 2, "{listed:?}");
    // The journal and the compressed context are on disk.
    let sdir = dir.path().join("sessions").join(EXPLORE_SESSION);
    assert!(sdir.join("journal.jsonl").is_file());
    assert!(sdir.join("context.jsonl").is_file());
    let journal = ws.journal().read(EXPLORE_SESSION).await.unwrap();
    assert!(journal.entries.len() >= 4);
    let context = ws.sessions().read_context(EXPLORE_SESSION).await.unwrap();
    assert!(!context.messages.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_run_snapshot_then_stop_interrupts_a_paused_run() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    open_agent(&mut hs, Duration::ZERO).await;
    hs.keys("t enter").await;
    // First pause: before model turn 1; let it go, then wait for the
    // pause before the first tool call.
    wait_for(&mut hs, "the first pause", |hs| {
        agent(hs).waiting_for().as_deref() == Some("model turn 1")
    })
    .await;
    hs.keys("space").await;
    wait_for(&mut hs, "the pause before Glob", |hs| {
        agent(hs).waiting_for().as_deref() == Some("tool call Glob")
    })
    .await;
    let text = hs.draw().await;
    assert!(
        text.contains("I'll start by listing the Rust source files."),
        "{text}"
    );
    assert!(text.contains("next: tool call Glob"), "{text}");
    settings(dir.path()).bind(|| {
        insta::assert_snapshot!("agent_midrun_120x40", text);
    });
    hs.keys("x").await;
    wait_for(&mut hs, "the run to end", |hs| !agent(hs).is_running()).await;
    let p = agent(&mut hs);
    assert_eq!(p.last_outcome(), Some("interrupted"));
    let conv = p.texts().join("\n");
    assert!(conv.contains("▌ reply interrupted"), "{conv}");
    // The tool never ran.
    assert!(!conv.contains("⚙ Glob"), "{conv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_interrupts_a_streaming_run_and_the_next_run_works() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 80, 24).await;
    // A slow stream: the first answer alone takes seconds at this pace.
    open_agent(&mut hs, Duration::from_millis(200)).await;
    hs.keys("enter").await;
    wait_for(&mut hs, "text streaming in", |hs| {
        agent(hs).texts().iter().any(|l| l.starts_with("I'll"))
    })
    .await;
    let t0 = Instant::now();
    hs.keys("x").await;
    wait_for(&mut hs, "the run to end", |hs| !agent(hs).is_running()).await;
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(agent(&mut hs).last_outcome(), Some("interrupted"));
    // A second run gets its own session and runs to the end.
    agent(&mut hs).set_pace(Duration::ZERO);
    hs.keys("enter").await;
    wait_for(&mut hs, "the second run to end", |hs| {
        !agent(hs).is_running()
    })
    .await;
    let p = agent(&mut hs);
    assert_eq!(p.last_outcome(), Some("completed"));
    assert_eq!(p.session(), Some("demo-explore-20210101-000000-2"));
    let screen = hs.draw().await;
    assert!(screen.contains("reply completed"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_cannot_run_the_agent_and_bad_models_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut o = options();
    o.read_only = true;
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    hs.keys("esc A").await;
    agent(&mut hs).set_model(None);
    hs.keys("enter").await;
    assert!(!agent(&mut hs).is_running());
    assert!(
        !dir.path().join("sessions").exists()
            || std::fs::read_dir(dir.path().join("sessions"))
                .unwrap()
                .next()
                .is_none()
    );
    let screen = hs.draw().await;
    assert!(
        screen.contains("read-only mode: the agent cannot run"),
        "{screen}"
    );

    // `:agent URL MODEL` sets the model; a bad one is refused with a reason.
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc :").await;
    hs.type_text("agent ftp://nope m").await;
    hs.keys("enter").await;
    assert_eq!(hs.app.focus(), "agent");
    assert!(agent(&mut hs).model().is_none());
    // The refused setting comes back in the model dialog, to fix it.
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    hs.keys("esc :").await;
    hs.type_text("agent http://127.0.0.1:9/v1 tiny").await;
    hs.keys("enter").await;
    let m = agent(&mut hs).model().cloned().unwrap();
    assert_eq!(
        (m.url.as_str(), m.model.as_str()),
        ("http://127.0.0.1:9/v1", "tiny")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_pane_snapshots_and_small_terminals() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    for (w, h) in [(80, 24), (40, 10)] {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        open_agent(&mut hs, Duration::ZERO).await;
        hs.keys("j").await;
        let text = hs.draw().await;
        settings(dir.path()).bind(|| {
            insta::assert_snapshot!(format!("agent_idle_{w}x{h}"), text);
        });
    }
    // A finished run drawn at sizes down to nothing never panics.
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    open_agent(&mut hs, Duration::ZERO).await;
    hs.keys("enter").await;
    wait_for(&mut hs, "the run to end", |hs| !agent(hs).is_running()).await;
    for (w, h) in [(60, 14), (40, 10), (20, 5), (8, 3), (1, 1)] {
        hs.resize(w, h);
        hs.draw().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_streams_from_the_model_with_tool_calls_and_errors_show() {
    use fake_openai::{FakeOpenAi, Reply, stream_text, stream_tool_calls, text_chunk};
    let server = FakeOpenAi::start(vec![
        stream_tool_calls(
            "Looking around.",
            &[("call_1", "Bash", r#"{"command": "echo hi-from-bash"}"#)],
        ),
        stream_text("All done: the shell said hi.", 5),
        Reply::StreamThenDrop(vec![text_chunk("Half an ans")]),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws.clone(), options(), 120, 40).await;
    open_agent(&mut hs, Duration::ZERO).await;
    hs.keys(":").await;
    hs.type_text(&format!("agent {} tiny", server.url)).await;
    hs.keys("enter").await;
    // Setting the model leaves the keyboard alone: `i` types.
    hs.keys("i").await;
    hs.type_text("say hi through the shell").await;
    hs.keys("enter").await;
    wait_for(&mut hs, "the reply", |hs| {
        let p = agent(hs);
        !p.is_running() && p.last_outcome().is_some()
    })
    .await;
    let p = agent(&mut hs);
    assert_eq!(p.last_outcome(), Some("completed"));
    // Prompts run in the selected session.
    assert_eq!(p.session(), Some("s-001"));
    let conv = p.texts().join("\n");
    for needle in [
        "▶ say hi through the shell",
        "Looking around.",
        "⚙ Bash",
        "hi-from-bash",
        "All done: the shell said hi.",
        "▌ reply completed",
    ] {
        assert!(conv.contains(needle), "missing {needle:?} in:\n{conv}");
    }
    // A dropped connection ends the reply with the error in the
    // conversation.
    hs.type_text("again").await;
    hs.keys("enter").await;
    wait_for(&mut hs, "the failed reply", |hs| {
        let p = agent(hs);
        !p.is_running() && p.last_outcome() != Some("completed")
    })
    .await;
    let p = agent(&mut hs);
    assert_eq!(p.last_outcome(), Some("error"));
    let conv = p.texts().join("\n");
    assert!(conv.contains("! "), "{conv}");
    assert!(conv.contains("▌ reply error"), "{conv}");
    let screen = hs.draw().await;
    assert!(screen.contains("reply error"), "{screen}");
}
