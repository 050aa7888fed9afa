//! Issue 18, point 1: Write and Edit cost what changed, not the file.
//! A 1 MiB Write leaves no 1 MiB copy in the start event, the journal or
//! the result's `diff` metadata; an Edit of one line of a 1 MiB file has
//! a one-hunk diff with the file's own line numbers.

use serde_json::{Value, json};

use wsbench::engine::events::{Event, Received};
use wsbench::engine::tools::ToolResult;
use wsbench::engine::{ToolCall, Workspace};

use crate::support;

/// 1 MiB of numbered lines (`line 1` …).
fn big_text() -> String {
    let mut s = String::with_capacity(1 << 20);
    let mut i = 0;
    while s.len() < 1 << 20 {
        i += 1;
        s.push_str(&format!(
            "line {i:07} of a big file, padded to look like code\n"
        ));
    }
    s
}

async fn call(ws: &Workspace, tool: &str, args: Value) -> ToolResult {
    let r = ws
        .call_tool(ToolCall {
            tool: tool.into(),
            session: "s".into(),
            args,
            ..Default::default()
        })
        .await;
    assert!(r.is_success(), "{}", r.text());
    r
}

fn diff_of(r: &ToolResult) -> &str {
    r.metadata["diff"].as_str().unwrap()
}

#[tokio::test]
async fn a_1mib_write_keeps_no_whole_copy_in_events_journal_or_diff() {
    let (dir, ws) = support::temp_workspace().await;
    let path = format!("{}/big.txt", dir.path().canonicalize().unwrap().display());
    let content = big_text();
    let mut bus = ws.events().subscribe();
    let r = call(&ws, "Write", json!({"file_path": path, "content": content})).await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);

    // The diff of a new file: one all-added hunk, cut at 64 KiB, saying so.
    let diff = diff_of(&r);
    assert!(
        diff.len() <= 64 * 1024 + 200,
        "diff of {} bytes",
        diff.len()
    );
    assert!(diff.starts_with("--- /dev/null\n+++ b/"), "{}", &diff[..80]);
    assert!(diff.lines().last().unwrap().contains("more added lines"));
    assert_eq!(r.metadata["diff_cut"], true);

    // The start event carries a bounded copy of the arguments.
    let mut started = None;
    while let Some(Received::Event(env)) = bus.try_recv() {
        if let Event::ToolStarted { args, .. } = env.event {
            started = Some(args);
        }
    }
    let args = started.expect("a ToolStarted event");
    let shown = args["content"].as_str().unwrap();
    assert!(shown.len() < 4096, "event carries {} bytes", shown.len());
    assert!(
        shown.ends_with(" bytes cut]"),
        "{}",
        &shown[shown.len() - 40..]
    );

    // So does the journal line.
    let journal = ws.journal().read("s").await.unwrap();
    let e = &journal.entries[0];
    assert!(e.args["content"].as_str().unwrap().len() < 4096);
    assert_eq!(e.args_cut_bytes, content.len() as u64 - 2048);

    // An overwrite changing one line: a one-hunk diff at the right lines.
    let changed = content.replacen("line 0010000 ", "LINE 0010000 ", 1);
    let r = call(&ws, "Write", json!({"file_path": path, "content": changed})).await;
    let diff = diff_of(&r);
    assert_eq!(diff.matches("\n@@ ").count(), 1, "{diff}");
    assert!(diff.contains("@@ -9997,7 +9997,7 @@\n"), "{diff}");
    assert!(r.metadata.get("diff_cut").is_none());
}

#[tokio::test]
async fn editing_one_line_of_1mib_gives_a_small_diff_with_file_line_numbers() {
    let (dir, ws) = support::temp_workspace().await;
    let path = dir.path().canonicalize().unwrap().join("big.txt");
    let content = big_text();
    std::fs::write(&path, &content).unwrap();
    let r = call(
        &ws,
        "Edit",
        json!({"file_path": path, "old_string": "line 0015000 of", "new_string": "line 15000 of"}),
    )
    .await;
    let diff = diff_of(&r);
    assert!(diff.len() < 1024, "{diff}");
    assert!(diff.contains("@@ -14997,7 +14997,7 @@\n"), "{diff}");
    assert!(diff.contains("\n-line 0015000 of") && diff.contains("\n+line 15000 of"));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        content.replacen("line 0015000 of", "line 15000 of", 1)
    );
}
