//! The stub's exec with `tty=true`: the Pod's command runs on a host PTY
//! (`pty-process`), as the kubelet runs it on one the container runtime
//! allocates. One output channel (1: stdout and stderr are the terminal),
//! channel 0 is typed into the terminal, channel 4 resizes it (JSON
//! `{"Width":cols,"Height":rows}`, apimachinery's `TerminalSize`), and the
//! status goes last on 3, then a Close with code 1000, as for any exec
//! (`docs/k8s-testing.md` §4.3).

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{frame, status_json};

/// The terminal's size before the first resize frame (a kubelet starts
/// the process before it has read one).
const FIRST_SIZE: (u16, u16) = (24, 80);

/// Runs `cmd` on a new PTY and serves it over `socket` until it exits.
pub(super) async fn run(socket: WebSocket, cmd: tokio::process::Command) {
    let (mut tx, mut rx) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(64);
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if tx.send(m).await.is_err() {
                break;
            }
        }
    });
    // "Connected": an empty frame on stdout.
    let _ = out_tx.send(Message::Binary(vec![1u8].into())).await;
    let started = pty_process::open().and_then(|(pty, pts)| {
        pty.resize(pty_process::Size::new(FIRST_SIZE.0, FIRST_SIZE.1))?;
        let child = pty_process::Command::from(cmd)
            .kill_on_drop(true)
            .spawn(pts)?;
        Ok((pty, child))
    });
    let (pty, mut child) = match started {
        Ok(p) => p,
        Err(e) => {
            let s = json!({"metadata": {}, "status": "Failure", "reason": "InternalError", "code": 500,
                "message": format!("cannot start the command on a terminal: {e}")});
            let _ = out_tx.send(frame(3, s.to_string().as_bytes())).await;
            close(&out_tx).await;
            drop(out_tx);
            let _ = writer.await;
            return;
        }
    };
    let (mut read, mut write) = pty.into_split();
    let out = {
        let out_tx = out_tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            // EIO once every holder of the terminal has closed it: the end.
            while let Ok(n) = read.read(&mut buf).await {
                if n == 0 || out_tx.send(frame(1, &buf[..n])).await.is_err() {
                    break;
                }
            }
        })
    };
    let input = tokio::spawn(async move {
        while let Some(Ok(m)) = rx.next().await {
            let Message::Binary(b) = m else {
                if matches!(m, Message::Close(_)) {
                    break;
                }
                continue;
            };
            match b.first() {
                Some(0) => {
                    let _ = write.write_all(&b[1..]).await;
                }
                Some(4) => {
                    if let Ok(v) = serde_json::from_slice::<Value>(&b[1..]) {
                        let cols = v["Width"].as_u64().unwrap_or(0) as u16;
                        let rows = v["Height"].as_u64().unwrap_or(0) as u16;
                        if cols > 0 && rows > 0 {
                            let _ = write.resize(pty_process::Size::new(rows, cols));
                        }
                    }
                }
                _ => {}
            }
        }
    });
    let _ = out.await;
    let code = child.wait().await.ok().and_then(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().or_else(|| s.signal().map(|g| 128 + g))
    });
    input.abort();
    let _ = out_tx
        .send(frame(3, status_json(code).to_string().as_bytes()))
        .await;
    close(&out_tx).await;
    drop(out_tx);
    let _ = writer.await;
}

async fn close(out: &mpsc::Sender<Message>) {
    let _ = out
        .send(Message::Close(Some(CloseFrame {
            code: 1000,
            reason: "".into(),
        })))
        .await;
}
