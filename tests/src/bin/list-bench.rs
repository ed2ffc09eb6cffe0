//! List and watch benchmark: the real `poddebug-apiserver` binary over the fake
//! kube-apiserver holding many pods, of which some carry a debug container.
//!
//! - time from start to ready (the pod cache's first sync) and the server's RSS then;
//! - list latency: every debug container of the cluster, one namespace, one pod, and a full
//!   walk in pages of `--page` items;
//! - watch delivery: `--watches` watches open at once, then a debug container is added to a
//!   pod (in the fake) and the time until every watch has its ADDED event is measured;
//! - the server's RSS with those watches open.
//!
//! Usage (release build recommended; loopback only, bounded, ends by itself):
//! `PODDEBUG_APISERVER_BIN=target/release/poddebug-apiserver target/release/list-bench
//!  [--pods 10000] [--with-debug 1000] [--namespaces 100] [--lists 50] [--page 500]
//!  [--watches 100] [--changes 20]`

use poddebug_tests::bench::{self, num, pct};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::{FakeKube, PodDebugServer, TestClient};
use serde_json::{Value, json};

const GV: &str = "/apis/poddebug.dev/v1alpha1";

struct Args {
    pods: usize,
    with_debug: usize,
    namespaces: usize,
    lists: usize,
    page: usize,
    watches: usize,
    changes: usize,
}

fn args() -> Args {
    let mut a = Args {
        pods: 10_000,
        with_debug: 1_000,
        namespaces: 100,
        lists: 50,
        page: 500,
        watches: 100,
        changes: 20,
    };
    bench::flags(|k, v| {
        match k {
            "--pods" => a.pods = num(v)?,
            "--with-debug" => a.with_debug = num(v)?,
            "--namespaces" => a.namespaces = num::<usize>(v)?.max(1),
            "--lists" => a.lists = num::<usize>(v)?.max(1),
            "--page" => a.page = num::<usize>(v)?.max(1),
            "--watches" => a.watches = num(v)?,
            "--changes" => a.changes = num(v)?,
            _ => return None,
        }
        Some(())
    });
    a
}

fn ms(d: Duration) -> String {
    bench::ms(d, 2)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn pod(ns: &str, name: &str, debug: bool) -> Value {
    let mut p = json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name, "tier": "bench"},
                     "annotations": {"bench.example/note": "x".repeat(200)}},
        "spec": {"containers": [
            {"name": "app", "image": "registry.example/app:1", "command": ["serve"],
             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "sidecar", "image": "registry.example/sidecar:1"},
        ]},
    });
    if debug {
        p["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}]);
    }
    p
}

async fn timed_get(c: &TestClient, path: &str) -> (Duration, Value) {
    let start = Instant::now();
    let (code, _, body) = c
        .request(Method::GET, path, &[], Bytes::new())
        .await
        .expect("request");
    let took = start.elapsed();
    assert_eq!(code, StatusCode::OK, "{path}");
    (took, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn items(v: &Value) -> usize {
    v["items"].as_array().map_or(0, Vec::len)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let fake = FakeKube::start().await;
    let every = (a.pods / a.with_debug.max(1)).max(1);
    let per_ns = (a.pods / a.namespaces).max(1);
    for i in 0..a.pods {
        let ns = format!("ns-{}", i / per_ns);
        fake.add_pod_json(pod(
            &ns,
            &format!("pod-{i}"),
            i % every == 0 && i / every < a.with_debug,
        ));
    }
    let expected: usize = (0..a.pods)
        .filter(|i| i % every == 0 && i / every < a.with_debug)
        .count();
    println!(
        "cluster: {} pods in {} namespaces, {expected} with a debug container",
        a.pods, a.namespaces
    );

    let pki = fake.pki().clone();
    let started = Instant::now();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    println!(
        "ready (first sync of the pod cache) after {} ms; server RSS {} KiB",
        started.elapsed().as_millis(),
        rss_kib(server.pid())
    );
    let c = server.front_proxy_client("bench", &["system:masters"]);

    // Lists.
    for (label, path) in [
        ("all namespaces", format!("{GV}/poddebugcontainers")),
        (
            "one namespace",
            format!("{GV}/namespaces/ns-0/poddebugcontainers"),
        ),
        ("one pod", format!("{GV}/namespaces/ns-0/pods/pod-0/debug")),
    ] {
        let mut t = Vec::new();
        let mut n = 0;
        for _ in 0..a.lists {
            let (d, v) = timed_get(&c, &path).await;
            n = items(&v);
            t.push(d);
        }
        println!(
            "list {label:<15} {n:>5} items: p50 {} ms  p99 {} ms  ({} requests)",
            ms(pct(&t, 0.5)),
            ms(pct(&t, 0.99)),
            a.lists
        );
        if label == "all namespaces" {
            assert_eq!(n, expected, "every debug container is listed");
        }
    }
    let walk = Instant::now();
    let (mut pages, mut total, mut token) = (0, 0, None::<String>);
    loop {
        let path = match &token {
            None => format!("{GV}/poddebugcontainers?limit={}", a.page),
            Some(t) => format!("{GV}/poddebugcontainers?limit={}&continue={t}", a.page),
        };
        let (_, v) = timed_get(&c, &path).await;
        pages += 1;
        total += items(&v);
        token = v["metadata"]["continue"].as_str().map(str::to_owned);
        if token.is_none() || pages > expected + 1 {
            break;
        }
    }
    assert_eq!(total, expected);
    println!(
        "paged walk: {pages} pages of {} → {total} items in {} ms",
        a.page,
        walk.elapsed().as_millis()
    );

    // Watches.
    let mut watches = Vec::new();
    for _ in 0..a.watches {
        let mut w = c
            .stream(
                Method::GET,
                &format!("{GV}/poddebugcontainers?watch=true&resourceVersion=0&timeoutSeconds=600"),
                &[],
                Bytes::new(),
            )
            .await
            .expect("watch");
        // The initial ADDED events.
        for _ in 0..expected {
            w.next_json(Duration::from_secs(30))
                .await
                .expect("initial event");
        }
        watches.push(w);
    }
    println!(
        "{} watches open; server RSS {} KiB",
        a.watches,
        rss_kib(server.pid())
    );
    let mut delivery = Vec::new();
    for k in 0..a.changes {
        let i = (k * 7 + 1) % a.pods;
        let target = format!("pod-{i}");
        let ns = format!("ns-{}", i / per_ns);
        let name = format!("bench-{k}");
        let start = Instant::now();
        let changed = fake.update_pod(&ns, &target, |p| {
            let ecs = p["spec"]["ephemeralContainers"].take();
            let mut ecs = ecs.as_array().cloned().unwrap_or_default();
            ecs.push(json!({"name": name, "image": "busybox:1.36"}));
            p["spec"]["ephemeralContainers"] = json!(ecs);
        });
        assert!(changed.is_some());
        for w in &mut watches {
            loop {
                let ev = w
                    .next_json(Duration::from_secs(30))
                    .await
                    .expect("the change reaches every watch");
                if ev["object"]["metadata"]["name"] == format!("{target}.bench-{k}") {
                    break;
                }
            }
        }
        delivery.push(start.elapsed());
    }
    if !delivery.is_empty() {
        println!(
            "watch delivery (change in the cluster → all {} watches have it): p50 {} ms  p99 {} ms  ({} changes)",
            a.watches,
            ms(pct(&delivery, 0.5)),
            ms(pct(&delivery, 0.99)),
            a.changes
        );
    }
    println!("server RSS at the end {} KiB", rss_kib(server.pid()));
}
