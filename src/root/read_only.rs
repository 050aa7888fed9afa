//! `--read-only` at the provisioning level: a provisioner that finds,
//! lists and attaches, and never makes or destroys anything.
//!
//! The workspace itself is wrapped by the engine's `ReadOnlySandbox`
//! (every write and exec refused); this is the layer under it, so that
//! opening a workspace whose sandbox or directory does not exist fails
//! with a clear error instead of provisioning one, whichever front end
//! opens it (the CLI, the TUI's `:profile` and Workspaces pane, the
//! agent): every manager of a read-only run is built on this wrapper.
//!
//! Limits: attaching still does what the backend's attach does, which
//! for a suspended sandbox is resuming it (a stopped container is
//! started; reading it needs it running) and for a local workspace is
//! noting its last use in the profile's `.wsbench/workspaces/` record,
//! outside the workspace tree.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::backend::{
    BackendError, BackendKind, BackendResult, NoticeSink, ProvisionSpec, Provisioner,
    ProvisionerCapabilities, Sandbox, SandboxInfo,
};

/// `inner`, with creating and destroying refused and suspending left
/// undone (see the module docs).
pub(crate) struct ReadOnlyProvisioner {
    inner: Arc<dyn Provisioner>,
}

impl ReadOnlyProvisioner {
    /// Wraps `inner`.
    pub(crate) fn new(inner: Arc<dyn Provisioner>) -> Self {
        ReadOnlyProvisioner { inner }
    }
}

/// The error of a refused `create`: the workspace does not exist, and
/// read-only mode does not make it.
fn not_created(id: &str) -> BackendError {
    BackendError::PermissionDenied(format!(
        "workspace {id} does not exist, and --read-only does not create it (run once without --read-only to make it)"
    ))
}

#[async_trait]
impl Provisioner for ReadOnlyProvisioner {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        self.inner.capabilities()
    }

    fn instance_key(&self) -> Option<String> {
        self.inner.instance_key()
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        Err(not_created(&spec.workspace_id))
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        self.inner.find(workspace_id).await
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        self.inner.attach(info).await
    }

    /// Left undone: the sandbox stays as it is (an idle sweep or a close
    /// in a read-only run changes nothing). `workspaces close` itself is
    /// refused by the CLI before it gets here.
    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        tracing::debug!(workspace_id, "read-only: not suspending");
        Ok(())
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        self.inner.resume(workspace_id).await
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        Err(BackendError::PermissionDenied(format!(
            "workspace {workspace_id} is not destroyed: --read-only changes nothing"
        )))
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        self.inner.list().await
    }

    fn set_notice_sink(&self, sink: NoticeSink) {
        self.inner.set_notice_sink(sink)
    }

    async fn keep_alive(&self, workspace_id: &str, ttl: Duration) -> BackendResult<()> {
        self.inner.keep_alive(workspace_id, ttl).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::local::LocalProvisioner;

    #[tokio::test]
    async fn a_missing_workspace_is_not_created_and_nothing_is_written() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("base");
        let p = ReadOnlyProvisioner::new(Arc::new(LocalProvisioner::new(&base)));
        let spec = ProvisionSpec {
            workspace_id: "w1".into(),
            ..Default::default()
        };
        let err = p.provision(&spec).await.err().expect("refused");
        let text = err.to_string();
        assert!(text.contains("w1 does not exist"), "{text}");
        assert!(text.contains("--read-only"), "{text}");
        assert!(!base.exists(), "something was written under {base:?}");
        assert!(p.destroy("w1").await.is_err());
    }
}
