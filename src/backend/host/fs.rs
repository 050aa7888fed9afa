//! Host file helpers shared by the backends whose files live in a host
//! directory (local, bubblewrap, Docker with a bind mount): stat in the
//! backends' terms, atomic writes, locked appends.

use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tokio::io::AsyncRead;

use crate::backend::path::TEMP_PREFIX;
use crate::backend::{BackendError, BackendResult, ByteRange, FileKind, FileStat};

fn system_time(meta: &std::fs::Metadata) -> Option<SystemTime> {
    meta.modified().ok()
}

/// [`FileStat`] of a host path, symlinks not followed.
pub fn stat_host(p: &Path) -> std::io::Result<FileStat> {
    let meta = std::fs::symlink_metadata(p)?;
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/".into());
    let ft = meta.file_type();
    let (kind, size, target, target_is_dir) = if ft.is_symlink() {
        let target = std::fs::read_link(p)
            .ok()
            .map(|t| t.to_string_lossy().into_owned());
        let followed = std::fs::metadata(p).ok();
        (
            FileKind::Symlink,
            followed.as_ref().map(|m| m.len()).unwrap_or(0),
            target,
            followed.is_some_and(|m| m.is_dir()),
        )
    } else if ft.is_dir() {
        (FileKind::Dir, 0, None, false)
    } else if ft.is_file() {
        (FileKind::File, meta.len(), None, false)
    } else {
        (FileKind::Other, 0, None, false)
    };
    Ok(FileStat {
        name,
        kind,
        size,
        modified: system_time(&meta),
        link_target: target,
        target_is_dir,
        mode: Some(meta.mode() & 0o7777),
    })
}

/// Writes `data` to `target` atomically: a temp file in the same directory,
/// then rename. Keeps the permissions of an existing file, and writes
/// through a symlink to its target instead of replacing the link.
pub fn atomic_write_host(target: &Path, data: &[u8]) -> std::io::Result<()> {
    let target = resolve_link_target(target);
    let dir = target.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)?;
    let mut tmp = new_temp(dir)?;
    std::io::Write::write_all(&mut tmp, data)?;
    finish_atomic(tmp, &target)
}

/// Where a write to `target` lands: the link's target when `target` is a
/// symbolic link (written through, not replaced), else `target`.
pub fn resolve_link_target(target: &Path) -> PathBuf {
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(target)
            .or_else(|_| {
                std::fs::read_link(target)
                    .map(|t| target.parent().unwrap_or(Path::new("/")).join(t))
            })
            .unwrap_or_else(|_| target.to_path_buf()),
        _ => target.to_path_buf(),
    }
}

/// This process's umask, read from `/proc/self/status` (`Umask:`, Linux
/// 4.7 and later) once; `None` where that line is missing. Read rather
/// than set and restored, which would race with other threads creating
/// files. Backends that write through a sandbox's shell apply it there
/// (`shell::runner::request`), so new files get the same mode as on the
/// host.
pub fn process_umask() -> Option<u32> {
    static UMASK: std::sync::LazyLock<Option<u32>> = std::sync::LazyLock::new(|| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("Umask:"))?;
        u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
    });
    *UMASK
}

/// A new temp file in `dir` for an atomic write: named with
/// [`TEMP_PREFIX`] (never listed by the tools) and created with mode
/// `0o666` less the umask, the mode a new file gets from any other writer
/// (tempfile's default 0o600 would otherwise stick after the rename).
pub fn new_temp(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// Renames a fully written temp file (from [`new_temp`]) over `target`.
/// A rewrite keeps the mode of the file it replaces; a new file keeps the
/// temp file's, i.e. follows the umask.
pub fn finish_atomic(tmp: tempfile::NamedTempFile, target: &Path) -> std::io::Result<()> {
    if let Ok(meta) = std::fs::metadata(target) {
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode()))?;
    }
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Runs `f`, blocking file I/O over `data`, without copying `data`: in
/// place (`block_in_place`) on a multi-thread runtime (or directly outside
/// any runtime), else on the blocking pool with one copy (a
/// current-thread runtime cannot block in place). Issue 18: the copy of a 1 MiB write, and glibc mapping and
/// unmapping it every call, cost more than the write itself.
///
/// Errors: only when the pool task did not finish (cancelled at
/// shutdown, panicked; see [`super::task::join_io_error`]); `f`'s own
/// result is inside the `Ok`.
pub async fn with_bytes<T: Send + 'static>(
    data: &[u8],
    f: impl FnOnce(&[u8]) -> T + Send + 'static,
) -> std::io::Result<T> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => return Ok(tokio::task::block_in_place(|| f(data))),
        // Polled outside any tokio runtime: blocking here blocks no one else.
        Err(_) => return Ok(f(data)),
        Ok(_) => {}
    }
    let data = data.to_vec();
    tokio::task::spawn_blocking(move || f(&data))
        .await
        .map_err(|e| super::task::join_io_error(e, "write"))
}

/// Bytes read from a stream before each write of [`stream_to_temp`]
/// (256 KiB): one write call per 256 KiB, one buffer per stream (it was
/// a 1 MiB `BufWriter` plus `tokio::fs::File`'s own copy of each write).
const STREAM_CHUNK: usize = 256 * 1024;

/// Streams `reader` into a new temp file in `dir` (made first, with its
/// parents), for [`finish_atomic`] to rename over the target; returns the
/// file and the bytes written. Unbounded by design: the caller asked to
/// write this stream, and the disk is the limit.
///
/// One buffer of [`STREAM_CHUNK`] is filled from the reader and written
/// with a plain `write_all` (see [`with_bytes`]); no `BufWriter` and no
/// `tokio::fs::File` buffer copy the bytes again.
pub async fn stream_to_temp(
    dir: &Path,
    reader: &mut (dyn AsyncRead + Send + Unpin),
) -> std::io::Result<(tempfile::NamedTempFile, u64)> {
    use tokio::io::AsyncReadExt;
    tokio::fs::create_dir_all(dir).await?;
    let tmp = new_temp(dir)?;
    let file = std::sync::Arc::new(tmp.reopen()?);
    let mut buf = vec![0u8; STREAM_CHUNK];
    let mut total = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match reader.read(&mut buf[filled..]).await? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            break;
        }
        let f = file.clone();
        with_bytes(&buf[..filled], move |b| {
            std::io::Write::write_all(&mut &*f, b)
        })
        .await??;
        total += filled as u64;
        if filled < buf.len() {
            break;
        }
    }
    Ok((tmp, total))
}

/// Appends `data` under an exclusive `flock`, so concurrent appenders in
/// this or another process never interleave. Creates the file and parents.
///
/// Line-safe (the [`Sandbox::append`](crate::backend::Sandbox::append)
/// contract): when `data` ends in `\n` and the file's last byte is not
/// one (a record torn by an earlier crash), a `\n` is written first so
/// the new record starts its own line. A failed write (disk full, quota)
/// truncates the file back to its old length, so no partial line stays;
/// the error then says whether that truncation failed too.
///
/// Returns the offset at which `data` starts (the old length, plus one
/// when a `\n` was written first).
pub fn append_host(target: &Path, data: &[u8]) -> std::io::Result<u64> {
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(target)?;
    let locked = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    append_locked(&locked, data, |mut f, bytes| {
        std::io::Write::write_all(&mut f, bytes)
    })
}

/// The body of [`append_host`] on a locked file, `write` doing the
/// actual write (a seam for tests that inject a failing writer). The
/// torn-line newline and `data` go out in one buffer, so with `write_all`
/// a record is one `write(2)` (a regular file on a local file system
/// writes it whole unless the disk fills or a signal cuts it short; both
/// are truncated back below).
///
/// Limit: one write is not atomic for a reader that takes no lock. Linux
/// copies a write into the page cache a page at a time and grows the
/// file's size as it goes, so a reader such as the reference's
/// `offload_context` can read the head of a record that crosses a 4 KiB
/// page boundary and write that head back (a torn head, issue 23). Only
/// the reader's lock could prevent that; wsbench's readers skip such a
/// line as a bad line and its rewrite guard appends the record again.
pub(crate) fn append_locked(
    file: &std::fs::File,
    data: &[u8],
    write: impl FnOnce(&std::fs::File, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let old = file.metadata()?.len();
    let mut last = [0u8; 1];
    let torn = old > 0
        && data.ends_with(b"\n")
        && file.read_at(&mut last, old - 1)? == 1
        && last[0] != b'\n';
    let res = if torn {
        let mut buf = Vec::with_capacity(data.len() + 1);
        buf.push(b'\n');
        buf.extend_from_slice(data);
        write(file, &buf)
    } else {
        write(file, data)
    };
    match res {
        Ok(()) => Ok(old + u64::from(torn)),
        Err(e) => match file.set_len(old) {
            Ok(()) => Err(e),
            Err(t) => Err(std::io::Error::new(
                e.kind(),
                format!(
                    "{e}; truncating back to {old} bytes failed too ({t}): a partial record may remain"
                ),
            )),
        },
    }
}

/// Creates the host file `p` exclusively with `data` (parents made first);
/// `Ok(false)` when something, even a dangling link, is already there.
/// Errors name `path_s`, the path as the caller was given it.
pub fn create_new_host(p: &Path, data: &[u8], path_s: &str) -> BackendResult<bool> {
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).map_err(|e| BackendError::from_io(e, path_s))?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
    {
        Ok(mut f) => match std::io::Write::write_all(&mut f, data) {
            Ok(()) => Ok(true),
            Err(e) => {
                // A half-written claim is worse than none: take it back.
                let _ = std::fs::remove_file(p);
                Err(BackendError::from_io(e, path_s))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(BackendError::from_io(e, path_s)),
    }
}

/// Removes the host path `p` (blocking): a file or link, an empty
/// directory, or with `recursive` a whole tree. Links are removed, never
/// followed. Errors name `path_s`, the path as the caller was given it.
pub fn remove_host(p: &Path, recursive: bool, path_s: &str) -> BackendResult<()> {
    let meta = std::fs::symlink_metadata(p).map_err(|e| BackendError::from_io(e, path_s))?;
    let res = if meta.is_dir() {
        if recursive {
            std::fs::remove_dir_all(p)
        } else {
            std::fs::remove_dir(p)
        }
    } else {
        std::fs::remove_file(p)
    };
    res.map_err(|e| BackendError::from_io(e, path_s))
}

/// Reads the host file `p` whole or `range` of it (blocking); errors name
/// `path_s`, the path as the caller was given it.
pub fn read_host(p: &Path, path_s: String, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
    let meta = std::fs::metadata(p).map_err(|e| BackendError::from_io(e, &path_s))?;
    if meta.is_dir() {
        return Err(BackendError::IsADirectory(path_s));
    }
    match range {
        None => std::fs::read(p).map_err(|e| BackendError::from_io(e, &path_s)),
        Some(r) => {
            let mut f = std::fs::File::open(p).map_err(|e| BackendError::from_io(e, &path_s))?;
            f.seek(SeekFrom::Start(r.offset))
                .map_err(|e| BackendError::from_io(e, &path_s))?;
            let mut buf = Vec::with_capacity(r.len.min(meta.len()) as usize);
            std::io::Read::read_to_end(&mut std::io::Read::take(f, r.len), &mut buf)
                .map_err(|e| BackendError::from_io(e, &path_s))?;
            Ok(buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_keep_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        atomic_write_host(&p, b"a").unwrap();
        for m in [0o600, 0o755] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).unwrap();
            atomic_write_host(&p, b"b").unwrap();
            assert_eq!(mode(&p), m);
        }
    }

    fn open_rw(p: &Path) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(p)
            .unwrap()
    }

    #[test]
    fn a_failed_append_leaves_the_old_length() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n").unwrap();
        let f = open_rw(&p);
        let err = append_locked(&f, b"{\"b\":2}\n", |mut f, bytes| {
            // Half the record lands, then the disk is full.
            std::io::Write::write_all(&mut f, &bytes[..3])?;
            Err(std::io::Error::from_raw_os_error(28))
        })
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28));
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n");
    }

    #[test]
    fn an_append_after_a_torn_tail_starts_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"to").unwrap();
        // The offset is where the record starts, after the added `\n`.
        assert_eq!(append_host(&p, b"{\"b\":2}\n").unwrap(), 13);
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n{\"to\n{\"b\":2}\n");
        // Bytes that are not a line are appended as they are.
        assert_eq!(append_host(&p, b"xy").unwrap(), 21);
        assert_eq!(append_host(&p, b"z").unwrap(), 23);
        assert_eq!(append_host(&dir.path().join("new"), b"q\n").unwrap(), 0);
        assert!(std::fs::read(&p).unwrap().ends_with(b"\nxyz"));
    }
}
