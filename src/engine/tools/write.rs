//! The Write tool (docs/contract.md §3.3): writes a whole file.
//!
//! The content's UTF-8 bytes are written unchanged (no newline
//! normalisation) through [`Sandbox::write`](crate::backend::Sandbox::write),
//! which creates parent directories and is atomic where the backend says
//! so (temp file + rename on local). The result text is the reference's,
//! `The file <path> has been written successfully (<n> lines).`, with
//! metadata `{diff, file_path, occurrences: 1}`: `diff` is a unified diff
//! with 3 lines of context, `/dev/null` as the old name for a new file and
//! `a/<path>` / `b/<path>` otherwise (the reference's names).
//!
//! Unlike the reference's, the diff costs what changed, not the file
//! ([`super::diff`]): a new file's is written out without a diff run, an
//! overwrite diffs only the lines between the common head and tail, and
//! the text stops at [`DIFF_META_BYTES`] (then metadata has
//! `diff_cut: true` and the diff's last line says what was left out).
//!
//! Differences from the reference: a directory, FIFO, socket or device
//! target is refused with a clear error; an existing file larger than
//! [`DIFF_MAX_BYTES`] or holding NUL bytes
//! is not read for the diff (the diff then adds every line and metadata
//! has `diff_old_omitted: true`); an existing file that is not valid UTF-8
//! is decoded lossily for the diff rather than treated as empty. There is
//! no read-before-write check: wsbench has no per-agent read cache.
//!
//! A path outside the workspace directory is written, with a note in the
//! result (and metadata `outside_workspace: true`) that it is not kept
//! with the workspace: on bubblewrap `/tmp` is private to the sandbox and
//! vanishes with it.
//!
//! Writes to one file are serialised with Edit's ([`super::filelock`]).
//! wsbench's own optional argument `expected_sha256` (hex SHA-256 of the
//! content the caller last saw; not in the model's schema) makes the write
//! a compare-and-swap: when the file now holds something else it is not
//! written and the result is `Error: <path> changed since it was read`
//! with metadata `changed_since_read: true`. The TUI editor saves this way.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::diff::{DIFF_META_BYTES, bounded_diff};
use super::filelock;
use super::textfile::{self, DIFF_MAX_BYTES, OpenError};
use super::{Tool, ToolContext, ToolResult, parse_args};
use crate::backend::BackendError;

/// The Write tool.
pub struct Write;

#[derive(Debug, Deserialize)]
struct Args {
    file_path: String,
    content: String,
    /// Compare-and-swap: hex SHA-256 the file must still have.
    #[serde(default)]
    expected_sha256: Option<String>,
}

const DESCRIPTION: &str = "Writes a file in the workspace, replacing it if it exists.

Usage:
- file_path must be an absolute path, not a relative one. Missing parent directories are created.
- content is written exactly as given (UTF-8, line endings unchanged).
- If the file already exists, Read it first so you know what you are replacing; to change part of a file, prefer the Edit tool, which sends only the change.
- Prefer editing existing files over creating new ones, and do not create documentation files (*.md, README) unless asked.
- The result says how many lines were written.";

#[async_trait]
impl Tool for Write {
    fn name(&self) -> &'static str {
        "Write"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file to write (must be absolute, not relative)"},
                "content": {"type": "string", "description": "The content to write to the file"}
            },
            "required": ["file_path", "content"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = match parse_args("Write", args) {
            Ok(a) => a,
            Err(r) => return r,
        };
        let path = match textfile::absolute_path(&args.file_path) {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        let _guard = match filelock::lock(ctx.env.sandbox, &path).await {
            Ok(g) => g,
            Err(e) => return ToolResult::error(e),
        };
        let sb = ctx.env.sandbox.as_ref();

        let stat = match sb.stat(&path).await {
            Ok(s) => Some(s),
            Err(e) if e.is_not_found() => None,
            Err(e) => return ToolResult::error(format!("Error writing file: {e}")),
        };
        let mut existed = false;
        let mut old_omitted = false;
        let mut old = String::new();
        if let Some(stat) = &stat {
            // A dangling symlink is fine: the write creates its target.
            match textfile::check_openable(sb, &path, stat).await {
                Ok(()) => existed = true,
                Err(OpenError::Dangling(_)) => {}
                Err(e) => return ToolResult::error(e.message(&path)),
            }
            if existed && stat.size > DIFF_MAX_BYTES {
                old_omitted = true;
            } else if existed {
                match sb.read(&path, None).await {
                    Ok(bytes) if bytes.contains(&0) => old_omitted = true,
                    Ok(bytes) => old = textfile::decode_lossy(&bytes, false).0,
                    Err(BackendError::NotFound(_)) => existed = false,
                    Err(e) => return ToolResult::error(format!("Error reading file: {e}")),
                }
            }
        }

        if let Some(want) = &args.expected_sha256 {
            let now = match sb.read(&path, None).await {
                Ok(b) => hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&b)),
                Err(e) if e.is_not_found() => String::new(),
                Err(e) => return ToolResult::error(format!("Error reading file: {e}")),
            };
            if !now.eq_ignore_ascii_case(want) {
                return ToolResult::error(format!(
                    "Error: {path} changed since it was read (its content is not the one expected); \
                     nothing was written."
                ))
                .with_meta("changed_since_read", true);
            }
        }
        if ctx.cancel.is_cancelled() {
            return ToolResult::interrupted(format!(
                "Write was interrupted; {path} was not changed."
            ));
        }
        if let Err(e) = sb.write(&path, args.content.as_bytes()).await {
            return match e {
                BackendError::IsADirectory(_) => {
                    ToolResult::error(format!("Error: Path is a directory, not a file: {path}"))
                }
                e => ToolResult::error(format!("Error writing file: {e}")),
            };
        }

        let from = if existed {
            format!("a/{path}")
        } else {
            "/dev/null".to_string()
        };
        let diff = bounded_diff(
            &old,
            &args.content,
            &from,
            &format!("b/{path}"),
            DIFF_META_BYTES,
        );
        let lines = textfile::count_lines(&args.content);
        let workdir = ctx.env.layout.workdir();
        let outside = crate::backend::path::strip_root(workdir, &path).is_none();
        let note = if outside {
            // Reported, not refused: scratch files have their uses.
            format!(
                "\nNote: {path} is outside the workspace ({workdir}): it is not kept with the \
                 workspace, and on a sandboxed backend it is lost when the sandbox stops."
            )
        } else {
            String::new()
        };
        let mut r = ToolResult::ok(format!(
            "The file {path} has been written successfully ({lines} lines).{note}"
        ))
        .with_meta("diff", diff.text)
        .with_meta("file_path", path.as_str())
        .with_meta("occurrences", 1);
        if diff.cut {
            r = r.with_meta("diff_cut", true);
        }
        if old_omitted {
            r = r.with_meta("diff_old_omitted", true);
        }
        if outside {
            r = r.with_meta("outside_workspace", true);
        }
        r
    }
}
