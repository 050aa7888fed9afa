//! The error type of workspace operations, shared by every engine
//! subsystem (tools report theirs in a result instead).

use super::layout::IdError;
use crate::backend::BackendError;

/// Errors of workspace operations (tools report theirs in their result).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// An id cannot be used in a path.
    #[error(transparent)]
    Id(#[from] IdError),
    /// Bad input (a skill without SKILL.md, a bad archive, ...).
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Writing an offloaded file (a tool result) failed; `cleanup` says
    /// what became of the claimed file ("nothing was kept", or why it
    /// could not be removed).
    #[error("could not write {path} ({cleanup}): {source}")]
    OffloadFailed {
        /// Backend path of the claimed file.
        path: String,
        /// What became of it.
        cleanup: String,
        /// The write's error.
        source: BackendError,
    },
    /// A file's content could not be parsed.
    #[error("{path}: {message}")]
    Parse {
        /// Backend path.
        path: String,
        /// What is wrong, with line and column where known.
        message: String,
    },
}

/// Result alias for workspace operations.
pub type WsResult<T> = Result<T, WorkspaceError>;
