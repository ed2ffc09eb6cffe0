//! Hostile create bodies against the real binary, measured in the server process: 3 MiB of
//! repeated keys, of nesting with repeats at every level, of distinct unknown keys, of long
//! keys, of values for the types to hold, sent to every create path (debug containers, copies,
//! node debug containers). Each is answered with a 400 `Status` worded as kube-apiserver words
//! strict decoding errors, naming at most 100 problems, and the server's peak resident memory
//! (`VmHWM`) grows by a few MiB over all of them (one such body grew it by 60 to 570 MiB when
//! every key had its path rendered and every repeat its own message). `DeleteOptions` bodies
//! of the same size on the three delete paths do not make it grow either. The server runs as
//! the Deployment runs it (its `MALLOC_ARENA_MAX`, read from `manifests/deployment.yaml`), and
//! a last round sends every body with four attackers at once: the peak grows with the bodies in
//! flight, each bounded, and no more.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use http::{Method, StatusCode};
use poddebug_tests::bodies::{
    CreatePath, HostileBody, MAX_BODY, Want, create_paths, delete_paths, hostile_bodies,
    hostile_delete_bodies, padded_body, peak_rss_kib,
};
use poddebug_tests::{FakeKube, PodDebugServer, TestClient};
use serde_json::{Value, json};

const NS: &str = "shop";
const POD: &str = "web";
const NODE: &str = "node-1";
/// How much the server's peak RSS may grow over all the hostile bodies, after bodies of the
/// same size were read and refused. The decoder's own share is up to ~5 MiB (10,000 values
/// held, e.g. 10,000 `EnvVar`s of 360 bytes and the list growing), on top of which the 3 MiB
/// body is held twice while it is read (hyper's frames, then the collected bytes) wherever
/// the allocator does not reuse the warm-up's memory; 16 MiB leaves that room and some for a
/// loaded 2-core machine, while one such body cost 60 to 570 MiB before.
const MAX_GROWTH_KIB: u64 = 16 * 1024;
/// Hostile bodies in flight at once in the concurrent round: the peak may grow by
/// [`MAX_GROWTH_KIB`] for each.
const ATTACKERS: usize = 4;

fn peak(server: &PodDebugServer) -> u64 {
    peak_rss_kib(server.pid()).expect("the server's VmHWM")
}

async fn post(c: &TestClient, url: &str, body: String) -> (StatusCode, Value) {
    let (code, _, bytes) = c
        .request(
            Method::POST,
            url,
            &[("content-type", "application/json")],
            body,
        )
        .await
        .expect("the server answers");
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Checks the answer to `body` on `path`.
#[track_caller]
fn check(path: &CreatePath, body: &HostileBody, code: StatusCode, st: &Value) {
    let at = format!("{} on {}", body.name, path.kind);
    assert_eq!(code, StatusCode::BAD_REQUEST, "{at}: {st}");
    assert_eq!(st["kind"], "Status", "{at}");
    assert_eq!(st["reason"], "BadRequest", "{at}");
    assert_eq!(st["code"], 400, "{at}");
    let message = st["message"].as_str().unwrap_or_default();
    assert!(message.len() < 128 * 1024, "{at}: {} bytes", message.len());
    let kind = path.kind;
    let head = format!("{kind} in version \"v1alpha1\" cannot be handled as a {kind}: ");
    let rest = message
        .strip_prefix(&head)
        .unwrap_or_else(|| panic!("{at}: {message}"));
    if let Want::TooManyValues = body.want {
        assert_eq!(
            rest,
            "the body holds more than 10000 JSON values, the most this server reads from one request",
            "{at}"
        );
        return;
    }
    let causes: Vec<&str> = rest
        .strip_prefix("strict decoding error: ")
        .unwrap_or_else(|| panic!("{at}: {message}"))
        .split(", ")
        .collect();
    match &body.want {
        Want::Causes(want) => assert_eq!(causes, *want, "{at}"),
        Want::Count(n, first) => {
            assert_eq!(causes.len(), *n, "{at}: {message}");
            assert_eq!(causes[0], first, "{at}");
        }
        Want::TooManyValues => {}
    }
}

/// The value of environment variable `name` of the server's container in
/// `manifests/deployment.yaml` (the test runs the server as the Deployment runs it).
fn deployment_env(name: &str) -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("manifests/deployment.yaml");
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("- name: {name}") {
            let value = lines.next().unwrap_or_default().trim();
            if let Some(v) = value.strip_prefix("value:") {
                return v.trim().trim_matches('"').to_owned();
            }
        }
    }
    panic!("{name} is not set in {}", path.display())
}

#[tokio::test]
async fn hostile_bodies_are_bounded_on_every_create_and_delete_path() {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.add_namespace(NS, &[]);
    fake.add_namespace("poddebug-nodes", &[]);
    fake.add_node(NODE, &[]);
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }));
    fake.allow_all();
    // As the Deployment runs it: its malloc arenas (glibc otherwise gives each thread that
    // allocates its own, and which worker decodes which body is chance, so the peak would grow
    // with the number of cores instead of with the bodies in flight).
    let server = PodDebugServer::start_command(
        &[
            "env".to_owned(),
            format!("MALLOC_ARENA_MAX={}", deployment_env("MALLOC_ARENA_MAX")),
            PodDebugServer::binary().display().to_string(),
        ],
        &fake,
        &pki,
        &[],
    )
    .await;
    let c = server.front_proxy_client("alice", &["dev"]);
    let paths = create_paths(NS, POD, NODE);

    // A 3 MiB body refused after one look at it, a few times on each path: the memory that
    // reading and answering such a body takes is in the baseline, so what grows after is the
    // decoding.
    for _ in 0..3 {
        for p in &paths {
            let (code, st) = post(&c, &p.url, padded_body()).await;
            assert_eq!(code, StatusCode::BAD_REQUEST, "{st}");
        }
    }
    let baseline = peak(&server);

    let mut table = Vec::new();
    for body in hostile_bodies() {
        assert!(body.body.len() <= MAX_BODY, "{}", body.name);
        for p in &paths {
            if body.debug_only && p.kind != "PodDebugContainer" {
                continue;
            }
            let (code, st) = post(&c, &p.url, body.body.clone()).await;
            let growth = peak(&server).saturating_sub(baseline);
            assert!(
                growth < MAX_GROWTH_KIB,
                "{} on {}: the server's peak RSS grew by {growth} KiB",
                body.name,
                p.kind
            );
            check(p, &body, code, &st);
            table.push(format!(
                "{:<45} {:<19} peak +{growth} KiB",
                body.name, p.kind
            ));
        }
    }
    // DeleteOptions bodies are read as they stream by: the delete goes on (nothing to
    // delete here), the memory does not grow.
    for (name, body) in hostile_delete_bodies() {
        assert!(body.len() <= MAX_BODY, "{name}");
        for url in delete_paths(NS, POD, NODE) {
            let (code, _, bytes) = c
                .request(
                    Method::DELETE,
                    &url,
                    &[("content-type", "application/json")],
                    body.clone(),
                )
                .await
                .expect("the server answers");
            let growth = peak(&server).saturating_sub(baseline);
            assert!(
                growth < MAX_GROWTH_KIB,
                "{name} on {url}: the server's peak RSS grew by {growth} KiB"
            );
            let st: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            assert_eq!(code, StatusCode::NOT_FOUND, "{name} on {url}: {st}");
            assert_eq!(st["reason"], "NotFound", "{name} on {url}");
            table.push(format!("{name:<45} DELETE {url} peak +{growth} KiB"));
        }
    }
    // Attackers at once: every hostile body on every create path, ATTACKERS in flight at a time
    // (the peak grows with the bodies in flight, each bounded as above, and no more).
    let before_concurrent = peak(&server);
    let jobs: Vec<(String, String)> = hostile_bodies()
        .into_iter()
        .flat_map(|b| {
            paths
                .iter()
                .filter(|p| !b.debug_only || p.kind == "PodDebugContainer")
                .map(|p| (p.url.clone(), b.body.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    for batch in jobs.chunks(ATTACKERS) {
        let answers =
            futures::future::join_all(batch.iter().map(|(url, body)| post(&c, url, body.clone())))
                .await;
        for (code, st) in answers {
            assert_eq!(code, StatusCode::BAD_REQUEST, "{st}");
        }
    }
    let concurrent_growth = peak(&server).saturating_sub(baseline);
    assert!(
        concurrent_growth < MAX_GROWTH_KIB * ATTACKERS as u64,
        "{ATTACKERS} attackers at once grew the server's peak RSS by {concurrent_growth} KiB"
    );
    table.push(format!(
        "{ATTACKERS} attackers at once, every body and path: peak +{concurrent_growth} KiB \
         (+{} KiB over the bodies one at a time)",
        peak(&server).saturating_sub(before_concurrent)
    ));
    eprintln!(
        "server peak RSS {baseline} KiB after warming up, then\n{}",
        table.join("\n")
    );

    // Nothing reached the cluster, and the server still serves.
    assert!(
        !fake
            .requests()
            .iter()
            // (The server makes its record key's Secret when it starts.)
            .any(|r| r.method != "GET"
                && r.path.starts_with("/api/v1/")
                && !r.path.split('?').next().unwrap_or("").ends_with("/secrets")),
        "a hostile body reached the cluster: {:?}",
        fake.requests()
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    let (code, _, _) = c
        .request(
            Method::GET,
            &format!("/apis/poddebug.dev/v1alpha1/namespaces/{NS}/poddebugcontainers"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("list");
    assert_eq!(code, StatusCode::OK);
}
