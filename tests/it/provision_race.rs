//! Issue 15 point 3: many processes first-using one new workspace at
//! once end with one sandbox and no failed command. A name conflict or a
//! 404 while another process is making the sandbox means "someone else is
//! making it": the loser reattaches instead of failing.

use std::path::Path;
use std::process::{Child, Stdio};

use crate::support::fake_daytona::{self, FakeDaytona};
use crate::support::fake_e2b::{self, FakeE2b};
use crate::support::fake_opensandbox::{self, FakeOpenSandbox};
use crate::support::{cli, cloud, images, skip_or_fail};
use wsbench::backend::Provisioner;
use wsbench::backend::docker::{DockerOptions, DockerProvisioner};

/// Starts `n` `wsbench exec` processes on `profile` for the same (user,
/// agent), all before any is waited for, and returns each one's exit
/// code, stdout and stderr.
fn exec_together(
    home: &Path,
    profile: &str,
    n: usize,
    env: &[(&str, &str)],
) -> Vec<(Option<i32>, String, String)> {
    let children: Vec<Child> = (0..n)
        .map(|i| {
            cli::wsbench_cmd(home)
                .envs(env.iter().copied())
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
        move || exec_together(&home, &profile, 50, &[])
    })
    .await
    .unwrap();
    assert_all_ran(&results);
    let containers = prov.list().await.unwrap();
    assert_eq!(containers.len(), 1, "{containers:#?}");
}

/// Twenty processes first-using one workspace of a cloud profile (the
/// fakes): one sandbox on the service, every command ran. The services
/// have no unique names to conflict on, so the processes of one host
/// serialise the find-or-create on a host lock (`backend::host::lock`),
/// and an exiting process pauses the sandbox only when no other one
/// still holds it (`manager::hold`): otherwise the E2B fake kills the
/// others' commands (137, 502 paused).
async fn cloud_race(
    backend: &str,
    options: String,
    key: (&str, &str),
    ids: impl Fn() -> Vec<String>,
) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("wsbench.toml"),
        format!(
            "[profiles.{backend}]\nbackend = \"{backend}\"\n\n[profiles.{backend}.options]\n{options}request_timeout_secs = 20\n"
        ),
    )
    .unwrap();
    let results = tokio::task::spawn_blocking({
        let home = home.path().to_path_buf();
        let (backend, key) = (backend.to_string(), (key.0.to_string(), key.1.to_string()));
        move || exec_together(&home, &backend, 20, &[(&key.0, &key.1)])
    })
    .await
    .unwrap();
    assert_all_ran(&results);
    let made = ids();
    assert_eq!(made.len(), 1, "one sandbox: {made:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_processes_first_using_one_e2b_workspace_make_one_sandbox() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeE2b::start().await;
    let options = format!("api_url = \"{0}\"\nenvd_url = \"{0}\"\n", f.url());
    cloud_race("e2b", options, ("E2B_API_KEY", fake_e2b::KEY), || f.ids()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_processes_first_using_one_daytona_workspace_make_one_sandbox() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeDaytona::start().await;
    let options = format!("api_url = \"{}\"\nstate_timeout_secs = 20\n", f.api_url());
    cloud_race(
        "daytona",
        options,
        ("DAYTONA_API_KEY", fake_daytona::KEY),
        || f.ids(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_processes_first_using_one_opensandbox_workspace_make_one_sandbox() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeOpenSandbox::start().await;
    let options = format!("api_url = \"{}\"\n", f.api_url());
    cloud_race(
        "opensandbox",
        options,
        ("OPEN_SANDBOX_API_KEY", fake_opensandbox::KEY),
        || f.ids(),
    )
    .await;
}
