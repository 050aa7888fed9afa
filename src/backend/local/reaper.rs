//! A supervising reaper per local command: its tree dies with wsbench.
//!
//! bubblewrap has `--die-with-parent`; a plain host child does not. We
//! start, next to each command, a tiny `sh` watcher whose stdin is the
//! read end of a pipe. Only wsbench holds the write end (close-on-exec,
//! so neither the command nor any other child inherits it). When wsbench
//! ends in any way, SIGKILL included, the kernel closes the write end,
//! the watcher reads end of file and kills the command's process group
//! and then, with [`kill_line`], every process carrying the command's
//! marker (children that called `setsid` and left the group). When the
//! command ends normally, or wsbench drops the handle, it writes `done`
//! first and the watcher exits without killing anything: background
//! children of a finished command behave as before.
//!
//! Why not `PR_SET_PDEATHSIG`: it fires when the *thread* that forked the
//! child exits, and tokio's blocking-pool threads exit when idle, so it
//! would kill long commands at random; it also signals only the leader,
//! not its children. The pipe ties the watch to the process, not a thread.
//!
//! Limits: a command started and killed within the instant between its
//! spawn and its watcher's is not covered; a descendant that both left the
//! group and cleared its environment (`setsid env -i …`) is not found
//! (there is nothing left to recognise it by); the watcher itself can be
//! killed by someone else (then the command outlives wsbench as before).

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use nix::fcntl::OFlag;

use crate::backend::shell::marker::kill_line;

/// The watcher of one command; dropping it disarms the watch (the
/// command's tree is left alone).
pub(crate) struct Reaper {
    write: Option<std::fs::File>,
}

impl Reaper {
    /// Starts the watcher of the process group `pgid` whose members carry
    /// `marker`. `None` (with a warning in the log) when the pipe or the
    /// watcher cannot be started: the command then runs unwatched, as it
    /// did before this existed.
    pub(crate) fn watch(pgid: i32, marker: &str) -> Option<Reaper> {
        match Self::start(pgid, marker) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(
                    pgid,
                    "no reaper for the command (it may outlive wsbench): {e}"
                );
                None
            }
        }
    }

    fn start(pgid: i32, marker: &str) -> std::io::Result<Reaper> {
        let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let script = format!(
            "read -r x; [ \"$x\" = done ] && exit 0; kill -KILL -\"$1\" 2>/dev/null; {}",
            kill_line(marker)
        );
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", &script, "wsbench-reaper", &pgid.to_string()])
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own group: a kill of the command's group, or a Ctrl-C in the
        // terminal's foreground group, must not take the watcher with it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn()?;
        // Reap it whenever it ends, without holding anything up.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        Ok(Reaper {
            write: Some(std::fs::File::from(write)),
        })
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(mut w) = self.write.take() {
            // A watcher that is gone already gives EPIPE (SIGPIPE is
            // ignored in Rust programs): nothing to disarm then.
            let _ = w.write_all(b"done\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
    }

    fn wait_dead(pid: i32) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn sleeper() -> std::process::Child {
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("300");
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.spawn().unwrap()
    }

    #[test]
    fn losing_the_write_end_kills_the_group_and_drop_does_not() {
        // Lost write end (what wsbench's death does): the group dies.
        let mut a = sleeper();
        let pid = a.id() as i32;
        let mut r = Reaper::watch(pid, "nomarker").unwrap();
        drop(r.write.take());
        std::thread::spawn(move || a.wait());
        assert!(wait_dead(pid), "the watched group outlived the pipe");

        // Dropping the handle disarms: the command lives on.
        let mut b = sleeper();
        let pid = b.id() as i32;
        drop(Reaper::watch(pid, "nomarker").unwrap());
        std::thread::sleep(Duration::from_millis(300));
        let still = alive(pid);
        let _ = b.kill();
        let _ = b.wait();
        assert!(still, "a disarmed watcher killed the command");
    }
}
