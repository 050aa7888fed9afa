//! Commands and long-lived processes: what to run, the output it streams,
//! how it ended, and the pipes of a spawned process.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::BackendResult;

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A chunk of raw output bytes, as the backend received it (no line framing).
#[derive(Debug, Clone)]
pub struct OutputChunk {
    /// Source stream.
    pub stream: StreamKind,
    /// Raw bytes (may split a UTF-8 character; consumers reassemble).
    pub data: Bytes,
}

/// One command to run.
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// Program and arguments, run directly (no shell). Callers wrap in
    /// `sh -c` when they want shell syntax.
    pub argv: Vec<String>,
    /// Working directory in the backend namespace; `None` = the workdir.
    pub cwd: Option<String>,
    /// Extra environment variables, laid over the backend's base env.
    pub env: BTreeMap<String, String>,
    /// Bytes fed to stdin, which is then closed. `None` = stdin is closed
    /// at once (a command waiting on stdin sees EOF, never hangs).
    pub stdin: Option<Bytes>,
    /// Wall-clock limit. On expiry the whole process tree is killed
    /// (where [`Capabilities::kill_on_timeout`](super::Capabilities::kill_on_timeout)) and the outcome says
    /// `timed_out`.
    pub timeout: Option<Duration>,
    /// Cancels the command like a timeout (used by the TUI's kill key).
    pub cancel: Option<CancellationToken>,
}

impl ExecRequest {
    /// `argv` with defaults for everything else.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// `sh -c <line>`: the whole line goes to a real shell unchanged (C18).
    pub fn shell(line: impl Into<String>) -> Self {
        Self::new(["/bin/sh".to_string(), "-c".to_string(), line.into()])
    }
}

/// How a finished command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExecOutcome {
    /// Exit code; for a signal death, `128 + signal` as shells report it.
    /// `None` only when the backend could not learn it.
    pub exit_code: Option<i32>,
    /// Signal number if the process was killed by one.
    pub signal: Option<i32>,
    /// The timeout fired and the process tree was killed.
    pub timed_out: bool,
    /// The cancel token fired and the process tree was killed.
    pub cancelled: bool,
    /// Wall-clock duration.
    #[serde(with = "duration_ms")]
    pub duration: Duration,
}

mod duration_ms {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// Chunks an output channel between two stages of one command's output
/// holds (backend → Bash tool → front end). A chunk is at most 256 KiB
/// (the local pump's read), so one channel holds at most 4 MiB in
/// flight; a deeper one only adds memory under a flood (issue 16), since
/// the producer waits for the consumer anyway.
pub const OUTPUT_CHANNEL_CHUNKS: usize = 16;

/// Channel end that receives output chunks while a command runs.
pub type OutputSink = mpsc::Sender<OutputChunk>;

/// A long-lived process to start (an MCP stdio server, a shell).
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    /// Program and arguments, run directly.
    pub argv: Vec<String>,
    /// Working directory in the backend namespace; `None` = the workdir.
    pub cwd: Option<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
}

/// Control half of a spawned process.
#[async_trait]
pub trait ProcessControl: Send + Sync {
    /// Backend-specific id (host pid, exec id, ...), for display.
    fn id(&self) -> String;
    /// Waits for exit. Returns the exit code (`128 + signal` for a signal).
    async fn wait(&self) -> BackendResult<Option<i32>>;
    /// Returns the exit code if the process has already exited.
    fn try_status(&self) -> Option<Option<i32>>;
    /// Kills the process and everything it started.
    async fn kill(&self) -> BackendResult<()>;
}

/// A running long-lived process with its three pipes.
pub struct Process {
    /// Writes to the process's stdin; drop it to close stdin.
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    /// Reads the process's stdout.
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    /// Reads the process's stderr.
    pub stderr: Box<dyn AsyncRead + Send + Unpin>,
    /// Wait / kill.
    pub control: Arc<dyn ProcessControl>,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("id", &self.control.id())
            .finish()
    }
}
