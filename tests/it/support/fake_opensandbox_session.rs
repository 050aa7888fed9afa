//! The fake execd's bash sessions (`docs/specs/opensandbox/execd-sessions.yaml`):
//! `POST /session` starts a real `bash` in the sandbox's box reading
//! commands from a pipe; `POST /session/{id}/run` writes the line to it
//! followed by end tokens on stdout (with the exit status) and stderr, and
//! streams the output as execd's line events (`stdout`/`stderr`, then
//! `execution_complete` or `error` with the status), so `cd`, `export`
//! and functions carry over between runs; `DELETE /session/{id}` kills
//! the bash and what it runs. A line that ends the bash (`exit`) ends the
//! session: the run reports bash's status and later runs get 404.
//!
//! Limits of the fake: one run at a time per session (a second waits);
//! the line's stdin is `/dev/null`.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{RawPathParams, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use crate::support::fake_opensandbox::{St, err, execd_box, frame, now_ms};
use crate::support::fake_sandbox::{self, FakeBox, Out};

/// One bash session.
pub struct BashSession {
    pub boxed: Arc<FakeBox>,
    pub pid: u32,
    /// The bash's stdin and its output, held by the run in progress.
    io: tokio::sync::Mutex<(ChildStdin, mpsc::Receiver<Out>)>,
}

/// Sessions by `(box id, session id)`.
#[derive(Default)]
pub struct Sessions {
    pub map: Mutex<HashMap<(String, String), Arc<BashSession>>>,
    next: AtomicU64,
}

fn sid_of(p: &RawPathParams) -> String {
    p.iter()
        .find(|(k, _)| *k == "sid")
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

/// `POST /session` (`CreateSessionRequest`: an optional `cwd`).
pub async fn create(State(s): St, h: HeaderMap, p: RawPathParams, body: Bytes) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let req: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return err(400, "INVALID_REQUEST_BODY", "body must be a JSON object"),
        }
    };
    if let Some(k) = req.as_object().unwrap().keys().find(|k| *k != "cwd") {
        return err(400, "INVALID_REQUEST_BODY", &format!("unknown field {k}"));
    }
    let cwd = req
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or("/workspace")
        .to_string();
    let argv = ["bash", "--noprofile", "--norc"].map(String::from);
    let (child, pid) = match b.spawn(&argv, &cwd, &BTreeMap::new(), true) {
        Ok(x) => x,
        Err(e) => return err(500, "RUNTIME_ERROR", &e.to_string()),
    };
    let stdin = b
        .procs
        .lock()
        .unwrap()
        .get_mut(&pid)
        .and_then(|p| p.stdin.take())
        .expect("spawned with stdin");
    let outs = fake_sandbox::pump(child, false);
    let n = s.bash_sessions.next.fetch_add(1, Ordering::Relaxed);
    let sid = format!("session-{n}");
    s.bash_sessions.map.lock().unwrap().insert(
        (b.id.clone(), sid.clone()),
        Arc::new(BashSession {
            boxed: b,
            pid,
            io: tokio::sync::Mutex::new((stdin, outs)),
        }),
    );
    axum::Json(json!({"session_id": sid})).into_response()
}

/// `DELETE /session/{sessionId}`.
pub async fn delete(State(s): St, h: HeaderMap, p: RawPathParams) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let sid = sid_of(&p);
    match s
        .bash_sessions
        .map
        .lock()
        .unwrap()
        .remove(&(b.id.clone(), sid))
    {
        Some(sess) => {
            sess.boxed.kill(sess.pid);
            axum::http::StatusCode::OK.into_response()
        }
        None => err(404, "SESSION_NOT_FOUND", "session not found"),
    }
}

/// Line events of one stream of a run, up to its end token: complete
/// lines are sent as they come, an empty line is held back one step (the
/// one right before the token is the separator the fake printed).
struct Splitter {
    buf: Vec<u8>,
    held_empty: bool,
}

impl Splitter {
    /// Lines to send, and the token line's rest once it is seen.
    fn push(&mut self, data: &[u8], token: &str) -> (Vec<String>, Option<String>) {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            if let Some(rest) = text.strip_prefix(token) {
                return (out, Some(rest.trim().to_string()));
            }
            if std::mem::take(&mut self.held_empty) {
                out.push("\n".into());
            }
            if text.is_empty() {
                self.held_empty = true;
            } else {
                out.push(text);
            }
        }
        (out, None)
    }
}

/// `POST /session/{sessionId}/run` (`RunInSessionRequest`).
pub async fn run(State(s): St, h: HeaderMap, p: RawPathParams, body: Bytes) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return err(400, "INVALID_REQUEST_BODY", "body must be a JSON object");
    };
    const KNOWN: [&str; 3] = ["command", "cwd", "timeout"];
    if let Some(k) = req.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return err(400, "INVALID_REQUEST_BODY", &format!("unknown field {k}"));
    }
    let Some(line) = req.get("command").and_then(Value::as_str) else {
        return err(400, "INVALID_REQUEST_BODY", "command is required");
    };
    let key = (b.id.clone(), sid_of(&p));
    let Some(sess) = s.bash_sessions.map.lock().unwrap().get(&key).cloned() else {
        return err(404, "SESSION_NOT_FOUND", "session not found");
    };
    let n = s.bash_sessions.next.fetch_add(1, Ordering::Relaxed);
    let token = format!("__FAKE_EXECD_END_{n}__");
    let mut script = String::new();
    if let Some(cwd) = req.get("cwd").and_then(Value::as_str) {
        script.push_str(&format!("cd -- '{}' && ", cwd.replace('\'', "'\\''")));
    }
    script.push_str(&format!(
        "{{ {line}\n}} </dev/null\n__fake_rc=$?; printf '\\n%s %d\\n' {token} \"$__fake_rc\"; printf '\\n%s\\n' {token} >&2\n"
    ));
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1024);
    let st = s.clone();
    tokio::spawn(async move {
        let send = |v: Value| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(Ok(frame(v))).await;
            }
        };
        let mut io = sess.io.lock().await;
        let started = std::time::Instant::now();
        send(json!({"type": "init", "text": format!("run-{n}"), "timestamp": now_ms()})).await;
        if io.0.write_all(script.as_bytes()).await.is_err() {
            send(json!({"type": "error", "timestamp": now_ms(), "error": {"ename": "SessionError", "evalue": "the session's bash is gone", "traceback": []}})).await;
            return;
        }
        let _ = io.0.flush().await;
        let mut out = Splitter {
            buf: Vec::new(),
            held_empty: false,
        };
        let mut errs = Splitter {
            buf: Vec::new(),
            held_empty: false,
        };
        let (mut rc, mut err_done): (Option<i32>, bool) = (None, false);
        while rc.is_none() || !err_done {
            let (kind, lines, end) = match io.1.recv().await {
                Some(Out::Stdout(d)) => {
                    let (l, e) = out.push(&d, &token);
                    if let Some(e) = &e {
                        rc = e.parse().ok().or(Some(0));
                    }
                    ("stdout", l, e)
                }
                Some(Out::Stderr(d)) => {
                    let (l, e) = errs.push(&d, &token);
                    err_done |= e.is_some();
                    ("stderr", l, e)
                }
                Some(Out::Exit(code, sig)) => {
                    // The line ended the bash: so ends the session.
                    st.bash_sessions.map.lock().unwrap().remove(&key);
                    sess.boxed.reap(sess.pid);
                    rc = Some(sig.map(|s| 128 + s).unwrap_or(code));
                    break;
                }
                None => break,
            };
            let _ = end;
            for l in lines {
                send(json!({"type": kind, "text": l, "timestamp": now_ms()})).await;
            }
        }
        let ev = match rc {
            Some(0) => {
                json!({"type": "execution_complete", "timestamp": now_ms(), "execution_time": started.elapsed().as_millis() as u64})
            }
            Some(c) => {
                json!({"type": "error", "timestamp": now_ms(), "error": {"ename": "CommandExecError", "evalue": c.to_string(), "traceback": []}})
            }
            None => return,
        };
        send(ev).await;
    });
    axum::response::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(fake_sandbox::channel_body(rx))
        .unwrap()
}
