//! Keeping secrets out of MCP error and log text (issue 14 point 4).
//!
//! An HTTP server may echo the request in an error body (`Authorization:
//! Bearer …`), and a stdio server may print its environment on stderr.
//! Every failure reason, error message and log line of a server instance
//! goes through its [`Redactor`]: the header and environment values
//! wsbench sent (resolved, 8 bytes or longer) are replaced, then the
//! common secret shapes — `Bearer <token>`, `Basic <token>`, `sk-…`
//! keys, and the value after a key named like `api_key`, `token`,
//! `secret`, `password` or `authorization` — and finally the text is
//! bounded to [`MAX_ECHO_BYTES`], saying how much was dropped.
//!
//! Every [`Redactor`] made for a declaration also records its values in
//! a process-wide registry ([`remember_sent`]), so text that no server
//! instance sees — a library's log line (rmcp's transport worker prints
//! the whole error body) — can be cleaned with [`redact_known`]: the log
//! writers of `cli::logging` pass every line through it.
//!
//! Limits: a secret shorter than 8 bytes is only caught by the shapes;
//! a secret the server re-encodes (base64, URL-escaping) is not caught;
//! the registry keeps the [`MAX_KNOWN_VALUES`] longest values (a process
//! declaring more servers than that keeps only the shapes for the rest).

use super::decl::{McpConfig, McpDecl};

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Most bytes of server text (an error body, a reason) kept in one
/// message; the rest is dropped with a note.
pub const MAX_ECHO_BYTES: usize = 2048;

/// Sent values shorter than this are not replaced as values (a `1` or
/// `true` would blank out unrelated text); the shapes still apply.
const MIN_VALUE_BYTES: usize = 8;

/// Key names whose value is hidden wherever `key: value` / `key=value`
/// appears (compared case-insensitively, `-` and `_` alike).
const SECRET_KEYS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "api-key",
    "apikey",
    "x-api-key",
    "access-token",
    "token",
    "secret",
    "password",
    "cookie",
];

/// Redacts the secrets one server instance sent (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Sent values, longest first (so a value inside another goes second).
    values: Vec<String>,
}

/// Most sent values the process-wide registry keeps (longest first).
pub const MAX_KNOWN_VALUES: usize = 512;

/// Every value a [`Redactor`] of this process was made with, longest
/// first, so a value inside another is replaced second.
static KNOWN: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Adds `values` (as sent; shorter than 8 bytes are ignored) to the
/// process-wide registry read by [`redact_known`]. Bounded to
/// [`MAX_KNOWN_VALUES`]: the shortest go first when it is full.
pub fn remember_sent<'a>(values: impl IntoIterator<Item = &'a str>) {
    let fresh: Vec<&str> = values
        .into_iter()
        .filter(|v| v.len() >= MIN_VALUE_BYTES)
        .collect();
    if fresh.is_empty() {
        return;
    }
    // A poisoned lock still holds a valid list (pushes cannot tear it).
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    let mut added = false;
    for v in fresh {
        if !known.iter().any(|k| k == v) {
            known.push(v.to_string());
            added = true;
        }
    }
    if added {
        known.sort_by_key(|v| std::cmp::Reverse(v.len()));
        known.truncate(MAX_KNOWN_VALUES);
    }
}

/// `text` with every value in the registry ([`remember_sent`]) and the
/// secret shapes replaced by [`REDACTED`]; not bounded (the caller bounds
/// its own unit: a log line). For text no single server instance owns.
pub fn redact_known(text: &str) -> String {
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    let mut out = None::<String>;
    for v in known.iter() {
        let cur = out.as_deref().unwrap_or(text);
        if cur.contains(v.as_str()) {
            out = Some(cur.replace(v.as_str(), REDACTED));
        }
    }
    drop(known);
    redact_shapes(out.as_deref().unwrap_or(text))
}

impl Redactor {
    /// The values of `decl`'s headers (HTTP) or environment (stdio), as
    /// sent: `decl` should be the resolved declaration. For a header
    /// value of the form `<scheme> <token>` the token is a value too.
    /// The values are also added to the process-wide registry
    /// ([`remember_sent`]) that log lines are cleaned with.
    pub fn for_decl(decl: &McpDecl) -> Self {
        let map = match &decl.mcp_config {
            McpConfig::Stdio(c) => c.env.as_ref(),
            McpConfig::Http(c) => c.headers.as_ref(),
        };
        let mut values: Vec<String> = Vec::new();
        for (_, v) in map.iter().flat_map(|m| m.iter()) {
            values.push(v.to_string());
            if let Some((_, token)) = v.split_once(' ') {
                values.push(token.trim().to_string());
            }
        }
        values.retain(|v| v.len() >= MIN_VALUE_BYTES);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        remember_sent(values.iter().map(String::as_str));
        Redactor { values }
    }

    /// `text` with the sent values and the secret shapes replaced by
    /// [`REDACTED`] (not bounded: for text with a bound of its own, as
    /// log lines and the stderr tail).
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), REDACTED);
            }
        }
        redact_shapes(&out)
    }

    /// [`Redactor::apply`], then bounded to [`MAX_ECHO_BYTES`]: for a
    /// reason or error message that may hold a whole response body.
    pub fn apply_bounded(&self, text: &str) -> String {
        bound(&self.apply(text), MAX_ECHO_BYTES)
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), with
/// `… (N bytes dropped)` when something was cut.
pub fn bound(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let head = crate::backend::text::head_bytes(text, max);
    format!("{head}… ({} bytes dropped)", text.len() - head.len())
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~+/=:%".contains(&b)
}

/// End of the token starting at `i` (first non-token byte).
fn token_end(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() && is_token_byte(b[j]) {
        j += 1;
    }
    j
}

/// Replaces `Bearer x`, `Basic x`, `sk-x` and `key: x` / `key=x` values.
fn redact_shapes(text: &str) -> String {
    let b = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let lb = lower.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        let at_word = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        let mut hide: Option<(usize, usize)> = None;
        if at_word {
            for scheme in ["bearer ", "basic "] {
                if lb[i..].starts_with(scheme.as_bytes()) {
                    let s = i + scheme.len();
                    let e = token_end(b, s);
                    if e > s {
                        hide = Some((s, e));
                    }
                }
            }
            if hide.is_none() && lb[i..].starts_with(b"sk-") {
                let e = token_end(b, i + 3);
                if e - i >= 3 + 8 {
                    hide = Some((i, e));
                }
            }
            if hide.is_none() {
                hide = key_value(b, lb, i);
            }
        }
        match hide {
            Some((s, e)) if e > s => {
                out.push_str(&text[copied..s]);
                out.push_str(REDACTED);
                copied = e;
                i = e;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// At `i`, a secret key name followed by `:` or `=` (quotes and spaces
/// around allowed): the span of its value.
fn key_value(b: &[u8], lb: &[u8], i: usize) -> Option<(usize, usize)> {
    for key in SECRET_KEYS {
        let k = key.as_bytes();
        if lb.len() < i + k.len() {
            continue;
        }
        let same = lb[i..i + k.len()]
            .iter()
            .zip(k)
            .all(|(a, c)| a == c || (*a == b'_' && *c == b'-'));
        if !same {
            continue;
        }
        let mut j = i + k.len();
        if j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'-') {
            continue;
        }
        while j < b.len() && (b[j] == b'"' || b[j] == b'\'' || b[j] == b' ') {
            j += 1;
        }
        if j >= b.len() || (b[j] != b':' && b[j] != b'=') {
            continue;
        }
        j += 1;
        while j < b.len() && (b[j] == b'"' || b[j] == b'\'' || b[j] == b' ') {
            j += 1;
        }
        // `Authorization: Bearer x`: the scheme shape hides the token.
        if lb[j..].starts_with(b"bearer ") || lb[j..].starts_with(b"basic ") {
            return None;
        }
        let e = token_end(b, j);
        return (e > j).then_some((j, e));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::mcp::decl::McpDecl;

    #[test]
    fn shapes_are_hidden() {
        let r = Redactor::default();
        let cases = [
            (
                "Authorization: Bearer abc.def-123",
                "Authorization: Bearer [redacted]",
            ),
            (
                "{\"authorization\":\"Basic dXNlcjpw\"}",
                "{\"authorization\":\"Basic [redacted]\"}",
            ),
            ("key sk-proj-ABCDEFGH1234 leaked", "key [redacted] leaked"),
            ("x-api-key: 12345", "x-api-key: [redacted]"),
            ("api_key=hunter2&x=1", "api_key=[redacted]&x=1"),
            ("\"password\": \"p4ss\"", "\"password\": \"[redacted]\""),
            ("tokens: 12 used, sk-short", "tokens: 12 used, sk-short"),
        ];
        for (input, want) in cases {
            assert_eq!(r.apply(input), want, "{input}");
        }
    }

    #[test]
    fn sent_values_are_hidden_and_text_is_bounded() {
        let decl: McpDecl = serde_json::from_value(serde_json::json!({
            "name": "s", "is_stateful": false, "mcp_config": {"type": "http_mcp", "url": "http://127.0.0.1:1/mcp",
            "headers": {"X-Custom": "custom-secret-value", "Authorization": "Token zzzzzzzzzz"}}
        }))
        .unwrap();
        let r = Redactor::for_decl(&decl);
        let out = r.apply("echo custom-secret-value and zzzzzzzzzz");
        assert_eq!(out, "echo [redacted] and [redacted]");
        // The registry knows them too, for text no instance owns.
        assert_eq!(
            redact_known("worker quit: x-custom: custom-secret-value"),
            "worker quit: x-custom: [redacted]"
        );
        let long = "é".repeat(MAX_ECHO_BYTES);
        let out = r.apply_bounded(&long);
        assert!(out.len() < MAX_ECHO_BYTES + 40, "{}", out.len());
        assert!(
            out.ends_with(&format!("({} bytes dropped)", MAX_ECHO_BYTES)),
            "{out}"
        );
    }
}
