//! The Grep tool: ripgrep-style content search (docs/contract.md §3.6).
//!
//! Runs in-process on the host directory the sandbox exposes, with
//! ripgrep's own crates (`ignore` to walk in parallel, `grep-regex` and
//! `grep-searcher` to search), and prints what `rg --hidden --sort path
//! --max-columns 500` would print. A sandbox without a host view gets
//! `rg` run inside it with the equivalent flags. Both engines walk by the
//! shared default of [`super::walk`] and page their output lines the same
//! way.
//!
//! Output, as `rg` prints it (docs/contract.md §3.6):
//! * `files_with_matches` (default): one path per line;
//! * `count`: `path:N`, N = matching lines (matches in multiline mode);
//! * `content`: `path:line:text` for matching lines, `path-line-text` for
//!   context lines, `--` between non-adjacent groups and between files when
//!   context is asked for. A line longer than `grep_max_columns` bytes
//!   (terminator included) becomes `[Omitted long matching line]` or
//!   `[Omitted long context line]`. Non-UTF-8 bytes show as U+FFFD.
//! * When `path` is a single file, content and count lines carry no path
//!   (as with `rg PATTERN FILE`).
//!
//! Paths are absolute (backend paths), files in `rg --sort path` order
//! whatever the parallel search finished first. Files with a NUL byte are
//! binary and skipped, except a file named as `path`, which reports
//! `binary file matches (found "\0" byte around offset N)` like `rg`
//! does. The default search root is the workspace workdir (weak point 22).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkFinish, SinkMatch,
};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::walk::{self, Budgeted, Page, RootKind, WalkEnd, WalkSpec};
use super::{Tool, ToolContext, ToolResult, parse_args};
use crate::backend::{ExecRequest, path as bpath};

mod exec;
mod host;

use exec::{rg_argv, search_exec};
use host::{HostJob, search_host};

/// The Grep tool (docs/contract.md §3.6).
pub struct Grep;

const DESCRIPTION: &str = "A powerful search tool built on ripgrep.

Usage:
- ALWAYS use Grep for search tasks. NEVER invoke `grep` or `rg` as a Bash command.
- Supports full regex syntax (e.g. \"log.*Error\", \"function\\s+\\w+\"); escape literal braces and other metacharacters (\"interface\\{\\}\").
- Filter files with the glob parameter (e.g. \"*.js\", \"**/*.tsx\", \"*.{ts,tsx}\") or the type parameter (e.g. \"js\", \"py\", \"rust\").
- Output modes: \"content\" shows matching lines (path:line:text), \"files_with_matches\" shows only file paths (default), \"count\" shows match counts per file (path:count).
- Context lines: use context or -A/-B/-C for lines after/before/around matches (content mode).
- Case-insensitive search: set i to true.
- Multiline regex: set multiline to true for patterns spanning lines (. then matches newlines too).
- Searches the workspace directory unless path is given; hidden files are included, files excluded by .gitignore/.ignore/.rgignore, VCS directories and binary files are skipped, symbolic links are not followed.
- Results are sorted by path; use head_limit (default 250, 0 for no limit) and offset to page through them.";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    output_mode: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default, rename = "type")]
    file_type: Option<String>,
    #[serde(default, rename = "-A")]
    after: Option<i64>,
    #[serde(default, rename = "-B")]
    before: Option<i64>,
    #[serde(default, rename = "-C")]
    around: Option<i64>,
    #[serde(default)]
    context: Option<i64>,
    // `-n`/`-i` as aliases, since `-A`/`-B`/`-C` carry their dash.
    #[serde(default, alias = "-n")]
    n: Option<bool>,
    #[serde(default, alias = "-i")]
    i: Option<bool>,
    #[serde(default)]
    case_insensitive: Option<bool>,
    #[serde(default)]
    multiline: Option<bool>,
    #[serde(default)]
    head_limit: Option<i64>,
    #[serde(default)]
    offset: Option<i64>,
}

/// Grep's output modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Content,
    Files,
    Count,
}

/// Everything a search needs besides the paths, shared by every worker.
#[derive(Clone, Debug)]
struct Opts {
    mode: Mode,
    before: usize,
    after: usize,
    line_numbers: bool,
    multiline: bool,
    case_insensitive: bool,
    max_columns: usize,
    /// Output lines kept at most (see [`Page::keep`]).
    keep: Option<usize>,
}

impl Opts {
    fn has_context(&self) -> bool {
        self.mode == Mode::Content && (self.before > 0 || self.after > 0)
    }
}

fn non_negative(name: &str, v: Option<i64>) -> Result<Option<usize>, String> {
    match v {
        Some(n) if n < 0 => Err(format!("Error: {name} must be non-negative.")),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        None => Ok(None),
    }
}

/// The reference's split of the `glob` argument: on whitespace, then on
/// commas unless the piece holds braces.
fn split_globs(glob: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in glob.split_whitespace() {
        if raw.contains('{') && raw.contains('}') {
            out.push(raw.to_string());
        } else {
            out.extend(raw.split(',').filter(|p| !p.is_empty()).map(str::to_string));
        }
    }
    out
}

/// The matcher `rg` builds for these flags (multi-line anchors always; no
/// `\n` in a match unless multiline, where `.` matches it too).
fn build_matcher(
    pattern: &str,
    case_insensitive: bool,
    multiline: bool,
) -> Result<RegexMatcher, String> {
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(case_insensitive)
        .multi_line(true)
        .unicode(true)
        .octal(false);
    if multiline {
        b.dot_matches_new_line(true);
    } else {
        b.line_terminator(Some(b'\n')).dot_matches_new_line(false);
    }
    b.build(pattern).map_err(|e| {
        let mut msg = format!("Error: invalid regex `{pattern}`: {e}");
        if !multiline && pattern.contains("\\n") {
            msg.push_str("\nSet multiline to true to match across lines.");
        }
        msg
    })
}

fn build_types(name: &str) -> Result<Types, String> {
    let mut b = TypesBuilder::new();
    b.add_defaults().select(name);
    b.build().map_err(|e| {
        format!("Error: {e}. Use a ripgrep type name such as rust, py, js, ts, go, java, c, cpp, md, json, yaml or sh.")
    })
}

fn build_overrides(root: &Path, globs: &[String]) -> Result<Option<Override>, String> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = OverrideBuilder::new(root);
    for g in globs {
        b.add(g)
            .map_err(|e| format!("Error: invalid glob `{g}`: {e}"))?;
    }
    b.build()
        .map(Some)
        .map_err(|e| format!("Error: invalid glob: {e}"))
}

enum Outcome {
    Lines(Vec<String>, usize),
    NotFound,
    Stopped,
    TimedOut,
    Failed(String),
}

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        "Grep"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression pattern to search for in file contents."},
                "path": {"type": "string", "description": "File or directory to search in; relative paths resolve against the workspace directory (default: the workspace directory)."},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "Output mode: 'content' shows matching lines (supports -A/-B/-C context, -n line numbers, head_limit), 'files_with_matches' shows file paths (supports head_limit), 'count' shows match counts (supports head_limit). Defaults to 'files_with_matches'.", "default": "files_with_matches"},
                "glob": {"type": "string", "description": "Glob pattern to filter files (e.g. '*.js', '*.{ts,tsx}', '!*.min.js'); several may be given separated by spaces or commas."},
                "type": {"type": "string", "description": "File type to search (rg --type). Common types: js, py, rust, go, java, etc."},
                "-A": {"type": "integer", "minimum": 0, "description": "Number of lines to show after each match. Requires output_mode: 'content'."},
                "-B": {"type": "integer", "minimum": 0, "description": "Number of lines to show before each match. Requires output_mode: 'content'."},
                "-C": {"type": "integer", "minimum": 0, "description": "Alias for context."},
                "context": {"type": "integer", "minimum": 0, "description": "Number of context lines to show before and after matches. Requires output_mode: 'content'."},
                "n": {"type": "boolean", "description": "Show line numbers in output. Requires output_mode: 'content'. Defaults to true.", "default": true},
                "i": {"type": "boolean", "description": "Case insensitive search.", "default": false},
                "case_insensitive": {"type": "boolean", "description": "Case insensitive search (alias for i).", "default": false},
                "multiline": {"type": "boolean", "description": "Enable multiline mode where . matches newlines and patterns can span lines. Default: false.", "default": false},
                "head_limit": {"type": "integer", "minimum": 0, "description": "Limit output to first N lines/entries. Defaults to 250 when unspecified. Pass 0 for unlimited."},
                "offset": {"type": "integer", "minimum": 0, "description": "Skip first N lines/entries before applying head_limit. Defaults to 0.", "default": 0}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = match parse_args("Grep", args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if ctx.cancel.is_cancelled() {
            return interrupted();
        }
        let limits = ctx.env.limits.clone();
        let page = match Page::from_args(args.head_limit, args.offset, limits.search_default_limit)
        {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        let mode = match args.output_mode.as_deref() {
            None | Some("files_with_matches") => Mode::Files,
            Some("content") => Mode::Content,
            Some("count") => Mode::Count,
            Some(other) => {
                return ToolResult::error(format!(
                    "Error: output_mode must be one of content, files_with_matches, count (got `{other}`)."
                ));
            }
        };
        let (before, after) = match (|| -> Result<(usize, usize), String> {
            let a = non_negative("-A", args.after)?;
            let b = non_negative("-B", args.before)?;
            let c = non_negative("-C", args.around)?;
            let ctxn = non_negative("context", args.context)?;
            Ok(match ctxn.or(c) {
                Some(n) => (n, n),
                None => (b.unwrap_or(0), a.unwrap_or(0)),
            })
        })() {
            Ok(v) => v,
            Err(e) => return ToolResult::error(e),
        };
        let multiline = args.multiline.unwrap_or(false);
        let case_insensitive = args.i.unwrap_or(false) || args.case_insensitive.unwrap_or(false);
        let opts = Opts {
            mode,
            before,
            after,
            line_numbers: args.n.unwrap_or(true),
            multiline,
            case_insensitive,
            max_columns: limits.grep_max_columns,
            keep: page.keep(),
        };
        // Validate everything up front so both engines fail alike.
        let matcher = match build_matcher(&args.pattern, case_insensitive, multiline) {
            Ok(m) => m,
            Err(e) => return ToolResult::error(e),
        };
        let types = match args.file_type.as_deref() {
            Some(t) => match build_types(t) {
                Ok(t) => Some(t),
                Err(e) => return ToolResult::error(e),
            },
            None => None,
        };
        let globs = args.glob.as_deref().map(split_globs).unwrap_or_default();
        if let Err(e) = build_overrides(Path::new("/"), &globs) {
            return ToolResult::error(e);
        }

        let workdir = ctx.env.layout.workdir();
        let root = match args.path.as_deref() {
            Some(p) if !p.is_empty() => bpath::join(workdir, p),
            _ => workdir.to_string(),
        };
        let budget = Duration::from_millis(limits.search_timeout_ms);
        let started = Instant::now();
        let skipped = std::sync::Arc::new(walk::Skipped::default());
        let sb = ctx.env.sandbox.clone();
        let outcome = match sb.host_path(&root) {
            Some(root_host) => {
                // Notes name sandbox paths, never where they are on the host.
                skipped.show_host_as(&root_host, &root);
                let workdir_host = super::glob::host_workdir(sb.as_ref(), workdir);
                if let Some(h) = &workdir_host {
                    skipped.show_host_as(h, workdir);
                }
                let job = HostJob {
                    root_backend: root.clone(),
                    root_host,
                    workdir_host,
                    globs,
                    types,
                    matcher,
                    opts,
                    skipped: skipped.clone(),
                };
                match walk::run_blocking(&ctx.cancel, budget, move |stop| search_host(job, stop))
                    .await
                {
                    Budgeted::Done(o) => o,
                    Budgeted::Cancelled => return interrupted(),
                    Budgeted::TimedOut => return timeout_error(limits.search_timeout_ms),
                    Budgeted::Panicked(m) => {
                        return ToolResult::error(format!("Grep failed (internal error): {m}"));
                    }
                }
            }
            None => {
                let argv = rg_argv(
                    &args.pattern,
                    &opts,
                    args.file_type.as_deref(),
                    &globs,
                    &root,
                );
                let left = budget.saturating_sub(started.elapsed());
                search_exec(ctx, argv, &root, opts.keep, left).await
            }
        };
        let note = skipped.note().unwrap_or_default();
        match outcome {
            Outcome::Lines(_, 0) => ToolResult::ok(format!(
                "No matches found for pattern: {}{note}",
                args.pattern
            )),
            Outcome::Lines(lines, total) => ToolResult::ok(format!(
                "{}{note}",
                page.render(&lines, total, "result lines")
            )),
            Outcome::NotFound => ToolResult::error(format!("Path not found: {root}")),
            Outcome::Stopped if ctx.cancel.is_cancelled() => interrupted(),
            Outcome::Stopped => timeout_error(limits.search_timeout_ms),
            Outcome::TimedOut => timeout_error(limits.search_timeout_ms),
            Outcome::Failed(msg) => ToolResult::error(msg),
        }
    }
}

fn timeout_error(ms: u64) -> ToolResult {
    ToolResult::error(format!(
        "Ripgrep search timed out after {} seconds. Try searching a more specific path or pattern.",
        walk::format_secs(ms)
    ))
}

fn interrupted() -> ToolResult {
    ToolResult::interrupted("Grep was cancelled.")
}

#[cfg(test)]
mod tests;
