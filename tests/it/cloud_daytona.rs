//! The Daytona backend against the fake Daytona API + toolbox on
//! 127.0.0.1: lifecycle with state polling, exec through sessions and the
//! followed log (C15, C17, C18, C19), `/process/execute` with an explicit
//! timeout, files, faults, and a workspace with the built-in tools.

use crate::support::cloud;
use crate::support::fake_daytona;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fake_daytona::{FakeDaytona, HOME, KEY};
use serde_json::json;
use wsbench::backend::daytona::{DaytonaExecMode, DaytonaOptions, DaytonaProvisioner};
use wsbench::backend::{BackendError, ExecRequest, FileKind, Provisioner, SandboxState, labels};

use cloud::{sh, spec};

pub(crate) fn opts(f: &FakeDaytona) -> DaytonaOptions {
    DaytonaOptions {
        api_key: Some(KEY.into()),
        api_url: Some(f.api_url()),
        max_retries: 3,
        request_timeout_secs: 10,
        state_timeout_secs: 20,
        ..Default::default()
    }
}

async fn setup() -> Option<(FakeDaytona, DaytonaProvisioner)> {
    cloud::setup(FakeDaytona::start(), |f| DaytonaProvisioner::new(opts(f))).await
}

#[tokio::test]
async fn lifecycle_exec_files_stop_start_reattach_delete() {
    let Some((f, p)) = setup().await else { return };
    let mut s = spec("ws-1");
    s.labels.insert("team".into(), "a".into());
    s.labels.insert(labels::WORKSPACE_ID.into(), "evil".into());
    let sb = p.provision(&s).await.unwrap();
    // The work dir comes from the toolbox.
    assert_eq!(sb.workdir(), HOME);
    assert!(sb.capabilities().byte_exact_output);
    let id = f.ids()[0].clone();
    {
        let all = f.state.sandboxes.lock().unwrap();
        assert_eq!(all[&id].labels[labels::WORKSPACE_ID], "ws-1");
        assert_eq!(all[&id].labels["team"], "a");
        assert_eq!(all[&id].body["public"], false);
    }
    // Every call carried the SDK version header the toolbox needs.
    assert!(
        f.rec()
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.headers.contains_key("x-daytona-sdk-version"))
    );

    // Separate, byte-exact stdout and stderr; no `2>&1`.
    let (o, out, err) = sh(sb.as_ref(), "printf 'a\\nb'; printf 'E' >&2; exit 3").await;
    assert_eq!(
        (o.exit_code, out.as_str(), err.as_str()),
        (Some(3), "a\nb", "E")
    );
    let last = f
        .state
        .session_execs
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(!last["command"].as_str().unwrap().contains("2>&1"));
    assert_eq!(last["runAsync"], true);
    let (o, out, _) = sh(sb.as_ref(), "echo hi; pwd").await;
    assert_eq!(
        (o.exit_code, out.as_str()),
        (Some(0), format!("hi\n{HOME}\n").as_str())
    );
    // Each command had its own session, deleted afterwards.
    assert!(f.state.sessions.lock().unwrap().is_empty());

    // C18.
    let c18 = "sh -c 'sleep 0.2; echo one > one.txt' & echo two > two.txt && echo three > three.txt; wait; cat one.txt two.txt three.txt";
    let (o, out, _) = sh(sb.as_ref(), c18).await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "one\ntwo\nthree\n"));
    // The user's text travels as one quoted `sh -c` argument.
    let last = f
        .state
        .session_execs
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let sent = last["command"].as_str().unwrap();
    let quoted = wsbench::backend::path::shell_quote(c18);
    assert!(sent.contains(&format!("/bin/sh -c {quoted}")), "{sent}");
    let (o, out, _) = sh(sb.as_ref(), "cat <<'EOF' && echo \"q'uote\"\n$HOME x\nEOF").await;
    assert_eq!((o.exit_code, out.as_str()), (Some(0), "$HOME x\nq'uote\n"));

    // C17 (fixed daemon): 127 with the shell's message.
    let (o, _, err) = sh(sb.as_ref(), "sudo chmod 600 /root/.passwd-s3fs").await;
    assert_eq!(o.exit_code, Some(127));
    assert!(err.contains("not found"), "{err}");

    // env and cwd.
    let mut req = ExecRequest::shell("echo \"$FOO\"; pwd");
    req.env.insert("FOO".into(), "x 'y'".into());
    req.cwd = Some("/tmp".into());
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    assert_eq!(sb.exec(req, Some(tx)).await.unwrap().exit_code, Some(0));
    let mut out = Vec::new();
    while let Some(c) = rx.recv().await {
        out.extend_from_slice(&c.data);
    }
    assert_eq!(out, b"x 'y'\n/tmp\n");

    // Files.
    sb.write("d/e/f.txt", b"bin \x00\xff").await.unwrap();
    assert_eq!(sb.read("d/e/f.txt", None).await.unwrap(), b"bin \x00\xff");
    assert!(sb.read("nope", None).await.unwrap_err().is_not_found());
    assert!(matches!(
        sb.read("d", None).await.unwrap_err(),
        BackendError::IsADirectory(_)
    ));
    let st = sb.stat("d/e/f.txt").await.unwrap();
    assert_eq!(
        (st.kind, st.size, st.mode),
        (FileKind::File, 6, Some(0o644))
    );
    let l = sb.list("d").await.unwrap();
    assert_eq!(
        (l.len(), l[0].name.as_str(), l[0].kind),
        (1, "e", FileKind::Dir)
    );
    assert!(sb.list("nope").await.unwrap_err().is_not_found());
    assert!(sb.create_new("d/n", b"1").await.unwrap());
    assert!(!sb.create_new("d/n", b"2").await.unwrap());
    sb.rename("d/n", "d/m").await.unwrap();
    sb.remove("d", true).await.unwrap();
    assert!(sb.stat("d").await.unwrap_err().is_not_found());

    // Stop (polls stopping → stopped), find, reattach (start).
    p.suspend("ws-1").await.unwrap();
    assert_eq!(f.sandbox_state(&id), Some("stopped"));
    p.suspend("ws-1").await.unwrap();
    let p2 = DaytonaProvisioner::new(opts(&f)).unwrap();
    let info = p2.find("ws-1").await.unwrap().unwrap();
    assert_eq!(info.state, SandboxState::Suspended);
    let q = f
        .rec()
        .matching("/api/sandbox")
        .iter()
        .rev()
        .find(|r| r.path == "/api/sandbox" && r.method == "GET")
        .unwrap()
        .query
        .clone();
    assert!(
        q.contains("labels=%7B%22wsbench.workspace.id%22%3A%22ws-1%22%7D"),
        "{q}"
    );
    assert!(
        q.contains("states=started") && q.contains("states=stopped"),
        "{q}"
    );
    let sb2 = p2.provision(&spec("ws-1")).await.unwrap();
    assert_eq!(f.ids().len(), 1);
    assert_eq!(f.sandbox_state(&id), Some("started"));
    assert_eq!(sb2.read("one.txt", None).await.unwrap(), b"one\n");
    // A recoverable error state is recovered on attach.
    f.set_state(&id, "error", true);
    let info = p2.find("ws-1").await.unwrap().unwrap();
    assert!(
        matches!(info.state, SandboxState::Unknown(_)),
        "{:?}",
        info.state
    );
    p2.attach(&info).await.unwrap();
    assert_eq!(f.sandbox_state(&id), Some("started"));
    assert!(f.rec().count("/recover") == 1);
    assert_eq!(p2.list().await.unwrap().len(), 1);

    p2.destroy("ws-1").await.unwrap();
    assert!(f.ids().is_empty());
    p2.destroy("ws-1").await.unwrap();
    let e = sb2
        .exec(ExecRequest::shell("true"), None)
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
}

#[tokio::test]
async fn c15_c19_timeout_kills_the_command() {
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
    // The session with the running command was deleted (the kill), and a
    // marker kill went to the toolbox too.
    let del = f.state.deleted_sessions.lock().unwrap().clone();
    assert!(del.iter().any(|(_, killed)| *killed == 1), "{del:?}");
    let ex = f.state.executes.lock().unwrap().clone();
    assert!(
        ex.iter()
            .any(|e| { e["command"].as_str().unwrap().contains("WSBENCH_EXEC_ID=") })
    );
    let id = f.ids()[0].clone();
    assert!(f.boxed(&id).running().is_empty());
    // Through the Bash tool, the workspace default applies.
    cloud::bash_default_timeout_applies(sb.clone(), 2000).await;
}

/// `/process/execute` mode: an explicit timeout every time (never the
/// daemon's hidden 10 s), merged output, and C17 both ways.
#[tokio::test]
async fn execute_mode_sends_explicit_timeouts_and_handles_c17() {
    let Some((f, _)) = setup().await else { return };
    let p = DaytonaProvisioner::new(DaytonaOptions {
        exec_mode: DaytonaExecMode::Execute,
        ..opts(&f)
    })
    .unwrap();
    let sb = p.create(&spec("ws-x")).await.unwrap();
    assert!(!sb.capabilities().byte_exact_output);
    // No per-call timeout: the backend still sends its own default, so the
    // daemon's hidden 10 s never applies.
    let mut req = ExecRequest::shell("echo a; echo b >&2");
    req.timeout = None;
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let o = sb.exec(req, Some(tx)).await.unwrap();
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(&rx.recv().await.unwrap().data[..], b"a\nb\n");
    let last = f.state.executes.lock().unwrap().last().unwrap().clone();
    assert_eq!(last["timeout"], 1800);
    // Fractions round up to whole seconds.
    let mut req = ExecRequest::shell("sleep 5");
    req.timeout = Some(Duration::from_millis(1500));
    let t0 = Instant::now();
    let o = sb.exec(req, None).await.unwrap();
    assert!(o.timed_out, "{o:?}");
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_eq!(
        f.state.executes.lock().unwrap().last().unwrap()["timeout"],
        2
    );
    // C17 (a): the fixed daemon hands the line to a shell → 127.
    let (o, out, _) = sh(sb.as_ref(), "sudo chmod 600 /root/.passwd-s3fs").await;
    assert_eq!(o.exit_code, Some(127));
    assert!(out.contains("not found"), "{out}");
    // C17 (b): the old daemon's -1 with no output is "could not start".
    f.state.old_daemon.store(true, Ordering::Relaxed);
    let e = sb
        .exec(
            ExecRequest::shell("sudo chmod 600 /root/.passwd-s3fs"),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("could not be started"), "{e}");
    assert!(e.to_string().contains("sudo chmod 600"), "{e}");
    // Same in session mode.
    let ps = DaytonaProvisioner::new(opts(&f)).unwrap();
    f.state.old_daemon.store(false, Ordering::Relaxed);
    let sbs = ps
        .attach(&ps.find("ws-x").await.unwrap().unwrap())
        .await
        .unwrap();
    f.state.old_daemon.store(true, Ordering::Relaxed);
    let e = sbs
        .exec(ExecRequest::shell("sudo x"), None)
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Spawn { .. }), "{e}");
    // Through the Bash tool: a failure, not a "-1" status.
    let ws = wsbench::engine::Workspace::open(
        sbs.clone(),
        Default::default(),
        wsbench::engine::EventBus::default(),
    )
    .await;
    if let Ok(ws) = ws {
        let r = ws
            .call_tool(wsbench::engine::ToolCall {
                tool: "Bash".into(),
                session: "s".into(),
                args: json!({"command": "sudo chmod 600 /root/.passwd-s3fs"}),
                ..Default::default()
            })
            .await;
        assert!(!r.is_success());
        assert!(r.text().contains("could not be started"), "{}", r.text());
    }
}

#[tokio::test]
async fn log_stream_split_tags_and_cut_stream_recovery() {
    let Some((f, p)) = setup().await else { return };
    let sb = p.create(&spec("ws-s")).await.unwrap();
    // One byte per WebSocket frame: the 3-byte tags and UTF-8 characters
    // split across frames.
    f.faults().split_bytes.store(true, Ordering::Relaxed);
    let (o, out, err) = sh(
        sb.as_ref(),
        "printf 'héllo → 世界'; printf 'é' >&2; printf '!'",
    )
    .await;
    assert_eq!(
        (o.exit_code, out.as_str(), err.as_str()),
        (Some(0), "héllo → 世界!", "é")
    );
    f.faults().split_bytes.store(false, Ordering::Relaxed);
    // The stream is cut after the first frame: the rest comes from the
    // stored log once the command ends; nothing is lost or doubled.
    f.faults().cut_stream_after.store(1, Ordering::Relaxed);
    let (o, out, err) = sh(sb.as_ref(), "echo a; sleep 0.3; echo b; echo c >&2").await;
    f.faults().cut_stream_after.store(0, Ordering::Relaxed);
    assert_eq!(
        (o.exit_code, out.as_str(), err.as_str()),
        (Some(0), "a\nb\n", "c\n")
    );
}

#[tokio::test]
async fn faults_map_to_clear_errors_and_retries() {
    let Some((f, p)) = setup().await else { return };
    let bad = DaytonaProvisioner::new(DaytonaOptions {
        api_key: Some("bad-secret".into()),
        ..opts(&f)
    })
    .unwrap();
    let e = bad.list().await.unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("DAYTONA_API_KEY") && msg.contains("Invalid credentials"),
        "{msg}"
    );
    assert!(!msg.contains("bad-secret"));

    f.faults().inject(
        "/api/sandbox",
        429,
        Some(1),
        "Too Many Requests",
        "rate limit exceeded",
    );
    let t0 = Instant::now();
    let sb = p.create(&spec("ws-f")).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(900));
    f.faults()
        .inject("/api/sandbox", 502, None, "Bad Gateway", "upstream");
    assert!(p.find("ws-f").await.unwrap().is_some());
    // Quota, as the API words it, after the retries run out.
    for _ in 0..4 {
        f.faults().inject(
            "/api/sandbox",
            429,
            Some(0),
            "Too Many Requests",
            "Total CPU quota exceeded",
        );
    }
    let e = p.create(&spec("ws-q")).await.err().unwrap();
    assert!(e.to_string().contains("Total CPU quota exceeded"), "{e}");
    // 409 from start surfaces as a wrong-state error.
    let id = f.ids()[0].clone();
    p.suspend("ws-f").await.unwrap();
    f.faults()
        .inject("/start", 409, None, "Conflict", "Sandbox is being archived");
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
    assert!(e.to_string().contains("being archived"));
    p.resume("ws-f").await.unwrap();
    // 404 after N calls: gone.
    *f.faults().gone_after.lock().unwrap() = Some((format!("/api/sandbox/{id}"), 0));
    let e = p.suspend("ws-f").await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
    *f.faults().gone_after.lock().unwrap() = None;
    f.state.sandboxes.lock().unwrap().remove(&id);
    let e = sb.read("x", None).await.unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
}

#[tokio::test]
async fn list_pages_with_cursor() {
    let Some((f, p)) = setup().await else { return };
    f.state.page_cap.store(2, Ordering::Relaxed);
    for i in 0..5 {
        p.create(&spec(&format!("w{i}"))).await.unwrap();
    }
    assert_eq!(p.list().await.unwrap().len(), 5);
    assert!(
        f.rec()
            .matching("/api/sandbox")
            .iter()
            .any(|r| r.query.contains("cursor=4"))
    );
    assert_eq!(p.find("w4").await.unwrap().unwrap().workspace_id, "w4");
}

#[tokio::test]
async fn workspace_tools_run_on_daytona() {
    let Some((_f, p)) = setup().await else { return };
    cloud::builtin_tools_work(p.create(&spec("ws-tools")).await.unwrap()).await;
}

/// Contract §11 point 16: a sandbox made by a failed `create` is deleted
/// (no user data yet); one that fails on reattach is kept.
#[tokio::test]
async fn failed_create_cleans_up_failed_attach_keeps_data() {
    let Some((f, p)) = setup().await else { return };
    let ids = || f.ids();
    cloud::failed_create_cleans_up_failed_attach_keeps_data(&p, f.faults(), ids, "/user-home-dir")
        .await;
}
