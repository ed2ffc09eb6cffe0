//! Create benchmark: creating through poddebug against doing the same directly with
//! kube-apiserver, side by side, for the three things poddebug creates (`--kind`):
//!
//! - `debug` (the default): a debug container (`POST .../pods/POD/debug/NAME`, a valid body)
//!   against the strategic-merge patch of `pods/POD/ephemeralcontainers` that `kubectl debug`
//!   sends, on the same pod;
//! - `copy`: a copy of the pod (`POST .../pods/POD/copy`) against creating the same pod
//!   directly (`POST /api/v1/namespaces/NS/pods`: the original's spec, read once before the
//!   rounds, plus a debug container, as `kubectl debug --copy-to` makes it);
//! - `node`: a node debug container (`POST .../nodes/NODE/debug/NAME`, `--pod` naming the
//!   node) against creating directly the pod `kubectl debug node/NODE --profile=sysadmin`
//!   makes (host namespaces, a privileged container, the host's root at `/host`), in
//!   `--namespace`.
//!
//! Each round makes one of each and times both; which of the two goes first alternates from
//! round to round, so neither always meets the cluster the other just changed. At the end the
//! p50 and p99 of each and their ratio are printed. Debug containers can never be removed, so
//! use throw-away pods; the pods a `copy` or `node` run made (both ways) are deleted at the end,
//! outside the timings. Copies of a pod no node can run, and node debug containers on a Node
//! object no kubelet serves, stay Pending: nothing starts, and only the API paths are measured.
//!
//! `--pod` takes one pod (node) or a comma-separated list: round `i` works on the `i mod N`th.
//! Every debug container makes its pod bigger (each ephemeral container adds its spec and
//! status), and the cost of both paths grows with it, so one pod given 200 containers measures
//! a pod no debugging session meets; a list of pods keeps each to a handful.
//!
//! Usage (ends by itself after `--count` rounds):
//! `create-bench --kubeconfig K --namespace NS --pod POD[,POD...] [--kind debug|copy|node]
//!  [--count 100] [--image IMAGE] [--poddebug-kubeconfig P] [--through poddebug|direct]
//!  [--samples FILE]`
//! `create-bench --summarize FILE[,FILE...]`
//!
//! How far the ratio moves by chance: `--through direct` (with `--kind debug`) sends the direct
//! patch on both sides, so the two columns time the same request and any ratio but 1.00 is the
//! machine's noise (p99, the second-slowest of 100 rounds, moves most). `--samples FILE` writes
//! each round's two times (CSV: `round,poddebug_first,through_ms,direct_ms`); `--summarize`
//! prints the same table over the rounds of several such files together, so that the p99 of
//! three runs rests on 300 rounds rather than 100.
//!
//! `--kubeconfig` reaches kube-apiserver; poddebug is reached through the same kubeconfig
//! (through the aggregator) unless `--poddebug-kubeconfig` names another one (a kubeconfig that
//! talks to poddebug directly, as the smoke test does against the fake kube-apiserver).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Client;
use poddebug_tests::kubeconfig::BenchCommandLine;
use serde_json::{Value, json};

const USAGE: &str = "usage: create-bench --kubeconfig K --namespace NS --pod POD[,POD...] \
                     [--kind debug|copy|node] [--count N] [--image IMAGE] \
                     [--poddebug-kubeconfig P] [--through poddebug|direct] [--samples FILE]\n   \
                     or: create-bench --summarize FILE[,FILE...]";

const GV: &str = "/apis/poddebug.dev/v1alpha1";

/// What is created.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Debug,
    Copy,
    Node,
}

struct Args {
    cl: BenchCommandLine,
    poddebug_kubeconfig: Option<PathBuf>,
    count: usize,
    image: String,
    kind: Kind,
    /// The first column goes through poddebug (`false`: the direct request again).
    through_poddebug: bool,
    samples: Option<PathBuf>,
}

fn args() -> Args {
    let cl = BenchCommandLine::parse(USAGE);
    let mut poddebug_kubeconfig = None;
    let (mut count, mut image) = (100, "registry.k8s.io/pause:3.10".to_owned());
    let mut kind = Kind::Debug;
    let (mut through_poddebug, mut samples) = (true, None);
    for (k, v) in &cl.other {
        match k.as_str() {
            "--through" => {
                through_poddebug = match v.as_str() {
                    "poddebug" => true,
                    "direct" => false,
                    _ => cl.fail("--through must be poddebug or direct"),
                }
            }
            "--samples" => samples = Some(PathBuf::from(v)),
            "--poddebug-kubeconfig" => poddebug_kubeconfig = Some(PathBuf::from(v)),
            "--count" => count = cl.positive(k, v),
            "--image" => image = v.clone(),
            "--kind" => {
                kind = match v.as_str() {
                    "debug" => Kind::Debug,
                    "copy" => Kind::Copy,
                    "node" => Kind::Node,
                    _ => cl.fail("--kind must be debug, copy or node"),
                }
            }
            k => cl.fail(&format!("unknown argument {k}")),
        }
    }
    if !through_poddebug && kind != Kind::Debug {
        cl.fail("--through direct is for --kind debug");
    }
    Args {
        cl,
        poddebug_kubeconfig,
        count,
        image,
        kind,
        through_poddebug,
        samples,
    }
}

/// Send one request; its answer as JSON (`Null` when not JSON), or the end of the benchmark.
async fn send(client: &Client, req: http::Request<Vec<u8>>, what: &str) -> Value {
    match client.request_text(req).await {
        Ok(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
        Err(e) => {
            eprintln!("{what} failed: {e}");
            std::process::exit(1);
        }
    }
}

/// Time one request; its answer, or the end of the benchmark with its failure.
async fn timed(client: &Client, req: http::Request<Vec<u8>>, what: &str) -> (Duration, Value) {
    let start = Instant::now();
    let answer = send(client, req, what).await;
    (start.elapsed(), answer)
}

/// A request with a JSON body of `content_type` (none for `Value::Null`).
fn request(
    method: http::Method,
    path: String,
    content_type: &str,
    body: &Value,
) -> http::Request<Vec<u8>> {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(bytes)
        .unwrap_or_else(|e| {
            eprintln!("bad request: {e}");
            std::process::exit(2);
        })
}

/// The value at quantile `q` (0..=1) of sorted samples (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The pod `kubectl debug --copy-to` makes of `original`: its spec, unbound, plus a debug
/// container.
fn direct_copy(original: &Value, name: &str, image: &str) -> Value {
    let mut spec = original["spec"].clone();
    if let Some(s) = spec.as_object_mut() {
        s.remove("nodeName");
        s.remove("ephemeralContainers");
    }
    if let Some(containers) = spec["containers"].as_array_mut() {
        containers.push(json!({"name": "debugger", "image": image, "stdin": true, "tty": true}));
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

/// The pod `kubectl debug node/NODE --profile=sysadmin` makes.
fn direct_node_pod(node: &str, name: &str, image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "nodeName": node, "hostIPC": true, "hostNetwork": true, "hostPID": true,
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "debugger", "image": image, "stdin": true, "tty": true,
                "securityContext": {"privileged": true},
                "volumeMounts": [{"name": "host-root", "mountPath": "/host"}]}]}})
}

/// The direct request of `--kind debug`: the strategic-merge patch `kubectl debug` sends.
fn direct_patch(ns: &str, pod: &str, name: &str, image: &str) -> http::Request<Vec<u8>> {
    request(
        http::Method::PATCH,
        format!("/api/v1/namespaces/{ns}/pods/{pod}/ephemeralcontainers"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"ephemeralContainers": [{"name": name, "image": image}]}}),
    )
}

/// One round: its two times, and which went first.
struct Round {
    poddebug_first: bool,
    through: Duration,
    direct: Duration,
}

/// The `--samples` file of `rounds`.
fn samples_csv(rounds: &[Round]) -> String {
    let mut csv = String::from("round,poddebug_first,through_ms,direct_ms\n");
    for (i, r) in rounds.iter().enumerate() {
        csv.push_str(&format!(
            "{i},{},{:.3},{:.3}\n",
            r.poddebug_first,
            ms(r.through),
            ms(r.direct)
        ));
    }
    csv
}

/// The rounds of a `--samples` file.
fn parse_samples(text: &str) -> Result<Vec<Round>, String> {
    let mut rounds = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let parsed = match fields.as_slice() {
            [_, first, t, d] => first.parse::<bool>().ok().zip(
                t.parse::<f64>()
                    .ok()
                    .zip(d.parse::<f64>().ok())
                    .filter(|(t, d)| t.is_finite() && d.is_finite() && *t >= 0.0 && *d >= 0.0),
            ),
            _ => None,
        };
        let Some((poddebug_first, (t, d))) = parsed else {
            return Err(format!(
                "line {}: not round,poddebug_first,through_ms,direct_ms",
                n + 1
            ));
        };
        rounds.push(Round {
            poddebug_first,
            through: Duration::from_secs_f64(t / 1000.0),
            direct: Duration::from_secs_f64(d / 1000.0),
        });
    }
    if rounds.is_empty() {
        return Err("no rounds".to_owned());
    }
    Ok(rounds)
}

/// The table: p50 and p99 of each column and their ratios.
fn report(first_line: &str, labels: (&str, &str), rounds: &[Round]) -> String {
    let mut through: Vec<Duration> = rounds.iter().map(|r| r.through).collect();
    let mut direct: Vec<Duration> = rounds.iter().map(|r| r.direct).collect();
    through.sort();
    direct.sort();
    let (p50t, p99t) = (quantile(&through, 0.5), quantile(&through, 0.99));
    let (p50d, p99d) = (quantile(&direct, 0.5), quantile(&direct, 0.99));
    let line = |label: &str, p50: String, p99: String| format!("{label:<34} {p50:>10} {p99:>10}\n");
    let mut out = format!("{first_line}\n");
    out.push_str(&line("path", "p50 ms".into(), "p99 ms".into()));
    out.push_str(&line(
        labels.0,
        format!("{:.1}", ms(p50t)),
        format!("{:.1}", ms(p99t)),
    ));
    out.push_str(&line(
        labels.1,
        format!("{:.1}", ms(p50d)),
        format!("{:.1}", ms(p99d)),
    ));
    let ratio = |a: Duration, b: Duration| format!("{:.2}", ms(a) / ms(b).max(f64::EPSILON));
    out.push_str(&line("ratio", ratio(p50t, p50d), ratio(p99t, p99d)));
    out
}

/// `--summarize FILE[,FILE...]`: the table over the rounds of all the files.
fn summarize(files: &str) -> ! {
    let mut rounds = Vec::new();
    for file in files.split(',') {
        let parsed = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|t| parse_samples(&t));
        match parsed {
            Ok(r) => rounds.extend(r),
            Err(e) => {
                eprintln!("{file}: {e}");
                std::process::exit(2);
            }
        }
    }
    let first = format!(
        "rounds: {} from {} file(s)",
        rounds.len(),
        files.split(',').count()
    );
    print!(
        "{}",
        report(&first, ("first column", "second column"), &rounds)
    );
    std::process::exit(0);
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, files] = argv.as_slice()
        && flag == "--summarize"
    {
        summarize(files);
    }
    let a = args();
    let kube = a.cl.client(&a.cl.kubeconfig).await;
    let poddebug = match &a.poddebug_kubeconfig {
        Some(p) => a.cl.client(p).await,
        None => kube.clone(),
    };
    let targets: Vec<&str> = a.cl.pod.split(',').collect();
    if targets.iter().any(|p| p.is_empty()) {
        a.cl.fail("--pod: a name is empty");
    }
    let ns = &a.cl.namespace;
    // The originals of copies, read once.
    let mut originals = Vec::new();
    if a.kind == Kind::Copy {
        for pod in &targets {
            let get = request(
                http::Method::GET,
                format!("/api/v1/namespaces/{ns}/pods/{pod}"),
                "application/json",
                &Value::Null,
            );
            originals.push(send(&kube, get, "reading the original").await);
        }
    }
    let run = format!("{:x}", std::process::id() % 0x10000);
    // With `--through direct` the first column is the direct request too, sent as kube-apiserver's.
    let first = if a.through_poddebug { &poddebug } else { &kube };
    let mut rounds = Vec::new();
    // What to delete at the end: poddebug's objects, and the pods made directly.
    let (mut made_through, mut made_direct) = (Vec::new(), Vec::new());
    for i in 0..a.count {
        let target = targets[i % targets.len()];
        let (name, direct_name) = (format!("b{run}-p{i}"), format!("b{run}-d{i}"));
        let (create, patch) = match a.kind {
            Kind::Debug if !a.through_poddebug => (
                direct_patch(ns, target, &name, &a.image),
                direct_patch(ns, target, &direct_name, &a.image),
            ),
            Kind::Debug => (
                request(
                    http::Method::POST,
                    format!("{GV}/namespaces/{ns}/pods/{target}/debug/{name}"),
                    "application/json",
                    &json!({"container": {"image": a.image}, "profile": "general"}),
                ),
                direct_patch(ns, target, &direct_name, &a.image),
            ),
            Kind::Copy => (
                request(
                    http::Method::POST,
                    format!("{GV}/namespaces/{ns}/pods/{target}/copy"),
                    "application/json",
                    &json!({"metadata": {"name": name},
                            "container": {"name": "debugger", "image": a.image, "stdin": true, "tty": true}}),
                ),
                request(
                    http::Method::POST,
                    format!("/api/v1/namespaces/{ns}/pods"),
                    "application/json",
                    &direct_copy(&originals[i % originals.len()], &direct_name, &a.image),
                ),
            ),
            Kind::Node => (
                request(
                    http::Method::POST,
                    format!("{GV}/nodes/{target}/debug/{name}"),
                    "application/json",
                    &json!({"container": {"image": a.image, "stdin": true, "tty": true}}),
                ),
                request(
                    http::Method::POST,
                    format!("/api/v1/namespaces/{ns}/pods"),
                    "application/json",
                    &direct_node_pod(target, &direct_name, &a.image),
                ),
            ),
        };
        let ((t, made), d) = if i % 2 == 0 {
            let t = timed(first, create, "poddebug create").await;
            (t, timed(&kube, patch, "direct create").await.0)
        } else {
            let d = timed(&kube, patch, "direct create").await.0;
            (timed(first, create, "poddebug create").await, d)
        };
        rounds.push(Round {
            poddebug_first: i % 2 == 0,
            through: t,
            direct: d,
        });
        match a.kind {
            Kind::Debug => {}
            Kind::Copy => {
                let copy = made["metadata"]["name"]
                    .as_str()
                    .unwrap_or(&name)
                    .to_owned();
                made_through.push(format!("{GV}/namespaces/{ns}/pods/{target}/copies/{copy}"));
                made_direct.push(format!("/api/v1/namespaces/{ns}/pods/{direct_name}"));
            }
            Kind::Node => {
                made_through.push(format!("{GV}/nodes/{target}/debug/{name}"));
                made_direct.push(format!("/api/v1/namespaces/{ns}/pods/{direct_name}"));
            }
        }
    }
    // Pods no kubelet runs are deleted at once (grace period 0).
    for (client, paths) in [(&poddebug, &made_through), (&kube, &made_direct)] {
        for path in paths {
            let delete = request(
                http::Method::DELETE,
                format!("{path}?gracePeriodSeconds=0"),
                "application/json",
                &Value::Null,
            );
            if let Err(e) = client.request_text(delete).await {
                eprintln!("deleting {path} failed: {e}");
            }
        }
    }
    if let Some(path) = &a.samples
        && let Err(e) = std::fs::write(path, samples_csv(&rounds))
    {
        eprintln!("writing {}: {e}", path.display());
    }
    let labels = match a.kind {
        Kind::Debug if !a.through_poddebug => ("direct patch (first column)", "direct patch"),
        Kind::Debug => ("poddebug create", "direct ephemeralcontainers patch"),
        Kind::Copy => ("poddebug copy", "direct pod create"),
        Kind::Node => ("poddebug node debug container", "direct pod create"),
    };
    let unit = if a.kind == Kind::Node {
        "node(s)"
    } else {
        "pod(s)"
    };
    let first_line = format!("creates per path: {} on {} {unit}", a.count, targets.len());
    print!("{}", report(&first_line, labels, &rounds));
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

    #[test]
    fn a_direct_copy_is_the_original_unbound_plus_a_debug_container() {
        let original = json!({"metadata": {"name": "web", "uid": "u"}, "spec": {
            "nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": [{"name": "old"}]}, "status": {"phase": "Running"}});
        let pod = direct_copy(&original, "copy-1", "busybox:1.36");
        assert_eq!(pod["metadata"], json!({"name": "copy-1"}));
        assert!(pod["spec"].get("nodeName").is_none());
        assert!(pod["spec"].get("ephemeralContainers").is_none());
        assert_eq!(pod["spec"]["containers"][1]["name"], "debugger");
        assert!(pod.get("status").is_none());
    }

    #[test]
    fn samples_written_are_read_back_and_pooled() {
        let rounds: Vec<Round> = (1..=100)
            .map(|i| Round {
                poddebug_first: i % 2 == 0,
                through: Duration::from_millis(2 * i),
                direct: Duration::from_millis(i),
            })
            .collect();
        let csv = samples_csv(&rounds);
        assert!(
            csv.starts_with("round,poddebug_first,through_ms,direct_ms\n0,false,2.000,1.000\n")
        );
        let back = parse_samples(&csv).unwrap();
        assert_eq!(back.len(), 100);
        assert!(back[1].poddebug_first);
        assert_eq!(back[99].through, Duration::from_millis(200));
        let table = report("pooled", ("a", "b"), &back);
        let line =
            |label: &str, p50: &str, p99: &str| format!("\n{label:<34} {p50:>10} {p99:>10}\n");
        assert!(table.starts_with("pooled\n"), "{table}");
        assert!(table.contains(&line("a", "100.0", "198.0")), "{table}");
        assert!(table.contains(&line("b", "50.0", "99.0")), "{table}");
        assert!(table.contains(&line("ratio", "2.00", "2.00")), "{table}");
    }

    #[test]
    fn a_samples_file_that_is_not_one_is_refused() {
        assert!(parse_samples("round,poddebug_first,through_ms,direct_ms\n").is_err());
        assert!(parse_samples("h\n0,true,1.0\n").is_err());
        assert!(parse_samples("h\n0,yes,1.0,2.0\n").is_err());
        assert!(parse_samples("h\n0,true,-1.0,2.0\n").is_err());
        assert!(parse_samples("h\n0,true,NaN,2.0\n").is_err());
    }
}
