//! Cache entries and leases: what keeps a workspace from being evicted.
//!
//! The reference refreshes a workspace's timestamp only in
//! `get_workspace`, so a long tool call can have its sandbox paused under
//! it (docs/contract.md §11 point 14). Here work in progress holds a [`Lease`]: a
//! workspace with a lease is never evicted, and its idle time starts when
//! the last lease is dropped.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::backend::host::lock::HostHold;

use crate::engine::Workspace;
use crate::engine::events::{Event, WorkspaceState};

/// One cached, open workspace with its lease count and last use.
pub(crate) struct Entry {
    pub(crate) ws: Arc<Workspace>,
    pub(crate) user: String,
    pub(crate) agent: String,
    pub(crate) session: String,
    /// Labels as the provider holds them (or as given at creation).
    pub(crate) labels: BTreeMap<String, String>,
    /// When the sandbox was created, as the provider reports it.
    pub(crate) created_at: SystemTime,
    /// The manager's clock origin; `last_used_ms` counts from it.
    epoch: Instant,
    leases: AtomicUsize,
    last_used_ms: AtomicU64,
    /// Set once the entry left the cache (closed, evicted, destroyed).
    removed: AtomicBool,
    /// A keep-alive renewal task is running for this entry.
    pub(crate) renewing: AtomicBool,
    /// A task refreshing the hold's stamp is running for this entry
    /// (`keepalive.rs`).
    pub(crate) stamping: AtomicBool,
    /// This process's shared hold on the workspace (`hold.rs`), taken
    /// out at close to decide whether to suspend.
    hold: Mutex<Option<HostHold>>,
}

impl Entry {
    pub(crate) fn new(
        ws: Arc<Workspace>,
        user: String,
        agent: String,
        session: String,
        labels: BTreeMap<String, String>,
        created_at: SystemTime,
        epoch: Instant,
    ) -> Self {
        let e = Entry {
            ws,
            user,
            agent,
            session,
            labels,
            created_at,
            epoch,
            leases: AtomicUsize::new(0),
            last_used_ms: AtomicU64::new(0),
            removed: AtomicBool::new(false),
            renewing: AtomicBool::new(false),
            stamping: AtomicBool::new(false),
            hold: Mutex::new(None),
        };
        e.touch();
        e
    }

    /// Milliseconds since the manager's epoch.
    pub(crate) fn now_ms(epoch: Instant) -> u64 {
        epoch.elapsed().as_millis() as u64
    }

    /// Records a use now (a cache hit or a released lease).
    pub(crate) fn touch(&self) {
        self.last_used_ms
            .fetch_max(Self::now_ms(self.epoch), Ordering::AcqRel);
    }

    /// Number of live leases.
    pub(crate) fn leases(&self) -> usize {
        self.leases.load(Ordering::Acquire)
    }

    /// Time since the last use; zero while leased.
    pub(crate) fn idle_for(&self, now_ms: u64) -> Duration {
        if self.leases() > 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(now_ms.saturating_sub(self.last_used_ms.load(Ordering::Acquire)))
    }

    /// True when unleased and unused for at least `ttl`.
    pub(crate) fn is_idle(&self, now_ms: u64, ttl: Duration) -> bool {
        self.leases() == 0 && self.idle_for(now_ms) >= ttl
    }

    /// Keeps `hold` for the life of the entry.
    pub(crate) fn set_hold(&self, hold: Option<HostHold>) {
        *super::lock(&self.hold) = hold;
    }

    /// Stamps the hold: a lease began or ended, so a process that lists
    /// the workspace later (`workspaces list`, `gc`) counts its idle time
    /// from now ([`super::hold`]'s `last_used_here`). No-op without a hold.
    pub(crate) fn stamp_hold(&self) {
        if let Some(h) = super::lock(&self.hold).as_ref() {
            h.stamp();
        }
    }

    /// Whether this process holds the workspace on the host (only then
    /// is there a stamp to refresh).
    pub(crate) fn has_hold(&self) -> bool {
        super::lock(&self.hold).is_some()
    }

    /// The hold, taken out (at close).
    pub(crate) fn take_hold(&self) -> Option<HostHold> {
        super::lock(&self.hold).take()
    }

    pub(crate) fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Adds a lease. The caller holds the cache's read lock, so an
    /// eviction (which decides under the write lock) cannot interleave
    /// between its lookup and this increment. Returns true on the 0 → 1
    /// transition.
    pub(crate) fn add_lease(&self) -> bool {
        self.leases.fetch_add(1, Ordering::AcqRel) == 0
    }
}

/// Work in progress on a workspace: while any lease is alive the manager
/// never evicts the workspace, and for providers with their own expiry
/// (E2B, OpenSandbox) it keeps renewing it. Dropping the last lease starts
/// the idle clock (docs/contract.md §11 point 14).
///
/// Take one per tool call, live MCP call or open view with
/// [`WorkspaceManager::acquire`](super::WorkspaceManager::acquire) or
/// [`WorkspaceManager::lease`](super::WorkspaceManager::lease); it derefs
/// to the [`Workspace`].
pub struct Lease {
    entry: Arc<Entry>,
}

impl Lease {
    /// Wraps an entry whose count the caller already raised.
    pub(crate) fn new(entry: Arc<Entry>, first: bool) -> Self {
        if first {
            entry.stamp_hold();
            entry.ws.publish(Event::Workspace {
                state: WorkspaceState::Leased,
            });
        }
        Lease { entry }
    }

    /// The leased workspace.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.entry.ws
    }

    /// Number of leases on this workspace right now, this one included.
    pub fn count(&self) -> usize {
        self.entry.leases()
    }
}

impl Deref for Lease {
    type Target = Workspace;

    fn deref(&self) -> &Workspace {
        &self.entry.ws
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("workspace", &self.entry.ws.id())
            .field("leases", &self.entry.leases())
            .finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Touch before the decrement: a sweeper that sees zero leases then
        // also sees the fresh timestamp, so the idle clock starts now.
        self.entry.touch();
        let prev = self.entry.leases.fetch_sub(1, Ordering::AcqRel);
        if prev == 1 && !self.entry.is_removed() {
            self.entry.stamp_hold();
            self.entry.ws.publish(Event::Workspace {
                state: WorkspaceState::Idle,
            });
        }
    }
}
