//! File operations in the Pod, each one exec (one round trip): byte-exact
//! reads with `cat` / `tail | head` for ranges, atomic writes through a
//! temp file and `mv`, directory listing and stat as NUL-separated
//! records from `stat -c` (GNU coreutils and BusyBox alike), and tar
//! streams for whole trees (`kubectl cp`'s way).
//!
//! **Link confinement, in one place.** Every operation is a script body
//! run by [`op_script`] after [`CONFINE`] has resolved each of its paths
//! the way the kernel would and refused (exit [`ESCAPES`], so
//! [`BackendError::Escapes`]) any path under `/workspace` that a link
//! leads out of — the rule bubblewrap's and Docker's `HostDir` applies on
//! the host (module `confine`). The body then works on the resolved path
//! (`$P1`, `$P2`) rather than resolving it again. Whether a path's last
//! component is followed is the operation's choice ([`Follow`]): reads,
//! writes, appends, listings, `mkdir` and the tar transfers follow it;
//! `stat`, `remove`, `rename` and exclusive create act on a link itself.
//!
//! [`CONFINE`]: crate::backend::confine::CONFINE

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::exec::ExecTarget;
use crate::backend::confine::{ESCAPES, Follow, LOOP, op_script};
use crate::backend::{
    BackendError, BackendResult, ByteRange, ExecRequest, FileKind, FileStat, StreamKind,
    path as bpath,
};

/// Limit for one file operation (they move one file or one listing).
const FILE_TIMEOUT: Duration = Duration::from_secs(300);

/// Exit codes of the scripts below.
const NOT_FOUND: i32 = 10;
const IS_DIR: i32 = 11;
const NOT_DIR: i32 = 12;
const EXISTS: i32 = 13;
const NOT_EMPTY: i32 = 14;
const SHORT: i32 = 15;
const IS_ROOT: i32 = 17;

/// The exec request of an operation: `/bin/sh -c <op_script> wsbench
/// <paths> <args>`, from `/` with the workspace in `WSBENCH_WORKDIR`.
fn op_request(
    t: &ExecTarget,
    paths: &[(&str, Follow)],
    body: &str,
    args: &[&str],
    stdin: Option<Bytes>,
) -> ExecRequest {
    let follows: Vec<Follow> = paths.iter().map(|(_, f)| *f).collect();
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        op_script(&follows, body),
        "wsbench".into(),
    ];
    argv.extend(paths.iter().map(|(p, _)| p.to_string()));
    argv.extend(args.iter().map(|a| a.to_string()));
    ExecRequest {
        argv,
        cwd: Some("/".into()),
        stdin,
        timeout: Some(FILE_TIMEOUT),
        env: [("WSBENCH_WORKDIR".to_string(), t.workdir.clone())].into(),
        ..Default::default()
    }
}

/// Runs one file operation (see [`op_script`]), feeding `stdin`; returns
/// exit code, stdout and stderr.
async fn run(
    t: &ExecTarget,
    paths: &[(&str, Follow)],
    body: &str,
    args: &[&str],
    stdin: Option<Bytes>,
) -> BackendResult<(i32, Vec<u8>, String)> {
    let req = op_request(t, paths, body, args, stdin);
    let (tx, mut rx) = mpsc::channel::<crate::backend::OutputChunk>(64);
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
    let (res, (out, err)) = tokio::join!(t.exec(req, Some(tx)), collect);
    let outcome = res?;
    if outcome.timed_out {
        return Err(BackendError::Io {
            context: format!("file operation on {}", paths.first().map_or("", |p| p.0)),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"),
        });
    }
    Ok((
        outcome.exit_code.unwrap_or(-1),
        out,
        String::from_utf8_lossy(&err).trim().to_string(),
    ))
}

fn failed(code: i32, path: &str, stderr: String, what: &str) -> BackendError {
    match code {
        NOT_FOUND => BackendError::NotFound(path.into()),
        IS_DIR => BackendError::IsADirectory(path.into()),
        NOT_DIR => BackendError::NotADirectory(path.into()),
        EXISTS => BackendError::AlreadyExists(path.into()),
        NOT_EMPTY => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::new(
                std::io::ErrorKind::DirectoryNotEmpty,
                "directory not empty",
            ),
        },
        ESCAPES => BackendError::Escapes(path.into()),
        IS_ROOT => BackendError::PermissionDenied(format!("{path} is the workspace's mount point")),
        LOOP => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::from_raw_os_error(libc::ELOOP),
        },
        _ if stderr.contains("ermission denied") => BackendError::PermissionDenied(path.into()),
        _ if stderr.contains("No space left") => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::new(std::io::ErrorKind::StorageFull, stderr),
        },
        _ => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::other(format!("exit {code}: {stderr}")),
        },
    }
}

/// Script body of [`read`].
const READ_BODY: &str = r#"p=$P1
if [ ! -e "$p" ]; then exit 10; fi
if [ -d "$p" ]; then exit 11; fi
if [ "$1" = - ]; then exec cat -- "$p"; fi
if [ "$2" = 0 ]; then exit 0; fi
tail -c +"$(($1 + 1))" -- "$p" | head -c "$2""#;

/// Reads a file, or `range` of it.
pub(crate) async fn read(
    t: &ExecTarget,
    path: &str,
    range: Option<ByteRange>,
) -> BackendResult<Vec<u8>> {
    let (off, len) = match range {
        Some(r) => (r.offset.to_string(), r.len.to_string()),
        None => ("-".into(), "-".into()),
    };
    match run(t, &[(path, Follow::Yes)], READ_BODY, &[&off, &len], None).await? {
        (0, out, _) => Ok(out),
        (c, _, err) => Err(failed(c, path, err, "reading")),
    }
}

/// The write body: `$P1` the resolved path, `$1` byte count or `-`
/// (until EOF), `$2` `w` (atomic replace) or `a` (append). A link is
/// written through (its target replaced, as a local write would).
const WRITE_BODY: &str = r#"p=$P1
d=${p%/*}; d=${d:-/}
if [ -d "$p" ]; then exit 11; fi
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
if [ "$2" = a ]; then
  if [ "$1" = - ]; then cat >> "$p"; exit $?; fi
  head -c "$1" >> "$p"; exit $?
fi
tmp="$d/.wsbench-tmp-$$"
if [ "$1" = - ]; then cat > "$tmp" || { rm -f -- "$tmp"; exit 1; }
else
  head -c "$1" > "$tmp" || { rm -f -- "$tmp"; exit 1; }
  if [ "$(wc -c < "$tmp")" -ne "$1" ]; then rm -f -- "$tmp"; exit 15; fi
fi
mv -f -- "$tmp" "$p""#;

fn short_write(path: &str) -> BackendError {
    BackendError::Io {
        context: format!("writing {path}"),
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the pod received fewer bytes than were sent",
        ),
    }
}

/// Writes `data` to `path` atomically (temp file in the same directory,
/// then `mv`), creating parents.
pub(crate) async fn write(t: &ExecTarget, path: &str, data: &[u8]) -> BackendResult<()> {
    let n = data.len().to_string();
    let stdin = Some(Bytes::copy_from_slice(data));
    match run(t, &[(path, Follow::Yes)], WRITE_BODY, &[&n, "w"], stdin).await? {
        (0, _, _) => Ok(()),
        (SHORT, _, _) => Err(short_write(path)),
        (c, _, err) => Err(failed(c, path, err, "writing")),
    }
}

/// Appends `data` to `path`, creating it and its parents.
pub(crate) async fn append(t: &ExecTarget, path: &str, data: &[u8]) -> BackendResult<()> {
    let n = data.len().to_string();
    let stdin = Some(Bytes::copy_from_slice(data));
    match run(t, &[(path, Follow::Yes)], WRITE_BODY, &[&n, "a"], stdin).await? {
        (0, _, _) => Ok(()),
        (c, _, err) => Err(failed(c, path, err, "appending to")),
    }
}

/// Script body of [`create_new`].
const CREATE_NEW_BODY: &str = r#"p=$P1
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
d=${p%/*}; d=${d:-/}
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
tmp="$d/.wsbench-new-$$"
head -c "$1" > "$tmp" || { rm -f -- "$tmp"; exit 1; }
if [ "$(wc -c < "$tmp")" -ne "$1" ]; then rm -f -- "$tmp"; exit 15; fi
if ln -- "$tmp" "$p" 2>/dev/null; then rm -f -- "$tmp"; exit 0; fi
rm -f -- "$tmp"
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
exit 1"#;

/// Creates `path` with `data` only if nothing (not even a dangling link)
/// is there: the bytes go to a temp file in the same directory, which is
/// then hard-linked into place — `ln` fails atomically when the name is
/// taken. Parents are created. `Ok(false)` when the name exists.
pub(crate) async fn create_new(t: &ExecTarget, path: &str, data: &[u8]) -> BackendResult<bool> {
    let n = data.len().to_string();
    let stdin = Some(Bytes::copy_from_slice(data));
    match run(t, &[(path, Follow::No)], CREATE_NEW_BODY, &[&n], stdin).await? {
        (0, _, _) => Ok(true),
        (EXISTS, _, _) => Ok(false),
        (SHORT, _, _) => Err(short_write(path)),
        (c, _, err) => Err(failed(c, path, err, "creating")),
    }
}

/// Writes a stream to `path` atomically. On a v5 server the bytes are
/// streamed as they are read (stdin is closed with the v5 close frame);
/// v4 cannot end stdin, so there the stream is read first and sent with
/// its length.
pub(crate) async fn write_stream(
    t: &ExecTarget,
    path: &str,
    mut reader: Box<dyn AsyncRead + Send + Unpin>,
) -> BackendResult<u64> {
    if !t.supports_stdin_close().await? {
        let mut buf = Vec::new();
        reader
            .read_to_end(&mut buf)
            .await
            .map_err(|e| BackendError::from_io(e, path))?;
        write(t, path, &buf).await?;
        return Ok(buf.len() as u64);
    }
    let req = op_request(t, &[(path, Follow::Yes)], WRITE_BODY, &["-", "w"], None);
    let mut process = t
        .spawn(crate::backend::SpawnRequest {
            argv: req.argv,
            cwd: req.cwd,
            env: req.env,
        })
        .await?;
    let copied = tokio::io::copy(&mut reader, &mut process.stdin).await;
    let closed = tokio::io::AsyncWriteExt::shutdown(&mut process.stdin).await;
    drop(process.stdin);
    let mut err = String::new();
    let _ = tokio::time::timeout(FILE_TIMEOUT, process.stderr.read_to_string(&mut err)).await;
    let code = tokio::time::timeout(FILE_TIMEOUT, process.control.wait())
        .await
        .map_err(|_| BackendError::Io {
            context: format!("writing {path}"),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"),
        })??;
    // The script's verdict first: a refused path closes stdin early,
    // which would otherwise surface as a broken pipe.
    match code {
        Some(0) => {}
        Some(c) => return Err(failed(c, path, err, "writing")),
        None => {
            return Err(BackendError::Io {
                context: format!("writing {path}"),
                source: std::io::Error::other("the upload ended without an exit status"),
            });
        }
    }
    let n = copied.map_err(|e| BackendError::from_io(e, path))?;
    closed.map_err(|e| BackendError::from_io(e, path))?;
    Ok(n)
}

/// The stat format: raw mode in hex, size, mtime (nanoseconds where
/// `stat` knows `%.9Y`, as GNU does; whole seconds on BusyBox). `rec P
/// NAME` prints one record; a link's target kind and size are given only
/// when the link stays in the workspace (as bubblewrap's `HostDir` does,
/// a link out of it reveals nothing about its target).
const STAT_PRELUDE: &str = r#"case $(stat -c %.9Y / 2>/dev/null) in
  *.*) F='%f %s %.9Y' ;;
  *) F='%f %s %Y' ;;
esac
rec() {
  s=$(stat -c "$F" -- "$1") || return 0
  t= ts= td=0
  if [ -L "$1" ]; then
    t=$(readlink -- "$1" && echo .); t=${t%?.}
    if confined "$1" f; then
      [ -d "$1" ] && td=1
      ts=$(stat -L -c %s -- "$1" 2>/dev/null)
    fi
  fi
  printf '%s\0%s\0%s\0%s\0%s\0' "$s" "$2" "$t" "$td" "$ts"
}
"#;
/// Parses the NUL-separated records of [`STAT_PRELUDE`]'s `rec`.
pub(crate) fn parse_records(out: &[u8]) -> Vec<FileStat> {
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    let mut stats = Vec::new();
    for rec in fields.chunks(5) {
        if rec.len() < 5 {
            break;
        }
        let head = String::from_utf8_lossy(rec[0]);
        let mut it = head.split_ascii_whitespace();
        let (Some(mode), Some(size), Some(mtime)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(mode) = u32::from_str_radix(mode, 16) else {
            continue;
        };
        let kind = match mode & 0o170000 {
            0o040000 => FileKind::Dir,
            0o100000 => FileKind::File,
            0o120000 => FileKind::Symlink,
            _ => FileKind::Other,
        };
        let modified = mtime
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| {
                // Split to keep nanoseconds exact for large epochs.
                let (secs, frac) = match mtime.split_once('.') {
                    Some((a, b)) => (a.parse().unwrap_or(s as u64), b),
                    None => (s as u64, ""),
                };
                let nanos: u32 = format!("{frac:0<9}")[..9].parse().unwrap_or(0);
                UNIX_EPOCH + Duration::new(secs, nanos)
            });
        let link_target =
            (kind == FileKind::Symlink).then(|| String::from_utf8_lossy(rec[2]).into_owned());
        let target_size = String::from_utf8_lossy(rec[4]).trim().parse().ok();
        let own_size = size.parse().unwrap_or(0);
        stats.push(FileStat {
            name: String::from_utf8_lossy(rec[1]).into_owned(),
            kind,
            // A link's size is its target's; 0 when the target is missing
            // or out of the workspace (as bubblewrap's `HostDir` reports).
            size: if kind == FileKind::Symlink {
                target_size.unwrap_or(0)
            } else {
                own_size
            },
            modified: modified
                .or(Some(SystemTime::UNIX_EPOCH))
                .filter(|t| *t > UNIX_EPOCH),
            link_target,
            target_is_dir: rec[3] == b"1",
            mode: Some(mode & 0o7777),
        });
    }
    stats
}

/// Script body of [`list`].
fn list_body() -> String {
    format!(
        r#"{STAT_PRELUDE}d=$P1
if [ ! -e "$d" ]; then exit 10; fi
if [ ! -d "$d" ]; then exit 12; fi
cd -- "$d" || exit 1
for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then rec "$d/$f" "$f"; fi
done"#
    )
}

/// Script body of [`stat`]: `$1` the name to report.
fn stat_body() -> String {
    format!(
        r#"{STAT_PRELUDE}if [ ! -e "$P1" ] && [ ! -L "$P1" ]; then exit 10; fi
rec "$P1" "$1""#
    )
}

/// Lists a directory in one exec, sorted by name (a link to a directory
/// lists the directory).
pub(crate) async fn list(t: &ExecTarget, path: &str) -> BackendResult<Vec<FileStat>> {
    match run(t, &[(path, Follow::Yes)], &list_body(), &[], None).await? {
        (0, out, _) => {
            let mut v = parse_records(&out);
            v.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(v)
        }
        (c, _, err) => Err(failed(c, path, err, "listing")),
    }
}

/// Metadata of one path (the link itself for symlinks), in one exec.
pub(crate) async fn stat(t: &ExecTarget, path: &str) -> BackendResult<FileStat> {
    let name = match bpath::file_name(path) {
        "" => "/".to_string(),
        n => n.to_string(),
    };
    match run(t, &[(path, Follow::No)], &stat_body(), &[&name], None).await? {
        (0, out, _) => parse_records(&out)
            .into_iter()
            .next()
            .ok_or_else(|| BackendError::NotFound(path.into())),
        (c, _, err) => Err(failed(c, path, err, "stat")),
    }
}

/// Script body of [`remove`].
const REMOVE_BODY: &str = r#"p=$P1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 10; fi
if [ "$p" = "$W" ] || [ "$p" = "$Wr" ]; then exit 17; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$1" = r ]; then rm -rf -- "$p"; exit $?; fi
  if [ -n "$(ls -A -- "$p")" ]; then exit 14; fi
  rmdir -- "$p"; exit $?
fi
rm -f -- "$p""#;

/// Removes a file, a link (never its target) or a directory (its
/// contents too when `recursive`). The workspace's mount point itself is
/// refused (`PermissionDenied`), as on bubblewrap.
pub(crate) async fn remove(t: &ExecTarget, path: &str, recursive: bool) -> BackendResult<()> {
    let mode = if recursive { "r" } else { "-" };
    match run(t, &[(path, Follow::No)], REMOVE_BODY, &[mode], None).await? {
        (0, _, _) => Ok(()),
        (c, _, err) => Err(failed(c, path, err, "removing")),
    }
}

/// Script body of [`rename`].
const RENAME_BODY: &str = r#"a=$P1 b=$P2
if [ ! -e "$a" ] && [ ! -L "$a" ]; then exit 10; fi
for x in "$a" "$b"; do
  if [ "$x" = "$W" ] || [ "$x" = "$Wr" ]; then exit 17; fi
done
if [ "$a" = "$b" ]; then exit 0; fi
if [ -d "$b" ] && [ ! -L "$b" ]; then
  if [ ! -d "$a" ] || [ -L "$a" ]; then exit 11; fi
  rmdir -- "$b" 2>/dev/null || exit 14
fi
if [ -L "$b" ]; then rm -f -- "$b" || exit 1; fi
d=${b%/*}; d=${d:-/}
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
mv -f -- "$a" "$b""#;

/// Renames `from` to `to` (a link itself, not its target), creating the
/// target's parent, with `rename(2)`'s rules: a file replaces a file or
/// link, a directory replaces an empty directory; a file onto a directory
/// is `IsADirectory`. `mv` alone would move into a directory — or into
/// the directory a link at `to` points to, which may be outside.
pub(crate) async fn rename(t: &ExecTarget, from: &str, to: &str) -> BackendResult<()> {
    match run(
        t,
        &[(from, Follow::No), (to, Follow::No)],
        RENAME_BODY,
        &[],
        None,
    )
    .await?
    {
        (0, _, _) => Ok(()),
        (IS_DIR, _, _) => Err(BackendError::IsADirectory(to.to_string())),
        (NOT_EMPTY, _, err) => Err(failed(NOT_EMPTY, to, err, "renaming onto")),
        (c, _, err) => Err(failed(c, from, err, "renaming")),
    }
}

/// Script body of [`mkdir`].
const MKDIR_BODY: &str = r#"p=$P1
if [ -d "$p" ]; then if [ "$1" = p ]; then exit 0; fi; exit 13; fi
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
if [ "$1" = p ]; then mkdir -p -- "$p" || exit 12; exit 0; fi
d=${p%/*}; d=${d:-/}
if [ ! -e "$d" ]; then exit 10; fi
if [ ! -d "$d" ]; then exit 12; fi
mkdir -- "$p""#;

/// Creates a directory (and its parents when `parents`); through a link,
/// the directory it points to.
///
/// Errors: `AlreadyExists` without `parents`, `NotFound` for a missing
/// parent, `NotADirectory` when a file is in the way.
pub(crate) async fn mkdir(t: &ExecTarget, path: &str, parents: bool) -> BackendResult<()> {
    let mode = if parents { "p" } else { "-" };
    match run(t, &[(path, Follow::Yes)], MKDIR_BODY, &[mode], None).await? {
        (0, _, _) => Ok(()),
        (c, _, err) => Err(failed(c, path, err, "creating directory")),
    }
}

/// Script body of [`download_tar`].
const DOWNLOAD_BODY: &str = r#"if [ ! -d "$P1" ]; then exit 10; fi
exec tar cf - -C "$P1" ."#;

/// Streams `dir` as a tar archive (`tar cf - -C <dir> .`) into `sink`,
/// like `kubectl cp` from the Pod. Links inside the tree are archived as
/// links, not followed. Returns the bytes sent.
pub(crate) async fn download_tar(
    t: &ExecTarget,
    dir: &str,
    sink: mpsc::Sender<Bytes>,
) -> BackendResult<u64> {
    let req = op_request(t, &[(dir, Follow::Yes)], DOWNLOAD_BODY, &[], None);
    let (tx, mut rx) = mpsc::channel::<crate::backend::OutputChunk>(64);
    let forward = async {
        let (mut n, mut err) = (0u64, Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => {
                    n += c.data.len() as u64;
                    let _ = sink.send(c.data).await;
                }
                StreamKind::Stderr => err.extend_from_slice(&c.data),
            }
        }
        (n, err)
    };
    let (res, (n, err)) = tokio::join!(t.exec(req, Some(tx)), forward);
    match res?.exit_code {
        Some(0) => Ok(n),
        c => Err(failed(
            c.unwrap_or(-1),
            dir,
            String::from_utf8_lossy(&err).into(),
            "archiving",
        )),
    }
}

/// The directories (relative to the destination, `.` for itself) that
/// unpacking `archive` enters or creates: every member's parents, its own
/// path when it is a directory, and the parents of hard-link targets.
///
/// Errors: [`BackendError::Escapes`] for a member or hard-link target that
/// is absolute, climbs with `..`, or lies under a symbolic link the
/// archive itself creates (`link -> /etc` then `link/passwd`); `Io` for
/// an archive `tar` cannot read.
fn archive_dirs(dir: &str, archive: &[u8]) -> BackendResult<BTreeSet<Vec<u8>>> {
    let bad = |name: &[u8]| {
        BackendError::Escapes(format!(
            "{dir}: archive member {}",
            String::from_utf8_lossy(name)
        ))
    };
    let parts = |name: &[u8]| -> BackendResult<Vec<Vec<u8>>> {
        if name.starts_with(b"/") {
            return Err(bad(name));
        }
        let mut v = Vec::new();
        for c in name.split(|b| *b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => return Err(bad(name)),
                c => v.push(c.to_vec()),
            }
        }
        Ok(v)
    };
    let unreadable = |e: std::io::Error| BackendError::Io {
        context: format!("unpacking into {dir}"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    };
    let mut links: BTreeSet<Vec<Vec<u8>>> = BTreeSet::new();
    // (path, is a directory) of members and hard-link targets.
    let mut paths: Vec<(Vec<u8>, Vec<Vec<u8>>, bool)> = Vec::new();
    let mut ar = tar::Archive::new(archive);
    for entry in ar.entries().map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.path_bytes().into_owned();
        let p = parts(&name)?;
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            links.insert(p.clone());
        }
        if kind.is_hard_link()
            && let Some(target) = entry.link_name_bytes()
        {
            let tp = parts(&target)?;
            paths.push((target.into_owned(), tp, false));
        }
        paths.push((name, p, kind.is_dir()));
    }
    let mut dirs = BTreeSet::from([b".".to_vec()]);
    for (name, p, is_dir) in paths {
        let through = (1..p.len()).any(|i| links.contains(&p[..i]));
        if through {
            return Err(bad(&name));
        }
        let upto = if is_dir {
            p.len()
        } else {
            p.len().saturating_sub(1)
        };
        for i in 1..=upto {
            dirs.insert(p[..i].join(&b'/'));
        }
    }
    Ok(dirs)
}

/// `path` as one line `printf %b` turns back into it: `\` and control
/// bytes (a newline in a name) as octal escapes.
fn escape_line(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len() + 1);
    for &b in path {
        if b == b'\\' || b < 0x20 || b == 0x7f {
            out.extend_from_slice(format!("\\0{b:03o}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out.push(b'\n');
    out
}

/// Script body of [`upload_tar`].
const UPLOAD_BODY: &str = r#"D=$P1
mkdir -p -- "$D" || exit 12
while IFS= read -r l; do
  [ -n "$l" ] || break
  case $l in *\\*) l=$(printf '%b.' "$l"); l=${l%.} ;; esac
  inside "$D/$l" f
done
exec tar xf - -C "$D""#;

/// Unpacks a tar archive into `dir` (created when missing), like
/// `kubectl cp` into the Pod. Before `tar` runs, every directory the
/// archive enters ([`archive_dirs`]) is checked by `CONFINE` in the
/// same exec — they travel ahead of the archive on stdin, one escaped
/// line each, ended by an empty line — so an existing link in the
/// workspace cannot lead the unpacking out of it.
///
/// Errors: `Escapes` (see [`archive_dirs`]), or `tar`'s message.
pub(crate) async fn upload_tar(t: &ExecTarget, dir: &str, archive: Bytes) -> BackendResult<()> {
    let dirs = archive_dirs(dir, &archive)?;
    let mut stdin = Vec::with_capacity(archive.len() + 64 * dirs.len());
    for d in &dirs {
        stdin.extend_from_slice(&escape_line(d));
    }
    stdin.push(b'\n');
    stdin.extend_from_slice(&archive);
    match run(
        t,
        &[(dir, Follow::Yes)],
        UPLOAD_BODY,
        &[],
        Some(Bytes::from(stdin)),
    )
    .await?
    {
        (0, _, _) => Ok(()),
        (c, _, err) => Err(failed(c, dir, err, "unpacking into")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_files_dirs_and_links() {
        let mut out = Vec::new();
        for (head, name, target, td, ts) in [
            ("81a4 5 1700000000.123456789", "a.txt", "", "0", ""),
            ("41ed 4096 1700000001", "dir", "", "0", ""),
            ("a1ff 3 1700000002.5", "ln", "dir", "1", "4096"),
            ("81a4 0 1700000003", "we\nird|name", "", "0", ""),
        ] {
            for f in [head, name, target, td, ts] {
                out.extend_from_slice(f.as_bytes());
                out.push(0);
            }
        }
        let v = parse_records(&out);
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].kind, FileKind::File);
        assert_eq!(v[0].size, 5);
        assert_eq!(v[0].mode, Some(0o644));
        assert_eq!(
            v[0].modified.unwrap(),
            UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
        );
        assert_eq!(v[1].kind, FileKind::Dir);
        assert_eq!(v[2].kind, FileKind::Symlink);
        assert!(v[2].target_is_dir && v[2].is_dir_like());
        assert_eq!(v[2].link_target.as_deref(), Some("dir"));
        assert_eq!(v[2].size, 4096);
        assert_eq!(
            v[2].modified.unwrap(),
            UNIX_EPOCH + Duration::new(1_700_000_002, 500_000_000)
        );
        assert_eq!(v[3].name, "we\nird|name");
    }

    use crate::backend::confine::test_shells::{Shell, shells};

    impl Shell {
        /// Runs `op_script(follows, body)` with `args` (paths first) in
        /// workspace `w`; returns exit code and stdout.
        fn op(
            &self,
            w: &std::path::Path,
            follows: &[Follow],
            body: &str,
            args: &[&str],
            stdin: &[u8],
        ) -> (i32, Vec<u8>) {
            self.run(w, &op_script(follows, body), args, stdin)
        }
    }

    /// A workspace `ws` next to an `outside` dir holding `secret.txt`,
    /// with links out of it (absolute, relative, through a directory,
    /// dangling) and links that stay in (one dangling).
    fn fixture() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("ws");
        let out = d.path().join("outside");
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(w.join("sub/in.txt"), "inside").unwrap();
        std::fs::write(out.join("secret.txt"), "TOP-SECRET").unwrap();
        let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, w.join(name)).unwrap();
        link("abs", out.join("secret.txt").to_str().unwrap());
        link("rel", "../outside/secret.txt");
        link("dir", out.to_str().unwrap());
        link("etc", "/etc");
        link("far", out.join("not/yet").to_str().unwrap());
        link("gone", "/no/such/dir/file");
        link("in", "sub/in.txt");
        link("new", "sub/new.txt");
        link("newdir", "made");
        link("loop", "loop");
        link("nl\n", out.to_str().unwrap());
        (d, w, out)
    }

    #[test]
    fn every_operation_refuses_links_out_of_the_workspace() {
        for sh in shells() {
            let (_d, w, out) = fixture();
            let ws = w.to_str().unwrap().to_string();
            let p = |rel: &str| format!("{ws}/{rel}");
            let secret = out.join("secret.txt");
            let n = sh.name;
            let (y, no) = (Follow::Yes, Follow::No);

            // Reads and writes through links out of the workspace.
            for bad in [
                "abs",
                "rel",
                "dir/secret.txt",
                "etc/passwd",
                "nl\n/secret.txt",
            ] {
                let r = sh.op(&w, &[y], READ_BODY, &[&p(bad), "-", "-"], b"");
                assert_eq!(r.0, ESCAPES, "{n}: read {bad:?}");
                assert!(r.1.is_empty(), "{n}: read {bad:?}");
                for mode in ["w", "a"] {
                    let r = sh.op(&w, &[y], WRITE_BODY, &[&p(bad), "1", mode], b"x");
                    assert_eq!(r.0, ESCAPES, "{n}: write {mode} {bad:?}");
                }
            }
            for bad in ["gone", "far"] {
                let r = sh.op(&w, &[y], WRITE_BODY, &[&p(bad), "1", "w"], b"x");
                assert_eq!(r.0, ESCAPES, "{n}: write {bad}");
            }
            let r = sh.op(&w, &[y], READ_BODY, &[&p("in"), "-", "-"], b"");
            assert_eq!(r, (0, b"inside".to_vec()), "{n}");
            let r = sh.op(&w, &[y], READ_BODY, &[&p("in"), "1", "3"], b"");
            assert_eq!(r, (0, b"nsi".to_vec()), "{n}");
            // A dangling link whose target would be inside is written
            // through (BusyBox's `readlink -f` would refuse it).
            let r = sh.op(&w, &[y], WRITE_BODY, &[&p("new"), "2", "w"], b"hi");
            assert_eq!(r.0, 0, "{n}: write through a dangling link");
            assert_eq!(std::fs::read(w.join("sub/new.txt")).unwrap(), b"hi", "{n}");
            assert!(w.join("new").is_symlink(), "{n}");

            // mkdir: through a link out (existing dir, or dangling) is
            // refused and creates nothing; through one in, it works.
            for (bad, mode) in [("dir/made", "p"), ("dir/made", "-"), ("far/x", "p")] {
                let r = sh.op(&w, &[y], MKDIR_BODY, &[&p(bad), mode], b"");
                assert_eq!(r.0, ESCAPES, "{n}: mkdir {mode} {bad}");
            }
            assert!(
                !out.join("made").exists() && !out.join("not").exists(),
                "{n}"
            );
            let r = sh.op(&w, &[y], MKDIR_BODY, &[&p("newdir/a/b"), "p"], b"");
            assert_eq!(r.0, 0, "{n}");
            assert!(w.join("made/a/b").is_dir(), "{n}");
            let r = sh.op(&w, &[y], MKDIR_BODY, &[&p("sub"), "-"], b"");
            assert_eq!(r.0, EXISTS, "{n}");

            // stat and list: the link itself is fine and tells nothing of
            // its target; anything through it is refused.
            let r = sh.op(&w, &[no], &stat_body(), &[&p("dir/secret.txt"), "x"], b"");
            assert_eq!(r.0, ESCAPES, "{n}: stat through");
            let r = sh.op(&w, &[no], &stat_body(), &[&p("abs"), "abs"], b"");
            assert_eq!(r.0, 0, "{n}");
            let st = &parse_records(&r.1)[0];
            assert_eq!(
                (st.kind, st.size, st.target_is_dir),
                (FileKind::Symlink, 0, false)
            );
            assert_eq!(st.link_target.as_deref(), secret.to_str(), "{n}");
            let r = sh.op(&w, &[no], &stat_body(), &[&p("in"), "in"], b"");
            assert_eq!(
                parse_records(&r.1)[0].size,
                6,
                "{n}: a link inside shows its target"
            );
            let r = sh.op(&w, &[y], &list_body(), &[&p("dir")], b"");
            assert_eq!(r.0, ESCAPES, "{n}: list through");
            let r = sh.op(&w, &[y], &list_body(), &[&ws], b"");
            assert_eq!(r.0, 0, "{n}");
            let entries = parse_records(&r.1);
            let dir = entries.iter().find(|e| e.name == "dir").unwrap();
            assert!(!dir.target_is_dir && dir.size == 0, "{n}: {dir:?}");
            assert!(entries.iter().any(|e| e.name == "nl\n"), "{n}");
            assert!(entries.iter().find(|e| e.name == "sub").unwrap().kind == FileKind::Dir);

            // create_new, remove and rename act on a link itself, and
            // refuse what lies behind one.
            let r = sh.op(&w, &[no], CREATE_NEW_BODY, &[&p("dir/n.txt"), "1"], b"x");
            assert_eq!(r.0, ESCAPES, "{n}: create_new through");
            let r = sh.op(&w, &[no], CREATE_NEW_BODY, &[&p("abs"), "1"], b"x");
            assert_eq!(r.0, EXISTS, "{n}: create_new on a link");
            let r = sh.op(&w, &[no], CREATE_NEW_BODY, &[&p("sub/c.txt"), "2"], b"ok");
            assert_eq!(r.0, 0, "{n}");
            assert_eq!(std::fs::read(w.join("sub/c.txt")).unwrap(), b"ok");
            let r = sh.op(&w, &[no], REMOVE_BODY, &[&p("dir/secret.txt"), "-"], b"");
            assert_eq!(r.0, ESCAPES, "{n}: remove through");
            let r = sh.op(&w, &[no], REMOVE_BODY, &[&ws, "r"], b"");
            assert_eq!(r.0, IS_ROOT, "{n}: remove the root");
            let r = sh.op(
                &w,
                &[no, no],
                RENAME_BODY,
                &[&p("dir/secret.txt"), &p("x")],
                b"",
            );
            assert_eq!(r.0, ESCAPES, "{n}: rename from behind a link");
            let r = sh.op(
                &w,
                &[no, no],
                RENAME_BODY,
                &[&p("sub/c.txt"), &p("dir/c.txt")],
                b"",
            );
            assert_eq!(r.0, ESCAPES, "{n}: rename to behind a link");
            // Onto a link to a directory outside: the link is replaced;
            // `mv` alone would have moved the file into that directory.
            let r = sh.op(
                &w,
                &[no, no],
                RENAME_BODY,
                &[&p("sub/c.txt"), &p("dir")],
                b"",
            );
            assert_eq!(r.0, 0, "{n}: rename onto a link");
            assert!(!out.join("c.txt").exists(), "{n}");
            assert_eq!(std::fs::read(w.join("dir")).unwrap(), b"ok", "{n}");
            let r = sh.op(&w, &[no], REMOVE_BODY, &[&p("abs"), "-"], b"");
            assert_eq!(r.0, 0, "{n}: remove a link");
            assert!(
                !w.join("abs").exists() && !w.join("abs").is_symlink(),
                "{n}"
            );
            let r = sh.op(&w, &[no, no], RENAME_BODY, &[&p("in"), &p("in2")], b"");
            assert_eq!(r.0, 0, "{n}");
            assert!(w.join("in2").is_symlink(), "{n}: the link itself moved");

            // Tar both ways.
            let r = sh.op(&w, &[y], DOWNLOAD_BODY, &[&p("nl\n")], b"");
            assert_eq!(r.0, ESCAPES, "{n}: download through");
            let r = sh.op(&w, &[y], DOWNLOAD_BODY, &[&p("sub")], b"");
            assert_eq!(r.0, 0, "{n}");
            let archive = r.1;
            let upload = |dir: &str, archive: &[u8]| {
                let mut stdin = Vec::new();
                for d in archive_dirs(dir, archive).unwrap() {
                    stdin.extend_from_slice(&escape_line(&d));
                }
                stdin.push(b'\n');
                stdin.extend_from_slice(archive);
                sh.op(&w, &[y], UPLOAD_BODY, &[&p(dir)], &stdin).0
            };
            assert_eq!(upload("copy", &archive), 0, "{n}");
            assert_eq!(std::fs::read(w.join("copy/new.txt")).unwrap(), b"hi", "{n}");
            // Into a link out, or through one (a name with a newline too).
            assert_eq!(upload("nl\n", &archive), ESCAPES, "{n}");
            // (`dir` is a file by now: the rename above replaced it.)
            for name in ["etc/x.txt", "nl\n/x.txt"] {
                let mut b = tar::Builder::new(Vec::new());
                let mut h = tar::Header::new_gnu();
                h.set_size(1);
                h.set_mode(0o644);
                b.append_data(&mut h, name, &b"x"[..]).unwrap();
                let one = b.into_inner().unwrap();
                assert_eq!(upload(".", &one), ESCAPES, "{n}: {name:?}");
            }
            assert!(!out.join("x.txt").exists(), "{n}");
            assert_eq!(std::fs::read(&secret).unwrap(), b"TOP-SECRET", "{n}");

            // A link loop is ELOOP, not an escape.
            let r = sh.op(&w, &[y], READ_BODY, &[&p("loop"), "-", "-"], b"");
            assert_eq!(r.0, LOOP, "{n}");
            // Paths outside the workspace are the Pod's own business.
            let r = sh.op(
                &w,
                &[y],
                READ_BODY,
                &[secret.to_str().unwrap(), "-", "-"],
                b"",
            );
            assert_eq!(r.0, 0, "{n}");
        }
    }

    #[test]
    fn archives_that_climb_or_go_through_their_own_links_are_refused() {
        fn archive(f: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
            let mut b = tar::Builder::new(Vec::new());
            f(&mut b);
            b.into_inner().unwrap()
        }
        fn file(b: &mut tar::Builder<Vec<u8>>, name: &str) {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            // Written by hand: `append_data` itself refuses `..`.
            h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_cksum();
            b.append(&h, &b""[..]).unwrap();
        }
        fn link(b: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, name: &str, to: &str) {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_entry_type(kind);
            h.set_link_name(to).unwrap();
            b.append_data(&mut h, name, &b""[..]).unwrap();
        }
        let ok = archive(|b| {
            file(b, "./a/b/c.txt");
            file(b, "top.txt");
            link(b, tar::EntryType::Symlink, "a/l", "/etc");
            link(b, tar::EntryType::Link, "a/h", "a/b/c.txt");
        });
        let dirs: Vec<String> = archive_dirs("d", &ok)
            .unwrap()
            .into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect();
        assert_eq!(dirs, [".", "a", "a/b"]);
        for bad in [
            archive(|b| file(b, "../x")),
            archive(|b| file(b, "a/../../x")),
            archive(|b| file(b, "/etc/x")),
            archive(|b| {
                link(b, tar::EntryType::Symlink, "l", "/etc");
                file(b, "l/passwd");
            }),
            // The link may come after what goes through it.
            archive(|b| {
                file(b, "l/passwd");
                link(b, tar::EntryType::Symlink, "l", "/etc");
            }),
            archive(|b| link(b, tar::EntryType::Link, "h", "/etc/passwd")),
            archive(|b| link(b, tar::EntryType::Link, "h", "../x")),
        ] {
            assert!(
                matches!(archive_dirs("d", &bad), Err(BackendError::Escapes(_))),
                "{:?}",
                archive_dirs("d", &bad)
            );
        }
        assert!(archive_dirs("d", b"not a tar archive, just text").is_err());
    }

    #[test]
    fn escaped_lines_decode_back() {
        assert_eq!(escape_line(b"a b"), b"a b\n");
        assert_eq!(escape_line(b"x\ny\\z"), b"x\\0012y\\0134z\n");
    }
}
