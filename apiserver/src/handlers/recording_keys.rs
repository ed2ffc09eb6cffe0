//! `GET /apis/poddebug.dev/v1alpha1/recordingkeys` and `…/recordingkeys/ID`: the public keys
//! recordings are signed with (a `RecordingKeyList`, a `RecordingKey`; JSON or a Table), the
//! active one and the retired ones still trusted. With them, a recording's bytes and its
//! evidence (`…/pods/POD/recordings/ID/evidence`), anyone can verify a recording without
//! trusting the server.
//!
//! Cluster-scoped; authorized by the handler chain as `list`/`get` on `recordingkeys` in
//! `poddebug.dev` (the auditor role grants both). Served from the keys this replica loaded from
//! the Secret at start-up, which every replica shares; 503 until they are loaded, 404 with
//! recording off.

use axum::extract::{Path, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use poddebug_recording::keys::Keys;
use poddebug_types::evidence::{RecordingKey, RecordingKeyList};
use poddebug_types::{ApiError, GROUP};
use serde_json::{Value, json};

use super::json_response;
use super::table::{column, table_row, wants_table};
use crate::error::Error;
use crate::state::AppState;

/// The keys, once loaded; 404 with recording off, 503 before they are loaded.
fn loaded(st: &AppState) -> Result<std::sync::Arc<Keys>, Error> {
    let recorder = st.recorder.as_deref().ok_or(ApiError::PathNotFound)?;
    recorder.store().signing_keys().ok_or_else(|| {
        ApiError::ServiceUnavailable(
            "the recording keys are not loaded yet (read from their Secret at start-up); \
             try again shortly"
                .to_owned(),
        )
        .into()
    })
}

/// The public keys, the active one first, then by id.
fn keys(k: &Keys) -> Vec<RecordingKey> {
    let active = k.active().id();
    let mut items: Vec<RecordingKey> = k
        .trusted()
        .iter()
        .map(|p| RecordingKey::new(p.id(), p.to_base64(), p.id() == active))
        .collect();
    items.sort_by(|a, b| {
        b.active
            .cmp(&a.active)
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    items
}

/// The Table `kubectl get recordingkeys` prints.
fn table(items: &[RecordingKey]) -> Value {
    let columns = vec![
        column("Name", "string", "name", "The key id", 0),
        column("Algorithm", "string", "", "The signature algorithm", 0),
        column(
            "Active",
            "boolean",
            "",
            "Whether it signs new recordings",
            0,
        ),
        column("Public Key", "string", "", "The raw public key, base64", 1),
    ];
    let rows: Vec<Value> = items
        .iter()
        .map(|k| {
            let cells = json!([
                k.metadata.name.clone().unwrap_or_default(),
                k.algorithm,
                k.active,
                k.public_key,
            ]);
            table_row(cells, k, &k.metadata, "Metadata")
        })
        .collect();
    super::table::envelope(json!({}), columns, rows)
}

/// `GET …/recordingkeys`.
pub async fn list(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, Error> {
    let loaded = loaded(&st)?;
    let items = keys(&loaded);
    if wants_table(&headers) {
        return json_response(StatusCode::OK, &table(&items));
    }
    json_response(StatusCode::OK, &RecordingKeyList::new(items))
}

/// `GET …/recordingkeys/ID`.
pub async fn get(
    State(st): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let loaded = loaded(&st)?;
    let key = keys(&loaded)
        .into_iter()
        .find(|k| k.metadata.name.as_deref() == Some(id.as_str()))
        .ok_or_else(|| Error::from(ApiError::not_found("recordingkeys", GROUP, &id)))?;
    if wants_table(&headers) {
        return json_response(StatusCode::OK, &table(std::slice::from_ref(&key)));
    }
    json_response(StatusCode::OK, &key)
}
