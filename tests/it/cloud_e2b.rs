//! The E2B backend against the fake E2B (control plane + envd) on
//! 127.0.0.1: lifecycle, exec (C15, C17, C18, C19), files, faults, and a
//! workspace with the built-in tools on top.

use crate::support;
use crate::support::cloud;
use crate::support::fake_e2b;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fake_e2b::{FakeE2b, KEY};
use serde_json::json;
use wsbench::backend::cloud::exec_capture;
use wsbench::backend::e2b::{E2bOptions, E2bProvisioner};
use wsbench::backend::{
    BackendError, ExecRequest, FileKind, Provisioner, SandboxState, SpawnRequest, labels,
};

use cloud::{sh, spec};

pub(crate) fn opts(f: &FakeE2b) -> E2bOptions {
    E2bOptions {
        api_key: Some(KEY.into()),
        api_url: Some(f.url()),
        envd_url: Some(f.url()),
        max_retries: 3,
        request_timeout_secs: 10,
        ..Default::default()
    }
}

async fn setup() -> Option<(FakeE2b, E2bProvisioner)> {
    cloud::setup(FakeE2b::start(), |f| E2bProvisioner::new(opts(f))).await
}

#[tokio::test]
async fn lifecycle_exec_files_suspend_reattach_destroy() {
    let Some((f, p)) = setup().await else { return };
    let mut s = spec("ws-1");
    s.labels.insert("team".into(), "a".into());
    // User metadata can never override the reattach key.
    s.labels.insert(labels::WORKSPACE_ID.into(), "evil".into());
    let sb = p.provision(&s).await.unwrap();
    assert_eq!(sb.workdir(), "/home/user/workspace");
    let ids = f.ids();
    assert_eq!(ids.len(), 1);
    {
        let all = f.state.sandboxes.lock().unwrap();
        let md = &all[&ids[0]].metadata;
        assert_eq!(md[labels::WORKSPACE_ID], "ws-1");
        assert_eq!(md["team"], "a");
        assert_eq!(all[&ids[0]].template, "base");
        assert_eq!(all[&ids[0]].timeout, 300);
    }

    // echo, exit code, separate stderr, no inserted newlines.
    let (o, out, err) = sh(sb.as_ref(), "printf 'a\\nb'; printf 'E' >&2; exit 3").await;
    assert_eq!(o.exit_code, Some(3));
    assert!(!o.timed_out);
    assert_eq!(out, "a\nb");
    assert_eq!(err, "E");
    // Exit 0 arrives with no exitCode key at all.
    let (o, out, _) = sh(sb.as_ref(), "echo hi; pwd").await;
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(out, "hi\n/home/user/workspace\n");

    // C18: the line reaches a real shell unchanged.
    let c18 = "sh -c 'sleep 0.2; echo one > one.txt' & echo two > two.txt && echo three > three.txt; wait; cat one.txt two.txt three.txt";
    let (o, out, _) = sh(sb.as_ref(), c18).await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "one\ntwo\nthree\n"));
    let starts = f.state.starts.lock().unwrap().clone();
    let (body, _) = starts
        .iter()
        .rev()
        .find(|(b, _)| b.to_string().contains("one.txt"))
        .unwrap();
    assert_eq!(body["process"]["args"], json!(["-c", c18]));
    // Heredoc, quotes, `&&`.
    let (o, out, _) = sh(sb.as_ref(), "cat <<'EOF' && echo \"q'uote\"\n$HOME x\nEOF").await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "$HOME x\nq'uote\n"));

    // C17: a missing program is the shell's 127 with its message.
    let (o, _, err) = sh(sb.as_ref(), "sudo chmod 600 /root/.passwd-s3fs").await;
    assert_eq!(o.exit_code, Some(127));
    assert!(err.contains("not found"), "{err}");
    // An argv (not a shell line) is quoted word by word.
    let (o, out, err) = exec_capture(
        sb.as_ref(),
        vec!["printf".into(), "%s|".into(), "a b".into(), "it's".into()],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(o.exit_code, Some(0), "{}", String::from_utf8_lossy(&err));
    assert_eq!(out, b"a b|it's|");

    // Environment and cwd.
    let mut req = ExecRequest::shell("echo $FOO; pwd");
    req.env.insert("FOO".into(), "bar baz".into());
    req.cwd = Some("sub".into());
    sb.mkdir("sub", true).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let o = sb.exec(req, Some(tx)).await.unwrap();
    let mut out = Vec::new();
    while let Some(c) = rx.recv().await {
        out.extend_from_slice(&c.data);
    }
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "bar baz\n/home/user/workspace/sub\n"
    );

    // stdin.
    let mut req = ExecRequest::new(["cat"]);
    req.stdin = Some(Bytes::from_static(b"fed \xc3\xa9"));
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let o = sb.exec(req, Some(tx)).await.unwrap();
    let mut out = Vec::new();
    while let Some(c) = rx.recv().await {
        out.extend_from_slice(&c.data);
    }
    assert_eq!((o.exit_code, out.as_slice()), (Some(0), "fed é".as_bytes()));

    // Files.
    sb.write("d/e/f.txt", b"bytes \x00\xff").await.unwrap();
    assert_eq!(sb.read("d/e/f.txt", None).await.unwrap(), b"bytes \x00\xff");
    assert_eq!(
        sb.read(
            "/home/user/workspace/d/e/f.txt",
            Some(wsbench::backend::ByteRange { offset: 1, len: 3 })
        )
        .await
        .unwrap(),
        b"yte"
    );
    assert!(sb.read("nope.txt", None).await.unwrap_err().is_not_found());
    assert!(matches!(
        sb.read("d", None).await.unwrap_err(),
        BackendError::IsADirectory(_)
    ));
    let st = sb.stat("d/e/f.txt").await.unwrap();
    assert_eq!(
        (st.kind, st.size, st.name.as_str()),
        (FileKind::File, 8, "f.txt")
    );
    assert!(st.modified.is_some());
    let names: Vec<String> = sb
        .list("d")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["e"]);
    assert!(sb.list("nope").await.unwrap_err().is_not_found());
    assert!(sb.stat("nope").await.unwrap_err().is_not_found());
    assert!(sb.create_new("d/new.txt", b"1").await.unwrap());
    assert!(!sb.create_new("d/new.txt", b"2").await.unwrap());
    assert_eq!(sb.read("d/new.txt", None).await.unwrap(), b"1");
    sb.rename("d/new.txt", "d/x/renamed.txt").await.unwrap();
    assert!(sb.stat("d/new.txt").await.unwrap_err().is_not_found());
    assert!(sb.remove("d", false).await.is_err());
    sb.remove("d", true).await.unwrap();
    assert!(sb.stat("d").await.unwrap_err().is_not_found());
    assert!(sb.remove("d", true).await.unwrap_err().is_not_found());
    let n = sb
        .write_stream(
            "big.bin",
            Box::new(std::io::Cursor::new(vec![7u8; 300_000])),
        )
        .await
        .unwrap();
    assert_eq!(n, 300_000);
    assert_eq!(sb.read("big.bin", None).await.unwrap().len(), 300_000);

    // Suspend (pause), find, reattach (connect resumes).
    p.suspend("ws-1").await.unwrap();
    assert_eq!(f.sandbox_state(&ids[0]), Some("paused"));
    // Pausing twice: the service's 409 means "already there".
    p.suspend("ws-1").await.unwrap();
    let info = p.find("ws-1").await.unwrap().unwrap();
    assert_eq!(info.state, SandboxState::Suspended);
    assert_eq!(info.labels["team"], "a");
    // A second process (no cache) reattaches by metadata.
    let p2 = E2bProvisioner::new(opts(&f)).unwrap();
    let sb2 = p2.provision(&spec("ws-1")).await.unwrap();
    assert_eq!(f.ids().len(), 1, "reattached, not re-created");
    assert_eq!(f.sandbox_state(&ids[0]), Some("running"));
    assert_eq!(sb2.read("one.txt", None).await.unwrap(), b"one\n");
    let listed = p2.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].workspace_id, "ws-1");
    p2.keep_alive("ws-1", Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(f.state.sandboxes.lock().unwrap()[&ids[0]].timeout, 3600);

    p2.destroy("ws-1").await.unwrap();
    assert!(f.ids().is_empty());
    assert!(p2.find("ws-1").await.unwrap().is_none());
    p2.destroy("ws-1").await.unwrap();
    // The old handle now reports the sandbox gone.
    let e = sb2
        .exec(ExecRequest::shell("true"), None)
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
}

/// C15: a 1 s timeout on `sleep 10` fires on time, kills the process with
/// SendSignal, and is reported as a timeout.
#[tokio::test]
async fn c15_timeout_kills_with_send_signal() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-c15")).await.unwrap();
    let t0 = Instant::now();
    let mut req = ExecRequest::shell("echo started; sleep 10");
    req.timeout = Some(Duration::from_secs(1));
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let o = sb.exec(req, Some(tx)).await.unwrap();
    let took = t0.elapsed();
    assert!(o.timed_out, "{o:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        rx.recv().await.unwrap().data,
        Bytes::from_static(b"started\n")
    );
    let sigs = f.state.signals.lock().unwrap().clone();
    assert_eq!(sigs.len(), 1, "{sigs:?}");
    assert_eq!(sigs[0].signal, "SIGNAL_SIGKILL");
    assert!(sigs[0].was_running);
    // The process is gone from the sandbox.
    let id = f.ids()[0].clone();
    assert!(f.boxed(&id).running().is_empty());
    // The Connect deadline was the timeout plus slack, never shorter.
    let starts = f.state.starts.lock().unwrap().clone();
    let (_, h) = starts
        .iter()
        .find(|(b, _)| b.to_string().contains("sleep 10"))
        .unwrap();
    let ms: u64 = h["connect-timeout-ms"].parse().unwrap();
    assert!(ms >= 1000, "{ms}");
    // Every command carries the marker, and the timeout swept it.
    assert!(
        starts
            .iter()
            .any(|(b, _)| b.to_string().contains("m='WSBENCH_EXEC_ID="))
    );
    // Cancel works the same way.
    let token = tokio_util::sync::CancellationToken::new();
    let mut req = ExecRequest::shell("sleep 10");
    req.cancel = Some(token.clone());
    let t = tokio::spawn({
        let token = token.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            token.cancel();
        }
    });
    let o = sb.exec(req, None).await.unwrap();
    t.await.unwrap();
    assert!(o.cancelled && !o.timed_out, "{o:?}");
    assert_eq!(f.state.signals.lock().unwrap().len(), 2);
}

/// C19: with no per-command timeout no Connect deadline is sent at all (no
/// hidden 60 s cap); through the Bash tool the workspace default applies
/// and ends the command as a timeout.
#[tokio::test]
async fn c19_no_hidden_transport_deadline() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-c19")).await.unwrap();
    let (o, _, _) = sh(sb.as_ref(), "true").await;
    assert_eq!(o.exit_code, Some(0));
    let mut req = ExecRequest::shell("sleep 0.1");
    req.timeout = None;
    sb.exec(req, None).await.unwrap();
    let starts = f.state.starts.lock().unwrap().clone();
    let (_, h) = starts
        .iter()
        .rev()
        .find(|(b, _)| b.to_string().contains("sleep 0.1"))
        .unwrap();
    assert!(!h.contains_key("connect-timeout-ms"));

    let ws = cloud::bash_default_timeout_applies(sb.clone(), 3000).await;
    let starts = f.state.starts.lock().unwrap().clone();
    let (_, h) = starts
        .iter()
        .rev()
        .find(|(b, _)| b.to_string().contains("sleep 100"))
        .unwrap();
    let ms: u64 = h["connect-timeout-ms"].parse().unwrap();
    assert!(ms >= 3000 && ms != 60000, "{ms}");
    // An explicit per-call timeout overrides the default.
    let t0 = Instant::now();
    let r = support::call(
        &ws,
        "Bash",
        json!({"command": "sleep 100", "timeout": 1000}),
    )
    .await;
    assert!(r.text().contains("timed out after 1000ms"), "{}", r.text());
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn output_is_byte_exact_across_split_utf8_chunks() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-utf8")).await.unwrap();
    f.faults()
        .split_bytes
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let (o, out, err) = sh(sb.as_ref(), "printf 'héllo → 世界'; printf 'é' >&2").await;
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(out, "héllo → 世界");
    assert_eq!(err, "é");
}

#[tokio::test]
async fn stream_cut_mid_command_is_an_error_and_kills_the_process() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-cut")).await.unwrap();
    f.faults()
        .cut_stream_after
        .store(1, std::sync::atomic::Ordering::Relaxed);
    let e = sb
        .exec(
            ExecRequest::shell("echo a; sleep 0.3; echo b; sleep 10"),
            None,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("stream"), "{e}");
    let sigs = f.state.signals.lock().unwrap().clone();
    assert_eq!(sigs.len(), 1);
    f.faults()
        .cut_stream_after
        .store(0, std::sync::atomic::Ordering::Relaxed);
    let id = f.ids()[0].clone();
    assert!(f.boxed(&id).running().is_empty());
}

#[tokio::test]
async fn faults_map_to_clear_errors_and_retries() {
    let Some((f, p)) = setup().await else { return };
    // 401 names the key's places, never the key.
    let bad = E2bProvisioner::new(E2bOptions {
        api_key: Some("wrong-key-123".into()),
        ..opts(&f)
    })
    .unwrap();
    let e = bad.create(&spec("x")).await.err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("401") && msg.contains("E2B_API_KEY"), "{msg}");
    assert!(!msg.contains("wrong-key-123"));
    // No key anywhere.
    if std::env::var("E2B_API_KEY").is_err() {
        let e = E2bProvisioner::new(E2bOptions {
            api_key: None,
            ..opts(&f)
        })
        .unwrap_err();
        assert!(e.to_string().contains("E2B_API_KEY"), "{e}");
    }

    // 429 with Retry-After is honoured, then the call succeeds.
    f.faults()
        .inject("/sandboxes", 429, Some(1), "429", "rate limited");
    let t0 = Instant::now();
    let sb = p.create(&spec("ws-f")).await.unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    // 500 on an idempotent call is retried.
    f.faults().inject("/v2/sandboxes", 500, None, "500", "boom");
    f.faults().inject("/v2/sandboxes", 503, None, "503", "boom");
    assert!(p.find("ws-f").await.unwrap().is_some());
    assert_eq!(
        f.rec()
            .matching("/v2/sandboxes")
            .iter()
            .filter(|r| r.status >= 500)
            .count(),
        2
    );
    // A 500 that persists surfaces with the service's message.
    for _ in 0..4 {
        f.faults()
            .inject("/v2/sandboxes", 500, None, "500", "database down");
    }
    let e = p.find("ws-f").await.unwrap_err();
    assert!(e.to_string().contains("database down"), "{e}");
    // Quota: a 429 that outlasts the retries names the service's message.
    for _ in 0..4 {
        f.faults().inject(
            "/sandboxes",
            429,
            Some(0),
            "429",
            "concurrent sandbox limit reached",
        );
    }
    let e = p.create(&spec("ws-q")).await.err().unwrap();
    assert!(
        matches!(
            e,
            BackendError::Remote {
                status: Some(429),
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("concurrent sandbox limit"), "{e}");
    // 409 on connect is a clear wrong-state error.
    f.faults()
        .inject("/connect", 409, None, "409", "sandbox is being paused");
    let e = p.resume("ws-f").await.unwrap_err();
    assert!(
        matches!(
            e,
            BackendError::Remote {
                status: Some(409),
                ..
            }
        ),
        "{e}"
    );
    // Gone after N calls: envd 502/404 → Unavailable.
    let id = f
        .ids()
        .into_iter()
        .find(|i| f.state.sandboxes.lock().unwrap()[i].metadata[labels::WORKSPACE_ID] == "ws-f")
        .unwrap();
    *f.faults().gone_after.lock().unwrap() = Some(("/sandboxes/".into(), 0));
    let e = p.resume("ws-f").await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
    *f.faults().gone_after.lock().unwrap() = None;
    f.state.sandboxes.lock().unwrap().remove(&id);
    let e = sb.read("x", None).await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
    // Slow answers past the request timeout: a timeout error, not a hang.
    let slow = E2bProvisioner::new(E2bOptions {
        request_timeout_secs: 1,
        max_retries: 0,
        ..opts(&f)
    })
    .unwrap();
    f.faults()
        .delay_ms
        .store(2500, std::sync::atomic::Ordering::Relaxed);
    let t0 = Instant::now();
    let e = slow.list().await.unwrap_err();
    f.faults()
        .delay_ms
        .store(0, std::sync::atomic::Ordering::Relaxed);
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn list_pages_through_every_sandbox() {
    let Some((f, p)) = setup().await else { return };
    f.state
        .page_cap
        .store(2, std::sync::atomic::Ordering::Relaxed);
    for i in 0..5 {
        let mut md = BTreeMap::new();
        md.insert(labels::WORKSPACE_ID.to_string(), format!("w{i}"));
        f.add_foreign(md, if i % 2 == 0 { "running" } else { "paused" });
    }
    f.add_foreign(BTreeMap::new(), "running");
    let all = p.list().await.unwrap();
    assert_eq!(all.len(), 5, "{all:?}");
    assert!(f.rec().count("/v2/sandboxes") >= 3);
    let w3 = p.find("w3").await.unwrap().unwrap();
    assert_eq!(w3.state, SandboxState::Suspended);
    // The filter went out encoded twice: `metadata=wsbench.workspace.id%3Dw3`.
    let q = f
        .rec()
        .matching("/v2/sandboxes")
        .last()
        .unwrap()
        .query
        .clone();
    assert!(q.contains("metadata=wsbench.workspace.id%3Dw3"), "{q}");
}

#[tokio::test]
async fn spawned_process_has_pipes() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-proc")).await.unwrap();
    assert!(sb.capabilities().processes);
    let mut proc_ = sb
        .spawn(SpawnRequest {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "while read l; do echo \"got $l\"; echo err >&2; done".into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    proc_.stdin.write_all(b"one\n").await.unwrap();
    proc_.stdin.flush().await.unwrap();
    let mut lines = tokio::io::BufReader::new(proc_.stdout).lines();
    let l = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.as_deref(), Some("got one"));
    drop(proc_.stdin);
    let code = tokio::time::timeout(Duration::from_secs(10), proc_.control.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, Some(0));
    // kill on a long-running one.
    let p2 = sb
        .spawn(SpawnRequest {
            argv: vec!["sleep".into(), "30".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    p2.control.kill().await.unwrap();
    assert_eq!(p2.control.try_status(), Some(Some(137)));
    // Dropping a running process's handle kills it.
    let p3 = sb
        .spawn(SpawnRequest {
            argv: vec!["sleep".into(), "30".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let id = f.ids()[0].clone();
    assert_eq!(f.boxed(&id).running().len(), 1);
    drop(p3);
    let t0 = Instant::now();
    while !f.boxed(&id).running().is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "dropped process still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn workspace_tools_run_on_e2b() {
    let Some((_f, p)) = setup().await else { return };
    cloud::builtin_tools_work(p.create(&spec("ws-tools")).await.unwrap()).await;
}

/// Contract §11 point 16: a sandbox made by a failed `create` is killed
/// (no user data yet); one that fails on reattach is kept.
#[tokio::test]
async fn failed_create_cleans_up_failed_attach_keeps_data() {
    let Some((f, p)) = setup().await else { return };
    cloud::failed_create_cleans_up_failed_attach_keeps_data(&p, f.faults(), || f.ids(), "/health")
        .await;
}
