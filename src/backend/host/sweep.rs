//! Removing the temp files of atomic writes that were killed mid-way.
//!
//! An atomic write makes `.wsbench-tmp-*` (or `.wsbench-new-*`) next to
//! its target and renames it into place; a process killed in between
//! leaves the temp file behind. Listings never show them
//! ([`is_temp_name`]); this removes them when a workspace with a host
//! directory is opened (local, bubblewrap, Docker with a bind mount).
//!
//! Only regular files of our own pattern older than [`STALE_AFTER`] go:
//! a writer in another process may be filling a fresh one right now, and
//! no write takes ten minutes between creating its temp file and renaming
//! it (a stream that does is left alone until it is that old and then
//! loses its temp file: the limit of judging by age). Links are not
//! followed. The walk is bounded ([`SweepLimits`]); what it did not reach
//! is left for the next open and said in a debug log line.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::backend::path::is_temp_name;

/// Temp files younger than this are never removed.
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// How much one sweep may do.
#[derive(Debug, Clone, Copy)]
pub struct SweepLimits {
    /// Directory entries looked at, at most.
    pub max_entries: usize,
    /// Wall time, at most (checked between entries).
    pub max_time: Duration,
}

impl Default for SweepLimits {
    /// 50 000 entries or half a second, whichever comes first.
    fn default() -> Self {
        SweepLimits {
            max_entries: 50_000,
            max_time: Duration::from_millis(500),
        }
    }
}

/// What a sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Stale temp files removed.
    pub removed: usize,
    /// Stale temp files that could not be removed (permissions, a race).
    pub failed: usize,
    /// Entries looked at.
    pub visited: usize,
    /// True when a limit stopped the walk before the end of the tree.
    pub cut_short: bool,
}

/// Removes our temp files under `root` whose modification time is more
/// than [`STALE_AFTER`] before `now`, within `limits`. Never fails: an
/// unreadable directory or file is skipped (and counted in `failed` when
/// it was a stale temp file that could not be removed).
pub fn remove_stale_temps(root: &Path, now: SystemTime, limits: SweepLimits) -> SweepReport {
    let started = Instant::now();
    let mut report = SweepReport::default();
    let walk = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        .build();
    for entry in walk {
        if report.visited >= limits.max_entries || started.elapsed() >= limits.max_time {
            report.cut_short = true;
            break;
        }
        report.visited += 1;
        let Ok(entry) = entry else { continue };
        let temp = entry.file_name().to_str().is_some_and(is_temp_name);
        if !temp || !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let stale = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if !stale {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => report.removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::debug!(path = %entry.path().display(), "cannot remove a stale temp file: {e}");
                report.failed += 1;
            }
        }
    }
    if report.cut_short {
        tracing::debug!(
            root = %root.display(),
            visited = report.visited,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "stale temp sweep stopped at its limit; the rest of the tree is left for the next open"
        );
    }
    if report.removed + report.failed > 0 {
        tracing::debug!(
            root = %root.display(),
            removed = report.removed,
            failed = report.failed,
            "removed temp files of killed writes"
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aged(path: &Path, age: Duration) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn old_temp_files_go_and_fresh_ones_and_others_stay() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let old = sub.join(".wsbench-tmp-old");
        let old_new = d.path().join(".wsbench-new-old");
        let fresh = sub.join(".wsbench-tmp-fresh");
        let plain = sub.join("plain.txt");
        for p in [&old, &old_new, &fresh, &plain] {
            std::fs::write(p, "x").unwrap();
        }
        let hour = Duration::from_secs(3600);
        aged(&old, hour);
        aged(&old_new, hour);
        aged(&plain, hour);
        let r = remove_stale_temps(d.path(), SystemTime::now(), SweepLimits::default());
        assert_eq!(r.removed, 2, "{r:?}");
        assert!(!old.exists() && !old_new.exists());
        assert!(fresh.exists(), "a fresh temp file was removed");
        assert!(plain.exists(), "a file not of our pattern was removed");
        assert!(!r.cut_short);
    }

    #[test]
    fn the_walk_stops_at_its_limit_and_says_so() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..20 {
            let p = d.path().join(format!(".wsbench-tmp-{i}"));
            std::fs::write(&p, "x").unwrap();
            aged(&p, Duration::from_secs(3600));
        }
        let limits = SweepLimits {
            max_entries: 5,
            max_time: Duration::from_secs(60),
        };
        let r = remove_stale_temps(d.path(), SystemTime::now(), limits);
        assert!(r.cut_short);
        assert_eq!(r.visited, 5);
        assert!(r.removed <= 5, "{r:?}");
    }

    #[test]
    fn links_are_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let victim = out.path().join(".wsbench-tmp-outside");
        std::fs::write(&victim, "x").unwrap();
        aged(&victim, Duration::from_secs(3600));
        std::os::unix::fs::symlink(out.path(), d.path().join("link")).unwrap();
        let r = remove_stale_temps(d.path(), SystemTime::now(), SweepLimits::default());
        assert_eq!(r.removed, 0);
        assert!(victim.exists());
    }
}
