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
        && let Some((pod, _)) = one.rsplit_once('.')
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
    if table {
        let include = q
            .get("includeObject")
            .map(String::as_str)
            .unwrap_or("Metadata");
        return json_response(
            StatusCode::OK,
            &super::table::table(
                &list.items,
                list.metadata.resource_version.as_deref(),
                include,
            ),
        );
    }
    json_response(StatusCode::OK, &list)
}

/// The `metadata.name` terms of a field selector. They name objects of this API (`POD.NAME` for
/// `poddebugcontainers`, the debug name under `pods/POD/debug`), not pods, so they are applied
/// here instead of being passed to the pod list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameSelector {
    /// `metadata.name=X` / `metadata.name==X`.
    pub equal: Vec<String>,
    /// `metadata.name!=X`.
    pub not_equal: Vec<String>,
}

impl NameSelector {
    /// Whether the object's name satisfies every term.
    pub fn matches(&self, p: &poddebug_types::PodDebugContainer) -> bool {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        self.equal.iter().all(|n| n == name) && self.not_equal.iter().all(|n| n != name)
    }
}

/// Split a field selector into its `metadata.name` terms and the rest, which goes to the pod
/// list as it is (`spec.nodeName=...`, `metadata.namespace=...`).
pub fn split_field_selector(selector: &str) -> (NameSelector, Option<String>) {
    let mut names = NameSelector::default();
    let mut rest = Vec::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if let Some((k, v)) = term.split_once("!=") {
            if k.trim() == "metadata.name" {
                names.not_equal.push(v.trim().to_owned());
                continue;
            }
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('='))
            && k.trim() == "metadata.name"
        {
            names.equal.push(v.trim().to_owned());
            continue;
        }
        rest.push(term);
    }
    let rest = (!rest.is_empty()).then(|| rest.join(","));
    (names, rest)
}

/// Name a debug container as the `poddebugcontainers` resource names it: `POD.NAME`.
pub fn qualify(p: &mut poddebug_types::PodDebugContainer) {
    if let (Some(pod), Some(name)) = (
        p.status.as_ref().map(|s| s.pod_name.clone()),
        p.metadata.name.clone(),
    ) {
        p.metadata.name = Some(format!("{pod}.{name}"));
    }
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
    let Some((pod, name)) = full.rsplit_once('.') else {
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
        let include = q
            .get("includeObject")
            .map(String::as_str)
            .unwrap_or("Metadata");
        return json_response(
            StatusCode::OK,
            &super::table::table(std::slice::from_ref(&obj), None, include),
        );
    }
    json_response(StatusCode::OK, &obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> poddebug_types::PodDebugContainer {
        let mut p = poddebug_types::PodDebugContainer::default();
        p.metadata.name = Some(n.to_owned());
        p
    }

    #[test]
    fn name_terms_are_ours_the_rest_goes_to_the_pods() {
        let (names, rest) = split_field_selector("metadata.name=web.dbg,spec.nodeName=n1");
        assert_eq!(names.equal, ["web.dbg"]);
        assert_eq!(rest.as_deref(), Some("spec.nodeName=n1"));
        assert!(names.matches(&named("web.dbg")));
        assert!(!names.matches(&named("web.other")));

        let (names, rest) = split_field_selector("metadata.name!=a.b, metadata.name==a.c");
        assert_eq!(
            (names.not_equal.as_slice(), names.equal.as_slice()),
            (&["a.b".to_owned()][..], &["a.c".to_owned()][..])
        );
        assert_eq!(rest, None);
        assert!(names.matches(&named("a.c")));

        let (names, rest) = split_field_selector("");
        assert_eq!((names, rest), (NameSelector::default(), None));
        let (_, rest) = split_field_selector("metadata.namespace!=x");
        assert_eq!(rest.as_deref(), Some("metadata.namespace!=x"));
    }
}
