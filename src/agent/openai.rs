//! A model behind any OpenAI-compatible chat-completions server (a local
//! llama.cpp, vLLM or Ollama server, or a hosted one): streamed text and
//! tool calls over server-sent events, with a non-streamed JSON answer
//! accepted too.
//!
//! The conversation is converted from the reference's message format: the
//! assistant message of a reply holds text, tool calls and tool results in
//! order (docs/contract.md §2.4), which becomes assistant messages with
//! `tool_calls` each followed by one `tool` message per result. Images go
//! as `image_url` parts (base64 as data URIs); images already offloaded to
//! `workspace:///` are named in text, since the server cannot fetch them.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::model::{
    DeltaSink, Model, ModelDelta, ModelError, ModelRequest, ModelToolCall, ModelTurn, TokenUsage,
};

/// Name of the function the model is asked to call with the compression
/// summary (the reference's structured-output tool).
pub const SUMMARY_FUNCTION: &str = "generate_structured_output";

/// Settings of an OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL (`http://127.0.0.1:8080/v1`) or the full
    /// `.../chat/completions` URL.
    pub url: String,
    /// Model name sent in requests.
    pub model: String,
    /// Bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// Sampling temperature; `None` leaves the server's default.
    pub temperature: Option<f64>,
    /// Limit for establishing the connection.
    pub connect_timeout: Duration,
    /// Longest silence allowed between two pieces of an answer.
    pub idle_timeout: Duration,
}

impl OpenAiConfig {
    /// Defaults: 30 s to connect, 300 s of silence at most.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            url: url.into(),
            model: model.into(),
            api_key: None,
            temperature: None,
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// The chat-completions client.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    client: reqwest::Client,
    endpoint: String,
    config: OpenAiConfig,
}

fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

impl OpenAiModel {
    /// A client for `config`.
    ///
    /// Errors: a URL that is not `http://` or `https://`; an HTTP client
    /// that cannot be built (TLS set-up).
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let url = config.url.trim().trim_end_matches('/').to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ModelError::Protocol(format!(
                "model URL `{}` must start with http:// or https://",
                config.url
            )));
        }
        let endpoint = if url.ends_with("/chat/completions") {
            url
        } else {
            format!("{url}/chat/completions")
        };
        // reqwest is built without a default crypto provider (no C build
        // of aws-lc); ring is installed once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.idle_timeout)
            .build()
            .map_err(|e| {
                ModelError::Protocol(format!("cannot build the HTTP client: {}", describe(&e)))
            })?;
        Ok(OpenAiModel {
            client,
            endpoint,
            config,
        })
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn send(
        &self,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ModelError> {
        let mut rb = self
            .client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).expect("request serialises"));
        if let Some(key) = &self.config.api_key {
            rb = rb.bearer_auth(key);
        }
        let resp = tokio::select! {
            r = rb.send() => r.map_err(|e| ModelError::Connection(format!("{}: {}", self.endpoint, describe(&e))))?,
            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
        };
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = tokio::select! {
            t = resp.text() => t.unwrap_or_default(),
            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
        };
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .or_else(|| v.get("error"))
                    .or_else(|| v.get("message"))
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .unwrap_or_else(|| text.chars().take(500).collect());
        Err(ModelError::Http {
            status: status.as_u16(),
            message: if message.is_empty() {
                status.canonical_reason().unwrap_or("").to_string()
            } else {
                message
            },
        })
    }

    fn base_body(&self, request: &ModelRequest) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.config.model.clone()));
        body.insert("messages".into(), Value::Array(to_openai_messages(request)));
        if let Some(t) = self.config.temperature {
            body.insert("temperature".into(), json!(t));
        }
        body
    }
}

mod messages;
pub use messages::to_openai_messages;

/// Tool calls being assembled from stream deltas, by index.
#[derive(Default)]
struct CallSlots {
    slots: Vec<(usize, ModelToolCall)>,
}

impl CallSlots {
    fn apply(&mut self, d: &Value, on_delta: DeltaSink<'_>) {
        let index = d.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        let f = d.get("function");
        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
        let args = f.and_then(|f| f.get("arguments"));
        let id = d
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let pos = match self.slots.iter().position(|(i, _)| *i == index) {
            Some(p) => {
                if let Some(n) = name
                    && self.slots[p].1.name != n
                {
                    self.slots[p].1.name.push_str(n);
                }
                p
            }
            None => {
                let call = ModelToolCall {
                    id: id.map(String::from).unwrap_or_else(|| {
                        format!("call_{}", &crate::engine::message::new_id()[..12])
                    }),
                    name: name.unwrap_or("").to_string(),
                    arguments: String::new(),
                };
                on_delta(ModelDelta::ToolCallStart {
                    index,
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
                self.slots.push((index, call));
                self.slots.len() - 1
            }
        };
        let piece = match args {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        if !piece.is_empty() {
            self.slots[pos].1.arguments.push_str(&piece);
            on_delta(ModelDelta::ToolCallArgs {
                index,
                delta: piece,
            });
        }
    }

    fn finish(mut self) -> Vec<ModelToolCall> {
        self.slots.sort_by_key(|(i, _)| *i);
        self.slots.into_iter().map(|(_, c)| c).collect()
    }
}

fn usage_of(v: &Value) -> Option<TokenUsage> {
    let u = v.get("usage")?;
    Some(TokenUsage {
        input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: u
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        // As the reference's OpenAI chat model reads it.
        cache_input_tokens: u
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cache_creation_input_tokens: 0,
    })
}

fn stream_error(v: &Value) -> Option<String> {
    let e = v.get("error")?;
    Some(
        e.get("message")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| e.to_string()),
    )
}

/// Reads a whole (non-streamed) completion.
fn parse_completion(v: &Value, on_delta: DeltaSink<'_>) -> Result<ModelTurn, ModelError> {
    if let Some(e) = stream_error(v) {
        return Err(ModelError::Protocol(format!(
            "the server sent an error: {e}"
        )));
    }
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| ModelError::Protocol("the answer has no `choices`".into()))?;
    let msg = choice.get("message").cloned().unwrap_or(Value::Null);
    let text = msg
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !text.is_empty() {
        on_delta(ModelDelta::Text(text.clone()));
    }
    let mut slots = CallSlots::default();
    if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
        for (i, c) in calls.iter().enumerate() {
            let mut c = c.clone();
            if c.get("index").is_none()
                && let Value::Object(o) = &mut c
            {
                o.insert("index".into(), json!(i));
            }
            slots.apply(&c, on_delta);
        }
    }
    Ok(ModelTurn {
        text,
        tool_calls: slots.finish(),
        usage: usage_of(v),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(String::from),
    })
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.config.model
    }

    async fn turn(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ModelTurn, ModelError> {
        let mut body = self.base_body(request);
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        let resp = self.send(&Value::Object(body), cancel).await?;
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !is_sse {
            let bytes = tokio::select! {
                b = resp.bytes() => b.map_err(|e| ModelError::Connection(format!("the connection dropped while reading the answer: {}", describe(&e))))?,
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
            };
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                ModelError::Protocol(format!(
                    "the answer is neither an event stream nor JSON: {e}"
                ))
            })?;
            return parse_completion(&v, on_delta);
        }

        let mut stream = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        let mut turn = ModelTurn::default();
        let mut slots = CallSlots::default();
        let mut done = false;
        'read: loop {
            let chunk = tokio::select! {
                c = stream.next() => c,
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
            };
            match chunk {
                None => break,
                Some(Err(e)) => {
                    return Err(ModelError::Connection(format!(
                        "the connection dropped in the middle of the answer: {}",
                        describe(&e)
                    )));
                }
                Some(Ok(bytes)) => buf.extend(bytes.iter().filter(|b| **b != b'\r')),
            }
            while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = buf.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|l| l.strip_prefix(' ').unwrap_or(l))
                    .collect();
                if data.is_empty() {
                    continue;
                }
                let payload = data.join("\n");
                if payload.trim() == "[DONE]" {
                    done = true;
                    break 'read;
                }
                let v: Value = serde_json::from_str(&payload).map_err(|e| {
                    ModelError::Protocol(format!(
                        "a stream event is not JSON ({e}): {}",
                        payload.chars().take(200).collect::<String>()
                    ))
                })?;
                if let Some(e) = stream_error(&v) {
                    return Err(ModelError::Protocol(format!(
                        "the server sent an error mid-stream: {e}"
                    )));
                }
                if let Some(u) = usage_of(&v) {
                    turn.usage = Some(u);
                }
                let Some(choice) = v.pointer("/choices/0") else {
                    continue;
                };
                if let Some(delta) = choice.get("delta") {
                    if let Some(t) = delta.get("content").and_then(Value::as_str)
                        && !t.is_empty()
                    {
                        turn.text.push_str(t);
                        on_delta(ModelDelta::Text(t.to_string()));
                    }
                    if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                        for c in calls {
                            slots.apply(c, on_delta);
                        }
                    }
                }
                if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                    turn.finish_reason = Some(r.to_string());
                }
            }
        }
        if !done && turn.finish_reason.is_none() {
            return Err(ModelError::Connection(
                "the stream ended before the answer was complete (no finish_reason and no [DONE])"
                    .into(),
            ));
        }
        turn.tool_calls = slots.finish();
        Ok(turn)
    }

    async fn summarize(
        &self,
        request: &ModelRequest,
        schema: &Value,
        cancel: &CancellationToken,
    ) -> Result<Map<String, Value>, ModelError> {
        let mut body = self.base_body(request);
        body.insert("stream".into(), Value::Bool(false));
        body.insert(
            "tools".into(),
            json!([{"type": "function", "function": {
                "name": SUMMARY_FUNCTION,
                "description": "Call this function to write the structured summary asked for.",
                "parameters": schema,
            }}]),
        );
        body.insert(
            "tool_choice".into(),
            json!({"type": "function", "function": {"name": SUMMARY_FUNCTION}}),
        );
        let resp = self.send(&Value::Object(body), cancel).await?;
        let bytes = tokio::select! {
            b = resp.bytes() => b.map_err(|e| ModelError::Connection(describe(&e)))?,
            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
        };
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::Protocol(format!("the summary answer is not JSON: {e}")))?;
        let turn = parse_completion(&v, &|_| {})?;
        let raw = turn
            .tool_calls
            .iter()
            .find(|c| c.name == SUMMARY_FUNCTION)
            .map(|c| c.arguments.clone())
            .unwrap_or_else(|| {
                let t = turn.text.trim();
                let t = t
                    .strip_prefix("```json")
                    .or_else(|| t.strip_prefix("```"))
                    .unwrap_or(t);
                t.strip_suffix("```").unwrap_or(t).trim().to_string()
            });
        match serde_json::from_str::<Value>(&raw) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(ModelError::Protocol(format!(
                "the model did not call {SUMMARY_FUNCTION} with a JSON object (got `{}`)",
                raw.chars().take(200).collect::<String>()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_are_refused() {
        let e = OpenAiModel::new(OpenAiConfig::new("localhost:8080", "m")).unwrap_err();
        assert!(e.to_string().contains("http://"));
        let ok = OpenAiModel::new(OpenAiConfig::new("http://127.0.0.1:1/v1/", "m")).unwrap();
        assert_eq!(ok.endpoint(), "http://127.0.0.1:1/v1/chat/completions");
    }
}
