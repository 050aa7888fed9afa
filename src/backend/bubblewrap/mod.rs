//! The bubblewrap backend: one `bwrap` process per command, on a host
//! directory bound at `/workspace` (docs/contract.md §7.2, without its Python
//! gateway bootstrap).
//!
//! Differences from the reference, on purpose (§11 points 17, 24, 31):
//!
//! * `--unshare-all` **including the network** by default; a profile turns
//!   the host network back on with [`BubblewrapOptions::share_net`] (the
//!   TUI should warn when it is on).
//! * File operations do not go through `bwrap` at all: they run on the host
//!   directory after [`HostDir`] has checked that the path,
//!   resolved as the sandbox sees it, stays inside `/workspace` or `/tmp`.
//! * A timeout kills the whole tree (the `bwrap` process group, every
//!   descendant and every process carrying the exec's marker), and since
//!   the command is the init of its own PID namespace, anything it left
//!   behind dies with it.
//! * When the host forbids the namespaces bwrap needs, the error says so
//!   and names the fix (case C11); there is never a fallback to running on
//!   the host.
//!
//! How a command runs: `bwrap <isolation args> -- /bin/sh -c 'printf X;
//! exec "$@"' sh <argv>`, the arguments read by bwrap from a memory file
//! (`bwrap --args <fd>`, see `argfd`), so none is in its command line. The one byte the wrapper prints first on stdout
//! (and which is stripped again) proves that the sandbox was set up; if
//! `bwrap` exits without it, whatever it wrote on stderr is bwrap's own
//! setup error, diagnosed by [`diagnose_setup_failure`].
//!
//! The isolation argv is in `isolation`, setup-failure diagnosis in
//! `setup`, and the provisioner in `provision`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStdout, Command};
use tokio_util::sync::CancellationToken;

use super::child::{exit_code_of, start_io, wait_or_kill};
use super::host::{HostDir, child_start};
use super::process_tree;
use super::shell::marker::{MARKER_VAR, new_marker};
use super::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, OutputSink, Process, PtyRequest, PtySession, Sandbox, SpawnRequest, Watch,
};

mod argfd;
mod isolation;
mod provision;
mod pty;
mod setup;
mod tmpdir;
mod wrapper;

use super::host::tree_process::TreeProcess;
use isolation::isolation_args;
pub use provision::BubblewrapProvisioner;
pub(crate) use setup::diagnose_setup_failure;
use setup::missing_bwrap;
use wrapper::{STARTED, wrap};

/// Path of the workspace inside the sandbox (docs/contract.md §7.2).
pub(crate) const SANDBOX_WORKDIR: &str = "/workspace";

/// Path of the private temp dir inside the sandbox.
pub(crate) const SANDBOX_TMPDIR: &str = "/tmp";

/// Grace between SIGTERM and SIGKILL when a command times out.
pub const KILL_GRACE: Duration = Duration::from_millis(500);

/// How long output is still collected after the command exited.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(300);

/// Longest wait for the sandbox to come up in [`Sandbox::spawn`] and in the
/// provisioning probe.
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Base `PATH` inside the sandbox.
pub(crate) const SANDBOX_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn default_bwrap() -> PathBuf {
    PathBuf::from("bwrap")
}

/// Profile options of a bubblewrap workspace (`[profiles.<name>]` with
/// `backend = "bubblewrap"` in the config file, or JSON). Every field has a
/// default, so the built-in `bwrap` profile needs none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BubblewrapOptions {
    /// The `bwrap` program: a name looked up on `PATH`, or a path.
    pub bwrap_path: PathBuf,
    /// Directory holding one host directory per workspace; `None` =
    /// `$XDG_DATA_HOME/wsbench/bubblewrap` (see [`default_base_dir`]).
    pub base_dir: Option<PathBuf>,
    /// Share the host's network namespace (off: the sandbox has only its
    /// own loopback). A UI should warn when this is on.
    pub share_net: bool,
    /// Extra environment for every command, laid over the base environment
    /// (`HOME=/workspace`, `PATH`, `LANG`, `TMPDIR`).
    pub env: BTreeMap<String, String>,
    /// Extra host paths bound read-only at the same place (for example
    /// `/opt/node`); missing ones are skipped. `/usr` is always bound.
    pub ro_binds: Vec<PathBuf>,
    /// Run `true` in a fresh sandbox when a workspace is provisioned, so a
    /// host that forbids the namespaces fails there with a clear reason
    /// instead of at the first tool call.
    pub probe: bool,
}

impl Default for BubblewrapOptions {
    fn default() -> Self {
        BubblewrapOptions {
            bwrap_path: default_bwrap(),
            base_dir: None,
            share_net: false,
            env: BTreeMap::new(),
            ro_binds: Vec::new(),
            probe: true,
        }
    }
}

/// `program` as given when it holds a `/`, else its first match on the
/// host's `PATH` (the child's `PATH` is the sandbox's, so the lookup must
/// happen here); the bare name when nothing matches, so spawning fails
/// with the usual "not found" diagnosis.
fn resolve_program(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

/// `$XDG_DATA_HOME/wsbench/bubblewrap` (default
/// `~/.local/share/wsbench/bubblewrap`); `./wsbench-bubblewrap` when no
/// home directory is known.
pub fn default_base_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::data_dir)
        .map(|d| d.join("wsbench").join("bubblewrap"))
        .unwrap_or_else(|| PathBuf::from("wsbench-bubblewrap"))
}

/// A workspace directory on the host, run through `bwrap`.
#[derive(Clone)]
pub struct BubblewrapSandbox {
    opts: Arc<BubblewrapOptions>,
    files: HostDir,
    /// Backs `/tmp`; removed when the last clone is dropped, or by the
    /// next sandbox's sweep when wsbench was killed (see `tmpdir`).
    _tmp: Arc<tempfile::TempDir>,
    /// `bwrap` arguments up to (not including) the environment and command.
    fixed_args: Arc<Vec<String>>,
}

impl std::fmt::Debug for BubblewrapSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BubblewrapSandbox")
            .field("root", &self.files.root())
            .field("share_net", &self.opts.share_net)
            .finish()
    }
}

impl BubblewrapSandbox {
    /// [`BackendError::gone`] once the host directory was removed (issue
    /// 15): checked first by every [`Sandbox`] method (bwrap itself would
    /// only fail its bind mount with an exit code).
    fn present(&self) -> BackendResult<()> {
        super::host::root_present(self.files.root())
    }

    /// Opens the host directory `root` (created if missing) as a sandbox.
    /// Does not run bwrap; see [`BubblewrapSandbox::probe`].
    ///
    /// Errors: the directory or the private temp dir cannot be created.
    pub fn open(root: impl AsRef<Path>, opts: BubblewrapOptions) -> BackendResult<Self> {
        let tmp = tmpdir::create()
            .map_err(|e| BackendError::from_io(e, "private /tmp of a bubblewrap sandbox"))?;
        let files = HostDir::new(vec![
            (SANDBOX_WORKDIR.into(), root.as_ref().to_path_buf()),
            (SANDBOX_TMPDIR.into(), tmp.path().to_path_buf()),
        ])?;
        let fixed_args = isolation_args(&opts, files.root(), &files.mounts()[1].host);
        Ok(BubblewrapSandbox {
            opts: Arc::new(opts),
            files,
            _tmp: Arc::new(tmp),
            fixed_args: Arc::new(fixed_args),
        })
    }

    /// The options this sandbox runs with.
    pub fn options(&self) -> &BubblewrapOptions {
        &self.opts
    }

    /// Runs `true` in the sandbox: `Ok` when bwrap can build it on this
    /// host, else the diagnosed setup error (C11).
    pub async fn probe(&self) -> BackendResult<()> {
        let mut req = ExecRequest::new(["true"]);
        req.timeout = Some(SETUP_TIMEOUT);
        let out = self.exec(req, None).await?;
        match out.exit_code {
            Some(0) => Ok(()),
            code => Err(BackendError::Spawn {
                program: self.opts.bwrap_path.display().to_string(),
                reason: format!(
                    "the sandbox probe `true` ended with {code:?}{}",
                    if out.timed_out { " (timed out)" } else { "" }
                ),
            }),
        }
    }

    /// The environment of one sandboxed command: the fixed base (`HOME`,
    /// `TMPDIR`, `PATH`, `LANG`, `PWD`), then the profile's `env`, then the
    /// request's. Nothing from wsbench's own environment is in it; bwrap
    /// itself is started with exactly this map too (issue 14 point 1:
    /// `/proc/1/environ` inside is bwrap's).
    fn sandbox_env(&self, cwd: &str, env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut full: BTreeMap<String, String> = BTreeMap::new();
        full.insert("HOME".into(), SANDBOX_WORKDIR.into());
        full.insert("TMPDIR".into(), SANDBOX_TMPDIR.into());
        full.insert("PATH".into(), SANDBOX_PATH.into());
        full.insert("LANG".into(), "C.UTF-8".into());
        full.insert("PWD".into(), cwd.to_string());
        full.extend(self.opts.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        full.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        full
    }

    fn sandbox_cwd(cwd: Option<&str>) -> String {
        cwd.map(|c| super::path::join(SANDBOX_WORKDIR, c))
            .unwrap_or_else(|| SANDBOX_WORKDIR.to_string())
    }

    /// The full `bwrap` argv for one command (exposed for the benchmark's
    /// bare-bwrap baseline and for debugging).
    pub fn bwrap_argv(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let cwd = Self::sandbox_cwd(cwd);
        let full = self.sandbox_env(&cwd, env);
        let mut out = Vec::with_capacity(self.fixed_args.len() + 3 * full.len() + argv.len() + 8);
        out.push(self.opts.bwrap_path.display().to_string());
        out.extend(self.fixed_args.iter().cloned());
        out.push("--clearenv".into());
        for (k, v) in full {
            out.extend(["--setenv".to_string(), k, v]);
        }
        out.extend(["--chdir".to_string(), cwd, "--".to_string()]);
        out.extend(argv.iter().cloned());
        out
    }

    fn command(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        marker: &str,
    ) -> BackendResult<Command> {
        let mut cmd = self.wrapped_command(argv, cwd, env, marker, false)?;
        cmd.process_group(0);
        // bwrap passes its own signal actions on to the sandbox's pid 1.
        child_start::default_signals(&mut cmd);
        Ok(cmd)
    }

    /// `bwrap` running the start-byte wrapper and then `argv`, with the
    /// sandbox's environment and nothing of wsbench's. `on_pty`: the
    /// command will be the session leader of its own fresh PTY, so
    /// `--new-session` is left out (see `pty`), and no process group is
    /// set (the PTY makes it a session instead).
    fn wrapped_command(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        marker: &str,
        on_pty: bool,
    ) -> BackendResult<Command> {
        if argv.is_empty() {
            return Err(BackendError::Spawn {
                program: String::new(),
                reason: "empty argv".into(),
            });
        }
        let mut env = env.clone();
        env.insert(MARKER_VAR.into(), marker.to_string());
        let wrapped = wrap(argv);
        let mut full = self.bwrap_argv(&wrapped, cwd, &env);
        if on_pty {
            // Only among the fixed isolation arguments, never the command's.
            let fixed = &full[1..=self.fixed_args.len()];
            if let Some(i) = fixed.iter().position(|a| a == "--new-session") {
                full.remove(i + 1);
            }
        }
        // `bwrap --args <fd> -- <command>`: the options (host paths,
        // `--setenv` pairs) are not in bwrap's `/proc/1/cmdline` inside
        // (see `argfd`); the command stays on the command line, where
        // bwrap requires it.
        let split = full.len() - wrapped.len() - 1;
        let mut cmd = argfd::command_with_args_fd(
            &resolve_program(&full[0]),
            &full[1..split],
            &full[split..],
        )
        .map_err(|e| BackendError::Spawn {
            program: full[0].clone(),
            reason: format!("passing bwrap its arguments: {e}"),
        })?;
        // bwrap's own environment is readable inside the sandbox (it is
        // pid 1 there: `/proc/1/environ`), so it gets the sandbox's
        // environment and nothing of wsbench's (API keys, tokens, XDG
        // paths). It carries the marker so the host-side tree walk finds
        // bwrap itself too.
        cmd.env_clear();
        cmd.envs(self.sandbox_env(&Self::sandbox_cwd(cwd), &env));
        cmd.kill_on_drop(false);
        Ok(cmd)
    }

    /// Starts bwrap and waits for the wrapper's start byte. Returns the
    /// child, with its stdout positioned after that byte, or the diagnosed
    /// setup error. `deadline` bounds the wait.
    async fn start(
        &self,
        mut cmd: Command,
        stdin: Stdio,
        deadline: Option<Instant>,
        cancel: Option<&CancellationToken>,
    ) -> BackendResult<Started> {
        cmd.stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| missing_bwrap(&self.opts.bwrap_path, &e))?;
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let mut stdout = child.stdout.take().expect("piped");
        let mut first = [0u8; 1];
        let read = stdout.read(&mut first);
        let timeout = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let got = tokio::select! {
            r = read => r,
            _ = timeout => return Ok(Started::Stopped { child, pid, cancelled: false }),
            _ = cancelled => return Ok(Started::Stopped { child, pid, cancelled: true }),
        };
        match got {
            Ok(1) if first[0] == STARTED => Ok(Started::Up { child, pid, stdout }),
            Ok(1) => Err(BackendError::Spawn {
                program: self.opts.bwrap_path.display().to_string(),
                reason: format!(
                    "unexpected first output byte {:#04x} from the sandbox wrapper",
                    first[0]
                ),
            }),
            _ => {
                // No start byte: bwrap failed before the command ran.
                let mut err = Vec::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(5), e.read_to_end(&mut err)).await;
                }
                let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                let code = match status {
                    Ok(Ok(s)) => s.code(),
                    _ => {
                        let _ = child.start_kill();
                        None
                    }
                };
                Err(diagnose_setup_failure(
                    &self.opts.bwrap_path,
                    &String::from_utf8_lossy(&err),
                    code,
                ))
            }
        }
    }
}

enum Started {
    Up {
        child: Child,
        pid: i32,
        stdout: ChildStdout,
    },
    /// The timeout or the cancel fired before the sandbox was up.
    Stopped {
        child: Child,
        pid: i32,
        cancelled: bool,
    },
}

async fn kill_tree_async(pid: i32, marker: String) {
    process_tree::kill_tree_async(pid, marker, KILL_GRACE).await;
}

#[async_trait]
impl Sandbox for BubblewrapSandbox {
    fn kind(&self) -> BackendKind {
        BackendKind::Bubblewrap
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn workdir(&self) -> &str {
        SANDBOX_WORKDIR
    }

    fn host_root(&self) -> Option<&Path> {
        Some(self.files.root())
    }

    fn host_path(&self, path: &str) -> Option<PathBuf> {
        self.files.host_path(path)
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.present()?;
        let marker = new_marker();
        let cmd = self.command(&req.argv, req.cwd.as_deref(), &req.env, &marker)?;
        let started_at = Instant::now();
        let deadline = req.timeout.map(|t| started_at + t);
        let stdin = if req.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let started = self
            .start(cmd, stdin, deadline, req.cancel.as_ref())
            .await?;
        let (mut child, pid, stdout) = match started {
            Started::Up { child, pid, stdout } => (child, pid, stdout),
            Started::Stopped {
                mut child,
                pid,
                cancelled,
            } => {
                kill_tree_async(pid, marker).await;
                let status = child.wait().await.ok();
                let (exit_code, signal) = status.map(exit_code_of).unwrap_or((None, None));
                return Ok(ExecOutcome {
                    exit_code,
                    signal,
                    timed_out: !cancelled,
                    cancelled,
                    duration: started_at.elapsed(),
                });
            }
        };
        let (out, err) = start_io(&mut child, stdout, req.stdin.clone(), sink);
        let ended = wait_or_kill(
            &mut child,
            deadline,
            req.cancel.as_ref(),
            (pid, &marker),
            KILL_GRACE,
        )
        .await
        .map_err(|e| BackendError::Io {
            context: format!("waiting for bwrap running `{}`", req.argv[0]),
            source: e,
        })?;
        // Collect what comes soon, then stop listening (dropping the sink)
        // rather than wait on anything still holding the pipes.
        super::child::drain_then_stop(out, err, DRAIN_AFTER_EXIT).await;
        let (exit_code, signal) = exit_code_of(ended.status);
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out: ended.timed_out,
            cancelled: ended.cancelled,
            duration: started_at.elapsed(),
        })
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.present()?;
        let marker = new_marker();
        let cmd = self.command(&req.argv, req.cwd.as_deref(), &req.env, &marker)?;
        let deadline = Some(Instant::now() + SETUP_TIMEOUT);
        let (mut child, pid, stdout) = match self.start(cmd, Stdio::piped(), deadline, None).await?
        {
            Started::Up { child, pid, stdout } => (child, pid, stdout),
            Started::Stopped { pid, .. } => {
                kill_tree_async(pid, marker).await;
                return Err(BackendError::Spawn {
                    program: self.opts.bwrap_path.display().to_string(),
                    reason: format!("the sandbox did not come up within {SETUP_TIMEOUT:?}"),
                });
            }
        };
        let stdin = child.stdin.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        // bwrap's PID namespace ends with it: nothing to sweep after.
        let control = Arc::new(TreeProcess::<()>::new(
            "bwrap pid",
            child,
            pid,
            marker,
            KILL_GRACE,
            false,
            None,
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
        self.files.read(path, range).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        self.present()?;
        self.files.write(path, data).await
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        self.present()?;
        self.files.write_stream(path, reader).await
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        self.present()?;
        self.files.append(path, data).await
    }

    async fn append_checked(
        &self,
        path: &str,
        earlier: &[crate::backend::append_check::TrackedRecord],
        data: &[u8],
    ) -> BackendResult<Option<crate::backend::append_check::CheckedAppend>> {
        self.present()?;
        self.files
            .append_checked(path, earlier, data)
            .await
            .map(Some)
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        self.present()?;
        self.files.create_new(path, data).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.present()?;
        self.files.list(path).await
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        self.present()?;
        self.files.stat(path).await
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        self.present()?;
        self.files.remove(path, recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        self.present()?;
        self.files.rename(from, to).await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        self.present()?;
        self.files.mkdir(path, parents).await
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        self.present()?;
        self.files.watch(path)
    }

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        pty::start(self, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StreamKind;
    use tokio::sync::mpsc;

    /// Whether bwrap is here; prints SKIPPED when not, and fails under
    /// `CI=true`.
    fn have_bwrap() -> bool {
        let ok = std::process::Command::new("bwrap")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true" && v != "1"),
                "bwrap is missing under CI"
            );
            eprintln!("SKIPPED: bwrap not installed");
        }
        ok
    }

    #[tokio::test]
    async fn timeout_or_cancel_before_or_after_start_kills_the_tree() {
        if !have_bwrap() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let sb = BubblewrapSandbox::open(d.path(), BubblewrapOptions::default()).unwrap();
        let token = format!(
            "{}",
            50_000 + (uuid::Uuid::new_v4().as_u128() % 9_000) as u32
        );
        let alive = |t: &str| {
            std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(t))
            })
        };
        // A 1 ms timeout fires while bwrap is still setting up.
        let mut req = ExecRequest::shell(format!("sleep {token}1"));
        req.timeout = Some(Duration::from_millis(1));
        let out = sb.exec(req, None).await.unwrap();
        assert!(out.timed_out && !out.cancelled);
        // A cancel that is already set.
        let mut req = ExecRequest::shell(format!("sleep {token}2"));
        let c = CancellationToken::new();
        c.cancel();
        req.cancel = Some(c);
        let out = sb.exec(req, None).await.unwrap();
        assert!(out.cancelled && !out.timed_out);
        // A cancel while running.
        let mut req = ExecRequest::shell(format!("sleep {token}3 & sleep {token}4"));
        let c = CancellationToken::new();
        req.cancel = Some(c.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            c.cancel();
        });
        let out = sb.exec(req, None).await.unwrap();
        assert!(out.cancelled);
        assert!(!alive(&token), "a sleep {token}x survived");
    }

    #[test]
    fn options_deserialize_strictly_with_defaults() {
        let o: BubblewrapOptions = toml::from_str("").unwrap();
        assert_eq!(o, BubblewrapOptions::default());
        let o: BubblewrapOptions =
            toml::from_str("share_net = true\nbwrap_path = \"/opt/bwrap\"\n[env]\nA = \"1\"")
                .unwrap();
        assert!(o.share_net);
        assert_eq!(o.env["A"], "1");
        let e = toml::from_str::<BubblewrapOptions>("sharenet = true").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let j: BubblewrapOptions = serde_json::from_str(r#"{"probe": false}"#).unwrap();
        assert!(!j.probe);
    }

    #[test]
    fn argv_isolates_by_default() {
        let d = tempfile::tempdir().unwrap();
        let sb = BubblewrapSandbox::open(d.path(), BubblewrapOptions::default()).unwrap();
        let argv = sb.bwrap_argv(&["true".into()], None, &BTreeMap::new());
        let joined = argv.join(" ");
        assert!(joined.contains("--unshare-all"));
        assert!(!joined.contains("--share-net"));
        assert!(joined.contains("--die-with-parent --new-session"));
        assert!(joined.contains("--clearenv"));
        assert!(joined.contains("--setenv HOME /workspace"));
        assert!(joined.contains("--hostname wsbench-bwrap"), "{joined}");
        assert!(joined.ends_with("--chdir /workspace -- true"), "{joined}");
        let net = BubblewrapSandbox::open(
            d.path(),
            BubblewrapOptions {
                share_net: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            net.bwrap_argv(&["true".into()], Some("sub"), &BTreeMap::new())
                .join(" ")
                .contains("--share-net")
        );
    }

    #[tokio::test]
    async fn exec_streams_and_strips_the_start_byte() {
        if !have_bwrap() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let sb = BubblewrapSandbox::open(d.path(), BubblewrapOptions::default()).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let out = sb
            .exec(
                ExecRequest::shell("printf out; echo err >&2; pwd >&2; exit 3"),
                Some(tx),
            )
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(3));
        let (mut o, mut e) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => o.extend_from_slice(&c.data),
                StreamKind::Stderr => e.extend_from_slice(&c.data),
            }
        }
        assert_eq!(o, b"out");
        assert_eq!(e, b"err\n/workspace\n");
    }
}
