//! Starting an MCP server and keeping its tool list: connect (stateful
//! or per-operation), watch a stdio process's exit, list and refresh
//! tools.

use super::*;

impl McpInstance {
    /// Makes the server usable: connects a stateful one (once; callers
    /// racing here wait for the same connect), lists a stateless one's
    /// tools once. A failed server is retried only when `force` or
    /// after [`McpOptions::retry_failed_after`]; a stopped one only when
    /// `force`.
    ///
    /// Errors: [`McpError::Unavailable`] with the failure detail;
    /// [`McpError::StartCancelled`] when a stop, restart, removal or
    /// close cancelled this start.
    pub async fn ensure_ready(self: &Arc<Self>, force: bool) -> Result<(), McpError> {
        if let Some(e) = self.ready_or_blocked(force) {
            return e;
        }
        let stops = self.inner.lock().expect("inner lock").stops;
        let _guard = self.connect_lock.lock().await;
        if let Some(e) = self.ready_or_blocked(force) {
            return e;
        }
        let restart = self.begin_restart(force);
        let automatic = restart.is_some();
        let result = self
            .start_locked(stops, restart.unwrap_or(McpState::Starting), |st| st)
            .await;
        if automatic && matches!(result, Err(McpError::Unavailable { .. })) {
            self.restart_failed();
        }
        result
    }

    /// Connects (stateful) or lists (stateless) with the connect lock
    /// held by the caller, showing `showing` meanwhile; a failure's state
    /// passes through `on_fail` (to say what led to the start) before it
    /// is set. `stops` is the stop count the caller saw before it waited
    /// for the lock: a stop since then cancels this start.
    ///
    /// Errors: as [`McpInstance::ensure_ready`].
    pub(super) async fn start_locked(
        self: &Arc<Self>,
        stops: u64,
        showing: McpState,
        on_fail: impl FnOnce(McpState) -> McpState,
    ) -> Result<(), McpError> {
        let cancel = CancellationToken::new();
        {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.stops != stops {
                return Err(self.start_cancelled());
            }
            inner.starting = Some(cancel.clone());
        }
        self.set_state(showing);
        let opts = self.env.options();
        let result = if self.decl.is_stateful {
            self.connect_stateful(&opts, &cancel).await
        } else {
            self.list_stateless(&opts, &cancel).await
        };
        let closed = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.starting = None;
            inner.closed
        };
        match result {
            Ok(()) => Ok(()),
            Err(_) if closed || cancel.is_cancelled() => {
                self.set_stopped();
                Err(self.start_cancelled())
            }
            Err(state) => {
                let state = on_fail(state);
                let reason = state.detail().unwrap_or_default();
                self.set_state(state);
                Err(self.unavailable(reason))
            }
        }
    }

    /// `Some(result)` when no connect is needed (or allowed) now.
    pub(super) fn ready_or_blocked(&self, force: bool) -> Option<Result<(), McpError>> {
        let inner = self.inner.lock().expect("inner lock");
        if inner.closed {
            return Some(Err(self.unavailable("it was stopped".into())));
        }
        if !force && inner.state == McpState::Stopped {
            // Stopped by the user: only an explicit start brings it back.
            return Some(Err(self.unavailable(
                "it was stopped; start or restart it to use it again".into(),
            )));
        }
        let ready = if self.decl.is_stateful {
            // A transport failure (`transport_failed`) marks the server
            // failed but may leave its connection looking alive (an HTTP
            // session whose server went away): that is not ready, so the
            // next use connects again instead of trusting it (issue 15
            // trial: Enter on such a server did nothing).
            inner.conn.as_ref().is_some_and(|c| c.alive())
                && inner.tools.is_some()
                && !matches!(inner.state, McpState::Failed { .. })
        } else {
            inner.tools.is_some() && inner.state.is_ready()
        };
        if ready {
            return Some(Ok(()));
        }
        if !force && inner.lost_at.is_some() {
            // Lost on its own: started again once its backoff has passed
            // (not after `retry_failed_after`, which is for failed starts).
            return self.backoff_pending(&inner).map(Err);
        }
        if !force
            && let McpState::Failed { .. } = &inner.state
            && inner
                .failed_at
                .is_some_and(|t| t.elapsed() < self.env.options().retry_failed_after)
        {
            return Some(Err(
                self.unavailable(inner.state.detail().unwrap_or_default())
            ));
        }
        None
    }

    /// Starts the transport and runs `initialize`. A `cancel` while it
    /// runs kills a stdio server's process tree at once and gives
    /// [`McpState::Stopped`].
    pub(super) async fn open(
        self: &Arc<Self>,
        opts: &McpOptions,
        cancel: &CancellationToken,
    ) -> Result<Arc<Connection>, McpState> {
        let failed = |reason: String| McpState::Failed {
            reason,
            exit_status: None,
            stderr_tail: String::new(),
        };
        let decl = self
            .decl
            .resolved()
            .map_err(|e| failed(format!("configuration error: {e}")))?;
        let epoch = Arc::new(AtomicU64::new(0));
        let handler = Handler {
            inst: Arc::downgrade(self),
            log: self.log.clone(),
            conn_epoch: epoch.clone(),
        };
        let init = opts.init_timeout;
        let timed_out = || failed(format!("no answer to initialize within {}s", secs(init)));
        match &decl.mcp_config {
            McpConfig::Stdio(cfg) => {
                let (transport, process) = stdio::start(
                    self.env.sandbox.as_ref(),
                    cfg,
                    StdioOptions {
                        max_frame_bytes: opts.max_frame_bytes,
                        stderr_tail_bytes: opts.stderr_tail_bytes,
                    },
                    self.log.clone(),
                )
                .await
                .map_err(|e| failed(format!("cannot start the server: {e}")))?;
                let tap = Tap {
                    inner: transport,
                    epoch: epoch.clone(),
                };
                let served =
                    match or_cancel(cancel, tokio::time::timeout(init, handler.serve(tap))).await {
                        Some(served) => served,
                        None => {
                            process.kill().await;
                            return Err(McpState::Stopped);
                        }
                    };
                match served {
                    Ok(Ok(running)) => Ok(self.connection(running, Some(process), epoch)),
                    Ok(Err(e)) => Err(died_or(
                        &process,
                        format!("initialize failed: {}", root_cause(&e)),
                    )
                    .await),
                    Err(_) => {
                        process.kill().await;
                        let mut st = timed_out();
                        if let McpState::Failed {
                            stderr_tail,
                            exit_status,
                            ..
                        } = &mut st
                        {
                            *stderr_tail = process.stderr_now();
                            *exit_status = process.exited().flatten();
                        }
                        Err(st)
                    }
                }
            }
            McpConfig::Http(cfg) => {
                // The declaration's HTTP timeout bounds the connect.
                let init = cfg
                    .timeout
                    .filter(|t| *t > 0.0)
                    .map(Duration::from_secs_f64)
                    .map_or(init, |t| t.min(init));
                let timed_out =
                    || failed(format!("no answer to initialize within {}s", secs(init)));
                let client = http_client().map_err(failed)?;
                let headers =
                    header_map(cfg).map_err(|e| failed(format!("configuration error: {e}")))?;
                let served = match cfg.transport() {
                    McpTransport::Sse => {
                        let t = or_cancel(
                            cancel,
                            tokio::time::timeout(
                                init,
                                SseTransport::connect(
                                    client,
                                    &cfg.url,
                                    headers,
                                    init,
                                    self.log.clone(),
                                ),
                            ),
                        )
                        .await
                        .ok_or(McpState::Stopped)?
                        .map_err(|_| timed_out())?
                        .map_err(|e| failed(sse_failure(&cfg.url, &e)))?;
                        let tap = Tap {
                            inner: t,
                            epoch: epoch.clone(),
                        };
                        or_cancel(cancel, tokio::time::timeout(init, handler.serve(tap)))
                            .await
                            .ok_or(McpState::Stopped)?
                    }
                    _ => {
                        let mut config =
                            StreamableHttpClientTransportConfig::with_uri(cfg.url.as_str());
                        config.custom_headers = headers
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect::<HashMap<_, _>>();
                        config.max_json_response_size = opts.max_frame_bytes;
                        config.max_sse_event_size = opts.max_frame_bytes;
                        // An expired session is re-initialized by us
                        // (`heal`), so the state shows it and the error
                        // says what was tried.
                        config.reinit_on_expired_session = false;
                        let client = super::http::GuardedHttp::new(client, self.expiry.clone());
                        let t = StreamableHttpClientTransport::with_client(client, config);
                        let tap = Tap {
                            inner: t,
                            epoch: epoch.clone(),
                        };
                        or_cancel(cancel, tokio::time::timeout(init, handler.serve(tap)))
                            .await
                            .ok_or(McpState::Stopped)?
                    }
                };
                match served {
                    Ok(Ok(running)) => Ok(self.connection(running, None, epoch)),
                    Ok(Err(e)) => Err(failed(format!(
                        "cannot connect to {}: {}",
                        cfg.url,
                        http_cause(&e)
                    ))),
                    Err(_) => Err(timed_out()),
                }
            }
        }
    }

    pub(super) fn connection(
        &self,
        running: Connected,
        process: Option<StdioProcess>,
        epoch: Arc<AtomicU64>,
    ) -> Arc<Connection> {
        Arc::new(Connection {
            peer: running.peer().clone(),
            running: Mutex::new(Some(running)),
            process,
            epoch,
        })
    }

    pub(super) async fn connect_stateful(
        self: &Arc<Self>,
        opts: &McpOptions,
        cancel: &CancellationToken,
    ) -> Result<(), McpState> {
        let old = self.inner.lock().expect("inner lock").conn.take();
        if let Some(old) = old {
            tokio::spawn(async move { old.shutdown().await });
        }
        let conn = self.open(opts, cancel).await?;
        let Some(listed) = or_cancel(
            cancel,
            tokio::time::timeout(opts.init_timeout, conn.peer.list_all_tools()),
        )
        .await
        else {
            conn.shutdown().await;
            return Err(McpState::Stopped);
        };
        let tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                let st = match &conn.process {
                    Some(p) => died_or(p, format!("tools/list failed: {}", root_cause(&e))).await,
                    None => failed_plain(format!("tools/list failed: {}", root_cause(&e))),
                };
                conn.shutdown().await;
                return Err(st);
            }
            Err(_) => {
                conn.shutdown().await;
                return Err(failed_plain(format!(
                    "no answer to tools/list within {}s",
                    secs(opts.init_timeout)
                )));
            }
        };
        let count = tools.iter().filter(|t| self.visible(&t.name)).count();
        let closed = {
            // Under the lock a stop takes to cancel: either it sees this
            // connection and shuts it, or this sees its cancel.
            let mut inner = self.inner.lock().expect("inner lock");
            let closed = inner.closed || cancel.is_cancelled();
            if !closed {
                inner.tools_epoch = conn.epoch.load(Ordering::SeqCst);
                inner.tools = Some(tools);
                inner.conn = Some(conn.clone());
                inner.failed_at = None;
                inner.lost_at = None;
            }
            closed
        };
        if closed {
            conn.shutdown().await;
            return Err(McpState::Stopped);
        }
        self.set_state(McpState::Ready { tool_count: count });
        self.watch_exit(conn);
        Ok(())
    }

    /// Marks the instance failed the moment its stdio process dies on
    /// its own (not when we closed it).
    pub(super) fn watch_exit(self: &Arc<Self>, conn: Arc<Connection>) {
        if conn.process.is_none() {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let Some(p) = &conn.process else { return };
            p.wait_for_exit().await;
            let Some(inst) = weak.upgrade() else { return };
            let still_current = {
                let inner = inst.inner.lock().expect("inner lock");
                !inner.closed && inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn))
            };
            if !still_current {
                return;
            }
            let status = p.exited().flatten();
            let tail = p.stderr_tail(Duration::from_millis(500)).await;
            let reason = match status {
                Some(code) => format!("the server process exited with status {code}"),
                None => "the server process exited".to_string(),
            };
            let st = McpState::Failed {
                reason: reason.clone(),
                exit_status: status,
                stderr_tail: tail,
            };
            // A call that saw the death may have recorded it meanwhile.
            if inst.record_exit(&conn, st) {
                inst.log
                    .warn(&format!("{reason}; it is started again on next use"));
            }
        });
    }

    pub(super) async fn list_stateless(
        self: &Arc<Self>,
        opts: &McpOptions,
        cancel: &CancellationToken,
    ) -> Result<(), McpState> {
        let conn = self.open(opts, cancel).await?;
        let listed = or_cancel(
            cancel,
            tokio::time::timeout(opts.init_timeout, conn.peer.list_all_tools()),
        )
        .await;
        conn.shutdown().await;
        let Some(listed) = listed else {
            return Err(McpState::Stopped);
        };
        let tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                return Err(failed_plain(format!(
                    "tools/list failed: {}",
                    root_cause(&e)
                )));
            }
            Err(_) => {
                return Err(failed_plain(format!(
                    "no answer to tools/list within {}s",
                    secs(opts.init_timeout)
                )));
            }
        };
        let count = tools.iter().filter(|t| self.visible(&t.name)).count();
        {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.closed || cancel.is_cancelled() {
                return Err(McpState::Stopped);
            }
            inner.tools = Some(tools);
            inner.failed_at = None;
        }
        self.set_state(McpState::Ready { tool_count: count });
        Ok(())
    }

    /// Lists the tools again and replaces the cached list (C05); emits
    /// a `ready` state event with the new count. `only_if` names the
    /// connection's change counter when called for a notification, so a
    /// stale notification of an old connection does nothing.
    pub(crate) async fn refresh_tools(self: &Arc<Self>, only_if: Option<Arc<AtomicU64>>) {
        let _g = self.refresh_lock.lock().await;
        let Some(conn) = self.current_conn() else {
            return;
        };
        if let Some(e) = &only_if
            && !Arc::ptr_eq(e, &conn.epoch)
        {
            return;
        }
        let seen = conn.epoch.load(Ordering::SeqCst);
        if self.inner.lock().expect("inner lock").tools_epoch == seen && only_if.is_some() {
            // Already refreshed for this change by a caller.
            return;
        }
        let timeout = self.env.options().init_timeout;
        match tokio::time::timeout(timeout, conn.peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let count = tools.iter().filter(|t| self.visible(&t.name)).count();
                let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
                {
                    let mut inner = self.inner.lock().expect("inner lock");
                    inner.tools = Some(tools);
                    inner.tools_epoch = seen;
                }
                self.log
                    .info(&format!("tool list changed; now: {}", names.join(", ")));
                if self.state().is_ready() {
                    self.set_state(McpState::Ready { tool_count: count });
                }
            }
            Ok(Err(e)) => self
                .log
                .warn(&format!("tools/list after a list change failed: {e}")),
            Err(_) => self.log.warn("tools/list after a list change timed out"),
        }
    }
}

/// The reason an SSE stream could not be opened: an unreachable server
/// is named with the root cause, as for streamable HTTP; a bad status or
/// protocol error speaks for itself.
pub(super) fn sse_failure(url: &str, e: &crate::engine::mcp::sse::SseError) -> String {
    match e {
        crate::engine::mcp::sse::SseError::Http { .. } => {
            format!("cannot connect to {url}: {}", root_cause(e))
        }
        other => other.to_string(),
    }
}

/// Why an HTTP `initialize` failed, short ([`root_cause`]); a server
/// that answered with an error status says so (`initialize answered
/// HTTP 404 Not Found: …`) rather than rmcp's "unexpected server
/// response", and a worker that quit is "the connection closed", not
/// rmcp's "Transport channel closed".
pub(super) fn http_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let cause = root_cause(e);
    if let Some(rest) = cause.strip_prefix("unexpected server response: ")
        && rest.starts_with("HTTP ")
    {
        return format!("initialize answered {rest}");
    }
    if cause.contains("Transport channel closed") || cause == "Transport closed" {
        return "the connection closed before initialize was answered".into();
    }
    cause
}

/// `f`'s output, or `None` as soon as `cancel` fires (`f` is dropped).
pub(super) async fn or_cancel<F: Future>(cancel: &CancellationToken, f: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        out = f => Some(out),
    }
}

pub(super) fn failed_plain(reason: String) -> McpState {
    McpState::Failed {
        reason,
        exit_status: None,
        stderr_tail: String::new(),
    }
}

/// The failure of a stdio session: when the process has exited (or does
/// so very soon), its exit status and stderr tail say why (C01);
/// otherwise `fallback`, and the process is killed.
pub(super) async fn died_or(p: &StdioProcess, fallback: String) -> McpState {
    match p.wait_exit(Duration::from_millis(1500)).await {
        Some(status) => {
            let tail = p.stderr_tail(Duration::from_millis(1000)).await;
            let reason = match status {
                Some(code) => format!("the server process exited with status {code}"),
                None => "the server process exited".to_string(),
            };
            McpState::Failed {
                reason,
                exit_status: status,
                stderr_tail: tail,
            }
        }
        None => {
            let tail = p.stderr_now();
            p.kill().await;
            McpState::Failed {
                reason: fallback,
                exit_status: p.exited().flatten(),
                stderr_tail: tail,
            }
        }
    }
}
