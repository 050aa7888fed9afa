//! Long-lived holders renew (issue 15 point 6): `wsbench mcp serve` and the
//! agent loop hold a workspace for far longer than its TTL, and each call
//! (a tool call, a reply) counts as activity: while calls keep coming the
//! sandbox is neither evicted (paused) nor left to expire (the service's
//! keep-alive, E2B `connect` with a timeout, is renewed); when they stop,
//! the TTL sweep releases it (paused, no more renewals); a call after that
//! opens it again. Both run against the E2B fake with a 2 s TTL, so a
//! holder that took no lease per call would see its sandbox paused under
//! it after 2 s.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use wsbench::agent::model::{DeltaSink, Model, ModelError, ModelRequest, ModelToolCall, ModelTurn};
use wsbench::agent::{Agent, AgentConfig, FinishReason, Toolset};
use wsbench::backend::e2b::E2bProvisioner;
use wsbench::manager::{ManagerOptions, WorkspaceManager};

use crate::support::cli;
use crate::support::cloud;
use crate::support::fake_e2b::{self, FakeE2b};
use crate::support::mcp_serve::Served;

const TTL: Duration = Duration::from_secs(2);
const SWEEP: Duration = Duration::from_millis(100);
/// Renewed every 200 ms while leased (a third of it).
const KEEP_ALIVE: Duration = Duration::from_millis(600);
/// How long the holders keep calling: twice the TTL.
const BUSY: Duration = Duration::from_secs(4);

/// The state of the fake's only sandbox.
fn only_sandbox(f: &FakeE2b) -> (String, &'static str) {
    let ids = f.ids();
    assert_eq!(ids.len(), 1, "one sandbox: {ids:?}");
    let state = f.sandbox_state(&ids[0]).unwrap();
    (ids[0].clone(), state)
}

/// Waits (up to 15 s: TTL, a sweep and a pause under load) for the sandbox
/// to be paused by the TTL sweep; then checks that no renewal follows
/// (a `connect` would resume it).
async fn released(f: &FakeE2b, id: &str) {
    let t0 = Instant::now();
    while f.sandbox_state(id) != Some("paused") {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the idle sandbox was never released: {:?}",
            f.sandbox_state(id)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A renewal may be in flight as the last lease goes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let renewals = f.rec().count("/connect");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(f.rec().count("/connect"), renewals, "renewed after release");
    assert_eq!(f.sandbox_state(id), Some("paused"));
}

fn bash(id: u64, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "Bash", "arguments": {"command": command}}})
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_keeps_its_sandbox_while_calls_come_and_lets_it_go_after() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeE2b::start().await;
    let home = tempfile::tempdir().unwrap();
    let conf = home.path().join("config/wsbench");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("config.toml"),
        format!(
            "[profiles.e2b]\nbackend = \"e2b\"\nttl = \"{}ms\"\nsweep_interval = \"{}ms\"\n\
             keep_alive = \"{}ms\"\n\n[profiles.e2b.options]\napi_url = \"{url}\"\n\
             envd_url = \"{url}\"\nrequest_timeout_secs = 20\nmax_retries = 1\n",
            TTL.as_millis(),
            SWEEP.as_millis(),
            KEEP_ALIVE.as_millis(),
            url = f.url()
        ),
    )
    .unwrap();
    let mut cmd = cli::wsbench_tokio_cmd(home.path());
    cmd.args(["--profile", "e2b", "--user", "alice", "--agent", "coder"])
        .env("E2B_API_KEY", fake_e2b::KEY);
    let mut s = Served::start_cmd(cmd).await;

    let t0 = Instant::now();
    let before = f.rec().count("/connect");
    let mut n = 10;
    while t0.elapsed() < BUSY {
        n += 1;
        s.send(&bash(n, &format!("echo call {n}"))).await;
        let a = s.answers(1).await.remove(0);
        assert_eq!(text_of(&a).trim(), format!("call {n}"), "{a}");
        let (_, state) = only_sandbox(&f);
        assert_eq!(state, "running", "paused under a holder still calling");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let renewed = f.rec().count("/connect") - before;
    assert!(renewed >= 5, "{renewed} keep-alive renewals in {BUSY:?}");

    // The calls stop: the sandbox is released after the TTL.
    let (id, _) = only_sandbox(&f);
    released(&f, &id).await;

    // The next call opens it again (resumed, files kept).
    s.send(&bash(99, "echo back")).await;
    let a = s.answers(1).await.remove(0);
    assert_eq!(text_of(&a).trim(), "back", "{a}");
    assert_eq!(only_sandbox(&f), (id, "running"));
    s.finish().await;
}

/// A model that answers from a script, each turn after `pace`.
struct SlowModel {
    turns: Mutex<VecDeque<ModelTurn>>,
    pace: Duration,
    /// The last message of every request, as JSON (the result of the
    /// previous turn's tool call).
    seen: Mutex<Vec<String>>,
}

impl SlowModel {
    /// `calls` turns of one Bash call each, then a text answer.
    fn new(calls: usize, pace: Duration) -> Self {
        let mut turns: VecDeque<ModelTurn> = (0..calls)
            .map(|i| ModelTurn {
                text: String::new(),
                tool_calls: vec![ModelToolCall {
                    id: format!("c{i}"),
                    name: "Bash".into(),
                    arguments: json!({"command": format!("echo turn {i}")}).to_string(),
                }],
                usage: None,
                finish_reason: Some("tool_calls".into()),
            })
            .collect();
        turns.push_back(ModelTurn {
            text: "done".into(),
            tool_calls: Vec::new(),
            usage: None,
            finish_reason: Some("stop".into()),
        });
        SlowModel {
            turns: Mutex::new(turns),
            pace,
            seen: Mutex::new(Vec::new()),
        }
    }

    fn refill(&self, other: SlowModel) {
        *self.turns.lock().unwrap() = other.turns.into_inner().unwrap();
    }
}

#[async_trait]
impl Model for SlowModel {
    fn name(&self) -> &str {
        "slow"
    }

    async fn turn(
        &self,
        request: &ModelRequest,
        _on_delta: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ModelTurn, ModelError> {
        let last = serde_json::to_string(&request.messages.last()).unwrap();
        self.seen.lock().unwrap().push(last);
        tokio::select! {
            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
            _ = tokio::time::sleep(self.pace) => {}
        }
        let next = self.turns.lock().unwrap().pop_front();
        Ok(next.expect("the script has a turn left"))
    }

    async fn summarize(
        &self,
        _request: &ModelRequest,
        _schema: &Value,
        _cancel: &CancellationToken,
    ) -> Result<Map<String, Value>, ModelError> {
        Ok(Map::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reply_keeps_its_sandbox_and_lets_it_go_after() {
    if !cloud::fakes_ready() {
        return;
    }
    let f = FakeE2b::start().await;
    let prov = Arc::new(E2bProvisioner::new(crate::cloud_e2b::opts(&f)).unwrap());
    let mut opts = ManagerOptions::for_provisioner(prov.as_ref());
    (opts.ttl, opts.sweep_interval, opts.keep_alive) = (TTL, SWEEP, KEEP_ALIVE);
    let m = WorkspaceManager::new("holders", prov, opts, Default::default());
    let ws = m.get_workspace("u", "a", "s", None).await.unwrap();
    let (id, _) = only_sandbox(&f);

    // Ten turns 400 ms apart: a reply twice as long as the TTL.
    let model = Arc::new(SlowModel::new(9, Duration::from_millis(400)));
    let mut agent = Agent::open(
        ws.clone(),
        model.clone() as Arc<dyn Model>,
        Toolset::standard(&ws),
        AgentConfig::new("s"),
    )
    .await
    .unwrap();
    agent.set_source(Arc::new(m.source(ws.id(), "u", "a", "s")));

    // Every state the sandbox is seen in while the reply runs.
    let stop = CancellationToken::new();
    let seen = {
        let (f_state, stop) = (f.state.clone(), stop.clone());
        let id = id.clone();
        tokio::spawn(async move {
            let mut seen = std::collections::BTreeSet::new();
            while !stop.is_cancelled() {
                seen.insert(f_state.sandboxes.with(&id, |s| s.state));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            seen
        })
    };
    let before = f.rec().count("/connect");
    let t0 = Instant::now();
    let out = agent.reply_text("go").await.unwrap();
    let took = t0.elapsed();
    stop.cancel();
    let seen = seen.await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed, "{out:?}");
    assert_eq!(out.text, "done");
    assert!(took >= BUSY, "the reply took {took:?}");
    assert_eq!(
        seen,
        [Some("running")].into_iter().collect(),
        "paused under a reply in progress"
    );
    let renewed = f.rec().count("/connect") - before;
    assert!(renewed >= 5, "{renewed} keep-alive renewals in {took:?}");
    // The model read the output of every call, the last one included.
    let seen = model.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 10, "{seen:?}");
    for (i, last) in seen[1..].iter().enumerate() {
        assert!(last.contains(&format!("turn {i}\\n")), "{i}: {last}");
    }

    // The replies stop: released after the TTL.
    released(&f, &id).await;

    // The next reply opens the workspace again and runs on it.
    model.refill(SlowModel::new(1, Duration::ZERO));
    let out = agent.reply_text("again").await.unwrap();
    assert_eq!(out.reason, FinishReason::Completed, "{out:?}");
    assert!(
        !Arc::ptr_eq(agent.workspace(), &ws),
        "the agent moved to the workspace opened again"
    );
    assert_eq!(only_sandbox(&f), (id, "running"));
    drop(agent);
    m.shutdown().await.unwrap();
}
