//! What the cloud backend tests share: the bubblewrap gate of the fake
//! services (their commands run in bubblewrap boxes on this host), a fake
//! plus its provisioner, a provisioning spec, and a shell line run to its
//! captured output. Used by the `cloud_*` test modules with the fakes
//! beside it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wsbench::backend::cloud::exec_capture;
use wsbench::backend::{BackendResult, ExecOutcome, ProvisionSpec, Provisioner, Sandbox};
use wsbench::engine::tools::ToolLimits;
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};

use crate::support::call;
use crate::support::fake_sandbox::Faults;

/// Whether the fake cloud services can run here: bubblewrap works.
/// Otherwise prints `SKIPPED` (fails under `CI=true`).
pub fn fakes_ready() -> bool {
    if crate::support::fake_sandbox::bwrap_available() {
        return true;
    }
    crate::support::skip_or_fail("bubblewrap (bwrap) is required for the fake cloud sandboxes");
    false
}

/// A started fake and the provisioner `make` builds for it; `None` (after
/// [`fakes_ready`] said why) when the fakes cannot run here.
pub async fn setup<F, P>(
    start: impl Future<Output = F>,
    make: impl FnOnce(&F) -> BackendResult<P>,
) -> Option<(F, P)> {
    if !fakes_ready() {
        return None;
    }
    let fake = start.await;
    let prov = make(&fake).unwrap();
    Some((fake, prov))
}

/// A spec for workspace `id` with no labels.
pub fn spec(id: &str) -> ProvisionSpec {
    ProvisionSpec {
        workspace_id: id.into(),
        labels: BTreeMap::new(),
    }
}

/// Runs `sh -c line` with a 20 s limit: outcome, stdout, stderr.
pub async fn sh(sb: &dyn Sandbox, line: &str) -> (ExecOutcome, String, String) {
    sh_t(sb, line, Duration::from_secs(20)).await
}

/// Runs `sh -c line` with limit `t`: outcome, stdout, stderr (UTF-8).
pub async fn sh_t(sb: &dyn Sandbox, line: &str, t: Duration) -> (ExecOutcome, String, String) {
    let (o, out, err) = exec_capture(sb, vec!["/bin/sh".into(), "-c".into(), line.into()], t)
        .await
        .unwrap();
    (
        o,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// C19 through the Bash tool: in a workspace on `sb` whose default Bash
/// timeout is `ms`, `sleep 100` stops after about `ms` and says so.
/// Returns the workspace for further calls.
pub async fn bash_default_timeout_applies(sb: Arc<dyn Sandbox>, ms: u64) -> Arc<Workspace> {
    let limits = ToolLimits {
        bash_default_timeout_ms: ms,
        ..Default::default()
    };
    let config = WorkspaceConfig {
        limits,
        ..Default::default()
    };
    let ws = Workspace::open(sb, config, EventBus::default())
        .await
        .unwrap();
    let t0 = Instant::now();
    let r = call(&ws, "Bash", json!({"command": "sleep 100"})).await;
    let took = t0.elapsed();
    assert!(
        r.text().contains(&format!("timed out after {ms}ms")),
        "{}",
        r.text()
    );
    assert!(took < Duration::from_secs(8), "{took:?}");
    ws
}

/// The built-in tools in a workspace on `sb`: Write, Read, Edit, Bash
/// (stdout and stderr both reported), and Glob/Grep where `rg` is
/// installed (required under CI).
pub async fn builtin_tools_work(sb: Arc<dyn Sandbox>) {
    let ws = Workspace::open(sb.clone(), Default::default(), EventBus::default())
        .await
        .unwrap();
    let file = format!("{}/src/a.txt", sb.workdir());
    let r = call(
        &ws,
        "Write",
        json!({"file_path": file, "content": "alpha\nbeta\n"}),
    )
    .await;
    assert!(r.is_success(), "{}", r.text());
    let r = call(&ws, "Read", json!({"file_path": file})).await;
    assert!(r.text().contains("beta"), "{}", r.text());
    let r = call(
        &ws,
        "Edit",
        json!({"file_path": file, "old_string": "beta", "new_string": "gamma"}),
    )
    .await;
    assert!(r.is_success(), "{}", r.text());
    assert_eq!(sb.read("src/a.txt", None).await.unwrap(), b"alpha\ngamma\n");
    let r = call(&ws, "Read", json!({"file_path": file})).await;
    assert!(r.text().contains("gamma"), "{}", r.text());
    let r = call(
        &ws,
        "Bash",
        json!({"command": "cat src/a.txt; echo warn >&2"}),
    )
    .await;
    assert!(
        r.text().contains("gamma") && r.text().contains("warn"),
        "{}",
        r.text()
    );
    if !crate::support::have("rg") {
        crate::support::skip_or_fail("rg is not installed (Glob/Grep part)");
        return;
    }
    let r = call(&ws, "Glob", json!({"pattern": "**/*.txt"})).await;
    assert!(r.text().contains("a.txt"), "{}", r.text());
    let r = call(
        &ws,
        "Grep",
        json!({"pattern": "gam+a", "output_mode": "content"}),
    )
    .await;
    assert!(r.text().contains("gamma"), "{}", r.text());
}

/// Contract §11 point 16, with every request to `path` answered 404: a
/// `create` that fails leaves no sandbox behind (it held no user data); a
/// reattach that fails keeps the sandbox and its files. `ids` lists the
/// fake's sandboxes.
pub async fn failed_create_cleans_up_failed_attach_keeps_data(
    p: &dyn Provisioner,
    faults: &Faults,
    ids: impl Fn() -> Vec<String>,
    path: &str,
) {
    let gone = |on: bool| *faults.gone_after.lock().unwrap() = on.then(|| (path.to_string(), 0));
    gone(true);
    assert!(p.create(&spec("ws-bad")).await.is_err());
    assert!(ids().is_empty(), "the new sandbox was not left behind");
    gone(false);
    let sb = p.create(&spec("ws-keep")).await.unwrap();
    sb.write("data.txt", b"precious").await.unwrap();
    let info = p.find("ws-keep").await.unwrap().unwrap();
    gone(true);
    assert!(p.attach(&info).await.is_err());
    gone(false);
    assert_eq!(ids().len(), 1, "a reattach failure never deletes");
    assert_eq!(sb.read("data.txt", None).await.unwrap(), b"precious");
}
