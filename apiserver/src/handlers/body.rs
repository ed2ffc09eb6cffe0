//! Reading request bodies within the size limit.

use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
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

/// Bodies are JSON: a request that declares another media type is answered 415 as
/// kube-apiserver answers an unknown one (a missing `Content-Type` is taken as JSON).
pub fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(ct) = headers.get(http::header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = ct
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media.is_empty() || media == "application/json" || media == "*/*" {
        return Ok(());
    }
    Err(ApiError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format - accepted media types include: application/json (got {media:?})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_bodies_are_accepted() {
        let mut h = HeaderMap::new();
        assert!(require_json(&h).is_ok());
        h.insert(
            http::header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(require_json(&h).is_ok());
        h.insert(
            http::header::CONTENT_TYPE,
            "application/yaml".parse().unwrap(),
        );
        let e = require_json(&h).unwrap_err();
        assert_eq!(e.code(), 415);
        assert_eq!(e.reason(), "UnsupportedMediaType");
    }
}
