//! Fuzz targets for poddebug's parsers and a small mutation engine that drives them on the
//! stable toolchain.
//!
//! Each [`Target`] is a function of arbitrary bytes that must never panic and checks its own
//! invariants (it panics when one breaks). The engine feeds a target its seed inputs, then
//! mutations and splices of them and of random bytes, for a bounded number of runs or a
//! bounded time. There is no coverage feedback: the seeds are chosen to reach each parser's
//! branches, and the mutations keep inputs close to them.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod engine;
pub mod targets;

pub use engine::{Budget, Crash, Outcome, run};
pub use targets::{TARGETS, Target, target};
