//! Just-in-time access on the real cluster, through kube-apiserver's aggregator (the server
//! under test runs with `--approval-profiles=sysadmin:1,netadmin:1`, as CI runs it) and a
//! second replica of this checkout's server next to it: a user without `use` on sysadmin asks
//! for it with a reason, cannot approve it herself, someone else approves, she gets exactly what
//! was approved (and nothing else) for the window, with the reason in the Event, her session
//! and its recording; her session ends when the window does. Then, across replicas: approved
//! through one, made through the other, revoked mid-session, a replica restarted between
//! approval and use, a denial, `--require-reason`, and the notification webhook.
//!
//! Users are named for this module (`jit-…`): profile grants are cluster-wide, and other
//! modules grant `alice` theirs.

use std::time::Duration;

use http::StatusCode;
use poddebug_tests::TestClient;
use poddebug_tests::webhook::WebhookReceiver;
use serde_json::{Value, json};

use crate::sessions::{Replica, attach};
use crate::support::{BUSYBOX, GV, Sandbox, as_user, enabled, kubectl, message, ok, poll_async};

const T: Duration = Duration::from_secs(30);
/// After a RoleBinding, the authorization caches (kube-apiserver's webhook, the server's) may
/// answer from before it for a while: retry until it shows.
const RBAC_SETTLE: Duration = Duration::from_secs(40);
/// The window of the request that is seen to end: long enough for the steps before (a create
/// that waits for the container, an attach) on a loaded CI machine.
const WINDOW: &str = "45s";

struct People {
    alice: TestClient,
    bob: TestClient,
    alice_name: String,
    bob_name: String,
}

/// `jit-alice-TAG` may debug in the sandbox and file requests; `jit-bob-TAG` approves them.
/// Neither holds `use` on sysadmin.
fn people(sb: &Sandbox, tag: &str) -> People {
    let alice_name = format!("jit-alice-{tag}-{}", std::process::id());
    let bob_name = format!("jit-bob-{tag}-{}", std::process::id());
    sb.bind("poddebug:debugger", &alice_name);
    sb.bind("poddebug:request-approver", &bob_name);
    People {
        alice: as_user(&sb.api, &alice_name),
        bob: as_user(&sb.api, &bob_name),
        alice_name,
        bob_name,
    }
}

fn requests(sb: &Sandbox) -> String {
    format!("{GV}/namespaces/{}/debugrequests", sb.ns)
}

fn request_body(name: &str, duration: &str) -> Value {
    json!({
        "apiVersion": "poddebug.dev/v1alpha1", "kind": "DebugRequest",
        "metadata": {"name": name},
        "spec": {"pod": "web", "profile": "sysadmin", "reason": "INC-7: the disk is full",
                 "ticket": "INC-7", "duration": duration, "targetContainerName": "app",
                 "container": {"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true}},
    })
}

fn shell_under(request: &str) -> Value {
    json!({"profile": "sysadmin", "debugRequest": request, "targetContainerName": "app",
           "container": {"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true}})
}

/// The server under test takes requests for sysadmin, or the suite says how to run it.
async fn require_approval_profiles(api: &TestClient) {
    let (code, p) = api.get_json(&format!("{GV}/debugprofiles/sysadmin")).await;
    assert_eq!(code, StatusCode::OK, "{p}");
    assert_eq!(
        p["approvalsRequired"], 1,
        "the server under test must run with --approval-profiles=sysadmin:1 (as .ci/live runs it): {p}"
    );
}

/// POST as `client`, retried while RBAC settles, until the answer is `want`.
async fn post_until(client: &TestClient, path: &str, body: &Value, want: StatusCode) -> Value {
    poll_async(
        &format!("POST {path} answers {want}"),
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match client.post_json(path, body).await {
                (code, v) if code == want => Ok(v),
                (code, v) => Err(format!("{code} {v}")),
            }
        },
    )
    .await
}

async fn review(
    client: &TestClient,
    sb: &Sandbox,
    name: &str,
    decision: &str,
) -> (StatusCode, Value) {
    client
        .post_json(
            &format!("{}/{name}/approval", requests(sb)),
            &json!({"decision": decision, "comment": format!("{decision}d in the live suite")}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_request_grants_what_it_names_for_its_window_through_the_aggregator() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("jit");
    require_approval_profiles(&sb.api).await;
    let p = people(&sb, "agg");
    // A second pod, to ask for what was not approved.
    ok(
        &[
            "run",
            "db",
            "-n",
            &sb.ns,
            "--image",
            BUSYBOX,
            "--restart=Never",
            "--",
            "sleep",
            "3600",
        ],
        None,
    );

    // Without use on sysadmin: refused, and told a request can be made.
    let plain = json!({"profile": "sysadmin", "targetContainerName": "app",
                       "container": {"image": BUSYBOX, "command": ["sh"]}});
    let st = post_until(
        &p.alice,
        &sb.path("debug/dbg"),
        &plain,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert!(
        message(&st).contains("a DebugRequest for the sysadmin profile can be made"),
        "{st}"
    );

    // She files a request with a reason; she cannot approve it; bob does.
    let r = post_until(
        &p.alice,
        &requests(&sb),
        &request_body("web-sysadmin", WINDOW),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(r["spec"]["requester"], p.alice_name.as_str());
    assert_eq!(r["status"]["phase"], "Pending");
    let (code, st) = review(&p.alice, &sb, "web-sysadmin", "Approve").await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    let r = post_until(
        &p.bob,
        &format!("{}/web-sysadmin/approval", requests(&sb)),
        &json!({"decision": "Approve", "comment": "go ahead"}),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(r["status"]["phase"], "Approved", "{r}");
    assert_eq!(r["status"]["reviews"][0]["user"], p.bob_name.as_str());
    // kubectl shows it, as a Table.
    let table = ok(&["get", "debugrequests", "-n", &sb.ns], None);
    assert!(
        table.contains("web-sysadmin") && table.contains("Approved") && table.contains("INC-7"),
        "{table}"
    );

    // A different image or another pod under the same request is refused, naming why.
    let mut other = shell_under("web-sysadmin");
    other["container"]["image"] = json!("docker.io/library/busybox:1.36");
    let (code, st) = sb.create_as(&p.alice, "dbg", "", &other).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("image \"docker.io/library/busybox:1.36\", not \"busybox:1.36\""),
        "{st}"
    );
    // The approved container with what the approver never saw: an environment of its own (a
    // PATH), a mount of the pod's volume over the shell's directory, another working directory.
    for (field, value) in [
        ("env", json!([{"name": "PATH", "value": "/data"}])),
        (
            "volumeMounts",
            json!([{"name": "data", "mountPath": "/bin"}]),
        ),
        ("workingDir", json!("/tmp")),
    ] {
        let mut more = shell_under("web-sysadmin");
        more["container"][field] = value;
        let (code, st) = sb.create_as(&p.alice, "dbg", "", &more).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{field}: {st}");
        assert!(
            message(&st).contains(&format!(
                "it grants only what it names, and this asks for {field} "
            )),
            "{field}: {st}"
        );
    }
    // (`kubectl run` names the pod's container after it.)
    let mut in_db = shell_under("web-sysadmin");
    in_db["targetContainerName"] = json!("db");
    let (code, st) = p
        .alice
        .post_json(
            &format!("{GV}/namespaces/{}/pods/db/debug/dbg", sb.ns),
            &in_db,
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("pod \"db\", not \"web\""), "{st}");

    // What it names is made, within the window, carrying the reason.
    let (code, dc) = sb
        .create_as(
            &p.alice,
            "dbg",
            "?wait=true&timeoutSeconds=20",
            &shell_under("web-sysadmin"),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    assert_eq!(dc["status"]["phase"], "Running", "{dc}");
    assert_eq!(dc["reason"], "INC-7: the disk is full");
    assert_eq!(dc["debugRequest"], "web-sysadmin");
    let events = poll_async("the Event", T, Duration::from_millis(500), || async {
        let out = ok(&["get", "events", "-n", &sb.ns, "-o", "json"], None);
        let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        v["items"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|e| e["reason"] == "DebugContainerCreated")
                    .cloned()
            })
            .ok_or(out)
    })
    .await;
    assert!(
        events["message"]
            .as_str()
            .unwrap_or_default()
            .contains("reason \"INC-7: the disk is full\", ticket \"INC-7\""),
        "{events}"
    );

    // Her session carries it too; it ends when the window does.
    let path = sb.path("attach?container=dbg&stdin=true&stdout=true&tty=true");
    let mut c = attach(&p.alice, &path)
        .await
        .expect("attached under the grant");
    let session = poll_async("her session", T, Duration::from_millis(500), || async {
        let (_, list) = sb.api.get_json(&sb.path("sessions")).await;
        list["items"].get(0).cloned().ok_or(list.to_string())
    })
    .await;
    assert_eq!(
        session["spec"]["justification"]["reason"],
        "INC-7: the disk is full"
    );
    assert_eq!(
        session["spec"]["justification"]["debugRequest"],
        "web-sysadmin"
    );
    let t = c.finish(Duration::from_secs(90)).await.clone();
    let st = t
        .status()
        .unwrap_or_else(|| panic!("a Status when the window ended: {t:?}"));
    assert!(
        message(&st).starts_with("session ended: debug request web-sysadmin expired at "),
        "{st}"
    );
    // The recording of it says so, and carries the reason (when the server records).
    let (code, recs) = sb.api.get_json(&sb.path("recordings")).await;
    if code == StatusCode::OK {
        let item = &recs["items"][0];
        assert_eq!(
            item["spec"]["justification"]["reason"], "INC-7: the disk is full",
            "{recs}"
        );
    }
    // After the window she is refused again, and the request shows Expired.
    let (code, st) = sb
        .create_as(&p.alice, "dbg2", "", &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("it expired at"), "{st}");
    // Attaching is refused: 409 while her container, whose time limit is the window's end,
    // waits for the expiry's next round to stop it (as any container past its time limit),
    // 403 once it did (the request no longer grants the profile).
    let Err((code, st)) = attach(&p.alice, &path).await else {
        panic!("attached after the window")
    };
    assert!(
        (code == StatusCode::CONFLICT && message(&st).contains("time limit"))
            || (code == StatusCode::FORBIDDEN && message(&st).contains("expired")),
        "{code} {st}"
    );
    let r = poll_async("Expired", T, Duration::from_millis(500), || async {
        let (_, r) = p
            .alice
            .get_json(&format!("{}/web-sysadmin", requests(&sb)))
            .await;
        if r["status"]["phase"] == "Expired" {
            Ok(r)
        } else {
            Err(r.to_string())
        }
    })
    .await;
    assert_eq!(r["status"]["made"][0]["name"], "dbg");
    let _ = kubectl(&["delete", "debugrequests", "--all", "-n", &sb.ns], None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn replicas_share_requests_revocation_restart_denial_reasons_and_the_webhook() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("jitrep");
    require_approval_profiles(&sb.api).await;
    let p = people(&sb, "rep");
    let hook = WebhookReceiver::start(0).await;
    let hook_flag = format!("--notify-webhook={}", hook.url());
    let one = Replica::start(&[
        "--approval-profiles=sysadmin:1,netadmin:1",
        "--require-reason",
        &hook_flag,
    ])
    .await;
    let (alice1, bob1) = (one.user(&p.alice_name), one.user(&p.bob_name));

    // --require-reason: a create without one is 422 naming the field.
    let no_reason = json!({"targetContainerName": "app", "container": {"image": BUSYBOX}});
    let st = post_until(
        &alice1,
        &sb.path("debug/plain"),
        &no_reason,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(st["details"]["causes"][0]["field"], "reason", "{st}");
    assert!(message(&st).contains("reason: Required value"), "{st}");

    // Filed and approved through the replica (it notifies), made and attached to through the
    // aggregator's server.
    let (code, r) = alice1
        .post_json(&requests(&sb), &request_body("revoked", "10m"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (code, r) = review(&bob1, &sb, "revoked", "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let dc = poll_async(
        "made through the other replica",
        T,
        Duration::from_millis(500),
        || async {
            match sb
                .create_as(
                    &p.alice,
                    "dbg",
                    "?wait=true&timeoutSeconds=20",
                    &shell_under("revoked"),
                )
                .await
            {
                (StatusCode::CREATED, dc) => Ok(dc),
                (code, v) => Err(format!("{code} {v}")),
            }
        },
    )
    .await;
    assert_eq!(dc["status"]["approvers"], json!([p.bob_name]));
    let path = sb.path("attach?container=dbg&stdin=true&stdout=true&tty=true");
    let mut c = attach(&p.alice, &path).await.expect("attached");
    // Revoked through the replica, mid-session: the stream the other server relays ends.
    let (code, r) = review(&bob1, &sb, "revoked", "Revoke").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let t = c.finish(T).await.clone();
    let st = t.status().unwrap_or_else(|| panic!("a Status: {t:?}"));
    assert_eq!(
        message(&st),
        format!(
            "session ended: debug request revoked was revoked by {}",
            p.bob_name
        )
    );
    assert_eq!(
        attach(&p.alice, &path).await.err().map(|e| e.0),
        Some(StatusCode::FORBIDDEN)
    );

    // The webhook saw each of those once, from the replica that acted.
    let events = hook
        .wait_for(T, |got| got.iter().any(|e| e["event"] == "revoked"))
        .await
        .unwrap_or_else(|got| panic!("no revocation: {got:?}"));
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["created", "approved", "revoked"], "{events:?}");
    assert!(
        events[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("requests sysadmin debug container in pod"),
        "{events:?}"
    );

    // Approved, then the replica restarts before it is used: the new one grants it.
    let (code, _) = p
        .alice
        .post_json(&requests(&sb), &request_body("restart", "10m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = review(&p.bob, &sb, "restart", "Approve").await;
    assert_eq!(code, StatusCode::CREATED);
    drop(one);
    let two = Replica::start(&["--approval-profiles=sysadmin:1,netadmin:1"]).await;
    let alice2 = two.user(&p.alice_name);
    let body = shell_under("restart");
    let dc = poll_async(
        "made through the restarted replica",
        T,
        Duration::from_millis(500),
        || async {
            match alice2.post_json(&sb.path("debug/after"), &body).await {
                (StatusCode::CREATED, dc) => Ok(dc),
                (code, v) => Err(format!("{code} {v}")),
            }
        },
    )
    .await;
    assert_eq!(dc["debugRequest"], "restart");

    // A denial grants nothing.
    let (code, _) = p
        .alice
        .post_json(&requests(&sb), &request_body("denied", "10m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, r) = review(&two.user(&p.bob_name), &sb, "denied", "Deny").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["status"]["phase"], "Denied");
    let (code, st) = sb
        .create_as(&p.alice, "denied", "", &shell_under("denied"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains(&format!("it was denied by {}", p.bob_name)),
        "{st}"
    );
    // Their records are the server's, not the namespace's: withdrawn here rather than left
    // for the server's clean-up a day after they ended.
    let _ = kubectl(&["delete", "debugrequests", "--all", "-n", &sb.ns], None);
}

/// The cluster's own controllers are not blocked: a namespace holding a debug request (someone
/// else's: its requester is an ordinary user), a live session (and so, with recording on, its
/// recording), a debug container and a copy is deleted by the namespace controller — which
/// deletes the request with `deletecollection` (or one by one), never as its requester or an
/// approver — and is gone; the session ends; the request's deletion is recorded (the notification
/// webhook of the server under test is not ours, so the audit line is what the server logs); a
/// recording, being evidence, outlives its namespace in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_namespace_holding_every_kind_of_poddebugs_is_deleted() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("nsdelete");
    require_approval_profiles(&sb.api).await;
    let p = people(&sb, "nsdel");
    // A pending request of alice's.
    post_until(
        &p.alice,
        &requests(&sb),
        &request_body("left-behind", "10m"),
        StatusCode::CREATED,
    )
    .await;
    // A debug container with a live session, and a copy.
    let dc = sb
        .create_running(
            "dbg",
            &json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true,
                    "tty": true}, "targetContainerName": "app"}),
        )
        .await;
    assert_eq!(dc["status"]["phase"], "Running");
    let mut session = attach(
        &sb.api,
        &sb.path("attach?container=dbg&stdin=true&stdout=true&tty=true"),
    )
    .await
    .unwrap_or_else(|(code, st)| panic!("attach: {code} {st}"));
    let (code, copy) = sb
        .api
        .post_json(
            &sb.path("copy"),
            &json!({"metadata": {"name": "web-copy"}, "container": {"image": BUSYBOX}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{copy}");
    let (code, sessions) = sb
        .api
        .get_json(&format!("{GV}/namespaces/{}/debugsessions", sb.ns))
        .await;
    assert_eq!(code, StatusCode::OK, "{sessions}");
    assert!(
        !sessions["items"].as_array().is_none_or(Vec::is_empty),
        "{sessions}"
    );

    // With recording on, the session's recording is listed in the namespace.
    let recordings = |path: String| {
        let api = sb.api.clone();
        let ns = sb.ns.clone();
        async move {
            let (code, list) = api.get_json(&path).await;
            assert_eq!(code, StatusCode::OK, "{list}");
            list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["metadata"]["namespace"] == ns.as_str())
                .count()
        }
    };
    let recorded = recordings(format!("{GV}/namespaces/{}/debugrecordings", sb.ns)).await;

    ok(&["delete", "namespace", &sb.ns, "--wait=false"], None);
    poll_async(
        "the namespace is gone",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async {
            let out = kubectl(&["get", "namespace", &sb.ns, "-o", "json"], None);
            if out.status.success() {
                Err(String::from_utf8_lossy(&out.stdout).into_owned())
            } else {
                Ok(())
            }
        },
    )
    .await;
    // The session ended with its pod.
    let t = session.read_until(T, |t| t.ended).await;
    assert!(t.ended, "{t:?}");
    // The request went with its namespace.
    let (code, all) = sb.api.get_json(&format!("{GV}/debugrequests")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert!(
        all["items"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|i| i["metadata"]["namespace"] != sb.ns.as_str()),
        "{all}"
    );
    // Evidence outlives its namespace.
    if recorded > 0 {
        assert_eq!(
            recordings(format!("{GV}/debugrecordings")).await,
            recorded,
            "the namespace's recordings are kept"
        );
    } else {
        eprintln!("the server under test records nothing: the recording's part is skipped");
    }
}
