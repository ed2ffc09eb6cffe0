//! The crate's one error type.

/// What can go wrong with recordings outside of the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A signing key could not be made or read.
    #[error("recording signing key: {0}")]
    Key(String),
}
