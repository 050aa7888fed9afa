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
        make_dir(dir).map_err(|e| io(format!("making the lock directory {}", dir.display()), e))?;
        let path = dir.join(file_name(scope, key));
        let started = Instant::now();
        loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| io(format!("opening the lock {}", path.display()), e))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(f) => return Ok(HostLock { _file: f, path }),
                Err((_, nix::errno::Errno::EWOULDBLOCK)) if started.elapsed() < wait => {
                    tokio::time::sleep(POLL).await;
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    return Err(BackendError::unreachable(format!(
                        "another wsbench process has held {} for over {} s (it is making the same sandbox); try again",
                        path.display(),
                        wait.as_secs()
                    )));
                }
                Err((_, e)) => {
                    return Err(io(
                        format!("locking {}", path.display()),
                        std::io::Error::from(e),
                    ));
                }
            }
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn io(context: String, source: std::io::Error) -> BackendError {
    BackendError::Io { context, source }
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
}
