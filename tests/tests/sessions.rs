//! Live sessions end to end, against the real binary and the fake kube-apiserver (whose Leases
//! the replicas share): listing, watching and terminating through any replica, joining another
//! user's debug container as observer, peer or moderator, moderated sessions, and records left
//! by a replica that died.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::{ChannelClient, ch};
use poddebug_tests::{ContainerState, FakeKube, PodDebugServer, TestClient, TestPki};
use serde_json::{Value, json};

const NS: &str = "shop";
const POD: &str = "web";
const T: Duration = Duration::from_secs(10);
/// Where the servers keep session records (their own namespace, out of a cluster).
const SERVER_NS: &str = "poddebug-system";
const GV: &str = "/apis/poddebug.dev/v1alpha1";

type Io = TokioIo<Upgraded>;

fn pod_path(rest: &str) -> String {
    format!("{GV}/namespaces/{NS}/pods/{POD}/{rest}")
}

/// A pod with debug container `dbg` created by alice with `profile`, running.
async fn fake_with_pod(profile: &str) -> FakeKube {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_pod_json(json!({
        // Every stream attached to dbg sees its output, as with the kubelet.
        "metadata": {"name": POD, "namespace": NS,
            "annotations": {poddebug_tests::fake::ATTACH_SHARED_ANNOTATION: "true"}},
        "spec": {
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true, "tty": true,
                "targetContainerName": "app",
                "env": [{"name": "PODDEBUG_PROFILE", "value": profile},
                        {"name": "PODDEBUG_OWNER", "value": "alice"}]}],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, "dbg", ContainerState::Running));
    fake
}

async fn ws(client: &TestClient, query: &str) -> poddebug_tests::UpgradeResponse {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    client
        .upgrade(Method::GET, &pod_path(&format!("attach?{query}")), &headers)
        .await
        .expect("upgrade answered")
}

async fn open(client: &TestClient, query: &str) -> ChannelClient<Io> {
    let resp = ws(client, query).await;
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await
}

const TTY: &str = "container=dbg&stdin=true&stdout=true&tty=true";
const WATCHING: &str = "container=dbg&stdout=true&tty=true";

/// The sessions of the pod, as `client` lists them.
async fn sessions(client: &TestClient) -> Vec<Value> {
    let (code, list) = client.get_json(&pod_path("sessions")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "DebugSessionList");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// Wait (bounded) until the pod's sessions, as `client` lists them, satisfy `ok`.
async fn wait_sessions(
    client: &TestClient,
    what: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let items = sessions(client).await;
        if ok(&items) {
            return items;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: {items:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A server against `fake` with `extra` flags, and its clients for alice (owner), bob and carol.
async fn server(fake: &FakeKube, extra: &[&str]) -> PodDebugServer {
    let pki = fake.pki().clone();
    let mut args = vec!["--session-lease-duration=3s"];
    args.extend_from_slice(extra);
    PodDebugServer::start(fake, &pki, &args).await
}

fn user(s: &PodDebugServer, name: &str) -> TestClient {
    s.front_proxy_client(name, &["system:authenticated"])
}

#[tokio::test]
async fn a_session_is_listed_everywhere_as_a_lease_backed_object_and_ends_with_its_stream() {
    let fake = fake_with_pod("general").await;
    let s = server(&fake, &[]).await;
    let alice = user(&s, "alice");
    let mut c = open(&alice, TTY).await;
    let items = wait_sessions(&alice, "alice's session", |i| i.len() == 1).await;
    let obj = &items[0];
    assert_eq!(obj["kind"], "DebugSession");
    assert_eq!(obj["apiVersion"], "poddebug.dev/v1alpha1");
    assert_eq!(obj["metadata"]["namespace"], NS);
    assert!(obj["metadata"]["creationTimestamp"].is_string(), "{obj}");
    let id = obj["metadata"]["name"].as_str().expect("id").to_owned();
    assert_eq!(obj["spec"]["pod"], POD);
    assert_eq!(obj["spec"]["container"], "dbg");
    assert_eq!(obj["spec"]["user"], "alice");
    assert_eq!(obj["spec"]["groups"], json!(["system:authenticated"]));
    assert_eq!(obj["spec"]["mode"], "owner");
    assert_eq!(obj["spec"]["tty"], true);
    assert_eq!(obj["spec"]["protocol"], "websocket/v5.channel.k8s.io");
    assert_eq!(obj["status"]["participants"][0]["user"], "alice");
    assert_eq!(obj["status"]["participants"][0]["mode"], "owner");
    assert_eq!(obj["status"]["moderated"], false);
    assert!(obj["status"]["replica"].is_string());

    // The same object under the namespace, across namespaces, by name, and as a Table.
    for path in [
        format!("{GV}/namespaces/{NS}/debugsessions"),
        format!("{GV}/debugsessions"),
    ] {
        let (code, list) = alice.get_json(&path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {list}");
        assert_eq!(list["items"][0]["metadata"]["name"], id.as_str(), "{path}");
    }
    let (code, one) = alice
        .get_json(&format!("{GV}/namespaces/{NS}/debugsessions/{id}"))
        .await;
    assert_eq!(code, StatusCode::OK, "{one}");
    assert_eq!(one["spec"]["user"], "alice");
    let (code, _, body) = alice
        .request(
            Method::GET,
            &format!("{GV}/debugsessions"),
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            Bytes::new(),
        )
        .await
        .expect("table");
    assert_eq!(code, StatusCode::OK);
    let table: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"][0], id.as_str());
    assert_eq!(table["rows"][0]["cells"][3], "alice");

    // The record is a Lease in the server's namespace, labelled for people reading them.
    let lease = fake.lease(SERVER_NS, &id).expect("the session's Lease");
    assert_eq!(lease["metadata"]["labels"]["poddebug.dev/session"], "v1");
    assert_eq!(lease["metadata"]["labels"]["poddebug.dev/pod"], POD);
    assert_eq!(lease["metadata"]["labels"]["poddebug.dev/user"], "alice");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3);

    // The stream ends: so does the session, and its record.
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;
    wait_sessions(
        &alice,
        "the session ends with its stream",
        <[Value]>::is_empty,
    )
    .await;
    assert!(fake.lease(SERVER_NS, &id).is_none());
}

#[tokio::test]
async fn joining_another_users_container_needs_join_or_observe_and_observers_never_type() {
    let fake = fake_with_pod("general").await;
    // bob: observe only; carol: join; dave: neither.
    fake.set_policy(|a| {
        !((a.user == "bob" && a.is("join", "pods/debug"))
            || (a.user == "dave" && (a.is("join", "pods/debug") || a.is("observe", "pods/debug"))))
    });
    let s = server(&fake, &[]).await;
    let (alice, bob, carol, dave) = (
        user(&s, "alice"),
        user(&s, "bob"),
        user(&s, "carol"),
        user(&s, "dave"),
    );
    let mut owner = open(&alice, TTY).await;

    // dave may attach (pods/attach) but neither join nor observe alice's container.
    let resp = ws(&dave, WATCHING).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let status: Value = serde_json::from_slice(&resp.body).expect("a Status");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("pods.poddebug.dev \"web\" is forbidden: User \"dave\" cannot observe resource \"pods/debug\"")
            && message.contains("was created by \"alice\""),
        "{message}"
    );
    // bob may observe: with stdin he is refused, without it he is an observer.
    let resp = ws(&bob, TTY).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let status: Value = serde_json::from_slice(&resp.body).expect("a Status");
    assert_eq!(
        status["message"],
        format!(
            "pods.poddebug.dev \"web\" is forbidden: User \"bob\" cannot join resource \"pods/debug\" \
             in API group \"poddebug.dev\" in the namespace \"{NS}\": debug container \"dbg\" was \
             created by \"alice\"; attaching to it with stdin needs join on pods/debug (observe \
             watches it with stdin=false)"
        ),
        "{status}"
    );
    let resp = ws(&bob, &format!("{TTY}&mode=observer")).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
    let resp = ws(&bob, &format!("{TTY}&mode=peer")).await;
    assert_eq!(
        resp.status,
        StatusCode::FORBIDDEN,
        "bob may not join as a peer"
    );
    let mut observer = open(&bob, WATCHING).await;
    // carol joins as a peer (her default, holding join) and types.
    let mut peer = open(&carol, TTY).await;
    let items = wait_sessions(&alice, "three sessions", |i| i.len() == 3).await;
    let mode_of = |u: &str| {
        items
            .iter()
            .find(|i| i["spec"]["user"] == u)
            .map(|i| i["spec"]["mode"].clone())
    };
    assert_eq!(mode_of("alice"), Some(json!("owner")));
    assert_eq!(mode_of("bob"), Some(json!("observer")));
    assert_eq!(mode_of("carol"), Some(json!("peer")));
    let alices = items
        .iter()
        .find(|i| i["spec"]["user"] == "alice")
        .expect("alice");
    let who: Vec<(&str, &str)> = alices["status"]["participants"]
        .as_array()
        .expect("participants")
        .iter()
        .map(|p| {
            (
                p["user"].as_str().unwrap_or(""),
                p["mode"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(who[0], ("alice", "owner"));
    assert_eq!(who.len(), 3, "{who:?}");

    // What carol types reaches the container, and everyone sees its output.
    peer.stdin(b"from-carol\n").await.expect("type");
    for (name, c) in [
        ("alice", &mut owner),
        ("bob", &mut observer),
        ("carol", &mut peer),
    ] {
        let t = c
            .read_until(T, |t| {
                String::from_utf8_lossy(&t.stdout).contains("from-carol")
            })
            .await;
        assert!(
            String::from_utf8_lossy(&t.stdout).contains("from-carol"),
            "{name} saw it"
        );
    }
}

/// A terminated session's client: the Forbidden Status it got.
async fn terminated_status(c: &mut ChannelClient<Io>) -> Value {
    let t = c.finish(T).await.clone();
    t.status()
        .unwrap_or_else(|| panic!("a Status on the error channel: {t:?}"))
}

#[tokio::test]
async fn any_replica_lists_watches_and_terminates_a_session_another_relays() {
    let fake = fake_with_pod("general").await;
    let one = server(&fake, &[]).await;
    let two = server(&fake, &[]).await;
    let alice = user(&one, "alice");
    let carol = user(&two, "carol");

    // carol watches through replica two.
    let mut watch = carol
        .stream(
            Method::GET,
            &format!("{GV}/debugsessions?watch=true"),
            &[],
            Bytes::new(),
        )
        .await
        .expect("watch");
    assert_eq!(watch.status, StatusCode::OK);

    // alice's stream is relayed by replica one ...
    let mut c = open(&alice, TTY).await;
    let added = watch.next_json(T).await.expect("an event");
    assert_eq!(added["type"], "ADDED", "{added}");
    let id = added["object"]["metadata"]["name"]
        .as_str()
        .expect("id")
        .to_owned();
    // ... and listed, and terminated, through replica two.
    let items = wait_sessions(&carol, "listed by replica two", |i| i.len() == 1).await;
    assert_eq!(items[0]["metadata"]["name"], id.as_str());
    let relaying = items[0]["status"]["replica"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let started = tokio::time::Instant::now();
    let (code, obj) = carol.delete(&pod_path(&format!("sessions/{id}"))).await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    assert_eq!(obj["status"]["terminatedBy"], "carol");
    let status = terminated_status(&mut c).await;
    assert!(started.elapsed() < Duration::from_secs(2) + T, "bounded");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["message"], "session terminated by carol");
    // MODIFIED events (the termination request, renewals) may come first.
    let mut gone = watch.next_json(T).await.expect("an event");
    for _ in 0..20 {
        if gone["type"] != "MODIFIED" {
            break;
        }
        gone = watch.next_json(T).await.expect("an event");
    }
    assert_eq!(gone["type"], "DELETED", "{gone}");
    assert_eq!(gone["object"]["metadata"]["name"], id.as_str());
    // The terminating replica wrote the Event; the relaying one was another.
    let events: Vec<Value> = fake
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "DebugSessionTerminated")
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("\"carol\" terminated session"),
        "{events:?}"
    );
    assert!(!relaying.is_empty());
    assert!(two.wait_for_log("\"action\":\"terminate\"", T).await);
}

#[tokio::test]
async fn a_moderated_session_takes_input_only_while_a_moderator_is_attached() {
    let fake = fake_with_pod("general").await;
    let s = server(
        &fake,
        &["--moderated-profiles=general", "--allowed-images=busybox*"],
    )
    .await;
    let (alice, mod_user) = (user(&s, "alice"), user(&s, "mona"));
    let mut owner = open(&alice, TTY).await;
    // Told at once, and listed as waiting.
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("withheld")
        })
        .await;
    let items = wait_sessions(&alice, "waiting", |i| i.len() == 1).await;
    assert_eq!(items[0]["status"]["moderated"], true);
    assert_eq!(items[0]["status"]["waitingForModerator"], true);
    // Typed while waiting: never reaches the container (the fake would echo it).
    owner.stdin(b"early\n").await.expect("type");
    // A moderator joins (stdin=false): input passes.
    let mut moderator = open(&mod_user, &format!("{WATCHING}&mode=moderator")).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("passed on")
        })
        .await;
    owner.stdin(b"late\n").await.expect("type");
    let t = owner
        .read_until(T, |t| String::from_utf8_lossy(&t.stdout).contains("late"))
        .await
        .clone();
    let out = String::from_utf8_lossy(&t.stdout).into_owned();
    assert!(out.contains("late"), "{out}");
    assert!(
        !out.contains("early"),
        "withheld input never arrives: {out}"
    );
    let items = wait_sessions(&alice, "not waiting", |i| {
        i.iter()
            .any(|s| s["spec"]["user"] == "alice" && s["status"]["waitingForModerator"] == false)
    })
    .await;
    assert_eq!(items.len(), 2);
    // The moderator leaves: withheld again.
    moderator.close().await.expect("close");
    moderator.finish(T).await;
    let before = owner.transcript().stdout.len();
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout[before..]).contains("withheld")
        })
        .await;
    owner.stdin(b"after\n").await.expect("type");
    // Output of something that does pass (a resize) shows the stream goes on; "after" does not.
    owner.resize(100, 30).await.expect("resize");
    let t = owner
        .read_until(Duration::from_secs(2), |t| {
            String::from_utf8_lossy(&t.stdout).contains("after")
        })
        .await;
    assert!(
        !String::from_utf8_lossy(&t.stdout).contains("after"),
        "{}",
        String::from_utf8_lossy(&t.stdout)
    );
    // Only users who may moderate can join as moderators.
    fake.set_policy(|a| !(a.user == "eve" && a.is("moderate", "pods/sessions")));
    let resp = ws(&user(&s, "eve"), &format!("{WATCHING}&mode=moderator")).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{resp:?}");
}

#[tokio::test]
async fn records_of_a_replica_that_died_stop_being_listed_and_are_swept() {
    let fake = fake_with_pod("general").await;
    let s = server(&fake, &[]).await;
    let mut dying = server(&fake, &[]).await;
    let alice = user(&s, "alice");
    // A session relayed by the second replica, listed by the first.
    let _c = open(&user(&dying, "zed"), TTY).await;
    let items = wait_sessions(&alice, "the record is listed", |i| i.len() == 1).await;
    let id = items[0]["metadata"]["name"]
        .as_str()
        .expect("id")
        .to_owned();
    // The replica is killed: no chance to remove its record, which is no longer renewed: it
    // stops being listed after its lease (3 s), and the first replica sweeps it.
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &dying.pid().to_string()])
        .status();
    assert!(dying.wait_exit(T).await.is_some(), "killed");
    assert!(fake.lease(SERVER_NS, &id).is_some(), "left behind");
    wait_sessions(
        &alice,
        "the stale record is not listed",
        <[Value]>::is_empty,
    )
    .await;
    let deadline = tokio::time::Instant::now() + T;
    while fake.lease(SERVER_NS, &id).is_some() {
        assert!(tokio::time::Instant::now() < deadline, "swept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of `poddebug_untrusted_records_total{kind}` on `s`.
async fn untrusted(s: &TestClient, kind: &str) -> f64 {
    let (code, _, body) = s
        .request(Method::GET, "/metrics", &[], Bytes::new())
        .await
        .expect("metrics");
    assert_eq!(code, StatusCode::OK);
    let text = String::from_utf8_lossy(&body).into_owned();
    let name = format!("poddebug_untrusted_records_total{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The session Lease of `user`'s session, as the fake holds it.
fn lease_of(fake: &FakeKube, user: &str) -> Option<Value> {
    fake.leases(SERVER_NS).into_iter().find(|l| {
        l["metadata"]["annotations"]["poddebug.dev/session"]
            .as_str()
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
            .is_some_and(|r| r["user"] == user)
    })
}

#[tokio::test]
async fn forged_copied_and_replayed_session_records_open_no_gate_and_are_not_listed() {
    let fake = fake_with_pod("general").await;
    let s = server(
        &fake,
        &["--moderated-profiles=general", "--allowed-images=busybox*"],
    )
    .await;
    let (alice, mona) = (user(&s, "alice"), user(&s, "mona"));
    let mut owner = open(&alice, TTY).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("withheld")
        })
        .await;
    // A real moderator's record, kept while it lives, then she leaves.
    let mut moderator = open(&mona, &format!("{WATCHING}&mode=moderator")).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("passed on")
        })
        .await;
    let real = lease_of(&fake, "mona").expect("mona's Lease");
    assert!(
        real["metadata"]["annotations"]["poddebug.dev/session-mac"]
            .as_str()
            .is_some_and(|m| m.starts_with("v1.")),
        "{real}"
    );
    moderator.close().await.expect("close");
    moderator.finish(T).await;
    let withheld_twice = |t: &poddebug_tests::channel::Transcript| {
        String::from_utf8_lossy(&t.stdout)
            .matches("withheld")
            .count()
            >= 2
    };
    owner.read_until(T, withheld_twice).await;
    wait_sessions(&alice, "mona left", |i| i.len() == 1).await;

    // Records made to look like a moderator on alice's container, live for an hour: without a
    // MAC, with a made-up one, mona's record replayed with a new renewal time (in the future,
    // and now), and copied under another name.
    let far = "2099-01-01T00:00:00.000000Z";
    let now = jiff::Timestamp::now().to_string();
    let variant = |name: &str, renew: &str, mac: Option<&str>| {
        let mut l = real.clone();
        l["metadata"]["name"] = json!(name);
        l["spec"]["renewTime"] = json!(renew);
        match mac {
            Some(m) => l["metadata"]["annotations"]["poddebug.dev/session-mac"] = json!(m),
            None => {
                if let Some(a) = l["metadata"]["annotations"].as_object_mut() {
                    a.remove("poddebug.dev/session-mac");
                }
            }
        }
        l
    };
    let real_name = real["metadata"]["name"].as_str().expect("name").to_owned();
    let real_mac = real["metadata"]["annotations"]["poddebug.dev/session-mac"]
        .as_str()
        .expect("mac")
        .to_owned();
    let real_renew = real["spec"]["renewTime"]
        .as_str()
        .expect("renew")
        .to_owned();
    let forged = [
        variant("sf00000000000001", far, None),
        variant("sf00000000000002", far, Some("v1.00000000.bm90LWEtbWFj")),
        variant(&real_name, far, Some(&real_mac)),
        variant(&real_name, &now, Some(&real_mac)),
        variant("sf00000000000003", &real_renew, Some(&real_mac)),
    ];
    for l in &forged {
        fake.put_lease(l.clone());
    }
    let deadline = tokio::time::Instant::now() + T;
    while untrusted(&alice, "session").await < forged.len() as f64 {
        assert!(tokio::time::Instant::now() < deadline, "counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // None is listed, and alice still waits: what she types goes nowhere.
    let items = sessions(&alice).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["spec"]["user"], "alice");
    assert_eq!(items[0]["status"]["waitingForModerator"], true);
    assert_eq!(
        items[0]["status"]["participants"].as_array().map(Vec::len),
        Some(1)
    );
    owner.stdin(b"while-forged\n").await.expect("type");
    // Counted once per version, however often the replica reads them.
    assert_eq!(untrusted(&alice, "session").await, forged.len() as f64);
    assert!(
        s.wait_for_log("a record that poddebug did not write", T)
            .await,
        "logged"
    );

    // A termination request nobody signed is ignored too.
    let mut mine = lease_of(&fake, "alice").expect("alice's Lease");
    mine["metadata"]["annotations"]["poddebug.dev/terminate"] =
        json!(r#"{"by":"mallory","at":"2026-01-01T00:00:00Z"}"#);
    fake.put_lease(mine);
    while untrusted(&alice, "termination").await < 1.0 {
        assert!(tokio::time::Instant::now() < deadline, "counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A real moderator opens the gate: only what alice types from then on runs.
    let _moderator = open(&mona, &format!("{WATCHING}&mode=moderator")).await;
    let passing_twice = |t: &poddebug_tests::channel::Transcript| {
        String::from_utf8_lossy(&t.stdout)
            .matches("passed on")
            .count()
            >= 2
    };
    owner.read_until(T, passing_twice).await;
    owner.stdin(b"after\n").await.expect("type");
    let t = owner
        .read_until(T, |t| String::from_utf8_lossy(&t.stdout).contains("after"))
        .await
        .clone();
    let out = String::from_utf8_lossy(&t.stdout).into_owned();
    assert!(out.contains("after"), "the session lives on: {out}");
    assert!(!out.contains("while-forged"), "{out}");
}

#[tokio::test]
async fn a_user_over_the_session_limit_is_refused_by_every_replica_and_others_are_not() {
    let fake = fake_with_pod("general").await;
    let one = server(&fake, &["--max-sessions-per-user=2"]).await;
    let two = server(&fake, &["--max-sessions-per-user=2"]).await;
    let (alice1, alice2) = (user(&one, "alice"), user(&two, "alice"));
    let mut first = open(&alice1, TTY).await;
    let _second = open(&alice2, TTY).await;
    // Both replicas know both sessions (each relays one).
    for c in [&alice1, &alice2] {
        wait_sessions(c, "alice's two sessions", |i| i.len() == 2).await;
    }
    for c in [&alice1, &alice2] {
        let resp = ws(c, WATCHING).await;
        assert_eq!(resp.status, StatusCode::TOO_MANY_REQUESTS, "{resp:?}");
        assert_eq!(
            resp.headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("5")
        );
        let status: Value = serde_json::from_slice(&resp.body).expect("a Status");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["code"], 429);
        assert_eq!(status["details"]["retryAfterSeconds"], 5);
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("too many sessions: user \"alice\" has 2 open")
                && message.contains("at most 2 at once (--max-sessions-per-user)"),
            "{message}"
        );
    }
    // Another user is not affected.
    let _bob = open(&user(&one, "bob"), WATCHING).await;
    // One of alice's sessions ends: she may open one again, through either replica.
    first.close_channel(ch::STDIN).await.expect("close");
    first.finish(T).await;
    wait_sessions(&alice2, "alice's first session ended", |i| {
        i.iter().filter(|s| s["spec"]["user"] == "alice").count() == 1
    })
    .await;
    let _third = open(&alice2, WATCHING).await;
}

/// The limit holds across replicas, however the attaches race: of six attaches of one user sent
/// at once through two replicas with `--max-sessions-per-user=2`, at most two are admitted (the
/// cluster orders their admissions), the others are 429; and the default limit is 20.
#[tokio::test]
async fn replicas_admitting_one_user_at_once_never_pass_the_limit_together() {
    let fake = fake_with_pod("general").await;
    let one = server(&fake, &["--max-sessions-per-user=2"]).await;
    let two = server(&fake, &["--max-sessions-per-user=2"]).await;
    let (alice1, alice2) = (user(&one, "alice"), user(&two, "alice"));
    let attempts = (0..6).map(|i| {
        let c = if i % 2 == 0 {
            alice1.clone()
        } else {
            alice2.clone()
        };
        async move { ws(&c, WATCHING).await }
    });
    let answers = futures::future::join_all(attempts).await;
    let admitted: Vec<_> = answers
        .into_iter()
        .filter_map(|r| match r.status {
            StatusCode::SWITCHING_PROTOCOLS => Some(r),
            StatusCode::TOO_MANY_REQUESTS => None,
            other => panic!("neither admitted nor refused: {other} {r:?}"),
        })
        .collect();
    assert!(
        (1..=2).contains(&admitted.len()),
        "{} admitted at once through two replicas",
        admitted.len()
    );
    let held = sessions(&alice1)
        .await
        .iter()
        .filter(|s| s["spec"]["user"] == "alice")
        .count();
    assert!(held <= 2, "{held} sessions held");
    drop(admitted);

    // The default: 20 sessions, the 21st refused.
    let fake = fake_with_pod("general").await;
    let s = server(&fake, &[]).await;
    let alice = user(&s, "alice");
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(open(&alice, WATCHING).await);
    }
    let resp = ws(&alice, WATCHING).await;
    assert_eq!(resp.status, StatusCode::TOO_MANY_REQUESTS, "{resp:?}");
    let status: Value = serde_json::from_slice(&resp.body).expect("a Status");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 20 at once (--max-sessions-per-user)")),
        "{status}"
    );
}

#[tokio::test]
async fn the_recording_names_every_participant_and_the_termination() {
    let fake = fake_with_pod("general").await;
    let dir = poddebug_tests::TempDir::new("sessions-rec");
    let flag = format!("--recording-dir={}", dir.path().display());
    let s = server(&fake, &[&flag]).await;
    let (alice, bob, carol) = (user(&s, "alice"), user(&s, "bob"), user(&s, "carol"));
    let mut owner = open(&alice, TTY).await;
    let items = wait_sessions(&alice, "alice", |i| i.len() == 1).await;
    let id = items[0]["metadata"]["name"]
        .as_str()
        .expect("id")
        .to_owned();
    let recording = items[0]["status"]["recordingId"]
        .as_str()
        .expect("the session names its recording")
        .to_owned();
    let mut observer = open(&bob, &format!("{WATCHING}&mode=observer")).await;
    wait_sessions(&alice, "bob joined", |i| i.len() == 2).await;
    observer.close().await.expect("close");
    observer.finish(T).await;
    wait_sessions(&alice, "bob left", |i| i.len() == 1).await;
    let (code, obj) = carol.delete(&pod_path(&format!("sessions/{id}"))).await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    terminated_status(&mut owner).await;
    // The recording, once finished.
    let deadline = tokio::time::Instant::now() + T;
    let cast = loop {
        let (code, _, body) = alice
            .request(
                Method::GET,
                &pod_path(&format!("recordings/{recording}")),
                &[],
                Bytes::new(),
            )
            .await
            .expect("recording");
        let text = String::from_utf8_lossy(&body).into_owned();
        if code == StatusCode::OK && text.contains("terminated") {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{code} {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let lines: Vec<Value> = cast
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(lines[0]["poddebug"]["session"], id.as_str());
    assert_eq!(lines[0]["poddebug"]["mode"], "owner");
    let markers: Vec<&str> = lines[1..]
        .iter()
        .filter(|e| e[1] == "m")
        .filter_map(|e| e[2].as_str())
        .collect();
    assert_eq!(
        markers,
        [
            "bob joined as an observer",
            "bob left",
            "session terminated by carol"
        ],
        "{cast}"
    );
}

/// The listing benchmark (`session-bench`, docs/benchmarks.md) runs and checks what it lists:
/// a small run of it against two replicas. Its timings are not asserted.
#[tokio::test]
async fn the_session_benchmark_runs_and_lists_every_session_once() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_session-bench"))
        .args([
            "--sessions",
            "6",
            "--replicas",
            "2",
            "--pods",
            "2",
            "--lists",
            "3",
        ])
        .env("PODDEBUG_APISERVER_BIN", PodDebugServer::binary())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the benchmark ends")
        .expect("it runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("list namespace          6 items (relayed by 2 replicas)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("list one pod            3 items"),
        "{stdout}"
    );
}

#[tokio::test]
async fn lists_and_watches_take_label_and_field_selectors() {
    let fake = fake_with_pod("general").await;
    let s = server(&fake, &[]).await;
    let alice = user(&s, "alice");
    let bob = user(&s, "bob");
    let _owner = open(&alice, TTY).await;
    let _observer = open(&bob, WATCHING).await;
    let items = wait_sessions(&alice, "two sessions", |i| i.len() == 2).await;
    let bobs = items
        .iter()
        .find(|i| i["spec"]["user"] == "bob")
        .and_then(|i| i["metadata"]["name"].as_str())
        .expect("bob's session")
        .to_owned();
    let names = |q: String| {
        let alice = alice.clone();
        async move {
            let (code, list) = alice
                .get_json(&format!("{GV}/namespaces/{NS}/debugsessions?{q}"))
                .await;
            assert_eq!(code, StatusCode::OK, "{q}: {list}");
            list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| i["spec"]["user"].as_str().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        names("labelSelector=poddebug.dev%2Fuser%3Dalice".into()).await,
        ["alice"]
    );
    assert_eq!(
        names("labelSelector=poddebug.dev%2Fmode+in+%28observer%2Cpeer%29".into()).await,
        ["bob"]
    );
    assert_eq!(
        names("fieldSelector=spec.mode%21%3Downer".into()).await,
        ["bob"]
    );
    assert_eq!(
        names(format!("fieldSelector=metadata.name%3D{bobs}")).await,
        ["bob"]
    );
    assert!(
        names("fieldSelector=spec.pod%3Dother".into())
            .await
            .is_empty()
    );
    // kube-apiserver's refusals of what it cannot select on.
    let (code, status) = alice
        .get_json(&format!(
            "{GV}/namespaces/{NS}/debugsessions?fieldSelector=spec.groups%3Ddevs"
        ))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(status["message"], "field label not supported: spec.groups");
    let (code, status) = alice
        .get_json(&format!(
            "{GV}/debugsessions?labelSelector=poddebug.dev%2Fuser%3D%3D%3D"
        ))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    // A watch of one session by name (what `kubectl get debugsessions ID -w` sends) sees only it.
    let mut w = alice
        .stream(
            Method::GET,
            &format!(
                "{GV}/namespaces/{NS}/debugsessions?watch=true&fieldSelector=metadata.name%3D{bobs}"
            ),
            &[],
            "",
        )
        .await
        .expect("watch");
    assert_eq!(w.status, StatusCode::OK);
    let first = w.next_json(T).await.expect("an event");
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], bobs.as_str());
    drop(_observer);
    let next = w.next_json(T).await.expect("an event");
    assert_eq!(next["type"], "DELETED", "{next}");
    assert_eq!(next["object"]["metadata"]["name"], bobs.as_str());
}

/// What a client sends as stdin, however it frames or declares it, is judged as stdin: a
/// WebSocket message split into fragments behind an empty first frame, a message whose channel
/// byte comes alone, and a SPDY stream declared `stdin\0` (how spdystream writes
/// `{"Streamtype": ["stdin", ""]}`; the kubelet reads its first value). None of it reaches the
/// container while no moderator is attached; the same input with one attached does, and is
/// what the recording holds.
#[tokio::test]
async fn moderation_holds_however_stdin_is_framed_or_declared() {
    use poddebug_tests::spdy::AttachSession;

    let fragments = poddebug_tests::channel::stdin_fragments;
    let channel_alone = poddebug_tests::channel::stdin_channel_alone;
    let fake = fake_with_pod("general").await;
    let dir = std::env::temp_dir().join(format!(
        "poddebug-modframe-{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    let recordings = format!("--recording-dir={}", dir.display());
    let s = server(
        &fake,
        &[
            "--moderated-profiles=general",
            "--allowed-images=busybox*",
            "--record-input",
            &recordings,
        ],
    )
    .await;
    let (alice, mona) = (user(&s, "alice"), user(&s, "mona"));
    let mut owner = open(&alice, TTY).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("withheld")
        })
        .await;
    let spdy_resp = alice
        .upgrade(
            Method::POST,
            &pod_path(&format!("attach?{TTY}")),
            &[
                ("connection", "Upgrade"),
                ("upgrade", "SPDY/3.1"),
                ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ],
        )
        .await
        .expect("upgrade answered");
    assert_eq!(
        spdy_resp.status,
        StatusCode::SWITCHING_PROTOCOLS,
        "{spdy_resp:?}"
    );
    let mut spdy = AttachSession::open_declared(
        spdy_resp.io.expect("upgraded"),
        &[
            ("error", "error"),
            ("stdin", "stdin\0"),
            ("stdout", "stdout"),
            ("resize", "resize"),
        ],
    )
    .await
    .expect("streams open");
    spdy.read_until(T, |t| {
        String::from_utf8_lossy(&t.stdout).contains("withheld")
    })
    .await;
    wait_sessions(&alice, "both waiting", |i| {
        i.len() == 2 && i.iter().all(|s| s["status"]["waitingForModerator"] == true)
    })
    .await;

    // While no moderator is attached: each way of framing stdin.
    owner.stdin(b"early-whole\n").await.expect("type");
    for m in fragments("early-fragments\n")
        .into_iter()
        .chain(channel_alone("early-alone\n"))
    {
        owner.send_message(m).await.expect("send");
    }
    spdy.send_stdin(b"early-spdy\n").await.expect("type");
    // Pings come back only after the relay judged everything sent before them.
    assert!(
        owner.sync(b"early-judged", T).await,
        "the WebSocket ping came back"
    );
    assert!(spdy.sync(1, T).await, "the SPDY ping came back");

    // A moderator joins: the same ways of sending input pass.
    let mut moderator = open(&mona, &format!("{WATCHING}&mode=moderator")).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("passed on")
        })
        .await;
    let t = spdy
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("passed on")
        })
        .await;
    assert!(
        String::from_utf8_lossy(&t.stdout).contains("passed on"),
        "the SPDY client is told its input passes: {t:?}"
    );
    for m in fragments("late-fragments\n")
        .into_iter()
        .chain(channel_alone("late-alone\n"))
    {
        owner.send_message(m).await.expect("send");
    }
    spdy.send_stdin(b"late-spdy\n").await.expect("type");
    // The fake's container echoes stdin in the order it got it (WebSocket input to every
    // WebSocket stream, SPDY input to its own stream): once the last input is back, anything
    // forwarded before it would be too.
    let out = moderator
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("late-alone")
        })
        .await
        .stdout_text();
    assert!(
        out.contains("late-fragments") && out.contains("late-alone"),
        "{out}"
    );
    assert!(
        !out.contains("early"),
        "withheld input reached the container: {out}"
    );
    // The moderator joined after the early input, so its transcript alone cannot show a leak:
    // the owner's own stream, attached all along, gets the echo of everything the container got.
    let owner_out = owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("late-alone")
        })
        .await
        .stdout_text();
    assert!(owner_out.contains("late-alone"), "{owner_out}");
    assert!(
        !owner_out.contains("early"),
        "withheld input reached the container: {owner_out}"
    );
    let t = spdy
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("late-spdy")
        })
        .await;
    let spdy_out = String::from_utf8_lossy(&t.stdout).into_owned();
    assert!(spdy_out.contains("late-spdy"), "{spdy_out}");
    assert!(
        !spdy_out.contains("early"),
        "withheld input reached the container: {spdy_out}"
    );
    moderator.close().await.expect("close");
    owner.close().await.expect("close");
    owner.finish(T).await;
    drop(spdy);

    // The recordings hold the input that was forwarded, and none that was withheld.
    let deadline = tokio::time::Instant::now() + T;
    let inputs = loop {
        let (code, list) = alice.get_json(&pod_path("recordings")).await;
        assert_eq!(code, StatusCode::OK, "{list}");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let owners: Vec<&Value> = items
            .iter()
            .filter(|i| i["spec"]["user"] == "alice")
            .collect();
        if owners.len() == 2 && owners.iter().all(|i| i["status"]["end"].is_string()) {
            let mut inputs = String::new();
            for i in owners {
                let id = i["metadata"]["name"].as_str().expect("an id");
                let (code, _, body) = alice
                    .request(
                        Method::GET,
                        &pod_path(&format!("recordings/{id}")),
                        &[],
                        Bytes::new(),
                    )
                    .await
                    .expect("get recording");
                assert_eq!(code, StatusCode::OK);
                for line in String::from_utf8_lossy(&body).lines().skip(1) {
                    let v: Value = serde_json::from_str(line).expect("JSON");
                    if v[1] == "i" {
                        inputs.push_str(v[2].as_str().unwrap_or(""));
                    }
                }
            }
            break inputs;
        }
        assert!(tokio::time::Instant::now() < deadline, "recordings: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        inputs.contains("late-fragments")
            && inputs.contains("late-alone")
            && inputs.contains("late-spdy"),
        "{inputs}"
    );
    assert!(
        !inputs.contains("early"),
        "withheld input was recorded: {inputs}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Four eyes are two people: the owner of a moderated session attached a second time as a
/// moderator (holding `moderate`), or a peer who also moderates, opens no gate; someone else
/// does. The session stays listed as waiting until then.
#[tokio::test]
async fn the_owner_or_a_peer_moderating_opens_no_gate() {
    let fake = fake_with_pod("general").await;
    let s = server(
        &fake,
        &["--moderated-profiles=general", "--allowed-images=busybox*"],
    )
    .await;
    let (alice, bob, mona) = (user(&s, "alice"), user(&s, "bob"), user(&s, "mona"));
    let mut owner = open(&alice, TTY).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("withheld")
        })
        .await;
    let mut peer = open(&bob, &format!("{TTY}&mode=peer")).await;
    // Alice and bob each moderate too.
    let _self_moderation = open(&alice, &format!("{WATCHING}&mode=moderator")).await;
    let _peer_moderation = open(&bob, &format!("{WATCHING}&mode=moderator")).await;
    let items = wait_sessions(&alice, "four sessions", |i| i.len() == 4).await;
    for i in items.iter().filter(|i| i["spec"]["mode"] != "moderator") {
        assert_eq!(i["status"]["waitingForModerator"], true, "{i}");
    }
    owner.stdin(b"self-moderated\n").await.expect("type");
    peer.stdin(b"peer-moderated\n").await.expect("type");
    assert!(owner.sync(b"judged", T).await);
    assert!(peer.sync(b"judged", T).await);
    // Mona, someone else, moderates: now input passes.
    let _moderator = open(&mona, &format!("{WATCHING}&mode=moderator")).await;
    owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("passed on")
        })
        .await;
    owner.stdin(b"four-eyes\n").await.expect("type");
    let out = owner
        .read_until(T, |t| {
            String::from_utf8_lossy(&t.stdout).contains("four-eyes")
        })
        .await
        .stdout_text();
    assert!(out.contains("four-eyes"), "{out}");
    assert!(
        !out.contains("self-moderated") && !out.contains("peer-moderated"),
        "input passed under its own typist's moderation: {out}"
    );
    wait_sessions(&alice, "no longer waiting", |i| {
        i.iter()
            .filter(|i| i["spec"]["mode"] != "moderator")
            .all(|i| i["status"]["waitingForModerator"] == false)
    })
    .await;
}

/// A stream carries only what its request and its caller's mode grant: a SPDY client that opens
/// a `stdin` stream (declared `stdin\0`, as spdystream may write it) on an attach without
/// `stdin=true`, an observer that does, and a WebSocket observer writing on the stdin channel are
/// each ended with a 403 `Status`, and nothing they sent reaches the container — in a moderated
/// session with no moderator and in an unmoderated one alike. The fake kubelet attaches any stdin
/// stream it is given, as the kubelet does, so a leak would echo.
#[tokio::test]
async fn streams_a_request_did_not_ask_for_or_a_mode_may_not_use_never_reach_the_container() {
    use poddebug_tests::spdy::AttachSession;

    for moderated in [true, false] {
        let fake = fake_with_pod("general").await;
        let flags: &[&str] = if moderated {
            &["--moderated-profiles=general", "--allowed-images=busybox*"]
        } else {
            &[]
        };
        let s = server(&fake, flags).await;
        let (alice, carol) = (user(&s, "alice"), user(&s, "carol"));
        // The owner's own interactive stream, attached all along: it gets the echo of every
        // input the container gets.
        let mut owner = open(&alice, TTY).await;
        owner.stdin(b"ready\n").await.expect("type");
        if !moderated {
            owner
                .read_until(T, |t| String::from_utf8_lossy(&t.stdout).contains("ready"))
                .await;
        }
        let spdy_attach = |client: TestClient, query: &'static str| async move {
            let resp = client
                .upgrade(
                    Method::POST,
                    &pod_path(&format!("attach?{query}")),
                    &[
                        ("connection", "Upgrade"),
                        ("upgrade", "SPDY/3.1"),
                        ("x-stream-protocol-version", "v4.channel.k8s.io"),
                    ],
                )
                .await
                .expect("upgrade answered");
            assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
            AttachSession::open_declared(
                resp.io.expect("upgraded"),
                &[
                    ("error", "error"),
                    ("stdout", "stdout"),
                    ("stdin", "stdin\0"),
                    ("resize", "resize"),
                ],
            )
            .await
            .expect("streams opened")
        };
        for (who, query) in [
            (alice.clone(), WATCHING),
            (
                carol.clone(),
                "container=dbg&stdout=true&tty=true&mode=observer",
            ),
        ] {
            let mut c = spdy_attach(who, query).await;
            // Whatever it sends on the stream it opened is not forwarded.
            let _ = c.send_stdin(b"unasked-spdy\n").await;
            let t = c.finish(T).await;
            let status: Value = serde_json::from_slice(&t.error).unwrap_or(Value::Null);
            assert_eq!(status["code"], 403, "{query}: {t:?}");
            assert!(
                status["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("stdin stream") && m.contains("does not grant")),
                "{status}"
            );
            assert!(
                !t.stdout_text().contains("unasked"),
                "refused input echoed: {t:?}"
            );
        }
        // A WebSocket observer writing on the stdin channel.
        let mut observer = open(&carol, "container=dbg&stdout=true&tty=true&mode=observer").await;
        let _ = observer.stdin(b"unasked-ws\n").await;
        let t = observer.finish(T).await;
        let status: Value = serde_json::from_slice(&t.error).unwrap_or(Value::Null);
        assert_eq!(status["code"], 403, "{t:?}");
        // The owner's stream: once what it typed after all of that is echoed (moderated: once a
        // moderator lets it through), nothing refused came before it.
        let _moderator = if moderated {
            Some(
                open(
                    &user(&s, "mona"),
                    "container=dbg&stdout=true&tty=true&mode=moderator",
                )
                .await,
            )
        } else {
            None
        };
        if moderated {
            owner
                .read_until(T, |t| {
                    String::from_utf8_lossy(&t.stdout).contains("passed on")
                })
                .await;
        }
        owner.stdin(b"after\n").await.expect("type");
        let out = owner
            .read_until(T, |t| String::from_utf8_lossy(&t.stdout).contains("after"))
            .await
            .stdout_text();
        assert!(out.contains("after"), "moderated={moderated}: {out}");
        assert!(
            !out.contains("unasked"),
            "refused input reached the container (moderated={moderated}): {out}"
        );
        assert_eq!(
            out.contains("ready"),
            !moderated,
            "input withheld without a moderator never reaches the container: {out}"
        );
        owner.close().await.expect("close");
    }
}

/// The log of someone else's debug container is what observing its session shows: reading it
/// takes `observe` (or `join`) on `pods/debug`, as attaching to it does. A user who may read
/// logs (`get pods/log` in poddebug.dev) but holds neither is refused; the owner is not asked.
#[tokio::test]
async fn reading_another_users_debug_container_log_needs_observe_as_attaching_does() {
    let fake = fake_with_pod("general").await;
    let s = server(&fake, &[]).await;
    let path = pod_path("log?container=dbg");
    fake.set_policy(|a| {
        !(a.user == "bob" && (a.is("join", "pods/debug") || a.is("observe", "pods/debug")))
            && !(a.user == "carol" && a.is("join", "pods/debug"))
    });
    let (code, status) = user(&s, "bob").get_json(&path).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("cannot observe resource \"pods/debug\"")
            && msg.contains("created by \"alice\""),
        "{msg}"
    );
    // carol may observe (not join): she reads it; alice, the owner, is not asked either verb.
    for who in ["carol", "alice"] {
        let (code, _, body) = user(&s, who)
            .request(Method::GET, &path, &[], Bytes::new())
            .await
            .expect("log answered");
        assert_eq!(
            code,
            StatusCode::OK,
            "{who}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let asked = |who: &str, verb: &str| {
        fake.sars()
            .iter()
            .any(|r| r.attributes.user == who && r.attributes.is(verb, "pods/debug"))
    };
    assert!(asked("carol", "observe"));
    assert!(!asked("alice", "observe") && !asked("alice", "join"));
}
