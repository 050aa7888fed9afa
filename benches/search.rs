//! Glob and Grep (in-process, ripgrep's crates) against the `rg` binary on
//! the same tree, side by side.
//!
//! Corpus: the crate sources under `~/.cargo/registry/src` when present
//! (thousands of real files), else a generated 20,000-file tree in a temp
//! directory. Both sides use the same walking rules (hidden files, ignore
//! files without git, VCS directories excluded); before timing, the bench
//! asserts that both list the same files and counts.
//!
//! Run: `cargo bench --bench search` (`rg` must be on PATH; the bench
//! prints `SKIPPED:` otherwise).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use wsbench::backend::local::LocalSandbox;
use wsbench::engine::tools::glob::Glob;
use wsbench::engine::tools::grep::Grep;
use wsbench::engine::tools::walk::rg_walk_args;
use wsbench::engine::tools::{Tool, ToolContext, ToolState};
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};

const REGEX: &str = r"fn\s+\w+_test";

fn registry_src() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry/src");
    let non_empty = std::fs::read_dir(&src).ok()?.next().is_some();
    non_empty.then(|| std::fs::canonicalize(&src).unwrap_or(src))
}

/// 200 directories x 100 files, a quarter of them Rust with a test fn.
fn generate(dir: &Path) {
    for d in 0..200 {
        let sub = dir.join(format!("pkg{d:03}/src"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            let (name, body) = if f % 4 == 0 {
                (
                    format!("m{f}.rs"),
                    format!("fn helper_{f}() {{}}\n#[test]\nfn case_{f}_test() {{}}\n"),
                )
            } else {
                (
                    format!("n{f}.txt"),
                    format!("plain text {f}\nnothing here\n"),
                )
            };
            std::fs::write(sub.join(name), body).unwrap();
        }
    }
}

async fn run_tool(ws: &Workspace, tool: &dyn Tool, args: Value) -> String {
    let ctx = ToolContext {
        env: ws.tool_env(),
        agent: "",
        session: "bench",
        call_id: "bench",
        cancel: CancellationToken::new(),
        output: None,
        bash: Default::default(),
    };
    let r = tool.call(&ctx, args).await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
    r.text()
}

fn rg(args: &[&str], corpus: &Path) -> String {
    let mut cmd = Command::new("rg");
    cmd.args(rg_walk_args()).args(args).arg("--").arg(corpus);
    let out = cmd.output().expect("rg runs");
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "rg failed: {out:?}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn set(text: &str) -> BTreeSet<String> {
    text.lines().map(str::to_string).collect()
}

fn bench(c: &mut Criterion) {
    if Command::new("rg").arg("--version").output().is_err() {
        println!("SKIPPED: search bench: ripgrep (`rg`) is not on PATH");
        return;
    }
    let generated = tempfile::tempdir().unwrap();
    let corpus = match registry_src() {
        Some(p) => p,
        None => {
            generate(generated.path());
            std::fs::canonicalize(generated.path()).unwrap()
        }
    };
    let wsdir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let ws: Arc<Workspace> = rt.block_on(async {
        Workspace::open(
            Arc::new(LocalSandbox::open(wsdir.path()).unwrap()),
            WorkspaceConfig::default(),
            EventBus::default(),
        )
        .await
        .unwrap()
    });
    let corpus_s = corpus.to_string_lossy().into_owned();
    let glob_args = json!({"pattern": "**/*.rs", "path": corpus_s, "head_limit": 0});
    let grep_args =
        json!({"pattern": REGEX, "path": corpus_s, "output_mode": "count", "head_limit": 0});

    // Same answers first (outside the timed loops).
    let ours = rt.block_on(run_tool(&ws, &Glob, glob_args.clone()));
    let theirs = rg(&["--files", "-g", "*.rs"], &corpus);
    assert_eq!(
        set(&ours),
        set(&theirs),
        "Glob and rg --files list different files"
    );
    let ours_grep = rt.block_on(run_tool(&ws, &Grep, grep_args.clone()));
    let theirs_grep = rg(&["--sort", "path", "-c", REGEX], &corpus);
    assert_eq!(ours_grep, theirs_grep.trim_end(), "Grep and rg -c disagree");
    let total: u64 = ours_grep
        .lines()
        .filter_map(|l| l.rsplit_once(':')?.1.parse::<u64>().ok())
        .sum();
    println!(
        "corpus {}: {} .rs files; `{REGEX}` matches {total} lines in {} files (identical for both)",
        corpus.display(),
        set(&ours).len(),
        ours_grep.lines().count()
    );

    let mut g = c.benchmark_group("glob **/*.rs");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("wsbench Glob (in-process)", |b| {
        b.to_async(&rt)
            .iter(|| run_tool(&ws, &Glob, glob_args.clone()))
    });
    g.bench_function("rg --files -g '*.rs'", |b| {
        b.iter(|| rg(&["--files", "-g", "*.rs"], &corpus))
    });
    g.finish();

    let mut g = c.benchmark_group("grep count");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("wsbench Grep count (in-process)", |b| {
        b.to_async(&rt)
            .iter(|| run_tool(&ws, &Grep, grep_args.clone()))
    });
    g.bench_function("rg -c (unsorted)", |b| {
        b.iter(|| rg(&["-c", REGEX], &corpus))
    });
    g.bench_function("rg -c --sort path (reference)", |b| {
        b.iter(|| rg(&["--sort", "path", "-c", REGEX], &corpus))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
