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

    // kube-apiserver's own rules: ports are forbidden, told about the debug container's field.
    let bad = json!({"container": {"image": "busybox:1.36", "ports": [{"containerPort": 80}]}});
    let out = kubectl(
        &["create", "--raw", &sb.path("debug/bad"), "-f", "-"],
        Some(&bad.to_string()),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "The PodDebugContainer \"bad\" is invalid: container.ports: Forbidden: cannot be set for an Ephemeral Container"
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

/// The cluster decides validation (the answers of kube-apiserver v1.36.2 with its default
/// gates): the whole resources block is reported, a lifecycle holding only `stopSignal` is
/// accepted, and `?dryRun=All` answers the would-be object and adds nothing.
#[test]
#[ignore = "needs a live cluster (KUBECONFIG) with poddebug deployed"]
fn validation_answers_are_the_clusters() {
    if !live() {
        return;
    }
    let sb = Sandbox::new("validation");
    let ecs = || {
        ok(
            &[
                "get",
                "pod",
                "web",
                "-n",
                &sb.ns,
                "-o",
                "jsonpath={.spec.ephemeralContainers[*].name}",
            ],
            None,
        )
    };

    // Requests above limits: kube-apiserver's own cause comes with the Forbidden one.
    let bad = json!({"container": {"image": "busybox:1.36",
        "resources": {"limits": {"cpu": "100m"}, "requests": {"cpu": "200m"}}}});
    let out = kubectl(
        &["create", "--raw", &sb.path("debug/res"), "-f", "-"],
        Some(&bad.to_string()),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("container.resources.requests: Invalid value: \"200m\": must be less than or equal to cpu limit of 100m"),
        "{err}"
    );
    assert!(
        err.contains("container.resources: Forbidden: cannot be set for an Ephemeral Container"),
        "{err}"
    );

    // A dry run: 201 with the would-be object, nothing added.
    let body = json!({"container": {"image": "busybox:1.36", "command": ["sleep", "3600"]}});
    let created: Value = serde_json::from_str(&ok(
        &[
            "create",
            "--raw",
            &sb.path("debug/dry?dryRun=All"),
            "-f",
            "-",
        ],
        Some(&body.to_string()),
    ))
    .expect("JSON");
    assert_eq!(created["metadata"]["name"], "dry");
    assert_eq!(ecs().trim(), "");

    // ContainerStopSignals is off on 1.36: the field and the lifecycle it leaves are dropped.
    let sig = json!({"container": {"image": "busybox:1.36", "command": ["sleep", "3600"],
        "lifecycle": {"stopSignal": "SIGUSR1"}}});
    let created: Value = serde_json::from_str(&ok(
        &["create", "--raw", &sb.path("debug/sig"), "-f", "-"],
        Some(&sig.to_string()),
    ))
    .expect("JSON");
    assert_eq!(created["metadata"]["name"], "sig");
    assert_eq!(ecs().trim(), "sig");
}
