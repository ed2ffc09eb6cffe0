//! Connection limits end to end, over real loopback TLS sockets to the `poddebug-apiserver`
//! binary: the HTTP/1.1 header-read timeout, the idle timeout (HTTP/1.1 and HTTP/2), the cap on
//! open connections, and upgraded streams that outlive both timeouts.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use poddebug_tests::channel::{self, ChannelClient};
use poddebug_tests::{ContainerState, FakeKube, PodDebugServer, TestClient};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "default";
const POD: &str = "web";
/// Upper bound of every wait; reaching it fails the test.
const BOUND: Duration = Duration::from_secs(20);

async fn setup(extra: &[&str]) -> (FakeKube, PodDebugServer, TestClient) {
    let fake = FakeKube::start().await;
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true, "tty": true}],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, "dbg", ContainerState::Running));
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, extra).await;
    let client = server.front_proxy_client("alice", &["system:authenticated"]);
    (fake, server, client)
}

/// Reads until the server closes the connection (EOF or reset); false if it stays open for
/// [`BOUND`].
async fn closed_by_server<S: tokio::io::AsyncRead + Unpin>(io: &mut S) -> bool {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(BOUND, async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

async fn healthz(c: &TestClient) -> Option<StatusCode> {
    c.request(Method::GET, "/healthz", &[], Bytes::new())
        .await
        .ok()
        .map(|r| r.0)
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_headers_is_closed() {
    let (_fake, _server, client) = setup(&["--read-header-timeout=1s"]).await;
    let mut slow = client.connect_tls().await.expect("TLS");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .expect("half a header");
    // The server keeps serving others meanwhile.
    assert_eq!(healthz(&client).await, Some(StatusCode::OK));
    assert!(
        closed_by_server(&mut slow).await,
        "a half-sent request head must not hold its connection"
    );
    // A connection that sends nothing at all after the handshake is closed too.
    let mut silent = client.connect_tls().await.expect("TLS");
    assert!(closed_by_server(&mut silent).await);
    assert_eq!(healthz(&client).await, Some(StatusCode::OK));
}

#[tokio::test]
async fn idle_http1_and_http2_connections_are_closed() {
    let (fake, server, client) =
        setup(&["--idle-connection-timeout=1s", "--read-header-timeout=60s"]).await;

    // HTTP/1.1: one request, then nothing; the connection closes well before the header-read
    // timeout, so it is the idle rule that closed it.
    let mut h1 = client.connect_tls().await.expect("TLS");
    h1.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Remote-User: alice\r\n\r\n")
        .await
        .expect("request");
    let mut first = [0u8; 12];
    h1.read_exact(&mut first).await.expect("response");
    assert_eq!(&first, b"HTTP/1.1 200");
    let closed = tokio::time::timeout(Duration::from_secs(30), closed_by_server(&mut h1)).await;
    assert_eq!(closed, Ok(true), "idle keep-alive connection stays open");

    // HTTP/2: the server sends GOAWAY and the client's connection task ends.
    let h2_client = server
        .client_builder()
        .front_proxy(&fake.pki().clone(), "alice", &["system:authenticated"], &[])
        .http2()
        .build();
    let tls = h2_client.connect_tls().await.expect("TLS");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(b"h2".as_slice()));
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("HTTP/2 handshake");
    let conn = tokio::spawn(conn);
    let req = Request::builder()
        .uri(format!("{}/healthz", server.url()))
        .version(http::Version::HTTP_2)
        .header("x-remote-user", "alice")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = send.send_request(req).await.expect("HTTP/2 request");
    assert_eq!(resp.status(), StatusCode::OK);
    let _ = resp.into_body().collect().await;
    let ended = tokio::time::timeout(BOUND, conn).await;
    assert!(ended.is_ok(), "idle HTTP/2 connection stays open");
}

#[tokio::test]
async fn connections_over_the_cap_are_refused_and_slots_come_back() {
    let (_fake, server, client) = setup(&["--max-connections=2"]).await;
    // The readiness probes' connections may still be closing: wait until a request passes.
    let mut ok = false;
    for _ in 0..100 {
        if healthz(&client).await == Some(StatusCode::OK) {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok);
    let mut held = Vec::new();
    for _ in 0..100 {
        if held.len() == 2 {
            break;
        }
        match client.connect_tls().await {
            Ok(c) => held.push(c),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(held.len(), 2, "two connections fit under the cap");
    // The third is closed as soon as it is accepted: its TLS handshake fails.
    assert!(
        client.connect_tls().await.is_err(),
        "a third connection must be refused"
    );
    // Giving one back lets the next one in.
    drop(held.pop());
    let mut served = false;
    for _ in 0..100 {
        if healthz(&client).await == Some(StatusCode::OK) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "a freed slot is usable again");
    // The refusal is counted for operators (the slot of the request above may still be
    // closing: retry a bounded number of times).
    let reader = server.front_proxy_client("metrics-reader", &["system:masters"]);
    let mut body = Bytes::new();
    for _ in 0..100 {
        if let Ok((StatusCode::OK, _, b)) = reader
            .request(Method::GET, "/metrics", &[], Bytes::new())
            .await
        {
            body = b;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = String::from_utf8_lossy(&body);
    let refused = text
        .lines()
        .find(|l| l.starts_with("poddebug_apiserver_refused_connections_total "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert!(refused.is_some_and(|n| n >= 1.0), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("poddebug_apiserver_open_connections ")),
        "{text}"
    );
}

#[tokio::test]
async fn an_attach_stream_outlives_both_timeouts() {
    let (_fake, _server, client) =
        setup(&["--idle-connection-timeout=1s", "--read-header-timeout=1s"]).await;
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(
            Method::GET,
            &format!(
                "/apis/poddebug.dev/v1alpha1/namespaces/{NS}/pods/{POD}/attach?container=dbg&stdin=true&stdout=true&tty=true"
            ),
            &headers,
        )
        .await
        .expect("upgrade");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS);
    let mut c = ChannelClient::new(resp.io.expect("upgraded"), channel::V5).await;
    // Quiet for three times both timeouts, then the stream still carries data both ways.
    tokio::time::sleep(Duration::from_secs(3)).await;
    c.stdin(b"still here\n").await.expect("send");
    c.read_until(BOUND, |t| t.stdout_text().contains("still here"))
        .await;
    assert!(c.transcript().stdout_text().contains("still here"));
}
