//! What a Pod's status says about it: running, still starting, or failed for good.

use super::*;

/// What a Pod's status says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PodHealth {
    /// Running (the container may still be starting).
    Running,
    /// Pending, still worth waiting for; the text says why, if known.
    Pending(Option<String>),
    /// Being deleted.
    Terminating,
    /// Will not get better: reason and message.
    Fatal(String, String),
    /// Failed, Succeeded or Unknown: replace it.
    Finished(String),
}

/// [`pod_health_at`] now.
pub(super) fn pod_health(pod: &Pod, unschedulable_grace: Duration) -> PodHealth {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    pod_health_at(pod, unschedulable_grace, now)
}

/// What a Pod's status says at `now` (Unix seconds): an `Unschedulable`
/// condition is fatal only once it has lasted `unschedulable_grace`
/// (from its `lastTransitionTime`; at once when that is missing).
pub(super) fn pod_health_at(pod: &Pod, unschedulable_grace: Duration, now: i64) -> PodHealth {
    if pod.metadata.deletion_timestamp.is_some() {
        return PodHealth::Terminating;
    }
    let Some(status) = &pod.status else {
        return PodHealth::Pending(None);
    };
    let statuses = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten());
    for cs in statuses {
        if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref())
            && let Some(reason) = &w.reason
            && FATAL_REASONS.contains(&reason.as_str())
        {
            return PodHealth::Fatal(reason.clone(), w.message.clone().unwrap_or_default());
        }
    }
    for c in status.conditions.iter().flatten() {
        if c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
        {
            let since = c.last_transition_time.as_ref().map(|t| t.0.as_second());
            if since.is_some_and(|t| now - t < unschedulable_grace.as_secs() as i64) {
                return PodHealth::Pending(Some("Unschedulable".into()));
            }
            return PodHealth::Fatal(
                "Unschedulable".into(),
                c.message.clone().unwrap_or_default(),
            );
        }
    }
    match status.phase.as_deref() {
        Some("Running") => PodHealth::Running,
        Some("Pending") | None => {
            let why = status
                .container_statuses
                .iter()
                .flatten()
                .find_map(|cs| cs.state.as_ref()?.waiting.as_ref()?.reason.clone());
            PodHealth::Pending(why)
        }
        Some(other) => PodHealth::Finished(other.to_string()),
    }
}
