//! Errors of the server, and the one place where an error becomes an HTTP response carrying a
//! complete Kubernetes `Status`.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use poddebug_storage::StorageError;
use poddebug_types::ApiError;

/// Failures that stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Bad flags; every problem is listed.
    #[error("invalid flags:\n  {}", .0.join("\n  "))]
    Flags(Vec<String>),
    /// Certificates, keys or CA bundles could not be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The kubeconfig could not be loaded.
    #[error("loading cluster configuration from {what}")]
    Kubeconfig {
        /// Which kubeconfig.
        what: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The discovery or OpenAPI documents could not be built (a bug).
    #[error("building the API documents: {0}")]
    Documents(String),
    /// The listener could not be bound.
    #[error("binding {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A request failure. Handlers return `Result<_, Error>` and never build error bodies.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A client-visible API error.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// A storage failure, mapped by the storage's own rules.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Error {
    /// The API error a client sees.
    pub fn api_error(&self) -> ApiError {
        match self {
            Error::Api(e) => e.clone(),
            Error::Storage(e) => e.to_api_error(),
        }
    }
}

/// Turn an API error into the response: the Status as JSON, its code, and `Retry-After` when
/// the error asks the client to come back.
pub fn status_response(err: &ApiError) -> Response {
    let code = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (code, err.to_json()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = err.retry_after_seconds()
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp.extensions_mut()
        .insert(ReportedError(err.reason().to_owned()));
    resp
}

/// Marker put on error responses so the request log can name the reason.
#[derive(Clone, Debug)]
pub struct ReportedError(pub String);

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let api = self.api_error();
        if let Error::Storage(StorageError::Kube(e)) = &self {
            // The client sees a generic message; the cause stays in the server's log.
            tracing::warn!(error = %e, "kubernetes API call failed");
        }
        status_response(&api)
    }
}

impl IntoResponse for ApiErrorResponse {
    fn into_response(self) -> Response {
        status_response(&self.0)
    }
}

/// Wrapper to answer an `ApiError` directly from middleware.
#[derive(Debug)]
pub struct ApiErrorResponse(pub ApiError);
