//! What poddebug's own handling of a big pod costs a create, in process, without a cluster: the
//! pod read parsed, the typed pod decoded, the update's body written, and the update's answer
//! (the pod again) decoded. Two ways, on the same pod text:
//!
//! - `tree`: the pod parsed into a `serde_json::Value`, the typed pod decoded from that tree,
//!   the new container pushed into it and the tree encoded, the answer decoded whole into the
//!   typed pod (what the create path did up to `0978f20`);
//! - `slices`: [`PodJson`] (the text split into borrowed slices: the typed pod decoded without
//!   `managedFields`, the body written by copying the slices).
//!
//! The pod is the create benchmark's after N rounds: N ephemeral containers as poddebug makes
//! them, each with its status and its `managedFields` entry, as `kubectl get pod -o json
//! --show-managed-fields` prints it; or any pod's JSON given with `--pod-file`.
//!
//! Usage: `target/release/pod-json-bench [--containers N] [--pod-file F] [--iterations K]`
//! (defaults 200 containers, 500 iterations); prints the median and p90 of each step in µs.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use poddebug_storage::pod_json::PodJson;
use serde_json::{Value, json};

fn ec(i: usize) -> Value {
    json!({
        "name": format!("debugger-{i:03}"),
        "image": "registry.k8s.io/pause:3.10",
        "env": [
            {"name": "PODDEBUG_NAME", "value": format!("debugger-{i:03}")},
            {"name": "PODDEBUG_OWNER", "value": "system:admin"},
            {"name": "PODDEBUG_CREATE_ID", "value": format!("{:032x}", i * 7919)},
            {"name": "PODDEBUG_PROFILE", "value": "general"}
        ],
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "stdin": true,
        "tty": true,
        "targetContainerName": "bench"
    })
}

fn ec_status(i: usize) -> Value {
    json!({
        "name": format!("debugger-{i:03}"),
        "state": {"running": {"startedAt": "2026-11-27T13:18:04Z"}},
        "lastState": {},
        "ready": false,
        "restartCount": 0,
        "image": "registry.k8s.io/pause:3.10",
        "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
        "containerID": format!("containerd://{:064x}", i * 104729),
        "started": false,
        "resources": {},
        "volumeMounts": [],
        "user": {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0, 10]}}
    })
}

/// The create benchmark's pod after `n` rounds.
fn pod(n: usize) -> Value {
    let ecs: Vec<Value> = (0..n).map(ec).collect();
    let statuses: Vec<Value> = (0..n).map(ec_status).collect();
    let mut fields = serde_json::Map::new();
    for i in 0..n {
        fields.insert(
            format!("k:{{\"name\":\"debugger-{i:03}\"}}"),
            json!({".": {}, "f:env": {".": {}, "k:{\"name\":\"PODDEBUG_NAME\"}": {".": {}, "f:name": {}, "f:value": {}}},
                   "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {}, "f:stdin": {},
                   "f:targetContainerName": {}, "f:terminationMessagePath": {},
                   "f:terminationMessagePolicy": {}, "f:tty": {}}),
        );
    }
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "bench", "namespace": "perf-bench", "uid": "6f1c1f0e-3a39-4c53-9d7f-3b0f3c5c1a11",
            "resourceVersion": "123456", "creationTimestamp": "2026-11-27T13:17:58Z",
            "labels": {"run": "bench"},
            "managedFields": [
                {"manager": "kubectl-run", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-27T13:17:58Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:run": {}}}}},
                {"manager": "poddebug", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-27T13:18:04Z", "fieldsType": "FieldsV1", "subresource": "ephemeralcontainers",
                 "fieldsV1": {"f:spec": {"f:ephemeralContainers": Value::Object(fields.clone())}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-27T13:18:04Z", "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:ephemeralContainerStatuses": {}}}}
            ]
        },
        "spec": {
            "containers": [{"name": "bench", "image": "registry.k8s.io/pause:3.10", "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": "node-1", "securityContext": {},
            "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "ephemeralContainers": ecs
        },
        "status": {
            "phase": "Running", "hostIP": "127.0.0.1", "podIP": "10.88.0.5", "qosClass": "BestEffort",
            "startTime": "2026-11-27T13:17:58Z",
            "ephemeralContainerStatuses": statuses
        }
    })
}

fn timed(samples: &mut Vec<Duration>, f: impl FnOnce()) {
    let start = Instant::now();
    f();
    samples.push(start.elapsed());
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "{what:<44} median {:>7.1} µs   p90 {:>7.1} µs",
        at(0.5).as_secs_f64() * 1e6,
        at(0.9).as_secs_f64() * 1e6
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut n, mut iterations, mut file) = (200usize, 500usize, None);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("{a} needs a value");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--containers" => n = value().parse().unwrap_or(200),
            "--iterations" => iterations = value().parse().unwrap_or(500).max(1),
            "--pod-file" => file = Some(value()),
            _ => {
                eprintln!("usage: pod-json-bench [--containers N] [--pod-file F] [--iterations K]");
                std::process::exit(2)
            }
        }
    }
    let text = match file {
        Some(f) => std::fs::read_to_string(&f).unwrap_or_else(|e| {
            eprintln!("{f}: {e}");
            std::process::exit(1)
        }),
        None => pod(n).to_string(),
    };
    let new_ec = ec(100_000);
    println!("pod: {} bytes of JSON, {iterations} iterations", text.len());
    // The answer is decoded for the last ephemeral container, as a create's is for its new one.
    let last = serde_json::from_str::<Pod>(&text)
        .ok()
        .and_then(|p| p.spec?.ephemeral_containers?.pop())
        .map(|ec| ec.name)
        .unwrap_or_default();

    // The two ways take turns within each iteration, so that the machine's drift over the run
    // falls on both alike.
    let (mut read, mut plan, mut body, mut answer) = (vec![], vec![], vec![], vec![]);
    let (mut split, mut typed, mut written, mut only) = (vec![], vec![], vec![], vec![]);
    for _ in 0..iterations {
        let mut tree = Value::Null;
        timed(&mut read, || {
            tree = serde_json::from_str(&text).expect("JSON");
            if let Some(m) = tree["metadata"].as_object_mut() {
                m.remove("managedFields");
            }
        });
        timed(&mut plan, || {
            let p = <Pod as serde::Deserialize>::deserialize(&tree).expect("pod");
            std::hint::black_box(p);
        });
        timed(&mut body, || {
            let obj = tree.as_object_mut().expect("object");
            obj.remove("status");
            obj["spec"]["ephemeralContainers"]
                .as_array_mut()
                .expect("list")
                .push(new_ec.clone());
            std::hint::black_box(serde_json::to_vec(&tree).expect("encodes"));
        });
        timed(&mut answer, || {
            std::hint::black_box(serde_json::from_str::<Pod>(&text).expect("pod"));
        });

        let mut raw = None;
        let copy = text.clone();
        timed(&mut split, || {
            raw = Some(PodJson::parse(copy).expect("JSON"))
        });
        let raw = raw.expect("parsed");
        timed(&mut typed, || {
            std::hint::black_box(raw.typed().expect("pod"));
        });
        timed(&mut written, || {
            std::hint::black_box(raw.put_body(&new_ec).expect("body"));
        });
        let copy = text.clone();
        timed(&mut only, || {
            let parsed = PodJson::parse(copy).expect("JSON");
            std::hint::black_box(parsed.typed_with_only(&last).expect("pod"));
        });
    }
    println!("tree (the create path up to 0978f20):");
    report("  read parsed (Value, managedFields dropped)", &mut read);
    report("  typed pod decoded from the tree", &mut plan);
    report("  body: container pushed, tree encoded", &mut body);
    report("  answer decoded (typed, whole)", &mut answer);
    println!("slices (PodJson):");
    report("  read split", &mut split);
    report("  typed pod decoded (no managedFields)", &mut typed);
    report("  body written from the slices", &mut written);
    report("  answer split, decoded with one container", &mut only);
}
