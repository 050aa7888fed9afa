//! The workspace manager: which workspace a `(user, agent, session)` gets,
//! keeping workspaces warm, evicting idle ones and bringing them back
//! (contract §8).
//!
//! One generic [`WorkspaceManager`] serves every backend through the
//! [`Provisioner`] trait; what differs per backend is data: the directory
//! layout and reattach key live in the provisioner, the eviction mode
//! ([`EvictionMode`]) and what closing does to a sandbox ([`CloseAction`])
//! in [`ManagerOptions`], derived from the backend kind and its
//! [`ProvisionerCapabilities`].
//!
//! Fixes over the reference (contract §11):
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
//! * point 26 — ids, not raw agent ids, decide where a workspace lives;
//!   see [`layout::local_layout`].

pub mod display;
pub mod isolation;
pub mod layout;
pub mod lease;
mod list;
pub mod prewarm;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant, SystemTime};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde::Serialize;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use isolation::{IsolationPolicy, assign_workspace_id};
use lease::Entry;
pub use lease::Lease;
pub use list::WorkspaceInfo;
pub use prewarm::PrewarmConfig;
use prewarm::{PrewarmPool, Prewarmed};

use crate::backend::{
    BackendError, BackendKind, BackendNotice, ProvisionSpec, Provisioner, ProvisionerCapabilities,
    Sandbox, SandboxState, labels as blabels,
};
use crate::engine::events::{Event, EventBus, WorkspaceState};
use crate::engine::{Workspace, WorkspaceConfig, WorkspaceError};

/// Label keys the manager adds besides the backend's well-known ones
/// ([`crate::backend::labels`]).
pub mod labels {
    /// Session id, on per_session workspaces (how a later process finds a
    /// session's workspace again).
    pub const SESSION: &str = "wsbench.session";
    /// `"true"` on workspaces built by the pre-warm pool.
    pub const PREWARM: &str = "wsbench.prewarm";
    /// Isolation policy the workspace was assigned under (`per_agent`,
    /// ...); the local layout picks the directory from it.
    pub const ISOLATION: &str = "wsbench.isolation";
}

/// Default idle time before eviction (contract §8.2: 3600 s).
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// Default sweeper period (contract §8.2: 300 s).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(300);
/// Default provider expiry pushed back by each keep-alive renewal
/// (E2B's and OpenSandbox's own default timeout, contract §11 point 15).
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(300);

/// When idle workspaces are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictionMode {
    /// At the start of a `get_workspace`, at most once per
    /// `min(ttl, sweep_interval)` (the reference's local manager).
    OnAccess,
    /// A background task every `sweep_interval` (sandboxed managers).
    Sweeper,
}

impl EvictionMode {
    /// Local workspaces cost nothing while idle, so they are collected
    /// lazily; every sandboxed backend holds compute and gets a sweeper.
    pub fn for_backend(kind: BackendKind) -> Self {
        match kind {
            BackendKind::Local => EvictionMode::OnAccess,
            _ => EvictionMode::Sweeper,
        }
    }
}

/// What closing or evicting a workspace does to its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseAction {
    /// Leave it as it is (local directories).
    Keep,
    /// [`Provisioner::suspend`]: pause, stop, or delete the Pod and keep
    /// the volume — whatever "keep state, free compute" means there.
    Suspend,
}

impl CloseAction {
    /// `Suspend` where the provisioner can, else `Keep`.
    pub fn for_capabilities(caps: ProvisionerCapabilities) -> Self {
        if caps.suspend {
            CloseAction::Suspend
        } else {
            CloseAction::Keep
        }
    }
}

/// How a manager behaves. [`ManagerOptions::for_provisioner`] gives the
/// defaults for a backend.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Isolation grain.
    pub isolation: IsolationPolicy,
    /// Idle time (no lease, no access) before a workspace is evicted.
    pub ttl: Duration,
    /// Sweeper period; also the longest an on-access collection waits.
    pub sweep_interval: Duration,
    /// Expiry extension asked of providers with their own keep-alive;
    /// renewed every third of it while leased. Zero turns renewal off.
    pub keep_alive: Duration,
    /// When idle workspaces are collected.
    pub eviction: EvictionMode,
    /// What closing does to the sandbox.
    pub close_action: CloseAction,
    /// Pre-warm pool.
    pub prewarm: PrewarmConfig,
    /// Template for every workspace (its `workspace_id` is ignored).
    pub workspace: WorkspaceConfig,
}

impl ManagerOptions {
    /// Reference defaults (per_agent, ttl 3600 s, sweep 300 s, no
    /// pre-warm) with the eviction mode and close action of `provisioner`.
    pub fn for_provisioner(provisioner: &dyn Provisioner) -> Self {
        ManagerOptions {
            isolation: IsolationPolicy::default(),
            ttl: DEFAULT_TTL,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
            keep_alive: DEFAULT_KEEP_ALIVE,
            eviction: EvictionMode::for_backend(provisioner.kind()),
            close_action: CloseAction::for_capabilities(provisioner.capabilities()),
            prewarm: PrewarmConfig::default(),
            workspace: WorkspaceConfig::default(),
        }
    }
}

/// Errors of the manager. Cloneable: one provisioning failure is handed to
/// every caller that waited for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManagerError {
    /// The provisioner could not create, find or attach the sandbox.
    #[error("provisioning workspace {id} ({backend}) failed: {source}")]
    Provision {
        /// Workspace id.
        id: String,
        /// Backend kind.
        backend: BackendKind,
        /// The backend's error.
        #[source]
        source: Arc<BackendError>,
    },
    /// The sandbox is there but the workspace could not be initialised.
    #[error("initialising workspace {id} failed: {source}")]
    Open {
        /// Workspace id.
        id: String,
        /// The engine's error.
        #[source]
        source: Arc<WorkspaceError>,
    },
    /// A provisioner call other than provisioning failed.
    #[error("{op} of {} failed: {source}", backend_err_subject(.id))]
    Backend {
        /// `close`, `destroy`, `list`, ...
        op: &'static str,
        /// Workspace id (`""` for list).
        id: String,
        /// The backend's error.
        #[source]
        source: Arc<BackendError>,
    },
    /// No such workspace in this profile.
    #[error("no workspace `{id}` in profile `{profile}`")]
    NotFound {
        /// Workspace id asked for.
        id: String,
        /// Profile name.
        profile: String,
    },
    /// An explicit workspace id that cannot be used.
    #[error("invalid workspace id {id:?}: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// Why.
        reason: &'static str,
    },
    /// [`WorkspaceManager::shutdown`] was called.
    #[error("the workspace manager of profile `{0}` is shut down")]
    ShutDown(String),
    /// Some workspaces failed to close (the others were closed).
    #[error("{} workspace(s) failed to close: {}", .0.len(), .0.iter().map(|(id, e)| format!("{id}: {e}")).collect::<Vec<_>>().join("; "))]
    Close(Vec<(String, String)>),
    /// A provisioning task panicked or was cancelled.
    #[error("provisioning task for {id} ended abnormally: {message}")]
    Task {
        /// Workspace id.
        id: String,
        /// The join error.
        message: String,
    },
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
    /// manager's policy (contract §8.1). per_agent and per_user are the
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
            inner.close_entry(e, false).await?;
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

/// An explicit id, checked; `None` for absent or empty (then the policy
/// assigns one, as in the reference).
fn explicit(id: Option<&str>) -> Result<Option<&str>, ManagerError> {
    let Some(id) = id.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let bad = |reason| ManagerError::InvalidId {
        id: id.to_string(),
        reason,
    };
    if id.len() > 128 {
        return Err(bad("longer than 128 bytes"));
    }
    if id.chars().any(char::is_control) {
        return Err(bad("contains control characters"));
    }
    if id.trim() != id {
        return Err(bad("has leading or trailing white space"));
    }
    Ok(Some(id))
}

/// `workspace <id>`, or `workspaces` for a call on none in particular
/// (`list`): no `list of workspace  failed` with a blank id.
fn backend_err_subject(id: &str) -> String {
    if id.is_empty() {
        "workspaces".into()
    } else {
        format!("workspace {id}")
    }
}

fn backend_err(op: &'static str, id: &str, e: BackendError) -> ManagerError {
    ManagerError::Backend {
        op,
        id: id.to_string(),
        source: Arc::new(e),
    }
}

impl Inner {
    /// Starts the sweeper (sandboxed managers) and, once the manager is
    /// used to provision, the pre-warm pool — never for a manager that
    /// only lists, so a look at a profile builds nothing.
    fn ensure_started(self: &Arc<Self>) {
        self.start_sweeper();
        self.start_prewarm();
    }

    fn start_prewarm(&self) {
        if let Some(pool) = &self.prewarm
            && !self.prewarm_started.swap(true, Ordering::AcqRel)
            && !self.shut.load(Ordering::Acquire)
        {
            pool.refill();
        }
    }

    fn start_sweeper(self: &Arc<Self>) {
        if self.opts.eviction != EvictionMode::Sweeper
            || self.sweeper_started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(self);
        let cancel = self.cancel.clone();
        let every = self.opts.sweep_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let Some(inner) = weak.upgrade() else { break };
                inner.sweep().await;
            }
        });
    }

    fn now_ms(&self) -> u64 {
        Entry::now_ms(self.epoch)
    }

    /// The hot path: one read lock, one hash lookup, one atomic.
    fn hit(&self, id: &str) -> Option<Arc<Workspace>> {
        let cache = read(&self.cache);
        let e = cache.get(id)?;
        e.touch();
        Some(e.ws.clone())
    }

    fn cached(&self, id: &str) -> Option<Arc<Entry>> {
        read(&self.cache).get(id).cloned()
    }

    fn try_lease(self: &Arc<Self>, id: &str) -> Option<Lease> {
        let (entry, first) = {
            let cache = read(&self.cache);
            let e = cache.get(id)?;
            e.touch();
            (e.clone(), e.add_lease())
        };
        if first && self.caps.keep_alive && !self.opts.keep_alive.is_zero() {
            self.start_renewal(&entry);
        }
        Some(Lease::new(entry, first))
    }

    /// Renews the provider's expiry while the entry has leases
    /// (contract §11 point 15): at once, then every third of `keep_alive`.
    fn start_renewal(&self, entry: &Arc<Entry>) {
        if entry.renewing.swap(true, Ordering::AcqRel) {
            return;
        }
        let entry = entry.clone();
        let prov = self.provisioner.clone();
        let extend = self.opts.keep_alive;
        let period = (extend / 3).max(Duration::from_millis(1));
        tokio::spawn(async move {
            loop {
                let id = entry.ws.id();
                if let Err(e) = prov.keep_alive(id, extend).await {
                    entry.ws.publish(Event::Log {
                        level: "warn".into(),
                        source: "manager".into(),
                        message: format!("keep-alive of workspace {id} failed: {e}"),
                    });
                }
                tokio::time::sleep(period).await;
                if entry.leases() == 0 || entry.is_removed() {
                    entry.renewing.store(false, Ordering::Release);
                    // A lease taken while we were deciding to stop saw
                    // `renewing` still set and started nothing: go on.
                    if entry.leases() > 0
                        && !entry.is_removed()
                        && !entry.renewing.swap(true, Ordering::AcqRel)
                    {
                        continue;
                    }
                    break;
                }
            }
        });
    }

    fn labels_for(&self, user: &str, agent: &str, session: &str) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        l.insert(blabels::USER.to_string(), user.to_string());
        l.insert(blabels::AGENT.to_string(), agent.to_string());
        l.insert(blabels::PROFILE.to_string(), self.profile.clone());
        l.insert(
            labels::ISOLATION.to_string(),
            self.opts.isolation.as_str().to_string(),
        );
        if self.opts.isolation == IsolationPolicy::PerSession {
            l.insert(labels::SESSION.to_string(), session.to_string());
        }
        l
    }

    fn request(&self, id: String, user: &str, agent: &str, session: &str) -> Request {
        Request {
            labels: self.labels_for(user, agent, session),
            id,
            user: user.to_string(),
            agent: agent.to_string(),
            session: session.to_string(),
        }
    }

    fn session_cell(&self, user: &str, agent: &str, session: &str) -> Arc<OnceCell<String>> {
        let key = (user.to_string(), agent.to_string(), session.to_string());
        if let Some(c) = read(&self.sessions).get(&key) {
            return c.clone();
        }
        write(&self.sessions).entry(key).or_default().clone()
    }

    async fn resolve_id(
        self: &Arc<Self>,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Result<String, ManagerError> {
        if let Some(id) = isolation::derived_workspace_id(self.opts.isolation, user, agent) {
            return Ok(id);
        }
        let cell = self.session_cell(user, agent, session);
        cell.get_or_try_init(|| self.find_or_mint_session(user, agent, session))
            .await
            .cloned()
    }

    /// per_session, first use of a session in this process: the
    /// provider's labels, then the pool, then a fresh id.
    async fn find_or_mint_session(
        self: &Arc<Self>,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Result<String, ManagerError> {
        let all = self
            .provisioner
            .list()
            .await
            .map_err(|e| backend_err("list", "", e))?;
        let is = |l: &BTreeMap<String, String>, k: &str, v: &str| {
            l.get(k).map(String::as_str) == Some(v)
        };
        let mut found: Vec<_> = all
            .into_iter()
            .filter(|i| {
                is(&i.labels, blabels::USER, user)
                    && is(&i.labels, blabels::AGENT, agent)
                    && is(&i.labels, labels::SESSION, session)
                    && is(&i.labels, blabels::PROFILE, &self.profile)
                    && !matches!(i.state, SandboxState::Failed(_))
            })
            .collect();
        // Oldest first: the one the session has been using all along.
        found.sort_by_key(|i| i.created_at);
        if let Some(i) = found.into_iter().next() {
            return Ok(i.workspace_id);
        }
        if let Some(e) = self.claim_prewarmed(user, agent, session)? {
            return Ok(e.ws.id().to_string());
        }
        Ok(isolation::mint_workspace_id())
    }

    /// Takes a ready pre-warmed workspace into the cache for this caller.
    fn claim_prewarmed(
        self: &Arc<Self>,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Result<Option<Arc<Entry>>, ManagerError> {
        let Some(pool) = &self.prewarm else {
            return Ok(None);
        };
        self.ensure_started();
        let Some(Prewarmed {
            ws,
            labels,
            created_at,
        }) = pool.take()
        else {
            return Ok(None);
        };
        let id = ws.id().to_string();
        let entry = Arc::new(Entry::new(
            ws,
            user.to_string(),
            agent.to_string(),
            session.to_string(),
            labels,
            created_at,
            self.epoch,
        ));
        let flights = lock(&self.flights);
        if self.shut.load(Ordering::Acquire) {
            drop(flights);
            let inner = self.clone();
            let e = entry.clone();
            self.tracker.spawn(async move {
                let _ = inner.provisioner.destroy(e.ws.id()).await;
            });
            return Err(ManagerError::ShutDown(self.profile.clone()));
        }
        write(&self.cache).insert(id, entry.clone());
        drop(flights);
        Ok(Some(entry))
    }

    /// The slow path: joins or starts the provisioning of `req.id`.
    async fn load(self: &Arc<Self>, req: Request) -> FlightOutput {
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
    fn start_flight(self: &Arc<Self>, req: Request) -> Flight {
        let inner = self.clone();
        let id = req.id.clone();
        let task = tokio::spawn(async move {
            let id = req.id.clone();
            let result = inner.provision(req).await;
            inner.finish_flight(&id, result)
        });
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

    fn finish_flight(self: &Arc<Self>, id: &str, result: FlightOutput) -> FlightOutput {
        let mut flights = lock(&self.flights);
        let result = match result {
            Ok(entry) if self.shut.load(Ordering::Acquire) => {
                // Landed after shutdown: close it instead of caching it.
                entry.mark_removed();
                let inner = self.clone();
                self.tracker.spawn(async move {
                    let _ = inner.close_entry(entry, false).await;
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

    async fn provision(self: &Arc<Self>, req: Request) -> FlightOutput {
        let id = req.id.clone();
        self.bus.publish(
            &id,
            Event::Workspace {
                state: WorkspaceState::Provisioning,
            },
        );
        self.wait_closing(&id).await;
        let (sandbox, labels, created_at, reattached) = match self.attach_or_create(&req).await {
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
        // `Provisioning` is published above, before the sandbox is made.
        match Workspace::open_provisioned(sandbox, config, self.bus.clone()).await {
            Ok(ws) => {
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
                Ok(Arc::new(Entry::new(
                    ws, user, agent, session, labels, created_at, self.epoch,
                )))
            }
            Err(e) => {
                // Workspace::open_provisioned published the failure. Never destroy:
                // the sandbox may hold the user's data; never leave it
                // running either (contract §11 point 16).
                if self.opts.close_action == CloseAction::Suspend
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
    async fn attach_or_create(
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
                let mut labels = req.labels.clone();
                labels.insert(blabels::WORKSPACE_ID.to_string(), req.id.clone());
                Ok((sandbox, labels, SystemTime::now(), false))
            }
        }
    }

    fn log_warn(&self, id: &str, message: String) {
        self.bus.publish(
            id,
            Event::Log {
                level: "warn".into(),
                source: "manager".into(),
                message,
            },
        );
    }

    /// Local managers: collects idle entries at most once per
    /// `min(ttl, sweep_interval)`, closing them in the background so the
    /// caller's hit stays free of I/O.
    fn maybe_collect(self: &Arc<Self>) {
        if self.opts.eviction != EvictionMode::OnAccess {
            return;
        }
        let now = self.now_ms();
        let next = self.next_collect_ms.load(Ordering::Acquire);
        if now < next {
            return;
        }
        let period = self.opts.ttl.min(self.opts.sweep_interval).as_millis() as u64;
        if self
            .next_collect_ms
            .compare_exchange(next, now + period, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        for e in self.take_idle(now) {
            let inner = self.clone();
            self.tracker.spawn(async move {
                let _ = inner.close_entry(e, true).await;
            });
        }
    }

    /// Removes and returns the idle entries. Decided under the write lock,
    /// so no lease (taken under the read lock) can slip in.
    fn take_idle(&self, now_ms: u64) -> Vec<Arc<Entry>> {
        let ttl = self.opts.ttl;
        let mut cache = write(&self.cache);
        let ids: Vec<String> = cache
            .iter()
            .filter(|(_, e)| e.is_idle(now_ms, ttl))
            .map(|(id, _)| id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| cache.remove(id))
            .inspect(|e| e.mark_removed())
            .collect()
    }

    async fn sweep(self: &Arc<Self>) -> Vec<String> {
        let idle = self.take_idle(self.now_ms());
        let ids: Vec<String> = idle.iter().map(|e| e.ws.id().to_string()).collect();
        futures::future::join_all(idle.into_iter().map(|e| self.close_entry(e, true))).await;
        ids
    }

    /// Closes one entry already out of the cache: event, workspace close,
    /// then the backend's close action. Registered in `closing` so a
    /// provisioning of the same id waits for it.
    async fn close_entry(&self, e: Arc<Entry>, evicted: bool) -> Result<(), ManagerError> {
        let id = e.ws.id().to_string();
        let prov = self.provisioner.clone();
        let action = self.opts.close_action;
        let fid = id.clone();
        let fut: Closing = async move {
            if evicted {
                e.ws.publish(Event::Workspace {
                    state: WorkspaceState::Evicted,
                });
            }
            e.ws.close().await;
            if action == CloseAction::Suspend {
                prov.suspend(&fid)
                    .await
                    .map_err(|err| backend_err("suspend", &fid, err))?;
            }
            Ok(())
        }
        .boxed()
        .shared();
        let seq = self.close_seq.fetch_add(1, Ordering::Relaxed);
        lock(&self.closing).insert(id.clone(), (seq, fut.clone()));
        let result = fut.await;
        {
            let mut closing = lock(&self.closing);
            if closing.get(&id).is_some_and(|(s, _)| *s == seq) {
                closing.remove(&id);
            }
        }
        if let Err(err) = &result {
            self.log_warn(&id, err.to_string());
        }
        result
    }

    /// Waits for a provisioning of `id` in flight, whatever its outcome.
    async fn wait_flight(&self, id: &str) {
        let pending = lock(&self.flights).get(id).cloned();
        if let Some(f) = pending {
            let _ = f.await;
        }
    }

    async fn wait_closing(&self, id: &str) {
        let pending = lock(&self.closing).get(id).map(|(_, f)| f.clone());
        if let Some(f) = pending {
            let _ = f.await;
        }
    }

    async fn close_all(self: &Arc<Self>) -> Result<(), ManagerError> {
        let flights: Vec<Flight> = lock(&self.flights).values().cloned().collect();
        let _ = futures::future::join_all(flights).await;
        let entries: Vec<Arc<Entry>> = write(&self.cache)
            .drain()
            .map(|(_, e)| {
                e.mark_removed();
                e
            })
            .collect();
        let results =
            futures::future::join_all(entries.into_iter().map(|e| self.close_entry(e, false)))
                .await;
        self.tracker.close();
        self.tracker.wait().await;
        self.tracker.reopen();
        let failures: Vec<(String, String)> = results
            .into_iter()
            .filter_map(|r| r.err())
            .map(|e| match &e {
                ManagerError::Backend { id, .. } => (id.clone(), e.to_string()),
                _ => (String::new(), e.to_string()),
            })
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ManagerError::Close(failures))
        }
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
