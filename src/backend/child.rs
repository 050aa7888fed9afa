//! What the local and bubblewrap backends share about a host child
//! process: its exit code in the shell's terms, pumping its output into an
//! [`OutputSink`], waiting for it against a deadline or a cancel (killing
//! its tree), and waiting for it from several callers at once.

use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdout};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::process_tree;
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

/// Most bytes one read of a child's pipe takes (and so the largest
/// [`OutputChunk`]): 256 KiB, with the pipe grown to match
/// ([`grow_pipe`]), so a flood costs one read, one chunk and one wake-up
/// per 256 KiB instead of per 64 KiB (issue 16: `wsbench exec` was a
/// fraction of `cat`'s throughput). Each chunk is an exact-size copy, so a
/// consumer keeping a small slice of it pins at most this much.
pub(crate) const PUMP_CHUNK: usize = 256 * 1024;

/// Asks the kernel for a pipe buffer of [`PUMP_CHUNK`] bytes on `fd` (the
/// read end of a child's stdout or stderr). Best effort: an unprivileged
/// process may be held to `/proc/sys/fs/pipe-max-size` (1 MiB by default)
/// or its user's pipe quota, and then keeps the 64 KiB default.
pub(crate) fn grow_pipe(fd: std::os::fd::BorrowedFd<'_>) {
    let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PUMP_CHUNK as i32));
}

/// Copies `reader` to `sink` in chunks of up to [`PUMP_CHUNK`] bytes
/// until end of file. A sink nobody reads any more is ignored, but the
/// reader is still drained so the child never blocks on a full pipe.
async fn pump(mut reader: impl AsyncRead + Unpin, stream: StreamKind, sink: Option<OutputSink>) {
    use futures::FutureExt as _;
    let mut buf = vec![0u8; PUMP_CHUNK];
    let mut eof = false;
    while !eof {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(mut n) => {
                // Take what is already in the pipe too, without waiting:
                // a writer that is faster than us then costs one chunk
                // (one wake-up of each stage downstream) per up to
                // PUMP_CHUNK bytes, not one per write(2) of the writer.
                while n < buf.len() {
                    match reader.read(&mut buf[n..]).now_or_never() {
                        Some(Ok(0)) | Some(Err(_)) => {
                            eof = true;
                            break;
                        }
                        Some(Ok(m)) => n += m,
                        None => break,
                    }
                }
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

/// Starts the I/O of an exec's child: writes `stdin` (when given and piped)
/// from its own task, then closes it, and pumps `stdout` and the child's
/// piped stderr into `sink`. Returns the two pump tasks; the caller decides
/// how long to wait for them once the child has exited (background
/// grandchildren may hold the pipes open for ever).
pub(crate) fn start_io(
    child: &mut Child,
    stdout: ChildStdout,
    stdin: Option<Bytes>,
    sink: Option<OutputSink>,
) -> (JoinHandle<()>, JoinHandle<()>) {
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = pipe.write_all(&data).await;
            let _ = pipe.shutdown().await;
        });
    }
    let stderr = child.stderr.take().expect("piped");
    {
        use std::os::fd::AsFd as _;
        grow_pipe(stdout.as_fd());
        grow_pipe(stderr.as_fd());
    }
    let out = tokio::spawn(pump(stdout, StreamKind::Stdout, sink.clone()));
    let err = tokio::spawn(pump(stderr, StreamKind::Stderr, sink));
    (out, err)
}

/// Waits up to `within` for an exec's two pump tasks ([`start_io`]) after
/// its child exited, then stops them: a background grandchild that keeps
/// the pipes open (a double-forked `setsid` escapee, say) must neither
/// hang the call nor keep the output sink open (its receiver, the CLI's
/// printer or the Bash tool's collector, waits for every sender to drop).
/// Aborting drops each task's pipe reader and sink sender; what the
/// grandchild writes later is not read. Returns true when the pumps had
/// to be stopped.
pub(crate) async fn drain_then_stop(
    mut out: JoinHandle<()>,
    mut err: JoinHandle<()>,
    within: Duration,
) -> bool {
    let drain = async {
        let _ = (&mut out).await;
        let _ = (&mut err).await;
    };
    let done = tokio::time::timeout(within, drain).await.is_ok();
    out.abort();
    err.abort();
    !done
}

/// How an exec's child ended.
pub(crate) struct Ended {
    /// Its exit status.
    pub(crate) status: std::process::ExitStatus,
    /// The deadline passed first (the tree was killed).
    pub(crate) timed_out: bool,
    /// The cancel fired first (the tree was killed).
    pub(crate) cancelled: bool,
}

/// Waits for `child` to exit, or for `deadline` or `cancel`, whichever
/// comes first; on the last two the tree (`pid`'s group and every process
/// carrying `marker`) is killed, TERM then KILL after `grace`, and the
/// child is then reaped. Errors: the I/O error of the wait.
pub(crate) async fn wait_or_kill(
    child: &mut Child,
    deadline: Option<Instant>,
    cancel: Option<&CancellationToken>,
    (pid, marker): (i32, &str),
    grace: Duration,
) -> std::io::Result<Ended> {
    let timeout = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    let cancel = async {
        match cancel {
            Some(c) => c.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let kill = || process_tree::kill_tree_async(pid, marker.to_string(), grace);
    let (mut timed_out, mut cancelled) = (false, false);
    let status = tokio::select! {
        s = child.wait() => s,
        _ = timeout => { timed_out = true; kill().await; child.wait().await }
        _ = cancel => { cancelled = true; kill().await; child.wait().await }
    }?;
    Ok(Ended {
        status,
        timed_out,
        cancelled,
    })
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
