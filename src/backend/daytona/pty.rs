//! A terminal in a Daytona sandbox through the toolbox's PTY sessions
//! (`docs/specs/daytona/toolbox-pty.yaml`): `POST /process/pty` creates a
//! session of a size, in a directory, with an environment; `GET
//! /process/pty/{id}/connect` is its WebSocket (binary frames both ways:
//! what the terminal shows, what is typed; a text control frame
//! `{"type":"control","status":"connected"}` once attached; a close frame
//! whose reason is `{"exitCode":N,…}` when the program ends); `POST
//! /process/pty/{id}/resize` resizes (1..=1000 each way); `DELETE
//! /process/pty/{id}` kills it.
//!
//! A toolbox PTY session always starts the sandbox user's login shell;
//! the spec has no command field. So the requested argv is typed into
//! that shell as one line, ` exec /bin/sh -c '<print start token>; exec
//! "$@"' sh ARGV…`: `exec` makes the program's exit status the session's,
//! and everything the terminal shows before the start token (the shell's
//! banner, prompt and its echo of that line) is dropped, at most
//! [`PREAMBLE_MAX`] bytes within [`SETUP_TIMEOUT`]. The token is typed
//! with its first letter as an octal escape, so the echo never contains
//! it. A shell that does not run the line (a sandbox user whose shell is
//! not POSIX) fails the start with what it printed.
//!
//! Limits: sizes above 1000 rows or columns are sent as 1000 (the spec's
//! maximum); the output buffer between the socket and the reader is
//! [`OUTPUT_BUFFER`] bytes, and a reader that stops reading holds the
//! socket back (the toolbox then drops the slow client, which ends the
//! output; the program is killed). A socket that ends without a close
//! frame kills the program, whose status is then unknown (`None`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

use super::SERVICE;
use super::sandbox::{DaytonaSandbox, Ws};
use crate::backend::cloud::{self, KILL_GRACE, MARKER_VAR};
use crate::backend::http::{On404, Retry};
use crate::backend::{BackendError, BackendResult, PtyControl, PtyRequest, PtySession, PtySize};

/// Longest wait for the shell to run the typed line.
pub(super) const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Most terminal output dropped before the start token.
pub(super) const PREAMBLE_MAX: usize = 1 << 20;

/// Bytes of terminal output buffered for the reader.
pub(super) const OUTPUT_BUFFER: usize = 256 * 1024;

/// Largest input sent in one WebSocket frame.
const INPUT_CHUNK: usize = 64 * 1024;

/// The spec's largest size either way (`PtyResizeRequest`).
const MAX_DIM: u16 = 1000;

/// The exit status as the control half sees it: `None` while running,
/// `Some(code)` once the socket closed (`code` `None` when unknown).
type Status = Option<Option<i32>>;

/// The line typed into the session's shell: print `W` + `rest` (the `W`
/// as `\127`, so the echo of this line never contains the token), then
/// exec `line`. Starts with a space so shells that honour
/// `HISTCONTROL=ignorespace` keep it out of the history.
fn launch_line(rest: &str, line: &str) -> String {
    let script = format!("printf '\\127{rest}\\n'; exec /bin/sh -c \"$1\"");
    format!(
        " exec /bin/sh -c {} sh {}\n",
        cloud::shell_quote(&script),
        cloud::shell_quote(line)
    )
}

/// [`Sandbox::pty`](crate::backend::Sandbox::pty) of [`DaytonaSandbox`].
pub(super) async fn start(sb: &DaytonaSandbox, req: PtyRequest) -> BackendResult<PtySession> {
    let line = cloud::command_line(&req.argv)?;
    let marker = cloud::new_marker();
    let sid = format!("wsbench-pty-{}", uuid::Uuid::new_v4().simple());
    let mut envs = sb.env.clone();
    envs.extend(req.env_with_term());
    envs.insert(MARKER_VAR.into(), marker.clone());
    let cwd = req
        .cwd
        .as_deref()
        .map(|c| sb.resolve(c))
        .unwrap_or_else(|| sb.workdir.clone());
    let url = sb.url("/process/pty");
    let body = json!({
        "id": sid, "cwd": cwd, "envs": envs, "lazyStart": false,
        "cols": req.size.cols.min(MAX_DIM), "rows": req.size.rows.min(MAX_DIM),
    });
    let resp: Value = sb
        .tb
        .json(Retry::RateLimitOnly, On404::SandboxGone, |c| {
            c.post(&url).json(&body)
        })
        .await?;
    let sid = resp
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or(&sid)
        .to_string();
    let control = Arc::new(Handle {
        sandbox: Arc::new(sb.clone_handle()),
        sid: sid.clone(),
        marker,
    });
    let ws = match sb
        .open_ws(
            &format!("/process/pty/{sid}/connect"),
            "terminal_stream",
            "its terminal",
        )
        .await
    {
        Ok(ws) => ws,
        Err(e) => {
            control.delete().await;
            return Err(e);
        }
    };
    let (mut sink, mut stream) = ws.split();
    let rest = format!("SBENCH-PTY-{}", uuid::Uuid::new_v4().simple());
    let token = format!("W{rest}");
    let setup = async {
        sink.send(Message::Binary(Bytes::from(launch_line(&rest, &line))))
            .await
            .map_err(|e| setup_error(format!("typing the command failed: {e}")))?;
        skip_preamble(&mut stream, &token).await
    };
    let first = match tokio::time::timeout(SETUP_TIMEOUT, setup).await {
        Ok(Ok(first)) => first,
        Ok(Err(e)) => {
            control.delete().await;
            return Err(e);
        }
        Err(_) => {
            control.delete().await;
            return Err(setup_error(format!(
                "the session's shell did not run the command within {SETUP_TIMEOUT:?}"
            )));
        }
    };
    let (out_w, out_r) = tokio::io::duplex(OUTPUT_BUFFER);
    let (in_w, in_r) = tokio::io::duplex(INPUT_CHUNK);
    let (status_tx, status_rx) = watch::channel(None);
    tokio::spawn(pump_output(
        stream,
        first,
        out_w,
        status_tx,
        control.clone(),
    ));
    tokio::spawn(pump_input(sink, in_r));
    Ok(PtySession {
        input: Box::new(in_w),
        output: Box::new(out_r),
        control: Arc::new(DaytonaPty {
            handle: control,
            status: status_rx,
        }),
    })
}

fn setup_error(reason: String) -> BackendError {
    BackendError::Spawn {
        program: "the toolbox PTY session".into(),
        reason,
    }
}

/// Reads until the start token and the newline after it; returns what
/// came after them. Errors: the socket closed first (with what the
/// terminal showed, bounded), or more than [`PREAMBLE_MAX`] bytes came
/// without the token.
async fn skip_preamble(stream: &mut SplitStream<Ws>, token: &str) -> BackendResult<Bytes> {
    let mut seen: Vec<u8> = Vec::new();
    let needle = token.as_bytes();
    loop {
        let data = match stream.next().await {
            Some(Ok(Message::Binary(b))) => b,
            Some(Ok(Message::Text(t))) => {
                if is_control(t.as_str()) {
                    continue;
                }
                Bytes::copy_from_slice(t.as_bytes())
            }
            Some(Ok(Message::Close(frame))) => {
                let shown =
                    String::from_utf8_lossy(&seen[seen.len().saturating_sub(2048)..]).into_owned();
                return Err(setup_error(format!(
                    "the session ended before the command started ({}); the terminal showed: {shown:?}",
                    frame.map(|f| f.reason.to_string()).unwrap_or_default()
                )));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(stream_error(&e)),
            None => return Err(stream_error(&"the socket ended")),
        };
        seen.extend_from_slice(&data);
        if let Some(at) = seen.windows(needle.len()).position(|w| w == needle) {
            let mut after = &seen[at + needle.len()..];
            // The newline printed after the token, as the terminal shows
            // it (`\r\n` with `onlcr`).
            for nl in [&b"\r\n"[..], b"\n"] {
                if let Some(r) = after.strip_prefix(nl) {
                    after = r;
                    break;
                }
            }
            return Ok(Bytes::copy_from_slice(after));
        }
        if seen.len() > PREAMBLE_MAX {
            return Err(setup_error(format!(
                "{} bytes from the session's shell without the start token",
                seen.len()
            )));
        }
    }
}

/// The toolbox's text control frames (`{"type":"control",…}`).
fn is_control(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .is_some_and(|v| v.get("type").and_then(Value::as_str) == Some("control"))
}

fn stream_error(e: &dyn std::fmt::Display) -> BackendError {
    BackendError::Remote {
        service: SERVICE,
        status: None,
        code: Some("terminal_stream".into()),
        message: format!("terminal stream: {e}"),
    }
}

/// The exit code in a close frame's reason (`{"exitCode":N}`); a normal
/// close without one is 0.
fn exit_code(code: u16, reason: &str) -> Option<i32> {
    serde_json::from_str::<Value>(reason)
        .ok()
        .and_then(|v| v.get("exitCode").and_then(Value::as_i64))
        .map(|c| c as i32)
        .or((code == 1000).then_some(0))
}

/// Copies terminal frames to the reader until the close frame, then
/// publishes the status. A socket that ends without one kills the
/// program.
async fn pump_output(
    mut stream: SplitStream<Ws>,
    first: Bytes,
    mut out: DuplexStream,
    status: watch::Sender<Status>,
    handle: Arc<Handle>,
) {
    // A reader that went away does not stop the program: its status is
    // still wanted.
    let _ = out.write_all(&first).await;
    let code = loop {
        match stream.next().await {
            Some(Ok(Message::Binary(b))) => {
                let _ = out.write_all(&b).await;
            }
            Some(Ok(Message::Text(t))) if !is_control(t.as_str()) => {
                let _ = out.write_all(t.as_bytes()).await;
            }
            Some(Ok(Message::Close(frame))) => {
                break Some(match frame {
                    Some(f) => exit_code(u16::from(f.code), &f.reason),
                    None => Some(0),
                });
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break None,
        }
    };
    if code.is_none() {
        handle.kill_tree().await;
    }
    let _ = out.shutdown().await;
    let _ = status.send(Some(code.flatten()));
}

/// Sends what is typed, in order, one binary frame per read.
async fn pump_input(mut sink: SplitSink<Ws, Message>, mut input: DuplexStream) {
    let mut buf = vec![0u8; INPUT_CHUNK];
    loop {
        match input.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let frame = Message::Binary(Bytes::copy_from_slice(&buf[..n]));
                if sink.send(frame).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// What the control half needs of a session, shared with the output
/// pump.
struct Handle {
    sandbox: Arc<DaytonaSandbox>,
    sid: String,
    marker: String,
}

impl Handle {
    /// `DELETE /process/pty/{id}`: the toolbox kills the shell's tree.
    /// Failures are logged (the session may be gone already).
    async fn delete(&self) {
        let url = self.sandbox.url(&format!("/process/pty/{}", self.sid));
        if let Err(e) = self.sandbox.tb.delete(&url).await {
            tracing::debug!(sandbox = %self.sandbox.id, session = %self.sid, error = %e, "deleting a PTY session failed");
        }
    }

    /// The session deleted, then every process that carries the marker
    /// (children that left the shell's tree).
    async fn kill_tree(&self) {
        self.delete().await;
        self.sandbox.kill_marked(&self.marker).await;
    }
}

/// Control half of a Daytona terminal.
struct DaytonaPty {
    handle: Arc<Handle>,
    status: watch::Receiver<Status>,
}

#[async_trait]
impl PtyControl for DaytonaPty {
    fn id(&self) -> String {
        format!("daytona {} pty {}", self.handle.sandbox.id, self.handle.sid)
    }

    async fn resize(&self, size: PtySize) -> BackendResult<()> {
        let h = &self.handle;
        let url = h.sandbox.url(&format!("/process/pty/{}/resize", h.sid));
        let body = json!({"cols": size.cols.min(MAX_DIM), "rows": size.rows.min(MAX_DIM)});
        h.sandbox
            .tb
            .send_ok(Retry::Idempotent, On404::Remote, |c| {
                c.post(&url).json(&body)
            })
            .await
            .map(|_| ())
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        let mut rx = self.status.clone();
        let v = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| stream_error(&"the terminal's pump ended"))?;
        Ok(v.expect("checked by wait_for"))
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.status.borrow().is_some() {
            return Ok(());
        }
        self.handle.kill_tree().await;
        let _ = tokio::time::timeout(KILL_GRACE, self.wait()).await;
        Ok(())
    }
}

impl Drop for DaytonaPty {
    fn drop(&mut self) {
        // As a closed host PTY hangs its session up: a terminal no one
        // holds does not keep running in the sandbox.
        if self.status.borrow().is_none()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let h = self.handle.clone();
            rt.spawn(async move { h.kill_tree().await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typed_line_never_contains_the_token() {
        let line = launch_line("SBENCH-PTY-abc", "echo 'W' \"$x\"");
        assert!(!line.contains("WSBENCH-PTY-abc"));
        assert!(line.starts_with(" exec /bin/sh -c "));
        assert!(line.ends_with('\n'));
        // And a shell runs it: it prints the token, then the command.
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(line.trim_start().trim_start_matches("exec "))
            .env("x", "y")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "WSBENCH-PTY-abc\nW y\n"
        );
    }

    #[test]
    fn exit_codes_from_close_reasons() {
        assert_eq!(exit_code(1000, r#"{"exitCode":0}"#), Some(0));
        assert_eq!(
            exit_code(1011, r#"{"exitCode":7,"exitReason":" (non-zero exit)"}"#),
            Some(7)
        );
        assert_eq!(exit_code(1000, ""), Some(0));
        assert_eq!(exit_code(1011, "PTY session unavailable"), None);
    }
}
