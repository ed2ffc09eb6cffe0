//! The live-cluster suite: a real kube-apiserver with its aggregator, a real kubelet and the real
//! kubectl, with poddebug deployed (`kubectl apply -k manifests/`). Ignored by default; run with
//!
//! ```sh
//! KUBECONFIG=~/.kube/config cargo test -p poddebug-tests --test live -- --ignored --test-threads=1
//! ```
//!
//! Every test makes its own namespace and deletes it at the end.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const GV: &str = "/apis/poddebug.dev/v1alpha1";

fn kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut cmd = Command::new("kubectl");
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(std::process::Stdio::piped());
    }
    let mut child = cmd.spawn().expect("kubectl on PATH");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl")
}

fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn live() -> bool {
    if std::env::var_os("KUBECONFIG").is_none() {
        eprintln!("KUBECONFIG is not set: skipping the live-cluster suite");
        return false;
    }
    true
}

/// A namespace with one running pod `web` (container `app`, volume `data`), deleted on drop.
struct Sandbox {
    ns: String,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let ns = format!("poddebug-live-{tag}-{}", std::process::id());
        ok(&["create", "namespace", &ns], None);
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": ns, "labels": {"app": "web"}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"],
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "emptyDir": {}}]
            }
        });
        ok(&["apply", "-f", "-"], Some(&pod.to_string()));
        ok(
            &[
                "wait",
                "-n",
                &ns,
                "--for=condition=Ready",
                "pod/web",
                "--timeout=180s",
            ],
            None,
        );
        Sandbox { ns }
    }

    fn path(&self, rest: &str) -> String {
        format!("{GV}/namespaces/{}/pods/web/{rest}", self.ns)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.ns, "--wait=false"], None);
    }
}

#[test]
#[ignore = "needs a live cluster (KUBECONFIG) with poddebug deployed"]
fn api_service_is_available_and_discoverable() {
    if !live() {
        return;
    }
    let cond = ok(
        &[
            "get",
            "apiservice",
            "v1alpha1.poddebug.dev",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
        ],
        None,
    );
    assert_eq!(cond.trim(), "True");
    let resources = ok(
        &["api-resources", "--api-group=poddebug.dev", "-o", "name"],
        None,
    );
    assert!(
        resources.contains("poddebugcontainers.poddebug.dev"),
        "{resources}"
    );
    assert!(
        resources.contains("debugprofiles.poddebug.dev"),
        "{resources}"
    );
    let explain = ok(&["explain", "poddebugcontainers.status.phase"], None);
    // The phase's enum values come from our OpenAPI document, not from kubectl.
    for value in ["Waiting", "Running", "Terminated"] {
        assert!(explain.contains(value), "{explain}");
    }
    let profiles = ok(&["get", "debugprofiles"], None);
    for p in [
        "legacy",
        "general",
        "baseline",
        "restricted",
        "netadmin",
        "sysadmin",
    ] {
        assert!(profiles.contains(p), "{profiles}");
    }
}

#[test]
#[ignore = "needs a live cluster (KUBECONFIG) with poddebug deployed"]
fn create_read_list_and_stop_a_debug_container() {
    if !live() {
        return;
    }
    let sb = Sandbox::new("crud");
    let body = json!({
        "container": {"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]},
        "targetContainerName": "app",
        "profile": "general"
    });
    let created: Value = serde_json::from_str(&ok(
        &[
            "create",
            "--raw",
            &sb.path("debug/dbg?wait=true&timeoutSeconds=120"),
            "-f",
            "-",
        ],
        Some(&body.to_string()),
    ))
    .expect("JSON");
    assert_eq!(created["kind"], "PodDebugContainer");
    assert_eq!(created["status"]["phase"], "Running", "{created}");

    // The same name while it runs: 409.
    let again = kubectl(
        &["create", "--raw", &sb.path("debug/dbg"), "-f", "-"],
        Some(&body.to_string()),
    );
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("AlreadyExists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // kube-apiserver's own rules: ports are forbidden, at index 1 (one EC exists).
    let bad = json!({"container": {"image": "busybox:1.36", "ports": [{"containerPort": 80}]}});
    let out = kubectl(
        &["create", "--raw", &sb.path("debug/bad"), "-f", "-"],
        Some(&bad.to_string()),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container"
        ),
        "{err}"
    );

    let got: Value =
        serde_json::from_str(&ok(&["get", "--raw", &sb.path("debug/dbg")], None)).unwrap();
    assert_eq!(got["status"]["podName"], "web");
    let table = ok(&["get", "poddebugcontainers", "-n", &sb.ns], None);
    assert!(
        table.contains("web.dbg") && table.contains("Running"),
        "{table}"
    );

    // Stop: the debug container ends, the application keeps running without a restart.
    let _ = ok(
        &[
            "delete",
            "--raw",
            &sb.path("debug/dbg?gracePeriodSeconds=2"),
        ],
        None,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: Value =
            serde_json::from_str(&ok(&["get", "--raw", &sb.path("debug/dbg")], None)).unwrap();
        if got["status"]["phase"] == "Terminated" {
            assert!(
                got["status"]["stopRequested"]["requestedBy"].is_string(),
                "{got}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "not terminated: {got}");
        std::thread::sleep(Duration::from_secs(1));
    }
    let pod: Value = serde_json::from_str(&ok(
        &["get", "pod", "web", "-n", &sb.ns, "-o", "json"],
        None,
    ))
    .unwrap();
    assert!(
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object(),
        "the target still runs"
    );
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0);
    let events = ok(
        &[
            "get",
            "events",
            "-n",
            &sb.ns,
            "--field-selector=involvedObject.name=web",
            "-o",
            "json",
        ],
        None,
    );
    assert!(
        events.contains("DebugContainerCreated") && events.contains("DebugContainerStopped"),
        "{events}"
    );

    // The name can be reused now that it terminated.
    let reused: Value = serde_json::from_str(&ok(
        &[
            "create",
            "--raw",
            &sb.path("debug/dbg?wait=true&timeoutSeconds=120"),
            "-f",
            "-",
        ],
        Some(&body.to_string()),
    ))
    .unwrap();
    assert_ne!(reused["status"]["ephemeralContainerName"], "dbg");
    assert_eq!(reused["metadata"]["name"], "dbg");
}

#[test]
#[ignore = "needs a live cluster (KUBECONFIG) with poddebug deployed"]
fn logs_of_a_debug_container_are_readable() {
    if !live() {
        return;
    }
    let sb = Sandbox::new("logs");
    let body = json!({"container": {"image": "busybox:1.36", "command": ["sh", "-c", "echo hello-from-debug; sleep 3600"]}});
    let _ = ok(
        &[
            "create",
            "--raw",
            &sb.path("debug/printer?wait=true&timeoutSeconds=120"),
            "-f",
            "-",
        ],
        Some(&body.to_string()),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = ok(&["get", "--raw", &sb.path("log?container=printer")], None);
        if out.contains("hello-from-debug") {
            break;
        }
        assert!(Instant::now() < deadline, "log: {out}");
        std::thread::sleep(Duration::from_secs(1));
    }
    // Not a debug container: refused before anything is streamed.
    let out = kubectl(&["get", "--raw", &sb.path("log?container=app")], None);
    assert!(!out.status.success());
}

#[test]
#[ignore = "needs a live cluster (KUBECONFIG) with poddebug deployed"]
fn lists_page_and_watches_follow_the_pod_cache() {
    if !live() {
        return;
    }
    let sb = Sandbox::new("paging");
    let body = json!({
        "container": {"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]},
        "targetContainerName": "app",
    });
    for name in ["one", "two"] {
        ok(
            &[
                "create",
                "--raw",
                &sb.path(&format!("debug/{name}")),
                "-f",
                "-",
            ],
            Some(&body.to_string()),
        );
    }
    let list_path = format!("{GV}/namespaces/{}/poddebugcontainers", sb.ns);
    // The server's pod cache follows the creates within moments; poll a bounded number of times.
    let mut all = Value::Null;
    for _ in 0..50 {
        all = serde_json::from_str(&ok(&["get", "--raw", &list_path], None)).expect("JSON");
        if all["items"].as_array().map(Vec::len) == Some(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(all["items"].as_array().map(Vec::len), Some(2), "{all}");

    let first: Value = serde_json::from_str(&ok(
        &["get", "--raw", &format!("{list_path}?limit=1")],
        None,
    ))
    .expect("JSON");
    assert_eq!(first["items"][0]["metadata"]["name"], "web.one", "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_owned();
    let second: Value = serde_json::from_str(&ok(
        &[
            "get",
            "--raw",
            &format!("{list_path}?limit=1&continue={token}"),
        ],
        None,
    ))
    .expect("JSON");
    assert_eq!(
        second["items"][0]["metadata"]["name"], "web.two",
        "{second}"
    );
    assert!(second["metadata"].get("continue").is_none(), "{second}");
    assert_eq!(
        second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "every page carries the first page's resourceVersion"
    );
    // kubectl's chunked get walks the same pages.
    let names = ok(
        &["get", "pdc", "-n", &sb.ns, "--chunk-size=1", "-o", "name"],
        None,
    );
    assert_eq!(names.lines().count(), 2, "{names}");
    let bad = kubectl(
        &[
            "get",
            "--raw",
            &format!("{list_path}?limit=1&continue=not-a-token"),
        ],
        None,
    );
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("BadRequest")
            || String::from_utf8_lossy(&bad.stderr).contains("invalid continue token"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
