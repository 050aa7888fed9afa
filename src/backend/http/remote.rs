//! What the cloud backends share above HTTP: [`RemoteSandbox`], from
//! which a service's sandbox gets the whole [`Sandbox`] trait; turning an
//! argv into the one shell line the services take (C18: a user's line
//! reaches a real shell unchanged); the file operations that are done with
//! small shell scripts run through [`Sandbox::exec`] (remove, rename,
//! mkdir, exclusive create), so each service needs only exec + read +
//! write + list + stat natively (`MINIMAL-SURFACE.md`, introduction). The
//! provisioning flow the services share is `backend::cloud`.
//!
//! **Links out of the workspace are refused** ([`BackendError::Escapes`])
//! by every file operation, as bubblewrap, Docker and Kubernetes refuse
//! them, here in one place: the blanket [`Sandbox`] impl. The services'
//! file APIs follow links anywhere in the sandbox, so a path under the
//! workdir is first resolved and checked inside the sandbox by the shared
//! link check of module `confine` (one exec: the extra round trip Docker
//! pays too), and the API is called with the path it resolved. Read,
//! write, list and mkdir follow the last component; stat, remove, rename
//! and exclusive create act on a link itself. The shell-script operations
//! start with the same check. A stat or listing tells nothing of what a
//! link out of the workspace points to (size 0, not a directory). Paths
//! outside the workdir are not judged. As with the other backends, the
//! check and the operation are separate steps: a process in the sandbox
//! that swaps a directory for a link in between could redirect one
//! operation.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::confine::{ESCAPES, Follow, LOOP, op_script};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileKind, FileStat, OutputSink, Process, Sandbox, SpawnRequest, StreamKind, Watch,
    path as bpath,
};

/// Limit for one upload, whatever the unary request limit is.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// How long to wait for a command's stream to end after it was killed or
/// interrupted.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// What a cloud service does natively in one live sandbox; every
/// implementor is a [`Sandbox`] through the impl below, which adds path
/// resolution against the workdir, sorted listings, the shell-script file
/// operations, and the `Unsupported` answers (append, watch; stdin when
/// [`Capabilities::exec_stdin`] is off). So a backend module holds only
/// what is specific to its service.
///
/// `capabilities`, `workdir`, `exec` and `spawn` are those of [`Sandbox`];
/// the file methods take absolute paths, already resolved against the
/// workdir and, under it, with their links resolved and checked inside the
/// sandbox (module doc), so they may follow links as the services do.
#[async_trait]
pub trait RemoteSandbox: Send + Sync {
    /// Backend kind.
    const KIND: BackendKind;

    /// [`Sandbox::capabilities`].
    fn capabilities(&self) -> Capabilities;

    /// [`Sandbox::workdir`]: relative paths resolve against it.
    fn workdir(&self) -> &str;

    /// [`Sandbox::exec`]; stdin is refused before this is called when
    /// [`Capabilities::exec_stdin`] is off.
    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome>;

    /// [`Sandbox::spawn`]; by default `Unsupported` (services whose
    /// commands take no stdin cannot host a long-lived process).
    async fn spawn(&self, _req: SpawnRequest) -> BackendResult<Process> {
        Err(BackendError::Unsupported {
            backend: Self::KIND,
            what: "long-lived processes",
        })
    }

    /// The bytes of file `path`, or `range` of them.
    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>>;

    /// Writes file `path`, creating its parents.
    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()>;

    /// Writes file `path` from a stream; returns the bytes written. By
    /// default the stream is read whole first (for services whose upload
    /// must know its length).
    async fn upload_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let data = read_all(reader, path).await?;
        let n = data.len() as u64;
        self.upload(path, data).await?;
        Ok(n)
    }

    /// The entries of directory `path`, in any order.
    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>>;

    /// Metadata of `path`; the name may be left empty.
    async fn stat_path(&self, path: &str) -> BackendResult<FileStat>;
}

#[async_trait]
impl<T: RemoteSandbox> Sandbox for T {
    fn kind(&self) -> BackendKind {
        T::KIND
    }

    fn capabilities(&self) -> Capabilities {
        RemoteSandbox::capabilities(self)
    }

    fn workdir(&self) -> &str {
        RemoteSandbox::workdir(self)
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        if !RemoteSandbox::capabilities(self).exec_stdin
            && req.stdin.as_ref().is_some_and(|s| !s.is_empty())
        {
            return Err(BackendError::Unsupported {
                backend: T::KIND,
                what: "stdin for commands",
            });
        }
        RemoteSandbox::exec(self, req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        RemoteSandbox::spawn(self, req).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = confine(self, &resolve(self, path), Follow::Yes, RESOLVE).await?;
        self.download(&p.path, range).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = confine(self, &resolve(self, path), Follow::Yes, RESOLVE).await?;
        self.upload(&p.path, Bytes::copy_from_slice(data)).await
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let p = confine(self, &resolve(self, path), Follow::Yes, RESOLVE).await?;
        self.upload_stream(&p.path, reader).await
    }

    async fn append(&self, _path: &str, _data: &[u8]) -> BackendResult<()> {
        Err(BackendError::Unsupported {
            backend: T::KIND,
            what: "append",
        })
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        shell_create_new(self, &resolve(self, path), data).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = confine(self, &resolve(self, path), Follow::Yes, RESOLVE_LIST).await?;
        let mut out = self.list_dir(&p.path).await?;
        for st in &mut out {
            if st.kind == FileKind::Symlink && p.links_out.contains(&st.name) {
                hide_target(st);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        let abs = resolve(self, path);
        let p = confine(self, &abs, Follow::No, RESOLVE_STAT).await?;
        let mut st = self.stat_path(&p.path).await?;
        if st.kind == FileKind::Symlink && !p.links_out.is_empty() {
            hide_target(&mut st);
        }
        if st.name.is_empty() {
            st.name = abs.rsplit('/').next().unwrap_or("/").to_string();
        }
        Ok(st)
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        shell_remove(self, &resolve(self, path), recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        shell_rename(self, &resolve(self, from), &resolve(self, to)).await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        shell_mkdir(self, &resolve(self, path), parents).await
    }

    async fn watch(&self, _path: &str) -> BackendResult<Watch> {
        Err(BackendError::Unsupported {
            backend: T::KIND,
            what: "watch",
        })
    }
}

/// `path` against the sandbox's workdir.
fn resolve<T: RemoteSandbox>(sb: &T, path: &str) -> String {
    bpath::join(RemoteSandbox::workdir(sb), path)
}

/// A path [`confine`] checked: where the service's file API must go (links
/// resolved inside the sandbox), and the links whose targets lie outside
/// the workspace (see [`RESOLVE_LIST`], [`RESOLVE_STAT`]).
struct Confined {
    path: String,
    links_out: Vec<String>,
}

// Check bodies for `confine` (after `CONFINE` has resolved and checked the
// path into `$P1`): each prints `$P1`, NUL-terminated, then the names of
// links it reports, each NUL-terminated. Nothing goes to stderr, which
// Daytona's execute mode merges into stdout.

/// The path alone (read, write).
const RESOLVE: &str = r#"printf '%s\0' "$P1""#;

/// A directory (followed), then the names of its entries that are links
/// leading out of the workspace: the service would describe their
/// targets.
const RESOLVE_LIST: &str = r#"exec 2>/dev/null
printf '%s\0' "$P1"
for l in "$P1"/* "$P1"/.*; do
  [ -L "$l" ] || continue
  confined "$l" f || printf '%s\0' "${l##*/}"
done
exit 0"#;

/// An entry (not followed), then `out` when it is a link leading out of
/// the workspace.
const RESOLVE_STAT: &str = r#"exec 2>/dev/null
printf '%s\0' "$P1"
if [ -L "$P1" ] && ! confined "$P1" f; then printf 'out\0'; fi
exit 0"#;

/// Checks `abs` in the sandbox with the shared link check (module
/// `confine`), in one exec, and returns it resolved for the service's file
/// API, which follows links anywhere in the sandbox. Paths outside the
/// workspace (lexically) come back as they are, without an exec: they are
/// not the workspace's business.
///
/// Errors: [`BackendError::Escapes`] when a link leads `abs` out of the
/// workspace; an `Io` error (`ELOOP`) for a link loop; those of the exec.
async fn confine<T: RemoteSandbox>(
    sb: &T,
    abs: &str,
    follow: Follow,
    body: &str,
) -> BackendResult<Confined> {
    if !in_workspace(RemoteSandbox::workdir(sb), abs) {
        return Ok(Confined {
            path: abs.to_string(),
            links_out: Vec::new(),
        });
    }
    let (code, out, err) = run_op(sb, &[(abs, follow)], body, &[]).await?;
    if code != 0 {
        return Err(script_error(code, abs, err, "checking"));
    }
    let mut fields = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let path = fields.next().filter(|p| p.starts_with('/'));
    let Some(path) = path else {
        return Err(BackendError::Io {
            context: format!("checking {abs}"),
            source: std::io::Error::other("the link check printed no path"),
        });
    };
    Ok(Confined {
        path,
        links_out: fields.filter(|f| !f.is_empty()).collect(),
    })
}

/// Whether `abs` is the workdir or under it, as `CONFINE` judges it.
fn in_workspace(workdir: &str, abs: &str) -> bool {
    let w = bpath::normalize(workdir);
    let w = w.trim_end_matches('/');
    abs == w || w.is_empty() || abs.starts_with(&format!("{w}/"))
}

/// Forgets what a link's stat says of its target (size, directory or
/// not), for a link out of the workspace: as with bubblewrap, nothing
/// about what lies outside is told.
fn hide_target(st: &mut FileStat) {
    st.size = 0;
    st.target_is_dir = false;
}

/// `range` of a whole download (a service that cannot send a part).
pub fn slice_range(bytes: &[u8], range: Option<ByteRange>) -> Vec<u8> {
    match range {
        None => bytes.to_vec(),
        Some(r) => {
            let start = (r.offset as usize).min(bytes.len());
            let end = start.saturating_add(r.len as usize).min(bytes.len());
            bytes[start..end].to_vec()
        }
    }
}

/// Sleeps until `when`; never returns for `None` (a limit not set, or
/// not started yet), so it can stand in a `select!` either way.
pub async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Returns when `token` is cancelled; never without a token.
pub async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(c) => c.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Quotes `s` for a POSIX shell (single quotes; `'` becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `argv` as one shell line. `["sh"|"/bin/sh", "-c", line]` gives `line`
/// itself, verbatim; anything else is quoted word by word so the shell
/// runs exactly that argv.
///
/// Errors: an empty argv.
pub fn command_line(argv: &[String]) -> BackendResult<String> {
    if argv.is_empty() {
        return Err(BackendError::Spawn {
            program: String::new(),
            reason: "empty argv".into(),
        });
    }
    if let Some(line) = plain_shell_line(argv) {
        return Ok(line.to_string());
    }
    Ok(argv
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The line of an argv of exactly `sh -c <line>` (or `/bin/sh -c`).
pub fn plain_shell_line(argv: &[String]) -> Option<&str> {
    match argv {
        [sh, c, line] if (sh == "sh" || sh == "/bin/sh") && c == "-c" => Some(line),
        _ => None,
    }
}

/// `export K='v'; ` for each variable, for services whose command call has
/// no environment field.
///
/// Errors: a name that is not a valid shell variable name.
pub fn env_prefix<'a>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BackendResult<String> {
    let mut out = String::new();
    for (k, v) in env {
        let valid = !k.is_empty()
            && !k.as_bytes()[0].is_ascii_digit()
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(BackendError::Spawn {
                program: String::new(),
                reason: format!("invalid environment variable name `{k}`"),
            });
        }
        out.push_str(&format!("export {k}={}; ", shell_quote(v)));
    }
    Ok(out)
}

/// Runs `argv` in the workdir and collects its output.
///
/// Errors: those of [`Sandbox::exec`].
pub async fn exec_capture(
    sb: &dyn Sandbox,
    argv: Vec<String>,
    timeout: Duration,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    let req = ExecRequest {
        argv,
        timeout: Some(timeout),
        ..Default::default()
    };
    exec_request_capture(sb, req).await
}

/// Runs `req` and collects its output.
///
/// Errors: those of [`Sandbox::exec`].
pub async fn exec_request_capture(
    sb: &dyn Sandbox,
    req: ExecRequest,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    let (tx, mut rx) = mpsc::channel(64);
    let run = sb.exec(req, Some(tx));
    let collect = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => out.extend_from_slice(&c.data),
                StreamKind::Stderr => err.extend_from_slice(&c.data),
            }
        }
        (out, err)
    };
    let (res, (out, err)) = tokio::join!(run, collect);
    Ok((res?, out, err))
}

pub use crate::backend::process_tree::MARKER_VAR;

/// A fresh marker value for [`MARKER_VAR`] (hex, safe in a shell word).
pub fn new_marker() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A shell line that SIGKILLs every process whose environment holds
/// `MARKER_VAR=<marker>`: the whole tree of a command, including children
/// that left its process group, which a service's own kill (one pid, one
/// session) may miss. Portable to busybox (`tr`, `grep -x`).
pub fn kill_marked_line(marker: &str) -> String {
    format!(
        "for p in /proc/[0-9]*; do if tr '\\000' '\\n' < \"$p/environ\" 2>/dev/null | grep -qx '{MARKER_VAR}={marker}'; then kill -9 \"${{p#/proc/}}\" 2>/dev/null; fi; done; true"
    )
}

/// Runs [`kill_marked_line`] in the sandbox; failures are only logged (the
/// service's own kill has already been sent).
pub async fn kill_marked(sb: &dyn Sandbox, marker: &str) {
    let req = ExecRequest {
        argv: vec!["/bin/sh".into(), "-c".into(), kill_marked_line(marker)],
        cwd: Some("/".into()),
        timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    if let Err(e) = sb.exec(req, None).await {
        tracing::warn!(error = %e, "killing a stopped command's processes failed");
    }
}

/// Limit for one helper script (they touch a single path).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Exit codes the helper scripts use to say what went wrong (besides
/// [`ESCAPES`] and [`LOOP`] from the link check).
mod code {
    pub const NOT_FOUND: i32 = 10;
    pub const IS_DIR: i32 = 11;
    pub const NOT_DIR: i32 = 12;
    pub const EXISTS: i32 = 13;
    pub const NOT_EMPTY: i32 = 14;
}

/// Runs [`op_script`]`(follows, body)` with the paths, then `args`, from
/// `/` (the workdir itself may not exist yet: creating it is one of these
/// scripts' jobs), the workdir in `WSBENCH_WORKDIR`; returns the exit code,
/// stdout and stderr.
async fn run_op(
    sb: &dyn Sandbox,
    paths: &[(&str, Follow)],
    body: &str,
    args: &[&str],
) -> BackendResult<(i32, Vec<u8>, String)> {
    let follows: Vec<Follow> = paths.iter().map(|(_, f)| *f).collect();
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        op_script(&follows, body),
        "wsbench".into(),
    ];
    argv.extend(paths.iter().map(|(p, _)| p.to_string()));
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut req = ExecRequest {
        argv,
        cwd: Some("/".into()),
        timeout: Some(SCRIPT_TIMEOUT),
        ..Default::default()
    };
    req.env
        .insert("WSBENCH_WORKDIR".into(), bpath::normalize(sb.workdir()));
    let (outcome, out, err) = exec_request_capture(sb, req).await?;
    if outcome.timed_out {
        return Err(BackendError::Io {
            context: format!("file operation on {}", paths.first().map_or("", |p| p.0)),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "helper script timed out"),
        });
    }
    Ok((
        outcome.exit_code.unwrap_or(-1),
        out,
        String::from_utf8_lossy(&err).trim().to_string(),
    ))
}

fn script_error(code: i32, path: &str, stderr: String, what: &str) -> BackendError {
    match code {
        code::NOT_FOUND => BackendError::NotFound(path.to_string()),
        code::IS_DIR => BackendError::IsADirectory(path.to_string()),
        code::NOT_DIR => BackendError::NotADirectory(path.to_string()),
        code::EXISTS => BackendError::AlreadyExists(path.to_string()),
        code::NOT_EMPTY => BackendError::Io {
            context: path.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::DirectoryNotEmpty,
                "directory not empty",
            ),
        },
        ESCAPES => BackendError::Escapes(path.to_string()),
        LOOP => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::from_raw_os_error(libc::ELOOP),
        },
        _ if stderr.contains("ermission denied") => BackendError::PermissionDenied(path.into()),
        _ => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::other(format!("exit {code}: {stderr}")),
        },
    }
}

/// Body of [`shell_remove`] for [`op_script`].
const REMOVE: &str = r#"p=$P1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 10; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$1" = r ]; then rm -rf -- "$p"; exit $?; fi
  if [ -n "$(ls -A -- "$p")" ]; then exit 14; fi
  rmdir -- "$p"; exit $?
fi
rm -f -- "$p""#;

/// Removes a file, link (never what it points to) or directory with
/// `rm`/`rmdir` in the sandbox.
///
/// Errors: [`BackendError::Escapes`] when a link on the way leads out of
/// the workspace, `NotFound`, a non-empty directory without `recursive`,
/// or the shell's message.
pub async fn shell_remove(sb: &dyn Sandbox, path: &str, recursive: bool) -> BackendResult<()> {
    let r = if recursive { "r" } else { "-" };
    let (c, _, err) = run_op(sb, &[(path, Follow::No)], REMOVE, &[r]).await?;
    match c {
        0 => Ok(()),
        c => Err(script_error(c, path, err, "removing")),
    }
}

/// Body of [`shell_mkdir`] for [`op_script`].
const MKDIR: &str = r#"p=$P1
if [ -d "$p" ]; then if [ "$1" = p ]; then exit 0; fi; exit 13; fi
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
if [ "$1" = p ]; then mkdir -p -- "$p" || exit 12; exit 0; fi
d=${p%/*}
d=${d:-/}
if [ ! -e "$d" ]; then exit 10; fi
if [ ! -d "$d" ]; then exit 12; fi
mkdir -- "$p""#;

/// Creates a directory (and its parents when `parents`); through a link
/// that stays in the workspace, where it points.
///
/// Errors: [`BackendError::Escapes`] when a link leads out of the
/// workspace, `AlreadyExists` without `parents`, `NotFound` for a missing
/// parent, `NotADirectory` when a file is in the way.
pub async fn shell_mkdir(sb: &dyn Sandbox, path: &str, parents: bool) -> BackendResult<()> {
    let p = if parents { "p" } else { "-" };
    let (c, _, err) = run_op(sb, &[(path, Follow::Yes)], MKDIR, &[p]).await?;
    match c {
        0 => Ok(()),
        c => Err(script_error(c, path, err, "creating directory")),
    }
}

/// Body of [`shell_rename`] for [`op_script`].
const RENAME: &str = r#"a=$P1 b=$P2
if [ ! -e "$a" ] && [ ! -L "$a" ]; then exit 10; fi
[ "$a" = "$b" ] && exit 0
if [ -d "$b" ] && [ ! -L "$b" ]; then
  if [ ! -d "$a" ] || [ -L "$a" ]; then exit 11; fi
  rmdir -- "$b" 2>/dev/null || exit 14
fi
if [ -L "$b" ]; then rm -f -- "$b" || exit 1; fi
d=${b%/*}
mkdir -p -- "${d:-/}" && mv -f -- "$a" "$b""#;

/// Renames `from` to `to` as `rename(2)` does (neither followed when a
/// link: a link at `to` is replaced, not moved into; an empty directory
/// at `to` is replaced by a directory), creating the target's parent.
///
/// Errors: [`BackendError::Escapes`] when a link on the way to either
/// leads out of the workspace, `NotFound` when `from` is missing,
/// `IsADirectory` when a non-directory would replace a directory, a
/// non-empty directory at `to`, or the shell's message.
pub async fn shell_rename(sb: &dyn Sandbox, from: &str, to: &str) -> BackendResult<()> {
    let (c, _, err) = run_op(sb, &[(from, Follow::No), (to, Follow::No)], RENAME, &[]).await?;
    match c {
        0 => Ok(()),
        code::IS_DIR => Err(BackendError::IsADirectory(to.to_string())),
        c => Err(script_error(c, from, err, "renaming")),
    }
}

/// Body of [`shell_create_new`] for [`op_script`].
const CREATE_NEW: &str = r#"if ln -- "$P1" "$P2" 2>/dev/null; then rm -f -- "$P1"; exit 0; fi
rm -f -- "$P1"
if [ -e "$P2" ] || [ -L "$P2" ]; then exit 13; fi
exit 1"#;

/// Creates `path` only if it does not exist: uploads to a temp name in
/// the same directory, then hard-links it into place, which fails
/// atomically when the name is taken (a link there, even dangling, takes
/// it). `Ok(false)` when it already exists.
///
/// Errors: [`BackendError::Escapes`] when a link on the way leads out of
/// the workspace, those of the upload, or the shell's message.
pub async fn shell_create_new(sb: &dyn Sandbox, path: &str, data: &[u8]) -> BackendResult<bool> {
    let parent = bpath::join(path, "..");
    let tmp = bpath::join(
        &parent,
        &format!(".wsbench-new-{}", uuid::Uuid::new_v4().simple()),
    );
    // Checked like any write: the temp file lands where the parent's
    // links lead, never outside.
    sb.write(&tmp, data).await?;
    let (c, _, err) = run_op(
        sb,
        &[(&tmp, Follow::No), (path, Follow::No)],
        CREATE_NEW,
        &[],
    )
    .await?;
    match c {
        0 => Ok(true),
        code::EXISTS => Ok(false),
        c => Err(script_error(c, path, err, "creating")),
    }
}

/// Reads an async reader to the end (for services whose upload needs the
/// whole body, or whose multipart part must know its length).
///
/// Errors: the reader fails.
pub async fn read_all(
    mut reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    path: &str,
) -> BackendResult<Bytes> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    reader
        .read_to_end(&mut buf)
        .await
        .map_err(|e| BackendError::from_io(e, path))?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_shell_line_passes_verbatim() {
        let line = "sh -c 'sleep 0.2; echo one > one.txt' & echo two && cat <<'EOF'\nx\nEOF";
        assert_eq!(command_line(&v(&["/bin/sh", "-c", line])).unwrap(), line);
        assert_eq!(command_line(&v(&["sh", "-c", line])).unwrap(), line);
    }

    #[test]
    fn argv_words_are_quoted() {
        assert_eq!(
            command_line(&v(&["rg", "--files", "a b", "it's", ""])).unwrap(),
            r#"rg --files 'a b' 'it'\''s' ''"#
        );
        // bash -c keeps bash: it is quoted, not unwrapped into sh.
        assert_eq!(
            command_line(&v(&["bash", "-c", "echo $0"])).unwrap(),
            "bash -c 'echo $0'"
        );
        assert!(command_line(&[]).is_err());
    }

    #[test]
    fn marker_kill_finds_only_marked_processes() {
        let line = kill_marked_line("abc123");
        assert!(line.contains("grep -qx 'WSBENCH_EXEC_ID=abc123'"), "{line}");
        // The line parses as shell.
        let ok = std::process::Command::new("sh")
            .args(["-n", "-c", &line])
            .status()
            .map(|s| s.success())
            .unwrap_or(true);
        assert!(ok);
    }

    #[tokio::test]
    async fn marker_kill_kills_a_detached_child() {
        // A child that left the process group, found by its marker.
        let marker = new_marker();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & wait"])
            .env(MARKER_VAR, &marker)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let st = std::process::Command::new("sh")
            .args(["-c", &kill_marked_line(&marker)])
            .status()
            .unwrap();
        assert!(st.success());
        let t0 = std::time::Instant::now();
        let _ = child.wait();
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn ranges_of_whole_downloads() {
        let r = |offset, len| Some(ByteRange { offset, len });
        assert_eq!(slice_range(b"abcdef", None), b"abcdef");
        assert_eq!(slice_range(b"abcdef", r(1, 3)), b"bcd");
        assert_eq!(slice_range(b"abcdef", r(4, 10)), b"ef");
        assert_eq!(slice_range(b"abcdef", r(9, 1)), b"");
    }

    #[test]
    fn file_scripts_refuse_links_out_in_sh_and_busybox() {
        use crate::backend::confine::test_shells::shells;
        use std::os::unix::fs::symlink;
        for sh in shells() {
            let n = sh.name;
            let d = tempfile::tempdir().unwrap();
            let (w, out) = (d.path().join("ws"), d.path().join("out"));
            std::fs::create_dir_all(w.join("sub")).unwrap();
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join("secret"), "s").unwrap();
            symlink(&out, w.join("out")).unwrap();
            symlink("/etc", w.join(".hid")).unwrap();
            symlink("sub", w.join("in")).unwrap();
            symlink("sub/new", w.join("dang")).unwrap();
            let real = w.canonicalize().unwrap().display().to_string();
            let ws = w.display().to_string();
            let run = |follows: &[Follow], body: &str, args: &[&str]| {
                let (c, o) = sh.run(&w, &op_script(follows, body), args, b"");
                let fields: Vec<String> = o
                    .split(|b| *b == 0)
                    .filter(|f| !f.is_empty())
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect();
                (c, fields)
            };
            let at = |p: &str| format!("{ws}/{p}");
            // The check: the resolved path, then the links out.
            let (c, f) = run(&[Follow::Yes], RESOLVE_LIST, &[&ws]);
            assert_eq!(c, 0, "{n}");
            assert_eq!(f[0], real, "{n}");
            let mut links_out = f[1..].to_vec();
            links_out.sort();
            assert_eq!(links_out, [".hid", "out"], "{n}");
            let (c, f) = run(&[Follow::Yes], RESOLVE, &[&at("in/x")]);
            assert_eq!((c, f), (0, vec![format!("{real}/sub/x")]), "{n}");
            assert_eq!(run(&[Follow::Yes], RESOLVE, &[&at("out")]).0, ESCAPES);
            assert_eq!(run(&[Follow::Yes], RESOLVE_LIST, &[&at("out")]).0, ESCAPES);
            let (c, f) = run(&[Follow::No], RESOLVE_STAT, &[&at("out")]);
            assert_eq!(
                (c, f),
                (0, vec![format!("{real}/out"), "out".into()]),
                "{n}"
            );
            let (c, f) = run(&[Follow::No], RESOLVE_STAT, &[&at("in")]);
            assert_eq!((c, f), (0, vec![format!("{real}/in")]), "{n}");
            assert_eq!(
                run(&[Follow::No], RESOLVE_STAT, &[&at("out/secret")]).0,
                ESCAPES
            );
            // mkdir follows links that stay inside, never those out.
            for p in ["p", "-"] {
                let r = run(&[Follow::Yes], MKDIR, &[&at("out/made"), p]);
                assert_eq!(r.0, ESCAPES, "{n}: mkdir {p}");
            }
            assert_eq!(
                run(&[Follow::Yes], MKDIR, &[&at("dang/a"), "p"]).0,
                0,
                "{n}"
            );
            assert!(w.join("sub/new/a").is_dir(), "{n}");
            // remove acts on the link, refuses what lies behind it.
            let r = run(&[Follow::No], REMOVE, &[&at("out/secret"), "-"]);
            assert_eq!(r.0, ESCAPES, "{n}");
            // rename: a link out at the target is replaced, not entered.
            std::fs::write(w.join("f"), "f").unwrap();
            let both = [Follow::No, Follow::No];
            assert_eq!(run(&both, RENAME, &[&at("f"), &at("out")]).0, 0, "{n}");
            assert_eq!(std::fs::read_to_string(w.join("out")).unwrap(), "f");
            assert!(!out.join("f").exists(), "{n}");
            let r = run(&both, RENAME, &[&at("out"), &at(".hid/x")]);
            assert_eq!(r.0, ESCAPES, "{n}");
            // A directory replaces an empty one, not a full one.
            std::fs::create_dir_all(w.join("full/x")).unwrap();
            std::fs::create_dir_all(w.join("empty")).unwrap();
            let r = run(&both, RENAME, &[&at("sub"), &at("full")]);
            assert_eq!(r.0, code::NOT_EMPTY, "{n}");
            assert_eq!(run(&both, RENAME, &[&at("sub"), &at("empty")]).0, 0, "{n}");
            assert!(w.join("empty/new/a").is_dir(), "{n}");
            let r = run(&both, RENAME, &[&at("out"), &at("empty")]);
            assert_eq!(r.0, code::IS_DIR, "{n}");
            assert_eq!(run(&[Follow::No], REMOVE, &[&at(".hid"), "-"]).0, 0, "{n}");
            assert!(!w.join(".hid").is_symlink() && out.join("secret").exists());
            // An exclusive create finds a dangling link's name taken.
            std::fs::write(w.join("tmp"), "t").unwrap();
            let r = run(&both, CREATE_NEW, &[&at("tmp"), &at("dang")]);
            assert_eq!(r.0, code::EXISTS, "{n}");
            assert!(!w.join("tmp").exists(), "{n}");
        }
    }

    #[test]
    fn env_prefix_quotes_values_and_rejects_bad_names() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("A_1".to_string(), "x y'z".to_string());
        assert_eq!(env_prefix(&m).unwrap(), r#"export A_1='x y'\''z'; "#);
        m.insert("1A".to_string(), "x".to_string());
        assert!(env_prefix(&m).is_err());
    }
}
