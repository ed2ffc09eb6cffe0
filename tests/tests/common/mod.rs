//! Shared setup of the end-to-end tests that run the real `poddebug-apiserver` against the fake
//! kube-apiserver: one fake with the live reference's pod, one server, and a client that talks
//! to the server the way kube-apiserver's aggregator does (front-proxy certificate and
//! `X-Remote-*` headers).

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::{FakeKube, PodDebugServer, TestClient};
use serde_json::{Value, json};

/// Prefix of every path of the API.
pub const GV: &str = "/apis/poddebug.dev/v1alpha1";
/// Namespace and pod of the live reference (`live-ephemeral-statuses.md`).
pub const NS: &str = "ephdemo";
/// The pod: container `app` (busybox) and volume `data` (emptyDir).
pub const POD: &str = "target";
/// Bound of every wait.
pub const T: Duration = Duration::from_secs(10);
/// The end user's groups, as the aggregator forwards them.
pub const ALICE_GROUPS: &[&str] = &["system:authenticated", "devs"];

/// A fake, a server and alice's client.
pub struct Env {
    /// The fake kube-apiserver.
    pub fake: FakeKube,
    /// The real binary.
    pub server: PodDebugServer,
    /// `alice` through the front proxy.
    pub alice: TestClient,
}

/// A fake with the live reference's pod in an unlabelled namespace, and a server started with
/// the standard flags plus `extra`.
pub async fn env(extra: &[&str]) -> Env {
    env_with(extra, |_| {}).await
}

/// [`env`] with `setup` run on the fake before the server starts.
pub async fn env_with(extra: &[&str], setup: impl FnOnce(&FakeKube)) -> Env {
    let fake = FakeKube::start().await;
    // The simulated kubelet starts new containers after this delay: keep the tests quick.
    fake.set_start_delay(Duration::from_millis(10));
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    setup(&fake);
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, extra).await;
    let alice = server.front_proxy_client("alice", ALICE_GROUPS);
    Env {
        fake,
        server,
        alice,
    }
}

/// `.../namespaces/NS/pods/POD/debug[/NAME][?QUERY]`.
pub fn debug_path(ns: &str, pod: &str, name: Option<&str>, query: &str) -> String {
    let mut p = format!("{GV}/namespaces/{ns}/pods/{pod}/debug");
    if let Some(n) = name {
        p.push('/');
        p.push_str(n);
    }
    if !query.is_empty() {
        p.push('?');
        p.push_str(query);
    }
    p
}

impl Env {
    /// The last lines of the server's log, for assertion messages.
    pub fn logs(&self) -> String {
        let logs = self.server.logs();
        let start = logs.len().saturating_sub(40);
        logs[start..].join("\n")
    }

    /// `POST` a create as `client`.
    pub async fn create_as(
        &self,
        client: &TestClient,
        pod: &str,
        name: Option<&str>,
        query: &str,
        body: &Value,
    ) -> (StatusCode, Value) {
        client
            .post_json(&debug_path(NS, pod, name, query), body)
            .await
    }

    /// `POST` a create of `NAME` in the pod as alice.
    pub async fn create(&self, name: &str, body: &Value) -> (StatusCode, Value) {
        self.create_as(&self.alice, POD, Some(name), "", body).await
    }

    /// Create `NAME` (must answer 201) and wait until the fake runs it.
    pub async fn create_running(&self, name: &str, body: &Value) -> Value {
        let (code, obj) = self.create(name, body).await;
        assert_eq!(code, StatusCode::CREATED, "{obj}\n{}", self.logs());
        let ec = obj["status"]["ephemeralContainerName"]
            .as_str()
            .unwrap_or(name)
            .to_owned();
        self.wait_state(POD, &ec, "running").await;
        obj
    }

    /// Wait (bounded) until container `container` of `pod` is in `state`.
    pub async fn wait_state(&self, pod: &str, container: &str, state: &str) {
        let reached = self
            .fake
            .wait_until(T, |f| f.container_state(NS, pod, container) == Some(state))
            .await;
        assert!(
            reached,
            "{pod}/{container} never became {state}: {:?}",
            self.fake.container_state(NS, pod, container)
        );
    }

    /// `GET` as alice.
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.alice.get_json(path).await
    }

    /// `DELETE` as alice.
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.alice.delete(path).await
    }

    /// `POST` raw bytes as JSON; the answer as JSON.
    pub async fn post_raw(&self, path: &str, body: impl Into<Bytes>) -> (StatusCode, Value) {
        let (code, _, bytes) = self
            .alice
            .request(
                Method::POST,
                path,
                &[
                    ("content-type", "application/json"),
                    ("accept", "application/json"),
                ],
                body,
            )
            .await
            .expect("request");
        let v = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (code, v)
    }

    /// Events with this reason recorded by the server.
    pub fn events(&self, reason: &str) -> Vec<Value> {
        self.fake
            .events()
            .into_iter()
            .filter(|e| e["reason"] == reason)
            .collect()
    }

    /// Wait (bounded) until `n` events with `reason` were recorded.
    pub async fn wait_events(&self, reason: &str, n: usize) -> Vec<Value> {
        let ok = self
            .fake
            .wait_until(T, |f| {
                f.events().iter().filter(|e| e["reason"] == reason).count() >= n
            })
            .await;
        assert!(ok, "no {n} {reason} events: {:?}", self.fake.events());
        self.events(reason)
    }
}

/// kube-apiserver's 422 for the pod `POD`: message and causes, with the field paths at
/// `spec.ephemeralContainers[index]` (the live answers were at `[0]`).
pub fn pod_invalid(live_message: &str, causes: &[(&str, &str, &str)], index: usize) -> Value {
    let at = |s: &str| {
        s.replace(
            "ephemeralContainers[0]",
            &format!("ephemeralContainers[{index}]"),
        )
    };
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": at(live_message),
        "reason": "Invalid",
        "details": {
            "name": POD,
            "kind": "Pod",
            "causes": causes.iter().map(|(reason, message, field)| json!({
                "reason": reason, "message": message, "field": at(field),
            })).collect::<Vec<_>>(),
        },
        "code": 422,
    })
}

/// The names of a list's items.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// A stored pod's ephemeral container by name.
pub fn ec_of(fake: &FakeKube, pod: &str, name: &str) -> Value {
    let p = fake.pod_json(NS, pod).expect("pod");
    p["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// kube-apiserver's 422 about the pod (as [`pod_invalid`] builds it) as poddebug answers it:
/// the same causes, kept verbatim, moved onto the fields of debug container `name`
/// (`spec.ephemeralContainers[N].X` → `container.X`, `.name` → `metadata.name`,
/// `.targetContainerName` → `targetContainerName`), as `PodDebugContainer.poddebug.dev "name"`.
pub fn retold(pod_status: &Value, name: &str) -> Value {
    let causes: Vec<Value> = pod_status["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut c| {
            let field = c["field"].as_str().unwrap_or_default().to_owned();
            let moved = match field.split_once("].") {
                Some((head, rest)) if head.starts_with("spec.ephemeralContainers[") => match rest {
                    "name" => "metadata.name".to_owned(),
                    "targetContainerName" => rest.to_owned(),
                    _ => format!("container.{rest}"),
                },
                _ => field,
            };
            c["field"] = json!(moved);
            c
        })
        .collect();
    let texts: Vec<String> = causes
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let aggregate = if texts.len() == 1 {
        texts[0].clone()
    } else {
        format!("[{}]", texts.join(", "))
    };
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("PodDebugContainer.poddebug.dev {name:?} is invalid: {aggregate}"),
        "reason": "Invalid",
        "details": {"name": name, "group": "poddebug.dev", "kind": "PodDebugContainer", "causes": causes},
        "code": 422,
    })
}

/// `/metrics` as `client`.
#[allow(dead_code)] // only the suites that read /metrics call it
pub async fn metrics(client: &TestClient) -> String {
    let (code, _, body) = client
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .expect("metrics");
    assert_eq!(code, StatusCode::OK);
    String::from_utf8_lossy(&body).into_owned()
}

/// The value of an unlabelled metric.
#[allow(dead_code)] // only the suites that read /metrics call it
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
