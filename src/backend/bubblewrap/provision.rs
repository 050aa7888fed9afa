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

    fn capabilities(&self) -> ProvisionerCapabilities {
        ProvisionerCapabilities {
            suspend: false,
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

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        self.ready(BubblewrapSandbox::open(
            &info.backend_id,
            self.opts.clone(),
        )?)
        .await
    }

    async fn suspend(&self, _workspace_id: &str) -> BackendResult<()> {
        Ok(())
    }

    async fn resume(&self, _workspace_id: &str) -> BackendResult<()> {
        Ok(())
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        self.dirs.destroy(workspace_id).await
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        self.dirs.list().await
    }
}
