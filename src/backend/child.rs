//! What the local and bubblewrap backends share about a host child
//! process: its exit code in the shell's terms, pumping its output into an
//! [`OutputSink`], and waiting for it from several callers at once.

use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;

use super::{BackendError, BackendResult, OutputChunk, OutputSink, StreamKind};

/// `(exit code, signal)`: a normal exit gives its code; death by signal
/// `s` gives the shell's `128 + s` and `Some(s)`; neither gives `None`s.
pub(crate) fn exit_code_of(status: std::process::ExitStatus) -> (Option<i32>, Option<i32>) {
    match (status.code(), status.signal()) {
        (Some(c), _) => (Some(c), None),
        (None, Some(s)) => (Some(128 + s), Some(s)),
        _ => (None, None),
    }
}

/// Copies `reader` to `sink` in chunks of up to 64 KiB until end of file.
/// A sink nobody reads any more is ignored, but the reader is still
/// drained so the child never blocks on a full pipe.
pub(crate) async fn pump(
    mut reader: impl AsyncRead + Unpin,
    stream: StreamKind,
    sink: Option<OutputSink>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Some(sink) = &sink {
                    let _ = sink
                        .send(OutputChunk {
                            stream,
                            data: Bytes::copy_from_slice(&buf[..n]),
                        })
                        .await;
                }
            }
        }
    }
}

/// A child whose exit code is remembered once seen, so `wait` and
/// `try_status` can be called any number of times from any task.
pub(crate) struct ChildStatus {
    child: tokio::sync::Mutex<Child>,
    status: Mutex<Option<Option<i32>>>,
}

impl ChildStatus {
    pub(crate) fn new(child: Child) -> Self {
        ChildStatus {
            child: tokio::sync::Mutex::new(child),
            status: Mutex::new(None),
        }
    }

    fn remember(&self, status: std::process::ExitStatus) -> Option<i32> {
        let code = exit_code_of(status).0;
        *self.status.lock().expect("status lock") = Some(code);
        code
    }

    /// Waits for the exit; `what` names the process in the I/O error.
    pub(crate) async fn wait(&self, what: &str) -> BackendResult<Option<i32>> {
        if let Some(s) = *self.status.lock().expect("status lock") {
            return Ok(s);
        }
        let status = self
            .child
            .lock()
            .await
            .wait()
            .await
            .map_err(|e| BackendError::Io {
                context: format!("waiting for {what}"),
                source: e,
            })?;
        Ok(self.remember(status))
    }

    /// The exit code if the child has exited (`Some(None)`: exited
    /// without a code), `None` while it runs or another task is waiting.
    pub(crate) fn try_status(&self) -> Option<Option<i32>> {
        if let Some(s) = *self.status.lock().expect("status lock") {
            return Some(s);
        }
        let mut child = self.child.try_lock().ok()?;
        match child.try_wait() {
            Ok(Some(st)) => Some(self.remember(st)),
            _ => None,
        }
    }
}
