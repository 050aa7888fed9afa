//! The Docker backend's terminal: an exec with `tty: true` and stdin
//! attached, resized with `resize_exec`, its exit code from
//! `inspect_exec`, killed as an exec is (every process carrying its
//! marker, from inside the container), under Docker's init as child
//! subreaper as every command.
//!
//! With a TTY Docker sends the terminal's bytes unframed (stdout and
//! stderr are one device), which bollard hands over as they come. The
//! initial size is set inside before the program runs
//! ([`sized_argv`](crate::backend::pty::sized_argv)), since this API
//! version takes the size only once the exec has started.

use std::time::Duration;

use async_trait::async_trait;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt;
use tokio_util::io::StreamReader;

use super::api::api_error;
use super::exec::{ExecTarget, container_gone};
use crate::backend::pty::sized_argv;
use crate::backend::shell::marker::new_marker;
use crate::backend::{BackendError, BackendResult, PtyControl, PtyRequest, PtySession, PtySize};

/// How long one `inspect_exec` poll of [`PtyControl::wait`] lasts before
/// it asks again (the exec may run for hours).
const WAIT_SLICE: Duration = Duration::from_secs(3600);

/// [`Sandbox::pty`](crate::backend::Sandbox::pty) of a Docker sandbox.
pub(crate) async fn start(target: &ExecTarget, req: PtyRequest) -> BackendResult<PtySession> {
    if req.argv.is_empty() {
        return Err(BackendError::Spawn {
            program: String::new(),
            reason: "empty argv".into(),
        });
    }
    let marker = new_marker();
    // Under the subreaper as every command (`subreaper.rs`); tini makes
    // the program the terminal's foreground process group.
    let (argv, _) = target.command_argv(&sized_argv(&req.argv, req.size)).await;
    let opts = CreateExecOptions::<String> {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(true),
        env: Some(target.env_list(&req.env_with_term(), &marker)),
        cmd: Some(argv),
        user: target.user.clone(),
        working_dir: Some(target.cwd(req.cwd.as_deref())),
        ..Default::default()
    };
    let id = target
        .docker
        .create_exec(&target.container, opts)
        .await
        .map_err(|e| container_gone(&target.container, e))?
        .id;
    let started = target
        .docker
        .start_exec(
            &id,
            Some(StartExecOptions {
                detach: false,
                tty: true,
                output_capacity: Some(64 * 1024),
            }),
        )
        .await
        .map_err(|e| container_gone(&target.container, e))?;
    let StartExecResults::Attached { output, input } = started else {
        return Err(BackendError::Remote {
            service: "docker",
            status: None,
            code: None,
            message: format!("exec {id} started detached"),
        });
    };
    let bytes = output.map(|item| match item {
        Ok(
            LogOutput::Console { message }
            | LogOutput::StdOut { message }
            | LogOutput::StdErr { message },
        ) => Ok(message),
        Ok(LogOutput::StdIn { .. }) => Ok(bytes::Bytes::new()),
        Err(e) => Err(std::io::Error::other(e)),
    });
    let control = DockerPty {
        target: target.clone(),
        exec_id: id,
        marker,
    };
    // The size is already set inside; this tells Docker too, so its own
    // view (`docker exec inspect`) agrees.
    let _ = control.resize(req.size).await;
    Ok(PtySession {
        input: Box::new(input),
        output: Box::new(StreamReader::new(Box::pin(bytes))),
        control: std::sync::Arc::new(control),
    })
}

struct DockerPty {
    target: ExecTarget,
    exec_id: String,
    marker: String,
}

#[async_trait]
impl PtyControl for DockerPty {
    fn id(&self) -> String {
        self.exec_id.clone()
    }

    async fn resize(&self, size: PtySize) -> BackendResult<()> {
        self.target
            .docker
            .resize_exec(
                &self.exec_id,
                ResizeExecOptions {
                    height: size.rows,
                    width: size.cols,
                },
            )
            .await
            .map_err(|e| api_error(&format!("resizing exec {}", self.exec_id), e))
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        loop {
            if let Some(code) = self.target.exit_code(&self.exec_id, WAIT_SLICE).await? {
                return Ok(Some(code));
            }
        }
    }

    async fn kill(&self) -> BackendResult<()> {
        self.target.kill_exec(&self.exec_id, &self.marker).await
    }
}
