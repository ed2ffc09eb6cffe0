//! `GET …/pods/POD/recordings` (the pod's session recordings, a `RecordingList`) and
//! `GET …/pods/POD/recordings/ID` (one recording, `application/x-asciicast`).
//!
//! The handler chain has authorized `get` on `pods/recordings` in `poddebug.dev` and checked
//! the namespace and pod names; the id is checked here against the one shape ids have before it
//! names a file. Recordings outlive their pod, so the pod is not looked up. With recording off,
//! the paths do not exist (404).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use poddebug_types::{ApiError, GROUP, KIND_RECORDING_LIST, RecordingList, VERSION};

use super::json_response;
use crate::error::Error;
use crate::recording::Recorder;
use crate::recording::store::valid_id;
use crate::state::AppState;

/// Media type of one recording.
pub const ASCIICAST: &str = "application/x-asciicast";

fn recorder(st: &AppState) -> Result<&Recorder, Error> {
    st.recorder
        .as_deref()
        .ok_or_else(|| ApiError::PathNotFound.into())
}

fn storage_failed(e: &std::io::Error) -> Error {
    tracing::warn!(error = %e, "reading recordings failed");
    ApiError::Internal("reading the recordings failed".to_owned()).into()
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/recordings`.
pub async fn list(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
) -> Result<Response, Error> {
    let items = recorder(&st)?
        .store()
        .list(&ns, &pod)
        .await
        .map_err(|e| storage_failed(&e))?;
    json_response(
        StatusCode::OK,
        &RecordingList {
            api_version: format!("{GROUP}/{VERSION}"),
            kind: KIND_RECORDING_LIST.to_owned(),
            metadata: Default::default(),
            items,
        },
    )
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/recordings/ID`.
pub async fn get(
    State(st): State<AppState>,
    Path((ns, pod, id)): Path<(String, String, String)>,
) -> Result<Response, Error> {
    let store = recorder(&st)?.store();
    let not_found = || Error::from(ApiError::not_found("recordings", GROUP, &id));
    if !valid_id(&id) {
        return Err(not_found());
    }
    let file = match tokio::fs::File::open(store.cast_path(&ns, &pod, &id)).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
        Err(e) => return Err(storage_failed(&e)),
    };
    let mut resp = Response::new(Body::from_stream(tokio_util::io::ReaderStream::new(file)));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ASCIICAST));
    // A recording holds whatever the session printed: never a document a browser runs.
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    Ok(resp)
}
