//! WebSocket (RFC 6455) as the remote-command protocols use it: [`frame`] reads and writes
//! frames, [`ClientSide`] terminates the client's side (whole messages, re-encoded),
//! [`ServerSide`] follows the upstream's frames to the client.

mod client;
pub mod frame;
mod server;

pub use client::{ClientMessage, ClientSide, MAX_MESSAGE};
pub use server::ServerSide;
