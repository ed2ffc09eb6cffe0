//! The lines a user submitted, derived from the recorded input as a terminal's line editing
//! (readline, or the kernel's canonical mode) would have left them.
//!
//! Understood: printable text (UTF-8, split anywhere), Enter (CR or LF) submits; Backspace
//! (DEL or BS), Ctrl-U (to the start), Ctrl-W and Alt-Backspace (the word before the cursor),
//! Ctrl-K (to the end), Alt-D (the next word), Ctrl-D and Delete (the character under the
//! cursor), Ctrl-C (the line is abandoned); cursor moves (arrows, Home, End, Ctrl-A/E/B/F,
//! Alt-B/F) so that later edits land where the shell put them; bracketed paste (the pasted
//! text goes in whole, newlines included). Tab stays in the line as `\t`: the completion is
//! the shell's, which the input does not show.
//!
//! History is the shell's: Up, Down, Ctrl-P, Ctrl-N, Ctrl-R, Ctrl-S and Alt-. replace the line
//! with text the input does not contain. The line is then marked `recalled`, and holds only
//! what was typed after the recall, never a guess at the rest.
//!
//! Not seen: what a program reads from a file or a pipe, what a shell runs from a script, keys
//! a full-screen program (an editor, a pager) interprets differently, input a shell without
//! line editing treats otherwise. This is evidence of what was typed, not a record of what was
//! executed.

use poddebug_types::RecordingCommand;

/// Longest line kept, in characters (the rest of a longer line is dropped).
pub const MAX_LINE: usize = 4096;
/// Most commands one recording keeps (later ones are counted as dropped).
pub const MAX_COMMANDS: usize = 10_000;
/// Most bytes of command lines one recording keeps (later ones are counted as dropped).
pub const MAX_COMMAND_BYTES: usize = 256 << 10;
/// Longest escape sequence parsed before it is given up on.
const MAX_ESCAPE: usize = 32;

/// Where the editor is in the input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Text,
    /// After ESC.
    Escape,
    /// After ESC [ (its parameters so far).
    Csi(Vec<u8>),
    /// After ESC O.
    Ss3,
    /// Inside ESC ] … (BEL or ESC \ ends it).
    Osc,
}

/// The line editor (module docs).
#[derive(Debug, Default)]
pub struct LineEditor {
    line: Vec<char>,
    cursor: usize,
    recalled: bool,
    state: State,
    /// Inside a bracketed paste.
    paste: bool,
    /// Bytes of an unfinished UTF-8 character.
    utf8: Vec<u8>,
}

impl LineEditor {
    /// Feed `input` typed at session time `t`; the lines it submits are appended to `out`.
    pub fn push(&mut self, t: f64, input: &[u8], out: &mut Vec<RecordingCommand>) {
        for &b in input {
            self.byte(t, b, out);
        }
    }

    /// The line being typed (and whether it was recalled), not yet submitted.
    pub fn pending(&self) -> (String, bool) {
        (self.line.iter().collect(), self.recalled)
    }

    fn byte(&mut self, t: f64, b: u8, out: &mut Vec<RecordingCommand>) {
        match std::mem::take(&mut self.state) {
            State::Text => self.text(t, b, out),
            State::Escape => self.escape(b),
            State::Csi(mut params) => {
                if (0x40..=0x7e).contains(&b) {
                    self.csi(&params, b);
                } else if params.len() < MAX_ESCAPE {
                    params.push(b);
                    self.state = State::Csi(params);
                }
            }
            State::Ss3 => self.cursor_key(b),
            State::Osc => match b {
                0x07 => {}
                // ESC \ ends it: the backslash is then an escape of its own, ignored.
                0x1b => self.state = State::Escape,
                _ => self.state = State::Osc,
            },
        }
    }

    fn text(&mut self, t: f64, b: u8, out: &mut Vec<RecordingCommand>) {
        if b >= 0x80 || !self.utf8.is_empty() {
            return self.utf8_byte(b);
        }
        if self.paste {
            return match b {
                0x1b => self.state = State::Escape,
                b'\r' | b'\n' => self.insert('\n'),
                b'\t' => self.insert('\t'),
                0x20..=0x7e => self.insert(char::from(b)),
                _ => {}
            };
        }
        match b {
            b'\r' | b'\n' => self.submit(t, out),
            0x7f | 0x08 => self.backspace(),
            0x15 => {
                self.line.drain(..self.cursor);
                self.cursor = 0;
            }
            0x17 => self.rub_word(),
            0x0b => self.line.truncate(self.cursor),
            0x03 => self.clear(),
            0x04 => self.delete(),
            0x01 => self.cursor = 0,
            0x05 => self.cursor = self.line.len(),
            0x02 => self.cursor = self.cursor.saturating_sub(1),
            0x06 => self.cursor = (self.cursor + 1).min(self.line.len()),
            0x10 | 0x0e | 0x12 | 0x13 => self.recall(),
            b'\t' => self.insert('\t'),
            0x1b => self.state = State::Escape,
            0x20..=0x7e => self.insert(char::from(b)),
            _ => {}
        }
    }

    fn utf8_byte(&mut self, b: u8) {
        self.utf8.push(b);
        match std::str::from_utf8(&self.utf8) {
            Ok(s) => {
                let chars: Vec<char> = s.chars().collect();
                self.utf8.clear();
                for c in chars {
                    self.insert(c);
                }
            }
            Err(e) if e.error_len().is_none() && self.utf8.len() < 4 => {}
            Err(_) => {
                self.utf8.clear();
                self.insert('\u{fffd}');
            }
        }
    }

    fn escape(&mut self, b: u8) {
        match b {
            b'[' => self.state = State::Csi(Vec::new()),
            b'O' => self.state = State::Ss3,
            b']' => self.state = State::Osc,
            b'b' | b'B' => self.word_left(),
            b'f' | b'F' => self.word_right(),
            b'd' | b'D' => self.delete_word(),
            0x7f | 0x08 => self.rub_word(),
            b'.' | b'_' | b'<' | b'>' => self.recall(),
            _ => {}
        }
    }

    fn csi(&mut self, params: &[u8], fin: u8) {
        if fin != b'~' {
            return self.cursor_key(fin);
        }
        match params {
            b"200" => self.paste = true,
            b"201" => self.paste = false,
            _ if self.paste => {}
            b"1" | b"7" => self.cursor = 0,
            b"4" | b"8" => self.cursor = self.line.len(),
            b"3" => self.delete(),
            _ => {}
        }
    }

    fn cursor_key(&mut self, b: u8) {
        if self.paste {
            return;
        }
        match b {
            b'A' | b'B' => self.recall(),
            b'C' => self.cursor = (self.cursor + 1).min(self.line.len()),
            b'D' => self.cursor = self.cursor.saturating_sub(1),
            b'H' => self.cursor = 0,
            b'F' => self.cursor = self.line.len(),
            _ => {}
        }
    }

    fn insert(&mut self, c: char) {
        if self.line.len() < MAX_LINE {
            self.line.insert(self.cursor, c);
            self.cursor += 1;
        }
    }

    fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            self.line.remove(self.cursor);
        }
    }

    fn delete(&mut self) {
        if self.cursor < self.line.len() {
            self.line.remove(self.cursor);
        }
    }

    /// Where the word before the cursor begins (spaces before the cursor, then the word).
    fn word_start(&self) -> usize {
        let mut i = self.cursor;
        while i > 0 && self.line[i - 1].is_whitespace() {
            i -= 1;
        }
        while i > 0 && !self.line[i - 1].is_whitespace() {
            i -= 1;
        }
        i
    }

    fn word_end(&self) -> usize {
        let mut i = self.cursor;
        while i < self.line.len() && self.line[i].is_whitespace() {
            i += 1;
        }
        while i < self.line.len() && !self.line[i].is_whitespace() {
            i += 1;
        }
        i
    }

    fn rub_word(&mut self) {
        let start = self.word_start();
        self.line.drain(start..self.cursor);
        self.cursor = start;
    }

    fn delete_word(&mut self) {
        let end = self.word_end();
        self.line.drain(self.cursor..end);
    }

    fn word_left(&mut self) {
        self.cursor = self.word_start();
    }

    fn word_right(&mut self) {
        self.cursor = self.word_end();
    }

    /// The shell put a line from its history in place of this one: what is known of it is
    /// what is typed from now on.
    fn recall(&mut self) {
        self.line.clear();
        self.cursor = 0;
        self.recalled = true;
    }

    fn clear(&mut self) {
        self.line.clear();
        self.cursor = 0;
        self.recalled = false;
    }

    fn submit(&mut self, t: f64, out: &mut Vec<RecordingCommand>) {
        if !self.line.is_empty() || self.recalled {
            out.push(RecordingCommand {
                offset: t,
                line: self.line.iter().collect(),
                recalled: self.recalled,
            });
        }
        self.clear();
    }
}

/// The commands of one recording as they are derived: the line editor and what it submitted,
/// bounded by [`MAX_COMMANDS`] and [`MAX_COMMAND_BYTES`] (the first ones are kept).
#[derive(Debug, Default)]
pub struct CommandLog {
    editor: LineEditor,
    items: Vec<RecordingCommand>,
    bytes: usize,
    dropped: u64,
    /// Commands were submitted since [`CommandLog::take_changed`] last said so.
    changed: bool,
}

impl CommandLog {
    /// Feed input typed at session time `t`.
    pub fn push(&mut self, t: f64, input: &[u8]) {
        let mut submitted = Vec::new();
        self.editor.push(t, input, &mut submitted);
        for c in submitted {
            self.changed = true;
            if self.items.len() >= MAX_COMMANDS || self.bytes + c.line.len() > MAX_COMMAND_BYTES {
                self.dropped += 1;
                continue;
            }
            self.bytes += c.line.len();
            self.items.push(c);
        }
    }

    /// The commands kept, in the order they were submitted.
    pub fn items(&self) -> &[RecordingCommand] {
        &self.items
    }

    /// Commands submitted past the bounds.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Every command submitted, kept or dropped.
    pub fn count(&self) -> u32 {
        u32::try_from(self.items.len() as u64 + self.dropped).unwrap_or(u32::MAX)
    }

    /// Whether commands were submitted since the last call (then they are to be written).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// What was taken as written was not: say so again at the next call.
    pub fn mark_changed(&mut self) {
        self.changed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<(String, bool)> {
        let mut e = LineEditor::default();
        let mut out = Vec::new();
        e.push(1.0, input, &mut out);
        out.into_iter().map(|c| (c.line, c.recalled)).collect()
    }

    fn plain(input: &[u8]) -> Vec<String> {
        lines(input).into_iter().map(|(l, _)| l).collect()
    }

    #[test]
    fn editing_keys_leave_the_line_the_shell_ran() {
        assert_eq!(plain(b"ls -la\r"), ["ls -la"]);
        assert_eq!(plain(b"lss\x7f -l\r"), ["ls -l"], "backspace");
        assert_eq!(plain(b"rm -rf /\x15echo hi\r"), ["echo hi"], "Ctrl-U");
        assert_eq!(plain(b"cat foo bar\x17baz\r"), ["cat foo baz"], "Ctrl-W");
        assert_eq!(
            plain(b"cat foo  \x17\r"),
            ["cat "],
            "Ctrl-W eats spaces first"
        );
        assert_eq!(
            plain(b"sleep 100\x03id\r"),
            ["id"],
            "Ctrl-C abandons the line"
        );
        assert_eq!(plain(b"\r\n\r"), Vec::<String>::new(), "empty lines");
        assert_eq!(plain(b"one\r\ntwo\n"), ["one", "two"], "CR LF and LF");
        assert_eq!(
            plain(b"echo wrld\x1b[D\x1b[D\x1b[Do\r"),
            ["echo world"],
            "left"
        );
        assert_eq!(plain(b"cho\x01e\x05 x\r"), ["echo x"], "Ctrl-A and Ctrl-E");
        assert_eq!(
            plain(b"echo abc\x1b[H\x1b[3~X\r"),
            ["Xcho abc"],
            "Home, Delete"
        );
        assert_eq!(
            plain(b"echo abc\x1bOH\x1bOF!\r"),
            ["echo abc!"],
            "SS3 Home, End"
        );
        assert_eq!(plain(b"a b c\x1bb\x1bb\x0b\r"), ["a "], "Alt-B and Ctrl-K");
        assert_eq!(plain(b"one two\x1b\x7f\r"), ["one "], "Alt-Backspace");
        assert_eq!(plain(b"one two\x01\x1bd\r"), [" two"], "Alt-D");
        assert_eq!(plain(b"cat /etc/pas\t\r"), ["cat /etc/pas\t"], "Tab stays");
        assert_eq!(plain("café\r".as_bytes()), ["café"]);
        assert_eq!(plain(b"a\xffb\r"), ["a\u{fffd}b"]);
        assert_eq!(plain(b"x\x1b]0;title\x07y\r"), ["xy"], "OSC skipped");
        assert_eq!(plain(b"x\x1b]0;t\x1b\\y\r"), ["xy"], "OSC ended by ST");
    }

    #[test]
    fn recalled_lines_are_marked_and_hold_only_what_was_typed() {
        assert_eq!(lines(b"\x1b[A\r"), [(String::new(), true)]);
        assert_eq!(
            lines(b"ls\r\x1b[A | wc\r"),
            [("ls".into(), false), (" | wc".into(), true)]
        );
        assert_eq!(lines(b"\x1bOA\r"), [(String::new(), true)], "SS3 up");
        assert_eq!(lines(b"\x12ssh\r"), [("ssh".into(), true)], "Ctrl-R");
        assert_eq!(lines(b"\x1b[Aoops\x03id\r"), [("id".into(), false)]);
    }

    #[test]
    fn a_paste_goes_in_whole() {
        assert_eq!(
            plain(b"\x1b[200~cat <<EOF\rhi\rEOF\x1b[201~\r"),
            ["cat <<EOF\nhi\nEOF"]
        );
        // Without brackets, each newline submits.
        assert_eq!(plain(b"a\rb\r"), ["a", "b"]);
    }

    #[test]
    fn any_split_of_the_input_gives_the_same_lines() {
        let input = "ls -la\x1b[D\x1b[3~\rcafé \x17x\r\x1b[A!\r\x1b[200~p\rq\x1b[201~\r".as_bytes();
        let whole = lines(input);
        for split in 1..input.len() {
            let mut e = LineEditor::default();
            let mut out = Vec::new();
            for chunk in input.chunks(split) {
                e.push(1.0, chunk, &mut out);
            }
            let got: Vec<(String, bool)> = out.into_iter().map(|c| (c.line, c.recalled)).collect();
            assert_eq!(got, whole, "split {split}");
        }
    }

    #[test]
    fn lines_are_bounded() {
        let long = vec![b'x'; MAX_LINE + 100];
        let mut input = long.clone();
        input.push(b'\r');
        assert_eq!(plain(&input)[0].len(), MAX_LINE);
        // Runaway escape parameters end the sequence instead of growing.
        let mut e = LineEditor::default();
        let mut out = Vec::new();
        e.push(0.0, b"\x1b[", &mut out);
        e.push(0.0, &[b'1'; 10_000], &mut out);
        e.push(0.0, b"~ok\r", &mut out);
        assert!(out.len() <= 1);
    }

    #[test]
    fn a_log_keeps_the_first_commands_and_counts_the_rest() {
        let mut log = CommandLog::default();
        assert!(!log.take_changed());
        log.push(0.5, b"echo one\r");
        assert!(log.take_changed());
        assert!(!log.take_changed(), "told once");
        for _ in 0..MAX_COMMANDS + 5 {
            log.push(1.0, b"x\r");
        }
        assert_eq!(log.items().len(), MAX_COMMANDS);
        assert_eq!(log.items()[0].line, "echo one");
        assert_eq!(log.items()[0].offset, 0.5);
        assert_eq!(log.dropped(), 6);
        assert_eq!(log.count(), MAX_COMMANDS as u32 + 6);
        // Long lines stop at the byte bound first.
        let mut log = CommandLog::default();
        let mut line = vec![b'y'; MAX_LINE];
        line.push(b'\r');
        for _ in 0..(MAX_COMMAND_BYTES / MAX_LINE) + 3 {
            log.push(2.0, &line);
        }
        assert_eq!(log.items().len(), MAX_COMMAND_BYTES / MAX_LINE);
        assert_eq!(log.dropped(), 3);
    }
}
