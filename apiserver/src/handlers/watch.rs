//! Watches of debug containers: newline-delimited `{"type": ..., "object": ...}` events, as
//! kube-apiserver streams them, built on a pod watch so a client can resume from any
//! resourceVersion it saw (bookmarks included).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use poddebug_storage::{DebugWatchEvent, ListOptions, WatchOptions};
use poddebug_types::{API_VERSION, ApiError};
use serde_json::{Value, json};

use crate::authn::Authenticated;
use crate::error::Error;
use crate::state::AppState;

/// Longest watch served before the client is asked to re-watch (kube-apiserver picks a random
/// value between its min-request-timeout and twice that).
const MAX_WATCH: Duration = Duration::from_secs(1800);

/// Encode the events that carry no debug container: bookmarks and errors.
fn encode_marker(ev: DebugWatchEvent, table: bool) -> Option<Bytes> {
    match ev {
        DebugWatchEvent::Bookmark(rv) => bookmark(json!({"resourceVersion": rv}), table),
        DebugWatchEvent::InitialEventsEnd(rv) => bookmark(
            json!({"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}),
            table,
        ),
        DebugWatchEvent::Error(e) => {
            let status: Value = serde_json::from_slice(&e.to_json()).unwrap_or(Value::Null);
            line(json!({"type": "ERROR", "object": status}))
        }
        _ => None,
    }
}

/// A BOOKMARK event whose object carries only `metadata`.
fn bookmark(metadata: Value, table: bool) -> Option<Bytes> {
    let object = if table {
        super::table::envelope(metadata, Vec::new(), Vec::new())
    } else {
        json!({"kind": "PodDebugContainer", "apiVersion": API_VERSION, "metadata": metadata})
    };
    line(json!({"type": "BOOKMARK", "object": object}))
}

/// The random default length of a watch: between 15 and 30 minutes, as kube-apiserver spreads
/// its watches so that clients do not all re-watch at once after a restart.
fn default_watch_length() -> Duration {
    use rand::Rng;
    Duration::from_secs(rand::rng().random_range(MAX_WATCH.as_secs() / 2..=MAX_WATCH.as_secs()))
}

/// Streaming lists (`sendInitialEvents=true`) as kube-apiserver validates them: they need
/// `resourceVersionMatch=NotOlderThan` and bookmarks.
fn check_streaming_list(q: &BTreeMap<String, String>) -> Result<bool, ApiError> {
    let send = matches!(
        q.get("sendInitialEvents").map(String::as_str),
        Some("true" | "1")
    );
    if !send {
        return Ok(false);
    }
    let mut errs = poddebug_types::ErrorList::new();
    if q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        errs.push(poddebug_types::FieldError::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !matches!(
        q.get("allowWatchBookmarks").map(String::as_str),
        Some("true" | "1")
    ) {
        errs.push(poddebug_types::FieldError::forbidden(
            "allowWatchBookmarks",
            "sendInitialEvents requires setting allowWatchBookmarks to true",
        ));
    }
    if errs.is_empty() {
        Ok(true)
    } else {
        Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", errs))
    }
}

fn encode_typed(ty: &str, o: poddebug_types::PodDebugContainer, table: bool) -> Option<Bytes> {
    let object = if table {
        let rv = o.metadata.resource_version.clone();
        super::table::table(std::slice::from_ref(&o), rv.as_deref(), "Metadata")
    } else {
        serde_json::to_value(&o).ok()?
    };
    line(json!({"type": ty, "object": object}))
}

fn line(v: Value) -> Option<Bytes> {
    let mut b = serde_json::to_vec(&v).ok()?;
    b.push(b'\n');
    Some(Bytes::from(b))
}

/// Start a watch and stream it.
pub async fn respond(
    st: AppState,
    list: ListOptions,
    auth: Authenticated,
    table: bool,
    q: BTreeMap<String, String>,
    qualify: bool,
    names: super::selection::NameSelector,
) -> Result<Response, Error> {
    let timeout = watch_length(&q)?;
    let send_initial_events = check_streaming_list(&q)?;
    let opts = WatchOptions {
        list,
        resource_version: q.get("resourceVersion").filter(|s| !s.is_empty()).cloned(),
        allow_bookmarks: matches!(
            q.get("allowWatchBookmarks").map(String::as_str),
            Some("true" | "1")
        ),
        timeout: Some(timeout),
        send_initial_events,
    };
    let events = st.backend.watch(&opts, &auth.user).await?;
    let stream = events.filter_map(move |ev| {
        let typed = |ty: &str, mut o: poddebug_types::PodDebugContainer| {
            if qualify {
                super::selection::qualify(&mut o);
            }
            if names.matches(&o) {
                encode_typed(ty, o, table)
            } else {
                None
            }
        };
        let out = match ev {
            DebugWatchEvent::Added(o) => typed("ADDED", o),
            DebugWatchEvent::Modified(o) => typed("MODIFIED", o),
            DebugWatchEvent::Deleted(o) => typed("DELETED", o),
            other => encode_marker(other, table),
        };
        futures::future::ready(out)
    });
    Ok(streamed(&st, Vec::new(), stream, timeout))
}

/// The length of a watch asked for by `timeoutSeconds`: none, or 0, is the server's default
/// (as in kube-apiserver), and no watch is longer than [`MAX_WATCH`].
pub(super) fn watch_length(q: &BTreeMap<String, String>) -> Result<Duration, ApiError> {
    let seconds = match q.get("timeoutSeconds") {
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| ApiError::BadRequest(format!("timeoutSeconds: invalid value {v:?}")))?,
        None => 0,
    };
    Ok(if seconds == 0 {
        default_watch_length()
    } else {
        Duration::from_secs(seconds).min(MAX_WATCH)
    })
}

/// The resourceVersion a watch of records this server numbers itself (sessions, requests)
/// resumes from: none for no value, `""` or `"0"` (start from the current state).
pub(super) fn resume_from(q: &BTreeMap<String, String>) -> Result<Option<u64>, ApiError> {
    q.get("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0")
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("resourceVersion: invalid value {v:?}")))
        })
        .transpose()
}

/// The answer to a watch: the `first` event lines, then the lines of `events`, until the
/// server begins its shutdown (clients re-watch another replica) or `length` has passed.
pub(super) fn streamed(
    st: &AppState,
    first: Vec<Bytes>,
    events: impl futures::Stream<Item = Bytes> + Send + 'static,
    length: Duration,
) -> Response {
    let mut drain = st.watch_drain.clone();
    let body = futures::stream::iter(first)
        .chain(events)
        .map(Ok::<Bytes, std::io::Error>)
        .take_until(Box::pin(async move {
            let _ = drain.wait_for(|d| *d).await;
        }))
        .take_until(tokio::time::sleep(length));
    let mut resp = (StatusCode::OK, Body::from_stream(body)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}
