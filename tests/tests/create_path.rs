//! The path of a create, end to end: the real `poddebug-apiserver` against the fake
//! kube-apiserver. Every phase of creating a debug container, a copy or a node debug container
//! is observed in `/metrics`; the reviews a create needs are in flight together, and so is its
//! first read with its authorization (the fake's request clock shows which requests overlapped,
//! never how long anything took); the pod goes back in the update as it was read, fields
//! poddebug's types do not know included; a refused create answers nothing about the pod or
//! node it named; an Event that cannot be written is counted.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use std::time::Duration;

use common::{Env, GV, NS, POD, T, env, env_with, metric, metrics};
use http::{Method, StatusCode};
use poddebug_tests::{RequestRecord, TestClient};
use serde_json::{Value, json};

/// The node the node debug containers are made on, and the server's default namespace for them.
const NODE: &str = "node-1";
const NODE_NS: &str = "poddebug-nodes";

/// The standard environment plus a node and the node-debug namespace.
async fn env_with_node(extra: &[&str]) -> Env {
    env_with(extra, |fake| {
        fake.add_namespace(NODE_NS, &[]);
        fake.add_node(NODE, &[]);
    })
    .await
}

/// A client that may read `/metrics` without a review (system:masters).
fn admin(e: &Env) -> TestClient {
    e.server
        .front_proxy_client("metrics-reader", &["system:masters"])
}

/// How many times phase `phase` of creates of `resource` was observed.
fn phase_count(text: &str, resource: &str, phase: &str) -> f64 {
    metric(
        text,
        &format!(
            "poddebug_create_phase_duration_seconds_count{{resource=\"{resource}\",phase=\"{phase}\"}}"
        ),
    )
    .unwrap_or(0.0)
}

/// Wait (bounded, polling) until `/metrics` satisfies `done`; the last exposition.
async fn metrics_until(client: &TestClient, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let text = metrics(client).await;
        if done(&text) || tokio::time::Instant::now() >= deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A debug container with the netadmin profile that makes itself privileged: `use` on
/// netadmin and on sysadmin, two reviews.
fn two_profiles() -> Value {
    json!({"container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true,
                         "securityContext": {"privileged": true}},
           "targetContainerName": "app", "profile": "netadmin"})
}

/// The requests of `method` whose path contains `part`.
fn requests(e: &Env, method: &str, part: &str) -> Vec<RequestRecord> {
    e.fake
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path.contains(part))
        .collect()
}

/// How many pairs of `records` were in flight together.
fn overlapping_pairs(records: &[RequestRecord]) -> usize {
    let mut n = 0;
    for (i, a) in records.iter().enumerate() {
        n += records[i + 1..].iter().filter(|b| a.overlaps(b)).count();
    }
    n
}

// ---------- phases ----------

#[tokio::test]
async fn every_phase_of_a_debug_container_create_is_observed() {
    let e = env(&["--require-core-permissions"]).await;
    let (code, obj) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "wait=true&timeoutSeconds=10",
            &two_profiles(),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    // A dry-run create of a container the local validator refuses (its name is the pod's
    // container's) goes to the cluster's dry run, whose 422 is the answer.
    let (code, st) = e
        .create_as(
            &e.alice,
            POD,
            Some("app"),
            "dryRun=All",
            &json!({"container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");

    let phases = [
        "authentication",
        "authorization",
        "review_request",
        "review_core_equivalent",
        "review_profile_use",
        "admission",
        "pod_read",
        "plan",
        "validation",
        "dry_run",
        "policy",
        "update",
        "wait",
        "event",
    ];
    // The Event is written after the answer: wait for it.
    let text = metrics_until(&admin(&e), |t| {
        phases
            .iter()
            .all(|p| phase_count(t, "pods/debug", p) >= 1.0)
    })
    .await;
    for p in phases {
        assert!(
            phase_count(&text, "pods/debug", p) >= 1.0,
            "phase {p} not observed:\n{}",
            text.lines()
                .filter(|l| l.contains("create_phase"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    // Two creates, each authenticated and authorized once; two profile reviews for the first.
    assert_eq!(phase_count(&text, "pods/debug", "authentication"), 2.0);
    assert_eq!(phase_count(&text, "pods/debug", "authorization"), 2.0);
    assert_eq!(phase_count(&text, "pods/debug", "review_profile_use"), 2.0);
    assert_eq!(phase_count(&text, "pods/copy", "authentication"), 0.0);
    // The help says what the histogram is.
    assert!(
        text.contains("# HELP poddebug_create_phase_duration_seconds Time of each phase"),
        "{text}"
    );
}

#[tokio::test]
async fn copies_and_node_debug_containers_get_the_same_breakdown() {
    let e = env_with_node(&[]).await;
    let copy = json!({"profile": "netadmin",
        "container": {"name": "dbg", "image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}});
    let (code, obj) = e
        .alice
        .post_json(&format!("{GV}/namespaces/{NS}/pods/{POD}/copy"), &copy)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    let node = json!({"container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}});
    let (code, obj) = e
        .alice
        .post_json(&format!("{GV}/nodes/{NODE}/debug/dbg"), &node)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());

    let text = metrics(&admin(&e)).await;
    // One of each; the profile is reviewed for the request and again for the pod built.
    for p in [
        "authentication",
        "authorization",
        "review_request",
        "review_create_pods",
        "pod_read",
        "validation",
        "policy",
        "admission",
        "create",
    ] {
        assert_eq!(phase_count(&text, "pods/copy", p), 1.0, "copy: {p}\n{text}");
    }
    assert!(phase_count(&text, "pods/copy", "review_profile_use") >= 1.0);
    for p in [
        "authentication",
        "authorization",
        "review_request",
        "review_profile_use",
        "node_read",
        "validation",
        "policy",
        "create",
    ] {
        assert_eq!(
            phase_count(&text, "nodes/debug", p),
            1.0,
            "node: {p}\n{text}"
        );
    }
    // Their requests are counted under their own resource, not as "other".
    assert!(
        text.contains(
            "poddebug_apiserver_requests_total{verb=\"create\",resource=\"pods/copy\",code=\"201\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "poddebug_apiserver_requests_total{verb=\"create\",resource=\"nodes/debug\",code=\"201\"} 1"
        ),
        "{text}"
    );
}

// ---------- the pod sent back as read ----------

/// The update carries the pod exactly as read: a field poddebug's types do not know (as a newer
/// cluster may keep on an existing ephemeral container) goes back unchanged, so the fake, which
/// like kube-apiserver refuses a list that changes an existing container, accepts it, and the
/// answer is the new container's.
#[tokio::test]
async fn fields_the_types_do_not_know_go_back_as_they_were() {
    let future = json!({"x": [1, 2.5, "\u{e9}"], "nested": {"kept": true}});
    let e = env_with(&[], |fake| {
        fake.add_pod_json(json!({
            "metadata": {"name": "newer", "namespace": NS},
            "spec": {
                "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
                "ephemeralContainers": [{
                    "name": "old", "image": "busybox", "targetContainerName": "app",
                    "futureField": future.clone()
                }]
            }
        }));
    })
    .await;
    let (code, obj) = e
        .create_as(
            &e.alice,
            "newer",
            Some("dbg"),
            "",
            &json!({"container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["metadata"]["name"], "dbg", "{obj}");
    assert_eq!(obj["status"]["podName"], "newer", "{obj}");
    let pod = e.fake.pod_json(NS, "newer").expect("the pod");
    let ecs = pod["spec"]["ephemeralContainers"].as_array().expect("list");
    assert_eq!(ecs.len(), 2, "{pod}");
    assert_eq!(ecs[0]["name"], "old");
    assert_eq!(ecs[0]["futureField"], future, "{pod}");
    assert_eq!(ecs[1]["name"], "dbg");
    assert!(ecs[1].get("futureField").is_none(), "{pod}");
}

// ---------- round trips at once ----------

#[tokio::test]
async fn the_reviews_a_create_needs_are_in_flight_together() {
    let e = env(&["--require-core-permissions"]).await;
    // Slow reviews and a slow pod read: whatever is asked together is seen together.
    let slow = Duration::from_millis(500);
    e.fake
        .delay_requests(Method::POST, "/subjectaccessreviews", slow);
    e.fake
        .delay_requests(Method::GET, &format!("/namespaces/{NS}/pods/{POD}?"), slow);
    e.fake.clear_requests();
    let (code, obj) = e.create("dbg", &two_profiles()).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());

    // Four reviews: the request's own and its core equivalent (the chain), use on netadmin and
    // on sysadmin (the handler). Each pair was in flight together.
    let reviews = requests(&e, "POST", "/subjectaccessreviews");
    assert_eq!(reviews.len(), 4, "{reviews:#?}");
    assert!(
        overlapping_pairs(&reviews) >= 2,
        "the reviews were asked one after another: {reviews:#?}"
    );
    // The pod was read while the request was being authorized.
    let reads = requests(&e, "GET", &format!("/namespaces/{NS}/pods/{POD}?"));
    assert_eq!(reads.len(), 1, "one read of the pod: {reads:#?}");
    assert!(
        reviews.iter().any(|r| r.overlaps(&reads[0])),
        "the pod was read after authorization: {reads:#?} {reviews:#?}"
    );
    // And the answer is the same as ever: the container was added once.
    let pod = e.fake.pod_json(NS, POD).expect("the pod");
    assert_eq!(
        pod["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn reviews_asked_together_answer_as_if_asked_in_order() {
    // Nothing cached: each create is reviewed afresh.
    let e = env(&[
        "--require-core-permissions",
        "--authorization-webhook-cache-authorized-ttl=0s",
        "--authorization-webhook-cache-unauthorized-ttl=0s",
    ])
    .await;
    // Both the request's own review and its core equivalent refuse: the answer names the
    // request's own, as when they were asked one after another.
    e.fake.set_policy(|a| a.user != "alice" || a.verb == "use");
    let (code, st) = e.create("dbg", &two_profiles()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert_eq!(
        st["message"],
        "pods.poddebug.dev \"target\" is forbidden: User \"alice\" cannot create resource \"pods/debug\" in API group \"poddebug.dev\" in the namespace \"ephdemo\""
    );
    // Only the core one refuses: its refusal is the answer.
    e.fake
        .set_policy(|a| a.user != "alice" || a.api_group == "poddebug.dev");
    let (code, st) = e.create("dbg", &two_profiles()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot patch resource \"pods/ephemeralcontainers\"")),
        "{st}"
    );
    // Both profiles refused: the one named comes first.
    e.fake.set_policy(|a| a.user != "alice" || a.verb != "use");
    let (code, st) = e.create("dbg", &two_profiles()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("debugprofiles.poddebug.dev \"netadmin\" is forbidden")),
        "{st}"
    );
    // Nothing was added by any of them.
    let pod = e.fake.pod_json(NS, POD).expect("the pod");
    assert!(pod["spec"]["ephemeralContainers"].is_null(), "{pod}");
}

// ---------- nothing leaks to a refused caller ----------

#[tokio::test]
async fn a_refused_create_answers_nothing_about_the_pod_or_node_it_names() {
    let e = env_with_node(&[]).await;
    // A debug container named dbg is running; alice may create nothing.
    let admin = admin(&e);
    let (code, obj) = e
        .create_as(
            &admin,
            POD,
            Some("dbg"),
            "",
            &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    e.fake.set_policy(|a| {
        a.user != "alice" || !(a.verb == "create" && a.api_group == "poddebug.dev")
    });
    // Slow reviews: the read begun beside them is over before they refuse.
    e.fake.delay_requests(
        Method::POST,
        "/subjectaccessreviews",
        Duration::from_millis(300),
    );
    e.fake.clear_requests();
    let body = json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app"});
    let forbidden = |st: &Value, what: &str| {
        assert_eq!(st["code"], 403, "{what}: {st}");
        assert_eq!(st["reason"], "Forbidden", "{what}: {st}");
        let m = st["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("User \"alice\" cannot create resource"),
            "{what}: {st}"
        );
        for leak in [
            "not found",
            "already",
            "uid",
            "ephemeral",
            "busybox",
            "Running",
        ] {
            assert!(!st.to_string().contains(leak), "{what} tells {leak}: {st}");
        }
    };
    // A name that is taken: not 409.
    let (code, st) = e.create("dbg", &body).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    forbidden(&st, "taken name");
    // The pod was read while the request was authorized, and that read went nowhere.
    assert!(
        !requests(&e, "GET", &format!("/namespaces/{NS}/pods/{POD}?")).is_empty(),
        "the read beside authorization was made"
    );
    // A pod that does not exist: not 404.
    let (code, st) = e
        .create_as(&e.alice, "no-such-pod", Some("dbg"), "", &body)
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    forbidden(&st, "missing pod");
    // A copy of a pod that does not exist, a node that does not exist.
    let (code, st) = e
        .alice
        .post_json(
            &format!("{GV}/namespaces/{NS}/pods/no-such-pod/copy"),
            &json!({}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    forbidden(&st, "copy of a missing pod");
    let (code, st) = e
        .alice
        .post_json(&format!("{GV}/nodes/no-such-node/debug/dbg"), &body)
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    forbidden(&st, "missing node");
    // Nothing was changed or made.
    let writes: Vec<RequestRecord> = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| (r.path.contains("/pods") || r.path.contains("/nodes")) && r.method != "GET")
        .collect();
    assert!(writes.is_empty(), "{writes:#?}");
}

// ---------- the Event ----------

#[tokio::test]
async fn an_event_that_cannot_be_written_is_counted() {
    let e = env(&[]).await;
    let admin = admin(&e);
    let before = metric(&metrics(&admin).await, "poddebug_events_failed_total");
    assert_eq!(before, Some(0.0));
    e.fake.inject_faults(Method::POST, "/events", 403, 1);
    let (code, obj) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    let text = metrics_until(&admin, |t| {
        metric(t, "poddebug_events_failed_total").is_some_and(|v| v >= 1.0)
    })
    .await;
    assert_eq!(metric(&text, "poddebug_events_failed_total"), Some(1.0));
    // The next one is written, and not counted.
    let (code, obj) = e
        .create(
            "dbg2",
            &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    let events = e.wait_events("DebugContainerCreated", 1).await;
    assert!(
        events
            .iter()
            .any(|ev| ev["involvedObject"]["fieldPath"] == "spec.ephemeralContainers{dbg2}"),
        "{events:?}"
    );
    assert_eq!(
        metric(&metrics(&admin).await, "poddebug_events_failed_total"),
        Some(1.0)
    );
}
