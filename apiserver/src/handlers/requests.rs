//! `DebugRequest`s (just-in-time access, see [`crate::requests`]):
//! `…/namespaces/NS/debugrequests[/NAME]` and `…/debugrequests` (create, get, list, watch,
//! delete), and `POST …/namespaces/NS/debugrequests/NAME/approval` to review one.
//!
//! Authorization: kube-apiserver (and the handler chain, the same way) authorizes the path in
//! the request's namespace — `create`/`get`/`list`/`watch`/`delete` on `debugrequests`,
//! `create` on `debugrequests/approval`. A review also needs `approve` on `debugrequests`
//! named after the request's profile (so a team may approve netadmin and not sysadmin), and is
//! never its requester's; a delete (withdrawal) is its requester's, or an approver's of its
//! profile. Nobody needs rights in the server's own namespace, where the records are.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode, Uri};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, Time};
use poddebug_storage::{RequestHistoryTooOld, RequestSelector};
use poddebug_types::request::{
    Approval, DEFAULT_DURATION, DebugRequest, DebugRequestList, DebugRequestStatus, Decision,
    KIND_APPROVAL, KIND_DEBUG_REQUEST, MAX_REVIEWS, PLURAL_DEBUG_REQUESTS, RequestMode,
    RequestPhase, Review, VERB_APPROVE,
};
use poddebug_types::{API_VERSION, ApiError, ErrorList, FieldError, GROUP, Profile, VERSION};
use serde_json::{Value, json};

use super::json_response;
use super::table::{column, human_age, table_row};
use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::authz::Attributes;
use crate::error::Error;
use crate::requests::EventKind;
use crate::state::AppState;

/// Tries of a create whose generated name is taken.
const GENERATE_TRIES: usize = 3;

/// `approve` on `debugrequests` named `profile`, in `namespace`.
fn approve(namespace: &str, profile: &str) -> Attributes {
    Attributes::Resource {
        verb: VERB_APPROVE.to_owned(),
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource: PLURAL_DEBUG_REQUESTS.to_owned(),
        subresource: String::new(),
        namespace: namespace.to_owned(),
        name: profile.to_owned(),
    }
}

fn not_found(name: &str) -> Error {
    ApiError::not_found(PLURAL_DEBUG_REQUESTS, GROUP, name).into()
}

fn is_watch(q: &BTreeMap<String, String>) -> bool {
    matches!(q.get("watch").map(String::as_str), Some("true" | "1"))
}

/// Go's `time.Duration.String()` of a whole number of seconds (`1h0m0s`, `30m0s`, `45s`).
fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// The Table `kubectl get debugrequests` prints.
fn table(items: &[DebugRequest], rv: Option<&str>, include_object: &str) -> Value {
    let now = Timestamp::now();
    let columns = vec![
        column("Name", "string", "name", "Name of the debug request", 0),
        column("Requester", "string", "", "Who asked", 0),
        column("Target", "string", "", "pod/NAME or node/NAME", 0),
        column("Mode", "string", "", "debug, copy or node", 1),
        column("Profile", "string", "", "The profile asked for", 0),
        column(
            "Phase",
            "string",
            "",
            "Pending, Approved, Denied, Expired or Revoked",
            0,
        ),
        column("Approvers", "string", "", "Who approved it", 0),
        column("Expires", "string", "", "When the window ends", 1),
        column("Reason", "string", "", "Why", 0),
        column("Age", "string", "", "Since it was made", 0),
    ];
    let rows: Vec<Value> = items
        .iter()
        .map(|r| {
            let st = r.status.clone().unwrap_or_default();
            let target = match r.spec.mode {
                RequestMode::Node => format!("node/{}", r.target()),
                _ => format!("pod/{}", r.target()),
            };
            let approvers = r.approvers();
            let approvers = if approvers.is_empty() {
                "<none>".to_owned()
            } else {
                approvers.join(",")
            };
            let cells = json!([
                r.name(),
                r.spec.requester.clone().unwrap_or_default(),
                target,
                r.spec.mode.as_str(),
                r.spec.profile,
                r.phase_at(now).as_str(),
                approvers,
                st.expires_at
                    .map(|t| t.0.to_string())
                    .unwrap_or_else(|| "<none>".to_owned()),
                r.spec.reason,
                human_age(r.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
            ]);
            table_row(cells, r, &r.metadata, include_object)
        })
        .collect();
    super::table::envelope(super::table::list_meta(rv), columns, rows)
}

fn one(r: &DebugRequest, headers: &HeaderMap, code: StatusCode) -> Result<Response, Error> {
    if super::table::wants_table(headers) {
        return json_response(
            code,
            &table(
                std::slice::from_ref(r),
                r.metadata.resource_version.as_deref(),
                "Metadata",
            ),
        );
    }
    json_response(code, r)
}

/// The policy's checks of a request (422): its profile can be requested, its duration is
/// within the profile's longest, a node request is in the node-debug namespace.
fn policy_errors(st: &AppState, r: &DebugRequest) -> ErrorList {
    let mut errs = ErrorList::new();
    let policy = st.requests.policy();
    if let Some(p) = Profile::parse(&r.spec.profile) {
        if policy.approvals(p).is_none() {
            let supported = policy.profiles();
            if supported.is_empty() {
                errs.push(FieldError::forbidden(
                    "spec.profile",
                    "this server takes no debug requests (it runs without --approval-profiles)",
                ));
            } else {
                errs.push(FieldError::not_supported(
                    "spec.profile",
                    r.spec.profile.as_str(),
                    &supported,
                ));
            }
        } else if let Some(d) = r.spec.duration.as_deref()
            && let Ok(v) = poddebug_types::duration::parse(d)
            && v > policy.max_duration(p)
        {
            errs.push(FieldError::invalid(
                "spec.duration",
                d,
                format!(
                    "must be no more than {} for the {p} profile (--max-request-durations)",
                    go_duration(policy.max_duration(p))
                ),
            ));
        }
    }
    let node_ns = st.requests.node_namespace();
    match r.spec.mode {
        RequestMode::Node if r.namespace() != node_ns => errs.push(FieldError::invalid(
            "metadata.namespace",
            r.namespace(),
            format!("a request of mode node lives in the node-debug namespace {node_ns:?}"),
        )),
        _ => {}
    }
    errs
}

/// A name for `generateName`: the prefix and five of kube's random characters.
fn generated(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let mut name = prefix.to_owned();
    for _ in 0..5 {
        name.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
    }
    name
}

/// `POST …/namespaces/NS/debugrequests`.
pub async fn create(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    Extension(auth): Extension<Authenticated>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let dry_run = super::debug::create_dry_run(uri.query())?;
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    let mut r: DebugRequest =
        poddebug_types::decode::decode_create_object(&bytes, KIND_DEBUG_REQUEST)?;
    if let Some(body_ns) = r.metadata.namespace.as_deref().filter(|n| !n.is_empty())
        && body_ns != ns
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .to_owned(),
        )
        .into());
    }
    r.metadata.namespace = Some(ns.clone());
    let mut errs = poddebug_types::validation::validate_debug_request(&r);
    errs.extend(policy_errors(&st, &r));
    if !errs.is_empty() {
        let name = r.metadata.name.clone().unwrap_or_default();
        return Err(ApiError::invalid(GROUP, KIND_DEBUG_REQUEST, &name, errs).into());
    }
    st.requests.synced().await?;
    let profile = Profile::parse(&r.spec.profile).unwrap_or_default();
    let policy = st.requests.policy();
    // What the server sets: who asked, the duration, the state, the metadata it keeps.
    r.api_version = API_VERSION.to_owned();
    r.kind = KIND_DEBUG_REQUEST.to_owned();
    r.spec.requester = Some(auth.user.user.clone());
    r.spec.reason = r.spec.reason.trim().to_owned();
    if r.spec.duration.is_none() {
        r.spec.duration = Some(go_duration(
            DEFAULT_DURATION.min(policy.max_duration(profile)),
        ));
    }
    r.status = Some(DebugRequestStatus {
        phase: RequestPhase::Pending,
        approvals_required: policy.approvals(profile).unwrap_or(1),
        ..Default::default()
    });
    let meta = &mut r.metadata;
    meta.creation_timestamp = Some(Time(Timestamp::now()));
    meta.uid = None;
    meta.resource_version = None;
    meta.generation = None;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    let prefix = meta.generate_name.clone().filter(|_| meta.name.is_none());
    if dry_run {
        if let Some(p) = &prefix {
            r.metadata.name = Some(generated(p));
        }
        return one(&r, &headers, StatusCode::CREATED);
    }
    let created = 'create: {
        for _ in 0..GENERATE_TRIES {
            if let Some(p) = &prefix {
                r.metadata.name = Some(generated(p));
            }
            match st.requests.store().create(&r).await {
                Err(e) if prefix.is_some() && e.to_api_error().reason() == "AlreadyExists" => {}
                other => break 'create other?,
            }
        }
        return Err(ApiError::Internal(
            "could not generate a free name for the debug request".to_owned(),
        )
        .into());
    };
    let mut a = AuditRecord::new(Action::Request, &auth.user, &ns, created.target(), "")
        .justified(&created.justification());
    a.profile = Some(created.spec.profile.clone());
    a.outcome = Some(format!(
        "created: {} for {}",
        created.spec.mode.as_str(),
        created.spec.duration.as_deref().unwrap_or_default()
    ));
    a.emit();
    st.requests
        .notify(EventKind::Created, &created, &auth.user.user, None, None);
    one(
        &created.as_seen_at(Timestamp::now()),
        &headers,
        StatusCode::CREATED,
    )
}

/// `GET …/namespaces/NS/debugrequests/NAME`.
pub async fn get(
    State(st): State<AppState>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    st.requests.synced().await?;
    let r = st
        .requests
        .store()
        .get(&ns, &name)
        .ok_or_else(|| not_found(&name))?;
    one(&r.as_seen_at(Timestamp::now()), &headers, StatusCode::OK)
}

/// `GET …/namespaces/NS/debugrequests` (list, or `?watch=true`).
pub async fn in_namespace(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    respond(st, Some(ns), headers, q).await
}

/// `GET …/debugrequests` (every namespace).
pub async fn all_namespaces(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    respond(st, None, headers, q).await
}

#[derive(Clone, Debug)]
struct Scope {
    namespace: Option<String>,
    selector: RequestSelector,
}

impl Scope {
    fn matches(&self, r: &DebugRequest, now: Timestamp) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == r.namespace())
            && self.selector.matches(r, now)
    }
}

async fn respond(
    st: AppState,
    namespace: Option<String>,
    headers: HeaderMap,
    q: BTreeMap<String, String>,
) -> Result<Response, Error> {
    let scope = Scope {
        namespace,
        selector: RequestSelector::parse(
            q.get("labelSelector").map_or("", String::as_str),
            q.get("fieldSelector").map_or("", String::as_str),
        )?,
    };
    st.requests.synced().await?;
    let wants_table = super::table::wants_table(&headers);
    if is_watch(&q) {
        return watch(st, scope, wants_table, &q);
    }
    let now = Timestamp::now();
    let (all, rv) = st.requests.store().snapshot();
    let mut items: Vec<DebugRequest> = all
        .iter()
        .filter(|r| scope.matches(r, now))
        .map(|r| r.as_seen_at(now))
        .collect();
    items.sort_by(|a, b| {
        (a.namespace(), &a.metadata.creation_timestamp, a.name()).cmp(&(
            b.namespace(),
            &b.metadata.creation_timestamp,
            b.name(),
        ))
    });
    let rv = rv.to_string();
    if wants_table {
        let include = super::table::include_object(&q);
        return json_response(StatusCode::OK, &table(&items, Some(&rv), include));
    }
    let meta = ListMeta {
        resource_version: Some(rv),
        ..Default::default()
    };
    json_response(StatusCode::OK, &DebugRequestList::new(items, meta))
}

fn event_line(ty: &str, r: &DebugRequest, wants_table: bool) -> Option<Bytes> {
    let object = if wants_table {
        table(
            std::slice::from_ref(r),
            r.metadata.resource_version.as_deref(),
            "Metadata",
        )
    } else {
        serde_json::to_value(r).ok()?
    };
    let mut b = serde_json::to_vec(&json!({"type": ty, "object": object})).ok()?;
    b.push(b'\n');
    Some(Bytes::from(b))
}

/// A watch of the requests in `scope`, from the replica's copy of the records: the current
/// ones first (unless resumed from a `resourceVersion`, whose later changes are replayed), then
/// every change.
fn watch(
    st: AppState,
    scope: Scope,
    wants_table: bool,
    q: &BTreeMap<String, String>,
) -> Result<Response, Error> {
    let timeout = super::watch::watch_length(q)?;
    let store = st.requests.store().clone();
    // Subscribe before reading what to send first, so nothing falls between.
    let rx = store.subscribe();
    let resume = super::watch::resume_from(q)?;
    let now = Timestamp::now();
    let mut first: Vec<Bytes> = Vec::new();
    let mut known: BTreeMap<(String, String), ()> = BTreeMap::new();
    let (all, _) = store.snapshot();
    let mut last_rv = 0;
    match resume {
        None => {
            for r in all.iter().filter(|r| scope.matches(r, now)) {
                known.insert((r.namespace().to_owned(), r.name().to_owned()), ());
                first.extend(event_line("ADDED", &r.as_seen_at(now), wants_table));
            }
        }
        Some(rv) => {
            last_rv = rv;
            let replay = store.since(rv).map_err(|RequestHistoryTooOld| {
                Error::from(ApiError::expired(format!("too old resource version: {rv}")))
            })?;
            for ev in replay.iter().filter(|e| scope.matches(&e.request, now)) {
                last_rv = last_rv.max(ev.rv);
                let ty = if ev.deleted { "DELETED" } else { "MODIFIED" };
                first.extend(event_line(ty, &ev.request.as_seen_at(now), wants_table));
            }
            known.extend(
                all.iter()
                    .filter(|r| scope.matches(r, now))
                    .map(|r| ((r.namespace().to_owned(), r.name().to_owned()), ())),
            );
        }
    }
    let stream = futures::stream::unfold(
        (rx, known, scope, last_rv),
        move |(mut rx, mut known, scope, last_rv)| async move {
            loop {
                let ev = match rx.recv().await {
                    Ok(ev) => ev,
                    // Too slow for the changes, or the store is gone: the client re-watches.
                    Err(_) => return None,
                };
                if ev.rv <= last_rv && last_rv != 0 {
                    continue;
                }
                let now = Timestamp::now();
                let key = (
                    ev.request.namespace().to_owned(),
                    ev.request.name().to_owned(),
                );
                let ty = if ev.deleted {
                    if known.remove(&key).is_none() {
                        continue;
                    }
                    "DELETED"
                } else if !scope.matches(&ev.request, now) {
                    // Out of the selection now (a field selector on the phase): gone for it.
                    if known.remove(&key).is_none() {
                        continue;
                    }
                    "DELETED"
                } else if known.insert(key, ()).is_none() {
                    "ADDED"
                } else {
                    "MODIFIED"
                };
                if let Some(line) = event_line(ty, &ev.request.as_seen_at(now), wants_table) {
                    return Some((line, (rx, known, scope, last_rv)));
                }
            }
        },
    );
    Ok(super::watch::streamed(&st, first, stream, timeout))
}

/// `DELETE …/namespaces/NS/debugrequests/NAME`: kube-apiserver authorized `delete` on
/// `debugrequests`. Its requester withdraws it, and so may an approver of its profile; anyone
/// else deletes it only with `deletecollection` on `debugrequests` in the namespace — what the
/// cluster's own cleaners hold (the namespace controller, the garbage collector) and
/// administrators, never a persona of `manifests/personas.yaml` — so that a user who may
/// withdraw their own requests cannot end other people's. Every way leaves the same record: an
/// audit record, a notification, and the end of what it opened.
pub async fn delete(
    State(st): State<AppState>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    refuse_delete_dry_run(&st, &q, &headers, body).await?;
    st.requests.synced().await?;
    let r = st
        .requests
        .store()
        .get(&ns, &name)
        .ok_or_else(|| not_found(&name))?;
    let requester = r.spec.requester.as_deref() == Some(auth.user.user.as_str());
    let how = if requester
        || crate::filters::check(&st, &auth.user, &approve(&ns, &r.spec.profile))
            .await
            .is_ok()
    {
        Removal::Withdrawn
    } else {
        crate::filters::check_explained(
            &st,
            &auth.user,
            &delete_collection_attributes(&ns),
            Some(&format!(
                "debug request {name:?} is {:?}'s: only its requester or an approver of the {} \
                 profile withdraws it, and deleting another user's request needs \
                 deletecollection on debugrequests in the namespace (the namespace controller's, \
                 the garbage collector's, an administrator's)",
                r.spec.requester.as_deref().unwrap_or_default(),
                r.spec.profile
            )),
        )
        .await?;
        Removal::Deleted
    };
    let gone = st.requests.store().delete(&ns, &name, None).await?;
    record_removal(&st, &auth, &gone, how);
    one(&gone.as_seen_at(Timestamp::now()), &headers, StatusCode::OK)
}

/// `DELETE …/namespaces/NS/debugrequests` (`deletecollection`, authorized by kube-apiserver and
/// the handler chain): every request of the namespace the selectors choose is deleted, each
/// leaving its record; the answer is the list of them as they were, as kube-apiserver answers a
/// collection's delete. The namespace controller deletes a namespace's requests this way.
pub async fn delete_collection(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    refuse_delete_dry_run(&st, &q, &headers, body).await?;
    let scope = Scope {
        namespace: Some(ns),
        selector: RequestSelector::parse(
            q.get("labelSelector").map_or("", String::as_str),
            q.get("fieldSelector").map_or("", String::as_str),
        )?,
    };
    st.requests.synced().await?;
    let now = Timestamp::now();
    let (all, _) = st.requests.store().snapshot();
    let chosen: Vec<DebugRequest> = all
        .iter()
        .filter(|r| scope.matches(r, now))
        .cloned()
        .collect();
    let mut gone = Vec::with_capacity(chosen.len());
    for r in chosen {
        match st
            .requests
            .store()
            .delete(r.namespace(), r.name(), None)
            .await
        {
            Ok(g) => {
                record_removal(&st, &auth, &g, Removal::Deleted);
                gone.push(g.as_seen_at(now));
            }
            // Deleted meanwhile (by another replica, or its requester): nothing left to do.
            Err(e) if e.to_api_error().code() == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let (_, rv) = st.requests.store().snapshot();
    let meta = ListMeta {
        resource_version: Some(rv.to_string()),
        ..Default::default()
    };
    json_response(StatusCode::OK, &DebugRequestList::new(gone, meta))
}

/// How a request went: withdrawn (by its requester or an approver), or deleted (by the cluster's
/// cleaners, an administrator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Removal {
    Withdrawn,
    Deleted,
}

/// The record every removal leaves: the audit record and the notification.
fn record_removal(st: &AppState, auth: &Authenticated, gone: &DebugRequest, how: Removal) {
    let (outcome, kind) = match how {
        Removal::Withdrawn => ("withdrawn", EventKind::Withdrawn),
        Removal::Deleted => ("deleted", EventKind::Deleted),
    };
    let mut a = AuditRecord::new(
        Action::Request,
        &auth.user,
        gone.namespace(),
        gone.target(),
        "",
    )
    .justified(&gone.justification());
    a.outcome = Some(outcome.to_owned());
    a.emit();
    st.requests.notify(kind, gone, &auth.user.user, None, None);
}

/// A delete's options: a body, when sent, must be `DeleteOptions`; a dry run is refused (a
/// request's removal cannot be simulated).
async fn refuse_delete_dry_run(
    st: &AppState,
    q: &BTreeMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(), Error> {
    super::debug::refuse_dry_run(q)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    super::body::require_json_if_any(headers, &bytes)?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        let opts = poddebug_types::decode::decode_delete_options(&bytes)?;
        if opts.dry_run {
            return Err(ApiError::BadRequest("dryRun is not supported".to_owned()).into());
        }
    }
    Ok(())
}

/// `deletecollection` on `debugrequests` in `namespace`.
fn delete_collection_attributes(namespace: &str) -> Attributes {
    Attributes::Resource {
        verb: "deletecollection".to_owned(),
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource: PLURAL_DEBUG_REQUESTS.to_owned(),
        subresource: String::new(),
        namespace: namespace.to_owned(),
        name: String::new(),
    }
}

fn conflict(name: &str, why: String) -> ApiError {
    ApiError::conflict(PLURAL_DEBUG_REQUESTS, GROUP, name, why)
}

/// Apply `decision` by `user` at `now` to `r`.
fn review(
    r: &mut DebugRequest,
    user: &str,
    decision: Decision,
    comment: Option<&str>,
    now: Timestamp,
) -> Result<(), ApiError> {
    let name = r.name().to_owned();
    let phase = r.phase_at(now);
    let duration = r
        .spec
        .duration
        .as_deref()
        .and_then(|d| poddebug_types::duration::parse(d).ok())
        .unwrap_or(DEFAULT_DURATION);
    let approvers = r.approvers();
    let st = r.status.get_or_insert_with(Default::default);
    if st.reviews.len() >= MAX_REVIEWS {
        return Err(conflict(
            &name,
            format!("it has {MAX_REVIEWS} reviews, the most a request keeps"),
        ));
    }
    let needed = match decision {
        Decision::Approve | Decision::Deny => RequestPhase::Pending,
        Decision::Revoke => RequestPhase::Approved,
    };
    if phase != needed {
        return Err(conflict(
            &name,
            format!(
                "it is {}: only {} {} request can be {}",
                phase.as_str(),
                if needed == RequestPhase::Approved {
                    "an"
                } else {
                    "a"
                },
                needed.as_str(),
                match decision {
                    Decision::Approve => "approved",
                    Decision::Deny => "denied",
                    Decision::Revoke => "revoked",
                }
            ),
        ));
    }
    if decision == Decision::Approve && approvers.iter().any(|a| a == user) {
        return Err(conflict(&name, format!("{user} approved it already")));
    }
    st.reviews.push(Review {
        user: user.to_owned(),
        time: Time(now),
        decision,
        comment: comment.map(str::to_owned).filter(|c| !c.is_empty()),
    });
    match decision {
        Decision::Approve => {
            if approvers.len() + 1 >= st.approvals_required.max(1) as usize {
                st.phase = RequestPhase::Approved;
                st.approved_at = Some(Time(now));
                let span = jiff::SignedDuration::try_from(duration)
                    .map_err(|_| ApiError::Internal("a duration out of range".to_owned()))?;
                st.expires_at =
                    Some(Time(now.checked_add(span).map_err(|_| {
                        ApiError::Internal("a window out of range".to_owned())
                    })?));
            }
        }
        Decision::Deny => st.phase = RequestPhase::Denied,
        Decision::Revoke => st.phase = RequestPhase::Revoked,
    }
    Ok(())
}

/// `POST …/namespaces/NS/debugrequests/NAME/approval`: approve, deny or revoke it.
pub async fn approval(
    State(st): State<AppState>,
    Path((ns, name)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    if super::debug::create_dry_run(uri.query())? {
        return Err(ApiError::BadRequest("dryRun is not supported".to_owned()).into());
    }
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    let a: Approval = poddebug_types::decode::decode_strict(&bytes, KIND_APPROVAL)?;
    let mut errs = poddebug_types::validation::validate_comment(a.comment.as_deref());
    let decision = Decision::parse(&a.decision);
    if decision.is_none() {
        if a.decision.is_empty() {
            errs.push(FieldError::required("decision", "Approve, Deny or Revoke"));
        } else {
            errs.push(FieldError::not_supported(
                "decision",
                a.decision.as_str(),
                &["Approve", "Deny", "Revoke"],
            ));
        }
    }
    let Some(decision) = decision.filter(|_| errs.is_empty()) else {
        return Err(ApiError::invalid(GROUP, KIND_APPROVAL, &name, errs).into());
    };
    st.requests.synced().await?;
    let r = st
        .requests
        .store()
        .get(&ns, &name)
        .ok_or_else(|| not_found(&name))?;
    let user = auth.user.user.clone();
    if r.spec.requester.as_deref() == Some(user.as_str()) {
        return Err(ApiError::forbidden(
            PLURAL_DEBUG_REQUESTS,
            GROUP,
            &name,
            format!(
                "User {user:?} cannot review their own debug request: someone else approves it \
                 (delete it to withdraw it)"
            ),
        )
        .into());
    }
    crate::filters::check_explained(
        &st,
        &auth.user,
        &approve(&ns, &r.spec.profile),
        Some(&format!(
            "reviewing a debug request for the {} profile needs approve on debugrequests named {}",
            r.spec.profile, r.spec.profile
        )),
    )
    .await?;
    let now = Timestamp::now();
    let comment = a.comment.clone();
    let preconditions = a.preconditions.clone().unwrap_or_default();
    let written = st
        .requests
        .store()
        .update(&ns, &name, |r| {
            // The review decides the request its reviewer read, not another one since filed
            // under its name (kube-apiserver's precondition wording).
            for (what, want, have) in [
                ("UID", &preconditions.uid, &r.metadata.uid),
                (
                    "ResourceVersion",
                    &preconditions.resource_version,
                    &r.metadata.resource_version,
                ),
            ] {
                if let Some(want) = want
                    && have.as_ref() != Some(want)
                {
                    return Err(ApiError::conflict(
                        PLURAL_DEBUG_REQUESTS,
                        GROUP,
                        &name,
                        format!(
                            "Precondition failed: {what} in precondition: {want}, {what} in object meta: {}",
                            have.as_deref().unwrap_or_default()
                        ),
                    ));
                }
            }
            // The requester cannot become a reviewer by a change of requester meanwhile.
            if r.spec.requester.as_deref() == Some(user.as_str()) {
                return Err(ApiError::forbidden(
                    PLURAL_DEBUG_REQUESTS,
                    GROUP,
                    &name,
                    "the requester cannot review their own debug request",
                ));
            }
            review(r, &user, decision, comment.as_deref(), now)
        })
        .await?;
    let kind = match decision {
        Decision::Approve => EventKind::Approved,
        Decision::Deny => EventKind::Denied,
        Decision::Revoke => EventKind::Revoked,
    };
    let mut rec = AuditRecord::new(Action::Request, &auth.user, &ns, written.target(), "")
        .justified(&written.justification());
    rec.profile = Some(written.spec.profile.clone());
    rec.outcome = Some(format!(
        "{}: {}",
        kind.as_str(),
        written.phase_at(now).as_str()
    ));
    rec.expires_at = written
        .status
        .as_ref()
        .and_then(|s| s.expires_at.as_ref())
        .map(|t| t.0);
    rec.emit();
    st.requests
        .notify(kind, &written, &user, a.comment.clone(), None);
    one(&written.as_seen_at(now), &headers, StatusCode::CREATED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use poddebug_types::request::DebugRequestSpec;

    fn pending(required: u32) -> DebugRequest {
        let mut r = DebugRequest {
            spec: DebugRequestSpec {
                pod: Some("web".into()),
                profile: "sysadmin".into(),
                reason: "INC-7".into(),
                duration: Some("30m".into()),
                requester: Some("alice".into()),
                ..Default::default()
            },
            status: Some(DebugRequestStatus {
                approvals_required: required,
                ..Default::default()
            }),
            ..Default::default()
        };
        r.metadata.name = Some("r".into());
        r.metadata.creation_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        r
    }

    #[test]
    fn the_window_starts_at_the_last_approval() {
        let mut r = pending(2);
        let t1: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let t2: Timestamp = "2026-01-01T00:09:00Z".parse().unwrap();
        review(&mut r, "bob", Decision::Approve, Some("ok"), t1).unwrap();
        assert_eq!(r.phase_at(t1), RequestPhase::Pending);
        let again = review(&mut r, "bob", Decision::Approve, None, t1).unwrap_err();
        assert_eq!(again.code(), 409);
        review(&mut r, "carol", Decision::Approve, None, t2).unwrap();
        let st = r.status.clone().unwrap();
        assert_eq!(st.phase, RequestPhase::Approved);
        assert_eq!(st.approved_at.unwrap().0, t2);
        assert_eq!(
            st.expires_at.unwrap().0,
            "2026-01-01T00:39:00Z".parse::<Timestamp>().unwrap()
        );
        assert_eq!(r.approvers(), ["bob", "carol"]);
    }

    #[test]
    fn decisions_follow_the_phase() {
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let mut r = pending(1);
        let err = review(&mut r, "bob", Decision::Revoke, None, now).unwrap_err();
        assert_eq!(
            err.message(),
            "Operation cannot be fulfilled on debugrequests.poddebug.dev \"r\": it is Pending: only an Approved request can be revoked"
        );
        review(&mut r, "bob", Decision::Deny, Some("no"), now).unwrap();
        assert_eq!(r.phase_at(now), RequestPhase::Denied);
        assert_eq!(
            review(&mut r, "carol", Decision::Approve, None, now)
                .unwrap_err()
                .code(),
            409
        );
        let mut r = pending(1);
        review(&mut r, "bob", Decision::Approve, None, now).unwrap();
        review(&mut r, "carol", Decision::Revoke, None, now).unwrap();
        assert_eq!(r.phase_at(now), RequestPhase::Revoked);
    }

    #[test]
    fn durations_print_as_go_does() {
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_secs(1800)), "30m0s");
        assert_eq!(go_duration(Duration::from_secs(45)), "45s");
    }
}
