//! Session recordings: `Recording`, the API object `GET …/pods/POD/recordings`,
//! `…/namespaces/NS/debugrecordings` and `…/debugrecordings` list, and `RecordingRecord`, what
//! the recording store keeps for each (the `ID.json` object beside the recording).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::API_VERSION;

/// Kind of one recording.
pub const KIND_RECORDING: &str = "DebugRecording";
/// Kind of a list of recordings.
pub const KIND_RECORDING_LIST: &str = "DebugRecordingList";
/// Kind of the list of a recording's commands.
pub const KIND_RECORDING_COMMAND_LIST: &str = "DebugRecordingCommandList";

/// RecordingRecord is what the store keeps for one recorded attach session (its `ID.json`):
/// written when the session starts, renewed while it runs, completed when it ends. The API
/// shows it as a [`Recording`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordingRecord {
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
    /// When the recorder last wrote to the store (RFC 3339), while the session runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewed: Option<String>,
    /// How often the recorder writes (seconds; `--recording-part-interval`): a recording with
    /// no end not renewed for six of these lost its recorder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_interval_seconds: Option<u64>,
    /// Size of the recording in bytes (as far as written, while it runs).
    pub bytes: u64,
    /// The process's exit code, when the session ended with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The recording stops before the session did.
    #[serde(default)]
    pub truncated: bool,
    /// Lines the user submitted, derived from the recorded input (absent when input was not
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_count: Option<u32>,
    /// The reason, ticket, debug request and approvers the debug container carries.
    #[serde(
        default,
        skip_serializing_if = "crate::request::Justification::is_empty"
    )]
    pub justification: crate::request::Justification,
    /// The record key's MAC over the record (its location and every other field), as the
    /// server wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The SHA-256 of each part, the hash chain over them and the server's Ed25519 signature
    /// over them and the facts above; absent in recordings of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::evidence::Evidence>,
    /// Whether `mac` verified when the record was read (never stored): a record that does not
    /// verify was not written by poddebug, or was changed since.
    #[serde(skip)]
    pub verified: bool,
}

/// Recording is one recorded attach session. `metadata.name` is its id, `metadata.namespace`
/// the pod's namespace, `metadata.creationTimestamp` the session's start; the labels
/// `poddebug.dev/pod`, `poddebug.dev/container` and `poddebug.dev/user` select by them. The
/// recording itself (asciicast v2) is at `…/namespaces/NS/pods/POD/recordings/NAME`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecording")]
pub struct Recording {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `Recording`.
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What was recorded.
    pub spec: RecordingSpec,
    /// How far it got.
    pub status: RecordingStatus,
}

/// RecordingSpec says what session a recording is of.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingSpec")]
pub struct RecordingSpec {
    /// The pod.
    pub pod: String,
    /// The debug container attached to.
    pub container: String,
    /// The user who attached.
    pub user: String,
    /// The stream protocol (`websocket/v5.channel.k8s.io`, `spdy/v4.channel.k8s.io`).
    pub protocol: String,
    /// The reason, ticket, debug request and approvers the debug container carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<crate::request::Justification>,
}

/// RecordingStatus is how far a recording got.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingStatus")]
pub struct RecordingStatus {
    /// When the session started (RFC 3339).
    pub start: String,
    /// When the session ended (RFC 3339); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Size of the recording in bytes (as far as written, while it runs).
    pub bytes: u64,
    /// The process's exit code, when the session ended with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The recording stops before the session did (size limit, slow store, undecodable
    /// stream, or the replica recording it stopped mid-session).
    #[serde(default)]
    pub truncated: bool,
    /// The recording's metadata carries a valid MAC of the server's record key: poddebug wrote
    /// what this object says. False when someone else wrote or changed the metadata in the
    /// store (or an earlier version wrote it, before metadata was signed): then nothing here is
    /// vouched for.
    #[serde(default)]
    pub verified: bool,
    /// How many lines the user submitted, derived from the recorded input (present when input
    /// was recorded, `--record-input`); they are at `…/pods/POD/recordings/NAME/commands`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_count: Option<u32>,
    /// Session time of the recording's last event, in whole seconds rounded up (from the time
    /// table of its signed statement: absent for recordings written before it had one): what
    /// a player's scrubber spans, known without reading the recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u64>,
    /// How the recording verified against the hash chain and signature of its metadata
    /// (every part read and hashed): set on `GET` of one recording only; lists leave it out,
    /// so that listing never reads a recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::evidence::VerificationStatus>,
    /// Where the text of a search (`?search=TEXT`) is in the recording's commands and output:
    /// the first lines that hold it, in session time order. Set in the answer to a search
    /// only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<RecordingMatch>>,
    /// How many lines of the recording's index hold the text of a search in all (`matches`
    /// shows the first of them). Set in the answer to a search only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_count: Option<u64>,
}

/// RecordingMatch is a line of a recording that holds the text searched for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingMatch")]
pub struct RecordingMatch {
    /// Session time the line began at (seconds from the start).
    pub offset: f64,
    /// `Command`: a line the user submitted, derived from the recorded input; `Output`: a line
    /// the session printed, escape sequences left out.
    pub source: String,
    /// The line (at most 200 characters of it, around the match).
    pub text: String,
}

/// RecordingList is a list of recordings, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingList")]
pub struct RecordingList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `RecordingList`.
    pub kind: String,
    /// Standard list metadata (`continue` when `limit` cut the list).
    #[serde(default)]
    pub metadata: ListMeta,
    /// The recordings.
    pub items: Vec<Recording>,
}

impl RecordingRecord {
    /// Session time of the last event, in microseconds, from the time table of the signed
    /// statement (`None` without one).
    pub fn duration_micros(&self) -> Option<u64> {
        self.evidence
            .as_ref()?
            .parts
            .iter()
            .filter_map(|p| p.end_micros)
            .max()
    }

    /// The API object, with `labels` (label-safe values of pod, container and user, made by the
    /// caller: a user name need not be a valid label value).
    pub fn to_object(&self, labels: BTreeMap<String, String>) -> Recording {
        Recording {
            api_version: API_VERSION.to_owned(),
            kind: KIND_RECORDING.to_owned(),
            metadata: ObjectMeta {
                name: Some(self.id.clone()),
                namespace: Some(self.namespace.clone()),
                creation_timestamp: self.start.parse().ok().map(Time),
                labels: Some(labels),
                ..Default::default()
            },
            spec: RecordingSpec {
                pod: self.pod.clone(),
                container: self.container.clone(),
                user: self.user.clone(),
                protocol: self.protocol.clone(),
                justification: Some(self.justification.clone()).filter(|j| !j.is_empty()),
            },
            status: RecordingStatus {
                start: self.start.clone(),
                end: self.end.clone(),
                bytes: self.bytes,
                exit_code: self.exit_code,
                truncated: self.truncated,
                verified: self.verified,
                command_count: self.command_count,
                duration_seconds: self.duration_micros().map(|us| us.div_ceil(1_000_000)),
                verification: None,
                matches: None,
                match_count: None,
            },
        }
    }
}

impl RecordingList {
    /// A list of `items`.
    pub fn new(items: Vec<Recording>, metadata: ListMeta) -> RecordingList {
        RecordingList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_RECORDING_LIST.to_owned(),
            metadata,
            items,
        }
    }
}

/// RecordingCommand is one line the user submitted, derived from the recorded input as the
/// terminal's line editing left it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingCommand")]
pub struct RecordingCommand {
    /// Session time when it was submitted (seconds from the start).
    pub offset: f64,
    /// The line as the terminal's line editing left it. With `recalled`, only what was typed
    /// after the recall: the recalled text is the shell's, which the input does not show.
    pub line: String,
    /// The line was recalled from the shell's history (arrow keys, Ctrl-R, ...) before it was
    /// submitted: its start is not in the input.
    pub recalled: bool,
}

/// RecordingCommandList is the commands of one recording
/// (`GET …/pods/POD/recordings/ID/commands`), in the order they were submitted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRecordingCommandList")]
pub struct RecordingCommandList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `RecordingCommandList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// Commands submitted past the bound on what one recording keeps (the first ones are
    /// kept).
    #[serde(default)]
    pub dropped: u64,
    /// The commands carry a valid MAC of the server's record key: poddebug wrote them. False
    /// when someone else wrote or changed them in the store: then they are not vouched for.
    #[serde(default)]
    pub verified: bool,
    /// The commands, in the order they were submitted.
    pub items: Vec<RecordingCommand>,
}

impl RecordingCommandList {
    /// A list of `items`.
    pub fn new(items: Vec<RecordingCommand>, dropped: u64, verified: bool) -> RecordingCommandList {
        RecordingCommandList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_RECORDING_COMMAND_LIST.to_owned(),
            metadata: ListMeta::default(),
            dropped,
            verified,
            items,
        }
    }
}
