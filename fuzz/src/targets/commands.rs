//! The commands derived from a session's recorded input: the line editor.

use poddebug_recording::commands::{CommandLog, MAX_COMMAND_BYTES, MAX_COMMANDS, MAX_LINE};

/// The lines `input` submits, fed in pieces of `split` bytes.
fn lines(input: &[u8], split: usize) -> CommandLog {
    let mut log = CommandLog::default();
    for (i, chunk) in input.chunks(split.max(1)).enumerate() {
        log.push(i as f64, chunk);
    }
    log
}

/// Invariants: any split of the input submits the same lines; every line is within
/// [`MAX_LINE`] characters and the log within its bounds; what is submitted is counted.
pub fn run(input: &[u8]) {
    let whole = lines(input, input.len());
    let split = input.first().map_or(1, |b| usize::from(*b % 7) + 1);
    let pieces = lines(input, split);
    let text = |l: &CommandLog| -> Vec<(String, bool)> {
        l.items()
            .iter()
            .map(|c| (c.line.clone(), c.recalled))
            .collect()
    };
    assert_eq!(text(&whole), text(&pieces), "split {split}");
    assert_eq!(whole.dropped(), pieces.dropped());
    assert!(whole.items().len() <= MAX_COMMANDS);
    let bytes: usize = whole.items().iter().map(|c| c.line.len()).sum();
    assert!(bytes <= MAX_COMMAND_BYTES);
    for c in whole.items() {
        assert!(c.line.chars().count() <= MAX_LINE, "{} chars", c.line.len());
    }
    assert_eq!(
        u64::from(whole.count()),
        whole.items().len() as u64 + whole.dropped()
    );
}

/// Typing with each editing key, escape sequences, paste, history and UTF-8.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        &b"ls -la\r"[..],
        b"lss\x7f -l\r",
        b"rm -rf /\x15echo hi\r",
        b"cat foo bar\x17baz\r",
        b"sleep 100\x03id\r",
        b"echo wrld\x1b[D\x1b[D\x1b[Do\r",
        b"cho\x01e\x05 x\r",
        b"echo abc\x1b[H\x1b[3~X\r",
        b"echo abc\x1bOH\x1bOF!\r",
        b"a b c\x1bb\x1bb\x0b\r",
        b"one two\x1b\x7f\r\x01\x1bd\r",
        b"\x1b[A | wc\r\x12ssh\r\x1bOA\r",
        b"\x1b[200~cat <<EOF\rhi\rEOF\x1b[201~\r",
        b"x\x1b]0;title\x07y\r\x1b]0;t\x1b\\z\n",
        "caf\u{e9} \u{20ac}\r".as_bytes(),
        b"a\xffb\xe2\x82\r",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}
