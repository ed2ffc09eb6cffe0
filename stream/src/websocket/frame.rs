//! RFC 6455 frames: the header read across any split of the bytes, and the frames poddebug
//! writes (masked towards kube-apiserver, where poddebug is the client; unmasked towards the
//! client, where it is the server).

/// Opcode of a continuation frame.
pub const OP_CONTINUATION: u8 = 0x0;
/// Opcode of a text frame.
pub const OP_TEXT: u8 = 0x1;
/// Opcode of a binary frame.
pub const OP_BINARY: u8 = 0x2;
/// Opcode of a close frame.
pub const OP_CLOSE: u8 = 0x8;
/// Opcode of a ping.
pub const OP_PING: u8 = 0x9;
/// Opcode of a pong.
pub const OP_PONG: u8 = 0xA;

/// Close code "going away" (RFC 6455 §7.4.1): the server is shutting down.
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// Close code "protocol error": the peer sent what is not the protocol.
pub const CLOSE_PROTOCOL_ERROR: u16 = 1002;
/// Close code of a session the server ended by policy (its recording, a termination).
pub const CLOSE_POLICY_VIOLATION: u16 = 1008;
/// Close code "message too big".
pub const CLOSE_TOO_BIG: u16 = 1009;

/// Largest payload of a control frame (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: u64 = 125;

/// Length of a frame header given its second byte (base header, extended length, mask).
fn header_len(b1: u8) -> usize {
    let ext = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask = if b1 & 0x80 != 0 { 4 } else { 0 };
    2 + ext + mask
}

/// A frame header read across chunks (at most 14 bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderReader {
    bytes: [u8; 14],
    have: usize,
}

/// A whole frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The last frame of its message.
    pub fin: bool,
    /// The three reserved bits (no extension is negotiated, so they must be 0).
    pub rsv: u8,
    /// 0x0 continuation, 0x1 text, 0x2 binary, 0x8 close, 0x9 ping, 0xA pong.
    pub opcode: u8,
    /// Payload length.
    pub len: u64,
    /// The masking key (frames from a client).
    pub mask: Option<[u8; 4]>,
    /// The length was written in the fewest bytes, as RFC 6455 §5.2 requires.
    pub minimal: bool,
}

impl FrameHeader {
    /// A control frame (close, ping, pong, and the reserved 0xB–0xF).
    pub fn is_control(&self) -> bool {
        self.opcode & 0x8 != 0
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
        let code = b1 & 0x7f;
        let len = match code {
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
        let minimal = match code {
            126 => len >= 126,
            127 => len > u64::from(u16::MAX) && len >> 63 == 0,
            _ => true,
        };
        Some(FrameHeader {
            fin: b0 & 0x80 != 0,
            rsv: (b0 >> 4) & 0x7,
            opcode: b0 & 0x0f,
            len,
            mask,
            minimal,
        })
    }
}

/// Append a frame header: FIN, `opcode`, `len`, and the mask bit and key when `mask` is given.
pub fn put_header(out: &mut Vec<u8>, fin: bool, opcode: u8, len: usize, mask: Option<[u8; 4]>) {
    out.push(if fin { 0x80 } else { 0 } | (opcode & 0x0f));
    let m = if mask.is_some() { 0x80 } else { 0 };
    match len {
        n if n < 126 => out.push(m | n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if let Some(k) = mask {
        out.extend_from_slice(&k);
    }
}

/// XOR `data` in place with `key`, starting `offset` bytes into the payload.
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: u64) {
    // The key as it lines up with `data[0]`, repeated over eight bytes: XOR a word at a time.
    let start = (offset % 4) as usize;
    let mut lined = [0u8; 8];
    for (i, b) in lined.iter_mut().enumerate() {
        *b = key[(start + i) % 4];
    }
    let word = u64::from_ne_bytes(lined);
    let mut chunks = data.chunks_exact_mut(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        c.copy_from_slice(&(u64::from_ne_bytes(w) ^ word).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= lined[i % 8];
    }
}

/// Append a whole masked frame (FIN set) with a fresh random key: what a client sends.
pub fn put_masked(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    put_masked_parts(out, opcode, &[payload]);
}

/// [`put_masked`] of a payload in parts (a channel byte and its data), copied once.
pub fn put_masked_parts(out: &mut Vec<u8>, opcode: u8, parts: &[&[u8]]) {
    let key: [u8; 4] = rand::random();
    let len = parts.iter().map(|p| p.len()).sum();
    put_header(out, true, opcode, len, Some(key));
    let at = out.len();
    for p in parts {
        out.extend_from_slice(p);
    }
    apply_mask(&mut out[at..], key, 0);
}

/// An unmasked frame with FIN set: what a server sends.
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    put_header(&mut out, true, opcode, payload.len(), None);
    out.extend_from_slice(payload);
    out
}

/// The payload of a message on channel `channel`: `[channel] + data`, or for the base64
/// subprotocols the channel's digit and base64(data).
pub fn channel_payload(channel: u8, data: &[u8], base64_protocol: bool) -> Vec<u8> {
    if base64_protocol {
        use base64::Engine;
        let mut text = vec![b'0' + channel.min(9)];
        text.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(data)
                .as_bytes(),
        );
        text
    } else {
        let mut out = Vec::with_capacity(data.len() + 1);
        out.push(channel);
        out.extend_from_slice(data);
        out
    }
}

/// The opcode of channel messages: text for the base64 subprotocols, else binary.
pub fn channel_opcode(base64_protocol: bool) -> u8 {
    if base64_protocol { OP_TEXT } else { OP_BINARY }
}

/// A server's (unmasked) message on k8s channel `channel` (0–4).
pub fn channel_message(channel: u8, data: &[u8], base64_protocol: bool) -> Vec<u8> {
    frame(
        channel_opcode(base64_protocol),
        &channel_payload(channel, data, base64_protocol),
    )
}

/// A message on the k8s error channel (3).
pub fn error_channel_message(payload: &[u8], base64_protocol: bool) -> Vec<u8> {
    channel_message(crate::channel::ERROR, payload, base64_protocol)
}

/// The payload of a close frame: a code and a reason cut to the 123 bytes a control frame
/// allows (at a character boundary).
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    payload.extend_from_slice(&reason.as_bytes()[..end]);
    payload
}

/// A server's close frame.
pub fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    frame(OP_CLOSE, &close_payload(code, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_across_any_split_and_written_back_the_same() {
        for (fin, opcode, len, mask) in [
            (true, OP_BINARY, 0usize, None),
            (false, OP_TEXT, 125, Some([1, 2, 3, 4])),
            (true, OP_CONTINUATION, 126, None),
            (true, OP_BINARY, 70_000, Some([9, 9, 9, 9])),
        ] {
            let mut bytes = Vec::new();
            put_header(&mut bytes, fin, opcode, len, mask);
            for split in 1..bytes.len() + 1 {
                let mut r = HeaderReader::default();
                let mut got = None;
                for mut piece in bytes.chunks(split) {
                    if let Some(h) = r.read(&mut piece) {
                        assert!(piece.is_empty());
                        got = Some(h);
                    }
                }
                assert_eq!(
                    got,
                    Some(FrameHeader {
                        fin,
                        rsv: 0,
                        opcode,
                        len: len as u64,
                        mask,
                        minimal: true
                    })
                );
                assert!(r.is_empty());
            }
        }
    }

    #[test]
    fn word_masking_is_bytewise_masking() {
        let key = [0x12, 0x34, 0x56, 0x78];
        for offset in 0..8u64 {
            for len in [0usize, 1, 7, 8, 9, 31, 64, 1000] {
                let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut fast = data.clone();
                apply_mask(&mut fast, key, offset);
                let slow: Vec<u8> = data
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b ^ key[((offset as usize) + i) % 4])
                    .collect();
                assert_eq!(fast, slow, "offset {offset}, len {len}");
            }
        }
    }

    #[test]
    fn masking_is_its_own_inverse_from_any_offset() {
        let mut data = b"hello world".to_vec();
        apply_mask(&mut data[..3], [1, 2, 3, 4], 0);
        apply_mask(&mut data[3..], [1, 2, 3, 4], 3);
        let mut whole = b"hello world".to_vec();
        apply_mask(&mut whole, [1, 2, 3, 4], 0);
        assert_eq!(data, whole);
        apply_mask(&mut whole, [1, 2, 3, 4], 0);
        assert_eq!(whole, b"hello world");
    }

    #[test]
    fn channel_and_close_frames() {
        assert_eq!(
            error_channel_message(b"{}", false),
            vec![0x82, 3, 3, b'{', b'}']
        );
        assert_eq!(
            error_channel_message(b"{}", true),
            [vec![0x81, 5, b'3'], b"e30=".to_vec()].concat()
        );
        assert_eq!(
            close_frame(CLOSE_GOING_AWAY, "bye"),
            vec![0x88, 5, 0x03, 0xe9, b'b', b'y', b'e']
        );
        assert!(close_frame(1001, &"é".repeat(100)).len() <= 2 + 125);
        assert_eq!(frame(OP_BINARY, &vec![0u8; 70_000])[1], 127);
        assert_eq!(&frame(OP_BINARY, &vec![0u8; 300])[1..4], &[126, 1, 44]);
        let mut masked = Vec::new();
        put_masked(&mut masked, OP_BINARY, b"\x00ls");
        assert_eq!(&masked[..2], &[0x82, 0x83]);
        let key = [masked[2], masked[3], masked[4], masked[5]];
        let mut payload = masked[6..].to_vec();
        apply_mask(&mut payload, key, 0);
        assert_eq!(payload, b"\x00ls");
    }
}
