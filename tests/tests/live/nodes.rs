//! Node debug containers on the real node `localhost`: the host's processes and root
//! filesystem through attach, the cluster-wide list, DELETE and the time limit, and who may
//! (create on `nodes/debug`, `use` on the profile).

use std::time::Duration;

use http::{Method, StatusCode};
use poddebug_tests::TestClient;
use poddebug_tests::channel::ChannelClient;
use serde_json::{Value, json};

use crate::support::{ALICE, BUSYBOX, GV, Sandbox, as_user, enabled, message, ok_json, poll_async};

const NODE: &str = "localhost";
const RBAC_SETTLE: Duration = Duration::from_secs(40);

/// A debug name of this run (node debug containers are cluster-wide).
fn unique(tag: &str) -> String {
    format!("{tag}-{}", std::process::id())
}

fn node_path(name: &str, rest: &str) -> String {
    format!("{GV}/nodes/{NODE}/debug/{name}{rest}")
}

async fn wait_pod_gone(name: &str) {
    poll_async(
        &format!("node debug pod {name} deleted"),
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let pods = ok_json(&["get", "pods", "-n", "poddebug-nodes", "-o", "json"]);
            let found = pods["items"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|p| p["metadata"]["name"] == format!("{NODE}.{name}"))
            });
            if found {
                Err("still there".to_owned())
            } else {
                Ok(())
            }
        },
    )
    .await;
}

async fn wait_running(api: &TestClient, name: &str) -> Value {
    poll_async(
        &format!("node debug container {name} running"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let (code, obj) = api.get_json(&node_path(name, "")).await;
            if code == StatusCode::OK && obj["status"]["phase"] == "Running" {
                Ok(obj)
            } else {
                Err(format!("{code} {obj}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_node_debug_container_sees_the_hosts_processes_and_files() {
    if !enabled() {
        return;
    }
    let api = crate::support::cluster();
    let name = unique("host");
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
    // The cluster-wide watch, through the aggregator, sees it come.
    let mut watch = api
        .stream(
            Method::GET,
            &format!("{GV}/nodedebugcontainers?watch=true"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);
    let body = json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true}});
    let (code, created) = api.post_json(&node_path(&name, ""), &body).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["profile"], "sysadmin", "the default profile");
    let full = format!("{NODE}.{name}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut added = false;
    while !added && tokio::time::Instant::now() < deadline {
        let Some(ev) = watch.next_json(Duration::from_secs(30)).await else {
            break;
        };
        added = ev["type"] == "ADDED" && ev["object"]["metadata"]["name"] == full.as_str();
    }
    assert!(added, "the watch saw {full} ADDED");
    drop(watch);
    assert_eq!(created["status"]["nodeName"], NODE);
    wait_running(&api, &name).await;

    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = api
        .upgrade(
            Method::GET,
            &node_path(&name, "/attach?stdin=true&stdout=true&stderr=true"),
            &headers,
        )
        .await
        .expect("upgrade request");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    let mut ws = ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await;
    // The kubelet is a process of the host's PID namespace; /host is the node's root.
    ws.stdin(
        b"ps | grep -q '[k]ubelet' && echo KUBELET-SEEN; grep -q '^ID=' /host/etc/os-release && echo OS-RELEASE-READ\n",
    )
    .await
    .expect("stdin");
    let t = ws
        .read_until(Duration::from_secs(30), |t| {
            let out = String::from_utf8_lossy(&t.stdout);
            out.contains("KUBELET-SEEN") && out.contains("OS-RELEASE-READ")
        })
        .await;
    let out = String::from_utf8_lossy(&t.stdout).into_owned();
    assert!(
        out.contains("KUBELET-SEEN"),
        "{out:?} {:?}",
        String::from_utf8_lossy(&t.stderr)
    );
    assert!(out.contains("OS-RELEASE-READ"), "{out:?}");
    drop(ws);

    // The session was recorded like any other (the live suite's servers all record), under the
    // node debug pod.
    let recordings = format!("{GV}/namespaces/poddebug-nodes/pods/{NODE}.{name}/recordings");
    poll_async(
        "the node session's recording",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || async {
            let (code, list) = api.get_json(&recordings).await;
            let found = list["items"]
                .as_array()
                .is_some_and(|a| a.iter().any(|r| r["spec"]["container"] == name.as_str()));
            if code == StatusCode::OK && found {
                Ok(())
            } else {
                Err(format!("{code} {list}"))
            }
        },
    )
    .await;

    // The log, at both of its paths.
    for path in [
        node_path(&name, "/log"),
        format!("{GV}/nodes/{NODE}/log?container={name}"),
    ] {
        let text = poll_async(
            &format!("the log at {path}"),
            Duration::from_secs(30),
            Duration::from_millis(500),
            || async {
                let (code, _, body) = api
                    .request(Method::GET, &path, &[], bytes::Bytes::new())
                    .await
                    .map_err(|e| e.to_string())?;
                let body = String::from_utf8_lossy(&body).into_owned();
                if code == StatusCode::OK && body.contains("KUBELET-SEEN") {
                    Ok(body)
                } else {
                    Err(format!("{code} {body}"))
                }
            },
        )
        .await;
        assert!(text.contains("OS-RELEASE-READ"), "{text}");
    }

    // Listed cluster-wide as NODE.NAME, and per node as NAME.
    let (code, all) = api.get_json(&format!("{GV}/nodedebugcontainers")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert!(
        all["items"]
            .as_array()
            .is_some_and(|a| a.iter().any(|i| i["metadata"]["name"] == full.as_str())),
        "{all}"
    );
    let (code, one) = api
        .get_json(&format!("{GV}/nodedebugcontainers/{full}"))
        .await;
    assert_eq!(code, StatusCode::OK, "{one}");
    let (code, of_node) = api.get_json(&format!("{GV}/nodes/{NODE}/debug")).await;
    assert_eq!(code, StatusCode::OK, "{of_node}");
    assert!(
        of_node["items"]
            .as_array()
            .is_some_and(|a| a.iter().any(|i| i["metadata"]["name"] == name.as_str())),
        "{of_node}"
    );

    // DELETE removes the pod.
    let (code, deleted) = api.delete(&node_path(&name, "")).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    wait_pod_gone(&name).await;
    let (code, status) = api.get_json(&node_path(&name, "")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(status["details"]["kind"], "nodedebugcontainers", "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn node_debugging_needs_nodes_debug_and_use_on_the_profile() {
    if !enabled() {
        return;
    }
    // The sandbox holds (and removes) alice's cluster role bindings.
    let sb = Sandbox::new("noderbac");
    let alice = as_user(&sb.api, ALICE);
    let name = unique("rbac");
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
    let sysadmin = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]}});
    let baseline = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
                          "profile": "baseline"});

    let (code, status) = alice.post_json(&node_path(&name, ""), &sysadmin).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(message(&status).contains("nodes/debug"), "{status}");

    // create on nodes/debug, and use on the isolated profiles only.
    sb.bind_cluster("poddebug:node-debugger", ALICE);
    let refusal = poll_async(
        "alice's sysadmin node debugging refused for want of use",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match alice.post_json(&node_path(&name, ""), &sysadmin).await {
                (StatusCode::FORBIDDEN, s) if message(&s).contains("debugprofiles") => Ok(s),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    assert!(message(&refusal).contains("sysadmin"), "{refusal}");
    // A baseline container that makes itself privileged needs what privileged needs.
    let sneaky = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"],
                                      "securityContext": {"privileged": true}},
                        "profile": "baseline"});
    let (code, status) = alice.post_json(&node_path(&name, ""), &sneaky).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(message(&status).contains("privileged"), "{status}");
    let (code, created) = alice.post_json(&node_path(&name, ""), &baseline).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"]["createdBy"], ALICE);
    let pod = ok_json(&[
        "get",
        "pod",
        "-n",
        "poddebug-nodes",
        &format!("{NODE}.{name}"),
        "-o",
        "json",
    ]);
    assert_ne!(pod["spec"]["hostPID"], true, "baseline stays isolated");
    assert!(
        pod["spec"]["volumes"]
            .as_array()
            .is_none_or(|v| v.iter().all(|v| v["hostPath"].is_null()))
    );
    let (code, _) = alice.delete(&node_path(&name, "")).await;
    assert_eq!(code, StatusCode::OK);
    wait_pod_gone(&name).await;

    // With use on sysadmin, the default profile is allowed.
    sb.bind_cluster("poddebug-privileged-profiles", ALICE);
    poll_async(
        "alice may debug the node with sysadmin",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match alice.post_json(&node_path(&name, ""), &sysadmin).await {
                (StatusCode::CREATED, obj) => Ok(obj),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    // Attaching needs the profile too: bob, another user with nodes/debug but no use on sysadmin,
    // is refused.
    let bob = as_user(&sb.api, "bob");
    sb.bind_cluster("poddebug:node-debugger", "bob");
    poll_async(
        "bob's attach refused for want of use on sysadmin",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            let (code, s) = bob.get_json(&node_path(&name, "/log")).await;
            if code == StatusCode::FORBIDDEN && message(&s).contains("sysadmin") {
                Ok(())
            } else {
                Err(format!("{code} {s}"))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_node_debug_container_is_deleted_at_its_time_limit() {
    if !enabled() {
        return;
    }
    let api = crate::support::cluster();
    let name = unique("ttl");
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
    let body = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
                      "profile": "baseline", "ttlSeconds": 5});
    let (code, created) = api.post_json(&node_path(&name, ""), &body).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert!(created["status"]["expiresAt"].is_string(), "{created}");
    wait_pod_gone(&name).await;
}
