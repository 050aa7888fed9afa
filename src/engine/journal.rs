//! The session journal: one JSON line per tool call in
//! `sessions/<session>/journal.jsonl` (wsbench's addition; the reference
//! ignores files it does not know). It feeds `sessions show`, the command
//! history and the TUI's session view.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::base::WorkspaceBase;
use super::error::WsResult;
use super::tools::{ToolResult, ToolState};

/// Characters of an error's first line kept in [`JournalEntry::error`].
const ERROR_CHARS: usize = 500;

/// Bytes of one string argument kept in the journal (a Write's content, a
/// long command); the rest is cut and counted in
/// [`JournalEntry::args_cut_bytes`].
pub const ARG_STRING_BYTES: usize = 2048;

/// Bytes of all string arguments of one call kept in the journal, so an
/// array of many strings is bounded too.
pub const ARGS_TOTAL_BYTES: usize = 8192;

/// One tool call, as journalled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// When the call started (UTC, RFC 3339).
    pub started_at: DateTime<Utc>,
    /// Call id.
    pub call_id: String,
    /// Agent id (`""` for none).
    pub agent: String,
    /// Session id.
    pub session: String,
    /// Tool name.
    pub tool: String,
    /// Arguments as given, with string values over [`ARG_STRING_BYTES`]
    /// (or past [`ARGS_TOTAL_BYTES`] in all) cut, each ending in
    /// `…[N bytes cut]`.
    pub args: Value,
    /// Bytes cut from `args` in all (0: the arguments are whole).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub args_cut_bytes: u64,
    /// Outcome state.
    #[serde(with = "state_serde")]
    pub state: ToolState,
    /// Bash: exit code.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Bash: the timeout fired.
    #[serde(default)]
    pub timed_out: bool,
    /// First line of the error text, for failed calls.
    #[serde(default)]
    pub error: Option<String>,
    /// Duration in milliseconds.
    pub duration_ms: u64,
    /// Size of the full output in bytes.
    pub output_bytes: u64,
    /// Backend path of the offloaded full output, if any.
    #[serde(default)]
    pub offload_path: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A copy of a call's arguments within the journal's bounds (string
/// values over [`ARG_STRING_BYTES`], or past [`ARGS_TOTAL_BYTES`] in all,
/// cut at a character boundary and ending in `…[N bytes cut]`) and the
/// bytes cut in all. A long string is never copied whole, so the start
/// event and the journal line of a 1 MiB Write cost what they keep.
pub fn bounded_args(args: &Value) -> (Value, u64) {
    let mut budget = ARGS_TOTAL_BYTES;
    let mut cut = 0;
    let v = bounded_copy(args, &mut budget, &mut cut);
    (v, cut)
}

fn bounded_copy(v: &Value, budget: &mut usize, cut: &mut u64) -> Value {
    match v {
        Value::String(s) => {
            let keep = s.len().min(ARG_STRING_BYTES).min(*budget);
            let head = crate::backend::text::head_bytes(s, keep);
            *budget -= head.len();
            if head.len() == s.len() {
                return Value::String(s.clone());
            }
            let n = s.len() - head.len();
            *cut += n as u64;
            Value::String(format!("{head}…[{n} bytes cut]"))
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| bounded_copy(x, budget, cut)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), bounded_copy(x, budget, cut)))
                .collect(),
        ),
        other => other.clone(),
    }
}

mod state_serde {
    use super::ToolState;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(s: &ToolState, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s.as_str())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ToolState, D::Error> {
        Ok(match String::deserialize(d)?.as_str() {
            "success" => ToolState::Success,
            "interrupted" => ToolState::Interrupted,
            _ => ToolState::Error,
        })
    }
}

/// Who made a call and with what, for [`JournalEntry::from_result`].
#[derive(Debug, Clone, Default)]
pub struct JournalCall {
    /// Call id.
    pub call_id: String,
    /// Agent id (`""` for none).
    pub agent: String,
    /// Session id (names the journal file).
    pub session: String,
    /// Tool name as journalled (MCP tools qualified by server).
    pub tool: String,
    /// Arguments as given.
    pub args: Value,
}

impl JournalEntry {
    /// The journal line of one finished call: `started_at` is when it
    /// began, `duration_ms` how long it ran. A failed call keeps the first
    /// line of its text, at most 500 characters; long string arguments are
    /// cut (see [`JournalEntry::args`]) so a 100 KB Write does not make a
    /// 100 KB journal line.
    pub fn from_result(
        call: JournalCall,
        result: &ToolResult,
        started_at: DateTime<Utc>,
        duration_ms: u64,
    ) -> Self {
        let (args, cut) = bounded_args(&call.args);
        let call = JournalCall { args, ..call };
        Self::from_bounded(call, cut, result, started_at, duration_ms)
    }

    /// [`JournalEntry::from_result`] for arguments already passed through
    /// [`bounded_args`], which cut `args_cut_bytes` bytes from them.
    pub fn from_bounded(
        call: JournalCall,
        args_cut_bytes: u64,
        result: &ToolResult,
        started_at: DateTime<Utc>,
        duration_ms: u64,
    ) -> Self {
        let args = call.args;
        JournalEntry {
            started_at,
            call_id: call.call_id,
            agent: call.agent,
            session: call.session,
            tool: call.tool,
            args,
            args_cut_bytes,
            state: result.state,
            exit_code: result.exit_code,
            timed_out: result.timed_out,
            error: (result.state == ToolState::Error).then(|| {
                result
                    .text()
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(ERROR_CHARS)
                    .collect()
            }),
            duration_ms,
            output_bytes: result.output_bytes,
            offload_path: result.offload_path.clone(),
        }
    }

    /// The command line of a Bash call, or a short summary of the args.
    pub fn summary(&self) -> String {
        if let Some(cmd) = self.args.get("command").and_then(Value::as_str) {
            return cmd.to_string();
        }
        for key in ["file_path", "pattern", "path"] {
            if let Some(v) = self.args.get(key).and_then(Value::as_str) {
                return v.to_string();
            }
        }
        self.args.to_string()
    }
}

/// Lines of a journal that could not be parsed are reported, not fatal.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct JournalRead {
    /// Entries in file order.
    pub entries: Vec<JournalEntry>,
    /// `(line number, parser message)` of unreadable lines.
    pub bad_lines: Vec<(usize, String)>,
    /// How many of `bad_lines` are torn records (cut short by a failed
    /// write; the entries after them are intact).
    pub torn: usize,
}

/// The journals of one workspace, reached through
/// `Workspace::journal`.
#[derive(Debug, Clone, Copy)]
pub struct Journal<'a> {
    base: &'a WorkspaceBase,
}

impl<'a> Journal<'a> {
    /// The journals under `base`'s `sessions/`.
    pub fn new(base: &'a WorkspaceBase) -> Self {
        Journal { base }
    }

    /// Appends one entry to its session's journal (in place, one write).
    /// A read-only base ([`WorkspaceBase::is_read_only`]) writes nothing,
    /// the journal included: the entry is dropped and `Ok(())` returned,
    /// so a read-only run neither writes nor warns that it could not.
    pub async fn append(self, entry: &JournalEntry) -> WsResult<()> {
        if self.base.is_read_only() {
            return Ok(());
        }
        let path = self.base.layout().journal_file(&entry.session)?;
        let mut line = serde_json::to_vec(entry).expect("journal entry serialises");
        line.push(b'\n');
        self.base.append_or_rewrite(&path, &line).await.map(drop)
    }

    /// Reads a session's journal; a missing file is an empty journal.
    pub async fn read(self, session: &str) -> WsResult<JournalRead> {
        let path = self.base.layout().journal_file(session)?;
        let bytes = match self.base.sandbox().read(&path, None).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Ok(JournalRead::default()),
            Err(e) => return Err(e.into()),
        };
        let p = super::jsonl::parse(&bytes);
        Ok(JournalRead {
            entries: p.values,
            bad_lines: p.bad_lines,
            torn: p.torn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_arguments_are_cut_and_the_cut_is_counted() {
        let r = ToolResult::ok("done");
        let call = JournalCall {
            tool: "Write".into(),
            args: json!({"file_path": "/w/f", "content": "é".repeat(50_000)}),
            ..Default::default()
        };
        let e = JournalEntry::from_result(call, &r, Utc::now(), 1);
        let content = e.args["content"].as_str().unwrap();
        assert!(content.len() < ARG_STRING_BYTES + 32, "{}", content.len());
        assert!(content.ends_with(&format!("…[{} bytes cut]", e.args_cut_bytes)));
        assert_eq!(e.args["file_path"], "/w/f");
        assert_eq!(e.args_cut_bytes, 100_000 - 2048);
        // Many strings share one budget.
        let call = JournalCall {
            args: json!({"list": vec!["x".repeat(2000); 10]}),
            ..Default::default()
        };
        let e = JournalEntry::from_result(call, &r, Utc::now(), 1);
        assert_eq!(e.args_cut_bytes, 20_000 - ARGS_TOTAL_BYTES as u64);
        let short = JournalEntry::from_result(JournalCall::default(), &r, Utc::now(), 1);
        assert_eq!(short.args_cut_bytes, 0);
        assert!(!serde_json::to_string(&short).unwrap().contains("args_cut"));
    }
}
