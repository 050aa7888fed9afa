//! The reference's message format: what `context.jsonl` holds, one compact
//! JSON `Msg` per line (docs/contract.md §2.4).
//!
//! Field order follows the reference so that what wsbench writes matches
//! what it reads; fields wsbench does not know are kept in `extra` and
//! written back unchanged.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    /// Speaker name (`user`, the agent's name, `system`).
    pub name: String,
    /// Content blocks (a bare string in the input is read as one text block).
    #[serde(deserialize_with = "content_de")]
    pub content: Vec<Block>,
    /// `user`, `assistant` or `system`.
    pub role: String,
    /// Message id (32 hex).
    pub id: String,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: Value,
    /// Naive local ISO timestamp, as the reference writes it.
    pub created_at: String,
    /// Token usage.
    #[serde(default)]
    pub usage: Value,
    /// When the message finished.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// Why it finished.
    #[serde(default)]
    pub finished_reason: Value,
    /// Structured output.
    #[serde(default)]
    pub structured_output: Value,
    /// Error.
    #[serde(default)]
    pub error: Value,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn content_de<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Block>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum C {
        Text(String),
        Blocks(Vec<Block>),
    }
    Ok(match C::deserialize(d)? {
        C::Text(t) => vec![Block::Text(TextBlock::new(t))],
        C::Blocks(b) => b,
    })
}

/// Source of a data block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DataSource {
    /// Inline base64 payload.
    Base64 {
        /// Base64 text.
        data: String,
        /// MIME type.
        media_type: String,
    },
    /// A URL (`workspace:///data/...` after offloading).
    Url {
        /// The URL.
        url: String,
        /// MIME type.
        media_type: String,
    },
}

impl DataSource {
    /// The media type.
    pub fn media_type(&self) -> &str {
        match self {
            DataSource::Base64 { media_type, .. } | DataSource::Url { media_type, .. } => {
                media_type
            }
        }
    }
}

/// A text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Block id.
    #[serde(default)]
    pub id: String,
    /// Creation time.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Finish time.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TextBlock {
    /// A new text block with a fresh id and timestamp.
    pub fn new(text: impl Into<String>) -> Self {
        TextBlock {
            text: text.into(),
            id: new_id(),
            created_at: Some(now_naive()),
            finished_at: None,
            extra: Map::new(),
        }
    }
}

/// A data block (image, audio, file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataBlock {
    /// Block id.
    #[serde(default)]
    pub id: String,
    /// Payload or URL.
    pub source: DataSource,
    /// File name.
    #[serde(default)]
    pub name: Option<String>,
    /// Creation time.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Finish time.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Output of a tool result: a string or a list of text/data blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolOutput {
    /// Plain text.
    Text(String),
    /// Blocks.
    Blocks(Vec<Block>),
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallBlock {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON string.
    #[serde(default)]
    pub input: Value,
    /// State.
    #[serde(default)]
    pub state: Value,
    /// Permission rules suggested when the call asked the user (the
    /// reference's `PermissionRule` objects, kept as-is). Always written,
    /// `[]` when none, as the reference's `ToolCallBlock` writes it
    /// (agentscope 2.0.11 message/_block.py, issue 23 point 8); a line
    /// without it reads as `[]`.
    #[serde(default)]
    pub suggested_rules: Vec<Value>,
    /// Unknown fields (including timestamps).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// Call id this answers.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Output.
    pub output: ToolOutput,
    /// `success`, `error`, `interrupted`, `denied`, `running`.
    #[serde(default)]
    pub state: String,
    /// Metadata.
    #[serde(default)]
    pub metadata: Value,
    /// Unknown fields (including timestamps).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A content block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text(TextBlock),
    /// Model reasoning (kept as-is).
    Thinking(Map<String, Value>),
    /// A hint: `hint` is a string or a list of text/data blocks.
    Hint(Map<String, Value>),
    /// A tool call.
    ToolCall(ToolCallBlock),
    /// A tool result.
    ToolResult(ToolResultBlock),
    /// Binary data.
    Data(DataBlock),
}

impl Block {
    /// Text of a text block (or of a thinking block's `thinking`).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text(t) => Some(&t.text),
            Block::Thinking(m) => m.get("thinking").and_then(Value::as_str),
            _ => None,
        }
    }
}

/// A fresh 32-hex id, as the reference mints them.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The current time as a naive local ISO timestamp with microseconds
/// (`2026-11-29T07:35:18.480082`), the reference's `created_at` format.
pub fn now_naive() -> String {
    chrono::Local::now()
        .naive_local()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

impl Msg {
    /// A new message with one text block.
    pub fn text(name: &str, role: &str, text: impl Into<String>) -> Self {
        Msg {
            name: name.to_string(),
            content: vec![Block::Text(TextBlock::new(text))],
            role: role.to_string(),
            id: new_id(),
            metadata: Value::Object(Map::new()),
            created_at: now_naive(),
            usage: Value::Null,
            finished_at: None,
            finished_reason: Value::Null,
            structured_output: Value::Null,
            error: Value::Null,
            extra: Map::new(),
        }
    }

    /// Concatenated text of the text blocks.
    pub fn text_content(&self) -> String {
        self.content
            .iter()
            .filter_map(Block::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/reference-workspace/sessions/s-001/context.jsonl"
    );

    #[test]
    fn fixture_lines_round_trip_byte_for_byte() {
        // The fixture is vendored in the repository: missing is a failure.
        let text = std::fs::read_to_string(FIXTURE)
            .unwrap_or_else(|e| panic!("reading the fixture {FIXTURE}: {e}"));
        for line in text.lines() {
            let msg: Msg = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&msg).unwrap(), line);
        }
    }

    /// Lines the reference wrote with tool calls and results
    /// (`tests/fixtures/reference-lines/tool-call.jsonl`, made by `make.py`
    /// beside it) round-trip byte for byte, suggested rules included.
    #[test]
    fn reference_tool_call_lines_round_trip_byte_for_byte() {
        let text = include_str!("../../tests/fixtures/reference-lines/tool-call.jsonl");
        assert_eq!(text.lines().count(), 2);
        for line in text.lines() {
            let msg: Msg = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&msg).unwrap(), line);
        }
    }

    /// A tool call wsbench makes is written as the reference writes one:
    /// `"suggested_rules":[]` after `state`, before the timestamps (issue
    /// 23 point 8); a line without the key reads as no rules and is
    /// written with `[]`.
    #[test]
    fn a_wsbench_tool_call_writes_suggested_rules_as_the_reference() {
        let text = include_str!("../../tests/fixtures/reference-lines/tool-call.jsonl");
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let theirs = serde_json::to_string(&first["content"][1]).unwrap();
        let mut extra = Map::new();
        extra.insert("created_at".into(), "2026-12-06T04:00:00.000001".into());
        extra.insert("finished_at".into(), "2026-12-06T04:00:01.000002".into());
        let ours = Block::ToolCall(ToolCallBlock {
            id: "call-1".into(),
            name: "Glob".into(),
            input: Value::String(r#"{"pattern": "*.rs"}"#.into()),
            state: Value::String("finished".into()),
            suggested_rules: Vec::new(),
            extra,
        });
        assert_eq!(serde_json::to_string(&ours).unwrap(), theirs);

        let without = theirs.replace(r#""suggested_rules":[],"#, "");
        assert_ne!(without, theirs);
        let read: Block = serde_json::from_str(&without).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), theirs);
    }

    #[test]
    fn string_content_becomes_a_text_block() {
        let m: Msg = serde_json::from_str(
            r#"{"name":"u","content":"hi","role":"user","id":"1","created_at":"t"}"#,
        )
        .unwrap();
        assert_eq!(m.text_content(), "hi");
    }
}
