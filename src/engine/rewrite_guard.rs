//! Notices records another writer's whole-file rewrite dropped, and
//! appends them again (issue 23 point 7).
//!
//! The reference's `offload_context` reads all of `context.jsonl` and
//! writes it back with its new lines, without a lock (docs/contract.md §6,
//! §16 item 11). A wsbench append that lands between its read and its
//! write is lost: the file is replaced by the reference's old copy plus
//! its own lines. wsbench cannot lock the reference out, but it can check:
//! the guard remembers each line this process appended (its offset and
//! exact bytes) and, with every new append, checks them and appends the
//! ones found nowhere in the file again, in their old order, with a
//! warning once per file and process.
//!
//! Where the backend offers it ([`Sandbox::append_checked`]: local,
//! bubblewrap, Docker with a bind mount), check, write and read-back are
//! one critical section under the append's `flock`, and a line that looks
//! missing is judged again only once the file has held still
//! ([`append_check`](crate::backend::append_check) has the rules and
//! bounds). Elsewhere (volumes, Pods, the cloud services) the same checks
//! run as separate reads around the append, waiting a bounded time for
//! the file's size and mtime to hold still before calling a line lost.
//!
//! A line is looked for at its offset, then by its exact bytes in the
//! file's newest [`SEARCH_WINDOW`] bytes (each line holds its message's
//! unique id), so a rewrite that moved it appends nothing twice. A file
//! that is gone (a deleted session) is not recreated: its lines are
//! forgotten.
//!
//! Limits: only this process's lines are checked, and only the newest
//! [`KEEP_BYTES`] of them per file (the reference loses what was appended
//! during its own read-write window, so the newest are the ones at risk),
//! in at most [`KEEP_FILES`] files. A rewrite that lands after this
//! process's last append to a file, or after the process ended, is not
//! seen: the README says both should not write one session at once.

use std::collections::{HashMap, HashSet, VecDeque};

use super::base::WorkspaceBase;
use super::error::WsResult;
use super::events::Event;
use crate::backend::append_check::{
    SEARCH_WINDOW, SETTLE_MAX, SETTLE_QUIET, Seen, TrackedRecord, all_in_place, locate, span,
    split_records,
};
use crate::backend::{ByteRange, Sandbox};

/// Bytes of recent records kept per file to check and re-append.
pub const KEEP_BYTES: usize = 256 * 1024;
/// Files tracked at once; the least recently appended one is forgotten.
pub const KEEP_FILES: usize = 32;
/// Looks at a file that seems short of a line before giving up on a
/// verdict (each after a wait for it to settle, at most [`SETTLE_MAX`]).
const LOOKS: usize = 3;
/// Re-append rounds per append before giving up (each round re-reads the
/// file; a writer that keeps dropping our lines still ends the loop).
const MAX_ROUNDS: usize = 3;

/// The records of one file, oldest first, with their byte total.
#[derive(Default)]
struct Track {
    records: VecDeque<TrackedRecord>,
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
        let earlier: Vec<TrackedRecord> = st
            .files
            .get(path)
            .map(|t| t.records.iter().cloned().collect())
            .unwrap_or_default();
        if let Some(out) = base.sandbox().append_checked(path, &earlier, data).await? {
            if out.unchecked > 0 {
                tracing::debug!(
                    "{path}: {} earlier line(s) are further than {SEARCH_WINDOW} bytes from \
                     the end and no longer checked",
                    out.unchecked
                );
            }
            track(&mut st, path, out.records);
            warn_once(base, &mut st, path, out.reappended);
            return Ok(GuardedAppend {
                offset: out.offset,
                reappended: out.reappended,
            });
        }
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
        warn_once(base, &mut st, path, reappended);
        Ok(GuardedAppend {
            offset: new_offset,
            reappended,
        })
    }
}

/// Warns once per file and process that `reappended` (> 0) lines were
/// lost to another writer and appended again.
fn warn_once(base: &WorkspaceBase, st: &mut State, path: &str, reappended: usize) {
    if reappended == 0 || !st.warned.insert(path.to_string()) {
        return;
    }
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

/// Replaces the tracked lines of `path` with `records` (file order), keeps
/// the newest [`KEEP_BYTES`] of them, and forgets the least recently used
/// file past [`KEEP_FILES`].
fn track(st: &mut State, path: &str, records: Vec<TrackedRecord>) {
    st.clock += 1;
    let used = st.clock;
    let track = st.files.entry(path.to_string()).or_default();
    track.used = used;
    track.bytes = records.iter().map(|r| r.data.len()).sum();
    track.records = records.into();
    trim(st, path);
}

/// Drops the oldest lines of `path` past [`KEEP_BYTES`] (one bigger than
/// the budget is not kept) and the least recent file past [`KEEP_FILES`].
fn trim(st: &mut State, path: &str) {
    if let Some(track) = st.files.get_mut(path) {
        while track.bytes > KEEP_BYTES {
            let Some(old) = track.records.pop_front() else {
                break;
            };
            track.bytes -= old.data.len();
        }
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
}

/// Appends the `lost` records and then `new` in one write, and tracks
/// each at its new offset; returns the offset of `new` (or of the first
/// record when there is no `new`).
async fn append_records(
    base: &WorkspaceBase,
    st: &mut State,
    path: &str,
    lost: &mut Vec<TrackedRecord>,
    new: Option<&[u8]>,
) -> WsResult<u64> {
    let lost_len: usize = lost.iter().map(|r| r.data.len()).sum();
    let mut buf: Vec<u8> = lost.drain(..).flat_map(|r| r.data).collect();
    if let Some(n) = new {
        buf.extend_from_slice(n);
    }
    let start = base.append_or_rewrite(path, &buf).await?;
    st.clock += 1;
    let used = st.clock;
    let track = st.files.entry(path.to_string()).or_default();
    track.used = used;
    for r in split_records(start, &buf) {
        track.bytes += r.data.len();
        track.records.push_back(r);
    }
    trim(st, path);
    Ok(start + lost_len as u64)
}

/// The unlocked check, for backends without [`Sandbox::append_checked`]:
/// takes out of the track of `path` the records found nowhere in the
/// file once it has held still, oldest first; the others get their
/// current offsets. A missing file forgets them all.
async fn dropped(base: &WorkspaceBase, st: &mut State, path: &str) -> WsResult<Vec<TrackedRecord>> {
    let Some(track) = st.files.get(path) else {
        return Ok(Vec::new());
    };
    let records: Vec<TrackedRecord> = track.records.iter().cloned().collect();
    let Some((from, to)) = span(&records) else {
        return Ok(Vec::new());
    };
    let sb = base.sandbox().as_ref();
    let result = async {
        // The cheap look first: every line at its own offset.
        if to - from <= SEARCH_WINDOW
            && all_in_place(&records, &read_window(sb, path, from, to).await?, from)
        {
            return Ok::<_, crate::backend::BackendError>(None);
        }
        let (first, first_whole) = search(sb, path, &records).await?;
        if !first.contains(&Seen::Absent) {
            return Ok(Some(first));
        }
        // Looks lost, but another writer may be half-way through its
        // truncate-and-write, and one look can be wrong: as on host files
        // (`backend::host::checked_append`), a line is lost only when two
        // whole looks miss it, the later after a wait for the file to
        // settle; otherwise it is judged again at the next append.
        let mut earlier = first_whole.then(|| first.clone());
        for _ in 0..LOOKS {
            settle(sb, path).await?;
            let (look, whole) = search(sb, path, &records).await?;
            if !whole {
                continue;
            }
            if !look.contains(&Seen::Absent) {
                return Ok(Some(look));
            }
            if let Some(prev) = &earlier {
                let mut both = look.clone();
                for (s, p) in both.iter_mut().zip(prev) {
                    if *s == Seen::Absent && *p != Seen::Absent {
                        *s = Seen::Deferred;
                    }
                }
                return Ok(Some(both));
            }
            earlier = Some(look);
        }
        let last = first
            .iter()
            .map(|s| {
                if *s == Seen::Absent {
                    Seen::Deferred
                } else {
                    *s
                }
            })
            .collect();
        Ok(Some(last))
    }
    .await;
    let seen = match result {
        Ok(None) => return Ok(Vec::new()),
        Ok(Some(seen)) => seen,
        Err(e) if e.is_not_found() => {
            st.files.remove(path);
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    let mut kept = Vec::with_capacity(records.len());
    let mut lost = Vec::new();
    for (mut r, s) in records.into_iter().zip(seen) {
        match s {
            Seen::At(at) => {
                r.offset = at;
                kept.push(r);
            }
            Seen::Deferred => kept.push(r),
            Seen::Absent => lost.push(r),
            Seen::Unchecked => {}
        }
    }
    kept.sort_by_key(|r| r.offset);
    if let Some(track) = st.files.get_mut(path) {
        track.bytes = kept.iter().map(|r| r.data.len()).sum();
        track.records = kept.into();
    }
    Ok(lost)
}

/// Bytes `[from, to)` of `path` (fewer when the file is shorter). A
/// backend without ranged reads (E2B, Daytona) downloads the whole file:
/// there the check is bounded only by the file's size.
async fn read_window(
    sb: &dyn Sandbox,
    path: &str,
    from: u64,
    to: u64,
) -> crate::backend::BackendResult<Vec<u8>> {
    if sb.capabilities().read_range {
        sb.read(
            path,
            Some(ByteRange {
                offset: from,
                len: to - from,
            }),
        )
        .await
    } else {
        let all = sb.read(path, None).await?;
        let start = (from as usize).min(all.len());
        let end = (to as usize).min(all.len());
        Ok(all[start..end].to_vec())
    }
}

/// Locates `records` in the newest [`SEARCH_WINDOW`] bytes of `path`;
/// the flag says whether the look was at a whole file (size and mtime the
/// same before and after the read, every byte read, a newline last).
async fn search(
    sb: &dyn Sandbox,
    path: &str,
    records: &[TrackedRecord],
) -> crate::backend::BackendResult<(Vec<Seen>, bool)> {
    let before = sb.stat(path).await?;
    let len = before.size;
    let start = len.saturating_sub(SEARCH_WINDOW);
    let window = read_window(sb, path, start, len).await?;
    let after = sb.stat(path).await?;
    let whole = (before.size, before.modified) == (after.size, after.modified)
        && window.len() as u64 == len - start
        && window.last() == Some(&b'\n');
    Ok((locate(records, &window, start), whole))
}

/// Waits until two looks [`SETTLE_QUIET`] apart see the same size and
/// mtime, for at most [`SETTLE_MAX`]; whether they did.
async fn settle(sb: &dyn Sandbox, path: &str) -> crate::backend::BackendResult<bool> {
    let began = std::time::Instant::now();
    let look = |st: crate::backend::FileStat| (st.size, st.modified);
    let mut last = look(sb.stat(path).await?);
    while began.elapsed() < SETTLE_MAX {
        tokio::time::sleep(SETTLE_QUIET).await;
        let now = look(sb.stat(path).await?);
        if now == last && now.0 > 0 {
            return Ok(true);
        }
        last = now;
    }
    Ok(false)
}
