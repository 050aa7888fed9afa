//! Helpers for the integration tests: a workspace on a temp dir, tool
//! calls, the vendored fixtures, skipping when a real part is missing; the
//! fake services, the Kubernetes stub and the TUI harness are sub-modules.

pub mod behind;
pub mod child;
pub mod cli;
pub mod cloud;
pub mod fake_daytona;
pub mod fake_daytona_pty;
pub mod fake_e2b;
pub mod fake_e2b_pty;
pub mod fake_openai;
pub mod fake_opensandbox;
pub mod fake_opensandbox_session;
pub mod fake_pty;
pub mod fake_sandbox;
pub mod images;
pub mod k8s_stub;
pub mod leak;
pub mod mcp_http;
pub mod mcp_serve;
pub mod mcp_servers;
pub mod procs;
pub mod tui;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::tools::ToolResult;
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

/// A workspace on a fresh temp dir.
pub async fn temp_workspace() -> (tempfile::TempDir, Arc<Workspace>) {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    (dir, ws)
}

/// Opens a local workspace on `dir`.
pub async fn open(dir: &Path, config: WorkspaceConfig) -> Arc<Workspace> {
    let sb = LocalSandbox::open(dir).unwrap();
    Workspace::open(Arc::new(sb), config, EventBus::default())
        .await
        .unwrap()
}

/// Calls a tool in session `s`.
pub async fn call(ws: &Workspace, tool: &str, args: Value) -> ToolResult {
    ws.call_tool(ToolCall {
        tool: tool.into(),
        session: "s".into(),
        args,
        ..Default::default()
    })
    .await
}

/// The vendored fixtures, `tests/fixtures/` of this repository (see its
/// README.md: written by the reference, agentscope 2.0.11).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Copies the reference fixture workspace into a temp dir (writable).
pub fn fixture_copy() -> tempfile::TempDir {
    let src = fixtures().join("reference-workspace");
    assert!(src.is_dir(), "fixture missing: {}", src.display());
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&src, dir.path());
    dir
}

/// Recursive copy that makes everything writable.
pub fn copy_dir(src: &Path, dst: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dst).unwrap();
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(0o755)).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

/// True when running under CI (tests that miss a part must fail there).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Prints SKIPPED locally, panics under CI.
pub fn skip_or_fail(why: &str) {
    if in_ci() {
        panic!("required part missing under CI: {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// Whether a program is on PATH.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// Every `Event::Log` line of `source` the subscriber has not read yet,
/// as `(workspace id, level, message)` (backend notices reach the bus
/// this way).
pub fn log_lines(
    sub: &mut wsbench::engine::events::Subscriber,
    source: &str,
) -> Vec<(String, String, String)> {
    use wsbench::engine::events::{Envelope, Event, Received};
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        let Received::Event(env) = r else { continue };
        let Envelope {
            workspace, event, ..
        } = *env;
        if let Event::Log {
            level,
            source: s,
            message,
        } = event
            && s == source
        {
            out.push((workspace, level, message));
        }
    }
    out
}
