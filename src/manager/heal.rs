//! Workspaces that heal (issue 15 point 2): the sandbox the manager hands
//! to every workspace it opens is a [`HealingSandbox`], so a long-lived
//! holder (`mcp serve`, the TUI, the agent loop) keeps working when the
//! sandbox under it dies.
//!
//! When a call fails with a [`Health::Gone`] or [`Health::Stopped`] error
//! (see [`BackendError::health`]), the wrapper asks the manager to recover
//! the workspace, once per id however many callers saw the failure: the
//! recovery runs as the id's flight in the manager's single-flight map
//! (`flight.rs`), so concurrent callers, `close` and `destroy` all wait
//! for the one recovery. It drops the dead sandbox, finds the workspace
//! again on the provider (a stopped or paused sandbox is started or
//! resumed by `attach`) or creates a new one, sets the workspace up again
//! (layout, skills; MCP servers are closed and start again on their next
//! use), and publishes every step on the bus (`lost`, `recovering`, then
//! `replaced` or `restarted`).
//!
//! The failed call is then repeated once when that is safe and the files
//! were kept (the sandbox restarted, reattached, or replaced on a kept
//! bind mount, volume or PVC) — reads,
//! listings, stat, watch, a spawn and an exec that never started (the
//! backends report gone/stopped from exec only when the command could not
//! be started: Docker's exec create, a Pod's exec upgrade, the services'
//! command request; Daytona's log stream 404 after a start is the one
//! exception, and the command then runs again in the new sandbox). Writes,
//! appends, renames, removes, mkdir and streamed writes are not repeated,
//! and no call is repeated on a sandbox whose files were lost (a read or
//! `cat` there would succeed or fail without a word about the loss): such
//! a call fails exactly once with [`BackendError::Recovered`], whose text
//! says what happened ("the sandbox was deleted by the service; a new one
//! was created; files from the old one are lost; this call was not
//! repeated"). Every recovery notice is also a `tracing` warning (stderr
//! of the CLI and `mcp serve`, the log file) besides the bus.
//!
//! Limits: a workspace the manager no longer holds (closed, evicted,
//! destroyed) is not brought back behind its back — its errors pass
//! through; open it again. Unreachable, conflict and auth errors are never
//! recovered here (the HTTP layer retries what can be retried).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::io::AsyncRead;

use super::lease::Entry;
use super::{Flight, FlightOutput, Inner, ManagerError, Request, lock, read, write};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileStat, Health, LineShell, OutputSink, Process, PtyRequest, PtySession, Sandbox,
    SpawnRequest, Watch,
};
use crate::engine::Workspace;
use crate::engine::events::{Event, WorkspaceState};

tokio::task_local! {
    /// Set while a recovery sets the workspace up again: calls made then
    /// report failures as they are instead of asking for a recovery (which
    /// would wait for itself).
    static IN_RECOVERY: ();
}

/// Whether a failed call may run again on the recovered sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    /// Reads, listings, an exec or spawn that never started.
    Safe,
    /// Anything that may have changed the sandbox before it died.
    No,
}

/// How one recovery ended; [`Recovery::notice`] says it in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// The backend (for the words: directory, container, Pod, sandbox).
    pub(crate) kind: BackendKind,
    /// What the failed call revealed (gone or stopped).
    pub(crate) cause: Health,
    /// The provider still had the sandbox and it was started, resumed or
    /// reattached; false: a new one was created.
    pub(crate) reattached: bool,
    /// The workdir held files when the sandbox came back (a restarted
    /// container, a kept volume or PVC, a bind mount).
    pub(crate) files_kept: bool,
}

impl Recovery {
    /// Restarted (the same sandbox, its files kept) rather than replaced.
    pub(crate) fn restarted(&self) -> bool {
        self.reattached && self.files_kept
    }

    /// One line for a human: what happened to the sandbox, what was done,
    /// and whether the files are still there.
    pub(crate) fn notice(&self) -> String {
        use BackendKind as K;
        let thing = match self.kind {
            K::Local | K::Bubblewrap => "the workspace directory",
            K::Docker => "the container",
            K::Kubernetes => "the Pod",
            _ => "the sandbox",
        };
        let by = match self.kind {
            K::Local | K::Bubblewrap => "",
            K::Docker | K::Kubernetes => " outside wsbench",
            _ => " by the service",
        };
        let happened = match (self.cause, self.kind) {
            // Reported stopped, but what was found was no sandbox at all
            // (a container removed while it was being stopped): deleted.
            (Health::Stopped, _) if self.reattached => format!("{thing} was stopped or paused{by}"),
            (_, K::Local | K::Bubblewrap) => format!("{thing} was removed"),
            // The provider still had a Pod, but one that no longer runs
            // (evicted, Failed, Succeeded): it was replaced; with the PVC
            // kept. A deleted Pod is found through its kept PVC instead
            // (reattached) and is said below.
            (_, K::Kubernetes) if !self.reattached && self.files_kept => {
                format!("{thing} stopped running (evicted, failed or completed)")
            }
            (_, K::Kubernetes) => format!("{thing} was deleted{by}"),
            // Reported gone (E2B's proxy 502, a Pod deleted with its PVC
            // kept) but the provider still had it: say only what we saw.
            _ if self.reattached => format!("{thing} stopped answering"),
            _ => format!("{thing} was deleted{by}"),
        };
        let done = if self.kind == K::Kubernetes && self.reattached {
            // A Pod is never restarted in place: a new one mounts the PVC.
            "a new Pod was started on its volume"
        } else if self.restarted() {
            "it was restarted"
        } else if self.reattached {
            "it was made again"
        } else {
            "a new one was created"
        };
        let files = if self.files_kept {
            "files kept"
        } else {
            "files from the old one are lost"
        };
        format!("{happened}; {done}; {files}")
    }
}

/// The sandbox every managed workspace runs on: forwards each call to the
/// live sandbox and recovers it once when a call finds it gone or
/// stopped (see the module doc for which calls are repeated).
pub(crate) struct HealingSandbox {
    id: String,
    kind: BackendKind,
    /// Fixed at open: a recovered sandbox must have the same (checked).
    workdir: String,
    host_root: Option<PathBuf>,
    /// The live sandbox. Read on every call; written once per recovery.
    current: RwLock<Arc<dyn Sandbox>>,
    /// Bumped when a recovery completes; a caller that failed on an older
    /// generation retries instead of recovering again.
    generation: AtomicU64,
    /// The last recovery and the generation it made.
    last: Mutex<Option<(u64, Recovery)>>,
    /// What to provision when the sandbox must be made anew.
    req: Request,
    manager: Weak<Inner>,
    ws: OnceLock<Weak<Workspace>>,
    me: Weak<HealingSandbox>,
}

impl HealingSandbox {
    /// Wraps `sandbox`, provisioned by `manager` for `req`.
    pub(crate) fn wrap(manager: &Arc<Inner>, req: Request, sandbox: Arc<dyn Sandbox>) -> Arc<Self> {
        Self::wrap_weak(Arc::downgrade(manager), req, sandbox)
    }

    /// [`HealingSandbox::wrap`] for a holder of a weak manager (the
    /// pre-warm pool: its sandboxes heal once claimed into the cache;
    /// before that, `Inner::recover` does not know them and errors pass).
    pub(crate) fn wrap_weak(
        manager: Weak<Inner>,
        req: Request,
        sandbox: Arc<dyn Sandbox>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| HealingSandbox {
            id: req.id.clone(),
            kind: sandbox.kind(),
            workdir: sandbox.workdir().to_string(),
            host_root: sandbox.host_root().map(Path::to_path_buf),
            current: RwLock::new(sandbox),
            generation: AtomicU64::new(0),
            last: Mutex::new(None),
            req,
            manager,
            ws: OnceLock::new(),
            me: me.clone(),
        })
    }

    /// Ties the wrapper to the workspace opened on it (set up again after
    /// a recovery). Without it, errors pass through unrecovered.
    pub(crate) fn bind(&self, ws: &Arc<Workspace>) {
        let _ = self.ws.set(Arc::downgrade(ws));
    }

    fn current(&self) -> (u64, Arc<dyn Sandbox>) {
        let sb = read(&self.current).clone();
        (self.generation.load(Ordering::Acquire), sb)
    }

    /// Runs `op` on the live sandbox; on a gone or stopped error, recovers
    /// (once per id) and either repeats `op` once or fails with the notice.
    async fn call<'a, T>(
        &'a self,
        repeat: Repeat,
        op: impl Fn(Arc<dyn Sandbox>) -> BoxFuture<'a, BackendResult<T>> + Send + Sync + 'a,
    ) -> BackendResult<T> {
        let (generation, sb) = self.current();
        let err = match op(sb).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let recovery = match self.recover(generation, &err).await {
            None => return Err(err),
            Some(Ok(r)) => r,
            Some(Err(e)) => return Err(recovery_failed(err, &e)),
        };
        // Repeated only on the files the call was meant for: on an empty
        // replacement a read or `cat` would "work" and say nothing of the
        // loss (issue 15 trial), so the call that found it reports it.
        match (repeat, recovery.files_kept) {
            (Repeat::Safe, true) => op(self.current().1).await,
            _ => Err(BackendError::Recovered {
                notice: recovery.notice(),
                cause: Box::new(err),
            }),
        }
    }

    /// `None` when `err` is not for recovery (or nobody can recover: the
    /// manager is gone, the workspace is no longer its own).
    async fn recover(
        &self,
        generation: u64,
        err: &BackendError,
    ) -> Option<Result<Recovery, ManagerError>> {
        if !err.is_recoverable() || IN_RECOVERY.try_with(|_| ()).is_ok() {
            return None;
        }
        let inner = self.manager.upgrade()?;
        let ws = self.ws.get()?.upgrade()?;
        let me = self.me.upgrade()?;
        inner.recover(me, ws, generation, err).await
    }

    /// The recovery that moved the wrapper past `generation`, if any.
    fn recovered_since(&self, generation: u64) -> Option<Recovery> {
        lock(&self.last)
            .filter(|(g, _)| *g > generation)
            .map(|(_, r)| r)
    }
}

/// The error of a call whose sandbox could not be brought back: the same
/// health (the next call tries again), with both causes.
fn recovery_failed(err: BackendError, e: &ManagerError) -> BackendError {
    let health = err.health();
    BackendError::Unavailable {
        health,
        detail: format!("{err}; bringing it back failed: {e}"),
    }
}

impl Inner {
    /// Joins or starts the recovery of `heal`'s workspace; see the module
    /// doc. `None` when the workspace is not this manager's open one.
    async fn recover(
        self: &Arc<Self>,
        heal: Arc<HealingSandbox>,
        ws: Arc<Workspace>,
        generation: u64,
        err: &BackendError,
    ) -> Option<Result<Recovery, ManagerError>> {
        let id = heal.id.clone();
        let entry = self.cached(&id).filter(|e| Arc::ptr_eq(&e.ws, &ws))?;
        let flight = {
            let mut flights = lock(&self.flights);
            // Checked under the flights lock: a recovery bumps the
            // generation before it leaves the map.
            if heal.generation.load(Ordering::Acquire) != generation {
                None
            } else {
                let f = flights.entry(id.clone()).or_insert_with(|| {
                    self.start_recovery(heal.clone(), entry, err.health(), err.to_string())
                });
                Some(f.clone())
            }
        };
        if let Some(f) = flight
            && let Err(e) = f.await
        {
            return Some(Err(e));
        }
        heal.recovered_since(generation).map(Ok)
    }

    /// Spawns the recovery as the id's flight, so it completes even if
    /// every caller gives up waiting.
    fn start_recovery(
        self: &Arc<Self>,
        heal: Arc<HealingSandbox>,
        entry: Arc<Entry>,
        cause: Health,
        reason: String,
    ) -> Flight {
        let inner = self.clone();
        let id = heal.id.clone();
        Self::spawn_flight(
            id.clone(),
            IN_RECOVERY.scope((), async move {
                let result = inner.run_recovery(heal, entry, cause, reason).await;
                inner.finish_flight(&id, result)
            }),
        )
    }

    async fn run_recovery(
        &self,
        heal: Arc<HealingSandbox>,
        entry: Arc<Entry>,
        cause: Health,
        reason: String,
    ) -> FlightOutput {
        let id = heal.id.clone();
        let state = |state| self.bus.publish(&id, Event::Workspace { state });
        state(WorkspaceState::Lost {
            health: cause,
            reason,
        });
        state(WorkspaceState::Recovering);
        let failed = |reason: String| state(WorkspaceState::Failed { reason });
        let (sandbox, _, _, reattached) = match self.attach_or_create(&heal.req).await {
            Ok(x) => x,
            Err(e) => {
                failed(format!("recovering the sandbox: {e}"));
                return Err(ManagerError::Provision {
                    id,
                    backend: self.kind,
                    source: Arc::new(e),
                });
            }
        };
        if sandbox.workdir() != heal.workdir || sandbox.host_root() != heal.host_root.as_deref() {
            let e = BackendError::gone(format!(
                "the recovered sandbox has another workdir ({}, was {}); open the workspace again",
                sandbox.workdir(),
                heal.workdir
            ));
            failed(e.to_string());
            return Err(ManagerError::Provision {
                id,
                backend: self.kind,
                source: Arc::new(e),
            });
        }
        let files_kept = matches!(sandbox.list(&heal.workdir).await, Ok(l) if !l.is_empty());
        // The dead sandbox is dropped here (its last user lets go).
        *write(&heal.current) = sandbox;
        if let Err(e) = entry.ws.reinitialize().await {
            // Published as `failed` by the workspace.
            return Err(ManagerError::Open {
                id,
                source: Arc::new(e),
            });
        }
        let recovery = Recovery {
            kind: self.kind,
            cause,
            reattached,
            files_kept,
        };
        let generation = heal.generation.load(Ordering::Acquire) + 1;
        *lock(&heal.last) = Some((generation, recovery));
        heal.generation.store(generation, Ordering::Release);
        let notice = recovery.notice();
        tracing::warn!(workspace_id = %id, profile = %self.profile, "workspace {id}: {notice}");
        self.log_warn(&id, notice.clone());
        state(if recovery.restarted() {
            WorkspaceState::Restarted { notice }
        } else {
            WorkspaceState::Replaced { notice }
        });
        Ok(entry)
    }
}

#[async_trait]
impl Sandbox for HealingSandbox {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn capabilities(&self) -> Capabilities {
        self.current().1.capabilities()
    }

    fn workdir(&self) -> &str {
        &self.workdir
    }

    fn host_root(&self) -> Option<&Path> {
        self.host_root.as_deref()
    }

    fn host_path(&self, path: &str) -> Option<PathBuf> {
        self.current().1.host_path(path)
    }

    fn lock_identity(&self) -> Option<String> {
        self.current().1.lock_identity()
    }

    fn recoveries(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn last_recovery(&self) -> Option<String> {
        lock(&self.last).map(|(_, r)| r.notice())
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.call(Repeat::Safe, |sb| {
            let (req, sink) = (req.clone(), sink.clone());
            async move { sb.exec(req, sink).await }.boxed()
        })
        .await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.call(Repeat::Safe, |sb| {
            let req = req.clone();
            async move { sb.spawn(req).await }.boxed()
        })
        .await
    }

    /// Repeated once after a recovery: a terminal that failed as gone or
    /// stopped never started, so starting it again runs nothing twice.
    async fn pty(&self, req: PtyRequest) -> BackendResult<PtySession> {
        self.call(Repeat::Safe, |sb| {
            let req = req.clone();
            async move { sb.pty(req).await }.boxed()
        })
        .await
    }

    /// Repeated once after a recovery, as [`Self::pty`]: a session that
    /// failed to open runs nothing.
    async fn line_shell(&self, cwd: Option<String>) -> BackendResult<Box<dyn LineShell>> {
        self.call(Repeat::Safe, |sb| {
            let cwd = cwd.clone();
            async move { sb.line_shell(cwd).await }.boxed()
        })
        .await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        self.call(Repeat::Safe, |sb| {
            async move { sb.read(path, range).await }.boxed()
        })
        .await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        self.call(Repeat::No, |sb| {
            async move { sb.write(path, data).await }.boxed()
        })
        .await
    }

    /// Not repeatable: the reader is consumed by the first try.
    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let (generation, sb) = self.current();
        let err = match sb.write_stream(path, reader).await {
            Ok(n) => return Ok(n),
            Err(e) => e,
        };
        match self.recover(generation, &err).await {
            None => Err(err),
            Some(Ok(r)) => Err(BackendError::Recovered {
                notice: r.notice(),
                cause: Box::new(err),
            }),
            Some(Err(e)) => Err(recovery_failed(err, &e)),
        }
    }

    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        self.call(Repeat::No, |sb| {
            async move { sb.append(path, data).await }.boxed()
        })
        .await
    }

    async fn append_checked(
        &self,
        path: &str,
        earlier: &[crate::backend::append_check::TrackedRecord],
        data: &[u8],
    ) -> BackendResult<Option<crate::backend::append_check::CheckedAppend>> {
        self.call(Repeat::No, |sb| {
            async move { sb.append_checked(path, earlier, data).await }.boxed()
        })
        .await
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        self.call(Repeat::No, |sb| {
            async move { sb.create_new(path, data).await }.boxed()
        })
        .await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.call(Repeat::Safe, |sb| {
            async move { sb.list(path).await }.boxed()
        })
        .await
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        self.call(Repeat::Safe, |sb| {
            async move { sb.stat(path).await }.boxed()
        })
        .await
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        self.call(Repeat::No, |sb| {
            async move { sb.remove(path, recursive).await }.boxed()
        })
        .await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        self.call(Repeat::No, |sb| {
            async move { sb.rename(from, to).await }.boxed()
        })
        .await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        self.call(Repeat::No, |sb| {
            async move { sb.mkdir(path, parents).await }.boxed()
        })
        .await
    }

    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        self.call(Repeat::Safe, |sb| {
            async move { sb.watch(path).await }.boxed()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: BackendKind, cause: Health, reattached: bool, files_kept: bool) -> String {
        Recovery {
            kind,
            cause,
            reattached,
            files_kept,
        }
        .notice()
    }

    #[test]
    fn notices_say_what_happened_and_whether_files_were_kept() {
        use BackendKind as K;
        use Health::{Gone, Stopped};
        let table = [
            (
                K::E2b,
                Gone,
                false,
                false,
                "the sandbox was deleted by the service; a new one was created; files from the old one are lost",
            ),
            (
                K::Daytona,
                Stopped,
                true,
                true,
                "the sandbox was stopped or paused by the service; it was restarted; files kept",
            ),
            (
                K::Docker,
                Stopped,
                true,
                true,
                "the container was stopped or paused outside wsbench; it was restarted; files kept",
            ),
            // A bind mount outlives its container.
            (
                K::Docker,
                Gone,
                false,
                true,
                "the container was deleted outside wsbench; a new one was created; files kept",
            ),
            // Seen stopped (exec 409 while `docker rm -f` ran), then found
            // removed: a new one, and the notice says deleted.
            (
                K::Docker,
                Stopped,
                false,
                false,
                "the container was deleted outside wsbench; a new one was created; files from the old one are lost",
            ),
            // A Pod deleted with its PVC kept comes back with the files.
            (
                K::Kubernetes,
                Gone,
                true,
                true,
                "the Pod was deleted outside wsbench; a new Pod was started on its volume; files kept",
            ),
            // An evicted (Failed, Succeeded) Pod is replaced on its PVC.
            (
                K::Kubernetes,
                Gone,
                false,
                true,
                "the Pod stopped running (evicted, failed or completed); a new one was created; files kept",
            ),
            // Pod and PVC gone.
            (
                K::Kubernetes,
                Gone,
                false,
                false,
                "the Pod was deleted outside wsbench; a new one was created; files from the old one are lost",
            ),
            (
                K::Local,
                Gone,
                true,
                false,
                "the workspace directory was removed; it was made again; files from the old one are lost",
            ),
        ];
        for (kind, cause, reattached, files_kept, want) in table {
            assert_eq!(rec(kind, cause, reattached, files_kept), want);
        }
    }
}
