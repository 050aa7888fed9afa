//! Every file of the workspace in one Glob walk (the engine's walker:
//! ignore rules, hidden files, no VCS folders, no symlinks; in-process on
//! local and bubblewrap, `rg --files` in the sandbox elsewhere): what the
//! finder ranks and what the Files `/` filter searches beyond the folders
//! already listed.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::backend::path as bpath;
use crate::engine::Workspace;
use crate::engine::tools::glob::Glob;
use crate::engine::tools::{BashOptions, Tool, ToolContext, ToolState};

/// Most paths one listing keeps (newest first): a bigger workspace is
/// listed up to here and the finder says so. About 100 bytes a path, so
/// the cache stays under ~20 MiB.
pub const MAX_PATHS: usize = 200_000;

/// One listing of the workspace.
#[derive(Debug, Default)]
pub struct Listing {
    /// Paths relative to the workdir, newest first (the Glob tool's
    /// order), at most [`MAX_PATHS`].
    pub paths: Vec<String>,
    /// More files exist than [`MAX_PATHS`] (the rest are not listed).
    pub more: bool,
    /// The walker's note on paths it could not read (permissions), as
    /// the Glob tool words it.
    pub note: Option<String>,
}

/// Lists every file of `ws` with the Glob tool (`**/*`, at most
/// [`MAX_PATHS`]). Errors are the tool's text (timeout after
/// `search_timeout_ms`, a sandbox failure).
pub async fn list_files(ws: &Workspace, cancel: CancellationToken) -> Result<Listing, String> {
    let ctx = ToolContext {
        env: ws.tool_env(),
        agent: "",
        session: "",
        call_id: "tui-finder",
        cancel,
        output: None,
        bash: BashOptions::default(),
    };
    let args = json!({"pattern": "**/*", "head_limit": MAX_PATHS});
    let r = Glob.call(&ctx, args).await;
    let text = r.text();
    match r.state {
        ToolState::Success => Ok(parse(ws.layout().workdir(), &text)),
        _ => Err(text.trim().to_string()),
    }
}

/// Reads the Glob tool's text: one absolute path a line, then maybe the
/// pagination line (more files exist) and the note on unreadable paths.
/// Limit: a file name holding a newline is cut in two (both halves are
/// dropped unless one looks like a path under the workdir).
pub fn parse(workdir: &str, text: &str) -> Listing {
    let mut out = Listing::default();
    let prefix = format!("{}/", workdir.trim_end_matches('/'));
    for line in text.lines() {
        if line.starts_with(&prefix) {
            if let Some(rel) = bpath::strip_root(workdir, line).filter(|r| !r.is_empty()) {
                out.paths.push(rel);
            }
        } else if line.starts_with("[Showing results") {
            out.more = true;
        } else if line.contains("could not be searched") {
            out.note = Some(line.trim().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_pagination_and_note() {
        let text = "/w/src/a.rs\n/w/b.txt\n\n[Showing results with pagination = limit: 2]\n\
                    1 path(s) could not be searched and are not listed:\n  /w/secret";
        let l = parse("/w", text);
        assert_eq!(l.paths, ["src/a.rs", "b.txt"]);
        assert!(l.more);
        assert_eq!(
            l.note.as_deref(),
            Some("1 path(s) could not be searched and are not listed:")
        );
        let none = parse("/w", "No files found matching pattern: **/*");
        assert!(none.paths.is_empty() && !none.more);
    }
}
