//! A project-owned stand-in for a Kubernetes API server, for tests.
//!
//! Serves on `127.0.0.1:0` (axum): discovery (`/api`, `/apis`,
//! `/api/v1`, `/version`), namespaces, PVCs and Pods of core/v1 as JSON
//! with `Status` errors (404, 409, 422, 400), label-selector lists,
//! graceful deletion, and the real exec websocket protocol
//! (`v5.channel.k8s.io`, `v4.channel.k8s.io`; binary frames with the
//! channel byte, an empty "connected" frame, stdin close `[255, 0]`, the
//! status JSON last on channel 3, then a Close with code 1000) — see
//! `docs/k8s-testing.md` §4; with `tty=true` the command runs on a PTY
//! resized through channel 4 (module `tty`).
//!
//! Each "pod" runs commands for real with bubblewrap: the host's `/usr`
//! and `/etc` read-only, the PVC's host directory at `/workspace` and a
//! per-pod directory at `/tmp`; the host PID namespace is shared, as all
//! execs of a real Pod share one, so a marker-based kill from a second
//! exec finds the first one's processes.
//!
//! [`Stub::set_ro_binds`] shows host paths read-only at the same path in
//! every pod, the way a real image would carry them (the backend suite
//! binds `node` and `@modelcontextprotocol/server-everything` so an MCP
//! server can run inside a pod).
//!
//! Switches ([`Switches`]) make it misbehave on purpose: v4 only, a Pod
//! stuck in `ImagePullBackOff`, slow Pending, slow deletion, a connection
//! dropped mid-exec and an exec that ends without its status frame.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

// Paths spelt out so the file also builds when included by path
// (`examples/fakes`), where a child module would be looked up beside it.
#[path = "k8s_stub/behind.rs"]
mod behind;
#[path = "k8s_stub/tty.rs"]
mod tty;

/// Knobs a test flips at run time.
#[derive(Debug, Default)]
pub struct Switches {
    /// Offer only `v4.channel.k8s.io` (clusters before 1.30).
    pub v4_only: AtomicBool,
    /// New Pods stay Pending with `ImagePullBackOff`.
    pub image_pull_backoff: AtomicBool,
    /// New Pods are unschedulable (`PodScheduled=False/Unschedulable`).
    pub unschedulable: AtomicBool,
    /// Milliseconds a new Pod stays Pending (`ContainerCreating`).
    pub pending_ms: AtomicU64,
    /// Milliseconds a deleted Pod or PVC stays (with a
    /// `deletionTimestamp`) before it is gone.
    pub delete_delay_ms: AtomicU64,
    /// Drop the TCP connection after the first output frame of an exec.
    pub drop_mid_exec: AtomicBool,
    /// End execs with a Close frame but no status frame.
    pub no_status: AtomicBool,
}

/// One exec the stub served.
#[derive(Debug, Clone)]
pub struct ExecRecord {
    /// Pod name.
    pub pod: String,
    /// Subprotocol agreed.
    pub protocol: String,
    /// The command as sent.
    pub command: Vec<String>,
    /// Asked for a terminal (`tty=true`).
    pub tty: bool,
}

#[derive(Debug)]
struct Obj {
    value: Value,
    created: Instant,
    deleting: Option<Instant>,
}

#[derive(Default)]
struct Store {
    namespaces: BTreeMap<String, Obj>,
    /// (namespace, name) → object.
    pvcs: BTreeMap<(String, String), Obj>,
    pods: BTreeMap<(String, String), Obj>,
}

/// The running stub.
pub struct Stub {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Misbehaviour switches.
    pub switches: Arc<Switches>,
    inner: Arc<Inner>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

struct Inner {
    root: PathBuf,
    store: Mutex<Store>,
    switches: Arc<Switches>,
    execs: Mutex<Vec<ExecRecord>>,
    counter: AtomicU64,
    /// Host paths every pod sees read-only at the same path.
    ro_binds: Mutex<Vec<PathBuf>>,
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn status(code: u16, reason: &str, message: impl Into<String>) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message.into(), "reason": reason, "code": code,
    });
    (
        StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(v: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn created(v: Value) -> Response {
    (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn label_value_ok(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric()
            && v.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-')))
}

fn parse_query(q: &str) -> Vec<(String, String)> {
    url_decode_pairs(q)
}

fn url_decode_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(v)) => {
                out.push(v);
                i += 2;
            }
            (c, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn selector_matches(obj: &Value, selector: Option<&str>) -> bool {
    let Some(sel) = selector else { return true };
    sel.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        let v = v.trim_start_matches('=');
        obj["metadata"]["labels"][k].as_str() == Some(v)
    })
}

impl Inner {
    fn now_rfc3339() -> String {
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn stamp(&self, v: &mut Value) {
        let n = self.next();
        let m = &mut v["metadata"];
        m["uid"] = json!(format!("00000000-0000-0000-0000-{n:012}"));
        m["resourceVersion"] = json!(n.to_string());
        m["creationTimestamp"] = json!(Self::now_rfc3339());
    }

    fn pvc_dir(&self, ns: &str, name: &str) -> PathBuf {
        self.root.join("pvcs").join(ns).join(name)
    }

    fn pod_tmp(&self, ns: &str, name: &str) -> PathBuf {
        self.root.join("pods").join(ns).join(name).join("tmp")
    }

    /// Drops objects whose deletion delay has passed.
    fn reap(&self, store: &mut Store) {
        let delay = Duration::from_millis(self.switches.delete_delay_ms.load(Ordering::Relaxed));
        let gone = |o: &Obj| o.deleting.is_some_and(|t| t.elapsed() >= delay);
        let pvcs: Vec<_> = store
            .pvcs
            .iter()
            .filter(|(_, o)| gone(o))
            .map(|(k, _)| k.clone())
            .collect();
        for k in pvcs {
            store.pvcs.remove(&k);
            let _ = std::fs::remove_dir_all(self.pvc_dir(&k.0, &k.1));
        }
        store.pods.retain(|_, o| !gone(o));
    }

    /// The Pod as a client sees it now (status from its age and the
    /// switches).
    fn pod_view(&self, o: &Obj) -> Value {
        let mut v = o.value.clone();
        let sw = &self.switches;
        let pending = Duration::from_millis(sw.pending_ms.load(Ordering::Relaxed));
        let image = v["spec"]["containers"][0]["image"].clone();
        let cname = v["spec"]["containers"][0]["name"].clone();
        let bad = v["metadata"]["annotations"]["stub/bad"]
            .as_str()
            .map(str::to_string);
        v["status"] = match bad.as_deref() {
            Some("ImagePullBackOff") => json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{
                    "name": cname, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": if o.created.elapsed() < Duration::from_millis(300) { "ErrImagePull" } else { "ImagePullBackOff" },
                        "message": format!("Back-off pulling image {image}")}}
                }]
            }),
            Some("Unschedulable") => json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient cpu."}]
            }),
            Some("Failed") => json!({
                "phase": "Failed",
                "containerStatuses": [{
                    "name": cname, "image": image, "imageID": "stub", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
                }]
            }),
            // Evicted by the kubelet (node pressure): phase Failed with
            // the reason on the Pod, as `kubectl get pod` shows it.
            Some("Evicted") => json!({
                "phase": "Failed", "reason": "Evicted",
                "message": "The node was low on resource: memory.",
            }),
            Some("Succeeded") => json!({
                "phase": "Succeeded",
                "containerStatuses": [{
                    "name": cname, "image": image, "imageID": "stub", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}
                }]
            }),
            _ if o.created.elapsed() < pending => json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{
                    "name": cname, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}}
                }]
            }),
            _ => json!({
                "phase": "Running",
                "podIP": "10.0.0.2",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{
                    "name": cname, "image": image, "imageID": "stub", "ready": true, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": Self::now_rfc3339()}}
                }]
            }),
        };
        v
    }
}

impl Stub {
    /// Starts a stub on `127.0.0.1:0`.
    pub async fn start() -> Stub {
        let dir = tempfile::tempdir().unwrap();
        let switches = Arc::new(Switches::default());
        let inner = Arc::new(Inner {
            root: dir.path().to_path_buf(),
            store: Mutex::default(),
            switches: switches.clone(),
            execs: Mutex::default(),
            counter: AtomicU64::new(100),
            ro_binds: Mutex::default(),
        });
        let app = Router::new()
            .route("/version", get(version))
            .route("/api", get(api_versions))
            .route("/apis", get(api_groups))
            .route("/api/v1", get(api_resources))
            .route("/api/v1/namespaces", get(list_ns).post(create_ns))
            .route("/api/v1/namespaces/{ns}", get(get_ns))
            .route(
                "/api/v1/namespaces/{ns}/persistentvolumeclaims",
                get(list_pvcs).post(create_pvc),
            )
            .route(
                "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}",
                get(get_pvc).delete(delete_pvc),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods",
                get(list_pods).post(create_pod),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}",
                get(get_pod).delete(delete_pod),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/exec",
                get(exec).post(exec),
            )
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Stub {
            url: format!("http://{addr}"),
            switches,
            inner,
            _dir: dir,
            task,
        }
    }

    /// Host directory of a PVC's data.
    pub fn pvc_dir(&self, ns: &str, name: &str) -> PathBuf {
        self.inner.pvc_dir(ns, name)
    }

    /// The stored Pod object (as created), if any.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Value> {
        let store = self.inner.store.lock().unwrap();
        store
            .pods
            .get(&(ns.to_string(), name.to_string()))
            .map(|o| self.inner.pod_view(o))
    }

    /// Whether a PVC exists (terminating ones included).
    pub fn has_pvc(&self, ns: &str, name: &str) -> bool {
        let mut store = self.inner.store.lock().unwrap();
        self.inner.reap(&mut store);
        store.pvcs.contains_key(&(ns.to_string(), name.to_string()))
    }

    /// Whether a Pod exists (terminating ones included).
    pub fn has_pod(&self, ns: &str, name: &str) -> bool {
        let mut store = self.inner.store.lock().unwrap();
        self.inner.reap(&mut store);
        store.pods.contains_key(&(ns.to_string(), name.to_string()))
    }

    /// Whether a namespace exists.
    pub fn has_namespace(&self, ns: &str) -> bool {
        self.inner.store.lock().unwrap().namespaces.contains_key(ns)
    }

    /// Makes `paths` (host files or directories) visible read-only at the
    /// same paths in every pod's later execs, as if the image carried them.
    pub fn set_ro_binds(&self, paths: Vec<PathBuf>) {
        *self.inner.ro_binds.lock().unwrap() = paths;
    }

    /// Every exec served so far.
    pub fn execs(&self) -> Vec<ExecRecord> {
        self.inner.execs.lock().unwrap().clone()
    }

    /// Sets a Pod's phase as a kubelet would report a dead container
    /// (`Failed`), for the replace-on-reattach path.
    pub fn fail_pod(&self, ns: &str, name: &str) {
        let mut store = self.inner.store.lock().unwrap();
        if let Some(o) = store.pods.get_mut(&(ns.to_string(), name.to_string())) {
            o.value["metadata"]["annotations"]["stub/bad"] = json!("Failed");
        }
    }

    /// Writes a kubeconfig pointing at the stub into `dir` and returns
    /// its path (context `stub`, namespace `ns`).
    pub fn kubeconfig(&self, dir: &Path, ns: &str) -> PathBuf {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stub\n  cluster:\n    server: {}\ncontexts:\n- name: stub\n  context:\n    cluster: stub\n    user: stub\n    namespace: {ns}\ncurrent-context: stub\nusers:\n- name: stub\n  user:\n    token: stub-token\n",
            self.url
        );
        let p = dir.join("kubeconfig");
        std::fs::write(&p, text).unwrap();
        p
    }
}

async fn version() -> Response {
    ok(
        json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-wsbench-stub",
        "platform": "linux/amd64"}),
    )
}

async fn api_versions() -> Response {
    ok(json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}))
}

async fn api_groups() -> Response {
    ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}))
}

async fn api_resources() -> Response {
    let verbs = json!(["create", "delete", "get", "list"]);
    ok(json!({
        "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [
            {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": verbs, "shortNames": ["ns"]},
            {"name": "persistentvolumeclaims", "singularName": "persistentvolumeclaim", "namespaced": true, "kind": "PersistentVolumeClaim", "verbs": verbs, "shortNames": ["pvc"]},
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod", "verbs": verbs, "shortNames": ["po"]},
            {"name": "pods/exec", "singularName": "", "namespaced": true, "kind": "PodExecOptions", "verbs": ["create", "get"]}
        ]
    }))
}

fn list_of(kind: &str, items: Vec<Value>) -> Response {
    ok(json!({"kind": format!("{kind}List"), "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"}, "items": items}))
}

fn selector(q: &Option<String>) -> Option<String> {
    parse_query(q.as_deref().unwrap_or(""))
        .into_iter()
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v)
}

async fn list_ns(State(st): State<Arc<Inner>>) -> Response {
    let store = st.store.lock().unwrap();
    list_of(
        "Namespace",
        store.namespaces.values().map(|o| o.value.clone()).collect(),
    )
}

async fn get_ns(State(st): State<Arc<Inner>>, UrlPath(ns): UrlPath<String>) -> Response {
    let store = st.store.lock().unwrap();
    match store.namespaces.get(&ns) {
        Some(o) => ok(o.value.clone()),
        None => status(404, "NotFound", format!("namespaces \"{ns}\" not found")),
    }
}

async fn create_ns(State(st): State<Arc<Inner>>, body: Bytes) -> Response {
    let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "BadRequest", "bad JSON");
    };
    let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
    if !dns_label(&name) {
        return status(422, "Invalid", format!("Namespace \"{name}\" is invalid"));
    }
    let mut store = st.store.lock().unwrap();
    if store.namespaces.contains_key(&name) {
        return status(
            409,
            "AlreadyExists",
            format!("namespaces \"{name}\" already exists"),
        );
    }
    v["kind"] = json!("Namespace");
    v["apiVersion"] = json!("v1");
    st.stamp(&mut v);
    v["status"] = json!({"phase": "Active"});
    store.namespaces.insert(
        name,
        Obj {
            value: v.clone(),
            created: Instant::now(),
            deleting: None,
        },
    );
    created(v)
}

fn need_ns(store: &Store, ns: &str) -> Option<Response> {
    (!store.namespaces.contains_key(ns))
        .then(|| status(404, "NotFound", format!("namespaces \"{ns}\" not found")))
}

/// Checks name and labels like the API server's validation (422).
#[allow(clippy::result_large_err)] // axum responses, built once per request
fn validate(kind: &str, v: &Value) -> Result<String, Response> {
    let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
    if !dns_label(&name) {
        return Err(status(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: metadata.name: must be a DNS-1123 label"),
        ));
    }
    if let Some(labels) = v["metadata"]["labels"].as_object() {
        for (k, val) in labels {
            if !val.as_str().is_some_and(label_value_ok) {
                return Err(status(
                    422,
                    "Invalid",
                    format!(
                        "{kind} \"{name}\" is invalid: metadata.labels: Invalid value: {val} for {k}"
                    ),
                ));
            }
        }
    }
    Ok(name)
}

async fn list_pvcs(
    State(st): State<Arc<Inner>>,
    UrlPath(ns): UrlPath<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let sel = selector(&q);
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    let items = store
        .pvcs
        .iter()
        .filter(|((n, _), o)| *n == ns && selector_matches(&o.value, sel.as_deref()))
        .map(|(_, o)| o.value.clone())
        .collect();
    list_of("PersistentVolumeClaim", items)
}

async fn get_pvc(
    State(st): State<Arc<Inner>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    match store.pvcs.get(&(ns, name.clone())) {
        Some(o) => ok(o.value.clone()),
        None => status(
            404,
            "NotFound",
            format!("persistentvolumeclaims \"{name}\" not found"),
        ),
    }
}

async fn create_pvc(
    State(st): State<Arc<Inner>>,
    UrlPath(ns): UrlPath<String>,
    body: Bytes,
) -> Response {
    let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "BadRequest", "bad JSON");
    };
    let name = match validate("PersistentVolumeClaim", &v) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    if let Some(r) = need_ns(&store, &ns) {
        return r;
    }
    if store.pvcs.contains_key(&(ns.clone(), name.clone())) {
        return status(
            409,
            "AlreadyExists",
            format!("persistentvolumeclaims \"{name}\" already exists"),
        );
    }
    v["kind"] = json!("PersistentVolumeClaim");
    v["apiVersion"] = json!("v1");
    v["metadata"]["namespace"] = json!(ns);
    st.stamp(&mut v);
    v["status"] = json!({"phase": "Bound", "accessModes": v["spec"]["accessModes"].clone(),
        "capacity": {"storage": v["spec"]["resources"]["requests"]["storage"].clone()}});
    std::fs::create_dir_all(st.pvc_dir(&ns, &name)).unwrap();
    store.pvcs.insert(
        (ns, name),
        Obj {
            value: v.clone(),
            created: Instant::now(),
            deleting: None,
        },
    );
    created(v)
}

fn start_delete(st: &Inner, o: &mut Obj) -> Option<Value> {
    let delay = st.switches.delete_delay_ms.load(Ordering::Relaxed);
    if delay == 0 {
        return None;
    }
    if o.deleting.is_none() {
        o.deleting = Some(Instant::now());
        o.value["metadata"]["deletionTimestamp"] = json!(Inner::now_rfc3339());
        o.value["metadata"]["deletionGracePeriodSeconds"] = json!(delay / 1000);
    }
    Some(o.value.clone())
}

fn deleted_status(kind: &str, name: &str) -> Response {
    ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "kind": kind}}),
    )
}

async fn delete_pvc(
    State(st): State<Arc<Inner>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    let key = (ns.clone(), name.clone());
    let Some(o) = store.pvcs.get_mut(&key) else {
        return status(
            404,
            "NotFound",
            format!("persistentvolumeclaims \"{name}\" not found"),
        );
    };
    match start_delete(&st, o) {
        Some(v) => ok(v),
        None => {
            store.pvcs.remove(&key);
            let _ = std::fs::remove_dir_all(st.pvc_dir(&ns, &name));
            deleted_status("persistentvolumeclaims", &name)
        }
    }
}

async fn list_pods(
    State(st): State<Arc<Inner>>,
    UrlPath(ns): UrlPath<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let sel = selector(&q);
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    let items = store
        .pods
        .iter()
        .filter(|((n, _), o)| *n == ns && selector_matches(&o.value, sel.as_deref()))
        .map(|(_, o)| st.pod_view(o))
        .collect();
    list_of("Pod", items)
}

async fn get_pod(
    State(st): State<Arc<Inner>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    match store.pods.get(&(ns, name.clone())) {
        Some(o) => ok(st.pod_view(o)),
        None => status(404, "NotFound", format!("pods \"{name}\" not found")),
    }
}

async fn create_pod(
    State(st): State<Arc<Inner>>,
    UrlPath(ns): UrlPath<String>,
    body: Bytes,
) -> Response {
    let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "BadRequest", "bad JSON");
    };
    let name = match validate("Pod", &v) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    if let Some(r) = need_ns(&store, &ns) {
        return r;
    }
    if store.pods.contains_key(&(ns.clone(), name.clone())) {
        return status(
            409,
            "AlreadyExists",
            format!("pods \"{name}\" already exists"),
        );
    }
    v["kind"] = json!("Pod");
    v["apiVersion"] = json!("v1");
    v["metadata"]["namespace"] = json!(ns);
    st.stamp(&mut v);
    let sw = &st.switches;
    if sw.image_pull_backoff.load(Ordering::Relaxed) {
        v["metadata"]["annotations"]["stub/bad"] = json!("ImagePullBackOff");
    } else if sw.unschedulable.load(Ordering::Relaxed) {
        v["metadata"]["annotations"]["stub/bad"] = json!("Unschedulable");
    }
    let _ = std::fs::create_dir_all(st.pod_tmp(&ns, &name));
    let o = Obj {
        value: v,
        created: Instant::now(),
        deleting: None,
    };
    let view = st.pod_view(&o);
    store.pods.insert((ns, name), o);
    created(view)
}

async fn delete_pod(
    State(st): State<Arc<Inner>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    let mut store = st.store.lock().unwrap();
    st.reap(&mut store);
    let key = (ns, name.clone());
    let Some(o) = store.pods.get_mut(&key) else {
        return status(404, "NotFound", format!("pods \"{name}\" not found"));
    };
    match start_delete(&st, o) {
        Some(v) => ok(v),
        None => {
            store.pods.remove(&key);
            deleted_status("pods", &name)
        }
    }
}

/// What an exec runs in: the Pod's PVC dir, tmp dir and env.
struct PodRuntime {
    pvc: PathBuf,
    tmp: PathBuf,
    env: Vec<(String, String)>,
    ro_binds: Vec<PathBuf>,
    /// The Pod's name, its host name as in a real Pod.
    hostname: String,
}

async fn exec(
    State(st): State<Arc<Inner>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
    RawQuery(q): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    let params = parse_query(q.as_deref().unwrap_or(""));
    let flag = |k: &str| {
        params
            .iter()
            .any(|(pk, v)| pk == k && (v == "true" || v == "1"))
    };
    let command: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let container = params
        .iter()
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.clone());
    let rt = {
        let mut store = st.store.lock().unwrap();
        st.reap(&mut store);
        let Some(o) = store.pods.get(&(ns.clone(), name.clone())) else {
            return status(404, "NotFound", format!("pods \"{name}\" not found"));
        };
        let view = st.pod_view(o);
        if view["status"]["phase"] != "Running" || o.deleting.is_some() {
            return status(
                400,
                "BadRequest",
                format!(
                    "pod {name} is not running (phase {})",
                    view["status"]["phase"]
                ),
            );
        }
        let c = &view["spec"]["containers"][0];
        if let Some(want) = &container
            && c["name"].as_str() != Some(want)
        {
            return status(
                400,
                "BadRequest",
                format!("container {want} is not valid for pod {name}"),
            );
        }
        let claim = view["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let env = c["env"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        Some((
                            e["name"].as_str()?.to_string(),
                            e["value"].as_str()?.to_string(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        PodRuntime {
            pvc: st.pvc_dir(&ns, &claim),
            tmp: st.pod_tmp(&ns, &name),
            env,
            ro_binds: st.ro_binds.lock().unwrap().clone(),
            hostname: name.clone(),
        }
    };
    if command.is_empty() {
        return status(400, "BadRequest", "you must specify at least 1 command");
    }
    let protocols: &[&str] = if st.switches.v4_only.load(Ordering::Relaxed) {
        &["v4.channel.k8s.io"]
    } else {
        &["v5.channel.k8s.io", "v4.channel.k8s.io"]
    };
    let ws = ws.protocols(protocols.iter().copied());
    let protocol = ws
        .selected_protocol()
        .and_then(|p| p.to_str().ok())
        .unwrap_or("")
        .to_string();
    let stdin = flag("stdin");
    let tty = flag("tty");
    if tty && flag("stderr") {
        // The API server refuses this too: a terminal has one output.
        return status(400, "BadRequest", "tty and stderr cannot both be true");
    }
    st.execs.lock().unwrap().push(ExecRecord {
        pod: name.clone(),
        protocol: protocol.clone(),
        command: command.clone(),
        tty,
    });
    if tty {
        let cmd = bwrap_command(&rt, &command);
        return ws.on_upgrade(move |socket| tty::run(socket, cmd));
    }
    let st2 = st.clone();
    ws.on_upgrade(move |socket| run_exec(st2, socket, rt, command, stdin, protocol))
}

fn status_json(code: Option<i32>) -> Value {
    match code {
        Some(0) => json!({"metadata": {}, "status": "Success"}),
        Some(n) => json!({"metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command, exit code {n}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": n.to_string()}]}}),
        None => {
            json!({"metadata": {}, "status": "Failure", "message": "process killed by a signal",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "137"}]}})
        }
    }
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::Binary(v.into())
}

fn bwrap_command(rt: &PodRuntime, command: &[String]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("bwrap");
    c.args(["--die-with-parent", "--unshare-uts", "--hostname"]);
    c.arg(&rt.hostname);
    c.args(["--ro-bind", "/usr", "/usr"]);
    for (link, target) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        if Path::new(link).is_symlink() {
            c.args(["--symlink", target, link]);
        } else if Path::new(link).exists() {
            c.args(["--ro-bind", link, link]);
        }
    }
    c.args(["--ro-bind", "/etc", "/etc", "--bind"]);
    c.arg(&rt.pvc).arg("/workspace");
    c.arg("--bind").arg(&rt.tmp).arg("/tmp");
    c.args([
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--dir",
        "/root",
        "--clearenv",
    ]);
    for p in &rt.ro_binds {
        c.arg("--ro-bind").arg(p).arg(p);
    }
    c.args([
        "--setenv",
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--setenv",
        "HOME",
        "/root",
    ]);
    for (k, v) in &rt.env {
        c.args(["--setenv", k, v]);
    }
    c.args(["--chdir", "/workspace", "--"]);
    c.args(command);
    c
}

async fn run_exec(
    st: Arc<Inner>,
    socket: WebSocket,
    rt: PodRuntime,
    command: Vec<String>,
    stdin: bool,
    protocol: String,
) {
    let v5 = protocol.starts_with("v5");
    let (mut tx, mut rx) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(64);
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if tx.send(m).await.is_err() {
                break;
            }
        }
        tx
    });
    // "Connected": an empty frame on the lowest writable channel.
    let _ = out_tx.send(Message::Binary(vec![1u8].into())).await;
    let mut child = match bwrap_command(&rt, &command)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            let s = json!({"metadata": {}, "status": "Failure", "reason": "InternalError", "code": 500,
                "message": format!("cannot start the command: {e}")});
            let _ = out_tx.send(frame(3, s.to_string().as_bytes())).await;
            let _ = out_tx
                .send(Message::Close(Some(CloseFrame {
                    code: 1000,
                    reason: "".into(),
                })))
                .await;
            drop(out_tx);
            let _ = writer.await;
            return;
        }
    };
    let drop_mid = st.switches.drop_mid_exec.load(Ordering::Relaxed);
    let first_output = Arc::new(tokio::sync::Notify::new());
    let pump = |mut r: Box<dyn tokio::io::AsyncRead + Send + Unpin>, ch: u8| {
        let out_tx = out_tx.clone();
        let first = first_output.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match r.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if out_tx.send(frame(ch, &buf[..n])).await.is_err() {
                            break;
                        }
                        first.notify_one();
                    }
                }
            }
        })
    };
    let out_task = pump(Box::new(child.stdout.take().unwrap()), 1);
    let err_task = pump(Box::new(child.stderr.take().unwrap()), 2);
    let mut child_stdin = child.stdin.take();
    let reader = tokio::spawn(async move {
        while let Some(m) = rx.next().await {
            match m {
                Ok(Message::Binary(b)) if !b.is_empty() => match b[0] {
                    0 => {
                        if let Some(w) = child_stdin.as_mut()
                            && w.write_all(&b[1..]).await.is_err()
                        {
                            child_stdin = None;
                        }
                    }
                    255 if v5 && b.get(1) == Some(&0) => {
                        if let Some(mut w) = child_stdin.take() {
                            let _ = w.shutdown().await;
                        }
                    }
                    _ => {}
                },
                Ok(Message::Close(_)) | Err(_) => {
                    drop(child_stdin);
                    return true;
                }
                _ => {}
            }
        }
        drop(child_stdin);
        true
    });
    if drop_mid {
        first_output.notified().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = child.start_kill();
        reader.abort();
        writer.abort();
        out_task.abort();
        err_task.abort();
        // Both halves dropped: the TCP connection closes without a
        // Close frame.
        return;
    }
    let _ = out_task.await;
    let _ = err_task.await;
    let code = child.wait().await.ok().and_then(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().or_else(|| s.signal().map(|g| 128 + g))
    });
    if !st.switches.no_status.load(Ordering::Relaxed) {
        let _ = out_tx
            .send(frame(3, status_json(code).to_string().as_bytes()))
            .await;
    }
    let _ = out_tx
        .send(Message::Close(Some(CloseFrame {
            code: 1000,
            reason: "".into(),
        })))
        .await;
    drop(out_tx);
    let _ = writer.await;
    // Give the client a moment to answer the Close before dropping.
    let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
}
