//! Create benchmark: adding a debug container through poddebug against adding an ephemeral
//! container with a direct `pods/ephemeralcontainers` patch, on the same pod, side by side.
//!
//! Each round makes one poddebug create (`POST .../pods/POD/debug/NAME`, a valid body) and one
//! direct strategic-merge patch of `pods/POD/ephemeralcontainers`, and times both; which of the
//! two goes first alternates from round to round, so neither always meets the pod the other
//! just changed. At the end the p50 and p99 of each and their ratio are printed. Every request
//! adds a container to the pod (ephemeral containers can never be removed), so use throw-away
//! pods.
//!
//! `--pod` takes one pod or a comma-separated list: round `i` works on pod `i mod N`. Every
//! request makes the pod bigger (each ephemeral container adds its spec and status), and the
//! cost of both paths grows with it, so one pod given 200 containers measures a pod no debugging
//! session meets; a list of pods keeps each to a handful.
//!
//! Usage (ends by itself after `--count` rounds):
//! `create-bench --kubeconfig K --namespace NS --pod POD[,POD...] [--count 100] [--image IMAGE]
//!  [--poddebug-kubeconfig P]`
//!
//! `--kubeconfig` reaches kube-apiserver; poddebug is reached through the same kubeconfig
//! (through the aggregator) unless `--poddebug-kubeconfig` names another one (a kubeconfig that
//! talks to poddebug directly, as the smoke test does against the fake kube-apiserver).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Client;
use poddebug_tests::kubeconfig::BenchCommandLine;
use serde_json::json;

const USAGE: &str = "usage: create-bench --kubeconfig K --namespace NS --pod POD[,POD...] \
                     [--count N] [--image IMAGE] [--poddebug-kubeconfig P]";

struct Args {
    cl: BenchCommandLine,
    poddebug_kubeconfig: Option<PathBuf>,
    count: usize,
    image: String,
}

fn args() -> Args {
    let cl = BenchCommandLine::parse(USAGE);
    let mut poddebug_kubeconfig = None;
    let (mut count, mut image) = (100, "registry.k8s.io/pause:3.10".to_owned());
    for (k, v) in &cl.other {
        match k.as_str() {
            "--poddebug-kubeconfig" => poddebug_kubeconfig = Some(PathBuf::from(v)),
            "--count" => count = cl.positive(k, v),
            "--image" => image = v.clone(),
            k => cl.fail(&format!("unknown argument {k}")),
        }
    }
    Args {
        cl,
        poddebug_kubeconfig,
        count,
        image,
    }
}

/// Time one request; a failure ends the benchmark with its answer.
async fn timed(client: &Client, req: http::Request<Vec<u8>>, what: &str) -> Duration {
    let start = Instant::now();
    if let Err(e) = client.request_text(req).await {
        eprintln!("{what} failed: {e}");
        std::process::exit(1);
    }
    start.elapsed()
}

/// The value at quantile `q` (0..=1) of sorted samples (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let a = args();
    let kube = a.cl.client(&a.cl.kubeconfig).await;
    let poddebug = match &a.poddebug_kubeconfig {
        Some(p) => a.cl.client(p).await,
        None => kube.clone(),
    };
    let pods: Vec<&str> = a.cl.pod.split(',').collect();
    if pods.iter().any(|p| p.is_empty()) {
        a.cl.fail("--pod: a pod name is empty");
    }
    let run = format!("{:x}", std::process::id() % 0x10000);
    let (mut through, mut direct) = (Vec::new(), Vec::new());
    for i in 0..a.count {
        let pod = pods[i % pods.len()];
        let name = format!("b{run}-p{i}");
        let body = json!({"container": {"image": a.image}, "profile": "general"});
        let create = http::Request::post(format!(
            "/apis/poddebug.dev/v1alpha1/namespaces/{}/pods/{pod}/debug/{name}",
            a.cl.namespace
        ))
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap_or_else(|e| a.cl.fail(&format!("bad request: {e}")));

        let name = format!("b{run}-d{i}");
        let patch = json!({"spec": {"ephemeralContainers": [{"name": name, "image": a.image}]}});
        let patch = http::Request::patch(format!(
            "/api/v1/namespaces/{}/pods/{pod}/ephemeralcontainers",
            a.cl.namespace
        ))
        .header("content-type", "application/strategic-merge-patch+json")
        .body(patch.to_string().into_bytes())
        .unwrap_or_else(|e| a.cl.fail(&format!("bad request: {e}")));

        if i % 2 == 0 {
            through.push(timed(&poddebug, create, "poddebug create").await);
            direct.push(timed(&kube, patch, "direct patch").await);
        } else {
            direct.push(timed(&kube, patch, "direct patch").await);
            through.push(timed(&poddebug, create, "poddebug create").await);
        }
    }
    through.sort();
    direct.sort();
    let (p50t, p99t) = (quantile(&through, 0.5), quantile(&through, 0.99));
    let (p50d, p99d) = (quantile(&direct, 0.5), quantile(&direct, 0.99));
    println!("creates per path: {} on {} pod(s)", a.count, pods.len());
    println!("{:<34} {:>10} {:>10}", "path", "p50 ms", "p99 ms");
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "poddebug create",
        ms(p50t),
        ms(p99t)
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "direct ephemeralcontainers patch",
        ms(p50d),
        ms(p99d)
    );
    println!(
        "{:<34} {:>10.2} {:>10.2}",
        "ratio",
        ms(p50t) / ms(p50d).max(f64::EPSILON),
        ms(p99t) / ms(p99d).max(f64::EPSILON)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&s, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&s, 0.99), Duration::from_millis(99));
        assert_eq!(quantile(&s[..1], 0.99), Duration::from_millis(1));
    }
}
