//! `DebugSession`s, the live attach streams of every replica (see [`crate::sessions`]):
//! `GET …/namespaces/NS/pods/POD/sessions[/ID]`, `GET …/namespaces/NS/debugsessions[/ID]` and
//! `GET …/debugsessions` (lists as JSON, as a Table, or `?watch=true`), and
//! `DELETE …/namespaces/NS/pods/POD/sessions/ID` to terminate one.
//!
//! Authorization: kube-apiserver (and the handler chain, the same way) authorizes the path —
//! `get`/`delete` on `pods/sessions`, `list`/`watch`/`get` on `debugsessions`. The
//! `debugsessions` paths also need `list`/`watch`/`get` on `pods/sessions` in the namespace
//! (the cluster for all namespaces), so one permission, `pods/sessions`, decides who sees
//! sessions whichever path is used. Nobody needs rights in the server's own namespace, where
//! the records are.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use jiff::Timestamp;
use poddebug_storage::{LiveSession, SessionHistoryTooOld, SessionSelector, session_object};
use poddebug_types::{ApiError, DebugSession, DebugSessionList, GROUP, VERSION};
use serde_json::{Value, json};

use super::json_response;
use super::table::{column, table_row};
use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::authz::Attributes;
use crate::error::Error;
use crate::state::AppState;

/// How long a termination waits for the relaying replica to end the stream.
const TERMINATION_WAIT: Duration = Duration::from_secs(2);

/// Which sessions a request is about.
#[derive(Clone, Debug, Default)]
struct Scope {
    namespace: Option<String>,
    pod: Option<String>,
    /// A list's or watch's `labelSelector` and `fieldSelector`.
    selector: SessionSelector,
}

impl Scope {
    fn matches(&self, s: &LiveSession) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|n| n == s.record.namespace)
            && self.pod.as_deref().is_none_or(|p| p == s.record.pod)
            && self.selector.matches(s)
    }
}

/// The live sessions in the scope's namespace and pod, each debug container's together, once
/// this replica knows them (503 when it does not within [`crate::sessions::SYNC_WAIT`]).
async fn live(st: &AppState, scope: &Scope) -> Result<(Vec<Arc<LiveSession>>, u64), Error> {
    let store = st.sessions.store();
    crate::sessions::synced(store).await?;
    Ok(store.scoped(
        scope.namespace.as_deref(),
        scope.pod.as_deref(),
        Timestamp::now(),
    ))
}

/// The objects of the sessions of `all` (each debug container's together, as the store gives
/// them) that `keep` selects, each with its participants: work proportional to `all`.
fn objects(all: &[Arc<LiveSession>], keep: impl Fn(&LiveSession) -> bool) -> Vec<DebugSession> {
    all.chunk_by(|a, b| a.same_container(b))
        .flat_map(|peers| {
            peers
                .iter()
                .filter(|s| keep(s))
                .map(|s| session_object(s, peers))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `verb` on `pods/sessions` in `namespace` (empty: the cluster).
fn pods_sessions(verb: &str, namespace: &str) -> Attributes {
    Attributes::Resource {
        verb: verb.to_owned(),
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource: "pods".to_owned(),
        subresource: "sessions".to_owned(),
        namespace: namespace.to_owned(),
        name: String::new(),
    }
}

fn is_watch(q: &BTreeMap<String, String>) -> bool {
    matches!(q.get("watch").map(String::as_str), Some("true" | "1"))
}

/// The Table of sessions `kubectl get debugsessions` prints.
fn table(items: &[DebugSession], rv: Option<&str>, include_object: &str) -> Value {
    let now = Timestamp::now();
    let columns = vec![
        column("Name", "string", "name", "The session id", 0),
        column("Pod", "string", "", "The pod", 0),
        column("Container", "string", "", "The debug container", 0),
        column("User", "string", "", "Who opened the stream", 0),
        column(
            "Mode",
            "string",
            "",
            "owner, peer, observer or moderator",
            0,
        ),
        column(
            "Participants",
            "string",
            "",
            "Everyone attached to the same debug container",
            0,
        ),
        column(
            "Moderation",
            "string",
            "",
            "waiting (input withheld), moderated, or none",
            1,
        ),
        column("Replica", "string", "", "The replica relaying it", 1),
        column("Age", "string", "", "Since the stream was opened", 0),
    ];
    let rows: Vec<Value> = items
        .iter()
        .map(|s| {
            let st = s.status.clone().unwrap_or_default();
            let participants = st
                .participants
                .iter()
                .map(|p| format!("{}({})", p.user, p.mode.as_str()))
                .collect::<Vec<_>>()
                .join(",");
            let moderation = if st.waiting_for_moderator {
                "waiting"
            } else if st.moderated {
                "moderated"
            } else {
                "none"
            };
            let cells = json!([
                s.metadata.name.clone().unwrap_or_default(),
                s.spec.pod,
                s.spec.container,
                s.spec.user,
                s.spec.mode.as_str(),
                participants,
                moderation,
                st.replica,
                super::table::human_age(s.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
            ]);
            table_row(cells, s, &s.metadata, include_object)
        })
        .collect();
    super::table::envelope(super::table::list_meta(rv), columns, rows)
}

/// A list (or, with `?watch=true`, a watch) of the sessions in `scope`.
async fn respond(
    st: AppState,
    scope: Scope,
    headers: HeaderMap,
    q: BTreeMap<String, String>,
) -> Result<Response, Error> {
    let mut scope = scope;
    scope.selector = SessionSelector::parse(
        q.get("labelSelector").map_or("", String::as_str),
        q.get("fieldSelector").map_or("", String::as_str),
    )?;
    let wants_table = super::table::wants_table(&headers);
    if is_watch(&q) {
        return watch(st, scope, wants_table, &q).await;
    }
    let (all, rv) = live(&st, &scope).await?;
    let mut items = objects(&all, |s| scope.matches(s));
    items.sort_by(|a, b| {
        (
            &a.metadata.namespace,
            &a.metadata.creation_timestamp,
            &a.metadata.name,
        )
            .cmp(&(
                &b.metadata.namespace,
                &b.metadata.creation_timestamp,
                &b.metadata.name,
            ))
    });
    let rv = rv.to_string();
    if wants_table {
        let include = super::table::include_object(&q);
        return json_response(StatusCode::OK, &table(&items, Some(&rv), include));
    }
    let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta {
        resource_version: Some(rv),
        ..Default::default()
    };
    json_response(StatusCode::OK, &DebugSessionList::new(items, meta))
}

fn line(v: &Value) -> Option<Bytes> {
    let mut b = serde_json::to_vec(v).ok()?;
    b.push(b'\n');
    Some(Bytes::from(b))
}

/// What a watcher sees of a session: the object without what changes on every renewal.
fn watched(s: &DebugSession) -> DebugSession {
    let mut s = s.clone();
    s.metadata.resource_version = None;
    if let Some(st) = s.status.as_mut() {
        st.renew_time = None;
    }
    s
}

fn event_line(ty: &str, s: &DebugSession, wants_table: bool) -> Option<Bytes> {
    let object = if wants_table {
        table(
            std::slice::from_ref(s),
            s.metadata.resource_version.as_deref(),
            "Metadata",
        )
    } else {
        serde_json::to_value(s).ok()?
    };
    line(&json!({"type": ty, "object": object}))
}

/// A watch of the sessions in `scope`, from the replica's copy of the records: the current
/// ones first (unless resumed from a `resourceVersion`, whose later changes are replayed), then
/// every change. A change to one session also changes the participants of the others on the
/// same debug container, which are sent as MODIFIED.
async fn watch(
    st: AppState,
    scope: Scope,
    wants_table: bool,
    q: &BTreeMap<String, String>,
) -> Result<Response, Error> {
    let timeout = super::watch::watch_length(q)?;
    let (all, _) = live(&st, &scope).await?;
    let store = st.sessions.store().clone();
    // Subscribe before reading what to replay, so nothing falls between.
    let rx = store.subscribe();
    let resume = super::watch::resume_from(q)?;
    let mut first: Vec<Bytes> = Vec::new();
    // What each known session looked like when last sent (renewals alone are not sent).
    let mut known: BTreeMap<String, DebugSession> = BTreeMap::new();
    let mut last_rv = 0;
    match resume {
        None => {
            for obj in objects(&all, |s| scope.matches(s)) {
                known.insert(obj.metadata.name.clone().unwrap_or_default(), watched(&obj));
                first.extend(event_line("ADDED", &obj, wants_table));
            }
        }
        Some(rv) => {
            last_rv = rv;
            let replay = store.since(rv).map_err(|SessionHistoryTooOld| {
                Error::from(ApiError::expired(format!("too old resource version: {rv}")))
            })?;
            let now = Timestamp::now();
            for ev in replay.iter().filter(|e| scope.matches(&e.session)) {
                last_rv = last_rv.max(ev.rv);
                let peers = store.on_container(&ev.session.container(), now);
                let obj = session_object(&ev.session, &peers);
                let ty = if ev.deleted { "DELETED" } else { "MODIFIED" };
                first.extend(event_line(ty, &obj, wants_table));
            }
            known.extend(
                objects(&all, |s| scope.matches(s))
                    .into_iter()
                    .map(|obj| (obj.metadata.name.clone().unwrap_or_default(), watched(&obj))),
            );
        }
    }
    let stream = futures::stream::unfold(
        (rx, known, store, scope, last_rv),
        move |(mut rx, mut known, store, scope, last_rv)| async move {
            loop {
                let ev = match rx.recv().await {
                    Ok(ev) => ev,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        // Too slow for the changes: the client re-watches.
                        return None;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                };
                if ev.rv <= last_rv && last_rv != 0 {
                    continue;
                }
                // Only the sessions of the changed one's debug container can change.
                let peers = store.on_container(&ev.session.container(), Timestamp::now());
                let mut out: Vec<u8> = Vec::new();
                let mut send = |obj: DebugSession, deleted: bool, out: &mut Vec<u8>| {
                    let id = obj.metadata.name.clone().unwrap_or_default();
                    let ty = if deleted {
                        if known.remove(&id).is_none() {
                            return;
                        }
                        "DELETED"
                    } else {
                        let seen = watched(&obj);
                        match known.insert(id, seen.clone()) {
                            None => "ADDED",
                            Some(before) if before == seen => return,
                            Some(_) => "MODIFIED",
                        }
                    };
                    out.extend(event_line(ty, &obj, wants_table).unwrap_or_default());
                };
                if scope.matches(&ev.session) {
                    send(session_object(&ev.session, &peers), ev.deleted, &mut out);
                }
                for other in peers
                    .iter()
                    .filter(|o| o.record.id != ev.session.record.id && scope.matches(o))
                {
                    send(session_object(other, &peers), false, &mut out);
                }
                if !out.is_empty() {
                    return Some((Bytes::from(out), (rx, known, store, scope, last_rv)));
                }
            }
        },
    );
    Ok(super::watch::streamed(&st, first, stream, timeout))
}

/// `GET …/namespaces/NS/pods/POD/sessions`.
pub async fn list_in_pod(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let scope = Scope {
        namespace: Some(ns),
        pod: Some(pod),
        ..Default::default()
    };
    respond(st, scope, headers, q).await
}

/// `GET …/namespaces/NS/debugsessions`.
pub async fn in_namespace(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let verb = if is_watch(&q) { "watch" } else { "list" };
    crate::filters::check(&st, &auth.user, &pods_sessions(verb, &ns)).await?;
    let scope = Scope {
        namespace: Some(ns),
        ..Default::default()
    };
    respond(st, scope, headers, q).await
}

/// `GET /apis/poddebug.dev/v1alpha1/debugsessions`.
pub async fn all_namespaces(
    State(st): State<AppState>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let verb = if is_watch(&q) { "watch" } else { "list" };
    crate::filters::check(&st, &auth.user, &pods_sessions(verb, "")).await?;
    respond(st, Scope::default(), headers, q).await
}

/// The session `id` in `scope` and the sessions on its debug container, or 404.
async fn find(
    st: &AppState,
    scope: &Scope,
    id: &str,
) -> Result<(Arc<LiveSession>, Vec<Arc<LiveSession>>), Error> {
    let store = st.sessions.store();
    crate::sessions::synced(store).await?;
    let now = Timestamp::now();
    let found = store
        .get(id, now)
        .filter(|s| scope.matches(s))
        .ok_or_else(|| Error::from(ApiError::not_found("debugsessions", GROUP, id)))?;
    let peers = store.on_container(&found.container(), now);
    Ok((found, peers))
}

fn one(s: &LiveSession, all: &[Arc<LiveSession>], headers: &HeaderMap) -> Result<Response, Error> {
    let obj = session_object(s, all);
    if super::table::wants_table(headers) {
        return json_response(
            StatusCode::OK,
            &table(
                std::slice::from_ref(&obj),
                obj.metadata.resource_version.as_deref(),
                "Metadata",
            ),
        );
    }
    json_response(StatusCode::OK, &obj)
}

/// `GET …/namespaces/NS/pods/POD/sessions/ID`.
pub async fn get_in_pod(
    State(st): State<AppState>,
    Path((ns, pod, id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let scope = Scope {
        namespace: Some(ns),
        pod: Some(pod),
        ..Default::default()
    };
    let (s, all) = find(&st, &scope, &id).await?;
    one(&s, &all, &headers)
}

/// `GET …/namespaces/NS/debugsessions/ID`.
pub async fn get_in_namespace(
    State(st): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    crate::filters::check(&st, &auth.user, &pods_sessions("get", &ns)).await?;
    let scope = Scope {
        namespace: Some(ns),
        ..Default::default()
    };
    let (s, all) = find(&st, &scope, &id).await?;
    one(&s, &all, &headers)
}

/// `DELETE …/namespaces/NS/pods/POD/sessions/ID`: terminate the session, whichever replica
/// relays it. Its record gets the request; the relaying replica ends the stream (the client
/// gets a `Forbidden` Status "session terminated by USER"), notes it in the recording, and
/// removes the record. Here: an audit record, an Event on the pod, and the answer — the
/// session as it was, once the stream is gone (or after [`TERMINATION_WAIT`], with
/// `status.terminatedBy` set either way).
pub async fn delete(
    State(st): State<AppState>,
    Path((ns, pod, id)): Path<(String, String, String)>,
    Extension(auth): Extension<Authenticated>,
) -> Result<Response, Error> {
    let scope = Scope {
        namespace: Some(ns.clone()),
        pod: Some(pod.clone()),
        ..Default::default()
    };
    let (s, all) = find(&st, &scope, &id).await?;
    let by = auth.user.user.clone();
    let now = Timestamp::now();
    st.sessions
        .store()
        .request_termination(&id, &by, now)
        .await?;
    let mut obj = session_object(&s, &all);
    if let Some(status) = obj.status.as_mut() {
        status.terminated_by = Some(by.clone());
    }
    let mut record = AuditRecord::new(
        Action::Terminate,
        &auth.user,
        &ns,
        &pod,
        &s.record.container,
    );
    record.session = Some(id.clone());
    record.mode = Some(s.record.mode.as_str().to_owned());
    record.start = s.record.started.parse().ok();
    record.end = Some(now);
    record.outcome = Some(format!("session of {} terminated", s.record.user));
    record.emit();
    st.backend
        .record_event(
            &ns,
            &pod,
            &s.record.ec_name,
            poddebug_storage::REASON_SESSION_TERMINATED,
            format!(
                "User {:?} terminated session {id} of user {:?} on debug container {:?}",
                by, s.record.user, s.record.container
            ),
        )
        .await;
    // The stream ends within seconds wherever it is relayed: wait (bounded) to answer after.
    let deadline = tokio::time::Instant::now() + TERMINATION_WAIT;
    while st.sessions.store().get(&id, Timestamp::now()).is_some()
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    json_response(StatusCode::OK, &obj)
}
