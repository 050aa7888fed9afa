//! The `.mcp` file: per (agent, session) MCP declarations (docs/contract.md §2.1,
//! §5.2), read into an [`McpStore`] with a report and written back whole.
//!
//! Reading never fails and never writes. What it could not use is listed
//! in [`McpStore::issues`]; pairs that loaded fall back to nothing else,
//! pairs that did not load fall back to the workspace defaults, exactly as
//! the reference does. Where wsbench departs from the reference it is to
//! lose nothing a user wrote:
//!
//! * Entries that fail validation are skipped for use but **kept** in
//!   memory and written back verbatim at their place, so saving after
//!   `add`/`remove` on another pair does not delete a hand-written entry
//!   that merely has a typo (the reference drops it on its next save).
//!   `add` of the same name replaces such an entry; `remove` of its name
//!   deletes it.
//! * Saving is refused ([`McpStoreError::SaveBlocked`]) while the file
//!   could not be understood as a whole: unreadable, not JSON, not an
//!   object or list, a `version` other than 2, or a part of `mcps` of the
//!   wrong shape. The user fixes the file and reloads; until then memory
//!   changes stay in memory.
//! * Saving is refused ([`McpStoreError::ChangedOnDisk`]) when the file
//!   changed since this store last read or wrote it, so a concurrent hand
//!   edit is not overwritten.
//! * Fields and top-level keys this version does not know are kept and
//!   written back (with a warning), instead of being dropped.
//!
//! Writes go through [`Sandbox::write`] when it is atomic (temp file and
//! rename on local), else through a temp file and [`Sandbox::rename`]
//! (docs/contract.md §11 point 11). The bytes are the reference's: UTF-8 JSON,
//! 2-space indent, non-ASCII unescaped, no trailing newline.

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::decl::{DeclError, McpDecl, kind_of};
use crate::backend::{BackendError, Sandbox};
use crate::engine::error::WorkspaceError;
use crate::engine::layout::Layout;

/// The `.mcp` format version wsbench writes (`MCP_FILE_VERSION`).
pub const MCP_FILE_VERSION: u64 = 2;

/// How bad an [`McpIssue`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something was not loaded.
    Error,
    /// Loaded, but worth knowing (version-1 file, unknown field kept).
    Warning,
}

impl Severity {
    /// `error` / `warn`, the level names of [`crate::engine::Event::Log`].
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warn",
        }
    }
}

/// One problem found while reading `.mcp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpIssue {
    /// Error or warning.
    pub severity: Severity,
    /// Backend path of the file.
    pub path: String,
    /// Where in the file, as a JSON path (`mcps["coder"]["s-001"][0]`,
    /// `[2]` in a version-1 list); `None` for the file as a whole.
    pub location: Option<String>,
    /// Agent id of the entry, when the issue concerns one.
    pub agent: Option<String>,
    /// Session id of the entry.
    pub session: Option<String>,
    /// Index of the entry in its list (0-based).
    pub index: Option<usize>,
    /// The entry's `name`, when it has a string one.
    pub name: Option<String>,
    /// Dotted field path inside the entry (`mcp_config.command`).
    pub field: Option<String>,
    /// 1-based line of a JSON syntax error.
    pub line: Option<usize>,
    /// 1-based column of a JSON syntax error.
    pub column: Option<usize>,
    /// What is wrong and what was done about it.
    pub message: String,
}

impl McpIssue {
    fn file(severity: Severity, path: &str, message: impl Into<String>) -> Self {
        McpIssue {
            severity,
            path: path.to_string(),
            location: None,
            agent: None,
            session: None,
            index: None,
            name: None,
            field: None,
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for McpIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(loc) = &self.location {
            write!(f, ": {loc}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " (name {name:?})")?;
        }
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Errors of [`McpStore`] operations.
#[derive(Debug, thiserror::Error)]
pub enum McpStoreError {
    /// `add` of a name the pair already declares (reference `ValueError`).
    #[error("an MCP named `{name}` is already declared for agent {agent:?}, session {session:?}")]
    Duplicate {
        /// The name.
        name: String,
        /// Agent id.
        agent: String,
        /// Session id.
        session: String,
    },
    /// `add` of a declaration that breaks the rules.
    #[error("invalid MCP declaration `{name}`: {source}")]
    Invalid {
        /// Its name as given.
        name: String,
        /// What is wrong.
        #[source]
        source: DeclError,
    },
    /// The file was not understood on load; rewriting it could destroy
    /// what the user meant, so they must fix it by hand and reload.
    #[error("refusing to rewrite {path}: {reason}; fix the file by hand and reload it")]
    SaveBlocked {
        /// Backend path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file changed since this store last read or wrote it.
    #[error(
        "{path} changed on disk since it was loaded; reload it so that change is not overwritten"
    )]
    ChangedOnDisk {
        /// Backend path.
        path: String,
    },
    /// Reading or writing the file failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl From<McpStoreError> for WorkspaceError {
    fn from(e: McpStoreError) -> Self {
        match e {
            McpStoreError::Backend(b) => WorkspaceError::Backend(b),
            McpStoreError::SaveBlocked { path, reason } => WorkspaceError::Parse {
                path,
                message: format!(
                    "refusing to rewrite it: {reason}; fix the file by hand and reload it"
                ),
            },
            other => WorkspaceError::Invalid(other.to_string()),
        }
    }
}

/// One declaration slot of a pair: usable, or kept only to be written back.
#[derive(Debug, Clone)]
enum Entry {
    Valid(Box<McpDecl>),
    Kept { raw: Value, name: Option<String> },
}

impl Entry {
    fn valid(&self) -> Option<&McpDecl> {
        match self {
            Entry::Valid(d) => Some(d),
            Entry::Kept { .. } => None,
        }
    }

    fn kept_name(&self) -> Option<&str> {
        match self {
            Entry::Kept { name, .. } => name.as_deref(),
            Entry::Valid(_) => None,
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Entry::Valid(d) => serde_json::to_value(d).expect("a declaration always serialises"),
            Entry::Kept { raw, .. } => raw.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct Pair {
    agent: String,
    session: String,
    entries: Vec<Entry>,
}

/// What this store last saw at its path, to detect outside changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskState {
    Absent,
    Present([u8; 32]),
    Unknown,
}

/// The MCP declarations of one workspace (`_mcp_specs`), with the report
/// of the load that produced them.
///
/// Pairs keep their file order; new pairs go last (Python dict order).
/// The store does no locking: callers that share it wrap it in a mutex
/// held across mutation and [`McpStore::save`] (the reference's
/// `_mcp_lock`).
#[derive(Debug, Clone)]
pub struct McpStore {
    path: String,
    pairs: Vec<Pair>,
    extra_top: Map<String, Value>,
    issues: Vec<McpIssue>,
    blocked: Option<String>,
    disk: DiskState,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn json_key(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

impl McpStore {
    fn empty(path: String) -> Self {
        McpStore {
            path,
            pairs: Vec::new(),
            extra_top: Map::new(),
            issues: Vec::new(),
            blocked: None,
            disk: DiskState::Absent,
        }
    }

    /// Reads `layout.mcp_file()` from `sandbox`. Never fails and never
    /// writes: an absent file gives an empty store; every problem is an
    /// entry of [`McpStore::issues`].
    pub async fn load(sandbox: &dyn Sandbox, layout: &Layout) -> McpStore {
        let path = layout.mcp_file();
        match sandbox.read(&path, None).await {
            Ok(bytes) => Self::parse(path, Some(&bytes)),
            Err(e) if e.is_not_found() => Self::parse(path, None),
            Err(e) => Self::unreadable(path, &e),
        }
    }

    /// The store for a file that exists but could not be read: empty,
    /// with the error in its report, and saving blocked (what is in the
    /// file is unknown, so it must not be overwritten).
    pub(crate) fn unreadable(path: String, err: &BackendError) -> McpStore {
        let mut st = Self::empty(path);
        st.disk = DiskState::Unknown;
        let msg = format!("cannot read the file ({err}); no declarations were loaded");
        st.issues
            .push(McpIssue::file(Severity::Error, &st.path, msg));
        st.blocked = Some(format!("it could not be read ({err})"));
        st
    }

    /// Builds a store from the file's bytes (`None` = the file is absent);
    /// `path` is only used in messages and to recognise the file on save.
    /// A leading UTF-8 BOM is accepted; a file holding only whitespace
    /// reads as empty (with a warning).
    pub fn parse(path: impl Into<String>, bytes: Option<&[u8]>) -> McpStore {
        let mut st = Self::empty(path.into());
        let Some(bytes) = bytes else {
            return st;
        };
        st.disk = DiskState::Present(sha256(bytes));
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        if body.iter().all(u8::is_ascii_whitespace) {
            st.warn_file("the file is empty; read as no declarations");
            return st;
        }
        let value: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                let mut issue = McpIssue::file(
                    Severity::Error,
                    &st.path,
                    format!("invalid JSON: {e}; no declarations were loaded"),
                );
                issue.line = Some(e.line());
                issue.column = Some(e.column());
                st.issues.push(issue);
                st.blocked = Some(format!("it is not valid JSON ({e})"));
                return st;
            }
        };
        match value {
            Value::Array(items) => {
                st.warn_file(
                    "version-1 file (a bare list): read under agent \"\", session \"\"; \
                     the next save writes version 2",
                );
                st.load_pair("", "", items, "");
            }
            Value::Object(obj) => st.load_v2(obj),
            other => {
                let kind = kind_of(&other);
                st.error_file(format!(
                    "the top level is {kind}, expected an object (version 2) or a list (version 1); \
                     no declarations were loaded"
                ));
                st.blocked = Some(format!("its top level is {kind}"));
            }
        }
        st
    }

    fn warn_file(&mut self, message: impl Into<String>) {
        self.issues
            .push(McpIssue::file(Severity::Warning, &self.path, message));
    }

    fn error_file(&mut self, message: impl Into<String>) {
        self.issues
            .push(McpIssue::file(Severity::Error, &self.path, message));
    }

    fn error_at(&mut self, location: String, agent: &str, session: Option<&str>, message: String) {
        let mut issue = McpIssue::file(Severity::Error, &self.path, message);
        issue.location = Some(location);
        issue.agent = Some(agent.to_string());
        issue.session = session.map(str::to_string);
        self.issues.push(issue);
    }

    fn load_v2(&mut self, obj: Map<String, Value>) {
        match obj.get("version") {
            None => self.warn_file(format!(
                "no `version` key; read as version {MCP_FILE_VERSION}"
            )),
            Some(v) if v.as_u64() == Some(MCP_FILE_VERSION) => {}
            Some(v) => {
                self.error_file(format!(
                    "unsupported version {v}: wsbench reads version {MCP_FILE_VERSION} (and version-1 \
                     lists); `mcps` was read as version {MCP_FILE_VERSION} where it fits"
                ));
                self.blocked = Some(format!("its version {v} is not {MCP_FILE_VERSION}"));
            }
        }
        for (key, value) in &obj {
            if key != "version" && key != "mcps" {
                self.warn_file(format!("unknown top-level key `{key}`: kept as is"));
                self.extra_top.insert(key.clone(), value.clone());
            }
        }
        let agents = match obj.get("mcps") {
            None | Some(Value::Null) => return,
            Some(Value::Object(agents)) => agents,
            Some(other) => {
                let kind = kind_of(other);
                self.error_file(format!(
                    "`mcps` is {kind}, expected an object of agents; no declarations were loaded"
                ));
                self.blocked = Some(format!("its `mcps` is {kind}"));
                return;
            }
        };
        for (agent, by_session) in agents {
            let Value::Object(sessions) = by_session else {
                let kind = kind_of(by_session);
                let loc = format!("mcps[{}]", json_key(agent));
                self.error_at(
                    loc.clone(),
                    agent,
                    None,
                    format!("expected an object of sessions, got {kind}; skipped"),
                );
                self.blocked = Some(format!("{loc} is {kind}"));
                continue;
            };
            for (session, cfgs) in sessions {
                let loc = format!("mcps[{}][{}]", json_key(agent), json_key(session));
                match cfgs {
                    Value::Array(items) => self.load_pair(agent, session, items.clone(), &loc),
                    other => {
                        let kind = kind_of(other);
                        self.error_at(
                            loc.clone(),
                            agent,
                            Some(session),
                            format!("expected a list of MCP declarations, got {kind}; skipped"),
                        );
                        self.blocked = Some(format!("{loc} is {kind}"));
                    }
                }
            }
        }
    }

    fn load_pair(&mut self, agent: &str, session: &str, items: Vec<Value>, loc: &str) {
        let mut entries: Vec<Entry> = Vec::with_capacity(items.len());
        for (index, raw) in items.into_iter().enumerate() {
            let name = raw.get("name").and_then(Value::as_str).map(str::to_string);
            let mut issue = McpIssue::file(Severity::Error, &self.path, String::new());
            issue.location = Some(format!("{loc}[{index}]"));
            issue.agent = Some(agent.to_string());
            issue.session = Some(session.to_string());
            issue.index = Some(index);
            issue.name = name.clone();
            match McpDecl::from_value(&raw) {
                Ok(decl) => {
                    let earlier = entries
                        .iter()
                        .position(|e| e.valid().is_some_and(|d| d.name == decl.name));
                    if let Some(first) = earlier {
                        issue.field = Some("name".into());
                        issue.message = format!(
                            "duplicate name: entry [{first}] of this session already uses it; \
                             this entry is ignored (and kept in the file)"
                        );
                        self.issues.push(issue);
                        entries.push(Entry::Kept { raw, name });
                        continue;
                    }
                    for field in decl.unknown_fields() {
                        let mut w = issue.clone();
                        w.severity = Severity::Warning;
                        w.field = Some(field);
                        w.message = "unknown field: kept as is, not used".into();
                        self.issues.push(w);
                    }
                    entries.push(Entry::Valid(Box::new(decl)));
                }
                Err(e) => {
                    issue.field = e.field;
                    issue.message = format!(
                        "{}; this entry is skipped (and kept in the file)",
                        e.message
                    );
                    self.issues.push(issue);
                    entries.push(Entry::Kept { raw, name });
                }
            }
        }
        self.pairs.push(Pair {
            agent: agent.to_string(),
            session: session.to_string(),
            entries,
        });
    }

    fn find(&self, agent: &str, session: &str) -> Option<usize> {
        self.pairs
            .iter()
            .position(|p| p.agent == agent && p.session == session)
    }

    /// Backend path of the file this store was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The report of the load: errors (entries or the file not loaded)
    /// and warnings. Not updated by later mutations.
    pub fn issues(&self) -> &[McpIssue] {
        &self.issues
    }

    /// True when the load report holds at least one error.
    pub fn has_errors(&self) -> bool {
        self.issues.iter().any(|i| i.severity == Severity::Error)
    }

    /// Why [`McpStore::save`] would be refused, if it would: the file was
    /// not understood on load. Lets callers warn before changing anything.
    pub fn save_blocked(&self) -> Option<&str> {
        self.blocked.as_deref()
    }

    /// The (agent, session) pairs with their own declarations, in file
    /// order then creation order. A pair with an empty list means
    /// "explicitly no MCPs".
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.pairs
            .iter()
            .map(|p| (p.agent.clone(), p.session.clone()))
            .collect()
    }

    /// The usable declarations stored for the pair, `None` when the pair
    /// has none of its own (it then uses the defaults).
    pub fn specs(&self, agent: &str, session: &str) -> Option<Vec<McpDecl>> {
        self.find(agent, session).map(|i| {
            self.pairs[i]
                .entries
                .iter()
                .filter_map(Entry::valid)
                .cloned()
                .collect()
        })
    }

    /// The declared set of a pair (docs/contract.md §5.2): its own declarations
    /// when present, else copies of `defaults`.
    pub fn declared(&self, agent: &str, session: &str, defaults: &[McpDecl]) -> Vec<McpDecl> {
        self.specs(agent, session)
            .unwrap_or_else(|| defaults.to_vec())
    }

    fn materialise(&mut self, agent: &str, session: &str, defaults: &[McpDecl]) -> usize {
        if let Some(i) = self.find(agent, session) {
            return i;
        }
        self.pairs.push(Pair {
            agent: agent.to_string(),
            session: session.to_string(),
            entries: defaults
                .iter()
                .cloned()
                .map(|d| Entry::Valid(Box::new(d)))
                .collect(),
        });
        self.pairs.len() - 1
    }

    /// Declares `decl` for the pair (reference `add_mcp`, memory only).
    /// A pair without its own list first gets copies of `defaults`, then
    /// `decl` is appended; an entry of the same name that failed to load
    /// is replaced in place. Call [`McpStore::save`] to persist.
    ///
    /// Errors: [`McpStoreError::Invalid`] when `decl` breaks the rules,
    /// [`McpStoreError::Duplicate`] when the declared set already has the
    /// name. Nothing changes on error.
    pub fn add(
        &mut self,
        agent: &str,
        session: &str,
        decl: McpDecl,
        defaults: &[McpDecl],
    ) -> Result<(), McpStoreError> {
        decl.validate().map_err(|source| McpStoreError::Invalid {
            name: decl.name.clone(),
            source,
        })?;
        if self
            .declared(agent, session, defaults)
            .iter()
            .any(|d| d.name == decl.name)
        {
            return Err(McpStoreError::Duplicate {
                name: decl.name,
                agent: agent.to_string(),
                session: session.to_string(),
            });
        }
        let i = self.materialise(agent, session, defaults);
        let entries = &mut self.pairs[i].entries;
        match entries
            .iter()
            .position(|e| e.kept_name() == Some(decl.name.as_str()))
        {
            Some(pos) => entries[pos] = Entry::Valid(Box::new(decl)),
            None => entries.push(Entry::Valid(Box::new(decl))),
        }
        Ok(())
    }

    /// Removes the declaration `name` from the pair (reference
    /// `remove_mcp`, memory only). A pair without its own list gets
    /// `defaults` minus `name` (possibly empty = explicitly none). An
    /// entry of that name that failed to load is removed too. Returns
    /// `false`, changing nothing, when the name is not declared.
    pub fn remove(&mut self, agent: &str, session: &str, name: &str, defaults: &[McpDecl]) -> bool {
        match self.find(agent, session) {
            Some(i) => {
                let entries = &mut self.pairs[i].entries;
                let pos = entries
                    .iter()
                    .position(|e| e.valid().is_some_and(|d| d.name == name))
                    .or_else(|| entries.iter().position(|e| e.kept_name() == Some(name)));
                match pos {
                    Some(pos) => {
                        entries.remove(pos);
                        true
                    }
                    None => false,
                }
            }
            None if defaults.iter().any(|d| d.name == name) => {
                let kept: Vec<McpDecl> = defaults
                    .iter()
                    .filter(|d| d.name != name)
                    .cloned()
                    .collect();
                self.materialise(agent, session, &kept);
                true
            }
            None => false,
        }
    }

    /// Forgets the pair's declarations (reference `purge_session`, memory
    /// only); it falls back to the defaults again. Returns whether it had
    /// any — the reference saves `.mcp` only then.
    pub fn purge_session(&mut self, agent: &str, session: &str) -> bool {
        match self.find(agent, session) {
            Some(i) => {
                self.pairs.remove(i);
                true
            }
            None => false,
        }
    }

    /// The file content [`McpStore::save`] writes: version 2, pairs
    /// nested `{agent: {session: [...]}}` in order, entries that failed to
    /// load verbatim, 2-space indent, non-ASCII unescaped, no trailing
    /// newline (Python `json.dumps(..., indent=2, ensure_ascii=False)`).
    pub fn to_json(&self) -> String {
        let mut agents = Map::new();
        for p in &self.pairs {
            let sessions = agents
                .entry(p.agent.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(sessions) = sessions {
                sessions.insert(
                    p.session.clone(),
                    Value::Array(p.entries.iter().map(Entry::to_value).collect()),
                );
            }
        }
        let mut top = Map::new();
        top.insert("version".into(), Value::from(MCP_FILE_VERSION));
        top.insert("mcps".into(), Value::Object(agents));
        for (k, v) in &self.extra_top {
            top.insert(k.clone(), v.clone());
        }
        let mut buf = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(
            &mut buf,
            serde_json::ser::PrettyFormatter::with_indent(b"  "),
        );
        Value::Object(top)
            .serialize(&mut ser)
            .expect("a JSON value always serialises");
        String::from_utf8(buf).expect("serde_json writes UTF-8")
    }

    /// Rewrites `layout.mcp_file()` with [`McpStore::to_json`], atomically
    /// (see the module docs). Skips the write when the content would not
    /// change.
    ///
    /// Errors: [`McpStoreError::SaveBlocked`] while the loaded file was
    /// not understood (see [`McpStore::save_blocked`]);
    /// [`McpStoreError::ChangedOnDisk`] when the file is not what this
    /// store last read or wrote (for another layout: when a file already
    /// exists there); [`McpStoreError::Backend`] when reading or writing
    /// fails. Memory is left as it is on error.
    pub async fn save(
        &mut self,
        sandbox: &dyn Sandbox,
        layout: &Layout,
    ) -> Result<(), McpStoreError> {
        let path = layout.mcp_file();
        if let Some(reason) = &self.blocked {
            return Err(McpStoreError::SaveBlocked {
                path,
                reason: reason.clone(),
            });
        }
        let expected = if path == self.path {
            self.disk
        } else {
            DiskState::Absent
        };
        let current = match sandbox.read(&path, None).await {
            Ok(bytes) => DiskState::Present(sha256(&bytes)),
            Err(e) if e.is_not_found() => DiskState::Absent,
            Err(e) => return Err(e.into()),
        };
        if current != expected {
            return Err(McpStoreError::ChangedOnDisk { path });
        }
        let bytes = self.to_json().into_bytes();
        let digest = sha256(&bytes);
        if current != DiskState::Present(digest) {
            write_atomic(sandbox, &path, &bytes).await?;
        }
        self.path = path;
        self.disk = DiskState::Present(digest);
        Ok(())
    }
}

async fn write_atomic(sandbox: &dyn Sandbox, path: &str, bytes: &[u8]) -> Result<(), BackendError> {
    if sandbox.capabilities().atomic_write {
        return sandbox.write(path, bytes).await;
    }
    let tmp = crate::backend::path::join(
        &crate::backend::path::parent(path),
        &format!(
            "{}{}",
            crate::backend::path::TEMP_PREFIX,
            uuid::Uuid::new_v4().simple()
        ),
    );
    sandbox.write(&tmp, bytes).await?;
    if let Err(e) = sandbox.rename(&tmp, path).await {
        // Best effort: the rename error is what the caller needs to see.
        let _ = sandbox.remove(&tmp, false).await;
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
