//! Decoding benchmark against the fake kube-apiserver, through the real `poddebug-apiserver`:
//! every hostile body of `poddebug_tests::bodies` (3 MiB each) sent to every create path, with
//! the time to the answer and how much the server's peak resident memory (`VmHWM`) grew. The
//! `body_bounds` test asserts the answers and a bound on the memory; this only measures, so
//! it can be run against any build (an older one too).
//!
//! The server runs with `MALLOC_ARENA_MAX=1` (as in the test), so that the figures do not
//! depend on which worker thread, with its own malloc arena, decoded which body.
//!
//! Usage (loopback only, ends by itself):
//! `PODDEBUG_APISERVER_BIN=target/release/poddebug-apiserver target/release/body-bench`

use std::time::Instant;

use http::Method;
use poddebug_tests::bodies::{create_paths, hostile_bodies, padded_body, peak_rss_kib};
use poddebug_tests::{FakeKube, PodDebugServer};
use serde_json::{Value, json};

#[tokio::main]
async fn main() {
    let fake = FakeKube::start().await;
    let pki = fake.pki().clone();
    fake.add_namespace("shop", &[]);
    fake.add_namespace("poddebug-nodes", &[]);
    fake.add_node("node-1", &[]);
    fake.add_pod_json(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }));
    fake.allow_all();
    let server = PodDebugServer::start_command(
        &[
            "env".to_owned(),
            "MALLOC_ARENA_MAX=1".to_owned(),
            PodDebugServer::binary().display().to_string(),
        ],
        &fake,
        &pki,
        &[],
    )
    .await;
    let c = server.front_proxy_client("alice", &["dev"]);
    let paths = create_paths("shop", "web", "node-1");
    let peak = || peak_rss_kib(server.pid()).unwrap_or(0);

    for _ in 0..3 {
        for p in &paths {
            let _ = c
                .request(
                    Method::POST,
                    &p.url,
                    &[("content-type", "application/json")],
                    padded_body(),
                )
                .await;
        }
    }
    let baseline = peak();
    println!("server peak RSS after 9 bodies of 3 MiB refused at once: {baseline} KiB");
    println!(
        "{:<45} {:<19} {:>5} {:>9} {:>14}",
        "body", "path", "code", "time", "peak growth"
    );
    for body in hostile_bodies() {
        for p in &paths {
            if body.debug_only && p.kind != "PodDebugContainer" {
                continue;
            }
            let before = peak();
            let started = Instant::now();
            let answer = c
                .request(
                    Method::POST,
                    &p.url,
                    &[("content-type", "application/json")],
                    body.body.clone(),
                )
                .await;
            let took = started.elapsed();
            let after = peak();
            let (code, len) = match &answer {
                Ok((code, _, bytes)) => {
                    let st: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                    (
                        code.as_u16().to_string(),
                        st["message"].as_str().map_or(0, str::len),
                    )
                }
                Err(e) => (format!("{e:?}"), 0),
            };
            println!(
                "{:<45} {:<19} {:>5} {:>7} ms {:>9} KiB  (message {len} bytes)",
                body.name,
                p.kind,
                code,
                took.as_millis(),
                after.saturating_sub(before)
            );
        }
    }
    println!(
        "server peak RSS at the end: {} KiB (+{} KiB)",
        peak(),
        peak().saturating_sub(baseline)
    );
}
