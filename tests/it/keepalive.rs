//! Keep-alive that follows the work (issue 15 point 6): while a workspace
//! is leased, the manager renews the service's keep-alive at a third of
//! `keep_alive` (E2B `connect` with a timeout, OpenSandbox
//! `renew-expiration`, Daytona `last-activity`; docs/specs/keep-alive.md),
//! stops when the last lease goes, and a renewal that fails is a warning
//! on the bus, not a failure of the work.

use std::sync::Arc;
use std::time::Duration;

use wsbench::backend::Provisioner;
use wsbench::backend::daytona::DaytonaProvisioner;
use wsbench::backend::e2b::E2bProvisioner;
use wsbench::backend::opensandbox::OpenSandboxProvisioner;
use wsbench::engine::events::{Event, Received, Subscriber};
use wsbench::manager::{ManagerOptions, WorkspaceManager};

use crate::heal::sh;
use crate::support::cloud;
use crate::support::fake_daytona::FakeDaytona;
use crate::support::fake_e2b::FakeE2b;
use crate::support::fake_opensandbox::FakeOpenSandbox;
use crate::support::fake_sandbox::{Faults, Recorder};

/// Renewal every 100 ms.
const KEEP_ALIVE: Duration = Duration::from_millis(300);

fn manager(prov: Arc<dyn Provisioner>) -> WorkspaceManager {
    let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
    opts.keep_alive = KEEP_ALIVE;
    WorkspaceManager::new("keepalive", prov, opts, Default::default())
}

/// The warnings published since the last call.
fn warnings(sub: &mut Subscriber) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let Received::Event(env) = r
            && let Event::Log { level, message, .. } = &env.event
            && level == "warn"
        {
            out.push(message.clone());
        }
    }
    out
}

/// A leased workspace is renewed about every 100 ms, renewals stop once
/// the lease is dropped, and three failed renewals are three warnings
/// while commands go on working and renewals resume.
async fn renews_while_leased(
    prov: Arc<dyn Provisioner>,
    rec: &Recorder,
    faults: &Faults,
    path: &str,
) {
    let m = manager(prov);
    let mut sub = m.events().subscribe();
    let lease = m.acquire("u", "a", "s", None).await.unwrap();
    let before = rec.count(path);
    tokio::time::sleep(Duration::from_millis(550)).await;
    let renewed = rec.count(path) - before;
    assert!(
        renewed >= 2,
        "{renewed} renewals of {path} in 550 ms (every 100 ms)"
    );
    assert!(warnings(&mut sub).is_empty());

    for _ in 0..3 {
        faults.inject(path, 400, None, "BAD_REQUEST", "renewal refused");
    }
    tokio::time::sleep(Duration::from_millis(550)).await;
    let w = warnings(&mut sub);
    assert!(
        w.len() >= 3 && w.iter().all(|m| m.contains("keep-alive of workspace")),
        "{w:?}"
    );
    assert!(w[0].contains("renewal refused"), "{w:?}");
    // The work goes on, and so do the renewals.
    assert_eq!(sh(&lease, "echo still").await, "still\n");
    let after_faults = rec.count(path);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(rec.count(path) > after_faults, "renewals resumed");

    drop(lease);
    // One renewal may be in its sleep when the lease goes.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let stopped = rec.count(path);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(rec.count(path), stopped, "no renewal without a lease");
    m.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_is_renewed_while_leased() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeE2b::start().await;
    let prov = E2bProvisioner::new(crate::cloud_e2b::opts(&f)).unwrap();
    renews_while_leased(Arc::new(prov), f.rec(), f.faults(), "/connect").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_is_renewed_while_leased() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeOpenSandbox::start().await;
    let prov = OpenSandboxProvisioner::new(crate::cloud_opensandbox::opts(&f)).unwrap();
    renews_while_leased(Arc::new(prov), f.rec(), f.faults(), "/renew-expiration").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daytona_activity_is_reported_while_leased() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeDaytona::start().await;
    let prov = DaytonaProvisioner::new(crate::cloud_daytona::opts(&f)).unwrap();
    renews_while_leased(Arc::new(prov), f.rec(), f.faults(), "/last-activity").await;
}
