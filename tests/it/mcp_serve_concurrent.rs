//! Issue 22: `wsbench mcp serve` answers concurrent tool calls
//! concurrently. The first call waits for a file that only the second
//! call makes: served one after another, the first never ends (until
//! its own timeout, which the test sees as a failure, not as slowness).

use crate::support::mcp_serve::Served;

use serde_json::{Value, json};

fn bash(id: u64, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "Bash", "arguments": {"command": command, "timeout": 60000}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_a_later_call_is_answered() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let mut s = Served::start(home.path(), w.path()).await;
    let run = async {
        s.send(&bash(
            2,
            "while [ ! -e go ]; do sleep 0.05; done; echo waited",
        ))
        .await;
        s.send(&bash(3, "touch go; echo made")).await;
        s.answers(2).await
    };
    let answers = tokio::time::timeout(std::time::Duration::from_secs(50), run)
        .await
        .expect("the first call never ended: calls are served one after another");
    let text = |id: u64| {
        let v = answers.iter().find(|v| v["id"] == id).unwrap();
        assert!(v["result"]["isError"] != true, "{v}");
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(text(2).contains("waited"), "{answers:?}");
    assert!(text(3).contains("made"), "{answers:?}");
    s.finish().await;
}
