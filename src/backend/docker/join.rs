//! Joining a container another process is making: a create that lost
//! the container name to a concurrent `wsbench` (issue 15 point 3) waits
//! for the other's container instead of failing.

use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;

use super::api::{api_error, is_status};
use super::events::EventSink;
use super::provision::DockerProvisioner;
use crate::backend::{BackendError, BackendResult, ProvisionSpec, Sandbox};

/// How long a create that lost the name to another process waits for
/// that process's container to appear.
const JOIN_WAIT: Duration = Duration::from_secs(60);

impl DockerProvisioner {
    /// The container `name` that another process created for `spec`'s
    /// workspace while this one tried to: started if it is not yet (a
    /// second start is a no-op for the daemon) and attached. While the
    /// other create is still running the daemon holds the name but
    /// answers 404 to an inspect, so this waits for it, up to
    /// [`JOIN_WAIT`] (polling every 100 ms).
    ///
    /// Errors: [`BackendError::AlreadyExists`] when the container never
    /// appears (its maker failed and removed it), else the daemon's error.
    pub(super) async fn join_by_name(
        &self,
        docker: &Docker,
        name: &str,
        spec: &ProvisionSpec,
        sink: &Option<EventSink>,
    ) -> BackendResult<Arc<dyn Sandbox>> {
        if !wait_visible(docker, name, JOIN_WAIT).await? {
            return Err(BackendError::AlreadyExists(format!(
                "container {name} (workspace {}) was being made by another process \
                 and did not appear within {}s",
                spec.workspace_id,
                JOIN_WAIT.as_secs()
            )));
        }
        self.start_or_unpause(docker, name, sink).await?;
        Ok(Arc::new(self.sandbox_from(docker, name).await?))
    }
}

/// True once the daemon answers an inspect of `id_or_name`, false after
/// `wait` of 404s: during another process's create the daemon lists the
/// container but answers 404 (polled every 100 ms). Errors: others.
pub(super) async fn wait_visible(
    docker: &Docker,
    id_or_name: &str,
    wait: Duration,
) -> BackendResult<bool> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match docker.inspect_container(id_or_name, None).await {
            Ok(_) => return Ok(true),
            Err(e) if is_status(&e, 404) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) if is_status(&e, 404) => return Ok(false),
            Err(e) => {
                return Err(api_error(&format!("inspecting container {id_or_name}"), e));
            }
        }
    }
}
