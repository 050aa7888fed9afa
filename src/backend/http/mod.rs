//! The HTTP layer shared by the cloud backends (E2B, Daytona, OpenSandbox).
//!
//! One [`ServiceClient`] per service and plane: it adds the auth headers,
//! applies timeouts, retries with back-off on 429 (honouring `Retry-After`)
//! and, for idempotent calls, on 5xx and connection failures, and maps error
//! answers onto [`BackendError`] with the service's own error code and
//! message (see `docs/MINIMAL-SURFACE.md` for each service's error
//! body). Keys live only in header values marked sensitive and are never
//! logged or shown by `Debug`.
//!
//! What the three backends share above HTTP (the `Sandbox` impl, command
//! lines, the provisioning flow) is `backend::cloud`.
//!
//! Error-body and transport-error text live in `errors`, the retry
//! timing (`Retry-After`, retryable 5xx) in `retry`, API keys and the
//! headers that carry them in `auth`.

use std::sync::Once;
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::HeaderMap;
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::secret::Secret;
use super::{BackendError, BackendResult};

mod auth;
mod errors;
mod retry;

pub use auth::{api_key, auth_headers, header, option_or_env, secret_header};
pub use errors::{error_chain, is_tls_error, parse_error_body, root_cause, snippet};
use retry::is_retryable_5xx;
pub use retry::retry_after;

/// Timeouts and retry limits of one service client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpPolicy {
    /// Limit for a whole unary request (not for streams, which are bounded
    /// by the command's own timeout instead).
    pub request_timeout: Duration,
    /// Limit for opening a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First back-off delay; doubled per retry.
    pub base_delay: Duration,
    /// Cap on one back-off delay and on an honoured `Retry-After`.
    pub max_delay: Duration,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        HttpPolicy {
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            max_retries: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl HttpPolicy {
    /// The default policy with a profile's `request_timeout_secs` (at
    /// least 1) and `max_retries`.
    pub fn with_limits(request_timeout_secs: u64, max_retries: u32) -> Self {
        HttpPolicy {
            request_timeout: Duration::from_secs(request_timeout_secs.max(1)),
            max_retries,
            ..HttpPolicy::default()
        }
    }
}

/// Whether a request may be sent again after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Safe to repeat: retried on 429, 5xx and connection errors.
    Idempotent,
    /// Repeating could do the work twice (create, run a command): retried
    /// only on 429, which says the request was refused before any work.
    RateLimitOnly,
}

/// How a 404 answer is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum On404 {
    /// The sandbox is gone: [`BackendError::Unavailable`] (the manager
    /// re-provisions).
    SandboxGone,
    /// A path is missing: [`BackendError::NotFound`] with this path.
    Path(String),
    /// Keep it as [`BackendError::Remote`] with status 404.
    Remote,
}

/// True when a service's error code or message says the sandbox exists but
/// is not running (issue 15 point 1): Daytona's toolbox `Sandbox … is not
/// started (state stopped)`, OpenSandbox's execd `SANDBOX_NOT_RUNNING`,
/// a `… is paused` / `… is stopped` from any of them. Matched
/// case-insensitively; only answers about a sandbox's own resources are
/// read this way, never answers about a path.
pub fn says_not_running(code: Option<&str>, message: &str) -> bool {
    let code = code.unwrap_or_default().to_ascii_uppercase();
    let lower = message.to_ascii_lowercase();
    code.contains("NOT_RUNNING")
        || code.contains("NOT_STARTED")
        || ["not started", "not running", "is paused", "is stopped"]
            .iter()
            .any(|w| lower.contains(w))
}

/// Installs the `ring` crypto provider for rustls once per process; reqwest
/// is built without a provider of its own (no C toolchain for aws-lc).
pub fn ensure_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another component may have installed one first; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTP client for one service plane, with its auth headers.
#[derive(Clone)]
pub struct ServiceClient {
    service: &'static str,
    client: Client,
    headers: HeaderMap,
    policy: HttpPolicy,
    auth_hint: String,
}

impl std::fmt::Debug for ServiceClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are left out: they carry the API key.
        f.debug_struct("ServiceClient")
            .field("service", &self.service)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("policy", &self.policy)
            .finish()
    }
}

impl ServiceClient {
    /// A client for `service` that sends `headers` on every request.
    /// `auth_hint` is appended to 401/403 messages (for example "set
    /// E2B_API_KEY or `api_key` in the profile").
    ///
    /// Errors: the TLS stack cannot be set up.
    pub fn new(
        service: &'static str,
        headers: HeaderMap,
        policy: HttpPolicy,
        auth_hint: impl Into<String>,
    ) -> BackendResult<Self> {
        ensure_crypto_provider();
        let client = Client::builder()
            .connect_timeout(policy.connect_timeout)
            .user_agent(concat!("wsbench/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| BackendError::Remote {
                service,
                status: None,
                code: Some("client".into()),
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(ServiceClient {
            service,
            client,
            headers,
            policy,
            auth_hint: auth_hint.into(),
        })
    }

    /// A client for `service` authenticated by the API key from the
    /// profile (`explicit`) or the environment variable `key_var`:
    /// `headers` turns the key into the auth headers. Returns the key too,
    /// for a service whose proxy wants it again.
    ///
    /// Errors: no key in either place; a key that cannot be a header; the
    /// TLS stack cannot be set up.
    pub fn with_api_key(
        service: &'static str,
        explicit: Option<&Secret>,
        key_var: &str,
        policy: HttpPolicy,
        headers: impl FnOnce(&Secret) -> BackendResult<HeaderMap>,
    ) -> BackendResult<(Self, Secret)> {
        let key = api_key(service, explicit, key_var)?;
        let client = ServiceClient::new(
            service,
            headers(&key)?,
            policy,
            format!("check {key_var} or `api_key` in the profile"),
        )?;
        Ok((client, key))
    }

    /// The same client (sharing connections) with other headers, for a
    /// second plane of the same service (envd, toolbox, execd).
    pub fn with_headers(&self, headers: HeaderMap) -> Self {
        ServiceClient {
            headers,
            ..self.clone()
        }
    }

    /// Service name used in errors.
    pub fn service(&self) -> &'static str {
        self.service
    }

    /// The policy in force.
    pub fn policy(&self) -> HttpPolicy {
        self.policy
    }

    /// The underlying reqwest client (for websocket-free streaming calls
    /// that build requests themselves).
    pub fn raw(&self) -> &Client {
        &self.client
    }

    /// Sends a request built by `build` (called again for each retry) and
    /// returns the response whatever its status, after retries on 429 and,
    /// for [`Retry::Idempotent`], on 5xx and connection failures.
    /// `stream = true` leaves out the whole-request timeout.
    ///
    /// Errors: [`BackendError::Unavailable`] when the service cannot be
    /// reached; [`BackendError::Remote`] for a timeout.
    pub async fn send(
        &self,
        retry: Retry,
        stream: bool,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> BackendResult<Response> {
        let mut attempt = 0u32;
        loop {
            let mut req = build(&self.client).headers(self.headers.clone());
            if !stream {
                req = req.timeout(self.policy.request_timeout);
            }
            let last = attempt >= self.policy.max_retries;
            match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    let retryable = status == StatusCode::TOO_MANY_REQUESTS
                        || (retry == Retry::Idempotent && is_retryable_5xx(status));
                    if !retryable || last {
                        return Ok(resp);
                    }
                    let wait = retry_after(resp.headers())
                        .map(|d| d.min(self.policy.max_delay))
                        .unwrap_or_else(|| self.backoff(attempt));
                    tracing::debug!(
                        service = self.service,
                        status = status.as_u16(),
                        wait_ms = wait.as_millis() as u64,
                        "retrying"
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    // A certificate the client refuses stays refused.
                    let transient =
                        (e.is_connect() || e.is_timeout() || e.is_request()) && !is_tls_error(&e);
                    if retry != Retry::Idempotent || !transient || last {
                        return Err(self.transport_error(&e));
                    }
                    tokio::time::sleep(self.backoff(attempt)).await;
                }
            }
            attempt += 1;
        }
    }

    /// The headers this client adds to every request.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Sends a request once (bodies that cannot be rebuilt, such as
    /// streamed multipart uploads), adding this client's headers; any
    /// status is returned.
    ///
    /// Errors: as for [`ServiceClient::send`].
    pub async fn send_once(
        &self,
        req: RequestBuilder,
        timeout: Option<Duration>,
    ) -> BackendResult<Response> {
        let mut req = req.headers(self.headers.clone());
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        req.send().await.map_err(|e| self.transport_error(&e))
    }

    /// [`ServiceClient::send`], then maps any non-2xx status to an error.
    pub async fn send_ok(
        &self,
        retry: Retry,
        on404: On404,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> BackendResult<Response> {
        let resp = self.send(retry, false, build).await?;
        self.check(resp, on404).await
    }

    /// [`ServiceClient::send_ok`] and decodes the JSON body.
    pub async fn json<T: DeserializeOwned>(
        &self,
        retry: Retry,
        on404: On404,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> BackendResult<T> {
        let resp = self.send_ok(retry, on404, build).await?;
        self.decode(resp).await
    }

    /// `DELETE url` (retried like any idempotent call): `Ok(true)` when
    /// deleted, `Ok(false)` when the service answers 404 (already gone).
    ///
    /// Errors: any other error status, or no answer.
    pub async fn delete(&self, url: &str) -> BackendResult<bool> {
        let resp = self
            .send(Retry::Idempotent, false, |c| c.delete(url))
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(false);
        }
        self.check(resp, On404::Remote).await.map(|_| true)
    }

    /// An answer that does not have the shape the spec gives it.
    pub fn bad_response(&self, message: impl Into<String>) -> BackendError {
        BackendError::Remote {
            service: self.service,
            status: None,
            code: Some("bad_response".into()),
            message: message.into(),
        }
    }

    /// Polls `GET url` (5 s per try; back-off from 100 ms to 1 s) until it
    /// answers 2xx: a daemon in a sandbox that is still starting.
    ///
    /// Errors: [`BackendError::Unavailable`] naming `what` with the last
    /// answer once `deadline` passes; at once on a 404 when `gone_on_404`
    /// (the service's proxy knows no such sandbox).
    pub async fn wait_ready(
        &self,
        url: &str,
        deadline: Instant,
        what: &str,
        gone_on_404: bool,
    ) -> BackendResult<()> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            let res = self
                .client
                .get(url)
                .headers(self.headers.clone())
                .timeout(Duration::from_secs(5))
                .send()
                .await;
            let last = match res {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) if gone_on_404 && r.status() == StatusCode::NOT_FOUND => {
                    return Err(BackendError::gone(format!(
                        "{what}: the sandbox is gone (404)"
                    )));
                }
                Ok(r) => format!("status {}", r.status()),
                Err(e) => error_chain(&e),
            };
            if Instant::now() >= deadline {
                return Err(BackendError::unreachable(format!(
                    "{what} not ready after {}s ({last})",
                    started.elapsed().as_secs()
                )));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(1));
        }
    }

    /// `GET url` (a sandbox's own resource: 404 means it is gone) and the
    /// string `field` of the JSON answer.
    ///
    /// Errors: as for [`ServiceClient::json`]; an answer without the field.
    pub async fn get_field(&self, url: &str, field: &str) -> BackendResult<String> {
        let v: Value = self
            .json(Retry::Idempotent, On404::SandboxGone, |c| c.get(url))
            .await?;
        v.get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| self.bad_response(format!("{url} answered without `{field}`: {v}")))
    }

    /// Decodes a JSON body, naming the service when it does not parse.
    pub async fn decode<T: DeserializeOwned>(&self, resp: Response) -> BackendResult<T> {
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| BackendError::Remote {
            service: self.service,
            status: Some(status),
            code: Some("bad_response".into()),
            message: format!(
                "unexpected response body ({e}): {}",
                snippet(&String::from_utf8_lossy(&bytes))
            ),
        })
    }

    /// Passes a 2xx response through; turns any other into an error with
    /// the service's code and message.
    pub async fn check(&self, resp: Response, on404: On404) -> BackendResult<Response> {
        let status = resp.status();
        self.check_with(resp, |_, body| self.status_error(status, body, on404))
            .await
    }

    /// Passes a 2xx response through; hands any other status and its body
    /// to `err` (for answers about a path, which map onto file errors).
    pub async fn check_with(
        &self,
        resp: Response,
        err: impl FnOnce(u16, &[u8]) -> BackendError,
    ) -> BackendResult<Response> {
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let body = resp.bytes().await.unwrap_or_default();
        Err(err(status, &body))
    }

    /// Maps an error status and body to a [`BackendError`].
    pub fn status_error(&self, status: StatusCode, body: &[u8], on404: On404) -> BackendError {
        let (code, message) = parse_error_body(body);
        let message = if message.is_empty() {
            status
                .canonical_reason()
                .unwrap_or("error")
                .to_ascii_lowercase()
        } else {
            message
        };
        let about_sandbox = on404 == On404::SandboxGone;
        let n = status.as_u16();
        match (n, on404) {
            // A 409 stays a conflict: a state transition refused (pause of
            // a sandbox that is not running) is the caller's to handle.
            (400 | 503, _) if about_sandbox && says_not_running(code.as_deref(), &message) => {
                BackendError::stopped(format!(
                    "{} reports the sandbox not running ({n}: {message})",
                    self.service
                ))
            }
            (404 | 410, On404::SandboxGone) => BackendError::gone(format!(
                "{} reports the sandbox gone ({n}{}: {message})",
                self.service,
                code.as_ref()
                    .filter(|c| c.as_str() != n.to_string())
                    .map(|c| format!(" {c}"))
                    .unwrap_or_default()
            )),
            (404, On404::Path(p)) => BackendError::NotFound(p),
            (401 | 403, _) => BackendError::Remote {
                service: self.service,
                status: Some(status.as_u16()),
                code,
                message: if self.auth_hint.is_empty() {
                    message
                } else {
                    format!("{message} ({})", self.auth_hint)
                },
            },
            (s, _) => BackendError::Remote {
                service: self.service,
                status: Some(s),
                code,
                message,
            },
        }
    }

    /// Maps a transport failure (no HTTP answer) to a [`BackendError`]
    /// naming the server (scheme, host and port: our URLs carry no
    /// secrets, keys travel in headers) and the root cause, in one line:
    /// `cannot reach e2b at http://127.0.0.1:9: connection refused`.
    /// A TLS failure (an unknown certificate issuer, most often) says how
    /// to trust a private CA.
    pub fn transport_error(&self, e: &reqwest::Error) -> BackendError {
        let server = e
            .url()
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|| "its server".into());
        let cause = root_cause(e);
        if is_tls_error(e) {
            BackendError::Remote {
                service: self.service,
                status: None,
                code: Some("tls".into()),
                message: format!(
                    "TLS with {server} failed: {cause} (a private CA: point SSL_CERT_FILE at its PEM bundle)"
                ),
            }
        } else if e.is_timeout() {
            BackendError::Remote {
                service: self.service,
                status: None,
                code: Some("timeout".into()),
                message: format!("request to {server} timed out"),
            }
        } else if e.is_connect() {
            BackendError::unreachable(format!(
                "cannot reach {} at {server}: {cause}",
                self.service
            ))
        } else {
            BackendError::Remote {
                service: self.service,
                status: None,
                code: Some("transport".into()),
                message: format!("talking to {server}: {cause}"),
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .policy
            .base_delay
            .saturating_mul(1u32 << attempt.min(16));
        let capped = exp.min(self.policy.max_delay);
        // Up to 25 % jitter so many clients do not retry in lock-step.
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        capped + capped.mul_f64((nanos % 1000) as f64 / 4000.0)
    }
}

/// Joins a base URL and a path without doubling or dropping the slash.
pub fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Percent-encodes `k=v&k2=v2` the way E2B and OpenSandbox filter by
/// metadata: each key and value encoded, then joined as a query string
/// (the caller's query builder encodes the whole once more).
pub fn metadata_query(pairs: &[(&str, &str)]) -> String {
    let mut u = reqwest::Url::parse("http://localhost/").expect("static URL");
    u.query_pairs_mut().extend_pairs(pairs);
    u.query().unwrap_or_default().to_string()
}

/// Parses an RFC 3339 time.
pub fn parse_time(s: &str) -> Option<SystemTime> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| SystemTime::from(t.with_timezone(&chrono::Utc)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_filter_is_encoded_twice_by_the_query_builder() {
        let inner = metadata_query(&[("wsbench.workspace.id", "ws 1&x")]);
        assert_eq!(inner, "wsbench.workspace.id=ws+1%26x");
        let url = reqwest::Url::parse_with_params("http://h/v", &[("metadata", inner)]).unwrap();
        assert_eq!(
            url.query(),
            Some("metadata=wsbench.workspace.id%3Dws%2B1%2526x")
        );
    }

    #[test]
    fn status_errors_name_the_service_code() {
        let c = ServiceClient::new(
            "e2b",
            HeaderMap::new(),
            HttpPolicy::default(),
            "set E2B_API_KEY",
        )
        .unwrap();
        let e = c.status_error(
            StatusCode::UNAUTHORIZED,
            br#"{"code":401,"message":"Invalid API key"}"#,
            On404::Remote,
        );
        assert_eq!(
            e.to_string(),
            "e2b error 401: Invalid API key (set E2B_API_KEY)"
        );
        let e = c.status_error(
            StatusCode::NOT_FOUND,
            br#"{"code":404,"message":"x"}"#,
            On404::SandboxGone,
        );
        assert_eq!(e.health(), crate::backend::Health::Gone, "{e}");
        let e = c.status_error(
            StatusCode::NOT_FOUND,
            br#"{"code":404,"message":"sandbox not found"}"#,
            On404::SandboxGone,
        );
        assert_eq!(
            e.to_string(),
            "sandbox gone: e2b reports the sandbox gone (404: sandbox not found)"
        );
        // A code that is not the status is shown beside it.
        let e = c.status_error(
            StatusCode::UNAUTHORIZED,
            br#"{"statusCode":401,"message":"Invalid credentials","code":"UNAUTHORIZED"}"#,
            On404::Remote,
        );
        assert_eq!(
            e.to_string(),
            "e2b error 401 UNAUTHORIZED: Invalid credentials (set E2B_API_KEY)"
        );
        let e = c.status_error(StatusCode::NOT_FOUND, b"", On404::Path("/a".into()));
        assert!(e.is_not_found());
    }

    /// Issue 15 point 1: what the services answer about a sandbox that
    /// was deleted, expired or stopped maps onto the typed health.
    #[test]
    fn sandbox_answers_map_onto_health() {
        use crate::backend::Health;
        let c = ServiceClient::new("svc", HeaderMap::new(), HttpPolicy::default(), "").unwrap();
        let h = |status: u16, body: &[u8], on404: On404| {
            c.status_error(StatusCode::from_u16(status).unwrap(), body, on404)
                .health()
        };
        let gone = On404::SandboxGone;
        assert_eq!(
            h(410, br#"{"message":"expired"}"#, gone.clone()),
            Health::Gone
        );
        let not_started = br#"{"message":"Sandbox s1 is not started (state stopped)"}"#;
        assert_eq!(h(400, not_started, gone.clone()), Health::Stopped);
        let not_running = br#"{"code":"SANDBOX_NOT_RUNNING","message":"execd is not reachable"}"#;
        assert_eq!(h(503, not_running, gone.clone()), Health::Stopped);
        assert_eq!(
            h(409, br#"{"message":"sandbox is paused"}"#, gone.clone()),
            Health::Conflict
        );
        // The same words about a path are not about the sandbox.
        assert_eq!(h(400, not_started, On404::Path("/a".into())), Health::Other);
        assert_eq!(
            h(409, br#"{"message":"conflict"}"#, gone.clone()),
            Health::Conflict
        );
        assert_eq!(h(403, b"", gone.clone()), Health::Auth);
        assert_eq!(h(500, b"", gone), Health::Other);
        let e = c.status_error(
            StatusCode::GONE,
            br#"{"message":"expired"}"#,
            On404::SandboxGone,
        );
        assert_eq!(
            e.to_string(),
            "sandbox gone: svc reports the sandbox gone (410: expired)"
        );
    }

    fn quick_client() -> ServiceClient {
        let policy = HttpPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            ..HttpPolicy::default()
        };
        ServiceClient::new("e2b", HeaderMap::new(), policy, "").unwrap()
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_server_and_the_cause() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let c = quick_client();
        let url = format!("http://127.0.0.1:{port}/sandboxes");
        let e = c
            .send(Retry::Idempotent, false, |cl| cl.get(&url))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "sandbox unavailable: cannot reach e2b at http://127.0.0.1:{port}: connection refused"
            )
        );
    }

    #[tokio::test]
    async fn tls_failures_are_not_retried() {
        // A server that answers a TLS hello with plain text.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut s, _)) = l.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let c = quick_client();
        let url = format!("https://127.0.0.1:{port}/sandboxes");
        let e = c
            .send(Retry::Idempotent, false, |cl| cl.get(&url))
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("e2b error tls: TLS with https://127.0.0.1:"),
            "{text}"
        );
        assert!(text.contains("SSL_CERT_FILE"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
