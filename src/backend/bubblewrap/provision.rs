//! The bubblewrap provisioner: one host directory per workspace (kept by
//! the local provisioner's records), opened as a [`BubblewrapSandbox`]
//! after a one-time probe.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::{BubblewrapOptions, BubblewrapSandbox, default_base_dir};
use crate::backend::local::LocalProvisioner;
use crate::backend::{
    BackendKind, BackendResult, ProvisionSpec, Provisioner, ProvisionerCapabilities, Sandbox,
    SandboxInfo,
};

/// Provisions bubblewrap workspaces: one host directory per workspace
/// under the base dir, with the same records as the local provisioner
/// (`<base>/.wsbench/workspaces/<id>.json`), so a restarted wsbench lists
/// and reattaches them.
pub struct BubblewrapProvisioner {
    opts: BubblewrapOptions,
    dirs: LocalProvisioner,
    /// The probe ran and passed once in this process; later workspaces
    /// skip it.
    probed: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for BubblewrapProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BubblewrapProvisioner")
            .field("opts", &self.opts)
            .finish()
    }
}

impl BubblewrapProvisioner {
    /// A provisioner with `opts` (the built-in `bwrap` profile passes
    /// `BubblewrapOptions::default()`). Directories go under
    /// `opts.base_dir`, or [`default_base_dir`].
    pub fn new(opts: BubblewrapOptions) -> Self {
        let base = opts.base_dir.clone().unwrap_or_else(default_base_dir);
        BubblewrapProvisioner {
            opts,
            dirs: LocalProvisioner::new(base),
            probed: tokio::sync::OnceCell::new(),
        }
    }

    /// Replaces the directory layout (default `<base>/<sanitised id>`).
    pub fn with_layout(
        mut self,
        layout: impl Fn(&ProvisionSpec) -> PathBuf + Send + Sync + 'static,
    ) -> Self {
        self.dirs = self.dirs.with_layout(layout);
        self
    }

    /// The options.
    pub fn options(&self) -> &BubblewrapOptions {
        &self.opts
    }

    async fn ready(&self, sb: BubblewrapSandbox) -> BackendResult<Arc<dyn Sandbox>> {
        if self.opts.probe {
            self.probed.get_or_try_init(|| sb.probe()).await?;
        }
        Ok(Arc::new(sb))
    }
}

#[async_trait]
impl Provisioner for BubblewrapProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Bubblewrap
    }

    /// The base directory.
    fn instance_key(&self) -> Option<String> {
        self.dirs.instance_key()
    }

    /// `suspend`: closing is recorded (the workspace lists as closed until
    /// the next attach), like local; nothing is stopped (issue 15 point 4).
    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: true,
            keep_alive: false,
            persistent: true,
        }
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let local = self.dirs.create(spec).await?;
        let root = local
            .host_root()
            .map(Path::to_path_buf)
            .expect("local sandboxes have a host root");
        self.ready(BubblewrapSandbox::open(root, self.opts.clone())?)
            .await
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        self.dirs.find(workspace_id).await
    }

    /// Records the reopen in the directory's record (no longer closed,
    /// idle clock restarted), then opens the box.
    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        self.dirs.attach(info).await?;
        self.ready(BubblewrapSandbox::open(
            &info.backend_id,
            self.opts.clone(),
        )?)
        .await
    }

    /// Records the close (listed as suspended, `"open": false`) the way
    /// the local provisioner does; no process is touched.
    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        self.dirs.suspend(workspace_id).await
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        self.dirs.resume(workspace_id).await
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        self.dirs.destroy(workspace_id).await
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        self.dirs.list().await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::backend::SandboxState;

    /// Issue 15 point 4: after a close, the list says closed (it said
    /// `running`), and the next attach opens it again — as for local.
    #[tokio::test]
    async fn close_is_recorded_until_the_next_attach() {
        let base = tempfile::tempdir().unwrap();
        let prov = BubblewrapProvisioner::new(BubblewrapOptions {
            base_dir: Some(base.path().to_path_buf()),
            probe: false,
            ..BubblewrapOptions::default()
        });
        assert!(prov.capabilities().suspend);
        let spec = ProvisionSpec {
            workspace_id: "w".into(),
            labels: BTreeMap::new(),
        };
        prov.create(&spec).await.unwrap();
        let state = async |p: &BubblewrapProvisioner| p.find("w").await.unwrap().unwrap().state;
        assert_eq!(state(&prov).await, SandboxState::Running);
        prov.suspend("w").await.unwrap();
        assert_eq!(state(&prov).await, SandboxState::Suspended);
        let listed = prov.list().await.unwrap();
        assert_eq!(listed[0].state, SandboxState::Suspended);
        let info = prov.find("w").await.unwrap().unwrap();
        prov.attach(&info).await.unwrap();
        assert_eq!(state(&prov).await, SandboxState::Running);
    }
}
