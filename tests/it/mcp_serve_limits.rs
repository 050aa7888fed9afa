//! Issue 14 point 12: `wsbench mcp serve` answers a request over its size
//! limit (16 MiB per message) with a JSON-RPC "request too large" error
//! naming the limit, and keeps serving the requests after it.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_17_mib_tools_call_gets_a_too_large_error_and_serving_goes_on() {
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
        // 17 MiB of content for Write, then a small request.
        let big = "x".repeat(17 * 1024 * 1024);
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "Write", "arguments": {"file_path": "big.txt", "content": big}}}),
        )
        .await;
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        )
        .await;
        let mut answers = Vec::new();
        while answers.len() < 2 {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                answers.push(v);
            }
        }
        answers
    };
    let answers = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("no answer to the oversized request (or to the one after it)");
    let too_large = answers
        .iter()
        .find(|v| v["id"] == 2)
        .expect("id 2 answered");
    assert_eq!(too_large["error"]["code"], -32600, "{too_large}");
    let msg = too_large["error"]["message"].as_str().unwrap();
    assert!(msg.contains("too large") && msg.contains("16 MiB"), "{msg}");
    let list = answers
        .iter()
        .find(|v| v["id"] == 3)
        .expect("id 3 answered");
    assert!(list["result"]["tools"].is_array(), "{list}");
    assert!(!w.path().join("big.txt").exists());
    drop(stdin);
    let _ = child.wait().await;
}
