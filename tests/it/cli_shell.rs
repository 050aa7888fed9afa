//! `wsbench shell -- CMD` run as a user would from a script: stdin a pipe
//! (not a terminal, so no raw mode) and stdout captured. CMD runs on a PTY
//! inside the workspace's sandbox: it sees a terminal (`stty size` gives
//! the 24 × 80 used when stdout is no terminal), the piped line reaches
//! its `read` (and the terminal echoes it), the banner goes to stderr and
//! wsbench exits with CMD's exit code. On a local workspace the banner
//! says it is not sandboxed; on a Kubernetes profile (the stub API server)
//! the terminal is the Pod's (exec with `tty=true`).

use crate::support::k8s_stub::Stub;
use crate::support::{cli, have, skip_or_fail};

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The program run on the terminal: its size, whether stdin is a
/// terminal, its directory, the line read, then exit 5.
const SCRIPT: &str = "stty size; [ -t 0 ] && echo tty:yes; pwd; read x; echo got:$x; exit 5";

/// Runs `cmd shell -- sh -c SCRIPT` with `hello\n` piped in.
fn shell(mut cmd: Command) -> Output {
    cmd.args(["shell", "--", "sh", "-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    // The pipe is closed here: wsbench must still wait for CMD.
    child.wait_with_output().unwrap()
}

fn check(o: &Output, dir: &str) -> (String, String) {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(5), "stdout: {out}\nstderr: {err}");
    for want in ["24 80\r\n", "tty:yes\r\n", "hello\r\n", "got:hello\r\n"] {
        assert!(out.contains(want), "{want:?} not in {out:?}\nstderr: {err}");
    }
    assert!(out.contains(&format!("{dir}\r\n")), "cwd {dir}: {out:?}");
    // Nothing but the program's terminal on stdout.
    assert!(!out.contains("wsbench:"), "{out:?}");
    (out, err)
}

#[test]
fn shell_runs_a_command_on_a_terminal_in_a_local_workspace() {
    let home = tempfile::tempdir().unwrap();
    let w = home.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    let mut cmd = cli::wsbench_cmd(home.path());
    cmd.arg("--workdir").arg(&w);
    let o = shell(cmd);
    let dir = w.canonicalize().unwrap();
    let (_, err) = check(&o, &dir.display().to_string());
    assert!(err.contains("NOT sandboxed"), "{err}");
}

fn k8s_config(kubeconfig: &Path) -> String {
    format!(
        r#"[profiles.k8s]
backend = "kubernetes"

[profiles.k8s.options]
kubeconfig = "{}"
namespace = "wsbench-shell"
image = "stub/image:1"
ready_timeout_secs = 30
delete_timeout_secs = 10
"#,
        kubeconfig.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_runs_a_command_on_the_pods_terminal_on_kubernetes() {
    if !have("bwrap") {
        skip_or_fail("bwrap is not installed (the k8s stub's pods run commands with it)");
        return;
    }
    let stub = Stub::start().await;
    let home = tempfile::tempdir().unwrap();
    let kc = stub.kubeconfig(home.path(), "wsbench-shell");
    let config = home.path().join("wsbench.toml");
    std::fs::write(&config, k8s_config(&kc)).unwrap();
    let mut cmd = cli::wsbench_cmd(home.path());
    cmd.arg("--config").arg(&config).args(["--profile", "k8s"]);
    let o = tokio::task::spawn_blocking(move || shell(cmd))
        .await
        .unwrap();
    let (_, err) = check(&o, "/workspace");
    assert!(err.contains("inside the kubernetes sandbox"), "{err}");
    assert!(
        stub.execs().iter().any(|e| e.tty),
        "the Pod's program ran on a tty exec"
    );
}
