//! poddebug's session recordings, apart from the server's HTTP side.
//!
//! - [`asciicast`]: the file format (asciicast v2);
//! - [`commands`]: the lines a user submitted, derived from the recorded input.
//!
//! With the feature `recorder`, the server's side too ([`recorder`]): the relay's tap, the
//! writer, the object store, the bounds on memory, rate and quota, and the flags.
#![warn(missing_docs)]
// Tests may panic on purpose; the lint guards the code that runs in the server.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod asciicast;
pub mod commands;

#[cfg(feature = "recorder")]
pub mod recorder;
#[cfg(feature = "recorder")]
pub use recorder::{
    Finished, Marker, Recorder, RecordingMode, RecordingOptions, Session, SessionInfo, Tap,
    exit_code_of_status,
};
