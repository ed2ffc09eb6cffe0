//! The recording signing keys rotated in their Secret while the server runs, as
//! docs/operator-guide.md describes it: a new key added (trusted, not yet signing), then made
//! the active one; the next recording is signed with it, with no restart. Run alone (CI's step
//! with the fault tests): the keys are the cluster's, and another test's replica that had not
//! yet read them again would not trust a recording signed meanwhile.

use super::recordings::{ONE_LINE, one_line_session};
use super::support::*;

use std::time::Duration;

use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::{Value, json};

const GV: &str = "/apis/poddebug.dev/v1alpha1";
const SECRET: &str = "/api/v1/namespaces/poddebug-system/secrets/poddebug-recording-signing-keys";

/// Merges `data` into the Secret's data, as `kubectl patch --type=merge` does.
async fn patch_secret(sb: &Sandbox, data: Value) {
    let (code, _, body) = sb
        .api
        .request(
            Method::PATCH,
            SECRET,
            &[("content-type", "application/merge-patch+json")],
            bytes::Bytes::from(json!({ "data": data }).to_string()),
        )
        .await
        .expect("patch the Secret");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

/// Waits (bounded: a resync period is 30s by default) until `recordingkeys`, through the
/// aggregator, satisfies `want`.
async fn keys_until(sb: &Sandbox, what: &str, want: impl Fn(&[Value]) -> bool) {
    poll_async(
        what,
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let (code, keys) = sb.api.get_json(&format!("{GV}/recordingkeys")).await;
            let items = keys["items"].as_array().cloned().unwrap_or_default();
            if code == StatusCode::OK && want(&items) {
                Ok(())
            } else {
                Err(format!("{code} {keys}"))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG) and a server that records"]
async fn a_key_added_then_made_active_signs_the_next_recording_without_a_restart() {
    if !enabled() {
        return;
    }
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let sb = Sandbox::new("rotate");
    let fresh = poddebug_recording::keys::Keys::new_entries().expect("a key");
    let id = String::from_utf8(fresh["active"].clone()).expect("an id");
    let named = |k: &Value| k["metadata"]["name"] == id.as_str();

    // 1. The new key added, not yet active: trusted (published) once read again.
    let pk8 = format!("{id}.pk8");
    patch_secret(&sb, json!({ &pk8: b64(&fresh[&pk8]) })).await;
    keys_until(&sb, "the new key is published, not active", |items| {
        items.iter().any(|k| named(k) && k["active"] == false)
    })
    .await;
    // 2. Made the active one.
    patch_secret(&sb, json!({ "active": b64(id.as_bytes()) })).await;
    keys_until(&sb, "the new key is the active one", |items| {
        items.iter().any(|k| named(k) && k["active"] == true)
    })
    .await;

    // The next recording is signed with it, and verifies.
    sb.create_running(
        "after",
        &json!({"container": {"image": BUSYBOX, "command": ["sh", "-c", ONE_LINE], "stdin": true},
                "targetContainerName": "app"}),
    )
    .await;
    let (t, item) = one_line_session(&sb, "after", b"rotated\n").await;
    assert!(
        t.stdout_text().starts_with("out:rotated\n"),
        "{}",
        t.stdout_text()
    );
    let rec = item["metadata"]["name"].as_str().expect("an id");
    let (code, one) = sb
        .api
        .get_json(&format!("{GV}/namespaces/{}/debugrecordings/{rec}", sb.ns))
        .await;
    assert_eq!(code, StatusCode::OK, "{one}");
    assert_eq!(one["status"]["verification"]["result"], "Verified", "{one}");
    assert_eq!(one["status"]["verification"]["keyId"], id.as_str(), "{one}");
}
