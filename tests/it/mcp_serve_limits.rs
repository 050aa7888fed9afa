//! Issue 14 point 12: `wsbench mcp serve` answers a request over its size
//! limit (16 MiB per message) with a JSON-RPC "request too large" error
//! naming the limit, and keeps serving the requests after it.

use crate::support::mcp_serve::Served;

use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_17_mib_tools_call_gets_a_too_large_error_and_serving_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let mut s = Served::start(home.path(), w.path()).await;
    let run = async {
        // 17 MiB of content for Write, then a small request.
        let big = "x".repeat(17 * 1024 * 1024);
        s.send(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "Write", "arguments": {"file_path": "big.txt", "content": big}}}),
        )
        .await;
        s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            .await;
        s.answers(2).await
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
    s.finish().await;
}
