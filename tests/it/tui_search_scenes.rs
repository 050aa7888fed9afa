//! The shared search widget in every text view (issue 19): Logs, help,
//! a tool result and a conversation in the viewer take `/` and `?`, `n`
//! and `N` as the file viewer does, show `i/n` (or `no match`) in their
//! bar, and Esc clears the search before it closes or goes back.
//! Snapshot scenes of a search with hits and one without, at 120×40 and
//! 80×24 (insta; text only, so the highlight is checked by the bar and
//! the marked line, not by colour).

use crate::support::tui::*;

const SIZES: [(u16, u16); 2] = [(120, 40), (80, 24)];

/// Keys pressed, or text typed, to set a scene up.
enum Step {
    Keys(&'static str),
    Type(&'static str),
}

/// Runs `setup`, types `query` after `search_key` and Enter, then
/// `after`; snapshots the screen as `{name}_{w}x{h}` and returns the
/// 120×40 text for the caller's own checks.
async fn scene(name: &str, setup: &[Step], search_key: &str, query: &str, after: &str) -> String {
    let (dir, ws) = fixture(|_| {}).await;
    let mut first = String::new();
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        for step in setup {
            match step {
                Step::Keys(k) => hs.keys(k).await,
                Step::Type(t) => hs.type_text(t).await,
            }
        }
        // A frame before the search, as the app draws between keys (the
        // viewer scrolls a found line by the height it last drew).
        hs.draw().await;
        hs.keys(search_key).await;
        hs.type_text(query).await;
        hs.keys("enter").await;
        if !after.is_empty() {
            hs.keys(after).await;
        }
        let text = hs.draw().await;
        let mut s = settings(dir.path());
        s.add_filter(r"(\[DUR\][^┃\n]*?) *┃", "$1 ┃");
        s.bind(|| insta::assert_snapshot!(format!("{name}_{w}x{h}"), text));
        if first.is_empty() {
            first = text;
        }
    }
    first
}

/// Logs after one command: `/echo` selects its line, `no match` for a
/// word no line holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_search_scenes() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("i").await;
    hs.type_text("echo hi").await;
    hs.keys("enter esc 6 z").await;
    hs.keys("/").await;
    hs.type_text("echo").await;
    hs.keys("enter").await;
    let text = hs.draw().await;
    assert!(text.contains("/echo  1/1"), "{text}");
    // `n` wraps to the same line; Esc clears the search, not the pane.
    hs.keys("n").await;
    assert!(hs.draw().await.contains("/echo  1/1"));
    hs.keys("esc").await;
    let text = hs.draw().await;
    assert!(!text.contains("/echo"), "esc clears:\n{text}");
    assert!(text.contains("Logs ("), "{text}");

    let setup = &[
        Step::Keys("i"),
        Step::Type("echo hi"),
        Step::Keys("enter esc 6 z"),
    ];
    let hit = scene("logs_search", setup, "/", "echo", "").await;
    assert!(hit.contains("/echo  1/1"), "{hit}");
    let none = scene("logs_search_none", setup, "?", "nothing-here", "").await;
    assert!(none.contains("?nothing-here  no match"), "{none}");
}

/// Help: `/grep` marks the first row naming Grep; `?` searches up; a
/// word in no row says `no match`; Esc clears, a second Esc closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_search_scenes() {
    let hit = scene("help_search", &[Step::Keys("esc 2 ?")], "/", "grep", "n").await;
    assert!(hit.contains("/grep  2/"), "{hit}");
    let none = scene(
        "help_search_none",
        &[Step::Keys("esc 2 ?")],
        "?",
        "zzqx",
        "",
    )
    .await;
    assert!(none.contains("?zzqx  no match"), "{none}");

    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc 2 ? /").await;
    hs.type_text("grep").await;
    hs.keys("enter esc").await;
    assert_eq!(hs.app.overlay_kind(), Some("help"), "esc cleared only");
    hs.keys("esc").await;
    assert_eq!(hs.app.overlay_kind(), None, "then closed");
}

/// A tool result (3000 grep lines) in the viewer: `/module_1234` finds
/// its one line far below the first screen; `n` wraps back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_result_search_scenes() {
    let hit = scene(
        "tool_result_search",
        &[Step::Keys("esc 4 j j enter")],
        "/",
        "module_1234",
        "n",
    )
    .await;
    assert!(hit.contains("/module_1234  1/1"), "{hit}");
    assert!(hit.contains("src/module_1234.rs:1234"), "{hit}");
    assert!(!hit.contains("src/module_0000.rs"), "scrolled: {hit}");
    let none = scene(
        "tool_result_search_none",
        &[Step::Keys("esc 4 j j enter")],
        "/",
        "FIXME",
        "",
    )
    .await;
    assert!(none.contains("/FIXME  no match"), "{none}");
}

/// The conversation of `context.jsonl` in the viewer: `?screenshot` goes
/// up from the top, wrapping to the last of its two lines; an upper-case
/// letter makes it case-sensitive (smart case), so `Screenshot` is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_search_scenes() {
    let hit = scene(
        "conversation_search",
        &[Step::Keys("esc 4 j enter")],
        "?",
        "screenshot",
        "",
    )
    .await;
    assert!(hit.contains("?screenshot  2/2"), "{hit}");
    let none = scene(
        "conversation_search_none",
        &[Step::Keys("esc 4 j enter")],
        "/",
        "Screenshot",
        "",
    )
    .await;
    assert!(none.contains("/Screenshot  no match"), "smart case: {none}");
}

/// The Command pane's output: `/FAIL` then `N` (`?` stays help there)
/// goes up from the bottom to the output line among 100 (the second
/// match: the command's own header line is the first) and scrolls it
/// into view, following paused; `/nothing` says `no match`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_output_search_scenes() {
    let setup = &[
        Step::Keys("i"),
        Step::Type("seq 1 60; echo FAIL here; seq 61 99"),
        Step::Keys("enter esc z"),
    ];
    let hit = scene("command_search", setup, "/", "FAIL", "N").await;
    assert!(hit.contains("/FAIL  2/2"), "{hit}");
    assert!(hit.contains("FAIL here"), "{hit}");
    assert!(hit.contains("paused"), "{hit}");
    let none = scene("command_search_none", setup, "/", "nothing", "").await;
    assert!(none.contains("/nothing  no match"), "{none}");
}
