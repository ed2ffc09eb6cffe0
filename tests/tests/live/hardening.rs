//! Behaviour the server must show after the review's hardening (issue 14, points 1, 4 and 5):
//! the user's command runs as given, a stop writes nothing on the pod object, and a name stays
//! taken while the kubelet keeps retrying its image.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use crate::support::{BUSYBOX, PAUSE, Sandbox, enabled, poll_async, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_command_without_a_target_runs_as_given() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("asgiven");
    let body = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]}});
    sb.create_running("dbg", &body).await;
    let pod = sb.pod().await;
    let ec = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(ec["command"], json!(["sleep", "3600"]), "{ec}");
    assert!(ec["args"].is_null(), "{ec}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_shell_less_command_without_a_target_runs_and_its_stop_is_a_409() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("pid1");
    let created = sb
        .create_running(
            "quiet",
            &json!({"container": {"image": PAUSE, "command": ["/pause"]}}),
        )
        .await;
    let (code, status) = sb.stop("quiet", 1).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    let (_, got) = sb.get("quiet").await;
    assert_eq!(got["status"]["phase"], "Running", "{got}");
    assert_eq!(
        got["status"]["containerID"],
        created["status"]["containerID"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_stop_writes_nothing_on_the_pod_object() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("nowrite");
    sb.create_running("dbg", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    let (code, stopped) = sb.stop("dbg", 1).await;
    assert!(code.is_success(), "{code} {stopped}");
    sb.wait_phase("dbg", "Terminated", Duration::from_secs(60))
        .await;
    let pod = sb.pod().await;
    let annotations = pod["metadata"]["annotations"].clone();
    assert!(
        annotations
            .as_object()
            .is_none_or(|a| !a.keys().any(|k| k.starts_with("poddebug.dev/"))),
        "{annotations}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_name_stays_taken_while_its_image_pull_is_retried() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("pulltaken");
    let body = targeted("busybox:no-such-tag", &["sleep", "3600"]);
    let (code, created) = sb.create("dbg", "", &body).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    poll_async(
        "the image pull fails",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let s = sb.container_status("dbg").await;
            let reason = s["state"]["waiting"]["reason"].as_str().unwrap_or_default();
            if reason == "ErrImagePull" || reason == "ImagePullBackOff" {
                Ok(())
            } else {
                Err(s.to_string())
            }
        },
    )
    .await;
    let (code, status) = sb.create("dbg", "", &body).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    let pod = sb.pod().await;
    assert_eq!(
        pod["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(1),
        "{pod}"
    );
}
