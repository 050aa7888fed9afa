//! The workspace manager: which workspace a `(user, agent, session)` gets,
//! keeping workspaces warm, evicting idle ones and bringing them back
//! (docs/contract.md §8).
//!
//! One generic [`WorkspaceManager`] serves every backend through the
//! [`Provisioner`] trait; what differs per backend is data: the directory
//! layout and reattach key live in the provisioner, the eviction mode
//! ([`EvictionMode`]) and what closing does to a sandbox ([`CloseAction`])
//! in [`ManagerOptions`], derived from the backend kind and its
//! [`ProvisionerCapabilities`].
//!
//! Fixes over the reference (docs/contract.md §11):
//! * point 5 — no manager-wide lock around provisioning. The cache is a
//!   `std::sync::RwLock<HashMap>` read on a hit (no await, never held by a
//!   provisioning); a miss provisions once per id however many callers
//!   race (a shared future per id), while other ids proceed. A failure
//!   reaches every waiter and is not cached.
//! * point 14 — [`Lease`]s: a leased workspace is never evicted.
//! * point 15 — provider keep-alive is renewed while a workspace is leased.
//! * point 16 — a failed initialisation never destroys a sandbox (it may
//!   hold a user's data) and never leaves it running (it is suspended
//!   where the backend can).
//! * point 13 — nothing per-pair is kept but the per_session bindings,
//!   which are dropped with their workspace on destroy.
//! * issue 15 — a workspace heals: every workspace runs on a
//!   [`heal::HealingSandbox`] that recovers a sandbox found gone or
//!   stopped, once per id, and repeats the call when that is safe.
//! * point 26 — ids, not raw agent ids, decide where a workspace lives;
//!   see [`layout::local_layout`].

mod assign;
pub mod display;
mod error;
mod evict;
mod flight;
mod gc;
mod heal;
mod hold;
pub mod isolation;
mod keepalive;
pub mod layout;
pub mod lease;
mod list;
mod options;
pub mod prewarm;
mod source;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, Shared};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use assign::explicit;
pub use error::ManagerError;
use error::backend_err;
pub use gc::{GcFinding, GcKind};
pub use isolation::{IsolationPolicy, assign_workspace_id};
use lease::Entry;
pub use lease::Lease;
pub use list::WorkspaceInfo;
pub use options::{
    CloseAction, DEFAULT_KEEP_ALIVE, DEFAULT_SWEEP_INTERVAL, DEFAULT_TTL, EvictionMode,
    ManagerOptions,
};
pub use prewarm::PrewarmConfig;
use prewarm::PrewarmPool;
pub use source::ManagedSource;

use crate::backend::{
    BackendKind, BackendNotice, Provisioner, ProvisionerCapabilities, labels as blabels,
};
use crate::engine::Workspace;
use crate::engine::events::{Event, EventBus, WorkspaceState};

/// Label keys the manager adds besides the backend's well-known ones
/// ([`crate::backend::labels`]).
pub mod labels {
    /// Session id, on per_session workspaces (how a later process finds a
    /// session's workspace again).
    pub const SESSION: &str = "wsbench.session";
    /// `"true"` on workspaces built by the pre-warm pool.
    pub(crate) const PREWARM: &str = "wsbench.prewarm";
    /// Isolation policy the workspace was assigned under (`per_agent`,
    /// ...); the local layout picks the directory from it.
    pub(crate) const ISOLATION: &str = "wsbench.isolation";
}

type FlightOutput = Result<Arc<Entry>, ManagerError>;
type Flight = Shared<BoxFuture<'static, FlightOutput>>;
type Closing = Shared<BoxFuture<'static, Result<(), ManagerError>>>;
type SessionKey = (String, String, String);

/// What to provision for one id.
#[derive(Clone)]
struct Request {
    id: String,
    user: String,
    agent: String,
    session: String,
    labels: BTreeMap<String, String>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Inner {
    profile: String,
    provisioner: Arc<dyn Provisioner>,
    kind: BackendKind,
    caps: ProvisionerCapabilities,
    opts: ManagerOptions,
    bus: EventBus,
    epoch: Instant,
    /// Open workspaces. Read on every hit; written only for a moment
    /// (insert, remove, eviction pick), never across an await.
    cache: RwLock<HashMap<String, Arc<Entry>>>,
    /// Provisionings in progress, one shared future per id.
    flights: Mutex<HashMap<String, Flight>>,
    /// Closes in progress; a provisioning of the same id waits for them
    /// so a late suspend cannot land on a freshly resumed sandbox.
    closing: Arc<Mutex<HashMap<String, (u64, Closing)>>>,
    close_seq: AtomicU64,
    /// per_session: which workspace each session got.
    sessions: RwLock<HashMap<SessionKey, Arc<OnceCell<String>>>>,
    next_collect_ms: AtomicU64,
    shut: AtomicBool,
    sweeper_started: AtomicBool,
    prewarm_started: AtomicBool,
    cancel: CancellationToken,
    /// Background closes (on-access evictions) that shutdown waits for.
    tracker: TaskTracker,
    prewarm: Option<Arc<PrewarmPool>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.cancel.cancel();
        // Best effort when the owner forgot `shutdown()`: unclaimed
        // pre-warmed workspaces are destroyed on the runtime if one is
        // still there.
        if let Some(pool) = self.prewarm.clone()
            && !self.shut.load(Ordering::Acquire)
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move { pool.shutdown().await });
        }
    }
}

/// The workspace manager of one profile. Cheap to clone (all clones share
/// one cache). Create it inside a Tokio runtime (the sweeper otherwise
/// starts on first use). The pre-warm pool starts filling on the first
/// provisioning, or at once with [`WorkspaceManager::warm_up`].
///
/// Call [`WorkspaceManager::shutdown`] before exit: it stops the sweeper,
/// destroys unclaimed pre-warmed workspaces and closes (suspends, where
/// the backend can) every open workspace, like the reference's
/// `__aexit__`.
#[derive(Clone)]
pub struct WorkspaceManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WorkspaceManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceManager")
            .field("profile", &self.inner.profile)
            .field("backend", &self.inner.kind)
            .field("isolation", &self.inner.opts.isolation)
            .field("open", &read(&self.inner.cache).len())
            .finish()
    }
}

impl WorkspaceManager {
    /// A manager for `profile` over `provisioner`, publishing every
    /// transition on `bus` (workspaces publish their own events there too,
    /// and the provisioner its [`BackendNotice`]s, as `Event::Log` lines:
    /// this sets its notice sink, replacing one an earlier manager on the
    /// same provisioner set).
    pub fn new(
        profile: impl Into<String>,
        provisioner: Arc<dyn Provisioner>,
        mut opts: ManagerOptions,
        bus: EventBus,
    ) -> Self {
        let profile = profile.into();
        // The backend's own notices (a Pod's phase, an image that cannot
        // be pulled) become log lines on the bus, next to the workspace's
        // events.
        let notices = bus.clone();
        provisioner.set_notice_sink(Arc::new(move |n: BackendNotice| {
            notices.publish(
                &n.workspace_id,
                Event::Log {
                    level: n.level.as_str().into(),
                    source: n.source,
                    message: n.message,
                },
            )
        }));
        // A zero period would make `tokio::time::interval` panic.
        opts.sweep_interval = opts.sweep_interval.max(Duration::from_millis(1));
        opts.workspace.workspace_id = None;
        let prewarm = (opts.prewarm.size > 0).then(|| {
            PrewarmPool::new(
                opts.prewarm,
                provisioner.clone(),
                bus.clone(),
                opts.workspace.clone(),
                profile.clone(),
            )
        });
        let inner = Arc::new(Inner {
            kind: provisioner.kind(),
            caps: provisioner.capabilities(),
            profile,
            provisioner,
            opts,
            bus,
            epoch: Instant::now(),
            cache: RwLock::new(HashMap::new()),
            flights: Mutex::new(HashMap::new()),
            closing: Arc::new(Mutex::new(HashMap::new())),
            close_seq: AtomicU64::new(0),
            sessions: RwLock::new(HashMap::new()),
            next_collect_ms: AtomicU64::new(0),
            shut: AtomicBool::new(false),
            sweeper_started: AtomicBool::new(false),
            prewarm_started: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            prewarm,
        });
        if let Some(pool) = &inner.prewarm {
            pool.attach(&inner);
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            inner.start_sweeper();
        }
        WorkspaceManager { inner }
    }

    /// Profile name.
    pub fn profile(&self) -> &str {
        &self.inner.profile
    }

    /// Backend kind.
    pub fn backend(&self) -> BackendKind {
        self.inner.kind
    }

    /// The options in force.
    pub fn options(&self) -> &ManagerOptions {
        &self.inner.opts
    }

    /// The provisioner.
    pub fn provisioner(&self) -> &Arc<dyn Provisioner> {
        &self.inner.provisioner
    }

    /// The bus every transition is published on.
    pub fn events(&self) -> &EventBus {
        &self.inner.bus
    }

    /// Ids of the workspaces open in this manager.
    pub fn open_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = read(&self.inner.cache).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Starts filling the pre-warm pool now (long-lived hosts call this at
    /// start-up; otherwise the pool starts on the first provisioning).
    /// Needs a Tokio runtime. No-op without a pool.
    pub fn warm_up(&self) {
        self.inner.start_prewarm();
    }

    /// Ready workspaces waiting in the pre-warm pool.
    pub fn prewarmed(&self) -> usize {
        self.inner.prewarm.as_ref().map_or(0, |p| p.ready_len())
    }

    /// The workspace id `(user, agent, session)` gets under this
    /// manager's policy (docs/contract.md §8.1). per_agent and per_user are the
    /// pure hashes of [`isolation`]; per_session looks the session up
    /// (in memory, then among the provider's labels, so a restart finds
    /// it again) and otherwise claims a pre-warmed workspace or mints a
    /// fresh id, once per session however many callers race.
    pub async fn assign_workspace_id(
        &self,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Result<String, ManagerError> {
        self.inner.resolve_id(user, agent, session).await
    }

    /// The workspace for `(user, agent, session)`, or for `workspace_id`
    /// when given and non-empty (an explicit id always wins; it is created
    /// if the provider does not have it).
    ///
    /// A cache hit does no I/O, awaits nothing and takes only the cache's
    /// read lock, which no provisioning holds. A miss reattaches (the
    /// provider has the id) or creates, once per id however many callers
    /// race; every waiter gets the same `Arc`, or the same error, and a
    /// failure is not cached.
    ///
    /// Holding the result does not keep the workspace from eviction: take
    /// a [`Lease`] ([`WorkspaceManager::acquire`]) for work in progress.
    pub async fn get_workspace(
        &self,
        user: &str,
        agent: &str,
        session: &str,
        workspace_id: Option<&str>,
    ) -> Result<Arc<Workspace>, ManagerError> {
        let inner = &self.inner;
        inner.maybe_collect();
        let id = match explicit(workspace_id)? {
            Some(id) => id.to_string(),
            None => inner.resolve_id(user, agent, session).await?,
        };
        if let Some(ws) = inner.hit(&id) {
            return Ok(ws);
        }
        let req = inner.request(id, user, agent, session);
        Ok(inner.load(req).await?.ws.clone())
    }

    /// Like [`WorkspaceManager::get_workspace`], and leases the workspace
    /// in the same step, so no eviction can slip in between.
    pub async fn acquire(
        &self,
        user: &str,
        agent: &str,
        session: &str,
        workspace_id: Option<&str>,
    ) -> Result<Lease, ManagerError> {
        let inner = &self.inner;
        inner.maybe_collect();
        let id = match explicit(workspace_id)? {
            Some(id) => id.to_string(),
            None => inner.resolve_id(user, agent, session).await?,
        };
        loop {
            if let Some(lease) = inner.try_lease(&id) {
                return Ok(lease);
            }
            // Loaded but evicted again before we could lease it (ttl 0
            // with a busy sweeper): load once more.
            inner
                .load(inner.request(id.clone(), user, agent, session))
                .await?;
        }
    }

    /// A lease on a workspace open in this manager; `None` if it is not.
    pub fn lease(&self, workspace_id: &str) -> Option<Lease> {
        self.inner.try_lease(workspace_id)
    }

    /// Opens an existing workspace by id (reattaching it), refusing ids
    /// the provider does not know (so a typo creates nothing).
    pub async fn open(&self, workspace_id: &str) -> Result<Arc<Workspace>, ManagerError> {
        let inner = &self.inner;
        let id = explicit(Some(workspace_id))?
            .unwrap_or_default()
            .to_string();
        if let Some(ws) = inner.hit(&id) {
            return Ok(ws);
        }
        let info = inner
            .provisioner
            .find(&id)
            .await
            .map_err(|e| backend_err("find", &id, e))?;
        let Some(info) = info else {
            return Err(ManagerError::NotFound {
                id,
                profile: inner.profile.clone(),
            });
        };
        let l = &info.labels;
        let get = |k: &str| l.get(k).cloned().unwrap_or_default();
        let req = Request {
            user: get(blabels::USER),
            agent: get(blabels::AGENT),
            session: get(labels::SESSION),
            labels: info.labels.clone(),
            id,
        };
        Ok(inner.load(req).await?.ws.clone())
    }

    /// A new workspace with a fresh id (a pre-warmed one when the pool has
    /// one ready), labelled with `user`, `agent` and `session` — the
    /// reference's `create_workspace`. Under per_session it becomes that
    /// session's workspace unless the session already has one.
    pub async fn create(
        &self,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Result<Arc<Workspace>, ManagerError> {
        let inner = &self.inner;
        let entry = match inner.claim_prewarmed(user, agent, session)? {
            Some(e) => e,
            None => {
                let id = isolation::mint_workspace_id();
                inner.load(inner.request(id, user, agent, session)).await?
            }
        };
        if inner.opts.isolation == IsolationPolicy::PerSession {
            let cell = inner.session_cell(user, agent, session);
            let _ = cell.set(entry.ws.id().to_string());
        }
        Ok(entry.ws.clone())
    }

    /// Closes an open workspace (whatever its leases: this is an explicit
    /// request) and suspends its sandbox where the backend can. A
    /// workspace not open here but known to the provider (made by an
    /// earlier process) is suspended likewise. A provisioning of the id
    /// in flight is waited for first, so it cannot land behind the close.
    /// `Ok(false)`: no such workspace.
    pub async fn close(&self, workspace_id: &str) -> Result<bool, ManagerError> {
        let inner = &self.inner;
        inner.wait_flight(workspace_id).await;
        let removed = write(&inner.cache).remove(workspace_id);
        if let Some(e) = removed {
            e.mark_removed();
            inner.close_entry(e, hold::CloseWhy::Explicit).await?;
            return Ok(true);
        }
        inner.wait_closing(workspace_id).await;
        let found = inner
            .provisioner
            .find(workspace_id)
            .await
            .map_err(|e| backend_err("find", workspace_id, e))?;
        if found.is_none() {
            return Ok(false);
        }
        if inner.opts.close_action == CloseAction::Suspend {
            inner
                .provisioner
                .suspend(workspace_id)
                .await
                .map_err(|e| backend_err("suspend", workspace_id, e))?;
        }
        inner.bus.publish(
            workspace_id,
            Event::Workspace {
                state: WorkspaceState::Closed,
            },
        );
        Ok(true)
    }

    /// Closes every open workspace, in parallel, after letting
    /// provisionings in flight land (so none is cached behind the
    /// snapshot), and waits for background evictions. Every close is
    /// tried; failures are reported together.
    pub async fn close_all(&self) -> Result<(), ManagerError> {
        self.inner.close_all().await
    }

    /// Destroys a workspace and its state (closing it first if open, even
    /// when leased, and after any provisioning of it in flight).
    /// `Ok(false)`: the provider had no such workspace.
    pub async fn destroy(&self, workspace_id: &str) -> Result<bool, ManagerError> {
        let inner = &self.inner;
        inner.wait_flight(workspace_id).await;
        let removed = write(&inner.cache).remove(workspace_id);
        let was_open = removed.is_some();
        if let Some(e) = removed {
            e.mark_removed();
            e.ws.close().await;
        }
        inner.wait_closing(workspace_id).await;
        let known = inner
            .provisioner
            .find(workspace_id)
            .await
            .map_err(|e| backend_err("find", workspace_id, e))?
            .is_some();
        if !known && !was_open {
            return Ok(false);
        }
        inner
            .provisioner
            .destroy(workspace_id)
            .await
            .map_err(|e| backend_err("destroy", workspace_id, e))?;
        write(&inner.sessions)
            .retain(|_, cell| cell.get().map(String::as_str) != Some(workspace_id));
        inner.bus.publish(
            workspace_id,
            Event::Workspace {
                state: WorkspaceState::Destroyed,
            },
        );
        Ok(true)
    }

    /// Evicts every open workspace idle (no lease, no access) for at least
    /// `ttl`, closing them in parallel; returns their ids. The sweeper
    /// calls this every `sweep_interval`; tests and the TUI may call it
    /// directly.
    pub async fn sweep(&self) -> Vec<String> {
        self.inner.sweep().await
    }

    /// `wsbench workspaces gc`: closes every workspace not open here whose
    /// sandbox is running and idle (by the provider's last activity) for
    /// at least the TTL, unless another wsbench process of this host
    /// holds it, and reports failed sandboxes and suspended ones idle
    /// past the TTL. `act = false` is the dry run: nothing is changed.
    /// Findings in the listing's order (by id).
    ///
    /// Errors: the provider cannot be listed; a failed close is in its
    /// finding.
    pub async fn gc(&self, act: bool) -> Result<Vec<GcFinding>, ManagerError> {
        self.inner.gc(act).await
    }

    /// Everything the provider can see (workspaces made by earlier
    /// processes included), merged with what is open here, sorted by id.
    pub async fn list(&self) -> Result<Vec<WorkspaceInfo>, ManagerError> {
        self.inner.list().await
    }

    /// Stops the sweeper and the pre-warm pool (destroying unclaimed
    /// workspaces), then closes every open workspace. Later calls fail
    /// with [`ManagerError::ShutDown`].
    pub async fn shutdown(&self) -> Result<(), ManagerError> {
        let inner = &self.inner;
        inner.shut.store(true, Ordering::Release);
        inner.cancel.cancel();
        if let Some(pool) = &inner.prewarm {
            pool.shutdown().await;
        }
        inner.close_all().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::local::LocalProvisioner;

    fn manager(dir: &std::path::Path, f: impl FnOnce(&mut ManagerOptions)) -> WorkspaceManager {
        let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(dir));
        let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
        f(&mut opts);
        WorkspaceManager::new("test", prov, opts, EventBus::default())
    }

    #[test]
    fn backend_data_decides_eviction_and_close() {
        assert_eq!(
            EvictionMode::for_backend(BackendKind::Local),
            EvictionMode::OnAccess
        );
        assert_eq!(
            EvictionMode::for_backend(BackendKind::Docker),
            EvictionMode::Sweeper
        );
        let caps = |suspend| ProvisionerCapabilities {
            suspend,
            keep_alive: false,
            persistent: true,
        };
        assert_eq!(
            CloseAction::for_capabilities(caps(true)),
            CloseAction::Suspend
        );
        assert_eq!(
            CloseAction::for_capabilities(caps(false)),
            CloseAction::Keep
        );
    }

    #[test]
    fn explicit_ids_are_checked() {
        assert_eq!(explicit(None).unwrap(), None);
        assert_eq!(explicit(Some("")).unwrap(), None);
        assert_eq!(explicit(Some("team-1")).unwrap(), Some("team-1"));
        assert!(explicit(Some("a\nb")).is_err());
        assert!(explicit(Some(" a")).is_err());
        assert!(explicit(Some(&"x".repeat(129))).is_err());
    }

    #[tokio::test]
    async fn explicit_id_wins_over_the_policy() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), |_| {});
        let a = m.get_workspace("u", "a", "s", Some("team")).await.unwrap();
        assert_eq!(a.id(), "team");
        let b = m.get_workspace("u", "a", "s", None).await.unwrap();
        assert_eq!(b.id(), isolation::per_agent_id("u", "a"));
        m.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn per_session_binds_each_session_once_and_finds_it_after_restart() {
        let dir = tempfile::tempdir().unwrap();
        let set = |o: &mut ManagerOptions| o.isolation = IsolationPolicy::PerSession;
        let m = manager(dir.path(), set);
        let s1 = m.get_workspace("u", "a", "s1", None).await.unwrap();
        let again = m.get_workspace("u", "a", "s1", None).await.unwrap();
        assert!(Arc::ptr_eq(&s1, &again));
        let s2 = m.get_workspace("u", "a", "s2", None).await.unwrap();
        assert_ne!(s1.id(), s2.id());
        let id1 = s1.id().to_string();
        m.shutdown().await.unwrap();
        drop(m);
        let m2 = manager(dir.path(), set);
        assert_eq!(m2.assign_workspace_id("u", "a", "s1").await.unwrap(), id1);
        m2.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn lease_events_mark_transitions_only() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), |_| {});
        let mut sub = m.events().subscribe();
        let l1 = m.acquire("u", "a", "s", None).await.unwrap();
        let l2 = m.lease(l1.id()).unwrap();
        assert_eq!(l2.count(), 2);
        drop(l1);
        drop(l2);
        let mut states = Vec::new();
        while let Some(crate::engine::events::Received::Event(e)) = sub.try_recv() {
            if let Event::Workspace { state } = e.event {
                states.push(state);
            }
        }
        let leased = states
            .iter()
            .filter(|s| **s == WorkspaceState::Leased)
            .count();
        let idle = states
            .iter()
            .filter(|s| **s == WorkspaceState::Idle)
            .count();
        assert_eq!((leased, idle), (1, 1), "{states:?}");
        m.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn shut_down_manager_refuses_work() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), |_| {});
        m.shutdown().await.unwrap();
        let err = m.get_workspace("u", "a", "s", None).await.unwrap_err();
        assert!(matches!(err, ManagerError::ShutDown(_)), "{err}");
    }
}
