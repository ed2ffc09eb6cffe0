//! Debug container names: taken while running, one winner in a race, reusable once stopped.

use std::time::Duration;

use http::StatusCode;

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
