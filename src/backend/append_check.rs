//! The pure half of a checked append (issue 23 point 7): which of the
//! lines a process appended earlier are still in a file, judged from a
//! bounded window of its bytes.
//!
//! Another writer (the reference's `offload_context`, docs/contract.md §6)
//! rewrites `context.jsonl` whole and without a lock, so a line wsbench
//! appended can be dropped, or moved to a smaller offset when the rewrite
//! shortened earlier lines. A line is looked for first at the offset its
//! append returned, then by its exact bytes anywhere in the window (each
//! wsbench line holds its message's unique id, so a match is that line).
//! Only a line found nowhere in a window that covers the whole file is
//! taken as lost; one outside a window that does not cover the file is
//! "unchecked" (never appended again: a duplicate is worse than a line the
//! guard cannot vouch for).
//!
//! The I/O (reads under a lock, waiting for a rewrite to settle) is done by
//! the callers: [`crate::backend::host::checked_append`] for host files,
//! the engine's rewrite guard for the other backends.

use std::time::Duration;

/// Bytes of a file read to find lines that are not at their offset: the
/// newest this many bytes. A line that other writers pushed further back
/// than this from the end is not searched for (it counts as unchecked and
/// is no longer tracked), so a check never reads more than this per round.
pub const SEARCH_WINDOW: u64 = 16 * 1024 * 1024;

/// How often a file that looks short of a line is re-examined while it may
/// be in the middle of another writer's truncate-and-write.
pub const SETTLE_POLL: Duration = Duration::from_millis(2);
/// How long size and mtime must hold still (and the file end in a newline)
/// before its content is trusted as a finished rewrite.
pub const SETTLE_QUIET: Duration = Duration::from_millis(6);
/// Most time spent waiting for a file to settle per check; past it the
/// file is judged as it is (a writer that never stops still ends the wait).
pub const SETTLE_MAX: Duration = Duration::from_millis(60);

/// One line this process appended: where its bytes started when last
/// seen, and the bytes (ending in `\n` when the append's data did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedRecord {
    /// Byte offset of the line in the file when last seen.
    pub offset: u64,
    /// The line's exact bytes.
    pub data: Vec<u8>,
}

/// Splits `data`, appended at `offset`, into one record per line (a last
/// part without `\n` is a record too), so a rewrite that keeps some lines
/// of one append and drops others re-appends only the dropped ones.
pub fn split_records(offset: u64, data: &[u8]) -> Vec<TrackedRecord> {
    let mut out = Vec::new();
    let mut at = offset;
    for line in data.split_inclusive(|b| *b == b'\n') {
        out.push(TrackedRecord {
            offset: at,
            data: line.to_vec(),
        });
        at += line.len() as u64;
    }
    out
}

/// Where a record was found in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// At this offset of the file (its old one or a new one).
    At(u64),
    /// Found nowhere in a window that covers the whole file: lost.
    Absent,
    /// Not in a window that covers only the file's tail: not judged.
    Unchecked,
    /// Missing from a file that never held still long enough to be
    /// trusted: kept and judged again at the next append (set by the
    /// caller, never by [`locate`]).
    Deferred,
}

/// Finds each of `records` in `window`, the file's bytes from offset
/// `start` to its end (`start == 0` means the window is the whole file).
/// Records are looked for at their offset first, then anywhere.
pub fn locate(records: &[TrackedRecord], window: &[u8], start: u64) -> Vec<Seen> {
    records
        .iter()
        .map(|r| {
            if let Some(rel) = r.offset.checked_sub(start) {
                let rel = rel as usize;
                if window.get(rel..rel + r.data.len()) == Some(&r.data[..]) {
                    return Seen::At(r.offset);
                }
            }
            match memchr::memmem::find(window, &r.data) {
                Some(at) => Seen::At(start + at as u64),
                None if start == 0 => Seen::Absent,
                None => Seen::Unchecked,
            }
        })
        .collect()
}

/// True when every record of `records` is at its own offset in `window`
/// (which starts at file offset `start`): the cheap check that needs no
/// search.
pub fn all_in_place(records: &[TrackedRecord], window: &[u8], start: u64) -> bool {
    records.iter().all(|r| {
        r.offset
            .checked_sub(start)
            .map(|rel| rel as usize)
            .and_then(|rel| window.get(rel..rel + r.data.len()))
            == Some(&r.data[..])
    })
}

/// The byte range `[from, to)` that holds every record at its offset.
pub fn span(records: &[TrackedRecord]) -> Option<(u64, u64)> {
    let from = records.iter().map(|r| r.offset).min()?;
    let to = records
        .iter()
        .map(|r| r.offset + r.data.len() as u64)
        .max()?;
    Some((from, to))
}

/// What a checked append did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedAppend {
    /// Offset in the file where the new data starts.
    pub offset: u64,
    /// The records still tracked afterwards, in file order: earlier ones
    /// found (at their current offsets), those appended again, and the new
    /// data's lines.
    pub records: Vec<TrackedRecord>,
    /// Earlier records found nowhere in the settled file and appended
    /// again (each once per round; see the caller for the round limit).
    pub reappended: usize,
    /// Earlier records that could not be judged (beyond
    /// [`SEARCH_WINDOW`] from the end) and are no longer tracked.
    pub unchecked: usize,
    /// The file was gone before the append: the earlier records were
    /// forgotten (a deleted session is not brought back), the new data
    /// starts a new file.
    pub was_missing: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, s: &str) -> TrackedRecord {
        TrackedRecord {
            offset,
            data: s.as_bytes().to_vec(),
        }
    }

    #[test]
    fn lines_are_split_with_their_offsets() {
        let r = split_records(10, b"a\nbb\nc");
        assert_eq!(r, [rec(10, "a\n"), rec(12, "bb\n"), rec(15, "c")]);
    }

    #[test]
    fn a_record_is_found_in_place_moved_or_not_at_all() {
        let file = b"x\n{\"id\":1}\n{\"id\":3}\n";
        let recs = [
            rec(2, "{\"id\":1}\n"),
            rec(40, "{\"id\":3}\n"),
            rec(50, "{\"id\":2}\n"),
        ];
        assert_eq!(
            locate(&recs, file, 0),
            [Seen::At(2), Seen::At(11), Seen::Absent]
        );
        assert!(!all_in_place(&recs, file, 0));
        assert!(all_in_place(&recs[..1], file, 0));
        // A window of the tail only cannot call a record lost.
        assert_eq!(locate(&recs[2..], &file[11..], 11), [Seen::Unchecked]);
        assert_eq!(span(&recs), Some((2, 59)));
    }

    #[test]
    fn a_prefix_of_a_record_is_not_the_record() {
        // A truncated file that holds only a record's head (a rewrite in
        // progress) does not count as holding the record.
        let recs = [rec(0, "{\"id\":1,\"t\":\"long\"}\n")];
        assert_eq!(locate(&recs, b"{\"id\":1,\"t\"", 0), [Seen::Absent]);
    }
}
