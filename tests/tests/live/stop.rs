//! Stopping debug containers on a real kubelet: only the debug container's processes end.

use std::time::Duration;

use http::StatusCode;

use crate::support::{BUSYBOX, PAUSE, Sandbox, enabled, message, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn stop_in_the_target_pid_namespace_leaves_the_app_untouched() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("stop");
    let before = sb.container_status("app").await;
    let app_id = before["containerID"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!app_id.is_empty(), "{before}");
    sb.create_running("dbg", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    let (code, stopped) = sb.stop("dbg", 2).await;
    assert!(
        code == StatusCode::OK || code == StatusCode::ACCEPTED,
        "{code} {stopped}"
    );
    let done = sb
        .wait_phase("dbg", "Terminated", Duration::from_secs(60))
        .await;
    assert!(
        done["status"]["state"]["terminated"]["exitCode"].is_number(),
        "{done}"
    );
    let after = sb.container_status("app").await;
    assert_eq!(
        after["containerID"],
        app_id.as_str(),
        "the app was replaced: {after}"
    );
    assert_eq!(after["restartCount"], 0, "{after}");
    assert!(after["state"]["running"].is_object(), "{after}");
    let pod = sb.pod().await;
    assert_eq!(pod["status"]["phase"], "Running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn stop_of_a_shell_less_debug_container_is_a_clear_409() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("noshell");
    let body = serde_json::json!({"container": {"image": PAUSE}, "targetContainerName": "app"});
    let created = sb.create_running("quiet", &body).await;
    let (code, status) = sb.stop("quiet", 1).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert!(
        message(&status).contains("sh"),
        "the message names the missing shell: {status}"
    );
    // Nothing changed: the debug container and the app run on.
    let (code, got) = sb.get("quiet").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["phase"], "Running", "{got}");
    assert_eq!(
        got["status"]["containerID"],
        created["status"]["containerID"]
    );
    let app = sb.container_status("app").await;
    assert_eq!(app["restartCount"], 0, "{app}");
    assert!(app["state"]["running"].is_object(), "{app}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn stop_of_an_unknown_name_or_pod_is_404() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("stop404");
    let (code, status) = sb.stop("ghost", 1).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(status["reason"], "NotFound");
    let (code, status) = sb
        .api
        .delete(&format!(
            "/apis/poddebug.dev/v1alpha1/namespaces/{}/pods/nope/debug/x",
            sb.ns
        ))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(message(&status), "pods \"nope\" not found");
}
