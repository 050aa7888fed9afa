//! The Bash tool (docs/contract.md §3.1): runs a command line with `/bin/sh -c` in
//! the workdir through the backend, streaming output as it comes.
//!
//! Better than the reference (§11 points 17 and 23): a timeout kills the
//! whole process tree, stdout/stderr stream out as events while the command
//! runs, and the output is never held whole in memory — only the head the
//! model sees stays in memory, the rest spools to a temp file and, when the
//! output is over the limit, the full text is offloaded as a tool-result
//! file that the truncated text names.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::bash_shell::Ran;
use super::spool::{self, Spool};
use super::{Tool, ToolContext, ToolResult, ToolState, parse_args};
use crate::backend::{OutputChunk, StreamKind};
use crate::engine::bus::{OutputMerge, Throttle};
use crate::engine::events::{Event, OUTPUT_EVENT_BYTES, OUTPUT_EVENT_INTERVAL};

/// The Bash tool. `session` is `[tools] bash_session`: it only changes
/// what the description tells the model (the call itself follows
/// [`ToolEnv::bash_session`](super::ToolEnv::bash_session) or the
/// caller's choice).
pub struct Bash {
    /// Calls run in the session's long-lived shell by default.
    pub session: bool,
}

/// The description when each call is a fresh shell (the reference's
/// semantics, the default).
const DESCRIPTION_FRESH: &str = "Run a shell command with /bin/sh -c in the workspace directory and return its output. \
     Each call is a fresh shell: cd, exported variables and background jobs do not carry over. \
     stdin is closed. Output over 30000 characters is truncated and the full output is saved \
     to a file whose path the result names. On timeout the whole process tree is killed.";

/// The description with `[tools] bash_session = true`.
const DESCRIPTION_SESSION: &str = "Run a shell command in this session's long-lived shell, in the directory the previous \
     command left it in (the workspace directory at first), and return its output. \
     cd, exported variables and shell functions carry over to the next call; each call still has \
     its own exit status, output and timeout. If a command ends the shell (exit, exec) or is \
     killed, the next call gets a fresh shell in the workspace directory and the result says so. \
     stdin is closed. Output over 30000 characters is truncated and the full output is saved \
     to a file whose path the result names. On timeout the whole process tree is killed.";

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
        if self.session {
            DESCRIPTION_SESSION
        } else {
            DESCRIPTION_FRESH
        }
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
    // The one clock of the call (issue 16): started here, read once at
    // the end (after the offload), and that figure is the command's exit
    // event, the result's `duration_ms`, the journal's and the pane's.
    let t0 = std::time::Instant::now();
    let ws = ctx.env;
    let max_chars = ws.limits.bash_max_output_chars;

    ws.publish(Event::CommandStarted {
        call_id: ctx.call_id.to_string(),
        session: ctx.session.to_string(),
        command: command.to_string(),
    });

    let (tx, mut rx) = mpsc::channel::<OutputChunk>(crate::backend::OUTPUT_CHANNEL_CHUNKS);
    let exec = super::bash_shell::start(ctx, command, timeout, tx);

    // A char is at most 4 bytes: this head always holds the model's share.
    let head_cap = max_chars.saturating_mul(4).max(4096);
    let cap = ws.limits.tool_result_max_bytes;
    let mut out = Spool::new(head_cap, cap);
    let mut err = Spool::new(head_cap, cap);
    let mut spool_error = None;
    let mut events = OutputEvents::new(ctx.call_id);
    loop {
        let chunk = tokio::select! {
            c = rx.recv() => match c {
                Some(c) => c,
                None => break,
            },
            _ = tokio::time::sleep_until(events.next_at()), if events.pending() => {
                events.publish(&ws);
                continue;
            }
        };
        let cap = match chunk.stream {
            StreamKind::Stdout => &mut out,
            StreamKind::Stderr => &mut err,
        };
        if let Err(e) = cap.push(&chunk.data) {
            spool_error.get_or_insert(e);
        }
        events.push(chunk.stream, chunk.data.clone());
        if let Some(sink) = &ctx.output {
            let _ = sink.send(chunk).await;
        }
        if events.ready() {
            events.publish(&ws);
        }
    }
    events.publish(&ws);
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

    ctx.bash.send_ended(super::ProcessEnded {
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        cancelled: outcome.cancelled,
    });
    // Let the receiver run before the work below (building the text,
    // writing up to 64 MiB of tool result): woken from this task, it sits
    // in this worker's LIFO slot, which no other worker takes, until this
    // task yields. Traced under a flood (perf, issue 16), the TUI's
    // `✗ killed` line came 160–280 ms after this point, behind that work.
    tokio::task::yield_now().await;
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
            Ok((path, skipped)) if skipped > 0 => {
                capped_once(&ws, &path, skipped);
                let note = format!(
                    "\nOutput ({total_bytes} bytes) is over the tool-result cap of {cap} bytes \
                     (stdout and stderr together): the first and last bytes of each stream are \
                     saved to {path}, with a line marking the {skipped} bytes skipped"
                );
                offload_path = Some(path);
                note
            }
            Ok((path, _)) => {
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
    let duration_ms = t0.elapsed().as_millis() as u64;
    ws.publish(Event::CommandExited {
        call_id: ctx.call_id.to_string(),
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        cancelled: outcome.cancelled,
        duration_ms,
    });
    result
        .with_meta("exit_code", outcome.exit_code)
        .with_meta("timed_out", outcome.timed_out)
        .with_meta("duration_ms", duration_ms)
}

/// Tells the user, once per process, that a tool result was cut at the
/// cap (a warning on the bus: Logs, `--json` event streams); the model's
/// text says it on every capped call.
fn capped_once(ws: &super::ToolEnv<'_>, path: &str, skipped: u64) {
    static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if TOLD.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    ws.publish(Event::Log {
        level: "warn".into(),
        source: "bash".into(),
        message: format!(
            "a command's output passed the tool-result cap ({} bytes, stdout and stderr together): {skipped} bytes \
             were skipped in {path}; raise tool_result_max_bytes ([limits] or the profile) to keep \
             more (said once)",
            ws.limits.tool_result_max_bytes
        ),
    });
}

/// The output events of one call on the bus: merged per stream, at most
/// one per stream per [`OUTPUT_EVENT_INTERVAL`], each the newest
/// [`OUTPUT_EVENT_BYTES`] (issue 16: a flood must not fill the bus).
struct OutputEvents<'a> {
    call_id: &'a str,
    out: OutputMerge,
    err: OutputMerge,
    throttle: Throttle,
}

impl<'a> OutputEvents<'a> {
    fn new(call_id: &'a str) -> Self {
        OutputEvents {
            call_id,
            out: OutputMerge::new(OUTPUT_EVENT_BYTES),
            err: OutputMerge::new(OUTPUT_EVENT_BYTES),
            throttle: Throttle::new(OUTPUT_EVENT_INTERVAL),
        }
    }

    fn push(&mut self, stream: StreamKind, data: Bytes) {
        match stream {
            StreamKind::Stdout => self.out.push(stream, data),
            StreamKind::Stderr => self.err.push(stream, data),
        }
    }

    fn pending(&self) -> bool {
        !self.out.is_empty() || !self.err.is_empty()
    }

    fn ready(&self) -> bool {
        self.throttle.ready()
    }

    fn next_at(&self) -> tokio::time::Instant {
        self.throttle.next_at()
    }

    fn publish(&mut self, ws: &super::ToolEnv<'_>) {
        if !self.pending() {
            return;
        }
        self.throttle.released();
        for (stream, merge) in [
            (StreamKind::Stdout, &mut self.out),
            (StreamKind::Stderr, &mut self.err),
        ] {
            // One stream per merge: `take` joins it into one chunk.
            let m = merge.take();
            // A copy, not the slice: the slice would pin the producer's
            // whole read buffer (up to 256 KiB) for every event, and the
            // bus keeps its last 4,096 events even once read, which held
            // up to 1 GiB under a flood (issue 16: TUI memory growth).
            let Some(data) = m
                .chunks
                .into_iter()
                .next()
                .map(|c| Bytes::copy_from_slice(&c.data))
            else {
                continue;
            };
            ws.publish(Event::CommandOutput {
                call_id: self.call_id.to_string(),
                stream,
                skipped: m.skipped,
                data,
            });
        }
    }
}

/// Writes stdout, then `\n` and stderr when both are non-empty (the
/// reference's layout), raw bytes, to a fresh tool-result file: at most
/// `tool_result_max_bytes` of output in all (shared by [`spool::share`]),
/// each stream cut to its share with a marker line. Returns the path and
/// the bytes skipped.
async fn offload_full_output(
    ctx: &ToolContext<'_>,
    out: &mut Spool,
    err: &mut Spool,
) -> Result<(String, u64), String> {
    let cap = ctx.env.limits.tool_result_max_bytes;
    let (out_share, err_share) = spool::share(out.kept(), err.kept(), cap);
    let both = out.total > 0 && err.total > 0;
    let (mut reader, mut skipped) = out.reader(out_share, cap).map_err(|e| e.to_string())?;
    if both {
        reader = Box::new(reader.chain(std::io::Cursor::new(Bytes::from_static(b"\n"))));
    }
    if err.total > 0 {
        let (r, s) = err.reader(err_share, cap).map_err(|e| e.to_string())?;
        reader = Box::new(reader.chain(r));
        skipped += s;
    }
    let path = ctx
        .env
        .offload
        .tool_result_stream(ctx.session, ctx.call_id, reader)
        .await
        .map_err(|e| e.to_string())?;
    Ok((path, skipped))
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
}
