//! The bubblewrap backend's terminal: a host PTY whose child is `bwrap`
//! running the command with the same namespaces, mounts and cleared
//! environment as an exec (the argv comes from the one builder,
//! `BubblewrapSandbox::wrapped_command`).
//!
//! One difference, on purpose: no `--new-session`. bwrap starts a new
//! session by default so that a sandboxed program cannot push keystrokes
//! into the *caller's* terminal with `TIOCSTI` (CVE-2017-5226). Here the
//! terminal is a fresh PTY made for the sandbox alone, whose only reader
//! is the sandbox's own shell; keeping it the controlling terminal is
//! what gives the shell job control and ctrl-c. The user's real terminal
//! is never handed to the sandbox: wsbench copies bytes between the two.
//!
//! As with exec, the wrapper prints one start byte before the command
//! runs; it is taken off the output here. When it does not come, what
//! bwrap wrote instead is its setup error, diagnosed as exec does (C11).

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::setup::missing_bwrap;
use super::{BubblewrapSandbox, KILL_GRACE, SETUP_TIMEOUT, STARTED, diagnose_setup_failure};
use crate::backend::host::pty;
use crate::backend::shell::marker::new_marker;
use crate::backend::{BackendError, BackendResult, PtyRequest, PtySession};

/// Most of bwrap's setup error kept for the diagnosis; the rest is
/// dropped (its first lines name the failure).
const SETUP_ERROR_MAX: usize = 16 * 1024;

/// [`Sandbox::pty`](crate::backend::Sandbox::pty) of [`BubblewrapSandbox`].
pub(super) async fn start(sb: &BubblewrapSandbox, req: PtyRequest) -> BackendResult<PtySession> {
    let marker = new_marker();
    let env = req.env_with_term();
    let cmd = sb.wrapped_command(&req.argv, req.cwd.as_deref(), &env, &marker, true)?;
    let bwrap = &sb.opts.bwrap_path;
    let mut s =
        pty::start(cmd, req.size, marker, KILL_GRACE).map_err(|e| missing_bwrap(bwrap, &e))?;
    let mut first = [0u8; 1];
    match tokio::time::timeout(SETUP_TIMEOUT, s.output.read(&mut first)).await {
        Ok(Ok(1)) if first[0] == STARTED => Ok(s),
        Ok(got) => {
            // bwrap failed before the command ran: what it wrote is why.
            let mut text = match got {
                Ok(1) => first.to_vec(),
                _ => Vec::new(),
            };
            let rest = (&mut s.output).take(SETUP_ERROR_MAX as u64);
            let _ = tokio::time::timeout(Duration::from_secs(5), read_into(rest, &mut text)).await;
            let code = tokio::time::timeout(Duration::from_secs(5), s.control.wait()).await;
            let code = match code {
                Ok(Ok(c)) => c,
                _ => {
                    let _ = s.control.kill().await;
                    None
                }
            };
            Err(diagnose_setup_failure(
                bwrap,
                &String::from_utf8_lossy(&text),
                code,
            ))
        }
        Err(_) => {
            let _ = s.control.kill().await;
            Err(BackendError::Spawn {
                program: bwrap.display().to_string(),
                reason: format!("the sandbox did not come up within {SETUP_TIMEOUT:?}"),
            })
        }
    }
}

async fn read_into(mut r: impl tokio::io::AsyncRead + Unpin, out: &mut Vec<u8>) {
    let _ = r.read_to_end(out).await;
}
