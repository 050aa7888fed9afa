//! The process marker and the one script that kills by it.
//!
//! Every command a backend runs carries [`MARKER_VAR`]`=<marker>` in its
//! environment; everything it starts inherits it, including children that
//! left its process group or session. A timeout or cancel kills every
//! process carrying the marker: on the host by walking `/proc`
//! (`process_tree`), inside a container, Pod or cloud sandbox with
//! [`kill_line`], run as a second command there.

/// Name of the environment variable that marks a command's processes.
pub const MARKER_VAR: &str = "WSBENCH_EXEC_ID";

/// A fresh marker value for [`MARKER_VAR`] (32 hex digits: safe in a shell
/// word and in a `grep` pattern).
pub fn new_marker() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A one-line shell script that kills the whole tree of a command: every
/// live process whose environment holds `MARKER_VAR=<marker>`, and every
/// descendant of one (by the parent links in `/proc/<pid>/stat`), which
/// catches a `setsid env -i …` child: a new session and an empty
/// environment leave it nothing to be recognised by but its parent.
///
/// The environments are read once (two short processes per process in
/// `/proc`, the slow part); after that the set grows by parent links
/// alone: a process started later with the marker inherited it from a
/// member. The set is collected *before* anything is killed (a killed parent's
/// children are reparented and lose their link), then frozen with
/// SIGSTOP and collected again until it stops growing (a fork racing the
/// scan is caught), then sent SIGTERM (and SIGCONT, so stopped ones see
/// it), given up to half a second, and sent SIGKILL until none is left
/// (about a second at most; exit 1 if some survive). The set is kept
/// across the phases, so a child whose parent died of the SIGTERM is
/// still killed.
///
/// Limits: a process that was reparented to PID 1 before the kill (a
/// double-forked daemon whose middle process already exited) and that
/// cleared its environment is not found (on the host, local commands'
/// main processes are subreapers so such an orphan is their child and is
/// found while they are frozen; on Docker `docker-init -s` around the
/// command does the same); a pid of the set that died and
/// was reused within that second would be signalled too. Zombies are
/// skipped (they are dead, and would otherwise count as survivors until
/// reaped), and so is the script's own shell. Needs only `sh`, `tr`,
/// `grep` and `/proc` (Debian and BusyBox images alike); run as the
/// command's user, who may read its own processes' environment without
/// extra capabilities. Run it with a marker of its own (never `marker`),
/// so it does not match itself.
///
/// One line, so services that take a single command line pass it as is.
pub fn kill_line(marker: &str) -> String {
    format!(
        "m='{MARKER_VAR}={marker}'; S=' '; \
live() {{ read -r st 2>/dev/null < \"/proc/$1/stat\" || return 1; \
case \"$st\" in *') Z '*|*') X '*) return 1 ;; esac; }}; \
grow() {{ g=; for d in /proc/[0-9]*; do p=${{d#/proc/}}; [ \"$p\" = \"$$\" ] && continue; \
case \"$S\" in *\" $p \"*) continue ;; esac; \
read -r st 2>/dev/null < \"$d/stat\" || continue; \
case \"$st\" in *') Z '*|*') X '*) continue ;; esac; \
set -- ${{st##*) }}; case \"$S\" in *\" $2 \"*) S=\"$S$p \"; g=1; continue ;; esac; \
[ -n \"$E\" ] || continue; if tr '\\000' '\\n' 2>/dev/null < \"$d/environ\" | grep -qx \"$m\"; then S=\"$S$p \"; g=1; fi; done; }}; \
closure() {{ i=0; while [ $i -lt 64 ]; do grow; [ -z \"$g\" ] && return; i=$((i + 1)); done; }}; \
sig() {{ f=; for p in $S; do live \"$p\" && kill -\"$1\" \"$p\" 2>/dev/null && f=1; done; }}; \
E=1; grow; E=; closure; [ \"$S\" = ' ' ] && exit 0; \
j=0; while [ $j -lt 8 ]; do sig STOP; grow; [ -z \"$g\" ] && break; closure; j=$((j + 1)); done; \
sig TERM; sig CONT; \
j=0; while [ $j -lt 10 ]; do sleep 0.05 2>/dev/null || sleep 1; grow; sig 0; [ -z \"$f\" ] && exit 0; j=$((j + 1)); done; \
j=0; while [ $j -lt 50 ]; do grow; sig KILL; [ -z \"$f\" ] && exit 0; sleep 0.02 2>/dev/null || sleep 1; j=$((j + 1)); done; \
exit 1"
    )
}

/// A watchdog script for a command marked `marker`: it reads one line
/// from its stdin; `done` means the command ended as it should and the
/// watchdog exits; anything else, end of file above all (the one who
/// held the other end died, SIGKILL included), runs [`kill_line`]. Give
/// it a marker of its own, as [`kill_line`] needs.
pub fn watchdog_line(marker: &str) -> String {
    format!(
        "read -r x; [ \"$x\" = done ] && exit 0; {}",
        kill_line(marker)
    )
}

/// `/bin/sh -c <kill_line(marker)>`.
pub fn kill_argv(marker: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), kill_line(marker)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kill_line_finds_only_marked_processes() {
        let line = kill_line("abc123");
        assert!(line.starts_with("m='WSBENCH_EXEC_ID=abc123';"), "{line}");
        assert!(!line.contains('\n'), "{line}");
        let ok = std::process::Command::new("sh")
            .args(["-n", "-c", &line])
            .status()
            .map(|s| s.success())
            .unwrap_or(true);
        assert!(ok, "the line parses as shell");
        assert_ne!(new_marker(), new_marker());
    }

    #[test]
    fn the_kill_line_kills_a_detached_child_with_term_first() {
        // A child that left the process group, found by its marker; it
        // traps TERM to leave a trace, so the grace period is seen.
        let marker = new_marker();
        let d = tempfile::tempdir().unwrap();
        let trace = d.path().join("term");
        let script = format!(
            "setsid sh -c 'trap \"echo t > {}; exit 0\" TERM; sleep 30 & wait' & wait",
            trace.display()
        );
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .env(MARKER_VAR, &marker)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let st = std::process::Command::new("sh")
            .args(["-c", &kill_line(&marker)])
            .status()
            .unwrap();
        assert!(st.success());
        let t0 = std::time::Instant::now();
        let _ = child.wait();
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
        assert!(trace.exists(), "SIGTERM came first");
    }

    fn gone(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
            .unwrap_or(true)
    }

    /// Starts `sh` carrying `marker` with a `setsid env -i sleep` child;
    /// returns the shell and the child's pid once its environment is empty.
    fn tree_with_escapee(marker: &str, d: &std::path::Path) -> (std::process::Child, String) {
        let pidfile = d.join("pid");
        let script = format!(
            "setsid env -i sleep 300 & echo $! > {}.tmp; mv {0}.tmp {0}; wait",
            pidfile.display()
        );
        let child = std::process::Command::new("sh")
            .args(["-c", &script])
            .env(MARKER_VAR, marker)
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let pid = loop {
            if let Ok(p) = std::fs::read_to_string(&pidfile) {
                break p.trim().to_string();
            }
            assert!(t0.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // The escapee has cleared its environment once it runs `sleep`.
        while std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| !e.is_empty()) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (child, pid)
    }

    #[test]
    fn the_kill_line_kills_an_escapee_with_an_empty_environment() {
        // `setsid env -i`: a new session and no marker; only its parent,
        // still alive when the kill starts, leads to it. In `sh` and in
        // BusyBox `sh` with BusyBox applets (as in a busybox image).
        for sh in crate::backend::shell::confine::test_shells::shells() {
            let marker = new_marker();
            let d = tempfile::tempdir().unwrap();
            let (mut child, pid) = tree_with_escapee(&marker, d.path());
            let (code, _) = sh.run(d.path(), &kill_line(&marker), &[], b"");
            let _ = child.wait();
            let dead = gone(&pid);
            if !dead {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status();
            }
            assert_eq!(code, 0, "{}: the kill line reports survivors", sh.name);
            assert!(dead, "{}: the setsid env -i child {pid} survived", sh.name);
        }
    }
}
