//! Issue 15 point 3: many processes first-using one new workspace at
//! once end with one sandbox and no failed command. A name conflict or a
//! 404 while another process is making the sandbox means "someone else is
//! making it": the loser reattaches instead of failing.

use std::path::Path;
use std::process::{Child, Stdio};

use crate::support::{cli, images, skip_or_fail};
use wsbench::backend::Provisioner;
use wsbench::backend::docker::{DockerOptions, DockerProvisioner};

/// Starts `n` `wsbench exec` processes on `profile` for the same (user,
/// agent), all before any is waited for, and returns each one's exit
/// code, stdout and stderr.
fn exec_together(home: &Path, profile: &str, n: usize) -> Vec<(Option<i32>, String, String)> {
    let children: Vec<Child> = (0..n)
        .map(|i| {
            cli::wsbench_cmd(home)
                .arg("--config")
                .arg(home.join("wsbench.toml"))
                .args(["exec", "--profile", profile, "--user", "racer"])
                .args(["--agent", "coder", "--session", &format!("s{i}")])
                .arg(format!("echo ran-{i}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .collect()
}

/// Fails with every process that did not print its line and exit 0.
fn assert_all_ran(results: &[(Option<i32>, String, String)]) {
    let failed: Vec<String> = results
        .iter()
        .enumerate()
        .filter(|(i, (code, out, _))| *code != Some(0) || !out.contains(&format!("ran-{i}")))
        .map(|(i, (code, out, err))| format!("#{i} exit {code:?}: {out} {err}"))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        results.len(),
        failed.join("\n")
    );
}

/// Destroys every container of the profile when dropped.
struct Cleanup(DockerOptions, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let p = DockerProvisioner::new(self.0.clone()).with_profile(&self.1);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                for info in p.list().await.unwrap_or_default() {
                    let _ = p.destroy(&info.workspace_id).await;
                }
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_processes_first_using_one_docker_workspace_make_one_container() {
    if let Err(why) = images::docker_ready(images::DEBIAN_IMAGE).await {
        skip_or_fail(&why);
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let base = home.path().join("docker");
    // A profile name of this run only: the containers it lists are ours.
    let profile = format!("race{}", std::process::id());
    std::fs::write(
        home.path().join("wsbench.toml"),
        format!(
            "[profiles.{profile}]\nbackend = \"docker\"\n\n[profiles.{profile}.options]\n\
             image = \"{}\"\npull = \"never\"\nnetwork = \"none\"\nbase_dir = \"{}\"\n",
            images::DEBIAN_IMAGE,
            base.display()
        ),
    )
    .unwrap();
    let opts = DockerOptions {
        image: images::DEBIAN_IMAGE.into(),
        base_dir: Some(base.clone()),
        ..Default::default()
    };
    let _cleanup = Cleanup(opts.clone(), profile.clone());
    let prov = DockerProvisioner::new(opts).with_profile(&profile);
    let results = tokio::task::spawn_blocking({
        let home = home.path().to_path_buf();
        let profile = profile.clone();
        move || exec_together(&home, &profile, 50)
    })
    .await
    .unwrap();
    assert_all_ran(&results);
    let containers = prov.list().await.unwrap();
    assert_eq!(containers.len(), 1, "{containers:#?}");
}
