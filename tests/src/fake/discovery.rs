//! Legacy discovery (`/api`, `/api/v1`, `/apis`, `/apis/G/V`) and `/version`, enough for kubectl's
//! REST mapper and for kube-rs. Aggregated discovery is not served: clients asking for it get the
//! legacy documents with `Content-Type: application/json` and fall back, as they do with old servers.

use serde_json::{Value, json};

use super::http::{Resp, json_response};
use super::router::Ctx;
use super::status::{self, KubeStatus};

/// `GET /version`, reporting version `1.<minor>`.
pub fn version(minor: u32) -> Resp {
    json_response(
        200,
        &json!({
            "major": "1",
            "minor": minor.to_string(),
            "emulationMajor": "1",
            "emulationMinor": minor.to_string(),
            "gitVersion": format!("v1.{minor}.2-fake"),
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.25.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

/// `GET /api`.
pub fn api_versions(ctx: &Ctx) -> Resp {
    let host = ctx
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    json_response(
        200,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
        }),
    )
}

fn resource(
    name: &str,
    singular: &str,
    namespaced: bool,
    kind: &str,
    verbs: &[&str],
    short: &[&str],
) -> Value {
    let mut r = json!({
        "name": name,
        "singularName": singular,
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    });
    if !short.is_empty() {
        r["shortNames"] = json!(short);
    }
    r
}

/// `GET /api/v1`.
pub fn core_resources() -> Resp {
    json_response(
        200,
        &json!({
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [
                resource("configmaps", "configmap", true, "ConfigMap", &["get", "list", "watch"], &["cm"]),
                resource("events", "event", true, "Event", &["create", "get", "list", "patch", "update"], &["ev"]),
                resource("namespaces", "namespace", false, "Namespace", &["get", "list", "watch"], &["ns"]),
                resource("nodes", "node", false, "Node", &["get", "list", "watch"], &["no"]),
                resource("pods", "pod", true, "Pod", &["create", "delete", "get", "list", "patch", "update", "watch"], &["po"]),
                resource("pods/attach", "", true, "PodAttachOptions", &["create", "get"], &[]),
                resource("pods/ephemeralcontainers", "", true, "Pod", &["get", "patch", "update"], &[]),
                resource("pods/exec", "", true, "PodExecOptions", &["create", "get"], &[]),
                resource("pods/log", "", true, "Pod", &["get"], &[]),
                resource("services", "service", true, "Service", &["get", "list", "watch"], &["svc"]),
            ],
        }),
    )
}

const GROUPS: [(&str, &str); 4] = [
    ("authentication.k8s.io", "v1"),
    ("authorization.k8s.io", "v1"),
    ("discovery.k8s.io", "v1"),
    ("events.k8s.io", "v1"),
];

fn group_json(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `GET /apis`.
pub fn api_groups() -> Resp {
    let groups: Vec<Value> = GROUPS.iter().map(|(g, v)| group_json(g, v)).collect();
    json_response(
        200,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `GET /apis/G`.
pub fn api_group(group: &str) -> Result<Resp, KubeStatus> {
    let (g, v) = GROUPS
        .iter()
        .find(|(g, _)| *g == group)
        .ok_or_else(status::path_not_found)?;
    let mut doc = group_json(g, v);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Ok(json_response(200, &doc))
}

/// `GET /apis/G/V`.
pub fn group_resources(group: &str, version: &str) -> Result<Resp, KubeStatus> {
    let resources = match (group, version) {
        ("authentication.k8s.io", "v1") => {
            vec![resource(
                "tokenreviews",
                "tokenreview",
                false,
                "TokenReview",
                &["create"],
                &[],
            )]
        }
        ("authorization.k8s.io", "v1") => {
            vec![resource(
                "subjectaccessreviews",
                "subjectaccessreview",
                false,
                "SubjectAccessReview",
                &["create"],
                &[],
            )]
        }
        ("discovery.k8s.io", "v1") => vec![resource(
            "endpointslices",
            "endpointslice",
            true,
            "EndpointSlice",
            &["get", "list", "watch"],
            &[],
        )],
        ("events.k8s.io", "v1") => vec![resource(
            "events",
            "event",
            true,
            "Event",
            &["create", "get", "list", "patch", "update"],
            &["ev"],
        )],
        _ => return Err(status::path_not_found()),
    };
    Ok(json_response(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources}),
    ))
}
