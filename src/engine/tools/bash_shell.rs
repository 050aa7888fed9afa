//! Where the Bash tool's command runs: a fresh `/bin/sh -c` through the
//! backend's exec (the reference's semantics, the default), the session's
//! long-lived shell (`[tools] bash_session`, or the Command pane), or a
//! fresh shell that can take input (the Command pane with its session
//! shell off). See `engine::shell_session`.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::ToolContext;
use crate::backend::{ExecOutcome, ExecRequest, OutputChunk};
use crate::engine::shell_session::{RunRequest, run_once};

/// How a command ended, whichever way it ran.
pub(super) struct Ran {
    /// Exit code, timeout, cancel, duration.
    pub(super) outcome: ExecOutcome,
    /// The session shell's notice (replaced shell and lost state, dropped
    /// output), to show with the result.
    pub(super) notice: Option<String>,
    /// The session shell's directory after the command.
    pub(super) cwd: Option<String>,
}

/// Starts `command` the way `ctx` asks, its output into `tx`. The task
/// ends with the outcome, or the error text when it could not run.
pub(super) fn start(
    ctx: &ToolContext<'_>,
    command: &str,
    timeout: Duration,
    tx: mpsc::Sender<OutputChunk>,
) -> JoinHandle<Result<Ran, String>> {
    let env = ctx.env;
    let session_shell = ctx.bash.session_shell.unwrap_or(env.bash_session);
    let input = ctx.bash.take_input();
    let shell_req = RunRequest {
        command: command.to_string(),
        timeout: Some(timeout),
        cancel: Some(ctx.cancel.clone()),
        input,
    };
    if session_shell {
        let shell = env.shells.get(ctx.session);
        return tokio::spawn(async move {
            let o = shell.run(shell_req, Some(tx)).await;
            o.map(|o| Ran {
                outcome: o.exec,
                notice: o.notice,
                cwd: o.cwd,
            })
            .map_err(|e| e.to_string())
        });
    }
    if shell_req.input.is_some() {
        let (sb, opts) = (env.sandbox.clone(), env.shells.options().clone());
        return tokio::spawn(async move {
            let o = run_once(sb, opts, shell_req, Some(tx)).await;
            o.map(|o| Ran {
                outcome: o.exec,
                notice: o.notice,
                cwd: None,
            })
            .map_err(|e| e.to_string())
        });
    }
    let mut req = ExecRequest::shell(command);
    req.cwd = Some(env.layout.workdir().to_string());
    req.timeout = Some(timeout);
    req.cancel = Some(ctx.cancel.clone());
    let sandbox = env.sandbox.clone();
    tokio::spawn(async move {
        let o = sandbox.exec(req, Some(tx)).await;
        o.map(|outcome| Ran {
            outcome,
            notice: None,
            cwd: None,
        })
        .map_err(|e| e.to_string())
    })
}
