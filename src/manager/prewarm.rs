//! The optional pre-warm pool (docs/contract.md §8.4): workspaces provisioned
//! ahead of demand, handed out once to callers that need a fresh id
//! (per_session, [`WorkspaceManager::create`](super::WorkspaceManager::create)).
//!
//! Differences from the reference, on purpose: a take never waits for a
//! slot that is still building (it falls back to a plain provisioning, so
//! a pool never makes a caller slower than no pool), a workspace whose
//! initialisation fails is destroyed at once (it holds no user data yet),
//! and every unclaimed workspace is destroyed on shutdown, in-flight
//! builds included, so the pool never leaks a sandbox.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::heal::HealingSandbox;
use super::{Inner, Request, labels as mlabels, lock};
use crate::backend::{ProvisionSpec, Provisioner, Sandbox, labels};
use crate::engine::events::{Event, EventBus, WorkspaceState};
use crate::engine::{Workspace, WorkspaceConfig};

/// Pool size and build concurrency (`PrewarmConfig` of docs/contract.md §8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrewarmConfig {
    /// Ready workspaces to keep waiting; 0 turns the pool off.
    pub size: usize,
    /// Builds running at once (at least 1).
    pub max_creating: usize,
}

impl Default for PrewarmConfig {
    fn default() -> Self {
        PrewarmConfig {
            size: 0,
            max_creating: 4,
        }
    }
}

/// A provisioned, initialised workspace nobody has claimed yet.
pub(crate) struct Prewarmed {
    pub(crate) ws: Arc<Workspace>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) created_at: SystemTime,
}

struct PoolState {
    ready: VecDeque<Prewarmed>,
    building: usize,
    closed: bool,
    tasks: JoinSet<()>,
}

/// The pool. Build tasks hold an `Arc` of it, never of the manager.
pub(crate) struct PrewarmPool {
    config: PrewarmConfig,
    provisioner: Arc<dyn Provisioner>,
    bus: EventBus,
    workspace: WorkspaceConfig,
    profile: String,
    permits: Arc<Semaphore>,
    state: Mutex<PoolState>,
    /// The manager, set once it exists ([`PrewarmPool::attach`]); weak, so
    /// the pool never keeps it alive. Its sandboxes are wrapped in a
    /// [`HealingSandbox`] for it, so a claimed workspace heals like any.
    manager: OnceLock<Weak<Inner>>,
}

impl PrewarmPool {
    pub(crate) fn new(
        config: PrewarmConfig,
        provisioner: Arc<dyn Provisioner>,
        bus: EventBus,
        workspace: WorkspaceConfig,
        profile: String,
    ) -> Arc<Self> {
        Arc::new(PrewarmPool {
            permits: Arc::new(Semaphore::new(config.max_creating.max(1))),
            config,
            provisioner,
            bus,
            workspace,
            profile,
            manager: OnceLock::new(),
            state: Mutex::new(PoolState {
                ready: VecDeque::new(),
                building: 0,
                closed: false,
                tasks: JoinSet::new(),
            }),
        })
    }

    /// Ties the pool to the manager that owns it; builds started before
    /// this make workspaces that do not heal. Later calls are ignored.
    pub(super) fn attach(&self, manager: &Arc<Inner>) {
        let _ = self.manager.set(Arc::downgrade(manager));
    }

    /// Starts builds until ready + building reaches the pool size. Needs a
    /// Tokio runtime.
    pub(crate) fn refill(self: &Arc<Self>) {
        let mut st = lock(&self.state);
        // Reap finished build tasks so the set does not grow.
        while st.tasks.try_join_next().is_some() {}
        while !st.closed && st.ready.len() + st.building < self.config.size {
            st.building += 1;
            let pool = self.clone();
            st.tasks.spawn(async move { pool.build_one().await });
        }
    }

    /// Takes the oldest ready workspace, if any, and refills behind it.
    pub(crate) fn take(self: &Arc<Self>) -> Option<Prewarmed> {
        let got = lock(&self.state).ready.pop_front();
        self.refill();
        got
    }

    /// Ready workspaces right now.
    pub(crate) fn ready_len(&self) -> usize {
        lock(&self.state).ready.len()
    }

    async fn build_one(self: Arc<Self>) {
        let built = match self.permits.clone().acquire_owned().await {
            Ok(_permit) => self.build().await,
            Err(_) => None,
        };
        let dispose_now = {
            let mut st = lock(&self.state);
            st.building -= 1;
            match built {
                Some(p) if st.closed => Some(p),
                Some(p) => {
                    st.ready.push_back(p);
                    None
                }
                None => None,
            }
        };
        if let Some(p) = dispose_now {
            self.dispose(p).await;
        }
    }

    /// One workspace with a fresh id and no user; `None` (after an event)
    /// on failure — the slot is dropped and refilled on the next take.
    async fn build(&self) -> Option<Prewarmed> {
        let id = super::isolation::mint_workspace_id();
        let mut labels = BTreeMap::new();
        labels.insert(labels::PROFILE.to_string(), self.profile.clone());
        labels.insert(mlabels::PREWARM.to_string(), "true".to_string());
        let spec = ProvisionSpec {
            workspace_id: id.clone(),
            labels: labels.clone(),
        };
        self.bus.publish(
            &id,
            Event::Workspace {
                state: WorkspaceState::Provisioning,
            },
        );
        let sandbox = match self.provisioner.create(&spec).await {
            Ok(s) => s,
            Err(e) => {
                self.bus.publish(
                    &id,
                    Event::Workspace {
                        state: WorkspaceState::Failed {
                            reason: format!("pre-warm: {e}"),
                        },
                    },
                );
                return None;
            }
        };
        let config = WorkspaceConfig {
            workspace_id: Some(id.clone()),
            ..self.workspace.clone()
        };
        // Healing, like every managed workspace (issue 15); the request
        // names no user: a recovery reprovisions with the pool's labels,
        // the ones the claimed sandbox carries.
        let heal = self.manager.get().map(|m| {
            let req = Request {
                id: id.clone(),
                user: String::new(),
                agent: String::new(),
                session: String::new(),
                labels: labels.clone(),
            };
            HealingSandbox::wrap_weak(m.clone(), req, sandbox.clone())
        });
        let opened: Arc<dyn Sandbox> = match &heal {
            Some(h) => h.clone(),
            None => sandbox,
        };
        // `Provisioning` is published above, before the sandbox is made.
        match Workspace::open_provisioned(opened, config, self.bus.clone()).await {
            Ok(ws) => {
                if let Some(h) = &heal {
                    h.bind(&ws);
                }
                labels.insert(labels::WORKSPACE_ID.to_string(), id);
                Some(Prewarmed {
                    ws,
                    labels,
                    created_at: SystemTime::now(),
                })
            }
            Err(_) => {
                // Workspace::open_provisioned already published the failure; the
                // sandbox holds nothing of a user's, so it goes.
                self.destroy(&id).await;
                None
            }
        }
    }

    async fn dispose(&self, p: Prewarmed) {
        p.ws.close().await;
        self.destroy(p.ws.id()).await;
    }

    async fn destroy(&self, id: &str) {
        match self.provisioner.destroy(id).await {
            Ok(()) => self.bus.publish(
                id,
                Event::Workspace {
                    state: WorkspaceState::Destroyed,
                },
            ),
            Err(e) => self.bus.publish(
                id,
                Event::Log {
                    level: "warn".into(),
                    source: "manager.prewarm".into(),
                    message: format!("disposing pre-warmed workspace {id}: {e}"),
                },
            ),
        }
    }

    /// Stops refilling, waits for builds in flight (not cancelled: a
    /// cancelled create could leave a half-made sandbox behind) and
    /// destroys every unclaimed workspace.
    pub(crate) async fn shutdown(&self) {
        let (ready, mut tasks) = {
            let mut st = lock(&self.state);
            st.closed = true;
            (std::mem::take(&mut st.ready), std::mem::take(&mut st.tasks))
        };
        futures::future::join_all(ready.into_iter().map(|p| self.dispose(p))).await;
        // Builds finishing now see `closed` and dispose of their result.
        while tasks.join_next().await.is_some() {}
    }
}
