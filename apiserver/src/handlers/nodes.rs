//! `nodes/NODE/debug[/NAME[/attach|/log]]` and `nodedebugcontainers`: debug containers on
//! nodes.
//!
//! Authorization: the chain asks for the verb on `nodes/debug` (cluster scope, name NODE), and
//! on `nodedebugcontainers` for the cluster-wide list, as kube-apiserver's aggregator asks
//! before it. Creating one, attaching to it and reading its log also need `use` on
//! its profile, whatever `--profiles-requiring-permission` says: every node profile but
//! `baseline` and `restricted` hands out the host. That profile is the one the pod amounts to
//! (`poddebug_types::node::effective_node_profile`), computed from the pod as built at create
//! and from the pod as read at attach and log, never the profile the request named. Nobody
//! needs rights in the node-debug namespace: the server acts there with its own identity.

use std::collections::BTreeMap;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, StatusCode, Uri};
use poddebug_storage::{CreateKind, NodeDebugRequest, NodeWatchEvent, Phase, Phases, Prefetch};
use poddebug_types::decode::decode_create_object;
use poddebug_types::node::{
    DEFAULT_NODE_PROFILE, KIND_NODE_DEBUG_CONTAINER, NodeDebugContainer, effective_node_profile,
};
use poddebug_types::privilege::Elevation;
use poddebug_types::{ApiError, GROUP, Profile};
use serde_json::json;

use super::attach::SessionScope;
use super::json_response;
use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::error::Error;
use crate::query::query_map;
use crate::state::AppState;
use poddebug_stream::request::LogRequest;

/// `use` on the node debug container's profile — the one its pod amounts to — always.
async fn authorize_profile(
    st: &AppState,
    auth: &Authenticated,
    profile: &Elevation,
    what: &str,
    grant: Option<&crate::requests::Grant>,
) -> Result<bool, Error> {
    authorize_profile_timed(st, auth, profile, what, grant, None).await
}

/// [`authorize_profile`], its review observed as a phase of a create.
async fn authorize_profile_timed(
    st: &AppState,
    auth: &Authenticated,
    profile: &Elevation,
    what: &str,
    grant: Option<&crate::requests::Grant>,
    phases: Option<&Phases>,
) -> Result<bool, Error> {
    let p = profile.profile;
    let why = if profile.setting.is_empty() {
        format!("{what} a node debug container with the {p} profile needs use on it")
    } else {
        format!(
            "{what} a node debug container with the {p} profile (it gets {}) needs use on it",
            profile.setting
        )
    };
    let check = crate::requests::check_use(st, &auth.user, p, Some(&why), grant);
    Ok(match phases {
        Some(phases) => phases.time(Phase::ReviewProfileUse, check).await?,
        None => check.await?,
    })
}

/// `POST .../nodes/NODE/debug/NAME`.
pub async fn create_named(
    st: State<AppState>,
    Path((node, name)): Path<(String, String)>,
    auth: Extension<Authenticated>,
    prefetch: Option<Extension<Prefetch>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let prefetch = prefetch.map(|p| p.0);
    create(
        st.0,
        node,
        Some(name),
        (auth.0, prefetch),
        uri,
        headers,
        body,
    )
    .await
}

/// `POST .../nodes/NODE/debug` (generated name).
pub async fn create_generated(
    st: State<AppState>,
    Path(node): Path<String>,
    auth: Extension<Authenticated>,
    prefetch: Option<Extension<Prefetch>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let prefetch = prefetch.map(|p| p.0);
    create(st.0, node, None, (auth.0, prefetch), uri, headers, body).await
}

async fn create(
    st: AppState,
    node: String,
    url_name: Option<String>,
    (auth, prefetch): (Authenticated, Option<Prefetch>),
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let phases = st
        .metrics
        .create_phases
        .phases(CreateKind::NodeDebugContainer);
    let dry_run = super::debug::create_dry_run(uri.query())?;
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    let req: NodeDebugContainer = decode_create_object(&bytes, KIND_NODE_DEBUG_CONTAINER)?;
    let body_name = req.metadata.name.clone().filter(|n| !n.is_empty());
    let container_name = Some(req.container.name.clone()).filter(|n| !n.is_empty());
    for other in [&body_name, &container_name].into_iter().flatten() {
        if let Some(u) = url_name.as_ref().or(body_name.as_ref())
            && u != other
        {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({other}) does not match the name on the URL ({u})"
            ))
            .into());
        }
    }
    let name = match url_name.or(body_name).or(container_name) {
        Some(n) => n,
        None => poddebug_types::names::generate_debug_name(|_| false, &mut rand::rng())?,
    };
    let errs = poddebug_types::validation::validate_node_debug_container(&req);
    if !errs.is_empty() {
        return Err(ApiError::invalid(GROUP, KIND_NODE_DEBUG_CONTAINER, &name, errs).into());
    }
    let profile = match req.profile.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Profile::parse(p)
            .ok_or_else(|| ApiError::BadRequest(format!("unknown profile {p:?}")))?,
        None => DEFAULT_NODE_PROFILE,
    };
    // What the pod gets decides, not the profile named: a baseline container that makes itself
    // privileged is a sysadmin one.
    let effective = effective_profile(&req, profile, &node, &name);
    // The debug request it names: in the node-debug namespace, for this node, the profile its
    // pod amounts to.
    let node_ns = st.config.node_debug_namespace.clone();
    let jit = st
        .requests
        .for_create(
            &auth.user,
            &node_ns,
            &crate::requests::Asked {
                reason: req.reason.as_deref(),
                ticket: req.ticket.as_deref(),
                debug_request: req.debug_request.as_deref(),
            },
            &crate::requests::Wanted {
                mode: poddebug_types::request::RequestMode::Node,
                target: &node,
                profile: Some(effective.profile),
                container: Some(&req.container),
                // A node debug container joins no container's namespaces, and its body is
                // decoded strictly (no unknown fields).
                target_container: None,
                unknown_fields: Vec::new(),
                other_programs: Vec::new(),
                default_image: &st.config.policy.default_image,
            },
            (KIND_NODE_DEBUG_CONTAINER, &name),
        )
        .await?;
    let grant = jit.grant.clone()?;
    if effective.profile == profile || effective.setting.is_empty() {
        authorize_profile_timed(
            &st,
            &auth,
            &Elevation {
                profile: effective.profile,
                setting: String::new(),
            },
            "creating",
            grant.as_ref(),
            Some(&phases),
        )
        .await?;
    } else {
        let why = format!(
            "the node debug container gets {}, which the {} profile grants (the least node profile that does)",
            effective.setting, effective.profile
        );
        let check = crate::requests::check_use(
            &st,
            &auth.user,
            effective.profile,
            Some(&why),
            grant.as_ref(),
        );
        phases.time(Phase::ReviewProfileUse, check).await?;
    }
    super::moderated::require_interactive_shell(
        &st,
        std::slice::from_ref(&effective),
        "nodes/debug",
        &node,
        "the node debug container",
        poddebug_types::moderated::container_refusals(
            "container",
            &req.container,
            &st.config.moderated_shells,
        ),
    )?;
    let created = st
        .backend
        .create_node_debug(NodeDebugRequest {
            node: node.clone(),
            name: name.clone(),
            body: req,
            profile,
            caller: auth.user.clone(),
            dry_run,
            justification: jit.justification.clone(),
            deadline: jit.deadline,
            prefetch,
            phases,
        })
        .await?;
    if !dry_run {
        let pod = poddebug_types::node::pod_name(&node, &name);
        let mut record = AuditRecord::new(Action::Create, &auth.user, &node_ns, &pod, &name)
            .justified(&jit.justification);
        record.profile = Some(effective.profile.as_str().to_owned());
        record.image = created.container.image.clone();
        record.emit();
        if let Some(g) = &grant {
            let made =
                crate::requests::made(KIND_NODE_DEBUG_CONTAINER, &name, &node_ns, &pod, None);
            st.requests.record_made(g, made, &auth.user).await;
        }
    }
    json_response(StatusCode::CREATED, &created)
}

/// The node profile the pod of `req` amounts to, built as the storage builds it (what the
/// profile reads of the pod does not depend on its image, namespace or deadline).
fn effective_profile(
    req: &NodeDebugContainer,
    profile: Profile,
    node: &str,
    name: &str,
) -> Elevation {
    let pod = poddebug_types::node::build_node_pod(
        req,
        &poddebug_types::node::NodePodContext {
            node,
            name,
            namespace: "preview",
            profile,
            default_image: "preview",
            created_by: "preview",
            expires_at: None,
        },
    );
    effective_node_profile(&pod)
}

/// `GET .../nodes/NODE/debug/NAME` (with the portal's attach ticket for a same-origin page).
pub async fn get(
    State(st): State<AppState>,
    Path((node, name)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let obj = st.backend.get_node_debug(&node, &name).await?;
    let mut resp = respond_one(obj, &headers, &q)?;
    super::debug::offer_ticket(&st, &auth, &headers, &mut resp);
    Ok(resp)
}

fn respond_one(
    obj: NodeDebugContainer,
    headers: &HeaderMap,
    q: &BTreeMap<String, String>,
) -> Result<Response, Error> {
    if super::table::wants_table(headers) {
        return json_response(StatusCode::OK, &table(std::slice::from_ref(&obj), None, q));
    }
    json_response(StatusCode::OK, &obj)
}

/// `GET .../nodedebugcontainers/NODE.NAME`.
pub async fn get_one(
    State(st): State<AppState>,
    Path(full): Path<String>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let Some((node, name)) = poddebug_types::node::split_pod_name(&full) else {
        return Err(ApiError::not_found("nodedebugcontainers", GROUP, &full).into());
    };
    let mut obj = st.backend.get_node_debug(node, name).await.map_err(|e| {
        if e.to_api_error().code() == 404 {
            Error::Api(ApiError::not_found("nodedebugcontainers", GROUP, &full))
        } else {
            Error::Storage(e)
        }
    })?;
    obj.metadata.name = Some(full);
    respond_one(obj, &headers, &q)
}

/// `DELETE .../nodes/NODE/debug/NAME`: delete its pod.
pub async fn delete(
    State(st): State<AppState>,
    Path((node, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let grace = super::copies::grace_period(&st, &q, &headers, body).await?;
    let obj = st.backend.delete_node_debug(&node, &name, grace).await?;
    AuditRecord::new(
        Action::Stop,
        &auth.user,
        &st.config.node_debug_namespace,
        &poddebug_types::node::pod_name(&node, &name),
        &name,
    )
    .emit();
    json_response(StatusCode::OK, &obj)
}

/// `GET .../nodes/NODE/debug`: the node's debug containers (or a watch of them).
pub async fn list_in_node(
    State(st): State<AppState>,
    Path(node): Path<String>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    list_or_watch(st, Some(node), headers, q).await
}

/// `GET .../nodedebugcontainers`: every node's (or a watch of them).
pub async fn all(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    list_or_watch(st, None, headers, q).await
}

fn is_watch(q: &BTreeMap<String, String>) -> bool {
    matches!(q.get("watch").map(String::as_str), Some("true" | "1"))
}

async fn list_or_watch(
    st: AppState,
    node: Option<String>,
    headers: HeaderMap,
    q: BTreeMap<String, String>,
) -> Result<Response, Error> {
    if is_watch(&q) {
        return watch(st, node, q).await;
    }
    let list = st.backend.list_node_debug(node.as_deref()).await?;
    if super::table::wants_table(&headers) {
        return json_response(
            StatusCode::OK,
            &table(&list.items, list.metadata.resource_version.as_deref(), &q),
        );
    }
    json_response(StatusCode::OK, &list)
}

/// A newline-delimited JSON watch, as kube-apiserver streams one.
async fn watch(
    st: AppState,
    node: Option<String>,
    q: BTreeMap<String, String>,
) -> Result<Response, Error> {
    let rv = q
        .get("resourceVersion")
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| "0".to_owned());
    let timeout =
        super::debug::seconds(&q, "timeoutSeconds")?.map(|t| u32::try_from(t).unwrap_or(u32::MAX));
    let length = super::watch::watch_length(&q)?;
    let events = st
        .backend
        .watch_node_debug(node.as_deref(), &rv, timeout)
        .await?;
    Ok(super::watch::streamed(
        &st,
        Vec::new(),
        events.map(encode),
        length,
    ))
}

/// One watch event as a line.
fn encode(ev: NodeWatchEvent) -> Bytes {
    let (kind, object) = match ev {
        NodeWatchEvent::Added(o) => ("ADDED", serde_json::to_value(o)),
        NodeWatchEvent::Modified(o) => ("MODIFIED", serde_json::to_value(o)),
        NodeWatchEvent::Deleted(o) => ("DELETED", serde_json::to_value(o)),
        NodeWatchEvent::Bookmark(rv) => (
            "BOOKMARK",
            Ok(
                json!({"kind": "NodeDebugContainer", "apiVersion": poddebug_types::API_VERSION,
                      "metadata": {"resourceVersion": rv}}),
            ),
        ),
        NodeWatchEvent::Error(e) => ("ERROR", serde_json::from_slice(&e.to_json())),
    };
    let mut line = serde_json::to_vec(
        &json!({"type": kind, "object": object.unwrap_or(serde_json::Value::Null)}),
    )
    .unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// A Table of node debug containers, as `kubectl get nodedebugcontainers` shows it.
fn table(
    items: &[NodeDebugContainer],
    resource_version: Option<&str>,
    q: &BTreeMap<String, String>,
) -> serde_json::Value {
    use super::table::{column, human_age, table_row};
    let include = super::table::include_object(q);
    let now = jiff::Timestamp::now();
    let rows: Vec<serde_json::Value> = items
        .iter()
        .map(|o| {
            let st = o.status.clone().unwrap_or_default();
            let cells = json!([
                o.metadata.name.clone().unwrap_or_default(),
                st.node_name,
                st.effective_profile
                    .clone()
                    .or_else(|| o.profile.clone())
                    .unwrap_or_default(),
                o.container.image.clone().unwrap_or_default(),
                st.phase.as_str(),
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
                "Name of the node debug container",
                0,
            ),
            column("Node", "string", "", "The node", 0),
            column(
                "Profile",
                "string",
                "",
                "The node profile its pod amounts to",
                0,
            ),
            column("Image", "string", "", "Container image", 0),
            column("State", "string", "", "Waiting, Running or Terminated", 0),
            column("Created By", "string", "", "The user who made it", 1),
            column("Expires", "string", "", "When the server deletes it", 1),
            column("Age", "string", "", "Time since creation", 0),
        ],
        rows,
    )
}

/// The query of a stream on `nodes/NODE/debug/NAME/…`: the container is NAME (a `container`
/// parameter naming another is a 400).
fn stream_query(req: &Request, name: &str) -> Result<BTreeMap<String, String>, Error> {
    let mut query = query_map(req.uri().query());
    match query.get("container").filter(|c| !c.is_empty()) {
        Some(c) if c != name => {
            return Err(ApiError::BadRequest(format!(
                "container {c} is not debug container {name} of this node"
            ))
            .into());
        }
        _ => {
            query.insert("container".to_owned(), name.to_owned());
        }
    }
    Ok(query)
}

/// `GET|POST .../nodes/NODE/debug/NAME/attach`.
pub async fn attach(
    State(st): State<AppState>,
    Path((node, name)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    mut req: Request,
) -> Result<Response, Error> {
    let query = stream_query(&req, &name)?;
    // A WebSocket attach arrives as GET (authorized as `get`): it takes `create` as a POST does.
    crate::filters::check(&st, &auth.user, &node_debug_attrs(&node, "create")).await?;
    let (request, on_upgrade) = super::attach::prepare_with(&st, &mut req, &query)?;
    let target = st
        .backend
        .node_stream_target(&node, &name, Some(st.config.attach_wait_timeout))
        .await?;
    if target.justification.debug_request.is_some() {
        st.requests.synced().await?;
    }
    let grant = st.requests.for_stream(&auth.user, &target).await;
    let mut granted = false;
    for e in &target.profiles {
        granted |= authorize_profile(&st, &auth, e, "attaching to", grant.as_ref()).await?;
    }
    let scope = node_scope(&node);
    let grant = grant.filter(|_| granted);
    super::attach::serve(st, auth, request, on_upgrade, target, scope, grant).await
}

/// `GET .../nodes/NODE/debug/NAME/log`. kube-apiserver's aggregator sees `debug` as the
/// subresource of this path and ends it at its request timeout (60 s by default): a followed
/// log is better read at `…/nodes/NODE/log?container=NAME` ([`log_by_query`]).
pub async fn log(
    State(st): State<AppState>,
    Path((node, name)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    req: Request,
) -> Result<Response, Error> {
    let request = LogRequest::parse(&stream_query(&req, &name)?)?;
    if *st.drain.borrow() {
        return Err(super::attach::shutting_down());
    }
    let target = st.backend.node_stream_target(&node, &name, None).await?;
    let grant = st.requests.for_stream(&auth.user, &target).await;
    for e in &target.profiles {
        authorize_profile(&st, &auth, e, "reading the log of", grant.as_ref()).await?;
    }
    super::log::authorize_reader(&st, &auth, &target, &name, &node_scope(&node)).await?;
    super::log::stream(st, auth, &request, target).await
}

/// `GET .../nodes/NODE/log?container=NAME`: the same log as `…/nodes/NODE/debug/NAME/log`, at a
/// path kube-apiserver's aggregator knows for a stream (subresource `log`), so a followed log is
/// not cut at its request timeout. Authorized as `get` on `nodes/log`.
pub async fn log_by_query(
    st: State<AppState>,
    Path(node): Path<String>,
    auth: Extension<Authenticated>,
    req: Request,
) -> Result<Response, Error> {
    let name = LogRequest::parse(&query_map(req.uri().query()))?.container;
    log(st, Path((node, name)), auth, req).await
}

/// Where a node debug container's session permissions are asked: `nodes/debug` of the node.
fn node_scope(node: &str) -> SessionScope {
    SessionScope {
        resource: "nodes",
        namespace: String::new(),
        name: node.to_owned(),
        moderate_on: "debug",
    }
}

fn node_debug_attrs(node: &str, verb: &str) -> crate::authz::Attributes {
    crate::authz::Attributes::Resource {
        verb: verb.to_owned(),
        group: GROUP.to_owned(),
        version: poddebug_types::VERSION.to_owned(),
        resource: "nodes".to_owned(),
        subresource: "debug".to_owned(),
        namespace: String::new(),
        name: node.to_owned(),
    }
}
