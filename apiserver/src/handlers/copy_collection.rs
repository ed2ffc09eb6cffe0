//! The `poddebugcopies` collection: every copy of a pod, in one namespace
//! (`…/namespaces/NS/poddebugcopies[/NAME]`) or in all (`…/poddebugcopies`), listed, read and
//! watched as `kubectl get poddebugcopies` asks (JSON or a Table). A copy is a pod, so its name
//! is the pod's, unique in its namespace; `pods/POD/copies` lists the copies of one pod.
//!
//! The chain authorizes `get`/`list`/`watch` on `poddebugcopies`; the pods are read as
//! `pods/POD/copies` reads them (as the caller under `--impersonate`).

use std::collections::BTreeMap;

use axum::Extension;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, StatusCode};
use poddebug_storage::{CopySelection, CopyWatchEvent};
use poddebug_types::ApiError;
use poddebug_types::copy::{KIND_POD_DEBUG_COPY, PodDebugCopy};
use serde_json::{Value, json};

use super::json_response;
use crate::authn::Authenticated;
use crate::error::Error;
use crate::state::AppState;

/// The resource's name, as discovery, RBAC and errors spell it.
const RESOURCE: &str = "poddebugcopies";

/// `GET /apis/poddebug.dev/v1alpha1/poddebugcopies` (all namespaces).
pub async fn all_namespaces(
    State(st): State<AppState>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    list_or_watch(st, None, auth, headers, q).await
}

/// `GET .../namespaces/NS/poddebugcopies`.
pub async fn in_namespace(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    list_or_watch(st, Some(ns), auth, headers, q).await
}

/// `GET .../namespaces/NS/poddebugcopies/NAME`.
pub async fn get_one(
    State(st): State<AppState>,
    Path((ns, name)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let copy = st
        .backend
        .get_any_copy(&ns, &name, &auth.user)
        .await
        .map_err(|e| {
            // The name the client asked for, in this resource's terms.
            if e.to_api_error().code() == 404 {
                Error::Api(ApiError::not_found(RESOURCE, poddebug_types::GROUP, &name))
            } else {
                Error::Storage(e)
            }
        })?;
    if super::table::wants_table(&headers) {
        return json_response(
            StatusCode::OK,
            &table(
                std::slice::from_ref(&copy),
                None,
                super::table::include_object(&q),
            ),
        );
    }
    json_response(StatusCode::OK, &copy)
}

fn selection(
    namespace: Option<String>,
    q: &BTreeMap<String, String>,
) -> Result<CopySelection, Error> {
    let limit = super::paging::parse_limit(q.get("limit").map(String::as_str))?
        .map(|l| u32::try_from(l).unwrap_or(u32::MAX));
    Ok(CopySelection {
        namespace,
        label_selector: q.get("labelSelector").cloned(),
        field_selector: q.get("fieldSelector").cloned(),
        limit,
        continue_token: q.get("continue").cloned(),
    })
}

async fn list_or_watch(
    st: AppState,
    namespace: Option<String>,
    auth: Authenticated,
    headers: HeaderMap,
    q: BTreeMap<String, String>,
) -> Result<Response, Error> {
    let selection = selection(namespace, &q)?;
    let wants_table = super::table::wants_table(&headers);
    if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
        return watch(st, &selection, auth, wants_table, &q).await;
    }
    let list = st.backend.list_all_copies(&selection, &auth.user).await?;
    if wants_table {
        let mut table = table(
            &list.items,
            list.metadata.resource_version.as_deref(),
            super::table::include_object(&q),
        );
        // kubectl get pages Tables too (--chunk-size): the token rides in their metadata.
        if let Some(token) = &list.metadata.continue_ {
            table["metadata"]["continue"] = json!(token);
            table["metadata"]["remainingItemCount"] = json!(list.metadata.remaining_item_count);
        }
        return json_response(StatusCode::OK, &table);
    }
    json_response(StatusCode::OK, &list)
}

/// A newline-delimited JSON watch, as kube-apiserver streams one (each object a Table when the
/// client asked for Tables, as `kubectl get -w` does).
async fn watch(
    st: AppState,
    selection: &CopySelection,
    auth: Authenticated,
    wants_table: bool,
    q: &BTreeMap<String, String>,
) -> Result<Response, Error> {
    let rv = q
        .get("resourceVersion")
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| "0".to_owned());
    let timeout =
        super::debug::seconds(q, "timeoutSeconds")?.map(|t| u32::try_from(t).unwrap_or(u32::MAX));
    let length = super::watch::watch_length(q)?;
    let events = st
        .backend
        .watch_copies(selection, &rv, timeout, &auth.user)
        .await?;
    let lines = events.map(move |ev| encode(ev, wants_table));
    Ok(super::watch::streamed(&st, Vec::new(), lines, length))
}

/// One watch event as a line.
fn encode(ev: CopyWatchEvent, wants_table: bool) -> Bytes {
    let object = |o: &PodDebugCopy| {
        if wants_table {
            let rv = o.metadata.resource_version.clone();
            table(std::slice::from_ref(o), rv.as_deref(), "Metadata")
        } else {
            serde_json::to_value(o).unwrap_or(Value::Null)
        }
    };
    let (ty, object) = match ev {
        CopyWatchEvent::Added(o) => ("ADDED", object(&o)),
        CopyWatchEvent::Modified(o) => ("MODIFIED", object(&o)),
        CopyWatchEvent::Deleted(o) => ("DELETED", object(&o)),
        CopyWatchEvent::Bookmark(rv) => {
            let metadata = json!({"resourceVersion": rv});
            let object = if wants_table {
                super::table::envelope(metadata, Vec::new(), Vec::new())
            } else {
                json!({"kind": KIND_POD_DEBUG_COPY, "apiVersion": poddebug_types::API_VERSION,
                       "metadata": metadata})
            };
            ("BOOKMARK", object)
        }
        CopyWatchEvent::Error(e) => (
            "ERROR",
            serde_json::from_slice(&e.to_json()).unwrap_or(Value::Null),
        ),
    };
    let mut line = serde_json::to_vec(&json!({"type": ty, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// A Table of copies, as `kubectl get poddebugcopies` shows it.
fn table(items: &[PodDebugCopy], resource_version: Option<&str>, include: &str) -> Value {
    use super::table::{column, human_age, table_row};
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let st = o.status.clone().unwrap_or_default();
            let cells = json!([
                o.metadata.name.clone().unwrap_or_default(),
                st.source_pod,
                st.phase,
                st.debug_container_name
                    .unwrap_or_else(|| "<none>".to_owned()),
                st.node_name.unwrap_or_else(|| "<none>".to_owned()),
                st.created_by.unwrap_or_default(),
                st.expires_at
                    .map(|t| t.0.to_string())
                    .unwrap_or_else(|| "<none>".to_owned()),
                human_age(o.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
            ]);
            table_row(cells, o, &o.metadata, include)
        })
        .collect();
    super::table::envelope(
        super::table::list_meta(resource_version),
        vec![
            column(
                "Name",
                "string",
                "name",
                "Name of the copy (its pod's name)",
                0,
            ),
            column("Copy Of", "string", "", "The pod copied", 0),
            column("Phase", "string", "", "The copy's pod phase", 0),
            column(
                "Debug Container",
                "string",
                "",
                "The debug container added to the copy",
                0,
            ),
            column("Node", "string", "", "The node the copy runs on", 1),
            column("Created By", "string", "", "The user who made it", 1),
            column("Expires", "string", "", "When the server deletes it", 1),
            column("Age", "string", "", "Time since creation", 0),
        ],
        rows,
    )
}
