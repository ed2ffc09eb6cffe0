//! Issue 3 end to end: the real `poddebug-apiserver` binary against the fake kube-apiserver —
//! TLS and HTTP versions, the authentication chain, delegated authorization (attributes,
//! caching, outages), health, metrics, limits, certificate rotation and graceful shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::pki::Ca;
use poddebug_tests::server::free_port;
use poddebug_tests::{FakeKube, HttpVersion, PodDebugServer, TestClient, TestPki, UserInfo};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);
const NS: &str = "shop";
const POD: &str = "web";
const GV: &str = "/apis/poddebug.dev/v1alpha1";

async fn setup(extra: &[&str]) -> (FakeKube, TestPki, PodDebugServer) {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    let server = PodDebugServer::start(&fake, &pki, extra).await;
    (fake, pki, server)
}

/// Lets the fake authorize everything except what `deny` says about a user-facing request
/// (the poddebug service account's own pod calls are always allowed).
fn policy(
    fake: &FakeKube,
    deny: impl Fn(&poddebug_tests::fake::Attributes) -> bool + Send + Sync + 'static,
) {
    fake.set_policy(move |a| a.user.starts_with("system:serviceaccount:") || !deny(a));
}

fn json_of(b: &Bytes) -> Value {
    serde_json::from_slice(b).unwrap_or(Value::Null)
}

fn user_sars(fake: &FakeKube, user: &str) -> Vec<poddebug_tests::fake::SarRecord> {
    fake.sars()
        .into_iter()
        .filter(|s| s.attributes.user == user)
        .collect()
}

/// Polls `check` every 100 ms for up to 10 s; true once it held.
async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The status code of `GET path`.
async fn code_of(c: &TestClient, path: &str) -> StatusCode {
    c.request(Method::GET, path, &[], Bytes::new())
        .await
        .map(|r| r.0)
        .unwrap_or(StatusCode::BAD_GATEWAY)
}

// ---------- TLS and HTTP versions ----------

#[tokio::test]
async fn serves_http2_and_http1_over_tls() {
    let (_fake, pki, server) = setup(&[]).await;
    for (version, want) in [
        (HttpVersion::Http2, http::Version::HTTP_2),
        (HttpVersion::Http1, http::Version::HTTP_11),
    ] {
        let client = server
            .client_builder()
            .front_proxy(&pki, "alice", &["system:masters"], &[])
            .version(version)
            .build();
        let tls = client.connect_tls().await.expect("TLS");
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        drop(tls);
        assert_eq!(
            alpn.as_deref(),
            Some(if want == http::Version::HTTP_2 {
                &b"h2"[..]
            } else {
                &b"http/1.1"[..]
            })
        );
        let (code, _, body) = client
            .request(Method::GET, GV, &[], Bytes::new())
            .await
            .expect("request");
        assert_eq!(code, StatusCode::OK, "{version:?}");
        assert_eq!(json_of(&body)["kind"], "APIResourceList");
    }
}

// ---------- authentication ----------

#[tokio::test]
async fn front_proxy_user_is_authorized_with_its_identity() {
    let (fake, pki, server) = setup(&[]).await;
    policy(&fake, |a| a.user == "bob");
    let alice = server
        .client_builder()
        .front_proxy(
            &pki,
            "alice",
            &["devs", "system:authenticated"],
            &[(
                "authentication.kubernetes.io/credential-id",
                "X509SHA256=ab",
            )],
        )
        .header("x-remote-uid", "uid-1")
        .build();
    let (code, _, _) = alice
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
    let sars = user_sars(&fake, "alice");
    let sar = sars.last().expect("a SubjectAccessReview for alice");
    assert_eq!(sar.spec["uid"], "uid-1");
    assert_eq!(sar.spec["groups"], json!(["devs", "system:authenticated"]));
    assert_eq!(
        sar.spec["extra"],
        json!({"authentication.kubernetes.io/credential-id": ["X509SHA256=ab"]})
    );
    assert_eq!(
        sar.spec["resourceAttributes"],
        json!({"verb": "get", "group": "poddebug.dev", "version": "v1alpha1", "resource": "pods", "subresource": "debug", "namespace": NS, "name": POD})
    );

    let bob = server.front_proxy_client("bob", &["devs"]);
    let (code, headers, body) = bob
        .request(
            Method::POST,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug/dbg"),
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(headers["content-type"], "application/json");
    let status = json_of(&body);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["apiVersion"], "v1");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "pods.poddebug.dev \"web\" is forbidden: User \"bob\" cannot create resource \"pods/debug\" in API group \"poddebug.dev\" in the namespace \"shop\""
    );
    assert_eq!(
        status["details"],
        json!({"name": POD, "group": "poddebug.dev", "kind": "pods"})
    );
    assert!(
        fake.pod(NS, POD)
            .unwrap()
            .spec
            .unwrap()
            .ephemeral_containers
            .is_none(),
        "a denied create changes nothing"
    );
}

#[tokio::test]
async fn spoofed_remote_headers_without_a_certificate_authenticate_nobody() {
    let (fake, pki, server) = setup(&[]).await;
    policy(&fake, |a| a.user == "system:anonymous");
    let spoofer = server
        .client_builder()
        .header("x-remote-user", "admin")
        .header("x-remote-group", "system:masters")
        .header("x-remote-extra-scopes", "all")
        .build();
    let (code, _, body) = spoofer
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(
        code,
        StatusCode::FORBIDDEN,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(
        json_of(&body)["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/apis/poddebug.dev/v1alpha1\""
    );
    assert!(
        fake.sars().iter().all(|s| s.attributes.user != "admin"),
        "the spoofed user never reaches the authorizer"
    );
    let anon = user_sars(&fake, "system:anonymous");
    assert_eq!(
        anon.last().unwrap().attributes.groups,
        vec!["system:unauthenticated"]
    );
    assert!(anon.last().unwrap().attributes.extra.is_empty());

    // A client certificate from the *client* CA is not a front proxy: its headers are ignored too.
    let client_cert = pki_client(&server, &pki, "carol", &["qa"]);
    let spoof2 = client_cert.with_header("x-remote-user", "admin");
    let (code, _, _) = spoof2
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
    let carol = user_sars(&fake, "carol");
    assert_eq!(
        carol.last().unwrap().attributes.groups,
        vec!["qa", "system:authenticated"]
    );
    assert!(fake.sars().iter().all(|s| s.attributes.user != "admin"));
}

fn pki_client(server: &PodDebugServer, pki: &TestPki, user: &str, groups: &[&str]) -> TestClient {
    server
        .client_builder()
        .client_cert_key(&pki.client_cert(Ca::Client, user, groups))
        .build()
}

#[tokio::test]
async fn client_certificates_and_front_proxy_certificates_are_checked() {
    let (fake, pki, server) = setup(&[]).await;
    fake.allow_all();

    // A front-proxy CN signed by the wrong CA (the cluster CA): 401, not anonymous.
    let wrong_ca = pki.client_cert(Ca::Cluster, "front-proxy-client", &[]);
    let c = server
        .client_builder()
        .client_cert_key(&wrong_ca)
        .header("x-remote-user", "admin")
        .build();
    let (code, _, body) = c.request(Method::GET, GV, &[], Bytes::new()).await.unwrap();
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    let status = json_of(&body);
    assert_eq!(status["reason"], "Unauthorized");
    assert_eq!(status["message"], "Unauthorized");

    // Signed by the front-proxy CA, but a CN not in --requestheader-allowed-names: 401.
    let other_cn = pki.client_cert(Ca::FrontProxy, "not-the-aggregator", &[]);
    let c = server
        .client_builder()
        .client_cert_key(&other_cn)
        .header("x-remote-user", "admin")
        .build();
    let (code, _, _) = c.request(Method::GET, GV, &[], Bytes::new()).await.unwrap();
    assert_eq!(code, StatusCode::UNAUTHORIZED);

    // A client-CA certificate: CN is the user, O the groups.
    let c = pki_client(&server, &pki, "dave", &["ops", "oncall"]);
    let (code, _, _) = c.request(Method::GET, GV, &[], Bytes::new()).await.unwrap();
    assert_eq!(code, StatusCode::OK);
    assert!(fake.sars().iter().all(|s| s.attributes.user != "admin"));
    // system:masters skips the review, like the generic apiserver; dave is not one.
    let dave = user_sars(&fake, "dave");
    assert_eq!(
        dave.last().unwrap().attributes.groups,
        vec!["ops", "oncall", "system:authenticated"]
    );
    assert_eq!(
        dave.last().unwrap().spec["nonResourceAttributes"],
        json!({"path": GV, "verb": "get"})
    );
}

#[tokio::test]
async fn bearer_tokens_go_through_token_review_and_are_cached() {
    let (fake, _pki, server) = setup(&["--authentication-token-webhook-cache-ttl=30s"]).await;
    fake.allow_all();
    fake.add_token(
        "portal-token",
        UserInfo {
            name: "portal-user".into(),
            uid: "u-9".into(),
            groups: vec!["portal".into()],
            extra: BTreeMap::new(),
        },
    );
    let before = fake.token_reviews_count();
    let portal = server.client_builder().bearer_token("portal-token").build();
    for _ in 0..3 {
        let (code, _, _) = portal
            .request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap();
        assert_eq!(code, StatusCode::OK);
    }
    assert_eq!(
        fake.token_reviews_count() - before,
        1,
        "three requests, one TokenReview"
    );
    let sar = user_sars(&fake, "portal-user").pop().unwrap();
    assert_eq!(sar.spec["uid"], "u-9");
    assert_eq!(
        sar.attributes.groups,
        vec!["portal", "system:authenticated"]
    );

    let bad = server.client_builder().bearer_token("not-a-token").build();
    let (code, _, body) = bad
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(json_of(&body)["reason"], "Unauthorized");

    // A browser's WebSocket bearer subprotocol authenticates the same way.
    use base64::Engine;
    let proto = format!(
        "base64url.bearer.authorization.k8s.io.{}, v5.channel.k8s.io",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("portal-token")
    );
    let (code, _, _) = server
        .client_builder()
        .header("sec-websocket-protocol", &proto)
        .build()
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn anonymous_requests_reach_only_the_always_allowed_paths() {
    let (fake, _pki, server) = setup(&[]).await;
    policy(&fake, |a| a.user == "system:anonymous");
    let anon = server.client_builder().build();
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, _, body) = anon
            .request(Method::GET, path, &[], Bytes::new())
            .await
            .unwrap();
        assert_eq!(code, StatusCode::OK, "{path}");
        assert_eq!(&body[..], b"ok");
    }
    let (code, _, body) = anon
        .request(Method::GET, "/readyz?verbose", &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("[+]authentication-config ok")
            && text.contains("[+]upstream-kube-apiserver ok")
            && text.contains("[+]record-key ok"),
        "{text}"
    );
    assert!(
        user_sars(&fake, "system:anonymous").is_empty(),
        "health paths need no review"
    );
    for path in [
        "/metrics",
        "/apis",
        "/openapi/v2",
        &format!("{GV}/namespaces/{NS}/poddebugcontainers"),
    ] {
        let (code, _, _) = anon
            .request(Method::GET, path, &[], Bytes::new())
            .await
            .unwrap();
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}");
    }
}

// ---------- authorization ----------

/// verb, resource, subresource, name of one SubjectAccessReview.
type Expected = (&'static str, &'static str, &'static str, &'static str);

#[tokio::test]
async fn every_endpoint_asks_for_kube_apiservers_attributes() {
    let (fake, pki, server) = setup(&["--authorization-webhook-cache-unauthorized-ttl=0s"]).await;
    policy(&fake, |_| true); // deny every user request: we only look at what was asked
    let c = server
        .client_builder()
        .front_proxy(&pki, "eve", &["devs"], &[])
        .build();
    let ns = format!("{GV}/namespaces/{NS}");
    let cases: Vec<(Method, String, Vec<Expected>)> = vec![
        (
            Method::POST,
            format!("{ns}/pods/{POD}/debug/dbg"),
            vec![("create", "pods", "debug", POD)],
        ),
        (
            Method::POST,
            format!("{ns}/pods/{POD}/debug"),
            vec![("create", "pods", "debug", POD)],
        ),
        (
            Method::GET,
            format!("{ns}/pods/{POD}/debug/dbg"),
            vec![("get", "pods", "debug", POD)],
        ),
        (
            Method::DELETE,
            format!("{ns}/pods/{POD}/debug/dbg"),
            vec![("delete", "pods", "debug", POD)],
        ),
        (
            Method::POST,
            format!("{ns}/pods/{POD}/attach?container=dbg"),
            vec![("create", "pods", "attach", POD)],
        ),
        (
            Method::GET,
            format!("{ns}/pods/{POD}/log?container=dbg"),
            vec![("get", "pods", "log", POD)],
        ),
        (
            Method::GET,
            format!("{ns}/poddebugcontainers"),
            vec![("list", "poddebugcontainers", "", "")],
        ),
        (
            Method::GET,
            format!("{ns}/poddebugcontainers?watch=true"),
            vec![("watch", "poddebugcontainers", "", "")],
        ),
        (
            Method::GET,
            format!("{ns}/poddebugcontainers/{POD}.dbg"),
            vec![("get", "poddebugcontainers", "", "web.dbg")],
        ),
    ];
    for (method, path, want) in cases {
        fake.clear_sars();
        let (code, _, _) = c
            .request(method.clone(), &path, &[], Bytes::new())
            .await
            .unwrap();
        assert_eq!(code, StatusCode::FORBIDDEN, "{method} {path}");
        let got: Vec<(String, String, String, String)> = user_sars(&fake, "eve")
            .into_iter()
            .map(|s| {
                (
                    s.attributes.verb,
                    s.attributes.resource,
                    s.attributes.subresource,
                    s.attributes.name,
                )
            })
            .collect();
        let want: Vec<(String, String, String, String)> = want
            .into_iter()
            .map(|(v, r, s, n)| (v.into(), r.into(), s.into(), n.into()))
            .collect();
        assert_eq!(got, want, "{method} {path}");
        let sar = user_sars(&fake, "eve").pop().unwrap();
        assert_eq!(sar.attributes.api_group, "poddebug.dev");
        assert_eq!(sar.attributes.namespace, NS);
    }
    // A WebSocket attach is a GET: it needs get and create, like core attach since 1.35.
    policy(&fake, |a| a.user == "eve" && a.verb == "create");
    fake.clear_sars();
    let (code, _, body) = c
        .request(
            Method::GET,
            &format!("{ns}/pods/{POD}/attach?container=dbg"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert!(
        json_of(&body)["message"]
            .as_str()
            .unwrap()
            .contains("cannot create resource \"pods/attach\"")
    );
    // Both are asked (at once, so in either order).
    let mut verbs: Vec<String> = user_sars(&fake, "eve")
        .into_iter()
        .map(|s| s.attributes.verb)
        .collect();
    verbs.sort();
    assert_eq!(verbs, ["create", "get"]);
    // Cluster-scoped and non-resource requests.
    fake.clear_sars();
    for path in [
        format!("{GV}/debugprofiles"),
        "/apis".to_owned(),
        "/openapi/v3".to_owned(),
        "/metrics".to_owned(),
    ] {
        let _ = c
            .request(Method::GET, &path, &[], Bytes::new())
            .await
            .unwrap();
    }
    let sars = user_sars(&fake, "eve");
    assert_eq!(sars[0].attributes.verb, "list");
    assert_eq!(sars[0].attributes.resource, "debugprofiles");
    assert_eq!(sars[0].attributes.namespace, "");
    let paths: Vec<&str> = sars[1..]
        .iter()
        .map(|s| s.attributes.path.as_str())
        .collect();
    assert_eq!(paths, ["/apis", "/openapi/v3", "/metrics"]);
}

#[tokio::test]
async fn decisions_are_cached_with_separate_ttls() {
    let (fake, pki, server) = setup(&[
        "--authorization-webhook-cache-authorized-ttl=60s",
        "--authorization-webhook-cache-unauthorized-ttl=200ms",
    ])
    .await;
    policy(&fake, |a| a.user == "mallory");
    let ok = server
        .client_builder()
        .front_proxy(&pki, "frank", &[], &[])
        .build();
    let denied = server
        .client_builder()
        .front_proxy(&pki, "mallory", &[], &[])
        .build();
    for _ in 0..3 {
        assert_eq!(
            ok.request(Method::GET, GV, &[], Bytes::new())
                .await
                .unwrap()
                .0,
            StatusCode::OK
        );
        assert_eq!(
            denied
                .request(Method::GET, GV, &[], Bytes::new())
                .await
                .unwrap()
                .0,
            StatusCode::FORBIDDEN
        );
    }
    assert_eq!(
        user_sars(&fake, "frank").len(),
        1,
        "allowed answers are cached for 60s"
    );
    let denied_before = user_sars(&fake, "mallory").len();
    assert!(denied_before >= 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        denied
            .request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap()
            .0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        user_sars(&fake, "mallory").len(),
        denied_before + 1,
        "denied answers expire after 200ms"
    );
}

#[tokio::test]
async fn a_zero_ttl_turns_the_decision_cache_off() {
    let (fake, pki, server) = setup(&[
        "--authorization-webhook-cache-authorized-ttl=0s",
        "--authorization-webhook-cache-unauthorized-ttl=0s",
    ])
    .await;
    policy(&fake, |a| a.user == "mallory");
    let ok = server
        .client_builder()
        .front_proxy(&pki, "frank", &[], &[])
        .build();
    let denied = server
        .client_builder()
        .front_proxy(&pki, "mallory", &[], &[])
        .build();
    for _ in 0..3 {
        let (code, _, _) = ok
            .request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap();
        assert_eq!(code, StatusCode::OK);
        let (code, _, _) = denied
            .request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap();
        assert_eq!(code, StatusCode::FORBIDDEN);
    }
    assert_eq!(user_sars(&fake, "frank").len(), 3, "every allow reviewed");
    assert_eq!(
        user_sars(&fake, "mallory").len(),
        3,
        "every denial reviewed"
    );
    // A decision changed in the cluster is the next answer.
    policy(&fake, |_| false);
    let (code, _, _) = denied
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn an_unreachable_authorizer_is_never_an_allow() {
    let (fake, pki, server) = setup(&["--authorization-webhook-cache-authorized-ttl=0s"]).await;
    fake.allow_all();
    fake.set_authorizer_down(true);
    let c = server
        .client_builder()
        .front_proxy(&pki, "gina", &[], &[])
        .build();
    let (code, _, body) = c
        .request(
            Method::POST,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug/dbg"),
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    let status = json_of(&body);
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["kind"], "Status");
    assert!(
        fake.pod(NS, POD)
            .unwrap()
            .spec
            .unwrap()
            .ephemeral_containers
            .is_none()
    );
    // Health stays up: it needs no authorizer.
    assert_eq!(
        c.request(Method::GET, "/livez", &[], Bytes::new())
            .await
            .unwrap()
            .0,
        StatusCode::OK
    );
    fake.set_authorizer_down(false);
    assert_eq!(
        c.request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap()
            .0,
        StatusCode::OK
    );
}

// ---------- operations ----------

#[tokio::test]
async fn metrics_count_requests_and_are_authorized_as_a_non_resource_url() {
    let (fake, pki, server) = setup(&[]).await;
    policy(&fake, |a| a.user == "viewer" && a.path == "/metrics");
    let admin = server
        .client_builder()
        .front_proxy(&pki, "ops", &[], &[])
        .build();
    let _ = admin
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    let _ = admin
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/nope/debug/x"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    let (code, headers, body) = admin
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(
            "poddebug_apiserver_requests_total{verb=\"get\",resource=\"nonresource\",code=\"200\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "poddebug_apiserver_requests_total{verb=\"get\",resource=\"pods/debug\",code=\"404\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("poddebug_apiserver_request_duration_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("poddebug_apiserver_inflight_requests"),
        "{text}"
    );
    assert!(
        text.contains("poddebug_apiserver_active_streams 0"),
        "{text}"
    );
    assert!(
        text.contains("poddebug_apiserver_upstream_request_duration_seconds"),
        "{text}"
    );
    let viewer = server
        .client_builder()
        .front_proxy(&pki, "viewer", &[], &[])
        .build();
    let (code, _, body) = viewer
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .unwrap();
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        json_of(&body)["message"],
        "forbidden: User \"viewer\" cannot get path \"/metrics\""
    );
}

#[tokio::test]
async fn logs_have_one_line_per_request_and_no_credentials() {
    let (fake, pki, server) = setup(&[]).await;
    fake.allow_all();
    fake.add_token(
        "secret-token-value",
        UserInfo {
            name: "tok".into(),
            ..Default::default()
        },
    );
    let c = server
        .client_builder()
        .front_proxy(&pki, "logged-user", &[], &[])
        .header("audit-id", "2f6e-audit")
        .build();
    let _ = c
        .request(
            Method::GET,
            &format!("{GV}/debugprofiles"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    let _ = server
        .client_builder()
        .bearer_token("secret-token-value")
        .build()
        .request(Method::GET, GV, &[], Bytes::new())
        .await
        .unwrap();
    assert!(server.wait_for_log("logged-user", T).await);
    let logs = server.logs();
    let line: Value = logs
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["user"] == "logged-user")
        .expect("a JSON request line");
    assert_eq!(line["verb"], "list");
    assert_eq!(line["path"], format!("{GV}/debugprofiles"));
    assert_eq!(line["code"], 200);
    assert!(line["duration_ms"].is_number());
    assert_eq!(
        line["audit_id"], "2f6e-audit",
        "matches the cluster's audit log"
    );
    let all = server.logs_text();
    assert!(
        !all.contains("secret-token-value"),
        "tokens never reach the log"
    );
    assert!(!all.contains("BEGIN CERTIFICATE"));
}

#[tokio::test]
async fn limits_answer_413_429_and_504() {
    let (fake, pki, server) = setup(&[
        "--max-request-body-bytes=1024",
        "--max-requests-inflight=1",
        "--request-timeout=2s",
    ])
    .await;
    fake.allow_all();
    let c = server
        .client_builder()
        .front_proxy(&pki, "lim", &[], &[])
        .build();
    let big = format!("{{\"container\": {{\"image\": \"{}\"}}}}", "x".repeat(4096));
    let (code, _, body) = c
        .request(
            Method::POST,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug/big"),
            &[("content-type", "application/json")],
            big,
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(json_of(&body)["reason"], "RequestEntityTooLarge");

    // A create that waits for a container that never starts holds the only slot until the
    // request timeout: a second request meanwhile gets 429, and the first one 504.
    fake.set_kubelet_simulation(false);
    let path = format!("{GV}/namespaces/{NS}/pods/{POD}/debug/slow?wait=true&timeoutSeconds=30");
    let slow = {
        let c = c.clone();
        tokio::spawn(async move {
            c.request(
                Method::POST,
                &path,
                &[("content-type", "application/json")],
                "{}",
            )
            .await
        })
    };
    let mut saw_429 = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (code, headers, body) = c.request(Method::GET, GV, &[], Bytes::new()).await.unwrap();
        if code == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(headers["retry-after"], "1");
            assert_eq!(json_of(&body)["reason"], "TooManyRequests");
            saw_429 = true;
            break;
        }
    }
    assert!(saw_429, "a second request while the slot is taken gets 429");
    let (code, _, body) = slow.await.unwrap().unwrap();
    assert_eq!(
        code,
        StatusCode::GATEWAY_TIMEOUT,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let status = json_of(&body);
    assert_eq!(status["reason"], "Timeout");
    assert!(
        status["message"].as_str().unwrap().starts_with("Timeout: "),
        "{status}"
    );
}

#[tokio::test]
async fn serving_certificate_rotates_without_dropping_connections() {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.allow_all();
    let first = pki.localhost_serving_cert();
    let dir = poddebug_tests::pki::TempDir::new("rotate");
    let cert_path = dir.path().join("tls.crt");
    let key_path = dir.path().join("tls.key");
    std::fs::write(&cert_path, &first.cert_pem).unwrap();
    std::fs::write(&key_path, &first.key_pem).unwrap();
    let cert_arg = format!("--tls-cert-file={}", cert_path.display());
    let key_arg = format!("--tls-private-key-file={}", key_path.display());
    let server = PodDebugServer::start(
        &fake,
        &pki,
        &[&cert_arg, &key_arg, "--cert-reload-interval=200ms"],
    )
    .await;

    let client = server
        .client_builder()
        .front_proxy(&pki, "rot", &["system:masters"], &[])
        .http1_only()
        .build();
    let tls = client.connect_tls().await.unwrap();
    let served_first = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = |p: &str| {
        http::Request::get(p)
            .header("host", "localhost")
            .header("x-remote-user", "rot")
            .header("x-remote-group", "system:masters")
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap()
    };
    assert_eq!(
        send.send_request(req(GV)).await.unwrap().status(),
        StatusCode::OK
    );

    let second = pki.localhost_serving_cert();
    std::fs::write(&cert_path, &second.cert_pem).unwrap();
    std::fs::write(&key_path, &second.key_pem).unwrap();
    let rotated = eventually(|| async {
        let tls = client.connect_tls().await.unwrap();
        tls.get_ref().1.peer_certificates().unwrap()[0].as_ref() != served_first.as_slice()
    })
    .await;
    assert!(rotated, "new handshakes get the new certificate");
    // The connection opened before the rotation still serves requests.
    for _ in 0..3 {
        let resp = send
            .send_request(req(GV))
            .await
            .expect("old connection still usable");
        assert_eq!(resp.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn client_ca_rotation_applies_live() {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.allow_all();
    let dir = poddebug_tests::pki::TempDir::new("client-ca");
    let ca_path = dir.path().join("client-ca.crt");
    let other = TestPki::new();
    std::fs::write(&ca_path, other.ca_pem(Ca::Client)).unwrap();
    let arg = format!("--client-ca-file={}", ca_path.display());
    let server = PodDebugServer::start(&fake, &pki, &[&arg, "--cert-reload-interval=200ms"]).await;
    let c = server
        .client_builder()
        .client_cert_key(&pki.client_cert(Ca::Client, "ivan", &["system:masters"]))
        .build();
    assert_eq!(
        c.request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap()
            .0,
        StatusCode::UNAUTHORIZED
    );
    std::fs::write(&ca_path, pki.ca_pem(Ca::Client)).unwrap();
    let ok = eventually(|| async { code_of(&c, GV).await == StatusCode::OK }).await;
    assert!(ok, "the new client CA is used without a restart");
}

#[tokio::test]
async fn authentication_config_is_looked_up_and_followed_in_the_cluster() {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.allow_all();
    let serving = pki.localhost_serving_cert();
    let port = free_port();
    let kubeconfig = fake.write_kubeconfig(poddebug_tests::PODDEBUG_TOKEN);
    // Start with a ConfigMap naming another front-proxy CA: the aggregator's cert is refused.
    let other = TestPki::new();
    fake.set_auth_configmap(other.auth_configmap_data());
    let args = vec![
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", serving.cert_path.display()),
        format!("--tls-private-key-file={}", serving.key_path.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--log-format=json".to_owned(),
    ];
    let _server = PodDebugServer::spawn_raw(&args);
    let anonymous = TestClient::builder(&format!("https://127.0.0.1:{port}"))
        .ca_pem(pki.cluster_ca_pem())
        .build();
    let ready =
        eventually(|| async { code_of(&anonymous, "/readyz").await == StatusCode::OK }).await;
    assert!(ready, "ready once the ConfigMap was read");
    let aggregator = TestClient::builder(&format!("https://127.0.0.1:{port}"))
        .ca_pem(pki.cluster_ca_pem())
        .front_proxy(&pki, "via-aggregator", &["system:masters"], &[])
        .build();
    assert_eq!(
        aggregator
            .request(Method::GET, GV, &[], Bytes::new())
            .await
            .unwrap()
            .0,
        StatusCode::UNAUTHORIZED
    );
    // kube-apiserver rotates its front-proxy CA: the watch picks it up.
    fake.set_auth_configmap(pki.auth_configmap_data());
    let ok = eventually(|| async { code_of(&aggregator, GV).await == StatusCode::OK }).await;
    assert!(ok, "the rotated front-proxy CA applies live");
}

#[tokio::test]
async fn graceful_shutdown_lets_a_request_in_flight_finish() {
    let (fake, pki, mut server) = setup(&["--shutdown-grace-period=10s"]).await;
    fake.allow_all();
    fake.set_kubelet_simulation(false);
    let c = Arc::new(
        server
            .client_builder()
            .front_proxy(&pki, "sd", &[], &[])
            .build(),
    );
    let path = format!("{GV}/namespaces/{NS}/pods/{POD}/debug/late?wait=true&timeoutSeconds=20");
    let inflight = {
        let c = c.clone();
        tokio::spawn(async move {
            c.request(
                Method::POST,
                &path,
                &[("content-type", "application/json")],
                "{}",
            )
            .await
        })
    };
    // Wait until the container was added (the request is now waiting for it to run).
    assert!(
        fake.wait_until(T, |f| f
            .pod(NS, POD)
            .and_then(|p| p.spec)
            .and_then(|s| s.ephemeral_containers)
            .is_some())
            .await
    );
    let pid = server.pid().to_string();
    let _ = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // New connections are refused while draining.
    assert!(
        c.request(Method::GET, "/livez", &[], Bytes::new())
            .await
            .is_err(),
        "the listener is closed"
    );
    fake.set_ec_state(
        NS,
        POD,
        "late",
        poddebug_tests::fake::ContainerState::Running,
    );
    let (code, _, body) = inflight
        .await
        .unwrap()
        .expect("the in-flight request completes");
    assert_eq!(
        code,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(json_of(&body)["status"]["phase"], "Running");
    let status = server.wait_exit(T).await.expect("exits after draining");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn require_core_permissions_checks_what_kubectl_would_need() {
    let (fake, pki, server) = setup(&[
        "--require-core-permissions",
        "--authorization-webhook-cache-unauthorized-ttl=0s",
    ])
    .await;
    // zoe may use poddebug.dev but has no core right to patch ephemeral containers.
    policy(&fake, |a| {
        a.user == "zoe" && a.api_group.is_empty() && a.subresource == "ephemeralcontainers"
    });
    let zoe = server
        .client_builder()
        .front_proxy(&pki, "zoe", &["devs"], &[])
        .build();
    let path = format!("{GV}/namespaces/{NS}/pods/{POD}/debug/dbg");
    let (code, _, body) = zoe
        .request(
            Method::POST,
            &path,
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        json_of(&body)["message"],
        "pods \"web\" is forbidden: User \"zoe\" cannot patch resource \"pods/ephemeralcontainers\" in API group \"\" in the namespace \"shop\""
    );
    assert!(
        fake.pod(NS, POD)
            .unwrap()
            .spec
            .unwrap()
            .ephemeral_containers
            .is_none()
    );
    // With the core right too, the same request goes through.
    policy(&fake, |_| false);
    let (code, _, body) = zoe
        .request(
            Method::POST,
            &path,
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(
        code,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let asked: Vec<(String, String, String)> = user_sars(&fake, "zoe")
        .into_iter()
        .map(|s| {
            (
                s.attributes.verb,
                s.attributes.api_group,
                s.attributes.subresource,
            )
        })
        .collect();
    assert!(
        asked.contains(&("patch".into(), String::new(), "ephemeralcontainers".into())),
        "{asked:?}"
    );
}

#[tokio::test]
async fn without_kubeconfig_flag_the_current_kubeconfig_is_used() {
    // Outside a cluster (no in-cluster service account) the server falls back to KUBECONFIG,
    // which is what the README's run command relies on.
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.allow_all();
    let serving = pki.localhost_serving_cert();
    let port = free_port();
    let kubeconfig = fake.write_kubeconfig(poddebug_tests::PODDEBUG_TOKEN);
    let command = vec![
        "env".to_owned(),
        "-u".to_owned(),
        "KUBERNETES_SERVICE_HOST".to_owned(),
        format!("KUBECONFIG={}", kubeconfig.display()),
        PodDebugServer::binary().display().to_string(),
    ];
    let args = vec![
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", serving.cert_path.display()),
        format!("--tls-private-key-file={}", serving.key_path.display()),
        "--authentication-skip-lookup".to_owned(),
    ];
    let server = PodDebugServer::spawn_command(&command, &args);
    let anonymous = TestClient::builder(&format!("https://127.0.0.1:{port}"))
        .ca_pem(pki.cluster_ca_pem())
        .build();
    let ready =
        eventually(|| async { code_of(&anonymous, "/readyz").await == StatusCode::OK }).await;
    assert!(
        ready,
        "ready with the kubeconfig from KUBECONFIG: {}",
        server.logs_text()
    );
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.user == poddebug_tests::PODDEBUG_USER),
        "the fake was called with the kubeconfig's credentials"
    );
}

#[tokio::test]
async fn hostile_paths_and_queries_are_refused_consistently() {
    let (fake, pki, server) = setup(&["--authorization-webhook-cache-unauthorized-ttl=0s"]).await;
    // hal may list but not watch.
    policy(&fake, |a| a.user == "hal" && a.verb == "watch");
    let hal = server
        .client_builder()
        .front_proxy(&pki, "hal", &[], &[])
        .build();
    // Authorized as a list (first value, as kube-apiserver reads it) and served as a list.
    let (code, headers, body) = hal
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=false&watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(json_of(&body)["kind"], "PodDebugContainerList");

    // An encoded traversal in the pod name never reaches the cluster: a name that cannot exist.
    fake.clear_requests();
    let (code, _, body) = hal
        .request(
            Method::POST,
            &format!("{GV}/namespaces/{NS}/pods/..%2F..%2Fkube-system%2Fpods%2Fvictim/debug/x"),
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(
        code,
        StatusCode::NOT_FOUND,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(json_of(&body)["kind"], "Status");
    assert!(
        fake.requests().iter().all(|r| !r.path.contains("victim")),
        "nothing was sent upstream"
    );

    // What the router itself refuses (a path segment that is not UTF-8) is a Status too.
    let (code, headers, body) = hal
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug/%FF"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        code,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(headers["content-type"], "application/json");
    let status = json_of(&body);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
}

#[tokio::test]
async fn shutdown_delay_keeps_serving_with_readyz_failing_and_ends_watches() {
    let (fake, pki, mut server) = setup(&[
        "--shutdown-delay-duration=1500ms",
        "--shutdown-grace-period=6s",
    ])
    .await;
    fake.allow_all();
    let c = server
        .client_builder()
        .front_proxy(&pki, "sd", &["system:masters"], &[])
        .build();
    let mut watch = c
        .stream(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert_eq!(watch.status, StatusCode::OK);
    let pid = server.pid().to_string();
    let _ = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await;
    // During the delay the server still answers, but is no longer ready.
    let not_ready =
        eventually(|| async { code_of(&c, "/readyz").await == StatusCode::INTERNAL_SERVER_ERROR })
            .await;
    assert!(not_ready, "/readyz fails as soon as SIGTERM arrives");
    assert_eq!(
        code_of(&c, GV).await,
        StatusCode::OK,
        "still serving during the delay"
    );
    // Then the watch ends (its client re-watches another replica) and the process exits.
    let _ = watch.read_to_end(Duration::from_secs(10)).await;
    assert!(watch.ended(), "the watch was ended by the shutdown");
    let status = server
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("exits");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn an_unreadable_auth_configmap_blocks_readiness_unless_tolerated() {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    // The server's account may not read kube-system/extension-apiserver-authentication.
    fake.set_policy(|a| a.resource != "configmaps");
    let kubeconfig = fake.write_kubeconfig(poddebug_tests::PODDEBUG_TOKEN);
    let serving = pki.localhost_serving_cert();
    for (tolerate, want_ready) in [(false, false), (true, true)] {
        let port = free_port();
        let mut args = vec![
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", serving.cert_path.display()),
            format!("--tls-private-key-file={}", serving.key_path.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--client-ca-file={}", pki.ca_path(Ca::Client).display()),
        ];
        if tolerate {
            args.push("--authentication-tolerate-lookup-failure".to_owned());
        }
        let server = PodDebugServer::spawn_raw(&args);
        let anonymous = TestClient::builder(&format!("https://127.0.0.1:{port}"))
            .ca_pem(pki.cluster_ca_pem())
            .build();
        // Serving either way; ready only when the failure is tolerated.
        assert!(
            eventually(|| async { code_of(&anonymous, "/livez").await == StatusCode::OK }).await
        );
        let ready =
            eventually(|| async { code_of(&anonymous, "/readyz").await == StatusCode::OK }).await;
        assert_eq!(ready, want_ready, "tolerate={tolerate}");
        if !want_ready {
            let (_, _, body) = anonymous
                .request(Method::GET, "/readyz?verbose", &[], Bytes::new())
                .await
                .unwrap();
            assert!(
                String::from_utf8_lossy(&body).contains("[-]authentication-config failed"),
                "{}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                server
                    .logs_text()
                    .contains("extension-apiserver-authentication-reader"),
                "the log says what is missing"
            );
        }
    }
}

#[tokio::test]
async fn without_a_certificate_a_self_signed_one_is_made_for_the_service_name() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    let dir = poddebug_tests::pki::TempDir::new("cert-dir");
    let cert_dir = dir.path().join("certs");
    let port = free_port();
    let kubeconfig = fake.write_kubeconfig(poddebug_tests::PODDEBUG_TOKEN);
    let args = vec![
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", cert_dir.display()),
        "--service-name=debug-ext".to_owned(),
        "--service-namespace=debug-system".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--authentication-skip-lookup".to_owned(),
    ];
    let _server = PodDebugServer::spawn_raw(&args);
    let written = eventually(|| async { cert_dir.join("apiserver.crt").is_file() }).await;
    assert!(written, "the pair is persisted in --cert-dir");
    let ca = std::fs::read_to_string(cert_dir.join("apiserver.crt")).unwrap();
    // The aggregator checks <service>.<namespace>.svc, not the address it dials.
    let aggregator_view = TestClient::builder(&format!("https://127.0.0.1:{port}"))
        .ca_pem(&ca)
        .server_name("debug-ext.debug-system.svc")
        .build();
    let ready =
        eventually(|| async { code_of(&aggregator_view, "/readyz").await == StatusCode::OK }).await;
    assert!(ready, "TLS verifies as debug-ext.debug-system.svc");
    let local = TestClient::builder(&format!("https://127.0.0.1:{port}"))
        .ca_pem(&ca)
        .build();
    assert_eq!(
        code_of(&local, "/livez").await,
        StatusCode::OK,
        "and as 127.0.0.1"
    );
    let elsewhere = TestClient::builder(&format!("https://127.0.0.1:{port}"))
        .ca_pem(&ca)
        .server_name("other.debug-system.svc")
        .build();
    assert!(
        elsewhere.connect_tls().await.is_err(),
        "not valid for other names"
    );
}

/// `--serving-ca-secret` with two replicas: the CA Secret is created once (the second replica's
/// create conflicts, and it reads the winner's), both serve a certificate for the Service's name
/// that verifies with the Secret's CA (and only with it), and the APIService's caBundle becomes
/// that CA; a caBundle wiped later (a `kubectl replace` without it) is published again.
#[tokio::test]
async fn serving_ca_secret_shared_by_two_replicas_and_published_as_ca_bundle() {
    use base64::Engine;
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.put_apiservice(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.poddebug.dev"},
        "spec": {"group": "poddebug.dev", "version": "v1alpha1",
                 "service": {"name": "poddebug-apiserver", "namespace": "poddebug-system", "port": 443},
                 "groupPriorityMinimum": 1000, "versionPriority": 15},
    }));
    let dir = std::env::temp_dir().join(format!("poddebug-serving-ca-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut servers = Vec::new();
    for replica in 0..2 {
        let port = free_port();
        let serving = pki.localhost_serving_cert();
        let mut args: Vec<String> = PodDebugServer::standard_args(&fake, &pki, &serving, port)
            .into_iter()
            .filter(|a| {
                !a.starts_with("--tls-cert-file=") && !a.starts_with("--tls-private-key-file=")
            })
            .collect();
        args.push("--serving-ca-secret=poddebug-serving-ca".to_owned());
        args.push("--cert-reload-interval=200ms".to_owned());
        args.push(format!(
            "--cert-dir={}",
            dir.join(replica.to_string()).display()
        ));
        servers.push(PodDebugServer::spawn_raw(&args));
    }

    // One Secret, created by one replica (its log says so, below); the other's create was
    // refused and it read it. (The count of POSTs to the namespace's Secrets says nothing: the
    // record key is created there too.)
    let secret = {
        let mut found = None;
        for _ in 0..100 {
            found = fake.secret("poddebug-system", "poddebug-serving-ca");
            let published = fake
                .apiservice("v1alpha1.poddebug.dev")
                .is_some_and(|a| a["spec"]["caBundle"].is_string());
            if found.is_some() && published {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        found.expect("the serving CA Secret")
    };
    assert_eq!(secret["type"], "kubernetes.io/tls", "{secret}");
    let ca_b64 = secret["data"]["tls.crt"]
        .as_str()
        .expect("tls.crt")
        .to_owned();
    let ca_pem = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&ca_b64)
            .expect("base64"),
    )
    .expect("PEM");

    // Both replicas serve for poddebug-apiserver.poddebug-system.svc, verified with that CA.
    for s in &servers {
        let ok = eventually(|| async {
            TestClient::builder(&s.url())
                .ca_pem(&ca_pem)
                .server_name("poddebug-apiserver.poddebug-system.svc")
                .build()
                .connect_tls()
                .await
                .is_ok()
        })
        .await;
        assert!(
            ok,
            "replica on {} not verified with the Secret's CA:\n{}",
            s.url(),
            s.logs_text()
        );
        // Not with another CA.
        let other = TestClient::builder(&s.url())
            .ca_pem(pki.cluster_ca_pem())
            .server_name("poddebug-apiserver.poddebug-system.svc")
            .build()
            .connect_tls()
            .await;
        assert!(other.is_err(), "verified with an unrelated CA");
    }
    let logs: String = servers.iter().map(|s| s.logs_text()).collect();
    assert_eq!(
        logs.matches("created the serving CA").count(),
        1,
        "exactly one replica created it:\n{logs}"
    );

    // caBundle is the Secret's CA, and only it.
    let api = fake
        .apiservice("v1alpha1.poddebug.dev")
        .expect("APIService");
    assert_eq!(api["spec"]["caBundle"], ca_b64.as_str(), "{api}");

    // Wiped (as a `kubectl replace` without caBundle would): published again at the next check
    // (every --cert-reload-interval).
    let mut wiped = api.clone();
    if let Some(spec) = wiped["spec"].as_object_mut() {
        spec.remove("caBundle");
    }
    fake.put_apiservice(wiped);
    let mut back = false;
    for _ in 0..100 {
        if fake
            .apiservice("v1alpha1.poddebug.dev")
            .is_some_and(|a| a["spec"]["caBundle"] == ca_b64.as_str())
        {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "caBundle not published again");
    let _ = std::fs::remove_dir_all(&dir);
}
