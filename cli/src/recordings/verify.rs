//! `kubectl poddebug recordings verify`: a recording checked here, not by the server. The
//! plugin reads the recording's evidence (its metadata as stored and signed), the public keys
//! and the recording's bytes, and runs `poddebug-recording`'s verification on them: the server
//! only hands over what it stores, so a server (or a bucket) that lies is caught the same way
//! an edited part is. Offline, the three come from files and the cluster is not contacted.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use futures::AsyncReadExt;
use poddebug_client::{Error, Recordings};
use poddebug_recording::signing::{KeySet, PublicKey};
use poddebug_recording::verify::{StreamVerifier, running};
use poddebug_types::RecordingRecord;
use poddebug_types::evidence::{Verification, VerificationStatus};
use serde_json::Value;
use tokio::io::AsyncReadExt as _;

use crate::fail;
use crate::output::{Format, print_serialized};

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  # Verify a recording with the cluster's public keys
  kubectl poddebug recordings verify 20261126t002059z-9f2c41d07ab3e655 -n shop

  # A third party: save the keys, the evidence and the recording, verify anywhere
  kubectl get recordingkeys -o yaml > keys.yaml
  kubectl get --raw /apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/recordings/ID/evidence > evidence.json
  kubectl get --raw /apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/recordings/ID > recording.cast
  kubectl poddebug recordings verify --evidence evidence.json --recording recording.cast --keys keys.yaml";

/// Where the recording comes from.
pub enum Source {
    /// The cluster: recording `id` in `namespace` (of `pod`, found from the recording when
    /// absent).
    Cluster {
        /// The client.
        client: kube::Client,
        /// The namespace.
        namespace: String,
        /// The recording id.
        id: String,
        /// Its pod.
        pod: Option<String>,
    },
    /// Files saved earlier.
    Files {
        /// The evidence (`…/recordings/ID/evidence`).
        evidence: PathBuf,
        /// The recording's bytes.
        recording: PathBuf,
    },
}

/// A JSON or YAML document.
fn document(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .or_else(|_| serde_saphyr::from_str::<Value>(&text).map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: neither JSON nor YAML: {e}", path.display()))
}

/// The keys a document holds: a list (`items`) or one key, each with `publicKey` (base64) and
/// its id as `metadata.name`, which must be the id of the key it names.
fn keys_of(doc: &Value, from: &str) -> Result<KeySet, String> {
    let items: Vec<&Value> = match doc.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None => vec![doc],
    };
    let mut keys = Vec::new();
    for item in items {
        let Some(b64) = item.get("publicKey").and_then(Value::as_str) else {
            return Err(format!("{from}: an entry has no publicKey"));
        };
        let key = PublicKey::from_base64(b64).map_err(|e| format!("{from}: {e}"))?;
        if let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str)
            && name != key.id()
        {
            return Err(format!(
                "{from}: the key named {name} is the key {}",
                key.id()
            ));
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(format!("{from}: no keys"));
    }
    Ok(KeySet::new(keys))
}

/// The record of an evidence document (`DebugRecordingEvidence`, or the record alone).
fn record_of(doc: Value, from: &str) -> Result<RecordingRecord, String> {
    let record = match doc.get("record") {
        Some(r) => r.clone(),
        None => doc,
    };
    serde_json::from_value(record).map_err(|e| format!("{from}: not a recording's evidence: {e}"))
}

fn exit_code(v: Verification) -> ExitCode {
    match v {
        Verification::Verified => ExitCode::SUCCESS,
        Verification::Truncated => ExitCode::from(3),
        Verification::Tampered => ExitCode::from(4),
        Verification::Unsigned => ExitCode::from(5),
    }
}

fn print(
    record: &RecordingRecord,
    v: &VerificationStatus,
    keys_from: &str,
    output: Option<Format>,
) {
    if let Some(f) = output
        && print_serialized(v, f).is_some()
    {
        return;
    }
    println!(
        "recording {} of {}/{} ({}): {}",
        record.id,
        record.namespace,
        record.pod,
        record.user,
        v.result.as_str()
    );
    if let Some(p) = v.part {
        println!("  part: {p}");
    }
    println!("  {}", v.message);
    println!("  keys: {keys_from}");
}

/// Run it (module docs).
pub async fn run(source: Source, keys_file: Option<&Path>, output: Option<Format>) -> ExitCode {
    let from_file = match keys_file {
        Some(p) => match document(p).and_then(|d| keys_of(&d, &p.display().to_string())) {
            Ok(k) => Some((k, p.display().to_string())),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    match source {
        Source::Files {
            evidence,
            recording,
        } => {
            let Some((keys, keys_from)) = from_file else {
                eprintln!("error: offline verification needs --keys");
                return ExitCode::FAILURE;
            };
            let record = match document(&evidence)
                .and_then(|d| record_of(d, &evidence.display().to_string()))
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let mut file = match tokio::fs::File::open(&recording).await {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("error: {}: {e}", recording.display());
                    return ExitCode::FAILURE;
                }
            };
            let mut v = StreamVerifier::new(&record);
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match file.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => v.update(&buf[..n]),
                    Err(e) => {
                        eprintln!("error: {}: {e}", recording.display());
                        return ExitCode::FAILURE;
                    }
                }
            }
            let verdict = v.finish(&record, &keys, running(&record, jiff::Timestamp::now()));
            print(&record, &verdict, &keys_from, output);
            exit_code(verdict.result)
        }
        Source::Cluster {
            client,
            namespace,
            id,
            pod,
        } => {
            let api = Recordings::new(client, &namespace);
            match from_cluster(&api, &id, pod, from_file).await {
                Ok((record, verdict, keys_from)) => {
                    print(&record, &verdict, &keys_from, output);
                    exit_code(verdict.result)
                }
                Err(e) => fail(&e),
            }
        }
    }
}

async fn from_cluster(
    api: &Recordings,
    id: &str,
    pod: Option<String>,
    keys: Option<(KeySet, String)>,
) -> Result<(RecordingRecord, VerificationStatus, String), Error> {
    let pod = match pod {
        Some(p) => p,
        None => api.get(id).await?.spec.pod,
    };
    let record = api.evidence(&pod, id).await?.record;
    let (keys, keys_from) = match keys {
        Some(k) => k,
        None => {
            let list = api.keys().await?;
            let doc = serde_json::to_value(&list).map_err(Error::Decode)?;
            let keys = keys_of(&doc, "recordingkeys").map_err(Error::InvalidParams)?;
            (
                keys,
                format!("the cluster's recordingkeys ({})", list.items.len()),
            )
        }
    };
    let mut bytes = api.bytes(&pod, id).await?;
    let mut v = StreamVerifier::new(&record);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match bytes.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => v.update(&buf[..n]),
            Err(e) => return Err(Error::Stream(Box::new(e))),
        }
    }
    let verdict = v.finish(&record, &keys, running(&record, jiff::Timestamp::now()));
    Ok((record, verdict, keys_from))
}
