//! Input to a running command: a writer process that feeds the session's
//! input FIFO, and Ctrl-C through the watcher's control FIFO.
//!
//! The writer (`cat > <dir>/in`) is a second process in the sandbox,
//! started before the command's frame is sent: the shell's `<fifo` open
//! then meets it at once. Closing its stdin is the command's end of file.
//! Both FIFOs sit in a directory every process of the sandbox sees (the
//! host's `/tmp` for local, the shared `/tmp` of a bubblewrap sandbox, the
//! container's `/tmp`).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

use super::script;
use super::types::{InputMsg, ShellError};
use crate::backend::{ExecRequest, ProcessControl, Sandbox, SpawnRequest};

/// Longest a Ctrl-C request may take to reach the watcher.
const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(5);

type Stdin = Box<dyn AsyncWrite + Send + Unpin>;

/// The input side of one interactive command.
pub(crate) struct Feeder {
    stdin: Arc<Mutex<Option<Stdin>>>,
    control: Arc<dyn ProcessControl>,
    sandbox: Arc<dyn Sandbox>,
    ctl: String,
    marker: String,
}

impl Feeder {
    /// Starts the writer of `<dir>/in` for the command marked `marker`.
    /// Errors: the backend cannot spawn it.
    pub(crate) async fn start(
        sandbox: &Arc<dyn Sandbox>,
        dir: &str,
        marker: &str,
    ) -> Result<Feeder, ShellError> {
        let argv = ["/bin/sh", "-c", "exec cat > \"$1\"", "sh"]
            .into_iter()
            .map(String::from)
            .chain([format!("{dir}/in")])
            .collect();
        let proc = sandbox
            .spawn(SpawnRequest {
                argv,
                ..Default::default()
            })
            .await
            .map_err(ShellError::Start)?;
        Ok(Feeder {
            stdin: Arc::new(Mutex::new(Some(proc.stdin))),
            control: proc.control,
            sandbox: sandbox.clone(),
            ctl: format!("{dir}/ctl"),
            marker: marker.to_string(),
        })
    }

    /// Forwards `rx` until it closes: data to the command's stdin, end of
    /// file by closing it, interrupts to the watcher. Abort the task when
    /// the command ends.
    pub(crate) fn pump(&self, mut rx: mpsc::Receiver<InputMsg>) -> JoinHandle<()> {
        let stdin = self.stdin.clone();
        let sandbox = self.sandbox.clone();
        let (ctl, marker) = (self.ctl.clone(), self.marker.clone());
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                match msg {
                    InputMsg::Data(b) => {
                        let mut g = stdin.lock().await;
                        if let Some(w) = g.as_mut() {
                            // A command that stopped reading: drop the pipe.
                            if w.write_all(&b).await.is_err() || w.flush().await.is_err() {
                                *g = None;
                            }
                        }
                    }
                    InputMsg::Eof => *stdin.lock().await = None,
                    InputMsg::Interrupt => {
                        let (sb, ctl, m) = (sandbox.clone(), ctl.clone(), marker.clone());
                        tokio::spawn(async move { interrupt(&sb, &ctl, &m).await });
                    }
                }
            }
        })
    }

    /// Closes the writer's stdin and kills it if it has not gone within a
    /// second (it may still wait for a reader). Returns at once.
    pub(crate) fn stop(self) {
        tokio::spawn(async move {
            *self.stdin.lock().await = None;
            if tokio::time::timeout(Duration::from_secs(1), self.control.wait())
                .await
                .is_err()
            {
                let _ = self.control.kill().await;
            }
        });
    }
}

/// Asks the watcher behind `ctl` to send SIGINT to the command marked
/// `marker` and to the shell. Best effort: a watcher that is gone makes
/// the request time out, and the kill key still works.
async fn interrupt(sandbox: &Arc<dyn Sandbox>, ctl: &str, marker: &str) {
    let mut req = ExecRequest::new([
        "/bin/sh",
        "-c",
        "printf '%s\\n' \"$2\" > \"$1\"",
        "sh",
        ctl,
        &script::interrupt_line(marker),
    ]);
    req.timeout = Some(INTERRUPT_TIMEOUT);
    if let Err(e) = sandbox.exec(req, None).await {
        tracing::warn!("interrupting a session-shell command: {e}");
    }
}
