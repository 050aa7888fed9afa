//! The live MCP servers of a workspace (docs/contract.md §5.2): one instance per
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

use super::client::{InstanceEnv, McpError, McpInstance, McpOptions, McpStatus};
use super::decl::McpDecl;
use super::health::McpState;
use super::store::McpStore;
use crate::backend::Sandbox;
use crate::engine::error::{WorkspaceError, WsResult};
use crate::engine::events::{Event, EventBus};

/// The reference's default cap of live stateful instances.
pub const DEFAULT_MAX_LIVE_STATEFUL: usize = 40;

pub(super) type PairKey = (String, String);

pub(super) struct PairSlot {
    pub(super) instances: HashMap<String, Arc<McpInstance>>,
    pub(super) last_used: Instant,
}

/// Live MCP state of one workspace; held by the workspace, used through [`Mcp`].
pub struct McpRuntime {
    pub(super) env: Arc<InstanceEnv>,
    pub(super) defaults: Vec<McpDecl>,
    pub(super) store: tokio::sync::Mutex<Option<McpStore>>,
    pub(super) live: Mutex<HashMap<PairKey, PairSlot>>,
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
    /// every pair that never diverged (docs/contract.md §5.2).
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
    pub(super) fn slots(
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

    pub(super) fn take_pairs(&self, pred: impl Fn(&PairKey) -> bool) -> Vec<Arc<McpInstance>> {
        let mut live = self.live.lock().expect("live lock");
        let keys: Vec<PairKey> = live.keys().filter(|k| pred(k)).cloned().collect();
        keys.into_iter()
            .filter_map(|k| live.remove(&k))
            .flat_map(|p| p.instances.into_values())
            .collect()
    }

    pub(super) fn take_one(
        &self,
        agent: &str,
        session: &str,
        name: &str,
    ) -> Option<Arc<McpInstance>> {
        let mut live = self.live.lock().expect("live lock");
        live.get_mut(&(agent.to_string(), session.to_string()))
            .and_then(|p| p.instances.remove(name))
    }

    pub(super) fn existing(
        &self,
        agent: &str,
        session: &str,
        name: &str,
    ) -> Option<Arc<McpInstance>> {
        let live = self.live.lock().expect("live lock");
        live.get(&(agent.to_string(), session.to_string()))
            .and_then(|p| p.instances.get(name).cloned())
    }

    pub(super) fn log(&self, level: &str, message: String) {
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
pub(super) fn started(inst: &McpInstance, r: Result<(), McpError>) -> WsResult<McpStatus> {
    match r {
        Ok(()) | Err(McpError::StartCancelled { .. }) => Ok(inst.status()),
        Err(e) => Err(WorkspaceError::Invalid(e.to_string())),
    }
}

pub(super) fn counts(i: &McpInstance) -> bool {
    i.is_live() || i.state() == McpState::Starting
}

pub(super) async fn close_all(instances: Vec<Arc<McpInstance>>) {
    futures::future::join_all(instances.iter().map(|i| i.close())).await;
}
