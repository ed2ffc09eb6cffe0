//! Time limits on a real cluster: a short `ttlSeconds` expires, the leader's expiry loop stops
//! the debug container as DELETE would and records `DebugContainerExpired`; a negative
//! `ttlSeconds` is a 422 on that field.

use super::support::*;

use std::time::Duration;

use http::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_short_ttl_expires_and_the_debug_container_is_stopped() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("ttl");
    let mut body = targeted(BUSYBOX, &["sleep", "3600"]);
    body["ttlSeconds"] = serde_json::json!(5);
    let obj = sb.create_running("dbg", &body).await;
    assert!(obj["status"]["expiresAt"].is_string(), "{obj}");

    // The leader checks every 10s (default) and may first have to win the Lease (15s).
    let done = sb
        .wait_phase("dbg", "Terminated", Duration::from_secs(90))
        .await;
    assert_eq!(
        done["status"]["stopRequested"]["requestedBy"], "system:poddebug:expiry",
        "{done}"
    );
    let app = sb.container_status("app").await;
    assert!(
        app["state"]["running"].is_object(),
        "the target runs on: {app}"
    );

    let event = poll(
        "DebugContainerExpired on pod web",
        Duration::from_secs(30),
        Duration::from_secs(1),
        || {
            let list = ok_json(&[
                "get",
                "events",
                "-n",
                &sb.ns,
                "--field-selector=involvedObject.name=web,reason=DebugContainerExpired",
                "-o",
                "json",
            ]);
            list["items"]
                .as_array()
                .and_then(|a| a.first().cloned())
                .ok_or_else(|| list.to_string())
        },
    );
    assert_eq!(event["type"], "Normal", "{event}");
    assert!(
        event["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"dbg\"")),
        "{event}"
    );

    // One replica holds the leader Lease.
    let lease = ok_json(&[
        "get",
        "lease",
        "-n",
        "poddebug-system",
        "poddebug-apiserver",
        "-o",
        "json",
    ]);
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{lease}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_negative_ttl_is_invalid_on_ttl_seconds() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("ttlneg");
    let mut body = targeted(BUSYBOX, &["sleep", "3600"]);
    body["ttlSeconds"] = serde_json::json!(-1);
    let (code, status) = sb.create("dbg", "", &body).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"], "ttlSeconds",
        "{status}"
    );
    assert!(message(&status).contains("ttlSeconds"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_create_without_a_target_gets_one_and_can_be_stopped_and_expire() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("deftarget");
    // `{}`: the server's default image, and the pod's first container as target.
    let (code, obj) = sb.create("bare", "", &serde_json::json!({})).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(obj["targetContainerName"], "app", "{obj}");
    assert_eq!(obj["status"]["stoppable"], true, "{obj}");

    // No target asked for, a long-running command: DELETE stops it.
    let sleeper =
        serde_json::json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]}});
    let obj = sb.create_running("stopme", &sleeper).await;
    assert_eq!(obj["targetContainerName"], "app", "{obj}");
    let (code, obj) = sb.stop("stopme", 2).await;
    assert!(code.is_success(), "{code} {obj}");
    sb.wait_phase("stopme", "Terminated", Duration::from_secs(60))
        .await;

    // And with a time limit, the expiry loop stops it.
    let mut short = sleeper.clone();
    short["ttlSeconds"] = serde_json::json!(5);
    let obj = sb.create_running("expireme", &short).await;
    assert!(obj["status"]["expiresAt"].is_string(), "{obj}");
    let done = sb
        .wait_phase("expireme", "Terminated", Duration::from_secs(90))
        .await;
    assert_eq!(
        done["status"]["stopRequested"]["requestedBy"], "system:poddebug:expiry",
        "{done}"
    );
    let app = sb.container_status("app").await;
    assert!(
        app["state"]["running"].is_object(),
        "the target runs on: {app}"
    );
    poll(
        "DebugContainerExpired for expireme",
        Duration::from_secs(30),
        Duration::from_secs(1),
        || {
            let list = ok_json(&[
                "get",
                "events",
                "-n",
                &sb.ns,
                "--field-selector=involvedObject.name=web,reason=DebugContainerExpired",
                "-o",
                "json",
            ]);
            list["items"]
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .find(|e| {
                            e["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("expireme"))
                        })
                        .cloned()
                })
                .ok_or_else(|| list.to_string())
        },
    );
}

/// A debug container that replaced its `/bin/sh` with one that exits 0 outlives its time limit:
/// from the deadline on it is refused to attach through kube-apiserver; past its bound it is
/// reported unstoppable, and a replica with `--unstoppable-action=evict` evicts its pod — once
/// the pod's PodDisruptionBudget allows it: while the budget refuses (kube-apiserver's Eviction
/// API answers 429), the pod stays and the refusal is said once (`DebugContainerEvictionBlocked`);
/// when the budget allows a disruption, the pod is evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_container_that_fakes_its_stop_is_refused_past_its_time_limit_and_evicted() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("fakettl");
    // A budget that refuses every disruption of web (it is the only pod it selects).
    let budget = serde_json::json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": sb.ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    crate::support::ok(&["apply", "-f", "-"], Some(&budget.to_string()));
    let replica = crate::sessions::Replica::start(&[
        "--leader-elect=false",
        "--debug-ttl-check-interval=1s",
        "--unstoppable-after=10s",
        "--unstoppable-action=evict",
    ])
    .await;
    let mut body = targeted(BUSYBOX, FAKES_ITS_STOP);
    body["ttlSeconds"] = serde_json::json!(15);
    sb.create_running("dbg", &body).await;
    let attach = sb.path("attach?container=dbg&stdout=true");
    let (code, status) = attach_answer(&sb.api, &attach).await;
    assert_eq!(
        code,
        StatusCode::SWITCHING_PROTOCOLS,
        "before its deadline: {status}"
    );

    // From the deadline on: refused.
    let status = poll_async(
        "attach refused past the deadline",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            match attach_answer(&sb.api, &attach).await {
                (StatusCode::CONFLICT, s) => Ok(s),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    assert!(
        message(&status).contains("the time limit of debug container \"dbg\" passed at "),
        "{status}"
    );
    // Past its bound (deadline + 1s + 10s + 10s): reported, and its pod evicted.
    poll(
        "DebugContainerStopFailed on pod web",
        Duration::from_secs(90),
        Duration::from_secs(1),
        || {
            let e = pod_events(&sb.ns, "DebugContainerStopFailed");
            e.first().cloned().ok_or_else(|| "none yet".to_owned())
        },
    );
    // The budget refuses: the pod stays, and the refusal is said once.
    let blocked = poll(
        "DebugContainerEvictionBlocked on pod web",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || {
            let e = pod_events(&sb.ns, "DebugContainerEvictionBlocked");
            e.first().cloned().ok_or_else(|| "none yet".to_owned())
        },
    );
    assert!(message(&blocked).contains("disruption budget"), "{blocked}");
    let pod = crate::support::ok_json(&["get", "pod", "web", "-n", &sb.ns, "-o", "json"]);
    assert!(
        pod["metadata"]["deletionTimestamp"].is_null(),
        "evicted although its budget refuses: {pod}"
    );
    assert_eq!(
        pod_events(&sb.ns, "DebugContainerEvictionBlocked").len(),
        1,
        "said once"
    );
    // The budget now allows one disruption: evicted.
    crate::support::ok(
        &[
            "patch",
            "poddisruptionbudget",
            "web",
            "-n",
            &sb.ns,
            "--type=merge",
            "-p",
            // (A bare pod has no controller to scale a maxUnavailable against: the budget
            // allows the disruption by asking for none.)
            r#"{"spec": {"minAvailable": 0}}"#,
        ],
        None,
    );
    let evicted = poll(
        "DebugContainerPodEvicted on pod web",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let e = pod_events(&sb.ns, "DebugContainerPodEvicted");
            e.first().cloned().ok_or_else(|| "none yet".to_owned())
        },
    );
    assert!(
        message(&evicted).contains("did not end when stopped"),
        "{evicted}"
    );
    // The pod goes (the Eviction API deleted it; its grace period is 1s).
    poll(
        "pod web evicted",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || {
            let out = kubectl(&["get", "pod", "web", "-n", &sb.ns, "-o", "json"], None);
            if !out.status.success() {
                // NotFound: gone already.
                return Ok(());
            }
            let pod: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if pod["metadata"]["deletionTimestamp"].is_string() {
                Ok(())
            } else {
                Err(pod.to_string())
            }
        },
    );
    drop(replica);
}

/// A time limit ends its own container, never a successor that reuses its debug name: `dbg`
/// with a 5-second limit is stopped; `dbg` made again (a new ephemeral container under the same
/// debug name) with an hour's limit keeps running through the expiry loop's rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn the_expiry_of_a_container_leaves_a_successor_of_its_name_running() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("ttlsuccessor");
    let replica =
        crate::sessions::Replica::start(&["--leader-elect=false", "--debug-ttl-check-interval=1s"])
            .await;
    let mut body = targeted(BUSYBOX, &["sh", "-c", "sleep 3600"]);
    body["ttlSeconds"] = serde_json::json!(5);
    let first = sb.create_running("dbg", &body).await;
    sb.wait_phase("dbg", "Terminated", Duration::from_secs(90))
        .await;
    body["ttlSeconds"] = serde_json::json!(3600);
    let second = sb.create_running("dbg", &body).await;
    assert_ne!(
        first["status"]["ephemeralContainerName"], second["status"]["ephemeralContainerName"],
        "a new container: {second}"
    );
    let rounds = replica.metric("poddebug_expiry_rounds_total").await;
    poll_async(
        "three more expiry rounds",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let now = replica.metric("poddebug_expiry_rounds_total").await;
            if now >= rounds + 3.0 {
                Ok(())
            } else {
                Err(now.to_string())
            }
        },
    )
    .await;
    let (code, got) = sb.get("dbg").await;
    assert_eq!(code, StatusCode::OK, "{got}");
    assert_eq!(
        got["status"]["phase"], "Running",
        "the successor was ended: {got}"
    );
    assert_eq!(
        got["status"]["ephemeralContainerName"],
        second["status"]["ephemeralContainerName"]
    );
}
