//! The server as `manifests/` deploy it (CI's in-cluster passes): its pods run the image
//! `manifests/image/build.sh` builds — one static executable, nothing else — under the
//! `restricted` Pod Security level that its namespace enforces. Skipped when the server under test
//! runs out of the cluster (an ExternalName Service, as `register.sh` registers it).

use serde_json::Value;

use crate::support::{APISERVICE, enabled, kubectl, ok_json};

const NS: &str = "poddebug-system";

/// The server's pods, when it runs in the cluster.
fn in_cluster_pods() -> Option<Vec<Value>> {
    let api = ok_json(&["get", "apiservice", APISERVICE, "-o", "json"]);
    let svc = ok_json(&[
        "get",
        "service",
        "-n",
        api["spec"]["service"]["namespace"].as_str().unwrap_or(NS),
        api["spec"]["service"]["name"]
            .as_str()
            .unwrap_or("poddebug-apiserver"),
        "-o",
        "json",
    ]);
    if svc["spec"]["type"] == "ExternalName" {
        eprintln!("the server runs out of the cluster: nothing to check");
        return None;
    }
    let pods = ok_json(&[
        "get",
        "pods",
        "-n",
        NS,
        "-l",
        "app=poddebug-apiserver",
        "-o",
        "json",
    ]);
    Some(pods["items"].as_array().cloned().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn in_the_cluster_the_server_runs_its_scratch_image_under_the_restricted_level() {
    if !enabled() {
        return;
    }
    let Some(pods) = in_cluster_pods() else {
        return;
    };
    assert!(!pods.is_empty(), "no server pods in {NS}");
    // The namespace enforces `restricted`: a pod that does not meet it is refused.
    let ns = ok_json(&["get", "namespace", NS, "-o", "json"]);
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "{ns}"
    );
    let out = kubectl(
        &[
            "run",
            "pss-probe",
            "-n",
            NS,
            "--image=busybox:1.36",
            "--dry-run=server",
            "--",
            "sleep",
            "1",
        ],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("violates PodSecurity \"restricted"),
        "{err}"
    );
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{name} is not Ready: {}", pod["status"]);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{c}");
        assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
        // The image holds the server and nothing else: no shell to exec.
        let out = kubectl(&["exec", "-n", NS, name, "--", "sh", "-c", "true"], None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("executable file not found"),
            "{name} has a shell, or exec failed otherwise: {err}"
        );
    }
}
