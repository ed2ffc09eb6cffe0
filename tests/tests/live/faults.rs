use super::support::*;

// Faults of the real cluster while poddebug has work in flight: kube-apiserver and the
// kubelet killed and started again (through the realcluster's `up.sh`, which starts whatever
// is not running; PIDs in `$REALCLUSTER_STATE/run/NAME.pid`). Needs `REALCLUSTER_STATE`;
// `REALCLUSTER_UP` overrides where `up.sh` is (default `../shared/realcluster/up.sh` from the
// project root).

use std::process::Command;
use std::time::Duration;

use http::{Method, StatusCode};
use poddebug_tests::TestClient;
use poddebug_tests::channel::ChannelClient;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);
/// Echoes stdin to stdout for an hour.
const CAT: &str = "cat; sleep 3600";

fn state_dir() -> String {
    std::env::var("REALCLUSTER_STATE").expect("REALCLUSTER_STATE names the realcluster state dir")
}

/// Kills component `name` (SIGTERM, then SIGKILL after 20 s), then runs `up.sh` to start it
/// again and waits until kube-apiserver answers `/readyz`.
fn restart(name: &str) {
    let pid_file = format!("{}/run/{name}.pid", state_dir());
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("{pid_file}: {e}"))
        .trim()
        .to_owned();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    // Gone, or a zombie nobody reaps (kill -0 still succeeds on one in a container without an
    // init that reaps orphans).
    let gone = |pid: &str| {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        zombie
            || !Command::new("kill")
                .args(["-0", pid])
                .status()
                .is_ok_and(|s| s.success())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gone(&pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    if !gone(&pid) {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        poll(
            &format!("{name} exits after SIGKILL"),
            Duration::from_secs(10),
            Duration::from_millis(200),
            || {
                if gone(&pid) {
                    Ok(())
                } else {
                    Err(format!("pid {pid} alive"))
                }
            },
        );
    }
    // up.sh starts what its pid file does not show running; a zombie would look running.
    let _ = std::fs::remove_file(&pid_file);
    let up = std::env::var("REALCLUSTER_UP").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/realcluster/up.sh"
        )
        .to_owned()
    });
    let out = Command::new("bash")
        .arg(&up)
        .env("REALCLUSTER_STATE", state_dir())
        .output()
        .expect("run up.sh");
    assert!(
        out.status.success(),
        "{up}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    poll(
        "kube-apiserver ready",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let o = kubectl(&["get", "--raw", "/readyz"], None);
            if o.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        },
    );
}

/// Waits (bounded) until the APIService's `Available` condition is `status` (`True`, `False`).
fn wait_available(status: &str, within: Duration) {
    poll(
        &format!("APIService Available={status}"),
        within,
        Duration::from_millis(500),
        || {
            let o = kubectl(
                &[
                    "get",
                    "apiservice",
                    APISERVICE,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
                ],
                None,
            );
            let got = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            if got == status { Ok(()) } else { Err(got) }
        },
    );
}

/// The number of ephemeral containers of pod `web` named `name`.
async fn containers_named(sb: &Sandbox, name: &str) -> usize {
    sb.pod().await["spec"]["ephemeralContainers"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|c| c["name"] == name).count())
}

async fn attach(sb: &Sandbox) -> ChannelClient<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>> {
    try_attach(sb).await.unwrap_or_else(|e| panic!("{e}"))
}

async fn try_attach(
    sb: &Sandbox,
) -> Result<ChannelClient<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>, String> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = sb
        .api
        .upgrade(
            Method::GET,
            &sb.path("attach?container=cat&stdin=true&stdout=true"),
            &headers,
        )
        .await
        .map_err(|e| format!("upgrade request: {e}"))?;
    if resp.status != StatusCode::SWITCHING_PROTOCOLS {
        return Err(format!("{resp:?}"));
    }
    let io = resp.io.ok_or("no upgraded connection")?;
    Ok(ChannelClient::new(io, "v5.channel.k8s.io").await)
}

/// After a restart, the path through the aggregator, poddebug's connections and the kubelet
/// come back one after the other: an attach is retried (bounded) until it is answered 101.
async fn attach_after_restart(
    sb: &Sandbox,
) -> ChannelClient<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>> {
    poll_async(
        "an attach answered 101 after the restart",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || try_attach(sb),
    )
    .await
}

/// A create right after a restart may meet a 5xx while connections are re-established: it is
/// sent again (bounded); a 409 AlreadyExists then means an earlier try went through, and the
/// object is read instead. Answers the object once it runs.
async fn create_running_after_restart(
    sb: &Sandbox,
    name: &str,
    body: &serde_json::Value,
) -> serde_json::Value {
    poll_async(
        &format!("debug container {name} created after the restart"),
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            let (code, obj) = sb.create(name, "?wait=true&timeoutSeconds=20", body).await;
            match code {
                StatusCode::CREATED => Ok(obj),
                StatusCode::CONFLICT if obj["reason"] == "AlreadyExists" => {
                    let (code, obj) = sb.api.get_json(&sb.path(&format!("debug/{name}"))).await;
                    if code == StatusCode::OK && obj["status"]["phase"] == "Running" {
                        Ok(obj)
                    } else {
                        Err(format!("{code} {obj}"))
                    }
                }
                c if c.is_server_error() || c == StatusCode::TOO_MANY_REQUESTS => {
                    Err(format!("{c} {obj}"))
                }
                c => panic!("create {name} after the restart: {c} {obj}"),
            }
        },
    )
    .await
}

#[tokio::test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG, REALCLUSTER_STATE); restarts kube-apiserver"]
async fn kube_apiserver_restarted_with_a_stream_and_a_watch_in_flight() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("kasrestart");
    sb.create_running(
        "cat",
        &json!({"container": {"image": BUSYBOX, "command": ["sh", "-c", CAT], "stdin": true}}),
    )
    .await;
    let mut a = attach(&sb).await;
    a.stdin(b"before\n").await.expect("stdin");
    a.read_until(T, |t| t.stdout.ends_with(b"before\n")).await;
    let mut watch = sb
        .api
        .stream(
            Method::GET,
            &format!("{GV}/namespaces/{}/poddebugcontainers?watch=true", sb.ns),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);

    restart("kube-apiserver");

    // The stream went with the connection through the aggregator: it ended, and what was
    // echoed before is intact.
    let t = a.finish(T).await;
    assert!(t.ended, "{t:?}");
    assert!(t.stdout.starts_with(b"before\n"), "{t:?}");
    let _ = watch.read_to_end(T).await;
    assert!(watch.ended(), "the watch ended with kube-apiserver");

    // poddebug serves again once the aggregator sees it (bounded), without a restart of its own.
    wait_available("True", Duration::from_secs(120));
    let obj = create_running_after_restart(
        &sb,
        "after",
        &json!({"container": {"image": BUSYBOX, "command": ["sleep", "3600"]}}),
    )
    .await;
    assert_eq!(obj["status"]["phase"], "Running");
    assert_eq!(
        containers_named(&sb, "after").await,
        1,
        "no duplicate debug container"
    );
    // Lists show both once poddebug's pod cache has re-listed after its watch broke (bounded).
    poll_async(
        "both debug containers listed",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            let (code, list) = sb
                .api
                .get_json(&format!("{GV}/namespaces/{}/poddebugcontainers", sb.ns))
                .await;
            if code == StatusCode::OK && list["items"].as_array().map_or(0, Vec::len) == 2 {
                Ok(())
            } else {
                Err(format!("{code} {list}"))
            }
        },
    )
    .await;
    // A new attach to the container that kept running works.
    let mut a = attach_after_restart(&sb).await;
    a.stdin(b"after\n").await.expect("stdin");
    let t = a.read_until(T, |t| t.stdout.ends_with(b"after\n")).await;
    assert!(t.stdout.ends_with(b"after\n"), "{t:?}");
}

#[tokio::test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG, REALCLUSTER_STATE); restarts the kubelet"]
async fn kubelet_restarted_mid_stream_ends_it_and_the_container_keeps_running() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("kubeletrestart");
    sb.create_running(
        "cat",
        &json!({"container": {"image": BUSYBOX, "command": ["sh", "-c", CAT], "stdin": true}}),
    )
    .await;
    let mut a = attach(&sb).await;
    let mut sent = Vec::new();
    for i in 0..100 {
        let line = format!("{i:04}\n");
        a.stdin(line.as_bytes()).await.expect("stdin");
        sent.extend_from_slice(line.as_bytes());
    }
    a.read_until(T, |t| t.stdout.len() >= sent.len()).await;

    restart("kubelet");

    let t = a.finish(T).await;
    assert!(t.ended, "the stream ended with the kubelet: {t:?}");
    assert_eq!(t.stdout, sent, "nothing lost or reordered before the end");
    // The container survives a kubelet restart; a new attach reaches it.
    sb.wait_phase("cat", "Running", Duration::from_secs(120))
        .await;
    let mut a = attach_after_restart(&sb).await;
    a.stdin(b"again\n").await.expect("stdin");
    let t = a.read_until(T, |t| t.stdout.ends_with(b"again\n")).await;
    assert!(t.stdout.ends_with(b"again\n"), "{t:?}");
}

/// Puts the APIService back on its port when dropped (also when the test fails).
struct ApiServicePort(u64);

impl ApiServicePort {
    /// Points the APIService at a closed port of the same Service: to kube-apiserver, poddebug
    /// is down (connection refused), as between a crash and its restart.
    fn break_it() -> ApiServicePort {
        let api = ok_json(&["get", "apiservice", APISERVICE, "-o", "json"]);
        let port = api["spec"]["service"]["port"].as_u64().unwrap_or(443);
        set_apiservice_port(1);
        ApiServicePort(port)
    }
}

impl Drop for ApiServicePort {
    fn drop(&mut self) {
        set_apiservice_port(self.0);
    }
}

fn set_apiservice_port(port: u64) {
    let patch = json!({"spec": {"service": {"port": port}}}).to_string();
    ok(
        &[
            "patch",
            "apiservice",
            APISERVICE,
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    );
}

fn namespace_exists(ns: &str) -> bool {
    kubectl(&["get", "namespace", ns], None).status.success()
}

/// The hazard of every aggregated API: while poddebug's APIService is unavailable, the
/// namespace controller cannot finish discovery, and every namespace deletion in the cluster
/// waits. Shown here, then how long a deletion still waits once poddebug is back (printed: the
/// figure in docs/reliability.md).
#[tokio::test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG); makes the APIService unavailable"]
async fn namespace_deletion_waits_while_the_api_is_unavailable_and_finishes_after() {
    if !enabled() {
        return;
    }
    let ns = format!("pdlive-nsdelete-{}", std::process::id());
    ok(&["create", "namespace", &ns], None);
    let broken = ApiServicePort::break_it();
    wait_available("False", Duration::from_secs(60));
    ok(&["delete", "namespace", &ns, "--wait=false"], None);
    // The namespace controller names the group it could not discover, and the namespace stays.
    let condition = poll(
        "NamespaceDeletionDiscoveryFailure naming poddebug.dev",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let o = kubectl(
                &[
                    "get",
                    "namespace",
                    &ns,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"NamespaceDeletionDiscoveryFailure\")].message}",
                ],
                None,
            );
            let msg = String::from_utf8_lossy(&o.stdout).into_owned();
            if msg.contains("poddebug.dev/v1alpha1") {
                Ok(msg)
            } else {
                Err(msg)
            }
        },
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        namespace_exists(&ns),
        "deleted although discovery failed: {condition}"
    );

    // Back: the deletion finishes, bounded by the namespace controller's retry backoff.
    drop(broken);
    let back = std::time::Instant::now();
    poll(
        "the namespace deleted once poddebug is back",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || {
            if namespace_exists(&ns) {
                Err("still there".to_owned())
            } else {
                Ok(())
            }
        },
    );
    eprintln!(
        "namespace deletion finished {:.1} s after the APIService was reachable again",
        back.elapsed().as_secs_f64()
    );
}

/// The APIService's `Available` condition as `STATUS REASON: MESSAGE`.
fn available_condition() -> String {
    let o = kubectl(
        &[
            "get",
            "apiservice",
            APISERVICE,
            "-o",
            "jsonpath={range .status.conditions[?(@.type==\"Available\")]}{.status} {.reason}: {.message}{end}",
        ],
        None,
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// Waits (bounded) until the `Available` condition has `reason`; the condition as printed.
fn wait_reason(reason: &str) -> String {
    poll(
        &format!("APIService Available=False with reason {reason}"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let c = available_condition();
            if c.starts_with(&format!("False {reason}:")) {
                Ok(c)
            } else {
                Err(c)
            }
        },
    )
}

/// Puts the APIService back as it was (service, port, caBundle) when dropped, re-creating it if
/// it was deleted; also when the test fails.
struct ApiServiceRestore(Value);

impl ApiServiceRestore {
    fn save() -> ApiServiceRestore {
        let mut api = ok_json(&["get", "apiservice", APISERVICE, "-o", "json"]);
        if let Some(m) = api["metadata"].as_object_mut() {
            for k in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "managedFields",
                "generation",
            ] {
                m.remove(k);
            }
        }
        if let Some(o) = api.as_object_mut() {
            o.remove("status");
        }
        ApiServiceRestore(api)
    }
}

impl Drop for ApiServiceRestore {
    fn drop(&mut self) {
        let body = self.0.to_string();
        let o = kubectl(&["apply", "-f", "-"], Some(&body));
        if !o.status.success() {
            eprintln!(
                "restoring the APIService failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

fn patch_apiservice_service(name: &str, port: u64) {
    let patch = json!({"spec": {"service": {"name": name, "port": port}}}).to_string();
    ok(
        &[
            "patch",
            "apiservice",
            APISERVICE,
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    );
}

/// docs/troubleshooting.md's entries about an unavailable API, reproduced on the real cluster
/// and printed as they read there (the doc quotes these lines): the reasons kube-apiserver gives
/// (ServiceNotFound, MissingEndpoints, FailedDiscoveryCheck), what kubectl and the plugin's API
/// check say meanwhile, a namespace deletion waiting on it with the condition the doc names, and
/// the second fix of that entry: deleting the APIService lets the deletion finish.
#[tokio::test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG); makes the APIService unavailable, then deletes it"]
async fn troubleshooting_unavailable_api_reasons_and_the_apiservice_deleted_as_the_fix() {
    if !enabled() {
        return;
    }
    let restore = ApiServiceRestore::save();
    let svc = restore.0["spec"]["service"].clone();
    let (name, ns) = (
        svc["name"]
            .as_str()
            .unwrap_or("poddebug-apiserver")
            .to_owned(),
        svc["namespace"]
            .as_str()
            .unwrap_or("poddebug-system")
            .to_owned(),
    );
    let port = svc["port"].as_u64().unwrap_or(443);

    // ServiceNotFound: the APIService names a Service that does not exist.
    patch_apiservice_service("poddebug-troubleshooting-absent", port);
    let c = wait_reason("ServiceNotFound");
    eprintln!("troubleshooting: ServiceNotFound: {c}");

    // MissingEndpoints: a Service with no ready endpoint (a selector no pod has).
    let empty = "poddebug-troubleshooting-empty";
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": empty, "namespace": ns},
        "spec": {"selector": {"app": "poddebug-troubleshooting-none"},
                 "ports": [{"port": port, "targetPort": 8443}]},
    })
    .to_string();
    ok(&["apply", "-f", "-"], Some(&service));
    patch_apiservice_service(empty, port);
    let c = wait_reason("MissingEndpoints");
    eprintln!("troubleshooting: MissingEndpoints: {c}");
    ok(
        &["delete", "service", "-n", &ns, empty, "--ignore-not-found"],
        None,
    );

    // FailedDiscoveryCheck: the server's Service, but nobody answers on the port.
    patch_apiservice_service(&name, 1);
    let c = wait_reason("FailedDiscoveryCheck");
    eprintln!("troubleshooting: FailedDiscoveryCheck: {c}");
    // What kubectl says meanwhile.
    let o = kubectl(&["get", "poddebugcontainers", "-A"], None);
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    eprintln!("troubleshooting: kubectl get poddebugcontainers -A: {said}");
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains("the server is currently unable to handle the request"),
        "{said}"
    );

    // A namespace deletion waits, with the condition the entry names.
    let victim = format!("pdlive-troubleshoot-{}", std::process::id());
    ok(&["create", "namespace", &victim], None);
    ok(&["delete", "namespace", &victim, "--wait=false"], None);
    let condition = poll(
        "NamespaceDeletionDiscoveryFailure naming poddebug.dev",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let o = kubectl(
                &[
                    "get",
                    "namespace",
                    &victim,
                    "-o",
                    "jsonpath={.status.phase} {.status.conditions[?(@.type==\"NamespaceDeletionDiscoveryFailure\")].message}",
                ],
                None,
            );
            let msg = String::from_utf8_lossy(&o.stdout).into_owned();
            if msg.contains("poddebug.dev/v1alpha1") {
                Ok(msg)
            } else {
                Err(msg)
            }
        },
    );
    eprintln!("troubleshooting: namespace {victim}: {condition}");
    assert!(condition.starts_with("Terminating "), "{condition}");

    // The fix when poddebug cannot come back soon: delete the APIService; the deletion goes on.
    ok(&["delete", "apiservice", APISERVICE], None);
    let gone = std::time::Instant::now();
    poll(
        "the namespace deleted once the APIService is gone",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || {
            if namespace_exists(&victim) {
                Err("still there".to_owned())
            } else {
                Ok(())
            }
        },
    );
    eprintln!(
        "troubleshooting: namespace deleted {:.1} s after the APIService was",
        gone.elapsed().as_secs_f64()
    );
    // Now the group is not served at all: the first entry of the page (kubectl says it one of
    // two ways, as its discovery cache still has the group or not).
    let o = kubectl(&["get", "poddebugcontainers", "-A"], None);
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    eprintln!("troubleshooting: without the APIService: {said}");
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains("the server doesn't have a resource type \"poddebugcontainers\"")
            || said.contains("the server could not find the requested resource"),
        "{said}"
    );

    // Put back as it was, and Available again.
    drop(restore);
    wait_available("True", Duration::from_secs(120));
}
