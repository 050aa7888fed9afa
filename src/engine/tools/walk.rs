//! What Glob and Grep share: the one walking default, result paging, the
//! time/cancel budget, and the `rg` argv used when a sandbox has no host
//! view (docs/contract.md §3.5, §3.6, §11 points 8 and 22).
//!
//! # The walking default (both tools, both engines)
//!
//! * **Hidden files and directories are searched** (like the reference's
//!   `rg --hidden`).
//! * **VCS directories are never walked**: any entry named `.git`, `.svn`,
//!   `.hg`, `.bzr`, `.jj` or `.sl` below the search root is skipped, file or
//!   directory (the reference's `--glob '!<dir>'` list, [`VCS_DIRS`]).
//! * **Ignore files are honoured whether or not the workspace is a git
//!   repository**: `.gitignore`, `.ignore` and `.rgignore` in the searched
//!   tree, `.git/info/exclude` inside a repository, and the same files in
//!   the directories between the workdir and the search root (so searching
//!   `src/` still honours the workdir's `.gitignore`). Ignore files *above*
//!   the workdir and the user's global git excludes are not read, so results
//!   do not depend on where the workspace lives on the host (case C29).
//! * **`node_modules` gets no special case**: it is searched unless an
//!   ignore file excludes it.
//! * **Symlinks are not followed**: a directory link is not descended (a
//!   link loop cannot make a walk endless, case C28), and file links are
//!   not listed or searched — the target is found under its real path if it
//!   lies in the tree. A search root that is itself a link is resolved.
//! * **wsbench's temp files are never listed**: `.wsbench-tmp-*` and
//!   `.wsbench-new-*` (an atomic write in flight, or the debris of one
//!   killed mid-way; [`crate::backend::path::is_temp_name`]).
//! * **wsbench's journals are never searched**: `sessions/<id>/journal.jsonl`
//!   records earlier calls' arguments, so a search would find its own past
//!   patterns ([`JOURNAL_GLOB`]). Offloaded tool results and `context.jsonl`
//!   stay searchable: the agent is told they are there.
//! * **An explicit path is always searched**: ignore rules and VCS names
//!   apply to what lies below the search root, never to the root itself
//!   (as with `rg <path>`).
//!
//! The in-process engine ([`walk_files`], on the host directory of the
//! sandbox) and the in-sandbox engine ([`rg_walk_args`]) implement the same
//! rules; the one difference is that `rg` inside a sandbox also reads ignore
//! files in the directories above the workdir, which in a container hold
//! none.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ignore::overrides::Override;
use ignore::types::Types;
use ignore::{DirEntry, WalkBuilder, WalkState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::path::{NEW_PREFIX, TEMP_PREFIX, is_temp_name};
use crate::backend::{BackendResult, ExecOutcome, ExecRequest, OutputChunk, Sandbox, StreamKind};

/// Entries never walked below a search root (docs/contract.md §3.6).
pub const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

/// ripgrep's own ignore file name, honoured like `.ignore` with a higher
/// precedence.
pub const RG_IGNORE_FILE: &str = ".rgignore";

/// One in-process walk: where it starts and what narrows it.
#[derive(Clone, Debug, Default)]
pub struct WalkSpec {
    /// Host directory to walk (resolved with [`resolve_root`]).
    pub root: PathBuf,
    /// Host path of the workspace workdir. When `root` lies strictly below
    /// it, the ignore files of the directories from the workdir down to
    /// `root` apply too.
    pub workdir: Option<PathBuf>,
    /// Deepest level to report, counted from `root` (its direct children
    /// are at depth 1); `None` = no limit.
    pub max_depth: Option<usize>,
    /// `--glob`-style include/exclude rules (Grep's `glob`), matched
    /// relative to the directory the builder was rooted at.
    pub overrides: Option<Override>,
    /// File-type selection (Grep's `type`).
    pub types: Option<Types>,
    /// Where the walk reports what it could not list (shared with the
    /// tool, which names them in its result).
    pub skipped: Arc<Skipped>,
}

pub use skipped::Skipped;

mod skipped;

/// `p` with bytes that are not UTF-8 shown as `\xNN` (a display form only).
fn escaped(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str()
        .as_bytes()
        .utf8_chunks()
        .map(|c| {
            let mut s = c.valid().to_string();
            for b in c.invalid() {
                s.push_str(&format!("\\x{b:02X}"));
            }
            s
        })
        .collect()
}

/// What a search root is on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootKind {
    /// A directory; the path is the one to walk (a link is resolved).
    Dir(PathBuf),
    /// A regular file (or a link to one); the path is the one to open.
    File(PathBuf),
    /// Something else that exists (a socket, a fifo...).
    Other,
}

/// Stats a host search root, following a link at the root itself.
///
/// Errors: the `io::Error` of the stat (`NotFound` for a missing path or a
/// dangling link).
pub fn resolve_root(host: &Path) -> io::Result<RootKind> {
    let meta = std::fs::metadata(host)?;
    let is_link = std::fs::symlink_metadata(host)?.file_type().is_symlink();
    let path = if is_link {
        std::fs::canonicalize(host)?
    } else {
        host.to_path_buf()
    };
    Ok(if meta.is_dir() {
        RootKind::Dir(path)
    } else if meta.is_file() {
        RootKind::File(path)
    } else {
        RootKind::Other
    })
}

/// `rel` with `/` separators (lossy for non-UTF-8 names).
pub fn slash_path(rel: &Path) -> String {
    let mut out = String::new();
    for c in rel.components() {
        if let Component::Normal(s) = c {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(&s.to_string_lossy());
        }
    }
    out
}

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// Every entry was visited.
    Complete,
    /// `stop` was raised (cancel or time budget) before the end.
    Stopped,
}

/// wsbench's own tool-call journals (`<workdir>/sessions/<id>/journal.jsonl`)
/// are never searched: they record earlier calls' arguments, so a search
/// would find its own past patterns.
pub const JOURNAL_GLOB: &str = "!**/sessions/*/journal.jsonl";

fn is_journal(path: &Path, workdir: Option<&PathBuf>) -> bool {
    let Some(workdir) = workdir else { return false };
    path.file_name()
        .is_some_and(|n| n == crate::engine::layout::names::JOURNAL_FILE)
        && path
            .parent()
            .and_then(Path::parent)
            .is_some_and(|p| p == workdir.join(crate::engine::layout::names::SESSIONS_DIR))
}

/// wsbench's temp files (in-flight atomic writes, or debris of one killed
/// mid-way) are never listed or searched.
fn is_temp(entry: &DirEntry) -> bool {
    entry.file_name().to_str().is_some_and(is_temp_name)
}

fn is_vcs_name(entry: &DirEntry) -> bool {
    entry
        .file_name()
        .to_str()
        .is_some_and(|n| VCS_DIRS.contains(&n))
}

/// Configures a builder with the default of this module (see the module
/// documentation). `base` is the directory the walk starts at.
fn builder(base: &Path) -> WalkBuilder {
    let mut b = WalkBuilder::new(base);
    b.hidden(false)
        .parents(false)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .current_dir(base);
    b.add_custom_ignore_filename(RG_IGNORE_FILE);
    b
}

/// Walks `spec.root` in parallel and calls a visitor (one per worker
/// thread, made by `make_visitor`) with each regular file strictly below
/// the root, until the end or until `stop` is raised.
///
/// What cannot be walked (unreadable directories, names too long for the
/// OS) and files whose names are not UTF-8 are left out and reported in
/// `spec.skipped`.
pub fn walk_files<B, V>(spec: &WalkSpec, stop: &AtomicBool, make_visitor: B) -> WalkEnd
where
    B: Fn() -> V + Sync,
    V: FnMut(&DirEntry) + Send,
{
    let root = spec.root.clone();
    let via_workdir = spec
        .workdir
        .as_ref()
        .filter(|w| root != **w && root.starts_with(w.as_path()))
        .cloned();
    if let Some(workdir) = via_workdir {
        // Start at the workdir so the ignore files on the way down apply,
        // but only descend along the path to the root.
        let saw_root = AtomicBool::new(false);
        let end = run_walk(spec, &workdir, Some(&saw_root), stop, &make_visitor);
        if end == WalkEnd::Stopped || saw_root.load(Ordering::Relaxed) {
            return end;
        }
        // The root or a directory above it is ignored: an explicit path is
        // searched anyway, with the rules found below it.
    }
    run_walk(spec, &root, None, stop, &make_visitor)
}

fn run_walk<B, V>(
    spec: &WalkSpec,
    base: &Path,
    saw_root: Option<&AtomicBool>,
    stop: &AtomicBool,
    make_visitor: &B,
) -> WalkEnd
where
    B: Fn() -> V + Sync,
    V: FnMut(&DirEntry) + Send,
{
    let root = Arc::new(spec.root.clone());
    let mut b = builder(base);
    let extra_depth = spec
        .root
        .strip_prefix(base)
        .map(|r| r.components().count())
        .unwrap_or(0);
    b.max_depth(spec.max_depth.map(|d| d + extra_depth));
    if let Some(o) = &spec.overrides {
        b.overrides(o.clone());
    }
    if let Some(t) = &spec.types {
        b.types(t.clone());
    }
    {
        let root = root.clone();
        let workdir = spec.workdir.clone();
        b.filter_entry(move |e| {
            let p = e.path();
            if p.starts_with(root.as_path()) {
                // Below the root: VCS names, wsbench's temp files and
                // journals are never walked.
                p == root.as_path()
                    || !(is_vcs_name(e) || is_temp(e) || is_journal(p, workdir.as_ref()))
            } else {
                // Above the root (workdir walk): only the way down to it.
                root.starts_with(p)
            }
        });
    }
    let stopped = AtomicBool::new(false);
    b.build_parallel().run(|| {
        let mut visit = make_visitor();
        let root = root.clone();
        let stopped = &stopped;
        Box::new(move |res| {
            if stop.load(Ordering::Relaxed) {
                stopped.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let entry = match res {
                Ok(e) => e,
                Err(e) => {
                    spec.skipped.add(e.to_string());
                    return WalkState::Continue;
                }
            };
            let path = entry.path();
            if path == root.as_path() {
                if let Some(s) = saw_root {
                    s.store(true, Ordering::Relaxed);
                }
                return WalkState::Continue;
            }
            if entry.file_type().is_some_and(|t| t.is_file()) && path.starts_with(root.as_path()) {
                if path.to_str().is_none() {
                    spec.skipped.add(format!(
                        "{} (the name is not UTF-8: rename it with Bash to open it)",
                        escaped(path)
                    ));
                } else {
                    visit(&entry);
                }
            }
            WalkState::Continue
        })
    });
    if stopped.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
        WalkEnd::Stopped
    } else {
        WalkEnd::Complete
    }
}

/// Paging of a result list: the reference's `head_limit` and `offset`
/// (docs/contract.md §3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// Results shown at most; `None` = unlimited (`head_limit: 0`).
    pub limit: Option<usize>,
    /// Results skipped first.
    pub offset: usize,
}

impl Page {
    /// From the tool arguments: `head_limit` unset → `default_limit`, `0` →
    /// unlimited; `offset` unset → 0.
    ///
    /// Errors (the reference's texts): a negative `head_limit` or `offset`.
    pub fn from_args(
        head_limit: Option<i64>,
        offset: Option<i64>,
        default_limit: usize,
    ) -> Result<Page, String> {
        let limit = match head_limit {
            Some(n) if n < 0 => return Err("Error: head_limit must be non-negative.".into()),
            Some(0) => None,
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None if default_limit == 0 => None,
            None => Some(default_limit),
        };
        let offset = match offset {
            Some(n) if n < 0 => return Err("Error: offset must be non-negative.".into()),
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => 0,
        };
        Ok(Page { limit, offset })
    }

    /// How many leading results must be kept to render this page and know
    /// whether more remain (`offset + limit + 1`); `None` = all of them.
    pub fn keep(&self) -> Option<usize> {
        self.limit
            .map(|l| self.offset.saturating_add(l).saturating_add(1))
    }

    /// Renders the page of `items` (the first results, in order, at least
    /// [`Page::keep`] of them when that many exist) out of `total`:
    /// the items joined by `\n`, then, when more remain, the reference's
    /// `\n\n[Showing results with pagination = limit: N, offset: M]`
    /// (offset part only when non-zero). An offset past the end gives a
    /// one-line note instead of an empty text.
    pub fn render(&self, items: &[String], total: usize, unit: &str) -> String {
        if self.offset >= total {
            return format!(
                "No results at offset {}: there are only {total} {unit}.",
                self.offset
            );
        }
        let end = match self.limit {
            Some(l) => self.offset.saturating_add(l).min(items.len()),
            None => items.len(),
        };
        let start = self.offset.min(end);
        let mut out = items[start..end].join("\n");
        if let Some(l) = self.limit
            && total - self.offset > l
        {
            out.push_str(&format!(
                "\n\n[Showing results with pagination = limit: {l}"
            ));
            if self.offset > 0 {
                out.push_str(&format!(", offset: {}", self.offset));
            }
            out.push(']');
        }
        out
    }
}

/// How a budgeted job ended.
#[derive(Debug)]
pub enum Budgeted<T> {
    /// It finished; its value.
    Done(T),
    /// The caller cancelled.
    Cancelled,
    /// The time budget ran out.
    TimedOut,
    /// The job panicked (a bug); the panic message.
    Panicked(String),
}

/// Runs blocking `job` on the blocking pool with a `stop` flag it must
/// poll; raises the flag and returns at once when `cancel` fires or
/// `budget` runs out (the job then winds down on its own).
pub async fn run_blocking<T, F>(cancel: &CancellationToken, budget: Duration, job: F) -> Budgeted<T>
where
    T: Send + 'static,
    F: FnOnce(&AtomicBool) -> T + Send + 'static,
{
    if cancel.is_cancelled() {
        return Budgeted::Cancelled;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || job(&stop))
    };
    let out = tokio::select! {
        r = handle => match r {
            Ok(v) => Budgeted::Done(v),
            Err(e) => Budgeted::Panicked(panic_message(e)),
        },
        _ = cancel.cancelled() => Budgeted::Cancelled,
        _ = tokio::time::sleep(budget) => Budgeted::TimedOut,
    };
    stop.store(true, Ordering::Relaxed);
    out
}

fn panic_message(e: tokio::task::JoinError) -> String {
    crate::backend::host::task::join_error_text(e)
}

/// `ms` as seconds for messages (`30`, `0.5`).
pub fn format_secs(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        let s = format!("{:.3}", ms as f64 / 1000.0);
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The `rg` flags that give the walking default of this module inside a
/// sandbox: `--no-config --hidden --no-require-git --no-ignore-global`
/// and one `--glob '!<d>'` per [`VCS_DIRS`] entry.
pub fn rg_walk_args() -> Vec<String> {
    let mut args: Vec<String> = [
        "--no-config",
        "--hidden",
        "--no-require-git",
        "--no-ignore-global",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for d in VCS_DIRS {
        args.push("--glob".into());
        args.push(format!("!{d}"));
    }
    args.push("--glob".into());
    args.push(JOURNAL_GLOB.into());
    for prefix in [TEMP_PREFIX, NEW_PREFIX] {
        args.push("--glob".into());
        args.push(format!("!{prefix}*"));
    }
    args
}

/// Message when `rg` cannot be run inside a sandbox.
pub fn rg_missing(tool: &str, detail: &str) -> String {
    format!(
        "{tool} needs ripgrep (`rg`) inside this sandbox, which has no host view of its files, \
         but it could not be run: {detail}. Install ripgrep in the sandbox image."
    )
}

/// Runs `req` in `sandbox`, feeding each complete stdout line (without its
/// `\n`) to `on_line`, and returns the outcome and the stderr bytes (first
/// 64 KiB).
///
/// Errors: the backend's (the program cannot be started, the sandbox is
/// gone).
pub async fn exec_lines(
    sandbox: &dyn Sandbox,
    req: ExecRequest,
    sep: u8,
    mut on_line: impl FnMut(&[u8]),
) -> BackendResult<(ExecOutcome, Vec<u8>)> {
    const STDERR_CAP: usize = 64 * 1024;
    let (tx, mut rx) = mpsc::channel::<OutputChunk>(64);
    let exec = sandbox.exec(req, Some(tx));
    let mut stderr = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let collect = async {
        while let Some(chunk) = rx.recv().await {
            match chunk.stream {
                StreamKind::Stdout => {
                    let mut data: &[u8] = &chunk.data;
                    while let Some(i) = data.iter().position(|&b| b == sep) {
                        if pending.is_empty() {
                            on_line(&data[..i]);
                        } else {
                            pending.extend_from_slice(&data[..i]);
                            on_line(&pending);
                            pending.clear();
                        }
                        data = &data[i + 1..];
                    }
                    pending.extend_from_slice(data);
                }
                StreamKind::Stderr => {
                    let room = STDERR_CAP.saturating_sub(stderr.len());
                    stderr.extend_from_slice(&chunk.data[..chunk.data.len().min(room)]);
                }
            }
        }
        if !pending.is_empty() {
            on_line(&pending);
        }
    };
    let (outcome, ()) = tokio::join!(exec, collect);
    Ok((outcome?, stderr))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Mutex;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x\n").unwrap();
        }
        dir
    }

    fn walk(spec: &WalkSpec) -> Vec<String> {
        let out = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let end = walk_files(spec, &stop, || {
            |e: &DirEntry| {
                let rel = e.path().strip_prefix(&spec.root).unwrap();
                out.lock().unwrap().push(slash_path(rel));
            }
        });
        assert_eq!(end, WalkEnd::Complete);
        let mut v = out.into_inner().unwrap();
        v.sort();
        v
    }

    #[test]
    fn default_rules() {
        let d = tree(&[
            ".gitignore",
            "src/a.rs",
            ".hidden/conf",
            "build/out.txt",
            "node_modules/p/i.js",
            ".git/config",
            "sub/.git",
            "sub/x.log",
            "sub/y.txt",
            "sub/.ignore",
            "sub/.rgignore",
        ]);
        std::fs::write(d.path().join(".gitignore"), "build/\n").unwrap();
        std::fs::write(d.path().join("sub/.ignore"), "*.log\n").unwrap();
        std::fs::write(d.path().join("sub/.rgignore"), "y.txt\n").unwrap();
        let spec = WalkSpec {
            root: d.path().to_path_buf(),
            ..Default::default()
        };
        assert_eq!(
            walk(&spec),
            [
                ".gitignore",
                ".hidden/conf",
                "node_modules/p/i.js",
                "src/a.rs",
                "sub/.ignore",
                "sub/.rgignore"
            ]
        );
    }

    #[test]
    fn workdir_ignore_files_apply_to_a_subdirectory_root() {
        let d = tree(&[
            "src/a.rs",
            "src/a.log",
            "src/deep/b.log",
            "src/deep/b.rs",
            "other/c.rs",
        ]);
        std::fs::write(d.path().join(".gitignore"), "*.log\n").unwrap();
        let spec = WalkSpec {
            root: d.path().join("src"),
            workdir: Some(d.path().to_path_buf()),
            ..Default::default()
        };
        assert_eq!(walk(&spec), ["a.rs", "deep/b.rs"]);
        // Without the workdir, nothing above the root is read.
        let spec = WalkSpec {
            workdir: None,
            ..spec
        };
        assert_eq!(walk(&spec), ["a.log", "a.rs", "deep/b.log", "deep/b.rs"]);
    }

    #[test]
    fn an_ignored_root_is_still_searched() {
        let d = tree(&["build/out.txt", "build/x/y.txt"]);
        std::fs::write(d.path().join(".gitignore"), "build/\n").unwrap();
        let spec = WalkSpec {
            root: d.path().join("build"),
            workdir: Some(d.path().to_path_buf()),
            ..Default::default()
        };
        assert_eq!(walk(&spec), ["out.txt", "x/y.txt"]);
    }

    #[test]
    fn max_depth_counts_from_the_root() {
        let d = tree(&["a/1", "a/b/2", "a/b/c/3"]);
        let spec = WalkSpec {
            root: d.path().join("a"),
            workdir: Some(d.path().to_path_buf()),
            max_depth: Some(2),
            ..Default::default()
        };
        assert_eq!(walk(&spec), ["1", "b/2"]);
    }

    #[test]
    fn stop_flag_stops() {
        let d = tree(&["a", "b", "c"]);
        let spec = WalkSpec {
            root: d.path().to_path_buf(),
            ..Default::default()
        };
        let stop = AtomicBool::new(true);
        let n = Mutex::new(0);
        let end = walk_files(&spec, &stop, || |_: &DirEntry| *n.lock().unwrap() += 1);
        assert_eq!(end, WalkEnd::Stopped);
        assert_eq!(*n.lock().unwrap(), 0);
    }

    #[test]
    fn paging() {
        let items: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        let p = Page::from_args(Some(2), Some(1), 250).unwrap();
        assert_eq!(p.keep(), Some(4));
        assert_eq!(
            p.render(&items, 5, "files"),
            "1\n2\n\n[Showing results with pagination = limit: 2, offset: 1]"
        );
        let p = Page::from_args(Some(2), None, 250).unwrap();
        assert_eq!(
            p.render(&items, 5, "files"),
            "0\n1\n\n[Showing results with pagination = limit: 2]"
        );
        let p = Page::from_args(Some(2), Some(3), 250).unwrap();
        assert_eq!(p.render(&items, 5, "files"), "3\n4");
        let p = Page::from_args(Some(0), None, 250).unwrap();
        assert_eq!(p.limit, None);
        assert_eq!(p.render(&items, 5, "files"), "0\n1\n2\n3\n4");
        let p = Page::from_args(None, Some(9), 250).unwrap();
        assert_eq!(
            p.render(&items, 5, "files"),
            "No results at offset 9: there are only 5 files."
        );
        assert_eq!(
            Page::from_args(Some(-1), None, 250).unwrap_err(),
            "Error: head_limit must be non-negative."
        );
        assert_eq!(
            Page::from_args(None, Some(-1), 250).unwrap_err(),
            "Error: offset must be non-negative."
        );
    }

    #[test]
    fn secs() {
        assert_eq!(format_secs(30_000), "30");
        assert_eq!(format_secs(500), "0.5");
        assert_eq!(format_secs(1_250), "1.25");
    }

    /// `Path`'s order (component-wise, bytewise) is `rg --sort path`'s:
    /// Grep relies on it to print files in rg's order.
    #[test]
    fn rg_order() {
        let mut v = vec![
            Path::new("a.txt"),
            Path::new("a/b.txt"),
            Path::new("B"),
            Path::new("a"),
        ];
        v.sort();
        assert_eq!(
            v,
            [
                Path::new("B"),
                Path::new("a"),
                Path::new("a/b.txt"),
                Path::new("a.txt")
            ]
        );
    }
}
