//! The Bash tool (docs/contract.md §3.1): runs a command line with `/bin/sh -c` in
//! the workdir through the backend, streaming output as it comes.
//!
//! Better than the reference (§11 points 17 and 23): a timeout kills the
//! whole process tree, stdout/stderr stream out as events while the command
//! runs, and the output is never held whole in memory — only the head the
//! model sees stays in memory, the rest spools to a temp file and, when the
//! output is over the limit, the full text is offloaded as a tool-result
//! file that the truncated text names.

use std::io::Write as _;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::bash_shell::Ran;
use super::{Tool, ToolContext, ToolResult, ToolState, parse_args};
use crate::backend::{OutputChunk, StreamKind};
use crate::engine::events::Event;

/// The Bash tool.
pub struct Bash;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    timeout: Option<i64>,
}

/// Marker appended to truncated output (the reference's text).
pub const TRUNCATED_MARKER: &str = "\n... (output truncated)";

/// Collects one stream: the first `head_cap` bytes in memory, everything
/// in a spool file once the head is full.
struct Capture {
    head: Vec<u8>,
    head_cap: usize,
    spool: Option<std::fs::File>,
    total: u64,
}

impl Capture {
    fn new(head_cap: usize) -> Self {
        Capture {
            head: Vec::new(),
            head_cap,
            spool: None,
            total: 0,
        }
    }

    fn push(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.total += data.len() as u64;
        if let Some(f) = &mut self.spool {
            return f.write_all(data);
        }
        if self.head.len() + data.len() <= self.head_cap {
            self.head.extend_from_slice(data);
            return Ok(());
        }
        let mut f = tempfile::tempfile()?;
        f.write_all(&self.head)?;
        f.write_all(data)?;
        self.spool = Some(f);
        let room = self.head_cap - self.head.len();
        self.head.extend_from_slice(&data[..room]);
        Ok(())
    }

    fn spilled(&self) -> bool {
        self.spool.is_some()
    }

    /// A reader over everything captured.
    fn reader(&mut self) -> std::io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        match self.spool.take() {
            Some(mut f) => {
                use std::io::Seek;
                f.seek(std::io::SeekFrom::Start(0))?;
                Ok(Box::new(tokio::fs::File::from_std(f)))
            }
            None => Ok(Box::new(std::io::Cursor::new(std::mem::take(
                &mut self.head,
            )))),
        }
    }
}

/// Truncates to `max` chars; returns whether anything was cut.
fn truncate_chars(text: &mut String, max: usize) -> bool {
    match text.char_indices().nth(max) {
        Some((i, _)) => {
            text.truncate(i);
            true
        }
        None => false,
    }
}

fn normalize_newlines(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace("\r\n", "\n")
}

#[async_trait]
impl Tool for Bash {
    fn name(&self) -> &'static str {
        "Bash"
    }

    fn description(&self) -> &'static str {
        "Run a shell command with /bin/sh -c in the workspace directory and return its output. \
         Each call is a fresh shell: cd, exported variables and background jobs do not carry over. \
         stdin is closed. Output over 30000 characters is truncated and the full output is saved \
         to a file whose path the result names. On timeout the whole process tree is killed."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run with /bin/sh -c."},
                "description": {"type": "string", "description": "Short description of what the command does (not used to run it)."},
                "timeout": {"type": "integer", "minimum": 0, "maximum": 600000,
                            "description": "Timeout in milliseconds (default 120000, at most 600000)."}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = match parse_args("Bash", args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let limits = ctx.env.limits;
        let timeout_ms = match args.timeout {
            None => limits.bash_default_timeout_ms,
            Some(t) if t < 0 => {
                return ToolResult::error("timeout must be at least 0 milliseconds");
            }
            Some(t) => (t as u64).min(limits.bash_max_timeout_ms),
        };
        run(ctx, &args.command, Duration::from_millis(timeout_ms)).await
    }
}

/// Runs `command` like the Bash tool does, with an explicit timeout.
pub async fn run(ctx: &ToolContext<'_>, command: &str, timeout: Duration) -> ToolResult {
    let ws = ctx.env;
    let max_chars = ws.limits.bash_max_output_chars;

    ws.publish(Event::CommandStarted {
        call_id: ctx.call_id.to_string(),
        session: ctx.session.to_string(),
        command: command.to_string(),
    });

    let (tx, mut rx) = mpsc::channel::<OutputChunk>(64);
    let exec = super::bash_shell::start(ctx, command, timeout, tx);

    // A char is at most 4 bytes: this head always holds the model's share.
    let head_cap = max_chars.saturating_mul(4).max(4096);
    let mut out = Capture::new(head_cap);
    let mut err = Capture::new(head_cap);
    let mut spool_error = None;
    while let Some(chunk) = rx.recv().await {
        let cap = match chunk.stream {
            StreamKind::Stdout => &mut out,
            StreamKind::Stderr => &mut err,
        };
        if let Err(e) = cap.push(&chunk.data) {
            spool_error.get_or_insert(e);
        }
        if let Some(sink) = &ctx.output {
            let _ = sink.send(chunk.clone()).await;
        }
        ws.publish(Event::CommandOutput {
            call_id: ctx.call_id.to_string(),
            stream: chunk.stream,
            data: chunk.data,
        });
    }
    let Ran {
        outcome,
        notice,
        cwd,
    } = match exec.await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            ws.publish(Event::CommandExited {
                call_id: ctx.call_id.to_string(),
                exit_code: None,
                timed_out: false,
                cancelled: false,
                duration_ms: 0,
            });
            return ToolResult::error(format!("Command failed: {command}\nError: {e}"));
        }
        Err(e) => return ToolResult::error(format!("Command failed: {command}\nError: {e}")),
    };
    ws.publish(Event::CommandExited {
        call_id: ctx.call_id.to_string(),
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        cancelled: outcome.cancelled,
        duration_ms: outcome.duration.as_millis() as u64,
    });

    let stdout = normalize_newlines(&out.head);
    let stderr = normalize_newlines(&err.head);
    let total_bytes = out.total + err.total;
    let success = outcome.exit_code == Some(0) && !outcome.timed_out && !outcome.cancelled;

    let mut body = if success {
        match (stdout.is_empty(), stderr.is_empty()) {
            (false, false) => format!("{stdout}\n{stderr}"),
            (false, true) => stdout,
            (true, _) => stderr,
        }
    } else {
        format!("Stdout:\n{stdout}\nStderr:\n{stderr}")
    };
    let truncated = truncate_chars(&mut body, max_chars) || out.spilled() || err.spilled();

    let mut offload_path = None;
    let mut offload_error = None;
    if truncated {
        let mut offload_note = match offload_full_output(ctx, &mut out, &mut err).await {
            Ok(path) => {
                let note = format!("\nFull output ({total_bytes} bytes) saved to {path}");
                offload_path = Some(path);
                note
            }
            Err(e) => {
                let note = format!("\nThe full output could not be saved: {e}");
                offload_error = Some(e);
                note
            }
        };
        if let Some(e) = spool_error {
            offload_note.push_str(&format!(" (spooling output failed: {e})"));
        }
        body.push_str(TRUNCATED_MARKER);
        body.push_str(&offload_note);
    }

    if let Some(n) = &notice {
        body.push_str(&format!("\n[session shell] {n}"));
    }
    let text = if outcome.timed_out {
        format!(
            "Command timed out after {}ms: {command}\nThe command and every process it started were killed.\n{body}",
            timeout.as_millis()
        )
    } else if outcome.cancelled {
        format!("Command cancelled: {command}\n{body}")
    } else if success {
        body
    } else {
        let code = outcome
            .exit_code
            .map(|c| c.to_string())
            .unwrap_or_else(|| "unknown".into());
        format!("Command failed: {command}\nExit code: {code}\n{body}")
    };
    let state = if outcome.cancelled {
        ToolState::Interrupted
    } else if success {
        ToolState::Success
    } else {
        ToolState::Error
    };
    let mut result = ToolResult::ok(text);
    result.state = state;
    result.exit_code = outcome.exit_code;
    result.timed_out = outcome.timed_out;
    result.offload_path = offload_path;
    result.output_bytes = total_bytes;
    if let Some(e) = offload_error {
        // Typed for front ends that stream the output and never print the
        // result text (`wsbench exec`), so the failure is not silent.
        result = result.with_meta("offload_error", e);
    }
    if let Some(n) = notice {
        result = result.with_meta("shell_notice", n);
    }
    if let Some(c) = cwd {
        result = result.with_meta("cwd", c);
    }
    result
        .with_meta("exit_code", outcome.exit_code)
        .with_meta("timed_out", outcome.timed_out)
        .with_meta("duration_ms", outcome.duration.as_millis() as u64)
}

/// Writes stdout, then `\n` and stderr when both are non-empty (the
/// reference's layout), raw bytes, to a fresh tool-result file.
async fn offload_full_output(
    ctx: &ToolContext<'_>,
    out: &mut Capture,
    err: &mut Capture,
) -> Result<String, String> {
    let both = out.total > 0 && err.total > 0;
    let mut reader: Box<dyn AsyncRead + Send + Unpin> = out.reader().map_err(|e| e.to_string())?;
    if both {
        reader = Box::new(reader.chain(std::io::Cursor::new(Bytes::from_static(b"\n"))));
    }
    if err.total > 0 {
        reader = Box::new(reader.chain(err.reader().map_err(|e| e.to_string())?));
    }
    ctx.env
        .offload
        .tool_result_stream(ctx.session, ctx.call_id, reader)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_by_chars_not_bytes() {
        let mut s = "ééé".to_string();
        assert!(truncate_chars(&mut s, 2));
        assert_eq!(s, "éé");
        let mut t = "ab".to_string();
        assert!(!truncate_chars(&mut t, 2));
    }

    #[test]
    fn capture_spills_past_head() {
        let mut c = Capture::new(4);
        c.push(b"ab").unwrap();
        assert!(!c.spilled());
        c.push(b"cdef").unwrap();
        assert!(c.spilled());
        assert_eq!(c.head, b"abcd");
        assert_eq!(c.total, 6);
    }
}
