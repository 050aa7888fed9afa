//! The k9s/vim/shell user's trial of issue 22, second round: readline
//! keys in the Command prompt (ctrl-u clears to the start, not undo),
//! ctrl-z suspends from the prompt too, and a digit with no pane says so.

use crate::support::tui;

use tui::*;
use wsbench::tui::app::HostRequest;
use wsbench::tui::panes::command::CommandPane;

fn command(hs: &mut Harness) -> &mut CommandPane {
    hs.pane::<CommandPane>("command")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_edits_like_a_shell_and_ctrl_z_suspends() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    hs.keys("i").await;
    hs.type_text("echo hello world").await;
    hs.keys("ctrl-w").await;
    assert_eq!(command(&mut hs).prompt_lines(), ["echo hello "]);
    hs.keys("ctrl-a ctrl-k").await;
    assert_eq!(command(&mut hs).prompt_lines(), [""]);
    hs.type_text("ls -l").await;
    // ctrl-u: the whole line before the cursor goes, not one character.
    hs.keys("ctrl-u").await;
    assert_eq!(command(&mut hs).prompt_lines(), [""]);
    assert!(command(&mut hs).sent().is_empty());
    // ctrl-z from inside the prompt reaches the app's suspend.
    hs.app.take_requests();
    hs.keys("ctrl-z").await;
    assert!(
        hs.app.take_requests().contains(&HostRequest::Suspend),
        "ctrl-z in the prompt must suspend"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digit_with_no_pane_says_so() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    let before = hs.app.focus();
    hs.keys("7").await;
    assert_eq!(hs.app.focus(), before);
    let msg = hs
        .app
        .toast()
        .map(|(_, m)| m.to_string())
        .unwrap_or_default();
    assert!(
        msg.starts_with("no pane on 7; focus keys: 0 Workspaces · 1 Sessions · 2 Files"),
        "{msg}"
    );
    assert!(msg.contains("9 MCP"), "{msg}");
    hs.keys("8").await;
    let msg = hs
        .app
        .toast()
        .map(|(_, m)| m.to_string())
        .unwrap_or_default();
    assert!(msg.starts_with("no pane on 8;"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_name_alone_focuses_the_pane() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 120, 40).await;
    for (cmd, pane) in [("mcp", "mcp"), ("files", "files"), ("logs", "logs")] {
        hs.keys(":").await;
        hs.type_text(cmd).await;
        hs.keys("enter").await;
        assert_eq!(hs.app.focus(), pane, ":{cmd}");
        assert_eq!(hs.app.toast(), None, ":{cmd} must not warn");
    }
    // `:ws` alone: the Workspaces pane where there is one, else a toast
    // saying there is none (never "needs an argument").
    hs.keys(":").await;
    hs.type_text("ws").await;
    hs.keys("enter").await;
    let msg = hs
        .app
        .toast()
        .map(|(_, m)| m.to_string())
        .unwrap_or_default();
    assert!(!msg.contains("needs an argument"), "{msg}");
    assert!(
        hs.app.focus() == "workspaces"
            || hs.app.modal() == Some("workspaces")
            || msg.contains("no workspaces pane"),
        "focus {} toast {msg}",
        hs.app.focus()
    );
}
