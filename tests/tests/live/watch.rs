//! Watching debug containers through the aggregator.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::Value;

use crate::support::{BUSYBOX, GV, Sandbox, enabled, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_watch_reports_a_debug_container_that_starts() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("watch");
    let path = format!(
        "{GV}/namespaces/{}/poddebugcontainers?watch=true&timeoutSeconds=90",
        sb.ns
    );
    let mut watch = sb
        .api
        .stream(Method::GET, &path, &[("accept", "application/json")], "")
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);
    let (code, created) = sb
        .create("dbg", "", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(!left.is_zero(), "no Running event; events: {seen:?}");
        let Some(event) = watch.next_json(left).await else {
            panic!("the watch ended without a Running event; events: {seen:?}");
        };
        let obj = &event["object"];
        if obj["metadata"]["name"] == "web.dbg" && obj["status"]["phase"] == "Running" {
            assert!(
                event["type"] == "ADDED" || event["type"] == "MODIFIED",
                "{event}"
            );
            assert!(obj["metadata"]["resourceVersion"].is_string(), "{event}");
            break;
        }
        seen.push(event);
    }
    // Every event is about this namespace's debug container.
    assert!(
        seen.iter()
            .all(|e: &Value| e["object"]["metadata"]["namespace"] == sb.ns.as_str()),
        "{seen:?}"
    );
}
