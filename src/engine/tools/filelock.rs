//! Per-file serialisation of the read-modify-write tools (Edit, and Write
//! over an existing file; the TUI editor saves through Write), so that
//! concurrent edits of one file never lose each other's changes.
//!
//! Three layers:
//!
//! * **In this process**, one async mutex per file (keyed by the host path
//!   where the backend has one, else by sandbox and backend path): every
//!   call through the engine, whatever the backend, is serialised.
//! * **Across processes** on backends with a host view of the workspace
//!   (local, bubblewrap, Docker with a bind mount), an exclusive `flock` on
//!   the file's parent directory, held for the read-modify-write. The
//!   directory rather than the file: Write replaces the file by rename, so
//!   a lock on the file's inode would not be seen by the next writer, and
//!   a separate lock file would show up in listings. The cost is that
//!   edits of different files in one directory wait for each other (each
//!   holds the lock for one read and one write).
//!
//! * **Across processes** on backends without a host view that name
//!   their sandbox ([`Sandbox::lock_identity`]: Docker with volume or no
//!   storage, Kubernetes), an exclusive host lock
//!   ([`HostLock`], `flock` on a file in wsbench's lock directory) keyed
//!   by that name and the path, held for the read-modify-write. It waits
//!   at most [`SHARED_WAIT`]; after that (a holder stuck on a dead
//!   daemon, or a very long queue) the tool refuses and writes nothing.
//!   When no lock directory can be made, only the check below applies.
//!
//! Edit also checks just before writing that the file is still
//! what was read ([`ensure_unchanged`]) and refuses with "changed since
//! read" otherwise; that catches writers outside wsbench and wsbench
//! processes the locks do not cover. Limits: the host locks cover the
//! wsbench processes of one host only (two hosts editing one Docker
//! volume or Pod are not serialised), the cloud services name no sandbox
//! yet (in-process lock only), and the check and the write are two
//! operations, so a writer landing between them is still overwritten.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::OwnedMutexGuard;

use crate::backend::Sandbox;
use crate::backend::host::lock::HostLock;

/// How long a tool waits for other wsbench processes' edits of the same
/// file in the same sandbox (each holds it for a few round trips to the
/// sandbox; 50 queued edits on a loaded machine took over two minutes).
pub const SHARED_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// In-process locks by key; entries nobody holds are pruned on insert.
static LOCKS: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Held while a tool reads, changes and writes one file; dropping it lets
/// the next writer in.
pub struct FileGuard {
    _host: Option<nix::fcntl::Flock<std::fs::File>>,
    _shared: Option<HostLock>,
    _local: OwnedMutexGuard<()>,
}

/// Waits for exclusive use of `path` (a backend path) on `sb`; see the
/// module docs for what that covers. When the host directory's lock
/// cannot be taken (the parent directory does not exist yet, so there is
/// nothing to lose) only the in-process lock is held.
///
/// Errors: a message for the tool's result when another process held the
/// shared lock for longer than [`SHARED_WAIT`] (nothing was written).
pub async fn lock(sb: &Arc<dyn Sandbox>, path: &str) -> Result<FileGuard, String> {
    let host = sb.host_path(path);
    let key = match &host {
        Some(p) => format!("host:{}", p.display()),
        None => format!("{:p}:{path}", Arc::as_ptr(sb) as *const ()),
    };
    let mutex = {
        let mut map = LOCKS.lock().expect("file lock map");
        map.retain(|_, m| Arc::strong_count(m) > 1);
        map.entry(key).or_default().clone()
    };
    let local = mutex.lock_owned().await;
    let shared = match (&host, sb.lock_identity()) {
        (None, Some(id)) => {
            match HostLock::acquire("file", &format!("{id}\n{path}"), SHARED_WAIT).await {
                Ok(l) => l,
                Err(e) => {
                    return Err(format!(
                        "Error: {path} is being changed by another wsbench process and its lock \
                         was not free within {} s ({e}); nothing was written. Try again.",
                        SHARED_WAIT.as_secs()
                    ));
                }
            }
        }
        _ => None,
    };
    let host = match host.and_then(|p| p.parent().map(|d| d.to_path_buf())) {
        Some(dir) => tokio::task::spawn_blocking(move || {
            let f = std::fs::File::open(dir).ok()?;
            nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok()
        })
        .await
        .ok()
        .flatten(),
        None => None,
    };
    Ok(FileGuard {
        _host: host,
        _shared: shared,
        _local: local,
    })
}

/// Checks, just before a write, that `path` still holds `read` (the bytes
/// the tool based its change on).
///
/// Errors: a message for the tool's result when the file changed (or
/// vanished, or cannot be read back) since it was read.
pub async fn ensure_unchanged(sb: &dyn Sandbox, path: &str, read: &[u8]) -> Result<(), String> {
    match sb.read(path, None).await {
        Ok(now) if now == read => Ok(()),
        Ok(_) => Err(format!(
            "Error: {path} changed since it was read (another writer changed it meanwhile); \
             nothing was written. Read it again and redo the change."
        )),
        Err(e) => Err(format!(
            "Error: {path} could not be read back before writing ({e}); nothing was written."
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::local::LocalSandbox;

    #[tokio::test]
    async fn one_holder_per_file_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let sb: Arc<dyn Sandbox> = Arc::new(LocalSandbox::open(dir.path()).unwrap());
        let p = format!("{}/f.txt", sb.workdir());
        let g = lock(&sb, &p).await.unwrap();
        let sb2 = sb.clone();
        let p2 = p.clone();
        let mut waiter = tokio::spawn(async move {
            let _g = lock(&sb2, &p2).await.unwrap();
        });
        // The second lock cannot be had while the first is held.
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), &mut waiter)
                .await
                .is_err()
        );
        drop(g);
        waiter.await.unwrap();
    }

    #[tokio::test]
    async fn a_change_since_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sb = LocalSandbox::open(dir.path()).unwrap();
        let p = format!("{}/f.txt", sb.workdir());
        sb.write(&p, b"a").await.unwrap();
        assert!(ensure_unchanged(&sb, &p, b"a").await.is_ok());
        sb.write(&p, b"b").await.unwrap();
        let e = ensure_unchanged(&sb, &p, b"a").await.unwrap_err();
        assert!(e.contains("changed since it was read"), "{e}");
    }
}
