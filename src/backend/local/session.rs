//! A local command leads a session of its own (`setsid` between `fork`
//! and `exec`), not only a process group.
//!
//! Why (issue 14, a CI failure of
//! `orphans::sigkill_of_wsbench_exec_on_local_kills_a_setsid_env_i_child`):
//! POSIX's orphaned-process-group rule. When wsbench dies, the kernel
//! re-parents the command's main process and, if that leaves the group
//! with no parent in another group *of the same session* while a member
//! is stopped, sends the whole group SIGHUP then SIGCONT (Linux:
//! `kill_orphaned_pgrp` in `kernel/exit.c`). The watcher
//! ([`reaper`](super::reaper)) wakes when the kernel closes wsbench's
//! pipe, which can be before the last wsbench thread re-parents its
//! children, and its first step is to stop the group. When it won that
//! race, the SIGHUP killed the main shell before the sweep could walk its
//! children, and a `setsid env -i` child (found only through its parent
//! link) went to PID 1 and survived. A command in its own session is never
//! in its parent's session, so the rule cannot fire on it at all.
//!
//! A second gain: without a controlling terminal, a command that opens
//! `/dev/tty` (ssh or sudo asking for a password, a pager) gets `ENXIO`
//! instead of reading the keys of the TUI's terminal or writing over its
//! screen.
//!
//! Limits: the session id is the main process's pid, so `ps -s` or a
//! program that compares its session with its parent's sees the
//! difference; the PTY path ([`pty`](super::pty)) makes its own session
//! (with the PTY as its terminal) and does not use this.

use tokio::process::Command;

/// Makes `cmd`'s process the leader of a new session (and so of a new
/// process group whose id is its pid) once it is forked. A failing
/// `setsid` (the child already leads a group, which a fresh fork never
/// does) fails the spawn with its `errno`.
pub(super) fn own_session(cmd: &mut Command) {
    // SAFETY: the hook runs in the forked child before exec and calls
    // only `setsid`, an async-signal-safe system call; it allocates
    // nothing and touches no lock.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_command_leads_its_own_session_and_has_no_terminal() {
        // Field 6 of /proc/<pid>/stat is the session, field 5 the group;
        // both are the shell's own pid. /dev/tty cannot be opened.
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "read -r s < /proc/$$/stat; set -- ${s##*) }; \
             echo \"$(( $3 == $$ )) $(( $4 == $$ ))\"; \
             if (exec 3</dev/tty) 2>/dev/null; then echo tty; else echo no-tty; fi",
        ]);
        own_session(&mut cmd);
        let out = cmd.output().await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "1 1\nno-tty\n",
            "{out:?}"
        );
    }
}
