//! Issue 16 point 5: one clock per command. A command's duration is
//! measured once (the Bash tool's clock) and that one figure is what the
//! Command pane, the journal, the Logs pane, the bus events and
//! `wsbench exec --json` show (before: `exit 0 after 1.4s` in Logs,
//! `Bash success in 2.5s`, `✓ exit 0 · 3.0s` in the pane).

use serde_json::Value;
use wsbench::engine::Event;
use wsbench::engine::events::Received;
use wsbench::tui::panes::logs::{self, LogsPane};
use wsbench::tui::widgets::text;

use crate::support;
use crate::support::tui::{Harness, open, prompt_options};

/// The pane's status line, the journal entry, both Logs lines and both
/// bus events of one command carry the same duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pane_journal_logs_and_events_show_one_duration() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut sub = ws.events().subscribe();
    let mut hs = Harness::new(ws.clone(), prompt_options(), 120, 40).await;
    // Long enough that separately measured clocks would differ.
    hs.type_text("sleep 0.3; echo one-clock").await;
    hs.keys("enter").await;
    let screen = hs.draw().await;

    let journal = ws.journal().read("s-001").await.unwrap();
    let entry = journal
        .entries
        .iter()
        .rev()
        .find(|e| e.tool == "Bash")
        .expect("journalled");
    let ms = entry.duration_ms;
    assert!(ms >= 300, "the command slept 300 ms: {ms}");
    let shown = text::duration_ms(ms);

    let (mut exited, mut finished) = (None, None);
    while let Some(r) = sub.try_recv() {
        if let Received::Event(env) = r {
            match env.event {
                Event::CommandExited { duration_ms, .. } => exited = Some(duration_ms),
                Event::ToolFinished { duration_ms, .. } => finished = Some(duration_ms),
                _ => {}
            }
        }
    }
    assert_eq!(exited, Some(ms), "the exit event");
    assert_eq!(finished, Some(ms), "the tool event");

    assert!(
        screen.contains(&format!("✓ exit 0 · {shown}")),
        "the pane shows {shown}:\n{screen}"
    );
    let lines: Vec<String> = hs
        .app
        .pane_call::<LogsPane, _>(logs::ID, |p, _| {
            p.lines().map(|l| l.message.clone()).collect()
        })
        .unwrap();
    let has = |want: &str| lines.iter().any(|l| l.contains(want));
    assert!(has(&format!("exit 0 after {shown}")), "{lines:#?}");
    assert!(has(&format!("Bash success in {shown}")), "{lines:#?}");
}

/// `wsbench exec --json` reports the figure the journal keeps.
#[test]
fn exec_json_reports_the_journalled_duration() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let wd = w.path().to_str().unwrap();
    let o = support::cli::wsbench_cmd(home.path())
        .args([
            "--json",
            "--workdir",
            wd,
            "--session",
            "s-clock",
            "exec",
            "--",
            "sleep 0.3",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ms = v["metadata"]["duration_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no duration: {v}"));
    assert!(ms >= 300, "{v}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let journalled = rt.block_on(async {
        let ws = support::open(w.path(), Default::default()).await;
        let j = ws.journal().read("s-clock").await.unwrap();
        assert_eq!(j.entries.len(), 1, "{:?}", j.entries);
        j.entries[0].duration_ms
    });
    assert_eq!(journalled, ms);
}
