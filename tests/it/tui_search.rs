//! Search in the TUI (issue 19): the Grep pane (`ctrl-f`, `:grep`), its
//! toggles, opening a hit in the viewer at its line; the file finder
//! (`ctrl-p`): fuzzy ranking, reveal in the Files tree, the cached
//! listing refreshed by the watch; snapshot scenes at 120×40 and 80×24.

use wsbench::backend::{ChangeKind, FileChange};
use wsbench::tui::action::PaneEvent;
use wsbench::tui::pane::Pane;
use wsbench::tui::panes::files::{self, FilesPane};
use wsbench::tui::panes::finder::{self, FinderPane};
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

fn finder(hs: &mut Harness) -> &mut FinderPane {
    hs.pane::<FinderPane>(finder::ID)
}

/// `ctrl-p`, a fuzzy fragment: the file ranks first; Enter shows it in
/// the Files tree with every folder above it expanded (none was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finder_ranks_a_file_by_a_fragment_and_reveals_it_in_the_tree() {
    let (dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    let files_before = hs.pane::<FilesPane>(files::ID).visible_names();
    let client = dir.path().join("src/engine/mcp/client.rs");
    let client = client.to_string_lossy().into_owned();
    assert!(!files_before.contains(&client), "{files_before:?}");
    hs.keys("esc ctrl-p").await;
    assert!(finder(&mut hs).listed() >= 4);
    hs.type_text("mcpcli").await;
    let m = finder(&mut hs).matches();
    assert_eq!(
        m.first().copied(),
        Some("src/engine/mcp/client.rs"),
        "{m:?}"
    );
    assert!(!m.contains(&"src/main.rs"), "{m:?}");
    // Hidden files are listed (the Glob walker's rules).
    hs.keys("ctrl-u").await;
    hs.type_text("cache/conn").await;
    let m = finder(&mut hs).matches();
    assert_eq!(
        m.first().copied(),
        Some(".cache/connect_server.txt"),
        "{m:?}"
    );
    hs.keys("ctrl-u").await;
    hs.type_text("mcpcli").await;
    hs.keys("enter").await;
    let files = hs.pane::<FilesPane>(files::ID);
    assert_eq!(files.selected_path(), Some(client.as_str()));
    let shown = files.visible_names();
    for p in ["src", "src/engine", "src/engine/mcp"] {
        let p = dir.path().join(p).to_string_lossy().into_owned();
        assert!(shown.contains(&p), "{p} not expanded: {shown:?}");
    }
    let text = hs.draw().await;
    assert!(!text.contains("Find file"), "the finder closed: {text}");
    assert!(text.contains("pub fn connect_server"), "preview: {text}");
}

/// The listing is cached: a file created later is found once the watch
/// reports it (while the finder is open), not by a walk per keystroke;
/// `ctrl-o` opens the file in the viewer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finder_relists_when_the_watch_reports_a_new_file() {
    let (dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc ctrl-p").await;
    let before = finder(&mut hs).listed();
    let new = dir.path().join("src/brand_new_module.rs");
    std::fs::write(&new, "pub fn fresh() {}\n").unwrap();
    hs.type_text("brandnew").await;
    assert!(
        finder(&mut hs).matches().is_empty(),
        "listed per keystroke?"
    );
    let change = FileChange {
        path: new.to_string_lossy().into_owned(),
        kind: ChangeKind::Created,
    };
    hs.app
        .pane_call::<FinderPane, _>(finder::ID, |p, cx| {
            p.on_event(&PaneEvent::File(&change), cx)
        })
        .unwrap();
    hs.settle().await;
    assert_eq!(finder(&mut hs).listed(), before + 1);
    assert_eq!(finder(&mut hs).matches(), ["src/brand_new_module.rs"]);
    hs.keys("ctrl-o").await;
    let title = hs
        .app
        .pane_call::<ViewerPane, _>(viewer::ID, |p, _| p.doc().map(|d| d.title.clone()))
        .unwrap();
    assert_eq!(title.as_deref(), Some("src/brand_new_module.rs"));
    // Esc in the viewer comes back to the finder, the query kept.
    hs.keys("esc").await;
    let text = hs.draw().await;
    assert!(text.contains("> brandnew"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finder_snapshots() {
    let (dir, ws) = fixture(sources).await;
    for (w, h) in [(120, 40), (80, 24)] {
        let mut hs = Harness::new(ws.clone(), options(), w, h).await;
        hs.keys("esc ctrl-p").await;
        hs.type_text("rs").await;
        hs.keys("down").await;
        let text = hs.draw().await;
        settings(dir.path()).bind(|| {
            insta::assert_snapshot!(format!("finder_{w}x{h}"), text);
        });
    }
}

/// The Files `/` filter searches the whole tree: a file in a folder never
/// expanded (never listed) shows with the folders above it; `esc` on the
/// pane clears the filter and the tree is as it was. The filter is fuzzy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_filter_finds_a_file_in_an_unexpanded_folder() {
    let (dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    let before = hs.pane::<FilesPane>(files::ID).visible_names();
    let client = dir.path().join("src/engine/mcp/client.rs");
    let client = client.to_string_lossy().into_owned();
    assert!(!before.contains(&client));
    hs.keys("esc 2 /").await;
    hs.type_text("clnt.rs").await;
    hs.keys("enter").await;
    let shown = hs.pane::<FilesPane>(files::ID).visible_names();
    let rel: Vec<String> = shown
        .iter()
        .map(|p| {
            p.strip_prefix(&format!("{}/", dir.path().display()))
                .unwrap_or(p)
                .to_string()
        })
        .collect();
    assert_eq!(
        rel,
        [
            "src",
            "src/engine",
            "src/engine/mcp",
            "src/engine/mcp/client.rs"
        ],
        "fuzzy `clnt.rs` over the whole tree"
    );
    let text = hs.draw().await;
    assert!(text.contains("client.rs"), "{text}");
    hs.keys("esc").await;
    let after = hs.pane::<FilesPane>(files::ID).visible_names();
    assert_eq!(after, before, "esc clears the filter");
}

/// The end of a file longer than the viewer reads at once: `G` reads its
/// last MiB (one ranged read) and shows the last line, where the error
/// usually is; `g` goes back to the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g_shows_the_tail_of_a_big_file() {
    let (dir, ws) = fixture(|p| {
        let mut body = String::with_capacity(4 << 20);
        for i in 1..=200_000 {
            body.push_str(&format!("line {i:07} all is well\n"));
        }
        body.push_str("FINAL error: disk full\n");
        std::fs::write(p.join("big.log"), body).unwrap();
    })
    .await;
    assert!(std::fs::metadata(dir.path().join("big.log")).unwrap().len() > 4 << 20);
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc ctrl-p").await;
    hs.type_text("big.log").await;
    hs.keys("ctrl-o").await;
    let text = hs.draw().await;
    assert!(text.contains("line 0000001 all is well"), "{text}");
    assert!(!text.contains("FINAL error"), "{text}");
    hs.keys("G").await;
    let text = hs.draw().await;
    assert!(text.contains("FINAL error: disk full"), "{text}");
    assert!(text.contains("line 0200000 all is well"), "{text}");
    assert!(!text.contains("line 0000001"), "{text}");
    hs.keys("g").await;
    let text = hs.draw().await;
    assert!(text.contains("line 0000001 all is well"), "{text}");
    assert!(!text.contains("FINAL error"), "{text}");
}

/// A Grep search is offered again by the palette (a recent search, as
/// `:grep` arguments): a fragment of it ranks it, Enter runs it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_palette_offers_a_recent_grep_again() {
    let (_dir, ws) = fixture(sources).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("esc ctrl-f").await;
    hs.type_text("connect_server").await;
    hs.keys("enter").await;
    assert!(!hits(&mut hs).is_empty());
    hs.keys("esc").await;
    hs.keys(":").await;
    hs.type_text("connect_se").await;
    let text = hs.draw().await;
    assert!(text.contains("grep -- connect_server"), "{text}");
    assert!(text.contains("search again"), "{text}");
    hs.keys("enter").await;
    assert_eq!(hs.app.overlay_kind(), None);
    let q = hs
        .app
        .pane_call::<GrepPane, _>(grep::ID, |p, _| p.query().pattern.clone())
        .unwrap();
    assert_eq!(q, "connect_server");
    assert!(!hits(&mut hs).is_empty(), "searched again");
}
