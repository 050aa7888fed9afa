//! A fake Daytona on 127.0.0.1: the REST API under `/api`
//! (`daytona/api/openapi.yaml`: create with labels, list by labels with
//! cursor paging, get, start/stop/recover with state transitions, delete,
//! toolbox-proxy-url) and the toolbox under `/toolbox/{sandboxId}`
//! (`daytona/toolbox/openapi.yaml`: `/process/execute` with the daemon's
//! hidden 10 s default timeout, sessions with a followed log over a
//! WebSocket whose frames tag stdout `\x01\x01\x01` and stderr
//! `\x02\x02\x02`, PTY sessions on a real PTY (`fake_daytona_pty.rs`), files,
//! work dir and home dir). An "old daemon" switch
//! answers commands with exit code -1 and no output (C17). Commands run
//! for real in a bubblewrap box.
// Handlers answer errors as ready responses; boxing them buys nothing in a fake.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::fake_daytona_pty;
use crate::support::fake_sandbox::{self, FakeBox, Faults, Layer, Out, Recorder, Sandboxes};

/// API key the fake accepts.
pub const KEY: &str = "dtn-test-key";
/// The toolbox's work dir and home.
pub const HOME: &str = "/home/daytona";

/// One sandbox as the API knows it.
pub struct Sb {
    pub boxed: Arc<FakeBox>,
    pub labels: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub state: &'static str,
    pub recoverable: bool,
    pub created_at: String,
    pub updated_at: String,
    pub body: Value,
}

/// Output and exit of one session command.
#[derive(Default)]
pub struct Cmd {
    pub command: String,
    /// Tagged log, in order: (1 = stdout, 2 = stderr, bytes).
    pub log: Vec<(u8, Bytes)>,
    pub exit: Option<i32>,
    pub pid: Option<u32>,
}

/// One session.
pub struct Session {
    pub boxed: Arc<FakeBox>,
    pub cmds: HashMap<String, Arc<(Mutex<Cmd>, Notify)>>,
}

/// Shared fake state.
pub struct State_ {
    pub sandboxes: Sandboxes<Sb>,
    pub sessions: Mutex<HashMap<String, Session>>,
    pub faults: Arc<Faults>,
    pub rec: Arc<Recorder>,
    /// `/process/execute` bodies.
    pub executes: Mutex<Vec<Value>>,
    /// Session exec bodies.
    pub session_execs: Mutex<Vec<Value>>,
    /// Deleted sessions, with the number of commands they still ran.
    pub deleted_sessions: Mutex<Vec<(String, usize)>>,
    /// Answer every command like the old daemon: exit -1, no output.
    pub old_daemon: AtomicBool,
    /// Delay of state transitions, ms.
    pub transition_ms: AtomicU64,
    /// Page size cap.
    pub page_cap: AtomicU64,
    /// PTY sessions by (sandbox id, session id).
    pub ptys: fake_daytona_pty::Ptys,
    next: AtomicU64,
    addr: Mutex<Option<SocketAddr>>,
}

/// A running fake Daytona.
#[derive(Clone)]
pub struct FakeDaytona {
    pub addr: SocketAddr,
    pub state: Arc<State_>,
}

impl FakeDaytona {
    /// Starts a fake on 127.0.0.1:0.
    pub async fn start() -> Self {
        let layer = Layer::new(
            |status, code, msg| json!({"statusCode": status, "message": msg, "error": code, "code": code}),
        );
        let state = Arc::new(State_ {
            sandboxes: Sandboxes::default(),
            sessions: Mutex::new(HashMap::new()),
            faults: layer.faults.clone(),
            rec: layer.rec.clone(),
            executes: Mutex::new(Vec::new()),
            session_execs: Mutex::new(Vec::new()),
            deleted_sessions: Mutex::new(Vec::new()),
            old_daemon: AtomicBool::new(false),
            transition_ms: AtomicU64::new(150),
            page_cap: AtomicU64::new(200),
            ptys: Default::default(),
            next: AtomicU64::new(1),
            addr: Mutex::new(None),
        });
        let toolbox = Router::new()
            .route("/work-dir", get(work_dir))
            .route("/user-home-dir", get(work_dir))
            .route("/process/execute", post(execute))
            .route("/process/session", post(create_session))
            .route(
                "/process/session/{sid}",
                axum::routing::delete(delete_session),
            )
            .route("/process/session/{sid}/exec", post(session_exec))
            .route("/process/session/{sid}/command/{cid}", get(command_status))
            .route("/process/session/{sid}/command/{cid}/logs", get(logs))
            .route(
                "/process/pty",
                post(fake_daytona_pty::create).get(fake_daytona_pty::list),
            )
            .route(
                "/process/pty/{sid}",
                get(fake_daytona_pty::info).delete(fake_daytona_pty::delete),
            )
            .route("/process/pty/{sid}/connect", get(fake_daytona_pty::connect))
            .route("/process/pty/{sid}/resize", post(fake_daytona_pty::resize))
            .route("/files/download", get(download))
            .route("/files/upload-v2", post(upload))
            .route("/files", get(list_files))
            .route("/files/info", get(file_info));
        let router = Router::new()
            .route("/api/sandbox", post(create).get(list))
            .route("/api/sandbox/{id}", get(get_one).delete(delete_one))
            .route("/api/sandbox/{id}/start", post(start))
            .route("/api/sandbox/{id}/stop", post(stop))
            .route("/api/sandbox/{id}/recover", post(recover))
            .route("/api/sandbox/{id}/last-activity", post(last_activity))
            .route("/api/sandbox/{id}/toolbox-proxy-url", get(proxy_url))
            .nest("/toolbox/{id}", toolbox);
        let addr = fake_sandbox::serve_faulty(router, state.clone(), layer).await;
        *state.addr.lock().unwrap() = Some(addr);
        FakeDaytona { addr, state }
    }

    /// API base URL.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
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

    /// Sets the state of sandbox `id` (error states for recover tests).
    pub fn set_state(&self, id: &str, state: &'static str, recoverable: bool) {
        let mut all = self.state.sandboxes.lock().unwrap();
        let sb = all.get_mut(id).unwrap();
        sb.state = state;
        sb.recoverable = recoverable;
    }

    /// The box of sandbox `id`.
    pub fn boxed(&self, id: &str) -> Arc<FakeBox> {
        self.state.sandboxes.lock().unwrap()[id].boxed.clone()
    }
}

pub type St = State<Arc<State_>>;

fn err(status: u16, msg: &str) -> Response {
    let reason = StatusCode::from_u16(status)
        .unwrap()
        .canonical_reason()
        .unwrap_or("");
    fake_sandbox::json_error(
        status,
        json!({"statusCode": status, "message": msg, "error": reason}),
    )
}

/// A toolbox command request's JSON object and its `command`, checked
/// as the daemon does: an object, only `allowed` fields, `command` given;
/// otherwise the daemon's 400 for `path`.
fn command_body(
    body: &[u8],
    allowed: &[&str],
    path: &str,
) -> Result<(serde_json::Map<String, Value>, String), Response> {
    let bad = |msg: &str| toolbox_err(400, "BAD_REQUEST", msg, path);
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(body) else {
        return Err(bad("invalid request body"));
    };
    if let Some(k) = req.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(&format!("unknown field {k}")));
    }
    let Some(command) = req.get("command").and_then(Value::as_str) else {
        return Err(bad("command is required"));
    };
    let command = command.to_string();
    Ok((req, command))
}

pub fn toolbox_err(status: u16, code: &str, msg: &str, path: &str) -> Response {
    fake_sandbox::json_error(
        status,
        json!({"statusCode": status, "message": msg, "code": code, "path": path, "timestamp": chrono::Utc::now().to_rfc3339()}),
    )
}

fn check_key(h: &HeaderMap) -> Option<Response> {
    let auth = h
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != format!("Bearer {KEY}") {
        return Some(err(401, "Invalid credentials"));
    }
    None
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

fn sandbox_json(s: &State_, id: &str, sb: &Sb) -> Value {
    let addr = s.addr.lock().unwrap().unwrap();
    json!({
        "id": id, "name": id, "organizationId": "org", "user": "daytona",
        "env": sb.env, "labels": sb.labels, "public": false, "target": "us",
        "cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "networkBlockAll": false,
        "toolboxProxyUrl": format!("http://{addr}/toolbox"),
        "state": sb.state, "desiredState": "started", "recoverable": sb.recoverable,
        "errorReason": if sb.state == "error" { json!("the runner failed") } else { Value::Null },
        "createdAt": sb.created_at, "updatedAt": sb.updated_at, "lastActivityAt": sb.updated_at,
    })
}

/// Moves `id` to `to` after the transition delay.
fn later(s: &Arc<State_>, id: &str, to: &'static str) {
    let (s2, id2) = (s.clone(), id.to_string());
    let ms = s.transition_ms.load(Ordering::Relaxed);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if let Some(sb) = s2.sandboxes.lock().unwrap().get_mut(&id2) {
            sb.state = to;
            sb.updated_at = now();
        }
    });
}

async fn create(State(s): St, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&body) else {
        return err(400, "body must be a JSON object");
    };
    const KNOWN: [&str; 20] = [
        "name",
        "snapshot",
        "user",
        "env",
        "labels",
        "public",
        "networkBlockAll",
        "networkAllowList",
        "class",
        "target",
        "cpu",
        "gpu",
        "memory",
        "disk",
        "autoStopInterval",
        "autoArchiveInterval",
        "autoDeleteInterval",
        "autoPauseInterval",
        "volumes",
        "buildInfo",
    ];
    if let Some(k) = b.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return err(400, &format!("property {k} should not exist"));
    }
    let mut maps = [BTreeMap::new(), BTreeMap::new()];
    for (i, field) in ["labels", "env"].iter().enumerate() {
        match b.get(*field) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    match v.as_str() {
                        Some(v) => {
                            maps[i].insert(k.clone(), v.to_string());
                        }
                        None => return err(400, &format!("{field}.{k} must be a string")),
                    }
                }
            }
            Some(_) => return err(400, &format!("{field} must be an object")),
        }
    }
    if b.get("public").is_some_and(|p| !p.is_boolean()) {
        return err(400, "public must be a boolean");
    }
    let id = format!("dtn{}", s.next.fetch_add(1, Ordering::Relaxed));
    let boxed = FakeBox::new(&id);
    std::fs::create_dir_all(boxed.host(HOME).unwrap()).unwrap();
    let [labels, env] = maps;
    let sb = Sb {
        boxed,
        labels,
        env,
        state: "creating",
        recoverable: false,
        created_at: now(),
        updated_at: now(),
        body: Value::Object(b),
    };
    let v = sandbox_json(&s, &id, &sb);
    s.sandboxes.lock().unwrap().insert(id.clone(), sb);
    later(&s, &id, "started");
    axum::Json(v).into_response()
}

async fn list(State(s): St, h: HeaderMap, Query(q): Query<Vec<(String, String)>>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let labels: BTreeMap<String, String> = match q.iter().find(|(k, _)| k == "labels") {
        None => BTreeMap::new(),
        Some((_, v)) => match serde_json::from_str(v) {
            Ok(m) => m,
            Err(_) => return err(400, "labels must be a JSON object of strings"),
        },
    };
    let states: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "states")
        .map(|(_, v)| v.as_str())
        .collect();
    let limit: usize = match q
        .iter()
        .find(|(k, _)| k == "limit")
        .map(|(_, v)| v.parse::<usize>())
    {
        None => 100,
        Some(Ok(l)) if (1..=200).contains(&l) => l,
        _ => return err(400, "limit must be 1..200"),
    };
    let limit = limit.min(s.page_cap.load(Ordering::Relaxed) as usize);
    let offset: usize = q
        .iter()
        .find(|(k, _)| k == "cursor")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let all: Vec<Value> = s
        .sandboxes
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, sb)| states.is_empty() || states.contains(&sb.state))
        .filter(|(_, sb)| labels.iter().all(|(k, v)| sb.labels.get(k) == Some(v)))
        .map(|(id, sb)| {
            let mut v = sandbox_json(&s, id, sb);
            v.as_object_mut().unwrap().remove("env");
            v
        })
        .collect();
    let items: Vec<Value> = all.iter().skip(offset).take(limit).cloned().collect();
    let next = (offset + limit < all.len()).then(|| (offset + limit).to_string());
    axum::Json(json!({"items": items, "nextCursor": next})).into_response()
}

async fn get_one(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    match s.sandboxes.lock().unwrap().get(&id) {
        Some(sb) => axum::Json(sandbox_json(&s, &id, sb)).into_response(),
        None => err(404, &format!("Sandbox with ID or name {id} not found")),
    }
}

async fn delete_one(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    match s.sandboxes.lock().unwrap().remove(&id) {
        Some(sb) => {
            sb.boxed.kill_all();
            axum::Json(json!({"id": id, "state": "destroying"})).into_response()
        }
        None => err(404, &format!("Sandbox with ID or name {id} not found")),
    }
}

fn move_state(
    s: &Arc<State_>,
    id: &str,
    from: &[&str],
    via: &'static str,
    to: &'static str,
) -> Response {
    let mut all = s.sandboxes.lock().unwrap();
    let Some(sb) = all.get_mut(id) else {
        return err(404, &format!("Sandbox with ID or name {id} not found"));
    };
    if !from.contains(&sb.state) {
        return err(409, &format!("Sandbox {id} is {}", sb.state));
    }
    sb.state = via;
    if to == "stopped" {
        sb.boxed.kill_all();
    }
    let v = sandbox_json(s, id, sb);
    drop(all);
    later(s, id, to);
    axum::Json(v).into_response()
}

async fn start(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    move_state(
        &s,
        &id,
        &["stopped", "paused", "archived"],
        "starting",
        "started",
    )
}

async fn stop(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    move_state(&s, &id, &["started"], "stopping", "stopped")
}

/// `POST /sandbox/{id}/last-activity`: 201, the activity time moved.
async fn last_activity(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let mut all = s.sandboxes.lock().unwrap();
    match all.get_mut(&id) {
        Some(sb) => {
            sb.updated_at = now();
            StatusCode::CREATED.into_response()
        }
        None => err(404, "not found"),
    }
}

async fn recover(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    {
        let all = s.sandboxes.lock().unwrap();
        if all.get(&id).is_some_and(|sb| !sb.recoverable) {
            return err(400, "Sandbox is not recoverable");
        }
    }
    move_state(&s, &id, &["error"], "starting", "started")
}

async fn proxy_url(State(s): St, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = check_key(&h) {
        return r;
    }
    let addr = s.addr.lock().unwrap().unwrap();
    if !s.sandboxes.lock().unwrap().contains_key(&id) {
        return err(404, "not found");
    }
    axum::Json(json!({"url": format!("http://{addr}/toolbox")})).into_response()
}

/// The started sandbox a toolbox request is for.
pub fn tb_box(
    s: &State_,
    h: &HeaderMap,
    params: &HashMap<String, String>,
) -> Result<Arc<FakeBox>, Response> {
    if let Some(r) = check_key(h) {
        return Err(r);
    }
    let id = params.get("id").cloned().unwrap_or_default();
    let all = s.sandboxes.lock().unwrap();
    match all.get(&id) {
        Some(sb) if sb.state == "started" => Ok(sb.boxed.clone()),
        Some(sb) => Err(err(
            400,
            &format!("Sandbox {id} is not started (state {})", sb.state),
        )),
        None => Err(err(404, &format!("Sandbox with ID or name {id} not found"))),
    }
}

async fn work_dir(State(s): St, h: HeaderMap, Path(p): Path<HashMap<String, String>>) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    axum::Json(json!({"dir": HOME})).into_response()
}

async fn execute(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (req, command) = match command_body(
        &body,
        &["command", "cwd", "timeout", "envs"],
        "/process/execute",
    ) {
        Ok(v) => v,
        Err(r) => return r,
    };
    s.executes.lock().unwrap().push(Value::Object(req.clone()));
    if s.old_daemon.load(Ordering::Relaxed) {
        return axum::Json(json!({"exitCode": -1, "result": ""})).into_response();
    }
    // The daemon's hidden default.
    let timeout = req.get("timeout").and_then(Value::as_u64).unwrap_or(10);
    let cwd = req
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or(HOME)
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
    let argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        format!("{{ {command}\n}} 2>&1"),
    ];
    let (child, pid) = match b.spawn(&argv, &cwd, &env, false) {
        Ok(x) => x,
        Err(e) => return toolbox_err(400, "BAD_REQUEST", &e.to_string(), "/process/execute"),
    };
    let mut outs = fake_sandbox::pump(child, false);
    let mut result = Vec::new();
    let run = async {
        while let Some(o) = outs.recv().await {
            match o {
                Out::Stdout(d) | Out::Stderr(d) => result.extend_from_slice(&d),
                Out::Exit(code, sig) => return sig.map(|s| 128 + s).unwrap_or(code),
            }
        }
        -1
    };
    match tokio::time::timeout(Duration::from_secs(timeout), run).await {
        Ok(code) => {
            b.reap(pid);
            axum::Json(json!({"exitCode": code, "result": String::from_utf8_lossy(&result)}))
                .into_response()
        }
        Err(_) => {
            b.kill(pid);
            toolbox_err(
                408,
                "REQUEST_TIMEOUT",
                "command execution timeout",
                "/process/execute",
            )
        }
    }
}

fn session_key(p: &HashMap<String, String>) -> String {
    format!(
        "{}/{}",
        p.get("id").cloned().unwrap_or_default(),
        p.get("sid").cloned().unwrap_or_default()
    )
}

async fn create_session(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(sid) = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
        v.get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string)
    }) else {
        return toolbox_err(
            400,
            "BAD_REQUEST",
            "sessionId is required",
            "/process/session",
        );
    };
    let key = format!("{}/{sid}", p["id"]);
    let mut all = s.sessions.lock().unwrap();
    if all.contains_key(&key) {
        return toolbox_err(
            409,
            "CONFLICT",
            "session already exists",
            "/process/session",
        );
    }
    all.insert(
        key,
        Session {
            boxed: b,
            cmds: HashMap::new(),
        },
    );
    StatusCode::CREATED.into_response()
}

async fn delete_session(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let key = session_key(&p);
    let Some(sess) = s.sessions.lock().unwrap().remove(&key) else {
        return toolbox_err(404, "NOT_FOUND", "session not found", "/process/session");
    };
    let mut killed = 0;
    for c in sess.cmds.values() {
        let pid = c.0.lock().unwrap().pid;
        if let Some(pid) = pid
            && sess.boxed.kill(pid)
        {
            killed += 1;
        }
    }
    s.deleted_sessions
        .lock()
        .unwrap()
        .push((p["sid"].clone(), killed));
    StatusCode::NO_CONTENT.into_response()
}

async fn session_exec(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let (req, command) = match command_body(
        &body,
        &["command", "runAsync", "async", "suppressInputEcho"],
        "/process/session/exec",
    ) {
        Ok(v) => v,
        Err(r) => return r,
    };
    s.session_execs
        .lock()
        .unwrap()
        .push(Value::Object(req.clone()));
    let is_async = req
        .get("runAsync")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || req.get("async").and_then(Value::as_bool).unwrap_or(false);
    let key = session_key(&p);
    let boxed = match s.sessions.lock().unwrap().get(&key) {
        Some(sess) => sess.boxed.clone(),
        None => {
            return toolbox_err(
                404,
                "NOT_FOUND",
                "session not found",
                "/process/session/exec",
            );
        }
    };
    let cid = format!("c{}", s.next.fetch_add(1, Ordering::Relaxed));
    let cmd = Arc::new((
        Mutex::new(Cmd {
            command: command.clone(),
            ..Default::default()
        }),
        Notify::new(),
    ));
    s.sessions
        .lock()
        .unwrap()
        .get_mut(&key)
        .unwrap()
        .cmds
        .insert(cid.clone(), cmd.clone());
    if s.old_daemon.load(Ordering::Relaxed) {
        cmd.0.lock().unwrap().exit = Some(-1);
        cmd.1.notify_waiters();
    } else {
        let argv = vec!["/bin/sh".to_string(), "-c".into(), command];
        match boxed.spawn(&argv, HOME, &BTreeMap::new(), false) {
            Ok((child, pid)) => {
                cmd.0.lock().unwrap().pid = Some(pid);
                let mut outs = fake_sandbox::pump(child, false);
                let c2 = cmd.clone();
                let b2 = boxed.clone();
                tokio::spawn(async move {
                    while let Some(o) = outs.recv().await {
                        let mut g = c2.0.lock().unwrap();
                        match o {
                            Out::Stdout(d) => g.log.push((1, d)),
                            Out::Stderr(d) => g.log.push((2, d)),
                            Out::Exit(code, sig) => {
                                g.exit = Some(sig.map(|s| 128 + s).unwrap_or(code));
                                b2.reap(pid);
                            }
                        }
                        drop(g);
                        c2.1.notify_waiters();
                    }
                });
            }
            Err(e) => {
                return toolbox_err(400, "BAD_REQUEST", &e.to_string(), "/process/session/exec");
            }
        }
    }
    if is_async {
        return (StatusCode::ACCEPTED, axum::Json(json!({"cmdId": cid}))).into_response();
    }
    loop {
        let notified = cmd.1.notified();
        if let Some(code) = cmd.0.lock().unwrap().exit {
            let g = cmd.0.lock().unwrap();
            let (out, errs) = split_log(&g.log);
            return axum::Json(json!({"cmdId": cid, "exitCode": code, "stdout": out, "stderr": errs, "output": format!("{out}{errs}")})).into_response();
        }
        notified.await;
    }
}

fn split_log(log: &[(u8, Bytes)]) -> (String, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    for (k, d) in log {
        if *k == 1 {
            o.extend_from_slice(d)
        } else {
            e.extend_from_slice(d)
        }
    }
    (
        String::from_utf8_lossy(&o).into_owned(),
        String::from_utf8_lossy(&e).into_owned(),
    )
}

fn find_cmd(s: &State_, p: &HashMap<String, String>) -> Option<Arc<(Mutex<Cmd>, Notify)>> {
    let key = session_key(p);
    s.sessions
        .lock()
        .unwrap()
        .get(&key)?
        .cmds
        .get(p.get("cid")?)
        .cloned()
}

async fn command_status(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let Some(cmd) = find_cmd(&s, &p) else {
        return toolbox_err(
            404,
            "NOT_FOUND",
            "command not found",
            "/process/session/command",
        );
    };
    let g = cmd.0.lock().unwrap();
    let mut v = json!({"id": p["cid"], "command": g.command});
    if let Some(c) = g.exit {
        v["exitCode"] = json!(c);
    }
    axum::Json(v).into_response()
}

async fn logs(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    if let Err(r) = tb_box(&s, &h, &p) {
        return r;
    }
    let Some(cmd) = find_cmd(&s, &p) else {
        return toolbox_err(
            404,
            "NOT_FOUND",
            "command not found",
            "/process/session/command/logs",
        );
    };
    let follow = q.get("follow").map(String::as_str) == Some("true");
    if !follow || h.get("upgrade").is_none() {
        let g = cmd.0.lock().unwrap();
        let (out, errs) = split_log(&g.log);
        let new_sdk = h
            .get("x-daytona-sdk-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v >= "0.167.0");
        return if new_sdk {
            axum::Json(json!({"output": format!("{out}{errs}"), "stdout": out, "stderr": errs}))
                .into_response()
        } else {
            format!("{out}{errs}").into_response()
        };
    }
    let (mut parts, _) = req.into_parts();
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    let split = s.faults.split_bytes.load(Ordering::Relaxed);
    let cut = s.faults.cut_stream_after.load(Ordering::Relaxed);
    ws.on_upgrade(move |socket| follow_log(socket, cmd, split, cut))
}

async fn follow_log(mut ws: WebSocket, cmd: Arc<(Mutex<Cmd>, Notify)>, split: bool, cut: u64) {
    let mut sent = 0usize;
    let mut frames = 0u64;
    loop {
        let notified = cmd.1.notified();
        let (chunks, done) = {
            let g = cmd.0.lock().unwrap();
            (g.log[sent..].to_vec(), g.exit.is_some())
        };
        sent += chunks.len();
        for (k, d) in chunks {
            let mut wire = if k == 1 {
                b"\x01\x01\x01".to_vec()
            } else {
                b"\x02\x02\x02".to_vec()
            };
            wire.extend_from_slice(&d);
            let pieces: Vec<Vec<u8>> = if split {
                wire.iter().map(|b| vec![*b]).collect()
            } else {
                vec![wire]
            };
            for piece in pieces {
                if cut > 0 && frames >= cut {
                    // Drop the connection without a close frame.
                    return;
                }
                frames += 1;
                if ws.send(Message::Binary(Bytes::from(piece))).await.is_err() {
                    return;
                }
            }
        }
        if done {
            let _ = ws
                .send(Message::Close(Some(CloseFrame {
                    code: 1000,
                    reason: "".into(),
                })))
                .await;
            return;
        }
        notified.await;
    }
}

async fn download(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let path = q.get("path").cloned().unwrap_or_default();
    let Some(host) = b.host_read(&path).filter(|h| h.exists()) else {
        return toolbox_err(
            404,
            "FILE_NOT_FOUND",
            &format!("file not found: {path}"),
            "/files/download",
        );
    };
    if host.is_dir() {
        return toolbox_err(
            400,
            "BAD_REQUEST",
            &format!("{path} is a directory"),
            "/files/download",
        );
    }
    (
        [("content-type", "application/octet-stream")],
        std::fs::read(&host).unwrap(),
    )
        .into_response()
}

async fn upload(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(path) = q.get("path").cloned() else {
        return toolbox_err(400, "BAD_REQUEST", "path is required", "/files/upload-v2");
    };
    let ct = h
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let data = if ct.starts_with("multipart/form-data") {
        let mut mp = match axum::extract::Multipart::from_request(req, &()).await {
            Ok(m) => m,
            Err(e) => return toolbox_err(400, "BAD_REQUEST", &e.to_string(), "/files/upload-v2"),
        };
        let mut found = None;
        while let Ok(Some(f)) = mp.next_field().await {
            if f.name() == Some("file") {
                found = f.bytes().await.ok();
            }
        }
        match found {
            Some(d) => d,
            None => {
                return toolbox_err(
                    400,
                    "BAD_REQUEST",
                    "field file is missing",
                    "/files/upload-v2",
                );
            }
        }
    } else {
        axum::body::to_bytes(req.into_body(), usize::MAX)
            .await
            .unwrap_or_default()
    };
    let Some(host) = b.host(&path) else {
        return toolbox_err(403, "FORBIDDEN", "permission denied", "/files/upload-v2");
    };
    if host.is_dir() {
        return toolbox_err(
            400,
            "BAD_REQUEST",
            &format!("{path} is a directory"),
            "/files/upload-v2",
        );
    }
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::write(&host, &data).unwrap();
    let name = path.rsplit('/').next().unwrap_or("").to_string();
    axum::Json(json!({"name": name, "path": path, "type": "file"})).into_response()
}

fn info_json(host: &std::path::Path) -> Option<Value> {
    let (kind, size, mode, mtime) = fake_sandbox::host_stat(host)?;
    let rwx: String = (0..9)
        .map(|i| {
            let bit = 1 << (8 - i);
            if mode & bit == 0 {
                '-'
            } else {
                ['r', 'w', 'x'][i % 3]
            }
        })
        .collect();
    let lead = match kind {
        "dir" => 'd',
        "symlink" => 'L',
        _ => '-',
    };
    Some(json!({
        "name": host.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        "path": host.to_string_lossy(),
        "isDir": kind == "dir",
        "size": size,
        "mode": format!("{lead}{rwx}"),
        "permissions": format!("0{mode:o}"),
        "owner": "daytona",
        "group": "daytona",
        "modifiedAt": mtime.to_rfc3339(),
        "modTime": mtime.to_string(),
    }))
}

async fn list_files(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let path = q.get("path").cloned().unwrap_or_default();
    let Some(host) = b.host(&path).filter(|h| h.exists()) else {
        return toolbox_err(
            404,
            "FILE_NOT_FOUND",
            &format!("directory not found: {path}"),
            "/files",
        );
    };
    if !host.is_dir() {
        return toolbox_err(
            400,
            "BAD_REQUEST",
            &format!("{path} is not a directory"),
            "/files",
        );
    }
    let items: Vec<Value> = std::fs::read_dir(&host)
        .unwrap()
        .flatten()
        .filter_map(|e| info_json(&e.path()))
        .collect();
    axum::Json(items).into_response()
}

async fn file_info(
    State(s): St,
    h: HeaderMap,
    Path(p): Path<HashMap<String, String>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let b = match tb_box(&s, &h, &p) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let path = q.get("path").cloned().unwrap_or_default();
    match b.host_entry(&path).and_then(|h| info_json(&h)) {
        Some(v) => axum::Json(v).into_response(),
        None => toolbox_err(
            404,
            "FILE_NOT_FOUND",
            &format!("file not found: {path}"),
            "/files/info",
        ),
    }
}
