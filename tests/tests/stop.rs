//! Stop and names end to end: the real `poddebug-apiserver` binary against the fake
//! kube-apiserver, whose exec plays poddebug's stop script (and nothing else) the way it runs in
//! a real container. That the script really stops real processes is proved by its namespace
//! tests in `poddebug-storage` and by the live suite.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use common::{NS, POD, debug_path, ec_of, env};
use http::{Method, StatusCode};
use poddebug_tests::{ContainerState, ExecBehaviour, PODDEBUG_USER};
use serde_json::{Value, json};

/// A shell that shares the target's PID namespace: stoppable.
fn targeted_shell() -> Value {
    json!({"container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true},
           "targetContainerName": "app"})
}

/// `POST` a create of `name` as alice: code, `Warning` headers, body.
async fn create_with_headers(
    e: &common::Env,
    name: &str,
    body: &Value,
) -> (StatusCode, Vec<String>, Value) {
    let (code, headers, bytes) = e
        .alice
        .request(
            Method::POST,
            &debug_path(NS, POD, Some(name), ""),
            &[("content-type", "application/json")],
            serde_json::to_vec(body).expect("json"),
        )
        .await
        .expect("create");
    let warnings = headers
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    (
        code,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Requests the server made that write the pod object itself (not its subresources).
fn pod_writes(e: &common::Env) -> Vec<String> {
    let pod_path = format!("/api/v1/namespaces/{NS}/pods/{POD}");
    e.fake
        .requests()
        .into_iter()
        .filter(|r| matches!(r.method.as_str(), "PATCH" | "PUT"))
        .filter(|r| r.path.split('?').next() == Some(pod_path.as_str()))
        .map(|r| format!("{} {} as {}", r.method, r.path, r.user))
        .collect()
}

#[tokio::test]
async fn the_default_target_makes_a_bare_create_stoppable_by_delete_and_by_its_time_limit() {
    let e = env(&[]).await;
    // `{}` on a one-container pod that shares no process namespace: the first container is the
    // target, the answer says so, and nothing warns.
    let (code, warnings, obj) = create_with_headers(&e, "bare", &json!({})).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["targetContainerName"], "app", "{obj}");
    assert_eq!(ec_of(&e.fake, POD, "bare")["targetContainerName"], "app");
    assert_eq!(obj["status"]["stoppable"], true, "{obj}");
    assert!(
        obj["status"]["expiresAt"].is_string(),
        "the default time limit: {obj}"
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    e.wait_state(POD, "bare", "running").await;
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("bare"), "gracePeriodSeconds=1"))
        .await;
    assert_eq!(code, StatusCode::OK, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["phase"], "Terminated");
    assert_eq!(
        e.fake.execs()[0].container,
        "bare",
        "the stop ran in the debug container"
    );
}

#[tokio::test]
async fn a_create_that_could_not_be_stopped_at_its_time_limit_is_invalid() {
    // Without a default target, a create with no target in a pod that shares no process
    // namespace would run as its own PID 1: refused while any time limit applies.
    let e = env(&["--default-target=none"]).await;
    let before = e.fake.pod_json(NS, POD).expect("pod");
    for body in [json!({}), json!({"ttlSeconds": 15})] {
        let (code, status) = e.create("dbg", &body).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {status}");
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["kind"], "PodDebugContainer");
        let causes = status["details"]["causes"].as_array().expect("causes");
        assert_eq!(causes.len(), 1, "{status}");
        assert_eq!(causes[0]["field"], "targetContainerName");
        assert_eq!(causes[0]["reason"], "FieldValueRequired");
        assert!(
            status["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("PodDebugContainer.poddebug.dev \"dbg\" is invalid: targetContainerName: Required value: a debug container with a time limit"),
            "{status}"
        );
    }
    assert_eq!(
        e.fake.pod_json(NS, POD).expect("pod"),
        before,
        "nothing added"
    );
    // With a target, or with no time limit at all, it is created.
    let (code, obj) = e
        .create(
            "dbg",
            &json!({"targetContainerName": "app", "ttlSeconds": 15}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    let (code, obj) = e.create("free", &json!({"ttlSeconds": 0})).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(obj["status"]["stoppable"], false);
    // With a maximum there is always a time limit.
    let e = env(&["--default-target=none", "--max-debug-ttl=1h"]).await;
    let (code, status) = e.create("dbg", &json!({})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
}

#[tokio::test]
async fn a_command_runs_as_given_and_an_own_pid_1_is_reported_unstoppable() {
    let e = env(&["--default-target=none"]).await;
    // No target, no shared process namespace, no time limit: the command becomes PID 1 of its
    // own namespace.
    let (code, warnings, obj) = create_with_headers(
        &e,
        "top",
        &json!({"container": {"image": "busybox:1.36", "command": ["top", "-b"], "args": ["-d", "5"]},
                "ttlSeconds": 0}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    let ec = ec_of(&e.fake, POD, "top");
    assert_eq!(ec["command"], json!(["top", "-b"]), "never rewritten");
    assert_eq!(ec["args"], json!(["-d", "5"]));
    assert_eq!(obj["container"]["command"], json!(["top", "-b"]));
    assert_eq!(obj["status"]["stoppable"], false, "{obj}");
    let why = obj["status"]["stoppableMessage"]
        .as_str()
        .expect("the reason")
        .to_owned();
    assert_eq!(why, poddebug_types::stoppable::NOT_STOPPABLE);
    // kube-apiserver's Warning format, which kubectl prints.
    assert_eq!(
        warnings,
        [format!(
            "299 - \"debug container \\\"top\\\" cannot be stopped with DELETE: {why}\""
        )]
    );
    e.wait_state(POD, "top", "running").await;
    let (_, got) = e.get(&debug_path(NS, POD, Some("top"), "")).await;
    assert_eq!(got["status"]["stoppable"], false);

    // DELETE: 409, nothing run, nothing written, no Event.
    let before = e.fake.pod_json(NS, POD).expect("pod");
    let (code, status) = e.delete(&debug_path(NS, POD, Some("top"), "")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        format!(
            "Operation cannot be fulfilled on pods/debug.poddebug.dev \"top\": the debug container cannot be stopped: {why}; nothing was done"
        )
    );
    assert!(e.fake.execs().is_empty());
    assert_eq!(e.fake.pod_json(NS, POD).expect("pod"), before);
    assert!(e.events("DebugContainerStopped").is_empty());

    // With a target it can be stopped, and nothing warns.
    let (code, warnings, obj) = create_with_headers(&e, "dbg", &targeted_shell()).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(obj["status"]["stoppable"], true);
    assert!(obj["status"]["stoppableMessage"].is_null());
}

#[tokio::test]
async fn a_stop_writes_nothing_on_the_pod_and_records_in_the_termination_message() {
    let e = env(&[]).await;
    e.create_running("dbg", &targeted_shell()).await;
    // As manifests/rbac.yaml grants: no write on the pod object, for anyone.
    e.fake.set_policy(|a| {
        !(a.resource == "pods"
            && a.subresource.is_empty()
            && matches!(a.verb.as_str(), "patch" | "update" | "delete"))
    });
    e.fake.clear_requests();
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=2"))
        .await;
    assert_eq!(code, StatusCode::OK, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["phase"], "Terminated");
    assert!(pod_writes(&e).is_empty(), "{:?}", pod_writes(&e));
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    assert!(pod["metadata"]["annotations"].is_null(), "{pod}");

    // The record the script wrote, as the kubelet reports it.
    let message = pod["status"]["ephemeralContainerStatuses"][0]["state"]["terminated"]["message"]
        .as_str()
        .expect("termination message")
        .to_owned();
    let (marker, json) = message
        .trim_end()
        .split_once(' ')
        .expect("marker and record");
    assert_eq!(marker, "poddebug.dev/stop-request");
    let record: Value = serde_json::from_str(json).expect("record json");
    assert_eq!(record["requestedBy"], "alice");
    assert_eq!(record["gracePeriodSeconds"], 2);
    assert!(record["requestedAt"].is_string());

    // What reads show, from that record alone.
    let (_, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(got["status"]["stopRequested"], record, "{got}");
    assert_eq!(obj["status"]["stopRequested"], record);
    let events = e.wait_events("DebugContainerStopped", 1).await;
    assert_eq!(
        events[0]["message"],
        "User \"alice\" stopped debug container \"dbg\" with a grace period of 2s"
    );
    assert_eq!(
        events[0]["involvedObject"]["fieldPath"],
        "spec.ephemeralContainers{dbg}"
    );
    // Made with the server's identity, not the caller's.
    let exec = e.fake.execs().pop().expect("exec");
    assert_eq!(exec.user, PODDEBUG_USER);
}

#[tokio::test]
async fn records_of_earlier_versions_in_the_pod_annotation_are_still_read() {
    let e = env(&[]).await;
    e.create_running("dbg", &targeted_shell()).await;
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"] = json!({"poddebug.dev/stop-requests":
            r#"{"dbg":{"requestedAt":"2026-01-01T00:00:00Z","requestedBy":"bob"}}"#});
    });
    assert!(
        e.fake
            .set_ec_state(NS, POD, "dbg", ContainerState::terminated(143, "Error"))
    );
    let (_, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(
        got["status"]["stopRequested"],
        json!({"requestedAt": "2026-01-01T00:00:00Z", "requestedBy": "bob"})
    );
}

#[tokio::test]
async fn an_image_without_sh_cannot_be_stopped_and_nothing_changes() {
    let e = env(&[]).await;
    e.create_running("dbg", &targeted_shell()).await;
    e.fake.set_exec_behaviour(ExecBehaviour::NoShell);
    let before = e.fake.pod_json(NS, POD).expect("pod");
    let (code, status) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("Operation cannot be fulfilled on pods/debug.poddebug.dev \"dbg\": the debug container's image has no `sh`, which stopping it requires (")
            && msg.ends_with("); nothing was done"),
        "{msg}"
    );
    assert_eq!(e.fake.pod_json(NS, POD).expect("pod"), before);
    assert!(e.events("DebugContainerStopped").is_empty());
}

#[tokio::test]
async fn a_name_is_freed_only_when_its_container_can_never_start() {
    let e = env(&[]).await;
    e.fake.add_bad_image("registry.invalid/missing:1");
    let bad =
        json!({"container": {"image": "registry.invalid/missing:1"}, "targetContainerName": "app"});
    let (code, obj) = e.create("dbg", &bad).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    let backoff = e
        .fake
        .wait_until(common::T, |f| {
            f.pod_json(NS, POD).is_some_and(|p| {
                p["status"]["ephemeralContainerStatuses"][0]["state"]["waiting"]["reason"]
                    == "ImagePullBackOff"
            })
        })
        .await;
    assert!(backoff);
    // The kubelet keeps pulling: the old container may still start, so the name is held.
    let (code, status) = e.create("dbg", &targeted_shell()).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(status["reason"], "AlreadyExists");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with(
            "pods/debug.poddebug.dev \"dbg\" already exists: it has not started (ImagePullBackOff"
        ) && msg.ends_with("and the kubelet keeps retrying, so it may still start"),
        "{msg}"
    );
    for reason in [
        "ErrImagePull",
        "RegistryUnavailable",
        "CreateContainerConfigError",
    ] {
        assert!(
            e.fake
                .set_ec_state(NS, POD, "dbg", ContainerState::waiting(reason))
        );
        let (code, status) = e.create("dbg", &targeted_shell()).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (StatusCode::CONFLICT, Some("AlreadyExists")),
            "{reason}: {status}"
        );
    }
    let ecs = |e: &common::Env| {
        e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"]
            .as_array()
            .map(Vec::len)
    };
    assert_eq!(ecs(&e), Some(1), "nothing was added");

    // An image name that can never parse: the name is free again.
    assert!(
        e.fake
            .set_ec_state(NS, POD, "dbg", ContainerState::waiting("InvalidImageName"))
    );
    let (code, obj) = e.create("dbg", &targeted_shell()).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_ne!(obj["status"]["ephemeralContainerName"], "dbg");
    assert_eq!(ecs(&e), Some(2));
}

#[tokio::test]
async fn a_stop_cut_short_by_the_request_timeout_answers_in_time_and_keeps_its_record() {
    // The script starts and never reports an end: the stop must answer within the request
    // timeout (12s, so 10s for the stop), not after its configured budgets (25s grace + 10s).
    let e = env(&["--request-timeout=12s"]).await;
    e.create_running("dbg", &targeted_shell()).await;
    e.fake.set_exec_behaviour(ExecBehaviour::Hangs);
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=30"))
        .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["phase"], "Running");
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");
    // The grace period was cut to fit the deadline: half of what is left after the Event's share.
    assert_eq!(obj["status"]["stopRequested"]["gracePeriodSeconds"], 4);
    let script = poddebug_storage::StopInvocation::parse(&e.fake.execs()[0].command)
        .expect("the stop script");
    assert_eq!(script.grace_secs, 4);
    let events = e.wait_events("DebugContainerStopped", 1).await;
    assert_eq!(
        events[0]["message"],
        "User \"alice\" asked to stop debug container \"dbg\" with a grace period of 4s; it had not terminated yet when the request was answered"
    );
}

#[test]
fn the_server_account_holds_no_write_on_pods() {
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/rbac.yaml"
    ))
    .expect("manifests/rbac.yaml");
    let role = rbac
        .split("\n---")
        .find(|doc| doc.contains("\nkind: ClusterRole\nmetadata:\n  name: poddebug-apiserver\n"))
        .expect("the server's ClusterRole");
    let lines: Vec<&str> = role.lines().collect();
    let pods = lines
        .iter()
        .position(|l| l.trim() == r#"resources: ["pods"]"#)
        .expect("a rule on pods");
    let verbs = lines[pods + 1].split('#').next().unwrap_or_default().trim();
    assert_eq!(verbs, r#"verbs: ["get", "list", "watch"]"#);
}

#[tokio::test]
async fn the_clients_shorter_timeout_bounds_the_stop_too() {
    // kubectl --request-timeout=12s sends ?timeout=12s, which kube-apiserver enforces on the
    // proxied request: the stop fits in it although the server's own timeout is longer.
    let e = env(&[]).await;
    e.create_running("dbg", &targeted_shell()).await;
    e.fake.set_exec_behaviour(ExecBehaviour::Hangs);
    let (code, obj) = e
        .delete(&debug_path(
            NS,
            POD,
            Some("dbg"),
            "gracePeriodSeconds=30&timeout=12s",
        ))
        .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["stopRequested"]["gracePeriodSeconds"], 4);
    e.wait_events("DebugContainerStopped", 1).await;
}
