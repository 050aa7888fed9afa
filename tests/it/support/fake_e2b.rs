//! A fake E2B on 127.0.0.1: the control plane (`e2b/openapi.yml`: create,
//! list by metadata with paging, connect/resume, pause, kill) and envd
//! (`/health`, `/files`, `process.Process/Start|SendSignal|SendInput|
//! CloseStdin|List|Update` over Connect with the JSON codec, and
//! `filesystem.Filesystem/ListDir|Stat`), one server for both: envd
//! requests are routed by the `E2b-Sandbox-Id` header. Requests are checked
//! against the spec's shapes; commands run for real in a bubblewrap box,
//! on a real PTY when `Start` asks for one (`fake_e2b_pty.rs`).
// Handlers answer errors as ready responses; boxing them buys nothing in a fake.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::support::fake_e2b_pty;
use crate::support::fake_sandbox::{self, FakeBox, Faults, Layer, Out, Recorder, Sandboxes};

/// API key the fake accepts.
pub const KEY: &str = "e2b-test-key";

/// One sandbox as the control plane knows it.
pub struct Sb {
    pub boxed: Arc<FakeBox>,
    pub template: String,
    pub metadata: BTreeMap<String, String>,
    pub state: &'static str,
    pub started_at: String,
    pub timeout: u64,
    pub token: String,
}

/// A signal the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub sandbox: String,
    pub pid: u32,
    pub signal: String,
    /// Whether the pid was still running.
    pub was_running: bool,
}

/// Shared fake state.
pub struct State_ {
    pub sandboxes: Sandboxes<Sb>,
    pub faults: Arc<Faults>,
    pub rec: Arc<Recorder>,
    pub signals: Mutex<Vec<Signal>>,
    /// `process.Process/Start` bodies (decoded JSON) with their headers.
    pub starts: Mutex<Vec<(Value, BTreeMap<String, String>)>>,
    /// Page size cap for `GET /v2/sandboxes` (forces paging in tests).
    pub page_cap: AtomicUsize,
    /// Keep-alive interval on command streams, ms.
    pub keepalive_ms: AtomicU64,
    next: AtomicU64,
}

/// A running fake E2B.
#[derive(Clone)]
pub struct FakeE2b {
    pub addr: SocketAddr,
    pub state: Arc<State_>,
}

impl FakeE2b {
    /// Starts a fake on 127.0.0.1:0.
    pub async fn start() -> Self {
        let layer = Layer::new(|status, _code, msg| json!({"code": status, "message": msg}));
        let state = Arc::new(State_ {
            sandboxes: Sandboxes::default(),
            faults: layer.faults.clone(),
            rec: layer.rec.clone(),
            signals: Mutex::new(Vec::new()),
            starts: Mutex::new(Vec::new()),
            page_cap: AtomicUsize::new(100),
            keepalive_ms: AtomicU64::new(300),
            next: AtomicU64::new(1),
        });
        let router = Router::new()
            .route("/sandboxes", post(create))
            .route("/v2/sandboxes", get(list))
            .route("/sandboxes/{id}", delete(kill).get(info))
            .route("/sandboxes/{id}/connect", post(connect))
            .route("/sandboxes/{id}/pause", post(pause))
            .route("/health", get(health))
            .route("/files", get(download).post(upload))
            .route("/process.Process/Start", post(start))
            .route("/process.Process/SendSignal", post(send_signal))
            .route("/process.Process/SendInput", post(send_input))
            .route("/process.Process/CloseStdin", post(close_stdin))
            .route("/process.Process/List", post(list_procs))
            .route("/process.Process/Update", post(fake_e2b_pty::update))
            .route("/filesystem.Filesystem/ListDir", post(list_dir))
            .route("/filesystem.Filesystem/Stat", post(stat));
        let addr = fake_sandbox::serve_faulty(router, state.clone(), layer).await;
        FakeE2b { addr, state }
    }

    /// Base URL (control plane and envd alike).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Fault switches.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Recorder.
    pub fn rec(&self) -> &Recorder {
        &self.state.rec
    }

    /// The box of sandbox `id`.
    pub fn boxed(&self, id: &str) -> Arc<FakeBox> {
        self.state.sandboxes.lock().unwrap()[id].boxed.clone()
    }

    /// Ids of all sandboxes.
    pub fn ids(&self) -> Vec<String> {
        self.state.sandboxes.ids()
    }

    /// State of sandbox `id`.
    pub fn sandbox_state(&self, id: &str) -> Option<&'static str> {
        self.state.sandboxes.with(id, |s| s.state)
    }

    /// Deletes sandbox `id` behind the client's back, as the service does
    /// when it expires (issue 15): envd then answers the proxy's 502.
    pub fn delete_behind(&self, id: &str) {
        if let Some(sb) = self.state.sandboxes.lock().unwrap().remove(id) {
            sb.boxed.kill_all();
        }
    }

    /// Pauses sandbox `id` behind the client's back (its processes die,
    /// its files stay; envd answers 502 until it is resumed).
    pub fn pause_behind(&self, id: &str) {
        let mut all = self.state.sandboxes.lock().unwrap();
        let sb = all.get_mut(id).expect("a sandbox to pause");
        sb.state = "paused";
        sb.boxed.kill_all();
    }

    /// Adds a sandbox made by someone else (for listing and paging tests).
    pub fn add_foreign(&self, metadata: BTreeMap<String, String>, state: &'static str) -> String {
        let id = format!("foreign{}", self.state.next.fetch_add(1, Ordering::Relaxed));
        self.state.sandboxes.lock().unwrap().insert(
            id.clone(),
            Sb {
                boxed: FakeBox::new(&id),
                template: "base".into(),
                metadata,
                state,
                started_at: chrono::Utc::now().to_rfc3339(),
                timeout: 300,
                token: "t".into(),
            },
        );
        id
    }
}

pub type St = State<Arc<State_>>;

fn err(status: u16, msg: &str) -> Response {
    fake_sandbox::json_error(status, json!({"code": status, "message": msg}))
}

pub fn connect_err(status: u16, code: &str, msg: &str) -> Response {
    fake_sandbox::json_error(status, json!({"code": code, "message": msg}))
}

fn check_key(h: &HeaderMap) -> Option<Response> {
    match h.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(KEY) => None,
        _ => Some(err(401, "Invalid API key")),
    }
}

fn sandbox_json(id: &str, sb: &Sb) -> Value {
    json!({
        "templateID": sb.template,
        "sandboxID": id,
        "clientID": "fake",
        "envdVersion": "0.5.7",
        "envdAccessToken": sb.token,
        "trafficAccessToken": null,
        "domain": null,
        "alias": sb.template,
    })
}

fn string_map(v: Option<&Value>, field: &str) -> Result<BTreeMap<String, String>, Response> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(err(400, &format!("{field}.{k} must be a string"))),
            })
            .collect(),
        Some(_) => Err(err(400, &format!("{field} must be an object"))),
    }
}

async fn create(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&body) else {
        return err(400, "body must be a JSON object");
    };
    const KNOWN: [&str; 11] = [
        "templateID",
        "timeout",
        "autoPause",
        "secure",
        "allow_internet_access",
        "metadata",
        "envVars",
        "mcp",
        "network",
        "volumeMounts",
        "autoResume",
    ];
    if let Some(k) = b.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return err(400, &format!("unknown field {k}"));
    }
    let Some(template) = b.get("templateID").and_then(Value::as_str) else {
        return err(400, "templateID is required");
    };
    let timeout = match b.get("timeout") {
        None => 15,
        Some(v) => match v.as_u64() {
            Some(t) => t,
            None => return err(400, "timeout must be an integer"),
        },
    };
    let metadata = match string_map(b.get("metadata"), "metadata") {
        Ok(m) => m,
        Err(r) => return r,
    };
    // Checked like the real service does; the fake's commands do not use it.
    if let Err(r) = string_map(b.get("envVars"), "envVars") {
        return r;
    }
    let id = format!("sbx{}", s.next.fetch_add(1, Ordering::Relaxed));
    let sb = Sb {
        boxed: FakeBox::new(&id),
        template: template.to_string(),
        metadata,
        state: "running",
        started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        timeout,
        token: format!("tok-{id}"),
    };
    let body = sandbox_json(&id, &sb);
    s.sandboxes.lock().unwrap().insert(id, sb);
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

async fn list(State(s): St, h: HeaderMap, Query(q): Query<Vec<(String, String)>>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    // The metadata value is itself a query string (encoded twice on the wire).
    let filter: Vec<(String, String)> = get("metadata").map(|m| url_pairs(&m)).unwrap_or_default();
    let states: Vec<String> = get("state")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_else(|| vec!["running".into(), "paused".into()]);
    if let Some(bad) = states
        .iter()
        .find(|s| !["running", "paused"].contains(&s.as_str()))
    {
        return err(400, &format!("invalid state {bad}"));
    }
    let limit: usize = match get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(l)) if (1..=100).contains(&l) => l,
        _ => return err(400, "limit must be 1..100"),
    };
    let limit = limit.min(s.page_cap.load(Ordering::Relaxed));
    let offset: usize = get("nextToken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let all: Vec<Value> = s
        .sandboxes
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, sb)| states.iter().any(|st| st == sb.state))
        .filter(|(_, sb)| filter.iter().all(|(k, v)| sb.metadata.get(k) == Some(v)))
        .map(|(id, sb)| {
            json!({
                "templateID": sb.template, "sandboxID": id, "clientID": "fake",
                "startedAt": sb.started_at, "endAt": sb.started_at, "state": sb.state,
                "metadata": sb.metadata, "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024,
                "envdVersion": "0.5.7",
            })
        })
        .collect();
    let page: Vec<Value> = all.iter().skip(offset).take(limit).cloned().collect();
    let mut r = axum::Json(page).into_response();
    if offset + limit < all.len() {
        r.headers_mut().insert(
            "x-next-token",
            (offset + limit).to_string().parse().unwrap(),
        );
    }
    r
}

fn url_pairs(s: &str) -> Vec<(String, String)> {
    let u = reqwest::Url::parse(&format!("http://x/?{s}")).unwrap();
    u.query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

async fn info(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    match s.sandboxes.lock().unwrap().get(&id) {
        Some(sb) => {
            let mut v = sandbox_json(&id, sb);
            v["state"] = json!(sb.state);
            v["metadata"] = json!(sb.metadata);
            axum::Json(v).into_response()
        }
        None => err(404, &format!("sandbox {id} not found")),
    }
}

async fn connect(State(s): St, h: HeaderMap, Path(id): Path<String>, body: Bytes) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let Some(t) = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("timeout").and_then(Value::as_u64))
    else {
        return err(400, "timeout is required");
    };
    let mut all = s.sandboxes.lock().unwrap();
    let Some(sb) = all.get_mut(&id) else {
        return err(404, &format!("sandbox {id} not found"));
    };
    // Only ever extends.
    sb.timeout = sb.timeout.max(t);
    let status = if sb.state == "paused" {
        sb.state = "running";
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, axum::Json(sandbox_json(&id, sb))).into_response()
}

async fn pause(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let mut all = s.sandboxes.lock().unwrap();
    let Some(sb) = all.get_mut(&id) else {
        return err(404, &format!("sandbox {id} not found"));
    };
    if sb.state == "paused" {
        return err(409, "sandbox is already paused");
    }
    sb.state = "paused";
    sb.boxed.kill_all();
    StatusCode::NO_CONTENT.into_response()
}

async fn kill(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    match s.sandboxes.lock().unwrap().remove(&id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => err(404, &format!("sandbox {id} not found")),
    }
}

/// The running sandbox an envd request is for, after the token check.
pub fn envd_box(s: &State_, h: &HeaderMap) -> Result<Arc<FakeBox>, Response> {
    let id = h
        .get("e2b-sandbox-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let all = s.sandboxes.lock().unwrap();
    let Some(sb) = all.get(id) else {
        // The proxy cannot route to a killed sandbox.
        return Err(connect_err(
            502,
            "unavailable",
            &format!("sandbox {id} not found"),
        ));
    };
    if h.get("e2b-sandbox-port").and_then(|v| v.to_str().ok()) != Some("49983") {
        return Err(connect_err(
            400,
            "invalid_argument",
            "E2b-Sandbox-Port must be 49983",
        ));
    }
    if sb.state != "running" {
        return Err(connect_err(502, "unavailable", "sandbox is paused"));
    }
    if h.get("x-access-token").and_then(|v| v.to_str().ok()) != Some(sb.token.as_str()) {
        return Err(connect_err(401, "unauthenticated", "invalid access token"));
    }
    Ok(sb.boxed.clone())
}

async fn health(State(s): St, h: HeaderMap) -> Response {
    let id = h
        .get("e2b-sandbox-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match s.sandboxes.lock().unwrap().get(id) {
        Some(sb) if sb.state == "running" => StatusCode::NO_CONTENT.into_response(),
        _ => StatusCode::BAD_GATEWAY.into_response(),
    }
}

async fn download(
    State(s): St,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(path) = q.get("path") else {
        return err(400, "path is required");
    };
    let Some(host) = b.host_read(path) else {
        return err(404, &format!("path '{path}' does not exist"));
    };
    if host.is_dir() {
        return err(400, &format!("path '{path}' is a directory"));
    }
    match std::fs::read(&host) {
        Ok(data) => ([("content-type", "application/octet-stream")], data).into_response(),
        Err(_) => err(404, &format!("path '{path}' does not exist")),
    }
}

async fn upload(
    State(s): St,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(path) = q.get("path").cloned() else {
        return err(400, "path is required");
    };
    let ct = h
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let data: Vec<u8> = if ct.starts_with("multipart/form-data") {
        let mut mp = match axum::extract::Multipart::from_request(req, &()).await {
            Ok(m) => m,
            Err(e) => return err(400, &e.to_string()),
        };
        let mut found = None;
        while let Ok(Some(field)) = mp.next_field().await {
            if field.name() == Some("file") {
                found = field.bytes().await.ok().map(|b| b.to_vec());
            }
        }
        match found {
            Some(d) => d,
            None => return err(400, "multipart field `file` is missing"),
        }
    } else if ct.starts_with("application/octet-stream") {
        match axum::body::to_bytes(req.into_body(), usize::MAX).await {
            Ok(b) => b.to_vec(),
            Err(e) => return err(400, &e.to_string()),
        }
    } else {
        return err(400, "unsupported content type");
    };
    let Some(host) = b.host(&path) else {
        return err(401, &format!("user cannot write to {path}"));
    };
    if host.is_dir() {
        return err(400, &format!("path '{path}' is a directory"));
    }
    if let Some(dir) = host.parent()
        && std::fs::create_dir_all(dir).is_err()
    {
        return err(400, "cannot create parent directory");
    }
    if let Err(e) = std::fs::write(&host, data) {
        return err(500, &e.to_string());
    }
    let name = path.rsplit('/').next().unwrap_or("").to_string();
    axum::Json(json!([{"path": path, "name": name, "type": "file"}])).into_response()
}

/// A Connect envelope.
pub fn envelope(flag: u8, v: &Value) -> Bytes {
    let p = serde_json::to_vec(v).unwrap();
    let mut out = Vec::with_capacity(p.len() + 5);
    out.push(flag);
    out.extend_from_slice(&(p.len() as u32).to_be_bytes());
    out.extend_from_slice(&p);
    Bytes::from(out)
}

async fn start(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if h.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/connect+json") {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    // Exactly one envelope with flag 0.
    if body.len() < 5 || body[0] != 0 {
        return connect_err(
            400,
            "invalid_argument",
            "request must be one envelope with flag 0",
        );
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if body.len() != 5 + len {
        return connect_err(
            400,
            "invalid_argument",
            "envelope length does not match the body",
        );
    }
    let Ok(msg) = serde_json::from_slice::<Value>(&body[5..]) else {
        return connect_err(400, "invalid_argument", "envelope is not JSON");
    };
    s.starts
        .lock()
        .unwrap()
        .push((msg.clone(), fake_sandbox::headers_map(&h)));
    let Some(cmd) = msg.pointer("/process/cmd").and_then(Value::as_str) else {
        return connect_err(400, "invalid_argument", "process.cmd is required");
    };
    let mut argv = vec![cmd.to_string()];
    for a in msg
        .pointer("/process/args")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        match a.as_str() {
            Some(a) => argv.push(a.to_string()),
            None => return connect_err(400, "invalid_argument", "args must be strings"),
        }
    }
    let env: BTreeMap<String, String> = msg
        .pointer("/process/envs")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let cwd = msg
        .pointer("/process/cwd")
        .and_then(Value::as_str)
        .unwrap_or("/home/user")
        .to_string();
    if let Some(pty) = msg.get("pty") {
        return fake_e2b_pty::start(&s, &b, pty, &argv, &cwd, &env);
    }
    let with_stdin = msg.get("stdin").and_then(Value::as_bool).unwrap_or(true);
    let deadline: Option<u64> = h
        .get("connect-timeout-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let (child, pid) = match b.spawn(&argv, &cwd, &env, with_stdin) {
        Ok(x) => x,
        Err(e) => return connect_err(400, "invalid_argument", &e.to_string()),
    };
    let split = s.faults.split_bytes.load(Ordering::Relaxed);
    let cut_after = s.faults.cut_stream_after.load(Ordering::Relaxed);
    let keepalive = Duration::from_millis(s.keepalive_ms.load(Ordering::Relaxed));
    let mut outs = fake_sandbox::pump(child, split);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let boxed = b.clone();
    tokio::spawn(async move {
        let b64 = base64::engine::general_purpose::STANDARD;
        let _ = tx
            .send(Ok(envelope(0, &json!({"event": {"start": {"pid": pid}}}))))
            .await;
        let mut sent = 0u64;
        let deadline_at =
            deadline.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        let mut tick = tokio::time::interval(keepalive);
        tick.tick().await;
        loop {
            let dl = async {
                match deadline_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                o = outs.recv() => match o {
                    Some(Out::Stdout(d)) | Some(Out::Stderr(d)) if cut_after > 0 && sent >= cut_after => {
                        let _ = d;
                        // Cut: the connection dies without an end envelope.
                        let _ = tx.send(Err(std::io::Error::other("cut"))).await;
                        return;
                    }
                    Some(Out::Stdout(d)) => {
                        sent += 1;
                        let _ = tx.send(Ok(envelope(0, &json!({"event": {"data": {"stdout": b64.encode(&d)}}})))).await;
                    }
                    Some(Out::Stderr(d)) => {
                        sent += 1;
                        let _ = tx.send(Ok(envelope(0, &json!({"event": {"data": {"stderr": b64.encode(&d)}}})))).await;
                    }
                    Some(Out::Exit(code, sig)) => {
                        boxed.reap(pid);
                        let mut end = serde_json::Map::new();
                        let (code, status) = match sig {
                            Some(9) => (-1, "signal: killed".to_string()),
                            Some(n) => (-1, format!("signal: {n}")),
                            None => (code, format!("exit status {code}")),
                        };
                        // proto3 JSON: a zero exit code is left out.
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
                _ = dl => {
                    // connect-go ends the call at the deadline and the
                    // handler's context kills the process.
                    boxed.kill(pid);
                    let _ = tx.send(Ok(envelope(2, &json!({"error": {"code": "deadline_exceeded", "message": "the operation timed out"}})))).await;
                    return;
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

pub fn unary_json(h: &HeaderMap, body: &[u8]) -> Result<Value, Response> {
    if h.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/json") {
        return Err(StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response());
    }
    serde_json::from_slice(body)
        .map_err(|_| connect_err(400, "invalid_argument", "body is not JSON"))
}

pub fn selector_pid(v: &Value) -> Result<u32, Response> {
    v.pointer("/process/pid")
        .and_then(Value::as_u64)
        .map(|p| p as u32)
        .ok_or_else(|| connect_err(400, "invalid_argument", "process.pid is required"))
}

async fn send_signal(State(s): St, h: HeaderMap, body: Bytes) -> Response {
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
    let signal = v
        .get("signal")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !["SIGNAL_SIGKILL", "SIGNAL_SIGTERM"].contains(&signal.as_str()) {
        return connect_err(400, "invalid_argument", "unknown signal");
    }
    let was_running = b.kill(pid);
    s.signals.lock().unwrap().push(Signal {
        sandbox: b.id.clone(),
        pid,
        signal,
        was_running,
    });
    if !was_running {
        return connect_err(
            404,
            "not_found",
            &format!("process with pid {pid} not found"),
        );
    }
    axum::Json(json!({})).into_response()
}

async fn send_input(State(s): St, h: HeaderMap, body: Bytes) -> Response {
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
    if let Some(data) = v.pointer("/input/pty") {
        return fake_e2b_pty::send_input(&b, pid, data).await;
    }
    let Some(data) = v.pointer("/input/stdin").and_then(Value::as_str) else {
        return connect_err(
            400,
            "invalid_argument",
            "input.stdin or input.pty is required",
        );
    };
    let Ok(data) = base64::engine::general_purpose::STANDARD.decode(data) else {
        return connect_err(400, "invalid_argument", "stdin is not base64");
    };
    let stdin = b
        .procs
        .lock()
        .unwrap()
        .get_mut(&pid)
        .and_then(|p| p.stdin.take());
    let Some(mut stdin) = stdin else {
        return connect_err(404, "not_found", "no stdin for that process");
    };
    let _ = stdin.write_all(&data).await;
    if let Some(p) = b.procs.lock().unwrap().get_mut(&pid) {
        p.stdin = Some(stdin);
    }
    axum::Json(json!({})).into_response()
}

async fn close_stdin(State(s): St, h: HeaderMap, body: Bytes) -> Response {
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
    let stdin = b
        .procs
        .lock()
        .unwrap()
        .get_mut(&pid)
        .and_then(|p| p.stdin.take());
    drop(stdin);
    axum::Json(json!({})).into_response()
}

async fn list_procs(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Err(r) = unary_json(&h, &body) {
        return r;
    }
    let procs: Vec<Value> = b
        .procs
        .lock()
        .unwrap()
        .iter()
        .map(|(pid, p)| json!({"pid": pid, "config": {"cmd": p.cmd}}))
        .collect();
    axum::Json(json!({"processes": procs})).into_response()
}

fn entry(b: &FakeBox, host: &std::path::Path) -> Option<Value> {
    let (kind, size, mode, mtime) = fake_sandbox::host_stat(host)?;
    let path = b.sandbox_path(host);
    let mut e = json!({
        "name": host.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        "type": match kind { "dir" => "FILE_TYPE_DIRECTORY", "symlink" => "FILE_TYPE_SYMLINK", _ => "FILE_TYPE_FILE" },
        "path": path,
        "size": size.to_string(),
        "mode": mode,
        "permissions": "",
        "owner": "user",
        "group": "user",
        "modifiedTime": mtime.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
    });
    if kind == "symlink" {
        e["symlinkTarget"] = json!(std::fs::read_link(host).ok()?.to_string_lossy());
    }
    Some(e)
}

async fn list_dir(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let v = match unary_json(&h, &body) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let path = v.get("path").and_then(Value::as_str).unwrap_or("");
    let Some(host) = b.host(path).filter(|p| p.exists()) else {
        return connect_err(404, "not_found", &format!("path {path} does not exist"));
    };
    if !host.is_dir() {
        return connect_err(
            400,
            "invalid_argument",
            &format!("path {path} is not a directory"),
        );
    }
    let mut entries = Vec::new();
    for e in std::fs::read_dir(&host).unwrap().flatten() {
        if let Some(v) = entry(&b, &e.path()) {
            entries.push(v);
        }
    }
    axum::Json(json!({"entries": entries})).into_response()
}

async fn stat(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    let b = match envd_box(&s, &h) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let v = match unary_json(&h, &body) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let path = v.get("path").and_then(Value::as_str).unwrap_or("");
    match b.host_entry(path).and_then(|p| entry(&b, &p)) {
        Some(e) => axum::Json(json!({"entry": e})).into_response(),
        None => connect_err(404, "not_found", &format!("path {path} does not exist")),
    }
}
