//! Reading a recording by session time: the line filter that cuts the parts read at the
//! range's end, and the time of an event line.

use poddebug_recording::asciicast::event_time;
use poddebug_recording::range::{LineFilter, TimeRange};

fn filtered(input: &[u8], split: usize, end: Option<f64>) -> Vec<u8> {
    let mut f = LineFilter::new(TimeRange { start: 0.0, end });
    let mut out = Vec::new();
    for chunk in input.chunks(split.max(1)) {
        out.extend(f.push(chunk));
    }
    out.extend(f.finish_part());
    out
}

/// Invariants: any split of the stored bytes gives the same document; it holds at most one
/// header, only lines of the input, each event at or before the end, in input order.
pub fn run(input: &[u8]) {
    let end = input.first().map(|b| f64::from(*b % 16));
    let whole = filtered(input, input.len(), end);
    let split = input.get(1).map_or(1, |b| usize::from(*b % 9) + 1);
    assert_eq!(whole, filtered(input, split, end), "split {split}");
    let mut headers = 0;
    for line in whole.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if line.first() == Some(&b'{') {
            headers += 1;
            continue;
        }
        let t = event_time(line).expect("only events and the header are kept");
        assert!(end.is_none_or(|e| t <= e), "{t} past {end:?}");
    }
    assert!(headers <= 1);
}

/// A header, events in order, an event past the end, lines that are neither, a cut line.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        &b"\x05\x02{\"version\":2}\n[0.5,\"o\",\"a\"]\n[4.9,\"o\",\"b\"]\n[6,\"o\",\"c\"]\n"[..],
        b"\x0f\x03[1e2,\"o\",\"x\"]\n{\"version\":2}\n{\"again\":1}\n[-1,\"o\",\"y\"]\n[NaN,\"o\",\"z\"]\n",
        b"\x09\x01[1,\"i\",\"ls\"]\r\n[inf,\"m\",\"m\"]\n[2,\n[3,\"o\",\"cut",
        b"\x00\x00\n\n[0,\"o\",\"\"]\n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}
