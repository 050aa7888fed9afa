//! What the three fake cloud services share: a sandbox that runs commands
//! for real (`sh -c` inside bubblewrap, so absolute sandbox paths such as
//! `/home/user/workspace` or `/workspace` resolve to a per-sandbox temp
//! dir while the host's `/usr` — `sh`, coreutils, `rg` — is visible
//! read-only), fault switches, a request recorder, and the server start-up
//! on 127.0.0.1:0. Nothing here sends traffic anywhere but loopback.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

/// Directories of the sandbox namespace that are writable (bound to the
/// sandbox's temp dir); everything else is the host's, read-only.
pub const MOUNTS: [&str; 4] = ["/home", "/workspace", "/tmp", "/root"];

/// True when bubblewrap can run here. Tests print `SKIPPED` otherwise and
/// fail under `CI=true`.
pub fn bwrap_available() -> bool {
    std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
        ])
        .args(["--symlink", "usr/lib64", "/lib64", "--", "/bin/true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Skips (or fails under CI) a test when bubblewrap is missing.
#[macro_export]
macro_rules! require_bwrap {
    () => {
        if !$crate::support::fake_sandbox::bwrap_available() {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("bubblewrap (bwrap) is required for the fake sandboxes");
            }
            println!("SKIPPED: bubblewrap (bwrap) is not available");
            return;
        }
    };
}

/// One running process of a fake sandbox.
pub struct Proc {
    /// Process group to kill.
    pub pgid: i32,
    /// Open stdin, when the process was started with one.
    pub stdin: Option<ChildStdin>,
    /// The command line, for `List`.
    pub cmd: String,
    /// The terminal, when the process was started on a PTY
    /// ([`crate::support::fake_pty`]).
    pub pty: Option<Arc<crate::support::fake_pty::PtyProc>>,
}

/// One fake sandbox: a temp dir standing in for its file system, and its
/// running processes.
pub struct FakeBox {
    /// Service-side id.
    pub id: String,
    root: tempfile::TempDir,
    /// Running processes by pid.
    pub procs: Mutex<HashMap<u32, Proc>>,
}

impl FakeBox {
    /// A new sandbox with empty `/home/user`, `/workspace`, `/tmp`, `/root`.
    pub fn new(id: &str) -> Arc<Self> {
        let root = tempfile::tempdir().unwrap();
        for d in ["home/user", "workspace", "tmp", "root"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        Arc::new(FakeBox {
            id: id.to_string(),
            root,
            procs: Mutex::new(HashMap::new()),
        })
    }

    /// Host path of sandbox path `path` for writing and listing: its
    /// links followed as the sandbox's own kernel would (absolute targets
    /// from the sandbox's `/`), as a real service's file API does, wherever
    /// they lead in the sandbox. `None` when that is outside the writable
    /// mounts (or a loop): the fake never writes the host's files.
    pub fn host(&self, path: &str) -> Option<PathBuf> {
        self.resolve(path, true)
            .and_then(|p| self.mapped(&p, false))
    }

    /// [`Self::host`] for reading: also the host's read-only `/usr` and
    /// `/etc`, which the sandbox sees, so a read through a link to
    /// `/etc/passwd` answers what a real service would.
    pub fn host_read(&self, path: &str) -> Option<PathBuf> {
        self.resolve(path, true).and_then(|p| self.mapped(&p, true))
    }

    /// [`Self::host`] with the last component not followed: the entry a
    /// stat describes.
    pub fn host_entry(&self, path: &str) -> Option<PathBuf> {
        self.resolve(path, false)
            .and_then(|p| self.mapped(&p, true))
    }

    /// Host path of an absolute, link-free sandbox path: the box's
    /// writable mounts, and when `read_only` the host's `/usr` and `/etc`
    /// (bound read-only in [`Self::command`]); `None` elsewhere.
    fn mapped(&self, norm: &str, read_only: bool) -> Option<PathBuf> {
        let under = |m: &str| norm == m || norm.starts_with(&format!("{m}/"));
        if MOUNTS.iter().any(|m| under(m)) {
            Some(self.root.path().join(norm.trim_start_matches('/')))
        } else if read_only && ["/usr", "/etc"].into_iter().any(under) {
            Some(PathBuf::from(norm))
        } else {
            None
        }
    }

    /// `path` with its links resolved one component at a time in the
    /// sandbox's namespace (`..` after the links before it, as the kernel
    /// does); the last component is followed only when `follow_last`.
    /// Missing components are kept (a file about to be created). `None`
    /// for a relative path or more than 40 links (a loop).
    fn resolve(&self, path: &str, follow_last: bool) -> Option<String> {
        if !path.starts_with('/') {
            return None;
        }
        let mut done: Vec<String> = Vec::new();
        let mut rest: VecDeque<String> = path.split('/').map(str::to_string).collect();
        let mut hops = 0;
        while let Some(c) = rest.pop_front() {
            match c.as_str() {
                "" | "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => {}
            }
            done.push(c);
            if !follow_last && rest.iter().all(|r| r.is_empty() || r == ".") {
                break;
            }
            let here = format!("/{}", done.join("/"));
            let Some(h) = self.mapped(&here, true) else {
                continue;
            };
            if !h.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
                continue;
            }
            hops += 1;
            if hops > 40 {
                return None;
            }
            let target = std::fs::read_link(&h).ok()?;
            let target = target.to_string_lossy();
            if target.starts_with('/') {
                done.clear();
            } else {
                done.pop();
            }
            for t in target.split('/').rev() {
                rest.push_front(t.to_string());
            }
        }
        Some(format!("/{}", done.join("/")))
    }

    /// The sandbox path of a host path under this sandbox's root.
    pub fn sandbox_path(&self, host: &std::path::Path) -> String {
        let rel = host.strip_prefix(self.root.path()).unwrap_or(host);
        format!("/{}", rel.to_string_lossy())
    }

    /// `bwrap … -- argv` with `cwd` and `env`, in its own process group.
    pub fn command(
        &self,
        argv: &[String],
        cwd: &str,
        env: &BTreeMap<String, String>,
    ) -> tokio::process::Command {
        let mut c = self.bwrap_command(argv, cwd, env);
        c.process_group(0);
        c.kill_on_drop(true);
        c
    }

    /// [`Self::command`] without its own process group, for a child that
    /// becomes a session leader on a PTY (`setsid` fails in a group
    /// leader).
    pub fn bwrap_command(
        &self,
        argv: &[String],
        cwd: &str,
        env: &BTreeMap<String, String>,
    ) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("bwrap");
        c.args(["--die-with-parent", "--unshare-pid"]);
        c.args([
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
        ]);
        c.args([
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
        ]);
        c.args([
            "--ro-bind",
            "/etc",
            "/etc",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]);
        for m in MOUNTS {
            c.arg("--bind").arg(self.root.path().join(&m[1..])).arg(m);
        }
        c.args([
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
            "--setenv",
            "HOME",
            "/home/user",
        ]);
        c.args(["--setenv", "LANG", "C.UTF-8"]);
        for (k, v) in env {
            c.arg("--setenv").arg(k).arg(v);
        }
        c.arg("--chdir").arg(cwd).arg("--");
        c.args(argv);
        c
    }

    /// Starts `argv`; returns the child (stdout/stderr piped) and its pid.
    pub fn spawn(
        &self,
        argv: &[String],
        cwd: &str,
        env: &BTreeMap<String, String>,
        with_stdin: bool,
    ) -> std::io::Result<(Child, u32)> {
        let mut c = self.command(argv, cwd, env);
        c.stdin(if with_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c.spawn()?;
        let pid = child.id().unwrap_or(0);
        let stdin = child.stdin.take();
        self.procs.lock().unwrap().insert(
            pid,
            Proc {
                pgid: pid as i32,
                stdin,
                cmd: argv.join(" "),
                pty: None,
            },
        );
        Ok((child, pid))
    }

    /// Kills the process group of `pid`; false if it is not running.
    pub fn kill(&self, pid: u32) -> bool {
        let Some(p) = self.procs.lock().unwrap().remove(&pid) else {
            return false;
        };
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(p.pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
        true
    }

    /// Kills everything (sandbox killed or paused).
    pub fn kill_all(&self) {
        let pids: Vec<u32> = self.procs.lock().unwrap().keys().copied().collect();
        for p in pids {
            self.kill(p);
        }
    }

    /// Marks `pid` finished.
    pub fn reap(&self, pid: u32) {
        self.procs.lock().unwrap().remove(&pid);
    }

    /// Running pids.
    pub fn running(&self) -> Vec<u32> {
        self.procs.lock().unwrap().keys().copied().collect()
    }
}

impl Drop for FakeBox {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Output of a process as it arrives.
#[derive(Debug)]
pub enum Out {
    Stdout(Bytes),
    Stderr(Bytes),
    /// Exit code (`-1` and the signal for a signal death).
    Exit(i32, Option<i32>),
}

/// Reads a child's stdout and stderr into a channel, splitting every read
/// into single bytes when `split_bytes` (chunk boundaries inside UTF-8
/// characters), then reports the exit.
pub fn pump(mut child: Child, split_bytes: bool) -> mpsc::Receiver<Out> {
    let (tx, rx) = mpsc::channel(256);
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t1 = tx.clone();
    let a = tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = out.read(&mut buf).await {
            if n == 0 {
                break;
            }
            for piece in pieces(&buf[..n], split_bytes) {
                let _ = t1.send(Out::Stdout(piece)).await;
            }
        }
    });
    let t2 = tx.clone();
    let b = tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            for piece in pieces(&buf[..n], split_bytes) {
                let _ = t2.send(Out::Stderr(piece)).await;
            }
        }
    });
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = a.await;
        let _ = b.await;
        use std::os::unix::process::ExitStatusExt;
        let (code, sig) = match status {
            Ok(s) => (s.code().unwrap_or(-1), s.signal()),
            Err(_) => (-1, None),
        };
        let _ = tx.send(Out::Exit(code, sig)).await;
    });
    rx
}

fn pieces(b: &[u8], split: bool) -> Vec<Bytes> {
    if split {
        b.iter().map(|x| Bytes::copy_from_slice(&[*x])).collect()
    } else {
        vec![Bytes::copy_from_slice(b)]
    }
}

/// One fault to inject on the next request whose path contains `path`.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Substring of the request path this applies to.
    pub path: String,
    /// Status to answer.
    pub status: u16,
    /// `Retry-After` seconds, if any.
    pub retry_after: Option<u64>,
    /// Service error code for the body.
    pub code: String,
    /// Message for the body.
    pub message: String,
}

/// Fault switches of one fake service.
#[derive(Default)]
pub struct Faults {
    /// Every request answers 401.
    pub unauthorized: AtomicBool,
    /// One-shot faults, in order.
    pub queue: Mutex<VecDeque<Fault>>,
    /// `(path substring, remaining)`: after `remaining` more matching
    /// requests, every further match answers 404.
    pub gone_after: Mutex<Option<(String, u32)>>,
    /// Delay before every answer, in ms.
    pub delay_ms: AtomicU64,
    /// Cut command streams after this many output events (0 = never).
    pub cut_stream_after: AtomicU64,
    /// Split command output into 1-byte chunks.
    pub split_bytes: AtomicBool,
}

impl Faults {
    /// Queues a one-shot fault.
    pub fn inject(
        &self,
        path: &str,
        status: u16,
        retry_after: Option<u64>,
        code: &str,
        message: &str,
    ) {
        self.queue.lock().unwrap().push_back(Fault {
            path: path.into(),
            status,
            retry_after,
            code: code.into(),
            message: message.into(),
        });
    }
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// Headers, lower-case names.
    pub headers: BTreeMap<String, String>,
    /// Status answered.
    pub status: u16,
}

/// Every request a fake served.
#[derive(Default)]
pub struct Recorder {
    /// Requests in order.
    pub seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    /// Requests whose path contains `s`.
    pub fn matching(&self, s: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.contains(s))
            .cloned()
            .collect()
    }

    /// Number of requests whose path contains `s`.
    pub fn count(&self, s: &str) -> usize {
        self.matching(s).len()
    }
}

/// Builds a service's error body from (status, code, message).
pub type ErrorBody = Arc<dyn Fn(u16, &str, &str) -> Value + Send + Sync>;

/// The sandboxes a fake service knows, by id: a mutex-guarded map
/// (reached through `Deref`) with the look-ups every fake offers.
pub struct Sandboxes<S>(Mutex<BTreeMap<String, S>>);

impl<S> Default for Sandboxes<S> {
    fn default() -> Self {
        Sandboxes(Mutex::new(BTreeMap::new()))
    }
}

impl<S> std::ops::Deref for Sandboxes<S> {
    type Target = Mutex<BTreeMap<String, S>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<S> Sandboxes<S> {
    /// Ids of all sandboxes, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }

    /// `f` of sandbox `id`, if there is one.
    pub fn with<T>(&self, id: &str, f: impl FnOnce(&S) -> T) -> Option<T> {
        self.0.lock().unwrap().get(id).map(f)
    }
}

/// Shared middleware state.
#[derive(Clone)]
pub struct Layer {
    /// Fault switches.
    pub faults: Arc<Faults>,
    /// Recorder.
    pub rec: Arc<Recorder>,
    /// The service's error body shape.
    pub body: ErrorBody,
}

impl Layer {
    /// Fresh fault switches and recorder, with the service's error body.
    pub fn new(body: impl Fn(u16, &str, &str) -> Value + Send + Sync + 'static) -> Self {
        Layer {
            faults: Arc::new(Faults::default()),
            rec: Arc::new(Recorder::default()),
            body: Arc::new(body),
        }
    }
}

/// Records the request and applies the fault switches.
pub async fn fault_layer(
    axum::extract::State(l): axum::extract::State<Layer>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    let mut seen = Seen {
        method: req.method().to_string(),
        path: path.clone(),
        query: req.uri().query().unwrap_or("").to_string(),
        headers: headers_map(req.headers()),
        status: 0,
    };
    let delay = l.faults.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let fault = if l.faults.unauthorized.load(Ordering::Relaxed) {
        Some(Fault {
            path: String::new(),
            status: 401,
            retry_after: None,
            code: "UNAUTHORIZED".into(),
            message: "Invalid API key".into(),
        })
    } else {
        let mut q = l.faults.queue.lock().unwrap();
        let pos = q.iter().position(|f| path.contains(&f.path));
        pos.and_then(|i| q.remove(i)).or_else(|| {
            let mut g = l.faults.gone_after.lock().unwrap();
            match g.as_mut() {
                Some((p, n)) if path.contains(p.as_str()) => {
                    if *n == 0 {
                        Some(Fault {
                            path: String::new(),
                            status: 404,
                            retry_after: None,
                            code: "NOT_FOUND".into(),
                            message: "sandbox not found".into(),
                        })
                    } else {
                        *n -= 1;
                        None
                    }
                }
                _ => None,
            }
        })
    };
    let resp = match fault {
        Some(f) => {
            let mut r = (
                StatusCode::from_u16(f.status).unwrap(),
                axum::Json((l.body)(f.status, &f.code, &f.message)),
            )
                .into_response();
            if let Some(s) = f.retry_after {
                r.headers_mut()
                    .insert("retry-after", s.to_string().parse().unwrap());
            }
            r
        }
        None => next.run(req).await,
    };
    seen.status = resp.status().as_u16();
    l.rec.seen.lock().unwrap().push(seen);
    resp
}

/// Lower-case header map.
pub fn headers_map(h: &HeaderMap) -> BTreeMap<String, String> {
    h.iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Serves a fake service's `router` on 127.0.0.1:0 behind `layer`'s
/// recorder and fault switches, with 404 for any other path; returns the
/// bound address.
pub async fn serve_faulty<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    state: S,
    layer: Layer,
) -> SocketAddr {
    let router = router
        .fallback(axum::routing::any(|| async { StatusCode::NOT_FOUND }))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(layer, fault_layer));
    serve(router).await
}

/// Serves `router` on 127.0.0.1:0; returns the bound address.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

/// A JSON error answer.
pub fn json_error(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

/// A streamed body from a channel of chunks; an `Err` cuts the connection.
pub fn channel_body(rx: mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Body {
    Body::from_stream(tokio_stream_from(rx))
}

fn tokio_stream_from(
    mut rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// `stat` of a host path as `(kind, size, mode, mtime)`.
pub fn host_stat(
    p: &std::path::Path,
) -> Option<(&'static str, u64, u32, chrono::DateTime<chrono::Utc>)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).ok()?;
    let kind = if m.file_type().is_symlink() {
        "symlink"
    } else if m.is_dir() {
        "dir"
    } else if m.is_file() {
        "file"
    } else {
        "other"
    };
    let mtime =
        chrono::DateTime::from_timestamp(m.mtime(), m.mtime_nsec() as u32).unwrap_or_default();
    Some((kind, m.len(), m.mode() & 0o7777, mtime))
}
