//! The upstream's side of a SPDY attach (kube-apiserver's frames to the client), parsed as it
//! streams: data frames are written to the client with a head poddebug encoded and their
//! payload as it comes; control frames whole, their payload unchanged (the server's header
//! blocks must reach the client in the server's compression context, in order). The relay
//! learns where frames begin and end (its own frames go between them), which streams the
//! upstream accepted and closed (for the last message on the error stream at shutdown), and,
//! for a recorder, output by the stream type the client declared.

use std::sync::Arc;

use bytes::Bytes;

use super::client::Streams;
use super::frame::{
    FLAG_FIN, FrameHead, FrameSplitter, GOAWAY, Piece, REFUSED_STREAM, RST_STREAM, SYN_REPLY,
    data_frame, goaway_frame, put_control_head, put_data_head, rst_stream_frame, stream_id,
};
use super::headers::StreamType;
use crate::ProtocolError;
use crate::channel::Recorded;

/// Largest control frame from the upstream (its SYN_REPLYs are a few dozen bytes).
const MAX_CONTROL_FRAME: usize = 1 << 20;
/// Largest error-stream message kept for the recorder.
const MAX_ERROR_MESSAGE: usize = 64 * 1024;

/// The upstream's side of one SPDY attach (module docs).
#[derive(Debug)]
pub struct ServerSide {
    splitter: FrameSplitter,
    head: Option<FrameHead>,
    control: Vec<u8>,
    streams: Arc<Streams>,
    record: bool,
    error_message: Vec<u8>,
    /// The upstream accepted the error stream.
    error_replied: bool,
    /// The error stream was finished by the upstream or reset.
    error_closed: bool,
    /// The upstream sent GOAWAY.
    gone_away: bool,
    /// The stream ids the upstream accepted (SYN_REPLY), at most one per type.
    replied: Vec<u32>,
    /// Data payload passed since [`ServerSide::take_data_seen`] was last asked.
    data_seen: bool,
}

impl ServerSide {
    /// The upstream's side of a session whose client streams are `streams`; `record`: decode
    /// output for a recorder.
    pub fn new(streams: Arc<Streams>, record: bool) -> ServerSide {
        ServerSide {
            splitter: FrameSplitter::default(),
            head: None,
            control: Vec::new(),
            streams,
            record,
            error_message: Vec::new(),
            error_replied: false,
            error_closed: false,
            gone_away: false,
            replied: Vec::new(),
            data_seen: false,
        }
    }

    /// Read `chunk`: append what the client gets to `out`, and what a recorder gets to
    /// `events`.
    pub fn feed(
        &mut self,
        chunk: &Bytes,
        out: &mut Vec<u8>,
        events: &mut Vec<Recorded>,
    ) -> Result<(), ProtocolError> {
        let mut data: &[u8] = chunk;
        while let Some(piece) = self.splitter.next(&mut data) {
            match piece {
                Piece::Start(head) => {
                    match head.control {
                        Some(_) if head.version != 3 => {
                            return Err(ProtocolError::new(
                                "a SPDY control frame not of version 3",
                            ));
                        }
                        Some(_) if head.len as usize > MAX_CONTROL_FRAME => {
                            return Err(ProtocolError::new("an oversized SPDY control frame"));
                        }
                        Some(_) => self.control.clear(),
                        None if head.stream == 0 => {
                            return Err(ProtocolError::new("a SPDY data frame on stream 0"));
                        }
                        None => put_data_head(out, head.stream, head.flags, head.len as usize),
                    }
                    self.head = Some(head);
                }
                Piece::Payload(p) => {
                    let Some(head) = self.head else { continue };
                    if head.control.is_some() {
                        self.control.extend_from_slice(p);
                        continue;
                    }
                    out.extend_from_slice(p);
                    self.data_seen |= !p.is_empty();
                    if self.record {
                        match self.streams.type_of(head.stream) {
                            Some(StreamType::Stdout | StreamType::Stderr) => {
                                events.push(Recorded::Output(chunk.slice_ref(p)))
                            }
                            Some(StreamType::Error)
                                if self.error_message.len() + p.len() <= MAX_ERROR_MESSAGE =>
                            {
                                self.error_message.extend_from_slice(p)
                            }
                            _ => {}
                        }
                    }
                }
                Piece::End => {
                    let Some(head) = self.head.take() else {
                        continue;
                    };
                    self.end_frame(head, out, events);
                }
            }
        }
        Ok(())
    }

    fn end_frame(&mut self, head: FrameHead, out: &mut Vec<u8>, events: &mut Vec<Recorded>) {
        let error = self.streams.id(StreamType::Error);
        let Some(kind) = head.control else {
            if error != 0 && head.stream == error {
                if head.flags & FLAG_FIN != 0 {
                    self.error_closed = true;
                }
                // client-go reads the error stream to its end; the kubelet writes one message.
                if !self.error_message.is_empty() {
                    events.push(Recorded::Error(Bytes::from(std::mem::take(
                        &mut self.error_message,
                    ))));
                }
            }
            return;
        };
        put_control_head(out, kind, head.flags, self.control.len());
        out.extend_from_slice(&self.control);
        let id = match self.control.get(..4) {
            Some(b) => stream_id([b[0], b[1], b[2], b[3]]),
            None => 0,
        };
        // A client opens five streams at most; the bound only guards a misbehaving upstream.
        if kind == SYN_REPLY && self.replied.len() < 16 && !self.replied.contains(&id) {
            self.replied.push(id);
        }
        match kind {
            SYN_REPLY if error != 0 && id == error => {
                self.error_replied = true;
                self.error_closed |= head.flags & FLAG_FIN != 0;
            }
            RST_STREAM if error != 0 && id == error => self.error_closed = true,
            GOAWAY => self.gone_away = true,
            _ => {}
        }
    }

    /// Whether data (not control frames) passed since the last call.
    pub fn take_data_seen(&mut self) -> bool {
        std::mem::take(&mut self.data_seen)
    }

    /// Whether the next byte starts a frame.
    pub fn at_frame_boundary(&self) -> bool {
        self.splitter.at_frame_boundary()
    }

    /// How many bytes may be read without running past the next frame boundary (at least 1).
    pub fn wanted(&self) -> usize {
        self.splitter.wanted()
    }

    /// A data frame telling the client `text` on its stdout (stderr without one), once the
    /// upstream accepted either; `None` until then.
    pub fn notice_frame(&self, text: &[u8]) -> Option<Vec<u8>> {
        let id = [StreamType::Stdout, StreamType::Stderr]
            .into_iter()
            .map(|t| self.streams.id(t))
            .find(|id| *id != 0 && self.replied.contains(id))?;
        (!self.gone_away).then(|| data_frame(id, false, text))
    }

    /// Whether no frame of poddebug's may be written any more (the upstream sent GOAWAY).
    pub fn gone_away(&self) -> bool {
        self.gone_away
    }

    /// Whether the client opened an error stream the upstream has not answered yet: the ending's
    /// message can go on it only once the upstream's SYN_REPLY reached the client (a client that
    /// opens its streams without waiting for their replies may be ended before that).
    pub fn error_reply_pending(&self) -> bool {
        self.streams.id(StreamType::Error) != 0
            && !self.error_replied
            && !self.error_closed
            && !self.gone_away
    }

    /// The frames to write to the client when the server ends the session: a last message with
    /// FIN on the error stream while it is open, RST_STREAM (REFUSED_STREAM) of the stream the
    /// client opened and poddebug refused, if any (`refused`, 0 for none: a client waiting for
    /// that stream's reply, as apimachinery's SPDY connection does, learns at once), then GOAWAY;
    /// nothing after a GOAWAY.
    pub fn ending_frames(
        &self,
        client_gone_away: bool,
        error_payload: &[u8],
        refused: u32,
    ) -> Vec<u8> {
        if self.gone_away || client_gone_away {
            return Vec::new();
        }
        let mut out = Vec::new();
        let error = self.streams.id(StreamType::Error);
        if error != 0 && self.error_replied && !self.error_closed {
            out.extend(data_frame(error, true, error_payload));
        }
        if refused != 0 {
            out.extend(rst_stream_frame(refused, REFUSED_STREAM));
        }
        out.extend(goaway_frame(self.streams.last()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame::control_frame;
    use super::*;

    fn streams(ids: &[(u32, &str)]) -> Arc<Streams> {
        use super::super::client::{ClientFrame, ClientSide};
        use super::super::headers::HeaderDeflater;
        let s = Arc::new(Streams::default());
        let mut side = ClientSide::new(s.clone());
        let mut def = HeaderDeflater::default();
        let mut bytes = Vec::new();
        for (id, t) in ids {
            let block = def.compress(&[("streamtype", t)]);
            let mut p = id.to_be_bytes().to_vec();
            p.extend_from_slice(&[0; 6]);
            p.extend_from_slice(&block);
            bytes.extend(control_frame(super::super::frame::SYN_STREAM, 0, &p));
        }
        let mut out: Vec<ClientFrame> = Vec::new();
        side.feed(&bytes, &mut out).expect("valid");
        s
    }

    #[test]
    fn frames_pass_and_output_is_read_by_stream_type_at_any_split() {
        let s = streams(&[(1, "error"), (3, "stdout"), (5, "stderr")]);
        let bytes = [
            control_frame(SYN_REPLY, 0, &[0, 0, 0, 1, 0x78, 0x9c]),
            control_frame(SYN_REPLY, 0, &[0, 0, 0, 3]),
            data_frame(3, false, b"out"),
            data_frame(5, false, &vec![b'e'; 70_000]),
            data_frame(1, true, b"{\"status\":\"Success\"}"),
        ]
        .concat();
        for split in [1, 5, 9, 4096, 1 << 20] {
            let mut side = ServerSide::new(s.clone(), true);
            let (mut out, mut events) = (Vec::new(), Vec::new());
            for piece in bytes.chunks(split) {
                side.feed(&Bytes::copy_from_slice(piece), &mut out, &mut events)
                    .expect("valid");
            }
            assert_eq!(out, bytes, "split {split}");
            let output: Vec<u8> = events
                .iter()
                .filter_map(|e| match e {
                    Recorded::Output(b) => Some(b.to_vec()),
                    _ => None,
                })
                .flatten()
                .collect();
            assert_eq!(output.len(), 3 + 70_000);
            assert_eq!(
                events.last(),
                Some(&Recorded::Error(Bytes::from_static(
                    b"{\"status\":\"Success\"}"
                )))
            );
            assert!(side.at_frame_boundary());
            assert_eq!(
                side.ending_frames(false, b"x", 0),
                goaway_frame(5),
                "error stream closed"
            );
        }
    }

    #[test]
    fn the_ending_goes_on_the_open_error_stream_then_goaway() {
        let s = streams(&[(1, "error"), (3, "stdin"), (5, "stdout")]);
        let mut side = ServerSide::new(s, false);
        let (mut out, mut ev) = (Vec::new(), Vec::new());
        side.feed(
            &Bytes::from(control_frame(SYN_REPLY, 0, &[0, 0, 0, 1])),
            &mut out,
            &mut ev,
        )
        .expect("valid");
        let mut want = data_frame(1, true, b"{}");
        want.extend(goaway_frame(5));
        assert_eq!(side.ending_frames(false, b"{}", 0), want);
        assert!(side.ending_frames(true, b"{}", 0).is_empty());
        // A refused stream is reset between the error stream's message and GOAWAY.
        let with_reset = side.ending_frames(false, b"{}", 7);
        let rst = rst_stream_frame(7, REFUSED_STREAM);
        assert!(
            with_reset.windows(rst.len()).any(|w| w == rst.as_slice())
                && with_reset.ends_with(&goaway_frame(side.streams.last())),
            "{with_reset:?}"
        );
        assert_eq!(side.notice_frame(b"hi"), None, "stdout is not accepted yet");
        side.feed(
            &Bytes::from(control_frame(SYN_REPLY, 0, &[0, 0, 0, 5])),
            &mut out,
            &mut ev,
        )
        .expect("valid");
        assert_eq!(side.notice_frame(b"hi"), Some(data_frame(5, false, b"hi")));
        assert!(ev.is_empty());
    }
}
