//! The followed log of a toolbox session command, split back into stdout
//! and stderr ([`LogDemux`]).

use bytes::Bytes;

use crate::backend::StreamKind;

/// Splits the followed log into stdout and stderr: data after
/// `\x01\x01\x01` is stdout, after `\x02\x02\x02` stderr. A tag may be
/// split across frames, so up to two trailing tag bytes wait for the next
/// frame.
#[derive(Debug)]
pub(crate) struct LogDemux {
    current: StreamKind,
    held: Vec<u8>,
}

impl Default for LogDemux {
    fn default() -> Self {
        LogDemux {
            current: StreamKind::Stdout,
            held: Vec::new(),
        }
    }
}

const STDOUT_TAG: &[u8] = b"\x01\x01\x01";
const STDERR_TAG: &[u8] = b"\x02\x02\x02";

impl LogDemux {
    /// Splits one frame into `(stream, bytes)` pieces.
    pub fn push(&mut self, frame: &[u8]) -> Vec<(StreamKind, Bytes)> {
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(frame);
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < data.len() {
            let tag = if data[i..].starts_with(STDOUT_TAG) {
                Some(StreamKind::Stdout)
            } else if data[i..].starts_with(STDERR_TAG) {
                Some(StreamKind::Stderr)
            } else {
                None
            };
            match tag {
                Some(kind) => {
                    if i > start {
                        out.push((self.current, Bytes::copy_from_slice(&data[start..i])));
                    }
                    self.current = kind;
                    i += 3;
                    start = i;
                }
                None => i += 1,
            }
        }
        // Hold back a possible partial tag at the end.
        let mut keep = 0;
        for n in (1..=2).rev() {
            if data.len() - start >= n {
                let tail = &data[data.len() - n..];
                if tail.iter().all(|b| *b == 1) || tail.iter().all(|b| *b == 2) {
                    keep = n;
                    break;
                }
            }
        }
        let end = data.len() - keep;
        if end > start {
            out.push((self.current, Bytes::copy_from_slice(&data[start..end])));
        }
        self.held = data[end..].to_vec();
        out
    }

    /// Whatever was held back, when the stream ends.
    pub fn finish(&mut self) -> Option<(StreamKind, Bytes)> {
        let held = std::mem::take(&mut self.held);
        (!held.is_empty()).then(|| (self.current, Bytes::from(held)))
    }
}

/// Counts delivered bytes per stream, to fill in from the stored log when
/// the live stream is cut.
#[derive(Default)]
pub(super) struct Delivered {
    pub(super) stdout: usize,
    pub(super) stderr: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demux_handles_tags_split_across_frames() {
        let wire = b"\x01\x01\x01out \xc3\xa9\x02\x02\x02err\x01\x01\x01more";
        for a in 0..wire.len() {
            for b in a..wire.len() {
                let mut d = LogDemux::default();
                let mut out = Vec::new();
                let mut err = Vec::new();
                for frame in [&wire[..a], &wire[a..b], &wire[b..]] {
                    for (k, data) in d.push(frame) {
                        match k {
                            StreamKind::Stdout => out.extend_from_slice(&data),
                            StreamKind::Stderr => err.extend_from_slice(&data),
                        }
                    }
                }
                assert!(d.finish().is_none());
                assert_eq!(out, "out émore".as_bytes(), "cut at {a},{b}");
                assert_eq!(err, b"err", "cut at {a},{b}");
            }
        }
    }
}
