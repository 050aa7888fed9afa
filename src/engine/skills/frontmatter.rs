//! `SKILL.md` front matter (docs/contract.md §4.1).
//!
//! A skill file starts with a `---` line, YAML with at least `name` and
//! `description`, and a closing `---` line; the markdown after it is the
//! skill text. The reference parses it with python-frontmatter (PyYAML);
//! here `serde_yaml_ng` does the YAML, and a failure keeps the parser's own
//! message with line numbers translated from the YAML block to the file, so
//! a person can find the spot (C08). Parsing never changes the file.

use serde_yaml_ng::Value;

/// A valid front matter: the two required keys and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrontMatter {
    /// `name`, as written (numbers and booleans turned into text).
    pub name: String,
    /// `description`, as written.
    pub description: String,
    /// The markdown after the closing `---`, trimmed like the reference
    /// (`str.strip()`).
    pub body: String,
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

/// True for a front-matter boundary line: three or more dashes, then only
/// whitespace (python-frontmatter's `^-{3,}\s*$`).
fn is_boundary(line: &str) -> bool {
    let t = line.trim_end();
    t.len() >= 3 && t.bytes().all(|b| b == b'-')
}

/// Parses the bytes of a `SKILL.md`.
///
/// Errors (all with a reason a person can act on): not UTF-8; no front
/// matter; an unclosed front matter; YAML the parser rejects (line of the
/// offending entry, the parser's message, and a hint to quote the value
/// when the value is a plain scalar YAML cannot take as written, C08);
/// front matter that is not a mapping; `name` or `description` missing,
/// empty or not a scalar.
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
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();

    // python-frontmatter strips the whole text first, so blank lines before
    // the opening `---` are allowed.
    let Some(open) = lines.iter().position(|l| !l.trim().is_empty()) else {
        return Err(no_front_matter());
    };
    if !is_boundary(lines[open].trim_start()) {
        return Err(no_front_matter());
    }
    let Some(close) = (open + 1..lines.len()).find(|&i| is_boundary(lines[i])) else {
        return Err(FrontMatterError::new(
            Some(open + 1),
            format!(
                "the front matter opened by `---` on line {} is never closed by a `---` line",
                open + 1
            ),
            Some("end the front matter with a line holding only `---`".into()),
        ));
    };
    let yaml_lines = &lines[open + 1..close];
    // File line (1-based) of the first YAML line, minus one: added to the
    // parser's 1-based lines to get file lines.
    let offset = open + 1;
    control_chars(yaml_lines, offset)?;
    let yaml = yaml_lines.join("\n");
    let body = lines[close + 1..].join("\n").trim().to_string();

    let value = if yaml.trim().is_empty() {
        Value::Null
    } else {
        serde_yaml_ng::from_str::<Value>(&yaml).map_err(|e| yaml_error(&e, yaml_lines, offset))?
    };
    let map = match value {
        Value::Mapping(m) => m,
        Value::Null => serde_yaml_ng::Mapping::new(),
        other => {
            return Err(FrontMatterError::new(
                Some(offset + 1),
                format!(
                    "the front matter is {}, not a mapping of `key: value` lines",
                    kind_of(&other)
                ),
                Some("write the front matter as `name: ...` and `description: ...` lines".into()),
            ));
        }
    };
    let name = scalar_field(&map, "name", yaml_lines, offset)?;
    let description = scalar_field(&map, "description", yaml_lines, offset)?;
    if let Some(name) = &name
        && let Some(reason) = bad_name(name)
    {
        let line = yaml_lines
            .iter()
            .position(|l| l.trim_start().starts_with("name:"))
            .map(|i| offset + i + 1);
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
        }),
        (name, description) => {
            let missing = match (name.is_none(), description.is_none()) {
                (true, true) => "`name` and `description`",
                (true, false) => "`name`",
                _ => "`description`",
            };
            Err(FrontMatterError::new(
                Some(open + 1),
                format!(
                    "the front matter has no {missing} (both are required and must not be empty)"
                ),
                None,
            ))
        }
    }
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

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a plain string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// A required key as text; `Ok(None)` when missing or empty (the
/// reference's `not value`), an error for lists and mappings.
fn scalar_field(
    map: &serde_yaml_ng::Mapping,
    key: &str,
    yaml_lines: &[&str],
    offset: usize,
) -> Result<Option<String>, FrontMatterError> {
    let text = match map.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            let line = key_line(yaml_lines, key).map(|i| i + offset + 1);
            let hint = line.map(|l| {
                let raw = yaml_lines[l - offset - 1];
                let value = raw.split_once(':').map(|(_, v)| v.trim()).unwrap_or("");
                quote_hint(key, value)
            });
            return Err(FrontMatterError::new(
                line,
                format!(
                    "`{key}` is {}, but it must be a single line of text",
                    kind_of(other)
                ),
                hint,
            ));
        }
    };
    Ok((!text.is_empty()).then_some(text))
}

/// Index (0-based, in `yaml_lines`) of the top-level `key:` line.
fn key_line(yaml_lines: &[&str], key: &str) -> Option<usize> {
    yaml_lines.iter().position(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_character_is_refused_with_its_line_and_column() {
        let e = parse(b"---\nname: \"ab\x1bc\"\ndescription: d\n---\nbody\n")
            .err()
            .unwrap();
        assert_eq!(e.line, Some(2));
        let msg = e.describe();
        assert!(
            msg.starts_with("line 2: a control character (U+001B) at column 10"),
            "{msg}"
        );
        // In the description too; a tab stays allowed.
        let e = parse(b"\n---\nname: a\ndescription: x\x07y\n---\n")
            .err()
            .unwrap();
        assert_eq!(e.line, Some(4));
        assert!(parse(b"---\nname: a\ndescription: x\ty\n---\n").is_ok());
    }

    #[test]
    fn parses_valid_front_matter() {
        let fm = parse(
            b"---\nname: git-helper\ndescription: Summarise history.\n---\n# Title\n\nBody.\n",
        )
        .unwrap();
        assert_eq!(fm.name, "git-helper");
        assert_eq!(fm.description, "Summarise history.");
        assert_eq!(fm.body, "# Title\n\nBody.");
    }

    #[test]
    fn accepts_crlf_bom_leading_blank_lines_and_extra_keys() {
        let fm = parse(
            "\u{feff}\r\n---\r\nname: a\r\nlicense: MIT\r\ndescription: \"x: y\"\r\n---\r\nB\r\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            (fm.name.as_str(), fm.description.as_str(), fm.body.as_str()),
            ("a", "x: y", "B")
        );
    }

    #[test]
    fn c08_colon_in_plain_value_reports_line_reason_and_hint() {
        let text = "---\nname: harness\ndescription: Configure the harness: Hooks, MCP Servers, Skills\n---\nBody text.\n";
        let err = parse(text.as_bytes()).unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(
            err.reason.contains("mapping values are not allowed"),
            "{}",
            err.reason
        );
        assert!(
            err.reason.contains("line 3"),
            "file line numbers: {}",
            err.reason
        );
        let hint = err.hint.unwrap();
        assert!(
            hint.contains("description: \"Configure the harness: Hooks, MCP Servers, Skills\""),
            "{hint}"
        );
    }

    #[test]
    fn unclosed_flow_sequence_points_at_its_entry() {
        let err = parse(b"---\nname: broken-skill\ndescription: [this front matter is not valid YAML\n---\nBody.\n")
            .unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(err.reason.contains("flow sequence"), "{}", err.reason);
        assert!(err.hint.unwrap().contains("description: \"[this"));
    }

    #[test]
    fn missing_or_empty_fields_and_no_front_matter() {
        let e = parse(b"---\nname: a\n---\nbody").unwrap_err();
        assert!(e.reason.contains("no `description`"), "{}", e.reason);
        assert_eq!(e.line, Some(1));
        let e = parse(b"---\nname: ''\ndescription: d\n---\n").unwrap_err();
        assert!(e.reason.contains("no `name`"), "{}", e.reason);
        let e = parse(b"---\n---\n").unwrap_err();
        assert!(
            e.reason.contains("`name` and `description`"),
            "{}",
            e.reason
        );
        let e = parse(b"# Just markdown\n").unwrap_err();
        assert_eq!(e.line, None);
        assert!(e.reason.contains("no front matter"));
        let e = parse(b"---\nname: a\ndescription: b\n").unwrap_err();
        assert!(e.reason.contains("never closed"), "{}", e.reason);
        let e = parse(b"---\n- a\n---\n").unwrap_err();
        assert!(e.reason.contains("a list"), "{}", e.reason);
        let e = parse(b"---\nname: [a, b]\ndescription: d\n---\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.reason.contains("single line of text"), "{}", e.reason);
        let e = parse(&[0xff, 0xfe]).unwrap_err();
        assert!(e.reason.contains("UTF-8"));
    }

    #[test]
    fn path_like_and_control_names_are_refused() {
        for name in [
            "../../etc/evil",
            "a/b",
            "a\\\\b",
            "..",
            ".",
            "x..y",
            "\"a\\u001b]52;c;eA==\\u0007\"",
        ] {
            let text = format!("---\ndescription: d\nname: {name}\n---\n");
            let e = parse(text.as_bytes()).unwrap_err();
            assert!(e.reason.contains("skill name"), "{name}: {}", e.reason);
            assert_eq!(e.line, Some(3), "{name}");
        }
        assert!(parse(b"---\nname: Git Helper 2\ndescription: d\n---\n").is_ok());
    }

    #[test]
    fn scalar_names_become_text() {
        let fm = parse(b"---\nname: 42\ndescription: true\n---\n").unwrap();
        assert_eq!((fm.name.as_str(), fm.description.as_str()), ("42", "true"));
    }

    #[test]
    fn shifts_every_line_number() {
        assert_eq!(
            shift_lines(
                "x at line 3 column 1, while parsing y at line 2 column 14",
                1
            ),
            "x at line 4 column 1, while parsing y at line 3 column 14"
        );
        assert_eq!(shift_lines("no numbers", 5), "no numbers");
    }
}
