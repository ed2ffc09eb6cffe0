//! The browser-context guard end to end, against the real binary: requests carrying what a
//! browser sends for a page on another origin (the headers `kubectl proxy` and the aggregator
//! pass through unchanged) are refused with 403 before anything is done; the same requests
//! from the page's own origin, and from clients that are not browsers, are not affected; bodies
//! must declare JSON. The same attack in a real Chromium through `kubectl proxy` on a real
//! cluster is `tests/tests/live/portal.rs`.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use bytes::Bytes;
use common::{GV, NS, POD, debug_path, env};
use http::{HeaderMap, Method, StatusCode};
use poddebug_tests::TestClient;
use serde_json::{Value, json};

/// What Chromium sends for a `fetch` or WebSocket from `http://127.0.0.1:9999` to
/// `http://127.0.0.1:8001` (kubectl proxy): same site (IP hosts ignore the port), another
/// origin.
const FROM_OTHER_PAGE: &[(&str, &str)] = &[
    ("origin", "http://127.0.0.1:9999"),
    ("sec-fetch-site", "same-site"),
    ("sec-fetch-mode", "no-cors"),
];
/// The portal's own requests through the same proxy.
const FROM_OWN_PAGE: &[(&str, &str)] = &[
    ("origin", "http://127.0.0.1:8001"),
    ("sec-fetch-site", "same-origin"),
    ("sec-fetch-mode", "cors"),
];

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

fn with<'a>(base: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().chain(more).copied().collect()
}

/// A 403 that names cross-site requests.
fn assert_cross_site_refusal(code: StatusCode, body: &[u8]) {
    let status = json_of(body);
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Forbidden");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cross-site requests are forbidden"),
        "{status}"
    );
}

async fn request(
    c: &TestClient,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, HeaderMap, Bytes) {
    c.request(method, path, headers, body.to_owned())
        .await
        .expect("answered")
}

fn ws_headers(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, String)> {
    let mut h = TestClient::websocket_headers("v4.channel.k8s.io");
    h.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    h
}

async fn ws_attach(
    c: &TestClient,
    container: &str,
    extra: &[(&'static str, &'static str)],
) -> poddebug_tests::UpgradeResponse {
    let headers = ws_headers(extra);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.upgrade(
        Method::GET,
        &format!(
            "{GV}/namespaces/{NS}/pods/{POD}/attach?container={container}&stdin=true&stdout=true"
        ),
        &headers,
    )
    .await
    .expect("upgrade answered")
}

/// Requests the server made to the pod's attach endpoint.
fn upstream_attaches(e: &common::Env) -> usize {
    e.fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("/attach"))
        .count()
}

#[tokio::test]
async fn a_page_on_another_origin_creates_nothing_opens_no_stream_and_reads_nothing() {
    let e = env(&[]).await;
    e.create_running(
        "dbg",
        &json!({"container": {"command": ["sh"], "stdin": true}}),
    )
    .await;
    let before = e.fake.pod_json(NS, POD).expect("pod");
    e.fake.clear_requests();

    // The create as `fetch(url, {method: 'POST', mode: 'no-cors', body: blob})` sends it: no
    // Content-Type.
    let path = debug_path(NS, POD, Some("pwn"), "");
    let (code, _, body) = request(&e.alice, Method::POST, &path, FROM_OTHER_PAGE, "{}").await;
    assert_cross_site_refusal(code, &body);
    assert!(
        json_of(&body)["message"]
            .as_str()
            .unwrap_or_default()
            .contains("(Sec-Fetch-Site: same-site)"),
        "{}",
        json_of(&body)
    );
    // With a type a form may send, cross-site proper, and as a DELETE of the running one.
    let form = with(
        &[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
        &[("content-type", "text/plain")],
    );
    let (code, _, body) = request(&e.alice, Method::POST, &path, &form, "{}").await;
    assert_cross_site_refusal(code, &body);
    let (code, _, body) = request(
        &e.alice,
        Method::DELETE,
        &debug_path(NS, POD, Some("dbg"), ""),
        FROM_OTHER_PAGE,
        "",
    )
    .await;
    assert_cross_site_refusal(code, &body);

    // The shell: a WebSocket handshake from the page, and a SPDY upgrade with an Origin.
    let resp = ws_attach(
        &e.alice,
        "dbg",
        &[
            ("origin", "http://127.0.0.1:9999"),
            ("sec-fetch-site", "same-site"),
        ],
    )
    .await;
    assert_cross_site_refusal(resp.status, &resp.body);
    assert!(resp.io.is_none());
    // An old browser without Fetch Metadata: the Origin alone decides.
    let resp = ws_attach(&e.alice, "dbg", &[("origin", "http://127.0.0.1:9999")]).await;
    assert_cross_site_refusal(resp.status, &resp.body);
    let resp = e
        .alice
        .upgrade(
            Method::POST,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/attach?container=dbg&stdin=true"),
            &[
                ("connection", "Upgrade"),
                ("upgrade", "SPDY/3.1"),
                ("x-stream-protocol-version", "v4.channel.k8s.io"),
                ("origin", "null"),
            ],
        )
        .await
        .expect("answered");
    assert_cross_site_refusal(resp.status, &resp.body);

    // Reads of what a session printed: its log, and (even with recording off) recordings,
    // their commands, evidence, ranges and searches, and the keys that verify them.
    const REC: &str = "20260101T000000Z-0000000000000000";
    for read in [
        format!("{GV}/namespaces/{NS}/pods/{POD}/log?container=dbg&follow=true"),
        format!("{GV}/namespaces/{NS}/pods/{POD}/recordings"),
        format!("{GV}/namespaces/{NS}/pods/{POD}/recordings/{REC}"),
        format!("{GV}/namespaces/{NS}/pods/{POD}/recordings/{REC}?start=0&end=60"),
        format!("{GV}/namespaces/{NS}/pods/{POD}/recordings/{REC}/commands"),
        format!("{GV}/namespaces/{NS}/pods/{POD}/recordings/{REC}/evidence"),
        format!("{GV}/namespaces/{NS}/pods/{POD}/recordings?search=passwd"),
        format!("{GV}/namespaces/{NS}/debugrecordings?search=passwd"),
        format!("{GV}/debugrecordings?search=passwd"),
        format!("{GV}/recordingkeys"),
        debug_path(NS, POD, Some("dbg"), ""),
    ] {
        let (code, _, body) = request(&e.alice, Method::GET, &read, FROM_OTHER_PAGE, "").await;
        assert_cross_site_refusal(code, &body);
    }

    // Nothing reached the pod (not even a read), and the pod is as it was.
    assert_eq!(upstream_attaches(&e), 0, "{:?}", e.fake.requests());
    let touched: Vec<String> = e
        .fake
        .requests()
        .iter()
        .filter(|r| r.path.contains(&format!("/pods/{POD}")))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
    assert_eq!(e.fake.pod_json(NS, POD).expect("pod"), before);
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), Some("running"));
}

#[tokio::test]
async fn the_pages_own_origin_and_clients_that_are_not_browsers_are_not_affected() {
    let e = env(&[]).await;
    // The portal: JSON, same-origin.
    let own = with(FROM_OWN_PAGE, &[("content-type", "application/json")]);
    let (code, _, body) = request(
        &e.alice,
        Method::POST,
        &debug_path(NS, POD, Some("mine"), ""),
        &own,
        r#"{"container": {"command": ["sh"], "stdin": true}}"#,
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{}", json_of(&body));
    e.wait_state(POD, "mine", "running").await;
    let resp = ws_attach(
        &e.alice,
        "mine",
        &[
            ("origin", "http://127.0.0.1:8001"),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    drop(resp);
    // A URL the user typed (Sec-Fetch-Site: none) reads.
    let (code, _, _) = request(
        &e.alice,
        Method::GET,
        &debug_path(NS, POD, Some("mine"), ""),
        &[("sec-fetch-site", "none"), ("sec-fetch-mode", "navigate")],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);

    // kubectl create --raw: no Content-Type, kubectl's User-Agent, no browser headers.
    let (code, _, body) = request(
        &e.alice,
        Method::POST,
        &debug_path(NS, POD, Some("raw"), ""),
        &[(
            "user-agent",
            "kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07",
        )],
        "{}",
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{}", json_of(&body));
    // A client that sends the origin of the URL it dials, through a front proxy that says what
    // it was addressed as (X-Forwarded-Host; the aggregator sets it on requests that are not
    // upgrades). Behind the aggregator's upgrades: the next tests.
    e.wait_state(POD, "raw", "running").await;
    let resp = ws_attach(
        &e.alice,
        "raw",
        &[
            ("origin", "https://127.0.0.1:6443"),
            ("x-forwarded-host", "127.0.0.1:6443"),
            ("x-forwarded-proto", "https"),
        ],
    )
    .await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    drop(resp);

    // Discovery, OpenAPI and the portal page stay readable from anywhere (a link to the
    // portal from another site opens it).
    for path in [
        GV.to_owned(),
        "/openapi/v2".to_owned(),
        format!("{GV}/portal/"),
    ] {
        let (code, headers, _) = request(
            &e.alice,
            Method::GET,
            &path,
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", "navigate"),
            ],
            "",
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
    }
}

#[tokio::test]
async fn allowed_origins_may_act_from_a_browser() {
    let e = env(&["--allowed-origins=https://portal.example"]).await;
    let headers = [
        ("origin", "https://portal.example"),
        ("sec-fetch-site", "cross-site"),
        ("content-type", "application/json"),
    ];
    let (code, _, body) = request(
        &e.alice,
        Method::POST,
        &debug_path(NS, POD, Some("listed"), ""),
        &headers,
        "{}",
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{}", json_of(&body));
    let other = [
        ("origin", "https://portal.example.evil"),
        ("sec-fetch-site", "cross-site"),
        ("content-type", "application/json"),
    ];
    let (code, _, body) = request(
        &e.alice,
        Method::POST,
        &debug_path(NS, POD, Some("other"), ""),
        &other,
        "{}",
    )
    .await;
    assert_cross_site_refusal(code, &body);
}

#[tokio::test]
async fn a_body_must_declare_json() {
    let e = env(&[]).await;
    let path = debug_path(NS, POD, Some("typed"), "");
    for (what, headers) in [
        ("no Content-Type", vec![("user-agent", "curl/8.5.0")]),
        ("text/plain", vec![("content-type", "text/plain")]),
        ("*/*", vec![("content-type", "*/*")]),
        (
            "a form",
            vec![("content-type", "application/x-www-form-urlencoded")],
        ),
        ("YAML", vec![("content-type", "application/yaml")]),
    ] {
        let (code, _, body) = request(&e.alice, Method::POST, &path, &headers, "{}").await;
        let status = json_of(&body);
        assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{what}: {status}");
        assert_eq!(status["reason"], "UnsupportedMediaType", "{what}");
        assert_eq!(status["code"], 415, "{what}");
    }
    // kubectl's User-Agent does not help a request that comes from a browser.
    let (code, _, _) = request(
        &e.alice,
        Method::POST,
        &path,
        &[
            ("user-agent", "kubectl/v1.32.4"),
            ("origin", "http://127.0.0.1:8001"),
            ("sec-fetch-site", "same-origin"),
        ],
        "{}",
    )
    .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        e.fake.pod_json(NS, POD).expect("pod")["spec"]["ephemeralContainers"].is_null(),
        "nothing was created"
    );
    // A DELETE without a body needs no type; with one, it must be JSON.
    let (code, _, body) = request(
        &e.alice,
        Method::DELETE,
        &debug_path(NS, POD, Some("nope"), ""),
        &[("content-type", "text/plain")],
        r#"{"gracePeriodSeconds": 1}"#,
    )
    .await;
    assert_eq!(
        code,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "{}",
        json_of(&body)
    );
}

/// A WebSocket attach to `py` whose only browser-context header is `Origin: origin` (what a
/// client that is not a browser but names its server sends), plus `extra`.
async fn ws_attach_with(
    e: &common::Env,
    origin: &str,
    extra: &[(&'static str, &'static str)],
) -> poddebug_tests::UpgradeResponse {
    let mut headers = TestClient::websocket_headers("v4.channel.k8s.io");
    headers.push(("origin", origin.to_owned()));
    headers.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    e.alice
        .upgrade(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/attach?container=py&stdin=true&stdout=true"),
            &headers,
        )
        .await
        .expect("upgrade answered")
}

/// The status of [`ws_attach_with`] without extra headers (a stream that opened is closed).
async fn attach_with_origin(e: &common::Env, origin: &str) -> StatusCode {
    ws_attach_with(e, origin, &[]).await.status
}

/// Waits (bounded) until an attach with `origin` is answered `want` (the server learns where
/// the API server is from watches, so a change shows after a moment).
async fn wait_origin(e: &common::Env, origin: &str, want: StatusCode) {
    let deadline = tokio::time::Instant::now() + common::T;
    loop {
        let got = attach_with_origin(e, origin).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Origin {origin}: {got}, not {want}\n{}",
            e.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// As manifests/rbac.yaml grants the server's account (the fake's user for the server), for
/// what tells where the API server is: the `kubernetes` Service by name, EndpointSlices in
/// `default`, `cluster-info` by name; everything else as before.
fn rbac_of_the_manifests(a: &poddebug_tests::fake::Attributes) -> bool {
    if a.user != poddebug_tests::fake::PODDEBUG_USER {
        return true;
    }
    let read = matches!(a.verb.as_str(), "get" | "list" | "watch");
    match (a.api_group.as_str(), a.resource.as_str()) {
        ("", "services") => read && a.namespace == "default" && a.name == "kubernetes",
        ("discovery.k8s.io", "endpointslices") => {
            matches!(a.verb.as_str(), "list" | "watch") && a.namespace == "default"
        }
        ("", "configmaps") if a.namespace == "kube-public" => read && a.name == "cluster-info",
        _ => true,
    }
}

#[tokio::test]
async fn a_client_naming_the_api_server_in_origin_attaches_and_no_other_origin_does() {
    let e = env_with_policy().await;
    e.create_running(
        "py",
        &json!({"container": {"command": ["sh"], "stdin": true}}),
    )
    .await;
    // What the Kubernetes Python client's WebSocket sends behind the aggregator: Origin is the
    // API server it dialled (its kubeconfig's server; the server's own kubeconfig names the
    // same one here), Host is not that, and no X-Forwarded-Host.
    let api = e.fake.url();
    let port = e.fake.addr().port();
    wait_origin(&e, &api, StatusCode::SWITCHING_PROTOCOLS).await;
    wait_origin(
        &e,
        &format!("HTTPS://127.0.0.1:{port}"),
        StatusCode::SWITCHING_PROTOCOLS,
    )
    .await;
    // In a pod: the `kubernetes` Service's ClusterIP (Python's in-cluster config) and names.
    let ip = poddebug_tests::fake::KUBERNETES_SERVICE_IP;
    for origin in [
        format!("https://{ip}"),
        format!("https://{ip}:443"),
        "https://kubernetes.default.svc".to_owned(),
        "https://kubernetes.default.svc.cluster.local:443".to_owned(),
    ] {
        wait_origin(&e, &origin, StatusCode::SWITCHING_PROTOCOLS).await;
    }

    // Nothing else: look-alikes, another scheme or port, and pages.
    let evil_suffix = format!("https://127.0.0.1:{port}.evil.example");
    let evil_port = format!("https://127.0.0.1:{}", port.wrapping_add(1));
    let plain = format!("http://127.0.0.1:{port}");
    let service_port = format!("https://{ip}:6443");
    for origin in [
        evil_suffix.as_str(),
        "https://evil.example",
        "null",
        plain.as_str(),
        evil_port.as_str(),
        service_port.as_str(),
        "https://kubernetes.evil.example",
        "https://kubernetes.default.svc.evil.example",
    ] {
        let resp = ws_attach_with(&e, origin, &[]).await;
        assert_cross_site_refusal(resp.status, &resp.body);
    }
    // A browser's page on the API server's own origin, which the browser says is cross-site
    // to where the request goes, is a page like any other.
    let resp = ws_attach_with(&e, &api, &[("sec-fetch-site", "cross-site")]).await;
    assert_cross_site_refusal(resp.status, &resp.body);

    // Every read the server made to learn this was one the manifests grant.
    let refused: Vec<String> = e
        .fake
        .requests()
        .iter()
        .filter(|r| {
            r.user == poddebug_tests::fake::PODDEBUG_USER
                && (r.path.contains("/services")
                    || r.path.contains("/endpointslices")
                    || r.path.contains("/kube-public/"))
                && r.status >= 400
        })
        .map(|r| format!("{} {} {}", r.status, r.method, r.path))
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

#[tokio::test]
async fn the_api_servers_origins_follow_cluster_info_and_endpoint_slices() {
    let e = env_with_policy().await;
    e.create_running(
        "py",
        &json!({"container": {"command": ["sh"], "stdin": true}}),
    )
    .await;
    let forbidden = StatusCode::FORBIDDEN;
    let ok = StatusCode::SWITCHING_PROTOCOLS;
    // kubeadm's cluster-info: published, moved, removed.
    wait_origin(&e, "https://api.cluster.example:6443", forbidden).await;
    e.fake.set_cluster_info("https://API.cluster.example:6443");
    wait_origin(&e, "https://api.cluster.example:6443", ok).await;
    e.fake.set_cluster_info("https://api2.cluster.example");
    wait_origin(&e, "https://api2.cluster.example:443", ok).await;
    wait_origin(&e, "https://api.cluster.example:6443", forbidden).await;
    assert!(e.fake.delete_configmap("kube-public", "cluster-info"));
    wait_origin(&e, "https://api2.cluster.example", forbidden).await;

    // The EndpointSlices kube-apiserver keeps for its Service (dual-stack: two), and none
    // other.
    e.fake
        .set_kubernetes_endpoint_slice("kubernetes", "IPv4", &["192.0.2.10", "192.0.2.11"], 6443);
    e.fake
        .set_kubernetes_endpoint_slice("kubernetes-v6", "IPv6", &["2001:db8::10"], 6443);
    e.fake
        .set_kubernetes_endpoint_slice("kubernetes-extra", "IPv4", &["192.0.2.66"], 6443);
    wait_origin(&e, "https://192.0.2.10:6443", ok).await;
    wait_origin(&e, "https://192.0.2.11:6443", ok).await;
    wait_origin(&e, "https://[2001:db8::10]:6443", ok).await;
    assert_eq!(
        attach_with_origin(&e, "https://192.0.2.66:6443").await,
        forbidden
    );
    assert_eq!(
        attach_with_origin(&e, "https://192.0.2.10").await,
        forbidden
    );
    // An API server leaves: its address no longer passes.
    e.fake
        .set_kubernetes_endpoint_slice("kubernetes", "IPv4", &["192.0.2.11"], 6443);
    wait_origin(&e, "https://192.0.2.10:6443", forbidden).await;
    assert!(e.fake.delete_kubernetes_endpoint_slice("kubernetes-v6"));
    wait_origin(&e, "https://[2001:db8::10]:6443", forbidden).await;
    wait_origin(&e, "https://192.0.2.11:6443", ok).await;
}

/// [`env`] whose fake grants the server's account what manifests/rbac.yaml grants it for
/// where the API server is.
async fn env_with_policy() -> common::Env {
    common::env_with(&[], |fake| fake.set_policy(rbac_of_the_manifests)).await
}
