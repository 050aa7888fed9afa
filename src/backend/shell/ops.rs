//! The file operations as scripts on a [`ScriptHost`]: each is one exec
//! (one round trip). Paths are taken as the caller names them (relative
//! ones resolve against the host's workdir) and errors name them the
//! same way.

use bytes::Bytes;

use super::codes::{self, failed};
use super::confine::Follow;
use super::runner::{ScriptHost, run};
use super::{parse, scripts};
use crate::backend::{BackendError, BackendResult, ByteRange, FileStat, Sandbox, path as bpath};

/// `path` against the host's workdir.
fn abs<H: ScriptHost + ?Sized>(h: &H, path: &str) -> String {
    bpath::join(&h.script_workdir(), path)
}

/// Reads a file, or `range` of it (links followed inside the workspace).
///
/// Errors: `NotFound`, `IsADirectory`, `Escapes` for a link out of the
/// workspace, those of the exec.
pub(crate) async fn read<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    range: Option<ByteRange>,
) -> BackendResult<Vec<u8>> {
    let (off, len) = match range {
        Some(r) => (r.offset.to_string(), r.len.to_string()),
        None => ("-".into(), "-".into()),
    };
    let p = abs(h, path);
    let out = run(h, &[(&p, Follow::Yes)], scripts::READ, &[&off, &len], None).await?;
    match out.code {
        0 => Ok(out.stdout),
        c => Err(failed(c, path, &out.stderr, "reading")),
    }
}

/// Writes `data` to `path` atomically (temp file in the same directory,
/// then `mv`), creating parents; sent on stdin.
///
/// Errors: `IsADirectory`, `NotADirectory` for a file on the way,
/// `Escapes`, an `UnexpectedEof` `Io` error when fewer bytes arrived than
/// were sent, those of the exec.
pub(crate) async fn write<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    data: &[u8],
) -> BackendResult<()> {
    write_mode(h, path, data, &["w"], "writing").await.map(drop)
}

/// Appends `data` to `path`, creating it and its parents (callers
/// serialise appends). Line-safe: a failed append is truncated back and
/// a torn last line is ended first (see [`scripts::WRITE`]). Returns the
/// offset `data` starts at, which the script prints.
///
/// Errors: as [`write`]; an `Io` error when the script printed no offset.
pub(crate) async fn append<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    data: &[u8],
) -> BackendResult<u64> {
    let nl = if data.ends_with(b"\n") { "nl" } else { "-" };
    let out = write_mode(h, path, data, &["a", nl], "appending to").await?;
    let text = String::from_utf8_lossy(&out);
    text.trim().parse().map_err(|_| BackendError::Io {
        context: path.to_string(),
        source: std::io::Error::other(format!(
            "the append script printed no offset ({:?})",
            text.chars().take(80).collect::<String>()
        )),
    })
}

async fn write_mode<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    data: &[u8],
    mode: &[&str],
    what: &str,
) -> BackendResult<Vec<u8>> {
    let p = abs(h, path);
    let n = data.len().to_string();
    let stdin = Some(Bytes::copy_from_slice(data));
    let mut args = vec![n.as_str()];
    args.extend_from_slice(mode);
    let out = run(h, &[(&p, Follow::Yes)], scripts::WRITE, &args, stdin).await?;
    match out.code {
        0 => Ok(out.stdout),
        c => Err(failed(c, path, &out.stderr, what)),
    }
}

/// A fresh temp name in the directory of `abs` (dot-prefixed, so
/// listings made meanwhile show where it comes from).
pub(crate) fn temp_name(abs: &str) -> String {
    bpath::join(
        &bpath::parent(abs),
        &format!("{}{}", bpath::NEW_PREFIX, uuid::Uuid::new_v4().simple()),
    )
}

/// Creates `path` with `data` only if nothing (not even a dangling link)
/// is there, the bytes sent on stdin ([`scripts::CREATE_NEW`]); parents
/// are created. `Ok(false)` when the name is taken.
///
/// Errors: `Escapes` when a link on the way leads out of the workspace,
/// a short transfer, those of the exec.
pub(crate) async fn create_new<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    data: &[u8],
) -> BackendResult<bool> {
    let p = abs(h, path);
    let tmp = temp_name(&p);
    let n = data.len().to_string();
    let stdin = Some(Bytes::copy_from_slice(data));
    link_new(h, &tmp, &p, path, &n, stdin).await
}

/// [`create_new`] for a sandbox whose commands may take no stdin: the
/// bytes are uploaded to a temp name in the same directory with
/// [`Sandbox::write`] (checked like any write: it lands where the
/// parent's links lead, never outside), then linked into place by the
/// same script.
///
/// Errors: those of [`create_new`] and of the upload.
pub(crate) async fn create_new_uploaded<S: Sandbox + ?Sized>(
    sb: &S,
    path: &str,
    data: &[u8],
) -> BackendResult<bool> {
    let p = abs(sb, path);
    let tmp = temp_name(&p);
    sb.write(&tmp, data).await?;
    link_new(sb, &tmp, &p, path, "-", None).await
}

async fn link_new<H: ScriptHost + ?Sized>(
    h: &H,
    tmp: &str,
    abs: &str,
    path: &str,
    count: &str,
    stdin: Option<Bytes>,
) -> BackendResult<bool> {
    let paths = [(tmp, Follow::No), (abs, Follow::No)];
    let out = run(h, &paths, scripts::CREATE_NEW, &[count], stdin).await?;
    match out.code {
        0 => Ok(true),
        codes::EXISTS => Ok(false),
        c => Err(failed(c, path, &out.stderr, "creating")),
    }
}

/// Lists a directory in one exec, sorted by name (a link to a directory
/// lists the directory).
///
/// Errors: `NotFound`, `NotADirectory`, `Escapes`, those of the exec.
pub(crate) async fn list<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
) -> BackendResult<Vec<FileStat>> {
    let p = abs(h, path);
    let out = run(h, &[(&p, Follow::Yes)], &scripts::list(), &[], None).await?;
    match out.code {
        0 => {
            let mut v = parse::records(&out.stdout);
            v.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(v)
        }
        c => Err(failed(c, path, &out.stderr, "listing")),
    }
}

/// Metadata of one path (the link itself for symlinks), in one exec.
///
/// Errors: `NotFound`, `Escapes` for a path behind a link out of the
/// workspace, those of the exec.
pub(crate) async fn stat<H: ScriptHost + ?Sized>(h: &H, path: &str) -> BackendResult<FileStat> {
    let p = abs(h, path);
    let name = match bpath::file_name(&p) {
        "" => "/".to_string(),
        n => n.to_string(),
    };
    let out = run(h, &[(&p, Follow::No)], &scripts::stat(), &[&name], None).await?;
    match out.code {
        0 => parse::records(&out.stdout)
            .into_iter()
            .next()
            .ok_or_else(|| BackendError::NotFound(path.into())),
        c => Err(failed(c, path, &out.stderr, "stat")),
    }
}

/// Removes a file, a link (never its target) or a directory (its
/// contents too when `recursive`). The workspace root itself is refused
/// (`PermissionDenied`), as on bubblewrap.
///
/// Errors: `NotFound`, a non-empty directory without `recursive`,
/// `Escapes`, those of the exec.
pub(crate) async fn remove<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    recursive: bool,
) -> BackendResult<()> {
    let p = abs(h, path);
    let mode = if recursive { "r" } else { "-" };
    let out = run(h, &[(&p, Follow::No)], scripts::REMOVE, &[mode], None).await?;
    match out.code {
        0 => Ok(()),
        c => Err(failed(c, path, &out.stderr, "removing")),
    }
}

/// Renames `from` to `to` (a link itself, not its target) as
/// `rename(2)` does, creating the target's parent (see
/// [`scripts::RENAME`]).
///
/// Errors: `NotFound` when `from` is missing, `IsADirectory` when a
/// non-directory would replace a directory, a non-empty directory at
/// `to`, `Escapes`, `PermissionDenied` for the workspace root, those of
/// the exec.
pub(crate) async fn rename<H: ScriptHost + ?Sized>(
    h: &H,
    from: &str,
    to: &str,
) -> BackendResult<()> {
    let (a, b) = (abs(h, from), abs(h, to));
    let paths = [(a.as_str(), Follow::No), (b.as_str(), Follow::No)];
    let out = run(h, &paths, scripts::RENAME, &[], None).await?;
    match out.code {
        0 => Ok(()),
        codes::IS_DIR => Err(BackendError::IsADirectory(to.to_string())),
        codes::NOT_EMPTY => Err(failed(codes::NOT_EMPTY, to, &out.stderr, "renaming onto")),
        c => Err(failed(c, from, &out.stderr, "renaming")),
    }
}

/// Creates a directory (and its parents when `parents`); through a link
/// that stays in the workspace, where it points.
///
/// Errors: `AlreadyExists` without `parents`, `NotFound` for a missing
/// parent, `NotADirectory` when a file is in the way, `Escapes`, those of
/// the exec.
pub(crate) async fn mkdir<H: ScriptHost + ?Sized>(
    h: &H,
    path: &str,
    parents: bool,
) -> BackendResult<()> {
    let p = abs(h, path);
    let mode = if parents { "p" } else { "-" };
    let out = run(h, &[(&p, Follow::Yes)], scripts::MKDIR, &[mode], None).await?;
    match out.code {
        0 => Ok(()),
        c => Err(failed(c, path, &out.stderr, "creating directory")),
    }
}

/// A path [`resolve`] checked: where a native file API must go (links
/// resolved inside the sandbox), and the links it reported (those whose
/// targets lie outside the workspace; see [`scripts::RESOLVE_LIST`],
/// [`scripts::RESOLVE_STAT`]).
pub(crate) struct Resolved {
    /// The path with its links resolved (absolute).
    pub path: String,
    /// Names of the links out of the workspace the body reported.
    pub links_out: Vec<String>,
}

/// Checks `abs` on the host with the link check, in one exec, running
/// `body` (one of the `RESOLVE*` bodies of [`scripts`]), and returns it
/// resolved, for a file API that follows links anywhere in the sandbox.
/// Paths outside the workspace (lexically) come back as they are, without
/// an exec: they are not the workspace's business.
///
/// Errors: `Escapes` when a link leads `abs` out of the workspace; an
/// `Io` error (`ELOOP`) for a link loop; those of the exec.
pub(crate) async fn resolve<H: ScriptHost + ?Sized>(
    h: &H,
    abs: &str,
    follow: Follow,
    body: &str,
) -> BackendResult<Resolved> {
    if !in_workspace(&h.script_workdir(), abs) {
        return Ok(Resolved {
            path: abs.to_string(),
            links_out: Vec::new(),
        });
    }
    let out = run(h, &[(abs, follow)], body, &[], None).await?;
    if out.code != 0 {
        return Err(failed(out.code, abs, &out.stderr, "checking"));
    }
    let mut fields = out
        .stdout
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let path = fields.next().filter(|p| p.starts_with('/'));
    let Some(path) = path else {
        return Err(BackendError::Io {
            context: format!("checking {abs}"),
            source: std::io::Error::other("the link check printed no path"),
        });
    };
    Ok(Resolved {
        path,
        links_out: fields.filter(|f| !f.is_empty()).collect(),
    })
}

/// Whether `abs` is the workdir or under it, as the link check judges it.
fn in_workspace(workdir: &str, abs: &str) -> bool {
    let w = bpath::normalize(workdir);
    let w = w.trim_end_matches('/');
    abs == w || w.is_empty() || abs.starts_with(&format!("{w}/"))
}
