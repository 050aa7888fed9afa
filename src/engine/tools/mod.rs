//! Built-in tools: Bash, Read, Write, Edit, Glob, Grep (docs/contract.md §3).
//!
//! Each tool has the reference's name, parameters, defaults and limits, and a
//! JSON schema for model function calling. Tools never return a Rust error:
//! bad input and failures become a [`ToolResult`] in state
//! [`ToolState::Error`] with a message a model (or a person) can act on.

pub mod bash;
mod bash_shell;
pub mod diff;
pub mod edit;
pub mod env;
pub mod filelock;
pub mod glob;
pub mod grep;
pub mod read;
pub mod spool;
pub mod textfile;
pub mod walk;
pub mod write;

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::message::{Block, TextBlock, ToolOutput, ToolResultBlock};

pub use env::{OffloadSink, ToolEnv};

use super::shell_session::InputMsg;

/// Limits of the built-in tools; defaults are the reference's (docs/contract.md §10).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolLimits {
    /// Bash: characters of output kept for the model (30000).
    pub bash_max_output_chars: usize,
    /// Bash: timeout when the call gives none, in ms (120000).
    pub bash_default_timeout_ms: u64,
    /// Bash: largest timeout a call may ask for, in ms (600000).
    pub bash_max_timeout_ms: u64,
    /// Read: lines returned when no limit is given (2000).
    pub read_max_lines: usize,
    /// Read: characters per line before `[truncated]` (2000).
    pub read_max_line_chars: usize,
    /// Read: largest file read as text, in bytes (files above are read by
    /// range only, never whole). 256 MiB.
    pub read_max_bytes: u64,
    /// Glob/Grep: results when `head_limit` is unset (250).
    pub search_default_limit: usize,
    /// Glob/Grep: wall-clock budget in ms (30000).
    pub search_timeout_ms: u64,
    /// Grep: characters of a matched line shown (500).
    pub grep_max_columns: usize,
    /// Bash: most bytes of output, stdout and stderr together, kept in a
    /// tool-result file (64 MiB); a stream cut to its share keeps its
    /// first and last bytes with a line saying how many bytes were
    /// skipped (see `tools::spool`). A
    /// profile's `tool_result_max_bytes` wins.
    pub tool_result_max_bytes: u64,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            bash_max_output_chars: 30_000,
            bash_default_timeout_ms: 120_000,
            bash_max_timeout_ms: 600_000,
            read_max_lines: 2000,
            read_max_line_chars: 2000,
            read_max_bytes: 256 * 1024 * 1024,
            search_default_limit: 250,
            search_timeout_ms: 30_000,
            grep_max_columns: 500,
            tool_result_max_bytes: spool::DEFAULT_TOOL_RESULT_MAX_BYTES,
        }
    }
}

impl ToolLimits {
    /// Checks the values make sense together. Errors name the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("bash_max_output_chars", self.bash_max_output_chars as u64),
            ("bash_default_timeout_ms", self.bash_default_timeout_ms),
            ("bash_max_timeout_ms", self.bash_max_timeout_ms),
            ("read_max_lines", self.read_max_lines as u64),
            ("read_max_line_chars", self.read_max_line_chars as u64),
            ("read_max_bytes", self.read_max_bytes),
            ("search_default_limit", self.search_default_limit as u64),
            ("search_timeout_ms", self.search_timeout_ms),
            ("grep_max_columns", self.grep_max_columns as u64),
            ("tool_result_max_bytes", self.tool_result_max_bytes),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err((key, "must be at least 1".into()));
            }
        }
        if self.bash_default_timeout_ms > self.bash_max_timeout_ms {
            return Err((
                "bash_default_timeout_ms",
                format!(
                    "{} is more than bash_max_timeout_ms ({})",
                    self.bash_default_timeout_ms, self.bash_max_timeout_ms
                ),
            ));
        }
        Ok(())
    }
}

/// Outcome state of a tool call (the reference's block states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolState {
    /// The tool did its job.
    Success,
    /// The call failed; the text says why.
    Error,
    /// Cancelled before it finished.
    Interrupted,
}

impl ToolState {
    /// Lower-case name, as in context.jsonl.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolState::Success => "success",
            ToolState::Error => "error",
            ToolState::Interrupted => "interrupted",
        }
    }
}

/// What a tool call returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    /// Success, error or interrupted.
    pub state: ToolState,
    /// Text and data blocks for the model (text blocks are concatenated by
    /// [`ToolResult::text`]).
    pub content: Vec<Block>,
    /// Tool-specific metadata (`diff`, `file_path`, `occurrences`, ...).
    pub metadata: Map<String, Value>,
    /// Bash: the command's exit code.
    pub exit_code: Option<i32>,
    /// Bash: the timeout fired and the process tree was killed.
    pub timed_out: bool,
    /// Backend path of an offloaded full output, if any.
    pub offload_path: Option<String>,
    /// Size of the full output in bytes (before truncation).
    pub output_bytes: u64,
}

impl ToolResult {
    /// A successful text result.
    pub fn ok(text: impl Into<String>) -> Self {
        let text = text.into();
        let n = text.len() as u64;
        ToolResult {
            state: ToolState::Success,
            content: vec![Block::Text(TextBlock::new(text))],
            metadata: Map::new(),
            exit_code: None,
            timed_out: false,
            offload_path: None,
            output_bytes: n,
        }
    }

    /// An error result with a message.
    pub fn error(text: impl Into<String>) -> Self {
        ToolResult {
            state: ToolState::Error,
            ..Self::ok(text)
        }
    }

    /// A result for a call stopped by its cancel token, with a message
    /// saying what was (or was not) done.
    pub fn interrupted(text: impl Into<String>) -> Self {
        ToolResult {
            state: ToolState::Interrupted,
            ..Self::ok(text)
        }
    }

    /// Adds a metadata entry.
    pub fn with_meta(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.to_string(), value.into());
        self
    }

    /// Concatenated text of the text blocks.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// True when state is success.
    pub fn is_success(&self) -> bool {
        self.state == ToolState::Success
    }

    /// The result as a reference `tool_result` block.
    pub fn to_block(&self, call_id: &str, tool: &str) -> ToolResultBlock {
        let output = match self.content.as_slice() {
            [Block::Text(t)] => ToolOutput::Text(t.text.clone()),
            blocks => ToolOutput::Blocks(blocks.to_vec()),
        };
        ToolResultBlock {
            id: call_id.to_string(),
            name: tool.to_string(),
            output,
            state: self.state.as_str().to_string(),
            metadata: Value::Object(self.metadata.clone()),
            extra: Map::new(),
        }
    }
}

/// Everything a tool call may use.
pub struct ToolContext<'a> {
    /// What the call may touch (sandbox, layout, limits, events, offload).
    pub env: ToolEnv<'a>,
    /// Agent id (`""` for none).
    pub agent: &'a str,
    /// Session id.
    pub session: &'a str,
    /// Call id (names offloaded tool-result files).
    pub call_id: &'a str,
    /// Cancelled when the caller stops the call.
    pub cancel: CancellationToken,
    /// Lossless stream of raw command output for callers that print it
    /// live (the CLI's `exec`); the event bus also carries it, lossily.
    pub output: Option<crate::backend::OutputSink>,
    /// How the Bash tool runs this call (shell, input).
    pub bash: BashOptions,
}

/// How the Bash tool runs one call, beyond its arguments: which shell and
/// where the command's stdin comes from. The default follows the config
/// and closes stdin.
#[derive(Debug, Default)]
pub struct BashOptions {
    /// `None`: as [`ToolEnv::bash_session`]; `Some(b)`: the caller's choice.
    pub session_shell: Option<bool>,
    input: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<InputMsg>>>,
    ended: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<ProcessEnded>>>,
}

/// The command of a Bash call has ended and its process tree is gone;
/// sent before the tool writes its tool-result file, so a front end can
/// show a kill at once (issue 16). Every output chunk was sent to the
/// call's output sink before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEnded {
    /// Exit code (`None` if unknown).
    pub exit_code: Option<i32>,
    /// The timeout fired.
    pub timed_out: bool,
    /// The call was cancelled.
    pub cancelled: bool,
}

impl BashOptions {
    /// Options with a shell choice and an input channel.
    pub fn new(
        session_shell: Option<bool>,
        input: Option<tokio::sync::mpsc::Receiver<InputMsg>>,
    ) -> Self {
        BashOptions {
            session_shell,
            input: std::sync::Mutex::new(input),
            ended: std::sync::Mutex::new(None),
        }
    }

    /// These options telling `ended` when the command's processes are
    /// gone ([`ProcessEnded`]).
    pub fn with_ended(self, ended: Option<tokio::sync::oneshot::Sender<ProcessEnded>>) -> Self {
        *self.ended.lock().expect("ended lock") = ended;
        self
    }

    /// Says the command ended (once; later calls do nothing).
    pub fn send_ended(&self, end: ProcessEnded) {
        if let Some(tx) = self.ended.lock().expect("ended lock").take() {
            let _ = tx.send(end);
        }
    }

    /// Takes the input channel (once).
    pub fn take_input(&self) -> Option<tokio::sync::mpsc::Receiver<InputMsg>> {
        self.input.lock().expect("input lock").take()
    }
}

/// One built-in tool.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name the model calls it by (`Bash`, `Read`, ...).
    fn name(&self) -> &'static str;
    /// Description for the model.
    fn description(&self) -> &'static str;
    /// JSON schema of the arguments object.
    fn input_schema(&self) -> Value;
    /// True for tools that never change anything (Read, Glob, Grep).
    fn read_only(&self) -> bool;
    /// Runs the tool. Never panics on bad input; returns an error result.
    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult;
}

/// Name, description and schema of a tool, for listing and function calling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON schema of the arguments.
    pub input_schema: Value,
    /// Read-only and concurrency-safe.
    pub read_only: bool,
}

/// The six built-in tools, in the reference's order; `bash_session` is
/// `[tools] bash_session` (it changes the Bash tool's description).
pub fn builtin_tools(bash_session: bool) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(bash::Bash {
            session: bash_session,
        }),
        Arc::new(read::Read),
        Arc::new(write::Write),
        Arc::new(edit::Edit),
        Arc::new(glob::Glob),
        Arc::new(grep::Grep),
    ]
}

/// Typed argument parsing with reference-style error text. The error is
/// the ready-made result the tool returns, so its size does not matter.
#[allow(clippy::result_large_err)]
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: Value,
) -> Result<T, ToolResult> {
    serde_json::from_value(args)
        .map_err(|e| ToolResult::error(format!("Invalid arguments for {tool}: {e}")))
}
