//! The k8s WebSocket channel framing (`k8s.io/streaming/pkg/httpstream/wsstream`): one byte of
//! channel id + payload in binary messages, or an ASCII digit + base64 payload in text messages
//! for the `base64` subprotocols; the v5 CLOSE signal `[255, channel]`; and
//! [`ChannelClient`], a test client over an upgraded connection that keeps a [`Transcript`].

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

/// `v5.channel.k8s.io` (adds CLOSE).
pub const V5: &str = "v5.channel.k8s.io";
/// `v4.channel.k8s.io` (JSON Status on the error channel).
pub const V4: &str = "v4.channel.k8s.io";
/// `v5.base64.channel.k8s.io`.
pub const V5_BASE64: &str = "v5.base64.channel.k8s.io";
/// `v4.base64.channel.k8s.io`.
pub const V4_BASE64: &str = "v4.base64.channel.k8s.io";
/// The CLOSE signal byte.
pub const STREAM_CLOSE: u8 = 255;

/// Channel ids.
pub mod ch {
    /// stdin.
    pub const STDIN: u8 = 0;
    /// stdout.
    pub const STDOUT: u8 = 1;
    /// stderr.
    pub const STDERR: u8 = 2;
    /// error (Status at the end).
    pub const ERROR: u8 = 3;
    /// resize (JSON sizes).
    pub const RESIZE: u8 = 4;
}

/// Whether a subprotocol uses base64 text frames.
pub fn is_base64(protocol: &str) -> bool {
    protocol.contains("base64.")
}

/// One message on `channel`.
pub fn encode(channel: u8, data: &[u8], base64: bool) -> Message {
    if base64 {
        let mut s = String::with_capacity(1 + data.len() * 4 / 3 + 4);
        s.push(char::from(b'0' + channel));
        s.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
        Message::Text(s.into())
    } else {
        let mut v = Vec::with_capacity(1 + data.len());
        v.push(channel);
        v.extend_from_slice(data);
        Message::Binary(Bytes::from(v))
    }
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Data on a channel.
    Data(u8, Vec<u8>),
    /// v5 CLOSE of a channel.
    Close(u8),
    /// An empty message (no channel byte: ignored by the kubelet).
    Empty,
    /// Not decodable (bad base64, bad digit).
    Invalid,
}

/// Decodes a data message (binary or text).
pub fn decode(data: &[u8], base64: bool) -> Decoded {
    match data {
        [] => Decoded::Empty,
        [STREAM_CLOSE, c] => Decoded::Close(*c),
        [first, rest @ ..] if base64 => {
            if !first.is_ascii_digit() {
                return Decoded::Invalid;
            }
            match base64::engine::general_purpose::STANDARD.decode(rest) {
                Ok(d) => Decoded::Data(first - b'0', d),
                Err(_) => Decoded::Invalid,
            }
        }
        [first, rest @ ..] => Decoded::Data(*first, rest.to_vec()),
    }
}

/// Everything one side received in an attach session (WebSocket or SPDY).
#[derive(Clone, Debug, Default)]
pub struct Transcript {
    /// stdout bytes.
    pub stdout: Vec<u8>,
    /// stderr bytes.
    pub stderr: Vec<u8>,
    /// error channel bytes.
    pub error: Vec<u8>,
    /// The error channel is complete (SPDY FIN / a message on WebSocket).
    pub error_done: bool,
    /// WebSocket close frame (code, reason).
    pub close: Option<(u16, String)>,
    /// SPDY GOAWAY received.
    pub goaway: bool,
    /// The connection ended.
    pub ended: bool,
    /// (channel or stream id, payload length) of every data message, in order.
    pub frames: Vec<(u8, usize)>,
    /// The answers to this side's own pings (WebSocket pong payloads, SPDY ping ids).
    pub pongs: Vec<Vec<u8>>,
}

impl Transcript {
    /// The error channel as a Status (v4/v5).
    pub fn status(&self) -> Option<Value> {
        serde_json::from_slice(&self.error).ok()
    }

    /// stdout as text.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// The exit code the Status reports: 0 for Success, the `ExitCode` cause for
    /// `NonZeroExitCode`, `None` otherwise.
    pub fn exit_code(&self) -> Option<i32> {
        let s = self.status()?;
        match s["status"].as_str()? {
            "Success" => Some(0),
            _ if s["reason"] == "NonZeroExitCode" => s["details"]["causes"]
                .as_array()?
                .iter()
                .find(|c| c["reason"] == "ExitCode")?["message"]
                .as_str()?
                .parse()
                .ok(),
            _ => None,
        }
    }
}

/// A WebSocket attach client.
pub struct ChannelClient<S> {
    ws: WebSocketStream<S>,
    base64: bool,
    protocol: String,
    transcript: Transcript,
}

impl<S> std::fmt::Debug for ChannelClient<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelClient")
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ChannelClient<S> {
    /// A client over an upgraded connection that negotiated `protocol`.
    pub async fn new(io: S, protocol: &str) -> ChannelClient<S> {
        let ws = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
        ChannelClient {
            ws,
            base64: is_base64(protocol),
            protocol: protocol.to_owned(),
            transcript: Transcript::default(),
        }
    }

    /// The negotiated subprotocol.
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// Sends data on a channel.
    pub async fn send(&mut self, channel: u8, data: &[u8]) -> Result<(), String> {
        self.ws
            .send(encode(channel, data, self.base64))
            .await
            .map_err(|e| e.to_string())
    }

    /// Sends stdin data.
    pub async fn stdin(&mut self, data: &[u8]) -> Result<(), String> {
        self.send(ch::STDIN, data).await
    }

    /// v5 CLOSE of a channel.
    pub async fn close_channel(&mut self, channel: u8) -> Result<(), String> {
        self.ws
            .send(Message::Binary(Bytes::from(vec![STREAM_CLOSE, channel])))
            .await
            .map_err(|e| e.to_string())
    }

    /// A terminal size on the resize channel.
    pub async fn resize(&mut self, width: u16, height: u16) -> Result<(), String> {
        let data = serde_json::to_vec(&serde_json::json!({"Width": width, "Height": height}))
            .unwrap_or_default();
        self.send(ch::RESIZE, &data).await
    }

    /// Sends a raw message.
    pub async fn send_message(&mut self, msg: Message) -> Result<(), String> {
        self.ws.send(msg).await.map_err(|e| e.to_string())
    }

    /// A WebSocket close frame.
    pub async fn close(&mut self) -> Result<(), String> {
        self.ws.close(None).await.map_err(|e| e.to_string())
    }

    /// Reads into the transcript until `until` holds, the connection ends, or `timeout` passes.
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
            let msg = match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => break,
                Ok(None) | Ok(Some(Err(_))) => {
                    self.transcript.ended = true;
                    break;
                }
                Ok(Some(Ok(m))) => m,
            };
            let data: Vec<u8> = match msg {
                Message::Binary(b) => b.to_vec(),
                Message::Text(t) => t.as_bytes().to_vec(),
                Message::Pong(p) => {
                    self.transcript.pongs.push(p.to_vec());
                    continue;
                }
                Message::Close(frame) => {
                    self.transcript.close = Some(
                        frame
                            .map(|f| (u16::from(f.code), f.reason.to_string()))
                            .unwrap_or((1005, String::new())),
                    );
                    continue;
                }
                _ => continue,
            };
            if let Decoded::Data(channel, payload) = decode(&data, self.base64) {
                self.transcript.frames.push((channel, payload.len()));
                match channel {
                    ch::STDOUT => self.transcript.stdout.extend_from_slice(&payload),
                    ch::STDERR => self.transcript.stderr.extend_from_slice(&payload),
                    ch::ERROR => {
                        self.transcript.error.extend_from_slice(&payload);
                        self.transcript.error_done = true;
                    }
                    _ => {}
                }
            }
        }
        &self.transcript
    }

    /// Sends a ping with `token` and reads until its pong: everything sent before it has been
    /// read by the other side (a relay that reads in order has judged it).
    pub async fn sync(&mut self, token: &[u8], timeout: Duration) -> bool {
        if self
            .send_message(Message::Ping(token.to_vec().into()))
            .await
            .is_err()
        {
            return false;
        }
        let token = token.to_vec();
        self.read_until(timeout, |t| t.pongs.contains(&token))
            .await
            .pongs
            .contains(&token)
    }

    /// Reads until the connection ends (after the error channel and the close handshake).
    pub async fn finish(&mut self, timeout: Duration) -> &Transcript {
        self.read_until(timeout, |_| false).await
    }

    /// What was received so far.
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }
}

/// A stdin message in three frames: an empty binary frame, then two continuation frames with
/// the channel byte and half the text, and the rest (how a client may fragment any message).
pub fn stdin_fragments(text: &str) -> Vec<Message> {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let mut payload = vec![ch::STDIN];
    payload.extend_from_slice(text.as_bytes());
    let (a, b) = payload.split_at(payload.len() / 2);
    vec![
        Message::Frame(Frame::message(
            Vec::new(),
            OpCode::Data(Data::Binary),
            false,
        )),
        Message::Frame(Frame::message(
            a.to_vec(),
            OpCode::Data(Data::Continue),
            false,
        )),
        Message::Frame(Frame::message(
            b.to_vec(),
            OpCode::Data(Data::Continue),
            true,
        )),
    ]
}

/// A stdin message whose channel byte comes alone in its first frame.
pub fn stdin_channel_alone(text: &str) -> Vec<Message> {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    vec![
        Message::Frame(Frame::message(
            vec![ch::STDIN],
            OpCode::Data(Data::Binary),
            false,
        )),
        Message::Frame(Frame::message(
            text.as_bytes().to_vec(),
            OpCode::Data(Data::Continue),
            true,
        )),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips() {
        for base64 in [false, true] {
            let m = encode(ch::STDOUT, b"hi\x00\xff", base64);
            let bytes = match &m {
                Message::Binary(b) => b.to_vec(),
                Message::Text(t) => t.as_bytes().to_vec(),
                _ => unreachable!(),
            };
            assert_eq!(
                decode(&bytes, base64),
                Decoded::Data(1, b"hi\x00\xff".to_vec())
            );
        }
        assert_eq!(decode(&[255, 0], false), Decoded::Close(0));
        assert_eq!(decode(&[255, 0], true), Decoded::Close(0));
        assert_eq!(decode(b"1", true), Decoded::Data(1, Vec::new()));
        assert_eq!(decode(&[], false), Decoded::Empty);
        assert_eq!(decode(b"x!!", true), Decoded::Invalid);
    }

    #[test]
    fn exit_codes_from_status() {
        let mut t = Transcript {
            error: br#"{"metadata":{},"status":"Success"}"#.to_vec(),
            ..Default::default()
        };
        assert_eq!(t.exit_code(), Some(0));
        t.error = br#"{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#.to_vec();
        assert_eq!(t.exit_code(), Some(3));
    }
}
