//! `wsbench mcp serve` as a child process, driven line by line over its
//! stdin and stdout, with the MCP handshake done.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::cli;

/// A running `mcp serve` on the local workspace `workdir`.
pub struct Served {
    /// The process (killed when dropped).
    pub child: Child,
    /// Its stdin: one JSON-RPC message per line.
    pub stdin: ChildStdin,
    /// Its stdout, line by line.
    pub lines: Lines<BufReader<ChildStdout>>,
}

impl Served {
    /// Starts the server with `home` as its XDG home and answers the
    /// handshake (`initialize` with id 1, then `initialized`).
    pub async fn start(home: &Path, workdir: &Path) -> Served {
        let mut cmd = cli::wsbench_tokio_cmd(home);
        cmd.arg("--workdir").arg(workdir);
        Self::start_cmd(cmd).await
    }

    /// Starts `cmd` (the binary with its global options and environment
    /// set, `mcp serve` not yet added) and answers the handshake.
    pub async fn start_cmd(mut cmd: tokio::process::Command) -> Served {
        let mut child = cmd
            .args(["mcp", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = Served {
            child,
            stdin,
            lines,
        };
        s.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .await;
        let init: Value =
            serde_json::from_str(&s.lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(init["id"], 1, "{init}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        s
    }

    /// Sends one message.
    pub async fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next `n` answers (messages with an id), in arrival order.
    pub async fn answers(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        while out.len() < n {
            let line = self
                .lines
                .next_line()
                .await
                .unwrap()
                .expect("the server closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                out.push(v);
            }
        }
        out
    }

    /// Closes stdin and waits for the server to end.
    pub async fn finish(self) {
        let Served {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = child.wait().await;
    }
}
