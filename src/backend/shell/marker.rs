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

/// A one-line shell script that kills every live process whose
/// environment holds `MARKER_VAR=<marker>`: SIGTERM, up to half a second
/// for them to go, then SIGKILL until none is left (about a second at
/// most; exit 1 if some survive). Zombies are skipped (they are dead, and
/// would otherwise count as survivors until reaped), and so is the
/// script's own shell. Needs only `sh`, `tr`, `grep` and `/proc` (Debian
/// and BusyBox images alike); run as the command's user, who may read its
/// own processes' environment without extra capabilities. Run it with a
/// marker of its own (never `marker`), so it does not match itself.
///
/// One line, so services that take a single command line pass it as is.
pub fn kill_line(marker: &str) -> String {
    format!(
        "sweep() {{ f=; for d in /proc/[0-9]*; do p=${{d#/proc/}}; \
[ \"$p\" = \"$$\" ] && continue; \
read -r st 2>/dev/null < \"$d/stat\" || continue; \
case \"$st\" in *') Z '*|*') X '*) continue ;; esac; \
if tr '\\000' '\\n' 2>/dev/null < \"$d/environ\" | grep -qx '{MARKER_VAR}={marker}'; then \
kill -\"$1\" \"$p\" 2>/dev/null && f=1; fi; done; }}; \
sweep TERM; [ -z \"$f\" ] && exit 0; \
i=0; while [ $i -lt 10 ]; do sleep 0.05 2>/dev/null || sleep 1; sweep 0; [ -z \"$f\" ] && exit 0; i=$((i + 1)); done; \
i=0; while [ $i -lt 50 ]; do sweep KILL; [ -z \"$f\" ] && exit 0; sleep 0.02 2>/dev/null || sleep 1; i=$((i + 1)); done; \
exit 1"
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
        assert!(line.contains("grep -qx 'WSBENCH_EXEC_ID=abc123'"), "{line}");
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
}
