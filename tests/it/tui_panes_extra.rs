//! The Workspaces and MCP panes: snapshots at 120×40, 80×24 and 40×10
//! (TestBackend + insta), `:ws <id>` switching the whole app, destroy
//! behind a confirmation and absent in read-only mode, and the MCP add /
//! remove / start-failure paths. Nothing connects to a server in the
//! snapshots: the pane lists with `mcp_status`, which starts nothing.
//! Switching workspace stops the old file watch; switching profile shuts
//! the old manager down (at once, or once the app leaves its workspace).

use crate::support::tui;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tui::*;
use wsbench::backend::local::LocalProvisioner;
use wsbench::backend::{ChangeKind, FileChange, Provisioner};
use wsbench::engine::{EventBus, Workspace};
use wsbench::manager::{ManagerError, ManagerOptions, WorkspaceManager};
use wsbench::tui::action::AppMsg;
use wsbench::tui::app::AppOptions;
use wsbench::tui::panes::ManagerFactory;
use wsbench::tui::panes::logs::LogsPane;
use wsbench::tui::panes::mcp::McpPane;
use wsbench::tui::panes::workspaces::WorkspacesPane;

const SIZES: [(u16, u16); 3] = [(120, 40), (80, 24), (40, 10)];

/// A manager over a temp base dir holding two local workspaces, and the
/// first of them opened.
async fn manager() -> (tempfile::TempDir, WorkspaceManager, Arc<Workspace>) {
    let base = tempfile::tempdir().unwrap();
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(base.path()));
    let opts = ManagerOptions::for_provisioner(prov.as_ref());
    let m = WorkspaceManager::new("local", prov, opts, EventBus::default());
    let a = m
        .get_workspace("tester", "coder", "s-001", Some("ws-alpha"))
        .await
        .unwrap();
    m.get_workspace("tester", "reviewer", "s-002", Some("ws-beta"))
        .await
        .unwrap();
    (base, m, a)
}

fn with_manager(m: &WorkspaceManager) -> AppOptions {
    let mut o = options();
    o.manager = Some(m.clone());
    o
}

/// Settings of [`settings`] plus the TTL left, which is `59m 59s` or
/// `1h 0m` depending on how many milliseconds the test took.
fn ws_settings(p: &Path) -> insta::Settings {
    let mut s = settings(p);
    s.add_filter(r"\b(59m|1h)\b", "[TTL]");
    // Two-unit spans (`59m 59s`, `1h 0m`): the second unit goes too.
    s.add_filter(r"\[TTL\] (\[DUR\]|0m)", "[TTL]");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_pane() {
    let (base, m, ws) = manager().await;
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), with_manager(&m), w, h).await;
        hs.keys("esc 0 z").await;
        let text = hs.draw().await;
        assert!(
            text.contains("ws-alpha") && text.contains("ws-beta"),
            "{text}"
        );
        ws_settings(base.path()).bind(|| {
            insta::assert_snapshot!(format!("workspaces_{w}x{h}"), text);
        });
    }
}

/// `d` on a workspace: every field of its listing, and for the open one
/// the paths of its layout (issue 22's describe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_describe() {
    let (base, m, ws) = manager().await;
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), with_manager(&m), w, h).await;
        hs.keys("esc 0 d").await;
        let text = hs.draw().await;
        assert!(text.contains("describe workspace ws-alpha"), "{text}");
        let mut s = ws_settings(base.path());
        // Creation times and the seconds since, which differ per run.
        s.add_filter(r"\b\d{10}(\.\d+)?\b", "[EPOCH]");
        s.add_filter(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[UTC]");
        s.add_filter(r"(age_secs|idle_secs|ttl_left_secs): [0-9.]+", "$1: [N]");
        // Those vary in width: one space up to the border.
        s.add_filter(r"(\[N\]|\[UTC\]\)) *┃", "$1 ┃");
        s.bind(|| {
            insta::assert_snapshot!(format!("workspaces_describe_{w}x{h}"), text);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_screen_with_manager() {
    let (base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    hs.keys("esc 0").await;
    let text = hs.draw().await;
    ws_settings(base.path()).bind(|| {
        insta::assert_snapshot!("workspaces_screen_120x40", text);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_pane_without_manager_says_so() {
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, options(), 80, 24).await;
    hs.keys("esc 0 z").await;
    let text = hs.draw().await;
    assert!(text.contains("no workspace manager"), "{text}");
    // `:ws` is refused with a reason, and nothing switches.
    hs.keys(":").await;
    hs.type_text("ws other").await;
    hs.keys("enter").await;
    assert_eq!(hs.app.cx.ws.id(), WS_ID);
    let text = hs.draw().await;
    assert!(text.contains("no workspace manager"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn palette_ws_switches_the_workspace() {
    let (_base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    assert_eq!(hs.app.cx.ws.id(), "ws-alpha");
    hs.app.cx.effect(wsbench::tui::action::Effect::Log(
        wsbench::tui::action::LogLine::now(
            wsbench::tui::action::Level::Info,
            "test",
            "logged on alpha",
        ),
    ));
    hs.keys("esc :").await;
    hs.type_text("ws ws-beta").await;
    hs.keys("enter").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-beta");
    // Logs survive the switch, a separator after them (issue 22).
    let logs: Vec<String> = hs
        .app
        .pane_mut("logs")
        .unwrap()
        .as_any_mut()
        .downcast_mut::<wsbench::tui::panes::logs::LogsPane>()
        .unwrap()
        .lines()
        .map(|l| l.message.clone())
        .collect();
    let old = logs.iter().position(|l| l == "logged on alpha");
    let sep = logs
        .iter()
        .position(|l| l.contains("── switched to workspace ws-beta ──"));
    assert!(old.is_some() && sep.is_some() && old < sep, "{logs:#?}");
    let text = hs.draw().await;
    assert!(
        text.contains("ws ws-beta"),
        "header names the new workspace:\n{text}"
    );

    // An unknown id creates nothing and says why (the rebuilt Command
    // pane left the keyboard alone: `:` opens the palette).
    hs.keys(":").await;
    hs.type_text("ws nope").await;
    hs.keys("enter").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-beta");
    let failure = hs
        .app
        .pane_call::<WorkspacesPane, _>("workspaces", |p, _| p.failure("nope").map(String::from))
        .unwrap();
    assert!(
        failure.as_deref().is_some_and(|f| f.contains("nope")),
        "{failure:?}"
    );
    assert!(!m.list().await.unwrap().iter().any(|w| w.id == "nope"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_in_the_pane_opens_the_selected_workspace() {
    let (_base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    hs.keys("esc 0 j enter").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-beta");
    // The panes were rebuilt on it: the Workspaces pane lists again and
    // marks the new one as current.
    let text = hs.draw().await;
    assert!(text.contains("● ws-beta"), "{text}");
    // The rebuilt Command pane does not take the keyboard: `5` focuses
    // it, `i` starts typing (`5 i pwd` types `pwd`, not `ipwd`).
    hs.keys("5").await;
    assert_eq!(hs.app.focus(), "command");
    assert!(!hs.app.pane("command").unwrap().text_input_active());
    hs.keys("i").await;
    hs.type_text("pwd").await;
    let lines = hs
        .app
        .pane_call::<wsbench::tui::panes::command::CommandPane, _>("command", |p, _| {
            p.prompt_lines().to_vec()
        })
        .unwrap();
    assert_eq!(lines, ["pwd"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_asks_first_and_refuses_the_open_workspace() {
    let (base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    hs.keys("esc 0 j D").await;
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    hs.keys("n").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert!(m.list().await.unwrap().iter().any(|w| w.id == "ws-beta"));

    hs.keys("D y").await;
    let ids: Vec<String> = m.list().await.unwrap().into_iter().map(|w| w.id).collect();
    assert_eq!(
        ids,
        vec!["ws-alpha".to_string()],
        "{}",
        base.path().display()
    );
    let listed = hs
        .app
        .pane_call::<WorkspacesPane, _>("workspaces", |p, _| p.ids())
        .unwrap();
    assert_eq!(listed, vec!["ws-alpha".to_string()]);

    // The open workspace cannot be destroyed from under the app.
    hs.keys("g D").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert!(m.list().await.unwrap().iter().any(|w| w.id == "ws-alpha"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_is_absent_in_read_only_mode() {
    let (_base, m, ws) = manager().await;
    let mut o = with_manager(&m);
    o.read_only = true;
    let mut hs = Harness::new(ws, o, 120, 40).await;
    assert!(!hs.app.cx.can("workspaces.destroy"));
    assert!(!hs.app.cx.can("mcp.remove"));
    assert!(!hs.app.cx.can("mcp.add"));
    hs.keys("esc 0 j D").await;
    assert_eq!(hs.app.overlay_kind(), None);
    let text = hs.draw().await;
    let footer = text.lines().rev().find(|l| !l.is_empty()).unwrap();
    assert!(!footer.contains("destroy"), "{footer}");
    assert!(footer.contains("open"), "{footer}");
    assert_eq!(m.list().await.unwrap().len(), 2);
}

fn mcp_options() -> AppOptions {
    let mut o = options();
    o.agent = "coder".into();
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_pane() {
    let (dir, ws) = fixture(|_| {}).await;
    for (w, h) in SIZES {
        let mut hs = Harness::new(ws.clone(), mcp_options(), w, h).await;
        hs.keys("esc 9 z").await;
        let text = hs.draw().await;
        assert!(
            text.contains("docs") && text.contains("everything"),
            "{text}"
        );
        settings(dir.path()).bind(|| {
            insta::assert_snapshot!(format!("mcp_{w}x{h}"), text);
        });
    }
    // Listing started nothing.
    assert_eq!(ws.mcp().runtime().live_stateful(), 0);
}

/// Issue 23 point 3 in the TUI: a server whose `.mcp` values use
/// `${VAR}` says, where it is looked at, that the reference sends them as
/// written (the note `mcp add` and `mcp list` print).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_pane_notes_a_variable_the_reference_will_not_fill() {
    let (_dir, ws) = fixture(|p| {
        let path = p.join(".mcp");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replacen("\"X-Team\": \"demo\"", "\"X-Team\": \"${TEAM_TOKEN}\"", 1);
        std::fs::write(&path, text).unwrap();
    })
    .await;
    let mut hs = Harness::new(ws.clone(), mcp_options(), 120, 40).await;
    hs.keys("esc 9 z").await;
    let text = hs.draw().await;
    assert!(
        text.contains("fills ${TEAM_TOKEN} from wsbench's environment"),
        "{text}"
    );
    assert!(text.contains("mcp add --literal"), "{text}");
    // The other server uses no variable: no note when it is selected.
    hs.keys("j").await;
    let text = hs.draw().await;
    assert!(!text.contains("from wsbench's environment"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_add_start_failure_and_remove() {
    let (dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws.clone(), mcp_options(), 120, 40).await;
    hs.keys("esc 9 z a").await;
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    // A command that exists but dies at once: declared, fails on start.
    hs.type_text("broken sh -c 'echo boom >&2; exit 3'").await;
    hs.keys("enter").await;
    let names = hs
        .app
        .pane_call::<McpPane, _>("mcp", |p, _| p.server_names())
        .unwrap();
    assert_eq!(names, ["docs", "everything", "broken"]);
    let on_disk = std::fs::read_to_string(dir.path().join(".mcp")).unwrap();
    assert!(on_disk.contains("exit 3"), "{on_disk}");

    // Starting it fails with a reason shown in the pane: the exit status
    // once, the stderr tail on lines of its own (no `␊`), the same
    // failure not repeated as "last error".
    hs.keys("G s").await;
    let text = hs.draw().await;
    assert!(text.contains("broken") && text.contains("failed"), "{text}");
    assert!(
        !text.contains("(exit status 3)") && !text.contains("(exit 3)"),
        "{text}"
    );
    assert!(!text.contains('␊'), "{text}");
    assert!(text.contains("  boom"), "{text}");
    assert!(!text.contains("last error"), "{text}");
    settings(dir.path()).bind(|| insta::assert_snapshot!("mcp_failed_120x40", text));

    // Remove asks first; no keeps it, yes removes it from `.mcp`.
    hs.keys("D").await;
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    hs.keys("n").await;
    assert!(
        std::fs::read_to_string(dir.path().join(".mcp"))
            .unwrap()
            .contains("broken")
    );
    hs.keys("D y").await;
    let names = hs
        .app
        .pane_call::<McpPane, _>("mcp", |p, _| p.server_names())
        .unwrap();
    assert_eq!(names, ["docs", "everything"]);
    assert!(
        !std::fs::read_to_string(dir.path().join(".mcp"))
            .unwrap()
            .contains("broken")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_add_form_rejects_bad_input_and_keeps_the_file() {
    let (dir, ws) = fixture(|_| {}).await;
    let before = std::fs::read_to_string(dir.path().join(".mcp")).unwrap();
    let mut hs = Harness::new(ws, mcp_options(), 120, 40).await;
    hs.keys("esc 9 a").await;
    hs.type_text("lonely").await;
    hs.keys("enter").await;
    // Refused in the form, which keeps the text.
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    let text = hs.draw().await;
    assert!(
        text.contains("lonely") && text.contains("command or an http"),
        "{text}"
    );
    hs.keys("esc").await;
    // A duplicate name is refused by the engine.
    hs.keys("a").await;
    hs.type_text("docs http://127.0.0.1:9/mcp").await;
    hs.keys("enter").await;
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    let text = hs.draw().await;
    assert!(text.contains("docs http://127.0.0.1:9/mcp"), "{text}");
    assert!(text.contains("already declared"), "{text}");
    hs.keys("esc").await;
    let names = hs
        .app
        .pane_call::<McpPane, _>("mcp", |p, _| p.server_names())
        .unwrap();
    assert_eq!(names, ["docs", "everything"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".mcp")).unwrap(),
        before
    );
}

/// Every message the Logs pane got (toasts and watch changes included).
fn logged(hs: &mut Harness) -> Vec<String> {
    hs.app
        .pane_call::<LogsPane, _>("logs", |p, _| {
            p.lines().map(|l| l.message.clone()).collect()
        })
        .unwrap()
}

/// Runs the app until `cond` holds or 20 s pass.
async fn until(hs: &mut Harness, what: &str, mut cond: impl FnMut(&mut Harness) -> bool) {
    let t0 = std::time::Instant::now();
    loop {
        hs.settle().await;
        if cond(hs) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn palette(hs: &mut Harness, line: &str) {
    hs.keys("esc :").await;
    hs.type_text(line).await;
    hs.keys("enter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ws_id_names_the_close_matches() {
    let (_base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    palette(&mut hs, "ws ws-bta").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-alpha");
    let log = logged(&mut hs);
    assert!(
        log.iter().any(|l| l.contains("opening ws-bta failed")
            && l.contains("no workspace `ws-bta`")
            && l.contains("did you mean ws-beta")),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_switch_stops_the_old_workspace_watch() {
    let (_base, m, alpha) = manager().await;
    let beta = m.open("ws-beta").await.unwrap();
    let alpha_dir = alpha.sandbox().host_root().unwrap().to_path_buf();
    let beta_dir = beta.sandbox().host_root().unwrap().to_path_buf();
    let mut o = with_manager(&m);
    o.watch = true;
    let mut hs = Harness::new(alpha.clone(), o, 120, 40).await;
    // Control: a change in the open workspace arrives through the watch.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(alpha_dir.join("seen-before.txt"), "x").unwrap();
    until(&mut hs, "the watch to report seen-before.txt", |hs| {
        logged(hs).iter().any(|l| l.contains("seen-before.txt"))
    })
    .await;
    let old = hs.app.file_watch().unwrap().generation();

    palette(&mut hs, "ws ws-beta").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-beta");
    assert!(hs.app.file_watch().unwrap().generation() > old);
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(alpha_dir.join("after-switch.txt"), "x").unwrap();
    std::fs::write(beta_dir.join("in-beta.txt"), "x").unwrap();
    until(&mut hs, "the new watch to report in-beta.txt", |hs| {
        logged(hs).iter().any(|l| l.contains("in-beta.txt"))
    })
    .await;
    // The old watch, were it alive, would have reported by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    hs.settle().await;
    let log = logged(&mut hs);
    assert!(
        !log.iter().any(|l| l.contains("after-switch.txt")),
        "the old workspace's watch still reaches the app: {log:#?}"
    );
    // A change the old watch had queued before the switch is dropped.
    let queued = alpha_dir.join("queued.txt").to_string_lossy().into_owned();
    hs.app.on_msg(AppMsg::File {
        generation: old,
        change: FileChange {
            path: queued,
            kind: ChangeKind::Created,
        },
    });
    assert!(!logged(&mut hs).iter().any(|l| l.contains("queued.txt")));
}

/// A factory for `:profile`: managers over `base`, whatever the name.
fn factory(base: &Path) -> ManagerFactory {
    let base = base.to_path_buf();
    Arc::new(move |name: &str| {
        let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(&base));
        let opts = ManagerOptions::for_provisioner(prov.as_ref());
        Ok(WorkspaceManager::new(name, prov, opts, EventBus::default()))
    })
}

fn leases(list: &[wsbench::manager::WorkspaceInfo], id: &str) -> usize {
    list.iter().find(|w| w.id == id).map_or(0, |w| w.leases)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_switch_shuts_the_old_manager_down_once_its_workspace_is_left() {
    let (_base, m, alpha) = manager().await;
    let other = tempfile::tempdir().unwrap();
    // A workspace of the other profile, made by an earlier process.
    let earlier = factory(other.path())("other").unwrap();
    earlier
        .get_workspace("tester", "coder", "s-001", Some("ws-gamma"))
        .await
        .unwrap();
    earlier.shutdown().await.unwrap();
    let mut o = with_manager(&m);
    o.manager_factory = Some(factory(other.path()));
    let mut hs = Harness::new(alpha.clone(), o, 120, 40).await;
    // The app leases the workspace it shows: the sweeper leaves it be.
    assert_eq!(leases(&m.list().await.unwrap(), "ws-alpha"), 1);
    let screen = hs.draw().await;
    assert!(screen.contains("● ready"), "the header: {screen}");

    palette(&mut hs, "profile other").await;
    assert_eq!(hs.app.cx.header.profile, "other");
    // The old manager keeps the open workspace (still leased) until the
    // app leaves it, and closes its other ones now.
    assert!(hs.app.retiring_manager().is_some());
    until(&mut hs, "ws-beta to close", |_| {
        m.open_ids() == ["ws-alpha".to_string()]
    })
    .await;
    assert!(alpha.is_alive());
    assert_eq!(leases(&m.list().await.unwrap(), "ws-alpha"), 1);

    // Opening a workspace of the new profile shuts the old manager down:
    // lease released, workspaces closed, no more work taken.
    palette(&mut hs, "ws ws-gamma").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-gamma");
    assert!(hs.app.retiring_manager().is_none());
    until(&mut hs, "the old manager to shut down", |_| {
        !alpha.is_alive() && m.open_ids().is_empty()
    })
    .await;
    let err = m.open("ws-alpha").await.unwrap_err();
    assert!(matches!(err, ManagerError::ShutDown(_)), "{err}");
    let new = hs.app.cx.manager.clone().unwrap();
    assert_eq!(leases(&new.list().await.unwrap(), "ws-gamma"), 1);
    // Quitting releases the lease and shuts down the manager the app made.
    hs.app.release_managers().await;
    let err = new.open("ws-gamma").await.unwrap_err();
    assert!(matches!(err, ManagerError::ShutDown(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_switch_from_a_plain_directory_shuts_the_old_manager_down_at_once() {
    let (_base, m, _alpha) = manager().await;
    let (_dir, ws) = fixture(|_| {}).await;
    let other = tempfile::tempdir().unwrap();
    let mut o = with_manager(&m);
    o.manager_factory = Some(factory(other.path()));
    let mut hs = Harness::new(ws.clone(), o, 120, 40).await;
    palette(&mut hs, "profile other").await;
    assert_eq!(hs.app.cx.header.profile, "other");
    assert!(hs.app.retiring_manager().is_none());
    until(&mut hs, "the old manager to shut down", |_| {
        m.open_ids().is_empty()
    })
    .await;
    let err = m.open("ws-beta").await.unwrap_err();
    assert!(matches!(err, ManagerError::ShutDown(_)), "{err}");
    // The directory the app shows is not the manager's: still open.
    assert!(ws.is_alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_pane_shows_skipped_entries_and_refuses_to_stop_what_is_not_running() {
    let (dir, ws) = fixture(|p| {
        let path = p.join(".mcp");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["mcps"]["coder"]["s-001"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "name": "bad name!",
                "is_stateful": true,
                "mcp_config": {"type": "stdio_mcp", "command": "x"}
            }));
        std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    })
    .await;
    let mut hs = Harness::new(ws, mcp_options(), 120, 40).await;
    hs.keys("esc 9 z").await;
    let text = hs.draw().await;
    assert!(text.contains("MCP (2, 1 .mcp problem)"), "{text}");
    assert!(text.contains("⚠") && text.contains("bad name!"), "{text}");
    let log = logged(&mut hs);
    assert!(
        log.iter()
            .any(|l| l.starts_with(".mcp:") && l.contains("bad name!")),
        "{log:#?}"
    );
    settings(dir.path()).bind(|| insta::assert_snapshot!("mcp_problems_120x40", text));
    // Stopping a server that never started says so, and starts nothing.
    hs.keys("x").await;
    let text = hs.draw().await;
    assert!(text.contains("`docs` is not running (declared)"), "{text}");
    assert_eq!(hs.app.cx.ws.mcp().runtime().live_stateful(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_pane_shows_whole_ids_and_explains_an_outside_workspace() {
    let base = tempfile::tempdir().unwrap();
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(base.path()));
    let opts = ManagerOptions::for_provisioner(prov.as_ref());
    let m = WorkspaceManager::new("local", prov, opts, EventBus::default());
    let long = "ws-0123456789abcdef0123456789";
    m.get_workspace("", "", "s-001", Some(long)).await.unwrap();
    // The app shows a directory the profile does not manage.
    let (_dir, ws) = fixture(|_| {}).await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    hs.keys("esc 0 z").await;
    let text = hs.draw().await;
    let row = text
        .lines()
        .find(|l| l.contains("ws-0123"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(long), "the whole id: {row}");
    // The default (empty) user and agent, as `workspaces list` says.
    assert!(
        row.contains(" (default)/(default) "),
        "no user, no agent: {row}"
    );
    assert!(
        text.contains("the open workspace 0123456789ab is not one of profile local's"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_workspace_asks_then_opens_it() {
    let (_base, m, alpha) = manager().await;
    let mut hs = Harness::new(alpha, with_manager(&m), 120, 40).await;
    hs.keys("esc 0 n").await;
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    let text = hs.draw().await;
    assert!(
        text.contains("Create a new workspace in profile local"),
        "{text}"
    );
    hs.keys("n").await;
    assert_eq!(
        m.list().await.unwrap().len(),
        2,
        "declining creates nothing"
    );
    hs.keys("n y").await;
    let list = m.list().await.unwrap();
    assert_eq!(list.len(), 3);
    let id = hs.app.cx.ws.id().to_string();
    assert!(id != "ws-alpha" && id != "ws-beta", "{id}");
    assert_eq!(leases(&list, &id), 1, "the app leases the new one");
    assert_eq!(leases(&list, "ws-alpha"), 0, "and let the old one go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_another_workspace_leaves_the_header_alone() {
    let (_base, m, alpha) = manager().await;
    let mut hs = Harness::new(alpha, with_manager(&m), 120, 40).await;
    // ws-beta is the second row; `c` asks first (issue 21), `n` keeps it
    // open, `y` closes it, which publishes `closed` on the bus the open
    // workspace shares with it.
    hs.keys("esc 0 j c").await;
    assert_eq!(hs.app.overlay_kind(), Some("confirm"));
    hs.keys("n").await;
    assert_eq!(hs.app.overlay_kind(), None);
    assert!(m.open_ids().contains(&"ws-beta".to_string()));
    hs.keys("c y").await;
    until(&mut hs, "ws-beta to close", |_| {
        m.open_ids() == ["ws-alpha".to_string()]
    })
    .await;
    let text = hs.draw().await;
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("ws ws-alpha") && header.contains("● ready"),
        "{header}"
    );
    let log = logged(&mut hs);
    assert!(
        log.iter().any(|l| l == "workspace ws-beta: closed"),
        "the Logs name it: {log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_add_form_refuses_a_missing_command_and_keeps_the_text() {
    let (dir, ws) = fixture(|_| {}).await;
    let before = std::fs::read_to_string(dir.path().join(".mcp")).unwrap();
    let mut hs = Harness::new(ws, mcp_options(), 120, 40).await;
    hs.keys("esc 9 z a").await;
    hs.type_text("ghost /no/such/binary --flag").await;
    hs.keys("enter").await;
    // Refused as `wsbench mcp add` refuses it; the form is back with the
    // text and the reason.
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    let text = hs.draw().await;
    assert!(text.contains("ghost /no/such/binary --flag"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("┏ ✗ `/no/such/binary` does not exist")),
        "{text}"
    );
    let names = hs
        .app
        .pane_call::<McpPane, _>("mcp", |p, _| p.server_names())
        .unwrap();
    assert_eq!(names, ["docs", "everything"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".mcp")).unwrap(),
        before
    );
    // Fixing the text in the same form adds it.
    for _ in 0.."/no/such/binary --flag".len() {
        hs.keys("backspace").await;
    }
    hs.type_text("sh -c 'exit 3'").await;
    hs.keys("enter").await;
    assert_eq!(hs.app.overlay_kind(), None);
    let names = hs
        .app
        .pane_call::<McpPane, _>("mcp", |p, _| p.server_names())
        .unwrap();
    assert_eq!(names, ["docs", "everything", "ghost"]);
}

/// Runs the app's messages and engine events for `ms` without waiting
/// for tasks in flight (a start that hangs would hold `settle` up).
async fn pump(hs: &mut Harness, ms: u64) {
    hs.app.settle(std::time::Duration::from_millis(ms)).await;
    while let Some(r) = hs.sub.try_recv() {
        hs.app.on_engine(r);
    }
}

fn screen_now(hs: &mut Harness) -> String {
    hs.term.draw(|f| hs.app.render(f)).unwrap();
    screen(hs.term.backend())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stop_cancels_a_start_in_progress() {
    let (_dir, ws) = fixture(|_| {}).await;
    let tag = format!("tui-stop-{}", std::process::id());
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_servers/fake.py");
    let decl = wsbench::engine::mcp::McpDecl::stdio(
        "mute",
        "python3",
        vec![fake.display().to_string(), "--no-init".into(), tag.clone()],
    );
    ws.mcp().add(decl, "coder", "s-001", false).await.unwrap();
    let mut hs = Harness::new(ws.clone(), mcp_options(), 120, 40).await;
    hs.keys("esc 9 z G").await;
    // Start it: it never answers initialize (30 s timeout).
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("s")));
    let t0 = std::time::Instant::now();
    let mut text = String::new();
    while t0.elapsed() < std::time::Duration::from_secs(10) {
        pump(&mut hs, 100).await;
        text = screen_now(&mut hs);
        if text.contains("starting") {
            break;
        }
    }
    assert!(text.contains("x cancels the start"), "{text}");
    // Stop it while it starts: not "busy", stopped at once.
    hs.app
        .on_input(ratatui::crossterm::event::Event::Key(key("x")));
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(10) {
        pump(&mut hs, 100).await;
        text = screen_now(&mut hs);
        if text.contains("■ mute") && !text.contains("…") {
            break;
        }
    }
    assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{text}");
    assert!(!text.contains("busy"), "{text}");
    let inst = ws.mcp().instance("coder", "s-001", "mute").await.unwrap();
    assert_eq!(inst.state(), wsbench::engine::mcp::McpState::Stopped);
    let alive = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&tag))
    });
    assert!(!alive, "the server process is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_takes_a_unique_prefix_or_user_or_agent_and_lists_the_ambiguous() {
    let (_base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    // Both workspaces are user tester's: ambiguous, nothing switches, the
    // candidates are named.
    palette(&mut hs, "ws tester").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-alpha");
    let log = logged(&mut hs);
    assert!(
        log.iter().any(|l| l.contains("`:ws tester` matches 2")
            && l.contains("ws-alpha (tester/coder)")
            && l.contains("ws-beta (tester/reviewer)")),
        "{log:#?}"
    );
    // An agent name that is unique opens its workspace.
    palette(&mut hs, "ws reviewer").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-beta");
    // A unique id prefix too.
    palette(&mut hs, "ws ws-a").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-alpha");
    // Tab offers ids with their user/agent and state.
    hs.keys(":").await;
    hs.type_text("ws ws-").await;
    let screen = hs.draw().await;
    assert!(screen.contains("tester/reviewer · running"), "{screen}");
}

/// Pane cells of the row of `id` (the zoomed pane at 160 columns).
async fn pane_row(hs: &mut Harness, id: &str) -> String {
    hs.resize(160, 30);
    hs.keys("0 z").await;
    let screen = hs.draw().await;
    hs.keys("z").await;
    screen
        .lines()
        .skip(1)
        .find(|l| l.contains(id))
        .unwrap_or_else(|| panic!("no row for {id}:\n{screen}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_pane_shows_the_cells_of_workspaces_list() {
    use wsbench::manager::display;
    let (_base, m, ws) = manager().await;
    let mut hs = Harness::new(ws, with_manager(&m), 120, 40).await;
    hs.keys("esc").await;
    let list = m.list().await.unwrap();
    for id in ["ws-alpha", "ws-beta"] {
        let w = list.iter().find(|w| w.id == id).unwrap();
        let row = pane_row(&mut hs, id).await;
        let labels = display::labels(w);
        assert!(labels.contains("wsbench.isolation="), "{labels}");
        for cell in [
            display::state(w),
            format!(
                "{}/{}",
                display::id_or_default(w.user.as_deref()),
                display::id_or_default(w.agent.as_deref())
            ),
            labels,
        ] {
            assert!(row.contains(&cell), "{cell:?} not in {row:?}");
        }
        assert!(!row.contains("ready"), "{row}");
    }
    // The open one is leased by the app: `running (1 lease)` as the CLI
    // says it; the other is `running`.
    let row = pane_row(&mut hs, "ws-alpha").await;
    assert!(row.contains("running (1 lease)"), "{row}");
    // The header reads the user and agent ids the same way.
    let screen = hs.draw().await;
    assert!(screen.contains("user (default)"), "{screen}");
}

/// A provisioner whose listing fails like a Docker daemon that is down.
struct DownProvisioner(LocalProvisioner);

#[async_trait::async_trait]
impl Provisioner for DownProvisioner {
    fn kind(&self) -> wsbench::backend::BackendKind {
        wsbench::backend::BackendKind::Docker
    }
    fn capabilities(&self) -> wsbench::backend::ProvisionerCapabilities {
        self.0.capabilities()
    }
    async fn create(
        &self,
        spec: &wsbench::backend::ProvisionSpec,
    ) -> wsbench::backend::BackendResult<Arc<dyn wsbench::backend::Sandbox>> {
        self.0.create(spec).await
    }
    async fn find(
        &self,
        id: &str,
    ) -> wsbench::backend::BackendResult<Option<wsbench::backend::SandboxInfo>> {
        self.0.find(id).await
    }
    async fn attach(
        &self,
        info: &wsbench::backend::SandboxInfo,
    ) -> wsbench::backend::BackendResult<Arc<dyn wsbench::backend::Sandbox>> {
        self.0.attach(info).await
    }
    async fn suspend(&self, id: &str) -> wsbench::backend::BackendResult<()> {
        self.0.suspend(id).await
    }
    async fn resume(&self, id: &str) -> wsbench::backend::BackendResult<()> {
        self.0.resume(id).await
    }
    async fn destroy(&self, id: &str) -> wsbench::backend::BackendResult<()> {
        self.0.destroy(id).await
    }
    async fn list(&self) -> wsbench::backend::BackendResult<Vec<wsbench::backend::SandboxInfo>> {
        Err(wsbench::backend::BackendError::unreachable(
            "cannot connect to the Docker daemon at unix:///var/run/docker.sock \
             (is dockerd running? start it or set DOCKER_HOST) — the end of a long reason",
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_switch_follows_the_user_and_agent_or_says_whose_workspace_is_open() {
    let (_base, m, alpha) = manager().await;
    let other = tempfile::tempdir().unwrap();
    let earlier = factory(other.path())("other").unwrap();
    earlier
        .get_workspace("tester", "coder", "s-001", Some("ws-gamma"))
        .await
        .unwrap();
    earlier.shutdown().await.unwrap();
    let down = tempfile::tempdir().unwrap();
    let (other_base, down_base) = (other.path().to_path_buf(), down.path().to_path_buf());
    let mut o = with_manager(&m);
    o.user_id = "tester".into();
    o.agent = "coder".into();
    o.manager_factory = Some(Arc::new(move |name: &str| {
        let prov: Arc<dyn Provisioner> = match name {
            "docker" => Arc::new(DownProvisioner(LocalProvisioner::new(&down_base))),
            _ => Arc::new(LocalProvisioner::new(if name == "empty" {
                &down_base
            } else {
                &other_base
            })),
        };
        let opts = ManagerOptions::for_provisioner(prov.as_ref());
        Ok(WorkspaceManager::new(name, prov, opts, EventBus::default()))
    }));
    let mut hs = Harness::new(alpha, o, 120, 40).await;

    // The new profile has tester/coder's workspace: it is opened.
    palette(&mut hs, "profile other").await;
    until(&mut hs, "ws-gamma to open", |hs| {
        hs.app.cx.ws.id() == "ws-gamma"
    })
    .await;
    let header = hs.app.header_text(200);
    assert!(
        header.contains("profile other") && header.contains("ws ws-gamma │"),
        "{header}"
    );

    // A profile without one: the open workspace stays, and the header
    // says it is the previous profile's.
    palette(&mut hs, "profile empty").await;
    assert_eq!(hs.app.cx.ws.id(), "ws-gamma");
    let header = hs.app.header_text(200);
    assert!(
        header.contains("profile empty") && header.contains("ws ws-gamma (of profile other)"),
        "{header}"
    );
    assert!(
        logged(&mut hs)
            .iter()
            .any(|l| l.contains("profile empty has no workspace for user tester agent coder")),
    );

    // A profile whose backend is down: the header keeps profile and
    // workspace at 120 columns, the pane shows the whole reason wrapped,
    // and Logs has it.
    palette(&mut hs, "profile docker").await;
    let screen = hs.draw().await;
    let head = screen.lines().next().unwrap();
    assert!(
        head.contains("profile docker") && head.contains("ws ws-gamma"),
        "{head}"
    );
    hs.keys("0 z").await;
    let screen = hs.draw().await;
    assert!(screen.contains("the end of a long reason"), "{screen}");
    assert!(screen.contains("list of workspaces failed"), "{screen}");
    let log = logged(&mut hs);
    assert!(
        log.iter()
            .any(|l| l.contains("listing profile docker") && l.contains("the end of a long reason")),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_call_dialog_keeps_bad_json_and_says_why() {
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        assert!(!crate::support::in_ci(), "python3 is needed in CI");
        println!("SKIPPED: python3 not found");
        return;
    }
    let (_dir, ws) = fixture(|_| {}).await;
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_servers/fake.py");
    let decl =
        wsbench::engine::mcp::McpDecl::stdio("fake", "python3", vec![fake.display().to_string()]);
    ws.mcp().add(decl, "coder", "s-001", false).await.unwrap();
    let mut hs = Harness::new(ws.clone(), mcp_options(), 120, 40).await;
    hs.keys("esc 9 z G s").await;
    let t0 = std::time::Instant::now();
    let mut text = String::new();
    while t0.elapsed() < std::time::Duration::from_secs(20) {
        pump(&mut hs, 100).await;
        text = screen_now(&mut hs);
        if text.contains("ready") {
            break;
        }
    }
    assert!(text.contains("ready"), "{text}");
    hs.keys("enter c backspace backspace").await;
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    hs.type_text(r#"{"a": 1,}"#).await;
    hs.keys("enter").await;
    // The dialog is back with the text and the reason as its title.
    assert_eq!(hs.app.overlay_kind(), Some("prompt"));
    let text = hs.draw().await;
    assert!(text.contains(r#"{"a": 1,}"#), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("┏ ✗ arguments are not JSON")),
        "{text}"
    );
    let log = logged(&mut hs);
    assert!(
        log.iter().any(|l| l.contains("arguments are not JSON")),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_profile_is_named_once() {
    let (_base, m, alpha) = manager().await;
    let mut o = with_manager(&m);
    // What `open_profile` says about a cloud profile without its key.
    o.manager_factory = Some(Arc::new(|name: &str| {
        Err(anyhow::anyhow!(
            "profile `{name}`: no API key (set E2B_API_KEY)"
        ))
    }));
    let mut hs = Harness::new(alpha, o, 120, 40).await;
    palette(&mut hs, "profile e2b").await;
    let log = logged(&mut hs);
    assert!(
        log.iter()
            .any(|l| l == "profile `e2b`: no API key (set E2B_API_KEY)"),
        "{log:#?}"
    );
    assert!(!log.iter().any(|l| l.contains("profile e2b: ")), "{log:#?}");
}
