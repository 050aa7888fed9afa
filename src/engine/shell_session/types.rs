//! What a session shell is asked to do and what it answers.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::{BackendError, ExecOutcome};

/// How session shells start and what bounds them.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// The shell, run with no arguments so it reads its script from stdin
    /// (`/bin/sh`: the Bash tool's own shell, there in every image).
    pub argv: Vec<String>,
    /// Bytes of output one command may forward (both streams together);
    /// the rest is read and dropped, so the shell survives (256 MiB).
    pub max_output_bytes: u64,
    /// Longest wait for a new shell to print its ready token (30 s: a
    /// cold bubblewrap or container exec can take seconds).
    pub start_timeout: Duration,
}

impl Default for ShellOptions {
    fn default() -> Self {
        ShellOptions {
            argv: vec!["/bin/sh".into()],
            max_output_bytes: 256 * 1024 * 1024,
            start_timeout: Duration::from_secs(30),
        }
    }
}

/// Input for the command that is running, from whoever watches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputMsg {
    /// Bytes for its stdin (a typed line with its `\n`, or raw keys).
    Data(Bytes),
    /// Close its stdin (end of file, Ctrl-D).
    Eof,
    /// SIGINT to the command's processes and the shell (Ctrl-C).
    Interrupt,
}

/// One command for a session shell.
#[derive(Debug, Default)]
pub struct RunRequest {
    /// The command line, run by the shell itself (so `cd` stays).
    pub command: String,
    /// Wall-clock limit; on expiry the shell and everything it started
    /// are killed and the next command gets a fresh shell.
    pub timeout: Option<Duration>,
    /// Kills like the timeout (the TUI's kill key).
    pub cancel: Option<CancellationToken>,
    /// `Some`: stdin is the session's input FIFO, fed from this channel
    /// (and the channel can interrupt); `None`: stdin is `/dev/null`.
    pub input: Option<mpsc::Receiver<InputMsg>>,
}

/// How a command in a session shell ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Exit code (the shell's own when it died), timeout, cancel,
    /// duration, as [`Sandbox::exec`](crate::backend::Sandbox::exec) says.
    pub exec: ExecOutcome,
    /// The shell's working directory after the command; `None` when the
    /// shell is gone.
    pub cwd: Option<String>,
    /// What the person or model should know: the shell was replaced and
    /// which state was lost, output was dropped past the budget.
    pub notice: Option<String>,
    /// Output bytes read but not forwarded (past `max_output_bytes`).
    pub dropped_bytes: u64,
}

/// Why a session shell could not run a command.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The backend could not start the shell (or its input writer).
    #[error("starting the session shell: {0}")]
    Start(#[source] BackendError),
    /// The shell started but never said it was ready.
    #[error("the session shell did not start: {0}")]
    Setup(String),
    /// Writing the command to the shell failed twice (a fresh shell too).
    #[error("sending the command to the session shell: {0}")]
    Send(#[source] std::io::Error),
}
