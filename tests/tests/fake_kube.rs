//! The fake kube-apiserver tested with the suite's client: transport (HTTP/1.1, HTTP/2),
//! authentication, RBAC, impersonation, TokenReview, SubjectAccessReview, the authentication
//! ConfigMap, lists and watches. Ephemeral containers are in `fake_kube_ephemeral.rs`, streams
//! and kubectl in `fake_kube_streams.rs`, the live answers in `fake_kube_live_cases.rs`.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::pki::Ca;
use poddebug_tests::{
    ADMIN_TOKEN, FakeKube, HttpVersion, Outage, PODDEBUG_TOKEN, PODDEBUG_USER, TestClient, TestPki,
    UserInfo,
};
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

// ---------- transport and authentication ----------

#[tokio::test]
async fn serves_http1_and_http2() {
    let fake = fake_with_pod().await;
    for version in [HttpVersion::Http1, HttpVersion::Http2] {
        let client = TestClient::builder(&fake.url())
            .ca_pem(fake.ca_pem())
            .bearer_token(ADMIN_TOKEN)
            .version(version)
            .build();
        let (code, pod) = client
            .get_json("/api/v1/namespaces/ephdemo/pods/target")
            .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(pod["metadata"]["name"], POD);
        assert_eq!(pod["status"]["phase"], "Running");
        assert!(pod["status"]["containerStatuses"][0]["state"]["running"].is_object());
    }
    let versions: Vec<_> = fake.requests().iter().map(|r| r.version).collect();
    assert_eq!(versions, [http::Version::HTTP_11, http::Version::HTTP_2]);
}

#[tokio::test]
async fn unauthenticated_requests_get_kubes_401() {
    let fake = FakeKube::start().await;
    let anonymous = TestClient::builder(&fake.url())
        .ca_pem(fake.ca_pem())
        .build();
    let (code, body) = anonymous.get_json("/api/v1/namespaces").await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    let (code, _) = fake
        .client("wrong-token")
        .get_json("/api/v1/namespaces")
        .await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn client_certificates_of_the_client_ca_authenticate() {
    let fake = FakeKube::start().await;
    let cert = fake.pki().client_cert(Ca::Client, "alice", &["dev"]);
    let client = TestClient::builder(&fake.url())
        .ca_pem(fake.ca_pem())
        .client_cert_key(&cert)
        .build();
    let (code, _) = client.get_json("/api/v1/namespaces/default").await;
    assert_eq!(code, StatusCode::OK);
    let last = fake.requests().pop().expect("recorded");
    assert_eq!(last.user, "alice");
    assert_eq!(last.groups, ["dev", "system:authenticated"]);

    // A certificate from a CA the fake does not trust fails the TLS handshake.
    let stranger = TestPki::new().client_cert(Ca::Client, "mallory", &[]);
    let client = TestClient::builder(&fake.url())
        .ca_pem(fake.ca_pem())
        .client_cert_key(&stranger)
        .build();
    assert!(
        client
            .request(Method::GET, "/api/v1/namespaces", &[], Bytes::new())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn kubeconfig_points_at_the_fake() {
    let fake = FakeKube::start().await;
    let path = fake.write_kubeconfig(PODDEBUG_TOKEN);
    let config: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("kubeconfig")).expect("json");
    assert_eq!(config["clusters"][0]["cluster"]["server"], fake.url());
    assert_eq!(config["users"][0]["user"]["token"], PODDEBUG_TOKEN);
    drop(fake);
    assert!(!path.exists(), "the kubeconfig goes away with the fake");
}

// ---------- RBAC and impersonation ----------

#[tokio::test]
async fn rbac_denial_uses_kubes_wording() {
    let fake = fake_with_pod().await;
    fake.add_token("bob-token", UserInfo::new("bob", &["system:authenticated"]));
    fake.set_policy(|a| a.user != "bob" || !a.is("patch", "pods/ephemeralcontainers"));
    let (code, body) = fake
        .client("bob-token")
        .patch_json(EC_PATH, SMP, &ec(json!({"name": "d", "image": "busybox"})))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"target\" is forbidden: User \"bob\" cannot patch resource \"pods/ephemeralcontainers\" in API group \"\" in the namespace \"ephdemo\"",
            "reason": "Forbidden", "details": {"name": "target", "kind": "pods"}, "code": 403})
    );
    // Cluster-scoped and non-resource wording.
    fake.set_policy(|a| a.user != "bob");
    let (_, body) = fake
        .client("bob-token")
        .get_json("/api/v1/namespaces")
        .await;
    assert_eq!(
        body["message"],
        "namespaces is forbidden: User \"bob\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    let (_, body) = fake.client("bob-token").get_json("/version").await;
    assert_eq!(
        body["message"],
        "forbidden: User \"bob\" cannot get path \"/version\""
    );
}

#[tokio::test]
async fn impersonation_is_checked_and_recorded() {
    let fake = fake_with_pod().await;
    let sa = fake.client(PODDEBUG_TOKEN);
    let as_bob = sa
        .with_header("impersonate-user", "bob")
        .with_header("impersonate-group", "dev")
        .with_header("impersonate-group", "ops")
        .with_header("impersonate-uid", "u-1")
        .with_header("impersonate-extra-scopes", "read");
    let (code, _) = as_bob
        .get_json("/api/v1/namespaces/ephdemo/pods/target")
        .await;
    assert_eq!(code, StatusCode::OK);
    let r = fake.requests().pop().expect("recorded");
    assert_eq!(r.user, "bob");
    assert_eq!(r.authenticated_as, PODDEBUG_USER);
    assert_eq!(r.groups, ["dev", "ops", "system:authenticated"]);
    assert!(
        r.impersonation
            .contains(&("impersonate-extra-scopes".to_owned(), "read".to_owned()))
    );

    fake.set_policy(|a| a.verb != "impersonate");
    let (code, body) = sa
        .with_header("impersonate-user", "bob")
        .get_json("/api/v1/namespaces/ephdemo/pods/target")
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "users \"bob\" is forbidden: User \"system:serviceaccount:poddebug-system:poddebug\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let (code, _) = sa
        .with_header("impersonate-group", "dev")
        .get_json("/api/v1/namespaces")
        .await;
    assert_eq!(
        code,
        StatusCode::BAD_REQUEST,
        "a group without a user is refused"
    );
}

// ---------- TokenReview and SubjectAccessReview ----------

#[tokio::test]
async fn token_review_answers_from_the_token_table() {
    let fake = FakeKube::start().await;
    let sa = fake.client(PODDEBUG_TOKEN);
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let review = |t: &str| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t}});
    let (code, body) = sa.post_json(path, &review(ADMIN_TOKEN)).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(body["status"]["authenticated"], true);
    assert_eq!(body["status"]["user"]["username"], "admin");
    assert_eq!(
        body["status"]["user"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    let (code, body) = sa.post_json(path, &review("nope")).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(
        body["status"],
        json!({"user": {}}),
        "kube omits authenticated=false"
    );
    assert_eq!(fake.token_reviews_count(), 2);
    fake.set_authenticator_outage(Outage::Unavailable);
    let (code, _) = sa.post_json(path, &review(ADMIN_TOKEN)).await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn subject_access_review_follows_the_policy_and_is_recorded() {
    let fake = FakeKube::start().await;
    fake.set_policy(|a| a.user == "alice" || a.user == PODDEBUG_USER);
    let sa = fake.client(PODDEBUG_TOKEN);
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let sar = |user: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": user, "groups": ["system:authenticated"], "extra": {"k": ["v"]},
            "resourceAttributes": {"namespace": NS, "verb": "create", "group": "poddebug.dev", "version": "v1alpha1",
                "resource": "pods", "subresource": "debug", "name": POD}}})
    };
    let (code, body) = sa.post_json(path, &sar("alice")).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(body["status"]["allowed"], true);
    assert_eq!(body["spec"]["user"], "alice");
    let (_, body) = sa.post_json(path, &sar("eve")).await;
    assert_eq!(body["status"], json!({"allowed": false}));

    let sars = fake.sars();
    assert_eq!(sars.len(), 2);
    let a = &sars[0].attributes;
    assert_eq!(
        (
            a.verb.as_str(),
            a.api_group.as_str(),
            a.subresource.as_str(),
            a.name.as_str()
        ),
        ("create", "poddebug.dev", "debug", POD)
    );
    assert_eq!(a.extra.get("k"), Some(&vec!["v".to_owned()]));
    assert_eq!(sars[0].caller, PODDEBUG_USER);
    assert_eq!(sars[1].allowed, Some(false));

    let (code, body) = sa
        .post_json(
            path,
            &json!({"spec": {"resourceAttributes": {"verb": "get"}}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );

    fake.set_authorizer_down(true);
    let (code, body) = sa.post_json(path, &sar("alice")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("ServiceUnavailable"))
    );
    fake.set_authorizer_outage(Outage::CloseConnection);
    let r = sa
        .request(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(&sar("alice")).expect("json"),
        )
        .await;
    assert!(
        r.is_err(),
        "the connection is closed without an answer: {r:?}"
    );
    assert_eq!(fake.sars().len(), 4);
}

// ---------- configmaps, lists and watches ----------

#[tokio::test]
async fn auth_configmap_get_and_watch() {
    let fake = FakeKube::start().await;
    let sa = fake.client(PODDEBUG_TOKEN);
    let (code, cm) = sa
        .get_json("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        cm["data"]["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert_eq!(
        cm["data"]["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(cm["data"]["client-ca-file"], fake.pki().client_ca_pem());

    let selector = "fieldSelector=metadata.name%3Dextension-apiserver-authentication";
    let (_, list) = sa
        .get_json(&format!(
            "/api/v1/namespaces/kube-system/configmaps?{selector}"
        ))
        .await;
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();

    let mut watch = sa
        .stream(Method::GET, &format!("/api/v1/namespaces/kube-system/configmaps?{selector}&watch=true&resourceVersion={rv}"), &[], Bytes::new())
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);
    fake.set_configmap("kube-system", "unrelated", Default::default());
    let mut data = fake.pki().auth_configmap_data();
    data.insert("requestheader-allowed-names".into(), "[\"other\"]".into());
    fake.set_auth_configmap(data);
    let event = watch.next_json(T).await.expect("event");
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(
        event["object"]["data"]["requestheader-allowed-names"],
        "[\"other\"]"
    );
    assert!(
        event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .parse::<u64>()
            .expect("n")
            > rv.parse().expect("n")
    );
}

#[tokio::test]
async fn pod_lists_filter_by_labels_and_fields() {
    let fake = FakeKube::start().await;
    for (ns, name, labels) in [
        ("a", "p1", json!({"app": "web", "tier": "front"})),
        ("a", "p2", json!({"app": "db"})),
        ("b", "p3", json!({"app": "web"})),
    ] {
        fake.add_pod_json(json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
    }
    let admin = fake.client(ADMIN_TOKEN);
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    for (path, want) in [
        ("/api/v1/pods", vec!["p1", "p2", "p3"]),
        ("/api/v1/namespaces/a/pods", vec!["p1", "p2"]),
        ("/api/v1/pods?labelSelector=app%3Dweb", vec!["p1", "p3"]),
        ("/api/v1/pods?labelSelector=app!%3Dweb", vec!["p2"]),
        ("/api/v1/pods?labelSelector=tier", vec!["p1"]),
        ("/api/v1/pods?labelSelector=!tier", vec!["p2", "p3"]),
        (
            "/api/v1/pods?labelSelector=app%20in%20(db%2Cweb),app%20notin%20(web)",
            vec!["p2"],
        ),
        (
            "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dp2",
            vec!["p2"],
        ),
    ] {
        let (code, list) = admin.get_json(path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {list}");
        assert_eq!(names(&list), want, "{path}");
        assert!(
            list["items"][0].get("kind").is_none(),
            "list items carry no kind"
        );
        assert_eq!(
            list["metadata"]["resourceVersion"],
            fake.resource_version().to_string()
        );
    }
    let (code, body) = admin
        .get_json("/api/v1/pods?fieldSelector=spec.bogus%3Dx")
        .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("field label not supported: spec.bogus")
        )
    );
}

#[tokio::test]
async fn watch_starts_after_the_resource_version_and_honours_options() {
    let fake = fake_with_pod().await;
    fake.set_bookmark_interval(Duration::from_millis(100));
    let admin = fake.client(ADMIN_TOKEN);
    let rv = fake.resource_version();
    fake.update_pod(NS, POD, |p| p["metadata"]["labels"]["step"] = json!("1"));
    fake.add_simple_pod(NS, "other");
    let mut w = admin
        .stream(Method::GET, &format!("/api/v1/namespaces/ephdemo/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&labelSelector=app%3Dtarget&timeoutSeconds=2"), &[], Bytes::new())
        .await
        .expect("watch");
    let e = w.next_json(T).await.expect("first event");
    assert_eq!(
        (
            e["type"].as_str(),
            e["object"]["metadata"]["labels"]["step"].as_str()
        ),
        (Some("MODIFIED"), Some("1"))
    );
    assert_eq!(e["object"]["kind"], "Pod");
    // The label change that makes the pod stop matching arrives as DELETED.
    fake.update_pod(NS, POD, |p| p["metadata"]["labels"]["app"] = json!("gone"));
    let e = w.next_json(T).await.expect("deleted");
    assert_eq!(e["type"], "DELETED");
    let e = w.next_json(T).await.expect("bookmark");
    assert_eq!(e["type"], "BOOKMARK");
    assert_eq!(
        e["object"]["metadata"]["resourceVersion"],
        fake.resource_version().to_string()
    );
    assert_eq!(
        e["object"]["metadata"].as_object().map(|m| m.len()),
        Some(1)
    );
    // timeoutSeconds ends the stream.
    let start = std::time::Instant::now();
    while w.next_line(T).await.is_some() {}
    assert!(w.ended() && start.elapsed() < Duration::from_secs(4));

    // Without resourceVersion the watch starts with the current objects.
    let mut w = admin
        .stream(
            Method::GET,
            "/api/v1/namespaces/ephdemo/pods?watch=true",
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    let names: Vec<String> = [w.next_json(T).await, w.next_json(T).await]
        .into_iter()
        .map(|e| {
            e.expect("initial")["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(names, ["other", "target"]);
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let mut w = admin
        .stream(Method::GET, "/api/v1/namespaces/ephdemo/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", &[], Bytes::new())
        .await
        .expect("watch");
    let e = w.next_json(T).await.expect("initial");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some(POD))
    );
    let e = w.next_json(T).await.expect("bookmark");
    assert_eq!(e["type"], "BOOKMARK");
    assert_eq!(
        e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    fake.delete_pod(NS, POD);
    let e = w.next_json(T).await.expect("deleted");
    assert_eq!(e["type"], "DELETED");
}

#[tokio::test]
async fn watch_from_a_compacted_version_gets_410() {
    let fake = fake_with_pod().await;
    let rv = fake.resource_version();
    fake.update_pod(NS, POD, |p| p["metadata"]["labels"]["x"] = json!("y"));
    fake.compact();
    let admin = fake.client(ADMIN_TOKEN);
    let mut w = admin
        .stream(
            Method::GET,
            &format!("/api/v1/pods?watch=true&resourceVersion={rv}"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    let e = w.next_json(T).await.expect("error event");
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert_eq!(
        e["object"]["message"],
        format!(
            "too old resource version: {rv} ({})",
            fake.resource_version()
        )
    );
    assert!(w.next_line(T).await.is_none() && w.ended());
}

#[tokio::test]
async fn pod_lists_page_with_limit_and_continue() {
    let fake = fake_with_pod().await;
    fake.add_simple_pod(NS, "second");
    fake.add_simple_pod(NS, "third");
    let admin = TestClient::builder(&fake.url())
        .ca_pem(fake.ca_pem())
        .bearer_token(ADMIN_TOKEN)
        .build();
    let mut names = Vec::new();
    let mut rvs = Vec::new();
    let mut path = format!("/api/v1/namespaces/{NS}/pods?limit=2");
    for _ in 0..5 {
        let (code, list) = admin.get_json(&path).await;
        assert_eq!(code, StatusCode::OK, "{list}");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        assert!(items.len() <= 2, "{list}");
        names.extend(items.iter().map(|p| p["metadata"]["name"].clone()));
        rvs.push(list["metadata"]["resourceVersion"].clone());
        match list["metadata"]["continue"].as_str() {
            Some(token) => path = format!("/api/v1/namespaces/{NS}/pods?limit=2&continue={token}"),
            None => break,
        }
    }
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(rvs.windows(2).all(|w| w[0] == w[1]), "{rvs:?}");
    let (code, _) = admin
        .get_json(&format!(
            "/api/v1/namespaces/{NS}/pods?limit=1&continue=%25%25"
        ))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
}

// ---------- the Eviction API ----------

/// The answers observed on kube-apiserver v1.36.2 for `POST pods/NAME/eviction` (a bare pod,
/// then a PodDisruptionBudget `web` with minAvailable 1 selecting it).
#[tokio::test]
async fn evictions_answer_as_kube_apiserver_does() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let uid = fake.pod_json(NS, POD).expect("pod")["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let path = format!("/api/v1/namespaces/{NS}/pods/{POD}/eviction");
    let eviction = |name: &str, uid: &str| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": NS},
            "deleteOptions": {"preconditions": {"uid": uid}}})
    };
    fake.set_pdb(poddebug_tests::fake::Pdb {
        namespace: NS.into(),
        name: "web".into(),
        match_labels: vec![("app".into(), POD.into())],
        disruptions_allowed: 0,
        desired_healthy: 1,
        current_healthy: 1,
    });
    let (code, status) = admin.post_json(&path, &eviction(POD, &uid)).await;
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]},
            "code": 429})
    );
    assert!(fake.delete_pdb(NS, "web"));
    let (code, status) = admin.post_json(&path, &eviction("other", &uid)).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(
        status["message"],
        "name in URL does not match name in Eviction object"
    );
    let zero = "00000000-0000-0000-0000-000000000000";
    let (code, status) = admin.post_json(&path, &eviction(POD, zero)).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("Operation cannot be fulfilled on Pod \"{POD}\": the UID in the precondition ({zero}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"),
            "reason": "Conflict", "details": {"name": POD, "kind": "Pod"}, "code": 409})
    );
    assert!(fake.pod_json(NS, POD).is_some());
    let (code, status) = admin.post_json(&path, &eviction(POD, &uid)).await;
    assert_eq!(code, StatusCode::CREATED, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    assert!(fake.pod_json(NS, POD).is_none(), "evicted");
    let (code, status) = admin.post_json(&path, &eviction(POD, &uid)).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(status["message"], format!("pods \"{POD}\" not found"));
    let (code, status) = admin.get_json(&path).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED, "{status}");
}

/// APIServices as kube-apiserver v1.36 answers them (checked live): get, a JSON merge patch of
/// caBundle (200 and a new resourceVersion), a caBundle that is not base64 refused with 422 on
/// field `patch`, another patch type 415, an unknown name 404.
#[tokio::test]
async fn apiservice_get_and_merge_patch() {
    let fake = FakeKube::start().await;
    fake.put_apiservice(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.poddebug.dev"},
        "spec": {"group": "poddebug.dev", "version": "v1alpha1", "groupPriorityMinimum": 1000,
                 "versionPriority": 15},
    }));
    let sa = fake.client(PODDEBUG_TOKEN);
    let path = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.poddebug.dev";
    let (code, before) = sa.get_json(path).await;
    assert_eq!(code, StatusCode::OK, "{before}");
    let merge = "application/merge-patch+json";
    let (code, after) = sa
        .patch_json(path, merge, &json!({"spec": {"caBundle": "Y2E="}}))
        .await;
    assert_eq!(code, StatusCode::OK, "{after}");
    assert_eq!(after["spec"]["caBundle"], "Y2E=");
    assert_eq!(after["spec"]["group"], "poddebug.dev");
    assert_ne!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let (code, bad) = sa
        .patch_json(path, merge, &json!({"spec": {"caBundle": "!!not base64"}}))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    assert_eq!(bad["reason"], "Invalid");
    assert_eq!(bad["details"]["causes"][0]["field"], "patch", "{bad}");
    assert!(
        bad["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("illegal base64 data at input byte 0")),
        "{bad}"
    );
    assert_eq!(
        fake.apiservice("v1alpha1.poddebug.dev").unwrap()["spec"]["caBundle"],
        "Y2E="
    );
    let (code, _) = sa
        .patch_json(path, "application/json", &json!({"spec": {}}))
        .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (code, missing) = sa
        .get_json("/apis/apiregistration.k8s.io/v1/apiservices/v1.nothing.example")
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{missing}");
}
