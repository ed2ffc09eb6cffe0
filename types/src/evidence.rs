//! What makes a recording evidence: the SHA-256 of each part, the hash chain over them and the
//! Ed25519 signature of the recording's metadata (its [`Evidence`]), how a recording verified
//! ([`VerificationStatus`]), and the public keys a verifier needs ([`RecordingKey`]).
//!
//! These are the data as stored and served; `poddebug-recording` computes, signs and verifies
//! them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::API_VERSION;

/// Kind of one public key.
pub const KIND_RECORDING_KEY: &str = "RecordingKey";
/// Kind of the list of public keys.
pub const KIND_RECORDING_KEY_LIST: &str = "RecordingKeyList";
/// Kind of a recording's signed metadata as a verifier reads it.
pub const KIND_RECORDING_EVIDENCE: &str = "DebugRecordingEvidence";
/// The one signature algorithm.
pub const ED25519: &str = "Ed25519";

/// One part of a recording as its metadata vouches for it: its size and SHA-256, and the
/// session time it spans (the recording's time table, so that a player reads only the parts
/// that hold the time it seeks to). Part `k` of the list is the object `ID/k.part` (eight
/// digits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingPartDigest")]
pub struct PartDigest {
    /// The part's size in bytes.
    pub bytes: u64,
    /// SHA-256 of the part (lower-case hex).
    pub sha256: String,
    /// Session time of the part's first event, in microseconds (absent: a part with no event,
    /// or written by an earlier version). Integers, so that a verifier in any language
    /// re-creates the signed statement byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_micros: Option<u64>,
    /// Session time of the part's last event, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_micros: Option<u64>,
    /// SHA-256 (lower-case hex) of the part's keyframe, the object `ID/k.key` beside it: what
    /// redraws the screen as it was when the part begins (absent for the first part, and for
    /// parts written by an earlier version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyframe_sha256: Option<String>,
}

/// The signed statement a recording's metadata carries: the SHA-256 of every part written so
/// far, the head of the hash chain over them, whether the recording is complete; signed with
/// the server's Ed25519 key together with the recording's facts (who, where, when, how it
/// ended). Rewritten, and signed anew, with each part.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingEvidence")]
pub struct Evidence {
    /// `Ed25519`.
    pub algorithm: String,
    /// Id of the key that signed (as `recordingkeys` lists it).
    pub key_id: String,
    /// The parts, in order.
    pub parts: Vec<PartDigest>,
    /// Head of the hash chain after the last part (hex SHA-256).
    pub chain: String,
    /// The session ended and the recording was completed: no part may follow.
    #[serde(default)]
    pub complete: bool,
    /// The signature (base64url, no padding) over the statement and the recording's facts.
    pub signature: String,
}

/// How a recording verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingVerificationResult")]
pub enum Verification {
    /// Every part is present and unchanged, in order, and the signature holds (a recording
    /// still being written: every part written so far).
    Verified,
    /// What exists verifies, but the recording stops short: its recorder ended before
    /// completing it (a replica killed mid-session). Not evidence of tampering.
    Truncated,
    /// A part or the metadata was changed, removed, added or reordered after it was written,
    /// or the signature does not hold.
    Tampered,
    /// The recording carries no signature (recorded by an earlier version): nothing can be
    /// said.
    #[default]
    Unsigned,
}

impl Verification {
    /// As written in `status.verification.result`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verification::Verified => "Verified",
            Verification::Truncated => "Truncated",
            Verification::Tampered => "Tampered",
            Verification::Unsigned => "Unsigned",
        }
    }
}

/// `status.verification` of a recording: the verdict, the part it failed on, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingVerification")]
pub struct VerificationStatus {
    /// `Verified`, `Truncated`, `Tampered` or `Unsigned`.
    pub result: Verification,
    /// The part it failed on (`Tampered`), or the first part not vouched for (`Truncated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<u32>,
    /// What was found, in words.
    pub message: String,
    /// The key whose signature held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

/// One public key that recordings are signed with (`recordingkeys`): what a verifier needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingKey")]
pub struct RecordingKey {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `RecordingKey`.
    pub kind: String,
    /// `metadata.name` is the key id.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `Ed25519`.
    pub algorithm: String,
    /// The raw public key, base64 (standard, padded).
    pub public_key: String,
    /// The key signs new recordings (the others only verify older ones).
    pub active: bool,
}

impl RecordingKey {
    /// The object of the key `id` (`public_key` raw bytes, base64).
    pub fn new(id: &str, public_key: String, active: bool) -> RecordingKey {
        RecordingKey {
            api_version: API_VERSION.to_owned(),
            kind: KIND_RECORDING_KEY.to_owned(),
            metadata: ObjectMeta {
                name: Some(id.to_owned()),
                ..Default::default()
            },
            algorithm: ED25519.to_owned(),
            public_key,
            active,
        }
    }
}

/// The public keys recordings are signed and verified with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingKeyList")]
pub struct RecordingKeyList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `RecordingKeyList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The keys.
    pub items: Vec<RecordingKey>,
}

impl RecordingKeyList {
    /// A list of `items`.
    pub fn new(items: Vec<RecordingKey>) -> RecordingKeyList {
        RecordingKeyList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_RECORDING_KEY_LIST.to_owned(),
            metadata: ListMeta::default(),
            items,
        }
    }
}

/// A recording's metadata as the store holds it and its signed statement covers
/// (`GET …/pods/POD/recordings/ID/evidence`): with the public keys (`recordingkeys`) and the
/// recording's bytes, what a third party needs to verify it without trusting the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingEvidence")]
pub struct RecordingEvidence {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `DebugRecordingEvidence`.
    pub kind: String,
    /// `name` is the recording's id, `namespace` its pod's namespace.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The recording's facts and its signed statement (`evidence`), field for field as stored;
    /// the record key's MAC, meaningful only to the server, is left out.
    #[schemars(with = "serde_json::Value")]
    pub record: crate::RecordingRecord,
}

impl RecordingEvidence {
    /// The evidence of `record` (its MAC left out).
    pub fn new(mut record: crate::RecordingRecord) -> RecordingEvidence {
        record.mac = None;
        RecordingEvidence {
            api_version: API_VERSION.to_owned(),
            kind: KIND_RECORDING_EVIDENCE.to_owned(),
            metadata: ObjectMeta {
                name: Some(record.id.clone()),
                namespace: Some(record.namespace.clone()),
                ..Default::default()
            },
            record,
        }
    }
}
