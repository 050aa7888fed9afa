//! The Docker backend (bollard): one container per workspace (contract
//! §7.3, without its image build and Python gateway).
//!
//! * **Image** per profile, default `debian:bookworm-slim`; pulled with
//!   progress events when absent ([`PullPolicy`]); with no registry
//!   reachable the error names the image and how to provide it locally.
//! * **Container** `wsbench-[<profile>-]<id>`, labelled with
//!   [`labels`] (workspace id, user, agent, profile) plus
//!   the storage facts needed to reattach; PID 1 is Docker's init running
//!   `sleep infinity` (it reaps what a killed command leaves behind);
//!   `no-new-privileges`; memory / CPU / PID limits; network mode from the
//!   profile (`none` by default — never a bridge here).
//! * **Storage** ([`Storage`]): a host directory bind-mounted at
//!   `/workspace` (default), a named volume, or nothing (ephemeral).
//!   With a bind mount the file tools work on the host directory after the
//!   same confinement check as bubblewrap ([`HostDir`]), and Glob/Grep run
//!   in-process; otherwise they go through the archive API and small exec
//!   scripts (module `files`).
//! * **Ownership**: with a bind mount, commands run as the host user's
//!   `uid:gid` (unless [`DockerOptions::user`] says otherwise), so every
//!   file a command creates in `/workspace` belongs to the host user —
//!   readable and removable without the reference's `chown -R` pass on
//!   close (§7.3). As root on the host that is `0:0`. Without a bind
//!   mount, commands run as the image's user.
//! * **Exec** through the API, demultiplexed and streamed, exit code from
//!   `inspect_exec` (C12), timeouts that kill the tree inside the container
//!   (module `exec`).
//! * **Reattach** by label after a restart (start or unpause as needed);
//!   suspend = stop (or pause, [`SuspendMode`]); destroy = remove the
//!   container, its volume and its bind directory.
//! * **Events** ([`DockerEvent`]: pulls, containers created, started,
//!   stopped and removed, execs, problems) go to the
//!   [`DockerProvisioner::with_events`] sink and, as [`BackendNotice`]s
//!   about their workspace, to the sink the workspace manager sets
//!   ([`Provisioner::set_notice_sink`]), which puts them on its event bus
//!   (the TUI's Logs pane).

mod exec;
mod files;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncRead;
use tokio::sync::OnceCell;

use self::exec::ExecTarget;
use self::files::ContainerFiles;
use super::host::{HostDir, sanitize_segment};
use super::{
    BackendError, BackendKind, BackendNotice, BackendResult, ByteRange, Capabilities, ExecOutcome,
    ExecRequest, FileStat, NoticeLevel, NoticeSink, OutputSink, Process, ProvisionSpec,
    Provisioner, ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, SpawnRequest, Watch,
    labels,
};

/// The default image of the built-in `docker` profile.
pub const DEFAULT_IMAGE: &str = "debian:bookworm-slim";

/// Path of the workspace inside the container (contract §7.3).
pub const CONTAINER_WORKDIR: &str = "/workspace";

/// Label: how the workspace stores its files (`bind`, `volume`, `ephemeral`).
pub const LABEL_STORAGE: &str = "wsbench.docker.storage";
/// Label: host directory of a bind-mounted workspace.
pub const LABEL_HOST_DIR: &str = "wsbench.docker.host_dir";
/// Label: named volume of a volume workspace.
pub const LABEL_VOLUME: &str = "wsbench.docker.volume";
/// Label: user commands run as (`uid:gid`), empty for the image default.
pub const LABEL_USER: &str = "wsbench.docker.user";

/// When to pull the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PullPolicy {
    /// Pull only when the image is not present locally.
    #[default]
    Missing,
    /// Pull before every create.
    Always,
    /// Never pull; a missing image is an error.
    Never,
}

/// Where a workspace's files live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    /// A host directory (one per workspace under the base dir)
    /// bind-mounted at `/workspace`.
    #[default]
    Bind,
    /// A named volume `wsbench-<id>` mounted at `/workspace`.
    Volume,
    /// Nothing: files live in the container and die with it.
    Ephemeral,
}

/// What suspend does to the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuspendMode {
    /// `docker stop`: frees memory; resume starts it again.
    #[default]
    Stop,
    /// `docker pause`: freezes the processes; resume is instant.
    Pause,
}

/// Profile options of a Docker workspace (`[profiles.<name>]` with
/// `backend = "docker"`, or JSON). Every field has a default, so the
/// built-in `docker` profile needs none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerOptions {
    /// Daemon address (`unix:///var/run/docker.sock`, `tcp://...`);
    /// `None` = `$DOCKER_HOST`, else the local socket.
    pub host: Option<String>,
    /// Image to run.
    pub image: String,
    /// When to pull the image.
    pub pull: PullPolicy,
    /// Where files live.
    pub storage: Storage,
    /// Parent of the per-workspace host directories (bind storage);
    /// `None` = `$XDG_DATA_HOME/wsbench/docker` ([`default_base_dir`]).
    pub base_dir: Option<PathBuf>,
    /// Network mode: `none` (default) or `host` on machines whose daemon
    /// runs without a bridge; any mode the daemon knows otherwise.
    pub network: String,
    /// Memory limit: bytes, or a number with `k`, `m` or `g` (`"2g"`).
    pub memory: Option<String>,
    /// CPU limit in cores (`1.5`).
    pub cpus: Option<f64>,
    /// Most processes the container may have.
    pub pids_limit: Option<i64>,
    /// Docker's init as PID 1 (reaps orphans). Off: the command below is
    /// PID 1.
    pub init: bool,
    /// The container's main command; it only has to stay alive.
    pub command: Vec<String>,
    /// What suspend does.
    pub suspend: SuspendMode,
    /// User commands run as (`uid[:gid]` or a name in the image). `None`:
    /// the host user's `uid:gid` with bind storage, the image's user
    /// otherwise.
    pub user: Option<String>,
    /// Extra environment for every command. With a bind mount and a
    /// non-root user, `HOME` defaults to `/workspace`.
    pub env: BTreeMap<String, String>,
    /// Prefix of container and volume names.
    pub name_prefix: String,
    /// Seconds `docker stop` waits before killing.
    pub stop_timeout_secs: u32,
    /// Destroy removes the named volume too.
    pub remove_volume: bool,
    /// Extra host paths bound read-only at the same place in the container
    /// (a host tool such as `node` and its packages, for MCP stdio
    /// servers); missing ones are skipped, as bubblewrap's `ro_binds` do.
    /// Fixed when the container is created.
    pub ro_binds: Vec<PathBuf>,
}

impl Default for DockerOptions {
    fn default() -> Self {
        DockerOptions {
            host: None,
            image: DEFAULT_IMAGE.into(),
            pull: PullPolicy::Missing,
            storage: Storage::Bind,
            base_dir: None,
            network: "none".into(),
            memory: None,
            cpus: None,
            pids_limit: Some(4096),
            init: true,
            command: vec!["sleep".into(), "infinity".into()],
            suspend: SuspendMode::Stop,
            user: None,
            env: BTreeMap::new(),
            name_prefix: "wsbench-".into(),
            stop_timeout_secs: 5,
            remove_volume: true,
            ro_binds: Vec::new(),
        }
    }
}

/// `$XDG_DATA_HOME/wsbench/docker` (default `~/.local/share/wsbench/docker`).
pub fn default_base_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::data_dir)
        .map(|d| d.join("wsbench").join("docker"))
        .unwrap_or_else(|| PathBuf::from("wsbench-docker"))
}

/// Parses a memory size: plain bytes or a number with `b`, `k`, `m`, `g`
/// (binary multiples, case-insensitive).
pub fn parse_memory(s: &str) -> Result<i64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1i64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('b') => (&t[..t.len() - 1], 1),
        _ => (t.as_str(), 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad memory size `{s}` (use bytes or a number with k, m or g)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("memory size `{s}` must be positive"));
    }
    Ok((v * mult as f64) as i64)
}

/// What the Docker backend reports while it works (the manager maps these
/// onto its event bus).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DockerEvent {
    /// A line of image pull progress.
    PullProgress {
        /// Image being pulled.
        image: String,
        /// Docker's status text (`Downloading`, `Pull complete`, ...).
        status: String,
        /// Layer id, when the line is about one layer.
        layer: Option<String>,
        /// Bytes done, when known.
        current: Option<i64>,
        /// Bytes in all, when known.
        total: Option<i64>,
    },
    /// A container was created.
    Created {
        /// Workspace id.
        workspace_id: String,
        /// Container id.
        container: String,
        /// Container name.
        name: String,
    },
    /// A container was started (or unpaused).
    Started {
        /// Container id.
        container: String,
    },
    /// A container was stopped (or paused).
    Stopped {
        /// Container id.
        container: String,
    },
    /// A container was removed.
    Removed {
        /// Container id.
        container: String,
    },
    /// An exec began.
    ExecStarted {
        /// Container id.
        container: String,
        /// Exec id.
        exec_id: String,
        /// Program and arguments.
        argv: Vec<String>,
    },
    /// An exec ended.
    ExecExited {
        /// Container id.
        container: String,
        /// Exec id.
        exec_id: String,
        /// Exit code from `inspect_exec`.
        exit_code: Option<i32>,
        /// Wall time (zero when not measured).
        #[serde(serialize_with = "ser_ms")]
        duration: Duration,
    },
    /// A provisioner operation failed (the pull, creating or starting the
    /// container, stopping or removing it); the error itself is returned
    /// to the caller as well.
    Problem {
        /// What failed: `create`, `attach`, `suspend`, `resume` or
        /// `destroy`.
        action: String,
        /// The error, as displayed.
        message: String,
    },
}

/// Most characters of a command line shown in a notice.
const NOTICE_ARGV_CHARS: usize = 160;

/// The short form of a container id `docker ps` shows.
fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

impl DockerEvent {
    /// How much the event matters in a log: problems are errors;
    /// containers created, started, stopped or removed and pull steps
    /// info; byte counts of a pull and each exec debug (file operations
    /// without a bind mount are execs too, so at a higher level they
    /// would drown the rest).
    pub fn level(&self) -> NoticeLevel {
        match self {
            DockerEvent::Problem { .. } => NoticeLevel::Error,
            DockerEvent::PullProgress {
                current: Some(_), ..
            }
            | DockerEvent::ExecStarted { .. }
            | DockerEvent::ExecExited { .. } => NoticeLevel::Debug,
            DockerEvent::PullProgress { .. }
            | DockerEvent::Created { .. }
            | DockerEvent::Started { .. }
            | DockerEvent::Stopped { .. }
            | DockerEvent::Removed { .. } => NoticeLevel::Info,
        }
    }

    /// One line for a human (`created container wsbench-x (1a2b3c4d5e6f)`);
    /// containers by their short id, long command lines cut.
    pub fn message(&self) -> String {
        match self {
            DockerEvent::PullProgress {
                image,
                status,
                layer,
                current,
                total,
            } => {
                let layer = layer
                    .as_deref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default();
                let bytes = match (current, total) {
                    (Some(c), Some(t)) if *t > 0 => format!(" ({c}/{t} bytes)"),
                    (Some(c), _) => format!(" ({c} bytes)"),
                    _ => String::new(),
                };
                format!("pulling {image}: {layer}{status}{bytes}")
            }
            DockerEvent::Created {
                container, name, ..
            } => format!("created container {name} ({})", short_id(container)),
            DockerEvent::Started { container } => {
                format!("started container {}", short_id(container))
            }
            DockerEvent::Stopped { container } => {
                format!("stopped container {}", short_id(container))
            }
            DockerEvent::Removed { container } => {
                format!("removed container {}", short_id(container))
            }
            DockerEvent::ExecStarted {
                container, argv, ..
            } => {
                let line = argv.join(" ");
                let cut: String = line.chars().take(NOTICE_ARGV_CHARS).collect();
                let more = if cut.len() < line.len() { "…" } else { "" };
                format!("exec in {}: {cut}{more}", short_id(container))
            }
            DockerEvent::ExecExited {
                container,
                exit_code,
                duration,
                ..
            } => {
                let ms = duration.as_millis();
                match exit_code {
                    Some(c) => format!("exec in {} exited {c} after {ms} ms", short_id(container)),
                    None => format!(
                        "exec in {} ended without an exit code after {ms} ms",
                        short_id(container)
                    ),
                }
            }
            DockerEvent::Problem { action, message } => format!("{action} failed: {message}"),
        }
    }

    /// The event as a [`BackendNotice`] about `workspace_id` (source
    /// `docker`).
    pub fn notice(&self, workspace_id: &str) -> BackendNotice {
        BackendNotice {
            workspace_id: workspace_id.to_string(),
            source: "docker".into(),
            level: self.level(),
            message: self.message(),
        }
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Receives [`DockerEvent`]s; called inline, so it must not block.
pub type EventSink = Arc<dyn Fn(DockerEvent) + Send + Sync>;

fn emit(sink: &Option<EventSink>, ev: DockerEvent) {
    if let Some(s) = sink {
        s(ev);
    }
}

/// Maps a bollard error to a [`BackendError::Remote`] with `context`.
fn api_error(context: &str, e: bollard::errors::Error) -> BackendError {
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

fn is_status(e: &bollard::errors::Error, code: u16) -> bool {
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
fn root_cause(e: &bollard::errors::Error) -> String {
    if let bollard::errors::Error::SocketNotFoundError(_) = e {
        return "no such socket".into();
    }
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// A running container used as a sandbox.
#[derive(Clone)]
pub struct DockerSandbox {
    target: ExecTarget,
    name: String,
    /// The bind-mounted host directory, when there is one.
    host: Option<HostDir>,
    files: ContainerFiles,
    append_lock: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for DockerSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerSandbox")
            .field("container", &self.target.container)
            .field("name", &self.name)
            .field("host", &self.host.as_ref().map(|h| h.root().to_path_buf()))
            .finish()
    }
}

impl DockerSandbox {
    /// Container id.
    pub fn container_id(&self) -> &str {
        &self.target.container
    }

    /// Container name.
    pub fn container_name(&self) -> &str {
        &self.name
    }

    /// The user commands run as (`None` = the image's).
    pub fn user(&self) -> Option<&str> {
        self.target.user.as_deref()
    }

    /// Routes a path: the bind-mounted host directory when it covers the
    /// path, else the container.
    fn on_host(&self, path: &str) -> Option<&HostDir> {
        let abs = super::path::join(CONTAINER_WORKDIR, path);
        self.host.as_ref().filter(|h| h.covers(&abs))
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    fn capabilities(&self) -> Capabilities {
        let bind = self.host.is_some();
        Capabilities {
            exec_stdin: true,
            byte_exact_output: true,
            kill_on_timeout: true,
            processes: true,
            read_range: bind,
            atomic_write: true,
            append: true,
            watch: bind,
        }
    }

    fn workdir(&self) -> &str {
        CONTAINER_WORKDIR
    }

    fn host_root(&self) -> Option<&Path> {
        self.host.as_ref().map(HostDir::root)
    }

    fn host_path(&self, path: &str) -> Option<PathBuf> {
        self.on_host(path)?.host_path(path)
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.target.exec(req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.target.spawn(req).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        match self.on_host(path) {
            Some(h) => h.read(path, range).await,
            None => self.files.read(path, range).await,
        }
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.write(path, data).await,
            None => self.files.write(path, data).await,
        }
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        match self.on_host(path) {
            Some(h) => h.write_stream(path, reader).await,
            None => self.files.write_stream(path, reader).await,
        }
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.append(path, data).await,
            None => {
                // `cat >>` of two execs could interleave; one at a time.
                let _g = self.append_lock.lock().await;
                self.files.append(path, data).await
            }
        }
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        match self.on_host(path) {
            Some(h) => h.create_new(path, data).await,
            None => self.files.create_new(path, data).await,
        }
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        match self.on_host(path) {
            Some(h) => h.list(path).await,
            None => self.files.list(path).await,
        }
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        match self.on_host(path) {
            Some(h) => h.stat(path).await,
            None => self.files.stat(path).await,
        }
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.remove(path, recursive).await,
            None => self.files.remove(path, recursive).await,
        }
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        match (self.on_host(from), self.on_host(to)) {
            (Some(h), Some(_)) => h.rename(from, to).await,
            (None, None) => self.files.rename(from, to).await,
            _ => Err(BackendError::Unsupported {
                backend: BackendKind::Docker,
                what: "renaming between /workspace and the rest of the container",
            }),
        }
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        match self.on_host(path) {
            Some(h) => h.mkdir(path, parents).await,
            None => self.files.mkdir(path, parents).await,
        }
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        match self.on_host(path) {
            Some(h) => h.watch(path),
            None => Err(BackendError::Unsupported {
                backend: BackendKind::Docker,
                what: "watching files without a bind mount",
            }),
        }
    }
}

/// The real uid and gid of this process: the owner of what `/proc/self`
/// shows (no `unsafe` needed).
fn host_ids() -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/self").ok()?;
    Some((m.uid(), m.gid()))
}

/// Provisions one container per workspace; finds them again by label.
pub struct DockerProvisioner {
    opts: DockerOptions,
    profile: Option<String>,
    events: Option<EventSink>,
    notices: crate::backend::NoticeSlot,
    layout: Box<dyn Fn(&ProvisionSpec) -> PathBuf + Send + Sync>,
    client: OnceCell<Docker>,
}

impl std::fmt::Debug for DockerProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerProvisioner")
            .field("opts", &self.opts)
            .field("profile", &self.profile)
            .finish()
    }
}

impl DockerProvisioner {
    /// A provisioner with `opts` (the built-in `docker` profile passes
    /// `DockerOptions::default()`). Connects to the daemon lazily, on the
    /// first call that needs it. Host directories go to
    /// `<base_dir>/<sanitised id>`.
    pub fn new(opts: DockerOptions) -> Self {
        let base = opts.base_dir.clone().unwrap_or_else(default_base_dir);
        DockerProvisioner {
            opts,
            profile: None,
            events: None,
            notices: crate::backend::NoticeSlot::default(),
            layout: Box::new(move |spec| base.join(sanitize_segment(&spec.workspace_id))),
            client: OnceCell::new(),
        }
    }

    /// Scopes the provisioner to profile `name`: containers get the
    /// [`labels::PROFILE`] label and a name containing the profile, and
    /// find/list only see that profile's containers.
    pub fn with_profile(mut self, name: impl Into<String>) -> Self {
        self.profile = Some(name.into());
        self
    }

    /// Sends [`DockerEvent`]s to `sink` (besides the notice sink the
    /// manager sets, see [`Provisioner::set_notice_sink`]).
    pub fn with_events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// The sink for one workspace's events: the [`with_events`] sink and
    /// the notice sink (as [`BackendNotice`]s carrying `workspace_id`).
    /// `None` when neither is set.
    ///
    /// [`with_events`]: DockerProvisioner::with_events
    fn sink_for(&self, workspace_id: &str) -> Option<EventSink> {
        self.notices
            .sink_for(self.events.clone(), workspace_id, DockerEvent::notice)
    }

    /// Reports `res`'s error, if any, as a [`DockerEvent::Problem`] of
    /// `action`, and passes `res` on.
    fn reported<T>(
        sink: &Option<EventSink>,
        action: &str,
        res: BackendResult<T>,
    ) -> BackendResult<T> {
        if let Err(e) = &res {
            emit(
                sink,
                DockerEvent::Problem {
                    action: action.into(),
                    message: e.to_string(),
                },
            );
        }
        res
    }

    /// Replaces the host-directory layout of bind storage.
    pub fn with_layout(
        mut self,
        layout: impl Fn(&ProvisionSpec) -> PathBuf + Send + Sync + 'static,
    ) -> Self {
        self.layout = Box::new(layout);
        self
    }

    /// The options.
    pub fn options(&self) -> &DockerOptions {
        &self.opts
    }

    /// The daemon connection (made on first use).
    pub async fn client(&self) -> BackendResult<&Docker> {
        self.client
            .get_or_try_init(|| connect(self.opts.host.as_deref()))
            .await
    }

    /// Container name of a workspace id.
    pub fn container_name(&self, workspace_id: &str) -> String {
        match &self.profile {
            Some(p) => format!(
                "{}{}-{}",
                self.opts.name_prefix,
                sanitize_segment(p),
                sanitize_segment(workspace_id)
            ),
            None => format!(
                "{}{}",
                self.opts.name_prefix,
                sanitize_segment(workspace_id)
            ),
        }
    }

    fn volume_name(&self, workspace_id: &str) -> String {
        self.container_name(workspace_id)
    }

    fn filters(&self, workspace_id: Option<&str>) -> HashMap<String, Vec<String>> {
        let mut label = vec![match workspace_id {
            Some(id) => format!("{}={id}", labels::WORKSPACE_ID),
            None => labels::WORKSPACE_ID.to_string(),
        }];
        if let Some(p) = &self.profile {
            label.push(format!("{}={p}", labels::PROFILE));
        }
        HashMap::from([("label".to_string(), label)])
    }

    /// Makes sure the image is present, pulling it per [`PullPolicy`].
    ///
    /// Errors: a [`BackendError::Remote`] naming the image when it is
    /// missing and cannot be pulled.
    pub async fn ensure_image(&self) -> BackendResult<()> {
        self.ensure_image_to(&self.events).await
    }

    /// [`DockerProvisioner::ensure_image`], with pull progress to `sink`.
    async fn ensure_image_to(&self, sink: &Option<EventSink>) -> BackendResult<()> {
        let docker = self.client().await?;
        let image = &self.opts.image;
        let present = match docker.inspect_image(image).await {
            Ok(_) => true,
            Err(e) if is_status(&e, 404) => false,
            Err(e) => return Err(api_error(&format!("inspecting image {image}"), e)),
        };
        let pull = match self.opts.pull {
            PullPolicy::Always => true,
            PullPolicy::Missing => !present,
            PullPolicy::Never => false,
        };
        if !pull {
            return if present {
                Ok(())
            } else {
                Err(BackendError::Remote {
                    service: "docker",
                    status: Some(404),
                    code: Some("IMAGE_NOT_FOUND".into()),
                    message: format!(
                        "image `{image}` is not present locally and the profile says pull = \"never\"; \
                         load or build it (docker load, docker import, tests/build-test-image.sh)"
                    ),
                })
            };
        }
        let opts = CreateImageOptionsBuilder::new().from_image(image).build();
        let mut stream = docker.create_image(Some(opts), None, None);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => emit(
                    sink,
                    DockerEvent::PullProgress {
                        image: image.clone(),
                        status: info.status.unwrap_or_default(),
                        layer: info.id,
                        current: info.progress_detail.as_ref().and_then(|p| p.current),
                        total: info.progress_detail.as_ref().and_then(|p| p.total),
                    },
                ),
                Err(e) => {
                    return Err(BackendError::Remote {
                        service: "docker",
                        status: None,
                        code: Some("IMAGE_PULL_FAILED".into()),
                        message: format!(
                            "image `{image}` is not present locally and pulling it failed: {e}. \
                             Is a registry reachable? Otherwise load or build the image locally \
                             (docker load, docker import, tests/build-test-image.sh)"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn exec_user(&self) -> Option<String> {
        match (&self.opts.user, self.opts.storage) {
            (Some(u), _) => Some(u.clone()),
            (None, Storage::Bind) => host_ids().map(|(u, g)| format!("{u}:{g}")),
            (None, _) => None,
        }
    }

    fn exec_env(&self, user: Option<&str>) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        // A host uid has no home in the image: give it the workspace.
        if self.opts.storage == Storage::Bind
            && user.is_some_and(|u| !u.starts_with("0:") && u != "0")
        {
            env.insert("HOME".to_string(), CONTAINER_WORKDIR.to_string());
        }
        env.extend(self.opts.env.clone());
        env
    }

    async fn sandbox_from(&self, docker: &Docker, id: &str) -> BackendResult<DockerSandbox> {
        let info = docker
            .inspect_container(id, None)
            .await
            .map_err(|e| api_error(&format!("inspecting container {id}"), e))?;
        let labels_map = info
            .config
            .as_ref()
            .and_then(|c| c.labels.clone())
            .unwrap_or_default();
        let container = info.id.clone().unwrap_or_else(|| id.to_string());
        let events = match labels_map.get(labels::WORKSPACE_ID) {
            Some(ws) => self.sink_for(ws),
            None => self.events.clone(),
        };
        let name = info
            .name
            .clone()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        let bind = info
            .mounts
            .unwrap_or_default()
            .into_iter()
            .find(|m| {
                m.destination.as_deref() == Some(CONTAINER_WORKDIR)
                    && m.typ.as_ref().map(|t| t.to_string()) == Some("bind".into())
            })
            .and_then(|m| m.source);
        let host = match bind {
            Some(src) => Some(HostDir::new(vec![(
                CONTAINER_WORKDIR.to_string(),
                PathBuf::from(src),
            )])?),
            None => None,
        };
        let user = labels_map
            .get(LABEL_USER)
            .filter(|u| !u.is_empty())
            .cloned();
        let target = ExecTarget {
            docker: docker.clone(),
            container,
            workdir: CONTAINER_WORKDIR.into(),
            env: self.exec_env(user.as_deref()),
            user,
            events,
        };
        Ok(DockerSandbox {
            files: ContainerFiles {
                target: target.clone(),
            },
            target,
            name,
            host,
            append_lock: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    async fn find_summary(
        &self,
        workspace_id: &str,
    ) -> BackendResult<Option<bollard::models::ContainerSummary>> {
        let docker = self.client().await?;
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&self.filters(Some(workspace_id)))
            .build();
        let list = docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| api_error("listing containers", e))?;
        Ok(list.into_iter().next())
    }

    fn info_of(s: &bollard::models::ContainerSummary) -> SandboxInfo {
        use bollard::models::ContainerSummaryStateEnum as S;
        let labels_map: BTreeMap<String, String> =
            s.labels.clone().unwrap_or_default().into_iter().collect();
        let state = match s.state {
            Some(S::RUNNING) => SandboxState::Running,
            Some(S::PAUSED) | Some(S::EXITED) | Some(S::CREATED) => SandboxState::Suspended,
            Some(S::RESTARTING) => SandboxState::Provisioning,
            Some(S::DEAD) => SandboxState::Failed(format!(
                "container is dead ({})",
                s.status.clone().unwrap_or_default()
            )),
            Some(other) => SandboxState::Unknown(other.to_string()),
            None => SandboxState::Unknown(String::new()),
        };
        SandboxInfo {
            workspace_id: labels_map
                .get(labels::WORKSPACE_ID)
                .cloned()
                .unwrap_or_default(),
            backend_id: s.id.clone().unwrap_or_default(),
            state,
            labels: labels_map,
            created_at: s
                .created
                .map(|c| SystemTime::UNIX_EPOCH + Duration::from_secs(c.max(0) as u64)),
            last_active: None,
        }
    }

    async fn start_or_unpause(
        &self,
        docker: &Docker,
        id: &str,
        sink: &Option<EventSink>,
    ) -> BackendResult<()> {
        let info = docker
            .inspect_container(id, None)
            .await
            .map_err(|e| api_error(&format!("inspecting container {id}"), e))?;
        let st = info.state.unwrap_or_default();
        if st.paused == Some(true) {
            docker
                .unpause_container(id)
                .await
                .map_err(|e| api_error(&format!("unpausing container {id}"), e))?;
        } else if st.running != Some(true) {
            docker
                .start_container(id, None)
                .await
                .map_err(|e| api_error(&format!("starting container {id}"), e))?;
        } else {
            return Ok(());
        }
        emit(
            sink,
            DockerEvent::Started {
                container: id.to_string(),
            },
        );
        Ok(())
    }

    /// [`Provisioner::create`], its events to `sink`.
    async fn create_to(
        &self,
        spec: &ProvisionSpec,
        sink: &Option<EventSink>,
    ) -> BackendResult<Arc<dyn Sandbox>> {
        let docker = self.client().await?.clone();
        let memory = self
            .opts
            .memory
            .as_deref()
            .map(parse_memory)
            .transpose()
            .map_err(|m| BackendError::Io {
                context: "docker profile option `memory`".into(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, m),
            })?;
        self.ensure_image_to(sink).await?;
        let name = self.container_name(&spec.workspace_id);
        let user = self.exec_user();

        let mut labels_map: HashMap<String, String> = spec.labels.clone().into_iter().collect();
        labels_map.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
        if let Some(p) = &self.profile {
            labels_map.insert(labels::PROFILE.into(), p.clone());
        }
        labels_map.insert(LABEL_USER.into(), user.clone().unwrap_or_default());
        labels_map.insert(
            LABEL_STORAGE.into(),
            serde_json::to_value(self.opts.storage)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        );

        let mut mounts = Vec::new();
        match self.opts.storage {
            Storage::Bind => {
                let dir = (self.layout)(spec);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| BackendError::from_io(e, dir.display().to_string()))?;
                let dir = std::fs::canonicalize(&dir)
                    .map_err(|e| BackendError::from_io(e, dir.display().to_string()))?;
                labels_map.insert(LABEL_HOST_DIR.into(), dir.display().to_string());
                mounts.push(Mount {
                    target: Some(CONTAINER_WORKDIR.into()),
                    source: Some(dir.display().to_string()),
                    typ: Some(MountType::BIND),
                    ..Default::default()
                });
            }
            Storage::Volume => {
                let vol = self.volume_name(&spec.workspace_id);
                let mut vlabels = HashMap::new();
                vlabels.insert(labels::WORKSPACE_ID.to_string(), spec.workspace_id.clone());
                docker
                    .create_volume(VolumeCreateRequest {
                        name: Some(vol.clone()),
                        labels: Some(vlabels),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| api_error(&format!("creating volume {vol}"), e))?;
                labels_map.insert(LABEL_VOLUME.into(), vol.clone());
                mounts.push(Mount {
                    target: Some(CONTAINER_WORKDIR.into()),
                    source: Some(vol),
                    typ: Some(MountType::VOLUME),
                    ..Default::default()
                });
            }
            Storage::Ephemeral => {}
        }
        for p in self.opts.ro_binds.iter().filter(|p| p.exists()) {
            // Absolute, with links resolved: the daemon binds the host path
            // as given, and a relative one would be a volume name.
            let src = std::fs::canonicalize(p)
                .map_err(|e| BackendError::from_io(e, p.display().to_string()))?;
            mounts.push(Mount {
                target: Some(if p.is_absolute() { p } else { &src }.display().to_string()),
                source: Some(src.display().to_string()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                ..Default::default()
            });
        }

        let host_config = HostConfig {
            mounts: Some(mounts),
            network_mode: Some(self.opts.network.clone()),
            init: Some(self.opts.init),
            security_opt: Some(vec!["no-new-privileges:true".into()]),
            memory,
            nano_cpus: self.opts.cpus.map(|c| (c * 1e9) as i64),
            pids_limit: self.opts.pids_limit,
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(self.opts.image.clone()),
            cmd: Some(self.opts.command.clone()),
            working_dir: Some(CONTAINER_WORKDIR.into()),
            labels: Some(labels_map),
            host_config: Some(host_config),
            ..Default::default()
        };
        let created = docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                body,
            )
            .await
            .map_err(|e| {
                if is_status(&e, 409) {
                    BackendError::AlreadyExists(format!(
                        "container {name} (workspace {})",
                        spec.workspace_id
                    ))
                } else {
                    api_error(&format!("creating container {name}"), e)
                }
            })?;
        emit(
            sink,
            DockerEvent::Created {
                workspace_id: spec.workspace_id.clone(),
                container: created.id.clone(),
                name: name.clone(),
            },
        );
        if let Err(e) = docker.start_container(&created.id, None).await {
            // A container that cannot start is useless; do not leave it.
            let _ = docker
                .remove_container(
                    &created.id,
                    Some(RemoveContainerOptionsBuilder::new().force(true).build()),
                )
                .await;
            return Err(api_error(&format!("starting container {name}"), e));
        }
        emit(
            sink,
            DockerEvent::Started {
                container: created.id.clone(),
            },
        );
        Ok(Arc::new(self.sandbox_from(&docker, &created.id).await?))
    }

    /// [`Provisioner::suspend`], its events to `sink`.
    async fn suspend_to(&self, workspace_id: &str, sink: &Option<EventSink>) -> BackendResult<()> {
        let docker = self.client().await?;
        let Some(s) = self.find_summary(workspace_id).await? else {
            return Err(BackendError::NotFound(format!("workspace {workspace_id}")));
        };
        let id = s.id.unwrap_or_default();
        match self.opts.suspend {
            SuspendMode::Stop => docker
                .stop_container(
                    &id,
                    Some(
                        StopContainerOptionsBuilder::new()
                            .t(self.opts.stop_timeout_secs as i32)
                            .build(),
                    ),
                )
                .await
                .or_else(|e| if is_status(&e, 304) { Ok(()) } else { Err(e) })
                .map_err(|e| api_error(&format!("stopping container {id}"), e))?,
            SuspendMode::Pause => docker
                .pause_container(&id)
                .await
                .map_err(|e| api_error(&format!("pausing container {id}"), e))?,
        }
        emit(sink, DockerEvent::Stopped { container: id });
        Ok(())
    }

    /// [`Provisioner::destroy`], its events to `sink`.
    async fn destroy_to(&self, workspace_id: &str, sink: &Option<EventSink>) -> BackendResult<()> {
        let docker = self.client().await?;
        let Some(s) = self.find_summary(workspace_id).await? else {
            return Ok(());
        };
        let id = s.id.clone().unwrap_or_default();
        let lbl = s.labels.clone().unwrap_or_default();
        docker
            .remove_container(
                &id,
                Some(
                    RemoveContainerOptionsBuilder::new()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await
            .or_else(|e| if is_status(&e, 404) { Ok(()) } else { Err(e) })
            .map_err(|e| api_error(&format!("removing container {id}"), e))?;
        emit(sink, DockerEvent::Removed { container: id });
        if let Some(vol) = lbl.get(LABEL_VOLUME)
            && self.opts.remove_volume
        {
            docker
                .remove_volume(
                    vol,
                    Some(RemoveVolumeOptionsBuilder::new().force(true).build()),
                )
                .await
                .or_else(|e| if is_status(&e, 404) { Ok(()) } else { Err(e) })
                .map_err(|e| api_error(&format!("removing volume {vol}"), e))?;
        }
        if let Some(dir) = lbl.get(LABEL_HOST_DIR) {
            match tokio::fs::remove_dir_all(dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BackendError::from_io(e, dir.clone())),
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Provisioner for DockerProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: false,
            persistent: true,
        }
    }

    /// Every [`DockerEvent`] also goes to `sink` as a [`BackendNotice`]
    /// (source `docker`; see [`DockerEvent::level`] for the levels).
    fn set_notice_sink(&self, sink: NoticeSink) {
        self.notices.set(sink);
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let sink = self.sink_for(&spec.workspace_id);
        Self::reported(&sink, "create", self.create_to(spec, &sink).await)
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        Ok(self
            .find_summary(workspace_id)
            .await?
            .map(|s| Self::info_of(&s)))
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let sink = self.sink_for(&info.workspace_id);
        let res = async {
            let docker = self.client().await?.clone();
            if info.state != SandboxState::Running {
                self.start_or_unpause(&docker, &info.backend_id, &sink)
                    .await?;
            }
            Ok(Arc::new(self.sandbox_from(&docker, &info.backend_id).await?) as Arc<dyn Sandbox>)
        }
        .await;
        Self::reported(&sink, "attach", res)
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let sink = self.sink_for(workspace_id);
        Self::reported(&sink, "suspend", self.suspend_to(workspace_id, &sink).await)
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let sink = self.sink_for(workspace_id);
        let res = async {
            let docker = self.client().await?;
            let Some(s) = self.find_summary(workspace_id).await? else {
                return Err(BackendError::NotFound(format!("workspace {workspace_id}")));
            };
            self.start_or_unpause(docker, &s.id.unwrap_or_default(), &sink)
                .await
        }
        .await;
        Self::reported(&sink, "resume", res)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let sink = self.sink_for(workspace_id);
        Self::reported(&sink, "destroy", self.destroy_to(workspace_id, &sink).await)
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let docker = self.client().await?;
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&self.filters(None))
            .build();
        let list = docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| api_error("listing containers", e))?;
        let mut out: Vec<SandboxInfo> = list.iter().map(Self::info_of).collect();
        out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_deserialize_strictly_with_defaults() {
        let o: DockerOptions = toml::from_str("").unwrap();
        assert_eq!(o, DockerOptions::default());
        assert_eq!(o.image, DEFAULT_IMAGE);
        assert_eq!(o.network, "none");
        let o: DockerOptions = toml::from_str(
            "image = \"busybox\"\nstorage = \"volume\"\nsuspend = \"pause\"\nmemory = \"512m\"\ncpus = 1.5\npull = \"never\"",
        )
        .unwrap();
        assert_eq!(o.storage, Storage::Volume);
        assert_eq!(o.suspend, SuspendMode::Pause);
        assert_eq!(o.pull, PullPolicy::Never);
        let e = toml::from_str::<DockerOptions>("imgae = \"x\"").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let e = toml::from_str::<DockerOptions>("storage = \"nfs\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
        let j: DockerOptions = serde_json::from_str(r#"{"network": "host"}"#).unwrap();
        assert_eq!(j.network, "host");
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("512m").unwrap(), 512 << 20);
        assert_eq!(parse_memory("2G").unwrap(), 2 << 30);
        assert_eq!(parse_memory("1000").unwrap(), 1000);
        assert_eq!(parse_memory("1.5k").unwrap(), 1536);
        assert!(parse_memory("lots").is_err());
        assert!(parse_memory("-1m").is_err());
    }

    #[test]
    fn events_become_notices_with_levels_and_one_line_messages() {
        let cid = "0123456789abcdef0123";
        let pull = |current| DockerEvent::PullProgress {
            image: "debian:bookworm-slim".into(),
            status: "Downloading".into(),
            layer: Some("1a2b".into()),
            current,
            total: Some(100),
        };
        let n = pull(Some(40)).notice("ws-1");
        assert_eq!(
            (n.workspace_id.as_str(), n.source.as_str(), n.level),
            ("ws-1", "docker", NoticeLevel::Debug)
        );
        assert_eq!(
            n.message,
            "pulling debian:bookworm-slim: 1a2b: Downloading (40/100 bytes)"
        );
        assert_eq!(pull(None).level(), NoticeLevel::Info);
        let created = DockerEvent::Created {
            workspace_id: "ws-1".into(),
            container: cid.into(),
            name: "wsbench-ws-1".into(),
        };
        assert_eq!(created.level(), NoticeLevel::Info);
        assert_eq!(
            created.message(),
            "created container wsbench-ws-1 (0123456789ab)"
        );
        for (ev, text) in [
            (
                DockerEvent::Stopped {
                    container: cid.into(),
                },
                "stopped container 0123456789ab",
            ),
            (
                DockerEvent::Removed {
                    container: "short".into(),
                },
                "removed container short",
            ),
        ] {
            assert_eq!(
                (ev.level(), ev.message().as_str()),
                (NoticeLevel::Info, text)
            );
        }
        let exec = DockerEvent::ExecStarted {
            container: cid.into(),
            exec_id: "e".into(),
            argv: vec!["sh".into(), "-c".into(), "x".repeat(500)],
        };
        assert_eq!(exec.level(), NoticeLevel::Debug);
        assert!(exec.message().ends_with('…') && exec.message().chars().count() < 200);
        let problem = DockerEvent::Problem {
            action: "create".into(),
            message: "image `x` is not present locally".into(),
        };
        assert_eq!(problem.level(), NoticeLevel::Error);
        assert_eq!(
            problem.message(),
            "create failed: image `x` is not present locally"
        );
    }

    #[test]
    fn names_are_docker_safe_and_distinct() {
        let p = DockerProvisioner::new(DockerOptions::default());
        assert_eq!(p.container_name("abc"), "wsbench-abc");
        assert_ne!(p.container_name("a/b"), p.container_name("a_b"));
        let q = DockerProvisioner::new(DockerOptions::default()).with_profile("docker");
        assert_eq!(q.container_name("abc"), "wsbench-docker-abc");
        let f = q.filters(Some("abc"));
        assert_eq!(
            f["label"],
            vec![
                "wsbench.workspace.id=abc".to_string(),
                "wsbench.profile=docker".to_string()
            ]
        );
    }
}
