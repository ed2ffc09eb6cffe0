//! Debug containers end to end (issue 4): the real `poddebug-apiserver` binary against the fake
//! kube-apiserver, called through the front-proxy path the way the aggregator calls it, plus a
//! few runs of the real `kubectl` pointed straight at the server.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

mod common;

use std::time::Duration;

use common::{
    ALICE_GROUPS, GV, NS, POD, T, debug_path, ec_of, env, env_with, names, pod_invalid, retold,
};
use http::StatusCode;
use poddebug_tests::pki::Ca;
use poddebug_tests::{ADMIN_TOKEN, ContainerState, ExecBehaviour, PODDEBUG_USER, TempDir};
use serde_json::{Value, json};

const FORBIDDEN_EC: &str = "Forbidden: cannot be set for an Ephemeral Container";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// kubectl's alphabet for generated names.
const ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

fn busybox_shell() -> Value {
    json!({"container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true},
           "targetContainerName": "app"})
}

// ---------- create ----------

#[tokio::test]
async fn create_named_answers_201_with_object_status_and_event() {
    let e = env(&[]).await;
    let (code, obj) = e.create("dbg", &busybox_shell()).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["apiVersion"], "poddebug.dev/v1alpha1");
    assert_eq!(obj["kind"], "PodDebugContainer");
    assert_eq!(obj["metadata"]["name"], "dbg");
    assert_eq!(obj["metadata"]["namespace"], NS);
    assert!(obj["metadata"]["resourceVersion"].is_string(), "{obj}");
    assert_eq!(obj["container"]["image"], "busybox:1.36");
    assert_eq!(obj["container"]["command"], json!(["sh"]));
    assert_eq!(obj["targetContainerName"], "app");
    assert_eq!(obj["status"]["podName"], POD);
    assert_eq!(obj["status"]["ephemeralContainerName"], "dbg");
    assert_eq!(obj["status"]["phase"], "Waiting");

    // The pod got exactly that container, with the default profile (general: SYS_PTRACE).
    let ec = ec_of(&e.fake, POD, "dbg");
    assert_eq!(ec["image"], "busybox:1.36");
    assert_eq!(ec["targetContainerName"], "app");
    assert_eq!(
        ec["command"],
        json!(["sh"]),
        "a targeted container is not wrapped"
    );
    assert_eq!(
        ec["securityContext"]["capabilities"]["add"],
        json!(["SYS_PTRACE"])
    );

    // GET follows the pod's status.
    e.wait_state(POD, "dbg", "running").await;
    let (code, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK, "{got}");
    assert_eq!(got["status"]["phase"], "Running");
    assert!(got["status"]["state"]["running"].is_object(), "{got}");
    assert_eq!(got["status"]["started"], true);

    // Who did it is on the pod's Events.
    let events = e.wait_events("DebugContainerCreated", 1).await;
    let ev = &events[0];
    assert_eq!(
        ev["message"],
        "User \"alice\" created debug container \"dbg\" with image \"busybox:1.36\" and profile \"general\""
    );
    assert_eq!(ev["involvedObject"]["kind"], "Pod");
    assert_eq!(ev["involvedObject"]["name"], POD);
    assert_eq!(
        ev["involvedObject"]["fieldPath"],
        "spec.ephemeralContainers{dbg}"
    );
    assert_eq!(ev["type"], "Normal");

    // A debug name that does not exist is our resource's 404.
    let (code, body) = e.get(&debug_path(NS, POD, Some("nope"), "")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(
        body["message"],
        "pods/debug.poddebug.dev \"nope\" not found"
    );
}

#[tokio::test]
async fn generated_names_and_the_default_image() {
    let e = env(&["--default-image=registry.example/tools:1.0"]).await;
    let mut seen = Vec::new();
    // No name, empty JSON object; no name, no body at all; a name only in container.name.
    for body in [&b"{}"[..], &b""[..]] {
        let (code, obj) = e.post_raw(&debug_path(NS, POD, None, ""), body).await;
        assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
        let name = obj["metadata"]["name"].as_str().expect("name").to_owned();
        let suffix = name.strip_prefix("debugger-").expect("debugger- prefix");
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(suffix.chars().all(|c| ALPHABET.contains(c)), "{name}");
        assert_eq!(obj["container"]["image"], "registry.example/tools:1.0");
        assert_eq!(
            ec_of(&e.fake, POD, &name)["image"],
            "registry.example/tools:1.0"
        );
        seen.push(name);
    }
    assert_ne!(seen[0], seen[1]);

    // An empty image is no image: the default applies too.
    let (code, obj) = e
        .create("empty-image", &json!({"container": {"image": ""}}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(obj["container"]["image"], "registry.example/tools:1.0");

    // container.name alone names the debug container.
    let (code, obj) = e
        .create_as(
            &e.alice,
            POD,
            None,
            "",
            &json!({"container": {"name": "by-container", "image": "busybox"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(obj["metadata"]["name"], "by-container");
    assert!(ec_of(&e.fake, POD, "by-container").is_object());

    // The list of the pod shows all of them.
    let (code, list) = e.get(&debug_path(NS, POD, None, "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(list["kind"], "PodDebugContainerList");
    assert_eq!(names(&list).len(), 4, "{list}");
}

#[tokio::test]
async fn wait_true_answers_once_running_and_504_with_the_reason() {
    let e = env(&[]).await;
    let (code, obj) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "wait=true&timeoutSeconds=5",
            &busybox_shell(),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["phase"], "Running");
    assert!(obj["status"]["state"]["running"]["startedAt"].is_string());

    e.fake.add_bad_image("registry.example/missing:1");
    let started = std::time::Instant::now();
    let (code, status) = e
        .create_as(
            &e.alice,
            POD,
            Some("bad"),
            "wait=true&timeoutSeconds=1",
            &json!({"container": {"image": "registry.example/missing:1"}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::GATEWAY_TIMEOUT, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(status["code"], 504);
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(msg.starts_with("Timeout: "), "{msg}");
    assert!(
        msg.contains("ImagePullBackOff") || msg.contains("ErrImagePull"),
        "{msg}"
    );
    assert!(
        msg.contains("registry.example/missing:1"),
        "the kubelet's message: {msg}"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    // The container was added all the same.
    assert!(ec_of(&e.fake, POD, "bad").is_object());
}

// ---------- invalid requests ----------

/// Every live answer of `live-ephemeral-statuses.md` that can be asked through poddebug, each at
/// the index poddebug appends to (the pod already holds one ephemeral container: index 1).
#[tokio::test]
async fn invalid_containers_get_kube_apiservers_statuses() {
    let e = env(&[]).await;
    // 00-valid-debug, through us.
    e.create_running(
        "debugger",
        &json!({"container": {"image": "busybox", "command": ["sh"], "stdin": true, "tty": true},
                "targetContainerName": "app", "profile": "legacy"}),
    )
    .await;
    let forbidden = |f: &'static str| ("FieldValueForbidden", FORBIDDEN_EC, f);
    let bad_name = format!("Invalid value: \"Bad_Name\": {LABEL_MSG}");
    let bad_name_msg =
        format!("Pod \"target\" is invalid: spec.ephemeralContainers[0].name: {bad_name}");
    let cases: Vec<(&str, &str, Value, Value)> = vec![
        (
            "01-ports",
            "bad-ports",
            json!({"container": {"image": "busybox", "ports": [{"containerPort": 8080}]}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                &[forbidden("spec.ephemeralContainers[0].ports")],
                1,
            ),
        ),
        (
            "02-resources",
            "bad-res",
            json!({"container": {"image": "busybox", "resources": {"limits": {"cpu": "100m"}, "requests": {"memory": "10Mi"}}}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container",
                &[forbidden("spec.ephemeralContainers[0].resources")],
                1,
            ),
        ),
        (
            "03-probes",
            "bad-probe",
            json!({"container": {"image": "busybox",
                "livenessProbe": {"exec": {"command": ["true"]}},
                "readinessProbe": {"exec": {"command": ["true"]}},
                "startupProbe": {"exec": {"command": ["true"]}}}}),
            pod_invalid(
                "Pod \"target\" is invalid: [spec.ephemeralContainers[0].livenessProbe: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].startupProbe: Forbidden: cannot be set for an Ephemeral Container]",
                &[
                    forbidden("spec.ephemeralContainers[0].livenessProbe"),
                    forbidden("spec.ephemeralContainers[0].readinessProbe"),
                    forbidden("spec.ephemeralContainers[0].startupProbe"),
                ],
                1,
            ),
        ),
        (
            "04-lifecycle",
            "bad-lc",
            json!({"container": {"image": "busybox", "lifecycle": {"postStart": {"exec": {"command": ["true"]}}}}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
                &[forbidden("spec.ephemeralContainers[0].lifecycle")],
                1,
            ),
        ),
        (
            "05-dup-name-container",
            "app",
            json!({"container": {"image": "busybox"}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                &[(
                    "FieldValueDuplicate",
                    "Duplicate value: \"app\"",
                    "spec.ephemeralContainers[0].name",
                )],
                1,
            ),
        ),
        (
            "06-bad-target",
            "t2",
            json!({"container": {"image": "busybox"}, "targetContainerName": "nope"}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"",
                &[(
                    "FieldValueNotFound",
                    "Not found: \"nope\"",
                    "spec.ephemeralContainers[0].targetContainerName",
                )],
                1,
            ),
        ),
        (
            "07-bad-name",
            "Bad_Name",
            json!({"container": {"image": "busybox"}}),
            pod_invalid(
                &bad_name_msg,
                &[(
                    "FieldValueInvalid",
                    &bad_name,
                    "spec.ephemeralContainers[0].name",
                )],
                1,
            ),
        ),
        (
            "09-restartPolicy",
            "rp",
            json!({"container": {"image": "busybox", "restartPolicy": "Always"}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].restartPolicy: Forbidden: cannot be set for an Ephemeral Container",
                &[forbidden("spec.ephemeralContainers[0].restartPolicy")],
                1,
            ),
        ),
        (
            "10-subpath",
            "sp",
            json!({"container": {"image": "busybox", "volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "x"}]}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
                &[forbidden(
                    "spec.ephemeralContainers[0].volumeMounts[0].subPath",
                )],
                1,
            ),
        ),
        (
            "11-unknown-volume",
            "uv",
            json!({"container": {"image": "busybox", "volumeMounts": [{"name": "nope", "mountPath": "/d"}]}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].volumeMounts[0].name: Not found: \"nope\"",
                &[(
                    "FieldValueNotFound",
                    "Not found: \"nope\"",
                    "spec.ephemeralContainers[0].volumeMounts[0].name",
                )],
                1,
            ),
        ),
        (
            "12-resizePolicy",
            "rsz",
            json!({"container": {"image": "busybox", "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].resizePolicy: Forbidden: cannot be set for an Ephemeral Container",
                &[forbidden("spec.ephemeralContainers[0].resizePolicy")],
                1,
            ),
        ),
        (
            "17-multi-errors",
            "multi",
            json!({"container": {"image": "busybox", "ports": [{"containerPort": 1}],
                "resources": {"limits": {"cpu": "1"}}, "readinessProbe": {"exec": {"command": ["true"]}}}}),
            pod_invalid(
                "Pod \"target\" is invalid: [spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container]",
                &[
                    forbidden("spec.ephemeralContainers[0].ports"),
                    forbidden("spec.ephemeralContainers[0].resources"),
                    forbidden("spec.ephemeralContainers[0].readinessProbe"),
                ],
                1,
            ),
        ),
        (
            // No image is the default image; an image that is only spaces is kube's own 422.
            "08-no-image (spaces)",
            "noimg",
            json!({"container": {"image": " busybox "}}),
            pod_invalid(
                "Pod \"target\" is invalid: spec.ephemeralContainers[0].image: Invalid value: \" busybox \": must not have leading or trailing whitespace",
                &[(
                    "FieldValueInvalid",
                    "Invalid value: \" busybox \": must not have leading or trailing whitespace",
                    "spec.ephemeralContainers[0].image",
                )],
                1,
            ),
        ),
    ];
    let rv_before = e.fake.pod_json(NS, POD).expect("pod")["metadata"]["resourceVersion"].clone();
    for (id, name, body, want) in cases {
        let (code, got) = e.create(name, &body).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{id}: {got}");
        // The cluster's own causes, told about the debug container.
        assert_eq!(got, retold(&want, name), "{id}");
    }
    // Nothing reached the pod.
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    assert_eq!(pod["metadata"]["resourceVersion"], rv_before);
    assert_eq!(
        pod["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(1)
    );

    // 08-no-image: no image at all is the server's --default-image, never kube's Required.
    let (code, obj) = e
        .create("noimg", &json!({"container": {"stdin": true}}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(ec_of(&e.fake, POD, "noimg")["image"], "busybox:1.36");

    // What kubectl debug always sends, `"resources": {}`, is the zero value: not "set".
    let (code, obj) = e
        .create(
            "kubectl-like",
            &json!({"container": {"image": "busybox", "resources": {}, "terminationMessagePolicy": "File"},
                    "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");

    // 18-missing-pod, verbatim.
    let (code, got) = e
        .create_as(
            &e.alice,
            "nosuchpod",
            Some("x"),
            "",
            &json!({"container": {"image": "busybox"}}),
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(
        got,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods \"nosuchpod\" not found", "reason": "NotFound",
               "details": {"name": "nosuchpod", "kind": "pods"}, "code": 404})
    );
}

#[tokio::test]
async fn strict_decoding_and_body_limits() {
    let e = env(&[]).await;
    let path = debug_path(NS, POD, Some("dbg"), "");
    let bad: &[(&str, &str, &[&str])] = &[
        (
            "unknown fields, everywhere",
            r#"{"container": {"image": "busybox", "imagee": "x", "securityContext": {"privilegd": true}}, "spec": {}}"#,
            &[
                "strict decoding error: unknown field \"container.securityContext.privilegd\", unknown field \"spec\"",
            ],
        ),
        (
            "duplicate key",
            r#"{"container": {"image": "busybox", "image": "alpine"}}"#,
            &["duplicate field \"container.image\""],
        ),
        (
            "wrong kind",
            r#"{"kind": "Pod", "apiVersion": "v1"}"#,
            &["does not match the expected"],
        ),
        (
            "wrong kind only",
            r#"{"kind": "Pod"}"#,
            &["the kind in the data (Pod)"],
        ),
        (
            "wrong apiVersion",
            r#"{"apiVersion": "poddebug.dev/v1"}"#,
            &["the API version in the data (poddebug.dev/v1)"],
        ),
        ("malformed JSON", r#"{"container": "#, &[]),
        ("an array", r#"[]"#, &["expected a JSON object"]),
        ("wrong type", r#"{"container": {"stdin": "yes"}}"#, &[]),
    ];
    for (what, body, needles) in bad {
        let (code, status) = e.post_raw(&path, body.as_bytes().to_vec()).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{what}: {status}");
        assert_eq!(status["kind"], "Status", "{what}");
        assert_eq!(status["reason"], "BadRequest", "{what}");
        assert_eq!(status["code"], 400, "{what}");
        let msg = status["message"].as_str().unwrap_or_default();
        for n in *needles {
            assert!(msg.contains(n), "{what}: {msg:?} lacks {n:?}");
        }
    }

    // A body over 3 MiB is a 413, whatever it holds.
    let big = format!(
        r#"{{"container": {{"image": "busybox", "args": ["{}"]}}}}"#,
        "x".repeat(3 * 1024 * 1024)
    );
    let (code, status) = e.post_raw(&path, big).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE, "{status}");
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(status["code"], 413);

    // A name in the body that is not the URL's: kube-apiserver's 400.
    let (code, status) = e
        .create("dbg", &json!({"metadata": {"name": "other"}}))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(
        status["message"],
        "the name of the object (other) does not match the name on the URL (dbg)"
    );
    // Our own object's checks are our kind's 422.
    let (code, status) = e
        .create(
            "dbg",
            &json!({"container": {"name": "other"}, "profile": "root"}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["details"]["kind"], "PodDebugContainer");
    assert_eq!(status["details"]["group"], "poddebug.dev");
    assert_eq!(
        status["message"],
        "PodDebugContainer.poddebug.dev \"dbg\" is invalid: [container.name: Invalid value: \"other\": must match metadata.name, profile: Unsupported value: \"root\": supported values: \"legacy\", \"general\", \"baseline\", \"restricted\", \"netadmin\", \"sysadmin\"]"
    );

    // A dry run is answered with the would-be object and changes nothing (see
    // validation_cluster.rs); a dryRun value other than All is kube-apiserver's 422.
    let (code, status) = e
        .create_as(&e.alice, POD, Some("dbg"), "dryRun=All", &json!({}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{status}");
    let (code, status) = e
        .create_as(&e.alice, POD, Some("dbg"), "dryRun=true", &json!({}))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["details"]["kind"], "CreateOptions");

    // None of it touched the pod.
    assert!(e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"].is_null());
}

// ---------- conflicts ----------

#[tokio::test]
async fn running_name_is_409_and_concurrent_creates_have_one_winner() {
    let e = env(&[]).await;
    e.create_running("dbg", &busybox_shell()).await;
    let (code, status) = e.create("dbg", &busybox_shell()).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods/debug.poddebug.dev \"dbg\" already exists", "reason": "AlreadyExists",
               "details": {"name": "dbg", "group": "poddebug.dev", "kind": "pods/debug"}, "code": 409})
    );

    // Eight at once with one new name: exactly one wins, the others are told it exists.
    let body = busybox_shell();
    let path = debug_path(NS, POD, Some("race"), "");
    let answers = futures::future::join_all((0..8).map(|_| e.alice.post_json(&path, &body))).await;
    let created = answers
        .iter()
        .filter(|(c, _)| *c == StatusCode::CREATED)
        .count();
    let exists = answers
        .iter()
        .filter(|(c, b)| *c == StatusCode::CONFLICT && b["reason"] == "AlreadyExists")
        .count();
    assert_eq!((created, exists), (1, 7), "{answers:?}\n{}", e.logs());
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    let ecs: Vec<&str> = pod["spec"]["ephemeralContainers"]
        .as_array()
        .expect("ecs")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(ecs, ["dbg", "race"]);
    assert_eq!(e.wait_events("DebugContainerCreated", 2).await.len(), 2);

    // Eight at once with different (generated) names: every one is added, none is lost.
    let path = debug_path(NS, POD, None, "");
    let body = busybox_shell();
    let answers = futures::future::join_all((0..8).map(|_| e.alice.post_json(&path, &body))).await;
    let created: Vec<&str> = answers
        .iter()
        .filter(|(c, _)| *c == StatusCode::CREATED)
        .filter_map(|(_, b)| b["metadata"]["name"].as_str())
        .collect();
    assert_eq!(created.len(), 8, "{answers:?}\n{}", e.logs());
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    let stored = pod["spec"]["ephemeralContainers"].as_array().map(Vec::len);
    assert_eq!(stored, Some(10));
}

#[tokio::test]
async fn a_terminated_name_can_be_reused_and_reads_follow_the_newest() {
    let e = env(&[]).await;
    e.create_running("dbg", &busybox_shell()).await;
    assert!(
        e.fake
            .set_ec_state(NS, POD, "dbg", ContainerState::terminated(0, "Completed"))
    );
    let (code, obj) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox:1.37", "command": ["sh"]}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["metadata"]["name"], "dbg");
    let ec_name = obj["status"]["ephemeralContainerName"]
        .as_str()
        .expect("ec name")
        .to_owned();
    assert_ne!(ec_name, "dbg");
    assert!(
        ec_name.starts_with("dbg-") && ec_name.len() == 9,
        "{ec_name}"
    );
    // The reserved env vars carry the debug name, the profile, the owner, the create's
    // identifier and the default time limit's deadline in the pod, and never show in the
    // object's container (the profile shows as `profile`).
    let ec = ec_of(&e.fake, POD, &ec_name);
    let env = ec["env"].as_array().expect("env");
    assert_eq!(env.len(), 5, "{ec}");
    assert_eq!(env[0], json!({"name": "PODDEBUG_NAME", "value": "dbg"}));
    assert_eq!(
        env[1],
        json!({"name": "PODDEBUG_PROFILE", "value": "general"})
    );
    assert_eq!(env[2], json!({"name": "PODDEBUG_OWNER", "value": "alice"}));
    assert_eq!(env[3]["name"], "PODDEBUG_CREATE_ID");
    let id = env[3]["value"].as_str().unwrap_or_default();
    assert!(
        id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{id}"
    );
    let first_id = ec_of(&e.fake, POD, "dbg")["env"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "PODDEBUG_CREATE_ID"))
        .map(|v| v["value"].clone());
    assert_ne!(first_id, Some(json!(id)), "each create has its own");
    assert_eq!(env[4]["name"], "PODDEBUG_EXPIRES_AT");
    assert_eq!(env[4]["value"], obj["status"]["expiresAt"]);
    assert_eq!(obj["status"]["createdBy"], "alice");
    assert!(obj["container"]["env"].is_null(), "{obj}");
    assert_eq!(obj["profile"], "general");
    e.wait_state(POD, &ec_name, "running").await;

    let (code, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["ephemeralContainerName"], ec_name.as_str());
    assert_eq!(got["container"]["image"], "busybox:1.37");
    assert_eq!(got["status"]["phase"], "Running");
    let (_, list) = e.get(&debug_path(NS, POD, None, "")).await;
    assert_eq!(names(&list), ["dbg"], "one object per debug name");
    // And the newest is running again: 409.
    let (code, _) = e.create("dbg", &busybox_shell()).await;
    assert_eq!(code, StatusCode::CONFLICT);
    let events = e.wait_events("DebugContainerCreated", 2).await;
    assert_eq!(
        events[1]["message"],
        format!(
            "User \"alice\" created debug container \"dbg\" (ephemeral container \"{ec_name}\") with image \"busybox:1.37\" and profile \"general\""
        )
    );

    // Stopping it stops the newest, and only it.
    let (code, obj) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    assert_eq!(obj["status"]["ephemeralContainerName"], ec_name.as_str());
    let execs = e.fake.execs();
    assert_eq!(execs.len(), 1);
    assert_eq!(execs[0].container, ec_name);
    // The record is in the stopped container's own termination message, not on the pod.
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    assert!(pod["metadata"]["annotations"].is_null(), "{pod}");
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");
    let (_, first) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(first["status"]["stopRequested"]["requestedBy"], "alice");
    let events = e.wait_events("DebugContainerStopped", 1).await;
    assert_eq!(
        events[0]["message"],
        format!(
            "User \"alice\" stopped debug container \"dbg\" (ephemeral container \"{ec_name}\") with a grace period of 10s"
        )
    );
}

// ---------- 403s ----------

#[tokio::test]
async fn server_policy_refuses_with_403() {
    let e = env(&[
        "--allowed-images=busybox:*,registry.example/debug/*",
        "--max-debug-containers-per-pod=2",
    ])
    .await;
    let (code, status) = e
        .create("dbg", &json!({"container": {"image": "alpine:3"}}))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods/debug.poddebug.dev \"target\" is forbidden: image \"alpine:3\" is not allowed by the server's --allowed-images policy (allowed patterns: \"busybox:*\", \"registry.example/debug/*\")",
               "reason": "Forbidden",
               "details": {"name": "target", "group": "poddebug.dev", "kind": "pods/debug"}, "code": 403})
    );
    for (name, image) in [("one", "registry.example/debug/tools:1"), ("two", "")] {
        let (code, obj) = e
            .create(name, &json!({"container": {"image": image}}))
            .await;
        assert_eq!(code, StatusCode::CREATED, "{obj}");
    }
    let (code, status) = e.create("three", &json!({})).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "pods/debug.poddebug.dev \"target\" is forbidden: the pod already has 2 ephemeral containers and the server's --max-debug-containers-per-pod policy allows at most 2"
    );
    assert_eq!(
        e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[tokio::test]
async fn profiles_needing_use_are_authorized_and_listed() {
    let e = env(&[]).await;
    e.fake
        .set_policy(|a| !(a.user == "alice" && a.verb == "use" && a.resource == "debugprofiles"));
    let (code, status) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox"}, "profile": "sysadmin"}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "debugprofiles.poddebug.dev \"sysadmin\" is forbidden: User \"alice\" cannot use resource \"debugprofiles\" in API group \"poddebug.dev\" at the cluster scope",
               "reason": "Forbidden",
               "details": {"name": "sysadmin", "group": "poddebug.dev", "kind": "debugprofiles"}, "code": 403})
    );
    let sar = e
        .fake
        .sars()
        .into_iter()
        .find(|s| s.attributes.verb == "use")
        .expect("a use SubjectAccessReview");
    let a = &sar.attributes;
    assert_eq!(
        (
            a.user.as_str(),
            a.api_group.as_str(),
            a.resource.as_str(),
            a.subresource.as_str(),
            a.namespace.as_str(),
            a.name.as_str()
        ),
        ("alice", "poddebug.dev", "debugprofiles", "", "", "sysadmin")
    );
    assert_eq!(a.groups, ALICE_GROUPS);
    assert!(e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"].is_null());

    // A profile that needs no permission asks for none.
    e.fake.clear_sars();
    let (code, _) = e
        .create(
            "gen",
            &json!({"container": {"image": "busybox"}, "profile": "general"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    assert!(e.fake.sars().iter().all(|s| s.attributes.verb != "use"));

    // bob may use it.
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let (code, obj) = e
        .create_as(
            &bob,
            POD,
            Some("root"),
            "",
            &json!({"container": {"image": "busybox"}, "profile": "sysadmin"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(
        ec_of(&e.fake, POD, "root")["securityContext"],
        json!({"privileged": true})
    );

    // What the profiles are, and which need the permission.
    let (code, list) = e.get(&format!("{GV}/debugprofiles")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(list["kind"], "DebugProfileList");
    assert_eq!(
        names(&list),
        [
            "legacy",
            "general",
            "baseline",
            "restricted",
            "netadmin",
            "sysadmin"
        ]
    );
    let (code, p) = e.get(&format!("{GV}/debugprofiles/sysadmin")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        (
            p["kind"].as_str(),
            p["requiresUsePermission"].as_bool(),
            p["default"].as_bool()
        ),
        (Some("DebugProfile"), Some(true), Some(false))
    );
    let (_, p) = e.get(&format!("{GV}/debugprofiles/general")).await;
    assert_eq!(
        (p["requiresUsePermission"].as_bool(), p["default"].as_bool()),
        (Some(false), Some(true))
    );
    let (code, status) = e.get(&format!("{GV}/debugprofiles/root")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(
        status["message"],
        "debugprofiles.poddebug.dev \"root\" not found"
    );
    let (code, table) = e
        .alice
        .request(
            http::Method::GET,
            &format!("{GV}/debugprofiles"),
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            bytes::Bytes::new(),
        )
        .await
        .map(|(c, _, b)| (c, serde_json::from_slice::<Value>(&b).unwrap_or_default()))
        .expect("table");
    assert_eq!(code, StatusCode::OK);
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(6));
}

#[tokio::test]
async fn pod_security_refusal_passes_through_unchanged() {
    let e = env_with(&[], |fake| {
        fake.add_namespace(NS, &[("pod-security.kubernetes.io/enforce", "baseline")]);
    })
    .await;
    let (code, ours) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{ours}\n{}", e.logs());
    // What kube-apiserver itself answers for that container.
    let (kube_code, kube) = e
        .fake
        .client(ADMIN_TOKEN)
        .patch_json(
            &format!("/api/v1/namespaces/{NS}/pods/{POD}/ephemeralcontainers"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox:1.36", "targetContainerName": "app",
                "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}]}}),
        )
        .await;
    assert_eq!(kube_code, StatusCode::FORBIDDEN);
    assert_eq!(ours, kube);
    let msg = ours["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("pods \"target\" is forbidden: violates PodSecurity \"baseline:latest\": "),
        "{msg}"
    );
    assert!(msg.contains("SYS_PTRACE"), "{msg}");

    // The baseline profile passes.
    let (code, obj) = e
        .create("dbg", &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app", "profile": "baseline"}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
}

#[tokio::test]
async fn rbac_denial_of_create_pods_debug() {
    let e = env(&[]).await;
    e.fake.set_policy(|a| {
        !(a.user == "alice" && a.verb == "create" && a.full_resource() == "pods/debug")
    });
    let (code, status) = e.create("dbg", &busybox_shell()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods.poddebug.dev \"target\" is forbidden: User \"alice\" cannot create resource \"pods/debug\" in API group \"poddebug.dev\" in the namespace \"ephdemo\"",
               "reason": "Forbidden",
               "details": {"name": "target", "group": "poddebug.dev", "kind": "pods"}, "code": 403})
    );
    let sar = e
        .fake
        .sars()
        .into_iter()
        .find(|s| s.attributes.verb == "create")
        .expect("SAR");
    let a = &sar.attributes;
    assert_eq!(
        (
            a.api_group.as_str(),
            a.api_version.as_str(),
            a.resource.as_str(),
            a.subresource.as_str(),
            a.namespace.as_str(),
            a.name.as_str()
        ),
        ("poddebug.dev", "v1alpha1", "pods", "debug", NS, POD)
    );
    assert_eq!(sar.caller, PODDEBUG_USER);
    // Reading is still allowed, and nothing was added.
    let (code, list) = e.get(&debug_path(NS, POD, None, "")).await;
    assert_eq!((code, names(&list).len()), (StatusCode::OK, 0));
    assert!(
        e.fake
            .requests()
            .iter()
            .all(|r| !r.path.contains("/ephemeralcontainers"))
    );
}

// ---------- stop ----------

#[tokio::test]
async fn stop_execs_in_the_debug_container_only_and_is_idempotent() {
    let e = env(&[]).await;
    e.create_running("dbg", &busybox_shell()).await;
    // Dry runs are refused, in the query or in DeleteOptions, before anything runs.
    let (code, status) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "dryRun=All"))
        .await;
    assert_eq!(
        (code, status["message"].as_str()),
        (StatusCode::BAD_REQUEST, Some("dryRun is not supported"))
    );
    let (code, _, body) = e
        .alice
        .request(
            http::Method::DELETE,
            &debug_path(NS, POD, Some("dbg"), ""),
            &[("content-type", "application/json")],
            serde_json::to_vec(
                &json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}),
            )
            .expect("json"),
        )
        .await
        .expect("delete");
    assert_eq!(
        code,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert!(e.fake.execs().is_empty());
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=1"))
        .await;
    assert_eq!(code, StatusCode::OK, "{obj}\n{}", e.logs());
    assert_eq!(obj["kind"], "PodDebugContainer");
    assert_eq!(obj["status"]["phase"], "Terminated");
    assert_eq!(obj["status"]["state"]["terminated"]["exitCode"], 143);
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");

    let execs = e.fake.execs();
    assert_eq!(execs.len(), 1, "{execs:?}");
    let x = &execs[0];
    assert_eq!(
        (x.namespace.as_str(), x.pod.as_str(), x.container.as_str()),
        (NS, POD, "dbg")
    );
    let script = poddebug_storage::StopInvocation::parse(&x.command).expect("the stop script");
    assert_eq!(script.grace_secs, 1, "the grace period");
    assert_eq!(script.message_path, "/dev/termination-log");
    assert_eq!(x.user, PODDEBUG_USER);
    assert!(!x.stdin);
    assert_eq!(
        e.fake.container_state(NS, POD, "app"),
        Some("running"),
        "the target is untouched"
    );

    let (code, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["stopRequested"]["requestedBy"], "alice");
    assert!(got["status"]["stopRequested"]["requestedAt"].is_string());
    let events = e.wait_events("DebugContainerStopped", 1).await;
    assert_eq!(
        events[0]["message"],
        "User \"alice\" stopped debug container \"dbg\" with a grace period of 1s"
    );

    // Again: already terminated, nothing runs.
    let (code, again) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK, "{again}");
    assert_eq!(again["status"]["phase"], "Terminated");
    assert_eq!(e.fake.execs().len(), 1);
    assert_eq!(e.events("DebugContainerStopped").len(), 1);

    // A name that does not exist.
    let (code, status) = e.delete(&debug_path(NS, POD, Some("nope"), "")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
}

#[tokio::test]
async fn stop_refusals_touch_nothing() {
    // No default target: a container without one runs as its own PID 1 (allowed only without a
    // time limit).
    let e = env(&["--default-target=none"]).await;
    e.create_running("dbg", &busybox_shell()).await;
    // The main process would be PID 1 of its own namespace, and no command could be wrapped.
    e.create_running(
        "entry",
        &json!({"container": {"image": "busybox:1.36"}, "ttlSeconds": 0}),
    )
    .await;
    e.fake.set_exec_behaviour(ExecBehaviour::NoShell);
    let before = e.fake.pod_json(NS, POD).expect("pod");

    let (code, status) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}\n{}", e.logs());
    assert_eq!(status["reason"], "Conflict");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("Operation cannot be fulfilled on pods/debug.poddebug.dev \"dbg\": the debug container's image has no `sh`"),
        "{msg}"
    );
    assert_eq!(e.fake.execs().len(), 1, "one attempt");
    assert_eq!(e.fake.execs()[0].container, "dbg");

    let (code, status) = e.delete(&debug_path(NS, POD, Some("entry"), "")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(msg.contains("PID 1 of its own PID namespace"), "{msg}");
    assert_eq!(e.fake.execs().len(), 1, "nothing was run in it");

    let after = e.fake.pod_json(NS, POD).expect("pod");
    assert_eq!(after, before, "the pod is untouched");
    assert!(e.events("DebugContainerStopped").is_empty());
    let (_, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert!(got["status"]["stopRequested"].is_null(), "{got}");
    assert_eq!(got["status"]["phase"], "Running");

    e.fake.set_exec_behaviour(ExecBehaviour::Stops);
    // Not started yet: there is no process to stop.
    e.fake.set_kubelet_simulation(false);
    let (code, _) = e.create("late", &busybox_shell()).await;
    assert_eq!(code, StatusCode::CREATED);
    let execs = e.fake.execs().len();
    let (code, status) = e.delete(&debug_path(NS, POD, Some("late"), "")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on pods/debug.poddebug.dev \"late\": the debug container has not started (no status reported yet), so it has no process to stop"
    );
    assert_eq!(e.fake.execs().len(), execs);
}

#[tokio::test]
async fn stop_not_yet_reported_is_202() {
    let e = env(&[]).await;
    e.create_running("dbg", &busybox_shell()).await;
    // The script ran, but the kubelet does not report the container terminated (within the
    // server's status wait).
    e.fake.set_exec_behaviour(ExecBehaviour::Ignores);
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=0"))
        .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{obj}\n{}", e.logs());
    assert_eq!(obj["kind"], "PodDebugContainer");
    assert_eq!(obj["status"]["phase"], "Running");
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");
    assert_eq!(e.fake.execs().len(), 1);
    e.wait_events("DebugContainerStopped", 1).await;
    // Once it has terminated, DELETE is the plain 200.
    assert!(
        e.fake
            .set_ec_state(NS, POD, "dbg", ContainerState::terminated(143, "Error"))
    );
    let (code, obj) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");
    assert_eq!(e.fake.execs().len(), 1);
}

// ---------- list, get, Table, watch ----------

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

async fn get_table(e: &common::Env, path: &str) -> Value {
    let (code, _, body) = e
        .alice
        .request(
            http::Method::GET,
            path,
            &[("accept", TABLE)],
            bytes::Bytes::new(),
        )
        .await
        .expect("request");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("json")
}

#[tokio::test]
async fn lists_gets_and_tables() {
    let e = env_with(&[], |fake| {
        fake.add_simple_pod(NS, "api");
        fake.add_namespace("other", &[]);
        fake.add_simple_pod("other", "web");
        // A container added by kubectl debug, not by us.
        fake.update_pod(NS, "api", |p| {
            p["spec"]["ephemeralContainers"] =
                json!([{"name": "debugger-abcde", "image": "nicolaka/netshoot", "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}]);
        });
    })
    .await;
    e.create_running("dbg", &busybox_shell()).await;
    let (code, obj) = e
        .create_as(&e.alice, "web", Some("w"), "", &json!({}))
        .await;
    assert_eq!(
        code,
        StatusCode::NOT_FOUND,
        "web is in another namespace: {obj}"
    );
    let (code, obj) = e
        .alice
        .post_json(&debug_path("other", "web", Some("w"), ""), &json!({}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");

    let (code, list) = e.get(&debug_path(NS, POD, None, "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(names(&list), ["dbg"]);
    assert!(list["metadata"]["resourceVersion"].is_string());

    let (_, list) = e
        .get(&format!("{GV}/namespaces/{NS}/poddebugcontainers"))
        .await;
    assert_eq!(list["kind"], "PodDebugContainerList");
    let mut got = names(&list);
    got.sort();
    assert_eq!(got, ["api.debugger-abcde", "target.dbg"]);

    let (_, list) = e.get(&format!("{GV}/poddebugcontainers")).await;
    let mut got = names(&list);
    got.sort();
    assert_eq!(got, ["api.debugger-abcde", "target.dbg", "web.w"]);
    let namespaces: Vec<_> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["namespace"].clone())
        .collect();
    assert!(namespaces.contains(&json!("other")));

    let (_, list) = e
        .get(&format!(
            "{GV}/poddebugcontainers?labelSelector=app%3Dtarget"
        ))
        .await;
    assert_eq!(names(&list), ["target.dbg"]);
    let (_, list) = e
        .get(&format!(
            "{GV}/poddebugcontainers?labelSelector=app%20in%20(api,web)"
        ))
        .await;
    let mut got = names(&list);
    got.sort();
    assert_eq!(got, ["api.debugger-abcde", "web.w"]);

    // Field selectors on metadata.name name our objects, not pods (kubectl get pdc NAME -w).
    let by_name = |q: &str| format!("{GV}/poddebugcontainers?fieldSelector={q}");
    let (code, list) = e.get(&by_name("metadata.name%3Dtarget.dbg")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(names(&list), ["target.dbg"]);
    let (_, list) = e.get(&by_name("metadata.name%3D%3Dtarget.nope")).await;
    assert_eq!(names(&list), Vec::<String>::new());
    let (_, list) = e
        .get(&by_name(
            "metadata.name!%3Dtarget.dbg,metadata.namespace%3Dephdemo",
        ))
        .await;
    assert_eq!(names(&list), ["api.debugger-abcde"]);
    let (_, list) = e
        .get(&debug_path(
            NS,
            POD,
            None,
            "fieldSelector=metadata.name%3Ddbg",
        ))
        .await;
    assert_eq!(names(&list), ["dbg"]);

    let (code, one) = e
        .get(&format!(
            "{GV}/namespaces/{NS}/poddebugcontainers/target.dbg"
        ))
        .await;
    assert_eq!(code, StatusCode::OK, "{one}");
    assert_eq!(one["metadata"]["name"], "target.dbg");
    assert_eq!(one["status"]["podName"], POD);
    assert_eq!(one["status"]["phase"], "Running");
    let (code, status) = e
        .get(&format!(
            "{GV}/namespaces/{NS}/poddebugcontainers/target.nope"
        ))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(
        status["message"],
        "poddebugcontainers.poddebug.dev \"target.nope\" not found"
    );
    // The same when the pod is missing, or the name has no pod part.
    for missing in ["nosuchpod.dbg", "nodot"] {
        let (code, status) = e
            .get(&format!(
                "{GV}/namespaces/{NS}/poddebugcontainers/{missing}"
            ))
            .await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": format!("poddebugcontainers.poddebug.dev \"{missing}\" not found"),
                   "reason": "NotFound",
                   "details": {"name": missing, "group": "poddebug.dev", "kind": "poddebugcontainers"},
                   "code": 404})
        );
    }
    // The debug containers of a pod that does not exist: the pod's 404, as for its other
    // subresources.
    let (code, status) = e.get(&debug_path(NS, "nosuchpod", None, "")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(status["message"], "pods \"nosuchpod\" not found");
    let (code, status) = e.get(&debug_path(NS, "nosuchpod", Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(status["message"], "pods \"nosuchpod\" not found");

    // The Table kubectl asks for.
    let table = get_table(&e, &format!("{GV}/namespaces/{NS}/poddebugcontainers")).await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        ["Name", "Pod", "Image", "Target", "State", "Age", "Expires"]
    );
    let rows = table["rows"].as_array().expect("rows");
    let dbg = rows
        .iter()
        .find(|r| r["cells"][0] == "target.dbg")
        .expect("dbg row");
    assert_eq!(dbg["cells"][1], POD);
    assert_eq!(dbg["cells"][2], "busybox:1.36");
    assert_eq!(dbg["cells"][3], "app");
    assert_eq!(dbg["cells"][4], "Running");
    assert_eq!(dbg["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(dbg["object"]["metadata"]["name"], "target.dbg");
    let kubectl_made = rows
        .iter()
        .find(|r| r["cells"][0] == "api.debugger-abcde")
        .expect("row");
    assert_eq!(kubectl_made["cells"][4], "Waiting");
    let table = get_table(&e, &debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(table["rows"][0]["cells"][0], "dbg");
}

#[tokio::test]
async fn watch_streams_added_then_modified_and_resumes() {
    let e = env(&[]).await;
    e.fake.set_bookmark_interval(Duration::from_millis(200));
    let watch_path = format!(
        "{GV}/namespaces/{NS}/poddebugcontainers?watch=true&allowWatchBookmarks=true&timeoutSeconds=30"
    );
    let mut w = e
        .alice
        .stream(
            http::Method::GET,
            &watch_path,
            &[("accept", "application/json")],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(w.status, StatusCode::OK);
    let (code, _) = e.create("dbg", &busybox_shell()).await;
    assert_eq!(code, StatusCode::CREATED);

    // ADDED (waiting), then MODIFIED up to running; bookmarks in between.
    let mut seen = Vec::new();
    let mut added_rv = String::new();
    let mut bookmark = None;
    let deadline = tokio::time::Instant::now() + T;
    while tokio::time::Instant::now() < deadline {
        let Some(ev) = w.next_json(T).await else {
            break;
        };
        match ev["type"].as_str() {
            Some("BOOKMARK") => bookmark = Some(ev),
            Some(ty) => {
                assert_eq!(ev["object"]["metadata"]["name"], "target.dbg", "{ev}");
                if ty == "ADDED" {
                    added_rv = ev["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                }
                let phase = ev["object"]["status"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                seen.push((ty.to_owned(), phase));
            }
            None => panic!("not an event: {ev}"),
        }
        let running = seen.last().is_some_and(|(_, p)| p == "Running");
        if running && bookmark.is_some() {
            break;
        }
    }
    assert_eq!(
        seen.first(),
        Some(&("ADDED".to_owned(), "Waiting".to_owned())),
        "{seen:?}"
    );
    assert!(seen[1..].iter().all(|(t, _)| t == "MODIFIED"), "{seen:?}");
    assert_eq!(
        seen.last().map(|(_, p)| p.as_str()),
        Some("Running"),
        "{seen:?}"
    );
    assert!(!added_rv.is_empty());
    let bookmark = bookmark.expect("a BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "PodDebugContainer");
    assert!(
        bookmark["object"]["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty())
    );

    // Terminated: MODIFIED.
    assert!(
        e.fake
            .set_ec_state(NS, POD, "dbg", ContainerState::terminated(0, "Completed"))
    );
    let ev = loop {
        let ev = w.next_json(T).await.expect("an event");
        if ev["type"] != "BOOKMARK" {
            break ev;
        }
    };
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["status"]["phase"], "Terminated");
    drop(w);

    // Resuming from the ADDED event's resourceVersion replays what came after it.
    let mut w = e
        .alice
        .stream(
            http::Method::GET,
            &format!(
                "{GV}/namespaces/{NS}/poddebugcontainers?watch=true&resourceVersion={added_rv}"
            ),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    let mut phases = Vec::new();
    while let Some(ev) = w.next_json(Duration::from_secs(2)).await {
        assert_ne!(ev["type"], "BOOKMARK", "bookmarks were not asked for");
        assert_eq!(ev["object"]["metadata"]["name"], "target.dbg");
        let phase = ev["object"]["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let done = phase == "Terminated";
        phases.push(format!(
            "{} {phase}",
            ev["type"].as_str().unwrap_or_default()
        ));
        if done {
            break;
        }
    }
    // The client holds the object as of that resourceVersion: every replayed change of it is
    // MODIFIED (the pod cache knows each pod as it was before each change).
    assert!(
        !phases.is_empty() && phases.iter().all(|p| p.starts_with("MODIFIED ")),
        "{phases:?}"
    );
    assert_eq!(
        phases.last().map(String::as_str),
        Some("MODIFIED Terminated"),
        "{phases:?}"
    );
    drop(w);

    // One object by name, from its resourceVersion, as kubectl get pdc NAME -w watches it.
    let (_, one) = e
        .get(&format!(
            "{GV}/namespaces/{NS}/poddebugcontainers/target.dbg"
        ))
        .await;
    let rv = one["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let mut w = e
        .alice
        .stream(
            http::Method::GET,
            &format!(
                "{GV}/namespaces/{NS}/poddebugcontainers?watch=true&fieldSelector=metadata.name%3Dtarget.dbg&resourceVersion={rv}"
            ),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    assert!(
        e.fake
            .update_pod(NS, POD, |p| p["metadata"]["labels"]["touched"] =
                json!("yes"))
            .is_some()
    );
    let ev = w.next_json(T).await.expect("an event for the named object");
    assert_eq!(ev["object"]["metadata"]["name"], "target.dbg", "{ev}");
    assert_eq!(ev["object"]["metadata"]["labels"]["touched"], "yes", "{ev}");
    drop(w);

    // A Table watch, as kubectl get -w asks for it.
    let mut w = e
        .alice
        .stream(
            http::Method::GET,
            &format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=true"),
            &[("accept", TABLE)],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    let ev = w.next_json(T).await.expect("an event");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Table");
    assert_eq!(ev["object"]["rows"][0]["cells"][0], "target.dbg");
    drop(w);

    // A resourceVersion that is gone: one ERROR event with kube's 410 Expired.
    e.fake.compact();
    let mut w = e
        .alice
        .stream(
            http::Method::GET,
            &format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=true&resourceVersion=1"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    let ev = w.next_json(T).await.expect("an event");
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["kind"], "Status");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
}

#[tokio::test]
async fn http2_like_the_aggregator() {
    // The aggregator speaks HTTP/2 to extension servers for everything but upgrades.
    let mut e = env(&[]).await;
    e.alice = e
        .server
        .client_builder()
        .front_proxy(e.fake.pki(), "alice", ALICE_GROUPS, &[])
        .http2()
        .build();
    e.create_running("dbg", &busybox_shell()).await;
    let (code, list) = e
        .get(&format!("{GV}/namespaces/{NS}/poddebugcontainers"))
        .await;
    assert_eq!(
        (code, names(&list)),
        (StatusCode::OK, vec!["target.dbg".to_owned()])
    );
    let mut w = e
        .alice
        .stream(
            http::Method::GET,
            &format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=true"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    let ev = w.next_json(T).await.expect("an event");
    assert_eq!(ev["type"], "ADDED");
    assert!(
        e.fake
            .set_ec_state(NS, POD, "dbg", ContainerState::terminated(1, "Error"))
    );
    let ev = w.next_json(T).await.expect("an event");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["status"]["state"]["terminated"]["exitCode"], 1);
    let (code, obj) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    let (code, status) = e
        .create(
            "dbg",
            &json!({"container": {"ports": [{"containerPort": 1}]}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
}

// ---------- impersonation ----------

#[tokio::test]
async fn impersonation_on_acts_as_the_user() {
    let mut e = env(&["--impersonate"]).await;
    // The whole identity the aggregator forwards: user, groups, uid and extra.
    e.alice = e
        .server
        .client_builder()
        .front_proxy(
            e.fake.pki(),
            "alice",
            ALICE_GROUPS,
            &[(
                "authentication.kubernetes.io/credential-id",
                "X509SHA256=ab",
            )],
        )
        .header("x-remote-uid", "u-1")
        .build();
    e.fake.clear_requests();
    e.create_running("dbg", &busybox_shell()).await;
    let pod_calls: Vec<_> = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| {
            r.path
                .starts_with(&format!("/api/v1/namespaces/{NS}/pods/{POD}"))
        })
        .collect();
    assert!(
        pod_calls
            .iter()
            .any(|r| r.method == "PUT" && r.path.contains("/ephemeralcontainers")),
        "{pod_calls:?}"
    );
    for r in &pod_calls {
        assert_eq!(r.user, "alice", "{r:?}");
        assert_eq!(r.authenticated_as, PODDEBUG_USER);
        assert!(
            r.impersonation
                .contains(&("impersonate-user".to_owned(), "alice".to_owned())),
            "{r:?}"
        );
        for h in [
            ("impersonate-uid", "u-1"),
            (
                "impersonate-extra-authentication.kubernetes.io%2fcredential-id",
                "X509SHA256=ab",
            ),
        ] {
            assert!(
                r.impersonation.contains(&(h.0.to_owned(), h.1.to_owned())),
                "{h:?} in {r:?}"
            );
        }
        for g in ALICE_GROUPS {
            assert!(
                r.impersonation
                    .contains(&("impersonate-group".to_owned(), (*g).to_owned())),
                "{r:?}"
            );
        }
    }
    // Events are the server's own. They are written after the answer: wait (bounded) for one.
    let written = e
        .fake
        .wait_until(T, |f| {
            f.requests().iter().any(|r| r.path.contains("/events"))
        })
        .await;
    assert!(written, "no Event written:\n{}", e.logs());
    let events: Vec<_> = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/events"))
        .collect();
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|r| r.impersonation.is_empty() && r.user == PODDEBUG_USER),
        "{events:?}"
    );

    // The stop exec runs as the user too.
    let (code, _) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(e.fake.execs()[0].user, "alice");

    // kube-apiserver's RBAC judges the user, and its refusal reaches the user unchanged.
    e.fake.set_policy(|a| {
        !(a.user == "alice" && a.api_group.is_empty() && a.is("update", "pods/ephemeralcontainers"))
    });
    let (code, status) = e.create("dbg2", &busybox_shell()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods \"target\" is forbidden: User \"alice\" cannot update resource \"pods/ephemeralcontainers\" in API group \"\" in the namespace \"ephdemo\"",
               "reason": "Forbidden", "details": {"name": "target", "kind": "pods"}, "code": 403})
    );
    e.fake
        .set_policy(|a| !(a.user == "alice" && a.api_group.is_empty() && a.is("list", "pods")));
    let (code, status) = e
        .get(&format!("{GV}/namespaces/{NS}/poddebugcontainers"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"ephdemo\""
    );
}

#[tokio::test]
async fn impersonation_off_calls_as_the_service_account() {
    let e = env(&[]).await;
    e.fake.clear_requests();
    e.create_running("dbg", &busybox_shell()).await;
    let (code, _) = e.get(&format!("{GV}/poddebugcontainers")).await;
    assert_eq!(code, StatusCode::OK);
    let calls: Vec<_> = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/pods"))
        .collect();
    assert!(calls.iter().any(|r| r.method == "PUT"), "{calls:?}");
    for r in &calls {
        assert!(r.impersonation.is_empty(), "{r:?}");
        assert_eq!(r.user, "system:serviceaccount:poddebug-system:poddebug");
    }
}

// ---------- kubectl ----------

struct Kubectl {
    dir: TempDir,
    kubeconfig: std::path::PathBuf,
}

impl Kubectl {
    /// A kubeconfig pointing straight at the server with a client-CA certificate for `user`.
    fn new(e: &common::Env, user: &str, groups: &[&str]) -> Option<Kubectl> {
        use base64::Engine;
        let available = std::process::Command::new("kubectl")
            .arg("version")
            .arg("--client")
            .output()
            .is_ok_and(|o| o.status.success());
        if !available {
            poddebug_tests::capability::missing("kubectl");
            return None;
        }
        let pki = e.fake.pki();
        let cert = pki.client_cert(Ca::Client, user, groups);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let config = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "poddebug", "cluster": {"server": e.server.url(), "certificate-authority-data": b64(pki.cluster_ca_pem())}}],
            "users": [{"name": user, "user": {"client-certificate-data": b64(&cert.cert_pem), "client-key-data": b64(&cert.key_pem)}}],
            "contexts": [{"name": "poddebug", "context": {"cluster": "poddebug", "user": user, "namespace": NS}}],
            "current-context": "poddebug",
        });
        let dir = TempDir::new("kubectl");
        let kubeconfig = dir.path().join("config.json");
        std::fs::write(&kubeconfig, serde_json::to_vec(&config).expect("json"))
            .expect("write kubeconfig");
        Some(Kubectl { dir, kubeconfig })
    }

    fn file(&self, name: &str, content: &Value) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(content).expect("json")).expect("write");
        p.display().to_string()
    }

    /// Runs kubectl (bounded); exit success, stdout, stderr.
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new("kubectl")
                .args(args)
                .env("KUBECONFIG", &self.kubeconfig)
                .env("HOME", self.dir.path())
                .env("KUBECACHEDIR", self.dir.path().join("cache"))
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl finished in time")
        .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[tokio::test]
async fn kubectl_straight_at_the_server() {
    let e = env(&[]).await;
    let Some(k) = Kubectl::new(&e, "alice", &["devs"]) else {
        return;
    };
    let path = debug_path(NS, POD, Some("dbg"), "");

    let body = k.file("dbg.json", &busybox_shell());
    let (ok, out, err) = k.run(&["create", "--raw", &path, "-f", &body]).await;
    assert!(ok, "{out}\n{err}\n{}", e.logs());
    let obj: Value = serde_json::from_str(&out).expect("the created object");
    assert_eq!(obj["metadata"]["name"], "dbg");
    e.wait_state(POD, "dbg", "running").await;
    let events = e.wait_events("DebugContainerCreated", 1).await;
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("User \"alice\""),
        "the certificate's user"
    );

    let (ok, out, err) = k.run(&["get", "--raw", &path]).await;
    assert!(ok, "{err}");
    let obj: Value = serde_json::from_str(&out).expect("object");
    assert_eq!(obj["status"]["phase"], "Running");

    // Discovery, then the Table.
    let (ok, out, err) = k.run(&["get", "poddebugcontainers", "-A"]).await;
    assert!(ok, "{out}\n{err}\n{}", e.logs());
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "NAME",
            "POD",
            "IMAGE",
            "TARGET",
            "STATE",
            "AGE",
            "EXPIRES"
        ],
        "{out}"
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..6],
        [NS, "target.dbg", POD, "busybox:1.36", "app", "Running"],
        "{out}"
    );
    // The server's default time limit (8h), counted down.
    assert!(matches!(row.get(7).copied(), Some("8h" | "7h")), "{out}");
    let (ok, out, err) = k
        .run(&[
            "get",
            "pdc",
            "target.dbg",
            "-o",
            "jsonpath={.status.ephemeralContainerName}",
        ])
        .await;
    assert!(ok, "{err}");
    assert_eq!(out, "dbg");

    // A 422 is printed the way kubectl prints kube-apiserver's own.
    let bad = k.file(
        "bad.json",
        &json!({"container": {"image": "busybox", "ports": [{"containerPort": 80}]}}),
    );
    let (ok, out, err) = k
        .run(&[
            "create",
            "--raw",
            &debug_path(NS, POD, Some("bad"), ""),
            "-f",
            &bad,
        ])
        .await;
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The PodDebugContainer \"bad\" is invalid: container.ports: Forbidden: cannot be set for an Ephemeral Container"
    );
    // And a 409.
    let (ok, _, err) = k.run(&["create", "--raw", &path, "-f", &body]).await;
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "Error from server (AlreadyExists): pods/debug.poddebug.dev \"dbg\" already exists"
    );

    let (ok, out, err) = k.run(&["delete", "--raw", &path]).await;
    assert!(ok, "{out}\n{err}\n{}", e.logs());
    let obj: Value = serde_json::from_str(&out).expect("object");
    assert_eq!(obj["status"]["phase"], "Terminated");
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");

    // get -w of one object: a GET, then a watch by field selector from its resourceVersion,
    // served from the server's pod cache (its request line is logged once the stream starts).
    let watching = async {
        let mut seen = false;
        for _ in 0..100 {
            seen = e
                .server
                .logs()
                .iter()
                .any(|l| l.contains("\"verb\":\"watch\"") && l.contains("poddebugcontainers"));
            if seen {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(seen, "kubectl watches the object\n{}", e.logs());
        let labelled = e
            .fake
            .update_pod(NS, POD, |p| p["metadata"]["labels"]["seen"] = json!("1"));
        assert!(labelled.is_some());
    };
    let ((ok, out, err), ()) = tokio::join!(
        k.run(&["get", "pdc", "target.dbg", "-w", "--request-timeout=3s"]),
        watching
    );
    assert!(ok, "{out}\n{err}");
    let states: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(4))
        .collect();
    assert_eq!(states, ["Terminated:", "Terminated:"], "{out}");
}

#[tokio::test]
async fn bodies_in_another_media_type_get_415_and_change_nothing() {
    let env = common::env(&[]).await;
    let (code, _, body) = env
        .alice
        .request(
            http::Method::POST,
            &common::debug_path(common::NS, common::POD, Some("yaml"), ""),
            &[("content-type", "application/yaml")],
            "container:\n  image: busybox\n",
        )
        .await
        .expect("request");
    assert_eq!(code, http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let status: serde_json::Value = serde_json::from_slice(&body).expect("Status");
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert_eq!(status["kind"], "Status");
    let pod = env.fake.pod(common::NS, common::POD).expect("pod");
    assert!(
        pod.spec
            .and_then(|s| s.ephemeral_containers)
            .is_none_or(|e| e.is_empty())
    );
}

#[tokio::test]
async fn a_cluster_without_ephemeral_containers_answers_its_own_404() {
    let env = common::env(&[]).await;
    env.fake.set_ephemeral_containers_disabled(true);
    let (code, status) = env
        .create(
            "dbg",
            &serde_json::json!({"container": {"image": "busybox"}}),
        )
        .await;
    assert_eq!(code, http::StatusCode::NOT_FOUND, "{status}");
    // kube-apiserver's answer for a missing subresource passes through: reason NotFound and no
    // details.name, which is how kubectl recognises "ephemeral containers are disabled".
    assert_eq!(status["reason"], "NotFound");
    assert!(status["details"].get("name").is_none(), "{status}");
    let pod = env.fake.pod(common::NS, common::POD).expect("pod");
    assert!(
        pod.spec
            .and_then(|s| s.ephemeral_containers)
            .is_none_or(|e| e.is_empty())
    );
}

#[tokio::test]
async fn a_completed_pod_is_refused_before_anything_changes() {
    let env = common::env(&[]).await;
    env.fake.update_pod(common::NS, common::POD, |p| {
        p["status"]["phase"] = serde_json::json!("Succeeded");
    });
    let (code, status) = env
        .create(
            "dbg",
            &serde_json::json!({"container": {"image": "busybox"}}),
        )
        .await;
    assert_eq!(code, http::StatusCode::CONFLICT, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on pods \"target\": the pod has completed (phase Succeeded), so a debug container would never start"
    );
    let pod = env.fake.pod(common::NS, common::POD).expect("pod");
    assert!(
        pod.spec
            .and_then(|s| s.ephemeral_containers)
            .is_none_or(|e| e.is_empty())
    );
}

#[tokio::test]
async fn an_ungated_profile_cannot_smuggle_gated_privileges() {
    let e = env(&[]).await;
    // alice may use legacy and general, not sysadmin or netadmin.
    e.fake.set_policy(|a| {
        !(a.user == "alice"
            && a.verb == "use"
            && a.resource == "debugprofiles"
            && (a.name == "sysadmin" || a.name == "netadmin"))
    });
    let cases = [
        (
            json!({"privileged": true}),
            "sysadmin",
            "securityContext.privileged: true",
        ),
        (
            json!({"capabilities": {"add": ["SYS_ADMIN"]}}),
            "sysadmin",
            "securityContext.capabilities.add: SYS_ADMIN",
        ),
        (
            json!({"capabilities": {"add": ["NET_ADMIN"]}}),
            "netadmin",
            "securityContext.capabilities.add: NET_ADMIN",
        ),
        (
            json!({"seccompProfile": {"type": "Unconfined"}}),
            "sysadmin",
            "securityContext.seccompProfile.type: Unconfined",
        ),
    ];
    for (i, (sc, gated, setting)) in cases.into_iter().enumerate() {
        let body =
            json!({"container": {"image": "busybox", "securityContext": sc}, "profile": "legacy"});
        let (code, status) = e.create(&format!("sneaky{i}"), &body).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
        assert_eq!(
            status["message"],
            format!(
                "debugprofiles.poddebug.dev \"{gated}\" is forbidden: User \"alice\" cannot use resource \"debugprofiles\" in API group \"poddebug.dev\" at the cluster scope: the debug container sets {setting}, which only the {gated} profile grants"
            )
        );
    }
    let pod = e.fake.pod(NS, POD).expect("pod");
    assert!(
        pod.spec
            .and_then(|s| s.ephemeral_containers)
            .is_none_or(|l| l.is_empty()),
        "nothing was added"
    );
    // Settings within the ungated profiles' reach are fine.
    let ok = json!({"container": {"image": "busybox", "securityContext": {"capabilities": {"add": ["SYS_PTRACE", "CHOWN"]}}}, "profile": "legacy"});
    let (code, status) = e.create("fine", &ok).await;
    assert_eq!(code, StatusCode::CREATED, "{status}");
}

#[tokio::test]
async fn streaming_list_watches_end_their_initial_events_with_a_bookmark() {
    let e = env(&[]).await;
    let (code, _) = e.create("dbg", &busybox_shell()).await;
    assert_eq!(code, StatusCode::CREATED);
    // What client-go's WatchList (on by default since 1.35) sends.
    let path = format!(
        "{GV}/namespaces/{NS}/poddebugcontainers?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=1"
    );
    let mut w = e
        .alice
        .stream(http::Method::GET, &path, &[], bytes::Bytes::new())
        .await
        .expect("watch");
    assert_eq!(w.status, StatusCode::OK);
    let first = w.next_json(T).await.expect("an event");
    assert_eq!(first["type"], "ADDED", "{first}");
    assert_eq!(first["object"]["metadata"]["name"], format!("{POD}.dbg"));
    let end = w.next_json(T).await.expect("the end of the initial events");
    assert_eq!(end["type"], "BOOKMARK", "{end}");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(end["object"]["metadata"]["resourceVersion"].is_string());

    // Without the settings kube-apiserver requires, a streaming list is refused (and client-go
    // falls back to a list).
    let bad = format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=true&sendInitialEvents=true");
    let (code, status) = e.get(&bad).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["reason"], "Invalid");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(fields, ["resourceVersionMatch", "allowWatchBookmarks"]);
}
