//! envd's Connect-RPC stream, in the JSON codec: length-prefixed
//! envelopes ([`ConnectCodec`], a `tokio_util::codec` framing used for
//! every Start stream, exec and PTY alike) and the events of a
//! `process.Process/Start` stream ([`EventStream`]), with the exit status
//! they report.
//!
//! An envelope is a flag byte (bit 1: end of stream), a 4-byte big-endian
//! payload length and the payload (connectrpc.com/docs/protocol,
//! "Streaming-Request"; `docs/specs/e2b/process.proto` for the messages).

use std::pin::Pin;
use std::time::Duration;

use base64::Engine;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;
use tokio_util::codec::{Decoder, Encoder, FramedRead, LengthDelimitedCodec};
use tokio_util::io::StreamReader;

use super::SERVICE;
use crate::backend::{BackendError, BackendResult, StreamKind};

/// A Connect envelope: flag byte, 4-byte big-endian length, payload.
///
/// # Panics
/// When `payload` is over 4 GiB (it cannot be framed).
pub fn envelope(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(payload.len() + 5);
    ConnectCodec::default()
        .encode(
            Envelope {
                flag,
                payload: Bytes::copy_from_slice(payload),
            },
            &mut out,
        )
        .expect("an envelope under 4 GiB");
    out.to_vec()
}

/// One Connect envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// Flags: `0x01` compressed (never sent by envd with the JSON codec
    /// here), `0x02` end of stream.
    pub flag: u8,
    /// The message (JSON).
    pub payload: Bytes,
}

/// Largest envelope accepted (a sane bound; envd's chunks are small). A
/// longer length field is a corrupt stream: decoding fails with
/// `InvalidData` and nothing of the frame is buffered.
pub(crate) const MAX_ENVELOPE: usize = 64 << 20;

/// The Connect envelope framing as a `tokio_util` codec: decoding is a
/// [`LengthDelimitedCodec`] whose length field sits after the flag byte
/// and whose frame keeps the 5-byte head (so the flag can be read);
/// encoding writes the flag, then lets a plain 4-byte length codec write
/// the length and payload.
#[derive(Debug)]
pub(crate) struct ConnectCodec {
    decode: LengthDelimitedCodec,
    encode: LengthDelimitedCodec,
}

impl Default for ConnectCodec {
    fn default() -> Self {
        ConnectCodec {
            decode: LengthDelimitedCodec::builder()
                .length_field_offset(1)
                .length_field_type::<u32>()
                .length_adjustment(5)
                .num_skip(0)
                .max_frame_length(MAX_ENVELOPE)
                .new_codec(),
            encode: LengthDelimitedCodec::builder()
                .length_field_type::<u32>()
                .max_frame_length(u32::MAX as usize)
                .new_codec(),
        }
    }
}

impl Decoder for ConnectCodec {
    type Item = Envelope;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> std::io::Result<Option<Envelope>> {
        Ok(self.decode.decode(src)?.map(|mut frame| {
            let flag = frame[0];
            frame.advance(5);
            Envelope {
                flag,
                payload: frame.freeze(),
            }
        }))
    }
}

impl Encoder<Envelope> for ConnectCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: Envelope, dst: &mut BytesMut) -> std::io::Result<()> {
        dst.reserve(item.payload.len() + 5);
        dst.put_u8(item.flag);
        self.encode.encode(item.payload, dst)
    }
}

/// What one Start-stream envelope said.
#[derive(Debug, PartialEq)]
pub(super) enum Event {
    Start(u32),
    Data(StreamKind, Bytes),
    /// Output of a process started with a PTY (`DataEvent.pty`).
    Pty(Bytes),
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
        for key in ["stdout", "stderr", "pty"] {
            if let Some(s) = d.get(key).and_then(Value::as_str) {
                let bytes = Bytes::from(
                    b64.decode(s)
                        .map_err(|e| bad(format!("{key} data is not base64 ({e})")))?,
                );
                return Ok(match key {
                    "stdout" => Event::Data(StreamKind::Stdout, bytes),
                    "stderr" => Event::Data(StreamKind::Stderr, bytes),
                    _ => Event::Pty(bytes),
                });
            }
        }
        // An empty data event: nothing to deliver.
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

/// The body of a streaming response as bytes for the codec; a transport
/// error becomes an I/O error (read as a cut stream).
type Body =
    StreamReader<Pin<Box<dyn futures::Stream<Item = std::io::Result<Bytes>> + Send>>, Bytes>;

/// Reads Start-stream events, with an idle limit between frames.
pub(super) struct EventStream {
    frames: FramedRead<Body, ConnectCodec>,
    idle: Duration,
}

impl EventStream {
    pub(super) fn new(resp: reqwest::Response, idle: Duration) -> Self {
        let body: Pin<Box<dyn futures::Stream<Item = std::io::Result<Bytes>> + Send>> =
            Box::pin(resp.bytes_stream().map_err(std::io::Error::other));
        EventStream {
            frames: FramedRead::new(StreamReader::new(body), ConnectCodec::default()),
            idle,
        }
    }

    /// The next event; `Ok(None)` when the connection ended without an
    /// end-of-stream envelope (a cut stream, or one cut inside a frame).
    ///
    /// Errors: `bad_stream` for an envelope over [`MAX_ENVELOPE`] or one
    /// that does not decode; `stream_idle` after the idle limit without a
    /// frame.
    pub(super) async fn next(&mut self) -> BackendResult<Option<Event>> {
        match tokio::time::timeout(self.idle, self.frames.next()).await {
            Err(_) => Err(BackendError::Remote {
                service: SERVICE,
                status: None,
                code: Some("stream_idle".into()),
                message: format!(
                    "no data or keep-alive from envd for {}s",
                    self.idle.as_secs()
                ),
            }),
            Ok(Some(Ok(env))) => decode_event(env.flag, &env.payload).map(Some),
            Ok(Some(Err(e))) if e.kind() == std::io::ErrorKind::InvalidData => {
                Err(bad(format!("an envelope over {MAX_ENVELOPE} bytes ({e})")))
            }
            Ok(None) | Ok(Some(Err(_))) => Ok(None),
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

    fn decode_all(codec: &mut ConnectCodec, buf: &mut BytesMut, out: &mut Vec<Event>) {
        while let Some(env) = codec.decode(buf).unwrap() {
            out.push(decode_event(env.flag, &env.payload).unwrap());
        }
    }

    #[test]
    fn envelopes_split_anywhere_reassemble() {
        let mut all = frame(0, json!({"event": {"start": {"pid": 7}}}));
        all.extend(frame(0, json!({"event": {"data": {"stdout": "w6k="}}})));
        all.extend(frame(0, json!({"event": {"data": {"pty": "w6k="}}})));
        all.extend(frame(
            0,
            json!({"event": {"end": {"exited": true, "status": "exit status 0"}}}),
        ));
        all.extend(frame(2, json!({})));
        for cut in 0..all.len() {
            let mut codec = ConnectCodec::default();
            let mut buf = BytesMut::new();
            let mut events = Vec::new();
            for part in [&all[..cut], &all[cut..]] {
                buf.extend_from_slice(part);
                decode_all(&mut codec, &mut buf, &mut events);
            }
            assert!(buf.is_empty(), "cut at {cut}: bytes left over");
            assert_eq!(events.len(), 5, "cut at {cut}");
            assert_eq!(events[0], Event::Start(7));
            assert_eq!(
                events[1],
                Event::Data(StreamKind::Stdout, Bytes::from_static("é".as_bytes()))
            );
            assert_eq!(events[2], Event::Pty(Bytes::from_static("é".as_bytes())));
            // No exitCode key: proto3 JSON's zero, exit 0.
            assert!(matches!(events[3], Event::End { exit_code: 0, .. }));
            assert_eq!(events[4], Event::Eos(None));
        }
    }

    #[test]
    fn the_encoder_writes_what_the_decoder_reads() {
        let wire = envelope(2, b"{}");
        assert_eq!(wire, [2, 0, 0, 0, 2, b'{', b'}']);
        let mut buf = BytesMut::from(&wire[..]);
        let env = ConnectCodec::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!((env.flag, &env.payload[..]), (2, &b"{}"[..]));
    }

    #[test]
    fn an_oversized_length_is_a_corrupt_stream() {
        let mut buf = BytesMut::new();
        buf.put_u8(0);
        buf.put_u32(MAX_ENVELOPE as u32 + 1);
        let e = ConnectCodec::default().decode(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        // Exactly the limit is fine (waits for the payload).
        let mut buf = BytesMut::new();
        buf.put_u8(0);
        buf.put_u32(MAX_ENVELOPE as u32);
        assert!(ConnectCodec::default().decode(&mut buf).unwrap().is_none());
    }

    #[test]
    fn end_of_stream_errors_and_signals() {
        let f = frame(
            2,
            json!({"error": {"code": "deadline_exceeded", "message": "late"}}),
        );
        let mut buf = BytesMut::from(&f[..]);
        let env = ConnectCodec::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(
            decode_event(env.flag, &env.payload).unwrap(),
            Event::Eos(Some(("deadline_exceeded".into(), "late".into())))
        );
        assert_eq!(exit_of(-1, "signal: killed"), (Some(137), Some(9)));
        assert_eq!(exit_of(3, "exit status 3"), (Some(3), None));
    }
}
