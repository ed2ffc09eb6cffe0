//! SPDY/3.1 framing, once for the whole server: [`FrameSplitter`] cuts a byte stream, split
//! anywhere, into frame heads, payload pieces and frame ends; the relay's light
//! [`FrameTracker`] (stream opens and closes, for the shutdown message) and the recorder's
//! decoder (`recording::decode`, which also reads header blocks and stream data) are both built
//! on it. Also the frames the proxy may write to the client at shutdown: a last message on the
//! error stream and GOAWAY.
//!
//! Header blocks are zlib-compressed with a session-wide context, so the tracker never reads
//! them: it only sees frame types, flags and stream ids. The error stream is recognised the way
//! client-go opens it: it is the first stream the client creates (`streamType: error` is always
//! opened first, see the reference notes §3.2).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// SYN_STREAM.
pub const SYN_STREAM: u16 = 1;
/// SYN_REPLY.
pub const SYN_REPLY: u16 = 2;
/// RST_STREAM.
pub const RST_STREAM: u16 = 3;
/// GOAWAY.
pub const GOAWAY: u16 = 7;
/// HEADERS.
pub const HEADERS: u16 = 8;
/// FLAG_FIN on data frames and SYN_STREAM / SYN_REPLY.
pub const FLAG_FIN: u8 = 0x01;

/// The 8-byte head of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// The control frame's type; `None` for a data frame.
    pub control: Option<u16>,
    /// The data frame's stream (0 for control frames: theirs is in the payload).
    pub stream: u32,
    /// Flags.
    pub flags: u8,
    /// Payload length.
    pub len: u32,
}

/// One piece of a SPDY byte stream, as [`FrameSplitter::next`] cuts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A frame begins.
    Start(FrameHead),
    /// Some of the current frame's payload, in order.
    Payload(&'a [u8]),
    /// The current frame ended (right after its head when it has no payload).
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    Header { have: usize },
    Payload { remaining: u32 },
}

/// Follows the frame boundaries of one direction of a SPDY session across any split of the
/// bytes, copying nothing but the 8 bytes of a frame head.
#[derive(Clone, Debug)]
pub struct FrameSplitter {
    position: Position,
    header: [u8; 8],
    /// A frame ended and [`Piece::End`] is still to be handed out.
    end_pending: bool,
}

impl Default for FrameSplitter {
    fn default() -> Self {
        FrameSplitter {
            position: Position::Header { have: 0 },
            header: [0; 8],
            end_pending: false,
        }
    }
}

impl FrameSplitter {
    /// The next piece of `data` (advanced past what it takes); `None` once `data` is used up
    /// and no frame end is pending.
    pub fn next<'a>(&mut self, data: &mut &'a [u8]) -> Option<Piece<'a>> {
        if self.end_pending {
            self.end_pending = false;
            return Some(Piece::End);
        }
        loop {
            if data.is_empty() {
                return None;
            }
            match self.position {
                Position::Header { have } => {
                    let take = (8 - have).min(data.len());
                    self.header[have..have + take].copy_from_slice(&data[..take]);
                    *data = &data[take..];
                    if have + take < 8 {
                        self.position = Position::Header { have: have + take };
                        continue;
                    }
                    let h = self.header;
                    let head = FrameHead {
                        control: (h[0] & 0x80 != 0).then(|| u16::from_be_bytes([h[2], h[3]])),
                        stream: if h[0] & 0x80 != 0 {
                            0
                        } else {
                            stream_id([h[0], h[1], h[2], h[3]])
                        },
                        flags: h[4],
                        len: u32::from_be_bytes([0, h[5], h[6], h[7]]),
                    };
                    if head.len == 0 {
                        self.position = Position::Header { have: 0 };
                        self.end_pending = true;
                    } else {
                        self.position = Position::Payload {
                            remaining: head.len,
                        };
                    }
                    return Some(Piece::Start(head));
                }
                Position::Payload { remaining } => {
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(data.len());
                    let (piece, rest) = data.split_at(take);
                    *data = rest;
                    let left = remaining - take as u32;
                    if left == 0 {
                        self.position = Position::Header { have: 0 };
                        self.end_pending = true;
                    } else {
                        self.position = Position::Payload { remaining: left };
                    }
                    return Some(Piece::Payload(piece));
                }
            }
        }
    }

    /// Whether the next byte starts a frame.
    pub fn at_frame_boundary(&self) -> bool {
        self.position == Position::Header { have: 0 }
    }

    /// How many bytes may be read without running past the next frame boundary (at least 1).
    pub fn wanted(&self) -> usize {
        match self.position {
            Position::Header { have } => 8 - have,
            Position::Payload { remaining } => usize::try_from(remaining).unwrap_or(usize::MAX),
        }
        .max(1)
    }
}

/// What one side of the session did that matters for injection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A stream was opened (SYN_STREAM).
    Opened(u32),
    /// A stream was accepted (SYN_REPLY), possibly half-closed at once.
    Replied {
        /// Stream id.
        id: u32,
        /// FIN flag.
        fin: bool,
    },
    /// A data frame with FIN: the sender will send nothing more on this stream.
    Finished(u32),
    /// RST_STREAM: the stream is gone both ways.
    Reset(u32),
    /// GOAWAY: the sender ends the session.
    GoAway,
}

/// Follows one direction of a SPDY session for the relay: which streams open and close.
#[derive(Clone, Debug, Default)]
pub struct FrameTracker {
    splitter: FrameSplitter,
    /// First payload bytes of the current control frame (stream id of SYN_STREAM/SYN_REPLY/RST).
    prefix: [u8; 4],
    prefix_len: usize,
    control_type: Option<u16>,
    control_flags: u8,
}

fn stream_id(b: [u8; 4]) -> u32 {
    u32::from_be_bytes(b) & 0x7fff_ffff
}

impl FrameTracker {
    /// Feed relayed bytes; `on_event` hears about streams opening and closing.
    pub fn consume(&mut self, mut data: &[u8], on_event: &mut impl FnMut(Event)) {
        while let Some(piece) = self.splitter.next(&mut data) {
            match piece {
                Piece::Start(head) => {
                    self.control_type = head.control;
                    self.control_flags = head.flags;
                    self.prefix_len = 0;
                    match head.control {
                        Some(GOAWAY) => on_event(Event::GoAway),
                        None if head.flags & FLAG_FIN != 0 => {
                            on_event(Event::Finished(head.stream))
                        }
                        _ => {}
                    }
                }
                Piece::Payload(p) => {
                    if self.control_type.is_some() && self.prefix_len < 4 {
                        let n = (4 - self.prefix_len).min(p.len());
                        self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&p[..n]);
                        self.prefix_len += n;
                        if self.prefix_len == 4 {
                            self.control_prefix_complete(on_event);
                        }
                    }
                }
                Piece::End => {
                    self.control_type = None;
                    self.prefix_len = 0;
                }
            }
        }
    }

    fn control_prefix_complete(&mut self, on_event: &mut impl FnMut(Event)) {
        let id = stream_id(self.prefix);
        match self.control_type {
            Some(SYN_STREAM) => on_event(Event::Opened(id)),
            Some(SYN_REPLY) => on_event(Event::Replied {
                id,
                fin: self.control_flags & FLAG_FIN != 0,
            }),
            Some(RST_STREAM) => on_event(Event::Reset(id)),
            _ => {}
        }
    }

    /// Whether the next byte starts a frame.
    pub fn at_frame_boundary(&self) -> bool {
        self.splitter.at_frame_boundary()
    }

    /// How many bytes may be read without running past the next frame boundary (at least 1).
    pub fn wanted(&self) -> usize {
        self.splitter.wanted()
    }
}

/// What both directions learn about the session, for the shutdown message.
#[derive(Debug, Default)]
pub struct Session {
    /// The first stream the client opened (client-go's error stream); 0 = none yet.
    error_stream: AtomicU32,
    /// Highest stream id the client opened (GOAWAY's last-good-stream-id).
    last_client_stream: AtomicU32,
    /// The upstream accepted the error stream.
    error_replied: AtomicBool,
    /// The error stream was finished by the upstream or reset by either side.
    error_closed: AtomicBool,
    /// Either side sent GOAWAY.
    gone_away: AtomicBool,
}

impl Session {
    /// An event seen on the client→server direction.
    pub fn client_event(&self, e: Event) {
        match e {
            Event::Opened(id) => {
                let _ =
                    self.error_stream
                        .compare_exchange(0, id, Ordering::AcqRel, Ordering::Acquire);
                self.last_client_stream.fetch_max(id, Ordering::AcqRel);
            }
            Event::Reset(id) if id == self.error_stream.load(Ordering::Acquire) => {
                self.error_closed.store(true, Ordering::Release);
            }
            Event::GoAway => self.gone_away.store(true, Ordering::Release),
            _ => {}
        }
    }

    /// An event seen on the server→client direction.
    pub fn server_event(&self, e: Event) {
        let error = self.error_stream.load(Ordering::Acquire);
        match e {
            Event::Replied { id, fin } if id == error && id != 0 => {
                self.error_replied.store(true, Ordering::Release);
                if fin {
                    self.error_closed.store(true, Ordering::Release);
                }
            }
            Event::Finished(id) | Event::Reset(id) if id == error && id != 0 => {
                self.error_closed.store(true, Ordering::Release);
            }
            Event::GoAway => self.gone_away.store(true, Ordering::Release),
            _ => {}
        }
    }

    /// The frames to write to the client at shutdown: a last message with FIN on the error
    /// stream when it is still open, then GOAWAY; nothing if a GOAWAY was already sent.
    pub fn shutdown_frames(&self, error_payload: &[u8]) -> Vec<u8> {
        if self.gone_away.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let error = self.error_stream.load(Ordering::Acquire);
        if error != 0
            && self.error_replied.load(Ordering::Acquire)
            && !self.error_closed.load(Ordering::Acquire)
        {
            out.extend(data_frame(error, true, error_payload));
        }
        out.extend(goaway_frame(
            self.last_client_stream.load(Ordering::Acquire),
        ));
        out
    }
}

/// A data frame (payloads above 16 MiB are cut: ours are a few hundred bytes).
pub fn data_frame(stream_id: u32, fin: bool, payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(0x00ff_ffff);
    let mut out = Vec::with_capacity(8 + len);
    out.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
    let len_bytes = (len as u32).to_be_bytes();
    out.push(if fin { FLAG_FIN } else { 0 });
    out.extend_from_slice(&len_bytes[1..]);
    out.extend_from_slice(&payload[..len]);
    out
}

/// GOAWAY with status OK.
pub fn goaway_frame(last_good_stream: u32) -> Vec<u8> {
    let mut out = vec![0x80, 0x03, 0x00, GOAWAY as u8, 0x00, 0x00, 0x00, 0x08];
    out.extend_from_slice(&(last_good_stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0x80, 0x03];
        out.extend_from_slice(&kind.to_be_bytes());
        out.push(flags);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(payload);
        out
    }

    fn syn(kind: u16, id: u32, flags: u8) -> Vec<u8> {
        let mut p = id.to_be_bytes().to_vec();
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x78, 0x9c, 1, 2, 3]);
        control(kind, flags, &p)
    }

    #[test]
    fn tracks_streams_across_any_split() {
        let mut client = Vec::new();
        client.extend(syn(SYN_STREAM, 1, 0));
        client.extend(syn(SYN_STREAM, 3, 0));
        client.extend(data_frame(3, false, b"hello"));
        client.extend(syn(SYN_STREAM, 5, 0));
        let mut server = Vec::new();
        server.extend(syn(SYN_REPLY, 1, 0));
        server.extend(syn(SYN_REPLY, 3, 0));
        server.extend(data_frame(5, false, &vec![0u8; 70_000]));
        for chunk in [1usize, 3, 8, 13, 1000] {
            let s = Session::default();
            let mut t = FrameTracker::default();
            for piece in client.chunks(chunk) {
                t.consume(piece, &mut |e| s.client_event(e));
            }
            assert!(t.at_frame_boundary());
            let mut t = FrameTracker::default();
            for piece in server.chunks(chunk) {
                t.consume(piece, &mut |e| s.server_event(e));
            }
            assert!(t.at_frame_boundary());
            let frames = s.shutdown_frames(b"{}");
            let mut expected = data_frame(1, true, b"{}");
            expected.extend(goaway_frame(5));
            assert_eq!(frames, expected, "chunk {chunk}");
        }
    }

    #[test]
    fn closed_error_stream_gets_only_goaway() {
        let s = Session::default();
        s.client_event(Event::Opened(1));
        s.server_event(Event::Replied { id: 1, fin: false });
        s.server_event(Event::Finished(1));
        assert_eq!(s.shutdown_frames(b"x"), goaway_frame(1));
        s.client_event(Event::GoAway);
        assert!(s.shutdown_frames(b"x").is_empty());
    }

    #[test]
    fn wanted_stops_at_boundaries() {
        let mut t = FrameTracker::default();
        let f = data_frame(1, false, b"abc");
        t.consume(&f[..5], &mut |_| {});
        assert_eq!(t.wanted(), 3);
        t.consume(&f[5..9], &mut |_| {});
        assert_eq!(t.wanted(), 2);
        t.consume(&f[9..], &mut |_| {});
        assert!(t.at_frame_boundary());
        assert_eq!(t.wanted(), 8);
    }

    #[test]
    fn the_splitter_cuts_the_same_frames_from_any_split() {
        let mut bytes = syn(SYN_STREAM, 1, 0);
        bytes.extend(data_frame(1, true, b""));
        bytes.extend(data_frame(3, false, b"hello world"));
        bytes.extend(goaway_frame(3));
        let frames = |chunk: usize| {
            let mut sp = FrameSplitter::default();
            let mut seen: Vec<(Option<FrameHead>, Vec<u8>)> = Vec::new();
            for mut piece in bytes.chunks(chunk) {
                while let Some(p) = sp.next(&mut piece) {
                    match p {
                        Piece::Start(h) => seen.push((Some(h), Vec::new())),
                        Piece::Payload(b) => seen.last_mut().unwrap().1.extend_from_slice(b),
                        Piece::End => seen.push((None, Vec::new())),
                    }
                }
            }
            assert!(sp.at_frame_boundary());
            seen
        };
        let whole = frames(bytes.len());
        assert_eq!(whole.len(), 8, "{whole:?}");
        assert_eq!(whole[0].0.and_then(|h| h.control), Some(SYN_STREAM));
        let data = whole[4].0.unwrap();
        assert_eq!((data.control, data.stream, data.len), (None, 3, 11));
        assert_eq!(whole[4].1, b"hello world");
        assert_eq!(whole[2].0.map(|h| h.flags & FLAG_FIN), Some(FLAG_FIN));
        for chunk in [1, 2, 7, 9] {
            assert_eq!(frames(chunk), whole, "chunk {chunk}");
        }
    }

    #[test]
    fn fin_on_data_frame_is_seen() {
        let mut events = Vec::new();
        let mut t = FrameTracker::default();
        t.consume(&data_frame(7, true, b""), &mut |e| events.push(e));
        t.consume(&goaway_frame(0), &mut |e| events.push(e));
        assert_eq!(events, vec![Event::Finished(7), Event::GoAway]);
    }
}
