//! The Kubernetes backend's terminal: an exec with `tty=true` (stdin and
//! stdout attached; stderr must be off, since a terminal has one output
//! device and the API server refuses both), resized through the resize
//! channel (4) of the exec websocket, its exit code from the status
//! channel (3), killed as an exec is (every process carrying its marker,
//! from a second exec in the Pod).
//!
//! The protocol (`docs/k8s-testing.md` §4.3): what is typed goes out as
//! channel-0 frames, a resize as a channel-4 frame holding the JSON
//! `{"Width":cols,"Height":rows}` (the `TerminalSize` of apimachinery's
//! `remotecommand`), the terminal's bytes come back on channel 1. The
//! initial size is also set inside before the program runs
//! ([`sized_argv`]), since the kubelet applies a resize only once the
//! process exists and a program that asks at once could see 0 × 0.
//!
//! Limits: output is handed over through a 1 MiB pipe; a caller that stops
//! reading stalls the program (as a terminal that is not read does),
//! nothing is dropped. Dropping the input does not end the program (no
//! stdin close is sent: a terminal's end of input is ctrl-d, a byte).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use kube::api::AttachParams;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tungstenite::Message;
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;

use super::channel::{Ended, RESIZE, STDIN, read_until_status};
use super::events::{K8sEvent, emit};
use super::exec::ExecTarget;
use crate::backend::pty::sized_argv;
use crate::backend::shell::marker::new_marker;
use crate::backend::{
    BackendError, BackendResult, OutputChunk, PtyControl, PtyRequest, PtySession, PtySize,
};

/// Bytes per stdin frame.
const STDIN_CHUNK: usize = 32 * 1024;

/// Pipe buffer between the websocket and the caller, each way.
const PIPE_BUFFER: usize = 1 << 20;

/// How long a killed program's status is still awaited.
const AFTER_KILL: Duration = Duration::from_secs(10);

/// Keep-alive ping interval while the terminal is idle (a person may not
/// type for a long time; proxies drop silent connections).
const PING_EVERY: Duration = Duration::from_secs(30);

/// The resize frame: channel 4, then `{"Width":cols,"Height":rows}`.
pub(super) fn resize_frame(size: PtySize) -> Vec<u8> {
    let mut v = vec![RESIZE];
    v.extend_from_slice(format!(r#"{{"Width":{},"Height":{}}}"#, size.cols, size.rows).as_bytes());
    v
}

/// [`Sandbox::pty`](crate::backend::Sandbox::pty) of a Kubernetes sandbox.
///
/// Errors: `Spawn` for an empty argv or a bad environment name; the
/// exec's connection errors (`Unavailable` when the Pod is gone).
pub(crate) async fn start(target: &ExecTarget, req: PtyRequest) -> BackendResult<PtySession> {
    if req.argv.is_empty() {
        return Err(BackendError::Spawn {
            program: String::new(),
            reason: "empty argv".into(),
        });
    }
    let marker = new_marker();
    let command = target.wrapped(
        &sized_argv(&req.argv, req.size),
        req.cwd.as_deref(),
        &req.env_with_term(),
        &marker,
        None,
        false,
    )?;
    let params = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(false)
        .tty(true);
    let ws = target.connect_with(command, params).await?;
    emit(
        &target.events,
        K8sEvent::ExecStarted {
            pod: target.pod.clone(),
            argv: req.argv.clone(),
        },
    );
    let ws: Box<dyn Socket> = Box::new(ws);
    let (tx, mut rx) = ws.split();
    let tx: Sink = Arc::new(tokio::sync::Mutex::new(tx));
    let (stdin_w, mut stdin_r) = tokio::io::duplex(PIPE_BUFFER);
    let (mut out_w, out_r) = tokio::io::duplex(PIPE_BUFFER);
    let (status_tx, status_rx) = watch::channel(None::<Ended>);

    // Typed bytes → channel-0 frames, pings while idle. At the end of the
    // input only the pings go on (the program decides when it ends).
    let writer = {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; STDIN_CHUNK];
            let mut ping = tokio::time::interval(PING_EVERY);
            ping.reset();
            let mut open = true;
            loop {
                tokio::select! {
                    n = stdin_r.read(&mut buf), if open => match n {
                        Ok(0) | Err(_) => open = false,
                        Ok(n) => {
                            let mut frame = Vec::with_capacity(n + 1);
                            frame.push(STDIN);
                            frame.extend_from_slice(&buf[..n]);
                            if tx.lock().await.send(Message::binary(frame)).await.is_err() {
                                return;
                            }
                        }
                    },
                    _ = ping.tick() => {
                        if tx.lock().await.send(Message::Ping(Bytes::new())).await.is_err() {
                            return;
                        }
                    }
                }
            }
        })
    };
    // Channel 1 → the output pipe, until the status (or the end of the
    // connection).
    let events = target.events.clone();
    let pod = target.pod.clone();
    let started = Instant::now();
    let closer = tx.clone();
    tokio::spawn(async move {
        let (out_sink, mut out_rx) = mpsc::channel::<OutputChunk>(64);
        let pump = async {
            while let Some(c) = out_rx.recv().await {
                // A reader that went away only loses its own output.
                let _ = out_w.write_all(&c.data).await;
            }
            let _ = out_w.shutdown().await;
        };
        let read = async {
            let e = read_until_status(&mut rx, Some(&out_sink)).await;
            drop(out_sink);
            e
        };
        let (ended, ()) = tokio::join!(read, pump);
        writer.abort();
        // Answer the server's end with a clean close (code 1000), as an
        // exec does, rather than dropping the connection.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            closer
                .lock()
                .await
                .send(Message::Close(Some(CloseFrame {
                    code: CloseCode::Normal,
                    reason: "".into(),
                })))
                .await
        })
        .await;
        let code = match &ended {
            Ended::Exit(c) => Some(*c),
            _ => None,
        };
        emit(
            &events,
            K8sEvent::ExecExited {
                pod,
                exit_code: code,
                duration_ms: started.elapsed().as_millis() as u64,
            },
        );
        let _ = status_tx.send(Some(ended));
    });
    let control = K8sPty {
        target: target.clone(),
        marker,
        tx,
        status: status_rx,
        killed: Mutex::new(false),
    };
    // The size is already set inside; this tells the kubelet too, as
    // `kubectl exec -t` does right after connecting.
    let _ = control.resize(req.size).await;
    Ok(PtySession {
        input: Box::new(stdin_w),
        output: Box::new(out_r),
        control: Arc::new(control),
    })
}

/// The exec websocket, both ways, as one nameable type.
trait Socket:
    futures::Sink<Message, Error = tungstenite::Error>
    + futures::Stream<Item = Result<Message, tungstenite::Error>>
    + Send
    + Unpin
{
}

impl<T> Socket for T where
    T: futures::Sink<Message, Error = tungstenite::Error>
        + futures::Stream<Item = Result<Message, tungstenite::Error>>
        + Send
        + Unpin
{
}

/// The sending half of the exec websocket, shared.
type Sink = Arc<tokio::sync::Mutex<SplitSink<Box<dyn Socket>, Message>>>;

struct K8sPty {
    target: ExecTarget,
    marker: String,
    /// The websocket's sending half, shared by the input pump and resize,
    /// so a resize is on the wire before [`PtyControl::resize`] returns
    /// and in order with the bytes typed after it.
    tx: Sink,
    status: watch::Receiver<Option<Ended>>,
    killed: Mutex<bool>,
}

impl K8sPty {
    fn try_ended(&self) -> Option<Ended> {
        self.status.borrow().clone()
    }
}

#[async_trait]
impl PtyControl for K8sPty {
    fn id(&self) -> String {
        format!("{}:{}", self.target.pod, &self.marker[..8])
    }

    async fn resize(&self, size: PtySize) -> BackendResult<()> {
        if self.try_ended().is_some() {
            return Ok(());
        }
        self.tx
            .lock()
            .await
            .send(Message::binary(resize_frame(size)))
            .await
            .map_err(|e| {
                BackendError::unreachable(format!(
                    "resizing the terminal in pod {}: {e}",
                    self.target.pod
                ))
            })
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        let mut rx = self.status.clone();
        let ended = loop {
            if let Some(e) = rx.borrow().clone() {
                break e;
            }
            if rx.changed().await.is_err() {
                break Ended::NoStatus;
            }
        };
        match ended {
            Ended::Exit(c) => Ok(Some(c)),
            _ if *self.killed.lock().expect("killed lock") => Ok(None),
            Ended::Failure(m) => Err(BackendError::Spawn {
                program: String::new(),
                reason: m,
            }),
            Ended::NoStatus => Ok(None),
            Ended::Dropped(m) => Err(BackendError::unreachable(format!(
                "terminal connection to pod {} dropped: {m}",
                self.target.pod
            ))),
        }
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_ended().is_some() {
            return Ok(());
        }
        *self.killed.lock().expect("killed lock") = true;
        self.target.kill_marked(&self.marker).await;
        let _ = tokio::time::timeout(AFTER_KILL, self.wait()).await;
        Ok(())
    }
}

impl Drop for K8sPty {
    /// A terminal dropped while its program runs takes the program along
    /// (a closed terminal hangs up its session on a host too).
    fn drop(&mut self) {
        if self.try_ended().is_none() {
            self.target.kill_marked_detached(&self.marker);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resize_frame_is_channel_4_with_width_then_height() {
        let f = resize_frame(PtySize::new(33, 101));
        assert_eq!(f[0], 4);
        let v: serde_json::Value = serde_json::from_slice(&f[1..]).unwrap();
        assert_eq!(v, serde_json::json!({"Width": 101, "Height": 33}));
    }
}
