//! A fake OpenSandbox on 127.0.0.1: the lifecycle API
//! (`opensandbox/sandbox-lifecycle.yml` under `/v1`) and execd
//! (`opensandbox/execd-api.yaml`), one server for both. execd is reached
//! either directly — endpoint `127.0.0.1:<port>` plus a routing header the
//! client must send back (`headers` of the endpoint answer) — or through
//! the server proxy `/v1/sandboxes/{id}/proxy/44772/...`, which wants the
//! API key. execd behaves like the real one (`docs/MINIMAL-SURFACE.md` §3.3–3.4):
//! bare-JSON events separated by blank lines, one event per output line,
//! exit code 0 as `execution_complete` and others in `error.evalue`,
//! uploads as pairs of *file* parts with `mode` read as octal digits.
// Handlers answer errors as ready responses; boxing them buys nothing in a fake.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRequest, Path, Query, RawPathParams, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::fake_opensandbox_session;
use crate::support::fake_sandbox::{self, FakeBox, Faults, Layer, Out, Recorder, Sandboxes};

/// API key the fake accepts.
pub const KEY: &str = "osb-test-key";
/// Header the direct endpoint asks clients to send (routing).
pub const ROUTE_HEADER: &str = "opensandbox-ingress-to";

/// One sandbox as the lifecycle server knows it.
pub struct Sb {
    pub boxed: Arc<FakeBox>,
    pub image: String,
    pub entrypoint: Vec<String>,
    pub metadata: BTreeMap<String, String>,
    pub state: &'static str,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub resource_limits: Value,
}

/// Shared fake state.
pub struct State_ {
    pub sandboxes: Sandboxes<Sb>,
    pub faults: Arc<Faults>,
    pub rec: Arc<Recorder>,
    /// `POST /command` bodies.
    pub commands: Mutex<Vec<Value>>,
    /// Command ids interrupted with `DELETE /command`, and whether they
    /// were still running.
    pub interrupts: Mutex<Vec<(String, bool)>>,
    /// Upload metadata parts, as received.
    pub uploads: Mutex<Vec<Value>>,
    /// Running commands: id → (sandbox, pid).
    pub running: Mutex<HashMap<String, (Arc<FakeBox>, u32)>>,
    /// Bash sessions (`fake_opensandbox_session.rs`).
    pub bash_sessions: fake_opensandbox_session::Sessions,
    /// Page size cap for listing.
    pub page_cap: AtomicU64,
    /// Delay of pause/resume transitions, ms.
    pub transition_ms: AtomicU64,
    next: AtomicU64,
    addr: Mutex<Option<SocketAddr>>,
}

/// A running fake OpenSandbox.
#[derive(Clone)]
pub struct FakeOpenSandbox {
    pub addr: SocketAddr,
    pub state: Arc<State_>,
}

impl FakeOpenSandbox {
    /// Starts a fake on 127.0.0.1:0.
    pub async fn start() -> Self {
        let layer = Layer::new(|_, code, msg| json!({"code": code, "message": msg}));
        let state = Arc::new(State_ {
            sandboxes: Sandboxes::default(),
            faults: layer.faults.clone(),
            rec: layer.rec.clone(),
            commands: Mutex::new(Vec::new()),
            interrupts: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
            running: Mutex::new(HashMap::new()),
            bash_sessions: Default::default(),
            page_cap: AtomicU64::new(1000),
            transition_ms: AtomicU64::new(150),
            next: AtomicU64::new(1),
            addr: Mutex::new(None),
        });
        let execd = Router::new()
            .route("/ping", get(ping))
            .route("/command", post(command).delete(interrupt))
            .route("/session", post(fake_opensandbox_session::create))
            .route("/session/{sid}/run", post(fake_opensandbox_session::run))
            .route(
                "/session/{sid}",
                axum::routing::delete(fake_opensandbox_session::delete),
            )
            .route("/files/download", get(download))
            .route("/files/upload", post(upload))
            .route("/files/info", get(info))
            .route("/directories/list", get(list_dir));
        let router = Router::new()
            .route("/v1/sandboxes", post(create).get(list))
            .route("/v1/sandboxes/{id}", get(get_one).delete(delete_one))
            .route("/v1/sandboxes/{id}/pause", post(pause))
            .route("/v1/sandboxes/{id}/resume", post(resume))
            .route("/v1/sandboxes/{id}/renew-expiration", post(renew))
            .route("/v1/sandboxes/{id}/endpoints/{port}", get(endpoint))
            .nest("/v1/sandboxes/{id}/proxy/44772", execd.clone())
            .merge(execd);
        let addr = fake_sandbox::serve_faulty(router, state.clone(), layer).await;
        *state.addr.lock().unwrap() = Some(addr);
        FakeOpenSandbox { addr, state }
    }

    /// Lifecycle base URL (with `/v1`).
    pub fn api_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Fault switches.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Recorder.
    pub fn rec(&self) -> &Recorder {
        &self.state.rec
    }

    /// Ids of all sandboxes.
    pub fn ids(&self) -> Vec<String> {
        self.state.sandboxes.ids()
    }

    /// State of sandbox `id`.
    pub fn sandbox_state(&self, id: &str) -> Option<&'static str> {
        self.state.sandboxes.with(id, |s| s.state)
    }

    /// The box of sandbox `id`.
    pub fn boxed(&self, id: &str) -> Arc<FakeBox> {
        self.state.sandboxes.lock().unwrap()[id].boxed.clone()
    }
}

pub type St = State<Arc<State_>>;

pub fn err(status: u16, code: &str, msg: &str) -> Response {
    fake_sandbox::json_error(status, json!({"code": code, "message": msg}))
}

fn check_key(h: &HeaderMap) -> Option<Response> {
    match h.get("open-sandbox-api-key").and_then(|v| v.to_str().ok()) {
        None => Some(err(
            401,
            "MISSING_API_KEY",
            "Authentication credentials are missing",
        )),
        Some(KEY) => None,
        Some(_) => Some(err(401, "INVALID_API_KEY", "Invalid API key")),
    }
}

fn sandbox_json(id: &str, sb: &Sb) -> Value {
    json!({
        "id": id,
        "image": {"uri": sb.image},
        "status": {"state": sb.state, "reason": null, "message": null, "lastTransitionAt": sb.created_at},
        "metadata": sb.metadata,
        "entrypoint": sb.entrypoint,
        "expiresAt": sb.expires_at,
        "createdAt": sb.created_at,
    })
}

async fn create(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&body) else {
        return err(400, "INVALID_REQUEST", "body must be a JSON object");
    };
    const KNOWN: [&str; 11] = [
        "image",
        "snapshotId",
        "entrypoint",
        "timeout",
        "resourceLimits",
        "env",
        "metadata",
        "networkPolicy",
        "volumes",
        "extensions",
        "platform",
    ];
    if let Some(k) = b.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return err(400, "INVALID_REQUEST", &format!("unknown field {k}"));
    }
    let Some(image) = b
        .get("image")
        .and_then(|i| i.get("uri"))
        .and_then(Value::as_str)
    else {
        return err(400, "INVALID_REQUEST", "image.uri is required");
    };
    let entrypoint: Vec<String> = match b.get("entrypoint").and_then(Value::as_array) {
        Some(a) if !a.is_empty() && a.iter().all(Value::is_string) => {
            a.iter().map(|v| v.as_str().unwrap().to_string()).collect()
        }
        _ => {
            return err(
                400,
                "INVALID_REQUEST",
                "entrypoint must be a non-empty list of strings",
            );
        }
    };
    match b.get("timeout") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_u64().is_some_and(|t| t >= 60) => {}
        _ => {
            return err(
                400,
                "INVALID_REQUEST",
                "timeout must be an integer >= 60 or null",
            );
        }
    }
    let mut metadata = BTreeMap::new();
    for field in ["metadata", "env", "resourceLimits"] {
        match b.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let Some(v) = v.as_str() else {
                        return err(
                            400,
                            "INVALID_REQUEST",
                            &format!("{field}.{k} must be a string"),
                        );
                    };
                    if field == "metadata" {
                        metadata.insert(k.clone(), v.to_string());
                    }
                }
            }
            Some(_) => {
                return err(
                    400,
                    "INVALID_REQUEST",
                    &format!("{field} must be an object"),
                );
            }
        }
    }
    let id = format!("osb-{}", s.next.fetch_add(1, Ordering::Relaxed));
    let now = chrono::Utc::now();
    let sb = Sb {
        boxed: FakeBox::new(&id),
        image: image.to_string(),
        entrypoint,
        metadata,
        state: "Running",
        created_at: now.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        expires_at: b.get("timeout").and_then(Value::as_u64).map(|t| {
            (now + chrono::Duration::seconds(t as i64))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        }),
        resource_limits: b.get("resourceLimits").cloned().unwrap_or(Value::Null),
    };
    let mut v = sandbox_json(&id, &sb);
    v.as_object_mut().unwrap().remove("image");
    s.sandboxes.lock().unwrap().insert(id, sb);
    (StatusCode::ACCEPTED, axum::Json(v)).into_response()
}

async fn list(State(s): St, h: HeaderMap, Query(q): Query<Vec<(String, String)>>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let states: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "state")
        .map(|(_, v)| v.as_str())
        .collect();
    const ALL: [&str; 8] = [
        "Pending",
        "Running",
        "Pausing",
        "Paused",
        "Resuming",
        "Stopping",
        "Terminated",
        "Failed",
    ];
    if let Some(bad) = states.iter().find(|s| !ALL.contains(s)) {
        return err(400, "INVALID_REQUEST", &format!("invalid state {bad}"));
    }
    let filter: Vec<(String, String)> = q
        .iter()
        .find(|(k, _)| k == "metadata")
        .map(|(_, v)| {
            let u = reqwest::Url::parse(&format!("http://x/?{v}")).unwrap();
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let page: usize = q
        .iter()
        .find(|(k, _)| k == "page")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(1);
    let size: usize = q
        .iter()
        .find(|(k, _)| k == "pageSize")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(20);
    if page < 1 || size < 1 {
        return err(400, "INVALID_REQUEST", "page and pageSize must be >= 1");
    }
    let size = size.min(s.page_cap.load(Ordering::Relaxed) as usize);
    let all: Vec<Value> = s
        .sandboxes
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, sb)| states.is_empty() || states.contains(&sb.state))
        .filter(|(_, sb)| filter.iter().all(|(k, v)| sb.metadata.get(k) == Some(v)))
        .map(|(id, sb)| sandbox_json(id, sb))
        .collect();
    let total = all.len();
    let items: Vec<Value> = all.into_iter().skip((page - 1) * size).take(size).collect();
    let pages = total.div_ceil(size);
    axum::Json(json!({
        "items": items,
        "pagination": {"page": page, "pageSize": size, "totalItems": total, "totalPages": pages, "hasNextPage": page < pages},
    }))
    .into_response()
}

fn not_found(id: &str) -> Response {
    err(
        404,
        "DOCKER::SANDBOX_NOT_FOUND",
        &format!("sandbox {id} not found"),
    )
}

async fn get_one(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    match s.sandboxes.lock().unwrap().get(&id) {
        Some(sb) => axum::Json(sandbox_json(&id, sb)).into_response(),
        None => not_found(&id),
    }
}

async fn delete_one(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    match s.sandboxes.lock().unwrap().remove(&id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => not_found(&id),
    }
}

/// Moves `id` from `from` through `via` to `to` after the transition delay.
fn transition(
    s: &Arc<State_>,
    id: &str,
    from: &str,
    via: &'static str,
    to: &'static str,
    code: &str,
) -> Response {
    let mut all = s.sandboxes.lock().unwrap();
    let Some(sb) = all.get_mut(id) else {
        return not_found(id);
    };
    if sb.state != from {
        return err(409, code, &format!("sandbox {id} is {}", sb.state));
    }
    sb.state = via;
    if to == "Paused" {
        sb.boxed.kill_all();
    }
    let (s2, id2) = (s.clone(), id.to_string());
    let ms = s.transition_ms.load(Ordering::Relaxed);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if let Some(sb) = s2.sandboxes.lock().unwrap().get_mut(&id2) {
            sb.state = to;
        }
    });
    StatusCode::ACCEPTED.into_response()
}

async fn pause(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    transition(
        &s,
        &id,
        "Running",
        "Pausing",
        "Paused",
        "DOCKER::SANDBOX_NOT_RUNNING",
    )
}

async fn resume(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    transition(
        &s,
        &id,
        "Paused",
        "Resuming",
        "Running",
        "DOCKER::SANDBOX_NOT_PAUSED",
    )
}

async fn renew(State(s): St, h: HeaderMap, Path(id): Path<String>, body: Bytes) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let Some(at) = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
        v.get("expiresAt")
            .and_then(Value::as_str)
            .map(str::to_string)
    }) else {
        return err(400, "INVALID_REQUEST", "expiresAt is required");
    };
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(&at) else {
        return err(400, "INVALID_REQUEST", "expiresAt must be RFC 3339");
    };
    if t < chrono::Utc::now() {
        return err(400, "INVALID_REQUEST", "expiresAt is in the past");
    }
    let mut all = s.sandboxes.lock().unwrap();
    let Some(sb) = all.get_mut(&id) else {
        return not_found(&id);
    };
    sb.expires_at = Some(at.clone());
    axum::Json(json!({"expiresAt": at})).into_response()
}

async fn endpoint(
    State(s): St,
    h: HeaderMap,
    Path((id, port)): Path<(String, u16)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    if port != 44772 {
        return err(404, "ENDPOINT_NOT_FOUND", "only execd is exposed");
    }
    if !s.sandboxes.lock().unwrap().contains_key(&id) {
        return not_found(&id);
    }
    let addr = s.addr.lock().unwrap().unwrap();
    if q.get("use_server_proxy").map(String::as_str) == Some("true") {
        axum::Json(json!({"endpoint": format!("{addr}/v1/sandboxes/{id}/proxy/44772")}))
            .into_response()
    } else {
        axum::Json(json!({"endpoint": addr.to_string(), "headers": {"OpenSandbox-Ingress-To": format!("{id}-44772")}}))
            .into_response()
    }
}

/// The sandbox an execd request is for: by the proxy path (API key
/// required) or by the routing header of the direct endpoint.
pub fn execd_box(
    s: &State_,
    h: &HeaderMap,
    params: &RawPathParams,
) -> Result<Arc<FakeBox>, Response> {
    let id = match params.iter().find(|(k, _)| *k == "id") {
        Some((_, id)) => {
            if let Some(r) = check_key(h) {
                return Err(r);
            }
            id.to_string()
        }
        None => {
            let Some(route) = h.get(ROUTE_HEADER).and_then(|v| v.to_str().ok()) else {
                return Err(err(404, "NO_ROUTE", "missing routing header"));
            };
            route.trim_end_matches("-44772").to_string()
        }
    };
    let all = s.sandboxes.lock().unwrap();
    match all.get(&id) {
        Some(sb) if sb.state == "Running" => Ok(sb.boxed.clone()),
        Some(_) => Err(err(503, "SANDBOX_NOT_RUNNING", "execd is not reachable")),
        None => Err(err(404, "DOCKER::SANDBOX_NOT_FOUND", "sandbox not found")),
    }
}

async fn ping(State(s): St, h: HeaderMap, p: RawPathParams) -> Response {
    match execd_box(&s, &h, &p) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(r) => r,
    }
}

/// An execd event frame: bare JSON and a blank line.
pub fn frame(v: Value) -> Bytes {
    let mut s = serde_json::to_string(&v).unwrap();
    s.push_str("\n\n");
    Bytes::from(s)
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Splits output into execd's line events: terminator removed, an empty
/// line as `"\n"`, `\r` ends a line too; invalid UTF-8 replaced.
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    fn push(&mut self, data: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(i) = self.buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            out.push(if text.is_empty() { "\n".into() } else { text });
        }
        out
    }

    fn finish(&mut self) -> Option<String> {
        (!self.buf.is_empty())
            .then(|| String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned())
    }
}

async fn command(State(s): St, h: HeaderMap, p: RawPathParams, body: Bytes) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return err(400, "INVALID_REQUEST_BODY", "body must be a JSON object");
    };
    const KNOWN: [&str; 7] = [
        "command",
        "cwd",
        "background",
        "timeout",
        "uid",
        "gid",
        "envs",
    ];
    if let Some(k) = req.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return err(400, "INVALID_REQUEST_BODY", &format!("unknown field {k}"));
    }
    let Some(line) = req
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return err(400, "INVALID_REQUEST_BODY", "command is required");
    };
    if req.get("timeout").is_some_and(|t| !t.is_i64()) {
        return err(
            400,
            "INVALID_REQUEST_BODY",
            "timeout must be an integer (ms)",
        );
    }
    s.commands.lock().unwrap().push(Value::Object(req.clone()));
    let cwd = req
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or("/workspace")
        .to_string();
    let env: BTreeMap<String, String> = req
        .get("envs")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let timeout_ms = req.get("timeout").and_then(Value::as_u64);
    let argv = vec!["bash".to_string(), "-c".to_string(), line];
    let (child, pid) = match b.spawn(&argv, &cwd, &env, false) {
        Ok(x) => x,
        Err(e) => return err(500, "RUNTIME_ERROR", &e.to_string()),
    };
    let id = format!("cmd-{}", s.next.fetch_add(1, Ordering::Relaxed));
    s.running
        .lock()
        .unwrap()
        .insert(id.clone(), (b.clone(), pid));
    let split = s.faults.split_bytes.load(Ordering::Relaxed);
    let cut_after = s.faults.cut_stream_after.load(Ordering::Relaxed);
    let mut outs = fake_sandbox::pump(child, false);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1024);
    let st = s.clone();
    tokio::spawn(async move {
        // Sends one frame, one byte per HTTP chunk when splitting.
        let send = |tx: mpsc::Sender<Result<Bytes, std::io::Error>>, f: Bytes| async move {
            if split {
                for b in f.iter() {
                    let _ = tx.send(Ok(Bytes::copy_from_slice(&[*b]))).await;
                }
            } else {
                let _ = tx.send(Ok(f)).await;
            }
        };
        send(
            tx.clone(),
            frame(json!({"type": "init", "text": id, "timestamp": now_ms()})),
        )
        .await;
        let started = std::time::Instant::now();
        let (mut out_lines, mut err_lines) = (Lines { buf: Vec::new() }, Lines { buf: Vec::new() });
        let mut sent = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.tick().await;
        let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        loop {
            let dl = async {
                match deadline {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                o = outs.recv() => {
                    let (kind, lines) = match o {
                        Some(Out::Stdout(d)) => ("stdout", out_lines.push(&d)),
                        Some(Out::Stderr(d)) => ("stderr", err_lines.push(&d)),
                        Some(Out::Exit(code, sig)) => {
                            for (kind, l) in [("stdout", out_lines.finish()), ("stderr", err_lines.finish())] {
                                if let Some(l) = l {
                                    send(tx.clone(), frame(json!({"type": kind, "text": l, "timestamp": now_ms()}))).await;
                                }
                            }
                            b.reap(pid);
                            st.running.lock().unwrap().remove(&id);
                            let code = sig.map(|s| 128 + s).unwrap_or(code);
                            let ev = if code == 0 {
                                json!({"type": "execution_complete", "timestamp": now_ms(), "execution_time": started.elapsed().as_millis() as u64})
                            } else {
                                json!({"type": "error", "timestamp": now_ms(), "error": {"ename": "CommandExecError", "evalue": code.to_string(), "traceback": []}})
                            };
                            send(tx.clone(), frame(ev)).await;
                            return;
                        }
                        None => return,
                    };
                    for l in lines {
                        if cut_after > 0 && sent >= cut_after {
                            let _ = tx.send(Err(std::io::Error::other("cut"))).await;
                            return;
                        }
                        sent += 1;
                        send(tx.clone(), frame(json!({"type": kind, "text": l, "timestamp": now_ms()}))).await;
                    }
                }
                _ = tick.tick() => {
                    send(tx.clone(), frame(json!({"type": "ping", "text": "pong", "timestamp": now_ms()}))).await;
                }
                _ = dl => {
                    b.kill(pid);
                }
            }
        }
    });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(fake_sandbox::channel_body(rx))
        .unwrap()
}

async fn interrupt(
    State(s): St,
    h: HeaderMap,
    p: RawPathParams,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = execd_box(&s, &h, &p) {
        return r;
    }
    let Some(id) = q.get("id") else {
        return err(400, "INVALID_REQUEST", "id is required");
    };
    let running = s.running.lock().unwrap().remove(id);
    let was = running.is_some();
    if let Some((b, pid)) = running {
        b.kill(pid);
    }
    s.interrupts.lock().unwrap().push((id.clone(), was));
    StatusCode::OK.into_response()
}

async fn download(
    State(s): St,
    h: HeaderMap,
    p: RawPathParams,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let path = q.get("path").cloned().unwrap_or_default();
    let Some(host) = b.host_read(&path).filter(|h| h.exists()) else {
        return err(404, "FILE_NOT_FOUND", &format!("file not found: {path}"));
    };
    if host.is_dir() {
        return err(400, "INVALID_FILE", &format!("{path} is a directory"));
    }
    let data = std::fs::read(&host).unwrap();
    if let Some(range) = h.get("range").and_then(|v| v.to_str().ok()) {
        let Some((a, z)) = range.strip_prefix("bytes=").and_then(|r| r.split_once('-')) else {
            return err(400, "INVALID_RANGE", "bad range");
        };
        let a: usize = a.parse().unwrap_or(0);
        let z: usize = z.parse().unwrap_or(usize::MAX);
        if a >= data.len() {
            return StatusCode::RANGE_NOT_SATISFIABLE.into_response();
        }
        let z = z.min(data.len() - 1);
        return (
            StatusCode::PARTIAL_CONTENT,
            [("content-type", "application/octet-stream")],
            data[a..=z].to_vec(),
        )
            .into_response();
    }
    ([("content-type", "application/octet-stream")], data).into_response()
}

async fn upload(State(s): St, h: HeaderMap, p: RawPathParams, req: Request) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut mp = match axum::extract::Multipart::from_request(req, &()).await {
        Ok(m) => m,
        Err(e) => return err(400, "INVALID_REQUEST", &e.to_string()),
    };
    let mut pending_meta: Option<Value> = None;
    let mut wrote = 0;
    while let Ok(Some(field)) = mp.next_field().await {
        let name = field.name().unwrap_or("").to_string();
        // execd reads form.File[...]: parts without a filename are invisible.
        if field.file_name().is_none() {
            continue;
        }
        let data = field.bytes().await.unwrap_or_default();
        match name.as_str() {
            "metadata" => match serde_json::from_slice::<Value>(&data) {
                Ok(v) => {
                    s.uploads.lock().unwrap().push(v.clone());
                    pending_meta = Some(v);
                }
                Err(_) => return err(400, "INVALID_REQUEST", "metadata is not JSON"),
            },
            "file" => {
                let Some(meta) = pending_meta.take() else {
                    return err(400, "INVALID_REQUEST", "metadata file is missing");
                };
                let path = meta
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let Some(host) = b.host(&path) else {
                    return err(403, "PERMISSION_DENIED", &format!("cannot write {path}"));
                };
                if host.is_dir() {
                    return err(400, "INVALID_FILE", &format!("{path} is a directory"));
                }
                // strconv.ParseUint(strconv.Itoa(mode), 8, 32)
                let mode = match meta.get("mode").and_then(Value::as_i64) {
                    None => None,
                    Some(m) => match u32::from_str_radix(&m.to_string(), 8) {
                        Ok(m) => Some(m),
                        Err(_) => return err(500, "RUNTIME_ERROR", &format!("invalid mode {m}")),
                    },
                };
                std::fs::create_dir_all(host.parent().unwrap()).unwrap();
                std::fs::write(&host, &data).unwrap();
                if let Some(m) = mode {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(m)).unwrap();
                }
                wrote += 1;
            }
            _ => {}
        }
    }
    if wrote == 0 {
        return err(400, "INVALID_REQUEST", "metadata file is missing");
    }
    StatusCode::OK.into_response()
}

fn file_info(b: &FakeBox, host: &std::path::Path) -> Option<Value> {
    let (kind, size, mode, mtime) = fake_sandbox::host_stat(host)?;
    Some(json!({
        "path": b.sandbox_path(host),
        "type": match kind { "dir" => "directory", k => k },
        "size": size,
        "modified_at": mtime.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        "created_at": mtime.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        "owner": "root",
        "group": "root",
        // Octal digits, as execd writes them.
        "mode": format!("{mode:o}").parse::<u64>().unwrap(),
    }))
}

async fn info(
    State(s): St,
    h: HeaderMap,
    p: RawPathParams,
    Query(q): Query<Vec<(String, String)>>,
) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut out = serde_json::Map::new();
    for (_, path) in q.iter().filter(|(k, _)| k == "path") {
        match b.host_entry(path).and_then(|h| file_info(&b, &h)) {
            Some(v) => {
                out.insert(path.clone(), v);
            }
            None => return err(404, "FILE_NOT_FOUND", &format!("file not found: {path}")),
        }
    }
    axum::Json(Value::Object(out)).into_response()
}

async fn list_dir(
    State(s): St,
    h: HeaderMap,
    p: RawPathParams,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let b = match execd_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let path = q.get("path").cloned().unwrap_or_default();
    let Some(host) = b.host(&path).filter(|h| h.exists()) else {
        return err(
            404,
            "FILE_NOT_FOUND",
            &format!("directory not found: {path}"),
        );
    };
    if !host.is_dir() {
        return err(400, "INVALID_PATH", &format!("{path} is not a directory"));
    }
    let mut items: Vec<Value> = std::fs::read_dir(&host)
        .unwrap()
        .flatten()
        .filter_map(|e| file_info(&b, &e.path()))
        .collect();
    items.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    axum::Json(items).into_response()
}
