//! The Events poddebug records on the pod.

use std::time::Duration;

use crate::support::{BUSYBOX, Sandbox, enabled, ok_json, poll, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn create_and_stop_are_recorded_as_events_on_the_pod() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("events");
    sb.create_running("dbg", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    let (code, stopped) = sb.stop("dbg", 1).await;
    assert!(code.is_success(), "{code} {stopped}");
    let events = poll(
        "DebugContainerCreated and DebugContainerStopped on pod web",
        Duration::from_secs(30),
        Duration::from_secs(1),
        || {
            let list = ok_json(&[
                "get",
                "events",
                "-n",
                &sb.ns,
                "--field-selector=involvedObject.name=web,involvedObject.kind=Pod",
                "-o",
                "json",
            ]);
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let has = |r: &str| items.iter().any(|e| e["reason"] == r);
            if has("DebugContainerCreated") && has("DebugContainerStopped") {
                Ok(items)
            } else {
                Err(list.to_string())
            }
        },
    );
    for e in events.iter().filter(|e| {
        e["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("DebugContainer"))
    }) {
        assert_eq!(e["type"], "Normal", "{e}");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains("dbg")),
            "the message names the debug container: {e}"
        );
        assert_eq!(e["involvedObject"]["namespace"], sb.ns.as_str());
    }
}
