//! A program on a host PTY, for the backends whose commands are host
//! processes (local, and bubblewrap, whose child is `bwrap`). The PTY
//! comes from the `pty-process` crate; resizing uses `rustix`'s
//! `tcsetwinsize` on a duplicate of the master.
//!
//! The child is the leader of a new session with the PTY as its
//! controlling terminal (so job control and ctrl-c work inside), and
//! carries the exec marker in its environment: a kill takes its whole
//! tree (session, descendants, marker) as an exec timeout does. If
//! wsbench dies, the master closes and the kernel hangs the session up
//! (`SIGHUP`), which ends an interactive shell; unlike an exec there is
//! no reaper, since a terminal is always watched by a person.

use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::Command;

use crate::backend::child::ChildStatus;
use crate::backend::process_tree;
use crate::backend::{BackendError, BackendResult, PtyControl, PtySession, PtySize};

/// Starts `cmd` on a new host PTY of `size`. `cmd` must not have set a
/// process group (the child becomes a session leader instead); its
/// environment should carry `marker` (see [`process_tree`]), which
/// [`PtyControl::kill`] uses with `grace` between TERM and KILL.
///
/// Errors: the I/O error of opening the PTY or spawning the child.
pub(crate) fn start(
    mut cmd: Command,
    size: PtySize,
    marker: String,
    grace: Duration,
) -> std::io::Result<PtySession> {
    // No signal the host ignored stays ignored in the terminal's program.
    super::child_start::default_signals(&mut cmd);
    let (pty, pts) = pty_process::open().map_err(to_io)?;
    pty.resize(pty_process::Size::new(size.rows, size.cols))
        .map_err(to_io)?;
    let master = pty.as_fd().try_clone_to_owned()?;
    // `spawn` takes `pts`: the parent keeps no handle on the slave side,
    // so the output ends when the child's side closes.
    let child = pty_process::Command::from(cmd)
        .kill_on_drop(false)
        .spawn(pts)
        .map_err(to_io)?;
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    let (read, write) = pty.into_split();
    Ok(PtySession {
        input: Box::new(write),
        output: Box::new(EioIsEof(read)),
        control: Arc::new(HostPty {
            status: ChildStatus::new(child),
            pid,
            start: process_tree::start_time(pid),
            marker,
            grace,
            master,
        }),
    })
}

fn to_io(e: pty_process::Error) -> std::io::Error {
    match e {
        pty_process::Error::Io(e) => e,
        pty_process::Error::Rustix(e) => e.into(),
        other => std::io::Error::other(other.to_string()),
    }
}

/// The master's read half, with Linux's `EIO` (read after every slave
/// handle closed) turned into the end of file it means.
struct EioIsEof(pty_process::OwnedReadPty);

impl AsyncRead for EioIsEof {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.0).poll_read(cx, buf) {
            Poll::Ready(Err(e)) if e.raw_os_error() == Some(libc::EIO) => Poll::Ready(Ok(())),
            other => other,
        }
    }
}

struct HostPty {
    status: ChildStatus,
    pid: i32,
    /// The program's start time, read right after the spawn: a `wait` in
    /// another task may reap it during a kill, and a reused pid must not
    /// get the group signals ([`process_tree::kill_tree_of`]).
    start: Option<u64>,
    marker: String,
    grace: Duration,
    /// A duplicate of the master, for `TIOCSWINSZ` while the halves are
    /// in the caller's hands.
    master: OwnedFd,
}

#[async_trait]
impl PtyControl for HostPty {
    fn id(&self) -> String {
        self.pid.to_string()
    }

    async fn resize(&self, size: PtySize) -> BackendResult<()> {
        let ws = rustix::termios::Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&self.master, ws).map_err(|e| BackendError::Io {
            context: "resizing the terminal".into(),
            source: e.into(),
        })
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        self.status.wait("the terminal's program").await
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.status.try_status().is_none() && self.pid > 0 {
            process_tree::kill_tree_of_async(self.pid, self.start, self.marker.clone(), self.grace)
                .await;
        }
        Ok(())
    }
}
