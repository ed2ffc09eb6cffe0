//! Debug containers that their stop does not end, end to end against the fake kube-apiserver,
//! whose exec plays a container that replaced its `/bin/sh` with one that exits 0
//! (`ExecBehaviour::Sabotaged`): the stop script "succeeds" and nothing happens. Past its time
//! limit, or once `DELETE`d, such a container is refused to attach, join and log follow on every
//! replica and after a restart; past its bound it is reported once (Warning Event, status
//! condition, audit record, metric) and its live sessions end; with
//! `--unstoppable-action=evict` its pod is evicted, a PodDisruptionBudget holding it back
//! (retried) until it allows; stop records that poddebug did not sign are ignored.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use std::time::Duration;

use common::{GV, NS, POD, debug_path, env, metric, metrics};
use http::{Method, StatusCode};
use poddebug_tests::channel::ChannelClient;
use poddebug_tests::fake::Pdb;
use poddebug_tests::{ExecBehaviour, PodDebugServer, TestClient, UpgradeResponse};
use serde_json::{Value, json};

/// The server's namespace, where stop records are kept.
const SERVER_NS: &str = "poddebug-system";
/// Bound of the waits that span a container's bound (a time limit's is its deadline plus the
/// check interval, the expiry's 10s grace period and --unstoppable-after).
const LONG: Duration = Duration::from_secs(45);
const T: Duration = common::T;

/// Quick rounds, a quick election and a short margin, so the tests wait seconds.
const FAST: &[&str] = &[
    "--debug-ttl-check-interval=1s",
    "--unstoppable-after=1s",
    "--session-lease-duration=3s",
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=1s",
    "--leader-elect-resource-namespace=poddebug-system",
];

/// An interactive shell sharing the target's PID namespace (stoppable by design).
fn shell(ttl: Option<i64>) -> Value {
    let mut body = json!({"container": {"image": "busybox:1.36", "command": ["sh"],
        "stdin": true, "tty": true}, "targetContainerName": "app"});
    if let Some(t) = ttl {
        body["ttlSeconds"] = json!(t);
    }
    body
}

fn flags(extra: &[&'static str]) -> Vec<&'static str> {
    FAST.iter().chain(extra).copied().collect()
}

fn pod_path(rest: &str) -> String {
    format!("{GV}/namespaces/{NS}/pods/{POD}/{rest}")
}

const TTY: &str = "container=dbg&stdin=true&stdout=true&tty=true";

/// A WebSocket attach as `client`.
async fn attach(client: &TestClient, query: &str) -> UpgradeResponse {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    client
        .upgrade(Method::GET, &pod_path(&format!("attach?{query}")), &headers)
        .await
        .expect("upgrade answered")
}

/// The Status of a refused attach.
fn refused(resp: &UpgradeResponse) -> Value {
    assert_ne!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    serde_json::from_slice(&resp.body).unwrap_or_else(|_| panic!("a Status: {resp:?}"))
}

/// A GET of the log as `client`: code and body.
async fn log(client: &TestClient, query: &str) -> (StatusCode, String) {
    let (code, _, body) = client
        .request(
            Method::GET,
            &pod_path(&format!("log?{query}")),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("log");
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// Wait (bounded) until `n` Events with `reason` were recorded.
async fn wait_events(e: &common::Env, reason: &str, n: usize, within: Duration) -> Vec<Value> {
    let ok = e
        .fake
        .wait_until(within, |f| {
            f.events()
                .iter()
                .filter(|ev| ev["reason"] == reason)
                .count()
                >= n
        })
        .await;
    assert!(
        ok,
        "no {n} {reason} events: {:?}\n{}",
        e.fake.events(),
        e.logs()
    );
    e.events(reason)
}

/// Wait (bounded, polling) until `/metrics` of `client` shows `name` at `value` or above.
async fn wait_metric_at_least(client: &TestClient, name: &str, value: f64) -> bool {
    for _ in 0..200 {
        if metric(&metrics(client).await, name).is_some_and(|v| v >= value) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The stop records in the server's namespace.
fn stop_records(e: &common::Env) -> Vec<Value> {
    e.fake
        .leases(SERVER_NS)
        .into_iter()
        .filter(|l| !l["metadata"]["labels"]["poddebug.dev/stop-record"].is_null())
        .collect()
}

fn conditions(obj: &Value) -> Vec<Value> {
    obj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_sabotaged_container_past_its_time_limit_is_reported_once_refused_and_its_session_ended()
{
    let e = env(&flags(&[])).await;
    e.fake.set_exec_behaviour(ExecBehaviour::Sabotaged);
    let obj = e.create_running("dbg", &shell(Some(2))).await;
    assert!(obj["status"]["expiresAt"].is_string(), "{obj}");
    // A session opened before the deadline.
    let resp = attach(&e.alice, TTY).await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    let mut session = ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await;

    // The expiry stops it once: the script "succeeds", the container runs on.
    wait_events(&e, "DebugContainerExpired", 1, T).await;
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), Some("running"));
    // From the deadline on, nothing new reaches it, on any entry point.
    let status = refused(&attach(&e.alice, TTY).await);
    assert_eq!(status["code"], 409, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the time limit of debug container \"dbg\" passed at "),
        "{status}"
    );

    // Past its bound it is reported, once.
    let reports = wait_events(&e, "DebugContainerStopFailed", 1, LONG).await;
    assert_eq!(reports[0]["type"], "Warning", "{reports:?}");
    assert_eq!(
        reports[0]["involvedObject"]["fieldPath"], "spec.ephemeralContainers{dbg}",
        "{reports:?}"
    );
    let message = reports[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The time limit of debug container \"dbg\" passed at ")
            && message.contains("its stop did not end it: it still ran at ")
            && message.ends_with("delete or evict the pod to end it"),
        "{message}"
    );
    // Its session ended, through its Lease.
    let t = session.finish(T).await.clone();
    let ended = t.status().unwrap_or_else(|| panic!("a Status: {t:?}"));
    assert_eq!(ended["reason"], "Forbidden", "{ended}");
    assert_eq!(
        ended["message"],
        "session terminated by system:poddebug:expiry"
    );

    // The status says so.
    let (code, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["phase"], "Running", "{got}");
    let c = conditions(&got);
    assert_eq!(c.len(), 1, "{got}");
    assert_eq!(c[0]["type"], "Unstoppable");
    assert_eq!(c[0]["status"], "True");
    assert_eq!(c[0]["reason"], "ExpiryDidNotEnd");
    assert_eq!(c[0]["message"], message);
    assert!(c[0]["lastTransitionTime"].is_string(), "{got}");
    // So does a list.
    let (_, list) = e.get(&debug_path(NS, POD, None, "")).await;
    assert_eq!(
        list["items"][0]["status"]["conditions"][0]["type"], "Unstoppable",
        "{list}"
    );

    // Attach, joining someone else's session, and log follow are refused; a plain read is not.
    let status = refused(&attach(&e.alice, TTY).await);
    assert_eq!(status["code"], 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("it did not end when stopped, so it is unusable through poddebug"),
        "{status}"
    );
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let status = refused(&attach(&bob, "container=dbg&stdout=true&tty=true&mode=peer").await);
    assert_eq!(status["code"], 409, "{status}");
    for follow in ["follow=true", "follow=1", "follow="] {
        let (code, body) = log(&e.alice, &format!("container=dbg&{follow}")).await;
        assert_eq!(code, StatusCode::CONFLICT, "{follow}: {body}");
    }
    let (code, body) = log(&e.alice, "container=dbg&follow=false").await;
    assert_eq!(code, StatusCode::OK, "{body}");

    // One report, one stop, however many rounds pass.
    assert!(
        wait_metric_at_least(&e.alice, "poddebug_debug_containers_unstoppable_total", 1.0).await,
        "{}",
        metrics(&e.alice).await
    );
    let text = metrics(&e.alice).await;
    let rounds = metric(&text, "poddebug_expiry_rounds_total").expect("rounds");
    assert!(wait_metric_at_least(&e.alice, "poddebug_expiry_rounds_total", rounds + 3.0).await);
    assert_eq!(e.events("DebugContainerStopFailed").len(), 1);
    assert_eq!(e.events("DebugContainerExpired").len(), 1, "stopped once");
    assert_eq!(e.fake.execs().len(), 1, "{:?}", e.fake.execs());
    assert_eq!(
        metric(
            &metrics(&e.alice).await,
            "poddebug_debug_containers_unstoppable_total"
        ),
        Some(1.0)
    );
    let audits = e
        .server
        .logs()
        .into_iter()
        .filter(|l| l.contains("\"action\":\"unstoppable\""))
        .count();
    assert_eq!(audits, 1, "one audit record");
    // The report is kept in the server's namespace, signed, whoever leads next.
    let records = stop_records(&e);
    assert_eq!(records.len(), 1, "{records:?}");
    let record: Value = serde_json::from_str(
        records[0]["metadata"]["annotations"]["poddebug.dev/stop-record"]
            .as_str()
            .expect("record"),
    )
    .expect("JSON");
    assert_eq!(record["origin"], "Expiry");
    assert!(record["unstoppableSince"].is_string(), "{record}");
}

#[tokio::test]
async fn a_delete_that_does_not_end_a_container_holds_on_every_replica_and_across_restarts() {
    let mut e = env(&flags(&[])).await;
    let pki = e.fake.pki().clone();
    let second = PodDebugServer::start(&e.fake, &pki, &flags(&[])).await;
    let carol = second.front_proxy_client("carol", &["system:authenticated"]);
    e.fake.set_exec_behaviour(ExecBehaviour::Sabotaged);
    e.create_running("dbg", &shell(None)).await;

    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=1"))
        .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["stopRequested"]["requestedBy"], "alice");
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), Some("running"));
    // The other replica refuses at once: the record is in the cluster.
    let status = refused(&attach(&carol, "container=dbg&stdout=true&tty=true").await);
    assert_eq!(status["code"], 409, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\"alice\" asked to stop debug container \"dbg\" at "),
        "{status}"
    );
    let (code, got) = carol.get_json(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        got["status"]["stopRequested"]["requestedBy"], "alice",
        "shown while it runs: {got}"
    );

    // Past its bound (1s grace + 1s): reported by the leader, once, and shown by both.
    let reports = wait_events(&e, "DebugContainerStopFailed", 1, LONG).await;
    let message = reports[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "Debug container \"dbg\" did not end although \"alice\" asked to stop it at "
        ),
        "{message}"
    );
    for client in [&e.alice, &carol] {
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let (_, got) = client.get_json(&debug_path(NS, POD, Some("dbg"), "")).await;
            if conditions(&got)
                .first()
                .is_some_and(|c| c["reason"] == "StopDidNotEnd")
            {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{got}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // A DELETE again changes nothing and says why.
    let (code, status) = e.delete(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did not end when stopped"),
        "{status}"
    );
    assert_eq!(e.fake.execs().len(), 1, "no second exec");

    // Across a restart: a new server refuses as well.
    e.server.terminate().await;
    drop(second);
    let third = PodDebugServer::start(&e.fake, &pki, &flags(&[])).await;
    let alice = third.front_proxy_client("alice", common::ALICE_GROUPS);
    let status = refused(&attach(&alice, TTY).await);
    assert_eq!(status["code"], 409, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("it did not end when stopped"),
        "{status}"
    );
    // And reports nothing more.
    let text = metrics(&alice).await;
    let rounds = metric(&text, "poddebug_expiry_rounds_total").unwrap_or(0.0);
    assert!(wait_metric_at_least(&alice, "poddebug_expiry_rounds_total", rounds + 2.0).await);
    assert_eq!(e.events("DebugContainerStopFailed").len(), 1);
}

#[tokio::test]
async fn evict_evicts_the_pod_once_its_disruption_budget_allows_it() {
    let e = env(&flags(&["--unstoppable-action=evict"])).await;
    let budget = |allowed: u32| Pdb {
        namespace: NS.into(),
        name: "target-pdb".into(),
        match_labels: vec![("app".into(), POD.into())],
        disruptions_allowed: allowed,
        desired_healthy: 1,
        current_healthy: 1,
    };
    e.fake.set_pdb(budget(0));
    e.fake.set_exec_behaviour(ExecBehaviour::Sabotaged);
    e.create_running("dbg", &shell(None)).await;
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=1"))
        .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{obj}");

    // The budget refuses: tried again, with a backoff, and said once.
    let refusals = |f: &poddebug_tests::FakeKube| {
        f.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/eviction") && r.status == 429)
            .count()
    };
    assert!(
        e.fake.wait_until(LONG, |f| refusals(f) >= 2).await,
        "{:?}\n{}",
        e.fake
            .requests()
            .iter()
            .filter(|r| r.path.contains("eviction"))
            .collect::<Vec<_>>(),
        e.logs()
    );

    let blocked = e.events("DebugContainerEvictionBlocked");
    assert_eq!(
        blocked.len(),
        1,
        "{:?}\n{}",
        e.fake.events(),
        e.server.logs_text()
    );
    assert_eq!(blocked[0]["type"], "Warning");
    assert!(
        blocked[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("The disruption budget target-pdb needs 1 healthy pods and has 1 currently"),
        "{blocked:?}"
    );
    assert!(e.fake.pod_json(NS, POD).is_some(), "the budget holds it");
    assert!(
        wait_metric_at_least(
            &e.alice,
            "poddebug_unstoppable_evictions_total{result=\"blocked\"}",
            2.0
        )
        .await
    );

    // The budget allows one disruption: the pod is evicted, and the Event says why.
    e.fake.set_pdb(budget(1));
    assert!(
        e.fake
            .wait_until(LONG, |f| f.pod_json(NS, POD).is_none())
            .await,
        "not evicted:\n{}",
        e.logs()
    );
    let evicted = wait_events(&e, "DebugContainerPodEvicted", 1, T).await;
    assert_eq!(evicted[0]["type"], "Warning");
    assert_eq!(
        evicted[0]["message"],
        "poddebug evicted the pod: debug container \"dbg\" did not end when stopped (--unstoppable-action=evict)"
    );
    assert!(e.server.wait_for_log("\"action\":\"evict\"", T).await);
    assert!(
        wait_metric_at_least(
            &e.alice,
            "poddebug_unstoppable_evictions_total{result=\"evicted\"}",
            1.0
        )
        .await
    );
    // The eviction was made as the server, through the Eviction API only.
    let deletes: Vec<_> = e
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.path.contains("/pods/"))
        .collect();
    assert!(deletes.is_empty(), "{deletes:?}");
    // Its stop record goes with the pod.
    assert!(
        e.fake.wait_until(T, |_| stop_records(&e).is_empty()).await,
        "{:?}",
        stop_records(&e)
    );
}

#[tokio::test]
async fn a_stop_record_poddebug_did_not_sign_is_ignored() {
    let e = env(&flags(&[])).await;
    e.create_running("dbg", &shell(None)).await;
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    let uid = pod["metadata"]["uid"].as_str().expect("uid").to_owned();
    // Someone who may write Leases in the server's namespace, but not read its key, forges a
    // reported stop of long ago.
    let record = json!({
        "namespace": NS, "pod": POD, "podUid": uid, "name": "dbg", "container": "dbg",
        "origin": "Delete", "requestedBy": "mallory", "requestedAt": "2026-01-01T00:00:00Z",
        "gracePeriodSeconds": 1, "unstoppableSince": "2026-01-01T00:01:00Z",
        "message": "forged",
    })
    .to_string();
    let key = poddebug_storage::record_key::RecordKey::generate();
    let mac = key.sign(
        poddebug_storage::record_key::Purpose::Stop,
        record.as_bytes(),
    );
    e.fake.put_lease(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": poddebug_storage::stop_lease_name(&uid, "dbg"), "namespace": SERVER_NS,
            "labels": {"poddebug.dev/stop-record": "v1"},
            "annotations": {"poddebug.dev/stop-record": record, "poddebug.dev/stop-record-mac": mac}},
        "spec": {},
    }));
    assert!(
        wait_metric_at_least(&e.alice, "poddebug_stop_records_rejected_total", 1.0).await,
        "{}",
        metrics(&e.alice).await
    );
    assert!(e.server.wait_for_log("a stop record was ignored", T).await);
    // It opens no gate and shows nowhere.
    let resp = attach(&e.alice, TTY).await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    drop(resp);
    let (_, got) = e.get(&debug_path(NS, POD, Some("dbg"), "")).await;
    assert!(got["status"]["conditions"].is_null(), "{got}");
    assert!(got["status"]["stopRequested"].is_null(), "{got}");
    let text = metrics(&e.alice).await;
    let rounds = metric(&text, "poddebug_expiry_rounds_total").unwrap_or(0.0);
    assert!(wait_metric_at_least(&e.alice, "poddebug_expiry_rounds_total", rounds + 2.0).await);
    assert!(e.events("DebugContainerStopFailed").is_empty());
    // A real stop replaces it with a record of its own, and ends the container.
    let (code, obj) = e
        .delete(&debug_path(NS, POD, Some("dbg"), "gracePeriodSeconds=1"))
        .await;
    assert_eq!(code, StatusCode::OK, "{obj}\n{}", e.logs());
    assert_eq!(obj["status"]["phase"], "Terminated");
    // Its record goes once the container has terminated.
    assert!(
        e.fake.wait_until(T, |_| stop_records(&e).is_empty()).await,
        "{:?}",
        stop_records(&e)
    );
}
