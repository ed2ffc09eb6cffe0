//! A recording's search index: the text of its output (escape sequences parsed out) and the
//! index read back and searched.

use poddebug_recording::index::{CONTEXT, IndexBuilder, Needle, Searchable};
use poddebug_recording::text::{MAX_LINE, OutputText};

/// The lines `output` prints, fed in pieces of `split` bytes.
fn lines(output: &[u8], split: usize) -> Vec<(f64, String)> {
    let mut text = OutputText::default();
    let mut out = Vec::new();
    for chunk in output.chunks(split.max(1)) {
        text.push(1.0, chunk, &mut out);
    }
    text.finish(&mut out);
    out
}

/// Invariants: any split of the output gives the same lines, each within [`MAX_LINE`]
/// characters and free of control characters; the index built of them reads back, and a
/// search of it finds only lines that hold the text, shown within [`CONTEXT`] characters;
/// the input read as an index is refused or searched without a panic.
pub fn run(input: &[u8]) {
    let whole = lines(input, input.len());
    let split = input.first().map_or(1, |b| usize::from(*b % 7) + 1);
    assert_eq!(whole, lines(input, split), "split {split}");
    for (_, l) in &whole {
        assert!(l.chars().count() <= MAX_LINE);
        assert!(!l.chars().any(char::is_control), "{l:?}");
    }
    let mut b = IndexBuilder::new();
    b.output(0.0, input);
    b.finish();
    let index = Searchable::load(&b.to_json()).expect("an index as written reads back");
    if let Some((_, l)) = whole.first()
        && let Some(text) = l.get(..l.len().min(8)).filter(|t| t.len() >= 3)
        && let Ok(needle) = Needle::new(text)
    {
        let found = index.search(&needle, 10);
        assert!(found.total >= 1, "{text:?} in {l:?}");
        for m in &found.matches {
            assert!(m.text.chars().count() <= CONTEXT);
        }
    }
    if let Ok(other) = Searchable::load(input)
        && let Ok(needle) = Needle::new("abc")
    {
        let _ = other.search(&needle, 10);
    }
}

/// Output with colours, cursor moves, titles, backspaces, carriage returns and UTF-8; an index.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        &b"\x1b[1;31mred\x1b[0m text\r\n$ ls\x08\x08ps\r\n"[..],
        b"\x1b]0;title\x07done\x1b[2J\x1b[H",
        b"progress 10%\rprogress 100%\n",
        b"tab\there\x7f\x7fend",
        "caf\u{e9} \u{20ac}\r\n".as_bytes(),
        b"a\xffb\xe2\x82\n",
        br#"{"version":1,"blocks":[{"lines":[[1.0,"o","abcdef"]],"bloom":"AAAAAAAAAAA"}],"textDropped":0}"#,
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}
