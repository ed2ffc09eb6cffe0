//! A session's writer task: turns the items the [`Tap`](super::tap::Tap) queued into asciicast
//! event lines and writes them to the store as the recording's parts
//! ([`PartSink`]), a batch at a time.
//!
//! Writers run at the server's normal priority: at a low one (nice 19 was tried) a busy
//! machine could starve them past the end-of-session limit and lose the recording, which is
//! worse than the CPU they take.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::keyframe::Screen;
use super::memory::Held;
use super::session::exit_code_of_status;
use super::store::{Metadata, PART_BYTES, Store, StoreError};
use super::tap::{Item, TapShared};
use crate::asciicast::{self, Capped, Header, Utf8Carry};
use crate::chain::{hex, sha256};
use crate::commands::CommandLog;
use crate::index::IndexBuilder;
use poddebug_types::evidence::{Evidence, PartDigest};

/// How long a writer, once woken by a chunk, lets more gather before it writes them.
const BATCH: Duration = Duration::from_millis(10);

/// What the writer reports.
#[derive(Debug)]
pub(super) struct WriterEnd {
    /// Bytes written to the store.
    pub(super) stored: u64,
    pub(super) truncated: bool,
    pub(super) exit_code: Option<i32>,
    /// Commands submitted (with `--record-input`).
    pub(super) command_count: Option<u32>,
    /// The commands kept (the first ones, within the bound of what a recording keeps).
    pub(super) commands: Vec<poddebug_types::recording::RecordingCommand>,
}

/// The writer writes what it has gathered once this much is waiting (and after each batch).
const FLUSH_AT: usize = 1 << 20;

/// Where a recording's bytes go: gathered, then written to the store as the next part once
/// [`PART_BYTES`] have gathered or the part interval has passed; the metadata is renewed with
/// each part (and every interval while the session is idle), so that a recording whose replica
/// died is told from one still being written. A session holds at most about `PART_BYTES` plus
/// one batch ([`FLUSH_AT`]) in memory. The commands derived from the input are written before
/// the metadata that counts them, each time new ones were submitted; so is the search index,
/// each time it holds new lines (and at the end), so that a replica that dies loses no more of
/// it than of the recording.
pub(super) struct PartSink {
    store: Store,
    meta: Metadata,
    interval: Duration,
    seq: u32,
    pending: Vec<u8>,
    last: Instant,
    stored: u64,
    /// The size and SHA-256 of each part written, shared with the session, which signs them in
    /// the final metadata.
    digests: Digests,
    /// The keyframe of the next part: the screen when the last part written ended.
    keyframe: Option<String>,
}

/// The digests of a recording's parts written so far.
pub(super) type Digests = Arc<std::sync::Mutex<Vec<PartDigest>>>;

impl PartSink {
    pub(super) fn new(
        store: Store,
        meta: Metadata,
        interval: Duration,
        digests: Digests,
    ) -> PartSink {
        PartSink {
            store,
            meta,
            interval,
            seq: 0,
            pending: Vec::new(),
            last: Instant::now(),
            stored: 0,
            digests,
            keyframe: None,
        }
    }

    /// Write what has gathered as the next part when it is big or old enough (every time with
    /// `end`), then the commands if new ones were submitted, and renew the metadata (not at
    /// the end: the session completes it).
    async fn sync(
        &mut self,
        end: bool,
        commands: Option<&mut CommandLog>,
        index: &mut IndexBuilder,
        screen: Option<&Screen>,
    ) -> Result<(), StoreError> {
        let due = end || self.pending.len() >= PART_BYTES || self.last.elapsed() >= self.interval;
        if !due {
            return Ok(());
        }
        if !self.pending.is_empty() {
            let data = Bytes::from(std::mem::take(&mut self.pending));
            let n = data.len() as u64;
            // The part is hashed on another thread while the store writes it, and its span of
            // session time read (the recording's time table, signed with it). An unsigned store
            // keeps no statement: its parts are neither hashed nor timed, nor given keyframes.
            let hashing = self.store.signs().then(|| {
                let part = data.clone();
                (
                    part.clone(),
                    tokio::task::spawn_blocking(move || {
                        (sha256(&part), asciicast::event_span(&part))
                    }),
                )
            });
            // The screen as this part begins, beside it (written first: a part is never
            // listed without its keyframe).
            let keyframe = match self.keyframe.take().filter(|_| hashing.is_some()) {
                Some(k) => {
                    let digest = hex(&sha256(k.as_bytes()));
                    self.store
                        .write_keyframe(&self.meta, self.seq, Bytes::from(k))
                        .await?;
                    Some(digest)
                }
                None => None,
            };
            self.store.write_part(&self.meta, self.seq, data).await?;
            let digest = match hashing {
                Some((part, task)) => {
                    // A hashing thread that could not finish: hashed here instead.
                    let (sha, span) = task
                        .await
                        .unwrap_or_else(|_| (sha256(&part), asciicast::event_span(&part)));
                    Some(PartDigest {
                        bytes: n,
                        sha256: hex(&sha),
                        start_micros: span.map(|s| s.0),
                        end_micros: span.map(|s| s.1),
                        keyframe_sha256: keyframe,
                    })
                }
                None => None,
            };
            self.seq += 1;
            // Everything drawn so far is in the parts written: the screen now is where the
            // next part begins.
            if self.store.signs() {
                self.keyframe = screen.map(Screen::keyframe);
            }
            self.stored += n;
            if let (Some(digest), Ok(mut d)) = (digest, self.digests.lock()) {
                d.push(digest);
            }
        }
        self.last = Instant::now();
        if let Some(log) = commands {
            if log.take_changed()
                && let Err(e) = self
                    .store
                    .write_commands(&self.meta, log.items(), log.dropped())
                    .await
            {
                // Written again with the next part.
                log.mark_changed();
                return Err(e);
            }
            self.meta.command_count = Some(log.count());
        }
        if index.take_changed()
            && let Err(e) = self.store.write_index(&self.meta, &index.to_json()).await
        {
            index.mark_changed();
            return Err(e);
        }
        if !end {
            self.meta.bytes = self.stored;
            self.meta.renewed = Some(jiff::Timestamp::now().to_string());
            self.meta.evidence = Some(Evidence {
                parts: self.digests.lock().map(|d| d.clone()).unwrap_or_default(),
                ..Evidence::default()
            });
            self.store.write_meta(&self.meta).await?;
        }
        Ok(())
    }
}

/// A session's writer task: turns the queued items into event lines and writes them to the
/// store.
pub(super) struct Writer {
    /// The store's side of the recording.
    pub(super) sink: PartSink,
    pub(super) lines: Lines,
    pub(super) started: Instant,
    pub(super) shared: Arc<TapShared>,
    /// What this writer holds of the replica's recording memory: what it took from the queue
    /// until the part holding it is written.
    pub(super) held: Held,
}

/// The event lines of a recording, gathered for the next write.
pub(super) struct Lines {
    pub(super) buf: Vec<u8>,
    pub(super) header: Header,
    pub(super) header_written: bool,
    pub(super) capped: Capped,
    /// Why the recording stops at `capped` (its size limit, or its user's quota).
    pub(super) cap_reason: &'static str,
    /// Nothing is left under the user's quota: the recording is its header and the marker.
    pub(super) exhausted: bool,
    pub(super) out_text: Utf8Carry,
    pub(super) in_text: Utf8Carry,
    pub(super) exit_code: Option<i32>,
    /// The commands derived from the input (with `--record-input`).
    pub(super) commands: Option<CommandLog>,
    /// The search index of the commands and the output the recording holds.
    pub(super) index: IndexBuilder,
    /// Commands of `commands` already in `index`.
    pub(super) indexed_commands: usize,
    /// The screen the recorded output draws (from the header on), for the parts' keyframes.
    pub(super) screen: Option<Screen>,
    /// Whether the parts get keyframes (and so whether a screen is drawn at all).
    pub(super) keyframes: bool,
}

impl Lines {
    /// Turn one queued item at `t` seconds into its line, if it has one.
    fn item(&mut self, t: f64, item: Item) {
        match item {
            // The tap queues input only with --record-input.
            Item::Text { input: true, data } => {
                self.text_event(t, "i", &data);
                // Commands come from the input the recording holds, not from what its cap left
                // out.
                if let Some(log) = &mut self.commands
                    && !self.capped.truncated()
                {
                    log.push(t, &data);
                    for c in log.items().get(self.indexed_commands..).unwrap_or_default() {
                        self.index.command(c);
                    }
                    self.indexed_commands = log.items().len();
                }
            }
            Item::Text { input: false, data } => {
                self.text_event(t, "o", &data);
                // As the commands: the output the recording holds.
                if !self.capped.truncated() {
                    self.index.output(t, &data);
                }
            }
            Item::Resize { width, height } if !self.header_written => {
                self.header.width = width;
                self.header.height = height;
            }
            Item::Resize { width, height } => {
                if let Some(screen) = &mut self.screen {
                    screen.resize(width, height);
                }
                let line = asciicast::event_line(t, "r", &format!("{width}x{height}"));
                let start = self.buf.len();
                self.buf.extend_from_slice(&line);
                self.admit(start);
            }
            Item::Error(msg) => self.exit_code = exit_code_of_status(&msg).or(self.exit_code),
            Item::Gap(skipped) => self.gap_marker(t, skipped),
            Item::Ended(why) => self.marker(t, &format!("session ended by the server: {why}")),
            Item::Marker(text) => self.marker(t, &text),
            // Handled by the writer.
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
            // What the recording holds is what its screen draws.
            if code == "o"
                && self.buf.len() > start
                && let Some(screen) = &mut self.screen
            {
                screen.feed(data);
            }
        }
    }

    /// The marker of a gap over the rate bound.
    fn gap_marker(&mut self, t: f64, skipped: u64) {
        // A character split at the gap's edge is lost with it.
        self.out_text = Utf8Carry::default();
        self.in_text = Utf8Carry::default();
        self.marker(
            t,
            &format!("{skipped} bytes not recorded: over --max-recording-rate"),
        );
    }

    /// A marker event `[t, "m", label]`.
    fn marker(&mut self, t: f64, label: &str) {
        let line = asciicast::event_line(t, "m", label);
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

    pub(super) fn write_header(&mut self) {
        self.header_written = true;
        if self.keyframes {
            self.screen = Some(Screen::new(self.header.width, self.header.height));
        }
        let line = asciicast::header_line(&self.header);
        // The header always fits: the cap is at least MIN_CAP.
        self.capped.admit(&line);
        self.buf.extend_from_slice(&line);
        if self.exhausted {
            self.capped.stop();
        }
    }
}

impl Writer {
    /// The next batch of chunks, waiting for the first and then [`BATCH`] for more; `None` once
    /// the session ended and everything was taken.
    async fn next_batch(&mut self) -> Option<std::collections::VecDeque<(Instant, Item)>> {
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
                // Idle: come back within a part interval, so that what gathered is written
                // and the metadata renewed.
                if tokio::time::timeout(self.sink.interval, shared.wake.notified())
                    .await
                    .is_err()
                {
                    return Some(Default::default());
                }
                continue;
            }
            if !closed {
                tokio::time::sleep(BATCH).await;
            }
            let (batch, bytes) = shared
                .queue
                .lock()
                .map(|mut q| {
                    let q = std::mem::take(&mut *q);
                    (q.items, q.bytes)
                })
                .unwrap_or_default();
            self.held.adopt(bytes as u64);
            shared.took_batch();
            return Some(batch);
        }
    }

    /// Hand the gathered lines to the sink, which writes a part when one is due (every time
    /// with `end`).
    async fn flush(&mut self, end: bool) -> Result<(), StoreError> {
        self.sink.pending.extend_from_slice(&self.lines.buf);
        self.lines.buf.clear();
        if self.lines.buf.capacity() > 2 * FLUSH_AT {
            // A burst is over: give its room back.
            self.lines.buf = Vec::new();
        }
        let synced = self
            .sink
            .sync(
                end,
                self.lines.commands.as_mut(),
                &mut self.lines.index,
                self.lines.screen.as_ref(),
            )
            .await;
        self.shared.progressed();
        // What is held now: the lines not yet in a part.
        self.held
            .set((self.lines.buf.len() + self.sink.pending.len()) as u64);
        synced
    }

    pub(super) async fn run(mut self) -> WriterEnd {
        let mut failure: Option<String> = None;
        let mut last = 0.0;
        while let Some(batch) = self.next_batch().await {
            for (at, item) in batch {
                if failure.is_some() {
                    continue;
                }
                let t = at.duration_since(self.started).as_secs_f64();
                last = t;
                self.lines.item(t, item);
                self.shared.progressed();
                // An item's screen and index work is CPU on this task: between items the
                // runtime's other tasks (other sessions' relays) get their turn, so a burst
                // queued at once never holds a worker thread for the whole batch.
                tokio::task::yield_now().await;
                if self.lines.buf.len() >= FLUSH_AT
                    && let Err(e) = self.flush(false).await
                {
                    failure.get_or_insert(format!("write failed ({e})"));
                }
            }
            if failure.is_none()
                && let Err(e) = self.flush(false).await
            {
                failure = Some(format!("write failed ({e})"));
            }
            // strict: a recording that cannot go on ends its session.
            if let Some(why) = &failure
                && !self.shared.failed.load(Ordering::SeqCst)
            {
                self.shared.fail(why);
            }
        }
        if failure.is_none() {
            self.lines.finish_output(last);
            self.lines.index.finish();
            if !self.lines.header_written {
                self.lines.write_header();
            }
        }
        let why = if self.shared.memory_full.load(Ordering::Relaxed) {
            Some("the replica's recording memory (--max-recording-memory) was full".to_owned())
        } else if self.shared.overflow.load(Ordering::Relaxed) {
            Some("the recorder fell behind the stream".to_owned())
        } else if self.lines.capped.truncated() {
            Some(self.lines.cap_reason.to_owned())
        } else {
            failure
        };
        if let Some(why) = &why {
            let marker = self.lines.capped.marker(last, why);
            self.lines.buf.extend_from_slice(&marker);
        }
        if let Err(e) = self.flush(true).await {
            tracing::warn!(id = %self.sink.meta.id, error = %e, "the end of a recording could not be written");
        }
        WriterEnd {
            stored: self.sink.stored,
            truncated: why.is_some(),
            exit_code: self.lines.exit_code,
            command_count: self.lines.commands.as_ref().map(CommandLog::count),
            commands: self
                .lines
                .commands
                .as_ref()
                .map(|c| c.items().to_vec())
                .unwrap_or_default(),
        }
    }
}
