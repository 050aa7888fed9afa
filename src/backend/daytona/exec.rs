//! Commands in a Daytona sandbox. By default in a throw-away toolbox
//! session whose log is followed over a WebSocket (stdout and stderr
//! apart, byte-exact; a timeout or cancel kills the marked process tree);
//! else with one blocking `/process/execute` call (merged output).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};

use super::SERVICE;
use super::logs::{Delivered, LogDemux};
use super::sandbox::DaytonaSandbox;
use crate::backend::cloud::{self, MARKER_VAR};
use crate::backend::http::{On404, Retry};
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputChunk, OutputSink, StreamKind,
};

/// Limit on waiting for the exit code after the log stream ended.
const EXIT_CODE_WAIT: Duration = Duration::from_secs(30);

impl DaytonaSandbox {
    /// The shell text a session runs: `cd`, exports, then the user's line
    /// in its own `sh -c` with the marker variable and no stdin.
    fn session_command(&self, req: &ExecRequest, marker: &str) -> BackendResult<String> {
        let line = cloud::command_line(&req.argv)?;
        let cwd = req
            .cwd
            .as_deref()
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut env = self.env.clone();
        env.extend(req.env.clone());
        Ok(format!(
            "cd -- {} && {{ {}{MARKER_VAR}={marker} /bin/sh -c {} </dev/null; }}",
            cloud::shell_quote(&cwd),
            cloud::env_prefix(&env)?,
            cloud::shell_quote(&line)
        ))
    }

    /// Kills every process that carries `marker` (the whole tree of a
    /// command, even children that left its process group).
    pub(super) async fn kill_marked(&self, marker: &str) {
        let script = cloud::kill_marked_line(marker);
        let url = self.url("/process/execute");
        let body = json!({"command": format!("/bin/sh -c {}", cloud::shell_quote(&script)), "timeout": 30});
        if let Err(e) = self
            .tb
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| {
                c.post(&url).json(&body)
            })
            .await
        {
            tracing::warn!(sandbox = %self.id, error = %e, "killing a timed-out command failed");
        }
    }

    pub(super) async fn delete_session(&self, sid: &str) {
        let url = self.url(&format!("/process/session/{sid}"));
        let _ = self
            .tb
            .send(Retry::Idempotent, false, |c| c.delete(&url))
            .await;
    }

    pub(super) async fn command_exit(&self, sid: &str, cmd: &str) -> BackendResult<Option<i32>> {
        let url = self.url(&format!("/process/session/{sid}/command/{cmd}"));
        let v: Value = self
            .tb
            .json(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await?;
        Ok(v.get("exitCode")
            .and_then(Value::as_i64)
            .or_else(|| v.get("code").and_then(Value::as_i64))
            .map(|c| c as i32))
    }

    pub(super) async fn wait_exit(&self, sid: &str, cmd: &str) -> BackendResult<Option<i32>> {
        let deadline = Instant::now() + EXIT_CODE_WAIT;
        let mut delay = Duration::from_millis(20);
        loop {
            if let Some(c) = self.command_exit(sid, cmd).await? {
                return Ok(Some(c));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    /// The stored log (no `follow`): `{stdout, stderr}` for new SDK
    /// versions.
    pub(super) async fn stored_logs(
        &self,
        sid: &str,
        cmd: &str,
    ) -> BackendResult<(Vec<u8>, Vec<u8>)> {
        let url = self.url(&format!("/process/session/{sid}/command/{cmd}/logs"));
        let resp = self
            .tb
            .send_ok(Retry::Idempotent, On404::SandboxGone, |c| c.get(&url))
            .await?;
        let body = resp
            .bytes()
            .await
            .map_err(|e| self.tb.transport_error(&e))?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) if v.is_object() => {
                let s = |k: &str| {
                    v.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .as_bytes()
                        .to_vec()
                };
                Ok((s("stdout"), s("stderr")))
            }
            // Plain text (an old toolbox): all of it as stdout.
            _ => Ok((body.to_vec(), Vec::new())),
        }
    }

    pub(super) async fn exec_session(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let marker = cloud::new_marker();
        let command = self.session_command(&req, &marker)?;
        let sid = format!("wsbench-{marker}");
        let url = self.url("/process/session");
        self.tb
            .send_ok(Retry::RateLimitOnly, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({"sessionId": sid}))
            })
            .await?;
        let result = self
            .run_in_session(&req, sink, &sid, &command, &marker, started)
            .await;
        self.delete_session(&sid).await;
        result
    }

    pub(super) async fn run_in_session(
        &self,
        req: &ExecRequest,
        sink: Option<OutputSink>,
        sid: &str,
        command: &str,
        marker: &str,
        started: Instant,
    ) -> BackendResult<ExecOutcome> {
        let url = self.url(&format!("/process/session/{sid}/exec"));
        let v: Value = self
            .tb
            .json(Retry::RateLimitOnly, On404::SandboxGone, |c| {
                c.post(&url)
                    .json(&json!({"command": command, "runAsync": true, "async": true}))
            })
            .await?;
        let cmd = v
            .get("cmdId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                self.tb
                    .bad_response(format!("session exec answer without cmdId: {v}"))
            })?;
        let mut delivered = Delivered::default();
        let timeout = cloud::sleep_until(req.timeout.map(|t| started + t));
        let cancel = cloud::cancelled(req.cancel.as_ref());
        let follow = self.follow_logs(sid, &cmd, &sink, &mut delivered);
        let (mut timed_out, mut cancelled) = (false, false);
        let followed = tokio::select! {
            r = follow => Some(r),
            _ = timeout => { timed_out = true; None }
            _ = cancel => { cancelled = true; None }
        };
        if timed_out || cancelled {
            self.kill_marked(marker).await;
            self.delete_session(sid).await;
            return Ok(ExecOutcome {
                exit_code: Some(128 + 9),
                signal: Some(9),
                timed_out,
                cancelled,
                duration: started.elapsed(),
            });
        }
        let stream_ok = matches!(followed, Some(Ok(())));
        if let Some(Err(e)) = &followed {
            tracing::debug!(sandbox = %self.id, error = %e, "log stream failed; falling back to the stored log");
        }
        // The log stream closing does not mean the exit code is stored.
        let rest = req.timeout.map(|t| t.saturating_sub(started.elapsed()));
        let exit = match rest {
            Some(r) => match tokio::time::timeout(r, self.wait_exit(sid, &cmd)).await {
                Ok(x) => x?,
                Err(_) => {
                    self.kill_marked(marker).await;
                    return Ok(ExecOutcome {
                        exit_code: Some(128 + 9),
                        signal: Some(9),
                        timed_out: true,
                        cancelled: false,
                        duration: started.elapsed(),
                    });
                }
            },
            None => self.wait_exit(sid, &cmd).await?,
        };
        // After a cut stream (or when nothing arrived), fill in from the
        // stored log what was not delivered live.
        if !stream_ok || (delivered.stdout == 0 && delivered.stderr == 0) {
            let (out, err) = self.stored_logs(sid, &cmd).await?;
            if let Some(s) = &sink {
                for (kind, all, done) in [
                    (StreamKind::Stdout, &out, delivered.stdout),
                    (StreamKind::Stderr, &err, delivered.stderr),
                ] {
                    if all.len() > done {
                        let _ = s
                            .send(OutputChunk {
                                stream: kind,
                                data: Bytes::copy_from_slice(&all[done..]),
                            })
                            .await;
                    }
                }
            }
            delivered.stdout = delivered.stdout.max(out.len());
            delivered.stderr = delivered.stderr.max(err.len());
        }
        if exit == Some(-1) && delivered.stdout == 0 && delivered.stderr == 0 {
            return Err(not_started(&req.argv));
        }
        let exit = exit.ok_or_else(|| BackendError::Remote {
            service: SERVICE,
            status: None,
            code: Some("no_exit_code".into()),
            message: format!(
                "command {cmd} produced no exit code within {}s after its log ended",
                EXIT_CODE_WAIT.as_secs()
            ),
        })?;
        Ok(ExecOutcome {
            exit_code: Some(exit),
            signal: None,
            timed_out: false,
            cancelled: false,
            duration: started.elapsed(),
        })
    }

    /// Follows the command's log over a WebSocket until a normal close.
    pub(super) async fn follow_logs(
        &self,
        sid: &str,
        cmd: &str,
        sink: &Option<OutputSink>,
        delivered: &mut Delivered,
    ) -> BackendResult<()> {
        use tokio_tungstenite::tungstenite::Message;
        let ws_err = |e: &dyn std::fmt::Display| BackendError::Remote {
            service: SERVICE,
            status: None,
            code: Some("log_stream".into()),
            message: format!("log stream: {e}"),
        };
        let mut ws = self
            .open_ws(
                &format!("/process/session/{sid}/command/{cmd}/logs?follow=true"),
                "log_stream",
                "its session",
            )
            .await?;
        let mut demux = LogDemux::default();
        let emit = |pieces: Vec<(StreamKind, Bytes)>, delivered: &mut Delivered| {
            let sink = sink.clone();
            let mut chunks = Vec::new();
            for (kind, data) in pieces {
                match kind {
                    StreamKind::Stdout => delivered.stdout += data.len(),
                    StreamKind::Stderr => delivered.stderr += data.len(),
                }
                chunks.push(OutputChunk { stream: kind, data });
            }
            async move {
                if let Some(s) = sink {
                    for c in chunks {
                        let _ = s.send(c).await;
                    }
                }
            }
        };
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(b))) => emit(demux.push(&b), delivered).await,
                Some(Ok(Message::Text(t))) => emit(demux.push(t.as_bytes()), delivered).await,
                Some(Ok(Message::Ping(p))) => {
                    let _ = ws.send(Message::Pong(p)).await;
                }
                Some(Ok(Message::Close(frame))) => {
                    if let Some(rest) = demux.finish() {
                        emit(vec![rest], delivered).await;
                    }
                    let normal = frame.as_ref().is_none_or(|f| u16::from(f.code) == 1000);
                    return if normal {
                        Ok(())
                    } else {
                        Err(ws_err(&format!("closed with {frame:?}")))
                    };
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(ws_err(&e)),
                None => return Err(ws_err(&"ended without a close frame")),
            }
        }
    }

    pub(super) async fn exec_execute(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let line = cloud::command_line(&req.argv)?;
        let cwd = req
            .cwd
            .as_deref()
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut env = self.env.clone();
        env.extend(req.env.clone());
        let limit = req.timeout.unwrap_or(self.default_timeout);
        // Whole seconds, rounded up, and always sent (never the daemon's
        // hidden 10 s default).
        let secs = limit.as_millis().div_ceil(1000).max(1) as u64;
        let body = json!({
            "command": format!("/bin/sh -c {}", cloud::shell_quote(&line)),
            "cwd": cwd,
            "timeout": secs,
            "envs": env,
        });
        let url = self.url("/process/execute");
        let call = self.tb.send(Retry::RateLimitOnly, true, |c| {
            c.post(&url)
                .json(&body)
                .timeout(limit + Duration::from_secs(30))
        });
        let cancel = cloud::cancelled(req.cancel.as_ref());
        let resp = tokio::select! {
            r = call => r?,
            _ = cancel => {
                return Ok(ExecOutcome {
                    exit_code: None,
                    signal: None,
                    timed_out: false,
                    cancelled: true,
                    duration: started.elapsed(),
                });
            }
        };
        let status = resp.status().as_u16();
        if status == 408 {
            return Ok(ExecOutcome {
                exit_code: Some(128 + 9),
                signal: Some(9),
                timed_out: true,
                cancelled: false,
                duration: started.elapsed(),
            });
        }
        let resp = self.tb.check(resp, On404::SandboxGone).await?;
        let v: Value = self.tb.decode(resp).await?;
        let exit = v
            .get("exitCode")
            .and_then(Value::as_i64)
            .or_else(|| v.get("code").and_then(Value::as_i64))
            .map(|c| c as i32);
        let result = v.get("result").and_then(Value::as_str).unwrap_or("");
        if exit == Some(-1) && result.is_empty() {
            return Err(not_started(&req.argv));
        }
        if let Some(s) = &sink
            && !result.is_empty()
        {
            let _ = s
                .send(OutputChunk {
                    stream: StreamKind::Stdout,
                    data: Bytes::copy_from_slice(result.as_bytes()),
                })
                .await;
        }
        Ok(ExecOutcome {
            exit_code: exit,
            signal: None,
            timed_out: false,
            cancelled: false,
            duration: started.elapsed(),
        })
    }
}

fn not_started(argv: &[String]) -> BackendError {
    BackendError::Spawn {
        program: cloud::command_line(argv).unwrap_or_default(),
        reason: "the command could not be started (Daytona returned exit code -1 and no output)"
            .into(),
    }
}
