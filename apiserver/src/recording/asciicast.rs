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
}

/// Text of a byte stream, carrying an incomplete trailing UTF-8 sequence to the next call.
#[derive(Debug, Default)]
pub struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    /// The text of `pending + data`, keeping back at most 3 bytes of an unfinished sequence.
    pub fn text(&mut self, data: &[u8]) -> String {
        self.pending.extend_from_slice(data);
        let mut keep = 0;
        if let Err(e) = std::str::from_utf8(&self.pending)
            && e.error_len().is_none()
        {
            keep = self.pending.len() - e.valid_up_to();
        }
        let cut = self.pending.len() - keep;
        let text = String::from_utf8_lossy(&self.pending[..cut]).into_owned();
        self.pending.drain(..cut);
        text
    }

    /// What is left at the end of the stream (an unfinished sequence becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
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
        if self.truncated {
            return false;
        }
        let n = line.len() as u64;
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

    #[test]
    fn split_characters_survive() {
        let mut c = Utf8Carry::default();
        let euro = "€".as_bytes();
        assert_eq!(c.text(&[b'a', euro[0]]), "a");
        assert_eq!(c.text(&euro[1..2]), "");
        assert_eq!(c.text(&[euro[2], b'b']), "€b");
        assert_eq!(c.text(&[0xff, b'c']), "\u{fffd}c");
        assert_eq!(c.text(&[0xe2]), "");
        assert_eq!(c.finish(), "\u{fffd}");
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
