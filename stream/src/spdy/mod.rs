//! SPDY/3.1 as the remote-command protocols use it (moby/spdystream, client-go, the kubelet):
//! [`frame`] cuts and writes frames, [`headers`] reads and writes header blocks,
//! [`ClientSide`] terminates the client's side (parsed frames, re-encoded), [`ServerSide`]
//! follows the upstream's frames to the client.
//!
//! Flow control is not implemented: spdystream ignores WINDOW_UPDATE too (the relay passes the
//! client's on).

mod client;
pub mod dictionary;
pub mod frame;
pub mod headers;
mod server;

pub use client::{ClientFrame, ClientSide, MAX_DATA_FRAME, Streams};
pub use headers::StreamType;
pub use server::ServerSide;
