//! Live sessions across replicas on the real cluster: a second replica of the server (this
//! checkout's binary, started here with the kubeconfig's credentials and a serving certificate of
//! its own, reached directly with the cluster's front-proxy client certificate, as the
//! aggregator reaches a replica) next to the one the APIService points at. Sessions relayed by
//! either are listed, watched and terminated through the other; a replica killed with SIGKILL
//! leaves records that stop being listed within their lease; observers, peers and moderators on
//! the real kubelet's shared terminal.
//!
//! Needs `REALCLUSTER_STATE` (for `pki/front-proxy-client.{crt,key}`; default
//! `$TMPDIR/poddebug-realcluster`) and the server binary (`cargo build -p poddebug-apiserver`).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_recording::signing::{KeySet, PublicKey};
use poddebug_recording::verify::{StreamVerifier, running};
use poddebug_tests::channel::{ChannelClient, Transcript};
use poddebug_tests::server::free_port;
use poddebug_tests::{PodDebugServer, TestClient, TestPki};
use poddebug_types::evidence::{Verification, VerificationStatus};
use serde_json::{Value, json};

use crate::support::{
    ALICE, BUSYBOX, GV, Sandbox, as_user, enabled, kubectl, ok, ok_json, poll, poll_async,
};

pub(crate) type Io = TokioIo<Upgraded>;
const T: Duration = Duration::from_secs(30);
/// After a RoleBinding, the authorization caches (kube-apiserver's webhook, the server's) may
/// answer from before it for a while: retry until it shows.
const RBAC_SETTLE: Duration = Duration::from_secs(40);
const TTY: &str = "attach?container=dbg&stdin=true&stdout=true&tty=true";
const WATCHING: &str = "attach?container=dbg&stdout=true&tty=true";
/// The notices of a moderated session (stream/src/gate.rs).
pub(crate) const WITHHELD: &str = "your input is withheld until a moderator joins";
const PASSING: &str = "A moderator is attached: your input is passed on";

fn realcluster_state() -> String {
    std::env::var("REALCLUSTER_STATE").unwrap_or_else(|_| {
        format!(
            "{}/poddebug-realcluster",
            std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".to_owned())
        )
    })
}

/// A second replica of the server, out of the cluster, killed on drop (also used by the stop
/// and time-limit tests, for flags of their own).
pub(crate) struct Replica {
    server: PodDebugServer,
    pki: TestPki,
    front_proxy: (String, String),
}

impl Replica {
    /// Starts it with the flags of the one under test (the images the cluster has) and
    /// `extra`, and waits (bounded) until `/readyz` answers 200.
    pub(crate) async fn start(extra: &[&str]) -> Replica {
        let state = realcluster_state();
        let read = |f: &str| {
            std::fs::read_to_string(format!("{state}/pki/{f}"))
                .unwrap_or_else(|e| panic!("{state}/pki/{f} (set REALCLUSTER_STATE): {e}"))
        };
        let front_proxy = (
            read("front-proxy-client.crt"),
            read("front-proxy-client.key"),
        );
        let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG names the cluster");
        let pki = TestPki::new();
        let serving = pki.localhost_serving_cert();
        let mut args = vec![
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={}", free_port()),
            format!("--tls-cert-file={}", serving.cert_path.display()),
            format!("--tls-private-key-file={}", serving.key_path.display()),
            format!("--kubeconfig={kubeconfig}"),
            "--service-name=poddebug-apiserver".to_owned(),
            "--service-namespace=poddebug-system".to_owned(),
            "--allowed-images=busybox:*,docker.io/library/busybox:*,registry.k8s.io/pause:*"
                .to_owned(),
            "--log-format=json".to_owned(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut server = PodDebugServer::spawn_raw(&args);
        let probe = TestClient::builder(&server.url())
            .ca_pem(pki.cluster_ca_pem())
            .http1_only()
            .build();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = server.try_exit_status() {
                panic!(
                    "the second replica exited with {status}:\n{}",
                    server.logs_text()
                );
            }
            if let Ok((StatusCode::OK, _, _)) = probe
                .request(Method::GET, "/readyz", &[], Bytes::new())
                .await
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the second replica did not become ready:\n{}",
                server.logs_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Replica {
            server,
            pki,
            front_proxy,
        }
    }

    /// A client of this replica acting as `user` (group `system:authenticated`), authenticated
    /// as the aggregator is: the front-proxy client certificate and `X-Remote-*` headers.
    pub(crate) fn user(&self, user: &str) -> TestClient {
        TestClient::builder(&self.server.url())
            .ca_pem(self.pki.cluster_ca_pem())
            .client_cert(&self.front_proxy.0, &self.front_proxy.1)
            .header("x-remote-user", user)
            .header("x-remote-group", "system:authenticated")
            .http1_only()
            .build()
    }

    /// A client of this replica for an administrator (group `system:masters`): `/metrics`.
    pub(crate) fn admin(&self) -> TestClient {
        TestClient::builder(&self.server.url())
            .ca_pem(self.pki.cluster_ca_pem())
            .client_cert(&self.front_proxy.0, &self.front_proxy.1)
            .header("x-remote-user", "live-admin")
            .header("x-remote-group", "system:masters")
            .http1_only()
            .build()
    }

    /// `poddebug_untrusted_records_total{kind}` of this replica.
    async fn untrusted(&self, kind: &str) -> f64 {
        let (code, _, body) = self
            .admin()
            .request(Method::GET, "/metrics", &[], Bytes::new())
            .await
            .expect("metrics");
        assert_eq!(code, StatusCode::OK);
        let name = format!("poddebug_untrusted_records_total{{kind=\"{kind}\"}} ");
        String::from_utf8_lossy(&body)
            .lines()
            .find_map(|l| l.strip_prefix(&name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// `name` (with its labels) in this replica's `/metrics`; 0 when absent.
    pub(crate) async fn metric(&self, name: &str) -> f64 {
        let (code, _, body) = self
            .admin()
            .request(Method::GET, "/metrics", &[], Bytes::new())
            .await
            .expect("metrics");
        assert_eq!(code, StatusCode::OK);
        String::from_utf8_lossy(&body)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// SIGKILL: no chance to close its sessions or delete their records.
    async fn kill9(&mut self) {
        let pid = self.server.pid().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        assert!(
            self.server.wait_exit(T).await.is_some(),
            "the replica survived SIGKILL"
        );
    }
}

/// Creates `dbg`, an interactive shell, as `owner` (retrying while RBAC settles); waits until it
/// runs.
async fn shell_of(sb: &Sandbox, owner: &TestClient, profile: Option<&str>) {
    let mut body = json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true,
        "tty": true}, "targetContainerName": "app"});
    if let Some(p) = profile {
        body["profile"] = p.into();
    }
    poll_async(
        "the owner may create dbg",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match sb
                .create_as(owner, "dbg", "?wait=true&timeoutSeconds=20", &body)
                .await
            {
                (StatusCode::CREATED, obj) if obj["status"]["phase"] == "Running" => Ok(()),
                (code, obj) => Err(format!("{code} {obj}")),
            }
        },
    )
    .await;
}

/// A WebSocket (v5) attach as `client`; the refusal's code and Status otherwise.
pub(crate) async fn attach(
    client: &TestClient,
    path: &str,
) -> Result<ChannelClient<Io>, (StatusCode, Value)> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(Method::GET, path, &headers)
        .await
        .expect("upgrade request");
    if resp.status != StatusCode::SWITCHING_PROTOCOLS {
        let body = serde_json::from_slice(&resp.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&resp.body).into_owned()));
        return Err((resp.status, body));
    }
    Ok(ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await)
}

/// [`attach`], retried while RBAC settles.
pub(crate) async fn attach_settled(client: &TestClient, path: &str) -> ChannelClient<Io> {
    let deadline = tokio::time::Instant::now() + RBAC_SETTLE;
    loop {
        match attach(client, path).await {
            Ok(c) => return c,
            Err((code, body)) => {
                assert!(
                    code == StatusCode::FORBIDDEN && tokio::time::Instant::now() < deadline,
                    "attach {path}: {code} {body}"
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The sessions of the sandbox's namespace as `client` sees them (`None` on an error).
async fn sessions(client: &TestClient, sb: &Sandbox) -> Result<Vec<Value>, String> {
    let (code, list) = client
        .get_json(&format!("{GV}/namespaces/{}/debugsessions", sb.ns))
        .await;
    if code != StatusCode::OK {
        return Err(format!("{code} {list}"));
    }
    assert_eq!(list["kind"], "DebugSessionList", "{list}");
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// Polls the sessions (through `client`) until `ok` holds; the last list.
async fn sessions_until(
    what: &str,
    client: &TestClient,
    sb: &Sandbox,
    within: Duration,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    poll_async(what, within, Duration::from_millis(250), || async {
        let items = sessions(client, sb).await?;
        if ok(&items) {
            Ok(items)
        } else {
            Err(format!("{items:?}"))
        }
    })
    .await
}

fn id_of(s: &Value) -> String {
    s["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn stdout_has(needle: &'static str) -> impl Fn(&Transcript) -> bool {
    move |t| t.stdout_text().contains(needle)
}

/// Reads until the error channel spoke or the stream ended; the Status.
async fn ended_with(c: &mut ChannelClient<Io>) -> Value {
    let t = c.read_until(T, |t| t.error_done || t.ended).await;
    t.status().unwrap_or_else(|| {
        panic!(
            "no Status on the error channel; stdout {:?}",
            t.stdout_text()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn sessions_of_either_replica_are_listed_watched_and_terminated_through_the_other() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sessrep");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind("poddebug:session-moderator", "carol");
    let alice = as_user(&sb.api, ALICE);
    let carol = as_user(&sb.api, "carol");
    shell_of(&sb, &alice, None).await;
    let replica = Replica::start(&[]).await;
    let carol2 = replica.user("carol");

    // carol watches the namespace's sessions through the aggregator (the first replica).
    let watch_path = format!(
        "{GV}/namespaces/{}/debugsessions?watch=true&timeoutSeconds=120",
        sb.ns
    );
    let mut watch = poll_async(
        "carol may watch sessions",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            let w = carol
                .stream(
                    Method::GET,
                    &watch_path,
                    &[("accept", "application/json")],
                    "",
                )
                .await
                .map_err(|e| e.to_string())?;
            if w.status == StatusCode::OK {
                Ok(w)
            } else {
                Err(format!("{}", w.status))
            }
        },
    )
    .await;

    // alice attaches through the second replica, then through the first.
    let mut via2 = attach_settled(&replica.user(ALICE), &sb.path(TTY)).await;
    let first = sessions_until("alice's session on replica 2", &carol, &sb, T, |s| {
        s.len() == 1
    })
    .await;
    let id2 = id_of(&first[0]);
    let replica2 = first[0]["status"]["replica"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut via1 = attach_settled(&alice, &sb.path(TTY)).await;
    let both = sessions_until("both sessions through replica 1", &carol, &sb, T, |s| {
        s.len() == 2
    })
    .await;
    let id1 = both
        .iter()
        .map(id_of)
        .find(|id| *id != id2)
        .expect("the second session");
    let replicas: BTreeSet<&str> = both
        .iter()
        .filter_map(|s| s["status"]["replica"].as_str())
        .collect();
    assert_eq!(
        replicas.len(),
        2,
        "each relayed by its own replica: {both:?}"
    );
    for s in &both {
        assert_eq!(s["spec"]["user"], ALICE, "{s}");
        assert_eq!(s["spec"]["mode"], "owner", "{s}");
        assert_eq!(s["spec"]["pod"], "web", "{s}");
        assert_eq!(s["spec"]["container"], "dbg", "{s}");
        assert_eq!(s["metadata"]["namespace"], sb.ns.as_str(), "{s}");
    }
    // The second replica lists the same two.
    let through2 = sessions_until("both sessions through replica 2", &carol2, &sb, T, |s| {
        s.len() == 2
    })
    .await;
    let ids: BTreeSet<String> = through2.iter().map(id_of).collect();
    assert_eq!(ids, BTreeSet::from([id1.clone(), id2.clone()]));
    // All namespaces, as `kubectl get debugsessions -A` asks for them: a Table.
    let (code, table) = sb
        .api
        .request(
            Method::GET,
            &format!("{GV}/debugsessions"),
            &[(
                "accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )],
            Bytes::new(),
        )
        .await
        .map(|(c, _, b)| (c, serde_json::from_slice::<Value>(&b).unwrap_or_default()))
        .expect("table");
    assert_eq!(code, StatusCode::OK, "{table}");
    assert_eq!(table["kind"], "Table", "{table}");
    let rows = table["rows"].as_array().cloned().unwrap_or_default();
    assert!(
        rows.iter()
            .filter(|r| r["object"]["metadata"]["namespace"] == sb.ns.as_str())
            .count()
            == 2,
        "{table}"
    );

    // The watch saw both arrive.
    let mut added = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + T;
    while added.len() < 2 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = watch
            .next_json(left)
            .await
            .unwrap_or_else(|| panic!("the watch ended; ADDED so far: {added:?}"));
        if event["type"] == "ADDED" {
            added.insert(id_of(&event["object"]));
        }
    }
    assert_eq!(added, BTreeSet::from([id1.clone(), id2.clone()]));

    // carol ends the second replica's session through the first...
    let (code, gone) = carol.delete(&sb.path(&format!("sessions/{id2}"))).await;
    assert_eq!(code, StatusCode::OK, "{gone}");
    assert_eq!(gone["kind"], "DebugSession", "{gone}");
    let status = ended_with(&mut via2).await;
    assert_eq!(status["reason"], "Forbidden", "{status}");
    assert_eq!(status["message"], "session terminated by carol", "{status}");
    assert_eq!(
        replica2,
        gone["status"]["replica"].as_str().unwrap_or(""),
        "{gone}"
    );
    // ...and the first replica's through the second.
    let (code, gone) = carol2.delete(&sb.path(&format!("sessions/{id1}"))).await;
    assert_eq!(code, StatusCode::OK, "{gone}");
    let status = ended_with(&mut via1).await;
    assert_eq!(status["reason"], "Forbidden", "{status}");
    assert_eq!(status["message"], "session terminated by carol", "{status}");

    // The watch says both are gone; both replicas list none; the pod has the Events.
    let mut deleted = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + T;
    while deleted.len() < 2 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = watch
            .next_json(left)
            .await
            .unwrap_or_else(|| panic!("the watch ended; DELETED so far: {deleted:?}"));
        if event["type"] == "DELETED" {
            deleted.insert(id_of(&event["object"]));
        }
    }
    assert_eq!(deleted, BTreeSet::from([id1, id2]));
    sessions_until(
        "no sessions through replica 1",
        &carol,
        &sb,
        T,
        <[Value]>::is_empty,
    )
    .await;
    sessions_until(
        "no sessions through replica 2",
        &carol2,
        &sb,
        T,
        <[Value]>::is_empty,
    )
    .await;
    poll_async(
        "two DebugSessionTerminated Events",
        T,
        Duration::from_millis(500),
        || async {
            let out = kubectl(
                &[
                    "get",
                    "events",
                    "-n",
                    &sb.ns,
                    "--field-selector",
                    "reason=DebugSessionTerminated",
                    "-o",
                    "json",
                ],
                None,
            );
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let n = v["items"].as_array().map_or(0, Vec::len);
            if n >= 2 {
                Ok(())
            } else {
                Err(format!("{n} events"))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_replica_killed_mid_session_leaves_a_record_that_expires_with_its_lease() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sesskill");
    sb.bind("poddebug:debugger", ALICE);
    let alice = as_user(&sb.api, ALICE);
    shell_of(&sb, &alice, None).await;
    // Its records are held 3 s without a renewal (the documented bound: that lease, then the
    // next sweep of any replica deletes the Lease).
    let mut replica = Replica::start(&["--session-lease-duration=3s"]).await;
    let _stream = attach_settled(&replica.user(ALICE), &sb.path(TTY)).await;
    let listed = sessions_until(
        "the session listed through replica 1",
        &sb.api,
        &sb,
        T,
        |s| s.len() == 1,
    )
    .await;
    let id = id_of(&listed[0]);
    assert_eq!(listed[0]["status"]["participants"][0]["user"], ALICE);

    replica.kill9().await;
    // Gone from lists once its lease ran out (3 s after the last renewal), plus the time the
    // first replica's watch takes to hear of it: polled with a bound well past that.
    sessions_until(
        "the dead replica's session is no longer listed",
        &sb.api,
        &sb,
        Duration::from_secs(3 + 12),
        <[Value]>::is_empty,
    )
    .await;
    // And its Lease is deleted by the surviving replica's sweep (every third of that replica's
    // own lease duration, 15 s by default).
    poll_async(
        "the Lease is swept",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let out = kubectl(&["get", "lease", "-n", "poddebug-system", &id], None);
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            if !out.status.success() && err.contains("NotFound") {
                Ok(())
            } else {
                Err(format!("{}{err}", String::from_utf8_lossy(&out.stdout)))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn an_observer_sees_the_owners_output_and_never_types_and_join_needs_its_verb() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sessobs");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind("poddebug:session-observer", "bob");
    // dave may attach (the debugger role) but neither join nor observe others' containers.
    sb.bind("poddebug:debugger", "dave");
    let alice = as_user(&sb.api, ALICE);
    let bob = as_user(&sb.api, "bob");
    let dave = as_user(&sb.api, "dave");
    shell_of(&sb, &alice, None).await;
    let mut owner = attach_settled(&alice, &sb.path(TTY)).await;

    // bob may observe: asking to type (stdin, or mode=peer) is refused.
    let refused = poll_async(
        "bob's rights settle",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match attach(&bob, &sb.path(TTY)).await {
                Err((StatusCode::FORBIDDEN, s))
                    if s["message"]
                        .as_str()
                        .unwrap_or("")
                        .contains("User \"bob\" cannot join") =>
                {
                    Ok(s)
                }
                Err((code, s)) => Err(format!("{code} {s}")),
                Ok(_) => Err("bob was let in with stdin".to_owned()),
            }
        },
    )
    .await;
    assert_eq!(refused["reason"], "Forbidden", "{refused}");
    let (code, s) = attach(&bob, &sb.path(&format!("{WATCHING}&mode=peer")))
        .await
        .map(|_| (StatusCode::SWITCHING_PROTOCOLS, Value::Null))
        .unwrap_or_else(|e| e);
    assert_eq!(code, StatusCode::FORBIDDEN, "{s}");
    // dave holds neither verb: 403 whether he asks to type or to watch.
    for path in [TTY, WATCHING] {
        let (code, s) = attach(&dave, &sb.path(path))
            .await
            .map(|_| (StatusCode::SWITCHING_PROTOCOLS, Value::Null))
            .unwrap_or_else(|e| e);
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}: {s}");
        assert!(
            s["message"]
                .as_str()
                .unwrap_or("")
                .contains("User \"dave\" cannot"),
            "{s}"
        );
    }

    // Without stdin bob is an observer: listed as such, he sees alice's output live.
    let mut observer = attach_settled(&bob, &sb.path(WATCHING)).await;
    let listed = sessions_until("bob listed as an observer", &sb.api, &sb, T, |s| {
        s.iter()
            .any(|x| x["spec"]["user"] == "bob" && x["spec"]["mode"] == "observer")
    })
    .await;
    let alices = listed
        .iter()
        .find(|x| x["spec"]["user"] == ALICE)
        .expect("alice's session");
    let participants: BTreeSet<(String, String)> = alices["status"]["participants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["user"].as_str().unwrap_or("").to_owned(),
                p["mode"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(
        participants.contains(&("bob".to_owned(), "observer".to_owned())),
        "{alices}"
    );
    owner.stdin(b"echo seen-$((6*7))\r").await.expect("type");
    observer.read_until(T, stdout_has("seen-42")).await;
    assert!(
        observer.transcript().stdout_text().contains("seen-42"),
        "{:?}",
        observer.transcript().stdout_text()
    );
    // What bob sends anyway goes nowhere: alice's next command runs, his never did.
    observer.stdin(b"echo bob-$((2+3))\r").await.expect("send");
    owner.stdin(b"echo after-$((1+1))\r").await.expect("type");
    let t = owner.read_until(T, stdout_has("after-2")).await;
    assert!(t.stdout_text().contains("after-2"), "{:?}", t.stdout_text());
    assert!(!t.stdout_text().contains("bob-5"), "{:?}", t.stdout_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_moderated_session_takes_input_only_while_a_moderator_is_attached() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sessmod");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind_cluster("poddebug:privileged-profiles", ALICE);
    sb.bind("poddebug:session-moderator", "carol");
    // Every stream of a debug container made with a gated profile needs `use` on it, a
    // moderator's too (profiles hold at attach).
    sb.bind_cluster("poddebug:privileged-profiles", "carol");
    let alice = as_user(&sb.api, ALICE);
    let carol = as_user(&sb.api, "carol");
    shell_of(&sb, &alice, Some("sysadmin")).await;
    // The second replica moderates sysadmin sessions; the moderator joins through the first.
    let replica = Replica::start(&["--moderated-profiles=sysadmin"]).await;
    let mut owner = attach_settled(&replica.user(ALICE), &sb.path(TTY)).await;
    owner.read_until(T, stdout_has(WITHHELD)).await;
    let listed = sessions_until(
        "alice's session waits for a moderator",
        &sb.api,
        &sb,
        T,
        |s| s.len() == 1 && s[0]["status"]["waitingForModerator"] == true,
    )
    .await;
    assert_eq!(listed[0]["status"]["moderated"], true, "{listed:?}");
    owner.stdin(b"echo early-$((3*3))\r").await.expect("type");

    // carol joins as moderator: alice is told, and her input runs.
    let moderated = sb.path(&format!("{WATCHING}&mode=moderator"));
    let mut moderator = attach_settled(&carol, &moderated).await;
    owner.read_until(T, stdout_has(PASSING)).await;
    sessions_until("no longer waiting", &sb.api, &sb, T, |s| {
        s.iter().any(|x| x["spec"]["mode"] == "moderator")
            && s.iter()
                .filter(|x| x["spec"]["user"] == ALICE)
                .all(|x| x["status"]["waitingForModerator"] == false)
    })
    .await;
    owner.stdin(b"echo live-$((4*4))\r").await.expect("type");
    owner.read_until(T, stdout_has("live-16")).await;
    moderator.read_until(T, stdout_has("live-16")).await;
    assert!(
        moderator.transcript().stdout_text().contains("live-16"),
        "the moderator sees everything: {:?}",
        moderator.transcript().stdout_text()
    );

    // carol leaves: input is withheld again.
    moderator.close().await.expect("close");
    moderator.finish(T).await;
    let withheld_twice = |t: &Transcript| t.stdout_text().matches(WITHHELD).count() >= 2;
    owner.read_until(T, withheld_twice).await;
    assert!(
        withheld_twice(owner.transcript()),
        "{:?}",
        owner.transcript().stdout_text()
    );
    sessions_until("waiting again", &sb.api, &sb, T, |s| {
        s.len() == 1 && s[0]["status"]["waitingForModerator"] == true
    })
    .await;
    owner.stdin(b"echo late-$((5*5))\r").await.expect("type");

    // Once a moderator is back, only what was typed since runs.
    let mut moderator = attach_settled(&carol, &moderated).await;
    let passing_twice = |t: &Transcript| t.stdout_text().matches(PASSING).count() >= 2;
    owner.read_until(T, passing_twice).await;
    owner.stdin(b"echo again-$((7*7))\r").await.expect("type");
    let t = owner.read_until(T, stdout_has("again-49")).await;
    let out = t.stdout_text();
    assert!(out.contains("again-49"), "{out:?}");
    assert!(
        !out.contains("early-9"),
        "input before a moderator joined ran: {out:?}"
    );
    assert!(
        !out.contains("late-25"),
        "input after the moderator left ran: {out:?}"
    );
    moderator.close().await.expect("close");
}

/// The recordings (through `client`) of pod `web` in the sandbox: the items, or why not.
async fn recordings_of(client: &TestClient, sb: &Sandbox) -> Result<Vec<Value>, String> {
    let (code, list) = client
        .get_json(&format!("{GV}/namespaces/{}/pods/web/recordings", sb.ns))
        .await;
    if code != StatusCode::OK {
        return Err(format!("{code} {list}"));
    }
    assert_eq!(list["kind"], "DebugRecordingList", "{list}");
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// A recording's asciicast text, through `client`.
async fn recording_text(client: &TestClient, sb: &Sandbox, id: &str) -> Result<String, String> {
    let (code, _, body) = client
        .request(
            Method::GET,
            &format!("{GV}/namespaces/{}/pods/web/recordings/{id}", sb.ns),
            &[],
            Bytes::new(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&body).into_owned();
    if code == StatusCode::OK {
        Ok(text)
    } else {
        Err(format!("{code} {text}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG) and PODDEBUG_LIVE_RECORDING_STORE"]
async fn the_commands_typed_through_one_replica_are_served_edited_and_found_through_another() {
    if !enabled() {
        return;
    }
    let Ok(store) = std::env::var("PODDEBUG_LIVE_RECORDING_STORE") else {
        eprintln!("skipped: PODDEBUG_LIVE_RECORDING_STORE names no store the replicas share");
        return;
    };
    let sb = Sandbox::new("reccmd");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind("poddebug:auditor", ALICE);
    let alice = as_user(&sb.api, ALICE);
    shell_of(&sb, &alice, None).await;
    let flag = format!("--recording-store={store}");
    // Replica one also exports its audit trail as OCSF to a receiver that refuses the first
    // POST: each event of the session still arrives once.
    let hook = poddebug_tests::webhook::WebhookReceiver::start(1).await;
    let hook_flag = format!("--audit-webhook={}", hook.url());
    let one = Replica::start(&[&flag, "--record-input", &hook_flag]).await;
    let two = Replica::start(&[&flag]).await;

    // A line edited as it is typed to busybox's shell: a word rubbed out with Ctrl-W, a typo
    // with Backspace. The shell runs what the editing left, and so do the commands say.
    let mut s = attach_settled(&one.user(ALICE), &sb.path(TTY)).await;
    s.stdin(b"echo typo\x17fixed-$((1+x").await.expect("type");
    s.stdin(b"\x7f2))\r").await.expect("type");
    s.read_until(T, stdout_has("fixed-3")).await;
    s.close().await.expect("close");
    let ended = poll_async(
        "the ended recording is listed through replica 2",
        T,
        Duration::from_millis(250),
        || async {
            let items = recordings_of(&two.user(ALICE), &sb).await?;
            match items.iter().find(|i| i["status"]["end"].is_string()) {
                Some(i) => Ok(i.clone()),
                None => Err(format!("{items:?}")),
            }
        },
    )
    .await;
    let id = id_of(&ended);
    let (code, list) = two
        .user(ALICE)
        .get_json(&format!(
            "{GV}/namespaces/{}/pods/web/recordings/{id}/commands",
            sb.ns
        ))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "DebugRecordingCommandList", "{list}");
    assert_eq!(list["verified"], true, "{list}");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    assert!(
        items
            .iter()
            .any(|c| c["line"] == "echo fixed-$((1+2))" && c["recalled"] == false),
        "{list}"
    );
    assert_eq!(
        ended["status"]["commandCount"].as_u64(),
        Some(items.len() as u64),
        "{ended}"
    );
    // Through the aggregator too, as kubectl reads it.
    let raw = poddebug_tests::kubectl::kubectl_ok(
        &[
            "get",
            "--raw",
            &format!(
                "{GV}/namespaces/{}/pods/web/recordings/{id}/commands",
                sb.ns
            ),
        ],
        None,
    );
    assert!(raw.contains("echo fixed-$((1+2))"), "{raw}");

    // Search through replica 2 finds the session by the command as it was submitted (in any
    // case) and by what the shell printed, from the index replica 1 wrote with the recording.
    let search = |text: &str| {
        let path = format!(
            "{GV}/namespaces/{}/debugrecordings?search={}",
            sb.ns,
            percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC)
        );
        let client = two.user(ALICE);
        async move {
            let (code, list) = client.get_json(&path).await;
            assert_eq!(code, StatusCode::OK, "{path}: {list}");
            list
        }
    };
    let found = search("ECHO FIXED-$((1+2))").await;
    let item = &found["items"][0];
    assert_eq!(id_of(item), id, "{found}");
    let matches = item["status"]["matches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        matches
            .iter()
            .any(|m| m["source"] == "Command" && m["text"] == "echo fixed-$((1+2))"),
        "{found}"
    );
    let printed = search("fixed-3").await;
    assert!(
        printed["items"][0]["status"]["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["source"] == "Output" && m["text"] == "fixed-3"),
        "{printed}"
    );
    assert_eq!(
        search("echo typo").await["items"][0]["status"]["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] == "Command")
            .count(),
        0,
        "the word rubbed out is in no command"
    );
    // Through the aggregator, as kubectl reads it; and text out of bounds is refused there.
    let raw = poddebug_tests::kubectl::kubectl_ok(
        &[
            "get",
            "--raw",
            &format!("{GV}/namespaces/{}/debugrecordings?search=fixed-3", sb.ns),
        ],
        None,
    );
    assert!(raw.contains(&id), "{raw}");
    let (code, status) = two
        .user(ALICE)
        .get_json(&format!(
            "{GV}/namespaces/{}/debugrecordings?search=ab",
            sb.ns
        ))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"], "search",
        "{status}"
    );

    // The session, its recording and the edited command reached the webhook, each once, as
    // valid OCSF.
    let op = |e: &Value| {
        e["api"]["operation"]
            .as_str()
            .or_else(|| e["process"]["cmd_line"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let want = ["attach", "recording.finished", "echo fixed-$((1+2))"];
    let events = hook
        .wait_for(T, |got| {
            want.iter().all(|w| got.iter().any(|e| op(e) == *w))
        })
        .await
        .unwrap_or_else(|got| panic!("not every OCSF event arrived: {got:?}"));
    assert_eq!(hook.refused(), 1);
    for w in want {
        let n = events.iter().filter(|e| op(e) == w).count();
        assert_eq!(n, 1, "{w} once: {events:?}");
    }
    let cmd = events
        .iter()
        .find(|e| op(e) == "echo fixed-$((1+2))")
        .expect("the command");
    assert_eq!(cmd["class_uid"], 1007, "{cmd}");
    assert_eq!(cmd["actor"]["user"]["name"], ALICE, "{cmd}");
    assert_eq!(cmd["device"]["name"], format!("{}/web", sb.ns), "{cmd}");
    assert_eq!(cmd["unmapped"]["recording_id"], id.as_str(), "{cmd}");
    poddebug_tests::ocsf::assert_valid(&events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG) and PODDEBUG_LIVE_RECORDING_STORE"]
async fn recordings_of_one_replica_replay_through_another_and_a_killed_one_reads_truncated() {
    if !enabled() {
        return;
    }
    // The store the replicas share (CI: an S3 bucket of a real S3-compatible server); a pass
    // whose server records elsewhere (in its pod) has none to share.
    let Ok(store) = std::env::var("PODDEBUG_LIVE_RECORDING_STORE") else {
        eprintln!("skipped: PODDEBUG_LIVE_RECORDING_STORE names no store the replicas share");
        return;
    };
    let sb = Sandbox::new("recrep");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind("poddebug:auditor", ALICE);
    let alice = as_user(&sb.api, ALICE);
    shell_of(&sb, &alice, None).await;
    let flag = format!("--recording-store={store}");
    let mut one = Replica::start(&[&flag, "--recording-part-interval=1s"]).await;
    let two = Replica::start(&[&flag]).await;

    // A session relayed by replica 1, ended: listed and replayed through replica 2.
    let mut s = attach_settled(&one.user(ALICE), &sb.path(TTY)).await;
    s.stdin(b"echo one-$((20+1))\r").await.expect("type");
    s.read_until(T, stdout_has("one-21")).await;
    s.close().await.expect("close");
    let ended = poll_async(
        "the ended recording is listed through replica 2",
        T,
        Duration::from_millis(250),
        || async {
            let items = recordings_of(&two.user(ALICE), &sb).await?;
            match items.iter().find(|i| i["status"]["end"].is_string()) {
                Some(i) => Ok(i.clone()),
                None => Err(format!("{items:?}")),
            }
        },
    )
    .await;
    assert_eq!(ended["kind"], "DebugRecording", "{ended}");
    assert_eq!(ended["metadata"]["namespace"], sb.ns.as_str(), "{ended}");
    assert_eq!(ended["spec"]["user"], ALICE, "{ended}");
    assert_eq!(ended["status"]["truncated"], false, "{ended}");
    let first = id_of(&ended);
    let text = recording_text(&two.user(ALICE), &sb, &first)
        .await
        .expect("replayed through replica 2");
    assert!(text.contains("one-21"), "{text}");

    // A session whose replica is killed mid-session: what was written a part interval before
    // stays readable, and the recording reads truncated once its metadata is no longer renewed.
    let mut s = attach_settled(&one.user(ALICE), &sb.path(TTY)).await;
    s.stdin(b"echo two-$((40+2))\r").await.expect("type");
    s.read_until(T, stdout_has("two-42")).await;
    let running = poll_async(
        "the running session's output reaches the store",
        T,
        Duration::from_millis(250),
        || async {
            let items = recordings_of(&two.user(ALICE), &sb).await?;
            let Some(r) = items.iter().find(|i| id_of(i) != first) else {
                return Err(format!("{items:?}"));
            };
            let text = recording_text(&two.user(ALICE), &sb, &id_of(r)).await?;
            if text.contains("two-42") {
                Ok(id_of(r))
            } else {
                Err(text)
            }
        },
    )
    .await;
    one.kill9().await;
    drop(s);
    let truncated = poll_async(
        "the killed replica's recording reads truncated",
        Duration::from_secs(6 + 20),
        Duration::from_millis(500),
        || async {
            let items = recordings_of(&two.user(ALICE), &sb).await?;
            match items.iter().find(|i| id_of(i) == running) {
                Some(i) if i["status"]["truncated"] == true => Ok(i.clone()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(truncated["status"]["end"].is_string(), "{truncated}");
    let text = recording_text(&two.user(ALICE), &sb, &running)
        .await
        .expect("still readable");
    assert!(text.contains("two-42"), "{text}");

    // Evidence: the ended recording verifies against its signed metadata; the killed
    // replica's, cut off by the crash, is truncated, not tampered.
    let v = verification_of(&two.user(ALICE), &sb, &first).await;
    assert_eq!(v["result"], "Verified", "{v}");
    let v = verification_of(&two.user(ALICE), &sb, &running).await;
    assert_eq!(v["result"], "Truncated", "{v}");
    // Someone with the bucket's credentials changes one byte of one part: tampered, naming
    // the part; then removes the last part: tampered, naming it.
    // A third party verifies on its own side, with what the API hands out: the public keys,
    // the signed metadata and the bytes (cluster-scoped keys: a ClusterRoleBinding).
    let verifier = "pdlive-verifier";
    sb.bind_cluster("poddebug:auditor", verifier);
    let third_party = two.user(verifier);
    let third = poll_async(
        "a third party verifies the ended recording",
        T,
        Duration::from_millis(250),
        || third_party_verdict(&third_party, &sb, &first),
    )
    .await;
    assert_eq!(third.result, Verification::Verified, "{third:?}");
    let Some(bucket) = S3Bucket::of(&store) else {
        eprintln!("skipped the tampering: the store is no S3 bucket of AWS_ENDPOINT_URL");
        return;
    };
    // The verdict of a recording no longer written is reused while the store lists the same
    // objects: read again, it is not hashed again (replica 2's counter).
    let verifications = |outcome: &'static str| {
        let two = &two;
        async move {
            two.metric(&format!(
                "poddebug_recording_verifications_total{{outcome=\"{outcome}\"}}"
            ))
            .await
        }
    };
    let _ = verification_of(&two.user(ALICE), &sb, &first).await;
    let (hashed, reused) = (verifications("hashed").await, verifications("reused").await);
    for _ in 0..2 {
        let v = verification_of(&two.user(ALICE), &sb, &first).await;
        assert_eq!(v["result"], "Verified", "{v}");
    }
    assert_eq!(verifications("hashed").await, hashed, "hashed again");
    assert!(
        verifications("reused").await >= reused + 2.0,
        "the verdict was not reused"
    );
    let parts = bucket.parts(&format!("{}/web/{first}/", sb.ns));
    assert!(!parts.is_empty(), "the parts of {first} in the bucket");
    let victim = parts.len() / 2;
    let mut data = bucket.get(&parts[victim]);
    let at = data.len() / 2;
    data[at] ^= 0x01;
    bucket.put(&parts[victim], &data);
    // An edited part changes the store's listing: hashed again at the next read, Tampered.
    let v = verification_of(&two.user(ALICE), &sb, &first).await;
    assert_eq!(v["result"], "Tampered", "{v}");
    assert!(
        verifications("hashed").await > hashed,
        "not hashed again after the edit"
    );
    assert_eq!(v["part"], victim, "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("part {victim} was changed"))),
        "{v}"
    );
    let third = third_party_verdict(&third_party, &sb, &first)
        .await
        .expect("the third party's verdict");
    assert_eq!(
        (third.result, third.part),
        (Verification::Tampered, u32::try_from(victim).ok()),
        "{third:?}"
    );
    data[at] ^= 0x01;
    bucket.put(&parts[victim], &data);
    let v = verification_of(&two.user(ALICE), &sb, &first).await;
    assert_eq!(v["result"], "Verified", "restored: {v}");
    let last = parts.len() - 1;
    bucket.delete(&parts[last]);
    let v = verification_of(&two.user(ALICE), &sb, &first).await;
    assert_eq!(
        (&v["result"], &v["part"]),
        (&json!("Tampered"), &json!(last)),
        "{v}"
    );
}

/// The verdict a third party reaches on recording `id` with what the API hands out (the
/// public keys, the signed metadata, the bytes), verifying on its own side.
async fn third_party_verdict(
    client: &TestClient,
    sb: &Sandbox,
    id: &str,
) -> Result<VerificationStatus, String> {
    let (code, keys) = client.get_json(&format!("{GV}/recordingkeys")).await;
    if code != StatusCode::OK {
        return Err(format!("recordingkeys: {code} {keys}"));
    }
    let keys = KeySet::new(
        keys["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| PublicKey::from_base64(k["publicKey"].as_str()?).ok()),
    );
    let file = format!("{GV}/namespaces/{}/pods/web/recordings/{id}", sb.ns);
    let (code, evidence) = client.get_json(&format!("{file}/evidence")).await;
    if code != StatusCode::OK {
        return Err(format!("evidence: {code} {evidence}"));
    }
    let record: poddebug_types::RecordingRecord =
        serde_json::from_value(evidence["record"].clone()).map_err(|e| e.to_string())?;
    let (code, _, bytes) = client
        .request(Method::GET, &file, &[], Bytes::new())
        .await
        .map_err(|e| e.to_string())?;
    if code != StatusCode::OK {
        return Err(format!("recording: {code}"));
    }
    let mut v = StreamVerifier::new(&record);
    v.update(&bytes);
    Ok(v.finish(&record, &keys, running(&record, jiff::Timestamp::now())))
}

/// `status.verification` of a recording, read as `kubectl get debugrecordings ID` does.
async fn verification_of(client: &TestClient, sb: &Sandbox, id: &str) -> Value {
    let (code, obj) = client
        .get_json(&format!("{GV}/namespaces/{}/debugrecordings/{id}", sb.ns))
        .await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    obj["status"]["verification"].clone()
}

/// The bucket of an `s3://BUCKET/PREFIX` store on the S3-compatible server of
/// `AWS_ENDPOINT_URL` (CI: moto, which takes requests unsigned), reached as someone holding
/// the bucket's credentials would, around poddebug.
struct S3Bucket {
    /// `ENDPOINT/BUCKET`.
    base: String,
    /// The store's prefix, with a trailing slash (or empty).
    prefix: String,
}

impl S3Bucket {
    fn of(store: &str) -> Option<S3Bucket> {
        let endpoint = std::env::var("AWS_ENDPOINT_URL").ok()?;
        let rest = store.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.trim_matches('/');
        Some(S3Bucket {
            base: format!("{}/{bucket}", endpoint.trim_end_matches('/')),
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
        })
    }

    /// A request signed with the AWS_* credentials (curl's SigV4).
    fn curl(args: &[&str]) -> Vec<u8> {
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned());
        let out = std::process::Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10"])
            .args(["--aws-sigv4", &format!("aws:amz:{region}:s3")])
            .args([
                "--user",
                &format!(
                    "{}:{}",
                    env("AWS_ACCESS_KEY_ID"),
                    env("AWS_SECRET_ACCESS_KEY")
                ),
            ])
            .args(args)
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "curl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// The keys of the part objects under `folder` (below the store's prefix), in order.
    fn parts(&self, folder: &str) -> Vec<String> {
        let url = format!("{}?list-type=2&prefix={}{folder}", self.base, self.prefix);
        let xml = String::from_utf8(Self::curl(&[&url])).expect("XML");
        let mut keys: Vec<String> = xml
            .split("<Key>")
            .skip(1)
            .filter_map(|k| k.split_once("</Key>").map(|(k, _)| k.to_owned()))
            .filter(|k| k.ends_with(".part"))
            .collect();
        keys.sort();
        keys
    }

    fn get(&self, key: &str) -> Vec<u8> {
        Self::curl(&[&format!("{}/{key}", self.base)])
    }

    fn put(&self, key: &str, data: &[u8]) {
        let file = std::env::temp_dir().join(format!("pdlive-part-{}", std::process::id()));
        std::fs::write(&file, data).expect("write the part");
        let path = file.display().to_string();
        Self::curl(&["-T", &path, &format!("{}/{key}", self.base)]);
        let _ = std::fs::remove_file(file);
    }

    fn delete(&self, key: &str) {
        Self::curl(&["-X", "DELETE", &format!("{}/{key}", self.base)]);
    }
}

/// Reads the owner's stream (attached all along: it shows everything the shell's terminal
/// printed) until `marker`, then waits until the container's log (what the terminal printed, as
/// the kubelet keeps it) has it too; panics if `absent` is in either: input that should have
/// reached nothing did.
async fn the_shell_never_printed(
    owner: &mut ChannelClient<Io>,
    sb: &Sandbox,
    marker: &'static str,
    absent: &str,
) {
    let seen = owner.read_until(T, stdout_has(marker)).await.stdout_text();
    assert!(seen.contains(marker), "{seen:?}");
    assert!(
        !seen.contains(absent),
        "withheld or refused input reached the shell: {seen:?}"
    );
    let log = poll(
        &format!("the container's log has {marker:?}"),
        T,
        Duration::from_millis(500),
        || {
            let log = sb.container_log("dbg");
            if log.contains(marker) {
                Ok(log)
            } else {
                Err(log)
            }
        },
    );
    assert!(
        !log.contains(absent),
        "withheld or refused input reached the shell: {log:?}"
    );
}

/// The Go SPDY client (tests/go/spdyattach) attached to `path` of `replica` as `user`, opening
/// `streams` (its `--streams`), when this machine has it (CI always does).
fn go_client(replica: &Replica, path: &str, user: &str, streams: &str) -> Option<Child> {
    let Some(bin) = spdyattach() else {
        eprintln!("PODDEBUG_LIVE_SPDYATTACH unset: the Go SPDY client's part is skipped");
        return None;
    };
    let ca = std::env::temp_dir().join(format!(
        "pdlive-spdyattach-{}-{}.ca.pem",
        std::process::id(),
        replica.server.pid()
    ));
    std::fs::write(&ca, replica.pki.cluster_ca_pem()).expect("write the CA");
    let state = realcluster_state();
    Some(Child::spawn(
        &bin,
        &[
            format!("--url={}{path}", replica.server.url()),
            format!("--ca={}", ca.display()),
            format!("--cert={state}/pki/front-proxy-client.crt"),
            format!("--key={state}/pki/front-proxy-client.key"),
            format!("--user={user}"),
            format!("--streams={streams}"),
        ],
    ))
}

/// The Go SPDY client (tests/go/spdyattach, built by .ci/live), when this machine has it.
fn spdyattach() -> Option<String> {
    match std::env::var("PODDEBUG_LIVE_SPDYATTACH") {
        Ok(p) if std::path::Path::new(&p).is_file() => Some(p),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("PODDEBUG_LIVE_SPDYATTACH names no binary (.ci/live builds tests/go/spdyattach)")
        }
        _ => None,
    }
}

/// A child process whose stdout and stderr are kept as they come.
struct Child {
    child: tokio::process::Child,
    out: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    err: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

/// Keep what `r` gives in `into` until it ends.
fn keep(
    mut r: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    use tokio::io::AsyncReadExt;
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Ok(mut o) = into.lock() {
                o.extend_from_slice(&buf[..n]);
            }
        }
    });
}

impl Child {
    fn spawn(program: &str, args: &[String]) -> Child {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let err = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        keep(child.stdout.take().expect("piped"), out.clone());
        keep(child.stderr.take().expect("piped"), err.clone());
        Child { child, out, err }
    }

    fn stdout_text(&self) -> String {
        self.out
            .lock()
            .map(|o| String::from_utf8_lossy(&o).into_owned())
            .unwrap_or_default()
    }

    fn stderr_text(&self) -> String {
        self.err
            .lock()
            .map(|o| String::from_utf8_lossy(&o).into_owned())
            .unwrap_or_default()
    }

    /// Waits (bounded) until the client says its `n`th line was judged (its ping came back).
    async fn judged(&self, n: usize) {
        let needle = format!("judged {n}\n");
        let deadline = tokio::time::Instant::now() + T;
        while !self.stderr_text().contains(&needle) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "line {n} of the Go client was not judged: {:?}",
                self.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn type_line(&mut self, line: &[u8]) {
        use tokio::io::AsyncWriteExt;
        let stdin = self.child.stdin.as_mut().expect("piped");
        stdin.write_all(line).await.expect("write to the child");
        stdin.flush().await.expect("flush");
    }

    /// Waits (bounded) until the client exits; its exit code.
    async fn exited(&mut self) -> Option<i32> {
        match tokio::time::timeout(T, self.child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => panic!(
                "the Go client did not exit: stdout {:?}, stderr {:?}",
                self.stdout_text(),
                self.stderr_text()
            ),
        }
    }

    async fn until(&self, what: &str, needle: &str) {
        let deadline = tokio::time::Instant::now() + T;
        while !self.stdout_text().contains(needle) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: stdout {:?}, stderr {:?}",
                self.stdout_text(),
                self.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Under `--moderated-profiles=sysadmin` with no moderator, stdin reaches the shell neither as
/// one WebSocket frame, nor as fragments behind an empty first frame, nor as a message whose
/// channel byte comes alone, nor on a SPDY stream a Go spdystream client declares
/// `{"Streamtype": ["stdin", ""]}`. The same input with a moderator attached runs, and is in
/// the recording; what was withheld is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn moderation_holds_however_stdin_is_framed_or_declared() {
    if !enabled() {
        return;
    }
    let fragments = poddebug_tests::channel::stdin_fragments;
    let channel_alone = poddebug_tests::channel::stdin_channel_alone;
    // Users of this test alone: the cluster-wide binding would otherwise reach other tests.
    const OWNER: &str = "frame-owner";
    const MODERATOR: &str = "frame-moderator";
    let sb = Sandbox::new("sessframe");
    sb.bind("poddebug:debugger", OWNER);
    sb.bind_cluster("poddebug:privileged-profiles", OWNER);
    sb.bind("poddebug:session-moderator", MODERATOR);
    sb.bind_cluster("poddebug:privileged-profiles", MODERATOR);
    sb.bind("poddebug:auditor", "audrey");
    let alice = as_user(&sb.api, OWNER);
    let carol = as_user(&sb.api, MODERATOR);
    shell_of(&sb, &alice, Some("sysadmin")).await;
    let rec_dir = std::env::temp_dir().join(format!("pdlive-recframe-{}", std::process::id()));
    let replica = Replica::start(&[
        "--moderated-profiles=sysadmin",
        "--record-input",
        &format!("--recording-dir={}", rec_dir.display()),
    ])
    .await;
    let mut owner = attach_settled(&replica.user(OWNER), &sb.path(TTY)).await;
    owner.read_until(T, stdout_has(WITHHELD)).await;
    // The Go client, as alice, on the same replica.
    let mut go = go_client(&replica, &sb.path(TTY), OWNER, "error,stdin+,stdout,resize");
    let go_ran = go.is_some();
    if let Some(g) = &go {
        g.until("the Go client is told its input is withheld", WITHHELD)
            .await;
    }
    sessions_until("both of alice's sessions wait", &sb.api, &sb, T, |s| {
        s.len() == if go.is_some() { 2 } else { 1 }
            && s.iter().all(|x| x["status"]["waitingForModerator"] == true)
    })
    .await;

    // No moderator: every way of sending stdin.
    owner
        .stdin(b"echo early-whole-$((2*3))\r")
        .await
        .expect("type");
    for m in fragments("echo early-frag-$((2*4))\r")
        .into_iter()
        .chain(channel_alone("echo early-alone-$((2*5))\r"))
    {
        owner.send_message(m).await.expect("send");
    }
    if let Some(g) = &mut go {
        g.type_line(b"echo early-spdy-$((2*6))\n").await;
        g.judged(1).await;
    }
    // Pings come back only after the relay judged everything sent before them.
    assert!(owner.sync(b"early-judged", T).await, "the ping came back");

    // carol moderates through the other replica (the aggregator's): the same ways pass.
    let mut moderator =
        attach_settled(&carol, &sb.path(&format!("{WATCHING}&mode=moderator"))).await;
    owner.read_until(T, stdout_has(PASSING)).await;
    for m in fragments("echo late-frag-$((3*3))\r")
        .into_iter()
        .chain(channel_alone("echo late-alone-$((3*4))\r"))
    {
        owner.send_message(m).await.expect("send");
    }
    moderator.read_until(T, stdout_has("late-alone-12")).await;
    if let Some(g) = &mut go {
        g.until("the Go client is told its input passes", PASSING)
            .await;
        g.type_line(b"echo late-spdy-$((3*5))\n").await;
        moderator.read_until(T, stdout_has("late-spdy-15")).await;
    }
    let seen = moderator.transcript().stdout_text();
    assert!(
        seen.contains("late-frag-9") && seen.contains("late-alone-12"),
        "{seen:?}"
    );
    assert!(
        !seen.contains("early"),
        "input sent while no moderator was attached reached the shell: {seen:?}"
    );
    // The moderator joined after the early input, so its transcript alone cannot show a leak:
    // the owner's stream, attached all along, and the container's log can.
    the_shell_never_printed(&mut owner, &sb, "late-alone-12", "early").await;
    moderator.close().await.expect("close");
    owner.close().await.expect("close");
    owner.finish(T).await;
    drop(go);

    // The replica's recordings of alice's sessions hold the input that passed, not the rest.
    let audrey = replica.user("audrey");
    let inputs = poll_async(
        "alice's recordings end",
        RBAC_SETTLE,
        Duration::from_millis(500),
        || async {
            let (code, list) = audrey.get_json(&sb.path("recordings")).await;
            if code != StatusCode::OK {
                return Err(format!("{code} {list}"));
            }
            let items: Vec<Value> = list["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|i| i["spec"]["user"] == OWNER)
                .collect();
            if items.is_empty() || !items.iter().all(|i| i["status"]["end"].is_string()) {
                return Err(format!("{list}"));
            }
            let mut inputs = String::new();
            for i in &items {
                let id = i["metadata"]["name"].as_str().unwrap_or_default();
                let (code, _, body) = audrey
                    .request(
                        Method::GET,
                        &sb.path(&format!("recordings/{id}")),
                        &[],
                        Bytes::new(),
                    )
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                if code != StatusCode::OK {
                    return Err(format!("recording {id}: {code}"));
                }
                for line in String::from_utf8_lossy(&body).lines().skip(1) {
                    let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
                    if v[1] == "i" {
                        inputs.push_str(v[2].as_str().unwrap_or(""));
                    }
                }
            }
            Ok(inputs)
        },
    )
    .await;
    assert!(inputs.contains("late-frag-$((3*3))"), "{inputs:?}");
    assert!(inputs.contains("late-alone-$((3*4))"), "{inputs:?}");
    if go_ran {
        assert!(inputs.contains("late-spdy-$((3*5))"), "{inputs:?}");
    }
    assert!(
        !inputs.contains("early"),
        "withheld input was recorded: {inputs:?}"
    );
    let _ = std::fs::remove_dir_all(&rec_dir);
}

/// A stream carries only what its request and its caller's mode grant, on the real kubelet
/// (which attaches any stdin stream a SPDY client opens, whatever the query said). In a
/// moderated session with no moderator: the owner's Go SPDY client (spdystream, waiting for each
/// stream's reply as apimachinery's SPDY connection does) opening a `stdin` stream on an attach
/// without `stdin=true`, an observer's doing the same, a client that sends its stdin data right
/// behind the stream it opens (without waiting), and a WebSocket observer typing, are each ended
/// with a 403 `Status`. And four eyes are two people: the owner, who also holds
/// `poddebug:session-moderator`, attached as the moderator of their own session opens no gate.
/// None of what they sent reaches the shell — checked on the owner's own stream, attached all
/// along, and in the container's log, after someone else's moderation let the owner's next line
/// through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn streams_a_request_did_not_ask_for_and_self_moderation_never_reach_the_shell() {
    if !enabled() {
        return;
    }
    use poddebug_tests::spdy::AttachSession;
    const OWNER: &str = "unasked-owner";
    const OBSERVER: &str = "unasked-observer";
    const MODERATOR: &str = "unasked-moderator";
    let sb = Sandbox::new("sessunasked");
    sb.bind("poddebug:debugger", OWNER);
    sb.bind("poddebug:session-observer", OBSERVER);
    sb.bind("poddebug:session-moderator", MODERATOR);
    sb.bind("poddebug:session-moderator", OWNER);
    for u in [OWNER, OBSERVER, MODERATOR] {
        sb.bind_cluster("poddebug:privileged-profiles", u);
    }
    let owner_api = as_user(&sb.api, OWNER);
    shell_of(&sb, &owner_api, Some("sysadmin")).await;
    let replica = Replica::start(&["--moderated-profiles=sysadmin"]).await;
    let mut owner = attach_settled(&replica.user(OWNER), &sb.path(TTY)).await;
    owner.read_until(T, stdout_has(WITHHELD)).await;
    let observing = format!("{WATCHING}&mode=observer");
    // Settle the observer's RBAC with a plain observing attach.
    attach_settled(&replica.user(OBSERVER), &sb.path(&observing))
        .await
        .close()
        .await
        .expect("close");

    // The Go client, as the owner on an attach without stdin=true, then as the observer.
    for (user, path) in [(OWNER, WATCHING.to_owned()), (OBSERVER, observing.clone())] {
        if let Some(mut go) = go_client(
            &replica,
            &sb.path(&path),
            user,
            "error,stdin+,stdout,resize",
        ) {
            assert_eq!(go.exited().await, Some(2), "{}", go.stderr_text());
            let err = go.stderr_text();
            assert!(
                err.contains("stream stdin+ not accepted")
                    && err.contains("\"code\":403")
                    && err.contains("does not grant"),
                "{user}: {err}"
            );
        }
    }
    // A client that does not wait: the stdin stream and its data in one go, as the owner.
    let resp = replica
        .user(OWNER)
        .upgrade(
            Method::POST,
            &sb.path(WATCHING),
            &[
                ("connection", "Upgrade"),
                ("upgrade", "SPDY/3.1"),
                ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ],
        )
        .await
        .expect("upgrade answered");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    let mut eager = AttachSession::open_declared(
        resp.io.expect("upgraded"),
        &[
            ("error", "error"),
            ("stdout", "stdout"),
            ("stdin", "stdin\0"),
        ],
    )
    .await
    .expect("streams opened");
    let _ = eager.send_stdin(b"echo unasked-eager-$((6*7))\n").await;
    let t = eager.finish(T).await;
    let status: Value = serde_json::from_slice(&t.error).unwrap_or(Value::Null);
    assert_eq!(status["code"], 403, "{t:?}");
    // A WebSocket observer typing.
    let mut observer = attach_settled(&replica.user(OBSERVER), &sb.path(&observing)).await;
    let _ = observer.stdin(b"echo unasked-ws-$((6*7))\r").await;
    assert_eq!(ended_with(&mut observer).await["code"], 403);

    // The owner moderating their own session: no gate opens, what they type is held.
    let _self_moderation = attach_settled(
        &replica.user(OWNER),
        &sb.path(&format!("{WATCHING}&mode=moderator")),
    )
    .await;
    owner
        .stdin(b"echo unasked-self-$((3*3))\r")
        .await
        .expect("type");
    assert!(owner.sync(b"self-judged", T).await, "the ping came back");
    let (code, list) = replica
        .user(OWNER)
        .get_json(&format!("{GV}/namespaces/{}/debugsessions", sb.ns))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    let own = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["spec"]["mode"] == "owner")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(own["status"]["waitingForModerator"], true, "{list}");
    // Someone else's moderation lets the owner's next line through: nothing refused or held
    // came before it.
    let _moderator = attach_settled(
        &replica.user(MODERATOR),
        &sb.path(&format!("{WATCHING}&mode=moderator")),
    )
    .await;
    owner.read_until(T, stdout_has(PASSING)).await;
    owner.stdin(b"echo after-$((5*5))\r").await.expect("type");
    the_shell_never_printed(&mut owner, &sb, "after-25", "unasked").await;
    owner.close().await.expect("close");
}

/// Through the aggregator: bob, who may debug in the namespace (and so read logs of
/// `pods/debug`) but holds neither `observe` nor `join`, cannot read the log of alice's debug
/// container; bound to `poddebug:session-observer` he can, as he could then watch her session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn the_log_of_another_users_debug_container_needs_observe() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sesslog");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind("poddebug:debugger", "bob");
    let alice = as_user(&sb.api, ALICE);
    let bob = as_user(&sb.api, "bob");
    shell_of(&sb, &alice, None).await;
    let path = sb.path("log?container=dbg");
    let (code, status) = bob.get_json(&path).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("cannot observe resource \"pods/debug\""),
        "{msg}"
    );
    let (code, _, body) = alice
        .request(Method::GET, &path, &[], Bytes::new())
        .await
        .expect("log answered");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    sb.bind("poddebug:session-observer", "bob");
    poll_async(
        "bob may observe",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match bob.request(Method::GET, &path, &[], Bytes::new()).await {
                Ok((StatusCode::OK, _, _)) => Ok(()),
                Ok((code, _, body)) => Err(format!("{code} {}", String::from_utf8_lossy(&body))),
                Err(e) => Err(format!("{e:?}")),
            }
        },
    )
    .await;
}

/// Where the servers keep session records.
const SERVER_NS: &str = "poddebug-system";

/// Leases made by a test in the servers' namespace, deleted on drop.
pub(crate) struct Forged(pub(crate) Vec<String>);

impl Forged {
    /// Create `lease` (a Lease object) in the servers' namespace.
    pub(crate) fn create(&mut self, lease: &Value) {
        let name = lease["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_owned();
        ok(
            &["create", "-n", SERVER_NS, "-f", "-"],
            Some(&lease.to_string()),
        );
        self.0.push(name);
    }
}

impl Drop for Forged {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(
                &[
                    "delete",
                    "lease",
                    "-n",
                    SERVER_NS,
                    name,
                    "--ignore-not-found",
                    "--wait=false",
                ],
                None,
            );
        }
    }
}

/// The session Lease of `user`'s session on the sandbox's pod, as the cluster holds it.
fn lease_of(sb: &Sandbox, user: &str) -> Option<Value> {
    let list = ok_json(&[
        "get",
        "leases",
        "-n",
        SERVER_NS,
        "-l",
        "poddebug.dev/session",
        "-o",
        "json",
    ]);
    list["items"].as_array()?.iter().find_map(|l| {
        let record: Value =
            serde_json::from_str(l["metadata"]["annotations"]["poddebug.dev/session"].as_str()?)
                .ok()?;
        (record["user"] == user && record["namespace"] == sb.ns.as_str()).then(|| l.clone())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_forged_or_replayed_moderator_record_opens_no_gate() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sessforge");
    sb.bind("poddebug:debugger", ALICE);
    sb.bind_cluster("poddebug:privileged-profiles", ALICE);
    sb.bind("poddebug:session-moderator", "carol");
    sb.bind_cluster("poddebug:privileged-profiles", "carol");
    let alice = as_user(&sb.api, ALICE);
    let carol = as_user(&sb.api, "carol");
    shell_of(&sb, &alice, Some("sysadmin")).await;
    let replica = Replica::start(&["--moderated-profiles=sysadmin"]).await;
    let mut owner = attach_settled(&replica.user(ALICE), &sb.path(TTY)).await;
    owner.read_until(T, stdout_has(WITHHELD)).await;

    // A real moderator's record, taken while she is attached; then she leaves.
    let moderated = sb.path(&format!("{WATCHING}&mode=moderator"));
    let mut moderator = attach_settled(&carol, &moderated).await;
    owner.read_until(T, stdout_has(PASSING)).await;
    let real = poll("carol's record", T, Duration::from_millis(250), || {
        lease_of(&sb, "carol").ok_or_else(|| "none yet".to_owned())
    });
    moderator.close().await.expect("close");
    moderator.finish(T).await;
    let withheld_twice = |t: &Transcript| t.stdout_text().matches(WITHHELD).count() >= 2;
    owner.read_until(T, withheld_twice).await;
    poll(
        "carol's record is gone",
        T,
        Duration::from_millis(250),
        || match lease_of(&sb, "carol") {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        },
    );

    // Forged: a moderator's record live for years without a MAC, one with a made-up MAC, and
    // carol's record replayed (made anew under its name, and copied under another) with its
    // MAC and a renewal years ahead.
    let tag = std::process::id();
    let bare = |name: &str| {
        let mut l = real.clone();
        let meta = l["metadata"].as_object_mut().expect("metadata");
        meta.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations"));
        l["metadata"]["name"] = json!(name);
        l["spec"]["renewTime"] = json!("2099-01-01T00:00:00.000000Z");
        l["spec"]["leaseDurationSeconds"] = json!(3600);
        l
    };
    let real_name = real["metadata"]["name"].as_str().expect("name").to_owned();
    let mut unsigned = bare(&format!("sforged{tag:010}a"));
    if let Some(a) = unsigned["metadata"]["annotations"].as_object_mut() {
        a.remove("poddebug.dev/session-mac");
    }
    let mut made_up = bare(&format!("sforged{tag:010}b"));
    made_up["metadata"]["annotations"]["poddebug.dev/session-mac"] =
        json!("v1.00000000.bm90LWEtcmVhbC1tYWMtYXQtYWxs");
    let mut forged = Forged(Vec::new());
    for l in [
        unsigned,
        made_up,
        bare(&real_name),
        bare(&format!("sforged{tag:010}c")),
    ] {
        forged.create(&l);
    }
    poll_async(
        "the replica counts the forged records",
        T,
        Duration::from_millis(250),
        || async {
            match replica.untrusted("session").await {
                n if n >= 4.0 => Ok(()),
                n => Err(format!("{n}")),
            }
        },
    )
    .await;
    // Not listed, and alice still waits for a moderator: what she types now never runs.
    let listed = sessions(&sb.api, &sb).await.expect("sessions");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["spec"]["user"], ALICE);
    assert_eq!(
        listed[0]["status"]["waitingForModerator"], true,
        "{listed:?}"
    );
    let listed = sessions(&replica.user(ALICE), &sb).await.expect("sessions");
    assert_eq!(listed.len(), 1, "{listed:?}");
    owner.stdin(b"echo forged-$((6*7))\r").await.expect("type");

    // A real moderator: only what alice types from then on runs.
    let _moderator = attach_settled(&carol, &moderated).await;
    let passing_twice = |t: &Transcript| t.stdout_text().matches(PASSING).count() >= 2;
    owner.read_until(T, passing_twice).await;
    owner.stdin(b"echo real-$((7*7))\r").await.expect("type");
    let t = owner.read_until(T, stdout_has("real-49")).await;
    let out = t.stdout_text();
    assert!(out.contains("real-49"), "{out:?}");
    assert!(
        !out.contains("forged-42"),
        "input while forged records stood ran: {out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_user_over_the_session_limit_is_refused_through_the_aggregator_and_every_replica() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("sesslimit");
    // Users of this test alone: the limit counts a user's sessions everywhere.
    let (heavy, other) = (
        format!("limit-{}", std::process::id()),
        format!("limit-other-{}", std::process::id()),
    );
    sb.bind("poddebug:debugger", &heavy);
    sb.bind("poddebug:session-observer", &other);
    let client = as_user(&sb.api, &heavy);
    shell_of(&sb, &client, None).await;
    // Sessions through the aggregator until the server under test refuses (its default
    // --max-sessions-per-user is 20).
    let mut open = vec![attach_settled(&client, &sb.path(TTY)).await];
    let (code, status) = loop {
        assert!(open.len() <= 40, "no limit after 40 sessions");
        match attach(&client, &sb.path(TTY)).await {
            Ok(c) => open.push(c),
            Err(refused) => break refused,
        }
    };
    let limit = open.len();
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{status}");
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 5, "{status}");
    let message = status["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.starts_with(&format!(
            "too many sessions: user \"{heavy}\" has {limit} open"
        )) && message.contains(&format!(
            "at most {limit} at once (--max-sessions-per-user)"
        )),
        "{message}"
    );
    // The Retry-After header reaches the client through the aggregator.
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(Method::GET, &sb.path(TTY), &headers)
        .await
        .expect("upgrade request");
    assert_eq!(resp.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        resp.headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5")
    );
    // Another replica counts the same sessions from the cluster.
    let replica = Replica::start(&[]).await;
    match attach(&replica.user(&heavy), &sb.path(TTY)).await {
        Err((code, status)) => assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{status}"),
        Ok(_) => panic!("the second replica admitted session {}", limit + 1),
    }
    // Another user is not affected.
    let _watching = attach_settled(&as_user(&sb.api, &other), &sb.path(WATCHING)).await;
    // One session ends: the user may open one again, through the other replica.
    let mut one = open.pop().expect("a session");
    one.close().await.expect("close");
    one.finish(T).await;
    poll_async(
        "the ended session frees a place",
        T,
        Duration::from_millis(500),
        || async {
            match attach(&replica.user(&heavy), &sb.path(TTY)).await {
                Ok(c) => Ok(c),
                Err((code, status)) => Err(format!("{code} {status}")),
            }
        },
    )
    .await;
}
