//! The workspace manager (issue 4): single-flight provisioning, cache hits
//! that never wait on a provisioning, failures retried, leases against
//! TTL eviction, close_all, reattach after a restart, the reference's id
//! vectors, profiles and the `workspaces` CLI.
//!
//! Blocking is made with a test provisioner that waits on a signal, never
//! with wall-clock thresholds.

use crate::support::{self, cli};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::Value;
use tokio::sync::Notify;
use wsbench::backend::local::LocalProvisioner;
use wsbench::backend::{
    BackendError, BackendKind, BackendResult, ProvisionSpec, Provisioner, ProvisionerCapabilities,
    Sandbox, SandboxInfo,
};
use wsbench::config::{Config, Paths};
use wsbench::engine::EventBus;
use wsbench::engine::events::{Event, Received, Subscriber, WorkspaceState};
use wsbench::manager::isolation::{
    IsolationPolicy, assign_workspace_id, per_agent_id, per_user_id,
};
use wsbench::manager::{
    CloseAction, EvictionMode, ManagerError, ManagerOptions, PrewarmConfig, WorkspaceManager,
};
use wsbench::root::open_profile;

/// A gate on one id: `started` fires when its provisioning reaches the
/// provider, which then waits for `release`.
#[derive(Clone, Default)]
struct Gate {
    started: Arc<Notify>,
    release: Arc<Notify>,
}

/// Local directories underneath, with counters, gates, injected failures
/// and a record of which sandboxes are "running" (created or attached and
/// not yet suspended or destroyed).
struct TestProvisioner {
    inner: LocalProvisioner,
    caps: ProvisionerCapabilities,
    creates: AtomicUsize,
    attaches: AtomicUsize,
    suspends: AtomicUsize,
    destroys: AtomicUsize,
    keep_alives: AtomicUsize,
    keep_alive_seen: Notify,
    fail_creates: AtomicUsize,
    gates: Mutex<HashMap<String, Gate>>,
    running: Mutex<HashSet<String>>,
}

impl TestProvisioner {
    fn new(base: &Path) -> Arc<Self> {
        Arc::new(TestProvisioner {
            inner: LocalProvisioner::new(base),
            caps: ProvisionerCapabilities {
                suspend: true,
                keep_alive: true,
                persistent: true,
            },
            creates: AtomicUsize::new(0),
            attaches: AtomicUsize::new(0),
            suspends: AtomicUsize::new(0),
            destroys: AtomicUsize::new(0),
            keep_alives: AtomicUsize::new(0),
            keep_alive_seen: Notify::new(),
            fail_creates: AtomicUsize::new(0),
            gates: Mutex::new(HashMap::new()),
            running: Mutex::new(HashSet::new()),
        })
    }

    fn gate(&self, id: &str) -> Gate {
        let g = Gate::default();
        self.gates.lock().unwrap().insert(id.to_string(), g.clone());
        g
    }

    async fn pass_gate(&self, id: &str) {
        let gate = self.gates.lock().unwrap().remove(id);
        if let Some(g) = gate {
            g.started.notify_one();
            g.release.notified().await;
        }
    }

    fn running(&self) -> HashSet<String> {
        self.running.lock().unwrap().clone()
    }
}

#[async_trait]
impl Provisioner for TestProvisioner {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    fn instance_key(&self) -> Option<String> {
        self.inner.instance_key()
    }

    fn capabilities(&self) -> ProvisionerCapabilities {
        self.caps
    }

    async fn create(&self, spec: &ProvisionSpec) -> BackendResult<Arc<dyn Sandbox>> {
        self.pass_gate(&spec.workspace_id).await;
        let fail = self
            .fail_creates
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            return Err(BackendError::unreachable("injected failure"));
        }
        self.creates.fetch_add(1, Ordering::AcqRel);
        let sb = self.inner.create(spec).await?;
        self.running
            .lock()
            .unwrap()
            .insert(spec.workspace_id.clone());
        Ok(sb)
    }

    async fn find(&self, workspace_id: &str) -> BackendResult<Option<SandboxInfo>> {
        self.inner.find(workspace_id).await
    }

    async fn attach(&self, info: &SandboxInfo) -> BackendResult<Arc<dyn Sandbox>> {
        self.pass_gate(&info.workspace_id).await;
        self.attaches.fetch_add(1, Ordering::AcqRel);
        let sb = self.inner.attach(info).await?;
        self.running
            .lock()
            .unwrap()
            .insert(info.workspace_id.clone());
        Ok(sb)
    }

    async fn suspend(&self, workspace_id: &str) -> BackendResult<()> {
        self.suspends.fetch_add(1, Ordering::AcqRel);
        self.running.lock().unwrap().remove(workspace_id);
        Ok(())
    }

    async fn resume(&self, _workspace_id: &str) -> BackendResult<()> {
        Ok(())
    }

    async fn destroy(&self, workspace_id: &str) -> BackendResult<()> {
        self.destroys.fetch_add(1, Ordering::AcqRel);
        self.running.lock().unwrap().remove(workspace_id);
        self.inner.destroy(workspace_id).await
    }

    async fn list(&self) -> BackendResult<Vec<SandboxInfo>> {
        self.inner.list().await
    }

    async fn keep_alive(&self, _workspace_id: &str, _ttl: Duration) -> BackendResult<()> {
        self.keep_alives.fetch_add(1, Ordering::AcqRel);
        self.keep_alive_seen.notify_one();
        Ok(())
    }
}

/// Options for a sandboxed-style manager whose sweeper never fires on its
/// own (tests sweep by hand).
fn opts(prov: &dyn Provisioner, f: impl FnOnce(&mut ManagerOptions)) -> ManagerOptions {
    let mut o = ManagerOptions::for_provisioner(prov);
    o.eviction = EvictionMode::Sweeper;
    o.close_action = CloseAction::Suspend;
    o.sweep_interval = Duration::from_secs(24 * 3600);
    f(&mut o);
    o
}

fn manager(prov: &Arc<TestProvisioner>, f: impl FnOnce(&mut ManagerOptions)) -> WorkspaceManager {
    let o = opts(prov.as_ref(), f);
    WorkspaceManager::new("test", prov.clone(), o, EventBus::default())
}

/// Workspace states published so far (non-blocking drain).
fn states(sub: &mut Subscriber) -> Vec<(String, WorkspaceState)> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let Received::Event(e) = r
            && let Event::Workspace { state } = e.event
        {
            out.push((e.workspace, state));
        }
    }
    out
}

fn count(states: &[(String, WorkspaceState)], id: &str, s: &WorkspaceState) -> usize {
    states.iter().filter(|(w, x)| w == id && x == s).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_callers_share_one_provisioning() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |_| {});
    let id = per_agent_id("alice", "coder");
    // Hold the provisioning until every caller has been started, so they
    // all race on a cold id.
    let gate = prov.gate(&id);
    let barrier = Arc::new(tokio::sync::Barrier::new(1000));
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let m = m.clone();
        let b = barrier.clone();
        tasks.push(tokio::spawn(async move {
            b.wait().await;
            m.get_workspace("alice", "coder", "s", None).await
        }));
    }
    gate.started.notified().await;
    gate.release.notify_one();
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap().unwrap());
    }
    assert_eq!(prov.creates.load(Ordering::Acquire), 1);
    assert_eq!(prov.attaches.load(Ordering::Acquire), 0);
    assert!(got.iter().all(|w| Arc::ptr_eq(w, &got[0])));
    assert_eq!(got[0].id(), id);
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_blocked_provisioning_does_not_delay_other_ids() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |_| {});
    let b = m.get_workspace("u", "b", "s", None).await.unwrap();

    let a_id = per_agent_id("u", "a");
    let gate = prov.gate(&a_id);
    let ma = m.clone();
    let a = tokio::spawn(async move { ma.get_workspace("u", "a", "s", None).await });
    gate.started.notified().await;

    // A is stuck inside the provider. A cache hit for B completes in a
    // single poll: it awaits nothing and takes no lock A's provisioning
    // holds.
    let hit = m
        .get_workspace("u", "b", "s", None)
        .now_or_never()
        .expect("a cache hit must not wait")
        .unwrap();
    assert!(Arc::ptr_eq(&hit, &b));
    let leased = m
        .acquire("u", "b", "s", None)
        .now_or_never()
        .expect("leasing a cached workspace must not wait")
        .unwrap();
    drop(leased);
    // A miss for another id provisions while A is still blocked.
    let c = m.get_workspace("u", "c", "s", None).await.unwrap();
    assert_eq!(c.id(), per_agent_id("u", "c"));
    assert!(!a.is_finished());
    let listed = m.list().await.unwrap();
    let a_row = listed.iter().find(|w| w.id == a_id).unwrap();
    assert_eq!(a_row.state, "provisioning");

    gate.release.notify_one();
    assert_eq!(a.await.unwrap().unwrap().id(), a_id);
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failure_reaches_every_waiter_and_the_next_call_retries() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |_| {});
    let mut sub = m.events().subscribe();
    let id = per_agent_id("u", "a");
    let gate = prov.gate(&id);
    prov.fail_creates.store(1, Ordering::Release);
    // On this single-threaded runtime all ten callers join the flight
    // before the provider (gated) can answer.
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let m = m.clone();
        waiters.push(tokio::spawn(async move {
            m.get_workspace("u", "a", "s", None).await
        }));
    }
    gate.started.notified().await;
    gate.release.notify_one();
    for w in waiters {
        let err = w.await.unwrap().unwrap_err();
        assert!(matches!(err, ManagerError::Provision { .. }), "{err}");
        assert!(err.to_string().contains("injected failure"), "{err}");
    }
    assert_eq!(prov.creates.load(Ordering::Acquire), 0);
    assert!(m.open_ids().is_empty(), "a failure must not be cached");
    let seen = states(&mut sub);
    assert!(
        seen.iter().any(|(w, s)| w == &id
            && matches!(s, WorkspaceState::Failed { reason } if reason.contains("injected"))),
        "{seen:?}"
    );

    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    assert_eq!(ws.id(), id);
    assert_eq!(prov.creates.load(Ordering::Acquire), 1);
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_leased_workspace_survives_a_sweep_with_ttl_zero() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |o| o.ttl = Duration::ZERO);
    let mut sub = m.events().subscribe();
    let busy = m.acquire("u", "busy", "s", None).await.unwrap();
    let idle = m.get_workspace("u", "idle", "s", None).await.unwrap();
    let idle_id = idle.id().to_string();
    let file = format!("{}/note.txt", idle.layout().workdir());
    idle.sandbox().write(&file, b"kept").await.unwrap();

    let evicted = m.sweep().await;
    assert_eq!(evicted, vec![idle_id.clone()]);
    assert_eq!(m.open_ids(), vec![busy.id().to_string()]);
    assert!(busy.is_alive());
    assert!(!idle.is_alive());
    assert_eq!(prov.suspends.load(Ordering::Acquire), 1);
    let seen = states(&mut sub);
    assert_eq!(count(&seen, &idle_id, &WorkspaceState::Evicted), 1);
    assert_eq!(count(&seen, busy.id(), &WorkspaceState::Evicted), 0);
    assert_eq!(count(&seen, busy.id(), &WorkspaceState::Leased), 1);

    // The next access reattaches transparently, with its files.
    let back = m.get_workspace("u", "idle", "s", None).await.unwrap();
    assert_eq!(back.id(), idle_id);
    assert_eq!(back.sandbox().read(&file, None).await.unwrap(), b"kept");
    assert_eq!(prov.attaches.load(Ordering::Acquire), 1);
    assert_eq!(
        count(&states(&mut sub), &idle_id, &WorkspaceState::Reattached),
        1
    );

    // Released, the busy one goes idle and is evicted like any other.
    let busy_id = busy.id().to_string();
    drop(busy);
    assert_eq!(count(&states(&mut sub), &busy_id, &WorkspaceState::Idle), 1);
    let mut evicted = m.sweep().await;
    evicted.sort();
    let mut want = vec![busy_id, idle_id];
    want.sort();
    assert_eq!(evicted, want);
    assert!(m.open_ids().is_empty());
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn eviction_on_access_keeps_a_lease_alive() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |o| {
        o.ttl = Duration::ZERO;
        o.eviction = EvictionMode::OnAccess;
    });
    let lease = m.acquire("u", "a", "s", None).await.unwrap();
    let b = m.get_workspace("u", "b", "s", None).await.unwrap();
    let _c = m.get_workspace("u", "c", "s", None).await.unwrap();
    assert!(m.open_ids().contains(&lease.id().to_string()));
    assert!(!m.open_ids().contains(&b.id().to_string()));
    assert!(lease.is_alive());
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn close_all_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |_| {});
    let mut open = Vec::new();
    for agent in ["a", "b", "c"] {
        open.push(m.get_workspace("u", agent, "s", None).await.unwrap());
    }
    let lease = m.acquire("u", "leased", "s", None).await.unwrap();
    open.push(lease.workspace().clone());
    // One provisioning still in flight when close_all starts.
    let late_id = per_agent_id("u", "late");
    let gate = prov.gate(&late_id);
    let ml = m.clone();
    let late = tokio::spawn(async move { ml.get_workspace("u", "late", "s", None).await });
    gate.started.notified().await;
    let mc = m.clone();
    let closing = tokio::spawn(async move { mc.close_all().await });
    tokio::task::yield_now().await;
    gate.release.notify_one();
    closing.await.unwrap().unwrap();
    open.push(late.await.unwrap().unwrap());

    assert!(m.open_ids().is_empty());
    assert!(open.iter().all(|w| !w.is_alive()));
    assert!(
        prov.running().is_empty(),
        "still running: {:?}",
        prov.running()
    );
    assert_eq!(prov.suspends.load(Ordering::Acquire), 5);
    drop(lease);
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn destroy_waits_for_a_provisioning_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |_| {});
    let id = per_agent_id("u", "a");
    let gate = prov.gate(&id);
    let mg = m.clone();
    let getting = tokio::spawn(async move { mg.get_workspace("u", "a", "s", None).await });
    gate.started.notified().await;
    let md = m.clone();
    let target = id.clone();
    let destroying = tokio::spawn(async move { md.destroy(&target).await });
    tokio::task::yield_now().await;
    assert!(
        !destroying.is_finished(),
        "destroy waits for the provisioning"
    );
    gate.release.notify_one();
    let ws = getting.await.unwrap().unwrap();
    assert!(destroying.await.unwrap().unwrap());
    // The provisioning landed first and was then destroyed: nothing stays
    // open or listed, and the handle is closed.
    assert!(m.open_ids().is_empty());
    assert!(m.list().await.unwrap().is_empty());
    assert!(!ws.is_alive());
    m.shutdown().await.unwrap();
}

#[tokio::test]
async fn reattach_after_dropping_the_manager() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(dir.path());
    let text = format!(
        "[profiles.p]\nbackend = \"local\"\n[profiles.p.options]\nbase_dir = \"{}\"\n",
        dir.path().join("base").display()
    );
    let config = Config::parse(&text, Path::new("c.toml")).unwrap();

    let m1 = open_profile(&config, "p", &paths, EventBus::default()).unwrap();
    let ws = m1.get_workspace("alice", "coder", "s", None).await.unwrap();
    let root = ws.sandbox().host_root().unwrap().to_path_buf();
    assert_eq!(root, dir.path().join("base/alice/coder"));
    let file = format!("{}/work.txt", ws.layout().workdir());
    ws.sandbox().write(&file, b"from run 1").await.unwrap();
    let id = ws.id().to_string();
    drop(ws);
    drop(m1);

    let m2 = open_profile(&config, "p", &paths, EventBus::default()).unwrap();
    let mut sub = m2.events().subscribe();
    let listed = m2.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    let w = &listed[0];
    assert_eq!(w.id, id);
    assert_eq!(w.user.as_deref(), Some("alice"));
    assert_eq!(w.agent.as_deref(), Some("coder"));
    assert_eq!(w.profile, "p");
    assert!(!w.open);
    assert_eq!(w.state, "running");
    assert!(w.age_secs.is_some() && w.idle_secs.is_some());

    let again = m2.get_workspace("alice", "coder", "s", None).await.unwrap();
    assert_eq!(again.id(), id);
    assert_eq!(again.sandbox().host_root().unwrap(), root);
    assert_eq!(
        again.sandbox().read(&file, None).await.unwrap(),
        b"from run 1"
    );
    let seen = states(&mut sub);
    assert_eq!(
        count(&seen, &id, &WorkspaceState::Reattached),
        1,
        "{seen:?}"
    );
    assert_eq!(count(&seen, &id, &WorkspaceState::Ready), 1, "{seen:?}");
    let listed = m2.list().await.unwrap();
    assert!(listed[0].open);
    assert_eq!(listed[0].state, "ready");
    assert!(listed[0].ttl_left_secs.is_some());

    // Destroy removes the directory, the record and the listing.
    assert!(m2.destroy(&id).await.unwrap());
    assert!(!root.exists());
    assert!(m2.list().await.unwrap().is_empty());
    assert_eq!(count(&states(&mut sub), &id, &WorkspaceState::Destroyed), 1);
    assert!(!m2.destroy(&id).await.unwrap());
    m2.shutdown().await.unwrap();
}

#[test]
fn reference_id_vectors() {
    let path = support::fixtures().join("workspace-ids.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 12);
    for c in cases {
        let policy: IsolationPolicy = c["policy"].as_str().unwrap().parse().unwrap();
        let user = c["user_id"].as_str().unwrap();
        let agent = c["agent_id"].as_str().unwrap();
        let want = c["workspace_id"].as_str().unwrap();
        assert_eq!(
            assign_workspace_id(policy, user, agent, "any-session"),
            want,
            "{c}"
        );
    }
}

#[tokio::test]
async fn keep_alive_is_renewed_while_leased() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |o| o.keep_alive = Duration::from_millis(30));
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    assert_eq!(
        prov.keep_alives.load(Ordering::Acquire),
        0,
        "not while unleased"
    );
    let lease = m.lease(ws.id()).unwrap();
    while prov.keep_alives.load(Ordering::Acquire) < 3 {
        prov.keep_alive_seen.notified().await;
    }
    drop(lease);
    // The renewal task stops at its next tick (every 10 ms). Wait for a
    // quiet stretch of ten periods; renewals that never stop fail after
    // a hundred tries, however slow the machine.
    let mut stopped = false;
    for _ in 0..100 {
        let before = prov.keep_alives.load(Ordering::Acquire);
        tokio::time::sleep(Duration::from_millis(100)).await;
        if prov.keep_alives.load(Ordering::Acquire) == before {
            stopped = true;
            break;
        }
    }
    assert!(
        stopped,
        "keep-alive renewals went on after the lease was dropped"
    );
    m.shutdown().await.unwrap();
}

/// Each state change of a workspace is published once, in order, and
/// every workspace event carries the id of the workspace it is about: the
/// manager (and its pre-warm pool) announce `Provisioning` before making
/// the sandbox, so `Workspace::open` must not announce it a second time;
/// on its own, `Workspace::open` announces it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_state_change_is_published_once_with_its_workspace_id() {
    use WorkspaceState::*;
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |o| {
        o.prewarm = PrewarmConfig {
            size: 1,
            max_creating: 1,
        };
    });
    let mut sub = m.events().subscribe();
    let ws = m.get_workspace("alice", "coder", "s1", None).await.unwrap();
    let id = ws.id().to_string();
    drop(ws);
    let other = m.get_workspace("bob", "coder", "s1", None).await.unwrap();
    let other = other.id().to_string();
    m.close(&id).await.unwrap();
    m.get_workspace("alice", "coder", "s1", None).await.unwrap();
    m.destroy(&id).await.unwrap();
    m.warm_up();
    while m.prewarmed() < 1 {
        tokio::task::yield_now().await;
    }
    let seen = states(&mut sub);
    let of = |w: &str| -> Vec<WorkspaceState> {
        seen.iter()
            .filter(|(x, _)| x == w)
            .map(|(_, s)| s.clone())
            .collect()
    };
    assert_eq!(
        of(&id),
        [
            Provisioning,
            Created { files_kept: false },
            Ready,
            Closed,
            Provisioning,
            Reattached,
            Ready,
            Closed,
            Destroyed
        ],
        "{seen:?}"
    );
    assert_eq!(
        of(&other),
        [Provisioning, Created { files_kept: false }, Ready],
        "{seen:?}"
    );
    let warm: Vec<&String> = seen
        .iter()
        .map(|(w, _)| w)
        .filter(|w| **w != id && **w != other)
        .collect();
    assert!(!warm.is_empty(), "{seen:?}");
    for w in warm {
        assert!(
            !w.is_empty(),
            "a state event without a workspace id: {seen:?}"
        );
        assert_eq!(of(w), [Provisioning, Ready], "pre-warmed {w}: {seen:?}");
    }
    m.shutdown().await.unwrap();

    // Workspace::open alone.
    let bus = EventBus::default();
    let mut sub = bus.subscribe();
    let sb = wsbench::backend::local::LocalSandbox::open(dir.path().join("alone")).unwrap();
    let ws = wsbench::engine::Workspace::open(
        Arc::new(sb),
        wsbench::engine::WorkspaceConfig::default(),
        bus,
    )
    .await
    .unwrap();
    ws.close().await;
    let seen = states(&mut sub);
    assert!(seen.iter().all(|(w, _)| w == ws.id()), "{seen:?}");
    let seen: Vec<WorkspaceState> = seen.into_iter().map(|(_, s)| s).collect();
    assert_eq!(seen, [Provisioning, Ready, Closed]);
}

#[tokio::test]
async fn prewarm_pool_hands_out_once_and_disposes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let prov = TestProvisioner::new(dir.path());
    let m = manager(&prov, |o| {
        o.isolation = IsolationPolicy::PerSession;
        o.prewarm = PrewarmConfig {
            size: 2,
            max_creating: 2,
        };
    });
    let mut sub = m.events().subscribe();
    assert_eq!(m.prewarmed(), 0);
    m.warm_up();
    let mut ready = HashSet::new();
    while ready.len() < 2 {
        if let Some(Received::Event(e)) = sub.recv().await
            && matches!(
                e.event,
                Event::Workspace {
                    state: WorkspaceState::Ready
                }
            )
        {
            ready.insert(e.workspace.clone());
        }
    }
    while m.prewarmed() < 2 {
        tokio::task::yield_now().await;
    }
    let ws = m.get_workspace("u", "a", "s1", None).await.unwrap();
    assert!(ready.contains(ws.id()), "a pre-warmed workspace is claimed");
    let same = m.get_workspace("u", "a", "s1", None).await.unwrap();
    assert!(Arc::ptr_eq(&ws, &same));
    m.shutdown().await.unwrap();
    // Everything unclaimed (including the refill) is destroyed; the
    // claimed one is only closed.
    let left: Vec<String> = prov
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.workspace_id)
        .collect();
    assert_eq!(left, vec![ws.id().to_string()]);
    assert!(prov.running().is_empty(), "{:?}", prov.running());
    assert!(prov.destroys.load(Ordering::Acquire) >= 2);
}

// ---------------------------------------------------------------------------
// Profiles and the example config.

fn paths(dir: &Path) -> Paths {
    Paths {
        config_file: dir.join("config/wsbench/config.toml"),
        data_dir: dir.join("data/wsbench"),
        default_workdir: dir.join("data/wsbench/workspaces/default"),
    }
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/config.example.toml")
}

#[tokio::test]
async fn the_example_config_parses_and_its_profiles_open() {
    let config = Config::load(&example()).unwrap();
    assert_eq!(config.default_profile_name(), "dev");
    let names = config.profile_names();
    assert_eq!(names.first().map(String::as_str), Some("local"));
    assert!(
        names.ends_with(&["dev".to_string(), "scratch".to_string()]),
        "{names:?}"
    );
    let dev = config.profile("dev").unwrap();
    assert_eq!(dev.ttl, Duration::from_secs(3600));
    let home = std::env::var("HOME").expect("HOME is set for the tests");
    assert_eq!(
        dev.options["base_dir"].as_str().unwrap(),
        format!("{home}/wsbench/dev")
    );
    let scratch = config.profile("scratch").unwrap();
    assert_eq!(scratch.isolation, IsolationPolicy::PerSession);
    assert_eq!(scratch.prewarm.size, 2);
    assert_eq!(scratch.sweep_interval, Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        let bus = EventBus::default();
        let mut sub = bus.subscribe();
        let m = open_profile(&config, &name, &paths(dir.path()), bus)
            .unwrap_or_else(|e| panic!("profile {name}: {e}"));
        // Opening builds nothing, pool or not (`scratch` has one): on this
        // single-threaded runtime a started pool would have published its
        // first provisioning by now.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(states(&mut sub).is_empty(), "profile {name}");
        m.shutdown().await.unwrap();
    }
}

#[test]
fn profile_errors_name_file_line_and_key() {
    let p = Path::new("/cfg/wsbench.toml");
    let cases: [(&str, usize, &str); 6] = [
        (
            "[profiles.a]\nbackend = \"local\"\nttl = \"soon\"\n",
            3,
            "bad duration",
        ),
        ("[profiles.a]\nbackend = \"dokcer\"\n", 2, "dokcer"),
        (
            "[profiles.a]\nbackend = \"local\"\nisolation = \"per_team\"\n",
            3,
            "per_team",
        ),
        (
            "[profiles.a]\nbackend = \"local\"\nttl_secs = 3\n",
            3,
            "ttl_secs",
        ),
        (
            "[profiles.a]\nbackend = \"local\"\n\n[profiles.a.prewarm]\nmax_creating = 0\n",
            5,
            "max_creating",
        ),
        ("default_profile = \"nope\"\n", 1, "nope"),
    ];
    for (text, line, needle) in cases {
        let err = Config::parse(text, p).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("/cfg/wsbench.toml:{line}:")),
            "{text:?} → {err}"
        );
        assert!(err.contains(needle), "{text:?} → {err}");
    }
    // ttl = -5: a negative duration is a bad value too.
    let err = Config::parse("[profiles.a]\nbackend = \"local\"\nttl = -5\n", p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("negative"), "{err}");
}

#[test]
fn env_secrets_are_expanded_on_open_and_never_printed() {
    // HOME stands in for a secret: every test machine sets it, and no
    // test changes the environment.
    let var = "HOME";
    let secret = std::env::var(var).expect("HOME is set");
    let text = format!(
        "[profiles.c]\nbackend = \"local\"\n[profiles.c.options]\napi_key = \"${{{var}}}\"\nliteral = \"$${{x}}\"\ntoken = \"plain-secret\"\nmissing = \"${{WSBENCH_TEST_UNSET_9C1E}}\"\n"
    );
    let config = Config::parse(&text, Path::new("c.toml")).unwrap();
    let err = config.profile("c").unwrap_err().to_string();
    assert!(err.starts_with("c.toml:7:"), "{err}");
    assert!(err.contains("WSBENCH_TEST_UNSET_9C1E is not set"), "{err}");

    let text = text.replace("missing = \"${WSBENCH_TEST_UNSET_9C1E}\"\n", "");
    let config = Config::parse(&text, Path::new("c.toml")).unwrap();
    let c = config.profile("c").unwrap();
    assert_eq!(c.options["api_key"].as_str(), Some(secret.as_str()));
    assert_eq!(c.options["literal"].as_str(), Some("${x}"));
    let printed = serde_json::to_string(&config).unwrap();
    assert!(!printed.contains(&format!("\"{secret}\"")), "{printed}");
    assert!(!printed.contains("plain-secret"), "{printed}");
    assert!(printed.contains(&format!("${{{var}}}")), "{printed}");
    // Opening checks the options against the backend's keys (the local
    // backend's are checked only then; the others' also at parse time,
    // see config_gaps.rs): the made-up keys are reported at their line.
    let dir = tempfile::tempdir().unwrap();
    let err = open_profile(&config, "c", &paths(dir.path()), EventBus::default())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("c.toml:4:"), "{err}");
    assert!(err.contains("unknown option `api_key`"), "{err}");
}

// ---------------------------------------------------------------------------
// The CLI, across processes.

struct Cli {
    home: tempfile::TempDir,
}

impl Cli {
    fn new() -> Self {
        Cli {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        cli::wsbench_cmd(self.home.path())
            .args(args)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn write_config(&self, text: &str) {
        let p = self.home.path().join("config/wsbench/config.toml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn cli_lists_workspaces_made_by_an_earlier_process() {
    let cli = Cli::new();
    let made = cli.json(&[
        "workspaces",
        "create",
        "--user",
        "alice",
        "--agent",
        "coder",
        "--json",
    ]);
    // The built-in profile is per_user: alice's agents share her workspace.
    let id = per_user_id("alice");
    assert_eq!(made["id"], id);
    assert_eq!(made["created"], true);
    let again = cli.json(&[
        "workspaces",
        "create",
        "--user",
        "alice",
        "--agent",
        "coder",
        "--json",
    ]);
    assert_eq!(again["created"], false);

    // Another process sees it, with its labels.
    let listed = cli.json(&["workspaces", "list", "--json"]);
    let rows = listed["workspaces"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    let w = &rows[0];
    assert_eq!(w["id"], id);
    assert_eq!(w["user"], "alice");
    assert_eq!(w["agent"], "coder");
    assert_eq!(w["labels"]["wsbench.isolation"], "per_user");
    assert_eq!(w["profile"], "local");
    assert_eq!(w["backend"], "local");
    assert_eq!(w["labels"]["wsbench.workspace.id"], id);
    assert!(w["age_secs"].is_number());

    // Commands without --workdir use the same managed workspace.
    let o = cli.run(&["exec", "--user", "alice", "--agent", "coder", "--", "pwd"]);
    assert!(o.status.success());
    let dir = cli.home.path().join("data/wsbench/workspaces/alice");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        dir.canonicalize().unwrap().to_str().unwrap()
    );

    let opened = cli.json(&["workspaces", "open", &id, "--json"]);
    assert_eq!(opened["id"], id);
    let o = cli.run(&["workspaces", "open", "no-such-id"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no workspace `no-such-id`"));
    let closed = cli.json(&["workspaces", "close", &id, "--json"]);
    assert_eq!(closed["closed"], true);

    // No terminal and no --yes: refused, nothing lost.
    let o = cli.run(&["workspaces", "destroy", &id]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pass --yes"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(dir.is_dir());
    let gone = cli.json(&["workspaces", "destroy", &id, "--yes", "--json"]);
    assert_eq!(gone["destroyed"], true);
    assert!(!dir.exists());
    let listed = cli.json(&["workspaces", "list", "--json"]);
    assert!(listed["workspaces"].as_array().unwrap().is_empty());
}

#[test]
fn cli_profiles_select_backends_and_report_unavailable_ones() {
    let cli = Cli::new();
    let base = cli.home.path().join("team-base");
    cli.write_config(&format!(
        "default_profile = \"team\"\n\n[profiles.team]\nbackend = \"local\"\nisolation = \"per_user\"\n\n[profiles.team.options]\nbase_dir = \"{}\"\n\n[profiles.box]\nbackend = \"docker\"\n\n[profiles.box.options]\nimage = \"${{WSBENCH_TEST_UNSET_BOX}}\"\n",
        base.display()
    ));
    let made = cli.json(&["workspaces", "create", "--user", "bob", "--json"]);
    assert_eq!(made["id"], "883053c3e4594c5b");
    assert_eq!(made["profile"], "team");
    assert!(base.join("bob").is_dir());
    let local = cli.json(&[
        "workspaces",
        "create",
        "--profile",
        "local",
        "--user",
        "bob",
        "--json",
    ]);
    assert_eq!(local["id"], per_user_id("bob"));
    let host_dir = cli.home.path().join("data/wsbench/workspaces/bob");
    assert_eq!(local["host_dir"], host_dir.to_str().unwrap());

    let o = cli.run(&["workspaces", "list", "--all-profiles", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the box profile (an unset variable) cannot be listed, the others are: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let profiles: BTreeMap<String, usize> = v["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        // Built-in sandbox profiles list whatever their daemon holds
        // (other tests' containers too): count the local backend only.
        .filter(|w| w["backend"] == "local")
        .fold(BTreeMap::new(), |mut m, w| {
            *m.entry(w["profile"].as_str().unwrap().to_string())
                .or_default() += 1;
            m
        });
    assert_eq!(profiles.get("team"), Some(&1));
    assert_eq!(profiles.get("local"), Some(&1));
    // Built-in sandbox profiles may be listed or fail depending on the
    // machine; the configured `box` fails, naming its option.
    let errors = v["errors"].as_array().unwrap();
    let boxed = errors
        .iter()
        .find(|e| e["profile"] == "box")
        .expect("box reports an error");
    assert!(
        boxed["error"]
            .as_str()
            .unwrap()
            .contains("WSBENCH_TEST_UNSET_BOX"),
        "{boxed}"
    );

    // A bad key names file, line and key.
    cli.write_config("[profiles.team]\nbackend = \"local\"\nttl_seconds = 4\n");
    let o = cli.run(&["workspaces", "list"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("config.toml:3:"), "{err}");
    assert!(err.contains("ttl_seconds"), "{err}");
}

#[test]
fn cli_all_profiles_lists_what_works_and_warns_once_per_broken_profile() {
    let cli = Cli::new();
    // dockerd "down": the profile's daemon address is a socket that is not there.
    let sock = cli.home.path().join("no-dockerd.sock");
    let sock = sock.to_str().unwrap();
    cli.write_config(&format!(
        "[profiles.dead]\nbackend = \"docker\"\n\n[profiles.dead.options]\nhost = \"unix://{sock}\"\n"
    ));
    cli.json(&["workspaces", "create", "--user", "alice", "--json"]);
    let id = per_user_id("alice");

    let o = cli.run(&["workspaces", "list", "--all-profiles"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains(&id), "{err}");
    let dead: Vec<&str> = err.lines().filter(|l| l.contains("dead")).collect();
    assert_eq!(dead.len(), 1, "one line per failing profile: {err}");
    assert!(
        dead[0].starts_with("warning: profile dead (docker) not listed: "),
        "{err}"
    );
    assert_eq!(dead[0].matches(sock).count(), 1, "cause said once: {err}");
    assert!(dead[0].contains("no such socket"), "{err}");
    // Every line on stderr is such a warning (built-in profiles that
    // cannot answer on this machine get theirs too).
    assert!(
        err.lines().all(|l| l.starts_with("warning: profile ")),
        "{err}"
    );

    let o = cli.run(&["workspaces", "list", "--all-profiles", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == id.as_str() && w["profile"] == "local")
    );
    let e = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["profile"] == "dead")
        .expect("dead is in errors");
    assert_eq!(e["backend"], "docker");
    let text = e["error"].as_str().unwrap();
    assert_eq!(text.matches(sock).count(), 1, "{text}");

    // Asked for alone, the broken profile is an error (exit 1).
    let o = cli.run(&["workspaces", "list", "--profile", "dead"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such socket"));

    // The help documents the exit status and the `errors` shape.
    let o = cli.run(&["workspaces", "list", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("Exit status: 0 when at least one profile"),
        "{help}"
    );
    assert!(help.contains("\"errors\": [{\"profile\""), "{help}");
}

/// The listing of `id` in a fresh process.
fn listed(cli: &Cli, id: &str) -> Value {
    let v = cli.json(&["workspaces", "list", "--json"]);
    v["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not listed: {v}"))
}

#[test]
fn cli_list_shows_ttl_left_of_workspaces_it_does_not_hold() {
    let cli = Cli::new();
    let base = cli.home.path().join("base");
    cli.write_config(&format!(
        "default_profile = \"p\"\n\n[profiles.p]\nbackend = \"local\"\nttl = \"10m\"\n\n[profiles.p.options]\nbase_dir = \"{}\"\n",
        base.display()
    ));
    let made = cli.json(&[
        "workspaces",
        "create",
        "--user",
        "u",
        "--agent",
        "a",
        "--json",
    ]);
    let id = made["id"].as_str().unwrap().to_string();
    // Another process: it holds nothing, yet knows the TTL and the idle time.
    let w = listed(&cli, &id);
    assert_eq!(w["open"], false);
    assert_eq!(w["state"], "running");
    let idle = w["idle_secs"].as_f64().unwrap();
    let left = w["ttl_left_secs"].as_f64().expect("TTL left is known");
    assert!((left + idle - 600.0).abs() < 1.0, "{w}");
    assert!(left > 590.0, "{w}");
    let o = cli.run(&["workspaces", "list"]);
    let table = String::from_utf8_lossy(&o.stdout);
    let row = table.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains(" 9m "), "TTL LEFT shown: {table}");
}

#[test]
fn cli_close_of_a_local_workspace_is_seen_by_other_processes_until_it_is_used() {
    let cli = Cli::new();
    let made = cli.json(&["workspaces", "create", "--user", "carol", "--json"]);
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(listed(&cli, &id)["state"], "running");

    let closed = cli.json(&["workspaces", "close", &id, "--json"]);
    assert_eq!(closed["closed"], true);
    let w = listed(&cli, &id);
    assert_eq!(w["state"], "closed", "{w}");
    assert!(w["ttl_left_secs"].is_null(), "nothing left to evict: {w}");
    let o = cli.run(&["workspaces", "list"]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&id) && l.contains(" closed ")),
        "{table}"
    );
    // Closing twice is fine; files are kept.
    cli.json(&["workspaces", "close", &id, "--json"]);
    let dir = cli.home.path().join("data/wsbench/workspaces/carol");
    assert!(dir.is_dir());

    // Any use reopens it.
    let o = cli.run(&["exec", "--user", "carol", "--", "true"]);
    assert!(o.status.success());
    assert_eq!(listed(&cli, &id)["state"], "running");
    cli.json(&["workspaces", "close", &id, "--json"]);
    cli.json(&["workspaces", "open", &id, "--json"]);
    let w = listed(&cli, &id);
    assert_eq!(w["state"], "running", "{w}");
    assert!(w["ttl_left_secs"].as_f64().unwrap() > 3590.0, "{w}");
}

#[tokio::test]
async fn close_releases_leases_and_persists_for_other_managers() {
    let dir = tempfile::tempdir().unwrap();
    let mk = || {
        let prov: Arc<dyn Provisioner> = Arc::new(LocalProvisioner::new(dir.path()));
        let opts = ManagerOptions::for_provisioner(prov.as_ref());
        WorkspaceManager::new("p", prov, opts, EventBus::default())
    };
    let (m1, m2) = (mk(), mk());
    let lease = m1.acquire("u", "a", "s", None).await.unwrap();
    let id = lease.id().to_string();
    let state = |v: Vec<wsbench::manager::WorkspaceInfo>| {
        let w = v.into_iter().find(|w| w.id == id).unwrap();
        (w.state, w.leases, w.ttl_left_secs.is_some())
    };
    assert_eq!(state(m1.list().await.unwrap()), ("leased".into(), 1, true));
    assert_eq!(state(m2.list().await.unwrap()), ("running".into(), 0, true));

    assert!(m1.close(&id).await.unwrap());
    // The lease no longer holds it, here or anywhere.
    assert!(m1.lease(&id).is_none());
    assert_eq!(state(m1.list().await.unwrap()), ("closed".into(), 0, false));
    assert_eq!(state(m2.list().await.unwrap()), ("closed".into(), 0, false));
    drop(lease);
    assert_eq!(state(m2.list().await.unwrap()), ("closed".into(), 0, false));

    // The next use, from any manager, reopens it.
    m2.get_workspace("u", "a", "s", None).await.unwrap();
    assert_eq!(state(m2.list().await.unwrap()), ("ready".into(), 0, true));
    assert_eq!(state(m1.list().await.unwrap()), ("running".into(), 0, true));
    m2.shutdown().await.unwrap();
    m1.shutdown().await.unwrap();
}

#[test]
fn builtin_sandbox_profiles_never_share_the_local_workspaces() {
    let d = tempfile::tempdir().unwrap();
    let p = paths(d.path());
    let config = Config::default();
    for name in ["bwrap", "docker"] {
        let (prov, _) = wsbench::root::profile_options(&config, name, &p).unwrap();
        let _ = prov;
    }
    // Cloud built-ins take no base_dir: the error, if any, is about the key.
    for (name, var) in [
        ("e2b", "E2B_API_KEY"),
        ("daytona", "DAYTONA_API_KEY"),
        ("opensandbox", "OPEN_SANDBOX_API_KEY"),
    ] {
        match wsbench::root::profile_options(&config, name, &p) {
            Ok(_) => {}
            Err(e) => {
                let e = e.to_string();
                assert!(!e.contains("base_dir"), "{name}: {e}");
                assert!(e.contains(var) || e.contains("key"), "{name}: {e}");
            }
        }
    }
}
