//! Discovery (`/apis`, `/apis/poddebug.dev`, `/apis/poddebug.dev/v1alpha1`) and OpenAPI
//! (`/openapi/v2`, `/openapi/v3`, `/openapi/v3/apis/poddebug.dev/v1alpha1`): documents built
//! once at startup, answered with `ETag` and `304 Not Modified` as the aggregator expects.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use poddebug_openapi::{DiscoveryFormat, Document, negotiate_discovery, negotiate_legacy};
use poddebug_types::ApiError;

use crate::error::Error;
use crate::state::AppState;

fn accept(headers: &HeaderMap) -> String {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",")
}

fn serve(doc: &Document, headers: &HeaderMap, cache_control: &'static str) -> Response {
    let inm = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let etag = HeaderValue::from_str(doc.etag()).ok();
    let mut resp = if !inm.is_empty() && doc.not_modified(inm) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = (StatusCode::OK, doc.bytes().clone()).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(doc.content_type()),
        );
        r
    };
    if let Some(e) = etag {
        resp.headers_mut().insert(header::ETAG, e);
    }
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

fn not_acceptable() -> Error {
    ApiError::NotAcceptable("only the following media types are accepted: application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList".to_owned()).into()
}

/// `GET /apis`: aggregated discovery when asked for, else the APIGroupList.
pub async fn apis(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, Error> {
    let doc = st
        .docs
        .apis(negotiate_discovery(&accept(&headers)))
        .ok_or_else(not_acceptable)?;
    Ok(serve(doc, &headers, "no-cache, private"))
}

/// `GET /apis/poddebug.dev`.
pub async fn group(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, Error> {
    match negotiate_legacy(&accept(&headers)) {
        DiscoveryFormat::NotAcceptable => Err(not_acceptable()),
        _ => Ok(serve(&st.docs.api_group, &headers, "no-cache, private")),
    }
}

/// `GET /apis/poddebug.dev/v1alpha1`.
pub async fn resources(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, Error> {
    match negotiate_legacy(&accept(&headers)) {
        DiscoveryFormat::NotAcceptable => Err(not_acceptable()),
        _ => Ok(serve(
            &st.docs.api_resource_list,
            &headers,
            "no-cache, private",
        )),
    }
}

/// Whether the client takes JSON. kubectl talking to us directly asks `/openapi/v2` for
/// protobuf only, and would fail to parse JSON: it must get 406 instead.
fn accepts_json(headers: &HeaderMap) -> bool {
    let a = accept(headers);
    a.trim().is_empty()
        || a.split(',').any(|m| {
            let media = m.split(';').next().unwrap_or("").trim();
            matches!(media, "application/json" | "application/*" | "*/*" | "")
        })
}

/// `GET /openapi/v2` (JSON only).
pub async fn openapi_v2(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, Error> {
    if !accepts_json(&headers) {
        return Err(ApiError::NotAcceptable(
            "only the following media types are accepted: application/json".to_owned(),
        )
        .into());
    }
    Ok(serve(&st.docs.openapi_v2, &headers, "no-cache, private"))
}

/// `GET /openapi/v3`.
pub async fn openapi_v3_index(State(st): State<AppState>, headers: HeaderMap) -> Response {
    serve(&st.docs.openapi_v3_index, &headers, "no-cache, private")
}

/// `GET /openapi/v3/apis/poddebug.dev/v1alpha1[?hash=H]`: a stale hash is redirected to the
/// current URL (301), a matching one is immutable, as kube-openapi serves them.
pub async fn openapi_v3_group_version(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let doc = &st.docs.openapi_v3_group_version;
    match q.get("hash") {
        Some(h) if h == doc.hash() => serve(doc, &headers, "public, immutable"),
        Some(_) => {
            let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(loc) = HeaderValue::from_str(&st.docs.openapi_v3_server_relative_url()) {
                r.headers_mut().insert(header::LOCATION, loc);
            }
            r
        }
        None => serve(doc, &headers, "no-cache, private"),
    }
}
