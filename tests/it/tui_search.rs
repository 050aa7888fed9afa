//! Search in the TUI (issue 19): the Grep pane (`ctrl-f`, `:grep`), its
//! toggles, opening a hit in the viewer at its line; snapshot scenes at
//! 120×40 and 80×24.

use wsbench::tui::panes::grep::{self, GrepPane};
use wsbench::tui::panes::viewer::{self, ViewerPane};

use crate::support::tui::*;

fn sources(p: &std::path::Path) {
    let src = p.join("src/engine/mcp");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("client.rs"),
        "//! MCP client.\n\npub fn connect_server() {}\n\n// TODO: retry connect_server on EOF\n",
    )
    .unwrap();
    std::fs::write(
        p.join("src/main.rs"),
        "fn main() {\n    wsbench::connect_server();\n}\n",
    )
    .unwrap();
    std::fs::create_dir_all(p.join(".cache")).unwrap();
    std::fs::write(
        p.join(".cache/connect_server.txt"),
        "connect_server cached\n",
    )
    .unwrap();
}

fn hits(hs: &mut Harness) -> Vec<(String, usize)> {
    hs.app
        .pane_call::<GrepPane, _>(grep::ID, |p, _| {
            p.hits()
                .iter()
                .map(|h| {
                    let rel = h
                        .path
                        .rsplit_once("/src/")
                        .map(|(_, r)| r)
                        .unwrap_or(&h.path);
                    (rel.to_string(), h.line)
                })
                .collect()
        })
        .unwrap()
}

/// `ctrl-f`, a pattern, Enter: the hits of every file under the
/// workdir, path-sorted, hidden files left out until `alt-h`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_finds_a_function_by_name_and_hidden_files_on_demand() {
    let (_dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc ctrl-f").await;
    hs.type_text("connect_server").await;
    hs.keys("enter").await;
    assert_eq!(
        hits(&mut hs),
        vec![
            ("engine/mcp/client.rs".to_string(), 3),
            ("engine/mcp/client.rs".to_string(), 5),
            ("main.rs".to_string(), 2),
        ]
    );
    // The match is drawn in the theme's `matched` style.
    hs.draw().await;
    let buf = hs.term.backend().buffer().clone();
    let row = (0..buf.area.height)
        .find(|&y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .contains("pub fn connect_server")
        })
        .expect("the first hit is drawn");
    let line: String = (0..buf.area.width)
        .map(|x| buf[(x, row)].symbol())
        .collect();
    let at = line.find("connect_server()").unwrap();
    let col = line[..at].chars().count() as u16;
    let matched = wsbench::tui::theme::Theme::default().matched;
    assert_eq!(buf[(col, row)].fg, matched.fg.unwrap());
    assert_eq!(buf[(col, row)].bg, matched.bg.unwrap());
    assert_ne!(buf[(col - 2, row)].bg, matched.bg.unwrap());
    hs.keys("alt-h").await;
    let h = hits(&mut hs);
    assert_eq!(h.len(), 4, "{h:?}");
    assert!(h[0].0.ends_with(".cache/connect_server.txt"), "{h:?}");
    // Case: `CONNECT_SERVER` finds nothing until ignore-case is on.
    hs.keys("/ ctrl-u").await;
    hs.type_text("CONNECT_SERVER").await;
    hs.keys("enter").await;
    assert!(hits(&mut hs).is_empty());
    hs.keys("alt-c").await;
    assert_eq!(hits(&mut hs).len(), 4);
    // Literal: `a.b` as a regex matches `axb`; literally it does not.
    hs.keys("/ ctrl-u").await;
    hs.type_text("connect.server").await;
    hs.keys("enter").await;
    assert_eq!(hits(&mut hs).len(), 4);
    hs.keys("alt-r").await;
    assert!(hits(&mut hs).is_empty());
}

/// Enter opens the hit in the viewer at its line (marked); Esc comes
/// back to the hits; `n`/`N` wrap around.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_opens_in_the_viewer_at_its_line() {
    let (_dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc : g r e p space").await;
    hs.type_text("connect_server src --glob *.rs").await;
    hs.keys("enter").await;
    assert_eq!(hits(&mut hs).len(), 3);
    let sel = |hs: &mut Harness| {
        hs.app
            .pane_call::<GrepPane, _>(grep::ID, |p, _| p.selected())
            .unwrap()
    };
    hs.keys("N").await;
    assert_eq!(sel(&mut hs), 2, "N wraps to the last hit");
    hs.keys("n").await;
    assert_eq!(sel(&mut hs), 0, "n wraps to the first");
    hs.keys("n enter").await;
    let marked = hs
        .app
        .pane_call::<ViewerPane, _>(viewer::ID, |p, _| {
            (p.marked(), p.doc().map(|d| d.title.clone()))
        })
        .unwrap();
    assert_eq!(marked, (Some(4), Some("src/engine/mcp/client.rs".into())));
    let text = hs.draw().await;
    assert!(text.contains("TODO: retry connect_server"), "{text}");
    hs.keys("esc").await;
    let text = hs.draw().await;
    assert!(text.contains("Grep \"connect_server\""), "{text}");
}

/// A bad regex says why and lists nothing; a bad `:grep` changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_pattern_says_why() {
    let (_dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc ctrl-f").await;
    hs.type_text("fn (").await;
    hs.keys("enter").await;
    let text = hs.draw().await;
    assert!(text.contains("invalid regex"), "{text}");
    hs.keys("esc : g r e p space").await;
    hs.type_text("a b c").await;
    hs.keys("enter").await;
    let q = hs
        .app
        .pane_call::<GrepPane, _>(grep::ID, |p, _| p.query().pattern.clone())
        .unwrap();
    assert_eq!(q, "fn (");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_pane_snapshots() {
    let (dir, ws) = fixture(sources).await;
    for (w, h) in [(120, 40), (80, 24)] {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        hs.keys("esc ctrl-f").await;
        hs.type_text("connect_server").await;
        hs.keys("enter j").await;
        let text = hs.draw().await;
        settings(dir.path()).bind(|| {
            insta::assert_snapshot!(format!("grep_{w}x{h}"), text);
        });
    }
}
