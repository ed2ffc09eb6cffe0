//! The screen a recording's output draws (a `vt100` terminal without scrollback), kept by the
//! writer so that each part but the first has a keyframe: what redraws the screen as it was
//! when the part begins, stored beside the part (`NNNNNNNN.key`, never inside it: the parts
//! concatenated stay the exact asciicast). A player seeking into a long recording draws the
//! keyframe of the part that holds the time sought, then that part from its start, instead of
//! every part before it.

use std::num::NonZeroU16;

/// Most columns the screen keeps: a client's resize to a huge terminal must not make the
/// recorder hold a huge screen (what is past the bounds is not in the keyframe).
pub const MAX_COLUMNS: u16 = 400;
/// Most rows.
pub const MAX_ROWS: u16 = 200;

fn dim(n: u16, max: u16) -> NonZeroU16 {
    NonZeroU16::new(n.min(max)).unwrap_or(NonZeroU16::MIN)
}

/// The screen (module docs).
pub struct Screen {
    parser: vt100::Parser,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("size", &self.parser.screen().size())
            .finish_non_exhaustive()
    }
}

impl Screen {
    /// A blank screen of `width` columns and `height` rows.
    pub fn new(width: u16, height: u16) -> Screen {
        Screen {
            parser: vt100::Parser::new(dim(height, MAX_ROWS), dim(width, MAX_COLUMNS), 0),
        }
    }

    /// The terminal was resized.
    pub fn resize(&mut self, width: u16, height: u16) {
        self.parser
            .set_size(dim(height, MAX_ROWS), dim(width, MAX_COLUMNS));
    }

    /// Output drawn on it.
    pub fn feed(&mut self, output: &[u8]) {
        self.parser.process(output);
    }

    /// What draws the screen as it is now on a reset terminal of its size (cleared first).
    pub fn keyframe(&self) -> String {
        let mut k = String::from("\u{1b}[H\u{1b}[2J");
        k.push_str(&self.parser.screen().state_formatted());
        k
    }

    /// The text on it (tests, diagnostics).
    pub fn contents(&self) -> String {
        self.parser.screen().contents()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyframe_redraws_the_screen() {
        let mut s = Screen::new(20, 4);
        s.feed(b"one\r\n\x1b[1mtwo\x1b[0m\r\nthree\r\nfour\r\nfive");
        let k = s.keyframe();
        let mut again = Screen::new(20, 4);
        again.feed(b"something else\r\n");
        again.feed(k.as_bytes());
        assert_eq!(again.contents(), s.contents());
        assert_eq!(again.contents(), "two\nthree\nfour\nfive");
        assert!(k.contains("\u{1b}[1m"), "attributes kept");
        s.resize(10, 2);
        s.feed(b"\r\nsix");
        assert_eq!(s.contents(), "five\nsix");
        let _ = Screen::new(0, 0);
        // A client's huge terminal is held at the bounds.
        let mut huge = Screen::new(u16::MAX, u16::MAX);
        let size = |s: &Screen| {
            let (r, c) = s.parser.screen().size();
            (r.get(), c.get())
        };
        assert_eq!(size(&huge), (MAX_ROWS, MAX_COLUMNS));
        huge.resize(u16::MAX, 3);
        assert_eq!(size(&huge), (3, MAX_COLUMNS));
    }
}
