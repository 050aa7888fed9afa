//! The app: panes in a split layout, focus, overlays, and the routing of
//! keys, mouse, paste, engine events and task results.
//!
//! [`App`] holds no terminal: it takes events and draws into a
//! [`Frame`], so tests drive it on ratatui's `TestBackend` and the real
//! event loop (`tui::run`) only adds the terminal. Requests
//! that need the real terminal (a shell, OSC 52, mouse capture) are queued
//! as [`HostRequest`]s for the loop.
//!
//! One file per job: [`layout`] (the split tree), [`actions`] (the app's
//! own action table), `chrome` (header, footer, toast, pane borders),
//! `input` (key and paste routing), `overlay` (help, palette, dialogs),
//! `palette_cmd` (what palette commands do), `mouse`, `focus`,
//! `effects` (what panes ask for), `clipboard`, `events` (messages from
//! tasks, the bus and the clock) and `lifecycle` (workspace switches and
//! the managers behind them).

pub mod actions;
mod chrome;
mod clipboard;
mod effects;
mod events;
mod focus;
mod input;
pub mod layout;
mod lifecycle;
mod mouse;
mod overlay;
mod palette_cmd;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use ratatui::layout::Rect;
use tokio::sync::mpsc;

pub use self::actions::{ACTIONS, all_actions};
use self::layout::SplitHandle;
pub use self::layout::{Node, default_layout};
use self::overlay::Overlay;
use super::action::{AppMsg, Effect, Level, LogLine, PaneEvent};
use super::config::TuiConfig;
use super::keymap::KeyMap;
use super::pane::{Clock, Ctx, HeaderInfo, ManagerFactory, Pane};
use super::panes;
use super::theme::Theme;
use crate::engine::Workspace;

/// How long a toast stays, on the app's clock ([`AppOptions::clock`]).
const TOAST_TTL: Duration = Duration::from_secs(4);

/// What the real terminal loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRequest {
    /// Attach the terminal to a shell inside the workspace's sandbox
    /// (`root::attach`), then come back.
    Shell,
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
    pub manager_factory: Option<ManagerFactory>,
    /// Profile names `:profile` completes.
    pub profiles: Vec<String>,
    /// Built-in profiles left out of [`AppOptions::profiles`] because
    /// they cannot work here, with the reason (`needs E2B_API_KEY`).
    pub unavailable_profiles: Vec<(String, String)>,
    /// The terminal reports keys with the kitty keyboard protocol (Esc
    /// is its own key): an unbound Alt+key is then not taken for "Esc,
    /// then the key" (issue 22).
    pub keyboard_enhanced: bool,
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
            keyboard_enhanced: false,
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
    toast: Option<chrome::Toast>,
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
    /// See [`AppOptions::keyboard_enhanced`].
    keyboard_enhanced: bool,
}

/// The pseudo pane id of dialogs the app itself answers.
const APP_DIALOG: &str = "app";

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
        let specs = all_actions();
        let (keymap, problems) =
            KeyMap::build(&specs, &opts.config.key_overrides(), opts.read_only);
        let mut problems: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
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
                state_until: None,
            },
            clock: opts.clock.clone(),
            output_time: crate::tui::pane::OUTPUT_FRAME_TIME,
            effects: Vec::new(),
            inflight: Arc::new(AtomicUsize::new(0)),
            sessions: Vec::new(),
            workspace_ids: Vec::new(),
            workspace_notes: Vec::new(),
            profiles: opts.profiles.clone(),
            recent_searches: Vec::new(),
            unavailable_profiles: opts.unavailable_profiles.clone(),
            manager: opts.manager.clone(),
            manager_factory: opts.manager_factory.clone(),
            pending_ws: None,
            replaced_managers: Vec::new(),
            generation: 0,
        };
        let panes = panes::registry(&cx);
        let layout = default_layout(&opts.config);
        // Start on a list, so keys meant to move never become a command
        // (issue 22); `[tui] start_in_prompt = true` keeps the prompt.
        let focus = if opts.config.start_in_prompt {
            panes::command::ID
        } else {
            panes::files::ID
        };
        let mut app = App {
            cx,
            panes,
            layout,
            focus,
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
            keyboard_enhanced: opts.keyboard_enhanced,
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
            Overlay::Choose { .. } => "choose",
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

    pub(super) fn pane_index(&self, id: &str) -> Option<usize> {
        self.panes.iter().position(|p| p.id() == id)
    }

    /// Calls `f` on one pane, then applies the effects it queued.
    pub(super) fn with_pane<R>(
        &mut self,
        id: &str,
        f: impl FnOnce(&mut dyn Pane, &mut Ctx) -> R,
    ) -> Option<R> {
        let i = self.pane_index(id)?;
        let r = f(self.panes[i].as_mut(), &mut self.cx);
        self.apply_effects();
        Some(r)
    }

    pub(super) fn broadcast(&mut self, ev: &PaneEvent<'_>) {
        for i in 0..self.panes.len() {
            self.panes[i].on_event(ev, &mut self.cx);
        }
        self.apply_effects();
    }

    pub(super) fn apply_effects(&mut self) {
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
    pub(super) fn blur_unfocused(&mut self) {
        let focus = self.focus();
        let read_only = self.cx.read_only;
        for p in &mut self.panes {
            let id = p.id();
            if p.text_input_active() && (id != focus || (read_only && id == panes::command::ID)) {
                p.blur();
            }
        }
    }
}
