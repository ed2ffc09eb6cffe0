//! The session recordings of a pod, as `GET …/pods/POD/recordings` lists them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Kind of the list of a pod's recordings.
pub const KIND_RECORDING_LIST: &str = "RecordingList";

/// Recording describes one recorded attach session; the recording itself (asciicast v2) is at
/// `…/pods/POD/recordings/ID`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.Recording")]
pub struct Recording {
    /// The recording's id: its start time (UTC) and 16 hex digits.
    pub id: String,
    /// Namespace of the pod.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The debug container attached to.
    pub container: String,
    /// The user who attached.
    pub user: String,
    /// The stream protocol (`websocket/v5.channel.k8s.io`, `spdy/v4.channel.k8s.io`).
    pub protocol: String,
    /// When the session started (RFC 3339).
    pub start: String,
    /// When the session ended (RFC 3339); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Size of the recording in bytes.
    pub bytes: u64,
    /// The process's exit code, when the session ended with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The recording stops before the session did (size limit, slow disk, undecodable stream).
    #[serde(default)]
    pub truncated: bool,
}

/// RecordingList is the list of a pod's session recordings, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RecordingList")]
pub struct RecordingList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `RecordingList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The recordings.
    pub items: Vec<Recording>,
}
