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
