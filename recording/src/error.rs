//! The crate's one error type.

/// What can go wrong with recordings outside of the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A signing key could not be made or read.
    #[error("recording signing key: {0}")]
    Key(String),
    /// A search index is not one this version reads.
    #[error("recording index: {0}")]
    Index(String),
    /// The text searched for cannot be searched for.
    #[error("{0}")]
    Search(String),
}
