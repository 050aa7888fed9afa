//! The command's main process adopts its orphans (issue 14, the
//! newcomer trial): `PR_SET_CHILD_SUBREAPER` set in the child between
//! `fork` and `exec`.
//!
//! Why: a double fork (`setsid -f env -i sleep 300`: `setsid -f` forks and
//! its middle process exits at once) re-parents the grandchild before
//! anything is killed. Without a subreaper it becomes a child of PID 1,
//! and with `env -i` it no longer carries the marker either: neither the
//! timeout's tree walk ([`kill_tree`](crate::backend::process_tree::kill_tree))
//! nor the watcher's sweep ([`kill_line`](crate::backend::shell::marker::kill_line))
//! can find it. With the main process as its subreaper, the orphan is
//! re-parented to the main process instead, so the walk from the main
//! process (frozen first, so it cannot exit under the walk) finds it.
//!
//! Why the main process and not a shim or the watcher: the attribute
//! survives `execve` (kernel: it lives in the signal struct, which exec
//! keeps) but is not inherited by `fork`, so setting it in the child costs
//! one `prctl` and no extra process. The watcher cannot be the subreaper:
//! it is wsbench's sibling child, not an ancestor of the commands, and a
//! subreaper only adopts its own descendants. The price is the `pre_exec`
//! hook itself: std then spawns with `fork` instead of the
//! `posix_spawn`/`vfork` path (measured in the README's benchmark table).
//!
//! Limits: a process that escapes into another PID namespace or cgroup
//! (`unshare -p`, a container started by the command) is not ours to
//! adopt; an orphan whose main process already exited (the command ended
//! on its own and left a background daemon) goes to PID 1 as before, and
//! is deliberately left alone; the main process reaps adopted orphans
//! only if it waits for any child (every shell does; a program that waits
//! only for its own pids leaves them as zombies until it exits, when PID 1
//! reaps them), and a program that waits for *any* child sees them too.

use tokio::process::Command;

/// Makes `cmd`'s process a child subreaper once it is forked (before
/// `exec`). A `prctl` that fails (a kernel before 3.4) is ignored: the
/// command still runs, only without adopting its orphans.
pub(super) fn adopt_orphans(cmd: &mut Command) {
    // SAFETY: the hook runs in the forked child before exec and calls
    // only `prctl`, a plain system call that is async-signal-safe; it
    // allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_main_process_is_a_subreaper_and_adopts_a_double_fork() {
        // Field 4 of /proc/<pid>/stat is the parent: the escapee's parent
        // is the main shell, not PID 1.
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "setsid -f sleep 29; sleep 0.3; \
             for d in /proc/[0-9]*; do read -r s < $d/stat 2>/dev/null || continue; \
             set -- ${s##*) }; [ \"$2\" = $$ ] && case \"$s\" in *'(sleep)'*) echo adopted; kill ${d#/proc/};; esac; done; true",
        ]);
        adopt_orphans(&mut cmd);
        let out = cmd.output().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "adopted\n", "{out:?}");
    }
}
