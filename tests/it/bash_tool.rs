//! The Bash tool on the local backend: output, exit codes, timeouts that
//! kill the whole tree, big output, stdin, streaming events.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{call, temp_workspace};
use wsbench::engine::events::{Event, Received};
use wsbench::engine::tools::ToolState;

#[tokio::test]
async fn echo_and_exit_codes() {
    let (_d, ws) = temp_workspace().await;
    let r = call(&ws, "Bash", json!({"command": "echo hi"})).await;
    assert_eq!(r.state, ToolState::Success);
    assert_eq!(r.text(), "hi\n");
    assert_eq!(r.exit_code, Some(0));

    let r = call(
        &ws,
        "Bash",
        json!({"command": "echo out; echo err >&2; exit 7"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Error);
    assert_eq!(r.exit_code, Some(7));
    let t = r.text();
    assert!(
        t.starts_with("Command failed: echo out; echo err >&2; exit 7\nExit code: 7\n"),
        "{t}"
    );
    assert!(
        t.contains("Stdout:\nout\n") && t.contains("Stderr:\nerr\n"),
        "{t}"
    );
}

#[tokio::test]
async fn runs_in_the_workdir_and_missing_command_is_127() {
    let (d, ws) = temp_workspace().await;
    let r = call(&ws, "Bash", json!({"command": "pwd -P"})).await;
    assert_eq!(
        r.text().trim(),
        std::fs::canonicalize(d.path()).unwrap().to_str().unwrap()
    );
    let r = call(
        &ws,
        "Bash",
        json!({"command": "definitely_missing_cmd --flag"}),
    )
    .await;
    assert_eq!(r.exit_code, Some(127));
    assert!(r.text().contains("not found"), "{}", r.text());
}

#[tokio::test]
async fn shell_line_is_passed_intact_c18() {
    let (_d, ws) = temp_workspace().await;
    let cmd = "sh -c 'sleep 0.2; echo one > one.txt' & echo two > two.txt && echo three > three.txt; wait; cat one.txt two.txt three.txt";
    let r = call(&ws, "Bash", json!({"command": cmd})).await;
    assert_eq!(r.text(), "one\ntwo\nthree\n");
    assert_eq!(r.exit_code, Some(0));
}

#[tokio::test]
async fn stdin_is_closed() {
    let (_d, ws) = temp_workspace().await;
    let t0 = Instant::now();
    let r = call(
        &ws,
        "Bash",
        json!({"command": "cat; read x; echo done", "timeout": 20000}),
    )
    .await;
    assert_eq!(r.text(), "done\n");
    assert!(t0.elapsed() < Duration::from_secs(10));
}

fn marker_processes(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("");
        if state == "Z" {
            continue;
        }
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) {
            found.push(format!("{} {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

#[tokio::test]
async fn timeout_kills_tree_including_setsid_and_sigterm_ignoring_children() {
    let (_d, ws) = temp_workspace().await;
    let marker = format!("wsbench-tree-{}", uuid::Uuid::new_v4().simple());
    // Children ignore SIGTERM, one detaches into its own session; each
    // shell carries the marker as its $0 so we can find it in /proc.
    let cmd = format!(
        "trap '' TERM; sh -c 'trap \"\" TERM; sleep 100' {marker}-a & \
         setsid sh -c 'trap \"\" TERM; sleep 100' {marker}-b & \
         sh -c 'trap \"\" TERM; sleep 100; true' {marker}-c & echo started; wait"
    );
    let ws2 = ws.clone();
    let t0 = Instant::now();
    let task =
        tokio::spawn(
            async move { call(&ws2, "Bash", json!({"command": cmd, "timeout": 1500})).await },
        );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let running = marker_processes(&marker);
    // The outer shell plus the three children.
    assert_eq!(
        running.len(),
        4,
        "expected four marked shells, got {running:?}"
    );
    let r = task.await.unwrap();
    assert!(r.timed_out, "{}", r.text());
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
    assert!(
        r.text().starts_with("Command timed out after 1500ms"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("started"));
    // Nothing with the marker survives.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = marker_processes(&marker);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn big_output_is_truncated_and_offloaded_whole() {
    let (_d, ws) = temp_workspace().await;
    // 50 MB on stdout, a little on stderr.
    let cmd = "head -c 52428800 /dev/zero | tr '\\0' 'x'; echo tail >&2";
    let r = call(&ws, "Bash", json!({"command": cmd})).await;
    assert_eq!(r.state, ToolState::Success);
    assert_eq!(r.output_bytes, 52_428_800 + 5);
    let text = r.text();
    assert!(text.chars().count() < 31_000, "{}", text.len());
    assert!(text.contains("... (output truncated)"));
    let path = r.offload_path.clone().expect("offloaded");
    assert!(text.contains(&path));
    assert!(path.ends_with(".txt") && path.contains("/sessions/s/tool_result-"));
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 52_428_800 + 1 + 5);
    let offloads = ws.offload().list(Some("s")).await.unwrap();
    assert!(offloads.iter().any(|o| o.path == path));
    let journal = ws.journal().read("s").await.unwrap();
    assert_eq!(
        journal.entries.last().unwrap().offload_path.as_deref(),
        Some(path.as_str())
    );
}

#[tokio::test]
async fn output_streams_as_events_while_running() {
    let (_d, ws) = temp_workspace().await;
    let mut sub = ws.events().subscribe();
    let ws2 = ws.clone();
    let task = tokio::spawn(async move {
        call(
            &ws2,
            "Bash",
            json!({"command": "echo first; sleep 1; echo second"}),
        )
        .await
    });
    let mut saw_first_before_exit = false;
    let mut exited = false;
    while let Some(ev) = sub.recv().await {
        let Received::Event(env) = ev else { continue };
        match env.event {
            Event::CommandOutput { data, .. } if data.starts_with(b"first") => {
                saw_first_before_exit = !exited;
            }
            Event::CommandExited { exit_code, .. } => {
                exited = true;
                assert_eq!(exit_code, Some(0));
            }
            Event::ToolFinished { .. } => break,
            _ => {}
        }
    }
    assert!(saw_first_before_exit);
    assert!(exited);
    task.await.unwrap();
}

#[tokio::test]
async fn cancel_interrupts_and_kills() {
    let (_d, ws) = temp_workspace().await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let t0 = Instant::now();
    let r = ws
        .call_tool(wsbench::engine::ToolCall {
            tool: "Bash".into(),
            session: "s".into(),
            args: json!({"command": "sleep 30"}),
            cancel: Some(cancel),
            ..Default::default()
        })
        .await;
    assert_eq!(r.state, ToolState::Interrupted);
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn journal_records_each_call() {
    let (_d, ws) = temp_workspace().await;
    call(&ws, "Bash", json!({"command": "exit 3"})).await;
    call(&ws, "Bash", json!({"command": "true"})).await;
    let j = ws.journal().read("s").await.unwrap();
    assert_eq!(j.entries.len(), 2);
    assert_eq!(j.entries[0].exit_code, Some(3));
    assert_eq!(j.entries[0].tool, "Bash");
    assert_eq!(j.entries[0].summary(), "exit 3");
    assert_eq!(j.entries[1].exit_code, Some(0));
    assert!(j.bad_lines.is_empty());
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_clear_errors() {
    let (_d, ws) = temp_workspace().await;
    let r = call(&ws, "Bash", json!({"cmd": "x"})).await;
    assert_eq!(r.state, ToolState::Error);
    assert!(
        r.text().contains("Invalid arguments for Bash"),
        "{}",
        r.text()
    );
    let r = call(&ws, "Nope", json!({})).await;
    assert!(r.text().contains("Unknown tool `Nope`"));
    let r = ws
        .call_tool(wsbench::engine::ToolCall {
            tool: "Bash".into(),
            session: "../escape".into(),
            args: json!({"command": "true"}),
            ..Default::default()
        })
        .await;
    assert!(r.text().contains("invalid session id"), "{}", r.text());
}
