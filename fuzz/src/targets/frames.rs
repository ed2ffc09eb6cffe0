//! The stream frame trackers: they follow frame boundaries of relayed bytes, so they must give
//! the same answer however the bytes were split into reads.

use poddebug_apiserver::stream::spdy_frames::{self, Event};
use poddebug_apiserver::stream::websocket_frames::{self, FrameTracker as WsTracker};

/// Split points taken from the input itself: the first byte seeds the read sizes.
fn chunk_sizes(input: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let seed = input.first().copied().unwrap_or(1);
    input.iter().cycle().scan(seed, |acc, &b| {
        *acc = acc.wrapping_mul(31).wrapping_add(b);
        Some(usize::from(*acc % 13) + 1)
    })
}

/// Feed the bytes whole, in pseudo-random chunks, and in reads of at most `wanted()` bytes (as
/// the relay reads them): the three trackers must end in the same state.
pub fn websocket(input: &[u8]) {
    let mut whole = WsTracker::default();
    whole.consume(input);

    let mut chunked = WsTracker::default();
    let mut rest = input;
    let mut sizes = chunk_sizes(input);
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(1).min(rest.len());
        chunked.consume(&rest[..n]);
        rest = &rest[n..];
    }

    let mut bounded = WsTracker::default();
    let mut rest = input;
    while !rest.is_empty() {
        let want = bounded.wanted();
        assert!(want >= 1);
        let n = want.min(rest.len());
        bounded.consume(&rest[..n]);
        rest = &rest[n..];
    }

    let (w, c, b) = (
        format!("{whole:?}"),
        format!("{chunked:?}"),
        format!("{bounded:?}"),
    );
    assert_eq!(w, c, "chunked feed differs");
    assert_eq!(w, b, "wanted()-bounded feed differs");
    if whole.at_message_boundary() {
        assert!(!whole.injection_impossible());
    }
    // Our own frames, appended at a message boundary, leave the tracker at a boundary again
    // (the error message) and then closed (the close frame).
    if whole.at_message_boundary() {
        let mut t = whole.clone();
        t.consume(&websocket_frames::error_channel_message(
            input,
            input.len().is_multiple_of(2),
        ));
        assert!(t.at_message_boundary(), "after our error message");
        t.consume(&websocket_frames::close_frame(
            websocket_frames::CLOSE_GOING_AWAY,
            &String::from_utf8_lossy(input),
        ));
        assert!(t.injection_impossible(), "after our close frame");
    }
}

fn spdy_events(input: &[u8], sizes: &mut dyn Iterator<Item = usize>) -> Vec<Event> {
    let mut t = spdy_frames::FrameTracker::default();
    let mut events = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(1).min(rest.len());
        t.consume(&rest[..n], &mut |e| events.push(e));
        rest = &rest[n..];
    }
    events
}

/// The events must not depend on how the bytes were split; the shutdown frames built from any
/// event sequence are whole frames.
pub fn spdy(input: &[u8]) {
    let whole = spdy_events(input, &mut std::iter::repeat(usize::MAX));
    let chunked = spdy_events(input, &mut chunk_sizes(input));
    assert_eq!(whole, chunked, "chunked feed differs");
    let ones = spdy_events(input, &mut std::iter::repeat(1));
    assert_eq!(whole, ones, "byte-at-a-time feed differs");

    let session = spdy_frames::Session::default();
    for (i, e) in whole.iter().enumerate() {
        if i % 2 == 0 {
            session.client_event(*e);
        } else {
            session.server_event(*e);
        }
    }
    let out = session.shutdown_frames(input);
    let mut t = spdy_frames::FrameTracker::default();
    t.consume(&out, &mut |_| {});
    assert!(t.at_frame_boundary(), "shutdown frames end mid-frame");
}

fn ws_frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![b0];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

/// Whole messages, fragments, control frames, a masked frame, long lengths, a close.
pub fn websocket_seeds() -> Vec<Vec<u8>> {
    let mut masked = vec![0x82, 0x80 | 3, 1, 2, 3, 4];
    masked.extend_from_slice(b"abc");
    vec![
        [ws_frame(0x82, b"\x01hello"), ws_frame(0x82, b"\x02err")].concat(),
        [
            ws_frame(0x02, b"\x01par"),
            ws_frame(0x89, b""),
            ws_frame(0x80, b"t"),
        ]
        .concat(),
        ws_frame(0x81, &[b'x'; 300]),
        [ws_frame(0x82, b"\x01x"), ws_frame(0x88, b"\x03\xe8bye")].concat(),
        masked,
        vec![0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0, 1],
        vec![0x83, 0],
    ]
}

fn spdy_control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80, 3];
    f.extend_from_slice(&kind.to_be_bytes());
    f.push(flags);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.extend_from_slice(payload);
    f
}

/// SYN_STREAM, SYN_REPLY, data with FIN, RST_STREAM, PING, GOAWAY.
pub fn spdy_seeds() -> Vec<Vec<u8>> {
    let syn = |id: u32| {
        let mut p = id.to_be_bytes().to_vec();
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x78, 0x9c]);
        spdy_control(1, 0, &p)
    };
    vec![
        [syn(1), syn(3), spdy_frames::data_frame(1, true, b"{}")].concat(),
        [
            spdy_control(2, 1, &1u32.to_be_bytes()),
            spdy_control(3, 0, &[0, 0, 0, 3, 0, 0, 0, 5]),
        ]
        .concat(),
        [
            spdy_control(6, 0, &7u32.to_be_bytes()),
            spdy_frames::goaway_frame(3),
        ]
        .concat(),
        spdy_frames::data_frame(5, false, &[0; 100]),
    ]
}
