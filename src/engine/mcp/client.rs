//! One live MCP server for one (agent, session): connect, list, call,
//! refresh on `notifications/tools/list_changed`, restart, close.
//!
//! Every [`McpInstance`] has its own connect lock, so a slow server
//! never blocks another server or another session (docs/contract.md §11 point
//! 6); the runtime never holds a workspace-wide lock across a connect.
//!
//! Stateful servers keep one rmcp session; stateless HTTP servers get a
//! fresh session per operation (docs/contract.md §5.1), with their tool list
//! cached after the first listing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::handler::client::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, JsonRpcMessage, ProtocolVersion, ServerNotification, Tool,
};
#[allow(deprecated)] // SEP-2577 deprecates logging; servers still send it.
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{
    NotificationContext, Peer, RoleClient, RunningService, RxJsonRpcMessage, ServiceError,
    TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::decl::{HttpConfig, McpConfig, McpDecl, McpTransport};
use super::health::{LogLine, McpState, ServerLog};
use super::redact::Redactor;
use super::sse::SseTransport;
use super::stdio::{self, StdioOptions, StdioProcess};
use crate::backend::Sandbox;
use crate::engine::events::{Event, EventBus};

/// Separator of qualified tool names: `mcp__<server>__<tool>` (contract
/// §5.1).
pub const TOOL_PREFIX: &str = "mcp__";

/// The qualified name of `tool` on `server`.
pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("{TOOL_PREFIX}{server}__{tool}")
}

/// Splits `mcp__<server>__<tool>` into `(server, tool)` at the first
/// `__` after the prefix. A server name may itself hold `__`; callers
/// that know the server names match those first.
pub fn split_qualified(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(TOOL_PREFIX)?;
    let i = rest.find("__")?;
    let (server, tool) = (&rest[..i], &rest[i + 2..]);
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// Tunables of the MCP clients of a workspace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpOptions {
    /// Time allowed to start and answer `initialize` (and the first
    /// `tools/list`). Default 30 s.
    pub init_timeout: Duration,
    /// Largest message accepted from a server, in bytes (stdio frames;
    /// HTTP JSON bodies and SSE events). Over it only that request fails
    /// (C04). Default 64 MiB.
    pub max_frame_bytes: usize,
    /// Bytes of a stdio server's stderr kept for reports. Default 8 KiB.
    pub stderr_tail_bytes: usize,
    /// A failed server is started again by a listing only after this
    /// long (a restart always tries at once). Default 30 s.
    pub retry_failed_after: Duration,
    /// Text results longer than this many characters are offloaded to a
    /// tool-result file and cut in the returned result (docs/contract.md §6).
    /// Default 100 000.
    pub max_result_chars: usize,
    /// Cap of live stateful instances; `None` = the reference's
    /// `max(40, 2 × stateful defaults)` (docs/contract.md §1).
    pub max_live_stateful: Option<usize>,
    /// Time a tool call may take when its declaration sets no
    /// `execution_timeout` (the reference then waits forever, and so does
    /// a call here with `None`: `[mcp] call_timeout_secs = 0` in the
    /// config). Default [`DEFAULT_CALL_TIMEOUT`].
    pub call_timeout: Option<Duration>,
    /// A stateful stdio server that exits on its own is started again
    /// on next use: the first time at once, then after this delay,
    /// doubled for each further exit without a successful call in
    /// between, capped at [`RESTART_BACKOFF_CAP`] times it (default 1 s:
    /// at once, 1 s, 2 s, 4 s, 8 s, 16 s, 32 s, 32 s, …); see
    /// [`restart_delay`].
    pub restart_backoff: Duration,
}

/// The cap of the stdio restart delay, as a multiple of
/// [`McpOptions::restart_backoff`].
pub const RESTART_BACKOFF_CAP: u32 = 32;

/// How long after its `exits`-th exit in a row (no successful call in
/// between) a stdio server waits before it is started again: zero after
/// the first, then `base`, `2 × base`, … up to
/// [`RESTART_BACKOFF_CAP`]` × base`.
pub fn restart_delay(base: Duration, exits: u32) -> Duration {
    if exits <= 1 {
        return Duration::ZERO;
    }
    let factor = 1u32 << (exits - 2).min(RESTART_BACKOFF_CAP.trailing_zeros());
    base.saturating_mul(factor.min(RESTART_BACKOFF_CAP))
}

/// The default of [`McpOptions::call_timeout`]: 10 minutes.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            init_timeout: Duration::from_secs(30),
            max_frame_bytes: stdio::DEFAULT_MAX_FRAME_BYTES,
            stderr_tail_bytes: stdio::DEFAULT_STDERR_TAIL_BYTES,
            retry_failed_after: Duration::from_secs(30),
            max_result_chars: 100_000,
            max_live_stateful: None,
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            restart_backoff: Duration::from_secs(1),
        }
    }
}

/// A tool of a live server, as offered to an agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpToolInfo {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    /// Server name.
    pub server: String,
    /// The server's own tool name.
    pub tool: String,
    /// Description.
    pub description: String,
    /// JSON schema of the arguments.
    pub input_schema: Value,
    /// `annotations.readOnlyHint` (auto-allowed by the reference).
    pub read_only: bool,
}

/// What a server looks like now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpStatus {
    /// Server name.
    pub name: String,
    /// Agent id.
    pub agent: String,
    /// Session id.
    pub session: String,
    /// Transport.
    pub transport: McpTransport,
    /// Stateful (one persistent session).
    pub is_stateful: bool,
    /// State with its details.
    #[serde(flatten)]
    pub state: McpState,
    /// Tool names offered (qualified), once listed.
    pub tools: Vec<String>,
    /// Backend process id of a live stdio server.
    pub process: Option<String>,
    /// Times the server was brought back on its own since it was
    /// declared: a stdio server started again after it exited, an HTTP
    /// session initialized again after the server expired it (404, or a
    /// 400 whose error names the session).
    /// Starts and restarts asked for by the user are not counted.
    pub restarts: u32,
    /// The `${VAR}` names its `env` / `headers` values reference, which
    /// wsbench fills from its environment and the reference sends as
    /// written ([`McpDecl::referenced_vars`]); empty when none.
    pub expands: Vec<String>,
}

impl McpStatus {
    /// The state on one line ([`McpState::summary`]) and, once the
    /// server was brought back on its own, how often: `ready (3 tools)
    /// · 2 restarts`. What `mcp list` and the MCP pane show.
    pub fn summary(&self) -> String {
        let state = self.state.summary();
        match self.restarts {
            0 => state,
            1 => format!("{state} · 1 restart"),
            n => format!("{state} · {n} restarts"),
        }
    }
}

/// Why an MCP operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    /// The server is not running (failed, stopped).
    #[error("MCP server `{server}` is not available: {reason}")]
    Unavailable {
        /// Server name.
        server: String,
        /// Why (the failure detail).
        reason: String,
    },
    /// No such tool on the server.
    #[error("unknown tool `{tool}` on MCP server `{server}`; its tools: {available}")]
    UnknownTool {
        /// Server name.
        server: String,
        /// Tool asked for.
        tool: String,
        /// Comma-separated tool names it has.
        available: String,
    },
    /// The tool exists but this declaration hides it.
    #[error(
        "tool `{tool}` of MCP server `{server}` is not enabled for this session (enable_tools / disable_tools)"
    )]
    Disabled {
        /// Server name.
        server: String,
        /// Tool name.
        tool: String,
    },
    /// The call ran past its limit: `execution_timeout`, else an HTTP
    /// declaration's `timeout`, else [`McpOptions::call_timeout`].
    #[error("MCP tool `{tool}` of `{server}` timed out after {secs}s ({limit})")]
    Timeout {
        /// Server name.
        server: String,
        /// Tool name.
        tool: String,
        /// The timeout.
        secs: f64,
        /// Which setting gave it: `the server's execution_timeout`,
        /// `the server's timeout`, `[mcp] call_timeout_secs`.
        limit: &'static str,
    },
    /// The caller cancelled the call.
    #[error("MCP tool call cancelled")]
    Cancelled,
    /// A start was cancelled by a stop, restart, removal or close — what
    /// someone asked for, not a failure of the server.
    #[error("MCP server `{server}` was stopped while starting")]
    StartCancelled {
        /// Server name.
        server: String,
    },
    /// The server answered with a JSON-RPC error or broke the protocol.
    #[error("MCP server `{server}`: {message}")]
    Server {
        /// Server name.
        server: String,
        /// The error text.
        message: String,
    },
}

type Connected = RunningService<RoleClient, Handler>;

/// A connected rmcp session (stateful servers keep one).
struct Connection {
    peer: Peer<RoleClient>,
    running: Mutex<Option<Connected>>,
    process: Option<StdioProcess>,
    epoch: Arc<AtomicU64>,
}

impl Connection {
    fn alive(&self) -> bool {
        !self.peer.is_transport_closed()
            && self.process.as_ref().is_none_or(|p| p.exited().is_none())
    }

    async fn shutdown(&self) {
        let running = self.running.lock().expect("running lock").take();
        if let Some(running) = running {
            let _ = tokio::time::timeout(Duration::from_secs(2), running.cancel()).await;
        }
        if let Some(p) = &self.process {
            p.kill().await;
        }
    }
}

/// rmcp's client handler: forwards list changes and server log messages.
struct Handler {
    inst: Weak<McpInstance>,
    log: Arc<ServerLog>,
    conn_epoch: Arc<AtomicU64>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // Pinned to the newest version with an `initialize` handshake:
        // fake and older servers echo the client's version back.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("wsbench", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(inst) = self.inst.upgrade() {
            let epoch = self.conn_epoch.clone();
            tokio::spawn(async move { inst.refresh_tools(Some(epoch)).await });
        }
    }

    #[allow(deprecated)] // SEP-2577 deprecates logging; servers still send it.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = match params.level {
            LoggingLevel::Debug | LoggingLevel::Info | LoggingLevel::Notice => "info",
            LoggingLevel::Warning => "warn",
            _ => "error",
        };
        let data = match &params.data {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.log.log(level, &format!("server log: {data}"));
    }
}

/// Counts `notifications/tools/list_changed` as they come off the wire,
/// before rmcp dispatches them: a list change sent just before a reply
/// (C05) is then seen by the caller of that reply without a race.
struct Tap<T> {
    inner: T,
    epoch: Arc<AtomicU64>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let m = self.inner.receive().await;
        if let Some(JsonRpcMessage::Notification(n)) = &m
            && matches!(
                n.notification,
                ServerNotification::ToolListChangedNotification(_)
            )
        {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
        m
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Shared by every instance of a workspace.
pub(crate) struct InstanceEnv {
    pub(crate) sandbox: Arc<dyn Sandbox>,
    pub(crate) bus: EventBus,
    pub(crate) workspace: String,
    pub(crate) options: std::sync::RwLock<McpOptions>,
}

impl InstanceEnv {
    pub(crate) fn options(&self) -> McpOptions {
        self.options.read().expect("options lock").clone()
    }
}

struct Inner {
    state: McpState,
    tools: Option<Vec<Tool>>,
    tools_epoch: u64,
    conn: Option<Arc<Connection>>,
    failed_at: Option<Instant>,
    closed: bool,
    /// Cancels the start in progress (stop, restart, remove, close).
    starting: Option<CancellationToken>,
    /// Counts stops, so a start queued behind the connect lock when a
    /// stop came in gives up instead of starting after it.
    stops: u64,
    /// See [`McpStatus::restarts`].
    restarts: u32,
    /// Exits of the stdio server in a row, without a successful call in
    /// between (the backoff of [`restart_delay`]).
    exits: u32,
    /// When the stdio server exited on its own, while it is not started
    /// again: the next use starts it once the backoff has passed.
    lost_at: Option<Instant>,
}

/// One server of one (agent, session).
pub struct McpInstance {
    agent: String,
    session: String,
    decl: McpDecl,
    env: Arc<InstanceEnv>,
    log: Arc<ServerLog>,
    /// Hides the secrets this instance sends in every error and log line.
    redact: Redactor,
    inner: Mutex<Inner>,
    connect_lock: tokio::sync::Mutex<()>,
    refresh_lock: tokio::sync::Mutex<()>,
    /// What the server's last "session expired" answer was (HTTP).
    expiry: http::ExpiryNote,
}

impl std::fmt::Debug for McpInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpInstance")
            .field("agent", &self.agent)
            .field("session", &self.session)
            .field("name", &self.decl.name)
            .finish()
    }
}

fn rustls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn http_client() -> Result<reqwest::Client, String> {
    rustls_provider();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

fn header_map(cfg: &HttpConfig) -> Result<reqwest::header::HeaderMap, String> {
    let mut map = reqwest::header::HeaderMap::new();
    if let Some(h) = &cfg.headers {
        for (k, v) in h.iter() {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| format!("invalid header name {k:?}: {e}"))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|e| format!("invalid value for header {k}: {e}"))?;
            map.insert(name, value);
        }
    }
    Ok(map)
}

/// The cause after `e`, including the links rmcp keeps out of
/// `source()`: the transport error inside
/// `ClientInitializeError::TransportError`, the fallback attempt of
/// `LegacyFallbackFailed`, and the HTTP client's error inside
/// `StreamableHttpError::Client`. Without them the chain of a refused
/// connection ends at "error sending request" and never reaches the OS
/// error that says why.
fn next_cause<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match e.downcast_ref::<ClientInitializeError>() {
        Some(ClientInitializeError::TransportError { error, .. }) => return Some(error),
        Some(ClientInitializeError::LegacyFallbackFailed { fallback, .. }) => {
            return Some(fallback.as_ref());
        }
        _ => {}
    }
    if let Some(StreamableHttpError::Client(inner)) =
        e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        return Some(inner);
    }
    e.source()
}

/// Why `e` happened, short: the text of the innermost cause
/// (`Connection refused (os error 111)`), found through
/// [`next_cause`]. The outer layers only repeat the URL and name rmcp's
/// internals; callers give the context themselves (`cannot connect to
/// <url>: …`). An error without causes gives its own text, without
/// rmcp's transport type name (`Transport [wsbench::…] error:`).
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = next_cause(cur) {
        cur = next;
    }
    let text = cur.to_string();
    match text.find("Transport [") {
        Some(i) => match text[i..].find("] error: ") {
            Some(j) => format!("{}{}", &text[..i], &text[i + j + 9..]),
            None => text,
        },
        None => text,
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

impl McpInstance {
    pub(crate) fn new(
        agent: &str,
        session: &str,
        decl: McpDecl,
        env: Arc<InstanceEnv>,
    ) -> Arc<Self> {
        // The values as sent: the declaration keeps `${VAR}` references,
        // the connection uses them expanded.
        let redact = Redactor::for_decl(&decl.resolved().unwrap_or_else(|_| decl.clone()));
        let log = Arc::new(
            ServerLog::new(env.bus.clone(), &env.workspace, &decl.name)
                .with_redactor(redact.clone()),
        );
        Arc::new(McpInstance {
            redact,
            agent: agent.to_string(),
            session: session.to_string(),
            decl,
            env,
            log,
            inner: Mutex::new(Inner {
                state: McpState::Declared,
                tools: None,
                tools_epoch: 0,
                conn: None,
                failed_at: None,
                closed: false,
                starting: None,
                stops: 0,
                restarts: 0,
                exits: 0,
                lost_at: None,
            }),
            connect_lock: tokio::sync::Mutex::new(()),
            refresh_lock: tokio::sync::Mutex::new(()),
            expiry: Default::default(),
        })
    }

    /// Server name.
    pub fn name(&self) -> &str {
        &self.decl.name
    }

    /// The declaration this instance runs.
    pub fn decl(&self) -> &McpDecl {
        &self.decl
    }

    /// The server's log (skipped stdout lines, stderr, server log
    /// messages), oldest first.
    pub fn log_lines(&self) -> Vec<LogLine> {
        self.log.lines()
    }

    /// Current state.
    pub fn state(&self) -> McpState {
        self.inner.lock().expect("inner lock").state.clone()
    }

    /// True while a stateful session is connected (counts against the
    /// cap).
    pub fn is_live(&self) -> bool {
        self.inner.lock().expect("inner lock").conn.is_some()
    }

    /// Status snapshot.
    pub fn status(&self) -> McpStatus {
        let inner = self.inner.lock().expect("inner lock");
        McpStatus {
            name: self.decl.name.clone(),
            agent: self.agent.clone(),
            session: self.session.clone(),
            transport: self.decl.transport(),
            is_stateful: self.decl.is_stateful,
            expands: self.decl.referenced_vars(),
            state: inner.state.clone(),
            tools: inner
                .tools
                .as_deref()
                .map(|t| {
                    self.filtered(t)
                        .map(|t| qualified_name(&self.decl.name, &t.name))
                        .collect()
                })
                .unwrap_or_default(),
            process: inner
                .conn
                .as_ref()
                .and_then(|c| c.process.as_ref())
                .filter(|p| p.exited().is_none())
                .map(|p| p.id()),
            restarts: inner.restarts,
        }
    }

    fn set_state(&self, state: McpState) {
        let state = self.redacted(state);
        {
            let mut inner = self.inner.lock().expect("inner lock");
            if matches!(state, McpState::Failed { .. }) {
                inner.failed_at = Some(Instant::now());
            }
            inner.state = state.clone();
        }
        self.publish_state(&state);
    }

    /// `state` with its server text redacted: a failure's reason and
    /// stderr tail are server text, so secrets the server echoed never
    /// reach the bus, the status or the CLI.
    fn redacted(&self, state: McpState) -> McpState {
        match state {
            McpState::Failed {
                reason,
                exit_status,
                stderr_tail,
            } => McpState::Failed {
                reason: self.redact.apply_bounded(&reason),
                exit_status,
                stderr_tail: self.redact.apply(&stderr_tail),
            },
            McpState::Reconnecting { reason } => McpState::Reconnecting {
                reason: self.redact.apply_bounded(&reason),
            },
            other => other,
        }
    }

    /// Publishes the current state again (a newly declared server).
    pub(crate) fn announce(&self) {
        self.publish_state(&self.state());
    }

    fn publish_state(&self, state: &McpState) {
        self.env.bus.publish(
            &self.env.workspace,
            Event::McpState {
                agent: self.agent.clone(),
                session: self.session.clone(),
                server: self.decl.name.clone(),
                state: state.name().to_string(),
                detail: state.detail(),
            },
        );
    }

    fn visible(&self, tool: &str) -> bool {
        let enabled = self
            .decl
            .enable_tools
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == tool));
        let disabled = self
            .decl
            .disable_tools
            .as_ref()
            .is_some_and(|d| d.iter().any(|t| t == tool));
        enabled && !disabled
    }

    fn filtered<'a>(&'a self, tools: &'a [Tool]) -> impl Iterator<Item = &'a Tool> + 'a {
        tools.iter().filter(|t| self.visible(&t.name))
    }

    /// The tools offered (after `enable_tools` / `disable_tools`), from
    /// the last listing; empty before the first.
    pub fn tools(&self) -> Vec<McpToolInfo> {
        let inner = self.inner.lock().expect("inner lock");
        inner
            .tools
            .as_deref()
            .map(|tools| self.filtered(tools).map(|t| self.info(t)).collect())
            .unwrap_or_default()
    }

    fn info(&self, t: &Tool) -> McpToolInfo {
        McpToolInfo {
            name: qualified_name(&self.decl.name, &t.name),
            server: self.decl.name.clone(),
            tool: t.name.to_string(),
            description: t.description.as_deref().unwrap_or("").to_string(),
            input_schema: Value::Object((*t.input_schema).clone()),
            read_only: t
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
        }
    }

    fn start_cancelled(&self) -> McpError {
        McpError::StartCancelled {
            server: self.decl.name.clone(),
        }
    }

    fn unavailable(&self, reason: String) -> McpError {
        McpError::Unavailable {
            server: self.decl.name.clone(),
            reason: self.redact.apply_bounded(&reason),
        }
    }

    /// A JSON-RPC or protocol error of the server, its text redacted.
    fn server_error(&self, message: &str) -> McpError {
        McpError::Server {
            server: self.decl.name.clone(),
            message: self.redact.apply_bounded(message),
        }
    }

    fn current_conn(&self) -> Option<Arc<Connection>> {
        self.inner.lock().expect("inner lock").conn.clone()
    }
}

mod call;
mod connect;
mod heal;
mod http;
mod stop;

#[cfg(test)]
mod tests;
