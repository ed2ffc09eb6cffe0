//! Registration, discovery, OpenAPI and what kubectl makes of them.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::Value;

use crate::support::{APISERVICE, GV, cluster, enabled, kubectl, ok, ok_json, poll};

#[test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
fn the_api_service_is_available_and_verifies_the_server_certificate() {
    if !enabled() {
        return;
    }
    let api = ok_json(&["get", "apiservice", APISERVICE, "-o", "json"]);
    let available = api["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(available["status"], "True", "{api}");
    // Issue 14.3: the aggregator checks the serving certificate against the caBundle.
    assert!(
        api["spec"]["caBundle"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "no caBundle: {api}"
    );
    assert_ne!(api["spec"]["insecureSkipTLSVerify"], true, "{api}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn discovery_lists_the_group_in_legacy_and_aggregated_form() {
    if !enabled() {
        return;
    }
    let api = cluster();
    let (code, groups) = api.get_json("/apis").await;
    assert_eq!(code, StatusCode::OK);
    let group = groups["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "poddebug.dev"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        group["preferredVersion"]["groupVersion"], "poddebug.dev/v1alpha1",
        "{groups}"
    );

    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let (code, _, body) = api
        .request(Method::GET, "/apis", &[("accept", accept)], "")
        .await
        .expect("aggregated discovery");
    assert_eq!(code, StatusCode::OK);
    let agg: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(agg["kind"], "APIGroupDiscoveryList", "{agg}");
    let item = agg["items"]
        .as_array()
        .and_then(|i| i.iter().find(|i| i["metadata"]["name"] == "poddebug.dev"))
        .cloned()
        .unwrap_or(Value::Null);
    let resources: Vec<&str> = item["versions"][0]["resources"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["resource"].as_str()).collect())
        .unwrap_or_default();
    for r in ["poddebugcontainers", "debugprofiles"] {
        assert!(resources.contains(&r), "{r} missing from {item}");
    }

    let (code, list) = api.get_json(GV).await;
    assert_eq!(code, StatusCode::OK);
    let names: Vec<&str> = list["resources"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default();
    for r in [
        "pods/debug",
        "pods/attach",
        "pods/log",
        "poddebugcontainers",
        "debugprofiles",
    ] {
        assert!(names.contains(&r), "{r} missing from {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn openapi_v2_and_v3_describe_the_types() {
    if !enabled() {
        return;
    }
    let api = cluster();
    let (code, v3) = api.get_json("/openapi/v3").await;
    assert_eq!(code, StatusCode::OK);
    let url = v3["paths"]["apis/poddebug.dev/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("the group is not in /openapi/v3: {v3}"))
        .to_owned();
    let (code, doc) = api.get_json(&url).await;
    assert_eq!(code, StatusCode::OK);
    let schema = &doc["components"]["schemas"]["dev.poddebug.v1alpha1.PodDebugContainer"];
    assert!(schema["properties"]["status"].is_object(), "{schema}");

    let (code, v2) = api.get_json("/openapi/v2").await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        v2["definitions"]["dev.poddebug.v1alpha1.PodDebugContainer"].is_object(),
        "the type is not in the aggregated /openapi/v2"
    );
}

#[test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
fn kubectl_api_resources_explain_and_profiles() {
    if !enabled() {
        return;
    }
    // The aggregator merges OpenAPI some seconds after the APIService turns Available.
    let explain = poll(
        "kubectl explain sees the aggregated OpenAPI",
        Duration::from_secs(90),
        Duration::from_secs(1),
        || {
            let out = kubectl(&["explain", "poddebugcontainers.status.phase"], None);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && text.contains("Running") {
                Ok(text)
            } else {
                Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    );
    // The phase's enum values come from poddebug's OpenAPI document, not from kubectl.
    for value in ["Waiting", "Running", "Terminated"] {
        assert!(explain.contains(value), "{explain}");
    }
    let resources = ok(&["api-resources", "--api-group=poddebug.dev"], None);
    let pdc = resources
        .lines()
        .find(|l| l.starts_with("poddebugcontainers"))
        .unwrap_or_else(|| panic!("{resources}"));
    assert!(
        pdc.contains(" pdc ") && pdc.contains("PodDebugContainer") && pdc.contains("true"),
        "short name, kind, namespaced: {pdc}"
    );
    assert!(resources.contains("debugprofiles"), "{resources}");
    let profiles = ok(&["get", "debugprofiles"], None);
    for p in [
        "legacy",
        "general",
        "baseline",
        "restricted",
        "netadmin",
        "sysadmin",
    ] {
        assert!(profiles.contains(p), "{profiles}");
    }
}
