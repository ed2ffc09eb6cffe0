//! poddebug's attach streams, on their own: the WebSocket (`v5.channel.k8s.io`,
//! `v4.channel.k8s.io`, their base64 variants and the older ones) and SPDY/3.1 framings of the
//! Kubernetes remote-command protocols, the termination of the client's side of each, and the
//! relay between a client and kube-apiserver's core `pods/attach`.
//!
//! # What "terminated" means here
//! The relay never passes the client's bytes on. It parses them the way the kubelet (and
//! kube-apiserver's stream translator) would, decides on the parsed message, and writes upstream
//! a message it encoded itself:
//! - WebSocket ([`websocket::ClientSide`]): frames are unmasked and reassembled into whole
//!   messages (fragments, control frames between them, a size limit per message); each message
//!   is read as the kubelet reads it (channel byte, or the base64 variants' digit and payload) and
//!   re-encoded as one masked frame of poddebug's own.
//! - SPDY ([`spdy::ClientSide`]): every header block is inflated in the client's compression
//!   context and read as spdystream reads it (lower-case names, no duplicates, values split on
//!   NUL with the first one winning); a stream whose type is not exactly one the kubelet serves
//!   ends the session. Upstream gets header blocks poddebug compressed in its own context, with
//!   the canonical stream type only.
//!
//! What is moderated (a [`Gate`]), recorded (a [`Recorder`]) and forwarded is therefore one and
//! the same parsed message; something poddebug cannot classify unambiguously is refused (the
//! session ends with a `Status` on its error channel), never forwarded.
//!
//! The upstream's side (kube-apiserver's frames) is parsed too ([`websocket::ServerSide`],
//! [`spdy::ServerSide`]): the relay writes frames of its own framing to the client (the payload
//! bytes are passed on as they are), learns where messages begin and end so that it can add its
//! own (a moderation notice, the ending Status), and hands output to the recorder.
//!
//! # Modules
//! - [`request`]: the typed attach request (upgrade, options, requested session mode), the header
//!   allowlists of both hops, and what the upstream's 101 negotiated;
//! - [`channel`]: the messages of the remote-command protocols as the relay sees them;
//! - [`websocket`], [`spdy`]: the framings, each with its client and server side;
//! - [`relay`]: the two pumps, the drain signal, the idle timeout, notices and endings;
//! - [`ending`], [`gate`], [`grants`]: how the server ends a stream, the moderation gate, and
//!   what a client may send at all.
//!
//! This crate knows nothing of the server's options, its metrics or its recording format: the
//! server implements [`Meter`] and [`Recorder`].
// `ApiError` carries a whole Status (names, causes); a refused request is the rare path, so
// boxing it would cost more readability than the copies cost time.
#![allow(clippy::result_large_err)]

pub mod channel;
pub mod ending;
pub mod gate;
pub mod grants;
pub mod relay;
pub mod request;
pub mod spdy;
pub mod websocket;

pub use channel::{Recorded, TerminalSize};
pub use ending::{EndSignal, Ending};
pub use gate::Gate;
pub use grants::Grants;
pub use relay::{Controls, Meter, Recorder, relay};
pub use request::{AttachOptions, AttachRequest, Negotiated, UpgradeKind};

/// What is escaped in a path segment or query value sent upstream: everything but the
/// unreserved characters of RFC 3986 (letters, digits, `-`, `.`, `_`, `~`), so DNS names pass
/// as they are.
pub const URL_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a stream cannot go on: bytes that are not the protocol, or a message poddebug will not
/// forward. The relay ends the session with this text in a `Status`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

impl ProtocolError {
    pub(crate) fn new(s: impl Into<String>) -> ProtocolError {
        ProtocolError(s.into())
    }
}
