//! wsbench's side of the side-by-side benchmark (issue 18): one case per
//! run, timed in-process, its median printed as one JSON line. The driver
//! `benches/side_by_side/run.py` runs these interleaved with the
//! reference's cases (`reference.py`) and the floors; see its README.
//!
//! Usage: `side_by_side <case> <iterations> <scratch dir>`. Cases named
//! `floor_*` are the physical floor of the row (std only, no wsbench).
//! Not run by `cargo test` (bench targets are not) nor by CI.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wsbench::backend::Sandbox;
use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapSandbox};
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::message::{ToolOutput, ToolResultBlock};
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

/// 1 MiB of text in 2,000 lines (the Read and Edit rows).
fn big_text() -> String {
    let line = "x".repeat((1 << 20) / 2000 - 8);
    (0..2000).map(|i| format!("{i:06} {line}\n")).collect()
}

async fn open(sb: Arc<dyn Sandbox>) -> Arc<Workspace> {
    Workspace::open(sb, WorkspaceConfig::default(), EventBus::default())
        .await
        .expect("workspace opens")
}

async fn tool(ws: &Workspace, name: &str, args: Value) {
    let r = ws
        .call_tool(ToolCall {
            tool: name.into(),
            session: "sbs".into(),
            args,
            ..Default::default()
        })
        .await;
    assert!(r.is_success(), "{name}: {}", r.text());
}

/// Times `iters` runs of `one(i)`; `prep(i)` runs untimed before each.
async fn timed<P, F, Fut>(iters: usize, mut prep: P, mut one: F) -> Vec<Duration>
where
    P: FnMut(usize),
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut out = Vec::with_capacity(iters);
    for i in 0..iters {
        prep(i);
        let t = Instant::now();
        one(i).await;
        out.push(t.elapsed());
    }
    out
}

fn rm(p: &Path) {
    let _ = std::fs::remove_file(p);
}

async fn run(case: &str, iters: usize, dir: &Path) -> Vec<Duration> {
    let text = big_text();
    let local = || -> Arc<dyn Sandbox> { Arc::new(LocalSandbox::open(dir).unwrap()) };
    let file = |i: usize| -> PathBuf { dir.join(format!("f{}.txt", i % 2)) };
    match case {
        "floor_write_1mib" => {
            timed(
                iters,
                |i| rm(&file(i)),
                |i| {
                    std::fs::write(file(i), &text).unwrap();
                    async {}
                },
            )
            .await
        }
        "write_new_1mib" => {
            let ws = open(local()).await;
            timed(
                iters,
                |i| rm(&file(i)),
                |i| {
                    let args = json!({"file_path": file(i), "content": text});
                    let ws = ws.clone();
                    async move { tool(&ws, "Write", args).await }
                },
            )
            .await
        }
        "floor_edit_1mib" | "edit_1mib" => {
            let p = dir.join("edit.txt");
            std::fs::write(&p, &text).unwrap();
            let ws = open(local()).await;
            let swap = |i: usize| {
                if i.is_multiple_of(2) {
                    ("001000 x", "001000 y")
                } else {
                    ("001000 y", "001000 x")
                }
            };
            if case == "floor_edit_1mib" {
                timed(
                    iters,
                    |_| {},
                    |i| {
                        let (a, b) = swap(i);
                        let s = std::fs::read_to_string(&p).unwrap();
                        std::fs::write(&p, s.replacen(a, b, 1)).unwrap();
                        async {}
                    },
                )
                .await
            } else {
                timed(
                    iters,
                    |_| {},
                    |i| {
                        let (a, b) = swap(i);
                        let args = json!({"file_path": p, "old_string": a, "new_string": b});
                        let ws = ws.clone();
                        async move { tool(&ws, "Edit", args).await }
                    },
                )
                .await
            }
        }
        "offload_1mib" => {
            let ws = open(local()).await;
            let block = ToolResultBlock {
                id: "big".into(),
                name: "Bash".into(),
                output: ToolOutput::Text(text.clone()),
                state: "success".into(),
                metadata: Value::Null,
                extra: Default::default(),
            };
            let session = dir.join("sessions/sbs");
            timed(
                iters,
                |_| {
                    // Last round's file, outside the timed part.
                    for e in std::fs::read_dir(&session).into_iter().flatten().flatten() {
                        if e.file_name().to_string_lossy().starts_with("tool_result-") {
                            rm(&e.path());
                        }
                    }
                },
                |_| {
                    let ws = ws.clone();
                    let block = &block;
                    async move {
                        ws.offload().tool_result("sbs", block).await.unwrap();
                    }
                },
            )
            .await
        }
        "floor_read_1mib" => {
            let p = dir.join("read.txt");
            std::fs::write(&p, &text).unwrap();
            timed(
                iters,
                |_| {},
                |_| {
                    let b = std::fs::read(&p).unwrap();
                    assert_eq!(b.len(), text.len());
                    async {}
                },
            )
            .await
        }
        "read_1mib" => {
            let p = dir.join("read.txt");
            std::fs::write(&p, &text).unwrap();
            let ws = open(local()).await;
            timed(
                iters,
                |_| {},
                |_| {
                    let ws = ws.clone();
                    let args = json!({"file_path": p});
                    async move { tool(&ws, "Read", args).await }
                },
            )
            .await
        }
        "floor_spawn_sh" => {
            timed(
                iters,
                |_| {},
                |_| {
                    // std spawns with posix_spawn here (no pre_exec, no ids).
                    let st = std::process::Command::new("/bin/sh")
                        .args(["-c", "true"])
                        .status()
                        .unwrap();
                    assert!(st.success());
                    async {}
                },
            )
            .await
        }
        "floor_bwrap" => {
            // The reference's command line (docs/contract.md §7.2) with
            // `true`: the bare cost of one sandbox.
            let argv = reference_bwrap_argv(dir);
            timed(
                iters,
                |_| {},
                |_| {
                    let st = std::process::Command::new(&argv[0])
                        .args(&argv[1..])
                        .status()
                        .unwrap();
                    assert!(st.success());
                    async {}
                },
            )
            .await
        }
        "bash_local" | "bash_bwrap" | "bash_bwrap_share_net" => {
            let sb: Arc<dyn Sandbox> = if case == "bash_local" {
                local()
            } else {
                // Default: no network (a new network namespace per
                // command); `share_net` is the reference's setting.
                let opts = BubblewrapOptions {
                    share_net: case == "bash_bwrap_share_net",
                    ..Default::default()
                };
                Arc::new(BubblewrapSandbox::open(dir, opts).unwrap())
            };
            let ws = open(sb).await;
            timed(
                iters,
                |_| {},
                |_| {
                    let ws = ws.clone();
                    async move { tool(&ws, "Bash", json!({"command": "true"})).await }
                },
            )
            .await
        }
        other => panic!("unknown case {other}"),
    }
}

/// `bwrap` with the reference's arguments, in its order, running `true`.
fn reference_bwrap_argv(dir: &Path) -> Vec<String> {
    let (w, t) = (dir.join("w"), dir.join("t"));
    std::fs::create_dir_all(&w).unwrap();
    std::fs::create_dir_all(&t).unwrap();
    let mut a: Vec<String> = [
        "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        &w.display().to_string(),
        "/workspace",
        "--bind",
        &t.display().to_string(),
        "/tmp",
        "--tmpfs",
        "/run",
        "--dir",
        "/var",
        "--tmpfs",
        "/var/tmp",
        "--share-net",
        "--ro-bind",
        "/usr",
        "/usr",
        "--dir",
        "/etc",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for p in [
        "/etc/resolv.conf",
        "/etc/hosts",
        "/etc/nsswitch.conf",
        "/etc/passwd",
        "/etc/group",
        "/etc/alternatives",
        "/etc/ssl",
        "/etc/pki",
        "/etc/ca-certificates",
    ] {
        if Path::new(p).exists() {
            a.extend(["--ro-bind".into(), p.into(), p.into()]);
        }
    }
    for d in ["/bin", "/sbin", "/lib", "/lib64"] {
        match std::fs::read_link(d) {
            Ok(t) => a.extend(["--symlink".into(), t.display().to_string(), d.into()]),
            Err(_) if Path::new(d).is_dir() => a.extend(["--ro-bind".into(), d.into(), d.into()]),
            Err(_) => {}
        }
    }
    a.extend(
        [
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--chdir",
            "/workspace",
            "--",
        ]
        .map(String::from),
    );
    a.extend(["/bin/sh", "-c", "true"].map(String::from));
    a
}

fn main() {
    // `cargo bench` passes `--bench`; only the positional words count.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [case, iters, dir] = args.as_slice() else {
        eprintln!("usage: side_by_side <case> <iterations> <scratch dir>");
        std::process::exit(2);
    };
    let iters: usize = iters.parse().expect("iterations");
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut samples = rt.block_on(run(case, iters, &dir));
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{}",
        json!({
            "case": case,
            "n": samples.len(),
            "median_ms": ms(samples[samples.len() / 2]),
            "min_ms": ms(samples[0]),
        })
    );
}
