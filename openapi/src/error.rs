//! Errors of this crate.

/// Why the documents could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A document could not be serialized as JSON.
    #[error("cannot serialize the {document} document")]
    Serialize {
        /// Which document.
        document: &'static str,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
}
