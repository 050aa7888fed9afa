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
use wsbench::backend::{BackendError, PtyRequest, PtySize, PtySupport};

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
    if let PtySupport::Unsupported(reason) = caps.pty {
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
    let req = PtyRequest::new(["/bin/sh", "-c", "echo only-this; exit 3"], PtySize::default());
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
