//! A checked append to a host file (issue 23 point 7): check the lines
//! this process appended earlier, append the lost ones again together with
//! the new data, and read the result back — all in one critical section
//! under the file's exclusive `flock`, the one [`append_host`] takes.
//!
//! Why one section: a writer that takes the same lock (another wsbench, a
//! script that truncates and rewrites under `flock`) can then never be
//! seen half-way, so nothing it kept is taken for lost. The reference's
//! rewrite takes no lock (agentscope 2.0.11 opens `context.jsonl` with
//! `"wb"`, truncating it, then writes it whole), so the file can still be
//! seen empty or short for a moment; a line that looks missing is
//! therefore judged again only once size and mtime have held still for
//! [`SETTLE_QUIET`] and the file ends in a newline (at most [`SETTLE_MAX`]
//! of waiting), and only a line found nowhere in the settled file is
//! appended again.
//!
//! Limits: a writer that replaces the file by rename while the lock is
//! held is not followed (the lock is taken again only if the path changed
//! before it was granted); reads are bounded by the span of the tracked
//! lines and by [`SEARCH_WINDOW`].
//!
//! [`append_host`]: super::fs::append_host

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::{Instant, SystemTime};

use nix::fcntl::{Flock, FlockArg};

use super::fs::append_locked;
use crate::backend::append_check::{
    CheckedAppend, SEARCH_WINDOW, SETTLE_MAX, SETTLE_POLL, SETTLE_QUIET, Seen, TrackedRecord,
    all_in_place, locate, span, split_records,
};

/// Read-back rounds after the write before giving up (each re-appends
/// what a lock-free writer dropped meanwhile; a writer that keeps dropping
/// lines still ends the loop, and the next append checks again).
const MAX_ROUNDS: usize = 3;
/// Looks at a file that seems short of a line before giving up on a
/// verdict (each after a wait for it to settle, at most [`SETTLE_MAX`]).
const LOOKS: usize = 3;
/// Tries to lock the file the path names when it keeps being replaced.
const LOCK_TRIES: usize = 5;

/// Appends `data` to `target` after appending again those of `earlier`
/// (lines this process appended before, with their last offsets) that are
/// found nowhere in the settled file; then reads back and repairs again,
/// up to [`MAX_ROUNDS`] times. All under one exclusive `flock`. Creates
/// the file and parents; a file that was gone forgets `earlier`.
///
/// Each write is one `write(2)` of whole lines (lost lines and the new
/// data in one buffer), line-safe as [`append_host`](super::fs::append_host).
///
/// Errors: those of opening, locking, reading and writing the file; a
/// failed read fails the call rather than risk a duplicate.
pub fn append_checked_host(
    target: &Path,
    earlier: Vec<TrackedRecord>,
    data: &[u8],
) -> io::Result<CheckedAppend> {
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let was_missing = match std::fs::metadata(target) {
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(e),
    };
    let file = lock_current(target)?;
    let mut tracked = if was_missing { Vec::new() } else { earlier };
    let mut out = CheckedAppend {
        was_missing,
        ..CheckedAppend::default()
    };
    let lost = check(&file, &mut tracked, &mut out.unchecked)?;
    out.reappended += lost.len();
    let lost_len: usize = lost.iter().map(|r| r.data.len()).sum();
    let mut buf: Vec<u8> = lost.into_iter().flat_map(|r| r.data).collect();
    buf.extend_from_slice(data);
    let start = write_once(&file, &buf)?;
    out.offset = start + lost_len as u64;
    tracked.extend(split_records(start, &buf));
    for _ in 0..MAX_ROUNDS {
        let lost = check(&file, &mut tracked, &mut out.unchecked)?;
        if lost.is_empty() {
            break;
        }
        out.reappended += lost.len();
        let buf: Vec<u8> = lost.into_iter().flat_map(|r| r.data).collect();
        let start = write_once(&file, &buf)?;
        tracked.extend(split_records(start, &buf));
    }
    tracked.sort_by_key(|r| r.offset);
    out.records = tracked;
    Ok(out)
}

/// Opens `target` for append and takes its exclusive `flock`, again when
/// the path was replaced (renamed over) before the lock was granted, so
/// the lock and the writes are on the file the path names.
fn lock_current(target: &Path) -> io::Result<Flock<File>> {
    for _ in 0..LOCK_TRIES {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(target)?;
        let locked =
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;
        let held = locked.metadata()?;
        match std::fs::metadata(target) {
            Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => return Ok(locked),
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "{} was replaced {LOCK_TRIES} times while wsbench waited for its lock",
        target.display()
    )))
}

/// One `write(2)` of `buf` (whole lines), line-safe; the offset it starts at.
fn write_once(file: &File, buf: &[u8]) -> io::Result<u64> {
    append_locked(file, buf, |mut f, bytes| {
        io::Write::write_all(&mut f, bytes)
    })
}

/// Takes out of `tracked` the records found nowhere in the settled file
/// (returned, oldest first) and those that cannot be judged (counted in
/// `unchecked`); the others get their current offsets.
fn check(
    file: &File,
    tracked: &mut Vec<TrackedRecord>,
    unchecked: &mut usize,
) -> io::Result<Vec<TrackedRecord>> {
    if tracked.is_empty() || in_place(file, tracked)? {
        return Ok(Vec::new());
    }
    let (first, first_whole) = search(file, tracked)?;
    let mut seen = first.clone();
    if first.contains(&Seen::Absent) {
        // Looks lost, but the file may be half-way through another
        // writer's truncate-and-write, and one look can be wrong (see
        // `search`). A line is lost only when two whole looks, with a wait
        // for the file to settle before the later one, both miss it;
        // otherwise it stays tracked at its old offset and the next append
        // judges it again.
        let mut earlier = first_whole.then(|| first.clone());
        let mut verdict = None;
        for _ in 0..LOOKS {
            settle(file)?;
            let (look, whole) = search(file, tracked)?;
            if !whole {
                continue;
            }
            if !look.contains(&Seen::Absent) {
                verdict = Some(look);
                break;
            }
            if let Some(prev) = &earlier {
                let mut both = look.clone();
                for (s, p) in both.iter_mut().zip(prev) {
                    if *s == Seen::Absent && *p != Seen::Absent {
                        *s = Seen::Deferred;
                    }
                }
                verdict = Some(both);
                break;
            }
            earlier = Some(look);
        }
        seen = verdict.unwrap_or_else(|| {
            seen.iter()
                .map(|s| {
                    if *s == Seen::Absent {
                        Seen::Deferred
                    } else {
                        *s
                    }
                })
                .collect()
        });
    }
    let mut lost = Vec::new();
    let mut kept = Vec::with_capacity(tracked.len());
    for (mut r, s) in tracked.drain(..).zip(seen) {
        match s {
            Seen::At(at) => {
                r.offset = at;
                kept.push(r);
            }
            Seen::Absent => lost.push(r),
            Seen::Deferred => kept.push(r),
            Seen::Unchecked => *unchecked += 1,
        }
    }
    *tracked = kept;
    Ok(lost)
}

/// True when every record is at its own offset: reads only their span
/// (skipped when that span is over [`SEARCH_WINDOW`]).
fn in_place(file: &File, tracked: &[TrackedRecord]) -> io::Result<bool> {
    let Some((from, to)) = span(tracked) else {
        return Ok(true);
    };
    if to - from > SEARCH_WINDOW {
        return Ok(false);
    }
    let window = read_range(file, from, to - from)?;
    Ok(all_in_place(tracked, &window, from))
}

/// Locates every record in the newest [`SEARCH_WINDOW`] bytes of the
/// file; the flag says whether that look was at a whole file: size and
/// mtime the same before and after the read, every byte read, a newline
/// last. Linux grows a file a page at a time during one `write(2)`, so a
/// look during another writer's rewrite can see a prefix of it that
/// lacks lines which are there a moment later.
fn search(file: &File, tracked: &[TrackedRecord]) -> io::Result<(Vec<Seen>, bool)> {
    let before = stamp(file)?;
    let len = before.0;
    let start = len.saturating_sub(SEARCH_WINDOW);
    let window = read_range(file, start, len - start)?;
    let after = stamp(file)?;
    let whole = before == after && before.2 && window.len() as u64 == len - start;
    Ok((locate(tracked, &window, start), whole))
}

/// Reads up to `len` bytes from `offset`; fewer when the file is shorter
/// (it may shrink while being read: another writer does not lock).
fn read_range(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// Size, mtime, and whether the file is non-empty and its last byte a
/// newline: what must hold still for the content to be trusted. An empty
/// file is never trusted while lines are tracked in it: it is what a
/// truncate-then-write looks like half-way (a writer preempted between
/// the two leaves it empty for milliseconds), and re-appending into it
/// would leave the tails of our lines behind the other writer's bytes.
fn stamp(file: &File) -> io::Result<(u64, Option<SystemTime>, bool)> {
    let meta = file.metadata()?;
    let len = meta.len();
    let mut last = [0u8; 1];
    let ends = len > 0 && file.read_at(&mut last, len - 1)? == 1 && last[0] == b'\n';
    Ok((len, meta.modified().ok(), ends))
}

/// Waits until size and mtime have held still for [`SETTLE_QUIET`] with
/// the file ending in a newline, or [`SETTLE_MAX`] has passed; returns
/// whether it settled (either way the caller judges what is there then).
fn settle(file: &File) -> io::Result<bool> {
    let began = Instant::now();
    let mut last = stamp(file)?;
    let mut quiet_since = began;
    loop {
        std::thread::sleep(SETTLE_POLL);
        let now = stamp(file)?;
        if now != last {
            last = now;
            quiet_since = Instant::now();
        } else if last.2 && quiet_since.elapsed() >= SETTLE_QUIET {
            return Ok(true);
        }
        if began.elapsed() >= SETTLE_MAX {
            return Ok(false);
        }
    }
}

#[cfg(test)]
#[path = "checked_append_tests.rs"]
mod tests;
