//! The client's side of a WebSocket attach, terminated: frames in, whole messages out, each read
//! as the kubelet reads it, each forwarded as a frame of poddebug's own.
//!
//! The frames must be what RFC 6455 asks of a client (masked, no reserved bits, no reserved
//! opcodes, control frames unfragmented and short) and the messages what the remote-command
//! protocols define; anything else ends the session ([`ProtocolError`]). A message is
//! reassembled from its fragments (control frames may come between them) up to
//! [`MAX_MESSAGE`] bytes, and only a whole message is judged: its channel is its first byte
//! (the base64 variants: an ASCII digit, the rest base64), whatever frame that byte arrived in.
//!
//! What the kubelet reads on each channel (its `wsstream` connection): an empty message is
//! skipped; channel 0 is stdin, 4 the terminal size; on `v5.channel.k8s.io` the two bytes
//! `[255, C]` half-close channel C. A client writing to the output channels, to a channel that
//! does not exist, or a base64 payload that does not decode, breaks the protocol here.

use base64::Engine;
use bytes::Bytes;

use super::frame::{
    FrameHeader, HeaderReader, MAX_CONTROL_PAYLOAD, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING,
    OP_PONG, OP_TEXT, apply_mask, channel_opcode, channel_payload, put_masked, put_masked_parts,
};
use crate::ProtocolError;
use crate::channel::{CLOSE_SIGNAL, MAX_RESIZE_MESSAGE, RESIZE, STDIN, TerminalSize};

/// Largest client message: stdin is sent in pieces far smaller (kubectl: 32 KiB at most).
pub const MAX_MESSAGE: usize = 1 << 20;

/// A client's message, as the kubelet reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMessage {
    /// Bytes for the container's stdin.
    Stdin(Bytes),
    /// A terminal size.
    Resize(TerminalSize),
    /// v5: the client will send nothing more on this channel (stdin or resize).
    CloseChannel(u8),
    /// A ping (its payload).
    Ping(Bytes),
    /// A pong (its payload).
    Pong(Bytes),
    /// The close frame's payload (empty, or a code and a UTF-8 reason).
    Close(Bytes),
}

impl ClientMessage {
    /// Whether the message is data the session carries (for the idle timeout), not a
    /// WebSocket control frame.
    pub fn is_data(&self) -> bool {
        matches!(
            self,
            ClientMessage::Stdin(_) | ClientMessage::Resize(_) | ClientMessage::CloseChannel(_)
        )
    }
}

/// The frame being read.
#[derive(Debug)]
struct Frame {
    header: FrameHeader,
    /// Payload bytes read so far.
    offset: u64,
}

/// The client's side of one WebSocket attach (module docs).
#[derive(Debug)]
pub struct ClientSide {
    base64: bool,
    /// `v5.channel.k8s.io`: the stream-close signal exists.
    close_signal: bool,
    header: HeaderReader,
    frame: Option<Frame>,
    /// The data message being reassembled (unmasked).
    message: Option<Vec<u8>>,
    /// The control frame being read (unmasked).
    control: Vec<u8>,
    /// The client sent its close frame: nothing may follow.
    closed: bool,
}

impl ClientSide {
    /// The client's side of a session on subprotocol `protocol` (`v5.channel.k8s.io`, ...).
    pub fn new(protocol: &str) -> ClientSide {
        ClientSide {
            base64: protocol.contains("base64."),
            close_signal: protocol.starts_with("v5."),
            header: HeaderReader::default(),
            frame: None,
            message: None,
            control: Vec::new(),
            closed: false,
        }
    }

    /// Read `data` (any split of the stream); each message completed in it is appended to
    /// `out`. After an error nothing more may be fed.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        out: &mut Vec<ClientMessage>,
    ) -> Result<(), ProtocolError> {
        while !data.is_empty() {
            if self.closed {
                return Err(ProtocolError::new("bytes after the close frame"));
            }
            let Some(frame) = &mut self.frame else {
                if let Some(h) = self.header.read(&mut data) {
                    self.start_frame(h, out)?;
                }
                continue;
            };
            let left = frame.header.len - frame.offset;
            let take = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
            let (piece, rest) = data.split_at(take);
            data = rest;
            let dest = if frame.header.is_control() {
                &mut self.control
            } else {
                self.message.get_or_insert_with(Vec::new)
            };
            let at = dest.len();
            dest.extend_from_slice(piece);
            if let Some(key) = frame.header.mask {
                apply_mask(&mut dest[at..], key, frame.offset);
            }
            frame.offset += take as u64;
            if frame.offset == frame.header.len {
                self.end_frame(out)?;
            }
        }
        Ok(())
    }

    fn start_frame(
        &mut self,
        h: FrameHeader,
        out: &mut Vec<ClientMessage>,
    ) -> Result<(), ProtocolError> {
        if h.rsv != 0 {
            return Err(ProtocolError::new(
                "a frame with reserved bits set (no extension was negotiated)",
            ));
        }
        if !h.minimal {
            return Err(ProtocolError::new(
                "a frame length not written in the fewest bytes",
            ));
        }
        if h.mask.is_none() {
            return Err(ProtocolError::new("an unmasked frame from a client"));
        }
        if h.is_control() {
            if !matches!(h.opcode, OP_CLOSE | OP_PING | OP_PONG) {
                return Err(ProtocolError::new(format!(
                    "a frame of the reserved opcode {:#x}",
                    h.opcode
                )));
            }
            if !h.fin || h.len > MAX_CONTROL_PAYLOAD {
                return Err(ProtocolError::new(
                    "a fragmented or oversized control frame",
                ));
            }
            self.control.clear();
        } else {
            match (h.opcode, self.message.is_some()) {
                (OP_TEXT | OP_BINARY, false) => self.message = Some(Vec::new()),
                (OP_TEXT | OP_BINARY, true) => {
                    return Err(ProtocolError::new(
                        "a new message began before the last one ended",
                    ));
                }
                (OP_CONTINUATION, true) => {}
                (OP_CONTINUATION, false) => {
                    return Err(ProtocolError::new(
                        "a continuation frame outside of a message",
                    ));
                }
                (op, _) => {
                    return Err(ProtocolError::new(format!(
                        "a frame of the reserved opcode {op:#x}"
                    )));
                }
            }
            let have = self.message.as_ref().map_or(0, Vec::len) as u64;
            if have.saturating_add(h.len) > MAX_MESSAGE as u64 {
                return Err(ProtocolError::new(format!(
                    "a message over {MAX_MESSAGE} bytes"
                )));
            }
        }
        self.frame = Some(Frame {
            header: h,
            offset: 0,
        });
        if h.len == 0 {
            self.end_frame(out)?;
        }
        Ok(())
    }

    fn end_frame(&mut self, out: &mut Vec<ClientMessage>) -> Result<(), ProtocolError> {
        let Some(frame) = self.frame.take() else {
            return Ok(());
        };
        let h = frame.header;
        if h.is_control() {
            let payload = Bytes::from(std::mem::take(&mut self.control));
            out.push(match h.opcode {
                OP_PING => ClientMessage::Ping(payload),
                OP_PONG => ClientMessage::Pong(payload),
                _ => {
                    check_close(&payload)?;
                    self.closed = true;
                    ClientMessage::Close(payload)
                }
            });
            return Ok(());
        }
        if !h.fin {
            return Ok(());
        }
        let message = self.message.take().unwrap_or_default();
        if let Some(m) = self.classify(message)? {
            out.push(m);
        }
        Ok(())
    }

    /// A whole data message, read as the kubelet reads it; `None` for what it skips.
    fn classify(&self, message: Vec<u8>) -> Result<Option<ClientMessage>, ProtocolError> {
        let Some(&first) = message.first() else {
            return Ok(None);
        };
        if self.close_signal && first == CLOSE_SIGNAL {
            return match &message[1..] {
                [c @ (STDIN | RESIZE)] => Ok(Some(ClientMessage::CloseChannel(*c))),
                _ => Err(ProtocolError::new(
                    "a stream-close signal that is not [255, 0] or [255, 4]",
                )),
            };
        }
        let (channel, payload) = if self.base64 {
            if !first.is_ascii_digit() {
                return Err(ProtocolError::new(format!(
                    "a base64 message whose channel is not a digit ({first:#x})"
                )));
            }
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(&message[1..])
                .map_err(|e| {
                    ProtocolError::new(format!("a base64 message that is not base64 ({e})"))
                })?;
            (first - b'0', Bytes::from(decoded))
        } else {
            // The message's own buffer, without its channel byte: no copy.
            (first, Bytes::from(message).slice(1..))
        };
        match channel {
            STDIN => Ok(Some(ClientMessage::Stdin(payload))),
            RESIZE => {
                if payload.len() > MAX_RESIZE_MESSAGE {
                    return Err(ProtocolError::new("an oversized terminal size message"));
                }
                Ok(Some(ClientMessage::Resize(TerminalSize::parse(&payload)?)))
            }
            c => Err(ProtocolError::new(format!(
                "a message on channel {c}, which a client does not write"
            ))),
        }
    }

    /// Append the frame poddebug sends upstream for `m` (masked, as a client's).
    pub fn encode(&self, m: &ClientMessage, out: &mut Vec<u8>) {
        let opcode = channel_opcode(self.base64);
        match m {
            ClientMessage::Stdin(data) if !self.base64 => {
                put_masked_parts(out, opcode, &[&[STDIN], data])
            }
            ClientMessage::Stdin(data) => {
                put_masked(out, opcode, &channel_payload(STDIN, data, self.base64))
            }
            ClientMessage::Resize(size) => put_masked(
                out,
                opcode,
                &channel_payload(RESIZE, &size.to_json(), self.base64),
            ),
            ClientMessage::CloseChannel(c) => put_masked(out, OP_BINARY, &[CLOSE_SIGNAL, *c]),
            ClientMessage::Ping(p) => put_masked(out, OP_PING, p),
            ClientMessage::Pong(p) => put_masked(out, OP_PONG, p),
            ClientMessage::Close(p) => put_masked(out, OP_CLOSE, p),
        }
    }
}

/// A close frame's payload: empty, or a code a peer may send and a UTF-8 reason (RFC 6455
/// §5.5.1, §7.4).
fn check_close(payload: &[u8]) -> Result<(), ProtocolError> {
    match payload {
        [] => Ok(()),
        [_] => Err(ProtocolError::new("a close frame with a one-byte payload")),
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            let allowed = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
            if !allowed {
                return Err(ProtocolError::new(format!(
                    "a close frame with the code {code}"
                )));
            }
            std::str::from_utf8(reason)
                .map(drop)
                .map_err(|_| ProtocolError::new("a close frame whose reason is not UTF-8"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame::put_header;
    use super::*;

    /// A client frame with `key`.
    fn masked(opcode: u8, fin: bool, payload: &[u8], key: [u8; 4]) -> Vec<u8> {
        let mut out = Vec::new();
        put_header(&mut out, fin, opcode, payload.len(), Some(key));
        let at = out.len();
        out.extend_from_slice(payload);
        apply_mask(&mut out[at..], key, 0);
        out
    }

    fn feed_all(
        side: &mut ClientSide,
        bytes: &[u8],
        split: usize,
    ) -> Result<Vec<ClientMessage>, ProtocolError> {
        let mut out = Vec::new();
        for piece in bytes.chunks(split.max(1)) {
            side.feed(piece, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn a_stdin_message_in_fragments_with_an_empty_first_frame_is_stdin() {
        let k = [7, 1, 7, 1];
        let bytes = [
            masked(OP_BINARY, false, b"", k),
            masked(OP_PING, true, b"p", k),
            masked(OP_CONTINUATION, false, b"\x00ec", k),
            masked(OP_CONTINUATION, true, b"ho hi\n", k),
        ]
        .concat();
        for split in [1, 2, 3, 5, 64] {
            let got =
                feed_all(&mut ClientSide::new("v5.channel.k8s.io"), &bytes, split).expect("valid");
            assert_eq!(
                got,
                vec![
                    ClientMessage::Ping(Bytes::from_static(b"p")),
                    ClientMessage::Stdin(Bytes::from_static(b"echo hi\n"))
                ],
                "split {split}"
            );
        }
    }

    #[test]
    fn base64_messages_are_decoded_and_re_encoded() {
        let k = [1, 2, 3, 4];
        let side = ClientSide::new("v4.base64.channel.k8s.io");
        let bytes = [
            masked(OP_TEXT, true, b"0bHMK", k),
            masked(OP_TEXT, true, b"4eyJXaWR0aCI6MTAsIkhlaWdodCI6NX0=", k),
        ]
        .concat();
        let mut side2 = ClientSide::new("v4.base64.channel.k8s.io");
        let got = feed_all(&mut side2, &bytes, 3).expect("valid");
        assert_eq!(
            got,
            vec![
                ClientMessage::Stdin(Bytes::from_static(b"ls\n")),
                ClientMessage::Resize(TerminalSize {
                    width: 10,
                    height: 5
                })
            ]
        );
        let mut up = Vec::new();
        side.encode(&got[0], &mut up);
        let mut reread = ClientSide::new("v4.base64.channel.k8s.io");
        assert_eq!(feed_all(&mut reread, &up, 100), Ok(vec![got[0].clone()]));
    }

    #[test]
    fn what_the_kubelet_would_not_read_as_input_is_refused() {
        let k = [3, 3, 3, 3];
        let refused: Vec<(&str, Vec<u8>)> = vec![
            ("unmasked", {
                let mut f = Vec::new();
                put_header(&mut f, true, OP_BINARY, 3, None);
                f.extend_from_slice(b"\x00ls");
                f
            }),
            ("rsv", {
                let mut f = masked(OP_BINARY, true, b"\x00ls", k);
                f[0] |= 0x40;
                f
            }),
            ("reserved opcode", masked(0x3, true, b"\x00ls", k)),
            ("stdout channel", masked(OP_BINARY, true, b"\x01ls", k)),
            ("channel 9", masked(OP_BINARY, true, b"\x09ls", k)),
            (
                "bad resize",
                masked(OP_BINARY, true, b"\x04{\"Width\":-1}", k),
            ),
            (
                "continuation first",
                masked(OP_CONTINUATION, true, b"\x00ls", k),
            ),
            (
                "two starts",
                [
                    masked(OP_BINARY, false, b"\x00", k),
                    masked(OP_BINARY, true, b"\x00", k),
                ]
                .concat(),
            ),
            ("fragmented ping", masked(OP_PING, false, b"", k)),
            (
                "close signal to stdout",
                masked(OP_BINARY, true, b"\xff\x01", k),
            ),
            (
                "long close signal",
                masked(OP_BINARY, true, b"\xff\x00\x00", k),
            ),
            ("close code 1005", masked(OP_CLOSE, true, &[0x03, 0xed], k)),
            (
                "after close",
                [
                    masked(OP_CLOSE, true, b"", k),
                    masked(OP_BINARY, true, b"\x00x", k),
                ]
                .concat(),
            ),
        ];
        for (what, bytes) in refused {
            for split in [1, 4, 1000] {
                let r = feed_all(&mut ClientSide::new("v5.channel.k8s.io"), &bytes, split);
                assert!(r.is_err(), "{what} (split {split}): {r:?}");
            }
        }
        // The base64 variants: a channel that is not a digit, a payload that is not base64
        // (Go's decoder skips newlines; poddebug refuses them rather than guess).
        for bad in [&b"x bHM="[..], b"0bHM", b"0bH\nMK"] {
            let r = feed_all(
                &mut ClientSide::new("v4.base64.channel.k8s.io"),
                &masked(OP_TEXT, true, bad, k),
                1,
            );
            assert!(r.is_err(), "{bad:?}");
        }
        // v4 has no close signal: channel 255 is no channel.
        let r = feed_all(
            &mut ClientSide::new("v4.channel.k8s.io"),
            &masked(OP_BINARY, true, b"\xff\x00", k),
            1,
        );
        assert!(r.is_err());
        let big = masked(OP_BINARY, true, &vec![0; MAX_MESSAGE + 1], k);
        assert!(feed_all(&mut ClientSide::new("v5.channel.k8s.io"), &big, 4096).is_err());
    }

    #[test]
    fn empty_messages_are_skipped_and_the_close_signal_passes() {
        let k = [0, 0, 0, 0];
        let bytes = [
            masked(OP_BINARY, true, b"", k),
            masked(OP_BINARY, true, b"\xff\x00", k),
            masked(OP_CLOSE, true, &[0x03, 0xe8, b'o', b'k'], k),
        ]
        .concat();
        let got = feed_all(&mut ClientSide::new("v5.channel.k8s.io"), &bytes, 1).expect("valid");
        assert_eq!(
            got,
            vec![
                ClientMessage::CloseChannel(0),
                ClientMessage::Close(Bytes::from_static(&[0x03, 0xe8, b'o', b'k']))
            ]
        );
    }
}
