//! Sandboxed-backend benchmarks, each side by side with its baseline in
//! one run (`cargo bench --bench sandboxes`):
//!
//! - cold start to the first successful `Bash true` through the engine:
//!   bubblewrap (target ≤ 50 ms) and Docker with a local image (target
//!   ≤ 1.5 s); local for reference;
//! - exec round trip of `true`: bubblewrap vs a bare `bwrap ... true` with
//!   the same arguments; Docker (bollard) vs `docker exec <c> true` from
//!   the CLI (target: faster than the CLI);
//! - Docker reattach after a restart — a new provisioner and client find
//!   the container by label and run `true` in it (target ≤ 300 ms).
//!
//! A part missing on the machine is reported as `SKIPPED`. Docker uses the
//! locally built `debian:bookworm-slim` (tests/build-test-image.sh), never
//! pulls, and runs with network `none`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapProvisioner, BubblewrapSandbox};
use wsbench::backend::docker::{DockerOptions, DockerProvisioner, PullPolicy, connect};
use wsbench::backend::local::LocalSandbox;
use wsbench::backend::{ExecRequest, ProvisionSpec, Provisioner, Sandbox};
use wsbench::engine::tools::ToolState;
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

const IMAGE: &str = "debian:bookworm-slim";
const PROFILE: &str = "bench";

struct Stats {
    median: Duration,
    p90: Duration,
    min: Duration,
    n: usize,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    Stats {
        median: v[v.len() / 2],
        p90: v[(v.len() * 9 / 10).min(v.len() - 1)],
        min: v[0],
        n: v.len(),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn row(name: &str, s: &Stats, target: &str) {
    println!(
        "{name:<48} median {:>11}  p90 {:>11}  min {:>11}  (n={:>3})  {target}",
        ms(s.median),
        ms(s.p90),
        ms(s.min),
        s.n
    );
}

fn verdict(s: &Stats, limit: Duration) -> String {
    if s.median <= limit {
        format!("target ≤ {}: met", ms(limit))
    } else {
        format!("target ≤ {}: MISSED", ms(limit))
    }
}

async fn bash_true(sb: Arc<dyn Sandbox>) {
    let ws = Workspace::open(sb, WorkspaceConfig::default(), EventBus::default())
        .await
        .expect("workspace opens");
    let r = ws
        .call_tool(ToolCall {
            tool: "Bash".into(),
            session: "bench".into(),
            args: json!({"command": "true"}),
            ..Default::default()
        })
        .await;
    assert_eq!(r.state, ToolState::Success, "{}", r.text());
}

fn spec(id: &str) -> ProvisionSpec {
    ProvisionSpec {
        workspace_id: id.into(),
        labels: BTreeMap::new(),
    }
}

async fn exec_true(sb: &dyn Sandbox) {
    let out = sb.exec(ExecRequest::new(["true"]), None).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
}

async fn local(base: &std::path::Path) {
    let mut cold = Vec::new();
    for i in 0..20 {
        let t = Instant::now();
        let sb = LocalSandbox::open(base.join(format!("local-{i}"))).unwrap();
        bash_true(Arc::new(sb)).await;
        cold.push(t.elapsed());
    }
    row("local: open + first Bash true", &stats(cold), "(reference)");
}

async fn bubblewrap(base: &std::path::Path) {
    if let Err(e) = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
    {
        println!("SKIPPED bubblewrap: {e}");
        return;
    }
    let opts = BubblewrapOptions {
        base_dir: Some(base.join("bwrap")),
        ..Default::default()
    };
    let mut cold = Vec::new();
    for i in 0..20 {
        let t = Instant::now();
        // A new provisioner each time: the start-up probe runs too.
        let prov = BubblewrapProvisioner::new(opts.clone());
        let sb = match prov.create(&spec(&format!("cold-{i}"))).await {
            Ok(sb) => sb,
            Err(e) => {
                println!("SKIPPED bubblewrap: {e}");
                return;
            }
        };
        bash_true(sb).await;
        cold.push(t.elapsed());
    }
    let s = stats(cold);
    row(
        "bwrap: provision + first Bash true (cold)",
        &s,
        &verdict(&s, Duration::from_millis(50)),
    );

    let sb = BubblewrapSandbox::open(base.join("bwrap-rt"), BubblewrapOptions::default()).unwrap();
    let argv = sb.bwrap_argv(&["true".into()], None, &BTreeMap::new());
    let mut ours = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        exec_true(&sb).await;
        ours.push(t.elapsed());
        let t = Instant::now();
        let st = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .status()
            .await
            .unwrap();
        assert!(st.success());
        bare.push(t.elapsed());
    }
    let (o, b) = (stats(ours), stats(bare));
    row("bwrap: Sandbox::exec(true) round trip", &o, "");
    row(
        "bwrap: bare `bwrap <same args> true`",
        &b,
        &format!(
            "ours / bare = {:.2}",
            o.median.as_secs_f64() / b.median.as_secs_f64()
        ),
    );
}

async fn docker(base: &std::path::Path) {
    let ready = async {
        let d = connect(None).await.map_err(|e| e.to_string())?;
        d.inspect_image(IMAGE)
            .await
            .map_err(|e| format!("{IMAGE} missing ({e}); run tests/build-test-image.sh"))?;
        Ok::<_, String>(())
    };
    if let Err(why) = ready.await {
        println!("SKIPPED docker: {why}");
        return;
    }
    let opts = DockerOptions {
        image: IMAGE.into(),
        pull: PullPolicy::Never,
        network: "none".into(),
        base_dir: Some(base.join("docker")),
        ..Default::default()
    };
    let cleanup = DockerProvisioner::new(opts.clone()).with_profile(PROFILE);

    let mut cold = Vec::new();
    for i in 0..5 {
        let id = format!("bench-cold-{i}-{}", std::process::id());
        let t = Instant::now();
        let prov = DockerProvisioner::new(opts.clone()).with_profile(PROFILE);
        let sb = prov.create(&spec(&id)).await.unwrap();
        bash_true(sb).await;
        cold.push(t.elapsed());
        cleanup.destroy(&id).await.unwrap();
    }
    let s = stats(cold);
    row(
        "docker: provision + first Bash true (cold)",
        &s,
        &verdict(&s, Duration::from_millis(1500)),
    );

    let id = format!("bench-rt-{}", std::process::id());
    let prov = DockerProvisioner::new(opts.clone()).with_profile(PROFILE);
    let sb = prov.create(&spec(&id)).await.unwrap();
    let name = prov.container_name(&id);
    let mut ours = Vec::new();
    let mut cli = Vec::new();
    for _ in 0..40 {
        let t = Instant::now();
        exec_true(sb.as_ref()).await;
        ours.push(t.elapsed());
        let t = Instant::now();
        let st = tokio::process::Command::new("docker")
            .args(["exec", &name, "true"])
            .status()
            .await
            .unwrap();
        assert!(st.success());
        cli.push(t.elapsed());
    }
    let (o, c) = (stats(ours), stats(cli));
    row("docker: Sandbox::exec(true) round trip", &o, "");
    row(
        "docker: `docker exec <c> true` (CLI)",
        &c,
        &format!(
            "ours / CLI = {:.2} (target < 1: {})",
            o.median.as_secs_f64() / c.median.as_secs_f64(),
            if o.median < c.median { "met" } else { "MISSED" }
        ),
    );
    drop(sb);
    drop(prov);

    let mut re = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        // A restarted wsbench: new provisioner, new client, find by label.
        let prov = DockerProvisioner::new(opts.clone()).with_profile(PROFILE);
        let sb = prov.provision(&spec(&id)).await.unwrap();
        exec_true(sb.as_ref()).await;
        re.push(t.elapsed());
    }
    let s = stats(re);
    row(
        "docker: reattach after restart + exec true",
        &s,
        &verdict(&s, Duration::from_millis(300)),
    );
    cleanup.destroy(&id).await.unwrap();
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = tempfile::tempdir().unwrap();
    rt.block_on(async {
        println!("sandboxes benchmark (median of n runs; release build)");
        local(base.path()).await;
        bubblewrap(base.path()).await;
        docker(base.path()).await;
    });
}
