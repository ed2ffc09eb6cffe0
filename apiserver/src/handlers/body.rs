//! Reading request bodies within the size limit.

use axum::body::Body;
use bytes::Bytes;
use poddebug_types::ApiError;

/// Read the whole body, or 413 if it is larger than `limit` bytes.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            || e.to_string().contains("length limit");
        if too_large {
            ApiError::RequestEntityTooLarge(format!(
                "the request body is larger than the limit of {limit} bytes"
            ))
        } else {
            ApiError::BadRequest("reading the request body failed".to_owned())
        }
    })
}
