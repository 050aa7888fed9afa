//! What a Pod's status says about it: running, still starting, or failed for good.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use super::options::FATAL_REASONS;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::SandboxState;
    use crate::backend::kubernetes::{KubernetesOptions, KubernetesProvisioner};

    #[test]
    fn pod_health_fails_fast_on_fatal_reasons() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "containerStatuses": [{
                "name": "workspace", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}
            }]}
        }))
        .unwrap();
        assert_eq!(
            pod_health(&pod, Duration::from_secs(60)),
            PodHealth::Fatal("ImagePullBackOff".into(), "no such image".into())
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available"
            }]}
        }))
        .unwrap();
        let grace = Duration::from_secs(60);
        assert!(matches!(pod_health(&pod, grace), PodHealth::Fatal(r, _) if r == "Unschedulable"));
        // Unschedulable for 10 s: maybe a node is on its way; for 61 s: fatal.
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available", "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]}
        }))
        .unwrap();
        let t0 = 1_767_225_600; // 2026-01-01T00:00:00Z
        assert_eq!(
            pod_health_at(&pod, grace, t0 + 10),
            PodHealth::Pending(Some("Unschedulable".into()))
        );
        assert!(
            matches!(pod_health_at(&pod, grace, t0 + 61), PodHealth::Fatal(r, _) if r == "Unschedulable")
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"}, "status": {"phase": "Failed"}
        }))
        .unwrap();
        assert_eq!(
            pod_health(&pod, Duration::ZERO),
            PodHealth::Finished("Failed".into())
        );
        assert_eq!(
            KubernetesProvisioner::new(KubernetesOptions::default())
                .unwrap()
                .state_of(None),
            SandboxState::Suspended
        );
    }
}
