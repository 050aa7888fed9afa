//! One running shell process: starting it and reading a command's output
//! up to its end token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::frame::{Scanner, parse_trailer};
use super::script;
use super::types::{ShellError, ShellOptions};
use crate::backend::{OutputChunk, OutputSink, ProcessControl, Sandbox, SpawnRequest, StreamKind};

/// How long the other stream is still read once one reached end of file
/// (the shell died), for its last bytes.
const DRAIN_AFTER_DEATH: Duration = Duration::from_millis(300);

/// A shell process and its pipes.
pub(crate) struct Live {
    stdin: Box<dyn AsyncWrite + Send + Unpin>,
    stdout: Box<dyn AsyncRead + Send + Unpin>,
    stderr: Box<dyn AsyncRead + Send + Unpin>,
    /// Wait / kill of the whole shell tree.
    pub(crate) control: Arc<dyn ProcessControl>,
    /// The directory holding the `in` and `ctl` FIFOs; `None` when the
    /// sandbox could not make them (no input, Ctrl-C only as a kill).
    pub(crate) fifo_dir: Option<String>,
    /// The sandbox's [`Sandbox::recoveries`] when the shell started: a
    /// higher count now means the shell (and its FIFOs) belong to a
    /// sandbox that was replaced or restarted.
    pub(crate) recoveries: u64,
}

/// How reading a command's output ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// Both end tokens seen; the stdout trailer.
    Done(Vec<u8>),
    /// A stream reached end of file: the shell is gone.
    Died,
    /// The deadline passed.
    TimedOut,
    /// The cancel token fired.
    Cancelled,
}

/// What bounds one read of a command's output.
pub(crate) struct Limits<'a> {
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: Option<&'a CancellationToken>,
    /// Bytes that may still be forwarded.
    pub(crate) budget: u64,
}

impl Live {
    /// Starts a shell with `opts.argv` in the workdir and waits for its
    /// ready token. Errors: the spawn failed, or the shell died or stayed
    /// silent for `opts.start_timeout`.
    pub(crate) async fn start(
        sandbox: &Arc<dyn Sandbox>,
        opts: &ShellOptions,
    ) -> Result<Live, ShellError> {
        let proc = sandbox
            .spawn(SpawnRequest {
                argv: opts.argv.clone(),
                ..Default::default()
            })
            .await
            .map_err(ShellError::Start)?;
        let mut live = Live {
            stdin: proc.stdin,
            stdout: proc.stdout,
            stderr: proc.stderr,
            control: proc.control,
            fifo_dir: None,
            // Read after the spawn: a spawn repeated on a recovered
            // sandbox ran on the new one.
            recoveries: sandbox.recoveries(),
        };
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let id = uuid::Uuid::new_v4().simple().to_string();
        let setup = script::setup(&nonce, &id);
        if let Err(e) = live.send(&setup).await {
            live.control.kill().await.ok();
            return Err(ShellError::Setup(format!("writing the set-up: {e}")));
        }
        let limits = Limits {
            deadline: Some(Instant::now() + opts.start_timeout),
            cancel: None,
            budget: 64 * 1024,
        };
        let mut said = Vec::new();
        let (ended, _) = live.read_to_end(&nonce, None, limits, &mut said).await;
        match ended {
            Ended::Done(trailer) => {
                live.fifo_dir = parse_trailer(&trailer).1;
                Ok(live)
            }
            other => {
                live.control.kill().await.ok();
                let said = String::from_utf8_lossy(&said);
                Err(ShellError::Setup(format!(
                    "{other:?} before it was ready{}",
                    if said.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", said.trim())
                    }
                )))
            }
        }
    }

    /// Writes `text` to the shell's stdin.
    pub(crate) async fn send(&mut self, text: &str) -> std::io::Result<()> {
        self.stdin.write_all(text.as_bytes()).await?;
        self.stdin.flush().await
    }

    /// Reads both streams until the end tokens of `nonce` (or death,
    /// deadline, cancel), forwarding the command's bytes to `sink` within
    /// the budget. With no sink, up to the budget is kept in `keep` (the
    /// set-up's diagnostics). Returns how it ended and the bytes dropped.
    pub(crate) async fn read_to_end(
        &mut self,
        nonce: &str,
        sink: Option<&OutputSink>,
        limits: Limits<'_>,
        keep: &mut Vec<u8>,
    ) -> (Ended, u64) {
        let mut scanners = [Scanner::new(nonce), Scanner::new(nonce)];
        let mut done = [false, false];
        let mut bufs = [vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]];
        let mut budget = limits.budget;
        let mut dropped = 0u64;
        let timeout = async {
            match limits.deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(timeout);
        let cancel = async {
            match limits.cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(cancel);
        let ended = loop {
            if done[0] && done[1] {
                let trailer = scanners[0].trailer().unwrap_or_default().to_vec();
                break Ended::Done(trailer);
            }
            let [ob, eb] = &mut bufs;
            let (i, r) = tokio::select! {
                r = self.stdout.read(ob), if !done[0] => (0, r),
                r = self.stderr.read(eb), if !done[1] => (1, r),
                _ = &mut timeout => break Ended::TimedOut,
                _ = &mut cancel => break Ended::Cancelled,
            };
            let n = match r {
                Ok(0) | Err(_) => {
                    self.drain_other(i, &mut scanners, sink, &mut budget, &mut dropped, keep)
                        .await;
                    break Ended::Died;
                }
                Ok(n) => n,
            };
            let mut out = Vec::new();
            done[i] = scanners[i].feed(&bufs[i][..n], &mut |b| out.extend_from_slice(b));
            forward(i, out, sink, &mut budget, &mut dropped, keep).await;
        };
        (ended, dropped)
    }

    /// After stream `dead` ended: the rest of both scanners and what the
    /// other stream still says within [`DRAIN_AFTER_DEATH`].
    async fn drain_other(
        &mut self,
        dead: usize,
        scanners: &mut [Scanner; 2],
        sink: Option<&OutputSink>,
        budget: &mut u64,
        dropped: &mut u64,
        keep: &mut Vec<u8>,
    ) {
        let mut rest = Vec::new();
        let other: &mut (dyn AsyncRead + Send + Unpin) = if dead == 0 {
            &mut *self.stderr
        } else {
            &mut *self.stdout
        };
        let mut buf = vec![0u8; 64 * 1024];
        let read_rest = async {
            loop {
                match other.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) if rest.len() < 1024 * 1024 => rest.extend_from_slice(&buf[..n]),
                    Ok(_) => {}
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_AFTER_DEATH, read_rest).await;
        let o = 1 - dead;
        let mut out = Vec::new();
        scanners[o].feed(&rest, &mut |b| out.extend_from_slice(b));
        scanners[o].flush(&mut |b| out.extend_from_slice(b));
        forward(o, out, sink, budget, dropped, keep).await;
        let mut out = Vec::new();
        scanners[dead].flush(&mut |b| out.extend_from_slice(b));
        forward(dead, out, sink, budget, dropped, keep).await;
    }
}

/// Sends `data` of stream `i` (0 stdout, 1 stderr) to `sink` while the
/// budget lasts; the rest is counted in `dropped`.
async fn forward(
    i: usize,
    mut data: Vec<u8>,
    sink: Option<&OutputSink>,
    budget: &mut u64,
    dropped: &mut u64,
    keep: &mut Vec<u8>,
) {
    if data.is_empty() {
        return;
    }
    let fits = (*budget).min(data.len() as u64) as usize;
    *dropped += (data.len() - fits) as u64;
    *budget -= fits as u64;
    data.truncate(fits);
    if data.is_empty() {
        return;
    }
    let stream = if i == 0 {
        StreamKind::Stdout
    } else {
        StreamKind::Stderr
    };
    match sink {
        Some(s) => {
            let _ = s
                .send(OutputChunk {
                    stream,
                    data: Bytes::from(data),
                })
                .await;
        }
        None => keep.extend_from_slice(&data),
    }
}
