//! Node debug containers on the real node `localhost`: the host's processes and root
//! filesystem through attach, the cluster-wide list, DELETE and the time limit, and who may
//! (create on `nodes/debug`, `use` on the profile).

use std::time::Duration;

use http::{Method, StatusCode};
use poddebug_tests::TestClient;
use poddebug_tests::channel::ChannelClient;
use serde_json::{Value, json};

use crate::support::{
    ALICE, BUSYBOX, GV, Sandbox, as_user, enabled, kubectl, message, ok, ok_json, poll, poll_async,
};

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
    // Users of this test alone: other tests bind alice and bob cluster-wide at the same time,
    // and this one asserts what a user *without* those bindings is refused. The sandbox holds
    // (and removes) their cluster role bindings.
    const USER: &str = "noderbac-user";
    const OTHER: &str = "noderbac-other";
    let sb = Sandbox::new("noderbac");
    let alice = as_user(&sb.api, USER);
    let name = unique("rbac");
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
    let sysadmin = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]}});
    let baseline = json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]},
                          "profile": "baseline"});

    let (code, status) = alice.post_json(&node_path(&name, ""), &sysadmin).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(message(&status).contains("nodes/debug"), "{status}");

    // create on nodes/debug, and use on the isolated profiles only.
    sb.bind_cluster("poddebug:node-debugger", USER);
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
    assert_eq!(created["status"]["createdBy"], USER);
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
    sb.bind_cluster("poddebug:privileged-profiles", USER);
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
    let bob = as_user(&sb.api, OTHER);
    sb.bind_cluster("poddebug:node-debugger", OTHER);
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

/// A namespace whose Pod Security admission enforces `level` (`pod-security.kubernetes.io/enforce`),
/// ready for pods (its default ServiceAccount exists); deleted on drop.
pub(crate) struct PsaNamespace(String);

impl PsaNamespace {
    /// A namespace enforcing Pod Security `level`, named for the test (`tag`): tests running at
    /// once each have their own.
    pub(crate) fn new(level: &str, tag: &str) -> PsaNamespace {
        let ns = format!("pdlive-psa-{tag}-{level}-{}", std::process::id());
        ok(&["create", "namespace", &ns], None);
        let guard = PsaNamespace(ns);
        ok(
            &[
                "label",
                "namespace",
                &guard.0,
                &format!("pod-security.kubernetes.io/enforce={level}"),
            ],
            None,
        );
        poll(
            &format!("the default ServiceAccount of {}", guard.0),
            Duration::from_secs(60),
            Duration::from_millis(200),
            || {
                let o = kubectl(&["get", "serviceaccount", "default", "-n", &guard.0], None);
                if o.status.success() {
                    Ok(())
                } else {
                    Err(String::from_utf8_lossy(&o.stderr).into_owned())
                }
            },
        );
        guard
    }

    /// A server-side dry-run create of `pod` here: `Ok` when admitted, else kube-apiserver's
    /// refusal.
    pub(crate) fn dry_run(&self, pod: &Value) -> Result<(), String> {
        let mut pod = pod.clone();
        pod["metadata"]["namespace"] = json!(self.0);
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            if let Some(m) = pod["metadata"].as_object_mut() {
                m.remove(k);
            }
        }
        if let Some(p) = pod.as_object_mut() {
            p.remove("status");
        }
        let out = kubectl(
            &["create", "--dry-run=server", "-n", &self.0, "-f", "-"],
            Some(&pod.to_string()),
        );
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for PsaNamespace {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.0, "--wait=false"], None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn isolated_node_profiles_keep_their_pod_security_level_and_poddebug_agrees_with_pod_security()
 {
    use poddebug_types::Profile;
    use poddebug_types::node::{
        NodeDebugContainer, NodePodContext, build_node_pod, effective_node_profile,
    };
    if !enabled() {
        return;
    }
    let api = crate::support::cluster();
    let namespaces = [
        (Profile::Baseline, PsaNamespace::new("baseline", "node")),
        (Profile::Restricted, PsaNamespace::new("restricted", "node")),
    ];
    // What poddebug builds for an isolated profile, as the server made it, passes the Pod
    // Security level the profile is named after.
    for (level, psa) in &namespaces {
        let level = level.as_str();
        let name = unique(&format!("psa-{level}"));
        let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
        let body = json!({"profile": level, "container": {"image": BUSYBOX, "command": ["sh"],
                          "stdin": true, "tty": true}});
        let (code, created) = api.post_json(&node_path(&name, ""), &body).await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
        assert_eq!(created["status"]["effectiveProfile"], level, "{created}");
        let pod = ok_json(&[
            "get",
            "pod",
            "-n",
            "poddebug-nodes",
            &format!("{NODE}.{name}"),
            "-o",
            "json",
        ]);
        if let Err(e) = psa.dry_run(&pod) {
            panic!("the {level} node debug pod the server made is refused by {level}: {e}");
        }
    }

    // And whatever the container asks for, poddebug calls the pod `baseline` (or `restricted`)
    // exactly when Pod Security of that level admits it.
    let hostile: Vec<Value> = vec![
        json!({}),
        json!({"securityContext": {"privileged": true}}),
        json!({"securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}),
        json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}),
        json!({"securityContext": {"capabilities": {"add": ["chown"]}}}),
        json!({"securityContext": {"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"]}}}),
        json!({"securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": true}}),
        json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
        json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
        json!({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
        json!({"securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c1"}}}),
        // Fields the server refuses on a node debug container (below), judged all the same.
        json!({"ports": [{"containerPort": 80, "hostPort": 8080}]}),
        json!({"livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}}}),
        json!({"lifecycle": {"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 22}}}}),
    ];
    for (level, psa) in &namespaces {
        let level = *level;
        for (i, extra) in hostile.iter().enumerate() {
            let mut container =
                json!({"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true});
            for (k, v) in extra.as_object().into_iter().flatten() {
                container[k] = v.clone();
            }
            let req: NodeDebugContainer =
                serde_json::from_value(json!({"container": container})).expect("a request");
            let name = format!("h{i}");
            let built = build_node_pod(
                &req,
                &NodePodContext {
                    node: NODE,
                    name: &name,
                    namespace: "poddebug-nodes",
                    profile: level,
                    default_image: BUSYBOX,
                    created_by: ALICE,
                    expires_at: None,
                },
            );
            let ours = effective_node_profile(&built);
            let pod = serde_json::to_value(&built).expect("JSON");
            let admitted = psa.dry_run(&pod);
            assert_eq!(
                ours.profile == level,
                admitted.is_ok(),
                "{level} with {extra}: poddebug says {} ({}), Pod Security {level} says {admitted:?}",
                ours.profile,
                ours.setting
            );
            if extra.as_object().is_some_and(|o| o.is_empty()) {
                assert!(admitted.is_ok(), "a plain {level} pod: {admitted:?}");
            }
        }
    }

    // The fields that reach outside the pod are refused by the server itself (422).
    for extra in [
        json!({"ports": [{"containerPort": 80, "hostPort": 8080}]}),
        json!({"livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}}}),
        json!({"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "poddebug-apiserver", "key": "token"}}}]}),
    ] {
        let mut container =
            json!({"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true});
        for (k, v) in extra.as_object().into_iter().flatten() {
            container[k] = v.clone();
        }
        let name = unique("hostile");
        let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
        let (code, st) = api
            .post_json(
                &node_path(&name, ""),
                &json!({"profile": "baseline", "container": container}),
            )
            .await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{extra}: {st}");
        assert_eq!(st["reason"], "Invalid", "{st}");
        assert_eq!(st["details"]["kind"], "NodeDebugContainer", "{st}");
        assert_eq!(
            st["details"]["causes"][0]["reason"], "FieldValueForbidden",
            "{st}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_baseline_node_container_that_makes_itself_privileged_is_a_moderated_sysadmin_one() {
    use crate::sessions::{Replica, WITHHELD, attach, attach_settled};
    if !enabled() {
        return;
    }
    // OWNER may use every node profile; READER holds poddebug:node-debugger only (nodes/debug,
    // use on baseline and restricted). Users of their own: other tests bind alice and bob
    // cluster-wide at the same time. The sandbox holds (and removes) their bindings.
    const OWNER: &str = "node-owner";
    const READER: &str = "node-reader";
    let sb = Sandbox::new("nodeabuse");
    sb.bind_cluster("poddebug:node-debugger", OWNER);
    sb.bind_cluster("poddebug:privileged-profiles", OWNER);
    sb.bind_cluster("poddebug:node-debugger", READER);
    let owner = as_user(&sb.api, OWNER);
    let reader = as_user(&sb.api, READER);
    let (sneaky, honest) = (unique("sneaky"), unique("honest"));
    let _cleanup = (
        poddebug_tests::kubectl::NodeDebugPodCleanup(sneaky.clone()),
        poddebug_tests::kubectl::NodeDebugPodCleanup(honest.clone()),
    );
    let shell = |sc: Value| {
        json!({"profile": "baseline", "container": {"image": BUSYBOX, "command": ["sh"],
            "stdin": true, "tty": true, "securityContext": sc}})
    };

    // The server that moderates sysadmin sessions refuses a command that would run unmoderated.
    let replica = Replica::start(&["--moderated-profiles=sysadmin"]).await;
    let mut payload = shell(json!({"privileged": true}));
    payload["container"]["command"] = json!(["sh", "-c", "cat /host/etc/shadow"]);
    let refusal = poll_async(
        "owner's unmoderated payload refused",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match replica
                .user(OWNER)
                .post_json(&node_path(&sneaky, ""), &payload)
                .await
            {
                (StatusCode::FORBIDDEN, s) if message(&s).contains("--moderated-profiles") => Ok(s),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    assert!(
        message(&refusal).contains("sysadmin profile (it gets securityContext.privileged: true"),
        "{refusal}"
    );
    assert_eq!(refusal["details"]["kind"], "nodes/debug", "{refusal}");

    // The bare shell is made, through the aggregator: it names baseline, it is sysadmin.
    let created = poll_async(
        "owner's privileged 'baseline' shell",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match owner
                .post_json(&node_path(&sneaky, ""), &shell(json!({"privileged": true})))
                .await
            {
                (StatusCode::CREATED, obj) => Ok(obj),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    assert_eq!(created["profile"], "baseline", "{created}");
    assert_eq!(
        created["status"]["effectiveProfile"], "sysadmin",
        "{created}"
    );
    let (code, honest_obj) = owner
        .post_json(&node_path(&honest, ""), &shell(Value::Null))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{honest_obj}");
    assert_eq!(honest_obj["status"]["effectiveProfile"], "baseline");
    wait_running(&owner, &sneaky).await;
    wait_running(&owner, &honest).await;

    // reader, who holds no `observe` on nodes/debug, reads neither log: someone else's
    // container's output needs it, as attaching to it does.
    let (code, st) = reader.get_json(&node_path(&honest, "/log")).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("cannot observe resource \"nodes/debug\""),
        "{st}"
    );
    // Allowed to observe, reader reads the honest baseline container's log, but not the
    // privileged one's, and cannot join it: the annotation on its pod still says baseline.
    sb.bind_cluster("poddebug:node-session-observer", READER);
    poll_async(
        "reader reads the honest baseline container's log",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            let (code, _, body) = reader
                .request(
                    Method::GET,
                    &node_path(&honest, "/log"),
                    &[],
                    bytes::Bytes::new(),
                )
                .await
                .map_err(|e| e.to_string())?;
            if code == StatusCode::OK {
                Ok(())
            } else {
                Err(format!("{code} {}", String::from_utf8_lossy(&body)))
            }
        },
    )
    .await;
    let pod = ok_json(&[
        "get",
        "pod",
        "-n",
        "poddebug-nodes",
        &format!("{NODE}.{sneaky}"),
        "-o",
        "json",
    ]);
    assert_eq!(
        pod["metadata"]["annotations"]["poddebug.dev/profile"],
        "baseline"
    );
    assert_eq!(
        pod["spec"]["containers"][0]["securityContext"]["privileged"],
        true
    );
    for path in [
        node_path(&sneaky, "/log"),
        format!("{GV}/nodes/{NODE}/log?container={sneaky}"),
    ] {
        let (code, st) = reader.get_json(&path).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}: {st}");
        assert!(
            message(&st).contains("cannot use resource \"debugprofiles\"")
                && message(&st).contains("sysadmin"),
            "{st}"
        );
    }
    match attach(
        &reader,
        &node_path(&sneaky, "/attach?stdin=true&stdout=true&tty=true&mode=peer"),
    )
    .await
    {
        Ok(_) => panic!("reader joined a sysadmin node shell"),
        Err((code, st)) => {
            assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
            assert!(message(&st).contains("sysadmin"), "{st}");
        }
    }

    // Its sessions are moderated where sysadmin is: its owner's input waits for a moderator.
    let mut session = attach_settled(
        &replica.user(OWNER),
        &node_path(&sneaky, "/attach?stdin=true&stdout=true&tty=true"),
    )
    .await;
    let t = session
        .read_until(Duration::from_secs(30), |t| {
            t.stdout_text().contains(WITHHELD)
        })
        .await;
    assert!(t.stdout_text().contains(WITHHELD), "{:?}", t.stdout_text());
}
