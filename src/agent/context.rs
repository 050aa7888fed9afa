//! The reference's context policies (docs/contract.md §6), with its defaults:
//! tool results over `tool_result_limit` are split and the overflow
//! offloaded; past `trigger_ratio` of the model window the oldest messages
//! are compressed into a summary; images past `max_image_num` go to
//! `data/`. This module holds the pure parts (token estimates and where to
//! split); the agent loop does the I/O.
//!
//! Token counts are estimates: characters / [`ContextPolicy::chars_per_token`]
//! (default 4, the usual rule of thumb for English text and code with BPE
//! tokenizers), rounded up, plus [`MESSAGE_OVERHEAD_TOKENS`] per message
//! and [`IMAGE_TOKENS`] per image. Tool schemas count as their JSON text.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::engine::message::{Block, Msg, TextBlock, ToolOutput, ToolResultBlock};

/// Tokens counted for each message's role and framing.
pub const MESSAGE_OVERHEAD_TOKENS: usize = 4;
/// Tokens counted per image: OpenAI's cost of a 1024×1024 image at high
/// detail (765), a middle-of-the-road figure for vision models.
pub const IMAGE_TOKENS: usize = 765;
/// Marker that ends the kept part of a split tool result (the reference's).
pub const TRUNCATED_MARKER: &str = "<<<TRUNCATED>>>";

/// The reference's default compression prompt (`ContextConfig`).
pub const DEFAULT_COMPRESSION_PROMPT: &str = "<system-hint>You have been working on the task described above but have not yet completed it. Now write a continuation summary that will allow you to resume work efficiently in a future context window where the conversation history will be replaced with this summary. Your summary should be structured, concise, and actionable.</system-hint>";

/// The reference's default summary template; `{field}` placeholders are
/// the properties of [`summary_schema`].
pub const DEFAULT_SUMMARY_TEMPLATE: &str = "<system-info>Here is a summary of your previous work\n# Task Overview\n{task_overview}\n\n# Current State\n{current_state}\n\n# Important Discoveries\n{important_discoveries}\n\n# Next Steps\n{next_steps}\n\n# Context to Preserve\n{context_to_preserve}</system-info>";

/// Context policies of an agent; defaults are the reference's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextPolicy {
    /// The model's context window in tokens (the reference's
    /// `model.context_size`).
    pub context_window: usize,
    /// Compress when the request passes this share of the window (0.8;
    /// must be in (0, 0.9)).
    pub trigger_ratio: f64,
    /// Keep about this share of the window uncompressed (0.1; in (0, 0.9)).
    pub reserve_ratio: f64,
    /// Largest tool result kept whole, in tokens (50000).
    pub tool_result_limit: usize,
    /// Images kept in the context; older ones go to `data/` (5).
    pub max_image_num: usize,
    /// Characters per token for estimates (4.0).
    pub chars_per_token: f64,
    /// Prompt asking for the compression summary.
    pub compression_prompt: String,
    /// Template the summary fields are filled into.
    pub summary_template: String,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        ContextPolicy {
            context_window: 128_000,
            trigger_ratio: 0.8,
            reserve_ratio: 0.1,
            tool_result_limit: 50_000,
            max_image_num: 5,
            chars_per_token: 4.0,
            compression_prompt: DEFAULT_COMPRESSION_PROMPT.to_string(),
            summary_template: DEFAULT_SUMMARY_TEMPLATE.to_string(),
        }
    }
}

impl ContextPolicy {
    /// Checks the ranges the reference enforces; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let in_open = |v: f64| v > 0.0 && v < 0.9;
        if !in_open(self.trigger_ratio) {
            return Err(format!(
                "trigger_ratio must be above 0 and below 0.9, got {}",
                self.trigger_ratio
            ));
        }
        if !in_open(self.reserve_ratio) {
            return Err(format!(
                "reserve_ratio must be above 0 and below 0.9, got {}",
                self.reserve_ratio
            ));
        }
        if self.reserve_ratio >= self.trigger_ratio {
            return Err(format!(
                "reserve_ratio ({}) must be smaller than trigger_ratio ({})",
                self.reserve_ratio, self.trigger_ratio
            ));
        }
        if self.context_window == 0 {
            return Err("context_window must be at least 1 token".into());
        }
        if self.tool_result_limit == 0 {
            return Err("tool_result_limit must be at least 1 token".into());
        }
        if !(self.chars_per_token.is_finite() && self.chars_per_token > 0.0) {
            return Err(format!(
                "chars_per_token must be a positive number, got {}",
                self.chars_per_token
            ));
        }
        Ok(())
    }

    /// Tokens at which compression starts.
    pub fn trigger_tokens(&self) -> usize {
        (self.trigger_ratio * self.context_window as f64) as usize
    }

    /// Tokens kept uncompressed.
    pub fn reserve_tokens(&self) -> usize {
        (self.reserve_ratio * self.context_window as f64) as usize
    }

    /// The estimator for this policy.
    pub fn counter(&self) -> TokenCounter {
        TokenCounter {
            chars_per_token: self.chars_per_token,
        }
    }

    /// Fills the summary template with `fields`; a missing field becomes
    /// an empty string, a non-string field its JSON text.
    pub fn format_summary(&self, fields: &Map<String, Value>) -> String {
        let mut out = self.summary_template.clone();
        for key in summary_fields() {
            let value = match fields.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            out = out.replace(&format!("{{{key}}}"), &value);
        }
        out
    }
}

/// Names of the summary fields, in the reference's order.
pub fn summary_fields() -> [&'static str; 5] {
    [
        "task_overview",
        "current_state",
        "important_discoveries",
        "next_steps",
        "context_to_preserve",
    ]
}

/// JSON schema of the compression summary (the reference's
/// `SummarySchema`, descriptions in our words).
pub fn summary_schema() -> Value {
    json!({
        "type": "object",
        "title": "SummarySchema",
        "properties": {
            "task_overview": {"type": "string", "description": "The user's core request, its success criteria, and any clarifications or constraints."},
            "current_state": {"type": "string", "description": "What is done so far: files created, changed or analysed (with paths), key outputs."},
            "important_discoveries": {"type": "string", "description": "Constraints found, decisions and why, errors met and how they were solved, approaches that failed."},
            "next_steps": {"type": "string", "description": "What remains to do, blockers and open questions, in priority order."},
            "context_to_preserve": {"type": "string", "description": "User preferences, non-obvious domain details, promises made to the user."}
        },
        "required": summary_fields(),
    })
}

/// Estimates tokens as characters / chars-per-token (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenCounter {
    /// Characters per token.
    pub chars_per_token: f64,
}

impl TokenCounter {
    /// Tokens of a text.
    pub fn text(&self, s: &str) -> usize {
        self.chars(s.chars().count())
    }

    /// Tokens of `n` characters.
    pub fn chars(&self, n: usize) -> usize {
        (n as f64 / self.chars_per_token).ceil() as usize
    }

    /// Characters that fit in `tokens`.
    pub fn chars_for(&self, tokens: usize) -> usize {
        (tokens as f64 * self.chars_per_token).floor() as usize
    }

    /// Tokens of one block.
    pub fn block(&self, b: &Block) -> usize {
        match b {
            Block::Text(t) => self.text(&t.text),
            Block::Thinking(_) => self.text(b.as_text().unwrap_or("")),
            Block::Hint(h) => match h.get("hint") {
                Some(Value::String(s)) => self.text(s),
                Some(v) => self.text(&v.to_string()),
                None => 0,
            },
            Block::ToolCall(c) => {
                let input = c.input.as_str().map(str::len).unwrap_or(0);
                self.text(&c.name) + self.chars(input)
            }
            Block::ToolResult(r) => self.output(&r.output),
            Block::Data(_) => IMAGE_TOKENS,
        }
    }

    /// Tokens of a tool result's output.
    pub fn output(&self, out: &ToolOutput) -> usize {
        match out {
            ToolOutput::Text(t) => self.text(t),
            ToolOutput::Blocks(bs) => bs.iter().map(|b| self.block(b)).sum(),
        }
    }

    /// Tokens of one message.
    pub fn msg(&self, m: &Msg) -> usize {
        MESSAGE_OVERHEAD_TOKENS + m.content.iter().map(|b| self.block(b)).sum::<usize>()
    }

    /// Tokens of messages.
    pub fn msgs(&self, ms: &[Msg]) -> usize {
        ms.iter().map(|m| self.msg(m)).sum()
    }
}

/// A tool result cut at the limit: what stays in the context and what is
/// offloaded.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitToolResult {
    /// The part kept in the context (the whole result when under limit).
    pub kept: ToolResultBlock,
    /// The overflow to offload (same id, name and state), if any.
    pub overflow: Option<ToolResultBlock>,
}

/// Splits a tool result whose output passes `limit` tokens, the way the
/// reference does: whole blocks are kept while they fit, the first text
/// block that does not fit is cut in proportion to the budget left, a
/// non-text block that does not fit goes to the overflow with everything
/// after it.
pub fn split_tool_result(
    block: &ToolResultBlock,
    limit: usize,
    counter: TokenCounter,
) -> SplitToolResult {
    if counter.output(&block.output) <= limit {
        return SplitToolResult {
            kept: block.clone(),
            overflow: None,
        };
    }
    let blocks: Vec<Block> = match &block.output {
        ToolOutput::Text(t) => vec![Block::Text(TextBlock::new(t.clone()))],
        ToolOutput::Blocks(b) => b.clone(),
    };
    let mut used = 0usize;
    let mut boundary = blocks.len();
    for (i, b) in blocks.iter().enumerate() {
        let n = counter.block(b);
        if used + n >= limit {
            boundary = i;
            break;
        }
        used += n;
    }
    let mut kept: Vec<Block> = blocks[..boundary].to_vec();
    let mut overflow: Vec<Block> = Vec::new();
    if let Some(b) = blocks.get(boundary) {
        match b {
            Block::Text(t) => {
                let budget = counter.chars_for(limit.saturating_sub(used));
                let cut = t
                    .text
                    .char_indices()
                    .nth(budget)
                    .map(|(i, _)| i)
                    .unwrap_or(t.text.len());
                let (head, tail) = t.text.split_at(cut);
                if !head.is_empty() {
                    let mut k = t.clone();
                    k.text = head.to_string();
                    kept.push(Block::Text(k));
                }
                if !tail.is_empty() {
                    let mut o = t.clone();
                    o.text = tail.to_string();
                    overflow.push(Block::Text(o));
                }
            }
            other => overflow.push(other.clone()),
        }
        overflow.extend(blocks[boundary + 1..].iter().cloned());
    }
    if overflow.is_empty() {
        return SplitToolResult {
            kept: block.clone(),
            overflow: None,
        };
    }
    let mut kept_block = block.clone();
    kept_block.output = ToolOutput::Blocks(kept);
    let mut overflow_block = block.clone();
    overflow_block.output = ToolOutput::Blocks(overflow);
    overflow_block.metadata = Value::Object(Map::new());
    SplitToolResult {
        kept: kept_block,
        overflow: Some(overflow_block),
    }
}

/// The reminder appended to the kept part of a split tool result; names
/// the file holding the rest when it was offloaded (the reference's text).
pub fn truncation_reminder(path: Option<&str>) -> String {
    let where_ = path
        .map(|p| {
            format!(" You can refer to the file in '{p}' for the truncated content if needed.")
        })
        .unwrap_or_default();
    format!(
        "\n{TRUNCATED_MARKER}\n<system-reminder>The remaining content has been omitted for limited context.{where_}</system-reminder>"
    )
}

/// Appends `text` to the last text block of a tool result, or adds one.
pub fn append_to_output(block: &mut ToolResultBlock, text: &str) {
    match &mut block.output {
        ToolOutput::Text(t) => t.push_str(text),
        ToolOutput::Blocks(bs) => match bs.last_mut() {
            Some(Block::Text(t)) => t.text.push_str(text),
            _ => bs.push(Block::Text(TextBlock::new(text))),
        },
    }
}

/// The reminder appended to the summary after compression (the
/// reference's text).
pub fn compression_reminder(path: &str) -> String {
    format!(
        "\n<system-reminder>The compressed context is offloaded to '{path}', you can refer to it when needed.</system-reminder>"
    )
}

/// Splits the context for compression the way the reference does: walking
/// back from the newest message, keep messages until the kept part
/// (plus `fixed_tokens`: system prompt, summary, tool schemas) reaches
/// `reserve_tokens`; the message at the boundary is split by blocks, never
/// between a tool call and its result. Returns `(to_compress, to_keep)`;
/// `to_compress` is empty when everything fits in the reserve.
pub fn split_for_compression(
    context: &[Msg],
    fixed_tokens: usize,
    reserve_tokens: usize,
    counter: TokenCounter,
) -> (Vec<Msg>, Vec<Msg>) {
    let mut idx: Option<usize> = None;
    let mut tail = fixed_tokens;
    for i in (0..context.len()).rev() {
        tail += counter.msg(&context[i]);
        if tail >= reserve_tokens {
            idx = Some(i);
            break;
        }
    }
    let Some(idx) = idx else {
        return (Vec::new(), context.to_vec());
    };
    let mut compress: Vec<Msg> = context[..idx].to_vec();
    let mut keep: Vec<Msg> = context[idx + 1..].to_vec();
    let boundary = &context[idx];
    let kept_after = fixed_tokens + counter.msgs(&keep) + MESSAGE_OVERHEAD_TOKENS;

    // First block of the boundary message that stays: walk back while the
    // kept blocks fit in the reserve.
    let blocks = &boundary.content;
    let mut first_kept = blocks.len();
    let mut used = kept_after;
    for j in (0..blocks.len()).rev() {
        used += counter.block(&blocks[j]);
        if used > reserve_tokens {
            break;
        }
        first_kept = j;
    }
    // Never keep a tool result whose call is compressed.
    let mut orphans: Vec<(String, usize)> = Vec::new();
    for j in (first_kept..blocks.len()).rev() {
        match &blocks[j] {
            Block::ToolResult(r) => orphans.push((r.id.clone(), j)),
            Block::ToolCall(c) => orphans.retain(|(id, _)| *id != c.id),
            _ => {}
        }
    }
    if let Some(max) = orphans.iter().map(|(_, j)| *j).max() {
        first_kept = max + 1;
    }
    if first_kept > 0 {
        let mut m = boundary.clone();
        m.content = blocks[..first_kept].to_vec();
        compress.push(m);
    }
    if first_kept < blocks.len() {
        let mut m = boundary.clone();
        m.content = blocks[first_kept..].to_vec();
        keep.insert(0, m);
    }
    (compress, keep)
}

/// A summary written without a model, from the messages themselves: used
/// by scripted runs without a scripted summary, and when the model's
/// summary fails.
pub fn mechanical_summary(msgs: &[Msg]) -> Map<String, Value> {
    let first_user = msgs
        .iter()
        .find(|m| m.role == "user")
        .map(|m| m.text_content())
        .unwrap_or_default();
    let mut calls = Vec::new();
    let mut errors = Vec::new();
    for m in msgs {
        for b in &m.content {
            match b {
                Block::ToolCall(c) => {
                    let input = c.input.as_str().unwrap_or("");
                    let short: String = input.chars().take(120).collect();
                    calls.push(format!("- {} {}", c.name, short));
                }
                Block::ToolResult(r) if r.state != "success" => {
                    errors.push(format!(
                        "- {} ({}) ended in state {}",
                        r.name, r.id, r.state
                    ));
                }
                _ => {}
            }
        }
    }
    let last_text = msgs
        .iter()
        .rev()
        .find(|m| m.role == "assistant" && !m.text_content().is_empty())
        .map(|m| m.text_content())
        .unwrap_or_default();
    let mut out = Map::new();
    out.insert("task_overview".into(), Value::String(first_user));
    out.insert(
        "current_state".into(),
        Value::String(if calls.is_empty() {
            "No tool calls yet.".into()
        } else {
            format!("Tool calls made so far:\n{}", calls.join("\n"))
        }),
    );
    out.insert(
        "important_discoveries".into(),
        Value::String(if errors.is_empty() {
            "No tool call failed.".into()
        } else {
            errors.join("\n")
        }),
    );
    out.insert("next_steps".into(), Value::String(last_text));
    out.insert("context_to_preserve".into(), Value::String(String::new()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::ToolCallBlock;

    fn counter() -> TokenCounter {
        ContextPolicy::default().counter()
    }

    fn result(id: &str, text: &str) -> ToolResultBlock {
        ToolResultBlock {
            id: id.into(),
            name: "Read".into(),
            output: ToolOutput::Text(text.into()),
            state: "success".into(),
            metadata: json!({"file_path": "/x"}),
            extra: Map::new(),
        }
    }

    fn call(id: &str) -> Block {
        Block::ToolCall(ToolCallBlock {
            id: id.into(),
            name: "Read".into(),
            input: Value::String("{}".into()),
            state: Value::String("finished".into()),
            suggested_rules: Vec::new(),
            extra: Map::new(),
        })
    }

    #[test]
    fn defaults_are_the_references() {
        let p = ContextPolicy::default();
        assert_eq!(p.tool_result_limit, 50_000);
        assert_eq!(p.trigger_ratio, 0.8);
        assert_eq!(p.reserve_ratio, 0.1);
        assert_eq!(p.max_image_num, 5);
        p.validate().unwrap();
        let bad = ContextPolicy {
            trigger_ratio: 0.95,
            ..ContextPolicy::default()
        };
        assert!(bad.validate().unwrap_err().contains("trigger_ratio"));
    }

    #[test]
    fn a_small_result_is_kept_whole() {
        let r = result("c1", "short");
        let s = split_tool_result(&r, 10, counter());
        assert_eq!(s.kept, r);
        assert!(s.overflow.is_none());
    }

    #[test]
    fn a_large_text_result_is_cut_at_the_limit_on_a_char_boundary() {
        let text = "é".repeat(1000);
        let r = result("c1", &text);
        let s = split_tool_result(&r, 100, counter());
        let overflow = s.overflow.unwrap();
        let kept_text = match &s.kept.output {
            ToolOutput::Blocks(b) => b[0].as_text().unwrap().to_string(),
            _ => panic!(),
        };
        let rest = match &overflow.output {
            ToolOutput::Blocks(b) => b[0].as_text().unwrap().to_string(),
            _ => panic!(),
        };
        assert_eq!(kept_text.chars().count(), 400);
        assert_eq!(format!("{kept_text}{rest}"), text);
        assert_eq!(overflow.id, "c1");
        assert_eq!(overflow.state, "success");
        assert_eq!(s.kept.metadata["file_path"], "/x");
    }

    #[test]
    fn summary_template_is_filled() {
        let p = ContextPolicy::default();
        let mut m = Map::new();
        m.insert("task_overview".into(), json!("do X"));
        let s = p.format_summary(&m);
        assert!(s.starts_with("<system-info>"));
        assert!(s.contains("# Task Overview\ndo X\n"));
        assert!(!s.contains("{next_steps}"));
    }

    #[test]
    fn compression_never_separates_a_call_from_its_result() {
        let c = counter();
        let mut user = Msg::text("user", "user", "go");
        user.content
            .push(Block::Text(TextBlock::new("x".repeat(400))));
        let mut reply = Msg::text("agent", "assistant", "working");
        reply.content.push(call("a"));
        reply
            .content
            .push(Block::ToolResult(result("a", &"r".repeat(400))));
        reply.content.push(call("b"));
        reply
            .content
            .push(Block::ToolResult(result("b", &"s".repeat(400))));
        let ctx = vec![user, reply];
        // The reserve holds call "b" and its result: both stay, the rest
        // of the reply (with "a") is compressed.
        let (compress, keep) = split_for_compression(&ctx, 0, 110, c);
        assert_eq!(compress.len(), 2);
        let kept_blocks = &keep[0].content;
        assert!(matches!(&kept_blocks[0], Block::ToolCall(cb) if cb.id == "b"));
        assert!(matches!(&kept_blocks[1], Block::ToolResult(rb) if rb.id == "b"));
        // Everything fits: nothing to compress.
        let (none, all) = split_for_compression(&ctx, 0, 100_000, c);
        assert!(none.is_empty());
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn an_orphaned_result_moves_the_boundary() {
        let c = counter();
        let mut reply = Msg::text("agent", "assistant", "t");
        reply.content.push(call("a"));
        reply
            .content
            .push(Block::ToolResult(result("a", &"r".repeat(40))));
        // The reserve fits only the result, not its call: the result is
        // compressed with its call rather than kept alone.
        let (compress, keep) = split_for_compression(&[reply], 0, 15, c);
        assert_eq!(compress.len(), 1);
        assert!(keep.is_empty());
    }
}
