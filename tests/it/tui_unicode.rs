//! Random Unicode into every palette command, every pane's filter and
//! every text field of the TUI (TestBackend), drawn at a wide and a tiny
//! size after each step: nothing may panic. A seeded generator (fastrand)
//! keeps a failure reproducible: the panic message names the seed and
//! the text.

use crate::support::tui;

use std::sync::Arc;

use ratatui::crossterm::event::Event;
use tui::*;
use wsbench::backend::Provisioner;
use wsbench::backend::local::LocalProvisioner;
use wsbench::engine::EventBus;
use wsbench::manager::{ManagerOptions, WorkspaceManager};

/// Characters that have broken text handling somewhere: wide (CJK,
/// emoji with joiners), combining marks, right-to-left text and
/// overrides, controls and escapes, zero-width and invalid-width ones.
const HARD: &[char] = &[
    '日',
    '本',
    '語',
    '界',
    '👩',
    '\u{200d}',
    '👧',
    '🇯',
    '🇵',
    'e',
    '\u{301}',
    '\u{20dd}',
    'א',
    'ש',
    'ع',
    'ر',
    '\u{202e}',
    '\u{202d}',
    '\u{1b}',
    '\u{7}',
    '\u{0}',
    '\u{8}',
    '\u{7f}',
    '\u{9b}',
    '\u{200b}',
    '\u{feff}',
    '\u{fffd}',
    '\u{e000}',
    '\u{10ffff}',
    '\t',
    '\r',
    ' ',
    '/',
    ':',
    'a',
    'Z',
    '0',
    '-',
    '.',
];

/// A string of 1 to 24 characters: mostly from [`HARD`], some from the
/// whole of Unicode.
fn random_text(rng: &mut fastrand::Rng) -> String {
    let n = rng.usize(1..=24);
    (0..n)
        .map(|_| {
            if rng.u8(..) < 200 {
                HARD[rng.usize(..HARD.len())]
            } else {
                rng.char(..)
            }
        })
        .collect()
}

/// Presses `k` and draws (wide, so every pane shows) before anything
/// settles: a pane may show the text only until a task answers. Then
/// settles and draws at two sizes.
async fn press_and_draw(hs: &mut Harness, k: &str) {
    hs.resize(120, 40);
    hs.app.on_input(Event::Key(key(k)));
    hs.term.draw(|f| hs.app.render(f)).unwrap();
    hs.settle().await;
    for (w, h) in [(120, 40), (30, 8)] {
        hs.resize(w, h);
        hs.draw().await;
    }
}

/// Types `text` and draws (twice: wide and tiny).
async fn type_and_draw(hs: &mut Harness, text: &str) {
    hs.type_text(text).await;
    for (w, h) in [(120, 40), (30, 8)] {
        hs.resize(w, h);
        hs.draw().await;
    }
}

/// Palette lines: every command word (with a random argument) and a bare
/// random line (an unknown action name).
const PALETTE: &[&str] = &[
    "ws ",
    "ws a",
    "profile ",
    "session ",
    "session new ",
    "theme ",
    "agent ",
    "agent http://127.0.0.1:9/ ",
    "quit-not ",
    "",
];

/// `(focus key, filter key)` of every pane with a filter or search.
const FILTERS: &[(&str, &str)] = &[
    ("1", "/"),
    ("2", "/"),
    ("3", "/"),
    ("4", "/"),
    ("6", "/"),
    ("0", "/"),
    ("9", "/"),
];

async fn harness(m: &WorkspaceManager, ws: Arc<wsbench::engine::Workspace>) -> Harness {
    let mut o = options();
    o.manager = Some(m.clone());
    Harness::new(ws, o, 120, 40).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_unicode_never_panics_the_tui() {
    let (_dir, ws) = fixture(|p| {
        std::fs::write(p.join("notes.md"), "# Notes\n").unwrap();
    })
    .await;
    let base = tempfile::tempdir().unwrap();
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(base.path()));
    let opts = ManagerOptions::for_provisioner(prov.as_ref());
    let m = WorkspaceManager::new("local", prov, opts, EventBus::default());
    m.get_workspace("tester", "coder", "s-001", Some("ws-alpha"))
        .await
        .unwrap();

    // The case of issue 14 first, then random ones.
    let mut texts = vec!["a日本語日本".to_string()];
    let seed = 0x5eed_0014;
    let mut rng = fastrand::Rng::with_seed(seed);
    texts.extend((0..12).map(|_| random_text(&mut rng)));

    for text in &texts {
        let what = format!("seed {seed:#x}, text {text:?}");
        println!("{what}");
        let mut hs = harness(&m, ws.clone()).await;
        for cmd in PALETTE {
            hs.keys("esc :").await;
            type_and_draw(&mut hs, &format!("{cmd}{text}")).await;
            press_and_draw(&mut hs, "enter").await;
            assert!(!hs.app.quit, "{what}: `:{cmd}` quit");
        }
        for (pane, filter) in FILTERS {
            hs.keys(&format!("esc esc {pane} {filter}")).await;
            type_and_draw(&mut hs, text).await;
            press_and_draw(&mut hs, "enter").await;
            press_and_draw(&mut hs, "esc").await;
        }
        // The command prompt (never run: no enter), the editor and a
        // paste into each.
        hs.keys("esc esc 5").await;
        type_and_draw(&mut hs, text).await;
        hs.paste(text).await;
        hs.draw().await;
        press_and_draw(&mut hs, "ctrl-u").await;
        hs.keys("esc esc 2 G e").await;
        type_and_draw(&mut hs, text).await;
        hs.paste(text).await;
        hs.draw().await;
    }
}
