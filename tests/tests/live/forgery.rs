//! Records others may write, on the real cluster: what poddebug reads back from Leases in its
//! own namespace (stop records, session terminations, debug requests) is believed only when it
//! verifies with the record key, whoever may write Leases there; and a session that cannot be
//! recorded is never started. The fake kube-apiserver proves each of these too
//! (`tests/tests/unstoppable.rs`, `sessions.rs`, `requests.rs`, `recordings.rs`); here kubectl,
//! as an administrator writing Leases, plays the forger against kube-apiserver's real storage.
//!
//! `.ci/live` runs this module in its first pass (the records' handling is the server's own,
//! the same in and out of the cluster).

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use crate::sessions::{Forged, Replica, attach};
use crate::support::{
    BUSYBOX, GV, Sandbox, as_user, enabled, message, ok, ok_json, poll_async, targeted,
};

const T: Duration = Duration::from_secs(30);
/// The server's own namespace, where its records are.
const SERVER_NS: &str = "poddebug-system";

async fn metric(replica: &Replica, name: &str) -> f64 {
    replica.metric(name).await
}

async fn wait_metric(replica: &Replica, name: &str, at_least: f64) {
    poll_async(
        &format!("{name} reaches {at_least}"),
        T,
        Duration::from_millis(500),
        || async {
            let v = metric(replica, name).await;
            if v >= at_least {
                Ok(v)
            } else {
                Err(v.to_string())
            }
        },
    )
    .await;
}

/// A stop record no replica signed (made with a key of the forger's own) says a running debug
/// container was stopped and did not end: it is ignored and counted, opens no gate (the
/// container is still attached to), shows nowhere, and a real stop ends the container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_stop_record_poddebug_did_not_sign_is_ignored() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("forgestop");
    let replica = Replica::start(&[]).await;
    let dc = sb
        .create_running("dbg", &targeted(BUSYBOX, &["sh", "-c", "sleep 3600"]))
        .await;
    let ec = dc["status"]["ephemeralContainerName"]
        .as_str()
        .expect("its container")
        .to_owned();
    let pod = sb.pod().await;
    let uid = pod["metadata"]["uid"].as_str().expect("a uid").to_owned();
    let record = json!({
        "namespace": sb.ns, "pod": "web", "podUid": uid, "name": "dbg", "container": ec,
        "origin": "Delete", "requestedBy": "mallory", "requestedAt": "2026-01-01T00:00:00Z",
        "gracePeriodSeconds": 1, "unstoppableSince": "2026-01-01T00:01:00Z", "message": "forged",
    })
    .to_string();
    let key = poddebug_storage::record_key::RecordKey::generate();
    let mac = key.sign(
        poddebug_storage::record_key::Purpose::Stop,
        record.as_bytes(),
    );
    let name = poddebug_storage::stop_lease_name(&uid, &ec);
    let before = metric(&replica, "poddebug_stop_records_rejected_total").await;
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": SERVER_NS,
            "labels": {"poddebug.dev/stop-record": "v1"},
            "annotations": {"poddebug.dev/stop-record": record,
                            "poddebug.dev/stop-record-mac": mac}},
        "spec": {}
    });
    let mut forged = Forged(Vec::new());
    forged.create(&lease);
    wait_metric(
        &replica,
        "poddebug_stop_records_rejected_total",
        before + 1.0,
    )
    .await;
    // It opens no gate and shows nowhere.
    let mut c = attach(
        &sb.api,
        &sb.path("attach?container=dbg&stdout=true&stdin=true&tty=true"),
    )
    .await
    .unwrap_or_else(|(code, st)| panic!("attach refused under a forged record: {code} {st}"));
    c.close().await.expect("close");
    let (code, got) = sb.get("dbg").await;
    assert_eq!(code, StatusCode::OK);
    assert!(got["status"]["stopRequested"].is_null(), "{got}");
    assert!(got["status"]["conditions"].is_null(), "{got}");
    // A real stop ends the container.
    let (code, st) = sb.stop("dbg", 1).await;
    assert!(
        code == StatusCode::OK || code == StatusCode::ACCEPTED,
        "{code} {}",
        message(&st)
    );
    sb.wait_phase("dbg", "Terminated", T).await;
}

/// A termination request written into a session's Lease without the record key's MAC (by
/// someone who may patch Leases there) ends nothing: the session goes on, the forgery is
/// counted; a real `DELETE` of the session ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_termination_poddebug_did_not_sign_ends_nothing() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("forgeterm");
    let replica = Replica::start(&[]).await;
    sb.create_running(
        "dbg",
        &json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true},
                "targetContainerName": "app"}),
    )
    .await;
    let mut c = attach(
        &replica.admin(),
        &sb.path("attach?container=dbg&stdin=true&stdout=true&tty=true"),
    )
    .await
    .unwrap_or_else(|(code, st)| panic!("attach: {code} {st}"));
    let sessions_path = format!("{GV}/namespaces/{}/debugsessions", sb.ns);
    let id = poll_async(
        "the session is listed",
        T,
        Duration::from_millis(300),
        || async {
            let (_, list) = sb.api.get_json(&sessions_path).await;
            list["items"][0]["metadata"]["name"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| list.to_string())
        },
    )
    .await;
    let before = metric(
        &replica,
        "poddebug_untrusted_records_total{kind=\"termination\"}",
    )
    .await;
    let forged = json!({"by": "mallory", "at": "2026-01-01T00:00:00Z"}).to_string();
    ok(
        &[
            "annotate",
            "lease",
            "-n",
            SERVER_NS,
            &id,
            &format!("poddebug.dev/terminate={forged}"),
            "poddebug.dev/terminate-mac=bm90LWEtbWFj",
        ],
        None,
    );
    wait_metric(
        &replica,
        "poddebug_untrusted_records_total{kind=\"termination\"}",
        before + 1.0,
    )
    .await;
    c.stdin(b"echo still-$((40+2))\r").await.expect("type");
    let out = c
        .read_until(T, |t| t.stdout_text().contains("still-42") || t.ended)
        .await
        .stdout_text();
    assert!(
        out.contains("still-42"),
        "the forged termination ended it: {out:?}"
    );
    // A real termination does.
    let (code, st) = sb.api.delete(&sb.path(&format!("sessions/{id}"))).await;
    assert!(code.is_success(), "{code} {st}");
    let t = c.read_until(T, |t| t.error_done || t.ended).await;
    assert!(
        t.status()
            .is_some_and(|s| message(&s).contains("session terminated by")),
        "{t:?}"
    );
}

/// A debug request's record approved by someone who may write Leases in the server's
/// namespace (not by a review) is no approval: the edited record is ignored (the request is no
/// longer served), a create under it is 403, and the forgery is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn an_approval_written_into_the_record_grants_nothing() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("forgereq");
    let (code, p) = sb
        .api
        .get_json(&format!("{GV}/debugprofiles/sysadmin"))
        .await;
    assert!(
        code == StatusCode::OK && p["approvalsRequired"] == 1,
        "the server under test must run with --approval-profiles=sysadmin:1: {p}"
    );
    let replica = Replica::start(&["--approval-profiles=sysadmin:1,netadmin:1"]).await;
    let requester = format!("forge-req-{}", std::process::id());
    sb.bind("poddebug:debugger", &requester);
    let alice = as_user(&sb.api, &requester);
    let name = "forged-approval";
    let container = json!({"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true});
    let request = json!({"apiVersion": "poddebug.dev/v1alpha1", "kind": "DebugRequest",
        "metadata": {"name": name},
        "spec": {"pod": "web", "profile": "sysadmin", "reason": "INC-9: forged",
                 "targetContainerName": "app", "container": container}});
    let requests = format!("{GV}/namespaces/{}/debugrequests", sb.ns);
    poll_async(
        "the request is filed",
        T,
        Duration::from_secs(1),
        || async {
            match alice.post_json(&requests, &request).await {
                (StatusCode::CREATED, r) => Ok(r),
                (code, r) => Err(format!("{code} {r}")),
            }
        },
    )
    .await;
    let leases = ok_json(&[
        "get",
        "leases",
        "-n",
        SERVER_NS,
        "-l",
        "poddebug.dev/debug-request",
        "-o",
        "json",
    ]);
    let lease: Value = leases["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| {
            l["metadata"]["annotations"]["poddebug.dev/debug-request"]
                .as_str()
                .is_some_and(|t| t.contains(&sb.ns) && t.contains(name))
        })
        .cloned()
        .unwrap_or_else(|| panic!("the request's Lease: {leases}"));
    let lease_name = lease["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned();
    let text = lease["metadata"]["annotations"]["poddebug.dev/debug-request"]
        .as_str()
        .expect("the record")
        .replace(
            "\"phase\":\"Pending\"",
            "\"phase\":\"Approved\",\"expiresAt\":\"2099-01-01T00:00:00Z\"",
        );
    let before = metric(
        &replica,
        "poddebug_apiserver_debug_request_records_ignored_total{reason=\"forged\"}",
    )
    .await;
    let patch = json!({"metadata": {"annotations": {"poddebug.dev/debug-request": text}}});
    ok(
        &[
            "patch",
            "lease",
            "-n",
            SERVER_NS,
            &lease_name,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
        None,
    );
    wait_metric(
        &replica,
        "poddebug_apiserver_debug_request_records_ignored_total{reason=\"forged\"}",
        before + 1.0,
    )
    .await;
    poll_async(
        "the forged record is ignored",
        T,
        Duration::from_millis(500),
        || async {
            match alice.get_json(&format!("{requests}/{name}")).await {
                (StatusCode::NOT_FOUND, _) => Ok(()),
                (code, r) => Err(format!("{code} {r}")),
            }
        },
    )
    .await;
    let body = json!({"profile": "sysadmin", "debugRequest": name, "targetContainerName": "app",
        "container": container});
    let (code, st) = sb.create_as(&alice, "dbg", "", &body).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("there is no such debug request"),
        "{st}"
    );
    // The record poddebug cannot trust is left for its owner to remove.
    let _ = crate::support::kubectl(&["delete", "lease", "-n", SERVER_NS, &lease_name], None);
}

/// A session that cannot be recorded is never started: a replica whose recording store stopped
/// taking writes answers an attach 503, and nothing reaches the container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_session_that_cannot_be_recorded_is_refused() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("forgerec");
    let dir = std::env::temp_dir().join(format!("pdlive-unrecordable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the recording directory");
    let replica = Replica::start(&[&format!("--recording-dir={}", dir.display())]).await;
    sb.create_running(
        "dbg",
        &json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true},
                "targetContainerName": "app"}),
    )
    .await;
    // The store stops taking writes: its directory is now a file.
    std::fs::remove_dir_all(&dir).expect("remove the directory");
    std::fs::write(&dir, b"not a directory").expect("a file in its place");
    let path = sb.path("attach?container=dbg&stdin=true&stdout=true&tty=true");
    match attach(&replica.admin(), &path).await {
        Ok(_) => panic!("a session that cannot be recorded was started"),
        Err((code, st)) => {
            assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{st}");
            assert!(
                message(&st).contains("session recording is unavailable"),
                "{st}"
            );
        }
    }
    let _ = std::fs::remove_file(&dir);
}
