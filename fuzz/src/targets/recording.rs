//! The recording decoder runs on the relay's task (the tap decodes each chunk as it passes),
//! so it must never panic on any bytes, and what it decodes must not depend on how the bytes
//! were split into reads.

use poddebug_apiserver::recording::decode::{Decoder, Direction, Event};

/// What a decoder made of a byte stream: output, input, resizes and error messages in order,
/// and whether it gave up.
#[derive(Debug, Default, PartialEq, Eq)]
struct Decoded {
    output: Vec<u8>,
    input: Vec<u8>,
    others: Vec<String>,
    failed: bool,
}

/// The decoder the first byte picks: WebSocket (plain or base64, stdin recorded or skipped) or
/// SPDY, and the direction the rest of the bytes go.
fn decoder(selector: u8) -> (Decoder, Direction) {
    let decoder = match selector % 5 {
        0 => Decoder::websocket(false, true),
        1 => Decoder::websocket(false, false),
        2 => Decoder::websocket(true, true),
        3 => Decoder::websocket(true, false),
        _ => Decoder::spdy(),
    };
    let dir = if selector & 0x80 == 0 {
        Direction::In
    } else {
        Direction::Out
    };
    (decoder, dir)
}

fn decode(selector: u8, stream: &[u8], sizes: &mut dyn Iterator<Item = usize>) -> Decoded {
    let (mut d, dir) = decoder(selector);
    let mut got = Decoded::default();
    let mut rest = stream;
    while !rest.is_empty() && !got.failed {
        let n = sizes.next().unwrap_or(1).max(1).min(rest.len());
        let r = d.feed(dir, &rest[..n], &mut |e| match e {
            Event::Output(b) => got.output.extend_from_slice(b),
            Event::Input(b) => got.input.extend_from_slice(b),
            other => got.others.push(format!("{other:?}")),
        });
        got.failed = r.is_err();
        rest = &rest[n..];
    }
    got
}

/// Decode whole and in pseudo-random reads: no panic, and the same result both ways when
/// neither gave up.
pub fn run(input: &[u8]) {
    let Some((&selector, stream)) = input.split_first() else {
        return;
    };
    let whole = decode(selector, stream, &mut std::iter::once(stream.len()));
    let mut seed = selector;
    let mut sizes = std::iter::from_fn(move || {
        seed = seed.wrapping_mul(31).wrapping_add(7);
        Some(usize::from(seed % 11) + 1)
    });
    let chunked = decode(selector, stream, &mut sizes);
    if !whole.failed && !chunked.failed {
        assert_eq!(whole, chunked, "the split changed what was decoded");
    }
}

/// Output, masked stdin, a resize and a Status over WebSocket; base64 text; SPDY frames.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut masked = vec![0x00, 0x82, 0x80 | 4, 1, 2, 3, 4];
    masked.extend(
        b"\x00abc"
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ [1, 2, 3, 4][i % 4]),
    );
    vec![
        [&[0x80u8, 0x82, 6][..], b"\x01hello"].concat(),
        [&[0x80u8, 0x82, 4][..], b"\x03{}\n"].concat(),
        masked,
        [&[0x01u8, 0x82, 27][..], b"\x04{\"Width\":80,\"Height\":24}"].concat(),
        [&[0x82u8, 0x81, 9][..], b"1aGVsbG8="].concat(),
        vec![0x84, 0, 0, 0, 1, 0, 0, 0, 3, b'o', b'u', b't'],
        vec![
            0x04, 0x80, 3, 0, 1, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
        ],
    ]
}
