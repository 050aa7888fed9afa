//! The environment-leak probe (issue 14 point 1): a variable set only on
//! the `wsbench` process must not be readable inside any sandbox, neither
//! in `env`, nor in any process's `/proc/<pid>/environ` (bwrap is pid 1
//! inside its pid namespace), nor in a file.

use std::process::{Command, Output};

/// The probe variable, set only on the `wsbench` child.
pub const VAR: &str = "WSBENCH_LEAK_PROBE";

/// Its value: shaped like an API key.
pub const VALUE: &str = "sk-leakprobe-0d9c41";

/// The shell line run inside the sandbox: prints the environment, every
/// readable `/proc/*/environ` (when `scan_proc`) and the names of files
/// that hold the value. The value is written split in two
/// (`"sk-leak""probe"`) so the command line itself, which the journal
/// records, never holds it whole. The Kubernetes stub's pods share the
/// host's pid namespace (wsbench's own process is visible there, which a
/// real Pod never is), so its walk scans without `/proc`.
pub fn script(scan_proc: bool) -> String {
    let procs = if scan_proc {
        r#"for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done; "#
    } else {
        ""
    };
    format!(
        r#"echo leak-scan-start; env; {procs}grep -rl "sk-leak""probe" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev --exclude-dir=nix 2>/dev/null | sed "s/^/leak-file: /"; echo leak-scan-end"#
    )
}

/// Sets the probe on a `wsbench` command.
pub fn set(cmd: &mut Command) -> &mut Command {
    cmd.env(VAR, VALUE)
}

/// Asserts that a run of [`script`] completed and printed nothing of the
/// probe (stdout and stderr).
#[track_caller]
pub fn assert_clean(backend: &str, o: &Output) {
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        out.contains("leak-scan-start") && out.contains("leak-scan-end") && out.contains("PATH="),
        "{backend}: the scan did not run\nstdout: {out}\nstderr: {err}"
    );
    for text in [&out, &err] {
        assert!(
            !text.contains(VALUE) && !text.contains(VAR) && !text.contains("leak-file: "),
            "{backend}: wsbench's environment is readable inside the sandbox:\n{text}"
        );
    }
}

/// Files under `dir` (host side) that contain `needle`.
pub fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut hits = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return hits;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => hits.extend(files_holding(&p, needle)),
            Ok(t)
                if t.is_file()
                    && std::fs::read(&p)
                        .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) =>
            {
                hits.push(p)
            }
            _ => {}
        }
    }
    hits
}
