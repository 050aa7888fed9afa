//! How a command's process starts on the host (local and bubblewrap): in
//! a session of its own and with every signal at its default action. Both
//! are `pre_exec` hooks, run in the forked child before `exec`.
//!
//! **Its own session** (`setsid`), not only a process group. Why (issue
//! 14, a CI failure of
//! `orphans::sigkill_of_wsbench_exec_on_local_kills_a_setsid_env_i_child`):
//! POSIX's orphaned-process-group rule. When wsbench dies, the kernel
//! re-parents the command's main process and, if that leaves the group
//! with no parent in another group *of the same session* while a member
//! is stopped, sends the whole group SIGHUP then SIGCONT (Linux:
//! `kill_orphaned_pgrp` in `kernel/exit.c`). The local reaper's watcher
//! wakes when the kernel closes wsbench's pipe, which can be before the
//! last wsbench thread re-parents its children, and its first step is to
//! stop the group. When it won that race, the SIGHUP killed the main shell
//! before the sweep could walk its children, and a `setsid env -i` child
//! (found only through its parent link) went to PID 1 and survived. A
//! command in its own session is never in its parent's session, so the
//! rule cannot fire on it. A second gain: without a controlling terminal,
//! a command that opens `/dev/tty` (ssh or sudo asking for a password, a
//! pager) gets `ENXIO` instead of reading the keys of the TUI's terminal.
//!
//! **Default signal actions.** A signal that wsbench's own parent ignored
//! stays ignored across `fork` and `exec` (std resets only SIGPIPE), and a
//! non-interactive shell may not even trap a signal ignored on entry. A
//! wsbench started with `nohup`, or as a background job of a script
//! (which ignores SIGINT and SIGQUIT), so gave every command SIGINT
//! ignored: Ctrl-C in the Command pane did nothing (the CI failures of
//! `command_input::ctrl_c_sends_sigint_and_ctrl_x_still_kills` and
//! `shell_session::session_shell_*`). The host's signal dispositions are
//! part of its environment and do not reach a sandbox.
//!
//! Limits: the session id is the main process's pid, so `ps -s` or a
//! program that compares its session with its parent's sees the
//! difference; the PTY path makes its own session (with the PTY as its
//! terminal) and uses only [`default_signals`].

use tokio::process::Command;

/// Makes `cmd`'s process the leader of a new session (and so of a new
/// process group whose id is its pid) once it is forked. A failing
/// `setsid` (the child already leads a group, which a fresh fork never
/// does) fails the spawn with its `errno`.
pub(crate) fn own_session(cmd: &mut Command) {
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

/// Resets every signal's action to the default once `cmd` is forked
/// (signals 1 to 64; the ones the C library reserves, and SIGKILL and
/// SIGSTOP, refuse the change and are skipped). The signal mask is
/// already emptied by std.
pub(crate) fn default_signals(cmd: &mut Command) {
    // SAFETY: the hook runs in the forked child before exec and calls only
    // `sigemptyset` and `sigaction`, which are async-signal-safe; the
    // struct lives on the stack and nothing is allocated.
    unsafe {
        cmd.pre_exec(|| {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut act.sa_mask);
            for sig in 1..=64 {
                libc::sigaction(sig, &act, std::ptr::null_mut());
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

    #[tokio::test]
    async fn signals_ignored_by_the_parent_are_default_in_the_command() {
        // The first hook plays wsbench's parent (`nohup`, a script's `&`):
        // it ignores HUP, INT and QUIT; the reset must undo it.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep SigIgn /proc/self/status"]);
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                Ok(())
            });
        }
        default_signals(&mut cmd);
        let out = cmd.output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let hex = text.trim().strip_prefix("SigIgn:").expect("a SigIgn line");
        // Signals 32 and 33 (bits 31 and 32) belong to the C library and
        // refuse a change; they may stay ignored (harmless: the library
        // sets its own handler before it uses them).
        let mask = u64::from_str_radix(hex.trim(), 16).unwrap() & !(0b11 << 31);
        assert_eq!(mask, 0, "{out:?}");
    }
}
