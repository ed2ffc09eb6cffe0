//! Reads that scale, end to end against the fake kube-apiserver: lists and watches of debug
//! containers are served from the server's one shared pod watch (no LIST or WATCH of pods per
//! request), and lists honour `limit` and `continue` as kube-apiserver does.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::{FakeKube, PodDebugServer, TestClient};
use serde_json::{Value, json};

const GV: &str = "/apis/poddebug.dev/v1alpha1";
const T: Duration = Duration::from_secs(10);

fn pod_with(ns: &str, name: &str, debug: &[&str]) -> Value {
    let ecs: Vec<Value> = debug
        .iter()
        .map(|d| json!({"name": d, "image": "busybox"}))
        .collect();
    json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": ecs,
        },
    })
}

/// Five debug containers on three pods in two namespaces, one pod without any.
async fn setup() -> (FakeKube, PodDebugServer, TestClient) {
    let fake = FakeKube::start().await;
    fake.add_pod_json(pod_with("a", "p1", &["d1", "d2"]));
    fake.add_pod_json(pod_with("a", "p2", &["d3"]));
    fake.add_pod_json(pod_with("b", "p3", &["d4", "d5"]));
    fake.add_pod_json(pod_with("b", "plain", &[]));
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let client = server.front_proxy_client("alice", &["system:authenticated"]);
    (fake, server, client)
}

async fn get(c: &TestClient, path: &str) -> (StatusCode, Value) {
    let (code, _, body) = c
        .request(Method::GET, path, &[], Bytes::new())
        .await
        .expect("request");
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Pod LISTs and WATCHes the server made since the last `clear_requests`.
fn pod_reads(fake: &FakeKube) -> Vec<String> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.contains("/pods?"))
        .map(|r| r.path)
        .collect()
}

#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let (_fake, _server, c) = setup().await;
    let (code, all) = get(&c, &format!("{GV}/poddebugcontainers")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert_eq!(names(&all), ["p1.d1", "p1.d2", "p2.d3", "p3.d4", "p3.d5"]);
    assert!(all["metadata"].get("continue").is_none());

    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut rvs = BTreeSet::new();
    for _ in 0..10 {
        let path = match &token {
            None => format!("{GV}/poddebugcontainers?limit=2"),
            Some(t) => format!("{GV}/poddebugcontainers?limit=2&continue={t}"),
        };
        let (code, page) = get(&c, &path).await;
        assert_eq!(code, StatusCode::OK, "{page}");
        let items = names(&page);
        assert!(items.len() <= 2, "{page}");
        seen.extend(items);
        rvs.insert(page["metadata"]["resourceVersion"].to_string());
        token = page["metadata"]["continue"].as_str().map(str::to_owned);
        if token.is_none() {
            break;
        }
        assert!(page["metadata"]["remainingItemCount"].as_i64() > Some(0));
    }
    assert_eq!(seen, names(&all), "every item once, in order");
    assert_eq!(
        rvs.len(),
        1,
        "every page carries the first page's resourceVersion"
    );

    // The Table kubectl asks for pages the same way.
    let (code, _, body) = c
        .request(
            Method::GET,
            &format!("{GV}/namespaces/b/poddebugcontainers?limit=1"),
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            Bytes::new(),
        )
        .await
        .expect("table");
    let table: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(code, StatusCode::OK, "{table}");
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(1));
    assert!(table["metadata"]["continue"].is_string(), "{table}");

    // A token that is not one: kube-apiserver's 400.
    let (code, status) = get(
        &c,
        &format!("{GV}/poddebugcontainers?limit=1&continue=bm90LWpzb24"),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("invalid continue token")),
        "{status}"
    );
    let (code, _) = get(&c, &format!("{GV}/poddebugcontainers?limit=x")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn lists_and_watches_are_served_from_one_shared_pod_watch() {
    let (fake, server, c) = setup().await;
    fake.clear_requests();
    for path in [
        format!("{GV}/poddebugcontainers"),
        format!("{GV}/namespaces/a/poddebugcontainers?labelSelector=app%3Dp1"),
        format!("{GV}/namespaces/a/pods/p1/debug"),
        format!("{GV}/namespaces/b/poddebugcontainers?fieldSelector=metadata.name%3Dp3.d5"),
    ] {
        let (code, list) = get(&c, &path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {list}");
    }
    let (_, selected) = get(
        &c,
        &format!("{GV}/namespaces/a/poddebugcontainers?labelSelector=app%3Dp1"),
    )
    .await;
    assert_eq!(names(&selected), ["p1.d1", "p1.d2"]);
    let (code, status) = get(
        &c,
        &format!("{GV}/poddebugcontainers?fieldSelector=spec.bogus%3Dx"),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(status["message"], "field label not supported: spec.bogus");

    let mut w = c
        .stream(
            Method::GET,
            &format!("{GV}/namespaces/a/poddebugcontainers?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    let mut added = BTreeSet::new();
    while added.len() < 3 {
        let ev = w.next_json(T).await.expect("an initial event");
        assert_eq!(ev["type"], "ADDED", "{ev}");
        added.insert(
            ev["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
    }
    assert_eq!(
        added,
        BTreeSet::from(["p1.d1".to_owned(), "p1.d2".to_owned(), "p2.d3".to_owned()])
    );
    // A change in the cluster reaches the watch through the shared pod watch.
    assert!(
        fake.update_pod("a", "p2", |p| {
            p["spec"]["ephemeralContainers"]
                .as_array_mut()
                .expect("ephemeral containers")
                .push(json!({"name": "d6", "image": "busybox"}));
        })
        .is_some()
    );
    let ev = w.next_json(T).await.expect("the new debug container");
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("p2.d6")),
        "{ev}"
    );
    drop(w);

    assert_eq!(
        pod_reads(&fake),
        Vec::<String>::new(),
        "lists and watches must not LIST or WATCH pods themselves\n{}",
        server.logs_text()
    );
}
