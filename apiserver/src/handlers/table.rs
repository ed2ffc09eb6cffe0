//! The `meta.k8s.io/v1` Table form that `kubectl get` asks for, so debug containers print as
//! columns (name, pod, image, target, state, age, expires) like built-in resources.

use http::HeaderMap;
use jiff::Timestamp;
use poddebug_types::PodDebugContainer;
use serde_json::{Value, json};

/// The query's `includeObject` (`None`, `Metadata` or `Object`), `Metadata` when absent, as
/// kube-apiserver defaults it.
pub fn include_object(q: &std::collections::BTreeMap<String, String>) -> &str {
    q.get("includeObject")
        .map(String::as_str)
        .unwrap_or("Metadata")
}

/// Whether the client asked for a Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).
pub fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.contains(&"as=Table")
                && params.contains(&"g=meta.k8s.io")
                && (params.contains(&"v=v1") || params.contains(&"v=v1beta1"))
        })
}

/// kubectl's short human duration (`45s`, `12m`, `5h`, `3d`, `2y`).
pub fn human_age(since: Option<Timestamp>, now: Timestamp) -> String {
    let Some(since) = since else {
        return "<unknown>".to_owned();
    };
    let secs = (now.as_second() - since.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 60 * 120 => format!("{}m", s / 60),
        s if s < 3600 * 48 => format!("{}h", s / 3600),
        s if s < 86400 * 365 * 2 => format!("{}d", s / 86400),
        s => format!("{}y", s / (86400 * 365)),
    }
}

/// One column definition of a Table.
pub fn column(name: &str, ty: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// The column definitions.
pub fn columns() -> Vec<Value> {
    vec![
        column("Name", "string", "name", "Name of the debug container", 0),
        column("Pod", "string", "", "The pod it runs in", 0),
        column("Image", "string", "", "Container image", 0),
        column(
            "Target",
            "string",
            "",
            "Target container whose namespaces it joins",
            0,
        ),
        column(
            "State",
            "string",
            "",
            "Waiting, Running or Terminated (with reason)",
            0,
        ),
        column("Age", "string", "", "Time since it was created", 0),
        column(
            "Expires",
            "string",
            "",
            "Time left before the server stops it (its ttlSeconds), <none> without a time limit",
            0,
        ),
    ]
}

/// The Expires cell: the time left (`5h`), `expired` once past (until the expiry loop stops it),
/// `-` once terminated, `<none>` without a time limit.
fn expires_cell(p: &PodDebugContainer, now: Timestamp) -> String {
    let Some(st) = &p.status else {
        return "<none>".to_owned();
    };
    let Some(at) = &st.expires_at else {
        return "<none>".to_owned();
    };
    if st.phase == poddebug_types::DebugPhase::Terminated {
        return "-".to_owned();
    }
    if at.0 <= now {
        return "expired".to_owned();
    }
    // The time left reads like an age measured from the other end.
    human_age(Some(now), at.0)
}

fn state_cell(p: &PodDebugContainer) -> String {
    let Some(st) = &p.status else {
        return "Waiting".to_owned();
    };
    let reason = st.state.as_ref().and_then(|s| {
        s.waiting
            .as_ref()
            .and_then(|w| w.reason.clone())
            .or_else(|| {
                s.terminated.as_ref().map(|t| {
                    t.reason
                        .clone()
                        .unwrap_or_else(|| format!("ExitCode:{}", t.exit_code))
                })
            })
    });
    match reason {
        Some(r) if !r.is_empty() => format!("{}: {r}", st.phase.as_str()),
        _ => st.phase.as_str().to_owned(),
    }
}

/// One row; `include_object` is `None`, `Object` or `Metadata` (the default).
pub fn row(p: &PodDebugContainer, include_object: &str, now: Timestamp) -> Value {
    let pod = p
        .status
        .as_ref()
        .map(|s| s.pod_name.clone())
        .unwrap_or_default();
    let cells = json!([
        p.metadata.name.clone().unwrap_or_default(),
        pod,
        p.container.image.clone().unwrap_or_default(),
        p.target_container_name.clone().unwrap_or_default(),
        state_cell(p),
        human_age(p.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
        expires_cell(p, now),
    ]);
    table_row(cells, p, &p.metadata, include_object)
}

/// A Table row: its `cells`, and the object as `includeObject` asks (`None`, `Object`, else
/// kube-apiserver's default `Metadata`: a `PartialObjectMetadata`).
pub fn table_row<T: serde::Serialize>(
    cells: Value,
    object: &T,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    include_object: &str,
) -> Value {
    let object = match include_object {
        "None" => Value::Null,
        "Object" => serde_json::to_value(object).unwrap_or(Value::Null),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": serde_json::to_value(metadata).unwrap_or(Value::Null),
        }),
    };
    let mut r = json!({ "cells": cells });
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

/// The list metadata of a Table: `resourceVersion` when there is one.
pub fn list_meta(resource_version: Option<&str>) -> Value {
    match resource_version {
        Some(rv) => json!({ "resourceVersion": rv }),
        None => json!({}),
    }
}

/// A `meta.k8s.io/v1` Table: `metadata`, the `columns` and the `rows` (a watch's BOOKMARK carries
/// one with metadata alone).
pub fn envelope(metadata: Value, columns: Vec<Value>, rows: Vec<Value>) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// A whole Table.
pub fn table(
    items: &[PodDebugContainer],
    resource_version: Option<&str>,
    include_object: &str,
) -> Value {
    let now = Timestamp::now();
    envelope(
        list_meta(resource_version),
        columns(),
        items.iter().map(|p| row(p, include_object, now)).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_kubectl_accept_header() {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json".parse().unwrap(),
        );
        assert!(wants_table(&h));
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, "application/json".parse().unwrap());
        assert!(!wants_table(&h));
    }

    #[test]
    fn ages_are_human() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let at = |s: i64| Some(Timestamp::from_second(1_000_000 - s).unwrap());
        assert_eq!(human_age(at(5), now), "5s");
        assert_eq!(human_age(at(600), now), "10m");
        assert_eq!(human_age(at(3 * 3600), now), "3h");
        assert_eq!(human_age(at(3 * 86400), now), "3d");
        assert_eq!(human_age(None, now), "<unknown>");
    }

    #[test]
    fn rows_carry_metadata_by_default() {
        let mut p = PodDebugContainer::default();
        p.metadata.name = Some("dbg".into());
        p.container.image = Some("busybox".into());
        let t = table(&[p], Some("42"), "Metadata");
        assert_eq!(t["rows"][0]["cells"][0], "dbg");
        assert_eq!(t["rows"][0]["cells"][2], "busybox");
        assert_eq!(t["rows"][0]["cells"][4], "Waiting");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "42");
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 7);
        assert_eq!(t["rows"][0]["cells"][6], "<none>");
    }

    #[test]
    fn expires_shows_the_time_left() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use poddebug_types::{DebugPhase, PodDebugContainerStatus};
        let now = Timestamp::from_second(1_000_000).unwrap();
        let with = |at: i64, phase| PodDebugContainer {
            status: Some(PodDebugContainerStatus {
                phase,
                expires_at: Some(Time(Timestamp::from_second(at).unwrap())),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cell = |p: PodDebugContainer| row(&p, "None", now)["cells"][6].clone();
        assert_eq!(cell(with(1_000_000 + 2 * 3600, DebugPhase::Running)), "2h");
        assert_eq!(cell(with(1_000_000 + 90, DebugPhase::Waiting)), "90s");
        assert_eq!(cell(with(1_000_000, DebugPhase::Running)), "expired");
        assert_eq!(cell(with(1_000_000 - 5, DebugPhase::Terminated)), "-");
        let none = PodDebugContainer {
            status: Some(PodDebugContainerStatus::default()),
            ..Default::default()
        };
        assert_eq!(cell(none), "<none>");
    }
}
