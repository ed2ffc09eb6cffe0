//! The decoder's bounds, its answers that kube-apiserver v1.36 gives too (asked of the real
//! one with `fieldValidation=Strict`), and its answers on ordinary bodies, which the bounds
//! must not change.

use serde_json::json;

use super::*;
use crate::copy::{KIND_POD_DEBUG_COPY, PodDebugCopy};
use crate::node::{KIND_NODE_DEBUG_CONTAINER, NodeDebugContainer};

const PREFIX: &str =
    r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: "#;

fn refused(body: &[u8]) -> String {
    match decode_create_body(body) {
        Err(ApiError::BadRequest(m)) => m,
        other => panic!(
            "expected BadRequest for {}, got {other:?}",
            String::from_utf8_lossy(body)
        ),
    }
}

/// The causes of a strict decoding error.
fn causes(body: &[u8]) -> Vec<String> {
    let m = refused(body);
    m.strip_prefix(PREFIX)
        .and_then(|m| m.strip_prefix("strict decoding error: "))
        .unwrap_or_else(|| panic!("not a strict decoding error: {m}"))
        .split(", ")
        .map(str::to_owned)
        .collect()
}

fn too_many_values() -> String {
    format!(
        "{PREFIX}the body holds more than {MAX_VALUES} JSON values, the most this server reads \
         from one request"
    )
}

#[test]
fn a_key_repeated_many_times_is_one_problem() {
    // kube-apiserver: `duplicate field "metadata.name"`, once.
    assert_eq!(
        causes(br#"{"metadata": {"name": "a", "name": "b", "name": "c"}}"#),
        [r#"duplicate field "metadata.name""#]
    );
    let body = format!(
        r#"{{"metadata": {{"labels": {{{}}}}}}}"#,
        [r#""a":"""#; 50_000].join(",")
    );
    assert_eq!(
        causes(body.as_bytes()),
        [r#"duplicate field "metadata.labels.a""#]
    );
}

#[test]
fn at_most_100_problems_in_document_order() {
    // kube-apiserver answers 150 unknown fields with the first 100.
    let keys: Vec<String> = (0..150).map(|i| format!(r#""u{i:03}":1"#)).collect();
    let body = format!("{{{}}}", keys.join(","));
    let got = causes(body.as_bytes());
    assert_eq!(got.len(), MAX_STRICT_ERRORS);
    assert_eq!(got[0], r#"unknown field "u000""#);
    assert_eq!(got[99], r#"unknown field "u099""#);
    // Repeats found after the 100th are not reported either.
    let body = format!(
        r#"{{{},"metadata":{{"name":"a","name":"b"}}}}"#,
        keys.join(",")
    );
    assert!(!refused(body.as_bytes()).contains("duplicate"));
}

#[test]
fn an_unknown_field_is_not_looked_into() {
    // kube-apiserver skips a field it does not know: `unknown field "foo"` alone.
    assert_eq!(
        causes(br#"{"foo": {"a": 1, "a": 2, "b": {"c": 1, "c": 1}}}"#),
        [r#"unknown field "foo""#]
    );
    // Nor is a field dropped from a copy's container.
    let copy: PodDebugCopy = decode_create_object(
        br#"{"container": {"image": "busybox", "future": {"a": 1, "a": 2}}}"#,
        KIND_POD_DEBUG_COPY,
    )
    .unwrap();
    assert_eq!(
        copy.container.and_then(|c| c.image).as_deref(),
        Some("busybox")
    );
}

#[test]
fn an_unknown_member_is_unknown_even_when_null() {
    // kube-apiserver: `{"foo": null}` is `unknown field "foo"`; a known member that is `null`
    // is absent.
    assert_eq!(
        causes(br#"{"foo": null, "profile": null}"#),
        [r#"unknown field "foo""#]
    );
    assert_eq!(
        decode_pod_debug_container(br#"{"profile": null, "container": null}"#).unwrap(),
        PodDebugContainer::default()
    );
}

#[test]
fn a_value_of_the_wrong_type_is_the_answer_over_strict_problems() {
    // As kube-apiserver: `json: cannot unmarshal number into Go struct field ...`.
    for body in [
        &br#"{"metadata": {"name": "a", "name": "b"}, "container": 5}"#[..],
        br#"{"container": 5, "metadata": {"name": "a", "name": "b"}, "x": 1}"#,
    ] {
        let m = refused(body);
        assert!(
            m.starts_with(&format!(
                "{PREFIX}invalid type: integer `5`, expected Container"
            )),
            "{m}"
        );
        assert!(!m.contains(" at line "), "{m}");
    }
}

#[test]
fn nesting_stops_at_the_limit() {
    // The root, `container`, then the passed-through value: MAX_DEPTH levels in all.
    let inner = MAX_DEPTH - 2;
    let body = format!(
        r#"{{"container":{{"x":{}{}}}}}"#,
        "[".repeat(inner),
        "]".repeat(inner)
    );
    let b = decode_create_body(body.as_bytes()).unwrap();
    assert_eq!(b.pass_through.paths(), ["container.x"]);
    let body = format!(
        r#"{{"container":{{"x":{}{}}}}}"#,
        "[".repeat(inner + 1),
        "]".repeat(inner + 1)
    );
    let m = refused(body.as_bytes());
    assert!(
        m.starts_with("couldn't get version/kind; json parse error: recursion limit exceeded"),
        "{m}"
    );
    // However deep, the first level too deep ends it, in a field that would be dropped too.
    let body = format!(r#"{{"zz": {}}}"#, "[".repeat(MAX_BODY_BYTES - 16));
    assert!(refused(body.as_bytes()).contains("recursion limit exceeded"));
}

#[test]
fn values_stop_at_the_limit() {
    // The root object, `container` and `args` are three values.
    let args = |n: usize| {
        format!(
            r#"{{"container": {{"args": [{}]}}}}"#,
            vec![r#""""#; n].join(",")
        )
    };
    let b = decode_create_body(args(MAX_VALUES - 3).as_bytes()).unwrap();
    assert_eq!(
        b.object.container.args.map(|a| a.len()),
        Some(MAX_VALUES - 3)
    );
    assert_eq!(refused(args(MAX_VALUES - 2).as_bytes()), too_many_values());
    // Values passed through and values of `status` count; skipped ones do not.
    let zeros = |n: usize| vec!["0"; n].join(",");
    let passed = format!(r#"{{"container": {{"x": [{}]}}}}"#, zeros(MAX_VALUES));
    assert_eq!(refused(passed.as_bytes()), too_many_values());
    let status = format!(r#"{{"status": {{"x": [{}]}}}}"#, zeros(MAX_VALUES));
    assert_eq!(refused(status.as_bytes()), too_many_values());
    let dropped = format!(
        r#"{{"metadata": {{"future": [{}]}}}}"#,
        zeros(MAX_VALUES * 2)
    );
    let _: PodDebugCopy = decode_create_object(dropped.as_bytes(), KIND_POD_DEBUG_COPY).unwrap();
    let repeats = format!(
        r#"{{"metadata": {{"labels": {{"a": "", {}}}}}}}"#,
        vec![r#""a": """#; MAX_VALUES].join(",")
    );
    assert_eq!(
        causes(repeats.as_bytes()),
        [r#"duplicate field "metadata.labels.a""#]
    );
}

#[test]
fn long_keys_are_cut_in_messages() {
    let long = "k".repeat(100_000);
    let body = format!(r#"{{"container": {{"x": {{"{long}": 1, "{long}": 2}}}}}}"#);
    let cut = format!(
        "container.x.{}...",
        "k".repeat(MAX_REPORTED_PATH_BYTES - "container.x.".len())
    );
    assert_eq!(
        causes(body.as_bytes()),
        [format!("duplicate field \"{cut}\"")]
    );
}

#[test]
fn the_repeat_of_a_field_is_not_decoded() {
    // kube-apiserver decodes both and reports `unknown field "metadata.zz"` as well; the
    // answer is the same 400, naming the repeated field.
    assert_eq!(
        causes(br#"{"metadata": {"nmae": "a"}, "metadata": {"name": "b", "zz": 1}}"#),
        [
            r#"unknown field "metadata.nmae""#,
            r#"duplicate field "metadata""#
        ]
    );
}

/// An ordinary body, with every kind of value the types hold.
fn full_body() -> serde_json::Value {
    let env: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            json!({"name": format!("V{i}"), "valueFrom": {"secretKeyRef": {"name": "s", "key": format!("k{i}")}}})
        })
        .collect();
    json!({
        "apiVersion": "poddebug.dev/v1alpha1",
        "kind": "PodDebugContainer",
        "metadata": {
            "name": "dbg",
            "namespace": "shop",
            "labels": {"app": "web", "tier": "debug"},
            "annotations": {"note": "x".repeat(10_000)},
            "managedFields": [{"manager": "kubectl", "operation": "Update",
                               "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]
        },
        "container": {
            "image": "busybox:1.36",
            "command": ["sh", "-c", "sleep 3600"],
            "args": [],
            "env": env,
            "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "P_"}],
            "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}],
            "securityContext": {"capabilities": {"add": ["SYS_PTRACE"], "drop": ["ALL"]},
                                "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
            "stdin": true,
            "tty": true,
            "workingDir": "/"
        },
        "targetContainerName": "app",
        "profile": "general",
        "ttlSeconds": 600
    })
}

#[test]
fn ordinary_bodies_decode_as_serde_decodes_them() {
    let v = full_body();
    let body = serde_json::to_vec(&v).unwrap();
    let want: PodDebugContainer = serde_json::from_value(v).unwrap();
    let b = decode_create_body(&body).unwrap();
    assert_eq!(b.object, want);
    assert!(b.pass_through.is_empty());
    assert_eq!(decode_pod_debug_container(&body).unwrap(), want);

    let copy = json!({
        "apiVersion": "poddebug.dev/v1alpha1",
        "kind": "PodDebugCopy",
        "metadata": {"name": "web-copy", "labels": {"a": "b"}},
        "setImage": {"*": "busybox", "app": "nginx"},
        "shareProcesses": true,
        "replace": {"app": {"command": ["sh"], "args": ["-c", "sleep 1"], "stdin": true}},
        "container": {"name": "debugger", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
        "keepLabels": true,
        "profile": "general",
        "ttlSeconds": 60
    });
    let body = serde_json::to_vec(&copy).unwrap();
    let want: PodDebugCopy = serde_json::from_value(copy).unwrap();
    assert_eq!(
        decode_create_object::<PodDebugCopy>(&body, KIND_POD_DEBUG_COPY).unwrap(),
        want
    );

    let node = json!({
        "metadata": {"name": "dbg"},
        "container": {"image": "busybox", "command": ["chroot", "/host"], "tty": true, "stdin": true},
        "profile": "sysadmin",
        "ttlSeconds": 0
    });
    let body = serde_json::to_vec(&node).unwrap();
    let want: NodeDebugContainer = serde_json::from_value(node).unwrap();
    assert_eq!(
        decode_create_object::<NodeDebugContainer>(&body, KIND_NODE_DEBUG_CONTAINER).unwrap(),
        want
    );
}

#[test]
fn copies_and_node_debug_containers_are_worded_as_kube_apiserver() {
    let copy = |body: &[u8]| {
        decode_create_object::<PodDebugCopy>(body, KIND_POD_DEBUG_COPY).map_err(|e| e.message())
    };
    assert_eq!(
        copy(br#"{"keeplabels": true, "profile": "a", "profile": "b"}"#).unwrap_err(),
        r#"PodDebugCopy in version "v1alpha1" cannot be handled as a PodDebugCopy: strict decoding error: unknown field "keeplabels", duplicate field "profile""#
    );
    assert_eq!(
        copy(br#"{"replace": {"app": {"comand": ["sh"]}}}"#).unwrap_err(),
        r#"PodDebugCopy in version "v1alpha1" cannot be handled as a PodDebugCopy: strict decoding error: unknown field "replace.app.comand""#
    );
    // A struct is an object, not an array (serde would read it as a tuple).
    assert!(
        copy(br#"{"replace": {"app": [["sh"]]}}"#)
            .unwrap_err()
            .contains("invalid type: sequence, expected struct CommandReplacement")
    );
    assert_eq!(
        copy(br#"{"kind": "Pod"}"#).unwrap_err(),
        "the kind in the data (Pod) does not match the expected kind (PodDebugCopy)"
    );
    // Fields the Kubernetes types do not know are dropped, `status` too, nulls are absent.
    let c = copy(
        br#"{"metadata": {"name": "c", "nmae": 1}, "container": {"imag": "x"},
            "status": {"x": 1}, "setImage": null}"#,
    )
    .unwrap();
    assert_eq!(c.metadata.name.as_deref(), Some("c"));
    assert_eq!(c.status, None);
    let node = decode_create_object::<NodeDebugContainer>(
        br#"{"container": {"image": "a", "image": "b"}}"#,
        KIND_NODE_DEBUG_CONTAINER,
    )
    .unwrap_err()
    .message();
    assert_eq!(
        node,
        r#"NodeDebugContainer in version "v1alpha1" cannot be handled as a NodeDebugContainer: strict decoding error: duplicate field "container.image""#
    );
}
