//! Reading a recording by session time: which parts hold a time range (from the time table of
//! the signed statement, [`PartDigest::start_micros`]/[`PartDigest::end_micros`]), and the
//! asciicast v2 document made of them: the header, then the events of the part that holds the
//! range's start (from that part's beginning, so that a player draws the screen as it was)
//! up to the range's end.
//!
//! The work of a range is the parts it overlaps, never the whole recording: a player seeking
//! in a long recording reads a part or two. A recording without a time table (written by an
//! earlier version) is read from its first part, still cut at the range's end.

use std::ops::RangeInclusive;

use poddebug_types::evidence::PartDigest;

use crate::asciicast::{event_time, micros};

/// A range of session time, in seconds: from `start` to `end` (None: to the recording's end).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimeRange {
    /// Where playback starts.
    pub start: f64,
    /// Where it stops (inclusive).
    pub end: Option<f64>,
}

/// The parts (indexes into the statement's list) a range needs, besides the header of part 0:
/// from the last part that starts at or before `start` to the last one that starts at or
/// before `end`. `None` when the list has no time table (an earlier version's): then every
/// part is read.
pub fn parts_for(parts: &[PartDigest], range: TimeRange) -> Option<RangeInclusive<usize>> {
    // Only part 0 may hold no event (the header alone); any other part without a time means a
    // statement written before parts had one.
    if parts.is_empty()
        || parts
            .iter()
            .skip(1)
            .any(|p| p.start_micros.is_none() || p.end_micros.is_none())
        || (parts.len() == 1 && parts[0].start_micros.is_none())
    {
        return None;
    }
    let start = micros(range.start);
    let last_starting_by = |t: u64| -> usize {
        parts
            .iter()
            .rposition(|p| p.start_micros.is_some_and(|s| s <= t))
            .unwrap_or(0)
    };
    let first = last_starting_by(start);
    let last = range
        .end
        .map_or(parts.len() - 1, |e| last_starting_by(micros(e)));
    Some(first..=last.max(first))
}

/// Turns the bytes of the parts read (in order, in chunks of any size) into the range's
/// document: the first header line, then each event at or before the range's end. Lines are
/// whole in each part, so a chunk's incomplete line is carried to the next.
#[derive(Debug, Default)]
pub struct LineFilter {
    end: Option<f64>,
    header: bool,
    carry: Vec<u8>,
    /// An event past the end was seen: nothing after it is kept (events are in order).
    done: bool,
}

impl LineFilter {
    /// A filter for `range`.
    pub fn new(range: TimeRange) -> LineFilter {
        LineFilter {
            end: range.end,
            ..LineFilter::default()
        }
    }

    /// Whether an event past the range was seen: no more input is needed.
    pub fn done(&self) -> bool {
        self.done
    }

    /// What of `chunk` (and the line carried from the last one) belongs to the document.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let (line, tail) = rest.split_at(nl + 1);
            rest = tail;
            if self.carry.is_empty() {
                self.line(line, &mut out);
            } else {
                let mut whole = std::mem::take(&mut self.carry);
                whole.extend_from_slice(line);
                self.line(&whole, &mut out);
            }
        }
        self.carry.extend_from_slice(rest);
        out
    }

    /// The end of a part: a line it did not end is taken as whole (the last line of a
    /// recording cut short).
    pub fn finish_part(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.carry.is_empty() {
            let mut line = std::mem::take(&mut self.carry);
            line.push(b'\n');
            self.line(&line, &mut out);
        }
        out
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        if line.first() == Some(&b'{') {
            if !self.header {
                self.header = true;
                out.extend_from_slice(line);
            }
            return;
        }
        let Some(t) = event_time(line) else { return };
        if self.end.is_some_and(|end| t > end) {
            self.done = true;
            return;
        }
        out.extend_from_slice(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: Option<u64>, end: Option<u64>) -> PartDigest {
        PartDigest {
            start_micros: start,
            end_micros: end,
            ..Default::default()
        }
    }

    fn at(start: f64, end: Option<f64>) -> TimeRange {
        TimeRange { start, end }
    }

    #[test]
    fn a_range_reads_only_the_parts_it_overlaps() {
        const S: u64 = 1_000_000;
        let parts = vec![
            part(Some(0), Some(100 * S)),
            part(Some(101 * S), Some(300 * S)),
            part(Some(305 * S), Some(600 * S)),
            part(Some(601 * S), Some(900 * S)),
        ];
        assert_eq!(parts_for(&parts, at(0.0, None)), Some(0..=3));
        assert_eq!(parts_for(&parts, at(200.0, Some(250.0))), Some(1..=1));
        // A start in the pause between two parts: the part before it, which drew the screen.
        assert_eq!(parts_for(&parts, at(302.0, Some(310.0))), Some(1..=2));
        assert_eq!(parts_for(&parts, at(700.0, None)), Some(3..=3));
        // Past the end: the last part (its events are before the start, the screen at it).
        assert_eq!(parts_for(&parts, at(1e9, Some(2e9))), Some(3..=3));
        // An end before the start reads the start's part.
        assert_eq!(parts_for(&parts, at(700.0, Some(1.0))), Some(3..=3));
        // Part 0 with the header alone.
        let header_only = vec![part(None, None), part(Some(5 * S), Some(9 * S))];
        assert_eq!(parts_for(&header_only, at(6.0, None)), Some(1..=1));
        assert_eq!(parts_for(&header_only, at(1.0, None)), Some(0..=1));
        // No time table: everything.
        let legacy = vec![part(Some(0), Some(1)), part(None, None)];
        assert_eq!(parts_for(&legacy, at(6.0, None)), None);
        assert_eq!(parts_for(&[], at(0.0, None)), None);
        assert_eq!(parts_for(&[part(None, None)], at(0.0, None)), None);
    }

    #[test]
    fn the_filter_keeps_one_header_and_the_events_up_to_the_end_across_any_split() {
        let header = b"{\"version\":2,\"width\":80,\"height\":24}\n".to_vec();
        let events =
            b"[1.0,\"o\",\"a\\n\"]\n[2.5,\"i\",\"b\"]\n[3.0,\"o\",\"c\"]\n[9.0,\"o\",\"d\"]\n";
        let doc = [header.clone(), events.to_vec()].concat();
        let want = [
            header.clone(),
            b"[1.0,\"o\",\"a\\n\"]\n[2.5,\"i\",\"b\"]\n[3.0,\"o\",\"c\"]\n".to_vec(),
        ]
        .concat();
        for split in 0..doc.len() {
            let mut f = LineFilter::new(at(2.0, Some(3.0)));
            // The header again, as a part read for its header before the range's parts.
            let mut got = f.push(&header);
            got.extend(f.finish_part());
            got.extend(f.push(&doc[..split]));
            got.extend(f.push(&doc[split..]));
            got.extend(f.finish_part());
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "split at {split}"
            );
            assert!(f.done());
        }
        let mut open = LineFilter::new(at(0.0, None));
        let mut got = open.push(&doc[..doc.len() - 1]);
        got.extend(open.finish_part());
        assert_eq!(got, doc, "an unfinished last line is kept");
        assert!(!open.done());
    }
}
