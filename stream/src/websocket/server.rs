//! The upstream's side of a WebSocket attach (kube-apiserver's frames to the client), parsed as
//! it streams: every frame is checked and written to the client with a header poddebug encoded
//! (payload bytes pass as they are, without waiting for the frame's end, so output is never
//! held back), message boundaries are known (a frame of poddebug's own is only ever written
//! between two messages, never after the upstream's close), and, for a recorder, output is
//! decoded per channel: stdout and stderr as they come (shared with the chunk read, or
//! base64-decoded), the error channel's message whole.

use base64::Engine;
use bytes::Bytes;

use super::frame::{
    HeaderReader, MAX_CONTROL_PAYLOAD, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG,
    OP_TEXT, put_header,
};
use crate::ProtocolError;
use crate::channel::{ERROR, Recorded, STDERR, STDOUT};

/// Largest error-channel message kept for the recorder (a `Status` is a few hundred bytes).
const MAX_ERROR_MESSAGE: usize = 64 * 1024;

#[derive(Clone, Copy, Debug)]
struct Frame {
    fin: bool,
    opcode: u8,
    len: u64,
    offset: u64,
}

/// The upstream's side of one WebSocket attach (module docs).
#[derive(Debug)]
pub struct ServerSide {
    base64: bool,
    /// Decode output for a recorder.
    record: bool,
    header: HeaderReader,
    frame: Option<Frame>,
    /// A data message started and its last frame has not ended.
    in_message: bool,
    /// The channel of the message in progress, once its first payload byte was read.
    channel: Option<u8>,
    /// base64 characters of the message not yet decoded (fewer than 4).
    carry: Vec<u8>,
    /// The error channel's message so far.
    error: Vec<u8>,
    /// The control frame being read.
    control: Vec<u8>,
    /// The upstream sent its close frame.
    closed: bool,
    /// Data payload passed since [`ServerSide::take_data_seen`] was last asked.
    data_seen: bool,
}

impl ServerSide {
    /// The upstream's side of a session on subprotocol `protocol`; `record`: decode output for
    /// a recorder.
    pub fn new(protocol: &str, record: bool) -> ServerSide {
        ServerSide {
            base64: protocol.contains("base64."),
            record,
            header: HeaderReader::default(),
            frame: None,
            in_message: false,
            channel: None,
            carry: Vec::new(),
            error: Vec::new(),
            control: Vec::new(),
            closed: false,
            data_seen: false,
        }
    }

    /// Read `chunk` (any split of the stream): append what the client gets to `out`, and what a
    /// recorder gets to `events`.
    pub fn feed(
        &mut self,
        chunk: &Bytes,
        out: &mut Vec<u8>,
        events: &mut Vec<Recorded>,
    ) -> Result<(), ProtocolError> {
        let mut data: &[u8] = chunk;
        while !data.is_empty() {
            if self.closed {
                return Err(ProtocolError::new("bytes after the close frame"));
            }
            let Some(frame) = &mut self.frame else {
                if let Some(h) = self.header.read(&mut data) {
                    if h.rsv != 0 || h.mask.is_some() || !h.minimal {
                        return Err(ProtocolError::new(
                            "a masked frame, one with reserved bits set, or a length not in the fewest bytes",
                        ));
                    }
                    let control = h.opcode & 0x8 != 0;
                    if control {
                        if !matches!(h.opcode, OP_CLOSE | OP_PING | OP_PONG)
                            || !h.fin
                            || h.len > MAX_CONTROL_PAYLOAD
                        {
                            return Err(ProtocolError::new("an invalid control frame"));
                        }
                        self.control.clear();
                    } else {
                        match (h.opcode, self.in_message) {
                            (OP_TEXT | OP_BINARY, false) => {
                                self.in_message = true;
                                self.channel = None;
                                self.carry.clear();
                                self.error.clear();
                            }
                            (OP_CONTINUATION, true) => {}
                            _ => {
                                return Err(ProtocolError::new(
                                    "a data frame out of its message's order",
                                ));
                            }
                        }
                        let len = usize::try_from(h.len)
                            .map_err(|_| ProtocolError::new("a frame too large"))?;
                        put_header(out, h.fin, h.opcode, len, None);
                    }
                    self.frame = Some(Frame {
                        fin: h.fin,
                        opcode: h.opcode,
                        len: h.len,
                        offset: 0,
                    });
                    if h.len == 0 {
                        self.end_frame(out, events)?;
                    }
                }
                continue;
            };
            let left = frame.len - frame.offset;
            let take = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
            let (piece, rest) = data.split_at(take);
            data = rest;
            frame.offset += take as u64;
            let done = frame.offset == frame.len;
            if frame.opcode & 0x8 != 0 {
                self.control.extend_from_slice(piece);
            } else {
                out.extend_from_slice(piece);
                self.data_seen |= !piece.is_empty();
                if self.record {
                    self.record_payload(chunk, piece, events)?;
                }
            }
            if done {
                self.end_frame(out, events)?;
            }
        }
        Ok(())
    }

    /// Payload bytes of a data message, for the recorder.
    fn record_payload(
        &mut self,
        chunk: &Bytes,
        mut piece: &[u8],
        events: &mut Vec<Recorded>,
    ) -> Result<(), ProtocolError> {
        if self.channel.is_none() {
            let Some((&first, rest)) = piece.split_first() else {
                return Ok(());
            };
            self.channel = Some(if self.base64 {
                first.wrapping_sub(b'0')
            } else {
                first
            });
            piece = rest;
        }
        if piece.is_empty() {
            return Ok(());
        }
        let data = if self.base64 {
            self.carry.extend_from_slice(piece);
            let whole = self.carry.len() / 4 * 4;
            if whole == 0 {
                return Ok(());
            }
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(&self.carry[..whole])
                .map_err(|e| {
                    ProtocolError::new(format!("base64 output that is not base64 ({e})"))
                })?;
            self.carry.drain(..whole);
            Bytes::from(decoded)
        } else {
            chunk.slice_ref(piece)
        };
        match self.channel {
            Some(STDOUT | STDERR) => events.push(Recorded::Output(data)),
            Some(ERROR) if self.error.len() + data.len() <= MAX_ERROR_MESSAGE => {
                self.error.extend_from_slice(&data)
            }
            _ => {}
        }
        Ok(())
    }

    fn end_frame(
        &mut self,
        out: &mut Vec<u8>,
        events: &mut Vec<Recorded>,
    ) -> Result<(), ProtocolError> {
        let Some(frame) = self.frame.take() else {
            return Ok(());
        };
        if frame.opcode & 0x8 != 0 {
            put_header(out, true, frame.opcode, self.control.len(), None);
            out.extend_from_slice(&self.control);
            self.closed |= frame.opcode == OP_CLOSE;
            return Ok(());
        }
        if !frame.fin {
            return Ok(());
        }
        self.in_message = false;
        if self.record {
            if !self.carry.is_empty() {
                return Err(ProtocolError::new(
                    "a base64 message of a length not a multiple of 4",
                ));
            }
            if self.channel == Some(ERROR) && !self.error.is_empty() {
                events.push(Recorded::Error(Bytes::from(std::mem::take(
                    &mut self.error,
                ))));
            }
        }
        Ok(())
    }

    /// Whether a frame of poddebug's own may be written now: between two whole messages, before
    /// any close frame.
    pub fn at_message_boundary(&self) -> bool {
        self.frame.is_none() && self.header.is_empty() && !self.in_message && !self.closed
    }

    /// Whether data (not control frames) passed since the last call.
    pub fn take_data_seen(&mut self) -> bool {
        std::mem::take(&mut self.data_seen)
    }

    /// Whether nothing may be written any more (the upstream closed).
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// How many bytes may be read without running past the next frame boundary (at least 1).
    pub fn wanted(&self) -> usize {
        match &self.frame {
            Some(f) => usize::try_from(f.len - f.offset).unwrap_or(usize::MAX),
            None => self.header.missing(),
        }
        .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame::{close_frame, frame};
    use super::*;

    fn feed_all(side: &mut ServerSide, bytes: &[u8], split: usize) -> (Vec<u8>, Vec<Recorded>) {
        let mut out = Vec::new();
        let mut events = Vec::new();
        for piece in bytes.chunks(split.max(1)) {
            side.feed(&Bytes::copy_from_slice(piece), &mut out, &mut events)
                .expect("valid");
        }
        (out, events)
    }

    fn output(events: &[Recorded]) -> Vec<u8> {
        events
            .iter()
            .filter_map(|e| match e {
                Recorded::Output(b) => Some(b.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn frames_pass_unchanged_and_output_is_decoded_at_any_split() {
        let mut first = frame(OP_BINARY, b"\x01he");
        first[0] &= 0x7f;
        let bytes = [
            first,
            frame(OP_PING, b"k"),
            frame(OP_CONTINUATION, b"llo"),
            frame(OP_BINARY, &[&[2u8][..], &vec![b'e'; 70_000]].concat()),
            frame(OP_BINARY, b"\x03{\"status\":\"Success\"}"),
            close_frame(1000, ""),
        ]
        .concat();
        for split in [1, 3, 7, 4096, 1 << 20] {
            let mut side = ServerSide::new("v5.channel.k8s.io", true);
            let (out, events) = feed_all(&mut side, &bytes, split);
            assert_eq!(out, bytes, "split {split}");
            let mut want = b"hello".to_vec();
            want.extend(vec![b'e'; 70_000]);
            assert_eq!(output(&events), want);
            assert_eq!(
                events.last(),
                Some(&Recorded::Error(Bytes::from_static(
                    b"{\"status\":\"Success\"}"
                )))
            );
            assert!(side.closed() && !side.at_message_boundary());
        }
    }

    #[test]
    fn boundaries_are_between_messages_only() {
        let mut side = ServerSide::new("v4.channel.k8s.io", false);
        let mut first = frame(OP_BINARY, b"\x01a");
        first[0] &= 0x7f;
        let (mut out, mut ev) = (Vec::new(), Vec::new());
        assert!(side.at_message_boundary());
        side.feed(&Bytes::from(first), &mut out, &mut ev)
            .expect("valid");
        assert!(!side.at_message_boundary(), "inside a fragmented message");
        side.feed(&Bytes::from(frame(OP_PING, b"")), &mut out, &mut ev)
            .expect("valid");
        assert!(!side.at_message_boundary(), "a ping between fragments");
        let last = frame(OP_CONTINUATION, b"bc");
        side.feed(&Bytes::copy_from_slice(&last[..3]), &mut out, &mut ev)
            .expect("valid");
        assert_eq!(side.wanted(), 1);
        side.feed(&Bytes::copy_from_slice(&last[3..]), &mut out, &mut ev)
            .expect("valid");
        assert!(side.at_message_boundary());
        assert!(ev.is_empty(), "nothing decoded without a recorder");
    }

    #[test]
    fn base64_output_is_decoded_across_fragments() {
        use base64::Engine;
        let text = format!(
            "1{}",
            base64::engine::general_purpose::STANDARD.encode(b"\x00\xffhi there")
        );
        let mut first = frame(OP_TEXT, &text.as_bytes()[..4]);
        first[0] &= 0x7f;
        let bytes = [first, frame(OP_CONTINUATION, &text.as_bytes()[4..])].concat();
        for split in [1, 2, 5, 100] {
            let mut side = ServerSide::new("v4.base64.channel.k8s.io", true);
            let (_, events) = feed_all(&mut side, &bytes, split);
            assert_eq!(output(&events), b"\x00\xffhi there");
        }
    }

    #[test]
    fn what_is_not_a_server_frame_is_refused() {
        for bad in [
            vec![0x82, 0x81, 0, 0, 0, 0, 1], // masked
            vec![0xc2, 1, 1],                // RSV1
            vec![0x83, 0],                   // reserved opcode
            vec![0x80, 0],                   // continuation first
            vec![0x09, 0],                   // fragmented ping
        ] {
            let mut side = ServerSide::new("v5.channel.k8s.io", true);
            let r = side.feed(&Bytes::from(bad.clone()), &mut Vec::new(), &mut Vec::new());
            assert!(r.is_err(), "{bad:?}");
        }
    }
}
