//! The streamable-HTTP client under rmcp's transport: reqwest, with the
//! answers rmcp cannot tie to a request turned into errors of that
//! request (issue 15 point 5, a fresh-user trial).
//!
//! rmcp hands a non-success HTTP answer whose body is a JSON-RPC error to
//! the session as if it were a message. `server-everything` (and other
//! SDK servers) answer a request with an unknown session id with HTTP 400
//! and `{"jsonrpc":"2.0","error":{…},"id":null}`: an error tied to no
//! request, so nobody received it and the call waited for its whole
//! timeout. Here such an answer fails the request that was sent:
//!
//! * on a request that carried a session id, an error saying the session
//!   is missing, invalid, unknown or expired counts as the spec's 404
//!   ([`StreamableHttpError::SessionExpired`]): the caller re-initializes
//!   once and retries (`heal.rs`);
//! * any other is [`StreamableHttpError::UnexpectedServerResponse`] with
//!   the JSON-RPC code and message (cut to [`EXCERPT_CHARS`]).
//!
//! Limit: rmcp keeps the HTTP status of such an answer to itself, so the
//! text names the JSON-RPC error, not the status; answers whose body is
//! not a JSON-RPC error keep rmcp's `HTTP <status>: <body>` text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// Characters of a server's error text kept in an error.
pub(crate) const EXCERPT_CHARS: usize = 300;

/// What the last "session expired" answer was, for the error and state
/// texts: `HTTP 404` or `HTTP 400 "<the server's message>"`.
pub(crate) type ExpiryNote = Arc<Mutex<Option<String>>>;

/// reqwest under rmcp's streamable-HTTP transport, with uncorrelated
/// error answers turned into errors of the request (see the module).
#[derive(Clone)]
pub(crate) struct GuardedHttp {
    inner: reqwest::Client,
    expiry: ExpiryNote,
}

impl GuardedHttp {
    /// Wraps `inner`; session expiries are described in `expiry`.
    pub(crate) fn new(inner: reqwest::Client, expiry: ExpiryNote) -> Self {
        GuardedHttp { inner, expiry }
    }

    fn note(&self, text: String) {
        *self.expiry.lock().expect("expiry lock") = Some(text);
    }

    /// The request of `message` (its id and method), if it is one.
    fn request_of(message: &ClientJsonRpcMessage) -> Option<(RequestId, String)> {
        match message {
            JsonRpcMessage::Request(r) => Some((r.id.clone(), r.request.method().to_string())),
            _ => None,
        }
    }

    /// `result` of a POST of `request` (id, method), checked: an error
    /// answer not addressed to the request fails it (see the module).
    fn guard(
        &self,
        request: Option<(RequestId, String)>,
        session_attached: bool,
        result: Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        match result {
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(e), sid)) => {
                let Some((id, method)) = request else {
                    return Ok(StreamableHttpPostResponse::Json(
                        JsonRpcMessage::Error(e),
                        sid,
                    ));
                };
                if e.id.as_ref() == Some(&id) {
                    return Ok(StreamableHttpPostResponse::Json(
                        JsonRpcMessage::Error(e),
                        sid,
                    ));
                }
                let message = excerpt(&e.error.message);
                if session_attached && names_a_bad_session(&e.error.message) {
                    self.note(format!("HTTP 400 \"{message}\""));
                    return Err(StreamableHttpError::SessionExpired);
                }
                let to = match &e.id {
                    None => "no request".to_string(),
                    Some(other) => format!("another request ({other})"),
                };
                Err(StreamableHttpError::UnexpectedServerResponse(
                    format!(
                        "the server refused `{method}` with an error addressed to {to}: JSON-RPC error {}: {message}",
                        e.error.code.0
                    )
                    .into(),
                ))
            }
            Err(StreamableHttpError::SessionExpired) => {
                self.note("HTTP 404".into());
                Err(StreamableHttpError::SessionExpired)
            }
            Err(StreamableHttpError::UnexpectedServerResponse(text))
                if session_attached
                    && text.starts_with("HTTP 400")
                    && names_a_bad_session(&text) =>
            {
                self.note(excerpt(&text));
                Err(StreamableHttpError::SessionExpired)
            }
            other => other,
        }
    }
}

/// At most [`EXCERPT_CHARS`] characters of `text`, `…` when cut.
fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// True when a server's error text says the session id is missing,
/// invalid, unknown or expired (`Bad Request: No valid session ID
/// provided`, `Invalid session`, `Session not found`, …).
pub(crate) fn names_a_bad_session(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("session")
        && [
            "no valid",
            "invalid",
            "unknown",
            "not found",
            "expired",
            "missing",
            "no session",
            "terminated",
        ]
        .iter()
        .any(|w| t.contains(w))
}

impl StreamableHttpClient for GuardedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let request = Self::request_of(&message);
        let attached = session_id.is_some();
        let r = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.guard(request, attached, r)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let request = Self::request_of(&message);
        let attached = session_id.is_some();
        let r = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.guard(request, attached, r)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let request = Self::request_of(&message);
        let attached = session_id.is_some();
        let r = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.guard(request, attached, r)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_texts_of_real_servers_are_recognised() {
        assert!(names_a_bad_session(
            "Bad Request: No valid session ID provided"
        ));
        assert!(names_a_bad_session("Invalid or missing session ID"));
        assert!(names_a_bad_session("Session not found"));
        assert!(!names_a_bad_session("Bad Request: invalid arguments"));
        assert!(!names_a_bad_session("Method not found"));
    }

    #[test]
    fn excerpts_are_bounded() {
        let long = "é".repeat(1000);
        let e = excerpt(&long);
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(excerpt("short"), "short");
    }
}
