//! The app: panes in a split layout, focus, overlays, and the routing of
//! keys, mouse, paste, engine events and task results.
//!
//! [`App`] holds no terminal: it takes events and draws into a
//! [`Frame`], so tests drive it on ratatui's `TestBackend` and the real
//! event loop (in [`crate::tui::run`]) only adds the terminal. Requests
//! that need the real terminal (a shell, OSC 52, mouse capture) are queued
//! as [`HostRequest`]s for the loop.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::crossterm::event::{
    Event as TermEvent, KeyEvent, KeyEventKind, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use tokio::sync::mpsc;

use super::action::{AppMsg, Effect, Level, LogLine, PaneEvent};
use super::config::{ClipboardMode, TuiConfig};
use super::keymap::{ActionSpec, GLOBAL, KeyChord, KeyMap};
use super::panes::help::HelpOverlay;
use super::panes::palette::{Completions, PaletteCommand, PaletteOverlay};
use super::panes::{self, Clock, Ctx, HeaderInfo, Pane};
use super::theme::Theme;
use super::widgets::line::LineEdit;
use super::widgets::text;
use crate::engine::Workspace;
use crate::engine::events::{Envelope, Event, Received, WorkspaceState};

/// The app's own actions.
pub const ACTIONS: &[ActionSpec] = &[
    spec("app.quit", "quit", &["q", "ctrl-q"], false, true),
    spec("app.help", "help", &["?", "f1"], false, true),
    spec("app.palette", "command palette", &[":"], false, true),
    // Before the focus and zoom hints: the full-screen Agent pane has no
    // place in the layout, so the footer is where users find it.
    spec("app.agent", "Agent pane", &["A"], false, true),
    spec("app.focus_next", "next pane", &["tab"], false, true),
    spec(
        "app.focus_prev",
        "previous pane",
        &["shift-tab"],
        false,
        false,
    ),
    spec("app.zoom", "zoom pane", &["z"], false, true),
    spec("app.wider", "widen left column", &[">"], false, false),
    spec("app.narrower", "narrow left column", &["<"], false, false),
    spec("app.taller", "grow pane height", &["+", "="], false, false),
    spec("app.shorter", "shrink pane height", &["-"], false, false),
    spec("app.focus_sessions", "focus Sessions", &["1"], false, false),
    spec("app.focus_files", "focus Files", &["2"], false, false),
    spec("app.focus_skills", "focus Skills", &["3"], false, false),
    spec("app.focus_offload", "focus Offload", &["4"], false, false),
    spec("app.focus_command", "focus Command", &["5"], false, false),
    spec("app.focus_logs", "focus Logs", &["6"], false, false),
    spec(
        "app.focus_workspaces",
        "focus Workspaces",
        &["0"],
        false,
        false,
    ),
    spec("app.focus_mcp", "focus MCP", &["9"], false, false),
    spec("app.mouse", "toggle mouse capture", &["M"], false, false),
    spec("app.shell", "shell in the workspace", &["!"], true, false),
    spec(
        "app.suspend",
        "suspend to the shell",
        &["ctrl-z"],
        false,
        false,
    ),
    spec("app.redraw", "redraw the screen", &["ctrl-l"], false, false),
];

const fn spec(
    name: &'static str,
    desc: &'static str,
    keys: &'static [&'static str],
    dangerous: bool,
    hint: bool,
) -> ActionSpec {
    ActionSpec {
        name,
        context: GLOBAL,
        desc,
        keys,
        dangerous,
        hint,
    }
}

/// How long a toast stays.
const TOAST_TTL: Duration = Duration::from_secs(4);

/// Below this size only the focused pane is drawn.
const MIN_SPLIT_WIDTH: u16 = 60;
const MIN_SPLIT_HEIGHT: u16 = 14;

/// A split tree of pane ids.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// One pane.
    Leaf(&'static str),
    /// Two parts side by side (`Horizontal`) or stacked (`Vertical`);
    /// `pct` is the first part's share in percent.
    Split {
        /// Direction.
        dir: Direction,
        /// First part's share, 10..=90.
        pct: u16,
        /// First part.
        a: Box<Node>,
        /// Second part.
        b: Box<Node>,
    },
}

impl Node {
    fn split(dir: Direction, pct: u16, a: Node, b: Node) -> Node {
        Node::Split {
            dir,
            pct: pct.clamp(10, 90),
            a: Box::new(a),
            b: Box::new(b),
        }
    }

    /// Pane ids in reading order.
    pub fn leaves(&self, out: &mut Vec<&'static str>) {
        match self {
            Node::Leaf(id) => out.push(id),
            Node::Split { a, b, .. } => {
                a.leaves(out);
                b.leaves(out);
            }
        }
    }

    fn contains(&self, id: &str) -> bool {
        match self {
            Node::Leaf(l) => *l == id,
            Node::Split { a, b, .. } => a.contains(id) || b.contains(id),
        }
    }

    /// Changes the share of the innermost `dir` split around `id` by
    /// `delta` (from the side of `id`: positive grows it).
    fn resize(&mut self, id: &str, dir: Direction, delta: i16) -> bool {
        let Node::Split {
            dir: d, pct, a, b, ..
        } = self
        else {
            return false;
        };
        let in_a = a.contains(id);
        let child = if in_a { a } else { b };
        if child.resize(id, dir, delta) {
            return true;
        }
        if *d == dir && (in_a || child.contains(id)) {
            let signed = if in_a { delta } else { -delta };
            *pct = (*pct as i16 + signed).clamp(10, 90) as u16;
            return true;
        }
        false
    }

    fn split_at_path(&mut self, path: &[bool]) -> Option<&mut Node> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => match self {
                Node::Split { a, b, .. } => {
                    if *first {
                        b.split_at_path(rest)
                    } else {
                        a.split_at_path(rest)
                    }
                }
                Node::Leaf(_) => None,
            },
        }
    }
}

/// The built-in layout: Workspaces / Sessions / Skills / Offload on the
/// left; Files beside MCP, then Command and Logs on the right. New panes
/// go in here.
pub fn default_layout(cfg: &TuiConfig) -> Node {
    use Direction::{Horizontal, Vertical};
    let left = Node::split(
        Vertical,
        22,
        Node::Leaf(panes::workspaces::ID),
        Node::split(
            Vertical,
            30,
            Node::Leaf(panes::sessions::ID),
            Node::split(
                Vertical,
                45,
                Node::Leaf(panes::skills::ID),
                Node::Leaf(panes::offload::ID),
            ),
        ),
    );
    let right = Node::split(
        Vertical,
        cfg.layout.files,
        Node::split(
            Horizontal,
            60,
            Node::Leaf(panes::files::ID),
            Node::Leaf(panes::mcp::ID),
        ),
        Node::split(
            Vertical,
            cfg.layout.command,
            Node::Leaf(panes::command::ID),
            Node::Leaf(panes::logs::ID),
        ),
    );
    Node::split(Horizontal, cfg.layout.left, left, right)
}

/// A border that can be dragged with the mouse.
#[derive(Debug, Clone)]
struct SplitHandle {
    path: Vec<bool>,
    dir: Direction,
    area: Rect,
    /// Column (horizontal split) or row (vertical) of the border.
    at: u16,
}

/// An overlay drawn over everything, taking every key.
enum Overlay {
    Help(HelpOverlay),
    Palette(PaletteOverlay),
    Confirm {
        pane: &'static str,
        message: String,
        tag: String,
    },
    Prompt {
        pane: &'static str,
        title: String,
        input: LineEdit,
        tag: String,
    },
}

/// What the real terminal loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRequest {
    /// Run an interactive shell in this host directory, then come back.
    Shell(std::path::PathBuf),
    /// Stop the process (SIGTSTP) after restoring the terminal.
    Suspend,
    /// Write an OSC 52 clipboard sequence.
    Osc52(String),
    /// Turn mouse capture on or off.
    Mouse(bool),
    /// Clear and redraw everything.
    Redraw,
}

/// Options the app starts with.
#[derive(Clone)]
pub struct AppOptions {
    /// The `[tui]` config.
    pub config: TuiConfig,
    /// Remove destructive actions.
    pub read_only: bool,
    /// Theme (already resolved, NO_COLOR applied).
    pub theme: Theme,
    /// Agent id.
    pub agent: String,
    /// Session id to start on.
    pub session: String,
    /// Profile name for the header.
    pub profile: String,
    /// User name for the header.
    pub user: String,
    /// User id new workspaces are created for (`--user`).
    pub user_id: String,
    /// "Now" (fixed in tests).
    pub clock: Clock,
    /// Directory of user themes (`$XDG_CONFIG_HOME/wsbench/themes`).
    pub theme_dir: Option<std::path::PathBuf>,
    /// Problems found loading the config, shown at start.
    pub config_problems: Vec<String>,
    /// Start the file watch (off in snapshot tests for determinism).
    pub watch: bool,
    /// The workspace manager of the profile (`None`: one directory only;
    /// the Workspaces pane says so and `:ws` is refused).
    pub manager: Option<crate::manager::WorkspaceManager>,
    /// Makes another profile's manager for `:profile <name>`.
    pub manager_factory: Option<panes::ManagerFactory>,
    /// Profile names `:profile` completes.
    pub profiles: Vec<String>,
    /// Built-in profiles left out of [`AppOptions::profiles`] because
    /// they cannot work here, with the reason (`needs E2B_API_KEY`).
    pub unavailable_profiles: Vec<(String, String)>,
}

impl AppOptions {
    /// Defaults for a workspace: dark theme, session `default`.
    pub fn new(config: TuiConfig) -> Self {
        AppOptions {
            config,
            read_only: false,
            theme: Theme::default(),
            agent: String::new(),
            session: "default".into(),
            profile: "local".into(),
            user: user_name(),
            user_id: String::new(),
            clock: Arc::new(std::time::SystemTime::now),
            theme_dir: None,
            config_problems: Vec::new(),
            watch: true,
            manager: None,
            manager_factory: None,
            profiles: Vec::new(),
            unavailable_profiles: Vec::new(),
        }
    }
}

/// The user's login name: `$USER`, `$LOGNAME`, else the numeric uid.
pub fn user_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            return v;
        }
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    format!("uid {}", unsafe { libc::getuid() })
}

/// The whole TUI state.
pub struct App {
    /// Shared state the panes see.
    pub cx: Ctx,
    panes: Vec<Box<dyn Pane>>,
    layout: Node,
    focus: &'static str,
    modal: Option<&'static str>,
    zoom: bool,
    overlay: Option<Overlay>,
    /// The overlay F1 help was opened over (palette, dialog): back when
    /// help closes.
    behind_help: Option<Overlay>,
    toast: Option<(Level, String, Instant)>,
    areas: Vec<(&'static str, Rect)>,
    handles: Vec<SplitHandle>,
    drag: Option<usize>,
    mouse: bool,
    theme_dir: Option<std::path::PathBuf>,
    requests: Vec<HostRequest>,
    rx: mpsc::Receiver<AppMsg>,
    /// Set when the user quits.
    pub quit: bool,
    last_tick: Instant,
    /// Whether to watch the open workspace's files at all.
    watch_files: bool,
    /// The watch of the open workspace; replaced (which stops the old
    /// one) on a workspace switch.
    watch: Option<panes::files::WatchHandle>,
    /// Generation of the current watch: queued changes of an older one
    /// are dropped.
    watch_generation: u64,
    /// The app's lease on the open workspace, when a manager has it open:
    /// the sweeper never evicts a workspace someone is looking at.
    lease: Option<crate::manager::Lease>,
    /// A replaced manager (`:profile`) that still owns the open workspace
    /// (and issued [`App::lease`]); shut down when the app leaves it.
    retiring: Option<crate::manager::WorkspaceManager>,
    /// The current manager was built by the app (`:profile`), not given
    /// in [`AppOptions`]: the app shuts it down on quit.
    own_manager: bool,
}

/// The pseudo pane id of dialogs the app itself answers.
const APP_DIALOG: &str = "app";

/// Tag of the "kill it and quit?" dialog.
const QUIT_TAG: &str = "quit";

/// How long quitting waits for running commands and agents to end.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// Capacity of the channel tasks report on; senders wait when it is full,
/// so a flood of output slows its producer instead of growing memory.
pub const CHANNEL_CAPACITY: usize = 1024;

impl App {
    /// Builds the app on an open workspace and starts every pane's first
    /// load (on tokio tasks: call inside a runtime).
    pub fn new(ws: Arc<Workspace>, opts: AppOptions) -> App {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        Self::with_channel(ws, opts, tx, rx)
    }

    /// Like [`App::new`] with a given channel (the terminal loop feeds
    /// input through the same channel).
    pub fn with_channel(
        ws: Arc<Workspace>,
        opts: AppOptions,
        tx: mpsc::Sender<AppMsg>,
        rx: mpsc::Receiver<AppMsg>,
    ) -> App {
        let specs = panes::all_actions();
        let (keymap, mut problems) =
            KeyMap::build(&specs, &opts.config.key_overrides(), opts.read_only);
        problems.extend(opts.config_problems.iter().cloned());
        let cx = Ctx {
            ws: ws.clone(),
            tx,
            session: opts.session.clone(),
            agent: opts.agent.clone(),
            user_id: opts.user_id.clone(),
            read_only: opts.read_only,
            theme: opts.theme.clone(),
            keymap,
            config: opts.config.clone(),
            header: HeaderInfo {
                profile: opts.profile.clone(),
                ws_profile: opts.profile.clone(),
                user: opts.user.clone(),
                state: if ws.is_alive() {
                    "ready".into()
                } else {
                    "closed".into()
                },
            },
            clock: opts.clock.clone(),
            effects: Vec::new(),
            inflight: Arc::new(AtomicUsize::new(0)),
            sessions: Vec::new(),
            workspace_ids: Vec::new(),
            workspace_notes: Vec::new(),
            profiles: opts.profiles.clone(),
            unavailable_profiles: opts.unavailable_profiles.clone(),
            manager: opts.manager.clone(),
            manager_factory: opts.manager_factory.clone(),
            pending_ws: None,
            replaced_managers: Vec::new(),
        };
        let panes = panes::registry(&cx);
        let layout = default_layout(&opts.config);
        let mut app = App {
            cx,
            panes,
            layout,
            focus: panes::command::ID,
            modal: None,
            zoom: false,
            overlay: None,
            behind_help: None,
            toast: None,
            areas: Vec::new(),
            handles: Vec::new(),
            drag: None,
            mouse: opts.config.mouse,
            theme_dir: opts.theme_dir.clone(),
            requests: Vec::new(),
            rx,
            quit: false,
            last_tick: Instant::now(),
            watch_files: opts.watch,
            watch: None,
            watch_generation: 0,
            lease: None,
            retiring: None,
            own_manager: false,
        };
        app.lease = app.lease_open_workspace();
        for i in 0..app.panes.len() {
            app.panes[i].init(&mut app.cx);
        }
        app.restart_watch();
        for p in problems {
            app.cx.effect(Effect::Toast(Level::Error, p));
        }
        if opts.read_only {
            app.cx.effect(Effect::Log(LogLine::now(
                Level::Info,
                "tui",
                "read-only mode: destructive actions are disabled",
            )));
        }
        app.apply_effects();
        app.blur_unfocused();
        app
    }

    /// The focused pane id.
    pub fn focus(&self) -> &'static str {
        self.modal.unwrap_or(self.focus)
    }

    /// The pane shown full screen (editor, viewer), if any.
    pub fn modal(&self) -> Option<&'static str> {
        self.modal
    }

    /// Whether an overlay (help, palette, dialog) is open; its kind.
    pub fn overlay_kind(&self) -> Option<&'static str> {
        self.overlay.as_ref().map(|o| match o {
            Overlay::Help(_) => "help",
            Overlay::Palette(_) => "palette",
            Overlay::Confirm { .. } => "confirm",
            Overlay::Prompt { .. } => "prompt",
        })
    }

    /// Requests for the real terminal, taken by the loop.
    pub fn take_requests(&mut self) -> Vec<HostRequest> {
        std::mem::take(&mut self.requests)
    }

    /// Whether mouse capture should be on.
    pub fn mouse_enabled(&self) -> bool {
        self.mouse
    }

    /// A pane by id.
    pub fn pane(&self, id: &str) -> Option<&dyn Pane> {
        self.panes.iter().find(|p| p.id() == id).map(|p| p.as_ref())
    }

    /// A pane by id, mutable (tests reach into pane state through this).
    pub fn pane_mut(&mut self, id: &str) -> Option<&mut Box<dyn Pane>> {
        self.panes.iter_mut().find(|p| p.id() == id)
    }

    /// Calls `f` on the pane `id` as its concrete type `T` with the shared
    /// context, then applies the effects it queued; `None` if there is no
    /// such pane of that type.
    pub fn pane_call<T: 'static, R>(
        &mut self,
        id: &str,
        f: impl FnOnce(&mut T, &mut Ctx) -> R,
    ) -> Option<R> {
        let i = self.pane_index(id)?;
        let pane = self.panes[i].as_any_mut().downcast_mut::<T>()?;
        let r = f(pane, &mut self.cx);
        self.apply_effects();
        Some(r)
    }

    /// Where a pane was drawn last (the whole pane, border included).
    pub fn area_of(&self, id: &str) -> Option<Rect> {
        self.areas.iter().find(|(p, _)| *p == id).map(|(_, r)| *r)
    }

    fn pane_index(&self, id: &str) -> Option<usize> {
        self.panes.iter().position(|p| p.id() == id)
    }

    /// Calls `f` on one pane, then applies the effects it queued.
    fn with_pane<R>(
        &mut self,
        id: &str,
        f: impl FnOnce(&mut dyn Pane, &mut Ctx) -> R,
    ) -> Option<R> {
        let i = self.pane_index(id)?;
        let r = f(self.panes[i].as_mut(), &mut self.cx);
        self.apply_effects();
        Some(r)
    }

    fn broadcast(&mut self, ev: &PaneEvent<'_>) {
        for i in 0..self.panes.len() {
            self.panes[i].on_event(ev, &mut self.cx);
        }
        self.apply_effects();
    }

    fn apply_effects(&mut self) {
        let mut guard = 0;
        while !self.cx.effects.is_empty() && guard < 64 {
            guard += 1;
            let effects = std::mem::take(&mut self.cx.effects);
            for e in effects {
                self.apply(e);
            }
        }
        for old in std::mem::take(&mut self.cx.replaced_managers) {
            self.own_manager = true;
            self.retire_manager(old);
        }
        if let Some(ws) = self.cx.pending_ws.take() {
            self.switch_workspace(ws);
        }
        self.blur_unfocused();
    }

    /// Takes the keyboard from every pane but the focused one (see
    /// [`Pane::blur`]): typing mode never outlives the focus, and a pane
    /// rebuilt by a workspace switch does not start with the keyboard
    /// unless it has the focus. In read-only mode the Command prompt
    /// never takes the keyboard (nothing could run).
    fn blur_unfocused(&mut self) {
        let focus = self.focus();
        let read_only = self.cx.read_only;
        for p in &mut self.panes {
            let id = p.id();
            if p.text_input_active() && (id != focus || (read_only && id == panes::command::ID)) {
                p.blur();
            }
        }
    }

    /// A lease on the open workspace from the current manager (`None`
    /// when it has no such workspace open, as with `--workdir`).
    fn lease_open_workspace(&self) -> Option<crate::manager::Lease> {
        let m = self.cx.manager.as_ref()?;
        m.lease(self.cx.ws.id())
    }

    /// Deals with a manager `:profile` replaced: one that owns the open
    /// workspace keeps it (and its lease, sweeper and keep-alive) until
    /// the app leaves it, and closes its other workspaces now; any other
    /// is shut down now (leases released, tasks stopped, workspaces
    /// closed).
    fn retire_manager(&mut self, old: crate::manager::WorkspaceManager) {
        if self.lease.is_some() && self.retiring.is_none() {
            let keep = self.cx.ws.id().to_string();
            let m = old.clone();
            self.retiring = Some(old);
            let tx = self.cx.tx.clone();
            tokio::spawn(async move {
                for id in m.open_ids().into_iter().filter(|id| *id != keep) {
                    if let Err(e) = m.close(&id).await {
                        let msg = format!("closing workspace {id} of profile {}: {e}", m.profile());
                        let _ = tx.send(AppMsg::Toast(Level::Warn, msg)).await;
                    }
                }
            });
        } else {
            self.shutdown_manager(old);
        }
    }

    /// Shuts `m` down on a task; a failure comes back as a toast.
    fn shutdown_manager(&self, m: crate::manager::WorkspaceManager) {
        let tx = self.cx.tx.clone();
        tokio::spawn(async move {
            if let Err(e) = m.shutdown().await {
                let msg = format!("shutting down profile {}: {e}", m.profile());
                let _ = tx.send(AppMsg::Toast(Level::Warn, msg)).await;
            }
        });
    }

    /// A replaced manager still waiting for the app to leave its
    /// workspace (after `:profile`), if any.
    pub fn retiring_manager(&self) -> Option<&crate::manager::WorkspaceManager> {
        self.retiring.as_ref()
    }

    /// Releases the app's lease and shuts down the managers the app
    /// built or replaced (quit). The manager given in [`AppOptions`] is
    /// the caller's, and stays up while it is current.
    pub async fn release_managers(&mut self) {
        self.lease = None;
        let mut done = Vec::new();
        if let Some(m) = self.retiring.take() {
            done.push(m);
        }
        if self.own_manager
            && let Some(m) = self.cx.manager.clone()
        {
            done.push(m);
        }
        for m in done {
            if let Err(e) = m.shutdown().await {
                tracing::warn!("shutting down profile {}: {e}", m.profile());
            }
        }
    }

    /// Reopens every pane on `ws` (the Workspaces pane's open, `:ws`):
    /// pane state starts afresh; focus, layout, session and agent stay.
    /// The previous workspace is left to its manager (which evicts or
    /// closes it); the terminal loop resubscribes to the new bus.
    pub fn switch_workspace(&mut self, ws: Arc<Workspace>) {
        self.cx.header.state = if ws.is_alive() {
            "ready".into()
        } else {
            "closed".into()
        };
        self.cx.ws = ws;
        // Workspaces are opened through the current manager.
        self.cx.header.ws_profile = self.cx.header.profile.clone();
        // Leave the previous workspace to its manager: release the lease
        // (so its idle clock starts), and shut down a replaced manager
        // that only waited for the app to leave it.
        self.lease = None;
        if let Some(old) = self.retiring.take() {
            self.shutdown_manager(old);
        }
        self.lease = self.lease_open_workspace();
        self.cx.sessions.clear();
        self.cx.workspace_ids.clear();
        self.cx.workspace_notes.clear();
        self.modal = None;
        self.overlay = None;
        // Rebuilt panes keep the typing mode the old ones had: a switch
        // made from a list must not hand the keyboard to the prompt.
        let typing: Vec<&'static str> = self
            .panes
            .iter()
            .filter(|p| p.text_input_active())
            .map(|p| p.id())
            .collect();
        self.panes = panes::registry(&self.cx);
        for p in &mut self.panes {
            if !typing.contains(&p.id()) {
                p.blur();
            }
        }
        for i in 0..self.panes.len() {
            self.panes[i].init(&mut self.cx);
        }
        self.restart_watch();
        let id = self.cx.ws.id().to_string();
        self.cx.effect(Effect::Log(LogLine::now(
            Level::Info,
            "tui",
            format!("switched to workspace {id}"),
        )));
        // Effects of the new panes' init (errors, toasts) apply here.
        let effects = std::mem::take(&mut self.cx.effects);
        for e in effects {
            self.apply(e);
        }
        self.blur_unfocused();
    }

    /// Stops the current file watch and, when watching is on, starts one
    /// on the open workspace under a new generation.
    fn restart_watch(&mut self) {
        self.watch = None;
        self.watch_generation += 1;
        if self.watch_files {
            self.watch = Some(panes::files::start_watch(&self.cx, self.watch_generation));
        }
    }

    /// The running file watch, if any (tests check a switch stopped the
    /// previous one).
    pub fn file_watch(&self) -> Option<&panes::files::WatchHandle> {
        self.watch.as_ref()
    }

    fn log(&mut self, line: LogLine) {
        for i in 0..self.panes.len() {
            self.panes[i].on_event(&PaneEvent::Log(&line), &mut self.cx);
        }
    }

    fn apply(&mut self, e: Effect) {
        match e {
            Effect::Toast(level, msg) => {
                self.log(LogLine::now(level, "tui", msg.clone()));
                self.toast = Some((level, msg, Instant::now()));
            }
            Effect::Log(line) => self.log(line),
            Effect::SelectSession(id) => {
                if crate::engine::layout::check_session_id(&id).is_err() {
                    self.toast = Some((
                        Level::Error,
                        format!("invalid session id `{id}`"),
                        Instant::now(),
                    ));
                    return;
                }
                self.cx.session = id;
                for i in 0..self.panes.len() {
                    self.panes[i].on_event(&PaneEvent::SessionChanged, &mut self.cx);
                }
            }
            Effect::OpenEditor(path) => {
                if let Some(i) = self.pane_index(panes::editor::ID) {
                    self.panes[i].on_event(&PaneEvent::Open(&path), &mut self.cx);
                    self.modal = Some(panes::editor::ID);
                }
            }
            Effect::OpenViewer(doc) => {
                if let Some(i) = self.pane_index(panes::viewer::ID) {
                    self.panes[i].on_event(&PaneEvent::Show(&doc), &mut self.cx);
                    self.modal = Some(panes::viewer::ID);
                }
            }
            Effect::OpenLink(target) => {
                if let Some(i) = self.pane_index(panes::viewer::ID) {
                    self.panes[i].on_event(&PaneEvent::Open(&target), &mut self.cx);
                    self.modal = Some(panes::viewer::ID);
                }
            }
            Effect::CloseModal => self.modal = None,
            Effect::Confirm { pane, message, tag } => {
                self.overlay = Some(Overlay::Confirm { pane, message, tag })
            }
            Effect::Prompt {
                pane,
                title,
                initial,
                tag,
            } => {
                self.overlay = Some(Overlay::Prompt {
                    pane,
                    title,
                    input: LineEdit::new(initial),
                    tag,
                })
            }
            Effect::Copy(text) => self.copy(text),
            Effect::Focus(id) => self.set_focus(id),
            Effect::Shell => match self.cx.ws.sandbox().host_root() {
                Some(root) => self.requests.push(HostRequest::Shell(root.to_path_buf())),
                None => {
                    self.toast = Some((
                        Level::Warn,
                        format!(
                            "the {} backend has no host directory to open a shell in",
                            self.cx.ws.backend()
                        ),
                        Instant::now(),
                    ))
                }
            },
        }
    }

    fn copy(&mut self, text: String) {
        let mode = self.cx.config.clipboard;
        let max = self.cx.config.osc52_max_bytes;
        let n = text.chars().count();
        match mode {
            ClipboardMode::Off => {
                self.toast = Some((
                    Level::Warn,
                    "copying is off (clipboard = \"off\")".into(),
                    Instant::now(),
                ));
            }
            ClipboardMode::Osc52 => self.osc52(text, max),
            ClipboardMode::Auto | ClipboardMode::Native => {
                let tx = self.cx.tx.clone();
                tokio::task::spawn_blocking(move || {
                    let msg = match super::clipboard::copy_native(&text) {
                        Ok(tool) => {
                            AppMsg::Toast(Level::Info, format!("copied {n} characters ({tool})"))
                        }
                        Err(e) if mode == ClipboardMode::Auto => {
                            let _ = e;
                            AppMsg::Osc52(text)
                        }
                        Err(e) => AppMsg::Toast(Level::Error, e),
                    };
                    let _ = tx.blocking_send(msg);
                });
            }
        }
    }

    fn osc52(&mut self, text: String, max: usize) {
        let n = text.chars().count();
        match super::clipboard::osc52(&text, max) {
            Some(seq) => {
                self.requests.push(HostRequest::Osc52(seq));
                self.toast = Some((
                    Level::Info,
                    format!("copied {n} characters (OSC 52)"),
                    Instant::now(),
                ));
            }
            None => {
                self.toast = Some((
                    Level::Error,
                    format!(
                        "too long to copy through OSC 52 ({n} characters; osc52_max_bytes = {max})"
                    ),
                    Instant::now(),
                ))
            }
        }
    }

    fn set_focus(&mut self, id: &'static str) {
        if self.layout.contains(id) {
            self.focus = id;
            self.modal = None;
        } else if self.pane_index(id).is_some() {
            self.modal = Some(id);
        }
        self.blur_unfocused();
    }

    fn focus_order(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        self.layout.leaves(&mut v);
        // Focus order follows the registry, which reads better than the
        // layout's column order (Sessions, Files, Skills, ...).
        let mut ordered: Vec<&'static str> = self
            .panes
            .iter()
            .map(|p| p.id())
            .filter(|id| v.contains(id))
            .collect();
        for id in v {
            if !ordered.contains(&id) {
                ordered.push(id);
            }
        }
        ordered
    }

    fn cycle_focus(&mut self, delta: isize) {
        if self.modal.is_some() {
            return;
        }
        let order = self.focus_order();
        let i = order.iter().position(|&p| p == self.focus).unwrap_or(0) as isize;
        let n = order.len() as isize;
        self.focus = order[((i + delta) % n + n) as usize % n as usize];
        self.blur_unfocused();
    }

    // ----- incoming -----

    /// Handles one message from the channel.
    pub fn on_msg(&mut self, msg: AppMsg) {
        match msg {
            AppMsg::Input(ev) => self.on_input(ev),
            AppMsg::Task { pane, payload } => {
                self.with_pane(pane, |p, cx| p.on_event(&PaneEvent::Task(payload), cx));
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
                self.log(LogLine::now(level, "stderr", line));
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
                    self.cx.header.state = state_label(state);
                }
                self.on_envelope(&env);
            }
            Received::Missed(n) => self.broadcast(&PaneEvent::Missed(n)),
        }
    }

    fn on_envelope(&mut self, env: &Envelope) {
        self.broadcast(&PaneEvent::Engine(env));
    }

    /// Time-based work (toast expiry, once-a-second tick).
    pub fn tick(&mut self) {
        if self
            .toast
            .as_ref()
            .is_some_and(|t| t.2.elapsed() > TOAST_TTL)
        {
            self.toast = None;
        }
        if self.last_tick.elapsed() >= Duration::from_secs(1) {
            self.last_tick = Instant::now();
            self.broadcast(&PaneEvent::Tick);
        }
    }

    /// When the next timed change is due (toast expiry or tick).
    pub fn next_deadline(&self) -> Instant {
        let tick = self.last_tick + Duration::from_secs(1);
        match &self.toast {
            Some(t) => tick.min(t.2 + TOAST_TTL),
            None => tick,
        }
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
            tag: QUIT_TAG.into(),
        });
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

    /// Handles a terminal event.
    pub fn on_input(&mut self, ev: TermEvent) {
        match ev {
            TermEvent::Key(k) if k.kind != KeyEventKind::Release => self.on_key(k),
            TermEvent::Paste(text) => self.on_paste(&text),
            TermEvent::Mouse(m) => self.on_mouse(m),
            _ => {}
        }
        self.blur_unfocused();
    }

    fn on_paste(&mut self, text: &str) {
        if let Some(ov) = &mut self.overlay {
            match ov {
                Overlay::Prompt { input, .. } => input.insert_str(&single_line(text)),
                Overlay::Palette(p) => p.paste(&single_line(text)),
                _ => {}
            }
            return;
        }
        let focus = self.focus();
        let taken = self
            .with_pane(focus, |p, cx| p.on_paste(text, cx))
            .unwrap_or(false);
        if !taken {
            self.apply(Effect::Toast(
                Level::Info,
                "paste ignored: no text field has the focus".into(),
            ));
        }
    }

    fn on_key(&mut self, key: KeyEvent) {
        if self.overlay.is_some() {
            self.overlay_key(key);
            return;
        }
        let chord = KeyChord::from_event(&key);
        let focus = self.focus();
        let Some(i) = self.pane_index(focus) else {
            return;
        };
        if self.panes[i].text_input_active() {
            let used = self.panes[i].on_key(&key, &mut self.cx);
            self.apply_effects();
            if used {
                return;
            }
        }
        let ctx = self.panes[i].context();
        if let Some(spec) = self.cx.keymap.lookup(ctx, chord).copied() {
            self.panes[i].on_action(spec.name, &mut self.cx);
            self.apply_effects();
            return;
        }
        if ctx != self.panes[i].id()
            && let Some(spec) = self.cx.keymap.lookup(self.panes[i].id(), chord).copied()
        {
            self.panes[i].on_action(spec.name, &mut self.cx);
            self.apply_effects();
            return;
        }
        if let Some(spec) = self.cx.keymap.lookup(GLOBAL, chord).copied() {
            self.run_action(spec.name);
        } else if chord == KeyChord::parse("ctrl-c").expect("a valid chord") {
            // Users press Ctrl-C to get out: say what quits instead of
            // doing nothing.
            let quit = self
                .cx
                .keymap
                .all()
                .iter()
                .find(|b| b.spec.name == "app.quit" && !b.keys.is_empty())
                .map(|b| super::keymap::keys_label(&b.keys))
                .unwrap_or_else(|| ":quit".into());
            self.apply(Effect::Toast(
                Level::Info,
                format!("ctrl-c stops a running command or agent; {quit} quits wsbench"),
            ));
        }
    }

    /// Runs an action by name, as a key or the palette would.
    pub fn run_action(&mut self, name: &str) {
        let Some(spec) = self.cx.keymap.action(name).copied() else {
            let msg = if panes::all_actions().iter().any(|a| a.name == name) {
                format!("`{name}` is not available in read-only mode")
            } else {
                format!("unknown action `{name}`")
            };
            self.apply(Effect::Toast(Level::Warn, msg));
            return;
        };
        if spec.context != GLOBAL {
            // A pane's action from the palette: give it to that pane.
            let target = self
                .panes
                .iter()
                .position(|p| p.id() == spec.context || p.context() == spec.context);
            if let Some(i) = target {
                let id = self.panes[i].id();
                if self.layout.contains(id) {
                    self.focus = id;
                }
                self.panes[i].on_action(spec.name, &mut self.cx);
                self.apply_effects();
            }
            return;
        }
        match spec.name {
            "app.quit" => self.request_quit(),
            "app.help" => {
                self.overlay = Some(Overlay::Help(HelpOverlay::new(
                    &self.cx.keymap,
                    self.pane(self.focus())
                        .map(|p| p.context())
                        .unwrap_or(GLOBAL),
                )))
            }
            "app.palette" => {
                self.overlay = Some(Overlay::Palette(PaletteOverlay::new(self.completions())));
            }
            "app.focus_next" => self.cycle_focus(1),
            "app.focus_prev" => self.cycle_focus(-1),
            "app.zoom" => self.zoom = !self.zoom,
            "app.wider" => {
                self.layout
                    .resize(panes::sessions::ID, Direction::Horizontal, 5);
            }
            "app.narrower" => {
                self.layout
                    .resize(panes::sessions::ID, Direction::Horizontal, -5);
            }
            "app.taller" => {
                let f = self.focus;
                self.layout.resize(f, Direction::Vertical, 5);
            }
            "app.shorter" => {
                let f = self.focus;
                self.layout.resize(f, Direction::Vertical, -5);
            }
            "app.focus_sessions" => self.set_focus(panes::sessions::ID),
            "app.focus_files" => self.set_focus(panes::files::ID),
            "app.focus_skills" => self.set_focus(panes::skills::ID),
            "app.focus_offload" => self.set_focus(panes::offload::ID),
            "app.focus_command" => self.set_focus(panes::command::ID),
            "app.focus_logs" => self.set_focus(panes::logs::ID),
            "app.agent" => self.set_focus(panes::agent::ID),
            "app.focus_workspaces" => self.set_focus(panes::workspaces::ID),
            "app.focus_mcp" => self.set_focus(panes::mcp::ID),
            "app.mouse" => {
                self.mouse = !self.mouse;
                self.requests.push(HostRequest::Mouse(self.mouse));
                let msg = if self.mouse {
                    "mouse capture on"
                } else {
                    "mouse capture off: the terminal selects text now"
                };
                self.apply(Effect::Toast(Level::Info, msg.into()));
            }
            "app.shell" => self.apply(Effect::Shell),
            "app.suspend" => self.requests.push(HostRequest::Suspend),
            "app.redraw" => self.requests.push(HostRequest::Redraw),
            _ => {}
        }
    }

    /// The global action a key runs in a text field (help, quit): only
    /// keys that cannot be typed count, so `?` and `q` stay text.
    fn text_field_global(&self, chord: KeyChord) -> Option<&'static str> {
        if is_printable(&chord) {
            return None;
        }
        self.cx
            .keymap
            .lookup(GLOBAL, chord)
            .map(|s| s.name)
            .filter(|n| matches!(*n, "app.help" | "app.quit"))
    }

    fn overlay_key(&mut self, key: KeyEvent) {
        let chord = KeyChord::from_event(&key);
        let is_help = matches!(self.overlay, Some(Overlay::Help(_)));
        match self.text_field_global(chord) {
            // F1 over a palette or dialog: help on top, the overlay back
            // when help closes. F1 in help closes it.
            Some("app.help") if !is_help => {
                let ctx = match &self.overlay {
                    Some(Overlay::Palette(_)) => panes::palette::ID,
                    _ => GLOBAL,
                };
                self.behind_help = self.overlay.take();
                self.overlay = Some(Overlay::Help(HelpOverlay::new(&self.cx.keymap, ctx)));
                return;
            }
            Some("app.help") => {
                self.overlay = self.behind_help.take();
                return;
            }
            Some("app.quit") => {
                self.overlay = None;
                self.behind_help = None;
                self.request_quit();
                return;
            }
            _ => {}
        }
        self.overlay_key_inner(key);
        if is_help && self.overlay.is_none() {
            self.overlay = self.behind_help.take();
        }
    }

    fn overlay_key_inner(&mut self, key: KeyEvent) {
        let Some(ov) = self.overlay.take() else {
            return;
        };
        use ratatui::crossterm::event::KeyCode;
        let chord = KeyChord::from_event(&key);
        match ov {
            Overlay::Help(mut h) => {
                if let Some(spec) = self.cx.keymap.lookup(panes::help::ID, chord).copied() {
                    if !h.on_action(spec.name) {
                        return;
                    }
                } else if matches!(key.code, KeyCode::Esc) {
                    return;
                } else {
                    h.on_key(&key);
                }
                self.overlay = Some(Overlay::Help(h));
            }
            Overlay::Palette(mut p) => {
                p.pools = self.completions();
                match p.on_key(&key) {
                    Some(cmd) => self.run_palette(cmd),
                    None if p.closed => {}
                    None => self.overlay = Some(Overlay::Palette(p)),
                }
            }
            Overlay::Confirm { pane, message, tag } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter
                    if pane == APP_DIALOG && tag == QUIT_TAG =>
                {
                    self.quit = true;
                }
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.with_pane(pane, |p, cx| p.on_event(&PaneEvent::Confirmed(tag), cx));
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {}
                _ => self.overlay = Some(Overlay::Confirm { pane, message, tag }),
            },
            Overlay::Prompt {
                pane,
                title,
                mut input,
                tag,
            } => match key.code {
                KeyCode::Enter => {
                    let text = input.into_text();
                    self.with_pane(pane, |p, cx| {
                        p.on_event(&PaneEvent::Input { tag, text }, cx)
                    });
                }
                KeyCode::Esc => {}
                _ => {
                    input.key(&key);
                    self.overlay = Some(Overlay::Prompt {
                        pane,
                        title,
                        input,
                        tag,
                    });
                }
            },
        }
    }

    /// What the palette completes from now.
    fn completions(&self) -> Completions {
        Completions {
            actions: self
                .cx
                .keymap
                .all()
                .iter()
                .map(|b| b.spec.name.to_string())
                .collect(),
            themes: super::theme::Theme::available(self.theme_dir.as_deref()),
            sessions: self.cx.sessions.clone(),
            workspaces: self.cx.workspace_ids.clone(),
            workspace_notes: self.cx.workspace_notes.clone(),
            profiles: self.cx.profiles.clone(),
            unavailable_profiles: self.cx.unavailable_profiles.clone(),
        }
    }

    /// `:session <id>`: selects a session the workspace has; an unknown
    /// id is refused with the close matches (a typo must not silently
    /// scope every pane to an empty session).
    fn palette_session(&mut self, id: String) {
        if id == self.cx.session {
            self.apply(Effect::Toast(
                Level::Info,
                format!("session {id} is already selected"),
            ));
            return;
        }
        if self.cx.sessions.contains(&id) {
            self.apply(Effect::SelectSession(id));
            return;
        }
        let mut known = self.cx.sessions.clone();
        if !known.contains(&self.cx.session) {
            known.push(self.cx.session.clone());
        }
        let near = panes::palette::close_matches(&id, &known, 3);
        let msg = if near.is_empty() {
            format!("no session `{id}` in this workspace (`:session new {id}` starts one)")
        } else {
            format!(
                "no session `{id}`: did you mean {}? (`:session new {id}` starts one)",
                near.join(", ")
            )
        };
        self.apply(Effect::Toast(Level::Warn, msg));
    }

    fn run_palette(&mut self, cmd: PaletteCommand) {
        match cmd {
            PaletteCommand::Quit => self.request_quit(),
            PaletteCommand::Session(id) => self.palette_session(id),
            PaletteCommand::NewSession(id) => {
                if self.cx.sessions.contains(&id) || id == self.cx.session {
                    self.palette_session(id);
                    return;
                }
                if let Err(e) = crate::engine::layout::check_session_id(&id) {
                    self.apply(Effect::Toast(Level::Error, e.to_string()));
                    return;
                }
                self.apply(Effect::SelectSession(id.clone()));
                self.apply(Effect::Toast(
                    Level::Info,
                    format!("new session {id}: its first command or agent run creates it"),
                ));
            }
            PaletteCommand::Theme(name) => match Theme::load(&name, self.theme_dir.as_deref()) {
                Ok(t) => {
                    self.cx.theme = if super::theme::no_color_requested() {
                        t.monochrome()
                    } else {
                        t
                    };
                    self.apply(Effect::Toast(Level::Info, format!("theme {name}")));
                }
                Err(e) => self.apply(Effect::Toast(Level::Error, e.to_string())),
            },
            PaletteCommand::Action(name) => self.run_action(&name),
            PaletteCommand::Agent(setting) => {
                self.set_focus(panes::agent::ID);
                self.with_pane(panes::agent::ID, |p, cx| {
                    p.on_event(
                        &PaneEvent::Input {
                            tag: "model".into(),
                            text: setting,
                        },
                        cx,
                    )
                });
            }
            PaletteCommand::NeedsManager(what) => {
                let mut words = what.split_whitespace();
                let (cmd, arg) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                if arg.is_empty() {
                    let msg = format!("`:{cmd}` needs an argument (`:{cmd} <name>`)");
                    self.apply(Effect::Toast(Level::Warn, msg));
                    return;
                }
                let id = panes::workspaces::ID;
                let done = self.pane_call::<panes::workspaces::WorkspacesPane, _>(id, |p, cx| {
                    if cmd == "ws" {
                        p.open_id(arg, cx)
                    } else {
                        p.switch_profile(arg, cx)
                    }
                });
                if done.is_none() {
                    self.apply(Effect::Toast(
                        Level::Warn,
                        format!("`:{what}`: no Workspaces pane"),
                    ));
                }
            }
            PaletteCommand::Unknown(text) => self.apply(Effect::Toast(
                Level::Warn,
                format!("unknown command `{text}` (Tab completes)"),
            )),
        }
    }

    fn on_mouse(&mut self, m: MouseEvent) {
        if !self.mouse {
            return;
        }
        if let Some(Overlay::Help(h)) = &mut self.overlay {
            match m.kind {
                MouseEventKind::ScrollDown => h.scroll(3),
                MouseEventKind::ScrollUp => h.scroll(-3),
                _ => {}
            }
            return;
        }
        if self.overlay.is_some() {
            return;
        }
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if self.modal.is_none()
                    && let Some(h) = self
                        .handles
                        .iter()
                        .position(|h| on_handle(h, m.column, m.row))
                {
                    self.drag = Some(h);
                    return;
                }
                if let Some((id, area)) = self.hit(m.column, m.row) {
                    if self.modal.is_none() {
                        self.focus = id;
                    }
                    self.with_pane(id, |p, cx| p.on_mouse(&m, area, cx));
                }
            }
            MouseEventKind::Drag(MouseButton::Left) => {
                if let Some(h) = self.drag.and_then(|i| self.handles.get(i).cloned()) {
                    let pct = match h.dir {
                        Direction::Horizontal => {
                            (m.column.saturating_sub(h.area.x) as u32 * 100
                                / h.area.width.max(1) as u32) as u16
                        }
                        Direction::Vertical => {
                            (m.row.saturating_sub(h.area.y) as u32 * 100
                                / h.area.height.max(1) as u32) as u16
                        }
                    };
                    if let Some(Node::Split { pct: p, .. }) = self.layout.split_at_path(&h.path) {
                        *p = pct.clamp(10, 90);
                    }
                }
            }
            MouseEventKind::Up(_) => self.drag = None,
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                if let Some((id, area)) = self.hit(m.column, m.row) {
                    self.with_pane(id, |p, cx| p.on_mouse(&m, area, cx));
                }
            }
            _ => {}
        }
    }

    fn hit(&self, x: u16, y: u16) -> Option<(&'static str, Rect)> {
        self.areas
            .iter()
            .rev()
            .find(|(_, r)| x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height)
            .copied()
    }

    // ----- drawing -----

    /// Draws the whole screen.
    pub fn render(&mut self, f: &mut Frame<'_>) {
        let area = f.area();
        let theme = self.cx.theme.clone();
        f.buffer_mut().set_style(area, theme.base);
        if area.width < 8 || area.height < 3 {
            f.buffer_mut().set_string(
                area.x,
                area.y,
                text::truncate("wsbench", area.width as usize),
                theme.base,
            );
            return;
        }
        let [header, body, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(area);
        self.render_header(f, header);
        self.areas.clear();
        self.handles.clear();
        let small = body.width < MIN_SPLIT_WIDTH || body.height < MIN_SPLIT_HEIGHT;
        if let Some(m) = self.modal {
            self.draw_pane(f, m, body, true);
        } else if self.zoom || small {
            let id = self.focus;
            self.draw_pane(f, id, body, true);
        } else {
            let layout = self.layout.clone();
            self.draw_node(f, &layout, body, &mut Vec::new());
        }
        self.render_footer(f, footer);
        self.render_toast(f, body);
        if let Some(ov) = &mut self.overlay {
            render_overlay(f, body, ov, &self.cx);
        } else if let Some(p) = self.pane(self.focus())
            && let Some((x, y)) = p.cursor()
        {
            f.set_cursor_position((x, y));
        }
    }

    fn draw_node(&mut self, f: &mut Frame<'_>, node: &Node, area: Rect, path: &mut Vec<bool>) {
        match node {
            Node::Leaf(id) => {
                let focused = *id == self.focus;
                self.draw_pane(f, id, area, focused);
            }
            Node::Split { dir, pct, a, b } => {
                let [ra, rb] = Layout::default()
                    .direction(*dir)
                    .constraints([
                        Constraint::Percentage(*pct),
                        Constraint::Percentage(100 - *pct),
                    ])
                    .areas(area);
                let at = match dir {
                    Direction::Horizontal => rb.x,
                    Direction::Vertical => rb.y,
                };
                self.handles.push(SplitHandle {
                    path: path.clone(),
                    dir: *dir,
                    area,
                    at,
                });
                path.push(false);
                self.draw_node(f, a, ra, path);
                path.pop();
                path.push(true);
                self.draw_node(f, b, rb, path);
                path.pop();
            }
        }
    }

    fn draw_pane(&mut self, f: &mut Frame<'_>, id: &'static str, area: Rect, focused: bool) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        if let Some(i) = self.pane_index(id) {
            self.panes[i].render(f, area, focused, &self.cx);
            self.areas.push((id, area));
        }
    }

    fn render_header(&self, f: &mut Frame<'_>, area: Rect) {
        let t = &self.cx.theme;
        let p = Paragraph::new(Line::from(Span::styled(
            text::fit(
                &text::display(&self.header_text(area.width as usize)),
                area.width as usize,
            ),
            t.header,
        )));
        f.render_widget(p, area);
    }

    /// The header line for `width` columns: parts are dropped, least
    /// important first, until it fits; profile, workspace id, session and
    /// state go last. User and agent ids read as `wsbench workspaces
    /// list` shows them.
    pub fn header_text(&self, width: usize) -> String {
        use crate::manager::display::id_or_default;
        let ws = &self.cx.ws;
        let id = ws.id();
        let short = &id[..id.len().min(12)];
        let state = &self.cx.header.state;
        let dot = if state == "ready" { "●" } else { "○" };
        let h = &self.cx.header;
        // After `:profile` the open workspace may still be the previous
        // profile's: say whose it is rather than imply it is the new one's.
        let ws_part = if h.ws_profile != h.profile && !h.ws_profile.is_empty() {
            format!("ws {short} (of profile {})", h.ws_profile)
        } else {
            format!("ws {short}")
        };
        // (text, priority): higher stays longer.
        let mut parts: Vec<(String, u8)> = vec![
            ("wsbench".to_string(), 4),
            (format!("profile {}", h.profile), 8),
            (format!("backend {}", ws.backend()), 5),
            (ws_part, 7),
            (format!("user {}", id_or_default(Some(&self.cx.user_id))), 2),
            (format!("agent {}", id_or_default(Some(&self.cx.agent))), 3),
            (format!("session {}", self.cx.session), 6),
            (format!("{dot} {state}"), 9),
        ];
        if self.cx.read_only {
            parts.push(("READ-ONLY".into(), 10));
        }
        // Most important first, each kept when it still fits; shown in
        // the usual order.
        let join = |keep: &[bool]| {
            let v: Vec<&str> = parts
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|((s, _), _)| s.as_str())
                .collect();
            format!(" {}", v.join(" │ "))
        };
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(parts[i].1));
        let mut keep = vec![false; parts.len()];
        for i in order {
            keep[i] = true;
            if text::width(&join(&keep)) > width {
                keep[i] = false;
            }
        }
        join(&keep)
    }

    fn render_footer(&self, f: &mut Frame<'_>, area: Rect) {
        let t = &self.cx.theme;
        let ctx = match &self.overlay {
            Some(Overlay::Help(_)) => panes::help::ID,
            Some(Overlay::Palette(_)) => panes::palette::ID,
            Some(_) => "dialog",
            None => self
                .pane(self.focus())
                .map(|p| p.context())
                .unwrap_or(GLOBAL),
        };
        let mut hints: Vec<(String, &'static str)> = match (&self.overlay, ctx) {
            (Some(Overlay::Prompt { .. }), _) => vec![
                ("enter".into(), "ok"),
                ("esc".into(), "cancel"),
                ("ctrl-u".into(), "clear"),
            ],
            (_, "dialog") => vec![("y/enter".into(), "confirm"), ("n/esc".into(), "cancel")],
            _ => {
                let pane = self.pane(self.focus());
                self.cx
                    .keymap
                    .bindings(ctx)
                    .filter(|b| b.spec.hint && !b.keys.is_empty())
                    .filter(|b| !pane.is_some_and(|p| p.hint_off(b.spec.name)))
                    .map(|b| (super::keymap::keys_label(&b.keys), b.spec.desc))
                    .collect()
            }
        };
        // Help over a palette or dialog: the keys that reach it there.
        if matches!(
            self.overlay,
            Some(Overlay::Palette(_) | Overlay::Prompt { .. } | Overlay::Confirm { .. })
        ) && let Some(b) = self
            .cx
            .keymap
            .all()
            .iter()
            .find(|b| b.spec.name == "app.help")
        {
            let keys: Vec<KeyChord> = b
                .keys
                .iter()
                .copied()
                .filter(|k| !is_printable(k))
                .collect();
            if !keys.is_empty() {
                hints.push((super::keymap::keys_label(&keys), "help"));
            }
        }
        let text_mode = self.overlay.is_none()
            && self
                .pane(self.focus())
                .is_some_and(|p| p.text_input_active());
        let mut help = None;
        // Keys the focused pane binds itself never reach a global action.
        let pane_id = self.pane(self.focus()).map(|p| p.id()).unwrap_or(GLOBAL);
        let shadowed: Vec<KeyChord> = self
            .cx
            .keymap
            .bindings(ctx)
            .chain(self.cx.keymap.bindings(pane_id))
            .flat_map(|b| b.keys.iter().copied())
            .collect();
        if self.overlay.is_none() {
            for b in self.cx.keymap.bindings(GLOBAL).filter(|b| b.spec.hint) {
                if self.modal.is_some()
                    && matches!(b.spec.name, "app.focus_next" | "app.zoom" | "app.agent")
                {
                    continue;
                }
                // In a text field printable keys type: list only the keys
                // that still reach the app there.
                let keys: Vec<KeyChord> = b
                    .keys
                    .iter()
                    .copied()
                    .filter(|k| !text_mode || !is_printable(k))
                    .filter(|k| !shadowed.contains(k))
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let label = super::keymap::keys_label(&keys);
                if b.spec.name == "app.help" {
                    help = Some((label, b.spec.desc));
                } else {
                    hints.push((label, b.spec.desc));
                }
            }
        }
        let mut spans = Vec::new();
        let mut used = 0usize;
        let width = area.width as usize;
        // Help is always shown, at the end.
        let reserve = help
            .as_ref()
            .map(|(k, d)| text::width(k) + text::width(d) + 3)
            .unwrap_or(0);
        for (k, d) in hints {
            let w = text::width(&k) + text::width(d) + 3;
            if used + w + reserve > width {
                break;
            }
            spans.push(Span::styled(format!(" {k}"), t.key));
            spans.push(Span::styled(format!(" {d} "), t.footer));
            used += w;
        }
        if let Some((k, d)) = help
            && used + text::width(&k) + text::width(d) + 3 <= width
        {
            spans.push(Span::styled(format!(" {k}"), t.key));
            spans.push(Span::styled(format!(" {d} "), t.footer));
        }
        f.buffer_mut().set_style(area, t.footer);
        f.render_widget(Paragraph::new(Line::from(spans)).style(t.footer), area);
    }

    fn render_toast(&self, f: &mut Frame<'_>, body: Rect) {
        let Some((level, msg, _)) = &self.toast else {
            return;
        };
        if body.height < 3 {
            return;
        }
        let t = &self.cx.theme;
        let msg = text::display(msg);
        let max = (body.width as usize).saturating_sub(4).max(1);
        let shown = text::truncate(&msg, max);
        let w = (text::width(&shown) + 2) as u16;
        let r = Rect::new(
            body.x + body.width.saturating_sub(w + 1),
            body.y + body.height - 1,
            w.min(body.width),
            1,
        );
        f.render_widget(Clear, r);
        let style = t.level(level.as_str()).add_modifier(Modifier::REVERSED);
        f.buffer_mut()
            .set_string(r.x, r.y, format!(" {shown} "), style);
    }
}

fn is_printable(k: &KeyChord) -> bool {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    matches!(k.code, KeyCode::Char(_))
        && !k.mods.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

fn on_handle(h: &SplitHandle, x: u16, y: u16) -> bool {
    let a = h.area;
    match h.dir {
        Direction::Horizontal => (x == h.at || x + 1 == h.at) && y >= a.y && y < a.y + a.height,
        Direction::Vertical => (y == h.at || y + 1 == h.at) && x >= a.x && x < a.x + a.width,
    }
}

/// A rectangle of `w`×`h` centred in `area` (clipped to it).
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn render_overlay(f: &mut Frame<'_>, body: Rect, ov: &mut Overlay, cx: &Ctx) {
    let t = &cx.theme;
    match ov {
        Overlay::Help(h) => h.render(f, body, cx),
        Overlay::Palette(p) => p.render(f, body, cx),
        Overlay::Confirm { message, .. } => {
            let msg = text::display(message);
            let w = (text::width(&msg) as u16 + 4).clamp(20, body.width.max(1));
            let r = centered(body, w, 5);
            f.render_widget(Clear, r);
            let block = cx.block("Confirm", "", true);
            let inner = block.inner(r);
            f.render_widget(block, r);
            let lines = vec![
                Line::from(Span::styled(
                    text::truncate(&msg, inner.width as usize).into_owned(),
                    t.warn,
                )),
                Line::from(vec![
                    Span::styled("y", t.key),
                    Span::styled(" yes   ", t.base),
                    Span::styled("n", t.key),
                    Span::styled(" no", t.base),
                ]),
            ];
            f.render_widget(Paragraph::new(lines), inner);
        }
        Overlay::Prompt { title, input, .. } => {
            let w = body.width.saturating_sub(4).clamp(10, 80);
            let r = centered(body, w, 3);
            f.render_widget(Clear, r);
            // The footer names the keys too: a long title wins the room.
            let note = "enter ok · esc cancel";
            let note = if text::width(title) + text::width(note) + 6 <= w as usize {
                note
            } else {
                ""
            };
            let block = cx.block(title, note, true);
            let inner = block.inner(r);
            f.render_widget(block, r);
            let (visible, col) = input.view(inner.width as usize);
            f.buffer_mut()
                .set_string(inner.x, inner.y, &visible, t.base);
            if inner.width > 0 && inner.height > 0 {
                let x = inner.x + col as u16;
                f.set_cursor_position((x.min(inner.x + inner.width - 1), inner.y));
            }
        }
    }
}

/// Pasted text for a one-line field: newlines become spaces and other
/// control characters are dropped (C23).
pub fn single_line(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if text::is_control(c) => None,
            c => Some(c),
        })
        .collect()
}

fn state_label(s: &WorkspaceState) -> String {
    match s {
        // Lease counts (the app's own lease included) and a reattach say
        // nothing about the connection: the workspace is ready.
        WorkspaceState::Leased | WorkspaceState::Idle | WorkspaceState::Reattached => {
            "ready".into()
        }
        other => panes::logs::workspace_state(other),
    }
}

fn stderr_level(line: &str) -> Level {
    let head: String = line.chars().take(64).collect();
    let stripped: String = {
        let mut p = super::widgets::ansi::AnsiParser::new();
        let mut out = String::new();
        p.feed(head.as_bytes(), &mut |l| out.push_str(&l.text));
        out.push_str(&p.partial().text);
        out
    };
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
