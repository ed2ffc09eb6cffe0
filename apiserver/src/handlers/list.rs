//! Lists of debug containers (`poddebugcontainers`, and `pods/POD/debug`), as JSON, as a
//! Table, or as a watch.

use std::collections::BTreeMap;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use poddebug_storage::ListOptions;
use poddebug_types::ApiError;

use super::json_response;
use super::selection::{qualify, split_field_selector};
use crate::authn::Authenticated;
use crate::error::Error;
use crate::state::AppState;

/// Answer a list (or a watch when `?watch=true`).
pub async fn respond(
    st: AppState,
    mut opts: ListOptions,
    auth: Authenticated,
    headers: HeaderMap,
    q: BTreeMap<String, String>,
    qualify_names: bool,
) -> Result<Response, Error> {
    opts.label_selector = q.get("labelSelector").filter(|s| !s.is_empty()).cloned();
    let (names, fields) = split_field_selector(q.get("fieldSelector").map_or("", String::as_str));
    opts.field_selector = fields;
    // `metadata.name=POD.NAME` (what `kubectl get pdc POD.NAME -w` sends) needs only that pod.
    if qualify_names
        && opts.pod.is_none()
        && let [one] = names.equal.as_slice()
        && let Some((pod, _)) = poddebug_types::resource::split_collection_name(one)
    {
        opts.pod = Some(pod.to_owned());
    }
    let table = super::table::wants_table(&headers);
    if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
        return super::watch::respond(st, opts, auth, table, q, qualify_names, names).await;
    }
    let mut list = st.backend.list(&opts, &auth.user).await?;
    if qualify_names {
        list.items.iter_mut().for_each(qualify);
    }
    list.items.retain(|o| names.matches(o));
    let limit = super::paging::parse_limit(q.get("limit").map(String::as_str))?;
    super::paging::page(
        &mut list,
        limit,
        q.get("continue").map(String::as_str),
        jiff::Timestamp::now().as_second(),
    )?;
    if table {
        let include = super::table::include_object(&q);
        let mut table = super::table::table(
            &list.items,
            list.metadata.resource_version.as_deref(),
            include,
        );
        // kubectl get pages Tables too (--chunk-size): the token rides in their metadata.
        if let Some(token) = &list.metadata.continue_ {
            table["metadata"]["continue"] = serde_json::json!(token);
            table["metadata"]["remainingItemCount"] =
                serde_json::json!(list.metadata.remaining_item_count);
        }
        return json_response(StatusCode::OK, &table);
    }
    json_response(StatusCode::OK, &list)
}

/// `GET /apis/poddebug.dev/v1alpha1/poddebugcontainers` (all namespaces).
pub async fn all_namespaces(
    State(st): State<AppState>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    respond(st, ListOptions::default(), auth, headers, q, true).await
}

/// `GET .../namespaces/NS/poddebugcontainers`.
pub async fn in_namespace(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    respond(
        st,
        ListOptions {
            namespace: Some(ns),
            ..Default::default()
        },
        auth,
        headers,
        q,
        true,
    )
    .await
}

/// `GET .../namespaces/NS/poddebugcontainers/POD.NAME`: the object name joins pod and debug
/// container with a dot. Pod names may contain dots and debug container names (DNS labels)
/// cannot, so the split is at the last dot.
pub async fn get_one(
    State(st): State<AppState>,
    Path((ns, full)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let Some((pod, name)) = poddebug_types::resource::split_collection_name(&full) else {
        return Err(ApiError::not_found("poddebugcontainers", poddebug_types::GROUP, &full).into());
    };
    let obj = st
        .backend
        .get(&ns, pod, name, &auth.user)
        .await
        .map_err(|e| {
            // Report the name the client asked for, in this resource's terms, whether the debug
            // container or its pod is missing (the pod's 404 comes from kube-apiserver).
            if e.to_api_error().code() == 404 {
                Error::Api(ApiError::not_found(
                    "poddebugcontainers",
                    poddebug_types::GROUP,
                    &full,
                ))
            } else {
                Error::Storage(e)
            }
        })?;
    let mut obj = obj;
    obj.metadata.name = Some(full);
    if super::table::wants_table(&headers) {
        let include = super::table::include_object(&q);
        return json_response(
            StatusCode::OK,
            &super::table::table(std::slice::from_ref(&obj), None, include),
        );
    }
    json_response(StatusCode::OK, &obj)
}
