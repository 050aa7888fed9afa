//! Keys a k9s, vim or `less` user already knows (issue 22): the TUI
//! starts on a list with the prompt one key away, Enter views a file and
//! `e` edits it, the editor undoes with ctrl-z / ctrl-y, one key answers
//! a dialog.

use crate::support::tui;

use tui::*;
use wsbench::tui::panes::command::CommandPane;
use wsbench::tui::panes::editor::EditorPane;

fn command(hs: &mut Harness) -> &mut CommandPane {
    hs.pane::<CommandPane>("command")
}

fn editor(hs: &mut Harness) -> &mut EditorPane {
    hs.pane::<EditorPane>("editor")
}

/// Whether the focused pane has the keyboard.
fn typing(hs: &Harness) -> bool {
    let focus = hs.app.focus();
    hs.app.pane(focus).is_some_and(|p| p.text_input_active())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tui_starts_on_files_and_i_reaches_the_prompt() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws.clone(), options(), 120, 40).await;
    assert_eq!(hs.app.focus(), "files");
    assert!(!typing(&hs));
    // Keys meant to move move; nothing reaches the prompt.
    hs.keys("j j k g").await;
    assert_eq!(command(&mut hs).prompt_lines(), [""]);
    assert!(command(&mut hs).sent().is_empty());
    assert_eq!(hs.app.overlay_kind(), None);
    // `i` from any pane: focus and keyboard in the prompt.
    hs.keys("1 i").await;
    assert_eq!(hs.app.focus(), "command");
    assert!(typing(&hs));
    hs.type_text("jk").await;
    assert_eq!(command(&mut hs).prompt_lines(), ["jk"]);
    // `:` is the palette, one key away too.
    hs.keys("esc :").await;
    assert_eq!(hs.app.overlay_kind(), Some("palette"));

    // The setting keeps the old start.
    let mut hs = Harness::new(ws, prompt_options(), 120, 40).await;
    assert_eq!(hs.app.focus(), "command");
    assert!(typing(&hs));
    hs.type_text("j").await;
    assert_eq!(command(&mut hs).prompt_lines(), ["j"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_views_a_file_and_e_edits_it() {
    let (_dir, ws) = fixture(|p| {
        std::fs::write(p.join("notes.md"), "# Notes\n").unwrap();
    })
    .await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    // notes.md is the last root entry.
    hs.keys("G enter").await;
    assert_eq!(hs.app.modal(), Some("viewer"));
    hs.keys("q").await;
    assert_eq!(hs.app.modal(), None);
    assert_eq!(hs.app.focus(), "files");
    hs.keys("e").await;
    assert_eq!(hs.app.modal(), Some("editor"));
    assert_eq!(
        editor(&mut hs).lines().map(|l| l.to_vec()),
        Some(vec!["# Notes".to_string()])
    );
    // A directory still expands on Enter.
    hs.keys("esc g enter").await;
    assert_eq!(hs.app.modal(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_undoes_with_ctrl_z_and_redoes_with_ctrl_y() {
    let (_dir, ws) = fixture(|p| {
        std::fs::write(p.join("notes.md"), "abc\n").unwrap();
    })
    .await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("G e").await;
    assert_eq!(hs.app.modal(), Some("editor"));
    let lines = |hs: &mut Harness| editor(hs).lines().unwrap().to_vec();
    hs.type_text("X").await;
    assert_eq!(lines(&mut hs), ["Xabc"]);
    hs.keys("ctrl-z").await;
    assert_eq!(lines(&mut hs), ["abc"]);
    assert!(!hs.app.quit);
    assert!(hs.app.take_requests().is_empty(), "ctrl-z suspended");
    hs.keys("ctrl-y").await;
    assert_eq!(lines(&mut hs), ["Xabc"]);
    // The old keys still work.
    hs.keys("ctrl-u").await;
    assert_eq!(lines(&mut hs), ["abc"]);
    hs.keys("ctrl-r").await;
    assert_eq!(lines(&mut hs), ["Xabc"]);
    // Help lists them.
    hs.keys("f1").await;
    let screen = hs.draw().await;
    assert!(screen.contains("ctrl-z/ctrl-u"), "{screen}");
    assert!(screen.contains("ctrl-y/ctrl-r"), "{screen}");
}

/// A terminal without the kitty protocol sends Esc then `2` as the bytes
/// of Alt-2: nothing is bound to Alt-2, so it is Esc (leave the prompt)
/// then `2` (focus Files). A bound Alt key (grep's alt-c) stays whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbound_alt_key_is_esc_then_the_key() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws.clone(), options(), 120, 40).await;
    hs.keys("i").await;
    hs.type_text("echo x").await;
    hs.keys("alt-2").await;
    assert_eq!(hs.app.focus(), "files");
    assert!(!typing(&hs));
    assert_eq!(command(&mut hs).prompt_lines(), ["echo x"]);
    // Over a text dialog: Esc cancels it, then the key acts.
    hs.keys("u").await;
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    hs.keys("alt-1").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert_eq!(hs.app.focus(), "sessions");
    // With the kitty protocol an Alt key is one key.
    let mut o = options();
    o.keyboard_enhanced = true;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    hs.keys("i").await;
    hs.keys("alt-2").await;
    assert_eq!(hs.app.focus(), "command");
}

/// `[tui.keys]` mistakes are errors placed at their entry: an unknown
/// action, an unreadable key, two actions on one key in one context, a
/// global key a pane hides (`app.quit = "j"`).
#[test]
fn keymap_mistakes_are_errors_with_file_and_line() {
    use std::path::Path;
    use wsbench::config::Config;
    let text = "[tui]\nmouse = false\n\n[tui.keys]\n\"app.qiut\" = \"x\"\n\"files.edit\" = \"hyper-e\"\n\"files.view\" = \"D\"\n\"app.quit\" = \"j\"\n";
    let c = Config::parse(text, Path::new("/cfg/config.toml")).unwrap();
    let errors = wsbench::tui::keymap_errors(&c);
    let find = |needle: &str| {
        errors
            .iter()
            .find(|e| e.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in {errors:#?}"))
            .clone()
    };
    assert!(find("unknown action `app.qiut`").starts_with("/cfg/config.toml:5:"));
    assert!(find("hyper-e").starts_with("/cfg/config.toml:6:"));
    let e = find("`D` is bound to both");
    assert!(e.starts_with("/cfg/config.toml:7:"), "{e}");
    assert!(
        e.contains("files.view") && e.contains("files.delete"),
        "{e}"
    );
    let e = find("`j` is bound to both");
    assert!(e.starts_with("/cfg/config.toml:8:"), "{e}");
    assert!(e.contains("app.quit"), "{e}");
    assert_eq!(errors.len(), 4, "{errors:#?}");
    // A good table, and restating a default, is no error.
    let ok = "[tui.keys]\n\"app.quit\" = [\"q\", \"ctrl-q\"]\n\"files.delete\" = \"delete\"\n";
    let c = Config::parse(ok, Path::new("/cfg/config.toml")).unwrap();
    assert_eq!(wsbench::tui::keymap_errors(&c), Vec::<String>::new());
}

/// A filter applied with Enter is named in the pane title until Esc on
/// the pane clears it; Esc while typing it clears it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_filter_is_in_the_title_until_esc() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("1 /").await;
    hs.type_text("002").await;
    hs.keys("enter").await;
    let screen = hs.draw().await;
    let title = screen
        .lines()
        .find(|l| l.contains("Sessions"))
        .unwrap()
        .to_string();
    assert!(title.contains("/002"), "{title}");
    let row = |screen: &str| screen.contains("┃● s-001") || screen.contains("┃  s-001");
    assert!(!row(&screen), "{screen}");
    hs.keys("esc").await;
    let screen = hs.draw().await;
    assert!(!screen.contains("/002"), "{screen}");
    assert!(row(&screen), "{screen}");
    // The same in Files.
    hs.keys("2 /").await;
    hs.type_text("notes").await;
    hs.keys("enter").await;
    let screen = hs.draw().await;
    let title = screen.lines().find(|l| l.contains("Files")).unwrap();
    assert!(title.contains("/notes"), "{title}");
    hs.keys("esc").await;
    assert!(!hs.draw().await.contains("/notes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toast_expires_by_the_apps_clock_not_by_keys_or_frames() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, UNIX_EPOCH};
    use wsbench::tui::config::ClipboardMode;

    let (_dir, ws) = fixture(|_| {}).await;
    let now = Arc::new(AtomicU64::new(NOW));
    let mut o = options();
    let clock = now.clone();
    o.clock = Arc::new(move || UNIX_EPOCH + Duration::from_secs(clock.load(Ordering::SeqCst)));
    o.config.clipboard = ClipboardMode::Off;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    // `y` in Files copies the path; with copying off it says so.
    hs.keys("y").await;
    let msg = hs.app.toast().map(|(_, m)| m.to_string());
    assert_eq!(msg.as_deref(), Some("copying is off (clipboard = \"off\")"));
    assert!(hs.draw().await.contains("copying is off"));
    // Keys, frames and ticks while the clock stands still keep it.
    for _ in 0..20 {
        hs.keys("j k").await;
        hs.app.tick();
        hs.draw().await;
    }
    assert!(hs.app.toast().is_some());
    // 3 s on: still there; past 4 s: gone from the state and the screen.
    now.fetch_add(3, Ordering::SeqCst);
    hs.app.tick();
    assert!(hs.app.toast().is_some());
    now.fetch_add(2, Ordering::SeqCst);
    hs.app.tick();
    assert_eq!(hs.app.toast(), None);
    assert!(!hs.draw().await.contains("copying is off"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_searches_with_slash_n_and_shift_n_as_less_does() {
    use wsbench::tui::panes::viewer::ViewerPane;
    let (_dir, ws) = fixture(|p| {
        let body: String = (1..=60).map(|i| format!("line {i}\n")).collect();
        std::fs::write(
            p.join("long.txt"),
            format!("{body}needle one\n{body}Needle two\n"),
        )
        .unwrap();
    })
    .await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    // long.txt sorts after the folders: find it with the filter.
    hs.keys("/").await;
    hs.type_text("long").await;
    hs.keys("enter enter").await;
    assert!(hs.draw().await.contains("long.txt"));
    hs.keys("/").await;
    assert!(typing(&hs), "the search has the keyboard");
    hs.type_text("needle").await;
    // Typed letters went to the search, not to the viewer's keys (`w`).
    assert!(hs.draw().await.contains("/needle▏"));
    hs.keys("enter").await;
    assert_eq!(hs.pane::<ViewerPane>("viewer").marked(), Some(60));
    hs.keys("n").await;
    assert_eq!(hs.pane::<ViewerPane>("viewer").marked(), Some(121));
    hs.keys("n").await;
    assert_eq!(
        hs.pane::<ViewerPane>("viewer").marked(),
        Some(60),
        "n wraps"
    );
    hs.keys("N").await;
    assert_eq!(
        hs.pane::<ViewerPane>("viewer").marked(),
        Some(121),
        "N goes back"
    );
    let text = hs.draw().await;
    assert!(
        text.contains("Needle two"),
        "the found line is on screen:\n{text}"
    );
    // Esc clears the search first, then closes the viewer.
    hs.keys("esc").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert!(hs.pane::<ViewerPane>("viewer").doc().is_some());
    hs.keys("esc").await;
    assert!(hs.pane::<ViewerPane>("viewer").doc().is_none());
}
