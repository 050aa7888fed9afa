//! A line-mode shell session: the fallback of `!` and `wsbench shell` on
//! a backend whose service has no terminal but keeps a shell's state
//! between commands (OpenSandbox execd's bash sessions). Each line runs
//! in the one shell, so `cd`, `export` and functions carry over; there is
//! no PTY, so no echo, no full-screen program, no `isatty`, no input to a
//! running command.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{BackendResult, ExecOutcome, OutputSink};

/// One shell session of a backend, one line at a time.
#[async_trait]
pub trait LineShell: Send + Sync {
    /// The service's session id, for display.
    fn id(&self) -> String;

    /// Runs `line` in the session's shell, streaming its output into
    /// `sink` (stdout and stderr apart), until it ends or `cancel` fires.
    /// A cancelled line ends the session (the service cannot interrupt
    /// one line of it): the outcome says `cancelled`, and the next call
    /// answers [`BackendError::Remote`](super::BackendError::Remote) with
    /// code `session_ended`; open a new session.
    ///
    /// Errors: the service refused or the stream broke.
    async fn run(
        &self,
        line: &str,
        sink: Option<OutputSink>,
        cancel: Option<CancellationToken>,
    ) -> BackendResult<ExecOutcome>;

    /// Ends the session and its shell. Ending one that is already gone is
    /// not an error.
    async fn close(&self) -> BackendResult<()>;
}
