//! Commands in an OpenSandbox sandbox: `POST /command` with execd's
//! event stream, each output line delivered as it comes; a timeout or
//! cancel interrupts the command and sweeps its marked process tree.

use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;

use futures::StreamExt;
use reqwest::header::ACCEPT;
use serde_json::{Value, json};

use super::SERVICE;
use super::events::{Ending, SseReader, line_bytes};
use super::sandbox::OpenSandboxSandbox;
use crate::backend::cloud::{self, KILL_GRACE};
use crate::backend::http::{On404, Retry};
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputChunk, OutputSink, StreamKind,
};

/// How a command is stopped on timeout or cancel.
pub(super) enum Stop {
    /// A `/command`: every process carrying this marker.
    Marker(String),
    /// A line of bash session `0`: the session.
    Session(String),
}

/// One streamed execd call (see [`OpenSandboxSandbox::follow`]).
pub(super) struct Call<'a> {
    /// `/command` or `/session/{id}/run`.
    pub path: &'a str,
    pub body: &'a Value,
    pub stop: &'a Stop,
    pub started: Instant,
    pub timeout: Option<Duration>,
    pub cancel: Option<&'a tokio_util::sync::CancellationToken>,
    /// For a not-started error.
    pub program: &'a str,
}

/// Extra time given to execd's own timeout, so wsbench's interrupt comes
/// first and execd's kill is only a backstop.
const SERVER_TIMEOUT_SLACK: Duration = Duration::from_secs(5);

impl OpenSandboxSandbox {
    /// Interrupts command `id` (`DELETE /command?id=`).
    async fn interrupt(&self, id: &str) {
        let url = self.url("/command");
        let r = self
            .execd
            .send_ok(Retry::Idempotent, On404::Remote, |c| {
                c.delete(&url).query(&[("id", id)])
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(sandbox = %self.id, command = id, error = %e, "interrupt failed");
        }
    }

    /// Stops a command: execd's interrupt, then the marker sweep for
    /// children that left its process group; for a line of a bash
    /// session, the session deleted (its shell and what it runs).
    async fn stop(&self, cmd_id: Option<&str>, how: &Stop) {
        if let Some(id) = cmd_id {
            self.interrupt(id).await;
        }
        match how {
            Stop::Marker(marker) => cloud::kill_marked(self, marker).await,
            Stop::Session(sid) => {
                if let Err(e) = self.delete_session(sid).await {
                    tracing::warn!(sandbox = %self.id, session = %sid, error = %e, "deleting a bash session failed");
                }
            }
        }
    }

    /// [`Sandbox::exec`](crate::backend::Sandbox::exec): one command and
    /// its event stream, to its end, its timeout or its cancel.
    pub(super) async fn run(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        // C18: the user's line goes to execd's shell verbatim.
        let line = cloud::command_line(&req.argv)?;
        let mut envs = self.env.clone();
        envs.extend(req.env.clone());
        // Lets a timeout find the whole tree, not only execd's child.
        let marker = cloud::new_marker();
        envs.insert(cloud::MARKER_VAR.into(), marker.clone());
        let cwd = req
            .cwd
            .as_deref()
            .map(|c| self.resolve(c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut body = json!({
            "command": line,
            "cwd": cwd,
            "background": false,
            "envs": envs,
        });
        if let Some(t) = req.timeout {
            body["timeout"] = json!((t + SERVER_TIMEOUT_SLACK).as_millis() as u64);
        }
        let how = Stop::Marker(marker);
        let program = req.argv.first().cloned().unwrap_or_default();
        let call = Call {
            path: "/command",
            body: &body,
            stop: &how,
            started,
            timeout: req.timeout,
            cancel: req.cancel.as_ref(),
            program: &program,
        };
        self.follow(call, sink).await
    }

    /// Posts `call.body` to `call.path` and follows execd's event stream
    /// to the command's end, its timeout or its cancel (both stop it as
    /// `call.stop` says).
    pub(super) async fn follow(
        &self,
        call: Call<'_>,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let Call {
            path,
            body,
            stop: how,
            started,
            timeout,
            cancel,
            program,
        } = call;
        let url = self.url(path);
        let resp = self
            .execd
            .send(Retry::RateLimitOnly, true, |c| {
                c.post(&url).header(ACCEPT, "text/event-stream").json(body)
            })
            .await?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.bytes().await.unwrap_or_default();
            return Err(self.execd.status_error(status, &body, On404::SandboxGone));
        }
        let mut stream: Pin<Box<dyn futures::Stream<Item = reqwest::Result<Bytes>> + Send>> =
            Box::pin(resp.bytes_stream());
        let mut sse = SseReader::default();
        let timeout = cloud::sleep_until(timeout.map(|t| started + t));
        let cancel = cloud::cancelled(cancel);
        tokio::pin!(timeout, cancel);
        let mut cmd_id: Option<String> = None;
        let mut ending: Option<Ending> = None;
        let mut stopped: Option<Instant> = None;
        let (mut timed_out, mut cancelled) = (false, false);
        let mut eof = false;
        'outer: loop {
            while let Some(ev) = sse.next_event()? {
                match ev.get("type").and_then(Value::as_str).unwrap_or("") {
                    "init" => {
                        cmd_id = ev.get("text").and_then(Value::as_str).map(str::to_string);
                        if stopped.is_some()
                            && let Some(id) = &cmd_id
                        {
                            self.interrupt(id).await;
                        }
                    }
                    kind @ ("stdout" | "stderr") => {
                        let text = ev.get("text").and_then(Value::as_str).unwrap_or("");
                        if let Some(s) = &sink {
                            let stream = if kind == "stdout" {
                                StreamKind::Stdout
                            } else {
                                StreamKind::Stderr
                            };
                            let _ = s
                                .send(OutputChunk {
                                    stream,
                                    data: line_bytes(text),
                                })
                                .await;
                        }
                    }
                    "execution_complete" => {
                        ending.get_or_insert(Ending::Exit(0));
                        break 'outer;
                    }
                    "error" => {
                        let evalue = ev
                            .pointer("/error/evalue")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .trim()
                            .to_string();
                        ending = Some(match evalue.parse::<i32>() {
                            Ok(c) => Ending::Exit(c),
                            Err(_) => Ending::NotStarted(evalue),
                        });
                        break 'outer;
                    }
                    _ => {} // ping, status, result, execution_count
                }
            }
            if eof {
                if let Some(ev) = sse.finish()?
                    && let Some(t) = ev.get("type").and_then(Value::as_str)
                {
                    tracing::debug!(event = t, "trailing execd event without a blank line");
                }
                break;
            }
            let grace = cloud::sleep_until(stopped.map(|t| t + KILL_GRACE));
            tokio::select! {
                chunk = tokio::time::timeout(self.idle, stream.next()) => match chunk {
                    Err(_) => {
                        self.stop(cmd_id.as_deref(), how).await;
                        return Err(BackendError::Remote {
                            service: SERVICE,
                            status: None,
                            code: Some("stream_idle".into()),
                            message: format!("no event from execd for {}s; the command was interrupted", self.idle.as_secs()),
                        });
                    }
                    Ok(Some(Ok(b))) => sse.push(&b),
                    Ok(Some(Err(_))) | Ok(None) => eof = true,
                },
                _ = &mut timeout, if stopped.is_none() => {
                    timed_out = true;
                    stopped = Some(Instant::now());
                    self.stop(cmd_id.as_deref(), how).await;
                }
                _ = &mut cancel, if stopped.is_none() => {
                    cancelled = true;
                    stopped = Some(Instant::now());
                    self.stop(cmd_id.as_deref(), how).await;
                }
                _ = grace => break,
            }
        }
        let (exit_code, signal) = match ending {
            Some(Ending::Exit(c)) if stopped.is_some() && c == 0 => (Some(128 + 9), Some(9)),
            Some(Ending::Exit(c)) => (Some(c), None),
            Some(Ending::NotStarted(_)) | None if stopped.is_some() => (Some(128 + 9), Some(9)),
            Some(Ending::NotStarted(reason)) => {
                return Err(BackendError::Spawn {
                    program: program.to_string(),
                    reason: if reason.is_empty() {
                        "execd reported an error without a value".into()
                    } else {
                        reason
                    },
                });
            }
            None => {
                self.stop(cmd_id.as_deref(), how).await;
                return Err(BackendError::Remote {
                    service: SERVICE,
                    status: None,
                    code: Some("stream_interrupted".into()),
                    message: "the command stream from execd ended before the command finished; it was interrupted".into(),
                });
            }
        };
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }
}
