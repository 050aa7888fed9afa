//! The fake Daytona toolbox's PTY sessions, from
//! `docs/specs/daytona/toolbox-pty.yaml` (and the daemon's WebSocket
//! behaviour the spec leaves out: a text control frame
//! `{"type":"control","status":"connected"}` on attach, binary frames
//! both ways, a close frame whose reason is `{"exitCode":N,"exitReason":…}`
//! with code 1000 for exit 0 and 1011 otherwise, 137 after a delete).
//!
//! A session starts the sandbox user's login shell (`bash -i -l`, else
//! `sh -i -l`) on a real PTY ([`fake_pty`]) of the requested size; the
//! spec has no command field. Requests are checked against the spec's
//! shapes: unknown fields, sizes outside 1..=1000 and a second session
//! with the same id are refused.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::fake_daytona::{St, tb_box, toolbox_err};
use crate::support::fake_pty::{self, PtyOut, PtyProc};
use crate::support::fake_sandbox::FakeBox;

/// One PTY session.
pub struct PtySess {
    pub boxed: Arc<FakeBox>,
    pub proc: Arc<PtyProc>,
    /// The output, until a client connects (one client at a time here).
    pub outs: Option<mpsc::Receiver<PtyOut>>,
    /// `PtySessionInfo` as created, `rows`/`cols` kept current.
    pub info: Value,
}

/// Sessions by `(sandbox id, session id)`.
pub type Ptys = Mutex<HashMap<(String, String), PtySess>>;

fn key(p: &HashMap<String, String>) -> (String, String) {
    (
        p.get("id").cloned().unwrap_or_default(),
        p.get("sid").cloned().unwrap_or_default(),
    )
}

fn bad(msg: &str, path: &str) -> Response {
    toolbox_err(400, "BAD_REQUEST", msg, path)
}

fn not_found(sid: &str) -> Response {
    toolbox_err(
        404,
        "NOT_FOUND",
        &format!("PTY session {sid} not found"),
        "/process/pty",
    )
}

/// `rows`/`cols` of a request: integers in 1..=1000 (`PtyResizeRequest`).
fn dims(v: &Value, path: &str) -> Result<(u16, u16), Response> {
    let dim = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .filter(|n| (1..=1000).contains(n))
            .map(|n| n as u16)
    };
    match (dim("rows"), dim("cols")) {
        (Some(r), Some(c)) => Ok((r, c)),
        _ => Err(bad("rows and cols must be integers in 1..1000", path)),
    }
}

/// `POST /process/pty`.
pub async fn create(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    const PATH: &str = "/process/pty";
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return bad("invalid request body", PATH);
    };
    const KNOWN: [&str; 6] = ["cols", "cwd", "envs", "id", "lazyStart", "rows"];
    if let Some(k) = req.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return bad(&format!("unknown field {k}"), PATH);
    }
    let req = Value::Object(req);
    let (rows, cols) = match dims(&req, PATH) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(sid) = req.get("id").and_then(Value::as_str).map(str::to_string) else {
        return bad("id is required", PATH);
    };
    let cwd = req
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or(crate::support::fake_daytona::HOME)
        .to_string();
    let mut env: BTreeMap<String, String> = s
        .sandboxes
        .with(&p["id"], |sb| sb.env.clone())
        .unwrap_or_default();
    match req.get("envs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let Some(v) = v.as_str() else {
                    return bad(&format!("envs.{k} must be a string"), PATH);
                };
                env.insert(k.clone(), v.to_string());
            }
        }
        Some(_) => return bad("envs must be an object", PATH),
    }
    let k = (p["id"].clone(), sid.clone());
    if s.ptys.lock().unwrap().contains_key(&k) {
        return toolbox_err(
            409,
            "CONFLICT",
            &format!("PTY session {sid} already exists"),
            PATH,
        );
    }
    let shell = if std::path::Path::new("/usr/bin/bash").exists() {
        "bash"
    } else {
        "sh"
    };
    let argv = [shell, "-i", "-l"].map(String::from);
    let (proc, outs) = match fake_pty::spawn(&b, &argv, &cwd, &env, rows, cols) {
        Ok(x) => x,
        Err(e) => return toolbox_err(500, "INTERNAL", &e.to_string(), PATH),
    };
    let info = json!({
        "id": sid, "cwd": cwd, "envs": req.get("envs").cloned().unwrap_or(json!({})),
        "rows": rows, "cols": cols, "active": true,
        "lazyStart": req.get("lazyStart").and_then(Value::as_bool).unwrap_or(false),
        "createdAt": chrono::Utc::now().to_rfc3339(),
    });
    s.ptys.lock().unwrap().insert(
        k,
        PtySess {
            boxed: b,
            proc,
            outs: Some(outs),
            info,
        },
    );
    (
        axum::http::StatusCode::CREATED,
        axum::Json(json!({"sessionId": sid})),
    )
        .into_response()
}

/// `GET /process/pty`.
pub async fn list(State(s): St, h: HeaderMap, Path(p): Path<HashMap<String, String>>) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let sessions: Vec<Value> = s
        .ptys
        .lock()
        .unwrap()
        .iter()
        .filter(|((sb, _), _)| sb == &p["id"])
        .map(|(_, v)| v.info.clone())
        .collect();
    axum::Json(json!({"sessions": sessions})).into_response()
}

/// `GET /process/pty/{sessionId}`.
pub async fn info(State(s): St, h: HeaderMap, Path(p): Path<HashMap<String, String>>) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    match s.ptys.lock().unwrap().get(&key(&p)) {
        Some(v) => axum::Json(v.info.clone()).into_response(),
        None => not_found(&p["sid"]),
    }
}

/// `DELETE /process/pty/{sessionId}`: kills the shell's tree. The
/// connected client gets the close frame with exit code 137.
pub async fn delete(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let Some(sess) = s.ptys.lock().unwrap().remove(&key(&p)) else {
        return not_found(&p["sid"]);
    };
    sess.boxed.kill(sess.proc.pid);
    axum::Json(json!({"message": "PTY session deleted"})).into_response()
}

/// `POST /process/pty/{sessionId}/resize`.
pub async fn resize(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    const PATH: &str = "/process/pty/resize";
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return bad("invalid request body", PATH);
    };
    let (rows, cols) = match dims(&v, PATH) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let proc = match s.ptys.lock().unwrap().get_mut(&key(&p)) {
        Some(sess) => {
            sess.info["rows"] = json!(rows);
            sess.info["cols"] = json!(cols);
            sess.proc.clone()
        }
        None => {
            return toolbox_err(410, "GONE", "cannot resize inactive PTY session", PATH);
        }
    };
    if let Err(e) = proc.resize(rows, cols).await {
        return toolbox_err(500, "INTERNAL", &e.to_string(), PATH);
    }
    let info = s.ptys.lock().unwrap().get(&key(&p)).map(|x| x.info.clone());
    axum::Json(info.unwrap_or(json!({}))).into_response()
}

/// `GET /process/pty/{sessionId}/connect`: the session's WebSocket.
pub async fn connect(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let k = key(&p);
    let taken = s
        .ptys
        .lock()
        .unwrap()
        .get_mut(&k)
        .map(|sess| (sess.proc.clone(), sess.outs.take()));
    let (proc, outs) = match taken {
        None => return not_found(&k.1),
        Some((_, None)) => {
            return bad(
                "the fake serves one client per session",
                "/process/pty/connect",
            );
        }
        Some((proc, Some(outs))) => (proc, outs),
    };
    let (mut parts, _) = req.into_parts();
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    let state = s.clone();
    ws.on_upgrade(move |socket| async move {
        serve(socket, proc.clone(), outs).await;
        // One client per session in the fake: when it leaves, the
        // session ends (the daemon would keep it for another client).
        if let Some(sess) = state.ptys.lock().unwrap().remove(&k) {
            sess.boxed.kill(proc.pid);
        }
    })
}

async fn serve(mut ws: WebSocket, proc: Arc<PtyProc>, mut outs: mpsc::Receiver<PtyOut>) {
    let hello = json!({"type": "control", "status": "connected"}).to_string();
    if ws.send(Message::Text(hello.into())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            o = outs.recv() => match o {
                Some(PtyOut::Data(d)) => {
                    if ws.send(Message::Binary(d)).await.is_err() {
                        return;
                    }
                }
                Some(PtyOut::Exit(code, sig)) => {
                    let code = match sig {
                        Some(n) => 128 + n,
                        None => code,
                    };
                    let mut reason = json!({"exitCode": code});
                    if code != 0 {
                        reason["exitReason"] = json!(" (non-zero exit)");
                    }
                    let frame = CloseFrame {
                        code: if code == 0 { 1000 } else { 1011 },
                        reason: reason.to_string().into(),
                    };
                    let _ = ws.send(Message::Close(Some(frame))).await;
                    return;
                }
                None => return,
            },
            m = ws.recv() => match m {
                Some(Ok(Message::Binary(b))) => {
                    let _ = proc.write(&b).await;
                }
                Some(Ok(Message::Text(t))) => {
                    let _ = proc.write(t.as_bytes()).await;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}
