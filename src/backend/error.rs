//! The one error type every backend maps its failures onto.

use super::{BackendKind, Health};

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
    /// The sandbox is gone, not running or cannot be reached; `health`
    /// says which (the manager re-provisions a [`Health::Gone`] one and
    /// restarts a [`Health::Stopped`] one). Shown as `sandbox gone: …`,
    /// `sandbox stopped: …` or `sandbox unavailable: …`.
    #[error("sandbox {}: {detail}", unavailable_word(*health))]
    Unavailable {
        /// What the failure says about the sandbox.
        health: Health,
        /// What was tried and what the backend answered.
        detail: String,
    },
    /// The sandbox died under this call and the workspace manager brought
    /// it back (`notice` says how, and whether files were kept); the call
    /// itself was not repeated because repeating it is not known to be
    /// safe (a write, a rename, a command that may have started).
    #[error("{notice}; this call was not repeated (it failed with: {cause})")]
    Recovered {
        /// What happened, for a human: "the sandbox was deleted by the
        /// service; a new one was created; files from the old one are lost".
        notice: String,
        /// The error the call failed with on the dead sandbox.
        cause: Box<BackendError>,
    },
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

/// `gone`, `stopped` or `unavailable` (unreachable and the rest).
fn unavailable_word(h: Health) -> &'static str {
    match h {
        Health::Gone => "gone",
        Health::Stopped => "stopped",
        _ => "unavailable",
    }
}

impl BackendError {
    /// The sandbox no longer exists ([`Health::Gone`]); `detail` says what
    /// was tried and what the backend answered.
    pub fn gone(detail: impl Into<String>) -> Self {
        BackendError::Unavailable {
            health: Health::Gone,
            detail: detail.into(),
        }
    }

    /// The sandbox exists but is stopped or paused ([`Health::Stopped`]).
    pub fn stopped(detail: impl Into<String>) -> Self {
        BackendError::Unavailable {
            health: Health::Stopped,
            detail: detail.into(),
        }
    }

    /// The service or sandbox cannot be reached now ([`Health::Unreachable`]).
    pub fn unreachable(detail: impl Into<String>) -> Self {
        BackendError::Unavailable {
            health: Health::Unreachable,
            detail: detail.into(),
        }
    }

    /// What this error says about the sandbox (issue 15 point 1): the
    /// health an [`Unavailable`](BackendError::Unavailable) error carries;
    /// [`Health::Conflict`] for a remote 409; [`Health::Auth`] for a
    /// remote 401 or 403; [`Health::Other`] for everything else (path
    /// errors, a failed spawn, other remote errors, a recovered call).
    pub fn health(&self) -> Health {
        match self {
            BackendError::Unavailable { health, .. } => *health,
            BackendError::Remote {
                status: Some(409), ..
            } => Health::Conflict,
            BackendError::Remote {
                status: Some(401 | 403),
                ..
            } => Health::Auth,
            _ => Health::Other,
        }
    }

    /// True when the manager can bring the sandbox back on its own
    /// ([`Health::is_recoverable`]: gone or stopped).
    pub fn is_recoverable(&self) -> bool {
        self.health().is_recoverable()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_read_from_the_variant_and_the_status() {
        assert_eq!(BackendError::gone("x").health(), Health::Gone);
        assert_eq!(BackendError::stopped("x").health(), Health::Stopped);
        assert_eq!(BackendError::unreachable("x").health(), Health::Unreachable);
        let remote = |status| BackendError::Remote {
            service: "e2b",
            status: Some(status),
            code: None,
            message: "m".into(),
        };
        assert_eq!(remote(409).health(), Health::Conflict);
        assert_eq!(remote(401).health(), Health::Auth);
        assert_eq!(remote(403).health(), Health::Auth);
        assert_eq!(remote(500).health(), Health::Other);
        assert_eq!(BackendError::NotFound("/a".into()).health(), Health::Other);
        let rec = BackendError::Recovered {
            notice: "n".into(),
            cause: Box::new(BackendError::gone("x")),
        };
        assert_eq!(
            rec.health(),
            Health::Other,
            "a recovered call is not recovered twice"
        );
        assert!(BackendError::gone("x").is_recoverable());
        assert!(!BackendError::unreachable("x").is_recoverable());
    }

    #[test]
    fn unavailable_texts_name_the_state() {
        assert_eq!(BackendError::gone("d").to_string(), "sandbox gone: d");
        assert_eq!(BackendError::stopped("d").to_string(), "sandbox stopped: d");
        assert_eq!(
            BackendError::unreachable("d").to_string(),
            "sandbox unavailable: d"
        );
    }
}
