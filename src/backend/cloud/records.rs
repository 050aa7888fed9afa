//! Which cloud sandbox holds which workspace: the labels a new sandbox
//! gets, the process's memory of sandbox ids ([`Known`]), and picking a
//! workspace's sandbox out of a service's listing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::backend::{BackendError, BackendResult, ProvisionSpec, SandboxInfo, labels};

/// Which sandbox holds which workspace, as far as this process has seen:
/// spares a listing for the calls that need only the sandbox id.
#[derive(Debug, Default)]
pub struct Known(Mutex<HashMap<String, String>>);

impl Known {
    /// The sandbox id remembered for `workspace_id`.
    pub fn get(&self, workspace_id: &str) -> Option<String> {
        self.lock().get(workspace_id).cloned()
    }

    /// Remembers `sandbox_id` for `workspace_id` (an empty workspace id,
    /// a sandbox of no workspace, is not remembered).
    pub fn remember(&self, workspace_id: &str, sandbox_id: &str) {
        if !workspace_id.is_empty() {
            self.lock()
                .insert(workspace_id.to_string(), sandbox_id.to_string());
        }
    }

    /// Forgets `workspace_id`; returns the sandbox id it had.
    pub(crate) fn forget(&self, workspace_id: &str) -> Option<String> {
        self.lock().remove(workspace_id)
    }

    /// Passes `r` through, forgetting `workspace_id` when it says the
    /// sandbox is gone ([`BackendError::Unavailable`]).
    pub(crate) fn forget_on_gone<T>(
        &self,
        workspace_id: &str,
        r: BackendResult<T>,
    ) -> BackendResult<T> {
        if matches!(r, Err(BackendError::Unavailable { .. })) {
            self.forget(workspace_id);
        }
        r
    }

    /// The sandbox id of `workspace_id`: the remembered one, else the one
    /// `find` reports (awaited only then).
    ///
    /// Errors: those of `find`; [`BackendError::Unavailable`] ("no
    /// `<service>` sandbox for workspace ...") when there is none.
    pub async fn sandbox_id(
        &self,
        service: &str,
        workspace_id: &str,
        find: impl Future<Output = BackendResult<Option<SandboxInfo>>>,
    ) -> BackendResult<String> {
        if let Some(id) = self.get(workspace_id) {
            return Ok(id);
        }
        match find.await? {
            Some(i) => Ok(i.backend_id),
            None => Err(BackendError::gone(format!(
                "no {service} sandbox for workspace {workspace_id}"
            ))),
        }
    }

    /// The ids of every sandbox of `workspace_id`: those in `listed` that
    /// carry its id, and the one remembered for it (forgotten now), each
    /// once.
    pub(crate) fn all_ids(
        &self,
        workspace_id: &str,
        listed: impl IntoIterator<Item = SandboxInfo>,
    ) -> Vec<String> {
        let mut ids: Vec<String> = listed
            .into_iter()
            .filter(|i| i.workspace_id == workspace_id)
            .map(|i| i.backend_id)
            .collect();
        if let Some(id) = self.forget(workspace_id)
            && !ids.contains(&id)
        {
            ids.push(id);
        }
        ids
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().expect("known sandboxes lock")
    }
}

/// The labels (metadata) of a new sandbox: the profile's `extra`, then
/// the spec's, then the workspace id, last, so nothing a user passes can
/// retarget the reattach key (docs/contract.md §11 point 27).
pub fn labels_for(
    extra: &BTreeMap<String, String>,
    spec: &ProvisionSpec,
) -> BTreeMap<String, String> {
    let mut out = extra.clone();
    out.extend(spec.labels.clone());
    out.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
    out
}

/// The sandboxes in `listed` that belong to a workspace (those without
/// the workspace-id label are someone else's), sorted by workspace id.
pub fn workspaces(listed: impl IntoIterator<Item = SandboxInfo>) -> Vec<SandboxInfo> {
    let mut out: Vec<SandboxInfo> = listed
        .into_iter()
        .filter(|i| i.labels.contains_key(labels::WORKSPACE_ID))
        .collect();
    out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
    out
}

/// The sandbox of `workspace_id` with the greatest `key` among `found`
/// (the service filtered by label already; checked again, in case a
/// server ignores the filter). Several are a leftover of a crash between
/// create and record: logged, and the newest wins.
pub fn newest<K: Ord>(
    service: &str,
    workspace_id: &str,
    found: impl IntoIterator<Item = (K, SandboxInfo)>,
) -> Option<SandboxInfo> {
    let mut found: Vec<(K, SandboxInfo)> = found
        .into_iter()
        .filter(|(_, i)| i.workspace_id == workspace_id)
        .collect();
    if found.len() > 1 {
        tracing::warn!(
            workspace_id,
            count = found.len(),
            "several {service} sandboxes carry this workspace id; using the newest"
        );
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.pop().map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(ws: Option<&str>, id: &str) -> SandboxInfo {
        let mut labels = std::collections::BTreeMap::new();
        if let Some(w) = ws {
            labels.insert(
                crate::backend::labels::WORKSPACE_ID.to_string(),
                w.to_string(),
            );
        }
        SandboxInfo {
            workspace_id: ws.unwrap_or_default().to_string(),
            backend_id: id.to_string(),
            state: crate::backend::SandboxState::Running,
            labels,
            created_at: None,
            last_active: None,
        }
    }

    #[test]
    fn known_sandboxes_and_listings() {
        let k = Known::default();
        k.remember("w1", "s1");
        k.remember("", "s0");
        assert_eq!(k.get("w1").as_deref(), Some("s1"));
        assert_eq!(k.get(""), None);
        let kept: BackendResult<()> = Err(BackendError::NotFound("p".into()));
        assert!(k.forget_on_gone("w1", kept).is_err());
        assert!(k.get("w1").is_some());
        let gone: BackendResult<()> = Err(BackendError::gone("gone"));
        assert!(k.forget_on_gone("w1", gone).is_err());
        assert_eq!(k.get("w1"), None);
        // Listed ids of the workspace plus the remembered one, once each.
        k.remember("w1", "s2");
        let listed = vec![
            info(Some("w1"), "s2"),
            info(Some("w2"), "s3"),
            info(Some("w1"), "s4"),
        ];
        assert_eq!(k.all_ids("w1", listed.clone()), ["s2", "s4"]);
        assert_eq!(k.get("w1"), None);
        // Someone else's sandbox is no workspace; the rest sorted by id.
        let mut all = listed;
        all.insert(0, info(None, "x"));
        let ws: Vec<String> = workspaces(all.clone())
            .into_iter()
            .map(|i| i.backend_id)
            .collect();
        assert_eq!(ws, ["s2", "s4", "s3"]);
        assert_eq!(
            newest("X", "w1", all.into_iter().enumerate())
                .unwrap()
                .backend_id,
            "s4"
        );
        assert!(newest("X", "w9", [(1, info(Some("w1"), "s"))]).is_none());
    }
}
