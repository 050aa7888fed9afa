//! One MCP server declaration: the reference's `MCPClient` JSON (contract
//! §2.1 fields, §5.1 rules).
//!
//! Parsing goes through [`McpDecl::from_value`] rather than a derived
//! `Deserialize`, so that every error names the field it concerns
//! (`mcp_config.command`, `enable_tools[2]`, ...) — a user fixing a
//! hand-edited `.mcp` needs to know where to look (C07). Serialising is
//! derived and writes the fields in the reference's order, so a file read
//! and written back keeps its bytes.

use std::fmt;

use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Default HTTP timeout in seconds (`HttpMCPConfig.timeout`, docs/contract.md §2.1).
pub const DEFAULT_HTTP_TIMEOUT: f64 = 30.0;

/// What is wrong with a declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclError {
    /// Dotted path of the offending field inside the entry
    /// (`mcp_config.command`, `enable_tools[1]`); `None` when the entry as
    /// a whole is wrong (not an object).
    pub field: Option<String>,
    /// What is wrong; serde's own wording where serde found it
    /// (``missing field `command` ``).
    pub message: String,
}

impl DeclError {
    fn new(field: Option<String>, message: impl Into<String>) -> Self {
        DeclError {
            field,
            message: message.into(),
        }
    }

    fn at(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Some(field.into()), message)
    }
}

impl fmt::Display for DeclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "field `{field}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DeclError {}

/// A string-to-string map that keeps the order of its keys, as Python
/// dicts do, so `env` and `headers` are written back in the order they
/// were read. A repeated key keeps its first position and its last value
/// (what `json.loads` does).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StrMap(Vec<(String, String)>);

impl StrMap {
    /// An empty map.
    pub fn new() -> Self {
        StrMap(Vec::new())
    }

    /// Sets `key`, keeping its position when it is already present.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for StrMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = StrMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl Serialize for StrMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de> Deserialize<'de> for StrMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<StrMap, A::Error> {
                let mut map = StrMap::new();
                while let Some((k, v)) = access.next_entry::<String, String>()? {
                    map.insert(k, v);
                }
                Ok(map)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// How undecodable bytes from a stdio server are handled (Python codec
/// error handlers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodingErrorHandler {
    /// Fail on invalid UTF-8.
    #[default]
    Strict,
    /// Drop invalid bytes.
    Ignore,
    /// Replace invalid bytes with U+FFFD.
    Replace,
}

/// `stdio_mcp`: a server started as a child process speaking JSON-RPC on
/// its stdin/stdout (docs/contract.md §5.1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StdioConfig {
    /// Program to run (looked up on `PATH` when not a path).
    pub command: String,
    /// Arguments; `null` in the file means none.
    pub args: Option<Vec<String>>,
    /// Environment added for the server. Values may hold `${VAR}`
    /// references, expanded by [`McpDecl::resolved`] only.
    pub env: Option<StrMap>,
    /// Working directory; `null` = the workdir.
    pub cwd: Option<String>,
    /// Decoding of the server's output.
    pub encoding_error_handler: EncodingErrorHandler,
    /// Fields this version does not know, kept verbatim and written back
    /// after the known ones.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `http_mcp`: a server reached over HTTP, SSE or streamable HTTP
/// depending on the URL path (see [`HttpConfig::transport`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpConfig {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Extra request headers. Values may hold `${VAR}` references,
    /// expanded by [`McpDecl::resolved`] only.
    pub headers: Option<StrMap>,
    /// Request timeout in seconds; `null` = no timeout. Default 30.0.
    pub timeout: Option<f64>,
    /// Fields this version does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The transport a declaration uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTransport {
    /// Child process, JSON-RPC over stdin/stdout.
    Stdio,
    /// Legacy HTTP+SSE transport.
    Sse,
    /// Streamable HTTP.
    StreamableHttp,
}

impl HttpConfig {
    /// SSE when the URL *path* (query and fragment excluded) ends with
    /// `/sse` or `/messages/`, else streamable HTTP (docs/contract.md §5.1).
    pub fn transport(&self) -> McpTransport {
        let path = url_path(&self.url);
        if path.ends_with("/sse") || path.ends_with("/messages/") {
            McpTransport::Sse
        } else {
            McpTransport::StreamableHttp
        }
    }
}

/// The server configuration, tagged by `type` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum McpConfig {
    /// `"type": "stdio_mcp"`.
    #[serde(rename = "stdio_mcp")]
    Stdio(StdioConfig),
    /// `"type": "http_mcp"`.
    #[serde(rename = "http_mcp")]
    Http(HttpConfig),
}

impl McpConfig {
    /// The JSON tag (`stdio_mcp` / `http_mcp`).
    pub fn type_name(&self) -> &'static str {
        match self {
            McpConfig::Stdio(_) => "stdio_mcp",
            McpConfig::Http(_) => "http_mcp",
        }
    }

    /// Parses a `mcp_config` object; errors name fields under `path`
    /// (`"mcp_config"` inside an entry).
    pub fn from_value_at(value: &Value, path: &str) -> Result<Self, DeclError> {
        let obj = value.as_object().ok_or_else(|| {
            DeclError::at(path, format!("expected an object, got {}", kind_of(value)))
        })?;
        let ty: String = required(obj, "type", path)?;
        let known: &[&str] = match ty.as_str() {
            "stdio_mcp" => &[
                "type",
                "command",
                "args",
                "env",
                "cwd",
                "encoding_error_handler",
            ],
            "http_mcp" => &["type", "url", "headers", "timeout"],
            other => {
                return Err(DeclError::at(
                    join(path, "type"),
                    format!("unknown variant `{other}`, expected `stdio_mcp` or `http_mcp`"),
                ));
            }
        };
        let extra = extras(obj, known);
        Ok(if ty == "stdio_mcp" {
            McpConfig::Stdio(StdioConfig {
                command: required(obj, "command", path)?,
                args: optional(obj, "args", path)?.flatten(),
                env: optional(obj, "env", path)?.flatten(),
                cwd: optional(obj, "cwd", path)?.flatten(),
                encoding_error_handler: optional(obj, "encoding_error_handler", path)?
                    .unwrap_or_default(),
                extra,
            })
        } else {
            McpConfig::Http(HttpConfig {
                url: required(obj, "url", path)?,
                headers: optional(obj, "headers", path)?.flatten(),
                // Absent means the default; an explicit null means none.
                timeout: optional::<Option<f64>>(obj, "timeout", path)?
                    .unwrap_or(Some(DEFAULT_HTTP_TIMEOUT)),
                extra,
            })
        })
    }
}

/// One MCP server declaration as stored in `.mcp` (docs/contract.md §2.1).
///
/// Fields are public so callers can build one; [`McpDecl::validate`]
/// checks the rules the reference enforces on construction, and
/// [`McpDecl::from_value`] (used by `Deserialize`) runs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpDecl {
    /// Name, `[a-zA-Z0-9_-]+` (it becomes part of `mcp__<name>__<tool>`).
    pub name: String,
    /// Stateful = one persistent session; stdio must be stateful.
    pub is_stateful: bool,
    /// The server configuration.
    pub mcp_config: McpConfig,
    /// Only these tools are listed (`null` = all).
    pub enable_tools: Option<Vec<String>>,
    /// These tools are hidden from listing (`null` = none).
    pub disable_tools: Option<Vec<String>>,
    /// Per-call timeout in seconds (`null` = none).
    pub execution_timeout: Option<f64>,
    /// Forward progress notifications while a tool runs.
    pub stream_progress: bool,
    /// Fields this version does not know, kept verbatim and written back
    /// after the known ones (a newer reference may add some).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

const DECL_FIELDS: &[&str] = &[
    "name",
    "is_stateful",
    "mcp_config",
    "enable_tools",
    "disable_tools",
    "execution_timeout",
    "stream_progress",
];

impl McpDecl {
    /// A stateful stdio declaration with defaults elsewhere.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self::with_config(
            name,
            true,
            McpConfig::Stdio(StdioConfig {
                command: command.into(),
                args: Some(args),
                env: None,
                cwd: None,
                encoding_error_handler: EncodingErrorHandler::Strict,
                extra: Map::new(),
            }),
        )
    }

    /// An HTTP declaration with the default timeout.
    pub fn http(name: impl Into<String>, url: impl Into<String>, is_stateful: bool) -> Self {
        Self::with_config(
            name,
            is_stateful,
            McpConfig::Http(HttpConfig {
                url: url.into(),
                headers: None,
                timeout: Some(DEFAULT_HTTP_TIMEOUT),
                extra: Map::new(),
            }),
        )
    }

    fn with_config(name: impl Into<String>, is_stateful: bool, mcp_config: McpConfig) -> Self {
        McpDecl {
            name: name.into(),
            is_stateful,
            mcp_config,
            enable_tools: None,
            disable_tools: None,
            execution_timeout: None,
            stream_progress: false,
            extra: Map::new(),
        }
    }

    /// Parses and validates one entry. The first problem found is
    /// returned, naming its field; types are as strict as pydantic's
    /// defaults except that integers are accepted for float fields (and
    /// written back as floats, as the reference does).
    pub fn from_value(value: &Value) -> Result<Self, DeclError> {
        let obj = value.as_object().ok_or_else(|| {
            DeclError::new(None, format!("expected an object, got {}", kind_of(value)))
        })?;
        let decl = McpDecl {
            name: required(obj, "name", "")?,
            is_stateful: required(obj, "is_stateful", "")?,
            mcp_config: match obj.get("mcp_config") {
                Some(v) => McpConfig::from_value_at(v, "mcp_config")?,
                None => return Err(DeclError::at("mcp_config", "missing field `mcp_config`")),
            },
            enable_tools: optional(obj, "enable_tools", "")?.flatten(),
            disable_tools: optional(obj, "disable_tools", "")?.flatten(),
            execution_timeout: optional(obj, "execution_timeout", "")?.flatten(),
            stream_progress: optional(obj, "stream_progress", "")?.unwrap_or(false),
            extra: extras(obj, DECL_FIELDS),
        };
        decl.validate()?;
        Ok(decl)
    }

    /// Checks the reference's construction rules (docs/contract.md §2.1, §5.1):
    /// the name pattern, stdio ⇒ stateful, no tool both enabled and
    /// disabled; plus two wsbench checks that turn late start failures
    /// into clear declaration errors: a non-empty stdio `command` and an
    /// `http(s)://host` URL.
    pub fn validate(&self) -> Result<(), DeclError> {
        if !is_valid_name(&self.name) {
            return Err(DeclError::at(
                "name",
                format!(
                    "MCP name {:?} may only contain ASCII letters, digits, `_` and `-` \
                     (it becomes part of the tool names `mcp__<name>__<tool>`)",
                    self.name
                ),
            ));
        }
        match &self.mcp_config {
            McpConfig::Stdio(cfg) => {
                if !self.is_stateful {
                    return Err(DeclError::at(
                        "is_stateful",
                        "a stdio MCP must be stateful (is_stateful: true)",
                    ));
                }
                if cfg.command.trim().is_empty() {
                    return Err(DeclError::at("mcp_config.command", "the command is empty"));
                }
            }
            McpConfig::Http(cfg) => check_http_url(&cfg.url)?,
        }
        if let (Some(enabled), Some(disabled)) = (&self.enable_tools, &self.disable_tools) {
            let mut both: Vec<&str> = Vec::new();
            for tool in enabled.iter().filter(|t| disabled.contains(t)) {
                if !both.contains(&tool.as_str()) {
                    both.push(tool);
                }
            }
            if !both.is_empty() {
                return Err(DeclError::at(
                    "disable_tools",
                    format!(
                        "enable_tools and disable_tools must not overlap, but both list {both:?}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The transport this declaration uses.
    pub fn transport(&self) -> McpTransport {
        match &self.mcp_config {
            McpConfig::Stdio(_) => McpTransport::Stdio,
            McpConfig::Http(cfg) => cfg.transport(),
        }
    }

    /// Names of the fields wsbench did not recognise (kept verbatim), as
    /// dotted paths.
    pub fn unknown_fields(&self) -> Vec<String> {
        let inner = match &self.mcp_config {
            McpConfig::Stdio(c) => &c.extra,
            McpConfig::Http(c) => &c.extra,
        };
        self.extra
            .keys()
            .cloned()
            .chain(inner.keys().map(|k| format!("mcp_config.{k}")))
            .collect()
    }

    /// Every `${VAR}` referenced in `env` / `headers` values, in order,
    /// without repeats.
    pub fn referenced_vars(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (_, value) in self.secret_values() {
            // Collect by expanding with a lookup that records each name.
            let seen = std::cell::RefCell::new(Vec::new());
            let _ = expand(value, &|name: &str| {
                seen.borrow_mut().push(name.to_string());
                Some(String::new())
            });
            for name in seen.into_inner() {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// A copy with `${VAR}` references in `env` and `headers` values
    /// expanded from the process environment, for building a client.
    /// `$$` stands for one `$`; a `$` followed by anything else is kept.
    /// The declaration itself (and so `.mcp`) keeps the references, so
    /// secrets need not be written into the agent-readable workspace
    /// (docs/contract.md §11 point 30).
    ///
    /// Errors: a referenced variable that is unset or not valid Unicode,
    /// an unterminated `${`, or an invalid variable name — naming the
    /// field (`mcp_config.env.API_KEY`) and the variable.
    pub fn resolved(&self) -> Result<McpDecl, DeclError> {
        self.resolved_with(|name| std::env::var(name).ok())
    }

    /// The declaration with its `${VAR}` references filled in now, for
    /// `mcp add --literal`: the values themselves are written to `.mcp`
    /// (in clear, in the agent-readable workspace), so the reference,
    /// which sends values as written, and wsbench send the same text.
    ///
    /// Errors: those of [`McpDecl::resolved`]; a value that, once filled,
    /// still holds `${` or `$$`, which wsbench would read as a reference
    /// or an escape and the reference as text (the two would differ).
    pub fn literal_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<McpDecl, DeclError> {
        let out = self.resolved_with(lookup)?;
        let prefix = match &out.mcp_config {
            McpConfig::Stdio(_) => "mcp_config.env",
            McpConfig::Http(_) => "mcp_config.headers",
        };
        for (key, value) in out.secret_values() {
            if value.contains("${") || value.contains("$$") {
                return Err(DeclError::at(
                    format!("{prefix}.{key}"),
                    "its value holds `${` or `$$`, which wsbench reads as a variable or an \
                     escape and the reference as text, so the two would send different \
                     values; store it without --literal or change the value"
                        .to_string(),
                ));
            }
        }
        Ok(out)
    }

    /// [`McpDecl::resolved`] with a caller-supplied variable lookup.
    pub fn resolved_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<McpDecl, DeclError> {
        let mut out = self.clone();
        let (map, prefix) = match &mut out.mcp_config {
            McpConfig::Stdio(c) => (c.env.as_mut(), "mcp_config.env"),
            McpConfig::Http(c) => (c.headers.as_mut(), "mcp_config.headers"),
        };
        if let Some(map) = map {
            for (key, value) in map.0.iter_mut() {
                *value = expand(value, &lookup)
                    .map_err(|e| DeclError::at(format!("{prefix}.{key}"), e))?;
            }
        }
        Ok(out)
    }

    fn secret_values(&self) -> Vec<(&str, &str)> {
        let map = match &self.mcp_config {
            McpConfig::Stdio(c) => c.env.as_ref(),
            McpConfig::Http(c) => c.headers.as_ref(),
        };
        map.map(|m| m.iter().collect()).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for McpDecl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        McpDecl::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// True when `name` matches `[a-zA-Z0-9_-]+`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_http_url(url: &str) -> Result<(), DeclError> {
    let bad = |why: &str| {
        DeclError::at(
            "mcp_config.url",
            format!("{url:?} is not a usable MCP URL: {why}"),
        )
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("it must start with http:// or https://"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(bad("only http and https are supported"));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if rest[..authority_end].is_empty() {
        return Err(bad("it has no host"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it contains whitespace or control characters"));
    }
    Ok(())
}

/// The path part of a URL as Python's `urlsplit` sees it: after the
/// authority, before `?` or `#`.
fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let after_authority = &rest[rest.find(['/', '?', '#']).unwrap_or(rest.len())..];
    let end = after_authority
        .find(['?', '#'])
        .unwrap_or(after_authority.len());
    &after_authority[..end]
}

/// Expands `${NAME}` and `$$` in `text`.
fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        if let Some(after) = tail.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(body) = tail.strip_prefix('{') {
            let Some(close) = body.find('}') else {
                return Err("unterminated `${` (write `$$` for a literal `$`)".to_string());
            };
            let name = &body[..close];
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`${{{name}}}` is not a valid variable reference (names are letters, digits and `_`, \
                     not starting with a digit; write `$$` for a literal `$`)"
                ));
            }
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None => return Err(format!("environment variable `{name}` is not set")),
            }
            rest = &body[close + 1..];
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Deserialises `obj[key]`; `Ok(None)` when absent. An explicit `null`
/// reaches `T` (so `Option<T>` fields accept it and others refuse it).
fn optional<T: DeserializeOwned>(
    obj: &Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<Option<T>, DeclError> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => T::deserialize(v)
            .map(Some)
            .map_err(|e| field_error(prefix, key, v, e)),
    }
}

fn required<T: DeserializeOwned>(
    obj: &Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<T, DeclError> {
    optional(obj, key, prefix)?
        .ok_or_else(|| DeclError::at(join(prefix, key), format!("missing field `{key}`")))
}

/// Wraps a serde error on `obj[key]`, pointing into lists and maps when
/// one element is at fault (`enable_tools[2]`, `mcp_config.env.KEY`).
fn field_error(prefix: &str, key: &str, value: &Value, err: serde_json::Error) -> DeclError {
    let mut path = join(prefix, key);
    match value {
        Value::Array(items) => {
            if let Some(i) = items.iter().position(|v| !v.is_string()) {
                path = format!("{path}[{i}]");
            }
        }
        Value::Object(map) => {
            if let Some((k, _)) = map.iter().find(|(_, v)| !v.is_string()) {
                path = format!("{path}.{k}");
            }
        }
        _ => {}
    }
    DeclError::at(path, err.to_string())
}

fn extras(obj: &Map<String, Value>, known: &[&str]) -> Map<String, Value> {
    obj.iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A short name for a JSON value's kind, for messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
