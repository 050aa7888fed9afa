//! Lost updates (issue 14 point 7): 50 concurrent Edits of different lines
//! of one file, through one engine and as 50 `wsbench tool Edit`
//! processes. Every edit must land, or the loser must get a clear error;
//! a success that did not land is the bug. Also Write's compare-and-swap
//! (`expected_sha256`), which the TUI editor saves with.

use crate::support;
use crate::support::images;

use serde_json::json;
use sha2::Digest;

const N: usize = 50;

fn original() -> String {
    (0..N).map(|i| format!("L{i:02}=old\n")).collect()
}

/// Checks the file against the results: every reported success landed,
/// and a failure says why.
fn check(content: &str, results: &[(bool, String)]) {
    let mut ok = 0;
    for (i, (success, text)) in results.iter().enumerate() {
        let landed = content.contains(&format!("L{i:02}=new\n"));
        if *success {
            ok += 1;
            assert!(landed, "edit {i} reported success but is not in the file");
        } else {
            assert!(
                text.contains("changed since it was read"),
                "edit {i}: {text}"
            );
        }
    }
    // With the lock in place none has to lose.
    assert_eq!(ok, N, "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_edits_through_the_engine_all_land() {
    let (dir, ws) = support::temp_workspace().await;
    let path = format!("{}/f.txt", ws.layout().workdir());
    std::fs::write(dir.path().join("f.txt"), original()).unwrap();
    let mut tasks = Vec::new();
    for i in 0..N {
        let ws = ws.clone();
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let r = support::call(
                &ws,
                "Edit",
                json!({"file_path": path, "old_string": format!("L{i:02}=old\n"), "new_string": format!("L{i:02}=new\n")}),
            )
            .await;
            (r.is_success(), r.text())
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let content = std::fs::read_to_string(dir.path().join("f.txt")).unwrap();
    check(&content, &results);
}

#[test]
fn fifty_concurrent_edit_processes_all_land() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    std::fs::write(w.path().join("f.txt"), original()).unwrap();
    let path = format!("{}/f.txt", w.path().display());
    // Open the workspace once, so the 50 do not race to create it.
    let first = support::cli::wsbench_cmd(home.path())
        .args(["tool", "Glob", r#"{"pattern":"*.txt"}"#, "--workdir"])
        .arg(w.path())
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    let children: Vec<_> = (0..N)
        .map(|i| {
            let args = json!({"file_path": path, "old_string": format!("L{i:02}=old\n"), "new_string": format!("L{i:02}=new\n")});
            support::cli::wsbench_cmd(home.path())
                .args(["tool", "Edit", &args.to_string(), "--workdir"])
                .arg(w.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let results: Vec<_> = wait_all(children)
        .into_iter()
        .map(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            (o.status.success(), text)
        })
        .collect();
    let content = std::fs::read_to_string(w.path().join("f.txt")).unwrap();
    check(&content, &results);
}

/// The 50 `wsbench tool Edit` processes on Docker with `storage =
/// "volume"`: no host directory to lock, so the processes serialise on a
/// host lock keyed by the container and the path (`filelock`). Before it
/// every process reported success and one edit landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_edit_processes_on_a_docker_volume_all_land() {
    if let Err(why) = images::docker_ready(images::DEBIAN_IMAGE).await {
        support::skip_or_fail(&why);
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let profile = format!("dvol{}", std::process::id());
    let config = home.path().join("wsbench.toml");
    std::fs::write(
        &config,
        format!(
            "[profiles.{profile}]\nbackend = \"docker\"\n\n[profiles.{profile}.options]\n\
             image = \"{}\"\npull = \"never\"\nnetwork = \"none\"\nstorage = \"volume\"\nbase_dir = \"{}\"\n",
            images::DEBIAN_IMAGE,
            home.path().join("docker").display()
        ),
    )
    .unwrap();
    let home_path = home.path().to_path_buf();
    let cmd = move |args: &[&str]| {
        let mut c = support::cli::wsbench_cmd(&home_path);
        c.arg("--config")
            .arg(&config)
            .args(["--profile", &profile])
            .args(args)
            .stdin(std::process::Stdio::null());
        c
    };
    let run = tokio::task::spawn_blocking(move || {
        let path = "/workspace/edits.txt";
        // Under umask 077 a new file is 0600 in the volume too, as with a
        // bind mount (the container's own umask is 022).
        let mut write = cmd(&[
            "tool",
            "Write",
            &json!({"file_path": path, "content": original()}).to_string(),
        ]);
        // SAFETY: umask is async-signal-safe and touches no memory.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut write, || {
                libc::umask(0o077);
                Ok(())
            });
        }
        let w = write.output().unwrap();
        let r = std::panic::catch_unwind(|| {
            assert!(w.status.success(), "{w:?}");
            let children: Vec<_> = (0..N)
                .map(|i| {
                    let args = json!({"file_path": path, "old_string": format!("L{i:02}=old\n"), "new_string": format!("L{i:02}=new\n")});
                    cmd(&["tool", "Edit", &args.to_string()])
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let results: Vec<_> = wait_all(children)
                .into_iter()
                .map(|o| {
                    let text = format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    );
                    (o.status.success(), text)
                })
                .collect();
            let o = cmd(&["exec", "--", "cat /workspace/edits.txt"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{o:?}");
            check(&String::from_utf8_lossy(&o.stdout), &results);
            let o = cmd(&["exec", "--", "stat -c %a /workspace/edits.txt"])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&o.stdout), "600\n", "{o:?}");
        });
        let o = cmd(&["--json", "workspaces", "list"]).output().unwrap();
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout) {
            for w in v["workspaces"].as_array().into_iter().flatten() {
                if let Some(id) = w["id"].as_str() {
                    let _ = cmd(&["workspaces", "destroy", "--yes", id]).output();
                }
            }
        }
        r
    });
    if let Err(p) = run.await.unwrap() {
        std::panic::resume_unwind(p);
    }
}

#[tokio::test]
async fn write_with_a_stale_expected_hash_is_refused() {
    let (dir, ws) = support::temp_workspace().await;
    let path = format!("{}/f.txt", ws.layout().workdir());
    std::fs::write(dir.path().join("f.txt"), "seen").unwrap();
    let seen = hex::encode(sha2::Sha256::digest(b"seen"));
    // Someone else writes after the caller read the file.
    std::fs::write(dir.path().join("f.txt"), "theirs").unwrap();
    let r = support::call(
        &ws,
        "Write",
        json!({"file_path": path, "content": "mine", "expected_sha256": seen}),
    )
    .await;
    assert!(!r.is_success());
    assert!(
        r.text().contains("changed since it was read"),
        "{}",
        r.text()
    );
    assert_eq!(r.metadata.get("changed_since_read"), Some(&json!(true)));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "theirs"
    );
    let theirs = hex::encode(sha2::Sha256::digest(b"theirs"));
    let r = support::call(
        &ws,
        "Write",
        json!({"file_path": path, "content": "mine", "expected_sha256": theirs}),
    )
    .await;
    assert!(r.is_success(), "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "mine"
    );
}

/// Waits for every child at once, each on its own thread, so none stays a
/// zombie while an earlier one is still running (other tests of the
/// binary check that the process has no zombie children).
fn wait_all(children: Vec<std::process::Child>) -> Vec<std::process::Output> {
    std::thread::scope(|s| {
        let waits: Vec<_> = children
            .into_iter()
            .map(|c| s.spawn(move || c.wait_with_output().unwrap()))
            .collect();
        waits.into_iter().map(|w| w.join().unwrap()).collect()
    })
}
