//! Docker API errors in the backend's terms.

use bollard::Docker;

use crate::backend::{BackendError, BackendResult};

/// Maps a bollard error to a [`BackendError::Remote`] with `context`.
pub(super) fn api_error(context: &str, e: bollard::errors::Error) -> BackendError {
    match e {
        bollard::errors::Error::DockerResponseServerError {
            status_code,
            message,
        } => BackendError::Remote {
            service: "docker",
            status: Some(status_code),
            code: None,
            message: format!("{context}: {message}"),
        },
        other => BackendError::Remote {
            service: "docker",
            status: None,
            code: None,
            message: format!("{context}: {other}"),
        },
    }
}

/// What a daemon error about `container` says about the sandbox (issue 15
/// point 1), or `None` when it says nothing (the error is about something
/// else: a path, an image).
///
/// * 404 `No such container` → [`BackendError::gone`] (`docker rm -f`);
///   on an endpoint that only names the container (exec create), any 404.
/// * `Removal In Progress` / `marked for removal` (409 or 500, `docker rm
///   -f` while an exec runs) → [`BackendError::gone`].
/// * 409 `… is paused` or `… is not running` → [`BackendError::stopped`]
///   (`docker pause`, `docker stop`); on a container-only endpoint any 409
///   but `… is restarting`, which is [`BackendError::unreachable`]: the
///   daemon brings it back by itself.
///
/// The daemon's messages are its API (moby's `errdefs` texts), matched
/// only here, case-insensitively.
pub(super) fn container_health(
    container: &str,
    e: &bollard::errors::Error,
    container_only: bool,
) -> Option<BackendError> {
    let bollard::errors::Error::DockerResponseServerError {
        status_code,
        message,
    } = e
    else {
        return None;
    };
    let lower = message.to_ascii_lowercase();
    let detail = || format!("container {container}: {message}");
    match status_code {
        404 if container_only || lower.contains("no such container") => {
            Some(BackendError::gone(detail()))
        }
        // `docker rm -f` of a container with an exec running: the daemon
        // answers 409 or 500 `… is not running: Removal In Progress` (or
        // `marked for removal`) until it is gone. It is gone already for
        // us: a start cannot bring it back.
        _ if lower.contains("removal in progress") || lower.contains("marked for removal") => {
            Some(BackendError::gone(detail()))
        }
        409 if lower.contains("restarting") => Some(BackendError::unreachable(detail())),
        409 if container_only || lower.contains("paused") || lower.contains("not running") => {
            Some(BackendError::stopped(detail()))
        }
        _ => None,
    }
}

pub(super) fn is_status(e: &bollard::errors::Error, code: u16) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if *status_code == code)
}

/// Connects to the daemon named by `host` (or `$DOCKER_HOST`, or the local
/// socket) and negotiates the API version (the daemons here speak 1.41).
///
/// Errors: [`BackendError::Unavailable`] naming the address when the
/// daemon does not answer.
pub async fn connect(host: Option<&str>) -> BackendResult<Docker> {
    let addr = host
        .map(str::to_string)
        .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into());
    let unreachable = |e: bollard::errors::Error| {
        BackendError::unreachable(format!(
            "cannot reach the Docker daemon at {addr}: {} (is dockerd running? here: `dockerd \
             --bridge=none --iptables=false &`)",
            root_cause(&e)
        ))
    };
    let docker = Docker::connect_with_host(&addr).map_err(unreachable)?;
    docker.negotiate_version().await.map_err(unreachable)
}

/// Why the daemon did not answer, once: the innermost error (the OS's
/// "connection refused" under bollard's and hyper's wrappers), and never
/// the address again (the caller names it).
pub(super) fn root_cause(e: &bollard::errors::Error) -> String {
    if let bollard::errors::Error::SocketNotFoundError(_) = e {
        return "no such socket".into();
    }
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Health;

    fn server(status_code: u16, message: &str) -> bollard::errors::Error {
        bollard::errors::Error::DockerResponseServerError {
            status_code,
            message: message.into(),
        }
    }

    fn health(status: u16, message: &str, container_only: bool) -> Option<Health> {
        container_health("c1", &server(status, message), container_only).map(|e| e.health())
    }

    #[test]
    fn daemon_answers_map_onto_health() {
        // `docker rm -f`, `docker stop`, `docker pause` as the exec and
        // archive endpoints report them (moby's texts).
        assert_eq!(
            health(404, "No such container: c1", false),
            Some(Health::Gone)
        );
        assert_eq!(
            health(409, "Container c1 is not running", false),
            Some(Health::Stopped)
        );
        assert_eq!(
            health(
                409,
                "Container c1 is paused, unpause the container before exec",
                false
            ),
            Some(Health::Stopped)
        );
        assert_eq!(
            health(
                409,
                "Container c1 is restarting, wait until the container is running",
                true
            ),
            Some(Health::Unreachable)
        );
        // `docker rm -f` while an exec ran (seen in the issue 15 trial).
        assert_eq!(
            health(
                500,
                "Container c1 is not running: Removal In Progress",
                false
            ),
            Some(Health::Gone)
        );
        assert_eq!(
            health(
                409,
                "container c1 is marked for removal and cannot be started",
                false
            ),
            Some(Health::Gone)
        );
        // A path-scoped 404 is about the path, not the container.
        assert_eq!(
            health(404, "Could not find the file /x in container c1", false),
            None
        );
        // The exec endpoint names only the container: any 404 is it.
        assert_eq!(health(404, "page not found", true), Some(Health::Gone));
        assert_eq!(health(500, "boom", true), None);
        let e = container_health("c1", &server(404, "No such container: c1"), true).unwrap();
        assert_eq!(
            e.to_string(),
            "sandbox gone: container c1: No such container: c1"
        );
    }
}
