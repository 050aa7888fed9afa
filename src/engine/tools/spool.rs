//! Where the Bash tool keeps one output stream while the command runs:
//! the head the model sees in memory, everything else in temp files, and
//! never more than a cap on disk (issue 16: 100 s of `yes` used to leave a
//! 2 GB tool-result file in the user's project).
//!
//! Up to `cap` bytes the spool holds the stream whole. Past it, it keeps
//! the first `cap / 2` bytes and the last `cap - cap / 2` (a ring file
//! written in place). At the end [`share`] splits the cap between stdout
//! and stderr, and [`Spool::reader`] gives each stream's share: whole, or
//! its head, a [`marker`] line saying how many bytes were skipped, and its
//! tail. While the command runs the temp files (in `$TMPDIR`, never in the
//! workspace) hold up to `cap` bytes per stream. The tool-result file stays
//! plain text, so the reference reads it like any other
//! (docs/contract.md §4, offload).

use std::fs::File;
use std::io::{Seek as _, Write as _};
use std::os::unix::fs::FileExt as _;

use tokio::io::AsyncRead;

/// Default most bytes of output kept in a tool-result file, stdout and
/// stderr together (64 MiB; see [`share`]): the first and last halves of
/// a stream longer than its share.
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

    /// Bytes kept on disk or in memory, at most the cap.
    pub(super) fn kept(&self) -> u64 {
        self.total.min(self.cap)
    }

    /// Bytes of the stream at `[from, to)` into `out`. Every byte asked
    /// for must be kept: in the memory head (never spilled), the head
    /// file, or the tail ring. Errors: reading a temp file, writing `out`.
    fn copy_range(&self, from: u64, to: u64, out: &mut File) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return out.write_all(&self.head[from as usize..to as usize]);
        };
        // The ring holds the stream's last `ring_len` bytes, the oldest at
        // `ring_pos` once it is full (it is written in order until then).
        let ring_start = self.total - self.ring_len;
        let oldest = if self.ring_len == self.keep_tail {
            self.ring_pos
        } else {
            0
        };
        let mut buf = vec![0u8; 64 * 1024];
        let mut at = from;
        while at < to {
            let n = if at < self.file_len {
                let n = ((to.min(self.file_len) - at) as usize).min(buf.len());
                file.read_exact_at(&mut buf[..n], at)?;
                n
            } else {
                debug_assert!(at >= ring_start, "byte {at} was not kept");
                let ring = self.ring.as_ref().expect("bytes past the head file");
                let i = (oldest + (at - ring_start)) % self.keep_tail;
                let n = ((to - at) as usize)
                    .min(buf.len())
                    .min((self.keep_tail - i) as usize);
                ring.read_exact_at(&mut buf[..n], i)?;
                n
            };
            out.write_all(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }

    /// A reader over at most `budget` bytes of the stream (at most
    /// [`Spool::kept`] are available): the whole stream when it fits, else
    /// its first half-budget, the [`marker`] line and its last bytes.
    /// Returns the reader and the bytes skipped. `cap` is only named in
    /// the marker (the cap of the whole result). Errors: reading back or
    /// writing a temp file.
    pub(super) fn reader(
        &mut self,
        budget: u64,
        cap: u64,
    ) -> std::io::Result<(Box<dyn AsyncRead + Send + Unpin>, u64)> {
        let budget = budget.min(self.kept());
        if budget == self.total && self.file.is_none() {
            let head = std::mem::take(&mut self.head);
            return Ok((Box::new(std::io::Cursor::new(head)), 0));
        }
        // One ordered temp file of at most `budget` bytes plus the
        // marker, so the reader is a plain file.
        let mut ordered = tempfile::tempfile()?;
        let skipped = self.total - budget;
        if skipped == 0 {
            self.copy_range(0, self.total, &mut ordered)?;
        } else {
            let head = budget / 2;
            self.copy_range(0, head, &mut ordered)?;
            ordered.write_all(marker(skipped, self.total, cap).as_bytes())?;
            self.copy_range(self.total - (budget - head), self.total, &mut ordered)?;
        }
        ordered.rewind()?;
        self.file = None;
        self.ring = None;
        Ok((Box::new(tokio::fs::File::from_std(ordered)), skipped))
    }
}

/// How a tool result's `cap` is shared by stdout and stderr, given the
/// bytes each spool kept: both whole when they fit together, else the
/// smaller one whole when it is under half, the other the rest, else
/// half each. The sum never passes `cap` (issue 16: the cap is for the
/// whole file, not per stream).
pub(super) fn share(out_kept: u64, err_kept: u64, cap: u64) -> (u64, u64) {
    if out_kept + err_kept <= cap {
        return (out_kept, err_kept);
    }
    let half = cap / 2;
    if out_kept <= half {
        (out_kept, cap - out_kept)
    } else if err_kept <= cap - half {
        (cap - err_kept, err_kept)
    } else {
        (half, cap - half)
    }
}

/// Reads a whole reader (tests).
#[cfg(test)]
async fn read_all(mut r: Box<dyn AsyncRead + Send + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut v = Vec::new();
    r.read_to_end(&mut v).await.unwrap();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn whole(s: &mut Spool, cap: u64) -> (Vec<u8>, u64) {
        let (r, skipped) = s.reader(cap, cap).unwrap();
        (read_all(r).await, skipped)
    }

    #[tokio::test]
    async fn under_the_cap_everything_is_kept_in_order() {
        let mut s = Spool::new(4, 100);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnopqrstuvwxyz"] {
            s.push(chunk).unwrap();
        }
        assert_eq!(s.head, b"abcd");
        assert_eq!(
            whole(&mut s, 100).await,
            (b"abcdefghijklmnopqrstuvwxyz".to_vec(), 0)
        );
    }

    #[tokio::test]
    async fn over_the_cap_head_marker_and_tail_are_kept() {
        let mut s = Spool::new(4, 10);
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for c in data.chunks(7) {
            s.push(c).unwrap();
        }
        let (got, skipped) = whole(&mut s, 10).await;
        assert_eq!(skipped, 990);
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
        let mut want = b"012".to_vec();
        want.extend_from_slice(marker(10, 16, 6).as_bytes());
        want.extend_from_slice(b"DEF");
        assert_eq!(whole(&mut s, 6).await, (want, 10));
    }

    /// Every budget of every stream length gives the stream's first
    /// `budget / 2` bytes and its last `budget - budget / 2`, whichever
    /// of the memory head, head file and ring they sit in.
    #[tokio::test]
    async fn any_budget_gives_head_and_tail_of_the_stream() {
        let cap = 12;
        for len in 0..40u32 {
            for budget in 0..=cap {
                let data: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                let mut s = Spool::new(3, cap);
                for c in data.chunks(5) {
                    s.push(c).unwrap();
                }
                let (r, skipped) = s.reader(budget, cap).unwrap();
                let got = read_all(r).await;
                let keep = budget.min(len as u64) as usize;
                let want = if keep == data.len() {
                    data.clone()
                } else {
                    let mut w = data[..keep / 2].to_vec();
                    w.extend_from_slice(
                        marker((data.len() - keep) as u64, len as u64, cap).as_bytes(),
                    );
                    w.extend_from_slice(&data[data.len() - (keep - keep / 2)..]);
                    w
                };
                assert_eq!(got, want, "len {len} budget {budget}");
                assert_eq!(skipped, (data.len() - keep) as u64);
            }
        }
    }

    #[test]
    fn the_cap_is_shared_by_both_streams() {
        assert_eq!(share(10, 20, 100), (10, 20));
        assert_eq!(share(100, 100, 100), (50, 50));
        assert_eq!(share(10, 100, 100), (10, 90));
        assert_eq!(share(100, 7, 100), (93, 7));
        assert_eq!(share(0, 100, 100), (0, 100));
        assert_eq!(share(100, 100, 101), (50, 51));
    }
}
