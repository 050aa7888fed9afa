//! File operations inside a container, for workspaces without a bind
//! mount (named volume or ephemeral) and for paths outside `/workspace`.
//!
//! * Reads stream the archive API's tar (`GET /containers/{id}/archive`)
//!   and keep only the wanted bytes; symbolic links are followed (inside
//!   the container, at most [`MAX_LINK_HOPS`]).
//! * Writes upload a one-file tar next to the target through the archive
//!   API (`PUT .../archive`), streamed from a host spool file, then rename
//!   it over the target in one exec — atomic, and the file keeps the mode
//!   of the one it replaces.
//! * Append, exclusive create, list, stat, remove, rename and mkdir are one
//!   small `sh` script each (POSIX `sh`, `stat -c`, `find`: Debian and
//!   BusyBox images alike); their exit codes map to [`BackendError`]s.
//!   Modification times from `stat -c %Y` are whole seconds.
//! * **Links out of `/workspace`** are refused ([`BackendError::Escapes`])
//!   by every operation, as with a bind mount: the scripts start with the
//!   shared check of module `confine`, and the archive API's reads and
//!   writes go to a path that check resolved first (one more exec), since
//!   the API itself follows links anywhere in the container.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::{Duration, SystemTime};

use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio_util::io::{ReaderStream, StreamReader};

use super::api_error;
use super::exec::ExecTarget;
use crate::backend::bubblewrap::hostdir::MAX_LINK_HOPS;
use crate::backend::confine::{ESCAPES, Follow, LOOP, op_script};
use crate::backend::path as bpath;
use crate::backend::{
    BackendError, BackendResult, ByteRange, ExecRequest, FileKind, FileStat, StreamKind,
};

/// Longest a file script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

// The scripts below are bodies for `op_script`: their paths, checked
// and resolved by `CONFINE`, are `$P1` (and `$P2`); `$1`... are their other
// arguments.

/// Paths: the uploaded temp file (as is), the target (followed).
const FINISH_WRITE: &str = r#"tmp=$P1; t=$P2
if [ -d "$t" ] && [ ! -L "$t" ]; then rm -f -- "$tmp"; exit 67; fi
if [ -L "$t" ]; then cat -- "$tmp" > "$t"; rc=$?; rm -f -- "$tmp"; exit $rc; fi
if [ -e "$t" ]; then m=$(stat -c %a -- "$t" 2>/dev/null) && chmod "$m" -- "$tmp"; fi
mv -f -- "$tmp" "$t"
"#;

/// Path: the file (followed).
const APPEND: &str = r#"p=$P1
[ -d "$p" ] && exit 67
d=${p%/*}
mkdir -p -- "${d:-/}" && cat >> "$p"
"#;

/// Path: the file (a link there is not followed: it makes the name taken).
const CREATE_NEW: &str = r#"p=$P1
d=${p%/*}
mkdir -p -- "${d:-/}" || exit 1
if [ -e "$p" ] || [ -L "$p" ]; then exit 17; fi
( set -C; : > "$p" ) 2>/dev/null || exit 17
cat > "$p"
"#;

/// Path: the directory (followed). A link's target is stat'ed only when
/// the link stays in the workspace, as `HostDir` does.
const LIST: &str = r#"d=$P1
[ -e "$d" ] || [ -L "$d" ] || exit 66
[ -d "$d" ] || exit 68
cd -- "$d" || exit 13
find . -mindepth 1 -maxdepth 1 -exec stat -c 'E %f %s %Y %n' -- {} + || exit 1
find . -mindepth 1 -maxdepth 1 -type l | while IFS= read -r l; do
  if confined "$d/${l#./}" f; then stat -L -c 'L %f %s %n' -- "$l" 2>/dev/null; fi
  printf 'T %s\n%s\n' "$l" "$(readlink -- "$l")"
done
exit 0
"#;

/// Path: the entry (not followed).
const STAT: &str = r#"p=$P1
[ -e "$p" ] || [ -L "$p" ] || exit 66
stat -c 'E %f %s %Y %n' -- "$p" || exit 1
if [ -L "$p" ]; then
  if confined "$p" f; then stat -L -c 'L %f %s %n' -- "$p" 2>/dev/null; fi
  printf 'T %s\n%s\n' "$p" "$(readlink -- "$p")"
fi
exit 0
"#;

/// Path: the entry (not followed); `$1` is 1 for recursive. The
/// workspace's mount point itself is refused.
const REMOVE: &str = r#"p=$P1
[ -e "$p" ] || [ -L "$p" ] || exit 66
if [ "$p" = "$W" ] || [ "$p" = "$Wr" ]; then exit 13; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$1" = 1 ]; then rm -rf -- "$p"; else rmdir -- "$p"; fi
else
  rm -f -- "$p"
fi
"#;

/// Paths: source and target (neither followed). A link at the target is
/// replaced, as `rename(2)` does: `mv` alone would move into the
/// directory it points to.
const RENAME: &str = r#"a=$P1 b=$P2
[ -e "$a" ] || [ -L "$a" ] || exit 66
for x in "$a" "$b"; do
  if [ "$x" = "$W" ] || [ "$x" = "$Wr" ]; then exit 13; fi
done
[ "$a" = "$b" ] && exit 0
d=${b%/*}
mkdir -p -- "${d:-/}" || exit 1
if [ -d "$b" ] && [ ! -L "$b" ]; then
  [ -d "$a" ] || exit 67
  rmdir -- "$b" 2>/dev/null || exit 39
fi
if [ -L "$b" ]; then rm -f -- "$b" || exit 1; fi
mv -f -- "$a" "$b"
"#;

/// Path: the directory (followed); `$1` is 1 for parents.
const MKDIR: &str = r#"p=$P1
if [ "$1" = 1 ]; then
  [ -e "$p" ] && [ ! -d "$p" ] && exit 17
  mkdir -p -- "$p"
else
  [ -e "$p" ] || [ -L "$p" ] && exit 17
  mkdir -- "$p"
fi
"#;

/// Path: any (as asked); prints it resolved.
const RESOLVE: &str = r#"printf '%s' "$P1""#;

/// File operations through a container.
#[derive(Clone)]
pub(crate) struct ContainerFiles {
    /// The container and user the scripts run as.
    pub target: ExecTarget,
}

struct ScriptOutput {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// What the first entry of a downloaded archive was.
enum FirstEntry {
    File(Vec<u8>),
    Dir,
    Link(String),
    Other,
}

fn map_code(code: Option<i32>, stderr: &[u8], path: &str) -> BackendError {
    let text = String::from_utf8_lossy(stderr).trim().to_string();
    let p = path.to_string();
    match code {
        Some(ESCAPES) => BackendError::Escapes(p),
        Some(LOOP) => BackendError::Io {
            context: p,
            source: std::io::Error::from_raw_os_error(libc::ELOOP),
        },
        Some(66) => BackendError::NotFound(p),
        Some(67) => BackendError::IsADirectory(p),
        Some(68) => BackendError::NotADirectory(p),
        Some(17) => BackendError::AlreadyExists(p),
        Some(13) => BackendError::PermissionDenied(p),
        _ if text.contains("No such file") => BackendError::NotFound(p),
        _ if text.contains("Permission denied") => BackendError::PermissionDenied(p),
        _ if text.contains("Is a directory") => BackendError::IsADirectory(p),
        _ if text.contains("Not a directory") => BackendError::NotADirectory(p),
        _ if text.contains("exists") => BackendError::AlreadyExists(p),
        Some(39) => BackendError::Io {
            context: p,
            source: std::io::Error::other("directory not empty"),
        },
        _ => BackendError::Io {
            context: p,
            source: std::io::Error::other(if text.is_empty() {
                format!("file script ended with {code:?}")
            } else {
                text
            }),
        },
    }
}

fn hex_mode(s: &str) -> Option<u32> {
    u32::from_str_radix(s, 16).ok()
}

fn kind_of(mode: u32) -> FileKind {
    match mode & 0o170000 {
        0o040000 => FileKind::Dir,
        0o100000 => FileKind::File,
        0o120000 => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// Parses the `E`/`L`/`T` records printed by [`LIST`] and [`STAT`].
fn parse_stat_records(out: &[u8]) -> Vec<FileStat> {
    let text = String::from_utf8_lossy(out);
    let mut entries: Vec<(String, FileStat)> = Vec::new();
    let mut followed: BTreeMap<String, (u32, u64)> = BTreeMap::new();
    let mut targets: BTreeMap<String, String> = BTreeMap::new();
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("E ") {
            let mut it = rest.splitn(4, ' ');
            let (Some(m), Some(sz), Some(mt), Some(name)) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                continue;
            };
            let Some(mode) = hex_mode(m) else { continue };
            let kind = kind_of(mode);
            let modified = mt
                .parse::<u64>()
                .ok()
                .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s));
            entries.push((
                name.to_string(),
                FileStat {
                    name: bpath::file_name(name).to_string(),
                    kind,
                    size: if kind == FileKind::File {
                        sz.parse().unwrap_or(0)
                    } else {
                        0
                    },
                    modified,
                    link_target: None,
                    target_is_dir: false,
                    mode: Some(mode & 0o7777),
                },
            ));
        } else if let Some(rest) = line.strip_prefix("L ") {
            let mut it = rest.splitn(3, ' ');
            if let (Some(m), Some(sz), Some(name)) = (it.next(), it.next(), it.next())
                && let Some(mode) = hex_mode(m)
            {
                followed.insert(name.to_string(), (mode, sz.parse().unwrap_or(0)));
            }
        } else if let Some(name) = line.strip_prefix("T ") {
            let target = lines.next().unwrap_or("").to_string();
            targets.insert(name.to_string(), target);
        }
    }
    entries
        .into_iter()
        .map(|(full, mut st)| {
            if st.kind == FileKind::Symlink {
                st.link_target = targets.get(&full).cloned();
                if let Some((mode, size)) = followed.get(&full) {
                    st.target_is_dir = kind_of(*mode) == FileKind::Dir;
                    st.size = if kind_of(*mode) == FileKind::File {
                        *size
                    } else {
                        0
                    };
                }
            }
            st
        })
        .collect()
}

async fn read_padded(r: &mut (impl AsyncRead + Unpin), size: u64) -> std::io::Result<Vec<u8>> {
    let mut data = vec![0u8; size as usize];
    r.read_exact(&mut data).await?;
    skip(r, (512 - size % 512) % 512).await?;
    Ok(data)
}

async fn skip(r: &mut (impl AsyncRead + Unpin), mut n: u64) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    while n > 0 {
        let want = n.min(buf.len() as u64) as usize;
        let got = r.read(&mut buf[..want]).await?;
        if got == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        n -= got as u64;
    }
    Ok(())
}

fn trim_nul(mut v: Vec<u8>) -> String {
    while v.last() == Some(&0) {
        v.pop();
    }
    String::from_utf8_lossy(&v).into_owned()
}

/// Reads the first real entry of a tar stream (PAX and GNU long-name
/// headers are applied), keeping only `range` of a regular file.
async fn first_entry(
    mut r: impl AsyncRead + Unpin,
    range: Option<ByteRange>,
) -> std::io::Result<FirstEntry> {
    let mut long_link: Option<String> = None;
    let mut pax_size: Option<u64> = None;
    loop {
        let mut block = [0u8; 512];
        r.read_exact(&mut block).await?;
        if block.iter().all(|b| *b == 0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "empty archive",
            ));
        }
        let h = tar::Header::from_byte_slice(&block);
        let size = h.size()?;
        let ty = h.entry_type();
        if ty.is_pax_local_extensions() || ty.is_pax_global_extensions() {
            let data = read_padded(&mut r, size).await?;
            for ext in tar::PaxExtensions::new(&data).flatten() {
                match ext.key() {
                    Ok("linkpath") => long_link = ext.value().ok().map(str::to_string),
                    Ok("size") => pax_size = ext.value().ok().and_then(|v| v.parse().ok()),
                    _ => {}
                }
            }
            continue;
        }
        if ty.is_gnu_longname() {
            read_padded(&mut r, size).await?;
            continue;
        }
        if ty.is_gnu_longlink() {
            long_link = Some(trim_nul(read_padded(&mut r, size).await?));
            continue;
        }
        let size = pax_size.unwrap_or(size);
        if ty.is_file() || ty.is_contiguous() {
            let (offset, len) = match range {
                Some(rg) => (
                    rg.offset.min(size),
                    rg.len.min(size.saturating_sub(rg.offset)),
                ),
                None => (0, size),
            };
            skip(&mut r, offset).await?;
            let mut data = vec![0u8; len as usize];
            r.read_exact(&mut data).await?;
            return Ok(FirstEntry::File(data));
        }
        if ty.is_dir() {
            return Ok(FirstEntry::Dir);
        }
        if ty.is_symlink() {
            let target = long_link.take().unwrap_or_else(|| {
                h.link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            });
            return Ok(FirstEntry::Link(target));
        }
        return Ok(FirstEntry::Other);
    }
}

impl ContainerFiles {
    fn abs(&self, path: &str) -> String {
        bpath::join(&self.target.workdir, path)
    }

    /// Numeric uid/gid of the exec user, for tar headers (0 when the user
    /// is a name or unset).
    fn owner(&self) -> (u64, u64) {
        let Some(u) = &self.target.user else {
            return (0, 0);
        };
        let mut it = u.splitn(2, ':');
        let uid = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let gid = it.next().and_then(|s| s.parse().ok()).unwrap_or(uid);
        (uid, gid)
    }

    /// Runs `op_script(follows of paths, body)` with the paths, then
    /// `args`, from `/` with the workdir in `WSBENCH_WORKDIR`.
    async fn op(
        &self,
        paths: &[(&str, Follow)],
        body: &str,
        args: &[&str],
        stdin: Option<Bytes>,
    ) -> BackendResult<ScriptOutput> {
        let follows: Vec<Follow> = paths.iter().map(|(_, f)| *f).collect();
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            op_script(&follows, body),
            "wsbench-file".into(),
        ];
        argv.extend(paths.iter().map(|(p, _)| p.to_string()));
        argv.extend(args.iter().map(|a| a.to_string()));
        let mut req = ExecRequest::new(argv);
        req.cwd = Some("/".into());
        req.stdin = stdin;
        req.timeout = Some(SCRIPT_TIMEOUT);
        req.env
            .insert("WSBENCH_WORKDIR".into(), self.target.workdir.clone());
        let (tx, mut rx) = mpsc::channel::<crate::backend::OutputChunk>(64);
        let collect = tokio::spawn(async move {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            while let Some(c) = rx.recv().await {
                match c.stream {
                    StreamKind::Stdout => out.extend_from_slice(&c.data),
                    StreamKind::Stderr => err.extend_from_slice(&c.data),
                }
            }
            (out, err)
        });
        let outcome = self.target.exec(req, Some(tx)).await?;
        let (stdout, stderr) = collect.await.unwrap_or_default();
        Ok(ScriptOutput {
            code: if outcome.timed_out {
                None
            } else {
                outcome.exit_code
            },
            stdout,
            stderr,
        })
    }

    async fn op_ok(
        &self,
        paths: &[(&str, Follow)],
        body: &str,
        args: &[&str],
        path: &str,
    ) -> BackendResult<ScriptOutput> {
        let out = self.op(paths, body, args, None).await?;
        if out.code == Some(0) {
            Ok(out)
        } else {
            Err(map_code(out.code, &out.stderr, path))
        }
    }

    /// `abs` with its links resolved inside the container, for the archive
    /// API (which would follow links out of the workspace itself).
    /// Paths outside the workspace come back unchanged, without an exec.
    ///
    /// Errors: `Escapes` when a link leads out of the workspace.
    async fn resolve(&self, abs: &str, follow: Follow, path: &str) -> BackendResult<String> {
        let w = &self.target.workdir;
        let under = abs == w || abs.starts_with(&format!("{}/", w.trim_end_matches('/')));
        if !under {
            return Ok(abs.to_string());
        }
        let out = self.op_ok(&[(abs, follow)], RESOLVE, &[], path).await?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    async fn download_first(
        &self,
        path: &str,
        range: Option<ByteRange>,
    ) -> BackendResult<FirstEntry> {
        let opts = DownloadFromContainerOptionsBuilder::new()
            .path(path)
            .build();
        let mut stream = Box::pin(
            self.target
                .docker
                .download_from_container(&self.target.container, Some(opts)),
        );
        let first = match stream.next().await {
            Some(Ok(b)) => b,
            Some(Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })) => return Err(BackendError::NotFound(path.to_string())),
            Some(Err(e)) => return Err(api_error(&format!("reading {path}"), e)),
            None => return Err(BackendError::NotFound(path.to_string())),
        };
        let rest = stream.map(|r| r.map_err(std::io::Error::other));
        let all = futures::stream::iter([Ok::<Bytes, std::io::Error>(first)]).chain(rest);
        first_entry(StreamReader::new(all), range)
            .await
            .map_err(|e| BackendError::from_io(e, path))
    }

    /// Reads a file (or `range` of it) from the archive API, following
    /// symbolic links inside the container.
    pub async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let mut p = self.resolve(&self.abs(path), Follow::Yes, path).await?;
        for _ in 0..=MAX_LINK_HOPS {
            match self.download_first(&p, range).await? {
                FirstEntry::File(data) => return Ok(data),
                FirstEntry::Dir => return Err(BackendError::IsADirectory(path.to_string())),
                FirstEntry::Other => {
                    return Err(BackendError::Io {
                        context: path.to_string(),
                        source: std::io::Error::other("not a regular file"),
                    });
                }
                FirstEntry::Link(t) => p = bpath::join(&bpath::parent(&p), &t),
            }
        }
        Err(BackendError::Io {
            context: path.to_string(),
            source: std::io::Error::from_raw_os_error(libc::ELOOP),
        })
    }

    /// Uploads the tar in `tar_file` to `/`, then renames the temp entry
    /// over `target`.
    async fn upload_and_finish(
        &self,
        tar_file: std::fs::File,
        tmp_abs: &str,
        target: &str,
        path: &str,
    ) -> BackendResult<()> {
        let opts = UploadToContainerOptionsBuilder::new().path("/").build();
        let body = ReaderStream::with_capacity(tokio::fs::File::from_std(tar_file), 256 * 1024);
        self.target
            .docker
            .upload_to_container(
                &self.target.container,
                Some(opts),
                bollard::body_try_stream(body),
            )
            .await
            .map_err(|e| match e {
                bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                } => BackendError::NotFound(path.to_string()),
                other => api_error(&format!("writing {path}"), other),
            })?;
        self.op_ok(
            &[(tmp_abs, Follow::No), (target, Follow::Yes)],
            FINISH_WRITE,
            &[],
            path,
        )
        .await?;
        Ok(())
    }

    /// Builds a one-file tar (entry = `tmp_abs` without its leading `/`)
    /// from `data_file` into a new temp file.
    fn build_tar(
        tmp_abs: String,
        data_file: std::fs::File,
        size: u64,
        owner: (u64, u64),
    ) -> std::io::Result<std::fs::File> {
        let out = tempfile::tempfile()?;
        let mut b = tar::Builder::new(out);
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_uid(owner.0);
        h.set_gid(owner.1);
        h.set_mtime(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        );
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, tmp_abs.trim_start_matches('/'), data_file)?;
        let mut out = b.into_inner()?;
        out.flush()?;
        use std::io::Seek;
        out.seek(std::io::SeekFrom::Start(0))?;
        Ok(out)
    }

    fn temp_name(target: &str) -> String {
        bpath::join(
            &bpath::parent(target),
            &format!(".wsbench-tmp-{}", uuid::Uuid::new_v4().simple()),
        )
    }

    /// Writes `data` atomically (upload next to the target, then rename).
    pub async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let reader: Box<dyn AsyncRead + Send + Unpin> =
            Box::new(std::io::Cursor::new(data.to_vec()));
        self.write_stream(path, reader).await.map(|_| ())
    }

    /// Writes a stream atomically, spooled on the host first (the tar
    /// header needs the size); returns the bytes written.
    pub async fn write_stream(
        &self,
        path: &str,
        mut reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        // The temp file goes next to the resolved target: the archive API
        // would follow a link in the lexical path out of the workspace.
        let target = self.resolve(&self.abs(path), Follow::Yes, path).await?;
        let tmp_abs = Self::temp_name(&target);
        let io = |e| BackendError::from_io(e, path);
        // Spool on the host: the tar header needs the size up front, and
        // nothing is held in memory.
        let spool = tempfile::tempfile().map_err(io)?;
        let mut w = tokio::io::BufWriter::with_capacity(
            1 << 20,
            tokio::fs::File::from_std(spool.try_clone().map_err(io)?),
        );
        let n = tokio::io::copy(&mut reader, &mut w).await.map_err(io)?;
        tokio::io::AsyncWriteExt::flush(&mut w).await.map_err(io)?;
        drop(w);
        let owner = self.owner();
        let tmp = tmp_abs.clone();
        let tar_file = tokio::task::spawn_blocking(move || {
            use std::io::Seek;
            let mut spool = spool;
            spool.seek(std::io::SeekFrom::Start(0))?;
            Self::build_tar(tmp, spool, n, owner)
        })
        .await
        .map_err(|e| BackendError::Io {
            context: path.to_string(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map_err(io)?;
        self.upload_and_finish(tar_file, &tmp_abs, &target, path)
            .await?;
        Ok(n)
    }

    /// Appends in place with `cat >>`, creating parents (callers
    /// serialise appends).
    pub async fn append(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = self.abs(path);
        let out = self
            .op(
                &[(&p, Follow::Yes)],
                APPEND,
                &[],
                Some(Bytes::copy_from_slice(data)),
            )
            .await?;
        match out.code {
            Some(0) => Ok(()),
            c => Err(map_code(c, &out.stderr, path)),
        }
    }

    /// Creates `path` exclusively (`set -C`); `Ok(false)` if it exists.
    pub async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        let p = self.abs(path);
        let out = self
            .op(
                &[(&p, Follow::No)],
                CREATE_NEW,
                &[],
                Some(Bytes::copy_from_slice(data)),
            )
            .await?;
        match out.code {
            Some(0) => Ok(true),
            Some(17) => Ok(false),
            c => Err(map_code(c, &out.stderr, path)),
        }
    }

    /// Lists a directory, entries sorted by name.
    pub async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = self.abs(path);
        let out = self.op_ok(&[(&p, Follow::Yes)], LIST, &[], path).await?;
        let mut v = parse_stat_records(&out.stdout);
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    /// Metadata of a path, symlinks not followed (mtime in whole seconds).
    pub async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        let p = self.abs(path);
        let out = self.op_ok(&[(&p, Follow::No)], STAT, &[], path).await?;
        let mut st = parse_stat_records(&out.stdout)
            .into_iter()
            .next()
            .ok_or_else(|| BackendError::Io {
                context: path.to_string(),
                source: std::io::Error::other(format!(
                    "unexpected stat output: {}",
                    String::from_utf8_lossy(&out.stdout)
                )),
            })?;
        st.name = match bpath::file_name(&p) {
            "" => "/".to_string(),
            n => n.to_string(),
        };
        Ok(st)
    }

    /// Removes a file or link, or a directory (recursively when asked).
    pub async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        let p = self.abs(path);
        let r = if recursive { "1" } else { "0" };
        self.op_ok(&[(&p, Follow::No)], REMOVE, &[r], path)
            .await
            .map(|_| ())
    }

    /// Renames, creating the target's parents.
    pub async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        let (a, b) = (self.abs(from), self.abs(to));
        self.op_ok(&[(&a, Follow::No), (&b, Follow::No)], RENAME, &[], from)
            .await
            .map(|_| ())
    }

    /// Creates a directory (and parents when `parents`).
    pub async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        let p = self.abs(path);
        let parents = if parents { "1" } else { "0" };
        self.op_ok(&[(&p, Follow::Yes)], MKDIR, &[parents], path)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_records() {
        let out = b"E 81a4 5 1700000000 ./a.txt\nE 41ed 4096 1700000001 ./dir\nE a1ff 5 1700000002 ./link\nL 81a4 5 ./link\nT ./link\na.txt\nE a1ff 7 1700000003 ./dangling\nT ./dangling\nnowhere\n";
        let v = parse_stat_records(out);
        assert_eq!(v.len(), 4);
        assert_eq!(
            (v[0].name.as_str(), v[0].kind, v[0].size),
            ("a.txt", FileKind::File, 5)
        );
        assert_eq!(v[0].mode, Some(0o644));
        assert_eq!((v[1].kind, v[1].size), (FileKind::Dir, 0));
        assert_eq!(v[2].kind, FileKind::Symlink);
        assert_eq!(v[2].link_target.as_deref(), Some("a.txt"));
        assert_eq!(v[2].size, 5);
        assert!(!v[2].target_is_dir);
        assert_eq!(v[3].link_target.as_deref(), Some("nowhere"));
        assert_eq!(v[3].size, 0);
    }

    #[tokio::test]
    async fn reads_first_entry_with_range_and_links() {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(10);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, "f.txt", &b"0123456789"[..]).unwrap();
        let tar = b.into_inner().unwrap();
        match first_entry(&tar[..], Some(ByteRange { offset: 2, len: 3 }))
            .await
            .unwrap()
        {
            FirstEntry::File(d) => assert_eq!(d, b"234"),
            _ => panic!("not a file"),
        }
        match first_entry(&tar[..], Some(ByteRange { offset: 20, len: 3 }))
            .await
            .unwrap()
        {
            FirstEntry::File(d) => assert!(d.is_empty()),
            _ => panic!("not a file"),
        }
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        let long = "t/".repeat(80);
        b.append_link(&mut h, "l", &long).unwrap();
        let tar = b.into_inner().unwrap();
        match first_entry(&tar[..], None).await.unwrap() {
            FirstEntry::Link(t) => assert_eq!(t, long),
            _ => panic!("not a link"),
        }
    }

    #[test]
    fn maps_script_codes() {
        assert!(map_code(Some(66), b"", "p").is_not_found());
        assert!(matches!(
            map_code(Some(17), b"", "p"),
            BackendError::AlreadyExists(_)
        ));
        assert!(matches!(
            map_code(
                Some(1),
                b"mkdir: can't create directory 'x': No such file or directory",
                "p"
            ),
            BackendError::NotFound(_)
        ));
    }
}
