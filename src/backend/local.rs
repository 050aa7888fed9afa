//! The local backend: commands run on the host as the current user, files
//! live in a host directory. No isolation (like the reference's
//! `LocalWorkspace`, contract §7.1), but timeouts kill the whole process
//! tree, writes are atomic and appends are in place.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::child::{ChildStatus, exit_code_of, pump};
use super::host::fs::{finish_atomic, resolve_link_target};
pub use super::host::sanitize_segment;
use super::host::{append_host, atomic_write_host, stat_host, watch_host};
use super::process_tree;
use super::shell::marker::{MARKER_VAR, new_marker};
use super::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, ProcessControl, ProvisionSpec, Provisioner,
    ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, SpawnRequest, StreamKind, Watch,
    labels, path as bpath,
};

/// Grace between SIGTERM and SIGKILL when a command times out.
pub const KILL_GRACE: Duration = Duration::from_millis(500);

/// How long output is still collected after the command exited, when a
/// background child keeps the pipes open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(300);

/// A host directory used as a sandbox.
#[derive(Debug, Clone)]
pub struct LocalSandbox {
    root: PathBuf,
    workdir: String,
    env: BTreeMap<String, String>,
}

impl LocalSandbox {
    /// Opens `root` (made absolute, created if missing).
    ///
    /// Errors: the directory cannot be created or is not a directory.
    pub fn open(root: impl AsRef<Path>) -> BackendResult<Self> {
        let root = root.as_ref();
        std::fs::create_dir_all(root)
            .map_err(|e| BackendError::from_io(e, root.display().to_string()))?;
        let root = std::fs::canonicalize(root)
            .map_err(|e| BackendError::from_io(e, root.display().to_string()))?;
        if !root.is_dir() {
            return Err(BackendError::NotADirectory(root.display().to_string()));
        }
        let workdir = root.to_string_lossy().into_owned();
        Ok(LocalSandbox {
            root,
            workdir,
            env: BTreeMap::new(),
        })
    }

    /// Adds environment variables given to every exec and spawn.
    pub fn with_env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = env;
        self
    }

    /// Host path of a backend path (relative paths resolve against the
    /// workdir; `..` is resolved lexically).
    fn resolve(&self, path: &str) -> PathBuf {
        PathBuf::from(bpath::join(&self.workdir, path))
    }

    fn command(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> BackendResult<Command> {
        let program = argv.first().ok_or_else(|| BackendError::Spawn {
            program: String::new(),
            reason: "empty argv".into(),
        })?;
        let mut cmd = Command::new(program);
        cmd.args(&argv[1..]);
        cmd.current_dir(
            cwd.map(|c| self.resolve(c))
                .unwrap_or_else(|| self.root.clone()),
        );
        cmd.envs(&self.env);
        cmd.envs(env);
        // Its own process group, so the group can be killed; setting it
        // (unlike a pre_exec setsid) keeps std's fast posix_spawn path.
        // Descendants that leave the group are found by their marker.
        cmd.process_group(0);
        cmd.kill_on_drop(false);
        Ok(cmd)
    }
}

fn spawn_error(program: &str, err: std::io::Error) -> BackendError {
    BackendError::Spawn {
        program: program.to_string(),
        reason: err.to_string(),
    }
}

async fn kill_tree_async(pid: i32, marker: String) {
    let _ = tokio::task::spawn_blocking(move || process_tree::kill_tree(pid, &marker, KILL_GRACE))
        .await;
}

#[async_trait]
impl Sandbox for LocalSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exec_stdin: true,
            byte_exact_output: true,
            kill_on_timeout: true,
            processes: true,
            read_range: true,
            atomic_write: true,
            append: true,
            watch: true,
        }
    }

    fn workdir(&self) -> &str {
        &self.workdir
    }

    fn host_root(&self) -> Option<&Path> {
        Some(&self.root)
    }

    fn host_path(&self, path: &str) -> Option<PathBuf> {
        Some(self.resolve(path))
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        let marker = new_marker();
        let mut env = req.env.clone();
        env.insert(MARKER_VAR.into(), marker.clone());
        let mut cmd = self.command(&req.argv, req.cwd.as_deref(), &env)?;
        cmd.stdin(if req.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|e| spawn_error(&req.argv[0], e))?;
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        if let (Some(data), Some(mut stdin)) = (req.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                let _ = stdin.write_all(&data).await;
                let _ = stdin.shutdown().await;
            });
        }
        let out = tokio::spawn(pump(
            child.stdout.take().expect("piped"),
            StreamKind::Stdout,
            sink.clone(),
        ));
        let err = tokio::spawn(pump(
            child.stderr.take().expect("piped"),
            StreamKind::Stderr,
            sink,
        ));

        let timeout = async {
            match req.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let cancel = async {
            match &req.cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let mut timed_out = false;
        let mut cancelled = false;
        let status = tokio::select! {
            s = child.wait() => s,
            _ = timeout => { timed_out = true; kill_tree_async(pid, marker.clone()).await; child.wait().await }
            _ = cancel => { cancelled = true; kill_tree_async(pid, marker.clone()).await; child.wait().await }
        }
        .map_err(|e| BackendError::Io {
            context: format!("waiting for `{}`", req.argv[0]),
            source: e,
        })?;
        // Background children may hold the pipes open: collect what comes
        // soon, then stop listening rather than hang.
        let drain = async {
            let _ = out.await;
            let _ = err.await;
        };
        let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, drain).await;
        let (exit_code, signal) = exit_code_of(status);
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        let marker = new_marker();
        let mut env = req.env.clone();
        env.insert(MARKER_VAR.into(), marker.clone());
        let mut cmd = self.command(&req.argv, req.cwd.as_deref(), &env)?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| spawn_error(&req.argv[0], e))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let control = Arc::new(LocalProcess::new(child, pid, marker));
        Ok(Process {
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            control,
        })
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = self.resolve(path);
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || -> BackendResult<Vec<u8>> {
            let meta = std::fs::metadata(&p).map_err(|e| BackendError::from_io(e, &path_s))?;
            if meta.is_dir() {
                return Err(BackendError::IsADirectory(path_s));
            }
            match range {
                None => std::fs::read(&p).map_err(|e| BackendError::from_io(e, &path_s)),
                Some(r) => {
                    let mut f =
                        std::fs::File::open(&p).map_err(|e| BackendError::from_io(e, &path_s))?;
                    f.seek(SeekFrom::Start(r.offset))
                        .map_err(|e| BackendError::from_io(e, &path_s))?;
                    let mut buf = Vec::with_capacity(r.len.min(meta.len()) as usize);
                    std::io::Read::read_to_end(&mut std::io::Read::take(f, r.len), &mut buf)
                        .map_err(|e| BackendError::from_io(e, &path_s))?;
                    Ok(buf)
                }
            }
        })
        .await
        .expect("read task")
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = self.resolve(path);
        let data = data.to_vec();
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || {
            if p.is_dir() {
                return Err(BackendError::IsADirectory(path_s));
            }
            atomic_write_host(&p, &data).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
        .expect("write task")
    }

    async fn write_stream(
        &self,
        path: &str,
        mut reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let target = resolve_link_target(&self.resolve(path));
        let dir = target.parent().unwrap_or(Path::new("/")).to_path_buf();
        let io = |e| BackendError::from_io(e, path);
        tokio::fs::create_dir_all(&dir).await.map_err(io)?;
        let tmp = tempfile::Builder::new()
            .prefix(".wsbench-tmp-")
            .tempfile_in(&dir)
            .map_err(io)?;
        // A large buffer: each flush of tokio's File is one blocking-pool trip.
        let mut file = tokio::io::BufWriter::with_capacity(
            1 << 20,
            tokio::fs::File::from_std(tmp.reopen().map_err(io)?),
        );
        let n = tokio::io::copy(&mut reader, &mut file).await.map_err(io)?;
        file.flush().await.map_err(io)?;
        drop(file);
        tokio::task::spawn_blocking(move || finish_atomic(tmp, &target))
            .await
            .expect("persist task")
            .map_err(io)?;
        Ok(n)
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = self.resolve(path);
        let data = data.to_vec();
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || {
            append_host(&p, &data).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
        .expect("append task")
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        let p = self.resolve(path);
        let data = data.to_vec();
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir).map_err(|e| BackendError::from_io(e, &path_s))?;
            }
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
            {
                Ok(mut f) => {
                    std::io::Write::write_all(&mut f, &data)
                        .map_err(|e| BackendError::from_io(e, &path_s))?;
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(BackendError::from_io(e, path_s)),
            }
        })
        .await
        .expect("create task")
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = self.resolve(path);
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || {
            let rd = std::fs::read_dir(&p).map_err(|e| BackendError::from_io(e, &path_s))?;
            let mut out: Vec<FileStat> = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| stat_host(&e.path()).ok())
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
        .expect("list task")
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        let p = self.resolve(path);
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || {
            stat_host(&p).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
        .expect("stat task")
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        let p = self.resolve(path);
        let path_s = path.to_string();
        tokio::task::spawn_blocking(move || {
            let meta =
                std::fs::symlink_metadata(&p).map_err(|e| BackendError::from_io(e, &path_s))?;
            let res = if meta.is_dir() {
                if recursive {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_dir(&p)
                }
            } else {
                std::fs::remove_file(&p)
            };
            res.map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
        .expect("remove task")
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        let (a, b) = (self.resolve(from), self.resolve(to));
        if let Some(dir) = b.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| BackendError::from_io(e, to))?;
        }
        tokio::fs::rename(&a, &b)
            .await
            .map_err(|e| BackendError::from_io(e, from))
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        let p = self.resolve(path);
        let res = if parents {
            tokio::fs::create_dir_all(&p).await
        } else {
            tokio::fs::create_dir(&p).await
        };
        res.map_err(|e| BackendError::from_io(e, path))
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        watch_host(&self.resolve(path), None)
    }
}

/// Control of a local long-lived process.
struct LocalProcess {
    pid: i32,
    marker: String,
    child: ChildStatus,
}

impl LocalProcess {
    fn new(child: Child, pid: i32, marker: String) -> Self {
        LocalProcess {
            pid,
            marker,
            child: ChildStatus::new(child),
        }
    }
}

#[async_trait]
impl ProcessControl for LocalProcess {
    fn id(&self) -> String {
        format!("pid {}", self.pid)
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        self.child.wait(&self.id()).await
    }

    fn try_status(&self) -> Option<Option<i32>> {
        self.child.try_status()
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            // The leader is gone; still sweep anything it left behind.
            let (pid, marker) = (self.pid, self.marker.clone());
            let _ = tokio::task::spawn_blocking(move || {
                process_tree::kill_tree(pid, &marker, Duration::ZERO)
            })
            .await;
            return Ok(());
        }
        kill_tree_async(self.pid, self.marker.clone()).await;
        let _ = self.wait().await;
        Ok(())
    }
}

impl Drop for LocalProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let (pid, marker) = (self.pid, self.marker.clone());
            std::thread::spawn(move || {
                process_tree::kill_tree(pid, &marker, Duration::from_millis(200))
            });
        }
    }
}

/// Record kept for each local workspace the provisioner made, in
/// `<base>/.wsbench/workspaces/<id>.json`.
///
/// `last_used_at` and `closed_at` (seconds since the Unix epoch) carry
/// what one process knows to the next: when a manager last attached the
/// workspace (its idle clock, with the directory's mtime) and whether it
/// was closed since. Records written before they existed read as never
/// closed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct LocalRecord {
    workspace_id: String,
    dir: PathBuf,
    labels: BTreeMap<String, String>,
    created_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_used_at: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    closed_at: Option<f64>,
}

fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn from_epoch_secs(s: f64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs_f64(s.max(0.0))
}

/// Provisions local workspaces as directories under a base dir.
///
/// The directory for a spec comes from `layout` (default
/// `<base>/<sanitised id>`); the manager passes its own layout. Each
/// workspace gets a small record under `<base>/.wsbench/workspaces/` so a
/// later process can list and reattach it with its labels.
pub struct LocalProvisioner {
    base: PathBuf,
    layout: Box<dyn Fn(&ProvisionSpec) -> PathBuf + Send + Sync>,
}

impl std::fmt::Debug for LocalProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvisioner")
            .field("base", &self.base)
            .finish()
    }
}

impl LocalProvisioner {
    /// Provisioner rooted at `base` with the default one-dir-per-id layout.
    pub fn new(base: impl Into<PathBuf>) -> Self {
        let base: PathBuf = base.into();
        let b = base.clone();
        LocalProvisioner {
            base,
            layout: Box::new(move |spec| b.join(sanitize_segment(&spec.workspace_id))),
        }
    }

    /// Replaces the directory layout.
    pub fn with_layout(
        mut self,
        layout: impl Fn(&ProvisionSpec) -> PathBuf + Send + Sync + 'static,
    ) -> Self {
        self.layout = Box::new(layout);
        self
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.base
            .join(".wsbench")
            .join("workspaces")
            .join(format!("{}.json", sanitize_segment(id)))
    }

    fn read_record(&self, id: &str) -> Option<LocalRecord> {
        let text = std::fs::read(self.record_path(id)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn write_record(&self, rec: &LocalRecord) -> BackendResult<()> {
        let path = self.record_path(&rec.workspace_id);
        let body = serde_json::to_vec_pretty(rec).expect("record json");
        atomic_write_host(&path, &body)
            .map_err(|e| BackendError::from_io(e, path.display().to_string()))
    }

    /// Rewrites the record of `id` through `f`; no record, nothing to do.
    fn update_record(&self, id: &str, f: impl FnOnce(&mut LocalRecord)) -> BackendResult<()> {
        match self.read_record(id) {
            Some(mut rec) => {
                f(&mut rec);
                self.write_record(&rec)
            }
            None => Ok(()),
        }
    }

    fn info(rec: &LocalRecord) -> SandboxInfo {
        let created = from_epoch_secs(rec.created_at);
        // Whichever is later: the last attach a manager recorded, or the
        // last change to the workspace's top level.
        let mtime = std::fs::metadata(&rec.dir).and_then(|m| m.modified()).ok();
        let last_active = mtime.max(rec.last_used_at.map(from_epoch_secs));
        SandboxInfo {
            workspace_id: rec.workspace_id.clone(),
            backend_id: rec.dir.display().to_string(),
            state: if !rec.dir.is_dir() {
                SandboxState::Failed(format!("directory {} is missing", rec.dir.display()))
            } else if rec.closed_at.is_some() {
                SandboxState::Suspended
            } else {
                SandboxState::Running
            },
            labels: rec.labels.clone(),
            created_at: Some(created),
            last_active,
        }
    }
}

#[async_trait]
impl Provisioner for LocalProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        // "Suspending" a directory frees nothing; it records the close so
        // every process lists the workspace as closed until it is used.
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: false,
            persistent: true,
        }
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let dir = (self.layout)(spec);
        let sandbox = LocalSandbox::open(&dir)?;
        let mut labels = spec.labels.clone();
        labels.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
        let now = epoch_secs(SystemTime::now());
        let rec = LocalRecord {
            workspace_id: spec.workspace_id.clone(),
            dir: sandbox.root.clone(),
            labels,
            created_at: now,
            last_used_at: Some(now),
            closed_at: None,
        };
        self.write_record(&rec)?;
        Ok(Arc::new(sandbox))
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        Ok(self.read_record(workspace_id).map(|r| Self::info(&r)))
    }

    /// Opens the directory and records the use: the workspace is open
    /// again (no longer `closed`) and its idle clock restarts.
    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let sandbox = LocalSandbox::open(&info.backend_id)?;
        let now = epoch_secs(SystemTime::now());
        self.update_record(&info.workspace_id, |r| {
            r.closed_at = None;
            r.last_used_at = Some(now);
        })?;
        Ok(Arc::new(sandbox))
    }

    /// Marks the workspace closed (listed as [`SandboxState::Suspended`])
    /// until the next attach; files and processes are left alone.
    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let now = epoch_secs(SystemTime::now());
        self.update_record(workspace_id, |r| r.closed_at = Some(now))
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        self.update_record(workspace_id, |r| r.closed_at = None)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        if let Some(rec) = self.read_record(workspace_id) {
            match tokio::fs::remove_dir_all(&rec.dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BackendError::from_io(e, rec.dir.display().to_string())),
            }
        }
        match tokio::fs::remove_file(self.record_path(workspace_id)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(BackendError::from_io(e, workspace_id)),
        }
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let dir = self.base.join(".wsbench").join("workspaces");
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<SandboxInfo> = rd
            .flatten()
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<LocalRecord>(&b).ok())
            .map(|r| Self::info(&r))
            .collect();
        out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use tokio::sync::mpsc;

    use super::*;
    use bytes::Bytes;

    fn sandbox() -> (tempfile::TempDir, LocalSandbox) {
        let dir = tempfile::tempdir().unwrap();
        let sb = LocalSandbox::open(dir.path()).unwrap();
        (dir, sb)
    }

    #[tokio::test]
    async fn exec_streams_and_reports_exit() {
        let (_d, sb) = sandbox();
        let (tx, mut rx) = mpsc::channel(16);
        let out = sb
            .exec(
                ExecRequest::shell("echo out; echo err >&2; exit 3"),
                Some(tx),
            )
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(3));
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => stdout.extend_from_slice(&c.data),
                StreamKind::Stderr => stderr.extend_from_slice(&c.data),
            }
        }
        assert_eq!(stdout, b"out\n");
        assert_eq!(stderr, b"err\n");
    }

    #[tokio::test]
    async fn missing_program_is_a_spawn_error() {
        let (_d, sb) = sandbox();
        let err = sb
            .exec(ExecRequest::new(["definitely-missing-cmd-xyz"]), None)
            .await
            .unwrap_err();
        assert!(matches!(err, BackendError::Spawn { .. }), "{err}");
    }

    #[tokio::test]
    async fn stdin_is_fed_then_closed() {
        let (_d, sb) = sandbox();
        let (tx, mut rx) = mpsc::channel(16);
        let mut req = ExecRequest::new(["cat"]);
        req.stdin = Some(Bytes::from_static(b"hello"));
        let out = sb.exec(req, Some(tx)).await.unwrap();
        assert_eq!(out.exit_code, Some(0));
        let c = rx.recv().await.unwrap();
        assert_eq!(&c.data[..], b"hello");
        // Without stdin, `cat` sees EOF at once instead of hanging.
        let out = sb.exec(ExecRequest::new(["cat"]), None).await.unwrap();
        assert_eq!(out.exit_code, Some(0));
    }

    #[tokio::test]
    async fn files_roundtrip_and_ranges() {
        let (_d, sb) = sandbox();
        let p = format!("{}/a/b/c.txt", sb.workdir());
        sb.write(&p, b"0123456789").await.unwrap();
        assert_eq!(sb.read(&p, None).await.unwrap(), b"0123456789");
        let r = sb
            .read(&p, Some(ByteRange { offset: 3, len: 4 }))
            .await
            .unwrap();
        assert_eq!(r, b"3456");
        sb.append(&p, b"ab").await.unwrap();
        assert_eq!(sb.read(&p, None).await.unwrap(), b"0123456789ab");
        assert!(!sb.create_new(&p, b"x").await.unwrap());
        let q = format!("{}/a/new.txt", sb.workdir());
        assert!(sb.create_new(&q, b"x").await.unwrap());
        let names: Vec<_> = sb
            .list(&format!("{}/a", sb.workdir()))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["b", "new.txt"]);
        sb.rename(&q, &format!("{}/a/renamed.txt", sb.workdir()))
            .await
            .unwrap();
        assert!(sb.stat(&q).await.unwrap_err().is_not_found());
        sb.remove(&format!("{}/a", sb.workdir()), true)
            .await
            .unwrap();
        assert!(sb.stat(&p).await.unwrap_err().is_not_found());
    }

    #[tokio::test]
    async fn write_keeps_mode_and_follows_symlink() {
        let (_d, sb) = sandbox();
        let target = sb.root.join("real.sh");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&target, sb.root.join("link.sh")).unwrap();
        sb.write(&format!("{}/link.sh", sb.workdir()), b"new")
            .await
            .unwrap();
        assert!(
            std::fs::symlink_metadata(sb.root.join("link.sh"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o755
        );
    }

    #[test]
    fn sanitizes_ids_without_collisions() {
        assert_eq!(sanitize_segment("abc-1"), "abc-1");
        let a = sanitize_segment("a/b");
        let b = sanitize_segment("a_b");
        assert_ne!(a, b);
        assert!(!sanitize_segment("..").starts_with('.'));
    }

    #[tokio::test]
    async fn provisioner_creates_lists_and_reattaches() {
        let base = tempfile::tempdir().unwrap();
        let prov = LocalProvisioner::new(base.path());
        let spec = ProvisionSpec {
            workspace_id: "ws/1".into(),
            labels: BTreeMap::new(),
        };
        let sb = prov.create(&spec).await.unwrap();
        sb.write(&format!("{}/f", sb.workdir()), b"x")
            .await
            .unwrap();
        let again = LocalProvisioner::new(base.path());
        let list = again.list().await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].labels[labels::WORKSPACE_ID], "ws/1");
        let sb2 = again.provision(&spec).await.unwrap();
        assert_eq!(
            sb2.read(&format!("{}/f", sb2.workdir()), None)
                .await
                .unwrap(),
            b"x"
        );
        again.destroy("ws/1").await.unwrap();
        assert!(again.list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn close_is_recorded_until_the_next_attach_and_old_records_still_read() {
        let base = tempfile::tempdir().unwrap();
        let prov = LocalProvisioner::new(base.path());
        let spec = ProvisionSpec {
            workspace_id: "w".into(),
            labels: BTreeMap::new(),
        };
        prov.create(&spec).await.unwrap();
        let info = prov.find("w").await.unwrap().unwrap();
        assert_eq!(info.state, SandboxState::Running);
        assert!(info.last_active.is_some());
        prov.suspend("w").await.unwrap();
        let info = prov.find("w").await.unwrap().unwrap();
        assert_eq!(info.state, SandboxState::Suspended);
        prov.attach(&info).await.unwrap();
        assert_eq!(
            prov.find("w").await.unwrap().unwrap().state,
            SandboxState::Running
        );
        prov.suspend("no-such").await.unwrap();
        // A record from before `closed_at` / `last_used_at` existed.
        let old = serde_json::json!({
            "workspace_id": "old", "dir": base.path().join("old"),
            "labels": {}, "created_at": 1.0,
        });
        std::fs::create_dir(base.path().join("old")).unwrap();
        std::fs::write(prov.record_path("old"), old.to_string()).unwrap();
        let info = prov.find("old").await.unwrap().unwrap();
        assert_eq!(info.state, SandboxState::Running);
    }
}
