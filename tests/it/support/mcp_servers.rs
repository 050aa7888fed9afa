//! Helpers shared by the `tests/mcp_*.rs` integration tests (included
//! with `#[path]`): the fake server, locating the real test servers,
//! workspaces, events, and the zombie check.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wsbench::backend::local::LocalSandbox;
use wsbench::engine::events::{Event, Received, Subscriber};
use wsbench::engine::mcp::{McpDecl, McpOptions};
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};

/// The directory of the test scripts.
pub fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_servers")
}

/// A stdio declaration running the stdlib fake server with `flags`.
pub fn fake(name: &str, flags: &[&str]) -> McpDecl {
    let mut args = vec![servers_dir().join("fake.py").display().to_string()];
    args.extend(flags.iter().map(|s| s.to_string()));
    McpDecl::stdio(name, "python3", args)
}

/// A stdio declaration running `sh -c script`.
pub fn sh(name: &str, script: &str) -> McpDecl {
    McpDecl::stdio(name, "sh", vec!["-c".into(), script.into()])
}

/// Byte length and sha-256 of the fake server's `big(n)` text.
pub fn big_digest(n: usize) -> (usize, String) {
    let out = std::process::Command::new("python3")
        .arg(servers_dir().join("fake.py"))
        .args(["--print-big", &n.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut it = text.split_whitespace();
    (
        it.next().unwrap().parse().unwrap(),
        it.next().unwrap().to_string(),
    )
}

/// A workspace on a temp dir with these default MCP servers.
pub async fn workspace(defaults: Vec<McpDecl>) -> (tempfile::TempDir, Arc<Workspace>, EventBus) {
    let dir = tempfile::tempdir().unwrap();
    let bus = EventBus::new(65_536);
    let sb = LocalSandbox::open(dir.path()).unwrap();
    let ws = Workspace::open(
        Arc::new(sb),
        WorkspaceConfig {
            default_mcps: defaults,
            ..Default::default()
        },
        bus.clone(),
    )
    .await
    .unwrap();
    (dir, ws, bus)
}

/// Options with a short initialize timeout.
pub fn quick(init_secs: u64) -> McpOptions {
    McpOptions {
        init_timeout: Duration::from_secs(init_secs),
        ..Default::default()
    }
}

/// Every event received so far.
pub fn drain(sub: &mut Subscriber) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let Received::Event(e) = r {
            out.push(e.event);
        }
    }
    out
}

/// `(server, state, detail)` of the MCP state events in `events`.
pub fn states(events: &[Event]) -> Vec<(String, String, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::McpState {
                server,
                state,
                detail,
                ..
            } => Some((server.clone(), state.clone(), detail.clone())),
            _ => None,
        })
        .collect()
}

/// Pids of zombie children of this test process.
pub fn zombie_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        if fields.len() > 1 && fields[0] == "Z" && fields[1].parse::<i32>() == Ok(me) {
            out.push(pid);
        }
    }
    out
}

/// Fails when zombie children remain after a short settle time (other
/// tests of the binary may be reaping theirs just now).
pub async fn assert_no_zombies() {
    let t0 = Instant::now();
    loop {
        let z = zombie_children();
        if z.is_empty() {
            return;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            panic!("zombie child processes remain: {z:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// True while a process with this pid exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .map(|c| !stat[c + 2..].starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// The pid in a status's `process` (`pid 123`).
pub fn pid_of(process: &Option<String>) -> Option<i32> {
    process
        .as_deref()
        .and_then(|p| p.strip_prefix("pid "))
        .and_then(|p| p.parse().ok())
}

/// Where the npm test servers are: `WSBENCH_MCP_NODE_BIN`, else `PATH`,
/// else the CI cache.
pub fn node_server(bin: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("WSBENCH_MCP_NODE_BIN") {
        dirs.push(d.into());
    }
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(h).join(".cache/wsbench-ci/npm/node_modules/.bin"));
    }
    dirs.into_iter().map(|d| d.join(bin)).find(|p| p.is_file())
}

/// A Python interpreter with the `mcp` SDK: `WSBENCH_MCP_PYTHON`, else
/// the CI cache's venv, else `python3` when it imports `mcp`.
pub fn mcp_python() -> Option<PathBuf> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("WSBENCH_MCP_PYTHON") {
        cands.push(p.into());
    }
    if let Some(h) = std::env::var_os("HOME") {
        cands.push(PathBuf::from(h).join(".cache/wsbench-ci/venv/bin/python"));
    }
    cands.push("python3".into());
    cands.into_iter().find(|p| {
        std::process::Command::new(p)
            .args(["-c", "import mcp.client.stdio"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on 127.0.0.1:`port`.
pub async fn wait_port(port: u16, within: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A child process killed (with its group) when dropped: an HTTP test
/// server.
pub struct Server(pub std::process::Child);

impl Server {
    /// Starts `cmd` in its own process group.
    pub fn start(mut cmd: std::process::Command) -> Server {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        Server(cmd.spawn().expect("start test server"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}
