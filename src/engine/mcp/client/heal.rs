//! Bringing a lost server back on its own (issue 15 point 5).
//!
//! * Streamable HTTP: a request answered 404 for its session id (the
//!   server expired or forgot the session; or 400 with an error naming
//!   the session, `http.rs`) gets one new `initialize` and
//!   is sent once more; callers that hit the same expired session share
//!   that one re-initialization. rmcp's own recovery is switched off
//!   (`reinit_on_expired_session`), so the state and the error are ours.
//! * stdio: a stateful server whose process exits on its own is started
//!   again on next use (a call, a listing), after the backoff of
//!   [`restart_delay`]; a call that was running when it died is not
//!   repeated (it may have had effects).
//!
//! Both pass through [`McpState::Reconnecting`] and count in
//! [`McpStatus::restarts`].

use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::connect::failed_plain;
use super::*;

/// True when `e` or one of its causes is the streamable-HTTP client's
/// "session expired": the server answered 404 to a request that carried
/// a session id.
pub(super) fn session_expired(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(StreamableHttpError::SessionExpired) =
            c.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return true;
        }
        cur = next_cause(c);
    }
    false
}

/// True when `e` or one of its causes is a reply over the frame limit:
/// only that request fails, the server itself is fine.
pub(super) fn too_large(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(StreamableHttpError::ResponseBodyTooLarge { .. }) =
            c.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return true;
        }
        cur = next_cause(c);
    }
    false
}

/// `st` with `prefix` before its failure reason (other states as they
/// are).
fn prefixed(st: McpState, prefix: &str) -> McpState {
    match st {
        McpState::Failed {
            reason,
            exit_status,
            stderr_tail,
        } => McpState::Failed {
            reason: format!("{prefix}{reason}"),
            exit_status,
            stderr_tail,
        },
        other => other,
    }
}

impl McpInstance {
    /// The server's URL (HTTP declarations), for messages.
    pub(super) fn url(&self) -> String {
        match &self.decl.mcp_config {
            McpConfig::Http(cfg) => cfg.url.clone(),
            McpConfig::Stdio(_) => String::new(),
        }
    }

    /// What an expired session says, naming the status and the URL.
    pub(super) fn expired_text(&self) -> String {
        let how = self.last_expiry();
        format!("the session expired ({how} from {})", self.url())
    }

    /// How the server said the session expired last: `HTTP 404`, or a
    /// 400 with its message (`server-everything` after a restart).
    fn last_expiry(&self) -> String {
        self.expiry
            .lock()
            .expect("expiry lock")
            .clone()
            .unwrap_or_else(|| "HTTP 404".into())
    }

    /// Records that `conn`'s stdio process exited on its own, with the
    /// failure `st`, when `conn` is still the current connection: it is
    /// dropped, the exit counted for the backoff, the state set in the
    /// same lock (a restart racing in cannot be overwritten). False when
    /// it was not current (handled already, replaced, closed).
    pub(super) fn record_exit(&self, conn: &Arc<Connection>, st: McpState) -> bool {
        let st = self.redacted(st);
        {
            let mut inner = self.inner.lock().expect("inner lock");
            let current = inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn));
            if inner.closed || !current {
                return false;
            }
            inner.conn = None;
            inner.exits += 1;
            inner.lost_at = Some(Instant::now());
            inner.failed_at = Some(Instant::now());
            inner.state = st.clone();
        }
        self.publish_state(&st);
        true
    }

    /// For a server lost on its own ([`Inner::lost_at`]): `None` when
    /// its backoff has passed (start it again now), else the error that
    /// says when it will be.
    pub(super) fn backoff_pending(&self, inner: &Inner) -> Option<McpError> {
        let at = inner.lost_at?;
        let wait = restart_delay(self.env.options().restart_backoff, inner.exits);
        let left = wait.saturating_sub(at.elapsed());
        if left.is_zero() {
            return None;
        }
        let what = inner.state.summary();
        let what = what.strip_prefix("failed: ").unwrap_or(&what);
        Some(self.unavailable(format!(
            "{what}; it is restarted again in {}s, on next use ({} exits in a row)",
            left.as_secs_f64().ceil(),
            inner.exits
        )))
    }

    /// Before a start: `Some(reconnecting state)` when it brings back a
    /// server lost on its own (counted as a restart), `None` for a
    /// plain start. A forced start (the user's start or restart) clears
    /// the loss and its backoff instead.
    pub(super) fn begin_restart(&self, force: bool) -> Option<McpState> {
        let mut inner = self.inner.lock().expect("inner lock");
        if force {
            inner.lost_at = None;
            inner.exits = 0;
            return None;
        }
        inner.lost_at?;
        inner.restarts += 1;
        let what = inner.state.summary();
        let what = what.strip_prefix("failed: ").unwrap_or(&what).to_string();
        Some(McpState::Reconnecting {
            reason: format!("{what}; starting it again (restart {})", inner.restarts),
        })
    }

    /// An automatic restart failed: one more exit in a row, so the next
    /// try waits longer.
    pub(super) fn restart_failed(&self) {
        let mut inner = self.inner.lock().expect("inner lock");
        inner.exits += 1;
        inner.lost_at = Some(Instant::now());
    }

    /// A call succeeded: the next exit restarts at once again, and a
    /// server shown `failed` or `reconnecting` after a failed call is
    /// `ready` again.
    pub(super) fn call_succeeded(&self) {
        let back = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.exits = 0;
            let down = matches!(
                inner.state,
                McpState::Failed { .. } | McpState::Reconnecting { .. }
            );
            if down && !inner.closed {
                let tool_count = inner
                    .tools
                    .as_deref()
                    .map_or(0, |t| self.filtered(t).count());
                inner.state = McpState::Ready { tool_count };
                inner.failed_at = None;
                Some(inner.state.clone())
            } else {
                None
            }
        };
        if let Some(st) = back {
            self.publish_state(&st);
        }
    }

    /// A call on `conn` failed at the transport level (connection
    /// refused, an HTTP error status, the connection closed): the server
    /// shows `failed` with `reason` until a call succeeds again. The next
    /// use tries at once (no [`McpOptions::retry_failed_after`] wait: the
    /// server may be back), on a new connection when this one closed.
    pub(super) fn transport_failed(&self, conn: &Arc<Connection>, reason: String) {
        let st = self.redacted(failed_plain(reason));
        let dropped = {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.closed || inner.state == McpState::Stopped {
                return;
            }
            let current = inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn));
            inner.state = st.clone();
            inner.failed_at = None;
            if current && !conn.alive() {
                inner.conn.take()
            } else {
                None
            }
        };
        if let Some(c) = dropped {
            tokio::spawn(async move { c.shutdown().await });
        }
        self.publish_state(&st);
    }

    /// Forgets a loss (a stop or a restart the user asked for).
    pub(super) fn forget_loss(inner: &mut Inner) {
        inner.lost_at = None;
        inner.exits = 0;
    }

    /// After a request on `lost` found its session expired: initializes
    /// a new session (once for every caller that hit `lost`) and returns
    /// the connection to send the request on again.
    ///
    /// Errors: [`McpError::Unavailable`] naming the 404 and why the new
    /// `initialize` failed (the instance is then failed);
    /// [`McpError::StartCancelled`] when a stop came in.
    pub(super) async fn reinit_after_expiry(
        self: &Arc<Self>,
        lost: &Arc<Connection>,
    ) -> Result<Arc<Connection>, McpError> {
        let stops = self.inner.lock().expect("inner lock").stops;
        let _guard = self.connect_lock.lock().await;
        {
            let mut inner = self.inner.lock().expect("inner lock");
            match &inner.conn {
                // Another caller re-initialized already.
                Some(c) if !Arc::ptr_eq(c, lost) => return Ok(c.clone()),
                Some(_) => inner.restarts += 1,
                None if inner.closed || inner.state == McpState::Stopped => {
                    return Err(self.start_cancelled());
                }
                // Another caller's re-initialize failed.
                None => {
                    let why = inner
                        .state
                        .detail()
                        .unwrap_or_else(|| "it is not connected".into());
                    return Err(self.unavailable(why));
                }
            }
        }
        let what = self.expired_text();
        self.start_locked(
            stops,
            McpState::Reconnecting {
                reason: format!("{what}; initializing a new session"),
            },
            |st| {
                prefixed(
                    st,
                    &format!("{what}, and initializing a new session failed: "),
                )
            },
        )
        .await?;
        self.current_conn()
            .ok_or_else(|| self.unavailable("it is not connected".into()))
    }

    /// The request sent again after a re-initialize found the new
    /// session expired too: the instance fails (no loop), and the error
    /// says what was tried.
    pub(super) fn expired_again(&self, conn: &Arc<Connection>, tool: &str) -> McpError {
        let reason = format!(
            "{}; it was re-initialized once and `{tool}` retried, and the server answered {} again",
            self.expired_text(),
            self.last_expiry()
        );
        let current = {
            let mut inner = self.inner.lock().expect("inner lock");
            let cur = inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn));
            if cur {
                inner.conn = None;
            }
            cur
        };
        if current {
            let conn = conn.clone();
            tokio::spawn(async move { conn.shutdown().await });
            self.set_state(failed_plain(reason.clone()));
        }
        self.unavailable(reason)
    }
}
