//! Long recordings made in a moment: written into the server's store as its recorder writes
//! them (parts of whole event lines, each part's keyframe beside it, the metadata with the time
//! table in its signed statement, the commands), with synthetic session times, signed with the server's own keys (read from
//! its Secrets), so that the server serves and verifies them as its own.

use std::collections::BTreeMap;

use base64::Engine;
use bytes::Bytes;
use poddebug_recording::asciicast::{event_line, event_span};
use poddebug_recording::chain::{hex, sha256};
use poddebug_recording::keys::{Keys, SharedKeys};
use poddebug_recording::recorder::keyframe::Screen;
use poddebug_recording::recorder::store::{Store, new_id};
use poddebug_storage::UntrustedRecords;
use poddebug_storage::record_key::{RecordKey, SharedRecordKey};
use poddebug_types::evidence::{Evidence, PartDigest};
use poddebug_types::{RecordingCommand, RecordingRecord};
use serde_json::Value;

/// The entries of a Secret object (`data`, base64), as bytes.
pub fn secret_entries(secret: &Value) -> BTreeMap<String, Vec<u8>> {
    secret["data"]
        .as_object()
        .map(|d| {
            d.iter()
                .filter_map(|(k, v)| {
                    let b = base64::engine::general_purpose::STANDARD
                        .decode(v.as_str()?)
                        .ok()?;
                    Some((k.clone(), b))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The store at `url` (`file:///DIR`, `s3://BUCKET/PREFIX`) as the server holding the record
/// key Secret `record_key` and the signing keys Secret `signing_keys` writes it.
pub fn server_store(url: &str, record_key: &Value, signing_keys: &Value) -> Store {
    let key = secret_entries(record_key)
        .get(poddebug_storage::record_key::SECRET_KEY)
        .map(|b| RecordKey::from_bytes(b))
        .expect("the record key Secret holds a key");
    let keys = Keys::from_entries(&secret_entries(signing_keys)).expect("the signing keys");
    // An S3 store's client takes the process's crypto provider, as the server installs it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Store::from_url(url)
        .expect("the store")
        .authenticated(SharedRecordKey::loaded(key), UntrustedRecords::default())
        .signed_with(SharedKeys::loaded(keys))
}

/// One command of a synthetic session.
#[derive(Clone, Debug)]
pub struct Step {
    /// Session time it is submitted at.
    pub at: f64,
    /// What is typed.
    pub line: String,
    /// What it prints.
    pub output: String,
}

/// A session of `minutes` minutes on `namespace/pod`, one part a minute: at second 5 of each
/// minute `k` the command `echo step-k` is typed (an input event a character, a prompt
/// before it) and prints `step-k`, then nothing until the next minute (idle time for a player
/// to skip). Answers its id and the steps.
pub async fn write_session(
    store: &Store,
    namespace: &str,
    pod: &str,
    user: &str,
    minutes: u32,
) -> (String, Vec<Step>) {
    let start = jiff::Timestamp::now();
    let id = new_id(start);
    let mut meta = RecordingRecord {
        id: id.clone(),
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: "shell".to_owned(),
        user: user.to_owned(),
        protocol: "websocket/v5.channel.k8s.io".to_owned(),
        start: start.to_string(),
        ..Default::default()
    };
    let header = serde_json::json!({
        "version": 2, "width": 80, "height": 24, "timestamp": start.as_second(),
        "title": format!("{namespace}/{pod}/shell"),
    });
    let mut steps = Vec::new();
    let mut digests = Vec::new();
    // The screen its output draws, for each part's keyframe, as the recorder keeps it.
    let mut screen = Screen::new(80, 24);
    let mut bytes = 0u64;
    for k in 0..minutes {
        let base = f64::from(k * 60);
        let mut part = Vec::new();
        if k == 0 {
            part.extend(serde_json::to_vec(&header).unwrap_or_default());
            part.push(b'\n');
        }
        let line = format!("echo step-{k}");
        part.extend(event_line(base + 0.5, "o", "$ "));
        for (i, c) in line.chars().enumerate() {
            let t = base + 1.0 + 0.1 * i as f64;
            part.extend(event_line(t, "i", &c.to_string()));
            part.extend(event_line(t + 0.01, "o", &c.to_string()));
        }
        let at = base + 5.0;
        part.extend(event_line(at, "i", "\r"));
        part.extend(event_line(at + 0.01, "o", "\r\n"));
        let output = format!("step-{k}");
        part.extend(event_line(at + 0.2, "o", &format!("{output}\r\n")));
        part.extend(event_line(at + 0.3, "o", "$ "));
        let keyframe = (k > 0).then(|| screen.keyframe());
        if let Some(kf) = &keyframe {
            store
                .write_keyframe(&meta, k, Bytes::from(kf.clone()))
                .await
                .expect("write a keyframe");
        }
        for line in part.split(|b| *b == b'\n') {
            if let Ok((_, code, data)) = serde_json::from_slice::<(f64, String, String)>(line)
                && code == "o"
            {
                screen.feed(data.as_bytes());
            }
        }
        let span = event_span(&part);
        digests.push(PartDigest {
            bytes: part.len() as u64,
            sha256: hex(&sha256(&part)),
            start_micros: span.map(|s| s.0),
            end_micros: span.map(|s| s.1),
            keyframe_sha256: keyframe.map(|kf| hex(&sha256(kf.as_bytes()))),
        });
        bytes += part.len() as u64;
        store
            .write_part(&meta, k, Bytes::from(part))
            .await
            .expect("write a part");
        steps.push(Step { at, line, output });
    }
    let commands: Vec<RecordingCommand> = steps
        .iter()
        .map(|s| RecordingCommand {
            offset: s.at,
            line: s.line.clone(),
            recalled: false,
        })
        .collect();
    store
        .write_commands(&meta, &commands, 0)
        .await
        .expect("write the commands");
    // Its search index, as the writer makes one: the commands and the output's lines.
    let mut index = poddebug_recording::index::IndexBuilder::new();
    for (c, s) in commands.iter().zip(&steps) {
        index.command(c);
        index.output(s.at, s.output.as_bytes());
    }
    store
        .write_index(&meta, &index.to_json())
        .await
        .expect("write the index");
    meta.command_count = Some(u32::try_from(commands.len()).unwrap_or(u32::MAX));
    meta.bytes = bytes;
    meta.end = Some(
        start
            .checked_add(jiff::SignedDuration::from_secs(i64::from(minutes) * 60))
            .unwrap_or(start)
            .to_string(),
    );
    meta.exit_code = Some(0);
    meta.evidence = Some(Evidence {
        parts: digests,
        complete: true,
        ..Default::default()
    });
    store.write_meta(&meta).await.expect("write the metadata");
    (id, steps)
}

/// The namespace the server keeps its Secrets in.
pub const SERVER_NAMESPACE: &str = "poddebug-system";

/// The store in `dir` as the server started on `fake` with `--recording-dir=DIR` writes it,
/// once that server has made its keys (a bounded wait).
pub async fn fake_server_store(fake: &crate::FakeKube, dir: &std::path::Path) -> Store {
    let guard = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let key = fake.secret(SERVER_NAMESPACE, poddebug_storage::record_key::SECRET_NAME);
        let signing = fake.secret(
            SERVER_NAMESPACE,
            poddebug_storage::signing_secret::SECRET_NAME,
        );
        if let (Some(k), Some(s)) = (key, signing) {
            return server_store(&format!("file://{}", dir.display()), &k, &s);
        }
        assert!(
            std::time::Instant::now() < guard,
            "the server made no record key or signing keys"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
