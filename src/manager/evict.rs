//! Idle time and eviction: the sweeper (sandboxed backends) or
//! on-access collection (local), taking idle unleased entries, closing
//! them (suspending where the backend can), and closing everything on
//! shutdown.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use futures::FutureExt;

use super::hold::CloseWhy;
use super::lease::Entry;
use super::{
    CloseAction, Closing, EvictionMode, Flight, Inner, ManagerError, backend_err, lock, write,
};
use crate::engine::events::{Event, WorkspaceState};

impl Inner {
    /// Starts the sweeper (sandboxed managers) and, once the manager is
    /// used to provision, the pre-warm pool — never for a manager that
    /// only lists, so a look at a profile builds nothing.
    pub(super) fn ensure_started(self: &Arc<Self>) {
        self.start_sweeper();
        self.start_prewarm();
    }

    pub(super) fn start_prewarm(&self) {
        if let Some(pool) = &self.prewarm
            && !self.prewarm_started.swap(true, Ordering::AcqRel)
            && !self.shut.load(Ordering::Acquire)
        {
            pool.refill();
        }
    }

    pub(super) fn start_sweeper(self: &Arc<Self>) {
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

    pub(super) fn now_ms(&self) -> u64 {
        Entry::now_ms(self.epoch)
    }

    /// Local managers: collects idle entries at most once per
    /// `min(ttl, sweep_interval)`, closing them in the background so the
    /// caller's hit stays free of I/O.
    pub(super) fn maybe_collect(self: &Arc<Self>) {
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
                let _ = inner.close_entry(e, CloseWhy::Evicted).await;
            });
        }
    }

    /// Removes and returns the idle entries. Decided under the write lock,
    /// so no lease (taken under the read lock) can slip in.
    pub(super) fn take_idle(&self, now_ms: u64) -> Vec<Arc<Entry>> {
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

    pub(super) async fn sweep(self: &Arc<Self>) -> Vec<String> {
        let idle = self.take_idle(self.now_ms());
        let ids: Vec<String> = idle.iter().map(|e| e.ws.id().to_string()).collect();
        futures::future::join_all(
            idle.into_iter()
                .map(|e| self.close_entry(e, CloseWhy::Evicted)),
        )
        .await;
        ids
    }

    /// Closes one entry already out of the cache: event, workspace close,
    /// then the backend's close action — a suspend only when no other
    /// process of this host holds the workspace, unless the close is
    /// explicit (`hold.rs`). Registered in `closing` so a provisioning of
    /// the same id waits for it.
    pub(super) async fn close_entry(
        &self,
        e: Arc<Entry>,
        why: CloseWhy,
    ) -> Result<(), ManagerError> {
        let id = e.ws.id().to_string();
        let prov = self.provisioner.clone();
        let action = self.opts.close_action;
        let fid = id.clone();
        // Decided before the workspace closes, and the exclusive lock
        // kept through the suspend: a process arriving meanwhile waits.
        let decision = (action == CloseAction::Suspend)
            .then(|| self.may_suspend(&id, why, e.take_hold()))
            .flatten();
        let fut: Closing = async move {
            if why == CloseWhy::Evicted {
                e.ws.publish(Event::Workspace {
                    state: WorkspaceState::Evicted,
                });
            }
            e.ws.close().await;
            if let Some(_sole) = decision {
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

    pub(super) async fn wait_closing(&self, id: &str) {
        let pending = lock(&self.closing).get(id).map(|(_, f)| f.clone());
        if let Some(f) = pending {
            let _ = f.await;
        }
    }

    pub(super) async fn close_all(self: &Arc<Self>) -> Result<(), ManagerError> {
        let flights: Vec<Flight> = lock(&self.flights).values().cloned().collect();
        let _ = futures::future::join_all(flights).await;
        let entries: Vec<Arc<Entry>> = write(&self.cache)
            .drain()
            .map(|(_, e)| {
                e.mark_removed();
                e
            })
            .collect();
        let results = futures::future::join_all(
            entries
                .into_iter()
                .map(|e| self.close_entry(e, CloseWhy::Exit)),
        )
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
