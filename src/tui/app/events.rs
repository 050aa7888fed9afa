//! Messages into the app (task results, file changes, stderr lines,
//! engine events), the clock, and waiting for work to end (quit,
//! shutdown, tests settling).

use std::time::{Duration, Instant};

use super::overlay::Overlay;
use super::{APP_DIALOG, App};
use crate::engine::events::{Envelope, Event, Received, WorkspaceState};
use crate::tui::action::{AppMsg, DialogTag, Effect, Level, LogLine, PaneEvent};
use crate::tui::panes;

impl App {
    /// Handles one message from the channel.
    pub fn on_msg(&mut self, msg: AppMsg) {
        match msg {
            AppMsg::Input(ev) => self.on_input(ev),
            AppMsg::Task(task) => {
                // A task of a workspace the app has left (started before
                // `:ws` switched) must not land in the new one's panes.
                if task.generation == self.cx.generation {
                    self.with_pane(task.pane, |p, cx| p.on_task(task, cx));
                }
            }
            AppMsg::File { generation, change } => {
                // A change of a workspace the app has left (queued before
                // its watch stopped) must not land in the new tree.
                if generation == self.watch_generation {
                    self.broadcast(&PaneEvent::File(&change));
                }
            }
            AppMsg::Stderr(line) => {
                let level = stderr_level(&line);
                // A library may colour its own lines whatever the
                // subscriber says: the pane shows the text only.
                self.log(LogLine::now(level, "stderr", strip_escapes(&line)));
            }
            AppMsg::Osc52(text) => {
                let max = self.cx.config.osc52_max_bytes;
                self.osc52(text, max);
            }
            AppMsg::Toast(level, msg) => self.apply(Effect::Toast(level, msg)),
        }
    }

    /// Handles one engine event.
    pub fn on_engine(&mut self, r: Received) {
        match r {
            Received::Event(env) => {
                // Workspaces of one manager share its bus: only the open
                // one's state belongs in the header.
                if let Event::Workspace { state } = &env.event
                    && env.workspace == self.cx.ws.id()
                {
                    self.on_own_state(state);
                }
                self.on_envelope(&env);
            }
            Received::Missed(n) => self.broadcast(&PaneEvent::Missed(n)),
        }
    }

    /// The open workspace's state in the header. A recovery's notice is
    /// long (what happened, whether files were kept): it is shown once as
    /// a toast (Logs has it too), and the header says only `replaced` or
    /// `restarted` for [`RECOVERY_SHOWN`], then `ready` again, so the
    /// header keeps its ids (issue 15's trial: the notice stayed there and
    /// pushed out the workspace, user, agent and session).
    fn on_own_state(&mut self, state: &WorkspaceState) {
        let now = (self.cx.clock)();
        let passing = match state {
            WorkspaceState::Replaced { notice } => Some(("replaced", notice)),
            WorkspaceState::Restarted { notice } => Some(("restarted", notice)),
            _ => None,
        };
        match passing {
            Some((word, notice)) => {
                self.cx.header.state = word.to_string();
                self.cx.header.state_until = Some(now + RECOVERY_SHOWN);
                self.toast =
                    Some(self.new_toast(Level::Warn, format!("workspace {word}: {notice}")));
            }
            None => {
                self.cx.header.state = state_label(state);
                self.cx.header.state_until = None;
            }
        }
    }

    pub(super) fn on_envelope(&mut self, env: &Envelope) {
        self.broadcast(&PaneEvent::Engine(env));
    }

    /// Time-based work: toast expiry (by the app's clock), the
    /// once-a-second tick.
    pub fn tick(&mut self) {
        let now = (self.cx.clock)();
        if self.toast.as_ref().is_some_and(|t| t.left(now).is_zero()) {
            self.toast = None;
        }
        if self.cx.header.state_until.is_some_and(|t| now >= t) {
            self.cx.header.state = "ready".into();
            self.cx.header.state_until = None;
        }
        if self.last_tick.elapsed() >= Duration::from_secs(1) {
            self.last_tick = Instant::now();
            self.broadcast(&PaneEvent::Tick);
        }
    }

    /// When the next timed change is due (toast expiry or tick). The
    /// toast's time left is read on the app's clock and mapped onto the
    /// monotonic one the loop sleeps on.
    pub fn next_deadline(&self) -> Instant {
        let tick = self.last_tick + Duration::from_secs(1);
        match &self.toast {
            Some(t) => tick.min(Instant::now() + t.left((self.cx.clock)())),
            None => tick,
        }
    }

    /// The toast on screen, if any: its level and text.
    pub fn toast(&self) -> Option<(Level, &str)> {
        self.toast.as_ref().map(|t| (t.level, t.msg.as_str()))
    }

    /// Takes every message already queued without waiting; returns how
    /// many were handled.
    pub fn drain(&mut self) -> usize {
        let mut n = 0;
        while let Ok(m) = self.rx.try_recv() {
            self.on_msg(m);
            n += 1;
            if n >= 10_000 {
                break;
            }
        }
        n
    }

    /// Handles at most `n` queued messages without waiting; returns how
    /// many were handled (`n`: more may be queued). The terminal loop
    /// calls it in slices so it can look at input in between and draw on
    /// time.
    pub fn drain_some(&mut self, n: usize) -> usize {
        for i in 0..n {
            match self.rx.try_recv() {
                Ok(m) => self.on_msg(m),
                Err(_) => return i,
            }
        }
        n
    }

    /// Waits for the next message (for the loop's `select!`).
    pub async fn recv(&mut self) -> Option<AppMsg> {
        self.rx.recv().await
    }

    /// Quits, or first asks when a command or an agent is still running
    /// (quitting kills it).
    pub fn request_quit(&mut self) {
        let busy: Vec<String> = self.panes.iter().filter_map(|p| p.busy()).collect();
        if busy.is_empty() {
            self.quit = true;
            return;
        }
        self.overlay = Some(Overlay::Confirm {
            pane: APP_DIALOG,
            message: format!("{} — kill it and quit? y/n", busy.join(", ")),
            tag: DialogTag::Quit,
        });
    }

    /// Whether a pane drawn in the last frame left work for the next one
    /// ([`crate::tui::pane::Pane::needs_frame`]): the loop then draws
    /// again at the frame rate without waiting for a message. Panes off
    /// screen are not asked (they are not drawn, so they would ask
    /// forever).
    pub fn needs_frame(&self) -> bool {
        self.panes
            .iter()
            .any(|p| p.needs_frame() && self.areas.iter().any(|(id, _)| *id == p.id()))
    }

    /// Whether any pane still runs a command or an agent.
    pub fn is_busy(&self) -> bool {
        self.panes.iter().any(|p| p.busy().is_some())
    }

    /// Stops every running command (its process tree is killed and the
    /// journal gets an `interrupted` entry) and agent, then handles
    /// messages until they have ended or `timeout` passes. Called on quit,
    /// SIGTERM and SIGHUP before the terminal is restored, so nothing is
    /// left orphaned or unjournalled.
    pub async fn shutdown(&mut self, timeout: Duration) {
        for i in 0..self.panes.len() {
            self.panes[i].shutdown(&mut self.cx);
        }
        self.apply_effects();
        let deadline = Instant::now() + timeout;
        loop {
            self.drain();
            if !self.is_busy() || Instant::now() >= deadline {
                return;
            }
            match tokio::time::timeout(Duration::from_millis(20), self.rx.recv()).await {
                Ok(Some(m)) => self.on_msg(m),
                Ok(None) => return,
                Err(_) => {}
            }
        }
    }

    /// Processes messages until no task is in flight and nothing is
    /// queued, or `timeout` passes (tests).
    pub async fn settle(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            self.drain();
            if self.cx.inflight() == 0 && self.rx.is_empty() {
                // Tasks may have queued effects through messages already
                // handled; one more short wait catches stragglers.
                tokio::time::sleep(Duration::from_millis(5)).await;
                if self.cx.inflight() == 0 && self.rx.is_empty() {
                    return;
                }
            }
            if Instant::now() >= deadline {
                return;
            }
            match tokio::time::timeout(Duration::from_millis(20), self.rx.recv()).await {
                Ok(Some(m)) => self.on_msg(m),
                Ok(None) => return,
                Err(_) => {}
            }
        }
    }
}

/// How long the header says `replaced` / `restarted` after a recovery
/// (the Workspaces pane's STATE cell shows it as long).
const RECOVERY_SHOWN: Duration = Duration::from_secs(60);

fn state_label(s: &WorkspaceState) -> String {
    match s {
        // Lease counts (the app's own lease included) and a reattach say
        // nothing about the connection: the workspace is ready.
        WorkspaceState::Leased | WorkspaceState::Idle | WorkspaceState::Reattached => {
            "ready".into()
        }
        // A new sandbox is set up next: still on the way to `ready`.
        WorkspaceState::Created { .. } => "provisioning".into(),
        other => panes::logs::workspace_state(other),
    }
}

/// `line` without escape sequences or control characters (SGR colours
/// included).
fn strip_escapes(line: &str) -> String {
    let mut p = crate::tui::widgets::ansi::AnsiParser::new();
    let mut out = String::new();
    p.feed(line.as_bytes(), &mut |l| out.push_str(&l.text));
    out.push_str(&p.partial().text);
    out
}

fn stderr_level(line: &str) -> Level {
    let head: String = line.chars().take(64).collect();
    let stripped = strip_escapes(&head);
    for (needle, level) in [
        ("ERROR", Level::Error),
        ("WARN", Level::Warn),
        ("INFO", Level::Info),
        ("DEBUG", Level::Debug),
        ("TRACE", Level::Debug),
    ] {
        if stripped.contains(needle) {
            return level;
        }
    }
    Level::Warn
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::backend::local::LocalSandbox;
    use crate::engine::sessions::SessionSummary;
    use crate::engine::{EventBus, Workspace, WorkspaceConfig};
    use crate::tui::action::{AppMsg, TaskResult};
    use crate::tui::app::{App, AppOptions};
    use crate::tui::config::TuiConfig;
    use crate::tui::panes::sessions::{self, Loaded, SessionsPane};

    async fn open(dir: &std::path::Path) -> Arc<Workspace> {
        let sb = LocalSandbox::open(dir).unwrap();
        Workspace::open(
            Arc::new(sb),
            WorkspaceConfig::default(),
            EventBus::default(),
        )
        .await
        .unwrap()
    }

    fn listing(id: &str) -> Loaded {
        Loaded(Ok(vec![SessionSummary {
            id: id.into(),
            last_activity: None,
            tool_calls: 0,
            offloads: 0,
            context_bytes: 0,
        }]))
    }

    fn listed(app: &mut App) -> Vec<String> {
        app.pane_call::<SessionsPane, _>(sessions::ID, |p, _| {
            p.items().iter().map(|s| s.id.clone()).collect()
        })
        .unwrap()
    }

    /// A slow listing of the workspace `:ws` left must not land in the
    /// new workspace's Sessions pane; one of the current workspace does.
    #[tokio::test]
    async fn a_task_result_from_before_a_workspace_switch_is_dropped() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut opts = AppOptions::new(TuiConfig::default());
        opts.watch = false;
        let mut app = App::new(open(a.path()).await, opts);
        app.settle(Duration::from_secs(5)).await;
        let before = app.cx.generation;
        app.switch_workspace(open(b.path()).await);
        app.settle(Duration::from_secs(5)).await;
        assert_ne!(app.cx.generation, before);

        let stale = TaskResult::new(sessions::ID, before, listing("from-the-old-workspace"));
        app.on_msg(AppMsg::Task(stale));
        assert!(!listed(&mut app).contains(&"from-the-old-workspace".to_string()));

        let current = TaskResult::new(sessions::ID, app.cx.generation, listing("s-now"));
        app.on_msg(AppMsg::Task(current));
        assert!(listed(&mut app).contains(&"s-now".to_string()));
    }

    /// `WSBENCH_LOG` lines of a library that colours its output reach
    /// the Logs pane as text.
    #[test]
    fn captured_stderr_loses_its_escape_codes() {
        let raw = "\u{1b}[2m2026-12-03T13:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m rmcp: ready";
        assert_eq!(
            super::strip_escapes(raw),
            "2026-12-03T13:00:00Z  INFO rmcp: ready"
        );
        assert_eq!(super::stderr_level(raw), crate::tui::action::Level::Info);
    }
}
