//! The relay of an upgraded attach: client ⇄ upstream, both ways at once, with backpressure (a
//! chunk is written before the next is read) and buffers that grow under bulk traffic and
//! shrink back when the stream idles.
//!
//! Client → upstream, the client's side of the protocol is terminated
//! ([`websocket::ClientSide`], [`spdy::ClientSide`]): each parsed message is judged — a stream or
//! message the session's [`Grants`] do not grant ends the session, stdin passes only while the
//! session's [`Gate`] is open —, handed to the [`Recorder`] and encoded upstream by poddebug. A
//! client that breaks the protocol, or sends what it was not granted, ends the session with a
//! `Status` saying why; nothing from the offending message on is forwarded.
//!
//! Upstream → client, the upstream's frames are followed ([`websocket::ServerSide`],
//! [`spdy::ServerSide`]) and written with poddebug's own frame heads; output goes to the recorder
//! before the client gets it.
//!
//! A side that closes makes the relay shut down the other side's write half; the other direction
//! then gets [`LINGER`] to finish before both connections are dropped. The server ends a stream
//! (the drain signal at shutdown, an [`Ending`] of its own, the idle timeout) at the next frame
//! boundary of the upstream→client direction with a message (WebSocket: a `Status` on the error
//! channel and a close frame; SPDY: a last message on the error stream and GOAWAY); a stream that
//! cannot reach a boundary within [`DRAIN_FINISH`] is just closed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::channel::{RESIZE, Recorded, STDIN, STDOUT};
use crate::ending::{EndSignal, Ending, ended};
use crate::gate::{Gate, PASSING_NOTICE, WITHHELD_NOTICE};
use crate::grants::Grants;
use crate::request::{Negotiated, UpgradeKind};
use crate::websocket::ClientMessage;
use crate::websocket::frame::{channel_message, close_frame, error_channel_message};
use crate::{spdy, websocket};

/// How long the other direction may go on after one side closed.
pub const LINGER: Duration = Duration::from_secs(5);
/// How long a stream being ended may take to reach a frame boundary.
pub const DRAIN_FINISH: Duration = Duration::from_secs(1);
/// Smallest (idle) relay buffer.
const SMALL_BUF: usize = 2 * 1024;
/// Largest relay buffer.
const MAX_BUF: usize = 64 * 1024;

/// Counts a stream's bytes and hears why it ended (the server's metrics and log line).
pub trait Meter: Send + Sync {
    /// `n` bytes read from the client.
    fn inbound(&self, n: usize);
    /// `n` bytes read from the upstream.
    fn outbound(&self, n: usize);
    /// Why the stream ended (the first reason given counts).
    fn end(&self, why: &'static str);
}

/// Where a session's parsed messages are recorded. The relay calls it with the messages of
/// each read before it writes what they were encoded into, and waits for it (a recorder that
/// must not lose anything may make the stream wait).
pub trait Recorder: Send + Sync {
    /// The messages of one read, in order.
    fn record(&self, events: Vec<Recorded>) -> impl Future<Output = ()> + Send;
}

/// A session that is not recorded.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRecorder;

impl Recorder for NoRecorder {
    async fn record(&self, _events: Vec<Recorded>) {}
}

/// What may end or shape a relayed stream besides its two sides.
#[derive(Debug)]
pub struct Controls {
    /// Flips at shutdown.
    pub drain: watch::Receiver<bool>,
    /// The stream's own ending (its recording, a termination); the relay uses it too when the
    /// client breaks the protocol.
    pub end: EndSignal,
    /// What the client may send ([`Grants`]): anything else ends the session, unforwarded.
    pub grants: Grants,
    /// A moderated session's gate: the client's stdin passes only while it is open, and the
    /// client is told when that changes (when it may send input at all).
    pub gate: Option<Arc<Gate>>,
    /// End the stream when no data crossed it, either way, for this long (ping and pong frames
    /// do not count).
    pub idle_timeout: Option<Duration>,
}

/// A read buffer that grows while reads fill it and shrinks back when the stream slows down,
/// so that idle streams hold [`SMALL_BUF`] bytes per direction. Each chunk read is frozen and
/// handed on (recorders keep slices of it); the next read gets fresh room.
struct AdaptiveBuf {
    data: BytesMut,
    cap: usize,
}

impl AdaptiveBuf {
    fn new() -> Self {
        AdaptiveBuf {
            data: BytesMut::with_capacity(SMALL_BUF),
            cap: SMALL_BUF,
        }
    }

    /// Read at most `limit` bytes; the chunk read (empty at end of stream).
    async fn read_from<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
        limit: usize,
    ) -> std::io::Result<Bytes> {
        self.data.clear();
        self.data.reserve(self.cap);
        let mut room = (&mut self.data).limit(limit.min(self.cap));
        r.read_buf(&mut room).await?;
        let chunk = self.data.split().freeze();
        self.after_read(chunk.len());
        Ok(chunk)
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
pub async fn drained(rx: &mut watch::Receiver<bool>) {
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
    /// The server ended the stream: the message was written, or the stream was closed when no
    /// frame boundary came in time.
    Ended(&'static str),
}

/// When data last crossed the stream, either way.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    fn idle_until(&self, timeout: Duration) -> Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed)) + timeout
    }
}

/// What both directions share.
struct Shared {
    activity: Activity,
    /// SPDY: the client's streams by type.
    streams: Arc<spdy::Streams>,
    /// SPDY: the client sent GOAWAY (no frame of ours may follow).
    client_gone_away: AtomicBool,
    /// SPDY: the stream the client opened and was refused (0: none), reset at the ending.
    refused_stream: AtomicU32,
}

/// The client's side, terminated.
enum InSide {
    WebSocket(websocket::ClientSide),
    Spdy(spdy::ClientSide),
}

/// The upstream's side, followed.
enum OutSide {
    WebSocket(websocket::ServerSide),
    Spdy(spdy::ServerSide),
}

impl OutSide {
    fn at_boundary(&self) -> bool {
        match self {
            OutSide::WebSocket(s) => s.at_message_boundary(),
            OutSide::Spdy(s) => s.at_frame_boundary(),
        }
    }

    fn wanted(&self) -> usize {
        match self {
            OutSide::WebSocket(s) => s.wanted(),
            OutSide::Spdy(s) => s.wanted(),
        }
    }
}

fn is_eof(e: &std::io::Error) -> bool {
    // A peer that closed its TCP connection without a TLS close_notify ended the stream all the
    // same (browsers and Go clients do this).
    matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
    )
}

async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, data: &[u8]) -> std::io::Result<()> {
    w.write_all(data).await?;
    w.flush().await
}

/// client → upstream: parse, judge, record, encode.
#[allow(clippy::too_many_arguments)]
async fn pump_in<R, W, M, Rec>(
    r: &mut R,
    w: &mut W,
    mut side: InSide,
    shared: &Shared,
    grants: Grants,
    gate: Option<&Gate>,
    end: &EndSignal,
    meter: &M,
    recorder: Option<&Rec>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    M: Meter,
    Rec: Recorder,
{
    let mut buf = AdaptiveBuf::new();
    let mut ws_messages = Vec::new();
    let mut spdy_frames = Vec::new();
    let mut upstream = Vec::new();
    loop {
        let chunk = match buf.read_from(r, MAX_BUF).await {
            Ok(c) if c.is_empty() => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Ok(c) => c,
            Err(e) if is_eof(&e) => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Err(e) => return End::Error(e),
        };
        meter.inbound(chunk.len());
        let open = gate.is_none_or(Gate::is_open);
        let mut events = Vec::new();
        let mut data = false;
        // What the client sent that it was not granted: nothing from it on is forwarded.
        let mut refused: Option<String> = None;
        upstream.clear();
        let parsed = match &mut side {
            InSide::WebSocket(s) => {
                ws_messages.clear();
                let parsed = s.feed(&chunk, &mut ws_messages);
                for m in ws_messages.drain(..) {
                    data |= m.is_data();
                    match &m {
                        ClientMessage::Stdin(_) if !grants.stdin => {
                            refused = grants.input_refusal();
                            break;
                        }
                        ClientMessage::Resize(_) if !grants.resize => {
                            refused = grants.resize_refusal();
                            break;
                        }
                        // The end of a channel that was never granted carries nothing.
                        ClientMessage::CloseChannel(c)
                            if (*c == STDIN && !grants.stdin)
                                || (*c == RESIZE && !grants.resize) =>
                        {
                            continue;
                        }
                        ClientMessage::Stdin(_) if !open => continue,
                        ClientMessage::Stdin(b) => events.push(Recorded::Input(b.clone())),
                        ClientMessage::Resize(t) => events.push(Recorded::Resize(*t)),
                        _ => {}
                    }
                    s.encode(&m, &mut upstream);
                }
                parsed
            }
            InSide::Spdy(s) => {
                spdy_frames.clear();
                let parsed = s.feed(&chunk, &mut spdy_frames);
                for f in spdy_frames.drain(..) {
                    data |= f.is_data();
                    if let spdy::ClientFrame::Open { id, kind, .. } = &f
                        && let Some(why) = grants.refusal(*kind)
                    {
                        shared.refused_stream.store(*id, Ordering::Release);
                        refused = Some(why);
                        break;
                    }
                    let f = match f {
                        // Withheld input is dropped; its half-close still passes.
                        spdy::ClientFrame::Stdin { fin: false, .. } if !open => continue,
                        spdy::ClientFrame::Stdin { id, fin: true, .. } if !open => {
                            spdy::ClientFrame::Stdin {
                                id,
                                data: Bytes::new(),
                                fin: true,
                            }
                        }
                        spdy::ClientFrame::GoAway { .. } => {
                            shared.client_gone_away.store(true, Ordering::Release);
                            f
                        }
                        f => f,
                    };
                    match &f {
                        spdy::ClientFrame::Stdin { data, .. } if !data.is_empty() => {
                            events.push(Recorded::Input(data.clone()))
                        }
                        spdy::ClientFrame::Resize { sizes, .. } => {
                            events.extend(sizes.iter().map(|t| Recorded::Resize(*t)))
                        }
                        _ => {}
                    }
                    s.encode(&f, &mut upstream);
                }
                parsed
            }
        };
        if data {
            shared.activity.touch();
        }
        if let Some(rec) = recorder
            && !events.is_empty()
        {
            rec.record(events).await;
        }
        if !upstream.is_empty()
            && let Err(e) = write_all(w, &upstream).await
        {
            return End::Error(e);
        }
        if let Some(why) = refused {
            tracing::debug!(refused = %why, "attach stream: the client sent what it was not granted");
            end.end(Ending::ungranted(&why));
            return End::Ended("client stream not granted");
        }
        if let Err(e) = parsed {
            tracing::debug!(error = %e, "attach stream: the client broke the protocol");
            end.end(Ending::refused(&e.0));
            return End::Ended("client protocol violation");
        }
    }
}

/// The upstream→client direction's way to write frames of its own.
struct Own<'a> {
    negotiated: &'a Negotiated,
    shared: &'a Shared,
}

/// Whether a notice can be written.
enum Notice {
    /// Now, as this frame.
    Now(Vec<u8>),
    /// Not yet (SPDY: no output stream is open yet).
    NotYet,
    /// Never (the stream is closing).
    Never,
}

impl Own<'_> {
    /// A notice on stdout.
    fn notice(&self, side: &OutSide, text: &str) -> Notice {
        match side {
            OutSide::WebSocket(s) if s.closed() => Notice::Never,
            OutSide::WebSocket(_) => Notice::Now(channel_message(
                STDOUT,
                text.as_bytes(),
                self.negotiated.base64(),
            )),
            OutSide::Spdy(s)
                if s.gone_away() || self.shared.client_gone_away.load(Ordering::Acquire) =>
            {
                Notice::Never
            }
            OutSide::Spdy(s) => s
                .notice_frame(text.as_bytes())
                .map_or(Notice::NotYet, Notice::Now),
        }
    }

    /// The frames that end the stream with `e`, once they may be written (`Some(empty)`: none
    /// may ever be written).
    fn ending(&self, side: &OutSide, e: &Ending) -> Option<Vec<u8>> {
        let payload = e.payload(self.negotiated.status_errors());
        match side {
            OutSide::WebSocket(s) if s.closed() => Some(Vec::new()),
            OutSide::WebSocket(s) if s.at_message_boundary() => {
                let mut out = error_channel_message(&payload, self.negotiated.base64());
                out.extend(close_frame(e.close_code, &e.error.message()));
                Some(out)
            }
            // The error stream's reply is waited for (within the ending's DRAIN_FINISH), so the
            // client is told why.
            OutSide::Spdy(s) if s.at_frame_boundary() && !s.error_reply_pending() => {
                Some(s.ending_frames(
                    self.shared.client_gone_away.load(Ordering::Acquire),
                    &payload,
                    self.shared.refused_stream.load(Ordering::Acquire),
                ))
            }
            _ => None,
        }
    }
}

/// What ends a stream from the server's side, and the gate whose changes the client is told of.
struct Enders<'a> {
    drain: &'a mut watch::Receiver<bool>,
    end: watch::Receiver<Option<Ending>>,
    gate: Option<watch::Receiver<bool>>,
    idle_timeout: Option<Duration>,
}

/// upstream → client, ended by the server with a message at a frame boundary.
async fn pump_out<R, W, M, Rec>(
    r: &mut R,
    w: &mut W,
    mut side: OutSide,
    own: Own<'_>,
    enders: Enders<'_>,
    meter: &M,
    recorder: Option<&Rec>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    M: Meter,
    Rec: Recorder,
{
    let Enders {
        drain,
        mut end,
        mut gate,
        idle_timeout,
    } = enders;
    let mut buf = AdaptiveBuf::new();
    let mut out = Vec::new();
    // The ending under way, and until when a frame boundary is waited for.
    let mut ending: Option<(Ending, Instant)> = None;
    // A notice for the client, written at the next frame boundary.
    let mut notice: Option<&'static str> = match &gate {
        Some(g) if !*g.borrow() => Some(WITHHELD_NOTICE),
        _ => None,
    };
    loop {
        if ending.is_none()
            && let Some(text) = notice
            && side.at_boundary()
        {
            match own.notice(&side, text) {
                Notice::Now(frame) => {
                    notice = None;
                    if let Some(rec) = recorder {
                        rec.record(vec![Recorded::Notice(Bytes::from_static(text.as_bytes()))])
                            .await;
                    }
                    if let Err(e) = write_all(w, &frame).await {
                        return End::Error(e);
                    }
                }
                Notice::NotYet => {}
                Notice::Never => notice = None,
            }
        }
        if let Some((e, _)) = &ending
            && let Some(frames) = own.ending(&side, e)
        {
            if !frames.is_empty() {
                if let Some(rec) = recorder {
                    let payload = e.payload(own.negotiated.status_errors());
                    rec.record(vec![Recorded::Error(Bytes::from(payload))])
                        .await;
                }
                let _ = write_all(w, &frames).await;
            }
            let _ = w.shutdown().await;
            return End::Ended(e.label);
        }
        let limit = if ending.is_some() {
            side.wanted()
        } else {
            MAX_BUF
        };
        let idle_at = idle_timeout.map(|t| (t, own.shared.activity.idle_until(t)));
        let read = tokio::select! {
            biased;
            _ = drained(drain), if ending.is_none() => {
                ending = Some((Ending::shutdown(), Instant::now() + DRAIN_FINISH));
                continue;
            }
            e = ended(&mut end), if ending.is_none() => {
                ending = Some((e, Instant::now() + DRAIN_FINISH));
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
            _ = sleep_until_opt(idle_at.map(|(_, at)| at)), if ending.is_none() => {
                if let Some((t, _)) = idle_at
                    && own.shared.activity.idle_until(t) <= Instant::now()
                {
                    ending = Some((Ending::idle(t), Instant::now() + DRAIN_FINISH));
                }
                continue;
            }
            read = buf.read_from(r, limit) => read,
        };
        let chunk = match read {
            Ok(c) if c.is_empty() => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Ok(c) => c,
            Err(e) if is_eof(&e) => {
                let _ = w.shutdown().await;
                return End::Eof;
            }
            Err(e) => return End::Error(e),
        };
        meter.outbound(chunk.len());
        out.clear();
        let mut events = Vec::new();
        let (parsed, data) = match &mut side {
            OutSide::WebSocket(s) => (s.feed(&chunk, &mut out, &mut events), s.take_data_seen()),
            OutSide::Spdy(s) => (s.feed(&chunk, &mut out, &mut events), s.take_data_seen()),
        };
        if data {
            own.shared.activity.touch();
        }
        if let Some(rec) = recorder
            && !events.is_empty()
        {
            rec.record(events).await;
        }
        if !out.is_empty()
            && let Err(e) = write_all(w, &out).await
        {
            return End::Error(e);
        }
        if let Err(e) = parsed {
            // The upstream's framing can no longer be followed: nothing of ours can be written
            // at a boundary, so the stream is closed.
            tracing::warn!(error = %e, "attach stream: the upstream broke the protocol");
            let _ = w.shutdown().await;
            return End::Ended("upstream protocol violation");
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

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Relay until both sides are done, one side closed and the other finished (or [`LINGER`]
/// passed), or the server ended the stream (module docs). `recorder`, when recording, gets every
/// parsed message before the bytes it was encoded into are written.
pub async fn relay<C, U, M, Rec>(
    client: C,
    upstream: U,
    negotiated: &Negotiated,
    controls: Controls,
    meter: &M,
    recorder: Option<&Rec>,
) where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
    M: Meter,
    Rec: Recorder,
{
    let Controls {
        mut drain,
        end,
        grants,
        gate,
        idle_timeout,
    } = controls;
    // A session that takes no input has nothing to withhold, nor to tell its client about.
    let gate = gate.filter(|_| grants.stdin);
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = tokio::io::split(upstream);
    let shared = Shared {
        activity: Activity::new(),
        streams: Arc::new(spdy::Streams::default()),
        client_gone_away: AtomicBool::new(false),
        refused_stream: AtomicU32::new(0),
    };
    let record = recorder.is_some();
    let (in_side, out_side) = match negotiated.kind {
        UpgradeKind::WebSocket => (
            InSide::WebSocket(websocket::ClientSide::new(&negotiated.protocol)),
            OutSide::WebSocket(websocket::ServerSide::new(&negotiated.protocol, record)),
        ),
        UpgradeKind::Spdy => (
            InSide::Spdy(spdy::ClientSide::new(shared.streams.clone())),
            OutSide::Spdy(spdy::ServerSide::new(shared.streams.clone(), record)),
        ),
    };
    let mut in_drain = drain.clone();
    let inbound = pump_in(
        &mut cr,
        &mut uw,
        in_side,
        &shared,
        grants,
        gate.as_deref(),
        &end,
        meter,
        recorder,
    );
    let outbound = pump_out(
        &mut ur,
        &mut cw,
        out_side,
        Own {
            negotiated,
            shared: &shared,
        },
        Enders {
            drain: &mut drain,
            end: end.subscribe(),
            gate: gate.as_deref().map(Gate::subscribe),
            idle_timeout,
        },
        meter,
        recorder,
    );
    tokio::pin!(inbound);
    tokio::pin!(outbound);
    tokio::select! {
        finished = &mut inbound => {
            if let End::Error(e) = &finished {
                tracing::debug!(error = %e, "attach stream: client side failed");
            }
            meter.end(match finished {
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
            meter.end(match finished {
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
mod tests;
