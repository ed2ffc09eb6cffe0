//! Events, core (`/api/v1/.../events`) and `events.k8s.io/v1`: create (201), get, list, and the
//! merge patch kube-rs's `Recorder` sends for a repeated event.

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{StoredEvent, new_uid, now_rfc3339};
use super::status::{self, KubeStatus};

fn group(api_version: &str) -> &str {
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

/// `POST` and `GET` on the collection.
pub async fn collection(
    ctx: &Ctx,
    api_version: &str,
    ns: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    match ctx.method {
        Method::GET => {
            let state = ctx.shared.lock();
            let items: Vec<Value> = state
                .events
                .iter()
                .filter(|e| e.api_version == api_version && e.namespace == ns)
                .map(|e| e.object.clone())
                .collect();
            Ok(json_response(
                200,
                &json!({"kind": "EventList", "apiVersion": api_version, "metadata": {"resourceVersion": state.rv.to_string()}, "items": items}),
            ))
        }
        Method::POST => {
            let mut event = parse_json(&read_body(req).await?)?;
            if !event.is_object() {
                return Err(status::bad_request(
                    "the body of the request must be an Event object",
                ));
            }
            let errors = legacy_validate_event(&event, api_version);
            if !errors.is_empty() {
                let n = event["metadata"]["name"].as_str().unwrap_or("");
                return Err(status::invalid(group(api_version), "Event", n, &errors));
            }
            let mut name = event["metadata"]["name"].as_str().unwrap_or("").to_owned();
            if name.is_empty() {
                let prefix = event["metadata"]["generateName"].as_str().unwrap_or("");
                if prefix.is_empty() {
                    return Err(status::invalid(
                        group(api_version),
                        "Event",
                        "",
                        &[status::FieldError::required(
                            "metadata.name",
                            "name or generateName is required",
                        )],
                    ));
                }
                name = format!("{prefix}{}", &new_uid()[..5]);
            }
            let stored = ctx.shared.mutate(|s| {
                if s.events.iter().any(|e| {
                    e.api_version == api_version
                        && e.namespace == ns
                        && e.object["metadata"]["name"] == name.as_str()
                }) {
                    return Err(status::already_exists(group(api_version), "events", &name));
                }
                let rv = s.next_rv();
                event["kind"] = json!("Event");
                event["apiVersion"] = json!(api_version);
                event["metadata"]["name"] = json!(name);
                event["metadata"]["namespace"] = json!(ns);
                event["metadata"]["uid"] = json!(new_uid());
                event["metadata"]["resourceVersion"] = json!(rv.to_string());
                event["metadata"]["creationTimestamp"] = json!(now_rfc3339());
                s.events.push(StoredEvent {
                    api_version: api_version.to_owned(),
                    namespace: ns.to_owned(),
                    object: event.clone(),
                });
                Ok(event)
            })?;
            Ok(json_response(201, &stored))
        }
        _ => Err(status::method_not_allowed()),
    }
}

/// `GET`, `PATCH` (merge or strategic, applied as a merge) and `PUT` of one event.
pub async fn object(
    ctx: &Ctx,
    api_version: &str,
    ns: &str,
    name: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    let find = |events: &[StoredEvent]| {
        events.iter().position(|e| {
            e.api_version == api_version
                && e.namespace == ns
                && e.object["metadata"]["name"] == name
        })
    };
    match ctx.method {
        Method::GET => {
            let state = ctx.shared.lock();
            find(&state.events)
                .map(|i| json_response(200, &state.events[i].object))
                .ok_or_else(|| status::not_found(group(api_version), "events", name))
        }
        Method::PATCH | Method::PUT => {
            let content_type = ctx.content_type();
            if ctx.method == Method::PATCH && !status::PATCH_TYPES.contains(&content_type.as_str())
            {
                return Err(status::unsupported_patch_type());
            }
            let body = parse_json(&read_body(req).await?)?;
            let is_put = ctx.method == Method::PUT;
            let stored = ctx.shared.mutate(|s| {
                let i = find(&s.events)
                    .ok_or_else(|| status::not_found(group(api_version), "events", name))?;
                let rv = s.next_rv();
                let mut obj = if is_put {
                    body.clone()
                } else {
                    s.events[i].object.clone()
                };
                if !is_put {
                    json_patch::merge(&mut obj, &body);
                }
                obj["metadata"]["resourceVersion"] = json!(rv.to_string());
                s.events[i].object = obj.clone();
                Ok::<_, KubeStatus>(obj)
            })?;
            Ok(json_response(200, &stored))
        }
        _ => Err(status::method_not_allowed()),
    }
}

/// kube-apiserver's `legacyValidateEvent` for core/v1 Events that carry an `eventTime` (the
/// "new" style): the reporting controller (`reportingComponent` in v1), `reportingInstance`,
/// `action` and `reason` are required.
fn legacy_validate_event(event: &Value, api_version: &str) -> Vec<status::FieldError> {
    let has_event_time = event
        .get("eventTime")
        .is_some_and(|t| !t.is_null() && t.as_str() != Some(""));
    if api_version != "v1" || !has_event_time {
        return Vec::new();
    }
    let empty = |k: &str| {
        event
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
    };
    let mut errors = Vec::new();
    for (key, field) in [
        ("reportingComponent", "reportingComponent"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
    ] {
        if empty(key) {
            errors.push(status::FieldError::required(field, ""));
        }
    }
    errors
}
