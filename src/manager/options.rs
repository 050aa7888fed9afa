//! How a manager behaves: its options, the eviction mode and what
//! closing does, derived from the backend (see
//! [`ManagerOptions::for_provisioner`]).

use std::time::Duration;

use serde::Serialize;

use super::{IsolationPolicy, PrewarmConfig};
use crate::backend::{BackendKind, Provisioner, ProvisionerCapabilities};
use crate::engine::WorkspaceConfig;

/// Default idle time before eviction (docs/contract.md §8.2: 3600 s).
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// Default sweeper period (docs/contract.md §8.2: 300 s).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(300);
/// Default provider expiry pushed back by each keep-alive renewal
/// (E2B's and OpenSandbox's own default timeout, docs/contract.md §11 point 15).
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(300);

/// When idle workspaces are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictionMode {
    /// At the start of a `get_workspace`, at most once per
    /// `min(ttl, sweep_interval)` (the reference's local manager).
    OnAccess,
    /// A background task every `sweep_interval` (sandboxed managers).
    Sweeper,
}

impl EvictionMode {
    /// Local workspaces cost nothing while idle, so they are collected
    /// lazily; every sandboxed backend holds compute and gets a sweeper.
    pub(crate) fn for_backend(kind: BackendKind) -> Self {
        match kind {
            BackendKind::Local => EvictionMode::OnAccess,
            _ => EvictionMode::Sweeper,
        }
    }
}

/// What closing or evicting a workspace does to its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseAction {
    /// Leave it as it is (local directories).
    Keep,
    /// [`Provisioner::suspend`]: pause, stop, or delete the Pod and keep
    /// the volume — whatever "keep state, free compute" means there.
    Suspend,
}

impl CloseAction {
    /// `Suspend` where the provisioner can, else `Keep`.
    pub(crate) fn for_capabilities(caps: ProvisionerCapabilities) -> Self {
        if caps.suspend {
            CloseAction::Suspend
        } else {
            CloseAction::Keep
        }
    }
}

/// How a manager behaves. [`ManagerOptions::for_provisioner`] gives the
/// defaults for a backend.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Isolation grain.
    pub isolation: IsolationPolicy,
    /// Idle time (no lease, no access) before a workspace is evicted.
    pub ttl: Duration,
    /// Sweeper period; also the longest an on-access collection waits.
    pub sweep_interval: Duration,
    /// Expiry extension asked of providers with their own keep-alive;
    /// renewed every third of it while leased. Zero turns renewal off.
    pub keep_alive: Duration,
    /// When idle workspaces are collected.
    pub eviction: EvictionMode,
    /// What closing does to the sandbox.
    pub close_action: CloseAction,
    /// Pre-warm pool.
    pub prewarm: PrewarmConfig,
    /// Template for every workspace (its `workspace_id` is ignored).
    pub workspace: WorkspaceConfig,
}

impl ManagerOptions {
    /// Reference defaults (per_agent, ttl 3600 s, sweep 300 s, no
    /// pre-warm) with the eviction mode and close action of `provisioner`.
    pub fn for_provisioner(provisioner: &dyn Provisioner) -> Self {
        ManagerOptions {
            isolation: IsolationPolicy::default(),
            ttl: DEFAULT_TTL,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
            keep_alive: DEFAULT_KEEP_ALIVE,
            eviction: EvictionMode::for_backend(provisioner.kind()),
            close_action: CloseAction::for_capabilities(provisioner.capabilities()),
            prewarm: PrewarmConfig::default(),
            workspace: WorkspaceConfig::default(),
        }
    }
}
