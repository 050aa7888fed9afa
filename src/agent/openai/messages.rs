//! The conversation in the chat-completions format: the assistant message
//! of a reply holds text, tool calls and tool results in order
//! (docs/contract.md §2.4), which becomes assistant messages with
//! `tool_calls` each followed by one `tool` message per result.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::agent::model::ModelRequest;
use crate::engine::message::{Block, DataSource, Msg, ToolOutput};

/// Builds the chat-completions `messages` array for a request.
///
/// A tool result recorded in a later message than its call (the reference
/// may write the call and its result in two messages) is paired with the
/// call: its `tool` message follows the call's assistant message, as the
/// API requires, and is not repeated where the result was recorded. Only a
/// call with no result anywhere after it gets "(no result was recorded)".
pub fn to_openai_messages(request: &ModelRequest) -> Vec<Value> {
    let mut c = Converter {
        messages: &request.messages,
        out: Vec::new(),
        text: String::new(),
        calls: Vec::new(),
        outstanding: Vec::new(),
        results: HashMap::new(),
        sent: HashSet::new(),
        pos: (0, 0),
    };
    for (i, m) in request.messages.iter().enumerate() {
        for (j, b) in m.content.iter().enumerate() {
            if let Block::ToolResult(r) = b {
                c.results.entry(r.id.clone()).or_default().push((i, j));
            }
        }
    }
    c.out
        .push(json!({"role": "system", "content": request.system}));
    if let Some(s) = &request.summary {
        c.out.push(json!({"role": "user", "content": s}));
    }
    for (i, m) in request.messages.iter().enumerate() {
        c.message(i, m);
    }
    c.out
}

/// Where a block is: (message index, block index) in the request.
type Pos = (usize, usize);

struct Converter<'a> {
    messages: &'a [Msg],
    out: Vec<Value>,
    text: String,
    calls: Vec<Value>,
    outstanding: Vec<String>,
    /// Every tool result of the request by call id, in order.
    results: HashMap<String, Vec<Pos>>,
    /// Results already sent right after their call, skipped where they
    /// were recorded.
    sent: HashSet<Pos>,
    /// The block being converted.
    pos: Pos,
}

fn hint_text(h: &Map<String, Value>) -> String {
    match h.get("hint") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn data_note(name: Option<&str>, source: &DataSource) -> String {
    match source {
        DataSource::Url { url, media_type } => {
            format!("[{media_type} {} at {url}]", name.unwrap_or(""))
        }
        DataSource::Base64 { media_type, .. } => {
            format!("[{media_type} {} attached]", name.unwrap_or(""))
        }
    }
}

fn image_part(source: &DataSource) -> Option<Value> {
    match source {
        DataSource::Base64 { data, media_type } if media_type.starts_with("image/") => Some(
            json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}}),
        ),
        DataSource::Url { url, media_type }
            if media_type.starts_with("image/")
                && (url.starts_with("http://") || url.starts_with("https://")) =>
        {
            Some(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        _ => None,
    }
}

fn result_text(out: &ToolOutput) -> String {
    match out {
        ToolOutput::Text(t) => t.clone(),
        ToolOutput::Blocks(bs) => bs
            .iter()
            .map(|b| match b {
                Block::Text(t) => t.text.clone(),
                Block::Data(d) => data_note(d.name.as_deref(), &d.source),
                _ => String::new(),
            })
            .collect(),
    }
}

impl Converter<'_> {
    /// Answers the calls still without a result: with the first unsent
    /// result for the same id recorded after the current block (in this
    /// message or a later one), else with a note that none was recorded.
    fn close_outstanding(&mut self) {
        for id in std::mem::take(&mut self.outstanding) {
            let later = self.results.get(&id).and_then(|ps| {
                ps.iter()
                    .copied()
                    .find(|p| *p >= self.pos && !self.sent.contains(p))
            });
            let content = match later {
                Some((i, j)) => match &self.messages[i].content[j] {
                    Block::ToolResult(r) => {
                        self.sent.insert((i, j));
                        result_text(&r.output)
                    }
                    _ => unreachable!("results holds positions of tool results"),
                },
                None => "(no result was recorded for this call)".into(),
            };
            self.out
                .push(json!({"role": "tool", "tool_call_id": id, "content": content}));
        }
    }

    fn push_other(&mut self, v: Value) {
        self.flush_draft();
        self.close_outstanding();
        self.out.push(v);
    }

    fn flush_draft(&mut self) {
        if self.text.is_empty() && self.calls.is_empty() {
            return;
        }
        self.close_outstanding();
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert(
            "content".into(),
            if self.text.is_empty() {
                Value::Null
            } else {
                Value::String(std::mem::take(&mut self.text))
            },
        );
        if !self.calls.is_empty() {
            let calls = std::mem::take(&mut self.calls);
            self.outstanding = calls
                .iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str).map(String::from))
                .collect();
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        self.out.push(Value::Object(m));
    }

    fn message(&mut self, i: usize, m: &Msg) {
        match m.role.as_str() {
            "assistant" => {
                for (j, b) in m.content.iter().enumerate() {
                    self.pos = (i, j);
                    match b {
                        Block::Text(t) => {
                            if !self.calls.is_empty() {
                                self.flush_draft();
                            }
                            if !self.text.is_empty() {
                                self.text.push('\n');
                            }
                            self.text.push_str(&t.text);
                        }
                        Block::ToolCall(c) => {
                            let args = match &c.input {
                                Value::String(s) => s.clone(),
                                Value::Null => "{}".into(),
                                other => other.to_string(),
                            };
                            self.calls.push(json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": args},
                            }));
                        }
                        Block::ToolResult(r) => {
                            self.flush_draft();
                            if self.sent.contains(&self.pos) {
                                // Sent right after its call already.
                                continue;
                            }
                            if let Some(pos) = self.outstanding.iter().position(|id| *id == r.id) {
                                self.outstanding.remove(pos);
                                self.sent.insert(self.pos);
                                self.out.push(json!({
                                    "role": "tool",
                                    "tool_call_id": r.id,
                                    "content": result_text(&r.output),
                                }));
                            } else {
                                let text = format!(
                                    "Result of tool {} (call {}):\n{}",
                                    r.name,
                                    r.id,
                                    result_text(&r.output)
                                );
                                self.push_other(json!({"role": "user", "content": text}));
                            }
                        }
                        Block::Hint(h) => {
                            self.push_other(json!({"role": "user", "content": hint_text(h)}))
                        }
                        Block::Data(d) => {
                            let note = data_note(d.name.as_deref(), &d.source);
                            if !self.text.is_empty() {
                                self.text.push('\n');
                            }
                            self.text.push_str(&note);
                        }
                        Block::Thinking(_) => {}
                    }
                }
                // Past this message: a result still to come is in a later one.
                self.pos = (i, m.content.len());
                self.flush_draft();
                self.close_outstanding();
            }
            role => {
                let role = if role == "system" { "system" } else { "user" };
                let mut parts: Vec<Value> = Vec::new();
                let mut only_text = true;
                let mut skipped = false;
                for (j, b) in m.content.iter().enumerate() {
                    self.pos = (i, j);
                    match b {
                        Block::Text(t) => parts.push(json!({"type": "text", "text": t.text})),
                        Block::Hint(h) => parts.push(json!({"type": "text", "text": hint_text(h)})),
                        Block::Data(d) => match image_part(&d.source) {
                            Some(p) if role == "user" => {
                                only_text = false;
                                parts.push(p);
                            }
                            _ => parts.push(
                                json!({"type": "text", "text": data_note(d.name.as_deref(), &d.source)}),
                            ),
                        },
                        Block::ToolResult(_) if self.sent.contains(&self.pos) => skipped = true,
                        Block::ToolResult(r) => parts.push(json!({"type": "text", "text": result_text(&r.output)})),
                        Block::ToolCall(_) | Block::Thinking(_) => {}
                    }
                }
                if skipped && parts.is_empty() {
                    // Only results already sent after their calls.
                    return;
                }
                let content = if only_text {
                    Value::String(
                        parts
                            .iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    )
                } else {
                    Value::Array(parts)
                };
                self.push_other(json!({"role": role, "content": content}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::{TextBlock, ToolCallBlock, ToolResultBlock};

    fn call(id: &str) -> Block {
        Block::ToolCall(ToolCallBlock {
            id: id.into(),
            name: "Glob".into(),
            input: Value::String("{\"pattern\":\"*\"}".into()),
            state: Value::String("finished".into()),
            suggested_rules: Vec::new(),
            extra: Map::new(),
        })
    }

    fn result(id: &str) -> Block {
        Block::ToolResult(ToolResultBlock {
            id: id.into(),
            name: "Glob".into(),
            output: ToolOutput::Text("a.rs".into()),
            state: "success".into(),
            metadata: Value::Null,
            extra: Map::new(),
        })
    }

    #[test]
    fn a_reply_becomes_assistant_and_tool_messages_in_order() {
        let user = Msg::text("user", "user", "hi");
        let mut reply = Msg::text("agent", "assistant", "looking");
        reply
            .content
            .extend([call("c1"), call("c2"), result("c1"), result("c2")]);
        reply.content.push(Block::Text(TextBlock::new("more")));
        reply.content.extend([call("c3")]); // interrupted: no result
        let req = ModelRequest {
            system: "sys".into(),
            summary: Some("sum".into()),
            messages: vec![user, reply],
            tools: Vec::new(),
        };
        let m = to_openai_messages(&req);
        let roles: Vec<&str> = m.iter().map(|v| v["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
                "tool"
            ]
        );
        assert_eq!(m[3]["tool_calls"].as_array().unwrap().len(), 2);
        assert_eq!(m[4]["tool_call_id"], "c1");
        assert_eq!(m[7]["tool_call_id"], "c3");
    }

    fn request(messages: Vec<Msg>) -> ModelRequest {
        ModelRequest {
            system: "sys".into(),
            summary: None,
            messages,
            tools: Vec::new(),
        }
    }

    fn summary(m: &[Value]) -> Vec<String> {
        m.iter()
            .map(|v| match v["role"].as_str().unwrap() {
                "tool" => format!(
                    "tool {}: {}",
                    v["tool_call_id"].as_str().unwrap(),
                    v["content"].as_str().unwrap()
                ),
                "assistant" => format!(
                    "assistant {} calls",
                    v["tool_calls"].as_array().map_or(0, Vec::len)
                ),
                role => format!("{role}: {}", v["content"].as_str().unwrap_or("[parts]")),
            })
            .collect()
    }

    /// Issue 23 point 8: the reference wrote the calls in one message and
    /// their results in the next (`tests/fixtures/reference-lines/`); each
    /// result answers its call, none is "(no result was recorded)", and
    /// none is repeated where it was recorded.
    #[test]
    fn a_result_in_a_later_message_answers_its_call() {
        let text = include_str!("../../../tests/fixtures/reference-lines/tool-call.jsonl");
        let msgs: Vec<Msg> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let m = to_openai_messages(&request(msgs));
        assert_eq!(
            summary(&m),
            [
                "system: sys",
                "assistant 2 calls",
                "tool call-1: src/main.rs",
                "tool call-2: Cargo.toml\nsrc",
            ]
        );
    }

    /// A user message between a call and its later result: the result
    /// still follows the call (the API wants the `tool` messages right
    /// after the assistant's), the user's text keeps its place; a call
    /// answered nowhere after it keeps the note, and a result before its
    /// call is not taken for it.
    #[test]
    fn pairing_across_messages_keeps_order_and_notes_what_is_missing() {
        let mut a = Msg::text("agent", "assistant", "first");
        a.content.extend([call("c1"), call("c2")]);
        let user = Msg::text("user", "user", "meanwhile");
        let mut b = Msg::text("agent", "assistant", "later");
        b.content.insert(0, result("c1"));
        let mut c = Msg::text("agent", "assistant", "again");
        c.content.extend([call("c0")]);
        let mut early = Msg::text("agent", "assistant", "early");
        early.content.push(result("c0"));
        let m = to_openai_messages(&request(vec![early, a, user, b, c]));
        assert_eq!(
            summary(&m),
            [
                "system: sys",
                "assistant 0 calls",
                "user: Result of tool Glob (call c0):\na.rs",
                "assistant 2 calls",
                "tool c1: a.rs",
                "tool c2: (no result was recorded for this call)",
                "user: meanwhile",
                "assistant 0 calls",
                "assistant 1 calls",
                "tool c0: (no result was recorded for this call)",
            ]
        );
    }
}
