//! Snapshots of every pane and of the whole screen at 120×40, 80×24 and
//! 40×10, on a copy of the reference workspace (TestBackend + insta; temp
//! paths, clock times and durations filtered).

use crate::support::tui;

use tui::*;

const SIZES: [(u16, u16); 3] = [(120, 40), (80, 24), (40, 10)];

async fn snap(name: &str, setup: &str) {
    let (dir, ws) = fixture(|p| {
        std::fs::write(p.join("notes.md"), "# Notes\n\n- first\n- second\n").unwrap();
    })
    .await;
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        hs.keys(setup).await;
        let text = hs.draw().await;
        let settings = settings(dir.path());
        settings.bind(|| {
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), text);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_screen() {
    snap("screen", "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_pane() {
    snap("sessions", "esc 1 z").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_pane() {
    // Expand sessions/, then s-001/, and preview context.jsonl.
    snap("files", "esc 2 z j enter j enter j j j").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_pane() {
    snap("skills", "esc 3 z").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_pane() {
    snap("offload", "esc 4 z").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_pane() {
    let (dir, ws) = fixture(|_| {}).await;
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        hs.keys("i").await;
        hs.type_text("echo hi").await;
        hs.keys("enter esc 6 z").await;
        let text = hs.draw().await;
        let mut s = settings(dir.path());
        // A duration's digit count shifts the padding up to the border:
        // keep one space there.
        s.add_filter(r"(\[DUR\][^┃\n]*?) *┃", "$1 ┃");
        s.bind(|| {
            insta::assert_snapshot!(format!("logs_{w}x{h}"), text);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editor_pane() {
    // notes.md is the last root entry.
    snap("editor", "esc 2 G e").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewer_pane() {
    // The context.jsonl of s-001 as a conversation.
    snap("viewer", "esc 4 j enter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_overlay() {
    snap("help", "esc 2 ?").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn palette_overlay() {
    snap("palette", "esc : s e").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_pane() {
    let (dir, ws) = fixture(|_| {}).await;
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        hs.keys("i").await;
        hs.type_text("printf 'one\\ntwo\\n'").await;
        hs.keys("enter").await;
        hs.type_text("echo oops >&2; exit 3").await;
        hs.keys("enter esc z").await;
        let text = hs.draw().await;
        settings(dir.path()).bind(|| {
            insta::assert_snapshot!(format!("command_{w}x{h}"), text);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_screen() {
    let (dir, ws) = fixture(|_| {}).await;
    let mut o = options();
    o.read_only = true;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    hs.keys("esc 2").await;
    let text = hs.draw().await;
    assert!(text.contains("READ-ONLY"), "{text}");
    // No destructive action in the footer hints.
    let footer = text.lines().rev().find(|l| !l.is_empty()).unwrap();
    assert!(
        !footer.contains("delete") && !footer.contains("rename"),
        "{footer}"
    );
    settings(dir.path()).bind(|| insta::assert_snapshot!("read_only_120x40", text));
}

/// `d` describes the selection in every list pane (issue 22's verb
/// table): a session, a file (notes.md, the last root entry), a skill, an
/// offloaded item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_views() {
    snap("describe_session", "esc 1 d").await;
    snap("describe_file", "esc 2 G d").await;
    snap("describe_skill", "esc 3 d").await;
    snap("describe_offload", "esc 4 d").await;
}
