//! [`RemoteSandbox`]: what a cloud service does natively in one live
//! sandbox, from which it gets the whole [`Sandbox`] trait; the file
//! operations that are done with
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

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::AsyncRead;

use crate::backend::shell::{Follow, ops, scripts};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileKind, FileStat, LineShell, OutputSink, Process, PtyRequest, PtySession, Sandbox,
    SpawnRequest, Watch, path as bpath,
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

    /// [`Sandbox::pty`]; by default the `Unsupported` error carrying the
    /// reason from [`Capabilities::pty`].
    async fn pty(&self, _req: PtyRequest) -> BackendResult<PtySession> {
        Err(BackendError::Unsupported {
            backend: Self::KIND,
            what: self
                .capabilities()
                .pty
                .reason()
                .unwrap_or("a terminal (PTY)"),
        })
    }

    /// [`Sandbox::line_shell`]; by default `Unsupported`.
    async fn line_shell(&self, _cwd: Option<String>) -> BackendResult<Box<dyn LineShell>> {
        Err(BackendError::Unsupported {
            backend: Self::KIND,
            what: "a line-mode shell session",
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

    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        if !RemoteSandbox::capabilities(self).pty.is_supported() {
            return Err(BackendError::Unsupported {
                backend: T::KIND,
                what: RemoteSandbox::capabilities(self)
                    .pty
                    .reason()
                    .unwrap_or("a terminal (PTY)"),
            });
        }
        RemoteSandbox::pty(self, req).await
    }

    async fn line_shell(&self, cwd: Option<String>) -> BackendResult<Box<dyn LineShell>> {
        let cwd = cwd.map(|c| resolve(self, &c));
        RemoteSandbox::line_shell(self, cwd).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = ops::resolve(self, &resolve(self, path), Follow::Yes, scripts::RESOLVE).await?;
        self.download(&p.path, range).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = ops::resolve(self, &resolve(self, path), Follow::Yes, scripts::RESOLVE).await?;
        self.upload(&p.path, Bytes::copy_from_slice(data)).await
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let p = ops::resolve(self, &resolve(self, path), Follow::Yes, scripts::RESOLVE).await?;
        self.upload_stream(&p.path, reader).await
    }

    async fn append(&self, _path: &str, _data: &[u8]) -> BackendResult<u64> {
        Err(BackendError::Unsupported {
            backend: T::KIND,
            what: "append",
        })
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        ops::create_new_uploaded(self, &resolve(self, path), data).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = ops::resolve(
            self,
            &resolve(self, path),
            Follow::Yes,
            scripts::RESOLVE_LIST,
        )
        .await?;
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
        let p = ops::resolve(self, &abs, Follow::No, scripts::RESOLVE_STAT).await?;
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
        ops::remove(self, &resolve(self, path), recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        ops::rename(self, &resolve(self, from), &resolve(self, to)).await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        ops::mkdir(self, &resolve(self, path), parents).await
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

    #[test]
    fn ranges_of_whole_downloads() {
        let r = |offset, len| Some(ByteRange { offset, len });
        assert_eq!(slice_range(b"abcdef", None), b"abcdef");
        assert_eq!(slice_range(b"abcdef", r(1, 3)), b"bcd");
        assert_eq!(slice_range(b"abcdef", r(4, 10)), b"ef");
        assert_eq!(slice_range(b"abcdef", r(9, 1)), b"");
    }
}
