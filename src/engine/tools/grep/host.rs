//! The in-process engine of Grep: walk the host directory the sandbox
//! exposes with ripgrep's crates and print each file as `rg` would.

use super::*;

/// Collects the output of one file, formatted as `rg` prints it.
pub(super) struct FileSink<'a> {
    pub(super) opts: &'a Opts,
    pub(super) matcher: &'a RegexMatcher,
    /// Path printed before each line (`None` for a single explicit file
    /// in content and count modes).
    pub(super) label: Option<&'a str>,
    /// True for the file named as `path` (binary data is converted, not a
    /// reason to skip it).
    pub(super) explicit: bool,
    pub(super) stop: &'a AtomicBool,
    pub(super) lines: Vec<String>,
    pub(super) count: u64,
    pub(super) binary: Option<u64>,
}

impl FileSink<'_> {
    pub(super) fn full(&self) -> bool {
        self.opts.keep.is_some_and(|k| self.lines.len() >= k)
    }

    pub(super) fn push_line(
        &mut self,
        sep: char,
        number: Option<u64>,
        bytes: &[u8],
        is_match: bool,
    ) {
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
    pub(super) fn matches_in(&self, mat: &SinkMatch<'_>) -> io::Result<u64> {
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

    pub(super) fn suppressed(&self) -> bool {
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

pub(super) fn searcher_for(opts: &Opts, explicit: bool) -> Searcher {
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
pub(super) fn search_file(
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
pub(super) struct Collector {
    pub(super) keep: Option<usize>,
    pub(super) separators: bool,
    pub(super) files: BTreeMap<PathBuf, Vec<String>>,
    pub(super) kept: usize,
    pub(super) total_lines: usize,
    pub(super) total_files: usize,
}

impl Collector {
    pub(super) fn new(keep: Option<usize>, separators: bool) -> Self {
        Collector {
            keep,
            separators,
            files: BTreeMap::new(),
            kept: 0,
            total_lines: 0,
            total_files: 0,
        }
    }

    pub(super) fn cost(&self, lines: &[String]) -> usize {
        lines.len() + usize::from(self.separators)
    }

    pub(super) fn add(&mut self, rel: PathBuf, lines: Vec<String>) {
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
    pub(super) fn finish(self) -> (Vec<String>, usize) {
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

pub(super) struct HostJob {
    pub(super) root_backend: String,
    pub(super) root_host: PathBuf,
    pub(super) workdir_host: Option<PathBuf>,
    pub(super) globs: Vec<String>,
    pub(super) types: Option<Types>,
    pub(super) matcher: RegexMatcher,
    pub(super) opts: Opts,
    /// Collects what the walk left out.
    pub(super) skipped: std::sync::Arc<walk::Skipped>,
}

/// The in-process engine.
pub(super) fn search_host(job: HostJob, stop: &AtomicBool) -> Outcome {
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
    // The walk runs under the resolved root (a linked folder's target).
    job.skipped.show_host_as(&root, &job.root_backend);
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
        skipped: job.skipped.clone(),
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
