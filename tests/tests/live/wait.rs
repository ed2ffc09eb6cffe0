//! `?wait=true&timeoutSeconds=N`: the answer waits for the kubelet.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use crate::support::{BUSYBOX, Sandbox, enabled, kubectl, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn wait_times_out_with_the_waiting_reason_of_an_unpullable_image() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("pull");
    // The kubelet reports a failed pull at its next pod sync (about 15s here): wait longer than
    // that, through kubectl, whose deadline is its own (--request-timeout).
    let out = kubectl(
        &[
            "create",
            "--raw",
            &sb.path("debug/dbg?wait=true&timeoutSeconds=45"),
            "--request-timeout=70s",
            "-f",
            "-",
        ],
        Some(&targeted("busybox:no-such-tag", &["sleep", "1"]).to_string()),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("(Timeout)"), "{err}");
    assert!(
        err.contains("ErrImagePull") || err.contains("ImagePullBackOff"),
        "the waiting reason is in the message: {err}"
    );
    // The container was added nonetheless, and says why it waits.
    let (code, got) = sb.get("dbg").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["phase"], "Waiting", "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn wait_answers_a_container_that_already_ended_with_its_exit_code() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("exit");
    let (code, created) = sb
        .create(
            "dbg",
            "?wait=true&timeoutSeconds=20",
            &targeted(BUSYBOX, &["sh", "-c", "exit 3"]),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert!(
        created["status"]["phase"] == "Running" || created["status"]["phase"] == "Terminated",
        "{created}"
    );
    let done = sb
        .wait_phase("dbg", "Terminated", Duration::from_secs(30))
        .await;
    assert_eq!(
        done["status"]["state"]["terminated"]["exitCode"], 3,
        "{done}"
    );
    // A name whose container ended is free again.
    let (code, again) = sb
        .create("dbg", "?wait=true&timeoutSeconds=20", &json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]}, "targetContainerName": "app"}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{again}");
}
