//! One bounded broadcast bus, generic over what it carries. The engine's
//! `EventBus` (in `events`) and the agent's event stream are both this,
//! each with its own envelope.
//!
//! Semantics, shared by both: publishing never blocks and is a no-op
//! without subscribers; every published item gets the next sequence
//! number (from 1, per bus and its clones); a subscriber that falls more
//! than `capacity` items behind is told how many it missed instead of
//! slowing the publisher.
//!
//! A bus is bounded in items, not bytes, so what carries command output
//! must bound itself: [`OutputMerge`] merges output chunks into one
//! buffer of at most a given number of bytes, keeping the newest and
//! counting what it dropped, and [`Throttle`] lets one merged chunk out per
//! interval. The Bash tool publishes output through both (at most one
//! event per stream per interval, each at most a few KiB), and the TUI's
//! Command pane takes its output through an [`OutputMerge`] once a frame.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::backend::{OutputChunk, StreamKind};

/// The sending side. Cheap to clone; all clones share the subscribers and
/// the sequence counter.
pub struct Bus<T> {
    tx: broadcast::Sender<T>,
    seq: Arc<AtomicU64>,
}

impl<T> Clone for Bus<T> {
    fn clone(&self) -> Self {
        Bus {
            tx: self.tx.clone(),
            seq: self.seq.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Bus<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("subscribers", &self.tx.receiver_count())
            .field("seq", &self.seq.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T: Clone> Bus<T> {
    /// A bus that keeps at most `capacity` items (at least 1) for a
    /// lagging subscriber.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Bus {
            tx,
            seq: Default::default(),
        }
    }

    /// Publishes the item `make` builds from the next sequence number;
    /// never blocks.
    pub fn publish_with(&self, make: impl FnOnce(u64) -> T) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self.tx.send(make(seq));
    }

    /// [`Bus::publish_with`], returning a copy of what was published.
    pub fn publish_returning(&self, make: impl FnOnce(u64) -> T) -> T {
        let mut sent = None;
        self.publish_with(|seq| {
            let item = make(seq);
            sent = Some(item.clone());
            item
        });
        sent.expect("publish_with calls make once")
    }

    /// A new subscriber that sees items published from now on.
    pub fn subscribe(&self) -> Subscriber<T> {
        Subscriber {
            rx: self.tx.subscribe(),
        }
    }
}

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum Received<T> {
    /// The next item (boxed: envelopes are large, `Missed` is a number).
    Event(Box<T>),
    /// The subscriber fell behind and this many items were dropped for it.
    Missed(u64),
}

/// One subscription to a [`Bus`].
#[derive(Debug)]
pub struct Subscriber<T> {
    rx: broadcast::Receiver<T>,
}

impl<T: Clone> Subscriber<T> {
    /// Waits for the next item; `None` once every publisher is gone.
    pub async fn recv(&mut self) -> Option<Received<T>> {
        match self.rx.recv().await {
            Ok(e) => Some(Received::Event(Box::new(e))),
            Err(broadcast::error::RecvError::Lagged(n)) => Some(Received::Missed(n)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// Takes the next item if one is ready (for a render loop that drains
    /// before drawing); `None` when nothing is pending or the bus closed.
    pub fn try_recv(&mut self) -> Option<Received<T>> {
        match self.rx.try_recv() {
            Ok(e) => Some(Received::Event(Box::new(e))),
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Received::Missed(n)),
            Err(_) => None,
        }
    }
}

/// Output chunks merged into at most `cap` bytes: when more arrives than
/// the consumer takes, the oldest bytes are dropped (a terminal shows the
/// newest) and counted. Chunks share the producer's buffers (`Bytes`), so
/// merging copies nothing.
#[derive(Debug)]
pub struct OutputMerge {
    chunks: VecDeque<OutputChunk>,
    bytes: usize,
    cap: usize,
    skipped: u64,
}

/// What [`OutputMerge::take`] hands over.
#[derive(Debug, Default)]
pub struct Merged {
    /// Bytes dropped (oldest first) since the last take, before `chunks`.
    pub skipped: u64,
    /// The kept output in order, consecutive chunks of one stream joined.
    pub chunks: Vec<OutputChunk>,
}

impl Merged {
    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.data.len()).sum()
    }
}

impl OutputMerge {
    /// An empty merge keeping at most `cap` bytes (at least 1).
    pub fn new(cap: usize) -> Self {
        OutputMerge {
            chunks: VecDeque::new(),
            bytes: 0,
            cap: cap.max(1),
            skipped: 0,
        }
    }

    /// Appends `data` of `stream`; drops the oldest bytes past the cap.
    pub fn push(&mut self, stream: StreamKind, mut data: Bytes) {
        if data.is_empty() {
            return;
        }
        if data.len() > self.cap {
            let cut = data.len() - self.cap;
            self.skipped += cut as u64;
            data = data.slice(cut..);
        }
        self.bytes += data.len();
        self.chunks.push_back(OutputChunk { stream, data });
        self.trim();
    }

    /// Puts back, before everything held, output a consumer took but had
    /// no time to handle (`rest`, oldest first, as [`OutputMerge::take`]
    /// gave it): it is handed out again by the next take. When the cap
    /// no longer holds it and what arrived since, its oldest bytes are
    /// dropped and counted, as with [`OutputMerge::push`].
    pub fn put_back(&mut self, rest: Vec<OutputChunk>) {
        for c in rest.into_iter().rev() {
            if c.data.is_empty() {
                continue;
            }
            self.bytes += c.data.len();
            self.chunks.push_front(c);
        }
        self.trim();
    }

    /// Drops the oldest bytes past the cap, counting them.
    fn trim(&mut self) {
        while self.bytes > self.cap {
            let front = self.chunks.front_mut().expect("bytes > 0");
            let over = self.bytes - self.cap;
            if front.data.len() <= over {
                self.bytes -= front.data.len();
                self.skipped += front.data.len() as u64;
                self.chunks.pop_front();
            } else {
                front.data = front.data.slice(over..);
                self.bytes -= over;
                self.skipped += over as u64;
            }
        }
    }

    /// True when nothing is held and nothing was skipped.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.skipped == 0
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Takes everything held. Consecutive chunks of one stream are joined
    /// into one (one copy of at most `cap` bytes).
    pub fn take(&mut self) -> Merged {
        let skipped = std::mem::take(&mut self.skipped);
        self.bytes = 0;
        let mut chunks: Vec<OutputChunk> = Vec::new();
        let mut run: Vec<Bytes> = Vec::new();
        let mut stream = None;
        let flush =
            |stream: Option<StreamKind>, run: &mut Vec<Bytes>, out: &mut Vec<OutputChunk>| {
                if let Some(stream) = stream {
                    let data = if run.len() == 1 {
                        run.pop().expect("one")
                    } else {
                        Bytes::from(run.concat())
                    };
                    run.clear();
                    out.push(OutputChunk { stream, data });
                }
            };
        for c in self.chunks.drain(..) {
            if stream != Some(c.stream) {
                flush(stream, &mut run, &mut chunks);
                stream = Some(c.stream);
            }
            run.push(c.data);
        }
        flush(stream, &mut run, &mut chunks);
        Merged { skipped, chunks }
    }
}

/// Lets merged output out at most once per `interval`: the first chunk
/// after a quiet spell goes at once, later ones wait for the interval.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    last: Option<Instant>,
}

impl Throttle {
    /// A throttle of one release per `interval`.
    pub fn new(interval: Duration) -> Self {
        Throttle {
            interval,
            last: None,
        }
    }

    /// When the next release may happen (now if none happened yet).
    pub fn next_at(&self) -> Instant {
        match self.last {
            Some(t) => t + self.interval,
            None => Instant::now(),
        }
    }

    /// Whether a release may happen now.
    pub fn ready(&self) -> bool {
        Instant::now() >= self.next_at()
    }

    /// Records a release now.
    pub fn released(&mut self) {
        self.last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_the_newest_bytes_and_counts_the_rest() {
        let mut m = OutputMerge::new(8);
        m.push(StreamKind::Stdout, Bytes::from_static(b"0123456789"));
        m.push(StreamKind::Stdout, Bytes::from_static(b"ab"));
        m.push(StreamKind::Stderr, Bytes::from_static(b"E"));
        m.push(StreamKind::Stdout, Bytes::from_static(b"cd"));
        assert_eq!(m.len(), 8);
        let got = m.take();
        assert_eq!(got.skipped, 7);
        let parts: Vec<(StreamKind, &[u8])> =
            got.chunks.iter().map(|c| (c.stream, &c.data[..])).collect();
        assert_eq!(
            parts,
            [
                (StreamKind::Stdout, &b"789ab"[..]),
                (StreamKind::Stderr, &b"E"[..]),
                (StreamKind::Stdout, &b"cd"[..]),
            ]
        );
        assert!(m.is_empty());
        assert_eq!(m.take().skipped, 0);
    }

    /// What a consumer could not handle in its frame comes back first,
    /// before what arrived since; past the cap its oldest bytes are
    /// counted as skipped, never silently lost.
    #[test]
    fn output_put_back_comes_first_and_is_counted_when_it_no_longer_fits() {
        let mut m = OutputMerge::new(8);
        m.push(StreamKind::Stdout, Bytes::from_static(b"abcdef"));
        let mut got = m.take();
        m.push(StreamKind::Stdout, Bytes::from_static(b"gh"));
        let rest = got.chunks.pop().unwrap();
        m.put_back(vec![OutputChunk {
            stream: rest.stream,
            data: rest.data.slice(2..),
        }]);
        assert_eq!(m.len(), 6);
        let again = m.take();
        assert_eq!(again.skipped, 0);
        assert_eq!(&again.chunks[0].data[..], b"cdefgh");

        m.push(StreamKind::Stdout, Bytes::from_static(b"12345"));
        m.put_back(vec![OutputChunk {
            stream: StreamKind::Stderr,
            data: Bytes::from_static(b"xyzw"),
        }]);
        let last = m.take();
        assert_eq!(last.skipped, 1, "the oldest put-back byte is dropped");
        let parts: Vec<(StreamKind, &[u8])> = last
            .chunks
            .iter()
            .map(|c| (c.stream, &c.data[..]))
            .collect();
        assert_eq!(
            parts,
            [
                (StreamKind::Stderr, &b"yzw"[..]),
                (StreamKind::Stdout, &b"12345"[..])
            ]
        );
    }

    #[test]
    fn a_flood_through_a_merge_stays_within_its_cap() {
        let mut m = OutputMerge::new(64 * 1024);
        let chunk = Bytes::from(vec![b'y'; 64 * 1024]);
        for _ in 0..1600 {
            m.push(StreamKind::Stdout, chunk.clone());
            assert!(m.len() <= 64 * 1024);
        }
        let got = m.take();
        assert_eq!(got.bytes(), 64 * 1024);
        assert_eq!(got.skipped, 1599 * 64 * 1024);
    }
}
