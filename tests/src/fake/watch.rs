//! List and watch for every stored kind: `?labelSelector=&fieldSelector=`, list
//! `metadata.resourceVersion`, and `?watch=true` streams of newline-delimited events that start
//! after `resourceVersion`, with BOOKMARKs, `timeoutSeconds`, 410 for compacted versions, and
//! `sendInitialEvents=true` (streaming lists) ending the initial events with the
//! `k8s.io/initial-events-end` bookmark.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::SinkExt;
use serde_json::{Value, json};

use super::http::{ChunkSender, Query, Resp, channel_body, json_response, with_type};
use super::selector::{FieldSelector, LabelSelector};
use super::state::{Kind, Shared};
use super::status::{self, KubeStatus};

/// The longest a watch without `timeoutSeconds` stays open.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

struct Filter {
    kind: Kind,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, object: &Value) -> bool {
        let ns_ok = match &self.namespace {
            Some(ns) => object["metadata"]["namespace"].as_str() == Some(ns.as_str()),
            None => true,
        };
        ns_ok && self.labels.matches(object) && self.fields.matches(object)
    }
}

/// Items of a list drop `kind` and `apiVersion`, as kube-apiserver's typed lists do.
fn list_item(mut object: Value) -> Value {
    if let Some(m) = object.as_object_mut() {
        m.remove("kind");
        m.remove("apiVersion");
    }
    object
}

/// `GET` on a collection: a list, or a watch with `?watch=true`.
pub fn list_or_watch(
    shared: &Arc<Shared>,
    kind: Kind,
    namespace: Option<&str>,
    query: &Query,
) -> Resp {
    let labels = match LabelSelector::parse(query.get("labelSelector").unwrap_or("")) {
        Ok(s) => s,
        Err(e) => return status::bad_request(e).into_response(),
    };
    let fields = match FieldSelector::parse(kind, query.get("fieldSelector").unwrap_or("")) {
        Ok(s) => s,
        Err(e) => return status::bad_request(e).into_response(),
    };
    let filter = Filter {
        kind,
        namespace: namespace.map(str::to_owned),
        labels,
        fields,
    };
    if query.flag("watch") {
        return watch(shared, filter, query);
    }
    // Paging as kube-apiserver does it: `limit` items per page, an opaque `continue` token
    // (here the first page's resourceVersion and the offset), every page at the first's rv.
    let offset_and_rv = match query.get("continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => match decode_continue(token) {
            Some(v) => Some(v),
            None => {
                return status::bad_request(format!(
                    "invalid continue token: continue key is not valid: {token}"
                ))
                .into_response();
            }
        },
    };
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let state = shared.lock();
    let (offset, rv) = offset_and_rv.unwrap_or((0, state.rv));
    let mut items: Vec<Value> = state
        .list(kind, namespace)
        .into_iter()
        .filter(|o| filter.matches(o))
        .skip(offset)
        .map(list_item)
        .collect();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(limit) = limit
        && items.len() > limit
    {
        metadata["remainingItemCount"] = json!(items.len() - limit);
        items.truncate(limit);
        metadata["continue"] = json!(encode_continue(offset + limit, rv));
    }
    json_response(
        200,
        &json!({
            "kind": format!("{}List", kind.kind()),
            "apiVersion": kind.api_version(),
            "metadata": metadata,
            "items": items,
        }),
    )
}

fn encode_continue(offset: usize, rv: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{rv}:{offset}"))
}

fn decode_continue(token: &str) -> Option<(usize, u64)> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (rv, offset) = text.split_once(':')?;
    Some((offset.parse().ok()?, rv.parse().ok()?))
}

fn event_line(event_type: &str, object: &Value) -> Bytes {
    let mut line =
        serde_json::to_vec(&json!({"type": event_type, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

enum Batch {
    Events(Vec<Bytes>),
    Expired(KubeStatus),
}

/// Collects what a watch positioned at `*last` must send next and moves `*last`.
fn pending(shared: &Shared, filter: &Filter, last: &mut u64) -> Batch {
    let state = shared.lock();
    if *last < state.compacted_rv {
        return Batch::Expired(status::expired(format!(
            "too old resource version: {} ({})",
            last, state.compacted_rv
        )));
    }
    let mut out = Vec::new();
    if state.settings.held_watches.contains(&filter.kind) {
        // Held: nothing is sent and the position stays, so the release sends it all in order.
        return Batch::Events(out);
    }
    for e in state
        .history
        .iter()
        .filter(|e| e.rv > *last && e.kind == filter.kind)
    {
        let now = filter.matches(&e.object);
        let before = e.old.as_ref().is_some_and(|o| filter.matches(o));
        let event_type = match (e.event_type, before, now) {
            ("ADDED", _, true) => "ADDED",
            ("DELETED", true, _) => "DELETED",
            ("MODIFIED", true, true) => "MODIFIED",
            ("MODIFIED", false, true) => "ADDED",
            ("MODIFIED", true, false) => "DELETED",
            _ => continue,
        };
        out.push(event_line(event_type, &e.object));
    }
    *last = (*last).max(state.rv);
    Batch::Events(out)
}

/// The Status of that ERROR event, word for word.
fn watch_progress_disabled() -> serde_json::Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled",
        "reason": "InternalError",
        "code": 500,
    })
}

fn watch(shared: &Arc<Shared>, filter: Filter, query: &Query) -> Resp {
    let start = query.get("resourceVersion").unwrap_or("");
    let bookmarks = query.flag("allowWatchBookmarks");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);

    let send_initial = query.flag("sendInitialEvents");
    if (start.is_empty() || start == "0") && bookmarks && !send_initial {
        // kube-apiserver v1.36 (on ../shared/realcluster) takes a watch from "any" resource
        // version that asks for bookmarks for a streaming list it cannot serve: one ERROR event.
        let (mut tx, body) = channel_body(1);
        let mut shutdown = shared.shutdown.clone();
        let line = event_line("ERROR", &watch_progress_disabled());
        tokio::spawn(async move {
            let _ = send(&mut tx, &mut shutdown, line).await;
        });
        return with_type(200, "application/json", body);
    }
    let (mut initial, mut last) = if start.is_empty() || start == "0" || send_initial {
        let state = shared.lock();
        let mut objects: Vec<Bytes> = state
            .list(filter.kind, filter.namespace.as_deref())
            .into_iter()
            .filter(|o| filter.matches(o))
            .map(|o| event_line("ADDED", &o))
            .collect();
        if send_initial {
            // A streaming list ends its initial events with this bookmark.
            objects.push(event_line(
                "BOOKMARK",
                &json!({
                    "kind": filter.kind.kind(),
                    "apiVersion": filter.kind.api_version(),
                    "metadata": {
                        "resourceVersion": state.rv.to_string(),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                }),
            ));
        }
        (objects, state.rv)
    } else {
        match start.parse::<u64>() {
            Ok(rv) => (Vec::new(), rv),
            Err(_) => {
                return status::bad_request(format!("invalid resource version: {start}"))
                    .into_response();
            }
        }
    };

    let (mut tx, body) = channel_body(64);
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut changes = shared.subscribe();
        let mut shutdown = shared.shutdown.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        let interval = shared
            .lock()
            .settings
            .bookmark_interval
            .max(Duration::from_millis(10));
        let mut next_bookmark = tokio::time::Instant::now() + interval;
        loop {
            let batch = pending(&shared, &filter, &mut last);
            let lines = match batch {
                Batch::Events(lines) => lines,
                Batch::Expired(st) => {
                    let _ = send(&mut tx, &mut shutdown, event_line("ERROR", &st.to_json())).await;
                    return;
                }
            };
            for line in initial.drain(..).chain(lines) {
                if !send(&mut tx, &mut shutdown, line).await {
                    return;
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(next_bookmark), if bookmarks => {
                    next_bookmark = tokio::time::Instant::now() + interval;
                    // Flush what happened first, so the bookmark never runs ahead of an event.
                    let lines = match pending(&shared, &filter, &mut last) {
                        Batch::Events(lines) => lines,
                        Batch::Expired(_) => continue,
                    };
                    for line in lines {
                        if !send(&mut tx, &mut shutdown, line).await {
                            return;
                        }
                    }
                    let object = json!({
                        "kind": filter.kind.kind(),
                        "apiVersion": filter.kind.api_version(),
                        "metadata": {"resourceVersion": last.to_string()},
                    });
                    if !send(&mut tx, &mut shutdown, event_line("BOOKMARK", &object)).await {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = crate::fake::stopped(&mut shutdown) => return,
            }
        }
    });
    with_type(200, "application/json", body)
}

/// Sends one chunk unless the client went away or the fake stops; `false` ends the stream.
pub async fn send(
    tx: &mut ChunkSender,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    chunk: Bytes,
) -> bool {
    tokio::select! {
        r = tx.send(chunk) => r.is_ok(),
        _ = crate::fake::stopped(shutdown) => false,
    }
}
