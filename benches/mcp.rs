//! MCP client benchmarks (criterion):
//!
//! * `mcp_call/wsbench` vs `mcp_call/python_sdk`: one `tools/call` round
//!   trip to the same stdio server (`tests/mcp_servers/fake.py`, `echo`),
//!   from wsbench's rmcp client (through the backend's process API and
//!   the line filter) and from the Python `mcp` SDK client, in the same
//!   run. Target: wsbench within 1.5× of Python, or better.
//! * `mcp_connect/wsbench` vs `mcp_connect/python_sdk`: spawn, initialize
//!   and list tools.
//! * Memory of 40 live servers' client state: resident memory of this
//!   process before and after connecting 40 stdio servers (the servers
//!   are separate processes and not counted), printed before the timings.
//!
//! The Python side is skipped (with a note) when no Python with `mcp` is
//! found (`WSBENCH_MCP_PYTHON`, else `~/.cache/wsbench-ci/venv`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::mcp::{McpDecl, McpOptions};
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};

fn fake_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp_servers/fake.py")
        .display()
        .to_string()
}

fn client_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp_servers/client.py")
        .display()
        .to_string()
}

fn mcp_python() -> Option<PathBuf> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("WSBENCH_MCP_PYTHON") {
        cands.push(p.into());
    }
    if let Some(h) = std::env::var_os("HOME") {
        cands.push(PathBuf::from(h).join(".cache/wsbench-ci/venv/bin/python"));
    }
    cands.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import mcp"])
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Runs the Python client: connect, then `n` echo calls; returns
/// (connect time, total call time).
fn python_run(py: &Path, n: u64) -> (Duration, Duration) {
    let out = Command::new(py)
        .arg(client_script())
        .args(["bench", &n.to_string(), "echo", r#"{"text":"ping"}"#, "--"])
        .args(["python3", &fake_server()])
        .output()
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls: f64 = v["call_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .sum();
    (
        Duration::from_secs_f64(v["connect_s"].as_f64().unwrap()),
        Duration::from_secs_f64(calls),
    )
}

fn decl(name: &str) -> McpDecl {
    McpDecl::stdio(name, "python3", vec![fake_server()])
}

async fn workspace(dir: &Path) -> Arc<Workspace> {
    let sb = LocalSandbox::open(dir).unwrap();
    Workspace::open(
        Arc::new(sb),
        WorkspaceConfig {
            default_mcps: vec![decl("bench")],
            ..Default::default()
        },
        EventBus::default(),
    )
    .await
    .unwrap()
}

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

fn memory_of_40(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let ws = workspace(dir.path()).await;
        ws.mcp().set_options(McpOptions {
            max_live_stateful: Some(40),
            ..Default::default()
        });
        // Warm up allocator and runtime with one pair first.
        ws.mcp().list("a", "warm").await.unwrap();
        let before = rss_kib();
        let mut handles = Vec::new();
        for i in 0..39 {
            let ws = ws.clone();
            handles.push(tokio::spawn(async move {
                ws.mcp().list("a", &format!("s{i}")).await.unwrap()
            }));
        }
        for h in handles {
            let l = h.await.unwrap();
            assert!(l.servers[0].state.is_ready(), "{l:?}");
        }
        let after = rss_kib();
        assert_eq!(ws.mcp().runtime().live_stateful(), 40);
        println!(
            "mcp memory: 40 live stdio servers' client state: RSS {} KiB -> {} KiB \
             (+{} KiB for 39 more, ~{} KiB each)",
            before,
            after,
            after.saturating_sub(before),
            after.saturating_sub(before) / 39
        );
        ws.close().await;
    });
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    memory_of_40(&rt);
    let py = mcp_python();
    if py.is_none() {
        println!("mcp: no Python with the `mcp` SDK; the python_sdk baselines are skipped");
    }

    let dir = tempfile::tempdir().unwrap();
    let ws = rt.block_on(workspace(dir.path()));
    let inst = rt.block_on(async {
        ws.mcp().list("a", "s").await.unwrap();
        ws.mcp().instance("a", "s", "bench").await.unwrap()
    });
    let args = json!({"text": "ping"}).as_object().unwrap().clone();

    let mut g = c.benchmark_group("mcp_call");
    g.measurement_time(Duration::from_secs(8));
    g.bench_function("wsbench", |b| {
        b.to_async(&rt).iter(|| {
            let inst = inst.clone();
            let args = args.clone();
            async move {
                let r = inst.call("echo", args, Default::default()).await.unwrap();
                assert_eq!(r.content.len(), 1);
            }
        })
    });
    if let Some(py) = &py {
        g.bench_function("python_sdk", |b| {
            b.iter_custom(|iters| python_run(py, iters).1)
        });
    }
    g.finish();

    let mut g = c.benchmark_group("mcp_connect");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("wsbench", |b| {
        b.to_async(&rt).iter(|| {
            let ws = ws.clone();
            async move {
                let st = ws.mcp().restart("a", "s", "bench").await.unwrap();
                assert!(st.state.is_ready());
            }
        })
    });
    if let Some(py) = &py {
        g.bench_function("python_sdk", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| python_run(py, 1).0).sum())
        });
    }
    g.finish();
    rt.block_on(ws.close());
}

criterion_group!(mcp, benches);
criterion_main!(mcp);
