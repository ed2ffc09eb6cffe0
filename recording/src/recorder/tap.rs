//! The relay's side of a recording: the [`Tap`] is the session's
//! [`poddebug_stream::Recorder`]. The relay hands it the messages it parsed and forwarded —
//! input, output (as slices of the chunk the relay read, not copies), resizes, the error
//! channel's message — and the tap queues for the session's writer what the recording keeps.
//! What is not recorded — stdin without `--record-input`, and in best-effort mode output over
//! `--max-recording-rate` — is never queued, so the relay's buffer is free again at once and a
//! flood of output costs the relay no fresh memory.
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

use poddebug_stream::{EndSignal, Ending, Recorded};

use super::memory::RecordingMemory;
use super::rate::RateBudget;

/// The ending of a session whose recording cannot go on (`--recording-mode=strict`).
pub fn recording_failed(why: &str) -> Ending {
    Ending {
        error: poddebug_types::ApiError::ServiceUnavailable(format!(
            "the session was ended because its recording cannot go on ({why}), and this \
             server runs with --recording-mode=strict"
        )),
        close_code: poddebug_stream::websocket::frame::CLOSE_POLICY_VIOLATION,
        label: "recording failed",
    }
}

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
    /// What the writer has done (items turned into lines, writes to the store): the end of a
    /// session waits for a writer as long as this moves.
    pub(super) progress: std::sync::atomic::AtomicU64,
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
            progress: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The writer did something.
    pub(super) fn progressed(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// strict: the recording cannot go on: stop queueing, release waiting relays, end the
    /// session.
    pub(super) fn fail(&self, why: &str) {
        self.failed.store(true, Ordering::SeqCst);
        self.room.notify_waiters();
        if let Some(end) = &self.end {
            end.end(recording_failed(why));
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

/// The tap's accounting.
pub(super) struct TapState {
    pub(super) budget: RateBudget,
    pub(super) record_input: bool,
    /// strict: bytes of text recorded so far.
    pub(super) recorded: u64,
    /// strict: the size cap was passed and the session is being ended.
    pub(super) capped: bool,
}

impl std::fmt::Debug for TapState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapState")
            .field("budget", &self.budget)
            .field("recorded", &self.recorded)
            .finish_non_exhaustive()
    }
}

/// What one read gave.
struct Decoded {
    items: Vec<Item>,
    /// strict: bytes of text in `items`.
    text_len: usize,
}

impl poddebug_stream::Recorder for Tap {
    async fn record(&self, events: Vec<Recorded>) {
        let at = Instant::now();
        let t = at.duration_since(self.started).as_secs_f64();
        match self.strict_cap {
            None => {
                if self.shared.overflow.load(Ordering::Relaxed) {
                    return;
                }
                if let Some(d) = self.items(events, Some(t))
                    && !d.items.is_empty()
                {
                    self.push(at, d.items);
                }
            }
            Some(cap) => self.take_strict(cap, events, at, t).await,
        }
    }
}

impl Tap {
    /// The items of one read's messages. With `skip_over_rate` (best-effort, at that session
    /// time) text over the rate bound is skipped and gaps are marked; without, every text is
    /// kept. `None` when the tap's state is unusable.
    fn items(&self, events: Vec<Recorded>, skip_over_rate: Option<f64>) -> Option<Decoded> {
        let Ok(mut state) = self.state.lock() else {
            self.shared.overflow.store(true, Ordering::Relaxed);
            return None;
        };
        let TapState {
            budget,
            record_input,
            ..
        } = &mut *state;
        let mut items = Vec::with_capacity(events.len());
        let mut text_len = 0;
        for e in events {
            let (input, data) = match e {
                Recorded::Output(b) | Recorded::Notice(b) => (false, b),
                Recorded::Input(b) if *record_input => (true, b),
                Recorded::Input(_) => continue,
                Recorded::Resize(size) => {
                    items.push(Item::Resize {
                        width: size.width,
                        height: size.height,
                    });
                    continue;
                }
                Recorded::Error(m) => {
                    items.push(Item::Error(m.to_vec()));
                    continue;
                }
            };
            if data.is_empty() {
                continue;
            }
            if let Some(t) = skip_over_rate {
                if !budget.admit(t, data.len()) {
                    continue;
                }
                let gap = budget.end_gap();
                if gap > 0 {
                    items.push(Item::Gap(gap));
                }
            }
            text_len += data.len();
            items.push(Item::Text { input, data });
        }
        Some(Decoded { items, text_len })
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
    async fn take_strict(&self, cap: u64, events: Vec<Recorded>, at: Instant, t: f64) {
        if self.shared.failed.load(Ordering::SeqCst) {
            return;
        }
        let Some(mut d) = self.items(events, None) else {
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
                end.end(recording_failed(why));
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
