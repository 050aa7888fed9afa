//! A container-side watchdog per exec: the command's tree dies when
//! wsbench goes away, SIGKILL included.
//!
//! Docker does not end an exec when the client that started it
//! disconnects; the command runs on in the container. Next to each exec
//! we start a second one, `sh` running
//! [`watchdog_line`](crate::backend::shell::marker::watchdog_line), with
//! its stdin attached to a connection only wsbench holds. When wsbench
//! dies, the kernel closes that connection, Docker closes the watchdog's
//! stdin, and the watchdog kills every process carrying the command's
//! marker and all their descendants (a `setsid env -i` child included,
//! while its parent lives). When the command ends, wsbench writes `done`
//! and the watchdog exits without killing anything: background children
//! of a finished command behave as before. A watchdog dropped without
//! [`Watchdog::disarm`] (the exec's future dropped mid-command) fires too:
//! nobody waits for the command any more.
//!
//! Limits: a command killed in the moment before its watchdog started is
//! not covered (the two are started together); a daemon that was
//! reparented to PID 1 (its command already ended, or no subreaper in
//! the container) and cleared its environment before the kill is not
//! found (see `kill_line` and `subreaper.rs`); the watchdog can be killed by someone
//! else in the container, and it runs as the command's user, so a
//! process that changed user cannot be read or killed.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use bollard::container::LogOutput;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::exec::ExecTarget;
use crate::backend::shell::marker::{new_marker, watchdog_line};

/// How long disarming may take (a write and a half-close on a local
/// connection; more means the daemon is stuck, and the watchdog is then
/// left to fire or not).
const DISARM_WAIT: Duration = Duration::from_secs(2);

type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// The running watchdog of one exec. Dropping it fires the watchdog (see
/// the module docs); [`Watchdog::disarm`] ends it quietly.
pub(crate) struct Watchdog {
    input: Pin<Box<dyn AsyncWrite + Send>>,
    // Held so the connection stays open (both halves must live), and
    // read to its end by [`Watchdog::disarm`].
    output: Output,
}

impl Watchdog {
    /// Starts the watchdog of the command marked `marker`. `None` (with a
    /// warning in the log) when it cannot be started: the command then
    /// runs unwatched, as it did before this existed.
    pub(crate) async fn arm(target: &ExecTarget, marker: &str) -> Option<Watchdog> {
        let argv = vec!["/bin/sh".into(), "-c".into(), watchdog_line(marker)];
        // A marker of its own: the kill must not match the watchdog.
        let started = async {
            let id = target
                .create(&argv, Some("/"), &BTreeMap::new(), &new_marker(), true)
                .await?;
            target.start(&id).await
        };
        match started.await {
            Ok((output, input)) => Some(Watchdog { input, output }),
            // A container that is gone, stopped or paused fails the exec
            // itself right after this, and the manager recovers it (issue
            // 15): the watchdog's failure says nothing new then, so it is
            // only a debug line. Any other cause is worth a warning.
            Err(e) if e.is_recoverable() => {
                tracing::debug!(
                    container = %target.container,
                    "no watchdog for the exec: the container is lost ({e})"
                );
                None
            }
            Err(e) => {
                tracing::warn!(
                    container = %target.container,
                    "no watchdog for the exec (it may outlive wsbench): {e}"
                );
                None
            }
        }
    }

    /// Tells the watchdog the command ended as it should: it exits and
    /// kills nothing. Bounded by [`DISARM_WAIT`].
    ///
    /// It also waits for the watchdog to exit (its output stream ends), so
    /// no helper process of a finished command is left in the container:
    /// one frozen by a `docker pause` right after the command returned
    /// kept an exec open in the daemon, and the daemon then answered the
    /// next inspect of the container only after bollard's 120 s timeout.
    pub(crate) async fn disarm(mut self) {
        let quiet = async {
            self.input.write_all(b"done\n").await?;
            self.input.shutdown().await?;
            while let Some(frame) = self.output.next().await {
                // Its output is empty unless the shell fails; only the end
                // of the stream matters.
                if frame.is_err() {
                    break;
                }
            }
            std::io::Result::Ok(())
        };
        match tokio::time::timeout(DISARM_WAIT, quiet).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("disarming an exec watchdog failed: {e}"),
            Err(_) => tracing::debug!("disarming an exec watchdog took over {DISARM_WAIT:?}"),
        }
    }
}

/// Disarms `dog` when there is one.
pub(crate) async fn disarm(dog: Option<Watchdog>) {
    if let Some(d) = dog {
        d.disarm().await;
    }
}
