//! Issue 23 point 7: the reference rewrites `context.jsonl` whole and
//! without a lock (docs/contract.md §6), so a wsbench append landing
//! between its read and its write is lost. wsbench checks its own records
//! at the offsets its appends returned and appends the dropped ones again.
//! The reference's rewrite is simulated as it is written
//! (`workspace/_base.py` `offload_context`: read all, write all plus the
//! new lines), with a line the reference wrote
//! (`tests/fixtures/reference-lines/tool-call.jsonl`).

use crate::support;

use std::path::Path;

use support::{fixtures, open};
use wsbench::engine::WorkspaceConfig;
use wsbench::engine::bus::Received;
use wsbench::engine::events::{Event, Subscriber};
use wsbench::engine::message::Msg;

/// The first line the reference wrote (an assistant message with calls).
fn reference_line() -> String {
    let all = std::fs::read_to_string(fixtures().join("reference-lines/tool-call.jsonl")).unwrap();
    format!("{}\n", all.lines().next().unwrap())
}

/// The reference's `offload_context` in two halves: its read now, its
/// write (the old bytes plus its line, replacing the file) later.
struct ReferenceRewrite {
    seen: Vec<u8>,
}

impl ReferenceRewrite {
    fn read(file: &Path) -> Self {
        ReferenceRewrite {
            seen: std::fs::read(file).unwrap(),
        }
    }
    fn write(self, file: &Path, line: &str) {
        let mut all = self.seen;
        all.extend_from_slice(line.as_bytes());
        std::fs::write(file, all).unwrap();
    }
}

/// The text of each line's first block, or `ref` for the reference's.
fn texts(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["name"] == "coder" {
                "ref".to_string()
            } else {
                v["content"][0]["text"].as_str().unwrap().to_string()
            }
        })
        .collect()
}

/// The warnings published so far that name a rewrite.
fn rewrite_warnings(sub: &mut Subscriber) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let Received::Event(e) = r
            && let Event::Log { level, message, .. } = e.event
            && level == "warn"
            && message.contains("rewritten by another writer")
        {
            out.push(message);
        }
    }
    out
}

fn msg(text: &str) -> Msg {
    Msg::text("user", "user", text)
}

#[tokio::test]
async fn a_line_dropped_by_a_reference_rewrite_is_appended_again_and_warned_once() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let mut sub = ws.events().subscribe();
    let off = ws.offload();
    let file = dir.path().join("sessions/s1/context.jsonl");
    off.context("s1", &[msg("a")]).await.unwrap();
    // The reference reads, wsbench appends b, the reference writes: b is
    // gone from the file.
    let rewrite = ReferenceRewrite::read(&file);
    off.context("s1", &[msg("b")]).await.unwrap();
    rewrite.write(&file, &reference_line());
    assert_eq!(texts(&file), ["a", "ref"]);
    // wsbench's next append notices and puts b back before c.
    off.context("s1", &[msg("c")]).await.unwrap();
    assert_eq!(texts(&file), ["a", "ref", "b", "c"]);
    let warned = rewrite_warnings(&mut sub);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("lost 1 record(s)"), "{}", warned[0]);
    assert!(warned[0].contains("context.jsonl"), "{}", warned[0]);
    // A second loss in the same file is repaired, without a second warning.
    let rewrite = ReferenceRewrite::read(&file);
    off.context("s1", &[msg("d"), msg("e")]).await.unwrap();
    rewrite.write(&file, &reference_line());
    off.context("s1", &[msg("f")]).await.unwrap();
    assert_eq!(texts(&file), ["a", "ref", "b", "c", "ref", "d", "e", "f"]);
    assert!(rewrite_warnings(&mut sub).is_empty());
}

#[tokio::test]
async fn a_rewrite_that_shrank_the_file_below_a_line_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let off = ws.offload();
    let file = dir.path().join("sessions/s1/context.jsonl");
    off.context("s1", &[msg("a")]).await.unwrap();
    // The reference's write, with nothing new, of what it read before b:
    // the file is shorter than where b ended.
    let rewrite = ReferenceRewrite::read(&file);
    off.context("s1", &[msg("b")]).await.unwrap();
    rewrite.write(&file, "");
    off.context("s1", &[msg("c")]).await.unwrap();
    assert_eq!(texts(&file), ["a", "b", "c"]);
}

#[tokio::test]
async fn a_rewrite_that_kept_the_lines_appends_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let mut sub = ws.events().subscribe();
    let off = ws.offload();
    let file = dir.path().join("sessions/s1/context.jsonl");
    off.context("s1", &[msg("a")]).await.unwrap();
    off.context("s1", &[msg("b")]).await.unwrap();
    // The reference's read came after b: its rewrite keeps everything.
    ReferenceRewrite::read(&file).write(&file, &reference_line());
    off.context("s1", &[msg("c")]).await.unwrap();
    assert_eq!(texts(&file), ["a", "b", "ref", "c"]);
    assert!(rewrite_warnings(&mut sub).is_empty());
}

#[tokio::test]
async fn a_rewrite_that_moved_the_lines_appends_nothing_twice() {
    // The trial of issue 23: a rewrite that dropped an earlier line (a
    // compression) keeps ours at smaller offsets. Moved is not lost: no
    // duplicate, no warning, and later appends still check cleanly.
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let mut sub = ws.events().subscribe();
    let off = ws.offload();
    let file = dir.path().join("sessions/s1/context.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, reference_line().repeat(3)).unwrap();
    off.context("s1", &[msg("a")]).await.unwrap();
    off.context("s1", &[msg("b")]).await.unwrap();
    let all = std::fs::read_to_string(&file).unwrap();
    let kept: String = all.lines().skip(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, kept).unwrap();
    assert_eq!(texts(&file), ["ref", "a", "b"]);
    off.context("s1", &[msg("c")]).await.unwrap();
    off.context("s1", &[msg("d")]).await.unwrap();
    assert_eq!(texts(&file), ["ref", "a", "b", "c", "d"]);
    assert!(rewrite_warnings(&mut sub).is_empty());
}

#[tokio::test]
async fn a_deleted_session_is_not_brought_back() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let off = ws.offload();
    let file = dir.path().join("sessions/s1/context.jsonl");
    off.context("s1", &[msg("a")]).await.unwrap();
    std::fs::remove_dir_all(dir.path().join("sessions/s1")).unwrap();
    off.context("s1", &[msg("b")]).await.unwrap();
    assert_eq!(texts(&file), ["b"]);
}

#[tokio::test]
async fn each_process_records_survive_a_rewrite_among_several_writers() {
    // Two wsbench workspaces on one folder stand for two processes: each
    // repairs only its own lines, and none is duplicated.
    let dir = tempfile::tempdir().unwrap();
    let one = open(dir.path(), WorkspaceConfig::default()).await;
    let two = open(dir.path(), WorkspaceConfig::default()).await;
    let file = dir.path().join("sessions/s1/context.jsonl");
    one.offload().context("s1", &[msg("a1")]).await.unwrap();
    let rewrite = ReferenceRewrite::read(&file);
    two.offload().context("s1", &[msg("b2")]).await.unwrap();
    one.offload().context("s1", &[msg("c1")]).await.unwrap();
    rewrite.write(&file, &reference_line());
    one.offload().context("s1", &[msg("d1")]).await.unwrap();
    two.offload().context("s1", &[msg("e2")]).await.unwrap();
    assert_eq!(texts(&file), ["a1", "ref", "c1", "d1", "b2", "e2"]);
}
