//! Attaching the real terminal to a program on a sandbox PTY: the one
//! loop behind the TUI's `!` and `wsbench shell` (issue 17 point 2).
//!
//! * stdin is put in raw mode (when it is a terminal) and its bytes go to
//!   the PTY unchanged, so ctrl-c, arrows and editors reach the program;
//! * the PTY's output is copied to stdout as it comes;
//! * `SIGWINCH` resizes the PTY to the terminal's new size;
//! * when the program exits, output still arriving is copied for up to
//!   [`DRAIN_AFTER_EXIT`] (a background child may hold the terminal open
//!   for ever), raw mode is switched off and the exit code returned.
//!
//! stdin is read by a thread that polls before each read and stops when
//! told, so no read is left pending after the attach ends: a pending read
//! would swallow the first key typed at the TUI afterwards.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::backend::{BackendKind, PtyRequest, PtySession, PtySize, Sandbox};

/// How long output is still copied after the program exited.
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// How often the stdin thread looks at its stop flag.
const STDIN_POLL: Duration = Duration::from_millis(50);

/// One read of stdin or of the PTY, in bytes.
const CHUNK: usize = 16 * 1024;

/// The terminal's size, or 24 × 80 when stdout is not a terminal.
pub fn terminal_size() -> PtySize {
    match ratatui::crossterm::terminal::size() {
        Ok((cols, rows)) if std::io::stdout().is_terminal() => PtySize::new(rows, cols),
        _ => PtySize::default(),
    }
}

/// The request for the interactive shell (or `command`, when not empty)
/// in the sandbox's workdir, sized like this terminal, with its `TERM`.
pub fn shell_request(command: &[String]) -> PtyRequest {
    let size = terminal_size();
    let mut req = if command.is_empty() {
        PtyRequest::shell(size)
    } else {
        PtyRequest::new(command.iter().cloned(), size)
    };
    if let Ok(term) = std::env::var("TERM")
        && !term.is_empty()
    {
        req.env.insert("TERM".into(), term);
    }
    req
}

/// Why `sb` cannot give a shell, in one line, or `None` when it can (a
/// terminal, or the line-mode shell of [`super::line_mode`]).
pub fn why_no_shell(sb: &dyn Sandbox) -> Option<String> {
    let pty = sb.capabilities().pty;
    if pty.has_line_mode() {
        return None;
    }
    pty.reason().map(|r| {
        format!(
            "no shell in this workspace: the {} backend does not support {r}",
            sb.kind()
        )
    })
}

/// The line printed before attaching: where the shell runs, and for a
/// local workspace that it is not sandboxed.
pub fn banner(sb: &dyn Sandbox, workspace: &str) -> String {
    let how = match sb.kind() {
        BackendKind::Local => format!(
            "NOT sandboxed: a local workspace runs on this host as you, in {}",
            sb.workdir()
        ),
        kind => format!("inside the {kind} sandbox, in {}", sb.workdir()),
    };
    if let Some(no_pty) = sb
        .capabilities()
        .pty
        .has_line_mode()
        .then(|| sb.capabilities().pty.reason())
        .flatten()
    {
        return format!(
            "wsbench: {} (the {} backend does not support {no_pty}); shell of workspace {workspace}, {how}",
            super::line_mode::describe(),
            sb.kind()
        );
    }
    format!("wsbench: shell of workspace {workspace}, {how}; exit it to return")
}

/// Starts `req` on `sb` and attaches this terminal to it until it exits;
/// on a backend with [`PtySupport::LineMode`](crate::backend::PtySupport::LineMode),
/// runs the line-mode shell ([`super::line_mode`]) instead.
/// Returns its exit code (`None` when the backend could not learn it).
///
/// Errors: the backend's (unsupported, cannot start); the terminal
/// cannot be put in raw mode.
pub async fn run(sb: &dyn Sandbox, req: PtyRequest) -> anyhow::Result<Option<i32>> {
    if sb.capabilities().pty.has_line_mode() {
        // No terminal: the interactive shell becomes the line-mode one;
        // a command runs once, as one line.
        let shell = PtyRequest::shell(req.size);
        let command = if req.argv == shell.argv {
            None
        } else {
            Some(
                shlex::try_join(req.argv.iter().map(String::as_str))
                    .context("quoting the command")?,
            )
        };
        return super::line_mode::run(sb, command).await;
    }
    let session = sb
        .pty(req)
        .await
        .with_context(|| format!("starting a terminal in the {} sandbox", sb.kind()))?;
    attach(session).await
}

/// Raw mode for as long as it lives, when stdin is a terminal.
struct RawMode(bool);

impl RawMode {
    fn enter() -> anyhow::Result<RawMode> {
        if !std::io::stdin().is_terminal() {
            return Ok(RawMode(false));
        }
        ratatui::crossterm::terminal::enable_raw_mode()
            .context("switching the terminal to raw mode")?;
        Ok(RawMode(true))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if self.0 {
            let _ = ratatui::crossterm::terminal::disable_raw_mode();
        }
    }
}

/// Attaches this terminal to `session` until its program exits (see the
/// module docs). Returns the exit code.
///
/// Errors: raw mode cannot be entered; the wait fails.
pub async fn attach(session: PtySession) -> anyhow::Result<Option<i32>> {
    let PtySession {
        mut input,
        mut output,
        control,
    } = session;
    let _raw = RawMode::enter()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut keys) = mpsc::channel::<Vec<u8>>(64);
    let reader = stdin_thread(tx, stop.clone());
    let typing = tokio::spawn(async move {
        while let Some(bytes) = keys.recv().await {
            if input.write_all(&bytes).await.is_err() || input.flush().await.is_err() {
                break;
            }
        }
    });
    let mut showing = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        let mut buf = vec![0u8; CHUNK];
        loop {
            match output.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    let _ = out.flush().await;
                }
            }
        }
    });
    let resizing = {
        let control = control.clone();
        let winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change());
        tokio::spawn(async move {
            let Ok(mut winch) = winch else { return };
            while winch.recv().await.is_some() {
                let _ = control.resize(terminal_size()).await;
            }
        })
    };
    let code = control.wait().await;
    let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, &mut showing).await;
    showing.abort();
    resizing.abort();
    typing.abort();
    stop.store(true, Ordering::SeqCst);
    let _ = tokio::task::spawn_blocking(move || reader.map(|r| r.join())).await;
    Ok(code?)
}

/// Reads stdin on a thread until `stop` (or end of file, or the receiver
/// is gone); polls first so it never blocks in a read past `stop`.
pub(super) fn stdin_thread(
    tx: mpsc::Sender<Vec<u8>>,
    stop: Arc<AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("wsbench-attach-stdin".into())
        .spawn(move || {
            use rustix::event::{PollFd, PollFlags, Timespec};
            let stdin = rustix::stdio::stdin();
            let timeout = Timespec {
                tv_sec: 0,
                tv_nsec: STDIN_POLL.as_nanos() as _,
            };
            let mut buf = vec![0u8; CHUNK];
            while !stop.load(Ordering::SeqCst) {
                let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(0) => continue,
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => break,
                }
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                match rustix::io::read(stdin, &mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(_) => break,
                }
            }
        })
        .ok()
}
