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
