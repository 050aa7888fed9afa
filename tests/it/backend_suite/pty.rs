//! The PTY contract (issue 17 point 1), run by `suite!` on every backend:
//! where [`Capabilities::pty`](wsbench::backend::Capabilities::pty) says
//! supported, a program on a PTY sees its size and a resize through
//! `stty size`, typed bytes are echoed by the terminal, the exit status
//! comes back, the terminal shows the program's output and nothing of the
//! backend's own, and a kill ends a program that would run for ever;
//! elsewhere `Sandbox::pty` answers the documented `Unsupported` error
//! carrying the reason from `Capabilities`.
//!
//! Waits are bounded by [`PATIENCE`] only as a failure limit: every check
//! waits for the bytes it needs, never for a fixed time.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::Env;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wsbench::backend::{BackendError, LineShell, OutputChunk, PtyRequest, PtySize, StreamKind};

/// Longest wait for any one expected output (a slow CI machine, a cold
/// container); a pass never waits this long.
const PATIENCE: Duration = Duration::from_secs(60);

/// Reads `out` into `seen` until it holds `needle`; panics with what was
/// seen when the stream ends or [`PATIENCE`] passes first.
pub async fn read_until(
    out: &mut (dyn AsyncRead + Send + Unpin),
    seen: &mut Vec<u8>,
    needle: &str,
    what: &str,
) {
    let mut buf = [0u8; 4096];
    let found = tokio::time::timeout(PATIENCE, async {
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
        "{what}: {needle:?} not in the terminal output {:?}",
        String::from_utf8_lossy(seen)
    );
}

pub async fn pty_contract(e: &Env) {
    let caps = e.sb.capabilities();
    let script = "stty size; read x; stty size; echo got:$x; exit 7";
    let req = PtyRequest::new(["/bin/sh", "-c", script], PtySize::new(33, 101));
    if let Some(reason) = caps.pty.reason() {
        match e.sb.pty(req).await {
            Err(BackendError::Unsupported { backend, what }) => {
                assert_eq!(backend, e.kind);
                assert_eq!(what, reason, "{}: the error carries the reason", e.kind);
            }
            other => panic!("{}: expected Unsupported, got {other:?}", e.kind),
        }
        return;
    }
    let mut s = e.sb.pty(req).await.expect("pty starts");
    let mut seen = Vec::new();
    read_until(&mut *s.output, &mut seen, "33 101", "initial size").await;
    s.control.resize(PtySize::new(40, 120)).await.unwrap();
    s.input.write_all(b"hello\n").await.unwrap();
    s.input.flush().await.unwrap();
    // The terminal echoes the line (with its `\r\n`), then the program
    // sees the new size.
    read_until(&mut *s.output, &mut seen, "hello\r\n", "echo").await;
    read_until(&mut *s.output, &mut seen, "40 120", "size after resize").await;
    read_until(&mut *s.output, &mut seen, "got:hello", "the line was read").await;
    let code = tokio::time::timeout(PATIENCE, s.control.wait())
        .await
        .expect("exits")
        .unwrap();
    assert_eq!(code, Some(7), "{}: exit status", e.kind);

    // The terminal shows the program's output and nothing else (no
    // banner, prompt or start-up bytes of the backend's own, such as the
    // line Daytona types into its session's shell).
    let req = PtyRequest::new(
        ["/bin/sh", "-c", "echo only-this; exit 3"],
        PtySize::default(),
    );
    let mut s = e.sb.pty(req).await.expect("pty starts");
    let mut all = Vec::new();
    tokio::time::timeout(PATIENCE, s.output.read_to_end(&mut all))
        .await
        .expect("the output ends")
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&all),
        "only-this\r\n",
        "{}: the whole terminal output",
        e.kind
    );
    let code = tokio::time::timeout(PATIENCE, s.control.wait())
        .await
        .expect("exits")
        .unwrap();
    assert_eq!(code, Some(3), "{}: exit status", e.kind);

    // Kill: a program that would sleep for ever ends, and so does its
    // child.
    let req = PtyRequest::new(
        ["/bin/sh", "-c", "sleep 3600 & echo ready; wait"],
        PtySize::default(),
    );
    let mut s = e.sb.pty(req).await.expect("pty starts");
    let mut seen = Vec::new();
    read_until(&mut *s.output, &mut seen, "ready", "second program up").await;
    s.control.kill().await.unwrap();
    let code = tokio::time::timeout(PATIENCE, s.control.wait())
        .await
        .expect("a killed program is waited for")
        .unwrap();
    assert_ne!(code, Some(0), "{}: killed, not a clean exit", e.kind);
    // The output ends once nothing holds the terminal any more.
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(PATIENCE, s.output.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "{}: the output ends after a kill", e.kind);
}

/// Runs `line`, returning (exit code, stdout, stderr, cancelled).
async fn line(
    sh: &dyn LineShell,
    line: &str,
    cancel: Option<CancellationToken>,
) -> (Option<i32>, String, String, bool) {
    let (tx, mut rx) = mpsc::channel::<OutputChunk>(1024);
    let collect = tokio::spawn(async move {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => o.extend_from_slice(&c.data),
                StreamKind::Stderr => e.extend_from_slice(&c.data),
            }
        }
        (o, e)
    });
    let out = tokio::time::timeout(PATIENCE, sh.run(line, Some(tx), cancel))
        .await
        .expect("the line ends")
        .expect("the line runs");
    let (o, e) = collect.await.unwrap();
    (
        out.exit_code,
        String::from_utf8_lossy(&o).into_owned(),
        String::from_utf8_lossy(&e).into_owned(),
        out.cancelled,
    )
}

/// The line-mode shell (issue 17: OpenSandbox has no PTY, `!` falls back
/// to execd's bash sessions): where `Capabilities::pty` says
/// `LineMode`, a session keeps `cd`, `export` and functions between
/// lines, gives each line its exit status and its stdout and stderr
/// apart, and a cancel ends the session; elsewhere `line_shell` is the
/// documented `Unsupported`.
pub async fn line_shell_contract(e: &Env) {
    let caps = e.sb.capabilities();
    if !caps.pty.has_line_mode() {
        match e.sb.line_shell(None).await {
            Err(BackendError::Unsupported { backend, .. }) => assert_eq!(backend, e.kind),
            Err(other) => panic!("{}: expected Unsupported, got {other}", e.kind),
            Ok(_) => panic!("{}: a line shell without LineMode", e.kind),
        }
        return;
    }
    let sh = e.sb.line_shell(None).await.expect("a session opens");
    let (code, out, _, _) = line(&*sh, "pwd", None).await;
    assert_eq!(
        (code, out.trim()),
        (Some(0), e.sb.workdir()),
        "starts in the workdir"
    );
    let (code, ..) = line(
        &*sh,
        "cd /tmp && export WSB_X=42 && f() { echo fn-ok; }",
        None,
    )
    .await;
    assert_eq!(code, Some(0));
    let (code, out, err, _) = line(&*sh, "pwd; echo x=$WSB_X; f; echo oops >&2; false", None).await;
    assert_eq!(code, Some(1), "the last command's status");
    assert_eq!(out, "/tmp\nx=42\nfn-ok\n", "state carried over");
    assert_eq!(err, "oops\n", "stderr apart");
    // A cancel ends the session; the next line says so.
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let (_, _, _, cancelled) = line(&*sh, "sleep 3600", Some(cancel)).await;
    assert!(cancelled);
    let again = sh.run("true", None, None).await;
    assert!(
        matches!(&again, Err(BackendError::Remote { code: Some(c), .. }) if c == "session_ended"),
        "{again:?}"
    );
    // A new session is fresh; `exit N` ends it with N.
    let sh = e.sb.line_shell(None).await.expect("a second session opens");
    let (_, out, ..) = line(&*sh, "echo x=$WSB_X", None).await;
    assert_eq!(out, "x=\n", "a new session starts fresh");
    let (code, ..) = line(&*sh, "exit 3", None).await;
    assert_eq!(code, Some(3));
    sh.close().await.expect("closing an ended session is fine");
}
