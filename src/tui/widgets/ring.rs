//! A bounded ring buffer with stable sequence numbers.
//!
//! Logs and command output live here so memory stays flat however much
//! arrives (k9s and lazydocker users' top complaint): pushing past the
//! capacity drops the oldest item. Every item keeps the sequence number
//! it was pushed with, so filtered views and selections can refer to
//! items without shifting when old ones fall off.
//!
//! A ring can also have a budget in bytes ([`Ring::with_budget`],
//! [`Ring::push_sized`]): lines of output differ in size by four orders of
//! magnitude, so a line count alone does not bound memory (issue 16).

use std::collections::VecDeque;

/// A FIFO holding at most `capacity` items.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    /// Size in bytes of each item, as given to [`Ring::push_sized`].
    sizes: VecDeque<usize>,
    capacity: usize,
    /// Most bytes held (sum of the sizes given).
    max_bytes: usize,
    bytes: usize,
    /// Sequence number of `items[0]`.
    first_seq: u64,
}

impl<T> Ring<T> {
    /// An empty ring keeping at most `capacity` items (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self::with_budget(capacity, usize::MAX)
    }

    /// An empty ring keeping at most `capacity` items (at least 1) and at
    /// most `max_bytes` bytes of the sizes given to [`Ring::push_sized`]
    /// (the newest item is always kept, whatever its size).
    pub fn with_budget(capacity: usize, max_bytes: usize) -> Self {
        Ring {
            items: VecDeque::with_capacity(capacity.clamp(1, 4096)),
            sizes: VecDeque::with_capacity(capacity.clamp(1, 4096)),
            capacity: capacity.max(1),
            max_bytes,
            bytes: 0,
            first_seq: 0,
        }
    }

    /// Appends an item of size 0; returns the evicted one when full.
    pub fn push(&mut self, item: T) -> Option<T> {
        let mut evicted = None;
        self.push_sized(item, 0, |e| evicted = Some(e));
        evicted
    }

    /// Appends an item of `size` bytes, evicting the oldest items (each
    /// given to `evicted`) while more than `capacity` items or more than
    /// the byte budget are held.
    pub fn push_sized(&mut self, item: T, size: usize, mut evicted: impl FnMut(T)) {
        self.items.push_back(item);
        self.sizes.push_back(size);
        self.bytes += size;
        while self.items.len() > self.capacity
            || (self.bytes > self.max_bytes && self.items.len() > 1)
        {
            let (Some(old), Some(sz)) = (self.items.pop_front(), self.sizes.pop_front()) else {
                break;
            };
            self.bytes -= sz;
            self.first_seq += 1;
            evicted(old);
        }
    }

    /// Bytes held (the sum of the sizes given).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The byte budget.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Most items held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sequence number of the oldest item held.
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Sequence number the next push gets.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.items.len() as u64
    }

    /// Items dropped so far.
    pub fn dropped(&self) -> u64 {
        self.first_seq
    }

    /// The item with sequence number `seq`, if still held.
    pub fn get_seq(&self, seq: u64) -> Option<&T> {
        let i = seq.checked_sub(self.first_seq)?;
        self.items.get(usize::try_from(i).ok()?)
    }

    /// The `i`-th item held (0 = oldest).
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)
    }

    /// Iterates oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    /// Iterates `(seq, item)` oldest first.
    pub fn iter_seq(&self) -> impl DoubleEndedIterator<Item = (u64, &T)> {
        let first = self.first_seq;
        self.items
            .iter()
            .enumerate()
            .map(move |(i, t)| (first + i as u64, t))
    }

    /// Drops every item (sequence numbers keep counting).
    pub fn clear(&mut self) {
        self.first_seq += self.items.len() as u64;
        self.items.clear();
        self.sizes.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_oldest_and_keeps_sequence_numbers() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(i);
        }
        assert_eq!(r.len(), 3);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(r.first_seq(), 2);
        assert_eq!(r.get_seq(3), Some(&3));
        assert_eq!(r.get_seq(1), None);
        assert_eq!(r.next_seq(), 5);
        r.clear();
        assert!(r.is_empty());
        assert_eq!(r.next_seq(), 5);
    }

    #[test]
    fn the_byte_budget_evicts_and_keeps_the_newest() {
        let mut r = Ring::with_budget(100, 10);
        let mut gone = Vec::new();
        for i in 0..5 {
            r.push_sized(i, 4, |e| gone.push(e));
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!(r.bytes(), 8);
        assert_eq!(gone, [0, 1, 2]);
        r.push_sized(9, 50, |_| {});
        assert_eq!(
            r.iter().copied().collect::<Vec<_>>(),
            [9],
            "the newest stays"
        );
        assert_eq!(r.dropped(), 5);
    }
}
