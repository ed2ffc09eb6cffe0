//! Content hashes of the served documents, as kube-openapi computes them for `ETag`s and the
//! `?hash=` of the OpenAPI v3 index.

use sha2::{Digest, Sha512};

/// Upper-case hex SHA-512 of `bytes`, as kube-openapi computes `ETag`s and `?hash=`.
pub fn content_hash(bytes: &[u8]) -> String {
    Sha512::digest(bytes)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

/// The `ETag` header value of `bytes`: their [`content_hash`], quoted.
pub fn etag(bytes: &[u8]) -> String {
    format!("\"{}\"", content_hash(bytes))
}
