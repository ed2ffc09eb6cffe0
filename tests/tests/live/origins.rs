//! Clients that are not browsers but send `Origin`: the official Kubernetes Python client
//! (PyPI `kubernetes`, `kubernetes.stream.stream()`), whose WebSocket names the API server it
//! dials, attaches through kube-apiserver's aggregator once the cluster says that server is its
//! own; a page's origin on the same path is refused.
//!
//! Needs a Python with the `kubernetes` package: `PODDEBUG_LIVE_PYTHON` names it (.ci/live
//! installs one in a venv). With `PODDEBUG_LIVE=1` a missing one is a failure; otherwise the
//! test skips.

use super::support::*;

use std::time::Duration;

use http::{Method, StatusCode};
use poddebug_tests::TestClient;
use serde_json::{Value, json};

/// The script that drives the Python client (tests/tests/live/python_attach.py).
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/live/python_attach.py");

/// The label on the `cluster-info` this test publishes (and only that one is ever deleted).
const MADE_HERE: &str = "poddebug.dev/live-test=origins";

/// The Python with the `kubernetes` client, or `None` (skip) when it is not there and the live
/// suite is not required to run.
fn python() -> Option<String> {
    let required = std::env::var("PODDEBUG_LIVE").is_ok_and(|v| v == "1" || v == "true");
    let found = std::env::var("PODDEBUG_LIVE_PYTHON").ok().filter(|p| {
        std::process::Command::new(p)
            .args(["-c", "import kubernetes.stream, websocket"])
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        assert!(
            !required,
            "PODDEBUG_LIVE=1 and PODDEBUG_LIVE_PYTHON ({:?}) names no Python with the \
             `kubernetes` package (.ci/live installs it)",
            std::env::var("PODDEBUG_LIVE_PYTHON")
        );
        eprintln!("skipping: PODDEBUG_LIVE_PYTHON names no Python with the `kubernetes` package");
    }
    found
}

/// What one run of the script said: its exit code and its JSON line.
struct Attach {
    code: i32,
    said: Value,
}

/// Runs the Python client against `server`: attach to `py` in the sandbox's pod `web`, type
/// `echo py-$((6*7))` and read `py-42`.
async fn python_attach(python: &str, server: &str, ns: &str) -> Attach {
    let run = tokio::process::Command::new(python)
        .arg(SCRIPT)
        .args([server, ns, "web", "py", "echo py-$((6*7))\n", "py-42"])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the Python client ends within 90 s")
        .expect("the Python client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let said = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "the Python client said nothing readable: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    Attach {
        code: out.status.code().unwrap_or(-1),
        said,
    }
}

/// kubeadm's `kube-public/cluster-info`, naming `server` with the kubeconfig's CA; deleted on
/// drop (only when this test made it).
struct ClusterInfo;

impl ClusterInfo {
    fn publish(server: &str, ca_b64: &str) -> ClusterInfo {
        let kubeconfig = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca_b64}\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"
        );
        let (key, value) = MADE_HERE.split_once('=').expect("a label");
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public", "labels": {key: value}},
            "data": {"kubeconfig": kubeconfig},
        });
        ok(&["apply", "-f", "-"], Some(&cm.to_string()));
        ClusterInfo
    }

    /// Deletes the one this test made (a left-over of an interrupted run, too).
    fn remove() {
        ok(
            &[
                "delete",
                "configmap",
                "-n",
                "kube-public",
                "-l",
                MADE_HERE,
                "--ignore-not-found",
            ],
            None,
        );
    }
}

impl Drop for ClusterInfo {
    fn drop(&mut self) {
        ClusterInfo::remove();
    }
}

/// The kubeconfig's server and CA (base64).
fn kubeconfig_server_and_ca() -> (String, String) {
    let cfg = ok_json(&["config", "view", "--raw", "--minify", "-o", "json"]);
    let cluster = &cfg["clusters"][0]["cluster"];
    let server = cluster["server"].as_str().expect("a server").to_owned();
    let ca = match cluster["certificate-authority-data"].as_str() {
        Some(ca) => ca.to_owned(),
        None => {
            use base64::Engine;
            let path = cluster["certificate-authority"]
                .as_str()
                .expect("the kubeconfig's CA");
            base64::engine::general_purpose::STANDARD
                .encode(std::fs::read(path).expect("the kubeconfig's CA file"))
        }
    };
    (server, ca)
}

#[tokio::test]
#[ignore]
async fn the_kubernetes_python_client_attaches_once_the_cluster_names_the_server_it_dials() {
    if !enabled() {
        return;
    }
    let Some(python) = python() else { return };
    let (server, ca) = kubeconfig_server_and_ca();
    // The same kube-apiserver by another of its certificate's names, which nothing in the
    // cluster names yet: the origin the client will send is learned only from cluster-info.
    let alias = server
        .trim_end_matches('/')
        .replace("://127.0.0.1:", "://localhost:");
    assert_ne!(
        alias, server,
        "the live suite runs against the test cluster (kube-apiserver on https://127.0.0.1:PORT)"
    );
    let existing = ok_json(&["get", "configmap", "-n", "kube-public", "-o", "json"]);
    let theirs = existing["items"].as_array().into_iter().flatten().any(|c| {
        c["metadata"]["name"] == "cluster-info"
            && c["metadata"]["labels"]["poddebug.dev/live-test"] != "origins"
    });
    assert!(
        !theirs,
        "kube-public/cluster-info exists and was not made by this test: it is not changed here"
    );
    ClusterInfo::remove();

    let sb = Sandbox::new("pyorigin");
    sb.create_running(
        "py",
        &json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true},
                "targetContainerName": "app"}),
    )
    .await;

    // The library's own Origin, for a server nothing in the cluster names: a page like any.
    let refused = poll_async(
        "the Python client refused while nothing names its server",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let a = python_attach(&python, &alias, &sb.ns).await;
            if a.code == 3 {
                Ok(a.said)
            } else {
                Err(format!("exit {}: {}", a.code, a.said))
            }
        },
    )
    .await;
    assert_eq!(refused["origin"], alias, "{refused}");
    let why = refused["refused"].as_str().unwrap_or_default();
    assert!(why.contains("cross-site requests are forbidden"), "{why}");
    assert!(why.contains(&format!("(Origin: {alias})")), "{why}");

    // The cluster publishes where its API server is, as kubeadm does: the server learns it
    // (a watch, with exactly its manifests' RBAC when it runs in the cluster) and the same
    // client attaches, types and reads.
    let published = ClusterInfo::publish(&alias, &ca);
    let worked = poll_async(
        "the Python client attaches once cluster-info names its server",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let a = python_attach(&python, &alias, &sb.ns).await;
            match a.code {
                0 => Ok(a.said),
                3 => Err(format!("still refused: {}", a.said)),
                code => panic!("the Python client failed (exit {code}): {}", a.said),
            }
        },
    )
    .await;
    assert_eq!(worked["origin"], alias, "{worked}");
    let output = worked["output"].as_str().unwrap_or_default();
    assert!(output.lines().any(|l| l.trim() == "py-42"), "{output:?}");

    // Unpublished: refused again.
    drop(published);
    poll_async(
        "the Python client refused again once cluster-info is gone",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let a = python_attach(&python, &alias, &sb.ns).await;
            if a.code == 3 {
                Ok(())
            } else {
                Err(format!("exit {}: {}", a.code, a.said))
            }
        },
    )
    .await;
}

/// A WebSocket attach to `py` through kube-apiserver with `origin` (none when `None`).
async fn attach_through_the_aggregator(
    api: &TestClient,
    path: &str,
    origin: Option<&str>,
) -> poddebug_tests::UpgradeResponse {
    let mut headers = TestClient::websocket_headers("v4.channel.k8s.io");
    if let Some(o) = origin {
        headers.push(("origin", o.to_owned()));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    api.upgrade(Method::GET, path, &headers)
        .await
        .expect("the attach is answered")
}

#[tokio::test]
#[ignore]
async fn a_pages_origin_is_refused_on_the_attach_path_clients_use() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("pageorigin");
    sb.create_running(
        "py",
        &json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true},
                "targetContainerName": "app"}),
    )
    .await;
    let path = sb.path("attach?container=py&stdin=true&stdout=true&stderr=true");
    let (server, _) = kubeconfig_server_and_ca();
    for origin in [
        "https://evil.example".to_owned(),
        format!("{}.evil.example", server.trim_end_matches('/')),
        "null".to_owned(),
    ] {
        let resp = attach_through_the_aggregator(&sb.api, &path, Some(&origin)).await;
        let status: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        assert_eq!(resp.status, StatusCode::FORBIDDEN, "{origin}: {status}");
        assert_eq!(status["reason"], "Forbidden", "{status}");
        assert!(
            message(&status).contains("cross-site requests are forbidden"),
            "{status}"
        );
        assert!(resp.io.is_none());
    }
    // The same request without an Origin (kubectl, client-go) opens the stream.
    let resp = attach_through_the_aggregator(&sb.api, &path, None).await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
}
