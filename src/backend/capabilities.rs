//! What a sandbox and a provisioner can do, stated up front so callers
//! pick another route instead of calling a method that fails at run time.

use serde::Serialize;

use super::PtySupport;

/// What a sandbox can do. A `false` flag means the matching method returns
/// [`BackendError::Unsupported`](super::BackendError::Unsupported) and callers should not offer the feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// `exec` accepts stdin bytes.
    pub exec_stdin: bool,
    /// stdout and stderr arrive separately and byte-exact.
    pub byte_exact_output: bool,
    /// A timeout or cancel kills the whole remote process tree.
    pub kill_on_timeout: bool,
    /// `spawn` gives a long-lived process with piped stdin/stdout/stderr.
    pub processes: bool,
    /// `read` honours a byte range without transferring the whole file.
    pub read_range: bool,
    /// `write` replaces the file atomically (temp file + rename).
    pub atomic_write: bool,
    /// `append` adds bytes in place (cost proportional to the bytes added).
    pub append: bool,
    /// `watch` delivers change events.
    pub watch: bool,
    /// `pty` starts a program on an interactive terminal (`!`, `wsbench
    /// shell`); when not, the one-line reason a user is shown.
    pub pty: PtySupport,
}

impl Capabilities {
    /// Every capability on (a sandbox on this host: local, bubblewrap);
    /// other sandboxes start from it and turn off what they lack.
    pub const ALL: Capabilities = Capabilities {
        exec_stdin: true,
        byte_exact_output: true,
        kill_on_timeout: true,
        processes: true,
        read_range: true,
        atomic_write: true,
        append: true,
        watch: true,
        pty: PtySupport::Supported,
    };

    /// Every capability off; remote services start from it and turn on
    /// what their API offers.
    pub const NONE: Capabilities = Capabilities {
        exec_stdin: false,
        byte_exact_output: false,
        kill_on_timeout: false,
        processes: false,
        read_range: false,
        atomic_write: false,
        append: false,
        watch: false,
        pty: PtySupport::Unsupported(NO_PTY),
    };
}

/// The reason a backend without its own terminal support gives.
pub const NO_PTY: &str = "a terminal (PTY): this backend has no terminal support";

/// What a provisioner can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProvisionerCapabilities {
    /// `suspend`/`resume` keep state while freeing compute.
    pub suspend: bool,
    /// The provider expires idle sandboxes by itself and `keep_alive`
    /// pushes that expiry back (E2B, OpenSandbox).
    pub keep_alive: bool,
    /// Sandboxes survive the wsbench process and can be found again.
    pub persistent: bool,
}
