//! File operations in the Pod: the shared shell scripts of
//! [`crate::backend::shell`] run over the exec websocket ([`ExecTarget`]
//! is their [`ScriptHost`]), each one exec (one round trip), plus a
//! streamed write ([`write_stream`]). Tar transfers of whole trees are in
//! module `tar`.
//!
//! Link confinement is the shared one: every script starts with the
//! check of `shell::confine`, which refuses (`Escapes`) any path under
//! `/workspace` that a link leads out of, as on the host backends.

use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::exec::ExecTarget;
use crate::backend::shell::codes::failed;
use crate::backend::shell::{Follow, ScriptHost, ops, runner, scripts};
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputSink, path as bpath,
};

/// Limit for one file operation (they move one whole file through stdin,
/// or one listing).
pub(crate) const FILE_TIMEOUT: Duration = Duration::from_secs(300);

#[async_trait]
impl ScriptHost for ExecTarget {
    fn script_workdir(&self) -> String {
        bpath::normalize(&self.workdir)
    }

    fn script_timeout(&self) -> Duration {
        FILE_TIMEOUT
    }

    async fn run_script(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        self.exec(req, sink).await
    }
}

/// Writes a stream to `path` atomically. On a v5 server the bytes are
/// streamed as they are read (stdin is closed with the v5 close frame);
/// v4 cannot end stdin, so there the stream is read first and sent with
/// its length.
pub(crate) async fn write_stream(
    t: &ExecTarget,
    path: &str,
    mut reader: Box<dyn AsyncRead + Send + Unpin>,
) -> BackendResult<u64> {
    if !t.supports_stdin_close().await? {
        let mut buf = Vec::new();
        reader
            .read_to_end(&mut buf)
            .await
            .map_err(|e| BackendError::from_io(e, path))?;
        ops::write(t, path, &buf).await?;
        return Ok(buf.len() as u64);
    }
    let req = runner::request(t, &[(path, Follow::Yes)], scripts::WRITE, &["-", "w"], None);
    let mut process = t
        .spawn(crate::backend::SpawnRequest {
            argv: req.argv,
            cwd: req.cwd,
            env: req.env,
        })
        .await?;
    let copied = tokio::io::copy(&mut reader, &mut process.stdin).await;
    let closed = tokio::io::AsyncWriteExt::shutdown(&mut process.stdin).await;
    drop(process.stdin);
    let mut err = String::new();
    let _ = tokio::time::timeout(FILE_TIMEOUT, process.stderr.read_to_string(&mut err)).await;
    let code = tokio::time::timeout(FILE_TIMEOUT, process.control.wait())
        .await
        .map_err(|_| BackendError::Io {
            context: format!("writing {path}"),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"),
        })??;
    // The script's verdict first: a refused path closes stdin early,
    // which would otherwise surface as a broken pipe.
    match code {
        Some(0) => {}
        Some(c) => return Err(failed(c, path, &err, "writing")),
        None => {
            return Err(BackendError::Io {
                context: format!("writing {path}"),
                source: std::io::Error::other("the upload ended without an exit status"),
            });
        }
    }
    let n = copied.map_err(|e| BackendError::from_io(e, path))?;
    closed.map_err(|e| BackendError::from_io(e, path))?;
    Ok(n)
}
