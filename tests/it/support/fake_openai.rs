//! A fake OpenAI-compatible chat-completions server on 127.0.0.1:0 that
//! answers each request with the next scripted reply: a server-sent event
//! stream, a stream cut off mid-answer, a plain JSON body or an HTTP error.
//! Every request body is recorded for assertions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// These chunks as SSE events, then `data: [DONE]`.
    Stream(Vec<Value>),
    /// These chunks, then the connection is dropped (no `[DONE]`).
    StreamThenDrop(Vec<Value>),
    /// A JSON body (a non-streamed completion).
    Json(Value),
    /// An HTTP error with an OpenAI-style error body.
    Error(u16, String),
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
}

/// The running server.
pub struct FakeOpenAi {
    /// Base URL (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    /// Starts a server answering with `replies` in order (a request past
    /// the last one gets HTTP 500).
    pub async fn start(replies: Vec<Reply>) -> FakeOpenAi {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeOpenAi {
            url: format!("http://{addr}/v1"),
            shared,
            task,
        }
    }

    /// Adds replies to the end of the script.
    pub fn push(&self, replies: Vec<Reply>) {
        self.shared.replies.lock().unwrap().extend(replies);
    }

    /// Request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(v);
    let next = shared.replies.lock().unwrap().pop_front();
    let sse = |chunks: Vec<Value>, done: bool| {
        let mut events: Vec<Result<Bytes, std::io::Error>> = chunks
            .into_iter()
            .map(|c| Ok(Bytes::from(format!("data: {c}\n\n"))))
            .collect();
        if done {
            events.push(Ok(Bytes::from("data: [DONE]\n\n")));
        }
        let stream = futures::stream::iter(events);
        let body = if done {
            Body::from_stream(stream)
        } else {
            let dropped = futures::stream::once(async {
                // Let the first chunks reach the client before the cut.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "fake server dropped the connection",
                ))
            });
            Body::from_stream(stream.chain(dropped))
        };
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(body)
            .unwrap()
    };
    match next {
        Some(Reply::Stream(c)) => sse(c, true),
        Some(Reply::StreamThenDrop(c)) => sse(c, false),
        Some(Reply::Json(v)) => Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        Some(Reply::Error(status, message)) => Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"error": {"message": message, "type": "fake"}}).to_string(),
            ))
            .unwrap(),
        None => Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from("no scripted reply left"))
            .unwrap(),
    }
}

/// A chunk with text content.
pub fn text_chunk(text: &str) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

/// A chunk ending the answer.
pub fn finish_chunk(reason: &str) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
                     "prompt_tokens_details": {"cached_tokens": 40}}})
}

/// `text` streamed in `pieces` chunks, then `stop`.
pub fn stream_text(text: &str, pieces: usize) -> Reply {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(pieces.max(1)).max(1);
    let mut chunks: Vec<Value> = chars
        .chunks(size)
        .map(|c| text_chunk(&c.iter().collect::<String>()))
        .collect();
    chunks.push(finish_chunk("stop"));
    Reply::Stream(chunks)
}

/// Chunks of one tool call whose arguments arrive in three pieces.
pub fn tool_call_chunks(index: usize, id: &str, name: &str, args: &str) -> Vec<Value> {
    let chars: Vec<char> = args.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    let mut out = vec![json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
    ]}}]})];
    for piece in chars.chunks(third) {
        let piece: String = piece.iter().collect();
        out.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "function": {"arguments": piece}}
        ]}}]}));
    }
    out
}

/// A streamed turn: optional text, then tool calls `(id, name, raw args)`.
pub fn stream_tool_calls(text: &str, calls: &[(&str, &str, &str)]) -> Reply {
    let mut chunks = Vec::new();
    if !text.is_empty() {
        chunks.push(text_chunk(text));
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        chunks.extend(tool_call_chunks(i, id, name, args));
    }
    chunks.push(finish_chunk("tool_calls"));
    Reply::Stream(chunks)
}

/// A non-streamed completion calling the summary function with `fields`.
pub fn summary_reply(fields: Value) -> Reply {
    Reply::Json(json!({
        "id": "s", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_sum", "type": "function", "function": {
                "name": "generate_structured_output", "arguments": fields.to_string()
            }}]
        }}]
    }))
}
