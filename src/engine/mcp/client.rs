//! One live MCP server for one (agent, session): connect, list, call,
//! refresh on `notifications/tools/list_changed`, restart, close.
//!
//! Every [`McpInstance`] has its own connect lock, so a slow server
//! never blocks another server or another session (contract §11 point
//! 6); the runtime never holds a workspace-wide lock across a connect.
//!
//! Stateful servers keep one rmcp session; stateless HTTP servers get a
//! fresh session per operation (contract §5.1), with their tool list
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
    /// tool-result file and cut in the returned result (contract §6).
    /// Default 100 000.
    pub max_result_chars: usize,
    /// Cap of live stateful instances; `None` = the reference's
    /// `max(40, 2 × stateful defaults)` (contract §1).
    pub max_live_stateful: Option<usize>,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            init_timeout: Duration::from_secs(30),
            max_frame_bytes: stdio::DEFAULT_MAX_FRAME_BYTES,
            stderr_tail_bytes: stdio::DEFAULT_STDERR_TAIL_BYTES,
            retry_failed_after: Duration::from_secs(30),
            max_result_chars: 100_000,
            max_live_stateful: None,
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
    /// The call ran past `execution_timeout`.
    #[error("MCP tool `{tool}` of `{server}` timed out after {secs}s (execution_timeout)")]
    Timeout {
        /// Server name.
        server: String,
        /// Tool name.
        tool: String,
        /// The timeout.
        secs: f64,
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
}

/// One server of one (agent, session).
pub struct McpInstance {
    agent: String,
    session: String,
    decl: McpDecl,
    env: Arc<InstanceEnv>,
    log: Arc<ServerLog>,
    inner: Mutex<Inner>,
    connect_lock: tokio::sync::Mutex<()>,
    refresh_lock: tokio::sync::Mutex<()>,
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
        let log = Arc::new(ServerLog::new(env.bus.clone(), &env.workspace, &decl.name));
        Arc::new(McpInstance {
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
            }),
            connect_lock: tokio::sync::Mutex::new(()),
            refresh_lock: tokio::sync::Mutex::new(()),
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
        }
    }

    fn set_state(&self, state: McpState) {
        {
            let mut inner = self.inner.lock().expect("inner lock");
            if matches!(state, McpState::Failed { .. }) {
                inner.failed_at = Some(Instant::now());
            }
            inner.state = state.clone();
        }
        self.publish_state(&state);
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
            reason,
        }
    }

    fn current_conn(&self) -> Option<Arc<Connection>> {
        self.inner.lock().expect("inner lock").conn.clone()
    }

    /// Makes the server usable: connects a stateful one (once; callers
    /// racing here wait for the same connect), lists a stateless one's
    /// tools once. A failed server is retried only when `force` or
    /// after [`McpOptions::retry_failed_after`]; a stopped one only when
    /// `force`.
    ///
    /// Errors: [`McpError::Unavailable`] with the failure detail;
    /// [`McpError::StartCancelled`] when a stop, restart, removal or
    /// close cancelled this start.
    pub async fn ensure_ready(self: &Arc<Self>, force: bool) -> Result<(), McpError> {
        if let Some(e) = self.ready_or_blocked(force) {
            return e;
        }
        let stops = self.inner.lock().expect("inner lock").stops;
        let _guard = self.connect_lock.lock().await;
        if let Some(e) = self.ready_or_blocked(force) {
            return e;
        }
        let cancel = CancellationToken::new();
        {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.stops != stops {
                return Err(self.start_cancelled());
            }
            inner.starting = Some(cancel.clone());
        }
        self.set_state(McpState::Starting);
        let opts = self.env.options();
        let result = if self.decl.is_stateful {
            self.connect_stateful(&opts, &cancel).await
        } else {
            self.list_stateless(&opts, &cancel).await
        };
        let closed = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.starting = None;
            inner.closed
        };
        match result {
            Ok(()) => Ok(()),
            Err(_) if closed || cancel.is_cancelled() => {
                self.set_stopped();
                Err(self.start_cancelled())
            }
            Err(state) => {
                let reason = state.detail().unwrap_or_default();
                self.set_state(state);
                Err(self.unavailable(reason))
            }
        }
    }

    /// `Some(result)` when no connect is needed (or allowed) now.
    fn ready_or_blocked(&self, force: bool) -> Option<Result<(), McpError>> {
        let inner = self.inner.lock().expect("inner lock");
        if inner.closed {
            return Some(Err(self.unavailable("it was stopped".into())));
        }
        if !force && inner.state == McpState::Stopped {
            // Stopped by the user: only an explicit start brings it back.
            return Some(Err(self.unavailable(
                "it was stopped; start or restart it to use it again".into(),
            )));
        }
        let ready = if self.decl.is_stateful {
            inner.conn.as_ref().is_some_and(|c| c.alive()) && inner.tools.is_some()
        } else {
            inner.tools.is_some() && inner.state.is_ready()
        };
        if ready {
            return Some(Ok(()));
        }
        if !force
            && let McpState::Failed { .. } = &inner.state
            && inner
                .failed_at
                .is_some_and(|t| t.elapsed() < self.env.options().retry_failed_after)
        {
            return Some(Err(
                self.unavailable(inner.state.detail().unwrap_or_default())
            ));
        }
        None
    }

    /// Starts the transport and runs `initialize`. A `cancel` while it
    /// runs kills a stdio server's process tree at once and gives
    /// [`McpState::Stopped`].
    async fn open(
        self: &Arc<Self>,
        opts: &McpOptions,
        cancel: &CancellationToken,
    ) -> Result<Arc<Connection>, McpState> {
        let failed = |reason: String| McpState::Failed {
            reason,
            exit_status: None,
            stderr_tail: String::new(),
        };
        let decl = self
            .decl
            .resolved()
            .map_err(|e| failed(format!("configuration error: {e}")))?;
        let epoch = Arc::new(AtomicU64::new(0));
        let handler = Handler {
            inst: Arc::downgrade(self),
            log: self.log.clone(),
            conn_epoch: epoch.clone(),
        };
        let init = opts.init_timeout;
        let timed_out = || failed(format!("no answer to initialize within {}s", secs(init)));
        match &decl.mcp_config {
            McpConfig::Stdio(cfg) => {
                let (transport, process) = stdio::start(
                    self.env.sandbox.as_ref(),
                    cfg,
                    StdioOptions {
                        max_frame_bytes: opts.max_frame_bytes,
                        stderr_tail_bytes: opts.stderr_tail_bytes,
                    },
                    self.log.clone(),
                )
                .await
                .map_err(|e| failed(format!("cannot start the server: {e}")))?;
                let tap = Tap {
                    inner: transport,
                    epoch: epoch.clone(),
                };
                let served =
                    match or_cancel(cancel, tokio::time::timeout(init, handler.serve(tap))).await {
                        Some(served) => served,
                        None => {
                            process.kill().await;
                            return Err(McpState::Stopped);
                        }
                    };
                match served {
                    Ok(Ok(running)) => Ok(self.connection(running, Some(process), epoch)),
                    Ok(Err(e)) => Err(died_or(
                        &process,
                        format!("initialize failed: {}", root_cause(&e)),
                    )
                    .await),
                    Err(_) => {
                        process.kill().await;
                        let mut st = timed_out();
                        if let McpState::Failed {
                            stderr_tail,
                            exit_status,
                            ..
                        } = &mut st
                        {
                            *stderr_tail = process.stderr_now();
                            *exit_status = process.exited().flatten();
                        }
                        Err(st)
                    }
                }
            }
            McpConfig::Http(cfg) => {
                // The declaration's HTTP timeout bounds the connect.
                let init = cfg
                    .timeout
                    .filter(|t| *t > 0.0)
                    .map(Duration::from_secs_f64)
                    .map_or(init, |t| t.min(init));
                let timed_out =
                    || failed(format!("no answer to initialize within {}s", secs(init)));
                let client = http_client().map_err(failed)?;
                let headers =
                    header_map(cfg).map_err(|e| failed(format!("configuration error: {e}")))?;
                let served = match cfg.transport() {
                    McpTransport::Sse => {
                        let t = or_cancel(
                            cancel,
                            tokio::time::timeout(
                                init,
                                SseTransport::connect(
                                    client,
                                    &cfg.url,
                                    headers,
                                    init,
                                    self.log.clone(),
                                ),
                            ),
                        )
                        .await
                        .ok_or(McpState::Stopped)?
                        .map_err(|_| timed_out())?
                        .map_err(|e| failed(sse_failure(&cfg.url, &e)))?;
                        let tap = Tap {
                            inner: t,
                            epoch: epoch.clone(),
                        };
                        or_cancel(cancel, tokio::time::timeout(init, handler.serve(tap)))
                            .await
                            .ok_or(McpState::Stopped)?
                    }
                    _ => {
                        let mut config =
                            StreamableHttpClientTransportConfig::with_uri(cfg.url.as_str());
                        config.custom_headers = headers
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect::<HashMap<_, _>>();
                        config.max_json_response_size = opts.max_frame_bytes;
                        config.max_sse_event_size = opts.max_frame_bytes;
                        let t = StreamableHttpClientTransport::with_client(client, config);
                        let tap = Tap {
                            inner: t,
                            epoch: epoch.clone(),
                        };
                        or_cancel(cancel, tokio::time::timeout(init, handler.serve(tap)))
                            .await
                            .ok_or(McpState::Stopped)?
                    }
                };
                match served {
                    Ok(Ok(running)) => Ok(self.connection(running, None, epoch)),
                    Ok(Err(e)) => Err(failed(format!(
                        "cannot connect to {}: {}",
                        cfg.url,
                        root_cause(&e)
                    ))),
                    Err(_) => Err(timed_out()),
                }
            }
        }
    }

    fn connection(
        &self,
        running: Connected,
        process: Option<StdioProcess>,
        epoch: Arc<AtomicU64>,
    ) -> Arc<Connection> {
        Arc::new(Connection {
            peer: running.peer().clone(),
            running: Mutex::new(Some(running)),
            process,
            epoch,
        })
    }

    async fn connect_stateful(
        self: &Arc<Self>,
        opts: &McpOptions,
        cancel: &CancellationToken,
    ) -> Result<(), McpState> {
        let old = self.inner.lock().expect("inner lock").conn.take();
        if let Some(old) = old {
            tokio::spawn(async move { old.shutdown().await });
        }
        let conn = self.open(opts, cancel).await?;
        let Some(listed) = or_cancel(
            cancel,
            tokio::time::timeout(opts.init_timeout, conn.peer.list_all_tools()),
        )
        .await
        else {
            conn.shutdown().await;
            return Err(McpState::Stopped);
        };
        let tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                let st = match &conn.process {
                    Some(p) => died_or(p, format!("tools/list failed: {}", root_cause(&e))).await,
                    None => failed_plain(format!("tools/list failed: {}", root_cause(&e))),
                };
                conn.shutdown().await;
                return Err(st);
            }
            Err(_) => {
                conn.shutdown().await;
                return Err(failed_plain(format!(
                    "no answer to tools/list within {}s",
                    secs(opts.init_timeout)
                )));
            }
        };
        let count = tools.iter().filter(|t| self.visible(&t.name)).count();
        let closed = {
            // Under the lock a stop takes to cancel: either it sees this
            // connection and shuts it, or this sees its cancel.
            let mut inner = self.inner.lock().expect("inner lock");
            let closed = inner.closed || cancel.is_cancelled();
            if !closed {
                inner.tools_epoch = conn.epoch.load(Ordering::SeqCst);
                inner.tools = Some(tools);
                inner.conn = Some(conn.clone());
                inner.failed_at = None;
            }
            closed
        };
        if closed {
            conn.shutdown().await;
            return Err(McpState::Stopped);
        }
        self.set_state(McpState::Ready { tool_count: count });
        self.watch_exit(conn);
        Ok(())
    }

    /// Marks the instance failed the moment its stdio process dies on
    /// its own (not when we closed it).
    fn watch_exit(self: &Arc<Self>, conn: Arc<Connection>) {
        if conn.process.is_none() {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let Some(p) = &conn.process else { return };
            p.wait_for_exit().await;
            let Some(inst) = weak.upgrade() else { return };
            let still_current = {
                let inner = inst.inner.lock().expect("inner lock");
                !inner.closed && inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn))
            };
            if still_current {
                let status = p.exited().flatten();
                let tail = p.stderr_tail(Duration::from_millis(500)).await;
                let reason = match status {
                    Some(code) => format!("the server process exited with status {code}"),
                    None => "the server process exited".to_string(),
                };
                inst.inner.lock().expect("inner lock").conn = None;
                inst.log.warn(&reason);
                inst.set_state(McpState::Failed {
                    reason,
                    exit_status: status,
                    stderr_tail: tail,
                });
            }
        });
    }

    async fn list_stateless(
        self: &Arc<Self>,
        opts: &McpOptions,
        cancel: &CancellationToken,
    ) -> Result<(), McpState> {
        let conn = self.open(opts, cancel).await?;
        let listed = or_cancel(
            cancel,
            tokio::time::timeout(opts.init_timeout, conn.peer.list_all_tools()),
        )
        .await;
        conn.shutdown().await;
        let Some(listed) = listed else {
            return Err(McpState::Stopped);
        };
        let tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                return Err(failed_plain(format!(
                    "tools/list failed: {}",
                    root_cause(&e)
                )));
            }
            Err(_) => {
                return Err(failed_plain(format!(
                    "no answer to tools/list within {}s",
                    secs(opts.init_timeout)
                )));
            }
        };
        let count = tools.iter().filter(|t| self.visible(&t.name)).count();
        {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.closed || cancel.is_cancelled() {
                return Err(McpState::Stopped);
            }
            inner.tools = Some(tools);
            inner.failed_at = None;
        }
        self.set_state(McpState::Ready { tool_count: count });
        Ok(())
    }

    /// Lists the tools again and replaces the cached list (C05); emits
    /// a `ready` state event with the new count. `only_if` names the
    /// connection's change counter when called for a notification, so a
    /// stale notification of an old connection does nothing.
    pub(crate) async fn refresh_tools(self: &Arc<Self>, only_if: Option<Arc<AtomicU64>>) {
        let _g = self.refresh_lock.lock().await;
        let Some(conn) = self.current_conn() else {
            return;
        };
        if let Some(e) = &only_if
            && !Arc::ptr_eq(e, &conn.epoch)
        {
            return;
        }
        let seen = conn.epoch.load(Ordering::SeqCst);
        if self.inner.lock().expect("inner lock").tools_epoch == seen && only_if.is_some() {
            // Already refreshed for this change by a caller.
            return;
        }
        let timeout = self.env.options().init_timeout;
        match tokio::time::timeout(timeout, conn.peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let count = tools.iter().filter(|t| self.visible(&t.name)).count();
                let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
                {
                    let mut inner = self.inner.lock().expect("inner lock");
                    inner.tools = Some(tools);
                    inner.tools_epoch = seen;
                }
                self.log
                    .info(&format!("tool list changed; now: {}", names.join(", ")));
                if self.state().is_ready() {
                    self.set_state(McpState::Ready { tool_count: count });
                }
            }
            Ok(Err(e)) => self
                .log
                .warn(&format!("tools/list after a list change failed: {e}")),
            Err(_) => self.log.warn("tools/list after a list change timed out"),
        }
    }

    /// Calls `tool` (the server's own name) with `args`. Honours
    /// `execution_timeout` and `cancel` (a cancelled or timed-out call
    /// sends `notifications/cancelled`). A tool list change announced
    /// before this call is applied first, so newly added tools can be
    /// called at once (C05).
    ///
    /// Errors: see [`McpError`]; a server that dies during the call makes
    /// it fail at once with its exit status and stderr tail.
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: JsonObject,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        self.ensure_ready(false).await?;
        let conn = if self.decl.is_stateful {
            let conn = self
                .current_conn()
                .ok_or_else(|| self.unavailable("it is not connected".into()))?;
            let stale = conn.epoch.load(Ordering::SeqCst)
                != self.inner.lock().expect("inner lock").tools_epoch;
            if stale {
                self.refresh_tools(None).await;
            }
            Some(conn)
        } else {
            None
        };
        self.check_tool(tool)?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let timeout = self.decl.execution_timeout.map(Duration::from_secs_f64);
        let (conn, temporary) = match conn {
            Some(c) => (c, false),
            None => {
                let opts = self.env.options();
                let c = self
                    .open(&opts, &CancellationToken::new())
                    .await
                    .map_err(|st| self.unavailable(st.detail().unwrap_or_default()))?;
                (c, true)
            }
        };
        let result = self.call_on(&conn, tool, params, timeout, cancel).await;
        if temporary {
            conn.shutdown().await;
        }
        result
    }

    fn check_tool(&self, tool: &str) -> Result<(), McpError> {
        let inner = self.inner.lock().expect("inner lock");
        let tools = inner.tools.as_deref().unwrap_or_default();
        if !tools.iter().any(|t| t.name == tool) {
            return Err(McpError::UnknownTool {
                server: self.decl.name.clone(),
                tool: tool.to_string(),
                available: self
                    .filtered(tools)
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if !self.visible(tool) {
            return Err(McpError::Disabled {
                server: self.decl.name.clone(),
                tool: tool.to_string(),
            });
        }
        Ok(())
    }

    async fn call_on(
        self: &Arc<Self>,
        conn: &Arc<Connection>,
        tool: &str,
        params: CallToolRequestParams,
        timeout: Option<Duration>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        // Dropping rmcp's call future sends notifications/cancelled.
        let call = conn.peer.call_tool(params);
        let timed = async {
            match timeout {
                Some(t) => tokio::time::timeout(t, call).await.map_err(|_| t),
                None => Ok(call.await),
            }
        };
        let outcome = tokio::select! {
            r = timed => r,
            _ = cancel.cancelled() => return Err(McpError::Cancelled),
        };
        match outcome {
            Err(t) => Err(McpError::Timeout {
                server: self.decl.name.clone(),
                tool: tool.to_string(),
                secs: t.as_secs_f64(),
            }),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(ServiceError::McpError(e))) => Err(McpError::Server {
                server: self.decl.name.clone(),
                message: e.message.to_string(),
            }),
            Ok(Err(e)) => {
                if let Some(p) = &conn.process {
                    let st = died_or(p, format!("the call failed: {e}")).await;
                    let reason = st.detail().unwrap_or_default();
                    if p.exited().is_some() {
                        let current = {
                            let mut inner = self.inner.lock().expect("inner lock");
                            let cur = inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn));
                            if cur {
                                inner.conn = None;
                            }
                            cur
                        };
                        if current {
                            self.set_state(st);
                        }
                    }
                    return Err(self.unavailable(format!("during `{tool}`: {reason}")));
                }
                Err(McpError::Server {
                    server: self.decl.name.clone(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// Closes the session and kills a stdio server's process tree; the
    /// instance is [`McpState::Stopped`] for good (the runtime drops it).
    /// A start in progress is cancelled (its process killed) rather than
    /// waited for.
    pub async fn close(&self) {
        self.inner.lock().expect("inner lock").closed = true;
        self.halt().await;
    }

    /// Stops the server: cancels a start in progress (killing the
    /// process tree of a stdio server that has not answered yet), or
    /// closes the live session. The instance stays, [`McpState::Stopped`]:
    /// listings and tool calls leave it stopped (they fail with "it was
    /// stopped") until [`McpInstance::ensure_ready`] with `force` or
    /// [`McpInstance::restart`] starts it again. Returns once the process
    /// is gone.
    pub async fn stop(&self) {
        self.halt().await;
    }

    /// Cancels a start, waits for it to clean up, shuts the session.
    async fn halt(&self) {
        let starting = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.stops += 1;
            inner.starting.take()
        };
        if let Some(t) = starting {
            t.cancel();
        }
        self.set_stopped();
        // The cancelled start kills its process before it lets go.
        let _guard = self.connect_lock.lock().await;
        let conn = {
            let mut inner = self.inner.lock().expect("inner lock");
            inner.tools = None;
            inner.conn.take()
        };
        if let Some(conn) = conn {
            conn.shutdown().await;
        }
        // Again: a start that won the race may have set `ready`.
        self.set_stopped();
    }

    fn set_stopped(&self) {
        if self.state() != McpState::Stopped {
            self.set_state(McpState::Stopped);
        }
    }

    /// Stops a live session and starts it again (clears a failure and a
    /// stop). A start in progress is cancelled first, not waited for.
    ///
    /// Errors: as [`McpInstance::ensure_ready`].
    pub async fn restart(self: &Arc<Self>) -> Result<(), McpError> {
        let starting = self.inner.lock().expect("inner lock").starting.take();
        if let Some(t) = starting {
            t.cancel();
        }
        let _guard = self.connect_lock.lock().await;
        let conn = {
            let mut inner = self.inner.lock().expect("inner lock");
            if inner.closed {
                return Err(self.unavailable("it was stopped".into()));
            }
            inner.tools = None;
            inner.conn.take()
        };
        if let Some(conn) = conn {
            conn.shutdown().await;
        }
        self.set_state(McpState::Declared);
        drop(_guard);
        self.ensure_ready(true).await
    }
}

/// The reason an SSE stream could not be opened: an unreachable server
/// is named with the root cause, as for streamable HTTP; a bad status or
/// protocol error speaks for itself.
fn sse_failure(url: &str, e: &super::sse::SseError) -> String {
    match e {
        super::sse::SseError::Http { .. } => {
            format!("cannot connect to {url}: {}", root_cause(e))
        }
        other => other.to_string(),
    }
}

/// `f`'s output, or `None` as soon as `cancel` fires (`f` is dropped).
async fn or_cancel<F: Future>(cancel: &CancellationToken, f: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        out = f => Some(out),
    }
}

fn failed_plain(reason: String) -> McpState {
    McpState::Failed {
        reason,
        exit_status: None,
        stderr_tail: String::new(),
    }
}

/// The failure of a stdio session: when the process has exited (or does
/// so very soon), its exit status and stderr tail say why (C01);
/// otherwise `fallback`, and the process is killed.
async fn died_or(p: &StdioProcess, fallback: String) -> McpState {
    match p.wait_exit(Duration::from_millis(1500)).await {
        Some(status) => {
            let tail = p.stderr_tail(Duration::from_millis(1000)).await;
            let reason = match status {
                Some(code) => format!("the server process exited with status {code}"),
                None => "the server process exited".to_string(),
            };
            McpState::Failed {
                reason,
                exit_status: status,
                stderr_tail: tail,
            }
        }
        None => {
            let tail = p.stderr_now();
            p.kill().await;
            McpState::Failed {
                reason: fallback,
                exit_status: p.exited().flatten(),
                stderr_tail: tail,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_round_trip() {
        assert_eq!(qualified_name("docs", "search"), "mcp__docs__search");
        assert_eq!(
            split_qualified("mcp__docs__search"),
            Some(("docs", "search"))
        );
        assert_eq!(
            split_qualified("mcp__my-srv__get__x"),
            Some(("my-srv", "get__x"))
        );
        assert_eq!(split_qualified("mcp__docs__"), None);
        assert_eq!(split_qualified("Bash"), None);
    }
}
