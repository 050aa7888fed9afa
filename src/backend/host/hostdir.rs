//! Host directories mounted into a sandbox, with file operations done on
//! the host after a confinement check.
//!
//! Bubblewrap binds a host directory at `/workspace` (and a private one at
//! `/tmp`); Docker with a bind mount does the same for `/workspace`. File
//! tools then need no exec round trip: [`HostDir`] maps a sandbox path to
//! its host path and does the operation there.
//!
//! The mapping resolves symbolic links **the way the sandbox sees them**:
//! an absolute link target is a sandbox path (`/workspace/b` is the
//! workspace's `b`, not the host's `/workspace/b`), `..` stops at the
//! sandbox's `/`, and a path that leaves every mount — a link to
//! `/etc/passwd`, or `../../..` out of `/workspace` — is refused with
//! [`BackendError::Escapes`] instead of being followed on the host. A
//! symlink inside the workspace pointing outside therefore can never be
//! read or written through the file tools.
//!
//! Limit: the check and the operation are separate system calls, so a
//! process inside the sandbox that swaps a directory for a link in between
//! could redirect one operation. The window is a few microseconds and the
//! agent's own processes are the only ones that can race it.

use std::collections::VecDeque;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncRead;

use super::task::blocking;
use super::{
    PathMapper, append_host, atomic_write_host, create_new_host, finish_atomic, read_host,
    remove_host, stat_host, stream_to_temp, watch_host,
};
use crate::backend::path as bpath;
use crate::backend::{BackendError, BackendResult, ByteRange, FileKind, FileStat, Watch};

/// Most symbolic links followed while resolving one path (Linux's limit).
pub const MAX_LINK_HOPS: usize = 40;

/// One host directory visible in the sandbox at `sandbox` (a normalised
/// absolute POSIX path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Mount point inside the sandbox.
    pub sandbox: String,
    /// Canonical host directory.
    pub host: PathBuf,
}

/// A set of host directories mounted into a sandbox; the first mount is
/// the sandbox's workdir.
#[derive(Debug, Clone)]
pub struct HostDir {
    mounts: Arc<Vec<Mount>>,
}

fn split(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn is_prefix(prefix: &[String], of: &[String]) -> bool {
    prefix.len() <= of.len() && prefix.iter().zip(of).all(|(a, b)| a == b)
}

fn join_abs(parts: &[String]) -> String {
    format!("/{}", parts.join("/"))
}

impl HostDir {
    /// Mounts `(sandbox path, host dir)` pairs; the first is the workdir.
    /// Host dirs are created if missing and canonicalised.
    ///
    /// Errors: a host dir cannot be created, or a sandbox path is not
    /// absolute.
    pub fn new(mounts: Vec<(String, PathBuf)>) -> BackendResult<Self> {
        let mut out = Vec::with_capacity(mounts.len());
        for (sandbox, host) in mounts {
            if !bpath::is_absolute(&sandbox) {
                return Err(BackendError::Io {
                    context: format!("mount point {sandbox}"),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "mount points must be absolute paths",
                    ),
                });
            }
            std::fs::create_dir_all(&host)
                .map_err(|e| BackendError::from_io(e, host.display().to_string()))?;
            let host = std::fs::canonicalize(&host)
                .map_err(|e| BackendError::from_io(e, host.display().to_string()))?;
            out.push(Mount {
                sandbox: bpath::normalize(&sandbox),
                host,
            });
        }
        if out.is_empty() {
            return Err(BackendError::Io {
                context: "host directory mounts".into(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no mounts given"),
            });
        }
        Ok(HostDir {
            mounts: Arc::new(out),
        })
    }

    /// The mounts, workdir first.
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Sandbox path of the workdir mount.
    pub fn workdir(&self) -> &str {
        &self.mounts[0].sandbox
    }

    /// Host directory of the workdir mount.
    pub fn root(&self) -> &Path {
        &self.mounts[0].host
    }

    /// The mount holding sandbox path `parts` and the part below it.
    fn mount_of(&self, parts: &[String]) -> Option<(&Mount, usize)> {
        // Longest mount point wins (a mount nested in another one).
        self.mounts
            .iter()
            .map(|m| (m, split(&m.sandbox).collect::<Vec<_>>()))
            .filter(|(_, mp)| is_prefix(mp, parts))
            .max_by_key(|(_, mp)| mp.len())
            .map(|(m, mp)| (m, mp.len()))
    }

    /// True when `parts` is a strict ancestor of some mount point: a plain
    /// directory the walk may pass through on its way to a mount.
    fn is_mount_ancestor(&self, parts: &[String]) -> bool {
        self.mounts.iter().any(|m| {
            let mp: Vec<String> = split(&m.sandbox).collect();
            parts.len() < mp.len() && is_prefix(parts, &mp)
        })
    }

    fn host_of(&self, parts: &[String]) -> Option<PathBuf> {
        let (m, depth) = self.mount_of(parts)?;
        let mut p = m.host.clone();
        for c in &parts[depth..] {
            p.push(c);
        }
        Some(p)
    }

    /// Resolves `path` (absolute, or relative to the workdir) the way the
    /// sandbox would, following symbolic links in every component — and in
    /// the last one too when `follow_final` — and returns the sandbox path
    /// it lands on. Missing components are taken as they are (a file about
    /// to be created).
    ///
    /// Errors: [`BackendError::Escapes`] when the path or a link leaves the
    /// mounts; an `Io` error for a link loop.
    pub(crate) fn resolve_sandbox(&self, path: &str, follow_final: bool) -> BackendResult<String> {
        let escapes = || BackendError::Escapes(path.to_string());
        let start = if bpath::is_absolute(path) {
            path.to_string()
        } else {
            format!("{}/{path}", self.workdir())
        };
        let mut cur: Vec<String> = Vec::new();
        let mut pending: VecDeque<String> = split(&start).collect();
        let mut hops = 0usize;
        while let Some(c) = pending.pop_front() {
            match c.as_str() {
                "." => continue,
                ".." => {
                    cur.pop();
                    continue;
                }
                _ => {}
            }
            cur.push(c);
            let Some(host) = self.host_of(&cur) else {
                if self.is_mount_ancestor(&cur) {
                    continue;
                }
                return Err(escapes());
            };
            let last = pending.is_empty();
            if last && !follow_final {
                break;
            }
            let Ok(meta) = std::fs::symlink_metadata(&host) else {
                // Missing (or unreadable): nothing to follow; the
                // operation itself reports what is wrong.
                continue;
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(BackendError::Io {
                    context: path.to_string(),
                    source: std::io::Error::from_raw_os_error(libc::ELOOP),
                });
            }
            let target = std::fs::read_link(&host).map_err(|e| BackendError::from_io(e, path))?;
            let target = String::from_utf8_lossy(target.as_os_str().as_bytes()).into_owned();
            cur.pop();
            if target.starts_with('/') {
                cur.clear();
            }
            for (i, t) in split(&target).enumerate() {
                pending.insert(i, t);
            }
        }
        if self.mount_of(&cur).is_none() {
            return Err(escapes());
        }
        Ok(join_abs(&cur))
    }

    /// Host path of `path` after [`HostDir::resolve_sandbox`].
    pub fn resolve(&self, path: &str, follow_final: bool) -> BackendResult<PathBuf> {
        let sp = self.resolve_sandbox(path, follow_final)?;
        let parts: Vec<String> = split(&sp).collect();
        self.host_of(&parts)
            .ok_or_else(|| BackendError::Escapes(path.to_string()))
    }

    /// The host path the file tools should use for `path`, or `None` when
    /// it leaves the mounts. The lexical host path (so results name the
    /// path as the caller gave it) when following links on the host lands
    /// on the same file as following them in the sandbox; otherwise the
    /// fully resolved path, which has no links left for the host to
    /// misread (an absolute link means a sandbox path, not a host path).
    pub fn host_path(&self, path: &str) -> Option<PathBuf> {
        let resolved = self.resolve(path, true).ok()?;
        let abs = if bpath::is_absolute(path) {
            bpath::normalize(path)
        } else {
            bpath::join(self.workdir(), path)
        };
        let parts: Vec<String> = split(&abs).collect();
        let Some(lexical) = self.host_of(&parts) else {
            return Some(resolved);
        };
        if lexical == resolved {
            return Some(lexical);
        }
        match (
            std::fs::canonicalize(&lexical),
            std::fs::canonicalize(&resolved),
        ) {
            (Ok(a), Ok(b)) if a == b => Some(lexical),
            _ => Some(resolved),
        }
    }

    /// True when `path` (lexically) lies under one of the mounts, before
    /// any link is followed; paths elsewhere belong to the rest of the
    /// sandbox's file system.
    pub fn covers(&self, path: &str) -> bool {
        let parts: Vec<String> = split(&bpath::normalize(path)).collect();
        bpath::is_absolute(path) && self.mount_of(&parts).is_some()
    }

    /// Sandbox path of a host path under one of the mounts.
    pub(crate) fn sandbox_path_of(&self, host: &Path) -> Option<String> {
        self.mounts.iter().find_map(|m| {
            let rel = host.strip_prefix(&m.host).ok()?;
            let rel = rel.to_string_lossy();
            Some(if rel.is_empty() {
                m.sandbox.clone()
            } else {
                bpath::join(&m.sandbox, &rel)
            })
        })
    }

    /// Stat of a sandbox path, symlinks not followed; a link's size and
    /// kind of target come from resolving it inside the sandbox, so a link
    /// out of the workspace reveals nothing about the host.
    fn stat_blocking(&self, path: &str) -> BackendResult<FileStat> {
        let host = self.resolve(path, false)?;
        let mut st = stat_host(&host).map_err(|e| BackendError::from_io(e, path))?;
        st.name = match bpath::file_name(&bpath::normalize(path)) {
            "" => "/".to_string(),
            n => n.to_string(),
        };
        if st.kind == FileKind::Symlink {
            let followed = self
                .resolve(path, true)
                .ok()
                .and_then(|p| std::fs::metadata(p).ok());
            st.size = followed.as_ref().map(|m| m.len()).unwrap_or(0);
            st.target_is_dir = followed.is_some_and(|m| m.is_dir());
        }
        Ok(st)
    }

    /// Reads a whole file or `range` of it (links followed inside the
    /// sandbox).
    pub async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = self.resolve(path, true)?;
        let path_s = path.to_string();
        blocking("read", move || read_host(&p, path_s, range)).await
    }

    /// Atomic write (temp file + rename), parents created.
    pub async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = self.resolve(path, true)?;
        let path_s = path.to_string();
        // Written from the caller's buffer (no copy on a multi-thread runtime).
        super::fs::with_bytes(data, move |data| {
            if p.is_dir() {
                return Err(BackendError::IsADirectory(path_s));
            }
            atomic_write_host(&p, data).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
        .unwrap_or_else(|e| {
            Err(BackendError::Io {
                context: "write task".into(),
                source: e,
            })
        })
    }

    /// Streams into a temp file next to the target, then renames it over.
    pub async fn write_stream(
        &self,
        path: &str,
        mut reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let target = self.resolve(path, true)?;
        if target.is_dir() {
            return Err(BackendError::IsADirectory(path.to_string()));
        }
        let dir = target.parent().unwrap_or(Path::new("/")).to_path_buf();
        let (tmp, n) = stream_to_temp(&dir, &mut *reader)
            .await
            .map_err(|e| BackendError::from_io(e, path))?;
        blocking("write", move || {
            finish_atomic(tmp, &target)
                .map_err(|e| BackendError::from_io(e, target.display().to_string()))
        })
        .await?;
        Ok(n)
    }

    /// Appends under an exclusive lock, creating the file and parents;
    /// the offset `data` starts at (see [`append_host`]).
    pub async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        let p = self.resolve(path, true)?;
        let data = data.to_vec();
        let path_s = path.to_string();
        blocking("append", move || {
            append_host(&p, &data).map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
    }

    /// The checked append of [`Sandbox::append_checked`](crate::backend::Sandbox::append_checked)
    /// on the host file (see [`append_checked_host`](super::checked_append::append_checked_host)).
    pub async fn append_checked(
        &self,
        path: &str,
        earlier: &[crate::backend::append_check::TrackedRecord],
        data: &[u8],
    ) -> BackendResult<crate::backend::append_check::CheckedAppend> {
        let p = self.resolve(path, true)?;
        let earlier = earlier.to_vec();
        let data = data.to_vec();
        let path_s = path.to_string();
        blocking("append", move || {
            super::checked_append::append_checked_host(&p, earlier, &data)
                .map_err(|e| BackendError::from_io(e, path_s))
        })
        .await
    }

    /// Creates `path` exclusively; `Ok(false)` when something (even a
    /// dangling link) is already there.
    pub async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        let p = self.resolve(path, false)?;
        let data = data.to_vec();
        let path_s = path.to_string();
        blocking("create", move || create_new_host(&p, &data, &path_s)).await
    }

    /// Lists a directory (links to directories followed inside the
    /// sandbox), entries sorted by name.
    pub async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let dir = self.resolve(path, true)?;
        let sandbox_dir = self.resolve_sandbox(path, true)?;
        let me = self.clone();
        let path_s = path.to_string();
        blocking("list", move || {
            let rd = std::fs::read_dir(&dir).map_err(|e| BackendError::from_io(e, &path_s))?;
            let mut out: Vec<FileStat> = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name();
                    let child = bpath::join(&sandbox_dir, &name.to_string_lossy());
                    me.stat_blocking(&child).ok()
                })
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
    }

    /// Metadata of a path, symlinks not followed.
    pub async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        let me = self.clone();
        let path_s = path.to_string();
        blocking("stat", move || me.stat_blocking(&path_s)).await
    }

    /// Removes a file or a link (never its target), or a directory.
    pub async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        let p = self.resolve(path, false)?;
        if self.mounts.iter().any(|m| m.host == p) {
            return Err(BackendError::PermissionDenied(format!(
                "{path} is a mount point of the sandbox"
            )));
        }
        let path_s = path.to_string();
        blocking("remove", move || remove_host(&p, recursive, &path_s)).await
    }

    /// Renames (the link itself when `from` is a link).
    pub async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        let a = self.resolve(from, false)?;
        let b = self.resolve(to, false)?;
        if self.mounts.iter().any(|m| m.host == a || m.host == b) {
            return Err(BackendError::PermissionDenied(format!(
                "{from} -> {to}: a mount point of the sandbox cannot be renamed"
            )));
        }
        if let Some(dir) = b.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| BackendError::from_io(e, to))?;
        }
        tokio::fs::rename(&a, &b)
            .await
            .map_err(|e| BackendError::from_io(e, from))
    }

    /// Creates a directory (and parents when `parents`).
    pub async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        let p = self.resolve(path, true)?;
        let res = if parents {
            tokio::fs::create_dir_all(&p).await
        } else {
            tokio::fs::create_dir(&p).await
        };
        res.map_err(|e| BackendError::from_io(e, path))
    }

    /// Watches `path` recursively on the host; events carry sandbox paths.
    pub fn watch(&self, path: &str) -> BackendResult<Watch> {
        let p = self.resolve(path, true)?;
        let me = self.clone();
        let map: PathMapper = Arc::new(move |h: &Path| {
            me.sandbox_path_of(h)
                .unwrap_or_else(|| h.to_string_lossy().into_owned())
        });
        watch_host(&p, Some(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn fixture() -> (tempfile::TempDir, HostDir) {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        let tmp = d.path().join("tmp");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/a.txt"), "A").unwrap();
        std::fs::write(d.path().join("secret.txt"), "S").unwrap();
        let hd = HostDir::new(vec![("/workspace".into(), ws), ("/tmp".into(), tmp)]).unwrap();
        (d, hd)
    }

    #[test]
    fn plain_and_relative_paths_map_under_the_root() {
        let (_d, hd) = fixture();
        let root = hd.root().to_path_buf();
        assert_eq!(
            hd.resolve("/workspace/src/a.txt", true).unwrap(),
            root.join("src/a.txt")
        );
        assert_eq!(
            hd.resolve("src/a.txt", true).unwrap(),
            root.join("src/a.txt")
        );
        assert_eq!(hd.resolve("/workspace", true).unwrap(), root);
        assert_eq!(
            hd.resolve("/workspace/new/f", true).unwrap(),
            root.join("new/f")
        );
        assert_eq!(
            hd.resolve("/tmp/x", true).unwrap(),
            hd.mounts()[1].host.join("x")
        );
    }

    #[test]
    fn leaving_the_mounts_is_refused() {
        let (_d, hd) = fixture();
        for p in [
            "/etc/passwd",
            "/workspace/../secret.txt",
            "../secret.txt",
            "/",
        ] {
            assert!(
                matches!(hd.resolve(p, true), Err(BackendError::Escapes(_))),
                "{p}"
            );
        }
    }

    #[test]
    fn links_resolve_in_the_sandbox_namespace() {
        let (d, hd) = fixture();
        let root = hd.root().to_path_buf();
        // Absolute target naming the sandbox path: the workspace's file.
        symlink("/workspace/src/a.txt", root.join("abs")).unwrap();
        assert_eq!(
            hd.resolve("/workspace/abs", true).unwrap(),
            root.join("src/a.txt")
        );
        // Relative link inside.
        symlink("src", root.join("srcdir")).unwrap();
        assert_eq!(
            hd.resolve("/workspace/srcdir/a.txt", true).unwrap(),
            root.join("src/a.txt")
        );
        // A host path as target means that path *inside* the sandbox: here
        // under the private /tmp mount, never the host file.
        symlink(d.path().join("secret.txt"), root.join("host_abs")).unwrap();
        let r = hd.resolve("/workspace/host_abs", true).unwrap();
        assert!(r.starts_with(&hd.mounts()[1].host), "{}", r.display());
        // A target outside every mount: refused.
        symlink("/etc/passwd", root.join("passwd")).unwrap();
        assert!(matches!(
            hd.resolve("/workspace/passwd", true),
            Err(BackendError::Escapes(_))
        ));
        // Relative escape.
        symlink("../secret.txt", root.join("up")).unwrap();
        assert!(matches!(
            hd.resolve("/workspace/up", true),
            Err(BackendError::Escapes(_))
        ));
        // A link to /etc through a directory component.
        symlink("/etc", root.join("etc")).unwrap();
        assert!(matches!(
            hd.resolve("/workspace/etc/passwd", true),
            Err(BackendError::Escapes(_))
        ));
        // host_path keeps the caller's spelling when the host agrees...
        assert_eq!(
            hd.host_path("/workspace/srcdir/a.txt").unwrap(),
            root.join("srcdir/a.txt")
        );
        // ...and resolves fully when an absolute (sandbox) target is involved.
        assert_eq!(
            hd.host_path("/workspace/abs").unwrap(),
            root.join("src/a.txt")
        );
        assert_eq!(hd.host_path("/workspace/passwd"), None);
        // Not following the final link keeps it inside.
        assert_eq!(hd.resolve("/workspace/up", false).unwrap(), root.join("up"));
        // A link into the private /tmp mount is fine.
        symlink("/tmp/t", root.join("to_tmp")).unwrap();
        assert_eq!(
            hd.resolve("/workspace/to_tmp", true).unwrap(),
            hd.mounts()[1].host.join("t")
        );
    }

    #[test]
    fn link_loops_end_with_an_error() {
        let (_d, hd) = fixture();
        let root = hd.root().to_path_buf();
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        let err = hd.resolve("/workspace/a", true).unwrap_err();
        assert!(err.to_string().contains("symbolic links"), "{err}");
        symlink(".", root.join("self")).unwrap();
        assert_eq!(
            hd.resolve("/workspace/self/self/src", true).unwrap(),
            root.join("src")
        );
    }

    #[tokio::test]
    async fn file_ops_refuse_escaping_links() {
        let (d, hd) = fixture();
        let root = hd.root().to_path_buf();
        symlink("/etc/passwd", root.join("evil")).unwrap();
        symlink("../secret.txt", root.join("evil_rel")).unwrap();
        for p in ["/workspace/evil", "/workspace/evil_rel"] {
            assert!(matches!(
                hd.read(p, None).await,
                Err(BackendError::Escapes(_))
            ));
            assert!(matches!(
                hd.write(p, b"x").await,
                Err(BackendError::Escapes(_))
            ));
            assert!(matches!(
                hd.append(p, b"x").await,
                Err(BackendError::Escapes(_))
            ));
            let st = hd.stat(p).await.unwrap();
            assert_eq!(st.kind, FileKind::Symlink);
            assert_eq!(st.size, 0, "size of the host file must not show");
        }
        assert_eq!(
            std::fs::read_to_string(d.path().join("secret.txt")).unwrap(),
            "S"
        );
        // The host path of the secret names a missing file in the sandbox.
        symlink(d.path().join("secret.txt"), root.join("host_abs")).unwrap();
        assert!(
            hd.read("/workspace/host_abs", None)
                .await
                .unwrap_err()
                .is_not_found()
        );
        // Removing the link removes the link only.
        hd.remove("/workspace/evil_rel", false).await.unwrap();
        assert!(d.path().join("secret.txt").exists());
    }

    #[tokio::test]
    async fn roundtrip_and_listing() {
        let (_d, hd) = fixture();
        hd.write("/workspace/x/y.txt", b"hello").await.unwrap();
        assert_eq!(hd.read("/workspace/x/y.txt", None).await.unwrap(), b"hello");
        assert_eq!(
            hd.read("/workspace/x/y.txt", Some(ByteRange { offset: 1, len: 3 }))
                .await
                .unwrap(),
            b"ell"
        );
        hd.append("/workspace/x/y.txt", b"!").await.unwrap();
        assert!(!hd.create_new("/workspace/x/y.txt", b"z").await.unwrap());
        symlink("y.txt", hd.root().join("x/link")).unwrap();
        let names: Vec<(String, FileKind, u64)> = hd
            .list("/workspace/x")
            .await
            .unwrap()
            .into_iter()
            .map(|s| (s.name, s.kind, s.size))
            .collect();
        assert_eq!(
            names,
            [
                ("link".to_string(), FileKind::Symlink, 6),
                ("y.txt".to_string(), FileKind::File, 6)
            ]
        );
        let st = hd.stat("/workspace").await.unwrap();
        assert_eq!((st.name.as_str(), st.kind), ("workspace", FileKind::Dir));
        assert!(matches!(
            hd.remove("/workspace", true).await,
            Err(BackendError::PermissionDenied(_))
        ));
        assert!(matches!(
            hd.rename("/workspace", "/workspace/x/moved").await,
            Err(BackendError::PermissionDenied(_))
        ));
        assert!(matches!(
            hd.rename("/workspace/x", "/tmp").await,
            Err(BackendError::PermissionDenied(_))
        ));
        assert_eq!(
            hd.sandbox_path_of(&hd.root().join("x/y.txt")).as_deref(),
            Some("/workspace/x/y.txt")
        );
    }
}
