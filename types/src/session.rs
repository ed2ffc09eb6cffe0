//! Live debug sessions: `DebugSession`, one attach stream relayed by poddebug, as
//! `GET …/pods/POD/sessions`, `…/namespaces/NS/debugsessions` and `…/debugsessions` list them.
//!
//! Every replica answers for every session: the replica relaying a stream keeps a record of it
//! in the cluster (a `coordination.k8s.io/v1` Lease in the server's namespace, renewed while
//! the stream lives), and the objects here are made from those records.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::API_VERSION;

/// Kind of a session.
pub const KIND_DEBUG_SESSION: &str = "DebugSession";
/// Kind of a list of sessions.
pub const KIND_DEBUG_SESSION_LIST: &str = "DebugSessionList";

/// How a user takes part in a session.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    /// The user who created the debug container, attached to it.
    #[default]
    Owner,
    /// Another user with `join` on `pods/debug`: sees the output and may type.
    Peer,
    /// Another user with `observe` on `pods/debug`: sees the output, never types (`stdin=false`).
    Observer,
    /// A user with `moderate` on `pods/sessions`: sees everything, may terminate; a moderated
    /// session takes its owner's input only while one is attached.
    Moderator,
}

impl SessionMode {
    /// The mode as the API and the `mode` query parameter of attach spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionMode::Owner => "owner",
            SessionMode::Peer => "peer",
            SessionMode::Observer => "observer",
            SessionMode::Moderator => "moderator",
        }
    }

    /// Whether a caller in this mode may send input: the owner and peers; observers and
    /// moderators never do.
    pub fn may_type(self) -> bool {
        matches!(self, SessionMode::Owner | SessionMode::Peer)
    }

    /// The mode a client asks for with `mode=` (the owner's mode is not asked for).
    pub fn parse_requested(s: &str) -> Option<SessionMode> {
        match s {
            "peer" => Some(SessionMode::Peer),
            "observer" => Some(SessionMode::Observer),
            "moderator" => Some(SessionMode::Moderator),
            _ => None,
        }
    }
}

/// One user attached to the same debug container as a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Participant {
    /// The user.
    pub user: String,
    /// How the user takes part.
    pub mode: SessionMode,
    /// When the user's stream was opened.
    pub joined_at: Time,
    /// The id of the user's own session (stream).
    pub session: String,
}

/// What a session is attached to, and who attached how.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebugSessionSpec {
    /// The pod.
    pub pod: String,
    /// The debug container, as the client named it.
    pub container: String,
    /// The user who opened the stream.
    pub user: String,
    /// The user's groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// How the user takes part.
    pub mode: SessionMode,
    /// The stream protocol (`websocket/v5.channel.k8s.io`, `spdy/v4.channel.k8s.io`).
    pub protocol: String,
    /// Whether the stream has a terminal.
    #[serde(default)]
    pub tty: bool,
    /// Whether the stream sends input.
    #[serde(default)]
    pub stdin: bool,
    /// The reason, ticket, debug request and approvers of the debug container attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<crate::request::Justification>,
}

/// The observed state of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebugSessionStatus {
    /// The replica of poddebug relaying the stream.
    pub replica: String,
    /// Everyone attached to the same debug container right now (each with a session of their
    /// own), the session's own user first.
    #[serde(default)]
    pub participants: Vec<Participant>,
    /// The recording of the stream, when the server records sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_id: Option<String>,
    /// The debug container's profile is one of the server's `--moderated-profiles`: its owner's
    /// input is withheld while no moderator is attached.
    #[serde(default)]
    pub moderated: bool,
    /// Moderated, and no moderator is attached: the owner's input is withheld.
    #[serde(default)]
    pub waiting_for_moderator: bool,
    /// When the relaying replica last renewed the session's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<Time>,
    /// Who asked to terminate the session, when someone did (the stream ends within seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated_by: Option<String>,
}

/// DebugSession is one live attach stream relayed by poddebug. `metadata.name` is the session
/// id, `metadata.namespace` the pod's namespace, `metadata.creationTimestamp` when the stream
/// was opened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugSession")]
pub struct DebugSession {
    /// `poddebug.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `DebugSession`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the session is attached to, and who attached how.
    #[serde(default)]
    pub spec: DebugSessionSpec,
    /// The observed state of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DebugSessionStatus>,
}

/// DebugSessionList is a list of live sessions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugSessionList")]
pub struct DebugSessionList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `DebugSessionList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The sessions.
    pub items: Vec<DebugSession>,
}

impl DebugSessionList {
    /// A list with its `apiVersion` and `kind` set.
    pub fn new(items: Vec<DebugSession>, metadata: ListMeta) -> Self {
        DebugSessionList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_DEBUG_SESSION_LIST.to_owned(),
            metadata,
            items,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_lower_case_and_only_three_may_be_asked_for() {
        assert_eq!(
            serde_json::to_value(SessionMode::Moderator).unwrap(),
            "moderator"
        );
        for m in ["peer", "observer", "moderator"] {
            assert_eq!(SessionMode::parse_requested(m).unwrap().as_str(), m);
        }
        assert_eq!(SessionMode::parse_requested("owner"), None);
        assert_eq!(SessionMode::parse_requested("admin"), None);
    }
}
