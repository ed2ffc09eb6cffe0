//! Ephemeral containers on the fake: PUT/PATCH protocol (conflicts, media types, preconditions,
//! the disabled subresource), static pods, the kubelet's reaction and Pod Security admission.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::{ADMIN_TOKEN, FakeKube};
use serde_json::{Value, json};

const NS: &str = "ephdemo";
const POD: &str = "target";
const EC_PATH: &str = "/api/v1/namespaces/ephdemo/pods/target/ephemeralcontainers";
const SMP: &str = "application/strategic-merge-patch+json";
const T: Duration = Duration::from_secs(5);

async fn fake_with_pod() -> FakeKube {
    let fake = FakeKube::start().await;
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    fake
}

fn ec(container: Value) -> Value {
    json!({"spec": {"ephemeralContainers": [container]}})
}

// ---------- ephemeral containers: protocol ----------

#[tokio::test]
async fn put_with_a_stale_resource_version_is_a_conflict() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let (_, mut pod) = admin.get_json(EC_PATH).await;
    let stale = pod["metadata"]["resourceVersion"].clone();
    fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"] = json!({"touched": "yes"})
    });
    pod["spec"]["ephemeralContainers"] = json!([{"name": "d1", "image": "busybox"}]);
    let (code, body) = admin.put_json(EC_PATH, &pod).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Operation cannot be fulfilled on pods \"target\": the object has been modified; please apply your changes to the latest version and try again",
            "reason": "Conflict", "details": {"name": "target", "kind": "pods"}, "code": 409})
    );
    assert_eq!(pod["metadata"]["resourceVersion"], stale);

    // Without a resourceVersion the PUT is unconditional; only the ephemeral containers are taken.
    pod["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("resourceVersion");
    pod["metadata"]["labels"] = json!({"ignored": "true"});
    pod["spec"]["containers"][0]["image"] = json!("ignored");
    let (code, stored) = admin.put_json(EC_PATH, &pod).await;
    assert_eq!(code, StatusCode::OK, "{stored}");
    assert_eq!(stored["spec"]["ephemeralContainers"][0]["name"], "d1");
    assert_eq!(
        stored["spec"]["ephemeralContainers"][0]["imagePullPolicy"], "Always",
        "defaults applied"
    );
    assert_eq!(stored["spec"]["containers"][0]["image"], "busybox");
    assert_eq!(stored["metadata"]["labels"], json!({"app": "target"}));

    // A JSON merge patch that names a stale resourceVersion is a precondition too.
    let (code, _) = admin
        .patch_json(
            EC_PATH,
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": stale}, "spec": {}}),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
}

/// What an unconditional PUT (no resourceVersion, as poddebug sends it) meets on v1.36.2, as
/// observed live: a uid that is not the pod's is a precondition (409), and a list that lacks a
/// container the pod has is refused on the list itself (422), with nothing stored.
#[tokio::test]
async fn an_unconditional_put_keeps_the_uid_and_the_existing_containers() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let (_, mut pod) = admin.get_json(EC_PATH).await;
    pod["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("resourceVersion");
    pod["spec"]["ephemeralContainers"] = json!([{"name": "d1", "image": "busybox"}]);
    let uid = pod["metadata"]["uid"].as_str().expect("uid").to_owned();

    let mut other = pod.clone();
    other["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let (code, body) = admin.put_json(EC_PATH, &other).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("Operation cannot be fulfilled on pods \"target\": StorageError: invalid object, Code: 4, Key: /pods/ephdemo/target, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}"),
            "reason": "Conflict", "details": {"name": "target", "kind": "pods"}, "code": 409})
    );

    let (code, stored) = admin.put_json(EC_PATH, &pod).await;
    assert_eq!(code, StatusCode::OK, "{stored}");
    // A list read before d1 was added, with another container.
    pod["spec"]["ephemeralContainers"] = json!([{"name": "d2", "image": "busybox"}]);
    let (code, body) = admin.put_json(EC_PATH, &pod).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "message": "Forbidden: existing ephemeral containers \"d1\" may not be removed\n", "field": "spec.ephemeralContainers"}])
    );
    let (_, now) = admin.get_json(EC_PATH).await;
    assert_eq!(
        now["spec"]["ephemeralContainers"]
            .as_array()
            .map(|a| a.iter().map(|e| e["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("d1")])
    );
}

#[tokio::test]
async fn unsupported_patch_type_disabled_subresource_and_missing_pod() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let (code, body) = admin
        .patch_json(
            EC_PATH,
            "application/json",
            &ec(json!({"name": "x", "image": "busybox"})),
        )
        .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml",
            "reason": "UnsupportedMediaType", "code": 415})
    );
    let (code, body) = admin
        .get_json("/api/v1/namespaces/ephdemo/pods/nope/ephemeralcontainers")
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(body["details"], json!({"name": "nope", "kind": "pods"}));

    fake.set_ephemeral_containers_disabled(true);
    let (code, body) = admin
        .patch_json(EC_PATH, SMP, &ec(json!({"name": "x", "image": "busybox"})))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource", "reason": "NotFound", "details": {}, "code": 404})
    );
}

#[tokio::test]
async fn json_patch_errors_and_uid_preconditions() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let jp = "application/json-patch+json";
    let (code, body) = admin
        .patch_json(
            EC_PATH,
            jp,
            &json!([{"op": "remove", "path": "/spec/nothing"}]),
        )
        .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid"))
    );
    assert_eq!(
        body["message"],
        "the server rejected our request due to an error in our request"
    );
    let (code, _) = admin
        .patch_json(EC_PATH, jp, &json!({"not": "a patch"}))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    let (code, body) = admin
        .patch_json(EC_PATH, SMP, &json!({"metadata": {"uid": "other"}}))
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("Precondition failed: UID in precondition: other"),
        "{body}"
    );
}

#[tokio::test]
async fn static_pods_refuse_ephemeral_containers() {
    let fake = FakeKube::start().await;
    fake.add_pod_json(json!({"metadata": {"name": "kube-apiserver-node", "namespace": "kube-system",
        "annotations": {"kubernetes.io/config.mirror": "abc"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}));
    let (code, body) = fake
        .client(ADMIN_TOKEN)
        .patch_json(
            "/api/v1/namespaces/kube-system/pods/kube-apiserver-node/ephemeralcontainers",
            SMP,
            &ec(json!({"name": "Bad_Name"})),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["message"],
        "Pod \"kube-apiserver-node\" is invalid: []: Forbidden: static pods do not support ephemeral containers"
    );
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "message": "Forbidden: static pods do not support ephemeral containers", "field": "[]"}])
    );
}

// ---------- ephemeral containers: the kubelet's part and Pod Security ----------

#[tokio::test]
async fn new_ephemeral_containers_start_or_fail_to_pull() {
    let fake = fake_with_pod().await;
    fake.set_start_delay(Duration::from_millis(200));
    fake.add_bad_image("nope:latest");
    let admin = fake.client(ADMIN_TOKEN);
    let rv = fake.resource_version();
    let (code, pod) = admin
        .patch_json(
            EC_PATH,
            SMP,
            &ec(json!({"name": "dbg", "image": "busybox"})),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        pod["status"]["ephemeralContainerStatuses"].is_null(),
        "the kubelet reacts after the update"
    );
    let mut w = admin.stream(Method::GET, &format!("/api/v1/namespaces/ephdemo/pods?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dtarget"), &[], Bytes::new()).await.expect("watch");
    let mut states = Vec::new();
    while states.len() < 3 {
        let e = w.next_json(T).await.expect("event");
        let s = &e["object"]["status"]["ephemeralContainerStatuses"][0]["state"];
        states.push(
            s.as_object()
                .and_then(|m| m.keys().next().cloned())
                .unwrap_or_default(),
        );
        if let Some(reason) = s["waiting"]["reason"].as_str() {
            assert_eq!(reason, "ContainerCreating");
        }
    }
    assert_eq!(states, ["", "waiting", "running"]);

    let (code, _) = admin
        .patch_json(
            EC_PATH,
            SMP,
            &ec(json!({"name": "bad", "image": "nope:latest"})),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        fake.wait_until(T, |f| f.pod_json(NS, POD).is_some_and(|p| {
            p["status"]["ephemeralContainerStatuses"]
                .as_array()
                .and_then(|a| a.iter().find(|s| s["name"] == "bad"))
                .is_some_and(|s| s["state"]["waiting"]["reason"] == "ImagePullBackOff")
        }))
        .await
    );
    let pod = fake.pod_json(NS, POD).expect("pod");
    let bad = pod["status"]["ephemeralContainerStatuses"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "bad"))
        .cloned()
        .expect("status");
    assert_eq!(
        bad["state"]["waiting"]["message"],
        "Back-off pulling image \"nope:latest\""
    );
}

#[tokio::test]
async fn pod_security_enforce_levels() {
    let fake = FakeKube::start().await;
    fake.add_namespace(
        "base",
        &[("pod-security.kubernetes.io/enforce", "baseline")],
    );
    fake.add_namespace(
        "strict",
        &[("pod-security.kubernetes.io/enforce", "restricted")],
    );
    fake.add_namespace(
        "open",
        &[("pod-security.kubernetes.io/enforce", "privileged")],
    );
    let restricted_app = json!({"name": "app", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
    for ns in ["base", "strict", "open"] {
        fake.add_pod_json(json!({"metadata": {"name": "p", "namespace": ns}, "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [restricted_app]}}));
    }
    let admin = fake.client(ADMIN_TOKEN);
    let path = |ns: &str| format!("/api/v1/namespaces/{ns}/pods/p/ephemeralcontainers");
    let ptrace = ec(
        json!({"name": "dbg", "image": "busybox", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}),
    );

    let (code, body) = admin.patch_json(&path("base"), SMP, &ptrace).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities (container \"dbg\" must not include \"SYS_PTRACE\" in securityContext.capabilities.add)",
            "reason": "Forbidden", "details": {"name": "p", "kind": "pods"}, "code": 403})
    );
    let (code, body) = admin.patch_json(&path("base"), SMP, &ec(json!({"name": "priv", "image": "busybox", "securityContext": {"privileged": true}}))).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"priv\" must not set securityContext.privileged=true)"
    );
    let (code, _) = admin
        .patch_json(
            &path("base"),
            SMP,
            &ec(json!({"name": "plain", "image": "busybox"})),
        )
        .await;
    assert_eq!(code, StatusCode::OK);

    let (code, body) = admin
        .patch_json(
            &path("strict"),
            SMP,
            &ec(json!({"name": "plain", "image": "busybox"})),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"plain\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"plain\" must set securityContext.capabilities.drop=[\"ALL\"])"
    );
    let (code, _) = admin
        .patch_json(&path("strict"), SMP, &ec(json!({"name": "ok", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}})))
        .await;
    assert_eq!(code, StatusCode::OK);

    let (code, _) = admin.patch_json(&path("open"), SMP, &ptrace).await;
    assert_eq!(code, StatusCode::OK);
}
