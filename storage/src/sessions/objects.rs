//! Sessions as the API shows them: `DebugSession` objects with their participants, and the
//! label and field selectors of lists and watches.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use poddebug_types::{
    API_VERSION, DebugSession, DebugSessionSpec, DebugSessionStatus, GROUP, KIND_DEBUG_SESSION,
    Participant,
};
use std::collections::BTreeMap;

use super::label_value;
use super::lease::{LiveSession, SessionRecord};

/// The labels of a session's object: `poddebug.dev/{pod,container,user,mode}`.
pub fn session_labels(r: &SessionRecord) -> BTreeMap<String, String> {
    BTreeMap::from([
        (format!("{GROUP}/pod"), label_value(&r.pod)),
        (format!("{GROUP}/container"), label_value(&r.container)),
        (format!("{GROUP}/user"), label_value(&r.user)),
        (format!("{GROUP}/mode"), r.mode.as_str().to_owned()),
    ])
}

/// Label and field selectors of a list or watch of sessions (`labelSelector`,
/// `fieldSelector`), with kube-apiserver's grammar and errors. Fields: `metadata.name`,
/// `metadata.namespace`, `spec.pod`, `spec.container`, `spec.user`, `spec.mode`,
/// `status.replica`.
#[derive(Clone, Debug, Default)]
pub struct SessionSelector {
    labels: crate::selector::LabelSelector,
    fields: Vec<(String, String, bool)>,
}

const SESSION_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.pod",
    "spec.container",
    "spec.user",
    "spec.mode",
    "status.replica",
];

fn session_field(r: &SessionRecord, field: &str) -> Option<String> {
    Some(match field {
        "metadata.name" => r.id.clone(),
        "metadata.namespace" => r.namespace.clone(),
        "spec.pod" => r.pod.clone(),
        "spec.container" => r.container.clone(),
        "spec.user" => r.user.clone(),
        "spec.mode" => r.mode.as_str().to_owned(),
        "status.replica" => r.replica.clone(),
        _ => return None,
    })
}

impl SessionSelector {
    /// Parse both selectors (empty: everything); malformed or an unsupported field is a 400.
    pub fn parse(labels: &str, fields: &str) -> Result<SessionSelector, poddebug_types::ApiError> {
        let mut terms = Vec::new();
        for term in fields.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, true)
            } else {
                return Err(poddebug_types::ApiError::BadRequest(format!(
                    "invalid selector: '{fields}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !SESSION_FIELDS.contains(&field) {
                return Err(poddebug_types::ApiError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), value.trim().to_owned(), equal));
        }
        Ok(SessionSelector {
            labels: crate::selector::LabelSelector::parse(labels)?,
            fields: terms,
        })
    }

    /// Whether session `s` is selected.
    pub fn matches(&self, s: &LiveSession) -> bool {
        let r = &s.record;
        self.fields.iter().all(|(field, want, equal)| {
            (session_field(r, field).as_deref() == Some(want.as_str())) == *equal
        }) && self.labels.matches(Some(&session_labels(r)))
    }
}

/// The API object of `session`, with its participants among `peers` (the live sessions of its
/// debug container, as [`super::SessionStore::on_container`] gives them; others are skipped):
/// its own user first, then by when they joined.
pub fn object_of(session: &LiveSession, peers: &[Arc<LiveSession>]) -> DebugSession {
    let r = &session.record;
    let started: Option<jiff::Timestamp> = r.started.parse().ok();
    let mut peers: Vec<&LiveSession> = peers
        .iter()
        .map(|o| &**o)
        .filter(|o| o.same_container(session) && o.record.id != r.id)
        .collect();
    peers.sort_by(|a, b| a.record.started.cmp(&b.record.started));
    let participant = |s: &LiveSession| Participant {
        user: s.record.user.clone(),
        mode: s.record.mode,
        joined_at: Time(
            s.record
                .started
                .parse()
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        ),
        session: s.record.id.clone(),
    };
    let participants: Vec<Participant> = std::iter::once(participant(session))
        .chain(peers.iter().map(|s| participant(s)))
        .collect();
    let moderator_present = super::second_pair_of_eyes(r, peers.iter().map(|s| &s.record));
    let labels = session_labels(r);
    DebugSession {
        api_version: API_VERSION.to_owned(),
        kind: KIND_DEBUG_SESSION.to_owned(),
        metadata: ObjectMeta {
            name: Some(r.id.clone()),
            namespace: Some(r.namespace.clone()),
            creation_timestamp: started.map(Time),
            resource_version: Some(session.resource_version.to_string()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: DebugSessionSpec {
            pod: r.pod.clone(),
            container: r.container.clone(),
            user: r.user.clone(),
            groups: r.groups.clone(),
            mode: r.mode,
            protocol: r.protocol.clone(),
            tty: r.tty,
            stdin: r.stdin,
            justification: Some(r.justification.clone()).filter(|j| !j.is_empty()),
        },
        status: Some(DebugSessionStatus {
            replica: r.replica.clone(),
            participants,
            recording_id: r.recording_id.clone(),
            moderated: r.moderated,
            waiting_for_moderator: r.moderated && !moderator_present,
            renew_time: Some(Time(session.renewed)),
            terminated_by: session.terminate.as_ref().map(|t| t.by.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use poddebug_types::SessionMode;
    use std::time::Duration;

    fn record(id: &str, user: &str, mode: SessionMode, started: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            namespace: "shop".into(),
            pod: "web".into(),
            container: "dbg".into(),
            ec_name: "dbg".into(),
            user: user.into(),
            creator: None,
            groups: vec!["devs".into()],
            mode,
            protocol: "websocket/v5.channel.k8s.io".into(),
            tty: true,
            stdin: true,
            recording_id: None,
            moderated: true,
            replica: "r1".into(),
            started: started.into(),
            justification: Default::default(),
        }
    }

    fn live(r: SessionRecord) -> LiveSession {
        LiveSession {
            record: r,
            renewed: "2026-01-01T00:00:10Z".parse().unwrap(),
            lease_duration: Duration::from_secs(15),
            terminate: None,
            resource_version: 7,
            uid: String::new(),
        }
    }

    #[test]
    fn participants_are_the_sessions_on_the_same_container_and_a_moderator_opens_the_gate() {
        let owner = live(record(
            "s1",
            "alice",
            SessionMode::Owner,
            "2026-01-01T00:00:01Z",
        ));
        let observer = live(record(
            "s2",
            "bob",
            SessionMode::Observer,
            "2026-01-01T00:00:03Z",
        ));
        let mut elsewhere = live(record(
            "s3",
            "carol",
            SessionMode::Moderator,
            "2026-01-01T00:00:02Z",
        ));
        elsewhere.record.ec_name = "other".into();
        let all: Vec<Arc<LiveSession>> = [owner.clone(), observer.clone(), elsewhere.clone()]
            .into_iter()
            .map(Arc::new)
            .collect();
        let o = object_of(&owner, &all);
        assert_eq!(o.metadata.name.as_deref(), Some("s1"));
        assert_eq!(o.metadata.namespace.as_deref(), Some("shop"));
        let st = o.status.unwrap();
        let who: Vec<(&str, SessionMode)> = st
            .participants
            .iter()
            .map(|p| (p.user.as_str(), p.mode))
            .collect();
        assert_eq!(
            who,
            [
                ("alice", SessionMode::Owner),
                ("bob", SessionMode::Observer)
            ]
        );
        assert!(st.moderated && st.waiting_for_moderator);
        let mut moderator = elsewhere;
        moderator.record.ec_name = "dbg".into();
        let all: Vec<Arc<LiveSession>> = [owner.clone(), observer, moderator]
            .into_iter()
            .map(Arc::new)
            .collect();
        let st = object_of(&owner, &all).status.unwrap();
        assert_eq!(st.participants.len(), 3);
        assert!(!st.waiting_for_moderator);
    }
}
