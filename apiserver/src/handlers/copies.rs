//! `pods/POD/copy` and `pods/POD/copies[/NAME]`: debug a copy of a pod.
//!
//! A copy runs with the original's service account and may run other images, so besides
//! `create pods/copy` (the chain's check) its maker needs the core `create pods` in the
//! namespace: asked by SubjectAccessReview, or, with `--impersonate`, the pod is created as the
//! caller and kube-apiserver decides. Every image of the copy passes `--allowed-images`, and
//! the debug container's profile (and any privilege it sets) needs `use` as for a debug
//! container.

use std::collections::BTreeMap;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode, Uri};
use poddebug_storage::CopyRequest;
use poddebug_types::copy::{KIND_POD_DEBUG_COPY, PodDebugCopy};
use poddebug_types::decode::decode_create_object;
use poddebug_types::{ApiError, PodDebugContainer, Profile};

use super::json_response;
use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::authz::Attributes;
use crate::error::Error;
use crate::state::AppState;

/// The core permission a copy needs: `create pods` in the namespace.
fn core_create_pods(ns: &str) -> Attributes {
    Attributes::Resource {
        verb: "create".to_owned(),
        group: String::new(),
        version: "v1".to_owned(),
        resource: "pods".to_owned(),
        subresource: String::new(),
        namespace: ns.to_owned(),
        name: String::new(),
    }
}

/// `POST .../pods/POD/copy`.
pub async fn create(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let dry_run = super::debug::create_dry_run(uri.query())?;
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    let req: PodDebugCopy = decode_create_object(&bytes, KIND_POD_DEBUG_COPY)?;
    if let Some(body_ns) = req.metadata.namespace.as_deref().filter(|n| !n.is_empty())
        && body_ns != ns
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .to_owned(),
        )
        .into());
    }
    let profile = match req.profile.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Profile::parse(p)
            .ok_or_else(|| ApiError::BadRequest(format!("unknown profile {p:?}")))?,
        None => st.config.default_profile,
    };
    // The debug container's profile and any privilege its own securityContext sets.
    let as_debug = PodDebugContainer {
        container: req.container.clone().unwrap_or_default(),
        ..Default::default()
    };
    super::debug::authorize_profiles(&st, &auth, &as_debug, profile).await?;
    if !st.config.impersonate {
        crate::filters::check_explained(
            &st,
            &auth.user,
            &core_create_pods(&ns),
            Some("a copy of a pod is a new pod: making one needs create on pods in its namespace"),
        )
        .await?;
    }
    let created = st
        .backend
        .create_copy(CopyRequest {
            namespace: ns.clone(),
            pod: pod.clone(),
            body: req,
            profile,
            caller: auth.user.clone(),
            dry_run,
        })
        .await?;
    if !dry_run {
        let name = created.metadata.name.clone().unwrap_or_default();
        let mut record = AuditRecord::new(Action::Create, &auth.user, &ns, &pod, "");
        record.profile = Some(profile.as_str().to_owned());
        record.outcome = Some(format!("copy {name} created"));
        record.emit();
    }
    json_response(StatusCode::CREATED, &created)
}

/// `GET .../pods/POD/copies`.
pub async fn list(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
) -> Result<Response, Error> {
    let list = st.backend.list_copies(&ns, &pod, &auth.user).await?;
    json_response(StatusCode::OK, &list)
}

/// `GET .../pods/POD/copies/NAME` (with the portal's attach ticket for a same-origin page).
pub async fn get(
    State(st): State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let copy = st.backend.get_copy(&ns, &pod, &name, &auth.user).await?;
    let mut resp = json_response(StatusCode::OK, &copy)?;
    super::debug::offer_ticket(&st, &auth, &headers, &mut resp);
    Ok(resp)
}

/// `gracePeriodSeconds` of a DELETE, from the query or the DeleteOptions body.
pub(crate) async fn grace_period(
    st: &AppState,
    q: &BTreeMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Option<u32>, Error> {
    super::debug::refuse_dry_run(q)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    super::body::require_json_if_any(headers, &bytes)?;
    let mut grace = super::debug::seconds(q, "gracePeriodSeconds")?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        let opts = poddebug_types::decode::decode_delete_options(&bytes)?;
        if grace.is_none() {
            grace = opts.grace_period_seconds;
        }
    }
    Ok(grace.map(|g| u32::try_from(g).unwrap_or(u32::MAX)))
}

/// `DELETE .../pods/POD/copies/NAME`: delete the copy.
pub async fn delete(
    State(st): State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let grace = grace_period(&st, &q, &headers, body).await?;
    let copy = st
        .backend
        .delete_copy(&ns, &pod, &name, grace, &auth.user)
        .await?;
    let mut record = AuditRecord::new(Action::Stop, &auth.user, &ns, &pod, "");
    record.outcome = Some(format!("copy {name} deleted"));
    record.emit();
    json_response(StatusCode::OK, &copy)
}
