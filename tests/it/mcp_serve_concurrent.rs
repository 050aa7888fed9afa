//! Issue 22: `wsbench mcp serve` answers concurrent tool calls
//! concurrently. The first call waits for a file that only the second
//! call makes: served one after another, the first never ends (until
//! its own timeout, which the test sees as a failure, not as slowness).

use crate::support::cli;

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

async fn send(stdin: &mut tokio::process::ChildStdin, v: &Value) {
    let mut line = serde_json::to_vec(v).unwrap();
    line.push(b'\n');
    stdin.write_all(&line).await.unwrap();
    stdin.flush().await.unwrap();
}

fn bash(id: u64, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "Bash", "arguments": {"command": command, "timeout": 60000}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_a_later_call_is_answered() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let mut child = cli::wsbench_tokio_cmd(home.path())
        .arg("--workdir")
        .arg(w.path())
        .args(["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let run = async {
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .await;
        let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(init["id"], 1, "{init}");
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        send(
            &mut stdin,
            &bash(2, "while [ ! -e go ]; do sleep 0.05; done; echo waited"),
        )
        .await;
        send(&mut stdin, &bash(3, "touch go; echo made")).await;
        let mut order = Vec::new();
        while order.len() < 2 {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = v.get("id").and_then(Value::as_u64) {
                let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
                assert!(v["result"]["isError"] != true, "{v}");
                order.push((id, text.to_string()));
            }
        }
        order
    };
    let order = tokio::time::timeout(std::time::Duration::from_secs(50), run)
        .await
        .expect("the first call never ended: calls are served one after another");
    let text = |id| &order.iter().find(|(i, _)| *i == id).unwrap().1;
    assert!(text(2).contains("waited"), "{order:?}");
    assert!(text(3).contains("made"), "{order:?}");
    drop(stdin);
    let _ = child.wait().await;
}
