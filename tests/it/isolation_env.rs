//! Issue 14 point 1: nothing of wsbench's own environment is readable
//! inside a sandbox. The real binary runs with [`leak::VAR`] set only on
//! its process and runs [`leak::script`] through `wsbench exec` on
//! bubblewrap and Docker (the Kubernetes stub and the cloud fakes run the
//! same probe in `k8s_profile.rs` and `cloud_cli.rs`).

use crate::support::{self, cli, images, leak};

use std::path::Path;
use std::process::{Output, Stdio};

/// `wsbench --config <file> --profile <profile> ARGS` with the probe set.
fn run(home: &Path, profile: &str, args: &[&str]) -> Output {
    let mut cmd = cli::wsbench_cmd(home);
    leak::set(&mut cmd)
        .arg("--config")
        .arg(home.join("wsbench.toml"))
        .args(["--profile", profile, "--user", "leak", "--agent", "probe"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn write_config(home: &Path, text: &str) {
    std::fs::write(home.join("wsbench.toml"), text).unwrap();
}

#[test]
fn bubblewrap_does_not_leak_wsbench_environment() {
    if !support::have("bwrap") {
        support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let base = home.path().join("bwrap");
    write_config(
        home.path(),
        &format!(
            "[profiles.box]\nbackend = \"bubblewrap\"\n\n[profiles.box.options]\nbase_dir = \"{}\"\n",
            base.display()
        ),
    );
    let o = run(home.path(), "box", &["exec", "--", &leak::script(true)]);
    leak::assert_clean("bubblewrap", &o);
    // The host side holds no copy either (the workspace dir, the journal).
    let hits = leak::files_holding(&base, leak::VALUE.as_bytes());
    assert!(hits.is_empty(), "probe written to {hits:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_does_not_leak_wsbench_environment() {
    if let Err(why) = images::docker_ready(images::DEBIAN_IMAGE).await {
        support::skip_or_fail(&why);
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let base = home.path().join("docker");
    write_config(
        home.path(),
        &format!(
            "[profiles.leakprobe]\nbackend = \"docker\"\n\n[profiles.leakprobe.options]\nimage = \"{}\"\npull = \"never\"\nnetwork = \"none\"\nbase_dir = \"{}\"\n",
            images::DEBIAN_IMAGE,
            base.display()
        ),
    );
    let h = home.path().to_path_buf();
    let o = tokio::task::spawn_blocking(move || {
        let o = run(&h, "leakprobe", &["exec", "--", &leak::script(true)]);
        // Remove the container whatever the result.
        let created = run(&h, "leakprobe", &["--json", "workspaces", "list"]);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&created.stdout) {
            for w in v["workspaces"].as_array().into_iter().flatten() {
                if let Some(id) = w["id"].as_str() {
                    run(&h, "leakprobe", &["workspaces", "destroy", "--yes", id]);
                }
            }
        }
        o
    })
    .await
    .unwrap();
    leak::assert_clean("docker", &o);
}
