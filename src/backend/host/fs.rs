//! Host file helpers shared by the backends whose files live in a host
//! directory (local, bubblewrap, Docker with a bind mount): stat in the
//! backends' terms, atomic writes, locked appends.

use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tokio::io::{AsyncRead, AsyncWriteExt};

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
    let mut tmp = tempfile::Builder::new()
        .prefix(".wsbench-tmp-")
        .tempfile_in(dir)?;
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

/// Renames a fully written temp file over `target`, keeping the mode of
/// the file it replaces (0644 for a new one).
pub fn finish_atomic(tmp: tempfile::NamedTempFile, target: &Path) -> std::io::Result<()> {
    let mode = std::fs::metadata(target)
        .map(|m| m.permissions().mode())
        .unwrap_or(0o644);
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Streams `reader` into a new temp file in `dir` (made first, with its
/// parents), for [`finish_atomic`] to rename over the target; returns the
/// file and the bytes written. Unbounded by design: the caller asked to
/// write this stream, and the disk is the limit.
pub async fn stream_to_temp(
    dir: &Path,
    reader: &mut (dyn AsyncRead + Send + Unpin),
) -> std::io::Result<(tempfile::NamedTempFile, u64)> {
    tokio::fs::create_dir_all(dir).await?;
    let tmp = tempfile::Builder::new()
        .prefix(".wsbench-tmp-")
        .tempfile_in(dir)?;
    // A large buffer: each flush of tokio's File is one blocking-pool trip.
    let mut file =
        tokio::io::BufWriter::with_capacity(1 << 20, tokio::fs::File::from_std(tmp.reopen()?));
    let n = tokio::io::copy(reader, &mut file).await?;
    file.flush().await?;
    drop(file);
    Ok((tmp, n))
}

/// Appends `data` under an exclusive `flock`, so concurrent appenders in
/// this or another process never interleave. Creates the file and parents.
pub fn append_host(target: &Path, data: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(target)?;
    let locked = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    std::io::Write::write_all(&mut &*locked, data)?;
    drop(locked);
    Ok(())
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
        Ok(mut f) => {
            std::io::Write::write_all(&mut f, data)
                .map_err(|e| BackendError::from_io(e, path_s))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(BackendError::from_io(e, path_s)),
    }
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
