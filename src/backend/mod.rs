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
pub mod secret;
pub mod shell;
pub mod text;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The seven backend kinds wsbench drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Commands run on the host as the current user; no isolation.
    Local,
    /// One `bwrap` process per exec on a host directory. Config files may
    /// also spell it `bwrap` (the program's and the built-in profile's
    /// name).
    #[serde(alias = "bwrap")]
    Bubblewrap,
    /// One Docker container per workspace.
    Docker,
    /// One Pod + PVC per workspace.
    Kubernetes,
    /// An E2B cloud sandbox.
    E2b,
    /// A Daytona sandbox.
    Daytona,
    /// An OpenSandbox sandbox.
    Opensandbox,
}

impl BackendKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [BackendKind; 7] = [
        BackendKind::Local,
        BackendKind::Bubblewrap,
        BackendKind::Docker,
        BackendKind::Kubernetes,
        BackendKind::E2b,
        BackendKind::Daytona,
        BackendKind::Opensandbox,
    ];

    /// Lower-case name used in config files, labels and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Bubblewrap => "bubblewrap",
            BackendKind::Docker => "docker",
            BackendKind::Kubernetes => "kubernetes",
            BackendKind::E2b => "e2b",
            BackendKind::Daytona => "daytona",
            BackendKind::Opensandbox => "opensandbox",
        }
    }

    /// Label used in the workspace instructions (docs/contract.md §1.1).
    pub fn instructions_label(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Bubblewrap => "Bubblewrap-based",
            BackendKind::Docker => "Docker-based",
            BackendKind::Kubernetes => "Kubernetes-based",
            BackendKind::E2b => "E2B-based",
            BackendKind::Daytona => "Daytona-based",
            BackendKind::Opensandbox => "OpenSandbox",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// The backend does not have this capability; see [`Capabilities`].
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

/// What a sandbox can do. A `false` flag means the matching method returns
/// [`BackendError::Unsupported`] and callers should not offer the feature.
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
    };
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A chunk of raw output bytes, as the backend received it (no line framing).
#[derive(Debug, Clone)]
pub struct OutputChunk {
    /// Source stream.
    pub stream: StreamKind,
    /// Raw bytes (may split a UTF-8 character; consumers reassemble).
    pub data: Bytes,
}

/// One command to run.
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// Program and arguments, run directly (no shell). Callers wrap in
    /// `sh -c` when they want shell syntax.
    pub argv: Vec<String>,
    /// Working directory in the backend namespace; `None` = the workdir.
    pub cwd: Option<String>,
    /// Extra environment variables, laid over the backend's base env.
    pub env: BTreeMap<String, String>,
    /// Bytes fed to stdin, which is then closed. `None` = stdin is closed
    /// at once (a command waiting on stdin sees EOF, never hangs).
    pub stdin: Option<Bytes>,
    /// Wall-clock limit. On expiry the whole process tree is killed
    /// (where [`Capabilities::kill_on_timeout`]) and the outcome says
    /// `timed_out`.
    pub timeout: Option<Duration>,
    /// Cancels the command like a timeout (used by the TUI's kill key).
    pub cancel: Option<CancellationToken>,
}

impl ExecRequest {
    /// `argv` with defaults for everything else.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// `sh -c <line>`: the whole line goes to a real shell unchanged (C18).
    pub fn shell(line: impl Into<String>) -> Self {
        Self::new(["/bin/sh".to_string(), "-c".to_string(), line.into()])
    }
}

/// How a finished command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExecOutcome {
    /// Exit code; for a signal death, `128 + signal` as shells report it.
    /// `None` only when the backend could not learn it.
    pub exit_code: Option<i32>,
    /// Signal number if the process was killed by one.
    pub signal: Option<i32>,
    /// The timeout fired and the process tree was killed.
    pub timed_out: bool,
    /// The cancel token fired and the process tree was killed.
    pub cancelled: bool,
    /// Wall-clock duration.
    #[serde(with = "duration_ms")]
    pub duration: Duration,
}

mod duration_ms {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// Channel end that receives output chunks while a command runs.
pub type OutputSink = mpsc::Sender<OutputChunk>;

/// A long-lived process to start (an MCP stdio server, a shell).
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    /// Program and arguments, run directly.
    pub argv: Vec<String>,
    /// Working directory in the backend namespace; `None` = the workdir.
    pub cwd: Option<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
}

/// Control half of a spawned process.
#[async_trait]
pub trait ProcessControl: Send + Sync {
    /// Backend-specific id (host pid, exec id, ...), for display.
    fn id(&self) -> String;
    /// Waits for exit. Returns the exit code (`128 + signal` for a signal).
    async fn wait(&self) -> BackendResult<Option<i32>>;
    /// Returns the exit code if the process has already exited.
    fn try_status(&self) -> Option<Option<i32>>;
    /// Kills the process and everything it started.
    async fn kill(&self) -> BackendResult<()>;
}

/// A running long-lived process with its three pipes.
pub struct Process {
    /// Writes to the process's stdin; drop it to close stdin.
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    /// Reads the process's stdout.
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    /// Reads the process's stderr.
    pub stderr: Box<dyn AsyncRead + Send + Unpin>,
    /// Wait / kill.
    pub control: Arc<dyn ProcessControl>,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("id", &self.control.id())
            .finish()
    }
}

/// Kind of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link (not followed).
    Symlink,
    /// Socket, fifo, device...
    Other,
}

/// Metadata of one path (the link itself for symlinks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileStat {
    /// Base name.
    pub name: String,
    /// Kind, symlinks not followed.
    pub kind: FileKind,
    /// Size in bytes (of the link target for symlinks when it resolves).
    pub size: u64,
    /// Modification time, when the backend knows it (nanosecond precision
    /// on local file systems).
    pub modified: Option<SystemTime>,
    /// For symlinks: the link target text.
    pub link_target: Option<String>,
    /// For symlinks: whether the target is a directory.
    pub target_is_dir: bool,
    /// Unix permission bits when known.
    pub mode: Option<u32>,
}

impl FileStat {
    /// True for directories and links to directories.
    pub fn is_dir_like(&self) -> bool {
        self.kind == FileKind::Dir || (self.kind == FileKind::Symlink && self.target_is_dir)
    }
}

/// A half-open byte range `[offset, offset + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub offset: u64,
    /// Number of bytes at most.
    pub len: u64,
}

/// Kind of a watched change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Created (file or directory).
    Created,
    /// Contents or metadata changed.
    Modified,
    /// Removed.
    Removed,
    /// Something changed under this directory that was not reported one by
    /// one; re-list it.
    Rescan,
}

/// One file change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Backend path.
    pub path: String,
    /// What happened.
    pub kind: ChangeKind,
}

/// A live watch; dropping it stops watching.
pub struct Watch {
    /// Change events, coalesced by the backend where it can.
    pub events: mpsc::Receiver<FileChange>,
    /// Keeps the backend's watcher alive.
    pub guard: Box<dyn Send + Sync>,
}

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
    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<()>;

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
}

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

/// How much a [`BackendNotice`] matters; the names are the levels of the
/// engine's `Event::Log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoticeLevel {
    /// Routine detail (every exec in a Pod).
    Debug,
    /// A step of provisioning or teardown.
    Info,
    /// Something that may need attention.
    Warn,
    /// A failure the user must act on (an image that cannot be pulled).
    Error,
}

impl NoticeLevel {
    /// `debug`, `info`, `warn` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeLevel::Debug => "debug",
            NoticeLevel::Info => "info",
            NoticeLevel::Warn => "warn",
            NoticeLevel::Error => "error",
        }
    }
}

/// Something a backend saw while provisioning or running a workspace
/// that the user should be able to see in a log (a Pod's phase, an image
/// pull failing, a command started in a remote sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendNotice {
    /// Workspace id it concerns.
    pub workspace_id: String,
    /// Who says it: the backend's name (`kubernetes`).
    pub source: String,
    /// How much it matters.
    pub level: NoticeLevel,
    /// One line for a human.
    pub message: String,
}

/// Receives [`BackendNotice`]s; called inline, so it must not block.
pub type NoticeSink = Arc<dyn Fn(BackendNotice) + Send + Sync>;

/// A provisioner's notice sink, set by the manager after construction
/// (hence the lock) and read once per workspace operation.
#[derive(Default)]
pub(crate) struct NoticeSlot(std::sync::RwLock<Option<NoticeSink>>);

impl NoticeSlot {
    /// Replaces the sink (the last manager to set it wins).
    pub(crate) fn set(&self, sink: NoticeSink) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sink);
    }

    /// One closure for a workspace's typed backend events `E`: each goes
    /// to `events` (the provisioner's own typed sink) and, turned into a
    /// [`BackendNotice`] for `workspace_id` by `notice`, to the notice
    /// sink. `None` when neither is set, so callers skip building events.
    pub(crate) fn sink_for<E: 'static>(
        &self,
        events: Option<Arc<dyn Fn(E) + Send + Sync>>,
        workspace_id: &str,
        notice: fn(&E, &str) -> BackendNotice,
    ) -> Option<Arc<dyn Fn(E) + Send + Sync>> {
        let notices = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if notices.is_none() && events.is_none() {
            return None;
        }
        let id = workspace_id.to_string();
        Some(Arc::new(move |ev: E| {
            if let Some(n) = &notices {
                n(notice(&ev, &id));
            }
            if let Some(e) = &events {
                e(ev);
            }
        }))
    }
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

    /// Creates a new sandbox for `spec`. Errors if one already exists for
    /// the id where the backend can tell.
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
