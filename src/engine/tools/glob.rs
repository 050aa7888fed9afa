//! The Glob tool: files whose path matches a glob pattern, newest first
//! (docs/contract.md §3.5).
//!
//! Runs in-process on the host directory the sandbox exposes (with the
//! `ignore` and `globset` crates); a sandbox without a host view gets
//! `rg --files` run inside it instead, filtered by the same matcher. Both
//! walk by the shared default of [`super::walk`].
//!
//! Differences from the reference, all deliberate:
//! * the default base is the workspace workdir, and a relative `path`
//!   resolves against it (weak point 22), never the process cwd;
//! * the pattern is globset syntax — `*` and `?` within one path segment,
//!   `**` across segments, `[abc]`/`[!a-z]` classes, `{a,b}` alternatives,
//!   `\` escapes — a superset of the reference's `*`/`?`/`**`;
//! * an absolute pattern names its own base directory (the reference reads
//!   it as relative to the base and finds nothing);
//! * ignore files and VCS directories are honoured, file symlinks are not
//!   listed (see [`super::walk`]);
//! * only the matching files are stat'ed, and only the page's worth of them
//!   is kept in memory (weak point 8).

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::{Value, json};

use super::walk::{self, Budgeted, Page, RootKind, WalkEnd, WalkSpec};
use super::{Tool, ToolContext, ToolResult, parse_args};
use crate::backend::{ExecRequest, Sandbox, path as bpath};

/// The Glob tool (docs/contract.md §3.5).
pub struct Glob;

const DESCRIPTION: &str = "Fast file pattern matching tool that works with any codebase size.

Supports glob patterns like \"**/*.js\" or \"src/**/*.ts\" and returns matching file paths (absolute) sorted by modification time, newest first.

Pattern syntax: `*` and `?` match within one path segment, `**` matches any number of directories, `[abc]` and `[!a-z]` match one character of a class, `{ts,tsx}` matches alternatives. The pattern is matched against paths relative to `path` (default: the workspace directory); an absolute pattern sets its own base directory.

Hidden files are included; files excluded by .gitignore/.ignore/.rgignore and VCS directories (.git, .svn, .hg, ...) are skipped; symbolic links are not followed or listed.

Use this tool when you need to find files by name. Use head_limit (default 250, 0 for no limit) and offset to page through many results.";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    head_limit: Option<i64>,
    #[serde(default)]
    offset: Option<i64>,
}

/// A parsed Glob request: where to walk and what to match.
#[derive(Debug)]
struct Plan {
    /// Backend path of the base directory that must exist.
    base: String,
    /// Backend path of the directory actually walked (the base plus the
    /// pattern's literal leading directories).
    walk_dir: String,
    /// Matcher for paths relative to `walk_dir`.
    matcher: GlobMatcher,
    /// Deepest level the pattern can match, `None` with `**`.
    max_depth: Option<usize>,
}

fn has_meta(segment: &str) -> bool {
    segment.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// Splits the pattern into literal leading directories and the rest, and
/// compiles the rest.
fn plan(workdir: &str, path: Option<&str>, pattern: &str) -> Result<Plan, String> {
    if pattern.is_empty() {
        return Err("Error: pattern must not be empty.".into());
    }
    let base = match path {
        Some(p) if !p.is_empty() => bpath::join(workdir, p),
        _ => workdir.to_string(),
    };
    let absolute = pattern.starts_with('/');
    let segments: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.is_empty() {
        return Err(format!("Error: pattern `{pattern}` names no files."));
    }
    let literal = segments[..segments.len() - 1]
        .iter()
        .take_while(|s| !has_meta(s))
        .count();
    let (lead, rest) = segments.split_at(literal);
    let lead = lead.join("/");
    let (base, walk_dir) = if absolute {
        let dir = bpath::normalize(&format!("/{lead}"));
        (dir.clone(), dir)
    } else {
        let walk_dir = if lead.is_empty() {
            base.clone()
        } else {
            bpath::join(&base, &lead)
        };
        (base, walk_dir)
    };
    let rest = rest.join("/");
    let glob = GlobBuilder::new(&rest)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| format!("Error: invalid glob pattern `{pattern}`: {}", e.kind()))?;
    let max_depth = if rest.contains("**") {
        None
    } else {
        Some(rest.split('/').count())
    };
    Ok(Plan {
        base,
        walk_dir,
        matcher: glob.compile_matcher(),
        max_depth,
    })
}

/// One match: sorted newest first, then by path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    mtime: SystemTime,
    path: String,
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        other
            .mtime
            .cmp(&self.mtime)
            .then_with(|| self.path.cmp(&other.path))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

/// Keeps the first `keep` hits in output order and counts all of them.
#[derive(Debug)]
struct TopHits {
    keep: Option<usize>,
    heap: BinaryHeap<Hit>,
    total: usize,
}

impl TopHits {
    fn new(keep: Option<usize>) -> Self {
        TopHits {
            keep,
            heap: BinaryHeap::new(),
            total: 0,
        }
    }

    fn push(&mut self, hit: Hit) {
        self.total += 1;
        match self.keep {
            Some(0) => {}
            Some(k) if self.heap.len() >= k => {
                // The heap's top is the last kept hit in output order.
                if let Some(mut last) = self.heap.peek_mut()
                    && hit < *last
                {
                    *last = hit;
                }
            }
            _ => self.heap.push(hit),
        }
    }

    fn into_sorted(self) -> (Vec<String>, usize) {
        let total = self.total;
        (
            self.heap
                .into_sorted_vec()
                .into_iter()
                .map(|h| h.path)
                .collect(),
            total,
        )
    }
}

enum Found {
    Hits(Vec<String>, usize),
    NotADir,
    Stopped,
}

/// The in-process engine.
fn search_host(
    plan: &Plan,
    host_base: PathBuf,
    host_walk: PathBuf,
    host_workdir: Option<PathBuf>,
    keep: Option<usize>,
    skipped: std::sync::Arc<walk::Skipped>,
    stop: &AtomicBool,
) -> Found {
    match walk::resolve_root(&host_base) {
        Ok(RootKind::Dir(_)) => {}
        _ => return Found::NotADir,
    }
    let root = match walk::resolve_root(&host_walk) {
        Ok(RootKind::Dir(p)) => p,
        _ => return Found::Hits(Vec::new(), 0),
    };
    // The walk runs under the resolved root (a linked folder's target).
    skipped.show_host_as(&root, &plan.walk_dir);
    let spec = WalkSpec {
        root: root.clone(),
        workdir: host_workdir,
        max_depth: plan.max_depth,
        overrides: None,
        types: None,
        skipped,
    };
    let hits = Mutex::new(TopHits::new(keep));
    let end = walk::walk_files(&spec, stop, || {
        |entry: &ignore::DirEntry| {
            let Ok(rel) = entry.path().strip_prefix(&root) else {
                return;
            };
            let rel = walk::slash_path(rel);
            if !plan.matcher.is_match(&rel) {
                return;
            }
            let mtime = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let hit = Hit {
                mtime,
                path: bpath::join(&plan.walk_dir, &rel),
            };
            hits.lock().expect("glob hits lock").push(hit);
        }
    });
    if end == WalkEnd::Stopped {
        return Found::Stopped;
    }
    let (paths, total) = hits.into_inner().expect("glob hits lock").into_sorted();
    Found::Hits(paths, total)
}

/// Paths given to one `stat` exec, to stay far below argv limits.
const STAT_BATCH: usize = 500;

/// The in-sandbox engine: `rg --files`, the same matcher, then `stat` of
/// the matches for their mtimes (whole seconds).
async fn search_exec(
    ctx: &ToolContext<'_>,
    plan: &Plan,
    keep: Option<usize>,
    deadline: Instant,
) -> Result<Found, ToolResult> {
    let sb = ctx.env.sandbox.as_ref();
    match sb.stat(&plan.base).await {
        Ok(st) if st.is_dir_like() => {}
        Ok(_) => return Ok(Found::NotADir),
        Err(e) if e.is_not_found() => return Ok(Found::NotADir),
        // A lost sandbox (with the recovery's notice), a daemon that does
        // not answer: said as it is, not as a missing directory (issue 15
        // trial 2), the way Grep says it.
        Err(e) => {
            return Err(ToolResult::error(format!(
                "Error: cannot search {}: {e}",
                plan.base
            )));
        }
    }
    match sb.stat(&plan.walk_dir).await {
        Ok(st) if st.is_dir_like() => {}
        _ => return Ok(Found::Hits(Vec::new(), 0)),
    }
    let mut argv = vec!["rg".to_string(), "--files".into(), "--null".into()];
    argv.extend(walk::rg_walk_args());
    if let Some(d) = plan.max_depth {
        argv.push("--max-depth".into());
        argv.push(d.to_string());
    }
    argv.push("--".into());
    argv.push(plan.walk_dir.clone());
    let prefix = format!("{}/", plan.walk_dir.trim_end_matches('/'));
    let mut matches: Vec<String> = Vec::new();
    let req = ExecRequest {
        argv,
        timeout: Some(deadline.saturating_duration_since(Instant::now())),
        cancel: Some(ctx.cancel.clone()),
        ..Default::default()
    };
    let (outcome, stderr) = walk::exec_lines(sb, req, 0, |line| {
        let path = String::from_utf8_lossy(line);
        let rel = path.strip_prefix(&prefix).unwrap_or(&path);
        if plan.matcher.is_match(rel) {
            matches.push(bpath::join(&plan.walk_dir, rel));
        }
    })
    .await
    .map_err(|e| ToolResult::error(walk::rg_missing("Glob", &e.to_string())))?;
    if outcome.cancelled {
        return Ok(Found::Stopped);
    }
    if outcome.timed_out {
        return Err(timeout_error(ctx));
    }
    let code = outcome.exit_code.unwrap_or(-1);
    if code == 127 {
        return Err(ToolResult::error(walk::rg_missing(
            "Glob",
            String::from_utf8_lossy(&stderr).trim(),
        )));
    }
    if !(code == 0 || code == 1 || (code == 2 && !matches.is_empty())) {
        return Err(ToolResult::error(format!(
            "Glob failed: rg exited with code {code}: {}",
            String::from_utf8_lossy(&stderr).trim()
        )));
    }
    let mut hits = TopHits::new(keep);
    for batch in matches.chunks(STAT_BATCH) {
        let mtimes = stat_mtimes(ctx, batch, deadline).await?;
        for (path, mtime) in batch.iter().zip(mtimes) {
            hits.push(Hit {
                mtime,
                path: path.clone(),
            });
        }
    }
    let (paths, total) = hits.into_sorted();
    Ok(Found::Hits(paths, total))
}

/// Modification times of `paths` (one exec; the epoch for any that cannot
/// be stat'ed). A shell loop keeps one output line per path even when a
/// file vanished in between; each line holds `%Y %.9Y` so GNU stat gives
/// nanoseconds and a stat without precision support still gives seconds.
async fn stat_mtimes(
    ctx: &ToolContext<'_>,
    paths: &[String],
    deadline: Instant,
) -> Result<Vec<SystemTime>, ToolResult> {
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        r#"for f; do stat -c '%Y %.9Y' -- "$f" 2>/dev/null || echo 0; done"#.into(),
        "sh".into(),
    ];
    argv.extend(paths.iter().cloned());
    let req = ExecRequest {
        argv,
        timeout: Some(deadline.saturating_duration_since(Instant::now())),
        cancel: Some(ctx.cancel.clone()),
        ..Default::default()
    };
    let mut times: Vec<SystemTime> = Vec::with_capacity(paths.len());
    let (outcome, _) = walk::exec_lines(ctx.env.sandbox.as_ref(), req, b'\n', |line| {
        times.push(parse_stat_mtime(&String::from_utf8_lossy(line)));
    })
    .await
    .map_err(|e| ToolResult::error(format!("Glob failed: cannot stat the matches: {e}")))?;
    if outcome.timed_out {
        return Err(timeout_error(ctx));
    }
    times.resize(paths.len(), SystemTime::UNIX_EPOCH);
    Ok(times)
}

/// Parses `<secs> <secs.nanos>` (the second part optional or garbage).
fn parse_stat_mtime(line: &str) -> SystemTime {
    let mut parts = line.split_whitespace();
    let secs: u64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let nanos = parts
        .next()
        .and_then(|p| p.split_once('.'))
        .filter(|(whole, _)| whole.parse::<u64>().ok() == Some(secs))
        .and_then(|(_, frac)| {
            let digits: String = frac.chars().take(9).collect();
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            format!("{digits:0<9}").parse::<u32>().ok()
        })
        .unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
}

#[async_trait]
impl Tool for Glob {
    fn name(&self) -> &'static str {
        "Glob"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob pattern to match file paths against (e.g. '**/*.py', 'src/**/*.{ts,tsx}')"},
                "path": {"type": "string", "description": "The base directory to search from; relative paths resolve against the workspace directory (default: the workspace directory)"},
                "head_limit": {"type": "integer", "minimum": 0, "description": "Limit output to the first N paths. Defaults to 250 when unspecified. Pass 0 for unlimited."},
                "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Number of matching files to skip before returning results"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = match parse_args("Glob", args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if ctx.cancel.is_cancelled() {
            return interrupted();
        }
        let limits = ctx.env.limits;
        let page = match Page::from_args(args.head_limit, args.offset, limits.search_default_limit)
        {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        let workdir = ctx.env.layout.workdir();
        let plan = match plan(workdir, args.path.as_deref(), &args.pattern) {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        let base = plan.base.clone();
        let budget = Duration::from_millis(limits.search_timeout_ms);
        let deadline = Instant::now() + budget;
        let sb = &ctx.env.sandbox;
        let keep = page.keep();
        let skipped = std::sync::Arc::new(walk::Skipped::default());
        let found = match (sb.host_path(&plan.base), sb.host_path(&plan.walk_dir)) {
            (Some(host_base), Some(host_walk)) => {
                let host_workdir = host_workdir(sb.as_ref(), workdir);
                // Notes name sandbox paths, never where they are on the host.
                skipped.show_host_as(&host_base, &plan.base);
                skipped.show_host_as(&host_walk, &plan.walk_dir);
                if let Some(h) = &host_workdir {
                    skipped.show_host_as(h, workdir);
                }
                let plan = std::sync::Arc::new(plan);
                let p = plan.clone();
                let sk = skipped.clone();
                match walk::run_blocking(&ctx.cancel, budget, move |stop| {
                    search_host(&p, host_base, host_walk, host_workdir, keep, sk, stop)
                })
                .await
                {
                    Budgeted::Done(f) => f,
                    Budgeted::Cancelled => return interrupted(),
                    Budgeted::TimedOut => return timeout_error(ctx),
                    Budgeted::Panicked(m) => {
                        return ToolResult::error(format!("Glob failed (internal error): {m}"));
                    }
                }
            }
            _ => match search_exec(ctx, &plan, keep, deadline).await {
                Ok(f) => f,
                Err(e) => return e,
            },
        };
        let note = skipped.note().unwrap_or_default();
        match found {
            Found::NotADir => ToolResult::error(format!("Directory not found: {base}")),
            Found::Stopped if ctx.cancel.is_cancelled() => interrupted(),
            Found::Stopped => timeout_error(ctx),
            Found::Hits(paths, 0) => {
                debug_assert!(paths.is_empty());
                ToolResult::ok(format!(
                    "No files found matching pattern: {}{note}",
                    args.pattern
                ))
            }
            Found::Hits(paths, total) => ToolResult::ok(format!(
                "{}{note}",
                page.render(&paths, total, "matching files")
            )),
        }
    }
}

fn timeout_error(ctx: &ToolContext<'_>) -> ToolResult {
    ToolResult::error(format!(
        "Glob timed out after {} seconds. Try a more specific pattern or path.",
        walk::format_secs(ctx.env.limits.search_timeout_ms)
    ))
}

fn interrupted() -> ToolResult {
    ToolResult::interrupted("Glob was cancelled.")
}

/// Host path of the workdir, when the sandbox shares it.
pub(crate) fn host_workdir(sb: &dyn Sandbox, workdir: &str) -> Option<PathBuf> {
    let p = sb.host_path(workdir)?;
    Some(std::fs::canonicalize(&p).unwrap_or(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_literal_prefix_and_depth() {
        let p = plan("/w", None, "src/**/*.rs").unwrap();
        assert_eq!(p.base, "/w");
        assert_eq!(p.walk_dir, "/w/src");
        assert_eq!(p.max_depth, None);
        assert!(p.matcher.is_match("a/b/c.rs"));
        assert!(p.matcher.is_match("c.rs"));

        let p = plan("/w", Some("sub"), "./*.txt").unwrap();
        assert_eq!((p.base.as_str(), p.walk_dir.as_str()), ("/w/sub", "/w/sub"));
        assert_eq!(p.max_depth, Some(1));
        assert!(p.matcher.is_match(".hidden.txt"));
        assert!(!p.matcher.is_match("a/b.txt"));

        let p = plan("/w", Some("/elsewhere"), "/abs/dir/{a,b}/*.md").unwrap();
        assert_eq!(
            (p.base.as_str(), p.walk_dir.as_str()),
            ("/abs/dir", "/abs/dir")
        );
        assert_eq!(p.max_depth, Some(2));
        assert!(p.matcher.is_match("a/x.md"));
        assert!(!p.matcher.is_match("c/x.md"));

        let p = plan("/w", None, "a.rs").unwrap();
        assert_eq!(p.walk_dir, "/w");
        assert!(p.matcher.is_match("a.rs"));

        assert!(plan("/w", None, "").is_err());
        assert!(
            plan("/w", None, "[")
                .unwrap_err()
                .contains("invalid glob pattern")
        );
    }

    #[test]
    fn parses_stat_output() {
        let t = |s: u64, n: u32| SystemTime::UNIX_EPOCH + Duration::new(s, n);
        assert_eq!(parse_stat_mtime("12 12.500000000"), t(12, 500_000_000));
        assert_eq!(parse_stat_mtime("12 12.5"), t(12, 500_000_000));
        assert_eq!(parse_stat_mtime("12 ?"), t(12, 0));
        assert_eq!(parse_stat_mtime("12"), t(12, 0));
        assert_eq!(parse_stat_mtime("12 13.1"), t(12, 0));
        assert_eq!(parse_stat_mtime("0"), t(0, 0));
        assert_eq!(parse_stat_mtime("junk"), t(0, 0));
    }

    #[test]
    fn top_hits_keep_the_newest() {
        let t = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let mut h = TopHits::new(Some(2));
        for (s, p) in [(1, "a"), (5, "b"), (3, "c"), (5, "a2"), (0, "z")] {
            h.push(Hit {
                mtime: t(s),
                path: p.into(),
            });
        }
        assert_eq!(h.into_sorted(), (vec!["a2".to_string(), "b".into()], 5));
    }
}
