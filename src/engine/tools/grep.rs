//! The Grep tool: ripgrep-style content search (contract §3.6).
//!
//! Runs in-process on the host directory the sandbox exposes, with
//! ripgrep's own crates (`ignore` to walk in parallel, `grep-regex` and
//! `grep-searcher` to search), and prints what `rg --hidden --sort path
//! --max-columns 500` would print. A sandbox without a host view gets
//! `rg` run inside it with the equivalent flags. Both engines walk by the
//! shared default of [`super::walk`] and page their output lines the same
//! way.
//!
//! Output, as `rg` prints it (contract §3.6):
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
use super::{Tool, ToolContext, ToolResult, ToolState, parse_args};
use crate::backend::{ExecRequest, path as bpath};

/// The Grep tool (contract §3.6).
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

/// Collects the output of one file, formatted as `rg` prints it.
struct FileSink<'a> {
    opts: &'a Opts,
    matcher: &'a RegexMatcher,
    /// Path printed before each line (`None` for a single explicit file
    /// in content and count modes).
    label: Option<&'a str>,
    /// True for the file named as `path` (binary data is converted, not a
    /// reason to skip it).
    explicit: bool,
    stop: &'a AtomicBool,
    lines: Vec<String>,
    count: u64,
    binary: Option<u64>,
}

impl FileSink<'_> {
    fn full(&self) -> bool {
        self.opts.keep.is_some_and(|k| self.lines.len() >= k)
    }

    fn push_line(&mut self, sep: char, number: Option<u64>, bytes: &[u8], is_match: bool) {
        let max = self.opts.max_columns;
        let text = if max > 0 && bytes.len() > max {
            if is_match {
                "[Omitted long matching line]".into()
            } else {
                "[Omitted long context line]".into()
            }
        } else {
            let mut b = bytes;
            if let Some(rest) = b.strip_suffix(b"\n") {
                b = rest;
            }
            while let Some(rest) = b.strip_suffix(b"\r") {
                b = rest;
            }
            String::from_utf8_lossy(b)
        };
        let mut line = String::with_capacity(text.len() + 16);
        if let Some(l) = self.label {
            line.push_str(l);
            line.push(sep);
        }
        if self.opts.line_numbers
            && let Some(n) = number
        {
            line.push_str(&n.to_string());
            line.push(sep);
        }
        line.push_str(&text);
        if !line.is_empty() {
            self.lines.push(line);
        }
    }

    /// Matches of the regex within a multi-line sink match (what `rg -c -U`
    /// counts), with rg's one byte of look-ahead.
    fn matches_in(&self, mat: &SinkMatch<'_>) -> io::Result<u64> {
        let range = mat.bytes_range_in_buffer();
        let buf = mat.buffer();
        let end = (range.end + 1).min(buf.len());
        let mut n = 0;
        self.matcher
            .find_iter_at(&buf[..end], range.start, |m| {
                if m.start() >= range.end {
                    return false;
                }
                n += 1;
                true
            })
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(n.max(1))
    }

    fn suppressed(&self) -> bool {
        self.binary.is_some()
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match self.opts.mode {
            Mode::Files => {
                self.count = 1;
                Ok(false)
            }
            Mode::Count => {
                self.count += if searcher.multi_line_with_matcher(self.matcher) {
                    self.matches_in(mat)?
                } else {
                    1
                };
                Ok(true)
            }
            Mode::Content => {
                self.count += 1;
                if self.suppressed() {
                    return Ok(true);
                }
                let first = mat.line_number();
                for (i, line) in mat.lines().enumerate() {
                    self.push_line(':', first.map(|n| n + i as u64), line, true);
                }
                Ok(!self.full())
            }
        }
    }

    fn context(&mut self, _searcher: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if self.opts.mode == Mode::Content && !self.suppressed() {
            self.push_line('-', ctx.line_number(), ctx.bytes(), false);
        }
        Ok(!self.full())
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, io::Error> {
        if self.opts.mode == Mode::Content && !self.suppressed() {
            self.lines.push("--".into());
        }
        Ok(!self.full())
    }

    fn binary_data(&mut self, _searcher: &Searcher, offset: u64) -> Result<bool, io::Error> {
        if self.binary.is_none() {
            self.binary = Some(offset);
        }
        Ok(self.explicit)
    }

    fn finish(&mut self, _searcher: &Searcher, fin: &SinkFinish) -> Result<(), io::Error> {
        if self.binary.is_none() {
            self.binary = fin.binary_byte_offset();
        }
        Ok(())
    }
}

fn searcher_for(opts: &Opts, explicit: bool) -> Searcher {
    let mut b = SearcherBuilder::new();
    b.line_number(opts.mode == Mode::Content && opts.line_numbers)
        .multi_line(opts.multiline)
        .binary_detection(if explicit {
            BinaryDetection::convert(b'\0')
        } else {
            BinaryDetection::quit(b'\0')
        });
    if opts.mode == Mode::Content {
        b.before_context(opts.before).after_context(opts.after);
    }
    b.build()
}

/// Searches one file; `None` when it has no match, is binary (walked
/// files) or cannot be read.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    opts: &Opts,
    host: &Path,
    label: &str,
    explicit: bool,
    stop: &AtomicBool,
) -> Option<Vec<String>> {
    let mut sink = FileSink {
        opts,
        matcher,
        label: match (opts.mode, explicit) {
            (Mode::Files, _) | (_, false) => Some(label),
            _ => None,
        },
        explicit,
        stop,
        lines: Vec::new(),
        count: 0,
        binary: None,
    };
    searcher.search_path(matcher, host, &mut sink).ok()?;
    if sink.count == 0 || (sink.binary.is_some() && !explicit) {
        return None;
    }
    Some(match opts.mode {
        Mode::Files => vec![label.to_string()],
        Mode::Count => vec![match sink.label {
            Some(l) => format!("{l}:{}", sink.count),
            None => sink.count.to_string(),
        }],
        Mode::Content => {
            let mut lines = sink.lines;
            if let Some(off) = sink.binary {
                lines.push(format!(
                    "binary file matches (found \"\\0\" byte around offset {off})"
                ));
            }
            lines
        }
    })
}

/// Per-file results in `rg --sort path` order, keeping only the leading
/// lines a page needs.
struct Collector {
    keep: Option<usize>,
    separators: bool,
    files: BTreeMap<PathBuf, Vec<String>>,
    kept: usize,
    total_lines: usize,
    total_files: usize,
}

impl Collector {
    fn new(keep: Option<usize>, separators: bool) -> Self {
        Collector {
            keep,
            separators,
            files: BTreeMap::new(),
            kept: 0,
            total_lines: 0,
            total_files: 0,
        }
    }

    fn cost(&self, lines: &[String]) -> usize {
        lines.len() + usize::from(self.separators)
    }

    fn add(&mut self, rel: PathBuf, lines: Vec<String>) {
        self.total_files += 1;
        self.total_lines += lines.len();
        self.kept += self.cost(&lines);
        self.files.insert(rel, lines);
        let Some(keep) = self.keep else { return };
        // Drop files at the end of the order while the rest still fill
        // the page and prove that more remain.
        while self.files.len() > 1 {
            let last = self
                .files
                .last_key_value()
                .map(|(_, l)| self.cost(l))
                .unwrap_or(0);
            if self.kept - last >= keep {
                self.files.pop_last();
                self.kept -= last;
            } else {
                break;
            }
        }
    }

    /// Output lines in order (with `--` between files when context is on)
    /// and the total number of output lines.
    fn finish(self) -> (Vec<String>, usize) {
        let mut out = Vec::with_capacity(self.kept);
        for (i, (_, lines)) in self.files.into_iter().enumerate() {
            if i > 0 && self.separators {
                out.push("--".to_string());
            }
            out.extend(lines);
        }
        let total = self.total_lines
            + if self.separators {
                self.total_files.saturating_sub(1)
            } else {
                0
            };
        (out, total)
    }
}

enum Outcome {
    Lines(Vec<String>, usize),
    NotFound,
    Stopped,
    TimedOut,
    Failed(String),
}

struct HostJob {
    root_backend: String,
    root_host: PathBuf,
    workdir_host: Option<PathBuf>,
    globs: Vec<String>,
    types: Option<Types>,
    matcher: RegexMatcher,
    opts: Opts,
}

/// The in-process engine.
fn search_host(job: HostJob, stop: &AtomicBool) -> Outcome {
    let opts = &job.opts;
    let root = match walk::resolve_root(&job.root_host) {
        Ok(RootKind::Dir(p)) => p,
        Ok(RootKind::File(p)) => {
            let mut searcher = searcher_for(opts, true);
            let lines = search_file(
                &mut searcher,
                &job.matcher,
                opts,
                &p,
                &job.root_backend,
                true,
                stop,
            );
            if stop.load(Ordering::Relaxed) {
                return Outcome::Stopped;
            }
            let lines = lines.unwrap_or_default();
            let total = lines.len();
            return Outcome::Lines(lines, total);
        }
        Ok(RootKind::Other) => return Outcome::Lines(Vec::new(), 0),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Outcome::NotFound,
        Err(e) => {
            return Outcome::Failed(format!("Error: cannot search {}: {e}", job.root_backend));
        }
    };
    let override_root = job.workdir_host.clone().unwrap_or_else(|| root.clone());
    let overrides = match build_overrides(&override_root, &job.globs) {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(e),
    };
    let spec = WalkSpec {
        root: root.clone(),
        workdir: job.workdir_host.clone(),
        max_depth: None,
        overrides,
        types: job.types.clone(),
    };
    let collector = Mutex::new(Collector::new(opts.keep, opts.has_context()));
    let prefix = job.root_backend.trim_end_matches('/');
    let end = walk::walk_files(&spec, stop, || {
        let mut searcher = searcher_for(opts, false);
        let matcher = job.matcher.clone();
        let collector = &collector;
        let root = &root;
        move |entry: &ignore::DirEntry| {
            let Ok(rel) = entry.path().strip_prefix(root) else {
                return;
            };
            let label = format!("{prefix}/{}", walk::slash_path(rel));
            if let Some(lines) = search_file(
                &mut searcher,
                &matcher,
                opts,
                entry.path(),
                &label,
                false,
                stop,
            ) {
                collector
                    .lock()
                    .expect("grep collector lock")
                    .add(rel.to_path_buf(), lines);
            }
        }
    });
    if end == WalkEnd::Stopped {
        return Outcome::Stopped;
    }
    let (lines, total) = collector
        .into_inner()
        .expect("grep collector lock")
        .finish();
    Outcome::Lines(lines, total)
}

/// The `rg` argv equivalent to `opts` (contract §3.6 plus the walking
/// default of [`super::walk`]).
fn rg_argv(
    pattern: &str,
    opts: &Opts,
    file_type: Option<&str>,
    globs: &[String],
    root: &str,
) -> Vec<String> {
    let mut a = vec!["rg".to_string()];
    a.extend(walk::rg_walk_args());
    a.extend(["--sort".into(), "path".into()]);
    a.extend(["--max-columns".into(), opts.max_columns.to_string()]);
    if opts.multiline {
        a.extend(["-U".into(), "--multiline-dotall".into()]);
    }
    if opts.case_insensitive {
        a.push("-i".into());
    }
    match opts.mode {
        Mode::Files => a.push("-l".into()),
        Mode::Count => a.push("-c".into()),
        Mode::Content => {
            if opts.line_numbers {
                a.push("-n".into());
            }
            if opts.before > 0 {
                a.extend(["-B".into(), opts.before.to_string()]);
            }
            if opts.after > 0 {
                a.extend(["-A".into(), opts.after.to_string()]);
            }
        }
    }
    a.extend(["-e".into(), pattern.to_string()]);
    if let Some(t) = file_type {
        a.extend(["--type".into(), t.to_string()]);
    }
    for g in globs {
        a.extend(["--glob".into(), g.clone()]);
    }
    a.extend(["--".into(), root.to_string()]);
    a
}

/// The in-sandbox engine: `rg` run with the equivalent flags; its output
/// lines (`\r` stripped, empty ones dropped) are paged like ours.
async fn search_exec(
    ctx: &ToolContext<'_>,
    argv: Vec<String>,
    root: &str,
    keep: Option<usize>,
    budget: Duration,
) -> Outcome {
    let sb = ctx.env.sandbox.as_ref();
    match sb.stat(root).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return Outcome::NotFound,
        Err(e) => return Outcome::Failed(format!("Error: cannot search {root}: {e}")),
    }
    let req = ExecRequest {
        argv,
        timeout: Some(budget),
        cancel: Some(ctx.cancel.clone()),
        ..Default::default()
    };
    let mut lines = Vec::new();
    let mut total = 0usize;
    let res = walk::exec_lines(sb, req, b'\n', |raw| {
        let mut b = raw;
        while let Some(rest) = b.strip_suffix(b"\r") {
            b = rest;
        }
        if b.is_empty() {
            return;
        }
        total += 1;
        if keep.is_none_or(|k| lines.len() < k) {
            lines.push(String::from_utf8_lossy(b).into_owned());
        }
    })
    .await;
    let (outcome, stderr) = match res {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(walk::rg_missing("Grep", &e.to_string())),
    };
    if outcome.cancelled {
        return Outcome::Stopped;
    }
    if outcome.timed_out {
        return Outcome::TimedOut;
    }
    let stderr = String::from_utf8_lossy(&stderr).trim().to_string();
    match outcome.exit_code {
        Some(0 | 1) => Outcome::Lines(lines, total),
        // Unreadable files make rg exit 2 next to real results; the
        // in-process engine skips them silently, so report the results.
        Some(2) if total > 0 => Outcome::Lines(lines, total),
        Some(127) => Outcome::Failed(walk::rg_missing("Grep", &stderr)),
        code => Outcome::Failed(format!(
            "ripgrep error (code {}): {stderr}",
            code.map_or("unknown".to_string(), |c| c.to_string())
        )),
    }
}

fn timeout_error(ms: u64) -> ToolResult {
    ToolResult::error(format!(
        "Ripgrep search timed out after {} seconds. Try searching a more specific path or pattern.",
        walk::format_secs(ms)
    ))
}

fn interrupted() -> ToolResult {
    ToolResult {
        state: ToolState::Interrupted,
        ..ToolResult::ok("Grep was cancelled.")
    }
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
                "pattern": {
                    "type": "string",
                    "description": "The regular expression pattern to search for in file contents."
                },
                "path": {
                    "type": "string",
                    "description": "File or directory to search in; relative paths resolve against the workspace directory (default: the workspace directory)."
                },
                "output_mode": {
                    "type": "string",
                    "enum": ["content", "files_with_matches", "count"],
                    "description": "Output mode: 'content' shows matching lines (supports -A/-B/-C context, -n line numbers, head_limit), 'files_with_matches' shows file paths (supports head_limit), 'count' shows match counts (supports head_limit). Defaults to 'files_with_matches'.",
                    "default": "files_with_matches"
                },
                "glob": {
                    "type": "string",
                    "description": "Glob pattern to filter files (e.g. '*.js', '*.{ts,tsx}', '!*.min.js'); several may be given separated by spaces or commas."
                },
                "type": {
                    "type": "string",
                    "description": "File type to search (rg --type). Common types: js, py, rust, go, java, etc."
                },
                "-A": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Number of lines to show after each match. Requires output_mode: 'content'."
                },
                "-B": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Number of lines to show before each match. Requires output_mode: 'content'."
                },
                "-C": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Alias for context."
                },
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Number of context lines to show before and after matches. Requires output_mode: 'content'."
                },
                "n": {
                    "type": "boolean",
                    "description": "Show line numbers in output. Requires output_mode: 'content'. Defaults to true.",
                    "default": true
                },
                "i": {
                    "type": "boolean",
                    "description": "Case insensitive search.",
                    "default": false
                },
                "case_insensitive": {
                    "type": "boolean",
                    "description": "Case insensitive search (alias for i).",
                    "default": false
                },
                "multiline": {
                    "type": "boolean",
                    "description": "Enable multiline mode where . matches newlines and patterns can span lines. Default: false.",
                    "default": false
                },
                "head_limit": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Limit output to first N lines/entries. Defaults to 250 when unspecified. Pass 0 for unlimited."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Skip first N lines/entries before applying head_limit. Defaults to 0.",
                    "default": 0
                }
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
        let sb = ctx.env.sandbox.clone();
        let outcome = match sb.host_path(&root) {
            Some(root_host) => {
                let job = HostJob {
                    root_backend: root.clone(),
                    root_host,
                    workdir_host: super::glob::host_workdir(sb.as_ref(), workdir),
                    globs,
                    types,
                    matcher,
                    opts,
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
        match outcome {
            Outcome::Lines(_, 0) => {
                ToolResult::ok(format!("No matches found for pattern: {}", args.pattern))
            }
            Outcome::Lines(lines, total) => {
                ToolResult::ok(page.render(&lines, total, "result lines"))
            }
            Outcome::NotFound => ToolResult::error(format!("Path not found: {root}")),
            Outcome::Stopped if ctx.cancel.is_cancelled() => interrupted(),
            Outcome::Stopped => timeout_error(limits.search_timeout_ms),
            Outcome::TimedOut => timeout_error(limits.search_timeout_ms),
            Outcome::Failed(msg) => ToolResult::error(msg),
        }
    }
}

#[cfg(test)]
mod tests;
