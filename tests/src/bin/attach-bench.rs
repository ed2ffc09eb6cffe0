//! Attach benchmark on a real cluster: one stream's bulk throughput through poddebug (the
//! aggregator, then poddebug's relay to kube-apiserver's `pods/attach`) against kube-apiserver's
//! own `pods/attach` of the same container, both with kube-rs's WebSocket client.
//!
//! The benchmark adds a debug container running `cat` (stdin, no TTY) to the pod through
//! poddebug, then alternates the two paths: each run writes `--mib` MiB to the container's
//! stdin in 32 KiB writes from one task while another reads the echo from its stdout; MB/s is
//! 10^6 echoed bytes per second. A 1 MiB warm-up on each path comes first. At the end the
//! median of each path and their ratio are printed. The `cat` keeps running (it is PID 1 of
//! its container and cannot be stopped): use a throw-away pod.
//!
//! With `--cpu NAME=PID` (repeats: say `--cpu kube-apiserver=$(pgrep -x kube-apiserver)
//! --cpu poddebug=$(pgrep -f poddebug-apiserver)`), the CPU time (`utime + stime`) each of those
//! processes spent during the runs of each path is reported per MB echoed: what relaying one MB
//! costs kube-apiserver on the core path and poddebug on its own.
//!
//! Usage (ends by itself after `--runs` rounds):
//! `attach-bench --kubeconfig K --namespace NS --pod POD [--mib 16] [--runs 5]
//!  [--image busybox:1.36] [--cpu NAME=PID ...]`

use poddebug_tests::bench::median;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use poddebug_tests::kubeconfig::BenchCommandLine;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const CHUNK: usize = 32 * 1024;
/// No single run may take longer than this (a stalled stream ends the benchmark).
const RUN_LIMIT: Duration = Duration::from_secs(300);

const USAGE: &str = "usage: attach-bench --kubeconfig K --namespace NS --pod POD [--mib N] \
                     [--runs N] [--image IMAGE] [--cpu NAME=PID ...]";

struct Args {
    cl: BenchCommandLine,
    mib: usize,
    runs: usize,
    image: String,
    /// Processes whose CPU time is measured: (name, pid).
    cpu: Vec<(String, u32)>,
}

fn args() -> Args {
    let cl = BenchCommandLine::parse(USAGE);
    let (mut mib, mut runs, mut image) = (16, 5, "busybox:1.36".to_owned());
    let mut cpu = Vec::new();
    for (k, v) in &cl.other {
        match k.as_str() {
            "--mib" => mib = cl.positive(k, v),
            "--runs" => runs = cl.positive(k, v),
            "--image" => image = v.clone(),
            "--cpu" => match v
                .split_once('=')
                .and_then(|(n, p)| Some((n, p.trim().parse().ok()?)))
            {
                Some((n, pid)) => cpu.push((n.to_owned(), pid)),
                None => cl.fail(&format!("--cpu {v}: NAME=PID expected")),
            },
            k => cl.fail(&format!("unknown argument {k}")),
        }
    }
    Args {
        cl,
        mib,
        runs,
        image,
        cpu,
    }
}

/// `utime + stime` of process `pid`, in seconds (`/proc/PID/stat`, in ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The CPU seconds of each measured process.
fn cpu_now(a: &Args) -> Vec<f64> {
    a.cpu.iter().map(|(_, pid)| cpu_seconds(*pid)).collect()
}

fn add_since(acc: &mut [f64], before: &[f64], a: &Args) {
    for ((acc, b), now) in acc.iter_mut().zip(before).zip(cpu_now(a)) {
        *acc += now - b;
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {e}");
    std::process::exit(1);
}

/// Write `total` bytes to `stdin` while reading as many back from `stdout`; MB/s.
async fn bulk<W, R>(mut stdin: W, mut stdout: R, total: usize) -> f64
where
    W: AsyncWrite + Unpin + Send + 'static,
    R: AsyncRead + Unpin,
{
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let chunk = vec![b'x'; CHUNK];
        let mut sent = 0;
        while sent < total {
            let n = CHUNK.min(total - sent);
            stdin
                .write_all(&chunk[..n])
                .await
                .unwrap_or_else(|e| fail("stdin", e));
            sent += n;
        }
        stdin.flush().await.unwrap_or_else(|e| fail("stdin", e));
        stdin
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < total {
        match tokio::time::timeout(RUN_LIMIT, stdout.read(&mut buf)).await {
            Ok(Ok(0)) => fail("stdout", format!("ended after {got} of {total} bytes")),
            Ok(Ok(n)) => got += n,
            Ok(Err(e)) => fail("stdout", e),
            Err(_) => fail("stdout", format!("stalled after {got} of {total} bytes")),
        }
    }
    let elapsed = start.elapsed();
    let _stdin = writer.await.unwrap_or_else(|e| fail("writer", e));
    total as f64 / elapsed.as_secs_f64() / 1e6
}

async fn direct(kube: &Client, ns: &str, pod: &str, container: &str, total: usize) -> f64 {
    let api: kube::Api<Pod> = kube::Api::namespaced(kube.clone(), ns);
    let params = kube::api::AttachParams::default()
        .container(container)
        .stdin(true)
        .stdout(true)
        .stderr(false);
    let mut p = api
        .attach(pod, &params)
        .await
        .unwrap_or_else(|e| fail("pods/attach", e));
    let (Some(stdin), Some(stdout)) = (p.stdin(), p.stdout()) else {
        fail("pods/attach", "no stdin or stdout");
    };
    let rate = bulk(stdin, stdout, total).await;
    p.abort();
    rate
}

async fn through(
    dc: &poddebug_client::DebugContainers,
    pod: &str,
    name: &str,
    total: usize,
) -> f64 {
    let params = poddebug_client::AttachParams {
        stdin: true,
        stdout: true,
        stderr: false,
        tty: false,
        ..Default::default()
    };
    let mut a = dc
        .attach(pod, name, &params)
        .await
        .unwrap_or_else(|e| fail("poddebug attach", e));
    let (Some(stdin), Some(stdout)) = (a.stdin(), a.stdout()) else {
        fail("poddebug attach", "no stdin or stdout");
    };
    bulk(stdin, stdout, total).await
}

#[tokio::main]
async fn main() {
    let a = args();
    let kube = a.cl.client(&a.cl.kubeconfig).await;
    let name = format!("abench-{:x}", std::process::id() % 0x10000);
    let body = json!({"container": {"image": a.image, "command": ["cat"], "stdin": true}});
    let req = http::Request::post(format!(
        "/apis/poddebug.dev/v1alpha1/namespaces/{}/pods/{}/debug/{name}?wait=true&timeoutSeconds=60",
        a.cl.namespace, a.cl.pod
    ))
    .header("content-type", "application/json")
    .body(body.to_string().into_bytes())
    .unwrap_or_else(|e| a.cl.fail(&format!("bad request: {e}")));
    let created: serde_json::Value = kube
        .request(req)
        .await
        .unwrap_or_else(|e| fail("create the cat debug container", e));
    let Some(container) = created["status"]["ephemeralContainerName"].as_str() else {
        fail("create the cat debug container", created);
    };
    let dc = poddebug_client::DebugContainers::new(kube.clone(), &a.cl.namespace);
    let total = a.mib << 20;

    direct(&kube, &a.cl.namespace, &a.cl.pod, container, 1 << 20).await;
    through(&dc, &a.cl.pod, &name, 1 << 20).await;
    let (mut d, mut t) = (Vec::new(), Vec::new());
    let (mut d_cpu, mut t_cpu) = (vec![0.0; a.cpu.len()], vec![0.0; a.cpu.len()]);
    for _ in 0..a.runs {
        let before = cpu_now(&a);
        d.push(direct(&kube, &a.cl.namespace, &a.cl.pod, container, total).await);
        add_since(&mut d_cpu, &before, &a);
        let before = cpu_now(&a);
        t.push(through(&dc, &a.cl.pod, &name, total).await);
        add_since(&mut t_cpu, &before, &a);
    }
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "## Bulk throughput of one attach stream ({} MiB echoed by cat, 32 KiB writes, median of {})",
        a.mib, a.runs
    );
    println!(
        "core pods/attach   MB/s: {:.1}  (runs: [{}])",
        median(d.clone()),
        fmt(&d)
    );
    println!(
        "through poddebug   MB/s: {:.1}  (runs: [{}])",
        median(t.clone()),
        fmt(&t)
    );
    println!("share: {:.1}%", median(t) / median(d) * 100.0);
    let mb = (total * a.runs) as f64 / 1e6;
    for (i, (n, _)) in a.cpu.iter().enumerate() {
        println!(
            "CPU of {n}: {:.2} ms per MB on the core path, {:.2} ms per MB through poddebug",
            d_cpu[i] / mb * 1000.0,
            t_cpu[i] / mb * 1000.0
        );
    }
    println!(
        "(debug container {name} keeps running cat in pod {}: delete the pod)",
        a.cl.pod
    );
}
