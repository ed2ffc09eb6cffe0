//! Moderated sessions in the relay: a [`Gate`] says whether a client's input may pass (a
//! moderator is attached to the same debug container), a filter drops the client's stdin from
//! its byte stream while it may not — whole WebSocket messages on channel 0, whole SPDY data
//! frames of the stdin stream — and the client is told on stdout when input is withheld and
//! when it passes again.
//!
//! Everything else the client sends (resizes, the v5 close of stdin, control frames, other
//! streams) passes untouched, and nothing changes while the gate is open except that frames are
//! parsed. A frame is judged when it starts: one that began while the gate was open is relayed
//! whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::watch;

use super::spdy_headers::{HeaderInflater, StreamType};
use super::websocket_frames::HeaderReader;

/// What the client is told when its input is withheld.
pub const WITHHELD_NOTICE: &str =
    "\r\n[poddebug] This session is moderated: your input is withheld until a moderator joins.\r\n";
/// What the client is told when its input passes again.
pub const PASSING_NOTICE: &str =
    "\r\n[poddebug] A moderator is attached: your input is passed on.\r\n";

/// Whether input may pass, and a way to hear when that changes.
#[derive(Debug)]
pub struct Gate {
    tx: watch::Sender<bool>,
}

impl Gate {
    /// A gate, open or not.
    pub fn new(open: bool) -> Gate {
        Gate {
            tx: watch::channel(open).0,
        }
    }

    /// Open or close it (no change, no notice).
    pub fn set(&self, open: bool) {
        self.tx.send_if_modified(|o| {
            let changed = *o != open;
            *o = open;
            changed
        });
    }

    /// Whether input passes now.
    pub fn is_open(&self) -> bool {
        *self.tx.borrow()
    }

    /// Hears every change.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

/// WebSocket opcodes.
const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;

#[derive(Debug)]
enum WsState {
    Header,
    /// A data frame's header is read; its first payload byte (the channel) decides.
    First {
        raw: Vec<u8>,
        mask: Option<[u8; 4]>,
        len: u64,
        fin: bool,
        text: bool,
    },
    Payload {
        remaining: u64,
        pass: bool,
    },
}

/// Drops the stdin messages of a WebSocket client stream while the gate is closed.
#[derive(Debug)]
pub struct WsStdinFilter {
    header: HeaderReader,
    state: WsState,
    /// The continuation frames of a dropped message are dropped too.
    dropping_message: bool,
}

impl Default for WsStdinFilter {
    fn default() -> Self {
        WsStdinFilter {
            header: HeaderReader::default(),
            state: WsState::Header,
            dropping_message: false,
        }
    }
}

impl WsStdinFilter {
    /// Append to `out` what of `data` is relayed, with `open` deciding frames that start here.
    pub fn filter(&mut self, mut data: &[u8], open: bool, out: &mut Vec<u8>) {
        while !data.is_empty() {
            match &mut self.state {
                WsState::Header => {
                    let Some(h) = self.header.read(&mut data) else {
                        continue;
                    };
                    let data_frame = matches!(h.opcode, OP_TEXT | OP_BINARY);
                    if data_frame && h.len > 0 {
                        self.state = WsState::First {
                            raw: h.raw().to_vec(),
                            mask: h.mask,
                            len: h.len,
                            fin: h.fin,
                            text: h.opcode == OP_TEXT,
                        };
                        continue;
                    }
                    let pass = !(h.opcode == OP_CONTINUATION && self.dropping_message);
                    if h.opcode == OP_CONTINUATION && h.fin {
                        self.dropping_message = false;
                    }
                    if pass {
                        out.extend_from_slice(h.raw());
                    }
                    self.state = if h.len == 0 {
                        WsState::Header
                    } else {
                        WsState::Payload {
                            remaining: h.len,
                            pass,
                        }
                    };
                }
                WsState::First {
                    raw,
                    mask,
                    len,
                    fin,
                    text,
                } => {
                    let b = data[0];
                    data = &data[1..];
                    let first = b ^ mask.map_or(0, |m| m[0]);
                    // Binary: the channel byte; base64 text protocols: its ASCII digit.
                    let stdin = if *text { first == b'0' } else { first == 0 };
                    let drop = stdin && !open;
                    if !drop {
                        out.extend_from_slice(raw);
                        out.push(b);
                    }
                    self.dropping_message = drop && !*fin;
                    let remaining = *len - 1;
                    self.state = if remaining == 0 {
                        WsState::Header
                    } else {
                        WsState::Payload {
                            remaining,
                            pass: !drop,
                        }
                    };
                }
                WsState::Payload { remaining, pass } => {
                    let take = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(data.len());
                    if *pass {
                        out.extend_from_slice(&data[..take]);
                    }
                    data = &data[take..];
                    *remaining -= take as u64;
                    if *remaining == 0 {
                        self.state = WsState::Header;
                    }
                }
            }
        }
    }
}

/// The stream ids a SPDY client opened for stdin and stdout (0: none yet), shared with the
/// server→client direction, which writes notices on stdout.
#[derive(Debug, Default)]
pub struct SpdyStreams {
    /// The stdin stream.
    pub stdin: AtomicU32,
    /// The stdout stream (stderr when there is no stdout).
    pub stdout: AtomicU32,
}

const SYN_STREAM: u16 = 1;
const HEADERS: u16 = 8;
/// Largest control frame kept whole to read its header block.
const MAX_CONTROL: usize = 256 * 1024;

#[derive(Debug)]
enum SpdyState {
    Header { have: usize },
    Control { kind: u16, remaining: usize },
    Data { remaining: usize, pass: bool },
}

/// Drops the stdin data frames of a SPDY client stream while the gate is closed, and learns
/// from the client's header blocks which streams are stdin and stdout.
#[derive(Debug)]
pub struct SpdyStdinFilter {
    header: [u8; 8],
    state: SpdyState,
    kept: Vec<u8>,
    inflater: HeaderInflater,
    streams: Arc<SpdyStreams>,
    /// The header blocks could not be read: stop judging (everything passes).
    broken: bool,
}

impl SpdyStdinFilter {
    /// A filter that publishes the streams it learns in `streams`.
    pub fn new(streams: Arc<SpdyStreams>) -> SpdyStdinFilter {
        SpdyStdinFilter {
            header: [0; 8],
            state: SpdyState::Header { have: 0 },
            kept: Vec::new(),
            inflater: HeaderInflater::default(),
            streams,
            broken: false,
        }
    }

    fn control_done(&mut self, kind: u16) {
        let payload = std::mem::take(&mut self.kept);
        let learned = match kind {
            SYN_STREAM => self.inflater.syn_stream(&payload).map(Some),
            HEADERS => self.inflater.headers(&payload).map(|()| None),
            _ => Ok(None),
        };
        match learned {
            Ok(Some((id, StreamType::Stdin))) => self.streams.stdin.store(id, Ordering::Release),
            Ok(Some((id, StreamType::Stdout))) => self.streams.stdout.store(id, Ordering::Release),
            Ok(Some((id, StreamType::Stderr))) => {
                let _ = self.streams.stdout.compare_exchange(
                    0,
                    id,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "SPDY header blocks unreadable; the moderation filter stands aside");
                self.broken = true;
            }
        }
    }

    /// Append to `out` what of `data` is relayed, with `open` deciding frames that start here.
    pub fn filter(&mut self, mut data: &[u8], open: bool, out: &mut Vec<u8>) {
        while !data.is_empty() {
            if self.broken {
                out.extend_from_slice(data);
                return;
            }
            match &mut self.state {
                SpdyState::Header { have } => {
                    let take = (8 - *have).min(data.len());
                    self.header[*have..*have + take].copy_from_slice(&data[..take]);
                    data = &data[take..];
                    *have += take;
                    if *have < 8 {
                        continue;
                    }
                    let h = self.header;
                    let len = u32::from_be_bytes([0, h[5], h[6], h[7]]) as usize;
                    if h[0] & 0x80 != 0 {
                        out.extend_from_slice(&h);
                        let kind = u16::from_be_bytes([h[2], h[3]]);
                        self.kept.clear();
                        if len == 0 {
                            self.control_done(kind);
                            self.state = SpdyState::Header { have: 0 };
                        } else {
                            self.state = SpdyState::Control {
                                kind,
                                remaining: len,
                            };
                        }
                    } else {
                        let stream = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) & 0x7fff_ffff;
                        let stdin = self.streams.stdin.load(Ordering::Acquire);
                        let pass = open || stdin == 0 || stream != stdin;
                        if pass {
                            out.extend_from_slice(&h);
                        }
                        self.state = if len == 0 {
                            SpdyState::Header { have: 0 }
                        } else {
                            SpdyState::Data {
                                remaining: len,
                                pass,
                            }
                        };
                    }
                }
                SpdyState::Control { kind, remaining } => {
                    let take = (*remaining).min(data.len());
                    out.extend_from_slice(&data[..take]);
                    if matches!(*kind, SYN_STREAM | HEADERS)
                        && self.kept.len() + take <= MAX_CONTROL
                    {
                        self.kept.extend_from_slice(&data[..take]);
                    }
                    data = &data[take..];
                    *remaining -= take;
                    if *remaining == 0 {
                        let kind = *kind;
                        self.state = SpdyState::Header { have: 0 };
                        self.control_done(kind);
                    }
                }
                SpdyState::Data { remaining, pass } => {
                    let take = (*remaining).min(data.len());
                    if *pass {
                        out.extend_from_slice(&data[..take]);
                    }
                    data = &data[take..];
                    *remaining -= take;
                    if *remaining == 0 {
                        self.state = SpdyState::Header { have: 0 };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(opcode: u8, fin: bool, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut f = vec![
            if fin { 0x80 } else { 0 } | opcode,
            0x80 | payload.len() as u8,
        ];
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    fn run(filter: &mut WsStdinFilter, bytes: &[u8], open: bool, split: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in bytes.chunks(split.max(1)) {
            filter.filter(chunk, open, &mut out);
        }
        out
    }

    #[test]
    fn websocket_stdin_is_dropped_while_closed_and_everything_else_passes_at_any_split() {
        let m = [1, 2, 3, 4];
        let stdin = ws(OP_BINARY, true, b"\x00ls\n", m);
        let resize = ws(OP_BINARY, true, b"\x04{\"Width\":80,\"Height\":24}", m);
        let close_stdin = ws(OP_BINARY, true, b"\xff\x00", m);
        let ping = ws(0x9, true, b"hi", m);
        let all: Vec<u8> = [&stdin[..], &resize, &close_stdin, &ping].concat();
        let kept: Vec<u8> = [&resize[..], &close_stdin, &ping].concat();
        for split in [1, 2, 3, 5, 7, 64] {
            assert_eq!(
                run(&mut WsStdinFilter::default(), &all, false, split),
                kept,
                "{split}"
            );
            assert_eq!(
                run(&mut WsStdinFilter::default(), &all, true, split),
                all,
                "{split}"
            );
        }
        // base64 text protocol: '0' is stdin, '4' a resize.
        let b64_stdin = ws(OP_TEXT, true, b"0bHMK", m);
        let b64_resize = ws(OP_TEXT, true, b"4eyJ9", m);
        let both = [&b64_stdin[..], &b64_resize].concat();
        assert_eq!(
            run(&mut WsStdinFilter::default(), &both, false, 3),
            b64_resize
        );
        // A fragmented stdin message goes with its continuation frames.
        let first = ws(OP_BINARY, false, b"\x00ab", m);
        let cont = ws(OP_CONTINUATION, true, b"cd", m);
        let frag = [&first[..], &cont, &resize].concat();
        assert_eq!(run(&mut WsStdinFilter::default(), &frag, false, 4), resize);
    }

    #[test]
    fn spdy_data_of_the_stdin_stream_is_dropped_while_closed() {
        use flate2::{Compress, Compression, FlushCompress};
        let mut z = Compress::new(Compression::default(), true);
        z.set_dictionary(crate::stream::spdy_dictionary::dictionary())
            .unwrap();
        let mut syn = |id: u32, ty: &str| {
            let mut block = Vec::new();
            let headers = [("streamtype", ty)];
            block.extend_from_slice(&(headers.len() as u32).to_be_bytes());
            for (k, v) in headers {
                block.extend_from_slice(&(k.len() as u32).to_be_bytes());
                block.extend_from_slice(k.as_bytes());
                block.extend_from_slice(&(v.len() as u32).to_be_bytes());
                block.extend_from_slice(v.as_bytes());
            }
            let mut packed = Vec::with_capacity(block.len() + 64);
            z.compress_vec(&block, &mut packed, FlushCompress::Sync)
                .unwrap();
            let mut payload = id.to_be_bytes().to_vec();
            payload.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            payload.extend_from_slice(&packed);
            let mut f = vec![0x80, 3, 0, 1, 0];
            f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
            f.extend_from_slice(&payload);
            f
        };
        let opens = [syn(1, "error"), syn(3, "stdin"), syn(5, "stdout")].concat();
        let typed = super::super::spdy_frames::data_frame(3, false, b"ls\n");
        let resize = super::super::spdy_frames::data_frame(7, false, b"{}");
        let all = [&opens[..], &typed, &resize].concat();
        let streams = Arc::new(SpdyStreams::default());
        let mut f = SpdyStdinFilter::new(streams.clone());
        let mut out = Vec::new();
        for chunk in all.chunks(5) {
            f.filter(chunk, false, &mut out);
        }
        assert_eq!(out, [&opens[..], &resize].concat());
        assert_eq!(streams.stdin.load(Ordering::Acquire), 3);
        assert_eq!(streams.stdout.load(Ordering::Acquire), 5);
        let mut open = SpdyStdinFilter::new(Arc::new(SpdyStreams::default()));
        let mut out = Vec::new();
        open.filter(&all, true, &mut out);
        assert_eq!(out, all);
    }
}
