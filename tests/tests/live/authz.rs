//! Who may do what: RBAC through poddebug's SubjectAccessReviews with the persona roles of
//! `manifests/personas.yaml`, the image policy, and the server's port refusing spoofed identity
//! headers.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use crate::support::{
    ALICE, BUSYBOX, GV, Sandbox, as_user, enabled, impersonating, message, poll_async,
    server_direct, targeted,
};

/// Authorization answers are cached for up to 10s (`--authorization-webhook-cache-*-ttl`):
/// after a RoleBinding, retry until it shows.
const RBAC_SETTLE: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn profiles_are_gated_for_alice_until_role_bindings_allow_them() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("gated");
    let alice = as_user(&sb.api, ALICE);
    let general = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
        "targetContainerName": "app", "profile": "general"});
    let sysadmin = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
        "targetContainerName": "app", "profile": "sysadmin"});

    // No grants at all.
    let (code, status) = sb.create_as(&alice, "gen", "", &general).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(message(&status).contains("alice"), "{status}");

    sb.bind("poddebug:debugger", ALICE);
    if impersonating() {
        sb.bind("poddebug:debugger-core", ALICE);
    }
    poll_async(
        "alice may create with general",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match sb.create_as(&alice, "gen", "", &general).await {
                (StatusCode::CREATED, _) => Ok(()),
                (code, body) => Err(format!("{code} {body}")),
            }
        },
    )
    .await;
    // sysadmin needs `use` on debugprofiles/sysadmin, which the debugger role does not grant.
    let (code, status) = sb.create_as(&alice, "sys", "", &sysadmin).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(message(&status).contains("sysadmin"), "{status}");

    // Profiles are cluster-scoped: `use` is granted by a ClusterRoleBinding.
    sb.bind_cluster("poddebug:privileged-profiles", ALICE);
    let created = poll_async(
        "alice may create with sysadmin",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match sb.create_as(&alice, "sys", "", &sysadmin).await {
                (StatusCode::CREATED, obj) => Ok(obj),
                (code, body) => Err(format!("{code} {body}")),
            }
        },
    )
    .await;
    assert_eq!(created["metadata"]["name"], "sys");
    let pod = sb.pod().await;
    let sys = pod["spec"]["ephemeralContainers"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "sys").cloned())
        .unwrap_or_default();
    assert_eq!(sys["securityContext"]["privileged"], true, "{sys}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn the_view_role_shows_debug_containers_but_does_not_create_them() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("viewer");
    sb.create_running("dbg", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    let alice = as_user(&sb.api, ALICE);
    let list = format!(
        "{}/namespaces/{}/poddebugcontainers",
        crate::support::GV,
        sb.ns
    );
    let (code, status) = alice.get_json(&list).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    // poddebug:viewer is aggregated into the built-in view role.
    sb.bind("view", ALICE);
    let seen = poll_async(
        "alice may list",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match alice.get_json(&list).await {
                (StatusCode::OK, l) => Ok(l),
                (code, body) => Err(format!("{code} {body}")),
            }
        },
    )
    .await;
    assert_eq!(seen["items"][0]["metadata"]["name"], "web.dbg", "{seen}");
    let (code, status) = sb
        .create_as(&alice, "mine", "", &targeted(BUSYBOX, &["sleep", "1"]))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let (code, status) = alice.delete(&sb.path("debug/dbg")).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn images_outside_the_allowed_patterns_are_refused() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("images");
    let (code, status) = sb
        .create("dbg", "", &targeted("alpine:3.20", &["sleep", "1"]))
        .await;
    assert_eq!(
        code,
        StatusCode::FORBIDDEN,
        "run the server with --allowed-images=busybox:*,docker.io/library/busybox:*,registry.k8s.io/pause:*: {status}"
    );
    assert!(message(&status).contains("alpine:3.20"), "{status}");
    let pod = sb.pod().await;
    assert!(pod["spec"]["ephemeralContainers"].is_null(), "{pod}");
    // An allowed image passes the same policy.
    sb.create_running("ok", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_refused_create_says_nothing_of_the_pod_or_node_it_names() {
    if !enabled() {
        return;
    }
    // The pod or node a create names is read while the request is authorized; a caller the
    // cluster's RBAC refuses must learn nothing from it. A replica reached as the aggregator
    // reaches it, so that poddebug's own review (not kube-apiserver's) refuses alice.
    let sb = Sandbox::new("refused");
    sb.create_running("dbg", &targeted(BUSYBOX, &["sleep", "3600"]))
        .await;
    let replica = crate::sessions::Replica::start(&[]).await;
    let alice = replica.user(ALICE);
    let body = targeted(BUSYBOX, &["sleep", "1"]);
    let missing_pod = format!("{GV}/namespaces/{}/pods/no-such-pod", sb.ns);
    let cases = [
        ("a taken name", sb.path("debug/dbg"), body.clone()),
        ("a free name", sb.path("debug/free"), body.clone()),
        (
            "a missing pod",
            format!("{missing_pod}/debug/dbg"),
            body.clone(),
        ),
        ("a copy", sb.path("copy"), json!({})),
        (
            "a copy of a missing pod",
            format!("{missing_pod}/copy"),
            json!({}),
        ),
        (
            "a node",
            format!("{GV}/nodes/localhost/debug/dbg"),
            json!({"container": {"image": BUSYBOX}}),
        ),
        (
            "a missing node",
            format!("{GV}/nodes/no-such-node/debug/dbg"),
            json!({"container": {"image": BUSYBOX}}),
        ),
    ];
    let mut answers = Vec::new();
    for (what, path, body) in &cases {
        let (code, status) = alice.post_json(path, body).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{what}: {status}");
        let m = message(&status);
        assert!(
            m.contains("User \"alice\" cannot create resource"),
            "{what}: {status}"
        );
        for leak in [
            "not found",
            "already",
            "running",
            "Running",
            "uid",
            "busybox",
        ] {
            assert!(
                !status.to_string().contains(leak),
                "{what} tells {leak}: {status}"
            );
        }
        // Beyond the name on the URL, the answer is the same whatever the object's state.
        let mut shape = status.clone();
        shape["message"] = json!(null);
        shape["details"]["name"] = json!(null);
        answers.push(shape);
    }
    assert!(answers.windows(2).all(|w| w[0]["code"] == w[1]["code"]));
    assert_eq!(answers[0], answers[1], "taken and free names answer alike");
    assert_eq!(
        answers[1], answers[2],
        "existing and missing pods answer alike"
    );
    assert_eq!(
        answers[3], answers[4],
        "copies of existing and missing pods answer alike"
    );
    assert_eq!(
        answers[5], answers[6],
        "existing and missing nodes answer alike"
    );
    // Nothing was made.
    let pod = sb.pod().await;
    assert_eq!(
        pod["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(1),
        "{pod}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn spoofed_identity_headers_sent_to_the_server_port_are_refused() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("spoof");
    let direct = server_direct();
    let spoof = [
        ("x-remote-user", "admin"),
        ("x-remote-group", "system:masters"),
        ("content-type", "application/json"),
        ("accept", "application/json"),
    ];
    // Without the aggregator's front-proxy certificate the headers carry no identity.
    let (code, _, body) = direct
        .request(
            Method::POST,
            &sb.path("debug/dbg"),
            &spoof,
            serde_json::to_vec(&targeted(BUSYBOX, &["sleep", "1"])).unwrap_or_default(),
        )
        .await
        .expect("the server answers");
    let text = String::from_utf8_lossy(&body);
    assert!(
        code == StatusCode::FORBIDDEN || code == StatusCode::UNAUTHORIZED,
        "{code} {text}"
    );
    assert!(!text.contains("\"admin\""), "{text}");
    let (code, _, body) = direct
        .request(Method::GET, &sb.path("debug"), &spoof, "")
        .await
        .expect("the server answers");
    assert!(
        code == StatusCode::FORBIDDEN || code == StatusCode::UNAUTHORIZED,
        "{code} {}",
        String::from_utf8_lossy(&body)
    );
    let pod = sb.pod().await;
    assert!(pod["spec"]["ephemeralContainers"].is_null(), "{pod}");
}

/// A WebSocket attach (stdout only) to `container` as `client`: the status and the body.
async fn attach_status(
    sb: &Sandbox,
    client: &poddebug_tests::TestClient,
    container: &str,
) -> (StatusCode, String) {
    let headers = poddebug_tests::TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(
            Method::GET,
            &sb.path(&format!("attach?container={container}&stdout=true")),
            &headers,
        )
        .await
        .expect("upgrade answered");
    (
        resp.status,
        String::from_utf8_lossy(&resp.body).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn profiles_hold_at_attach_and_log_for_a_user_who_may_attach_but_not_use_them() {
    if !enabled() {
        return;
    }
    // A user of its own: other tests grant alice the privileged profiles cluster-wide.
    const USER: &str = "pdlive-gate";
    let sb = Sandbox::new("gate");
    let sleeper = |profile: &str| {
        json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
               "targetContainerName": "app", "profile": profile})
    };
    sb.create_running("sys", &sleeper("sysadmin")).await;
    sb.create_running("gen", &sleeper("general")).await;
    sb.bind("poddebug:debugger", USER);
    // The containers are the admin's: attaching to another user's takes `join` as well.
    sb.bind("poddebug:session-peer", USER);
    if impersonating() {
        sb.bind("poddebug:debugger-core", USER);
    }
    let user = as_user(&sb.api, USER);
    // The debugger role may attach: the general one opens, the sysadmin one is refused by
    // poddebug, worded as the create's refusal.
    poll_async(
        "the user may attach to gen",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match attach_status(&sb, &user, "gen").await {
                (StatusCode::SWITCHING_PROTOCOLS, _) => Ok(()),
                (code, body) => Err(format!("{code} {body}")),
            }
        },
    )
    .await;
    let (code, body) = attach_status(&sb, &user, "sys").await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains(&format!(
            "debugprofiles.poddebug.dev \\\"sysadmin\\\" is forbidden: User \\\"{USER}\\\" cannot use resource \\\"debugprofiles\\\""
        )) && body.contains("created with the sysadmin profile"),
        "{body}"
    );
    let (code, _, log) = user
        .request(
            Method::GET,
            &sb.path("log?container=sys"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log answered");
    assert_eq!(
        code,
        StatusCode::FORBIDDEN,
        "{}",
        String::from_utf8_lossy(&log)
    );
    assert!(String::from_utf8_lossy(&log).contains("sysadmin"));

    // With `use` on the profile, the same attach opens.
    sb.bind_cluster("poddebug:privileged-profiles", USER);
    poll_async(
        "the user may attach to sys",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match attach_status(&sb, &user, "sys").await {
                (StatusCode::SWITCHING_PROTOCOLS, _) => Ok(()),
                (code, body) => Err(format!("{code} {body}")),
            }
        },
    )
    .await;
}
