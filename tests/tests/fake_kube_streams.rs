//! Streams and side channels of the fake: events, logs (follow), exec over WebSocket, shutdown
//! on drop, and the real kubectl (get, patch, logs, exec). Attach has its own tests.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, StatusCode};
use poddebug_tests::{
    ADMIN_TOKEN, ContainerState, ExecBehaviour, FakeKube, PODDEBUG_TOKEN, PODDEBUG_USER, TestClient,
};
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

const NS: &str = "ephdemo";
const POD: &str = "target";
const EC_PATH: &str = "/api/v1/namespaces/ephdemo/pods/target/ephemeralcontainers";
const SMP: &str = "application/strategic-merge-patch+json";
const T: Duration = Duration::from_secs(5);

async fn fake_with_pod() -> FakeKube {
    let fake = FakeKube::start().await;
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    fake
}

fn ec(container: Value) -> Value {
    json!({"spec": {"ephemeralContainers": [container]}})
}

async fn add_running_ec(fake: &FakeKube, name: &str) {
    let admin = fake.client(ADMIN_TOKEN);
    let (code, body) = admin
        .patch_json(EC_PATH, SMP, &ec(json!({"name": name, "image": "busybox", "command": ["sh"], "stdin": true, "tty": true, "targetContainerName": "app"})))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert!(
        fake.wait_until(T, |f| f.container_state(NS, POD, name) == Some("running"))
            .await
    );
}

// ---------- events, logs, exec, attach ----------

#[tokio::test]
async fn events_are_stored_in_both_apis() {
    let fake = FakeKube::start().await;
    let sa = fake.client(PODDEBUG_TOKEN);
    let (code, core) = sa.post_json("/api/v1/namespaces/default/events", &json!({"metadata": {"generateName": "target."}, "reason": "DebugContainerCreated", "message": "m", "involvedObject": {"kind": "Pod", "name": "target"}})).await;
    assert_eq!(code, StatusCode::CREATED);
    assert!(
        core["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .starts_with("target.")
    );
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"}, "reason": "R", "note": "n", "action": "Create",
        "reportingController": "poddebug.dev/apiserver", "reportingInstance": "x", "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal"});
    let (code, _) = sa
        .post_json("/apis/events.k8s.io/v1/namespaces/default/events", &ev)
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, body) = sa
        .post_json("/apis/events.k8s.io/v1/namespaces/default/events", &ev)
        .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::CONFLICT, Some("AlreadyExists"))
    );
    let (code, patched) = sa
        .patch_json(
            "/apis/events.k8s.io/v1/namespaces/default/events/e1",
            "application/merge-patch+json",
            &json!({"series": {"count": 2}}),
        )
        .await;
    assert_eq!(
        (code, patched["series"]["count"].as_i64()),
        (StatusCode::OK, Some(2))
    );
    let events = fake.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1]["reportingController"], "poddebug.dev/apiserver");
    assert_eq!(events[1]["series"]["count"], 2);
}

#[tokio::test]
async fn logs_follow_and_options() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    fake.append_log(NS, POD, "app", "one\ntwo\nthree\n");
    let (code, _, body) = admin
        .request(
            Method::GET,
            "/api/v1/namespaces/ephdemo/pods/target/log",
            &[],
            Bytes::new(),
        )
        .await
        .expect("log");
    assert_eq!(
        (code, body.as_ref()),
        (StatusCode::OK, b"one\ntwo\nthree\n".as_slice())
    );
    let (_, _, body) = admin
        .request(
            Method::GET,
            "/api/v1/namespaces/ephdemo/pods/target/log?tailLines=1&timestamps=true",
            &[],
            Bytes::new(),
        )
        .await
        .expect("log");
    let text = String::from_utf8_lossy(&body);
    assert!(text.ends_with("Z three\n") && text.len() > 20, "{text}");
    let (code, body) = admin
        .get_json("/api/v1/namespaces/ephdemo/pods/target/log?container=nope")
        .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("container nope is not valid for pod target")
        )
    );

    add_running_ec(&fake, "dbg").await;
    let mut follow = admin
        .stream(
            Method::GET,
            "/api/v1/namespaces/ephdemo/pods/target/log?container=dbg&follow=true",
            &[],
            Bytes::new(),
        )
        .await
        .expect("follow");
    fake.append_log(NS, POD, "dbg", "hello\n");
    assert_eq!(follow.next_line(T).await.as_deref(), Some("hello"));
    fake.append_log(NS, POD, "dbg", "bye\n");
    fake.set_ec_state(NS, POD, "dbg", ContainerState::terminated(0, "Completed"));
    assert_eq!(follow.next_line(T).await.as_deref(), Some("bye"));
    assert!(
        follow.next_line(T).await.is_none() && follow.ended(),
        "follow ends with the container"
    );

    let (_, body) = admin
        .get_json("/api/v1/namespaces/ephdemo/pods/target/log")
        .await;
    assert_eq!(
        body,
        json!("one\ntwo\nthree\n"),
        "one container: no name needed"
    );
    fake.update_pod(NS, POD, |p| {
        p["spec"]["containers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "side", "image": "x"}))
    });
    let (code, body) = admin
        .get_json("/api/v1/namespaces/ephdemo/pods/target/log")
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["message"],
        "a container name must be specified for pod target, choose one of: [app side] or one of the ephemeral containers: [dbg]"
    );
}

/// Runs one exec over WebSocket and returns the frames received (channel byte kept).
async fn exec_frames(fake: &FakeKube, query: &str) -> Result<Vec<Vec<u8>>, (StatusCode, Value)> {
    let client = fake.client(PODDEBUG_TOKEN);
    let headers = TestClient::websocket_headers("v5.channel.k8s.io, v4.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let up = client
        .upgrade(
            Method::GET,
            &format!("/api/v1/namespaces/ephdemo/pods/target/exec?{query}"),
            &headers,
        )
        .await
        .expect("upgrade");
    let Some(io) = up.io else {
        return Err((
            up.status,
            serde_json::from_slice(&up.body).unwrap_or(Value::Null),
        ));
    };
    assert_eq!(up.headers["sec-websocket-protocol"], "v5.channel.k8s.io");
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    let mut frames = Vec::new();
    while let Ok(Some(Ok(msg))) = tokio::time::timeout(T, ws.next()).await {
        match msg {
            Message::Binary(b) => frames.push(b.to_vec()),
            Message::Close(_) => break,
            _ => {}
        }
    }
    Ok(frames)
}

fn error_channel(frames: &[Vec<u8>]) -> Value {
    let f = frames
        .iter()
        .find(|f| f.first() == Some(&3))
        .expect("error channel frame");
    serde_json::from_slice(&f[1..]).expect("status json")
}

/// The exec query running `command` in `container`, with stdout and stderr.
fn exec_query(container: &str, command: &[String]) -> String {
    let mut q = format!("container={container}&stdout=true&stderr=true");
    for c in command {
        q.push_str("&command=");
        q.extend(percent_encoding::utf8_percent_encode(
            c,
            percent_encoding::NON_ALPHANUMERIC,
        ));
    }
    q
}

/// poddebug's stop script with this record.
fn stop_script(record: &str) -> Vec<String> {
    poddebug_storage::StopInvocation {
        grace_secs: 1,
        record: record.to_owned(),
        message_path: "/dev/termination-log".to_owned(),
    }
    .command()
}

#[tokio::test]
async fn exec_plays_the_stop_script_and_nothing_else() {
    let fake = fake_with_pod().await;
    add_running_ec(&fake, "dbg").await;
    // Any other shell command, however deadly it looks, changes nothing.
    let kill_all = ["sh", "-c", "kill -TERM -1"].map(str::to_owned);
    let frames = exec_frames(&fake, &exec_query("dbg", &kill_all))
        .await
        .expect("exec");
    assert_eq!(frames[0], [1], "an empty stdout frame first");
    assert_eq!(
        error_channel(&frames),
        json!({"metadata": {}, "status": "Success"})
    );
    assert_eq!(fake.container_state(NS, POD, "dbg"), Some("running"));

    // The stop script: its record, then the debug container ends.
    let frames = exec_frames(&fake, &exec_query("dbg", &stop_script("the record")))
        .await
        .expect("exec");
    assert_eq!(
        error_channel(&frames),
        json!({"metadata": {}, "status": "Success"})
    );
    let pod = fake.pod_json(NS, POD).expect("pod");
    let st = &pod["status"]["ephemeralContainerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        (
            st["exitCode"].as_i64(),
            st["reason"].as_str(),
            st["message"].as_str()
        ),
        (Some(143), Some("Error"), Some("the record\n")),
        "the termination message file is reported"
    );
    assert!(
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object(),
        "the target keeps running"
    );
    let record = fake.execs().pop().expect("recorded");
    assert_eq!(
        (record.container.as_str(), record.user.as_str()),
        ("dbg", PODDEBUG_USER)
    );
    assert_eq!(record.command, stop_script("the record"));

    // The container is gone now: exec fails like kube's.
    let (code, body) = exec_frames(
        &fake,
        "container=dbg&command=sh&command=-c&command=true&stdout=true",
    )
    .await
    .expect_err("not running");
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body["message"],
        "Internal error occurred: error executing command in container: container is not created or running"
    );
}

#[tokio::test]
async fn the_stop_script_cannot_end_an_own_pid_1() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let (code, body) = admin
        .patch_json(
            EC_PATH,
            SMP,
            &ec(json!({"name": "own", "image": "busybox", "command": ["top"]})),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert!(
        fake.wait_until(T, |f| f.container_state(NS, POD, "own") == Some("running"))
            .await
    );
    let frames = exec_frames(&fake, &exec_query("own", &stop_script("rec")))
        .await
        .expect("exec");
    let status = error_channel(&frames);
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
    assert_eq!(fake.container_state(NS, POD, "own"), Some("running"));
    // The record was written all the same, and shows once it ends by itself.
    assert!(fake.set_ec_state(NS, POD, "own", ContainerState::terminated(0, "Completed")));
    let pod = fake.pod_json(NS, POD).expect("pod");
    assert_eq!(
        pod["status"]["ephemeralContainerStatuses"][0]["state"]["terminated"]["message"],
        "rec\n"
    );
}

#[tokio::test]
async fn exec_behaviours() {
    let fake = fake_with_pod().await;
    add_running_ec(&fake, "dbg").await;
    let q = "container=dbg&command=sh&command=-c&command=stop&stdout=true";
    fake.set_exec_behaviour(ExecBehaviour::NoShell);
    let status = error_channel(&exec_frames(&fake, q).await.expect("exec"));
    assert_eq!(status["status"], "Failure");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("exec: \"sh\": executable file not found in $PATH"),
        "{status}"
    );
    fake.set_exec_behaviour(ExecBehaviour::ExitCode(2));
    let status = error_channel(&exec_frames(&fake, q).await.expect("exec"));
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "ExitCode", "message": "2"})
    );
    fake.set_exec_behaviour(ExecBehaviour::Ignores);
    let status = error_channel(
        &exec_frames(&fake, &exec_query("dbg", &stop_script("rec")))
            .await
            .expect("exec"),
    );
    assert_eq!(status["status"], "Success");
    assert_eq!(fake.container_state(NS, POD, "dbg"), Some("running"));

    // create is checked on top of get for a WebSocket exec (kube ≥ 1.35).
    fake.set_policy(|a| !(a.verb == "create" && a.subresource == "exec"));
    let (code, body) = exec_frames(&fake, q).await.expect_err("forbidden");
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "pods \"target\" is forbidden: User \"system:serviceaccount:poddebug-system:poddebug\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"ephdemo\""
    );
}

#[tokio::test]
async fn dropping_the_fake_ends_open_streams() {
    let fake = fake_with_pod().await;
    let admin = fake.client(ADMIN_TOKEN);
    let mut w = admin
        .stream(Method::GET, "/api/v1/pods?watch=true", &[], Bytes::new())
        .await
        .expect("watch");
    assert!(w.next_json(T).await.is_some());
    drop(fake);
    let start = std::time::Instant::now();
    while w.next_line(T).await.is_some() {}
    assert!(start.elapsed() < T, "the stream ended on drop");
    assert!(
        admin
            .request(Method::GET, "/api/v1/pods", &[], Bytes::new())
            .await
            .is_err(),
        "nothing listens any more"
    );
}

// ---------- the real kubectl ----------

struct Kubectl {
    kubeconfig: std::path::PathBuf,
    cache: poddebug_tests::TempDir,
}

impl Kubectl {
    fn new(fake: &FakeKube) -> Option<Kubectl> {
        if !std::path::Path::new("/usr/bin/kubectl").exists() {
            poddebug_tests::capability::missing("/usr/bin/kubectl");
            return None;
        }
        Some(Kubectl {
            kubeconfig: fake.write_kubeconfig(ADMIN_TOKEN),
            cache: poddebug_tests::TempDir::new("kubectl-cache"),
        })
    }

    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new("/usr/bin/kubectl")
                .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
                .arg(format!("--cache-dir={}", self.cache.path().display()))
                .args(args)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl finished in time")
        .expect("kubectl ran");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_patches_logs_and_execs() {
    let fake = fake_with_pod().await;
    let Some(k) = Kubectl::new(&fake) else { return };
    let (ok, out, err) = k.run(&["get", "pods", "-n", NS, "-o", "json"]).await;
    assert!(ok, "{err}");
    let list: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(list["items"][0]["metadata"]["name"], POD);

    let patch = r#"{"spec":{"ephemeralContainers":[{"name":"debugger","image":"busybox","command":["sh"],"stdin":true,"tty":true,"targetContainerName":"app"}]}}"#;
    let (ok, out, err) = k
        .run(&[
            "patch",
            "pod",
            POD,
            "-n",
            NS,
            "--subresource=ephemeralcontainers",
            "--type=strategic",
            "-p",
            patch,
        ])
        .await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/target patched");

    let bad = r#"{"spec":{"ephemeralContainers":[{"name":"bad-ports","image":"busybox","ports":[{"containerPort":8080}]}]}}"#;
    let (ok, _, err) = k
        .run(&[
            "patch",
            "pod",
            POD,
            "-n",
            NS,
            "--subresource=ephemeralcontainers",
            "--type=strategic",
            "-p",
            bad,
        ])
        .await;
    assert!(!ok);
    assert!(
        err.contains("The Pod \"target\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"),
        "{err}"
    );

    assert!(
        fake.wait_until(T, |f| f.container_state(NS, POD, "debugger")
            == Some("running"))
            .await
    );
    fake.append_log(NS, POD, "debugger", "from the debugger\n");
    let (ok, out, err) = k.run(&["logs", "-n", NS, POD, "-c", "debugger"]).await;
    assert!(ok, "{err}");
    assert_eq!(out, "from the debugger\n");

    let (ok, _, err) = k
        .run(&[
            "exec",
            "-n",
            NS,
            POD,
            "-c",
            "debugger",
            "--",
            "sh",
            "-c",
            "kill -TERM -1",
        ])
        .await;
    assert!(ok, "{err}");
    // The fake runs no shell: only poddebug's stop script has an effect.
    assert_eq!(fake.container_state(NS, POD, "debugger"), Some("running"));
    assert_eq!(
        fake.execs().last().map(|e| e.protocol.clone()).as_deref(),
        Some("v5.channel.k8s.io")
    );
}

#[tokio::test]
async fn core_events_with_an_event_time_need_the_reporting_fields() {
    let fake = FakeKube::start().await;
    let sa = fake.client(PODDEBUG_TOKEN);
    let ev = json!({"metadata": {"name": "target.1"}, "reason": "DebugContainerCreated", "message": "m",
        "involvedObject": {"kind": "Pod", "name": "target", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "poddebug", "action": "Create"});
    let (code, status) = sa.post_json("/api/v1/namespaces/default/events", &ev).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "reportingInstance");
    let mut ok = ev.clone();
    ok["reportingInstance"] = json!("poddebug-apiserver-0");
    let (code, _) = sa.post_json("/api/v1/namespaces/default/events", &ok).await;
    assert_eq!(code, StatusCode::CREATED);
}
