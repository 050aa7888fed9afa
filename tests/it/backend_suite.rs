//! One suite, seven backends: every test below runs on local, bubblewrap,
//! Docker (bind-mounted workspace, network `none`), on E2B, Daytona and
//! OpenSandbox against their fake services on 127.0.0.1
//! (`tests/it/support/fake_*.rs`, commands run in bubblewrap boxes), and on
//! Kubernetes against the project's stub API server
//! (`tests/it/support/k8s_stub.rs`: a Pod + PVC provisioned by
//! `KubernetesProvisioner`, commands over the exec websocket, each run in
//! a bubblewrap box with the PVC's directory at `/workspace`), through
//! the same engine calls, and must give the same results. Where a
//! backend's [`Capabilities`](wsbench::backend::Capabilities) flag is off
//! (stdin, long-lived processes, append, byte-exact output on the cloud
//! ones), the test checks the flag and asserts the documented
//! `Unsupported` error instead. Backend-only behaviour (C11 on bubblewrap;
//! C12, storage modes, reattach, pulls on Docker) follows in the
//! `bwrap_only` and `docker_only` modules; the Kubernetes-only cases
//! (switches of the stub, reattach, suspend) live in `tests/k8s_backend.rs`.
//!
//! Sandboxed, cloud and Kubernetes tests print `SKIPPED: <why>` when a
//! part is missing on this machine and fail under `CI=true` (`.ci/run`
//! installs bubblewrap, docker.io and node, starts dockerd and builds the
//! images with `tests/build-test-image.sh`).
//!
//! **MCP.** `mcp_server_everything` runs `@modelcontextprotocol/
//! server-everything` inside the sandbox through [`Sandbox::spawn`]:
//! bubblewrap, Docker and the k8s stub's pods bind the host's `node` and
//! the npm dir (`WSBENCH_MCP_NODE_BIN`, see [`everything`]) read-only at
//! the same paths (`ro_binds`, `Stub::set_ro_binds`); the E2B fake gets a
//! copy in the workspace. The stub's pods share the host's pid namespace
//! (a second exec must see the first one's processes, as in one Pod), so
//! there the server's isolation is checked by its mount namespace.

mod pty;

use crate::support;
use crate::support::fake_daytona;
use crate::support::fake_e2b;
use crate::support::fake_opensandbox;
use crate::support::fake_sandbox;
use crate::support::images;
use crate::support::k8s_stub;
use pty::{line_shell_contract, pty_contract};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use support::skip_or_fail;
use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapProvisioner};
use wsbench::backend::daytona::{DaytonaOptions, DaytonaProvisioner};
use wsbench::backend::docker::{DockerOptions, DockerProvisioner, PullPolicy};
use wsbench::backend::e2b::{E2bOptions, E2bProvisioner};
use wsbench::backend::kubernetes::{KubernetesOptions, KubernetesProvisioner};
use wsbench::backend::local::LocalSandbox;
use wsbench::backend::opensandbox::{OpenSandboxOptions, OpenSandboxProvisioner};
use wsbench::backend::{
    BackendError, BackendKind, ByteRange, ExecRequest, FileKind, ProvisionSpec, Provisioner,
    Sandbox, SpawnRequest, StreamKind, labels,
};
use wsbench::engine::mcp::{McpDecl, McpToolCall};
use wsbench::engine::message::{Msg, ToolOutput, ToolResultBlock};
use wsbench::engine::tools::{ToolResult, ToolState};
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

/// Profile name the Docker tests scope their containers with.
const TEST_PROFILE: &str = "suite";

/// One workspace on one backend.
pub struct Env {
    kind: BackendKind,
    ws: Arc<Workspace>,
    sb: Arc<dyn Sandbox>,
    /// Host directory holding the workdir (all three backends have one).
    host: PathBuf,
    _base: tempfile::TempDir,
    _cleanup: Option<DockerCleanup>,
    /// The fake cloud service a cloud backend talks to, kept alive with
    /// the workspace.
    _fake: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// Removes a test container (and its volume) when the test ends, pass or
/// fail.
pub struct DockerCleanup {
    opts: DockerOptions,
    id: String,
}

impl Drop for DockerCleanup {
    fn drop(&mut self) {
        let (opts, id) = (self.opts.clone(), self.id.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let p = DockerProvisioner::new(opts).with_profile(TEST_PROFILE);
                if let Err(e) = p.destroy(&id).await {
                    eprintln!("cleanup of {id} failed: {e}");
                }
            });
        })
        .join();
    }
}

fn spec(id: &str) -> ProvisionSpec {
    ProvisionSpec {
        workspace_id: id.to_string(),
        labels: BTreeMap::from([
            (labels::USER.to_string(), "tester".to_string()),
            (labels::AGENT.to_string(), "agent-1".to_string()),
        ]),
    }
}

fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Docker options the tests use: the local image only (never a pull, no
/// traffic leaves the machine), network `none`, host dirs under `base`.
fn docker_opts(base: &Path) -> DockerOptions {
    DockerOptions {
        image: images::DEBIAN_IMAGE.into(),
        pull: PullPolicy::Never,
        network: "none".into(),
        base_dir: Some(base.to_path_buf()),
        ..Default::default()
    }
}

async fn open_ws(sb: Arc<dyn Sandbox>) -> Arc<Workspace> {
    Workspace::open(sb, WorkspaceConfig::default(), EventBus::default())
        .await
        .expect("workspace opens")
}

impl Env {
    async fn local() -> Option<Env> {
        let base = tempfile::tempdir().unwrap();
        let sb: Arc<dyn Sandbox> = Arc::new(LocalSandbox::open(base.path().join("ws")).unwrap());
        let host = sb.host_root().unwrap().to_path_buf();
        Some(Env {
            kind: BackendKind::Local,
            ws: open_ws(sb.clone()).await,
            sb,
            host,
            _base: base,
            _cleanup: None,
            _fake: None,
        })
    }

    async fn bwrap() -> Option<Env> {
        if let Err(why) = images::bwrap_ready().await {
            skip_or_fail(&why);
            return None;
        }
        let base = tempfile::tempdir().unwrap();
        let prov = BubblewrapProvisioner::new(BubblewrapOptions {
            base_dir: Some(base.path().to_path_buf()),
            ro_binds: mcp_ro_binds(),
            ..Default::default()
        });
        let sb = prov.create(&spec(&new_id("bw"))).await.unwrap();
        let host = sb.host_root().unwrap().to_path_buf();
        Some(Env {
            kind: BackendKind::Bubblewrap,
            ws: open_ws(sb.clone()).await,
            sb,
            host,
            _base: base,
            _cleanup: None,
            _fake: None,
        })
    }

    async fn docker() -> Option<Env> {
        if let Err(why) = images::docker_ready(images::DEBIAN_IMAGE).await {
            skip_or_fail(&why);
            return None;
        }
        let base = tempfile::tempdir().unwrap();
        let opts = DockerOptions {
            ro_binds: docker_mcp_ro_binds(),
            ..docker_opts(base.path())
        };
        let id = new_id("dk");
        let cleanup = DockerCleanup {
            opts: opts.clone(),
            id: id.clone(),
        };
        let prov = DockerProvisioner::new(opts).with_profile(TEST_PROFILE);
        let sb = prov.create(&spec(&id)).await.unwrap();
        let host = sb.host_root().unwrap().to_path_buf();
        Some(Env {
            kind: BackendKind::Docker,
            ws: open_ws(sb.clone()).await,
            sb,
            host,
            _base: base,
            _cleanup: Some(cleanup),
            _fake: None,
        })
    }

    /// A workspace on a cloud backend against its fake service on
    /// 127.0.0.1; `host` is the fake box's host directory of the workdir.
    async fn cloud(
        kind: BackendKind,
        fake: Box<dyn std::any::Any + Send + Sync>,
        prov: Box<dyn Provisioner>,
        boxed: impl Fn(&(dyn std::any::Any + Send + Sync)) -> Arc<fake_sandbox::FakeBox>,
    ) -> Option<Env> {
        let sb = prov.create(&spec(&new_id(kind.as_str()))).await.unwrap();
        let fbox = boxed(fake.as_ref());
        let host = fbox
            .host(sb.workdir())
            .unwrap_or_else(|| panic!("{kind}: workdir {} not in the fake box", sb.workdir()));
        std::fs::create_dir_all(&host).unwrap();
        Some(Env {
            kind,
            ws: open_ws(sb.clone()).await,
            sb,
            host,
            _base: tempfile::tempdir().unwrap(),
            _cleanup: None,
            _fake: Some(fake),
        })
    }

    async fn e2b() -> Option<Env> {
        if !cloud_ready() {
            return None;
        }
        let f = fake_e2b::FakeE2b::start().await;
        let p = E2bProvisioner::new(E2bOptions {
            api_key: Some(fake_e2b::KEY.into()),
            api_url: Some(f.url()),
            envd_url: Some(f.url()),
            request_timeout_secs: 30,
            ..Default::default()
        })
        .unwrap();
        Env::cloud(BackendKind::E2b, Box::new(f), Box::new(p), |f| {
            let f = f.downcast_ref::<fake_e2b::FakeE2b>().unwrap();
            f.boxed(&f.ids()[0])
        })
        .await
    }

    async fn daytona() -> Option<Env> {
        if !cloud_ready() {
            return None;
        }
        let f = fake_daytona::FakeDaytona::start().await;
        let p = DaytonaProvisioner::new(DaytonaOptions {
            api_key: Some(fake_daytona::KEY.into()),
            api_url: Some(f.api_url()),
            request_timeout_secs: 30,
            state_timeout_secs: 20,
            ..Default::default()
        })
        .unwrap();
        Env::cloud(BackendKind::Daytona, Box::new(f), Box::new(p), |f| {
            let f = f.downcast_ref::<fake_daytona::FakeDaytona>().unwrap();
            f.boxed(&f.ids()[0])
        })
        .await
    }

    async fn opensandbox() -> Option<Env> {
        if !cloud_ready() {
            return None;
        }
        let f = fake_opensandbox::FakeOpenSandbox::start().await;
        let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
            api_key: Some(fake_opensandbox::KEY.into()),
            api_url: Some(f.api_url()),
            request_timeout_secs: 30,
            ..Default::default()
        })
        .unwrap();
        Env::cloud(BackendKind::Opensandbox, Box::new(f), Box::new(p), |f| {
            let f = f
                .downcast_ref::<fake_opensandbox::FakeOpenSandbox>()
                .unwrap();
            f.boxed(&f.ids()[0])
        })
        .await
    }

    /// A workspace Pod on the project's stub API server
    /// (`tests/it/support/k8s_stub.rs`), provisioned through
    /// [`KubernetesProvisioner`] like on a cluster; `host` is the stub's
    /// directory of the PVC, which the pod sees at `/workspace`.
    async fn kubernetes() -> Option<Env> {
        if !support::have("bwrap") {
            skip_or_fail("bwrap is not installed (the k8s stub's pods run commands with it)");
            return None;
        }
        let stub = k8s_stub::Stub::start().await;
        stub.set_ro_binds(mcp_ro_binds());
        let base = tempfile::tempdir().unwrap();
        let ns = "wsbench-suite";
        let prov = KubernetesProvisioner::new(KubernetesOptions {
            kubeconfig: Some(stub.kubeconfig(base.path(), ns)),
            namespace: ns.into(),
            image: "stub/image:1".into(),
            ready_timeout_secs: 30,
            delete_timeout_secs: 10,
            ..Default::default()
        })
        .unwrap()
        .with_profile(TEST_PROFILE);
        let id = new_id("k8s");
        let sb = prov.create(&spec(&id)).await.unwrap();
        let host = stub.pvc_dir(ns, &prov.object_name(&id));
        assert!(host.is_dir(), "no PVC dir {}", host.display());
        Some(Env {
            kind: BackendKind::Kubernetes,
            ws: open_ws(sb.clone()).await,
            sb,
            host,
            _base: base,
            _cleanup: None,
            _fake: Some(Box::new(stub)),
        })
    }

    /// Backend path of `rel` under the workdir.
    fn p(&self, rel: &str) -> String {
        format!("{}/{rel}", self.sb.workdir())
    }

    /// Writes a file through the host directory.
    fn put(&self, rel: &str, data: &str) {
        let p = self.host.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }

    fn link(&self, rel: &str, target: &str) {
        let p = self.host.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    /// Replaces the workdir prefix in tool output with `<wd>`, so results
    /// compare across backends.
    fn norm(&self, text: &str) -> String {
        text.replace(self.sb.workdir(), "<wd>")
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResult {
        let call = ToolCall {
            tool: tool.into(),
            session: "s".into(),
            args,
            ..Default::default()
        };
        tokio::time::timeout(Duration::from_secs(60), self.ws.call_tool(call))
            .await
            .unwrap_or_else(|_| panic!("{}: {tool} call did not finish in 60 s", self.kind))
    }

    fn ok(&self, r: &ToolResult) -> String {
        assert_eq!(
            r.state,
            ToolState::Success,
            "{}: expected success, got: {}",
            self.kind,
            r.text()
        );
        r.text()
    }

    fn err(&self, r: &ToolResult) -> String {
        assert_eq!(
            r.state,
            ToolState::Error,
            "{}: expected an error, got: {}",
            self.kind,
            r.text()
        );
        r.text()
    }

    /// Command lines of processes inside the sandbox whose command line
    /// holds `token`.
    async fn processes_with(&self, token: &str) -> Vec<String> {
        match self.kind {
            BackendKind::Docker => {
                // The token is passed in two halves so this scan never
                // matches itself.
                let (a, b) = token.split_at(token.len() / 2);
                let script = r#"t="$1$2"; for d in /proc/[0-9]*; do c=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null); case "$c" in *"$t"*) echo "$c";; esac; done"#;
                let (code, out, _) = exec_collect(
                    self.sb.as_ref(),
                    ExecRequest::new(["/bin/sh", "-c", script, "scan", a, b]),
                )
                .await;
                assert_eq!(code, Some(0));
                out.lines().map(str::to_string).collect()
            }
            _ => host_processes_with(token),
        }
    }
}

/// `node` and `@modelcontextprotocol/server-everything` on the host: the
/// node binary, the `node_modules` dir holding the server, and the
/// server's entry script (under that dir). The npm dir comes from
/// `WSBENCH_MCP_NODE_BIN` (`.ci/run` sets it to `node_modules/.bin`),
/// else `$HOME/.cache/wsbench-ci/npm/node_modules/.bin`.
struct Everything {
    node: PathBuf,
    modules: PathBuf,
    script: PathBuf,
}

fn everything() -> Result<Everything, String> {
    let bin = std::env::var_os("WSBENCH_MCP_NODE_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/wsbench-ci/npm/node_modules/.bin"))
        })
        .ok_or("no WSBENCH_MCP_NODE_BIN and no HOME")?;
    let missing = || {
        format!(
            "mcp-server-everything not found in {} (npm install \
             @modelcontextprotocol/server-everything; set WSBENCH_MCP_NODE_BIN)",
            bin.display()
        )
    };
    let script = std::fs::canonicalize(bin.join("mcp-server-everything")).map_err(|_| missing())?;
    let modules = std::fs::canonicalize(bin.join("..")).map_err(|_| missing())?;
    if !script.starts_with(&modules) {
        return Err(format!(
            "{} is outside {}",
            script.display(),
            modules.display()
        ));
    }
    let node = std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("node"))
                .find(|p| p.is_file())
        })
        .ok_or("node is not on PATH (apt-get install nodejs)")?;
    Ok(Everything {
        node,
        modules,
        script,
    })
}

/// Host paths bubblewrap and Docker bind read-only so the MCP test's
/// server runs inside the sandbox (none when the server is missing).
fn mcp_ro_binds() -> Vec<PathBuf> {
    everything()
        .map(|e| vec![e.node, e.modules])
        .unwrap_or_default()
}

/// [`mcp_ro_binds`] plus the shared libraries `node` loads (Debian's
/// `nodejs` links `libnode`, `libuv`, ... that the minbase image lacks).
/// Host and image are both bookworm, so binding the host's copies over the
/// image's same files changes nothing else.
fn docker_mcp_ro_binds() -> Vec<PathBuf> {
    let mut binds = mcp_ro_binds();
    let Some(node) = binds.first().cloned() else {
        return binds;
    };
    let Ok(out) = std::process::Command::new("ldd").arg(&node).output() else {
        return binds;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)`
        if let Some(path) = line
            .split("=>")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .filter(|p| p.starts_with('/'))
        {
            binds.push(PathBuf::from(path));
        }
    }
    binds
}

/// The error of a call that must fail (the `Ok` types here have no
/// `Debug`, so `expect_err` is not available).
fn must_fail<T, E>(r: Result<T, E>, what: &str) -> E {
    match r {
        Ok(_) => panic!("{what} succeeded where it must fail"),
        Err(e) => e,
    }
}

/// The fake cloud services run commands in bubblewrap boxes on this host.
fn cloud_ready() -> bool {
    if fake_sandbox::bwrap_available() {
        return true;
    }
    skip_or_fail("bubblewrap (bwrap) is required for the fake cloud sandboxes");
    false
}

fn host_processes_with(token: &str) -> Vec<String> {
    host_pids_with(token).into_iter().map(|(_, c)| c).collect()
}

/// `(pid, command line)` of live host processes whose command line holds
/// `token`.
fn host_pids_with(token: &str) -> Vec<(u32, String)> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(token) {
            out.push((name.parse().unwrap(), cmd));
        }
    }
    out
}

async fn exec_collect(sb: &dyn Sandbox, req: ExecRequest) -> (Option<i32>, String, String) {
    let (tx, mut rx) = mpsc::channel::<wsbench::backend::OutputChunk>(64);
    let collect = tokio::spawn(async move {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => o.extend_from_slice(&c.data),
                StreamKind::Stderr => e.extend_from_slice(&c.data),
            }
        }
        (o, e)
    });
    let out = sb.exec(req, Some(tx)).await.expect("exec runs");
    let (o, e) = collect.await.unwrap();
    (
        out.exit_code,
        String::from_utf8_lossy(&o).into_owned(),
        String::from_utf8_lossy(&e).into_owned(),
    )
}

// ------------------------------------------------------------------ tests

async fn bash_output_and_exit_codes(e: &Env) {
    let r = e.call("Bash", json!({"command": "echo hi"})).await;
    assert_eq!(e.ok(&r), "hi\n");
    let r = e
        .call("Bash", json!({"command": "echo out; echo err >&2; exit 7"}))
        .await;
    assert_eq!(r.exit_code, Some(7), "{}", e.kind);
    let t = e.err(&r);
    assert!(
        t.contains("Stdout:\nout\n") && t.contains("Stderr:\nerr\n"),
        "{}: {t}",
        e.kind
    );
    let r = e.call("Bash", json!({"command": "pwd"})).await;
    assert_eq!(e.norm(e.ok(&r).trim()), "<wd>", "{}", e.kind);
    let r = e
        .call("Bash", json!({"command": "definitely_missing_cmd --flag"}))
        .await;
    assert_eq!(r.exit_code, Some(127), "{}: {}", e.kind, r.text());
    assert!(r.text().contains("not found"), "{}: {}", e.kind, r.text());
}

/// C18: the whole line goes to a real shell, unchanged.
async fn c18_shell_line_is_passed_intact(e: &Env) {
    let cmd = "sh -c 'sleep 0.2; echo one > one.txt' & echo two > two.txt && echo three > three.txt; wait; cat one.txt two.txt three.txt";
    let r = e.call("Bash", json!({"command": cmd})).await;
    assert_eq!(e.ok(&r), "one\ntwo\nthree\n", "{}", e.kind);
    assert_eq!(r.exit_code, Some(0));
}

/// A background job that keeps running does not hold the call (Docker
/// keeps an exec's stream open while a child holds it; bubblewrap's PID
/// namespace ends with the command).
async fn background_job_does_not_hold_the_call(e: &Env) {
    // The job outlives the call by far (30 s); the call must return long
    // before it, whatever the machine's load (a margin, not a timing).
    let t0 = Instant::now();
    let r = e
        .call("Bash", json!({"command": "sleep 30 & echo hi"}))
        .await;
    assert_eq!(e.ok(&r), "hi\n", "{}", e.kind);
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "{}: the call waited for the background job: {:?}",
        e.kind,
        t0.elapsed()
    );
}

/// A Bash timeout kills the command and everything it started (a job in
/// the background, a `setsid` escapee) inside the sandbox.
async fn bash_timeout_leaves_no_process(e: &Env) {
    let token = format!(
        "{}",
        40_000 + (uuid::Uuid::new_v4().as_u128() % 9_000) as u32
    );
    let cmd = format!("setsid sleep {token}1 & sleep {token}2 & sh -c 'sleep {token}3'; wait");
    let t0 = Instant::now();
    let r = e
        .call("Bash", json!({"command": cmd, "timeout": 1500}))
        .await;
    assert!(r.timed_out, "{}: {}", e.kind, r.text());
    assert!(
        r.text().starts_with("Command timed out after 1500ms"),
        "{}: {}",
        e.kind,
        r.text()
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "{}: {:?}",
        e.kind,
        t0.elapsed()
    );
    let mut left = Vec::new();
    for _ in 0..20 {
        left = e.processes_with(&token).await;
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        left.is_empty(),
        "{}: processes left behind: {left:?}",
        e.kind
    );
}

/// Write, Read, Edit through the engine; the host directory sees the same
/// bytes.
async fn read_write_edit(e: &Env) {
    let f = e.p("notes/a.txt");
    let r = e
        .call("Write", json!({"file_path": f, "content": "alpha\nbeta\n"}))
        .await;
    e.ok(&r);
    assert_eq!(
        std::fs::read_to_string(e.host.join("notes/a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    let r = e.call("Read", json!({"file_path": f})).await;
    assert_eq!(e.ok(&r), "     1\talpha\n     2\tbeta", "{}", e.kind);
    let r = e
        .call(
            "Edit",
            json!({"file_path": f, "old_string": "beta", "new_string": "gamma"}),
        )
        .await;
    e.ok(&r);
    assert_eq!(
        std::fs::read_to_string(e.host.join("notes/a.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    // A file a command wrote is read back the same way.
    let r = e
        .call("Bash", json!({"command": "printf 'x\\ny\\n' > made.txt"}))
        .await;
    e.ok(&r);
    let r = e.call("Read", json!({"file_path": e.p("made.txt")})).await;
    assert_eq!(e.ok(&r), "     1\tx\n     2\ty", "{}", e.kind);
    let r = e
        .call("Read", json!({"file_path": e.p("missing.txt")}))
        .await;
    e.err(&r);
}

/// Glob and Grep give the same answers on every backend.
async fn glob_and_grep(e: &Env) {
    e.put("proj/src/main.rs", "fn main() {}\n");
    e.put("proj/src/lib.rs", "pub fn helper() {}\n");
    e.put("proj/README.md", "# proj\nfn in docs\n");
    e.put("proj/.gitignore", "target/\n");
    e.put("proj/target/debug.rs", "fn ignored() {}\n");
    let r = e
        .call("Glob", json!({"pattern": "**/*.rs", "path": e.p("proj")}))
        .await;
    let mut got: Vec<String> = e.ok(&r).lines().map(|l| e.norm(l)).collect();
    got.sort();
    assert_eq!(
        got,
        ["<wd>/proj/src/lib.rs", "<wd>/proj/src/main.rs"],
        "{}",
        e.kind
    );
    let r = e
        .call(
            "Grep",
            json!({"pattern": "fn \\w+\\(", "path": e.p("proj"), "output_mode": "content"}),
        )
        .await;
    let mut got: Vec<String> = e.ok(&r).lines().map(|l| e.norm(l)).collect();
    got.sort();
    assert_eq!(
        got,
        [
            "<wd>/proj/src/lib.rs:1:pub fn helper() {}",
            "<wd>/proj/src/main.rs:1:fn main() {}"
        ],
        "{}",
        e.kind
    );
}

/// C28: symlink loops give finite, identical results.
async fn c28_symlink_loops_are_finite(e: &Env) {
    e.put("c28/src/a.rs", "fn main() {}\n");
    e.link("c28/src/loop", "..");
    e.link("c28/src/self", ".");
    std::fs::create_dir_all(e.host.join("c28/deep/x")).unwrap();
    e.link("c28/deep/x/back", "../../");
    e.link("c28/link_to_a.rs", "src/a.rs");
    e.link("c28/dangling", "nowhere");
    let guard = Duration::from_secs(30);
    let r = tokio::time::timeout(
        guard,
        e.call("Glob", json!({"pattern": "**/*.rs", "path": e.p("c28")})),
    )
    .await
    .expect("Glob finishes");
    assert_eq!(e.norm(&e.ok(&r)), "<wd>/c28/src/a.rs", "{}", e.kind);
    let r = tokio::time::timeout(
        guard,
        e.call("Grep", json!({"pattern": "fn", "path": e.p("c28")})),
    )
    .await
    .expect("Grep finishes");
    assert_eq!(e.norm(&e.ok(&r)), "<wd>/c28/src/a.rs", "{}", e.kind);
    // The file link reads through (it stays inside the workspace).
    let r = e
        .call("Read", json!({"file_path": e.p("c28/link_to_a.rs")}))
        .await;
    assert_eq!(e.ok(&r), "     1\tfn main() {}", "{}", e.kind);
}

/// A symlink inside the workspace pointing outside cannot be read or
/// written through the file tools (the local backend has no isolation by
/// design and is not checked).
async fn symlink_escape_is_refused(e: &Env) {
    if e.kind == BackendKind::Local {
        return;
    }
    // Not under /tmp (nor a target dir that may live there, as in a CI
    // clone under /tmp): bubblewrap's /tmp is a private mount, so a link to
    // a host /tmp path names a file in that mount instead.
    let home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/root".into());
    let secrets = home.join(".cache/wsbench-test-secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    let outside = tempfile::tempdir_in(&secrets).unwrap();
    assert!(
        !outside.path().starts_with("/tmp"),
        "{}",
        outside.path().display()
    );
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET\n").unwrap();
    e.link("esc/abs", secret.to_str().unwrap());
    e.link("esc/etc", "/etc/passwd");
    // `..` far enough to reach / from the workspace's host dir, then the
    // secret's host path.
    let depth = e.host.join("esc").components().count();
    let rel = format!(
        "{}{}",
        "../".repeat(depth),
        secret.to_str().unwrap().trim_start_matches('/')
    );
    e.link("esc/rel", &rel);
    e.link("esc/dir", outside.path().to_str().unwrap());
    for name in ["abs", "etc", "rel", "dir/secret.txt"] {
        let p = e.p(&format!("esc/{name}"));
        let r = e.call("Read", json!({"file_path": p})).await;
        let t = r.text();
        assert!(
            !t.contains("TOP-SECRET") && !t.contains("root:"),
            "{}: read {name}: {t}",
            e.kind
        );
        assert_eq!(r.state, ToolState::Error, "{}: read {name}: {t}", e.kind);
        let r = e
            .call("Write", json!({"file_path": p, "content": "overwritten"}))
            .await;
        assert_ne!(
            r.state,
            ToolState::Success,
            "{}: write {name}: {}",
            e.kind,
            r.text()
        );
        // Nor through the backend directly.
        let err = e.sb.read(&p, None).await.unwrap_err();
        assert!(
            matches!(err, BackendError::Escapes(_) | BackendError::NotFound(_)),
            "{}: {name}: {err}",
            e.kind
        );
        // A cloud service would read `esc/etc` (its own `/etc/passwd`):
        // only the backend's check stands in the way.
        if is_cloud(e.kind) {
            assert!(
                matches!(err, BackendError::Escapes(_)),
                "{}: {name}: {err}",
                e.kind
            );
        }
        assert!(
            e.sb.append(&p, b"x").await.is_err(),
            "{}: append {name}",
            e.kind
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP-SECRET\n");
    // Inside the sandbox the host path does not exist either.
    let r = e
        .call("Bash", json!({"command": "cat esc/abs esc/rel 2>&1; true"}))
        .await;
    assert!(!r.text().contains("TOP-SECRET"), "{}: {}", e.kind, r.text());
    // Grep over the tree does not follow the links out.
    let r = e
        .call("Grep", json!({"pattern": "TOP-SECRET", "path": e.p("esc")}))
        .await;
    assert!(
        !r.text().contains(secret.to_str().unwrap()),
        "{}: {}",
        e.kind,
        r.text()
    );
    other_operations_refuse_escapes(e, outside.path()).await;
}

/// Whether `kind` is one of the cloud services (faked here).
fn is_cloud(kind: BackendKind) -> bool {
    matches!(
        kind,
        BackendKind::E2b | BackendKind::Daytona | BackendKind::Opensandbox
    )
}

/// The rest of [`symlink_escape_is_refused`]: every other file operation
/// refuses what lies behind a link out of the workspace and changes
/// nothing outside; `stat`, `remove` and `rename` act on a link itself.
/// Every backend but the local one must say [`BackendError::Escapes`]. The
/// cloud fakes' file APIs follow links in their box as the real services
/// do (a link's host path names a path of the box, `/etc/passwd` the
/// box's read-only `/etc`), so there the refusal is the backend's own
/// check, not the fake's.
async fn other_operations_refuse_escapes(e: &Env, outside: &Path) {
    let refused = |what: &str, r: Result<String, BackendError>| {
        assert!(
            matches!(r, Err(BackendError::Escapes(_))),
            "{}: {what}: {r:?}",
            e.kind
        );
    };
    let ok = |r: Result<(), BackendError>| r.map(|()| String::new());
    let secret = outside.join("secret.txt");
    refused(
        "stat through",
        e.sb.stat(&e.p("esc/dir/secret.txt"))
            .await
            .map(|s| format!("{s:?}")),
    );
    refused(
        "list through",
        e.sb.list(&e.p("esc/dir")).await.map(|v| format!("{v:?}")),
    );
    for parents in [true, false] {
        refused(
            &format!("mkdir through (parents {parents})"),
            ok(e.sb.mkdir(&e.p("esc/dir/made"), parents).await),
        );
    }
    // A dangling link out: `mkdir -p` or a write through it would create
    // its target.
    e.link("esc/far", outside.join("not/yet").to_str().unwrap());
    refused(
        "mkdir through a dangling link",
        ok(e.sb.mkdir(&e.p("esc/far/x"), true).await),
    );
    refused(
        "write through a dangling link",
        ok(e.sb.write(&e.p("esc/far"), b"x").await),
    );
    refused(
        "create_new through",
        e.sb.create_new(&e.p("esc/dir/new.txt"), b"x")
            .await
            .map(|b| b.to_string()),
    );
    refused(
        "write_stream through",
        e.sb.write_stream(
            &e.p("esc/abs"),
            Box::new(std::io::Cursor::new(b"x".to_vec())),
        )
        .await
        .map(|n| n.to_string()),
    );
    refused(
        "remove through",
        ok(e.sb.remove(&e.p("esc/dir/secret.txt"), false).await),
    );
    refused(
        "rename from behind a link",
        ok(e.sb
            .rename(&e.p("esc/dir/secret.txt"), &e.p("moved.txt"))
            .await),
    );
    e.put("esc/mine.txt", "mine");
    refused(
        "rename to behind a link",
        ok(e.sb
            .rename(&e.p("esc/mine.txt"), &e.p("esc/dir/mine.txt"))
            .await),
    );
    for gone in ["made", "not", "new.txt", "mine.txt", "x"] {
        assert!(
            !outside.join(gone).exists(),
            "{}: {gone} appeared outside",
            e.kind
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP-SECRET\n");
    // The link itself: a stat or a listing tells nothing of what it
    // points to outside.
    let st = e.sb.stat(&e.p("esc/abs")).await.unwrap();
    assert_eq!(
        (st.kind, st.size, st.target_is_dir),
        (FileKind::Symlink, 0, false),
        "{}: {st:?}",
        e.kind
    );
    let listed = e.sb.list(&e.p("esc")).await.unwrap();
    for l in listed.iter().filter(|l| l.kind == FileKind::Symlink) {
        assert!(l.size == 0 && !l.target_is_dir, "{}: {l:?}", e.kind);
    }
    // A dangling link that stays inside is written through, creating
    // its target (BusyBox's `readlink -f` alone would refuse it).
    e.link("esc/later", "later.txt");
    e.sb.write(&e.p("esc/later"), b"later").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(e.host.join("esc/later.txt")).unwrap(),
        "later",
        "{}",
        e.kind
    );
    e.link("esc/laterdir", "made");
    e.sb.mkdir(&e.p("esc/laterdir/a"), true).await.unwrap();
    assert!(e.host.join("esc/made/a").is_dir(), "{}", e.kind);
    // Renaming onto a link to a directory outside replaces the link
    // (`mv` alone would move the file into that directory).
    e.sb.rename(&e.p("esc/mine.txt"), &e.p("esc/dir"))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(e.host.join("esc/dir")).unwrap(),
        "mine",
        "{}",
        e.kind
    );
    assert!(!outside.join("mine.txt").exists(), "{}", e.kind);
    // Removing a link removes the link, never its target.
    e.sb.remove(&e.p("esc/abs"), false).await.unwrap();
    assert!(!e.host.join("esc/abs").is_symlink(), "{}", e.kind);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP-SECRET\n");
}

/// Backend exec: stdin, env, cwd, and a missing program never looks like
/// success (C12's rule on every backend).
async fn exec_stdin_env_cwd(e: &Env) {
    std::fs::create_dir_all(e.host.join("sub")).unwrap();
    let mut req = ExecRequest::new(["/bin/sh", "-c", "cat; printf ' %s ' \"$GREETING\"; pwd"]);
    req.stdin = Some(Bytes::from_static(b"from-stdin"));
    req.env.insert("GREETING".into(), "hello there".into());
    req.cwd = Some("sub".into());
    let caps = e.sb.capabilities();
    let expected = if caps.exec_stdin {
        "from-stdin hello there <wd>/sub\n"
    } else {
        // Documented: stdin bytes are refused, not dropped.
        let err = e.sb.exec(req.clone(), None).await.unwrap_err();
        assert!(
            matches!(err, BackendError::Unsupported { backend, .. } if backend == e.kind),
            "{}: {err}",
            e.kind
        );
        req.stdin = None;
        " hello there <wd>/sub\n"
    };
    let (code, out, _) = exec_collect(e.sb.as_ref(), req).await;
    assert_eq!(code, Some(0));
    assert_eq!(e.norm(&out), expected, "{}", e.kind);
    // No stdin: a reader sees EOF at once.
    let t0 = Instant::now();
    let (code, _, _) = exec_collect(e.sb.as_ref(), ExecRequest::new(["cat"])).await;
    assert_eq!(code, Some(0));
    assert!(t0.elapsed() < Duration::from_secs(5));
    // Binary output is byte-exact.
    let (tx, mut rx) = mpsc::channel(64);
    e.sb.exec(ExecRequest::shell("printf '\\000\\001\\377abc'"), Some(tx))
        .await
        .unwrap();
    let mut bytes = Vec::new();
    while let Some(c) = rx.recv().await {
        bytes.extend_from_slice(&c.data);
    }
    if caps.byte_exact_output {
        assert_eq!(bytes, b"\0\x01\xffabc", "{}", e.kind);
    } else {
        // Text events, one per line (OpenSandbox's execd): the text
        // survives, invalid bytes become U+FFFD and a line end is added.
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(text, "\0\x01\u{fffd}abc\n", "{}", e.kind);
    }
    match e
        .sb
        .exec(ExecRequest::new(["definitely_missing_cmd"]), None)
        .await
    {
        Err(BackendError::Spawn { .. }) => {}
        Ok(o) => assert!(
            o.exit_code.is_some_and(|c| c != 0),
            "{}: missing program gave {:?}",
            e.kind,
            o.exit_code
        ),
        Err(other) => panic!("{}: {other}", e.kind),
    }
}

/// A long-lived process with piped stdio (what MCP stdio servers use);
/// refused with `Unsupported` where the capability is off.
async fn long_lived_process_over_stdio(e: &Env) {
    if !e.sb.capabilities().processes {
        let err = must_fail(
            e.sb.spawn(SpawnRequest {
                argv: vec!["cat".into()],
                ..Default::default()
            })
            .await,
            "spawn",
        );
        assert!(
            matches!(err, BackendError::Unsupported { backend, .. } if backend == e.kind),
            "{}: {err}",
            e.kind
        );
        return;
    }
    let mut p =
        e.sb.spawn(SpawnRequest {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo ready; while read -r l; do echo \"got:$l\"; echo \"log:$l\" >&2; done".into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut out = BufReader::new(p.stdout);
    let mut err = BufReader::new(p.stderr);
    let mut line = String::new();
    out.read_line(&mut line).await.unwrap();
    assert_eq!(line, "ready\n", "{}", e.kind);
    p.stdin.write_all(b"ping\n").await.unwrap();
    p.stdin.flush().await.unwrap();
    line.clear();
    out.read_line(&mut line).await.unwrap();
    assert_eq!(line, "got:ping\n", "{}", e.kind);
    line.clear();
    err.read_line(&mut line).await.unwrap();
    assert_eq!(line, "log:ping\n", "{}", e.kind);
    // Closing stdin ends the loop and the process.
    drop(p.stdin);
    let code = tokio::time::timeout(Duration::from_secs(10), p.control.wait())
        .await
        .expect("exits after stdin closes")
        .unwrap();
    assert_eq!(code, Some(0), "{}", e.kind);
    // kill() of a running one.
    let q =
        e.sb.spawn(SpawnRequest {
            argv: vec!["sleep".into(), "3600".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), q.control.kill())
        .await
        .expect("kill finishes")
        .unwrap();
    assert!(q.control.try_status().is_some(), "{}", e.kind);
}

/// The Sandbox file API itself.
async fn sandbox_file_api(e: &Env) {
    let sb = e.sb.as_ref();
    let p = e.p("api/a/b.txt");
    sb.write(&p, b"0123456789").await.unwrap();
    assert_eq!(sb.read(&p, None).await.unwrap(), b"0123456789");
    assert_eq!(
        sb.read(&p, Some(ByteRange { offset: 3, len: 4 }))
            .await
            .unwrap(),
        b"3456"
    );
    if sb.capabilities().append {
        // The offset the bytes start at (issue 23 point 7).
        assert_eq!(sb.append(&p, b"ab").await.unwrap(), 10, "{}", e.kind);
    } else {
        let err = sb.append(&p, b"ab").await.unwrap_err();
        assert!(
            matches!(err, BackendError::Unsupported { what: "append", .. }),
            "{}: {err}",
            e.kind
        );
        assert_eq!(
            sb.read(&p, None).await.unwrap(),
            b"0123456789",
            "{}",
            e.kind
        );
        sb.write(&p, b"0123456789ab").await.unwrap();
    }
    assert_eq!(sb.read(&p, None).await.unwrap(), b"0123456789ab");
    assert!(!sb.create_new(&p, b"x").await.unwrap());
    assert!(sb.create_new(&e.p("api/a/new.txt"), b"n").await.unwrap());
    let n = sb
        .write_stream(
            &e.p("api/stream.bin"),
            Box::new(std::io::Cursor::new(vec![7u8; 300_000])),
        )
        .await
        .unwrap();
    assert_eq!(n, 300_000);
    let names: Vec<(String, FileKind)> = sb
        .list(&e.p("api/a"))
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.kind))
        .collect();
    assert_eq!(
        names,
        [
            ("b.txt".to_string(), FileKind::File),
            ("new.txt".to_string(), FileKind::File)
        ],
        "{}",
        e.kind
    );
    let st = sb.stat(&p).await.unwrap();
    assert_eq!((st.name.as_str(), st.size), ("b.txt", 12));
    sb.rename(&e.p("api/a/new.txt"), &e.p("api/moved/new.txt"))
        .await
        .unwrap();
    assert!(
        sb.stat(&e.p("api/a/new.txt"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    sb.mkdir(&e.p("api/d1/d2"), true).await.unwrap();
    assert!(matches!(
        sb.mkdir(&e.p("api/d1"), false).await,
        Err(BackendError::AlreadyExists(_))
    ));
    sb.remove(&e.p("api"), true).await.unwrap();
    assert!(sb.stat(&e.p("api")).await.unwrap_err().is_not_found());
    assert!(
        sb.read(&e.p("nope"), None)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

/// Skills: installed from a host directory, listed and read back.
async fn skills_install_and_list(e: &Env) {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(
        src.path().join("SKILL.md"),
        "---\nname: greet\ndescription: Say hello\n---\n# Greet\nSay hello.\n",
    )
    .unwrap();
    std::fs::create_dir_all(src.path().join("scripts")).unwrap();
    std::fs::write(
        src.path().join("scripts/run.sh"),
        "#!/bin/sh\necho hello from skill\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        src.path().join("scripts/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    e.ws.skills().add(src.path(), "agent-1").await.unwrap();
    let listing = e.ws.skills().list("agent-1").await.unwrap();
    let names: Vec<&str> = listing.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["greet"], "{}", e.kind);
    let dir = listing.skills[0].dir.clone();
    assert!(
        e.norm(&dir).starts_with("<wd>/skills/"),
        "{}: {dir}",
        e.kind
    );
    let md = e.ws.skills().markdown("greet", "agent-1").await.unwrap();
    assert!(md.contains("Say hello."), "{}", e.kind);
    // The executable bit survived: the skill's script runs in the sandbox.
    let r = e
        .call("Bash", json!({"command": format!("{dir}/scripts/run.sh")}))
        .await;
    assert_eq!(e.ok(&r), "hello from skill\n", "{}", e.kind);
}

/// Offloading: context lines and tool results land in the reference
/// layout and read back.
async fn offloading(e: &Env) {
    let msgs = vec![
        Msg::text("u", "user", "first"),
        Msg::text("a", "assistant", "second"),
    ];
    let path = e.ws.offload().context("s-1", &msgs).await.unwrap();
    assert_eq!(
        e.norm(&path),
        "<wd>/sessions/s-1/context.jsonl",
        "{}",
        e.kind
    );
    let ctx = e.ws.sessions().read_context("s-1").await.unwrap();
    assert_eq!(ctx.messages.len(), 2);
    assert_eq!(ctx.messages[1].text_content(), "second");
    let block = ToolResultBlock {
        id: "call_1".into(),
        name: "Bash".into(),
        output: ToolOutput::Text("result text".into()),
        state: "success".into(),
        metadata: Value::Null,
        extra: Default::default(),
    };
    let p1 = e.ws.offload().tool_result("s-1", &block).await.unwrap();
    let p2 = e.ws.offload().tool_result("s-1", &block).await.unwrap();
    assert_eq!(
        e.norm(&p1),
        "<wd>/sessions/s-1/tool_result-call_1.txt",
        "{}",
        e.kind
    );
    assert_eq!(
        e.norm(&p2),
        "<wd>/sessions/s-1/tool_result-call_1(1).txt",
        "{}",
        e.kind
    );
    assert_eq!(
        std::fs::read_to_string(e.host.join("sessions/s-1/tool_result-call_1.txt")).unwrap(),
        "result text"
    );
    // Big Bash output is offloaded to a file the sandbox can read.
    let r = e.call("Bash", json!({"command": "seq 1 20000"})).await;
    let path = r.offload_path.clone().expect("offloaded");
    let full = e.sb.read(&path, None).await.unwrap();
    assert!(full.ends_with(b"19999\n20000\n"), "{}", e.kind);
}

/// MCP inside the sandbox: `server-everything` declared for a pair starts
/// through [`Sandbox::spawn`], so it runs where the tools run (its pid
/// namespace is the sandbox's, its environment the sandbox's), answers
/// `echo`, and closing the workspace leaves no process. A backend without
/// long-lived processes refuses the declaration with its `Unsupported`
/// error and leaves `.mcp` unchanged.
async fn mcp_server_everything(e: &Env) {
    let caps = e.sb.capabilities();
    if !caps.processes {
        let err = must_fail(
            e.sb.spawn(SpawnRequest {
                argv: vec!["true".into()],
                ..Default::default()
            })
            .await,
            "spawn",
        );
        assert!(
            matches!(err, BackendError::Unsupported { backend, .. } if backend == e.kind),
            "{}: {err}",
            e.kind
        );
        let decl = McpDecl::stdio("everything", "node", vec!["index.js".into()]);
        let err = must_fail(
            e.ws.mcp().add(decl, "agent-1", "s", true).await,
            "declaration",
        );
        assert!(
            err.to_string()
                .contains(&format!("the {} backend does not support", e.kind)),
            "{}: {err}",
            e.kind
        );
        assert!(
            e.ws.mcp()
                .declared("agent-1", "s")
                .await
                .unwrap()
                .is_empty()
        );
        assert!(!e.host.join(".mcp").exists(), "{}", e.kind);
        return;
    }
    let ev = match everything() {
        Ok(ev) => ev,
        Err(why) => return skip_or_fail(&why),
    };
    // The cloud fakes see the host's /usr but not the npm dir: the server
    // goes into the workspace, as a user would install it there.
    let script = if matches!(e.kind, BackendKind::E2b) {
        let dst = e.host.join("mcp-npm");
        std::fs::create_dir_all(&dst).unwrap();
        let st = std::process::Command::new("cp")
            .arg("-a")
            .arg(&ev.modules)
            .arg(&dst)
            .status()
            .unwrap();
        assert!(st.success());
        let rel = ev
            .script
            .strip_prefix(ev.modules.parent().unwrap())
            .unwrap();
        e.p(&format!("mcp-npm/{}", rel.display()))
    } else {
        ev.script.display().to_string()
    };
    let decl = McpDecl::stdio(
        "everything",
        ev.node.display().to_string(),
        vec![script.clone(), "stdio".into()],
    );
    let status =
        e.ws.mcp()
            .add(decl, "agent-1", "s", true)
            .await
            .unwrap_or_else(|err| panic!("{}: server-everything does not start: {err}", e.kind));
    assert!(status.state.is_ready(), "{}: {status:?}", e.kind);
    let tools = e.ws.mcp().tools("agent-1", "s").await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "mcp__everything__echo"),
        "{}: {tools:?}",
        e.kind
    );
    let call = |tool: &str, args: Value| McpToolCall {
        agent: "agent-1".into(),
        session: "s".into(),
        server: Some("everything".into()),
        tool: tool.into(),
        args,
        ..Default::default()
    };
    let r =
        e.ws.mcp()
            .call_tool(call("echo", json!({"message": "from the sandbox"})))
            .await;
    assert_eq!(r.text(), "Echo: from the sandbox", "{}", e.kind);
    // Where it runs: the server's own view of its environment.
    let r = e.ws.mcp().call_tool(call("get-env", json!({}))).await;
    let env: Value = serde_json::from_str(&r.text())
        .unwrap_or_else(|err| panic!("{}: get-env: {err}: {}", e.kind, r.text()));
    match e.kind {
        BackendKind::Bubblewrap => assert_eq!(env["HOME"], "/workspace", "{env}"),
        BackendKind::Docker => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
            let inner = env["HOSTNAME"].as_str().unwrap_or_default();
            assert!(
                !inner.is_empty() && inner != host.trim(),
                "container hostname {inner:?} vs host {host:?}"
            );
        }
        // Started by the exec wrapper in the Pod, which marks every
        // command it runs.
        BackendKind::Kubernetes => assert!(env["WSBENCH_EXEC_ID"].is_string(), "{env}"),
        _ => {}
    }
    // And the process itself: inside the container, or in a pid namespace
    // of its own on the host (bubblewrap, and the e2b fake's bwrap box).
    match e.kind {
        BackendKind::Docker => {
            assert!(
                !e.processes_with(&script).await.is_empty(),
                "no server process inside the container"
            );
        }
        _ => {
            let procs = host_pids_with(&script);
            let node = procs
                .iter()
                .find(|(_, c)| c.starts_with(ev.node.to_str().unwrap()))
                .unwrap_or_else(|| panic!("{}: no node process: {procs:?}", e.kind));
            // The k8s stub's pods share the host's pid namespace (so a
            // second exec can kill the first one's processes, as in one
            // Pod); their boundary is the mount namespace of the pod's
            // bubblewrap.
            let which = if e.kind == BackendKind::Kubernetes {
                "mnt"
            } else {
                "pid"
            };
            let ns = |pid: String| std::fs::read_link(format!("/proc/{pid}/ns/{which}")).unwrap();
            let isolated = ns(node.0.to_string()) != ns("self".into());
            assert_eq!(isolated, e.kind != BackendKind::Local, "{}", e.kind);
        }
    }
    e.ws.close().await;
    let mut left = Vec::new();
    for _ in 0..50 {
        left = match e.kind {
            // The container outlives the workspace; look inside it.
            BackendKind::Docker => e.processes_with(&script).await,
            _ => host_processes_with(&script),
        };
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(left.is_empty(), "{}: left behind: {left:?}", e.kind);
}

macro_rules! suite {
    ($($t:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::local().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
        mod bubblewrap {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::bwrap().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
        mod docker {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::docker().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
        mod e2b {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::e2b().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
        mod daytona {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::daytona().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
        mod opensandbox {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::opensandbox().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
        mod kubernetes {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $t() {
                    if let Some(e) = super::Env::kubernetes().await {
                        super::$t(&e).await
                    }
                }
            )*
        }
    };
}

suite!(
    bash_output_and_exit_codes,
    c18_shell_line_is_passed_intact,
    bash_timeout_leaves_no_process,
    background_job_does_not_hold_the_call,
    read_write_edit,
    glob_and_grep,
    c28_symlink_loops_are_finite,
    symlink_escape_is_refused,
    exec_stdin_env_cwd,
    long_lived_process_over_stdio,
    sandbox_file_api,
    skills_install_and_list,
    offloading,
    mcp_server_everything,
    pty_contract,
    line_shell_contract,
);

/// Behaviour only bubblewrap has: C11 diagnosis, network off by default,
/// reattach of the host directory.
mod bwrap_only {
    use super::*;
    use wsbench::backend::bubblewrap::BubblewrapSandbox;

    fn fake_bwrap(dir: &Path, message: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("bwrap");
        std::fs::write(&p, format!("#!/bin/sh\necho '{message}' >&2\nexit 1\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// C11: a host that forbids user namespaces (simulated by a fake
    /// `bwrap`) fails provisioning with bwrap's line, the cause and the
    /// remedies; the command never runs on the host; no fallback.
    #[tokio::test]
    async fn c11_user_namespaces_blocked() {
        let d = tempfile::tempdir().unwrap();
        let fake = fake_bwrap(d.path(), "bwrap: setting up uid map: Permission denied");
        let opts = BubblewrapOptions {
            bwrap_path: fake.clone(),
            base_dir: Some(d.path().join("base")),
            ..Default::default()
        };
        let prov = BubblewrapProvisioner::new(opts.clone());
        let err = prov
            .provision(&spec("c11"))
            .await
            .err()
            .expect("fails")
            .to_string();
        assert!(
            err.contains("bwrap: setting up uid map: Permission denied"),
            "{err}"
        );
        assert!(err.contains("user namespaces look restricted"), "{err}");
        assert!(err.contains("AppArmor profile"), "{err}");
        assert!(
            err.contains("kernel.apparmor_restrict_unprivileged_userns"),
            "{err}"
        );

        // Without the probe, the first command fails the same way and does
        // not run anywhere.
        let marker = format!(
            "/tmp/wsbench-escape-marker-{}",
            uuid::Uuid::new_v4().simple()
        );
        let sb = BubblewrapSandbox::open(
            d.path().join("ws"),
            BubblewrapOptions {
                probe: false,
                ..opts
            },
        )
        .unwrap();
        let ws = open_ws(Arc::new(sb)).await;
        let r = ws
            .call_tool(ToolCall {
                tool: "Bash".into(),
                session: "s".into(),
                args: json!({"command": format!("touch {marker}")}),
                ..Default::default()
            })
            .await;
        assert_eq!(r.state, ToolState::Error);
        assert!(
            r.text().contains("user namespaces look restricted"),
            "{}",
            r.text()
        );
        assert!(!Path::new(&marker).exists(), "the command ran on the host");
    }

    /// C11, network-namespace variant.
    #[tokio::test]
    async fn c11_network_namespace_blocked() {
        let d = tempfile::tempdir().unwrap();
        let fake = fake_bwrap(
            d.path(),
            "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
        );
        let sb = BubblewrapSandbox::open(
            d.path().join("ws"),
            BubblewrapOptions {
                bwrap_path: fake,
                ..Default::default()
            },
        )
        .unwrap();
        let err = sb.probe().await.unwrap_err().to_string();
        assert!(
            err.contains("network namespace could not be set up"),
            "{err}"
        );
        assert!(err.contains("RTM_NEWADDR"), "{err}");
        assert!(err.contains("share_net"), "{err}");
    }

    #[tokio::test]
    async fn missing_bwrap_names_the_package() {
        let d = tempfile::tempdir().unwrap();
        let sb = BubblewrapSandbox::open(
            d.path(),
            BubblewrapOptions {
                bwrap_path: "/nonexistent/bwrap".into(),
                ..Default::default()
            },
        )
        .unwrap();
        let err = sb.probe().await.unwrap_err().to_string();
        assert!(err.contains("apt-get install bubblewrap"), "{err}");
    }

    fn interfaces(text: &str) -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(|s| s.trim().to_string())
            .collect();
        v.sort();
        v
    }

    /// The network is off unless the profile turns it on.
    #[tokio::test]
    async fn network_is_off_by_default() {
        if let Err(why) = images::bwrap_ready().await {
            return skip_or_fail(&why);
        }
        let d = tempfile::tempdir().unwrap();
        let sb = BubblewrapSandbox::open(d.path(), BubblewrapOptions::default()).unwrap();
        let (code, out, _) = exec_collect(&sb, ExecRequest::new(["cat", "/proc/net/dev"])).await;
        assert_eq!(code, Some(0));
        assert_eq!(interfaces(&out), ["lo"]);
        let shared = BubblewrapSandbox::open(
            d.path(),
            BubblewrapOptions {
                share_net: true,
                ..Default::default()
            },
        )
        .unwrap();
        let (_, out, _) = exec_collect(&shared, ExecRequest::new(["cat", "/proc/net/dev"])).await;
        let host = std::fs::read_to_string("/proc/net/dev").unwrap();
        assert_eq!(interfaces(&out), interfaces(&host));
    }

    /// A restarted wsbench (a new provisioner) lists and reattaches the
    /// workspace with its labels and files.
    #[tokio::test]
    async fn reattach_after_dropping_the_provisioner() {
        if let Err(why) = images::bwrap_ready().await {
            return skip_or_fail(&why);
        }
        let base = tempfile::tempdir().unwrap();
        let opts = BubblewrapOptions {
            base_dir: Some(base.path().to_path_buf()),
            ..Default::default()
        };
        {
            let prov = BubblewrapProvisioner::new(opts.clone());
            let sb = prov.create(&spec("ws-re")).await.unwrap();
            let ws = open_ws(sb).await;
            let r = ws
                .call_tool(ToolCall {
                    tool: "Bash".into(),
                    session: "s".into(),
                    args: json!({"command": "echo kept > kept.txt"}),
                    ..Default::default()
                })
                .await;
            assert_eq!(r.state, ToolState::Success, "{}", r.text());
        }
        let prov = BubblewrapProvisioner::new(opts);
        let list = prov.list().await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].labels[labels::WORKSPACE_ID], "ws-re");
        assert_eq!(list[0].labels[labels::AGENT], "agent-1");
        let sb = prov.provision(&spec("ws-re")).await.unwrap();
        assert_eq!(sb.kind(), BackendKind::Bubblewrap);
        assert_eq!(
            sb.read("/workspace/kept.txt", None).await.unwrap(),
            b"kept\n"
        );
        prov.destroy("ws-re").await.unwrap();
        assert!(prov.list().await.unwrap().is_empty());
    }
}

/// Behaviour only Docker has: C12, storage modes, reattach, suspend,
/// pulls, container settings.
mod docker_only {
    use super::*;
    use std::sync::Mutex;
    use wsbench::backend::SandboxState;
    use wsbench::backend::docker::{DockerEvent, LABEL_USER, Storage, SuspendMode, connect};

    async fn ready(image: &str) -> bool {
        match images::docker_ready(image).await {
            Ok(()) => true,
            Err(why) => {
                skip_or_fail(&why);
                false
            }
        }
    }

    /// A provisioner on `opts`, plus a guard that destroys `id` at the end.
    fn prov(opts: DockerOptions, id: &str) -> (DockerProvisioner, DockerCleanup) {
        let guard = DockerCleanup {
            opts: opts.clone(),
            id: id.to_string(),
        };
        (
            DockerProvisioner::new(opts).with_profile(TEST_PROFILE),
            guard,
        )
    }

    /// C12 on an image without bash: a missing executable is a non-zero
    /// exit equal to `inspect_exec`'s, with Docker's message on stderr.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn c12_missing_executable() {
        if !ready(images::BUSYBOX_IMAGE).await {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let id = new_id("c12");
        let events: Arc<Mutex<Vec<DockerEvent>>> = Arc::default();
        let ev = events.clone();
        let (p, _guard) = prov(
            DockerOptions {
                image: images::BUSYBOX_IMAGE.into(),
                ..docker_opts(base.path())
            },
            &id,
        );
        let p = p.with_events(Arc::new(move |e| ev.lock().unwrap().push(e)));
        let sb = p.create(&spec(&id)).await.unwrap();
        let (code, out, err) =
            exec_collect(sb.as_ref(), ExecRequest::new(["definitely_missing_cmd"])).await;
        assert!(
            matches!(code, Some(126) | Some(127)),
            "{code:?} {out} {err}"
        );
        assert!(err.contains("executable file not found"), "stderr: {err}");
        assert!(out.is_empty(), "stdout: {out}");
        let exec_id = events
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find_map(|e| match e {
                DockerEvent::ExecStarted { exec_id, argv, .. }
                    if argv == &["definitely_missing_cmd"] =>
                {
                    Some(exec_id.clone())
                }
                _ => None,
            })
            .expect("exec started event");
        let docker = connect(None).await.unwrap();
        let inspected = docker.inspect_exec(&exec_id).await.unwrap();
        assert_eq!(inspected.exit_code.map(|c| c as i32), code);
        assert!(events.lock().unwrap().iter().any(|e| matches!(
            e,
            DockerEvent::ExecExited { exec_id: x, exit_code, .. } if *x == exec_id && *exit_code == code
        )));
        // Through the Bash tool (/bin/sh is BusyBox here): 127, not found.
        let ws = open_ws(sb.clone()).await;
        let call = |cmd: &str| {
            ws.call_tool(ToolCall {
                tool: "Bash".into(),
                session: "s".into(),
                args: json!({ "command": cmd }),
                ..Default::default()
            })
        };
        let r = call("definitely_missing_cmd --flag").await;
        assert_eq!(r.exit_code, Some(127), "{}", r.text());
        assert!(r.text().contains("not found"), "{}", r.text());
        let r = call("echo ok from busybox").await;
        assert_eq!(r.text(), "ok from busybox\n");
        let (code, _, _) =
            exec_collect(sb.as_ref(), ExecRequest::new(["/bin/bash", "-c", "true"])).await;
        assert!(
            code.is_some_and(|c| c != 0),
            "no bash in the image: {code:?}"
        );
    }

    /// Output still in flight when the process exits is all delivered,
    /// even when a background job keeps the stream open (the end is then
    /// seen by polling, and the drain waits while data keeps coming).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn big_output_with_a_lingering_child_is_complete() {
        if !ready(images::DEBIAN_IMAGE).await {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let id = new_id("big");
        let (p, _guard) = prov(docker_opts(base.path()), &id);
        let sb = p.create(&spec(&id)).await.unwrap();
        // A slow reader: the output is still in flight well after exit.
        let (tx, mut rx) = mpsc::channel::<wsbench::backend::OutputChunk>(1);
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some(c) = rx.recv().await {
                out.extend_from_slice(&c.data);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            out
        });
        let t0 = Instant::now();
        let outcome = sb
            .exec(
                ExecRequest::shell("sleep 5 & sleep 0.3; seq 1 400000"),
                Some(tx),
            )
            .await
            .unwrap();
        assert_eq!(outcome.exit_code, Some(0));
        let out = reader.await.unwrap();
        let expected: String = (1..=400_000).map(|i| format!("{i}\n")).collect();
        assert_eq!(out.len(), expected.len());
        assert!(out == expected.as_bytes(), "output differs");
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    }

    /// Reattach after a restart, suspend (stop, pause) and resume.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reattach_suspend_resume() {
        if !ready(images::DEBIAN_IMAGE).await {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let id = new_id("re");
        let opts = docker_opts(base.path());
        let (p, _guard) = prov(opts.clone(), &id);
        {
            let sb = p.create(&spec(&id)).await.unwrap();
            let (code, _, _) =
                exec_collect(sb.as_ref(), ExecRequest::shell("echo kept > kept.txt")).await;
            assert_eq!(code, Some(0));
            // A second create finds the name taken and joins the
            // container (another process making the same workspace at
            // the same time must not fail; issue 15 point 3).
            let again = p.create(&spec(&id)).await.unwrap();
            let (code, out, _) =
                exec_collect(again.as_ref(), ExecRequest::shell("cat kept.txt")).await;
            assert_eq!((code, out.trim()), (Some(0), "kept"));
        }
        drop(p);
        // "Restart": a new provisioner with a new client.
        let p2 = DockerProvisioner::new(opts.clone()).with_profile(TEST_PROFILE);
        let list = p2.list().await.unwrap();
        let info = list.iter().find(|i| i.workspace_id == id).expect("listed");
        assert_eq!(info.state, SandboxState::Running);
        assert_eq!(info.labels[labels::USER], "tester");
        assert_eq!(info.labels[labels::AGENT], "agent-1");
        assert_eq!(info.labels[labels::PROFILE], TEST_PROFILE);
        let sb = p2.provision(&spec(&id)).await.unwrap();
        assert_eq!(
            sb.read("/workspace/kept.txt", None).await.unwrap(),
            b"kept\n"
        );

        p2.suspend(&id).await.unwrap();
        assert_eq!(
            p2.find(&id).await.unwrap().unwrap().state,
            SandboxState::Suspended
        );
        assert!(matches!(
            sb.exec(ExecRequest::new(["true"]), None).await,
            Err(BackendError::Unavailable { .. })
        ));
        let sb = p2.provision(&spec(&id)).await.unwrap();
        let (code, out, _) = exec_collect(sb.as_ref(), ExecRequest::shell("cat kept.txt")).await;
        assert_eq!((code, out.as_str()), (Some(0), "kept\n"));

        let paused = DockerProvisioner::new(DockerOptions {
            suspend: SuspendMode::Pause,
            ..opts
        })
        .with_profile(TEST_PROFILE);
        paused.suspend(&id).await.unwrap();
        assert_eq!(
            paused.find(&id).await.unwrap().unwrap().state,
            SandboxState::Suspended
        );
        paused.resume(&id).await.unwrap();
        let (code, _, _) = exec_collect(sb.as_ref(), ExecRequest::new(["true"])).await;
        assert_eq!(code, Some(0));

        paused.destroy(&id).await.unwrap();
        assert!(paused.find(&id).await.unwrap().is_none());
        assert!(!base.path().join(&id).exists(), "bind dir removed");
    }

    /// Volume and ephemeral workspaces: no host view, files through the
    /// archive API and exec scripts, same results.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn volume_and_ephemeral_storage() {
        if !ready(images::DEBIAN_IMAGE).await {
            return;
        }
        for storage in [Storage::Volume, Storage::Ephemeral] {
            let base = tempfile::tempdir().unwrap();
            let id = new_id("st");
            let (p, _guard) = prov(
                DockerOptions {
                    storage,
                    ..docker_opts(base.path())
                },
                &id,
            );
            let sb = p.create(&spec(&id)).await.unwrap();
            assert!(sb.host_root().is_none());
            assert!(!sb.capabilities().watch);
            let s = sb.as_ref();
            let f = "/workspace/a/b.txt";
            s.write(f, b"0123456789").await.unwrap();
            assert_eq!(s.read(f, None).await.unwrap(), b"0123456789");
            assert_eq!(
                s.read(f, Some(ByteRange { offset: 2, len: 3 }))
                    .await
                    .unwrap(),
                b"234"
            );
            assert_eq!(s.append(f, b"ab").await.unwrap(), 10);
            assert!(!s.create_new(f, b"x").await.unwrap());
            assert!(s.create_new("/workspace/a/new.txt", b"n").await.unwrap());
            let (code, out, _) =
                exec_collect(s, ExecRequest::shell("cat a/b.txt; ln -s b.txt a/link")).await;
            assert_eq!((code, out.as_str()), (Some(0), "0123456789ab"));
            assert_eq!(
                s.read("/workspace/a/link", None).await.unwrap(),
                b"0123456789ab"
            );
            let names: Vec<(String, FileKind, u64)> = s
                .list("/workspace/a")
                .await
                .unwrap()
                .into_iter()
                .map(|x| (x.name, x.kind, x.size))
                .collect();
            assert_eq!(
                names,
                [
                    ("b.txt".to_string(), FileKind::File, 12),
                    ("link".to_string(), FileKind::Symlink, 12),
                    ("new.txt".to_string(), FileKind::File, 1)
                ],
                "{storage:?}"
            );
            let st = s.stat("/workspace/a/link").await.unwrap();
            assert_eq!(st.link_target.as_deref(), Some("b.txt"));
            assert!(matches!(
                s.read("/workspace/a", None).await,
                Err(BackendError::IsADirectory(_))
            ));
            assert!(
                s.read("/workspace/nope", None)
                    .await
                    .unwrap_err()
                    .is_not_found()
            );
            assert!(s.stat("/workspace/nope").await.unwrap_err().is_not_found());
            // A big streamed write (chunks, not one buffer).
            let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
            let n = s
                .write_stream(
                    "/workspace/big.bin",
                    Box::new(std::io::Cursor::new(big.clone())),
                )
                .await
                .unwrap();
            assert_eq!(n, big.len() as u64);
            assert_eq!(s.read("/workspace/big.bin", None).await.unwrap(), big);
            s.rename("/workspace/a/new.txt", "/workspace/c/moved.txt")
                .await
                .unwrap();
            assert!(
                s.stat("/workspace/a/new.txt")
                    .await
                    .unwrap_err()
                    .is_not_found()
            );
            s.mkdir("/workspace/m/n", true).await.unwrap();
            assert!(matches!(
                s.mkdir("/workspace/m", false).await,
                Err(BackendError::AlreadyExists(_))
            ));
            s.remove("/workspace/a", true).await.unwrap();
            assert!(s.stat("/workspace/a").await.unwrap_err().is_not_found());
            // The engine runs on it too (Glob/Grep go through `rg` in the
            // container, which this image lacks: Read/Write only here).
            let ws = open_ws(sb.clone()).await;
            let r = ws
                .call_tool(ToolCall {
                    tool: "Read".into(),
                    session: "s".into(),
                    args: json!({"file_path": "/workspace/c/moved.txt"}),
                    ..Default::default()
                })
                .await;
            assert_eq!(r.text(), "     1\tn", "{storage:?}");
            if storage == Storage::Volume {
                let docker = connect(None).await.unwrap();
                let vol = p.container_name(&id);
                docker.inspect_volume(&vol).await.unwrap();
                p.destroy(&id).await.unwrap();
                assert!(docker.inspect_volume(&vol).await.is_err(), "volume removed");
            }
        }
    }

    /// Without a bind mount, file operations are scripts and archive-API
    /// calls in the container; they refuse links out of `/workspace` like
    /// the bind-mounted workspace does (see `symlink_escape_is_refused`),
    /// on a Debian and on a BusyBox image. The container's `/tmp` stands
    /// for "outside".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn volume_storage_refuses_links_out_of_the_workspace() {
        for image in [images::DEBIAN_IMAGE, images::BUSYBOX_IMAGE] {
            if !ready(image).await {
                return;
            }
            let base = tempfile::tempdir().unwrap();
            let id = new_id("vesc");
            let (p, _guard) = prov(
                DockerOptions {
                    image: image.into(),
                    storage: Storage::Volume,
                    ..docker_opts(base.path())
                },
                &id,
            );
            let sb = p.create(&spec(&id)).await.unwrap();
            let s = sb.as_ref();
            let sh = |line: &str| exec_collect(s, ExecRequest::shell(line));
            let (code, _, err) = sh("mkdir -p esc && echo TOP-SECRET > /tmp/secret.txt \
                 && ln -s /tmp/secret.txt esc/abs && ln -s /tmp esc/dir \
                 && ln -s /etc/passwd esc/etc && ln -s /tmp/not/yet esc/far \
                 && ln -s later.txt esc/later && echo mine > esc/mine.txt")
            .await;
            assert_eq!(code, Some(0), "{err}");
            let w = |rel: &str| format!("/workspace/esc/{rel}");
            let escapes = |what: &str, r: Result<String, BackendError>| {
                assert!(
                    matches!(r, Err(BackendError::Escapes(_))),
                    "{image}: {what}: {r:?}"
                );
            };
            let unit = |r: Result<(), BackendError>| r.map(|()| String::new());
            for name in ["abs", "dir/secret.txt", "etc"] {
                let r = s.read(&w(name), None).await;
                escapes(&format!("read {name}"), r.map(|v| format!("{v:?}")));
                escapes(
                    &format!("write {name}"),
                    unit(s.write(&w(name), b"x").await),
                );
                escapes(
                    &format!("append {name}"),
                    unit(s.append(&w(name), b"x").await.map(drop)),
                );
            }
            escapes(
                "write dir/x.txt",
                unit(s.write(&w("dir/x.txt"), b"x").await),
            );
            escapes("write far", unit(s.write(&w("far"), b"x").await));
            let stream = Box::new(std::io::Cursor::new(b"x".to_vec()));
            let r = s.write_stream(&w("dir/x.txt"), stream).await;
            escapes("write_stream", r.map(|n| n.to_string()));
            let r = s.create_new(&w("dir/n.txt"), b"x").await;
            escapes("create_new", r.map(|b| b.to_string()));
            for parents in [true, false] {
                escapes("mkdir", unit(s.mkdir(&w("dir/made"), parents).await));
            }
            escapes("mkdir far", unit(s.mkdir(&w("far/x"), true).await));
            let r = s.stat(&w("dir/secret.txt")).await;
            escapes("stat", r.map(|st| format!("{st:?}")));
            escapes("list", s.list(&w("dir")).await.map(|v| format!("{v:?}")));
            escapes("remove", unit(s.remove(&w("dir/secret.txt"), false).await));
            escapes(
                "rename from",
                unit(s.rename(&w("dir/secret.txt"), &w("moved")).await),
            );
            escapes(
                "rename to",
                unit(s.rename(&w("mine.txt"), &w("dir/mine.txt")).await),
            );
            let (_, out, _) = sh("ls -A /tmp; cat /tmp/secret.txt").await;
            for gone in ["x.txt", "n.txt", "made", "not", "mine.txt"] {
                assert!(!out.contains(gone), "{image}: {gone} outside: {out}");
            }
            assert!(out.contains("TOP-SECRET"), "{image}: {out}");
            // The links themselves: nothing about their targets outside.
            let st = s.stat(&w("abs")).await.unwrap();
            assert_eq!(
                (st.kind, st.size, st.target_is_dir),
                (FileKind::Symlink, 0, false),
                "{image}"
            );
            for l in s.list("/workspace/esc").await.unwrap() {
                if l.kind == FileKind::Symlink {
                    assert!(l.size == 0 && !l.target_is_dir, "{image}: {l:?}");
                }
            }
            // A dangling link that stays inside is written through.
            s.write(&w("later"), b"later").await.unwrap();
            assert_eq!(s.read(&w("later.txt"), None).await.unwrap(), b"later");
            // Renaming onto a link replaces the link.
            s.rename(&w("mine.txt"), &w("dir")).await.unwrap();
            assert_eq!(s.read(&w("dir"), None).await.unwrap(), b"mine\n");
            s.remove(&w("abs"), false).await.unwrap();
            let (_, out, _) = sh("ls -A /tmp; cat /tmp/secret.txt; ls -A esc").await;
            assert!(
                out.contains("TOP-SECRET") && !out.contains("mine.txt"),
                "{out}"
            );
            assert!(!out.contains("abs"), "{image}: {out}");
        }
    }

    /// No registry here: a missing image fails clearly, naming it. The
    /// registry address is on loopback, so nothing leaves the machine.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_image_fails_naming_it() {
        if !ready(images::DEBIAN_IMAGE).await {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let image = "127.0.0.1:9/wsbench-missing:latest";
        let id = new_id("img");
        let (p, _guard) = prov(
            DockerOptions {
                image: image.into(),
                pull: PullPolicy::Missing,
                ..docker_opts(base.path())
            },
            &id,
        );
        let err = p.create(&spec(&id)).await.err().expect("fails").to_string();
        assert!(
            err.contains(image) && err.contains("pulling it failed"),
            "{err}"
        );
        let (p, _g2) = prov(
            DockerOptions {
                image: image.into(),
                pull: PullPolicy::Never,
                ..docker_opts(base.path())
            },
            &id,
        );
        let err = p.create(&spec(&id)).await.err().expect("fails").to_string();
        assert!(
            err.contains(image) && err.contains("not present locally"),
            "{err}"
        );
        assert!(p.find(&id).await.unwrap().is_none(), "no container left");
    }

    /// Every `docker` log line on the bus so far, as `(workspace, level,
    /// message)`.
    fn docker_logs(sub: &mut wsbench::engine::events::Subscriber) -> Vec<(String, String, String)> {
        super::support::log_lines(sub, "docker")
    }

    /// Through the profile path ([`open_profile`]), the way the TUI opens
    /// a workspace: the container's creation and start, each exec and the
    /// stop on close reach the manager's bus as `Event::Log` lines of
    /// source `docker` carrying the workspace id (the Logs pane shows
    /// them); a pull that fails arrives as an error line. The registry of
    /// the missing image is on loopback, so nothing leaves the machine.
    ///
    /// [`open_profile`]: wsbench::root::open_profile
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn container_events_reach_the_bus_through_the_profile_path() {
        use wsbench::config::{Config, Paths};
        if !ready(images::DEBIAN_IMAGE).await {
            return;
        }
        let home = tempfile::tempdir().unwrap();
        let base = home.path().join("docker");
        let missing = "127.0.0.1:9/wsbench-missing:latest";
        let config = home.path().join("wsbench.toml");
        std::fs::write(
            &config,
            format!(
                r#"[profiles.{TEST_PROFILE}]
backend = "docker"

[profiles.{TEST_PROFILE}.options]
image = "{}"
pull = "never"
network = "none"
base_dir = "{}"

[profiles.nope]
backend = "docker"

[profiles.nope.options]
image = "{missing}"
pull = "missing"
network = "none"
base_dir = "{}"
"#,
                images::DEBIAN_IMAGE,
                base.display(),
                base.display()
            ),
        )
        .unwrap();
        let data = home.path().join("data");
        let paths = Paths {
            config_file: config.clone(),
            default_workdir: data.join("workspaces/default"),
            data_dir: data,
        };
        let config = Config::load(&config).unwrap();
        let bus = EventBus::default();
        let mut sub = bus.subscribe();
        let m = wsbench::root::open_profile(&config, TEST_PROFILE, &paths, bus.clone()).unwrap();
        let ws = m.get_workspace("alice", "coder", "s1", None).await.unwrap();
        let id = ws.id().to_string();
        let _guard = DockerCleanup {
            opts: docker_opts(&base),
            id: id.clone(),
        };
        let r = ws
            .call_tool(ToolCall {
                tool: "Bash".into(),
                session: "s".into(),
                args: json!({"command": "echo hello"}),
                ..Default::default()
            })
            .await;
        assert_eq!(r.state, ToolState::Success, "{}", r.text());
        let logs = docker_logs(&mut sub);
        let has = |logs: &[(String, String, String)], level: &str, text: &str| {
            logs.iter()
                .any(|(w, l, msg)| *w == id && l == level && msg.contains(text))
        };
        assert!(
            has(&logs, "info", "created container wsbench-"),
            "{logs:#?}"
        );
        assert!(has(&logs, "info", "started container "), "{logs:#?}");
        assert!(has(&logs, "debug", "exec in "), "{logs:#?}");
        assert!(has(&logs, "debug", "exited 0 after"), "{logs:#?}");
        assert!(logs.iter().all(|(w, ..)| *w == id), "{logs:#?}");
        // Closing suspends: the stop is said too.
        m.close(&id).await.unwrap();
        let logs = docker_logs(&mut sub);
        assert!(has(&logs, "info", "stopped container "), "{logs:#?}");
        m.destroy(&id).await.unwrap();
        let logs = docker_logs(&mut sub);
        assert!(has(&logs, "info", "removed container "), "{logs:#?}");
        m.shutdown().await.unwrap();

        // An image that cannot be pulled: the failure is an error line.
        let m = wsbench::root::open_profile(&config, "nope", &paths, bus.clone()).unwrap();
        let err = m
            .get_workspace("bob", "coder", "s1", None)
            .await
            .expect_err("a missing image fails the provisioning");
        assert!(err.to_string().contains(missing), "{err}");
        let logs = docker_logs(&mut sub);
        assert!(
            logs.iter().any(|(w, l, msg)| !w.is_empty()
                && l == "error"
                && msg.starts_with("create failed: ")
                && msg.contains(missing)
                && msg.contains("pulling it failed")),
            "{logs:#?}"
        );
        m.shutdown().await.unwrap();
    }

    /// Labels, limits, no-new-privileges, network mode, init; files a
    /// command makes belong to the host user; paths outside /workspace go
    /// to the container.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn container_settings_and_ownership() {
        if !ready(images::DEBIAN_IMAGE).await {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let id = new_id("cfg");
        let (p, _guard) = prov(
            DockerOptions {
                memory: Some("256m".into()),
                cpus: Some(0.5),
                pids_limit: Some(512),
                ..docker_opts(base.path())
            },
            &id,
        );
        let sb = p.create(&spec(&id)).await.unwrap();
        let docker = connect(None).await.unwrap();
        let info = docker
            .inspect_container(&p.container_name(&id), None)
            .await
            .unwrap();
        let hc = info.host_config.unwrap();
        assert_eq!(hc.memory, Some(256 << 20));
        assert_eq!(hc.nano_cpus, Some(500_000_000));
        assert_eq!(hc.pids_limit, Some(512));
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.init, Some(true));
        assert!(
            hc.security_opt
                .unwrap()
                .iter()
                .any(|s| s.starts_with("no-new-privileges"))
        );
        let lbl = info.config.unwrap().labels.unwrap();
        assert_eq!(lbl[labels::WORKSPACE_ID], id);
        assert_eq!(lbl[labels::USER], "tester");
        use std::os::unix::fs::MetadataExt;
        let me = std::fs::metadata("/proc/self").unwrap();
        assert_eq!(lbl[LABEL_USER], format!("{}:{}", me.uid(), me.gid()));

        let (code, _, _) = exec_collect(
            sb.as_ref(),
            ExecRequest::shell("mkdir -p made/d && echo x > made/d/f"),
        )
        .await;
        assert_eq!(code, Some(0));
        let host = sb.host_root().unwrap();
        for p in [host.join("made"), host.join("made/d/f")] {
            let m = std::fs::metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (me.uid(), me.gid()), "{}", p.display());
        }
        // The container's own files, outside the bind mount.
        let os = sb.read("/etc/os-release", None).await.unwrap();
        assert!(String::from_utf8_lossy(&os).contains("bookworm"));
        sb.write("/tmp/outside.txt", b"in the container")
            .await
            .unwrap();
        let (_, out, _) =
            exec_collect(sb.as_ref(), ExecRequest::new(["cat", "/tmp/outside.txt"])).await;
        assert_eq!(out, "in the container");
        // No network but loopback.
        let (_, out, _) =
            exec_collect(sb.as_ref(), ExecRequest::new(["cat", "/proc/net/dev"])).await;
        let ifaces: Vec<&str> = out
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(str::trim)
            .collect();
        assert_eq!(ifaces, ["lo"]);
    }
}
