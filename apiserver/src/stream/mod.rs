//! The attach and log stream machinery: protocol negotiation, the upstream dialer, the
//! WebSocket and SPDY framings, and the relay. The HTTP handlers that use it are in
//! [`crate::handlers::streams`].

pub mod ending;
pub mod moderation;
pub mod protocol;
pub mod relay;
pub mod spdy_dictionary;
pub mod spdy_frames;
pub mod spdy_headers;
pub mod upstream;
pub mod websocket_frames;

pub use upstream::Upstream;

/// What is escaped in a path segment or query value sent upstream: everything but the
/// unreserved characters of RFC 3986 (letters, digits, `-`, `.`, `_`, `~`), so DNS names pass
/// as they are.
pub const URL_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
