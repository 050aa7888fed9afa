//! Commands in an E2B sandbox: one `process.Process/Start` stream per
//! exec, with the command's own timeout and cancel (a `SendSignal` kill,
//! then the marker sweep for children that left it), and long-lived
//! processes with piped stdin for [`Sandbox::spawn`](crate::backend::Sandbox::spawn).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use bytes::Bytes;
use reqwest::header::CONTENT_TYPE;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::SERVICE;
use super::connect::{Event, EventStream, bad, envelope, exit_of, stream_cut};
use super::sandbox::E2bSandbox;
use crate::backend::cloud::{self, KILL_GRACE};
use crate::backend::http::{On404, Retry};
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputChunk, OutputSink, Process,
    ProcessControl, PtySize, SpawnRequest, StreamKind,
};

/// Extra time on the Connect deadline beyond the command's own timeout, so
/// the transport never ends a command before wsbench's own kill does.
const DEADLINE_SLACK: Duration = Duration::from_secs(30);

impl E2bSandbox {
    /// Opens a `process.Process/Start` stream; with `pty`, on a terminal
    /// of that size (`StartRequest.pty`), whose output then comes as `pty`
    /// data events and whose input goes as `ProcessInput.pty`.
    pub(super) async fn start(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        stdin: bool,
        deadline: Option<Duration>,
        pty: Option<PtySize>,
    ) -> BackendResult<(reqwest::Response, String)> {
        let line = cloud::command_line(argv)?;
        let mut envs = self.env.clone();
        envs.extend(env.clone());
        // Lets a timeout find the whole tree, not only the pid envd knows.
        let marker = cloud::new_marker();
        envs.insert(cloud::MARKER_VAR.into(), marker.clone());
        let cwd = cwd
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut msg = json!({
            "process": {"cmd": "/bin/sh", "args": ["-c", line], "envs": envs, "cwd": cwd},
            "stdin": stdin,
        });
        if let Some(size) = pty {
            msg["pty"] = json!({"size": {"cols": size.cols, "rows": size.rows}});
        }
        let body = Bytes::from(envelope(0, &serde_json::to_vec(&msg).expect("json")));
        let url = self.url("/process.Process/Start");
        let resp = self
            .envd
            .send(Retry::RateLimitOnly, true, |c| {
                let mut r = c
                    .post(&url)
                    .header(CONTENT_TYPE, "application/connect+json")
                    .header("connect-protocol-version", "1")
                    .header("keepalive-ping-interval", "50")
                    .body(body.clone());
                if let Some(d) = deadline {
                    // Never shorter than the command's own limit (C19).
                    r = r.header(
                        "connect-timeout-ms",
                        (d + DEADLINE_SLACK).as_millis().to_string(),
                    );
                }
                r
            })
            .await?;
        if resp.status().is_success() {
            return Ok((resp, marker));
        }
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap_or_default();
        Err(self.connect_error(status, &bytes, On404::SandboxGone))
    }

    /// Stops a command: `SendSignal` to its pid, then the marker sweep
    /// for children that left it.
    pub(super) async fn stop(&self, pid: Option<u32>, marker: &str) {
        if let Some(p) = pid
            && let Err(e) = self.kill_pid(p).await
        {
            tracing::warn!(sandbox = %self.id, pid = p, error = %e, "SendSignal failed");
        }
        cloud::kill_marked(self, marker).await;
    }

    /// [`Sandbox::exec`](crate::backend::Sandbox::exec): one Start stream,
    /// followed to its end, the command's timeout or its cancel.
    pub(super) async fn run(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let (resp, marker) = self
            .start(
                &req.argv,
                req.cwd.as_deref(),
                &req.env,
                req.stdin.is_some(),
                req.timeout,
                None,
            )
            .await?;
        let mut events = EventStream::new(resp, self.idle);
        let timeout = cloud::sleep_until(req.timeout.map(|t| started + t));
        let cancel = cloud::cancelled(req.cancel.as_ref());
        tokio::pin!(timeout, cancel);
        let mut pid: Option<u32> = None;
        let mut killed: Option<Instant> = None;
        let (mut timed_out, mut cancelled) = (false, false);
        let mut end: Option<(i32, bool, String, Option<String>)> = None;
        let mut stdin = req.stdin.clone();
        loop {
            let grace = cloud::sleep_until(killed.map(|t| t + KILL_GRACE));
            let ev = tokio::select! {
                ev = events.next() => ev,
                _ = &mut timeout, if killed.is_none() => {
                    timed_out = true;
                    killed = Some(Instant::now());
                    self.stop(pid, &marker).await;
                    continue;
                }
                _ = &mut cancel, if killed.is_none() => {
                    cancelled = true;
                    killed = Some(Instant::now());
                    self.stop(pid, &marker).await;
                    continue;
                }
                _ = grace => break,
            };
            match ev {
                Ok(Some(Event::Start(p))) => {
                    pid = Some(p);
                    if let Some(data) = stdin.take() {
                        self.feed_stdin(p, data).await?;
                    }
                }
                Ok(Some(Event::Data(stream, data))) => {
                    if let Some(s) = &sink {
                        let _ = s.send(OutputChunk { stream, data }).await;
                    }
                }
                // No PTY was asked for: envd sends no pty data here.
                Ok(Some(Event::KeepAlive | Event::Pty(_))) => {}
                Ok(Some(Event::End {
                    exit_code,
                    exited,
                    status,
                    error,
                })) => end = Some((exit_code, exited, status, error)),
                Ok(Some(Event::Eos(None))) => break,
                Ok(Some(Event::Eos(Some((code, message))))) => {
                    if code == "deadline_exceeded" && req.timeout.is_some() {
                        // The transport deadline (timeout + slack) passed:
                        // still the command's timeout as far as the caller
                        // is concerned.
                        timed_out = true;
                        self.stop(pid, &marker).await;
                        break;
                    }
                    if end.is_some() || killed.is_some() {
                        break;
                    }
                    return Err(BackendError::Remote {
                        service: SERVICE,
                        status: None,
                        code: Some(code),
                        message,
                    });
                }
                Ok(None) => {
                    if end.is_some() || killed.is_some() {
                        break;
                    }
                    self.stop(pid, &marker).await;
                    return Err(stream_cut(pid));
                }
                Err(e) => {
                    if end.is_none() {
                        self.stop(pid, &marker).await;
                    }
                    return Err(e);
                }
            }
        }
        let (exit_code, signal) = match &end {
            // Neither an exit nor a signal: envd could not run or wait for
            // the process, and says why.
            Some((_, false, status, Some(error)))
                if killed.is_none() && !status.starts_with("signal:") =>
            {
                return Err(BackendError::Remote {
                    service: SERVICE,
                    status: None,
                    code: Some("process_error".into()),
                    message: error.clone(),
                });
            }
            Some((code, _, status, _)) => exit_of(*code, status),
            None if killed.is_some() => (Some(128 + 9), Some(9)),
            None => (None, None),
        };
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }

    /// [`Sandbox::spawn`](crate::backend::Sandbox::spawn): a Start stream
    /// with stdin, pumped into the process's pipes.
    pub(super) async fn start_process(&self, req: SpawnRequest) -> BackendResult<Process> {
        let (resp, _marker) = self
            .start(&req.argv, req.cwd.as_deref(), &req.env, true, None, None)
            .await?;
        let mut events = EventStream::new(resp, self.idle);
        let pid = match events.next().await? {
            Some(Event::Start(p)) => p,
            Some(other) => {
                return Err(bad(format!("the first event was {other:?}, not start")));
            }
            None => return Err(stream_cut(None)),
        };
        let (out_w, out_r) = tokio::io::duplex(256 * 1024);
        let (err_w, err_r) = tokio::io::duplex(256 * 1024);
        let (in_w, in_r) = tokio::io::duplex(64 * 1024);
        let (status_tx, status_rx) = watch::channel(None::<Option<i32>>);
        tokio::spawn(pump_process(events, out_w, err_w, status_tx));
        let me = Arc::new(self.clone_handle());
        tokio::spawn(pump_stdin(me.clone(), pid, in_r));
        Ok(Process {
            stdin: Box::new(in_w),
            stdout: Box::new(out_r),
            stderr: Box::new(err_r),
            control: Arc::new(E2bProcess {
                pid,
                sandbox: me,
                status: status_rx,
            }),
        })
    }

    async fn feed_stdin(&self, pid: u32, data: Bytes) -> BackendResult<()> {
        let b64 = base64::engine::general_purpose::STANDARD;
        for chunk in data.chunks(1 << 20) {
            self.unary(
                "/process.Process/SendInput",
                json!({"process": {"pid": pid}, "input": {"stdin": b64.encode(chunk)}}),
                On404::Remote,
            )
            .await?;
        }
        self.unary(
            "/process.Process/CloseStdin",
            json!({"process": {"pid": pid}}),
            On404::Remote,
        )
        .await
        .map(|_| ())
    }

    pub(super) fn clone_handle(&self) -> E2bSandbox {
        E2bSandbox {
            id: self.id.clone(),
            envd: self.envd.clone(),
            base: self.base.clone(),
            workdir: self.workdir.clone(),
            env: self.env.clone(),
            user: self.user.clone(),
            idle: self.idle,
        }
    }
}

async fn pump_process(
    mut events: EventStream,
    mut out: tokio::io::DuplexStream,
    mut err: tokio::io::DuplexStream,
    status: watch::Sender<Option<Option<i32>>>,
) {
    let mut code = None;
    loop {
        match events.next().await {
            Ok(Some(Event::Data(StreamKind::Stdout, d))) => {
                let _ = out.write_all(&d).await;
            }
            Ok(Some(Event::Data(StreamKind::Stderr, d))) => {
                let _ = err.write_all(&d).await;
            }
            Ok(Some(Event::End {
                exit_code, status, ..
            })) => code = exit_of(exit_code, &status).0,
            Ok(Some(Event::Eos(_))) | Ok(None) | Err(_) => break,
            Ok(Some(_)) => {}
        }
    }
    let _ = out.shutdown().await;
    let _ = err.shutdown().await;
    let _ = status.send(Some(code));
}

async fn pump_stdin(sb: Arc<E2bSandbox>, pid: u32, mut input: tokio::io::DuplexStream) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match input.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let body =
                    json!({"process": {"pid": pid}, "input": {"stdin": b64.encode(&buf[..n])}});
                if sb
                    .unary("/process.Process/SendInput", body, On404::Remote)
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
    let _ = sb
        .unary(
            "/process.Process/CloseStdin",
            json!({"process": {"pid": pid}}),
            On404::Remote,
        )
        .await;
}

impl Drop for E2bProcess {
    fn drop(&mut self) {
        // Like the local backend: a dropped handle does not leave the
        // process running in the sandbox (an MCP server, for instance).
        if self.try_status().is_none()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (sb, pid) = (self.sandbox.clone(), self.pid);
            rt.spawn(async move {
                let _ = sb.kill_pid(pid).await;
            });
        }
    }
}

/// Control of a process started with [`Sandbox::spawn`] on E2B.
struct E2bProcess {
    pid: u32,
    sandbox: Arc<E2bSandbox>,
    status: watch::Receiver<Option<Option<i32>>>,
}

#[async_trait]
impl ProcessControl for E2bProcess {
    fn id(&self) -> String {
        format!("e2b {} pid {}", self.sandbox.id, self.pid)
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        let mut rx = self.status.clone();
        let v = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| stream_cut(Some(self.pid)))?;
        Ok(v.expect("checked by wait_for"))
    }

    fn try_status(&self) -> Option<Option<i32>> {
        *self.status.borrow()
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            return Ok(());
        }
        self.sandbox.kill_pid(self.pid).await?;
        let _ = tokio::time::timeout(KILL_GRACE, self.wait()).await;
        Ok(())
    }
}
