//! Live-session benchmark: the real `poddebug-apiserver` binary, `--replicas` of it over one fake
//! kube-apiserver, with `--sessions` attach streams open at once (spread over `--pods` pods,
//! over `--users` users and over the replicas). Then, with nothing else happening, each
//! replica's CPU time over `--idle-seconds` (the renewals of every session's Lease, and each
//! replica following all of them) and its RSS; then `--lists` sequential lists of them through
//! the first replica, timed: the namespace's `debugsessions`, all namespaces, one pod's
//! `sessions`, and all namespaces as a `Table` (what `kubectl get debugsessions -A` asks for).
//! Every list is checked to hold every session exactly once, each with the replica that relays
//! it (a Table's rows carry metadata only: there, the ids).
//!
//! The servers get no flag of their own, so that the binary of an earlier version can be
//! measured the same way; users are as many as keep each under the default
//! `--max-sessions-per-user` (20) unless `--users` says otherwise.
//!
//! Usage (release build recommended; loopback only, bounded, ends by itself):
//! `PODDEBUG_APISERVER_BIN=target/release/poddebug-apiserver target/release/session-bench
//!  [--sessions 100] [--replicas 2] [--pods 10] [--users N] [--idle-seconds 0] [--lists 200]`

use poddebug_tests::bench::{self, num, pct};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::ChannelClient;
use poddebug_tests::{ContainerState, FakeKube, PodDebugServer, TestClient};
use serde_json::{Value, json};

const GV: &str = "/apis/poddebug.dev/v1alpha1";
const NS: &str = "bench";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

struct Args {
    sessions: usize,
    replicas: usize,
    pods: usize,
    users: usize,
    idle_seconds: u64,
    lists: usize,
}

fn args() -> Args {
    let mut a = Args {
        sessions: 100,
        replicas: 2,
        pods: 10,
        users: 0,
        idle_seconds: 0,
        lists: 200,
    };
    bench::flags(|k, v| {
        match k {
            "--sessions" => a.sessions = num(v)?,
            "--replicas" => a.replicas = num::<usize>(v)?.max(1),
            "--pods" => a.pods = num::<usize>(v)?.max(1),
            "--lists" => a.lists = num::<usize>(v)?.max(1),
            "--users" => a.users = num(v)?,
            "--idle-seconds" => a.idle_seconds = num(v)?,
            _ => return None,
        }
        Some(())
    });
    if a.users == 0 {
        a.users = a.sessions.div_ceil(20).max(1);
    }
    a
}

/// CPU time (user and system) the process has used, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    // Clock ticks per second of /proc's times: USER_HZ, 100 on Linux.
    const TICKS: u64 = 100;
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the command (in parentheses): state is field 3, utime 14, stime 15.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 1000 / TICKS)
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

async fn attach(c: &TestClient, pod: &str) -> ChannelClient<TokioIo<Upgraded>> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let path = format!(
        "{GV}/namespaces/{NS}/pods/{pod}/attach?container=dbg&stdin=true&stdout=true&tty=true"
    );
    let resp = c
        .upgrade(Method::GET, &path, &headers)
        .await
        .expect("upgrade");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await
}

async fn timed_get(c: &TestClient, path: &str, accept: &str) -> (Duration, Value) {
    let start = Instant::now();
    let (code, _, body) = c
        .request(Method::GET, path, &[("accept", accept)], Bytes::new())
        .await
        .expect("request");
    let took = start.elapsed();
    assert_eq!(code, StatusCode::OK, "{path}");
    (took, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// (id, replica) of every item of a list or rows of a Table.
fn sessions_of(v: &Value) -> Vec<(String, String)> {
    let items: Vec<&Value> = match v["kind"].as_str() {
        Some("Table") => v["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| &r["object"])
            .collect(),
        _ => v["items"].as_array().into_iter().flatten().collect(),
    };
    items
        .iter()
        .map(|s| {
            (
                s["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                s["status"]["replica"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace(NS, &[]);
    for p in 0..a.pods {
        let name = format!("pod-{p}");
        fake.add_pod_json(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
                "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true,
                    "tty": true, "targetContainerName": "app",
                    "env": [{"name": "PODDEBUG_OWNER", "value": "alice"}]}],
            },
        }));
        assert!(fake.set_ec_state(NS, &name, "dbg", ContainerState::Running));
    }
    let pki = fake.pki().clone();
    let mut servers = Vec::new();
    for _ in 0..a.replicas {
        servers.push(PodDebugServer::start(&fake, &pki, &[]).await);
    }
    // clients[replica][user]
    let clients: Vec<Vec<TestClient>> = servers
        .iter()
        .map(|s| {
            (0..a.users)
                .map(|u| s.front_proxy_client(&format!("user-{u}"), &["system:authenticated"]))
                .collect()
        })
        .collect();
    println!(
        "{} sessions over {} pods and {} users, relayed by {} replicas",
        a.sessions, a.pods, a.users, a.replicas
    );

    let opened = Instant::now();
    let mut streams = Vec::new();
    for i in 0..a.sessions {
        let client = &clients[i % a.replicas][i % a.users];
        streams.push(attach(client, &format!("pod-{}", i % a.pods)).await);
    }
    let first = &clients[0][0];
    let all_path = format!("{GV}/namespaces/{NS}/debugsessions");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = timed_get(first, &all_path, "application/json").await;
        if sessions_of(&v).len() == a.sessions {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {} sessions listed after 60 s",
            sessions_of(&v).len(),
            a.sessions
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "all {} listed through replica 1 {} ms after the first attach",
        a.sessions,
        opened.elapsed().as_millis()
    );
    if a.idle_seconds > 0 {
        let before: Vec<Duration> = servers.iter().map(|s| cpu_time(s.pid())).collect();
        tokio::time::sleep(Duration::from_secs(a.idle_seconds)).await;
        for (i, (s, b)) in servers.iter().zip(before).enumerate() {
            let used = cpu_time(s.pid()).saturating_sub(b);
            println!(
                "replica {} idle for {} s with {} sessions: CPU {:.1} % of one core ({} ms), RSS {} KiB",
                i + 1,
                a.idle_seconds,
                a.sessions,
                used.as_secs_f64() * 100.0 / a.idle_seconds as f64,
                used.as_millis(),
                rss_kib(s.pid())
            );
        }
    }

    let per_pod = a.sessions.div_ceil(a.pods);
    for (label, path, accept, expect) in [
        (
            "namespace",
            all_path.clone(),
            "application/json",
            a.sessions,
        ),
        (
            "all namespaces",
            format!("{GV}/debugsessions"),
            "application/json",
            a.sessions,
        ),
        (
            "one pod",
            format!("{GV}/namespaces/{NS}/pods/pod-0/sessions"),
            "application/json",
            per_pod,
        ),
        (
            "all ns, Table",
            format!("{GV}/debugsessions"),
            TABLE,
            a.sessions,
        ),
    ] {
        let mut t = Vec::new();
        let mut last = Value::Null;
        for _ in 0..a.lists {
            let (d, v) = timed_get(first, &path, accept).await;
            t.push(d);
            last = v;
        }
        let listed = sessions_of(&last);
        let ids: BTreeSet<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(listed.len(), expect, "{label}: every session once");
        assert_eq!(ids.len(), expect, "{label}: no session twice");
        let mut by_replica: BTreeMap<&str, usize> = BTreeMap::new();
        // (A Table's rows carry the object's metadata only, as kube-apiserver's do.)
        for (_, r) in listed.iter().filter(|_| accept != TABLE) {
            assert!(!r.is_empty(), "{label}: a session without its replica");
            *by_replica.entry(r.as_str()).or_default() += 1;
        }
        let relayed = if accept == TABLE {
            "metadata only".to_owned()
        } else {
            format!("relayed by {} replicas", by_replica.len())
        };
        println!(
            "list {label:<15} {:>4} items ({relayed}): p50 {} ms  p99 {} ms  max {} ms  ({} requests)",
            listed.len(),
            ms(pct(&t, 0.5)),
            ms(pct(&t, 0.99)),
            ms(pct(&t, 1.0)),
            a.lists
        );
    }
    for (i, s) in servers.iter().enumerate() {
        println!(
            "server RSS (replica {}) with {} sessions: {} KiB",
            i + 1,
            a.sessions,
            rss_kib(s.pid())
        );
    }
    drop(streams);
}
