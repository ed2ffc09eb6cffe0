//! kubectl for the live suites (the server's own suite, the plugin's and the client examples'):
//! run it, require success, and set the stage — a namespace with one running pod, deleted on
//! drop. kubectl only sets the stage; what is tested talks to the cluster itself.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs kubectl (optionally with stdin).
pub fn kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new("kubectl");
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("kubectl on PATH");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())
            .expect("write kubectl's stdin");
    }
    child.wait_with_output().expect("kubectl")
}

/// kubectl that must succeed; its stdout.
pub fn kubectl_ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a live suite can run: a kubeconfig is given. Without one it is skipped, unless CI
/// asked for the live suites (`PODDEBUG_LIVE`), where a missing cluster is a failure.
pub fn live_cluster_given(suite: &str) -> bool {
    if std::env::var_os("KUBECONFIG").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("PODDEBUG_LIVE").is_none(),
        "PODDEBUG_LIVE is set but KUBECONFIG is not"
    );
    eprintln!("KUBECONFIG is not set: skipping {suite}");
    false
}

/// Deletes node debug pod `localhost.NAME` (namespace `poddebug-nodes`) when dropped, whatever
/// the test did: node debug containers live outside the tests' own namespaces.
#[derive(Debug)]
pub struct NodeDebugPodCleanup(pub String);

impl Drop for NodeDebugPodCleanup {
    fn drop(&mut self) {
        let _ = kubectl(
            &[
                "delete",
                "pod",
                "-n",
                "poddebug-nodes",
                &format!("localhost.{}", self.0),
                "--ignore-not-found",
                "--wait=false",
            ],
            None,
        );
    }
}

/// A namespace with one pod (given whole, its namespace set here) that is Ready; the namespace
/// is deleted on drop.
#[derive(Debug)]
pub struct PodSandbox {
    ns: String,
}

impl PodSandbox {
    /// Creates namespace `ns` and `pod` in it, and waits (bounded) for the pod to be Ready.
    pub fn new(ns: String, mut pod: serde_json::Value) -> PodSandbox {
        kubectl_ok(&["create", "namespace", &ns], None);
        let sandbox = PodSandbox { ns };
        // A pod needs the namespace's `default` ServiceAccount, which the controller-manager
        // adds a moment later (longer right after a control-plane restart).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let o = kubectl(
                &["get", "serviceaccount", "default", "-n", &sandbox.ns],
                None,
            );
            if o.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the default ServiceAccount of {} not within 60 s: {}",
                sandbox.ns,
                String::from_utf8_lossy(&o.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        pod["metadata"]["namespace"] = sandbox.ns.clone().into();
        let name = pod["metadata"]["name"].as_str().unwrap_or("web").to_owned();
        kubectl_ok(&["apply", "-f", "-"], Some(&pod.to_string()));
        kubectl_ok(
            &[
                "wait",
                "-n",
                &sandbox.ns,
                "--for=condition=Ready",
                &format!("pod/{name}"),
                "--timeout=120s",
            ],
            None,
        );
        sandbox
    }

    /// The namespace.
    pub fn ns(&self) -> &str {
        &self.ns
    }
}

impl Drop for PodSandbox {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.ns, "--wait=false"], None);
    }
}
