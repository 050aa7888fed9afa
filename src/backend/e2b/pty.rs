//! A terminal in an E2B sandbox through envd's process API
//! (`docs/specs/e2b/process.proto`): `Start` with `pty.size` opens the
//! stream whose `data.pty` events are what the terminal shows;
//! `SendInput` with `input.pty` types; `Update` with `pty.size` resizes;
//! `SendSignal` (`SIGKILL`) and the marker sweep kill the tree; the
//! stream's `end` event carries the exit status.
//!
//! Limits: input goes one `SendInput` call per read of at most
//! [`INPUT_CHUNK`] bytes, in order (one task sends them one after another);
//! the output buffer between the stream and the reader is
//! [`OUTPUT_BUFFER`] bytes, and a reader that stops reading holds the
//! stream back instead of growing it. When the stream ends without an
//! `end` event (cut, or idle for the profile's `stream_idle_secs`), the
//! program is killed so nothing is left behind, and its status is unknown
//! (`None`).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;

use super::connect::{Event, EventStream, bad, exit_of, stream_cut};
use super::sandbox::E2bSandbox;
use crate::backend::cloud::KILL_GRACE;
use crate::backend::http::On404;
use crate::backend::{BackendResult, PtyControl, PtyRequest, PtySession, PtySize};

/// Largest input sent in one `SendInput` call (a paste is cut into
/// several, sent in order).
pub(super) const INPUT_CHUNK: usize = 64 * 1024;

/// Bytes of terminal output buffered for the reader.
pub(super) const OUTPUT_BUFFER: usize = 256 * 1024;

/// The exit status as the control half sees it: `None` while running,
/// `Some(code)` once the stream ended (`code` `None` when unknown).
type Status = Option<Option<i32>>;

/// [`Sandbox::pty`](crate::backend::Sandbox::pty) of [`E2bSandbox`].
pub(super) async fn start(sb: &E2bSandbox, req: PtyRequest) -> BackendResult<PtySession> {
    let env = req.env_with_term();
    let (resp, marker) = sb
        .start(
            &req.argv,
            req.cwd.as_deref(),
            &env,
            // The proto's default when unset (true), as E2B's SDK leaves
            // it for a PTY; typed bytes go as `input.pty` either way.
            true,
            None,
            Some(req.size),
        )
        .await?;
    let mut events = EventStream::new(resp, sb.idle);
    let pid = match events.next().await? {
        Some(Event::Start(p)) => p,
        Some(other) => return Err(bad(format!("the first event was {other:?}, not start"))),
        None => return Err(stream_cut(None)),
    };
    let me = Arc::new(sb.clone_handle());
    let (out_w, out_r) = tokio::io::duplex(OUTPUT_BUFFER);
    let (in_w, in_r) = tokio::io::duplex(INPUT_CHUNK);
    let (status_tx, status_rx) = watch::channel(None);
    tokio::spawn(pump_output(
        events,
        out_w,
        status_tx,
        me.clone(),
        pid,
        marker.clone(),
    ));
    tokio::spawn(pump_input(me.clone(), pid, in_r));
    Ok(PtySession {
        input: Box::new(in_w),
        output: Box::new(out_r),
        control: Arc::new(E2bPty {
            pid,
            marker,
            sandbox: me,
            status: status_rx,
        }),
    })
}

/// Copies `pty` data events to the reader until the stream ends, then
/// publishes the exit status. A stream that ends without an `end` event
/// kills the program (nothing is left running that no one can reach).
async fn pump_output(
    mut events: EventStream,
    mut out: DuplexStream,
    status: watch::Sender<Status>,
    sb: Arc<E2bSandbox>,
    pid: u32,
    marker: String,
) {
    let mut code: Option<Option<i32>> = None;
    loop {
        match events.next().await {
            Ok(Some(Event::Pty(d) | Event::Data(_, d))) => {
                // A reader that went away does not stop the program: its
                // status is still wanted.
                let _ = out.write_all(&d).await;
            }
            Ok(Some(Event::End {
                exit_code, status, ..
            })) => code = Some(exit_of(exit_code, &status).0),
            Ok(Some(Event::Eos(_))) | Ok(None) => break,
            Ok(Some(Event::Start(_) | Event::KeepAlive)) => {}
            Err(e) => {
                tracing::warn!(sandbox = %sb.id, pid, error = %e, "e2b terminal stream failed");
                break;
            }
        }
    }
    if code.is_none() {
        sb.stop(Some(pid), &marker).await;
    }
    let _ = out.shutdown().await;
    let _ = status.send(Some(code.flatten()));
}

/// Sends what is typed, in order, one `SendInput` per read. Ends when the
/// writer is dropped or envd refuses (the program is gone).
async fn pump_input(sb: Arc<E2bSandbox>, pid: u32, mut input: DuplexStream) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut buf = vec![0u8; INPUT_CHUNK];
    loop {
        match input.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let body =
                    json!({"process": {"pid": pid}, "input": {"pty": b64.encode(&buf[..n])}});
                if let Err(e) = sb
                    .unary("/process.Process/SendInput", body, On404::Remote)
                    .await
                {
                    tracing::debug!(sandbox = %sb.id, pid, error = %e, "e2b terminal input refused");
                    return;
                }
            }
        }
    }
}

/// Control half of an E2B terminal.
struct E2bPty {
    pid: u32,
    marker: String,
    sandbox: Arc<E2bSandbox>,
    status: watch::Receiver<Status>,
}

#[async_trait]
impl PtyControl for E2bPty {
    fn id(&self) -> String {
        format!("e2b {} pid {}", self.sandbox.id, self.pid)
    }

    async fn resize(&self, size: PtySize) -> BackendResult<()> {
        self.sandbox
            .unary(
                "/process.Process/Update",
                json!({
                    "process": {"pid": self.pid},
                    "pty": {"size": {"cols": size.cols, "rows": size.rows}},
                }),
                On404::Remote,
            )
            .await
            .map(|_| ())
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        let mut rx = self.status.clone();
        let v = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| stream_cut(Some(self.pid)))?;
        Ok(v.expect("checked by wait_for"))
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.status.borrow().is_some() {
            return Ok(());
        }
        self.sandbox.stop(Some(self.pid), &self.marker).await;
        let _ = tokio::time::timeout(KILL_GRACE, self.wait()).await;
        Ok(())
    }
}

impl Drop for E2bPty {
    fn drop(&mut self) {
        // As a closed host PTY hangs its session up: a terminal no one
        // holds does not keep running in the sandbox.
        if self.status.borrow().is_none()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (sb, pid, marker) = (self.sandbox.clone(), self.pid, self.marker.clone());
            rt.spawn(async move { sb.stop(Some(pid), &marker).await });
        }
    }
}
