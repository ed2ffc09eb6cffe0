//! A SPDY/3.1 codec as client-go and the kubelet speak it (moby/spdystream's framer): data and
//! control frames, SYN_STREAM / SYN_REPLY / HEADERS header blocks compressed with one zlib
//! context per direction primed with the SPDY/3 dictionary, a framed connection over any async
//! byte stream, and [`AttachSession`], the client side of a k8s attach (streams opened by
//! `streamType`, error stream first).
//!
//! Flow control is not implemented: spdystream ignores WINDOW_UPDATE too.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::channel::Transcript;

/// The protocol version in control frames.
pub const VERSION: u16 = 3;
/// FLAG_FIN.
pub const FLAG_FIN: u8 = 0x01;
/// Largest frame payload this codec accepts.
const MAX_PAYLOAD: usize = 16 << 20;

/// Header names and values (names lower-case; a name may repeat).
pub type Headers = Vec<(String, String)>;

/// The SPDY/3 header-compression dictionary (the relay's own copy: one definition).
pub use poddebug_stream::spdy::dictionary::dictionary;

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// DATA.
    Data {
        /// Stream.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// Payload.
        data: Vec<u8>,
    },
    /// SYN_STREAM.
    SynStream {
        /// New stream id (odd from clients).
        stream_id: u32,
        /// Associated stream (0).
        associated: u32,
        /// Priority 0-7.
        priority: u8,
        /// FLAG_FIN.
        fin: bool,
        /// Headers.
        headers: Headers,
    },
    /// SYN_REPLY.
    SynReply {
        /// Stream.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// Headers.
        headers: Headers,
    },
    /// RST_STREAM.
    RstStream {
        /// Stream.
        stream_id: u32,
        /// Status code.
        status: u32,
    },
    /// SETTINGS (entries as (flags, id, value)).
    Settings(Vec<(u8, u32, u32)>),
    /// PING.
    Ping(u32),
    /// GOAWAY.
    GoAway {
        /// Last stream the sender accepted.
        last_good: u32,
        /// Status code.
        status: u32,
    },
    /// HEADERS.
    HeadersFrame {
        /// Stream.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// Headers.
        headers: Headers,
    },
    /// WINDOW_UPDATE.
    WindowUpdate {
        /// Stream.
        stream_id: u32,
        /// Delta.
        delta: u32,
    },
    /// A control frame of a type this codec does not know.
    Unknown {
        /// Type.
        kind: u16,
        /// Payload.
        payload: Vec<u8>,
    },
}

/// A protocol violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpdyError(pub String);

impl std::fmt::Display for SpdyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpdyError {}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Header compression state of one connection end (one deflate context for what it sends,
/// one inflate context for what it receives), plus framing.
pub struct Codec {
    deflate: Compress,
    inflate: Decompress,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec").finish_non_exhaustive()
    }
}

impl Default for Codec {
    fn default() -> Self {
        Codec::new()
    }
}

impl Codec {
    /// A fresh pair of contexts.
    pub fn new() -> Codec {
        let mut deflate = Compress::new(Compression::default(), true);
        deflate
            .set_dictionary(dictionary())
            .expect("zlib accepts the SPDY dictionary");
        Codec {
            deflate,
            inflate: Decompress::new(true),
        }
    }

    fn header_block(&mut self, headers: &Headers) -> Vec<u8> {
        let mut grouped: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (k, v) in headers {
            grouped.entry(k.to_ascii_lowercase()).or_default().push(v);
        }
        let mut block = Vec::new();
        block.extend_from_slice(&(grouped.len() as u32).to_be_bytes());
        for (k, vs) in grouped {
            let v = vs.join("\0");
            block.extend_from_slice(&(k.len() as u32).to_be_bytes());
            block.extend_from_slice(k.as_bytes());
            block.extend_from_slice(&(v.len() as u32).to_be_bytes());
            block.extend_from_slice(v.as_bytes());
        }
        let mut out = Vec::with_capacity(block.len() + 64);
        let mut consumed = 0usize;
        for _ in 0..10_000 {
            let before = self.deflate.total_in();
            self.deflate
                .compress_vec(&block[consumed..], &mut out, FlushCompress::Sync)
                .expect("deflate never fails on a valid stream");
            consumed += (self.deflate.total_in() - before) as usize;
            if consumed == block.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(256);
        }
        out
    }

    fn parse_headers(&mut self, data: &[u8]) -> Result<Headers, SpdyError> {
        // spdystream reads a block with Go's inflater limited to its frame: unless the block
        // ends with a sync flush (an empty stored block), that inflater reads on past the frame
        // and the connection fails ("compressed payload size was incorrect"). So does this one.
        if !data.ends_with(&[0x00, 0x00, 0xff, 0xff]) {
            return Err(SpdyError(
                "compressed payload size was incorrect: the header block does not end with a sync flush"
                    .into(),
            ));
        }
        let mut out = Vec::with_capacity(data.len() * 4 + 256);
        let mut consumed = 0usize;
        for _ in 0..10_000 {
            let before = self.inflate.total_in();
            match self
                .inflate
                .decompress_vec(&data[consumed..], &mut out, FlushDecompress::Sync)
            {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary())
                        .map_err(|e| SpdyError(format!("header dictionary: {e}")))?;
                }
                Err(e) => return Err(SpdyError(format!("header block: {e}"))),
            }
            consumed += (self.inflate.total_in() - before) as usize;
            if consumed == data.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(1024);
        }
        let mut b = out.as_slice();
        let take = |b: &mut &[u8], n: usize| -> Result<Vec<u8>, SpdyError> {
            if b.len() < n {
                return Err(SpdyError("truncated header block".into()));
            }
            let v = b[..n].to_vec();
            *b = &b[n..];
            Ok(v)
        };
        let count = be32(&take(&mut b, 4)?);
        let mut headers = Vec::new();
        for _ in 0..count {
            let klen = be32(&take(&mut b, 4)?) as usize;
            let k = String::from_utf8_lossy(&take(&mut b, klen)?).into_owned();
            let vlen = be32(&take(&mut b, 4)?) as usize;
            let v = take(&mut b, vlen)?;
            for part in v.split(|c| *c == 0) {
                headers.push((k.clone(), String::from_utf8_lossy(part).into_owned()));
            }
        }
        Ok(headers)
    }

    /// The bytes of a frame.
    pub fn encode(&mut self, frame: &Frame) -> Vec<u8> {
        let control = |kind: u16, flags: u8, payload: Vec<u8>| {
            let mut out = Vec::with_capacity(8 + payload.len());
            out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
            out.extend_from_slice(&kind.to_be_bytes());
            out.push(flags);
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
            out.extend(payload);
            out
        };
        let fin = |f: bool| if f { FLAG_FIN } else { 0 };
        match frame {
            Frame::Data {
                stream_id,
                fin: f,
                data,
            } => {
                let mut out = Vec::with_capacity(8 + data.len());
                out.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
                out.push(fin(*f));
                out.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
                out.extend_from_slice(data);
                out
            }
            Frame::SynStream {
                stream_id,
                associated,
                priority,
                fin: f,
                headers,
            } => {
                let mut p = stream_id.to_be_bytes().to_vec();
                p.extend_from_slice(&associated.to_be_bytes());
                p.push((priority & 0x7) << 5);
                p.push(0);
                p.extend(self.header_block(headers));
                control(1, fin(*f), p)
            }
            Frame::SynReply {
                stream_id,
                fin: f,
                headers,
            } => {
                let mut p = stream_id.to_be_bytes().to_vec();
                p.extend(self.header_block(headers));
                control(2, fin(*f), p)
            }
            Frame::RstStream { stream_id, status } => control(
                3,
                0,
                [stream_id.to_be_bytes(), status.to_be_bytes()].concat(),
            ),
            Frame::Settings(entries) => {
                let mut p = (entries.len() as u32).to_be_bytes().to_vec();
                for (flags, id, value) in entries {
                    p.push(*flags);
                    p.extend_from_slice(&id.to_be_bytes()[1..]);
                    p.extend_from_slice(&value.to_be_bytes());
                }
                control(4, 0, p)
            }
            Frame::Ping(id) => control(6, 0, id.to_be_bytes().to_vec()),
            Frame::GoAway { last_good, status } => control(
                7,
                0,
                [last_good.to_be_bytes(), status.to_be_bytes()].concat(),
            ),
            Frame::HeadersFrame {
                stream_id,
                fin: f,
                headers,
            } => {
                let mut p = stream_id.to_be_bytes().to_vec();
                p.extend(self.header_block(headers));
                control(8, fin(*f), p)
            }
            Frame::WindowUpdate { stream_id, delta } => control(
                9,
                0,
                [stream_id.to_be_bytes(), delta.to_be_bytes()].concat(),
            ),
            Frame::Unknown { kind, payload } => control(*kind, 0, payload.clone()),
        }
    }

    /// Takes one whole frame off the front of `buf`; `None` while it is incomplete.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, SpdyError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(SpdyError(format!("frame of {len} bytes")));
        }
        if buf.len() < 8 + len {
            return Ok(None);
        }
        let head = buf.split_to(8);
        let payload = buf.split_to(len);
        let flags = head[4];
        let fin = flags & FLAG_FIN != 0;
        if head[0] & 0x80 == 0 {
            return Ok(Some(Frame::Data {
                stream_id: be32(&head[..4]) & 0x7fff_ffff,
                fin,
                data: payload.to_vec(),
            }));
        }
        let version = u16::from_be_bytes([head[0], head[1]]) & 0x7fff;
        if version != VERSION {
            return Err(SpdyError(format!("SPDY version {version}")));
        }
        let kind = u16::from_be_bytes([head[2], head[3]]);
        let need = |n: usize| {
            if payload.len() < n {
                Err(SpdyError(format!("control frame {kind} too short")))
            } else {
                Ok(())
            }
        };
        let id = |at: usize| be32(&payload[at..at + 4]) & 0x7fff_ffff;
        let frame = match kind {
            1 => {
                need(10)?;
                Frame::SynStream {
                    stream_id: id(0),
                    associated: id(4),
                    priority: payload[8] >> 5,
                    fin,
                    headers: self.parse_headers(&payload[10..])?,
                }
            }
            2 => {
                need(4)?;
                Frame::SynReply {
                    stream_id: id(0),
                    fin,
                    headers: self.parse_headers(&payload[4..])?,
                }
            }
            3 => {
                need(8)?;
                Frame::RstStream {
                    stream_id: id(0),
                    status: be32(&payload[4..8]),
                }
            }
            4 => {
                need(4)?;
                let n = be32(&payload[..4]) as usize;
                let mut entries = Vec::new();
                let mut p = &payload[4..];
                for _ in 0..n {
                    if p.len() < 8 {
                        return Err(SpdyError("short SETTINGS".into()));
                    }
                    entries.push((
                        p[0],
                        u32::from_be_bytes([0, p[1], p[2], p[3]]),
                        be32(&p[4..8]),
                    ));
                    p.advance(8);
                }
                Frame::Settings(entries)
            }
            6 => {
                need(4)?;
                Frame::Ping(be32(&payload[..4]))
            }
            7 => {
                need(8)?;
                Frame::GoAway {
                    last_good: id(0),
                    status: be32(&payload[4..8]),
                }
            }
            8 => {
                need(4)?;
                Frame::HeadersFrame {
                    stream_id: id(0),
                    fin,
                    headers: self.parse_headers(&payload[4..])?,
                }
            }
            9 => {
                need(8)?;
                Frame::WindowUpdate {
                    stream_id: id(0),
                    delta: be32(&payload[4..8]),
                }
            }
            _ => Frame::Unknown {
                kind,
                payload: payload.to_vec(),
            },
        };
        Ok(Some(frame))
    }
}

/// The first value of a header (case-insensitive name).
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A SPDY session over a byte stream.
pub struct Connection<S> {
    io: S,
    codec: Codec,
    buf: BytesMut,
}

impl<S> std::fmt::Debug for Connection<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("buffered", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// A session over `io` (after the HTTP upgrade).
    pub fn new(io: S) -> Connection<S> {
        Connection {
            io,
            codec: Codec::new(),
            buf: BytesMut::with_capacity(8192),
        }
    }

    /// Writes and flushes one frame.
    pub async fn send(&mut self, frame: &Frame) -> std::io::Result<()> {
        let bytes = self.codec.encode(frame);
        self.io.write_all(&bytes).await?;
        self.io.flush().await
    }

    /// Writes raw bytes (for tests of broken peers).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }

    /// The next frame; `Ok(None)` at the end of the stream. Cancel-safe.
    pub async fn recv(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            match self.codec.decode(&mut self.buf) {
                Ok(Some(f)) => return Ok(Some(f)),
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return Ok(None);
            }
        }
    }

    /// Shuts the write half down.
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        self.io.shutdown().await
    }
}

/// The client side of a k8s attach over SPDY, streams opened like client-go's v4 protocol.
pub struct AttachSession<S> {
    conn: Connection<S>,
    /// Error stream id.
    pub error: u32,
    /// Stdin stream id.
    pub stdin: Option<u32>,
    /// Stdout stream id.
    pub stdout: Option<u32>,
    /// Stderr stream id.
    pub stderr: Option<u32>,
    /// Resize stream id.
    pub resize: Option<u32>,
    transcript: Transcript,
    fins: Vec<u32>,
}

impl<S> std::fmt::Debug for AttachSession<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachSession")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AttachSession<S> {
    /// Opens the streams: error first, then stdin, stdout, stderr (not with a TTY), resize
    /// (with a TTY).
    pub async fn open(
        io: S,
        stdin: bool,
        stdout: bool,
        stderr: bool,
        tty: bool,
    ) -> std::io::Result<AttachSession<S>> {
        let mut kinds = vec![("error", "error")];
        for (kind, on) in [
            ("stdin", stdin),
            ("stdout", stdout),
            ("stderr", stderr && !tty),
            ("resize", tty),
        ] {
            if on {
                kinds.push((kind, kind));
            }
        }
        Self::open_declared(io, &kinds).await
    }

    /// Opens a stream for each `(kind, value)`, in order, declaring its `streamtype` header as
    /// `value` on the wire (what spdystream writes for `{"Streamtype": ["stdin", ""]}` is
    /// `stdin\0`).
    pub async fn open_declared(
        io: S,
        kinds: &[(&'static str, &str)],
    ) -> std::io::Result<AttachSession<S>> {
        let mut conn = Connection::new(io);
        let mut ids = BTreeMap::new();
        for (i, (kind, value)) in kinds.iter().enumerate() {
            let id = 1 + 2 * i as u32;
            conn.send(&Frame::SynStream {
                stream_id: id,
                associated: 0,
                priority: 0,
                fin: false,
                headers: vec![("streamtype".into(), (*value).into())],
            })
            .await?;
            ids.insert(*kind, id);
        }
        let error = ids.get("error").copied().unwrap_or(1);
        let (stdin, stdout, stderr, resize) = (
            ids.get("stdin").copied(),
            ids.get("stdout").copied(),
            ids.get("stderr").copied(),
            ids.get("resize").copied(),
        );
        Ok(AttachSession {
            conn,
            error,
            stdin,
            stdout,
            stderr,
            resize,
            transcript: Transcript::default(),
            fins: Vec::new(),
        })
    }

    /// Sends stdin data.
    pub async fn send_stdin(&mut self, data: &[u8]) -> std::io::Result<()> {
        let id = self
            .stdin
            .ok_or_else(|| std::io::Error::other("no stdin stream"))?;
        self.conn
            .send(&Frame::Data {
                stream_id: id,
                fin: false,
                data: data.to_vec(),
            })
            .await
    }

    /// Half-closes stdin (an empty data frame with FIN).
    pub async fn close_stdin(&mut self) -> std::io::Result<()> {
        let id = self
            .stdin
            .ok_or_else(|| std::io::Error::other("no stdin stream"))?;
        self.conn
            .send(&Frame::Data {
                stream_id: id,
                fin: true,
                data: Vec::new(),
            })
            .await
    }

    /// Sends a terminal size on the resize stream.
    pub async fn resize(&mut self, width: u16, height: u16) -> std::io::Result<()> {
        let id = self
            .resize
            .ok_or_else(|| std::io::Error::other("no resize stream"))?;
        let data = serde_json::to_vec(&serde_json::json!({"Width": width, "Height": height}))
            .unwrap_or_default();
        self.conn
            .send(&Frame::Data {
                stream_id: id,
                fin: false,
                data,
            })
            .await
    }

    /// The connection (to send raw frames).
    pub fn connection(&mut self) -> &mut Connection<S> {
        &mut self.conn
    }

    /// Reads frames into the transcript until `until` holds, the session ends (EOF, GOAWAY
    /// followed by EOF, or the error stream finished along with the output streams), or
    /// `timeout` passes. Answers PINGs.
    pub async fn read_until(
        &mut self,
        timeout: Duration,
        until: impl Fn(&Transcript) -> bool,
    ) -> &Transcript {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if until(&self.transcript) || self.transcript.ended {
                break;
            }
            let frame = match tokio::time::timeout_at(deadline, self.conn.recv()).await {
                Err(_) => break,
                Ok(Err(_)) | Ok(Ok(None)) => {
                    self.transcript.ended = true;
                    break;
                }
                Ok(Ok(Some(f))) => f,
            };
            self.transcript.frames.push(frame_label(&frame));
            match frame {
                Frame::Data {
                    stream_id,
                    fin,
                    data,
                } => {
                    if Some(stream_id) == self.stdout {
                        self.transcript.stdout.extend_from_slice(&data);
                    } else if Some(stream_id) == self.stderr {
                        self.transcript.stderr.extend_from_slice(&data);
                    } else if stream_id == self.error {
                        self.transcript.error.extend_from_slice(&data);
                    }
                    if fin {
                        self.fins.push(stream_id);
                        if stream_id == self.error {
                            self.transcript.error_done = true;
                        }
                    }
                }
                Frame::GoAway { .. } => self.transcript.goaway = true,
                // An odd id is a client's own ping coming back; an even one is the server's.
                Frame::Ping(id) if id % 2 == 1 => {
                    self.transcript.pongs.push(id.to_be_bytes().to_vec());
                }
                Frame::Ping(id) => {
                    let _ = self.conn.send(&Frame::Ping(id)).await;
                }
                Frame::RstStream { stream_id, .. } if stream_id == self.error => {
                    self.transcript.error_done = true
                }
                _ => {}
            }
        }
        &self.transcript
    }

    /// Sends PING `id` (odd: a client's) and reads until it comes back: everything sent before
    /// it has been read by the other side.
    pub async fn sync(&mut self, id: u32, timeout: Duration) -> bool {
        if self.conn.send(&Frame::Ping(id)).await.is_err() {
            return false;
        }
        let want = id.to_be_bytes().to_vec();
        self.read_until(timeout, |t| t.pongs.contains(&want))
            .await
            .pongs
            .contains(&want)
    }

    /// Reads until the error stream is finished or the session ends.
    pub async fn finish(&mut self, timeout: Duration) -> &Transcript {
        self.read_until(timeout, |t| t.error_done).await
    }

    /// What was received so far.
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }
}

fn frame_label(f: &Frame) -> (u8, usize) {
    match f {
        Frame::Data {
            stream_id, data, ..
        } => ((*stream_id).min(255) as u8, data.len()),
        _ => (255, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_is_the_spdy3_one() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        assert_eq!(&d[..11], b"\0\0\0\x07options");
        assert!(d.ends_with(b",enq=0."));
    }

    #[test]
    fn frames_round_trip_with_shared_compression_contexts() {
        let mut client = Codec::new();
        let mut server = Codec::new();
        let frames = vec![
            Frame::SynStream {
                stream_id: 1,
                associated: 0,
                priority: 0,
                fin: false,
                headers: vec![("streamtype".into(), "error".into())],
            },
            Frame::SynStream {
                stream_id: 3,
                associated: 0,
                priority: 2,
                fin: true,
                headers: vec![
                    ("streamtype".into(), "stdin".into()),
                    ("x".into(), "a".into()),
                    ("x".into(), "b".into()),
                ],
            },
            Frame::Data {
                stream_id: 3,
                fin: false,
                data: b"hello".to_vec(),
            },
            Frame::Data {
                stream_id: 3,
                fin: true,
                data: Vec::new(),
            },
            Frame::RstStream {
                stream_id: 5,
                status: 5,
            },
            Frame::Settings(vec![(0, 7, 65536)]),
            Frame::Ping(1),
            Frame::GoAway {
                last_good: 3,
                status: 0,
            },
            Frame::WindowUpdate {
                stream_id: 1,
                delta: 100,
            },
        ];
        let mut wire = BytesMut::new();
        for f in &frames {
            wire.extend_from_slice(&client.encode(f));
        }
        // Split delivery: decode must wait for whole frames.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(5) {
            buf.extend_from_slice(chunk);
            while let Some(f) = server.decode(&mut buf).expect("valid") {
                got.push(f);
            }
        }
        assert_eq!(got, frames);
        let reply = Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: Vec::new(),
        };
        let mut b = BytesMut::from(&server.encode(&reply)[..]);
        assert_eq!(client.decode(&mut b).expect("valid"), Some(reply));
    }
}
