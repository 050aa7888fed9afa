//! The cache and single-flight provisioning: a hit reads the cache
//! under a read lock; a miss provisions once per id however many callers
//! race (a shared future per id), reattaching or creating the sandbox and
//! opening the workspace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use futures::FutureExt;

use super::heal::HealingSandbox;
use super::hold::CloseWhy;
use super::lease::Entry;
use super::{
    CloseAction, Flight, FlightOutput, Inner, ManagerError, Request, labels, lock, read, write,
};
use crate::backend::{BackendError, ProvisionSpec, Sandbox, SandboxState, labels as blabels};
use crate::engine::events::{Event, WorkspaceState};
use crate::engine::{Workspace, WorkspaceConfig};

impl Inner {
    /// The hot path: one read lock, one hash lookup, one atomic.
    pub(super) fn hit(&self, id: &str) -> Option<Arc<Workspace>> {
        let cache = read(&self.cache);
        let e = cache.get(id)?;
        e.touch();
        Some(e.ws.clone())
    }

    pub(super) fn cached(&self, id: &str) -> Option<Arc<Entry>> {
        read(&self.cache).get(id).cloned()
    }

    pub(super) fn request(&self, id: String, user: &str, agent: &str, session: &str) -> Request {
        Request {
            labels: self.labels_for(user, agent, session),
            id,
            user: user.to_string(),
            agent: agent.to_string(),
            session: session.to_string(),
        }
    }

    /// The slow path: joins or starts the provisioning of `req.id`.
    pub(super) async fn load(self: &Arc<Self>, req: Request) -> FlightOutput {
        self.ensure_started();
        let flight = {
            let mut flights = lock(&self.flights);
            // Re-check under the flights lock: a provisioning that just
            // finished inserted into the cache before leaving the map.
            if let Some(e) = self.cached(&req.id) {
                e.touch();
                return Ok(e);
            }
            if self.shut.load(Ordering::Acquire) {
                return Err(ManagerError::ShutDown(self.profile.clone()));
            }
            match flights.get(&req.id) {
                Some(f) => f.clone(),
                None => {
                    let id = req.id.clone();
                    let f = self.start_flight(req);
                    flights.insert(id, f.clone());
                    f
                }
            }
        };
        flight.await
    }

    /// Spawns the provisioning, so it completes (and is cached or
    /// reported) even if every caller gives up waiting.
    pub(super) fn start_flight(self: &Arc<Self>, req: Request) -> Flight {
        let inner = self.clone();
        let id = req.id.clone();
        Self::spawn_flight(id, async move {
            let id = req.id.clone();
            let result = inner.provision(req).await;
            inner.finish_flight(&id, result)
        })
    }

    /// Runs `work` (which ends with [`Inner::finish_flight`]) as a task
    /// and shares its outcome; a panic reaches every waiter as
    /// [`ManagerError::Task`]. Provisioning and recovery (`heal.rs`) both
    /// fly this way.
    pub(super) fn spawn_flight(
        id: String,
        work: impl Future<Output = FlightOutput> + Send + 'static,
    ) -> Flight {
        let task = tokio::spawn(work);
        async move {
            task.await.unwrap_or_else(|e| {
                Err(ManagerError::Task {
                    id,
                    message: e.to_string(),
                })
            })
        }
        .boxed()
        .shared()
    }

    pub(super) fn finish_flight(self: &Arc<Self>, id: &str, result: FlightOutput) -> FlightOutput {
        let mut flights = lock(&self.flights);
        let result = match result {
            Ok(entry) if self.shut.load(Ordering::Acquire) => {
                // Landed after shutdown: close it instead of caching it.
                entry.mark_removed();
                let inner = self.clone();
                self.tracker.spawn(async move {
                    let _ = inner.close_entry(entry, CloseWhy::Exit).await;
                });
                Err(ManagerError::ShutDown(self.profile.clone()))
            }
            Ok(entry) => {
                write(&self.cache).insert(id.to_string(), entry.clone());
                Ok(entry)
            }
            Err(e) => Err(e),
        };
        flights.remove(id);
        result
    }

    pub(super) async fn provision(self: &Arc<Self>, req: Request) -> FlightOutput {
        let id = req.id.clone();
        self.bus.publish(
            &id,
            Event::Workspace {
                state: WorkspaceState::Provisioning,
            },
        );
        self.wait_closing(&id).await;
        // Held before the sandbox is looked up, so a process suspending
        // it now finishes first and we resume it (`hold.rs`).
        let found = match self.hold(&id).await {
            Ok(hold) => self.attach_or_create(&req).await.map(|x| (x, hold)),
            Err(e) => Err(e),
        };
        let ((sandbox, labels, created_at, reattached), hold) = match found {
            Ok(x) => x,
            Err(e) => {
                self.bus.publish(
                    &id,
                    Event::Workspace {
                        state: WorkspaceState::Failed {
                            reason: e.to_string(),
                        },
                    },
                );
                return Err(ManagerError::Provision {
                    id,
                    backend: self.kind,
                    source: Arc::new(e),
                });
            }
        };
        let config = WorkspaceConfig {
            workspace_id: Some(id.clone()),
            ..self.opts.workspace.clone()
        };
        // Every managed workspace heals (issue 15): the wrapper recovers a
        // sandbox that dies under a long-lived holder.
        let heal = HealingSandbox::wrap(self, req.clone(), sandbox);
        // `Provisioning` is published above, before the sandbox is made.
        match Workspace::open_provisioned(heal.clone(), config, self.bus.clone()).await {
            Ok(ws) => {
                heal.bind(&ws);
                // A reattached workspace keeps the identity its labels
                // give; a caller's names only fill what is missing.
                let pick = |k: &str, given: String| {
                    if reattached {
                        labels
                            .get(k)
                            .cloned()
                            .filter(|v| !v.is_empty())
                            .unwrap_or(given)
                    } else {
                        given
                    }
                };
                let user = pick(blabels::USER, req.user);
                let agent = pick(blabels::AGENT, req.agent);
                let session = pick(labels::SESSION, req.session);
                let entry = Entry::new(ws, user, agent, session, labels, created_at, self.epoch);
                entry.set_hold(hold);
                Ok(Arc::new(entry))
            }
            Err(e) => {
                // Workspace::open_provisioned published the failure. Never destroy:
                // the sandbox may hold the user's data; never leave it
                // running either (docs/contract.md §11 point 16).
                if self.opts.close_action == CloseAction::Suspend
                    && let Some(_sole) = self.may_suspend(&id, CloseWhy::Exit, hold)
                    && let Err(se) = self.provisioner.suspend(&id).await
                {
                    self.log_warn(&id, format!("suspending after a failed start: {se}"));
                }
                Err(ManagerError::Open {
                    id,
                    source: Arc::new(e),
                })
            }
        }
    }

    #[allow(clippy::type_complexity)]
    pub(super) async fn attach_or_create(
        &self,
        req: &Request,
    ) -> Result<(Arc<dyn Sandbox>, BTreeMap<String, String>, SystemTime, bool), BackendError> {
        let prov = &self.provisioner;
        match prov.find(&req.id).await? {
            Some(info) if !matches!(info.state, SandboxState::Failed(_)) => {
                let sandbox = prov.attach(&info).await?;
                self.bus.publish(
                    &req.id,
                    Event::Workspace {
                        state: WorkspaceState::Reattached,
                    },
                );
                let created = info.created_at.unwrap_or_else(SystemTime::now);
                Ok((sandbox, info.labels, created, true))
            }
            _ => {
                let spec = ProvisionSpec {
                    workspace_id: req.id.clone(),
                    labels: req.labels.clone(),
                };
                let sandbox = prov.create(&spec).await?;
                // Before the layout is made: files here outlived the old
                // sandbox (a kept bind mount, volume or PVC).
                let files_kept =
                    matches!(sandbox.list(sandbox.workdir()).await, Ok(l) if !l.is_empty());
                self.bus.publish(
                    &req.id,
                    Event::Workspace {
                        state: WorkspaceState::Created { files_kept },
                    },
                );
                let mut labels = req.labels.clone();
                labels.insert(blabels::WORKSPACE_ID.to_string(), req.id.clone());
                Ok((sandbox, labels, SystemTime::now(), false))
            }
        }
    }

    pub(super) fn log_warn(&self, id: &str, message: String) {
        self.bus.publish(
            id,
            Event::Log {
                level: "warn".into(),
                source: "manager".into(),
                message,
            },
        );
    }

    /// Waits for a provisioning of `id` in flight, whatever its outcome.
    pub(super) async fn wait_flight(&self, id: &str) {
        let pending = lock(&self.flights).get(id).cloned();
        if let Some(f) = pending {
            let _ = f.await;
        }
    }
}
