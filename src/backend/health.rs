//! What a failed call says about the sandbox itself: a small typed set
//! the workspace manager acts on (issue 15 point 1), so no caller matches
//! error strings.
//!
//! Each backend maps its own failures here where it knows them (a Docker
//! 404 "no such container", a Pod in phase `Failed`, an E2B 502 from the
//! proxy, a removed host directory); [`BackendError::health`] reads it
//! back. Errors about a path (`NotFound`, `IsADirectory`, ...) say nothing
//! about the sandbox and are [`Health::Other`].
//!
//! [`BackendError::health`]: super::BackendError::health

use serde::Serialize;

/// The state of a sandbox as a failed call reveals it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// The sandbox no longer exists (deleted, expired, evicted, its host
    /// directory removed): only a new one helps; its files are lost unless
    /// the provider kept a volume.
    Gone,
    /// The sandbox exists but is not running (stopped, paused, suspended):
    /// starting or resuming it brings it back with its files.
    Stopped,
    /// The service or the sandbox cannot be reached right now (connection
    /// refused, a proxy's 502 while it starts): retrying later may work;
    /// nothing to recover.
    Unreachable,
    /// Another party holds the name or the state changed under us (409):
    /// look it up again rather than create.
    Conflict,
    /// The service refused our credentials (401, 403).
    Auth,
    /// Anything else, including errors about a path or a command: the
    /// sandbox itself is fine as far as this error tells.
    Other,
}

impl Health {
    /// One word for messages and JSON: `gone`, `stopped`, `unreachable`,
    /// `conflict`, `auth`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Gone => "gone",
            Health::Stopped => "stopped",
            Health::Unreachable => "unreachable",
            Health::Conflict => "conflict",
            Health::Auth => "auth",
            Health::Other => "other",
        }
    }

    /// True for [`Health::Gone`] and [`Health::Stopped`]: the manager can
    /// bring the workspace back (re-provision or restart) on its own.
    pub fn is_recoverable(self) -> bool {
        matches!(self, Health::Gone | Health::Stopped)
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
