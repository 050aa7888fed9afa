//! What the backends whose files live in a host directory share (local,
//! bubblewrap, and Docker with a bind mount): the sandbox's view of host
//! directories with links confined to the workspace ([`HostDir`]), host
//! file helpers (stat, atomic write, locked append, checked append), watching, safe
//! file names from ids, removing the temp files of killed writes, and the
//! lock the processes of one host share ([`lock::HostLock`]).

pub mod checked_append;
pub(crate) mod child_start;
pub mod fs;
pub(crate) mod hostdir;
pub mod lock;
pub mod names;
pub(crate) mod pty;
pub mod sweep;
pub mod task;
pub(crate) mod tree_process;
pub mod watch;

pub use fs::{
    append_host, atomic_write_host, create_new_host, finish_atomic, new_temp, read_host,
    remove_host, stat_host, stream_to_temp, with_bytes,
};
pub use hostdir::{HostDir, MAX_LINK_HOPS, Mount};
pub use names::sanitize_segment;
pub use task::{blocking, join_io_error};
pub(crate) use watch::PathMapper;
pub use watch::watch_host;

use std::path::Path;

use super::{BackendError, BackendResult};

/// Checks that a host-backed sandbox's root directory still exists
/// (issue 15 point 1): when someone removed it, the sandbox is
/// [`BackendError::gone`] — without this check a write would recreate
/// parents under a fresh empty root and bwrap would fail its bind mount
/// with an exit code, both hiding the loss. One `lstat` per call.
///
/// Errors: [`BackendError::gone`] naming `root` when it is missing or no
/// longer a directory; other `lstat` failures pass (the call reports them).
pub fn root_present(root: &Path) -> BackendResult<()> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(BackendError::gone(format!(
            "the workspace directory {} is no longer a directory",
            root.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BackendError::gone(format!(
            "the workspace directory {} was removed",
            root.display()
        ))),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Health;

    #[test]
    fn a_removed_root_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        assert!(root_present(dir.path()).is_ok());
        let root = dir.path().join("ws");
        let e = root_present(&root).unwrap_err();
        assert_eq!(e.health(), Health::Gone);
        assert!(e.to_string().contains("was removed"), "{e}");
        std::fs::write(&root, b"x").unwrap();
        assert_eq!(root_present(&root).unwrap_err().health(), Health::Gone);
    }
}
