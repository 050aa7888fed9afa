//! A real terminal for the fake cloud services' PTY endpoints (E2B's
//! `Start` with `pty`, Daytona's PTY sessions): a host PTY from the
//! `pty-process` crate (the one the local backend uses) whose child is the
//! fake sandbox's bubblewrap box, so `stty size`, echo, `SIGWINCH` and
//! ctrl-c behave as in a real sandbox. The child is a session leader (its
//! pid is its process group), registered in [`FakeBox::procs`] so the
//! services' kill endpoints take its whole tree.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::support::fake_sandbox::{FakeBox, Proc};

/// After the program exits, how long the output is still read for bytes
/// it wrote last (a background job still holding the terminal would
/// otherwise keep the stream open for ever).
const DRAIN: Duration = Duration::from_millis(300);

/// The writable half of a fake sandbox's terminal.
pub struct PtyProc {
    /// Host pid of the session leader (bwrap).
    pub pid: u32,
    writer: tokio::sync::Mutex<pty_process::OwnedWritePty>,
}

impl PtyProc {
    /// Types `data` at the terminal.
    pub async fn write(&self, data: &[u8]) -> std::io::Result<()> {
        let mut w = self.writer.lock().await;
        w.write_all(data).await?;
        w.flush().await
    }

    /// Sets the terminal's size (the program gets `SIGWINCH`).
    pub async fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
        self.writer
            .lock()
            .await
            .resize(pty_process::Size::new(rows, cols))
            .map_err(std::io::Error::other)
    }
}

/// What the terminal shows, then how the program ended.
#[derive(Debug)]
pub enum PtyOut {
    Data(Bytes),
    /// Exit code (`-1` and the signal for a signal death).
    Exit(i32, Option<i32>),
}

/// Starts `argv` in `b` on a new PTY of `rows` × `cols`; the receiver
/// gets the output as it comes (read chunks as they are) and the exit.
pub fn spawn(
    b: &Arc<FakeBox>,
    argv: &[String],
    cwd: &str,
    env: &BTreeMap<String, String>,
    rows: u16,
    cols: u16,
) -> std::io::Result<(Arc<PtyProc>, mpsc::Receiver<PtyOut>)> {
    let (pty, pts) = pty_process::open().map_err(std::io::Error::other)?;
    pty.resize(pty_process::Size::new(rows, cols))
        .map_err(std::io::Error::other)?;
    let mut child = pty_process::Command::from(b.bwrap_command(argv, cwd, env))
        .kill_on_drop(true)
        .spawn(pts)
        .map_err(std::io::Error::other)?;
    let pid = child.id().unwrap_or(0);
    let (mut read, write) = pty.into_split();
    let proc = Arc::new(PtyProc {
        pid,
        writer: tokio::sync::Mutex::new(write),
    });
    b.procs.lock().unwrap().insert(
        pid,
        Proc {
            pgid: pid as i32,
            stdin: None,
            cmd: argv.join(" "),
            pty: Some(proc.clone()),
        },
    );
    let (tx, rx) = mpsc::channel(64);
    let boxed = b.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        let mut status = None;
        loop {
            tokio::select! {
                n = read.read(&mut buf) => match n {
                    // EIO: every slave handle closed.
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let _ = tx.send(PtyOut::Data(Bytes::copy_from_slice(&buf[..n]))).await;
                    }
                },
                st = child.wait(), if status.is_none() => {
                    status = Some(st);
                    // Keep reading what it wrote last, not for ever.
                    loop {
                        match tokio::time::timeout(DRAIN, read.read(&mut buf)).await {
                            Ok(Ok(n)) if n > 0 => {
                                let _ = tx.send(PtyOut::Data(Bytes::copy_from_slice(&buf[..n]))).await;
                            }
                            _ => break,
                        }
                    }
                    break;
                }
            }
        }
        let st = match status {
            Some(st) => st,
            None => child.wait().await,
        };
        boxed.reap(pid);
        use std::os::unix::process::ExitStatusExt;
        let (code, sig) = match st {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => (c, None),
                (None, sig) => (-1, sig),
            },
            Err(_) => (-1, None),
        };
        let _ = tx.send(PtyOut::Exit(code, sig)).await;
    });
    Ok((proc, rx))
}

/// The terminal of running process `pid` in `b`, if it has one.
pub fn find(b: &FakeBox, pid: u32) -> Option<Arc<PtyProc>> {
    b.procs
        .lock()
        .unwrap()
        .get(&pid)
        .and_then(|p| p.pty.clone())
}
