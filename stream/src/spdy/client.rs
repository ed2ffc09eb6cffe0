//! The client's side of a SPDY attach, terminated: frames in, parsed frames out, each forwarded
//! as a frame poddebug encodes (header blocks compressed in its own context).
//!
//! What a client of the remote-command protocols may send, and how it is read:
//! - `SYN_STREAM` opens a stream of one of the five types (module [`super::headers`]): an odd id
//!   above every earlier one, no associated stream, each type at most once. Its header block is
//!   read as spdystream reads it; upstream gets a block with the canonical `streamtype` alone.
//! - `DATA` on stdin (the bytes for the container), on resize (whole JSON terminal sizes, each
//!   re-encoded as kubectl writes them), and on the other streams only an empty frame with FIN
//!   (the half-close client-go sends); at most [`MAX_DATA_FRAME`] bytes, nothing after FIN.
//! - `RST_STREAM`, `SETTINGS`, `PING`, `GOAWAY`, `WINDOW_UPDATE`, checked as spdystream checks
//!   them and re-encoded.
//! - Nothing else: `SYN_REPLY` (no stream is the server's to open), `HEADERS` (a stream's type is
//!   read from its `SYN_STREAM` alone), other control types or versions end the session.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

use super::frame::{
    FLAG_FIN, FLAG_UNIDIRECTIONAL, FrameHead, FrameSplitter, GOAWAY, HEADERS, PING, Piece,
    RST_STREAM, SETTINGS, SYN_REPLY, SYN_STREAM, WINDOW_UPDATE, control_frame, put_control_head,
    put_data_head, stream_id,
};
use super::headers::{HeaderDeflater, HeaderInflater, STREAM_TYPE, StreamType, stream_type};
use crate::ProtocolError;
use crate::channel::{MAX_RESIZE_MESSAGE, TerminalSize};

/// Largest data frame a client may send (client-go's are at most 32 KiB).
pub const MAX_DATA_FRAME: usize = 1 << 20;
/// Largest control frame a client may send.
const MAX_CONTROL_FRAME: usize = 64 * 1024;

/// The stream ids a client opened, by type (0: not opened), shared by both directions of the
/// relay: the server side reads output by them and writes notices on stdout.
#[derive(Debug, Default)]
pub struct Streams {
    ids: [AtomicU32; 5],
    /// Highest stream id the client opened (GOAWAY's last-good-stream-id).
    last: AtomicU32,
}

impl Streams {
    fn slot(t: StreamType) -> usize {
        match t {
            StreamType::Error => 0,
            StreamType::Stdin => 1,
            StreamType::Stdout => 2,
            StreamType::Stderr => 3,
            StreamType::Resize => 4,
        }
    }

    /// The stream of type `t` (0 when none was opened).
    pub fn id(&self, t: StreamType) -> u32 {
        self.ids[Self::slot(t)].load(Ordering::Acquire)
    }

    /// The type of stream `id`.
    pub fn type_of(&self, id: u32) -> Option<StreamType> {
        if id == 0 {
            return None;
        }
        [
            StreamType::Error,
            StreamType::Stdin,
            StreamType::Stdout,
            StreamType::Stderr,
            StreamType::Resize,
        ]
        .into_iter()
        .find(|t| self.id(*t) == id)
    }

    /// The highest stream id the client opened.
    pub fn last(&self) -> u32 {
        self.last.load(Ordering::Acquire)
    }
}

/// A client frame, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientFrame {
    /// `SYN_STREAM`: a stream of `kind` opened.
    Open {
        /// Stream id.
        id: u32,
        /// Its type.
        kind: StreamType,
        /// FIN / UNIDIRECTIONAL.
        flags: u8,
        /// Priority (0–7).
        priority: u8,
    },
    /// Bytes for the container's stdin (and FIN: nothing more will come).
    Stdin {
        /// Stream id.
        id: u32,
        /// The bytes.
        data: Bytes,
        /// FIN.
        fin: bool,
    },
    /// Terminal sizes.
    Resize {
        /// Stream id.
        id: u32,
        /// The sizes, in order.
        sizes: Vec<TerminalSize>,
        /// FIN.
        fin: bool,
    },
    /// An empty data frame with FIN on a stream the client does not write.
    Fin {
        /// Stream id.
        id: u32,
    },
    /// `RST_STREAM`.
    Reset {
        /// Stream id.
        id: u32,
        /// Status code.
        status: u32,
    },
    /// `SETTINGS`: its entries (id with flags, value).
    Settings(Vec<(u32, u32)>),
    /// `PING`.
    Ping(u32),
    /// `GOAWAY`.
    GoAway {
        /// Last good stream id.
        last: u32,
        /// Status code.
        status: u32,
    },
    /// `WINDOW_UPDATE`.
    WindowUpdate {
        /// Stream id (0: the session).
        id: u32,
        /// Delta.
        delta: u32,
    },
}

impl ClientFrame {
    /// Whether the frame is data the session carries (for the idle timeout).
    pub fn is_data(&self) -> bool {
        matches!(
            self,
            ClientFrame::Stdin { .. } | ClientFrame::Resize { .. } | ClientFrame::Open { .. }
        )
    }
}

/// The frame being read.
#[derive(Debug)]
struct Current {
    head: FrameHead,
    payload: Vec<u8>,
}

/// The client's side of one SPDY attach (module docs).
#[derive(Debug)]
pub struct ClientSide {
    splitter: FrameSplitter,
    current: Option<Current>,
    inflater: HeaderInflater,
    deflater: HeaderDeflater,
    streams: Arc<Streams>,
    /// Streams the client finished (FIN) or reset.
    finished: HashMap<u32, bool>,
}

impl ClientSide {
    /// A client side that publishes the streams it learns in `streams`.
    pub fn new(streams: Arc<Streams>) -> ClientSide {
        ClientSide {
            splitter: FrameSplitter::default(),
            current: None,
            inflater: HeaderInflater::default(),
            deflater: HeaderDeflater::default(),
            streams,
            finished: HashMap::new(),
        }
    }

    /// Read `data` (any split of the stream); each frame completed in it is appended to `out`.
    /// After an error nothing more may be fed.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        out: &mut Vec<ClientFrame>,
    ) -> Result<(), ProtocolError> {
        while let Some(piece) = self.splitter.next(&mut data) {
            match piece {
                Piece::Start(head) => {
                    let limit = if head.control.is_some() {
                        MAX_CONTROL_FRAME
                    } else {
                        MAX_DATA_FRAME
                    };
                    if head.len as usize > limit {
                        return Err(ProtocolError::new(format!(
                            "a SPDY frame of {} bytes (at most {limit})",
                            head.len
                        )));
                    }
                    // Room grows with the bytes that arrive, not with what the head announces.
                    self.current = Some(Current {
                        head,
                        payload: Vec::with_capacity((head.len as usize).min(16 * 1024)),
                    });
                }
                Piece::Payload(p) => {
                    if let Some(c) = &mut self.current {
                        c.payload.extend_from_slice(p);
                    }
                }
                Piece::End => {
                    if let Some(c) = self.current.take()
                        && let Some(f) = self.frame(c)?
                    {
                        out.push(f);
                    }
                }
            }
        }
        Ok(())
    }

    fn frame(&mut self, c: Current) -> Result<Option<ClientFrame>, ProtocolError> {
        let Current { head, payload } = c;
        let Some(kind) = head.control else {
            return self.data(head, payload).map(Some);
        };
        if head.version != 3 {
            return Err(ProtocolError::new(format!(
                "a SPDY control frame of version {}",
                head.version
            )));
        }
        let be32 = |at: usize| {
            payload
                .get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .unwrap_or(0)
        };
        let exact = |n: usize| {
            if payload.len() == n {
                Ok(())
            } else {
                Err(ProtocolError::new(format!(
                    "a SPDY control frame of type {kind} with a {}-byte payload",
                    payload.len()
                )))
            }
        };
        match kind {
            SYN_STREAM => self.open(head, &payload).map(Some),
            RST_STREAM => {
                exact(8)?;
                let (id, status) = (be32(0) & 0x7fff_ffff, be32(4));
                if id == 0 || status == 0 {
                    return Err(ProtocolError::new("an invalid RST_STREAM"));
                }
                // A stream the upstream never saw needs no reset there.
                if self.streams.type_of(id).is_none() {
                    return Ok(None);
                }
                self.finished.insert(id, true);
                Ok(Some(ClientFrame::Reset { id, status }))
            }
            SETTINGS => {
                let n = be32(0) as usize;
                if payload.len() < 4 || n > MAX_CONTROL_FRAME / 8 {
                    return Err(ProtocolError::new("an invalid SETTINGS frame"));
                }
                exact(4 + 8 * n)?;
                Ok(Some(ClientFrame::Settings(
                    (0..n).map(|i| (be32(4 + 8 * i), be32(8 + 8 * i))).collect(),
                )))
            }
            PING => {
                exact(4)?;
                if head.flags != 0 || be32(0) == 0 {
                    return Err(ProtocolError::new("an invalid PING"));
                }
                Ok(Some(ClientFrame::Ping(be32(0))))
            }
            GOAWAY => {
                exact(8)?;
                if head.flags != 0 {
                    return Err(ProtocolError::new("an invalid GOAWAY"));
                }
                Ok(Some(ClientFrame::GoAway {
                    last: be32(0) & 0x7fff_ffff,
                    status: be32(4),
                }))
            }
            WINDOW_UPDATE => {
                exact(8)?;
                if head.flags != 0 {
                    return Err(ProtocolError::new("an invalid WINDOW_UPDATE"));
                }
                Ok(Some(ClientFrame::WindowUpdate {
                    id: be32(0) & 0x7fff_ffff,
                    delta: be32(4) & 0x7fff_ffff,
                }))
            }
            SYN_REPLY => Err(ProtocolError::new(
                "a SYN_REPLY from the client (no stream is the server's to open)",
            )),
            HEADERS => Err(ProtocolError::new(
                "a HEADERS frame (a stream's type is read from its SYN_STREAM alone)",
            )),
            other => Err(ProtocolError::new(format!(
                "a SPDY control frame of type {other}"
            ))),
        }
    }

    fn open(&mut self, head: FrameHead, payload: &[u8]) -> Result<ClientFrame, ProtocolError> {
        if payload.len() < 10 {
            return Err(ProtocolError::new("a truncated SYN_STREAM"));
        }
        let id = stream_id([payload[0], payload[1], payload[2], payload[3]]);
        let associated = stream_id([payload[4], payload[5], payload[6], payload[7]]);
        // Inflate first, whatever follows: the context must see every block.
        let block = self.inflater.read(&payload[10..])?;
        if id == 0 || id.is_multiple_of(2) || id <= self.streams.last() {
            return Err(ProtocolError::new(format!(
                "a SYN_STREAM with the id {id} (a client's are odd and increasing)"
            )));
        }
        if associated != 0 || head.flags & !(FLAG_FIN | FLAG_UNIDIRECTIONAL) != 0 {
            return Err(ProtocolError::new(
                "a SYN_STREAM with an associated stream or unknown flags",
            ));
        }
        let kind = stream_type(&block)?;
        if self.streams.id(kind) != 0 {
            return Err(ProtocolError::new(format!(
                "a second {} stream",
                kind.as_str()
            )));
        }
        self.streams.ids[Streams::slot(kind)].store(id, Ordering::Release);
        self.streams.last.store(id, Ordering::Release);
        if head.flags & FLAG_FIN != 0 {
            self.finished.insert(id, true);
        }
        Ok(ClientFrame::Open {
            id,
            kind,
            flags: head.flags,
            priority: payload[8] >> 5,
        })
    }

    fn data(&mut self, head: FrameHead, payload: Vec<u8>) -> Result<ClientFrame, ProtocolError> {
        let id = head.stream;
        let kind = self.streams.type_of(id).ok_or_else(|| {
            ProtocolError::new(format!(
                "a SPDY data frame on stream {id}, which is not open"
            ))
        })?;
        if head.flags & !FLAG_FIN != 0 {
            return Err(ProtocolError::new("a SPDY data frame with unknown flags"));
        }
        if self.finished.get(&id).copied().unwrap_or(false) {
            return Err(ProtocolError::new(format!(
                "a SPDY data frame on stream {id} after its end"
            )));
        }
        let fin = head.flags & FLAG_FIN != 0;
        if fin {
            self.finished.insert(id, true);
        }
        match kind {
            StreamType::Stdin => Ok(ClientFrame::Stdin {
                id,
                data: Bytes::from(payload),
                fin,
            }),
            StreamType::Resize => Ok(ClientFrame::Resize {
                id,
                sizes: resizes(&payload)?,
                fin,
            }),
            _ if payload.is_empty() && fin => Ok(ClientFrame::Fin { id }),
            other => Err(ProtocolError::new(format!(
                "data on the {} stream, which a client does not write",
                other.as_str()
            ))),
        }
    }

    /// Append the frame poddebug sends upstream for `f`.
    pub fn encode(&mut self, f: &ClientFrame, out: &mut Vec<u8>) {
        let fin_flag = |fin: bool| if fin { FLAG_FIN } else { 0 };
        match f {
            ClientFrame::Open {
                id,
                kind,
                flags,
                priority,
            } => {
                let block = self.deflater.compress(&[(STREAM_TYPE, kind.as_str())]);
                put_control_head(out, SYN_STREAM, *flags, 10 + block.len());
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&0u32.to_be_bytes());
                out.extend_from_slice(&[priority << 5, 0]);
                out.extend_from_slice(&block);
            }
            ClientFrame::Stdin { id, data, fin } => {
                put_data_head(out, *id, fin_flag(*fin), data.len());
                out.extend_from_slice(data);
            }
            ClientFrame::Resize { id, sizes, fin } => {
                let mut body = Vec::new();
                for s in sizes {
                    body.extend_from_slice(&s.to_json());
                    body.push(b'\n');
                }
                put_data_head(out, *id, fin_flag(*fin), body.len());
                out.extend_from_slice(&body);
            }
            ClientFrame::Fin { id } => put_data_head(out, *id, FLAG_FIN, 0),
            ClientFrame::Reset { id, status } => out.extend(control_frame(
                RST_STREAM,
                0,
                &[id.to_be_bytes(), status.to_be_bytes()].concat(),
            )),
            ClientFrame::Settings(entries) => {
                let mut p = (entries.len() as u32).to_be_bytes().to_vec();
                for (k, v) in entries {
                    p.extend_from_slice(&k.to_be_bytes());
                    p.extend_from_slice(&v.to_be_bytes());
                }
                out.extend(control_frame(SETTINGS, 0, &p));
            }
            ClientFrame::Ping(id) => out.extend(control_frame(PING, 0, &id.to_be_bytes())),
            ClientFrame::GoAway { last, status } => out.extend(control_frame(
                GOAWAY,
                0,
                &[last.to_be_bytes(), status.to_be_bytes()].concat(),
            )),
            ClientFrame::WindowUpdate { id, delta } => out.extend(control_frame(
                WINDOW_UPDATE,
                0,
                &[id.to_be_bytes(), delta.to_be_bytes()].concat(),
            )),
        }
    }
}

/// The terminal sizes of one resize data frame: whole JSON objects, whitespace between them (Go's
/// `json.Encoder` writes one per line). One cut in the middle is refused rather than carried
/// over: the kubelet reads the stream as a whole, and poddebug would otherwise have to guess
/// where its objects end.
fn resizes(payload: &[u8]) -> Result<Vec<TerminalSize>, ProtocolError> {
    if payload.len() > MAX_RESIZE_MESSAGE {
        return Err(ProtocolError::new("an oversized terminal size message"));
    }
    let mut out = Vec::new();
    let mut values = serde_json::Deserializer::from_slice(payload).into_iter::<serde_json::Value>();
    loop {
        let start = values.byte_offset();
        match values.next() {
            None => return Ok(out),
            Some(Ok(_)) => out.push(TerminalSize::parse(&payload[start..values.byte_offset()])?),
            Some(Err(e)) => {
                return Err(ProtocolError::new(format!(
                    "a terminal size message that is not whole JSON ({e})"
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame::data_frame;
    use super::super::headers::encode_block;
    use super::*;
    use flate2::{Compress, Compression, FlushCompress};

    /// A client's SYN_STREAM with a raw header block, compressed in `z`.
    pub(crate) fn syn(z: &mut Compress, id: u32, flags: u8, block: &[u8]) -> Vec<u8> {
        let mut packed = Vec::with_capacity(block.len() + 1024);
        z.compress_vec(block, &mut packed, FlushCompress::Sync)
            .expect("deflate");
        let mut payload = id.to_be_bytes().to_vec();
        payload.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        payload.extend_from_slice(&packed);
        control_frame(SYN_STREAM, flags, &payload)
    }

    pub(crate) fn deflater() -> Compress {
        let mut z = Compress::new(Compression::default(), true);
        z.set_dictionary(super::super::dictionary::dictionary())
            .expect("dictionary");
        z
    }

    fn feed_all(
        side: &mut ClientSide,
        bytes: &[u8],
        split: usize,
    ) -> Result<Vec<ClientFrame>, ProtocolError> {
        let mut out = Vec::new();
        for piece in bytes.chunks(split.max(1)) {
            side.feed(piece, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn an_unusual_stream_type_encoding_is_read_as_the_kubelet_reads_it_and_canonicalised() {
        let mut z = deflater();
        let bytes = [
            syn(&mut z, 1, 0, &encode_block(&[("streamtype", "error")])),
            syn(
                &mut z,
                3,
                0,
                &encode_block(&[("streamtype", "stdin\0"), ("x-extra", "1")]),
            ),
            syn(
                &mut z,
                5,
                0,
                &encode_block(&[("streamtype", "resize\0stdout")]),
            ),
            data_frame(3, false, b"id\n"),
            data_frame(5, false, b"{\"Width\":100,\"Height\":40}\n {\"width\":1}\n"),
            data_frame(3, true, b""),
        ]
        .concat();
        for split in [1, 3, 8, 1000] {
            let streams = Arc::new(Streams::default());
            let mut side = ClientSide::new(streams.clone());
            let got = feed_all(&mut side, &bytes, split).expect("valid");
            assert_eq!(got.len(), 6, "split {split}");
            assert!(matches!(
                got[1],
                ClientFrame::Open {
                    id: 3,
                    kind: StreamType::Stdin,
                    ..
                }
            ));
            assert_eq!(
                got[3],
                ClientFrame::Stdin {
                    id: 3,
                    data: Bytes::from_static(b"id\n"),
                    fin: false
                }
            );
            assert_eq!(
                got[4],
                ClientFrame::Resize {
                    id: 5,
                    sizes: vec![
                        TerminalSize {
                            width: 100,
                            height: 40
                        },
                        TerminalSize {
                            width: 1,
                            height: 0
                        }
                    ],
                    fin: false
                }
            );
            assert_eq!(streams.id(StreamType::Stdin), 3);
            assert_eq!(streams.type_of(5), Some(StreamType::Resize));
            // Upstream gets canonical blocks in poddebug's own context.
            let mut up = Vec::new();
            for f in &got {
                side.encode(f, &mut up);
            }
            let mut reread = ClientSide::new(Arc::new(Streams::default()));
            assert_eq!(feed_all(&mut reread, &up, 7).expect("valid"), got);
        }
    }

    #[test]
    fn streams_the_kubelet_would_not_serve_as_typed_end_the_session() {
        let refused: Vec<(&str, Vec<u8>)> = vec![
            (
                "unknown type",
                syn(
                    &mut deflater(),
                    1,
                    0,
                    &encode_block(&[("streamtype", "stdinx")]),
                ),
            ),
            (
                "no type",
                syn(&mut deflater(), 1, 0, &encode_block(&[("port", "0")])),
            ),
            (
                "upper-case name",
                syn(
                    &mut deflater(),
                    1,
                    0,
                    &encode_block(&[("streamType", "stdin")]),
                ),
            ),
            (
                "repeated name",
                syn(
                    &mut deflater(),
                    1,
                    0,
                    &encode_block(&[("streamtype", "stdin"), ("streamtype", "stdout")]),
                ),
            ),
            (
                "even id",
                syn(
                    &mut deflater(),
                    2,
                    0,
                    &encode_block(&[("streamtype", "stdin")]),
                ),
            ),
            (
                "unknown flags",
                syn(
                    &mut deflater(),
                    1,
                    0x04,
                    &encode_block(&[("streamtype", "stdin")]),
                ),
            ),
            ("second stdin", {
                let mut z = deflater();
                [
                    syn(&mut z, 1, 0, &encode_block(&[("streamtype", "stdin")])),
                    syn(&mut z, 3, 0, &encode_block(&[("streamtype", "stdin\0")])),
                ]
                .concat()
            }),
            ("decreasing ids", {
                let mut z = deflater();
                [
                    syn(&mut z, 5, 0, &encode_block(&[("streamtype", "stdin")])),
                    syn(&mut z, 3, 0, &encode_block(&[("streamtype", "error")])),
                ]
                .concat()
            }),
            ("data on an unopened stream", data_frame(1, false, b"ls\n")),
            ("data on stdout", {
                let mut z = deflater();
                [
                    syn(&mut z, 1, 0, &encode_block(&[("streamtype", "stdout")])),
                    data_frame(1, false, b"x"),
                ]
                .concat()
            }),
            ("data after FIN", {
                let mut z = deflater();
                [
                    syn(&mut z, 1, 0, &encode_block(&[("streamtype", "stdin")])),
                    data_frame(1, true, b"a"),
                    data_frame(1, false, b"b"),
                ]
                .concat()
            }),
            ("half a resize", {
                let mut z = deflater();
                [
                    syn(&mut z, 1, 0, &encode_block(&[("streamtype", "resize")])),
                    data_frame(1, false, b"{\"Width\":1"),
                ]
                .concat()
            }),
            ("SYN_REPLY", control_frame(SYN_REPLY, 0, &[0, 0, 0, 1])),
            ("HEADERS", control_frame(HEADERS, 0, &[0, 0, 0, 1])),
            ("version 2", {
                let mut f = control_frame(PING, 0, &[0, 0, 0, 1]);
                f[1] = 2;
                f
            }),
            ("huge data frame", {
                let mut f = Vec::new();
                put_data_head(&mut f, 1, 0, MAX_DATA_FRAME + 1);
                f
            }),
            (
                "not zlib",
                control_frame(SYN_STREAM, 0, &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2, 3]),
            ),
        ];
        for (what, bytes) in refused {
            for split in [1, 5, 100_000] {
                let r = feed_all(
                    &mut ClientSide::new(Arc::new(Streams::default())),
                    &bytes,
                    split,
                );
                assert!(r.is_err(), "{what} (split {split}): {r:?}");
            }
        }
    }

    #[test]
    fn control_frames_pass_re_encoded() {
        let frames = vec![
            ClientFrame::Settings(vec![(0x0100_0004, 1000)]),
            ClientFrame::Ping(7),
            ClientFrame::WindowUpdate {
                id: 0,
                delta: 65536,
            },
            ClientFrame::GoAway { last: 0, status: 0 },
        ];
        let mut side = ClientSide::new(Arc::new(Streams::default()));
        let mut bytes = Vec::new();
        for f in &frames {
            side.encode(f, &mut bytes);
        }
        let got = feed_all(
            &mut ClientSide::new(Arc::new(Streams::default())),
            &bytes,
            3,
        )
        .expect("valid");
        assert_eq!(got, frames);
    }
}
