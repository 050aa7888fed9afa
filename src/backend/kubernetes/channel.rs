//! The exec websocket's channel protocol (`v4`/`v5.channel.k8s.io`):
//! every binary frame starts with its channel byte; output arrives on 1
//! and 2, the command's end as a `metav1.Status` on 3, a terminal's size
//! goes out on 4, and `v5` closes stdin with `[255, 0]`.

use futures::StreamExt;
use tungstenite::Message;

use crate::backend::{OutputChunk, OutputSink, StreamKind};

/// Channel of stdin frames.
pub(super) const STDIN: u8 = 0;
/// Channel of stdout frames.
pub(super) const STDOUT: u8 = 1;
/// Channel of stderr frames.
pub(super) const STDERR: u8 = 2;
/// Channel of the status frame that ends a command.
pub(super) const STATUS: u8 = 3;
/// Channel of terminal resize frames (client to server, JSON
/// `{"Width":…,"Height":…}`), for an exec with `tty=true`.
pub(super) const RESIZE: u8 = 4;
/// `v5` close signal: `[CLOSE, STDIN]` closes stdin.
pub(super) const CLOSE: u8 = 255;

/// The end of a command as the status channel reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ended {
    /// Status frame: exit code.
    Exit(i32),
    /// Status frame with a failure that is not an exit code (the runtime
    /// could not start the command).
    Failure(String),
    /// The connection closed cleanly but no status came.
    NoStatus,
    /// The connection broke.
    Dropped(String),
}

/// Parses a `metav1.Status` from channel 3.
pub(super) fn parse_status(json: &[u8]) -> Ended {
    let v: serde_json::Value = match serde_json::from_slice(json) {
        Ok(v) => v,
        Err(e) => return Ended::Failure(format!("unreadable exec status: {e}")),
    };
    if v["status"] == "Success" {
        return Ended::Exit(0);
    }
    if v["reason"] == "NonZeroExitCode"
        && let Some(causes) = v["details"]["causes"].as_array()
    {
        for c in causes {
            if c["reason"] == "ExitCode"
                && let Some(code) = c["message"].as_str().and_then(|m| m.trim().parse().ok())
            {
                return Ended::Exit(code);
            }
        }
    }
    Ended::Failure(
        v["message"]
            .as_str()
            .unwrap_or("exec failed without a message")
            .to_string(),
    )
}

/// Reads frames until the status arrives, forwarding output to `sink`.
pub(super) async fn read_until_status<S>(rx: &mut S, sink: Option<&OutputSink>) -> Ended
where
    S: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    while let Some(msg) = rx.next().await {
        let data = match msg {
            Ok(Message::Binary(b)) => b,
            Ok(Message::Close(_)) => return Ended::NoStatus,
            Ok(_) => continue,
            Err(e) => return Ended::Dropped(e.to_string()),
        };
        if data.len() < 2 {
            // The empty "connected" frame, or a bare channel byte.
            continue;
        }
        let stream = match data[0] {
            STDOUT => StreamKind::Stdout,
            STDERR => StreamKind::Stderr,
            STATUS => return parse_status(&data[1..]),
            _ => continue,
        };
        if let Some(s) = sink {
            let _ = s
                .send(OutputChunk {
                    stream,
                    data: data.slice(1..),
                })
                .await;
        }
    }
    Ended::NoStatus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_like_the_kubelet_sends_them() {
        assert_eq!(
            parse_status(br#"{"metadata":{},"status":"Success"}"#),
            Ended::Exit(0)
        );
        let n = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        assert_eq!(parse_status(n), Ended::Exit(3));
        let e = br#"{"metadata":{},"status":"Failure","message":"boom","reason":"InternalError","code":500}"#;
        assert_eq!(parse_status(e), Ended::Failure("boom".into()));
        assert!(matches!(parse_status(b"{"), Ended::Failure(_)));
    }
}
