//! Issue 14 point 13: an MCP tool call whose server never answers ends
//! at the config's default timeout (`[mcp] call_timeout_secs`) when the
//! declaration sets no `execution_timeout`, and the interrupted call is
//! in the session journal. A call interrupted by SIGINT or SIGTERM is
//! journaled too, naming the signal, and exits 128 + its number.

use crate::support::cli;

use std::path::Path;
use std::process::Output;

/// A stdio MCP server that answers `initialize` and `tools/list` and
/// never answers `tools/call`.
const HANGING_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    mid = msg.get("id")
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "hang", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "wait", "description": "never returns",
                             "inputSchema": {"type": "object"}}]}
    elif method == "tools/call" and len(sys.argv) > 1:
        open(sys.argv[1], "w").close()
        continue
    else:
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"#;

fn run(home: &Path, w: &Path, args: &[&str]) -> Output {
    cli::wsbench_cmd(home)
        .arg("--config")
        .arg(home.join("wsbench.toml"))
        .arg("--workdir")
        .arg(w)
        .args(["--session", "s1"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_call_to_a_server_that_never_answers_times_out_and_is_journaled() {
    if !crate::support::have("python3") {
        crate::support::skip_or_fail("python3 is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("wsbench.toml"),
        "[mcp]\ncall_timeout_secs = 1\n",
    )
    .unwrap();
    let script = home.path().join("hang.py");
    std::fs::write(&script, HANGING_SERVER).unwrap();
    let o = run(
        home.path(),
        w.path(),
        &[
            "mcp",
            "add",
            "hang",
            "--",
            "python3",
            script.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(
        home.path(),
        w.path(),
        &["mcp", "call", "hang", "wait", "{}"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        err.contains("timed out after 1s") || out.contains("timed out after 1s"),
        "{out}{err}"
    );
    let o = run(home.path(), w.path(), &["--json", "sessions", "show", "s1"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let entries = v["journal"]["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["tool"].as_str().is_some_and(|t| t.contains("wait"))
                && e["state"] != "success"),
        "{v}"
    );
}

#[test]
fn a_call_interrupted_by_int_or_term_is_journaled_naming_the_signal() {
    if !crate::support::have("python3") {
        crate::support::skip_or_fail("python3 is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("wsbench.toml"), "").unwrap();
    let script = home.path().join("hang.py");
    std::fs::write(&script, HANGING_SERVER).unwrap();
    let marker = home.path().join("called");
    let o = run(
        home.path(),
        w.path(),
        &[
            "mcp",
            "add",
            "hang",
            "--",
            "python3",
            script.to_str().unwrap(),
            marker.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let _ = std::fs::remove_file(&marker);
        let child = cli::wsbench_cmd(home.path())
            .arg("--config")
            .arg(home.path().join("wsbench.toml"))
            .arg("--workdir")
            .arg(w.path())
            .args(["--session", "s1", "mcp", "call", "hang", "wait", "{}"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The server saw the call: it is in flight.
        let t0 = std::time::Instant::now();
        while !marker.exists() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(120),
                "the call never reached the server"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(128 + sig), "{name}: {err}");
        assert!(err.contains(&format!("interrupted by {name}")), "{err}");
    }
    let o = run(home.path(), w.path(), &["--json", "sessions", "show", "s1"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let entries = v["journal"]["entries"].as_array().unwrap();
    for name in ["SIGINT", "SIGTERM"] {
        assert!(
            entries.iter().any(|e| e["state"] == "interrupted"
                && e["error"]
                    .as_str()
                    .is_some_and(|t| t.contains(&format!("interrupted by {name}")))),
            "{name}: {v}"
        );
    }
}
