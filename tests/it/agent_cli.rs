//! `wsbench demo` and `wsbench agent` through the real binary.

use crate::support::fake_openai;
use crate::support::{self, cli};

use std::path::Path;
use std::process::Output;

use fake_openai::{FakeOpenAi, stream_text, stream_tool_calls};
use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Env {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = cli::wsbench_tokio_cmd(self.home.path());
        c.args(args).stdin(std::process::Stdio::null());
        c
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().await.unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test]
async fn demo_list_names_the_three_demos() {
    let env = Env::new();
    let o = env.run(&["demo", "--list"]).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for n in ["explore", "bugfix", "long"] {
        assert!(out.contains(n), "{out}");
    }
    let o = env.run(&["demo", "nope", "--workdir", "/tmp"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("no demo named `nope`"), "{}", text(&o));
}

#[tokio::test]
async fn demo_explore_on_a_copy_of_a_real_repo_leaves_a_session_to_inspect() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    support::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &dir.path().join("src"),
    );
    let w = dir.path().to_str().unwrap();
    let o = env
        .run(&["demo", "explore", "--workdir", w, "--session", "tour"])
        .await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("▶ Glob"), "{out}");
    assert!(out.contains("reply completed"), "{out}");
    assert!(out.contains("context compressed"), "{out}");
    // What the sessions and offload commands (and the TUI) show.
    let o = env
        .run(&["sessions", "show", "tour", "--workdir", w, "--json"])
        .await;
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["journal"]["entries"].as_array().unwrap().len(), 4);
    let kinds: Vec<&str> = v["offloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"context") && kinds.contains(&"tool_result"),
        "{kinds:?}"
    );
    let ctx = dir.path().join("sessions/tour/context.jsonl");
    let o = env
        .run(&["offload", "show", ctx.to_str().unwrap(), "--workdir", w])
        .await;
    assert!(text(&o).contains("Give me a tour"), "{}", text(&o));
}

#[tokio::test]
async fn demo_json_prints_one_event_per_line_and_a_summary() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().to_str().unwrap();
    let o = env.run(&["demo", "bugfix", "--workdir", w, "--json"]).await;
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "reply_started");
    assert!(lines.iter().any(|l| l["type"] == "tool_result"));
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(last["journal_entries"], 4);
}

#[tokio::test]
async fn demo_step_mode_runs_on_enter() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().to_str().unwrap();
    let mut cmd = env.command(&["demo", "bugfix", "--workdir", w, "--step"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = String::new();
    let mut pauses = 0;
    let read_all = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("⏸ next:") {
                pauses += 1;
                // Enter: run exactly the step that is waiting.
                stdin.write_all(b"\n").await.unwrap();
                stdin.flush().await.unwrap();
            }
            out.push_str(&line);
            out.push('\n');
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read_all)
        .await
        .expect("step mode run timed out");
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{out}");
    // Five model turns and four tool calls.
    assert_eq!(pauses, 9, "{out}");
    assert!(out.contains("All three tests pass now."), "{out}");
}

#[tokio::test]
async fn demo_step_mode_takes_piped_input_line_by_line() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().to_str().unwrap();
    let mut cmd = env.command(&["demo", "bugfix", "--workdir", w, "--step"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use tokio::io::AsyncWriteExt;
    // Everything at once, before the first pause: two steps, then stop.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\n\nq\n").await.unwrap();
    drop(stdin);
    let o = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("step mode run timed out")
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let pauses = out.matches("⏸ next:").count();
    assert_eq!(pauses, 3, "two steps ran, the third pause got q:\n{out}");
    assert!(!out.contains("All three tests pass now."), "{out}");
}

#[tokio::test]
async fn agent_runs_against_an_openai_compatible_server() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let w = dir.path().to_str().unwrap();
    let server = FakeOpenAi::start(vec![
        stream_tool_calls("Looking.", &[("call_g", "Glob", r#"{"pattern": "*.txt"}"#)]),
        stream_text("There is one text file: a.txt.", 4),
    ])
    .await;
    let o = env
        .command(&[
            "agent",
            "which text files are there?",
            "--workdir",
            w,
            "--session",
            "q1",
            "--model-url",
            &server.url,
            "--model",
            "fake",
            "--api-key-env",
            "WSBENCH_TEST_KEY",
        ])
        .env("WSBENCH_TEST_KEY", "sk-test")
        .output()
        .await
        .unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("There is one text file: a.txt."), "{out}");
    assert!(out.contains("▶ Glob"), "{out}");
    assert_eq!(server.requests().len(), 2);
    // Continue the session.
    server.push(vec![stream_text("Still just a.txt.", 1)]);
    let o = env
        .run(&[
            "agent",
            "and now?",
            "--workdir",
            w,
            "--session",
            "q1",
            "--model-url",
            &server.url,
            "--model",
            "fake",
        ])
        .await;
    let out = text(&o);
    // The user message and the one assistant message of the reply (calls
    // and results live in it, as in the reference's format).
    assert!(out.contains("continuing 2 message(s)"), "{out}");
    assert!(
        server.requests()[2]["messages"]
            .to_string()
            .contains("which text files")
    );
}

#[tokio::test]
async fn agent_reports_a_dead_server_with_exit_code_1() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let o = env
        .run(&[
            "agent",
            "hi",
            "--workdir",
            dir.path().to_str().unwrap(),
            "--model-url",
            &url,
            "--model",
            "m",
        ])
        .await;
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("connection"), "{}", text(&o));
}
