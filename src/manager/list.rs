//! What `wsbench workspaces list` and the TUI's workspaces pane show: the
//! provider's view (workspaces of earlier processes included, contract
//! §8) merged with what this manager holds open.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use super::lease::Entry;
use super::{Inner, ManagerError, backend_err, labels, lock, read};
use crate::backend::{BackendKind, SandboxState, labels as blabels};

fn secs_since_epoch(t: SystemTime) -> Option<f64> {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// One workspace as `wsbench workspaces list` and the TUI show it: what
/// the provider reports, merged with what this manager holds open.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceInfo {
    /// Workspace id.
    pub id: String,
    /// Profile that made it (its label), else the listing manager's.
    pub profile: String,
    /// Backend kind.
    pub backend: BackendKind,
    /// `provisioning`, `leased` or `ready` when open in this process;
    /// else the provider's state: `running`, `suspended` (a closed
    /// sandbox), `closed` (a closed local or bubblewrap workspace: a host
    /// directory, nothing to suspend),
    /// `failed`, `unknown`.
    pub state: String,
    /// Failure reason or unknown state text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Open in this process.
    pub open: bool,
    /// Live leases (0 unless open).
    pub leases: usize,
    /// User id label.
    pub user: Option<String>,
    /// Agent id label.
    pub agent: Option<String>,
    /// Session id label (per_session workspaces).
    pub session: Option<String>,
    /// The provider's own id: host directory, container id, sandbox id.
    pub location: Option<String>,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: Option<f64>,
    /// Seconds since creation.
    pub age_secs: Option<f64>,
    /// Seconds since last use (0 while leased); for workspaces not open
    /// here, since the provider's last activity.
    pub idle_secs: Option<f64>,
    /// The profile's TTL minus `idle_secs` (floored at 0): how long until
    /// a manager holding the workspace would evict it. Set for workspaces
    /// open here or running at the provider whose idle time is known;
    /// `None` for closed, suspended or failed ones (nothing left to
    /// evict) and when the provider reports no last activity.
    pub ttl_left_secs: Option<f64>,
    /// All labels.
    pub labels: BTreeMap<String, String>,
}

impl Inner {
    pub(super) async fn list(&self) -> Result<Vec<WorkspaceInfo>, ManagerError> {
        let seen = self
            .provisioner
            .list()
            .await
            .map_err(|e| backend_err("list", "", e))?;
        let open: HashMap<String, Arc<Entry>> = read(&self.cache).clone();
        let provisioning: Vec<String> = lock(&self.flights).keys().cloned().collect();
        let now = SystemTime::now();
        let now_ms = self.now_ms();
        let mut out = Vec::new();
        let mut done = HashSet::new();
        for info in seen {
            let entry = open.get(&info.workspace_id);
            let mut w = self.info_base(
                &info.workspace_id,
                &info.labels,
                info.created_at,
                entry,
                now,
                now_ms,
            );
            w.location = Some(info.backend_id.clone());
            if entry.is_none() {
                let (state, reason) = match &info.state {
                    SandboxState::Provisioning => ("provisioning", None),
                    SandboxState::Running => ("running", None),
                    // A closed host directory (local, bubblewrap) is
                    // not suspended, just no longer open anywhere.
                    // Closed by one process while another of this host
                    // still works in it (a TUI after a CLI `close`): it
                    // is in use, not closed (issue 15 trial 2).
                    SandboxState::Suspended
                        if matches!(self.kind, BackendKind::Local | BackendKind::Bubblewrap)
                            && self.held_elsewhere(&info.workspace_id).await =>
                    {
                        ("running", None)
                    }
                    SandboxState::Suspended
                        if matches!(self.kind, BackendKind::Local | BackendKind::Bubblewrap) =>
                    {
                        ("closed", None)
                    }
                    SandboxState::Suspended => ("suspended", None),
                    SandboxState::Failed(r) => ("failed", Some(r.clone())),
                    SandboxState::Unknown(r) => ("unknown", Some(r.clone())),
                };
                w.state = state.to_string();
                w.reason = reason;
                // The later of the provider's last activity and the last
                // use by a process of this host (`hold.rs`; refreshed
                // while a process leases it, so work in flight elsewhere
                // is never counted idle past a third of the TTL).
                let idle = info
                    .last_active
                    .max(self.last_used_here(&info.workspace_id))
                    .map(|t| now.duration_since(t).unwrap_or_default());
                w.idle_secs = idle.map(|d| d.as_secs_f64());
                // Only a live sandbox has a TTL running; the one-shot CLI
                // holds nothing, yet the clock is the same for every
                // process: the profile's TTL against the provider's last
                // activity.
                if matches!(
                    info.state,
                    SandboxState::Running | SandboxState::Provisioning
                ) {
                    w.ttl_left_secs = idle.map(|d| self.opts.ttl.saturating_sub(d).as_secs_f64());
                }
            }
            if provisioning.contains(&w.id) && entry.is_none() {
                w.state = "provisioning".into();
            }
            done.insert(info.workspace_id);
            out.push(w);
        }
        for (id, e) in &open {
            if done.insert(id.clone()) {
                let mut w = self.info_base(id, &e.labels, Some(e.created_at), Some(e), now, now_ms);
                w.location = e.ws.sandbox().host_root().map(|p| p.display().to_string());
                out.push(w);
            }
        }
        for id in provisioning {
            if done.insert(id.clone()) {
                let mut w = self.info_base(&id, &BTreeMap::new(), None, None, now, now_ms);
                w.state = "provisioning".into();
                out.push(w);
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    fn info_base(
        &self,
        id: &str,
        labels: &BTreeMap<String, String>,
        created_at: Option<SystemTime>,
        entry: Option<&Arc<Entry>>,
        now: SystemTime,
        now_ms: u64,
    ) -> WorkspaceInfo {
        let label = |k: &str| labels.get(k).cloned();
        let from_entry = |f: fn(&Entry) -> &String, k: &str| {
            entry
                .map(|e| f(e).clone())
                .filter(|v| !v.is_empty())
                .or_else(|| label(k))
        };
        let (state, leases, idle, ttl_left) = match entry {
            Some(e) => {
                let leases = e.leases();
                // Zero while leased: the full TTL is left once released.
                let idle = e.idle_for(now_ms);
                let ttl_left = self.opts.ttl.saturating_sub(idle);
                let state = if leases > 0 { "leased" } else { "ready" };
                (
                    state,
                    leases,
                    Some(idle.as_secs_f64()),
                    Some(ttl_left.as_secs_f64()),
                )
            }
            None => ("unknown", 0, None, None),
        };
        WorkspaceInfo {
            id: id.to_string(),
            profile: label(blabels::PROFILE).unwrap_or_else(|| self.profile.clone()),
            backend: self.kind,
            state: state.to_string(),
            reason: None,
            open: entry.is_some(),
            leases,
            user: from_entry(|e| &e.user, blabels::USER),
            agent: from_entry(|e| &e.agent, blabels::AGENT),
            session: from_entry(|e| &e.session, labels::SESSION),
            location: None,
            created_at: created_at.and_then(secs_since_epoch),
            age_secs: created_at
                .and_then(|t| now.duration_since(t).ok())
                .map(|d| d.as_secs_f64()),
            idle_secs: idle,
            ttl_left_secs: ttl_left,
            labels: labels.clone(),
        }
    }
}
