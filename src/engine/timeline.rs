//! A session's timeline: one row per model turn, tool call, offload and
//! compression, merged from the four files a session may hold (issue 20):
//!
//! - `journal.jsonl` (wsbench's tool-call journal: duration, exit, output
//!   bytes, offload path);
//! - `agent.jsonl` (wsbench's agent log: turns with token estimates, tool
//!   results, offload and compression events with the summary);
//! - `context.jsonl` (the reference's offloaded messages, docs/contract.md);
//! - `agent_state.json` (wsbench's live conversation: summary and kept
//!   messages).
//!
//! A session written by the reference has only `context.jsonl` and
//! `tool_result-*.txt` files; its tool calls are found in the messages'
//! `tool_call`/`tool_result` blocks and the files, so it gets a timeline
//! and a tool-call count too. Tool calls are merged by call id: the first
//! source that names a call places its row, later sources fill the fields
//! it lacked. Each file is read to at most [`FILE_BYTES`]; what was not
//! read is said in [`Timeline::notes`].

use chrono::{DateTime, NaiveDateTime};
use serde::Serialize;
use serde_json::Value;

use super::journal::JournalEntry;
use super::message::{Block, Msg, ToolOutput};

/// Bytes read of each session file; the rest is left and noted.
pub const FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Characters of a call's arguments kept in [`TimelineRow::args`].
pub const ARGS_CHARS: usize = 120;

/// Characters of a compression summary kept in a row (the full text is in
/// `agent_state.json`).
pub const SUMMARY_CHARS: usize = 4000;

/// Name of wsbench's agent log in a session directory; the agent layer
/// writes it under this name (`agent::AGENT_LOG_FILE` is this constant).
pub const AGENT_LOG_FILE: &str = "agent.jsonl";

/// Name of wsbench's live agent state (`agent::STATE_FILE` is this
/// constant).
pub const AGENT_STATE_FILE: &str = "agent_state.json";

/// What a row stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// A model turn (an assistant message, or a `turn_started` event).
    Turn,
    /// A tool call and, when known, its result.
    ToolCall,
    /// A tool result's overflow written to `tool_result-<id>.txt`, or
    /// another offload.
    Offload,
    /// Old messages compressed into a summary.
    Compression,
    /// An error the agent reported.
    Error,
}

/// Where a row's facts came from (first source listed placed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `journal.jsonl`.
    Journal,
    /// `agent.jsonl`.
    AgentLog,
    /// `context.jsonl`.
    Context,
    /// `agent_state.json`.
    State,
    /// A `tool_result-*.txt` file in the session directory.
    File,
}

/// An offload: how much the model kept and where the rest is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OffloadNote {
    /// Characters the model kept (`None`: unknown).
    pub kept_chars: Option<u64>,
    /// Characters (or bytes, for files only seen on disk) of the whole.
    pub full: Option<u64>,
    /// Backend path or `workspace:///` URL of the offloaded text.
    pub path: String,
}

/// A compression: tokens before and after, and the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CompressionNote {
    /// Estimated tokens before (`None`: not logged, e.g. a reference
    /// session).
    pub tokens_before: Option<u64>,
    /// Estimated tokens after.
    pub tokens_after: Option<u64>,
    /// Messages moved to `context.jsonl`.
    pub compressed_messages: Option<u64>,
    /// The summary text, at most [`SUMMARY_CHARS`] characters.
    pub summary: String,
}

/// One row of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineRow {
    /// What the row is.
    pub kind: RowKind,
    /// When, as written by its source (RFC 3339, or the reference's naive
    /// ISO time); `None` when no source gave a time.
    pub at: Option<String>,
    /// Tool name (tool calls), agent name (turns).
    pub tool: Option<String>,
    /// Call id (tool calls and their offloads).
    pub call_id: Option<String>,
    /// Arguments on one line, at most [`ARGS_CHARS`] characters.
    pub args: String,
    /// `success`, `error`, `interrupted`, `timeout`, `exit N`, or the
    /// call's state when no result is known.
    pub state: Option<String>,
    /// Duration in milliseconds.
    pub duration_ms: Option<u64>,
    /// Size of the result: bytes (journal) or characters (messages).
    pub result_size: Option<u64>,
    /// Estimated request tokens (turns from `agent.jsonl`).
    pub tokens: Option<u64>,
    /// Set on offload rows.
    pub offload: Option<OffloadNote>,
    /// Set on compression rows.
    pub compression: Option<CompressionNote>,
    /// Error text (error rows; failed calls' first line).
    pub error: Option<String>,
    /// The source that placed the row.
    pub source: Source,
}

impl TimelineRow {
    /// An empty row of `kind` placed by `source` (every other field
    /// `None` or empty).
    pub fn new(kind: RowKind, source: Source) -> Self {
        TimelineRow {
            kind,
            at: None,
            tool: None,
            call_id: None,
            args: String::new(),
            state: None,
            duration_ms: None,
            result_size: None,
            tokens: None,
            offload: None,
            compression: None,
            error: None,
            source,
        }
    }

    /// True for failed calls and error rows (the "next error" jump).
    pub fn is_error(&self) -> bool {
        self.kind == RowKind::Error
            || matches!(self.state.as_deref(), Some(s) if s != "success" && s != "exit 0" && s != "finished" && s != "running")
    }
}

/// A session's merged timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timeline {
    /// Session id.
    pub session: String,
    /// Rows in order.
    pub rows: Vec<TimelineRow>,
    /// Distinct tool calls found in any source.
    pub tool_calls: usize,
    /// Rows for which [`TimelineRow::is_error`] holds.
    pub errors: usize,
    /// What could not be read (bad lines, bytes left unread).
    pub notes: Vec<String>,
}

/// The raw bytes of a session's files, as read (each at most
/// [`FILE_BYTES`]); `None` for a missing file.
#[derive(Debug, Clone, Default)]
pub struct TimelineInputs {
    /// `journal.jsonl`.
    pub journal: Option<Vec<u8>>,
    /// `agent.jsonl`.
    pub agent_log: Option<Vec<u8>>,
    /// `context.jsonl`.
    pub context: Option<Vec<u8>>,
    /// `agent_state.json`.
    pub state: Option<Vec<u8>>,
    /// `(backend path, size in bytes)` of `tool_result-*.txt` files.
    pub result_files: Vec<(String, u64)>,
    /// Notes from reading (files cut at [`FILE_BYTES`]).
    pub notes: Vec<String>,
}

/// Cuts `bytes` read from a file of `total` bytes back to its last whole
/// line, noting what was left; `file` names it in the note.
pub fn bound_lines(mut bytes: Vec<u8>, total: u64, file: &str, notes: &mut Vec<String>) -> Vec<u8> {
    if total > bytes.len() as u64 {
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(keep);
        notes.push(format!(
            "{file}: read the first {} of {total} bytes; {} bytes left unread",
            bytes.len(),
            total - bytes.len() as u64
        ));
    }
    bytes
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// Arguments as one short line: a JSON string is parsed first (the
/// reference writes `input` as a JSON string), objects show `k=v` pairs.
fn short_args(v: &Value) -> String {
    let parsed;
    let v = match v {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(p) => {
                parsed = p;
                &parsed
            }
            Err(_) => return one_line(s, ARGS_CHARS),
        },
        v => v,
    };
    let text = match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                v => format!("{k}={v}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        v => v.to_string(),
    };
    one_line(&text, ARGS_CHARS)
}

fn parse_time(s: &str) -> Option<NaiveDateTime> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.naive_utc())
        .ok()
        .or_else(|| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok())
}

fn millis_between(a: Option<&str>, b: Option<&str>) -> Option<u64> {
    let (a, b) = (parse_time(a?)?, parse_time(b?)?);
    u64::try_from((b - a).num_milliseconds()).ok()
}

fn output_chars(o: &ToolOutput) -> u64 {
    match o {
        ToolOutput::Text(s) => s.chars().count() as u64,
        ToolOutput::Blocks(b) => b
            .iter()
            .filter_map(Block::as_text)
            .map(|t| t.chars().count() as u64)
            .sum(),
    }
}

struct Builder {
    t: Timeline,
    /// Whether `agent.jsonl` gave turn rows (then messages do not).
    logged_turns: bool,
}

impl Builder {
    fn call_row(&mut self, id: &str, source: Source) -> &mut TimelineRow {
        let pos = self
            .t
            .rows
            .iter()
            .position(|r| r.kind == RowKind::ToolCall && r.call_id.as_deref() == Some(id));
        let i = match pos {
            Some(i) => i,
            None => {
                let mut r = TimelineRow::new(RowKind::ToolCall, source);
                r.call_id = Some(id.to_string());
                self.t.rows.push(r);
                self.t.rows.len() - 1
            }
        };
        &mut self.t.rows[i]
    }

    fn has_offload(&self, path_tail: &str) -> bool {
        self.t.rows.iter().any(|r| {
            r.offload
                .as_ref()
                .is_some_and(|o| o.path.ends_with(path_tail))
        })
    }

    fn messages(&mut self, msgs: &[Msg], source: Source) {
        for m in msgs {
            if m.role == "assistant"
                && !self.logged_turns
                && m.content
                    .iter()
                    .any(|b| matches!(b, Block::Text(_) | Block::ToolCall(_)))
            {
                let mut r = TimelineRow::new(RowKind::Turn, source);
                r.at = Some(m.created_at.clone());
                r.tool = Some(m.name.clone());
                r.args = one_line(&m.text_content(), ARGS_CHARS);
                self.t.rows.push(r);
            }
            for b in &m.content {
                match b {
                    Block::ToolCall(c) => {
                        let r = self.call_row(&c.id, source);
                        r.tool.get_or_insert_with(|| c.name.clone());
                        if r.args.is_empty() {
                            r.args = short_args(&c.input);
                        }
                        let created = c.extra.get("created_at").and_then(Value::as_str);
                        if r.at.is_none() {
                            r.at = created.map(str::to_string);
                        }
                        if r.duration_ms.is_none() {
                            let fin = c.extra.get("finished_at").and_then(Value::as_str);
                            r.duration_ms = millis_between(created, fin);
                        }
                        if r.state.is_none() {
                            r.state = c.state.as_str().map(str::to_string);
                        }
                    }
                    Block::ToolResult(res) => {
                        let r = self.call_row(&res.id, source);
                        r.tool.get_or_insert_with(|| res.name.clone());
                        if !res.state.is_empty()
                            && matches!(r.state.as_deref(), None | Some("finished" | "running"))
                        {
                            r.state = Some(res.state.clone());
                        }
                        r.result_size.get_or_insert(output_chars(&res.output));
                    }
                    _ => {}
                }
            }
        }
    }

    fn journal(&mut self, entries: &[JournalEntry]) {
        for e in entries {
            let r = self.call_row(&e.call_id, Source::Journal);
            r.tool = Some(e.tool.clone());
            r.at.get_or_insert_with(|| e.started_at.to_rfc3339());
            if r.args.is_empty() {
                r.args = short_args(&e.args);
            }
            r.state = Some(match (e.exit_code, e.timed_out) {
                (_, true) => "timeout".to_string(),
                (Some(c), _) => format!("exit {c}"),
                (None, _) => e.state.as_str().to_string(),
            });
            r.duration_ms = Some(e.duration_ms);
            r.result_size = Some(e.output_bytes);
            if e.error.is_some() {
                r.error.clone_from(&e.error);
            }
            if let Some(p) = &e.offload_path
                && !self.has_offload(p)
            {
                let mut o = TimelineRow::new(RowKind::Offload, Source::Journal);
                o.call_id = Some(e.call_id.clone());
                o.tool = Some(e.tool.clone());
                o.offload = Some(OffloadNote {
                    kept_chars: None,
                    full: Some(e.output_bytes),
                    path: p.clone(),
                });
                self.insert_after_call(&e.call_id, o);
            }
        }
    }

    fn insert_after_call(&mut self, id: &str, row: TimelineRow) {
        let at = self
            .t
            .rows
            .iter()
            .position(|r| r.kind == RowKind::ToolCall && r.call_id.as_deref() == Some(id))
            .map_or(self.t.rows.len(), |i| i + 1);
        self.t.rows.insert(at, row);
    }

    fn agent_log(&mut self, lines: &[Value]) {
        let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        for ev in lines {
            let at = s(ev, "at");
            match ev.get("type").and_then(Value::as_str).unwrap_or("") {
                "turn_started" => {
                    let mut r = TimelineRow::new(RowKind::Turn, Source::AgentLog);
                    r.at = at;
                    r.args = format!("turn {}", u(ev, "turn").unwrap_or(0));
                    r.tokens = u(ev, "estimated_tokens");
                    self.t.rows.push(r);
                }
                "turn_finished" => {
                    if let Some(r) = self
                        .t
                        .rows
                        .iter_mut()
                        .rev()
                        .find(|r| r.kind == RowKind::Turn)
                        && let Some(text) = ev.get("text").and_then(Value::as_str)
                        && !text.trim().is_empty()
                    {
                        r.args = format!("{}: {}", r.args, one_line(text, ARGS_CHARS));
                    }
                }
                "tool_call" => {
                    let id = s(ev, "call_id").unwrap_or_default();
                    let r = self.call_row(&id, Source::AgentLog);
                    r.tool = s(ev, "name");
                    r.at = r.at.take().or(at);
                    if r.args.is_empty() {
                        r.args = short_args(ev.get("input").unwrap_or(&Value::Null));
                    }
                }
                "tool_result" => {
                    let id = s(ev, "call_id").unwrap_or_default();
                    let r = self.call_row(&id, Source::AgentLog);
                    r.tool
                        .get_or_insert_with(|| s(ev, "name").unwrap_or_default());
                    r.state = s(ev, "state").or(r.state.take());
                    r.duration_ms = u(ev, "duration_ms").or(r.duration_ms);
                    r.result_size = u(ev, "full_chars").or(r.result_size);
                    if let Some(p) = s(ev, "offloaded_to") {
                        let kept = ev
                            .get("text")
                            .and_then(Value::as_str)
                            .map(|t| t.chars().count() as u64);
                        let mut o = TimelineRow::new(RowKind::Offload, Source::AgentLog);
                        o.at = at;
                        o.call_id = Some(id.clone());
                        o.tool = s(ev, "name");
                        o.offload = Some(OffloadNote {
                            kept_chars: kept,
                            full: u(ev, "full_chars"),
                            path: p,
                        });
                        self.insert_after_call(&id, o);
                    }
                }
                "offload_written" if s(ev, "kind").as_deref() != Some("tool_result") => {
                    let mut o = TimelineRow::new(RowKind::Offload, Source::AgentLog);
                    o.at = at;
                    o.tool = s(ev, "kind");
                    o.offload = Some(OffloadNote {
                        kept_chars: None,
                        full: u(ev, "size"),
                        path: s(ev, "path").unwrap_or_default(),
                    });
                    self.t.rows.push(o);
                }
                "compression_done" => {
                    let mut r = TimelineRow::new(RowKind::Compression, Source::AgentLog);
                    r.at = at;
                    r.compression = Some(CompressionNote {
                        tokens_before: u(ev, "tokens_before"),
                        tokens_after: u(ev, "tokens_after"),
                        compressed_messages: u(ev, "compressed_messages"),
                        summary: one_line_keep_lines(&s(ev, "summary").unwrap_or_default()),
                    });
                    self.t.rows.push(r);
                }
                "error" => {
                    let mut r = TimelineRow::new(RowKind::Error, Source::AgentLog);
                    r.at = at;
                    r.tool = s(ev, "kind");
                    r.error = s(ev, "message");
                    self.t.rows.push(r);
                }
                _ => {}
            }
        }
    }

    /// `tool_result-<id>.txt` files no source mentioned: the reference
    /// offloaded them; link each to its call (`<id>` may end in `(N)`).
    fn files(&mut self, files: &[(String, u64)]) {
        for (path, size) in files {
            let name = path.rsplit('/').next().unwrap_or(path);
            if self.has_offload(name) {
                continue;
            }
            let stem = name
                .strip_prefix("tool_result-")
                .and_then(|n| n.strip_suffix(".txt"))
                .unwrap_or(name);
            let id = match stem.rfind('(') {
                Some(i) if stem.ends_with(')') => &stem[..i],
                _ => stem,
            };
            let mut o = TimelineRow::new(RowKind::Offload, Source::File);
            o.call_id = Some(id.to_string());
            o.tool = self
                .t
                .rows
                .iter()
                .find(|r| r.kind == RowKind::ToolCall && r.call_id.as_deref() == Some(id))
                .and_then(|r| r.tool.clone());
            o.offload = Some(OffloadNote {
                kept_chars: None,
                full: Some(*size),
                path: path.clone(),
            });
            self.insert_after_call(id, o);
        }
    }
}

/// Keeps a summary's text (line breaks included) within [`SUMMARY_CHARS`].
fn one_line_keep_lines(s: &str) -> String {
    if s.chars().count() <= SUMMARY_CHARS {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(SUMMARY_CHARS).collect();
    cut.push_str(&format!(
        "…[{} chars cut]",
        s.chars().count() - SUMMARY_CHARS
    ));
    cut
}

/// Builds the timeline of `session` from its files' bytes. Never fails:
/// unreadable lines and files are noted in [`Timeline::notes`].
pub fn build(session: &str, inputs: TimelineInputs) -> Timeline {
    let mut b = Builder {
        t: Timeline {
            session: session.to_string(),
            notes: inputs.notes,
            ..Timeline::default()
        },
        logged_turns: false,
    };
    let note_bad = |file: &str, bad: &[(usize, String)], torn: usize, notes: &mut Vec<String>| {
        for (line, msg) in bad {
            notes.push(format!("{file} line {line} unreadable: {msg}"));
        }
        if torn > 0 {
            notes.push(format!("{file}: {torn} torn record(s)"));
        }
    };
    let log: Vec<Value> = match &inputs.agent_log {
        Some(bytes) => {
            let p = super::jsonl::parse::<Value>(bytes);
            note_bad(AGENT_LOG_FILE, &p.bad_lines, p.torn, &mut b.t.notes);
            p.values
        }
        None => Vec::new(),
    };
    b.logged_turns = log
        .iter()
        .any(|v| v.get("type").and_then(Value::as_str) == Some("turn_started"));
    if let Some(bytes) = &inputs.context {
        let p = super::jsonl::parse::<Msg>(bytes);
        note_bad(
            super::layout::names::CONTEXT_FILE,
            &p.bad_lines,
            p.torn,
            &mut b.t.notes,
        );
        b.messages(&p.values, Source::Context);
    }
    let mut state_summary = None;
    if let Some(bytes) = &inputs.state {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => {
                state_summary = v.get("summary").and_then(Value::as_str).map(str::to_string);
                let msgs: Vec<Msg> = v
                    .get("context")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|m| serde_json::from_value(m.clone()).ok())
                            .collect()
                    })
                    .unwrap_or_default();
                b.messages(&msgs, Source::State);
            }
            Err(e) => {
                b.t.notes
                    .push(format!("{AGENT_STATE_FILE} unreadable: {e}"))
            }
        }
    }
    b.agent_log(&log);
    if let Some(bytes) = &inputs.journal {
        let p = super::jsonl::parse::<JournalEntry>(bytes);
        note_bad(
            super::layout::names::JOURNAL_FILE,
            &p.bad_lines,
            p.torn,
            &mut b.t.notes,
        );
        b.journal(&p.values);
    }
    let has_compression = b.t.rows.iter().any(|r| r.kind == RowKind::Compression);
    if let Some(summary) = state_summary.filter(|s| !s.is_empty() && !has_compression) {
        let mut r = TimelineRow::new(RowKind::Compression, Source::State);
        r.compression = Some(CompressionNote {
            summary: one_line_keep_lines(&summary),
            ..CompressionNote::default()
        });
        b.t.rows.push(r);
    }
    b.files(&inputs.result_files);
    b.t.tool_calls =
        b.t.rows
            .iter()
            .filter(|r| r.kind == RowKind::ToolCall)
            .count();
    b.t.errors = b.t.rows.iter().filter(|r| r.is_error()).count();
    b.t
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
