//! execd's command event stream: JSON objects split out of the byte
//! stream ([`SseReader`]), how a command ended, and output lines as bytes.

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use super::SERVICE;
use crate::backend::http;
use crate::backend::{BackendError, BackendResult};

/// Splits an execd event stream into JSON events. execd writes bare JSON
/// objects each followed by a blank line; standard SSE (`data:` lines)
/// is accepted too. Bytes are buffered until a frame is complete, so a
/// chunk boundary inside a UTF-8 character is harmless.
#[derive(Debug, Default)]
pub(crate) struct SseReader {
    buf: BytesMut,
}

impl SseReader {
    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete event, if any; frames with no JSON (comments,
    /// keep-alive blank frames) are skipped.
    ///
    /// Errors: a frame that is not JSON.
    pub(crate) fn next_event(&mut self) -> BackendResult<Option<Value>> {
        loop {
            let Some(end) = find_frame_end(&self.buf) else {
                return Ok(None);
            };
            let frame = self.buf.split_to(end.0).freeze();
            let _ = self.buf.split_to(end.1);
            if let Some(v) = parse_frame(&frame)? {
                return Ok(Some(v));
            }
        }
    }

    /// Parses what is left when the stream ends (a last frame without the
    /// blank line).
    ///
    /// Errors: a trailing frame that is not JSON.
    pub fn finish(&mut self) -> BackendResult<Option<Value>> {
        let rest = self.buf.split().freeze();
        parse_frame(&rest)
    }
}

/// `(frame length, separator length)` of the first frame ended by a blank
/// line (`\n\n` or `\r\n\r\n`).
pub(super) fn find_frame_end(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\n' {
            if b.get(i + 1) == Some(&b'\n') {
                return Some((i, 2));
            }
            if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                return Some((i, 3));
            }
        }
        i += 1;
    }
    None
}

pub(super) fn parse_frame(frame: &[u8]) -> BackendResult<Option<Value>> {
    let text = String::from_utf8_lossy(frame);
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let payload = if text.starts_with('{') {
        text.to_string()
    } else {
        // Standard SSE: join the `data:` lines; ignore `event:`, `id:`,
        // `retry:` and comments.
        let data: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        if data.is_empty() {
            return Ok(None);
        }
        data.join("\n")
    };
    serde_json::from_str(&payload)
        .map(Some)
        .map_err(|e| BackendError::Remote {
            service: SERVICE,
            status: None,
            code: Some("bad_stream".into()),
            message: format!("event is not JSON ({e}): {}", http::snippet(&payload)),
        })
}

/// How a command ended, per its last event.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ending {
    Exit(i32),
    /// `error.evalue` was not a number: the command could not start.
    NotStarted(String),
}

/// Bytes for one output event: the line with its `\n` back (an empty line
/// arrives as `"\n"` already).
pub(super) fn line_bytes(text: &str) -> Bytes {
    if text == "\n" || text.ends_with('\n') {
        Bytes::copy_from_slice(text.as_bytes())
    } else {
        Bytes::from(format!("{text}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_json_and_sse_frames_split_anywhere() {
        let wire = "{\"type\":\"init\",\"text\":\"c1\"}\n\n{\"type\":\"stdout\",\"text\":\"h\u{e9}\"}\n\n: comment\n\nevent: x\ndata: {\"type\":\"stderr\",\"text\":\"e\"}\n\n{\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"3\"}}\n\n";
        let bytes = wire.as_bytes();
        for cut in 0..bytes.len() {
            let mut r = SseReader::default();
            let mut evs = Vec::new();
            for part in [&bytes[..cut], &bytes[cut..]] {
                r.push(part);
                while let Some(v) = r.next_event().unwrap() {
                    evs.push(v);
                }
            }
            assert_eq!(evs.len(), 4, "cut at {cut}");
            assert_eq!(evs[1]["text"], "h\u{e9}");
            assert_eq!(evs[2]["type"], "stderr");
            assert_eq!(evs[3]["error"]["evalue"], "3");
        }
    }

    #[test]
    fn lines_get_their_newline_back() {
        assert_eq!(&line_bytes("a")[..], b"a\n");
        assert_eq!(&line_bytes("\n")[..], b"\n");
    }
}
