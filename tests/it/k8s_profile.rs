//! A `[profiles.k8s]` with `backend = "kubernetes"` pointing at the
//! project's stub API server (`tests/it/support/k8s_stub.rs`), used the way a
//! user with a cluster uses it:
//!
//! * through the profile path ([`open_profile`]): the backend's Pod
//!   phases, problems and execs reach the manager's event bus as
//!   `Event::Log` lines of source `kubernetes`, which the TUI's Logs pane
//!   shows;
//! * through the real binary: `workspaces create`, `exec`, `tool Bash`,
//!   `workspaces list --profile k8s` (running, then suspended after
//!   `close`), reattach from another process (`workspaces open`, files
//!   kept on the PVC), `workspaces destroy`.
//!
//! The stub's pods run commands with bubblewrap; without `bwrap` these
//! tests print `SKIPPED` (and fail under `CI=true`).

use crate::support::k8s_stub;
use crate::support::{self, cli, leak};

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::Ordering;

use serde_json::Value;

use k8s_stub::Stub;
use support::{have, skip_or_fail};
use wsbench::backend::kubernetes::names;
use wsbench::config::{Config, Paths};
use wsbench::engine::EventBus;
use wsbench::root::open_profile;

const NS: &str = "wsbench-profile";

fn ready() -> bool {
    if !have("bwrap") {
        skip_or_fail("bwrap is not installed (the k8s stub's pods run commands with it)");
        return false;
    }
    true
}

/// The config a user writes for a cluster, with the stub's kubeconfig.
fn config_text(kubeconfig: &Path) -> String {
    format!(
        r#"[profiles.k8s]
backend = "kubernetes"

[profiles.k8s.options]
kubeconfig = "{}"
namespace = "{NS}"
image = "stub/image:1"
storage_size = "1Gi"
ready_timeout_secs = 30
delete_timeout_secs = 10
"#,
        kubeconfig.display()
    )
}

/// The stub, and a home with the config file in it.
struct Env {
    stub: Stub,
    home: tempfile::TempDir,
    config: PathBuf,
}

impl Env {
    async fn start() -> Env {
        let stub = Stub::start().await;
        let home = tempfile::tempdir().unwrap();
        let kc = stub.kubeconfig(home.path(), NS);
        let config = home.path().join("wsbench.toml");
        std::fs::write(&config, config_text(&kc)).unwrap();
        Env { stub, home, config }
    }

    fn paths(&self) -> Paths {
        let data = self.home.path().join("data/wsbench");
        Paths {
            config_file: self.config.clone(),
            default_workdir: data.join("workspaces/default"),
            data_dir: data,
        }
    }

    /// Runs `wsbench --config <file> --profile k8s <args>` as a separate
    /// process (each call is a fresh process: reattach is real).
    async fn wsbench(&self, args: &[&str]) -> Output {
        let out = cli::wsbench_tokio_cmd(self.home.path())
            .arg("--config")
            .arg(&self.config)
            .args(["--profile", "k8s"])
            // A variable only wsbench has: never readable inside (issue 14).
            .env(leak::VAR, leak::VALUE)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output();
        tokio::time::timeout(std::time::Duration::from_secs(120), out)
            .await
            .unwrap_or_else(|_| panic!("wsbench {args:?} did not finish in 120 s"))
            .unwrap()
    }

    /// Like [`Env::wsbench`], asserting exit 0 and returning stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let o = self.wsbench(args).await;
        assert_eq!(
            o.status.code(),
            Some(0),
            "wsbench {args:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ok(&all).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// `(state, user, agent)` of workspace `id` in `workspaces list`.
    async fn listed(&self, id: &str) -> Option<(String, Value, Value)> {
        let v = self.json(&["workspaces", "list"]).await;
        v["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["id"] == id)
            .map(|w| {
                assert_eq!(w["profile"], "k8s", "{w}");
                assert_eq!(w["backend"], "kubernetes", "{w}");
                (
                    w["state"].as_str().unwrap().to_string(),
                    w["user"].clone(),
                    w["agent"].clone(),
                )
            })
    }
}

/// Every `kubernetes` log line on the bus so far, as
/// `(workspace, level, message)`.
fn k8s_logs(sub: &mut wsbench::engine::events::Subscriber) -> Vec<(String, String, String)> {
    support::log_lines(sub, "kubernetes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_events_reach_the_bus_through_the_profile_path() {
    if !ready() {
        return;
    }
    let e = Env::start().await;
    let config = Config::load(&e.config).unwrap();
    let bus = EventBus::default();
    let mut sub = bus.subscribe();
    let m = open_profile(&config, "k8s", &e.paths(), bus.clone()).unwrap();
    let ws = m.get_workspace("alice", "coder", "s1", None).await.unwrap();
    let id = ws.id().to_string();
    let logs = k8s_logs(&mut sub);
    let pod = m
        .provisioner()
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.workspace_id == id)
        .expect("the workspace is listed")
        .backend_id;
    let has = |level: &str, text: &str| {
        logs.iter()
            .any(|(w, l, msg)| *w == id && l == level && msg.contains(text))
    };
    assert!(has("info", &format!("created Pod {pod}")), "{logs:#?}");
    assert!(has("info", &format!("pod {pod}: Running")), "{logs:#?}");
    // Workspace::open's own file operations are execs in the Pod.
    assert!(has("debug", &format!("exec in {pod}")), "{logs:#?}");
    // Closing suspends: the Pod is deleted, and that is said too.
    m.close(&id).await.unwrap();
    let logs = k8s_logs(&mut sub);
    assert!(
        logs.iter()
            .any(|(w, _, msg)| *w == id && msg == &format!("deleted Pod {pod}")),
        "{logs:#?}"
    );
    assert!(!e.stub.has_pod(NS, &pod));
    assert!(e.stub.has_pvc(NS, &pod));

    // A Pod that cannot start: the reason arrives as an error line.
    e.stub
        .switches
        .image_pull_backoff
        .store(true, Ordering::Relaxed);
    let err = m
        .get_workspace("bob", "coder", "s1", None)
        .await
        .expect_err("an image that cannot be pulled fails the provisioning");
    // The kubelet says ErrImagePull first, then ImagePullBackOff.
    assert!(err.to_string().contains("ImagePull"), "{err}");
    let logs = k8s_logs(&mut sub);
    assert!(
        logs.iter().any(|(_, l, msg)| l == "error"
            && msg.contains("cannot start: ")
            && msg.contains("Back-off pulling image")),
        "{logs:#?}"
    );
    m.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_creates_uses_lists_suspends_reattaches_and_destroys_a_pod_workspace() {
    if !ready() {
        return;
    }
    let e = Env::start().await;
    let who = ["--user", "alice", "--agent", "coder"];

    // Create: a PVC and a running Pod, named from the workspace id.
    let mut args = vec!["workspaces", "create"];
    args.extend_from_slice(&who);
    let v = e.json(&args).await;
    assert_eq!(v["created"], true, "{v}");
    assert_eq!(v["backend"], "kubernetes", "{v}");
    assert_eq!(v["root"], "/workspace", "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let (state, user, agent) = e.listed(&id).await.expect("listed after create");
    assert_eq!(
        (state.as_str(), &user, &agent),
        ("running", &"alice".into(), &"coder".into())
    );
    let pod = names::object_name("wsbench-", &id);
    assert!(e.stub.has_pod(NS, &pod) && e.stub.has_pvc(NS, &pod));

    // exec and tool Bash run in the Pod, on the PVC.
    let mut args = vec!["exec"];
    args.extend_from_slice(&who);
    args.extend_from_slice(&["--", "echo data > f.txt; pwd; echo hi from the pod"]);
    let out = e.ok(&args).await;
    assert_eq!(out, "/workspace\nhi from the pod\n");
    assert_eq!(
        std::fs::read_to_string(e.stub.pvc_dir(NS, &pod).join("f.txt")).unwrap(),
        "data\n"
    );
    // Nothing of wsbench's environment reaches the Pod (env, files).
    let scan = leak::script(false);
    let mut args = vec!["exec"];
    args.extend_from_slice(&who);
    args.extend_from_slice(&["--", &scan]);
    leak::assert_clean("kubernetes", &e.wsbench(&args).await);
    let mut args = vec!["exec"];
    args.extend_from_slice(&who);
    args.extend_from_slice(&["--", "exit 3"]);
    assert_eq!(e.wsbench(&args).await.status.code(), Some(3));
    let mut args = vec!["tool"];
    args.extend_from_slice(&who);
    args.extend_from_slice(&["Bash", r#"{"command": "cat f.txt"}"#]);
    let out = e.ok(&args).await;
    assert!(out.contains("data\n"), "{out}");

    // Close suspends: the Pod goes, the PVC (the files) stays, and the
    // listing still shows the workspace, as suspended.
    let v = e.json(&["workspaces", "close", &id]).await;
    assert_eq!(v["closed"], true, "{v}");
    assert!(!e.stub.has_pod(NS, &pod), "the Pod outlived close");
    assert!(e.stub.has_pvc(NS, &pod));
    let (state, user, _) = e.listed(&id).await.expect("listed while suspended");
    assert_eq!(state, "suspended");
    assert_eq!(user, "alice");

    // Another process reattaches by id: a new Pod on the same PVC.
    let v = e.json(&["workspaces", "open", &id]).await;
    assert_eq!(v["id"], id.as_str(), "{v}");
    assert!(e.stub.has_pod(NS, &pod));
    let mut args = vec!["exec"];
    args.extend_from_slice(&who);
    args.extend_from_slice(&["--", "cat f.txt"]);
    assert_eq!(e.ok(&args).await, "data\n");
    assert_eq!(e.listed(&id).await.unwrap().0, "running");

    // Destroy: Pod and PVC gone, and so is the listing's row.
    let v = e.json(&["workspaces", "destroy", &id, "--yes"]).await;
    assert_eq!(v["destroyed"], true, "{v}");
    assert!(!e.stub.has_pod(NS, &pod) && !e.stub.has_pvc(NS, &pod));
    assert!(e.listed(&id).await.is_none());
    let o = e.wsbench(&["workspaces", "open", &id]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no workspace"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Issue 15 point 3: twenty processes first-using one new Pod workspace
/// at once all run their command, and the profile ends with one
/// workspace (a losing create finds the Pod and PVC the winner made:
/// Kubernetes answers 409, which `ensure_pod` takes as "made by someone
/// else, wait for it to run").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_processes_first_using_one_pod_workspace_all_succeed() {
    if !ready() {
        return;
    }
    let env = Env::start().await;
    let runs = (0..20).map(|i| {
        let env = &env;
        async move {
            let session = format!("s{i}");
            let line = format!("echo ran-{i}");
            let args = ["exec", "--user", "racer", "--agent", "coder"];
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["--session", &session, &line]);
            env.wsbench(&all).await
        }
    });
    let outs = futures::future::join_all(runs).await;
    let failed: Vec<String> = outs
        .iter()
        .enumerate()
        .filter(|(i, o)| {
            o.status.code() != Some(0)
                || !String::from_utf8_lossy(&o.stdout).contains(&format!("ran-{i}"))
        })
        .map(|(i, o)| format!("#{i}: {}", String::from_utf8_lossy(&o.stderr)))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let v = env.json(&["workspaces", "list"]).await;
    assert_eq!(v["workspaces"].as_array().unwrap().len(), 1, "{v:#}");
}
