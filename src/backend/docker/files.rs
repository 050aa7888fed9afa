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
//! * Append, exclusive create, list, stat, remove, rename and mkdir are the
//!   shared file scripts of [`crate::backend::shell`] ([`ExecTarget`] is
//!   their [`ScriptHost`]), as on Kubernetes and the cloud backends.
//! * **Links out of `/workspace`** are refused ([`BackendError::Escapes`])
//!   by every operation, as with a bind mount: the scripts start with the
//!   shared link check, and the archive API's reads and writes go to a
//!   path that check resolved first (one more exec), since the API itself
//!   follows links anywhere in the container.

use std::io::Write as _;
use std::time::SystemTime;

use async_trait::async_trait;
use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::io::{ReaderStream, StreamReader};

use super::api::{api_error, container_health};
use super::exec::ExecTarget;
use crate::backend::host::MAX_LINK_HOPS;
use crate::backend::shell::codes::failed;
use crate::backend::shell::{Follow, ScriptHost, ops, runner, scripts};
use crate::backend::{
    BackendError, BackendResult, ByteRange, ExecOutcome, ExecRequest, FileStat, OutputSink,
    path as bpath,
};

/// Finishes an archive-API write. Paths: the uploaded temp file (as is),
/// the target (followed). A directory at the target is exit 11
/// (`IsADirectory`); through a link the target's bytes are replaced in
/// place; otherwise the temp file takes the mode of the file it replaces
/// (a new file: 0666 less the exec's umask, as the tar's 0644 would
/// otherwise stick) and is renamed over it (atomic).
const FINISH_WRITE: &str = r#"tmp=$P1; t=$P2
if [ -d "$t" ] && [ ! -L "$t" ]; then rm -f -- "$tmp"; exit 11; fi
if [ -L "$t" ]; then cat -- "$tmp" > "$t"; rc=$?; rm -f -- "$tmp"; exit $rc; fi
if [ -e "$t" ]; then m=$(stat -c %a -- "$t" 2>/dev/null) && chmod "$m" -- "$tmp"
else chmod "$(printf %o $((0666 & ~$(umask))))" -- "$tmp"; fi
mv -f -- "$tmp" "$t"
"#;

#[async_trait]
impl ScriptHost for ExecTarget {
    fn script_workdir(&self) -> String {
        bpath::normalize(&self.workdir)
    }

    async fn run_script(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        self.exec(req, sink).await
    }
}

/// File operations through a container.
#[derive(Clone)]
pub(crate) struct ContainerFiles {
    /// The container and user the scripts run as.
    pub target: ExecTarget,
}

/// What the first entry of a downloaded archive was.
enum FirstEntry {
    File(Vec<u8>),
    Dir,
    Link(String),
    Other,
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

    /// `abs` with its links resolved inside the container, for the archive
    /// API (which would follow links out of the workspace itself).
    /// Paths outside the workspace come back unchanged, without an exec.
    ///
    /// Errors: `Escapes` when a link leads out of the workspace.
    async fn resolve(&self, abs: &str, follow: Follow) -> BackendResult<String> {
        let r = ops::resolve(&self.target, abs, follow, scripts::RESOLVE).await?;
        Ok(r.path)
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
            Some(Err(e)) if let Some(h) = container_health(&self.target.container, &e, false) => {
                return Err(h);
            }
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
        let mut p = self.resolve(&self.abs(path), Follow::Yes).await?;
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
                e if let Some(h) = container_health(&self.target.container, &e, false) => h,
                bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                } => BackendError::NotFound(path.to_string()),
                other => api_error(&format!("writing {path}"), other),
            })?;
        let paths = [(tmp_abs, Follow::No), (target, Follow::Yes)];
        let out = runner::run(&self.target, &paths, FINISH_WRITE, &[], None).await?;
        match out.code {
            0 => Ok(()),
            c => Err(failed(c, path, &out.stderr, "writing")),
        }
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
            &format!("{}{}", bpath::TEMP_PREFIX, uuid::Uuid::new_v4().simple()),
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
        let target = self.resolve(&self.abs(path), Follow::Yes).await?;
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

    /// Appends in place, creating parents (callers serialise appends);
    /// the offset `data` starts at.
    pub async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        ops::append(&self.target, path, data).await
    }

    /// Creates `path` exclusively; `Ok(false)` if the name is taken.
    pub async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        ops::create_new(&self.target, path, data).await
    }

    /// Lists a directory, entries sorted by name.
    pub async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        ops::list(&self.target, path).await
    }

    /// Metadata of a path, symlinks not followed.
    pub async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        ops::stat(&self.target, path).await
    }

    /// Removes a file or link, or a directory (recursively when asked).
    pub async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        ops::remove(&self.target, path, recursive).await
    }

    /// Renames, creating the target's parents.
    pub async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        ops::rename(&self.target, from, to).await
    }

    /// Creates a directory (and parents when `parents`).
    pub async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        ops::mkdir(&self.target, path, parents).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
