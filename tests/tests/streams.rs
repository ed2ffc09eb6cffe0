//! Attach and log streams end to end: client → the real `poddebug-apiserver` binary → the fake
//! kube-apiserver's attach (WebSocket v4/v5 and base64 variants, SPDY/3.1) and log endpoints.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::{self, ChannelClient, Transcript, ch};
use poddebug_tests::spdy::AttachSession;
use poddebug_tests::{
    ContainerState, FakeKube, PODDEBUG_USER, PodDebugServer, TestClient, TestPki,
};
use serde_json::{Value, json};

const NS: &str = "default";
const POD: &str = "web";
const DBG: &str = "dbg";
const GV: &str = "/apis/poddebug.dev/v1alpha1";
const T: Duration = Duration::from_secs(10);

use poddebug_tests::fake::{
    ATTACH_DROP_AFTER_ANNOTATION as DROP_AFTER, ATTACH_EXIT_CODE_ANNOTATION as EXIT_CODE,
    ATTACH_REFUSE_ANNOTATION as REFUSE,
};
const SPDY_VERSIONS: [&str; 5] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

type Io = TokioIo<Upgraded>;

struct Env {
    fake: FakeKube,
    server: PodDebugServer,
    client: TestClient,
}

async fn env(extra: &[&str]) -> Env {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
            "ephemeralContainers": [
                {"name": DBG, "image": "busybox", "stdin": true, "tty": true},
                {"name": "old", "image": "busybox"},
                {"name": "broken", "image": "nope"},
            ],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, DBG, ContainerState::Running));
    assert!(fake.set_ec_state(NS, POD, "old", ContainerState::terminated(0, "Completed")));
    assert!(fake.set_ec_state(
        NS,
        POD,
        "broken",
        ContainerState::waiting("ImagePullBackOff")
    ));
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, extra).await;
    let client = server.front_proxy_client("alice", &["system:authenticated", "devs"]);
    Env {
        fake,
        server,
        client,
    }
}

fn annotate(fake: &FakeKube, key: &str, value: &str) {
    fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"][key] = json!(value)
    })
    .expect("pod exists");
}

fn attach_path(query: &str) -> String {
    format!("/apis/poddebug.dev/v1alpha1/namespaces/{NS}/pods/{POD}/attach?{query}")
}

fn log_path(query: &str) -> String {
    format!("/apis/poddebug.dev/v1alpha1/namespaces/{NS}/pods/{POD}/log?{query}")
}

const TTY: &str = "container=dbg&stdin=true&stdout=true&tty=true";
const NO_TTY: &str = "container=dbg&stdin=true&stdout=true&stderr=true";

async fn ws_upgrade(
    client: &TestClient,
    query: &str,
    protocols: &str,
) -> poddebug_tests::UpgradeResponse {
    let headers = TestClient::websocket_headers(protocols);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    client
        .upgrade(Method::GET, &attach_path(query), &headers)
        .await
        .expect("upgrade request")
}

async fn ws(client: &TestClient, query: &str, protocols: &str) -> ChannelClient<Io> {
    let resp = ws_upgrade(client, query, protocols).await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    let protocol = resp
        .headers
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok())
        .expect("a subprotocol was chosen")
        .to_owned();
    assert!(resp.headers.get("sec-websocket-accept").is_some());
    ChannelClient::new(resp.io.expect("upgraded"), &protocol).await
}

async fn spdy_upgrade(
    client: &TestClient,
    query: &str,
    versions: &[&str],
) -> poddebug_tests::UpgradeResponse {
    let mut headers = vec![("connection", "Upgrade"), ("upgrade", "SPDY/3.1")];
    for v in versions {
        headers.push(("x-stream-protocol-version", v));
    }
    client
        .upgrade(Method::POST, &attach_path(query), &headers)
        .await
        .expect("upgrade request")
}

async fn spdy(client: &TestClient, query: &str, tty: bool) -> AttachSession<Io> {
    let resp = spdy_upgrade(client, query, &SPDY_VERSIONS).await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    assert_eq!(
        resp.headers
            .get("x-stream-protocol-version")
            .map(|v| v.as_bytes()),
        Some(b"v4.channel.k8s.io".as_slice())
    );
    AttachSession::open(resp.io.expect("upgraded"), true, true, !tty, tty)
        .await
        .expect("streams open")
}

async fn metric(server: &PodDebugServer, name: &str) -> Option<f64> {
    let client = server.front_proxy_client("metrics-reader", &["system:masters"]);
    let (status, _, body) = client
        .request(Method::GET, "/metrics", &[], bytes::Bytes::new())
        .await
        .ok()?;
    if status != StatusCode::OK {
        return None;
    }
    String::from_utf8_lossy(&body)
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn wait_no_streams(server: &PodDebugServer, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let n = metric(server, "poddebug_apiserver_active_streams").await;
        if n == Some(0.0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "streams still open: {n:?}\nlogs:\n{}",
            server.logs_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn status_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| json!(String::from_utf8_lossy(body)))
}

#[tokio::test]
async fn websocket_v5_echo_resize_zero_length_close_and_exit() {
    let e = env(&[]).await;
    let mut c = ws(&e.client, TTY, "v5.channel.k8s.io, v4.channel.k8s.io").await;
    assert_eq!(c.protocol(), channel::V5);
    c.read_until(T, |t| !t.frames.is_empty()).await;
    assert_eq!(
        c.transcript().frames[0],
        (ch::STDOUT, 0),
        "the initial zero-length stdout frame passes through"
    );
    c.stdin(b"hello\n").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"hello\n")).await;
    c.resize(80, 24).await.expect("resize");
    c.read_until(T, |t| t.stdout_text().contains("resize 80x24\n"))
        .await;
    c.stdin(b"").await.expect("empty frame");
    c.read_until(T, |t| {
        t.frames.iter().filter(|f| **f == (ch::STDOUT, 0)).count() == 2
    })
    .await;
    c.close_channel(ch::STDIN).await.expect("v5 close");
    let t = c.finish(T).await.clone();
    assert_eq!(t.stdout_text(), "hello\nresize 80x24\n");
    assert_eq!(t.exit_code(), Some(0), "{:?}", t.status());
    assert_eq!(t.close.as_ref().map(|c| c.0), Some(1000));
    assert!(t.ended);
    wait_no_streams(&e.server, T).await;
    assert!(e.server.wait_for_log("stream ended", T).await);
    let line = e
        .server
        .logs()
        .into_iter()
        .find(|l| l.contains("stream ended"))
        .unwrap_or_default();
    for needle in [
        "alice",
        "\"pod\":\"web\"",
        "\"container\":\"dbg\"",
        "websocket/v5.channel.k8s.io",
        "bytes_in",
        "bytes_out",
    ] {
        assert!(line.contains(needle), "{needle} in {line}");
    }
    assert!(
        metric(&e.server, "poddebug_apiserver_stream_bytes_total")
            .await
            .unwrap_or(0.0)
            > 0.0
    );
}

#[tokio::test]
async fn websocket_v4_and_base64_variants_report_exit_codes() {
    let e = env(&[]).await;
    annotate(&e.fake, EXIT_CODE, "3");
    for protocol in [channel::V4, channel::V4_BASE64, channel::V5_BASE64] {
        let mut c = ws(&e.client, NO_TTY, protocol).await;
        assert_eq!(c.protocol(), protocol);
        c.stdin(b"ping\x00\xff").await.expect("send");
        c.read_until(T, |t| t.stdout.ends_with(b"ping\x00\xff"))
            .await;
        // Ctrl-D: the fake's cat sees end of input (v4 has no CLOSE).
        c.stdin(b"\x04").await.expect("eof");
        let t = c.finish(T).await.clone();
        assert_eq!(t.stdout, b"ping\x00\xff", "{protocol}");
        assert_eq!(t.exit_code(), Some(3), "{protocol}: {:?}", t.status());
        assert_eq!(t.status().expect("status")["reason"], "NonZeroExitCode");
    }
    wait_no_streams(&e.server, T).await;
}

#[tokio::test]
async fn spdy_echo_resize_and_exit_status() {
    let e = env(&[]).await;
    let mut s = spdy(&e.client, NO_TTY, false).await;
    s.send_stdin(b"over spdy\n").await.expect("send");
    s.read_until(T, |t| t.stdout.ends_with(b"over spdy\n"))
        .await;
    s.send_stdin(b"").await.expect("zero-length data frame");
    s.close_stdin().await.expect("FIN");
    let t = s.finish(T).await.clone();
    assert_eq!(t.stdout_text(), "over spdy\n");
    assert_eq!(t.exit_code(), Some(0), "{:?}", t.status());
    drop(s);

    annotate(&e.fake, EXIT_CODE, "42");
    let mut s = spdy(&e.client, TTY, true).await;
    s.resize(100, 40).await.expect("resize");
    s.read_until(T, |t| t.stdout_text().contains("resize 100x40\n"))
        .await;
    s.send_stdin(b"x").await.expect("send");
    s.close_stdin().await.expect("FIN");
    let t = s.finish(T).await.clone();
    assert_eq!(t.stdout_text(), "resize 100x40\nx");
    assert_eq!(t.exit_code(), Some(42), "{:?}", t.status());
    drop(s);
    wait_no_streams(&e.server, T).await;
}

#[tokio::test]
async fn spdy_negotiation_failure_passes_through() {
    let e = env(&[]).await;
    let resp = spdy_upgrade(&e.client, TTY, &["v9.channel.k8s.io"]).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let body = String::from_utf8_lossy(&resp.body);
    assert!(
        body.starts_with("unable to upgrade: unable to negotiate protocol"),
        "{body}"
    );
    assert_eq!(
        resp.headers
            .get_all("x-accepted-stream-protocol-versions")
            .iter()
            .count(),
        4
    );
    assert!(
        resp.headers
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"))
    );
}

#[tokio::test]
async fn attach_waits_for_a_starting_container() {
    let e = env(&[]).await;
    assert!(
        e.fake
            .set_ec_state(NS, POD, DBG, ContainerState::waiting("ContainerCreating"))
    );
    let start = Instant::now();
    let fake_pod = e.fake.pod_json(NS, POD).is_some();
    assert!(fake_pod);
    let attach = ws(&e.client, TTY, channel::V5);
    let flip = async {
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(e.fake.set_ec_state(NS, POD, DBG, ContainerState::Running));
    };
    let (mut c, ()) = tokio::join!(attach, flip);
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "upgraded before the container ran"
    );
    c.stdin(b"up\n").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"up\n")).await;
    assert!(c.transcript().stdout.ends_with(b"up\n"));
}

#[tokio::test]
async fn attach_wait_times_out() {
    let e = env(&["--attach-wait-timeout=1s"]).await;
    assert!(
        e.fake
            .set_ec_state(NS, POD, DBG, ContainerState::waiting("ContainerCreating"))
    );
    let resp = ws_upgrade(&e.client, TTY, channel::V5).await;
    assert_eq!(resp.status, StatusCode::GATEWAY_TIMEOUT, "{resp:?}");
    let s = status_of(&resp.body);
    assert_eq!(s["reason"], "Timeout");
    assert!(
        s["message"]
            .as_str()
            .unwrap_or("")
            .contains("was not running after 1s"),
        "{s}"
    );
}

#[tokio::test]
async fn terminated_failed_and_non_debug_containers_get_a_status_before_any_upgrade() {
    let e = env(&[]).await;
    for (container, code, needle) in [
        ("old", 400, "has terminated"),
        ("broken", 400, "cannot start"),
        ("app", 400, "is not a debug container"),
        ("nothere", 400, "is not a debug container"),
    ] {
        for spdy_first in [false, true] {
            let q = format!("container={container}&stdin=true&stdout=true");
            let resp = if spdy_first {
                spdy_upgrade(&e.client, &q, &SPDY_VERSIONS).await
            } else {
                ws_upgrade(&e.client, &q, channel::V5).await
            };
            assert_eq!(resp.status.as_u16(), code, "{container}: {resp:?}");
            assert!(resp.io.is_none());
            let s = status_of(&resp.body);
            assert_eq!(s["kind"], "Status", "{s}");
            assert!(
                s["message"].as_str().unwrap_or("").contains(needle),
                "{container}: {s}"
            );
        }
    }
    // No attach reached the fake.
    assert!(!e.fake.requests().iter().any(|r| r.path.contains("/attach")));
}

#[tokio::test]
async fn bad_requests_are_refused_clearly() {
    let e = env(&[]).await;
    let (status, _, body) = e
        .client
        .request(Method::GET, &attach_path(TTY), &[], bytes::Bytes::new())
        .await
        .expect("request");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(status_of(&body)["message"], "Upgrade request required");

    let resp = e
        .client
        .upgrade(
            Method::GET,
            &attach_path(TTY),
            &[("connection", "Upgrade"), ("upgrade", "h2c")],
        )
        .await
        .expect("request");
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert!(
        status_of(&resp.body)["message"]
            .as_str()
            .unwrap_or("")
            .contains("unsupported upgrade")
    );

    let resp = ws_upgrade(&e.client, "stdin=true", channel::V5).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert!(
        status_of(&resp.body)["message"]
            .as_str()
            .unwrap_or("")
            .contains("container name must be specified")
    );

    let resp = ws_upgrade(&e.client, "container=dbg", channel::V5).await;
    assert_eq!(
        status_of(&resp.body)["message"],
        "you must specify at least 1 of stdin, stdout, stderr"
    );
}

#[tokio::test]
async fn http2_attach_is_refused_with_a_clear_message() {
    let e = env(&[]).await;
    let h2 = e
        .server
        .client_builder()
        .front_proxy(e.fake.pki(), "alice", &["system:authenticated"], &[])
        .http2()
        .build();
    let (status, _, body) = h2
        .request(Method::GET, &attach_path(TTY), &[], bytes::Bytes::new())
        .await
        .expect("h2 request");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = status_of(&body)["message"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(message.contains("HTTP/1.1"), "{message}");
}

#[tokio::test]
async fn upstream_refusals_pass_through_and_non_101_success_is_a_bad_gateway() {
    let e = env(&[]).await;
    annotate(&e.fake, REFUSE, "403");
    let resp = ws_upgrade(&e.client, TTY, channel::V5).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    assert_eq!(
        resp.headers.get("content-type").map(|v| v.as_bytes()),
        Some(b"application/json".as_slice())
    );
    let s = status_of(&resp.body);
    assert_eq!(s["message"], "attach refused by the fake for pod web");
    assert_eq!(s["code"], 403);
    // Byte for byte what the fake answered.
    let direct = e.fake.client(poddebug_tests::ADMIN_TOKEN);
    let headers = TestClient::websocket_headers(channel::V5);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let d = direct
        .upgrade(
            Method::GET,
            &format!("/api/v1/namespaces/{NS}/pods/{POD}/attach?{TTY}"),
            &headers,
        )
        .await
        .expect("direct");
    assert_eq!(d.body, resp.body);

    annotate(&e.fake, REFUSE, "text:500");
    let resp = spdy_upgrade(&e.client, TTY, &SPDY_VERSIONS).await;
    assert_eq!(resp.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        String::from_utf8_lossy(&resp.body),
        "fake kubelet refused the attach to pod web"
    );
    assert!(
        resp.headers
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"))
    );

    annotate(&e.fake, REFUSE, "200");
    let resp = ws_upgrade(&e.client, TTY, channel::V5).await;
    assert_eq!(resp.status, StatusCode::BAD_GATEWAY, "{resp:?}");
    assert!(resp.io.is_none());
    let s = status_of(&resp.body);
    assert!(
        s["message"]
            .as_str()
            .unwrap_or("")
            .contains("instead of 101"),
        "{s}"
    );
    wait_no_streams(&e.server, T).await;
}

#[tokio::test]
async fn upstream_dropping_mid_stream_ends_the_client_stream() {
    let e = env(&[]).await;
    annotate(&e.fake, DROP_AFTER, "10");
    let mut c = ws(&e.client, TTY, channel::V5).await;
    c.stdin(b"0123456789abcdef").await.expect("send");
    let t = c.finish(T).await.clone();
    assert!(t.ended, "the client sees the end");
    assert!(t.error.is_empty() && t.close.is_none(), "{t:?}");
    let mut s = spdy(&e.client, NO_TTY, false).await;
    s.send_stdin(b"0123456789abcdef").await.expect("send");
    let t = s.read_until(T, |_| false).await.clone();
    assert!(t.ended);
    wait_no_streams(&e.server, T).await;
}

#[tokio::test]
async fn client_dropping_mid_stream_leaks_nothing() {
    let e = env(&[]).await;
    let mut c = ws(&e.client, TTY, channel::V5).await;
    let mut s = spdy(&e.client, NO_TTY, false).await;
    c.stdin(b"abc").await.expect("send");
    s.send_stdin(b"abc").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"abc")).await;
    s.read_until(T, |t| t.stdout.ends_with(b"abc")).await;
    assert_eq!(
        metric(&e.server, "poddebug_apiserver_active_streams").await,
        Some(2.0)
    );
    drop(c);
    drop(s);
    wait_no_streams(&e.server, T).await;
    assert!(e.server.wait_for_log("client closed", T).await);
}

/// A deterministic byte generator without 0x04 (the fake's end-of-input byte).
fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match (x >> 24) as u8 {
                4 => 5,
                b => b,
            }
        })
        .collect()
}

fn chunk_len(i: usize, seed: u64) -> usize {
    1 + ((i as u64 * 7919 + seed * 104_729) % 16_000) as usize
}

async fn checksummed_ws(client: TestClient, seed: u64, total: usize) -> Transcript {
    let protocol = if seed.is_multiple_of(2) {
        channel::V5
    } else {
        channel::V4_BASE64
    };
    let mut c = ws(&client, NO_TTY, protocol).await;
    let payload = data(seed, total);
    let (mut sent, mut i) = (0, 0);
    while sent < total {
        let n = chunk_len(i, seed).min(total - sent);
        c.stdin(&payload[sent..sent + n]).await.expect("send");
        sent += n;
        i += 1;
        if sent - c.transcript().stdout.len() > 64 * 1024 {
            let want = sent - 32 * 1024;
            c.read_until(T, |t| t.stdout.len() >= want).await;
        }
    }
    c.read_until(T, |t| t.stdout.len() >= total).await;
    c.stdin(b"\x04").await.expect("eof");
    let t = c.finish(T).await.clone();
    assert_eq!(t.stdout.len(), total, "stream {seed}");
    assert!(
        t.stdout == payload,
        "stream {seed}: bytes lost or reordered"
    );
    assert_eq!(t.exit_code(), Some(0));
    t
}

async fn checksummed_spdy(client: TestClient, seed: u64, total: usize) -> Transcript {
    let mut s = spdy(&client, NO_TTY, false).await;
    let payload = data(seed, total);
    let (mut sent, mut i) = (0, 0);
    while sent < total {
        let n = chunk_len(i, seed).min(total - sent);
        s.send_stdin(&payload[sent..sent + n]).await.expect("send");
        sent += n;
        i += 1;
        if sent - s.transcript().stdout.len() > 64 * 1024 {
            let want = sent - 32 * 1024;
            s.read_until(T, |t| t.stdout.len() >= want).await;
        }
    }
    s.close_stdin().await.expect("FIN");
    let t = s.finish(T).await.clone();
    assert!(
        t.stdout == payload,
        "stream {seed}: bytes lost or reordered ({} of {total})",
        t.stdout.len()
    );
    assert_eq!(t.exit_code(), Some(0));
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_streams_lose_and_reorder_nothing() {
    // One user's 24 streams at once: more than --max-sessions-per-user allows by default.
    let e = env(&["--max-sessions-per-user=0"]).await;
    let total = 300 * 1024;
    let mut tasks = Vec::new();
    for seed in 0..24u64 {
        let client = e.client.clone();
        tasks.push(tokio::spawn(async move {
            if seed % 3 == 2 {
                checksummed_spdy(client, seed, total).await
            } else {
                checksummed_ws(client, seed, total).await
            }
        }));
    }
    for t in tasks {
        t.await.expect("stream task");
    }
    wait_no_streams(&e.server, T).await;
    let bytes_in = metric(
        &e.server,
        "poddebug_apiserver_stream_bytes_total{direction=\"in\"}",
    )
    .await
    .unwrap_or(0.0);
    assert!(bytes_in >= (24 * total) as f64, "{bytes_in}");
}

#[tokio::test]
async fn shutdown_ends_streams_with_a_clear_message() {
    let mut e = env(&[]).await;
    let mut c = ws(&e.client, TTY, channel::V5).await;
    let mut b = ws(&e.client, TTY, channel::V4_BASE64).await;
    let mut s = spdy(&e.client, NO_TTY, false).await;
    c.stdin(b"a").await.expect("send");
    b.stdin(b"b").await.expect("send");
    s.send_stdin(b"s").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"a")).await;
    b.read_until(T, |t| t.stdout.ends_with(b"b")).await;
    s.read_until(T, |t| t.stdout.ends_with(b"s")).await;
    let long = Duration::from_secs(20);
    let (exit, tc, tb, ts) = tokio::join!(
        e.server.terminate(),
        c.finish(long),
        b.finish(long),
        s.read_until(long, |_| false)
    );
    assert!(exit.is_some(), "the server exits");
    for t in [tc, tb] {
        let st = t.status().expect("a Status on the error channel");
        assert_eq!(
            st["message"], "the poddebug API server is shutting down",
            "{st}"
        );
        assert_eq!(st["status"], "Failure");
        assert_eq!(t.close.as_ref().map(|c| c.0), Some(1001), "{t:?}");
        assert!(t.ended);
    }
    let st = ts.status().expect("a Status on the SPDY error stream");
    assert_eq!(st["message"], "the poddebug API server is shutting down");
    assert!(ts.error_done && ts.goaway && ts.ended, "{ts:?}");
}

#[tokio::test]
async fn impersonation_and_header_hygiene_on_the_upstream_attach() {
    for impersonate in [false, true] {
        let e = env(if impersonate { &["--impersonate"] } else { &[] }).await;
        let client = e
            .client
            .with_header("impersonate-user", "system:admin")
            .with_header("x-remote-extra-scopes", "everything")
            .with_header("cookie", "session=1");
        let mut c = ws(&client, TTY, channel::V5).await;
        c.close_channel(ch::STDIN).await.expect("close");
        c.finish(T).await;
        let rec = e
            .fake
            .requests()
            .into_iter()
            .find(|r| r.path.contains("/attach"))
            .expect("an upstream attach");
        assert_eq!(rec.status, 101);
        assert_eq!(rec.authenticated_as, PODDEBUG_USER);
        assert_eq!(
            rec.path,
            format!(
                "/api/v1/namespaces/{NS}/pods/{POD}/attach?container=dbg&stdin=true&stdout=true&tty=true"
            )
        );
        if impersonate {
            assert_eq!(rec.user, "alice");
            assert!(
                rec.impersonation
                    .contains(&("impersonate-user".into(), "alice".into())),
                "{:?}",
                rec.impersonation
            );
            assert!(
                rec.impersonation
                    .contains(&("impersonate-group".into(), "devs".into()))
            );
            assert!(!rec.impersonation.iter().any(|(_, v)| v == "system:admin"));
        } else {
            assert_eq!(rec.user, PODDEBUG_USER);
            assert!(rec.impersonation.is_empty(), "{:?}", rec.impersonation);
        }
    }
}

#[tokio::test]
async fn log_follows_a_debug_container() {
    let e = env(&[]).await;
    e.fake.append_log(NS, POD, DBG, "one\ntwo\n");
    let (status, headers, body) = e
        .client
        .request(
            Method::GET,
            &log_path("container=dbg&tailLines=1"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"))
    );
    assert_eq!(&body[..], b"two\n");

    let mut s = e
        .client
        .stream(
            Method::GET,
            &log_path("container=dbg&follow=true"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("follow");
    assert_eq!(s.status, StatusCode::OK);
    assert_eq!(s.next_line(T).await.as_deref(), Some("one"));
    assert_eq!(s.next_line(T).await.as_deref(), Some("two"));
    e.fake.append_log(NS, POD, DBG, "three\n");
    assert_eq!(s.next_line(T).await.as_deref(), Some("three"));
    assert_eq!(
        metric(&e.server, "poddebug_apiserver_active_streams").await,
        Some(1.0)
    );
    assert!(
        e.fake
            .set_ec_state(NS, POD, DBG, ContainerState::terminated(0, "Completed"))
    );
    let rest = s.read_to_end(T).await;
    assert!(
        rest.is_empty() && s.ended(),
        "the follow ends with the container"
    );
    wait_no_streams(&e.server, T).await;

    let (status, _, body) = e
        .client
        .request(
            Method::GET,
            &log_path("container=app"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        status_of(&body)["message"]
            .as_str()
            .unwrap_or("")
            .contains("is not a debug container")
    );
    let (status, _, body) = e
        .client
        .request(
            Method::GET,
            &log_path("container=dbg&sinceSeconds=x"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    assert!(
        status.is_client_error() || status.is_success(),
        "{status} {}",
        String::from_utf8_lossy(&body)
    );
}

#[tokio::test]
async fn log_follow_client_leaving_closes_the_stream() {
    let e = env(&[]).await;
    e.fake.append_log(NS, POD, DBG, "x\n");
    let mut s = e
        .client
        .stream(
            Method::GET,
            &log_path("container=dbg&follow=true"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("follow");
    assert_eq!(s.next_line(T).await.as_deref(), Some("x"));
    drop(s);
    wait_no_streams(&e.server, T).await;
}

/// Runs `/usr/bin/kubectl` with `args` and `stdin`, bounded; `None` when kubectl is missing.
async fn kubectl(
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &[u8],
) -> Option<std::process::Output> {
    use tokio::io::AsyncWriteExt;
    let bin = std::path::Path::new("/usr/bin/kubectl");
    if !bin.exists() {
        poddebug_tests::capability::missing("/usr/bin/kubectl");
        return None;
    }
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn kubectl");
    if let Some(mut w) = child.stdin.take() {
        w.write_all(stdin).await.expect("kubectl stdin");
        // Closing stdin is what makes kubectl half-close the attach's stdin.
    }
    Some(
        tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
            .await
            .expect("kubectl finished")
            .expect("kubectl output"),
    )
}

#[tokio::test]
async fn real_kubectl_attaches_to_the_fake_over_websocket_and_spdy() {
    let e = env(&[]).await;
    let kubeconfig = e.fake.write_kubeconfig(poddebug_tests::ADMIN_TOKEN);
    let kc = kubeconfig.display().to_string();
    for websockets in ["true", "false"] {
        let Some(out) = kubectl(
            &["--kubeconfig", &kc, "attach", POD, "-c", DBG, "-i", "-q"],
            &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", websockets)],
            b"via kubectl\n",
        )
        .await
        else {
            return;
        };
        assert!(
            out.status.success(),
            "websockets={websockets}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "via kubectl\n",
            "websockets={websockets}"
        );
    }
    let protocols: Vec<String> = e
        .fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("/attach"))
        .map(|r| r.method.clone())
        .collect();
    assert_eq!(
        protocols,
        vec!["GET", "POST"],
        "WebSocket (GET) then SPDY (POST)"
    );
}

/// A stand-in for kube-apiserver's aggregator in front of the fake and poddebug, so that an
/// unmodified kubectl reaches our attach: `pods/attach` of core goes to poddebug's
/// `poddebug.dev` attach (front-proxy identity `alice`), everything else to the fake (admin
/// token). Upgrades are relayed byte for byte after the backend's 101, like the aggregator does.
mod front {
    use std::sync::Arc;

    use bytes::Bytes;
    use http::{HeaderValue, Request, Response, StatusCode};
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;
    use poddebug_tests::TestClient;
    use rustls_pki_types::PrivateKeyDer;
    use rustls_pki_types::pem::PemObject;
    use tokio::net::TcpListener;

    const FORWARDED: [&str; 9] = [
        "connection",
        "upgrade",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-protocol",
        "x-stream-protocol-version",
        "accept",
        "content-type",
        "user-agent",
    ];

    async fn handle(
        fake: TestClient,
        poddebug: TestClient,
        mut req: Request<Incoming>,
    ) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_owned();
        let query = req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (client, target) = match segs.as_slice() {
            ["api", "v1", "namespaces", ns, "pods", pod, "attach"] => (
                poddebug,
                format!("/apis/poddebug.dev/v1alpha1/namespaces/{ns}/pods/{pod}/attach{query}"),
            ),
            _ => (fake, format!("{path}{query}")),
        };
        let headers: Vec<(String, String)> = req
            .headers()
            .iter()
            .filter(|(k, _)| FORWARDED.contains(&k.as_str()))
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let method = req.method().clone();
        let mut out = Response::new(Full::new(Bytes::new()));
        if req.headers().contains_key("upgrade") {
            let on_upgrade = hyper::upgrade::on(&mut req);
            let Ok(up) = client.upgrade(method, &target, &headers).await else {
                *out.status_mut() = StatusCode::BAD_GATEWAY;
                return out;
            };
            *out.status_mut() = up.status;
            *out.headers_mut() = up.headers;
            match up.io {
                Some(mut backend) => {
                    tokio::spawn(async move {
                        if let Ok(client_io) = on_upgrade.await {
                            let mut client_io = TokioIo::new(client_io);
                            let _ =
                                tokio::io::copy_bidirectional(&mut client_io, &mut backend).await;
                        }
                    });
                }
                None => *out.body_mut() = Full::new(up.body),
            }
            return out;
        }
        let body = req
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        match client.request(method, &target, &headers, body).await {
            Ok((status, h, body)) => {
                *out.status_mut() = status;
                if let Some(ct) = h.get("content-type") {
                    out.headers_mut().insert("content-type", ct.clone());
                }
                *out.body_mut() = Full::new(body);
            }
            Err(_) => *out.status_mut() = StatusCode::BAD_GATEWAY,
        }
        out.headers_mut()
            .entry("content-type")
            .or_insert(HeaderValue::from_static("application/json"));
        out
    }

    /// Starts the front; returns its URL. It stops with the runtime.
    pub async fn start(
        fake: TestClient,
        poddebug: TestClient,
        serving: &poddebug_tests::CertKey,
    ) -> String {
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).expect("key");
        let mut config =
            rustls::ServerConfig::builder_with_provider(poddebug_tests::fake::provider())
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(poddebug_tests::fake::certs(&serving.cert_pem), key)
                .expect("cert");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("https://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, fake, poddebug) = (acceptor.clone(), fake.clone(), poddebug.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req| {
                        let (fake, poddebug) = (fake.clone(), poddebug.clone());
                        async move {
                            Ok::<_, std::convert::Infallible>(handle(fake, poddebug, req).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .with_upgrades()
                        .await;
                });
            }
        });
        url
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_attaches_through_poddebug() {
    if !std::path::Path::new("/usr/bin/kubectl").exists() {
        poddebug_tests::capability::missing("/usr/bin/kubectl");
        return;
    }
    let e = env(&[]).await;
    let serving = e.fake.pki().localhost_serving_cert();
    let url = front::start(
        e.fake.client(poddebug_tests::ADMIN_TOKEN),
        e.client.clone(),
        &serving,
    )
    .await;
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(e.fake.ca_pem());
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "front", "cluster": {"server": url, "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": poddebug_tests::ADMIN_TOKEN}}],
        "contexts": [{"name": "front", "context": {"cluster": "front", "user": "u", "namespace": NS}}],
        "current-context": "front",
    });
    let dir = poddebug_tests::TempDir::new("kubectl-front");
    let path = dir.path().join("kubeconfig.json");
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).expect("json"))
        .expect("write kubeconfig");
    let kc = path.display().to_string();
    annotate(&e.fake, EXIT_CODE, "7");
    for websockets in ["true", "false"] {
        let out = kubectl(
            &["--kubeconfig", &kc, "attach", POD, "-c", DBG, "-i", "-q"],
            &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", websockets)],
            b"through poddebug\n",
        )
        .await
        .expect("kubectl present");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "through poddebug\n",
            "websockets={websockets}: {stderr}"
        );
        assert_eq!(
            out.status.code(),
            Some(7),
            "websockets={websockets}: exit code through the error channel: {stderr}"
        );
    }
    let attaches: Vec<(String, u16)> = e
        .fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("/attach"))
        .map(|r| (r.method.clone(), r.status))
        .collect();
    assert_eq!(
        attaches,
        vec![("GET".to_owned(), 101), ("POST".to_owned(), 101)]
    );
    wait_no_streams(&e.server, T).await;
    // A refused upgrade: kubectl shows the upstream's Status message (after its SPDY fallback).
    annotate(&e.fake, REFUSE, "403");
    let out = kubectl(
        &["--kubeconfig", &kc, "attach", POD, "-c", DBG, "-i", "-q"],
        &[],
        b"",
    )
    .await
    .expect("kubectl");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("attach refused by the fake for pod web"),
        "{stderr}"
    );
}

/// A debug container's profile is everything its pod lends it: mounting the pod's `hostPath`
/// volume, or targeting (joining the PID namespace of) a privileged container, amounts to
/// `sysadmin` whatever profile it names. One verb less — every verb but `use` on the gated
/// profiles — refuses the create (403 naming what it reaches) and the streams of such
/// containers made by others; with `use` they are made, showing `status.effectiveProfile`. A
/// debug container cannot be added to a node debug pod through `pods/debug`.
#[tokio::test]
async fn a_debug_containers_profile_is_what_its_pod_lends_it() {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [
                {"name": "app", "image": "busybox", "command": ["sleep", "3600"]},
                {"name": "privd", "image": "busybox", "command": ["sleep", "3600"],
                 "securityContext": {"privileged": true}}],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}},
                        {"name": "data", "emptyDir": {}}],
            "ephemeralContainers": [
                {"name": "lent-root", "image": "busybox", "stdin": true, "tty": true,
                 "env": [{"name": "PODDEBUG_PROFILE", "value": "general"},
                         {"name": "PODDEBUG_OWNER", "value": "alice"}],
                 "volumeMounts": [{"name": "root", "mountPath": "/r"}]},
                {"name": "lent-priv", "image": "busybox", "stdin": true, "tty": true,
                 "targetContainerName": "privd",
                 "env": [{"name": "PODDEBUG_PROFILE", "value": "general"},
                         {"name": "PODDEBUG_OWNER", "value": "alice"}]}],
        },
    }));
    fake.add_simple_pod("poddebug-nodes", "localhost.dbg");
    for c in ["lent-root", "lent-priv"] {
        assert!(fake.set_ec_state(NS, POD, c, ContainerState::Running));
    }
    fake.set_policy(|a| !(a.user == "bob" && a.is("use", "debugprofiles")));
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let alice = server.front_proxy_client("alice", &["system:authenticated"]);
    let bob = server.front_proxy_client("bob", &["system:authenticated"]);
    let path = |name: &str| format!("{GV}/namespaces/{NS}/pods/{POD}/debug/{name}");
    let mounting = json!({"profile": "general", "targetContainerName": "app",
        "container": {"image": "busybox", "command": ["sh"], "stdin": true, "tty": true,
                      "volumeMounts": [{"name": "root", "mountPath": "/r"}]}});
    let targeting = json!({"profile": "general", "targetContainerName": "privd",
        "container": {"image": "busybox", "command": ["sh"], "stdin": true, "tty": true}});
    for (name, body, reaches) in [
        ("m", &mounting, "reaches spec.volumes[root].hostPath: /"),
        (
            "t",
            &targeting,
            "reaches securityContext.privileged: true (container \"privd\")",
        ),
    ] {
        let (code, st) = bob.post_json(&path(name), body).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{name}: {st}");
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("debugprofiles.poddebug.dev \"sysadmin\" is forbidden")
                && message.contains(reaches),
            "{name}: {message}"
        );
        let (code, obj) = alice.post_json(&path(name), body).await;
        assert_eq!(code, StatusCode::CREATED, "{name}: {obj}");
        assert_eq!(obj["status"]["effectiveProfile"], "sysadmin", "{obj}");
        assert_eq!(obj["profile"], "general");
    }
    // A plain one is what it names.
    let (code, obj) = bob
        .post_json(
            &path("plain"),
            &json!({"profile": "general", "targetContainerName": "app",
                    "container": {"image": "busybox", "command": ["sh"], "stdin": true,
                                  "tty": true,
                                  "volumeMounts": [{"name": "data", "mountPath": "/d"}]}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    assert_eq!(obj["status"]["effectiveProfile"], "general", "{obj}");

    // The streams of such containers, made by another route, need the same.
    for c in ["lent-root", "lent-priv"] {
        let resp = ws_upgrade(
            &bob,
            &format!("container={c}&stdout=true&tty=true&mode=observer"),
            "v5.channel.k8s.io",
        )
        .await;
        assert_eq!(resp.status, StatusCode::FORBIDDEN, "{c}: {resp:?}");
        let message = status_of(&resp.body)["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.starts_with("debugprofiles.poddebug.dev \"sysadmin\" is forbidden")
                && message.contains("reaches"),
            "{c}: {message}"
        );
        let (code, _, body) = bob
            .request(
                Method::GET,
                &log_path(&format!("container={c}")),
                &[],
                bytes::Bytes::new(),
            )
            .await
            .expect("log");
        assert_eq!(code, StatusCode::FORBIDDEN, "{c}");
        assert!(
            status_of(&body)["message"]
                .as_str()
                .is_some_and(|m| m.contains("sysadmin"))
        );
    }

    // A node debug pod takes no debug container through pods/debug, whoever asks.
    let (code, st) = alice
        .post_json(
            &format!("{GV}/namespaces/poddebug-nodes/pods/localhost.dbg/debug/x"),
            &json!({"container": {"image": "busybox"}}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains("are node debug pods") && m.contains("nodes/NODE/debug")),
        "{st}"
    );
}

/// A pod with debug containers made with a gated profile (recorded), with a gated profile's
/// privileges but no record (an earlier version, or another route), and with an ungated one.
async fn gated_env() -> Env {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
            "ephemeralContainers": [
                {"name": "priv", "image": "busybox", "stdin": true, "tty": true,
                 "targetContainerName": "app",
                 "env": [{"name": "PODDEBUG_PROFILE", "value": "sysadmin"}],
                 "securityContext": {"privileged": true}},
                {"name": "net", "image": "busybox", "stdin": true, "tty": true,
                 "targetContainerName": "app",
                 "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}},
                {"name": "plain", "image": "busybox", "stdin": true, "tty": true,
                 "targetContainerName": "app",
                 "env": [{"name": "PODDEBUG_PROFILE", "value": "general"}],
                 "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}},
            ],
        },
    }));
    for c in ["priv", "net", "plain"] {
        assert!(fake.set_ec_state(NS, POD, c, ContainerState::Running));
    }
    // bob holds every verb but `use` on debugprofiles: one verb less than alice.
    fake.set_policy(|a| !(a.user == "bob" && a.is("use", "debugprofiles")));
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let client = server.front_proxy_client("alice", &["system:authenticated", "devs"]);
    Env {
        fake,
        server,
        client,
    }
}

#[tokio::test]
async fn profiles_hold_at_attach_and_log() {
    let e = gated_env().await;
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    e.fake.clear_requests();
    let sysadmin = "debugprofiles.poddebug.dev \"sysadmin\" is forbidden: User \"bob\" cannot use \
         resource \"debugprofiles\" in API group \"poddebug.dev\" at the cluster scope: debug \
         container \"priv\" was created with the sysadmin profile, which its streams need too";

    // WebSocket and SPDY attach, and the log: 403, worded as the create's refusal.
    let resp = ws_upgrade(
        &bob,
        "container=priv&stdin=true&stdout=true&tty=true",
        "v5.channel.k8s.io",
    )
    .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let status = status_of(&resp.body);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["message"], sysadmin);
    assert_eq!(status["details"]["kind"], "debugprofiles");
    assert_eq!(status["details"]["name"], "sysadmin");
    let resp = spdy_upgrade(
        &bob,
        "container=priv&stdin=true&stdout=true&tty=true",
        &SPDY_VERSIONS,
    )
    .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    assert_eq!(status_of(&resp.body)["message"], sysadmin);
    let (code, _, body) = bob
        .request(
            Method::GET,
            &log_path("container=priv"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(status_of(&body)["message"], sysadmin);

    // No record, but NET_ADMIN: the netadmin profile's permission, naming the setting.
    let resp = ws_upgrade(
        &bob,
        "container=net&stdin=true&stdout=true&tty=true",
        "v5.channel.k8s.io",
    )
    .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let message = status_of(&resp.body)["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.starts_with("debugprofiles.poddebug.dev \"netadmin\" is forbidden:")
            && message.contains("sets securityContext.capabilities.add: NET_ADMIN"),
        "{message}"
    );
    // Nothing was dialled for the refused streams.
    assert!(
        e.fake
            .requests()
            .iter()
            .all(|r| !r.path.contains("/attach") && !r.path.contains("/log")),
        "{:?}",
        e.fake.requests()
    );

    // An ungated profile needs nothing more; alice, who may use every profile, attaches to all.
    let resp = ws_upgrade(
        &bob,
        "container=plain&stdin=true&stdout=true&tty=true",
        "v5.channel.k8s.io",
    )
    .await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    for c in ["priv", "net"] {
        let resp = ws_upgrade(
            &e.client,
            &format!("container={c}&stdin=true&stdout=true&tty=true"),
            "v5.channel.k8s.io",
        )
        .await;
        assert_eq!(
            resp.status,
            StatusCode::SWITCHING_PROTOCOLS,
            "{c}: {resp:?}"
        );
    }
}
