//! Awaiting the blocking-pool tasks of host file operations without a
//! panic: at shutdown the runtime cancels blocking tasks that have not
//! started, and a caller still awaiting one gets `JoinError::Cancelled`
//! (seen as a TUI panic on SIGINT, issue 14). A cancelled task is an
//! ended operation, reported as an `Interrupted` I/O error; a panicked
//! one is an error naming the panic, not a second panic in the caller.

use tokio::task::JoinError;

use crate::backend::{BackendError, BackendResult};

/// The I/O error for a blocking task `what` ("read", "stat") that did
/// not finish: `Interrupted` when the runtime cancelled it (shutting
/// down), `Other` with the panic's message when it panicked.
pub fn join_io_error(e: JoinError, what: &str) -> std::io::Error {
    if e.is_cancelled() {
        return std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            format!("{what} cancelled: wsbench is shutting down"),
        );
    }
    std::io::Error::other(format!(
        "{what} failed (internal error): {}",
        join_error_text(e)
    ))
}

/// What a task that did not finish says: its panic message (a `&str` or
/// `String` payload), else the error's own text.
pub fn join_error_text(e: JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into()),
        Err(e) => e.to_string(),
    }
}

/// Runs `f` on the blocking pool; a task that did not finish (cancelled
/// at shutdown, panicked) is a [`BackendError::Io`] with `what` as its
/// context (see [`join_io_error`]).
pub async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> BackendResult<T> + Send + 'static,
) -> BackendResult<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(BackendError::Io {
            context: format!("{what} task"),
            source: join_io_error(e, what),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancelled_task_is_an_interrupted_error_not_a_panic() {
        let h = tokio::spawn(std::future::pending::<()>());
        h.abort();
        let e = h.await.expect_err("aborted");
        let io = join_io_error(e, "read");
        assert_eq!(io.kind(), std::io::ErrorKind::Interrupted);
        assert!(io.to_string().contains("read cancelled"), "{io}");
        let h = tokio::spawn(async { panic!("boom") });
        let io = join_io_error(h.await.expect_err("panicked"), "stat");
        assert!(io.to_string().contains("boom"), "{io}");
        assert_eq!(blocking("list", || Ok(3)).await.unwrap(), 3);
    }
}
