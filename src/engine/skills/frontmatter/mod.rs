//! `SKILL.md` front matter (docs/contract.md §4.1), read as the reference
//! reads it.
//!
//! The reference (agentscope 2.0.11) calls python-frontmatter, which strips
//! the text, needs a `---` line at the very start (a UTF-8 BOM is not
//! whitespace, so a file starting with one has no front matter), splits at
//! the next `^-{3,}\s*$` line and hands the YAML between (with its final
//! newline, which `|` and `>` block scalars keep) to PyYAML's `SafeLoader`:
//! YAML 1.1, so unquoted `yes`/`off` are booleans, `017` is 15, duplicate
//! keys keep the last value. It then keeps `str(name)` and
//! `str(description)` and drops the skill when either is falsy. Here the
//! YAML syntax is checked by `serde_yaml_ng` (libyaml, the parser PyYAML's
//! `CSafeLoader` uses), and the values are built by [`yaml11`]. What the
//! reference accepts but a person likely did not mean (a boolean name, a
//! repeated key) is accepted with a warning. `tests/fixtures/frontmatter/`
//! holds the reference's answers for the table test. Parsing never changes
//! the file.

mod yaml11;

#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use regex::Regex;

use self::yaml11::{Field, Py};

/// A valid front matter: the two required keys and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrontMatter {
    /// `name`, as the reference reads it: `str()` of the YAML 1.1 value
    /// (`yes` → `True`, `017` → `15`, `[a, b]` → `['a', 'b']`).
    pub name: String,
    /// `description`, read the same way.
    pub description: String,
    /// The markdown after the closing `---`, trimmed like the reference
    /// (`str.strip()`).
    pub body: String,
    /// What the reference accepts but a person probably did not mean:
    /// an unquoted value YAML 1.1 reads as something other than text, a
    /// repeated key. One line each, with the file line.
    pub warnings: Vec<String>,
}

/// Why a `SKILL.md` is not a valid skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrontMatterError {
    /// 1-based line in the file the problem is on, when there is one.
    pub line: Option<usize>,
    /// What is wrong; for YAML errors the parser's message (with file line
    /// numbers).
    pub reason: String,
    /// How to fix it, when the cause is a common one.
    pub hint: Option<String>,
}

impl FrontMatterError {
    fn new(line: Option<usize>, reason: impl Into<String>, hint: Option<String>) -> Self {
        FrontMatterError {
            line,
            reason: reason.into(),
            hint,
        }
    }

    /// One-line description for error messages: `line N: reason. Hint: ...`.
    pub fn describe(&self) -> String {
        describe(self.line, &self.reason, self.hint.as_deref())
    }
}

/// python-frontmatter's boundary, `^-{3,}\s*$` in multi-line mode (`\s*`
/// may run over blank lines, as Python's does).
static BOUNDARY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^-{3,}\s*$").expect("boundary regex"));

/// Python's `str.isspace()` for one character (Unicode white space plus
/// the four ASCII separators `\x1c`..`\x1f`).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Parses the bytes of a `SKILL.md` as the reference does.
///
/// Errors (all with a reason a person can act on): not UTF-8; a leading
/// BOM; no front matter; an unclosed front matter; YAML the parser rejects
/// (line of the offending entry, the parser's message, and a hint to quote
/// the value when the value is a plain scalar YAML cannot take as written,
/// C08); front matter that is not a mapping; `name` or `description`
/// missing or falsy in Python (`~`, `off`, `0`, `''`, `[]`); a name that
/// reads as a path.
pub(crate) fn parse(bytes: &[u8]) -> Result<FrontMatter, FrontMatterError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        FrontMatterError::new(
            None,
            format!(
                "SKILL.md is not valid UTF-8 (bad byte at offset {})",
                e.valid_up_to()
            ),
            Some("save the file as UTF-8".into()),
        )
    })?;
    if text.starts_with('\u{feff}') {
        return Err(FrontMatterError::new(
            Some(1),
            "SKILL.md starts with a UTF-8 byte order mark (BOM); the reference (agentscope) then finds no front matter and drops the skill",
            Some("save the file as UTF-8 without a BOM".into()),
        ));
    }
    let lead = text.len() - text.trim_start_matches(py_space).len();
    let stripped = text.trim_matches(py_space);
    let Some(open) = BOUNDARY.find(stripped).filter(|m| m.start() == 0) else {
        return Err(no_front_matter());
    };
    let open_line = text[..lead].matches('\n').count() + 1;
    let Some(close) = BOUNDARY.find_at(stripped, open.end()) else {
        return Err(FrontMatterError::new(
            Some(open_line),
            format!(
                "the front matter opened by `---` on line {open_line} is never closed by a `---` line"
            ),
            Some("end the front matter with a line holding only `---`".into()),
        ));
    };
    let yaml = &stripped[open.end()..close.start()];
    let body = stripped[close.end()..].trim_matches(py_space).to_string();
    // File line (1-based) of the YAML text's first line, minus one: added
    // to the parser's 1-based lines to get file lines.
    let offset = lead_lines(text, lead + open.end());
    let yaml_lines: Vec<&str> = yaml
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    control_chars(&yaml_lines, offset)?;

    // Syntax first, with libyaml (PyYAML's parser) and its messages;
    // `IgnoredAny` builds no mapping, so a repeated key is no error here.
    if let Err(e) = serde_yaml_ng::from_str::<serde::de::IgnoredAny>(yaml) {
        return Err(yaml_error(&e, &yaml_lines, offset));
    }
    let fields = yaml11::load(yaml).map_err(|(reason, line)| {
        let line = line.map(|l| l + offset);
        FrontMatterError::new(
            line,
            format!("{reason} (line {})", line.unwrap_or(offset + 1)),
            None,
        )
    })?;
    let Some(fields) = fields else {
        return Err(FrontMatterError::new(
            Some(offset + 1),
            "the front matter is not a mapping of `key: value` lines",
            Some("write the front matter as `name: ...` and `description: ...` lines".into()),
        ));
    };
    let mut warnings = Vec::new();
    let name = required(&fields, "name", offset, &mut warnings)?;
    let description = required(&fields, "description", offset, &mut warnings)?;
    if let Some(name) = &name
        && let Some(reason) = bad_name(name)
    {
        let line = fields["name"].lines.last().map(|l| l + offset);
        return Err(FrontMatterError::new(
            line,
            format!("the skill name {name:?} {reason}"),
            Some("give the skill a plain name such as `git-helper`".into()),
        ));
    }
    match (name, description) {
        (Some(name), Some(description)) => Ok(FrontMatter {
            name,
            description,
            body,
            warnings,
        }),
        (name, description) => {
            let missing = match (name.is_none(), description.is_none()) {
                (true, true) => "`name` and `description`",
                (true, false) => "`name`",
                _ => "`description`",
            };
            Err(FrontMatterError::new(
                Some(open_line),
                format!(
                    "the front matter has no {missing} (both are required and must not be empty)"
                ),
                None,
            ))
        }
    }
}

/// Number of lines before the text at byte `at` of `text` (so the 1-based
/// line of a parser's line 1 is this plus one).
fn lead_lines(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count()
}

/// A required key as the reference keeps it: `Ok(None)` when missing,
/// an error when present but falsy in Python (`off`, `0`, `~`, `[]`:
/// the reference drops the skill), else `str(value)`, with warnings for a
/// repeated key and for a value that is not text.
fn required(
    fields: &std::collections::HashMap<String, Field>,
    key: &str,
    offset: usize,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, FrontMatterError> {
    let Some(f) = fields.get(key) else {
        return Ok(None);
    };
    let line = f.lines.last().map(|l| l + offset);
    if f.lines.len() > 1 {
        let all: Vec<String> = f.lines.iter().map(|l| (l + offset).to_string()).collect();
        warnings.push(format!(
            "line {}: `{key}` is given {} times (lines {}); the last one counts, as in the reference",
            line.unwrap_or(0),
            f.lines.len(),
            all.join(", ")
        ));
    }
    let raw = f.raw.as_deref().unwrap_or("");
    if !f.value.truthy() {
        if matches!(f.value, Py::None) || matches!(&f.value, Py::Str(s) if s.is_empty()) {
            return Ok(None);
        }
        return Err(FrontMatterError::new(
            line,
            format!(
                "`{key}: {raw}` is read by YAML 1.1 as {} `{}`, which the reference takes as no {key} and drops the skill",
                f.value.kind(),
                f.value.py_str()
            ),
            Some(quote_hint(key, raw)),
        ));
    }
    let text = f.value.py_str();
    if !matches!(f.value, Py::Str(_)) {
        let written = if raw.is_empty() {
            String::new()
        } else {
            format!(" `{raw}`")
        };
        warnings.push(format!(
            "line {}: `{key}`{written} is {} in YAML 1.1; the reference reads it as `{text}`{}",
            line.unwrap_or(0),
            f.value.kind(),
            if raw.is_empty() {
                String::new()
            } else {
                format!(". Hint: {}", quote_hint(key, raw))
            }
        ));
    }
    Ok(Some(text))
}

/// Longest skill name, in bytes (a file name's limit: the directory is
/// made from it).
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// Why `name` cannot name a skill, or `None`. The reference turns every
/// character outside `[A-Za-z0-9_-]` and CJK into `_` for the directory
/// (docs/contract.md §4.3), so a name never decides a path; it is still
/// shown to agents and printed, so names that read as paths (`/`, `\`,
/// `..`), control characters and over-long names are refused outright
/// (issue 14 point 2).
pub(crate) fn bad_name(name: &str) -> Option<&'static str> {
    if name.contains('/') || name.contains('\\') {
        Some("holds a path separator")
    } else if name.contains("..") || name.chars().all(|c| c == '.') {
        Some("holds `..` or is only dots")
    } else if name.chars().any(char::is_control) {
        Some("holds a control character")
    } else if name.len() > MAX_NAME_BYTES {
        Some("is longer than 255 bytes")
    } else {
        None
    }
}

/// Refuses a raw control character in the front matter (an ESC pasted
/// into a name, say) with its file line and column: YAML takes none but
/// tab (and NEL), and its parser names only a byte position in the YAML
/// block, not a line of the file.
fn control_chars(yaml_lines: &[&str], offset: usize) -> Result<(), FrontMatterError> {
    for (i, line) in yaml_lines.iter().enumerate() {
        let hit = line
            .chars()
            .enumerate()
            .find(|(_, c)| c.is_control() && *c != '\t' && *c != '\u{85}');
        if let Some((col, c)) = hit {
            return Err(FrontMatterError::new(
                Some(i + offset + 1),
                format!(
                    "a control character (U+{:04X}) at column {} of the front matter",
                    c as u32,
                    col + 1
                ),
                Some("remove it: names and descriptions are plain text".into()),
            ));
        }
    }
    Ok(())
}

fn no_front_matter() -> FrontMatterError {
    FrontMatterError::new(
        None,
        "SKILL.md has no front matter: it must start with a `---` line, then `name:` and `description:` lines, then `---`",
        Some("start the file with `---`, `name: <name>`, `description: <one line>`, `---`".into()),
    )
}

/// A top-level `key: value` line split into key and raw value.
fn split_entry(line: &str) -> Option<(&str, &str)> {
    if line.starts_with([' ', '\t', '#', '-']) {
        return None;
    }
    let (key, value) = line.split_once(':')?;
    let key = key.trim();
    let ok_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.');
    ok_key.then_some((key, value.trim()))
}

/// True when a plain (unquoted) value cannot be read by YAML as the text it
/// looks like: it holds `: ` or ` #`, ends with `:`, or starts with a YAML
/// indicator character.
fn needs_quotes(value: &str) -> bool {
    if value.is_empty() || value.starts_with(['"', '\'']) {
        return false;
    }
    value.contains(": ")
        || value.contains(" #")
        || value.ends_with(':')
        || value.starts_with([
            '[', ']', '{', '}', '&', '*', '!', '|', '>', '%', '@', '`', ',',
        ])
}

fn quote_hint(key: &str, value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    format!("quote the value, for example: {key}: \"{escaped}\"")
}

/// Adds `offset` to every `line N` in a parser message, so its positions
/// refer to the file rather than the YAML block.
fn shift_lines(message: &str, offset: usize) -> String {
    let mut out = String::with_capacity(message.len() + 8);
    let mut rest = message;
    while let Some(i) = rest.find("line ") {
        let (head, tail) = rest.split_at(i + "line ".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        match tail[..digits].parse::<usize>() {
            Ok(n) if digits > 0 => out.push_str(&(n + offset).to_string()),
            _ => out.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn yaml_error(err: &serde_yaml_ng::Error, yaml_lines: &[&str], offset: usize) -> FrontMatterError {
    let message = err.to_string();
    // serde_yaml_ng reports a location even for errors without one (at the
    // start); it is only meaningful when the message names it.
    let located = message.contains(" at line ");
    let reason = if located {
        shift_lines(&message, offset)
    } else {
        message
    };
    let err_idx = located.then(|| err.location()).flatten().map(|l| {
        l.line()
            .saturating_sub(1)
            .min(yaml_lines.len().saturating_sub(1))
    });

    // The entry at fault is the `key: value` line at or above the error:
    // YAML often notices a bad plain value only at the next line.
    let entry = err_idx.and_then(|idx| {
        (0..=idx)
            .rev()
            .find_map(|i| split_entry(yaml_lines[i]).map(|(k, v)| (i, k, v)))
    });
    match entry {
        Some((i, key, value)) if needs_quotes(value) => {
            FrontMatterError::new(Some(i + offset + 1), reason, Some(quote_hint(key, value)))
        }
        _ => FrontMatterError::new(err_idx.map(|i| i + offset + 1), reason, None),
    }
}

/// `line N: reason. Hint: ...`, the one-line form of a skill problem.
pub(crate) fn describe(line: Option<usize>, reason: &str, hint: Option<&str>) -> String {
    let mut out = match line {
        Some(l) => format!("line {l}: {reason}"),
        None => reason.to_string(),
    };
    if let Some(h) = hint {
        out.push_str(". Hint: ");
        out.push_str(h);
    }
    out
}
