//! What a client's side of an attach may carry: the streams (SPDY) and channels (WebSocket) that
//! the negotiated request and the caller's session mode grant, judged on what the relay parsed.
//!
//! The kubelet attaches whatever streams a SPDY client opens, whatever the attach query said: a
//! `stdin` stream on a request without `stdin=true` reaches the container's stdin all the same.
//! So the query cannot be what decides; the relay does, on each stream a client opens and each
//! message it sends:
//! - stdin only when the request asked for it (`stdin=true`) **and** the caller's mode may type
//!   (the owner and peers; never an observer or a moderator);
//! - terminal sizes only when the request asked for a TTY (`tty=true`);
//! - the error, stdout and stderr streams always (a client reads them; it never writes them,
//!   which the framings already refuse).
//!
//! A stream or message beyond that ends the session with a `403 Forbidden` `Status` saying what
//! was refused ([`crate::Ending::ungranted`]); nothing of it is forwarded. A v5 close signal of a
//! channel that was not granted carries no data and is dropped. Unknown or repeated SPDY stream
//! types are refused by the framing itself ([`crate::spdy::ClientSide`]).

use crate::request::AttachOptions;
use crate::spdy::StreamType;

/// The streams a session may carry from the client (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grants {
    /// Input for the container's stdin.
    pub stdin: bool,
    /// Terminal sizes.
    pub resize: bool,
}

impl Grants {
    /// Everything a client may write: stdin and resizes.
    pub const ALL: Grants = Grants {
        stdin: true,
        resize: true,
    };

    /// What a request with `options` grants a caller whose mode may type (`may_type`) or not.
    pub fn of(options: &AttachOptions, may_type: bool) -> Grants {
        Grants {
            stdin: options.stdin && may_type,
            resize: options.tty,
        }
    }

    /// Why a stream of `kind` opened by the client is refused, or `None` when it is granted.
    pub fn refusal(&self, kind: StreamType) -> Option<String> {
        match kind {
            StreamType::Stdin if !self.stdin => Some(self.stdin_refusal("a stdin stream")),
            StreamType::Resize if !self.resize => Some(
                "a resize stream, but the attach did not ask for a terminal (tty=true)".to_owned(),
            ),
            _ => None,
        }
    }

    /// Why input (a stdin message) is refused, or `None` when it is granted.
    pub fn input_refusal(&self) -> Option<String> {
        (!self.stdin).then(|| self.stdin_refusal("input on the stdin channel"))
    }

    /// Why a terminal size message is refused, or `None` when it is granted.
    pub fn resize_refusal(&self) -> Option<String> {
        (!self.resize).then(|| {
            "a terminal size, but the attach did not ask for a terminal (tty=true)".to_owned()
        })
    }

    fn stdin_refusal(&self, what: &str) -> String {
        format!(
            "{what}, but this session takes no input: input needs stdin=true on the attach and \
             a session mode that may type (the container's owner, or a peer)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(stdin: bool, tty: bool) -> AttachOptions {
        AttachOptions {
            container: "dbg".to_owned(),
            stdin,
            stdout: true,
            stderr: false,
            tty,
        }
    }

    #[test]
    fn stdin_needs_the_request_and_a_mode_that_types() {
        for (stdin, may_type, granted) in [
            (true, true, true),
            (true, false, false),
            (false, true, false),
            (false, false, false),
        ] {
            let g = Grants::of(&options(stdin, true), may_type);
            assert_eq!(g.stdin, granted, "stdin={stdin} may_type={may_type}");
            assert_eq!(g.refusal(StreamType::Stdin).is_none(), granted);
            assert_eq!(g.input_refusal().is_none(), granted);
        }
    }

    #[test]
    fn resizes_need_a_tty_and_output_streams_are_always_granted() {
        let g = Grants::of(&options(true, false), true);
        assert!(g.refusal(StreamType::Resize).is_some());
        assert!(g.resize_refusal().is_some());
        for kind in [StreamType::Error, StreamType::Stdout, StreamType::Stderr] {
            assert_eq!(g.refusal(kind), None, "{kind:?}");
        }
        let g = Grants::of(&options(false, true), false);
        assert_eq!(g.refusal(StreamType::Resize), None);
        assert!(
            g.refusal(StreamType::Stdin)
                .is_some_and(|why| why.contains("stdin=true")),
        );
    }
}
