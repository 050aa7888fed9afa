//! One-shot commands hold their workspace for their whole run (issue 15
//! trial): `wsbench exec` and `wsbench tool` on a profile with a short TTL
//! and a fast sweep ran longer than TTL + sweep and were killed (rc 137)
//! by their own process's sweeper, which evicted (stopped) the sandbox
//! under the command. Now the command leases the workspace from open to
//! exit, and the lease refreshes this host's last-use stamp, so another
//! process's `workspaces list` sees the workspace in use, not idle past
//! its TTL. Bubblewrap (a sweeper backend, cheap to start).

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::cli;

const TTL_SECS: u64 = 3;

/// A home whose config has a bubblewrap profile `box` with a 3 s TTL and a
/// 500 ms sweep.
fn home() -> tempfile::TempDir {
    home_with("per_agent")
}

/// [`home`] with the profile's isolation policy `isolation`.
fn home_with(isolation: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let conf = home.path().join("config/wsbench");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("config.toml"),
        format!(
            "[profiles.box]\nbackend = \"bubblewrap\"\nttl = \"{TTL_SECS}s\"\n\
             sweep_interval = \"500ms\"\nisolation = \"{isolation}\"\n\n\
             [profiles.box.options]\nbase_dir = \"{}\"\n",
            home.path().join("bwrap").display()
        ),
    )
    .unwrap();
    home
}

fn wsbench(home: &std::path::Path, args: &[&str]) -> Command {
    let mut c = cli::wsbench_cmd(home);
    c.args(["--profile", "box", "--user", "u", "--agent", "a"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[test]
fn one_shot_exec_and_tool_longer_than_ttl_and_sweep_complete() {
    if !crate::support::have("bwrap") {
        crate::support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = home();
    // 7 s of work against a 3 s TTL and a 0.5 s sweep.
    let exec = wsbench(
        home.path(),
        &[
            "exec",
            "--",
            "for i in 1 2 3 4 5 6 7; do echo tick $i; sleep 1; done",
        ],
    )
    .spawn()
    .unwrap();
    let tool = wsbench(
        home.path(),
        &["tool", "Bash", r#"{"command":"sleep 7; echo done"}"#],
    )
    .spawn()
    .unwrap();

    // While both run, past the TTL: another process sees the workspace
    // in use (its idle time refreshed by the leases' stamps).
    std::thread::sleep(Duration::from_secs(TTL_SECS + 1));
    let o = wsbench(home.path(), &["workspaces", "list", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ws = v["workspaces"].as_array().unwrap();
    assert_eq!(ws.len(), 1, "{v}");
    assert_eq!(ws[0]["state"], "running", "{v}");
    let left = ws[0]["ttl_left_secs"].as_f64().expect("TTL left known");
    assert!(left > 0.0, "shown idle past its TTL while in use: {v}");

    let exec = exec.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&exec.stdout);
    let err = String::from_utf8_lossy(&exec.stderr);
    assert_eq!(exec.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("tick 7"), "{out}\n{err}");
    let tool = tool.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&tool.stdout);
    let err = String::from_utf8_lossy(&tool.stderr);
    assert_eq!(tool.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("done"), "{out}\n{err}");
    assert!(!out.contains("137"), "{out}");
}

/// `workspaces close` of a bubblewrap workspace lists it as `closed`
/// (a host directory, like local), not `suspended`.
#[test]
fn a_closed_bubblewrap_workspace_lists_as_closed() {
    if !crate::support::have("bwrap") {
        crate::support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = home();
    let o = wsbench(home.path(), &["exec", "--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = || -> Value {
        let o = wsbench(home.path(), &["workspaces", "list", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v = list();
    let id = v["workspaces"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(v["workspaces"][0]["state"], "running", "{v}");
    let o = wsbench(home.path(), &["workspaces", "close", &id])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = list();
    assert_eq!(v["workspaces"][0]["state"], "closed", "{v}");
    assert_eq!(v["workspaces"][0]["open"], false, "{v}");
    let o = wsbench(home.path(), &["workspaces", "list"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&id) && l.contains(" closed ")),
        "{table}"
    );

    // Closed from the CLI while a long-lived process of this host works
    // in it: listed as running while it holds it, closed once it quits
    // (it suspends at exit).
    let mut serve = wsbench(home.path(), &["mcp", "serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while list()["workspaces"][0]["state"] != "running" {
        assert!(
            std::time::Instant::now() < deadline,
            "mcp serve never opened it"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let o = wsbench(home.path(), &["workspaces", "close", &id])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = list();
    assert_eq!(
        v["workspaces"][0]["state"], "running",
        "held by mcp serve: {v}"
    );
    // Its client goes away (before any handshake: exit 1, which is
    // beside the point here); it closes what it held either way.
    drop(serve.stdin.take());
    serve.wait().unwrap();
    let v = list();
    assert_eq!(
        v["workspaces"][0]["state"], "closed",
        "after mcp serve quit: {v}"
    );
}

/// A one-shot command whose workspace lost its sandbox (the bubblewrap
/// host directory removed between two runs) says so on stderr when the
/// open makes a new one, before the command's own output (issue 15
/// trial: only `cat: d.txt: No such file` was printed).
#[test]
fn a_one_shot_command_on_a_lost_workspace_prints_the_notice() {
    lost_workspace_notice("per_agent");
}

/// The same under per_session: the session moves to a new workspace (its
/// old one no longer answers its labels) and the notice says so.
#[test]
fn a_one_shot_command_on_a_lost_per_session_workspace_prints_the_notice() {
    lost_workspace_notice("per_session");
}

fn lost_workspace_notice(isolation: &str) {
    if !crate::support::have("bwrap") {
        crate::support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = home_with(isolation);
    let o = wsbench(home.path(), &["exec", "--", "echo d > d.txt"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("notice:"),
        "first use is no loss"
    );
    let o = wsbench(home.path(), &["workspaces", "list", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = &v["workspaces"][0];
    let (id, dir) = (w["id"].as_str().unwrap(), w["location"].as_str().unwrap());
    std::fs::remove_dir_all(dir).unwrap();

    let o = wsbench(home.path(), &["exec", "--", "cat d.txt"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // per_session finds a session's workspace by its labels, which a
    // removed directory no longer answers for: the session moves to a new
    // workspace, and that is what is said.
    let want = if isolation == "per_session" {
        format!(
            "notice: the bubblewrap workspace directory of session `default` (workspace {id}, profile `box`) was removed (outside wsbench): the session now uses a new, empty workspace "
        )
    } else {
        format!(
            "notice: the bubblewrap workspace directory of workspace {id} (profile `box`) was removed (outside wsbench): a new, empty one was created; files from the old one are lost"
        )
    };
    assert!(err.contains(&want), "{err}");
    // Said once: the next run is a plain one.
    let o = wsbench(home.path(), &["exec", "--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(!String::from_utf8_lossy(&o.stderr).contains("notice:"));
}

/// `mcp serve` holding a bubblewrap workspace whose host directory is
/// removed: `cat f.txt` is not repeated on the new, empty directory (it
/// would answer `No such file` as if nothing happened); it fails once
/// (`isError`) with the notice, and the notice is a warning in the log
/// file too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_says_the_files_were_lost_instead_of_repeating_the_call() {
    if !crate::support::have("bwrap") {
        crate::support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = home();
    let log = home.path().join("serve.log");
    let mut cmd = cli::wsbench_tokio_cmd(home.path());
    cmd.args(["--profile", "box", "--user", "u", "--agent", "a"])
        .env("WSBENCH_LOG_FILE", &log);
    let mut s = crate::support::mcp_serve::Served::start_cmd(cmd).await;
    let bash = |id: u64, command: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "Bash", "arguments": {"command": command}}})
    };
    s.send(&bash(2, "echo kept > f.txt")).await;
    let a = s.answers(1).await.remove(0);
    assert_eq!(a["result"]["isError"], false, "{a}");
    let base = home.path().join("bwrap");
    let dirs: Vec<_> = walk_workspace_dirs(&base);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    std::fs::remove_dir_all(&dirs[0]).unwrap();

    s.send(&bash(3, "cat f.txt")).await;
    let a = s.answers(1).await.remove(0);
    let text = a["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert!(
        text.contains("the workspace directory was removed; a new one was created; files from the old one are lost; this call was not repeated"),
        "{a}"
    );
    // The next call runs on the new directory, as any other.
    s.send(&bash(4, "echo again")).await;
    let a = s.answers(1).await.remove(0);
    assert_eq!(a["result"]["isError"], false, "{a}");
    s.finish().await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains("files from the old one are lost") && logged.contains("WARN"),
        "{logged}"
    );
}

/// The workspace directories under a bubblewrap base (those holding the
/// layout's `skills` folder), at most three levels down.
fn walk_workspace_dirs(base: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(base.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        if d.join("skills").is_dir() {
            out.push(d);
            continue;
        }
        if depth < 3
            && let Ok(rd) = std::fs::read_dir(&d)
        {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
    out
}

/// Docker with `storage = "ephemeral"`: `docker rm -f` of the container
/// between two one-shot commands; the second says the container is gone
/// and its files lost before its own `No such file` (issue 15 trial).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_command_after_docker_rm_prints_the_notice() {
    if let Err(why) =
        crate::support::images::docker_ready(crate::support::images::DEBIAN_IMAGE).await
    {
        crate::support::skip_or_fail(&why);
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let conf = home.path().join("config/wsbench");
    std::fs::create_dir_all(&conf).unwrap();
    let profile = format!("eph{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    std::fs::write(
        conf.join("config.toml"),
        format!(
            "[profiles.{profile}]\nbackend = \"docker\"\n\n[profiles.{profile}.options]\n\
             image = \"{}\"\npull = \"never\"\nnetwork = \"none\"\nstorage = \"ephemeral\"\n",
            crate::support::images::DEBIAN_IMAGE
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let mut c = cli::wsbench_cmd(home.path());
        c.args(["--profile", &profile, "--user", "u", "--agent", "a"])
            .args(args)
            .stdin(Stdio::null());
        c.output().unwrap()
    };
    let o = run(&["exec", "--", "echo d > d.txt"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&run(&["workspaces", "list", "--json"]).stdout).unwrap();
    let w = &v["workspaces"][0];
    let (id, container) = (
        w["id"].as_str().unwrap().to_string(),
        w["location"].as_str().unwrap().to_string(),
    );
    let docker = wsbench::backend::docker::connect(None).await.unwrap();
    docker
        .remove_container(
            &container,
            Some(bollard::query_parameters::RemoveContainerOptions {
                force: true,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let o = run(&["exec", "--", "cat d.txt"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let want = format!(
        "notice: the docker container of workspace {id} (profile `{profile}`) is gone (removed outside wsbench): a new, empty one was created; files from the old one are lost"
    );
    let destroyed = run(&["workspaces", "destroy", &id, "--yes"]);
    assert!(err.contains(&want), "{err}");
    assert!(destroyed.status.success());
}
