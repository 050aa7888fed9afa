//! The stub API server checked by a real client: `kubectl` (client-go's
//! websocket executor) runs `exec`, `exec -i` and `cp` against it, so the
//! stub cannot drift into agreeing only with wsbench's own client
//! (`docs/k8s-testing.md` §4.6).
//!
//! Needs `kubectl` (1.30 or later: websocket exec) and `bwrap`; prints
//! `SKIPPED` without them and fails under `CI=true`.

use crate::support;
use crate::support::k8s_stub;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use k8s_stub::Stub;
use support::{have, skip_or_fail};
use wsbench::backend::kubernetes::{KubernetesOptions, KubernetesProvisioner};
use wsbench::backend::{ProvisionSpec, Provisioner};

const NS: &str = "kubectl-test";

async fn kubectl(kubeconfig: &Path, args: Vec<String>, stdin: Option<Vec<u8>>) -> Output {
    let kc = kubeconfig.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&kc)
            .args(&args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(data) = stdin {
            use std::io::Write;
            let mut w = child.stdin.take().unwrap();
            w.write_all(&data).unwrap();
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_exec_i_and_cp_agree_with_the_stub() {
    for tool in ["kubectl", "bwrap"] {
        if !have(tool) {
            skip_or_fail(&format!("{tool} is not installed"));
            return;
        }
    }
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = stub.kubeconfig(dir.path(), NS);
    // A workspace Pod made by wsbench itself.
    let prov = KubernetesProvisioner::new(KubernetesOptions {
        kubeconfig: Some(kc.clone()),
        namespace: NS.into(),
        ..Default::default()
    })
    .unwrap();
    let sb = prov
        .provision(&ProvisionSpec {
            workspace_id: "kubectl".into(),
            labels: BTreeMap::new(),
        })
        .await
        .unwrap();
    let pod = prov.object_name("kubectl");

    let out = kubectl(&kc, s(&["get", "pods", "-o", "name"]), None).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("pod/{pod}")
    );

    // exec: separate streams and the exit code.
    let out = kubectl(
        &kc,
        s(&[
            "exec",
            &pod,
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 7",
        ]),
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(out.stdout, b"out\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("err\n"),
        "{out:?}"
    );

    // exec -i: stdin reaches EOF (v5 close frame) and output after it is
    // still delivered.
    let out = kubectl(
        &kc,
        s(&["exec", "-i", &pod, "--", "sh", "-c", "cat; echo after-eof"]),
        Some(b"piped line\n".to_vec()),
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"piped line\nafter-eof\n");

    // cp in: the file shows up for wsbench; cp out: wsbench's file arrives.
    let local = dir.path().join("up.txt");
    std::fs::write(&local, b"uploaded by kubectl\n").unwrap();
    let out = kubectl(
        &kc,
        vec![
            "cp".into(),
            local.display().to_string(),
            format!("{pod}:/workspace/up.txt"),
        ],
        None,
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        sb.read("up.txt", None).await.unwrap(),
        b"uploaded by kubectl\n"
    );
    sb.write("down/d.bin", &[0, 1, 2, 255]).await.unwrap();
    let back = dir.path().join("d.bin");
    let out = kubectl(
        &kc,
        vec![
            "cp".into(),
            format!("{pod}:/workspace/down/d.bin"),
            back.display().to_string(),
        ],
        None,
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&back).unwrap(), [0, 1, 2, 255]);
    // kubectl spoke v5 to the stub.
    assert!(
        stub.execs()
            .iter()
            .any(|e| e.protocol == "v5.channel.k8s.io"
                && e.command.first().map(String::as_str) == Some("tar"))
    );
}

/// Reads the terminal `out` into `seen` until it holds `needle`; panics
/// with what was seen when it ends or a minute passes first (a failure
/// limit only: a pass returns as soon as the bytes are there).
async fn read_until(
    out: &mut (impl tokio::io::AsyncRead + Unpin),
    seen: &mut Vec<u8>,
    needle: &str,
) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let found = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            if String::from_utf8_lossy(seen).contains(needle) {
                return true;
            }
            match out.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(
        found,
        "{needle:?} not in kubectl's terminal {:?}",
        String::from_utf8_lossy(seen)
    );
}

/// `kubectl exec -it` on a real terminal against the stub: kubectl asks
/// for `tty=true`, sends its terminal's size and every later resize on
/// channel 4, what is typed reaches `read` through the stub's PTY (with
/// its echo), and the exit code comes back. This is the check that the
/// stub's terminal half (which wsbench's own `Sandbox::pty` is tested
/// against in the backend suite) speaks the protocol client-go speaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_it_gets_a_terminal_that_follows_resizes() {
    use tokio::io::AsyncWriteExt;
    for tool in ["kubectl", "bwrap"] {
        if !have(tool) {
            skip_or_fail(&format!("{tool} is not installed"));
            return;
        }
    }
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = stub.kubeconfig(dir.path(), NS);
    let prov = KubernetesProvisioner::new(KubernetesOptions {
        kubeconfig: Some(kc.clone()),
        namespace: NS.into(),
        ..Default::default()
    })
    .unwrap();
    let _sb = prov
        .provision(&ProvisionSpec {
            workspace_id: "kubectl-it".into(),
            labels: BTreeMap::new(),
        })
        .await
        .unwrap();
    let pod = prov.object_name("kubectl-it");
    // The stub starts the program before kubectl's first size frame is
    // read (as a kubelet does), so the script waits for each size.
    let script = "until [ \"$(stty size)\" = '33 101' ]; do sleep 0.1; done; echo size:ok; \
                  read x; echo got:$x; \
                  until [ \"$(stty size)\" = '40 120' ]; do sleep 0.1; done; echo resized:ok; exit 3";
    let (mut term, pts) = pty_process::open().unwrap();
    term.resize(pty_process::Size::new(33, 101)).unwrap();
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.arg("--kubeconfig")
        .arg(&kc)
        .args(["exec", "-it", &pod, "--", "sh", "-c", script]);
    let mut child = pty_process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn(pts)
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut term, &mut seen, "size:ok").await;
    // kubectl put our terminal in raw mode: Enter is `\r`, which the
    // Pod's terminal turns into the newline `read` waits for.
    term.write_all(b"hello\r").await.unwrap();
    read_until(&mut term, &mut seen, "got:hello").await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        text.contains("hello\r\n"),
        "the Pod's terminal echoes: {text:?}"
    );
    // A resize of kubectl's terminal (SIGWINCH) reaches the Pod's.
    term.resize(pty_process::Size::new(40, 120)).unwrap();
    read_until(&mut term, &mut seen, "resized:ok").await;
    let status = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait())
        .await
        .expect("kubectl exits")
        .unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "{:?}",
        String::from_utf8_lossy(&seen)
    );
    let execs = stub.execs();
    let tty = execs.iter().find(|e| e.tty).expect("a tty exec was served");
    assert_eq!(tty.protocol, "v5.channel.k8s.io");
}
