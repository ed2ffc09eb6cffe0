//! Session recordings as API objects: `GET …/namespaces/NS/pods/POD/recordings` (one pod's),
//! `GET …/namespaces/NS/debugrecordings` (a namespace's) and `GET …/debugrecordings` (every
//! namespace's), lists of kind `DebugRecording` (JSON or a Table, with `labelSelector`, `limit` and
//! `continue`), `GET …/namespaces/NS/pods/POD/recordings/ID`, the recording itself
//! (`application/x-asciicast`, streamed from the store; with `?start=SECONDS[&end=SECONDS]`, the
//! part of it a player seeking to `start` needs, [`time_range`]), and
//! `GET …/namespaces/NS/pods/POD/recordings/ID/commands`, the lines the user submitted, derived
//! from the recorded input (a `RecordingCommandList`; 404 when input was not recorded), and
//! `GET …/namespaces/NS/pods/POD/recordings/ID/evidence`, the metadata as stored and signed (a
//! `DebugRecordingEvidence`), which with the recording's bytes and the public keys
//! (`recordingkeys`) is what a verifier needs.
//!
//! With `?search=TEXT`, the three lists hold only the recordings whose commands or output
//! hold `TEXT`, each with its matches ([`super::recording_search`]).
//!
//! `GET …/namespaces/NS/debugrecordings/ID` also verifies the recording (`status.verification`):
//! every part the signed statement of its metadata lists is read and hashed, bounded by the
//! recording's size (`--max-recording-bytes`); lists carry no verification.
//!
//! Authorization: one permission decides who reads recordings whichever path is used, `get`
//! (one pod's list, one recording) or `list` (the namespace's, the cluster's) on
//! `pods/recordings` in `poddebug.dev`, in the pod's namespace (the cluster for every
//! namespace). The handler chain has authorized the path and checked the namespace and pod
//! names; the `debugrecordings` paths check `pods/recordings` here. The id is checked against
//! the one shape ids have before it names an object. Lists and reads go to the store (a
//! directory or a bucket every replica shares), never to this replica's memory. Recordings
//! outlive their pod, so the pod is not looked up. With recording off, the paths do not exist
//! (404).

use std::collections::BTreeMap;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use base64::Engine;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use poddebug_recording::range::TimeRange;
use poddebug_storage::{LabelSelector, label_value};
use poddebug_types::{
    ApiError, ErrorList, FieldError, FieldValue, GROUP, Recording, RecordingList, RecordingRecord,
    VERSION,
};
use serde_json::{Value, json};

use super::json_response;
use super::recording_search;
use super::table::{column, table_row};
use crate::authn::Authenticated;
use crate::authz::Attributes;
use crate::error::Error;
use crate::state::AppState;
use poddebug_recording::Recorder;
use poddebug_recording::recorder::store::valid_id;

/// Media type of one recording.
pub const ASCIICAST: &str = "application/x-asciicast";

fn recorder(st: &AppState) -> Result<&Recorder, Error> {
    st.recorder
        .as_deref()
        .ok_or_else(|| ApiError::PathNotFound.into())
}

pub(super) fn storage_failed(e: &dyn std::fmt::Display) -> Error {
    tracing::warn!(error = %e, "reading recordings failed");
    ApiError::Internal("reading the recordings failed".to_owned()).into()
}

/// `verb` on `pods/recordings` in `namespace` (empty: the cluster).
fn pods_recordings(verb: &str, namespace: &str) -> Attributes {
    Attributes::Resource {
        verb: verb.to_owned(),
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource: "pods".to_owned(),
        subresource: "recordings".to_owned(),
        namespace: namespace.to_owned(),
        name: String::new(),
    }
}

/// The labels of a recording: pod, container and user, each made label-safe (a user name such
/// as `system:serviceaccount:ns:sa` is not a label value; `spec.user` holds it whole).
fn labels(r: &RecordingRecord) -> BTreeMap<String, String> {
    BTreeMap::from([
        (format!("{GROUP}/pod"), label_value(&r.pod)),
        (format!("{GROUP}/container"), label_value(&r.container)),
        (format!("{GROUP}/user"), label_value(&r.user)),
    ])
}

/// Where a page ends: the sort key of its last item, opaque to clients.
fn continue_token(r: &RecordingRecord) -> String {
    let key = json!([r.start, r.namespace, r.id]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

fn sort_key(r: &RecordingRecord) -> (Option<jiff::Timestamp>, String, String) {
    (r.start.parse().ok(), r.namespace.clone(), r.id.clone())
}

fn parse_continue(token: &str) -> Result<(Option<jiff::Timestamp>, String, String), Error> {
    let bad = || -> Error {
        ApiError::BadRequest(format!("continue key is not valid: {token:?}")).into()
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: (String, String, String) = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((v.0.parse().ok(), v.1, v.2))
}

/// The Table `kubectl get debugrecordings` prints (with a column for the first match when
/// `search`).
fn table(items: &[Recording], meta: &ListMeta, include_object: &str, search: bool) -> Value {
    let now = jiff::Timestamp::now();
    let mut columns = vec![
        column("Name", "string", "name", "The recording id", 0),
        column("Pod", "string", "", "The pod", 0),
        column("Container", "string", "", "The debug container", 0),
        column("User", "string", "", "Who attached", 0),
        column("Bytes", "integer", "", "Size of the recording", 0),
        column("Exit", "string", "", "The process's exit code", 0),
        column(
            "Truncated",
            "boolean",
            "",
            "Whether the recording stops before the session did",
            0,
        ),
        column("Protocol", "string", "", "The stream protocol", 1),
        column("Ended", "string", "", "When the session ended", 1),
        column(
            "Verified",
            "boolean",
            "",
            "Whether its metadata carries the server's MAC (false: not vouched for)",
            1,
        ),
        column("Age", "string", "", "Since the session started", 0),
    ];
    if search {
        columns.push(column(
            "Match",
            "string",
            "",
            "The first line of the recording's commands or output that holds the text searched \
             for",
            0,
        ));
    }
    let rows: Vec<Value> = items
        .iter()
        .map(|r| {
            let mut cells = json!([
                r.metadata.name.clone().unwrap_or_default(),
                r.spec.pod,
                r.spec.container,
                r.spec.user,
                r.status.bytes,
                r.status
                    .exit_code
                    .map_or_else(|| "<none>".to_owned(), |c| c.to_string()),
                r.status.truncated,
                r.spec.protocol,
                r.status
                    .end
                    .clone()
                    .unwrap_or_else(|| "<running>".to_owned()),
                r.status.verified,
                super::table::human_age(r.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
            ]);
            if search && let Some(cells) = cells.as_array_mut() {
                let first = r.status.matches.as_ref().and_then(|m| m.first());
                cells.push(json!(first.map_or_else(String::new, |m| format!(
                    "{}@{:.1}s: {}",
                    m.source, m.offset, m.text
                ))));
            }
            table_row(cells, r, &r.metadata, include_object)
        })
        .collect();
    super::table::envelope(
        serde_json::to_value(meta).unwrap_or(json!({})),
        columns,
        rows,
    )
}

/// A list of the recordings of `namespace` (all: None) and `pod` (all: None), with the query's
/// `labelSelector`, `limit` and `continue`, as JSON or a Table.
async fn respond(
    st: &AppState,
    user: &str,
    namespace: Option<&str>,
    pod: Option<&str>,
    headers: &HeaderMap,
    q: &BTreeMap<String, String>,
) -> Result<Response, Error> {
    if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
        // Recordings are not watched (their store has no change feed); as kube-apiserver
        // answers a verb a resource does not have.
        return Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource (watch)".to_owned(),
        )
        .into());
    }
    let selector = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let limit: usize = match q.get("limit").filter(|l| !l.is_empty()) {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| Error::from(ApiError::BadRequest(format!("invalid limit {l:?}"))))?
            .max(0) as usize,
        None => 0,
    };
    let after = q
        .get("continue")
        .filter(|c| !c.is_empty())
        .map(|c| parse_continue(c))
        .transpose()?;
    let store = recorder(st)?.store();
    let needle = recording_search::needle(q)?;
    // Taken before the store is read, held until the answer is made.
    let _search = needle
        .as_ref()
        .map(|_| st.searches.start(user))
        .transpose()?;
    let mut records = store
        .list(namespace, pod)
        .await
        .map_err(|e| storage_failed(&e))?;
    records.retain(|r| selector.matches(Some(&labels(r))));
    records.sort_by_cached_key(sort_key);
    if let Some(after) = &after {
        records.retain(|r| sort_key(r) > *after);
    }
    let mut meta = ListMeta::default();
    let items: Vec<Recording> = if let Some(needle) = &needle {
        let page = recording_search::search(store, records, needle, limit).await?;
        meta.continue_ = page.last_examined.as_ref().map(continue_token);
        page.items
            .into_iter()
            .map(|(r, found)| {
                let mut o = r.to_object(labels(&r));
                o.status.matches = Some(found.matches);
                o.status.match_count = Some(found.total);
                o
            })
            .collect()
    } else {
        page(&mut records, limit, &mut meta);
        records.iter().map(|r| r.to_object(labels(r))).collect()
    };
    if super::table::wants_table(headers) {
        let include = super::table::include_object(q);
        return json_response(
            StatusCode::OK,
            &table(&items, &meta, include, needle.is_some()),
        );
    }
    json_response(StatusCode::OK, &RecordingList::new(items, meta))
}

/// Cut `records` to `limit` (0: no limit), `meta` saying where the next page starts.
fn page(records: &mut Vec<RecordingRecord>, limit: usize, meta: &mut ListMeta) {
    if limit > 0 && records.len() > limit {
        let rest = records.len() - limit;
        records.truncate(limit);
        if let Some(last) = records.last() {
            meta.continue_ = Some(continue_token(last));
            meta.remaining_item_count = Some(i64::try_from(rest).unwrap_or(i64::MAX));
        }
    }
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/recordings`.
pub async fn list(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    respond(&st, &auth.user.user, Some(&ns), Some(&pod), &headers, &q).await
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/debugrecordings`.
pub async fn in_namespace(
    State(st): State<AppState>,
    Path(ns): Path<String>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    recorder(&st)?;
    crate::filters::check(&st, &auth.user, &pods_recordings("list", &ns)).await?;
    respond(&st, &auth.user.user, Some(&ns), None, &headers, &q).await
}

/// `GET /apis/poddebug.dev/v1alpha1/debugrecordings`.
pub async fn all_namespaces(
    State(st): State<AppState>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    recorder(&st)?;
    crate::filters::check(&st, &auth.user, &pods_recordings("list", "")).await?;
    respond(&st, &auth.user.user, None, None, &headers, &q).await
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/debugrecordings/ID`: the `DebugRecording` object
/// (`kubectl get debugrecordings ID`); the recording itself is under its pod.
pub async fn get_in_namespace(
    State(st): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let store = recorder(&st)?.store();
    crate::filters::check(&st, &auth.user, &pods_recordings("get", &ns)).await?;
    let not_found = || Error::from(ApiError::not_found("debugrecordings", GROUP, &id));
    if !valid_id(&id) {
        return Err(not_found());
    }
    let found = store
        .list(Some(&ns), None)
        .await
        .map_err(|e| storage_failed(&e))?
        .into_iter()
        .find(|r| r.id == id)
        .ok_or_else(not_found)?;
    let mut obj = found.to_object(labels(&found));
    // One recording read: verified against its signed statement, every part hashed (lists
    // leave this out, so that listing never reads a recording).
    obj.status.verification = store
        .verification(&ns, &found.pod, &id)
        .await
        .map_err(|e| storage_failed(&e))?;
    if super::table::wants_table(&headers) {
        return json_response(
            StatusCode::OK,
            &table(
                std::slice::from_ref(&obj),
                &ListMeta::default(),
                "Metadata",
                false,
            ),
        );
    }
    json_response(StatusCode::OK, &obj)
}

/// The kind named by the refusal of a bad time range (the options of reading a recording, as
/// kube-apiserver names `PodLogOptions` when refusing a bad `pods/log` query).
const RANGE_OPTIONS: &str = "DebugRecordingOptions";
/// Largest session time, in seconds, a range may name (over 31 years: past any session,
/// and exact in microseconds).
pub const MAX_RANGE_SECONDS: f64 = 1e9;

/// The time range of `?start=SECONDS&end=SECONDS` (decimal seconds of session time; either
/// alone: from the start, to the end), `None` without either. As kube-apiserver treats the
/// query of `pods/log`: a value that is not a number is 400 BadRequest; a number out of range
/// (negative, not finite, past [`MAX_RANGE_SECONDS`], an end before the start) is 422
/// Invalid, one cause per field.
pub fn time_range(q: &BTreeMap<String, String>, id: &str) -> Result<Option<TimeRange>, Error> {
    let number = |name: &str| -> Result<Option<(f64, String)>, Error> {
        let Some(v) = q.get(name) else {
            return Ok(None);
        };
        let t: f64 = v.trim().parse().map_err(|_| {
            Error::from(ApiError::BadRequest(format!(
                "invalid value for {name}: {v:?} is not a number of seconds"
            )))
        })?;
        Ok(Some((t, v.clone())))
    };
    let (start, end) = (number("start")?, number("end")?);
    if start.is_none() && end.is_none() {
        return Ok(None);
    }
    let mut errs = ErrorList::new();
    for (name, value) in [("start", &start), ("end", &end)] {
        if let Some((t, raw)) = value
            && !(t.is_finite() && (0.0..=MAX_RANGE_SECONDS).contains(t))
        {
            errs.push(FieldError::invalid(
                name,
                FieldValue::Raw(raw.clone()),
                format!("must be a number of seconds from 0 to {MAX_RANGE_SECONDS:e}"),
            ));
        }
    }
    if let (Some((s, _)), Some((e, raw))) = (&start, &end)
        && errs.is_empty()
        && e < s
    {
        errs.push(FieldError::invalid(
            "end",
            FieldValue::Raw(raw.clone()),
            "must be greater than or equal to start",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::Invalid {
            group: GROUP.to_owned(),
            kind: RANGE_OPTIONS.to_owned(),
            name: id.to_owned(),
            errors: errs,
        }
        .into());
    }
    Ok(Some(TimeRange {
        start: start.map_or(0.0, |s| s.0),
        end: end.map(|e| e.0),
    }))
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/recordings/ID`: the whole
/// recording, or with `?start=&end=` the range of it a player needs ([`time_range`]).
pub async fn get(
    State(st): State<AppState>,
    Path((ns, pod, id)): Path<(String, String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let store = recorder(&st)?.store();
    let not_found = || Error::from(ApiError::not_found("recordings", GROUP, &id));
    if !valid_id(&id) {
        return Err(not_found());
    }
    let range = time_range(&q, &id)?;
    // Streamed from the store a chunk (a range: a part) at a time: a long recording never
    // sits in memory.
    let parts = match range {
        Some(range) => store
            .read_range(&ns, &pod, &id, range)
            .await
            .map(|s| s.map(StreamExt::boxed)),
        None => store
            .read(&ns, &pod, &id)
            .await
            .map(|s| s.map(StreamExt::boxed)),
    };
    let parts = match parts {
        Ok(Some(s)) => s,
        Ok(None) => return Err(not_found()),
        Err(e) => return Err(storage_failed(&e)),
    };
    let mut resp = Response::new(Body::from_stream(parts));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ASCIICAST));
    // A recording holds whatever the session printed: never a document a browser runs.
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    Ok(resp)
}

/// The metadata of recording `id` of `ns/pod`: 404 for an id of another shape, or none stored.
async fn meta_of(st: &AppState, ns: &str, pod: &str, id: &str) -> Result<RecordingRecord, Error> {
    let store = recorder(st)?.store();
    let not_found = || Error::from(ApiError::not_found("recordings", GROUP, id));
    if !valid_id(id) {
        return Err(not_found());
    }
    store
        .read_meta(ns, pod, id)
        .await
        .map_err(|e| storage_failed(&e))?
        .ok_or_else(not_found)
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/recordings/ID/commands`: authorized
/// by the handler chain as the recording is (`get` on `pods/recordings`).
pub async fn commands(
    State(st): State<AppState>,
    Path((ns, pod, id)): Path<(String, String, String)>,
) -> Result<Response, Error> {
    let meta = meta_of(&st, &ns, &pod, &id).await?;
    if meta.command_count.is_none() {
        // Its input was not recorded: there is nothing commands could be derived from.
        return Err(ApiError::not_found("recordings", GROUP, &format!("{id}/commands")).into());
    }
    let list = recorder(&st)?
        .store()
        .read_commands(&ns, &pod, &id)
        .await
        .map_err(|e| storage_failed(&e))?
        .ok_or_else(|| storage_failed(&"the commands object is unreadable"))?;
    json_response(StatusCode::OK, &list)
}

/// `GET /apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/recordings/ID/evidence`: the
/// recording's metadata as the store holds it, with its signed statement, for a verifier that
/// does not trust the server (`kubectl poddebug recordings verify`). Served as read, whether or
/// not it verifies: judging it is the verifier's work. Authorized by the handler chain as the
/// recording is (`get` on `pods/recordings`).
pub async fn evidence(
    State(st): State<AppState>,
    Path((ns, pod, id)): Path<(String, String, String)>,
) -> Result<Response, Error> {
    let meta = meta_of(&st, &ns, &pod, &id).await?;
    json_response(
        StatusCode::OK,
        &poddebug_types::evidence::RecordingEvidence::new(meta),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn status(e: Error) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
        match e {
            Error::Api(a) => a.to_status(),
            other => panic!("not an API error: {other:?}"),
        }
    }

    #[test]
    fn time_ranges_are_validated_as_kube_apiserver_validates_log_options() {
        assert_eq!(time_range(&query(&[]), "r").ok(), Some(None));
        assert_eq!(
            time_range(&query(&[("start", "300.5"), ("limit", "x")]), "r").ok(),
            Some(Some(TimeRange {
                start: 300.5,
                end: None
            }))
        );
        assert_eq!(
            time_range(&query(&[("end", "60")]), "r").ok(),
            Some(Some(TimeRange {
                start: 0.0,
                end: Some(60.0)
            }))
        );
        let s = status(time_range(&query(&[("start", "5m")]), "r").unwrap_err());
        assert_eq!(
            (s.code, s.reason.as_deref()),
            (Some(400), Some("BadRequest"))
        );
        let s = status(time_range(&query(&[("start", "-1"), ("end", "inf")]), "r").unwrap_err());
        assert_eq!((s.code, s.reason.as_deref()), (Some(422), Some("Invalid")));
        let causes = s.details.and_then(|d| d.causes).unwrap_or_default();
        let fields: Vec<_> = causes.iter().filter_map(|c| c.field.as_deref()).collect();
        assert_eq!(fields, ["start", "end"]);
        let s = status(time_range(&query(&[("start", "10"), ("end", "9")]), "r").unwrap_err());
        assert_eq!(s.code, Some(422));
        assert!(
            s.message
                .unwrap_or_default()
                .contains("end: Invalid value: 9: must be greater than or equal to start")
        );
        assert!(time_range(&query(&[("end", "1e10")]), "r").is_err());
    }

    #[test]
    fn continue_tokens_round_trip_and_bad_ones_are_400() {
        let r = RecordingRecord {
            id: "20260101T000000Z-0123456789abcdef".into(),
            namespace: "shop".into(),
            start: "2026-01-01T00:00:00.5Z".into(),
            ..Default::default()
        };
        assert_eq!(parse_continue(&continue_token(&r)).ok(), Some(sort_key(&r)));
        assert!(parse_continue("not-a-token").is_err());
    }

    #[test]
    fn user_names_become_label_safe_and_stay_whole_in_the_spec() {
        let r = RecordingRecord {
            id: "20260101T000000Z-0123456789abcdef".into(),
            namespace: "shop".into(),
            pod: "web".into(),
            container: "dbg".into(),
            user: "system:serviceaccount:shop:ci".into(),
            start: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        };
        let o = r.to_object(labels(&r));
        assert_eq!(o.spec.user, "system:serviceaccount:shop:ci");
        let l = o.metadata.labels.unwrap_or_default();
        assert_eq!(l["poddebug.dev/pod"], "web");
        assert!(!l["poddebug.dev/user"].contains(':'), "{l:?}");
        assert_eq!(o.metadata.name.as_deref(), Some(r.id.as_str()));
        assert!(o.metadata.creation_timestamp.is_some());
    }
}
