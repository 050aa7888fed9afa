//! The legacy HTTP+SSE MCP transport (protocol 2024-11-05), client side.
//!
//! rmcp 3 ships only streamable HTTP, but the reference still picks SSE
//! when a URL path ends in `/sse` or `/messages/` (docs/contract.md §5.1), and
//! servers speaking only SSE are common. The protocol is small: a GET
//! opens an event stream whose first `endpoint` event names the URL to
//! POST messages to; every server message then arrives as a `message`
//! event.

use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::health::ServerLog;

/// Errors of the SSE transport.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The HTTP request failed.
    #[error("HTTP request to {url} failed: {source}")]
    Http {
        /// URL requested.
        url: String,
        /// The client error.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        /// URL requested.
        url: String,
        /// HTTP status.
        status: u16,
        /// Start of the body.
        body: String,
    },
    /// The event stream broke the protocol (no endpoint, bad URL, closed).
    #[error("SSE protocol error: {0}")]
    Protocol(String),
}

/// A connected SSE session.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    stop: CancellationToken,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl SseTransport {
    /// Opens the event stream at `url` and waits (up to `timeout`) for
    /// its `endpoint` event.
    ///
    /// Errors: connection failures, a non-2xx status, a stream that ends
    /// or names no valid endpoint in time.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
        timeout: Duration,
        log: std::sync::Arc<ServerLog>,
    ) -> Result<Self, SseError> {
        let base = reqwest::Url::parse(url)
            .map_err(|e| SseError::Protocol(format!("invalid URL {url}: {e}")))?;
        let resp = tokio::time::timeout(
            timeout,
            client
                .get(base.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| {
            SseError::Protocol(format!(
                "{url} did not answer within {}s",
                timeout.as_secs_f64()
            ))
        })?
        .map_err(|source| SseError::Http {
            url: url.to_string(),
            source,
        })?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(SseError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                body: super::redact::bound(&body, super::redact::MAX_ECHO_BYTES),
            });
        }
        let (tx, rx) = mpsc::channel(256);
        let (ep_tx, ep_rx) = oneshot::channel::<String>();
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        tokio::spawn(async move {
            let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
            let mut ep_tx = Some(ep_tx);
            loop {
                let ev = tokio::select! {
                    ev = events.next() => ev,
                    _ = stop2.cancelled() => break,
                };
                let Some(Ok(ev)) = ev else { break };
                let data = ev.data.unwrap_or_default();
                match ev.event.as_deref() {
                    Some("endpoint") => {
                        if let Some(t) = ep_tx.take() {
                            let _ = t.send(data);
                        }
                    }
                    None | Some("message") => {
                        match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                            Ok(m) => {
                                if tx.send(m).await.is_err() {
                                    break;
                                }
                            }
                            Err(e) => log.warn(&format!(
                                "SSE message is not JSON-RPC ({e}), skipped: {data}"
                            )),
                        }
                    }
                    Some(other) => log.info(&format!("SSE event `{other}` ignored: {data}")),
                }
            }
        });
        let endpoint = tokio::time::timeout(timeout, ep_rx)
            .await
            .map_err(|_| {
                SseError::Protocol(format!(
                    "{url} sent no `endpoint` event within {}s",
                    timeout.as_secs_f64()
                ))
            })?
            .map_err(|_| {
                SseError::Protocol(format!(
                    "the event stream of {url} ended before its `endpoint` event"
                ))
            })?;
        let endpoint = base.join(endpoint.trim()).map_err(|e| {
            SseError::Protocol(format!("bad endpoint {endpoint:?} from {url}: {e}"))
        })?;
        Ok(SseTransport {
            client,
            endpoint,
            headers,
            rx,
            stop,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let req = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .json(&item);
        let url = self.endpoint.to_string();
        async move {
            let resp = req.send().await.map_err(|source| SseError::Http {
                url: url.clone(),
                source,
            })?;
            let status = resp.status();
            if !status.is_success() {
                let body = resp.text().await.unwrap_or_default();
                return Err(SseError::Status {
                    url,
                    status: status.as_u16(),
                    body: super::redact::bound(&body, super::redact::MAX_ECHO_BYTES),
                });
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.rx.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop.cancel();
        self.rx.close();
        Ok(())
    }
}
