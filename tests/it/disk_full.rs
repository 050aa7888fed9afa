//! A full disk during the appends and offloads wsbench makes (issue 14
//! point 6): the journal, `context.jsonl` and tool-result files live on a
//! 64 KiB tmpfs that is filled up, then freed. A failed append must leave
//! no partial line (the next entry is read back), and a failed offload no
//! empty `tool_result-*.txt`, saying so on every path.
//!
//! Needs root to mount the tmpfs (CI runs as root): elsewhere the tests
//! print `SKIPPED: <why>` and fail under `CI=true`.

use crate::support;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use chrono::Utc;
use serde_json::json;
use wsbench::engine::WorkspaceConfig;
use wsbench::engine::journal::JournalEntry;
use wsbench::engine::message::Msg;
use wsbench::engine::tools::ToolState;

/// A small tmpfs, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a 64 KiB tmpfs on a fresh temp dir, or says why not.
    fn mount() -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mounting a tmpfs failed (needs root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system; returns the filler, to be removed to free it.
    fn fill(&self) -> PathBuf {
        let p = self.path().join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let chunk = [b'f'; 512];
        while f.write_all(&chunk).is_ok() {}
        p
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

macro_rules! require_tmpfs {
    () => {
        match Tmpfs::mount() {
            Ok(t) => t,
            Err(why) => {
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("a small tmpfs is required: {why}");
                }
                println!("SKIPPED: {why}");
                return;
            }
        }
    };
}

fn entry(n: usize, command: String) -> JournalEntry {
    JournalEntry {
        started_at: Utc::now(),
        call_id: format!("c{n}"),
        agent: String::new(),
        session: "s".into(),
        tool: "Bash".into(),
        args: json!({ "command": command }),
        args_cut_bytes: 0,
        state: ToolState::Success,
        exit_code: Some(0),
        timed_out: false,
        error: None,
        duration_ms: 1,
        output_bytes: 0,
        offload_path: None,
    }
}

#[tokio::test]
async fn a_journal_append_on_a_full_disk_leaves_no_torn_line() {
    let fs = require_tmpfs!();
    let ws = support::open(fs.path(), WorkspaceConfig::default()).await;
    let j = ws.journal();
    j.append(&entry(1, "echo one".into())).await.unwrap();
    let filler = fs.fill();
    // Bigger than what is left of the journal's last page: part of it
    // lands, then the disk is full.
    let big = entry(2, "x".repeat(6000));
    assert!(j.append(&big).await.is_err(), "the disk is full");
    std::fs::remove_file(filler).unwrap();
    j.append(&entry(3, "echo three".into())).await.unwrap();
    let read = j.read("s").await.unwrap();
    let ids: Vec<_> = read.entries.iter().map(|e| e.call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c3"], "bad lines: {:?}", read.bad_lines);
    assert!(read.bad_lines.is_empty(), "{:?}", read.bad_lines);
    assert_eq!(read.torn, 0);
}

#[tokio::test]
async fn a_context_append_on_a_full_disk_leaves_no_torn_line() {
    let fs = require_tmpfs!();
    let ws = support::open(fs.path(), WorkspaceConfig::default()).await;
    let off = ws.offload();
    off.context("s", &[Msg::text("user", "user", "one")])
        .await
        .unwrap();
    let filler = fs.fill();
    let big = Msg::text("user", "user", "y".repeat(6000));
    assert!(off.context("s", &[big]).await.is_err(), "the disk is full");
    std::fs::remove_file(filler).unwrap();
    off.context("s", &[Msg::text("user", "user", "three")])
        .await
        .unwrap();
    let read = ws.sessions().read_context("s").await.unwrap();
    let texts: Vec<_> = read.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(texts, ["one", "three"], "bad lines: {:?}", read.bad_lines);
    assert!(read.bad_lines.is_empty(), "{:?}", read.bad_lines);
}

/// Torn tails written by a crash (not a failed write, which is now cut
/// back) are ended before the next record, and reported as torn.
#[tokio::test]
async fn a_torn_tail_is_reported_and_the_next_entry_kept() {
    let (dir, ws) = support::temp_workspace().await;
    let j = ws.journal();
    j.append(&entry(1, "echo one".into())).await.unwrap();
    let path = dir.path().join("sessions/s/journal.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(br#"{"started_at":"2026-01-01T00:00:00Z","call_"#)
        .unwrap();
    j.append(&entry(3, "echo three".into())).await.unwrap();
    let read = j.read("s").await.unwrap();
    let ids: Vec<_> = read.entries.iter().map(|e| e.call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c3"]);
    assert_eq!(read.torn, 1, "{:?}", read.bad_lines);
}

#[tokio::test]
async fn a_tool_result_offload_on_a_full_disk_leaves_no_file_and_says_so() {
    let fs = require_tmpfs!();
    let ws = support::open(fs.path(), WorkspaceConfig::default()).await;
    // The session directory exists before the disk fills.
    ws.offload()
        .context("s", &[Msg::text("user", "user", "go")])
        .await
        .unwrap();
    let _filler = fs.fill();
    let r = support::call(
        &ws,
        "Bash",
        json!({"command": "head -c 200000 /dev/zero | tr '\\0' a"}),
    )
    .await;
    let text = r.text();
    assert!(
        text.contains("The full output could not be saved"),
        "{text:.300}"
    );
    assert!(
        r.metadata.get("offload_error").is_some(),
        "{:?}",
        r.metadata
    );
    let left: Vec<_> = std::fs::read_dir(fs.path().join("sessions/s"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tool_result-") || n.starts_with(".wsbench-tmp-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn exec_says_when_the_full_output_could_not_be_saved() {
    let fs = require_tmpfs!();
    let home = tempfile::tempdir().unwrap();
    let w = fs.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    // Open the workspace (and make its session) before the disk fills.
    let first = support::cli::wsbench_cmd(home.path())
        .args(["exec", "--session", "s", "--workdir"])
        .arg(&w)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    let _filler = fs.fill();
    let out = support::cli::wsbench_cmd(home.path())
        .args(["exec", "--session", "s", "--workdir"])
        .arg(&w)
        .args(["--", "head -c 200000 /dev/zero | tr '\\0' a"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the full output could not be saved"),
        "stderr: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(w.join("sessions/s"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tool_result-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
