//! Playing recordings by session time, end to end through the real `poddebug-apiserver`
//! against the fake kube-apiserver: a twelve-minute recording written into the server's store
//! as its recorder writes it (synthetic session times, signed with the server's keys) is
//! listed with its duration, verifies, and is served by range: only the part holding the
//! start, cut at the end; a bad range is refused with the Status kube-apiserver gives a bad
//! `pods/log` query.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use http::Method;
use poddebug_tests::synthetic::{fake_server_store, write_session};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir, TestClient};
use serde_json::Value;

const NS: &str = "shop";
const POD: &str = "web";
const BASE: &str = "/apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/recordings";

/// `GET path`: the code and the body as text.
async fn get_text(client: &TestClient, path: &str) -> (u16, String) {
    let (code, _, body) = client
        .request(Method::GET, path, &[], bytes::Bytes::new())
        .await
        .expect("GET");
    (code.as_u16(), String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_long_recording_is_served_by_session_time() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    let dir = TempDir::new("playback");
    let flag = format!("--recording-dir={}", dir.path().display());
    let server = PodDebugServer::start(&fake, fake.pki(), &[flag.as_str()]).await;
    let store = fake_server_store(&fake, dir.path()).await;
    let (id, steps) = write_session(&store, NS, POD, "alice", 12).await;
    let alice = server.front_proxy_client("alice", &["system:authenticated"]);

    // The duration is known without reading the recording: the list carries it.
    let (code, list) = alice.get_json(BASE).await;
    assert_eq!(code, 200, "{list}");
    let item = &list["items"][0];
    assert_eq!(item["metadata"]["name"], id.as_str());
    assert_eq!(item["status"]["durationSeconds"], 666, "{item}");
    // The time table is part of the signed statement, which holds.
    let (code, one) = alice
        .get_json(&format!(
            "/apis/poddebug.dev/v1alpha1/namespaces/{NS}/debugrecordings/{id}"
        ))
        .await;
    assert_eq!(code, 200, "{one}");
    assert_eq!(one["status"]["verification"]["result"], "Verified", "{one}");

    // A range inside minute 7: the header, the keyframe of part 7 (the screen as minute 7
    // began), then part 7 from its start to the end asked for.
    let at = steps[7].at;
    let (code, body) = get_text(&alice, &format!("{BASE}/{id}?start={at}&end={}", at + 0.25)).await;
    assert_eq!(code, 200, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    let header: Value = serde_json::from_str(lines[0]).expect("the header");
    assert_eq!(header["version"], 2);
    let events: Vec<(f64, String, String)> = lines[1..]
        .iter()
        .map(|l| serde_json::from_str(l).expect("an event"))
        .collect();
    let (t, code, keyframe) = &events[0];
    assert_eq!((*t, code.as_str()), (420.5, "o"), "{body}");
    assert!(
        keyframe.contains("step-6") && keyframe.contains("step-0"),
        "{keyframe:?}"
    );
    let rest: String = events[1..].iter().map(|e| e.2.as_str()).collect();
    assert_eq!(events[1].0, 420.5, "from the part's start: {body}");
    assert!(events.iter().all(|e| e.0 <= at + 0.25), "{body}");
    assert!(rest.contains("step-7") && !rest.contains("step-6") && !body.contains("step-8"));
    // The whole recording is still there (no keyframe in it), and a start alone plays to the
    // end.
    let (_, whole) = get_text(&alice, &format!("{BASE}/{id}")).await;
    assert!(whole.contains("step-0") && whole.contains("step-11"));
    assert_eq!(whole.matches("step-3").count(), 1, "printed once: {whole}");
    // 600 s is in minute 9's part (minute 10's begins at 600.5), which drew the screen then.
    let (_, tail) = get_text(&alice, &format!("{BASE}/{id}?start=600")).await;
    assert!(tail.contains("step-9") && tail.contains("step-11"));
    let (_, tail) = get_text(&alice, &format!("{BASE}/{id}?start=601")).await;
    let first_event = tail.lines().nth(2).unwrap_or_default();
    assert!(first_event.starts_with("[600.5,"), "{tail}");
    assert!(tail.contains("step-10") && tail.contains("step-11"));

    // Refusals: not a number (400), out of range (422 with a cause per field).
    let (code, s) = alice.get_json(&format!("{BASE}/{id}?start=5m")).await;
    assert_eq!(
        (code.as_u16(), s["reason"].as_str()),
        (400, Some("BadRequest")),
        "{s}"
    );
    let (code, s) = alice
        .get_json(&format!("{BASE}/{id}?start=-1&end=1e300"))
        .await;
    assert_eq!(
        (code.as_u16(), s["reason"].as_str()),
        (422, Some("Invalid")),
        "{s}"
    );
    let fields: Vec<&str> = s["details"]["causes"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["field"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(fields, ["start", "end"], "{s}");
    assert_eq!(s["details"]["kind"], "DebugRecordingOptions");
    let (code, s) = alice
        .get_json(&format!("{BASE}/{id}?start=20&end=10"))
        .await;
    assert_eq!(code, 422, "{s}");
    // A range of a recording that does not exist is the recording's 404.
    let (code, s) = alice
        .get_json(&format!("{BASE}/20260101T000000Z-0000000000000000?start=1"))
        .await;
    assert_eq!(code, 404, "{s}");
}
