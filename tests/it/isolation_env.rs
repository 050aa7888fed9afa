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
    // Nor the host's name: the UTS namespace has its own.
    let o = run(
        home.path(),
        "box",
        &["exec", "--", "cat /proc/sys/kernel/hostname"],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "wsbench-bwrap",
        "{o:?}"
    );
}

#[test]
fn bubblewrap_shows_no_host_path_in_any_cmdline_or_environ() {
    // bwrap is PID 1 inside: its command line held the host paths of the
    // workspace, the private /tmp and the binds (issue 14, newcomer trial).
    if !support::have("bwrap") {
        support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let base = home.path().join("bwrap");
    // A read-only bind of a host directory at its own path: that path is
    // visible by design; the workspace's host path must not be.
    let extra = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        &format!(
            "[profiles.box]\nbackend = \"bubblewrap\"\n\n[profiles.box.options]\nbase_dir = \"{}\"\nro_binds = [\"{}\"]\n",
            base.display(),
            extra.path().display()
        ),
    );
    let scan = "echo scan-start; for p in /proc/[0-9]*; do echo \"== $p\"; tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; tr '\\0' '\\n' < $p/environ 2>/dev/null; done; echo scan-end";
    let o = run(home.path(), "box", &["exec", "--", scan]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("scan-start") && out.contains("scan-end") && out.contains("== /proc/1"),
        "the scan did not run: {o:?}"
    );
    let home_s = home.path().display().to_string();
    for (what, needle) in [
        ("the workspace's host path", home_s.as_str()),
        ("the private /tmp's host path", "wsbench-bwrap-tmp-"),
        ("a bwrap option", "--bind"),
        ("a bwrap option", "--setenv"),
        ("wsbench's environment", leak::VALUE),
    ] {
        assert!(
            !out.contains(needle),
            "{what} ({needle}) is readable inside:\n{out}"
        );
    }
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

/// `wsbench exec` of a probe printing the command's ignored-signal mask,
/// with wsbench itself started as `nohup` or a script's `&` start it:
/// HUP, INT and QUIT ignored.
fn ignored_signals_inside(home: &Path, profile: &[&str]) -> String {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = cli::wsbench_cmd(home);
    cmd.args(profile)
        .args(["exec", "--", "grep SigIgn /proc/self/status"])
        .stdin(Stdio::null());
    // SAFETY: `signal` is async-signal-safe; nothing else runs here.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    let hex = text
        .trim()
        .strip_prefix("SigIgn:")
        .unwrap_or_else(|| panic!("{o:?}"));
    // Signals 32 and 33 (bits 31 and 32) are the C library's own and
    // refuse a change from user code; only the others count.
    let mask = u64::from_str_radix(hex.trim(), 16).unwrap() & !(0b11 << 31);
    format!("{mask:#x}")
}

#[test]
fn signals_ignored_by_wsbench_s_parent_are_not_ignored_inside() {
    // A wsbench under `nohup` or started with `&` by a script gave every
    // command SIGINT ignored, so Ctrl-C in the Command pane did nothing
    // (the CI failures of the ctrl-c tests).
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let local = ["--workdir".to_string(), work.path().display().to_string()];
    let local: Vec<&str> = local.iter().map(String::as_str).collect();
    assert_eq!(ignored_signals_inside(home.path(), &local), "0x0", "local");
    if !support::have("bwrap") {
        support::skip_or_fail("bwrap is not installed");
        return;
    }
    let base = home.path().join("bwrap");
    write_config(
        home.path(),
        &format!(
            "[profiles.box]\nbackend = \"bubblewrap\"\n\n[profiles.box.options]\nbase_dir = \"{}\"\n",
            base.display()
        ),
    );
    let config = home.path().join("wsbench.toml").display().to_string();
    assert_eq!(
        ignored_signals_inside(home.path(), &["--config", &config, "--profile", "box"]),
        "0x0",
        "bubblewrap"
    );
}
