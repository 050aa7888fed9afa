//! The model side of the agent loop: what a model is asked, what it
//! answers, and how it fails. Two implementations: [`super::openai`] (any
//! OpenAI-compatible chat-completions server) and [`super::script`] (a
//! transcript replayed turn by turn).

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::engine::message::Msg;

/// A tool as the model sees it (OpenAI "function" shape).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
    /// Name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

/// One model call: the system prompt, then the conversation in the
/// reference's message format (docs/contract.md §2.4), then the tools.
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// System prompt: agent prompt, `<agent-skills>` block, workspace
    /// instructions (docs/contract.md §1.1, §4.5).
    pub system: String,
    /// The compression summary, sent as a user message right after the
    /// system prompt (as the reference does), if any.
    pub summary: Option<String>,
    /// The conversation.
    pub messages: Vec<Msg>,
    /// Tools offered.
    pub tools: Vec<ToolSchema>,
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelDelta {
    /// More answer text.
    Text(String),
    /// A tool call began (`index` orders the calls of one turn).
    ToolCallStart {
        /// Position of the call in the turn.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallArgs {
        /// Position of the call in the turn.
        index: usize,
        /// The next characters of the arguments.
        delta: String,
    },
}

/// A tool call as the model made it; `arguments` is the raw JSON text,
/// which may be malformed (the agent checks it, not the model client).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelToolCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as sent (a JSON object when the model behaves).
    pub arguments: String,
}

/// Token usage reported by the server, in the reference's `Usage` shape
/// (agentscope 2.0.11 `message/_base.py`: the four counters a message's
/// `usage` holds, summed over the model calls of one reply).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the server's prompt cache (OpenAI's
    /// `usage.prompt_tokens_details.cached_tokens`; 0 when not reported).
    pub cache_input_tokens: u64,
    /// Prompt tokens written to the prompt cache (Anthropic-style servers;
    /// OpenAI-compatible ones do not report it, so it stays 0 as in the
    /// reference's OpenAI model).
    pub cache_creation_input_tokens: u64,
}

impl std::ops::Add for TokenUsage {
    type Output = TokenUsage;

    /// The four counters added one by one (the reference's
    /// `Msg.append_usage`); saturating, so a hostile server cannot wrap them.
    fn add(self, o: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens.saturating_add(o.input_tokens),
            output_tokens: self.output_tokens.saturating_add(o.output_tokens),
            cache_input_tokens: self.cache_input_tokens.saturating_add(o.cache_input_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_add(o.cache_creation_input_tokens),
        }
    }
}

impl TokenUsage {
    /// Reads a message's `usage` object as written by either side
    /// (missing counters are 0; `None` when `v` is not an object).
    pub fn from_json(v: &serde_json::Value) -> Option<TokenUsage> {
        let u = v.as_object()?;
        let n = |k: &str| u.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        Some(TokenUsage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cache_input_tokens: n("cache_input_tokens"),
            cache_creation_input_tokens: n("cache_creation_input_tokens"),
        })
    }
}

/// One complete model answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelTurn {
    /// Answer text (may be empty when the turn only calls tools).
    pub text: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ModelToolCall>,
    /// Usage, when the server reported it.
    pub usage: Option<TokenUsage>,
    /// The server's finish reason (`stop`, `tool_calls`, `length`, ...).
    pub finish_reason: Option<String>,
}

/// Why a model call failed. The variants map onto the reference's
/// `ErrorType` classification (see [`ModelError::error_type`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// No HTTP answer, or the connection dropped mid-stream.
    #[error("connection to the model failed: {0}")]
    Connection(String),
    /// The server answered with a non-success status.
    #[error("the model server answered HTTP {status}: {message}")]
    Http {
        /// HTTP status code.
        status: u16,
        /// The server's error message (or the start of its body).
        message: String,
    },
    /// The answer could not be understood (bad SSE, bad JSON, an error
    /// object inside the stream).
    #[error("the model's answer could not be read: {0}")]
    Protocol(String),
    /// A scripted run has no turn left, or a script placeholder failed.
    #[error("script: {0}")]
    Script(String),
    /// The call was stopped.
    #[error("stopped")]
    Cancelled,
}

impl ModelError {
    /// The reference's `ErrorInfo.type` for this error (`connection`,
    /// `authentication`, `permission`, `rate_limit`, `invalid_request`,
    /// `upstream`, `internal`, `unknown`).
    pub fn error_type(&self) -> &'static str {
        match self {
            ModelError::Connection(_) => "connection",
            ModelError::Http { status, .. } => match status {
                401 => "authentication",
                403 => "permission",
                429 => "rate_limit",
                400 | 404 | 422 => "invalid_request",
                500..=599 => "upstream",
                _ => "unknown",
            },
            ModelError::Protocol(_) => "upstream",
            ModelError::Script(_) => "internal",
            ModelError::Cancelled => "unknown",
        }
    }
}

/// Receives streamed pieces of an answer while it arrives.
pub type DeltaSink<'a> = &'a (dyn Fn(ModelDelta) + Send + Sync);

/// A chat model.
#[async_trait]
pub trait Model: Send + Sync {
    /// Model name, for events and the journal.
    fn name(&self) -> &str;

    /// Runs one turn, streaming pieces to `on_delta` as they arrive, and
    /// returns the whole answer. Must return [`ModelError::Cancelled`]
    /// promptly when `cancel` fires.
    async fn turn(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ModelTurn, ModelError>;

    /// Writes a structured compression summary of `request.messages`
    /// following `schema` (an object schema whose properties are the
    /// summary fields; docs/contract.md §6, the reference's `SummarySchema`).
    async fn summarize(
        &self,
        request: &ModelRequest,
        schema: &Value,
        cancel: &CancellationToken,
    ) -> Result<Map<String, Value>, ModelError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_statuses_map_to_reference_error_types() {
        let e = |status| ModelError::Http {
            status,
            message: String::new(),
        };
        assert_eq!(e(401).error_type(), "authentication");
        assert_eq!(e(429).error_type(), "rate_limit");
        assert_eq!(e(503).error_type(), "upstream");
        assert_eq!(
            ModelError::Connection("x".into()).error_type(),
            "connection"
        );
    }
}
