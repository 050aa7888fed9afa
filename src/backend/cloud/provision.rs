//! The one provisioning flow of the cloud backends: [`CloudProvisioner`]
//! is the whole [`Provisioner`] over a [`CloudService`], which holds only
//! the service's protocol (one listing page, create, wake, connect, pause,
//! resume, renew, delete).
//!
//! The flow, the same for every service:
//! * **find**: every page of the listing filtered by the workspace-id
//!   label; the newest by the service's [`CloudService::Order`] wins
//!   (several are a leftover of a crash, logged by [`newest`]).
//! * **create**: under a host lock of the workspace (so the processes of
//!   one host never make two sandboxes for it, issue 15 point 3), find
//!   again and attach what another process made meanwhile; else create,
//!   wait until it runs, connect; a sandbox made just
//!   now holds no user data, so when any step after the create fails it is
//!   deleted rather than leaked (docs/contract.md §11 point 16). A reattached one
//!   is never deleted on failure.
//! * **attach**: wake (resume, start, recover: whatever the service
//!   needs), remember, connect.
//! * **suspend / resume / keep-alive**: on the sandbox id remembered for
//!   the workspace (else found); an answer that the sandbox is gone
//!   ([`BackendError::Unavailable`]) forgets it, so the manager's next
//!   open re-provisions.
//! * **destroy**: every listed sandbox of the workspace and the
//!   remembered one, each deleted once; one already gone counts as
//!   deleted.
//! * **list**: the sandboxes that carry a workspace id, sorted by it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::records::{Known, newest, workspaces};
use crate::backend::host::lock::HostLock;
use crate::backend::{
    BackendError, BackendKind, BackendResult, ProvisionSpec, Provisioner, ProvisionerCapabilities,
    Sandbox, SandboxInfo, SandboxState, labels,
};

/// How long a create waits for another process of this host making the
/// same workspace's sandbox: longer than a create plus its wait until
/// running normally takes, short enough that a stuck holder is reported.
const CREATE_LOCK_WAIT: Duration = Duration::from_secs(300);

/// One sandbox of a listing, with the key that orders a workspace's
/// sandboxes from oldest to newest.
#[derive(Debug, Clone)]
pub struct Listed<K> {
    /// What the listing says of it.
    pub info: SandboxInfo,
    /// Greater is newer.
    pub order: K,
}

impl Listed<Option<std::time::SystemTime>> {
    /// `info` ordered by its creation time (unknown sorts oldest).
    pub fn by_creation(info: SandboxInfo) -> Self {
        Listed {
            order: info.created_at,
            info,
        }
    }
}

/// One page of a service's listing.
#[derive(Debug, Clone)]
pub struct Page<K> {
    /// The sandboxes on this page.
    pub items: Vec<Listed<K>>,
    /// The cursor of the next page (the service's token, or a page number
    /// written out); `None` on the last page. Listing also stops at an
    /// empty page and at a cursor that repeats the one just used.
    pub next: Option<String>,
}

/// The protocol of one cloud service, as [`CloudProvisioner`] drives it.
/// Each method is one request or one short sequence of the service's
/// own; the flow around them (records, clean-up, pagination) is the
/// provisioner's.
#[async_trait]
pub trait CloudService: Send + Sync + 'static {
    /// Backend kind.
    const KIND: BackendKind;

    /// The service's name in messages ("E2B", "Daytona", "OpenSandbox").
    const NAME: &'static str;

    /// Orders a workspace's sandboxes (creation time, last activity...).
    type Order: Ord + Send;

    /// What create and wake answer: enough to connect to the sandbox.
    type Record: Send;

    /// The profile's options for the service (`[profiles.<name>.options]`).
    type Options;

    /// The service for `opts`: its HTTP client made, its key found.
    ///
    /// Errors: the service's (no key where one is required, a key that
    /// cannot be a header, no TLS stack).
    fn new(opts: Self::Options) -> BackendResult<Self>
    where
        Self: Sized;

    /// [`Provisioner::capabilities`]: what the service can do, the same
    /// for every profile.
    const CAPABILITIES: ProvisionerCapabilities;

    /// The sandbox id of `record`.
    fn record_id(record: &Self::Record) -> &str;

    /// The API base URL (what tells two deployments of the service
    /// apart; [`Provisioner::instance_key`]).
    fn api_url(&self) -> String;

    /// Whether `find` may pick a listed sandbox (by default any); a
    /// service leaves out those it knows cannot be used.
    fn findable(_info: &SandboxInfo) -> bool {
        true
    }

    /// The page after `cursor` (`None`: the first) of the sandboxes the
    /// provisioner may see, only those labelled with `workspace_id` when
    /// it is given.
    ///
    /// Errors: the service's.
    async fn list_page(
        &self,
        workspace_id: Option<&str>,
        cursor: Option<&str>,
    ) -> BackendResult<Page<Self::Order>>;

    /// Creates a sandbox for `spec` (its labels from
    /// [`labels_for`](super::labels_for)); returns before it may run.
    ///
    /// Errors: the service's.
    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Self::Record>;

    /// Waits until a sandbox just created runs; by default it already
    /// does when create answers.
    ///
    /// Errors: the service's; a failed state.
    async fn wait_running(&self, record: Self::Record) -> BackendResult<Self::Record> {
        Ok(record)
    }

    /// Brings a found sandbox to running from whatever state it is in, for
    /// attach.
    ///
    /// Errors: [`BackendError::Unavailable`] when it is gone or cannot
    /// run again; the service's.
    async fn wake(&self, id: &str) -> BackendResult<Self::Record>;

    /// Opens a running sandbox: its [`Sandbox`] handle, once the daemon in
    /// it answers and the workdir exists.
    ///
    /// Errors: the daemon is not ready in time; the service's.
    async fn connect(&self, record: Self::Record) -> BackendResult<Arc<dyn Sandbox>>;

    /// Pauses (stops) sandbox `id`; one already paused is fine.
    ///
    /// Errors: as for [`CloudService::wake`].
    async fn pause(&self, id: &str) -> BackendResult<()>;

    /// Resumes (starts) sandbox `id`.
    ///
    /// Errors: as for [`CloudService::wake`].
    async fn resume(&self, id: &str) -> BackendResult<()>;

    /// Pushes the provider's expiry of `id` to at least `ttl` from now;
    /// called only when [`ProvisionerCapabilities::keep_alive`] is set.
    ///
    /// Errors: as for [`CloudService::wake`].
    async fn renew(&self, _id: &str, _ttl: Duration) -> BackendResult<()> {
        Err(BackendError::Unsupported {
            backend: Self::KIND,
            what: "keep-alive",
        })
    }

    /// Deletes sandbox `id`; one already gone counts as deleted.
    ///
    /// Errors: the service refuses.
    async fn delete(&self, id: &str) -> BackendResult<()>;
}

/// The [`Provisioner`] of a cloud service: the flow of the module doc
/// over `S`, with the records of which sandbox holds which workspace.
#[derive(Debug)]
pub struct CloudProvisioner<S> {
    service: S,
    known: Known,
}

impl<S: CloudService> CloudProvisioner<S> {
    /// The provisioner over `service`.
    pub fn over(service: S) -> Self {
        CloudProvisioner {
            service,
            known: Known::default(),
        }
    }

    /// The provisioner of the service made for `opts`.
    ///
    /// Errors: as [`CloudService::new`].
    pub fn new(opts: S::Options) -> BackendResult<Self> {
        S::new(opts).map(Self::over)
    }

    /// The service protocol in use.
    pub fn service(&self) -> &S {
        &self.service
    }

    /// Every listed sandbox, only those of `workspace_id` when given,
    /// across all pages.
    async fn list_all(&self, workspace_id: Option<&str>) -> BackendResult<Vec<Listed<S::Order>>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .service
                .list_page(workspace_id, cursor.as_deref())
                .await?;
            let empty = page.items.is_empty();
            out.extend(page.items);
            match page.next {
                Some(n) if !empty && Some(&n) != cursor.as_ref() => cursor = Some(n),
                _ => break,
            }
        }
        Ok(out)
    }

    /// The sandbox id of `workspace_id`: remembered, else found.
    async fn sandbox_id(&self, workspace_id: &str) -> BackendResult<String> {
        let find = self.find(workspace_id);
        self.known.sandbox_id(S::NAME, workspace_id, find).await
    }
}

#[async_trait]
impl<S: CloudService> Provisioner for CloudProvisioner<S> {
    fn kind(&self) -> BackendKind {
        S::KIND
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        S::CAPABILITIES
    }

    /// The service's API URL.
    fn instance_key(&self) -> Option<String> {
        Some(self.service.api_url())
    }

    /// Creates the workspace's sandbox, unless another process of this
    /// host made it while this one waited for the host lock: then that
    /// one is attached (issue 15 point 3; see [`HostLock`]).
    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        let _lock = HostLock::acquire(S::NAME, &spec.workspace_id, CREATE_LOCK_WAIT).await?;
        if let Some(info) = self.find(&spec.workspace_id).await?
            && !matches!(info.state, SandboxState::Failed(_))
        {
            return self.attach(&info).await;
        }
        let record = self.service.create(spec).await?;
        let id = S::record_id(&record).to_string();
        let opened = async {
            let record = self.service.wait_running(record).await?;
            self.service.connect(record).await
        }
        .await;
        match opened {
            Ok(sb) => {
                self.known.remember(&spec.workspace_id, &id);
                Ok(sb)
            }
            Err(e) => {
                // Made just now, so it holds no user data: delete it
                // rather than leak it (docs/contract.md §11 point 16).
                let _ = self.service.delete(&id).await;
                Err(e)
            }
        }
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        let listed = self.list_all(Some(workspace_id)).await?;
        let found = listed
            .into_iter()
            .filter(|l| S::findable(&l.info))
            .map(|l| (l.order, l.info));
        Ok(newest(S::NAME, workspace_id, found))
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        let record = self.service.wake(&info.backend_id).await?;
        self.known
            .remember(&info.workspace_id, S::record_id(&record));
        self.service.connect(record).await
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let r = self.service.pause(&id).await;
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn resume(&self, workspace_id: &str) -> BackendResult<()> {
        let id = self.sandbox_id(workspace_id).await?;
        let r = self.service.resume(&id).await;
        self.known.forget_on_gone(workspace_id, r)
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        let listed = self.list_all(Some(workspace_id)).await?;
        let ids = self
            .known
            .all_ids(workspace_id, listed.into_iter().map(|l| l.info));
        for id in ids {
            self.service.delete(&id).await?;
        }
        Ok(())
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        let listed = self.list_all(None).await?;
        Ok(workspaces(listed.into_iter().map(|l| l.info)))
    }

    async fn keep_alive(&self, workspace_id: &str, ttl: Duration) -> BackendResult<()> {
        if !S::CAPABILITIES.keep_alive {
            return Err(BackendError::Unsupported {
                backend: S::KIND,
                what: "keep-alive",
            });
        }
        let id = self.sandbox_id(workspace_id).await?;
        let r = self.service.renew(&id, ttl).await;
        self.known.forget_on_gone(workspace_id, r)
    }
}

/// The labels filter a service's listing takes for `workspace_id`.
pub fn workspace_filter(workspace_id: Option<&str>) -> Vec<(&'static str, &str)> {
    workspace_id
        .map(|w| vec![(labels::WORKSPACE_ID, w)])
        .unwrap_or_default()
}
