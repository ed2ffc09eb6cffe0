//! Create, read, list and stop with raw requests, kube-apiserver's own validation, and the
//! Table kubectl prints.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use crate::support::{BUSYBOX, Sandbox, enabled, message, ok, poll, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn raw_create_get_list_and_delete() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("crud");
    let body = json!({
        "apiVersion": "poddebug.dev/v1alpha1", "kind": "PodDebugContainer",
        "container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
        "targetContainerName": "app", "profile": "general"
    });
    let created = sb.create_running("dbg", &body).await;
    assert_eq!(created["kind"], "PodDebugContainer");
    assert_eq!(created["metadata"]["name"], "dbg");
    assert_eq!(created["metadata"]["namespace"], sb.ns.as_str());
    assert_eq!(created["status"]["podName"], "web");
    assert_eq!(created["status"]["ephemeralContainerName"], "dbg");
    assert!(
        created["status"]["state"]["running"]["startedAt"].is_string(),
        "{created}"
    );
    // The profile reached the pod: general adds SYS_PTRACE.
    let pod = sb.pod().await;
    let ec = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(ec["name"], "dbg");
    assert_eq!(ec["targetContainerName"], "app");
    assert_eq!(
        ec["securityContext"]["capabilities"]["add"][0], "SYS_PTRACE",
        "{ec}"
    );

    let (code, got) = sb.get("dbg").await;
    assert_eq!(code, StatusCode::OK, "{got}");
    assert_eq!(
        got["status"]["containerID"],
        created["status"]["containerID"]
    );

    let (code, list) = sb.api.get_json(&sb.path("debug")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "PodDebugContainerList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "dbg");

    let (code, stopped) = sb.stop("dbg", 2).await;
    assert!(
        code == StatusCode::OK || code == StatusCode::ACCEPTED,
        "{code} {stopped}"
    );
    assert_eq!(stopped["kind"], "PodDebugContainer", "{stopped}");
    let done = sb
        .wait_phase("dbg", "Terminated", Duration::from_secs(60))
        .await;
    assert!(done["status"]["state"]["terminated"].is_object(), "{done}");
    // Stopping a terminated container changes nothing and answers its object.
    let (code, again) = sb.stop("dbg", 2).await;
    assert_eq!(code, StatusCode::OK, "{again}");
    assert_eq!(again["status"]["phase"], "Terminated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn kube_apiserver_validation_and_strict_decoding_reach_the_caller() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("valid");
    // kube-apiserver's own rule for ephemeral containers, with its field path.
    let bad = json!({"container": {"image": BUSYBOX, "ports": [{"containerPort": 80}]}});
    let (code, status) = sb.create("bad", "", &bad).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["details"]["causes"][0]["field"], "container.ports",
        "{status}"
    );
    assert!(
        message(&status).contains(
            "PodDebugContainer.poddebug.dev \"bad\" is invalid: container.ports: Forbidden: cannot be set for an Ephemeral Container"
        ),
        "{status}"
    );
    // Strict decoding of poddebug's own fields.
    let (code, status) = sb
        .create(
            "bad",
            "",
            &json!({"container": {"image": BUSYBOX}, "targetContainer": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert!(message(&status).contains("targetContainer"), "{status}");
    // A target that does not exist, and a pod that does not exist.
    let no_target = json!({"container": {"image": BUSYBOX}, "targetContainerName": "nope"});
    let (code, status) = sb.create("bad", "", &no_target).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    let (code, status) = sb
        .api
        .post_json(
            &format!(
                "/apis/poddebug.dev/v1alpha1/namespaces/{}/pods/nope/debug/x",
                sb.ns
            ),
            &json!({}),
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(message(&status), "pods \"nope\" not found");
    // Nothing was added to the pod by any of these.
    let pod = sb.pod().await;
    assert!(pod["spec"]["ephemeralContainers"].is_null(), "{pod}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn kubectl_get_pdc_prints_a_table_across_namespaces() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("table");
    sb.create_running("dbg", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    let table = poll(
        "the debug container in kubectl get pdc -A",
        Duration::from_secs(30),
        Duration::from_secs(1),
        || {
            let t = ok(&["get", "pdc", "-A"], None);
            if t.lines()
                .any(|l| l.starts_with(&sb.ns) && l.contains("web.dbg"))
            {
                Ok(t)
            } else {
                Err(t)
            }
        },
    );
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("NAMESPACE") && header.contains("NAME"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with(&sb.ns))
        .unwrap_or_default();
    assert!(row.contains(BUSYBOX) && row.contains("Running"), "{table}");
    // One object by its name POD.NAME, in the namespace.
    let one = ok(
        &[
            "get",
            "pdc",
            "-n",
            &sb.ns,
            "web.dbg",
            "-o",
            "jsonpath={.status.phase}",
        ],
        None,
    );
    assert_eq!(one, "Running");
}
