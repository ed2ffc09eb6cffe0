//! Copies of pods on a real cluster: a CrashLoopBackOff pod debugged through a copy whose
//! command is replaced, the image policy on every image of the copy, the core `create pods`
//! its maker needs, DELETE, and the time limit.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use poddebug_tests::kubectl::{kubectl, kubectl_ok};

use crate::support::{
    ALICE, BUSYBOX, GV, Sandbox, as_user, enabled, impersonating, message, poll_async,
};

const RBAC_SETTLE: Duration = Duration::from_secs(40);

/// Creates pod `crash` in the sandbox: its only container exits 1 at once, so the kubelet
/// restarts it into CrashLoopBackOff. Waits (bounded) until it has failed at least once.
async fn crashing_pod(sb: &Sandbox) {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "crash", "labels": {"app": "crash"}},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "app", "image": BUSYBOX, "command": ["sh", "-c", "exit 1"]}]}
    });
    let (code, body) = sb
        .api
        .post_json(&format!("/api/v1/namespaces/{}/pods", sb.ns), &pod)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    poll_async(
        "pod crash failed at least once",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let (_, p) = sb
                .api
                .get_json(&format!("/api/v1/namespaces/{}/pods/crash", sb.ns))
                .await;
            let cs = &p["status"]["containerStatuses"][0];
            let failed = cs["restartCount"].as_i64().unwrap_or(0) >= 1
                || cs["state"]["terminated"]["exitCode"] == 1
                || cs["lastState"]["terminated"]["exitCode"] == 1;
            if failed {
                Ok(())
            } else {
                Err(p["status"].to_string())
            }
        },
    )
    .await;
}

fn copy_path(sb: &Sandbox, rest: &str) -> String {
    format!("{GV}/namespaces/{}/pods/crash/{rest}", sb.ns)
}

async fn wait_gone(sb: &Sandbox, pod: &str) {
    poll_async(
        &format!("pod {pod} deleted"),
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let (code, p) = sb
                .api
                .get_json(&format!("/api/v1/namespaces/{}/pods/{pod}", sb.ns))
                .await;
            if code == StatusCode::NOT_FOUND {
                Ok(())
            } else {
                Err(format!("{code} {}", p["metadata"]))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_crashing_pod_is_debugged_through_a_copy_that_sleeps_instead() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("copy");
    crashing_pod(&sb).await;
    let body = json!({
        "metadata": {"name": "crash-copy"},
        "replace": {"app": {"command": ["sleep", "3600"]}},
        "container": {"image": BUSYBOX, "command": ["sleep", "3600"]}
    });
    let (code, created) = sb.api.post_json(&copy_path(&sb, "copy"), &body).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "PodDebugCopy");
    assert_eq!(created["status"]["sourcePod"], "crash");
    assert_eq!(created["status"]["debugContainerName"], "debugger");

    // The copy runs: its app container sleeps instead of exiting.
    let running = poll_async(
        "the copy runs",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let (code, c) = sb.api.get_json(&copy_path(&sb, "copies/crash-copy")).await;
            let app_running = c["status"]["containerStatuses"]
                .as_array()
                .and_then(|a| a.iter().find(|s| s["name"] == "app"))
                .is_some_and(|s| !s["state"]["running"].is_null());
            if code == StatusCode::OK && c["status"]["phase"] == "Running" && app_running {
                Ok(c)
            } else {
                Err(format!("{code} {c}"))
            }
        },
    )
    .await;
    assert_eq!(running["metadata"]["name"], "crash-copy");

    // The copy is a pod of its own that no Service or controller of the original selects.
    let (_, pod) = sb
        .api
        .get_json(&format!("/api/v1/namespaces/{}/pods/crash-copy", sb.ns))
        .await;
    assert_eq!(pod["metadata"]["labels"]["poddebug.dev/copy-of"], "crash");
    assert!(
        pod["metadata"]["labels"]["app"].is_null(),
        "{}",
        pod["metadata"]
    );
    assert_eq!(
        pod["spec"]["containers"][0]["command"],
        json!(["sleep", "3600"])
    );
    assert_eq!(pod["spec"]["shareProcessNamespace"], true);

    let (code, list) = sb.api.get_json(&copy_path(&sb, "copies")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, vec!["crash-copy"]);

    // kubectl knows copies as a resource of their own: listed, read by name, in every
    // namespace, and by whoever holds poddebug:debugger; the name the plugin prints (pod/NAME)
    // is the pod's.
    let ns = sb.ns.as_str();
    let table = kubectl_ok(&["get", "poddebugcopies", "-n", ns], None);
    let first = table.lines().next().unwrap_or_default();
    assert!(
        first.contains("COPY OF") && first.contains("PHASE"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("crash-copy ") && l.contains(" crash ")),
        "{table}"
    );
    let source = kubectl_ok(
        &[
            "get",
            "poddebugcopy",
            "crash-copy",
            "-n",
            ns,
            "-o",
            "jsonpath={.kind}/{.status.sourcePod}",
        ],
        None,
    );
    assert_eq!(source, "PodDebugCopy/crash");
    let all = kubectl_ok(&["get", "poddebugcopies", "-A", "-o", "name"], None);
    assert!(
        all.lines()
            .any(|l| l == "poddebugcopy.poddebug.dev/crash-copy"),
        "{all}"
    );
    let printed = kubectl_ok(&["get", "pod/crash-copy", "-n", ns, "-o", "name"], None);
    assert_eq!(printed.trim(), "pod/crash-copy");
    let missing = kubectl(&["get", "poddebugcopy", "crash", "-n", ns], None);
    assert!(
        !missing.status.success()
            && String::from_utf8_lossy(&missing.stderr)
                .contains("poddebugcopies.poddebug.dev \"crash\" not found"),
        "{missing:?}"
    );
    sb.bind("poddebug:debugger", ALICE);
    if impersonating() {
        // Under --impersonate the pods are read as alice: her own pod rights count.
        sb.bind("poddebug:debugger-core", ALICE);
    }
    poll_async(
        "alice lists copies with poddebug:debugger",
        RBAC_SETTLE,
        Duration::from_millis(500),
        || async {
            let out = kubectl(
                &[
                    "get",
                    "poddebugcopies",
                    "-n",
                    ns,
                    "-o",
                    "name",
                    &format!("--as={ALICE}"),
                ],
                None,
            );
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && text.contains("poddebugcopy.poddebug.dev/crash-copy") {
                Ok(())
            } else {
                Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    )
    .await;

    // A name that is no copy of this pod is a 404, even when the pod exists.
    let (code, status) = sb.api.get_json(&copy_path(&sb, "copies/crash")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");

    let (code, deleted) = sb.api.delete(&copy_path(&sb, "copies/crash-copy")).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    wait_gone(&sb, "crash-copy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn every_image_of_a_copy_passes_the_image_policy() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("copyimg");
    let web = format!("{GV}/namespaces/{}/pods/web/copy", sb.ns);
    for body in [
        json!({"setImage": {"app": "nginx:1.27"}}),
        json!({"setImage": {"*": "nginx:1.27"}}),
        json!({"container": {"image": "nginx:1.27"}}),
    ] {
        let (code, status) = sb.api.post_json(&web, &body).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{body}: {status}");
        assert!(message(&status).contains("--allowed-images"), "{status}");
    }
    // Nothing was made.
    let (_, pods) = sb
        .api
        .get_json(&format!(
            "/api/v1/namespaces/{}/pods?labelSelector=poddebug.dev/kind%3Dcopy",
            sb.ns
        ))
        .await;
    assert_eq!(pods["items"], json!([]), "{pods}");
    // A container name that is not the pod's is a 422 on its field.
    let (code, status) = sb
        .api
        .post_json(&web, &json!({"setImage": {"nope": BUSYBOX}}))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "setImage[nope]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_copy_needs_the_callers_own_create_pods() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("copyrbac");
    let alice = as_user(&sb.api, ALICE);
    let web = format!("{GV}/namespaces/{}/pods/web/copy", sb.ns);
    let body = json!({"metadata": {"name": "web-copy"}, "container": {"image": BUSYBOX}});

    // create pods/copy (the debugger role) without the core create pods: 403.
    sb.bind("poddebug:debugger", ALICE);
    let refusal: Value = poll_async(
        "alice's copy is refused for want of create pods",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match alice.post_json(&web, &body).await {
                (StatusCode::FORBIDDEN, s)
                    if message(&s).contains("pods") && !message(&s).contains("pods/copy") =>
                {
                    Ok(s)
                }
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    if !impersonating() {
        assert!(
            message(&refusal).contains("create on pods in its namespace"),
            "{refusal}"
        );
    }
    let (code, _) = sb
        .api
        .get_json(&format!("/api/v1/namespaces/{}/pods/web-copy", sb.ns))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "nothing was created");

    // With the core right (the built-in edit role), the same request makes the copy.
    sb.bind("edit", ALICE);
    let created = poll_async(
        "alice may copy with create pods",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match alice.post_json(&web, &body).await {
                (StatusCode::CREATED, obj) => Ok(obj),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    assert_eq!(created["status"]["createdBy"], ALICE);

    // The copy's containers are regular ones: poddebug's pods/log alone (the debugger role)
    // does not reach them, the core pods/log does.
    let carol = as_user(&sb.api, "carol");
    sb.bind("poddebug:debugger", "carol");
    let log = format!(
        "{GV}/namespaces/{}/pods/web-copy/log?container=debugger",
        sb.ns
    );
    let refusal = poll_async(
        "carol's read of a copy's container is refused for want of the core pods/log",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match carol.get_json(&log).await {
                (StatusCode::FORBIDDEN, s) if !message(&s).contains("poddebug.dev") => Ok(s),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    if !impersonating() {
        assert!(message(&refusal).contains("pods/log"), "{refusal}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_copy_is_deleted_at_its_time_limit() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("copyttl");
    let web = format!("{GV}/namespaces/{}/pods/web/copy", sb.ns);
    let (code, created) = sb
        .api
        .post_json(
            &web,
            &json!({"metadata": {"name": "short"}, "ttlSeconds": 5}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert!(created["status"]["expiresAt"].is_string(), "{created}");
    wait_gone(&sb, "short").await;
}
