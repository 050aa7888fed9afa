//! Leases and what they keep alive while work runs (docs/contract.md §11
//! points 14 and 15; issue 15): a leased workspace is never evicted, its
//! provider expiry is renewed, and this host's last-use stamp of it (the
//! hold file's mtime, `hold.rs`) is refreshed, so other processes
//! (`workspaces list`, `workspaces gc`, another manager's sweeper) see it
//! in use rather than idle past its TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;

use super::lease::Entry;
use super::{Inner, Lease, read};
use crate::engine::events::Event;

/// The shortest period of the stamp refresh (a TTL of zero would spin).
const MIN_STAMP_PERIOD: Duration = Duration::from_millis(100);

impl Inner {
    pub(super) fn try_lease(self: &Arc<Self>, id: &str) -> Option<Lease> {
        let (entry, first) = {
            let cache = read(&self.cache);
            let e = cache.get(id)?;
            e.touch();
            (e.clone(), e.add_lease())
        };
        if first && self.caps.keep_alive && !self.opts.keep_alive.is_zero() {
            self.start_renewal(&entry);
        }
        if first && entry.has_hold() {
            self.start_stamping(&entry);
        }
        Some(Lease::new(entry, first))
    }

    /// Renews the provider's expiry while the entry has leases
    /// (docs/contract.md §11 point 15): at once, then every third of `keep_alive`.
    pub(super) fn start_renewal(&self, entry: &Arc<Entry>) {
        let prov = self.provisioner.clone();
        let extend = self.opts.keep_alive;
        let period = (extend / 3).max(Duration::from_millis(1));
        while_leased(
            entry,
            |e| &e.renewing,
            period,
            move |entry| {
                let prov = prov.clone();
                Box::pin(async move {
                    let id = entry.ws.id();
                    if let Err(e) = prov.keep_alive(id, extend).await {
                        entry.ws.publish(Event::Log {
                            level: "warn".into(),
                            source: "manager".into(),
                            message: format!("keep-alive of workspace {id} failed: {e}"),
                        });
                    }
                })
            },
        );
    }

    /// Refreshes this host's last-use stamp of the entry while it has
    /// leases: every third of the TTL (at least [`MIN_STAMP_PERIOD`]), so
    /// a process that reads the stamp never counts a leased workspace as
    /// idle for more than a third of its TTL.
    pub(super) fn start_stamping(&self, entry: &Arc<Entry>) {
        let period = (self.opts.ttl / 3).max(MIN_STAMP_PERIOD);
        while_leased(
            entry,
            |e| &e.stamping,
            period,
            |entry| Box::pin(async move { entry.stamp_hold() }),
        );
    }
}

/// Runs `tick` at once and then every `period` while `entry` has leases
/// and is in the cache; `flag` (one per kind of task) keeps it to one task
/// per entry.
fn while_leased(
    entry: &Arc<Entry>,
    flag: fn(&Entry) -> &AtomicBool,
    period: Duration,
    tick: impl Fn(Arc<Entry>) -> BoxFuture<'static, ()> + Send + 'static,
) {
    if flag(entry).swap(true, Ordering::AcqRel) {
        return;
    }
    let entry = entry.clone();
    tokio::spawn(async move {
        loop {
            tick(entry.clone()).await;
            tokio::time::sleep(period).await;
            if entry.leases() == 0 || entry.is_removed() {
                flag(&entry).store(false, Ordering::Release);
                // A lease taken while we were deciding to stop saw the
                // flag still set and started nothing: go on.
                if entry.leases() > 0
                    && !entry.is_removed()
                    && !flag(&entry).swap(true, Ordering::AcqRel)
                {
                    continue;
                }
                break;
            }
        }
    });
}
