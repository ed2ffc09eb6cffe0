//! Attach stream benchmark: the same WebSocket (`v5.channel.k8s.io`) client talking to the fake
//! kube-apiserver's attach directly, and through the real `poddebug-apiserver` binary.
//!
//! - bulk throughput: stdin → the fake's `cat` → stdout, writer and reader concurrent;
//! - small-message round trip: one 16-byte stdin message, wait for its echo, repeated;
//! - memory per idle stream: the server's RSS before and after opening N idle streams.
//!
//! Usage (release build recommended; loopback only, bounded, ends by itself):
//! `PODDEBUG_APISERVER_BIN=target/release/poddebug-apiserver target/release/stream-bench
//!  [--bulk-mib 64] [--rtt-iterations 2000] [--idle-streams 1000] [--runs 3]
//!  [--server-arg --recording-dir=/tmp/rec ...] [--compare-arg --recording-dir=/tmp/rec ...]`
//! (`--server-arg` repeats: extra server flags). With `--compare-arg` (repeats), a second server
//! runs with those flags added, and every bulk run goes direct, then through both servers (in
//! turns, first one then the other first), so both meet the same moments of a noisy machine;
//! the cost of the compared flags is the median of the second's throughput over the first's,
//! run by run.
//! `--compare-bin PATH` runs the compared server from another binary (an earlier build: the
//! relay before and after a change, side by side in one run), with `--compare-arg`s if any.
//! Each server's CPU time (`utime + stime` of its process) over its bulk runs is reported per
//! MB relayed.
//! `--rtt-iterations 0` and `--idle-streams 0` skip those parts.

use poddebug_tests::bench::{self, median, num, pct};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{Method, StatusCode};
use poddebug_tests::{ADMIN_TOKEN, ContainerState, FakeKube, PodDebugServer, TestClient, TestPki};
use serde_json::json;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

const NS: &str = "default";
const POD: &str = "web";
const QUERY: &str = "container=dbg&stdin=true&stdout=true&tty=true";
const CHUNK: usize = 32 * 1024;

type Ws = WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

struct Args {
    bulk_mib: usize,
    rtt_iterations: usize,
    idle_streams: usize,
    runs: usize,
    server_args: Vec<String>,
    compare_args: Vec<String>,
    compare_bin: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        bulk_mib: 64,
        rtt_iterations: 2000,
        idle_streams: 1000,
        runs: 3,
        // One user holds every idle stream at once.
        server_args: vec!["--v=1".to_owned()],
        compare_args: Vec::new(),
        compare_bin: None,
    };
    bench::flags(|k, v| {
        match k {
            "--server-arg" => a.server_args.push(v.to_owned()),
            "--compare-arg" => a.compare_args.push(v.to_owned()),
            "--compare-bin" => a.compare_bin = Some(v.to_owned()),
            "--bulk-mib" => a.bulk_mib = num(v)?,
            "--rtt-iterations" => a.rtt_iterations = num(v)?,
            "--idle-streams" => a.idle_streams = num(v)?,
            "--runs" => a.runs = num::<usize>(v)?.max(1),
            _ => return None,
        }
        Some(())
    });
    // One user opens every idle stream: more than --max-sessions-per-user allows by default.
    if a.idle_streams > 0 {
        a.server_args.push("--max-sessions-per-user=0".to_owned());
    }
    a
}

#[derive(Clone)]
struct Target {
    name: &'static str,
    client: TestClient,
    path: String,
}

async fn open(t: &Target) -> Ws {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = t
        .client
        .upgrade(Method::GET, &t.path, &headers)
        .await
        .expect("upgrade request");
    assert_eq!(
        resp.status,
        StatusCode::SWITCHING_PROTOCOLS,
        "{}: {resp:?}",
        t.name
    );
    let mut ws =
        WebSocketStream::from_raw_socket(resp.io.expect("upgraded"), Role::Client, None).await;
    // The initial empty stdout message.
    let first = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("first message");
    assert!(matches!(first, Some(Ok(Message::Binary(_)))));
    ws
}

fn stdout_len(msg: &Message) -> usize {
    match msg {
        Message::Binary(b) if b.first() == Some(&1) => b.len() - 1,
        _ => 0,
    }
}

/// MB/s (10^6 bytes per second) of `total` bytes echoed through one stream.
async fn bulk(t: &Target, total: usize) -> f64 {
    let ws = open(t).await;
    let (mut sink, mut stream) = ws.split();
    let mut chunk = vec![b'x'; CHUNK + 1];
    chunk[0] = 0;
    let chunk = Bytes::from(chunk);
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let mut sent = 0;
        while sent < total {
            sink.send(Message::Binary(chunk.clone()))
                .await
                .expect("send");
            sent += CHUNK;
        }
        sink
    });
    let mut got = 0;
    while got < total {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok(m))) => got += stdout_len(&m),
            other => panic!("{}: stream ended after {got} bytes: {other:?}", t.name),
        }
    }
    let elapsed = start.elapsed();
    let sink = writer.await.expect("writer");
    if let Ok(mut ws) = sink.reunite(stream) {
        let _ = ws.close(None).await;
    }
    total as f64 / elapsed.as_secs_f64() / 1e6
}

/// Round-trip times of `n` 16-byte messages, sorted.
async fn rtts(t: &Target, n: usize) -> Vec<Duration> {
    let mut ws = open(t).await;
    let mut msg = vec![b'p'; 17];
    msg[0] = 0;
    let msg = Bytes::from(msg);
    let mut out = Vec::with_capacity(n);
    for i in 0..n + 100 {
        let start = Instant::now();
        ws.send(Message::Binary(msg.clone())).await.expect("send");
        let mut got = 0;
        while got < 16 {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
                Ok(Some(Ok(m))) => got += stdout_len(&m),
                other => panic!("{}: {other:?}", t.name),
            }
        }
        if i >= 100 {
            out.push(start.elapsed());
        }
    }
    let _ = ws.close(None).await;
    out.sort();
    out
}

/// A bulk run through the server of process `pid`: MB/s, and the CPU seconds it spent.
async fn timed_bulk(pid: u32, t: &Target, total: usize) -> (f64, f64) {
    let before = cpu_seconds(pid);
    let mbs = bulk(t, total).await;
    (mbs, cpu_seconds(pid) - before)
}

/// `utime + stime` of process `pid`, in seconds (`/proc/PID/stat`, in clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat; here 11 and 12 (state is field 3).
    (ticks(11) + ticks(12)) / 100.0
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

async fn active_streams(server: &PodDebugServer) -> Option<f64> {
    let client = server.front_proxy_client("bench", &["system:masters"]);
    let (_, _, body) = client
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .ok()?;
    String::from_utf8_lossy(&body)
        .lines()
        .find(|l| l.starts_with("poddebug_apiserver_active_streams "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn ms(d: Duration) -> String {
    bench::ms(d, 3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true, "tty": true}],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, "dbg", ContainerState::Running));
    let pki = fake.pki().clone();
    let server_args: Vec<&str> = a.server_args.iter().map(String::as_str).collect();
    let server = PodDebugServer::start(&fake, &pki, &server_args).await;
    let direct = Target {
        name: "direct",
        client: fake.client(ADMIN_TOKEN),
        path: format!("/api/v1/namespaces/{NS}/pods/{POD}/attach?{QUERY}"),
    };
    let proxy_path =
        format!("/apis/poddebug.dev/v1alpha1/namespaces/{NS}/pods/{POD}/attach?{QUERY}");
    let proxy = Target {
        name: "poddebug",
        client: server.front_proxy_client("bench", &["system:authenticated"]),
        path: proxy_path.clone(),
    };
    let compared = if a.compare_args.is_empty() && a.compare_bin.is_none() {
        None
    } else {
        let mut args = server_args.clone();
        args.extend(a.compare_args.iter().map(String::as_str));
        let s = match &a.compare_bin {
            Some(bin) => {
                PodDebugServer::start_command(std::slice::from_ref(bin), &fake, &pki, &args).await
            }
            None => PodDebugServer::start(&fake, &pki, &args).await,
        };
        let t = Target {
            name: "poddebug (compared)",
            client: s.front_proxy_client("bench", &["system:authenticated"]),
            path: proxy_path,
        };
        Some((s, t))
    };

    // Warm up every path (TLS, authorization caches).
    bulk(&direct, 4 << 20).await;
    bulk(&proxy, 4 << 20).await;
    if let Some((_, t)) = &compared {
        bulk(t, 4 << 20).await;
    }

    let total = a.bulk_mib << 20;
    let mut d = Vec::new();
    let mut p = Vec::new();
    let mut q = Vec::new();
    // CPU seconds each server spent over its own bulk runs.
    let (mut p_cpu, mut q_cpu) = (0.0, 0.0);
    for run in 0..a.runs {
        d.push(bulk(&direct, total).await);
        // Every other run the compared server goes first, so that neither server always
        // follows the direct run.
        let compared_first = run % 2 == 1;
        if let (true, Some((s, t))) = (compared_first, &compared) {
            let (mbs, cpu) = timed_bulk(s.pid(), t, total).await;
            q.push(mbs);
            q_cpu += cpu;
        }
        let (mbs, cpu) = timed_bulk(server.pid(), &proxy, total).await;
        p.push(mbs);
        p_cpu += cpu;
        if let (false, Some((s, t))) = (compared_first, &compared) {
            let (mbs, cpu) = timed_bulk(s.pid(), t, total).await;
            q.push(mbs);
            q_cpu += cpu;
        }
    }
    let relayed_mb = (total * a.runs) as f64 / 1e6;
    let (dm, pm) = (median(d.clone()), median(p.clone()));
    println!(
        "## Bulk throughput (WebSocket v5, {} MiB echoed, {CHUNK}-byte messages, median of {})",
        a.bulk_mib, a.runs
    );
    println!(
        "direct   MB/s: {:.1}  (runs: {:?})",
        dm,
        d.iter()
            .map(|v| (v * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    println!(
        "poddebug MB/s: {:.1}  (runs: {:?})",
        pm,
        p.iter()
            .map(|v| (v * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    println!("ratio: {:.1}%", pm / dm * 100.0);
    println!(
        "poddebug CPU: {:.2} s over its runs, {:.2} ms per MB echoed",
        p_cpu,
        p_cpu / relayed_mb * 1000.0
    );
    if let Some((_, t)) = &compared {
        println!(
            "compared MB/s: {:.1}  (runs: {:?}; flags {:?})",
            median(q.clone()),
            q.iter()
                .map(|v| (v * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
            a.compare_args
        );
        println!(
            "compared CPU: {:.2} s over its runs, {:.2} ms per MB echoed ({:.1}% of poddebug's)",
            q_cpu,
            q_cpu / relayed_mb * 1000.0,
            q_cpu / p_cpu * 100.0
        );
        let paired: Vec<f64> = p.iter().zip(&q).map(|(p, q)| q / p).collect();
        println!(
            "compared / poddebug: median of the runs' ratios {:.1}%, ratio of the medians {:.1}% ({})",
            median(paired) * 100.0,
            median(q.clone()) / pm * 100.0,
            t.name
        );
    }

    if a.rtt_iterations > 0 {
        round_trips(&direct, &proxy, a.rtt_iterations).await;
        if let Some((_, t)) = &compared {
            round_trips(&direct, t, a.rtt_iterations).await;
        }
    }
    if a.idle_streams > 0 {
        idle(&server, &proxy, a.idle_streams).await;
    }
}

/// The round-trip part: both paths, percentiles and what poddebug adds.
async fn round_trips(direct: &Target, proxy: &Target, iterations: usize) {
    let rd = rtts(direct, iterations).await;
    let rp = rtts(proxy, iterations).await;
    println!(
        "## Round trip (16-byte stdin message → echo, {iterations} iterations after 100 warm-up)"
    );
    println!(
        "direct   p50 {} ms  p90 {} ms  p99 {} ms",
        ms(pct(&rd, 0.5)),
        ms(pct(&rd, 0.9)),
        ms(pct(&rd, 0.99))
    );
    println!(
        "{} p50 {} ms  p90 {} ms  p99 {} ms",
        proxy.name,
        ms(pct(&rp, 0.5)),
        ms(pct(&rp, 0.9)),
        ms(pct(&rp, 0.99))
    );
    println!(
        "added    p50 {} ms  p99 {} ms",
        ms(pct(&rp, 0.5).saturating_sub(pct(&rd, 0.5))),
        ms(pct(&rp, 0.99).saturating_sub(pct(&rd, 0.99)))
    );
}

/// The idle-stream part: the server's RSS before and after opening `count` streams.
async fn idle(server: &PodDebugServer, proxy: &Target, count: usize) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = server.pid();
    let before = rss_kib(pid);
    let mut streams = Vec::with_capacity(count);
    let started = Instant::now();
    let mut batch = Vec::new();
    for i in 0..count {
        let t = proxy.clone();
        batch.push(tokio::spawn(async move { open(&t).await }));
        if batch.len() == 16 || i + 1 == count {
            for h in batch.drain(..) {
                streams.push(h.await.expect("open"));
            }
        }
    }
    let opened_in = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = rss_kib(pid);
    let active = active_streams(server).await;
    println!(
        "## Idle streams ({} open through poddebug, opened in {:.1} s; active_streams metric {:?})",
        streams.len(),
        opened_in.as_secs_f64(),
        active
    );
    println!("server RSS before {before} KiB, after {after} KiB");
    println!(
        "per idle stream: {:.1} KiB",
        (after.saturating_sub(before)) as f64 / streams.len().max(1) as f64
    );
    for mut s in streams {
        let _ = s.close(None).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while active_streams(server).await != Some(0.0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "after closing: active_streams {:?}, server RSS {} KiB",
        active_streams(server).await,
        rss_kib(pid)
    );
}
