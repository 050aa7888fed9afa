//! A lock shared by the wsbench processes of one host (issue 15 point 3):
//! the cloud services have no unique sandbox name to conflict on, so two
//! processes first-using one workspace would each find nothing and each
//! create a sandbox. Holding [`HostLock`] around "find again, else
//! create" makes the second one find the first one's sandbox.
//!
//! The lock is an exclusive `flock` on `<dir>/<scope>-<hash>.lock`, where
//! `<dir>` is `$XDG_RUNTIME_DIR/wsbench/locks` (else the user's cache
//! dir, else the temp dir, each with `wsbench/locks` under it, made
//! mode 0700) and `<hash>` is BLAKE2b-64 of the key, so any key gives a
//! safe file name. The kernel drops a `flock` when its process dies, so a
//! crashed holder never blocks the others. Limits: it covers the
//! processes of one host (and one user's directories) only; processes on
//! other machines still race, and the newest sandbox then wins `find`.
//! Lock files stay (a few bytes each; removing one while another process
//! waits on it would split the lock).

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use blake2::digest::consts::U8;
use blake2::{Blake2b, Digest};
use nix::fcntl::{Flock, FlockArg};

use crate::backend::{BackendError, BackendResult};

/// How often a waiting process tries the lock again.
const POLL: Duration = Duration::from_millis(25);

/// An exclusive host lock, released when dropped (or when the process
/// ends).
#[derive(Debug)]
pub struct HostLock {
    _file: Flock<File>,
    path: PathBuf,
}

impl HostLock {
    /// Takes the lock of (`scope`, `key`) in the default directory (see
    /// the module doc), waiting at most `wait`.
    ///
    /// Returns `Ok(None)` when no lock directory can be made (a read-only
    /// home and temp dir): the caller goes on unlocked, as before the
    /// lock existed, and only cross-process races are unprotected.
    ///
    /// Errors: [`BackendError::Unavailable`] (unreachable) when another
    /// process holds the lock for longer than `wait`, naming the file.
    pub async fn acquire(scope: &str, key: &str, wait: Duration) -> BackendResult<Option<Self>> {
        match lock_dir() {
            Some(dir) => Self::acquire_in(&dir, scope, key, wait).await.map(Some),
            None => Ok(None),
        }
    }

    /// Takes the lock of (`scope`, `key`) in `dir` (made if missing),
    /// waiting at most `wait`.
    ///
    /// Errors: as [`HostLock::acquire`]; the lock file cannot be opened
    /// ([`BackendError::Io`]).
    pub async fn acquire_in(
        dir: &Path,
        scope: &str,
        key: &str,
        wait: Duration,
    ) -> BackendResult<Self> {
        let (file, path) = lock_in(dir, scope, key, wait, Mode::Exclusive).await?;
        Ok(HostLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn io(context: String, source: std::io::Error) -> BackendError {
    BackendError::Io { context, source }
}

/// Which `flock` to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exclusive,
    Shared,
}

/// Opens (creating) `<dir>/<scope>-<hash>.lock` and takes a `mode` lock
/// on it, polling every [`POLL`] for at most `wait`.
async fn lock_in(
    dir: &Path,
    scope: &str,
    key: &str,
    wait: Duration,
    mode: Mode,
) -> BackendResult<(Flock<File>, PathBuf)> {
    make_dir(dir).map_err(|e| io(format!("making the lock directory {}", dir.display()), e))?;
    let path = dir.join(file_name(scope, key));
    let arg = match mode {
        Mode::Exclusive => FlockArg::LockExclusiveNonblock,
        Mode::Shared => FlockArg::LockSharedNonblock,
    };
    let started = Instant::now();
    loop {
        match try_once(&path, arg)? {
            Some(f) => return Ok((f, path)),
            None if started.elapsed() < wait => tokio::time::sleep(POLL).await,
            None => {
                let what = match mode {
                    Mode::Exclusive => "it is making the same sandbox",
                    Mode::Shared => "it is closing the same workspace",
                };
                return Err(BackendError::unreachable(format!(
                    "another wsbench process has held {} for over {} s ({what}); try again",
                    path.display(),
                    wait.as_secs()
                )));
            }
        }
    }
}

/// One non-blocking attempt: `Ok(None)` when another open file holds a
/// conflicting lock.
fn try_once(path: &Path, arg: FlockArg) -> BackendResult<Option<Flock<File>>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io(format!("opening the lock {}", path.display()), e))?;
    match Flock::lock(file, arg) {
        Ok(f) => Ok(Some(f)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(io(
            format!("locking {}", path.display()),
            std::io::Error::from(e),
        )),
    }
}

/// A shared hold on a workspace by one process (issue 15): every process
/// that uses a workspace holds a shared `flock` on its file for as long
/// as it uses it, and at close a process suspends the sandbox only if it
/// can turn its hold into the exclusive lock ([`HostHold::try_sole`]),
/// i.e. no other process of this host still holds the workspace.
/// Otherwise a one-shot `wsbench exec` that exits would pause a sandbox
/// other processes are running commands in.
///
/// Same files and directory as [`HostLock`] (another scope). Limits: only
/// the processes of this host (and of one user's lock directory) are
/// seen; a process on another machine using the same sandbox is not, and
/// may still have it suspended under it (its next call then resumes it,
/// `manager::heal`).
#[derive(Debug)]
pub struct HostHold {
    file: Flock<File>,
    path: PathBuf,
}

impl HostHold {
    /// Takes a shared hold of (`scope`, `key`) in the default directory,
    /// waiting at most `wait` while another process holds it exclusively
    /// (it is suspending the sandbox: the caller then resumes it after).
    ///
    /// Returns `Ok(None)` when no lock directory can be made: the caller
    /// goes on unheld (it then never sees the others, nor they it).
    ///
    /// Errors: [`BackendError::Unavailable`] (unreachable) after `wait`,
    /// naming the file.
    pub async fn acquire(scope: &str, key: &str, wait: Duration) -> BackendResult<Option<Self>> {
        match lock_dir() {
            Some(dir) => Self::acquire_in(&dir, scope, key, wait).await.map(Some),
            None => Ok(None),
        }
    }

    /// Takes a shared hold of (`scope`, `key`) in `dir` (made if missing).
    ///
    /// Errors: as [`HostHold::acquire`]; the lock file cannot be opened
    /// ([`BackendError::Io`]).
    pub async fn acquire_in(
        dir: &Path,
        scope: &str,
        key: &str,
        wait: Duration,
    ) -> BackendResult<Self> {
        let (file, path) = lock_in(dir, scope, key, wait, Mode::Shared).await?;
        Ok(HostHold { file, path })
    }

    /// Takes a shared hold of (`scope`, `key`) in the default directory
    /// now, without waiting: `None` when it is held exclusively, or
    /// when no lock directory or file can be had (for a workspace id
    /// just minted, which no other process can hold yet).
    pub fn try_acquire(scope: &str, key: &str) -> Option<Self> {
        let path = lock_dir()?.join(file_name(scope, key));
        let file = try_once(&path, FlockArg::LockSharedNonblock).ok()??;
        Some(HostHold { file, path })
    }

    /// Records a use of the workspace now: the lock file's mtime, which
    /// [`HostHold::last_used`] reads (the last activity of backends whose
    /// service reports none). Best effort: an error only loses the stamp.
    pub fn stamp(&self) {
        if let Err(e) = self.file.set_modified(std::time::SystemTime::now()) {
            tracing::debug!("stamping {}: {e}", self.path.display());
        }
    }

    /// When a process of this host last stamped (`scope`, `key`): the
    /// mtime of its lock file in the default directory; `None` when there
    /// is none (never used here, or the runtime directory was cleared).
    pub fn last_used(scope: &str, key: &str) -> Option<std::time::SystemTime> {
        let path = lock_dir()?.join(file_name(scope, key));
        std::fs::metadata(path).and_then(|m| m.modified()).ok()
    }

    /// Turns this hold into the exclusive lock without waiting
    /// (`LOCK_EX | LOCK_NB`): `Some` when no other process holds the same
    /// key (the caller is the last user; keep the lock while suspending
    /// so a process arriving meanwhile waits, then resumes), `None` when
    /// another one does.
    ///
    /// Consumes the hold: Linux converts a `flock` by dropping the old
    /// lock first, so a failed conversion leaves nothing held. Of several
    /// processes closing at once at least one gets `Some`, since each
    /// drops its shared lock before testing the others'.
    pub fn try_sole(self) -> Option<HostLock> {
        let HostHold { file, path } = self;
        match file.relock(FlockArg::LockExclusiveNonblock) {
            Ok(()) => Some(HostLock { _file: file, path }),
            Err(_) => None,
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `<scope>-<16 hex digits>.lock`, the scope cut to safe characters.
fn file_name(scope: &str, key: &str) -> String {
    let scope: String = scope
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(32)
        .collect();
    let hash = hex::encode(Blake2b::<U8>::digest(key.as_bytes()));
    format!("{scope}-{hash}.lock")
}

/// The first of the candidate directories that exists or can be made.
fn lock_dir() -> Option<PathBuf> {
    [
        dirs::runtime_dir(),
        dirs::cache_dir(),
        Some(std::env::temp_dir()),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("wsbench").join("locks"))
    .find(|d| make_dir(d).is_ok())
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_holder_waits_and_then_times_out_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let held = HostLock::acquire_in(dir.path(), "e2b", "ws/1", Duration::ZERO)
            .await
            .unwrap();
        let e = HostLock::acquire_in(dir.path(), "e2b", "ws/1", Duration::from_millis(80))
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains(&held.path().display().to_string()),
            "{e}"
        );
        assert_eq!(e.health(), crate::backend::Health::Unreachable);
        // Another key is another lock.
        HostLock::acquire_in(dir.path(), "e2b", "ws/2", Duration::ZERO)
            .await
            .unwrap();
        drop(held);
        HostLock::acquire_in(dir.path(), "e2b", "ws/1", Duration::ZERO)
            .await
            .unwrap();
    }

    #[test]
    fn file_names_are_safe_for_any_key() {
        let n = file_name("e2b/../x", "../../etc/passwd\0");
        assert!(n.starts_with("e2bx-") && n.ends_with(".lock"), "{n}");
        assert!(!n.contains('/'));
        assert_ne!(file_name("e2b", "a"), file_name("e2b", "b"));
    }
    #[tokio::test]
    async fn the_last_holder_is_sole_and_a_newcomer_waits_for_its_close() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let wait = Duration::from_millis(60);
        let a = HostHold::acquire_in(d, "hold", "docker/w", wait)
            .await
            .unwrap();
        let b = HostHold::acquire_in(d, "hold", "docker/w", wait)
            .await
            .unwrap();
        // Another holder: a is not the last one (and its hold is gone).
        assert!(a.try_sole().is_none());
        // b is now alone.
        let sole = b.try_sole().expect("b is the last holder");
        // While b suspends, a newcomer waits, and times out naming the file.
        let e = HostHold::acquire_in(d, "hold", "docker/w", wait)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("closing the same workspace"), "{e}");
        assert!(
            e.to_string().contains(&sole.path().display().to_string()),
            "{e}"
        );
        // Another key is not held.
        let other = HostHold::acquire_in(d, "hold", "docker/v", Duration::ZERO)
            .await
            .unwrap();
        assert!(other.try_sole().is_some());
        drop(sole);
        let c = HostHold::acquire_in(d, "hold", "docker/w", Duration::ZERO)
            .await
            .unwrap();
        assert!(c.try_sole().is_some());
    }

    #[test]
    fn a_hold_and_the_exclusive_lock_conflict_across_open_files() {
        // flock locks belong to the open file, so two opens in one process
        // behave like two processes: what the manager's entries rely on.
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let held = HostHold::acquire_in(dir.path(), "hold", "k", Duration::ZERO)
                .await
                .unwrap();
            let e = HostLock::acquire_in(dir.path(), "hold", "k", Duration::ZERO).await;
            assert!(e.is_err());
            drop(held);
            HostLock::acquire_in(dir.path(), "hold", "k", Duration::ZERO)
                .await
                .unwrap();
        });
    }
}
