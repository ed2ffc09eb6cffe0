//! The cluster decides validation: the real `poddebug-apiserver` against the fake
//! kube-apiserver, which answers `dryRun=All` updates of `pods/ephemeralcontainers` as
//! kube-apiserver does (validation and Pod Security admission, nothing stored).
//!
//! * a body the local validator refuses is confirmed by a server-side dry run, and the
//!   cluster's causes (all of them) are answered on the `PodDebugContainer`'s fields;
//! * what the cluster accepts and the local rules refuse is created (and counted);
//! * a valid body makes no dry run;
//! * the order is 400, then 422, then 403 (image, profile, per-pod limit), then the create;
//! * `?dryRun=All` creates nothing and answers the would-be object;
//! * unknown container fields reach kube-apiserver, and those of existing ephemeral containers
//!   are sent back as stored.

// Shared with debug_containers.rs, which uses the rest of it.
#[allow(dead_code)]
mod common;

use bytes::Bytes;
use common::{NS, POD, env, env_with};
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// The updates of `pods/ephemeralcontainers` the server sent, as `(method, path with query)`.
fn ec_updates(e: &common::Env) -> Vec<(String, String)> {
    e.fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/ephemeralcontainers") && r.method != "GET")
        .map(|r| (r.method, r.path))
        .collect()
}

fn is_dry_run(path: &str) -> bool {
    path.contains("dryRun=All")
}

/// The resourceVersion of `pod` and its ephemeral containers' names.
fn state_of(e: &common::Env, pod: &str) -> (Value, Vec<String>) {
    let pod = e.fake.pod_json(NS, pod).expect("pod");
    let names = pod["spec"]["ephemeralContainers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (pod["metadata"]["resourceVersion"].clone(), names)
}

/// [`state_of`] the test pod.
fn pod_state(e: &common::Env) -> (Value, Vec<String>) {
    state_of(e, POD)
}

/// The server's `/metrics` text.
async fn metrics(e: &common::Env) -> String {
    let (code, _, body) = e
        .alice
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .expect("metrics");
    assert_eq!(code, StatusCode::OK);
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test]
async fn a_local_refusal_is_answered_with_all_of_the_clusters_causes() {
    let e = env(&[]).await;
    e.fake.clear_requests();
    let before = pod_state(&e);
    // kube-apiserver validates the whole resources block although the field is forbidden.
    let (code, got) = e
        .create(
            "res",
            &json!({"container": {"image": "busybox",
                "resources": {"limits": {"cpu": "100m"}, "requests": {"cpu": "200m"}}},
                "targetContainerName": "nope"}),
        )
        .await;
    assert_eq!(
        code,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{got}\n{}",
        e.logs()
    );
    assert_eq!(
        got,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "PodDebugContainer.poddebug.dev \"res\" is invalid: [container.resources.requests: Invalid value: \"200m\": must be less than or equal to cpu limit of 100m, targetContainerName: Not found: \"nope\", container.resources: Forbidden: cannot be set for an Ephemeral Container]",
            "reason": "Invalid",
            "details": {"name": "res", "group": "poddebug.dev", "kind": "PodDebugContainer", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value: \"200m\": must be less than or equal to cpu limit of 100m", "field": "container.resources.requests"},
                {"reason": "FieldValueNotFound", "message": "Not found: \"nope\"", "field": "targetContainerName"},
                {"reason": "FieldValueForbidden", "message": "Forbidden: cannot be set for an Ephemeral Container", "field": "container.resources"}
            ]},
            "code": 422,
        })
    );
    // Nothing else refused, so the update itself was the cluster's decision (the local
    // validator ran beside it): one update, refused, nothing changed.
    let updates = ec_updates(&e);
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert!(!is_dry_run(&updates[0].1), "{updates:?}");
    assert_eq!(pod_state(&e), before);
}

#[tokio::test]
async fn a_valid_body_is_created_without_a_dry_run() {
    let e = env(&[]).await;
    e.fake.clear_requests();
    let (code, obj) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    let updates = ec_updates(&e);
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert!(!is_dry_run(&updates[0].1), "{updates:?}");
    // Read the pod, update it: the same two calls a client makes itself (plus the Event).
    let pod_calls = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains(&format!("/pods/{POD}")))
        .count();
    assert_eq!(pod_calls, 2);
}

#[tokio::test]
async fn what_the_cluster_accepts_is_created_and_counted() {
    // A cluster that reports 1.32 but drops lifecycle.stopSignal as 1.36 does: by the rules of
    // 1.32 the empty lifecycle left is forbidden, the cluster accepts it.
    let e = env_with(&[], |fake| fake.set_reported_minor_version(32)).await;
    e.fake.clear_requests();
    let body =
        json!({"container": {"image": "busybox:1.36", "lifecycle": {"stopSignal": "SIGUSR1"}}});
    let (code, obj) = e.create("sig", &body).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    // Every other check passed, so the update itself was the cluster's decision: no dry run.
    let updates = ec_updates(&e);
    assert_eq!(updates.len(), 1, "the update alone: {updates:?}");
    assert!(!is_dry_run(&updates[0].1));
    assert_eq!(pod_state(&e).1, ["sig"]);
    let text = metrics(&e).await;
    assert!(
        text.contains(
            "poddebug_apiserver_validation_disagreements_total{outcome=\"cluster_accepted\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn stop_signal_alone_is_accepted_on_1_36_and_refused_with_the_gate_on() {
    let e = env(&[]).await;
    e.fake.clear_requests();
    let body =
        json!({"container": {"image": "busybox:1.36", "lifecycle": {"stopSignal": "SIGUSR1"}}});
    let (code, obj) = e.create("sig", &body).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    // The local rules of 1.36 already drop it: no dry run.
    assert!(ec_updates(&e).iter().all(|(_, p)| !is_dry_run(p)));
    let ec = &e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"][0];
    assert!(ec.get("lifecycle").is_none(), "{ec}");

    // With ContainerStopSignals on, the cluster keeps the field and refuses: its 422, retold.
    e.fake.set_stop_signals_gate(true);
    let (code, got) = e.create("sig2", &body).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{got}");
    assert_eq!(
        got["message"],
        "PodDebugContainer.poddebug.dev \"sig2\" is invalid: container.lifecycle: Forbidden: cannot be set for an Ephemeral Container"
    );
    let text = metrics(&e).await;
    assert!(
        text.contains(
            "poddebug_apiserver_validation_disagreements_total{outcome=\"cluster_rejected\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn validation_422_comes_before_every_policy_403() {
    let e = env(&[
        "--allowed-images=busybox:*",
        "--max-debug-containers-per-pod=1",
    ])
    .await;
    e.create_running("first", &json!({"container": {"image": "busybox:1.36"}}))
        .await;
    e.fake
        .set_policy(|a| !(a.user == "alice" && a.verb == "use" && a.resource == "debugprofiles"));
    let invalid = |image: &str, profile: &str| json!({"container": {"image": image, "ports": [{"containerPort": 80}]}, "profile": profile});
    // Image refused, profile not permitted, limit reached, and invalid: the 422.
    for (image, profile) in [
        ("alpine:3", "general"),
        ("busybox:1.36", "sysadmin"),
        ("alpine:3", "sysadmin"),
    ] {
        let (code, got) = e.create("dbg", &invalid(image, profile)).await;
        assert_eq!(
            code,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{image} {profile}: {got}"
        );
        assert_eq!(got["details"]["causes"][0]["field"], "container.ports");
    }
    // Valid: then the 403s, image first, then the profile, then the limit.
    let valid =
        |image: &str, profile: &str| json!({"container": {"image": image}, "profile": profile});
    let (code, got) = e.create("dbg", &valid("alpine:3", "sysadmin")).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}");
    assert!(
        got["message"]
            .as_str()
            .unwrap_or_default()
            .contains("--allowed-images"),
        "{got}"
    );
    let (code, got) = e.create("dbg", &valid("busybox:1.36", "sysadmin")).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}");
    assert!(
        got["message"]
            .as_str()
            .unwrap_or_default()
            .contains("--max-debug-containers-per-pod"),
        "{got}"
    );
    assert_eq!(pod_state(&e).1, ["first"]);
}

#[tokio::test]
async fn the_profile_403_comes_after_validation_and_before_the_create() {
    let e = env(&[]).await;
    e.fake
        .set_policy(|a| !(a.user == "alice" && a.verb == "use" && a.resource == "debugprofiles"));
    let (code, got) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox", "ports": [{"containerPort": 80}]}, "profile": "sysadmin"}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{got}");
    let (code, got) = e
        .create(
            "dbg",
            &json!({"container": {"image": "busybox"}, "profile": "sysadmin"}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}");
    assert_eq!(got["details"]["kind"], "debugprofiles");
    assert!(pod_state(&e).1.is_empty());
}

#[tokio::test]
async fn a_dry_run_create_checks_everything_and_changes_nothing() {
    let e = env_with(&["--allowed-images=busybox:*"], |fake| {
        fake.add_namespace(NS, &[("pod-security.kubernetes.io/enforce", "baseline")]);
    })
    .await;
    e.fake.clear_requests();
    let before = pod_state(&e);
    let events_before = e.fake.events().len();

    // Allowed: 201 and the would-be object.
    let (code, obj) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "dryRun=All",
            &json!({"container": {"image": "busybox:1.36"}, "targetContainerName": "app", "profile": "baseline"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    assert_eq!(obj["kind"], "PodDebugContainer");
    assert_eq!(obj["metadata"]["name"], "dbg");
    assert_eq!(obj["container"]["image"], "busybox:1.36");
    assert_eq!(obj["targetContainerName"], "app");
    assert_eq!(obj["status"]["phase"], "Waiting");
    let updates = ec_updates(&e);
    assert_eq!(updates.len(), 1);
    assert!(is_dry_run(&updates[0].1), "{updates:?}");

    // Invalid: the cluster's 422.
    let (code, got) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "dryRun=All",
            &json!({"container": {"image": "busybox:1.36", "ports": [{"containerPort": 1}]}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{got}");
    assert_eq!(got["details"]["causes"][0]["field"], "container.ports");

    // Against the server policy: its 403.
    let (code, got) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "dryRun=All",
            &json!({"container": {"image": "alpine:3"}}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}");

    // Against Pod Security: the cluster's own 403, as it words it.
    let (code, got) = e
        .create_as(&e.alice, POD, Some("dbg"), "dryRun=All",
            &json!({"container": {"image": "busybox:1.36"}, "profile": "general", "targetContainerName": "app"}))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}");
    assert!(
        got["message"].as_str().unwrap_or_default().starts_with(
            "pods \"target\" is forbidden: violates PodSecurity \"baseline:latest\": "
        ),
        "{got}"
    );

    // Nothing happened to the pod, no Event was recorded.
    assert_eq!(pod_state(&e), before);
    assert_eq!(e.fake.events().len(), events_before);
    assert!(ec_updates(&e).iter().all(|(_, p)| is_dry_run(p)));
}

#[tokio::test]
async fn dry_run_values_other_than_all_are_kube_apiservers_422() {
    let e = env(&[]).await;
    for query in ["dryRun=true", "dryRun=", "dryRun=Server&dryRun=All"] {
        let (code, got) = e
            .create_as(&e.alice, POD, Some("dbg"), query, &json!({}))
            .await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {got}");
        assert_eq!(got["reason"], "Invalid");
        assert_eq!(got["details"]["group"], "meta.k8s.io");
        assert_eq!(got["details"]["kind"], "CreateOptions");
        assert_eq!(got["details"]["causes"][0]["field"], "dryRun");
    }
    let (_, got) = e
        .create_as(&e.alice, POD, Some("dbg"), "dryRun=true", &json!({}))
        .await;
    assert_eq!(
        got["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"true\"}: supported values: \"All\""
    );
    // The server keeps the first value of a repeated parameter (see filters.rs): this is a dry
    // run, which creates nothing.
    let (code, got) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "dryRun=All&dryRun=Server",
            &json!({}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{got}");
    // The fake answers its own dry-run refusals the same way.
    let (code, kube) = e
        .fake
        .client(poddebug_tests::ADMIN_TOKEN)
        .patch_json(
            &format!("/api/v1/namespaces/{NS}/pods/{POD}/ephemeralcontainers?dryRun=true"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"ephemeralContainers": [{"name": "x", "image": "busybox"}]}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        kube["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"true\"}: supported values: \"All\""
    );
    assert!(pod_state(&e).1.is_empty());
}

#[tokio::test]
async fn unknown_container_fields_reach_the_cluster() {
    let e = env(&[]).await;
    let (code, obj) = e
        .create(
            "new",
            &json!({"container": {"image": "busybox:1.36", "fieldOfAFutureRelease": {"on": true}}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    let ec = &e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"][0];
    assert_eq!(ec["fieldOfAFutureRelease"], json!({"on": true}), "{ec}");
    // poddebug's own fields stay strict.
    let (code, got) = e
        .create(
            "new2",
            &json!({"container": {"image": "busybox"}, "profil": "general"}),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{got}");
}

/// The next create reads the pod as raw JSON and sends every existing ephemeral container back
/// as stored, fields poddebug's types do not know included (dropping one is "existing
/// ephemeral containers may not be changed" on a real cluster).
#[tokio::test]
async fn an_existing_containers_unknown_fields_survive_the_next_create() {
    let e = env(&[]).await;
    let future =
        json!({"container": {"image": "busybox:1.36", "fieldOfAFutureRelease": {"on": true}}});
    let (code, obj) = e.create("first", &future).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    let (code, obj) = e
        .create("second", &json!({"container": {"image": "busybox:1.36"}}))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", e.logs());
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    let ecs = &pod["spec"]["ephemeralContainers"];
    assert_eq!(ecs[0]["name"], "first", "{ecs}");
    assert_eq!(
        ecs[0]["fieldOfAFutureRelease"],
        json!({"on": true}),
        "{ecs}"
    );
    assert_eq!(ecs[1]["name"], "second", "{ecs}");
    // One applied update per create; an update that met a newer pod (the kubelet's status
    // write racing the create) is a 409 and is retried.
    let updates: Vec<(String, u16)> = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/ephemeralcontainers") && r.method != "GET")
        .map(|r| (r.path, r.status))
        .collect();
    let applied = updates.iter().filter(|(_, code)| *code == 200).count();
    assert_eq!(applied, 2, "one applied update per create: {updates:?}");
    assert!(
        updates.iter().all(|(_, code)| matches!(code, 200 | 409)),
        "{updates:?}"
    );
}

/// The create benchmark (`create-bench`) runs against the fake, through poddebug directly: it
/// makes its creates on both paths, round by round across the pods listed, and prints p50/p99
/// side by side. (Its figures on the fake mean nothing; the real-cluster run is described in
/// docs/benchmarks.md.)
#[tokio::test]
async fn the_create_benchmark_runs_against_the_fake() {
    const SECOND: &str = "second";
    let e = env_with(&["--max-debug-containers-per-pod=0"], |fake| {
        fake.add_simple_pod(NS, SECOND);
    })
    .await;
    let dir = poddebug_tests::TempDir::new("create-bench");
    let kube = e.fake.write_kubeconfig(poddebug_tests::ADMIN_TOKEN);
    let direct = e
        .server
        .write_kubeconfig(dir.path(), "alice", common::ALICE_GROUPS, NS);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_create-bench"))
        .args([
            "--kubeconfig",
            &kube.display().to_string(),
            "--poddebug-kubeconfig",
            &direct.display().to_string(),
            "--namespace",
            NS,
            "--pod",
            &format!("{POD},{SECOND}"),
            "--count",
            "3",
            "--image",
            "busybox:1.36",
        ])
        .output()
        .await
        .expect("create-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        e.logs()
    );
    assert!(
        stdout.contains("creates per path: 3 on 2 pod(s)"),
        "{stdout}"
    );
    for row in [
        "poddebug create",
        "direct ephemeralcontainers patch",
        "ratio",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(row)),
            "{row} missing: {stdout}"
        );
    }
    // Rounds 0 and 2 on the first pod, round 1 on the second; each round adds one container
    // by each path.
    let (first, second) = (state_of(&e, POD).1, state_of(&e, SECOND).1);
    assert_eq!(first.len(), 4, "{first:?}");
    assert_eq!(first.iter().filter(|n| n.contains("-p")).count(), 2);
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(second.iter().any(|n| n.ends_with("-p1")), "{second:?}");
    assert!(second.iter().any(|n| n.ends_with("-d1")), "{second:?}");
}

/// Local rules refuse, the cluster's validation passes, its Pod Security admission refuses:
/// the caller gets the cluster's own 403 (after the server policy), and it is counted.
#[tokio::test]
async fn an_admission_refusal_after_a_local_refusal_is_the_clusters_403() {
    let e = env_with(&[], |fake| {
        fake.set_reported_minor_version(32);
        fake.add_namespace(NS, &[("pod-security.kubernetes.io/enforce", "baseline")]);
    })
    .await;
    // By the rules of 1.32 the lifecycle left is forbidden; this cluster drops it, then its
    // baseline policy refuses the general profile's SYS_PTRACE.
    let body = json!({"container": {"image": "busybox:1.36", "lifecycle": {"stopSignal": "SIGUSR1"}},
        "profile": "general"});
    let (code, got) = e.create("sig", &body).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}\n{}", e.logs());
    let msg = got["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("pods \"target\" is forbidden: violates PodSecurity \"baseline:latest\": "),
        "{msg}"
    );
    assert!(pod_state(&e).1.is_empty());
    let text = metrics(&e).await;
    assert!(
        text.contains(
            "poddebug_apiserver_validation_disagreements_total{outcome=\"cluster_admission_refused\"} 1"
        ),
        "{text}"
    );
}

/// The fake answers a `dryRun=All` update of `pods/ephemeralcontainers` as kube-apiserver does:
/// the would-be pod with the stored resourceVersion, nothing stored, nothing started; the same
/// 422 and Pod Security 403 a real update gets.
#[tokio::test]
async fn the_fake_answers_dry_run_updates_like_kube_apiserver() {
    let e = env(&[]).await;
    let kube = e.fake.client(poddebug_tests::ADMIN_TOKEN);
    let path = format!("/api/v1/namespaces/{NS}/pods/{POD}/ephemeralcontainers?dryRun=All");
    let before = pod_state(&e);
    let patch = |ec: Value| json!({"spec": {"ephemeralContainers": [ec]}});
    let (code, pod) = kube
        .patch_json(
            &path,
            "application/strategic-merge-patch+json",
            &patch(json!({"name": "dbg", "image": "busybox:1.36"})),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{pod}");
    assert_eq!(pod["spec"]["ephemeralContainers"][0]["name"], "dbg");
    // Defaulted as a real update would be.
    assert_eq!(
        pod["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    assert_eq!(pod["metadata"]["resourceVersion"], before.0);
    assert_eq!(pod_state(&e), before);
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), None);

    let (code, got) = kube
        .patch_json(
            &path,
            "application/strategic-merge-patch+json",
            &patch(
                json!({"name": "dbg", "image": "busybox:1.36", "ports": [{"containerPort": 80}]}),
            ),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{got}");
    assert_eq!(
        got["message"],
        "Pod \"target\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"
    );

    e.fake
        .add_namespace(NS, &[("pod-security.kubernetes.io/enforce", "baseline")]);
    let (code, got) = kube
        .patch_json(
            &path,
            "application/strategic-merge-patch+json",
            &patch(json!({"name": "dbg", "image": "busybox:1.36",
                "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}})),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{got}");
    assert_eq!(pod_state(&e), before);
}

/// A malformed request is a 400 before anything about the object is judged: a bad query, then
/// a bad body, come before the 422 of an invalid container or of poddebug's own fields.
#[tokio::test]
async fn malformed_requests_are_400_before_any_422() {
    let e = env(&[]).await;
    let invalid = json!({"container": {"name": "other", "image": "busybox", "ports": [{"containerPort": 80}]}});
    let (code, got) = e
        .create_as(
            &e.alice,
            POD,
            Some("dbg"),
            "wait=true&timeoutSeconds=soon",
            &invalid,
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{got}");
    let (code, got) = e
        .create(
            "dbg",
            &json!({"container": {"name": "other", "ports": [{"containerPort": 80}]}, "profil": "x"}),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{got}");
    let (code, got) = e.create("dbg", &invalid).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{got}");
    assert!(pod_state(&e).1.is_empty());
}
