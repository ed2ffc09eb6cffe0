//! The attach relay's parsers (`poddebug-stream`): what they make of a byte stream must not
//! depend on how it was split into reads, and what poddebug forwards must be what it parsed.
//!
//! - The client sides (the termination of the client's protocol): the same messages, or the
//!   same refusal, for any split; the frames poddebug encodes for them read back as the same
//!   messages (forwarding is the parsed message, re-encoded).
//! - The upstream sides: the same bytes to the client and the same recorded output for any
//!   split; what reaches the client is exactly the frames that were read.

use std::sync::Arc;

use bytes::Bytes;
use poddebug_stream::channel::Recorded;
use poddebug_stream::spdy::{self, ClientFrame};
use poddebug_stream::websocket::{self, ClientMessage};

/// Read sizes taken from the input itself.
fn chunk_sizes(input: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let seed = input.first().copied().unwrap_or(1);
    input.iter().cycle().scan(seed, |acc, &b| {
        *acc = acc.wrapping_mul(31).wrapping_add(b);
        Some(usize::from(*acc % 13) + 1)
    })
}

/// The three ways a stream is fed: whole, in pseudo-random chunks, a byte at a time.
fn splits(input: &[u8]) -> [Vec<usize>; 3] {
    let n = input.len();
    [
        vec![n.max(1)],
        chunk_sizes(input).take(n + 1).collect(),
        vec![1; n.max(1)],
    ]
}

fn feed_split<T>(
    input: &[u8],
    sizes: &[usize],
    mut feed: impl FnMut(&[u8], &mut Vec<T>) -> Result<(), String>,
) -> (Vec<T>, Option<String>) {
    let mut out = Vec::new();
    let mut rest = input;
    for &n in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let n = n.max(1).min(rest.len());
        if let Err(e) = feed(&rest[..n], &mut out) {
            return (out, Some(e));
        }
        rest = &rest[n..];
    }
    (out, None)
}

/// The subprotocol the first byte picks.
fn protocol(selector: u8) -> &'static str {
    [
        "v5.channel.k8s.io",
        "v4.channel.k8s.io",
        "v4.base64.channel.k8s.io",
        "channel.k8s.io",
    ][usize::from(selector % 4)]
}

/// A WebSocket client's bytes (after a selector byte).
pub fn websocket_client(input: &[u8]) {
    let Some((&sel, stream)) = input.split_first() else {
        return;
    };
    let p = protocol(sel);
    let results: Vec<_> = splits(stream)
        .iter()
        .map(|sizes| {
            let mut side = websocket::ClientSide::new(p);
            feed_split(stream, sizes, |d, out: &mut Vec<ClientMessage>| {
                side.feed(d, out).map_err(|e| e.0)
            })
        })
        .collect();
    assert_eq!(results[0], results[1], "chunked feed differs");
    assert_eq!(results[0], results[2], "byte-at-a-time feed differs");
    let (messages, _) = &results[0];
    let encoder = websocket::ClientSide::new(p);
    let mut up = Vec::new();
    for m in messages {
        encoder.encode(m, &mut up);
    }
    let mut reread = websocket::ClientSide::new(p);
    let mut back = Vec::new();
    reread
        .feed(&up, &mut back)
        .expect("poddebug's own frames are refused by its own parser");
    assert_eq!(
        &back, messages,
        "forwarded messages differ from the parsed ones"
    );
}

/// A SPDY client's bytes.
pub fn spdy_client(input: &[u8]) {
    let results: Vec<_> = splits(input)
        .iter()
        .map(|sizes| {
            let mut side = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
            feed_split(input, sizes, |d, out: &mut Vec<ClientFrame>| {
                side.feed(d, out).map_err(|e| e.0)
            })
        })
        .collect();
    assert_eq!(results[0], results[1], "chunked feed differs");
    assert_eq!(results[0], results[2], "byte-at-a-time feed differs");
    let (frames, _) = &results[0];
    let mut encoder = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
    let mut up = Vec::new();
    for f in frames {
        encoder.encode(f, &mut up);
    }
    let mut reread = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
    let mut back = Vec::new();
    reread
        .feed(&up, &mut back)
        .expect("poddebug's own frames are refused by its own parser");
    assert_eq!(
        &back, frames,
        "forwarded frames differ from the parsed ones"
    );
}

/// What an upstream side made of a stream: bytes to the client, recorded output, refusal.
type Followed = (Vec<u8>, Vec<Recorded>, Option<String>);

fn follow(
    input: &[u8],
    sizes: &[usize],
    mut feed: impl FnMut(&Bytes, &mut Vec<u8>, &mut Vec<Recorded>) -> Result<(), String>,
) -> Followed {
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let mut rest = input;
    for &n in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let n = n.max(1).min(rest.len());
        if let Err(e) = feed(&Bytes::copy_from_slice(&rest[..n]), &mut out, &mut events) {
            return (out, events, Some(e));
        }
        rest = &rest[n..];
    }
    (out, events, None)
}

/// Merge adjacent output pieces (reads split them differently).
fn joined(events: &[Recorded]) -> Vec<Recorded> {
    let mut out: Vec<Recorded> = Vec::new();
    for e in events {
        match (out.last_mut(), e) {
            (Some(Recorded::Output(a)), Recorded::Output(b)) => {
                *a = Bytes::from([&a[..], &b[..]].concat());
            }
            _ => out.push(e.clone()),
        }
    }
    out
}

fn check_followed(input: &[u8], results: &[Followed]) {
    for r in &results[1..] {
        let (out, events, err) = r;
        assert_eq!(
            err.is_some(),
            results[0].2.is_some(),
            "refusal differs by split"
        );
        if err.is_none() {
            assert_eq!(out, &results[0].0, "bytes to the client differ by split");
            assert_eq!(
                joined(events),
                joined(&results[0].1),
                "recorded output differs"
            );
        }
    }
    // What reaches the client is the frames read, as they were (a control frame goes once it
    // is whole, so a stream cut inside one is a prefix).
    assert!(
        input.starts_with(&results[0].0),
        "the bytes to the client are not the frames read"
    );
}

/// An upstream's WebSocket bytes (after a selector byte).
pub fn websocket_server(input: &[u8]) {
    let Some((&sel, stream)) = input.split_first() else {
        return;
    };
    let p = protocol(sel);
    let results: Vec<Followed> = splits(stream)
        .iter()
        .map(|sizes| {
            let mut side = websocket::ServerSide::new(p, true);
            follow(stream, sizes, |c, o, e| side.feed(c, o, e).map_err(|e| e.0))
        })
        .collect();
    check_followed(stream, &results);
}

/// An upstream's SPDY bytes, after the client opened the five streams.
pub fn spdy_server(input: &[u8]) {
    let streams = || {
        let s = Arc::new(spdy::Streams::default());
        let mut client = spdy::ClientSide::new(s.clone());
        let mut opens = Vec::new();
        let mut def = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
        for (id, kind) in [
            (1, spdy::StreamType::Error),
            (3, spdy::StreamType::Stdin),
            (5, spdy::StreamType::Stdout),
            (7, spdy::StreamType::Stderr),
            (9, spdy::StreamType::Resize),
        ] {
            def.encode(
                &ClientFrame::Open {
                    id,
                    kind,
                    flags: 0,
                    priority: 0,
                },
                &mut opens,
            );
        }
        let mut parsed = Vec::new();
        client
            .feed(&opens, &mut parsed)
            .expect("the five streams open");
        s
    };
    let results: Vec<Followed> = splits(input)
        .iter()
        .map(|sizes| {
            let mut side = spdy::ServerSide::new(streams(), true);
            follow(input, sizes, |c, o, e| side.feed(c, o, e).map_err(|e| e.0))
        })
        .collect();
    check_followed(input, &results);
}

fn ws_frame(b0: u8, mask: Option<[u8; 4]>, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    websocket::frame::put_header(&mut f, b0 & 0x80 != 0, b0 & 0x0f, payload.len(), mask);
    let at = f.len();
    f.extend_from_slice(payload);
    if let Some(k) = mask {
        websocket::frame::apply_mask(&mut f[at..], k, 0);
    }
    f
}

/// Client messages: stdin whole and in fragments (one behind an empty first frame), a resize,
/// a ping between fragments, base64 messages, the v5 close signal, a close.
pub fn websocket_client_seeds() -> Vec<Vec<u8>> {
    let k = Some([1, 2, 3, 4]);
    vec![
        [
            vec![0],
            ws_frame(0x82, k, b"\x00ls\n"),
            ws_frame(0x82, k, b"\x04{\"Width\":80,\"Height\":24}"),
        ]
        .concat(),
        [
            vec![0],
            ws_frame(0x02, k, b""),
            ws_frame(0x89, k, b"p"),
            ws_frame(0x00, k, b"\x00i"),
            ws_frame(0x80, k, b"d\n"),
            ws_frame(0x82, k, b"\xff\x00"),
            ws_frame(0x88, k, b"\x03\xe8bye"),
        ]
        .concat(),
        [
            vec![2],
            ws_frame(0x81, k, b"0bHMK"),
            ws_frame(0x81, k, b"4eyJXaWR0aCI6MTAsIkhlaWdodCI6NX0="),
        ]
        .concat(),
        [vec![1], ws_frame(0x82, None, b"\x00unmasked")].concat(),
    ]
}

/// Upstream frames: output on both channels, a fragmented message with a ping inside, the error
/// channel's Status, base64 output, a close.
pub fn websocket_server_seeds() -> Vec<Vec<u8>> {
    vec![
        [
            vec![0],
            ws_frame(0x82, None, b"\x01hello"),
            ws_frame(0x02, None, b"\x02par"),
            ws_frame(0x89, None, b""),
            ws_frame(0x80, None, b"t"),
            ws_frame(0x82, None, b"\x03{\"status\":\"Success\"}"),
            ws_frame(0x88, None, b"\x03\xe8"),
        ]
        .concat(),
        [
            vec![2],
            ws_frame(0x81, None, b"1aGk="),
            ws_frame(0x81, None, &[b'x'; 300]),
        ]
        .concat(),
    ]
}

fn client_frames(frames: &[ClientFrame]) -> Vec<u8> {
    let mut side = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
    let mut out = Vec::new();
    for f in frames {
        side.encode(f, &mut out);
    }
    out
}

/// A client's streams opened, stdin, resizes, a half-close, control frames; a raw SYN_STREAM
/// whose stream type carries a trailing NUL; one of an unknown type.
pub fn spdy_client_seeds() -> Vec<Vec<u8>> {
    let open = |id, kind| ClientFrame::Open {
        id,
        kind,
        flags: 0,
        priority: 0,
    };
    let raw_syn = |value: &str| {
        let mut z = flate2::Compress::new(flate2::Compression::default(), true);
        let _ = z.set_dictionary(spdy::dictionary::dictionary());
        let block = spdy::headers::encode_block(&[("streamtype", value)]);
        let mut packed = Vec::with_capacity(block.len() + 1024);
        let _ = z.compress_vec(&block, &mut packed, flate2::FlushCompress::Sync);
        let mut p = 1u32.to_be_bytes().to_vec();
        p.extend_from_slice(&[0; 6]);
        p.extend_from_slice(&packed);
        spdy::frame::control_frame(spdy::frame::SYN_STREAM, 0, &p)
    };
    vec![
        client_frames(&[
            open(1, spdy::StreamType::Error),
            open(3, spdy::StreamType::Stdin),
            open(5, spdy::StreamType::Resize),
            ClientFrame::Stdin {
                id: 3,
                data: Bytes::from_static(b"ls\n"),
                fin: false,
            },
            ClientFrame::Resize {
                id: 5,
                sizes: vec![poddebug_stream::TerminalSize {
                    width: 80,
                    height: 24,
                }],
                fin: false,
            },
            ClientFrame::Stdin {
                id: 3,
                data: Bytes::new(),
                fin: true,
            },
            ClientFrame::Ping(1),
            ClientFrame::GoAway { last: 0, status: 0 },
        ]),
        raw_syn("stdin\0"),
        raw_syn("stdinx"),
    ]
}

/// Upstream frames: replies, output on two streams, the error stream's Status with FIN,
/// RST_STREAM, GOAWAY.
pub fn spdy_server_seeds() -> Vec<Vec<u8>> {
    use spdy::frame::{SYN_REPLY, control_frame, data_frame, goaway_frame, rst_stream_frame};
    vec![
        [
            control_frame(SYN_REPLY, 0, &[0, 0, 0, 1, 0x78, 0x9c]),
            data_frame(5, false, b"out"),
            data_frame(7, false, b"err"),
            data_frame(1, true, b"{\"status\":\"Success\"}"),
            rst_stream_frame(3, 5),
            goaway_frame(9),
        ]
        .concat(),
        data_frame(5, false, &[0; 100]),
    ]
}
