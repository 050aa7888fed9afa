//! Bad input from the engine issue that spans tools: non-UTF-8 file names,
//! `..` and relative paths, files the tools must not choke on.

use crate::support;

use std::os::unix::ffi::OsStrExt;

use serde_json::json;
use support::{call, temp_workspace};
use wsbench::engine::tools::ToolState;

#[tokio::test]
async fn non_utf8_file_names_are_listed_and_searched() {
    let (d, ws) = temp_workspace().await;
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(d.path().join(name), "needle\n").unwrap();
    std::fs::write(d.path().join("plain.txt"), "needle\n").unwrap();

    let r = call(&ws, "Glob", json!({"pattern": "*.txt"})).await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    // Issue 14: a name that is not UTF-8 is named with `\xNN` escapes
    // (never a lossy U+FFFD a later Read could not open) and reported.
    assert!(r.text().contains(r"caf\xE9.txt"), "{}", r.text());
    assert!(!r.text().contains('\u{FFFD}'), "{}", r.text());
    assert!(r.text().contains("plain.txt"));

    let r = call(
        &ws,
        "Grep",
        json!({"pattern": "needle", "output_mode": "count"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    assert!(r.text().contains("plain.txt"), "{}", r.text());
    assert!(r.text().contains(r"caf\xE9.txt"), "{}", r.text());
    assert!(!r.text().contains('\u{FFFD}'), "{}", r.text());

    let entries = ws.sandbox().list(ws.layout().workdir()).await.unwrap();
    assert!(entries.iter().any(|e| e.name == "caf\u{FFFD}.txt"));
}

#[tokio::test]
async fn dotdot_and_relative_paths() {
    let (d, ws) = temp_workspace().await;
    std::fs::create_dir(d.path().join("sub")).unwrap();
    std::fs::write(d.path().join("top.txt"), "top\n").unwrap();
    let root = ws.layout().workdir().to_string();
    // `..` is resolved lexically, so this names top.txt.
    let r = call(
        &ws,
        "Read",
        json!({"file_path": format!("{root}/sub/../top.txt")}),
    )
    .await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    assert!(r.text().contains("top"));
    let r = call(&ws, "Read", json!({"file_path": "top.txt"})).await;
    assert_eq!(r.state, ToolState::Error);
    assert!(r.text().to_lowercase().contains("absolute"), "{}", r.text());
    let r = call(
        &ws,
        "Write",
        json!({"file_path": "rel.txt", "content": "x"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Error);
    assert!(!d.path().join("rel.txt").exists());
}

#[tokio::test]
async fn malformed_mcp_file_does_not_stop_the_workspace() {
    let (d, ws) = temp_workspace().await;
    let bad = b"{\"version\": 2, \"mcps\": {\"a\": {\"s\": [{\"name\": \"x\", \"is_stateful\": true, \"mcp_config\": {\"type\": \"stdio_mcp\"}}]}}}";
    std::fs::write(d.path().join(".mcp"), bad).unwrap();
    let store = ws.mcp().load_store().await.unwrap();
    assert!(store.has_errors());
    let msg = store.issues()[0].to_string();
    assert!(msg.contains(".mcp") && msg.contains("command"), "{msg}");
    // Tools still work, and the file is untouched.
    assert_eq!(
        call(&ws, "Bash", json!({"command": "echo ok"}))
            .await
            .text(),
        "ok\n"
    );
    assert_eq!(std::fs::read(d.path().join(".mcp")).unwrap(), bad);
}

#[tokio::test]
async fn searches_never_find_their_own_journal() {
    let (_d, ws) = temp_workspace().await;
    let r = call(&ws, "Grep", json!({"pattern": "ZZZNOPE"})).await;
    assert!(r.text().starts_with("No matches found"), "{}", r.text());
    // The first call is now in sessions/s/journal.jsonl; it must stay unseen.
    let r = call(&ws, "Grep", json!({"pattern": "ZZZNOPE"})).await;
    assert!(r.text().starts_with("No matches found"), "{}", r.text());
    let r = call(&ws, "Glob", json!({"pattern": "**/*.jsonl"})).await;
    assert!(r.text().starts_with("No files found"), "{}", r.text());
}

/// Issue 14: `--session` with a terminal escape is refused with a clear
/// error (the id escaped) and no session directory is made.
#[test]
fn a_session_id_with_control_characters_is_refused_and_makes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let o = support::cli::wsbench_cmd(home.path())
        .arg("--workdir")
        .arg(w.path())
        .args(["--session", "a\x1b[2Jb", "exec", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("invalid session id"), "{err}");
    assert!(err.contains("control characters"), "{err}");
    assert!(
        !err.contains('\x1b'),
        "the escape reached the terminal: {err:?}"
    );
    let sessions = w.path().join("sessions");
    let made: Vec<_> = std::fs::read_dir(&sessions)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(made.is_empty(), "{made:?}");
}
