//! A light WebSocket frame tracker for the server→client direction (RFC 6455 §5.2), and the
//! two frames the proxy itself may write there at shutdown.
//!
//! The relay stays byte-transparent: the tracker only reads frame headers to know where the
//! next frame starts, so that a frame of our own is never written into the middle of one of the
//! upstream's frames (or between the fragments of one message), and never after the upstream's
//! close frame. Payloads are skipped, never buffered.

/// Opcode of a continuation frame.
const OP_CONTINUATION: u8 = 0x0;
/// Opcode of a text frame.
const OP_TEXT: u8 = 0x1;
/// Opcode of a binary frame.
const OP_BINARY: u8 = 0x2;
/// Opcode of a close frame.
const OP_CLOSE: u8 = 0x8;

/// Close code "going away" (RFC 6455 §7.4.1): the server is shutting down.
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// Close code of a session the server ended by policy (its recording, a termination).
pub const CLOSE_POLICY_VIOLATION: u16 = 1008;

/// Where the tracker is in the byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// Reading a frame header (in `FrameTracker::header`).
    Header,
    /// Inside a payload: `remaining` bytes until the next header.
    Payload { remaining: u64 },
}

/// Follows frame boundaries of one direction of a WebSocket connection.
#[derive(Clone, Debug)]
pub struct FrameTracker {
    position: Position,
    header: HeaderReader,
    /// A data message was started with FIN unset and its last fragment has not been seen.
    in_fragmented_message: bool,
    /// The peer sent a close frame: nothing may follow it.
    closed: bool,
    /// The header bytes were not a valid frame header: stop interpreting.
    broken: bool,
}

impl Default for FrameTracker {
    fn default() -> Self {
        FrameTracker {
            position: Position::Header,
            header: HeaderReader::default(),
            in_fragmented_message: false,
            closed: false,
            broken: false,
        }
    }
}

/// Length of a frame header given its first two bytes (base header, extended length, mask).
fn header_len(b1: u8) -> usize {
    let ext = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask = if b1 & 0x80 != 0 { 4 } else { 0 };
    2 + ext + mask
}

/// A frame header read across chunks (at most 14 bytes), for every reader of frames here: this
/// tracker, the recording's decoder and its input filter.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderReader {
    bytes: [u8; 14],
    have: usize,
}

/// A whole frame header.
#[derive(Clone, Copy, Debug)]
pub struct FrameHeader {
    /// The last frame of its message.
    pub fin: bool,
    /// 0x0 continuation, 0x1 text, 0x2 binary, 0x8 close, 0x9 ping, 0xA pong.
    pub opcode: u8,
    /// Payload length.
    pub len: u64,
    /// The masking key (frames from a client).
    pub mask: Option<[u8; 4]>,
    raw: [u8; 14],
    raw_len: usize,
}

impl FrameHeader {
    /// The header's bytes as they were on the wire.
    pub fn raw(&self) -> &[u8] {
        &self.raw[..self.raw_len]
    }
}

impl HeaderReader {
    /// Header bytes still to read before more of it is known (at least 1 when nothing is read).
    pub fn missing(&self) -> usize {
        if self.have < 2 {
            2 - self.have
        } else {
            header_len(self.bytes[1]).saturating_sub(self.have)
        }
    }

    /// No byte of a header read yet.
    pub fn is_empty(&self) -> bool {
        self.have == 0
    }

    /// Takes header bytes from the front of `data` (advancing it); the header once it is whole,
    /// after which the reader is empty again.
    pub fn read(&mut self, data: &mut &[u8]) -> Option<FrameHeader> {
        loop {
            let need = self.missing();
            let take = need.min(data.len());
            self.bytes[self.have..self.have + take].copy_from_slice(&data[..take]);
            *data = &data[take..];
            self.have += take;
            if take < need {
                return None;
            }
            if self.have >= 2 && self.have == header_len(self.bytes[1]) {
                break;
            }
        }
        let (b0, b1) = (self.bytes[0], self.bytes[1]);
        let len = match b1 & 0x7f {
            126 => u64::from(u16::from_be_bytes([self.bytes[2], self.bytes[3]])),
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.bytes[2..10]);
                u64::from_be_bytes(b)
            }
            n => u64::from(n),
        };
        let raw_len = self.have;
        let mask = (b1 & 0x80 != 0).then(|| {
            let mut m = [0u8; 4];
            m.copy_from_slice(&self.bytes[raw_len - 4..raw_len]);
            m
        });
        self.have = 0;
        Some(FrameHeader {
            fin: b0 & 0x80 != 0,
            opcode: b0 & 0x0f,
            len,
            mask,
            raw: self.bytes,
            raw_len,
        })
    }
}

impl FrameTracker {
    /// Feed bytes that were just relayed.
    pub fn consume(&mut self, mut data: &[u8]) {
        while !data.is_empty() && !self.broken {
            match self.position {
                Position::Payload { remaining } => {
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(data.len());
                    data = &data[take..];
                    let left = remaining - take as u64;
                    self.position = if left == 0 {
                        Position::Header
                    } else {
                        Position::Payload { remaining: left }
                    };
                }
                Position::Header => {
                    if let Some(h) = self.header.read(&mut data) {
                        self.finish_header(h);
                    }
                }
            }
        }
    }

    fn finish_header(&mut self, h: FrameHeader) {
        let (fin, opcode, len) = (h.fin, h.opcode, h.len);
        match opcode {
            OP_TEXT | OP_BINARY => self.in_fragmented_message = !fin,
            OP_CONTINUATION => {
                if fin {
                    self.in_fragmented_message = false;
                }
            }
            OP_CLOSE => self.closed = true,
            0x9 | 0xA => {}
            _ => self.broken = true,
        }
        self.position = if len == 0 {
            Position::Header
        } else {
            Position::Payload { remaining: len }
        };
    }

    /// Whether a frame of our own may be written now: between two whole messages, before any
    /// close frame, with the stream understood so far.
    pub fn at_message_boundary(&self) -> bool {
        self.position == Position::Header
            && self.header.is_empty()
            && !self.in_fragmented_message
            && !self.closed
            && !self.broken
    }

    /// Whether nothing may be injected any more (the peer closed, or the bytes are not
    /// WebSocket frames).
    pub fn injection_impossible(&self) -> bool {
        self.closed || self.broken
    }

    /// How many bytes may be read without running past the next frame boundary (at least 1).
    pub fn wanted(&self) -> usize {
        match self.position {
            Position::Payload { remaining } => usize::try_from(remaining).unwrap_or(usize::MAX),
            Position::Header => self.header.missing(),
        }
        .max(1)
    }
}

/// An unmasked (server→client) frame with FIN set.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// A message on the k8s error channel (3): binary `[3] + payload`, or for the base64
/// subprotocols a text frame `'3' + base64(payload)`.
pub fn error_channel_message(payload: &[u8], base64_protocol: bool) -> Vec<u8> {
    channel_message(3, payload, base64_protocol)
}

/// A message on k8s channel `channel` (0–4): binary `[channel] + payload`, or for the base64
/// subprotocols a text frame of the channel's digit and base64(payload).
pub fn channel_message(channel: u8, payload: &[u8], base64_protocol: bool) -> Vec<u8> {
    if base64_protocol {
        use base64::Engine;
        let mut text = String::from(char::from(b'0' + channel.min(9)));
        text.push_str(&base64::engine::general_purpose::STANDARD.encode(payload));
        frame(OP_TEXT, text.as_bytes())
    } else {
        let mut data = Vec::with_capacity(payload.len() + 1);
        data.push(channel);
        data.extend_from_slice(payload);
        frame(OP_BINARY, &data)
    }
}

/// A close frame with a code and a reason (cut to the 123 bytes a control frame allows).
pub fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    payload.extend_from_slice(&reason.as_bytes()[..end]);
    frame(OP_CLOSE, &payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut f = frame(opcode, payload);
        if !fin {
            f[0] &= 0x7f;
        }
        // Set the mask bit and insert a zero mask key after the length.
        f[1] |= 0x80;
        let at = header_len(f[1] & 0x7f);
        f.splice(at..at, [0u8; 4]);
        f
    }

    #[test]
    fn follows_frames_split_anywhere() {
        let mut stream = Vec::new();
        stream.extend(frame(OP_BINARY, &[1, b'h', b'i']));
        stream.extend(frame(OP_BINARY, &vec![7u8; 300]));
        stream.extend(frame(OP_BINARY, &vec![9u8; 70_000]));
        stream.extend(frame(0x9, b"ping"));
        stream.extend(masked(OP_TEXT, true, b"1aGk="));
        for chunk in [1usize, 2, 3, 7, 64, 4096, 100_000] {
            let mut t = FrameTracker::default();
            for piece in stream.chunks(chunk) {
                t.consume(piece);
            }
            assert!(t.at_message_boundary(), "chunk {chunk}");
        }
        let mut t = FrameTracker::default();
        t.consume(&stream[..3]);
        assert!(!t.at_message_boundary());
        assert_eq!(t.wanted(), 2, "rest of the first payload");
    }

    #[test]
    fn wanted_never_crosses_a_boundary() {
        let mut stream = Vec::new();
        stream.extend(frame(OP_BINARY, &[1u8; 200]));
        stream.extend(frame(OP_BINARY, &vec![2u8; 70_000]));
        stream.extend(frame(OP_BINARY, &[]));
        let mut t = FrameTracker::default();
        let mut at = 0;
        let mut boundaries = 0;
        while at < stream.len() {
            let n = t.wanted().min(stream.len() - at);
            t.consume(&stream[at..at + n]);
            at += n;
            if t.at_message_boundary() {
                boundaries += 1;
            }
        }
        assert_eq!(boundaries, 3);
    }

    #[test]
    fn fragmented_messages_and_close_block_injection() {
        let mut t = FrameTracker::default();
        t.consume(&masked(OP_BINARY, false, b"part"));
        assert!(!t.at_message_boundary());
        t.consume(&frame(0x9, b""));
        assert!(
            !t.at_message_boundary(),
            "a ping inside a fragmented message"
        );
        t.consume(&frame(OP_CONTINUATION, b"end"));
        assert!(t.at_message_boundary());
        t.consume(&close_frame(1000, ""));
        assert!(!t.at_message_boundary());
        assert!(t.injection_impossible());
    }

    #[test]
    fn error_channel_and_close_frames() {
        let f = error_channel_message(b"{}", false);
        assert_eq!(f, vec![0x82, 3, 3, b'{', b'}']);
        let f = error_channel_message(b"{}", true);
        assert_eq!(f, [vec![0x81, 5, b'3'], b"e30=".to_vec()].concat());
        let f = close_frame(CLOSE_GOING_AWAY, "bye");
        assert_eq!(f, vec![0x88, 5, 0x03, 0xe9, b'b', b'y', b'e']);
        let long = "é".repeat(100);
        let f = close_frame(1001, &long);
        assert!(f.len() <= 2 + 125);
        let big = frame(OP_BINARY, &vec![0u8; 70_000]);
        assert_eq!(big[1], 127);
        let mid = frame(OP_BINARY, &vec![0u8; 300]);
        assert_eq!(&mid[1..4], &[126, 1, 44]);
    }
}
