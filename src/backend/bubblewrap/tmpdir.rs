//! The private `/tmp` of a bubblewrap sandbox on the host, and the sweep
//! that removes those of wsbench processes that died without cleaning up.
//!
//! A sandbox's `/tmp` is a host temp dir removed when the sandbox is
//! dropped; a SIGKILLed wsbench drops nothing, so one dir was left per
//! killed process (issue 14, the newcomer trial). The dir's name carries
//! its owner: `wsbench-bwrap-tmp-<pid>-<start>-<random>`, `<start>` being
//! the owner's start time (field 22 of `/proc/<pid>/stat`, clock ticks
//! since boot), so a reused pid is not taken for the owner. Every new
//! sandbox first sweeps the temp directory for such dirs whose owner is
//! gone and removes them.
//!
//! Why a sweep at start-up and not the local reaper's watcher: it needs
//! no process per wsbench (bwrap runs need no watcher: `--die-with-parent`
//! ends the command), and it also cleans up after a watcher that was
//! killed too, or a reboot into a persistent `/tmp`. Limit: a dead
//! process's dir stays until the next bubblewrap sandbox is opened by the
//! same user with the same temp directory (`TMPDIR`); dirs of an older
//! wsbench (no owner in the name) are left alone, since nothing says
//! whether their owner lives.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Prefix of every private `/tmp` dir.
const PREFIX: &str = "wsbench-bwrap-tmp-";

/// Most directory entries of the temp directory looked at by one sweep
/// (a huge shared `/tmp` must not slow every open down); what lies beyond
/// is left for a later sweep.
const SWEEP_MAX_ENTRIES: usize = 20_000;

/// Most stale dirs removed by one sweep.
const SWEEP_MAX_REMOVED: usize = 64;

/// The start time of process `pid` (field 22 of its `stat`), `None` when
/// it does not exist (or is a zombie: dead, only not yet reaped).
fn start_time(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split_ascii_whitespace();
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    // `rest` starts at field 3 (the state, consumed above).
    fields.nth(22 - 4)?.parse().ok()
}

/// `(pid, start)` from a dir name made by [`create`].
fn owner_of(name: &str) -> Option<(u32, u64)> {
    let mut it = name.strip_prefix(PREFIX)?.splitn(3, '-');
    let pid = it.next()?.parse().ok()?;
    let start = it.next()?.parse().ok()?;
    it.next()?;
    Some((pid, start))
}

/// Removes, under `dir`, the private `/tmp` dirs (owned by this user, not
/// links) whose owner process is gone. Returns how many were removed.
/// Errors are skipped: a dir that cannot be removed now is tried again by
/// the next sweep.
pub(super) fn sweep(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut removed = 0;
    for (seen, e) in rd.flatten().enumerate() {
        if seen >= SWEEP_MAX_ENTRIES || removed >= SWEEP_MAX_REMOVED {
            tracing::debug!(
                dir = %dir.display(),
                "stale bwrap tmp sweep stopped after {seen} entries, {removed} removed"
            );
            break;
        }
        let name = e.file_name();
        let Some((pid, start)) = name.to_str().and_then(owner_of) else {
            continue;
        };
        if start_time(pid) == Some(start) {
            continue;
        }
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid);
        // `remove_dir_all` does not follow links inside the dir.
        if ours && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Sweeps the temp directory ([`sweep`]) and creates this process's new
/// private `/tmp` dir there, removed when the returned handle is dropped.
///
/// Errors: the dir cannot be created.
pub(super) fn create() -> std::io::Result<tempfile::TempDir> {
    let base = std::env::temp_dir();
    let n = sweep(&base);
    if n > 0 {
        tracing::info!("removed {n} private /tmp dirs of dead wsbench processes");
    }
    let pid = std::process::id();
    let start = start_time(pid).unwrap_or(0);
    tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{pid}-{start}-"))
        .tempdir_in(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_owner_and_only_dead_owners_dirs_are_swept() {
        let base = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let my_start = start_time(me).unwrap();
        // A process that has exited and been reaped: its pid is free.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        let names = [
            format!("{PREFIX}{me}-{my_start}-live"),
            format!("{PREFIX}{dead}-1-dead"),
            // This pid, another start time: a reused pid, owner gone.
            format!("{PREFIX}{me}-{}-reused", my_start + 1),
            // An older wsbench's name (no owner): left alone.
            format!("{PREFIX}Ab3xYz"),
            "unrelated-dir".to_string(),
        ];
        for n in &names {
            std::fs::create_dir(base.path().join(n)).unwrap();
        }
        std::fs::write(base.path().join(&names[1]).join("f"), "x").unwrap();
        // A link named like a stale dir is not followed or removed.
        let target = tempfile::tempdir().unwrap();
        let link = base.path().join(format!("{PREFIX}{dead}-2-link"));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        assert_eq!(sweep(base.path()), 2);
        let left: Vec<bool> = names.iter().map(|n| base.path().join(n).exists()).collect();
        assert_eq!(left, [true, false, false, true, true]);
        assert!(link.symlink_metadata().is_ok() && target.path().exists());
        assert_eq!(owner_of(&names[0]), Some((me, my_start)));
    }
}
