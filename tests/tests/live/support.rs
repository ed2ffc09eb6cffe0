//! What every live test uses: the switch (`PODDEBUG_LIVE`), kubectl, an HTTPS client to
//! kube-apiserver built from the kubeconfig, a direct client to the poddebug server, bounded
//! polling, and [`Sandbox`], a namespace with one running pod that is deleted on drop.

use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use http::StatusCode;
use poddebug_tests::TestClient;
use poddebug_tests::kubectl::PodSandbox;
use serde_json::{Value, json};

/// The API group/version prefix.
pub const GV: &str = "/apis/poddebug.dev/v1alpha1";
/// The APIService that registers poddebug.
pub const APISERVICE: &str = "v1alpha1.poddebug.dev";
/// The image every node of the test cluster has.
pub const BUSYBOX: &str = "busybox:1.36";
/// An image without a shell (its entrypoint is a static binary).
pub const PAUSE: &str = "registry.k8s.io/pause:3.10";
/// A user with no grants of its own (requests are sent as this user through impersonation).
pub const ALICE: &str = "alice";

/// Whether the live suite runs. With `PODDEBUG_LIVE=1` (what CI sets) it must: a missing
/// kubectl, kubeconfig or registration panics instead of skipping. Without it, the suite skips
/// when `KUBECONFIG` is unset.
pub fn enabled() -> bool {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let required = std::env::var("PODDEBUG_LIVE").is_ok_and(|v| v == "1" || v == "true");
    if !required && std::env::var_os("KUBECONFIG").is_none() {
        eprintln!("KUBECONFIG is not set and PODDEBUG_LIVE is not 1: skipping the live suite");
        return false;
    }
    let check = CHECKED.get_or_init(|| {
        let out = Command::new("kubectl")
            .args([
                "get",
                "apiservice",
                APISERVICE,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ])
            .output()
            .map_err(|e| format!("kubectl cannot run: {e}"))?;
        if !out.status.success() || String::from_utf8_lossy(&out.stdout).trim() != "True" {
            return Err(format!(
                "APIService {APISERVICE} is not Available on the cluster of KUBECONFIG={:?}: {}{}",
                std::env::var_os("KUBECONFIG"),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    });
    if let Err(e) = check {
        panic!("the live suite was asked for but cannot run: {e}");
    }
    true
}

/// Whether the server under test runs with `--impersonate` (`PODDEBUG_LIVE_IMPERSONATE=1`).
pub fn impersonating() -> bool {
    std::env::var("PODDEBUG_LIVE_IMPERSONATE").is_ok_and(|v| v == "1" || v == "true")
}

pub use poddebug_tests::kubectl::{kubectl, kubectl_ok as ok};

/// kubectl that must succeed, its output parsed as JSON.
pub fn ok_json(args: &[&str]) -> Value {
    let out = ok(args, None);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: not JSON ({e}): {out}"))
}

/// Calls `f` every `every` until it returns `Some`, for at most `timeout`; panics naming `what`
/// (and the last observation) otherwise.
pub fn poll<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("{what}: not within {timeout:?}; last seen: {last}")
            }
            Err(_) => std::thread::sleep(every),
        }
    }
}

/// [`poll`] for async checks.
pub async fn poll_async<T, F, Fut>(what: &str, timeout: Duration, every: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("{what}: not within {timeout:?}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

fn b64(s: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .expect("base64 in the kubeconfig");
    String::from_utf8(bytes).expect("PEM is text")
}

/// An HTTPS client to kube-apiserver with the kubeconfig's current credentials (certificate or
/// token), so that tests see exact status codes and bodies.
pub fn cluster() -> TestClient {
    let cfg = ok_json(&["config", "view", "--raw", "--minify", "-o", "json"]);
    let cluster = &cfg["clusters"][0]["cluster"];
    let user = &cfg["users"][0]["user"];
    let server = cluster["server"]
        .as_str()
        .expect("a server in the kubeconfig");
    let mut b = TestClient::builder(server).http1_only();
    if let Some(ca) = cluster["certificate-authority-data"].as_str() {
        b = b.ca_pem(&b64(ca));
    } else if let Some(path) = cluster["certificate-authority"].as_str() {
        b = b.ca_pem(&std::fs::read_to_string(path).expect("the kubeconfig's CA file"));
    }
    if let (Some(c), Some(k)) = (
        user["client-certificate-data"].as_str(),
        user["client-key-data"].as_str(),
    ) {
        b = b.client_cert(&b64(c), &b64(k));
    } else if let Some(t) = user["token"].as_str() {
        b = b.bearer_token(t);
    }
    b.build()
}

/// The same client, acting as `user` (kube-apiserver impersonation; group
/// `system:authenticated`), which the aggregator then forwards to poddebug as that user.
pub fn as_user(c: &TestClient, user: &str) -> TestClient {
    c.with_header("impersonate-user", user)
        .with_header("impersonate-group", "system:authenticated")
}

/// `https://HOST:PORT` of the poddebug server itself and the CA of its serving certificate:
/// `PODDEBUG_LIVE_SERVER` if set, else the Service the APIService points at: its ExternalName
/// (how `manifests/local/register.sh` registers it) or its ClusterIP (`manifests/`). The CA is
/// the APIService's caBundle.
pub fn server_direct() -> TestClient {
    let api = ok_json(&["get", "apiservice", APISERVICE, "-o", "json"]);
    let ca = b64(api["spec"]["caBundle"]
        .as_str()
        .expect("the APIService has a caBundle"));
    let url = match std::env::var("PODDEBUG_LIVE_SERVER") {
        Ok(u) => u,
        Err(_) => {
            let ns = api["spec"]["service"]["namespace"].as_str().unwrap_or("");
            let name = api["spec"]["service"]["name"].as_str().unwrap_or("");
            let svc = ok_json(&["get", "service", "-n", ns, name, "-o", "json"]);
            // An ExternalName Service (register.sh), or the ClusterIP, which the nodes reach.
            let host = svc["spec"]["externalName"]
                .as_str()
                .or_else(|| svc["spec"]["clusterIP"].as_str().filter(|ip| *ip != "None"))
                .unwrap_or_else(|| {
                    panic!("set PODDEBUG_LIVE_SERVER: Service {ns}/{name} has no address")
                });
            format!("https://{host}:{}", api["spec"]["service"]["port"])
        }
    };
    TestClient::builder(&url)
        .ca_pem(&ca)
        .server_name("localhost")
        .http1_only()
        .build()
}

/// A namespace `pdlive-TAG-PID` with one running pod `web` (container `app` running busybox's
/// `sleep`, volume `data`), deleted on drop.
pub struct Sandbox {
    /// The namespace.
    pub ns: String,
    /// kube-apiserver, as the kubeconfig's user.
    pub api: TestClient,
    /// The namespace and the pod (the namespace is deleted when this is dropped).
    _stage: PodSandbox,
}

impl Sandbox {
    /// Creates the namespace and the pod and waits (bounded) for the pod to be Ready.
    pub fn new(tag: &str) -> Sandbox {
        assert!(enabled());
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"],
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "emptyDir": {}}]
            }
        });
        let stage = PodSandbox::new(format!("pdlive-{tag}-{}", std::process::id()), pod);
        Sandbox {
            ns: stage.ns().to_owned(),
            api: cluster(),
            _stage: stage,
        }
    }

    /// `GV/namespaces/NS/pods/web/REST`.
    pub fn path(&self, rest: &str) -> String {
        format!("{GV}/namespaces/{}/pods/web/{rest}", self.ns)
    }

    /// POST a debug container `name` (with `query`, e.g. `?wait=true&timeoutSeconds=20`).
    pub async fn create(&self, name: &str, query: &str, body: &Value) -> (StatusCode, Value) {
        self.create_as(&self.api, name, query, body).await
    }

    /// [`Sandbox::create`] with another client (another user).
    pub async fn create_as(
        &self,
        client: &TestClient,
        name: &str,
        query: &str,
        body: &Value,
    ) -> (StatusCode, Value) {
        client
            .post_json(&self.path(&format!("debug/{name}{query}")), body)
            .await
    }

    /// Creates `name` and waits until it runs; panics otherwise. The created object.
    pub async fn create_running(&self, name: &str, body: &Value) -> Value {
        let (code, obj) = self
            .create(name, "?wait=true&timeoutSeconds=20", body)
            .await;
        assert_eq!(code, StatusCode::CREATED, "create {name}: {obj}");
        assert_eq!(obj["status"]["phase"], "Running", "{obj}");
        obj
    }

    /// GET debug container `name`.
    pub async fn get(&self, name: &str) -> (StatusCode, Value) {
        self.api
            .get_json(&self.path(&format!("debug/{name}")))
            .await
    }

    /// DELETE (stop) debug container `name` with a grace period.
    pub async fn stop(&self, name: &str, grace: u32) -> (StatusCode, Value) {
        self.api
            .delete(&self.path(&format!("debug/{name}?gracePeriodSeconds={grace}")))
            .await
    }

    /// Polls GET until the debug container's phase is `phase` (bounded); the object.
    pub async fn wait_phase(&self, name: &str, phase: &str, timeout: Duration) -> Value {
        poll_async(
            &format!("debug container {name} in phase {phase}"),
            timeout,
            Duration::from_millis(500),
            || async {
                let (code, obj) = self.get(name).await;
                if code == StatusCode::OK && obj["status"]["phase"] == phase {
                    Ok(obj)
                } else {
                    Err(format!("{code} {obj}"))
                }
            },
        )
        .await
    }

    /// Polls GET until the debug container's status has a condition of type `condition`
    /// (bounded); the object.
    pub async fn wait_condition(&self, name: &str, condition: &str, timeout: Duration) -> Value {
        poll_async(
            &format!("debug container {name} with condition {condition}"),
            timeout,
            Duration::from_millis(500),
            || async {
                let (code, obj) = self.get(name).await;
                let has = obj["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == condition));
                if code == StatusCode::OK && has {
                    Ok(obj)
                } else {
                    Err(format!("{code} {obj}"))
                }
            },
        )
        .await
    }

    /// The pod `web` as kube-apiserver has it.
    pub async fn pod(&self) -> Value {
        let (code, pod) = self
            .api
            .get_json(&format!("/api/v1/namespaces/{}/pods/web", self.ns))
            .await;
        assert_eq!(code, StatusCode::OK, "{pod}");
        pod
    }

    /// What container `container` of the pod (regular or ephemeral) wrote to its log, read with
    /// kubectl as the kubeconfig's user (for a TTY: everything its terminal printed).
    pub fn container_log(&self, container: &str) -> String {
        ok(&["logs", "-n", &self.ns, "web", "-c", container], None)
    }

    /// The status of the pod's container `name` (regular or ephemeral).
    pub async fn container_status(&self, name: &str) -> Value {
        let pod = self.pod().await;
        for list in ["containerStatuses", "ephemeralContainerStatuses"] {
            if let Some(s) = pod["status"][list]
                .as_array()
                .and_then(|a| a.iter().find(|s| s["name"] == name))
            {
                return s.clone();
            }
        }
        Value::Null
    }

    /// Binds ClusterRole `role` to `user` cluster-wide (for cluster-scoped resources such as
    /// `debugprofiles`); the binding goes with the namespace's [`Drop`].
    pub fn bind_cluster(&self, role: &str, user: &str) {
        ok(
            &[
                "create",
                "clusterrolebinding",
                &format!("{}-{user}-{role}", self.ns),
                &format!("--clusterrole={role}"),
                &format!("--user={user}"),
            ],
            None,
        );
        ok(
            &[
                "label",
                "clusterrolebinding",
                &format!("{}-{user}-{role}", self.ns),
                &format!("poddebug.dev/live-namespace={}", self.ns),
            ],
            None,
        );
    }

    /// Binds ClusterRole `role` to `user` in this namespace.
    pub fn bind(&self, role: &str, user: &str) {
        ok(
            &[
                "create",
                "rolebinding",
                &format!("{user}-{role}"),
                "-n",
                &self.ns,
                &format!("--clusterrole={role}"),
                &format!("--user={user}"),
            ],
            None,
        );
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = kubectl(
            &[
                "delete",
                "clusterrolebinding",
                "-l",
                &format!("poddebug.dev/live-namespace={}", self.ns),
            ],
            None,
        );
        // The namespace goes with `_stage`.
    }
}

/// A debug container body sharing the target `app`'s namespaces.
pub fn targeted(image: &str, command: &[&str]) -> Value {
    json!({"container": {"image": image, "command": command}, "targetContainerName": "app"})
}

/// The `message` of a Status body.
pub fn message(status: &Value) -> String {
    status["message"].as_str().unwrap_or_default().to_owned()
}

/// The command of a debug container that fakes its stop: it replaces its `/bin/sh` (busybox's
/// symlink, removed first so that busybox itself stays) with a script that exits 0, as an image
/// could, then sleeps. poddebug's stop script then "succeeds" and signals nothing.
pub const FAKES_ITS_STOP: &[&str] = &[
    "sh",
    "-c",
    "printf '#!/bin/busybox true\\n' > /tmp/sh && chmod +x /tmp/sh && rm /bin/sh && \
     mv /tmp/sh /bin/sh && exec sleep 3600",
];

/// A WebSocket attach (`v5.channel.k8s.io`) to `path` as `client`: the code and, when refused,
/// the Status.
pub async fn attach_answer(client: &TestClient, path: &str) -> (StatusCode, Value) {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(http::Method::GET, path, &headers)
        .await
        .expect("the upgrade is answered");
    let status = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    (resp.status, status)
}

/// The Events with `reason` on pod `web` of `ns`.
pub fn pod_events(ns: &str, reason: &str) -> Vec<Value> {
    let list = ok_json(&[
        "get",
        "events",
        "-n",
        ns,
        &format!("--field-selector=involvedObject.name=web,reason={reason}"),
        "-o",
        "json",
    ]);
    list["items"].as_array().cloned().unwrap_or_default()
}
