//! The OpenSandbox backend against the fake lifecycle server + execd on
//! 127.0.0.1: lifecycle, exec (C15, C17, C18, C19), files (mode `644`),
//! faults, the server proxy, and a workspace with the built-in tools.

use crate::support::cloud;
use crate::support::fake_opensandbox;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fake_opensandbox::{FakeOpenSandbox, KEY};
use serde_json::json;
use wsbench::backend::opensandbox::{OpenSandboxOptions, OpenSandboxProvisioner};
use wsbench::backend::{
    BackendError, ExecRequest, FileKind, Provisioner, SandboxState, SpawnRequest, labels,
};

use cloud::{sh, spec};

pub(crate) fn opts(f: &FakeOpenSandbox) -> OpenSandboxOptions {
    OpenSandboxOptions {
        api_key: Some(KEY.into()),
        api_url: Some(f.api_url()),
        max_retries: 3,
        request_timeout_secs: 10,
        ..Default::default()
    }
}

async fn setup() -> Option<(FakeOpenSandbox, OpenSandboxProvisioner)> {
    cloud::setup(FakeOpenSandbox::start(), |f| {
        OpenSandboxProvisioner::new(opts(f))
    })
    .await
}

#[tokio::test]
async fn lifecycle_exec_files_pause_resume_reattach_delete() {
    let Some((f, p)) = setup().await else { return };
    let mut s = spec("ws-1");
    s.labels.insert("team".into(), "a".into());
    s.labels.insert(labels::WORKSPACE_ID.into(), "evil".into());
    let sb = p.provision(&s).await.unwrap();
    assert_eq!(sb.workdir(), "/workspace");
    let caps = sb.capabilities();
    assert!(!caps.byte_exact_output && !caps.exec_stdin && !caps.processes);
    let id = f.ids()[0].clone();
    {
        let all = f.state.sandboxes.lock().unwrap();
        assert_eq!(all[&id].metadata[labels::WORKSPACE_ID], "ws-1");
        assert_eq!(all[&id].entrypoint, ["tail", "-f", "/dev/null"]);
        assert_eq!(
            all[&id].resource_limits,
            json!({"cpu": "1", "memory": "2Gi"})
        );
        assert!(all[&id].expires_at.is_some());
    }

    let (o, out, err) = sh(sb.as_ref(), "echo out; echo err >&2; exit 3").await;
    assert_eq!(
        (o.exit_code, out.as_str(), err.as_str()),
        (Some(3), "out\n", "err\n")
    );
    let (o, out, _) = sh(sb.as_ref(), "echo hi; echo; pwd").await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "hi\n\n/workspace\n"));

    // C18: execd receives the user's line verbatim and a real shell runs it.
    let c18 = "sh -c 'sleep 0.2; echo one > one.txt' & echo two > two.txt && echo three > three.txt; wait; cat one.txt two.txt three.txt";
    let (o, out, _) = sh(sb.as_ref(), c18).await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "one\ntwo\nthree\n"));
    let last = f.state.commands.lock().unwrap().last().unwrap().clone();
    assert_eq!(last["command"], c18);
    assert_eq!(last["cwd"], "/workspace");
    assert_eq!(last["background"], false);

    // C17: missing program → 127 with the shell's message.
    let (o, _, err) = sh(sb.as_ref(), "sudo chmod 600 /root/.passwd-s3fs").await;
    assert_eq!(o.exit_code, Some(127));
    assert!(err.contains("not found"), "{err}");

    // Env and cwd through execd's fields.
    let mut req = ExecRequest::shell("echo $FOO; pwd");
    req.env.insert("FOO".into(), "x y".into());
    req.cwd = Some("/tmp".into());
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    sb.exec(req, Some(tx)).await.unwrap();
    let mut out = Vec::new();
    while let Some(c) = rx.recv().await {
        out.extend_from_slice(&c.data);
    }
    assert_eq!(out, b"x y\n/tmp\n");
    // stdin is refused up front, not silently dropped.
    let mut req = ExecRequest::new(["cat"]);
    req.stdin = Some(bytes::Bytes::from_static(b"x"));
    assert!(matches!(
        sb.exec(req, None).await.unwrap_err(),
        BackendError::Unsupported { .. }
    ));
    assert!(sb.spawn(SpawnRequest::default()).await.is_err());

    // Files: upload mode is the octal digits 644 → 0o644 on disk.
    sb.write("d/e/f.txt", b"0123456789").await.unwrap();
    let up = f.state.uploads.lock().unwrap().last().unwrap().clone();
    assert_eq!(up, json!({"path": "/workspace/d/e/f.txt", "mode": 644}));
    let st = sb.stat("d/e/f.txt").await.unwrap();
    assert_eq!(
        (st.kind, st.size, st.mode),
        (FileKind::File, 10, Some(0o644))
    );
    assert_eq!(sb.read("d/e/f.txt", None).await.unwrap(), b"0123456789");
    let r = sb
        .read(
            "d/e/f.txt",
            Some(wsbench::backend::ByteRange { offset: 2, len: 3 }),
        )
        .await
        .unwrap();
    assert_eq!(r, b"234");
    assert!(
        f.rec().matching("/files/download").iter().any(|s| s
            .headers
            .get("range")
            .map(String::as_str)
            == Some("bytes=2-4"))
    );
    assert!(sb.read("nope", None).await.unwrap_err().is_not_found());
    assert!(matches!(
        sb.read("d", None).await.unwrap_err(),
        BackendError::IsADirectory(_)
    ));
    let names: Vec<String> = sb
        .list("d")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["e"]);
    assert_eq!(sb.list("d").await.unwrap()[0].kind, FileKind::Dir);
    assert!(sb.list("nope").await.unwrap_err().is_not_found());
    assert!(sb.create_new("d/n", b"1").await.unwrap());
    assert!(!sb.create_new("d/n", b"2").await.unwrap());
    sb.rename("d/n", "d/m").await.unwrap();
    assert_eq!(sb.read("d/m", None).await.unwrap(), b"1");
    sb.remove("d", true).await.unwrap();
    assert!(sb.stat("d").await.unwrap_err().is_not_found());
    let n = sb
        .write_stream("big", Box::new(std::io::Cursor::new(vec![1u8; 200_000])))
        .await
        .unwrap();
    assert_eq!(n, 200_000);

    // Pause (polls Pausing → Paused), twice is fine; find; resume by attach.
    p.suspend("ws-1").await.unwrap();
    assert_eq!(f.sandbox_state(&id), Some("Paused"));
    p.suspend("ws-1").await.unwrap();
    let p2 = OpenSandboxProvisioner::new(opts(&f)).unwrap();
    let info = p2.find("ws-1").await.unwrap().unwrap();
    assert_eq!(info.state, SandboxState::Suspended);
    assert_eq!(info.labels["team"], "a");
    let q = f
        .rec()
        .matching("/v1/sandboxes")
        .iter()
        .rev()
        .find(|r| r.method == "GET" && r.path == "/v1/sandboxes")
        .unwrap()
        .query
        .clone();
    assert!(q.contains("metadata=wsbench.workspace.id%3Dws-1"), "{q}");
    assert!(
        q.contains("state=Running") && q.contains("state=Paused"),
        "{q}"
    );
    let sb2 = p2.provision(&spec("ws-1")).await.unwrap();
    assert_eq!(f.ids().len(), 1);
    assert_eq!(f.sandbox_state(&id), Some("Running"));
    assert_eq!(sb2.read("one.txt", None).await.unwrap(), b"one\n");
    // Resume of a running sandbox: the 409 means "already there".
    p2.resume("ws-1").await.unwrap();
    p2.keep_alive("ws-1", Duration::from_secs(7200))
        .await
        .unwrap();
    let exp = f.state.sandboxes.lock().unwrap()[&id]
        .expires_at
        .clone()
        .unwrap();
    let exp = chrono::DateTime::parse_from_rfc3339(&exp).unwrap();
    assert!(exp > chrono::Utc::now() + chrono::Duration::seconds(7000));
    assert_eq!(p2.list().await.unwrap().len(), 1);

    p2.destroy("ws-1").await.unwrap();
    assert!(f.ids().is_empty());
    p2.destroy("ws-1").await.unwrap();
    assert!(p2.find("ws-1").await.unwrap().is_none());
    let e = p2.suspend("ws-1").await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
}

#[tokio::test]
async fn c15_c19_timeout_interrupts_the_command() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-t")).await.unwrap();
    let t0 = Instant::now();
    let mut req = ExecRequest::shell("echo started; sleep 10");
    req.timeout = Some(Duration::from_secs(1));
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let o = sb.exec(req, Some(tx)).await.unwrap();
    assert!(o.timed_out, "{o:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(&rx.recv().await.unwrap().data[..], b"started\n");
    let ints = f.state.interrupts.lock().unwrap().clone();
    assert_eq!(ints.len(), 1);
    assert!(ints[0].1, "the command was still running when interrupted");
    let id = f.ids()[0].clone();
    assert!(f.boxed(&id).running().is_empty());
    // execd's own timeout is a backstop, never shorter than ours.
    let cmds = f.state.commands.lock().unwrap().clone();
    let body = cmds
        .iter()
        .find(|c| c["command"].as_str().unwrap().contains("sleep 10"))
        .unwrap();
    assert!(body["timeout"].as_u64().unwrap() >= 1000);
    assert!(body["envs"]["WSBENCH_EXEC_ID"].is_string());
    // The marker sweep followed the interrupt.
    assert!(cmds.iter().any(|c| {
        c["command"]
            .as_str()
            .unwrap()
            .contains("m='WSBENCH_EXEC_ID=")
    }));
    // No timeout: none sent.
    let (o, _, _) = sh(sb.as_ref(), "true").await;
    assert_eq!(o.exit_code, Some(0));
    let mut req = ExecRequest::shell("true");
    req.timeout = None;
    sb.exec(req, None).await.unwrap();
    assert!(
        f.state
            .commands
            .lock()
            .unwrap()
            .last()
            .unwrap()
            .get("timeout")
            .is_none()
    );
    // Through the Bash tool: the workspace default applies (C19).
    cloud::bash_default_timeout_applies(sb.clone(), 2000).await;
}

#[tokio::test]
async fn event_stream_split_bytewise_and_cut() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-s")).await.unwrap();
    // Every HTTP chunk one byte: frames and UTF-8 characters split anywhere.
    f.faults().split_bytes.store(true, Ordering::Relaxed);
    let (o, out, err) = sh(
        sb.as_ref(),
        "printf 'héllo → 世界\\n'; printf 'é\\n' >&2; exit 4",
    )
    .await;
    assert_eq!(
        (o.exit_code, out.as_str(), err.as_str()),
        (Some(4), "héllo → 世界\n", "é\n")
    );
    f.faults().split_bytes.store(false, Ordering::Relaxed);
    // A stream cut mid-command: an error, and the command is interrupted.
    f.faults().cut_stream_after.store(1, Ordering::Relaxed);
    let e = sb
        .exec(
            ExecRequest::shell("echo a; sleep 0.3; echo b; sleep 10"),
            None,
        )
        .await
        .unwrap_err();
    f.faults().cut_stream_after.store(0, Ordering::Relaxed);
    assert!(e.to_string().contains("stream"), "{e}");
    let ints = f.state.interrupts.lock().unwrap().clone();
    assert_eq!(ints.len(), 1);
    assert!(ints[0].1);
}

#[tokio::test]
async fn server_proxy_mode_sends_the_key_to_the_proxy() {
    let Some((f, _)) = setup().await else { return };
    let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
        use_server_proxy: true,
        ..opts(&f)
    })
    .unwrap();
    let sb = p.create(&spec("ws-proxy")).await.unwrap();
    let (o, out, _) = sh(sb.as_ref(), "echo via proxy").await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "via proxy\n"));
    sb.write("a.txt", b"A").await.unwrap();
    assert_eq!(sb.read("a.txt", None).await.unwrap(), b"A");
    let seen = f.rec().matching("/proxy/44772/command");
    assert!(!seen.is_empty());
    assert_eq!(seen[0].headers["open-sandbox-api-key"], KEY);
    // Through the proxy, a deleted sandbox is "gone", not a missing file.
    p.destroy("ws-proxy").await.unwrap();
    let e = sb.read("a.txt", None).await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
    // Direct mode never sends the key to execd, but does send the
    // endpoint's headers.
    let (f2, p2) = setup().await.unwrap();
    let sb2 = p2.create(&spec("ws-direct")).await.unwrap();
    sh(sb2.as_ref(), "true").await;
    let seen = f2.rec().matching("/command");
    assert!(!seen[0].headers.contains_key("open-sandbox-api-key"));
    assert!(seen[0].headers[fake_opensandbox::ROUTE_HEADER].ends_with("-44772"));
}

#[tokio::test]
async fn faults_map_to_clear_errors_and_retries() {
    let Some((f, p)) = setup().await else { return };
    let bad = OpenSandboxProvisioner::new(OpenSandboxOptions {
        api_key: Some("nope-secret".into()),
        ..opts(&f)
    })
    .unwrap();
    let e = bad.list().await.unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("INVALID_API_KEY") && msg.contains("OPEN_SANDBOX_API_KEY"),
        "{msg}"
    );
    assert!(!msg.contains("nope-secret"));

    f.faults()
        .inject("/v1/sandboxes", 429, Some(1), "RATE_LIMITED", "slow down");
    let t0 = Instant::now();
    let sb = p.create(&spec("ws-f")).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(900));
    f.faults()
        .inject("/v1/sandboxes", 500, None, "INTERNAL", "boom");
    assert!(p.find("ws-f").await.unwrap().is_some());
    // 409 with the service's code when the state is wrong and stays wrong.
    let id = f.ids()[0].clone();
    f.faults().inject(
        "/pause",
        409,
        None,
        "DOCKER::SANDBOX_NOT_RUNNING",
        "sandbox is not running",
    );
    let e = p.suspend("ws-f").await.unwrap_err();
    assert!(e.to_string().contains("DOCKER::SANDBOX_NOT_RUNNING"), "{e}");
    assert!(matches!(
        e,
        BackendError::Remote {
            status: Some(409),
            ..
        }
    ));
    // 404 after N calls: the sandbox is gone.
    *f.faults().gone_after.lock().unwrap() = Some((format!("/v1/sandboxes/{id}"), 0));
    let e = p.resume("ws-f").await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
    *f.faults().gone_after.lock().unwrap() = None;
    f.state.sandboxes.lock().unwrap().remove(&id);
    let e = sb.exec(ExecRequest::shell("true"), None).await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
    // With the faults gone, the service works again.
    p.create(&spec("x")).await.unwrap();
}

#[tokio::test]
async fn list_pages_and_filters() {
    let Some((f, p)) = setup().await else { return };
    f.state.page_cap.store(2, Ordering::Relaxed);
    for i in 0..5 {
        p.create(&spec(&format!("w{i}"))).await.unwrap();
    }
    let all = p.list().await.unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(p.find("w3").await.unwrap().unwrap().workspace_id, "w3");
    assert!(
        f.rec()
            .matching("/v1/sandboxes")
            .iter()
            .any(|r| r.query.contains("page=3"))
    );
}

#[tokio::test]
async fn workspace_tools_run_on_opensandbox() {
    let Some((_f, p)) = setup().await else { return };
    cloud::builtin_tools_work(p.create(&spec("ws-tools")).await.unwrap()).await;
}

/// Contract §11 point 16: a sandbox made by a failed `create` is deleted
/// (no user data yet); one that fails on reattach is kept.
#[tokio::test]
async fn failed_create_cleans_up_failed_attach_keeps_data() {
    let Some((f, _)) = setup().await else { return };
    let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
        ready_timeout_secs: 1,
        ..opts(&f)
    })
    .unwrap();
    cloud::failed_create_cleans_up_failed_attach_keeps_data(&p, f.faults(), || f.ids(), "/ping")
        .await;
}

/// `timeout_secs = 0` (TOML has no null): a sandbox with no expiry.
#[tokio::test]
async fn zero_timeout_means_no_expiry() {
    let Some((f, _)) = setup().await else { return };
    let p = OpenSandboxProvisioner::new(OpenSandboxOptions {
        timeout_secs: Some(0),
        ..opts(&f)
    })
    .unwrap();
    p.create(&spec("ws-forever")).await.unwrap();
    let id = f.ids()[0].clone();
    assert_eq!(f.state.sandboxes.lock().unwrap()[&id].expires_at, None);
}
