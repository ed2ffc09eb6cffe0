//! The byte relay of an upgraded attach: client ⇄ upstream, both ways at once, with
//! backpressure (a chunk is written before the next is read), buffers that grow under bulk
//! traffic and shrink back when the stream idles, byte counting, and the shutdown message.
//!
//! A side that closes makes the relay shut down the other side's write half; the other direction
//! then gets [`LINGER`] to finish before both connections are dropped. When the drain signal
//! flips, the server→client direction stops at the next frame boundary, writes the shutdown
//! message (WebSocket: a Status on the error channel and a close frame; SPDY: a last message on
//! the error stream and GOAWAY) and closes; a stream that cannot reach a boundary within
//! [`DRAIN_FINISH`] is just closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::ending::{Ending, ended};
use super::moderation::{
    Gate, PASSING_NOTICE, SpdyStdinFilter, SpdyStreams, WITHHELD_NOTICE, WsStdinFilter,
};
use super::protocol::{Negotiated, UpgradeKind};
use super::{spdy_frames, websocket_frames};
use crate::metrics::{DirectionLabels, Metrics};
use crate::recording::Tap;

/// How long the other direction may go on after one side closed.
pub const LINGER: Duration = Duration::from_secs(5);
/// How long a draining stream may take to reach a frame boundary.
pub const DRAIN_FINISH: Duration = Duration::from_secs(1);
/// Smallest (idle) relay buffer.
const SMALL_BUF: usize = 2 * 1024;
/// Largest relay buffer.
const MAX_BUF: usize = 64 * 1024;

/// The message streams end with at shutdown.
pub const SHUTDOWN_MESSAGE: &str = "the poddebug API server is shutting down";

/// Who and what a stream is, for its log line.
#[derive(Clone, Debug, Default)]
pub struct StreamInfo {
    /// `attach` or `log`.
    pub kind: &'static str,
    /// The user.
    pub user: String,
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// The container as the client named it.
    pub container: String,
    /// `websocket/v5.channel.k8s.io`, `spdy/v4.channel.k8s.io`, `http`.
    pub protocol: String,
}

/// Counts one stream in the metrics for its whole life and logs one line when it ends (when
/// dropped, whatever ended it).
pub struct StreamGuard {
    metrics: Arc<Metrics>,
    info: StreamInfo,
    start: Instant,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    counter_in: Counter,
    counter_out: Counter,
    end: std::sync::Mutex<&'static str>,
}

impl StreamGuard {
    /// Start counting a stream (`active_streams` goes up now, down on drop).
    pub fn new(metrics: Arc<Metrics>, info: StreamInfo) -> StreamGuard {
        metrics.active_streams.inc();
        let counter = |d: &str| {
            metrics
                .stream_bytes
                .get_or_create(&DirectionLabels {
                    direction: d.to_owned(),
                })
                .clone()
        };
        let (counter_in, counter_out) = (counter("in"), counter("out"));
        StreamGuard {
            metrics,
            info,
            start: Instant::now(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            counter_in,
            counter_out,
            end: std::sync::Mutex::new("dropped"),
        }
    }

    /// The stream's description.
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// Update the protocol label once it is known.
    pub fn set_protocol(&mut self, protocol: String) {
        self.info.protocol = protocol;
    }

    /// Bytes client → container.
    pub fn add_in(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        self.counter_in.inc_by(n as u64);
    }

    /// Bytes container → client.
    pub fn add_out(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
        self.counter_out.inc_by(n as u64);
    }

    /// Why the stream ended (the first reason given wins over later ones).
    pub fn set_end(&self, why: &'static str) {
        if let Ok(mut e) = self.end.lock()
            && *e == "dropped"
        {
            *e = why;
        }
    }

    /// Bytes relayed so far (in, out).
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.bytes_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
        )
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.metrics.active_streams.dec();
        let elapsed = self.start.elapsed();
        self.metrics.stream_duration.observe(elapsed.as_secs_f64());
        let (bytes_in, bytes_out) = self.bytes();
        let end = self.end.lock().map(|e| *e).unwrap_or("unknown");
        tracing::info!(
            stream = self.info.kind,
            user = %self.info.user,
            namespace = %self.info.namespace,
            pod = %self.info.pod,
            container = %self.info.container,
            protocol = %self.info.protocol,
            bytes_in,
            bytes_out,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            end,
            "stream ended"
        );
    }
}

/// A read buffer that grows while reads fill it and shrinks back when the stream slows down,
/// so that idle streams hold [`SMALL_BUF`] bytes per direction.
///
/// Reads go into spare capacity (never zeroed). Without a recording the buffer is reused for
/// every read; with one, each chunk read is frozen and shared with the recording's queue
/// ([`AdaptiveBuf::take`]) instead of copied, and the next read gets fresh room.
struct AdaptiveBuf {
    data: BytesMut,
    /// How much the next read may take.
    cap: usize,
}

impl AdaptiveBuf {
    fn new() -> Self {
        AdaptiveBuf {
            data: BytesMut::with_capacity(SMALL_BUF),
            cap: SMALL_BUF,
        }
    }

    /// Read at most `limit` (≤ the buffer's size) bytes; `Ok(0)` at end of stream.
    async fn read_from<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
        limit: usize,
    ) -> std::io::Result<usize> {
        self.data.clear();
        self.data.reserve(self.cap);
        let mut room = (&mut self.data).limit(limit.min(self.cap));
        r.read_buf(&mut room).await
    }

    /// The bytes of the last read.
    fn filled(&self) -> &[u8] {
        &self.data
    }

    /// The bytes of the last read, shared (the buffer gets new room for the next read while
    /// they are held).
    fn take(&mut self) -> Bytes {
        self.data.split().freeze()
    }

    fn after_read(&mut self, n: usize) {
        if n == self.cap && self.cap < MAX_BUF {
            self.cap = (self.cap * 4).min(MAX_BUF);
        } else if n < self.cap / 4 && self.cap > SMALL_BUF {
            self.cap = n.next_power_of_two().max(SMALL_BUF);
            // Give the large allocation back.
            self.data = BytesMut::with_capacity(self.cap);
        }
    }
}

/// Resolves when the drain signal is (or becomes) true; never if its sender is gone.
pub(crate) async fn drained(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|d| *d).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// How one direction ended.
#[derive(Debug)]
enum End {
    /// The reading side closed (EOF).
    Eof,
    /// Reading or writing failed.
    Error(std::io::Error),
    /// The server ended the stream (shutdown, or an [`Ending`] of its own): the message was
    /// written, or the stream was closed when no frame boundary came in time.
    Ended(&'static str),
}

/// Frame tracking of the server→client direction.
enum OutTracker {
    WebSocket(websocket_frames::FrameTracker),
    Spdy(spdy_frames::FrameTracker),
}

/// The stdin filter of a moderated session, for its protocol.
enum StdinFilter {
    WebSocket(WsStdinFilter),
    Spdy(SpdyStdinFilter),
}

impl StdinFilter {
    fn filter(&mut self, data: &[u8], open: bool, out: &mut Vec<u8>) {
        match self {
            StdinFilter::WebSocket(f) => f.filter(data, open, out),
            StdinFilter::Spdy(f) => f.filter(data, open, out),
        }
    }
}

/// client → upstream (with a gate, stdin withheld while it is closed).
async fn pump_in<R, W>(
    r: &mut R,
    w: &mut W,
    guard: &StreamGuard,
    spdy: Option<&spdy_frames::Session>,
    tap: Option<&Tap>,
    moderation: Option<(&Gate, StdinFilter)>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = AdaptiveBuf::new();
    let mut tracker = spdy_frames::FrameTracker::default();
    let mut moderation = moderation;
    let mut filtered = Vec::new();
    loop {
        let n = match buf.read_from(r, MAX_BUF).await {
            Ok(0) => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Ok(n) => n,
            Err(e) if is_eof(&e) => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Err(e) => return End::Error(e),
        };
        if let Some(session) = spdy {
            tracker.consume(buf.filled(), &mut |e| session.client_event(e));
        }
        // A moderated session: what goes on is the chunk without the stdin it may not pass.
        let written = if let Some((gate, filter)) = moderation.as_mut() {
            filtered.clear();
            filter.filter(buf.filled(), gate.is_open(), &mut filtered);
            let chunk = Bytes::copy_from_slice(&filtered);
            if let Some(tap) = tap {
                tap.inbound(chunk.clone()).await;
            }
            write_chunk(w, &chunk).await
        } else {
            // The recording takes the chunk before it goes on (in --recording-mode=strict it
            // may make the stream wait for it).
            match tap {
                Some(tap) => {
                    let chunk = buf.take();
                    tap.inbound(chunk.clone()).await;
                    write_chunk(w, &chunk).await
                }
                None => write_chunk(w, buf.filled()).await,
            }
        };
        if let Err(e) = written {
            return End::Error(e);
        }
        guard.add_in(n);
        buf.after_read(n);
    }
}

/// A peer that closed its TCP connection without a TLS close_notify ended the stream all the
/// same (browsers and Go clients do this).
fn is_eof(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
    )
}

async fn write_chunk<W: AsyncWrite + Unpin>(w: &mut W, data: &[u8]) -> std::io::Result<()> {
    w.write_all(data).await?;
    w.flush().await
}

/// What the server→client direction knows to write frames of its own: the framing, how the
/// error channel is written, and where a SPDY client reads stdout.
struct Closing<'a> {
    tracker: OutTracker,
    spdy: Option<&'a spdy_frames::Session>,
    status_errors: bool,
    base64: bool,
    tap: Option<&'a Tap>,
    spdy_streams: &'a SpdyStreams,
}

/// What ends a stream from the server's side: the drain signal (shutdown) and the stream's own
/// [`Ending`]s; and the gate of a moderated session, whose changes the client is told of.
struct Enders<'a> {
    drain: &'a mut watch::Receiver<bool>,
    end: &'a mut watch::Receiver<Option<Ending>>,
    gate: Option<watch::Receiver<bool>>,
}

/// The frame telling the client `text` on stdout, at a frame boundary.
fn notice_frame(
    tracker: &OutTracker,
    base64: bool,
    spdy_streams: &SpdyStreams,
    text: &str,
) -> Option<Vec<u8>> {
    match tracker {
        OutTracker::WebSocket(t) if t.injection_impossible() => None,
        OutTracker::WebSocket(_) => Some(websocket_frames::channel_message(
            1,
            text.as_bytes(),
            base64,
        )),
        OutTracker::Spdy(_) => {
            let stdout = spdy_streams
                .stdout
                .load(std::sync::atomic::Ordering::Acquire);
            (stdout != 0).then(|| spdy_frames::data_frame(stdout, false, text.as_bytes()))
        }
    }
}

/// Whether the server→client direction is between frames.
fn at_boundary(tracker: &OutTracker) -> bool {
    match tracker {
        OutTracker::WebSocket(t) => t.at_message_boundary(),
        OutTracker::Spdy(t) => t.at_frame_boundary(),
    }
}

/// upstream → client, ended by the server with a message at a frame boundary.
async fn pump_out<R, W>(
    r: &mut R,
    w: &mut W,
    guard: &StreamGuard,
    closing: Closing<'_>,
    enders: Enders<'_>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Closing {
        mut tracker,
        spdy,
        status_errors,
        base64,
        tap,
        spdy_streams,
    } = closing;
    let Enders {
        drain,
        end,
        mut gate,
    } = enders;
    let mut buf = AdaptiveBuf::new();
    // The ending under way, and until when a frame boundary is waited for.
    let mut ending: Option<(Ending, tokio::time::Instant)> = None;
    // A notice for the client, written at the next frame boundary.
    let mut notice: Option<&'static str> = match &gate {
        Some(g) if !*g.borrow() => Some(WITHHELD_NOTICE),
        _ => None,
    };
    loop {
        if ending.is_none()
            && let Some(text) = notice
            && at_boundary(&tracker)
        {
            notice = None;
            if let Some(frame) = notice_frame(&tracker, base64, spdy_streams, text) {
                let frame = Bytes::from(frame);
                if let Some(tap) = tap {
                    tap.outbound(frame.clone()).await;
                }
                if let Err(e) = write_chunk(w, &frame).await {
                    return End::Error(e);
                }
                guard.add_out(frame.len());
            }
        }
        if let Some((e, _)) = &ending {
            let payload = e.payload(status_errors);
            let injection = match &tracker {
                OutTracker::WebSocket(t) if t.injection_impossible() => Some(Vec::new()),
                OutTracker::WebSocket(t) if t.at_message_boundary() => {
                    let mut out = websocket_frames::error_channel_message(&payload, base64);
                    out.extend(websocket_frames::close_frame(
                        e.close_code,
                        &e.error.message(),
                    ));
                    Some(out)
                }
                OutTracker::Spdy(t) if t.at_frame_boundary() => Some(
                    spdy.map(|s| s.shutdown_frames(&payload))
                        .unwrap_or_default(),
                ),
                _ => None,
            };
            if let Some(frames) = injection {
                if !frames.is_empty() {
                    let frames = Bytes::from(frames);
                    if let Some(tap) = tap {
                        tap.outbound(frames.clone()).await;
                    }
                    if write_chunk(w, &frames).await.is_ok() {
                        guard.add_out(frames.len());
                    }
                }
                let _ = w.shutdown().await;
                return End::Ended(e.label);
            }
        }
        let limit = match (&tracker, &ending) {
            (_, None) => MAX_BUF,
            (OutTracker::WebSocket(t), Some(_)) => t.wanted(),
            (OutTracker::Spdy(t), Some(_)) => t.wanted(),
        };
        let read = tokio::select! {
            biased;
            _ = drained(drain), if ending.is_none() => {
                ending = Some((Ending::shutdown(), tokio::time::Instant::now() + DRAIN_FINISH));
                continue;
            }
            e = ended(end), if ending.is_none() => {
                ending = Some((e, tokio::time::Instant::now() + DRAIN_FINISH));
                continue;
            }
            changed = gate_changed(&mut gate), if ending.is_none() => {
                notice = Some(if changed { PASSING_NOTICE } else { WITHHELD_NOTICE });
                continue;
            }
            _ = sleep_until_opt(ending.as_ref().map(|(_, at)| *at)) => {
                let _ = w.shutdown().await;
                return End::Ended(ending.as_ref().map_or("server shutting down", |(e, _)| e.label));
            }
            read = buf.read_from(r, limit) => read,
        };
        let n = match read {
            Ok(0) => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Ok(n) => n,
            Err(e) if is_eof(&e) => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Err(e) => return End::Error(e),
        };
        match &mut tracker {
            OutTracker::WebSocket(t) => t.consume(buf.filled()),
            OutTracker::Spdy(t) => {
                t.consume(buf.filled(), &mut |e| {
                    if let Some(s) = spdy {
                        s.server_event(e);
                    }
                });
            }
        }
        // The recording takes the chunk before the client gets it: in --recording-mode=strict
        // no output reaches the client unrecorded, and the stream waits for the recorder.
        let written = match tap {
            Some(tap) => {
                let chunk = buf.take();
                tap.outbound(chunk.clone()).await;
                write_chunk(w, &chunk).await
            }
            None => write_chunk(w, buf.filled()).await,
        };
        if let Err(e) = written {
            return End::Error(e);
        }
        guard.add_out(n);
        if ending.is_none() {
            buf.after_read(n);
        }
    }
}

/// The gate's new state once it changes; never without a gate (or once its sender is gone).
async fn gate_changed(gate: &mut Option<watch::Receiver<bool>>) -> bool {
    match gate {
        Some(rx) => match rx.changed().await {
            Ok(()) => *rx.borrow_and_update(),
            Err(_) => {
                *gate = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// What may end or shape a relayed stream besides its two sides.
#[derive(Debug)]
pub struct Controls {
    /// Flips at shutdown.
    pub drain: watch::Receiver<bool>,
    /// The stream's own [`Ending`] (its recording in strict mode, a termination).
    pub end: watch::Receiver<Option<Ending>>,
    /// A moderated session's gate: the client's stdin passes only while it is open, and the
    /// client is told when that changes.
    pub gate: Option<Arc<Gate>>,
}

/// Relay until both sides are done, one side closed and the other finished (or [`LINGER`]
/// passed), or the server ended the stream: the drain signal (shutdown) or an [`Ending`]. `tap`,
/// when recording, gets every chunk before it is written (shared, not copied).
pub async fn relay<C, U>(
    client: C,
    upstream: U,
    negotiated: &Negotiated,
    controls: Controls,
    guard: &StreamGuard,
    tap: Option<&Tap>,
) where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let Controls {
        mut drain,
        mut end,
        gate,
    } = controls;
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = tokio::io::split(upstream);
    let session = spdy_frames::Session::default();
    let spdy = (negotiated.kind == UpgradeKind::Spdy).then_some(&session);
    let tracker = match negotiated.kind {
        UpgradeKind::WebSocket => OutTracker::WebSocket(Default::default()),
        UpgradeKind::Spdy => OutTracker::Spdy(Default::default()),
    };
    let spdy_streams = Arc::new(SpdyStreams::default());
    let moderation = gate.as_deref().map(|g| {
        let filter = match negotiated.kind {
            UpgradeKind::WebSocket => StdinFilter::WebSocket(WsStdinFilter::default()),
            UpgradeKind::Spdy => StdinFilter::Spdy(SpdyStdinFilter::new(spdy_streams.clone())),
        };
        (g, filter)
    });
    let mut in_drain = drain.clone();
    let inbound = pump_in(&mut cr, &mut uw, guard, spdy, tap, moderation);
    let outbound = pump_out(
        &mut ur,
        &mut cw,
        guard,
        Closing {
            tracker,
            spdy,
            status_errors: negotiated.status_errors(),
            base64: negotiated.base64(),
            tap,
            spdy_streams: &spdy_streams,
        },
        Enders {
            drain: &mut drain,
            end: &mut end,
            gate: gate.as_deref().map(Gate::subscribe),
        },
    );
    tokio::pin!(inbound);
    tokio::pin!(outbound);
    tokio::select! {
        finished = &mut inbound => {
            if let End::Error(e) = &finished {
                tracing::debug!(error = %e, "attach stream: client side failed");
            }
            guard.set_end(match finished {
                End::Eof => "client closed",
                End::Error(_) => "client connection error",
                End::Ended(why) => why,
            });
            let _ = tokio::time::timeout(LINGER, &mut outbound).await;
        }
        finished = &mut outbound => {
            if let End::Error(e) = &finished {
                tracing::debug!(error = %e, "attach stream: upstream side failed");
            }
            guard.set_end(match finished {
                End::Eof => "upstream closed",
                End::Error(_) => "upstream connection error",
                End::Ended(why) => why,
            });
            if !matches!(finished, End::Ended(_)) {
                // Let the client's last frames (a WebSocket close reply) reach the upstream,
                // unless the server is going down.
                tokio::select! {
                    _ = tokio::time::timeout(LINGER, &mut inbound) => {}
                    _ = drained(&mut in_drain) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    fn negotiated(kind: UpgradeKind, protocol: &str) -> Negotiated {
        Negotiated {
            kind,
            protocol: protocol.to_owned(),
        }
    }

    /// The drain signal `drain`, no ending, no gate.
    fn controls(drain: watch::Receiver<bool>) -> Controls {
        Controls {
            drain,
            end: watch::channel(None).1,
            gate: None,
        }
    }

    fn guard() -> StreamGuard {
        StreamGuard::new(Arc::new(Metrics::new()), StreamInfo::default())
    }

    #[tokio::test]
    async fn relays_both_ways_and_closes_the_other_side() {
        let (client, mut client_peer) = duplex(1024);
        let (upstream, mut upstream_peer) = duplex(1024);
        let (_tx, rx) = watch::channel(false);
        let g = guard();
        let n = negotiated(UpgradeKind::WebSocket, "v5.channel.k8s.io");
        let relay = relay(client, upstream, &n, controls(rx), &g, None);
        let peers = async {
            client_peer.write_all(b"to upstream").await.expect("write");
            let mut buf = [0u8; 11];
            upstream_peer.read_exact(&mut buf).await.expect("read");
            assert_eq!(&buf, b"to upstream");
            // A zero-length binary message on channel 1, unmasked.
            upstream_peer.write_all(&[0x82, 1, 1]).await.expect("write");
            let mut buf = [0u8; 3];
            client_peer.read_exact(&mut buf).await.expect("read");
            assert_eq!(buf, [0x82, 1, 1]);
            drop(client_peer);
            let mut rest = Vec::new();
            upstream_peer.read_to_end(&mut rest).await.expect("eof");
            assert!(rest.is_empty());
            drop(upstream_peer);
        };
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(relay, peers) })
            .await
            .expect("relay ends");
        assert_eq!(g.bytes(), (11, 3));
    }

    #[tokio::test]
    async fn drain_injects_status_and_close_at_a_frame_boundary() {
        let (client, mut client_peer) = duplex(1 << 16);
        let (upstream, mut upstream_peer) = duplex(1 << 16);
        let (tx, rx) = watch::channel(false);
        let g = guard();
        let n = negotiated(UpgradeKind::WebSocket, "v5.channel.k8s.io");
        let relay = relay(client, upstream, &n, controls(rx), &g, None);
        let peers = async {
            // Half a frame: header says 4 payload bytes, only 2 sent before the drain.
            upstream_peer
                .write_all(&[0x82, 4, 1, b'a'])
                .await
                .expect("write");
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(true).expect("drain");
            tokio::time::sleep(Duration::from_millis(50)).await;
            upstream_peer
                .write_all(&[b'b', b'c', 0x82, 2, 1, b'z'])
                .await
                .expect("write");
            let mut got = Vec::new();
            tokio::time::timeout(Duration::from_secs(3), client_peer.read_to_end(&mut got))
                .await
                .expect("client sees the end")
                .expect("read");
            got
        };
        let ((), got) =
            tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(relay, peers) })
                .await
                .expect("relay ends");
        assert_eq!(&got[..6], &[0x82, 4, 1, b'a', b'b', b'c']);
        let rest = &got[6..];
        assert_eq!(
            rest[0], 0x82,
            "an error-channel message follows the finished frame"
        );
        let (len, at) = match rest[1] {
            126 => (usize::from(u16::from_be_bytes([rest[2], rest[3]])), 4),
            n => (usize::from(n), 2),
        };
        assert_eq!(rest[at], 3);
        let status: serde_json::Value =
            serde_json::from_slice(&rest[at + 1..at + len]).expect("Status");
        assert_eq!(status["message"], SHUTDOWN_MESSAGE);
        assert_eq!(status["status"], "Failure");
        let close = &rest[at + len..];
        assert_eq!(close[0], 0x88);
        assert_eq!(&close[2..4], &1001u16.to_be_bytes());
    }

    #[tokio::test]
    async fn drain_sends_goaway_on_spdy() {
        let (client, mut client_peer) = duplex(1 << 16);
        let (upstream, mut upstream_peer) = duplex(1 << 16);
        let (tx, rx) = watch::channel(false);
        let g = guard();
        let n = negotiated(UpgradeKind::Spdy, "v4.channel.k8s.io");
        let relay = relay(client, upstream, &n, controls(rx), &g, None);
        let peers = async {
            // SYN_STREAM id 1 from the client, SYN_REPLY id 1 from the server.
            let syn = |kind: u8, id: u8| vec![0x80, 3, 0, kind, 0, 0, 0, 4, 0, 0, 0, id];
            client_peer.write_all(&syn(1, 1)).await.expect("write");
            let mut buf = [0u8; 12];
            upstream_peer.read_exact(&mut buf).await.expect("read");
            upstream_peer.write_all(&syn(2, 1)).await.expect("write");
            client_peer.read_exact(&mut buf).await.expect("read");
            tx.send(true).expect("drain");
            let mut got = Vec::new();
            tokio::time::timeout(Duration::from_secs(3), client_peer.read_to_end(&mut got))
                .await
                .expect("client sees the end")
                .expect("read");
            got
        };
        let ((), got) =
            tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(relay, peers) })
                .await
                .expect("relay ends");
        let payload = Ending::shutdown().payload(n.status_errors());
        let mut expected = spdy_frames::data_frame(1, true, &payload);
        expected.extend(spdy_frames::goaway_frame(1));
        assert_eq!(got, expected);
    }

    #[tokio::test]
    async fn buffers_grow_and_shrink() {
        let big = vec![7u8; MAX_BUF * 2];
        let mut src: &[u8] = &big;
        let mut b = AdaptiveBuf::new();
        let mut sizes = Vec::new();
        for _ in 0..3 {
            let n = b.read_from(&mut src, MAX_BUF).await.expect("read");
            sizes.push(n);
            b.after_read(n);
        }
        assert_eq!(
            sizes,
            [SMALL_BUF, SMALL_BUF * 4, (SMALL_BUF * 16).min(MAX_BUF)]
        );
        let mut small: &[u8] = &[1; 10];
        let n = b.read_from(&mut small, MAX_BUF).await.expect("read");
        assert_eq!(b.filled(), &[1; 10]);
        b.after_read(n);
        assert_eq!(b.cap, SMALL_BUF);
        assert!(
            b.data.capacity() < SMALL_BUF * 4,
            "the large room was given back"
        );
    }

    #[tokio::test]
    async fn a_taken_chunk_keeps_its_bytes_while_the_buffer_reads_on() {
        let mut src: &[u8] = b"first chunk";
        let mut b = AdaptiveBuf::new();
        b.read_from(&mut src, 5).await.expect("read");
        let first = b.take();
        b.read_from(&mut src, 100).await.expect("read");
        assert_eq!(&first[..], b"first");
        assert_eq!(b.filled(), b" chunk");
    }
}
