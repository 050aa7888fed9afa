//! A small streamable-HTTP MCP server (in process, axum, 127.0.0.1) that
//! expires its sessions on request: the cases of issue 15 point 5.
//!
//! It speaks only what the client needs: `initialize` (answers JSON and
//! a fresh `Mcp-Session-Id`), `notifications/initialized` (202),
//! `tools/list` (one tool, `echo`), `tools/call` (echoes `text`). `GET`
//! answers 405 (no server stream), `DELETE` 200. A POST naming a session
//! the server does not know gets 404, as the spec says, or (after
//! [`SessionServer::unknown_session_as_400`]) HTTP 400 with a JSON-RPC
//! error whose `id` is null, as `server-everything` answers after a
//! restart. [`SessionServer::refuse_calls`] makes every `tools/call`
//! fail with an HTTP error (a JSON-RPC error with a null id, or plain
//! text), [`SessionServer::hang_calls`] never answers them.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// How the server treats sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Sessions live for ever.
    Never,
    /// The first `tools/call` finds its session expired (404); the
    /// session made after that one lives.
    Once,
    /// Every `tools/call` finds its session expired (404).
    Always,
    /// Every POST gets 404, `initialize` too (a wrong URL, a server
    /// that lost its route).
    FromStart,
}

/// What the server saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// `initialize` requests answered (200 or 404).
    pub initializes: usize,
    /// `tools/call` requests received.
    pub calls: usize,
    /// Requests answered 404.
    pub not_found: usize,
}

/// How `tools/call` is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calls {
    /// Echoed.
    Answer,
    /// HTTP `status` with a JSON-RPC error `{id: null}` saying `message`.
    NullIdError(u16, String),
    /// HTTP `status` with a plain-text body.
    Text(u16, String),
    /// Never answered.
    Hang,
}

struct Inner {
    expiry: Expiry,
    unknown_400: bool,
    calls: Calls,
    sessions: HashSet<String>,
    next: u64,
    seen: Seen,
}

/// A running server; stops when the test's runtime ends.
#[derive(Clone)]
pub struct SessionServer {
    /// Where it listens.
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl SessionServer {
    /// Starts a server with `expiry` on 127.0.0.1:0.
    pub async fn start(expiry: Expiry) -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            expiry,
            unknown_400: false,
            calls: Calls::Answer,
            sessions: HashSet::new(),
            next: 1,
            seen: Seen::default(),
        }));
        let app = Router::new()
            .route(
                "/mcp",
                post(handle)
                    .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                    .delete(|| async { StatusCode::OK }),
            )
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SessionServer { addr, inner }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// What it saw so far.
    pub fn seen(&self) -> Seen {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Answers a request naming an unknown session with HTTP 400 and
    /// `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request:
    /// No valid session ID provided"},"id":null}` (server-everything)
    /// instead of 404.
    pub fn unknown_session_as_400(&self) {
        self.inner.lock().unwrap().unknown_400 = true;
    }

    /// How `tools/call` is answered from now on.
    pub fn calls(&self, calls: Calls) {
        self.inner.lock().unwrap().calls = calls;
    }

    /// Forgets every session now (as a server that restarted): the
    /// next request of each gets 404; the sessions made after live.
    pub fn forget_sessions(&self) {
        self.inner.lock().unwrap().sessions.clear();
    }
}

fn not_found(inner: &mut Inner) -> Response {
    inner.seen.not_found += 1;
    if inner.unknown_400 {
        return null_id_error(400, "Bad Request: No valid session ID provided");
    }
    (StatusCode::NOT_FOUND, "session not found").into_response()
}

fn null_id_error(status: u16, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "error": {"code": -32000, "message": message},
        "id": null
    });
    let mut r = axum::Json(body).into_response();
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r
}

fn reply(id: &Value, result: Value) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    match answer(&inner, &headers, body.0) {
        Some(r) => r,
        // `Calls::Hang`: the client gives up (or the test ends).
        None => std::future::pending().await,
    }
}

/// The answer to `msg`; `None` for a call left hanging.
fn answer(inner: &Mutex<Inner>, headers: &HeaderMap, msg: Value) -> Option<Response> {
    let method = msg["method"].as_str().unwrap_or_default().to_string();
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut inner = inner.lock().unwrap();
    if method == "initialize" {
        inner.seen.initializes += 1;
        if inner.expiry == Expiry::FromStart {
            return Some(not_found(&mut inner));
        }
        let sid = format!("s{}", inner.next);
        inner.next += 1;
        inner.sessions.insert(sid.clone());
        let version = msg["params"]["protocolVersion"].clone();
        let mut r = reply(
            &id,
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "expiring", "version": "0"}
            }),
        );
        r.headers_mut()
            .insert("mcp-session-id", sid.parse().unwrap());
        return Some(r);
    }
    let known = session.as_ref().is_some_and(|s| inner.sessions.contains(s));
    if inner.expiry == Expiry::FromStart || !known {
        return Some(not_found(&mut inner));
    }
    if method == "tools/call" {
        inner.seen.calls += 1;
        match inner.calls.clone() {
            Calls::Answer => {}
            Calls::NullIdError(status, message) => return Some(null_id_error(status, &message)),
            Calls::Text(status, body) => {
                return Some((StatusCode::from_u16(status).unwrap(), body).into_response());
            }
            Calls::Hang => return None,
        }
        let expire = match inner.expiry {
            Expiry::Always => true,
            Expiry::Once => inner.seen.not_found == 0,
            _ => false,
        };
        if expire {
            if let Some(s) = &session {
                inner.sessions.remove(s);
            }
            return Some(not_found(&mut inner));
        }
    }
    Some(match method.as_str() {
        "tools/list" => reply(
            &id,
            json!({"tools": [{
                "name": "echo",
                "description": "echoes text",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
            }]}),
        ),
        "tools/call" => {
            let text = msg["params"]["arguments"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            reply(
                &id,
                json!({"content": [{"type": "text", "text": text}], "isError": false}),
            )
        }
        "ping" => reply(&id, json!({})),
        _ if msg.get("id").is_none() => StatusCode::ACCEPTED.into_response(),
        _ => axum::Json(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "method not found"}
        }))
        .into_response(),
    })
}
