//! Faults of the cluster, played by the fake kube-apiserver, under the real binary: conflict
//! storms, throttling and server errors, an authorizer that fails or hangs, the pod deleted
//! while a create waits or a stream runs, SIGTERM with work in flight, and file descriptors
//! counted before and after.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::{self, ChannelClient};
use poddebug_tests::{ContainerState, FakeKube, Outage, PodDebugServer, TestClient};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);
const NS: &str = "shop";
const POD: &str = "web";
const GV: &str = "/apis/poddebug.dev/v1alpha1";
const EC_PATH: &str = "/pods/web/ephemeralcontainers";

async fn setup(extra: &[&str]) -> (FakeKube, PodDebugServer, TestClient) {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.add_namespace(NS, &[]);
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
            "ephemeralContainers": [{"name": "cat", "image": "busybox", "stdin": true}],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, "cat", ContainerState::Running));
    fake.allow_all();
    let server = PodDebugServer::start(&fake, &pki, extra).await;
    let client = server.front_proxy_client("alice", &["dev"]);
    (fake, server, client)
}

fn json_of(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or(Value::Null)
}

async fn create(c: &TestClient, name: &str, query: &str) -> (StatusCode, Value) {
    let (code, _, body) = c
        .request(
            Method::POST,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug/{name}{query}"),
            &[("content-type", "application/json")],
            r#"{"container":{"image":"busybox"}}"#,
        )
        .await
        .expect("create answered");
    (code, json_of(&body))
}

/// How many ephemeral containers of the pod carry `name` (0 or 1 unless something duplicated).
fn containers_named(fake: &FakeKube, name: &str) -> usize {
    fake.pod_json(NS, POD)
        .and_then(|p| p["spec"]["ephemeralContainers"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|c| c["name"] == name)
        .count()
}

fn ec_updates(fake: &FakeKube) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path.contains(EC_PATH))
        .count()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

async fn attach(c: &TestClient) -> ChannelClient<TokioIo<Upgraded>> {
    let headers = TestClient::websocket_headers(channel::V5);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = c
        .upgrade(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/attach?container=cat&stdin=true&stdout=true"),
            &headers,
        )
        .await
        .expect("upgrade");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    ChannelClient::new(resp.io.expect("upgraded"), channel::V5).await
}

#[tokio::test]
async fn a_conflict_storm_is_retried_and_creates_exactly_one_container() {
    let (fake, _server, c) = setup(&[]).await;
    fake.clear_requests();
    fake.inject_faults(Method::PUT, EC_PATH, 409, 8);
    let (code, body) = create(&c, "storm", "").await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(fake.pending_faults(), 0, "every conflict was met");
    assert_eq!(
        ec_updates(&fake),
        9,
        "8 conflicts, then the update that went through"
    );
    assert_eq!(containers_named(&fake, "storm"), 1);
}

#[tokio::test]
async fn an_endless_conflict_storm_ends_in_a_conflict_status_with_the_pod_untouched() {
    let (fake, _server, c) = setup(&[]).await;
    let before = fake.pod_json(NS, POD).expect("pod");
    fake.clear_requests();
    fake.inject_faults(Method::PUT, EC_PATH, 409, 10_000);
    let (code, body) = create(&c, "storm", "").await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Conflict");
    // Bounded: the first attempt (on the pod read from kube-apiserver's watch cache), its
    // conflict retried at once after a quorum read, then the default 30 retries with backoff,
    // then the conflict.
    assert_eq!(ec_updates(&fake), 32);
    assert_eq!(fake.pod_json(NS, POD).expect("pod")["spec"], before["spec"]);
}

fn pod_reads(fake: &FakeKube) -> usize {
    fake.requests()
        .iter()
        .filter(|r| {
            r.method == "GET"
                && r.path
                    .split('?')
                    .next()
                    .is_some_and(|p| p.ends_with(&format!("/namespaces/{NS}/pods/{POD}")))
        })
        .count()
}

#[tokio::test]
async fn throttling_is_retried_with_backoff_and_server_errors_are_statuses() {
    let (fake, _server, c) = setup(&[]).await;
    let pod = format!("/namespaces/{NS}/pods/{POD}");

    // 429 (with Retry-After) and 503 on the pod read: the kube client retries, the create
    // goes through, once.
    for code in [429, 503] {
        fake.clear_requests();
        fake.inject_faults(Method::GET, &pod, code, 2);
        let name = format!("r{code}");
        let (got, body) = create(&c, &name, "").await;
        assert_eq!(got, StatusCode::CREATED, "{code}: {body}");
        assert_eq!(fake.pending_faults(), 0);
        assert!(
            pod_reads(&fake) >= 3,
            "{code}: two refused reads, then one that worked"
        );
        assert_eq!(containers_named(&fake, &name), 1);
    }
    // 503 on the update itself: retried, and still exactly one container.
    fake.inject_faults(Method::PUT, EC_PATH, 503, 2);
    let (got, body) = create(&c, "r503put", "").await;
    assert_eq!(got, StatusCode::CREATED, "{body}");
    assert_eq!(
        containers_named(&fake, "r503put"),
        1,
        "no duplicate after a retried update"
    );

    // 500 is not retried: the caller gets the cluster's Status and the pod is untouched.
    for path in [pod.as_str(), EC_PATH] {
        let method = if path == EC_PATH {
            Method::PUT
        } else {
            Method::GET
        };
        fake.inject_faults(method, path, 500, 1);
        let (got, body) = create(&c, "e500", "").await;
        assert_eq!(got, StatusCode::INTERNAL_SERVER_ERROR, "{path}: {body}");
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["reason"], "InternalError", "{body}");
        assert_eq!(containers_named(&fake, "e500"), 0, "no partial update");
    }
    let (got, body) = create(&c, "e500", "").await;
    assert_eq!(got, StatusCode::CREATED, "the error was not sticky: {body}");
}

#[tokio::test]
async fn a_storm_of_503s_ends_each_request_by_its_timeout_with_a_status() {
    let (fake, _server, c) = setup(&["--request-timeout=3s"]).await;
    fake.clear_requests();
    fake.inject_faults(Method::GET, "/pods", 503, 100_000);
    for i in 0..3 {
        // The client's own limit is 30 s: an answer means the server bounded the retries.
        // (One debug container is read from its pod; lists come from the server's pod cache.)
        let (code, _, body) = c
            .request(
                Method::GET,
                &format!("{GV}/namespaces/{NS}/pods/web/debug/cat"),
                &[],
                Bytes::new(),
            )
            .await
            .expect("answered");
        assert!(
            code.as_u16() == 503 || code.as_u16() == 504,
            "{i}: {code} {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(json_of(&body)["kind"], "Status");
    }
    let tries = fake
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/pods"))
        .count();
    eprintln!("503 storm: {tries} pod reads for 3 requests");
    // kube-rs's server-aware policy: at most 15 retries per call, with exponential backoff.
    assert!(tries > 3, "retried: {tries}");
    assert!(tries <= 3 * 16, "bounded: {tries}");
}

#[tokio::test]
async fn a_failing_or_hanging_authorizer_is_a_status_in_bounded_time() {
    let (fake, _server, c) = setup(&[
        "--authorization-webhook-cache-unauthorized-ttl=0s",
        "--authorization-webhook-cache-authorized-ttl=0s",
        "--request-timeout=3s",
    ])
    .await;
    let list = format!("{GV}/namespaces/{NS}/poddebugcontainers");
    for outage in [Outage::Unavailable, Outage::CloseConnection, Outage::Hang] {
        fake.set_authorizer_outage(outage);
        // The client's own limit is 30 s: an answer at all means the server bounded the wait.
        let (code, _, body) = c
            .request(Method::GET, &list, &[], Bytes::new())
            .await
            .unwrap_or_else(|e| panic!("{outage:?}: no answer: {e}"));
        assert!(
            !code.is_success(),
            "{outage:?}: an authorizer outage allowed the request"
        );
        assert_eq!(json_of(&body)["kind"], "Status", "{outage:?}");
    }
    fake.set_authorizer_outage(Outage::None);
    let (code, _, _) = c
        .request(Method::GET, &list, &[], Bytes::new())
        .await
        .expect("answered");
    assert_eq!(code, StatusCode::OK, "the authorizer is back");
}

#[tokio::test]
async fn the_pod_deleted_during_a_wait_or_before_an_attach_or_a_stop_is_a_clear_status() {
    let (fake, server, c) = setup(&[]).await;

    // An attach after the pod is gone: 404 from the cluster, relayed as a Status. (A stream
    // already running ends when the kubelet kills the container; the fake has no kubelet to
    // do that, so that half is in the live suite.)
    assert!(fake.delete_pod(NS, POD));
    let headers = TestClient::websocket_headers(channel::V5);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = c
        .upgrade(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/attach?container=cat&stdin=true&stdout=true"),
            &headers,
        )
        .await
        .expect("upgrade answered");
    assert_eq!(resp.status, StatusCode::NOT_FOUND, "{resp:?}");
    assert_eq!(json_of(&resp.body)["reason"], "NotFound");

    // A create waiting for the container to run: answered, not hung, once the pod is gone.
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }));
    fake.set_kubelet_simulation(true);
    fake.set_start_delay(Duration::from_secs(300));
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { create(&c, "waiting", "?wait=true&timeoutSeconds=60").await })
    };
    let mut appeared = false;
    for _ in 0..100 {
        if containers_named(&fake, "waiting") == 1 {
            appeared = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(appeared, "the create reached the pod");
    assert!(fake.delete_pod(NS, POD));
    let (code, body) = tokio::time::timeout(T, waiter)
        .await
        .expect("the waiting create answered")
        .expect("task");
    assert!(!code.is_success(), "{code} {body}");
    assert_eq!(body["kind"], "Status", "{body}");

    // A stop of a container whose pod is gone: 404 NotFound.
    let (code, _, body) = c
        .request(
            Method::DELETE,
            &format!("{GV}/namespaces/{NS}/pods/{POD}/debug/waiting"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("stop answered");
    let s = json_of(&body);
    assert_eq!(code, StatusCode::NOT_FOUND, "{s}");
    assert_eq!(s["reason"], "NotFound");
    drop(server);
}

#[tokio::test]
async fn no_file_descriptor_or_stream_is_left_after_faults() {
    // Streams dropped one after the other: their sessions end in the background, and for a
    // moment more of them than --max-sessions-per-user allows by default may still be open.
    let (fake, server, c) = setup(&["--max-sessions-per-user=0"]).await;
    // One round of faults: two faulted creates and a stream dropped mid-way.
    let round = |i: String| {
        let (fake, c) = (&fake, &c);
        async move {
            fake.inject_faults(Method::PUT, EC_PATH, 409, 3);
            let _ = create(c, &format!("f{i}"), "").await;
            fake.inject_faults(Method::GET, "/pods/web", 503, 1);
            let _ = create(c, &format!("g{i}"), "").await;
            let mut a = attach(c).await;
            a.stdin(b"x").await.ok();
            a.read_until(T, |t| !t.stdout.is_empty()).await;
            drop(a);
        }
    };
    // Warm up: the connections to the cluster are made once, as many as a create asks for at
    // once (its reviews and its first read run together), and kept for the next requests.
    let _ = create(&c, "warm", "").await;
    let mut a = attach(&c).await;
    a.close().await.ok();
    a.finish(T).await;
    for i in 0..2 {
        round(format!("warm{i}")).await;
    }
    let before = open_fds(server.pid());
    assert!(before > 0, "/proc is readable");

    // A leak grows with the rounds; the pooled connections do not.
    for i in 0..20 {
        round(i.to_string()).await;
    }
    // Bounded wait for the server to notice the dropped connections.
    let mut after = open_fds(server.pid());
    for _ in 0..100 {
        if after <= before + 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = open_fds(server.pid());
    }
    assert!(
        after <= before + 4,
        "file descriptors: {before} before, {after} after 60 faulted requests and 20 streams"
    );
}

#[tokio::test]
async fn sigterm_with_streams_and_watches_in_flight_loses_no_echoed_byte() {
    let (fake, mut server, c) = setup(&["--shutdown-grace-period=3s"]).await;
    let _ = &fake;
    let mut watch = c
        .stream(
            Method::GET,
            &format!("{GV}/namespaces/{NS}/poddebugcontainers?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);
    let mut a = attach(&c).await;
    // Numbered lines, echoed in order before the signal.
    let mut sent = Vec::new();
    for i in 0..200 {
        let line = format!("{i:05}\n");
        a.stdin(line.as_bytes()).await.expect("stdin");
        sent.extend_from_slice(line.as_bytes());
    }
    let want = sent.clone();
    a.read_until(T, |t| t.stdout.len() >= want.len()).await;
    let status = server.terminate().await.expect("the server exited");
    assert!(status.success(), "{status:?}\n{}", server.logs_text());
    let t = a.finish(T).await;
    assert!(t.ended);
    assert_eq!(
        t.stdout, sent,
        "every byte echoed, in order, before the close"
    );
    assert_eq!(t.close.as_ref().map(|c| c.0), Some(1001), "{t:?}");
    // The watch ended too (no hung response body).
    let rest = watch.read_to_end(T).await;
    let _ = rest;
    assert!(watch.ended(), "the watch ended with the server");
}

#[tokio::test]
async fn sigterm_right_after_a_create_still_writes_its_event() {
    let (fake, mut server, c) = setup(&[]).await;
    // A slow events API: the create answers before its Event is stored.
    fake.delay_requests(Method::POST, "/events", Duration::from_secs(1));
    let (code, body) = create(&c, "last", "").await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let created = |fake: &FakeKube| {
        fake.events()
            .iter()
            .filter(|e| e["reason"] == "DebugContainerCreated")
            .count()
    };
    assert_eq!(created(&fake), 0, "the answer did not wait for the Event");
    let status = server.terminate().await.expect("the server exited");
    assert!(status.success(), "{status:?}\n{}", server.logs_text());
    assert_eq!(
        created(&fake),
        1,
        "the Event was written before the server exited"
    );
}

#[tokio::test]
async fn an_authorizer_connection_dropped_once_is_tried_again_not_a_503() {
    let (fake, _server, c) = setup(&[
        "--authorization-webhook-cache-unauthorized-ttl=0s",
        "--authorization-webhook-cache-authorized-ttl=0s",
    ])
    .await;
    fake.clear_requests();
    fake.set_authorizer_outage(Outage::CloseConnection);
    let list = format!("{GV}/namespaces/{NS}/poddebugcontainers");
    let pending =
        tokio::spawn(async move { c.request(Method::GET, &list, &[], Bytes::new()).await });
    // The first review reached kube-apiserver and its connection was dropped; then the
    // authorizer is back before the retry.
    let reached = fake
        .wait_until(Duration::from_secs(10), |f| {
            f.requests()
                .iter()
                .any(|r| r.path.contains("subjectaccessreviews"))
        })
        .await;
    assert!(reached, "no review was sent");
    fake.set_authorizer_outage(Outage::None);
    let (code, _, body) = pending.await.expect("task").expect("answered");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let reviews = fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("subjectaccessreviews"))
        .count();
    assert!(reviews >= 2, "tried again: {reviews}");
}
