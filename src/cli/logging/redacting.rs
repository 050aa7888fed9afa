//! The one rule every log line passes before it reaches stderr or the log
//! file (issue 14 point 4): each formatted record is cleaned of the
//! values wsbench sent and of the secret shapes
//! ([`redact_known`](crate::engine::mcp::redact::redact_known)), then cut
//! to [`MAX_RECORD_BYTES`] with a note of how many bytes were dropped.
//! A library's line (rmcp's transport worker prints a server's whole
//! error body, echoed request headers included) gets the same treatment
//! as wsbench's own.
//!
//! How: [`Redacting`] wraps a `MakeWriter`; the writer it makes collects
//! one record (tracing-subscriber's fmt layer makes one writer per event
//! and writes the formatted event into it) and writes the cleaned record
//! in one `write_all` when dropped. Limit: at most [`MAX_BUFFERED_BYTES`]
//! of a record are kept to be cleaned; a secret straddling that cut is
//! dropped with the rest, never printed.

use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

use crate::engine::mcp::redact::redact_known;

/// Most bytes of one log record written (the text before the note of
/// what was cut): 4 KiB, two of the 2 KiB error bodies wsbench keeps.
pub const MAX_RECORD_BYTES: usize = 4096;

/// Most bytes of one record held for cleaning; the rest is counted and
/// dropped as it arrives, so a huge record costs no more memory.
pub const MAX_BUFFERED_BYTES: usize = 64 * 1024;

/// A `MakeWriter` whose writers clean and bound each record (module doc).
pub struct Redacting<M> {
    inner: M,
    ansi: bool,
}

impl<M> Redacting<M> {
    /// Wraps `inner`; `ansi` says the records carry colour escapes (a cut
    /// then never leaves half an escape and resets the colour).
    pub fn new(inner: M, ansi: bool) -> Self {
        Redacting { inner, ansi }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Redacting<M> {
    type Writer = RecordWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RecordWriter::new(self.inner.make_writer(), self.ansi)
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        RecordWriter::new(self.inner.make_writer_for(meta), self.ansi)
    }
}

/// Collects one record; writes it cleaned when dropped.
pub struct RecordWriter<W: Write> {
    inner: W,
    ansi: bool,
    buf: Vec<u8>,
    /// Bytes that arrived after [`MAX_BUFFERED_BYTES`].
    overflow: usize,
}

impl<W: Write> RecordWriter<W> {
    fn new(inner: W, ansi: bool) -> Self {
        RecordWriter {
            inner,
            ansi,
            buf: Vec::new(),
            overflow: 0,
        }
    }
}

impl<W: Write> Write for RecordWriter<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = MAX_BUFFERED_BYTES.saturating_sub(self.buf.len());
        let kept = room.min(data.len());
        self.buf.extend_from_slice(&data[..kept]);
        self.overflow += data.len() - kept;
        Ok(data.len())
    }

    /// Nothing to do before the record is complete (written on drop).
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for RecordWriter<W> {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let out = clean_record(&self.buf, self.overflow, self.ansi);
        // A log line that cannot be written has nowhere to be reported.
        let _ = self.inner.write_all(out.as_bytes());
        let _ = self.inner.flush();
    }
}

/// One record cleaned: secrets replaced, at most [`MAX_RECORD_BYTES`] of
/// text kept, `… (N bytes dropped)` when cut (`overflow` bytes were
/// already dropped while buffering), ending in one newline when the
/// record did or overflowed (its end, a newline, was dropped).
pub fn clean_record(raw: &[u8], overflow: usize, ansi: bool) -> String {
    let text = String::from_utf8_lossy(raw);
    // A record's end was among the dropped bytes when it overflowed.
    let newline = text.ends_with('\n') || overflow > 0;
    let body = redact_known(text.trim_end_matches('\n'));
    let mut head = crate::backend::text::head_bytes(&body, MAX_RECORD_BYTES);
    if ansi && head.len() < body.len() {
        head = without_open_escape(head);
    }
    let dropped = body.len() - head.len() + overflow;
    let mut out = String::with_capacity(head.len() + 48);
    out.push_str(head);
    if dropped > 0 {
        if ansi {
            out.push_str("\x1b[0m");
        }
        out.push_str(&format!("… ({dropped} bytes dropped)"));
    }
    if newline {
        out.push('\n');
    }
    out
}

/// `s` without a trailing escape sequence cut before its final letter.
fn without_open_escape(s: &str) -> &str {
    match s.rfind('\x1b') {
        Some(i) if !s[i + 1..].bytes().skip(1).any(|b| b.is_ascii_alphabetic()) => &s[..i],
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::mcp::redact::remember_sent;

    #[test]
    fn a_record_is_cleaned_and_bounded_with_a_note() {
        remember_sent(["plainsecret-987-xyz"]);
        let mut raw = b"ERROR rmcp::transport::worker: worker quit: HTTP 401 x-custom: plainsecret-987-xyz authorization: Bearer tok-SECRET-abc ".to_vec();
        raw.extend(std::iter::repeat_n(b'x', 5000));
        raw.push(b'\n');
        let out = clean_record(&raw, 0, false);
        assert!(!out.contains("plainsecret-987-xyz"), "{out}");
        assert!(!out.contains("tok-SECRET-abc"), "{out}");
        assert!(out.contains("x-custom: [redacted]"), "{out}");
        assert!(out.len() <= MAX_RECORD_BYTES + 40, "{}", out.len());
        assert!(out.ends_with(" bytes dropped)\n"), "{out}");
        let short = clean_record(b"INFO fine\n", 0, false);
        assert_eq!(short, "INFO fine\n");
    }

    #[test]
    fn the_writer_cleans_what_the_fmt_layer_writes() {
        remember_sent(["sent-header-value-42"]);
        let mut sink = Vec::new();
        {
            let mut w = RecordWriter::new(&mut sink, false);
            w.write_all(b"WARN x: header sent-header").unwrap();
            w.write_all(b"-value-42 echoed\n").unwrap();
        }
        assert_eq!(
            String::from_utf8(sink).unwrap(),
            "WARN x: header [redacted] echoed\n"
        );
    }

    #[test]
    fn overflow_is_counted_and_a_cut_escape_is_closed() {
        let mut sink = Vec::new();
        {
            let mut w = RecordWriter::new(&mut sink, true);
            let big = vec![b'y'; MAX_BUFFERED_BYTES + 10];
            w.write_all(&big).unwrap();
        }
        let out = String::from_utf8(sink).unwrap();
        let want = MAX_BUFFERED_BYTES + 10 - MAX_RECORD_BYTES;
        // The record's newline was in the dropped tail: it is kept.
        assert!(out.ends_with(&format!("({want} bytes dropped)\n")), "{out}");
        let mut s = "a".repeat(MAX_RECORD_BYTES - 3);
        s.push_str("\x1b[31mred");
        let out = clean_record(s.as_bytes(), 0, true);
        assert!(!out.contains("\x1b[3…"), "{out:?}");
        assert!(out.contains("\x1b[0m… ("), "{out:?}");
    }
}
