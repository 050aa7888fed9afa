//! The Kubernetes backend against the project's stub API server
//! (`tests/it/support/k8s_stub.rs`): provisioning, reattach, suspend/destroy,
//! websocket exec on v5 and v4, the failure switches, files, long-lived
//! processes and the engine's tools on a Pod.
//!
//! The stub's pods run commands with bubblewrap; without `bwrap` these
//! tests print `SKIPPED` (and fail under `CI=true`).

use crate::support;
use crate::support::k8s_stub;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use k8s_stub::Stub;
use support::{have, skip_or_fail};
use wsbench::backend::kubernetes::{KubernetesOptions, KubernetesProvisioner, KubernetesSandbox};
use wsbench::backend::{
    BackendError, ByteRange, ExecRequest, FileKind, ProvisionSpec, Provisioner, Sandbox,
    SandboxState, SpawnRequest, StreamKind, labels,
};
use wsbench::engine::tools::{ToolResult, ToolState};
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

const NS: &str = "wsbench-test";

fn ready() -> bool {
    if !have("bwrap") {
        skip_or_fail("bwrap is not installed (the stub's pods run commands with it)");
        return false;
    }
    true
}

struct Env {
    stub: Stub,
    prov: KubernetesProvisioner,
    _dir: tempfile::TempDir,
}

async fn env_with(f: impl FnOnce(&mut KubernetesOptions)) -> Env {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = KubernetesOptions {
        kubeconfig: Some(stub.kubeconfig(dir.path(), NS)),
        namespace: NS.into(),
        image: "stub/image:1".into(),
        ready_timeout_secs: 20,
        delete_timeout_secs: 10,
        ..Default::default()
    };
    f(&mut opts);
    let prov = KubernetesProvisioner::new(opts)
        .unwrap()
        .with_profile("k8s");
    Env {
        stub,
        prov,
        _dir: dir,
    }
}

async fn env() -> Env {
    env_with(|_| {}).await
}

fn spec(id: &str) -> ProvisionSpec {
    ProvisionSpec {
        workspace_id: id.into(),
        labels: BTreeMap::from([(labels::USER.to_string(), "alice".to_string())]),
    }
}

async fn run(sb: &dyn Sandbox, req: ExecRequest) -> (Option<i32>, String, String) {
    let (tx, mut rx) = mpsc::channel::<wsbench::backend::OutputChunk>(64);
    let collect = async {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => o.extend_from_slice(&c.data),
                StreamKind::Stderr => e.extend_from_slice(&c.data),
            }
        }
        (o, e)
    };
    let (res, (o, e)) = tokio::join!(sb.exec(req, Some(tx)), collect);
    let out = res.unwrap();
    (
        out.exit_code,
        String::from_utf8(o).unwrap(),
        String::from_utf8(e).unwrap(),
    )
}

async fn sh(sb: &dyn Sandbox, line: &str) -> (Option<i32>, String, String) {
    run(sb, ExecRequest::shell(line)).await
}

#[tokio::test]
async fn provision_creates_namespace_pvc_and_pod_with_the_spec() {
    if !ready() {
        return;
    }
    let e = env().await;
    let id = "Alice/Coder session";
    let sb = e.prov.provision(&spec(id)).await.unwrap();
    let name = e.prov.object_name(id);
    assert!(e.stub.has_namespace(NS));
    assert!(e.stub.has_pvc(NS, &name));
    let pod = e.stub.pod(NS, &name).unwrap();
    assert_eq!(pod["status"]["phase"], "Running");
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["name"], "workspace");
    assert_eq!(c["command"], json!(["sleep", "infinity"]));
    assert_eq!(c["workingDir"], "/workspace");
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/workspace");
    assert_eq!(
        pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        name
    );
    assert_eq!(
        pod["metadata"]["annotations"][labels::WORKSPACE_ID],
        json!(id)
    );
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "wsbench"
    );
    assert_eq!(sb.workdir(), "/workspace");
    // The reference's colliding pair gets two Pods.
    let a = e.prov.object_name("a_b");
    let b = e.prov.object_name("a-b");
    assert_ne!(a, b);
}

#[tokio::test]
async fn exec_streams_output_exit_codes_stdin_env_and_cwd() {
    if !ready() {
        return;
    }
    let e = env_with(|o| {
        o.env.insert("FROM_PROFILE".into(), "p1".into());
    })
    .await;
    let sb = e.prov.provision(&spec("exec")).await.unwrap();
    let (code, out, err) = sh(sb.as_ref(), "echo out; echo err >&2; exit 3").await;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(3), "out\n", "err\n")
    );
    // C18: the line reaches a real shell unchanged.
    let (code, out, _) = sh(sb.as_ref(), "x='a  b'; printf '%s|' \"$x\" $((1+2))").await;
    assert_eq!((code, out.as_str()), (Some(0), "a  b|3|"));
    // argv without a shell, cwd, env (profile + request), stdin.
    sb.mkdir("sub/dir", true).await.unwrap();
    let mut req = ExecRequest::new(["sh", "-c", "pwd; echo \"$A $FROM_PROFILE\"; cat"]);
    req.cwd = Some("sub/dir".into());
    req.env.insert("A".into(), "x y".into());
    req.stdin = Some(Bytes::from_static(b"from stdin\n"));
    let (code, out, _) = run(sb.as_ref(), req).await;
    assert_eq!(code, Some(0));
    assert_eq!(out, "/workspace/sub/dir\nx y p1\nfrom stdin\n");
    // No stdin: EOF at once, never a hang.
    let (code, out, _) = sh(sb.as_ref(), "cat; echo done").await;
    assert_eq!((code, out.as_str()), (Some(0), "done\n"));
    // A missing program is 127 with the shell's message.
    let (code, _, err) = run(sb.as_ref(), ExecRequest::new(["no-such-program-x"])).await;
    assert_eq!(code, Some(127), "{err}");
    // Binary output is byte-exact.
    let (code, out, _) = sh(sb.as_ref(), "printf 'a\\000b\\377' | od -An -tx1").await;
    assert_eq!(code, Some(0));
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["61", "00", "62", "ff"]
    );
    assert!(
        e.stub
            .execs()
            .iter()
            .all(|x| x.protocol == "v5.channel.k8s.io")
    );
}

#[tokio::test]
async fn timeout_kills_the_remote_process_tree() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("timeout")).await.unwrap();
    let token = format!("{}", 1000 + std::process::id() % 1000);
    let line = format!("sleep {token}.5 & setsid sleep {token}.6 & sleep {token}.7; echo never");
    let mut req = ExecRequest::shell(line);
    req.timeout = Some(Duration::from_millis(800));
    let t0 = Instant::now();
    let outcome = sb.exec(req, None).await.unwrap();
    assert!(outcome.timed_out);
    assert!(t0.elapsed() < Duration::from_secs(15));
    // Nothing of the tree survives (the stub pods share the host's PIDs).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {token}\\.")])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes left: {left}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn file_operations_round_trip() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("files")).await.unwrap();
    let bin: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
    sb.write("a/b/bin.dat", &bin).await.unwrap();
    assert_eq!(sb.read("a/b/bin.dat", None).await.unwrap(), bin);
    assert_eq!(
        sb.read(
            "/workspace/a/b/bin.dat",
            Some(ByteRange { offset: 10, len: 5 })
        )
        .await
        .unwrap(),
        bin[10..15]
    );
    sb.write("empty", b"").await.unwrap();
    assert_eq!(sb.read("empty", None).await.unwrap(), b"");
    assert!(sb.read("missing", None).await.unwrap_err().is_not_found());
    assert!(matches!(
        sb.read("a", None).await.unwrap_err(),
        BackendError::IsADirectory(_)
    ));
    // Files land in the PVC directory.
    let pvc = e.stub.pvc_dir(NS, &e.prov.object_name("files"));
    assert_eq!(std::fs::read(pvc.join("a/b/bin.dat")).unwrap(), bin);
    sb.append("log.txt", b"one\n").await.unwrap();
    sb.append("log.txt", b"two\n").await.unwrap();
    assert_eq!(sb.read("log.txt", None).await.unwrap(), b"one\ntwo\n");
    assert!(sb.create_new("c.txt", b"1").await.unwrap());
    assert!(!sb.create_new("c.txt", b"2").await.unwrap());
    assert_eq!(sb.read("c.txt", None).await.unwrap(), b"1");
    std::os::unix::fs::symlink("a", pvc.join("link")).unwrap();
    std::fs::write(pvc.join("we ird\nname"), b"x").unwrap();
    let list = sb.list("").await.unwrap();
    let names: Vec<&str> = list.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "c.txt", "empty", "link", "log.txt", "we ird\nname"]
    );
    let link = list.iter().find(|s| s.name == "link").unwrap();
    assert_eq!(link.kind, FileKind::Symlink);
    assert!(link.target_is_dir);
    assert_eq!(link.link_target.as_deref(), Some("a"));
    let st = sb.stat("a/b/bin.dat").await.unwrap();
    assert_eq!(
        (st.kind, st.size, st.name.as_str()),
        (FileKind::File, 200_000, "bin.dat")
    );
    assert!(st.modified.is_some());
    assert!(sb.stat("nope").await.unwrap_err().is_not_found());
    assert!(matches!(
        sb.list("c.txt").await.unwrap_err(),
        BackendError::NotADirectory(_)
    ));
    sb.rename("c.txt", "d/c2.txt").await.unwrap();
    assert_eq!(sb.read("d/c2.txt", None).await.unwrap(), b"1");
    sb.mkdir("m", false).await.unwrap();
    assert!(matches!(
        sb.mkdir("m", false).await.unwrap_err(),
        BackendError::AlreadyExists(_)
    ));
    assert!(sb.remove("a", false).await.is_err());
    sb.remove("a", true).await.unwrap();
    assert!(sb.stat("a").await.unwrap_err().is_not_found());
    // Streamed upload (v5 closes stdin with the close frame).
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let n = sb
        .write_stream("s/big", Box::new(std::io::Cursor::new(big.clone())))
        .await
        .unwrap();
    assert_eq!(n, big.len() as u64);
    assert_eq!(sb.read("s/big", None).await.unwrap(), big);
    // Tar in and out, like kubectl cp.
    let k = KubernetesSandbox::new(
        kube_client(&e.stub).await,
        NS,
        &e.prov.object_name("files"),
        BTreeMap::new(),
        None,
    );
    let (tx, mut rx) = mpsc::channel::<Bytes>(16);
    let collect = async {
        let mut v = Vec::new();
        while let Some(b) = rx.recv().await {
            v.extend_from_slice(&b);
        }
        v
    };
    let (n, archive) = tokio::join!(k.download_tar("s", tx), collect);
    assert_eq!(n.unwrap(), archive.len() as u64);
    k.upload_tar("copy", Bytes::from(archive)).await.unwrap();
    assert_eq!(sb.read("copy/big", None).await.unwrap(), big);
}

/// A tar archive of `(name, kind, link target or contents)` members.
fn tar_of(members: &[(&str, tar::EntryType, &str)]) -> Bytes {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        if kind.is_symlink() {
            h.set_size(0);
            h.set_link_name(data).unwrap();
            b.append_data(&mut h, name, &b""[..]).unwrap();
        } else {
            h.set_size(data.len() as u64);
            b.append_data(&mut h, name, data.as_bytes()).unwrap();
        }
    }
    Bytes::from(b.into_inner().unwrap())
}

/// The tar transfers refuse links out of the workspace — an existing one
/// in the way, or one the archive itself makes — on v5 and on v4 (where
/// the list of directories to check travels ahead of the archive on the
/// same counted stdin), and nothing lands outside.
#[tokio::test]
async fn tar_transfers_refuse_links_out_of_the_workspace() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("tar")).await.unwrap();
    let pvc = e.stub.pvc_dir(NS, &e.prov.object_name("tar"));
    // The pod's /tmp is writable, so a write that escaped would stay.
    std::os::unix::fs::symlink("/tmp", pvc.join("out")).unwrap();
    std::fs::create_dir_all(pvc.join("in/sub")).unwrap();
    std::os::unix::fs::symlink("sub", pvc.join("in/l")).unwrap();
    std::fs::write(pvc.join("in/sub/f.txt"), "f").unwrap();
    for v4 in [false, true] {
        e.stub.switches.v4_only.store(v4, Ordering::Relaxed);
        let k = KubernetesSandbox::new(
            kube_client(&e.stub).await,
            NS,
            &e.prov.object_name("tar"),
            BTreeMap::new(),
            None,
        );
        let (tx, _rx) = mpsc::channel::<Bytes>(16);
        let err = k.download_tar("out", tx).await.unwrap_err();
        assert!(matches!(err, BackendError::Escapes(_)), "v4 {v4}: {err}");
        let file = tar_of(&[("x.txt", tar::EntryType::Regular, "x")]);
        let through = tar_of(&[("out/x.txt", tar::EntryType::Regular, "x")]);
        let own_link = tar_of(&[
            ("l2", tar::EntryType::Symlink, "/tmp"),
            ("l2/y.txt", tar::EntryType::Regular, "y"),
        ]);
        for (dir, archive) in [("out", &file), ("", &through), ("", &own_link)] {
            let err = k.upload_tar(dir, archive.clone()).await.unwrap_err();
            assert!(matches!(err, BackendError::Escapes(_)), "v4 {v4}: {err}");
        }
        let (code, out, _) = sh(sb.as_ref(), "ls -A /tmp; ls -A").await;
        assert_eq!(code, Some(0));
        assert!(!out.contains("x.txt") && !out.contains("y.txt"), "{out}");
        assert!(!out.contains("l2"), "{out}");
        // A tree whose links stay inside goes both ways, links as links.
        let (tx, mut rx) = mpsc::channel::<Bytes>(16);
        let collect = async {
            let mut v = Vec::new();
            while let Some(b) = rx.recv().await {
                v.extend_from_slice(&b);
            }
            v
        };
        let (n, archive) = tokio::join!(k.download_tar("in", tx), collect);
        assert_eq!(n.unwrap(), archive.len() as u64);
        let dest = format!("copy-{v4}");
        k.upload_tar(&format!("in/l/{dest}"), Bytes::from(archive))
            .await
            .unwrap();
        let copy = pvc.join("in/sub").join(&dest);
        assert_eq!(
            std::fs::read_to_string(copy.join("sub/f.txt")).unwrap(),
            "f"
        );
        assert_eq!(
            std::fs::read_link(copy.join("l")).unwrap().to_str(),
            Some("sub")
        );
    }
}

async fn kube_client(stub: &Stub) -> kube::Client {
    let mut config = kube::Config::new(stub.url.parse().unwrap());
    config.default_namespace = NS.into();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn v4_only_servers_still_get_stdin_and_exit_codes() {
    if !ready() {
        return;
    }
    let e = env().await;
    e.stub.switches.v4_only.store(true, Ordering::Relaxed);
    let sb = e.prov.provision(&spec("v4")).await.unwrap();
    let mut req = ExecRequest::shell("cat; echo after-eof; exit 4");
    req.stdin = Some(Bytes::from_static(b"in\n"));
    let (code, out, _) = run(sb.as_ref(), req).await;
    assert_eq!((code, out.as_str()), (Some(4), "in\nafter-eof\n"));
    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
    sb.write("x.bin", &data).await.unwrap();
    assert_eq!(sb.read("x.bin", None).await.unwrap(), data);
    let n = sb
        .write_stream("y.bin", Box::new(std::io::Cursor::new(data.clone())))
        .await
        .unwrap();
    assert_eq!(n, data.len() as u64);
    assert_eq!(sb.read("y.bin", None).await.unwrap(), data);
    let execs = e.stub.execs();
    assert!(!execs.is_empty());
    assert!(
        execs.iter().all(|x| x.protocol == "v4.channel.k8s.io"),
        "{execs:?}"
    );
}

#[tokio::test]
async fn image_pull_backoff_fails_fast_with_the_reason() {
    if !ready() {
        return;
    }
    let e = env().await;
    e.stub
        .switches
        .image_pull_backoff
        .store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let err = match e.prov.provision(&spec("pull")).await {
        Ok(_) => panic!("a pod that cannot pull its image was accepted"),
        Err(err) => err,
    };
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let text = err.to_string();
    assert!(
        text.contains("ImagePullBackOff") || text.contains("ErrImagePull"),
        "{text}"
    );
    // find reports it as failed; the PVC is kept.
    let info = e.prov.find("pull").await.unwrap().unwrap();
    assert!(matches!(info.state, SandboxState::Failed(_)), "{info:?}");
    assert!(e.stub.has_pvc(NS, &e.prov.object_name("pull")));
    // Once the image pulls, create replaces the Pod and keeps the PVC.
    e.stub
        .switches
        .image_pull_backoff
        .store(false, Ordering::Relaxed);
    let sb = e.prov.create(&spec("pull")).await.unwrap();
    assert_eq!(sh(sb.as_ref(), "echo ok").await.1, "ok\n");
}

#[tokio::test]
async fn unschedulable_fails_fast() {
    if !ready() {
        return;
    }
    let e = env().await;
    e.stub.switches.unschedulable.store(true, Ordering::Relaxed);
    let err = e.prov.provision(&spec("sched")).await.err().unwrap();
    assert!(err.to_string().contains("Unschedulable"), "{err}");
}

#[tokio::test]
async fn pending_pods_are_waited_for() {
    if !ready() {
        return;
    }
    let e = env().await;
    e.stub.switches.pending_ms.store(1200, Ordering::Relaxed);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let prov = e.prov.with_events(Arc::new(move |ev| {
        s2.lock().unwrap().push(serde_json::to_value(&ev).unwrap())
    }));
    let t0 = Instant::now();
    let sb = prov.provision(&spec("slow")).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(1000));
    assert_eq!(sh(sb.as_ref(), "echo up").await.1, "up\n");
    let seen = seen.lock().unwrap();
    let phases: Vec<&str> = seen
        .iter()
        .filter(|v| v["type"] == "pod_phase")
        .filter_map(|v| v["phase"].as_str())
        .collect();
    assert_eq!(phases, ["Pending", "Running"], "{seen:?}");
    assert!(seen.iter().any(|v| v["type"] == "exec_started"));
    assert!(
        seen.iter()
            .any(|v| v["type"] == "exec_exited" && v["exit_code"] == 0)
    );
}

#[tokio::test]
async fn suspend_keeps_files_reattach_replaces_bad_pods_destroy_removes_all() {
    if !ready() {
        return;
    }
    let e = env().await;
    e.stub
        .switches
        .delete_delay_ms
        .store(600, Ordering::Relaxed);
    let name = e.prov.object_name("life");
    let sb = e.prov.provision(&spec("life")).await.unwrap();
    sb.write("keep.txt", b"state").await.unwrap();
    e.prov.suspend("life").await.unwrap();
    assert!(e.stub.has_pvc(NS, &name));
    // The Pod is terminating; reattach waits for it, then makes a new one.
    let info = e.prov.find("life").await.unwrap().unwrap();
    assert_eq!(info.state, SandboxState::Suspended);
    assert_eq!(info.labels[labels::USER], "alice");
    let list = e.prov.list().await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].workspace_id, "life");
    assert_eq!(list[0].state, SandboxState::Suspended);
    let sb = e.prov.attach(&info).await.unwrap();
    assert_eq!(sb.read("keep.txt", None).await.unwrap(), b"state");
    // A Pod in a bad phase is replaced; the files stay.
    e.stub.fail_pod(NS, &name);
    let info = e.prov.find("life").await.unwrap().unwrap();
    assert!(matches!(info.state, SandboxState::Failed(_)));
    let sb = e.prov.create(&spec("life")).await.unwrap();
    assert_eq!(sb.read("keep.txt", None).await.unwrap(), b"state");
    // Exec on a deleted pod: unavailable, not a hang.
    e.stub.switches.delete_delay_ms.store(0, Ordering::Relaxed);
    e.prov.suspend("life").await.unwrap();
    assert!(matches!(
        sb.exec(ExecRequest::shell("true"), None).await.unwrap_err(),
        BackendError::Unavailable { .. }
    ));
    e.prov.destroy("life").await.unwrap();
    assert!(!e.stub.has_pvc(NS, &name) && !e.stub.has_pod(NS, &name));
    assert!(e.prov.find("life").await.unwrap().is_none());
    assert!(e.prov.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn delete_pvc_on_close_drops_the_files_on_suspend() {
    if !ready() {
        return;
    }
    let e = env_with(|o| o.delete_pvc_on_close = true).await;
    let name = e.prov.object_name("gone");
    let sb = e.prov.provision(&spec("gone")).await.unwrap();
    sb.write("f", b"1").await.unwrap();
    e.prov.suspend("gone").await.unwrap();
    assert!(!e.stub.has_pvc(NS, &name));
    let sb = e.prov.provision(&spec("gone")).await.unwrap();
    assert!(sb.read("f", None).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn a_dropped_connection_is_an_error_not_a_hang() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("drop")).await.unwrap();
    e.stub.switches.drop_mid_exec.store(true, Ordering::Relaxed);
    let res = tokio::time::timeout(
        Duration::from_secs(15),
        sb.exec(ExecRequest::shell("echo first; sleep 20; echo never"), None),
    )
    .await
    .expect("exec hung after the connection dropped");
    assert!(
        matches!(res, Err(BackendError::Unavailable { .. })),
        "{res:?}"
    );
}

#[tokio::test]
async fn a_missing_status_frame_is_an_error_not_exit_zero() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("nostatus")).await.unwrap();
    e.stub.switches.no_status.store(true, Ordering::Relaxed);
    let res = tokio::time::timeout(
        Duration::from_secs(15),
        sb.exec(ExecRequest::shell("echo hi"), None),
    )
    .await
    .expect("exec hung without a status frame");
    let err = res.unwrap_err();
    assert!(err.to_string().contains("without an exit status"), "{err}");
}

#[tokio::test]
async fn long_lived_process_over_stdio() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("proc")).await.unwrap();
    let mut p = sb
        .spawn(SpawnRequest {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "while read l; do echo \"got $l\"; done; echo bye >&2; exit 5".into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut lines = BufReader::new(p.stdout).lines();
    for i in 0..3 {
        p.stdin
            .write_all(format!("m{i}\n").as_bytes())
            .await
            .unwrap();
        p.stdin.flush().await.unwrap();
        let l = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(l, format!("got m{i}"));
    }
    p.stdin.shutdown().await.unwrap();
    drop(p.stdin);
    let mut err = String::new();
    p.stderr.read_to_string(&mut err).await.unwrap();
    assert_eq!(err, "bye\n");
    let code = tokio::time::timeout(Duration::from_secs(10), p.control.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, Some(5));
    // Kill ends a process that would run forever.
    let p = sb
        .spawn(SpawnRequest {
            argv: vec!["sleep".into(), "3600".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::time::timeout(Duration::from_secs(15), p.control.kill())
        .await
        .unwrap()
        .unwrap();
    assert!(p.control.try_status().is_some());
}

async fn call(ws: &Workspace, tool: &str, args: serde_json::Value) -> ToolResult {
    ws.call_tool(ToolCall {
        tool: tool.into(),
        session: "s".into(),
        args,
        ..Default::default()
    })
    .await
}

#[tokio::test]
async fn the_engine_works_on_a_pod() {
    if !ready() {
        return;
    }
    let e = env().await;
    let sb = e.prov.provision(&spec("engine")).await.unwrap();
    let ws = Workspace::open(sb.clone(), WorkspaceConfig::default(), EventBus::default())
        .await
        .unwrap();
    let r = call(
        &ws,
        "Bash",
        json!({"command": "echo hello from the pod; pwd"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Success, "{r:?}");
    let text = r.text();
    assert!(text.contains("hello from the pod"), "{text}");
    assert!(text.contains("/workspace"), "{text}");
    let r = call(
        &ws,
        "Write",
        json!({"file_path": "/workspace/src/main.rs", "content": "fn main() {\n    println!(\"hi\");\n}\n"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Success, "{r:?}");
    let r = call(&ws, "Read", json!({"file_path": "/workspace/src/main.rs"})).await;
    assert_eq!(r.state, ToolState::Success, "{r:?}");
    assert!(r.text().contains("println"));
    let r = call(
        &ws,
        "Edit",
        json!({"file_path": "/workspace/src/main.rs", "old_string": "hi", "new_string": "bye"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Success, "{r:?}");
    assert_eq!(
        sb.read("src/main.rs", None).await.unwrap(),
        b"fn main() {\n    println!(\"bye\");\n}\n"
    );
    // Glob and Grep run `rg` in the Pod (no host view of the files).
    assert!(sb.host_root().is_none());
    let r = call(&ws, "Glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(r.state, ToolState::Success, "{r:?}");
    assert!(r.text().contains("main.rs"), "{r:?}");
    let r = call(
        &ws,
        "Grep",
        json!({"pattern": "println", "output_mode": "content"}),
    )
    .await;
    assert_eq!(r.state, ToolState::Success, "{r:?}");
    assert!(r.text().contains("bye"), "{r:?}");
}
