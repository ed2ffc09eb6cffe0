//! Property tests: for any split of a client's messages into frames (fragments, empty frames,
//! control frames between them, any mask) and any split of the bytes into reads, and for any
//! encoding of a SPDY stream's `streamtype` the kubelet reads as the same type, what the relay
//! moderates, what it records and what it forwards are one and the same: with the gate closed no
//! stdin reaches the upstream or the recording; with it open, all of it, in order, and exactly
//! what was recorded. And for any set of streams (SPDY) or messages (WebSocket) a client sends
//! and any request and session mode, the upstream receives only what they grant ([`Grants`]):
//! the first stream or message beyond it ends the session, and nothing from it on is forwarded.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use poddebug_stream::relay::{Controls, Meter, Recorder, relay};
use poddebug_stream::spdy::{self, ClientFrame, StreamType};
use poddebug_stream::websocket::frame::{
    OP_BINARY, OP_CONTINUATION, OP_PING, OP_TEXT, apply_mask, put_header,
};
use poddebug_stream::websocket::{self, ClientMessage};
use poddebug_stream::{
    AttachOptions, EndSignal, Gate, Grants, Negotiated, Recorded, TerminalSize, UpgradeKind,
};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};
use tokio::sync::watch;

struct NoMeter;

impl Meter for NoMeter {
    fn inbound(&self, _: usize) {}
    fn outbound(&self, _: usize) {}
    fn end(&self, _: &'static str) {}
}

#[derive(Default)]
struct Keep(Mutex<Vec<Recorded>>);

impl Recorder for Keep {
    async fn record(&self, events: Vec<Recorded>) {
        if let Ok(mut k) = self.0.lock() {
            k.extend(events);
        }
    }
}

/// One client message before framing.
#[derive(Clone, Debug)]
enum Sent {
    Stdin(Vec<u8>),
    Resize(u16, u16),
}

fn sent() -> impl Strategy<Value = Sent> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Sent::Stdin),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(w, h)| Sent::Resize(w, h)),
    ]
}

/// How one message is framed: cut points in its payload (fragments, possibly empty), a ping
/// after some fragments, and the mask keys.
#[derive(Clone, Debug)]
struct Framing {
    cuts: Vec<usize>,
    pings_after: Vec<bool>,
    keys: Vec<[u8; 4]>,
}

fn framing() -> impl Strategy<Value = Framing> {
    (
        proptest::collection::vec(0usize..300, 0..4),
        proptest::collection::vec(any::<bool>(), 5),
        proptest::collection::vec(any::<[u8; 4]>(), 10),
    )
        .prop_map(|(mut cuts, pings_after, keys)| {
            cuts.sort_unstable();
            Framing {
                cuts,
                pings_after,
                keys,
            }
        })
}

fn frame(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8], key: [u8; 4]) {
    put_header(out, fin, opcode, payload.len(), Some(key));
    let at = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[at..], key, 0);
}

/// The message's bytes on the wire for `protocol`, framed as `f` says.
fn wire(m: &Sent, f: &Framing, base64: bool) -> Vec<u8> {
    use base64::Engine;
    let (channel, data) = match m {
        Sent::Stdin(d) => (0u8, d.clone()),
        Sent::Resize(w, h) => (
            4u8,
            TerminalSize {
                width: *w,
                height: *h,
            }
            .to_json(),
        ),
    };
    let payload = if base64 {
        let mut p = vec![b'0' + channel];
        p.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(&data)
                .as_bytes(),
        );
        p
    } else {
        let mut p = vec![channel];
        p.extend_from_slice(&data);
        p
    };
    let mut cuts: Vec<usize> = f.cuts.iter().map(|c| (*c).min(payload.len())).collect();
    cuts.push(payload.len());
    let mut out = Vec::new();
    let mut start = 0;
    for (i, end) in cuts.iter().enumerate() {
        let last = i + 1 == cuts.len();
        let opcode = match (i, base64) {
            (0, true) => OP_TEXT,
            (0, false) => OP_BINARY,
            _ => OP_CONTINUATION,
        };
        frame(
            &mut out,
            last,
            opcode,
            &payload[start..*end],
            f.keys[i % f.keys.len()],
        );
        if !last && f.pings_after[i % f.pings_after.len()] {
            frame(
                &mut out,
                true,
                OP_PING,
                b"p",
                f.keys[(i + 3) % f.keys.len()],
            );
        }
        start = *end;
    }
    out
}

/// Run the relay over `client_bytes` (written in reads of `chunk`), the gate `open` or not;
/// what the upstream got (read as a server reads a client) and what was recorded.
fn run_relay(
    kind: UpgradeKind,
    protocol: &str,
    client_bytes: Vec<u8>,
    chunk: usize,
    open: bool,
) -> (Vec<u8>, Vec<Recorded>) {
    run_granted(kind, protocol, client_bytes, chunk, open, Grants::ALL).0
}

/// [`run_relay`] with `grants`; also the Status the client got on its error channel or stream,
/// if the server ended the session (its `code`).
fn run_granted(
    kind: UpgradeKind,
    protocol: &str,
    client_bytes: Vec<u8>,
    chunk: usize,
    open: bool,
    grants: Grants,
) -> ((Vec<u8>, Vec<Recorded>), Option<u16>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let (client, mut client_peer) = duplex(1 << 20);
        let (upstream, mut upstream_peer) = duplex(1 << 20);
        let (_drain_tx, drain) = watch::channel(false);
        let keep = Keep::default();
        let negotiated = Negotiated {
            kind,
            protocol: protocol.to_owned(),
        };
        let end = EndSignal::default();
        let controls = Controls {
            drain,
            end: end.clone(),
            grants,
            gate: Some(Arc::new(Gate::new(open))),
            idle_timeout: None,
        };
        let relay = relay(
            client,
            upstream,
            &negotiated,
            controls,
            &NoMeter,
            Some(&keep),
        );
        let peers = async {
            // A client's writes fail once the server has ended the session and closed the
            // connection (a refused stream or message); it then stops, as a real client does.
            let mut cut = false;
            for piece in client_bytes.chunks(chunk.max(1)) {
                if client_peer.write_all(piece).await.is_err() {
                    cut = true;
                    break;
                }
            }
            if !cut {
                client_peer.shutdown().await.expect("shutdown");
            }
            let mut got = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(10), upstream_peer.read_to_end(&mut got))
                    .await;
            drop(upstream_peer);
            // Drain whatever the relay wrote to the client (notices).
            let mut sink = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(10), client_peer.read_to_end(&mut sink))
                    .await;
            (got, cut)
        };
        let ((), (got, cut)) = tokio::join!(relay, peers);
        assert!(
            !cut || end.current().is_some(),
            "the client was cut off although the server did not end the session"
        );
        let recorded = keep.0.lock().map(|k| k.clone()).unwrap_or_default();
        ((got, recorded), end.current().map(|e| e.error.code()))
    })
}

/// The SPDY SYN_STREAM of stream `id` of type `kind`, its header block compressed in `z`.
fn syn_stream(z: &mut flate2::Compress, id: u32, headers: &[(String, String)]) -> Vec<u8> {
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let block = spdy::headers::encode_block(&pairs);
    let mut packed = Vec::with_capacity(block.len() + 1024);
    z.compress_vec(&block, &mut packed, flate2::FlushCompress::Sync)
        .expect("deflate");
    let mut payload = id.to_be_bytes().to_vec();
    payload.extend_from_slice(&[0; 6]);
    payload.extend_from_slice(&packed);
    spdy::frame::control_frame(spdy::frame::SYN_STREAM, 0, &payload)
}

fn spdy_compressor() -> flate2::Compress {
    let mut z = flate2::Compress::new(flate2::Compression::default(), true);
    z.set_dictionary(spdy::dictionary::dictionary())
        .expect("dictionary");
    z
}

const ALL_TYPES: [StreamType; 5] = [
    StreamType::Error,
    StreamType::Stdin,
    StreamType::Stdout,
    StreamType::Stderr,
    StreamType::Resize,
];

/// The grants of a request (`stdin`, `tty`) for a caller whose mode may type or not.
fn grants_of(stdin: bool, tty: bool, may_type: bool) -> Grants {
    let options = AttachOptions {
        container: "dbg".to_owned(),
        stdin,
        stdout: true,
        stderr: !tty,
        tty,
    };
    Grants::of(&options, may_type)
}

fn recorded_input(r: &[Recorded]) -> Vec<u8> {
    r.iter()
        .filter_map(|e| match e {
            Recorded::Input(b) => Some(b.to_vec()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn recorded_resizes(r: &[Recorded]) -> Vec<TerminalSize> {
    r.iter()
        .filter_map(|e| match e {
            Recorded::Resize(t) => Some(*t),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn websocket_moderation_recording_and_forwarding_agree(
        messages in proptest::collection::vec((sent(), framing()), 1..6),
        chunk in 1usize..64,
        open in any::<bool>(),
        protocol in prop_oneof![
            Just("v5.channel.k8s.io"),
            Just("v4.channel.k8s.io"),
            Just("v4.base64.channel.k8s.io"),
        ],
    ) {
        let base64 = protocol.contains("base64");
        let bytes: Vec<u8> = messages.iter().flat_map(|(m, f)| wire(m, f, base64)).collect();
        let (up, recorded) = run_relay(UpgradeKind::WebSocket, protocol, bytes, chunk, open);
        let mut side = websocket::ClientSide::new(protocol);
        let mut forwarded = Vec::new();
        side.feed(&up, &mut forwarded).expect("what poddebug forwards is a client's framing");
        let stdin: Vec<u8> = forwarded.iter().filter_map(|m| match m {
            ClientMessage::Stdin(b) => Some(b.to_vec()),
            _ => None,
        }).flatten().collect();
        let resizes: Vec<TerminalSize> = forwarded.iter().filter_map(|m| match m {
            ClientMessage::Resize(t) => Some(*t),
            _ => None,
        }).collect();
        let sent_stdin: Vec<u8> = messages.iter().filter_map(|(m, _)| match m {
            Sent::Stdin(d) => Some(d.clone()),
            _ => None,
        }).flatten().collect();
        let sent_resizes: Vec<TerminalSize> = messages.iter().filter_map(|(m, _)| match m {
            Sent::Resize(w, h) => Some(TerminalSize { width: *w, height: *h }),
            _ => None,
        }).collect();
        // Moderation: stdin passes only while open, whatever the framing.
        prop_assert_eq!(&stdin, &if open { sent_stdin } else { Vec::new() });
        // Recording: exactly what was forwarded.
        prop_assert_eq!(recorded_input(&recorded), stdin);
        // Resizes are not input: they pass either way, and are recorded as forwarded.
        prop_assert_eq!(&resizes, &sent_resizes);
        prop_assert_eq!(recorded_resizes(&recorded), resizes);
    }

    #[test]
    fn spdy_moderation_recording_and_forwarding_agree_for_any_stream_type_encoding(
        suffix in prop_oneof![Just(None), Just(Some(String::new())), "[a-z]{0,6}".prop_map(Some)],
        extra in proptest::collection::vec(("x-[a-z]{1,8}", "[ -~]{0,12}"), 0..3),
        level in 0u32..10,
        data in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..5),
        chunk in 1usize..64,
        open in any::<bool>(),
    ) {
        // The stdin stream's streamtype: "stdin", or "stdin\0..." (spdystream's encoding of
        // several values; the kubelet reads the first), with other headers in any order.
        let value = match &suffix {
            None => "stdin".to_owned(),
            Some(s) => format!("stdin\0{s}"),
        };
        let mut headers: Vec<(String, String)> = extra
            .iter()
            .filter(|(k, _)| k != "x-streamtype")
            .cloned()
            .collect();
        headers.sort();
        headers.dedup_by(|a, b| a.0 == b.0);
        headers.insert(headers.len() / 2, ("streamtype".to_owned(), value));
        let mut z = flate2::Compress::new(flate2::Compression::new(level), true);
        z.set_dictionary(spdy::dictionary::dictionary()).expect("dictionary");
        let mut syn = |id: u32, headers: &[(String, String)]| syn_stream(&mut z, id, headers);
        let mut bytes = syn(1, &[("streamtype".to_owned(), "error".to_owned())]);
        bytes.extend(syn(3, &headers));
        for d in &data {
            bytes.extend(spdy::frame::data_frame(3, false, d));
        }
        let (up, recorded) = run_relay(UpgradeKind::Spdy, "v4.channel.k8s.io", bytes, chunk, open);
        let mut side = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
        let mut forwarded = Vec::new();
        side.feed(&up, &mut forwarded).expect("what poddebug forwards is a client's framing");
        let kinds: Vec<StreamType> = forwarded.iter().filter_map(|f| match f {
            ClientFrame::Open { kind, .. } => Some(*kind),
            _ => None,
        }).collect();
        prop_assert_eq!(kinds, vec![StreamType::Error, StreamType::Stdin]);
        let stdin: Vec<u8> = forwarded.iter().filter_map(|f| match f {
            ClientFrame::Stdin { data, .. } => Some(data.to_vec()),
            _ => None,
        }).flatten().collect();
        let sent: Vec<u8> = data.concat();
        prop_assert_eq!(&stdin, &if open { sent } else { Vec::new() });
        prop_assert_eq!(recorded_input(&recorded), stdin);
        let on_stdin = forwarded
            .iter()
            .all(|f| !matches!(f, ClientFrame::Stdin { id, .. } if *id != 3));
        prop_assert!(on_stdin, "stdin goes on the stdin stream only");
    }
}

/// The streams a SPDY client opens: any of the five types, each at most once, in any order.
fn opened_streams() -> impl Strategy<Value = Vec<StreamType>> {
    proptest::sample::subsequence(ALL_TYPES.to_vec(), 0..=5).prop_shuffle()
}

/// One WebSocket message a client may send, granted or not.
#[derive(Clone, Debug)]
enum WsSent {
    Stdin(Vec<u8>),
    Resize(u16, u16),
    /// v5's close signal of a channel (0: stdin, 4: resize).
    Close(u8),
}

fn ws_sent() -> impl Strategy<Value = WsSent> {
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 1..100).prop_map(WsSent::Stdin),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(w, h)| WsSent::Resize(w, h)),
        1 => prop_oneof![Just(0u8), Just(4u8)].prop_map(WsSent::Close),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn spdy_upstream_receives_only_granted_streams_and_no_input_under_a_closed_gate(
        opened in opened_streams(),
        data in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..100), 0..4),
        stdin in any::<bool>(),
        tty in any::<bool>(),
        may_type in any::<bool>(),
        open in any::<bool>(),
        chunk in 1usize..64,
    ) {
        let grants = grants_of(stdin, tty, may_type);
        let mut z = spdy_compressor();
        let mut bytes = Vec::new();
        let id_of = |t: StreamType| opened.iter().position(|o| *o == t).map(|i| 2 * i as u32 + 1);
        for (i, t) in opened.iter().enumerate() {
            let h = [("streamtype".to_owned(), t.as_str().to_owned())];
            bytes.extend(syn_stream(&mut z, 2 * i as u32 + 1, &h));
        }
        if let Some(id) = id_of(StreamType::Stdin) {
            for d in &data {
                bytes.extend(spdy::frame::data_frame(id, false, d));
            }
        }
        if let Some(id) = id_of(StreamType::Resize) {
            bytes.extend(spdy::frame::data_frame(id, false, br#"{"Width":80,"Height":24}"#));
        }
        let ((up, recorded), ended) =
            run_granted(UpgradeKind::Spdy, "v4.channel.k8s.io", bytes, chunk, open, grants);
        let mut side = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
        let mut forwarded = Vec::new();
        side.feed(&up, &mut forwarded).expect("what poddebug forwards is a client's framing");
        let kinds: Vec<StreamType> = forwarded.iter().filter_map(|f| match f {
            ClientFrame::Open { kind, .. } => Some(*kind),
            _ => None,
        }).collect();
        let first_refused = opened.iter().position(|t| grants.refusal(*t).is_some());
        // The streams opened before the first one not granted, and no other.
        let expected = &opened[..first_refused.unwrap_or(opened.len())];
        prop_assert_eq!(&kinds, expected);
        prop_assert!(kinds.iter().all(|k| grants.refusal(*k).is_none()));
        prop_assert_eq!(ended, first_refused.map(|_| 403), "a refused stream ends the session with a 403");
        let forwarded_stdin: Vec<u8> = forwarded.iter().filter_map(|f| match f {
            ClientFrame::Stdin { data, .. } => Some(data.to_vec()),
            _ => None,
        }).flatten().collect();
        let passes = first_refused.is_none() && grants.stdin && open;
        let sent = if passes && id_of(StreamType::Stdin).is_some() { data.concat() } else { Vec::new() };
        prop_assert_eq!(&forwarded_stdin, &sent);
        prop_assert_eq!(recorded_input(&recorded), forwarded_stdin);
        let resized = forwarded.iter().any(|f| matches!(f, ClientFrame::Resize { .. }));
        prop_assert!(!resized || grants.resize);
    }

    #[test]
    fn websocket_upstream_receives_only_granted_messages_and_no_input_under_a_closed_gate(
        messages in proptest::collection::vec(ws_sent(), 1..8),
        stdin in any::<bool>(),
        tty in any::<bool>(),
        may_type in any::<bool>(),
        open in any::<bool>(),
        chunk in 1usize..64,
        key in any::<[u8; 4]>(),
    ) {
        let grants = grants_of(stdin, tty, may_type);
        let mut bytes = Vec::new();
        for m in &messages {
            let payload = match m {
                WsSent::Stdin(d) => [&[0u8][..], d].concat(),
                WsSent::Resize(w, h) => {
                    [&[4u8][..], &TerminalSize { width: *w, height: *h }.to_json()].concat()
                }
                WsSent::Close(c) => vec![255, *c],
            };
            frame(&mut bytes, true, OP_BINARY, &payload, key);
        }
        let protocol = "v5.channel.k8s.io";
        let ((up, recorded), ended) =
            run_granted(UpgradeKind::WebSocket, protocol, bytes, chunk, open, grants);
        let mut side = websocket::ClientSide::new(protocol);
        let mut forwarded = Vec::new();
        side.feed(&up, &mut forwarded).expect("what poddebug forwards is a client's framing");
        let refused = |m: &WsSent| match m {
            WsSent::Stdin(_) => !grants.stdin,
            WsSent::Resize(..) => !grants.resize,
            WsSent::Close(_) => false,
        };
        let first_refused = messages.iter().position(refused);
        prop_assert_eq!(ended, first_refused.map(|_| 403), "a refused message ends the session with a 403");
        let before = &messages[..first_refused.unwrap_or(messages.len())];
        let want_stdin: Vec<u8> = before.iter().filter_map(|m| match m {
            WsSent::Stdin(d) if grants.stdin && open => Some(d.clone()),
            _ => None,
        }).flatten().collect();
        let want_resizes: Vec<TerminalSize> = before.iter().filter_map(|m| match m {
            WsSent::Resize(w, h) => Some(TerminalSize { width: *w, height: *h }),
            _ => None,
        }).collect();
        let want_closes: Vec<u8> = before.iter().filter_map(|m| match m {
            WsSent::Close(0) if grants.stdin => Some(0),
            WsSent::Close(4) if grants.resize => Some(4),
            _ => None,
        }).collect();
        let got_stdin: Vec<u8> = forwarded.iter().filter_map(|m| match m {
            ClientMessage::Stdin(b) => Some(b.to_vec()),
            _ => None,
        }).flatten().collect();
        let got_resizes: Vec<TerminalSize> = forwarded.iter().filter_map(|m| match m {
            ClientMessage::Resize(t) => Some(*t),
            _ => None,
        }).collect();
        let got_closes: Vec<u8> = forwarded.iter().filter_map(|m| match m {
            ClientMessage::CloseChannel(c) => Some(*c),
            _ => None,
        }).collect();
        prop_assert_eq!(&got_stdin, &want_stdin);
        prop_assert_eq!(recorded_input(&recorded), got_stdin);
        prop_assert_eq!(got_resizes, want_resizes);
        prop_assert_eq!(got_closes, want_closes);
    }
}
