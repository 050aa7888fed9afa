//! The shared cases C20–C24 against the TUI (C22, C23 and C24 also run in
//! a real terminal in `tui_tmux.rs`).

use crate::support::{cli, tui};

use std::time::{Duration, Instant};

use serde_json::json;
use tui::*;
use wsbench::engine::ToolCall;
use wsbench::tui::panes::command::CommandPane;
use wsbench::tui::panes::editor::EditorPane;
use wsbench::tui::panes::files::FilesPane;
use wsbench::tui::widgets::text;

fn files(hs: &mut Harness) -> &mut FilesPane {
    hs.pane::<FilesPane>("files")
}

fn command(hs: &mut Harness) -> &mut CommandPane {
    hs.pane::<CommandPane>("command")
}

async fn bash(hs: &Harness, cmd: &str) {
    let r = hs
        .app
        .cx
        .ws
        .call_tool(ToolCall {
            tool: "Bash".into(),
            session: "s".into(),
            args: json!({ "command": cmd }),
            ..Default::default()
        })
        .await;
    assert!(r.is_success(), "{}", r.text());
}

/// Settles and draws until `cond` holds or 30 s pass.
async fn wait_for(hs: &mut Harness, what: &str, mut cond: impl FnMut(&mut Harness) -> bool) {
    let t0 = Instant::now();
    loop {
        hs.draw().await;
        if cond(hs) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_nested_mkdir_shows_up_live_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let root = ws.layout().workdir().to_string();
    let mut o = options();
    o.watch = true;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    hs.draw().await;
    // Give the watch a moment to be set up before the burst.
    tokio::time::sleep(Duration::from_millis(300)).await;
    bash(
        &hs,
        "mkdir -p a/b/c/d/e/f/g/h/i/j && echo hi > a/b/c/d/e/f/g/h/i/j/deep.txt",
    )
    .await;
    let a = format!("{root}/a");
    wait_for(&mut hs, "a/ in the tree", |hs| files(hs).find(&a).is_some()).await;
    let mut level = a.clone();
    for next in ["b", "c", "d", "e", "f", "g", "h", "i", "j"] {
        let l = level.clone();
        assert!(
            hs.app
                .pane_call("files", |f: &mut FilesPane, cx| f.expand_path(&l, cx))
                .unwrap()
        );
        level = format!("{level}/{next}");
        let want = level.clone();
        wait_for(&mut hs, &want.clone(), |hs| files(hs).find(&want).is_some()).await;
    }
    let j = level.clone();
    assert!(
        hs.app
            .pane_call("files", |f: &mut FilesPane, cx| f.expand_path(&j, cx))
            .unwrap()
    );
    let deep = format!("{j}/deep.txt");
    wait_for(&mut hs, "deep.txt", |hs| files(hs).find(&deep).is_some()).await;
    // Now a file appears in an open directory: only the watch can tell.
    bash(&hs, "echo again > a/b/c/d/e/f/g/h/i/j/second.txt").await;
    let second = format!("{j}/second.txt");
    wait_for(&mut hs, "second.txt via the watch", |hs| {
        files(hs).visible_names().contains(&second)
    })
    .await;
    let names = files(&mut hs).visible_names();
    let mut dedup = names.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(
        names.len(),
        dedup.len(),
        "an entry appears twice: {names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c21_nfd_names_render_whole_and_open_by_their_bytes() {
    let nfd =
        "\u{1100}\u{1161}\u{1102}\u{1161}\u{1103}\u{1161}\u{1105}\u{1161}\u{1106}\u{1161}.txt";
    let nfc = "가나다라마.nfc.txt";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(nfd), "decomposed\n").unwrap();
    std::fs::write(dir.path().join(nfc), "composed\n").unwrap();
    stamp(dir.path());
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 40, 10).await;
    hs.keys("esc 2").await;
    let screen = hs.draw().await;
    // No cell holds a lone leading jamo.
    let buf = hs.term.backend().buffer().clone();
    for cell in buf.content() {
        assert_ne!(
            cell.symbol(),
            "\u{1100}",
            "a lone U+1100 in a cell:\n{screen}"
        );
    }
    // `.txt` starts at the same column in both rows.
    let col = |needle: &str| -> usize {
        let line = screen
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not shown:\n{screen}"));
        let byte = line.find(needle).unwrap();
        text::width(&line[..byte])
    };
    assert_eq!(col("가나다라마.txt") + 10, col(".txt "), "{screen}");
    assert_eq!(col("가나다라마.nfc"), col("가나다라마.txt"), "{screen}");
    settings(dir.path()).bind(|| insta::assert_snapshot!("c21_files_40x10", screen));
    // Opening the NFD row reads the file by its own bytes.
    hs.keys("g j e").await;
    let ed = hs
        .app
        .pane_mut("editor")
        .unwrap()
        .as_any_mut()
        .downcast_mut::<EditorPane>()
        .unwrap();
    assert_eq!(
        ed.lines().map(|l| l.to_vec()),
        Some(vec!["decomposed".to_string()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c23_multi_line_paste_never_submits() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 80, 24).await;
    // The keyboard starts on Files (issue 22): `i` reaches the prompt.
    assert_eq!(hs.app.focus(), "files");
    hs.keys("i").await;
    assert_eq!(hs.app.focus(), "command");
    hs.paste("first line\nq\n:quit\nlast line").await;
    {
        let c = command(&mut hs);
        assert_eq!(c.prompt_lines(), ["first line", "q", ":quit", "last line"]);
        assert_eq!(c.prompt_cursor(), (3, 9));
        assert!(c.sent().is_empty(), "a paste sent something");
    }
    assert!(!hs.app.quit, "the paste quit the app");
    assert_eq!(hs.app.overlay_kind(), None, "the paste opened the palette");
    hs.keys("enter").await;
    let c = command(&mut hs);
    assert_eq!(c.sent(), ["first line\nq\n:quit\nlast line"]);
    assert!(!c.is_running());
    // ESC in a paste is inserted as visible text.
    hs.paste("echo \x1b[31mred").await;
    let c = command(&mut hs);
    assert_eq!(c.prompt_lines(), ["echo ␛[31mred"]);
    // Into a one-line field a newline becomes a space.
    hs.keys("esc 2 /").await;
    hs.paste("no\ttab\nhere").await;
    let screen = hs.draw().await;
    assert!(screen.contains("/no tab here"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c24_escapes_in_output_stay_inside_the_pane() {
    const CMD: &str = r"printf 'before\n\033[2J\033[H\033[31mred\033[0m\n\033]0;pwned\007\033]52;c;aGk=\007\033[10;10Hmoved\n\033[?1049lafter\n'";
    let (dir, ws) = fixture(|_| {}).await;
    // Zoomed, so everything outside the pane is header and footer.
    let mut hs = Harness::new(ws.clone(), options(), 80, 24).await;
    hs.keys("esc z i").await;
    let before = hs.draw().await;
    hs.type_text(CMD).await;
    hs.keys("enter").await;
    let after = hs.draw().await;
    let b: Vec<&str> = before.lines().collect();
    let a: Vec<&str> = after.lines().collect();
    assert_eq!(a[0], b[0], "header changed");
    assert_eq!(a[23], b[23], "footer changed");
    for cell in hs.term.backend().buffer().content() {
        let s = cell.symbol();
        assert!(
            !s.chars()
                .any(|c| (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32))),
            "control character {s:?} in a cell:\n{after}"
        );
    }
    let pos = |w: &str| {
        after
            .find(&format!("┃{w}"))
            .unwrap_or_else(|| panic!("{w} missing:\n{after}"))
    };
    assert!(
        pos("before") < pos("red") && pos("red") < pos("moved") && pos("moved") < pos("after"),
        "{after}"
    );
    // red keeps a red style.
    let buf = hs.term.backend().buffer();
    let red_row = (0..24)
        .find(|&y| buf[(1, y)].symbol() == "r" && buf[(2, y)].symbol() == "e")
        .unwrap();
    assert_eq!(buf[(1, red_row)].fg, ratatui::style::Color::Red);
    settings(dir.path()).bind(|| insta::assert_snapshot!("c24_command_80x24", after));
    // The engine keeps the raw bytes.
    let r = ws
        .call_tool(ToolCall {
            tool: "Bash".into(),
            session: "s".into(),
            args: json!({ "command": CMD }),
            ..Default::default()
        })
        .await;
    assert!(r.text().contains("\x1b]0;pwned\x07"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c22_small_terminals_never_panic() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    for (w, h) in [
        (40, 10),
        (1, 1),
        (2, 3),
        (10, 4),
        (39, 9),
        (200, 5),
        (5, 60),
        (80, 24),
    ] {
        hs.resize(w, h);
        for keys in ["esc 2 enter", "?", "esc :", "esc z", "z 6", "5 i"] {
            hs.keys(keys).await;
            hs.draw().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rebind_from_the_config_and_bad_entries_are_reported() {
    let (_dir, ws) = fixture(|_| {}).await;
    let cfg = wsbench::tui::config::TuiConfig::parse(
        "[limits]\nread_max_lines = 10\n[tui]\nmouse = false\n[tui.keys]\n\"app.quit\" = \"x\"\n\"no.such\" = \"y\"\n",
    )
    .unwrap();
    let mut o = options();
    o.config = cfg;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    let screen = hs.draw().await;
    // The unknown action is shown, not ignored.
    assert!(screen.contains("unknown action `no.such`"), "{screen}");
    hs.keys("esc q").await;
    assert!(!hs.app.quit, "q still quits");
    hs.keys("x").await;
    assert!(hs.app.quit, "x does not quit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_offers_no_destructive_action() {
    let (dir, ws) = fixture(|_| {}).await;
    let mut o = options();
    o.read_only = true;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    hs.keys("i").await;
    hs.type_text("touch made-by-tui").await;
    hs.keys("enter").await;
    assert!(command(&mut hs).sent().is_empty());
    assert!(!dir.path().join("made-by-tui").exists());
    hs.keys("esc 2 j D").await;
    assert_eq!(
        hs.app.overlay_kind(),
        None,
        "delete asked in read-only mode"
    );
    hs.keys("R u").await;
    assert_eq!(hs.app.overlay_kind(), None);
    // The palette refuses destructive actions by name too.
    hs.app.run_action("files.delete");
    assert_eq!(hs.app.overlay_kind(), None);
    // Help lists none of them.
    hs.keys("?").await;
    let screen = hs.draw().await;
    assert!(
        !screen.contains("  files.delete") && !screen.contains("  command.run"),
        "{screen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mouse_focuses_scrolls_and_drags_splits() {
    use ratatui::crossterm::event::{Event, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.draw().await;
    let files = hs.app.area_of("files").unwrap();
    let click = |kind, column, row| {
        Event::Mouse(MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    hs.app.on_input(click(
        MouseEventKind::Down(MouseButton::Left),
        files.x + 3,
        files.y + 2,
    ));
    hs.settle().await;
    assert_eq!(hs.app.focus(), "files");
    // Drag the column border to the right.
    let border = files.x;
    hs.app.on_input(click(
        MouseEventKind::Down(MouseButton::Left),
        border,
        files.y + 5,
    ));
    hs.app.on_input(click(
        MouseEventKind::Drag(MouseButton::Left),
        border + 12,
        files.y + 5,
    ));
    hs.app.on_input(click(
        MouseEventKind::Up(MouseButton::Left),
        border + 12,
        files.y + 5,
    ));
    hs.draw().await;
    let moved = hs.app.area_of("files").unwrap();
    assert!(moved.x > files.x + 5, "{files:?} -> {moved:?}");
    // The wheel scrolls the pane under the cursor without focusing it.
    let logs = hs.app.area_of("logs").unwrap();
    hs.app
        .on_input(click(MouseEventKind::ScrollUp, logs.x + 2, logs.y + 2));
    hs.settle().await;
    assert_eq!(hs.app.focus(), "files");
}

#[test]
fn a_tui_section_does_not_break_the_other_commands() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[tui]\nmouse = false\n[tui.keys]\n\"app.quit\" = \"x\"\n[limits]\nread_max_lines = 7\n",
    )
    .unwrap();
    let out = cli::wsbench_cmd(dir.path())
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--workdir",
            dir.path().join("ws").to_str().unwrap(),
            "info",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["limits"]["read_max_lines"], 7);
    // An error elsewhere keeps its line number.
    std::fs::write(&cfg, "[tui]\nmouse = false\n\n[limits]\nbogus = 1\n").unwrap();
    let out = cli::wsbench_cmd(dir.path())
        .args(["--config", cfg.to_str().unwrap(), "info"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("config.toml:5:"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_links_open_the_blob_metadata_and_skills_render() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    // Offload: data, context, result, result (same time; by path).
    hs.keys("esc 4 j enter").await;
    let s = hs.draw().await;
    assert!(s.contains("── coder (assistant)"), "{s}");
    hs.keys("tab enter").await;
    let s = hs.draw().await;
    assert!(s.contains("media type  image/png"), "{s}");
    assert!(
        s.contains("data/917aad4aef88aecc230e317ee79eb894a1d10029b849705f0b9fbd028a8e4f91.png"),
        "{s}"
    );
    // Back to the conversation, then closed.
    hs.keys("esc").await;
    assert!(hs.draw().await.contains("── coder (assistant)"));
    hs.keys("esc").await;
    assert_eq!(hs.app.modal(), None);
    // SKILL.md of the first skill, rendered.
    hs.keys("3 enter").await;
    let s = hs.draw().await;
    assert!(s.contains("description") && s.contains("git-helper"), "{s}");
}

fn alive(pid: i32) -> bool {
    // A zombie has no cmdline left; it is as good as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Quitting with a command running asks first, then kills the command's
/// whole process tree and leaves an `interrupted` journal entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quit_kills_the_running_command_and_journals_it() {
    let dir = tempfile::tempdir().unwrap();
    let side = tempfile::tempdir().unwrap();
    let pid_file = side.path().join("pid");
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.draw().await;
    let cmd = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
    hs.app
        .pane_call("command", |c: &mut CommandPane, cx| c.run(cmd, cx));
    let t0 = Instant::now();
    let pid: i32 = loop {
        hs.app.drain();
        if let Ok(s) = std::fs::read_to_string(&pid_file)
            && let Ok(p) = s.trim().parse()
        {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "sleep never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(alive(pid));
    assert!(command(&mut hs).is_running());
    // Not `hs.keys`: settling would wait for the command.
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("ctrl-q")));
    assert!(!hs.app.quit, "quit must ask while a command runs");
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("n")));
    assert!(!hs.app.quit);
    assert!(alive(pid), "declining must leave the command alone");
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("ctrl-q")));
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("y")));
    assert!(hs.app.quit);
    let t1 = Instant::now();
    hs.app.shutdown(Duration::from_secs(3)).await;
    assert!(t1.elapsed() < Duration::from_secs(4));
    assert!(
        !hs.app.is_busy(),
        "the command ended before shutdown returned"
    );
    let t2 = Instant::now();
    while alive(pid) && t2.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(pid), "sleep {pid} survived the quit");
    let j = hs.app.cx.ws.journal().read("s-001").await.unwrap();
    let e = j
        .entries
        .iter()
        .find(|e| {
            e.tool == "Bash"
                && e.args["command"]
                    .as_str()
                    .unwrap_or("")
                    .contains("sleep 30")
        })
        .expect("the command is journalled");
    assert_eq!(e.state.as_str(), "interrupted", "{e:?}");
}

/// Quitting with nothing running needs no confirmation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quit_when_idle_does_not_ask() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("ctrl-q").await;
    assert!(hs.app.quit);
    assert_eq!(hs.app.overlay_kind(), None);
}

fn editor(hs: &mut Harness) -> &mut EditorPane {
    hs.pane::<EditorPane>("editor")
}

/// A save never overwrites changes made on disk since the file was
/// opened: it asks reload / overwrite instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editor_save_does_not_clobber_changes_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let root = ws.layout().workdir().to_string();
    let mut hs = Harness::new(ws, options(), 100, 30).await;
    bash(&hs, "printf 'one\\n' > f.txt").await;
    let path = format!("{root}/f.txt");
    let read = |hs: &Harness| {
        let ws = hs.app.cx.ws.clone();
        let p = path.clone();
        async move { String::from_utf8(ws.sandbox().read(&p, None).await.unwrap()).unwrap() }
    };
    let open_it = path.clone();
    hs.app.pane_call("files", move |_: &mut FilesPane, cx| {
        cx.effect(wsbench::tui::action::Effect::OpenEditor(open_it))
    });
    hs.settle().await;
    assert_eq!(
        editor(&mut hs).lines().map(|l| l.to_vec()),
        Some(vec!["one".to_string()])
    );
    // Someone else changes the file; the user edits and saves.
    bash(&hs, "printf 'theirs\\n' > f.txt").await;
    hs.type_text("X").await;
    hs.keys("ctrl-s").await;
    assert_eq!(read(&hs).await, "theirs\n", "the save clobbered the disk");
    // One key answers (issue 22); Enter alone picks nothing.
    assert_eq!(hs.app.overlay_kind(), Some("choose"));
    hs.keys("enter").await;
    assert_eq!(hs.app.overlay_kind(), Some("choose"));
    assert_eq!(read(&hs).await, "theirs\n");
    // Esc cancels: still nothing written, the edits are kept.
    hs.keys("esc").await;
    assert_eq!(read(&hs).await, "theirs\n");
    assert!(editor(&mut hs).modified());
    // Overwrite on purpose.
    hs.keys("ctrl-s").await;
    hs.keys("o").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert_eq!(read(&hs).await, "Xone\n");
    // After our own save, another save goes through without asking.
    hs.type_text("Y").await;
    hs.keys("ctrl-s").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert_eq!(read(&hs).await, "XYone\n");
    // Reload takes the disk's text.
    bash(&hs, "printf 'new\\n' > f.txt").await;
    hs.type_text("Z").await;
    hs.keys("ctrl-s").await;
    hs.keys("r").await;
    assert_eq!(read(&hs).await, "new\n");
    assert_eq!(
        editor(&mut hs).lines().map(|l| l.to_vec()),
        Some(vec!["new".to_string()])
    );
}

/// Re-running a command is marked dangerous and `r` means refresh in the
/// other panes: it asks first, naming the command.
#[tokio::test]
async fn rerun_asks_before_running_again() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.draw().await;
    let marker = dir.path().join("runs");
    let cmd = format!("echo x >> {}", marker.display());
    hs.app
        .pane_call("command", |c: &mut CommandPane, cx| c.run(cmd, cx));
    let t0 = Instant::now();
    while command(&mut hs).is_running() || !marker.exists() {
        hs.app.drain();
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "first run never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let runs = || std::fs::read_to_string(&marker).unwrap().lines().count();
    assert_eq!(runs(), 1);
    hs.app.run_action("command.rerun");
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("n")));
    tokio::time::sleep(Duration::from_millis(300)).await;
    hs.app.drain();
    assert_eq!(runs(), 1, "declining must not run it");
    hs.app.run_action("command.rerun");
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("y")));
    let t1 = Instant::now();
    while runs() < 2 {
        hs.app.drain();
        assert!(
            t1.elapsed() < Duration::from_secs(20),
            "the re-run never happened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An atomic save (temp file + rename, as the editor and the Write tool
/// do) refreshes the preview of the selected file.
#[tokio::test]
async fn preview_follows_an_atomic_save() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "old-preview-text\n").unwrap();
    let ws = open(dir.path()).await;
    let note = format!("{}/note.txt", ws.layout().workdir());
    let mut o = options();
    o.watch = true;
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    hs.draw().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n = note.clone();
    wait_for(&mut hs, "note.txt listed", |hs| {
        files(hs).find(&n).is_some()
    })
    .await;
    assert!(files(&mut hs).select_path(&note));
    // Zoomed, the pane is wide enough to show the preview beside the tree.
    hs.app.run_action("app.focus_files");
    hs.app.run_action("app.zoom");
    hs.keys("j").await;
    let mut screen = String::new();
    let t0 = Instant::now();
    while !screen.contains("old-preview-text") {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no preview: {screen}"
        );
        hs.app.run_action("files.toggle_preview");
        hs.app.run_action("files.toggle_preview");
        screen = hs.draw().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ws.sandbox()
        .write(&note, b"new-preview-text\n")
        .await
        .unwrap();
    let t1 = Instant::now();
    loop {
        let screen = hs.draw().await;
        if screen.contains("new-preview-text") {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(20),
            "preview stayed stale: {screen}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
