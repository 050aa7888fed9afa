//! Input to a running command in the Command pane (issue 17 point 3):
//! a `read` answered by a typed line, Ctrl-C as SIGINT that a `trap`
//! sees, the tree kill on its own key, and the shell's directory in the
//! title (the pane's session shell, point 4).

use crate::support::tui::*;

use std::time::{Duration, Instant};

use ratatui::crossterm::event::Event;
use wsbench::tui::panes::command::CommandPane;

fn press(hs: &mut Harness, k: &str) {
    hs.app.on_input(Event::Key(key(k)));
}

fn type_chars(hs: &mut Harness, s: &str) {
    for c in s.chars() {
        let k = if c == ' ' {
            "space".to_string()
        } else {
            c.to_string()
        };
        press(hs, &k);
    }
}

fn running(hs: &mut Harness) -> bool {
    hs.app
        .pane_call("command", |c: &mut CommandPane, _| c.is_running())
        .unwrap_or(false)
}

/// Draws without settling (settling waits for the running command)
/// until the screen satisfies `cond`, for at most 30 s.
async fn until(hs: &mut Harness, what: &str, cond: impl Fn(&str, bool) -> bool) -> String {
    match within(hs, Duration::from_secs(30), &cond).await {
        Ok(s) => s,
        Err(s) => panic!("waiting for {what}:\n{s}"),
    }
}

/// Like [`until`] for at most `limit`; `Err` holds the last screen.
async fn within(
    hs: &mut Harness,
    limit: Duration,
    cond: &impl Fn(&str, bool) -> bool,
) -> Result<String, String> {
    let t0 = Instant::now();
    loop {
        hs.app.drain();
        while let Some(r) = hs.sub.try_recv() {
            hs.app.on_engine(r);
        }
        hs.term.draw(|f| hs.app.render(f)).unwrap();
        let s = screen(hs.term.backend());
        if cond(&s, running(hs)) {
            return Ok(s);
        }
        if t0.elapsed() >= limit {
            return Err(s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start(cmd: &str) -> (tempfile::TempDir, Harness) {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path()).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.draw().await;
    // The TUI starts on Files (issue 22): `i` takes the keyboard to the
    // prompt, where these tests type.
    hs.keys("i").await;
    assert_eq!(hs.app.focus(), "command");
    let cmd = cmd.to_string();
    hs.app
        .pane_call("command", |c: &mut CommandPane, cx| c.run(cmd, cx));
    (dir, hs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_prompt_is_answered_from_the_pane() {
    let (_d, mut hs) = start("printf 'name? '; read x; echo got $x").await;
    until(&mut hs, "the prompt", |s, _| s.contains("name? ")).await;
    type_chars(&mut hs, "hello");
    press(&mut hs, "enter");
    let s = until(&mut hs, "the answer", |s, r| s.contains("got hello") && !r).await;
    assert!(s.contains("✓ exit 0"), "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_sends_sigint_and_ctrl_x_still_kills() {
    let (_d, mut hs) = start("trap 'echo INT' INT; echo ready; sleep 60; echo after $?").await;
    until(&mut hs, "ready", |s, _| s.contains("ready")).await;
    // "ready" shows before `sleep` has started: a SIGINT that lands in
    // between runs the trap and the sleep goes on. Each press is a new
    // SIGINT, so press again until the sleep is the one interrupted.
    let trapped = |s: &str, r: bool| s.contains("after 130") && !r;
    let mut s = Err(String::new());
    for _ in 0..10 {
        press(&mut hs, "ctrl-c");
        assert_ne!(
            hs.app.overlay_kind(),
            Some("confirm"),
            "ctrl-c asks nothing"
        );
        s = within(&mut hs, Duration::from_secs(3), &trapped).await;
        if s.is_ok() {
            break;
        }
    }
    let s = s.unwrap_or_else(|s| panic!("waiting for the trap:\n{s}"));
    assert!(s.contains("INT"), "{s}");
    // The kill of the tree is on ctrl-x, with its confirmation.
    let cmd = "echo go; sleep 60".to_string();
    hs.app
        .pane_call("command", |c: &mut CommandPane, cx| c.run(cmd, cx));
    until(&mut hs, "go", |s, _| s.contains("go")).await;
    press(&mut hs, "ctrl-x");
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    press(&mut hs, "y");
    let s = until(&mut hs, "the kill", |_, r| !r).await;
    assert!(s.contains("killed"), "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_carries_over_and_the_title_shows_it() {
    let (_d, mut hs) = start("mkdir -p deep/er && cd deep/er").await;
    until(&mut hs, "the cd", |_, r| !r).await;
    let cmd = "pwd".to_string();
    hs.app
        .pane_call("command", |c: &mut CommandPane, cx| c.run(cmd, cx));
    // Once in the output of `pwd`, once in the title.
    let s = until(&mut hs, "pwd", |s, r| {
        !r && s.matches("deep/er").count() >= 2
    })
    .await;
    let title = s.lines().find(|l| l.contains("Command · session")).unwrap();
    assert!(title.contains("deep/er"), "{title}");
}
