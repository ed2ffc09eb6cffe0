//! The relay's side of a recording: the [`Tap`] decodes each relayed chunk as it passes and
//! queues for the session's writer what the recording keeps.
//!
//! Decoding here, on chunks the relay shares rather than copies, reads frame headers and the
//! few messages kept whole (resize, error); output and input are queued as slices of the chunk.
//! What is not recorded — stdin without `--record-input` (skipped without being unmasked), and
//! in best-effort mode output over `--max-recording-rate` — is never queued, so the relay's
//! buffer is free again at once and a flood of output costs the relay no fresh memory.
//!
//! best-effort: the tap never waits. When the queue to the writer is full (a slow disk, a busy
//! machine) it stops queueing and the recording is marked truncated; the stream is never
//! slowed, buffered or changed.
//!
//! strict: the relay gives the tap each chunk before the client gets it and waits for it: for
//! room in the queue (the writer's pace), and for `--max-recording-rate` (a throttle, not a
//! gap). The size cap counts recorded bytes; once it is passed, or once the recording cannot go
//! on (a failed write, an undecodable stream, a writer that made no progress for
//! [`STALL_LIMIT`]), the session's [`EndSignal`] ends the stream at its next frame boundary.
//! What the relay delivers up to that boundary is still recorded.
//!
//! Every queued item also takes room under the replica's `--max-recording-memory`
//! ([`super::memory`]): best-effort, a session that finds none stops being recorded (marked
//! truncated); strict, its relay waits for room as it waits for its own queue.
//!
//! The writer is woken only by the first item of a batch (the queue was empty); it then waits
//! a short while and writes all that came meanwhile. A fast stream thus costs the relay one
//! wake-up per batch instead of one per chunk (each a system call), and an idle one none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::decode::{self, Decoder, Direction, Event};
use super::memory::RecordingMemory;
use super::rate::RateBudget;
use crate::stream::ending::{EndSignal, Ending};

/// Bytes in flight between a relay and its writer (each queued item counts at least
/// [`ITEM_COST`]).
const TAP_QUEUE_BYTES: usize = 16 << 20;
/// What one queued item counts for at least.
const ITEM_COST: usize = 64;
/// What an output or input event's line adds to its text (`[123.456789, "o", ""]` and a
/// newline), counted with the text so that what is queued counts about what the writer will
/// hold of it.
const LINE_COST: usize = 32;
/// strict: how long a relay waits for room in the queue before the recording counts as failed.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

/// What the tap queues for the writer, with the time it was relayed.
#[derive(Debug)]
pub(super) enum Item {
    /// Output (`input: false`) or recorded input bytes: a slice of the relayed chunk where
    /// the bytes are in it as they are (not masked, not base64).
    Text { input: bool, data: Bytes },
    /// The terminal was resized.
    Resize { width: u16, height: u16 },
    /// The error channel's message (a Status on v4+).
    Error(Vec<u8>),
    /// A gap over `--max-recording-rate` ended (or the session did): bytes not recorded.
    Gap(u64),
    /// The stream could not be decoded; nothing after this is recorded.
    Undecodable(String),
    /// strict: the server ends the session, for this reason.
    Ended(String),
    /// A marker: someone joined or left, the session was terminated.
    Marker(String),
}

impl Item {
    /// What the item counts for in the queue's bound.
    fn cost(&self) -> usize {
        match self {
            Item::Text { data, .. } => (data.len() + LINE_COST).max(ITEM_COST),
            Item::Error(m) => m.len().max(ITEM_COST),
            Item::Marker(m) => m.len() + ITEM_COST,
            _ => ITEM_COST,
        }
    }
}

/// The queue between a relay and its writer.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pub(super) items: std::collections::VecDeque<(Instant, Item)>,
    /// The items' cost (taken under the replica's recording memory).
    pub(super) bytes: usize,
}

/// What a relay and its writer share: the items queued and not yet written, and the flags.
#[derive(Debug)]
pub(super) struct TapShared {
    pub(super) queue: std::sync::Mutex<Queue>,
    /// best-effort: the queue was full once; nothing more is queued.
    pub(super) overflow: AtomicBool,
    /// The session ended: the writer drains the queue and finishes.
    pub(super) closed: AtomicBool,
    /// Wakes the writer: on the first item after the queue was drained, and on close.
    pub(super) wake: tokio::sync::Notify,
    /// strict: the writer took a batch (the queue has room again), or gave up.
    pub(super) room: tokio::sync::Notify,
    /// strict: the recording cannot go on; nothing more is queued.
    pub(super) failed: AtomicBool,
    /// strict: how the session is ended when its recording cannot go on.
    pub(super) end: Option<EndSignal>,
    /// The replica's bound on recording memory, which every queued item takes room under.
    pub(super) memory: Arc<RecordingMemory>,
    /// best-effort: the overflow was the replica's recording memory being full (else the
    /// session's own queue).
    pub(super) memory_full: AtomicBool,
}

impl Drop for TapShared {
    fn drop(&mut self) {
        // What no writer took (one that was aborted) gives its room back.
        let left = self.queue.get_mut().map(|q| q.bytes).unwrap_or(0);
        self.memory.give(left as u64);
    }
}

impl TapShared {
    /// What a new recording's relay and writer share: `end` (strict) ends the session when the
    /// recording cannot go on; items take room under `memory`.
    pub(super) fn new(end: Option<EndSignal>, memory: Arc<RecordingMemory>) -> TapShared {
        TapShared {
            queue: std::sync::Mutex::default(),
            overflow: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            room: tokio::sync::Notify::new(),
            failed: AtomicBool::new(false),
            end,
            memory,
            memory_full: AtomicBool::new(false),
        }
    }

    /// strict: the recording cannot go on: stop queueing, release waiting relays, end the
    /// session.
    pub(super) fn fail(&self, why: &str) {
        self.failed.store(true, Ordering::SeqCst);
        self.room.notify_waiters();
        if let Some(end) = &self.end {
            end.end(Ending::recording_failed(why));
        }
    }

    /// The writer took what was queued: room for waiting relays.
    pub(super) fn took_batch(&self) {
        self.room.notify_waiters();
    }
}

/// Writes marker events into a recording from outside the relay (who joined and left, a
/// termination); never waits.
#[derive(Clone, Debug)]
pub struct Marker {
    pub(super) shared: Arc<TapShared>,
}

impl Marker {
    /// A marker event `[t, "m", text]` now.
    pub fn mark(&self, text: &str) {
        let shared = &*self.shared;
        if shared.closed.load(Ordering::SeqCst) || shared.failed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut queue) = shared.queue.lock() else {
            return;
        };
        let first = queue.items.is_empty();
        let cost = ITEM_COST + text.len();
        // A few bytes now and then: counted whether or not they fit.
        shared.memory.force(cost as u64);
        queue.bytes += cost;
        queue
            .items
            .push_back((Instant::now(), Item::Marker(text.to_owned())));
        drop(queue);
        if first {
            shared.wake.notify_one();
        }
    }
}

/// How a strict relay's wait for room ended.
enum Waited {
    Queued,
    /// The session's own queue stayed full.
    QueueFull,
    /// The replica's recording memory stayed full.
    MemoryFull,
}

/// The relay's side of a recording (module docs).
#[derive(Debug)]
pub struct Tap {
    pub(super) shared: Arc<TapShared>,
    /// When the session started (event times are counted from here).
    pub(super) started: Instant,
    /// The decoder and the rate budget (both directions of the relay take turns).
    pub(super) state: std::sync::Mutex<TapState>,
    /// strict: the size cap on recorded bytes (0 = none).
    pub(super) strict_cap: Option<u64>,
    /// strict: why the session ends at the cap.
    pub(super) strict_cap_why: &'static str,
}

/// The tap's decoding state.
pub(super) struct TapState {
    pub(super) decoder: Decoder,
    pub(super) budget: RateBudget,
    pub(super) record_input: bool,
    /// Decoding failed: nothing more is decoded.
    pub(super) failed: bool,
    /// strict: bytes of text recorded so far.
    pub(super) recorded: u64,
    /// strict: the size cap was passed and the session is being ended.
    pub(super) capped: bool,
}

impl std::fmt::Debug for TapState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapState")
            .field("budget", &self.budget)
            .field("failed", &self.failed)
            .field("recorded", &self.recorded)
            .finish_non_exhaustive()
    }
}

/// `part` as a slice of `chunk` when it lies in it (no copy), else a copy.
fn share(chunk: &Bytes, part: &[u8]) -> Bytes {
    let within = chunk.as_ptr_range();
    let range = part.as_ptr_range();
    if !part.is_empty() && within.start <= range.start && range.end <= within.end {
        chunk.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

/// What one chunk gave.
struct Decoded {
    items: Vec<Item>,
    /// strict: bytes of text in `items`.
    text_len: usize,
    /// The decoder failed on this chunk.
    undecodable: bool,
}

impl Tap {
    /// Take bytes about to be relayed client → container.
    pub async fn inbound(&self, data: Bytes) {
        self.take(Direction::In, data).await;
    }

    /// Take bytes about to be relayed container → client.
    pub async fn outbound(&self, data: Bytes) {
        self.take(Direction::Out, data).await;
    }

    async fn take(&self, dir: Direction, data: Bytes) {
        let at = Instant::now();
        let t = at.duration_since(self.started).as_secs_f64();
        match self.strict_cap {
            None => {
                if self.shared.overflow.load(Ordering::Relaxed) {
                    return;
                }
                if let Some(d) = self.decode(dir, &data, Some(t))
                    && !d.items.is_empty()
                {
                    self.push(at, d.items);
                }
            }
            Some(cap) => self.take_strict(cap, dir, data, at, t).await,
        }
    }

    /// Decode one chunk into items. With `skip_over_rate` (best-effort, at that session time)
    /// text over the rate bound is skipped and gaps are marked; without, every text is kept.
    /// `None` when the tap is broken or decoding failed earlier.
    fn decode(&self, dir: Direction, data: &Bytes, skip_over_rate: Option<f64>) -> Option<Decoded> {
        let Ok(mut state) = self.state.lock() else {
            self.shared.overflow.store(true, Ordering::Relaxed);
            return None;
        };
        let TapState {
            decoder,
            budget,
            record_input,
            failed,
            ..
        } = &mut *state;
        if *failed {
            return None;
        }
        let mut items = Vec::new();
        let mut text_len = 0;
        let mut text = |input: bool, part: &[u8]| {
            if let Some(t) = skip_over_rate {
                if !budget.admit(t, part.len()) {
                    return;
                }
                let gap = budget.end_gap();
                if gap > 0 {
                    items.push(Item::Gap(gap));
                }
            }
            text_len += part.len();
            items.push(Item::Text {
                input,
                data: share(data, part),
            });
        };
        let mut resizes_and_errors = Vec::new();
        // The decoder runs on the relay's task: should it ever panic (it is fuzzed not to),
        // the recording ends there, never the stream.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            decoder.feed(dir, data, &mut |ev| match ev {
                Event::Output(b) => text(false, b),
                Event::Input(b) if *record_input => text(true, b),
                Event::Input(_) => {}
                Event::Resize { width, height } => {
                    resizes_and_errors.push(Item::Resize { width, height })
                }
                Event::Error(m) => resizes_and_errors.push(Item::Error(m)),
            })
        }))
        .unwrap_or_else(|_| Err(decode::DecodeError("the decoder failed".to_owned())));
        // A chunk's resizes and error messages are queued after its text. A chunk is one
        // direction, so this can only move recorded input after a resize of the same read.
        items.append(&mut resizes_and_errors);
        let undecodable = decoded.is_err();
        if let Err(e) = decoded {
            *failed = true;
            items.push(Item::Undecodable(e.0));
        }
        Some(Decoded {
            items,
            text_len,
            undecodable,
        })
    }

    /// best-effort: queue without waiting; a full queue ends the recording (marked truncated).
    fn push(&self, at: Instant, items: Vec<Item>) {
        let shared = &*self.shared;
        let cost: usize = items.iter().map(Item::cost).sum();
        let Ok(mut queue) = shared.queue.lock() else {
            shared.overflow.store(true, Ordering::Relaxed);
            return;
        };
        if queue.bytes + cost > TAP_QUEUE_BYTES {
            // Full (a slow disk, a busy machine): everything after this point is unrecorded.
            shared.overflow.store(true, Ordering::Relaxed);
            return;
        }
        if !shared.memory.try_take(cost as u64) {
            // The replica's recordings hold all the memory they may.
            shared.memory_full.store(true, Ordering::Relaxed);
            shared.overflow.store(true, Ordering::Relaxed);
            return;
        }
        let first = queue.items.is_empty();
        queue.bytes += cost;
        queue.items.extend(items.into_iter().map(|i| (at, i)));
        drop(queue);
        if first {
            shared.wake.notify_one();
        }
    }

    /// Queue one small item whatever the bounds say (the end of a gap).
    fn push_forced(&self, at: Instant, item: Item) {
        let shared = &*self.shared;
        let cost = item.cost();
        let Ok(mut queue) = shared.queue.lock() else {
            return;
        };
        shared.memory.force(cost as u64);
        let first = queue.items.is_empty();
        queue.bytes += cost;
        queue.items.push_back((at, item));
        drop(queue);
        if first {
            shared.wake.notify_one();
        }
    }

    /// strict: record the chunk whole, waiting for the writer and the rate; end the session
    /// when the recording cannot go on.
    async fn take_strict(&self, cap: u64, dir: Direction, data: Bytes, at: Instant, t: f64) {
        if self.shared.failed.load(Ordering::SeqCst) {
            return;
        }
        let Some(mut d) = self.decode(dir, &data, None) else {
            self.shared.fail("the recorder failed");
            return;
        };
        let (wait, capped_now) = match self.state.lock() {
            Ok(mut s) => {
                s.recorded += d.text_len as u64;
                let capped_now = cap > 0 && s.recorded > cap && !s.capped;
                s.capped |= capped_now;
                (s.budget.reserve(t, d.text_len), capped_now)
            }
            Err(_) => (0.0, false),
        };
        if capped_now {
            // This chunk and those up to the stream's next frame boundary are still recorded.
            let why = self.strict_cap_why;
            d.items.push(Item::Ended(why.to_owned()));
            if let Some(end) = &self.shared.end {
                end.end(Ending::recording_failed(why));
            }
        }
        if !d.items.is_empty() {
            match self.push_waiting(at, d.items).await {
                Waited::Queued => {}
                Waited::QueueFull => {
                    self.shared.fail(&format!(
                        "the recorder made no progress for {}s",
                        STALL_LIMIT.as_secs()
                    ));
                    return;
                }
                Waited::MemoryFull => {
                    self.shared.fail(&format!(
                        "the replica's recording memory (--max-recording-memory) stayed full for {}s",
                        STALL_LIMIT.as_secs()
                    ));
                    return;
                }
            }
        }
        if d.undecodable {
            self.shared.fail("the stream could not be decoded");
            return;
        }
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }

    /// strict: queue, waiting (at most [`STALL_LIMIT`]) for room in the session's queue and
    /// under the replica's recording memory; what was still missing when the time was up.
    /// Nothing is queued once the recording failed.
    async fn push_waiting(&self, at: Instant, items: Vec<Item>) -> Waited {
        let shared = &*self.shared;
        let cost: usize = items.iter().map(Item::cost).sum();
        let deadline = tokio::time::Instant::now() + STALL_LIMIT;
        let mut items = Some(items);
        loop {
            let room = shared.room.notified();
            let memory = shared.memory.room.notified();
            tokio::pin!(room, memory);
            room.as_mut().enable();
            memory.as_mut().enable();
            let missing = {
                let Ok(mut queue) = shared.queue.lock() else {
                    return Waited::Queued;
                };
                if shared.failed.load(Ordering::SeqCst) {
                    return Waited::Queued;
                }
                if !(queue.items.is_empty() || queue.bytes + cost <= TAP_QUEUE_BYTES) {
                    Waited::QueueFull
                } else if !shared.memory.try_take(cost as u64) {
                    Waited::MemoryFull
                } else {
                    let first = queue.items.is_empty();
                    queue.bytes += cost;
                    queue
                        .items
                        .extend(items.take().into_iter().flatten().map(|i| (at, i)));
                    drop(queue);
                    if first {
                        shared.wake.notify_one();
                    }
                    return Waited::Queued;
                }
            };
            let woken = async {
                tokio::select! {
                    _ = room => {},
                    _ = memory => {},
                }
            };
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return missing;
            }
        }
    }

    /// The session ended: a gap still open is closed, and the writer writes what is queued
    /// and finishes the file.
    pub(super) fn close(&self) {
        let gap = self
            .state
            .lock()
            .map(|mut s| s.budget.end_gap())
            .unwrap_or(0);
        if gap > 0 {
            self.push_forced(Instant::now(), Item::Gap(gap));
        }
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }
}
