//! Finding host processes by a tag in their command line, for the tests
//! that kill wsbench and check nothing it started is left.

use std::time::{Duration, Instant};

/// Live (non-zombie) processes whose command line contains `tag`, other
/// than this test process.
pub fn with_tag(tag: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| Some(s[s.rfind(')')? + 2..].starts_with('Z')))
                .unwrap_or(true);
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !zombie && String::from_utf8_lossy(&cmd).contains(tag)
        })
        .collect()
}

/// Polls until [`with_tag`] finds something (returns it) or `timeout`
/// passes (panics naming `what`).
pub fn wait_for_tag(tag: &str, timeout: Duration, what: &str) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let found = with_tag(tag);
        if !found.is_empty() {
            return found;
        }
        assert!(
            t0.elapsed() < timeout,
            "{what}: no process with {tag:?} started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls until no process carries `tag`; panics with what is left (and
/// kills it, so a failing test leaks nothing) after `timeout`.
pub fn assert_gone(tag: &str, timeout: Duration, what: &str) {
    let t0 = Instant::now();
    loop {
        let left = with_tag(tag);
        if left.is_empty() {
            return;
        }
        if t0.elapsed() >= timeout {
            let desc: Vec<String> = left
                .iter()
                .map(|p| {
                    let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                    format!("{p}: {}", String::from_utf8_lossy(&cmd).replace('\0', " "))
                })
                .collect();
            for p in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!(
                "{what}: processes left after {timeout:?}:\n{}",
                desc.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
