//! Where the process's `tracing` lines go: stderr (filtered, as before)
//! and a size-bounded, rotated log file for what the TUI and a quiet CLI
//! hide (issue 22).
//!
//! - stderr: `WSBENCH_LOG`, else `RUST_LOG` (an `EnvFilter`), else
//!   [`DEFAULT_LOG_FILTER`](super::DEFAULT_LOG_FILTER).
//! - the file: [`log_file_path`] (`<data dir>/logs/wsbench.log`, or
//!   `WSBENCH_LOG_FILE`; `WSBENCH_LOG_FILE=off` turns it off), filtered
//!   by `WSBENCH_LOG`/`RUST_LOG` when set, else [`FILE_LOG_FILTER`]. It is
//!   cut after the write that passes [`LOG_FILE_BYTES`] (whole lines:
//!   the limit is checked after each complete record) and keeps
//!   [`LOG_FILES_KEPT`] older files (`wsbench.log.1` … `.3`, the lowest
//!   the newest), so the files never hold more than about
//!   (1 + kept) × the limit per writing process.
//!
//! Every record, to either place, is cleaned of secrets and cut to a
//! bounded size first ([`redacting`]).
//!
//! Lines go to the file from a background thread, so the UI never waits
//! on the disk; when that thread falls 128 000 lines behind, further
//! lines are dropped (tracing-appender's lossy mode) rather than block
//! the caller. Limit: several processes share the file without a lock:
//! each counts only its own bytes, so with N writers at once a file can
//! reach N × the limit, and one process's rotation can move another's
//! current file to `.1` (lines are moved, never lost or torn: every
//! record is one `write` on an `O_APPEND` descriptor).

use std::path::{Path, PathBuf};

use file_rotate::compression::Compression;
use file_rotate::suffix::AppendCount;
use file_rotate::{ContentLimit, FileRotate};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::Paths;

pub mod redacting;
use redacting::Redacting;

/// Size after which the log file is rotated: 8 MiB.
pub const LOG_FILE_BYTES: usize = 8 * 1024 * 1024;

/// How many rotated files are kept beside the current one.
pub const LOG_FILES_KEPT: usize = 3;

/// The file's filter when neither `WSBENCH_LOG` nor `RUST_LOG` is set:
/// wsbench's own info lines (what it did: provisions, recoveries,
/// restarts) and every library's warnings.
pub const FILE_LOG_FILTER: &str = "warn,wsbench=info";

/// Keeps the file writer's thread alive; dropping it flushes what is
/// queued (at most a few milliseconds). Drop it before
/// `std::process::exit`, which runs no destructors.
pub struct LogGuard {
    _worker: Option<tracing_appender::non_blocking::WorkerGuard>,
}

/// The log file this process writes, `None` when `WSBENCH_LOG_FILE=off`
/// or no data directory is known (no `HOME` and no XDG variables).
pub fn log_file_path() -> Option<PathBuf> {
    match std::env::var_os("WSBENCH_LOG_FILE") {
        Some(v) if v == "off" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => Paths::from_env()
            .ok()
            .map(|p| p.data_dir.join("logs").join("wsbench.log")),
    }
}

/// The user's filter (`WSBENCH_LOG`, else `RUST_LOG`), the name of the
/// variable it came from and its text; `None` when both are unset or
/// blank.
fn user_filter() -> Option<(&'static str, String)> {
    std::env::var("WSBENCH_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| ("WSBENCH_LOG", v))
        .or_else(|| {
            std::env::var("RUST_LOG")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| ("RUST_LOG", v))
        })
}

/// Installs the global subscriber: stderr (with colour when `ansi`) and
/// the log file, unless `read_only` (`--read-only` writes nothing on
/// this machine, the log included). An invalid filter is named on stderr
/// and the default used; a log file that cannot be opened is named on
/// stderr and left out (the command still runs).
pub fn init(ansi: bool, read_only: bool) -> LogGuard {
    let user = user_filter();
    let parsed = user
        .as_ref()
        .and_then(|(name, v)| match EnvFilter::try_new(v) {
            Ok(_) => Some(v.clone()),
            Err(e) => {
                eprintln!("wsbench: ignoring {name}={v:?}: {e}");
                None
            }
        });
    let stderr_filter = EnvFilter::new(parsed.as_deref().unwrap_or(super::DEFAULT_LOG_FILTER));
    let stderr = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(Redacting::new(std::io::stderr, ansi))
        .with_filter(stderr_filter);
    let path = if read_only { None } else { log_file_path() };
    let (file, guard) = match path.map(|p| open(&p).map_err(|e| (p, e))) {
        Some(Ok(writer)) => {
            let (w, guard) = tracing_appender::non_blocking(writer);
            let filter = EnvFilter::new(parsed.as_deref().unwrap_or(FILE_LOG_FILTER));
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(Redacting::new(w, false))
                .with_filter(filter);
            (Some(layer), Some(guard))
        }
        Some(Err((p, e))) => {
            eprintln!("wsbench: no log file: cannot create {}: {e}", p.display());
            (None, None)
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .init();
    LogGuard { _worker: guard }
}

/// The rotating writer of `path`, after making its folder (file-rotate
/// would panic on a folder it cannot make).
///
/// Errors: the folder cannot be made or the file cannot be opened for
/// appending.
fn open(path: &Path) -> std::io::Result<FileRotate<AppendCount>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Probe the open ourselves: file-rotate keeps a failed open as "no
    // file" and drops every line silently.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    Ok(FileRotate::new(
        path,
        AppendCount::new(LOG_FILES_KEPT),
        ContentLimit::BytesSurpassed(LOG_FILE_BYTES),
        Compression::None,
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn rotation_keeps_whole_lines_and_a_bounded_number_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("wsbench.log");
        let mut w = FileRotate::new(
            &path,
            AppendCount::new(LOG_FILES_KEPT),
            ContentLimit::BytesSurpassed(100),
            Compression::None,
            None,
        );
        for i in 0..200 {
            w.write_all(format!("line {i:03} of the log\n").as_bytes())
                .unwrap();
        }
        w.flush().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "wsbench.log",
                "wsbench.log.1",
                "wsbench.log.2",
                "wsbench.log.3"
            ]
        );
        for n in &names {
            let text = std::fs::read_to_string(path.parent().unwrap().join(n)).unwrap();
            assert!(text.len() <= 100 + 24, "{n}: {} bytes", text.len());
            assert!(
                text.lines()
                    .all(|l| l.starts_with("line ") && l.ends_with("log")),
                "{text}"
            );
        }
        // The newest lines are in the current file.
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(current.contains("line 199"), "{current}");
    }

    #[test]
    fn an_unmakeable_folder_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        assert!(open(&file.join("logs").join("wsbench.log")).is_err());
    }
}
