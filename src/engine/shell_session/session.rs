//! [`ShellSession`]: one long-lived shell, one command at a time.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::input::Feeder;
use super::live::{Ended, Limits, Live};
use super::script;
use super::types::{RunOutcome, RunRequest, ShellError, ShellOptions};
use crate::backend::{ExecOutcome, OutputSink, Sandbox};

/// A shell in a sandbox that keeps its working directory, variables,
/// functions and traps between commands (issue 17 point 4).
///
/// Each command still gets its own exit status, its own stdout and
/// stderr (separate where the backend's spawn keeps them apart), its
/// timeout and its kill. A command that ends the shell (`exit`, `exec`,
/// a kill) gets a [`RunOutcome::notice`] naming the lost state, and the
/// next command starts a fresh shell.
///
/// Backends with native sessions (OpenSandbox execd's bash sessions,
/// Daytona's toolbox sessions) could keep the state themselves; this one
/// drives a plain shell over [`Sandbox::spawn`] on every backend with
/// `processes`, which is all the Command pane and the Bash tool need.
pub struct ShellSession {
    sandbox: Arc<dyn Sandbox>,
    opts: ShellOptions,
    live: tokio::sync::Mutex<Option<Live>>,
    cwd: Mutex<Option<String>>,
}

impl std::fmt::Debug for ShellSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellSession")
            .field("cwd", &self.cwd())
            .finish()
    }
}

impl ShellSession {
    /// A session on `sandbox`; the shell starts with the first command.
    pub fn new(sandbox: Arc<dyn Sandbox>, opts: ShellOptions) -> Self {
        ShellSession {
            sandbox,
            opts,
            live: tokio::sync::Mutex::new(None),
            cwd: Mutex::new(None),
        }
    }

    /// The shell's working directory after the last command (a path in
    /// the backend's namespace); `None` before the first or after the
    /// shell was lost.
    pub fn cwd(&self) -> Option<String> {
        self.cwd.lock().expect("cwd lock").clone()
    }

    /// Runs one command, streaming its output into `sink`. Waits for a
    /// command already running in this session to end first.
    ///
    /// Errors: the shell cannot be started, or the command cannot be
    /// written to it even after a restart. A non-zero exit, a timeout, a
    /// cancel or the shell's death are `Ok` outcomes (with a notice).
    pub async fn run(
        &self,
        mut req: RunRequest,
        sink: Option<OutputSink>,
    ) -> Result<RunOutcome, ShellError> {
        let started = Instant::now();
        let deadline = req.timeout.map(|t| started + t);
        let mut live = self.live.lock().await;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let mut attempt = 0;
        // Set when the shell is replaced because its sandbox was.
        let mut recovered: Option<String> = None;
        // The count of a shell that died between commands (its frame could
        // not be sent), for the next attempt's check.
        let mut failed_at: Option<u64> = None;
        let feeder = loop {
            attempt += 1;
            let now = self.sandbox.recoveries();
            let shell = match live.take() {
                Some(l) if l.control.try_status().is_none() && l.recoveries == now => l,
                dead => {
                    let before = dead.as_ref().map(|d| d.recoveries).or(failed_at);
                    if let Some(d) = dead {
                        let _ = d.control.kill().await;
                    }
                    let fresh = Live::start(&self.sandbox, &self.opts).await?;
                    // Recovered since the old shell started, or by this
                    // start (a shell that died with a stopped container).
                    if before.is_some_and(|b| b != fresh.recoveries) {
                        recovered = Some(self.replaced_notice());
                    }
                    fresh
                }
            };
            let shell = live.insert(shell);
            let (feeder, stdin) = match (&req.input, &shell.fifo_dir) {
                (Some(_), Some(dir)) => {
                    let f = Feeder::start(&self.sandbox, dir, &marker).await?;
                    (Some(f), format!("{dir}/in"))
                }
                _ => (None, "/dev/null".to_string()),
            };
            match shell
                .send(&script::frame(&req.command, &stdin, &marker, &nonce))
                .await
            {
                Ok(()) => break feeder,
                Err(e) if attempt > 1 => return Err(ShellError::Send(e)),
                Err(_) => {
                    // The shell died between commands: one fresh try.
                    if let Some(f) = feeder {
                        f.stop();
                    }
                    let _ = shell.control.kill().await;
                    failed_at = Some(shell.recoveries);
                    *live = None;
                }
            }
        };
        let shell = live.as_mut().expect("started above");
        let pump = feeder
            .as_ref()
            .zip(req.input.take())
            .map(|(f, rx)| f.pump(rx));
        let no_input = req.input.is_some() && shell.fifo_dir.is_none();
        let limits = Limits {
            deadline,
            cancel: req.cancel.as_ref(),
            budget: self.opts.max_output_bytes,
        };
        let (ended, dropped) = shell
            .read_to_end(&nonce, sink.as_ref(), limits, &mut Vec::new())
            .await;
        if let Some(p) = pump {
            p.abort();
        }
        if let Some(f) = feeder {
            f.stop();
        }
        let lost = self.cwd();
        let mut out = RunOutcome {
            exec: ExecOutcome {
                exit_code: None,
                signal: None,
                timed_out: matches!(ended, Ended::TimedOut),
                cancelled: matches!(ended, Ended::Cancelled),
                duration: Duration::ZERO,
            },
            cwd: None,
            notice: None,
            dropped_bytes: dropped,
        };
        match ended {
            Ended::Done(trailer) => {
                let (code, cwd) = super::frame::parse_trailer(&trailer);
                out.exec.exit_code = code;
                out.cwd = cwd;
            }
            ended => {
                let shell = live.take().expect("running");
                let mut why = match ended {
                    Ended::TimedOut => "the command timed out; it was killed with its shell",
                    Ended::Cancelled => "the command was killed with its shell",
                    _ => "the shell exited (exit, exec or a signal)",
                }
                .to_string();
                let _ = shell.control.kill().await;
                let code = shell.control.wait().await.ok().flatten();
                if matches!(ended, Ended::Died) {
                    // Did the sandbox die under the shell (`docker rm -f`,
                    // `docker stop`)? One cheap call finds out, and on a
                    // managed workspace brings it back; say so instead of
                    // blaming the command.
                    let _ = self.sandbox.stat(self.sandbox.workdir()).await;
                    if self.sandbox.recoveries() != shell.recoveries {
                        why = format!(
                            "the shell was lost with its sandbox ({})",
                            self.last_recovery()
                        );
                    }
                }
                out.exec.exit_code = code;
                out.exec.signal = code.filter(|c| *c > 128).map(|c| c - 128);
                out.notice = Some(lost_state_notice(&why, lost.as_deref()));
            }
        }
        if let Some(r) = recovered {
            out.notice = Some(match out.notice.take() {
                Some(n) => format!("{r}; {n}"),
                None => r,
            });
        }
        if no_input {
            out.notice = Some(
                "the sandbox could not make the shell's input FIFO: the command's stdin was /dev/null"
                    .into(),
            );
        }
        if dropped > 0 {
            let note = format!(
                "{dropped} bytes of output past the {}-byte budget were dropped",
                self.opts.max_output_bytes
            );
            out.notice = Some(match out.notice.take() {
                Some(n) => format!("{n}; {note}"),
                None => note,
            });
        }
        *self.cwd.lock().expect("cwd lock") = out.cwd.clone();
        out.exec.duration = started.elapsed();
        Ok(out)
    }

    /// The sandbox's last recovery in words (a fallback when it has none
    /// to tell).
    fn last_recovery(&self) -> String {
        self.sandbox
            .last_recovery()
            .unwrap_or_else(|| "the sandbox was replaced or restarted".into())
    }

    /// The notice of a shell replaced because its sandbox was recovered
    /// since it started: what happened to the sandbox and what state of
    /// the shell went with it.
    fn replaced_notice(&self) -> String {
        let dir = self
            .cwd()
            .map(|d| format!("the working directory ({d}), "))
            .unwrap_or_default();
        format!(
            "{}: this command ran in a fresh session shell; lost: {dir}exported variables, \
             shell functions and traps",
            self.last_recovery()
        )
    }

    /// Ends the shell: closes its stdin (it exits and removes its FIFOs),
    /// then kills what is left after a second. Returns at once.
    pub fn close(&self) {
        let Ok(mut live) = self.live.try_lock() else {
            return;
        };
        if let Some(shell) = live.take() {
            *self.cwd.lock().expect("cwd lock") = None;
            tokio::spawn(async move {
                let control = shell.control.clone();
                drop(shell);
                if tokio::time::timeout(Duration::from_secs(1), control.wait())
                    .await
                    .is_err()
                {
                    let _ = control.kill().await;
                }
            });
        }
    }
}

/// Runs `command` in a fresh shell that is closed afterwards: the
/// reference's fresh-shell semantics, with the input and Ctrl-C of a
/// session shell (the Command pane with its session shell turned off).
///
/// Errors: as [`ShellSession::run`].
pub async fn run_once(
    sandbox: Arc<dyn Sandbox>,
    opts: ShellOptions,
    req: RunRequest,
    sink: Option<OutputSink>,
) -> Result<RunOutcome, ShellError> {
    let session = ShellSession::new(sandbox, opts);
    let mut out = session.run(req, sink).await;
    session.close();
    if let Ok(o) = &mut out {
        // Nothing was kept, so nothing was lost.
        o.notice = o.notice.take().filter(|n| n.contains("budget"));
    }
    out
}

/// The notice of a replaced shell: why, and the state that went with it.
fn lost_state_notice(why: &str, cwd: Option<&str>) -> String {
    let dir = cwd
        .map(|d| format!("the working directory ({d}), "))
        .unwrap_or_default();
    format!(
        "{why}: the next command starts a fresh shell; lost: {dir}exported variables, \
         shell functions and traps"
    )
}
