//! What of the client→container WebSocket stream a recording without `--record-input` needs:
//! every frame except those of stdin messages. Resize messages, v5 CLOSE messages and control
//! frames are kept whole; stdin frames are dropped whole before they are copied, so a bulk
//! upload costs the relay no copy at all, and what is kept is itself a valid frame stream for
//! the writer's decoder ([`super::decode`]).
//!
//! A message's channel is the first byte of its first frame's payload (an ASCII digit with the
//! base64 subprotocols), unmasked with the first byte of the frame's masking key; continuation
//! frames follow the decision of their message. The frame header is held (at most 14 bytes)
//! until that byte arrives.

use super::decode::channel;
use crate::stream::websocket_frames::{FrameHeader, HeaderReader};

#[derive(Clone, Copy, Debug)]
enum Pos {
    /// Reading a frame header.
    Header,
    /// In a payload: `remaining` bytes, kept or dropped, or (first frame of a message, nothing
    /// of it seen yet) still to be decided on its first byte.
    Payload {
        remaining: u64,
        keep: Option<bool>,
        header: FrameHeader,
    },
}

/// The filter of one session's client→container direction.
#[derive(Debug)]
pub struct InboundFilter {
    base64: bool,
    pos: Pos,
    header: HeaderReader,
    /// The decision for the message in progress (continuation frames follow it).
    message_kept: bool,
}

impl InboundFilter {
    /// For a WebSocket session; `base64` for the `*.base64.channel.k8s.io` subprotocols.
    pub fn new(base64: bool) -> InboundFilter {
        InboundFilter {
            base64,
            pos: Pos::Header,
            header: HeaderReader::default(),
            message_kept: true,
        }
    }

    /// Feed relayed bytes; what the recording needs is appended to `out`.
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        while !data.is_empty() {
            match self.pos {
                Pos::Header => {
                    if let Some(h) = self.header.read(&mut data) {
                        self.start_frame(h, out);
                    }
                }
                Pos::Payload {
                    remaining,
                    keep,
                    header,
                } => {
                    let keep = match keep {
                        Some(k) => k,
                        None => {
                            let k = self.decide(&header, data[0]);
                            self.message_kept = k;
                            if k {
                                out.extend_from_slice(header.raw());
                            }
                            k
                        }
                    };
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(data.len());
                    if keep {
                        out.extend_from_slice(&data[..take]);
                    }
                    data = &data[take..];
                    let left = remaining - take as u64;
                    self.pos = if left == 0 {
                        Pos::Header
                    } else {
                        Pos::Payload {
                            remaining: left,
                            keep: Some(keep),
                            header,
                        }
                    };
                }
            }
        }
    }

    fn start_frame(&mut self, h: FrameHeader, out: &mut Vec<u8>) {
        let keep = match h.opcode {
            // A new data message with a payload: decided on its first byte.
            0x1 | 0x2 if h.len > 0 => None,
            // An empty first frame says no channel: keep it (it costs nothing).
            0x1 | 0x2 => {
                self.message_kept = true;
                Some(true)
            }
            0x0 => Some(self.message_kept),
            // Control frames, and anything the decoder will refuse, are kept.
            _ => Some(true),
        };
        if keep == Some(true) {
            out.extend_from_slice(h.raw());
        }
        self.pos = if h.len == 0 {
            Pos::Header
        } else {
            Pos::Payload {
                remaining: h.len,
                keep,
                header: h,
            }
        };
    }

    /// Keep the message whose first (masked) payload byte is `first`?
    fn decide(&self, h: &FrameHeader, first: u8) -> bool {
        let byte = first ^ h.mask.map_or(0, |m| m[0]);
        let channel = if self.base64 {
            byte.wrapping_sub(b'0')
        } else {
            byte
        };
        channel != channel::STDIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(opcode: u8, fin: bool, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut f = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n <= 0xffff => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    fn filtered(stream: &[u8], split: usize, base64: bool) -> Vec<u8> {
        let mut f = InboundFilter::new(base64);
        let mut out = Vec::new();
        for part in stream.chunks(split.max(1)) {
            f.feed(part, &mut out);
        }
        out
    }

    #[test]
    fn stdin_frames_are_dropped_whole_and_the_rest_kept_whole() {
        let m = [0x11, 0x22, 0x33, 0x44];
        let mut stdin = vec![channel::STDIN];
        stdin.extend(std::iter::repeat_n(b'x', 70_000));
        let resize = [&[channel::RESIZE][..], br#"{"Width":100,"Height":40}"#].concat();
        let keep = [
            frame(0x2, true, &resize, m),
            frame(0x9, true, b"ping", m),
            frame(0x2, true, &[255, channel::STDIN], m),
        ];
        let drop = [
            frame(0x2, true, &stdin, m),
            // A fragmented stdin message: its continuation goes with it.
            frame(0x2, false, &[channel::STDIN, b'a', b'b'], m),
            frame(0x0, true, b"cd", m),
            frame(0x2, true, &stdin[..100], [0, 0, 0, 0]),
        ];
        let stream = [
            drop[0].clone(),
            keep[0].clone(),
            drop[1].clone(),
            keep[1].clone(),
            drop[2].clone(),
            drop[3].clone(),
            keep[2].clone(),
        ]
        .concat();
        let expected = keep.concat();
        for split in [1, 2, 3, 7, 13, 100, 4096, stream.len()] {
            assert_eq!(filtered(&stream, split, false), expected, "split {split}");
        }
    }

    #[test]
    fn base64_channels_are_digits() {
        let m = [9, 8, 7, 6];
        let stream = [
            frame(0x1, true, b"0aGVsbG8=", m),
            frame(0x1, true, b"4eyJXaWR0aCI6MTAsIkhlaWdodCI6NX0=", m),
        ]
        .concat();
        let expected = frame(0x1, true, b"4eyJXaWR0aCI6MTAsIkhlaWdodCI6NX0=", m);
        for split in [1, 5, stream.len()] {
            assert_eq!(filtered(&stream, split, true), expected, "split {split}");
        }
    }
}
