//! Commands in a container through the Docker exec API.
//!
//! * stdout and stderr arrive demultiplexed from Docker's stream framing,
//!   byte-exact; text Docker writes unframed on the stream (the OCI
//!   runtime's "executable file not found" message, case C12) is reported
//!   as stderr;
//! * the exit code always comes from `inspect_exec`, never from the stream
//!   ending: a failed start is a non-zero code (126/127), never 0, and an
//!   exec whose code cannot be learned is an error;
//! * every exec carries a marker in its environment; a timeout or cancel
//!   runs a second exec that kills every process in the container carrying
//!   it and every descendant of one, a `setsid env -i` child included
//!   (SIGTERM, then SIGKILL: `kill_line`), so the whole tree dies inside
//!   the container, not only the wait (docs/contract.md §11 point 17);
//! * a watchdog exec beside each command (`watchdog.rs`) kills its tree
//!   when wsbench dies mid-command (SIGKILL included);
//! * each command runs under Docker's init as a child subreaper
//!   (`subreaper.rs`), so a double-forked escapee is still its
//!   descendant when the tree is killed;
//! * Docker keeps the stream open while a background child holds the
//!   pipes (up to about 2 s); a command running longer than a moment is
//!   polled with `inspect_exec`, so its end is seen without that delay.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::api::api_error;
use super::events::{DockerEvent, EventSink, emit};
use super::subreaper::{self, FirstStderr};
use super::watchdog::{self, Watchdog};
use crate::backend::shell::marker::{MARKER_VAR, kill_argv, new_marker};
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputChunk, OutputSink, Process,
    ProcessControl, SpawnRequest, StreamKind,
};

/// How long output is still collected after the process exited, when a
/// background child keeps the stream open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(300);

/// Runs longer than this are polled with `inspect_exec` for their end
/// (every 100 ms at first, backing off to once a second).
const POLL_AFTER: Duration = Duration::from_millis(150);

/// How long `inspect_exec` may still say "running" after the stream ended.
const EXIT_CODE_WAIT: Duration = Duration::from_secs(5);

/// Bytes buffered per pipe of a long-lived process before Docker's stream
/// is back-pressured.
const PIPE_BUFFER: usize = 1 << 20;

/// Where and as whom execs run.
#[derive(Clone)]
pub(crate) struct ExecTarget {
    /// Daemon connection.
    pub docker: Docker,
    /// Container id.
    pub container: String,
    /// Default working directory (`/workspace`).
    pub workdir: String,
    /// `user[:group]` for every exec; `None` = the image's user.
    pub user: Option<String>,
    /// Base environment laid under each request's own.
    pub env: BTreeMap<String, String>,
    /// Where exec started/exited events go.
    pub events: Option<EventSink>,
    /// Whether commands run under `docker-init -s` (probed once per
    /// handle, shared by its clones; see `subreaper.rs`).
    pub subreaper: Arc<tokio::sync::OnceCell<bool>>,
}

impl ExecTarget {
    pub(crate) fn env_list(&self, extra: &BTreeMap<String, String>, marker: &str) -> Vec<String> {
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.insert(MARKER_VAR.into(), marker.to_string());
        env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    /// Whether commands run under the subreaper, probing once (the first
    /// caller waits for the probe; a failed probe is logged once).
    pub(crate) async fn has_subreaper(&self) -> bool {
        *self
            .subreaper
            .get_or_init(|| async {
                match subreaper::probe(self).await {
                    Ok(()) => true,
                    Err(why) => {
                        tracing::warn!(
                            container = %self.container,
                            "commands run without {} as child subreaper, so a double-forked \
                             child may outlive its command's kill: {why}",
                            subreaper::DOCKER_INIT
                        );
                        false
                    }
                }
            })
            .await
    }

    /// `argv` as it is run: under the subreaper when the container has
    /// it; also whether it is. An empty `argv` stays empty (refused by
    /// `create`).
    pub(crate) async fn command_argv(&self, argv: &[String]) -> (Vec<String>, bool) {
        if !argv.is_empty() && self.has_subreaper().await {
            (subreaper::wrapped(argv), true)
        } else {
            (argv.to_vec(), false)
        }
    }

    pub(crate) fn cwd(&self, cwd: Option<&str>) -> String {
        cwd.map(|c| crate::backend::path::join(&self.workdir, c))
            .unwrap_or_else(|| self.workdir.clone())
    }

    pub(super) async fn create(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        marker: &str,
        stdin: bool,
    ) -> BackendResult<String> {
        if argv.is_empty() {
            return Err(BackendError::Spawn {
                program: String::new(),
                reason: "empty argv".into(),
            });
        }
        let opts = CreateExecOptions::<String> {
            attach_stdin: Some(stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            env: Some(self.env_list(env, marker)),
            cmd: Some(argv.to_vec()),
            user: self.user.clone(),
            working_dir: Some(self.cwd(cwd)),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(&self.container, opts)
            .await
            .map_err(|e| container_gone(&self.container, e))?;
        Ok(created.id)
    }

    pub(super) async fn start(
        &self,
        exec_id: &str,
    ) -> BackendResult<(
        std::pin::Pin<
            Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
        >,
        std::pin::Pin<Box<dyn AsyncWrite + Send>>,
    )> {
        let started = self
            .docker
            .start_exec(
                exec_id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: Some(64 * 1024),
                }),
            )
            .await
            .map_err(|e| container_gone(&self.container, e))?;
        match started {
            StartExecResults::Attached { output, input } => Ok((output, input)),
            StartExecResults::Detached => Err(BackendError::Remote {
                service: "docker",
                status: None,
                code: None,
                message: format!("exec {exec_id} started detached"),
            }),
        }
    }

    /// Exit code from `inspect_exec`, waiting while Docker still reports
    /// the exec as running. `Ok(None)` when it is still running at the end
    /// of `wait`.
    pub(crate) async fn exit_code(
        &self,
        exec_id: &str,
        wait: Duration,
    ) -> BackendResult<Option<i32>> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(2);
        loop {
            let info = self
                .docker
                .inspect_exec(exec_id)
                .await
                .map_err(|e| api_error(&format!("inspecting exec {exec_id}"), e))?;
            if info.running == Some(false) {
                return match info.exit_code {
                    Some(c) => Ok(Some(c as i32)),
                    None => Err(BackendError::Remote {
                        service: "docker",
                        status: None,
                        code: None,
                        message: format!("exec {exec_id} ended but Docker reports no exit code"),
                    }),
                };
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Kills every process carrying `marker`, from inside the container
    /// (SIGTERM, a grace, SIGKILL: [`kill_argv`]).
    pub(crate) async fn kill_marked(&self, marker: &str) -> BackendResult<()> {
        let argv = kill_argv(marker);
        // A fresh marker of its own: the killer must not match itself.
        let own = new_marker();
        let id = self
            .create(&argv, Some("/"), &BTreeMap::new(), &own, false)
            .await?;
        let (mut output, _input) = self.start(&id).await?;
        let mut err = Vec::new();
        while let Some(item) = output.next().await {
            match item {
                Ok(LogOutput::StdErr { message }) | Ok(LogOutput::Console { message }) => {
                    err.extend_from_slice(&message)
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        match self.exit_code(&id, EXIT_CODE_WAIT).await? {
            Some(0) => Ok(()),
            code => {
                tracing::warn!(
                    container = %self.container,
                    ?code,
                    stderr = %String::from_utf8_lossy(&err),
                    "killing an exec's processes did not finish cleanly"
                );
                Ok(())
            }
        }
    }

    /// Kills exec `exec_id` and everything it started, repeating the sweep
    /// until Docker reports the exec ended: a sweep that ran before the
    /// process had started (a kill right after spawn) finds nothing.
    pub(crate) async fn kill_exec(&self, exec_id: &str, marker: &str) -> BackendResult<()> {
        for _ in 0..20 {
            self.kill_marked(marker).await?;
            if self
                .exit_code(exec_id, Duration::from_millis(250))
                .await?
                .is_some()
            {
                return Ok(());
            }
        }
        Err(BackendError::Remote {
            service: "docker",
            status: None,
            code: None,
            message: format!("exec {exec_id} is still running after 20 kill sweeps"),
        })
    }

    /// Runs one command to completion (see the module docs).
    pub(crate) async fn exec(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let marker = new_marker();
        let (argv, wrapped) = self.command_argv(&req.argv).await;
        let command = async {
            let id = self
                .create(
                    &argv,
                    req.cwd.as_deref(),
                    &req.env,
                    &marker,
                    req.stdin.is_some(),
                )
                .await?;
            let streams = self.start(&id).await?;
            BackendResult::Ok((id, streams))
        };
        // The watchdog starts alongside, so it costs no extra round trip.
        let (command, dog) = tokio::join!(command, Watchdog::arm(self, &marker));
        let (id, (mut output, mut input)) = match command {
            Ok(c) => c,
            Err(e) => {
                watchdog::disarm(dog).await;
                return Err(e);
            }
        };
        emit(
            &self.events,
            DockerEvent::ExecStarted {
                container: self.container.clone(),
                exec_id: id.clone(),
                argv: req.argv.clone(),
            },
        );
        let writer = req.stdin.clone().map(|data| {
            tokio::spawn(async move {
                let _ = input.write_all(&data).await;
                let _ = input.shutdown().await;
                input
            })
        });

        let deadline = req.timeout.map(|t| started + t);
        let cancel = req.cancel.clone();
        let (done_tx, mut done_rx) = watch::channel(false);
        // The daemon reports a failed start (C12) as a *stdout* frame: the
        // first stdout frame is held back when it looks like that message,
        // and sent as stderr if the exec then ends with 126/127.
        let held: Arc<Mutex<Option<Bytes>>> = Arc::default();
        let held_in = held.clone();
        let final_sink = sink.clone();
        // Chunks forwarded so far: the drain after exit waits while output
        // is still arriving (Docker may hold megabytes in flight).
        let progress = Arc::new(AtomicU64::new(0));
        let progress_in = progress.clone();
        let pump = tokio::spawn(async move {
            let mut first = true;
            let mut first_err = FirstStderr::new(wrapped);
            while let Some(item) = output.next().await {
                progress_in.fetch_add(1, Ordering::Relaxed);
                let (stream, data) = match item {
                    Ok(LogOutput::StdOut { message }) => (StreamKind::Stdout, message),
                    Ok(LogOutput::StdErr { message }) => (StreamKind::Stderr, message),
                    // Unframed text is the daemon's own message too.
                    Ok(LogOutput::Console { message }) => (StreamKind::Stderr, message),
                    Ok(LogOutput::StdIn { .. }) => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "exec stream ended with an error");
                        break;
                    }
                };
                let data = match stream {
                    StreamKind::Stderr => match first_err.feed(data) {
                        Some(d) => d,
                        None => continue,
                    },
                    _ => data,
                };
                if std::mem::take(&mut first)
                    && stream == StreamKind::Stdout
                    && looks_like_start_failure(&data)
                {
                    *held_in.lock().expect("held lock") = Some(data);
                    continue;
                }
                let earlier = held_in.lock().expect("held lock").take();
                if let Some(sink) = &sink {
                    if let Some(h) = earlier {
                        let _ = sink
                            .send(OutputChunk {
                                stream: StreamKind::Stdout,
                                data: h,
                            })
                            .await;
                    }
                    let _ = sink.send(OutputChunk { stream, data }).await;
                }
            }
            if let (Some(data), Some(sink)) = (first_err.finish(), &sink) {
                let _ = sink
                    .send(OutputChunk {
                        stream: StreamKind::Stderr,
                        data,
                    })
                    .await;
            }
            let _ = done_tx.send(true);
        });

        let mut timed_out = false;
        let mut cancelled = false;
        // Wait for the stream to end, the process to exit (polled after a
        // moment), the timeout or the cancel.
        let mut exited_code: Option<i32> = None;
        let mut next_poll = started + POLL_AFTER;
        let mut poll_every = Duration::from_millis(100);
        loop {
            let stream_done = async {
                while !*done_rx.borrow() {
                    if done_rx.changed().await.is_err() {
                        break;
                    }
                }
            };
            let timeout = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            let cancelled_fut = async {
                match &cancel {
                    Some(c) => c.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stream_done => break,
                _ = timeout => { timed_out = true; break; }
                _ = cancelled_fut => { cancelled = true; break; }
                _ = tokio::time::sleep_until(next_poll.into()) => {
                    if let Ok(Some(code)) = self.exit_code(&id, Duration::ZERO).await {
                        exited_code = Some(code);
                        break;
                    }
                    // Long commands are polled less and less often.
                    next_poll = Instant::now() + poll_every;
                    poll_every = (poll_every * 3 / 2).min(Duration::from_secs(1));
                }
            }
        }
        if (timed_out || cancelled)
            && let Err(e) = self.kill_exec(&id, &marker).await
        {
            tracing::warn!(container = %self.container, error = %e, "cannot kill a timed-out exec");
        }
        // The stream ends soon after the process; background children
        // holding it open are not waited for once output goes quiet.
        let grace = if exited_code.is_some() {
            DRAIN_AFTER_EXIT
        } else {
            EXIT_CODE_WAIT
        };
        loop {
            let seen = progress.load(Ordering::Relaxed);
            let finished = tokio::time::timeout(grace, async {
                while !*done_rx.borrow() {
                    if done_rx.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
            if finished.is_ok() || progress.load(Ordering::Relaxed) == seen {
                break;
            }
        }
        pump.abort();
        if let Some(w) = writer {
            w.abort();
        }
        let exit_code = match exited_code {
            Some(c) => Some(c),
            None => {
                let code = self.exit_code(&id, EXIT_CODE_WAIT).await?;
                if code.is_none() && !timed_out && !cancelled {
                    return Err(BackendError::Remote {
                        service: "docker",
                        status: None,
                        code: None,
                        message: format!(
                            "exec {id} output ended but Docker still reports it running after {EXIT_CODE_WAIT:?}"
                        ),
                    });
                }
                code
            }
        };
        // Ended (or killed, or given up on after the kill sweeps): the
        // watchdog has nothing left to do. On the errors above it was
        // dropped instead, and kills what may still run.
        watchdog::disarm(dog).await;
        let held = held.lock().expect("held lock").take();
        if let (Some(data), Some(sink)) = (held, &final_sink) {
            let stream = if matches!(exit_code, Some(126) | Some(127)) {
                StreamKind::Stderr
            } else {
                StreamKind::Stdout
            };
            let _ = sink.send(OutputChunk { stream, data }).await;
        }
        let signal = exit_code
            .filter(|c| (129..=192).contains(c) && (timed_out || cancelled))
            .map(|c| c - 128);
        emit(
            &self.events,
            DockerEvent::ExecExited {
                container: self.container.clone(),
                exec_id: id,
                exit_code,
                duration: started.elapsed(),
            },
        );
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }

    /// Starts a long-lived process with its stdin attached.
    pub(crate) async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        let marker = new_marker();
        let (argv, wrapped) = self.command_argv(&req.argv).await;
        let command = async {
            let id = self
                .create(&argv, req.cwd.as_deref(), &req.env, &marker, true)
                .await?;
            let streams = self.start(&id).await?;
            BackendResult::Ok((id, streams))
        };
        let (command, dog) = tokio::join!(command, Watchdog::arm(self, &marker));
        let (id, (mut output, input)) = match command {
            Ok(c) => c,
            Err(e) => {
                watchdog::disarm(dog).await;
                return Err(e);
            }
        };
        emit(
            &self.events,
            DockerEvent::ExecStarted {
                container: self.container.clone(),
                exec_id: id.clone(),
                argv: req.argv.clone(),
            },
        );
        let (mut out_w, out_r) = tokio::io::duplex(PIPE_BUFFER);
        let (mut err_w, err_r) = tokio::io::duplex(PIPE_BUFFER);
        let (done_tx, done_rx) = watch::channel(false);
        tokio::spawn(async move {
            let (mut out_open, mut err_open) = (true, true);
            let mut first_err = FirstStderr::new(wrapped);
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) if out_open => {
                        out_open = out_w.write_all(&message).await.is_ok();
                    }
                    Ok(LogOutput::StdErr { message }) | Ok(LogOutput::Console { message })
                        if err_open =>
                    {
                        if let Some(m) = first_err.feed(message) {
                            err_open = err_w.write_all(&m).await.is_ok();
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            if let Some(m) = first_err.finish()
                && err_open
            {
                let _ = err_w.write_all(&m).await;
            }
            let _ = out_w.shutdown().await;
            let _ = err_w.shutdown().await;
            let _ = done_tx.send(true);
        });
        let control = Arc::new(DockerProcess {
            target: self.clone(),
            exec_id: id,
            marker,
            done: done_rx,
            status: Mutex::new(None),
            dog: Mutex::new(dog),
        });
        Ok(Process {
            stdin: Box::new(CloseOnDrop(Some(input))),
            stdout: Box::new(out_r),
            stderr: Box::new(err_r),
            control,
        })
    }
}

/// Whether a first stdout frame is the daemon's report of an exec that
/// could not start (`OCI runtime exec failed: exec failed: ...`).
fn looks_like_start_failure(data: &[u8]) -> bool {
    let head = &data[..data.len().min(256)];
    let text = String::from_utf8_lossy(head);
    (text.starts_with("OCI runtime") || text.contains("exec failed")) && data.ends_with(b"\n")
}

/// The stdin half of an exec's attached stream. Dropping it half-closes
/// the connection, which Docker turns into EOF on the process's stdin (a
/// plain drop of bollard's writer would leave stdin open).
struct CloseOnDrop(Option<std::pin::Pin<Box<dyn AsyncWrite + Send>>>);

impl AsyncWrite for CloseOnDrop {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.0.as_mut() {
            Some(w) => w.as_mut().poll_write(cx, buf),
            None => std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(w) => w.as_mut().poll_flush(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(w) => w.as_mut().poll_shutdown(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(mut w) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = w.shutdown().await;
            });
        }
    }
}

/// Maps a failure to create or start an exec: a missing container (404)
/// is gone, a stopped or paused one (409 "is not running", "is paused")
/// is stopped; see [`super::api::container_health`].
pub(crate) fn container_gone(container: &str, e: bollard::errors::Error) -> BackendError {
    super::api::container_health(container, &e, true)
        .unwrap_or_else(|| api_error(&format!("exec in container {container}"), e))
}

/// Control of a long-lived exec.
struct DockerProcess {
    target: ExecTarget,
    exec_id: String,
    marker: String,
    done: watch::Receiver<bool>,
    status: Mutex<Option<Option<i32>>>,
    /// Disarmed once the process has ended; dropped with the handle
    /// otherwise (then it kills the tree, as `Drop` does).
    dog: Mutex<Option<Watchdog>>,
}

#[async_trait]
impl ProcessControl for DockerProcess {
    fn id(&self) -> String {
        format!(
            "exec {}",
            crate::backend::text::head_bytes(&self.exec_id, 12)
        )
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        if let Some(s) = *self.status.lock().expect("status lock") {
            return Ok(s);
        }
        let mut done = self.done.clone();
        while !*done.borrow() {
            if done.changed().await.is_err() {
                break;
            }
        }
        // The stream can also stay open past the exit (background
        // children): poll until Docker says it ended.
        let code = loop {
            if let Some(c) = self.target.exit_code(&self.exec_id, EXIT_CODE_WAIT).await? {
                break Some(c);
            }
        };
        *self.status.lock().expect("status lock") = Some(code);
        let dog = self.dog.lock().expect("watchdog lock").take();
        watchdog::disarm(dog).await;
        emit(
            &self.target.events,
            DockerEvent::ExecExited {
                container: self.target.container.clone(),
                exec_id: self.exec_id.clone(),
                exit_code: code,
                duration: Duration::ZERO,
            },
        );
        Ok(code)
    }

    fn try_status(&self) -> Option<Option<i32>> {
        *self.status.lock().expect("status lock")
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            return Ok(());
        }
        self.target.kill_exec(&self.exec_id, &self.marker).await?;
        let _ = tokio::time::timeout(EXIT_CODE_WAIT, self.wait()).await;
        Ok(())
    }
}

impl Drop for DockerProcess {
    fn drop(&mut self) {
        if self.try_status().is_none()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let target = self.target.clone();
            let (id, marker) = (self.exec_id.clone(), self.marker.clone());
            rt.spawn(async move {
                let _ = target.kill_exec(&id, &marker).await;
            });
        }
    }
}
