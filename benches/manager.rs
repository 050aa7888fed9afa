//! Workspace manager benchmarks (results in README.md):
//! - cache-hit `get_workspace` (target ≤ 1 µs median), by policy-derived id
//!   and by explicit id, with one cached workspace and with 10,000;
//! - memory of 10,000 cached local workspaces: the RSS delta from
//!   `/proc/self/status`, printed once.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wsbench::backend::Provisioner;
use wsbench::backend::local::LocalProvisioner;
use wsbench::engine::EventBus;
use wsbench::manager::{ManagerOptions, WorkspaceManager};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn manager(dir: &std::path::Path) -> WorkspaceManager {
    let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(dir));
    let opts = ManagerOptions::for_provisioner(prov.as_ref());
    WorkspaceManager::new("bench", prov, opts, EventBus::default())
}

/// Resident set size in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn cache_hit(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = rt.block_on(async { manager(dir.path()) });
    let id = rt.block_on(async {
        m.get_workspace("alice", "coder", "s", None)
            .await
            .unwrap()
            .id()
            .to_string()
    });
    let mut g = c.benchmark_group("manager_cache_hit");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("get_workspace_per_agent", |b| {
        b.to_async(&rt)
            .iter(|| async { m.get_workspace("alice", "coder", "s", None).await.unwrap() })
    });
    g.bench_function("get_workspace_explicit_id", |b| {
        b.to_async(&rt)
            .iter(|| async { m.get_workspace("", "", "", Some(&id)).await.unwrap() })
    });
    g.bench_function("acquire_and_release_lease", |b| {
        b.to_async(&rt)
            .iter(|| async { m.acquire("alice", "coder", "s", None).await.unwrap() })
    });
    g.finish();
    rt.block_on(m.shutdown()).unwrap();
}

fn ten_thousand_cached(c: &mut Criterion) {
    const N: usize = 10_000;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let before = rss_kib();
    let m = rt.block_on(async {
        let m = manager(dir.path());
        for chunk in (0..N).collect::<Vec<_>>().chunks(64) {
            let calls = chunk.iter().map(|i| {
                let m = m.clone();
                let agent = format!("agent-{i}");
                async move { m.get_workspace("user", &agent, "s", None).await.unwrap() }
            });
            futures::future::join_all(calls).await;
        }
        m
    });
    assert_eq!(m.open_ids().len(), N);
    let after = rss_kib();
    let delta = after.saturating_sub(before);
    println!(
        "\nmemory: {N} cached local workspaces: RSS {before} KiB -> {after} KiB, \
         delta {:.1} MiB ({:.2} KiB per workspace)\n",
        delta as f64 / 1024.0,
        delta as f64 / N as f64
    );
    let mut g = c.benchmark_group("manager_cache_hit_10k");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("get_workspace_per_agent", |b| {
        b.to_async(&rt).iter(|| async {
            m.get_workspace("user", "agent-4242", "s", None)
                .await
                .unwrap()
        })
    });
    g.finish();
    rt.block_on(m.shutdown()).unwrap();
}

criterion_group!(benches, cache_hit, ten_thousand_cached);
criterion_main!(benches);
