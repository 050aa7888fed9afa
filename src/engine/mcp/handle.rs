//! The MCP handle of a workspace (`Workspace::mcp`): the declarations
//! of each (agent, session), their live servers, and the changes to
//! `.mcp` (add, remove, purge, reset).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::client::{McpInstance, McpOptions, McpStatus, McpToolInfo};
use super::decl::{McpConfig, McpDecl};
use super::health::McpState;
use super::runtime::{McpRuntime, PairSlot, close_all, started};
use super::stdio::check_command;
use super::store::{McpIssue, McpStore, McpStoreError};
use crate::engine::base::WorkspaceBase;
use crate::engine::error::{WorkspaceError, WsResult};
use crate::engine::offload::Offload;

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
    pub(super) offload: &'a Offload,
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

    pub(super) async fn store(&self) -> WsResult<tokio::sync::MutexGuard<'_, Option<McpStore>>> {
        let mut guard = self.runtime.store.lock().await;
        if guard.is_none() {
            *guard = Some(self.load_store().await?);
        }
        Ok(guard)
    }

    /// The declarations of a pair: its own if it diverged, else the
    /// defaults (docs/contract.md §5.2).
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
                    restarts: 0,
                    expands: d.referenced_vars(),
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

    pub(super) async fn issue_texts(&self, agent: &str, session: &str) -> WsResult<Vec<String>> {
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
    /// concurrently (reference `list_mcps`, docs/contract.md §5.2). Start
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

    /// Declares `decl` for a pair and saves `.mcp` (reference `add_mcp`,
    /// docs/contract.md §1) after [`Mcp::check_decl`]: a stateful
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

    /// Reads `.mcp` again now: servers another process added or removed
    /// (`wsbench mcp add` while the TUI runs) show in the next listing;
    /// a live server whose declaration changed or went away is rebuilt or
    /// closed by that listing, the others keep running.
    ///
    /// Errors: only when `.mcp` cannot be read because the sandbox is gone.
    pub async fn reload(self) -> WsResult<()> {
        let mut guard = self.runtime.store.lock().await;
        *guard = Some(self.load_store().await?);
        Ok(())
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
    pub(super) async fn mutate_store(
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
