//! Stopping debug containers on a real kubelet: only the debug container's processes end.

use std::time::Duration;

use http::StatusCode;

use crate::support::{
    ALICE, BUSYBOX, FAKES_ITS_STOP, PAUSE, Sandbox, attach_answer, enabled, message, pod_events,
    poll, poll_async, targeted,
};

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

/// A debug container that replaced its `/bin/sh` with one that exits 0: `DELETE` "succeeds"
/// (202) and it runs on. From the stop on it is refused to attach and log follow through
/// kube-apiserver and through a second replica; past its bound it is reported unstoppable
/// (Event, condition), and another `DELETE` is a 409. A PodDisruptionBudget keeps its pod from
/// any replica evicting it meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_container_that_fakes_its_stop_is_refused_on_every_replica_and_reported() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("fakestop");
    crate::support::ok(
        &[
            "create",
            "pdb",
            "web",
            "-n",
            &sb.ns,
            "--selector=app=web",
            "--min-available=1",
        ],
        None,
    );
    // A replica that looks every second and allows 10s past a stop's grace period.
    let replica = crate::sessions::Replica::start(&[
        "--leader-elect=false",
        "--debug-ttl-check-interval=1s",
        "--unstoppable-after=10s",
    ])
    .await;
    sb.create_running("dbg", &targeted(BUSYBOX, FAKES_ITS_STOP))
        .await;
    // A session opened before the stop, through kube-apiserver.
    let attach = sb.path("attach?container=dbg&stdout=true");
    let headers = poddebug_tests::TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = sb
        .api
        .upgrade(http::Method::GET, &attach, &headers)
        .await
        .expect("upgrade");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    let mut session = poddebug_tests::channel::ChannelClient::new(
        resp.io.expect("upgraded"),
        "v5.channel.k8s.io",
    )
    .await;
    // The sabotage holds: the stop script's exec "succeeds" and nothing ends.
    let (code, obj) = sb.stop("dbg", 1).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{obj}");
    assert_eq!(obj["status"]["phase"], "Running", "{obj}");

    // Refused at once, through kube-apiserver and through the other replica.
    let (code, status) = attach_answer(&sb.api, &attach).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert!(
        message(&status).contains("asked to stop debug container \"dbg\" at "),
        "{status}"
    );
    sb.bind("poddebug:debugger", ALICE);
    let via_replica = replica.user(ALICE);
    let status = poll_async(
        "the second replica refuses the attach (once RBAC has settled)",
        Duration::from_secs(40),
        Duration::from_secs(1),
        || async {
            match attach_answer(&via_replica, &attach).await {
                (StatusCode::CONFLICT, s) => Ok(s),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    assert!(
        message(&status).contains("asked to stop debug container \"dbg\" at "),
        "{status}"
    );
    let (code, _, body) = sb
        .api
        .request(
            http::Method::GET,
            &sb.path("log?container=dbg&follow=true"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(
        code,
        StatusCode::CONFLICT,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (code, _, _) = sb
        .api
        .request(
            http::Method::GET,
            &sb.path("log?container=dbg"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(code, StatusCode::OK, "a plain log read is served");

    // Past its bound: reported once, with the condition.
    let reports = poll(
        "DebugContainerStopFailed on pod web",
        Duration::from_secs(90),
        Duration::from_secs(1),
        || {
            let e = pod_events(&sb.ns, "DebugContainerStopFailed");
            if e.is_empty() {
                Err("none yet".to_owned())
            } else {
                Ok(e)
            }
        },
    );
    assert_eq!(reports[0]["type"], "Warning", "{reports:?}");
    // The session ended, through its Lease, whichever replica reported it.
    let t = session.finish(Duration::from_secs(30)).await.clone();
    let ended = t.status().unwrap_or_else(|| panic!("a Status: {t:?}"));
    assert_eq!(
        ended["message"], "session terminated by system:poddebug:expiry",
        "{ended}"
    );
    let got = sb
        .wait_condition("dbg", "Unstoppable", Duration::from_secs(30))
        .await;
    assert_eq!(
        got["status"]["conditions"][0]["reason"], "StopDidNotEnd",
        "{got}"
    );
    assert_eq!(got["status"]["phase"], "Running", "{got}");
    let (code, status) = sb.stop("dbg", 1).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert!(
        message(&status).contains("did not end when stopped"),
        "{status}"
    );
    // The budget kept the pod.
    assert_eq!(sb.pod().await["status"]["phase"], "Running");
    drop(replica);
}
