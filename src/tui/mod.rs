//! The TUI workbench: panes over the live engine.
//!
//! `wsbench` with no sub-command opens it (on a terminal; otherwise it
//! prints the summary). This module owns the real terminal: raw mode, the
//! alternate screen, bracketed paste and mouse capture are switched on
//! here and always switched off again — on quit, on error, on SIGTERM,
//! SIGHUP, SIGINT and SIGQUIT (exit status 128 + signal), and on panic through a panic hook that runs before anything is
//! printed (C22). While the TUI runs, stderr (where the tracing log goes)
//! is captured into the Logs pane so nothing scribbles over the screen;
//! the hook puts stderr back first, so a panic message is readable.
//!
//! The loop: wait for a key, a task result or an engine event; handle
//! what is pending for at most half a frame; draw once — at most `max_fps`
//! times a second. Engine work never runs on the loop: panes spawn tokio
//! tasks that report back. Terminal input has a channel of its own and
//! goes first (issue 16): keys, resizes and pastes are handled before any
//! queued task message or engine event, and again between slices of them,
//! so a flood of output never delays a key by more than a slice.
//!
//! Layout of the module: [`app`] (state and routing), [`turn`] (one turn
//! of the loop, testable apart from the waiting), [`panes`] (one
//! component per pane; see its docs for adding one), [`keymap`],
//! [`theme`], [`config`], [`widgets`], [`clipboard`], [`action`].

pub mod action;
pub mod app;
pub mod clipboard;
pub mod config;
pub mod keymap;
pub mod pane;
pub mod panes;
pub mod theme;
pub mod turn;
pub mod widgets;

use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::crossterm::{cursor, event, execute};
use tokio::sync::mpsc;

use self::action::{AppMsg, Level};
use self::app::{App, AppOptions, HostRequest};
use self::config::TuiConfig;
use self::theme::Theme;

/// Options of a bare `wsbench` that only the TUI reads (the command
/// line's `--read-only`, `--theme` and `--no-mouse`).
#[derive(Debug, Clone, Default)]
pub struct TuiOptions {
    /// Open the TUI without any destructive action.
    pub read_only: bool,
    /// Theme name; wins over `[tui] theme`.
    pub theme: Option<String>,
    /// Do not capture the mouse.
    pub no_mouse: bool,
}

/// Environment variable of the fault-injection hook used by the
/// real-terminal tests of C22: `panic` panics inside the render loop,
/// `error` makes the loop return an error.
pub const FAULT_ENV: &str = "WSBENCH_TUI_FAULT";

/// The host directory of user themes next to the config file.
pub fn theme_dir(config_file: &std::path::Path) -> Option<std::path::PathBuf> {
    config_file.parent().map(|p| p.join("themes"))
}

/// Resolves the theme: `--theme`, then `[tui] theme`, then dark; `NO_COLOR`
/// drops colours. Returns the theme and a problem to report, if any.
pub fn resolve_theme(
    flag: Option<&str>,
    cfg: &TuiConfig,
    dir: Option<&std::path::Path>,
) -> (Theme, Option<String>) {
    let name = flag
        .map(String::from)
        .or_else(|| cfg.theme.clone())
        .unwrap_or_else(|| theme::DEFAULT_THEME.to_string());
    let (t, problem) = match Theme::load(&name, dir) {
        Ok(t) => (t, None),
        Err(e) => (Theme::default(), Some(e.to_string())),
    };
    if theme::no_color_requested() {
        (t.monochrome(), problem)
    } else {
        (t, problem)
    }
}

// ----- terminal state, restorable from a panic hook -----

static TERMINAL_ON: AtomicBool = AtomicBool::new(false);
/// The kitty keyboard flags were pushed (popped on restore).
static KEYS_PUSHED: AtomicBool = AtomicBool::new(false);
/// Whether the terminal answered the keyboard enhancement query; asked
/// once (the answer is read from stdin, which the input thread owns
/// afterwards).
static KEYS_ENHANCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);
static HOOK: std::sync::Once = std::sync::Once::new();
static UI_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

fn enter_terminal(mouse: bool) -> std::io::Result<()> {
    enable_raw_mode()?;
    TERMINAL_ON.store(true, Ordering::SeqCst);
    let mut out = std::io::stdout();
    execute!(
        out,
        EnterAlternateScreen,
        EnableBracketedPaste,
        cursor::Hide
    )?;
    if mouse {
        execute!(out, EnableMouseCapture)?;
    }
    // Esc then a key stays two keys where the terminal speaks the kitty
    // protocol (issue 22); elsewhere the app splits an unbound Alt+key
    // (`App::esc_then_key`).
    let enhanced = *KEYS_ENHANCED.get_or_init(|| {
        ratatui::crossterm::terminal::supports_keyboard_enhancement().unwrap_or(false)
    });
    if enhanced
        && execute!(
            out,
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        )
        .is_ok()
    {
        KEYS_PUSHED.store(true, Ordering::SeqCst);
    }
    Ok(())
}

/// Whether the keyboard enhancement flags are on (known once the terminal
/// was entered).
fn keyboard_enhanced() -> bool {
    KEYS_PUSHED.load(Ordering::SeqCst)
}

/// Puts the terminal back: mouse capture and bracketed paste off, main
/// screen, cursor shown, cooked mode. Idempotent; safe from a panic hook.
pub fn restore_terminal() {
    restore_stderr();
    if TERMINAL_ON.swap(false, Ordering::SeqCst) {
        let mut out = std::io::stdout();
        if KEYS_PUSHED.swap(false, Ordering::SeqCst) {
            let _ = execute!(out, PopKeyboardEnhancementFlags);
        }
        let _ = execute!(
            out,
            DisableMouseCapture,
            DisableBracketedPaste,
            LeaveAlternateScreen,
            cursor::Show
        );
        let _ = disable_raw_mode();
        let _ = out.flush();
    }
}

/// Restores the terminal before a panic message is printed. A panic on
/// the UI thread (or any panic when panics abort) ends the TUI, so the
/// terminal is put back first; a panic inside a background task is caught
/// by tokio and the TUI goes on, so its message goes to the Logs pane
/// (stderr is captured) and the screen is left alone.
fn install_panic_hook() {
    let _ = UI_THREAD.set(std::thread::current().id());
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let on_ui = UI_THREAD.get() == Some(&std::thread::current().id());
            if on_ui || cfg!(panic = "abort") {
                restore_terminal();
            }
            prev(info);
        }));
    });
}

/// Longest stderr line forwarded to the Logs pane, in bytes; longer
/// output is cut into several lines.
const STDERR_LINE_BYTES: usize = 16 * 1024;

/// Sends fd 2 into a pipe read by a thread that forwards lines to the
/// Logs pane. Lines are dropped (and counted) rather than ever blocking a
/// writer when the app is busy.
fn capture_stderr(tx: mpsc::Sender<AppMsg>) {
    if SAVED_STDERR.load(Ordering::SeqCst) >= 0 {
        return;
    }
    let mut fds = [0i32; 2];
    // SAFETY: plain POSIX calls on fds this function owns; fd 2 is saved
    // first and put back by `restore_stderr`.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return;
        }
        let saved = libc::dup(2);
        if saved < 0 {
            libc::close(fds[0]);
            libc::close(fds[1]);
            return;
        }
        libc::fcntl(saved, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC);
        if libc::dup2(fds[1], 2) < 0 {
            libc::close(saved);
            libc::close(fds[0]);
            libc::close(fds[1]);
            return;
        }
        libc::close(fds[1]);
        SAVED_STDERR.store(saved, Ordering::SeqCst);
    }
    let read_fd = fds[0];
    std::thread::Builder::new()
        .name("wsbench-stderr".into())
        .spawn(move || {
            use std::io::{BufRead as _, Read as _};
            use std::os::fd::FromRawFd as _;
            // SAFETY: the read end is owned by this thread from here on.
            let file = unsafe { std::fs::File::from_raw_fd(read_fd) };
            let mut reader = std::io::BufReader::new(file);
            let mut dropped = 0u64;
            let mut buf = Vec::new();
            loop {
                // A line is at most STDERR_LINE_BYTES: a library printing
                // without newlines cannot grow it (the rest follows as
                // further lines).
                buf.clear();
                match (&mut reader)
                    .take(STDERR_LINE_BYTES as u64)
                    .read_until(b'\n', &mut buf)
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                let line = String::from_utf8_lossy(&buf).into_owned();
                if dropped > 0
                    && tx
                        .try_send(AppMsg::Stderr(format!("({dropped} stderr lines dropped)")))
                        .is_ok()
                {
                    dropped = 0;
                }
                if tx.try_send(AppMsg::Stderr(line)).is_err() {
                    dropped += 1;
                }
            }
        })
        .ok();
}

fn restore_stderr() {
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: `saved` is the fd `capture_stderr` duplicated from fd 2.
        unsafe {
            libc::dup2(saved, 2);
            libc::close(saved);
        }
    }
}

/// Reads terminal events on a thread (crossterm's reader blocks); can be
/// paused while a shell owns the terminal.
struct InputThread {
    paused: Arc<AtomicBool>,
    parked: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl InputThread {
    fn start(tx: mpsc::Sender<AppMsg>) -> InputThread {
        // `tx` is the input channel: nothing else sends on it, so a key
        // never waits behind output.
        let paused = Arc::new(AtomicBool::new(false));
        let parked = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, k, s) = (paused.clone(), parked.clone(), stop.clone());
        std::thread::Builder::new()
            .name("wsbench-input".into())
            .spawn(move || {
                while !s.load(Ordering::SeqCst) {
                    if p.load(Ordering::SeqCst) {
                        k.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    k.store(false, Ordering::SeqCst);
                    match event::poll(Duration::from_millis(50)) {
                        Ok(true) => {
                            if p.load(Ordering::SeqCst) {
                                continue;
                            }
                            match event::read() {
                                Ok(ev) => {
                                    if tx.blocking_send(AppMsg::Input(ev)).is_err() {
                                        break;
                                    }
                                }
                                Err(_) => break,
                            }
                        }
                        Ok(false) => {}
                        Err(_) => break,
                    }
                }
            })
            .ok();
        InputThread {
            paused,
            parked,
            stop,
        }
    }

    fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
        let t0 = Instant::now();
        while !self.parked.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_millis(500) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn resume(&self) {
        self.parked.store(false, Ordering::SeqCst);
        self.paused.store(false, Ordering::SeqCst);
    }
}

impl Drop for InputThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Restores the terminal when dropped (quit, `?`, unwinding).
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

type Term = Terminal<CrosstermBackend<std::io::Stdout>>;

/// Leaves the TUI, runs `f` on the plain terminal, comes back.
fn suspended<R>(
    term: &mut Term,
    input: &InputThread,
    tx: &mpsc::Sender<AppMsg>,
    mouse: bool,
    f: impl FnOnce() -> R,
) -> std::io::Result<R> {
    input.pause();
    restore_terminal();
    let r = f();
    enter_terminal(mouse)?;
    capture_stderr(tx.clone());
    input.resume();
    term.clear()?;
    Ok(r)
}

/// Leaves the TUI, attaches the terminal to a shell inside `ws`'s
/// sandbox until it exits, comes back; returns the line to toast.
async fn sandbox_shell(
    term: &mut Term,
    input: &InputThread,
    tx: &mpsc::Sender<AppMsg>,
    mouse: bool,
    ws: &crate::engine::Workspace,
) -> std::io::Result<String> {
    use crate::root::attach;
    input.pause();
    restore_terminal();
    let sb = ws.sandbox().clone();
    println!("{}", attach::banner(&*sb, ws.id()));
    let r = attach::run(&*sb, attach::shell_request(&[])).await;
    enter_terminal(mouse)?;
    capture_stderr(tx.clone());
    input.resume();
    term.clear()?;
    Ok(match r {
        Ok(Some(code)) => format!("back from the {} shell (exit {code})", sb.kind()),
        Ok(None) => format!("back from the {} shell", sb.kind()),
        Err(e) => format!("shell: {e:#}"),
    })
}

/// The problems of the config's `[tui.keys]` table, each placed at its
/// entry (`/home/u/.config/wsbench/config.toml:12:1: [tui.keys]: unknown
/// action `app.qiut``): unknown actions, unreadable keys, two actions on
/// one key in one context, a global key a pane hides. Checked as if not
/// read-only, so a bad entry is reported whatever the mode.
pub fn keymap_errors(config: &crate::config::Config) -> Vec<String> {
    let (_, problems) =
        keymap::KeyMap::build(&app::all_actions(), &config.tui.key_overrides(), false);
    problems
        .iter()
        .map(|p| {
            config
                .located(&["tui", "keys", p.action()], p.to_string())
                .to_string()
        })
        .collect()
}

/// Exit code of `wsbench` when the TUI refuses to start on a bad
/// `[tui.keys]` table (a usage error, as clap's).
pub const EXIT_BAD_KEYMAP: i32 = 2;

/// Opens the TUI on the workspace `ctx` selects. Returns the exit code.
///
/// Errors: the workspace cannot be opened; the terminal cannot be set up;
/// drawing fails. The terminal is restored before any error returns.
pub async fn run(ctx: &crate::root::Context, args: TuiOptions) -> anyhow::Result<i32> {
    let t0 = Instant::now();
    // Before anything opens: a key map that would surprise is refused
    // with file and line, not toasted inside the TUI (issue 22).
    let key_errors = keymap_errors(&ctx.config);
    if !key_errors.is_empty() {
        for e in &key_errors {
            eprintln!("error: {e}");
        }
        return Ok(EXIT_BAD_KEYMAP);
    }
    let mut cfg = ctx.config.tui.clone();
    if args.no_mouse {
        cfg.mouse = false;
    }
    let tdir = theme_dir(&ctx.config_file);
    let (theme, theme_err) = resolve_theme(args.theme.as_deref(), &cfg, tdir.as_deref());
    // Subscribed before the workspace opens, so what provisioning reports
    // (a Pod's phases, an image that cannot be pulled) reaches the Logs
    // pane: a workspace from the manager publishes on the manager's bus.
    let early = match ctx.global.workdir {
        None => ctx.manager().await.ok().map(|m| m.events().subscribe()),
        Some(_) => None,
    };
    let ws = ctx.open_workspace().await?;
    // The app leases the workspace it shows (and lets go on `:ws`).
    ctx.release_run_lease();
    let mut opts = AppOptions::new(cfg.clone());
    opts.read_only = args.read_only;
    opts.theme = theme;
    opts.agent = ctx.global.agent.clone();
    opts.user_id = ctx.global.user.clone();
    opts.session = ctx.session();
    opts.theme_dir = tdir;
    opts.config_problems = theme_err.into_iter().collect();
    opts.profile = ctx.profile_name();
    opts.profiles = ctx.config.profile_names();
    opts.unavailable_profiles = ctx
        .config
        .unavailable_builtins()
        .into_iter()
        .map(|(n, why)| (n, why.to_string()))
        .collect();
    // The Workspaces pane and `:ws` / `:profile` need the manager; a
    // profile that cannot build one still opens the TUI on the directory.
    match ctx.manager().await {
        Ok(m) => opts.manager = Some(m.clone()),
        Err(e) => opts
            .config_problems
            .push(format!("workspace manager unavailable: {e:#}")),
    }
    opts.manager_factory = Some(ctx.manager_factory());

    install_panic_hook();
    let (tx, rx) = mpsc::channel(app::CHANNEL_CAPACITY);
    let (input_tx, mut input_rx) = mpsc::channel(INPUT_CAPACITY);
    let _guard = TerminalGuard;
    enter_terminal(cfg.mouse)?;
    capture_stderr(tx.clone());
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut term = Terminal::new(backend)?;
    term.clear()?;
    let input = InputThread::start(input_tx);
    opts.keyboard_enhanced = keyboard_enhanced();
    let mut app = App::with_channel(ws.clone(), opts, tx.clone(), rx);
    tracing::debug!("tui: app built after {:?}", t0.elapsed());
    let chans = Channels {
        input: &input,
        input_rx: &mut input_rx,
        tx: &tx,
    };
    let r = event_loop(&mut term, &mut app, chans, cfg.max_fps, early).await;
    // Kill running commands and agents first: the terminal is still ours
    // while their journal entries are written.
    app.shutdown(app::SHUTDOWN_TIMEOUT).await;
    drop(input);
    restore_terminal();
    app.release_managers().await;
    if !Arc::ptr_eq(&ws, &app.cx.ws) {
        app.cx.ws.close().await;
    }
    ws.close().await;
    // The shell's convention: a signal `s` ends the TUI with `128 + s`.
    r.map(|sig| sig.map_or(0, |s| 128 + s as i32))
}

/// The signals that end the TUI like a quit does: the terminal is
/// restored, running commands are killed and journalled, and the exit
/// status is `128 + signal`. Raw mode turns Ctrl-C and Ctrl-\ into keys,
/// so INT and QUIT only come from `kill`; their default action would end
/// the process with the terminal raw and the command orphaned.
const STOP_SIGNALS: [(tokio::signal::unix::SignalKind, nix::sys::signal::Signal); 4] = {
    use nix::sys::signal::Signal;
    use tokio::signal::unix::SignalKind;
    [
        (SignalKind::terminate(), Signal::SIGTERM),
        (SignalKind::hangup(), Signal::SIGHUP),
        (SignalKind::interrupt(), Signal::SIGINT),
        (SignalKind::quit(), Signal::SIGQUIT),
    ]
};

/// Resolves with the first of [`STOP_SIGNALS`] that arrives. Errors: a
/// handler cannot be installed.
fn stop_signals() -> std::io::Result<impl std::future::Future<Output = nix::sys::signal::Signal>> {
    let mut streams = Vec::new();
    for (kind, sig) in STOP_SIGNALS {
        streams.push((tokio::signal::unix::signal(kind)?, sig));
    }
    Ok(async move {
        let waits = streams.iter_mut().map(|(s, sig)| {
            let sig = *sig;
            Box::pin(async move {
                s.recv().await;
                sig
            })
        });
        futures::future::select_all(waits).await.0
    })
}

/// Room for terminal events not yet handled (keys, resizes, pastes).
const INPUT_CAPACITY: usize = 256;

/// The loop's channels besides the app's own.
struct Channels<'a> {
    input: &'a InputThread,
    /// Terminal events, handled before anything else.
    input_rx: &'a mut mpsc::Receiver<AppMsg>,
    /// The app's channel (stderr capture after a shell).
    tx: &'a mpsc::Sender<AppMsg>,
}

/// Runs the TUI until quit (`Ok(None)`) or one of [`STOP_SIGNALS`]
/// (`Ok(Some(signal))`): a [`turn::LoopState::turn`] (input, pending
/// work, a frame when due), the host's requests, then a wait for the next
/// key, message, engine event, signal or deadline.
async fn event_loop(
    term: &mut Term,
    app: &mut App,
    chans: Channels<'_>,
    max_fps: u32,
    early: Option<crate::engine::events::Subscriber>,
) -> anyhow::Result<Option<nix::sys::signal::Signal>> {
    let Channels {
        input,
        input_rx,
        tx,
    } = chans;
    let fault = match std::env::var(FAULT_ENV).as_deref() {
        Ok("panic") => turn::Fault::Panic,
        Ok("error") => turn::Fault::Error,
        _ => turn::Fault::None,
    };
    let mut st = turn::LoopState::new(max_fps).with_fault(fault);
    let mut sub = early.unwrap_or_else(|| app.cx.ws.events().subscribe());
    let mut sub_ws = app.cx.ws.clone();
    let mut bus_open = true;
    let stop = stop_signals()?;
    tokio::pin!(stop);
    loop {
        st.turn(app, input_rx, &mut sub, term)?;
        // A workspace switch (Workspaces pane, `:ws`) brings another bus.
        if !Arc::ptr_eq(&sub_ws, &app.cx.ws) {
            sub_ws = app.cx.ws.clone();
            sub = sub_ws.events().subscribe();
            bus_open = true;
        }
        for req in app.take_requests() {
            let mouse = app.mouse_enabled();
            match req {
                HostRequest::Osc52(seq) => {
                    let mut out = std::io::stdout();
                    out.write_all(seq.as_bytes())?;
                    out.flush()?;
                }
                HostRequest::Mouse(on) => {
                    if on {
                        execute!(std::io::stdout(), EnableMouseCapture)?;
                    } else {
                        execute!(std::io::stdout(), DisableMouseCapture)?;
                    }
                }
                HostRequest::Redraw => term.clear()?,
                HostRequest::Shell => {
                    let ws = app.cx.ws.clone();
                    let msg = sandbox_shell(term, input, tx, mouse, &ws).await?;
                    app.on_msg(AppMsg::Toast(Level::Info, msg));
                }
                HostRequest::Suspend => {
                    suspended(term, input, tx, mouse, || {
                        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP);
                    })?;
                }
            }
            st.woke();
        }
        if app.quit {
            return Ok(None);
        }
        let deadline = st.deadline(app);
        tokio::select! {
            biased;
            m = input_rx.recv() => {
                match m {
                    Some(m) => app.on_msg(m),
                    None => return Ok(None),
                }
            }
            sig = &mut stop => return Ok(Some(sig)),
            m = app.recv() => {
                match m {
                    Some(m) => app.on_msg(m),
                    None => return Ok(None),
                }
            }
            r = sub.recv(), if bus_open => {
                match r {
                    Some(r) => app.on_engine(r),
                    None => bus_open = false,
                }
            }
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
        st.woke();
    }
}

/// Whether a bare `wsbench` can open the TUI here (stdin and stdout are
/// terminals).
pub fn can_open() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}
