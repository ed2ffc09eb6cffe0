//! Time limits end to end: `ttlSeconds` against the server's maximum, the deadline shown, the
//! expiry loop stopping an expired debug container (Event, stop record, audit record, metric),
//! and leader election between two servers on a Lease of the fake kube-apiserver.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use common::{NS, POD, T, debug_path, ec_of, env, metric, metrics};
use http::StatusCode;
use poddebug_tests::{PodDebugServer, TestClient};
use serde_json::{Value, json};

/// Lease namespace and name the servers of these tests use.
const LEASE_NS: &str = "poddebug-system";
const LEASE: &str = "poddebug-apiserver";

/// Quick rounds and a quick election, so the tests wait seconds, not minutes.
const FAST: &[&str] = &[
    "--debug-ttl-check-interval=1s",
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=1s",
    "--leader-elect-resource-namespace=poddebug-system",
];

/// A shell sharing the target's PID namespace (stoppable), with a time limit.
fn shell_with_ttl(ttl: Option<i64>) -> Value {
    let mut body = json!({"container": {"image": "busybox:1.36", "command": ["sh"],
        "stdin": true, "tty": true}, "targetContainerName": "app"});
    if let Some(t) = ttl {
        body["ttlSeconds"] = json!(t);
    }
    body
}

/// Wait (bounded, polling) until `/metrics` of `client` shows `name` at `value`.
async fn wait_metric(client: &TestClient, name: &str, value: f64) -> bool {
    for _ in 0..100 {
        if metric(&metrics(client).await, name) == Some(value) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// Wait (bounded, polling) until `/metrics` of `client` shows `name` at `value` or above.
async fn wait_metric_at_least(client: &TestClient, name: &str, value: f64) -> bool {
    for _ in 0..100 {
        if metric(&metrics(client).await, name).is_some_and(|v| v >= value) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

fn ts(v: &Value) -> jiff::Timestamp {
    v.as_str().expect("a timestamp").parse().expect("RFC 3339")
}

#[tokio::test]
async fn a_short_ttl_expires_and_the_container_is_stopped_like_delete() {
    let e = env(FAST).await;
    let before = jiff::Timestamp::now();
    let obj = e.create_running("dbg", &shell_with_ttl(Some(1))).await;
    let expires = ts(&obj["status"]["expiresAt"]);
    assert!(
        expires >= before + jiff::SignedDuration::from_secs(1),
        "{obj}"
    );
    // The deadline is in the container's own spec, not in a pod annotation.
    let ec = ec_of(&e.fake, POD, "dbg");
    assert!(
        ec["env"]
            .as_array()
            .expect("env")
            .iter()
            .any(|v| v["name"] == "PODDEBUG_EXPIRES_AT"),
        "{ec}"
    );
    assert!(
        obj["container"]["env"].is_null(),
        "reserved variables are not shown: {obj}"
    );

    let events = e.wait_events("DebugContainerExpired", 1).await;
    let ev = &events[0];
    assert_eq!(ev["involvedObject"]["name"], POD);
    assert_eq!(
        ev["involvedObject"]["fieldPath"],
        "spec.ephemeralContainers{dbg}"
    );
    let message = ev["message"].as_str().expect("message");
    assert!(
        message.starts_with("Time limit of debug container \"dbg\" passed at "),
        "{message}"
    );
    e.wait_state(POD, "dbg", "terminated").await;
    assert!(
        e.events("DebugContainerStopped").is_empty(),
        "an expiry is its own Event"
    );

    // The same stop as DELETE: its record names the server's expiry as the requester.
    let (code, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["phase"], "Terminated", "{got}");
    assert_eq!(
        got["status"]["stopRequested"]["requestedBy"], "system:poddebug:expiry",
        "{got}"
    );
    assert!(
        e.server.wait_for_log("\"action\":\"expire\"", T).await,
        "no audit record:\n{}",
        e.logs()
    );
    let audit = e
        .server
        .logs()
        .into_iter()
        .find(|l| l.contains("\"action\":\"expire\""))
        .expect("the line");
    let audit: Value = serde_json::from_str(&audit).expect("a JSON line");
    assert_eq!(audit["target"], "poddebug::audit");
    assert_eq!(audit["pod"], POD);
    assert_eq!(audit["container"], "dbg");
    assert_eq!(audit["image"], "busybox:1.36");
    assert!(
        wait_metric(&e.alice, "poddebug_debug_containers_expired_total", 1.0).await,
        "{}",
        metrics(&e.alice).await
    );
    // The create was audited too, with the caller's groups and the profile.
    let created = e
        .server
        .logs()
        .into_iter()
        .find(|l| l.contains("\"action\":\"create\""))
        .expect("a create record");
    let created: Value = serde_json::from_str(&created).expect("JSON");
    assert_eq!(created["user"], "alice");
    assert_eq!(created["profile"], "general");
    assert!(
        created["groups"].as_str().unwrap_or("").contains("devs"),
        "{created}"
    );
}

#[tokio::test]
async fn ttl_seconds_above_the_maximum_is_invalid_and_the_default_is_capped() {
    let e = env(&["--max-debug-ttl=1h", "--default-debug-ttl=8h"]).await;
    let (code, status) = e.create("long", &shell_with_ttl(Some(7200))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "PodDebugContainer");
    assert_eq!(status["details"]["causes"][0]["field"], "ttlSeconds");
    assert_eq!(
        status["message"],
        "PodDebugContainer.poddebug.dev \"long\" is invalid: ttlSeconds: Invalid value: 7200: must be less than or equal to 3600 (the server's maximum)"
    );
    let (code, status) = e.create("neg", &shell_with_ttl(Some(-5))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "ttlSeconds");
    assert!(ec_exists(&e, "long").is_none() && ec_exists(&e, "neg").is_none());

    // No ttlSeconds: the default (8h) cut to the maximum.
    let before = jiff::Timestamp::now();
    let (code, obj) = e.create("dflt", &shell_with_ttl(None)).await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    let left = ts(&obj["status"]["expiresAt"]).duration_since(before);
    assert!(
        left >= jiff::SignedDuration::from_secs(3600)
            && left < jiff::SignedDuration::from_secs(3700),
        "{obj}"
    );
}

fn ec_exists(e: &common::Env, name: &str) -> Option<Value> {
    e.fake.pod_json(NS, POD).and_then(|p| {
        p["spec"]["ephemeralContainers"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name).cloned())
    })
}

#[tokio::test]
async fn of_two_servers_one_leads_and_losing_the_lease_stops_its_loop() {
    let e = env(FAST).await;
    let pki = e.fake.pki().clone();
    let second = PodDebugServer::start(&e.fake, &pki, FAST).await;
    let second_client = second.front_proxy_client("alice", common::ALICE_GROUPS);

    // Exactly one of them takes the Lease.
    let ok = e
        .fake
        .wait_until(T, |f| {
            f.lease(LEASE_NS, LEASE).is_some_and(|l| {
                l["spec"]["holderIdentity"]
                    .as_str()
                    .is_some_and(|h| !h.is_empty())
            })
        })
        .await;
    assert!(ok, "no leader:\n{}", e.logs());
    let (first_leads, second_leads) = loop_until_one_leads(&e.alice, &second_client).await;
    assert!(first_leads != second_leads, "exactly one leader");
    let (leader, leader_server, follower) = if first_leads {
        (&e.alice, &e.server, &second_client)
    } else {
        (&second_client, &second, &e.alice)
    };
    assert_eq!(
        metric(&metrics(follower).await, "poddebug_leader"),
        Some(0.0)
    );

    // Another holder takes the Lease over: the leader stops its loop.
    assert!(
        e.fake
            .set_lease_holder(LEASE_NS, LEASE, "another-replica_1")
    );
    assert!(
        leader_server.wait_for_log("expiry loop stopped", T).await,
        "{}",
        leader_server.logs_text()
    );
    assert_eq!(metric(&metrics(leader).await, "poddebug_leader"), Some(0.0));
    // The takeover holds (its lease is long): neither server leads.
    assert_eq!(
        metric(&metrics(follower).await, "poddebug_leader"),
        Some(0.0)
    );
    let lease = e.fake.lease(LEASE_NS, LEASE).expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "another-replica_1");
}

/// Poll both servers' `poddebug_leader` until one shows 1; which ones do.
async fn loop_until_one_leads(a: &TestClient, b: &TestClient) -> (bool, bool) {
    for _ in 0..100 {
        let (la, lb) = (
            metric(&metrics(a).await, "poddebug_leader") == Some(1.0),
            metric(&metrics(b).await, "poddebug_leader") == Some(1.0),
        );
        if la || lb {
            return (la, lb);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    (false, false)
}

#[tokio::test]
async fn a_container_that_expired_while_no_server_ran_is_stopped_by_the_next_one() {
    // The first server looks only at its start, so it never sees the deadline pass.
    let mut slow: Vec<&str> = FAST.to_vec();
    slow[0] = "--debug-ttl-check-interval=1h";
    let mut e = env(&slow).await;
    let obj = e.create_running("dbg", &shell_with_ttl(Some(1))).await;
    let expires = ts(&obj["status"]["expiresAt"]);
    let ok = e
        .fake
        .wait_until(T, |f| {
            f.lease(LEASE_NS, LEASE).is_some_and(|l| {
                l["spec"]["holderIdentity"]
                    .as_str()
                    .is_some_and(|h| !h.is_empty())
            })
        })
        .await;
    assert!(ok, "the first server never led:\n{}", e.logs());
    e.server.terminate().await;
    // It let the Lease go on its way out.
    let lease = e.fake.lease(LEASE_NS, LEASE).expect("lease");
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{lease}"
    );
    // No server runs while the deadline passes.
    let passed = e
        .fake
        .wait_until(T, |_| jiff::Timestamp::now() > expires)
        .await;
    assert!(passed);
    assert!(e.events("DebugContainerExpired").is_empty());
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), Some("running"));

    let pki = e.fake.pki().clone();
    let next = PodDebugServer::start(&e.fake, &pki, FAST).await;
    let events = e.wait_events("DebugContainerExpired", 1).await;
    assert_eq!(events.len(), 1, "{events:?}");
    e.wait_state(POD, "dbg", "terminated").await;
    drop(next);
}

#[tokio::test]
async fn an_expired_container_without_a_shell_is_tried_once_and_then_left_alone() {
    let e = env(FAST).await;
    e.fake
        .set_exec_behaviour(poddebug_tests::ExecBehaviour::NoShell);
    e.create_running("dbg", &shell_with_ttl(Some(1))).await;
    assert!(
        e.server
            .wait_for_log("an expired debug container cannot be stopped", T)
            .await,
        "{}",
        e.logs()
    );
    let tried = e.fake.execs().len();
    assert_eq!(tried, 1, "{:?}", e.fake.execs());
    // Later rounds look again without another exec.
    let text = metrics(&e.alice).await;
    let seen = metric(&text, "poddebug_expiry_rounds_total")
        .unwrap_or_else(|| panic!("rounds are counted: {text}"));
    assert_eq!(
        metric(&text, "poddebug_debug_containers_not_stoppable_total"),
        Some(1.0)
    );
    assert!(wait_metric_at_least(&e.alice, "poddebug_expiry_rounds_total", seen + 2.0).await);
    assert_eq!(e.fake.execs().len(), tried, "no second try");
    // The rounds read the server's pod cache: no LIST of pods of their own.
    let lists: Vec<String> = e
        .fake
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/api/v1/pods?") && r.path.contains("fieldSelector"))
        .map(|r| r.path.clone())
        .collect();
    assert!(lists.is_empty(), "{lists:?}");
    // A Warning Event says so on the pod, once.
    let warnings = e.events("DebugContainerNotStoppable");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["type"], "Warning");
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("has no `sh`"),
        "{warnings:?}"
    );
    assert_eq!(
        metric(
            &metrics(&e.alice).await,
            "poddebug_debug_containers_not_stoppable_total"
        ),
        Some(1.0)
    );
    assert!(
        e.events("DebugContainerExpired").is_empty(),
        "nothing was signalled"
    );
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), Some("running"));
    let refusals = e
        .server
        .logs()
        .iter()
        .filter(|l| l.contains("\"action\":\"expire\""))
        .count();
    assert_eq!(refusals, 1, "one audit record");
}
