//! The on-disk layout of a workspace (docs/contract.md §2), as backend paths.
//!
//! ```text
//! {workdir}/
//! ├── .mcp                     MCP declarations (version 2 JSON)
//! ├── data/<sha256><ext>       offloaded binary payloads
//! ├── skills/.seed/...         template; skills/<agent>/... partitions
//! └── sessions/<session>/      context.jsonl, tool_result-<id>.txt, journal.jsonl
//! ```

use crate::backend::path as bpath;

/// File and directory names of the layout (reference `workspace/_utils.py`).
pub mod names {
    /// MCP declarations file.
    pub const MCP_FILE: &str = ".mcp";
    /// Offloaded data blobs.
    pub const DATA_DIR: &str = "data";
    /// Skills root.
    pub const SKILLS_DIR: &str = "skills";
    /// Seed template partition.
    pub const SEED_DIR: &str = ".seed";
    /// Partition used when no agent id is given.
    pub const DEFAULT_PARTITION: &str = "default";
    /// Sessions root.
    pub const SESSIONS_DIR: &str = "sessions";
    /// Offloaded messages of a session.
    pub const CONTEXT_FILE: &str = "context.jsonl";
    /// wsbench's own per-session tool-call journal (the reference ignores it).
    pub const JOURNAL_FILE: &str = "journal.jsonl";
    /// Skill index file (Local reference only).
    pub const SKILL_INDEX: &str = ".index";
    /// Skill front-matter file.
    pub const SKILL_MD: &str = "SKILL.md";
    /// URL scheme prefix of offloaded data.
    pub const DATA_URL_PREFIX: &str = "workspace:///";
}

/// Errors for ids that cannot be used in paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A session id that is empty, `.`/`..`, or holds `/`, `\`, NUL or
    /// another control character (an escape in a directory name would
    /// reach every terminal that lists it; workspace ids refuse them too).
    #[error(
        "invalid session id {0:?}: it is used as a directory name, so it cannot be empty, `.`, `..` or contain `/`, `\\` or control characters"
    )]
    Session(String),
    /// An agent id that starts with `.` or holds `/`, `\` or NUL
    /// (docs/contract.md §2.3).
    #[error("invalid agent id {0:?}: it cannot start with `.` or contain `/`, `\\` or NUL")]
    Agent(String),
    /// A `workspace:///` URL or path that resolves outside the workspace.
    #[error("{0:?} resolves outside the workspace")]
    OutsideWorkspace(String),
    /// A tool-result id that holds `/`, `\` or NUL.
    #[error("invalid tool-result id {0:?}: it cannot contain `/`, `\\` or NUL")]
    ToolResult(String),
}

fn bad_chars(s: &str) -> bool {
    s.contains(['/', '\\', '\0'])
}

/// Checks a session id for use as a directory name.
pub fn check_session_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() || id == "." || id == ".." || bad_chars(id) || id.chars().any(char::is_control)
    {
        return Err(IdError::Session(id.to_string()));
    }
    Ok(())
}

/// The partition directory name for an agent id (`default` for none/"").
pub fn partition_name(agent: &str) -> Result<String, IdError> {
    if agent.is_empty() {
        return Ok(names::DEFAULT_PARTITION.to_string());
    }
    if agent.starts_with('.') || bad_chars(agent) {
        return Err(IdError::Agent(agent.to_string()));
    }
    Ok(agent.to_string())
}

/// Backend paths of one workspace's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    workdir: String,
}

impl Layout {
    /// Layout rooted at `workdir` (a backend path).
    pub fn new(workdir: impl Into<String>) -> Self {
        Layout {
            workdir: bpath::normalize(&workdir.into()),
        }
    }

    /// The workdir.
    pub fn workdir(&self) -> &str {
        &self.workdir
    }

    /// `<workdir>/<rel>`.
    pub fn join(&self, rel: &str) -> String {
        bpath::join(&self.workdir, rel)
    }

    /// `.mcp`.
    pub fn mcp_file(&self) -> String {
        self.join(names::MCP_FILE)
    }

    /// `data/`.
    pub fn data_dir(&self) -> String {
        self.join(names::DATA_DIR)
    }

    /// `skills/`.
    pub fn skills_dir(&self) -> String {
        self.join(names::SKILLS_DIR)
    }

    /// `skills/.seed`.
    pub fn seed_dir(&self) -> String {
        self.join(&format!("{}/{}", names::SKILLS_DIR, names::SEED_DIR))
    }

    /// `skills/<partition>` for an agent id.
    pub fn partition_dir(&self, agent: &str) -> Result<String, IdError> {
        Ok(self.join(&format!("{}/{}", names::SKILLS_DIR, partition_name(agent)?)))
    }

    /// `sessions/`.
    pub fn sessions_dir(&self) -> String {
        self.join(names::SESSIONS_DIR)
    }

    /// `sessions/<id>`.
    pub fn session_dir(&self, session: &str) -> Result<String, IdError> {
        check_session_id(session)?;
        Ok(self.join(&format!("{}/{}", names::SESSIONS_DIR, session)))
    }

    /// `sessions/<id>/context.jsonl`.
    pub fn context_file(&self, session: &str) -> Result<String, IdError> {
        Ok(format!(
            "{}/{}",
            self.session_dir(session)?,
            names::CONTEXT_FILE
        ))
    }

    /// `sessions/<id>/journal.jsonl`.
    pub fn journal_file(&self, session: &str) -> Result<String, IdError> {
        Ok(format!(
            "{}/{}",
            self.session_dir(session)?,
            names::JOURNAL_FILE
        ))
    }

    /// `sessions/<id>/tool_result-<rid>.txt`, or `...(<n>).txt` for n > 0.
    pub fn tool_result_file(
        &self,
        session: &str,
        result_id: &str,
        n: u32,
    ) -> Result<String, IdError> {
        if bad_chars(result_id) {
            return Err(IdError::ToolResult(result_id.to_string()));
        }
        let dir = self.session_dir(session)?;
        Ok(if n == 0 {
            format!("{dir}/tool_result-{result_id}.txt")
        } else {
            format!("{dir}/tool_result-{result_id}({n}).txt")
        })
    }

    /// Resolves `workspace:///data/x` (or any `workspace:///rel`), a path
    /// relative to the workdir, or an absolute backend path, to a backend
    /// path inside the workspace.
    ///
    /// Errors: [`IdError::OutsideWorkspace`] when it resolves outside.
    pub fn resolve_reference(&self, reference: &str) -> Result<String, IdError> {
        let path = match reference.strip_prefix(names::DATA_URL_PREFIX) {
            Some(rel) => self.join(rel.trim_start_matches('/')),
            None => self.join(reference),
        };
        match bpath::strip_root(&self.workdir, &path) {
            Some(_) => Ok(path),
            None => Err(IdError::OutsideWorkspace(reference.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let l = Layout::new("/w/");
        assert_eq!(l.mcp_file(), "/w/.mcp");
        assert_eq!(l.partition_dir("").unwrap(), "/w/skills/default");
        assert_eq!(l.partition_dir("coder").unwrap(), "/w/skills/coder");
        assert_eq!(
            l.tool_result_file("s", "c1", 0).unwrap(),
            "/w/sessions/s/tool_result-c1.txt"
        );
        assert_eq!(
            l.tool_result_file("s", "c1", 2).unwrap(),
            "/w/sessions/s/tool_result-c1(2).txt"
        );
        assert_eq!(
            l.resolve_reference("workspace:///data/ab.png").unwrap(),
            "/w/data/ab.png"
        );
    }

    #[test]
    fn rejects_ids_that_escape() {
        assert!(check_session_id("../x").is_err());
        assert!(check_session_id("..").is_err());
        assert!(check_session_id("").is_err());
        // Control characters, as workspace ids (a terminal escape).
        let e = check_session_id("a\x1b[2Jb").unwrap_err().to_string();
        assert!(
            e.contains("control characters") && e.contains("\\u{1b}"),
            "{e}"
        );
        assert!(check_session_id("a\tb").is_err());
        assert!(check_session_id("s-001 é").is_ok());
        assert!(partition_name(".seed").is_err());
        assert!(partition_name("a/b").is_err());
        assert!(Layout::new("/w").tool_result_file("s", "a/b", 0).is_err());
        let l = Layout::new("/w");
        assert!(
            l.resolve_reference("workspace:///../../etc/hostname")
                .is_err()
        );
        assert!(l.resolve_reference("../etc/passwd").is_err());
        assert!(l.resolve_reference("/etc/passwd").is_err());
        assert_eq!(l.resolve_reference("/w/data/x").unwrap(), "/w/data/x");
        assert_eq!(
            l.resolve_reference("workspace:////data/x").unwrap(),
            "/w/data/x"
        );
    }
}
