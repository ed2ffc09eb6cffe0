//! Decoding of the k8s channel protocols from copies of relayed bytes, for the recorder: which
//! bytes were terminal output, input, a resize, or the final Status of the error channel.
//!
//! The decoders run in the recording's tap, on the relay's task, on chunks the relay has
//! already written (shared, read-only); they cannot alter the stream, and they do little per
//! byte: they follow frame boundaries across any split of the bytes, hand terminal output and
//! input on as slices of the chunk (a copy only to unmask or base64-decode recorded input),
//! skip stdin without unmasking it when input is not recorded, keep payloads only where a
//! whole message is needed (a resize, the error Status, an incomplete base64 quantum, a SPDY
//! header block), and give up (the recording is then truncated) on bytes that are not the
//! protocol they expect.

use std::collections::HashMap;

use base64::Engine;

use crate::stream::spdy_frames::{FrameSplitter, HEADERS, Piece, SYN_STREAM};
use crate::stream::spdy_headers::{HeaderInflater, StreamType};
use crate::stream::websocket_frames::{FrameHeader, HeaderReader};

/// Largest message kept whole (a resize, the error Status, a SPDY header block).
const MAX_KEPT: usize = 64 * 1024;

/// Which way the bytes went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client → container.
    In,
    /// Container → client.
    Out,
}

/// What a stream carried, in terms a terminal recording needs (output and input borrowed
/// from the chunk being decoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// stdout or stderr bytes.
    Output(&'a [u8]),
    /// stdin bytes.
    Input(&'a [u8]),
    /// The terminal was resized.
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
    /// The whole message of the error channel (a Status on v4+).
    Error(Vec<u8>),
}

/// Why decoding stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// The k8s channel numbers.
pub(crate) mod channel {
    pub const STDIN: u8 = 0;
    pub const STDOUT: u8 = 1;
    pub const STDERR: u8 = 2;
    pub const ERROR: u8 = 3;
    pub const RESIZE: u8 = 4;
}

/// The `{"Width":W,"Height":H}` of a resize message.
fn parse_resize(data: &[u8]) -> Option<Event<'static>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Size {
        width: u16,
        height: u16,
    }
    let s: Size = serde_json::from_slice(data).ok()?;
    Some(Event::Resize {
        width: s.width,
        height: s.height,
    })
}

/// Decoder of both directions of one session.
pub enum Decoder {
    /// WebSocket channel protocols.
    WebSocket {
        /// Client → server.
        inbound: Box<WsDirection>,
        /// Server → client.
        outbound: Box<WsDirection>,
    },
    /// SPDY/3.1 streams.
    Spdy(Box<SpdySession>),
}

impl Decoder {
    /// A decoder for a WebSocket session (`base64`: the `base64.channel.k8s.io` variants;
    /// `input`: whether stdin is wanted — when not, its frames are skipped without being
    /// unmasked or decoded).
    pub fn websocket(base64: bool, input: bool) -> Decoder {
        let mut inbound = WsDirection::new(base64);
        inbound.skip_stdin = !input;
        Decoder::WebSocket {
            inbound: Box::new(inbound),
            outbound: Box::new(WsDirection::new(base64)),
        }
    }

    /// A decoder for a SPDY session.
    pub fn spdy() -> Decoder {
        Decoder::Spdy(Box::default())
    }

    /// Feed relayed bytes; `out` gets each event as it is decoded.
    pub fn feed(&mut self, dir: Direction, data: &[u8], out: Sink<'_>) -> Result<(), DecodeError> {
        match self {
            Decoder::WebSocket { inbound, outbound } => match dir {
                Direction::In => inbound.feed(data, out),
                Direction::Out => outbound.feed(data, out),
            },
            Decoder::Spdy(s) => s.feed(dir, data, out),
        }
    }
}

/// Where decoded events go.
pub type Sink<'s> = &'s mut dyn FnMut(Event<'_>);

// ---------- WebSocket ----------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WsPos {
    Header,
    Payload { remaining: u64, offset: u64 },
}

/// One direction of a WebSocket session.
pub struct WsDirection {
    base64: bool,
    pos: WsPos,
    header: HeaderReader,
    mask: Option<[u8; 4]>,
    /// The current frame is a control frame (its payload is skipped).
    control: bool,
    /// Channel of the message in progress (None: not yet known).
    channel: Option<u8>,
    /// FIN of the current frame.
    header_fin: bool,
    /// Payload kept for resize/error messages.
    kept: Vec<u8>,
    /// Base64 characters not yet decoded (fewer than 4).
    b64_pending: Vec<u8>,
    /// Room to unmask client payloads in.
    unmasked: Vec<u8>,
    /// stdin payloads are skipped, not unmasked (input is not recorded).
    skip_stdin: bool,
}

impl WsDirection {
    fn new(base64: bool) -> WsDirection {
        WsDirection {
            base64,
            pos: WsPos::Header,
            header: HeaderReader::default(),
            mask: None,
            control: false,
            channel: None,
            header_fin: false,
            kept: Vec::new(),
            b64_pending: Vec::new(),
            unmasked: Vec::new(),
            skip_stdin: false,
        }
    }

    fn feed(&mut self, mut data: &[u8], out: Sink<'_>) -> Result<(), DecodeError> {
        while !data.is_empty() {
            match self.pos {
                WsPos::Header => {
                    if let Some(h) = self.header.read(&mut data) {
                        self.start_frame(h, out)?;
                    }
                }
                WsPos::Payload { remaining, offset } => {
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(data.len());
                    if !self.control {
                        self.data_frame_part(&data[..take], offset, out)?;
                    }
                    data = &data[take..];
                    let left = remaining - take as u64;
                    if left == 0 {
                        self.end_frame(out)?;
                    } else {
                        self.pos = WsPos::Payload {
                            remaining: left,
                            offset: offset + take as u64,
                        };
                    }
                }
            }
        }
        Ok(())
    }

    /// Payload bytes of a data frame, `offset` bytes into it: unmasked and decoded, unless they
    /// are stdin and stdin is skipped (only a message's first byte, its channel, is read then).
    fn data_frame_part(
        &mut self,
        mut part: &[u8],
        mut offset: u64,
        out: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let mask = self.mask;
        let key = |offset: u64| mask.map_or(0, |m| m[(offset % 4) as usize]);
        if self.channel.is_none()
            && let Some((&first, rest)) = part.split_first()
        {
            self.payload(&[first ^ key(offset)], out)?;
            part = rest;
            offset += 1;
        }
        if part.is_empty() || (self.skip_stdin && self.channel == Some(channel::STDIN)) {
            return Ok(());
        }
        if mask.is_none() {
            return self.payload(part, out);
        }
        let mut unmasked = std::mem::take(&mut self.unmasked);
        unmasked.clear();
        unmasked.extend(
            part.iter()
                .enumerate()
                .map(|(i, b)| b ^ key(offset + i as u64)),
        );
        let r = self.payload(&unmasked, out);
        self.unmasked = unmasked;
        r
    }

    fn start_frame(&mut self, h: FrameHeader, out: Sink<'_>) -> Result<(), DecodeError> {
        let (opcode, len) = (h.opcode, h.len);
        self.mask = h.mask;
        self.control = match opcode {
            0x0 => false,
            0x1 | 0x2 => {
                // A new message; the frame's FIN says whether continuations follow.
                self.channel = None;
                self.kept.clear();
                self.b64_pending.clear();
                false
            }
            0x8..=0xA => true,
            _ => return Err(DecodeError(format!("unknown WebSocket opcode {opcode}"))),
        };
        self.header_fin = h.fin;
        if len == 0 {
            self.end_frame(out)
        } else {
            self.pos = WsPos::Payload {
                remaining: len,
                offset: 0,
            };
            Ok(())
        }
    }

    /// Unmasked payload bytes of a data frame.
    fn payload(&mut self, mut chunk: &[u8], out: Sink<'_>) -> Result<(), DecodeError> {
        if self.channel.is_none() {
            let Some((&first, rest)) = chunk.split_first() else {
                return Ok(());
            };
            self.channel = Some(if self.base64 {
                first.wrapping_sub(b'0')
            } else {
                first
            });
            chunk = rest;
        }
        if self.base64 {
            self.b64_pending.extend_from_slice(chunk);
            let whole = self.b64_pending.len() / 4 * 4;
            if whole == 0 {
                return Ok(());
            }
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(&self.b64_pending[..whole])
                .map_err(|e| DecodeError(format!("base64 channel data: {e}")))?;
            self.b64_pending.drain(..whole);
            self.channel_data(&decoded, out)
        } else {
            self.channel_data(chunk, out)
        }
    }

    fn channel_data(&mut self, data: &[u8], out: Sink<'_>) -> Result<(), DecodeError> {
        match self.channel {
            Some(channel::STDOUT | channel::STDERR) if !data.is_empty() => out(Event::Output(data)),
            Some(channel::STDIN) if !data.is_empty() => out(Event::Input(data)),
            Some(channel::ERROR | channel::RESIZE) => {
                if self.kept.len() + data.len() > MAX_KEPT {
                    return Err(DecodeError("control message too large".to_owned()));
                }
                self.kept.extend_from_slice(data);
            }
            _ => {}
        }
        Ok(())
    }

    fn end_frame(&mut self, out: Sink<'_>) -> Result<(), DecodeError> {
        self.pos = WsPos::Header;
        if self.control || !self.header_fin {
            return Ok(());
        }
        if self.base64 && !self.b64_pending.is_empty() {
            return Err(DecodeError(
                "base64 message of a length not a multiple of 4".into(),
            ));
        }
        let kept = std::mem::take(&mut self.kept);
        match self.channel {
            Some(channel::RESIZE) => {
                if let Some(e) = parse_resize(&kept) {
                    out(e)
                }
            }
            Some(channel::ERROR) if !kept.is_empty() => out(Event::Error(kept)),
            _ => {}
        }
        self.channel = None;
        Ok(())
    }
}

// ---------- SPDY/3.1 ----------

/// One direction's framing state.
#[derive(Default)]
struct SpdyDirection {
    /// The frame boundaries (the relay's tracker uses the same splitter).
    splitter: FrameSplitter,
    /// Control frame type of the current frame (None: data frame).
    control: Option<u16>,
    /// Stream of the current data frame.
    stream: u32,
    /// Payload kept of the current control frame (SYN_STREAM / HEADERS only).
    kept: Vec<u8>,
}

/// Both directions of a SPDY session, with the stream types the client declared.
#[derive(Default)]
pub struct SpdySession {
    inbound: SpdyDirection,
    outbound: SpdyDirection,
    /// The client's header-compression context (only its blocks name stream types).
    inflate: HeaderInflater,
    streams: HashMap<u32, StreamType>,
    /// Partial resize line and error message, per stream.
    kept: HashMap<u32, Vec<u8>>,
}

impl SpdySession {
    fn direction(&mut self, dir: Direction) -> &mut SpdyDirection {
        match dir {
            Direction::In => &mut self.inbound,
            Direction::Out => &mut self.outbound,
        }
    }

    fn feed(&mut self, dir: Direction, mut data: &[u8], out: Sink<'_>) -> Result<(), DecodeError> {
        while let Some(piece) = self.direction(dir).splitter.next(&mut data) {
            match piece {
                Piece::Start(head) => {
                    let d = self.direction(dir);
                    d.control = head.control;
                    d.stream = head.stream;
                    d.kept.clear();
                }
                Piece::Payload(chunk) => {
                    let d = self.direction(dir);
                    match d.control {
                        Some(SYN_STREAM | HEADERS) if dir == Direction::In => {
                            if d.kept.len() + chunk.len() > MAX_KEPT {
                                return Err(DecodeError("SPDY header block too large".into()));
                            }
                            d.kept.extend_from_slice(chunk);
                        }
                        Some(_) => {}
                        None => {
                            let stream = d.stream;
                            self.stream_data(stream, chunk, out)?;
                        }
                    }
                }
                Piece::End => self.end_frame(dir, out)?,
            }
        }
        Ok(())
    }

    fn end_frame(&mut self, dir: Direction, out: Sink<'_>) -> Result<(), DecodeError> {
        let d = self.direction(dir);
        let (control, kept) = (d.control, std::mem::take(&mut d.kept));
        match control {
            Some(SYN_STREAM) if dir == Direction::In => {
                let (id, kind) = self.inflate.syn_stream(&kept).map_err(DecodeError)?;
                self.streams.insert(id, kind);
            }
            // HEADERS blocks are inflated only to keep the compression context in step.
            Some(HEADERS) if dir == Direction::In => {
                self.inflate.headers(&kept).map_err(DecodeError)?;
            }
            None => {
                let stream = d.stream;
                if self.streams.get(&stream) == Some(&StreamType::Error)
                    && let Some(msg) = self.kept.remove(&stream)
                {
                    // client-go reads the error stream to its end; the kubelet writes one
                    // message. Each data frame is reported; the last one wins.
                    if !msg.is_empty() {
                        out(Event::Error(msg));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn stream_data(&mut self, stream: u32, chunk: &[u8], out: Sink<'_>) -> Result<(), DecodeError> {
        match self.streams.get(&stream) {
            Some(StreamType::Stdout | StreamType::Stderr) if !chunk.is_empty() => {
                out(Event::Output(chunk))
            }
            Some(StreamType::Stdin) if !chunk.is_empty() => out(Event::Input(chunk)),
            Some(StreamType::Error) => {
                let kept = self.kept.entry(stream).or_default();
                if kept.len() + chunk.len() > MAX_KEPT {
                    return Err(DecodeError("error stream message too large".into()));
                }
                kept.extend_from_slice(chunk);
            }
            Some(StreamType::Resize) => {
                // A JSON object per resize, one after another (Go's json.Encoder: one per line).
                let kept = self.kept.entry(stream).or_default();
                if kept.len() + chunk.len() > MAX_KEPT {
                    return Err(DecodeError("resize message too large".into()));
                }
                kept.extend_from_slice(chunk);
                let mut de =
                    serde_json::Deserializer::from_slice(kept).into_iter::<serde_json::Value>();
                let mut used = 0;
                while let Some(Ok(v)) = de.next() {
                    used = de.byte_offset();
                    if let Ok(bytes) = serde_json::to_vec(&v)
                        && let Some(e) = parse_resize(&bytes)
                    {
                        out(e);
                    }
                }
                kept.drain(..used);
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compress, Compression, FlushCompress};

    fn ws_frame(opcode: u8, fin: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        let m = if mask.is_some() { 0x80 } else { 0 };
        match payload.len() {
            n if n < 126 => out.push(m | n as u8),
            n if n <= 0xffff => {
                out.push(m | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(m | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        match mask {
            Some(k) => {
                out.extend_from_slice(&k);
                out.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
            }
            None => out.extend_from_slice(payload),
        }
        out
    }

    /// An event, owned.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Ev {
        Output(Vec<u8>),
        Input(Vec<u8>),
        Resize { width: u16, height: u16 },
        Error(Vec<u8>),
    }

    fn owned(e: Event<'_>) -> Ev {
        match e {
            Event::Output(b) => Ev::Output(b.to_vec()),
            Event::Input(b) => Ev::Input(b.to_vec()),
            Event::Resize { width, height } => Ev::Resize { width, height },
            Event::Error(m) => Ev::Error(m),
        }
    }

    fn decode_all(d: &mut Decoder, parts: &[(Direction, Vec<u8>)], split: usize) -> Vec<Ev> {
        let mut out = Vec::new();
        for (dir, bytes) in parts {
            for piece in bytes.chunks(split) {
                d.feed(*dir, piece, &mut |e| out.push(owned(e)))
                    .expect("decodes");
            }
        }
        out
    }

    fn output(events: &[Ev]) -> Vec<u8> {
        events
            .iter()
            .filter_map(|e| match e {
                Ev::Output(b) => Some(b.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn input(events: &[Ev]) -> Vec<u8> {
        events
            .iter()
            .filter_map(|e| match e {
                Ev::Input(b) => Some(b.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn websocket_channels_across_any_split() {
        let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let mut out_bytes = vec![1u8];
        out_bytes.extend_from_slice(&big);
        let parts = vec![
            (Direction::Out, ws_frame(2, true, &[1], None)),
            (
                Direction::In,
                ws_frame(
                    2,
                    true,
                    b"\x04{\"Width\":80,\"Height\":24}",
                    Some([1, 2, 3, 4]),
                ),
            ),
            (
                Direction::In,
                ws_frame(2, true, b"\x00ls\n", Some([9, 8, 7, 6])),
            ),
            (Direction::Out, ws_frame(2, false, b"\x01he", None)),
            (Direction::Out, ws_frame(0x9, true, b"ping", None)),
            (Direction::Out, ws_frame(0, true, b"llo", None)),
            (Direction::Out, ws_frame(2, true, &out_bytes, None)),
            (Direction::Out, ws_frame(2, true, b"\x02err", None)),
            (
                Direction::Out,
                ws_frame(2, true, b"\x03{\"status\":\"Success\"}", None),
            ),
        ];
        for split in [1, 3, 7, 1000, 100_000] {
            let mut d = Decoder::websocket(false, true);
            let events = decode_all(&mut d, &parts, split);
            let mut expected = b"hello".to_vec();
            expected.extend_from_slice(&big);
            expected.extend_from_slice(b"err");
            assert_eq!(output(&events), expected, "split {split}");
            assert!(events.contains(&Ev::Resize {
                width: 80,
                height: 24
            }));
            assert_eq!(input(&events), b"ls\n");
            assert!(events.contains(&Ev::Error(b"{\"status\":\"Success\"}".to_vec())));
        }
    }

    #[test]
    fn websocket_base64_variant_is_decoded() {
        let b64 = |ch: char, data: &[u8]| {
            let mut s = ch.to_string();
            s.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
            s.into_bytes()
        };
        let parts = vec![
            (
                Direction::Out,
                ws_frame(1, true, &b64('1', b"\x00\xffhi"), None),
            ),
            (
                Direction::In,
                ws_frame(1, true, &b64('0', b"q"), Some([5, 5, 5, 5])),
            ),
        ];
        for split in [1, 2, 5, 100] {
            let mut d = Decoder::websocket(true, true);
            let events = decode_all(&mut d, &parts, split);
            assert_eq!(output(&events), b"\x00\xffhi");
            assert_eq!(input(&events), b"q");
        }
    }

    #[test]
    fn skipped_stdin_is_not_decoded_but_the_rest_of_the_client_stream_is() {
        let parts = vec![
            (
                Direction::In,
                ws_frame(2, false, b"\x00secret ", Some([1, 2, 3, 4])),
            ),
            (
                Direction::In,
                ws_frame(0, true, b"more secret", Some([5, 6, 7, 8])),
            ),
            (
                Direction::In,
                ws_frame(
                    2,
                    true,
                    b"\x04{\"Width\":70,\"Height\":20}",
                    Some([9, 9, 9, 9]),
                ),
            ),
            (Direction::Out, ws_frame(2, true, b"\x01shown", None)),
        ];
        for split in [1, 2, 5, 1000] {
            let mut d = Decoder::websocket(false, false);
            let events = decode_all(&mut d, &parts, split);
            assert_eq!(input(&events), b"", "split {split}");
            assert_eq!(output(&events), b"shown");
            assert!(events.contains(&Ev::Resize {
                width: 70,
                height: 20
            }));
        }
    }

    #[test]
    fn garbage_is_refused_not_guessed() {
        let mut d = Decoder::websocket(false, true);
        assert!(d.feed(Direction::Out, &[0x83, 0], &mut |_| {}).is_err());
    }

    fn spdy_control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0x80, 0x03];
        out.extend_from_slice(&kind.to_be_bytes());
        out.push(flags);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(payload);
        out
    }

    fn spdy_data(id: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = id.to_be_bytes().to_vec();
        out.push(0);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(payload);
        out
    }

    fn syn_stream(z: &mut Compress, id: u32, stream_type: &str) -> Vec<u8> {
        let mut block = Vec::new();
        let headers = [("streamtype", stream_type), ("port", "0")];
        block.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (k, v) in headers {
            block.extend_from_slice(&(k.len() as u32).to_be_bytes());
            block.extend_from_slice(k.as_bytes());
            block.extend_from_slice(&(v.len() as u32).to_be_bytes());
            block.extend_from_slice(v.as_bytes());
        }
        let mut compressed = Vec::with_capacity(block.len() + 1500);
        z.compress_vec(&block, &mut compressed, FlushCompress::Sync)
            .expect("deflate");
        let mut payload = id.to_be_bytes().to_vec();
        payload.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        payload.extend_from_slice(&compressed);
        spdy_control(SYN_STREAM, 0, &payload)
    }

    #[test]
    fn spdy_streams_are_told_apart_by_their_stream_type() {
        let mut z = Compress::new(Compression::default(), true);
        z.set_dictionary(crate::stream::spdy_dictionary::dictionary())
            .expect("dictionary");
        let mut client = Vec::new();
        for (id, t) in [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")] {
            client.extend(syn_stream(&mut z, id, t));
        }
        client.extend(spdy_data(7, b"{\"Width\":100,\"Height\":40}\n{\"Wid"));
        client.extend(spdy_data(7, b"th\":1,\"Height\":2}\n"));
        client.extend(spdy_data(3, b"typed"));
        let mut server = Vec::new();
        server.extend(spdy_control(2, 0, &[0, 0, 0, 5, 0x78, 0x9c]));
        server.extend(spdy_data(5, b"out"));
        server.extend(spdy_data(5, &[0xe2, 0x82]));
        server.extend(spdy_data(5, &[0xac]));
        server.extend(spdy_data(1, b"{\"status\":\"Success\"}"));
        for split in [1, 5, 9, 4096] {
            let mut d = Decoder::spdy();
            let events = decode_all(
                &mut d,
                &[
                    (Direction::In, client.clone()),
                    (Direction::Out, server.clone()),
                ],
                split,
            );
            assert_eq!(output(&events), "out€".as_bytes(), "split {split}");
            let resizes: Vec<_> = events
                .iter()
                .filter(|e| matches!(e, Ev::Resize { .. }))
                .collect();
            assert_eq!(
                resizes,
                vec![
                    &Ev::Resize {
                        width: 100,
                        height: 40
                    },
                    &Ev::Resize {
                        width: 1,
                        height: 2
                    }
                ]
            );
            assert_eq!(input(&events), b"typed");
            assert_eq!(
                events.last(),
                Some(&Ev::Error(b"{\"status\":\"Success\"}".to_vec()))
            );
        }
    }
}
