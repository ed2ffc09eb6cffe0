//! The text of a session's output, line by line, for the search index: escape sequences
//! (colours, cursor moves, titles) parsed by `vte` and left out, a backspace taking back the
//! character before it, each line with the session time it began at. A carriage return ends a
//! line as a newline does, so a progress bar redrawn in place leaves each state it showed.

/// Longest line, in characters: a longer one is cut into lines of this length.
pub const MAX_LINE: usize = 512;

/// Lines of output (module docs).
pub struct OutputText {
    parser: vte::Parser,
    lines: Lines,
    /// The first bytes of a UTF-8 character split at the end of the last output.
    carry: Vec<u8>,
}

impl std::fmt::Debug for OutputText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputText").finish_non_exhaustive()
    }
}

impl Default for OutputText {
    fn default() -> Self {
        OutputText {
            parser: vte::Parser::new(),
            lines: Lines::default(),
            carry: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Lines {
    current: String,
    chars: usize,
    start: f64,
    now: f64,
    done: Vec<(f64, String)>,
}

impl Lines {
    fn end(&mut self) {
        let text = self.current.trim_end();
        if !text.trim_start().is_empty() {
            self.done.push((self.start, text.to_owned()));
        }
        self.current.clear();
        self.chars = 0;
    }

    fn push(&mut self, c: char) {
        if self.chars == 0 {
            self.start = self.now;
        }
        if self.chars == MAX_LINE {
            self.end();
            self.start = self.now;
        }
        self.current.push(c);
        self.chars += 1;
    }
}

impl vte::Perform for Lines {
    fn print(&mut self, c: char) {
        // DEL (which vte prints) and C1 controls show nothing on a terminal.
        if !c.is_control() {
            self.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | b'\r' | 0x0b | 0x0c => self.end(),
            b'\t' => self.push(' '),
            0x08 if self.current.pop().is_some() => self.chars -= 1,
            _ => {}
        }
    }
}

impl OutputText {
    /// Feed output printed at session time `t`; the lines it completes are appended to `out`.
    pub fn push(&mut self, t: f64, output: &[u8], out: &mut Vec<(f64, String)>) {
        self.lines.now = t;
        // Decoded here, each bad sequence one U+FFFD and a character split across outputs
        // kept whole, so that the parser sees the same text however the output was split.
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(output);
        let mut text = String::with_capacity(bytes.len());
        let mut rest = &bytes[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    text.push_str(s);
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            text.push('\u{fffd}');
                            rest = &bad[n..];
                        }
                        None => {
                            self.carry = bad.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        self.parser.advance(&mut self.lines, text.as_bytes());
        out.append(&mut self.lines.done);
    }

    /// The line not yet ended (at the end of the session).
    pub fn finish(&mut self, out: &mut Vec<(f64, String)>) {
        if !std::mem::take(&mut self.carry).is_empty() {
            self.parser.advance(&mut self.lines, "\u{fffd}".as_bytes());
        }
        self.lines.end();
        out.append(&mut self.lines.done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(chunks: &[&[u8]]) -> Vec<String> {
        let mut o = OutputText::default();
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            o.push(i as f64, c, &mut out);
        }
        o.finish(&mut out);
        out.into_iter().map(|(_, l)| l).collect()
    }

    #[test]
    fn escapes_are_left_out_and_lines_kept() {
        assert_eq!(
            text(&[b"\x1b[1;31mred\x1b[0m text\r\n$ ls\x08\x08ps\r\n\x1b]0;title\x07done"]),
            ["red text", "$ ps", "done"]
        );
        assert_eq!(
            text(&[b"\x1b[1;3", b"1mx\r", b"\ny"]),
            ["x", "y"],
            "split escapes"
        );
        assert_eq!(text(&["caf\u{e9}".as_bytes()]), ["café"]);
        assert_eq!(text(&[b"ab\x7f\x7fc"]), ["abc"], "DEL shows nothing");
        assert_eq!(
            text(&[b"caf\xc3", b"\xa9 ok"]),
            ["café ok"],
            "a character split"
        );
        assert_eq!(
            text(&[b"a\xffb\xe2\x82"]),
            ["a\u{fffd}b\u{fffd}"],
            "bad bytes"
        );
        assert_eq!(
            text(&[b"\xd6\xb6t\xff"]),
            text(&[b"\xd6", b"\xb6t", b"\xff"]),
            "the same however split"
        );
        let long = "x".repeat(MAX_LINE + 10);
        assert_eq!(text(&[long.as_bytes()]).len(), 2);
    }

    #[test]
    fn lines_carry_the_time_they_began() {
        let mut o = OutputText::default();
        let mut out = Vec::new();
        o.push(1.0, b"ab", &mut out);
        o.push(2.0, b"c\nd", &mut out);
        o.push(3.0, b"\n", &mut out);
        assert_eq!(out, [(1.0, "abc".to_owned()), (2.0, "d".to_owned())]);
    }
}
