//! The local provisioner: one host directory per workspace under a base
//! dir, with a JSON record per workspace so a later process can list and
//! reattach it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::LocalSandbox;
use crate::backend::host::{atomic_write_host, sanitize_segment};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ProvisionSpec, Provisioner, ProvisionerCapabilities,
    Sandbox, SandboxInfo, SandboxState, labels,
};

/// Record kept for each local workspace the provisioner made, in
/// `<base>/.wsbench/workspaces/<id>.json`.
///
/// `last_used_at` and `closed_at` (seconds since the Unix epoch) carry
/// what one process knows to the next: when a manager last attached the
/// workspace (its idle clock, with the directory's mtime) and whether it
/// was closed since. Records written before they existed read as never
/// closed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct LocalRecord {
    workspace_id: String,
    dir: PathBuf,
    labels: BTreeMap<String, String>,
    created_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_used_at: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    closed_at: Option<f64>,
}

fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn from_epoch_secs(s: f64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs_f64(s.max(0.0))
}

/// Provisions local workspaces as directories under a base dir.
///
/// The directory for a spec comes from `layout` (default
/// `<base>/<sanitised id>`); the manager passes its own layout. Each
/// workspace gets a small record under `<base>/.wsbench/workspaces/` so a
/// later process can list and reattach it with its labels.
pub struct LocalProvisioner {
    base: PathBuf,
    layout: Box<dyn Fn(&ProvisionSpec) -> PathBuf + Send + Sync>,
    /// Also list and find the folders directly under `base` that have no
    /// record (the reference's `<base>/<agent>`, `layout = "reference"`).
    foreign_dirs: bool,
}

/// Entries of the base folder looked at per listing for foreign folders.
const FOREIGN_SCAN_MAX: usize = 10_000;

/// True when `name` is one plain folder name that the reference's local
/// manager would use as it is (`os.path.join(basedir, agent_id)`): not
/// empty, no `/` or NUL, not starting with `.` (so never `.`, `..` or
/// wsbench's `.wsbench`), and not `by-id` (wsbench's folder of other ids).
pub fn plain_segment(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\0']) && name != "by-id"
}

impl std::fmt::Debug for LocalProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvisioner")
            .field("base", &self.base)
            .finish()
    }
}

impl LocalProvisioner {
    /// Provisioner rooted at `base` with the default one-dir-per-id layout.
    pub fn new(base: impl Into<PathBuf>) -> Self {
        let base: PathBuf = base.into();
        let b = base.clone();
        LocalProvisioner {
            base,
            layout: Box::new(move |spec| b.join(sanitize_segment(&spec.workspace_id))),
            foreign_dirs: false,
        }
    }

    /// Lists each folder directly under the base that no record names
    /// and whose name is [`plain_segment`] as a workspace of that id (its
    /// agent label the same name), and [`Provisioner::find`] finds it by
    /// that id: what the reference's local manager made there
    /// (docs/contract.md §8.3). Records still win.
    pub fn with_foreign_dirs(mut self) -> Self {
        self.foreign_dirs = true;
        self
    }

    /// The folder `<base>/<id>` as a workspace, when foreign folders are
    /// read, `id` is a plain name, the folder exists and no record names
    /// it.
    fn foreign(&self, id: &str) -> Option<SandboxInfo> {
        let dir = self.base.join(id);
        if !self.foreign_dirs || !plain_segment(id) || !dir.is_dir() {
            return None;
        }
        let labels = BTreeMap::from([
            (labels::WORKSPACE_ID.to_string(), id.to_string()),
            (labels::AGENT.to_string(), id.to_string()),
        ]);
        let meta = std::fs::metadata(&dir).ok();
        Some(SandboxInfo {
            workspace_id: id.to_string(),
            backend_id: dir.display().to_string(),
            state: SandboxState::Running,
            labels,
            created_at: meta.as_ref().and_then(|m| m.created().ok()),
            last_active: meta.and_then(|m| m.modified().ok()),
        })
    }

    /// Replaces the directory layout.
    pub fn with_layout(
        mut self,
        layout: impl Fn(&ProvisionSpec) -> PathBuf + Send + Sync + 'static,
    ) -> Self {
        self.layout = Box::new(layout);
        self
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.base
            .join(".wsbench")
            .join("workspaces")
            .join(format!("{}.json", sanitize_segment(id)))
    }

    fn read_record(&self, id: &str) -> Option<LocalRecord> {
        let text = std::fs::read(self.record_path(id)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn write_record(&self, rec: &LocalRecord) -> BackendResult<()> {
        let path = self.record_path(&rec.workspace_id);
        let body = serde_json::to_vec_pretty(rec).expect("record json");
        atomic_write_host(&path, &body)
            .map_err(|e| BackendError::from_io(e, path.display().to_string()))
    }

    /// Rewrites the record of `id` through `f`; no record, nothing to do.
    fn update_record(&self, id: &str, f: impl FnOnce(&mut LocalRecord)) -> BackendResult<()> {
        match self.read_record(id) {
            Some(mut rec) => {
                f(&mut rec);
                self.write_record(&rec)
            }
            None => Ok(()),
        }
    }

    fn info(rec: &LocalRecord) -> SandboxInfo {
        let created = from_epoch_secs(rec.created_at);
        // Whichever is later: the last attach a manager recorded, or the
        // last change to the workspace's top level.
        let mtime = std::fs::metadata(&rec.dir).and_then(|m| m.modified()).ok();
        let last_active = mtime.max(rec.last_used_at.map(from_epoch_secs));
        SandboxInfo {
            workspace_id: rec.workspace_id.clone(),
            backend_id: rec.dir.display().to_string(),
            state: if !rec.dir.is_dir() {
                SandboxState::Failed(format!("directory {} is missing", rec.dir.display()))
            } else if rec.closed_at.is_some() {
                SandboxState::Suspended
            } else {
                SandboxState::Running
            },
            labels: rec.labels.clone(),
            created_at: Some(created),
            last_active,
        }
    }
}

#[async_trait]
impl Provisioner for LocalProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    /// The base directory.
    fn instance_key(&self) -> Option<String> {
        Some(self.base.display().to_string())
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        // "Suspending" a directory frees nothing; it records the close so
        // every process lists the workspace as closed until it is used.
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: false,
            persistent: true,
        }
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let dir = (self.layout)(spec);
        let sandbox = LocalSandbox::open(&dir)?;
        let mut labels = spec.labels.clone();
        labels.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
        let now = epoch_secs(SystemTime::now());
        let rec = LocalRecord {
            workspace_id: spec.workspace_id.clone(),
            dir: sandbox.root.clone(),
            labels,
            created_at: now,
            last_used_at: Some(now),
            closed_at: None,
        };
        self.write_record(&rec)?;
        Ok(Arc::new(sandbox))
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        Ok(match self.read_record(workspace_id) {
            Some(r) => Some(Self::info(&r)),
            None => self.foreign(workspace_id),
        })
    }

    /// Opens the directory and records the use: the workspace is open
    /// again (no longer `closed`) and its idle clock restarts.
    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let sandbox = LocalSandbox::open(&info.backend_id)?;
        let now = epoch_secs(SystemTime::now());
        self.update_record(&info.workspace_id, |r| {
            r.closed_at = None;
            r.last_used_at = Some(now);
        })?;
        Ok(Arc::new(sandbox))
    }

    /// Marks the workspace closed (listed as [`SandboxState::Suspended`])
    /// until the next attach; files and processes are left alone.
    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let now = epoch_secs(SystemTime::now());
        self.update_record(workspace_id, |r| r.closed_at = Some(now))
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        self.update_record(workspace_id, |r| r.closed_at = None)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        if let Some(rec) = self.read_record(workspace_id) {
            match tokio::fs::remove_dir_all(&rec.dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BackendError::from_io(e, rec.dir.display().to_string())),
            }
        }
        match tokio::fs::remove_file(self.record_path(workspace_id)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(BackendError::from_io(e, workspace_id)),
        }
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let dir = self.base.join(".wsbench").join("workspaces");
        // No record folder yet: no records, foreign folders still listed.
        let mut out: Vec<SandboxInfo> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<LocalRecord>(&b).ok())
            .map(|r| Self::info(&r))
            .collect();
        if self.foreign_dirs {
            // Folders a record already names are listed once, by its id;
            // a name that is also a recorded id is not listed twice.
            let canon = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
            let recorded: std::collections::HashSet<PathBuf> = out
                .iter()
                .map(|i| canon(PathBuf::from(&i.backend_id)))
                .collect();
            let ids: std::collections::HashSet<String> =
                out.iter().map(|i| i.workspace_id.clone()).collect();
            let mut names: Vec<String> = std::fs::read_dir(&self.base)
                .into_iter()
                .flatten()
                .flatten()
                // A bound on what one listing reads: a base folder is not
                // expected to hold more agents than this.
                .take(FOREIGN_SCAN_MAX)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| !ids.contains(n) && !recorded.contains(&canon(self.base.join(n))))
                .collect();
            names.sort();
            out.extend(names.iter().filter_map(|n| self.foreign(n)));
            out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn provisioner_creates_lists_and_reattaches() {
        let base = tempfile::tempdir().unwrap();
        let prov = LocalProvisioner::new(base.path());
        let spec = ProvisionSpec {
            workspace_id: "ws/1".into(),
            labels: BTreeMap::new(),
        };
        let sb = prov.create(&spec).await.unwrap();
        sb.write(&format!("{}/f", sb.workdir()), b"x")
            .await
            .unwrap();
        let again = LocalProvisioner::new(base.path());
        let list = again.list().await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].labels[labels::WORKSPACE_ID], "ws/1");
        let sb2 = again.provision(&spec).await.unwrap();
        assert_eq!(
            sb2.read(&format!("{}/f", sb2.workdir()), None)
                .await
                .unwrap(),
            b"x"
        );
        again.destroy("ws/1").await.unwrap();
        assert!(again.list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn close_is_recorded_until_the_next_attach_and_old_records_still_read() {
        let base = tempfile::tempdir().unwrap();
        let prov = LocalProvisioner::new(base.path());
        let spec = ProvisionSpec {
            workspace_id: "w".into(),
            labels: BTreeMap::new(),
        };
        prov.create(&spec).await.unwrap();
        let info = prov.find("w").await.unwrap().unwrap();
        assert_eq!(info.state, SandboxState::Running);
        assert!(info.last_active.is_some());
        prov.suspend("w").await.unwrap();
        let info = prov.find("w").await.unwrap().unwrap();
        assert_eq!(info.state, SandboxState::Suspended);
        prov.attach(&info).await.unwrap();
        assert_eq!(
            prov.find("w").await.unwrap().unwrap().state,
            SandboxState::Running
        );
        prov.suspend("no-such").await.unwrap();
        // A record from before `closed_at` / `last_used_at` existed.
        let old = serde_json::json!({
            "workspace_id": "old", "dir": base.path().join("old"),
            "labels": {}, "created_at": 1.0,
        });
        std::fs::create_dir(base.path().join("old")).unwrap();
        std::fs::write(prov.record_path("old"), old.to_string()).unwrap();
        let info = prov.find("old").await.unwrap().unwrap();
        assert_eq!(info.state, SandboxState::Running);
    }
}
