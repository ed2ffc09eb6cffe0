//! SPDY/3.1 framing: [`FrameSplitter`] cuts a byte stream, split anywhere, into frame heads,
//! payload pieces and frame ends, copying nothing but the 8 bytes of a frame head; the client
//! and server sides are built on it. Also the frames poddebug writes itself.

/// SYN_STREAM.
pub const SYN_STREAM: u16 = 1;
/// SYN_REPLY.
pub const SYN_REPLY: u16 = 2;
/// RST_STREAM.
pub const RST_STREAM: u16 = 3;
/// GOAWAY.
pub const GOAWAY: u16 = 7;
/// SETTINGS.
pub const SETTINGS: u16 = 4;
/// PING.
pub const PING: u16 = 6;
/// HEADERS.
pub const HEADERS: u16 = 8;
/// WINDOW_UPDATE.
pub const WINDOW_UPDATE: u16 = 9;
/// FLAG_UNIDIRECTIONAL on SYN_STREAM.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// FLAG_FIN on data frames and SYN_STREAM / SYN_REPLY.
pub const FLAG_FIN: u8 = 0x01;

/// The 8-byte head of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// The control frame's type; `None` for a data frame.
    pub control: Option<u16>,
    /// The control frame's version (0 for a data frame).
    pub version: u16,
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
                        version: if h[0] & 0x80 != 0 {
                            u16::from_be_bytes([h[0] & 0x7f, h[1]])
                        } else {
                            0
                        },
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

pub(crate) fn stream_id(b: [u8; 4]) -> u32 {
    u32::from_be_bytes(b) & 0x7fff_ffff
}

/// A control frame of version 3 with `kind`, `flags` and `payload` (at most 16 MiB - 1).
pub fn control_frame(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    put_control_head(&mut out, kind, flags, payload.len());
    out.extend_from_slice(payload);
    out
}

/// Append the 8-byte head of a version 3 control frame.
pub fn put_control_head(out: &mut Vec<u8>, kind: u16, flags: u8, len: usize) {
    out.extend_from_slice(&[0x80, 0x03]);
    out.extend_from_slice(&kind.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&(len.min(0x00ff_ffff) as u32).to_be_bytes()[1..]);
}

/// Append the 8-byte head of a data frame.
pub fn put_data_head(out: &mut Vec<u8>, stream_id: u32, flags: u8, len: usize) {
    out.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&(len.min(0x00ff_ffff) as u32).to_be_bytes()[1..]);
}

/// A data frame (payloads above 16 MiB are cut: ours are a few hundred bytes).
pub fn data_frame(stream_id: u32, fin: bool, payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(0x00ff_ffff);
    let mut out = Vec::with_capacity(8 + len);
    put_data_head(&mut out, stream_id, if fin { FLAG_FIN } else { 0 }, len);
    out.extend_from_slice(&payload[..len]);
    out
}

/// GOAWAY with status OK.
pub fn goaway_frame(last_good_stream: u32) -> Vec<u8> {
    let mut payload = (last_good_stream & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&0u32.to_be_bytes());
    control_frame(GOAWAY, 0, &payload)
}

/// RST_STREAM's status for a stream the server will not serve.
pub const REFUSED_STREAM: u32 = 3;

/// RST_STREAM with `status` (1 PROTOCOL_ERROR, 3 REFUSED_STREAM, ...).
pub fn rst_stream_frame(stream_id: u32, status: u32) -> Vec<u8> {
    let mut payload = (stream_id & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&status.to_be_bytes());
    control_frame(RST_STREAM, 0, &payload)
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
}
