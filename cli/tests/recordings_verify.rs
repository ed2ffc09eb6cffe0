//! `kubectl poddebug recordings verify`, end to end: the real server recording into a
//! directory, the fake kube-apiserver, the plugin verifying on its own side (online with the
//! cluster's keys, offline from files), an edited part caught and named, and the server's own
//! `status.verification` reused until a part changes.
//!
//! Needs the server binary: `cargo build -p poddebug-apiserver` first.

mod piped;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir, TestClient};
use serde_json::Value;

use piped::run;

const GV: &str = "/apis/poddebug.dev/v1alpha1";
const T: Duration = Duration::from_secs(30);

async fn raw(client: &TestClient, path: &str) -> (StatusCode, Vec<u8>) {
    let (code, _, body) = client
        .request(Method::GET, path, &[], Vec::new())
        .await
        .expect("request");
    (code, body.to_vec())
}

/// The one recording of `shop/web` once it has ended and the server's keys answer.
async fn ended_recording(client: &TestClient) -> String {
    let deadline = Instant::now() + T;
    loop {
        let (_, list) = client
            .get_json(&format!("{GV}/namespaces/shop/pods/web/recordings"))
            .await;
        let (keys, _) = raw(client, &format!("{GV}/recordingkeys")).await;
        if let Some(item) = list["items"].as_array().and_then(|i| i.first())
            && item["status"]["end"].is_string()
            && keys == StatusCode::OK
        {
            return item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
        assert!(Instant::now() < deadline, "no ended recording: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `poddebug_recording_verifications_total{outcome=…}`.
async fn verifications(client: &TestClient, outcome: &str) -> u64 {
    let (code, body) = raw(client, "/metrics").await;
    assert_eq!(code, StatusCode::OK);
    let text = String::from_utf8_lossy(&body).into_owned();
    let prefix = format!("poddebug_recording_verifications_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn server_verdict(client: &TestClient, id: &str) -> Value {
    let (code, obj) = client
        .get_json(&format!("{GV}/namespaces/shop/debugrecordings/{id}"))
        .await;
    assert_eq!(code, StatusCode::OK, "{obj}");
    obj["status"]["verification"].clone()
}

fn part_files(dir: &Path, id: &str) -> Vec<PathBuf> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dir.join("shop").join("web").join(id))
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "part"))
        .collect();
    parts.sort();
    parts
}

#[tokio::test]
async fn a_recording_verifies_in_the_plugin_online_and_offline_and_an_edited_part_is_named() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let store = TempDir::new("recordings-verify-store");
    let flag = format!("--recording-dir={}", store.path().display());
    // No cached decisions: the test takes a permission away midway and gives it back.
    let server = PodDebugServer::start(
        &fake,
        &pki,
        &[
            &flag,
            "--authorization-webhook-cache-authorized-ttl=0s",
            "--authorization-webhook-cache-unauthorized-ttl=0s",
        ],
    )
    .await;
    let dir = TempDir::new("recordings-verify");
    let kc = server.write_kubeconfig(dir.path(), "auditor", &["devs"], "shop");
    let client = server.front_proxy_client("auditor", &["devs"]);

    // A recorded session: a debug container, and a console typed into.
    let (code, _, err) = run(
        &kc,
        &[
            "web",
            "-c",
            "dbg",
            "--image",
            "busybox:1.36",
            "--wait",
            "--",
            "sh",
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(
        &kc,
        &["attach", "web", "dbg", "-i"],
        Some("echo evidence\n"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("echo evidence"), "{out}");
    let id = ended_recording(&client).await;

    // Online, with the cluster's keys; the pod found from the recording.
    let (code, out, err) = run(&kc, &["recordings", "verify", &id], None).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("recording {id} of shop/web (auditor): Verified")),
        "{out}"
    );
    assert!(out.contains("the cluster's recordingkeys (1)"), "{out}");
    let (code, out, err) = run(
        &kc,
        &["recordings", "verify", &id, "--pod", "web", "-o", "json"],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let verdict: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(verdict["result"], "Verified", "{verdict}");

    // The public keys: one, active, and its object by name.
    let (code, keys) = client.get_json(&format!("{GV}/recordingkeys")).await;
    assert_eq!(code, StatusCode::OK, "{keys}");
    assert_eq!(keys["kind"], "RecordingKeyList");
    assert_eq!(keys["items"][0]["active"], true);
    assert_eq!(keys["items"][0]["algorithm"], "Ed25519");
    let key_id = keys["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(verdict["keyId"], key_id);
    let (code, one) = client
        .get_json(&format!("{GV}/recordingkeys/{key_id}"))
        .await;
    assert_eq!(
        (code, one["kind"].as_str()),
        (StatusCode::OK, Some("RecordingKey"))
    );
    let (code, _) = client
        .get_json(&format!("{GV}/recordingkeys/0000000000000000"))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // Offline: the three saved as a third party would, no cluster (no kubeconfig) at all.
    let file = format!("{GV}/namespaces/shop/pods/web/recordings/{id}");
    let (code, evidence) = raw(&client, &format!("{file}/evidence")).await;
    assert_eq!(code, StatusCode::OK);
    let e: Value = serde_json::from_slice(&evidence).expect("evidence JSON");
    assert_eq!(e["kind"], "DebugRecordingEvidence");
    assert!(
        e["record"]["mac"].is_null(),
        "the MAC is the server's own: {e}"
    );
    let (_, recording) = raw(&client, &file).await;
    let paths = [
        (dir.path().join("evidence.json"), evidence),
        (dir.path().join("recording.cast"), recording),
        (dir.path().join("keys.json"), keys.to_string().into_bytes()),
    ];
    for (p, data) in &paths {
        std::fs::write(p, data).expect("write");
    }
    let arg = |i: usize| paths[i].0.to_string_lossy().into_owned();
    let nowhere = dir.path().join("no-kubeconfig");
    let offline = |keys: String| {
        let nowhere = nowhere.clone();
        let (e, r) = (arg(0), arg(1));
        async move {
            run(
                &nowhere,
                &[
                    "recordings",
                    "verify",
                    "--evidence",
                    &e,
                    "--recording",
                    &r,
                    "--keys",
                    &keys,
                ],
                None,
            )
            .await
        }
    };
    let (code, out, err) = offline(arg(2)).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(": Verified"), "{out}");
    // Keys the recording was not signed with: the signature does not hold.
    let (other, _) = poddebug_recording::signing::SigningKey::generate().expect("key");
    let stranger = dir.path().join("stranger.json");
    let pk = other.public_key();
    std::fs::write(
        &stranger,
        serde_json::json!({"metadata": {"name": pk.id()}, "publicKey": pk.to_base64()}).to_string(),
    )
    .expect("write");
    let (code, out, _) = offline(stranger.to_string_lossy().into_owned()).await;
    assert_eq!(code, Some(4), "{out}");
    assert!(out.contains(": Tampered"), "{out}");
    // A key file that names a key by another key's id is refused.
    std::fs::write(
        &stranger,
        serde_json::json!({"metadata": {"name": key_id}, "publicKey": pk.to_base64()}).to_string(),
    )
    .expect("write");
    let (code, _, err) = offline(stranger.to_string_lossy().into_owned()).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("the key named {key_id} is the key {}", pk.id())),
        "{err}"
    );

    // One verb short: without `list` on recordingkeys the cluster's keys are refused, and the
    // verification with them fails; with the keys as a file it still verifies.
    fake.set_policy(|a| !a.is("list", "recordingkeys"));
    let (code, out, err) = run(&kc, &["recordings", "verify", &id], None).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("Forbidden") && err.contains("recordingkeys"),
        "{err}"
    );
    let (code, out, err) = run(&kc, &["recordings", "verify", &id, "--keys", &arg(2)], None).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("keys: {}", arg(2))), "{out}");
    fake.allow_all();

    // The server's verdict: hashed once, then reused while the parts are unchanged.
    let hashed = verifications(&client, "hashed").await;
    let reused = verifications(&client, "reused").await;
    assert_eq!(server_verdict(&client, &id).await["result"], "Verified");
    assert_eq!(server_verdict(&client, &id).await["result"], "Verified");
    assert_eq!(server_verdict(&client, &id).await["result"], "Verified");
    let (h, r) = (
        verifications(&client, "hashed").await,
        verifications(&client, "reused").await,
    );
    assert!(
        h - hashed <= 1 && r - reused >= 2,
        "hashed {hashed}→{h}, reused {reused}→{r}"
    );

    // One byte of the first part changed in the store, its size kept.
    let parts = part_files(store.path(), &id);
    assert!(!parts.is_empty(), "no parts in {}", store.path().display());
    let mut bytes = std::fs::read(&parts[0]).expect("part");
    let at = bytes
        .iter()
        .rposition(|b| *b == b'e')
        .expect("an 'e' in the part");
    bytes[at] = b'E';
    std::fs::write(&parts[0], &bytes).expect("rewrite the part");

    let (code, out, _) = run(&kc, &["recordings", "verify", &id], None).await;
    assert_eq!(code, Some(4), "{out}");
    assert!(
        out.contains(": Tampered") && out.contains("part: 0"),
        "{out}"
    );
    // The server sees it too, at the next read: the part's listing changed.
    let v = server_verdict(&client, &id).await;
    assert_eq!(
        (v["result"].as_str(), v["part"].as_u64()),
        (Some("Tampered"), Some(0)),
        "{v}"
    );
    assert_eq!(verifications(&client, "hashed").await, h + 1);
}
