//! The one error type every backend maps its failures onto.

use super::BackendKind;

/// Errors every backend maps its failures onto.
///
/// Remote services keep their own code and message in [`BackendError::Remote`]
/// so a user sees, for instance, `DOCKER::SANDBOX_NOT_FOUND` verbatim.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The path does not exist.
    #[error("no such file or directory: {0}")]
    NotFound(String),
    /// The path exists but the operation wants a file.
    #[error("is a directory: {0}")]
    IsADirectory(String),
    /// The path exists but the operation wants a directory.
    #[error("not a directory: {0}")]
    NotADirectory(String),
    /// Target already exists (mkdir without parents, rename onto a dir...).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The OS or the service refused access.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The path resolves outside the area the sandbox allows.
    #[error("path escapes the workspace: {0}")]
    Escapes(String),
    /// The program of an exec could not be started (missing, not executable).
    #[error("cannot start `{program}`: {reason}")]
    Spawn {
        /// argv\[0\] as given.
        program: String,
        /// OS error text or the service's message.
        reason: String,
    },
    /// The backend does not have this capability; see [`Capabilities`](super::Capabilities).
    #[error("the {backend} backend does not support {what}")]
    Unsupported {
        /// Backend kind.
        backend: BackendKind,
        /// What was asked for.
        what: &'static str,
    },
    /// A remote service answered with an error: shown as
    /// `<service> error <status> <code>: <message>`, each part only when
    /// known (the code is left out when it repeats the status).
    #[error("{service} error{}: {message}", remote_tag(*status, code.as_deref()))]
    Remote {
        /// Service name (`e2b`, `daytona`, `docker`, ...).
        service: &'static str,
        /// HTTP status where there is one.
        status: Option<u16>,
        /// The service's own error code (`FILE_NOT_FOUND`, ...).
        code: Option<String>,
        /// The service's message.
        message: String,
    },
    /// The sandbox is gone or not running (the manager may re-provision).
    #[error("sandbox unavailable: {0}")]
    Unavailable(String),
    /// Any other I/O error, with the path or operation it concerns.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// ` 401 UNAUTHORIZED`, ` 404`, ` timeout` or `` for a remote error.
fn remote_tag(status: Option<u16>, code: Option<&str>) -> String {
    let status = status.map(|s| s.to_string());
    let code = code.filter(|c| !c.is_empty() && Some(*c) != status.as_deref());
    status
        .iter()
        .map(String::as_str)
        .chain(code)
        .map(|p| format!(" {p}"))
        .collect()
}

impl BackendError {
    /// Maps an `io::Error` on `path` to the matching variant.
    pub fn from_io(err: std::io::Error, path: impl Into<String>) -> Self {
        let path = path.into();
        use std::io::ErrorKind as K;
        match err.kind() {
            K::NotFound => BackendError::NotFound(path),
            K::PermissionDenied => BackendError::PermissionDenied(path),
            K::AlreadyExists => BackendError::AlreadyExists(path),
            K::IsADirectory => BackendError::IsADirectory(path),
            K::NotADirectory => BackendError::NotADirectory(path),
            _ => BackendError::Io {
                context: path,
                source: err,
            },
        }
    }

    /// True for [`BackendError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, BackendError::NotFound(_))
    }
}

/// Result alias for backend calls.
pub type BackendResult<T> = Result<T, BackendError>;
