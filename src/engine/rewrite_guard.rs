//! Notices records another writer's whole-file rewrite dropped, and
//! appends them again (issue 23 point 7).
//!
//! The reference's `offload_context` reads all of `context.jsonl` and
//! writes it back with its new lines, without a lock (docs/contract.md §6,
//! §16 item 11). A wsbench append that lands between its read and its
//! write is lost: the file is replaced by the reference's old copy plus
//! its own lines. wsbench cannot lock the reference out, but it can check:
//! every append returns the offset its bytes start at
//! ([`Sandbox::append`](crate::backend::Sandbox::append)), and before and
//! after each new append the guard reads those ranges back. A record whose
//! bytes are no longer at its offset (the file shrank below it, or other
//! bytes are there) was dropped; it is appended again, in its old order,
//! and a warning is given once per file and process.
//!
//! A record not at its offset is looked for in the whole file (a rewrite
//! that dropped or shortened earlier lines moves ours), and only one found
//! nowhere is appended again, so a kept record is never appended twice. A file that is gone (a deleted session) is not
//! recreated: its records are forgotten.
//!
//! Limits: only this process's records are checked, and only the newest
//! [`KEEP_BYTES`] of them per file (the reference loses what was appended
//! during its own read-write window, so the newest are the ones at risk),
//! in at most [`KEEP_FILES`] files. A rewrite that lands after this
//! process's last append to a file, or after the process ended, is not
//! seen: the README says both should not write one session at once.

use std::collections::{HashMap, HashSet, VecDeque};

use super::base::WorkspaceBase;
use super::error::WsResult;
use super::events::Event;
use crate::backend::ByteRange;

/// Bytes of recent records kept per file to check and re-append.
pub const KEEP_BYTES: usize = 256 * 1024;
/// Files tracked at once; the least recently appended one is forgotten.
pub const KEEP_FILES: usize = 32;
/// Re-append rounds per append before giving up (each round re-reads the
/// file; a writer that keeps dropping our lines still ends the loop).
const MAX_ROUNDS: usize = 3;

/// One record this process appended: where its bytes start, and them.
struct Record {
    offset: u64,
    data: Vec<u8>,
}

/// The records of one file, oldest first, with their byte total.
#[derive(Default)]
struct Track {
    records: VecDeque<Record>,
    bytes: usize,
    /// Order of last use, for forgetting the least recent file.
    used: u64,
}

#[derive(Default)]
struct State {
    files: HashMap<String, Track>,
    warned: HashSet<String>,
    clock: u64,
}

/// What one guarded append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardedAppend {
    /// Offset in the file where the new data starts.
    pub offset: u64,
    /// Earlier records of this process found dropped and appended again.
    pub reappended: usize,
}

/// The per-workspace guard: one per [`Offload`](super::offload::Offload).
/// Appends through it are serialised in this process (across processes
/// the backend's append is atomic on its own).
#[derive(Default)]
pub struct RewriteGuard {
    state: tokio::sync::Mutex<State>,
}

impl std::fmt::Debug for RewriteGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewriteGuard").finish_non_exhaustive()
    }
}

impl RewriteGuard {
    /// Appends `data` (whole lines) to `path` through `base`, first
    /// appending again any earlier record of this process that a rewrite
    /// dropped, then checking once more after the write.
    ///
    /// Errors: those of the append and of the reads that check it (a
    /// failed check fails the call rather than risk a duplicate).
    pub async fn append(
        &self,
        base: &WorkspaceBase,
        path: &str,
        data: &[u8],
    ) -> WsResult<GuardedAppend> {
        let mut st = self.state.lock().await;
        let mut lost = dropped(base, &mut st, path).await?;
        let mut reappended = lost.len();
        let new_offset = append_records(base, &mut st, path, &mut lost, Some(data)).await?;
        for _ in 0..MAX_ROUNDS {
            let mut again = dropped(base, &mut st, path).await?;
            if again.is_empty() {
                break;
            }
            reappended += again.len();
            append_records(base, &mut st, path, &mut again, None).await?;
        }
        if reappended > 0 && st.warned.insert(path.to_string()) {
            let message = format!(
                "{path} was rewritten by another writer (the reference rewrites context.jsonl \
                 whole) and lost {reappended} record(s) this process had appended; they were \
                 appended again, after the other writer's lines. Do not let both write one \
                 session at once (further losses in this file are repaired without a warning)"
            );
            tracing::warn!("{message}");
            base.publish(Event::Log {
                level: "warn".into(),
                source: "offload".into(),
                message,
            });
        }
        Ok(GuardedAppend {
            offset: new_offset,
            reappended,
        })
    }
}

/// Appends the `lost` records and then `new` in one write, and tracks
/// each at its new offset; returns the offset of `new` (or of the first
/// record when there is no `new`).
async fn append_records(
    base: &WorkspaceBase,
    st: &mut State,
    path: &str,
    lost: &mut Vec<Record>,
    new: Option<&[u8]>,
) -> WsResult<u64> {
    let mut parts: Vec<Vec<u8>> = lost.drain(..).map(|r| r.data).collect();
    let lost_len: usize = parts.iter().map(Vec::len).sum();
    if let Some(n) = new {
        parts.push(n.to_vec());
    }
    let buf = parts.concat();
    let start = base.append_or_rewrite(path, &buf).await?;
    st.clock += 1;
    let used = st.clock;
    let track = st.files.entry(path.to_string()).or_default();
    track.used = used;
    let mut at = start;
    for data in parts {
        let len = data.len();
        track.records.push_back(Record { offset: at, data });
        track.bytes += len;
        at += len as u64;
    }
    // The newest records stay; one bigger than the budget is not kept.
    while track.bytes > KEEP_BYTES {
        let Some(old) = track.records.pop_front() else {
            break;
        };
        track.bytes -= old.data.len();
    }
    if st.files.len() > KEEP_FILES
        && let Some(oldest) = st
            .files
            .iter()
            .min_by_key(|(_, t)| t.used)
            .map(|(p, _)| p.clone())
    {
        st.files.remove(&oldest);
    }
    Ok(start + lost_len as u64)
}

/// Takes out of the track of `path` the records whose bytes are no
/// longer at their offset, oldest first. A missing file forgets them all.
async fn dropped(base: &WorkspaceBase, st: &mut State, path: &str) -> WsResult<Vec<Record>> {
    let Some(track) = st.files.get_mut(path) else {
        return Ok(Vec::new());
    };
    let (Some(first), Some(last)) = (track.records.front(), track.records.back()) else {
        return Ok(Vec::new());
    };
    // Records are in append order; a rewrite that shrank the file between
    // two of our appends can make a later record's offset the smaller one.
    let from = track
        .records
        .iter()
        .map(|r| r.offset)
        .min()
        .unwrap_or(first.offset);
    let to = track
        .records
        .iter()
        .map(|r| r.offset + r.data.len() as u64)
        .max()
        .unwrap_or(last.offset + last.data.len() as u64);
    let sb = base.sandbox();
    let window = if sb.capabilities().read_range {
        sb.read(
            path,
            Some(ByteRange {
                offset: from,
                len: to - from,
            }),
        )
        .await
    } else {
        sb.read(path, None).await.map(|all| {
            let start = (from as usize).min(all.len());
            all[start..].to_vec()
        })
    };
    let window = match window {
        Ok(w) => w,
        Err(e) if e.is_not_found() => {
            st.files.remove(path);
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    let mut kept = VecDeque::new();
    let mut moved = Vec::new();
    for r in track.records.drain(..) {
        let at = (r.offset - from) as usize;
        if window.get(at..at + r.data.len()) == Some(&r.data[..]) {
            kept.push_back(r);
        } else {
            moved.push(r);
        }
    }
    // Not at its offset is not yet lost: a rewrite that dropped or
    // shortened earlier lines keeps ours at other offsets (the trial of
    // issue 23 saw 243 duplicates from taking a move for a loss). Only a
    // record found nowhere in the whole file is lost; a found one is kept
    // at its new offset. Each record is a whole line holding its
    // message's unique id, so a match is that record.
    let mut lost = Vec::new();
    if !moved.is_empty() {
        let all = match sb.read(path, None).await {
            Ok(all) => all,
            Err(e) if e.is_not_found() => {
                st.files.remove(path);
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        for mut r in moved {
            match memchr::memmem::find(&all, &r.data) {
                Some(at) => {
                    r.offset = at as u64;
                    kept.push_back(r);
                }
                None => lost.push(r),
            }
        }
        kept.make_contiguous().sort_by_key(|r| r.offset);
    }
    track.bytes = kept.iter().map(|r| r.data.len()).sum();
    track.records = kept;
    Ok(lost)
}
