//! Copies of pods and node debug containers end to end: the real `poddebug-apiserver` against
//! the fake kube-apiserver, which now creates pods (`generateName`, dry run, AlreadyExists),
//! deletes them under a `uid` precondition and serves nodes. What a user sees: the objects the
//! server answers and the pods that appear in (or leave) the cluster; what the permissions and
//! the image policy refuse; and the expiry loop deleting an expired copy but never a pod merely
//! marked as one.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{Env, GV, NS, POD, T, env, env_with, metric, metrics, names};
use http::{Method, StatusCode};
use poddebug_tests::{ADMIN_TOKEN, FakeKube, TestClient};
use serde_json::{Value, json};

/// The server's default `--node-debug-namespace`.
const NODE_NS: &str = "poddebug-nodes";
/// The node the tests debug.
const NODE: &str = "node-1";
/// kube's alphabet for generated names.
const ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";
/// What `kubectl get` sends.
const KUBECTL_TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// Quick expiry rounds and a quick election, as in `ttl.rs`.
const FAST: &[&str] = &[
    "--debug-ttl-check-interval=1s",
    "--leader-elect-lease-duration=3s",
    "--leader-elect-resource-namespace=poddebug-system",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=1s",
];

/// The standard environment plus the node-debug namespace and node `node-1`.
async fn env_with_node(extra: &[&str]) -> Env {
    env_with(extra, |fake| {
        fake.add_namespace(NODE_NS, &[]);
        fake.add_node(NODE, &[]);
    })
    .await
}

fn copy_path(rest: &str) -> String {
    format!("{GV}/namespaces/{NS}/pods/{POD}/{rest}")
}

fn node_path(node: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{GV}/nodes/{node}/debug/{n}"),
        None => format!("{GV}/nodes/{node}/debug"),
    }
}

/// The names of the pods stored in `ns`.
fn pod_names(fake: &FakeKube, ns: &str) -> Vec<String> {
    fake.pods_json(Some(ns))
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// `GET path` as alice until `done` holds for the answer (bounded); the last answer.
async fn get_until(e: &Env, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let (code, v) = e.get(path).await;
        assert_eq!(code, StatusCode::OK, "{v}");
        if done(&v) || tokio::time::Instant::now() >= deadline {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait (bounded, polling) until `/metrics` shows `name` at `value` or above; its last value.
async fn wait_metric_at_least(client: &TestClient, name: &str, value: f64) -> Option<f64> {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let v = metric(&metrics(client).await, name);
        if v.is_some_and(|v| v >= value) || tokio::time::Instant::now() >= deadline {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Status as kube-apiserver and poddebug write it.
fn status(code: u16, reason: &str, message: &str, details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "details": details, "code": code})
}

// ---------- the fake's answers the server relies on ----------

#[tokio::test]
async fn the_fake_creates_pods_checks_uid_preconditions_and_serves_nodes() {
    let fake = FakeKube::start().await;
    fake.add_namespace(NS, &[]);
    fake.add_node(NODE, &[]);
    let admin = fake.client(ADMIN_TOKEN);
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-debug-"},
                      "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}});

    let (code, dry) = admin.post_json(&format!("{pods}?dryRun=All"), &body).await;
    assert_eq!(code, StatusCode::CREATED, "{dry}");
    assert!(dry["metadata"].get("resourceVersion").is_none(), "{dry}");
    assert!(pod_names(&fake, NS).is_empty(), "a dry run stores nothing");

    let (code, pod) = admin.post_json(&pods, &body).await;
    assert_eq!(code, StatusCode::CREATED, "{pod}");
    let name = pod["metadata"]["name"].as_str().expect("a name").to_owned();
    let suffix = name
        .strip_prefix("web-debug-")
        .expect("the generateName first");
    assert!(
        suffix.len() == 5 && suffix.chars().all(|c| ALPHABET.contains(c)),
        "{name}"
    );
    assert_eq!(pod["status"]["phase"], "Pending");
    // Then the fake's scheduler and kubelet run it.
    let running = fake
        .wait_until(T, |f| {
            f.pod_json(NS, &name)
                .is_some_and(|p| p["status"]["phase"] == "Running")
        })
        .await;
    assert!(running, "{:?}", fake.pod_json(NS, &name));

    let mut named = body.clone();
    named["metadata"] = json!({"name": name});
    let (code, st) = admin.post_json(&pods, &named).await;
    assert_eq!(
        (code, st),
        (
            StatusCode::CONFLICT,
            status(
                409,
                "AlreadyExists",
                &format!("pods \"{name}\" already exists"),
                json!({"name": name, "kind": "pods"})
            )
        )
    );

    let (code, st) = admin
        .send_json(
            Method::DELETE,
            &format!("{pods}/{name}"),
            "application/json",
            &json!({"preconditions": {"uid": "not-the-uid"}}),
        )
        .await;
    let uid = pod["metadata"]["uid"].as_str().expect("uid");
    assert_eq!(
        (code, st),
        (
            StatusCode::CONFLICT,
            status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on Pod \"{name}\": the UID in the precondition (not-the-uid) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
                ),
                json!({"name": name, "kind": "Pod"})
            )
        )
    );
    assert!(fake.pod_json(NS, &name).is_some(), "kept");
    let (code, gone) = admin
        .send_json(
            Method::DELETE,
            &format!("{pods}/{name}"),
            "application/json",
            &json!({"preconditions": {"uid": uid}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{gone}");
    assert!(fake.pod_json(NS, &name).is_none());

    let (code, node) = admin.get_json(&format!("/api/v1/nodes/{NODE}")).await;
    assert_eq!(
        (code, node["kind"].clone()),
        (StatusCode::OK, json!("Node"))
    );
    let (code, list) = admin.get_json("/api/v1/nodes").await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(names(&list), ["fake-node", NODE]);
    let (code, st) = admin.get_json("/api/v1/nodes/nope").await;
    assert_eq!(
        (code, st),
        (
            StatusCode::NOT_FOUND,
            status(
                404,
                "NotFound",
                "nodes \"nope\" not found",
                json!({"name": "nope", "kind": "nodes"})
            )
        )
    );

    // A watch from "any" version that asks for bookmarks is one ERROR event, as v1.36 answers
    // it; from a listed version it runs.
    let mut w = admin
        .stream(
            Method::GET,
            &format!("{pods}?watch=true&resourceVersion=0&allowWatchBookmarks=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(w.status, StatusCode::OK);
    let ev = w.next_json(T).await.expect("an event");
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 500, "{ev}");
    assert!(
        ev["object"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("RequestWatchProgress is disabled")),
        "{ev}"
    );
}

// ---------- copies ----------

#[tokio::test]
async fn a_copy_is_a_new_pod_that_can_be_read_listed_and_deleted() {
    let e = env(&[]).await;
    let body = json!({
        "replace": {"app": {"command": ["sleep", "infinity"]}},
        "container": {"name": "dbg", "image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true},
    });
    let (code, copy) = e.alice.post_json(&copy_path("copy"), &body).await;
    assert_eq!(code, StatusCode::CREATED, "{copy}\n{}", e.logs());
    assert_eq!(copy["kind"], "PodDebugCopy");
    assert_eq!(copy["status"]["sourcePod"], POD);
    assert_eq!(copy["status"]["debugContainerName"], "dbg");
    let name = copy["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned();
    let suffix = name
        .strip_prefix(&format!("{POD}-debug-"))
        .unwrap_or_else(|| panic!("generated from the pod's name: {name}"));
    assert!(
        suffix.len() == 5 && suffix.chars().all(|c| ALPHABET.contains(c)),
        "{name}"
    );

    // The pod in the cluster: marked as a copy, none of the original's labels (no Service
    // selects it), the command replaced, the debug container added.
    let pod = e.fake.pod_json(NS, &name).expect("the copy's pod");
    let labels = &pod["metadata"]["labels"];
    assert_eq!(labels["poddebug.dev/copy-of"], POD, "{pod}");
    assert_eq!(labels["poddebug.dev/kind"], "copy", "{pod}");
    assert!(labels.get("app").is_none(), "{labels}");
    let containers = pod["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers[0]["name"], "app");
    assert_eq!(containers[0]["command"], json!(["sleep", "infinity"]));
    assert_eq!(containers[1]["name"], "dbg");
    assert_eq!(containers[1]["image"], "busybox:1.36");
    assert_eq!(pod["spec"]["shareProcessNamespace"], true);
    assert!(pod["spec"]["ephemeralContainers"].is_null());

    // It runs, and the copy says so.
    let got = get_until(&e, &copy_path(&format!("copies/{name}")), |c| {
        c["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(got["status"]["phase"], "Running", "{got}");
    assert_eq!(got["metadata"]["name"], name.as_str());
    // A copy of another pod is not one of this pod's.
    e.fake.add_simple_pod(NS, "other");
    let (code, other) = e
        .alice
        .post_json(
            &format!("{GV}/namespaces/{NS}/pods/other/copy"),
            &json!({"metadata": {"name": "other-copy"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{other}");
    assert_eq!(other["status"]["sourcePod"], "other");
    let (code, list) = e.get(&copy_path("copies")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "PodDebugCopyList");
    assert_eq!(names(&list), [name.as_str()]);
    let (code, st) = e.get(&copy_path("copies/other-copy")).await;
    assert_eq!(
        (code, st),
        (
            StatusCode::NOT_FOUND,
            status(
                404,
                "NotFound",
                "poddebugcopies.poddebug.dev \"other-copy\" not found",
                json!({"name": "other-copy", "group": "poddebug.dev", "kind": "poddebugcopies"})
            )
        )
    );

    // The original is a pod of the namespace but no copy of itself.
    let (code, st) = e.get(&copy_path(&format!("copies/{POD}"))).await;
    assert_eq!(
        (code, st),
        (
            StatusCode::NOT_FOUND,
            status(
                404,
                "NotFound",
                &format!("poddebugcopies.poddebug.dev \"{POD}\" not found"),
                json!({"name": POD, "group": "poddebug.dev", "kind": "poddebugcopies"})
            )
        )
    );
    let (code, _) = e.delete(&copy_path(&format!("copies/{POD}"))).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(e.fake.pod_json(NS, POD).is_some(), "the original stays");

    let (code, deleted) = e.delete(&copy_path(&format!("copies/{name}"))).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["metadata"]["name"], name.as_str());
    assert!(
        e.fake.pod_json(NS, &name).is_none(),
        "the copy's pod is gone"
    );
    let (code, list) = e.get(&copy_path("copies")).await;
    assert_eq!((code, names(&list)), (StatusCode::OK, Vec::<String>::new()));
}

#[tokio::test]
async fn images_outside_the_policy_unknown_containers_and_unknown_fields_are_refused() {
    let e = env(&["--allowed-images=busybox,busybox:*"]).await;
    let (code, st) = e
        .alice
        .post_json(
            &copy_path("copy"),
            &json!({"metadata": {"name": "evil"}, "setImage": {"app": "registry.example/tool:1"}}),
        )
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::FORBIDDEN,
            status(
                403,
                "Forbidden",
                "pods/copy.poddebug.dev \"target\" is forbidden: image \"registry.example/tool:1\" is not allowed by the server's --allowed-images policy (allowed patterns: \"busybox\", \"busybox:*\")",
                json!({"name": POD, "group": "poddebug.dev", "kind": "pods/copy"})
            )
        )
    );

    let (code, st) = e
        .alice
        .post_json(
            &copy_path("copy"),
            &json!({"setImage": {"nope": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            status(
                422,
                "Invalid",
                "PodDebugCopy.poddebug.dev \"\" is invalid: setImage[nope]: Not found: \"nope\"",
                json!({"group": "poddebug.dev", "kind": "PodDebugCopy", "causes": [
                    {"reason": "FieldValueNotFound", "message": "Not found: \"nope\"", "field": "setImage[nope]"}]})
            )
        )
    );

    let (code, st) = e
        .post_raw(&copy_path("copy"), r#"{"keeplabels": true}"#)
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(
        st["message"],
        r#"PodDebugCopy in version "v1alpha1" cannot be handled as a PodDebugCopy: strict decoding error: unknown field "keeplabels""#,
        "{st}"
    );

    assert_eq!(pod_names(&e.fake, NS), [POD], "nothing was made");
    assert!(
        !e.fake
            .requests()
            .iter()
            .any(|r| r.method == "POST"
                && r.path.starts_with(&format!("/api/v1/namespaces/{NS}/pods"))),
        "no pod was even asked for"
    );
}

#[tokio::test]
async fn create_on_pods_copy_without_the_core_create_pods_is_forbidden() {
    // Set before the server's first decision, which it then caches.
    let e = env_with(&[], |fake| {
        fake.set_policy(|a| {
            !(a.user == "alice" && a.api_group.is_empty() && a.is("create", "pods"))
        });
    })
    .await;
    let (code, st) = e.alice.post_json(&copy_path("copy"), &json!({})).await;
    assert_eq!(
        (code, st),
        (
            StatusCode::FORBIDDEN,
            status(
                403,
                "Forbidden",
                "pods is forbidden: User \"alice\" cannot create resource \"pods\" in API group \"\" in the namespace \"ephdemo\": a copy of a pod is a new pod: making one needs create on pods in its namespace",
                json!({"kind": "pods"})
            )
        )
    );
    // It held the subresource: only the core verb was missing.
    let sars = e.fake.sars();
    assert!(
        sars.iter().any(|s| s.attributes.user == "alice"
            && s.attributes.is("create", "pods/copy")
            && s.allowed == Some(true)),
        "{sars:?}"
    );
    assert_eq!(pod_names(&e.fake, NS), [POD], "nothing was made");
}

#[tokio::test]
async fn a_copys_profiles_are_read_from_its_pod_not_its_annotation() {
    // Set before the server's first decision, which it then caches.
    let e = env_with(&[], |fake| {
        fake.add_pod_json(json!({"metadata": {"name": "privileged", "namespace": NS},
            "spec": {"containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"],
                "securityContext": {"privileged": true}}]}}));
        fake.set_policy(|a| {
            !(a.user == "bob"
                && a.verb == "use"
                && a.resource == "debugprofiles"
                && a.name == "sysadmin")
        });
    })
    .await;
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let sysadmin_forbidden = |user: &str, why: &str| {
        status(
            403,
            "Forbidden",
            &format!(
                "debugprofiles.poddebug.dev \"sysadmin\" is forbidden: User \"{user}\" cannot use resource \"debugprofiles\" in API group \"poddebug.dev\" at the cluster scope: {why}"
            ),
            json!({"name": "sysadmin", "group": "poddebug.dev", "kind": "debugprofiles"}),
        )
    };

    // A copy of a privileged pod is a privileged pod, whatever its debug container's profile.
    let (code, st) = bob
        .post_json(
            &format!("{GV}/namespaces/{NS}/pods/privileged/copy"),
            &json!({"profile": "baseline"}),
        )
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::FORBIDDEN,
            sysadmin_forbidden(
                "bob",
                "the copy's pod gets securityContext.privileged: true (container \"app\"), which only the sysadmin profile grants"
            )
        )
    );
    assert_eq!(pod_names(&e.fake, NS).len(), 2, "no copy was made");

    // alice's copy runs a privileged debug container; rewriting its profile annotation changes
    // nothing: bob reaches none of its containers.
    let (code, copy) = e
        .alice
        .post_json(
            &copy_path("copy"),
            &json!({"metadata": {"name": "c1"}, "container": {"name": "dbg", "image": "busybox:1.36",
                "command": ["sh"], "stdin": true, "tty": true, "securityContext": {"privileged": true}}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{copy}");
    assert!(
        e.fake
            .update_pod(NS, "c1", |p| {
                p["metadata"]["annotations"]["poddebug.dev/profile"] = json!("baseline");
            })
            .is_some()
    );
    get_until(&e, &copy_path("copies/c1"), |c| {
        c["status"]["phase"] == "Running"
    })
    .await;
    for container in ["dbg", "app"] {
        let (code, st) = bob
            .get_json(&format!(
                "{GV}/namespaces/{NS}/pods/c1/log?container={container}"
            ))
            .await;
        assert_eq!(
            (code, st),
            (
                StatusCode::FORBIDDEN,
                sysadmin_forbidden(
                    "bob",
                    &format!(
                        "container \"{container}\" is in a pod that gets securityContext.privileged: true (container \"dbg\"), which only the sysadmin profile grants, and its streams need that profile too"
                    )
                )
            )
        );
    }
    let (code, _, _) = e
        .alice
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/c1/log?container=dbg"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(code, StatusCode::OK);
}

// ---------- node debug containers ----------

#[tokio::test]
async fn a_node_debug_container_is_a_privileged_pod_on_the_node() {
    let e = env_with_node(&[]).await;
    let body = json!({"container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}});
    let (code, obj) = e
        .alice
        .post_json(&node_path(NODE, Some("dbg")), &body)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["kind"], "NodeDebugContainer");
    assert_eq!(obj["metadata"]["name"], "dbg");
    assert_eq!(obj["profile"], "sysadmin");
    assert_eq!(obj["status"]["nodeName"], NODE);
    assert_eq!(obj["status"]["podName"], "node-1.dbg");
    assert_eq!(obj["status"]["podNamespace"], NODE_NS);

    let pod = e
        .fake
        .pod_json(NODE_NS, "node-1.dbg")
        .expect("the node's pod");
    let spec = &pod["spec"];
    assert_eq!(spec["nodeName"], NODE, "{pod}");
    assert_eq!(spec["hostPID"], true);
    assert!(
        spec["tolerations"].as_array().is_some_and(|t| t
            .iter()
            .any(|t| t["operator"] == "Exists" && t["key"].is_null())),
        "it tolerates every taint: {spec}"
    );
    assert_eq!(spec["containers"][0]["name"], "dbg");
    assert_eq!(spec["containers"][0]["securityContext"]["privileged"], true);

    let got = get_until(&e, &node_path(NODE, Some("dbg")), |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(got["status"]["phase"], "Running", "{got}");
    let (code, list) = e.get(&node_path(NODE, None)).await;
    assert_eq!(
        (code, names(&list)),
        (StatusCode::OK, vec!["dbg".to_owned()])
    );
    let (code, all) = e.get(&format!("{GV}/nodedebugcontainers")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert_eq!(all["kind"], "NodeDebugContainerList");
    assert_eq!(names(&all), ["node-1.dbg"]);
    let (code, _, table) = e
        .alice
        .request(
            Method::GET,
            &format!("{GV}/nodedebugcontainers"),
            &[("accept", KUBECTL_TABLE_ACCEPT)],
            Bytes::new(),
        )
        .await
        .expect("table");
    let table: Value = serde_json::from_slice(&table).unwrap_or(Value::Null);
    assert_eq!(code, StatusCode::OK, "{table}");
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"][0], "node-1.dbg", "{table}");
    assert_eq!(table["rows"][0]["cells"][1], NODE, "{table}");
    assert_eq!(table["rows"][0]["cells"][2], "sysadmin", "{table}");

    let (code, deleted) = e.delete(&node_path(NODE, Some("dbg"))).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    assert!(
        e.fake.pod_json(NODE_NS, "node-1.dbg").is_none(),
        "the pod is gone"
    );
    let (code, list) = e.get(&node_path(NODE, None)).await;
    assert_eq!((code, names(&list)), (StatusCode::OK, Vec::<String>::new()));
}

#[tokio::test]
async fn node_debug_refusals_unknown_nodes_and_missing_profile_rights() {
    // Set before the server's first decision, which it then caches.
    let e = env_with(&[], |fake| {
        fake.add_namespace(NODE_NS, &[]);
        fake.add_node(NODE, &[]);
        fake.set_policy(|a| {
            !(a.user == "alice"
                && a.verb == "use"
                && a.resource == "debugprofiles"
                && a.name == "sysadmin")
        });
    })
    .await;
    let body = json!({"container": {"image": "busybox:1.36"}});

    // kube-apiserver's own 404, passed through.
    let (code, st) = e
        .alice
        .post_json(
            &node_path("nope", Some("dbg")),
            &json!({"profile": "baseline", "container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::NOT_FOUND,
            status(
                404,
                "NotFound",
                "nodes \"nope\" not found",
                json!({"name": "nope", "kind": "nodes"})
            )
        )
    );

    let sysadmin_forbidden = |why: &str| {
        status(
            403,
            "Forbidden",
            &format!(
                "debugprofiles.poddebug.dev \"sysadmin\" is forbidden: User \"alice\" cannot use resource \"debugprofiles\" in API group \"poddebug.dev\" at the cluster scope: {why}"
            ),
            json!({"name": "sysadmin", "group": "poddebug.dev", "kind": "debugprofiles"}),
        )
    };
    // The default profile, sysadmin, needs `use` on it.
    let (code, st) = e
        .alice
        .post_json(&node_path(NODE, Some("dbg")), &body)
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::FORBIDDEN,
            sysadmin_forbidden(
                "creating a node debug container with the sysadmin profile needs use on it"
            )
        )
    );
    // baseline is allowed, but not a privileged container under it.
    let privileged = json!({"profile": "baseline",
        "container": {"image": "busybox:1.36", "securityContext": {"privileged": true}}});
    let (code, st) = e
        .alice
        .post_json(&node_path(NODE, Some("dbg")), &privileged)
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::FORBIDDEN,
            sysadmin_forbidden(
                "the node debug container gets securityContext.privileged: true (container \"dbg\"), which the sysadmin profile grants (the least node profile that does)"
            )
        )
    );
    assert!(pod_names(&e.fake, NODE_NS).is_empty(), "nothing was made");

    // The same baseline container without the privilege runs.
    let (code, obj) = e
        .alice
        .post_json(
            &node_path(NODE, Some("dbg")),
            &json!({"profile": "baseline", "container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(pod_names(&e.fake, NODE_NS), ["node-1.dbg"]);
}

/// A node debug container that is a bare interactive shell.
fn node_shell(profile: &str, security_context: Value) -> Value {
    json!({"profile": profile, "container": {"image": "busybox:1.36", "command": ["sh"],
        "stdin": true, "tty": true, "securityContext": security_context}})
}

/// A WebSocket attach (v5) as `client`.
async fn ws_attach(client: &TestClient, path: &str) -> poddebug_tests::UpgradeResponse {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    client
        .upgrade(Method::GET, path, &headers)
        .await
        .expect("upgrade answered")
}

#[tokio::test]
async fn a_node_debug_container_is_authorized_and_moderated_on_what_its_pod_gets_not_its_name() {
    // bob holds what poddebug:node-debugger grants: nodes/debug and use on the isolated
    // profiles only. Set before the server's first decision, which it then caches.
    let e = env_with(
        &["--moderated-profiles=sysadmin", "--allowed-images=busybox*"],
        |fake| {
            fake.add_namespace(NODE_NS, &[]);
            fake.add_node(NODE, &[]);
            fake.set_policy(|a| {
                !(a.user == "bob"
                    && a.verb == "use"
                    && a.resource == "debugprofiles"
                    && a.name != "baseline"
                    && a.name != "restricted")
            });
        },
    )
    .await;
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let privileged = json!({"privileged": true});

    // bob cannot have a privileged container by naming baseline.
    let (code, st) = bob
        .post_json(
            &node_path(NODE, Some("dbg")),
            &node_shell("baseline", privileged.clone()),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot use resource \"debugprofiles\"")
                && m.contains("\"sysadmin\"")
                && m.contains("securityContext.privileged: true")),
        "{st}"
    );

    // alice may use sysadmin; under --moderated-profiles=sysadmin her "baseline" privileged
    // container is a sysadmin one, so a command that runs on its own is refused.
    let mut payload = node_shell("baseline", privileged.clone());
    payload["container"]["command"] = json!(["sh", "-c", "id > /tmp/pwned"]);
    let (code, st) = e
        .alice
        .post_json(&node_path(NODE, Some("dbg")), &payload)
        .await;
    assert_eq!(
        (code, st),
        (
            StatusCode::FORBIDDEN,
            status(
                403,
                "Forbidden",
                &format!(
                    "nodes/debug.poddebug.dev \"{NODE}\" is forbidden: the node debug container runs with the sysadmin profile (it gets securityContext.privileged: true (container \"dbg\")), whose sessions are moderated (--moderated-profiles), so only an interactive shell is admitted: container.command [\"sh\", \"-c\", \"id > /tmp/pwned\"] is not one of the shells the server admits (--moderated-shells: sh, ash, bash, dash, ksh, mksh, zsh, /bin/sh, /bin/ash, /bin/bash, /bin/dash, /bin/ksh, /bin/mksh, /bin/zsh, /usr/bin/sh, /usr/bin/bash, /usr/bin/dash, /usr/bin/ksh, /usr/bin/mksh, /usr/bin/zsh)"
                ),
                json!({"name": NODE, "group": "poddebug.dev", "kind": "nodes/debug"})
            )
        )
    );
    assert!(pod_names(&e.fake, NODE_NS).is_empty(), "nothing was made");

    // A bare interactive shell is admitted; it says what it asked for and what it is.
    let (code, obj) = e
        .alice
        .post_json(
            &node_path(NODE, Some("dbg")),
            &node_shell("baseline", privileged),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["profile"], "baseline", "{obj}");
    assert_eq!(obj["status"]["effectiveProfile"], "sysadmin", "{obj}");
    let (code, _, table) = e
        .alice
        .request(
            Method::GET,
            &node_path(NODE, None),
            &[("accept", KUBECTL_TABLE_ACCEPT)],
            Bytes::new(),
        )
        .await
        .expect("table");
    let table: Value = serde_json::from_slice(&table).unwrap_or(Value::Null);
    assert_eq!(code, StatusCode::OK, "{table}");
    assert_eq!(table["rows"][0]["cells"][2], "sysadmin", "{table}");
    get_until(&e, &node_path(NODE, Some("dbg")), |o| {
        o["status"]["phase"] == "Running"
    })
    .await;

    // bob reaches it neither through its log nor by joining it: its pod is a sysadmin one.
    let sysadmin_needed = |s: &Value| {
        s["message"].as_str().is_some_and(|m| {
            m.contains("cannot use resource \"debugprofiles\"") && m.contains("sysadmin profile")
        })
    };
    let (code, st) = bob
        .get_json(&format!("{}/log", node_path(NODE, Some("dbg"))))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(sysadmin_needed(&st), "{st}");
    let (code, st) = bob
        .get_json(&format!("{GV}/nodes/{NODE}/log?container=dbg"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(sysadmin_needed(&st), "{st}");
    let resp = ws_attach(
        &bob,
        &format!(
            "{}/attach?stdout=true&tty=true&mode=peer",
            node_path(NODE, Some("dbg"))
        ),
    )
    .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let st: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    assert!(sysadmin_needed(&st), "{st}");

    // alice's own session on it is moderated: her input waits for a moderator.
    let resp = ws_attach(
        &e.alice,
        &format!(
            "{}/attach?stdin=true&stdout=true&tty=true",
            node_path(NODE, Some("dbg"))
        ),
    )
    .await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    let mut owner = poddebug_tests::channel::ChannelClient::new(
        resp.io.expect("upgraded"),
        "v5.channel.k8s.io",
    )
    .await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("withheld")
        })
        .await;
    assert!(
        String::from_utf8_lossy(&owner.transcript().stdout).contains("withheld"),
        "{:?}",
        owner.transcript()
    );
}

#[tokio::test]
async fn a_node_debug_container_takes_only_an_ephemeral_containers_fields() {
    let e = env_with_node(&[]).await;
    let body = json!({"profile": "baseline", "container": {
        "image": "busybox:1.36",
        "ports": [{"containerPort": 80, "hostPort": 80}],
        "livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}},
        "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "server-secret", "key": "token"}}}],
        "volumeMounts": [{"name": "host-root", "mountPath": "/host"}]}});
    let (code, st) = e
        .alice
        .post_json(&node_path(NODE, Some("dbg")), &body)
        .await;
    let ephemeral = "Forbidden: cannot be set for an Ephemeral Container";
    let ns = "Forbidden: a node debug container runs in the server's namespace, whose Secrets and ConfigMaps it may not read";
    let vol = "Forbidden: a node debug pod has no volume of the caller's (the profiles that give the host's root filesystem mount it at /host)";
    assert_eq!(
        (code, st),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            status(
                422,
                "Invalid",
                &format!(
                    "NodeDebugContainer.poddebug.dev \"dbg\" is invalid: [container.ports: {ephemeral}, container.livenessProbe: {ephemeral}, container.env[0].valueFrom.secretKeyRef: {ns}, container.volumeMounts: {vol}]"
                ),
                json!({"name": "dbg", "group": "poddebug.dev", "kind": "NodeDebugContainer", "causes": [
                    {"reason": "FieldValueForbidden", "message": ephemeral, "field": "container.ports"},
                    {"reason": "FieldValueForbidden", "message": ephemeral, "field": "container.livenessProbe"},
                    {"reason": "FieldValueForbidden", "message": ns, "field": "container.env[0].valueFrom.secretKeyRef"},
                    {"reason": "FieldValueForbidden", "message": vol, "field": "container.volumeMounts"}]})
            )
        )
    );
    assert!(pod_names(&e.fake, NODE_NS).is_empty(), "nothing was made");
}

#[tokio::test]
async fn moderated_profiles_admit_only_interactive_shells_in_debug_containers_and_copies() {
    let e = env(&["--moderated-profiles=sysadmin", "--allowed-images=busybox*"]).await;
    let debug = |command: Value, sc: Value| {
        json!({"container": {"image": "busybox:1.36", "command": command, "stdin": true,
            "tty": true, "securityContext": sc}, "targetContainerName": "app"})
    };
    // A general debug container that makes itself privileged is a sysadmin one.
    let (code, st) = e
        .create(
            "pwn",
            &debug(json!(["sh", "-c", "id"]), json!({"privileged": true})),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert_eq!(st["details"]["kind"], "pods/debug", "{st}");
    let msg = st["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with(&format!(
            "pods/debug.poddebug.dev \"{POD}\" is forbidden: the debug container runs with the sysadmin profile (it gets securityContext.privileged: true), whose sessions are moderated"
        )) && msg.contains("container.command [\"sh\", \"-c\", \"id\"] is not one of the shells"),
        "{st}"
    );
    // No command at all runs the image's entrypoint: refused too; named profile or privilege.
    let (code, st) = e
        .create(
            "pwn",
            &json!({"profile": "sysadmin", "container": {"image": "busybox:1.36", "stdin": true, "tty": true}}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains("the image's entrypoint would run")),
        "{st}"
    );
    let (code, st) = e
        .create(
            "pwn",
            &json!({"profile": "sysadmin", "container": {"image": "busybox:1.36", "command": ["sh"],
                "stdin": true, "tty": true, "env": [{"name": "PS1", "value": "$(id)"}]}}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains("container.env and container.envFrom must be empty")),
        "{st}"
    );
    assert!(
        !e.fake
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/ephemeralcontainers") && r.method != "GET"),
        "no container was added"
    );
    // The bare shell is admitted, and a command outside a moderated profile still is.
    e.create_running("shell", &debug(json!(["sh"]), json!({"privileged": true})))
        .await;
    let (code, obj) = e
        .create("job", &debug(json!(["sh", "-c", "id"]), Value::Null))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");

    // Copies: what the caller runs in a sysadmin copy must be a shell too.
    let copy = |extra: Value| {
        let mut b = json!({"container": {"name": "dbg", "image": "busybox:1.36", "command": ["sh"],
            "stdin": true, "tty": true, "securityContext": {"privileged": true}}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            b[k] = v.clone();
        }
        b
    };
    for (extra, refusal) in [
        (
            json!({"replace": {"app": {"command": ["sh", "-c", "id"]}}}),
            "replace[app].command [\"sh\", \"-c\", \"id\"] is not one of the shells",
        ),
        (
            json!({"setImage": {"app": "busybox:1.37"}}),
            "setImage[app] runs programs of another image",
        ),
        (
            json!({"container": {"name": "dbg", "image": "busybox:1.36", "command": ["sleep", "1d"],
                "securityContext": {"privileged": true}}}),
            "container.command [\"sleep\", \"1d\"] is not one of the shells",
        ),
    ] {
        let (code, st) = e
            .alice
            .post_json(&copy_path("copy"), &copy(extra.clone()))
            .await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{extra}: {st}");
        assert_eq!(st["details"]["kind"], "pods/copy", "{st}");
        let msg = st["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("the copy runs with the sysadmin profile") && msg.contains(refusal),
            "{extra}: {st}"
        );
    }
    assert_eq!(pod_names(&e.fake, NS), [POD], "no copy was made");
    let (code, made) = e
        .alice
        .post_json(
            &copy_path("copy"),
            &copy(json!({"replace": {"app": {"command": ["sh"], "stdin": true, "tty": true}}})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    // An unprivileged copy is not moderated: it runs what it is told.
    let (code, made) = e
        .alice
        .post_json(
            &copy_path("copy"),
            &json!({"replace": {"app": {"command": ["sh", "-c", "id"]}}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
}

// ---------- expiry ----------

#[tokio::test]
async fn an_expired_copy_is_deleted_by_the_expiry_loop() {
    let e = env(FAST).await;
    let (code, copy) = e
        .alice
        .post_json(
            &copy_path("copy"),
            &json!({"metadata": {"name": "short"}, "ttlSeconds": 1}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{copy}\n{}", e.logs());
    assert!(copy["status"]["expiresAt"].is_string(), "{copy}");
    // The kubelet ends it at its deadline even with no server about.
    let pod = e.fake.pod_json(NS, "short").expect("the copy's pod");
    let deadline = pod["spec"]["activeDeadlineSeconds"].as_i64();
    assert!(deadline.is_some_and(|d| (1..=2).contains(&d)), "{pod}");

    let gone = e
        .fake
        .wait_until(T, |f| f.pod_json(NS, "short").is_none())
        .await;
    assert!(gone, "the expired copy was not deleted:\n{}", e.logs());
    assert_eq!(
        wait_metric_at_least(&e.alice, "poddebug_debug_pods_expired_total", 1.0).await,
        Some(1.0)
    );
    assert!(e.fake.pod_json(NS, POD).is_some(), "the original stays");
}

#[tokio::test]
async fn a_pod_only_marked_as_an_expired_copy_is_left_alone() {
    let e = env(FAST).await;
    let marked = |name: &str, deadline: Option<i64>| {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": NS,
                "labels": {"poddebug.dev/kind": "copy", "poddebug.dev/copy-of": POD},
                "annotations": {"poddebug.dev/expires-at": "2020-01-01T00:00:00Z"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]},
        });
        if let Some(d) = deadline {
            pod["spec"]["activeDeadlineSeconds"] = json!(d);
        }
        pod
    };
    // Anyone who may label a pod can mark it; only a pod whose own deadline ends it anyway is
    // the server's to delete.
    e.fake.add_pod_json(marked("by-hand", None));
    e.fake.add_pod_json(marked("with-deadline", Some(1)));

    let deleted = e
        .fake
        .wait_until(T, |f| f.pod_json(NS, "with-deadline").is_none())
        .await;
    assert!(deleted, "the rounds never looked:\n{}", e.logs());
    let seen = metric(&metrics(&e.alice).await, "poddebug_expiry_rounds_total")
        .expect("rounds are counted");
    let rounds = wait_metric_at_least(&e.alice, "poddebug_expiry_rounds_total", seen + 3.0).await;
    assert!(rounds.is_some_and(|r| r >= seen + 3.0), "{rounds:?}");
    assert!(
        e.fake.pod_json(NS, "by-hand").is_some(),
        "a pod without activeDeadlineSeconds was deleted"
    );
    assert_eq!(
        metric(
            &metrics(&e.alice).await,
            "poddebug_debug_pods_expired_total"
        ),
        Some(1.0)
    );
}

/// The next watch event of `kind` about `name` (others are skipped), within the bound.
async fn next_event(
    watch: &mut poddebug_tests::StreamingResponse,
    kind: &str,
    name: &str,
) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + T;
    while tokio::time::Instant::now() < deadline {
        let ev = watch.next_json(T).await?;
        if ev["type"] == kind && ev["object"]["metadata"]["name"] == name {
            return Some(ev);
        }
    }
    None
}

#[tokio::test]
async fn dry_runs_store_nothing_and_a_second_replica_watches_reads_and_deletes_what_the_first_made()
{
    let e = env_with_node(&[]).await;

    // A dry run answers the would-be object and stores no pod.
    let copy = json!({"metadata": {"name": "dry-copy"}, "container": {"image": "busybox:1.36"}});
    let (code, obj) = e
        .alice
        .post_json(&format!("{}?dryRun=All", copy_path("copy")), &copy)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["metadata"]["name"], "dry-copy");
    assert!(e.fake.pod_json(NS, "dry-copy").is_none(), "nothing stored");
    let node = json!({"container": {"image": "busybox:1.36", "command": ["sh"]}});
    let (code, obj) = e
        .alice
        .post_json(
            &format!("{}?dryRun=All", node_path(NODE, Some("dry"))),
            &node,
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["podName"], "node-1.dry");
    assert!(
        e.fake.pod_json(NODE_NS, "node-1.dry").is_none(),
        "nothing stored"
    );

    // Another replica keeps nothing of its own: it watches, reads and deletes what the first
    // made, from the cluster.
    let pki = e.fake.pki().clone();
    let second = poddebug_tests::PodDebugServer::start(&e.fake, &pki, &[]).await;
    let other = second.front_proxy_client("alice", common::ALICE_GROUPS);
    let mut watch = other
        .stream(
            Method::GET,
            &format!("{GV}/nodedebugcontainers?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);
    let (code, obj) = e
        .alice
        .post_json(&node_path(NODE, Some("two")), &node)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    let added = next_event(&mut watch, "ADDED", "node-1.two").await;
    assert!(added.is_some(), "ADDED through the second replica");
    let (code, got) = other.get_json(&node_path(NODE, Some("two"))).await;
    assert_eq!(code, StatusCode::OK, "{got}");
    assert_eq!(got["status"]["createdBy"], "alice");
    let (code, deleted) = other.delete(&node_path(NODE, Some("two"))).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    assert!(e.fake.pod_json(NODE_NS, "node-1.two").is_none(), "deleted");
    let gone = next_event(&mut watch, "DELETED", "node-1.two").await;
    assert!(gone.is_some(), "DELETED through the second replica");
    let (code, status) = e.get(&node_path(NODE, Some("two"))).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
}

/// The names in a Table's rows, and its column names.
fn table_names(table: &Value) -> (Vec<String>, Vec<String>) {
    let rows = table["rows"].as_array().cloned().unwrap_or_default();
    let cols = table["columnDefinitions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (
        rows.iter()
            .map(|r| r["cells"][0].as_str().unwrap_or_default().to_owned())
            .collect(),
        cols.iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect(),
    )
}

#[tokio::test]
async fn poddebugcopies_lists_gets_and_watches_every_copy_as_kubectl_get_asks() {
    // bob may read copies but not list them: the collection is authorized as one.
    let e = env_with(&[], |fake| {
        fake.set_policy(|a| {
            !(a.user == "bob"
                && a.api_group == "poddebug.dev"
                && a.resource == "poddebugcopies"
                && a.verb == "list")
        });
    })
    .await;
    e.fake.add_simple_pod(NS, "other");
    let coll = format!("{GV}/namespaces/{NS}/poddebugcopies");
    // Watched from the start: each copy appears as it is made.
    let mut watch = e
        .alice
        .stream(
            Method::GET,
            &format!("{coll}?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);
    for (pod, name) in [(POD, "web-copy"), ("other", "other-copy")] {
        let (code, obj) = e
            .alice
            .post_json(
                &format!("{GV}/namespaces/{NS}/pods/{pod}/copy"),
                &json!({"metadata": {"name": name}}),
            )
            .await;
        assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
        let added = next_event(&mut watch, "ADDED", name).await;
        assert_eq!(
            added.as_ref().map(|a| a["object"]["kind"].clone()),
            Some(json!("PodDebugCopy")),
            "{added:?}"
        );
    }

    // Every copy of the namespace, whatever pod it copies; the original is no copy.
    let (code, list) = e.get(&coll).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "PodDebugCopyList");
    let mut got = names(&list);
    got.sort();
    assert_eq!(got, ["other-copy", "web-copy"]);
    let (code, all) = e.get(&format!("{GV}/poddebugcopies")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert_eq!(names(&all).len(), 2, "{all}");
    // The client's label selector narrows them.
    let (code, one) = e
        .get(&format!(
            "{coll}?labelSelector=poddebug.dev%2Fcopy-of%3Dother"
        ))
        .await;
    assert_eq!(
        (code, names(&one)),
        (StatusCode::OK, vec!["other-copy".to_owned()])
    );

    // As kubectl get asks: a Table.
    let (code, _, body) = e
        .alice
        .request(
            Method::GET,
            &coll,
            &[("accept", KUBECTL_TABLE_ACCEPT)],
            Bytes::new(),
        )
        .await
        .expect("table");
    let table: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(code, StatusCode::OK, "{table}");
    assert_eq!(table["kind"], "Table");
    let (mut rows, cols) = table_names(&table);
    rows.sort();
    assert_eq!(rows, ["other-copy", "web-copy"]);
    assert_eq!(&cols[..3], ["Name", "Copy Of", "Phase"]);

    // One by name; a pod that is no copy is not found, in this resource's terms.
    let (code, one) = e.get(&format!("{coll}/other-copy")).await;
    assert_eq!(code, StatusCode::OK, "{one}");
    assert_eq!(one["status"]["sourcePod"], "other");
    let (code, st) = e.get(&format!("{coll}/{POD}")).await;
    assert_eq!(
        (code, st),
        (
            StatusCode::NOT_FOUND,
            status(
                404,
                "NotFound",
                &format!("poddebugcopies.poddebug.dev \"{POD}\" not found"),
                json!({"name": POD, "group": "poddebug.dev", "kind": "poddebugcopies"})
            )
        )
    );

    // Deleted (through pods/POD/copies): the watch says so and the list no longer has it.
    let (code, _) = e.delete(&copy_path("copies/web-copy")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        next_event(&mut watch, "DELETED", "web-copy")
            .await
            .is_some()
    );
    let (code, list) = e.get(&coll).await;
    assert_eq!(
        (code, names(&list)),
        (StatusCode::OK, vec!["other-copy".to_owned()])
    );

    // Without list on poddebugcopies: 403, though the copy can be read by name.
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let (code, st) = bob.get_json(&coll).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert_eq!(st["details"]["kind"], "poddebugcopies", "{st}");
    let (code, one) = bob.get_json(&format!("{coll}/other-copy")).await;
    assert_eq!(code, StatusCode::OK, "{one}");
}

/// A node debug pod's name joins node and name with a dot, which node names may hold too: the
/// pod of debug container `c` on node `a.b` is `a.b.c`, which `nodes/a/debug/b.c` also spells.
/// A path reaches a node debug container only on the node it names, under the name it names.
#[tokio::test]
async fn a_node_debug_containers_path_names_its_real_node() {
    let e = env_with(&[], |fake| {
        fake.add_namespace(NODE_NS, &[]);
        fake.add_node("a.b", &[]);
        fake.add_node("a", &[]);
    })
    .await;
    let body = json!({"profile": "baseline", "container": {"image": "busybox", "command": ["sh"],
                      "stdin": true, "tty": true}});
    let (code, made) = e.alice.post_json(&node_path("a.b", Some("c")), &body).await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    let (code, got) = e.alice.get_json(&node_path("a.b", Some("c"))).await;
    assert_eq!(code, StatusCode::OK, "{got}");
    // The same pod by another split of its name: not found, for reads, streams and deletes.
    let (code, st) = e.alice.get_json(&node_path("a", Some("b.c"))).await;
    assert_ne!(code, StatusCode::OK, "{st}");
    assert!(code.is_client_error(), "{code} {st}");
    let (code, _, _) = e
        .alice
        .request(
            http::Method::GET,
            &format!("{}/log", node_path("a", Some("b.c"))),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("answered");
    assert!(code.is_client_error(), "{code}");
    let (code, st) = e.alice.delete(&node_path("a", Some("b.c"))).await;
    assert!(code.is_client_error(), "{code} {st}");
    // It is still there, on its node.
    let (code, got) = e.alice.get_json(&node_path("a.b", Some("c"))).await;
    assert_eq!(code, StatusCode::OK, "{got}");
}
