//! SPDY/3 header blocks: zlib with the SPDY/3 dictionary and one compression context per
//! direction of a session. [`HeaderInflater`] reads the client's blocks in order in the
//! client's context; [`HeaderDeflater`] writes poddebug's own blocks upstream in a context of
//! its own, so what kube-apiserver inflates is only ever what poddebug wrote.
//!
//! A block is read as spdystream (the kubelet's SPDY library) reads it, and refused wherever
//! spdystream would fail or poddebug could read it differently: a name that is not lower case,
//! a repeated name, a name spdystream forbids on a request, bytes after the block, a block
//! split across frames. Values are split on NUL as spdystream splits them, and the kubelet's
//! `Headers().Get("streamType")` takes the first value; that value, and only that, decides
//! what a stream is ([`StreamType`]).

use flate2::{Decompress, FlushDecompress};

use super::dictionary::dictionary;
use crate::ProtocolError;

/// Largest header block inflated.
const MAX_BLOCK: usize = 64 * 1024;
/// Most headers in a block (an attach stream has one).
const MAX_HEADERS: usize = 64;
/// Names spdystream refuses in a request's header block.
const FORBIDDEN_NAMES: [&str; 5] = [
    "connection",
    "host",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
];
/// The header that names a stream's type.
pub const STREAM_TYPE: &str = "streamtype";

/// What an attach stream carries, from its `streamType` header, exactly as the kubelet
/// distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamType {
    /// `error`.
    Error,
    /// `stdin`.
    Stdin,
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
    /// `resize`.
    Resize,
}

impl StreamType {
    /// The type the kubelet serves under `value`, if any.
    pub fn parse(value: &str) -> Option<StreamType> {
        Some(match value {
            "error" => StreamType::Error,
            "stdin" => StreamType::Stdin,
            "stdout" => StreamType::Stdout,
            "stderr" => StreamType::Stderr,
            "resize" => StreamType::Resize,
            _ => return None,
        })
    }

    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamType::Error => "error",
            StreamType::Stdin => "stdin",
            StreamType::Stdout => "stdout",
            StreamType::Stderr => "stderr",
            StreamType::Resize => "resize",
        }
    }
}

/// A header block as spdystream reads it: lower-case names, each once, with its values.
pub type HeaderBlock = Vec<(String, Vec<String>)>;

/// The client's header-compression context.
pub struct HeaderInflater {
    inflate: Decompress,
}

impl std::fmt::Debug for HeaderInflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderInflater").finish_non_exhaustive()
    }
}

impl Default for HeaderInflater {
    fn default() -> Self {
        HeaderInflater {
            inflate: Decompress::new(true),
        }
    }
}

impl HeaderInflater {
    /// Inflate one frame's header block with the session's context and read it. Every block
    /// the client sends must go through here, in order, for the context to stay in step; after
    /// an error the context is unusable.
    pub fn read(&mut self, block: &[u8]) -> Result<HeaderBlock, ProtocolError> {
        let mut raw = Vec::with_capacity((block.len() * 4).clamp(256, MAX_BLOCK));
        let mut consumed = 0usize;
        // Each round consumes input, grows the output, or sets the dictionary; the bound only
        // guards a bug.
        for _ in 0..1024 {
            let before = self.inflate.total_in();
            match self
                .inflate
                .decompress_vec(&block[consumed..], &mut raw, FlushDecompress::Sync)
            {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary())
                        .map_err(|e| ProtocolError::new(format!("SPDY header dictionary: {e}")))?;
                }
                Err(e) => {
                    return Err(ProtocolError::new(format!(
                        "a SPDY header block that does not inflate ({e})"
                    )));
                }
            }
            consumed += usize::try_from(self.inflate.total_in() - before).unwrap_or(0);
            if consumed == block.len() && raw.len() < raw.capacity() {
                return parse_block(&raw);
            }
            if raw.len() >= MAX_BLOCK {
                return Err(ProtocolError::new("a SPDY header block over 64 KiB"));
            }
            raw.reserve(4096);
        }
        Err(ProtocolError::new(
            "a SPDY header block that does not inflate",
        ))
    }
}

/// `count, (len name, len value)*` with 32-bit big-endian lengths (SPDY/3 §2.6.10), read as
/// spdystream reads it (module docs), and nothing after it.
pub fn parse_block(raw: &[u8]) -> Result<HeaderBlock, ProtocolError> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], ProtocolError> {
        if b.len() < n {
            return Err(ProtocolError::new("a truncated SPDY header block"));
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    fn len(b: &mut &[u8]) -> Result<usize, ProtocolError> {
        let v = take(b, 4)?;
        Ok(u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as usize)
    }
    let mut b = raw;
    let count = len(&mut b)?;
    if count > MAX_HEADERS {
        return Err(ProtocolError::new(format!(
            "a SPDY header block of {count} headers"
        )));
    }
    let mut headers: HeaderBlock = Vec::with_capacity(count);
    for _ in 0..count {
        let n = len(&mut b)?;
        let name = std::str::from_utf8(take(&mut b, n)?)
            .map_err(|_| ProtocolError::new("a SPDY header name that is not UTF-8"))?;
        // spdystream refuses names that are not lower case; poddebug also refuses what is not
        // an HTTP token, where Go's and Rust's ideas of "lower case" could differ.
        let token =
            |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(token) {
            return Err(ProtocolError::new(format!(
                "the SPDY header name {name:?}, which is not a lower-case token"
            )));
        }
        if FORBIDDEN_NAMES.contains(&name) {
            return Err(ProtocolError::new(format!(
                "the SPDY header {name:?}, which a request may not carry"
            )));
        }
        if headers.iter().any(|(k, _)| k == name) {
            return Err(ProtocolError::new(format!(
                "the SPDY header {name:?} twice"
            )));
        }
        let n = len(&mut b)?;
        let value = std::str::from_utf8(take(&mut b, n)?)
            .map_err(|_| ProtocolError::new("a SPDY header value that is not UTF-8"))?;
        headers.push((
            name.to_owned(),
            value.split('\0').map(str::to_owned).collect(),
        ));
    }
    if !b.is_empty() {
        return Err(ProtocolError::new("bytes after a SPDY header block"));
    }
    Ok(headers)
}

/// The stream type a block declares, as the kubelet reads it (the first value of
/// `streamtype`); an error when there is none the kubelet serves.
pub fn stream_type(block: &HeaderBlock) -> Result<StreamType, ProtocolError> {
    let value = block
        .iter()
        .find(|(k, _)| k == STREAM_TYPE)
        .and_then(|(_, v)| v.first())
        .ok_or_else(|| ProtocolError::new("a SPDY stream without a streamType header"))?;
    StreamType::parse(value).ok_or_else(|| {
        ProtocolError::new(format!(
            "a SPDY stream of type {value:?}, which is not error, stdin, stdout, stderr or resize"
        ))
    })
}

/// Write a header block of `headers`, each with its one value.
pub fn encode_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut raw = Vec::new();
    raw.extend_from_slice(&(headers.len() as u32).to_be_bytes());
    for (k, v) in headers {
        raw.extend_from_slice(&(k.len() as u32).to_be_bytes());
        raw.extend_from_slice(k.as_bytes());
        raw.extend_from_slice(&(v.len() as u32).to_be_bytes());
        raw.extend_from_slice(v.as_bytes());
    }
    raw
}

/// poddebug's own header-compression context towards kube-apiserver: a zlib stream primed with
/// the SPDY/3 dictionary (the header names it, as every SPDY peer expects) whose blocks are
/// stored, not compressed. An attach opens at most five streams with one short header each, so
/// compression would save a few dozen bytes per session while a deflate context costs about
/// 256 KiB of memory for the session's whole life; a stored block costs none, and any zlib
/// reader (spdystream's `zlib.NewReaderDict`) reads it.
#[derive(Debug, Default)]
pub struct HeaderDeflater {
    /// The zlib header was written (it goes before the first block only).
    started: bool,
}

/// An empty stored block (RFC 1951 §3.2.4): what a sync flush writes.
const SYNC_MARKER: [u8; 5] = [0x00, 0x00, 0x00, 0xff, 0xff];

/// Adler-32 (RFC 1950 §9), the dictionary's id in the zlib header.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

impl HeaderDeflater {
    /// The block of `headers` for the next frame, whole in itself (stored blocks end on a byte
    /// boundary, so the peer reads it from this frame alone).
    pub fn compress(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
        let raw = encode_block(headers);
        let mut out = Vec::with_capacity(raw.len() + 16);
        if !self.started {
            self.started = true;
            // CMF: deflate with a 32 KiB window; FLG: a preset dictionary, FCHECK so that
            // CMF*256 + FLG is a multiple of 31.
            let cmf: u16 = 0x78;
            let mut flg: u16 = 0x20;
            flg += 31 - (cmf * 256 + flg) % 31;
            out.push(cmf as u8);
            out.push(flg as u8);
            out.extend_from_slice(&adler32(dictionary()).to_be_bytes());
        }
        for piece in raw.chunks(usize::from(u16::MAX)) {
            // A stored block, not the last: BFINAL 0, BTYPE 00, then LEN and its complement.
            let len = piece.len() as u16;
            out.push(0);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(piece);
        }
        // Then an empty stored block, the sync-flush marker every zlib writer ends a header
        // block with: Go's inflater hands out what it decoded when it reads that marker, and
        // would otherwise read on past the end of this frame and fail (spdystream: "compressed
        // payload size was incorrect").
        out.extend_from_slice(&SYNC_MARKER);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use flate2::{Compress, Compression, FlushCompress};

    /// A client compressing raw header blocks in one context.
    pub(crate) struct RawDeflater(Compress);

    impl RawDeflater {
        pub(crate) fn new() -> RawDeflater {
            let mut z = Compress::new(Compression::default(), true);
            z.set_dictionary(dictionary()).expect("dictionary");
            RawDeflater(z)
        }
        pub(crate) fn block(&mut self, raw: &[u8]) -> Vec<u8> {
            let mut out = Vec::with_capacity(raw.len() + 1024);
            self.0
                .compress_vec(raw, &mut out, FlushCompress::Sync)
                .expect("deflate");
            out
        }
    }

    fn raw(headers: &[(&str, &str)]) -> Vec<u8> {
        encode_block(headers)
    }

    #[test]
    fn the_stream_type_is_the_first_value_spdystream_splits() {
        let mut z = RawDeflater::new();
        let mut inf = HeaderInflater::default();
        for (value, want) in [
            ("stdin", Some(StreamType::Stdin)),
            ("stdin\0", Some(StreamType::Stdin)),
            ("stdin\0stdout", Some(StreamType::Stdin)),
            ("error", Some(StreamType::Error)),
            ("Stdin", None),
            ("stdin ", None),
            ("\0stdin", None),
            ("", None),
        ] {
            let block = inf
                .read(&z.block(&raw(&[("streamtype", value), ("port", "0")])))
                .expect("reads");
            assert_eq!(stream_type(&block).ok(), want, "{value:?}");
        }
    }

    #[test]
    fn blocks_spdystream_would_refuse_or_read_otherwise_are_refused() {
        let mut two = raw(&[("streamtype", "stdin")]);
        two.extend_from_slice(&raw(&[("streamtype", "stdout")]));
        for bad in [
            raw(&[("Streamtype", "stdin")]),
            raw(&[("streamtype", "stdin"), ("streamtype", "stdout")]),
            raw(&[("streamtype", "stdin"), ("host", "x")]),
            raw(&[("", "stdin")]),
            two,
            raw(&[("streamtype", "stdin")])[..10].to_vec(),
        ] {
            assert!(parse_block(&bad).is_err(), "{bad:?}");
            let mut z = RawDeflater::new();
            let mut inf = HeaderInflater::default();
            assert!(inf.read(&z.block(&bad)).is_err(), "{bad:?}");
        }
        assert!(stream_type(&parse_block(&raw(&[("port", "1")])).expect("valid")).is_err());
        let mut inf = HeaderInflater::default();
        assert!(inf.read(b"not zlib at all").is_err());
    }

    #[test]
    fn adler32_is_zlibs() {
        // RFC 1950's checksum of "Wikipedia".
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        let mut z = flate2::Decompress::new(true);
        let mut out = Vec::with_capacity(64);
        // A zlib stream that names the dictionary makes the inflater ask for it by this id.
        let mut d = HeaderDeflater::default();
        let block = d.compress(&[("a", "b")]);
        let err = z
            .decompress_vec(&block, &mut out, FlushDecompress::Sync)
            .expect_err("needs the dictionary");
        assert_eq!(err.needs_dictionary(), Some(adler32(dictionary())));
    }

    #[test]
    fn our_blocks_inflate_in_order_in_one_context() {
        let mut def = HeaderDeflater::default();
        let mut inf = HeaderInflater::default();
        for t in ["error", "stdin", "stdout", "stderr", "resize", "stdin"] {
            let compressed = def.compress(&[(STREAM_TYPE, t)]);
            assert!(
                compressed.ends_with(&SYNC_MARKER),
                "every block ends with a sync flush, as Go's inflater needs"
            );
            let block = inf.read(&compressed).expect("reads");
            assert_eq!(block, vec![(STREAM_TYPE.to_owned(), vec![t.to_owned()])]);
        }
    }
}
