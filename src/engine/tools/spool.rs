//! Where the Bash tool keeps one output stream while the command runs:
//! the head the model sees in memory, everything else in temp files, and
//! never more than a cap on disk (issue 16: 100 s of `yes` used to leave a
//! 2 GB tool-result file in the user's project).
//!
//! Up to `cap` bytes the spool holds the stream whole. Past it, it keeps
//! the first `cap / 2` bytes and the last `cap - cap / 2` (a ring file
//! written in place), and [`Spool::reader`] puts a [`marker`] line between
//! the two saying how many bytes were skipped. The tool-result file stays
//! plain text, so the reference reads it like any other
//! (docs/contract.md §4, offload).

use std::fs::File;
use std::io::{Seek as _, Write as _};
use std::os::unix::fs::FileExt as _;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// Default most bytes of one output stream kept in a tool-result file
/// (64 MiB): the first and last halves of anything longer.
pub const DEFAULT_TOOL_RESULT_MAX_BYTES: u64 = 64 << 20;

/// The line put where output was skipped: `skipped` bytes of a stream of
/// `total` bytes over the `cap`.
pub fn marker(skipped: u64, total: u64, cap: u64) -> String {
    format!(
        "\n... [wsbench: {skipped} bytes skipped here; the output was {total} bytes, over the \
         {cap}-byte tool-result cap (tool_result_max_bytes): its first and last bytes are kept] ...\n"
    )
}

/// One output stream of a running command.
pub(super) struct Spool {
    /// The first `head_cap` bytes (what the model's text is cut from).
    pub(super) head: Vec<u8>,
    head_cap: usize,
    /// The first `keep_head` bytes, once the stream outgrew `head`.
    file: Option<File>,
    file_len: u64,
    /// The bytes after `keep_head`: in order until `keep_tail` bytes,
    /// then overwritten in place (a ring ending at `ring_pos`).
    ring: Option<File>,
    ring_len: u64,
    ring_pos: u64,
    keep_head: u64,
    keep_tail: u64,
    cap: u64,
    /// Bytes pushed.
    pub(super) total: u64,
}

impl Spool {
    /// A spool keeping `head_cap` bytes in memory and at most `cap`
    /// bytes (at least 2) on disk.
    pub(super) fn new(head_cap: usize, cap: u64) -> Self {
        let cap = cap.max(2);
        Spool {
            head: Vec::new(),
            head_cap,
            file: None,
            file_len: 0,
            ring: None,
            ring_len: 0,
            ring_pos: 0,
            keep_head: cap / 2,
            keep_tail: cap - cap / 2,
            cap,
            total: 0,
        }
    }

    /// Appends `data`. Errors: creating or writing a temp file.
    pub(super) fn push(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.total += data.len() as u64;
        if self.file.is_none() {
            if self.head.len() + data.len() <= self.head_cap {
                self.head.extend_from_slice(data);
                return Ok(());
            }
            let room = self.head_cap - self.head.len();
            let mut prefix = std::mem::take(&mut self.head);
            self.file = Some(tempfile::tempfile()?);
            self.head.extend_from_slice(&prefix);
            self.head.extend_from_slice(&data[..room]);
            prefix.extend_from_slice(data);
            return self.spill(&prefix);
        }
        self.spill(data)
    }

    fn spill(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        let room = (self.keep_head - self.file_len).min(data.len() as u64) as usize;
        if room > 0 {
            let f = self.file.as_mut().expect("spilled");
            f.write_all(&data[..room])?;
            self.file_len += room as u64;
            data = &data[room..];
        }
        if data.is_empty() {
            return Ok(());
        }
        if self.ring.is_none() {
            self.ring = Some(tempfile::tempfile()?);
        }
        let ring = self.ring.as_ref().expect("just made");
        // Only the last `keep_tail` bytes of `data` can survive.
        if data.len() as u64 > self.keep_tail {
            let cut = data.len() - self.keep_tail as usize;
            self.ring_pos = (self.ring_pos + cut as u64) % self.keep_tail;
            data = &data[cut..];
        }
        while !data.is_empty() {
            let n = ((self.keep_tail - self.ring_pos) as usize).min(data.len());
            ring.write_all_at(&data[..n], self.ring_pos)?;
            self.ring_pos = (self.ring_pos + n as u64) % self.keep_tail;
            self.ring_len = (self.ring_len + n as u64).min(self.keep_tail);
            data = &data[n..];
        }
        Ok(())
    }

    /// Whether the stream outgrew the memory head.
    pub(super) fn spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Bytes left out of the reader (0 unless the stream passed the cap).
    pub(super) fn skipped(&self) -> u64 {
        self.total.saturating_sub(self.cap)
    }

    /// A reader over what is kept: the whole stream, or its head, the
    /// [`marker`] and its tail. Errors: reading back a temp file.
    pub(super) fn reader(&mut self) -> std::io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let Some(mut head) = self.file.take() else {
            return Ok(Box::new(std::io::Cursor::new(std::mem::take(
                &mut self.head,
            ))));
        };
        head.rewind()?;
        let head = tokio::fs::File::from_std(head);
        let Some(ring) = self.ring.take() else {
            return Ok(Box::new(head));
        };
        let skipped = self.skipped();
        if skipped == 0 {
            // Never wrapped: the ring holds the rest in order.
            let mut ring = ring;
            ring.rewind()?;
            return Ok(Box::new(head.chain(tokio::fs::File::from_std(ring))));
        }
        // Wrapped: the oldest kept byte is at `ring_pos`. Put the ring in
        // order in a second file (once, at most `keep_tail` bytes, 64 KiB
        // at a time) so the reader is a plain chain.
        let mut ordered = tempfile::tempfile()?;
        let mut buf = vec![0u8; 64 * 1024];
        for (from, to) in [(self.ring_pos, self.ring_len), (0, self.ring_pos)] {
            let mut at = from;
            while at < to {
                let n = ((to - at) as usize).min(buf.len());
                ring.read_exact_at(&mut buf[..n], at)?;
                ordered.write_all(&buf[..n])?;
                at += n as u64;
            }
        }
        ordered.rewind()?;
        let note = marker(skipped, self.total, self.cap);
        Ok(Box::new(
            head.chain(std::io::Cursor::new(note.into_bytes()))
                .chain(tokio::fs::File::from_std(ordered)),
        ))
    }
}

/// Reads a whole reader (tests).
#[cfg(test)]
async fn read_all(mut r: Box<dyn AsyncRead + Send + Unpin>) -> Vec<u8> {
    let mut v = Vec::new();
    r.read_to_end(&mut v).await.unwrap();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn under_the_cap_everything_is_kept_in_order() {
        let mut s = Spool::new(4, 100);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnopqrstuvwxyz"] {
            s.push(chunk).unwrap();
        }
        assert_eq!(s.head, b"abcd");
        assert_eq!(s.skipped(), 0);
        assert_eq!(
            read_all(s.reader().unwrap()).await,
            b"abcdefghijklmnopqrstuvwxyz"
        );
    }

    #[tokio::test]
    async fn over_the_cap_head_marker_and_tail_are_kept() {
        let mut s = Spool::new(4, 10);
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for c in data.chunks(7) {
            s.push(c).unwrap();
        }
        assert_eq!(s.skipped(), 990);
        let got = read_all(s.reader().unwrap()).await;
        let mut want = data[..5].to_vec();
        want.extend_from_slice(marker(990, 1000, 10).as_bytes());
        want.extend_from_slice(&data[995..]);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }

    #[tokio::test]
    async fn one_chunk_larger_than_the_cap() {
        let mut s = Spool::new(2, 6);
        s.push(b"0123456789ABCDEF").unwrap();
        let got = read_all(s.reader().unwrap()).await;
        let mut want = b"012".to_vec();
        want.extend_from_slice(marker(10, 16, 6).as_bytes());
        want.extend_from_slice(b"DEF");
        assert_eq!(got, want);
    }
}
