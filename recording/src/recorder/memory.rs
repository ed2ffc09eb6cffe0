//! `--max-recording-memory`: one bound on the memory the recordings of a replica hold, shared
//! by all its sessions.
//!
//! Recorded data is counted from the moment the relay queues it ([`super::tap`]) until the
//! store has it: in the session's queue, then in its writer's buffers until the part holding it
//! is written ([`super::writer`]). A session also has its own queue bound (16 MiB); this one
//! keeps many sessions together from holding more than the operator allows.
//!
//! Queueing takes room only while the total is under the bound ([`RecordingMemory::try_take`]);
//! a writer's escaping may make its lines somewhat bigger than what was queued, and that growth
//! is counted without a check ([`RecordingMemory::force`]) — the bound is then passed by at most
//! that growth, and no more is queued until writes have brought the total back under it.
//!
//! When the bound is reached: best-effort, the session that cannot queue stops being recorded
//! (its recording marked truncated, as when its own queue is full); strict, its relay waits for
//! room, and a session that waits longer than the stall limit is ended (as for a recorder that
//! makes no progress).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::gauge::Gauge;

/// The bound and what is held under it. Shared by a replica's recorder and its sessions.
#[derive(Debug, Default)]
pub struct RecordingMemory {
    /// The bound in bytes; 0 = none.
    limit: u64,
    used: AtomicU64,
    /// Room was given back: relays waiting for it (strict) look again.
    pub(super) room: tokio::sync::Notify,
    /// `poddebug_recording_memory_bytes`.
    gauge: Gauge,
}

impl RecordingMemory {
    /// A bound of `limit` bytes (0: none), reported in `gauge`.
    pub fn new(limit: u64, gauge: Gauge) -> RecordingMemory {
        RecordingMemory {
            limit,
            used: AtomicU64::new(0),
            room: tokio::sync::Notify::new(),
            gauge,
        }
    }

    /// The bound (0: none).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    fn report(&self, used: u64) {
        self.gauge.set(i64::try_from(used).unwrap_or(i64::MAX));
    }

    /// Take `n` bytes if they fit under the bound (anything fits while nothing is held, so that
    /// a chunk larger than the bound is never refused for ever). Whether they were taken.
    pub fn try_take(&self, n: u64) -> bool {
        let taken = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (self.limit == 0 || used == 0 || used.saturating_add(n) <= self.limit)
                    .then(|| used.saturating_add(n))
            });
        match taken {
            Ok(before) => {
                self.report(before.saturating_add(n));
                true
            }
            Err(_) => false,
        }
    }

    /// Count `n` more bytes, whether or not they fit (a writer's lines grew past what was
    /// queued).
    pub fn force(&self, n: u64) {
        let before = self.used.fetch_add(n, Ordering::AcqRel);
        self.report(before.saturating_add(n));
    }

    /// Give `n` bytes back, and wake the relays waiting for room.
    pub fn give(&self, n: u64) {
        if n == 0 {
            return;
        }
        let before = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(n))
            })
            .unwrap_or(0);
        self.report(before.saturating_sub(n));
        self.room.notify_waiters();
    }
}

/// What one holder (a session's writer) has counted: adjusted to what it holds as it goes,
/// given back whole when it is dropped (a writer that ends, or is aborted).
#[derive(Debug)]
pub struct Held {
    memory: Arc<RecordingMemory>,
    bytes: u64,
}

impl Held {
    /// Nothing held yet.
    pub fn new(memory: Arc<RecordingMemory>) -> Held {
        Held { memory, bytes: 0 }
    }

    /// `n` bytes taken elsewhere (by the relay's queue) are now this holder's.
    pub fn adopt(&mut self, n: u64) {
        self.bytes += n;
    }

    /// The holder now holds `n` bytes: what it held beyond is given back, what it holds beyond
    /// is counted.
    pub fn set(&mut self, n: u64) {
        if n < self.bytes {
            self.memory.give(self.bytes - n);
        } else if n > self.bytes {
            self.memory.force(n - self.bytes);
        }
        self.bytes = n;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.memory.give(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_taken_under_the_bound_and_given_back() {
        let m = Arc::new(RecordingMemory::new(100, Gauge::default()));
        assert!(m.try_take(60));
        assert!(!m.try_take(50), "over the bound");
        assert!(m.try_take(40));
        assert_eq!(m.used(), 100);
        m.give(100);
        assert!(m.try_take(500), "anything fits an empty budget");
        m.give(500);
        let mut held = Held::new(m.clone());
        assert!(m.try_take(30));
        held.adopt(30);
        held.set(45);
        assert_eq!(m.used(), 45, "growth is counted");
        held.set(10);
        assert_eq!(m.used(), 10);
        drop(held);
        assert_eq!(m.used(), 0, "all given back at the end");
        let none = RecordingMemory::new(0, Gauge::default());
        assert!(none.try_take(u64::MAX / 2) && none.try_take(u64::MAX / 2));
    }
}
