//! Backends: where a workspace's commands run and its files live.
//!
//! Two traits, designed for all seven backends (local, bubblewrap, docker,
//! kubernetes, e2b, daytona, opensandbox):
//!
//! * [`Sandbox`] — one live execution environment: exec with streamed
//!   stdout/stderr, long-lived processes with piped stdio (MCP stdio servers),
//!   file operations, optional watch.
//! * [`Provisioner`] — makes and finds sandboxes: create with labels, find by
//!   workspace id (reattach), suspend/resume, destroy, list.
//!
//! What a backend cannot do is stated up front in [`Capabilities`] and
//! [`ProvisionerCapabilities`], so callers pick another route (for example an
//! exec-based fallback) instead of calling a method that fails at run time.
//! The remote services shaped these flags: OpenSandbox's execd re-splits
//! output into lines (`byte_exact_output = false`) and takes no stdin
//! (`exec_stdin = false`, `processes = false`); E2B's envd and Daytona's
//! toolbox have no byte-range download (`read_range = false`); only local
//! file systems can be watched natively (see `docs/MINIMAL-SURFACE.md`).
//!
//! Paths given to a sandbox are POSIX paths in the *backend's* namespace
//! (a host path for local, `/workspace/...` inside containers); see
//! [`path`] for the pure helpers that join and normalise them.
//!
//! This file holds the two traits and what provisioning speaks in; the
//! shared data types live in files by job (`kind`, `error`,
//! `capabilities`, `command`, `files`, `health`, `notice`) and are re-exported here,
//! so every path stays `crate::backend::<Item>`.

pub mod append_check;
pub mod bubblewrap;
pub(crate) mod child;
pub mod cloud;
pub mod daytona;
pub mod docker;
pub mod e2b;
pub mod host;
pub mod http;
pub mod kubernetes;
pub mod local;
pub mod opensandbox;
pub mod path;
pub mod process_tree;
pub mod pty;
pub mod secret;
pub mod shell;
pub mod text;

mod capabilities;
mod command;
mod error;
mod files;
mod health;
mod kind;
mod line_shell;
mod notice;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde::Serialize;
use tokio::io::AsyncRead;

pub use self::capabilities::{Capabilities, NO_PTY, ProvisionerCapabilities};
pub use self::command::{
    ExecOutcome, ExecRequest, OUTPUT_CHANNEL_CHUNKS, OutputChunk, OutputSink, Process,
    ProcessControl, SpawnRequest, StreamKind,
};
pub use self::error::{BackendError, BackendResult};
pub use self::files::{ByteRange, ChangeKind, FileChange, FileKind, FileStat, Watch};
pub use self::health::Health;
pub use self::kind::BackendKind;
pub use self::line_shell::LineShell;
pub(crate) use self::notice::NoticeSlot;
pub use self::notice::{BackendNotice, NoticeLevel, NoticeSink};
pub use self::pty::{PtyControl, PtyRequest, PtySession, PtySize, PtySupport};

/// One live execution environment.
///
/// Implementations must be cheap to share (`Arc<dyn Sandbox>`); every
/// method may run concurrently with the others.
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// Backend kind.
    fn kind(&self) -> BackendKind;

    /// What this sandbox can do.
    fn capabilities(&self) -> Capabilities;

    /// The agent-visible root, a path in the backend namespace.
    fn workdir(&self) -> &str;

    /// The host directory that holds the workdir when the backend shares it
    /// with the host (local, bubblewrap, docker with a bind mount). Glob and
    /// Grep then run in-process on it, and file tools may map paths with
    /// [`Sandbox::host_path`].
    fn host_root(&self) -> Option<&Path> {
        None
    }

    /// Maps a backend path under the workdir to its host path, after
    /// checking it stays inside; `None` when the backend has no host view.
    fn host_path(&self, path: &str) -> Option<std::path::PathBuf> {
        let root = self.host_root()?;
        let rel = path::strip_root(self.workdir(), path)?;
        Some(if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        })
    }

    /// A name every wsbench process of this host gives this same sandbox
    /// (Docker: `docker:<container id>`; Kubernetes: `k8s:<namespace>/<pod>`),
    /// for host locks that serialise work on it across processes where
    /// there is no host directory to lock (the Edit and Write tools'
    /// per-file lock). `None` (the default): no such name, so only
    /// in-process locks apply.
    fn lock_identity(&self) -> Option<String> {
        None
    }

    /// How many times the sandbox behind this handle was recovered
    /// (replaced or restarted after a call found it gone or stopped; issue
    /// 15), so state kept inside it across calls (a session shell and its
    /// FIFOs) can tell it belongs to a sandbox that is no more. 0 (the
    /// default) for a backend's own sandbox, which never changes under its
    /// handle; the manager's healing wrapper counts.
    fn recoveries(&self) -> u64 {
        0
    }

    /// What the last recovery did, in words (`the container was deleted
    /// outside wsbench; a new one was created; files from the old one are
    /// lost`); `None` (the default) when there was none.
    fn last_recovery(&self) -> Option<String> {
        None
    }

    /// Runs one command to completion, streaming its output into `sink`
    /// (if given) as chunks arrive.
    ///
    /// Errors: [`BackendError::Spawn`] when the program cannot be started
    /// (local), [`BackendError::Unavailable`] when the sandbox is gone. A
    /// non-zero exit, a timeout or a cancel is an `Ok` outcome.
    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome>;

    /// Starts a long-lived process with piped stdin/stdout/stderr.
    /// Requires [`Capabilities::processes`].
    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process>;

    /// Reads a whole file, or `range` of it.
    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>>;

    /// Writes a file, creating parent directories; atomic where
    /// [`Capabilities::atomic_write`].
    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()>;

    /// Writes a file from a stream without holding it all in memory where
    /// the backend allows; creates parents.
    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64>;

    /// Appends bytes in place, creating the file (and parents) if needed.
    /// Requires [`Capabilities::append`]. Each call's bytes land
    /// contiguously, never interleaved with a concurrent append.
    ///
    /// Line-safe, for the JSONL files the engine keeps: a failed append
    /// (disk full) truncates the file back to its old length, so no torn
    /// line stays; and when `data` ends in `\n` but the file does not (a
    /// record torn by a crash), a `\n` is written first so the new record
    /// is not glued to the torn one.
    ///
    /// Returns the byte offset at which `data` starts in the file (its
    /// old length, plus one when a `\n` was written first), so a caller
    /// can later check its bytes are still there: another writer that
    /// rewrites the file whole (the reference's `offload_context`,
    /// docs/contract.md §6) can drop them.
    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64>;

    /// Appends `data` (whole lines) after checking that the lines this
    /// process appended before (`earlier`, with their last offsets) are
    /// still in the file, appending again those found nowhere once the
    /// file has settled; then reads back and repairs again. Check, write
    /// and read-back are one critical section under the lock
    /// [`Sandbox::append`] takes (issue 23 point 7; see
    /// [`append_check`] for how a line is judged and the byte bounds).
    ///
    /// `Ok(None)` when the backend offers no such section (the default:
    /// remote backends, whose appends are separate execs); the caller then
    /// checks with unlocked reads around [`Sandbox::append`].
    ///
    /// Errors: as [`Sandbox::append`], and those of the read-back.
    async fn append_checked(
        &self,
        _path: &str,
        _earlier: &[append_check::TrackedRecord],
        _data: &[u8],
    ) -> BackendResult<Option<append_check::CheckedAppend>> {
        Ok(None)
    }

    /// Creates `path` exclusively; `Ok(false)` if it already exists. Used
    /// to claim a unique file name without a check-then-write race.
    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool>;

    /// Lists a directory (not recursive), entries sorted by name.
    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>>;

    /// Metadata of a path (symlinks not followed); `NotFound` if absent.
    async fn stat(&self, path: &str) -> BackendResult<FileStat>;

    /// Removes a file, or a directory (recursively when `recursive`).
    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()>;

    /// Renames within the sandbox (replacing a file at `to`).
    async fn rename(&self, from: &str, to: &str) -> BackendResult<()>;

    /// Creates a directory (and parents when `parents`).
    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()>;

    /// Watches `path` recursively. Requires [`Capabilities::watch`].
    async fn watch(&self, path: &str) -> BackendResult<Watch>;

    /// Starts `req.argv` on a new PTY of `req.size` in `req.cwd` (default
    /// the workdir), with the sandbox's isolation and environment, as
    /// [`Sandbox::exec`] would run it. Requires [`Capabilities::pty`];
    /// the default answers [`BackendError::Unsupported`] whose `what`
    /// carries the reason from [`Capabilities::pty`].
    ///
    /// Errors: `Unsupported`; [`BackendError::Spawn`] when the program
    /// cannot be started; `Unavailable` when the sandbox is gone.
    async fn pty(&self, _req: PtyRequest) -> BackendResult<PtySession> {
        Err(BackendError::Unsupported {
            backend: self.kind(),
            what: self.capabilities().pty.reason().unwrap_or(NO_PTY),
        })
    }

    /// Opens a line-mode shell session in `cwd` (default the workdir),
    /// where [`Capabilities::pty`] is [`PtySupport::LineMode`]; the
    /// default answers `Unsupported`.
    ///
    /// Errors: `Unsupported`; the service refused the session.
    async fn line_shell(&self, _cwd: Option<String>) -> BackendResult<Box<dyn LineShell>> {
        Err(BackendError::Unsupported {
            backend: self.kind(),
            what: "a line-mode shell session",
        })
    }
}

/// State of a provisioned sandbox as its provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub enum SandboxState {
    /// Being created or started.
    Provisioning,
    /// Running and usable.
    Running,
    /// Suspended (paused, stopped, pod deleted with PVC kept).
    Suspended,
    /// Failed; the text is the provider's reason.
    Failed(String),
    /// The provider reported something wsbench does not know.
    Unknown(String),
}

/// Well-known label keys every backend writes.
pub mod labels {
    /// Workspace id label/metadata key.
    pub const WORKSPACE_ID: &str = "wsbench.workspace.id";
    /// User id.
    pub const USER: &str = "wsbench.user";
    /// Agent id.
    pub const AGENT: &str = "wsbench.agent";
    /// Profile name.
    pub const PROFILE: &str = "wsbench.profile";
}

/// What to provision.
#[derive(Debug, Clone, Default)]
pub struct ProvisionSpec {
    /// Workspace id (the reattach key).
    pub workspace_id: String,
    /// Labels/metadata to put on the sandbox; the workspace-id label is
    /// always set from `workspace_id` and cannot be overridden.
    pub labels: BTreeMap<String, String>,
}

/// A sandbox a provisioner can see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxInfo {
    /// Workspace id from its label.
    pub workspace_id: String,
    /// The provider's own id (host dir, container id, pod name, sandbox id).
    pub backend_id: String,
    /// Provider state.
    pub state: SandboxState,
    /// All labels/metadata.
    pub labels: BTreeMap<String, String>,
    /// When it was created, if known.
    #[serde(with = "opt_system_time")]
    pub created_at: Option<SystemTime>,
    /// Last activity the provider knows of.
    #[serde(with = "opt_system_time")]
    pub last_active: Option<SystemTime>,
}

mod opt_system_time {
    use serde::Serializer;
    use std::time::{SystemTime, UNIX_EPOCH};
    pub fn serialize<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
        match t.and_then(|t| t.duration_since(UNIX_EPOCH).ok()) {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

/// Makes, finds, suspends and destroys sandboxes of one backend kind.
#[async_trait]
pub trait Provisioner: Send + Sync {
    /// Backend kind.
    fn kind(&self) -> BackendKind;

    /// What this provisioner can do.
    fn capabilities(&self) -> ProvisionerCapabilities;

    /// Where its sandboxes live, as text equal for two provisioners (in
    /// any process of this host) that see the same sandboxes: a base
    /// directory, a service URL, a profile. The manager keys its
    /// cross-process workspace holds with it (with the kind and the
    /// workspace id), so two unrelated backends of one kind never share
    /// a hold. `None` (the default): the kind and id alone.
    fn instance_key(&self) -> Option<String> {
        None
    }

    /// Creates a new sandbox for `spec`. Where the backend names its
    /// sandboxes after the id (Docker, Kubernetes), one that exists
    /// already — another process made it at the same time — is adopted
    /// instead (issue 15 point 3); elsewhere an existing one is an error
    /// where the backend can tell.
    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>>;

    /// Finds the sandbox of a workspace id, in any state.
    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>>;

    /// Attaches to a found sandbox, resuming or starting it if needed.
    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>>;

    /// Find-or-create: reattaches when a sandbox exists for the id.
    async fn provision(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        match self.find(&spec.workspace_id).await? {
            Some(info) if !matches!(info.state, SandboxState::Failed(_)) => {
                self.attach(&info).await
            }
            _ => self.create(spec).await,
        }
    }

    /// Suspends (frees compute, keeps state). Requires
    /// [`ProvisionerCapabilities::suspend`]; otherwise a no-op close.
    async fn suspend(&self, workspace_id: &str) -> BackendResult<()>;

    /// Resumes a suspended sandbox.
    async fn resume(&self, workspace_id: &str) -> BackendResult<()>;

    /// Destroys the sandbox and its state.
    async fn destroy(&self, workspace_id: &str) -> BackendResult<()>;

    /// Lists every sandbox this provisioner can see (by label), including
    /// suspended ones.
    async fn list(&self) -> BackendResult<Vec<SandboxInfo>>;

    /// Routes this backend's [`BackendNotice`]s to `sink`, replacing any
    /// earlier one. The workspace manager calls it with a sink that
    /// publishes them on its event bus (as `Event::Log` lines), so the
    /// TUI's Logs pane and other subscribers see them. Backends with
    /// nothing to report keep this default, which drops the sink.
    fn set_notice_sink(&self, _sink: NoticeSink) {}

    /// Pushes the provider's expiry back by `ttl`. Requires
    /// [`ProvisionerCapabilities::keep_alive`].
    async fn keep_alive(&self, _workspace_id: &str, _ttl: Duration) -> BackendResult<()> {
        Err(BackendError::Unsupported {
            backend: self.kind(),
            what: "keep-alive",
        })
    }
}
