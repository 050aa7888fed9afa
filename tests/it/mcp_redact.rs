//! Issue 14 point 4: an MCP HTTP server that echoes the request (with
//! its `Authorization: Bearer …` and API-key headers) in a 4xx/5xx body
//! never gets those values printed: `wsbench mcp add` fails with the
//! server's answer in its error, redacted and bounded, on both HTTP
//! transports (streamable HTTP and SSE).

use crate::support::cli;

use std::io::{Read, Write};
use std::net::TcpListener;

const TOKEN: &str = "tok-secret-ABCDEFGH1234";
const KEY: &str = "custom-key-value-98765";

/// A server on 127.0.0.1 that answers every request with `status` and
/// the request's head (and a long tail, to check the bound) as body.
fn echo_server(status: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let mut body = b"you sent:\n".to_vec();
            body.extend_from_slice(&head);
            body.extend(std::iter::repeat_n(b'x', 100_000));
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    port
}

#[test]
fn http_error_bodies_that_echo_the_request_are_redacted_and_bounded() {
    for (status, path) in [
        ("401 Unauthorized", "mcp"),
        ("500 Internal Server Error", "mcp"),
        ("403 Forbidden", "sse"),
    ] {
        let port = echo_server(status);
        let home = tempfile::tempdir().unwrap();
        let w = tempfile::tempdir().unwrap();
        let url = format!("http://127.0.0.1:{port}/{path}");
        let o = cli::wsbench_cmd(home.path())
            .env("ECHO_TOKEN", TOKEN)
            .arg("--workdir")
            .arg(w.path())
            .args(["mcp", "add", "echo", "--url", &url])
            .args(["--header", "Authorization=Bearer ${ECHO_TOKEN}"])
            .args(["--header", &format!("X-Api-Key={KEY}")])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!("{status} /{path}: {err}");
        assert_ne!(o.status.code(), Some(0), "{out}{err}");
        for text in [&out, &err] {
            assert!(
                !text.contains(TOKEN) && !text.contains(KEY),
                "{status}: secret printed: {text}"
            );
            assert!(
                text.len() < 16 * 1024,
                "{status}: unbounded: {} bytes",
                text.len()
            );
        }
        // The journal and .mcp hold no secret either.
        let hits = crate::support::leak::files_holding(w.path(), TOKEN.as_bytes());
        assert!(hits.is_empty(), "{hits:?}");
    }
}

/// The same server, with every log line shown: neither stderr
/// (`WSBENCH_LOG=debug`) nor the log file holds a header value wsbench
/// sent (rmcp's transport worker logs the whole error body at ERROR),
/// and no log line is longer than the record bound plus its note.
#[test]
fn log_lines_on_stderr_and_in_the_log_file_hold_no_sent_secret() {
    let port = echo_server("401 Unauthorized");
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let env_token = "envtok-SECRET-123";
    let plain = "plainsecret-987";
    let o = cli::wsbench_cmd(home.path())
        .env("MYTOK", env_token)
        .env("WSBENCH_LOG", "debug")
        .arg("--workdir")
        .arg(w.path())
        .args(["mcp", "add", "h", "--url", &url])
        .args(["--header", &format!("Authorization=Bearer {TOKEN}")])
        .args(["--header", &format!("X-Custom={plain}")])
        .args(["--header", "X-Env=${MYTOK}"])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    let log_path = home.path().join("data/wsbench/logs/wsbench.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_else(|e| panic!("{log_path:?}: {e}"));
    assert!(
        log.contains("worker") || err.contains("worker"),
        "the transport's error line is expected in the log: {log}"
    );
    for (place, text) in [("stderr", &*err), ("log file", log.as_str())] {
        for secret in [TOKEN, env_token, plain] {
            assert!(
                !text.contains(secret),
                "{place} holds {secret}: {}",
                text.lines().find(|l| l.contains(secret)).unwrap_or("")
            );
        }
        for line in text.lines() {
            assert!(
                line.len() <= 4096 + 64,
                "{place}: a {} byte line: {}",
                line.len(),
                line.chars().take(200).collect::<String>()
            );
        }
    }
    assert!(
        log.contains("bytes dropped)"),
        "the long error line is cut with a note: {log}"
    );
}
