//! poddebug's session recordings, apart from the server's HTTP side.
//!
//! - [`asciicast`]: the file format (asciicast v2);
//! - [`commands`]: the lines a user submitted, derived from the recorded input;
//! - [`text`], [`index`]: the text of a recording's output, and the search index of its
//!   commands and output written with it;
//! - [`chain`], [`signing`], [`keys`], [`statement`], [`verify`]: what makes a recording
//!   evidence: the SHA-256 of each part, the hash chain over them, the Ed25519 signature of the
//!   metadata, the server's keys, and the verification a server or a third party holding only
//!   the public keys makes.
//!
//! With the feature `recorder`, the server's side too ([`recorder`]): the relay's tap, the
//! writer, the object store, the bounds on memory, rate and quota, and the flags.
#![warn(missing_docs)]
// Tests may panic on purpose; the lint guards the code that runs in the server.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod asciicast;
pub mod chain;
pub mod commands;
pub mod error;
pub mod index;
pub mod keys;
pub mod range;
pub mod signing;
pub mod statement;
pub mod text;
pub mod verify;

pub use error::Error;

#[cfg(feature = "recorder")]
pub mod recorder;
#[cfg(feature = "recorder")]
pub use recorder::{
    Finished, Marker, Recorder, RecordingMode, RecordingOptions, Session, SessionInfo, Tap,
    exit_code_of_status,
};
