//! The request-size bound in front of `wsbench mcp serve`'s stdin
//! (issue 14 point 12).
//!
//! rmcp's stdio transport drops a line longer than its limit
//! ([`MAX_REQUEST_BYTES`], 16 MiB with the newline) with a log line and
//! nothing else, so the client waits forever for the answer. Lines pass
//! through [`bounded_lines`] first: one within the limit is handed on
//! unchanged; a longer one is never buffered past the limit, and is
//! replaced by a small request of method [`TOO_LARGE_METHOD`] with the
//! same JSON-RPC `id` (found by a streaming scan of the top-level object),
//! which the server answers with a "request too large" error naming the
//! limit. An oversized line without an `id` (a notification, or not JSON)
//! has nobody to answer and is dropped with a warning. Serving goes on
//! either way.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader, DuplexStream};

/// Longest request line served, newline included: rmcp's own stdio
/// limit, so every line this layer passes is one rmcp accepts.
pub const MAX_REQUEST_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The method of the stand-in request for an oversized one; its params
/// are `{"bytes": <line length>, "limit": MAX_REQUEST_BYTES}`.
pub const TOO_LARGE_METHOD: &str = "wsbench/request_too_large";

/// Longest `id` value kept by the scan, in bytes.
const MAX_ID_BYTES: usize = 256;

/// Reads `input` line by line and returns the stream rmcp should read:
/// lines up to `max` bytes (newline included) unchanged, longer ones
/// replaced as the module doc says. Ends when `input` ends or fails.
pub fn bounded_lines<R>(input: R, max: usize) -> DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (mut tx, rx) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let mut r = BufReader::with_capacity(64 * 1024, input);
        let mut line: Vec<u8> = Vec::new();
        // `Some` once the current line went over `max`.
        let mut over: Option<(IdScan, usize)> = None;
        loop {
            let (take, end) = {
                let Ok(buf) = r.fill_buf().await else { break };
                if buf.is_empty() {
                    break;
                }
                let nl = buf.iter().position(|b| *b == b'\n');
                let take = nl.map_or(buf.len(), |i| i + 1);
                let chunk = &buf[..take];
                match &mut over {
                    Some((scan, total)) => {
                        scan.feed(chunk);
                        *total += take;
                    }
                    None if line.len() + take > max => {
                        let mut scan = IdScan::default();
                        scan.feed(&line);
                        scan.feed(chunk);
                        over = Some((scan, line.len() + take));
                        line = Vec::new();
                    }
                    None => line.extend_from_slice(chunk),
                }
                (take, nl.is_some())
            };
            r.consume(take);
            if !end {
                continue;
            }
            let out = match over.take() {
                None => std::mem::take(&mut line),
                Some((scan, total)) => match scan.id() {
                    Some(id) => {
                        let mut v = serde_json::to_vec(&json!({
                            "jsonrpc": "2.0",
                            "id": id,
                            "method": TOO_LARGE_METHOD,
                            "params": {"bytes": total, "limit": max},
                        }))
                        .expect("a JSON value serialises");
                        v.push(b'\n');
                        v
                    }
                    None => {
                        tracing::warn!(
                            bytes = total,
                            limit = max,
                            "dropped an oversized MCP message without an id (nothing to answer)"
                        );
                        continue;
                    }
                },
            };
            if tx.write_all(&out).await.is_err() {
                break;
            }
        }
        let _ = tx.shutdown().await;
    });
    rx
}

/// A streaming scan for the value of the top-level `"id"` key of a JSON
/// object, over any number of chunks, in constant memory.
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_str: bool,
    esc: bool,
    /// At depth 1, the next string is a key.
    expect_key: bool,
    /// The key being read (first bytes only).
    key: Option<Vec<u8>>,
    /// The last key read was `id`.
    id_key: bool,
    /// The bytes of the `id` value being read.
    capture: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
}

impl IdScan {
    fn feed(&mut self, chunk: &[u8]) {
        if self.id.is_some() {
            return;
        }
        for &b in chunk {
            if let Some(cap) = &mut self.capture {
                if !self.in_str && self.depth == 1 && (b == b',' || b == b'}') {
                    self.id = self.capture.take();
                    return;
                }
                if cap.len() < MAX_ID_BYTES {
                    cap.push(b);
                }
            }
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if b == b'\\' {
                    self.esc = true;
                } else if b == b'"' {
                    self.in_str = false;
                    if let Some(k) = self.key.take() {
                        self.id_key = k == b"id";
                    }
                } else if let Some(k) = &mut self.key
                    && k.len() < 3
                {
                    // Three bytes tell `id` from every longer key.
                    k.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_str = true;
                    if self.depth == 1 && self.expect_key {
                        self.key = Some(Vec::new());
                        self.expect_key = false;
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth == 1 {
                        self.expect_key = b == b'{';
                    }
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b':' if self.depth == 1 && std::mem::take(&mut self.id_key) => {
                    self.capture = Some(Vec::new());
                }
                b',' if self.depth == 1 => self.expect_key = true,
                _ => {}
            }
        }
    }

    /// The `id` when it was found and is a number or a string.
    fn id(&self) -> Option<Value> {
        let raw = self.id.as_deref()?;
        match serde_json::from_slice::<Value>(raw) {
            Ok(v @ (Value::Number(_) | Value::String(_))) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn scan(parts: &[&[u8]]) -> Option<Value> {
        let mut s = IdScan::default();
        for p in parts {
            s.feed(p);
        }
        s.id()
    }

    #[test]
    fn finds_the_top_level_id_anywhere_and_in_pieces() {
        assert_eq!(
            scan(&[br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#]),
            Some(json!(7))
        );
        assert_eq!(
            scan(&[
                br#"{"method":"x","params":{"id":1,"a":"\"id\":9"},"#,
                br#" "id" : "abc"}"#
            ]),
            Some(json!("abc"))
        );
        assert_eq!(scan(&[br#"{"i"#, br#"d":4"#, b"2}"]), Some(json!(42)));
        assert_eq!(scan(&[br#"{"method":"notify","params":{"id":3}}"#]), None);
        assert_eq!(scan(&[b"not json at all"]), None);
    }

    #[tokio::test]
    async fn long_lines_are_replaced_and_short_ones_pass() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "a".repeat(300)
        );
        let input = format!(
            "{{\"id\":1}}\n{big}{{\"id\":2}}\n{{\"note\":\"{}\"}}\n",
            "b".repeat(300)
        );
        let mut out = String::new();
        bounded_lines(std::io::Cursor::new(input.into_bytes()), 100)
            .read_to_string(&mut out)
            .await
            .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], "{\"id\":1}");
        let v: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(v["id"], 5);
        assert_eq!(v["method"], TOO_LARGE_METHOD);
        assert_eq!(v["params"]["limit"], 100);
        assert_eq!(v["params"]["bytes"], big.len());
        assert_eq!(lines[2], "{\"id\":2}");
    }
}
