//! The cluster decides validation (the answers of kube-apiserver v1.36.2 with its default
//! gates): the whole resources block is reported on the debug container's fields, a lifecycle
//! holding only `stopSignal` is accepted, `?dryRun=All` answers the would-be object and adds
//! nothing, and a validation error comes before a policy refusal.

use http::StatusCode;
use serde_json::{Value, json};

use crate::support::{BUSYBOX, Sandbox, enabled, message};

/// Names of the pod's ephemeral containers.
async fn ec_names(sb: &Sandbox) -> Vec<String> {
    let pod = sb.pod().await;
    pod["spec"]["ephemeralContainers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn validation_answers_are_the_clusters() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("validation");

    // Requests above limits: kube-apiserver's own cause comes with the Forbidden one.
    let bad = json!({"container": {"image": BUSYBOX,
        "resources": {"limits": {"cpu": "100m"}, "requests": {"cpu": "200m"}}}});
    let (code, status) = sb.create("res", "", &bad).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    let msg = message(&status);
    assert!(
        msg.contains(
            "container.resources.requests: Invalid value: \"200m\": must be less than or equal to cpu limit of 100m"
        ),
        "{status}"
    );
    assert!(
        msg.contains("container.resources: Forbidden: cannot be set for an Ephemeral Container"),
        "{status}"
    );

    // A dry run: 201 with the would-be object, nothing added.
    let body = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
        "targetContainerName": "app"});
    let (code, created) = sb.create("dry", "?dryRun=All", &body).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["name"], "dry");
    assert!(ec_names(&sb).await.is_empty());

    // ContainerStopSignals is off on 1.36: the field and the lifecycle it leaves are dropped.
    let sig = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"],
        "lifecycle": {"stopSignal": "SIGUSR1"}}, "targetContainerName": "app"});
    let (code, created) = sb.create("sig", "", &sig).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(ec_names(&sb).await, vec!["sig".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn an_invalid_body_with_a_refused_image_is_a_422_not_a_403() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("order");
    // The image is outside the allowed patterns CI runs with, and ports are forbidden: the
    // cluster's validation answer comes first.
    let bad: Value = json!({"container": {"image": "quay.io/not/allowed:1",
        "ports": [{"containerPort": 80}]}});
    let (code, status) = sb.create("both", "", &bad).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    // Valid but refused by policy: 403.
    let refused = json!({"container": {"image": "quay.io/not/allowed:1"}});
    let (code, status) = sb.create("img", "", &refused).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(ec_names(&sb).await.is_empty());
}
