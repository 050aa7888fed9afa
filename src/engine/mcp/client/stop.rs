//! Stopping an MCP server: close for good, stop until started again,
//! restart.

use super::*;

impl McpInstance {
    /// Closes the session and kills a stdio server's process tree; the
    /// instance is [`McpState::Stopped`] for good (the runtime drops it).
    /// A start in progress is cancelled (its process killed) rather than
    /// waited for.
    pub async fn close(&self) {
        self.inner.lock().expect("inner lock").closed = true;
        self.halt().await;
    }

    /// Stops the server: cancels a start in progress (killing the
    /// process tree of a stdio server that has not answered yet), or
    /// closes the live session. The instance stays, [`McpState::Stopped`]:
    /// listings and tool calls leave it stopped (they fail with "it was
    /// stopped") until [`McpInstance::ensure_ready`] with `force` or
    /// [`McpInstance::restart`] starts it again. Returns once the process
    /// is gone.
    pub async fn stop(&self) {
        self.halt().await;
    }

    /// Cancels a start, waits for it to clean up, shuts the session.
    pub(super) async fn halt(&self) {
        let starting = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.stops += 1;
            inner.starting.take()
        };
        if let Some(t) = starting {
            t.cancel();
        }
        self.set_stopped();
        // The cancelled start kills its process before it lets go.
        let _guard = self.connect_lock.lock().await;
        let conn = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.tools = None;
            Self::forget_loss(&mut inner);
            inner.conn.take()
        };
        if let Some(conn) = conn {
            conn.shutdown().await;
        }
        // Again: a start that won the race may have set `ready`.
        self.set_stopped();
    }

    pub(super) fn set_stopped(&self) {
        if self.state() != McpState::Stopped {
            self.set_state(McpState::Stopped);
        }
    }

    /// Stops a live session and starts it again (clears a failure and a
    /// stop). A start in progress is cancelled first, not waited for.
    ///
    /// Errors: as [`McpInstance::ensure_ready`].
    pub async fn restart(self: &Arc<Self>) -> Result<(), McpError> {
        let starting = self.inner.lock().expect("inner lock").starting.take();
        if let Some(t) = starting {
            t.cancel();
        }
        let _guard = self.connect_lock.lock().await;
        let conn = {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.closed {
                return Err(self.unavailable("it was stopped".into()));
            }
            inner.tools = None;
            Self::forget_loss(&mut inner);
            inner.conn.take()
        };
        if let Some(conn) = conn {
            conn.shutdown().await;
        }
        self.set_state(McpState::Declared);
        drop(_guard);
        self.ensure_ready(true).await
    }
}
