//! The remote-command protocols' messages as the relay sees them, whatever the framing: the
//! channels (WebSocket) or stream types (SPDY), the terminal size message, and what the relay
//! hands to a recorder.

use bytes::Bytes;

use crate::ProtocolError;

/// stdin (client → container).
pub const STDIN: u8 = 0;
/// stdout (container → client).
pub const STDOUT: u8 = 1;
/// stderr (container → client).
pub const STDERR: u8 = 2;
/// The error channel: the final `Status` (container → client).
pub const ERROR: u8 = 3;
/// Terminal resizes (client → container).
pub const RESIZE: u8 = 4;
/// v5's stream-close signal: `[255, channel]` half-closes `channel` (client → server).
pub const CLOSE_SIGNAL: u8 = 255;

/// Largest terminal size message (kubectl's are about 30 bytes).
pub const MAX_RESIZE_MESSAGE: usize = 4096;

/// A terminal size, as the kubelet decodes it (`remotecommand.TerminalSize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

impl TerminalSize {
    /// Read one JSON object the way Go's `encoding/json` fills `TerminalSize`: field names match
    /// case-insensitively, the last of repeated keys wins, unknown fields are ignored, a value
    /// that is not an integer in 0..=65535 is an error (the kubelet then stops reading resizes).
    pub fn parse(json: &[u8]) -> Result<TerminalSize, ProtocolError> {
        let bad = |why: &str| ProtocolError::new(format!("invalid terminal size message: {why}"));
        let value: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| bad(&e.to_string()))?;
        let serde_json::Value::Object(fields) = value else {
            return Err(bad("not a JSON object"));
        };
        let mut size = TerminalSize {
            width: 0,
            height: 0,
        };
        // serde_json keeps the last of repeated keys, as Go does.
        for (k, v) in &fields {
            let slot = if k.eq_ignore_ascii_case("width") {
                &mut size.width
            } else if k.eq_ignore_ascii_case("height") {
                &mut size.height
            } else {
                continue;
            };
            if v.is_null() {
                continue;
            }
            *slot = v
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .ok_or_else(|| bad(&format!("{k} is not an integer in 0..=65535")))?;
        }
        Ok(size)
    }

    /// The message poddebug sends upstream: `{"Width":W,"Height":H}` (what kubectl sends).
    pub fn to_json(self) -> Vec<u8> {
        format!("{{\"Width\":{},\"Height\":{}}}", self.width, self.height).into_bytes()
    }
}

/// What the relay hands a recorder, in the order the bytes were relayed, decoded from the
/// framing (unmasked, base64-decoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// stdin the relay forwarded (withheld input is not forwarded, so not recorded).
    Input(Bytes),
    /// stdout or stderr the relay forwarded.
    Output(Bytes),
    /// A terminal resize the relay forwarded.
    Resize(TerminalSize),
    /// The whole message of the error channel (a `Status` on v4 and v5).
    Error(Bytes),
    /// A message of the relay's own to the client (a moderation notice), on stdout.
    Notice(Bytes),
}

impl Recorded {
    /// The payload bytes it carries (for accounting).
    pub fn len(&self) -> usize {
        match self {
            Recorded::Input(b) | Recorded::Output(b) | Recorded::Error(b) | Recorded::Notice(b) => {
                b.len()
            }
            Recorded::Resize(_) => 0,
        }
    }

    /// Whether it carries no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sizes_are_read_as_go_reads_them() {
        let ok = |s: &str| TerminalSize::parse(s.as_bytes()).map(|t| (t.width, t.height));
        assert_eq!(ok(r#"{"Width":80,"Height":24}"#), Ok((80, 24)));
        assert_eq!(ok(r#"{"width":80,"HEIGHT":24,"x":1}"#), Ok((80, 24)));
        assert_eq!(ok(r#"{"Width":80,"Width":100}"#), Ok((100, 0)));
        assert_eq!(ok(r#"{}"#), Ok((0, 0)));
        for bad in [
            r#"{"Width":-1}"#,
            r#"{"Width":70000}"#,
            r#"{"Width":"80"}"#,
            r#"{"Width":8.5}"#,
            "[80,24]",
            "{",
            r#"{"Width":80}{"Width":81}"#,
        ] {
            assert!(TerminalSize::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let t = TerminalSize {
            width: 132,
            height: 43,
        };
        assert_eq!(t.to_json(), br#"{"Width":132,"Height":43}"#);
        assert_eq!(TerminalSize::parse(&t.to_json()), Ok(t));
    }
}
