//! Load benchmark against the fake kube-apiserver, through the real `poddebug-apiserver`:
//!
//! - footprint: start-to-ready time (spawn until `/readyz` answers 200) and idle RSS;
//! - creates: N clients creating debug containers across M pods for a bounded time, with
//!   throughput, p50/p99 latency and every non-201 answer counted;
//! - checksummed streams: K concurrent attach streams each echoing its own random bytes through
//!   the fake's `cat`; every byte read back is compared with what was sent (bytes lost or
//!   changed are counted, never asserted on).
//!
//! Usage (release build recommended; loopback only, ends by itself):
//! `PODDEBUG_APISERVER_BIN=target/release/poddebug-apiserver target/release/load-bench
//!  [--clients 16] [--pods 50] [--seconds 10] [--streams 1000] [--stream-kib 64]`

use poddebug_tests::bench::{self, num, pct};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use http::{Method, StatusCode};
use poddebug_tests::{ContainerState, FakeKube, PodDebugServer, TestClient, TestPki};
use serde_json::json;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

const NS: &str = "load";
const QUERY: &str = "container=cat&stdin=true&stdout=true";

struct Args {
    clients: usize,
    pods: usize,
    seconds: u64,
    streams: usize,
    stream_kib: usize,
}

fn args() -> Args {
    let mut a = Args {
        clients: 16,
        pods: 50,
        seconds: 10,
        streams: 1000,
        stream_kib: 64,
    };
    bench::flags(|k, v| {
        match k {
            "--clients" => a.clients = num::<usize>(v)?.max(1),
            "--pods" => a.pods = num::<usize>(v)?.max(1),
            "--seconds" => a.seconds = num::<u64>(v)?.max(1),
            "--streams" => a.streams = num(v)?,
            "--stream-kib" => a.stream_kib = num::<usize>(v)?.max(1),
            _ => return None,
        }
        Some(())
    });
    a
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

fn ms(d: Duration) -> String {
    format!("{} ms", bench::ms(d, 2))
}

fn pod_name(i: usize) -> String {
    format!("p{i:04}")
}

async fn creates(server: &PodDebugServer, a: &Args) {
    let deadline = Instant::now() + Duration::from_secs(a.seconds);
    let seq = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..a.clients {
        let client = server.front_proxy_client(&format!("load-{c}"), &["dev"]);
        let seq = seq.clone();
        let pods = a.pods;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors: Vec<String> = Vec::new();
            while Instant::now() < deadline {
                let n = seq.fetch_add(1, Ordering::Relaxed) as usize;
                let path = format!(
                    "/apis/poddebug.dev/v1alpha1/namespaces/{NS}/pods/{}/debug/d{n}",
                    pod_name(n % pods)
                );
                let started = Instant::now();
                let r = client
                    .request(
                        Method::POST,
                        &path,
                        &[],
                        r#"{"container":{"image":"busybox"}}"#,
                    )
                    .await;
                lat.push(started.elapsed());
                match r {
                    Ok((StatusCode::CREATED, _, _)) => {}
                    Ok((code, _, body)) => errors.push(format!(
                        "{code}: {}",
                        String::from_utf8_lossy(&body)
                            .chars()
                            .take(160)
                            .collect::<String>()
                    )),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (lat, errors)
        }));
    }
    let started = Instant::now();
    let mut lat = Vec::new();
    let mut errors = Vec::new();
    for t in tasks {
        if let Ok((l, e)) = t.await {
            lat.extend(l);
            errors.extend(e);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    lat.sort();
    println!(
        "## Creates: {} clients, {} pods, {} s",
        a.clients, a.pods, a.seconds
    );
    println!(
        "requests {} ({:.0}/s), p50 {}, p99 {}, max {}, errors {}",
        lat.len(),
        lat.len() as f64 / elapsed,
        ms(pct(&lat, 0.5)),
        ms(pct(&lat, 0.99)),
        ms(lat.last().copied().unwrap_or_default()),
        errors.len()
    );
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for e in errors {
        *kinds.entry(e).or_default() += 1;
    }
    for (e, n) in kinds.iter().take(10) {
        println!("  {n} × {e}");
    }
}

type Ws = WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

async fn open(client: &TestClient, pod: &str) -> Result<Ws, String> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(
            Method::GET,
            &format!("/apis/poddebug.dev/v1alpha1/namespaces/{NS}/pods/{pod}/attach?{QUERY}"),
            &headers,
        )
        .await
        .map_err(|e| e.to_string())?;
    if resp.status != StatusCode::SWITCHING_PROTOCOLS {
        return Err(format!("{}", resp.status));
    }
    let io = resp.io.ok_or("no upgraded connection")?;
    Ok(WebSocketStream::from_raw_socket(io, Role::Client, None).await)
}

/// One stream: send `data` on stdin in 4 KiB messages while reading stdout; returns how many
/// bytes came back equal and in order, and how many did not come back.
async fn checksummed(client: TestClient, pod: String, data: Vec<u8>) -> Result<(u64, u64), String> {
    let ws = open(&client, &pod).await?;
    let (mut tx, mut rx) = ws.split();
    let total = data.len();
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        for chunk in sent.chunks(4096) {
            let mut m = Vec::with_capacity(chunk.len() + 1);
            m.push(0u8);
            m.extend_from_slice(chunk);
            if tx.send(Message::binary(m)).await.is_err() {
                break;
            }
        }
        tx
    });
    let mut got = Vec::with_capacity(total);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while got.len() < total {
        match tokio::time::timeout_at(deadline, rx.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) if b.first() == Some(&1) => {
                got.extend_from_slice(&b[1..]);
            }
            Ok(Some(Ok(_))) => {}
            _ => break,
        }
    }
    if let Ok(mut tx) = writer.await {
        let _ = tx.close().await;
    }
    let equal = got.iter().zip(&data).take_while(|(a, b)| a == b).count() as u64;
    Ok((equal, total as u64 - equal))
}

/// Bytes that differ per stream and per position (xorshift), so a byte delivered to the wrong
/// stream or out of order is caught.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 0x04 is the fake `cat`'s end of input (a TTY's Ctrl-D): never sent.
            match x as u8 {
                4 => 5,
                b => b,
            }
        })
        .collect()
}

async fn streams(server: &PodDebugServer, a: &Args) {
    if a.streams == 0 {
        return;
    }
    let client = server.front_proxy_client("stream-load", &["dev"]);
    let before = rss_kib(server.pid());
    let started = Instant::now();
    let mut tasks = Vec::new();
    let limiter = Arc::new(tokio::sync::Semaphore::new(a.streams));
    for i in 0..a.streams {
        let data = noise(i as u64, a.stream_kib * 1024);
        let client = client.clone();
        let pod = pod_name(i % a.pods);
        let limiter = limiter.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = limiter.acquire_owned().await;
            checksummed(client, pod, data).await
        }));
    }
    let (mut equal, mut lost, mut failed) = (0u64, 0u64, Vec::new());
    let mut peak = before;
    for t in tasks {
        peak = peak.max(rss_kib(server.pid()));
        match t.await {
            Ok(Ok((e, l))) => {
                equal += e;
                lost += l;
            }
            Ok(Err(e)) => failed.push(e),
            Err(e) => failed.push(e.to_string()),
        }
    }
    println!(
        "## Checksummed streams: {} concurrent, {} KiB each, {:.1} s",
        a.streams,
        a.stream_kib,
        started.elapsed().as_secs_f64()
    );
    println!(
        "bytes echoed equal and in order {equal}, bytes lost or changed {lost}, streams that failed to open {}",
        failed.len()
    );
    println!("server RSS {before} KiB before, peak seen {peak} KiB");
    for e in failed.iter().take(5) {
        println!("  {e}");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_namespace(NS, &[]);
    for i in 0..a.pods {
        fake.add_pod_json(json!({
            "metadata": {"name": pod_name(i), "namespace": NS},
            "spec": {
                "containers": [{"name": "app", "image": "busybox"}],
                "ephemeralContainers": [{"name": "cat", "image": "busybox", "stdin": true}],
            },
        }));
        fake.set_ec_state(NS, &pod_name(i), "cat", ContainerState::Running);
    }
    fake.allow_all();
    let pki = fake.pki().clone();

    // Start-to-ready: from spawn to the first 200 of /readyz (polled every 100 ms by the harness,
    // so the figure is rounded up to that).
    let started = Instant::now();
    let server = PodDebugServer::start(
        &fake,
        &pki,
        &[
            "--max-debug-containers-per-pod=0",
            "--max-requests-inflight=0",
            // One user holds every stream at once.
            "--max-sessions-per-user=0",
            "--v=0",
        ],
    )
    .await;
    let ready = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("## Footprint");
    println!(
        "start-to-ready {} (harness polls /readyz every 100 ms), idle RSS {} KiB",
        ms(ready),
        rss_kib(server.pid())
    );
    creates(&server, &a).await;
    streams(&server, &a).await;
}
