//! The OpenSandbox backend against the *real* lifecycle server
//! (`opensandbox-server` from PyPI) on the local Docker daemon, with a
//! stand-in execd (`docs/MINIMAL-SURFACE.md` §3.6): the real execd image cannot be
//! pulled here, so this test binary doubles as execd. Run as
//! `/opt/opensandbox/execd` (or with `WSBENCH_EXECD_STANDIN=1`) it serves
//! the execd subset of `opensandbox/execd-api.yaml` on 127.0.0.1:44772;
//! run by cargo it builds the "execd image" (the sandbox image plus this
//! binary as `/execd` and a three-line `/bootstrap.sh`), starts the server
//! with containers in host network mode (so every address is 127.0.0.1),
//! and drives create, list by metadata, endpoint lookup, exec, files,
//! pause, resume, renew, proxy and delete through [`OpenSandboxProvisioner`].
//!
//! Needs: a running Docker daemon, `opensandbox-server` on PATH
//! (`pip install opensandbox-server`), and the sandbox image present
//! locally (`WSBENCH_OPENSANDBOX_IMAGE`, default `debian:bookworm-slim`,
//! built by `tests/build-test-image.sh`; its glibc must match the host's,
//! since this binary is copied in as is). Without them it prints
//! `SKIPPED`; with `WSBENCH_OPENSANDBOX_SERVER=1` a missing prerequisite
//! fails instead. Uses a custom harness (`harness = false`).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wsbench::backend::cloud::exec_capture;
use wsbench::backend::opensandbox::{OpenSandboxOptions, OpenSandboxProvisioner};
use wsbench::backend::{BackendError, ProvisionSpec, Provisioner, Sandbox, SandboxState};

const KEY: &str = "wsbench-osb-key";

fn main() {
    let argv0 = std::env::args().next().unwrap_or_default();
    if argv0.ends_with("/execd") || std::env::var_os("WSBENCH_EXECD_STANDIN").is_some() {
        standin::run();
        return;
    }
    // `cargo test -- --list` and filters: one test, named here.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("real_server_lifecycle: test");
        return;
    }
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"real_server_lifecycle".contains(filter.as_str())
    {
        println!("0 passed, 0 failed");
        return;
    }
    let required = std::env::var("WSBENCH_OPENSANDBOX_SERVER").as_deref() == Ok("1");
    if let Err(why) = prerequisites() {
        if required {
            eprintln!("real_server_lifecycle: prerequisite missing: {why}");
            println!("0 passed, 1 failed");
            std::process::exit(1);
        }
        println!("SKIPPED: {why}");
        println!("0 passed, 0 failed, 1 skipped");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(real_server_lifecycle())
    }));
    match outcome {
        Ok(()) => {
            println!("test real_server_lifecycle ... ok");
            println!("1 passed, 0 failed");
        }
        Err(_) => {
            println!("test real_server_lifecycle ... FAILED");
            println!("0 passed, 1 failed");
            std::process::exit(1);
        }
    }
}

fn image() -> String {
    std::env::var("WSBENCH_OPENSANDBOX_IMAGE").unwrap_or_else(|_| "debian:bookworm-slim".into())
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn prerequisites() -> Result<(), String> {
    run(Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]))
        .map_err(|e| format!("no Docker daemon ({e})"))?;
    run(Command::new("opensandbox-server").arg("--help"))
        .map_err(|e| format!("opensandbox-server is not installed ({e})"))?;
    run(Command::new("docker").args(["image", "inspect", &image()]))
        .map_err(|_| format!("image {} is not present locally", image()))?;
    // Host network mode: execd's fixed port must be free.
    std::net::TcpListener::bind("127.0.0.1:44772")
        .map_err(|e| format!("127.0.0.1:44772 is in use ({e})"))?;
    Ok(())
}

/// Everything the test started, removed on drop (also after a panic).
struct Cleanup {
    server: Option<Child>,
    image_tag: String,
    dir: tempfile::TempDir,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        // Containers the server made for this run (its own label).
        if let Ok(ids) = run(Command::new("docker").args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=wsbench.test.run={}", std::process::id()),
        ])) {
            for id in ids.lines().filter(|l| !l.is_empty()) {
                let _ = run(Command::new("docker").args(["rm", "-f", id]));
            }
        }
        let _ = run(Command::new("docker").args(["rmi", "-f", &self.image_tag]));
        let log = self.dir.path().join("server.log");
        if std::thread::panicking()
            && let Ok(text) = std::fs::read_to_string(&log)
        {
            eprintln!("--- opensandbox-server log ---\n{text}");
        }
    }
}

/// Builds the "execd image": the sandbox image plus `/execd` (this very
/// binary) and `/bootstrap.sh`.
fn build_execd_image(dir: &std::path::Path, tag: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let boot = dir.join("bootstrap.sh");
    std::fs::write(
        &boot,
        "#!/bin/sh\n/opt/opensandbox/execd >/tmp/execd.log 2>&1 &\nexec \"$@\"\n",
    )
    .map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&boot, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let name = format!("wsbench-execd-build-{}", std::process::id());
    run(Command::new("docker").args(["create", "--name", &name, &image(), "true"]))?;
    let res = (|| {
        run(Command::new("docker")
            .arg("cp")
            .arg(&exe)
            .arg(format!("{name}:/execd")))?;
        run(Command::new("docker")
            .arg("cp")
            .arg(&boot)
            .arg(format!("{name}:/bootstrap.sh")))?;
        run(Command::new("docker").args(["commit", &name, tag]))
    })();
    let _ = run(Command::new("docker").args(["rm", "-f", &name]));
    res.map(|_| ())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_http(url: &str, limit: Duration) -> bool {
    let c = reqwest::Client::new();
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(r) = c.get(url).send().await
            && r.status().is_success()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    false
}

/// Waits until nothing listens on execd's fixed port (a deleted sandbox's
/// execd is gone), so the next sandbox can bind it.
async fn wait_port_free() {
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        if std::net::TcpListener::bind("127.0.0.1:44772").is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("127.0.0.1:44772 still in use after the sandbox was deleted");
}

async fn sh(sb: &dyn Sandbox, line: &str) -> (Option<i32>, String, String) {
    let (o, out, err) = exec_capture(
        sb,
        vec!["/bin/sh".into(), "-c".into(), line.into()],
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    (
        o.exit_code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

async fn real_server_lifecycle() {
    wsbench::backend::http::ensure_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("wsbench-test/opensandbox-execd:run{}", std::process::id());
    let mut cleanup = Cleanup {
        server: None,
        image_tag: tag.clone(),
        dir,
    };
    build_execd_image(cleanup.dir.path(), &tag).expect("building the execd image");
    let port = free_port();
    let config = format!(
        r#"[server]
host = "127.0.0.1"
port = {port}
api_key = "{KEY}"

[log]
level = "INFO"

[runtime]
type = "docker"
execd_image = "{tag}"

[store]
type = "sqlite"
path = "{db}"

[docker]
network_mode = "host"

[ingress]
mode = "direct"
"#,
        db = cleanup.dir.path().join("osb.db").display()
    );
    let cfg = cleanup.dir.path().join("config.toml");
    std::fs::write(&cfg, config).unwrap();
    let log = std::fs::File::create(cleanup.dir.path().join("server.log")).unwrap();
    cleanup.server = Some(
        Command::new("opensandbox-server")
            .arg("--config")
            .arg(&cfg)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting opensandbox-server"),
    );
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        wait_http(&format!("{base}/health"), Duration::from_secs(60)).await,
        "opensandbox-server did not come up"
    );

    let opts = |proxy: bool| OpenSandboxOptions {
        api_key: Some(KEY.into()),
        api_url: Some(format!("{base}/v1")),
        image: image(),
        timeout_secs: Some(600),
        use_server_proxy: proxy,
        ready_timeout_secs: 60,
        state_timeout_secs: 60,
        metadata: BTreeMap::from([(
            "wsbench.test.run".to_string(),
            std::process::id().to_string(),
        )]),
        ..Default::default()
    };

    // No key: the server's own 401 code comes through.
    let raw = reqwest::Client::new()
        .get(format!("{base}/v1/sandboxes"))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 401);

    for proxy in [false, true] {
        let ws_id = format!("ws-real-{}", if proxy { "proxy" } else { "direct" });
        let p = OpenSandboxProvisioner::new(opts(proxy)).unwrap();
        let spec = ProvisionSpec {
            workspace_id: ws_id.clone(),
            labels: BTreeMap::new(),
        };
        let sb = p
            .provision(&spec)
            .await
            .expect("create through the real server");
        let info = p.find(&ws_id).await.unwrap().expect("found by metadata");
        assert_eq!(info.state, SandboxState::Running);

        let (code, out, err) = sh(sb.as_ref(), "echo out; echo err >&2; exit 3").await;
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (Some(3), "out\n", "err\n")
        );
        let c18 = "sh -c 'sleep 0.2; echo one > one.txt' & echo two > two.txt && echo three > three.txt; wait; cat one.txt two.txt three.txt";
        let (code, out, _) = sh(sb.as_ref(), c18).await;
        assert_eq!((code, out.as_str()), (Some(0), "one\ntwo\nthree\n"));
        let mut req = wsbench::backend::ExecRequest::shell("sleep 30");
        req.timeout = Some(Duration::from_secs(1));
        let t0 = Instant::now();
        let o = sb.exec(req, None).await.unwrap();
        assert!(
            o.timed_out && t0.elapsed() < Duration::from_secs(10),
            "{o:?}"
        );
        // A child that left the process group dies too (marker sweep).
        let mut req = wsbench::backend::ExecRequest::shell("setsid sleep 301 & sleep 30");
        req.timeout = Some(Duration::from_secs(1));
        assert!(sb.exec(req, None).await.unwrap().timed_out);
        let (_, left, _) = sh(
            sb.as_ref(),
            "for p in /proc/[0-9]*; do tr '\\000' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 301' || true",
        )
        .await;
        assert_eq!(left.trim(), "0", "a detached child survived the timeout");

        sb.write("dir/f.txt", b"kept across pause").await.unwrap();
        let st = sb.stat("dir/f.txt").await.unwrap();
        assert_eq!(st.mode, Some(0o644));
        let names: Vec<String> = sb
            .list("dir")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["f.txt"]);

        p.suspend(&ws_id).await.expect("pause");
        assert_eq!(
            p.find(&ws_id).await.unwrap().unwrap().state,
            SandboxState::Suspended
        );
        let again = OpenSandboxProvisioner::new(opts(proxy)).unwrap();
        let sb2 = again.provision(&spec).await.expect("reattach resumes");
        assert_eq!(
            sb2.read("dir/f.txt", None).await.unwrap(),
            b"kept across pause"
        );
        again
            .keep_alive(&ws_id, Duration::from_secs(1200))
            .await
            .expect("renew-expiration");
        assert!(
            again
                .list()
                .await
                .unwrap()
                .iter()
                .any(|i| i.workspace_id == ws_id)
        );
        again.destroy(&ws_id).await.expect("delete");
        assert!(again.find(&ws_id).await.unwrap().is_none());
        let e = again.suspend(&ws_id).await.unwrap_err();
        assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
        wait_port_free().await;
    }
    drop(cleanup);
}

/// The stand-in execd: the subset of `opensandbox/execd-api.yaml` a
/// workspace uses, with execd's wire habits (`docs/MINIMAL-SURFACE.md` §3.3–3.4).
mod standin {
    use std::collections::{BTreeMap, HashMap};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::Stdio;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::extract::{Query, Request, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};
    use bytes::Bytes;
    use serde_json::{Value, json};
    use tokio::io::AsyncReadExt;
    use tokio::sync::mpsc;

    #[derive(Default)]
    struct St {
        running: Mutex<HashMap<String, i32>>,
        next: AtomicU64,
    }

    type S = State<Arc<St>>;

    pub fn run() {
        let port = std::env::var("EXECD_PORT").unwrap_or_else(|_| "44772".into());
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route("/ping", get(|| async { StatusCode::OK }))
                .route("/command", post(command).delete(interrupt))
                .route("/files/download", get(download))
                .route("/files/upload", post(upload))
                .route("/files/info", get(info))
                .route("/directories/list", get(list))
                .with_state(Arc::new(St::default()));
            let l = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}"))
                .await
                .unwrap();
            axum::serve(l, app).await.unwrap();
        });
    }

    fn err(status: u16, code: &str, msg: &str) -> Response {
        (
            StatusCode::from_u16(status).unwrap(),
            axum::Json(json!({"code": code, "message": msg})),
        )
            .into_response()
    }

    fn frame(v: Value) -> Result<Bytes, std::io::Error> {
        let mut s = v.to_string();
        s.push_str("\n\n");
        Ok(Bytes::from(s))
    }

    fn lines(buf: &mut Vec<u8>, data: &[u8]) -> Vec<String> {
        buf.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(i) = buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let t = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            out.push(if t.is_empty() { "\n".into() } else { t });
        }
        out
    }

    async fn command(State(s): S, body: Bytes) -> Response {
        let Ok(req) = serde_json::from_slice::<Value>(&body) else {
            return err(400, "INVALID_REQUEST_BODY", "not JSON");
        };
        let Some(cmd) = req.get("command").and_then(Value::as_str) else {
            return err(400, "INVALID_REQUEST_BODY", "command is required");
        };
        let mut c = tokio::process::Command::new("/bin/sh");
        c.arg("-c").arg(cmd);
        if let Some(cwd) = req.get("cwd").and_then(Value::as_str) {
            c.current_dir(cwd);
        }
        if let Some(env) = req.get("envs").and_then(Value::as_object) {
            for (k, v) in env {
                c.env(k, v.as_str().unwrap_or(""));
            }
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.process_group(0);
        let mut child = match c.spawn() {
            Ok(ch) => ch,
            Err(e) => return err(500, "RUNTIME_ERROR", &e.to_string()),
        };
        let pid = child.id().unwrap_or(0) as i32;
        let id = format!("cmd{}", s.next.fetch_add(1, Ordering::Relaxed));
        s.running.lock().unwrap().insert(id.clone(), pid);
        let timeout = req.get("timeout").and_then(Value::as_u64);
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
        let mut out = child.stdout.take().unwrap();
        let mut errp = child.stderr.take().unwrap();
        let st = s.clone();
        tokio::spawn(async move {
            let _ = tx.send(frame(json!({"type": "init", "text": id}))).await;
            let (t1, t2) = (tx.clone(), tx.clone());
            let a = tokio::spawn(async move {
                let (mut buf, mut b) = (Vec::new(), vec![0u8; 8192]);
                while let Ok(n) = out.read(&mut b).await {
                    if n == 0 {
                        break;
                    }
                    for l in lines(&mut buf, &b[..n]) {
                        let _ = t1.send(frame(json!({"type": "stdout", "text": l}))).await;
                    }
                }
                if !buf.is_empty() {
                    let l = String::from_utf8_lossy(&buf).into_owned();
                    let _ = t1.send(frame(json!({"type": "stdout", "text": l}))).await;
                }
            });
            let b = tokio::spawn(async move {
                let (mut buf, mut b) = (Vec::new(), vec![0u8; 8192]);
                while let Ok(n) = errp.read(&mut b).await {
                    if n == 0 {
                        break;
                    }
                    for l in lines(&mut buf, &b[..n]) {
                        let _ = t2.send(frame(json!({"type": "stderr", "text": l}))).await;
                    }
                }
                if !buf.is_empty() {
                    let l = String::from_utf8_lossy(&buf).into_owned();
                    let _ = t2.send(frame(json!({"type": "stderr", "text": l}))).await;
                }
            });
            let status = match timeout {
                Some(ms) => {
                    match tokio::time::timeout(std::time::Duration::from_millis(ms), child.wait())
                        .await
                    {
                        Ok(s) => s.ok(),
                        Err(_) => {
                            let _ = nix::sys::signal::killpg(
                                nix::unistd::Pid::from_raw(pid),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                            child.wait().await.ok()
                        }
                    }
                }
                None => child.wait().await.ok(),
            };
            let _ = a.await;
            let _ = b.await;
            st.running.lock().unwrap().remove(&id);
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)))
                .unwrap_or(-1);
            let ev = if code == 0 {
                json!({"type": "execution_complete", "execution_time": 1})
            } else {
                json!({"type": "error", "error": {"ename": "CommandExecError", "evalue": code.to_string(), "traceback": []}})
            };
            let _ = tx.send(frame(ev)).await;
        });
        Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(futures::stream::unfold(
                rx,
                |mut rx| async { rx.recv().await.map(|x| (x, rx)) },
            )))
            .unwrap()
    }

    async fn interrupt(State(s): S, Query(q): Query<HashMap<String, String>>) -> Response {
        if let Some(pid) = q
            .get("id")
            .and_then(|id| s.running.lock().unwrap().remove(id))
        {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        StatusCode::OK.into_response()
    }

    async fn download(h: HeaderMap, Query(q): Query<HashMap<String, String>>) -> Response {
        let path = q.get("path").cloned().unwrap_or_default();
        match std::fs::read(&path) {
            Ok(data) => {
                if let Some((a, z)) = h
                    .get("range")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|r| r.strip_prefix("bytes="))
                    .and_then(|r| r.split_once('-'))
                {
                    let a: usize = a.parse().unwrap_or(0);
                    let z: usize = z
                        .parse::<usize>()
                        .unwrap_or(usize::MAX)
                        .min(data.len().saturating_sub(1));
                    if a >= data.len() {
                        return StatusCode::RANGE_NOT_SATISFIABLE.into_response();
                    }
                    return (StatusCode::PARTIAL_CONTENT, data[a..=z].to_vec()).into_response();
                }
                data.into_response()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                err(404, "FILE_NOT_FOUND", &format!("file not found: {path}"))
            }
            Err(e) => err(500, "RUNTIME_ERROR", &e.to_string()),
        }
    }

    async fn upload(req: Request) -> Response {
        use axum::extract::FromRequest;
        let mut mp = match axum::extract::Multipart::from_request(req, &()).await {
            Ok(m) => m,
            Err(e) => return err(400, "INVALID_REQUEST", &e.to_string()),
        };
        let mut meta: Option<Value> = None;
        while let Ok(Some(f)) = mp.next_field().await {
            if f.file_name().is_none() {
                continue;
            }
            let name = f.name().unwrap_or("").to_string();
            let data = f.bytes().await.unwrap_or_default();
            if name == "metadata" {
                meta = serde_json::from_slice(&data).ok();
            } else if name == "file" {
                let Some(m) = meta.take() else {
                    return err(400, "INVALID_REQUEST", "metadata file is missing");
                };
                let path = m
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if let Some(d) = std::path::Path::new(&path).parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                if let Err(e) = std::fs::write(&path, &data) {
                    return err(500, "RUNTIME_ERROR", &e.to_string());
                }
                if let Some(mode) = m.get("mode").and_then(Value::as_i64) {
                    match u32::from_str_radix(&mode.to_string(), 8) {
                        Ok(bits) => {
                            let _ = std::fs::set_permissions(
                                &path,
                                std::fs::Permissions::from_mode(bits),
                            );
                        }
                        Err(_) => return err(500, "RUNTIME_ERROR", "invalid mode"),
                    }
                }
            }
        }
        StatusCode::OK.into_response()
    }

    fn file_info(path: &std::path::Path) -> Option<Value> {
        let m = std::fs::symlink_metadata(path).ok()?;
        let kind = if m.file_type().is_symlink() {
            "symlink"
        } else if m.is_dir() {
            "directory"
        } else {
            "file"
        };
        let t = chrono::DateTime::from_timestamp(m.mtime(), m.mtime_nsec() as u32)?.to_rfc3339();
        Some(json!({
            "path": path.to_string_lossy(), "type": kind, "size": m.len(),
            "modified_at": t, "created_at": t, "owner": "root", "group": "root",
            "mode": format!("{:o}", m.mode() & 0o7777).parse::<u64>().ok()?,
        }))
    }

    async fn info(Query(q): Query<Vec<(String, String)>>) -> Response {
        let mut out = BTreeMap::new();
        for (_, p) in q.iter().filter(|(k, _)| k == "path") {
            match file_info(std::path::Path::new(p)) {
                Some(v) => {
                    out.insert(p.clone(), v);
                }
                None => return err(404, "FILE_NOT_FOUND", &format!("file not found: {p}")),
            }
        }
        axum::Json(out).into_response()
    }

    async fn list(Query(q): Query<HashMap<String, String>>) -> Response {
        let path = q.get("path").cloned().unwrap_or_default();
        let Ok(rd) = std::fs::read_dir(&path) else {
            return err(
                404,
                "FILE_NOT_FOUND",
                &format!("directory not found: {path}"),
            );
        };
        let mut items: Vec<Value> = rd.flatten().filter_map(|e| file_info(&e.path())).collect();
        items.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        axum::Json(items).into_response()
    }
}
