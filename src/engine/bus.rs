//! One bounded broadcast bus, generic over what it carries: the engine's
//! [`crate::engine::events::EventBus`] and the agent's event stream are
//! both this, each with its own envelope.
//!
//! Semantics, shared by both: publishing never blocks and is a no-op
//! without subscribers; every published item gets the next sequence
//! number (from 1, per bus and its clones); a subscriber that falls more
//! than `capacity` items behind is told how many it missed instead of
//! slowing the publisher.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

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
