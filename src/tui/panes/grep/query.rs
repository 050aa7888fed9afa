//! What the Grep pane asks and what it gets back: the query (pattern,
//! path, glob, toggles) as the Grep tool's arguments, `:grep` parsed
//! into a query, and the tool's `content` output parsed into hits.
//!
//! The tool prints `path:line:text` per matching line (absolute backend
//! paths, `rg --sort path` order; only `line:text` when the path searched
//! is one file), then optionally a pagination footer and a note of paths
//! it could not search (docs/contract.md §3.6). Lines longer than the
//! tool's `grep_max_columns` arrive as `[Omitted long matching line]`.

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use serde_json::{Value, json};

/// Most hits asked of the tool per search (its `head_limit`); more are
/// reported as dropped, never read.
pub const MAX_HITS: usize = 5000;

/// Most bytes of hit text kept (paths and lines); hits past it are
/// dropped and counted.
pub const MAX_HIT_BYTES: usize = 4 * 1024 * 1024;

/// One search: the pattern and how to search for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrepQuery {
    /// The pattern (a regex unless [`GrepQuery::literal`]).
    pub pattern: String,
    /// File or folder to search, relative to the workdir (`None`: all).
    pub path: Option<String>,
    /// The tool's `glob` filter (`*.rs`, `!*.min.js`).
    pub glob: Option<String>,
    /// Upper and lower case match alike.
    pub ignore_case: bool,
    /// The pattern is plain text, not a regex.
    pub literal: bool,
    /// Hidden files and folders (dot names) are searched too.
    pub hidden: bool,
}

impl GrepQuery {
    /// The pattern as the tool gets it: escaped when literal.
    pub fn regex(&self) -> String {
        if self.literal {
            regex_syntax::escape(&self.pattern)
        } else {
            self.pattern.clone()
        }
    }

    /// The Grep tool's arguments for this query: content mode with line
    /// numbers, at most [`MAX_HITS`] lines. Hidden files are left out
    /// with the glob `!.*` (a name starting with a dot, at any depth),
    /// since the tool searches them by default.
    pub fn tool_args(&self) -> Value {
        let mut globs: Vec<String> = self.glob.iter().cloned().collect();
        if !self.hidden {
            globs.push("!.*".into());
        }
        let mut a = json!({
            "pattern": self.regex(),
            "output_mode": "content",
            "n": true,
            "i": self.ignore_case,
            "head_limit": MAX_HITS,
        });
        if let Some(p) = &self.path {
            a["path"] = Value::String(p.clone());
        }
        if !globs.is_empty() {
            a["glob"] = Value::String(globs.join(" "));
        }
        a
    }

    /// The matcher that finds what to highlight in a hit's text (the same
    /// pattern and case rule as the search); `None` when the pattern does
    /// not compile (the tool reports why).
    pub fn highlighter(&self) -> Option<RegexMatcher> {
        RegexMatcherBuilder::new()
            .case_insensitive(self.ignore_case)
            .build(&self.regex())
            .ok()
    }

    /// A short form for the title: the pattern, then path and glob.
    pub fn label(&self) -> String {
        let mut s = format!("\"{}\"", self.pattern);
        if let Some(p) = &self.path {
            s.push_str(&format!(" in {p}"));
        }
        if let Some(g) = &self.glob {
            s.push_str(&format!(" --glob {g}"));
        }
        s
    }
}

impl GrepQuery {
    /// The query as `:grep` arguments that [`parse_command`] reads back
    /// to the same query (shell-quoted words; `--` before a pattern that
    /// starts with `-`): what the palette offers as a recent search.
    pub fn command_line(&self) -> String {
        let q = |w: &str| {
            shlex::try_quote(w)
                .map(|c| c.into_owned())
                .unwrap_or_else(|_| w.replace('\0', ""))
        };
        let mut words: Vec<String> = Vec::new();
        if let Some(g) = &self.glob {
            words.push(format!("--glob {}", q(g)));
        }
        for (on, flag) in [
            (self.ignore_case, "-i"),
            (self.literal, "-F"),
            (self.hidden, "--hidden"),
        ] {
            if on {
                words.push(flag.to_string());
            }
        }
        words.push("--".to_string());
        words.push(q(&self.pattern));
        if let Some(p) = &self.path {
            words.push(q(p));
        }
        words.join(" ")
    }
}

/// Parses the arguments of `:grep PATTERN [PATH] [--glob G]` (shell
/// words, so a pattern with spaces is quoted; `-i` ignores case, `-F`
/// searches literally, `--hidden` includes dot files). Errors say what
/// is wrong.
pub fn parse_command(args: &str) -> Result<GrepQuery, String> {
    let words = shlex::split(args).ok_or("unbalanced quotes in `:grep`")?;
    let mut q = GrepQuery::default();
    let mut positional = Vec::new();
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "--glob" | "-g" => {
                q.glob = Some(
                    it.next()
                        .ok_or("`--glob` needs a pattern (`--glob '*.rs'`)")?,
                )
            }
            "-i" | "--ignore-case" => q.ignore_case = true,
            "-F" | "--fixed-strings" => q.literal = true,
            "--hidden" => q.hidden = true,
            "--" => positional.extend(it.by_ref()),
            _ => positional.push(w),
        }
    }
    let mut pos = positional.into_iter();
    q.pattern = pos
        .next()
        .filter(|p| !p.is_empty())
        .ok_or("`:grep` needs a pattern (`:grep PATTERN [PATH] [--glob G]`)")?;
    q.path = pos.next();
    if let Some(extra) = pos.next() {
        return Err(format!(
            "`:grep` takes one path; `{extra}` is one too many (quote a pattern with spaces)"
        ));
    }
    Ok(q)
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Backend path of the file.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The line's text (as the tool printed it).
    pub text: String,
}

/// The tool's output, parsed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The hits kept.
    pub hits: Vec<Hit>,
    /// The tool stopped at [`MAX_HITS`] lines: more exist.
    pub more: bool,
    /// Hits read but not kept ([`MAX_HIT_BYTES`]).
    pub dropped: usize,
    /// The tool's note of paths it could not search (first line).
    pub note: Option<String>,
}

/// Parses `content` output. `single` is the path searched when it is one
/// file (its lines carry no path).
pub fn parse_output(out: &str, single: &str) -> Parsed {
    let mut p = Parsed::default();
    let mut bytes = 0usize;
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.is_empty() {
            continue;
        }
        if l.starts_with("[Showing results with pagination") {
            p.more = true;
            continue;
        }
        if l.starts_with("No matches found for pattern") {
            continue;
        }
        if l.contains("path(s) could not be searched") {
            p.note = Some(l.trim().to_string());
            // The listed paths follow; they are not hits.
            lines.by_ref().for_each(drop);
            break;
        }
        let Some(hit) = parse_line(l, single) else {
            continue;
        };
        bytes += hit.path.len() + hit.text.len();
        if bytes > MAX_HIT_BYTES {
            p.dropped += 1;
        } else {
            p.hits.push(hit);
        }
    }
    p
}

/// `path:N:text`, or `N:text` for a single file. The path is found as
/// the text before the first `:digits:` (paths with such a part are
/// misread, as with `rg` itself).
fn parse_line(l: &str, single: &str) -> Option<Hit> {
    if !l.starts_with('/') {
        let (n, text) = l.split_once(':')?;
        return Some(Hit {
            path: single.to_string(),
            line: n.parse().ok()?,
            text: text.to_string(),
        });
    }
    let b = l.as_bytes();
    let mut i = 0;
    while let Some(off) = l[i..].find(':') {
        let c = i + off;
        let digits = b[c + 1..].iter().take_while(|x| x.is_ascii_digit()).count();
        if digits > 0 && b.get(c + 1 + digits) == Some(&b':') {
            return Some(Hit {
                path: l[..c].to_string(),
                line: l[c + 1..c + 1 + digits].parse().ok()?,
                text: l[c + 2 + digits..].to_string(),
            });
        }
        i = c + 1;
    }
    None
}

/// Byte ranges of the matches in `text` (at most 32, for highlighting).
pub fn match_ranges(m: &RegexMatcher, text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let _ = m.find_iter(text.as_bytes(), |r| {
        if r.is_empty() {
            return true;
        }
        out.push((r.start(), r.end()));
        out.len() < 32
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_reads_back_to_its_query() {
        for args in [
            "'fn main' src --glob '*.rs' -i",
            "-F -- '-x [y' --hidden",
            "\"it's\" 'a b/c d'",
        ] {
            let q = parse_command(args).unwrap();
            let line = q.command_line();
            let back = parse_command(&line).unwrap();
            assert_eq!(back.pattern, q.pattern, "{line}");
            assert_eq!(back.path, q.path, "{line}");
            assert_eq!(back.glob, q.glob, "{line}");
            assert_eq!(
                (back.ignore_case, back.literal, back.hidden),
                (q.ignore_case, q.literal, q.hidden),
                "{line}"
            );
        }
    }

    #[test]
    fn command_parses_pattern_path_glob_and_flags() {
        let q = parse_command("'fn main' src --glob '*.rs' -i").unwrap();
        assert_eq!(q.pattern, "fn main");
        assert_eq!(q.path.as_deref(), Some("src"));
        assert_eq!(q.glob.as_deref(), Some("*.rs"));
        assert!(q.ignore_case && !q.literal && !q.hidden);
        let q = parse_command("-F a.b --hidden").unwrap();
        assert!(q.literal && q.hidden);
        assert_eq!(q.regex(), "a\\.b");
        assert!(parse_command("").unwrap_err().contains("needs a pattern"));
        assert!(parse_command("a b c").unwrap_err().contains("one too many"));
        assert!(parse_command("a --glob").unwrap_err().contains("--glob"));
        assert!(parse_command("'a").unwrap_err().contains("quotes"));
    }

    #[test]
    fn tool_args_leave_hidden_out_unless_asked() {
        let mut q = parse_command("x --glob *.rs").unwrap();
        let a = q.tool_args();
        assert_eq!(a["glob"], "*.rs !.*");
        assert_eq!(a["output_mode"], "content");
        assert_eq!(a["head_limit"], MAX_HITS);
        q.hidden = true;
        assert_eq!(q.tool_args()["glob"], "*.rs");
        q.glob = None;
        assert!(q.tool_args().get("glob").is_none());
    }

    #[test]
    fn output_parses_into_hits_footer_and_note() {
        let out = "/w/a:b.rs:3:let x = 1;\n/w/c.rs:10:a:1:b\n\n[Showing results with pagination = limit: 5000]\n\n2 path(s) could not be searched and are not listed:\n  /w/x:1:y\n";
        let p = parse_output(out, "");
        assert_eq!(p.hits.len(), 2);
        assert_eq!(p.hits[0].path, "/w/a:b.rs");
        assert_eq!(p.hits[0].line, 3);
        assert_eq!(p.hits[1].text, "a:1:b");
        assert!(p.more);
        assert!(p.note.unwrap().starts_with("2 path(s)"));
        let p = parse_output("7:only\n", "/w/f.txt");
        assert_eq!(p.hits[0].path, "/w/f.txt");
        assert_eq!(p.hits[0].line, 7);
        assert!(
            parse_output("No matches found for pattern: q", "")
                .hits
                .is_empty()
        );
    }

    #[test]
    fn output_past_the_byte_budget_is_dropped_and_counted() {
        let line = format!("/w/f:1:{}\n", "x".repeat(1024 * 1024));
        let p = parse_output(&line.repeat(6), "");
        assert_eq!(p.hits.len(), 3);
        assert_eq!(p.dropped, 3);
    }

    #[test]
    fn highlight_ranges_follow_case_and_literal() {
        let mut q = parse_command("a.c").unwrap();
        let m = q.highlighter().unwrap();
        assert_eq!(match_ranges(&m, "abc a.c"), vec![(0, 3), (4, 7)]);
        q.literal = true;
        let m = q.highlighter().unwrap();
        assert_eq!(match_ranges(&m, "abc a.c"), vec![(4, 7)]);
        q.ignore_case = true;
        assert_eq!(match_ranges(&q.highlighter().unwrap(), "A.C"), vec![(0, 3)]);
    }
}
