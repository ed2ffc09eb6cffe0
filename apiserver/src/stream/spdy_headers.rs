//! The client's SPDY/3 header blocks: zlib with the SPDY/3 dictionary and one compression
//! context for the whole session, so every block the client sends (`SYN_STREAM`, `HEADERS`) is
//! inflated in order. What poddebug reads of them is each stream's `streamType` (`error`,
//! `stdin`, `stdout`, `stderr`, `resize`): the recording's decoder, to tell output from input,
//! and the moderation filter, to find the stdin stream it withholds and the stdout stream it
//! writes its notices on.

use flate2::{Decompress, FlushDecompress};

/// Largest header block inflated.
const MAX_BLOCK: usize = 256 * 1024;

/// What a SPDY stream carries, from its `streamType` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamType {
    /// `stdin`.
    Stdin,
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
    /// `error`.
    Error,
    /// `resize`.
    Resize,
    /// Anything else.
    Other,
}

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
    /// The stream a `SYN_STREAM` opens and what it carries, from its whole payload.
    pub fn syn_stream(&mut self, payload: &[u8]) -> Result<(u32, StreamType), String> {
        if payload.len() < 10 {
            return Err("truncated SYN_STREAM".to_owned());
        }
        let id = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
        let headers = self.inflate_block(&payload[10..])?;
        let kind = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("streamtype"))
            .map_or(StreamType::Other, |(_, v)| match v.as_str() {
                "stdin" => StreamType::Stdin,
                "stdout" => StreamType::Stdout,
                "stderr" => StreamType::Stderr,
                "error" => StreamType::Error,
                "resize" => StreamType::Resize,
                _ => StreamType::Other,
            });
        Ok((id, kind))
    }

    /// A `HEADERS` frame's payload: inflated only to keep the context in step.
    pub fn headers(&mut self, payload: &[u8]) -> Result<(), String> {
        if payload.len() < 4 {
            return Err("truncated HEADERS".to_owned());
        }
        self.inflate_block(&payload[4..]).map(drop)
    }

    /// Inflate one header block with the session's context and split it into name/value pairs.
    fn inflate_block(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, String> {
        let mut raw = Vec::with_capacity(block.len() * 4 + 256);
        let mut consumed = 0usize;
        // Each round either consumes input or grows the output; the bound only guards a bug.
        for _ in 0..1024 {
            let before = self.inflate.total_in();
            match self
                .inflate
                .decompress_vec(&block[consumed..], &mut raw, FlushDecompress::Sync)
            {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(super::spdy_dictionary::dictionary())
                        .map_err(|e| format!("SPDY header dictionary: {e}"))?;
                }
                Err(e) => return Err(format!("SPDY header block: {e}")),
            }
            consumed += usize::try_from(self.inflate.total_in() - before).unwrap_or(0);
            if consumed == block.len() && raw.len() < raw.capacity() {
                break;
            }
            if raw.len() > MAX_BLOCK {
                return Err("SPDY header block too large".to_owned());
            }
            raw.reserve(1024);
        }
        parse_header_block(&raw)
    }
}

/// `count, (len name, len value)*` with 32-bit big-endian lengths (SPDY/3 §2.6.10).
fn parse_header_block(raw: &[u8]) -> Result<Vec<(String, String)>, String> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if b.len() < n {
            return Err("truncated SPDY header block".to_owned());
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    fn len(b: &mut &[u8]) -> Result<usize, String> {
        let v = take(b, 4)?;
        Ok(u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as usize)
    }
    let mut b = raw;
    let count = len(&mut b)?;
    let mut headers = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let n = len(&mut b)?;
        let k = String::from_utf8_lossy(take(&mut b, n)?).into_owned();
        let n = len(&mut b)?;
        let v = String::from_utf8_lossy(take(&mut b, n)?).into_owned();
        headers.push((k, v));
    }
    Ok(headers)
}
