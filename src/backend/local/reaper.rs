//! A supervising reaper for local commands: their trees die with wsbench.
//!
//! bubblewrap has `--die-with-parent`; a plain host child does not. One
//! tiny `sh` watcher per wsbench process (started with the first command)
//! reads, on its stdin, the read end of a pipe whose write end only
//! wsbench holds (close-on-exec, so neither a command nor any other child
//! inherits it). Each command is announced as a line `w <pgid> <marker>`
//! when it starts and withdrawn with `d <pgid> <marker>` when it ends or
//! wsbench drops its handle. When wsbench ends in any way, SIGKILL
//! included, the kernel closes the write end; the watcher reads end of
//! file and, for every command still announced, freezes its process
//! group, kills with [`kill_line`] every process carrying its marker
//! (children that called `setsid` and left the group) and every descendant
//! of one (children that also cleared their environment), and then kills
//! the group (see `script` for why in this order). Background children
//! of a finished command are left alone, as before.
//!
//! Issue 18: a watcher per command (issue 14's first version) doubled the
//! cost of every spawn; a line on a pipe costs one `write`.
//!
//! Why not `PR_SET_PDEATHSIG`: it fires when the *thread* that forked the
//! child exits, and tokio's blocking-pool threads exit when idle, so it
//! would kill long commands at random; it also signals only the leader,
//! not its children. The pipe ties the watch to the process, not a thread.
//!
//! The group is stopped as soon as the pipe closes, possibly before the
//! kernel has re-parented the command: that is safe only because the
//! command leads its own session (`session`: otherwise the kernel's
//! orphaned-group rule answers the stop with SIGHUP and kills the main
//! process before the sweep walks its children).
//!
//! Limits: a command started and killed within the instant between its
//! spawn and its announcement is not covered; a descendant that left the
//! group, cleared its environment (`setsid env -i …`) *and* lost its
//! parent link before wsbench died (a double fork whose middle process
//! exited) is found only because the command's main process is its
//! subreaper (`subreaper`: it adopted the orphan, and the freeze keeps it
//! alive while the sweep walks its children), so such a child whose main
//! process had already exited is not found; a main process that writes output
//! non-stop may die of SIGPIPE (its output pipe lost its reader with
//! wsbench) in the instant before the freeze, orphaning such a child the
//! same way; when the watcher is killed
//! by someone else, the next command starts a new one (the commands
//! announced to the old one are then unwatched).

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::Mutex;

use nix::fcntl::OFlag;

use crate::backend::shell::marker::kill_line;

/// The watcher's script: keeps the announced `pgid:marker` pairs, and at
/// end of file, for every pair, first freezes the group (SIGSTOP), then
/// sweeps the marker and the descendants with [`kill_line`], and only
/// then kills the group (SIGKILL, a backstop for members the sweep did not
/// reach); the sweeps run in parallel.
///
/// Why this order (issue 14): the sweep finds a `setsid env -i` child only
/// by its parent link, and killing the group first (as the first version
/// did) killed that parent, so the child was re-parented to PID 1 before
/// the sweep looked and survived. A stopped process cannot exit, so the
/// links hold while the sweep reads `/proc` (seconds on a busy machine).
///
/// The marker is spliced into [`kill_line`]'s single-quoted pattern as
/// `'"$m"'` (close the quote, the variable, reopen), so the one sweep
/// script serves every marker; the sweep runs in a subshell of its own
/// because it ends with `exit`.
fn script() -> String {
    format!(
        "L=; while read -r op g m; do case $op in \
w) L=\"$L $g:$m\" ;; \
d) N=; for e in $L; do [ \"$e\" = \"$g:$m\" ] || N=\"$N $e\"; done; L=$N ;; \
esac; done; \
for e in $L; do kill -STOP -\"${{e%%:*}}\" 2>/dev/null; done; \
for e in $L; do g=${{e%%:*}}; m=${{e#*:}}; ( ( {} ); kill -KILL -\"$g\" 2>/dev/null ) & done; wait",
        kill_line("'\"$m\"'")
    )
}

/// One watcher process and the write end of its pipe.
pub(crate) struct Watcher {
    write: std::fs::File,
    child: std::process::Child,
}

impl Watcher {
    /// Starts a watcher in its own process group: a kill of a command's
    /// group, or a Ctrl-C in the terminal's foreground group, must not
    /// take it along.
    pub(crate) fn start() -> std::io::Result<Watcher> {
        let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", &script(), "wsbench-reaper"])
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn()?;
        Ok(Watcher {
            write: std::fs::File::from(write),
            child,
        })
    }

    /// Sends one line (shorter than `PIPE_BUF`, so never interleaved).
    fn send(&mut self, op: char, pgid: i32, marker: &str) -> std::io::Result<()> {
        self.write
            .write_all(format!("{op} {pgid} {marker}\n").as_bytes())
    }
}

/// The process's watcher, started with the first command.
static WATCHER: Mutex<Option<Watcher>> = Mutex::new(None);

/// The watch over one command; dropping it withdraws the command (its
/// tree is then left alone).
pub(crate) struct Reaper {
    pgid: i32,
    marker: String,
}

impl Reaper {
    /// Announces the process group `pgid` whose members carry `marker` to
    /// the process's watcher (starting it, or a new one when the old one is
    /// gone). `None` (with a warning in the log) when no watcher can be
    /// started: the command then runs unwatched, as it did before this
    /// existed.
    pub(crate) fn watch(pgid: i32, marker: &str) -> Option<Reaper> {
        let mut slot = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..2 {
            let w = match slot.as_mut() {
                Some(w) => w,
                None => match Watcher::start() {
                    Ok(w) => slot.insert(w),
                    Err(e) => {
                        tracing::warn!(
                            pgid,
                            "no reaper for the command (it may outlive wsbench): {e}"
                        );
                        return None;
                    }
                },
            };
            if w.send('w', pgid, marker).is_ok() {
                return Some(Reaper {
                    pgid,
                    marker: marker.to_string(),
                });
            }
            // The watcher is gone (EPIPE; SIGPIPE is ignored in Rust
            // programs): reap it and start another.
            if let Some(mut old) = slot.take() {
                let _ = old.child.try_wait();
            }
        }
        tracing::warn!(
            pgid,
            "no reaper for the command (it may outlive wsbench): the watcher keeps dying"
        );
        None
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let mut slot = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = slot.as_mut() {
            // A watcher that is gone has nothing to withdraw.
            let _ = w.send('d', self.pgid, &self.marker);
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
    fn losing_the_write_end_kills_the_group_and_withdrawn_commands_live() {
        // A watcher of its own: the process's shared one must stay.
        let mut w = Watcher::start().unwrap();
        let mut a = sleeper();
        let a_pid = a.id() as i32;
        let mut b = sleeper();
        let b_pid = b.id() as i32;
        w.send('w', a_pid, "nomarker").unwrap();
        w.send('w', b_pid, "nomarker2").unwrap();
        w.send('d', b_pid, "nomarker2").unwrap();
        // Lost write end (what wsbench's death does): the announced group
        // dies, the withdrawn one lives on.
        let Watcher { write, mut child } = w;
        drop(write);
        std::thread::spawn(move || a.wait());
        assert!(wait_dead(a_pid), "the watched group outlived the pipe");
        let _ = child.wait();
        let still = alive(b_pid);
        let _ = b.kill();
        let _ = b.wait();
        assert!(still, "a withdrawn command was killed");
    }

    #[test]
    fn losing_the_write_end_kills_a_setsid_env_i_child_of_the_group() {
        // The escapee has no marker and its own session: only its parent,
        // the group's shell, leads to it, so the watcher must walk the
        // links before it kills the group.
        let marker = crate::backend::shell::marker::new_marker();
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("pid");
        let script = format!(
            "setsid env -i sleep 300 & echo $! > {0}.tmp; mv {0}.tmp {0}; while :; do sleep 1; done",
            pidfile.display()
        );
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", &script])
            .env(crate::backend::shell::marker::MARKER_VAR, &marker);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut main = cmd.spawn().unwrap();
        let t0 = Instant::now();
        let esc: i32 = loop {
            if let Ok(p) = std::fs::read_to_string(&pidfile) {
                break p.trim().parse().unwrap();
            }
            assert!(t0.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(20));
        };
        // Wait until `env -i` has run (the environment is empty).
        while std::fs::read(format!("/proc/{esc}/environ")).is_ok_and(|e| !e.is_empty()) {
            assert!(t0.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut w = Watcher::start().unwrap();
        w.send('w', main.id() as i32, &marker).unwrap();
        let Watcher { write, mut child } = w;
        drop(write);
        std::thread::spawn(move || main.wait());
        let dead = wait_dead(esc);
        let _ = child.wait();
        if !dead {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(esc),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        assert!(dead, "the setsid env -i child {esc} survived the watcher");
    }

    #[test]
    fn the_shared_watcher_is_started_once() {
        let mut s = sleeper();
        let r1 = Reaper::watch(s.id() as i32, "m1").unwrap();
        let first = WATCHER.lock().unwrap().as_ref().unwrap().child.id();
        let r2 = Reaper::watch(s.id() as i32, "m2").unwrap();
        let second = WATCHER.lock().unwrap().as_ref().unwrap().child.id();
        drop((r1, r2));
        let _ = s.kill();
        let _ = s.wait();
        assert_eq!(first, second, "a second watcher was started");
    }
}
