//! Hostile input through the real binary over TLS: bodies, headers, names and encodings a
//! client controls, HTTP/2 abuse, request smuggling, a refused upgrade followed by a second
//! request, spoofed identity headers and bad client certificates. Each case checks the answer
//! (a Kubernetes `Status` where there is one) and that the server then still serves others.
//!
//! What `serving.rs` already covers is not repeated here: 413 bodies, invalid UTF-8 and
//! encoded traversal in paths, repeated query parameters, slow headers, and the basic
//! front-proxy / client-certificate checks.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::{
    ADMIN_TOKEN, Ca, ContainerState, FakeKube, PodDebugServer, TestClient, TestPki, UserInfo,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(10);
const NS: &str = "shop";
const POD: &str = "web";
const GV: &str = "/apis/poddebug.dev/v1alpha1";

async fn setup(extra: &[&str]) -> (FakeKube, TestPki, PodDebugServer) {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.add_namespace(NS, &[]);
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true}],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, "dbg", ContainerState::Running));
    fake.allow_all();
    let server = PodDebugServer::start(&fake, &pki, extra).await;
    (fake, pki, server)
}

fn json_of(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or(Value::Null)
}

fn create_path(name: &str) -> String {
    format!("{GV}/namespaces/{NS}/pods/{POD}/debug/{name}")
}

fn list_path() -> String {
    format!("{GV}/namespaces/{NS}/poddebugcontainers")
}

/// Asserts `(code, body)` is a Status with that code and reason.
#[track_caller]
fn assert_status(code: StatusCode, body: &[u8], want: u16, reason: &str) -> Value {
    let s = json_of(body);
    assert_eq!(code.as_u16(), want, "{}", String::from_utf8_lossy(body));
    assert_eq!(s["kind"], "Status", "{s}");
    assert_eq!(s["code"], want, "{s}");
    assert_eq!(s["reason"], reason, "{s}");
    s
}

/// The server still answers an ordinary authorized list, on a new connection.
async fn still_serving(server: &PodDebugServer) {
    let c = server.front_proxy_client("alice", &["dev"]);
    let (code, _, body) = c
        .request(Method::GET, &list_path(), &[], Bytes::new())
        .await
        .expect("the server answers after the hostile input");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(json_of(&body)["kind"], "PodDebugContainerList");
}

/// Writes `bytes` on a new TLS connection made by `client` (its certificate, not its headers)
/// and reads until the server closes it or `T` passes.
async fn raw_exchange(client: &TestClient, bytes: &[u8]) -> String {
    let mut tls = client.connect_tls().await.expect("TLS");
    // The server may answer and close before it read everything (a refused header block):
    // what it sent is read all the same.
    if tls.write_all(bytes).await.is_ok() {
        let _ = tls.flush().await;
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(T, async {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The status codes of the HTTP/1.1 responses in `raw`, in order.
fn response_codes(raw: &str) -> Vec<u16> {
    raw.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| raw.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

/// The identity headers the aggregator adds, for raw requests.
fn front_proxy_headers(user: &str) -> String {
    format!("X-Remote-User: {user}\r\nX-Remote-Group: dev\r\n")
}

// ---------- bodies ----------

#[tokio::test]
async fn hostile_bodies_and_content_types_get_a_status() {
    let (fake, _pki, server) = setup(&[]).await;
    let c = server.front_proxy_client("alice", &["dev"]);
    fake.clear_requests();

    // Nesting far past serde_json's recursion limit: a 400, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let (code, _, body) = c
        .request(
            Method::POST,
            &create_path("deep"),
            &[("content-type", "application/json")],
            deep,
        )
        .await
        .expect("deep");
    assert_status(code, &body, 400, "BadRequest");
    let deep_obj = format!(
        r#"{{"container":{{"args":[{}0{}]}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let (code, _, body) = c
        .request(
            Method::POST,
            &create_path("deep"),
            &[("content-type", "application/json")],
            deep_obj,
        )
        .await
        .expect("deep object");
    assert_status(code, &body, 400, "BadRequest");

    // A repeated key is refused by name, wherever it is, as kube-apiserver's strict decoding.
    for dup in [
        r#"{"metadata":{"name":"d"},"metadata":{"name":"e"}}"#,
        r#"{"container":{"image":"busybox","image":"evil"}}"#,
        r#"{"container":{"securityContext":{"privileged":false,"privileged":true}}}"#,
    ] {
        let (code, _, body) = c
            .request(
                Method::POST,
                &create_path("d"),
                &[("content-type", "application/json")],
                dup,
            )
            .await
            .expect("dup");
        let s = assert_status(code, &body, 400, "BadRequest");
        assert!(
            s["message"]
                .as_str()
                .unwrap_or("")
                .contains("duplicate field"),
            "{dup}: {s}"
        );
    }

    // Truncated, not JSON, a JSON string, and NUL bytes.
    for bad in [
        &b"{\"container\":{\"image\":"[..],
        b"not json",
        b"\"a string\"",
        b"{\"metadata\":{\"name\":\"a\x00b\"}}",
        b"\xef\xbb\xbf{}",
    ] {
        let (code, _, body) = c
            .request(
                Method::POST,
                &create_path("d"),
                &[("content-type", "application/json")],
                bad.to_vec(),
            )
            .await
            .expect("bad");
        assert_status(code, &body, 400, "BadRequest");
    }

    // Another media type is a 415, whatever the body says.
    for ct in [
        "text/plain",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
        "application/json-patch+json",
        "multipart/form-data; boundary=x",
    ] {
        let (code, _, body) = c
            .request(
                Method::POST,
                &create_path("d"),
                &[("content-type", ct)],
                "{}",
            )
            .await
            .expect("content type");
        assert_status(code, &body, 415, "UnsupportedMediaType");
    }
    // A content type that is not even a header-safe string is refused the same way.
    let (code, _, body) = c
        .request(
            Method::POST,
            &create_path("d"),
            &[("content-type", "application/jsonx")],
            "{}",
        )
        .await
        .expect("jsonx");
    assert_status(code, &body, 415, "UnsupportedMediaType");

    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.path.contains("ephemeralcontainers")),
        "no hostile body reached the pod"
    );
    still_serving(&server).await;
}

// ---------- names, encodings, headers ----------

#[tokio::test]
async fn over_long_names_and_odd_encodings_get_a_status() {
    let (fake, _pki, server) = setup(&[]).await;
    let c = server.front_proxy_client("alice", &["dev"]);
    fake.clear_requests();

    // A debug name past the 63 characters of a container name: 422 on the name.
    let long = "a".repeat(300);
    let (code, _, body) = c
        .request(
            Method::POST,
            &create_path(&long),
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .expect("long name");
    let s = assert_status(code, &body, 422, "Invalid");
    assert!(s["message"].as_str().unwrap_or("").contains("63"), "{s}");

    // A pod name no pod can have: a Status, and the cluster is asked nothing about it.
    let long_pod = format!("{GV}/namespaces/{NS}/pods/{}/debug/d", "p".repeat(5000));
    let (code, _, body) = c
        .request(
            Method::POST,
            &long_pod,
            &[("content-type", "application/json")],
            "{}",
        )
        .await
        .expect("long pod");
    assert!(code.is_client_error(), "{code}");
    assert_eq!(json_of(&body)["kind"], "Status");

    // Odd encodings in path segments: NUL, an overlong '/', a lone surrogate, a bare '%'.
    for seg in [
        "a%00b",
        "%C0%AF",
        "%ED%A0%80",
        "50%",
        "%2e%2e",
        "a%0d%0aX-Injected:%201",
    ] {
        let (code, _, body) = c
            .request(Method::GET, &create_path(seg), &[], Bytes::new())
            .await
            .expect("segment");
        assert!(
            code == StatusCode::BAD_REQUEST || code == StatusCode::NOT_FOUND,
            "{seg}: {code} {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(json_of(&body)["kind"], "Status", "{seg}");
    }

    // Odd query values: a watch flag that is no boolean, a selector that is not one, NUL in
    // the container of an attach (refused before any upgrade).
    for q in [
        "watch=%FF",
        "fieldSelector=%ZZ",
        "labelSelector=a%20in%20(",
        "limit=-1",
        "resourceVersion=%00",
    ] {
        let (code, _, body) = c
            .request(
                Method::GET,
                &format!("{}?{q}", list_path()),
                &[],
                Bytes::new(),
            )
            .await
            .expect("query");
        assert!(
            code == StatusCode::OK || code == StatusCode::BAD_REQUEST,
            "{q}: {code} {}",
            String::from_utf8_lossy(&body)
        );
        let kind = &json_of(&body)["kind"];
        assert!(
            kind == "Status" || kind == "PodDebugContainerList",
            "{q}: {kind}"
        );
    }
    let (code, _, body) = c
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/attach?container=%00&stdout=maybe"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("attach query");
    assert_status(code, &body, 400, "BadRequest");

    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.path.contains("X-Injected") && !r.path.contains('\0')),
        "{:?}",
        fake.requests()
    );
    still_serving(&server).await;
}

#[tokio::test]
async fn huge_headers_are_refused_and_the_server_keeps_serving() {
    let (_fake, pki, server) = setup(&["--max-request-header-bytes=65536"]).await;
    let big = "x".repeat(200 * 1024);
    // HTTP/1.1: hyper answers 431 or closes; never a 200, never a crash.
    let c = server.front_proxy_client("alice", &["dev"]);
    match c
        .request(Method::GET, &list_path(), &[("x-big", &big)], Bytes::new())
        .await
    {
        Ok((code, _, _)) => assert_eq!(code, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        Err(e) => eprintln!("HTTP/1.1 connection refused the header block: {e}"),
    }
    // Many small headers adding up past the limit.
    let many: String = (0..4000).map(|i| format!("X-H{i}: {i:040}\r\n")).collect();
    let raw = raw_exchange(
        &c,
        format!(
            "GET {} HTTP/1.1\r\nHost: x\r\n{many}{}Connection: close\r\n\r\n",
            list_path(),
            front_proxy_headers("alice")
        )
        .as_bytes(),
    )
    .await;
    let codes = response_codes(&raw);
    assert!(codes.is_empty() || codes == [431], "{codes:?}");
    // HTTP/2: the header list is bounded too.
    let h2 = server
        .client_builder()
        .http2()
        .front_proxy(&pki, "alice", &["dev"], &[])
        .build();
    match h2
        .request(Method::GET, &list_path(), &[("x-big", &big)], Bytes::new())
        .await
    {
        Ok((code, _, _)) => assert!(code.is_client_error(), "{code}"),
        Err(e) => eprintln!("HTTP/2 stream refused: {e}"),
    }
    still_serving(&server).await;
}

// ---------- HTTP/2 abuse ----------

async fn h2_connect(
    server: &PodDebugServer,
    pki: &TestPki,
) -> (h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>) {
    let c = server
        .client_builder()
        .http2()
        .front_proxy(pki, "alice", &["dev"], &[])
        .build();
    let tls = c.connect_tls().await.expect("TLS");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(b"h2".as_slice()));
    // Flow-control windows as Go's HTTP/2 client (kube-apiserver's aggregator) sets them: with
    // h2's default 64 KiB connection window the server must split the 1,000 concurrent answers
    // into small DATA frames as WINDOW_UPDATEs trickle in, and the h2 client counts small frames
    // against a budget of its own and ends the connection (ENHANCE_YOUR_CALM) — a client limit
    // that says nothing about the server, which CI hit once in a while under load.
    let (send, conn) = h2::client::Builder::new()
        .initial_connection_window_size(1 << 30)
        .initial_window_size(4 << 20)
        .handshake(tls)
        .await
        .expect("h2 handshake");
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, task)
}

fn h2_request(server: &PodDebugServer, path: &str) -> http::Request<()> {
    http::Request::builder()
        .method(Method::GET)
        .uri(format!("{}{path}", server.url()))
        .header("x-remote-user", "alice")
        .header("x-remote-group", "dev")
        .body(())
        .expect("request")
}

#[tokio::test]
async fn http2_many_streams_and_rapid_reset_leave_the_server_serving() {
    let (_fake, pki, server) = setup(&[]).await;

    // 1,000 concurrent streams on one connection: each is answered or refused by the
    // protocol (REFUSED_STREAM past the concurrency limit), none hangs.
    let (send, task) = h2_connect(&server, &pki).await;
    let mut waits = Vec::new();
    for _ in 0..1000 {
        let s = send.clone();
        let req = h2_request(&server, &list_path());
        waits.push(tokio::spawn(async move {
            let s = s.ready().await.map_err(|e| e.to_string())?;
            let mut s = s;
            let (resp, _) = s.send_request(req, true).map_err(|e| e.to_string())?;
            let resp = resp.await.map_err(|e| e.to_string())?;
            let code = resp.status().as_u16();
            // Read the body as a client does: left unread, its DATA frames would count against
            // the h2 client's own budget for small frames, and the client would end the
            // connection itself (ENHANCE_YOUR_CALM), which says nothing about the server.
            let mut body = resp.into_body();
            while let Some(chunk) = body.data().await {
                let chunk = chunk.map_err(|e| e.to_string())?;
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            Ok::<u16, String>(code)
        }));
    }
    let mut ok = 0;
    for w in waits {
        match tokio::time::timeout(T * 3, w).await {
            Ok(Ok(Ok(200))) => ok += 1,
            Ok(Ok(Ok(code))) => panic!("stream answered {code}"),
            Ok(Ok(Err(e))) => assert!(
                e.contains("refused")
                    || e.contains("REFUSED")
                    || e.contains("GOAWAY")
                    || e.contains("closed"),
                "stream error {e}"
            ),
            Ok(Err(e)) => panic!("task {e}"),
            Err(_) => panic!("a stream hung"),
        }
    }
    assert!(ok > 0, "no stream was served");
    eprintln!("{ok} of 1000 concurrent streams served");
    drop(send);
    task.abort();

    // Rapid reset (CVE-2023-44487): open and cancel streams as fast as possible. The server
    // may end the connection (GOAWAY); it must not keep working on the cancelled requests
    // nor stop serving others.
    let (send, task) = h2_connect(&server, &pki).await;
    let mut s = send;
    let mut sent = 0;
    for _ in 0..5000 {
        let Ok(ready) = s.clone().ready().await else {
            break;
        };
        s = ready;
        let Ok((_resp, mut stream)) = s.send_request(h2_request(&server, &list_path()), false)
        else {
            break;
        };
        stream.send_reset(h2::Reason::CANCEL);
        sent += 1;
    }
    eprintln!("rapid reset: {sent} streams opened and cancelled before the connection ended");
    drop(s);
    task.abort();
    still_serving(&server).await;
    let logs = server.logs_text();
    assert!(!logs.contains("panicked"), "{logs}");
}

// ---------- smuggling and upgrades ----------

#[tokio::test]
async fn smuggling_attempts_are_refused_or_framed_one_way() {
    let (fake, _pki, server) = setup(&[]).await;
    let c = server.front_proxy_client("alice", &["dev"]);
    let id = front_proxy_headers("alice");
    let post = create_path("smug");
    fake.clear_requests();

    // Content-Length and Transfer-Encoding together: the framing is ambiguous. The smuggled
    // request must never be answered as a second request of this connection.
    let smuggled = format!(
        "GET {GV}/namespaces/{NS}/pods/{POD}/debug/SMUGGLED HTTP/1.1\r\nHost: x\r\n{id}\r\n"
    );
    let body = format!("0\r\n\r\n{smuggled}");
    let raw = raw_exchange(
        &c,
        format!(
            "POST {post}?dryRun=All HTTP/1.1\r\nHost: x\r\n{id}Content-Type: application/json\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    let codes = response_codes(&raw);
    eprintln!("CL+TE: {codes:?}");
    assert!(codes.len() <= 1 || codes[0] == 400, "{raw}");

    // Two different Content-Lengths: 400 and the connection closed.
    let raw = raw_exchange(
        &c,
        format!(
            "POST {post} HTTP/1.1\r\nHost: x\r\n{id}Content-Length: 2\r\nContent-Length: 40\r\n\r\n{{}}{smuggled}"
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(response_codes(&raw), [400], "{raw}");

    // A Transfer-Encoding that is not chunked: cannot be framed, 400 (RFC 9112 §6.3) or 501.
    let raw = raw_exchange(
        &c,
        format!("POST {post} HTTP/1.1\r\nHost: x\r\n{id}Transfer-Encoding: gzip\r\n\r\n{{}}")
            .as_bytes(),
    )
    .await;
    let codes = response_codes(&raw);
    assert!(
        codes == [400] || codes == [501] || codes.is_empty(),
        "{raw}"
    );

    // Obsolete line folding hides a header from a proxy that does not unfold: refused.
    let raw = raw_exchange(
        &c,
        format!(
            "GET {} HTTP/1.1\r\nHost: x\r\n{id}X-Fold: a\r\n b\r\nConnection: close\r\n\r\n",
            list_path()
        )
        .as_bytes(),
    )
    .await;
    let codes = response_codes(&raw);
    assert!(codes == [400] || codes == [200], "{raw}");

    assert!(
        fake.requests().iter().all(|r| !r.path.contains("SMUGGLED")),
        "the smuggled request reached the cluster"
    );
    assert!(
        !server.logs_text().contains("SMUGGLED"),
        "the smuggled request was served"
    );
    still_serving(&server).await;
}

#[tokio::test]
async fn a_refused_upgrade_then_a_second_request_on_the_same_connection() {
    let (fake, _pki, server) = setup(&[]).await;
    fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"][poddebug_tests::fake::ATTACH_REFUSE_ANNOTATION] = json!("403")
    })
    .expect("pod");
    let c = server.front_proxy_client("alice", &["dev"]);
    let id = front_proxy_headers("alice");
    // The upgrade and a pipelined ordinary request behind it.
    let raw = raw_exchange(
        &c,
        format!(
            "POST {GV}/namespaces/{NS}/pods/{POD}/attach?container=dbg&stdin=true&stdout=true HTTP/1.1\r\nHost: x\r\n{id}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\nGET {} HTTP/1.1\r\nHost: x\r\n{id}Connection: close\r\n\r\n",
            list_path()
        )
        .as_bytes(),
    )
    .await;
    let codes = response_codes(&raw);
    // The refusal is relayed as the upstream's Status; the connection is then either closed
    // (the second request was never read as part of a stream) or serves the second request
    // as an ordinary one. Never a 101, never the second request's bytes sent upstream.
    assert_eq!(codes.first(), Some(&403), "{raw}");
    assert!(raw.contains("attach refused by the fake"), "{raw}");
    assert!(codes.len() == 1 || codes[1] == 200, "{raw}");
    if codes.len() == 2 {
        assert!(raw.contains("PodDebugContainerList"), "{raw}");
    }
    assert!(!codes.contains(&101));
    still_serving(&server).await;
}

// ---------- identity ----------

#[tokio::test]
async fn spoofed_identity_headers_are_ignored_from_every_kind_of_client() {
    let (fake, pki, server) = setup(&[]).await;
    fake.add_token("bob-token", UserInfo::new("bob", &["system:authenticated"]));
    fake.clear_sars();
    fake.clear_requests();
    let spoof: &[(&str, &str)] = &[
        ("impersonate-user", "system:admin"),
        ("impersonate-group", "system:masters"),
        ("impersonate-uid", "0"),
        ("impersonate-extra-scopes", "all"),
        ("x-remote-user", "system:admin"),
        ("x-remote-group", "system:masters"),
        ("x-remote-extra-scopes", "all"),
        ("x-remote-uid", "0"),
    ];
    let anonymous = server.client_builder().build();
    let client_cert = server
        .client_builder()
        .client_cert_key(&pki.client_cert(Ca::Client, "carol", &["qa"]))
        .build();
    let bearer = server.client_builder().bearer_token("bob-token").build();
    let aggregator = server.front_proxy_client("alice", &["dev"]);
    // The aggregator is trusted for the X-Remote-* headers it sends (the real one strips a
    // client's before adding its own), so only Impersonate-* is a spoof coming from it.
    let impersonate_only = &spoof[..4];
    for (who, c, headers) in [
        ("system:anonymous", &anonymous, spoof),
        ("carol", &client_cert, spoof),
        ("bob", &bearer, spoof),
        ("alice", &aggregator, impersonate_only),
    ] {
        let (code, _, body) = c
            .request(Method::GET, &list_path(), headers, Bytes::new())
            .await
            .expect("request");
        // The aggregator's own X-Remote-User is sent first and wins; every other client's
        // X-Remote-* is ignored; Impersonate-* is never honoured here (kube-apiserver handled
        // impersonation before proxying).
        assert!(
            code == StatusCode::OK,
            "{who}: {code} {}",
            String::from_utf8_lossy(&body)
        );
        let sars = fake.sars();
        let last = sars.last().expect("a SubjectAccessReview");
        assert_eq!(last.attributes.user, who);
    }
    assert!(
        fake.sars()
            .iter()
            .all(|s| s.attributes.user != "system:admin"
                && !s.attributes.groups.iter().any(|g| g == "system:masters")),
        "a spoofed identity reached the authorizer"
    );
    assert!(
        fake.requests().iter().all(|r| r.impersonation.is_empty()),
        "Impersonate-* headers were passed on to the cluster"
    );
    // The token of a real admin in a header the server does not read is no credential
    // either: it never reaches a TokenReview, and the request stays anonymous.
    let reviews = fake.token_reviews_count();
    let (code, _, _) = anonymous
        .request(
            Method::GET,
            &list_path(),
            &[("x-auth-token", ADMIN_TOKEN), ("cookie", ADMIN_TOKEN)],
            Bytes::new(),
        )
        .await
        .expect("request");
    assert_eq!(code, StatusCode::OK);
    assert_eq!(fake.token_reviews_count(), reviews);
    assert!(fake.sars().iter().all(|s| s.attributes.user != "admin"));
}

#[tokio::test]
async fn expired_not_yet_valid_and_unknown_ca_certificates_are_refused() {
    let (fake, pki, server) = setup(&[]).await;
    fake.clear_sars();
    let cases = [
        (
            "expired client certificate",
            pki.client_cert_valid_between(Ca::Client, "mallory", (2000, 1, 1), (2001, 1, 1)),
        ),
        (
            "not yet valid client certificate",
            pki.client_cert_valid_between(Ca::Client, "mallory", (2090, 1, 1), (2099, 1, 1)),
        ),
        (
            "client certificate from an unknown CA",
            TestPki::new().client_cert(Ca::Client, "mallory", &["system:masters"]),
        ),
        (
            "expired front-proxy certificate",
            pki.client_cert_valid_between(
                Ca::FrontProxy,
                poddebug_tests::pki::FRONT_PROXY_CLIENT_CN,
                (2000, 1, 1),
                (2001, 1, 1),
            ),
        ),
    ];
    for (what, cert) in cases {
        let c = server
            .client_builder()
            .client_cert_key(&cert)
            .header("x-remote-user", "mallory")
            .build();
        match c
            .request(Method::GET, &list_path(), &[], Bytes::new())
            .await
        {
            Ok((code, _, body)) => {
                assert_status(code, &body, 401, "Unauthorized");
            }
            // Refusing the handshake is as good (rustls checks the chain it was given).
            Err(e) => eprintln!("{what}: handshake refused: {e}"),
        }
    }
    assert!(
        fake.sars().iter().all(|s| s.attributes.user != "mallory"),
        "a bad certificate authenticated"
    );
    still_serving(&server).await;
}

#[tokio::test]
async fn a_body_that_stalls_is_ended_by_the_request_timeout() {
    let (fake, _pki, server) = setup(&["--request-timeout=2s"]).await;
    fake.clear_requests();
    let c = server.front_proxy_client("alice", &["dev"]);
    let mut tls = c.connect_tls().await.expect("TLS");
    // Headers announce 100 bytes; 10 come, then nothing.
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"contain",
        create_path("stall"),
        front_proxy_headers("alice")
    );
    tls.write_all(head.as_bytes()).await.expect("write");
    tls.flush().await.expect("flush");
    let mut out = Vec::new();
    let read = tokio::time::timeout(T, async {
        let mut buf = [0u8; 4096];
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let raw = String::from_utf8_lossy(&out);
    assert!(
        read.is_ok(),
        "the connection was still open after {T:?}: {raw}"
    );
    // Answered (504 Timeout, a Status) or closed; the pod was never touched.
    let codes = response_codes(&raw);
    assert!(
        codes.is_empty() || codes == [504] || codes == [408],
        "{raw}"
    );
    if !codes.is_empty() {
        assert!(raw.contains("\"kind\":\"Status\""), "{raw}");
    }
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.path.contains("ephemeralcontainers")),
        "the partial body reached the pod"
    );
    still_serving(&server).await;
}
