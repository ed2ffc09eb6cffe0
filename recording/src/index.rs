//! A recording's search index (`NS/POD/ID/index`), written with the recording: the text of
//! the commands derived from its input ([`crate::commands`]) and of its output (escape
//! sequences left out, [`crate::text`]), each line with the session time it began at.
//!
//! Search reads the index, never the recording. The text is kept in blocks of a few kilobytes,
//! each with a Bloom filter of the trigrams (three bytes of lower-cased text) it holds; a query
//! of at least [`MIN_SEARCH`] bytes tests its trigrams against each block's filter and reads
//! only the blocks that may hold it, then finds the text in their lines: a filter may let a
//! block through that does not hold the text, never a match that is not there. The work of a
//! query is thus bounded by the number of blocks and the few candidate blocks. What one
//! recording indexes is bounded ([`MAX_TEXT`]); lines past the bound are counted
//! (`textDropped`), not indexed.

use base64::Engine;
use poddebug_types::{RecordingCommand, RecordingMatch};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::text::OutputText;

/// The format's version.
pub const INDEX_V1: u32 = 1;
/// Most bytes of text (commands and output) one recording's index holds.
pub const MAX_TEXT: usize = 512 << 10;
/// Shortest text searched for, in bytes (a trigram).
pub const MIN_SEARCH: usize = 3;
/// Longest text searched for, in bytes.
pub const MAX_SEARCH: usize = 256;
/// A block closes at this many lines…
const BLOCK_LINES: usize = 64;
/// …or this many bytes of text.
const BLOCK_BYTES: usize = 8 << 10;
/// Bits of a block's filter per distinct trigram (about 1% false positives per trigram with
/// [`HASHES`]).
const BITS_PER_TRIGRAM: usize = 10;
/// Bit positions per trigram.
const HASHES: u64 = 6;
/// Characters of a matching line shown around the match.
pub const CONTEXT: usize = 200;
/// Most bits of one block's filter read back (what the writer makes is far smaller: a block
/// holds at most [`BLOCK_BYTES`] of text, so fewer trigrams).
const MAX_BLOOM_BITS: usize = 1 << 20;

/// Where a line of text came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A command the user submitted.
    #[serde(rename = "c")]
    Command,
    /// Output.
    #[serde(rename = "o")]
    Output,
}

impl Source {
    /// As a match names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Command => "Command",
            Source::Output => "Output",
        }
    }
}

/// One line: `[offset, "c"|"o", text]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line(pub f64, pub Source, pub String);

/// A block of lines and the Bloom filter of their trigrams.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Block {
    /// The lines.
    pub lines: Vec<Line>,
    /// The filter's bits (64-bit little-endian words), base64.
    pub bloom: String,
}

/// The index (module docs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// [`INDEX_V1`].
    pub version: u32,
    /// The text.
    pub blocks: Vec<Block>,
    /// Lines of text past the bound.
    pub text_dropped: u64,
}

/// The trigrams of lower-cased text.
fn trigrams(lower: &[u8]) -> impl Iterator<Item = u32> + '_ {
    lower
        .windows(3)
        .map(|w| (u32::from(w[0]) << 16) | (u32::from(w[1]) << 8) | u32::from(w[2]))
}

/// splitmix64: the two hashes of a trigram for double hashing.
fn hashes(t: u32) -> (u64, u64) {
    let mut z = u64::from(t).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z & 0xffff_ffff, (z >> 32) | 1)
}

/// A Bloom filter over trigrams.
#[derive(Clone, Debug, Default)]
struct Bloom {
    words: Vec<u64>,
}

impl Bloom {
    fn of(lines: &[Line]) -> Bloom {
        let mut all: Vec<u32> = Vec::new();
        for l in lines {
            all.extend(trigrams(l.2.to_lowercase().as_bytes()));
        }
        all.sort_unstable();
        all.dedup();
        let bits = (all.len() * BITS_PER_TRIGRAM).max(64).next_power_of_two();
        let mut b = Bloom {
            words: vec![0; bits / 64],
        };
        for t in all {
            b.insert(t);
        }
        b
    }

    fn bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    fn positions(&self, t: u32) -> impl Iterator<Item = (usize, u64)> + use<> {
        let (h1, h2) = hashes(t);
        let m = self.bits().max(1);
        (0..HASHES).map(move |i| {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % m;
            ((bit / 64) as usize, 1 << (bit % 64))
        })
    }

    fn insert(&mut self, t: u32) {
        for (word, mask) in self.positions(t) {
            if let Some(w) = self.words.get_mut(word) {
                *w |= mask;
            }
        }
    }

    fn may_hold(&self, t: u32) -> bool {
        self.positions(t)
            .all(|(word, mask)| self.words.get(word).is_some_and(|w| w & mask != 0))
    }

    fn encode(&self) -> String {
        let bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
    }

    fn decode(text: &str) -> Result<Bloom, Error> {
        if text.len() > MAX_BLOOM_BITS / 6 + 4 {
            return Err(Error::Index("a block's filter is too large".to_owned()));
        }
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text)
            .map_err(|e| Error::Index(format!("a block's filter is not base64: {e}")))?;
        if bytes.is_empty() || bytes.len() % 8 != 0 || !(bytes.len() / 8).is_power_of_two() {
            return Err(Error::Index("a block's filter has a bad size".to_owned()));
        }
        Ok(Bloom {
            words: bytes
                .chunks_exact(8)
                .map(|c| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(c);
                    u64::from_le_bytes(w)
                })
                .collect(),
        })
    }
}

/// Builds a recording's index as the session goes: commands and output fed in session time
/// order, the text bounded by [`MAX_TEXT`] (what is past it counted; output past it is not
/// even parsed).
#[derive(Debug)]
pub struct IndexBuilder {
    blocks: Vec<Block>,
    text_dropped: u64,
    open: Vec<Line>,
    open_bytes: usize,
    text_bytes: usize,
    output: OutputText,
    done: Vec<(f64, String)>,
    /// Lines were added since [`IndexBuilder::take_changed`] last said so.
    changed: bool,
}

impl Default for IndexBuilder {
    fn default() -> Self {
        IndexBuilder::new()
    }
}

impl IndexBuilder {
    /// An empty index.
    pub fn new() -> IndexBuilder {
        IndexBuilder {
            blocks: Vec::new(),
            text_dropped: 0,
            open: Vec::new(),
            open_bytes: 0,
            text_bytes: 0,
            output: OutputText::default(),
            done: Vec::new(),
            changed: false,
        }
    }

    /// Whether the text bound is reached (then nothing more is indexed).
    pub fn full(&self) -> bool {
        self.text_dropped > 0 || self.text_bytes >= MAX_TEXT
    }

    /// A command was submitted.
    pub fn command(&mut self, c: &RecordingCommand) {
        self.flush_output();
        self.line(Line(c.offset, Source::Command, c.line.clone()));
    }

    /// Output printed at session time `t`.
    pub fn output(&mut self, t: f64, data: &[u8]) {
        if self.full() {
            // Past the bound the output is not parsed: its lines are not counted either,
            // only that the bound was reached (one dropped line at least).
            self.text_dropped = self.text_dropped.max(1);
            return;
        }
        self.output.push(t, data, &mut self.done);
        self.flush_output();
    }

    /// The session ended: the line of output not yet ended goes in.
    pub fn finish(&mut self) {
        self.output.finish(&mut self.done);
        self.flush_output();
    }

    fn flush_output(&mut self) {
        for (t, text) in std::mem::take(&mut self.done) {
            self.line(Line(t, Source::Output, text));
        }
    }

    fn line(&mut self, line: Line) {
        self.changed = true;
        if self.text_bytes + line.2.len() > MAX_TEXT {
            self.text_dropped += 1;
            return;
        }
        self.text_bytes += line.2.len();
        self.open_bytes += line.2.len();
        self.open.push(line);
        if self.open.len() >= BLOCK_LINES || self.open_bytes >= BLOCK_BYTES {
            let lines = std::mem::take(&mut self.open);
            self.open_bytes = 0;
            self.blocks.push(block(lines));
        }
    }

    /// Whether lines were added since the last call (then the index is to be written).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// What was taken as written was not: say so again at the next call.
    pub fn mark_changed(&mut self) {
        self.changed = true;
    }

    /// The index as it stands (the open block closed in the copy), as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        let open = (!self.open.is_empty()).then(|| block(self.open.clone()));
        let view = IndexView {
            version: INDEX_V1,
            blocks: BlocksView(&self.blocks, open.as_ref()),
            text_dropped: self.text_dropped,
        };
        serde_json::to_vec(&view).unwrap_or_default()
    }
}

/// The index serialized without copying its closed blocks.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IndexView<'a> {
    version: u32,
    blocks: BlocksView<'a>,
    text_dropped: u64,
}

struct BlocksView<'a>(&'a [Block], Option<&'a Block>);

impl Serialize for BlocksView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().chain(self.1))
    }
}

fn block(lines: Vec<Line>) -> Block {
    let bloom = Bloom::of(&lines).encode();
    Block { lines, bloom }
}

/// What a query looks for: lower-cased, with its trigrams.
#[derive(Clone, Debug)]
pub struct Needle {
    lower: String,
    trigrams: Vec<u32>,
}

impl Needle {
    /// The needle of `text`, or why it cannot be searched for.
    pub fn new(text: &str) -> Result<Needle, Error> {
        if text.len() < MIN_SEARCH || text.len() > MAX_SEARCH {
            return Err(Error::Search(format!(
                "must be {MIN_SEARCH} to {MAX_SEARCH} bytes long, not {}",
                text.len()
            )));
        }
        if text.chars().any(char::is_control) {
            return Err(Error::Search(
                "must not hold control characters (the index holds lines of text)".to_owned(),
            ));
        }
        let lower = text.to_lowercase();
        let mut t: Vec<u32> = trigrams(lower.as_bytes()).collect();
        t.sort_unstable();
        t.dedup();
        Ok(Needle { lower, trigrams: t })
    }
}

/// What a search of one index found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    /// The first matches, in session time order.
    pub matches: Vec<RecordingMatch>,
    /// How many lines match in all.
    pub total: u64,
}

/// An index ready to be searched (its filters decoded).
#[derive(Clone, Debug)]
pub struct Searchable {
    index: Index,
    blooms: Vec<Bloom>,
}

impl Searchable {
    /// The index in `bytes` (as written).
    pub fn load(bytes: &[u8]) -> Result<Searchable, Error> {
        let index: Index = serde_json::from_slice(bytes)
            .map_err(|e| Error::Index(format!("the index is not readable: {e}")))?;
        Searchable::new(index)
    }

    /// `index`, its filters decoded.
    pub fn new(index: Index) -> Result<Searchable, Error> {
        if index.version != INDEX_V1 {
            return Err(Error::Index(format!(
                "index version {} is not understood",
                index.version
            )));
        }
        let blooms = index
            .blocks
            .iter()
            .map(|b| Bloom::decode(&b.bloom))
            .collect::<Result<_, _>>()?;
        Ok(Searchable { index, blooms })
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The lines holding `needle` (case-insensitive), in session time order: at most `max`
    /// of them, and how many there are in all.
    pub fn search(&self, needle: &Needle, max: usize) -> Found {
        let mut found = Found::default();
        for (block, bloom) in self.index.blocks.iter().zip(&self.blooms) {
            if !needle.trigrams.iter().all(|t| bloom.may_hold(*t)) {
                continue;
            }
            for Line(offset, source, text) in &block.lines {
                let lower = text.to_lowercase();
                let Some(at) = lower.find(&needle.lower) else {
                    continue;
                };
                found.total += 1;
                if found.matches.len() < max {
                    found.matches.push(RecordingMatch {
                        offset: *offset,
                        source: source.as_str().to_owned(),
                        text: around(text, &lower, at, needle.lower.len()),
                    });
                }
            }
        }
        found.matches.sort_by(|a, b| a.offset.total_cmp(&b.offset));
        found
    }
}

/// At most [`CONTEXT`] characters of `text` around the match at byte `at` of its lower-cased
/// form (the match's place in `text` counted in characters: lower-casing may change lengths).
fn around(text: &str, lower: &str, at: usize, len: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= CONTEXT {
        return text.to_owned();
    }
    let start_char = lower.get(..at).map_or(0, |s| s.chars().count());
    let len_chars = lower.get(at..at + len).map_or(0, |s| s.chars().count());
    let slack = CONTEXT.saturating_sub(len_chars) / 2;
    let from = start_char.saturating_sub(slack).min(chars.len() - CONTEXT);
    chars[from..from + CONTEXT].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(t: f64, line: &str) -> RecordingCommand {
        RecordingCommand {
            offset: t,
            line: line.into(),
            recalled: false,
        }
    }

    fn built() -> Searchable {
        let mut b = IndexBuilder::new();
        for i in 0..1000 {
            b.output(
                f64::from(i),
                format!("line {i} of some output\r\n").as_bytes(),
            );
        }
        b.command(&cmd(500.5, "cat /etc/Shadow"));
        b.output(501.0, b"\x1b[1;31mroot\x1b[0m:x:0:0\r\n");
        b.finish();
        let bytes = b.to_json();
        let s = Searchable::load(&bytes).unwrap();
        assert!(s.index().blocks.len() > 10, "{}", s.index().blocks.len());
        s
    }

    #[test]
    fn search_finds_commands_and_output_with_their_offsets() {
        let s = built();
        let f = s.search(&Needle::new("etc/shad").unwrap(), 10);
        assert_eq!(f.total, 1);
        assert_eq!(f.matches[0].offset, 500.5);
        assert_eq!(f.matches[0].source, "Command");
        assert_eq!(f.matches[0].text, "cat /etc/Shadow");
        let f = s.search(&Needle::new("ROOT:X").unwrap(), 10);
        assert_eq!(
            (f.matches[0].offset, f.matches[0].source.as_str()),
            (501.0, "Output"),
            "escape sequences are not in the text"
        );
        let f = s.search(&Needle::new("line 99").unwrap(), 3);
        assert_eq!(f.total, 11, "99 and 990..999");
        assert_eq!(f.matches.len(), 3);
        assert!(f.matches.windows(2).all(|w| w[0].offset <= w[1].offset));
        assert_eq!(f.matches[0].text, "line 99 of some output");
        assert_eq!(s.search(&Needle::new("absent text").unwrap(), 10).total, 0);
    }

    #[test]
    fn what_is_found_is_there_and_what_is_there_is_found() {
        // Every match holds the needle (the filter never makes a match), and every line that
        // holds it is found (the filter never hides one).
        let s = built();
        for needle in ["ine 12", "of some", "e 7 o", "999", "ROOT", "xyz", "out"] {
            let n = Needle::new(needle).unwrap();
            let f = s.search(&n, usize::MAX);
            let lower = needle.to_lowercase();
            assert!(
                f.matches
                    .iter()
                    .all(|m| m.text.to_lowercase().contains(&lower)),
                "{needle}"
            );
            let expected = s
                .index()
                .blocks
                .iter()
                .flat_map(|b| &b.lines)
                .filter(|l| l.2.to_lowercase().contains(&lower))
                .count() as u64;
            assert_eq!(f.total, expected, "{needle}");
        }
    }

    #[test]
    fn a_query_reads_only_the_blocks_its_trigrams_may_be_in() {
        let s = built();
        let needle = Needle::new("etc/shad").unwrap();
        let candidates = s
            .blooms
            .iter()
            .filter(|b| needle.trigrams.iter().all(|t| b.may_hold(*t)))
            .count();
        assert!(candidates <= 2, "{candidates} of {}", s.blooms.len());
    }

    #[test]
    fn an_edited_command_is_found_as_submitted() {
        let mut log = crate::commands::CommandLog::default();
        log.push(
            2.0,
            b"cat /etc/passwdd\x7f\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[Dx\r",
        );
        let mut b = IndexBuilder::new();
        for c in log.items() {
            b.command(c);
        }
        let s = Searchable::load(&b.to_json()).unwrap();
        let f = s.search(&Needle::new("/etc/xpasswd").unwrap(), 10);
        assert_eq!(f.total, 1);
        assert_eq!(f.matches[0].text, "cat /etc/xpasswd");
        assert_eq!(s.search(&Needle::new("passwdd").unwrap(), 10).total, 0);
    }

    #[test]
    fn the_bound_holds_and_what_is_past_it_is_counted() {
        let mut b = IndexBuilder::new();
        let line = "y".repeat(500);
        for i in 0..(MAX_TEXT / 500 + 10) {
            b.command(&cmd(i as f64, &line));
        }
        assert!(b.full());
        b.output(1e6, b"more output\r\n");
        let s = Searchable::load(&b.to_json()).unwrap();
        assert_eq!(s.index().text_dropped, 10);
        let text: usize = s
            .index()
            .blocks
            .iter()
            .flat_map(|b| &b.lines)
            .map(|l| l.2.len())
            .sum();
        assert!(text <= MAX_TEXT);
        assert_eq!(s.search(&Needle::new("more output").unwrap(), 1).total, 0);
    }

    #[test]
    fn needles_are_bounded() {
        assert!(Needle::new("ab").is_err());
        assert!(Needle::new("abc").is_ok());
        assert!(Needle::new(&"a".repeat(MAX_SEARCH)).is_ok());
        assert!(Needle::new(&"a".repeat(MAX_SEARCH + 1)).is_err());
        assert!(Needle::new("a\nbc").is_err());
    }

    #[test]
    fn bad_indexes_are_refused() {
        assert!(Searchable::load(b"{").is_err());
        let mut i = Searchable::load(&IndexBuilder::new().to_json())
            .unwrap()
            .index
            .clone();
        i.version = 9;
        assert!(Searchable::new(i).is_err());
        let mut b = IndexBuilder::new();
        b.command(&cmd(0.0, "abc"));
        let mut i = Searchable::load(&b.to_json()).unwrap().index.clone();
        i.blocks[0].bloom = "AAA".into();
        assert!(Searchable::new(i.clone()).is_err());
        i.blocks[0].bloom = "A".repeat(MAX_BLOOM_BITS);
        assert!(Searchable::new(i).is_err());
    }

    #[test]
    fn long_lines_are_shown_around_the_match() {
        let text = format!("{}NEEDLE{}", "a".repeat(500), "b".repeat(500));
        let shown = around(&text, &text.to_lowercase(), 500, 6);
        assert_eq!(shown.chars().count(), CONTEXT);
        assert!(shown.contains("NEEDLE"));
    }
}
