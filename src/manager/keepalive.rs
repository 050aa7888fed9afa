//! Leases and provider keep-alive: a leased workspace is never evicted,
//! and its provider expiry is renewed while it is leased (docs/contract.md §11
//! points 14 and 15).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::lease::Entry;
use super::{Inner, Lease, read};
use crate::engine::events::Event;

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
        Some(Lease::new(entry, first))
    }

    /// Renews the provider's expiry while the entry has leases
    /// (docs/contract.md §11 point 15): at once, then every third of `keep_alive`.
    pub(super) fn start_renewal(&self, entry: &Arc<Entry>) {
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
}
