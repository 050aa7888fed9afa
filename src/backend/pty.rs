//! An interactive terminal inside a sandbox: what to start on a PTY, the
//! two byte streams of the terminal, and the control half (resize, wait,
//! kill). Backends implement [`Sandbox::pty`](super::Sandbox::pty) with
//! their own protocol (a host PTY for local and bubblewrap, a `tty` exec
//! for Docker and Kubernetes, the services' PTY APIs for the cloud ones);
//! whether one can is stated in [`Capabilities::pty`](super::Capabilities::pty).
//!
//! A terminal has one output stream: the program's stdout and stderr are
//! the same device, so they arrive merged and in order, with the line
//! discipline's echo and `\r\n` translations, exactly as a terminal
//! emulator would receive them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};

use super::BackendResult;

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PtySize {
    /// Rows (lines), at least 1.
    pub rows: u16,
    /// Columns, at least 1.
    pub cols: u16,
}

impl PtySize {
    /// `rows` × `cols`, each raised to at least 1 (a 0-sized terminal
    /// makes some programs divide by zero).
    pub fn new(rows: u16, cols: u16) -> Self {
        PtySize {
            rows: rows.max(1),
            cols: cols.max(1),
        }
    }
}

impl Default for PtySize {
    /// 24 × 80, the VT100's size and what most programs assume.
    fn default() -> Self {
        PtySize { rows: 24, cols: 80 }
    }
}

/// The shell `!` and `wsbench shell` start when no command is given: the
/// image's `bash` when it has one, else `sh`, both interactive. Run
/// through `/bin/sh -c` because which one exists is only known inside.
pub const INTERACTIVE_SHELL: &str =
    "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi";

/// A program to start on a new PTY.
#[derive(Debug, Clone, Default)]
pub struct PtyRequest {
    /// Program and arguments, run directly (no shell).
    pub argv: Vec<String>,
    /// Working directory in the backend namespace; `None` = the workdir.
    pub cwd: Option<String>,
    /// Extra environment, laid over the backend's base env. Callers set
    /// `TERM` from the terminal that will show the output; backends set
    /// `TERM=xterm-256color` when it is absent.
    pub env: BTreeMap<String, String>,
    /// Initial size.
    pub size: PtySize,
}

impl PtyRequest {
    /// `argv` on a terminal of `size`, defaults for the rest.
    pub fn new<I, S>(argv: I, size: PtySize) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PtyRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            size,
            ..Default::default()
        }
    }

    /// The interactive shell ([`INTERACTIVE_SHELL`]) on a terminal of `size`.
    pub fn shell(size: PtySize) -> Self {
        Self::new(["/bin/sh", "-c", INTERACTIVE_SHELL], size)
    }

    /// The environment to start with: `env`, plus `TERM=xterm-256color`
    /// when the caller gave no `TERM`.
    pub fn env_with_term(&self) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        env.entry("TERM".into())
            .or_insert_with(|| "xterm-256color".into());
        env
    }
}

/// Control half of a terminal session.
#[async_trait]
pub trait PtyControl: Send + Sync {
    /// Backend-specific id (host pid, exec id, pid in the sandbox), for
    /// display.
    fn id(&self) -> String;
    /// Tells the terminal its new size (the program gets `SIGWINCH`).
    async fn resize(&self, size: PtySize) -> BackendResult<()>;
    /// Waits for the program to exit and returns its exit code (`128 +
    /// signal` for a signal death; `None` when the backend cannot learn
    /// it). May be called any number of times.
    async fn wait(&self) -> BackendResult<Option<i32>>;
    /// Kills the program and everything it started.
    async fn kill(&self) -> BackendResult<()>;
}

/// A program running on a PTY: what is typed goes to `input`, what the
/// terminal shows comes from `output` (end of file once the program and
/// everything holding the terminal have exited).
pub struct PtySession {
    /// Bytes typed at the terminal (keys, pasted text, control bytes such
    /// as `\x03` for ctrl-c). Dropping it does not end the program.
    pub input: Box<dyn AsyncWrite + Send + Unpin>,
    /// What the terminal shows: stdout and stderr merged, with echo.
    pub output: Box<dyn AsyncRead + Send + Unpin>,
    /// Resize / wait / kill.
    pub control: Arc<dyn PtyControl>,
}

impl fmt::Debug for PtySession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PtySession")
            .field("id", &self.control.id())
            .finish()
    }
}

/// Whether a sandbox can start a program on a PTY, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "pty", content = "reason", rename_all = "lowercase")]
pub enum PtySupport {
    /// [`Sandbox::pty`](super::Sandbox::pty) works.
    Supported,
    /// It returns [`BackendError::Unsupported`](super::BackendError::Unsupported);
    /// the text says why, in one line, for the user.
    Unsupported(&'static str),
    /// No PTY either (the text says why, as for `Unsupported`), but
    /// [`Sandbox::line_shell`](super::Sandbox::line_shell) gives a
    /// line-mode shell session that `!` and `wsbench shell` fall back to.
    #[serde(rename = "line_mode")]
    LineMode(&'static str),
}

impl PtySupport {
    /// True for [`PtySupport::Supported`].
    pub fn is_supported(self) -> bool {
        matches!(self, PtySupport::Supported)
    }

    /// The reason there is no PTY, when there is none.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            PtySupport::Supported => None,
            PtySupport::Unsupported(r) | PtySupport::LineMode(r) => Some(r),
        }
    }

    /// True for [`PtySupport::LineMode`].
    pub fn has_line_mode(self) -> bool {
        matches!(self, PtySupport::LineMode(_))
    }
}

/// The wrapper that sets the terminal's size inside before the program
/// runs, for the backends whose size message can only be sent once the
/// program has started (Docker's `resize_exec`, the Kubernetes resize
/// channel): without it, a program that asks at once (`stty size`, a
/// full-screen editor's first frame) may see 0 × 0. A missing `stty` is
/// ignored; the resize sent after the start still arrives.
const SIZED: &str = "stty rows \"$1\" cols \"$2\" 2>/dev/null; shift 2; exec \"$@\"";

/// `argv` run through [`SIZED`] for a terminal of `size`:
/// `/bin/sh -c <SIZED> sh <rows> <cols> <argv…>`.
pub(crate) fn sized_argv(argv: &[String], size: PtySize) -> Vec<String> {
    let mut out = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        SIZED.into(),
        "sh".into(),
        size.rows.to_string(),
        size.cols.to_string(),
    ];
    out.extend(argv.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_argv_passes_the_command_unchanged() {
        let argv = vec!["echo".to_string(), "a b".to_string(), "$x".to_string()];
        let out = sized_argv(&argv, PtySize::new(0, 7));
        assert_eq!(&out[4..6], ["1", "7"]);
        assert_eq!(&out[6..], argv.as_slice());
    }

    #[test]
    fn term_defaults_only_when_absent() {
        let mut req = PtyRequest::shell(PtySize::default());
        assert_eq!(req.env_with_term()["TERM"], "xterm-256color");
        req.env.insert("TERM".into(), "screen".into());
        assert_eq!(req.env_with_term()["TERM"], "screen");
    }
}
