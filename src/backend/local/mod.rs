//! The local backend: commands run on the host as the current user, files
//! live in a host directory. No isolation (like the reference's
//! `LocalWorkspace`, docs/contract.md §7.1), but timeouts kill the whole process
//! tree, writes are atomic and appends are in place.
//!
//! The provisioner (directories and their records) is in `provision`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::AsyncRead;
use tokio::process::Command;

use super::append_check::{CheckedAppend, TrackedRecord};
use super::child::{exit_code_of, start_io, wait_or_kill};
use super::host::checked_append::append_checked_host;
use super::host::child_start;
use super::host::fs::{finish_atomic, resolve_link_target};
use super::host::tree_process::TreeProcess;
use super::host::{
    append_host, atomic_write_host, blocking, create_new_host, join_io_error, read_host,
    remove_host, stat_host, stream_to_temp, watch_host, with_bytes,
};
use super::shell::marker::{MARKER_VAR, new_marker};
use super::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, PtyRequest, PtySession, Sandbox, SpawnRequest, Watch,
    path as bpath,
};

mod provision;
mod pty;
mod reaper;
mod subreaper;

pub use provision::{LocalProvisioner, plain_segment};

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

    /// [`BackendError::gone`] once the directory was removed (issue 15):
    /// checked first by every [`Sandbox`] method.
    fn present(&self) -> BackendResult<()> {
        super::host::root_present(&self.root)
    }

    /// Host path of a backend path (relative paths resolve against the
    /// workdir; `..` is resolved lexically).
    fn resolve(&self, path: &str) -> PathBuf {
        PathBuf::from(bpath::join(&self.workdir, path))
    }

    /// The command with its directory and environment, before it gets a
    /// session ([`command`](Self::command), or the PTY path's own).
    fn base_command(
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
        cmd.kill_on_drop(false);
        Ok(cmd)
    }

    fn command(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> BackendResult<Command> {
        let mut cmd = self.base_command(argv, cwd, env)?;
        // Its own session (and so its own process group, which can be
        // killed; see `child_start` for why a group is not enough), with
        // no signal ignored because wsbench's parent ignored it.
        // Descendants that leave the group are found by their marker;
        // orphans of a double fork are adopted by the main process.
        child_start::own_session(&mut cmd);
        child_start::default_signals(&mut cmd);
        subreaper::adopt_orphans(&mut cmd);
        Ok(cmd)
    }
}

fn spawn_error(program: &str, err: std::io::Error) -> BackendError {
    BackendError::Spawn {
        program: program.to_string(),
        reason: err.to_string(),
    }
}

#[async_trait]
impl Sandbox for LocalSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
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
        self.present()?;
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
        // Kills the tree if wsbench dies before the command ends; disarmed
        // when this function returns or is dropped.
        let _reaper = reaper::Reaper::watch(pid, &marker);
        let stdout = child.stdout.take().expect("piped");
        let (out, err) = start_io(&mut child, stdout, req.stdin.clone(), sink);
        let deadline = req.timeout.map(|t| Instant::now() + t);
        let ended = wait_or_kill(
            &mut child,
            deadline,
            req.cancel.as_ref(),
            (pid, &marker),
            KILL_GRACE,
        )
        .await
        .map_err(|e| BackendError::Io {
            context: format!("waiting for `{}`", req.argv[0]),
            source: e,
        })?;
        // Background children may hold the pipes open: collect what comes
        // soon, then stop listening rather than hang.
        super::child::drain_then_stop(out, err, DRAIN_AFTER_EXIT).await;
        let (exit_code, signal) = exit_code_of(ended.status);
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out: ended.timed_out,
            cancelled: ended.cancelled,
            duration: started.elapsed(),
        })
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.present()?;
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
        let reaper = reaper::Reaper::watch(pid, &marker);
        // The reaper's watch goes with a dropped process's kill and is
        // withdrawn only once the tree is gone: `kill_tree` stops the tree
        // before it kills it, and a wsbench that exits in between would
        // otherwise leave it stopped for good; with the watch still
        // announced, the reaper's watcher finishes the kill.
        let control = Arc::new(TreeProcess::new(
            "pid", child, pid, marker, KILL_GRACE, true, reaper,
        ));
        Ok(Process {
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            control,
        })
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        self.present()?;
        let p = self.resolve(path);
        let path_s = path.to_string();
        blocking("read", move || read_host(&p, path_s, range)).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        self.present()?;
        let p = self.resolve(path);
        let path_s = path.to_string();
        // Written from the caller's buffer (no copy on a multi-thread runtime).
        with_bytes(data, move |data| {
            if p.is_dir() {
                return Err(BackendError::IsADirectory(path_s));
            }
            atomic_write_host(&p, data).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
        .unwrap_or_else(|e| {
            Err(BackendError::Io {
                context: "write task".into(),
                source: e,
            })
        })
    }

    async fn write_stream(
        &self,
        path: &str,
        mut reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        self.present()?;
        let target = resolve_link_target(&self.resolve(path));
        let dir = target.parent().unwrap_or(Path::new("/")).to_path_buf();
        let io = |e| BackendError::from_io(e, path);
        let (tmp, n) = stream_to_temp(&dir, &mut *reader).await.map_err(io)?;
        tokio::task::spawn_blocking(move || finish_atomic(tmp, &target))
            .await
            .unwrap_or_else(|e| Err(join_io_error(e, "write")))
            .map_err(io)?;
        Ok(n)
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        self.present()?;
        let p = self.resolve(path);
        let data = data.to_vec();
        let path_s = path.to_string();
        blocking("append", move || {
            append_host(&p, &data).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
    }

    async fn append_checked(
        &self,
        path: &str,
        earlier: &[TrackedRecord],
        data: &[u8],
    ) -> BackendResult<Option<CheckedAppend>> {
        self.present()?;
        let p = self.resolve(path);
        let earlier = earlier.to_vec();
        let data = data.to_vec();
        let path_s = path.to_string();
        blocking("append", move || {
            append_checked_host(&p, earlier, &data)
                .map(Some)
                .map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        self.present()?;
        let p = self.resolve(path);
        let data = data.to_vec();
        let path_s = path.to_string();
        blocking("create", move || create_new_host(&p, &data, &path_s)).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.present()?;
        let p = self.resolve(path);
        let path_s = path.to_string();
        blocking("list", move || {
            let rd = std::fs::read_dir(&p).map_err(|e| BackendError::from_io(e, &path_s))?;
            let mut out: Vec<FileStat> = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| stat_host(&e.path()).ok())
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        self.present()?;
        let p = self.resolve(path);
        let path_s = path.to_string();
        blocking("stat", move || {
            stat_host(&p).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        self.present()?;
        let p = self.resolve(path);
        let path_s = path.to_string();
        blocking("remove", move || remove_host(&p, recursive, &path_s)).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        self.present()?;
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
        self.present()?;
        let p = self.resolve(path);
        let res = if parents {
            tokio::fs::create_dir_all(&p).await
        } else {
            tokio::fs::create_dir(&p).await
        };
        res.map_err(|e| BackendError::from_io(e, path))
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        self.present()?;
        watch_host(&self.resolve(path), None)
    }

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        pty::start(self, req)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use tokio::sync::mpsc;

    use super::*;
    use crate::backend::StreamKind;
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
}
