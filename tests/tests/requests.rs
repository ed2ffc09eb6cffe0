//! Just-in-time access end to end, against the real binary and the fake kube-apiserver (whose
//! Leases the replicas share): a user without `use` on a profile asks for it with a reason,
//! someone else approves, what was approved (and nothing else) is made within the window and
//! carries the reason; denial, revocation and expiry end what the grant opened; forged records
//! are ignored; two replicas and a restart; `--require-reason`; the notification webhook.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::ChannelClient;
use poddebug_tests::webhook::WebhookReceiver;
use poddebug_tests::{FakeKube, PodDebugServer, TestClient, TestPki};
use serde_json::{Value, json};

const NS: &str = "shop";
const POD: &str = "web";
const T: Duration = Duration::from_secs(10);
const SERVER_NS: &str = "poddebug-system";
const GV: &str = "/apis/poddebug.dev/v1alpha1";
const APPROVAL: &str = "--approval-profiles=sysadmin:1,netadmin:2";

type Io = TokioIo<Upgraded>;

/// A fake with pods `web` and `db`, where alice holds everything but `use` on the gated
/// profiles and `approve`; bob and carol may approve.
async fn fake() -> FakeKube {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.set_start_delay(Duration::from_millis(10));
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    fake.add_simple_pod(NS, "db");
    fake.set_policy(|a| {
        let gated =
            a.is("use", "debugprofiles") && matches!(a.name.as_str(), "sysadmin" | "netadmin");
        !(a.user == "alice" && (gated || a.is("approve", "debugrequests")))
            && !(a.user == "mallory" && a.is("approve", "debugrequests"))
            // As the personas: `delete` on debugrequests (to withdraw one's own), never
            // `deletecollection` (the namespace controller's and administrators').
            && !(a.user == "mallory" && a.is("deletecollection", "debugrequests"))
            // The cluster's controllers approve nothing.
            && !(a.user.starts_with("system:serviceaccount:kube-system:")
                && a.is("approve", "debugrequests"))
            && !(a.user == "mallory" && gated)
    });
    fake
}

async fn server(fake: &FakeKube, extra: &[&str]) -> PodDebugServer {
    let pki = fake.pki().clone();
    let mut args = vec!["--session-lease-duration=3s", APPROVAL];
    args.extend_from_slice(extra);
    PodDebugServer::start(fake, &pki, &args).await
}

fn user(s: &PodDebugServer, name: &str) -> TestClient {
    s.front_proxy_client(name, &["system:authenticated"])
}

fn requests(ns: &str) -> String {
    format!("{GV}/namespaces/{ns}/debugrequests")
}

fn request_path(name: &str) -> String {
    format!("{}/{name}", requests(NS))
}

fn debug(pod: &str, name: &str) -> String {
    format!("{GV}/namespaces/{NS}/pods/{pod}/debug/{name}")
}

/// The request alice files for a sysadmin shell in `web`.
fn sysadmin_request(name: &str, duration: &str) -> Value {
    json!({
        "apiVersion": "poddebug.dev/v1alpha1", "kind": "DebugRequest",
        "metadata": {"name": name},
        "spec": {"pod": POD, "profile": "sysadmin", "reason": "INC-7: the disk is full",
                 "ticket": "INC-7", "duration": duration, "targetContainerName": "app",
                 "container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true,
                               "tty": true}},
    })
}

/// The debug container the request names, made under it.
fn shell_under(request: &str) -> Value {
    json!({"profile": "sysadmin", "debugRequest": request, "targetContainerName": "app",
           "container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}})
}

async fn review(client: &TestClient, name: &str, decision: &str) -> (StatusCode, Value) {
    client
        .post_json(
            &format!("{}/approval", request_path(name)),
            &json!({"decision": decision, "comment": format!("{decision} for INC-7")}),
        )
        .await
}

fn message(v: &Value) -> String {
    v["message"].as_str().unwrap_or_default().to_owned()
}

async fn attach(
    client: &TestClient,
    container: &str,
) -> Result<ChannelClient<Io>, (StatusCode, String)> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let path = format!(
        "{GV}/namespaces/{NS}/pods/{POD}/attach?container={container}&stdin=true&stdout=true&tty=true"
    );
    let resp = client
        .upgrade(Method::GET, &path, &headers)
        .await
        .expect("upgrade answered");
    if resp.status != StatusCode::SWITCHING_PROTOCOLS {
        return Err((
            resp.status,
            String::from_utf8_lossy(&resp.body).into_owned(),
        ));
    }
    Ok(ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await)
}

/// The Status a stream ended with.
async fn ended_with(c: &mut ChannelClient<Io>) -> Value {
    let t = c.finish(T).await.clone();
    t.status()
        .unwrap_or_else(|| panic!("a Status on the error channel: {t:?}"))
}

/// Wait (bounded) until `client` reads request `name` in `phase`.
async fn wait_phase(client: &TestClient, name: &str, phase: &str) -> Value {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let (code, r) = client.get_json(&request_path(name)).await;
        if code == StatusCode::OK && r["status"]["phase"] == phase {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never {phase}: {code} {r}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn env_of(fake: &FakeKube, pod: &str, ec: &str) -> Vec<(String, String)> {
    let p = fake.pod_json(NS, pod).expect("pod");
    p["spec"]["ephemeralContainers"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == ec))
        .and_then(|c| c["env"].as_array())
        .map(|env| {
            env.iter()
                .map(|e| {
                    (
                        e["name"].as_str().unwrap_or_default().to_owned(),
                        e["value"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_approved_request_grants_exactly_what_it_names_with_its_reason() {
    let fake = fake().await;
    let dir = poddebug_tests::TempDir::new("requests-rec");
    let flag = format!("--recording-dir={}", dir.path().display());
    let s = server(&fake, &[&flag]).await;
    let (alice, bob) = (user(&s, "alice"), user(&s, "bob"));

    // Without `use` on sysadmin: refused, told a request can be made.
    let (code, st) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("none"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    let (code, st) = alice
        .post_json(
            &debug(POD, "dbg"),
            &json!({"profile": "sysadmin", "targetContainerName": "app",
                    "container": {"image": "busybox:1.36", "command": ["sh"]}}),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("cannot use resource \"debugprofiles\"")
            && message(&st).contains("a DebugRequest for the sysadmin profile can be made"),
        "{st}"
    );

    // She files a request; it is hers, pending, needing one approval.
    let (code, r) = alice
        .post_json(&requests(NS), &sysadmin_request("web-sysadmin", "30m"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["kind"], "DebugRequest");
    assert_eq!(r["spec"]["requester"], "alice");
    assert_eq!(r["status"]["phase"], "Pending");
    assert_eq!(r["status"]["approvalsRequired"], 1);
    assert!(r["metadata"]["uid"].is_string() && r["metadata"]["resourceVersion"].is_string());
    // Its record is a Lease in the server's namespace, signed.
    let leases = fake.leases(SERVER_NS);
    let lease = leases
        .iter()
        .find(|l| l["metadata"]["labels"]["poddebug.dev/debug-request"] == "v1")
        .expect("the request's Lease");
    assert!(
        lease["metadata"]["annotations"]["poddebug.dev/debug-request-mac"]
            .as_str()
            .is_some_and(|m| m.starts_with("v1.")),
        "{lease}"
    );

    // Pending grants nothing; its requester cannot review it.
    let (code, st) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("it is Pending: 0 of 1 approval(s)"),
        "{st}"
    );
    let (code, st) = review(&alice, "web-sysadmin", "Approve").await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("cannot review their own debug request"),
        "{st}"
    );

    // bob approves: the window starts now.
    let (code, r) = review(&bob, "web-sysadmin", "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["status"]["phase"], "Approved");
    assert_eq!(r["status"]["reviews"][0]["user"], "bob");
    assert_eq!(r["status"]["reviews"][0]["decision"], "Approve");
    assert_eq!(r["status"]["reviews"][0]["comment"], "Approve for INC-7");
    let approved: jiff::Timestamp = r["status"]["approvedAt"].as_str().unwrap().parse().unwrap();
    let expires: jiff::Timestamp = r["status"]["expiresAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires.as_second() - approved.as_second(), 1800);
    let (code, st) = review(&bob, "web-sysadmin", "Approve").await;
    assert_eq!(code, StatusCode::CONFLICT, "{st}");

    // Anything but what it names is refused, naming the difference.
    let mut other_image = shell_under("web-sysadmin");
    other_image["container"]["image"] = json!("busybox:1.37");
    let (code, st) = alice.post_json(&debug(POD, "dbg"), &other_image).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("image \"busybox:1.37\", not \"busybox:1.36\""),
        "{st}"
    );
    let (code, st) = alice
        .post_json(&debug("db", "dbg"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("pod \"db\", not \"web\""), "{st}");
    let (code, st) = user(&s, "mallory")
        .post_json(&debug(POD, "dbg"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("only its requester may use it"),
        "{st}"
    );
    // Every field the approver never saw: an environment (a PATH of its own), a mount (over
    // the shell's own directory), a working directory, another target, a field the server does
    // not know.
    for (field, value, diff) in [
        (
            "env",
            json!([{"name": "PATH", "value": "/data"}]),
            "env [{\"name\":\"PATH\",\"value\":\"/data\"}], not null",
        ),
        (
            "volumeMounts",
            json!([{"name": "data", "mountPath": "/bin"}]),
            "volumeMounts [{\"mountPath\":\"/bin\",\"name\":\"data\"}], not null",
        ),
        ("workingDir", json!("/tmp"), "workingDir \"/tmp\", not null"),
        (
            "futureField",
            json!(1),
            "container.futureField unknown to the server",
        ),
    ] {
        let mut more = shell_under("web-sysadmin");
        more["container"][field] = value;
        let (code, st) = alice.post_json(&debug(POD, "dbg"), &more).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{field}: {st}");
        assert!(message(&st).contains(diff), "{field}: {st}");
    }
    let mut untargeted = shell_under("web-sysadmin");
    untargeted
        .as_object_mut()
        .map(|o| o.remove("targetContainerName"));
    let (code, st) = alice.post_json(&debug(POD, "dbg"), &untargeted).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("targetContainerName none, not \"app\""),
        "{st}"
    );
    // A reason of its own is not what was approved.
    let mut reworded = shell_under("web-sysadmin");
    reworded["reason"] = json!("something else");
    let (code, st) = alice.post_json(&debug(POD, "dbg"), &reworded).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");

    // What it names is made, carrying the reason, ticket, request and approver.
    let (code, dc) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    assert_eq!(dc["debugRequest"], "web-sysadmin");
    assert_eq!(dc["reason"], "INC-7: the disk is full");
    assert_eq!(dc["ticket"], "INC-7");
    assert_eq!(dc["status"]["approvers"], json!(["bob"]));
    let deadline: jiff::Timestamp = dc["status"]["expiresAt"].as_str().unwrap().parse().unwrap();
    assert!(deadline <= expires, "its deadline is within the window");
    let env = env_of(&fake, POD, "dbg");
    for (k, v) in [
        ("PODDEBUG_REASON", "INC-7: the disk is full"),
        ("PODDEBUG_TICKET", "INC-7"),
        ("PODDEBUG_REQUEST", "web-sysadmin"),
        ("PODDEBUG_APPROVERS", "bob"),
    ] {
        assert!(
            env.contains(&(k.to_owned(), v.to_owned())),
            "{k} in {env:?}"
        );
    }
    let event = fake
        .wait_until(T, |f| {
            f.events()
                .iter()
                .any(|e| e["reason"] == "DebugContainerCreated")
        })
        .await;
    assert!(event);
    let created = fake
        .events()
        .into_iter()
        .find(|e| e["reason"] == "DebugContainerCreated")
        .expect("the Event");
    assert!(
        created["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("under debug request web-sysadmin approved by bob, reason \"INC-7: the disk is full\", ticket \"INC-7\""),
        "{created}"
    );
    let r = wait_phase(&alice, "web-sysadmin", "Approved").await;
    assert_eq!(r["status"]["made"][0]["kind"], "PodDebugContainer");
    assert_eq!(r["status"]["made"][0]["pod"], POD);
    assert_eq!(r["status"]["made"][0]["container"], "dbg");
    assert!(
        fake.wait_until(T, |f| f.container_state(NS, POD, "dbg") == Some("running"))
            .await
    );

    // Her session is the grant's: it carries the reason in its record and recording.
    let mut c = attach(&alice, "dbg")
        .await
        .expect("attached under the grant");
    let deadline = tokio::time::Instant::now() + T;
    let session = loop {
        let (_, list) = alice
            .get_json(&format!("{GV}/namespaces/{NS}/pods/{POD}/sessions"))
            .await;
        if let Some(s) = list["items"].get(0) {
            break s.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        session["spec"]["justification"],
        json!({"reason": "INC-7: the disk is full", "ticket": "INC-7",
               "debugRequest": "web-sysadmin", "approvers": ["bob"]})
    );

    // bob revokes it: her session ends at once, and new attaches and creates are refused.
    let (code, r) = review(&bob, "web-sysadmin", "Revoke").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["status"]["phase"], "Revoked");
    let st = ended_with(&mut c).await;
    assert_eq!(st["reason"], "Forbidden", "{st}");
    assert_eq!(
        st["message"],
        "session ended: debug request web-sysadmin was revoked by bob"
    );
    let Err((code, body)) = attach(&alice, "dbg").await else {
        panic!("the attach is refused once the request is revoked");
    };
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    let (code, st) = alice
        .post_json(&debug(POD, "dbg2"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("it was revoked by bob"), "{st}");

    // The recording's metadata carries the reason too, and says why the session ended.
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let (code, list) = alice
            .get_json(&format!("{GV}/namespaces/{NS}/pods/{POD}/recordings"))
            .await;
        let item = &list["items"][0];
        if code == StatusCode::OK && item["status"]["end"].is_string() {
            assert_eq!(
                item["spec"]["justification"]["reason"],
                "INC-7: the disk is full"
            );
            assert_eq!(
                item["spec"]["justification"]["debugRequest"],
                "web-sysadmin"
            );
            let id = item["metadata"]["name"].as_str().unwrap_or_default();
            let (_, _, cast) = alice
                .request(
                    Method::GET,
                    &format!("{GV}/namespaces/{NS}/pods/{POD}/recordings/{id}"),
                    &[],
                    Bytes::new(),
                )
                .await
                .expect("the recording");
            let text = String::from_utf8_lossy(&cast);
            assert!(text.contains("session ended: debug request web-sysadmin was revoked by bob"));
            let header: Value = serde_json::from_str(text.lines().next().unwrap_or("")).unwrap();
            assert_eq!(header["poddebug"]["justification"]["ticket"], "INC-7");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{code} {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_request_ends_at_the_end_of_its_window_and_a_denial_grants_nothing() {
    let fake = fake().await;
    // No expiry round during the test: the container made under the short window stays past
    // its time limit, as it is until the next round stops it.
    let s = server(
        &fake,
        &[
            "--max-request-durations=sysadmin:1h",
            "--debug-ttl-check-interval=1h",
        ],
    )
    .await;
    let (alice, bob, carol) = (user(&s, "alice"), user(&s, "bob"), user(&s, "carol"));

    // Longer than the profile allows: 422 naming the field.
    let (code, st) = alice
        .post_json(&requests(NS), &sysadmin_request("too-long", "2h"))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "spec.duration");
    // A profile the server does not take requests for.
    let mut general = sysadmin_request("general", "10m");
    general["spec"]["profile"] = json!("general");
    let (code, st) = alice.post_json(&requests(NS), &general).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(
        message(&st).contains("supported values: \"netadmin\", \"sysadmin\""),
        "{st}"
    );

    // A short window: the session it opened ends with it, and it grants nothing after.
    let (code, r) = alice
        .post_json(&requests(NS), &sysadmin_request("short", "4s"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (code, r) = review(&bob, "short", "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (code, dc) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("short"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    assert!(
        fake.wait_until(T, |f| f.container_state(NS, POD, "dbg") == Some("running"))
            .await
    );
    let mut c = attach(&alice, "dbg").await.expect("attached");
    let st = ended_with(&mut c).await;
    assert!(
        message(&st).starts_with("session ended: debug request short expired at "),
        "{st}"
    );
    let r = wait_phase(&alice, "short", "Expired").await;
    assert_eq!(r["status"]["phase"], "Expired");
    let (code, st) = alice
        .post_json(&debug(POD, "dbg2"), &shell_under("short"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("it expired at"), "{st}");
    // Its container's time limit is the window's end: attaching is refused as for any
    // container past its time limit.
    let Err(refused) = attach(&alice, "dbg").await else {
        panic!("attached after the window")
    };
    assert_eq!(refused.0, StatusCode::CONFLICT, "{}", refused.1);
    assert!(refused.1.contains("time limit"), "{}", refused.1);
    let (code, _) = review(&bob, "short", "Revoke").await;
    assert_eq!(code, StatusCode::CONFLICT);

    // Denied: nothing is granted, and nobody approves it afterwards.
    let (code, _) = alice
        .post_json(&requests(NS), &sysadmin_request("denied", "10m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, r) = review(&carol, "denied", "Deny").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["status"]["phase"], "Denied");
    let (code, st) = review(&bob, "denied", "Approve").await;
    assert_eq!(code, StatusCode::CONFLICT, "{st}");
    let (code, st) = alice
        .post_json(&debug(POD, "dbg3"), &shell_under("denied"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("it was denied by carol"), "{st}");

    // Reviewing needs `approve` on the profile: mallory holds everything else.
    let (code, _) = alice
        .post_json(&requests(NS), &sysadmin_request("mallorys-try", "10m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, st) = review(&user(&s, "mallory"), "mallorys-try", "Approve").await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("cannot approve resource \"debugrequests\"")
            && message(&st).contains("needs approve on debugrequests named sysadmin"),
        "{st}"
    );
    let sars = fake.sars();
    assert!(
        sars.iter().any(|s| s.attributes.verb == "approve"
            && s.attributes.resource == "debugrequests"
            && s.attributes.name == "sysadmin"
            && s.attributes.namespace == NS),
        "approve is asked with the profile as its name"
    );
}

#[tokio::test]
async fn two_approvals_lists_watches_tables_and_withdrawal() {
    let fake = fake().await;
    let s = server(&fake, &[]).await;
    let (alice, bob, carol) = (user(&s, "alice"), user(&s, "bob"), user(&s, "carol"));
    let mut watch = bob
        .stream(
            Method::GET,
            &format!("{GV}/debugrequests?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);

    let (code, r) = alice
        .post_json(
            &requests(NS),
            &json!({"metadata": {"generateName": "web-netadmin-"},
                    "spec": {"pod": POD, "profile": "netadmin", "reason": "packet loss"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let name = r["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(
        name.starts_with("web-netadmin-") && name.len() == 18,
        "{name}"
    );
    assert_eq!(r["spec"]["duration"], "1h0m0s", "the default duration");
    assert_eq!(r["status"]["approvalsRequired"], 2);
    let ev = watch.next_json(T).await.expect("ADDED");
    assert_eq!(ev["type"], "ADDED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["name"], name.as_str());

    let (code, r) = review(&bob, &name, "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["status"]["phase"], "Pending", "one of two approvals");
    let ev = watch.next_json(T).await.expect("MODIFIED");
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    let (code, r) = review(&carol, &name, "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    assert_eq!(r["status"]["phase"], "Approved");
    let ev = watch.next_json(T).await.expect("MODIFIED");
    assert_eq!(ev["object"]["status"]["phase"], "Approved", "{ev}");

    // Lists: by namespace, across namespaces, with selectors, as a Table.
    let (code, list) = bob
        .get_json(&format!(
            "{}?fieldSelector=status.phase=Approved,spec.requester=alice",
            requests(NS)
        ))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "DebugRequestList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let (_, none) = bob
        .get_json(&format!(
            "{GV}/debugrequests?fieldSelector=status.phase=Pending"
        ))
        .await;
    assert_eq!(none["items"], json!([]));
    let (code, st) = bob
        .get_json(&format!("{GV}/debugrequests?fieldSelector=spec.image=x"))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{st}");
    let (code, _, body) = bob
        .request(
            Method::GET,
            &requests(NS),
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            Bytes::new(),
        )
        .await
        .expect("table");
    assert_eq!(code, StatusCode::OK);
    let table: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "Requester",
            "Target",
            "Mode",
            "Profile",
            "Phase",
            "Approvers",
            "Expires",
            "Reason",
            "Age"
        ]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], name.as_str());
    assert_eq!(cells[2], "pod/web");
    assert_eq!(cells[5], "Approved");
    assert_eq!(cells[6], "bob,carol");
    assert_eq!(cells[8], "packet loss");

    // Only its requester (or an approver of its profile) withdraws it; mallory, who holds
    // `delete` (to withdraw her own) but not `deletecollection`, cannot delete it.
    let (code, st) = user(&s, "mallory").delete(&request_path(&name)).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("cannot deletecollection resource \"debugrequests\"")
            && message(&st).contains("only its requester or an approver"),
        "{st}"
    );
    let (code, gone) = alice.delete(&request_path(&name)).await;
    assert_eq!(code, StatusCode::OK, "{gone}");
    let ev = watch.next_json(T).await.expect("DELETED");
    assert_eq!(ev["type"], "DELETED", "{ev}");
    let (code, _) = alice.get_json(&request_path(&name)).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(
        fake.leases(SERVER_NS)
            .iter()
            .all(|l| l["metadata"]["labels"]["poddebug.dev/debug-request"].is_null())
    );
}

/// The cluster's own cleaners are not blocked: the namespace controller (which holds `delete`
/// and `deletecollection` on everything) deletes a namespace's requests with `deletecollection`
/// — the first thing it tries — or one by one, and an administrator deletes another user's;
/// each leaves its record (a `deleted` notification and audit record), and what the request
/// opened ends.
#[tokio::test]
async fn the_namespace_controller_and_administrators_delete_requests() {
    let fake = fake().await;
    let hook = WebhookReceiver::start(0).await;
    let s = server(&fake, &[&format!("--notify-webhook={}", hook.url())]).await;
    let alice = user(&s, "alice");
    let nsc = s.front_proxy_client(
        "system:serviceaccount:kube-system:namespace-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    );
    for n in ["one", "two", "three"] {
        let (code, r) = alice
            .post_json(&requests(NS), &sysadmin_request(n, "30m"))
            .await;
        assert_eq!(code, StatusCode::CREATED, "{r}");
    }
    // One by one, as the namespace controller falls back to when a collection cannot be
    // deleted.
    let (code, gone) = nsc.delete(&request_path("one")).await;
    assert_eq!(code, StatusCode::OK, "{gone}");
    assert_eq!(gone["metadata"]["name"], "one");
    // The collection (a label selector chooses; none here).
    let (code, _, body) = nsc
        .request(Method::DELETE, &requests(NS), &[], Bytes::new())
        .await
        .expect("deletecollection answered");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let list: Value = serde_json::from_slice(&body).expect("a list");
    assert_eq!(list["kind"], "DebugRequestList", "{list}");
    let mut names: Vec<&str> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["three", "two"]);
    let (code, left) = alice.get_json(&requests(NS)).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(left["items"], json!([]), "{left}");
    // Each left its record.
    let got = hook
        .wait_for(T, |got| {
            got.iter().filter(|e| e["event"] == "deleted").count() == 3
        })
        .await
        .unwrap_or_else(|got| panic!("three deletions: {got:?}"));
    assert!(
        got.iter()
            .filter(|e| e["event"] == "deleted")
            .all(|e| e["actor"] == "system:serviceaccount:kube-system:namespace-controller"),
        "{got:?}"
    );
    // A dry run of a collection's delete is refused, not carried out.
    let (code, _, _) = nsc
        .request(
            Method::DELETE,
            &format!("{}?dryRun=All", requests(NS)),
            &[],
            Bytes::new(),
        )
        .await
        .expect("answered");
    assert_eq!(code, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn forged_and_replayed_approvals_are_ignored() {
    let fake = fake().await;
    let s = server(&fake, &[]).await;
    let (alice, bob) = (user(&s, "alice"), user(&s, "bob"));
    let (code, _) = alice
        .post_json(&requests(NS), &sysadmin_request("forged", "30m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let lease = fake
        .leases(SERVER_NS)
        .into_iter()
        .find(|l| l["metadata"]["labels"]["poddebug.dev/debug-request"] == "v1")
        .expect("lease");
    let lease_name = lease["metadata"]["name"].as_str().unwrap().to_owned();

    // Someone with write on Leases in the server's namespace approves it in the record.
    let mut forged = lease.clone();
    let text = forged["metadata"]["annotations"]["poddebug.dev/debug-request"]
        .as_str()
        .unwrap()
        .replace(
            "\"phase\":\"Pending\"",
            "\"phase\":\"Approved\",\"expiresAt\":\"2099-01-01T00:00:00Z\"",
        );
    forged["metadata"]["annotations"]["poddebug.dev/debug-request"] = json!(text);
    fake.put_lease(forged);
    let deadline = tokio::time::Instant::now() + T;
    while alice.get_json(&request_path("forged")).await.0 != StatusCode::NOT_FOUND {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the forged record is ignored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, st) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("forged"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("there is no such debug request"),
        "{st}"
    );
    let (_, _, metrics) = user(&s, "admin")
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .expect("metrics");
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains("debug_request_records_ignored_total{reason=\"forged\"} 1"),
        "{metrics}"
    );

    // A genuine approval of another request, copied over this one's Lease, is no approval.
    let (code, _) = alice
        .post_json(&requests(NS), &sysadmin_request("genuine", "30m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = review(&bob, "genuine", "Approve").await;
    assert_eq!(code, StatusCode::CREATED);
    let genuine = fake
        .leases(SERVER_NS)
        .into_iter()
        .find(|l| {
            l["metadata"]["annotations"]["poddebug.dev/debug-request"]
                .as_str()
                .is_some_and(|t| t.contains("\"genuine\""))
        })
        .expect("genuine lease");
    let mut replayed = fake.lease(SERVER_NS, &lease_name).expect("forged lease");
    replayed["metadata"]["annotations"] = genuine["metadata"]["annotations"].clone();
    fake.put_lease(replayed);
    let admin = user(&s, "admin");
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let (_, _, m) = admin
            .request(Method::GET, "/metrics", &[], Bytes::new())
            .await
            .expect("metrics");
        if String::from_utf8_lossy(&m)
            .contains("debug_request_records_ignored_total{reason=\"forged\"} 2")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the copied approval is counted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, st) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("forged"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");

    // Revoked, then the approved version put back: ignored as a replay.
    let approved_version = fake
        .leases(SERVER_NS)
        .into_iter()
        .find(|l| {
            l["metadata"]["annotations"]["poddebug.dev/debug-request"]
                .as_str()
                .is_some_and(|t| t.contains("\"genuine\""))
        })
        .expect("approved");
    let (code, _) = review(&bob, "genuine", "Revoke").await;
    assert_eq!(code, StatusCode::CREATED);
    let name = approved_version["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut back = fake.lease(SERVER_NS, &name).expect("revoked lease");
    back["metadata"]["annotations"] = approved_version["metadata"]["annotations"].clone();
    fake.put_lease(back);
    let deadline = tokio::time::Instant::now() + T;
    while alice.get_json(&request_path("genuine")).await.0 != StatusCode::NOT_FOUND {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replayed record is ignored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, st) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("genuine"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
}

#[tokio::test]
async fn one_replica_approves_the_other_grants_and_a_restart_keeps_it() {
    let fake = fake().await;
    let one = server(&fake, &[]).await;
    let mut two = server(&fake, &[]).await;
    let (code, _) = user(&one, "alice")
        .post_json(&requests(NS), &sysadmin_request("web-sysadmin", "30m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, r) = review(&user(&one, "bob"), "web-sysadmin", "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    // Through the other replica, once it has seen the approval.
    wait_phase(&user(&two, "alice"), "web-sysadmin", "Approved").await;
    let (code, dc) = user(&two, "alice")
        .post_json(&debug(POD, "dbg"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    // A replica restarted after the approval grants it too.
    two.terminate().await;
    drop(two);
    let three = server(&fake, &[]).await;
    let (code, dc) = user(&three, "alice")
        .post_json(&debug(POD, "dbg2"), &shell_under("web-sysadmin"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    let r = wait_phase(&user(&one, "alice"), "web-sysadmin", "Approved").await;
    assert_eq!(r["status"]["made"].as_array().map(Vec::len), Some(2), "{r}");
}

#[tokio::test]
async fn a_review_written_by_another_replica_decides_before_this_one_sees_it() {
    let fake = fake().await;
    let one = server(&fake, &[]).await;
    let two = server(&fake, &[]).await;
    let (code, _) = user(&one, "alice")
        .post_json(&requests(NS), &sysadmin_request("lagging", "30m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, r) = review(&user(&one, "bob"), "lagging", "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    wait_phase(&user(&two, "alice"), "lagging", "Approved").await;
    let (code, dc) = user(&two, "alice")
        .post_json(&debug(POD, "dbg"), &shell_under("lagging"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");

    // From here on the second replica's view of the requests lags the cluster.
    fake.hold_watch_events("leases", true);
    let (code, r) = review(&user(&one, "bob"), "lagging", "Revoke").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (code, r) = user(&two, "alice").get_json(&request_path("lagging")).await;
    assert_eq!(
        (code, r["status"]["phase"].clone()),
        (StatusCode::OK, json!("Approved")),
        "the second replica's view lags: {r}"
    );
    // The revocation decides at once: no second container, no stream to the first.
    let (code, st) = user(&two, "alice")
        .post_json(&debug(POD, "dbg2"), &shell_under("lagging"))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(
        message(&st).contains("it was revoked by bob"),
        "{}",
        message(&st)
    );
    assert!(!fake_has_ec(&fake, "dbg2"));
    let refused = attach(&user(&two, "alice"), "dbg").await.err();
    assert_eq!(refused.map(|e| e.0), Some(StatusCode::FORBIDDEN));

    // An approval the second replica has not seen grants at once too.
    let (code, _) = user(&one, "alice")
        .post_json(&requests(NS), &sysadmin_request("fresh", "30m"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, r) = review(&user(&one, "bob"), "fresh", "Approve").await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (code, dc) = user(&two, "alice")
        .post_json(&debug(POD, "dbg3"), &shell_under("fresh"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    fake.hold_watch_events("leases", false);
}

fn fake_has_ec(fake: &FakeKube, name: &str) -> bool {
    fake.pod_json(NS, POD).is_some_and(|p| {
        p["spec"]["ephemeralContainers"]
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["name"] == name))
    })
}

#[tokio::test]
async fn copies_and_node_debug_containers_are_granted_too() {
    let fake = fake().await;
    fake.add_node("node-1", &[]);
    fake.add_namespace("poddebug-nodes", &[]);
    let s = server(&fake, &[]).await;
    let (alice, bob) = (user(&s, "alice"), user(&s, "bob"));
    // A copy whose debug container is sysadmin.
    let (code, r) = alice
        .post_json(
            &requests(NS),
            &json!({"metadata": {"name": "copy-req"},
                    "spec": {"pod": POD, "mode": "copy", "profile": "sysadmin", "reason": "reproduce INC-8"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let copy = json!({"metadata": {"name": "web-copy"}, "profile": "sysadmin",
                      "debugRequest": "copy-req", "container": {"image": "busybox:1.36"}});
    let path = format!("{GV}/namespaces/{NS}/pods/{POD}/copy");
    let (code, st) = alice.post_json(&path, &copy).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "pending: {st}");
    let (code, _) = review(&bob, "copy-req", "Approve").await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, made) = alice.post_json(&path, &copy).await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    assert_eq!(made["reason"], "reproduce INC-8");
    assert_eq!(made["debugRequest"], "copy-req");
    let pod = fake.pod_json(NS, "web-copy").expect("the copy");
    assert_eq!(
        pod["metadata"]["annotations"]["poddebug.dev/reason"],
        "reproduce INC-8"
    );
    assert_eq!(
        pod["metadata"]["annotations"]["poddebug.dev/approvers"],
        "bob"
    );

    // A node debug container: the request lives in the node-debug namespace.
    let node_ns = "poddebug-nodes";
    let (code, st) = alice
        .post_json(
            &requests(NS),
            &json!({"metadata": {"name": "node-req"},
                    "spec": {"node": "node-1", "mode": "node", "profile": "sysadmin", "reason": "kubelet logs"}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.namespace");
    let (code, r) = alice
        .post_json(
            &requests(node_ns),
            &json!({"metadata": {"name": "node-req"},
                    "spec": {"node": "node-1", "mode": "node", "profile": "sysadmin", "reason": "kubelet logs"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (code, _) = bob
        .post_json(
            &format!("{}/node-req/approval", requests(node_ns)),
            &json!({"decision": "Approve"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let body = json!({"profile": "sysadmin", "debugRequest": "node-req",
                      "container": {"image": "busybox:1.36"}});
    let (code, st) = alice
        .post_json(&format!("{GV}/nodes/node-2/debug/dbg"), &body)
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "another node: {st}");
    let (code, made) = alice
        .post_json(&format!("{GV}/nodes/node-1/debug/dbg"), &body)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    assert_eq!(made["reason"], "kubelet logs");
    assert_eq!(made["status"]["approvers"], json!(["bob"]));
}

#[tokio::test]
async fn require_reason_refuses_creates_without_one() {
    let fake = fake().await;
    fake.add_node("node-1", &[]);
    fake.add_namespace("poddebug-nodes", &[]);
    let s = server(&fake, &["--require-reason"]).await;
    let bob = user(&s, "bob");
    let (code, st) = bob
        .post_json(
            &debug(POD, "dbg"),
            &json!({"container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["details"]["kind"], "PodDebugContainer");
    assert_eq!(st["details"]["causes"][0]["field"], "reason");
    assert!(
        message(&st).starts_with(
            "PodDebugContainer.poddebug.dev \"dbg\" is invalid: reason: Required value"
        ),
        "{st}"
    );
    let (code, st) = bob
        .post_json(
            &format!("{GV}/namespaces/{NS}/pods/{POD}/copy"),
            &json!({"metadata": {"name": "c"}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "reason");
    let (code, st) = bob
        .post_json(&format!("{GV}/nodes/node-1/debug/dbg"), &json!({}))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "reason");
    // With one (and a ticket), the container carries them.
    let (code, dc) = bob
        .post_json(
            &debug(POD, "dbg"),
            &json!({"reason": "checking the cache", "ticket": "OPS-1",
                    "container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    assert_eq!(dc["reason"], "checking the cache");
    let env = env_of(&fake, POD, "dbg");
    assert!(
        env.contains(&("PODDEBUG_TICKET".to_owned(), "OPS-1".to_owned())),
        "{env:?}"
    );
    // A reason with control characters is refused.
    let (code, st) = bob
        .post_json(&debug(POD, "dbg2"), &json!({"reason": "a\u{1b}[2Jb"}))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
}

#[tokio::test]
async fn the_webhook_sees_each_event_once_whichever_replica_acts() {
    let fake = fake().await;
    // The receiver refuses its first POST: the event is sent again, once.
    let hook = WebhookReceiver::start(1).await;
    let flag = format!("--notify-webhook={}", hook.url());
    let one = server(&fake, &[&flag]).await;
    let two = server(&fake, &[&flag]).await;
    let (alice, bob) = (user(&one, "alice"), user(&two, "bob"));
    let (code, _) = alice
        .post_json(&requests(NS), &sysadmin_request("hooked", "5s"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = review(&bob, "hooked", "Approve").await;
    assert_eq!(code, StatusCode::CREATED);
    wait_phase(&alice, "hooked", "Approved").await;
    let (code, dc) = alice
        .post_json(&debug(POD, "dbg"), &shell_under("hooked"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    // The window ends; one of the two writes the expiry, and notifies it.
    hook.wait_for(Duration::from_secs(20), |got| {
        got.iter().any(|e| e["event"] == "expired")
    })
    .await
    .unwrap_or_else(|got| panic!("no expiry: {got:?}"));
    // Then alice withdraws it through the other replica. The replica that lost the expiry's
    // write (a conditional update) sent nothing for it; each event came once. Replicas send on
    // their own (a retried event may arrive after a later one of the other): in time order.
    let (code, _) = user(&two, "alice").delete(&request_path("hooked")).await;
    assert_eq!(code, StatusCode::OK);
    hook.wait_for(T, |got| got.iter().any(|e| e["event"] == "withdrawn"))
        .await
        .unwrap_or_else(|got| panic!("no withdrawal: {got:?}"));
    let mut events = hook.received();
    events.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        ["created", "approved", "used", "expired", "withdrawn"],
        "{events:?}"
    );
    assert_eq!(hook.refused(), 1);
    let created = &events[0];
    assert_eq!(
        created["text"],
        "alice requests sysadmin debug container in pod shop/web for 5s: \"INC-7: the disk is full\" (ticket INC-7). It grants a debug container in pod shop/web with the sysadmin profile: exactly the container {\"image\":\"busybox:1.36\",\"command\":[\"sh\"],\"stdin\":true,\"tty\":true}, joining container \"app\"'s namespaces. Review with `kubectl poddebug approve hooked -n shop` (or deny)."
    );
    assert_eq!(created["request"]["spec"]["requester"], "alice");
    assert_eq!(events[1]["actor"], "bob");
    assert_eq!(events[1]["comment"], "Approve for INC-7");
    assert_eq!(events[2]["made"]["name"], "dbg");
    let ids: std::collections::BTreeSet<&str> =
        events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids.len(), 5, "distinct ids");
}
