//! The Logs pane's lines: bounded in lines and bytes, kept by level, in
//! the order they happened (issue 16).
//!
//! * One queue per level. When the store is over its budget the oldest
//!   line of the *lowest* level held goes first: 100,000 debug lines never
//!   evict one warn line (they evict each other), and what was dropped is
//!   counted per level.
//! * Lines are ordered by their time, then by arrival: a line that
//!   arrives late (stderr goes through a pipe and a thread; the bus
//!   through a channel) is put where it belongs, not at the end.
//! * A filtered view is an ordered index of keys kept in step with
//!   pushes and evictions, so neither a push nor a frame scans the store.

use std::collections::VecDeque;
use std::time::SystemTime;

use crate::tui::action::{Level, LogLine};

/// Where a line sits: its time, then its arrival number.
pub(super) type Key = (SystemTime, u64);

const LEVELS: [Level; 4] = [Level::Debug, Level::Info, Level::Warn, Level::Error];

fn idx(l: Level) -> usize {
    match l {
        Level::Debug => 0,
        Level::Info => 1,
        Level::Warn => 2,
        Level::Error => 3,
    }
}

/// Bytes a line costs: its text and its bookkeeping.
fn weight(l: &LogLine) -> usize {
    l.message.len() + l.source.len() + std::mem::size_of::<(Key, LogLine, usize)>()
}

/// The lines, by level.
#[derive(Debug)]
pub(super) struct LogStore {
    levels: [VecDeque<(Key, LogLine, usize)>; 4],
    max_lines: usize,
    max_bytes: usize,
    lines: usize,
    bytes: usize,
    dropped: [u64; 4],
    arrivals: u64,
}

impl LogStore {
    /// A store of at most `max_lines` lines (at least 1) and `max_bytes`.
    pub(super) fn new(max_lines: usize, max_bytes: usize) -> Self {
        LogStore {
            levels: Default::default(),
            max_lines: max_lines.max(1),
            max_bytes,
            lines: 0,
            bytes: 0,
            dropped: [0; 4],
            arrivals: 0,
        }
    }

    /// Lines held.
    pub(super) fn len(&self) -> usize {
        self.lines
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds a line in its place; returns its key and the keys (with
    /// their lines' levels) evicted to make room.
    pub(super) fn push(&mut self, line: LogLine) -> (Key, Vec<(Key, Level)>) {
        self.arrivals += 1;
        let key = (line.at, self.arrivals);
        let size = weight(&line);
        let q = &mut self.levels[idx(line.level)];
        let at = q.partition_point(|(k, ..)| *k < key);
        q.insert(at, (key, line, size));
        self.lines += 1;
        self.bytes += size;
        let mut evicted = Vec::new();
        while self.lines > self.max_lines || (self.bytes > self.max_bytes && self.lines > 1) {
            let Some(i) = self.levels.iter().position(|q| !q.is_empty()) else {
                break;
            };
            let (k, _, sz) = self.levels[i].pop_front().expect("not empty");
            self.lines -= 1;
            self.bytes -= sz;
            self.dropped[i] += 1;
            evicted.push((k, LEVELS[i]));
        }
        (key, evicted)
    }

    /// The line with `key` at `level`, if still held.
    pub(super) fn get(&self, key: Key, level: Level) -> Option<&LogLine> {
        let q = &self.levels[idx(level)];
        let i = q.binary_search_by(|(k, ..)| k.cmp(&key)).ok()?;
        Some(&q[i].1)
    }

    /// Every line with its key, in order (a merge of the level queues).
    pub(super) fn iter(&self) -> impl Iterator<Item = (Key, &LogLine)> {
        let mut all: Vec<(Key, &LogLine)> = self
            .levels
            .iter()
            .flat_map(|q| q.iter().map(|(k, l, _)| (*k, l)))
            .collect();
        all.sort_by_key(|(k, _)| *k);
        all.into_iter()
    }

    /// Lines dropped so far, by level (`debug`, `info`, `warn`, `error`).
    pub(super) fn dropped(&self) -> impl Iterator<Item = (Level, u64)> + '_ {
        LEVELS.iter().map(|l| (*l, self.dropped[idx(*l)]))
    }

    /// Lines dropped so far, all levels.
    pub(super) fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Drops every line (the dropped counts stay).
    pub(super) fn clear(&mut self) {
        for q in &mut self.levels {
            q.clear();
        }
        self.lines = 0;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(level: Level, secs: u64, msg: &str) -> LogLine {
        LogLine {
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
            level,
            source: "t".into(),
            message: msg.into(),
        }
    }

    #[test]
    fn debug_lines_evict_debug_lines_only() {
        let mut s = LogStore::new(10, usize::MAX);
        s.push(at(Level::Warn, 1, "keep me"));
        s.push(at(Level::Info, 2, "me too"));
        for i in 0..100 {
            s.push(at(Level::Debug, 3 + i, "chatter"));
        }
        let kept: Vec<&str> = s.iter().map(|(_, l)| l.message.as_str()).collect();
        assert_eq!(kept.len(), 10);
        assert_eq!(&kept[..2], ["keep me", "me too"]);
        let dropped: Vec<(Level, u64)> = s.dropped().collect();
        assert_eq!(dropped[0], (Level::Debug, 92));
        assert_eq!(dropped[1], (Level::Info, 0));
    }

    #[test]
    fn a_late_line_goes_where_it_happened() {
        let mut s = LogStore::new(10, usize::MAX);
        s.push(at(Level::Info, 1, "a"));
        s.push(at(Level::Info, 3, "c"));
        s.push(at(Level::Warn, 2, "b"));
        s.push(at(Level::Info, 2, "b2"));
        let order: Vec<&str> = s.iter().map(|(_, l)| l.message.as_str()).collect();
        assert_eq!(order, ["a", "b", "b2", "c"]);
    }

    #[test]
    fn the_byte_budget_holds() {
        let mut s = LogStore::new(1_000_000, 64 * 1024);
        for i in 0..10_000 {
            s.push(at(Level::Debug, i, &"x".repeat(1000)));
        }
        assert!(s.bytes() <= 64 * 1024);
        assert!(s.len() > 10);
    }
}
