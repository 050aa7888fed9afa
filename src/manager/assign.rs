//! Which workspace id a `(user, agent, session)` gets: the policy's
//! derived ids, per_session bindings (found again among the provider's
//! labels after a restart), pre-warmed claims and fresh ids; the labels a
//! new workspace carries; explicit ids checked.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::OnceCell;

use super::lease::Entry;
use super::prewarm::Prewarmed;
use super::{
    Inner, IsolationPolicy, ManagerError, backend_err, isolation, labels, lock, read, write,
};
use crate::backend::{SandboxState, labels as blabels};

/// An explicit id, checked; `None` for absent or empty (then the policy
/// assigns one, as in the reference).
pub(super) fn explicit(id: Option<&str>) -> Result<Option<&str>, ManagerError> {
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

impl Inner {
    pub(super) fn labels_for(
        &self,
        user: &str,
        agent: &str,
        session: &str,
    ) -> BTreeMap<String, String> {
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

    pub(super) fn session_cell(
        &self,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Arc<OnceCell<String>> {
        let key = (user.to_string(), agent.to_string(), session.to_string());
        if let Some(c) = read(&self.sessions).get(&key) {
            return c.clone();
        }
        write(&self.sessions).entry(key).or_default().clone()
    }

    pub(super) async fn resolve_id(
        self: &Arc<Self>,
        user: &str,
        agent: &str,
        session: &str,
    ) -> Result<String, ManagerError> {
        isolation::check_principals(user, agent)?;
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
    pub(super) async fn find_or_mint_session(
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
    pub(super) fn claim_prewarmed(
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
        entry.set_hold(self.hold_now(&id));
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
}
