//! Calling one tool of a live MCP server, with timeout, cancel and the
//! visibility filter.

use super::connect::died_or;
use super::heal::{session_expired, too_large};
use super::*;

impl McpInstance {
    /// Calls `tool` (the server's own name) with `args`. Honours
    /// `execution_timeout` and `cancel` (a cancelled or timed-out call
    /// sends `notifications/cancelled`). A tool list change announced
    /// before this call is applied first, so newly added tools can be
    /// called at once (C05).
    ///
    /// Errors: see [`McpError`]; a server that dies during the call makes
    /// it fail at once with its exit status and stderr tail.
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: JsonObject,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        self.ensure_ready(false).await?;
        let conn = if self.decl.is_stateful {
            let conn = self
                .current_conn()
                .ok_or_else(|| self.unavailable("it is not connected".into()))?;
            let stale = conn.epoch.load(Ordering::SeqCst)
                != self.inner.lock().expect("inner lock").tools_epoch;
            if stale {
                self.refresh_tools(None).await;
            }
            Some(conn)
        } else {
            None
        };
        self.check_tool(tool)?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let timeout = self.call_limit();
        let (conn, temporary) = match conn {
            Some(c) => (c, false),
            None => (self.temporary().await?, true),
        };
        let first = self
            .call_on(&conn, tool, params.clone(), timeout, cancel.clone())
            .await;
        if temporary && !matches!(first, Err(Failure::Expired)) {
            conn.shutdown().await;
        }
        let result = match first {
            Ok(r) => Ok(r),
            Err(Failure::Error(e)) => Err(e),
            Err(Failure::Expired) => {
                self.call_again(conn, temporary, tool, params, timeout, cancel)
                    .await
            }
        };
        if result.is_ok() {
            self.call_succeeded();
        }
        result
    }

    /// The time one call may take and the setting that gave it: the
    /// declaration's `execution_timeout`; else, for an HTTP server, its
    /// `timeout` (seconds, default 30; the reference hands it to its HTTP
    /// client as the request timeout); else [`McpOptions::call_timeout`], so
    /// a server that never answers cannot hang a call for ever. `None`
    /// only when all three are unset (`timeout: null` and
    /// `call_timeout_secs = 0`).
    pub(super) fn call_limit(&self) -> Option<(Duration, &'static str)> {
        let secs = |t: Option<f64>| {
            t.filter(|t| t.is_finite() && *t > 0.0)
                .map(Duration::from_secs_f64)
        };
        let http = match &self.decl.mcp_config {
            McpConfig::Http(cfg) => cfg.timeout,
            McpConfig::Stdio(_) => None,
        };
        secs(self.decl.execution_timeout)
            .map(|t| (t, "the server's execution_timeout"))
            .or(secs(http).map(|t| (t, "the server's timeout")))
            .or(self
                .env
                .options()
                .call_timeout
                .map(|t| (t, "[mcp] call_timeout_secs")))
    }

    /// A per-operation connection (stateless servers).
    async fn temporary(self: &Arc<Self>) -> Result<Arc<Connection>, McpError> {
        let opts = self.env.options();
        self.open(&opts, &CancellationToken::new())
            .await
            .map_err(|st| self.unavailable(st.detail().unwrap_or_default()))
    }

    /// The call again, once, after its session expired on `conn`: on a
    /// new session (stateful: re-initialized for every caller of `conn`;
    /// stateless: a new per-operation one). A second 404 fails it.
    async fn call_again(
        self: &Arc<Self>,
        conn: Arc<Connection>,
        temporary: bool,
        tool: &str,
        params: CallToolRequestParams,
        timeout: Option<(Duration, &'static str)>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        let conn = if temporary {
            conn.shutdown().await;
            self.temporary().await?
        } else {
            self.reinit_after_expiry(&conn).await?
        };
        let r = self.call_on(&conn, tool, params, timeout, cancel).await;
        if temporary {
            conn.shutdown().await;
        }
        match r {
            Ok(r) => Ok(r),
            Err(Failure::Expired) => Err(self.expired_again(&conn, tool)),
            Err(Failure::Error(e)) => Err(e),
        }
    }

    pub(super) fn check_tool(&self, tool: &str) -> Result<(), McpError> {
        let inner = self.inner.lock().expect("inner lock");
        let tools = inner.tools.as_deref().unwrap_or_default();
        if !tools.iter().any(|t| t.name == tool) {
            return Err(McpError::UnknownTool {
                server: self.decl.name.clone(),
                tool: tool.to_string(),
                available: self
                    .filtered(tools)
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if !self.visible(tool) {
            return Err(McpError::Disabled {
                server: self.decl.name.clone(),
                tool: tool.to_string(),
            });
        }
        Ok(())
    }

    /// One `tools/call` on `conn`.
    ///
    /// Errors: [`Failure::Expired`] when the server answered 404 for the
    /// session (the caller re-initializes); else the [`McpError`].
    pub(super) async fn call_on(
        self: &Arc<Self>,
        conn: &Arc<Connection>,
        tool: &str,
        params: CallToolRequestParams,
        timeout: Option<(Duration, &'static str)>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, Failure> {
        // Dropping rmcp's call future sends notifications/cancelled.
        let call = conn.peer.call_tool(params);
        let timed = async {
            match timeout {
                Some(t) => tokio::time::timeout(t.0, call).await.map_err(|_| t),
                None => Ok(call.await),
            }
        };
        let outcome = tokio::select! {
            r = timed => r,
            _ = cancel.cancelled() => return Err(McpError::Cancelled.into()),
        };
        match outcome {
            Err((t, limit)) => Err(McpError::Timeout {
                server: self.decl.name.clone(),
                tool: tool.to_string(),
                secs: t.as_secs_f64(),
                limit,
            }
            .into()),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(ServiceError::McpError(e))) => Err(self.server_error(&e.message).into()),
            Ok(Err(e)) if session_expired(&e) => Err(Failure::Expired),
            Ok(Err(e)) => {
                if let Some(p) = &conn.process {
                    let st = died_or(p, format!("the call failed: {}", root_cause(&e))).await;
                    let reason = st.detail().unwrap_or_default();
                    if p.exited().is_some() && self.record_exit(conn, st) {
                        self.log
                            .warn("the server process exited; it is started again on next use");
                    }
                    return Err(self
                        .unavailable(format!("during `{tool}`: {reason}"))
                        .into());
                }
                let own = too_large(&e);
                let why = match e {
                    ServiceError::TransportClosed => "the connection to the server closed".into(),
                    e => root_cause(&e),
                };
                let text = format!("calling `{tool}` failed: {why}");
                // The server is down or refusing: the pane, `mcp list`
                // and the bus say so until a call succeeds again. A reply
                // over the frame limit fails only its own request.
                if !own {
                    self.transport_failed(conn, text.clone());
                }
                Err(self.server_error(&text).into())
            }
        }
    }
}

/// How one `tools/call` attempt failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The server answered 404 for the session: initialize again and
    /// send the call once more.
    Expired,
    /// Any other failure, final.
    Error(McpError),
}

impl From<McpError> for Failure {
    fn from(e: McpError) -> Self {
        Failure::Error(e)
    }
}
