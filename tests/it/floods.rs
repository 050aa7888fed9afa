//! Issue 16: floods never freeze the TUI, fill the disk or grow memory.
//! The tool-result cap, the Command pane's byte budget under 100 MB, the
//! Logs pane's retention by level, the Offload pane after a delete, and a
//! real terminal running `yes` (tmux).

use crate::support;

use serde_json::json;
use wsbench::engine::WorkspaceConfig;
use wsbench::engine::tools::ToolLimits;
use wsbench::engine::tools::spool::marker;

/// A result over the cap keeps its head and tail in the tool-result file
/// with a marker line between, and the model's text names the file and
/// the skip.
#[tokio::test]
async fn a_tool_result_over_the_cap_keeps_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let config = WorkspaceConfig {
        limits: ToolLimits {
            tool_result_max_bytes: 10_000,
            ..Default::default()
        },
        ..Default::default()
    };
    let ws = support::open(dir.path(), config).await;
    // 200,000 numbered lines: "1\n" … "200000\n" (1,288,895 bytes).
    let r = support::call(&ws, "Bash", json!({"command": "seq 1 200000"})).await;
    let text = r.text();
    let path = r.offload_path.clone().expect("offloaded");
    assert!(
        text.contains(&path),
        "the model's text names the file: {text}"
    );
    let total: u64 = (1..=200_000u64)
        .map(|i| i.to_string().len() as u64 + 1)
        .sum();
    let skipped = total - 10_000;
    assert!(
        text.contains(&format!("{skipped} bytes skipped")),
        "the model's text says what was skipped: {text}"
    );
    let body = std::fs::read(&path).unwrap();
    let want_marker = marker(skipped, total, 10_000);
    assert_eq!(body.len() as u64, 10_000 + want_marker.len() as u64);
    let body = String::from_utf8(body).unwrap();
    assert!(body.starts_with("1\n2\n3\n"), "head kept");
    assert!(body.ends_with("199999\n200000\n"), "tail kept");
    assert!(body.contains(&want_marker), "marker line between");
}

/// The cap is for the whole result: stdout and stderr both over it share
/// it (half each), each keeping its head, a marker and its tail, so the
/// file never reaches twice the cap; a small stream next to a flood is
/// kept whole.
#[tokio::test]
async fn the_tool_result_cap_is_shared_by_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 10_000u64;
    let config = WorkspaceConfig {
        limits: ToolLimits {
            tool_result_max_bytes: cap,
            ..Default::default()
        },
        ..Default::default()
    };
    let ws = support::open(dir.path(), config).await;
    // 588,895 bytes on each stream ("1\n" … "100000\n").
    let total: u64 = (1..=100_000u64)
        .map(|i| i.to_string().len() as u64 + 1)
        .sum();
    let r = support::call(
        &ws,
        "Bash",
        json!({"command": "seq 1 100000; seq 1 100000 >&2"}),
    )
    .await;
    let path = r.offload_path.clone().expect("offloaded");
    let skipped = 2 * total - cap;
    assert!(
        r.text().contains(&format!("{skipped} bytes skipped")),
        "the model's text says what was skipped in all: {}",
        r.text()
    );
    let body = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
    let m = marker(total - cap / 2, total, cap);
    assert_eq!(body.len() as u64, cap + 2 * m.len() as u64 + 1);
    assert_eq!(body.matches(&m).count(), 2, "one marker per stream");
    assert!(body.starts_with("1\n2\n3\n"), "stdout's head kept");
    assert!(
        body.contains("99999\n100000\n\n1\n2\n"),
        "stdout's tail, then stderr's head"
    );
    assert!(body.ends_with("99999\n100000\n"), "stderr's tail kept");

    // A short stderr beside a stdout flood is kept whole.
    let r = support::call(
        &ws,
        "Bash",
        json!({"command": "seq 1 100000; echo oops >&2"}),
    )
    .await;
    let body = std::fs::read_to_string(r.offload_path.clone().expect("offloaded")).unwrap();
    assert_eq!(
        body.len() as u64,
        cap + marker(total - (cap - 5), total, cap).len() as u64 + 1
    );
    assert!(
        body.ends_with("100000\n\noops\n"),
        "{}",
        &body[body.len() - 40..]
    );
}

/// A tool-result file deleted on disk leaves the Offload pane without a
/// restart (the file watch reports it; the pane reloads on its tick).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offload_pane_follows_a_delete() {
    use std::time::{Duration, Instant};
    use support::tui::{Harness, open, options};
    use wsbench::tui::panes::offload::{self, OffloadPane};

    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut o = options();
    o.watch = true;
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    let r = ws
        .call_tool(wsbench::engine::ToolCall {
            tool: "Bash".into(),
            session: "s-001".into(),
            args: json!({"command": "seq 1 100000"}),
            ..Default::default()
        })
        .await;
    let path = r.offload_path.clone().expect("offloaded");
    let listed = |hs: &mut Harness| {
        hs.app
            .pane_call::<OffloadPane, _>(offload::ID, |p, _| {
                p.items().iter().any(|i| i.path == path)
            })
            .unwrap()
    };
    // A guard against a hang, not a timing: the watch and a tick or two.
    let wait = |what: &'static str| {
        let t0 = Instant::now();
        move || {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "gave up waiting for {what}"
            );
        }
    };
    let check = wait("the offload to be listed");
    while !listed(&mut hs) {
        check();
        hs.settle().await;
        hs.app.tick();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::remove_file(&path).unwrap();
    let check = wait("the deleted offload to leave the list");
    while listed(&mut hs) {
        check();
        hs.settle().await;
        hs.app.tick();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A tool-result file truncated on disk shows its new size in the
/// Offload pane without a restart (issue 16 point 6: "deleted or
/// truncated offload files disappear or update").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offload_pane_follows_a_truncate() {
    use std::time::{Duration, Instant};
    use support::tui::{Harness, open, options};
    use wsbench::tui::panes::offload::{self, OffloadPane};

    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut o = options();
    o.watch = true;
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    let r = ws
        .call_tool(wsbench::engine::ToolCall {
            tool: "Bash".into(),
            session: "s-001".into(),
            args: json!({"command": "seq 1 100000"}),
            ..Default::default()
        })
        .await;
    let path = r.offload_path.clone().expect("offloaded");
    let full = std::fs::metadata(&path).unwrap().len();
    assert!(full > 100, "{full}");
    let size = |hs: &mut Harness| {
        hs.app
            .pane_call::<OffloadPane, _>(offload::ID, |p, _| {
                p.items().iter().find(|i| i.path == path).map(|i| i.bytes)
            })
            .unwrap()
    };
    // A guard against a hang, not a timing: the watch and a tick or two.
    let until = |what: &'static str| {
        let t0 = Instant::now();
        move || {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "gave up waiting for {what}"
            );
        }
    };
    let check = until("the offload to be listed");
    while size(&mut hs) != Some(full) {
        check();
        hs.settle().await;
        hs.app.tick();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    let check = until("the truncated size to show");
    while size(&mut hs) != Some(100) {
        check();
        hs.settle().await;
        hs.app.tick();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
