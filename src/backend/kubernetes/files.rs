//! File operations in the Pod, each one exec (one round trip): byte-exact
//! reads with `cat` / `tail | head` for ranges, atomic writes through a
//! temp file and `mv`, directory listing and stat as NUL-separated
//! records from `stat -c` (GNU coreutils and BusyBox alike), and tar
//! streams for whole trees (`kubectl cp`'s way).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::exec::ExecTarget;
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
const SHORT: i32 = 15;
const ESCAPES: i32 = 16;

/// Defines `inside P`: a path under the workspace (`$WSBENCH_WORKDIR`)
/// must stay there once its links are followed, or the script exits
/// [`ESCAPES`]; paths elsewhere in the Pod are not judged. For a missing
/// path its nearest existing ancestor is checked (the rest cannot be a
/// link yet). A link that `readlink -f` cannot resolve (dangling, its
/// target's directory missing) is refused, as a write through it would
/// create its target wherever it points. Sets `R` to the resolved path
/// when `P` itself exists or is a link, else to `P`.
const CONFINE: &str = r#"W=$WSBENCH_WORKDIR
Wr=$(readlink -f -- "$W" 2>/dev/null) || Wr=$W
inside() {
  R=$1
  case $1 in "$W"|"$W"/*) ;; *) return 0 ;; esac
  c=$1
  while [ ! -e "$c" ] && [ ! -L "$c" ]; do c=$(dirname -- "$c"); done
  r=$(readlink -f -- "$c" 2>/dev/null) || exit 16
  [ -n "$r" ] || exit 16
  case $r in "$Wr"|"$Wr"/*) ;; *) exit 16 ;; esac
  if [ "$c" = "$1" ]; then R=$r; fi
}
"#;

/// The stat format: raw mode in hex, size, mtime (nanoseconds where
/// `stat` knows `%.9Y`, as GNU does; whole seconds on BusyBox).
const STAT_PRELUDE: &str = r#"case $(stat -c %.9Y / 2>/dev/null) in
  *.*) F='%f %s %.9Y' ;;
  *) F='%f %s %Y' ;;
esac
rec() {
  s=$(stat -c "$F" -- "$1") || return 0
  t=; ts=; td=0
  if [ -L "$1" ]; then
    t=$(readlink -- "$1")
    [ -d "$1" ] && td=1
    ts=$(stat -L -c %s -- "$1" 2>/dev/null)
  fi
  printf '%s\0%s\0%s\0%s\0%s\0' "$s" "$2" "$t" "$td" "$ts"
}
"#;

/// Runs a helper script with `args`, feeding `stdin`; returns exit code,
/// stdout and stderr.
pub(crate) async fn run(
    t: &ExecTarget,
    script: &str,
    args: &[&str],
    stdin: Option<Bytes>,
) -> BackendResult<(i32, Vec<u8>, String)> {
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        script.into(),
        "wsbench".into(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    let req = ExecRequest {
        argv,
        cwd: Some("/".into()),
        stdin,
        timeout: Some(FILE_TIMEOUT),
        env: [("WSBENCH_WORKDIR".to_string(), t.workdir.clone())].into(),
        ..Default::default()
    };
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
            context: format!("file operation on {}", args.first().unwrap_or(&"")),
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
        ESCAPES => BackendError::Escapes(path.into()),
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

/// Reads a file, or `range` of it.
pub(crate) async fn read(
    t: &ExecTarget,
    path: &str,
    range: Option<ByteRange>,
) -> BackendResult<Vec<u8>> {
    let script = format!(
        r#"{CONFINE}if [ ! -e "$1" ]; then exit 10; fi
inside "$1"
if [ -d "$1" ]; then exit 11; fi
if [ "$2" = - ]; then exec cat -- "$1"; fi
if [ "$3" = 0 ]; then exit 0; fi
tail -c +"$(($2 + 1))" -- "$1" | head -c "$3""#
    );
    let (off, len) = match range {
        Some(r) => (r.offset.to_string(), r.len.to_string()),
        None => ("-".into(), "-".into()),
    };
    match run(t, &script, &[path, &off, &len], None).await? {
        (0, out, _) => Ok(out),
        (c, _, err) => Err(failed(c, path, err, "reading")),
    }
}

/// The write script: `$1` path, `$2` byte count or `-` (until EOF),
/// `$3` `w` (atomic replace) or `a` (append). A link is written through
/// (its target replaced, as a local write would), after [`CONFINE`]'s
/// check.
fn write_script() -> String {
    format!("{CONFINE}{WRITE_BODY}")
}

const WRITE_BODY: &str = r#"inside "$1"
p=$R
d=$(dirname -- "$p")
if [ -d "$p" ] && [ ! -L "$p" ]; then exit 11; fi
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
if [ "$3" = a ]; then
  if [ "$2" = - ]; then cat >> "$p"; exit $?; fi
  head -c "$2" >> "$p"; exit $?
fi
tmp="$d/.wsbench-tmp-$$"
if [ "$2" = - ]; then cat > "$tmp" || { rm -f -- "$tmp"; exit 1; }
else
  head -c "$2" > "$tmp" || { rm -f -- "$tmp"; exit 1; }
  if [ "$(wc -c < "$tmp")" -ne "$2" ]; then rm -f -- "$tmp"; exit 15; fi
fi
mv -f -- "$tmp" "$p""#;

/// Writes `data` to `path` atomically (temp file in the same directory,
/// then `mv`), creating parents.
pub(crate) async fn write(t: &ExecTarget, path: &str, data: &[u8]) -> BackendResult<()> {
    let n = data.len().to_string();
    match run(
        t,
        &write_script(),
        &[path, &n, "w"],
        Some(Bytes::copy_from_slice(data)),
    )
    .await?
    {
        (0, _, _) => Ok(()),
        (SHORT, _, _) => Err(BackendError::Io {
            context: format!("writing {path}"),
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the pod received fewer bytes than were sent",
            ),
        }),
        (c, _, err) => Err(failed(c, path, err, "writing")),
    }
}

/// Appends `data` to `path`, creating it and its parents.
pub(crate) async fn append(t: &ExecTarget, path: &str, data: &[u8]) -> BackendResult<()> {
    let n = data.len().to_string();
    match run(
        t,
        &write_script(),
        &[path, &n, "a"],
        Some(Bytes::copy_from_slice(data)),
    )
    .await?
    {
        (0, _, _) => Ok(()),
        (c, _, err) => Err(failed(c, path, err, "appending to")),
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
    let mut process = t
        .spawn(crate::backend::SpawnRequest {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                write_script(),
                "wsbench".into(),
                path.into(),
                "-".into(),
                "w".into(),
            ],
            cwd: Some("/".into()),
            env: [("WSBENCH_WORKDIR".to_string(), t.workdir.clone())].into(),
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
    let n = copied.map_err(|e| BackendError::from_io(e, path))?;
    closed.map_err(|e| BackendError::from_io(e, path))?;
    match code {
        Some(0) => Ok(n),
        Some(c) => Err(failed(c, path, err, "writing")),
        None => Err(BackendError::Io {
            context: format!("writing {path}"),
            source: std::io::Error::other("the upload ended without an exit status"),
        }),
    }
}

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
            size: if kind == FileKind::Symlink {
                target_size.unwrap_or(own_size)
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

/// Lists a directory in one exec, sorted by name.
pub(crate) async fn list(t: &ExecTarget, path: &str) -> BackendResult<Vec<FileStat>> {
    let script = format!(
        r#"{STAT_PRELUDE}if [ ! -e "$1" ]; then exit 10; fi
if [ ! -d "$1" ]; then exit 12; fi
cd -- "$1" || exit 1
for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then rec "$f" "$f"; fi
done"#
    );
    match run(t, &script, &[path], None).await? {
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
    let script = format!(
        r#"{STAT_PRELUDE}if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit 10; fi
rec "$1" "$2""#
    );
    let name = match bpath::file_name(path) {
        "" => "/".to_string(),
        n => n.to_string(),
    };
    match run(t, &script, &[path, &name], None).await? {
        (0, out, _) => parse_records(&out)
            .into_iter()
            .next()
            .ok_or_else(|| BackendError::NotFound(path.into())),
        (c, _, err) => Err(failed(c, path, err, "stat")),
    }
}

/// Streams `dir` as a tar archive (`tar cf - -C <dir> .`) into `sink`,
/// like `kubectl cp` from the Pod. Returns the bytes sent.
pub(crate) async fn download_tar(
    t: &ExecTarget,
    dir: &str,
    sink: mpsc::Sender<Bytes>,
) -> BackendResult<u64> {
    const SCRIPT: &str = r#"if [ ! -d "$1" ]; then exit 10; fi
exec tar cf - -C "$1" ."#;
    let req = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            SCRIPT.into(),
            "wsbench".into(),
            dir.into(),
        ],
        cwd: Some("/".into()),
        timeout: Some(FILE_TIMEOUT),
        ..Default::default()
    };
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

/// Unpacks a tar archive into `dir` (created when missing), like
/// `kubectl cp` into the Pod.
pub(crate) async fn upload_tar(t: &ExecTarget, dir: &str, archive: Bytes) -> BackendResult<()> {
    const SCRIPT: &str = r#"mkdir -p -- "$1" || exit 12
exec tar xf - -C "$1""#;
    match run(t, SCRIPT, &[dir], Some(archive)).await? {
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

    #[test]
    fn confine_refuses_links_out_of_the_workspace() {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("ws");
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::write(w.join("sub/in.txt"), "x").unwrap();
        let outside = d.path().join("outside.txt");
        std::fs::write(&outside, "secret").unwrap();
        let link = |name: &str, to: &std::path::Path| {
            std::os::unix::fs::symlink(to, w.join(name)).unwrap();
        };
        link("out", &outside);
        link("etc", std::path::Path::new("/etc"));
        link("rel", std::path::Path::new("../outside.txt"));
        link("gone", std::path::Path::new("/no/such/dir/file"));
        link("in", std::path::Path::new("sub/in.txt"));
        link("new", std::path::Path::new("sub/new.txt"));
        let check = |p: &str| {
            let out = std::process::Command::new("sh")
                .args([
                    "-c",
                    &format!("{CONFINE}inside \"$1\"; echo \"$R\""),
                    "t",
                    p,
                ])
                .env("WSBENCH_WORKDIR", &w)
                .output()
                .unwrap();
            let r = String::from_utf8(out.stdout).unwrap().trim().to_string();
            (out.status.code(), r)
        };
        let ws = w.to_str().unwrap();
        for bad in ["out", "etc", "etc/passwd", "rel", "gone", "etc/new.txt"] {
            assert_eq!(check(&format!("{ws}/{bad}")).0, Some(ESCAPES), "{bad}");
        }
        let real = |rel: &str| w.canonicalize().unwrap().join(rel).display().to_string();
        assert_eq!(check(&format!("{ws}/in")), (Some(0), real("sub/in.txt")));
        assert_eq!(check(&format!("{ws}/new")), (Some(0), real("sub/new.txt")));
        let missing = format!("{ws}/sub/a/b.txt");
        assert_eq!(check(&missing), (Some(0), missing.clone()));
        // Paths outside the workspace are the Pod's own business.
        assert_eq!(check("/etc/passwd"), (Some(0), "/etc/passwd".into()));
    }

    #[test]
    fn scripts_are_valid_shell() {
        for s in [write_script(), STAT_PRELUDE.to_string()] {
            let ok = std::process::Command::new("sh")
                .args(["-n", "-c", &s])
                .status()
                .map(|s| s.success())
                .unwrap_or(true);
            assert!(ok, "{s}");
        }
    }
}
