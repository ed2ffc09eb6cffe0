use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

use super::*;
use crate::channel::TerminalSize;
use crate::spdy::frame::{SYN_REPLY, control_frame, data_frame, goaway_frame};
use crate::spdy::headers::encode_block;
use crate::websocket::frame::{OP_BINARY, OP_CONTINUATION, OP_PING, apply_mask, frame, put_header};

/// Counts bytes and keeps the end reason.
#[derive(Default)]
struct TestMeter {
    bytes: Mutex<(usize, usize)>,
    end: Mutex<Option<&'static str>>,
}

impl Meter for TestMeter {
    fn inbound(&self, n: usize) {
        if let Ok(mut b) = self.bytes.lock() {
            b.0 += n;
        }
    }
    fn outbound(&self, n: usize) {
        if let Ok(mut b) = self.bytes.lock() {
            b.1 += n;
        }
    }
    fn end(&self, why: &'static str) {
        if let Ok(mut e) = self.end.lock() {
            e.get_or_insert(why);
        }
    }
}

/// Keeps what it is given.
#[derive(Default)]
struct Keep(Mutex<Vec<Recorded>>);

impl Recorder for Keep {
    async fn record(&self, events: Vec<Recorded>) {
        if let Ok(mut k) = self.0.lock() {
            k.extend(events);
        }
    }
}

impl Keep {
    fn input(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|k| {
                k.iter()
                    .filter_map(|e| match e {
                        Recorded::Input(b) => Some(b.to_vec()),
                        _ => None,
                    })
                    .flatten()
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn negotiated(kind: UpgradeKind, protocol: &str) -> Negotiated {
    Negotiated {
        kind,
        protocol: protocol.to_owned(),
    }
}

fn controls(drain: watch::Receiver<bool>, gate: Option<Arc<Gate>>) -> Controls {
    Controls {
        drain,
        end: EndSignal::default(),
        grants: Grants::ALL,
        gate,
        idle_timeout: None,
    }
}

fn masked(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let key = [0x5a, 0x11, 0x77, 0x03];
    let mut out = Vec::new();
    put_header(&mut out, fin, opcode, payload.len(), Some(key));
    let at = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[at..], key, 0);
    out
}

/// Everything the upstream peer received until the relay shut its write half, read as a server
/// reads a client (poddebug's own parser: it refuses what is not a client's framing).
async fn upstream_messages(peer: &mut DuplexStream, protocol: &str) -> Vec<ClientMessage> {
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut bytes)).await;
    let mut side = websocket::ClientSide::new(protocol);
    let mut out = Vec::new();
    side.feed(&bytes, &mut out)
        .expect("poddebug's frames are a client's");
    out
}

#[tokio::test]
async fn websocket_messages_are_re_encoded_both_ways() {
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (_tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let keep = Keep::default();
    let n = negotiated(UpgradeKind::WebSocket, "v5.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, None),
        &meter,
        Some(&keep),
    );
    let sent = [
        masked(OP_BINARY, false, b"\x00l"),
        masked(OP_PING, true, b"p"),
        masked(OP_CONTINUATION, true, b"s\n"),
        masked(OP_BINARY, true, b"\x04{\"width\":80,\"Height\":24,\"x\":1}"),
    ]
    .concat();
    let output = frame(OP_BINARY, b"\x01total 0\n");
    let peers = async {
        client_peer.write_all(&sent).await.expect("write");
        upstream_peer.write_all(&output).await.expect("write");
        let mut got = vec![0u8; output.len()];
        client_peer.read_exact(&mut got).await.expect("read");
        assert_eq!(got, output, "output frames reach the client as they were");
        client_peer.shutdown().await.expect("close");
        let up = upstream_messages(&mut upstream_peer, "v5.channel.k8s.io").await;
        drop(upstream_peer);
        up
    };
    let ((), up) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(relay, peers)
    })
    .await
    .expect("relay ends");
    assert_eq!(
        up,
        vec![
            ClientMessage::Ping(Bytes::from_static(b"p")),
            ClientMessage::Stdin(Bytes::from_static(b"ls\n")),
            ClientMessage::Resize(TerminalSize {
                width: 80,
                height: 24
            }),
        ]
    );
    assert_eq!(keep.input(), b"ls\n");
    let (bytes_in, bytes_out) = *meter.bytes.lock().expect("lock");
    assert_eq!((bytes_in, bytes_out), (sent.len(), output.len()));
}

#[tokio::test]
async fn moderated_stdin_is_withheld_however_it_is_framed_and_passes_once_open() {
    let gate = Arc::new(Gate::new(false));
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (_tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let keep = Keep::default();
    let n = negotiated(UpgradeKind::WebSocket, "v5.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, Some(gate.clone())),
        &meter,
        Some(&keep),
    );
    let peers = async {
        // One frame; fragments behind an empty first frame; fragments split at the channel.
        let early = [
            masked(OP_BINARY, true, b"\x00one\n"),
            masked(OP_BINARY, false, b""),
            masked(OP_CONTINUATION, false, b"\x00tw"),
            masked(OP_CONTINUATION, true, b"o\n"),
            masked(OP_BINARY, false, b"\x00"),
            masked(OP_CONTINUATION, true, b"three\n"),
        ]
        .concat();
        for piece in early.chunks(3) {
            client_peer.write_all(piece).await.expect("write");
        }
        let withheld = channel_message(STDOUT, WITHHELD_NOTICE.as_bytes(), false);
        let mut got = vec![0u8; withheld.len()];
        client_peer.read_exact(&mut got).await.expect("read");
        assert_eq!(got, withheld, "the client is told its input is withheld");
        // Input sent before the gate opened is gone for good; what follows passes.
        client_peer
            .write_all(&masked(OP_BINARY, true, b"\x04{\"Width\":1,\"Height\":2}"))
            .await
            .expect("write");
        // The resize (not input) passes while the gate is closed: wait for it upstream.
        let resize = {
            let mut b = vec![0u8; 64];
            let n = upstream_peer.read(&mut b).await.expect("read");
            b.truncate(n);
            b
        };
        gate.set(true);
        let passing = channel_message(STDOUT, PASSING_NOTICE.as_bytes(), false);
        let mut got = vec![0u8; passing.len()];
        client_peer.read_exact(&mut got).await.expect("read");
        assert_eq!(got, passing);
        client_peer
            .write_all(
                &[
                    masked(OP_BINARY, false, b""),
                    masked(OP_CONTINUATION, true, b"\x00four\n"),
                ]
                .concat(),
            )
            .await
            .expect("write");
        client_peer.shutdown().await.expect("close");
        let mut rest = upstream_messages(&mut upstream_peer, "v5.channel.k8s.io").await;
        let mut side = websocket::ClientSide::new("v5.channel.k8s.io");
        let mut first = Vec::new();
        side.feed(&resize, &mut first).expect("a client's frames");
        first.append(&mut rest);
        first
    };
    let ((), up) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(relay, peers)
    })
    .await
    .expect("relay ends");
    assert_eq!(
        up,
        vec![
            ClientMessage::Resize(TerminalSize {
                width: 1,
                height: 2
            }),
            ClientMessage::Stdin(Bytes::from_static(b"four\n")),
        ],
        "only input sent while a moderator was attached reached the container"
    );
    assert_eq!(
        keep.input(),
        b"four\n",
        "what is recorded is what was forwarded"
    );
}

#[tokio::test]
async fn a_client_breaking_the_protocol_gets_a_status_and_nothing_more_is_forwarded() {
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (_tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let n = negotiated(UpgradeKind::WebSocket, "v4.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, None),
        &meter,
        None::<&NoRecorder>,
    );
    let peers = async {
        let bytes = [
            masked(OP_BINARY, true, b"\x00ok\n"),
            masked(OP_BINARY, true, b"\x02to stderr?"),
            masked(OP_BINARY, true, b"\x00never\n"),
        ]
        .concat();
        client_peer.write_all(&bytes).await.expect("write");
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client_peer.read_to_end(&mut got))
            .await
            .expect("the client sees the end")
            .expect("read");
        let up = upstream_messages(&mut upstream_peer, "v4.channel.k8s.io").await;
        (got, up)
    };
    let ((), (got, up)) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(relay, peers)
    })
    .await
    .expect("relay ends");
    assert_eq!(up, vec![ClientMessage::Stdin(Bytes::from_static(b"ok\n"))]);
    assert_eq!(got[0], 0x82, "an error-channel message");
    let (len, at) = match got[1] {
        126 => (usize::from(u16::from_be_bytes([got[2], got[3]])), 4),
        n => (usize::from(n), 2),
    };
    assert_eq!(got[at], 3);
    let status: serde_json::Value =
        serde_json::from_slice(&got[at + 1..at + len]).expect("a Status");
    assert_eq!(status["code"], 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("channel 2")),
        "{status}"
    );
    assert_eq!(got[at + len], 0x88, "then a close frame");
    assert_eq!(
        *meter.end.lock().expect("lock"),
        Some("client protocol violation")
    );
}

#[tokio::test]
async fn drain_ends_a_websocket_stream_at_a_message_boundary() {
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let n = negotiated(UpgradeKind::WebSocket, "v5.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, None),
        &meter,
        None::<&NoRecorder>,
    );
    let peers = async {
        // Half a frame: the header says 4 payload bytes, only 2 are sent before the drain.
        upstream_peer
            .write_all(&[0x82, 4, 1, b'a'])
            .await
            .expect("write");
        let mut first = [0u8; 4];
        client_peer.read_exact(&mut first).await.expect("read");
        tx.send(true).expect("drain");
        upstream_peer
            .write_all(&[b'b', b'c', 0x82, 2, 1, b'z'])
            .await
            .expect("write");
        let mut got = first.to_vec();
        tokio::time::timeout(Duration::from_secs(3), client_peer.read_to_end(&mut got))
            .await
            .expect("the client sees the end")
            .expect("read");
        got
    };
    let ((), got) =
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(relay, peers) })
            .await
            .expect("relay ends");
    assert_eq!(&got[..6], &[0x82, 4, 1, b'a', b'b', b'c']);
    let rest = &got[6..];
    assert_eq!(rest[0], 0x82, "an error-channel message follows the frame");
    let (len, at) = match rest[1] {
        126 => (usize::from(u16::from_be_bytes([rest[2], rest[3]])), 4),
        n => (usize::from(n), 2),
    };
    assert_eq!(rest[at], 3);
    let status: serde_json::Value =
        serde_json::from_slice(&rest[at + 1..at + len]).expect("a Status");
    assert_eq!(status["message"], crate::ending::SHUTDOWN_MESSAGE);
    let close = &rest[at + len..];
    assert_eq!(close[0], 0x88);
    assert_eq!(&close[2..4], &1001u16.to_be_bytes());
}

/// A client's SYN_STREAM with the raw header block `block` (compressed in `z`).
fn syn(z: &mut flate2::Compress, id: u32, block: &[u8]) -> Vec<u8> {
    let mut packed = Vec::with_capacity(block.len() + 1024);
    z.compress_vec(block, &mut packed, flate2::FlushCompress::Sync)
        .expect("deflate");
    let mut payload = id.to_be_bytes().to_vec();
    payload.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    payload.extend_from_slice(&packed);
    control_frame(crate::spdy::frame::SYN_STREAM, 0, &payload)
}

fn client_deflater() -> flate2::Compress {
    let mut z = flate2::Compress::new(flate2::Compression::default(), true);
    z.set_dictionary(crate::spdy::dictionary::dictionary())
        .expect("dictionary");
    z
}

/// Everything the upstream peer received, read as the kubelet reads a client.
async fn upstream_frames(peer: &mut DuplexStream) -> Vec<spdy::ClientFrame> {
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut bytes)).await;
    let mut side = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
    let mut out = Vec::new();
    side.feed(&bytes, &mut out)
        .expect("poddebug's frames are a client's");
    out
}

#[tokio::test]
async fn spdy_stdin_declared_with_a_trailing_empty_value_is_moderated_as_stdin() {
    let gate = Arc::new(Gate::new(false));
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (_tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let keep = Keep::default();
    let n = negotiated(UpgradeKind::Spdy, "v4.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, Some(gate.clone())),
        &meter,
        Some(&keep),
    );
    let peers = async {
        let mut z = client_deflater();
        let opens = [
            syn(&mut z, 1, &encode_block(&[("streamtype", "error")])),
            syn(
                &mut z,
                3,
                &encode_block(&[("streamtype", "stdin\0"), ("requestid", "0")]),
            ),
            syn(&mut z, 5, &encode_block(&[("streamtype", "stdout")])),
        ]
        .concat();
        client_peer.write_all(&opens).await.expect("write");
        // The upstream reads the three streams and accepts stdout: the withheld notice goes
        // there.
        let mut read = 0;
        let mut buf = [0u8; 4096];
        let mut up = spdy::ClientSide::new(Arc::new(spdy::Streams::default()));
        let mut frames = Vec::new();
        while frames.len() < 3 && read < 4096 {
            let n = upstream_peer.read(&mut buf).await.expect("read");
            read += n.max(1);
            up.feed(&buf[..n], &mut frames).expect("a client's frames");
        }
        upstream_peer
            .write_all(&control_frame(SYN_REPLY, 0, &[0, 0, 0, 5]))
            .await
            .expect("write");
        client_peer
            .write_all(&data_frame(3, false, b"id\n"))
            .await
            .expect("write");
        let reply = control_frame(SYN_REPLY, 0, &[0, 0, 0, 5]);
        let notice = data_frame(5, false, WITHHELD_NOTICE.as_bytes());
        let mut got = vec![0u8; reply.len() + notice.len()];
        client_peer.read_exact(&mut got).await.expect("read");
        assert_eq!(got, [reply, notice].concat());
        gate.set(true);
        let passing = data_frame(5, false, PASSING_NOTICE.as_bytes());
        let mut got = vec![0u8; passing.len()];
        client_peer.read_exact(&mut got).await.expect("read");
        assert_eq!(got, passing);
        client_peer
            .write_all(&data_frame(3, true, b"whoami\n"))
            .await
            .expect("write");
        client_peer.shutdown().await.expect("close");
        let mut bytes = Vec::new();
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            upstream_peer.read_to_end(&mut bytes),
        )
        .await;
        up.feed(&bytes, &mut frames).expect("a client's frames");
        frames
    };
    let ((), up) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(relay, peers)
    })
    .await
    .expect("relay ends");
    let kinds: Vec<_> = up
        .iter()
        .filter_map(|f| match f {
            spdy::ClientFrame::Open { id, kind, .. } => Some((*id, *kind)),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (1, spdy::StreamType::Error),
            (3, spdy::StreamType::Stdin),
            (5, spdy::StreamType::Stdout)
        ]
    );
    let stdin: Vec<_> = up
        .iter()
        .filter_map(|f| match f {
            spdy::ClientFrame::Stdin { data, .. } => Some(data.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(stdin, vec![Bytes::from_static(b"whoami\n")]);
    assert_eq!(keep.input(), b"whoami\n");
}

#[tokio::test]
async fn spdy_streams_of_an_unknown_type_end_the_session_unforwarded() {
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (_tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let n = negotiated(UpgradeKind::Spdy, "v4.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, None),
        &meter,
        None::<&NoRecorder>,
    );
    let peers = async {
        let mut z = client_deflater();
        client_peer
            .write_all(&syn(&mut z, 1, &encode_block(&[("streamtype", "error")])))
            .await
            .expect("write");
        // The upstream replies once it has the stream, as the kubelet does.
        let mut head = vec![0u8; 8];
        upstream_peer.read_exact(&mut head).await.expect("read");
        let mut rest = vec![0u8; usize::from(head[7])];
        upstream_peer.read_exact(&mut rest).await.expect("read");
        upstream_peer
            .write_all(&control_frame(SYN_REPLY, 0, &[0, 0, 0, 1]))
            .await
            .expect("write");
        let mut reply = vec![0u8; 12];
        client_peer.read_exact(&mut reply).await.expect("read");
        client_peer
            .write_all(
                &[
                    syn(&mut z, 3, &encode_block(&[("streamtype", "stdinx")])),
                    data_frame(3, false, b"id\n"),
                ]
                .concat(),
            )
            .await
            .expect("write");
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client_peer.read_to_end(&mut got))
            .await
            .expect("the client sees the end")
            .expect("read");
        (got, upstream_frames(&mut upstream_peer).await)
    };
    let ((), (got, up)) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(relay, peers)
    })
    .await
    .expect("relay ends");
    assert!(
        up.is_empty(),
        "nothing after the error stream reached the upstream: {up:?}"
    );
    let ending = Ending::refused(
        "a SPDY stream of type \"stdinx\", which is not error, stdin, stdout, stderr or resize",
    );
    let mut want = data_frame(1, true, &ending.payload(true));
    want.extend(goaway_frame(1));
    assert_eq!(got, want);
}

#[tokio::test]
async fn drain_ends_a_spdy_stream_on_its_error_stream_then_goaway() {
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let n = negotiated(UpgradeKind::Spdy, "v4.channel.k8s.io");
    let relay = relay(
        client,
        upstream,
        &n,
        controls(rx, None),
        &meter,
        None::<&NoRecorder>,
    );
    let peers = async {
        let mut z = client_deflater();
        client_peer
            .write_all(&syn(&mut z, 1, &encode_block(&[("streamtype", "error")])))
            .await
            .expect("write");
        let mut up = vec![0u8; 8];
        upstream_peer.read_exact(&mut up).await.expect("read");
        let mut rest = vec![0u8; usize::from(up[7])];
        upstream_peer.read_exact(&mut rest).await.expect("read");
        upstream_peer
            .write_all(&control_frame(SYN_REPLY, 0, &[0, 0, 0, 1]))
            .await
            .expect("write");
        let mut reply = vec![0u8; 12];
        client_peer.read_exact(&mut reply).await.expect("read");
        tx.send(true).expect("drain");
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(3), client_peer.read_to_end(&mut got))
            .await
            .expect("the client sees the end")
            .expect("read");
        got
    };
    let ((), got) =
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(relay, peers) })
            .await
            .expect("relay ends");
    let mut expected = data_frame(1, true, &Ending::shutdown().payload(true));
    expected.extend(goaway_frame(1));
    assert_eq!(got, expected);
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_is_ended_and_pings_do_not_keep_it_alive() {
    let (client, mut client_peer) = duplex(1 << 16);
    let (upstream, mut upstream_peer) = duplex(1 << 16);
    let (_tx, rx) = watch::channel(false);
    let meter = TestMeter::default();
    let n = negotiated(UpgradeKind::WebSocket, "v5.channel.k8s.io");
    let mut c = controls(rx, None);
    c.idle_timeout = Some(Duration::from_secs(60));
    let relay = relay(client, upstream, &n, c, &meter, None::<&NoRecorder>);
    let peers = async {
        // Data at 30 s moves the deadline to 90 s; pings at 60 s and 80 s do not.
        tokio::time::sleep(Duration::from_secs(30)).await;
        client_peer
            .write_all(&masked(OP_BINARY, true, b"\x00x"))
            .await
            .expect("write");
        for at in [30, 20] {
            tokio::time::sleep(Duration::from_secs(at)).await;
            client_peer
                .write_all(&masked(OP_PING, true, b""))
                .await
                .expect("write");
        }
        let started = tokio::time::Instant::now();
        let mut got = Vec::new();
        client_peer.read_to_end(&mut got).await.expect("read");
        let mut sink = Vec::new();
        let _ = upstream_peer.read_to_end(&mut sink).await;
        (got, started.elapsed())
    };
    let ((), (got, waited)) = tokio::join!(relay, peers);
    assert!(
        waited >= Duration::from_secs(9) && waited <= Duration::from_secs(11),
        "ended 90 s after the last data: {waited:?}"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("idle for 60s"), "{text:?}");
    assert_eq!(*meter.end.lock().expect("lock"), Some("idle timeout"));
}

#[tokio::test]
async fn buffers_grow_and_shrink() {
    let big = vec![7u8; MAX_BUF * 2];
    let mut src: &[u8] = &big;
    let mut b = AdaptiveBuf::new();
    let mut sizes = Vec::new();
    for _ in 0..3 {
        sizes.push(b.read_from(&mut src, MAX_BUF).await.expect("read").len());
    }
    assert_eq!(
        sizes,
        [SMALL_BUF, SMALL_BUF * 4, (SMALL_BUF * 16).min(MAX_BUF)]
    );
    let mut small: &[u8] = &[1; 10];
    let chunk = b.read_from(&mut small, MAX_BUF).await.expect("read");
    assert_eq!(&chunk[..], &[1; 10]);
    assert_eq!(b.cap, SMALL_BUF);
    assert!(
        b.data.capacity() < SMALL_BUF * 4,
        "the large room was given back"
    );
}
