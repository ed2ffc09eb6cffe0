//! Session recordings: every attach session is written as an asciicast v2 file under
//! `--recording-dir`, and served back by `GET …/pods/POD/recordings[/ID]`.
//!
//! The relay hands a [`Tap`] each chunk it has just written, shared rather than copied. The tap
//! decodes the channel protocol as the chunk passes ([`decode`]: frame headers, and the resize
//! and error messages kept whole) and queues only what the recording keeps: output (and, with
//! `--record-input`, input) as slices of the chunk, within `--max-recording-rate`, plus resizes,
//! the error Status, and a count for each gap over the rate. The tap never waits: when the
//! queue to the session's writer task is full (a slow disk, a busy machine) it stops queueing
//! and the recording is marked truncated — the stream itself is never slowed, buffered or
//! changed. The writer task JSON-escapes the text into event lines and writes them, up to
//! `--max-recording-bytes`. When the session ends, the metadata sidecar gets the end time, the
//! size and the process's exit code.
//!
//! Writers run at the server's normal priority: at a low one (nice 19 was tried) a busy
//! machine could starve them past the end-of-session limit and lose the recording, which is
//! worse than the CPU they take.

pub mod asciicast;
pub mod decode;
pub mod spdy_dictionary;
pub mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use asciicast::{Capped, Header, HeaderInfo, Utf8Carry};
use decode::{Decoder, Direction, Event};
use store::{Metadata, Store};

/// Bytes in flight between a relay and its writer (each queued item counts at least
/// [`ITEM_COST`]).
const TAP_QUEUE_BYTES: usize = 16 << 20;
/// What one queued item counts for at least.
const ITEM_COST: usize = 64;
/// How long a writer, once woken by a chunk, lets more gather before it writes them.
const BATCH: Duration = Duration::from_millis(10);
/// How long the end of a session waits for its writer to finish the file.
const WRITER_FINISH: Duration = Duration::from_secs(10);
/// Smallest accepted `--max-recording-bytes` (room for the header and the marker).
const MIN_CAP: u64 = 4096;
/// How many seconds' worth of `--max-recording-rate` a session may record at once.
const BURST_SECONDS: f64 = 8.0;
/// Terminal size assumed when the client never sent one before the first output.
const DEFAULT_SIZE: (u16, u16) = (80, 24);

/// The session-recording flags.
#[derive(Clone, Debug, clap::Args)]
pub struct RecordingOptions {
    /// Directory where every attach session is recorded as an asciicast v2 file
    /// (NAMESPACE/POD/ID.cast, with ID.json metadata beside it). Recording is off when unset.
    /// With several replicas, a volume shared by all of them (ReadWriteMany).
    #[arg(long, help_heading = "Session recording")]
    pub recording_dir: Option<PathBuf>,
    /// Also record what the user typed (input events). Off by default: input may hold secrets.
    #[arg(long, help_heading = "Session recording")]
    pub record_input: bool,
    /// Largest recording of one session, in bytes (0 = no limit). A recording that reaches it
    /// ends with a "recording truncated" marker; the session goes on unrecorded.
    #[arg(long, default_value_t = 64 << 20, help_heading = "Session recording")]
    pub max_recording_bytes: u64,
    /// Most output (and, with --record-input, input) recorded per session and second, in
    /// bytes (0 = no limit); bursts of up to 8 seconds' worth are recorded whole. Beyond it
    /// the recording skips output until 8 seconds' worth has built up again, and marks each
    /// gap with the number of bytes skipped. The stream itself is never slowed.
    #[arg(long, default_value_t = 1 << 20, help_heading = "Session recording")]
    pub max_recording_rate: u64,
    /// Recordings last written longer ago than this are deleted by a periodic sweep
    /// (0 = keep forever).
    #[arg(long, default_value = "720h", value_parser = crate::options::parse_duration, help_heading = "Session recording")]
    pub recording_retention: Duration,
}

impl RecordingOptions {
    /// Every problem with the flags.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if self.max_recording_bytes != 0 && self.max_recording_bytes < MIN_CAP {
            errs.push(format!(
                "--max-recording-bytes must be 0 or at least {MIN_CAP}"
            ));
        }
        if let Some(dir) = &self.recording_dir
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            errs.push(format!(
                "--recording-dir: {} cannot be created: {e}",
                dir.display()
            ));
        }
        errs
    }
}

/// The recorder of a server with `--recording-dir` set.
#[derive(Debug)]
pub struct Recorder {
    store: Store,
    record_input: bool,
    max_bytes: u64,
    max_rate: u64,
    retention: Duration,
}

/// Who and what a recorded session is.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Debug container as the client named it.
    pub container: String,
    /// User.
    pub user: String,
    /// Negotiated protocol label.
    pub protocol: String,
    /// SPDY (else WebSocket).
    pub spdy: bool,
    /// A base64 WebSocket subprotocol.
    pub base64: bool,
}

impl Recorder {
    /// The recorder the flags ask for, if any.
    pub fn from_options(o: &RecordingOptions) -> Option<Arc<Recorder>> {
        let dir = o.recording_dir.clone()?;
        Some(Arc::new(Recorder {
            store: Store::new(dir),
            record_input: o.record_input,
            max_bytes: o.max_recording_bytes,
            max_rate: o.max_recording_rate,
            retention: o.recording_retention,
        }))
    }

    /// The files.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Start the retention sweep (now, then every quarter of the retention, at most hourly);
    /// it runs for the life of the process. Nothing is swept with a retention of 0.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        if self.retention.is_zero() {
            return;
        }
        let every = (self.retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let n = me.store.sweep(me.retention).await;
                if n > 0 {
                    tracing::info!(files = n, "recordings past their retention deleted");
                }
            }
        });
    }

    /// Open the recording of a session that has just been switched to the stream protocol.
    pub async fn start(&self, info: SessionInfo) -> std::io::Result<Session> {
        let start = jiff::Timestamp::now();
        let id = store::new_id(start);
        tokio::fs::create_dir_all(self.store.pod_dir(&info.namespace, &info.pod)).await?;
        let file = tokio::fs::File::options()
            .write(true)
            .create_new(true)
            .open(self.store.cast_path(&info.namespace, &info.pod, &id))
            .await?;
        let meta = Metadata {
            id: id.clone(),
            namespace: info.namespace.clone(),
            pod: info.pod.clone(),
            container: info.container.clone(),
            user: info.user.clone(),
            protocol: info.protocol.clone(),
            start: start.to_string(),
            end: None,
            bytes: 0,
            exit_code: None,
            truncated: false,
        };
        self.store.write_meta(&meta).await?;
        let header = Header {
            version: 2,
            width: DEFAULT_SIZE.0,
            height: DEFAULT_SIZE.1,
            timestamp: start.as_second(),
            title: format!("{}/{}/{}", info.namespace, info.pod, info.container),
            poddebug: HeaderInfo {
                id: id.clone(),
                namespace: info.namespace,
                pod: info.pod,
                container: info.container,
                user: info.user,
                start: start.to_string(),
                protocol: info.protocol,
                input_recorded: self.record_input,
            },
        };
        let shared = Arc::new(TapShared::default());
        let started = Instant::now();
        let writer = Writer {
            file: Some(file.into_std().await),
            lines: Lines {
                buf: Vec::new(),
                header,
                header_written: false,
                capped: Capped::new(self.max_bytes),
                out_text: Utf8Carry::default(),
                in_text: Utf8Carry::default(),
                exit_code: None,
            },
            started,
            shared: shared.clone(),
        };
        let writer = tokio::spawn(writer.run());
        Ok(Session {
            tap: Tap {
                shared,
                started,
                state: std::sync::Mutex::new(TapState {
                    decoder: if info.spdy {
                        Decoder::spdy()
                    } else {
                        Decoder::websocket(info.base64, self.record_input)
                    },
                    budget: RateBudget::new(self.max_rate),
                    record_input: self.record_input,
                    failed: false,
                }),
            },
            writer,
            meta,
            store: self.store.clone(),
        })
    }
}

/// What the tap queues for the writer, with the time it was relayed.
#[derive(Debug)]
enum Item {
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
}

impl Item {
    /// What the item counts for in the queue's bound.
    fn cost(&self) -> usize {
        match self {
            Item::Text { data, .. } => data.len().max(ITEM_COST),
            Item::Error(m) => m.len().max(ITEM_COST),
            _ => ITEM_COST,
        }
    }
}

/// The queue between a relay and its writer.
#[derive(Debug, Default)]
struct Queue {
    items: std::collections::VecDeque<(Instant, Item)>,
    /// The items' cost.
    bytes: usize,
}

/// What a relay and its writer share: the items queued and not yet written, and the flags.
#[derive(Debug, Default)]
struct TapShared {
    queue: std::sync::Mutex<Queue>,
    /// The queue was full once: nothing more is queued.
    overflow: AtomicBool,
    /// The session ended: the writer drains the queue and finishes.
    closed: AtomicBool,
    /// Wakes the writer: on the first item after the queue was drained, and on close.
    wake: tokio::sync::Notify,
}

/// The relay's side of a recording: decodes each relayed chunk as it passes and queues what
/// the recording keeps, without ever waiting.
///
/// Decoding here, on chunks the relay shares rather than copies, reads frame headers and the
/// few messages kept whole (resize, error); output and input are queued as slices of the chunk.
/// What is not recorded — stdin without `--record-input` (skipped without being unmasked), and
/// output over `--max-recording-rate` — is never queued, so the relay's buffer is free again at
/// once and a flood of output costs the relay no fresh memory.
///
/// The writer is woken only by the first item of a batch (the queue was empty); it then waits
/// [`BATCH`] and writes all that came meanwhile. A fast stream thus costs the relay one wake-up
/// per batch instead of one per chunk (each a system call), and an idle one none.
#[derive(Debug)]
pub struct Tap {
    shared: Arc<TapShared>,
    /// When the session started (event times are counted from here).
    started: Instant,
    /// The decoder and the rate budget (both directions of the relay take turns).
    state: std::sync::Mutex<TapState>,
}

/// The tap's decoding state.
struct TapState {
    decoder: Decoder,
    budget: RateBudget,
    record_input: bool,
    /// Decoding failed: nothing more is decoded.
    failed: bool,
}

impl std::fmt::Debug for TapState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapState")
            .field("budget", &self.budget)
            .field("failed", &self.failed)
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

impl Tap {
    /// Take bytes just relayed client → container.
    pub fn inbound(&self, data: Bytes) {
        self.take(Direction::In, data);
    }

    /// Take bytes just relayed container → client.
    pub fn outbound(&self, data: Bytes) {
        self.take(Direction::Out, data);
    }

    fn take(&self, dir: Direction, data: Bytes) {
        if self.shared.overflow.load(Ordering::Relaxed) {
            return;
        }
        let at = Instant::now();
        let t = at.duration_since(self.started).as_secs_f64();
        let mut items = Vec::new();
        {
            let Ok(mut state) = self.state.lock() else {
                self.shared.overflow.store(true, Ordering::Relaxed);
                return;
            };
            let TapState {
                decoder,
                budget,
                record_input,
                failed,
            } = &mut *state;
            if *failed {
                return;
            }
            let mut text = |input: bool, part: &[u8]| {
                if budget.admit(t, part.len()) {
                    let gap = budget.end_gap();
                    if gap > 0 {
                        items.push(Item::Gap(gap));
                    }
                    items.push(Item::Text {
                        input,
                        data: share(&data, part),
                    });
                }
            };
            let mut resizes_and_errors = Vec::new();
            // The decoder runs on the relay's task: should it ever panic (it is fuzzed not to),
            // the recording ends there, never the stream.
            let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                decoder.feed(dir, &data, &mut |ev| match ev {
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
            if let Err(e) = decoded {
                *failed = true;
                items.push(Item::Undecodable(e.0));
            }
        }
        if !items.is_empty() {
            self.push(at, items);
        }
    }

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
        let first = queue.items.is_empty();
        queue.bytes += cost;
        queue.items.extend(items.into_iter().map(|i| (at, i)));
        drop(queue);
        if first {
            shared.wake.notify_one();
        }
    }

    /// The session ended: a gap still open is closed, and the writer writes what is queued
    /// and finishes the file.
    fn close(&self) {
        let gap = self
            .state
            .lock()
            .map(|mut s| s.budget.end_gap())
            .unwrap_or(0);
        if gap > 0 {
            self.push(Instant::now(), vec![Item::Gap(gap)]);
        }
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }
}

/// A recording in progress.
#[derive(Debug)]
pub struct Session {
    tap: Tap,
    writer: tokio::task::JoinHandle<WriterEnd>,
    meta: Metadata,
    store: Store,
}

/// How a recording ended.
#[derive(Clone, Debug)]
pub struct Finished {
    /// The recording id.
    pub id: String,
    /// The exit code (from the stream's error channel, else the fallback).
    pub exit_code: Option<i32>,
    /// Whether the recording was truncated.
    pub truncated: bool,
}

impl Session {
    /// The tap the relay hands its chunks to.
    pub fn tap(&self) -> &Tap {
        &self.tap
    }

    /// The recording id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// End the recording: the writer finishes the file, the exit code is the one the stream
    /// reported, else `fallback`'s, and the metadata is completed.
    pub async fn finish(
        self,
        fallback: impl std::future::Future<Output = Option<i32>>,
    ) -> Finished {
        let Session {
            tap,
            mut writer,
            mut meta,
            store,
        } = self;
        tap.close();
        drop(tap);
        let end = match tokio::time::timeout(WRITER_FINISH, &mut writer).await {
            Ok(Ok(end)) => end,
            Ok(Err(_)) | Err(_) => {
                writer.abort();
                tracing::warn!(id = %meta.id, "the recording could not be finished in time");
                WriterEnd {
                    bytes: 0,
                    truncated: true,
                    exit_code: None,
                }
            }
        };
        // A non-zero code on the stream is the container's. A zero ("Success") is not proof:
        // containerd reports Success on the attach stream whatever the exit code, so the
        // container's own status decides when it has one; no code at all on the stream (the
        // user detached) is the status's or none.
        let exit_code = match end.exit_code {
            Some(c) if c != 0 => Some(c),
            Some(_) => fallback.await.or(Some(0)),
            None => fallback.await,
        };
        meta.end = Some(jiff::Timestamp::now().to_string());
        meta.bytes = tokio::fs::metadata(store.cast_path(&meta.namespace, &meta.pod, &meta.id))
            .await
            .map(|m| m.len())
            .unwrap_or(end.bytes);
        meta.exit_code = exit_code;
        meta.truncated = end.truncated;
        if let Err(e) = store.write_meta(&meta).await {
            tracing::warn!(id = %meta.id, error = %e, "recording metadata could not be written");
        }
        Finished {
            id: meta.id,
            exit_code,
            truncated: end.truncated,
        }
    }
}

/// What the writer reports.
#[derive(Debug)]
struct WriterEnd {
    bytes: u64,
    truncated: bool,
    exit_code: Option<i32>,
}

/// The writer writes what it has gathered once this much is waiting (and after each batch).
const FLUSH_AT: usize = 1 << 20;

/// A session's writer task: turns the queued items into event lines and appends them to the
/// file.
struct Writer {
    /// The file (moved to a blocking thread and back for each write).
    file: Option<std::fs::File>,
    lines: Lines,
    started: Instant,
    shared: Arc<TapShared>,
}

/// The event lines of a recording, gathered for the next write.
struct Lines {
    buf: Vec<u8>,
    header: Header,
    header_written: bool,
    capped: Capped,
    out_text: Utf8Carry,
    in_text: Utf8Carry,
    exit_code: Option<i32>,
}

/// `--max-recording-rate`: a token bucket of recorded bytes per session, filled at the rate
/// up to [`BURST_SECONDS`] of it. Once an event finds it short, events are skipped until it is
/// full again, so a flood of output leaves one gap (and one marker) per burst, not one per
/// chunk.
#[derive(Debug)]
struct RateBudget {
    /// Bytes per second; 0 = no limit.
    rate: f64,
    tokens: f64,
    /// Session time of the last refill, seconds.
    at: f64,
    /// Bytes skipped since the gap began (0: not skipping).
    skipped: u64,
}

impl RateBudget {
    fn new(rate: u64) -> RateBudget {
        let rate = rate as f64;
        RateBudget {
            rate,
            tokens: rate * BURST_SECONDS,
            at: 0.0,
            skipped: 0,
        }
    }

    /// Whether an event of `len` bytes at `t` seconds is recorded; counts it either way.
    fn admit(&mut self, t: f64, len: usize) -> bool {
        if self.rate == 0.0 {
            return true;
        }
        let full = self.rate * BURST_SECONDS;
        self.tokens = (self.tokens + (t - self.at).max(0.0) * self.rate).min(full);
        self.at = self.at.max(t);
        let len = len as f64;
        let resume = self.skipped == 0 || self.tokens >= full;
        if resume && self.tokens >= len {
            self.tokens -= len;
            true
        } else {
            self.skipped += len as u64;
            false
        }
    }

    /// The bytes of the gap that just ended (0: none), and the gap closed.
    fn end_gap(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }
}

impl Lines {
    /// Turn one queued item at `t` seconds into its line, if it has one.
    fn item(&mut self, t: f64, item: Item) {
        match item {
            // The tap queues input only with --record-input.
            Item::Text { input, data } => self.text_event(t, if input { "i" } else { "o" }, &data),
            Item::Resize { width, height } if !self.header_written => {
                self.header.width = width;
                self.header.height = height;
            }
            Item::Resize { width, height } => {
                let line = asciicast::event_line(t, "r", &format!("{width}x{height}"));
                let start = self.buf.len();
                self.buf.extend_from_slice(&line);
                self.admit(start);
            }
            Item::Error(msg) => self.exit_code = exit_code_of_status(&msg).or(self.exit_code),
            Item::Gap(skipped) => self.gap_marker(t, skipped),
            // Handled by the writer.
            Item::Undecodable(_) => {}
        }
    }

    /// An output ("o") or input ("i") event; its text is escaped straight into the buffer.
    fn text_event(&mut self, t: f64, code: &str, data: &[u8]) {
        let carry = if code == "o" {
            &mut self.out_text
        } else {
            &mut self.in_text
        };
        let start = self.buf.len();
        if asciicast::push_event(&mut self.buf, t, code, |out| carry.push_escaped(data, out)) {
            self.admit(start);
        }
    }

    /// The marker of a gap over the rate bound.
    fn gap_marker(&mut self, t: f64, skipped: u64) {
        // A character split at the gap's edge is lost with it.
        self.out_text = Utf8Carry::default();
        self.in_text = Utf8Carry::default();
        let line = asciicast::event_line(
            t,
            "m",
            &format!("{skipped} bytes not recorded: over --max-recording-rate"),
        );
        let start = self.buf.len();
        self.buf.extend_from_slice(&line);
        self.admit(start);
    }

    /// The rest of a character split at the very end of the output.
    fn finish_output(&mut self, t: f64) {
        let start = self.buf.len();
        let carry = &mut self.out_text;
        if asciicast::push_event(&mut self.buf, t, "o", |out| carry.finish_escaped(out)) {
            self.admit(start);
        }
    }

    /// Keep the line appended at `start` if it fits under the cap, with the header before the
    /// first line; drop it otherwise.
    fn admit(&mut self, start: usize) {
        if !self.header_written {
            let line = self.buf.split_off(start);
            self.write_header();
            let start = self.buf.len();
            self.buf.extend_from_slice(&line);
            return self.admit(start);
        }
        if !self.capped.admit_len(self.buf.len() - start) {
            self.buf.truncate(start);
        }
    }

    fn write_header(&mut self) {
        self.header_written = true;
        let line = asciicast::header_line(&self.header);
        // The header always fits: the cap is at least MIN_CAP.
        self.capped.admit(&line);
        self.buf.extend_from_slice(&line);
    }
}

impl Writer {
    /// The next batch of chunks, waiting for the first and then [`BATCH`] for more; `None` once
    /// the session ended and everything was taken.
    async fn next_batch(&self) -> Option<std::collections::VecDeque<(Instant, Item)>> {
        let shared = &*self.shared;
        loop {
            let closed = shared.closed.load(Ordering::SeqCst);
            let empty = shared
                .queue
                .lock()
                .map(|q| q.items.is_empty())
                .unwrap_or(true);
            if empty && closed {
                return None;
            }
            if empty {
                shared.wake.notified().await;
                continue;
            }
            if !closed {
                tokio::time::sleep(BATCH).await;
            }
            let batch = shared
                .queue
                .lock()
                .map(|mut q| std::mem::take(&mut *q).items)
                .unwrap_or_default();
            return Some(batch);
        }
    }

    /// Write the gathered lines to the file (on a blocking thread).
    async fn flush(&mut self) -> std::io::Result<()> {
        if self.lines.buf.is_empty() {
            return Ok(());
        }
        let mut file = self
            .file
            .take()
            .ok_or_else(|| std::io::Error::other("an earlier write failed"))?;
        let buf = std::mem::take(&mut self.lines.buf);
        let (file, mut buf, written) = tokio::task::spawn_blocking(move || {
            let r = std::io::Write::write_all(&mut file, &buf);
            (file, buf, r)
        })
        .await
        .map_err(std::io::Error::other)?;
        written?;
        self.file = Some(file);
        buf.clear();
        if buf.capacity() > 2 * FLUSH_AT {
            // A burst is over: give its room back.
            buf = Vec::new();
        }
        self.lines.buf = buf;
        Ok(())
    }

    async fn run(mut self) -> WriterEnd {
        let mut failure: Option<String> = None;
        let mut last = 0.0;
        while let Some(batch) = self.next_batch().await {
            for (at, item) in batch {
                if failure.is_some() {
                    continue;
                }
                let t = at.duration_since(self.started).as_secs_f64();
                last = t;
                match item {
                    Item::Undecodable(e) => failure = Some(format!("undecodable stream ({e})")),
                    item => self.lines.item(t, item),
                }
                if self.lines.buf.len() >= FLUSH_AT
                    && let Err(e) = self.flush().await
                {
                    failure.get_or_insert(format!("write failed ({e})"));
                }
            }
            if failure.is_none()
                && let Err(e) = self.flush().await
            {
                failure = Some(format!("write failed ({e})"));
            }
        }
        if failure.is_none() {
            self.lines.finish_output(last);
            if !self.lines.header_written {
                self.lines.write_header();
            }
        }
        let why = if self.shared.overflow.load(Ordering::Relaxed) {
            Some("the recorder fell behind the stream".to_owned())
        } else if self.lines.capped.truncated() {
            Some("size limit reached".to_owned())
        } else {
            failure
        };
        if let Some(why) = &why {
            let marker = self.lines.capped.marker(last, why);
            self.lines.buf.extend_from_slice(&marker);
        }
        let _ = self.flush().await;
        WriterEnd {
            bytes: self.lines.capped.written(),
            truncated: why.is_some(),
            exit_code: self.lines.exit_code,
        }
    }
}

/// The exit code a k8s error-channel Status reports: 0 for Success, the `ExitCode` cause of a
/// `NonZeroExitCode` failure; None for anything else.
pub fn exit_code_of_status(msg: &[u8]) -> Option<i32> {
    let v: serde_json::Value = serde_json::from_slice(msg).ok()?;
    if v["status"] == "Success" {
        return Some(0);
    }
    v["details"]["causes"]
        .as_array()?
        .iter()
        .find(|c| c["reason"] == "ExitCode")
        .and_then(|c| c["message"].as_str())
        .and_then(|m| m.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_from_the_error_channel() {
        assert_eq!(exit_code_of_status(br#"{"status":"Success"}"#), Some(0));
        assert_eq!(
            exit_code_of_status(
                br#"{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"42"}]}}"#
            ),
            Some(42)
        );
        assert_eq!(
            exit_code_of_status(br#"{"status":"Failure","message":"x"}"#),
            None
        );
        assert_eq!(exit_code_of_status(b"plain text"), None);
    }

    async fn recorder(cap: u64, input: bool) -> (Recorder, PathBuf) {
        recorder_with_rate(cap, input, 0).await
    }

    async fn recorder_with_rate(cap: u64, input: bool, rate: u64) -> (Recorder, PathBuf) {
        let dir = std::env::temp_dir().join(format!("poddebug-rec-{:x}", rand::random::<u64>()));
        let r = Recorder::from_options(&RecordingOptions {
            recording_dir: Some(dir.clone()),
            record_input: input,
            max_recording_bytes: cap,
            max_recording_rate: rate,
            recording_retention: Duration::ZERO,
        })
        .unwrap();
        (Arc::into_inner(r).unwrap(), dir)
    }

    fn info() -> SessionInfo {
        SessionInfo {
            namespace: "ns".into(),
            pod: "pod".into(),
            container: "dbg".into(),
            user: "alice".into(),
            protocol: "websocket/v5.channel.k8s.io".into(),
            spdy: false,
            base64: false,
        }
    }

    fn ws(payload: &[u8], masked: bool) -> Bytes {
        let mut f = vec![0x82, payload.len() as u8 | if masked { 0x80 } else { 0 }];
        if masked {
            f.extend_from_slice(&[0, 0, 0, 0]);
        }
        f.extend_from_slice(payload);
        Bytes::from(f)
    }

    #[tokio::test]
    async fn a_session_becomes_an_asciicast_with_metadata() {
        let (r, dir) = recorder(0, false).await;
        let s = r.start(info()).await.unwrap();
        s.tap()
            .inbound(ws(b"\x04{\"Width\":100,\"Height\":30}", true));
        s.tap().outbound(ws(b"\x01hello ", false));
        s.tap().inbound(ws(b"\x00secret", true));
        s.tap()
            .inbound(ws(b"\x04{\"Width\":90,\"Height\":20}", true));
        s.tap().outbound(ws(b"\x02world", false));
        s.tap().outbound(ws(b"\x03{\"status\":\"Success\"}", false));
        let id = s.id().to_owned();
        // "Success" on the stream is no exit code (containerd says it whatever the code): the
        // container's status (here 9) decides.
        let f = s.finish(async { Some(9) }).await;
        assert_eq!((f.exit_code, f.truncated), (Some(9), false));
        let cast = std::fs::read_to_string(r.store().cast_path("ns", "pod", &id)).unwrap();
        let lines: Vec<serde_json::Value> = cast
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["version"], 2);
        assert_eq!(
            (lines[0]["width"].as_u64(), lines[0]["height"].as_u64()),
            (Some(100), Some(30))
        );
        assert_eq!(lines[0]["poddebug"]["user"], "alice");
        assert_eq!(lines[1][1], "o");
        assert_eq!(lines[1][2], "hello ");
        assert_eq!(lines[2][1], "r");
        assert_eq!(lines[2][2], "90x20");
        assert_eq!(lines[3][2], "world");
        assert_eq!(lines.len(), 4, "no input without --record-input: {cast}");
        let list = r.store().list("ns", "pod").await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].exit_code, Some(9));
        assert_eq!(list[0].bytes, cast.len() as u64);
        assert!(list[0].end.is_some());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn input_is_recorded_on_request_and_the_cap_truncates() {
        let (r, dir) = recorder(MIN_CAP, true).await;
        let s = r.start(info()).await.unwrap();
        s.tap().inbound(ws(b"\x00typed", true));
        for _ in 0..200 {
            s.tap().outbound(ws(&[1u8; 100], false));
        }
        let id = s.id().to_owned();
        let f = s.finish(async { Some(5) }).await;
        assert_eq!((f.exit_code, f.truncated), (Some(5), true));
        let cast = std::fs::read_to_string(r.store().cast_path("ns", "pod", &id)).unwrap();
        assert!(cast.len() as u64 <= MIN_CAP, "{}", cast.len());
        assert!(cast.contains(r#""i","typed""#));
        let last: serde_json::Value = serde_json::from_str(cast.lines().last().unwrap()).unwrap();
        assert_eq!(last[1], "m");
        assert_eq!(last[2], "recording truncated: size limit reached");
        assert!(r.store().list("ns", "pod").await.unwrap()[0].truncated);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_rate_budget_skips_a_flood_and_resumes_when_full_again() {
        // 100 bytes/s: 800 bytes at once, then nothing until 8 s' worth has built up again.
        let mut b = RateBudget::new(100);
        assert!(b.admit(0.0, 800));
        assert!(!b.admit(0.05, 10), "the bucket is empty");
        assert!(
            !b.admit(2.0, 10),
            "200 bytes back, but the gap lasts until it is full"
        );
        assert!(!b.admit(7.0, 10));
        assert!(b.admit(9.0, 10), "full again after 8 s");
        assert_eq!(b.end_gap(), 30);
        assert!(b.admit(9.1, 10), "small events go on while tokens last");
        assert_eq!(b.end_gap(), 0);
        let mut none = RateBudget::new(0);
        assert!(none.admit(0.0, usize::MAX));
    }

    #[tokio::test]
    async fn output_over_the_rate_leaves_a_marked_gap() {
        // 1 KiB/s: 8 KiB may be recorded at once.
        let (r, dir) = recorder_with_rate(0, false, 1024).await;
        let s = r.start(info()).await.unwrap();
        // 200 events of 100 bytes at once: about the first 81 fit, the rest is skipped; the gap
        // is closed by the end of the session.
        for _ in 0..200 {
            let mut payload = vec![b'a'; 101];
            payload[0] = 1;
            s.tap().outbound(ws(&payload, false));
        }
        let id = s.id().to_owned();
        s.finish(async { None }).await;
        let cast = std::fs::read_to_string(r.store().cast_path("ns", "pod", &id)).unwrap();
        let lines: Vec<serde_json::Value> = cast
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let recorded: usize = lines[1..]
            .iter()
            .filter(|l| l[1] == "o")
            .map(|l| l[2].as_str().unwrap().len())
            .sum();
        assert!((8000..=8300).contains(&recorded), "{recorded}");
        let last = lines.last().unwrap();
        assert_eq!(last[1], "m");
        let skipped = 200 * 100 - recorded;
        assert_eq!(
            last[2],
            format!("{skipped} bytes not recorded: over --max-recording-rate"),
            "{cast}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
