//! `debugprofiles`: the profiles and the policy in force, so `kubectl get debugprofiles`
//! explains what each profile does and whether it needs the `use` permission.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use poddebug_types::api::KIND_DEBUG_PROFILE_LIST;
use poddebug_types::{API_VERSION, ApiError, DebugProfile, DebugProfileList, GROUP, Profile};
use serde_json::json;
use std::collections::BTreeMap;

use super::json_response;
use crate::config::Config;
use crate::error::Error;
use crate::state::AppState;

/// The object describing one profile under this server's configuration.
pub fn describe(p: Profile, cfg: &Config) -> DebugProfile {
    let mut d = p.to_debug_profile(cfg.default_profile == p, cfg.profile_requires_permission(p));
    if let Some(n) = cfg.requests.approvals(p) {
        d.approvals_required = Some(n);
        d.max_request_duration = Some(crate::filters::go_duration(cfg.requests.max_duration(p)));
    }
    d
}

fn table(items: &[DebugProfile]) -> serde_json::Value {
    use super::table::{column, envelope};
    envelope(
        json!({}),
        vec![
            column("Name", "string", "name", "Profile name", 0),
            column("Default", "boolean", "", "Used when a request names no profile", 0),
            column("Requires-Use", "boolean", "", "Needs the verb use on debugprofiles/<name>", 0),
            column(
                "Approvals",
                "string",
                "",
                "Approvals a DebugRequest for it needs (<none>: it cannot be requested)",
                0,
            ),
            column("Description", "string", "", "What the profile does", 0),
        ],
        items
            .iter()
            .map(|p| {
                json!({
                    "cells": [p.metadata.name, p.default, p.requires_use_permission,
                        p.approvals_required.map_or_else(|| "<none>".to_owned(), |n| n.to_string()), p.description],
                    "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": p.metadata},
                })
            })
            .collect(),
    )
}

/// `GET /apis/poddebug.dev/v1alpha1/debugprofiles`.
pub async fn list(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, Error> {
    let items: Vec<DebugProfile> = Profile::ALL
        .iter()
        .map(|p| describe(*p, &st.config))
        .collect();
    if super::table::wants_table(&headers) {
        return json_response(StatusCode::OK, &table(&items));
    }
    let list = DebugProfileList {
        api_version: API_VERSION.to_owned(),
        kind: KIND_DEBUG_PROFILE_LIST.to_owned(),
        metadata: Default::default(),
        items,
    };
    json_response(StatusCode::OK, &list)
}

/// `GET /apis/poddebug.dev/v1alpha1/debugprofiles/NAME`.
pub async fn get(
    State(st): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Query(_q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let p =
        Profile::parse(&name).ok_or_else(|| ApiError::not_found("debugprofiles", GROUP, &name))?;
    let obj = describe(p, &st.config);
    if super::table::wants_table(&headers) {
        return json_response(StatusCode::OK, &table(std::slice::from_ref(&obj)));
    }
    json_response(StatusCode::OK, &obj)
}
