//! The fake E2B envd's terminal, from `docs/specs/e2b/process.proto`:
//! `Start` with `pty: {size: {cols, rows}}` runs the command on a real
//! PTY ([`fake_pty`]) and streams `data.pty` events (base64, as proto3
//! JSON writes `bytes`), keep-alives and the `end` event; `SendInput`
//! with `input.pty` types at it; `Update` with `pty.size` resizes it.
//! `SendSignal` (in `fake_e2b.rs`) kills it like any process. Requests are
//! checked against the spec's shapes (sizes are `uint32`, at least 1 here
//! since a 0-sized terminal is what the spec's clients never send).
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::fake_e2b::{
    St, State_, connect_err, envd_box, envelope, selector_pid, unary_json,
};
use crate::support::fake_pty::{self, PtyOut};
use crate::support::fake_sandbox::{self, FakeBox};

/// `PTY.size` as `(rows, cols)`.
fn size_of(pty: &Value) -> Result<(u16, u16), Response> {
    let dim = |k: &str| {
        pty.pointer(&format!("/size/{k}"))
            .and_then(Value::as_u64)
            .filter(|n| (1..=u16::MAX as u64).contains(n))
            .map(|n| n as u16)
    };
    match (dim("rows"), dim("cols")) {
        (Some(r), Some(c)) => Ok((r, c)),
        _ => Err(connect_err(
            400,
            "invalid_argument",
            "pty.size.rows and pty.size.cols are required (1..65535)",
        )),
    }
}

/// `process.Process/Start` with a `pty`: the stream of a terminal.
pub fn start(
    s: &State_,
    b: &Arc<FakeBox>,
    pty: &Value,
    argv: &[String],
    cwd: &str,
    env: &BTreeMap<String, String>,
) -> Response {
    let (rows, cols) = match size_of(pty) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let (proc, mut outs) = match fake_pty::spawn(b, argv, cwd, env, rows, cols) {
        Ok(x) => x,
        Err(e) => return connect_err(400, "invalid_argument", &e.to_string()),
    };
    let pid = proc.pid;
    let keepalive = Duration::from_millis(s.keepalive_ms.load(Ordering::Relaxed));
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    tokio::spawn(async move {
        let b64 = base64::engine::general_purpose::STANDARD;
        let _ = tx
            .send(Ok(envelope(0, &json!({"event": {"start": {"pid": pid}}}))))
            .await;
        let mut tick = tokio::time::interval(keepalive);
        tick.tick().await;
        loop {
            tokio::select! {
                o = outs.recv() => match o {
                    Some(PtyOut::Data(d)) => {
                        let ev = json!({"event": {"data": {"pty": b64.encode(&d)}}});
                        let _ = tx.send(Ok(envelope(0, &ev))).await;
                    }
                    Some(PtyOut::Exit(code, sig)) => {
                        let mut end = serde_json::Map::new();
                        let (code, status) = match sig {
                            Some(9) => (-1, "signal: killed".to_string()),
                            Some(n) => (-1, format!("signal: {n}")),
                            None => (code, format!("exit status {code}")),
                        };
                        if code != 0 {
                            end.insert("exitCode".into(), json!(code));
                        }
                        end.insert("exited".into(), json!(sig.is_none()));
                        end.insert("status".into(), json!(status));
                        let _ = tx.send(Ok(envelope(0, &json!({"event": {"end": end}})))).await;
                        let _ = tx.send(Ok(envelope(2, &json!({})))).await;
                        return;
                    }
                    None => return,
                },
                _ = tick.tick() => {
                    let _ = tx.send(Ok(envelope(0, &json!({"event": {"keepalive": {}}})))).await;
                }
            }
        }
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/connect+json")
        .body(fake_sandbox::channel_body(rx))
        .unwrap()
}

/// `SendInput` with `input.pty` (base64 bytes).
pub async fn send_input(b: &FakeBox, pid: u32, data: &Value) -> Response {
    let Some(data) = data
        .as_str()
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
    else {
        return connect_err(400, "invalid_argument", "input.pty is not base64");
    };
    let Some(pty) = fake_pty::find(b, pid) else {
        return connect_err(
            404,
            "not_found",
            &format!("process with pid {pid} has no terminal"),
        );
    };
    match pty.write(&data).await {
        Ok(()) => axum::Json(json!({})).into_response(),
        Err(e) => connect_err(500, "internal", &e.to_string()),
    }
}

/// `process.Process/Update`: a new `pty.size` for a running terminal.
pub async fn update(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let v = match unary_json(&h, &body) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let pid = match selector_pid(&v) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let Some(pty) = v.get("pty") else {
        // Nothing to change.
        return axum::Json(json!({})).into_response();
    };
    let (rows, cols) = match size_of(pty) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(term) = fake_pty::find(&b, pid) else {
        return connect_err(
            404,
            "not_found",
            &format!("process with pid {pid} has no terminal"),
        );
    };
    match term.resize(rows, cols).await {
        Ok(()) => axum::Json(json!({})).into_response(),
        Err(e) => connect_err(500, "internal", &e.to_string()),
    }
}
