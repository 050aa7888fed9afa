//! The live MCP servers of a workspace (contract §5.2): one instance per
//! (agent, session) and declaration, connected lazily on the first
//! listing, at most N live stateful instances with least-recently-used
//! eviction of *other* pairs, and the add / remove / purge operations
//! that change `.mcp`.
//!
//! Locking: the declaration store sits behind an async mutex held only
//! while it is read or saved; the map of live instances behind a plain
//! mutex never held across an await. Connecting happens outside both,
//! each instance behind its own lock, so one slow `npx` start never
//! stalls another session or server (the reference's weak point §11.6).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::{
    InstanceEnv, McpError, McpInstance, McpOptions, McpStatus, McpToolInfo, qualified_name,
    split_qualified,
};
use super::decl::{McpConfig, McpDecl};
use super::health::McpState;
use super::stdio::check_command;
use super::store::{McpIssue, McpStore, McpStoreError};
use crate::backend::Sandbox;
use crate::engine::base::WorkspaceBase;
use crate::engine::error::{WorkspaceError, WsResult};
use crate::engine::events::{Event, EventBus};
use crate::engine::journal::Journal;
use crate::engine::journal::{JournalCall, JournalEntry};
use crate::engine::message::{Block, DataBlock, DataSource, TextBlock, new_id};
use crate::engine::offload::Offload;
use crate::engine::tools::{ToolResult, ToolState};

/// The reference's default cap of live stateful instances.
pub const DEFAULT_MAX_LIVE_STATEFUL: usize = 40;

type PairKey = (String, String);

struct PairSlot {
    instances: HashMap<String, Arc<McpInstance>>,
    last_used: Instant,
}

/// Live MCP state of one workspace; held by the workspace, used through [`Mcp`].
pub struct McpRuntime {
    env: Arc<InstanceEnv>,
    defaults: Vec<McpDecl>,
    store: tokio::sync::Mutex<Option<McpStore>>,
    live: Mutex<HashMap<PairKey, PairSlot>>,
}

impl std::fmt::Debug for McpRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRuntime")
            .field("defaults", &self.defaults.len())
            .finish()
    }
}

impl McpRuntime {
    /// A runtime with no live server. `defaults` are the declarations of
    /// every pair that never diverged (contract §5.2).
    pub fn new(
        sandbox: Arc<dyn Sandbox>,
        bus: EventBus,
        workspace: &str,
        defaults: Vec<McpDecl>,
    ) -> Self {
        McpRuntime {
            env: Arc::new(InstanceEnv {
                sandbox,
                bus,
                workspace: workspace.to_string(),
                options: std::sync::RwLock::new(McpOptions::default()),
            }),
            defaults,
            store: tokio::sync::Mutex::new(None),
            live: Mutex::new(HashMap::new()),
        }
    }

    /// The cap of live stateful instances in force.
    pub fn max_live_stateful(&self) -> usize {
        self.env.options().max_live_stateful.unwrap_or_else(|| {
            let stateful = self.defaults.iter().filter(|d| d.is_stateful).count();
            DEFAULT_MAX_LIVE_STATEFUL.max(2 * stateful)
        })
    }

    /// Number of live stateful instances (connected or connecting).
    pub fn live_stateful(&self) -> usize {
        let live = self.live.lock().expect("live lock");
        live.values()
            .flat_map(|p| p.instances.values())
            .filter(|i| i.decl().is_stateful && counts(i))
            .count()
    }

    /// The instances of a pair for `declared`, created as needed, in
    /// declaration order; stamps the pair as used and evicts other pairs'
    /// instances beyond the cap. Instances whose declaration left or
    /// changed are taken out and returned for closing.
    fn slots(
        &self,
        agent: &str,
        session: &str,
        declared: &[McpDecl],
    ) -> (Vec<Arc<McpInstance>>, Vec<Arc<McpInstance>>) {
        let cap = self.max_live_stateful();
        let mut live = self.live.lock().expect("live lock");
        let key = (agent.to_string(), session.to_string());
        let slot = live.entry(key.clone()).or_insert_with(|| PairSlot {
            instances: HashMap::new(),
            last_used: Instant::now(),
        });
        slot.last_used = Instant::now();
        let mut gone = Vec::new();
        slot.instances.retain(|name, inst| {
            let keep = declared.iter().any(|d| &d.name == name && d == inst.decl());
            if !keep {
                gone.push(inst.clone());
            }
            keep
        });
        let mut out = Vec::with_capacity(declared.len());
        for d in declared {
            let inst = slot
                .instances
                .entry(d.name.clone())
                .or_insert_with(|| {
                    let i = McpInstance::new(agent, session, d.clone(), self.env.clone());
                    i.announce();
                    i
                })
                .clone();
            out.push(inst);
        }
        let wanted = out
            .iter()
            .filter(|i| i.decl().is_stateful && !counts(i))
            .count();
        let total: usize = live
            .values()
            .flat_map(|p| p.instances.values())
            .filter(|i| i.decl().is_stateful && counts(i))
            .count();
        let mut excess = (total + wanted).saturating_sub(cap);
        if excess > 0 {
            let mut others: Vec<(Instant, PairKey)> = live
                .iter()
                .filter(|(k, _)| **k != key)
                .map(|(k, p)| (p.last_used, k.clone()))
                .collect();
            others.sort();
            'pairs: for (_, k) in others {
                let Some(p) = live.get_mut(&k) else { continue };
                let names: Vec<String> = p
                    .instances
                    .iter()
                    .filter(|(_, i)| i.decl().is_stateful && counts(i))
                    .map(|(n, _)| n.clone())
                    .collect();
                for n in names {
                    if excess == 0 {
                        break 'pairs;
                    }
                    if let Some(i) = p.instances.remove(&n) {
                        self.log(
                            "info",
                            format!(
                                "evicting MCP server `{n}` of agent {:?}, session {:?} \
                                 (least recently used; cap of {cap} live servers)",
                                k.0, k.1
                            ),
                        );
                        gone.push(i);
                        excess -= 1;
                    }
                }
            }
            if excess > 0 {
                self.log(
                    "warn",
                    format!(
                        "agent {agent:?}, session {session:?} needs more live MCP servers than \
                         the cap of {cap}; the cap is exceeded"
                    ),
                );
            }
        }
        live.retain(|_, p| !p.instances.is_empty() || p.last_used.elapsed().as_secs() < 3600);
        (out, gone)
    }

    fn take_pairs(&self, pred: impl Fn(&PairKey) -> bool) -> Vec<Arc<McpInstance>> {
        let mut live = self.live.lock().expect("live lock");
        let keys: Vec<PairKey> = live.keys().filter(|k| pred(k)).cloned().collect();
        keys.into_iter()
            .filter_map(|k| live.remove(&k))
            .flat_map(|p| p.instances.into_values())
            .collect()
    }

    fn take_one(&self, agent: &str, session: &str, name: &str) -> Option<Arc<McpInstance>> {
        let mut live = self.live.lock().expect("live lock");
        live.get_mut(&(agent.to_string(), session.to_string()))
            .and_then(|p| p.instances.remove(name))
    }

    fn existing(&self, agent: &str, session: &str, name: &str) -> Option<Arc<McpInstance>> {
        let live = self.live.lock().expect("live lock");
        live.get(&(agent.to_string(), session.to_string()))
            .and_then(|p| p.instances.get(name).cloned())
    }

    fn log(&self, level: &str, message: String) {
        self.env.bus.publish(
            &self.env.workspace,
            Event::Log {
                level: level.to_string(),
                source: "mcp".to_string(),
                message,
            },
        );
    }
}

/// The status after an explicit start; a stop (or restart) that
/// cancelled it is what the user asked for, not a failure: the status is
/// then whatever that made of the server.
fn started(inst: &McpInstance, r: Result<(), McpError>) -> WsResult<McpStatus> {
    match r {
        Ok(()) | Err(McpError::StartCancelled { .. }) => Ok(inst.status()),
        Err(e) => Err(WorkspaceError::Invalid(e.to_string())),
    }
}

fn counts(i: &McpInstance) -> bool {
    i.is_live() || i.state() == McpState::Starting
}

async fn close_all(instances: Vec<Arc<McpInstance>>) {
    futures::future::join_all(instances.iter().map(|i| i.close())).await;
}

/// One MCP tool call through [`Mcp::call_tool`].
#[derive(Debug, Clone, Default)]
pub struct McpToolCall {
    /// Agent id (`""` for none).
    pub agent: String,
    /// Session id.
    pub session: String,
    /// Server name; `None` when `tool` is qualified (`mcp__<server>__<tool>`).
    pub server: Option<String>,
    /// Tool name: the server's own, or qualified.
    pub tool: String,
    /// Arguments object.
    pub args: Value,
    /// Call id; `None` mints one.
    pub call_id: Option<String>,
    /// Cancels the call (the server is sent `notifications/cancelled`).
    pub cancel: Option<CancellationToken>,
}

/// The MCP view of one (agent, session): servers and load problems.
#[derive(Debug, Clone, Serialize)]
pub struct McpListing {
    /// Agent id.
    pub agent: String,
    /// Session id.
    pub session: String,
    /// One entry per declared server, in declaration order.
    pub servers: Vec<McpStatus>,
    /// Problems of `.mcp` (bad entries are skipped and named here, C07).
    pub issues: Vec<String>,
}

/// The MCP servers of one workspace, reached through `Workspace::mcp`:
/// the live runtime plus what tool calls journal and offload through.
#[derive(Debug, Clone, Copy)]
pub struct Mcp<'a> {
    pub(super) runtime: &'a McpRuntime,
    pub(super) base: &'a WorkspaceBase,
    offload: &'a Offload,
}

impl<'a> Mcp<'a> {
    /// The handle over `runtime`; `base` and `offload` are the workspace's.
    pub fn new(runtime: &'a McpRuntime, base: &'a WorkspaceBase, offload: &'a Offload) -> Self {
        Mcp {
            runtime,
            base,
            offload,
        }
    }
}

impl<'a> Mcp<'a> {
    /// Tunables of this workspace's MCP clients.
    pub fn options(&self) -> McpOptions {
        self.runtime.env.options()
    }

    /// Replaces the MCP tunables; applies to connects and calls from now
    /// on (a new frame limit reaches stdio servers at their next start).
    pub fn set_options(&self, options: McpOptions) {
        *self.runtime.env.options.write().expect("options lock") = options;
    }

    /// The runtime (live counts, cap).
    pub fn runtime(&self) -> &'a McpRuntime {
        self.runtime
    }

    async fn store(&self) -> WsResult<tokio::sync::MutexGuard<'_, Option<McpStore>>> {
        let mut guard = self.runtime.store.lock().await;
        if guard.is_none() {
            *guard = Some(self.load_store().await?);
        }
        Ok(guard)
    }

    /// The declarations of a pair: its own if it diverged, else the
    /// defaults (contract §5.2).
    pub async fn declared(self, agent: &str, session: &str) -> WsResult<Vec<McpDecl>> {
        let guard = self.store().await?;
        let store = guard.as_ref().expect("loaded");
        Ok(store.declared(agent, session, &self.runtime.defaults))
    }

    /// Problems found loading `.mcp`.
    pub async fn issues(self) -> WsResult<Vec<McpIssue>> {
        let guard = self.store().await?;
        Ok(guard.as_ref().expect("loaded").issues().to_vec())
    }

    /// Status of a pair's servers without starting any.
    pub async fn status(self, agent: &str, session: &str) -> WsResult<McpListing> {
        let declared = self.declared(agent, session).await?;
        let servers = declared
            .iter()
            .map(|d| match self.runtime.existing(agent, session, &d.name) {
                Some(i) if i.decl() == d => i.status(),
                _ => McpStatus {
                    name: d.name.clone(),
                    agent: agent.to_string(),
                    session: session.to_string(),
                    transport: d.transport(),
                    is_stateful: d.is_stateful,
                    state: McpState::Declared,
                    tools: Vec::new(),
                    process: None,
                },
            })
            .collect();
        Ok(McpListing {
            agent: agent.to_string(),
            session: session.to_string(),
            servers,
            issues: self.issue_texts(agent, session).await?,
        })
    }

    async fn issue_texts(&self, agent: &str, session: &str) -> WsResult<Vec<String>> {
        Ok(self
            .issues()
            .await?
            .iter()
            .filter(|i| match &i.location {
                Some(loc) => {
                    loc.starts_with(&format!(
                        "mcps[{}][{}]",
                        serde_json::to_string(agent).unwrap_or_default(),
                        serde_json::to_string(session).unwrap_or_default()
                    )) || !loc.starts_with("mcps[")
                }
                None => true,
            })
            .map(|i| i.to_string())
            .collect())
    }

    /// The pair's live servers, connecting the missing ones lazily and
    /// concurrently (reference `list_mcps`, contract §5.2). Start
    /// failures are published and shown in the listing's states; they
    /// never fail the call.
    ///
    /// Errors: only when `.mcp` cannot be read because the sandbox is gone.
    pub async fn list(self, agent: &str, session: &str) -> WsResult<McpListing> {
        let declared = self.declared(agent, session).await?;
        let (instances, gone) = self.runtime.slots(agent, session, &declared);
        if !gone.is_empty() {
            tokio::spawn(close_all(gone));
        }
        let results =
            futures::future::join_all(instances.iter().map(|i| i.ensure_ready(false))).await;
        for (i, r) in instances.iter().zip(results) {
            if let Err(e) = r {
                self.runtime.log(
                    "warn",
                    format!(
                        "MCP server `{}` (agent {agent:?}, session {session:?}) skipped: {e}",
                        i.name()
                    ),
                );
            }
        }
        Ok(McpListing {
            agent: agent.to_string(),
            session: session.to_string(),
            servers: instances.iter().map(|i| i.status()).collect(),
            issues: self.issue_texts(agent, session).await?,
        })
    }

    /// The tools of the pair's ready servers, named `mcp__<server>__<tool>`
    /// and filtered by `enable_tools` / `disable_tools`; connects lazily
    /// like [`Mcp::list`].
    pub async fn tools(self, agent: &str, session: &str) -> WsResult<Vec<McpToolInfo>> {
        self.list(agent, session).await?;
        let declared = self.declared(agent, session).await?;
        Ok(declared
            .iter()
            .filter_map(|d| self.runtime.existing(agent, session, &d.name))
            .flat_map(|i| i.tools())
            .collect())
    }

    /// One server's instance for a pair, created (and the cap enforced)
    /// when missing.
    ///
    /// Errors: [`WorkspaceError::NotFound`] when the pair declares no
    /// such server.
    pub async fn instance(
        self,
        agent: &str,
        session: &str,
        name: &str,
    ) -> WsResult<Arc<McpInstance>> {
        let declared = self.declared(agent, session).await?;
        if !declared.iter().any(|d| d.name == name) {
            let names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
            return Err(WorkspaceError::NotFound(format!(
                "no MCP server `{name}` for agent {agent:?}, session {session:?} (declared: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
        let (instances, gone) = self.runtime.slots(agent, session, &declared);
        if !gone.is_empty() {
            tokio::spawn(close_all(gone));
        }
        Ok(instances
            .into_iter()
            .find(|i| i.name() == name)
            .expect("declared instance"))
    }

    /// The tools of one server (connecting it if needed).
    ///
    /// Errors: unknown server ([`WorkspaceError::NotFound`]); a server
    /// that cannot start ([`WorkspaceError::Invalid`] with its reason).
    pub async fn server_tools(
        self,
        agent: &str,
        session: &str,
        name: &str,
    ) -> WsResult<Vec<McpToolInfo>> {
        let inst = self.instance(agent, session, name).await?;
        inst.ensure_ready(false)
            .await
            .map_err(|e| WorkspaceError::Invalid(e.to_string()))?;
        Ok(inst.tools())
    }

    /// Starts one server now (an explicit start: a failed server is
    /// retried at once, a stopped one started again); a ready one is left
    /// as it is. A stop while it starts is not an error: the status then
    /// says `stopped`.
    ///
    /// Errors: unknown server ([`WorkspaceError::NotFound`]); the start
    /// failure ([`WorkspaceError::Invalid`] with its reason).
    pub async fn start(self, agent: &str, session: &str, name: &str) -> WsResult<McpStatus> {
        let inst = self.instance(agent, session, name).await?;
        started(&inst, inst.ensure_ready(true).await)
    }

    /// Stops one server: a start in progress is cancelled (a stdio
    /// server's process tree killed at once, not after the initialize
    /// timeout), a live session closed. It stays declared and
    /// `stopped` — listings and tool calls do not start it again — until
    /// [`Mcp::start`] or [`Mcp::restart`]. Returns
    /// once the process is gone.
    ///
    /// Errors: unknown server ([`WorkspaceError::NotFound`]).
    pub async fn stop(self, agent: &str, session: &str, name: &str) -> WsResult<McpStatus> {
        let inst = self.instance(agent, session, name).await?;
        inst.stop().await;
        Ok(inst.status())
    }

    /// Stops and starts one server again; a start in progress is
    /// cancelled first rather than waited for. A stop while it starts is
    /// not an error (the status says `stopped`).
    ///
    /// Errors: unknown server; the start failure.
    pub async fn restart(self, agent: &str, session: &str, name: &str) -> WsResult<McpStatus> {
        let inst = self.instance(agent, session, name).await?;
        started(&inst, inst.restart().await)
    }

    /// Checks a declaration before [`Mcp::add`] saves it —
    /// the one check behind both `wsbench mcp add` and the TUI's add
    /// form, so neither writes a server into `.mcp` that could never
    /// start:
    ///
    /// * [`McpDecl::validate`] (name, stdio ⇒ stateful, tool lists, URL);
    /// * the name is not yet declared for the pair;
    /// * a stdio command exists on the backend and is executable, and
    ///   its `cwd` exists ([`super::stdio::check_command`]; skipped when
    ///   an `env` value refers to a variable that is not set, since the
    ///   environment the server will get is then unknown).
    ///
    /// Nothing is started or written.
    ///
    /// Errors: [`WorkspaceError::Invalid`] naming the server and the
    /// problem; `.mcp` unreadable because the sandbox is gone.
    pub async fn check_decl(self, decl: &McpDecl, agent: &str, session: &str) -> WsResult<()> {
        decl.validate().map_err(|source| {
            WorkspaceError::from(McpStoreError::Invalid {
                name: decl.name.clone(),
                source,
            })
        })?;
        if self
            .declared(agent, session)
            .await?
            .iter()
            .any(|d| d.name == decl.name)
        {
            return Err(McpStoreError::Duplicate {
                name: decl.name.clone(),
                agent: agent.to_string(),
                session: session.to_string(),
            }
            .into());
        }
        if let Ok(resolved) = decl.resolved()
            && let McpConfig::Stdio(cfg) = &resolved.mcp_config
        {
            check_command(self.base.sandbox().as_ref(), cfg)
                .await
                .map_err(|why| {
                    WorkspaceError::Invalid(format!(
                        "MCP server `{}` cannot be added: {why}",
                        decl.name
                    ))
                })?;
        }
        Ok(())
    }

    /// Calls an MCP tool, with the bus events and the journal line of a
    /// built-in tool call. The result is the tool's content (text, and
    /// images/audio/blobs as data blocks); `isError` gives an error
    /// result. Text over [`McpOptions::max_result_chars`] is written whole
    /// to a tool-result file of the session and cut in the result, which
    /// names the file (contract §6; C04). Never fails: problems are error
    /// results (unknown tool, server down, timeout); a cancel gives an
    /// interrupted result.
    pub async fn call_tool(self, call: McpToolCall) -> ToolResult {
        let call_id = call.call_id.clone().unwrap_or_else(|| {
            format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        });
        if let Err(e) = crate::engine::layout::check_session_id(&call.session) {
            return ToolResult::error(e.to_string());
        }
        let resolved = self.resolve_tool(&call).await;
        let qualified = match &resolved {
            Ok((server, tool)) => qualified_name(server, tool),
            Err(_) => call.tool.clone(),
        };
        let started_at = chrono::Utc::now();
        let t0 = Instant::now();
        self.base.publish(Event::ToolStarted {
            call_id: call_id.clone(),
            agent: call.agent.clone(),
            session: call.session.clone(),
            tool: qualified.clone(),
            args: call.args.clone(),
        });
        let result = match resolved {
            Err(msg) => ToolResult::error(msg),
            Ok((server, tool)) => self.run_mcp_call(&call, &server, &tool, &call_id).await,
        };
        let duration_ms = t0.elapsed().as_millis() as u64;
        self.base.publish(Event::ToolFinished {
            call_id: call_id.clone(),
            tool: qualified.clone(),
            state: result.state.as_str().to_string(),
            duration_ms,
        });
        let entry = JournalEntry::from_result(
            JournalCall {
                call_id,
                agent: call.agent.clone(),
                session: call.session.clone(),
                tool: qualified,
                args: call.args,
            },
            &result,
            started_at,
            duration_ms,
        );
        if let Err(e) = Journal::new(self.base).append(&entry).await {
            self.runtime.log(
                "warn",
                format!(
                    "could not append to the journal of session {}: {e}",
                    entry.session
                ),
            );
        }
        result
    }

    async fn resolve_tool(&self, call: &McpToolCall) -> Result<(String, String), String> {
        if let Some(server) = &call.server {
            let tool = call
                .tool
                .strip_prefix(&qualified_name(server, ""))
                .unwrap_or(&call.tool);
            return Ok((server.clone(), tool.to_string()));
        }
        let declared = self
            .declared(&call.agent, &call.session)
            .await
            .map_err(|e| e.to_string())?;
        let mut best: Option<(String, String)> = None;
        for d in &declared {
            if let Some(tool) = call.tool.strip_prefix(&qualified_name(&d.name, ""))
                && !tool.is_empty()
                && best.as_ref().is_none_or(|(s, _)| s.len() < d.name.len())
            {
                best = Some((d.name.clone(), tool.to_string()));
            }
        }
        best.or_else(|| split_qualified(&call.tool).map(|(s, t)| (s.to_string(), t.to_string())))
            .ok_or_else(|| {
                format!(
                    "`{}` is not an MCP tool name (expected mcp__<server>__<tool>)",
                    call.tool
                )
            })
    }

    async fn run_mcp_call(
        &self,
        call: &McpToolCall,
        server: &str,
        tool: &str,
        call_id: &str,
    ) -> ToolResult {
        let args: JsonObject = match &call.args {
            Value::Object(m) => m.clone(),
            Value::Null => JsonObject::new(),
            other => {
                return ToolResult::error(format!(
                    "arguments of an MCP tool must be a JSON object, got {other}"
                ));
            }
        };
        let inst = match self.instance(&call.agent, &call.session, server).await {
            Ok(i) => i,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        let cancel = call.cancel.clone().unwrap_or_default();
        match inst.call(tool, args, cancel).await {
            Ok(r) => self.mcp_result(&call.session, call_id, r).await,
            Err(McpError::Cancelled) => ToolResult {
                state: ToolState::Interrupted,
                ..ToolResult::ok("The MCP tool call was cancelled.")
            },
            Err(e @ McpError::Timeout { .. }) => ToolResult {
                timed_out: true,
                ..ToolResult::error(e.to_string())
            },
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    async fn mcp_result(&self, session: &str, call_id: &str, r: CallToolResult) -> ToolResult {
        let mut content = Vec::new();
        for block in r.content {
            match block {
                ContentBlock::Text(t) => content.push(Block::Text(TextBlock::new(t.text))),
                ContentBlock::Image(i) => content.push(data_block(i.data, i.mime_type, None)),
                ContentBlock::Audio(a) => content.push(data_block(a.data, a.mime_type, None)),
                ContentBlock::Resource(e) => match e.resource {
                    ResourceContents::TextResourceContents { text, .. } => {
                        content.push(Block::Text(TextBlock::new(text)))
                    }
                    ResourceContents::BlobResourceContents {
                        uri,
                        mime_type,
                        blob,
                        ..
                    } => content.push(data_block(
                        blob,
                        mime_type.unwrap_or_else(|| "application/octet-stream".into()),
                        Some(uri),
                    )),
                    other => content.push(Block::Text(TextBlock::new(
                        serde_json::to_string(&other).unwrap_or_default(),
                    ))),
                },
                ContentBlock::ResourceLink(l) => content.push(Block::Text(TextBlock::new(
                    format!("<resource uri='{}' name='{}'/>", l.uri, l.name),
                ))),
                other => content.push(Block::Text(TextBlock::new(
                    serde_json::to_string(&other).unwrap_or_default(),
                ))),
            }
        }
        let mut result = ToolResult::ok("");
        result.content = content;
        if r.is_error == Some(true) {
            result.state = ToolState::Error;
        }
        if let Some(s) = r.structured_content {
            result.metadata.insert("structured_content".into(), s);
        }
        let text = result.text();
        result.output_bytes = text.len() as u64;
        let limit = self.options().max_result_chars;
        if text.chars().count() > limit {
            match self
                .offload
                .tool_result_stream(
                    session,
                    call_id,
                    Box::new(std::io::Cursor::new(text.clone().into_bytes())),
                )
                .await
            {
                Ok(path) => {
                    let kept: String = text.chars().take(limit).collect();
                    let data: Vec<Block> = result
                        .content
                        .iter()
                        .filter(|b| matches!(b, Block::Data(_)))
                        .cloned()
                        .collect();
                    result.content = vec![Block::Text(TextBlock::new(format!(
                        "{kept}\n<<<TRUNCATED>>> The full result ({} bytes) is in {path}",
                        text.len()
                    )))];
                    result.content.extend(data);
                    result.offload_path = Some(path);
                }
                Err(e) => self.runtime.log(
                    "warn",
                    format!("could not offload a large MCP result of session {session}: {e}"),
                ),
            }
        }
        result
    }

    /// Declares `decl` for a pair and saves `.mcp` (reference `add_mcp`,
    /// contract §1) after [`Mcp::check_decl`]: a stateful
    /// server is started first when `connect`, and a start failure leaves
    /// `.mcp` unchanged.
    ///
    /// Errors: what [`Mcp::check_decl`] refuses (invalid
    /// declaration, duplicate name, stdio command not found); start failure
    /// ([`WorkspaceError::Invalid`] naming the reason); `.mcp` not
    /// writable or not understood ([`WorkspaceError::Parse`] /
    /// [`WorkspaceError::Backend`]).
    pub async fn add(
        self,
        decl: McpDecl,
        agent: &str,
        session: &str,
        connect: bool,
    ) -> WsResult<McpStatus> {
        self.check_decl(&decl, agent, session).await?;
        let inst = McpInstance::new(agent, session, decl.clone(), self.runtime.env.clone());
        if connect && decl.is_stateful {
            // Make room as a listing would, then start it.
            let mut declared = self.declared(agent, session).await?;
            declared.push(decl.clone());
            let (_, gone) = self
                .runtime
                .slots(agent, session, &declared[..declared.len() - 1]);
            if !gone.is_empty() {
                tokio::spawn(close_all(gone));
            }
            if let Err(e) = inst.ensure_ready(true).await {
                inst.close().await;
                return Err(WorkspaceError::Invalid(e.to_string()));
            }
        }
        let saved = self
            .mutate_store(|store, defaults| {
                store
                    .add(agent, session, decl.clone(), defaults)
                    .map(|_| true)
            })
            .await;
        if let Err(e) = saved {
            inst.close().await;
            return Err(e);
        }
        {
            let mut live = self.runtime.live.lock().expect("live lock");
            let slot = live
                .entry((agent.to_string(), session.to_string()))
                .or_insert_with(|| PairSlot {
                    instances: HashMap::new(),
                    last_used: Instant::now(),
                });
            slot.last_used = Instant::now();
            if let Some(old) = slot.instances.insert(decl.name.clone(), inst.clone()) {
                tokio::spawn(async move { old.close().await });
            }
        }
        if inst.state() == McpState::Declared {
            inst.announce();
        }
        Ok(inst.status())
    }

    /// Removes a server from a pair, closes its live instance and saves
    /// `.mcp` (reference `remove_mcp`). Returns whether it was declared;
    /// an unknown name is a logged no-op.
    ///
    /// Errors: `.mcp` not writable or not understood.
    pub async fn remove(self, name: &str, agent: &str, session: &str) -> WsResult<bool> {
        let removed = self
            .mutate_store(|store, defaults| Ok(store.remove(agent, session, name, defaults)))
            .await?;
        if let Some(inst) = self.runtime.take_one(agent, session, name) {
            inst.close().await;
        }
        if !removed {
            self.runtime.log(
                "warn",
                format!("no MCP server `{name}` for agent {agent:?}, session {session:?}; nothing removed"),
            );
        }
        Ok(removed)
    }

    /// Closes a pair's servers and forgets its declarations (it falls back
    /// to the defaults); saves `.mcp` when the pair had its own
    /// (reference `purge_session`). Best effort: problems are logged.
    pub async fn purge_session(self, agent: &str, session: &str) {
        let (a, s) = (agent.to_string(), session.to_string());
        close_all(self.runtime.take_pairs(|k| k.0 == a && k.1 == s)).await;
        if let Err(e) = self
            .mutate_store(|store, _| Ok(store.purge_session(agent, session)))
            .await
        {
            self.runtime.log(
                "warn",
                format!("purging MCP declarations of session {session:?}: {e}"),
            );
        }
    }

    /// Closes every server of an agent and forgets all its sessions'
    /// declarations. Best effort: problems are logged.
    pub async fn purge_agent(self, agent: &str) {
        let a = agent.to_string();
        close_all(self.runtime.take_pairs(|k| k.0 == a)).await;
        if let Err(e) = self
            .mutate_store(|store, _| {
                let mut any = false;
                for (pa, ps) in store.pairs() {
                    if pa == agent {
                        any |= store.purge_session(&pa, &ps);
                    }
                }
                Ok(any)
            })
            .await
        {
            self.runtime.log(
                "warn",
                format!("purging MCP declarations of agent {agent:?}: {e}"),
            );
        }
    }

    /// Closes every live server (workspace close / reset).
    pub async fn close(self) {
        close_all(self.runtime.take_pairs(|_| true)).await;
    }

    /// Closes every live server and forgets the loaded declarations, so
    /// `.mcp` is read again on next use (after `Workspace::reset`).
    pub async fn reset(self) {
        self.close().await;
        *self.runtime.store.lock().await = None;
    }

    /// Applies `op` to the store and saves when it reports a change. When
    /// `.mcp` changed on disk meanwhile, reloads it and applies `op` once
    /// more, so another process's edit is kept.
    async fn mutate_store(
        &self,
        op: impl Fn(&mut McpStore, &[McpDecl]) -> Result<bool, McpStoreError>,
    ) -> WsResult<bool> {
        let mut guard = self.store().await?;
        let mut retried = false;
        loop {
            let mut store = guard.clone().expect("loaded");
            let changed = op(&mut store, &self.runtime.defaults)?;
            if !changed {
                return Ok(false);
            }
            match store
                .save(self.base.sandbox().as_ref(), self.base.layout())
                .await
            {
                Ok(()) => {
                    *guard = Some(store);
                    return Ok(true);
                }
                Err(McpStoreError::ChangedOnDisk { .. }) if !retried => {
                    retried = true;
                    *guard = Some(self.load_store().await?);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn data_block(data: String, media_type: String, name: Option<String>) -> Block {
    Block::Data(DataBlock {
        id: new_id(),
        source: DataSource::Base64 { data, media_type },
        name,
        created_at: None,
        finished_at: None,
        extra: Default::default(),
    })
}
