//! asciicast v2 (<https://docs.asciinema.org/manual/asciicast/v2/>): a JSON header line, then
//! one JSON array per event: `[seconds, "o", data]` output, `[seconds, "i", data]` input,
//! `[seconds, "r", "COLSxROWS"]` resize, `[seconds, "m", label]` marker.
//!
//! Event data are JSON strings, so bytes are turned into text here: a UTF-8 sequence split
//! across two chunks is carried over to the next event, so multi-byte characters survive any
//! framing; bytes that are not UTF-8 at all become U+FFFD (as asciinema records them).
//!
//! The size cap is kept exactly: an event that would take the file past it is not written; a
//! marker event `recording truncated: …` ends the file instead (room for it is reserved).

use serde::Serialize;

/// Room kept under the cap for the truncation marker.
pub const MARKER_RESERVE: u64 = 160;

/// The header line's fields.
#[derive(Clone, Debug, Serialize)]
pub struct Header {
    /// Always 2.
    pub version: u8,
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
    /// Start, Unix seconds.
    pub timestamp: i64,
    /// `namespace/pod/container`.
    pub title: String,
    /// Who and what was recorded (extra header field; players ignore it).
    pub poddebug: HeaderInfo,
}

/// The session facts carried in the header.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderInfo {
    /// Recording id.
    pub id: String,
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Debug container.
    pub container: String,
    /// User.
    pub user: String,
    /// Start, RFC 3339.
    pub start: String,
    /// Negotiated stream protocol.
    pub protocol: String,
    /// Whether input events are recorded.
    pub input_recorded: bool,
    /// `--recording-mode`: `strict` when nothing reached the client unrecorded.
    pub recording_mode: String,
    /// The session id (`DebugSession` name).
    pub session: String,
    /// How the user took part: `owner`, `peer`, `observer`, `moderator`.
    pub mode: String,
    /// The reason, ticket, debug request and approvers the debug container carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<poddebug_types::request::Justification>,
}

/// Text of a byte stream, carrying an incomplete trailing UTF-8 sequence to the next call.
#[derive(Debug, Default)]
pub struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    /// Append the text of `pending + data` to `out`, JSON-escaped, keeping back at most 3
    /// bytes of an unfinished sequence at the end.
    pub fn push_escaped(&mut self, data: &[u8], out: &mut Vec<u8>) {
        let joined;
        let data = if self.pending.is_empty() {
            data
        } else {
            // A character split across two chunks (rare): one small copy.
            let mut v = std::mem::take(&mut self.pending);
            v.extend_from_slice(data);
            joined = v;
            &joined[..]
        };
        let keep = unfinished_tail(data);
        let (now, later) = data.split_at(data.len() - keep);
        escape_lossy(now, out);
        self.pending.extend_from_slice(later);
    }

    /// Append what is left at the end of the stream (an unfinished sequence becomes U+FFFD).
    pub fn finish_escaped(&mut self, out: &mut Vec<u8>) {
        escape_lossy(&self.pending, out);
        self.pending.clear();
    }
}

/// How many bytes at the end of `data` begin a UTF-8 sequence that more bytes could finish.
fn unfinished_tail(data: &[u8]) -> usize {
    for back in 1..=data.len().min(3) {
        let start = data.len() - back;
        if data[start] & 0xc0 != 0x80 {
            // The last byte that is not a continuation byte: a prefix of a character?
            return match std::str::from_utf8(&data[start..]) {
                Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => back,
                _ => 0,
            };
        }
    }
    0
}

/// Append `data` as the inside of a JSON string: valid UTF-8 as it is (escaped where JSON
/// needs it, as serde_json does), every invalid sequence as one U+FFFD, like
/// `String::from_utf8_lossy`.
fn escape_lossy(mut data: &[u8], out: &mut Vec<u8>) {
    loop {
        match std::str::from_utf8(data) {
            Ok(valid) => return escape_str(valid.as_bytes(), out),
            Err(e) => {
                let (valid, rest) = data.split_at(e.valid_up_to());
                escape_str(valid, out);
                out.extend_from_slice("\u{fffd}".as_bytes());
                match e.error_len() {
                    Some(n) => data = &rest[n..],
                    None => return,
                }
            }
        }
    }
}

/// Whether a byte of valid UTF-8 must be escaped in a JSON string.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any of the 8 bytes of `word` must be escaped (exact, eight at a time: a byte below
/// 0x20, a quote or a backslash).
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0;
    below_space
        || has_zero(word ^ (ONES * u64::from(b'"')))
        || has_zero(word ^ (ONES * u64::from(b'\\')))
}

/// Where the first byte that must be escaped is.
fn first_escape(text: &[u8]) -> Option<usize> {
    let mut clean = 0;
    for word in text.chunks_exact(8) {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(word).unwrap_or_default());
        if word_needs_escape(word) {
            break;
        }
        clean += 8;
    }
    text[clean..]
        .iter()
        .position(|&b| needs_escape(b))
        .map(|i| clean + i)
}

/// Append valid UTF-8 `text` JSON-escaped, copying the runs that need no escape whole.
fn escape_str(mut text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    while let Some(i) = first_escape(text) {
        out.extend_from_slice(&text[..i]);
        let b = text[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        text = &text[i + 1..];
    }
    out.extend_from_slice(text);
}

/// Append one event line `[seconds, code, text]` (with its newline) whose text `fill` appends,
/// already JSON-escaped; nothing is appended, and false returned, when the text is empty.
pub fn push_event(
    out: &mut Vec<u8>,
    seconds: f64,
    code: &str,
    fill: impl FnOnce(&mut Vec<u8>),
) -> bool {
    let start = out.len();
    out.push(b'[');
    // Writing a float to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &round6(seconds));
    out.extend_from_slice(b",\"");
    out.extend_from_slice(code.as_bytes());
    out.extend_from_slice(b"\",\"");
    let text = out.len();
    fill(out);
    if out.len() == text {
        out.truncate(start);
        return false;
    }
    out.extend_from_slice(b"\"]\n");
    true
}

/// One event line (with its newline).
pub fn event_line(seconds: f64, code: &str, data: &str) -> Vec<u8> {
    // Serializing a tuple of a float and two strings cannot fail.
    let mut line = serde_json::to_vec(&(round6(seconds), code, data)).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The header line (with its newline).
pub fn header_line(h: &Header) -> Vec<u8> {
    let mut line = serde_json::to_vec(h).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Session time of an event line (`[seconds, code, data]`), from its first field alone;
/// `None` for the header or a line that is not an event.
pub fn event_time(line: &[u8]) -> Option<f64> {
    let rest = line.strip_prefix(b"[")?;
    let end = rest.iter().position(|b| *b == b',')?;
    let t: f64 = std::str::from_utf8(&rest[..end])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (t.is_finite() && t >= 0.0).then_some(t)
}

/// Seconds as whole microseconds (event times are written to the microsecond).
pub fn micros(seconds: f64) -> u64 {
    // Saturating: times are non-negative and far below u64::MAX µs.
    (seconds.max(0.0) * 1e6).round() as u64
}

/// The session times (microseconds) of the first and the last event of a part (whole lines);
/// `None` when it holds no event (only the header).
pub fn event_span(part: &[u8]) -> Option<(u64, u64)> {
    let mut times = part.split(|b| *b == b'\n').filter_map(event_time);
    let first = times.next()?;
    let last = part
        .split(|b| *b == b'\n')
        .rev()
        .find_map(event_time)
        .unwrap_or(first);
    Some((micros(first), micros(last)))
}

fn round6(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

/// Lines to write, under a byte cap (0 = none).
#[derive(Debug)]
pub struct Capped {
    cap: u64,
    written: u64,
    truncated: bool,
}

impl Capped {
    /// A fresh budget.
    pub fn new(cap: u64) -> Capped {
        Capped {
            cap,
            written: 0,
            truncated: false,
        }
    }

    /// Whether `line` fits; counts it if so. Once something did not fit, nothing more does.
    pub fn admit(&mut self, line: &[u8]) -> bool {
        self.admit_len(line.len())
    }

    /// Whether a line of `len` bytes fits; counts it if so.
    pub fn admit_len(&mut self, len: usize) -> bool {
        if self.truncated {
            return false;
        }
        let n = len as u64;
        if self.cap > 0 && self.written + n + MARKER_RESERVE > self.cap {
            self.truncated = true;
            return false;
        }
        self.written += n;
        true
    }

    /// The marker line that ends a truncated recording (always written, in the reserved room).
    pub fn marker(&mut self, seconds: f64, why: &str) -> Vec<u8> {
        self.truncated = true;
        let mut reason = format!("recording truncated: {why}");
        reason.truncate(100);
        let line = event_line(seconds, "m", &reason);
        self.written += line.len() as u64;
        line
    }

    /// Nothing more fits from now on (the cap is reached however much was written).
    pub fn stop(&mut self) {
        self.truncated = true;
    }

    /// Whether the cap was reached.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Bytes admitted so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(c: &mut Utf8Carry, data: &[u8]) -> String {
        let mut out = Vec::new();
        c.push_escaped(data, &mut out);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn split_characters_survive() {
        let mut c = Utf8Carry::default();
        let euro = "€".as_bytes();
        assert_eq!(text(&mut c, &[b'a', euro[0]]), "a");
        assert_eq!(text(&mut c, &euro[1..2]), "");
        assert_eq!(text(&mut c, &[euro[2], b'b']), "€b");
        assert_eq!(text(&mut c, &[0xff, b'c']), "\u{fffd}c");
        // An invalid byte earlier in the chunk does not stop a split character from surviving.
        assert_eq!(text(&mut c, &[0xff, b'd', euro[0], euro[1]]), "\u{fffd}d");
        assert_eq!(text(&mut c, &euro[2..]), "€");
        assert_eq!(text(&mut c, &[0xe2]), "");
        let mut rest = Vec::new();
        c.finish_escaped(&mut rest);
        assert_eq!(rest, "\u{fffd}".as_bytes());
    }

    /// Bytes of every kind: ASCII, controls, quotes, backslashes, 2/3/4-byte characters and
    /// invalid sequences, from a fixed xorshift sequence.
    fn mixed_bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        let pieces: [&[u8]; 10] = [
            b"plain text ",
            b"\x1b[0m",
            b"\"q\"\\",
            "é".as_bytes(),
            "€".as_bytes(),
            "🦀".as_bytes(),
            &[0xff],
            &[0xe2, 0x82],
            &[0xed, 0xa0, 0x80],
            b"\n\r\t\x08\x0c\x7f\x00",
        ];
        let mut out = Vec::new();
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(pieces[(x % 10) as usize]);
        }
        out
    }

    #[test]
    fn escaped_text_is_what_serde_json_writes_for_the_lossy_text_across_any_split() {
        for seed in 1..40 {
            let data = mixed_bytes(seed, 3000);
            let whole = String::from_utf8_lossy(&data);
            let expected = serde_json::to_string(&whole).expect("json");
            for split in [1, 2, 3, 5, 64, 1000, 5000] {
                let mut c = Utf8Carry::default();
                let mut got = b"\"".to_vec();
                for piece in data.chunks(split) {
                    c.push_escaped(piece, &mut got);
                }
                c.finish_escaped(&mut got);
                got.push(b'"');
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    expected,
                    "seed {seed}, split {split}"
                );
            }
        }
    }

    #[test]
    fn the_word_test_agrees_with_the_byte_test() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Bias the bytes towards the edges that matter.
            let bytes = x.to_le_bytes().map(|b| match b % 8 {
                0 => 0x1f,
                1 => 0x20,
                2 => b'"',
                3 => b'\\',
                4 => 0x80 | b,
                _ => b,
            });
            let word = u64::from_le_bytes(bytes);
            assert_eq!(
                word_needs_escape(word),
                bytes.iter().any(|&b| needs_escape(b)),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn an_event_line_is_written_only_with_text() {
        let mut out = b"before\n".to_vec();
        assert!(!push_event(&mut out, 1.0, "o", |_| {}));
        assert_eq!(out, b"before\n");
        assert!(push_event(&mut out, 1.2345678, "o", |o| {
            Utf8Carry::default().push_escaped(b"a\"\x1b[0m", o)
        }));
        assert_eq!(
            &out[7..],
            &event_line(1.2345678, "o", "a\"\u{1b}[0m")[..],
            "the same line serde_json writes"
        );
    }

    #[test]
    fn a_part_spans_the_times_of_its_first_and_last_event() {
        let mut part = header_line(&Header {
            version: 2,
            width: 80,
            height: 24,
            timestamp: 0,
            title: String::new(),
            poddebug: HeaderInfo {
                id: String::new(),
                namespace: String::new(),
                pod: String::new(),
                container: String::new(),
                user: String::new(),
                start: String::new(),
                protocol: String::new(),
                input_recorded: false,
                recording_mode: String::new(),
                session: String::new(),
                mode: String::new(),
                justification: None,
            },
        });
        assert_eq!(event_span(&part), None, "the header is no event");
        part.extend(event_line(1.5, "o", "a,b"));
        assert_eq!(event_span(&part), Some((1_500_000, 1_500_000)));
        part.extend(event_line(612.000_001, "m", "[9, \"o\"]"));
        assert_eq!(event_span(&part), Some((1_500_000, 612_000_001)));
        assert_eq!(event_time(b"[2.25,\"o\",\"x\"]"), Some(2.25));
        assert_eq!(event_time(b"[-1,\"o\",\"x\"]"), None);
        assert_eq!(event_time(b"{\"version\":2}"), None);
    }

    #[test]
    fn events_are_json_arrays() {
        assert_eq!(
            event_line(1.2345678, "o", "a\"\u{1b}[0m"),
            b"[1.234568,\"o\",\"a\\\"\\u001b[0m\"]\n".to_vec()
        );
    }

    #[test]
    fn the_cap_is_kept_with_room_for_the_marker() {
        let mut c = Capped::new(MARKER_RESERVE + 20);
        assert!(c.admit(&[0; 15]));
        assert!(!c.admit(&[0; 6]));
        assert!(!c.admit(&[0; 1]), "nothing after the first refusal");
        let m = c.marker(1.0, "size limit");
        assert!(c.written() <= MARKER_RESERVE + 20, "{}", c.written());
        assert!(String::from_utf8_lossy(&m).contains("recording truncated: size limit"));
        assert!(Capped::new(0).admit(&vec![0; 1 << 20]));
    }
}
