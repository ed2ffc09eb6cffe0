//! The strict-decoding problems of one body: unknown and repeated fields, kept as
//! sigs.k8s.io/json keeps them for kube-apiserver.
//!
//! kube-apiserver's decoder saves at most 100 strict errors, each once (a second error with the
//! same text is dropped), in the order it meets them, and quotes each path with Go's
//! `strconv.Quote`. The path of a problem is rendered only when it is reported, and only up to
//! [`MAX_REPORTED_PATH_BYTES`], so the work and memory of reporting are bounded however many
//! problems a body holds and however long its keys are.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;

/// Most strict-decoding problems reported for one body, the cap of kube-apiserver's decoder
/// (sigs.k8s.io/json `saveStrictError`): once reached, nothing more is collected.
pub const MAX_STRICT_ERRORS: usize = 100;

/// Longest path, in bytes of the path's text, reported in one problem; a longer one is cut at a
/// character boundary and ends in `...`. kube-apiserver reports a path whole, however long its
/// keys are (up to the 3 MiB body), in each of up to 100 problems; no real path comes near
/// this length (a label key is at most 316 bytes).
pub const MAX_REPORTED_PATH_BYTES: usize = 1024;

/// One step of a path in a JSON document: a member of an object or an element of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step<'de> {
    Key(Cow<'de, str>),
    Index(usize),
}

/// What kind of strict-decoding problem.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Unknown,
    Duplicate,
}

/// The problems found so far, in document order, without repeats.
#[derive(Default)]
pub(crate) struct Problems {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Problems {
    /// True once [`MAX_STRICT_ERRORS`] problems are kept: the answer cannot change any more,
    /// so nothing needs to be tracked for it.
    pub(crate) fn full(&self) -> bool {
        self.list.len() >= MAX_STRICT_ERRORS
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Record a problem at `path`, then `last` (the key that has it, when not already the last
    /// step of `path`), unless the list is full or has the same text already.
    pub(crate) fn report(&mut self, kind: Kind, path: &[Step<'_>], last: Option<&str>) {
        if self.full() {
            return;
        }
        let mut text = String::from(match kind {
            Kind::Unknown => "unknown field ",
            Kind::Duplicate => "duplicate field ",
        });
        quote_path(&mut text, path, last);
        if self.seen.insert(text.clone()) {
            self.list.push(text);
        }
    }

    /// The problems joined as kube-apiserver joins them.
    pub(crate) fn joined(&self) -> String {
        self.list.join(", ")
    }
}

/// Append `path` (and `last`) to `out` quoted as Go's `strconv.Quote` quotes it, cut after
/// [`MAX_REPORTED_PATH_BYTES`] bytes of path text.
fn quote_path(out: &mut String, path: &[Step<'_>], last: Option<&str>) {
    let mut budget = MAX_REPORTED_PATH_BYTES;
    let mut first = true;
    let mut whole = true;
    out.push('"');
    let keys = path
        .iter()
        .map(|s| match s {
            Step::Key(k) => Err(k.as_ref()),
            Step::Index(i) => Ok(*i),
        })
        .chain(last.map(Err));
    for step in keys {
        let mut index = String::new();
        let piece: &str = match step {
            Err(key) if first => key,
            Err(key) => {
                if !push_limited(out, ".", &mut budget) {
                    whole = false;
                    break;
                }
                key
            }
            Ok(i) => {
                let _ = write!(index, "[{i}]");
                &index
            }
        };
        first = false;
        if !push_limited(out, piece, &mut budget) {
            whole = false;
            break;
        }
    }
    if !whole {
        out.push_str("...");
    }
    out.push('"');
}

/// Append as much of `s` (quoted) as `budget` bytes of raw text allow; false once cut.
fn push_limited(out: &mut String, s: &str, budget: &mut usize) -> bool {
    for c in s.chars() {
        let n = c.len_utf8();
        if n > *budget {
            return false;
        }
        *budget -= n;
        push_quoted(out, c);
    }
    true
}

/// One character as Go's `strconv.Quote` writes it: the usual backslash escapes, `\xNN` for the
/// other ASCII control characters, `\uNNNN` for other control characters, the rest as is.
fn push_quoted(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if c.is_ascii_control() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c if c.is_control() => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Step<'_> {
        Step::Key(Cow::Borrowed(k))
    }

    #[test]
    fn paths_are_rendered_and_quoted_as_go_does() {
        let mut p = Problems::default();
        p.report(
            Kind::Unknown,
            &[key("container"), key("env"), Step::Index(1)],
            Some("valeu"),
        );
        p.report(Kind::Duplicate, &[key("metadata"), key("name")], None);
        p.report(Kind::Unknown, &[], Some("a\"b\\c\n\u{1}\u{7f}\u{85}é"));
        p.report(Kind::Unknown, &[Step::Index(0)], Some("x"));
        assert_eq!(
            p.joined(),
            r#"unknown field "container.env[1].valeu", duplicate field "metadata.name", unknown field "a\"b\\c\n\x01\x7f\u0085é", unknown field "[0].x""#
        );
    }

    #[test]
    fn repeats_are_dropped_and_the_list_stops_at_the_cap() {
        let mut p = Problems::default();
        for _ in 0..3 {
            p.report(Kind::Duplicate, &[key("a")], None);
        }
        p.report(Kind::Unknown, &[key("a")], None);
        assert_eq!(p.joined(), r#"duplicate field "a", unknown field "a""#);
        let names: Vec<String> = (0..150).map(|i| format!("u{i:03}")).collect();
        for n in &names {
            p.report(Kind::Unknown, &[], Some(n));
        }
        assert!(p.full());
        assert_eq!(p.list.len(), MAX_STRICT_ERRORS);
        assert!(
            p.joined().ends_with(r#"unknown field "u097""#),
            "{}",
            p.joined()
        );
    }

    #[test]
    fn long_paths_are_cut() {
        let long = "k".repeat(3 * MAX_REPORTED_PATH_BYTES);
        let mut p = Problems::default();
        p.report(Kind::Duplicate, &[key("container"), key(&long)], Some("x"));
        let want = format!(
            "duplicate field \"container.{}...\"",
            "k".repeat(MAX_REPORTED_PATH_BYTES - "container.".len())
        );
        assert_eq!(p.joined(), want);
        // A multi-byte character is not split.
        let mut p = Problems::default();
        let wide = "é".repeat(MAX_REPORTED_PATH_BYTES);
        p.report(Kind::Unknown, &[], Some(&wide));
        let want = format!(
            "unknown field \"{}...\"",
            "é".repeat(MAX_REPORTED_PATH_BYTES / 2)
        );
        assert_eq!(p.joined(), want);
    }
}
