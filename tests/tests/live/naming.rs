//! Debug container names: taken while running, one winner in a race, reusable once stopped.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use crate::support::{BUSYBOX, Sandbox, enabled, message, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_running_name_is_taken() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("taken");
    let body = targeted(BUSYBOX, &["sleep", "3600"]);
    sb.create_running("dbg", &body).await;
    let (code, status) = sb.create("dbg", "", &body).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(status["reason"], "AlreadyExists", "{status}");
    assert_eq!(status["details"]["name"], "dbg", "{status}");
    assert!(message(&status).contains("dbg"), "{status}");
    let pod = sb.pod().await;
    assert_eq!(
        pod["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(1),
        "{pod}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn eight_concurrent_creates_of_one_name_have_one_winner() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("race");
    let body = targeted(BUSYBOX, &["sleep", "3600"]);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (api, path, body) = (sb.api.clone(), sb.path("debug/dbg"), body.clone());
            tokio::spawn(async move { api.post_json(&path, &body).await })
        })
        .collect();
    let mut codes = Vec::new();
    for t in tasks {
        let (code, body) = t.await.expect("create task");
        assert!(
            code == StatusCode::CREATED || code == StatusCode::CONFLICT,
            "{code} {body}"
        );
        codes.push(code);
    }
    assert_eq!(
        codes.iter().filter(|c| **c == StatusCode::CREATED).count(),
        1,
        "{codes:?}"
    );
    let pod = sb.pod().await;
    let ecs = pod["spec"]["ephemeralContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(ecs.len(), 1, "{ecs:?}");
    assert_eq!(ecs[0]["name"], "dbg");
}

/// Creates racing the pod's other writers: direct patches that add ephemeral containers (as
/// `kubectl debug` sends them) and the kubelet's status writes as each one starts. poddebug's
/// update does not carry the resourceVersion; whatever the interleaving, each create lands
/// once, every container added directly is kept, and each of poddebug's carries its own
/// create identifier.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn creates_racing_direct_patches_all_land_and_keep_the_others() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("racing");
    let body = targeted(BUSYBOX, &["sleep", "3600"]);
    let direct = format!("/api/v1/namespaces/{}/pods/web/ephemeralcontainers", sb.ns);
    let mut tasks = Vec::new();
    for i in 0..5 {
        let (api, path, body) = (
            sb.api.clone(),
            sb.path(&format!("debug/dbg-{i}")),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            ("poddebug", api.post_json(&path, &body).await)
        }));
        let (api, path) = (sb.api.clone(), direct.clone());
        let patch = json!({"spec": {"ephemeralContainers": [{"name": format!("direct-{i}"),
            "image": BUSYBOX, "command": ["sleep", "3600"], "targetContainerName": "app"}]}});
        tasks.push(tokio::spawn(async move {
            (
                "direct",
                api.patch_json(&path, "application/strategic-merge-patch+json", &patch)
                    .await,
            )
        }));
    }
    for t in tasks {
        let (who, (code, answer)) = t.await.expect("task");
        assert!(code.is_success(), "{who}: {code} {answer}");
    }
    let pod = sb.pod().await;
    let ecs = pod["spec"]["ephemeralContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<&str> = ecs.iter().filter_map(|e| e["name"].as_str()).collect();
    names.sort_unstable();
    let mut want: Vec<String> = (0..5)
        .flat_map(|i| [format!("dbg-{i}"), format!("direct-{i}")])
        .collect();
    want.sort_unstable();
    assert_eq!(names, want, "{pod}");
    let ids: std::collections::BTreeSet<&str> = ecs
        .iter()
        .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("dbg-")))
        .filter_map(|e| {
            e["env"].as_array()?.iter().find_map(|v| {
                (v["name"] == "PODDEBUG_CREATE_ID")
                    .then(|| v["value"].as_str())
                    .flatten()
            })
        })
        .collect();
    assert_eq!(ids.len(), 5, "a distinct create id on each: {pod}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_stopped_name_can_be_reused() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("reuse");
    let body = targeted(BUSYBOX, &["sleep", "3600"]);
    sb.create_running("dbg", &body).await;
    let (code, stopped) = sb.stop("dbg", 1).await;
    assert!(code.is_success(), "{code} {stopped}");
    sb.wait_phase("dbg", "Terminated", Duration::from_secs(60))
        .await;
    let again = sb.create_running("dbg", &body).await;
    assert_eq!(again["metadata"]["name"], "dbg");
    let fresh = again["status"]["ephemeralContainerName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!fresh.is_empty() && fresh != "dbg", "{again}");
    // GET follows the newest container of the name.
    let (code, got) = sb.get("dbg").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["ephemeralContainerName"], fresh.as_str());
    assert_eq!(got["status"]["phase"], "Running");
    let pod = sb.pod().await;
    let env = pod["spec"]["ephemeralContainers"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == fresh.as_str()))
        .map(|c| c["env"].clone())
        .unwrap_or_default();
    assert!(
        env.as_array().is_some_and(|e| e
            .iter()
            .any(|v| v["name"] == "PODDEBUG_NAME" && v["value"] == "dbg")),
        "{env}"
    );
}
