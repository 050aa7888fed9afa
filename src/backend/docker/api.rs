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
        BackendError::Unavailable(format!(
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
