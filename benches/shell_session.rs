//! `true` through a session shell vs a fresh `/bin/sh -c true` exec, on
//! local and bubblewrap (issue 17; targets: ≤ 0.3 ms per command on
//! local, ≥ 3× faster than a fresh exec on bubblewrap). Run with
//! `cargo bench --bench shell_session`; bubblewrap is skipped (printed)
//! when the host cannot build its sandbox.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapSandbox};
use wsbench::backend::local::LocalSandbox;
use wsbench::backend::{ExecRequest, Sandbox};
use wsbench::engine::shell_session::{RunRequest, ShellOptions, ShellSession};

fn pair(c: &mut Criterion, rt: &tokio::runtime::Runtime, name: &str, sb: Arc<dyn Sandbox>) {
    let shell = ShellSession::new(sb.clone(), ShellOptions::default());
    let mut g = c.benchmark_group(format!("true/{name}"));
    g.bench_function("session_shell", |b| {
        b.to_async(rt).iter(|| async {
            let req = RunRequest {
                command: "true".into(),
                ..Default::default()
            };
            let o = shell.run(req, None).await.unwrap();
            assert_eq!(o.exec.exit_code, Some(0));
        })
    });
    g.bench_function("fresh_exec", |b| {
        b.to_async(rt).iter(|| async {
            let o = sb.exec(ExecRequest::shell("true"), None).await.unwrap();
            assert_eq!(o.exit_code, Some(0));
        })
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn Sandbox> = Arc::new(LocalSandbox::open(dir.path().join("l")).unwrap());
    pair(c, &rt, "local", local);
    let bw = BubblewrapSandbox::open(dir.path().join("b"), BubblewrapOptions::default()).unwrap();
    match rt.block_on(bw.probe()) {
        Ok(()) => pair(c, &rt, "bubblewrap", Arc::new(bw)),
        Err(e) => println!("SKIPPED bubblewrap: {e}"),
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
