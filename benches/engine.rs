//! Engine benchmarks, each measured side by side with its baseline in one
//! run (results in README.md):
//! - Bash `true` round trip through the engine vs a bare fork/exec of
//!   `/bin/true` (target ≤ 1.5×);
//! - offload of a 1 MB tool result (target < 5 ms);
//! - append of one message to a 100 MB context.jsonl vs to an empty one
//!   (target: independent of the file's size).

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::message::{Msg, ToolOutput, ToolResultBlock};
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn workspace(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> Arc<Workspace> {
    rt.block_on(async {
        Workspace::open(
            Arc::new(LocalSandbox::open(dir).unwrap()),
            WorkspaceConfig::default(),
            EventBus::default(),
        )
        .await
        .unwrap()
    })
}

fn bash_round_trip(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&rt, dir.path());
    let mut g = c.benchmark_group("bash_true");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("fork_exec_bin_true", |b| {
        b.iter(|| {
            let s = std::process::Command::new("/bin/true").status().unwrap();
            assert!(s.success());
        })
    });
    // The cost of the local backend's subreaper hook (issue 14): the same
    // spawn of `/bin/true` in its own process group, without a `pre_exec`
    // hook (std's posix_spawn/vfork path) and with the one-`prctl` hook
    // the local backend adds (std then forks).
    g.bench_function("spawn_true_no_hook", |b| {
        b.to_async(&rt).iter(|| async {
            let mut cmd = tokio::process::Command::new("/bin/true");
            cmd.process_group(0);
            assert!(cmd.status().await.unwrap().success());
        })
    });
    g.bench_function("spawn_true_subreaper_hook", |b| {
        b.to_async(&rt).iter(|| async {
            let mut cmd = tokio::process::Command::new("/bin/true");
            cmd.process_group(0);
            // SAFETY: only `prctl` runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
                    Ok(())
                });
            }
            assert!(cmd.status().await.unwrap().success());
        })
    });
    g.bench_function("engine_bash_tool", |b| {
        b.to_async(&rt).iter(|| async {
            let r = ws
                .call_tool(ToolCall {
                    tool: "Bash".into(),
                    session: "bench".into(),
                    args: json!({"command": "true"}),
                    ..Default::default()
                })
                .await;
            assert!(r.is_success());
        })
    });
    g.finish();
}

fn offload(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&rt, dir.path());
    let block = ToolResultBlock {
        id: "big".into(),
        name: "Bash".into(),
        output: ToolOutput::Text("x".repeat(1 << 20)),
        state: "success".into(),
        metadata: serde_json::Value::Null,
        extra: Default::default(),
    };
    let mut g = c.benchmark_group("offload");
    // Each file is deleted outside the timed part: otherwise the run
    // writes gigabytes and measures the disk's writeback, not the offload.
    g.bench_function("tool_result_1mb", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let ws = ws.clone();
            let block = block.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t0 = std::time::Instant::now();
                    let path = ws.offload().tool_result("bench", &block).await.unwrap();
                    total += t0.elapsed();
                    std::fs::remove_file(path).unwrap();
                }
                total
            }
        })
    });
    // Keep the session dir from growing without bound between groups.
    let _ = std::fs::remove_dir_all(dir.path().join("sessions/bench"));

    let msg = Msg::text("user", "user", "one more message appended to the context");
    let session_big = "big";
    let big = dir.path().join("sessions/big/context.jsonl");
    std::fs::create_dir_all(big.parent().unwrap()).unwrap();
    {
        use std::io::Write;
        let line =
            serde_json::to_string(&Msg::text("user", "user", "y".repeat(1000))).unwrap() + "\n";
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        while f.get_ref().metadata().unwrap().len() < 100 << 20 {
            for _ in 0..1000 {
                f.write_all(line.as_bytes()).unwrap();
            }
            f.flush().unwrap();
        }
    }
    g.bench_function("append_context_to_empty_file", |b| {
        b.to_async(&rt).iter(|| async {
            ws.offload()
                .context("small", std::slice::from_ref(&msg))
                .await
                .unwrap();
        })
    });
    g.bench_function("append_context_to_100mb_file", |b| {
        b.to_async(&rt).iter(|| async {
            ws.offload()
                .context(session_big, std::slice::from_ref(&msg))
                .await
                .unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, bash_round_trip, offload);
criterion_main!(benches);
