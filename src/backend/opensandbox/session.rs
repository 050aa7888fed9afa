//! execd's bash sessions (`docs/specs/opensandbox/execd-sessions.yaml`:
//! `POST /session`, `POST /session/{id}/run` with the same event stream
//! as `/command`, `DELETE /session/{id}`) as a [`LineShell`]: the
//! line-mode fallback of `!` and `wsbench shell`, since execd has no PTY.
//!
//! A line runs in the session's one bash, so its state carries over.
//! execd cannot interrupt one line of a session without its command id,
//! which the stream may not give: a cancel (ctrl-c in the line-mode
//! shell) deletes the whole session, and the caller opens a new one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::SERVICE;
use super::exec::{Call, Stop};
use super::sandbox::OpenSandboxSandbox;
use crate::backend::http::{On404, Retry};
use crate::backend::{BackendError, BackendResult, ExecOutcome, LineShell, OutputSink};

impl OpenSandboxSandbox {
    /// `POST /session` in `cwd`; returns the session id.
    pub(super) async fn create_session(&self, cwd: &str) -> BackendResult<String> {
        let url = self.url("/session");
        let v: Value = self
            .execd
            .json(Retry::RateLimitOnly, On404::SandboxGone, |c| {
                c.post(&url).json(&json!({"cwd": cwd}))
            })
            .await?;
        v.get("session_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| self.execd.bad_response(format!("no session_id in {v}")))
    }

    /// `DELETE /session/{id}`; a session already gone is not an error.
    pub(super) async fn delete_session(&self, sid: &str) -> BackendResult<()> {
        self.execd
            .delete(&self.url(&format!("/session/{sid}")))
            .await
            .map(|_| ())
    }

    /// [`Sandbox::line_shell`](crate::backend::Sandbox::line_shell).
    pub(super) async fn open_line_shell(
        &self,
        cwd: Option<String>,
    ) -> BackendResult<Box<dyn LineShell>> {
        let cwd = cwd.unwrap_or_else(|| self.workdir.clone());
        let sid = self.create_session(&cwd).await?;
        Ok(Box::new(BashSession {
            sandbox: Arc::new(self.clone_handle()),
            sid,
            closed: AtomicBool::new(false),
        }))
    }

    fn clone_handle(&self) -> OpenSandboxSandbox {
        OpenSandboxSandbox {
            id: self.id.clone(),
            execd: self.execd.clone(),
            base: self.base.clone(),
            workdir: self.workdir.clone(),
            env: self.env.clone(),
            idle: self.idle,
        }
    }
}

/// One execd bash session.
struct BashSession {
    sandbox: Arc<OpenSandboxSandbox>,
    sid: String,
    /// Deleted (closed, or a cancelled line took it).
    closed: AtomicBool,
}

#[async_trait]
impl LineShell for BashSession {
    fn id(&self) -> String {
        format!("opensandbox {} bash session {}", self.sandbox.id, self.sid)
    }

    async fn run(
        &self,
        line: &str,
        sink: Option<OutputSink>,
        cancel: Option<CancellationToken>,
    ) -> BackendResult<ExecOutcome> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(BackendError::Remote {
                service: SERVICE,
                status: None,
                code: Some("session_ended".into()),
                message: format!("{} was ended; open a new one", self.id()),
            });
        }
        let body = json!({"command": line});
        let path = format!("/session/{}/run", self.sid);
        let stop = Stop::Session(self.sid.clone());
        let call = Call {
            path: &path,
            body: &body,
            stop: &stop,
            started: Instant::now(),
            timeout: None,
            cancel: cancel.as_ref(),
            program: "bash",
        };
        let out = self.sandbox.follow(call, sink).await;
        if cancel.is_some_and(|c| c.is_cancelled()) {
            self.closed.store(true, Ordering::SeqCst);
        }
        out
    }

    async fn close(&self) -> BackendResult<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.sandbox.delete_session(&self.sid).await
    }
}

impl Drop for BashSession {
    fn drop(&mut self) {
        // A session no one holds does not keep its bash running.
        if !self.closed.load(Ordering::SeqCst)
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (sb, sid) = (self.sandbox.clone(), self.sid.clone());
            rt.spawn(async move {
                let _ = sb.delete_session(&sid).await;
            });
        }
    }
}
