//! Waiting for a cloud sandbox to reach a state (started, paused, ...):
//! poll the service with back-off until it is there, cannot get there, or
//! the limit passes.

use std::time::{Duration, Instant};

use crate::backend::{BackendError, BackendResult};

/// Where a sandbox stands while [`wait_for_state`] polls it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateCheck {
    /// The wanted state.
    Reached,
    /// A state it cannot leave for the wanted one; the text names it (and
    /// the service's reason).
    Failed(String),
    /// Still on the way; the text names the state.
    Waiting(String),
}

/// Polls `get` (back-off from 100 ms to 2 s) until `check` says the
/// sandbox reached `want`; returns the last answer.
///
/// Errors: those of `get`; [`BackendError::Unavailable`] on a failed
/// state; [`BackendError::Remote`] `state_timeout` after `limit`.
pub async fn wait_for_state<T, F>(
    service: &'static str,
    id: &str,
    want: &str,
    limit: Duration,
    get: impl Fn() -> F,
    check: impl Fn(&T) -> StateCheck,
) -> BackendResult<T>
where
    F: Future<Output = BackendResult<T>>,
{
    let deadline = Instant::now() + limit;
    let mut delay = Duration::from_millis(100);
    loop {
        let dto = get().await?;
        let state = match check(&dto) {
            StateCheck::Reached => return Ok(dto),
            StateCheck::Failed(s) => {
                return Err(BackendError::gone(format!(
                    "{service} sandbox {id} is {s} while waiting for {want}"
                )));
            }
            StateCheck::Waiting(s) => s,
        };
        if Instant::now() >= deadline {
            return Err(BackendError::Remote {
                service,
                status: None,
                code: Some("state_timeout".into()),
                message: format!(
                    "sandbox {id} still {state} after {}s (waiting for {want})",
                    limit.as_secs()
                ),
            });
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn state_polls_until_reached_or_failed() {
        let calls = std::sync::atomic::AtomicU32::new(0);
        let get = || async {
            Ok::<u32, BackendError>(calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
        };
        let check = |n: &u32| match n {
            0 | 1 => StateCheck::Waiting(format!("step {n}")),
            _ => StateCheck::Reached,
        };
        let n = wait_for_state("svc", "i", "done", Duration::from_secs(10), get, check)
            .await
            .unwrap();
        assert_eq!(n, 2);
        let e = wait_for_state(
            "svc",
            "i",
            "done",
            Duration::from_secs(10),
            || async { Ok::<u32, BackendError>(0) },
            |_| StateCheck::Failed("error (disk)".into()),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "sandbox gone: svc sandbox i is error (disk) while waiting for done"
        );
        let e = wait_for_state(
            "svc",
            "i",
            "done",
            Duration::ZERO,
            || async { Ok::<u32, BackendError>(0) },
            |_| StateCheck::Waiting("starting".into()),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("still starting after 0s"), "{e}");
    }
}
