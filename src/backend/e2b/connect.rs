//! envd's Connect-RPC stream, in the JSON codec: length-prefixed
//! envelopes ([`envelope`], [`EnvelopeReader`]) and the events of a
//! `process.Process/Start` stream ([`EventStream`]), with the exit status
//! they report.

use std::pin::Pin;
use std::time::Duration;

use base64::Engine;
use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use serde_json::Value;

use super::SERVICE;
use crate::backend::{BackendError, BackendResult, StreamKind};

/// A Connect envelope: flag byte, 4-byte big-endian length, payload.
pub fn envelope(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(flag);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a byte stream into Connect envelopes, whatever the chunking.
#[derive(Debug, Default)]
pub(crate) struct EnvelopeReader {
    buf: BytesMut,
}

/// Largest envelope accepted (a sane bound; envd's chunks are small).
const MAX_ENVELOPE: usize = 64 << 20;

impl EnvelopeReader {
    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete envelope as `(flag, payload)`, if any.
    ///
    /// Errors: a length over 64 MiB (a corrupt stream).
    pub(crate) fn next_envelope(&mut self) -> BackendResult<Option<(u8, Bytes)>> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_ENVELOPE {
            return Err(BackendError::Remote {
                service: SERVICE,
                status: None,
                code: Some("bad_stream".into()),
                message: format!("envelope of {len} bytes"),
            });
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        let flag = self.buf[0];
        self.buf.advance(5);
        Ok(Some((flag, self.buf.split_to(len).freeze())))
    }
}

/// What one Start-stream envelope said.
#[derive(Debug, PartialEq)]
pub(super) enum Event {
    Start(u32),
    Data(StreamKind, Bytes),
    KeepAlive,
    End {
        exit_code: i32,
        exited: bool,
        status: String,
        error: Option<String>,
    },
    /// End of stream; `Some((code, message))` for a Connect error.
    Eos(Option<(String, String)>),
}

pub(super) fn bad(message: String) -> BackendError {
    BackendError::Remote {
        service: SERVICE,
        status: None,
        code: Some("bad_stream".into()),
        message,
    }
}

pub(super) fn decode_event(flag: u8, payload: &[u8]) -> BackendResult<Event> {
    let v: Value =
        serde_json::from_slice(payload).map_err(|e| bad(format!("envelope is not JSON ({e})")))?;
    if flag & 0x02 != 0 {
        let err = v.get("error").map(|e| {
            (
                e.get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string(),
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        });
        return Ok(Event::Eos(err));
    }
    let ev = v
        .get("event")
        .ok_or_else(|| bad(format!("no event in {v}")))?;
    if let Some(s) = ev.get("start") {
        let pid = s.get("pid").and_then(Value::as_u64).unwrap_or(0) as u32;
        return Ok(Event::Start(pid));
    }
    if let Some(d) = ev.get("data") {
        let b64 = base64::engine::general_purpose::STANDARD;
        for (key, kind) in [
            ("stdout", StreamKind::Stdout),
            ("stderr", StreamKind::Stderr),
        ] {
            if let Some(s) = d.get(key).and_then(Value::as_str) {
                let bytes = b64
                    .decode(s)
                    .map_err(|e| bad(format!("{key} data is not base64 ({e})")))?;
                return Ok(Event::Data(kind, Bytes::from(bytes)));
            }
        }
        // A pty chunk or an empty data event: nothing to deliver.
        return Ok(Event::KeepAlive);
    }
    if let Some(e) = ev.get("end") {
        // proto3 JSON leaves zero out: no exitCode means 0.
        let exit_code = e.get("exitCode").and_then(Value::as_i64).unwrap_or(0) as i32;
        return Ok(Event::End {
            exit_code,
            exited: e.get("exited").and_then(Value::as_bool).unwrap_or(false),
            status: e
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            error: e.get("error").and_then(Value::as_str).map(str::to_string),
        });
    }
    if ev.get("keepalive").is_some() {
        return Ok(Event::KeepAlive);
    }
    Err(bad(format!("unknown event {ev}")))
}

/// Exit code and signal from an end event: envd reports a signal death as
/// exit code -1 with status `signal: killed`.
pub(super) fn exit_of(exit_code: i32, status: &str) -> (Option<i32>, Option<i32>) {
    if let Some(sig) = status.strip_prefix("signal: ") {
        let n = match sig.trim() {
            "killed" => Some(9),
            "terminated" => Some(15),
            "interrupt" => Some(2),
            "hangup" => Some(1),
            "aborted" => Some(6),
            "segmentation fault" => Some(11),
            "broken pipe" => Some(13),
            _ => None,
        };
        if let Some(n) = n {
            return (Some(128 + n), Some(n));
        }
    }
    (Some(exit_code), None)
}

/// Reads Start-stream events, with an idle limit between frames.
pub(super) struct EventStream {
    body: Pin<Box<dyn futures::Stream<Item = reqwest::Result<Bytes>> + Send>>,
    reader: EnvelopeReader,
    idle: Duration,
}

impl EventStream {
    pub(super) fn new(resp: reqwest::Response, idle: Duration) -> Self {
        EventStream {
            body: Box::pin(resp.bytes_stream()),
            reader: EnvelopeReader::default(),
            idle,
        }
    }

    /// The next event; `Ok(None)` when the connection ended without an
    /// end-of-stream envelope (a cut stream).
    pub(super) async fn next(&mut self) -> BackendResult<Option<Event>> {
        loop {
            if let Some((flag, payload)) = self.reader.next_envelope()? {
                return decode_event(flag, &payload).map(Some);
            }
            match tokio::time::timeout(self.idle, self.body.next()).await {
                Err(_) => {
                    return Err(BackendError::Remote {
                        service: SERVICE,
                        status: None,
                        code: Some("stream_idle".into()),
                        message: format!(
                            "no data or keep-alive from envd for {}s",
                            self.idle.as_secs()
                        ),
                    });
                }
                Ok(None) | Ok(Some(Err(_))) => return Ok(None),
                Ok(Some(Ok(b))) => self.reader.push(&b),
            }
        }
    }
}

pub(super) fn stream_cut(pid: Option<u32>) -> BackendError {
    BackendError::Remote {
        service: SERVICE,
        status: None,
        code: Some("stream_interrupted".into()),
        message: match pid {
            Some(p) => format!(
                "the command stream from envd ended before the command finished; pid {p} was killed"
            ),
            None => "the command stream from envd ended before the command started".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(flag: u8, v: Value) -> Vec<u8> {
        envelope(flag, &serde_json::to_vec(&v).unwrap())
    }

    #[test]
    fn envelopes_split_anywhere_reassemble() {
        let mut all = frame(0, json!({"event": {"start": {"pid": 7}}}));
        all.extend(frame(0, json!({"event": {"data": {"stdout": "w6k="}}})));
        all.extend(frame(
            0,
            json!({"event": {"end": {"exited": true, "status": "exit status 0"}}}),
        ));
        all.extend(frame(2, json!({})));
        for cut in 0..all.len() {
            let mut r = EnvelopeReader::default();
            let mut events = Vec::new();
            for part in [&all[..cut], &all[cut..]] {
                r.push(part);
                while let Some((f, p)) = r.next_envelope().unwrap() {
                    events.push(decode_event(f, &p).unwrap());
                }
            }
            assert_eq!(events.len(), 4, "cut at {cut}");
            assert_eq!(events[0], Event::Start(7));
            assert_eq!(
                events[1],
                Event::Data(StreamKind::Stdout, Bytes::from_static("é".as_bytes()))
            );
            // No exitCode key: proto3 JSON's zero, exit 0.
            assert!(matches!(events[2], Event::End { exit_code: 0, .. }));
            assert_eq!(events[3], Event::Eos(None));
        }
    }

    #[test]
    fn end_of_stream_errors_and_signals() {
        let f = frame(
            2,
            json!({"error": {"code": "deadline_exceeded", "message": "late"}}),
        );
        let mut r = EnvelopeReader::default();
        r.push(&f);
        let (flag, p) = r.next_envelope().unwrap().unwrap();
        assert_eq!(
            decode_event(flag, &p).unwrap(),
            Event::Eos(Some(("deadline_exceeded".into(), "late".into())))
        );
        assert_eq!(exit_of(-1, "signal: killed"), (Some(137), Some(9)));
        assert_eq!(exit_of(3, "exit status 3"), (Some(3), None));
    }
}
