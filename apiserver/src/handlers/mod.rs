//! HTTP handlers: they parse, authorize what the chain cannot know yet (profiles), call the
//! storage (or, for attach and log, the stream dialer in [`crate::upstream`] and the relay of
//! `poddebug-stream`), and encode. No Kubernetes call is made here directly.

pub mod admission;
pub mod attach;
pub mod body;
pub mod copies;
pub mod copy_collection;
pub mod debug;
pub mod discovery;
pub mod health;
pub mod list;
pub mod log;
pub(crate) mod moderated;
pub mod nodes;
pub mod paging;
pub mod portal;
pub mod profiles;
pub mod recording_keys;
pub mod recording_search;
pub mod recordings;
pub mod requests;
pub mod selection;
pub mod sessions;
pub mod table;
pub mod watch;

use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde::Serialize;

use crate::error::Error;
use poddebug_types::ApiError;

/// A JSON response with `Content-Type: application/json`.
pub fn json_response<T: Serialize>(code: StatusCode, value: &T) -> Result<Response, Error> {
    let body = serde_json::to_vec(value)
        .map_err(|_| ApiError::Internal("encoding the response failed".to_owned()))?;
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// 404 for any path this server does not serve.
pub async fn not_found() -> Error {
    Error::Api(ApiError::PathNotFound)
}
